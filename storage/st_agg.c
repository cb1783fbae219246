/*
 * st_agg.c - the summing behind st_query_usage and st_query_unacct: the
 * rows of the chosen series are read in one plain scan per table (no SQL
 * grouping or joins) and summed here per (server, resource, window or
 * period, CE or reason) with int64 overflow checks, then V = U - sum_c U_c
 * and the unexplained residual are derived per group and the rows sorted
 * as st.h documents. Owns the hash tables of one query.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rm_err.h"
#include "st_int.h"
#include "banned.h"

/* A sum per (server, resource, ws, wl, key); key "" for a group. */
struct st_cell {
	const char *server, *key; /* interned in the arena */
	int resource;
	int64_t ws, wl;
	int64_t sum, sum2;        /* value (and capacity for totals) */
	int64_t s, t, c, k;       /* groups: sum of U_c, U, capacity, reasons */
	unsigned has;             /* groups: 1 U_c seen, 2 U seen, 4 reason seen */
};

struct st_map {
	struct st_cell *v;
	size_t n, cap;
	size_t *slot, nslot; /* index + 1; 0 empty */
};

/* Interned strings: a few distinct names, so a small chained list of blocks. */
struct st_names {
	char **s;
	size_t n, cap;
};

/* One interned name and its rank among all of them in strcmp order (set
 * by st_rank_names, for sorting rows without comparing strings). */
struct st_name {
	uint32_t rank;
	char s[];
};

static struct st_name *st_name_of(const char *s)
{
	return (struct st_name *)(void *)((char *)(uintptr_t)s - offsetof(struct st_name, s));
}

static void st_names_free(struct st_names *a)
{
	size_t i;

	for (i = 0; i < a->n; i++)
		free(st_name_of(a->s[i]));
	free(a->s);
}

static int st_strp_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Ranks every interned name: RM_OK or RM_ENOMEM. */
static int st_rank_names(const struct st_names *a)
{
	char **v = a->n ? malloc(a->n * sizeof(*v)) : NULL;
	size_t i;

	if (a->n && !v)
		return RM_ENOMEM;
	if (a->n)
		memcpy(v, a->s, a->n * sizeof(*v));
	qsort(v, a->n, sizeof(*v), st_strp_cmp);
	for (i = 0; i < a->n; i++)
		st_name_of(v[i])->rank = (uint32_t)i;
	free(v);
	return RM_OK;
}

/* The interned copy of s (hashed through a tiny open table kept in a->s
 * order; the number of distinct servers, CEs and reasons is small). */
struct st_intern {
	struct st_names all;
	const char **slot;
	size_t nslot;
};

static uint64_t st_hs(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static const char *st_intern(struct st_intern *in, const char *s)
{
	size_t j, i;

	if ((in->all.n + 1) * 2 > in->nslot) {
		size_t ns = in->nslot ? in->nslot * 2 : 256;
		const char **sl = calloc(ns, sizeof(*sl));

		if (!sl)
			return NULL;
		for (i = 0; i < in->all.n; i++) {
			for (j = st_hs(in->all.s[i]) & (ns - 1); sl[j]; j = (j + 1) & (ns - 1))
				;
			sl[j] = in->all.s[i];
		}
		free(in->slot);
		in->slot = sl;
		in->nslot = ns;
	}
	for (j = st_hs(s) & (in->nslot - 1); in->slot[j]; j = (j + 1) & (in->nslot - 1))
		if (strcmp(in->slot[j], s) == 0)
			return in->slot[j];
	if (in->all.n == in->all.cap) {
		size_t cap = in->all.cap ? in->all.cap * 2 : 64;
		char **v = realloc(in->all.s, cap * sizeof(*v));

		if (!v)
			return NULL;
		in->all.s = v;
		in->all.cap = cap;
	}
	{
		size_t len = strlen(s) + 1;
		struct st_name *nm = malloc(sizeof(*nm) + len);

		if (!nm)
			return NULL;
		nm->rank = 0;
		memcpy(nm->s, s, len);
		in->all.s[in->all.n] = nm->s;
	}
	in->slot[j] = in->all.s[in->all.n];
	return in->all.s[in->all.n++];
}

/* Interned pointers compare by address. */
static uint64_t st_cell_hash(const char *server, int resource, int64_t ws, int64_t wl, const char *key)
{
	uint64_t h = (uint64_t)(uintptr_t)server * 0x9e3779b97f4a7c15ULL;

	h ^= (uint64_t)(uintptr_t)key * 0xc2b2ae3d27d4eb4fULL;
	h ^= (uint64_t)ws * 0x165667b19e3779f9ULL + (uint64_t)wl + (uint64_t)resource * 31;
	return h ^ (h >> 29);
}

static int st_map_grow(struct st_map *m)
{
	size_t ns = m->nslot ? m->nslot * 2 : 1024, i, j;
	size_t *sl = calloc(ns, sizeof(*sl));

	if (!sl)
		return RM_ENOMEM;
	for (i = 0; i < m->n; i++) {
		const struct st_cell *c = &m->v[i];

		for (j = st_cell_hash(c->server, c->resource, c->ws, c->wl, c->key) & (ns - 1); sl[j];
		     j = (j + 1) & (ns - 1))
			;
		sl[j] = i + 1;
	}
	free(m->slot);
	m->slot = sl;
	m->nslot = ns;
	return RM_OK;
}

static struct st_cell *st_map_get(struct st_map *m, const char *server, int resource, int64_t ws,
				  int64_t wl, const char *key)
{
	size_t j;

	if ((m->n + 1) * 2 > m->nslot && st_map_grow(m) != RM_OK)
		return NULL;
	for (j = st_cell_hash(server, resource, ws, wl, key) & (m->nslot - 1); m->slot[j];
	     j = (j + 1) & (m->nslot - 1)) {
		struct st_cell *c = &m->v[m->slot[j] - 1];

		if (c->server == server && c->key == key && c->resource == resource && c->ws == ws &&
		    c->wl == wl)
			return c;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		struct st_cell *v = realloc(m->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		m->v = v;
		m->cap = cap;
	}
	memset(&m->v[m->n], 0, sizeof(m->v[0]));
	m->v[m->n].server = server;
	m->v[m->n].key = key;
	m->v[m->n].resource = resource;
	m->v[m->n].ws = ws;
	m->v[m->n].wl = wl;
	m->slot[j] = m->n + 1;
	return &m->v[m->n++];
}

static void st_map_free(struct st_map *m)
{
	free(m->v);
	free(m->slot);
}

/* The state of one query. */
struct st_agg {
	st_db *db;
	const struct st_query *q;
	int64_t step;        /* > 0: per period */
	int per_window;
	int unacct;          /* st_query_unacct: U_c only as sums per group */
	int all_servers;     /* ST_AGG_USAGE_ALL: keyed cells without their server */
	struct st_intern in;
	const char *empty;
	struct st_map keyed; /* per CE or reason */
	struct st_map group; /* per (server, resource, ws, wl) */
};

static int st_agg_add(int64_t *acc, int64_t v)
{
	return __builtin_add_overflow(*acc, v, acc) ? -1 : 0;
}

/* Reads table t (0 usage, 1 unacct, 2 total) over the segments into a. */
static int st_agg_scan(struct st_agg *a, const char *sql, int t)
{
	sqlite3_stmt *s;
	int rc, rv = RM_OK;

	rc = sqlite3_prepare_v2(a->db->h, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return st_sql_err(a->db, rc, "failed to query");
	st_query_bind(s, a->q);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *server = st_intern(&a->in, st_col_text(s, 0));
		const char *key = t < 2 ? st_intern(&a->in, st_col_text(s, 4)) : a->empty;
		int res = sqlite3_column_int(s, 1);
		int64_t ws = sqlite3_column_int64(s, 2), wl = sqlite3_column_int64(s, 3);
		int64_t v = sqlite3_column_int64(s, t < 2 ? 5 : 4);
		struct st_cell *g, *c;

		if (a->step) {
			ws -= ((ws % a->step) + a->step) % a->step;
			wl = a->step;
		} else if (!a->per_window) {
			ws = wl = 0;
		}
		if (!server || !key || !(g = st_map_get(&a->group, server, res, ws, wl, a->empty))) {
			rv = RM_ENOMEM;
			break;
		}
		if (t == 2) {
			g->has |= 2;
			if (st_agg_add(&g->t, v) || st_agg_add(&g->c, sqlite3_column_int64(s, 5)))
				goto overflow;
			continue;
		}
		if (t == 0 && a->unacct) {
			g->has |= 1;
			if (st_agg_add(&g->s, v))
				goto overflow;
			continue;
		}
		if (!(c = st_map_get(&a->keyed, a->all_servers ? a->empty : server, res, ws, wl, key))) {
			rv = RM_ENOMEM;
			break;
		}
		c->has = t == 0 ? 1 : 4;
		g->has |= c->has;
		if (st_agg_add(&c->sum, v) || st_agg_add(t == 0 ? &g->s : &g->k, v))
			goto overflow;
	}
	if (rv == RM_OK && rc != SQLITE_DONE)
		rv = st_sql_err(a->db, rc, "failed to query");
	else if (rv == RM_ENOMEM)
		rm_log_error("failed to query '%s': %s", a->db->path, rm_strerror(rv));
	sqlite3_finalize(s);
	return rv;
overflow:
	sqlite3_finalize(s);
	rm_log_error("failed to query '%s': a sum overflows int64", a->db->path);
	return RM_ESQL;
}

/* The sort key of an output row: server, resource, ws, wl, keyed rows
 * before the group row, value descending, key (names by rank). */
struct st_ord {
	uint32_t srank, krank;
	int res, isv;
	int64_t ws, wl;
	uint64_t value;
	size_t idx; /* the row */
};

static int st_ord_cmp(const void *pa, const void *pb)
{
	const struct st_ord *a = pa, *b = pb;

	if (a->srank != b->srank)
		return a->srank < b->srank ? -1 : 1;
	if (a->res != b->res)
		return a->res < b->res ? -1 : 1;
	if (a->ws != b->ws)
		return a->ws < b->ws ? -1 : 1;
	if (a->wl != b->wl)
		return a->wl < b->wl ? -1 : 1;
	if (a->isv != b->isv)
		return a->isv ? 1 : -1;
	if (a->value != b->value)
		return a->value > b->value ? -1 : 1;
	return a->krank < b->krank ? -1 : a->krank > b->krank;
}

/* Puts out[0..n) in the output order; names[i] = the server and key (NULL
 * for a group row) of out[i]. RM_OK or RM_ENOMEM (out unchanged). */
static int st_sort_rows(struct st_names *in, struct st_row **out, const char *(*names)[2], size_t n)
{
	struct st_ord *o = malloc(n * sizeof(*o));
	struct st_row tmp;
	size_t i, j, k;

	if (!o || st_rank_names(in) != RM_OK) {
		free(o);
		return RM_ENOMEM;
	}
	for (i = 0; i < n; i++) {
		const struct st_row *r = &(*out)[i];

		o[i].srank = st_name_of(names[i][0])->rank;
		o[i].krank = names[i][1] ? st_name_of(names[i][1])->rank : 0;
		o[i].res = (int)r->resource;
		o[i].isv = !names[i][1];
		o[i].ws = r->win_start_ns;
		o[i].wl = r->win_len_ns;
		o[i].value = r->value;
		o[i].idx = i;
	}
	qsort(o, n, sizeof(*o), st_ord_cmp);
	/* row i goes where o says, in place, cycle by cycle (a used place's
	 * idx becomes SIZE_MAX) */
	for (i = 0; i < n; i++) {
		if (o[i].idx == SIZE_MAX)
			continue;
		tmp = (*out)[i];
		for (j = i; o[j].idx != i; j = k) {
			k = o[j].idx;
			(*out)[j] = (*out)[k];
			o[j].idx = SIZE_MAX;
		}
		(*out)[j] = tmp;
		o[j].idx = SIZE_MAX;
	}
	free(o);
	return RM_OK;
}

static uint64_t st_pos(int64_t v)
{
	return v > 0 ? (uint64_t)v : 0;
}

static void st_fill(struct st_row *r, const struct st_cell *g)
{
	snprintf(r->server, sizeof(r->server), "%s", g->server);
	r->resource = g->resource >= 0 && g->resource < ST_R_COUNT ? (enum st_resource)g->resource : ST_R_CPU;
	r->win_start_ns = g->ws;
	r->win_len_ns = g->wl;
	r->total = st_pos(g->t);
	r->capacity = st_pos(g->c);
}

/* Sums the groups of a (per server, or already summed: server "") into
 * groups without a server: t, c, s, has summed; sum = the sum of the
 * residuals t - s, so V of all servers = sum U - sum U_c. */
static int st_agg_fold(struct st_agg *a, struct st_map *all)
{
	size_t i;

	for (i = 0; i < a->group.n; i++) {
		const struct st_cell *g = &a->group.v[i];
		struct st_cell *G = st_map_get(all, a->empty, g->resource, g->ws, g->wl, a->empty);
		int64_t res;

		if (!G)
			return RM_ENOMEM;
		G->has |= g->has;
		if (st_agg_add(&G->t, g->t) || st_agg_add(&G->c, g->c) || st_agg_add(&G->s, g->s) ||
		    __builtin_sub_overflow(g->t, g->s, &res) || st_agg_add(&G->sum, res)) {
			rm_log_error("failed to query '%s': a sum overflows int64", a->db->path);
			return RM_ESQL;
		}
	}
	return RM_OK;
}

int st_agg_query(st_db *db, const struct st_query *q, int64_t step, int mode,
		 const char *const sql[3], struct st_row **rows, size_t *n)
{
	int unacct = mode == ST_AGG_UNACCT;
	struct st_agg a = { .db = db, .q = q, .step = step, .per_window = q->per_window, .unacct = unacct,
			    .all_servers = mode == ST_AGG_USAGE_ALL };
	struct st_map all = { 0 }, *groups = &a.group;
	struct st_row *out = NULL;
	const char *(*names)[2] = NULL; /* per row of out: its server and key (NULL: group row) */
	size_t i, no = 0, cap;
	int want_ce = 1, want_v = 1, rv = RM_OK, t;

	if (!(a.empty = st_intern(&a.in, ""))) {
		rv = RM_ENOMEM;
		goto done;
	}
	for (t = 0; t < 3 && rv == RM_OK; t++)
		if (sql[t])
			rv = st_agg_scan(&a, sql[t], t);
	if (rv == RM_OK && a.all_servers) {
		rv = st_agg_fold(&a, &all);
		groups = &all;
	}
	if (rv != RM_OK) {
		if (rv == RM_ENOMEM)
			rm_log_error("failed to query '%s': %s", db->path, rm_strerror(rv));
		goto done;
	}
	if (!unacct && q->ce) {
		if (strcmp(q->ce, ST_CE_UNACCOUNTABLE) == 0)
			want_ce = 0;
		else
			want_v = 0;
	}
	cap = a.keyed.n + groups->n;
	if (cap && (!(out = calloc(cap, sizeof(*out))) || !(names = malloc(cap * sizeof(*names))))) {
		rv = RM_ENOMEM;
		rm_log_error("failed to query '%s': %s", db->path, rm_strerror(rv));
		goto done;
	}
	for (i = 0; i < a.keyed.n; i++) {
		const struct st_cell *c = &a.keyed.v[i];
		const struct st_cell *g = st_map_get(groups, c->server, c->resource, c->ws, c->wl, a.empty);
		struct st_row *r;

		if (unacct ? (c->has != 4 || c->sum == 0) : (c->has != 1 || !want_ce || (q->ce && strcmp(c->key, q->ce))))
			continue;
		names[no][0] = g->server;
		names[no][1] = c->key;
		r = &out[no++];
		st_fill(r, g);
		if (unacct)
			snprintf(r->reason, sizeof(r->reason), "%s", c->key);
		else
			snprintf(r->ce, sizeof(r->ce), "%s", c->key);
		r->value = st_pos(c->sum);
	}
	for (i = 0; i < groups->n; i++) {
		const struct st_cell *g = &groups->v[i];
		int64_t res;
		struct st_row *r;

		if (unacct ? 0 : (!want_v || !(g->has & 3)))
			continue;
		names[no][0] = g->server;
		names[no][1] = NULL;
		if (a.all_servers) {
			r = &out[no++];
			st_fill(r, g);
			snprintf(r->ce, sizeof(r->ce), "%s", ST_CE_UNACCOUNTABLE);
			r->residual = g->sum;
			r->value = st_pos(g->sum);
			continue;
		}
		if (__builtin_sub_overflow(g->t, g->s, &res) ||
		    (unacct && __builtin_sub_overflow(res, g->k, &res))) {
			rm_log_error("failed to query '%s': residual overflows int64", db->path);
			rv = RM_ESQL;
			goto done;
		}
		if (unacct && res == 0)
			continue;
		r = &out[no++];
		st_fill(r, g);
		if (unacct)
			snprintf(r->reason, sizeof(r->reason), "%s", ST_REASON_UNEXPLAINED);
		else
			snprintf(r->ce, sizeof(r->ce), "%s", ST_CE_UNACCOUNTABLE);
		r->residual = res;
		r->value = st_pos(res);
	}
	if (no > 1 && (rv = st_sort_rows(&a.in.all, &out, names, no)) != RM_OK)
		rm_log_error("failed to query '%s': %s", db->path, rm_strerror(rv));
done:
	free(names);
	st_map_free(&a.keyed);
	st_map_free(&a.group);
	st_map_free(&all);
	st_names_free(&a.in.all);
	free(a.in.slot);
	if (rv != RM_OK || !no) {
		free(out);
		out = NULL;
		no = 0;
	}
	*rows = out;
	*n = no;
	return rv;
}
