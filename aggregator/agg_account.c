/*
 * agg_account.c - applies attributed charges, split counts, held-part
 * changes and window totals to storage (through agg_store.h), one
 * transaction per collector batch or expiry pass (see agg_account.h). Owns
 * the in-memory sums of the open transaction.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "agg_account.h"
#include "agg_restart.h"
#include "rm_err.h"
#include "banned.h"

enum agg_kind { AGG_K_CE = 1, AGG_K_REASON, AGG_K_SPLIT, AGG_K_EST };

struct agg_sum {
	int kind;             /* 0 = free slot */
	const char *node;
	uint64_t window_ns, win;
	const char *key;      /* CE or reason; NULL for splits */
	uint64_t v[ST_R_COUNT]; /* splits: the count in v[0]; est: requests, rt, rx */
};

struct agg_account {
	struct agg_store st;    /* copied */
	struct agg_sum *tab;   /* open addressing, cap a power of two */
	size_t cap, n;
	int open;              /* a transaction is open */
	int is_batch;
	struct agg_batch_meta m;
	uint64_t nch, nsplit;  /* of the open transaction */
	struct agg_account_stats stats;
	agg_account_observer obs; /* told what each commit wrote */
	void *obs_arg;
};

int agg_account_open(struct agg_account **out, const struct agg_store *store)
{
	struct agg_account *a;

	*out = NULL;
	if (!store || !store->begin || !store->commit || !store->rollback || !store->peer_get || !store->peer_set ||
	    !store->add_usage || !store->add_unacct || !store->add_total || !store->add_split ||
	    !store->add_est_input || !store->held_put || !store->held_resolve || !store->held_delete ||
	    !store->held_load || !store->node_seen || !store->window_sums)
		return RM_EINVAL;
	if (!(a = calloc(1, sizeof(*a))))
		return RM_ENOMEM;
	a->st = *store;
	*out = a;
	return RM_OK;
}

void agg_account_close(struct agg_account *a)
{
	if (!a)
		return;
	agg_account_abort(a);
	free(a->tab);
	free(a);
}

static uint64_t agg_str_hash(uint64_t h, const char *s)
{
	while (s && *s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ULL;
	return h;
}

static uint64_t agg_hash(const struct agg_sum *k)
{
	uint64_t h = (k->win * 0x9e3779b97f4a7c15ULL) ^ (k->window_ns * 31) ^ (uint64_t)k->kind;

	return agg_str_hash(agg_str_hash(h, k->node) * 0x9e3779b97f4a7c15ULL, k->key);
}

static int agg_sum_eq(const struct agg_sum *a, const struct agg_sum *b)
{
	return a->kind == b->kind && a->win == b->win && a->window_ns == b->window_ns &&
	       strcmp(a->node, b->node) == 0 && (!a->key || strcmp(a->key, b->key) == 0);
}

static int agg_sum_grow(struct agg_account *a)
{
	size_t ncap = a->cap ? a->cap * 2 : 256, i;
	struct agg_sum *nt = calloc(ncap, sizeof(*nt));

	if (!nt)
		return RM_ENOMEM;
	for (i = 0; i < a->cap; i++) {
		struct agg_sum *e = &a->tab[i];
		size_t j;

		if (!e->kind)
			continue;
		j = agg_hash(e) & (ncap - 1);
		while (nt[j].kind)
			j = (j + 1) & (ncap - 1);
		nt[j] = *e;
	}
	free(a->tab);
	a->tab = nt;
	a->cap = ncap;
	return RM_OK;
}

/* The sum of key k, created (zero) if missing. */
static int agg_sum_get(struct agg_account *a, const struct agg_sum *k, struct agg_sum **out)
{
	size_t j;
	int rv;

	if ((a->n + 1) * 2 > a->cap && (rv = agg_sum_grow(a)) != 0)
		return rv;
	j = agg_hash(k) & (a->cap - 1);
	while (a->tab[j].kind && !agg_sum_eq(&a->tab[j], k))
		j = (j + 1) & (a->cap - 1);
	if (!a->tab[j].kind) {
		a->tab[j] = *k;
		memset(a->tab[j].v, 0, sizeof(a->tab[j].v));
		a->n++;
	}
	*out = &a->tab[j];
	return RM_OK;
}

/* Node and window length of a charge: its own, else the batch's. */
static int agg_origin(const struct agg_account *a, const char *node, uint64_t window_ns, struct agg_sum *k)
{
	k->node = node ? node : (a->is_batch ? a->m.node : NULL);
	k->window_ns = window_ns ? window_ns : (a->is_batch ? a->m.window_ns : 0);
	return k->node && k->window_ns ? RM_OK : RM_EINVAL;
}

int agg_account_add(struct agg_account *a, const struct agg_charge *c)
{
	struct agg_sum k = { 0 }, *e;
	int r, rv;

	if (!a->open)
		return RM_ESTATE;
	if (!c->ce && !c->reason)
		return RM_EINVAL;
	if ((rv = agg_origin(a, c->node, c->window_ns, &k)) != 0)
		return rv;
	k.kind = c->ce ? AGG_K_CE : AGG_K_REASON;
	k.key = c->ce ? c->ce : c->reason;
	k.win = c->win;
	if ((rv = agg_sum_get(a, &k, &e)) != 0)
		return rv;
	for (r = 0; r < ST_R_COUNT; r++)
		e->v[r] += c->v[r];
	a->nch++;
	return RM_OK;
}

int agg_account_add_split(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win)
{
	struct agg_sum k = { 0 }, *e;
	int rv;

	if (!a->open)
		return RM_ESTATE;
	if ((rv = agg_origin(a, node, window_ns, &k)) != 0)
		return rv;
	k.kind = AGG_K_SPLIT;
	k.win = win;
	if ((rv = agg_sum_get(a, &k, &e)) != 0)
		return rv;
	e->v[0]++;
	a->nsplit++;
	return RM_OK;
}

int agg_account_add_est(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win, const char *ce,
			uint64_t requests, uint64_t rt_ns, uint64_t rx)
{
	struct agg_sum k = { 0 }, *e;
	int rv;

	if (!a->open)
		return RM_ESTATE;
	if (!ce)
		return RM_EINVAL;
	if ((rv = agg_origin(a, node, window_ns, &k)) != 0)
		return rv;
	k.kind = AGG_K_EST;
	k.key = ce;
	k.win = win;
	if ((rv = agg_sum_get(a, &k, &e)) != 0)
		return rv;
	/* saturate: storage refuses sums above INT64_MAX with a clear error */
	e->v[0] = e->v[0] + requests < e->v[0] ? UINT64_MAX : e->v[0] + requests;
	e->v[1] = e->v[1] + rt_ns < e->v[1] ? UINT64_MAX : e->v[1] + rt_ns;
	e->v[2] = e->v[2] + rx < e->v[2] ? UINT64_MAX : e->v[2] + rx;
	return RM_OK;
}

static int agg_win_start(uint64_t window_ns, uint64_t win, int64_t *start)
{
	if (window_ns == 0 || window_ns > (uint64_t)INT64_MAX || win > (uint64_t)INT64_MAX / window_ns ||
	    win * window_ns > (uint64_t)INT64_MAX - window_ns)
		return RM_EINVAL;
	*start = (int64_t)(win * window_ns);
	return RM_OK;
}

/* A window's node totals (U) by resource (ST_R_*). */
static void agg_totals_of(const struct rm_totals *t, uint64_t v[ST_R_COUNT])
{
	v[ST_R_CPU] = t->busy_ns;
	v[ST_R_NET_RX] = t->rx_bytes;
	v[ST_R_NET_TX] = t->tx_bytes;
	v[ST_R_DISK_READ] = t->disk_read;
	v[ST_R_DISK_WRITE] = t->disk_write;
}

/*
 * A restarted collector's totals t (t->restart windows ending with t->win)
 * over what storage holds before this batch (agg_restart.h): each window
 * balanced, the rest as V 'collector_restart' in the last one.
 */
static int agg_write_restart(struct agg_account *a, const struct rm_totals *t)
{
	const struct agg_batch_meta *m = &a->m;
	uint64_t n = t->restart < AGG_RESTART_MAX_WINS ? t->restart : AGG_RESTART_MAX_WINS;
	uint64_t lump[ST_R_COUNT], short_by[ST_R_COUNT], first, j;
	struct agg_restart_win *w;
	struct agg_restart_add *add;
	int64_t start, len = (int64_t)m->window_ns;
	int r, rv = RM_OK;

	if (n > t->win)
		n = t->win;
	if (t->restart > n)
		rm_log_warn("node '%s': restart totals for %" PRIu64 " windows up to %" PRIu64 "; only the last %"
			    PRIu64 " are balanced", m->node, t->restart, t->win, n);
	first = t->win - n + 1;
	w = calloc(n, sizeof(*w));
	add = calloc(n, sizeof(*add));
	if (!w || !add) {
		free(w);
		free(add);
		return RM_ENOMEM;
	}
	for (j = 0; j < n && rv == RM_OK; j++)
		if ((rv = agg_win_start(m->window_ns, first + j, &start)) == RM_OK)
			rv = a->st.window_sums(a->st.arg, m->node, start, len, w[j].total, w[j].charged,
					       &w[j].has_total);
	if (rv == RM_OK) {
		agg_totals_of(t, lump);
		agg_restart_split(lump, w, n, add, short_by);
	}
	for (j = 0; j < n && rv == RM_OK; j++) {
		uint64_t cap = j == n - 1 ? t->capacity_ns : 0;

		agg_win_start(m->window_ns, first + j, &start);
		for (r = 0; r < ST_R_COUNT && rv == RM_OK; r++) {
			uint64_t c = r == ST_R_CPU ? cap : 0;

			if (add[j].total[r] || c) {
				rv = a->st.add_total(a->st.arg, m->node, start, len, r, add[j].total[r], c);
				a->stats.rows_written++;
			}
			if (rv == RM_OK && add[j].v[r])
				rv = a->st.add_unacct(a->st.arg, m->node, start, len, r, AGG_REASON_COLLECTOR_RESTART,
						      add[j].v[r]);
		}
	}
	for (r = 0; r < ST_R_COUNT && rv == RM_OK; r++)
		if (short_by[r])
			rm_log_warn("node '%s' windows %" PRIu64 "..%" PRIu64 ": the restarted collector measured %"
				    PRIu64 " less of resource %d than the stored parts hold; balanced on the parts",
				    m->node, first, t->win, short_by[r], r);
	free(w);
	free(add);
	return rv;
}

static int agg_write(struct agg_account *a, const struct rm_totals *w, size_t nw)
{
	const struct agg_batch_meta *m = &a->m;
	int64_t start, len;
	size_t i;
	int r, rv;

	if (nw && !a->is_batch)
		return RM_EINVAL;
	/* restart totals explain what was stored before this batch: first */
	for (i = 0; i < nw; i++)
		if (w[i].restart && (rv = agg_write_restart(a, &w[i])) != 0)
			return rv;

	for (i = 0; i < a->cap; i++) {
		struct agg_sum *e = &a->tab[i];

		if (!e->kind)
			continue;
		if ((rv = agg_win_start(e->window_ns, e->win, &start)) != 0)
			return rv;
		len = (int64_t)e->window_ns;
		if (e->kind == AGG_K_SPLIT) {
			if ((rv = a->st.add_split(a->st.arg, e->node, start, len, e->v[0])) != 0)
				return rv;
			a->stats.rows_written++;
			continue;
		}
		if (e->kind == AGG_K_EST) {
			if ((rv = a->st.add_est_input(a->st.arg, e->node, start, len, e->key, e->v[0], e->v[1], e->v[2])) != 0)
				return rv;
			a->stats.rows_written++;
			continue;
		}
		for (r = 0; r < ST_R_COUNT; r++) {
			if (!e->v[r])
				continue;
			rv = e->kind == AGG_K_CE ? a->st.add_usage(a->st.arg, e->node, start, len, r, e->key, e->v[r])
						 : a->st.add_unacct(a->st.arg, e->node, start, len, r, e->key, e->v[r]);
			if (rv)
				return rv;
			a->stats.rows_written++;
		}
	}
	len = (int64_t)m->window_ns;
	for (i = 0; i < nw; i++) {
		const struct rm_totals *t = &w[i];
		/* the node's totals (U), the part done outside segments, and what
		 * dropped parts held, by resource */
		uint64_t total[ST_R_COUNT];
		uint64_t unseg_of[ST_R_COUNT] = { [ST_R_CPU] = t->unseg_cpu_ns, [ST_R_NET_RX] = t->unseg_rx,
						  [ST_R_NET_TX] = t->unseg_tx,
						  [ST_R_DISK_READ] = t->unseg_disk_read,
						  [ST_R_DISK_WRITE] = t->unseg_disk_write };
		uint64_t dropped[ST_R_COUNT] = { [ST_R_CPU] = t->dropped_cpu_ns, [ST_R_NET_RX] = t->dropped_rx,
						 [ST_R_NET_TX] = t->dropped_tx,
						 [ST_R_DISK_READ] = t->dropped_disk_read,
						 [ST_R_DISK_WRITE] = t->dropped_disk_write };
		uint64_t drop[ST_R_COUNT], lost = w[i].lost_ns;

		if (t->restart)
			continue;
		agg_totals_of(t, total);

		if ((rv = agg_win_start(m->window_ns, w[i].win, &start)) != 0)
			return rv;
		/* what dropped parts held was counted as lost CPU / unsegmented
		 * bytes by the collector: move that share to 'dropped' (never
		 * more than there is, whatever the collector sent) */
		for (r = 0; r < ST_R_COUNT; r++) {
			uint64_t pool = r == ST_R_CPU ? w[i].lost_ns : unseg_of[r];

			drop[r] = dropped[r] < pool ? dropped[r] : pool;
		}
		lost -= drop[ST_R_CPU];
		for (r = 0; r < ST_R_COUNT; r++) {
			uint64_t cap = r == ST_R_CPU ? w[i].capacity_ns : 0;
			uint64_t unseg = unseg_of[r] - (r == ST_R_CPU ? 0 : drop[r]);

			if (total[r] || cap) {
				if ((rv = a->st.add_total(a->st.arg, m->node, start, len, r, total[r], cap)) != 0)
					return rv;
				a->stats.rows_written++;
			}
			if (unseg && (rv = a->st.add_unacct(a->st.arg, m->node, start, len, r, AGG_REASON_UNSEGMENTED, unseg)))
				return rv;
			if (drop[r] && (rv = a->st.add_unacct(a->st.arg, m->node, start, len, r, AGG_REASON_DROPPED, drop[r])))
				return rv;
		}
		if (lost && (rv = a->st.add_unacct(a->st.arg, m->node, start, len, ST_R_CPU, AGG_REASON_LOST, lost)))
			return rv;
		if (w[i].dropped_parts)
			rm_log_warn("node '%s' window %" PRIu64 ": %" PRIu64 " segment parts dropped in the kernel; their CPU and bytes are charged to V as '%s'",
				    m->node, w[i].win, w[i].dropped_parts, AGG_REASON_DROPPED);
	}
	return RM_OK;
}

int agg_account_begin(struct agg_account *a, const struct agg_batch_meta *m, int *duplicate)
{
	uint64_t last = 0;
	int rv;

	if (duplicate)
		*duplicate = 0;
	if (a->open)
		return RM_ESTATE;
	if (m && (!m->node || !m->seq || !m->window_ns || !duplicate))
		return RM_EINVAL;
	if (a->tab)
		memset(a->tab, 0, a->cap * sizeof(*a->tab));
	a->n = 0;
	a->nch = a->nsplit = 0;
	a->is_batch = m != NULL;
	memset(&a->m, 0, sizeof(a->m));
	if (m)
		a->m = *m;
	if ((rv = a->st.begin(a->st.arg)) != 0)
		return rv;
	if (m) {
		if ((rv = a->st.peer_get(a->st.arg, m->node, m->instance, &last)) != 0) {
			a->st.rollback(a->st.arg);
			return rv;
		}
		if (m->seq <= last) {
			a->st.rollback(a->st.arg);
			*duplicate = 1;
			a->stats.duplicates++;
			return RM_OK;
		}
		if (last && m->seq != last + 1) {
			a->stats.gaps++;
			rm_log_warn("node '%s' instance %016" PRIx64 ": batch %" PRIu64 " follows %" PRIu64
				    " (batches in between never arrived)", m->node, m->instance, m->seq, last);
		}
	}
	a->open = 1;
	return RM_OK;
}

void agg_account_observe(struct agg_account *a, agg_account_observer fn, void *arg)
{
	a->obs = fn;
	a->obs_arg = arg;
}

/* Tells the observer what the committed transaction wrote. */
static void agg_observe(const struct agg_account *a, const struct rm_totals *w, size_t nw)
{
	struct agg_account_row row;
	size_t i;

	for (i = 0; i < a->cap; i++) {
		const struct agg_sum *e = &a->tab[i];

		if (e->kind != AGG_K_CE || agg_win_start(e->window_ns, e->win, &row.start) != 0)
			continue;
		row.node = e->node;
		row.ce = e->key;
		row.len = (int64_t)e->window_ns;
		memcpy(row.v, e->v, sizeof(row.v));
		row.dropped_parts = 0;
		a->obs(a->obs_arg, &row);
	}
	for (i = 0; i < nw; i++) {
		if (w[i].restart || agg_win_start(a->m.window_ns, w[i].win, &row.start) != 0)
			continue;
		row.node = a->m.node;
		row.ce = NULL;
		row.len = (int64_t)a->m.window_ns;
		agg_totals_of(&w[i], row.v);
		row.dropped_parts = w[i].dropped_parts;
		a->obs(a->obs_arg, &row);
	}
}

int agg_account_commit(struct agg_account *a, const struct rm_totals *w, size_t nw)
{
	int rv;

	if (!a->open)
		return RM_ESTATE;
	if ((rv = agg_write(a, w, nw)) != 0)
		goto fail;
	if (a->is_batch && (rv = a->st.peer_set(a->st.arg, a->m.node, a->m.instance, a->m.seq)) != 0)
		goto fail;
	if ((rv = a->st.commit(a->st.arg)) != 0)
		goto fail;
	a->open = 0;
	if (a->is_batch)
		a->stats.batches++;
	else
		a->stats.passes++;
	a->stats.charges += a->nch;
	a->stats.splits += a->nsplit;
	if (a->obs)
		agg_observe(a, w, nw);
	return RM_OK;
fail:
	agg_account_abort(a);
	return rv;
}

void agg_account_abort(struct agg_account *a)
{
	if (!a || !a->open)
		return;
	a->st.rollback(a->st.arg);
	a->open = 0;
}

int agg_account_held_put(struct agg_account *a, const struct st_held *h)
{
	return a->open ? a->st.held_put(a->st.arg, h) : RM_ESTATE;
}

int agg_account_held_resolve(struct agg_account *a, uint64_t id, const char *dist)
{
	return a->open ? a->st.held_resolve(a->st.arg, id, dist) : RM_ESTATE;
}

int agg_account_held_forget(struct agg_account *a, uint64_t id)
{
	return a->open ? a->st.held_delete(a->st.arg, id) : RM_ESTATE;
}

int agg_account_held_load(struct agg_account *a, int (*cb)(void *arg, const struct st_held *h), void *arg)
{
	return a->open ? RM_ESTATE : a->st.held_load(a->st.arg, cb, arg);
}

int agg_account_apply(struct agg_account *a, const struct agg_batch_meta *m, const struct agg_charge *ch,
		      size_t nch, const struct rm_totals *w, size_t nw, int *duplicate)
{
	size_t i;
	int rv;

	if (!m || !duplicate)
		return RM_EINVAL;
	if ((rv = agg_account_begin(a, m, duplicate)) != 0 || *duplicate)
		return rv;
	for (i = 0; i < nch; i++)
		if ((rv = agg_account_add(a, &ch[i])) != 0) {
			agg_account_abort(a);
			return rv;
		}
	return agg_account_commit(a, w, nw);
}

int agg_account_node(struct agg_account *a, const struct st_node *n)
{
	return a->st.node_seen(a->st.arg, n);
}

void agg_account_get_stats(const struct agg_account *a, struct agg_account_stats *out)
{
	*out = a->stats;
}
