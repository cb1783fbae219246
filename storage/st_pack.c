/*
 * st_pack.c - the packed day series: one row per (server, resource, day)
 * holding U, the capacity and, packed into blobs, every CE's U_c and every
 * reason's V_k of that day. It answers whole-day queries that keep
 * servers and CEs apart with 1 row where the day series has one per CE.
 * Owns the blob format, the SQL functions that build it (st_pack,
 * st_pack_add), the pass that packs settled days, and the read of packed
 * days (st_query_days). Tables r_pack and pack_state (schema v9).
 *
 * Blob: entries sorted by name (bytewise), names unique; each entry is the
 * name's bytes, a NUL, and the value as 8 bytes little-endian. Values are
 * exact sums of the day rows (integers in [0, INT64_MAX]).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rm_err.h"
#include "st_int.h"
#include "banned.h"

#define DAY_NS (86400 * ST_NS_PER_S)

/* ---- the blob ---- */

struct st_ent {
	const char *name; /* NUL-terminated, inside the blob or the caller's */
	uint64_t value;
};

static void st_put64(unsigned char *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t st_get64(const unsigned char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Parses blob (len bytes) into *ents (grown as needed; *cap its size):
 * the number of entries, or -1 for a malformed blob or no memory. The
 * names point into the blob. */
static long st_unpack(const unsigned char *b, size_t len, struct st_ent **ents, size_t *cap)
{
	size_t n = 0, i = 0;

	while (i < len) {
		const unsigned char *nul = memchr(b + i, 0, len - i);

		if (!nul || (size_t)(nul - b) + 9 > len)
			return -1;
		if (n == *cap) {
			size_t c = *cap ? *cap * 2 : 128;
			struct st_ent *e = realloc(*ents, c * sizeof(*e));

			if (!e)
				return -1;
			*ents = e;
			*cap = c;
		}
		(*ents)[n].name = (const char *)b + i;
		(*ents)[n].value = st_get64(nul + 1);
		n++;
		i = (size_t)(nul - b) + 9;
	}
	return (long)n;
}

/* Bytes of the blob of ents[0..n). */
static size_t st_pack_len(const struct st_ent *e, size_t n)
{
	size_t len = 0, i;

	for (i = 0; i < n; i++)
		len += strlen(e[i].name) + 9;
	return len;
}

static void st_pack_write(unsigned char *p, const struct st_ent *e, size_t n)
{
	size_t i, l;

	for (i = 0; i < n; i++) {
		l = strlen(e[i].name) + 1;
		memcpy(p, e[i].name, l);
		st_put64(p + l, e[i].value);
		p += l + 8;
	}
}

/* Sets the function's result to the blob of e[0..n) (NULL when n = 0). */
static void st_pack_result(sqlite3_context *ctx, const struct st_ent *e, size_t n)
{
	size_t len = st_pack_len(e, n);
	unsigned char *p;

	if (!n) {
		sqlite3_result_null(ctx);
		return;
	}
	if (!(p = sqlite3_malloc64(len))) {
		sqlite3_result_error_nomem(ctx);
		return;
	}
	st_pack_write(p, e, n);
	sqlite3_result_blob64(ctx, p, len, sqlite3_free);
}

/* The value argument: an integer in [0, INT64_MAX], else -1. */
static int64_t st_arg_value(sqlite3_value *v)
{
	int64_t x;

	if (sqlite3_value_type(v) != SQLITE_INTEGER || (x = sqlite3_value_int64(v)) < 0)
		return -1;
	return x;
}

/* The name argument: text of 1..ST_NAME_MAX bytes without NUL, else NULL. */
static const char *st_arg_name(sqlite3_value *v)
{
	const char *s;
	int len;

	if (sqlite3_value_type(v) != SQLITE_TEXT)
		return NULL;
	s = (const char *)sqlite3_value_text(v);
	len = sqlite3_value_bytes(v);
	if (!s || len < 1 || len > ST_NAME_MAX || strlen(s) != (size_t)len)
		return NULL;
	return s;
}

/* st_pack(name, value): aggregate, the blob of the sums per name. */
struct st_agg_ctx {
	struct st_ent *e;
	char (*names)[ST_NAME_MAX + 1];
	size_t n, cap;
	int bad;
};

static void st_pack_step(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	struct st_agg_ctx *a = sqlite3_aggregate_context(ctx, sizeof(*a));
	const char *name = st_arg_name(argv[0]);
	int64_t v = st_arg_value(argv[1]);

	(void)argc;
	if (!a) {
		sqlite3_result_error_nomem(ctx);
		return;
	}
	if (!name || v < 0) {
		a->bad = 1;
		return;
	}
	if (a->n == a->cap) {
		size_t c = a->cap ? a->cap * 2 : 64;
		struct st_ent *e = sqlite3_realloc64(a->e, c * sizeof(*e));
		char(*nm)[ST_NAME_MAX + 1];

		if (e)
			a->e = e;
		nm = sqlite3_realloc64(a->names, c * sizeof(*nm));
		if (!e || !nm) {
			a->bad = 2;
			return;
		}
		a->names = nm;
		a->cap = c;
	}
	memcpy(a->names[a->n], name, strlen(name) + 1);
	a->e[a->n].value = (uint64_t)v;
	a->n++;
}

static int st_ent_cmp(const void *pa, const void *pb)
{
	return strcmp(((const struct st_ent *)pa)->name, ((const struct st_ent *)pb)->name);
}

static void st_pack_final(sqlite3_context *ctx)
{
	struct st_agg_ctx *a = sqlite3_aggregate_context(ctx, 0);
	size_t i, w;

	if (!a || !a->n) {
		sqlite3_result_null(ctx);
	} else if (a->bad) {
		if (a->bad == 2)
			sqlite3_result_error_nomem(ctx);
		else
			sqlite3_result_error(ctx, "st_pack: a name or value out of range", -1);
	} else {
		for (i = 0; i < a->n; i++)
			a->e[i].name = a->names[i];
		qsort(a->e, a->n, sizeof(a->e[0]), st_ent_cmp);
		for (i = 1, w = 0; i < a->n; i++) {
			if (strcmp(a->e[i].name, a->e[w].name) != 0) {
				a->e[++w] = a->e[i];
				continue;
			}
			if (a->e[w].value + a->e[i].value > (uint64_t)INT64_MAX) {
				sqlite3_result_error(ctx, "st_pack: a sum exceeds the int64 limit", -1);
				goto out;
			}
			a->e[w].value += a->e[i].value;
		}
		st_pack_result(ctx, a->e, w + 1);
	}
out:
	if (a) {
		sqlite3_free(a->e);
		sqlite3_free(a->names);
	}
}

/* st_pack_add(blob, name, value): blob with value added to name's entry
 * (inserted in its place if missing). */
static void st_pack_add_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	const unsigned char *b = sqlite3_value_blob(argv[0]);
	size_t len = (size_t)sqlite3_value_bytes(argv[0]), cap = 0, i, n;
	const char *name = st_arg_name(argv[1]);
	int64_t v = st_arg_value(argv[2]);
	struct st_ent *e = NULL;
	long got;

	(void)argc;
	if (!name || v < 0) {
		sqlite3_result_error(ctx, "st_pack_add: a name or value out of range", -1);
		return;
	}
	if (sqlite3_value_type(argv[0]) == SQLITE_NULL)
		len = 0;
	/* one spare entry for an insert */
	if ((got = st_unpack(b, len, &e, &cap)) >= 0 && (size_t)got == cap) {
		struct st_ent *more = realloc(e, (cap + 1) * sizeof(*e));

		if (more)
			e = more;
		else
			got = -1;
	}
	if (got < 0) {
		free(e);
		sqlite3_result_error(ctx, "st_pack_add: malformed blob or out of memory", -1);
		return;
	}
	n = (size_t)got;
	for (i = 0; i < n && strcmp(e[i].name, name) < 0; i++)
		;
	if (i < n && strcmp(e[i].name, name) == 0) {
		if (e[i].value + (uint64_t)v > (uint64_t)INT64_MAX) {
			free(e);
			sqlite3_result_error(ctx, "st_pack_add: a sum exceeds the int64 limit", -1);
			return;
		}
		e[i].value += (uint64_t)v;
	} else {
		memmove(&e[i + 1], &e[i], (n - i) * sizeof(*e));
		e[i].name = name;
		e[i].value = (uint64_t)v;
		n++;
	}
	st_pack_result(ctx, e, n);
	free(e);
}

int st_pack_register(sqlite3 *h)
{
	int rc = sqlite3_create_function_v2(h, "st_pack", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, NULL,
					    st_pack_step, st_pack_final, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_create_function_v2(h, "st_pack_add", 3, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
						st_pack_add_fn, NULL, NULL, NULL);
	return rc;
}

/* ---- packing settled days ---- */

int st_pack_until(st_db *db, int64_t *until, int *found)
{
	sqlite3_stmt *s;
	int rc;

	*found = 0;
	rc = sqlite3_prepare_v2(db->h, "SELECT packed_until FROM pack_state WHERE id = 1", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return st_sql_err(db, rc, "failed to query");
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*until = sqlite3_column_int64(s, 0);
		*found = 1;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return st_sql_err(db, rc, "failed to query");
	return RM_OK;
}

/* Runs sql binding ?1 = a, ?2 = b. */
static int st_exec2(st_db *db, const char *sql, int64_t a, int64_t b, const char *what)
{
	sqlite3_stmt *s;
	int rc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL);

	if (rc != SQLITE_OK)
		return st_sql_err(db, rc, what);
	sqlite3_bind_int64(s, 1, a);
	sqlite3_bind_int64(s, 2, b);
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? RM_OK : st_sql_err(db, rc, what);
}

static int64_t st_day_floor(int64_t x)
{
	int64_t m = ((x % DAY_NS) + DAY_NS) % DAY_NS;

	return x - m;
}

int st_pack_pass(st_db *db, int64_t horizon, int64_t first_day, int have_first, int *more)
{
	int64_t from, to, settled = st_day_floor(horizon);
	int found, rv;

	if ((rv = st_pack_until(db, &from, &found)) != 0)
		return rv;
	if (!found)
		from = have_first ? st_day_floor(first_day) : settled;
	if (from > settled)
		from = settled;
	/* one day a call: a tick's work (25 500 day rows at 100 CEs x 50 servers) */
	to = from < settled ? from + DAY_NS : from;
	if (to < settled)
		*more = 1;
	if (from < to &&
	    (rv = st_exec2(db, "INSERT INTO r_pack (win_start, server, resource, total, capacity, ces, reasons) "
			       ST_PACK_SELECT("?1", "?2"), from, to, "failed to pack the day series of")) != 0)
		return rv;
	if (!found || from < to)
		return st_exec2(db, "INSERT INTO pack_state (id, packed_until) VALUES (1, ?1) "
				    "ON CONFLICT DO UPDATE SET packed_until = max(packed_until, excluded.packed_until)",
				to, 0, "failed to pack the day series of");
	return RM_OK;
}

/* ---- reading packed days ---- */

struct st_days_read {
	struct st_ent *e;
	size_t cap;
	const char **names;
	uint64_t *values;
	size_t ncap;
};

/* Steps s (columns win_start, server, resource, total, capacity, ces) and
 * calls cb per row. */
static int st_days_rows(st_db *db, sqlite3_stmt *s, struct st_days_read *r,
			int (*cb)(void *arg, const struct st_day *d), void *arg)
{
	struct st_day d;
	int rc, rv;
	long n, i;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const unsigned char *b = sqlite3_column_blob(s, 5);
		size_t len = (size_t)sqlite3_column_bytes(s, 5);
		uint64_t charged = 0;

		/* as st_query_usage_step: a group needs a U_c or a U row */
		if (!b && sqlite3_column_type(s, 3) == SQLITE_NULL)
			continue;
		if ((n = st_unpack(b, b ? len : 0, &r->e, &r->cap)) < 0) {
			rm_log_error("failed to query '%s': a packed day is malformed", db->path);
			return RM_ESQL;
		}
		if ((size_t)n > r->ncap) {
			const char **nm = realloc(r->names, (size_t)n * sizeof(*nm));
			uint64_t *v;

			if (nm)
				r->names = nm;
			v = realloc(r->values, (size_t)n * sizeof(*v));
			if (!nm || !v)
				return RM_ENOMEM;
			r->values = v;
			r->ncap = (size_t)n;
		}
		for (i = 0; i < n; i++) {
			r->names[i] = r->e[i].name;
			r->values[i] = r->e[i].value;
			if (__builtin_add_overflow(charged, r->e[i].value, &charged)) {
				rm_log_error("failed to query '%s': a sum exceeds the int64 limit", db->path);
				return RM_ESQL;
			}
		}
		d.start_ns = sqlite3_column_int64(s, 0);
		d.server = st_col_text(s, 1);
		d.resource = (enum st_resource)sqlite3_column_int(s, 2);
		d.total = (uint64_t)sqlite3_column_int64(s, 3);
		d.capacity = (uint64_t)sqlite3_column_int64(s, 4);
		d.n = (size_t)n;
		d.ce = r->names;
		d.value = r->values;
		d.charged = charged;
		if ((rv = cb(arg, &d)) != 0)
			return rv;
	}
	return rc == SQLITE_DONE ? RM_OK : st_sql_err(db, rc, "failed to query");
}

/* The days not yet packed, straight from the day rows in their key order
 * (usage: day, server, resource, CE; totals: day, server, resource),
 * merged into groups: no grouping or packing in SQL. */
static int st_days_unpacked(st_db *db, const struct st_query *q, struct st_days_read *r,
			    int (*cb)(void *arg, const struct st_day *d), void *arg);

#define ST_DAYS_FILTER " AND (:server IS NULL OR server = :server) AND (:res < 0 OR resource = :res)"

int st_query_days(st_db *db, const struct st_query *q, int (*cb)(void *arg, const struct st_day *d),
		  void *arg)
{
	static const char sql[] = "SELECT win_start, server, resource, total, capacity, ces FROM r_pack "
				  "WHERE win_start >= :since AND win_start < :until" ST_DAYS_FILTER
				  " ORDER BY win_start, server, resource";
	struct st_days_read r = { 0 };
	struct st_query part;
	int64_t packed = INT64_MIN;
	int found, rv = RM_OK, i, rc;
	size_t unused;

	if (!cb) {
		rm_log_error("invalid query: null argument");
		return RM_EINVAL;
	}
	if ((rv = st_check_query(db, q, &r, &unused)) != 0)
		return rv;
	if (q->ce || q->per_window || st_day_floor(q->since_ns) != q->since_ns ||
	    st_day_floor(q->until_ns) != q->until_ns) {
		rm_log_error("invalid query: packed days need whole UTC days, every CE, not per window");
		return RM_EINVAL;
	}
	if ((rv = st_pack_until(db, &packed, &found)) != 0)
		return rv;
	if (!found)
		packed = INT64_MIN;
	/* the packed days, then the days not yet packed from the day rows */
	for (i = 0; i < 2 && rv == RM_OK; i++) {
		sqlite3_stmt *s;

		part = *q;
		if (i == 0 && part.until_ns > packed)
			part.until_ns = packed;
		if (i == 1 && part.since_ns < packed)
			part.since_ns = packed;
		if (part.since_ns >= part.until_ns)
			continue;
		if (i == 1) {
			rv = st_days_unpacked(db, &part, &r, cb, arg);
			break;
		}
		rc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL);
		if (rc != SQLITE_OK) {
			rv = st_sql_err(db, rc, "failed to query");
			break;
		}
		st_query_bind(s, &part);
		rv = st_days_rows(db, s, &r, cb, arg);
		sqlite3_finalize(s);
	}
	free(r.e);
	free(r.names);
	free(r.values);
	return rv;
}

/* Key order of (day, server, resource): <0, 0, >0. */
static int st_key_cmp(int64_t da, const char *sa, int ra, int64_t db_, const char *sb, int rb)
{
	int c;

	if (da != db_)
		return da < db_ ? -1 : 1;
	if ((c = strcmp(sa, sb)) != 0)
		return c;
	return ra < rb ? -1 : ra > rb;
}

static int st_days_unpacked(st_db *db, const struct st_query *q, struct st_days_read *r,
			    int (*cb)(void *arg, const struct st_day *d), void *arg)
{
	static const char *const sql[2] = {
		"SELECT win_start, server, resource, ce, value FROM r_usage WHERE step = " ST_PACK_DAY
		" AND win_start >= :since AND win_start < :until" ST_DAYS_FILTER
		" ORDER BY win_start, server, resource, ce",
		"SELECT win_start, server, resource, value, capacity FROM r_total WHERE step = " ST_PACK_DAY
		" AND win_start >= :since AND win_start < :until" ST_DAYS_FILTER
		" ORDER BY win_start, server, resource",
	};
	sqlite3_stmt *s[2] = { NULL, NULL };
	char (*names)[ST_NAME_MAX + 1] = NULL, server[ST_NAME_MAX + 1];
	size_t ncap = 0;
	int rc[2], i, rv = RM_OK;

	for (i = 0; i < 2; i++) {
		int e = sqlite3_prepare_v2(db->h, sql[i], -1, &s[i], NULL);

		if (e != SQLITE_OK) {
			rv = st_sql_err(db, e, "failed to query");
			goto out;
		}
		st_query_bind(s[i], q);
		rc[i] = sqlite3_step(s[i]);
	}
	while (rv == RM_OK && (rc[0] == SQLITE_ROW || rc[1] == SQLITE_ROW)) {
		struct st_day d = { 0 };
		int c, has_total = 0;
		size_t n = 0;

		/* the smaller key of the two cursors */
		if (rc[0] != SQLITE_ROW)
			c = 1;
		else if (rc[1] != SQLITE_ROW)
			c = -1;
		else
			c = st_key_cmp(sqlite3_column_int64(s[0], 0), st_col_text(s[0], 1), sqlite3_column_int(s[0], 2),
				       sqlite3_column_int64(s[1], 0), st_col_text(s[1], 1), sqlite3_column_int(s[1], 2));
		i = c <= 0 ? 0 : 1;
		d.start_ns = sqlite3_column_int64(s[i], 0);
		snprintf(server, sizeof(server), "%s", st_col_text(s[i], 1));
		d.server = server;
		d.resource = (enum st_resource)sqlite3_column_int(s[i], 2);
		if (c >= 0) {
			d.total = (uint64_t)sqlite3_column_int64(s[1], 3);
			d.capacity = (uint64_t)sqlite3_column_int64(s[1], 4);
			has_total = 1;
			rc[1] = sqlite3_step(s[1]);
		}
		while (c <= 0 && rc[0] == SQLITE_ROW &&
		       st_key_cmp(sqlite3_column_int64(s[0], 0), st_col_text(s[0], 1), sqlite3_column_int(s[0], 2),
				  d.start_ns, server, (int)d.resource) == 0) {
			if (n == ncap) {
				size_t cap = ncap ? ncap * 2 : 128;
				void *nm = realloc(names, cap * sizeof(*names));
				const char **np;
				uint64_t *vp;

				if (nm)
					names = nm;
				np = realloc(r->names, cap * sizeof(*np));
				if (np)
					r->names = np;
				vp = realloc(r->values, cap * sizeof(*vp));
				if (vp)
					r->values = vp;
				if (!nm || !np || !vp) {
					rv = RM_ENOMEM;
					goto out;
				}
				ncap = r->ncap = cap;
			}
			snprintf(names[n], sizeof(names[n]), "%s", st_col_text(s[0], 3));
			r->values[n] = (uint64_t)sqlite3_column_int64(s[0], 4);
			if (__builtin_add_overflow(d.charged, r->values[n], &d.charged)) {
				rm_log_error("failed to query '%s': a sum exceeds the int64 limit", db->path);
				rv = RM_ESQL;
				goto out;
			}
			n++;
			rc[0] = sqlite3_step(s[0]);
		}
		for (size_t k = 0; k < n; k++)
			r->names[k] = names[k];
		d.n = n;
		d.ce = r->names;
		d.value = r->values;
		if (n || has_total)
			rv = cb(arg, &d);
	}
	for (i = 0; i < 2 && rv == RM_OK; i++)
		if (rc[i] != SQLITE_DONE && rc[i] != SQLITE_ROW)
			rv = st_sql_err(db, rc[i], "failed to query");
out:
	free(names);
	sqlite3_finalize(s[0]);
	sqlite3_finalize(s[1]);
	return rv;
}
