/*
 * agg_throttle.c - the throttle controller of agg_throttle.h: operator
 * commands checked, settled windows fed to the policy through a usage
 * source, decisions stored as commands, renewal, expiry, and the commands
 * handed to the transport with the matches of their CE's rule. Owns the
 * policy, the built commands of the last commands_for() call and the LR
 * source's scratch.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_est.h"
#include "agg_throttle.h"
#include "rm_err.h"
#include "rm_wire.h"
#include "st_throttle.h"
#include "banned.h"

#define AGG_THR_MAX_USE AGG_POLICY_MAX_CES
#define AGG_THR_MAX_DEC 64
#define AGG_THR_RATE_NS 10000000000ll  /* bytes per CPU ns over the last 10 s */

struct agg_thr_built {
	Rametr__ThrottleCommand c;
	Rametr__ThrottleMatch m[RM_WIRE_MAX_MATCH];
	Rametr__ThrottleMatch *pm[RM_WIRE_MAX_MATCH];
	uint8_t addr[RM_WIRE_MAX_MATCH][16];
	struct st_throttle row;
};

struct agg_throttle {
	const struct agg_config *cfg;
	st_db *db;
	struct agg_policy *pol;
	struct agg_usage_source src;
	struct agg_thr_built *built;
	Rametr__ThrottleCommand **pbuilt;
	size_t nbuilt;
	/* LR source scratch: CE names of the last estimate */
	char lr_names[AGG_EST_MAX_CES][ST_NAME_MAX + 1];
	struct agg_throttle_stats st;
};

/* --- usage sources --- */

static int agg_src_rametr(void *arg, st_db *db, const char *server, int64_t start, int64_t len,
			  struct agg_policy_obs *o, struct agg_policy_use *use, size_t max)
{
	struct agg_throttle *t = arg;
	struct st_query q = { start, start + 1, server, NULL, ST_R_CPU, 1 };
	struct st_row *rows = NULL;
	size_t n, i, k = 0;
	int rv;

	(void)len;
	if ((rv = st_query_usage(db, &q, &rows, &n)) != 0)
		return rv;
	for (i = 0; i < n && k < max && k < AGG_EST_MAX_CES; i++) {
		if (strcmp(rows[i].ce, ST_CE_UNACCOUNTABLE) == 0)
			continue;
		snprintf(t->lr_names[k], sizeof(t->lr_names[k]), "%s", rows[i].ce);
		use[k].ce = t->lr_names[k];
		use[k].cpu_ns = rows[i].value;
		k++;
	}
	st_rows_free(rows);
	o->use = use;
	o->nuse = k;
	return RM_OK;
}

/* LR of seed 000 (eq. 2): server CPU on per-CE inbound bytes over the last
 * AGG_THROTTLE_LR_WINDOWS windows up to this one. */
static int agg_src_lr(void *arg, st_db *db, const char *server, int64_t start, int64_t len,
		      struct agg_policy_obs *o, struct agg_policy_use *use, size_t max)
{
	struct agg_throttle *t = arg;
	int64_t since = start - (int64_t)(AGG_THROTTLE_LR_WINDOWS - 1) * len;
	struct st_query q = { since, start + 1, server, NULL, ST_R_NET_RX, 1 };
	struct st_row *rows = NULL, *cpu = NULL;
	size_t n, ncpu, i, j, nce = 0, nw = AGG_THROTTLE_LR_WINDOWS;
	double *rx = NULL, *req = NULL, *rt = NULL, out[AGG_EST_MAX_CES];
	struct agg_est_win *w = NULL;
	int rv, solved = 0;

	if ((rv = st_query_usage(db, &q, &rows, &n)) != 0)
		return rv;
	q.resource = ST_R_CPU;
	q.ce = ST_CE_UNACCOUNTABLE; /* one row per window with total and capacity */
	if ((rv = st_query_usage(db, &q, &cpu, &ncpu)) != 0) {
		st_rows_free(rows);
		return rv;
	}
	for (i = 0; i < n; i++) {
		if (strcmp(rows[i].ce, ST_CE_UNACCOUNTABLE) == 0)
			continue;
		for (j = 0; j < nce; j++)
			if (strcmp(t->lr_names[j], rows[i].ce) == 0)
				break;
		if (j == nce && nce < AGG_EST_MAX_CES && nce < max)
			snprintf(t->lr_names[nce++], sizeof(t->lr_names[0]), "%s", rows[i].ce);
	}
	rx = calloc(nw * (nce ? nce : 1), sizeof(*rx));
	req = calloc(nw * (nce ? nce : 1), sizeof(*req));
	rt = calloc(nw * (nce ? nce : 1), sizeof(*rt));
	w = calloc(nw, sizeof(*w));
	if (!rx || !req || !rt || !w) {
		rv = RM_ENOMEM;
		goto out;
	}
	for (i = 0; i < nw; i++) {
		w[i].rx = rx + i * nce;
		w[i].req = req + i * nce;
		w[i].rt = rt + i * nce;
		w[i].len_ns = (double)len;
	}
	for (i = 0; i < n; i++) {
		int64_t wi = (rows[i].win_start_ns - since) / len;

		if (rows[i].win_len_ns != len || wi < 0 || (size_t)wi >= nw)
			continue;
		for (j = 0; j < nce; j++)
			if (strcmp(t->lr_names[j], rows[i].ce) == 0)
				rx[(size_t)wi * nce + j] = (double)rows[i].value;
	}
	for (i = 0; i < ncpu; i++) {
		int64_t wi = (cpu[i].win_start_ns - since) / len;

		if (cpu[i].win_len_ns != len || wi < 0 || (size_t)wi >= nw)
			continue;
		w[wi].cpu_ns = (double)cpu[i].total;
		w[wi].cap_ns = (double)cpu[i].capacity;
	}
	if (nce == 0 || (rv = agg_est_lr(w, nw, nce, out, &solved)) != 0 || !solved) {
		rv = rv ? rv : RM_ENOENT;
		goto out;
	}
	for (j = 0; j < nce; j++) {
		use[j].ce = t->lr_names[j];
		use[j].cpu_ns = out[j] > 0 ? (uint64_t)out[j] : 0;
	}
	o->use = use;
	o->nuse = nce;
out:
	free(rx);
	free(req);
	free(rt);
	free(w);
	st_rows_free(rows);
	st_rows_free(cpu);
	return rv;
}

/* --- commands --- */

/* Marks every active command of (server, ce, resource) other than keep superseded. */
static int agg_thr_supersede(struct agg_throttle *t, const char *server, const char *ce,
			     const char *resource, uint64_t keep, int64_t now)
{
	struct st_throttle_query q = { "active", server, ce, 0, 0 };
	struct st_throttle *rows = NULL;
	size_t n, i;
	int rv;

	if ((rv = st_throttle_list(t->db, &q, &rows, &n)) != 0)
		return rv;
	for (i = 0; i < n && rv == RM_OK; i++)
		if (rows[i].id != keep && strcmp(rows[i].resource, resource) == 0)
			rv = st_throttle_set_state(t->db, rows[i].id, "superseded", NULL, now);
	free(rows);
	return rv;
}

/* Why a command cannot be sent as it is, in err; 0 if it can. */
static int agg_thr_check(struct agg_throttle *t, const struct st_throttle *c, int64_t now, char *err,
			 size_t errlen)
{
	struct st_throttle_query q = { "active", c->server, c->ce, 0, 0 };
	struct st_throttle *rows = NULL;
	struct st_node_rec node;
	const struct agg_rule *r;
	size_t n, i;
	int ri, rv;

	if ((ri = agg_config_find_ce(t->cfg, c->ce)) < 0) {
		snprintf(err, errlen, "unknown CE '%s' (no [ce %s] rule in the aggregator's configuration)",
			 c->ce, c->ce);
		return RM_ENOENT;
	}
	r = &t->cfg->rules[ri];
	if (c->cap_permille && r->nclients == 0 && r->ndomains) {
		snprintf(err, errlen, "CE '%s' is defined by Xen domains only: no socket rule a collector can match",
			 c->ce);
		return RM_ENOTSUP;
	}
	if (c->cap_permille && r->nclients > RM_WIRE_MAX_MATCH) {
		snprintf(err, errlen, "CE '%s' has %zu client rules (a command carries at most %d)", c->ce,
			 r->nclients, RM_WIRE_MAX_MATCH);
		return RM_ENOTSUP;
	}
	rv = st_node_get(t->db, c->server, &node);
	if (rv == RM_ENOENT) {
		snprintf(err, errlen, "unknown server '%s' (no collector of that name has said hello)",
			 c->server);
		return RM_ENOENT;
	}
	if (rv != RM_OK)
		return rv;
	if (strcmp(c->resource, "cpu") != 0) {
		snprintf(err, errlen, "resource '%s' cannot be throttled (only cpu)", c->resource);
		return RM_ENOTSUP;
	}
	if (c->expires_ns <= now) {
		snprintf(err, errlen, "expired before it could be sent (%.1f s ago)",
			 (double)(now - c->expires_ns) / 1e9);
		return RM_ETIMEDOUT;
	}
	if ((rv = st_throttle_list(t->db, &q, &rows, &n)) != 0)
		return rv;
	for (i = 0; i < n; i++)
		if (rows[i].id != c->id && strcmp(rows[i].resource, c->resource) == 0 &&
		    rows[i].cap_permille == c->cap_permille && rows[i].expires_ns > now) {
			snprintf(err, errlen, "duplicate of active command %" PRIu64 " (%s, cap %u permille)",
				 rows[i].id, rows[i].state, rows[i].cap_permille);
			free(rows);
			return RM_EEXIST;
		}
	free(rows);
	return RM_OK;
}

static int agg_thr_requested(struct agg_throttle *t, int64_t now)
{
	struct st_throttle_query q = { "requested", NULL, NULL, 0, 0 };
	struct st_throttle *rows = NULL;
	char err[ST_THR_TEXT_MAX + 1];
	size_t n, i;
	int rv;

	if ((rv = st_throttle_list(t->db, &q, &rows, &n)) != 0)
		return rv;
	for (i = 0; i < n && rv == RM_OK; i++) {
		err[0] = '\0';
		rv = agg_thr_check(t, &rows[i], now, err, sizeof(err));
		if (err[0]) {
			rm_log_warn("refused throttle command %" PRIu64 " from %s: %s", rows[i].id,
				    rows[i].who, err);
			t->st.refused++;
			rv = st_throttle_set_state(t->db, rows[i].id, "refused", err, now);
			continue;
		}
		if (rv != RM_OK)
			break;
		if ((rv = st_throttle_set_state(t->db, rows[i].id, "pending", NULL, now)) == 0)
			rv = agg_thr_supersede(t, rows[i].server, rows[i].ce, rows[i].resource, rows[i].id, now);
		t->st.accepted++;
		rm_log_info("throttle command %" PRIu64 " from %s accepted: %s on %s cap %u permille",
			    rows[i].id, rows[i].who, rows[i].ce, rows[i].server, rows[i].cap_permille);
	}
	free(rows);
	return rv;
}

static int agg_thr_store_decision(struct agg_throttle *t, const char *server, const struct agg_policy_decision *d,
				  int64_t now)
{
	struct st_throttle c;
	char err[ST_THR_TEXT_MAX + 1] = "";
	int rv;

	memset(&c, 0, sizeof(c));
	c.created_ns = now;
	c.expires_ns = now + (int64_t)t->cfg->throttle.lease_ns;
	snprintf(c.who, sizeof(c.who), "policy:%s", d->rule == AGG_RULE_OVERLOAD ? "overload" : "cap");
	snprintf(c.server, sizeof(c.server), "%s", server);
	snprintf(c.ce, sizeof(c.ce), "%.63s", d->ce);
	snprintf(c.resource, sizeof(c.resource), "cpu");
	c.cap_permille = d->cap_permille;
	snprintf(c.why, sizeof(c.why), "%s", d->why);
	snprintf(c.figures, sizeof(c.figures),
		 "source=%s win=%" PRIu64 " share=%u util=%u smooth=%u prev_cap=%u", t->src.name, d->win,
		 d->share_permille, d->util_permille, d->smooth_permille, d->prev_permille);
	snprintf(c.state, sizeof(c.state), "pending");
	if (agg_thr_check(t, &c, now, err, sizeof(err)) != RM_OK && err[0] &&
	    strncmp(err, "duplicate", 9) != 0) {
		snprintf(c.state, sizeof(c.state), "refused");
		snprintf(c.error, sizeof(c.error), "%s", err);
	}
	if ((rv = st_throttle_add(t->db, &c)) != 0)
		return rv;
	t->st.decisions++;
	rm_log_info("throttle decision %" PRIu64 ": %s (%s)", c.id, c.why, c.figures);
	if (strcmp(c.state, "pending") != 0)
		return RM_OK;
	return agg_thr_supersede(t, server, c.ce, c.resource, c.id, now);
}

/* Feeds the settled windows of every server to the policy. */
static int agg_thr_windows(struct agg_throttle *t, int64_t now)
{
	int64_t settled = now - (int64_t)t->cfg->throttle.settle_ns;
	struct st_query q = { settled - AGG_THROTTLE_LOOKBACK_NS, settled, NULL, ST_CE_UNACCOUNTABLE,
			      ST_R_CPU, 1 };
	struct agg_policy_use use[AGG_THR_MAX_USE];
	struct agg_policy_decision dec[AGG_THR_MAX_DEC];
	struct st_row *rows = NULL;
	size_t n, i, nd, k;
	int rv, prv;

	/* one V row per (server, window): its total and capacity */
	if ((rv = st_query_usage(t->db, &q, &rows, &n)) != 0)
		return rv;
	for (i = 0; i < n && rv == RM_OK; i++) {
		struct st_row *r = &rows[i];
		struct agg_policy_obs o;

		if (r->win_len_ns <= 0 || r->win_start_ns + r->win_len_ns > settled || r->capacity == 0)
			continue;
		if (agg_policy_window_seen(t->pol, r->server, (uint64_t)(r->win_start_ns / r->win_len_ns)))
			continue;
		memset(&o, 0, sizeof(o));
		o.win = (uint64_t)(r->win_start_ns / r->win_len_ns);
		o.capacity_ns = r->capacity;
		o.busy_ns = r->total;
		o.len_ns = (uint64_t)r->win_len_ns;
		prv = t->src.window(t->src.arg, t->db, r->server, r->win_start_ns, r->win_len_ns, &o, use,
				    AGG_THR_MAX_USE);
		if (prv == RM_ENOENT) {
			o.use = NULL;
			o.nuse = 0;
		} else if (prv != RM_OK) {
			rv = prv;
			break;
		}
		t->st.windows++;
		prv = agg_policy_window(t->pol, r->server, &o, dec, AGG_THR_MAX_DEC, &nd);
		if (prv == RM_EFULL)
			rm_log_warn("more than %d throttle decisions for '%s' in one window; the rest wait",
				    AGG_THR_MAX_DEC, r->server);
		else if (prv != RM_OK)
			continue;
		for (k = 0; k < nd && rv == RM_OK; k++)
			rv = agg_thr_store_decision(t, r->server, &dec[k], now);
	}
	st_rows_free(rows);
	return rv;
}

static int agg_thr_renew_expire(struct agg_throttle *t, int64_t now)
{
	struct st_throttle_query q = { "active", NULL, NULL, 0, 0 };
	struct st_throttle *rows = NULL;
	size_t n, i;
	int rv;

	if ((rv = st_throttle_list(t->db, &q, &rows, &n)) != 0)
		return rv;
	for (i = 0; i < n && rv == RM_OK; i++) {
		struct st_throttle *c = &rows[i];

		if (c->expires_ns <= now) {
			rv = st_throttle_set_state(t->db, c->id, "expired", NULL, now);
			t->st.expired++;
			continue;
		}
		if (c->cap_permille && strncmp(c->who, "policy:", 7) == 0 &&
		    c->expires_ns - now < (int64_t)t->cfg->throttle.lease_ns / 2 &&
		    agg_policy_cap_of(t->pol, c->server, c->ce) == c->cap_permille) {
			struct st_throttle r = *c;
			char why[ST_THR_TEXT_MAX + 1];

			r.id = 0;
			r.created_ns = now;
			r.expires_ns = now + (int64_t)t->cfg->throttle.lease_ns;
			snprintf(why, sizeof(why), "renewal of %" PRIu64 ": %.200s", c->id, c->why);
			snprintf(r.why, sizeof(r.why), "%s", why);
			snprintf(r.state, sizeof(r.state), "pending");
			r.error[0] = '\0';
			if ((rv = st_throttle_add(t->db, &r)) == 0)
				rv = st_throttle_set_state(t->db, c->id, "superseded", NULL, now);
			t->st.renewed++;
		}
	}
	free(rows);
	return rv;
}

int agg_throttle_tick(struct agg_throttle *t, int64_t now)
{
	int rv;

	if (!t)
		return RM_EINVAL;
	if ((rv = agg_thr_requested(t, now)) != 0)
		return rv;
	if ((rv = agg_thr_windows(t, now)) != 0)
		return rv;
	return agg_thr_renew_expire(t, now);
}

/*
 * For admission throttling: the CE's inbound payload bytes per second at
 * which it would use its cap, from its bytes per CPU ns on this server over
 * the last AGG_THR_RATE_WINDOWS_NS; 0 if unknown (no CPU or bytes seen).
 */
static uint64_t agg_thr_rx_rate(struct agg_throttle *t, const struct st_throttle *c)
{
	struct st_query q = { c->created_ns - AGG_THR_RATE_NS, c->created_ns, c->server, c->ce, ST_R_CPU, 0 };
	struct st_row *rows = NULL;
	struct st_node_rec node;
	double cpu = 0, rx = 0;
	size_t n;

	if (st_node_get(t->db, c->server, &node) != RM_OK || node.ncpu == 0)
		return 0;
	if (st_query_usage(t->db, &q, &rows, &n) == RM_OK && n)
		cpu = (double)rows[0].value;
	st_rows_free(rows);
	rows = NULL;
	q.resource = ST_R_NET_RX;
	if (st_query_usage(t->db, &q, &rows, &n) == RM_OK && n)
		rx = (double)rows[0].value;
	st_rows_free(rows);
	if (cpu <= 0 || rx <= 0)
		return 0;
	return (uint64_t)(c->cap_permille / 1000.0 * node.ncpu * 1e9 * rx / cpu);
}

/*
 * The sockets rule r names (agg_rule.match), as wire matches into m[0..max)
 * (addresses kept in addr[], pointers in pm[]). Returns how many; if they
 * do not fit, SIZE_MAX, or with `first` the first max.
 */
static size_t agg_rule_matches(const struct agg_rule *r, Rametr__ThrottleMatch *m, uint8_t (*addr)[16],
			       Rametr__ThrottleMatch **pm, size_t max, int first)
{
	size_t k;

	if (r->nmatch > max && !first)
		return SIZE_MAX;
	for (k = 0; k < r->nmatch && k < max; k++) {
		const struct rm_match *x = &r->match[k];

		rametr__throttle_match__init(&m[k]);
		m[k].family = x->family;
		memcpy(addr[k], x->addr, 16);
		m[k].addr.data = addr[k];
		m[k].addr.len = x->family == 2 ? 4 : 16;
		m[k].prefix = x->prefix;
		m[k].cport_lo = x->cport_lo;
		m[k].cport_hi = x->cport_hi;
		m[k].sport_lo = x->sport_lo;
		m[k].sport_hi = x->sport_hi;
		pm[k] = &m[k];
	}
	return k;
}

static void agg_thr_build(struct agg_throttle *t, struct agg_thr_built *b)
{
	int ri = agg_config_find_ce(t->cfg, b->row.ce);
	size_t k = 0;

	rametr__throttle_command__init(&b->c);
	b->c.id = b->row.id;
	b->c.ce = b->row.ce;
	b->c.server = b->row.server;
	b->c.resource = b->row.resource;
	b->c.cap_permille = b->row.cap_permille;
	b->c.expires_unix_ns = b->row.expires_ns;
	b->c.reason = b->row.why;
	if (ri >= 0 && b->row.cap_permille) /* a rule of more clients than a command carries: the first */
		k = agg_rule_matches(&t->cfg->rules[ri], b->m, b->addr, b->pm, RM_WIRE_MAX_MATCH, 1);
	b->c.n_match = k;
	b->c.match = k ? b->pm : NULL;
	b->c.rx_rate_bps = b->row.cap_permille ? agg_thr_rx_rate(t, &b->row) : 0;
}

void agg_throttle_decided(const struct agg_config *cfg, struct agg_decided *d)
{
	size_t i, k;

	d->n = 0;
	if (cfg->nest)
		return; /* estimators count requests and response times part by part */
	for (i = 0; i < cfg->nrules; i++) {
		const struct agg_rule *r = &cfg->rules[i];

		k = agg_rule_matches(r, d->m + d->n, d->addr + d->n, d->pm + d->n, RM_WIRE_MAX_DECIDED - d->n, 0);
		if (k == SIZE_MAX) {
			d->n = 0;
			return;
		}
		d->n += k;
	}
}

int agg_throttle_commands_for(struct agg_throttle *t, const char *node, int64_t now,
			      Rametr__ThrottleCommand ***cmds, size_t *n)
{
	struct st_throttle_query q = { "active", node, NULL, 0, 0 };
	struct st_throttle *rows = NULL;
	size_t nr, i, k = 0;
	int rv;

	if (!t || !node || !cmds || !n)
		return RM_EINVAL;
	*cmds = NULL;
	*n = 0;
	free(t->built);
	free(t->pbuilt);
	t->built = NULL;
	t->pbuilt = NULL;
	t->nbuilt = 0;
	if ((rv = st_throttle_list(t->db, &q, &rows, &nr)) != 0)
		return rv;
	for (i = 0; i < nr; i++)
		if (strcmp(rows[i].state, "applied") != 0 && rows[i].expires_ns > now)
			k++;
	if (k == 0) {
		free(rows);
		return RM_OK;
	}
	t->built = calloc(k, sizeof(*t->built));
	t->pbuilt = calloc(k, sizeof(*t->pbuilt));
	if (!t->built || !t->pbuilt) {
		free(rows);
		return RM_ENOMEM;
	}
	for (i = 0; i < nr && rv == RM_OK; i++) {
		struct agg_thr_built *b = &t->built[t->nbuilt];

		if (strcmp(rows[i].state, "applied") == 0 || rows[i].expires_ns <= now)
			continue;
		b->row = rows[i];
		agg_thr_build(t, b);
		t->pbuilt[t->nbuilt++] = &b->c;
		if (strcmp(rows[i].state, "pending") == 0) {
			rv = st_throttle_set_state(t->db, rows[i].id, "sent", NULL, now);
			t->st.sent++;
		}
	}
	free(rows);
	*cmds = t->pbuilt;
	*n = t->nbuilt;
	return rv;
}

int agg_throttle_acked(struct agg_throttle *t, const char *node, const uint64_t *ids, size_t n, int64_t now)
{
	struct st_throttle c;
	size_t i;
	int rv = RM_OK;

	if (!t || !node || (n && !ids))
		return RM_EINVAL;
	for (i = 0; i < n && rv == RM_OK; i++) {
		rv = st_throttle_get(t->db, ids[i], &c);
		if (rv == RM_ENOENT || (rv == RM_OK && strcmp(c.server, node) != 0)) {
			t->st.bad_acks++;
			rm_log_warn("collector '%s' acknowledged unknown throttle command %" PRIu64, node, ids[i]);
			rv = RM_OK;
			continue;
		}
		if (rv == RM_OK && (strcmp(c.state, "sent") == 0 || strcmp(c.state, "pending") == 0)) {
			rv = st_throttle_set_state(t->db, c.id, "applied", NULL, now);
			t->st.applied++;
			/* the policy judges this CE again from the first window the cap governs */
			agg_policy_applied(t->pol, c.server, c.ce, c.cap_permille, now);
		}
	}
	return rv;
}

int agg_throttle_open(struct agg_throttle **out, const struct agg_config *cfg, st_db *db,
		      const struct agg_usage_source *src)
{
	const struct agg_throttle_cfg *tc;
	struct agg_policy_cfg pc;
	struct agg_policy_cap *caps = NULL;
	struct agg_throttle *t;
	size_t i;
	int rv;

	if (!out || !cfg || !db)
		return RM_EINVAL;
	*out = NULL;
	tc = &cfg->throttle;
	if (!(t = calloc(1, sizeof(*t))))
		return RM_ENOMEM;
	t->cfg = cfg;
	t->db = db;
	agg_policy_cfg_default(&pc);
	pc.overload = tc->overload;
	pc.threshold_permille = tc->threshold_permille;
	pc.alpha = tc->alpha;
	pc.md = tc->decrease;
	pc.ai_permille = tc->increase_permille;
	pc.min_cap_permille = tc->min_cap_permille;
	pc.release_windows = tc->release_windows;
	pc.min_share_permille = tc->min_share_permille;
	pc.wait_applied = 1; /* acked() tells the policy when a cap is in force */
	if (tc->ncaps && !(caps = calloc(tc->ncaps, sizeof(*caps)))) {
		free(t);
		return RM_ENOMEM;
	}
	for (i = 0; i < tc->ncaps; i++) {
		snprintf(caps[i].ce, sizeof(caps[i].ce), "%s", tc->caps[i].ce);
		snprintf(caps[i].server, sizeof(caps[i].server), "%s", tc->caps[i].server);
		caps[i].cap_permille = tc->caps[i].cap_permille;
	}
	pc.caps = caps;
	pc.ncaps = tc->ncaps;
	rv = agg_policy_open(&t->pol, &pc);
	free(caps);
	if (rv != RM_OK) {
		free(t);
		return rv;
	}
	if (src) {
		t->src = *src;
	} else if (strcmp(tc->source, "lr") == 0) {
		t->src.name = "lr";
		t->src.window = agg_src_lr;
		t->src.arg = t;
	} else {
		t->src.name = "rametr";
		t->src.window = agg_src_rametr;
		t->src.arg = t;
	}
	*out = t;
	return RM_OK;
}

void agg_throttle_close(struct agg_throttle *t)
{
	if (!t)
		return;
	agg_policy_close(t->pol);
	free(t->built);
	free(t->pbuilt);
	free(t);
}

void agg_throttle_get_stats(const struct agg_throttle *t, struct agg_throttle_stats *out)
{
	*out = t->st;
}
