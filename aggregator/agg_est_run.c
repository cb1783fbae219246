/*
 * agg_est_run.c - reads complete windows from storage, runs the LR and
 * Kalman estimators on them (agg_est.h) and stores the estimates
 * (st_est.h); see agg_est_run.h for when a window is complete and how the
 * Kalman state survives a restart. Owns, per (server, method), the CE
 * index table, the Kalman filter and the buffer of windows of one tick.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_est.h"
#include "agg_est_run.h"
#include "rm_err.h"
#include "st_est.h"
#include "banned.h"

#define AGG_STOP_WALK (-1) /* a callback's "enough" (not an rm_err) */

/* One window as the estimators take it, CEs by index. */
struct agg_ewin {
	int64_t start, len;
	double cpu, cap;
	double rx[AGG_EST_MAX_CES], req[AGG_EST_MAX_CES], rt[AGG_EST_MAX_CES];
	unsigned char has[AGG_EST_MAX_CES]; /* the CE has inputs in this window */
};

struct agg_job {
	const struct agg_est_conf *conf;
	const char *method;       /* ST_EST_LR or ST_EST_KALMAN */
	int kalman;
	char ce[AGG_EST_MAX_CES][ST_NAME_MAX + 1];
	size_t nce;
	int warned;               /* about CEs beyond AGG_EST_MAX_CES */
	int primed;               /* last/have_last known, Kalman state rebuilt */
	int have_last;
	int64_t last;             /* start of the last window dealt with */
	struct agg_kalman k;
	/* the windows of one pass */
	struct agg_ewin *w;
	size_t nw, capw;
	int64_t replay_until;     /* while rebuilding: last window to replay */
};

struct agg_est_run {
	st_db *db;
	uint64_t horizon_ns;
	struct agg_job *jobs;
	size_t njobs;
	uint64_t solved, unsolved;
};

int agg_est_run_open(struct agg_est_run **out, const struct agg_config *cfg, st_db *db)
{
	struct agg_est_run *r;
	size_t i, n = 0;
	int rv;

	*out = NULL;
	if (!cfg || !db)
		return RM_EINVAL;
	if (!(r = calloc(1, sizeof(*r))))
		return RM_ENOMEM;
	r->db = db;
	r->horizon_ns = cfg->horizon_ns;
	if (cfg->nest && !(r->jobs = calloc(2 * cfg->nest, sizeof(*r->jobs)))) {
		free(r);
		return RM_ENOMEM;
	}
	for (i = 0; i < cfg->nest; i++) {
		const struct agg_est_conf *c = &cfg->est[i];

		if (c->methods & AGG_CONFIG_EST_LR) {
			r->jobs[n].conf = c;
			r->jobs[n++].method = ST_EST_LR;
		}
		if (c->methods & AGG_CONFIG_EST_KALMAN) {
			r->jobs[n].conf = c;
			r->jobs[n].method = ST_EST_KALMAN;
			r->jobs[n].kalman = 1;
			if ((rv = agg_kalman_init(&r->jobs[n].k, (double)c->kalman_q_ns, c->kalman_r)) != 0) {
				rm_log_error("invalid Kalman parameters for server '%s'", c->server);
				r->njobs = n;
				agg_est_run_close(r);
				return rv;
			}
			n++;
		}
	}
	r->njobs = n;
	*out = r;
	return RM_OK;
}

void agg_est_run_close(struct agg_est_run *r)
{
	size_t i;

	if (!r)
		return;
	for (i = 0; i < r->njobs; i++) {
		agg_kalman_release(&r->jobs[i].k);
		free(r->jobs[i].w);
	}
	free(r->jobs);
	free(r);
}

void agg_est_run_counts(const struct agg_est_run *r, uint64_t *solved, uint64_t *unsolved)
{
	*solved = r->solved;
	*unsolved = r->unsolved;
}

/* Index of CE name in the job's table, added if new; -1 if the table is full. */
static int agg_ce_index(struct agg_job *j, const char *name)
{
	size_t i;

	for (i = 0; i < j->nce; i++)
		if (strcmp(j->ce[i], name) == 0)
			return (int)i;
	if (j->nce == AGG_EST_MAX_CES) {
		if (!j->warned)
			rm_log_warn("server '%s': more than %d CEs; the estimators ignore '%s' and later ones",
				    j->conf->server, AGG_EST_MAX_CES, name);
		j->warned = 1;
		return -1;
	}
	snprintf(j->ce[j->nce], sizeof(j->ce[0]), "%s", name);
	return (int)j->nce++;
}

static void agg_ewin_fill(struct agg_job *j, struct agg_ewin *e, const struct st_est_window *w)
{
	size_t i;

	memset(e, 0, sizeof(*e));
	e->start = w->start_ns;
	e->len = w->len_ns;
	e->cpu = (double)w->cpu_ns;
	e->cap = (double)w->capacity_ns;
	for (i = 0; i < w->n; i++) {
		int k = agg_ce_index(j, w->ce[i].ce);

		if (k < 0)
			continue;
		e->rx[k] = (double)w->ce[i].rx;
		e->req[k] = (double)w->ce[i].requests;
		e->rt[k] = (double)w->ce[i].rt_ns;
		e->has[k] = 1;
	}
}

static struct agg_est_win agg_view(const struct agg_ewin *e)
{
	struct agg_est_win v = { e->rx, e->req, e->rt, e->cpu, e->cap, (double)e->len };

	return v;
}

/* Collects windows into j->w, up to cap (then stops the walk). */
struct agg_collect {
	struct agg_job *j;
	size_t cap;
};

static int agg_collect_cb(void *arg, const struct st_est_window *w)
{
	struct agg_collect *c = arg;
	struct agg_job *j = c->j;

	if (j->nw == c->cap)
		return AGG_STOP_WALK;
	if (j->nw == j->capw) {
		size_t ncap = j->capw ? j->capw * 2 : 64;
		struct agg_ewin *nw = realloc(j->w, ncap * sizeof(*nw));

		if (!nw)
			return RM_ENOMEM;
		j->w = nw;
		j->capw = ncap;
	}
	agg_ewin_fill(j, &j->w[j->nw++], w);
	return RM_OK;
}

/* Steps the filter over windows already estimated (after a restart). */
static int agg_replay_cb(void *arg, const struct st_est_window *w)
{
	struct agg_job *j = arg;
	struct agg_ewin e;
	struct agg_est_win v;
	double out[AGG_EST_MAX_CES];

	if (w->start_ns > j->replay_until)
		return AGG_STOP_WALK;
	agg_ewin_fill(j, &e, w);
	v = agg_view(&e);
	return agg_kalman_step(&j->k, &v, j->nce, out);
}

/* Reads where the job stopped; rebuilds the Kalman filter up to there. */
static int agg_prime(struct agg_est_run *r, struct agg_job *j)
{
	int rv;

	rv = st_est_last(r->db, j->conf->server, j->method, &j->last);
	if (rv != RM_OK && rv != RM_ENOENT)
		return rv;
	j->have_last = rv == RM_OK;
	if (j->kalman && j->have_last) {
		j->replay_until = j->last;
		rv = st_est_windows(r->db, j->conf->server, INT64_MIN, INT64_MAX, agg_replay_cb, j);
		if (rv != RM_OK && rv != AGG_STOP_WALK) {
			agg_kalman_release(&j->k);
			agg_kalman_init(&j->k, (double)j->conf->kalman_q_ns, j->conf->kalman_r);
			j->nce = 0;
			return rv;
		}
	}
	j->primed = 1;
	return RM_OK;
}

static uint64_t agg_to_ns(double v)
{
	if (!(v > 0))
		return 0;
	if (v >= 9.2e18)
		return (uint64_t)INT64_MAX;
	return (uint64_t)llround(v);
}

/* Stores the estimate of window e (solved or not) for the CEs with inputs. */
static int agg_store(struct agg_est_run *r, struct agg_job *j, const struct agg_ewin *e, int solved,
		     const double *est)
{
	const char *names[AGG_EST_MAX_CES];
	uint64_t vals[AGG_EST_MAX_CES];
	size_t i, n = 0;

	for (i = 0; solved && i < j->nce; i++)
		if (e->has[i]) {
			names[n] = j->ce[i];
			vals[n++] = agg_to_ns(est[i]);
		}
	if (solved)
		r->solved++;
	else
		r->unsolved++;
	return st_est_put(r->db, j->conf->server, j->method, e->start, e->len, solved, names, vals, n);
}

/*
 * One batch of new windows of job j up to limit_end (window ends). Sets
 * *more when the batch was full (more windows may be waiting).
 */
static int agg_job_pass(struct agg_est_run *r, struct agg_job *j, int64_t limit_end, int *more)
{
	struct agg_collect c = { j, 0 };
	int64_t since = j->have_last ? j->last + 1 : INT64_MIN, from = since;
	size_t first = 0, i, lrw = j->conf->lr_windows;
	double out[AGG_EST_MAX_CES];
	struct agg_est_win *v;
	int rv;

	*more = 0;
	j->nw = 0;
	if (!j->kalman && j->have_last) {
		/* the lr_windows - 1 windows before the first new one */
		rv = st_est_back(r->db, j->conf->server, since, (unsigned)(lrw - 1), &from);
		if (rv == RM_ENOENT)
			from = INT64_MIN;
		else if (rv != RM_OK)
			return rv;
	}
	c.cap = AGG_EST_RUN_BATCH + (j->kalman ? 0 : lrw - 1);
	rv = st_est_windows(r->db, j->conf->server, from, limit_end, agg_collect_cb, &c);
	if (rv == AGG_STOP_WALK)
		*more = 1;
	else if (rv != RM_OK)
		return rv;
	while (first < j->nw && j->w[first].start < since)
		first++;
	if (first == j->nw)
		return RM_OK;
	if (!(v = malloc(j->nw * sizeof(*v))))
		return RM_ENOMEM;
	for (i = 0; i < j->nw; i++)
		v[i] = agg_view(&j->w[i]);
	if ((rv = st_begin(r->db)) != 0) {
		free(v);
		return rv;
	}
	for (i = first; i < j->nw; i++) {
		size_t lo = i + 1 >= lrw ? i + 1 - lrw : 0;
		int solved = 1;

		if (j->kalman)
			rv = agg_kalman_step(&j->k, &v[i], j->nce, out);
		else
			rv = agg_est_lr(&v[lo], i - lo + 1, j->nce, out, &solved);
		if (rv != RM_OK) {
			rm_log_error("server '%s': %s estimate of window %lld failed: %s", j->conf->server, j->method,
				     (long long)j->w[i].start, rm_strerror(rv));
			goto fail;
		}
		if ((rv = agg_store(r, j, &j->w[i], solved, out)) != 0)
			goto fail;
	}
	free(v);
	v = NULL;
	if ((rv = st_commit(r->db)) != 0)
		goto fail_committed;
	j->last = j->w[j->nw - 1].start;
	j->have_last = 1;
	return RM_OK;
fail:
	free(v);
	st_rollback(r->db);
fail_committed:
	/* storage and the filter may disagree now: rebuild from storage next time */
	if (j->kalman) {
		agg_kalman_release(&j->k);
		agg_kalman_init(&j->k, (double)j->conf->kalman_q_ns, j->conf->kalman_r);
		j->nce = 0;
	}
	j->primed = 0;
	return rv;
}

int agg_est_run_tick(struct agg_est_run *r, int final)
{
	size_t i;
	int rv, first_err = RM_OK;

	for (i = 0; i < r->njobs; i++) {
		struct agg_job *j = &r->jobs[i];
		int64_t ls, ll, limit;
		int more = 1;

		if (!j->primed && (rv = agg_prime(r, j)) != 0)
			goto next;
		rv = st_est_latest(r->db, j->conf->server, &ls, &ll);
		if (rv == RM_ENOENT)
			continue; /* nothing from that server yet */
		if (rv != RM_OK)
			goto next;
		if (final)
			limit = ls + ll;
		else if (ls < INT64_MIN + (int64_t)r->horizon_ns)
			continue;
		else
			limit = ls - (int64_t)r->horizon_ns;
		while (more && (rv = agg_job_pass(r, j, limit, &more)) == RM_OK && final)
			;
		if (rv == RM_OK)
			continue;
	next:
		if (first_err == RM_OK)
			first_err = rv;
	}
	return first_err;
}
