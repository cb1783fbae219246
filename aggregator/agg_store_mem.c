/*
 * agg_store_mem.c - the accountant's storage in memory (agg_store_mem.h):
 * rows summed per key in a flat array, collectors' sequence numbers, held
 * parts, and a snapshot taken at begin for rollback.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_store_mem.h"
#include "rm_err.h"
#include "banned.h"

enum { MEM_USAGE = 1, MEM_UNACCT, MEM_TOTAL, MEM_SPLIT, MEM_EST };

struct mem_row {
	int kind;
	char node[ST_NAME_MAX + 1];
	char key[ST_NAME_MAX + 1];  /* CE or reason; "" for totals and splits */
	int64_t start, len;
	int r;
	uint64_t v[3];              /* value (est: requests, rt, rx) */
	uint64_t capacity;
};

struct mem_peer {
	char node[ST_NAME_MAX + 1];
	uint64_t instance, seq;
};

struct mem_held {
	uint64_t id;
	char node[ST_NAME_MAX + 1];
	uint64_t instance, window_ns;
	int64_t arrival_ns;
	uint8_t part[ST_HELD_PART_MAX];
	size_t part_len;
	char *dist;
};

struct mem_state {
	struct mem_row *rows;
	size_t nrows;
	struct mem_peer *peers;
	size_t npeers;
	struct mem_held *held;
	size_t nheld;
};

struct agg_store_mem {
	struct mem_state s, saved;
	int in_tx;
};

static void mem_state_free(struct mem_state *s)
{
	size_t i;

	for (i = 0; i < s->nheld; i++)
		free(s->held[i].dist);
	free(s->rows);
	free(s->peers);
	free(s->held);
	memset(s, 0, sizeof(*s));
}

static int mem_state_copy(struct mem_state *d, const struct mem_state *s)
{
	size_t i;

	memset(d, 0, sizeof(*d));
	if ((s->nrows && !(d->rows = malloc(s->nrows * sizeof(*d->rows)))) ||
	    (s->npeers && !(d->peers = malloc(s->npeers * sizeof(*d->peers)))) ||
	    (s->nheld && !(d->held = calloc(s->nheld, sizeof(*d->held))))) {
		mem_state_free(d);
		return RM_ENOMEM;
	}
	if (s->nrows)
		memcpy(d->rows, s->rows, s->nrows * sizeof(*d->rows));
	if (s->npeers)
		memcpy(d->peers, s->peers, s->npeers * sizeof(*d->peers));
	d->nrows = s->nrows;
	d->npeers = s->npeers;
	for (i = 0; i < s->nheld; i++) {
		d->held[i] = s->held[i];
		d->held[i].dist = NULL;
		d->nheld = i + 1;
		if (s->held[i].dist && !(d->held[i].dist = strdup(s->held[i].dist))) {
			mem_state_free(d);
			return RM_ENOMEM;
		}
	}
	return RM_OK;
}

static int mem_name_ok(const char *s)
{
	return s && *s && strlen(s) <= ST_NAME_MAX;
}

/* Adds v to the row of (kind, node, key, window, r), refusing sums above INT64_MAX. */
static int mem_add(struct agg_store_mem *m, int kind, const char *node, const char *key, int64_t start,
		   int64_t len, int r, const uint64_t *v, size_t nv, uint64_t capacity)
{
	struct mem_row *row = NULL, *nr;
	size_t i;

	if (!mem_name_ok(node) || (key && !mem_name_ok(key)) || len <= 0)
		return RM_EINVAL;
	for (i = 0; i < m->s.nrows && !row; i++) {
		struct mem_row *x = &m->s.rows[i];

		if (x->kind == kind && x->start == start && x->len == len && x->r == r && !strcmp(x->node, node) &&
		    !strcmp(x->key, key ? key : ""))
			row = x;
	}
	if (row) {
		for (i = 0; i < nv; i++)
			if (v[i] > (uint64_t)INT64_MAX || row->v[i] > (uint64_t)INT64_MAX - v[i])
				return RM_EINVAL;
		for (i = 0; i < nv; i++)
			row->v[i] += v[i];
		if (capacity)
			row->capacity = capacity;
		return RM_OK;
	}
	for (i = 0; i < nv; i++)
		if (v[i] > (uint64_t)INT64_MAX)
			return RM_EINVAL;
	if (!(nr = realloc(m->s.rows, (m->s.nrows + 1) * sizeof(*nr))))
		return RM_ENOMEM;
	m->s.rows = nr;
	row = &nr[m->s.nrows++];
	memset(row, 0, sizeof(*row));
	row->kind = kind;
	snprintf(row->node, sizeof(row->node), "%s", node);
	snprintf(row->key, sizeof(row->key), "%s", key ? key : "");
	row->start = start;
	row->len = len;
	row->r = r;
	memcpy(row->v, v, nv * sizeof(*v));
	row->capacity = capacity;
	return RM_OK;
}

static int mem_begin(void *arg)
{
	struct agg_store_mem *m = arg;
	int rv;

	if (m->in_tx)
		return RM_ESTATE;
	if ((rv = mem_state_copy(&m->saved, &m->s)) != 0)
		return rv;
	m->in_tx = 1;
	return RM_OK;
}

static int mem_commit(void *arg)
{
	struct agg_store_mem *m = arg;

	if (!m->in_tx)
		return RM_ESTATE;
	mem_state_free(&m->saved);
	m->in_tx = 0;
	return RM_OK;
}

static void mem_rollback(void *arg)
{
	struct agg_store_mem *m = arg;

	if (!m->in_tx)
		return;
	mem_state_free(&m->s);
	m->s = m->saved;
	memset(&m->saved, 0, sizeof(m->saved));
	m->in_tx = 0;
}

static struct mem_peer *mem_peer(const struct agg_store_mem *m, const char *node, uint64_t instance)
{
	size_t i;

	for (i = 0; i < m->s.npeers; i++)
		if (m->s.peers[i].instance == instance && !strcmp(m->s.peers[i].node, node))
			return &m->s.peers[i];
	return NULL;
}

static int mem_peer_get(void *arg, const char *node, uint64_t instance, uint64_t *last_seq)
{
	struct mem_peer *p;

	if (!mem_name_ok(node))
		return RM_EINVAL;
	p = mem_peer(arg, node, instance);
	*last_seq = p ? p->seq : 0;
	return RM_OK;
}

static int mem_peer_set(void *arg, const char *node, uint64_t instance, uint64_t seq)
{
	struct agg_store_mem *m = arg;
	struct mem_peer *p, *np;

	if (!mem_name_ok(node))
		return RM_EINVAL;
	if (!(p = mem_peer(m, node, instance))) {
		if (!(np = realloc(m->s.peers, (m->s.npeers + 1) * sizeof(*np))))
			return RM_ENOMEM;
		m->s.peers = np;
		p = &np[m->s.npeers++];
		snprintf(p->node, sizeof(p->node), "%s", node);
		p->instance = instance;
	}
	p->seq = seq;
	return RM_OK;
}

static int mem_add_usage(void *arg, const char *node, int64_t start, int64_t len, enum st_resource r,
			 const char *ce, uint64_t value)
{
	return mem_add(arg, MEM_USAGE, node, ce, start, len, (int)r, &value, 1, 0);
}

static int mem_add_unacct(void *arg, const char *node, int64_t start, int64_t len, enum st_resource r,
			  const char *reason, uint64_t value)
{
	return mem_add(arg, MEM_UNACCT, node, reason, start, len, (int)r, &value, 1, 0);
}

static int mem_add_total(void *arg, const char *node, int64_t start, int64_t len, enum st_resource r,
			 uint64_t value, uint64_t capacity)
{
	return mem_add(arg, MEM_TOTAL, node, NULL, start, len, (int)r, &value, 1, capacity);
}

static int mem_add_split(void *arg, const char *node, int64_t start, int64_t len, uint64_t parts)
{
	return mem_add(arg, MEM_SPLIT, node, NULL, start, len, 0, &parts, 1, 0);
}

static int mem_add_est_input(void *arg, const char *node, int64_t start, int64_t len, const char *ce,
			     uint64_t requests, uint64_t rt_ns, uint64_t rx_bytes)
{
	uint64_t v[3] = { requests, rt_ns, rx_bytes };

	return mem_add(arg, MEM_EST, node, ce, start, len, 0, v, 3, 0);
}

static struct mem_held *mem_held_find(const struct agg_store_mem *m, uint64_t id)
{
	size_t i;

	for (i = 0; i < m->s.nheld; i++)
		if (m->s.held[i].id == id)
			return &m->s.held[i];
	return NULL;
}

static int mem_held_put(void *arg, const struct st_held *h)
{
	struct agg_store_mem *m = arg;
	struct mem_held *x, *nh;
	char *dist = NULL;

	if (!h || !h->id || h->id > (uint64_t)INT64_MAX || !mem_name_ok(h->node) || !h->window_ns ||
	    !h->part_len || h->part_len > ST_HELD_PART_MAX)
		return RM_EINVAL;
	if (h->dist && !(dist = strdup(h->dist)))
		return RM_ENOMEM;
	if (!(x = mem_held_find(m, h->id))) {
		size_t at = m->s.nheld;

		if (!(nh = realloc(m->s.held, (m->s.nheld + 1) * sizeof(*nh)))) {
			free(dist);
			return RM_ENOMEM;
		}
		m->s.held = nh;
		/* kept in id order, as st_held_load reads them */
		while (at > 0 && nh[at - 1].id > h->id)
			at--;
		memmove(&nh[at + 1], &nh[at], (m->s.nheld - at) * sizeof(*nh));
		m->s.nheld++;
		x = &nh[at];
		memset(x, 0, sizeof(*x));
	}
	free(x->dist);
	x->id = h->id;
	snprintf(x->node, sizeof(x->node), "%s", h->node);
	x->instance = h->instance;
	x->window_ns = h->window_ns;
	x->arrival_ns = h->arrival_ns;
	memcpy(x->part, h->part, h->part_len);
	x->part_len = h->part_len;
	x->dist = dist;
	return RM_OK;
}

static int mem_held_resolve(void *arg, uint64_t id, const char *dist)
{
	struct mem_held *x = mem_held_find(arg, id);
	char *d;

	if (!dist)
		return RM_EINVAL;
	if (!x)
		return RM_ENOENT;
	if (!(d = strdup(dist)))
		return RM_ENOMEM;
	free(x->dist);
	x->dist = d;
	return RM_OK;
}

static int mem_held_delete(void *arg, uint64_t id)
{
	struct agg_store_mem *m = arg;
	struct mem_held *x = mem_held_find(m, id);
	size_t at;

	if (!x)
		return RM_OK;
	at = (size_t)(x - m->s.held);
	free(x->dist);
	memmove(x, x + 1, (m->s.nheld - at - 1) * sizeof(*x));
	m->s.nheld--;
	return RM_OK;
}

static int mem_held_load(void *arg, int (*cb)(void *cbarg, const struct st_held *h), void *cbarg)
{
	struct agg_store_mem *m = arg;
	size_t i;
	int rv;

	for (i = 0; i < m->s.nheld; i++) {
		const struct mem_held *x = &m->s.held[i];
		struct st_held h = { x->id, x->node, x->instance, x->window_ns, x->arrival_ns, x->part, x->part_len,
				     x->dist };

		if ((rv = cb(cbarg, &h)) != 0)
			return rv;
	}
	return RM_OK;
}

static int mem_window_sums(void *arg, const char *node, int64_t start, int64_t len, uint64_t total[ST_R_COUNT],
			   uint64_t charged[ST_R_COUNT], int *has_total)
{
	const struct agg_store_mem *m = arg;
	size_t i;

	memset(total, 0, ST_R_COUNT * sizeof(*total));
	memset(charged, 0, ST_R_COUNT * sizeof(*charged));
	*has_total = 0;
	if (!mem_name_ok(node) || len <= 0)
		return RM_EINVAL;
	for (i = 0; i < m->s.nrows; i++) {
		const struct mem_row *x = &m->s.rows[i];

		if (x->start != start || x->len != len || x->r < 0 || x->r >= ST_R_COUNT || strcmp(x->node, node))
			continue;
		if (x->kind == MEM_TOTAL) {
			total[x->r] += x->v[0];
			*has_total = 1;
		} else if (x->kind == MEM_USAGE || x->kind == MEM_UNACCT) {
			charged[x->r] += x->v[0];
		}
	}
	return RM_OK;
}

static int mem_node_seen(void *arg, const struct st_node *n)
{
	(void)arg;
	return n && mem_name_ok(n->node) ? RM_OK : RM_EINVAL;
}

int agg_store_mem_open(struct agg_store_mem **out)
{
	return (*out = calloc(1, sizeof(**out))) ? RM_OK : RM_ENOMEM;
}

void agg_store_mem_close(struct agg_store_mem *m)
{
	if (!m)
		return;
	mem_state_free(&m->s);
	mem_state_free(&m->saved);
	free(m);
}

void agg_store_mem_bind(struct agg_store_mem *m, struct agg_store *out)
{
	out->arg = m;
	out->begin = mem_begin;
	out->commit = mem_commit;
	out->rollback = mem_rollback;
	out->peer_get = mem_peer_get;
	out->peer_set = mem_peer_set;
	out->add_usage = mem_add_usage;
	out->add_unacct = mem_add_unacct;
	out->add_total = mem_add_total;
	out->add_split = mem_add_split;
	out->add_est_input = mem_add_est_input;
	out->held_put = mem_held_put;
	out->held_resolve = mem_held_resolve;
	out->held_delete = mem_held_delete;
	out->held_load = mem_held_load;
	out->window_sums = mem_window_sums;
	out->node_seen = mem_node_seen;
}

static uint64_t mem_sum(const struct agg_store_mem *m, int kind, const char *node, const char *key, int r,
			int64_t start)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < m->s.nrows; i++) {
		const struct mem_row *x = &m->s.rows[i];

		if (x->kind == kind && x->r == r && !strcmp(x->node, node) && (!key || !strcmp(x->key, key)) &&
		    (start == INT64_MIN || x->start == start))
			v += x->v[0];
	}
	return v;
}

uint64_t agg_store_mem_usage(const struct agg_store_mem *m, const char *node, const char *ce, int r)
{
	return mem_sum(m, MEM_USAGE, node, ce, r, INT64_MIN);
}

uint64_t agg_store_mem_unacct(const struct agg_store_mem *m, const char *node, const char *reason, int r)
{
	return mem_sum(m, MEM_UNACCT, node, reason, r, INT64_MIN);
}

uint64_t agg_store_mem_total(const struct agg_store_mem *m, const char *node, int r)
{
	return mem_sum(m, MEM_TOTAL, node, NULL, r, INT64_MIN);
}

size_t agg_store_mem_est(const struct agg_store_mem *m, const char *node, const char *ce, uint64_t v[3])
{
	size_t i, j, n = 0;

	for (i = 0; i < m->s.nrows; i++) {
		const struct mem_row *x = &m->s.rows[i];

		if (x->kind != MEM_EST || strcmp(x->node, node) || (ce && strcmp(x->key, ce)))
			continue;
		for (j = 0; j < 3; j++)
			v[j] += x->v[j];
		n++;
	}
	return n;
}

uint64_t agg_store_mem_splits(const struct agg_store_mem *m, const char *node, int64_t start)
{
	return mem_sum(m, MEM_SPLIT, node, NULL, 0, start);
}

size_t agg_store_mem_unbalanced(const struct agg_store_mem *m, uint64_t *windows)
{
	size_t i, j, bad = 0;
	uint64_t n = 0;

	for (i = 0; i < m->s.nrows; i++) {
		const struct mem_row *x = &m->s.rows[i];
		uint64_t total = 0, explained = 0;
		int first = 1;

		if (x->kind != MEM_USAGE && x->kind != MEM_UNACCT && x->kind != MEM_TOTAL)
			continue;
		/* each (node, resource, window) once: at its first row */
		for (j = 0; j < m->s.nrows; j++) {
			const struct mem_row *y = &m->s.rows[j];

			if ((y->kind != MEM_USAGE && y->kind != MEM_UNACCT && y->kind != MEM_TOTAL) || y->r != x->r ||
			    y->start != x->start || y->len != x->len || strcmp(y->node, x->node))
				continue;
			if (j < i)
				first = 0;
			if (y->kind == MEM_TOTAL)
				total += y->v[0];
			else
				explained += y->v[0];
		}
		if (!first)
			continue;
		n++;
		bad += total != explained;
	}
	if (windows)
		*windows = n;
	return bad;
}

void agg_store_mem_held_count(const struct agg_store_mem *m, uint64_t *held, uint64_t *unresolved)
{
	size_t i;

	*held = m->s.nheld;
	*unresolved = 0;
	for (i = 0; i < m->s.nheld; i++)
		*unresolved += m->s.held[i].dist == NULL;
}

void agg_store_mem_drop_usage(struct agg_store_mem *m, const char *node)
{
	size_t i, j;

	for (i = j = 0; i < m->s.nrows; i++)
		if (m->s.rows[i].kind != MEM_USAGE || strcmp(m->s.rows[i].node, node))
			m->s.rows[j++] = m->s.rows[i];
	m->s.nrows = j;
}
