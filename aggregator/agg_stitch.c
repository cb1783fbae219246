/*
 * agg_stitch.c - attributes segment parts to CEs through the pairing engine
 * (see agg_stitch.h): converts each wire part once into the engine's
 * struct rm_wpart, turns the engine's results into the accountant's charges
 * and split counts, keeps the held parts in storage through the accountant
 * (a part is stored as its canonical SegmentPart encoding, rm_part.h), and
 * rebuilds the engine from them at open and after a failed transaction.
 * Reads no clock: times are given. Owns the engine and the per-batch
 * scratch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_stitch.h"
#include "rm_part.h"
#include "rm_wire.h"
#include "rm_err.h"
#include "banned.h"

/* A part of the batch being applied, as the engine left it. */
struct agg_newpart {
	char *dist;   /* resolved and held: its distribution */
	int gone;     /* forgotten: nothing to store */
};

/* A held part read from storage. */
struct agg_loaded {
	uint64_t id;
	char node[ST_NAME_MAX + 1];
	uint64_t instance, window_ns;
	int64_t arrival;
	struct rm_wpart p;
	char *dist;
};

struct agg_stitch {
	const struct agg_config *cfg;
	struct agg_account *acct;
	struct agg_pair *pair;
	struct agg_stitch_opts o;
	int64_t resume_ns;          /* latest arrival of the parts restored at open */
	int broken;                 /* the engine must be rebuilt from storage */
	uint64_t first_new;         /* first engine id of the batch being applied */
	struct agg_newpart *np;
	size_t npcap;
	struct agg_loaded *ld;      /* agg_stitch_load scratch */
	size_t nld, ldcap;
};

static int agg_stop_requested(const struct agg_stitch *s)
{
	return s->o.stop && *s->o.stop;
}

static int agg_reserve(void **arr, size_t *cap, size_t need, size_t size)
{
	void *na;

	if (need <= *cap)
		return RM_OK;
	if (!(na = realloc(*arr, need * size)))
		return RM_ENOMEM;
	*arr = na;
	*cap = need;
	return RM_OK;
}

/* The canonical encoding of part k into buf (rm_part.h). 0 if it does not fit. */
static size_t agg_part_pack(const struct rm_wpart *k, uint8_t *buf, size_t len)
{
	size_t n = rm_part_size(k);

	if (n > len)
		return 0;
	rm_part_put(buf, k);
	return n;
}

/* ---- the engine's results ---- */

/*
 * The estimators' inputs (agg_est.h) from a resolved part: each CE's
 * inbound bytes, and, for a part that ends its segment with a send (a
 * completed request), one request and its response time (recv to send) for
 * the CE of the largest share (a split part is one request, not several).
 * Also, for a part of a managed runtime's thread (RM_PF_RUNTIME) on any
 * server, its requests answered and CPU per CE for the accountant's runtime
 * rule (agg_account_add_req).
 * Only for servers with an [estimate] section. One with `address` there
 * gets its inputs from the sends into it instead: per CE of the sending
 * part, its sent bytes and one request per closing send (response time
 * unknown: 0).
 */
static int agg_est_inputs(struct agg_stitch *s, const struct agg_pair_result *r)
{
	size_t i, best = SIZE_MAX;
	int end = (r->flags & RM_PF_END) && !(r->flags & RM_PF_DOMAIN);
	int self = agg_config_find_est(s->cfg, r->node), to = -1;
	int rv;

	for (i = 0; i < r->ndist; i++)
		if (r->dist[i].ce && (best == SIZE_MAX || r->dist[i].w > r->dist[best].w))
			best = i;
	/* a managed runtime's part: the requests it answered (a merged record's count) to the CE of the
	   largest share, its CPU to each CE: the runtime rule's weights */
	for (i = 0; (r->flags & RM_PF_RUNTIME) && i < r->ndist; i++)
		if (r->dist[i].ce &&
		    (rv = agg_account_add_req(s->acct, r->node, r->window_ns, r->win, r->dist[i].ce, r->pid,
					      (r->flags & RM_PF_GO) != 0,
					      i != best ? 0 : r->ends ? r->ends : (uint32_t)end, r->pieces[i].v[ST_R_CPU])) != 0)
			return rv;
	if (end && (r->out_family == RM_AF_INET || r->out_family == RM_AF_INET6) && r->out_raddr)
		to = agg_config_match_est_addr(s->cfg, r->out_family, (const uint8_t *)r->out_raddr,
					       r->out_family == RM_AF_INET ? 4 : 16, r->out_rport);
	if (to >= 0 && strcmp(s->cfg->est[to].server, r->node) != 0)
		for (i = 0; i < r->ndist; i++) {
			uint64_t req = i == best;

			if (!r->pieces[i].ce || (!req && !r->pieces[i].v[ST_R_NET_TX]))
				continue;
			if ((rv = agg_account_add_est(s->acct, s->cfg->est[to].server, r->window_ns, r->win,
						      r->pieces[i].ce, req, 0, r->pieces[i].v[ST_R_NET_TX])) != 0)
				return rv;
		}
	/* only servers with an [estimate] section, so that accounting alone
	   writes nothing more; and not those whose inputs come from the sends
	   into them */
	if (self < 0 || s->cfg->est[self].naddr)
		return RM_OK;
	for (i = 0; i < r->ndist; i++) {
		uint64_t req = end && i == best, rt = 0;

		if (!r->pieces[i].ce || (!req && !r->pieces[i].v[ST_R_NET_RX]))
			continue;
		if (req && r->end_ns > r->start_ns)
			rt = r->end_ns - r->start_ns;
		if ((rv = agg_account_add_est(s->acct, r->node, r->window_ns, r->win, r->pieces[i].ce, req, rt,
					      r->pieces[i].v[ST_R_NET_RX])) != 0)
			return rv;
	}
	return RM_OK;
}

static int agg_on_resolved(void *arg, const struct agg_pair_result *r)
{
	struct agg_stitch *s = arg;
	size_t i;
	int rv;

	for (i = 0; i < r->ndist; i++) {
		struct agg_charge c;
		int taken = 0;

		memset(&c, 0, sizeof(c));
		c.win = r->win;
		c.ce = r->pieces[i].ce;
		c.reason = r->pieces[i].reason;
		memcpy(c.v, r->pieces[i].v, sizeof(c.v));
		c.node = r->node;
		c.window_ns = r->window_ns;
		/* a Go part resolved after its window's label split: charged as the split */
		if ((r->flags & RM_PF_GO) && (rv = agg_account_add_go_late(s->acct, &c, &taken)) != 0)
			return rv;
		if (!taken && (rv = agg_account_add(s->acct, &c)) != 0)
			return rv;
	}
	/* a Go program's part: its CPU and where it went, by the socket it received on (the Go label rule) */
	for (i = 0; (r->flags & RM_PF_GO) && i < r->ndist; i++)
		if ((rv = agg_account_add_go(s->acct, r->node, r->window_ns, r->win, r->in_cookie, r->pieces[i].ce,
					     r->pieces[i].reason, r->pieces[i].v[ST_R_CPU])) != 0)
			return rv;
	if (r->split && (rv = agg_account_add_split(s->acct, r->node, r->window_ns, r->win)) != 0)
		return rv;
	if ((rv = agg_est_inputs(s, r)) != 0)
		return rv;
	if (r->held) {
		char *dist;

		if ((rv = agg_pair_dist_format(r->dist, r->ndist, &dist)) != 0)
			return rv;
		if (r->id >= s->first_new) {
			struct agg_newpart *np = &s->np[r->id - s->first_new];

			free(np->dist);
			np->dist = dist;
			return RM_OK;
		}
		rv = agg_account_held_resolve(s->acct, r->id, dist);
		free(dist);
		if (rv == RM_ENOENT)
			rm_log_error("held part %llu resolved but not in storage", (unsigned long long)r->id);
		return rv;
	}
	return RM_OK;
}

static int agg_on_forget(void *arg, uint64_t id)
{
	struct agg_stitch *s = arg;

	if (id >= s->first_new) {
		s->np[id - s->first_new].gone = 1;
		return RM_OK;
	}
	return agg_account_held_forget(s->acct, id);
}

/* ---- rebuilding from storage ---- */

static void agg_loaded_clear(struct agg_stitch *s)
{
	size_t i;

	for (i = 0; i < s->nld; i++)
		free(s->ld[i].dist);
	s->nld = 0;
}

static int agg_load_one(void *arg, const struct st_held *h)
{
	struct agg_stitch *s = arg;
	struct agg_loaded *l;
	int rv;

	if (s->nld == s->ldcap &&
	    (rv = agg_reserve((void **)&s->ld, &s->ldcap, 2 * s->ldcap + 64, sizeof(*s->ld))) != 0)
		return rv;
	l = &s->ld[s->nld];
	memset(l, 0, sizeof(*l));
	if (rm_part_get(&l->p, h->part, h->part_len) != 0 || strlen(h->node) > ST_NAME_MAX) {
		rm_log_error("failed to restore held part %llu of node '%s': it does not decode",
			     (unsigned long long)h->id, h->node);
		return RM_EPROTO;
	}
	l->id = h->id;
	snprintf(l->node, sizeof(l->node), "%s", h->node);
	l->instance = h->instance;
	l->window_ns = h->window_ns;
	l->arrival = h->arrival_ns;
	if (h->dist && !(l->dist = strdup(h->dist)))
		return RM_ENOMEM;
	s->nld++;
	return RM_OK;
}

/*
 * Empties the engine and puts back every held part from storage, in one
 * transaction for whatever that resolves. At open, notes the latest
 * arrival (agg_stitch_resume_ns) for the driver's horizon clock.
 */
static int agg_stitch_load(struct agg_stitch *s, int at_open)
{
	size_t i;
	int rv;

	agg_pair_reset(s->pair);
	agg_loaded_clear(s);
	s->broken = 1;
	if ((rv = agg_account_held_load(s->acct, agg_load_one, s)) != 0)
		goto out;
	if (at_open && s->nld) {
		int64_t mx = s->ld[0].arrival;

		for (i = 1; i < s->nld; i++)
			if (s->ld[i].arrival > mx)
				mx = s->ld[i].arrival;
		s->resume_ns = mx;
	}
	if ((rv = agg_account_begin(s->acct, NULL, NULL)) != 0)
		goto out;
	s->first_new = UINT64_MAX;
	for (i = 0; i < s->nld; i++) {
		struct agg_loaded *l = &s->ld[i];
		struct agg_pair_src src = { l->node, l->instance, l->window_ns };

		if (i % AGG_STEP_PARTS == 0 && agg_stop_requested(s)) {
			agg_account_abort(s->acct);
			rv = RM_ESTATE;
			goto out;
		}

		if ((rv = agg_pair_restore(s->pair, l->id, &src, &l->p, l->arrival, l->dist)) != 0) {
			if (rv == RM_EINVAL)
				rm_log_error("failed to restore held part %llu of node '%s': invalid",
					     (unsigned long long)l->id, l->node);
			agg_account_abort(s->acct);
			goto out;
		}
	}
	if ((rv = agg_account_commit(s->acct, NULL, 0)) != 0)
		goto out;
	s->broken = 0;
	if (s->nld)
		rm_log_info("restored %zu held parts", s->nld);
out:
	agg_loaded_clear(s);
	if (rv)
		agg_pair_reset(s->pair);
	return rv;
}

/* ---- lifecycle ---- */

int agg_stitch_open(struct agg_stitch **out, const struct agg_config *cfg, struct agg_account *acct,
		    const struct agg_stitch_opts *opts)
{
	struct agg_pair_opts po;
	struct agg_pair_sink sink;
	struct agg_stitch *s;
	int rv;

	if (!out)
		return RM_EINVAL;
	*out = NULL;
	if (!cfg || !acct || !cfg->horizon_ns || !cfg->max_held)
		return RM_EINVAL;
	if (!(s = calloc(1, sizeof(*s))))
		return RM_ENOMEM;
	s->cfg = cfg;
	s->acct = acct;
	s->first_new = UINT64_MAX;
	if (opts)
		s->o = *opts;
	po.horizon_ns = cfg->horizon_ns;
	po.max_held = cfg->max_held;
	sink.arg = s;
	sink.resolved = agg_on_resolved;
	sink.forget = agg_on_forget;
	if ((rv = agg_pair_open(&s->pair, cfg, &po, &sink)) != 0 || (rv = agg_stitch_load(s, 1)) != 0) {
		agg_stitch_close(s);
		return rv;
	}
	*out = s;
	return RM_OK;
}

void agg_stitch_close(struct agg_stitch *s)
{
	if (!s)
		return;
	agg_pair_close(s->pair);
	agg_loaded_clear(s);
	free(s->ld);
	free(s->np);
	free(s);
}

int agg_stitch_hello(struct agg_stitch *s, const Rametr__Hello *h, int64_t seen_unix_ns, char *err, size_t errlen)
{
	struct st_node n = {
		.node = h->node,
		.backend = h->backend,
		.hostname = h->hostname,
		.window_ns = h->window_ns,
		.clock_offset_ns = h->clock_offset_ns,
		.ncpu = h->ncpu,
		.seen_unix_ns = seen_unix_ns,
	};
	int rv = agg_account_node(s->acct, &n);

	if (rv == RM_EINVAL)
		snprintf(err, errlen, "invalid hello from node '%s'", h->node ? h->node : "");
	return rv;
}

/* Window w of length window_ns starts and ends within int64. */
static int agg_win_ok(uint64_t window_ns, uint64_t w)
{
	return window_ns <= (uint64_t)INT64_MAX && w <= (uint64_t)INT64_MAX / window_ns &&
	       w * window_ns <= (uint64_t)INT64_MAX - window_ns;
}

/* After a failed transaction: the engine may hold what was rolled back. */
static void agg_stitch_failed(struct agg_stitch *s)
{
	s->broken = 1;
	if (agg_stop_requested(s))
		return; /* rebuilt at the next start, from the same storage */
	if (agg_stitch_load(s, 0) != 0)
		rm_log_warn("failed to rebuild the pairing state from storage; trying again with the next batch");
}

static void agg_newparts_clear(struct agg_stitch *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(s->np[i].dist);
		s->np[i].dist = NULL;
	}
}

int agg_stitch_batch(struct agg_stitch *s, const struct rm_wbatch *b, int64_t now, int *duplicate, char *err,
		     size_t errlen)
{
	struct agg_batch_meta m = {
		.node = b->node,
		.backend = b->backend,
		.instance = b->instance,
		.seq = b->seq,
		.window_ns = b->window_ns,
	};
	struct agg_pair_src src = { b->node, b->instance, b->window_ns };
	uint8_t blob[ST_HELD_PART_MAX];
	size_t i;
	int rv;

	*duplicate = 0;
	for (i = 0; i < b->n_parts; i++)
		if (!agg_win_ok(b->window_ns, b->parts[i].win))
			goto bad_window;
	for (i = 0; i < b->n_windows; i++)
		if (!agg_win_ok(b->window_ns, b->windows[i].win))
			goto bad_window;
	if ((rv = agg_reserve((void **)&s->np, &s->npcap, b->n_parts, sizeof(*s->np))) != 0)
		return rv;
	if (s->broken && (rv = agg_stitch_load(s, 0)) != 0)
		return rv;
	if ((rv = agg_account_begin(s->acct, &m, duplicate)) != 0 || *duplicate)
		return rv;
	if (b->n_parts) /* np is NULL until a batch had parts */
		memset(s->np, 0, b->n_parts * sizeof(*s->np));
	s->first_new = agg_pair_next_id(s->pair);
	for (i = 0; i < b->n_parts; i++) {
		uint64_t id;

		if (i % AGG_STEP_PARTS == AGG_STEP_PARTS - 1 && agg_stop_requested(s)) {
			rv = RM_ESTATE;
			goto fail;
		}
		if ((rv = agg_pair_add(s->pair, &src, &b->parts[i], now, &id)) != 0)
			goto fail;
	}
	/* the parts of this batch the engine still holds */
	for (i = 0; i < b->n_parts; i++) {
		struct st_held h;

		if (s->np[i].gone)
			continue;
		memset(&h, 0, sizeof(h));
		h.id = s->first_new + i;
		h.node = b->node;
		h.instance = b->instance;
		h.window_ns = b->window_ns;
		h.arrival_ns = now;
		h.part = blob;
		h.part_len = agg_part_pack(&b->parts[i], blob, sizeof(blob));
		h.dist = s->np[i].dist;
		if ((rv = agg_account_held_put(s->acct, &h)) != 0)
			goto fail;
	}
	s->first_new = UINT64_MAX;
	rv = agg_account_commit(s->acct, b->windows, b->n_windows);
	agg_newparts_clear(s, b->n_parts);
	if (rv) {
		agg_stitch_failed(s);
		if (rv == RM_EINVAL) /* the windows were checked: storage refused a value */
			snprintf(err, errlen, "batch %llu from node '%s' has a value storage refuses",
				 (unsigned long long)b->seq, b->node);
	}
	return rv;
fail:
	s->first_new = UINT64_MAX;
	agg_account_abort(s->acct);
	agg_newparts_clear(s, b->n_parts);
	agg_stitch_failed(s);
	if (rv == RM_EINVAL)
		snprintf(err, errlen, "batch %llu from node '%s' has a part the pairing engine refuses",
			 (unsigned long long)b->seq, b->node);
	else if (rv == RM_ESTATE)
		snprintf(err, errlen, "the aggregator is stopping");
	return rv;
bad_window:
	snprintf(err, errlen, "batch %llu from node '%s' has a window beyond the representable time range",
		 (unsigned long long)b->seq, b->node);
	return RM_EINVAL;
}

/*
 * One step in one transaction: gives up at most AGG_STEP_PARTS pending
 * parts (past the horizon at now, or all), or, if expire, drops the send
 * ranges past their expiry. *more: pending parts to give up are left.
 */
static int agg_stitch_step(struct agg_stitch *s, int64_t now, int all, int expire, int *more)
{
	int rv;

	*more = 0;
	if ((rv = agg_account_begin(s->acct, NULL, NULL)) != 0)
		return rv;
	s->first_new = UINT64_MAX;
	rv = expire ? agg_pair_expire(s->pair, now) : agg_pair_give_up_some(s->pair, now, all, AGG_STEP_PARTS, more);
	if (rv != 0) {
		agg_account_abort(s->acct);
		agg_stitch_failed(s);
		return rv;
	}
	if ((rv = agg_account_commit(s->acct, NULL, 0)) != 0)
		agg_stitch_failed(s);
	return rv;
}

int agg_stitch_tick(struct agg_stitch *s, int64_t now)
{
	struct agg_pair_stats st;
	int rv, more;

	if (s->broken && (rv = agg_stitch_load(s, 0)) != 0)
		return rv;
	agg_pair_get_stats(s->pair, &st);
	if (st.held == 0)
		return RM_OK;
	do {
		if ((rv = agg_stitch_step(s, now, 0, 0, &more)) != 0)
			return rv;
	} while (more && !agg_stop_requested(s));
	if (more) /* the rest at the next tick or start */
		return RM_OK;
	return agg_stitch_step(s, now, 0, 1, &more);
}

int agg_stitch_give_up(struct agg_stitch *s, int *more)
{
	struct agg_pair_stats st;

	*more = 0;
	if (s->broken)
		return RM_ESTATE; /* left mid-batch by a stop: the parts stay held in storage */
	agg_pair_get_stats(s->pair, &st);
	if (st.pending == 0)
		return RM_OK;
	return agg_stitch_step(s, 0, 1, 0, more);
}

int64_t agg_stitch_resume_ns(const struct agg_stitch *s)
{
	return s->resume_ns;
}

void agg_stitch_get_stats(const struct agg_stitch *s, struct agg_pair_stats *out)
{
	agg_pair_get_stats(s->pair, out);
}
