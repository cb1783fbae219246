/*
 * agg_account.c - applies attributed charges and window totals to storage,
 * one transaction per collector batch (see agg_account.h).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "agg_account.h"
#include "rm_err.h"
#include "banned.h"

struct agg_sum {
	uint64_t win;
	const char *ce;
	const char *reason;
	uint64_t v[ST_R_COUNT];
	int used;
};

struct agg_account {
	st_db *db;
	struct agg_sum *tab;   /* open addressing, cap a power of two */
	size_t cap, n;
	struct agg_account_stats stats;
};

int agg_account_open(struct agg_account **out, st_db *db)
{
	struct agg_account *a;

	*out = NULL;
	if (!db)
		return RM_EINVAL;
	if (!(a = calloc(1, sizeof(*a))))
		return RM_ENOMEM;
	a->db = db;
	*out = a;
	return RM_OK;
}

void agg_account_close(struct agg_account *a)
{
	if (!a)
		return;
	free(a->tab);
	free(a);
}

static uint64_t agg_hash(uint64_t win, const char *ce, const char *reason)
{
	const char *s = ce ? ce : reason;
	uint64_t h = win * 0x9e3779b97f4a7c15ULL ^ (ce ? 1 : 2);

	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ULL;
	return h;
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

		if (!e->used)
			continue;
		j = agg_hash(e->win, e->ce, e->reason) & (ncap - 1);
		while (nt[j].used)
			j = (j + 1) & (ncap - 1);
		nt[j] = *e;
	}
	free(a->tab);
	a->tab = nt;
	a->cap = ncap;
	return RM_OK;
}

static int agg_sum_add(struct agg_account *a, const struct agg_charge *c)
{
	const char *reason = c->ce ? NULL : c->reason;
	size_t j;
	int r, rv;

	if (!c->ce && !c->reason)
		return RM_EINVAL;
	if ((a->n + 1) * 2 > a->cap && (rv = agg_sum_grow(a)) != 0)
		return rv;
	j = agg_hash(c->win, c->ce, reason) & (a->cap - 1);
	while (a->tab[j].used) {
		struct agg_sum *e = &a->tab[j];

		if (e->win == c->win && ((c->ce && e->ce && !strcmp(e->ce, c->ce)) ||
					 (!c->ce && !e->ce && !strcmp(e->reason, reason))))
			break;
		j = (j + 1) & (a->cap - 1);
	}
	if (!a->tab[j].used) {
		a->tab[j].used = 1;
		a->tab[j].win = c->win;
		a->tab[j].ce = c->ce;
		a->tab[j].reason = reason;
		a->n++;
	}
	for (r = 0; r < ST_R_COUNT; r++)
		a->tab[j].v[r] += c->v[r];
	return RM_OK;
}

static int agg_win_start(const struct agg_batch_meta *m, uint64_t win, int64_t *start)
{
	if (m->window_ns == 0 || win > (uint64_t)INT64_MAX / m->window_ns)
		return RM_EINVAL;
	*start = (int64_t)(win * m->window_ns);
	return RM_OK;
}

static int agg_write(struct agg_account *a, const struct agg_batch_meta *m, const struct agg_window *w, size_t nw)
{
	int64_t start, len = (int64_t)m->window_ns;
	size_t i;
	int r, rv;

	for (i = 0; i < a->cap; i++) {
		struct agg_sum *e = &a->tab[i];

		if (!e->used)
			continue;
		if ((rv = agg_win_start(m, e->win, &start)) != 0)
			return rv;
		for (r = 0; r < ST_R_COUNT; r++) {
			if (!e->v[r])
				continue;
			rv = e->ce ? st_add_usage(a->db, m->node, start, len, r, e->ce, e->v[r])
				   : st_add_unacct(a->db, m->node, start, len, r, e->reason, e->v[r]);
			if (rv)
				return rv;
			a->stats.rows_written++;
		}
	}
	for (i = 0; i < nw; i++) {
		if ((rv = agg_win_start(m, w[i].win, &start)) != 0)
			return rv;
		for (r = 0; r < ST_R_COUNT; r++) {
			uint64_t cap = r == ST_R_CPU ? w[i].capacity_ns : 0;

			if (w[i].total[r] || cap) {
				if ((rv = st_add_total(a->db, m->node, start, len, r, w[i].total[r], cap)) != 0)
					return rv;
				a->stats.rows_written++;
			}
			if (w[i].unseg[r] &&
			    (rv = st_add_unacct(a->db, m->node, start, len, r, AGG_REASON_UNSEGMENTED, w[i].unseg[r])))
				return rv;
		}
		if (w[i].lost_ns &&
		    (rv = st_add_unacct(a->db, m->node, start, len, ST_R_CPU, AGG_REASON_LOST, w[i].lost_ns)))
			return rv;
		if (w[i].dropped_parts)
			rm_log_warn("node '%s' window %" PRIu64 ": %" PRIu64 " segment parts dropped in the kernel; their CPU is charged to V as '%s'",
				    m->node, w[i].win, w[i].dropped_parts, AGG_REASON_LOST);
	}
	return RM_OK;
}

int agg_account_apply(struct agg_account *a, const struct agg_batch_meta *m, const struct agg_charge *ch,
		      size_t nch, const struct agg_window *w, size_t nw, int *duplicate)
{
	uint64_t last = 0;
	size_t i;
	int rv;

	*duplicate = 0;
	if (!m->node || !m->seq || !m->window_ns)
		return RM_EINVAL;
	if (a->tab)
		memset(a->tab, 0, a->cap * sizeof(*a->tab));
	a->n = 0;
	for (i = 0; i < nch; i++)
		if ((rv = agg_sum_add(a, &ch[i])) != 0)
			return rv;
	if ((rv = st_begin(a->db)) != 0)
		return rv;
	if ((rv = st_peer_get(a->db, m->node, m->instance, &last)) != 0)
		goto fail;
	if (m->seq <= last) {
		st_rollback(a->db);
		*duplicate = 1;
		a->stats.duplicates++;
		return RM_OK;
	}
	if (last && m->seq != last + 1) {
		a->stats.gaps++;
		rm_log_warn("node '%s' instance %016" PRIx64 ": batch %" PRIu64 " follows %" PRIu64
			    " (batches in between never arrived)", m->node, m->instance, m->seq, last);
	}
	if ((rv = agg_write(a, m, w, nw)) != 0)
		goto fail;
	if ((rv = st_peer_set(a->db, m->node, m->instance, m->seq)) != 0)
		goto fail;
	if ((rv = st_commit(a->db)) != 0)
		goto fail;
	a->stats.batches++;
	a->stats.charges += nch;
	return RM_OK;
fail:
	st_rollback(a->db);
	return rv;
}

int agg_account_node(struct agg_account *a, const struct st_node *n)
{
	return st_node_seen(a->db, n);
}

void agg_account_get_stats(const struct agg_account *a, struct agg_account_stats *out)
{
	*out = a->stats;
}
