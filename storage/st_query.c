/*
 * st_query.c - the read side of storage: usage per CE with the computed
 * unaccountable share V = U - sum_c U_c, the breakdown of V by reason, the
 * identity check U = sum_c U_c + sum(reasons) per window, the count of
 * windows, and the split-part counts. Owns the SQL text of those queries (built per call from a fixed
 * set of clauses so that SQLite can use the indexes for the filters given)
 * and the row arrays handed to callers. The signed arithmetic on the
 * per-group sums (V, residuals) is done here in C with overflow checks.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rm_err.h"
#include "st_int.h"
#include "banned.h"

/* A growable array of result rows. */
struct st_rowbuf {
	struct st_row *v;
	size_t n, cap;
};

static struct st_row *st_rowbuf_add(struct st_rowbuf *b)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 32;
		struct st_row *v = realloc(b->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		b->v = v;
		b->cap = cap;
	}
	memset(&b->v[b->n], 0, sizeof(b->v[0]));
	return &b->v[b->n++];
}

void st_rows_free(struct st_row *rows)
{
	free(rows);
}

int st_check_query(const st_db *db, const struct st_query *q, void *rows, size_t *n)
{
	if (!db || !q || !rows || !n) {
		rm_log_error("invalid query: null argument");
		return RM_EINVAL;
	}
	if (q->server && st_check_name("server", q->server, ST_NAME_MAX) != 0)
		return RM_EINVAL;
	if (q->ce && st_check_name("ce", q->ce, ST_NAME_MAX) != 0)
		return RM_EINVAL;
	if (q->resource < -1 || q->resource >= ST_R_COUNT) {
		rm_log_error("invalid query: resource %d", q->resource);
		return RM_EINVAL;
	}
	if (q->until_ns < q->since_ns) {
		rm_log_error("invalid query: until %lld is before since %lld",
			     (long long)q->until_ns, (long long)q->since_ns);
		return RM_EINVAL;
	}
	return RM_OK;
}

/* A growing SQL text; on allocation failure it is marked failed and stays
 * so (st_sb_done reports it). */
struct st_sb {
	char *s;
	size_t len, cap;
	int failed;
};

__attribute__((format(printf, 2, 3))) static void st_sb_add(struct st_sb *b, const char *fmt, ...)
{
	va_list ap;
	int r;

	if (b->failed)
		return;
	for (;;) {
		va_start(ap, fmt);
		r = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (r < 0) {
			b->failed = 1;
			return;
		}
		if (b->s && b->len + (size_t)r < b->cap) {
			b->len += (size_t)r;
			return;
		}
		size_t cap = (b->cap ? b->cap : 2048) * 2 + (size_t)r;
		char *n = realloc(b->s, cap);

		if (!n) {
			b->failed = 1;
			return;
		}
		b->s = n;
		b->cap = cap;
	}
}

static int st_sb_done(const st_db *db, struct st_sb *b)
{
	if (!b->failed)
		return RM_OK;
	rm_log_error("failed to query '%s': %s", db->path, rm_strerror(RM_ENOMEM));
	return RM_ENOMEM;
}

/* The tables the queries read, and their value columns. */
enum st_tab { ST_T_USAGE, ST_T_UNACCT, ST_T_TOTAL, ST_T_SPLIT };
static const char *const st_tab_name[] = { "usage", "unacct", "total", "split" };
static const char *const st_tab_cols[] = { "ce, value", "reason, value", "value, capacity", "parts" };

/*
 * A subquery over table t yielding (server, resource, win_start, win_len,
 * <its value columns>) for the rows of each segment's series starting in
 * the segment and matching q's server and resource (rolled-up rows have
 * win_len = their step; split rows resource 0). all (q->server NULL): the
 * usage and totals of day segments come summed over servers, server "".
 */
static void st_src(struct st_sb *b, enum st_tab t, const struct st_query *q,
		   const struct st_seg *seg, size_t nseg, int all)
{
	size_t i;

	st_sb_add(b, "(");
	for (i = 0; i < nseg; i++) {
		int64_t step = st_series_step((enum st_series)seg[i].series);

		if (seg[i].series == ST_SEG_MONTH) {
			/* whole calendar months (usage and totals per server only) */
			assert(!all && (t == ST_T_USAGE || t == ST_T_TOTAL));
			st_sb_add(b, "%sSELECT server, resource, win_start, 0 AS win_len, %s FROM r_%s "
				     "WHERE step = %d AND win_start >= %lld AND win_start < %lld%s%s",
				  i ? " UNION ALL " : "", st_tab_cols[t], st_tab_name[t], ST_STEP_MONTH,
				  (long long)seg[i].lo, (long long)seg[i].hi,
				  q->server ? " AND server = :server" : "",
				  q->resource >= 0 ? " AND resource = :res" : "");
			continue;
		}
		if (all && seg[i].series != ST_SERIES_1S && (t == ST_T_USAGE || t == ST_T_TOTAL)) {
			/* a rolled-up series summed over servers (server "") */
			st_sb_add(b, "%sSELECT '' AS server, resource, win_start, step AS win_len, %s "
				     "FROM r_ce_%s WHERE step = %lld AND win_start >= %lld AND win_start < %lld%s",
				  i ? " UNION ALL " : "", st_tab_cols[t], st_tab_name[t], (long long)step,
				  (long long)seg[i].lo, (long long)seg[i].hi,
				  q->resource >= 0 ? " AND resource = :res" : "");
			continue;
		}

		st_sb_add(b, "%sSELECT server, %s AS resource, win_start, %s AS win_len, %s FROM %s%s "
			     "WHERE ", i ? " UNION ALL " : "", t == ST_T_SPLIT ? "0" : "resource",
			  step ? "step" : "win_len", st_tab_cols[t], step ? "r_" : "", st_tab_name[t]);
		if (step)
			st_sb_add(b, "step = %lld AND ", (long long)step);
		st_sb_add(b, "win_start >= %lld AND win_start < %lld%s%s", (long long)seg[i].lo,
			  (long long)seg[i].hi, q->server ? " AND server = :server" : "",
			  q->resource >= 0 && t != ST_T_SPLIT ? " AND resource = :res" : "");
	}
	if (!nseg)
		st_sb_add(b, "SELECT server, 0 AS resource, win_start, win_len, %s FROM %s WHERE 0",
			  st_tab_cols[t], st_tab_name[t]);
	st_sb_add(b, ")");
}

/* How a query groups windows: per range (ws = wl = 0), per stored window
 * (from the finest series holding it), or per period of q->step_ns. */
enum st_group { ST_G_RANGE, ST_G_WINDOW, ST_G_STEP };

static enum st_group st_group_of(const struct st_query *q, int64_t step_ns)
{
	return step_ns > 0 ? ST_G_STEP : q->per_window ? ST_G_WINDOW : ST_G_RANGE;
}

/* The segments answering q when grouped as g (finest series per window,
 * else the coarsest that fits). A range that ends after the latest window
 * starts holds the same rows as one that never ends, so it is read as
 * such: the current minute, hour and day buckets (which every write
 * reaches) then answer for its end instead of the windows. */
static int st_segments(st_db *db, const struct st_query *q, int64_t step_ns, enum st_group g,
		       int finest, struct st_seg *seg, size_t *nseg)
{
	struct st_series_map m;
	int64_t until = q->until_ns, last;
	int rv, found;

	if ((rv = st_series_load(db, &m)) != 0 || (rv = st_last_start(db, &last, &found)) != 0)
		return rv;
	if (found && until > last)
		until = INT64_MAX;
	*nseg = st_cover(&m, q->since_ns, until, g == ST_G_STEP ? step_ns : 0, finest, seg);
	return RM_OK;
}

static int64_t st_max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* As st_segments for a sum over the range (ST_G_RANGE) of usage and totals
 * per server: the whole calendar months inside the range come from the
 * month series (one row per server, resource and CE a month), the rest as
 * st_segments would read it. */
static int st_segments_months(st_db *db, const struct st_query *q, struct st_seg *seg, size_t *nseg)
{
	struct st_series_map m;
	int64_t until = q->until_ns, last, m0, m1;
	int rv, found;

	if ((rv = st_series_load(db, &m)) != 0 || (rv = st_last_start(db, &last, &found)) != 0)
		return rv;
	if (found && until > last)
		until = INT64_MAX;
	m0 = st_month_start(st_max64(q->since_ns, m.month_kept), 0);
	if (m0 < q->since_ns || m0 < m.month_kept)
		m0 = st_month_start(m0, 1);
	/* past the latest window every bucket is as complete as it will get */
	m1 = until == INT64_MAX ? (found ? st_month_start(last, 1) : m0) : st_month_start(until, 0);
	if (m0 >= m1) {
		*nseg = st_cover(&m, q->since_ns, until, 0, 0, seg);
		return RM_OK;
	}
	*nseg = st_cover(&m, q->since_ns, m0, 0, 0, seg);
	seg[*nseg].series = ST_SEG_MONTH;
	seg[*nseg].lo = m0;
	seg[*nseg].hi = m1;
	(*nseg)++;
	*nseg += st_cover(&m, m1, until, 0, 0, seg + *nseg);
	return RM_OK;
}

/* The window expressions of grouping g. */
static void st_group_exprs(int64_t step_ns, enum st_group g, char *ws, size_t wsl, char *wl,
			   size_t wll)
{
	long long st = (long long)step_ns;

	if (g == ST_G_STEP) {
		snprintf(ws, wsl, "(win_start - (((win_start %% %lld) + %lld) %% %lld))", st, st, st);
		snprintf(wl, wll, "%lld", st);
	} else {
		snprintf(ws, wsl, "%s", g == ST_G_WINDOW ? "win_start" : "0");
		snprintf(wl, wll, "%s", g == ST_G_WINDOW ? "win_len" : "0");
	}
}

/* The common table expressions every query uses, per (server, resource,
 * ws, wl) group, ws/wl being the window, the period or 0, 0 when summing
 * the range:
 *   cu  usage per CE          ku  reasons per reason
 *   su  sum of usage          sk  sum of reasons
 *   tt  total and capacity    gt  every group with t, c, s, k (0 if absent)
 *                                 and hut = the group has any U_c or U
 * finest: read each part of the range from the finest series holding it
 * (else from the coarsest one that fits exactly).
 */
static int st_ctes(st_db *db, const struct st_query *q, int64_t step_ns, enum st_group g,
		   int finest, struct st_sb *b)
{
	struct st_seg seg[ST_SEG_MAX];
	char ws[128], wl[32];
	size_t nseg;
	int rv;

	if ((rv = st_segments(db, q, step_ns, g, finest, seg, &nseg)) != 0)
		return rv;
	st_group_exprs(step_ns, g, ws, sizeof(ws), wl, sizeof(wl));
	st_sb_add(b, "WITH cu AS (SELECT server, resource, %s AS ws, %s AS wl, ce, SUM(value) AS v "
		     "FROM ", ws, wl);
	st_src(b, ST_T_USAGE, q, seg, nseg, 0);
	st_sb_add(b, " GROUP BY 1, 2, 3, 4, 5), "
		     "su AS (SELECT server, resource, ws, wl, SUM(v) AS s FROM cu GROUP BY 1, 2, 3, 4), "
		     "ku AS (SELECT server, resource, %s AS ws, %s AS wl, reason, SUM(value) AS v FROM ",
		  ws, wl);
	st_src(b, ST_T_UNACCT, q, seg, nseg, 0);
	st_sb_add(b, " GROUP BY 1, 2, 3, 4, 5), "
		     "sk AS (SELECT server, resource, ws, wl, SUM(v) AS k FROM ku GROUP BY 1, 2, 3, 4), "
		     "tt AS (SELECT server, resource, %s AS ws, %s AS wl, SUM(value) AS t, "
		     "SUM(capacity) AS c FROM ", ws, wl);
	st_src(b, ST_T_TOTAL, q, seg, nseg, 0);
	st_sb_add(b, " GROUP BY 1, 2, 3, 4), "
		     "g AS (SELECT server, resource, ws, wl FROM su UNION "
		     "SELECT server, resource, ws, wl FROM sk UNION "
		     "SELECT server, resource, ws, wl FROM tt), "
		     "gt AS (SELECT g.server, g.resource, g.ws, g.wl, COALESCE(tt.t, 0) AS t, "
		     "COALESCE(tt.c, 0) AS c, COALESCE(su.s, 0) AS s, COALESCE(sk.k, 0) AS k, "
		     "(su.s IS NOT NULL OR tt.t IS NOT NULL) AS hut FROM g "
		     "LEFT JOIN tt USING (server, resource, ws, wl) "
		     "LEFT JOIN su USING (server, resource, ws, wl) "
		     "LEFT JOIN sk USING (server, resource, ws, wl)) ");
	return RM_OK;
}

void st_query_bind(sqlite3_stmt *s, const struct st_query *q)
{
	int i;

	if ((i = sqlite3_bind_parameter_index(s, ":since")) > 0)
		sqlite3_bind_int64(s, i, q->since_ns);
	if ((i = sqlite3_bind_parameter_index(s, ":until")) > 0)
		sqlite3_bind_int64(s, i, q->until_ns);
	if ((i = sqlite3_bind_parameter_index(s, ":server")) > 0)
		sqlite3_bind_text(s, i, q->server, -1, SQLITE_STATIC);
	if ((i = sqlite3_bind_parameter_index(s, ":res")) > 0)
		sqlite3_bind_int(s, i, q->resource);
	if ((i = sqlite3_bind_parameter_index(s, ":ce")) > 0)
		sqlite3_bind_text(s, i, q->ce, -1, SQLITE_STATIC);
}

static int st_prepare(st_db *db, const struct st_query *q, const char *sql, sqlite3_stmt **out)
{
	sqlite3_stmt *s;
	int rc;

	*out = NULL;
	rc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return st_sql_err(db, rc, "failed to query");
	st_query_bind(s, q);
	*out = s;
	return RM_OK;
}

/* Result columns shared by the row-producing queries. */
enum {
	C_SERVER, C_RESOURCE, C_WS, C_WL, C_KEY, C_ISV, C_VALUE, C_T, C_C, C_S, C_K, C_NCOLS
};

static uint64_t st_nonneg(sqlite3_int64 v)
{
	return v > 0 ? (uint64_t)v : 0;
}

/* Fills the common part of a row from the current result. */
static void st_row_fill(struct st_row *row, sqlite3_stmt *s)
{
	int r = sqlite3_column_int(s, C_RESOURCE);

	snprintf(row->server, sizeof(row->server), "%s", st_col_text(s, C_SERVER));
	row->resource = r >= 0 && r < ST_R_COUNT ? (enum st_resource)r : ST_R_CPU;
	row->win_start_ns = sqlite3_column_int64(s, C_WS);
	row->win_len_ns = sqlite3_column_int64(s, C_WL);
	row->total = st_nonneg(sqlite3_column_int64(s, C_T));
	row->capacity = st_nonneg(sqlite3_column_int64(s, C_C));
}

/* residual = t - s (- k when with_k), or RM_ESQL on int64 overflow. */
static int st_residual(st_db *db, sqlite3_stmt *s, int with_k, int64_t *out)
{
	int64_t t = sqlite3_column_int64(s, C_T), su = sqlite3_column_int64(s, C_S);
	int64_t k = with_k ? sqlite3_column_int64(s, C_K) : 0;

	if (__builtin_sub_overflow(t, su, out) || __builtin_sub_overflow(*out, k, out)) {
		rm_log_error("failed to query '%s': residual overflows int64", db->path);
		return RM_ESQL;
	}
	return RM_OK;
}

/* How st_collect fills group rows (C_ISV = 1). */
struct st_collect_mode {
	int with_k;            /* residual = t - s - k (else t - s) */
	int keep_zero;         /* keep group rows whose residual is 0 */
	int key_is_ce;         /* C_KEY goes to row->ce (else row->reason) */
	int value_is_sum;      /* group value = s (else max(residual, 0)) */
	const char *group_key; /* ce or reason of group rows */
};

/*
 * Runs a query whose rows are either keyed rows (C_ISV = 0: value in
 * C_VALUE, key = CE or reason in C_KEY) or group rows (C_ISV = 1) for which
 * the residual is computed as m says. On success *rows and *n hold the rows
 * (NULL when none); on failure nothing is allocated.
 */
static int st_collect(st_db *db, const struct st_query *q, const char *sql,
		      const struct st_collect_mode *m, struct st_row **rows, size_t *n)
{
	struct st_rowbuf b = { 0 };
	sqlite3_stmt *s;
	struct st_row *row;
	int64_t res;
	int rc, rv;

	if ((rv = st_prepare(db, q, sql, &s)) != 0)
		return rv;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int isv = sqlite3_column_int(s, C_ISV);
		const char *key = isv ? m->group_key : st_col_text(s, C_KEY);

		res = 0;
		if (isv) {
			if ((rv = st_residual(db, s, m->with_k, &res)) != 0)
				goto fail;
			if (res == 0 && !m->keep_zero)
				continue;
		}
		if (!(row = st_rowbuf_add(&b))) {
			rv = RM_ENOMEM;
			rm_log_error("failed to query '%s': %s", db->path, rm_strerror(rv));
			goto fail;
		}
		st_row_fill(row, s);
		if (m->key_is_ce)
			snprintf(row->ce, sizeof(row->ce), "%s", key);
		else
			snprintf(row->reason, sizeof(row->reason), "%s", key);
		row->residual = res;
		if (!isv)
			row->value = st_nonneg(sqlite3_column_int64(s, C_VALUE));
		else if (m->value_is_sum)
			row->value = st_nonneg(sqlite3_column_int64(s, C_S));
		else
			row->value = st_nonneg(res);
	}
	if (rc != SQLITE_DONE) {
		rv = st_sql_err(db, rc, "failed to query");
		goto fail;
	}
	sqlite3_finalize(s);
	*rows = b.n ? b.v : NULL;
	*n = b.n;
	if (!b.n)
		free(b.v);
	return RM_OK;
fail:
	sqlite3_finalize(s);
	free(b.v);
	return rv;
}

/* Order of every row query: group, keyed rows before the group row, value
 * descending, then key. */
#define ST_ORDER " ORDER BY 1, 2, 3, 4, 6, 7 DESC, 5"

/* Runs the query the builder holds (st_collect), freeing the text. */
static int st_collect_sb(st_db *db, const struct st_query *q, struct st_sb *b,
			 const struct st_collect_mode *m, struct st_row **rows, size_t *n)
{
	int rv = st_sb_done(db, b);

	if (rv == RM_OK)
		rv = st_collect(db, q, b->s, m, rows, n);
	free(b->s);
	return rv;
}

/* One read transaction around a query, so that the series map and every
 * scan see one snapshot even while the aggregator rolls up and deletes
 * (nothing is done when the caller has a transaction open). */
static int st_read_begin(st_db *db, int *own)
{
	int rc;

	*own = sqlite3_get_autocommit(db->h);
	if (!*own)
		return RM_OK;
	rc = sqlite3_exec(db->h, "BEGIN", NULL, NULL, NULL);
	return rc == SQLITE_OK ? RM_OK : st_sql_err(db, rc, "failed to query");
}

static void st_read_end(st_db *db, int own)
{
	if (own && !sqlite3_get_autocommit(db->h))
		sqlite3_exec(db->h, "COMMIT", NULL, NULL, NULL);
}

/* st_query_usage / st_query_unacct through st_agg_query: plain scans of
 * the series that answer the range. */
static int st_scan_query_in(st_db *db, const struct st_query *q, int64_t step_ns, int mode,
			    struct st_row **rows, size_t *n)
{
	struct st_seg seg[ST_SEG_MAX];
	struct st_sb b[3] = { { 0 } };
	const char *sql[3];
	enum st_group g;
	size_t nseg;
	int rv, t, all;

	if ((rv = st_check_query(db, q, rows, n)) != 0)
		return rv;
	*rows = NULL;
	*n = 0;
	g = st_group_of(q, step_ns);
	all = mode == ST_AGG_USAGE_ALL && !q->server;
	if (g == ST_G_RANGE && mode == ST_AGG_USAGE)
		rv = st_segments_months(db, q, seg, &nseg);
	else
		rv = st_segments(db, q, step_ns, g, g == ST_G_WINDOW, seg, &nseg);
	if (rv != 0)
		return rv;
	for (t = 0; t < 3; t++) {
		sql[t] = NULL;
		if (t == 1 && mode != ST_AGG_UNACCT)
			continue;
		st_sb_add(&b[t], "SELECT * FROM ");
		st_src(&b[t], (enum st_tab)t, q, seg, nseg, all);
		if ((rv = st_sb_done(db, &b[t])) != 0)
			goto done;
		sql[t] = b[t].s;
	}
	rv = st_agg_query(db, q, g == ST_G_STEP ? step_ns : 0, mode, sql, rows, n);
done:
	for (t = 0; t < 3; t++)
		free(b[t].s);
	return rv;
}

static int st_scan_query(st_db *db, const struct st_query *q, int64_t step_ns, int mode,
			 struct st_row **rows, size_t *n);

static int st_usage(st_db *db, const struct st_query *q, int64_t step_ns, struct st_row **rows,
		    size_t *n)
{
	return st_scan_query(db, q, step_ns, ST_AGG_USAGE, rows, n);
}

static int st_unacct(st_db *db, const struct st_query *q, int64_t step_ns, struct st_row **rows,
		     size_t *n)
{
	return st_scan_query(db, q, step_ns, ST_AGG_UNACCT, rows, n);
}

static int st_check_step(int64_t step_ns)
{
	if (step_ns <= 0) {
		rm_log_error("invalid query: step %lld", (long long)step_ns);
		return RM_EINVAL;
	}
	return RM_OK;
}

int st_query_usage(st_db *db, const struct st_query *q, struct st_row **rows, size_t *n)
{
	return st_usage(db, q, 0, rows, n);
}

int st_query_usage_step(st_db *db, const struct st_query *q, int64_t step_ns, struct st_row **rows,
			size_t *n)
{
	return st_check_step(step_ns) ? RM_EINVAL : st_usage(db, q, step_ns, rows, n);
}

int st_query_usage_all(st_db *db, const struct st_query *q, int64_t step_ns, struct st_row **rows,
		       size_t *n)
{
	struct st_query qq;

	if (step_ns < 0)
		return st_check_step(step_ns);
	if (!q)
		return st_check_query(db, q, rows, n);
	qq = *q;
	qq.per_window = 0;
	return st_scan_query(db, &qq, step_ns, ST_AGG_USAGE_ALL, rows, n);
}

int st_query_unacct(st_db *db, const struct st_query *q, struct st_row **rows, size_t *n)
{
	return st_unacct(db, q, 0, rows, n);
}

int st_query_unacct_step(st_db *db, const struct st_query *q, int64_t step_ns, struct st_row **rows,
			 size_t *n)
{
	return st_check_step(step_ns) ? RM_EINVAL : st_unacct(db, q, step_ns, rows, n);
}

static int st_identity_in(st_db *db, const struct st_query *q, struct st_row **rows, size_t *n)
{
	static const struct st_collect_mode mode = {
		.with_k = 1, .key_is_ce = 1, .value_is_sum = 1, .group_key = "",
	};
	struct st_sb b = { 0 };
	int rv;

	if ((rv = st_check_query(db, q, rows, n)) != 0)
		return rv;
	*rows = NULL;
	*n = 0;
	/* per stored row of the finest series holding each part: the windows
	 * where they are kept, else the buckets (a bucket balances exactly
	 * when the sum of its windows' residuals is 0) */
	if ((rv = st_ctes(db, q, 0, ST_G_WINDOW, 1, &b)) != 0) {
		free(b.s);
		return rv;
	}
	st_sb_add(&b, "SELECT server, resource, ws, wl, '', 1, 0, t, c, s, k FROM gt ORDER BY 1, 2, 3, 4");
	return st_collect_sb(db, q, &b, &mode, rows, n);
}

static int st_count_in(st_db *db, const struct st_query *q, uint64_t *n)
{
	struct st_seg seg[ST_SEG_MAX];
	struct st_sb b = { 0 };
	sqlite3_stmt *s;
	size_t dummy, nseg;
	int rc, rv;

	if ((rv = st_check_query(db, q, n, &dummy)) != 0)
		return rv;
	*n = 0;
	if ((rv = st_segments(db, q, 0, ST_G_WINDOW, 1, seg, &nseg)) != 0)
		return rv;
	st_sb_add(&b, "SELECT count(*) FROM (SELECT server, resource, win_start, win_len FROM ");
	st_src(&b, ST_T_USAGE, q, seg, nseg, 0);
	st_sb_add(&b, " UNION SELECT server, resource, win_start, win_len FROM ");
	st_src(&b, ST_T_UNACCT, q, seg, nseg, 0);
	st_sb_add(&b, " UNION SELECT server, resource, win_start, win_len FROM ");
	st_src(&b, ST_T_TOTAL, q, seg, nseg, 0);
	st_sb_add(&b, ")");
	if ((rv = st_sb_done(db, &b)) != 0 || (rv = st_prepare(db, q, b.s, &s)) != 0) {
		free(b.s);
		return rv;
	}
	free(b.s);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*n = (uint64_t)sqlite3_column_int64(s, 0);
	else
		rv = st_sql_err(db, rc, "failed to query");
	sqlite3_finalize(s);
	return rv;
}

static int st_splits_in(st_db *db, const struct st_query *q, struct st_row **rows, size_t *n)
{
	struct st_rowbuf b = { 0 };
	struct st_seg seg[ST_SEG_MAX];
	struct st_sb sb = { 0 };
	struct st_query qq;
	enum st_group g;
	sqlite3_stmt *s;
	struct st_row *row;
	char ws[128], wl[32];
	size_t nseg;
	int rc, rv;

	if ((rv = st_check_query(db, q, rows, n)) != 0)
		return rv;
	*rows = NULL;
	*n = 0;
	/* the resource filter does not apply: splits are per part, not per resource */
	qq = *q;
	qq.resource = -1;
	g = st_group_of(q, 0);
	if ((rv = st_segments(db, &qq, 0, g, g == ST_G_WINDOW, seg, &nseg)) != 0)
		return rv;
	st_group_exprs(0, g, ws, sizeof(ws), wl, sizeof(wl));
	st_sb_add(&sb, "SELECT server, %s, %s, SUM(parts) FROM ", ws, wl);
	st_src(&sb, ST_T_SPLIT, &qq, seg, nseg, 0);
	st_sb_add(&sb, " GROUP BY 1, 2, 3 HAVING SUM(parts) != 0 ORDER BY 1, 2, 3");
	if ((rv = st_sb_done(db, &sb)) != 0 || (rv = st_prepare(db, &qq, sb.s, &s)) != 0) {
		free(sb.s);
		return rv;
	}
	free(sb.s);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (!(row = st_rowbuf_add(&b))) {
			rv = RM_ENOMEM;
			rm_log_error("failed to query '%s': %s", db->path, rm_strerror(rv));
			goto fail;
		}
		snprintf(row->server, sizeof(row->server), "%s", st_col_text(s, 0));
		row->win_start_ns = sqlite3_column_int64(s, 1);
		row->win_len_ns = sqlite3_column_int64(s, 2);
		row->value = st_nonneg(sqlite3_column_int64(s, 3));
	}
	if (rc != SQLITE_DONE) {
		rv = st_sql_err(db, rc, "failed to query");
		goto fail;
	}
	sqlite3_finalize(s);
	*rows = b.n ? b.v : NULL;
	*n = b.n;
	if (!b.n)
		free(b.v);
	return RM_OK;
fail:
	sqlite3_finalize(s);
	free(b.v);
	return rv;
}

/* ---- the public queries: each in one read snapshot ---- */

static int st_scan_query(st_db *db, const struct st_query *q, int64_t step_ns, int mode,
			 struct st_row **rows, size_t *n)
{
	int own, rv;

	if (!db)
		return st_scan_query_in(db, q, step_ns, mode, rows, n);
	if ((rv = st_read_begin(db, &own)) != 0)
		return rv;
	rv = st_scan_query_in(db, q, step_ns, mode, rows, n);
	st_read_end(db, own);
	return rv;
}

int st_query_identity(st_db *db, const struct st_query *q, struct st_row **rows, size_t *n)
{
	int own, rv;

	if (!db)
		return st_identity_in(db, q, rows, n);
	if ((rv = st_read_begin(db, &own)) != 0)
		return rv;
	rv = st_identity_in(db, q, rows, n);
	st_read_end(db, own);
	return rv;
}

int st_count_windows(st_db *db, const struct st_query *q, uint64_t *n)
{
	int own, rv;

	if (!db)
		return st_count_in(db, q, n);
	if ((rv = st_read_begin(db, &own)) != 0)
		return rv;
	rv = st_count_in(db, q, n);
	st_read_end(db, own);
	return rv;
}

int st_query_splits(st_db *db, const struct st_query *q, struct st_row **rows, size_t *n)
{
	int own, rv;

	if (!db)
		return st_splits_in(db, q, rows, n);
	if ((rv = st_read_begin(db, &own)) != 0)
		return rv;
	rv = st_splits_in(db, q, rows, n);
	st_read_end(db, own);
	return rv;
}

/* The rows naming `what` in every kept series: every write reaches every
 * series, so the windows (first: found through their index by name) and
 * of each rolled-up series the rows the next coarser one no longer holds
 * (before its kept_from; the 1 day series all) cover all that is stored. */
static int st_names_sql(st_db *db, const char *what, int exists, struct st_sb *b)
{
	const char *tab = strcmp(what, "ce") == 0 ? "usage" : "total";
	struct st_series_map m;
	int s, rv;

	if ((rv = st_series_load(db, &m)) != 0)
		return rv;
	st_sb_add(b, "%s", exists ? "SELECT 0" : "SELECT NULL WHERE 0");
	for (s = ST_SERIES_1S; s < ST_SERIES_COUNT; s++) {
		long long below = s + 1 < ST_SERIES_COUNT ? (long long)m.kept[s + 1] : (long long)INT64_MAX;
		char src[96];

		if (s == ST_SERIES_1S)
			below = (long long)INT64_MAX;
		else if (below == (long long)INT64_MIN)
			continue; /* the next series holds all of it */
		if (s == ST_SERIES_1S)
			snprintf(src, sizeof(src), "%s WHERE", tab);
		else
			snprintf(src, sizeof(src), "r_%s WHERE step = %lld AND", tab,
				 (long long)st_series_step((enum st_series)s));
		if (exists)
			st_sb_add(b, " OR EXISTS (SELECT 1 FROM %s win_start < %lld AND %s = :name)", src,
				  below, what);
		else
			st_sb_add(b, " UNION SELECT %s FROM %s win_start < %lld", what, src, below);
	}
	if (!exists)
		st_sb_add(b, " ORDER BY 1");
	return st_sb_done(db, b);
}

static int st_check_what(const char *what)
{
	if (what && (strcmp(what, "ce") == 0 || strcmp(what, "server") == 0))
		return RM_OK;
	rm_log_error("invalid name kind '%s' (server, ce)", what ? what : "(null)");
	return RM_EINVAL;
}

/* Prepares the names query of st_names_sql into *s. */
static int st_names_prepare(st_db *db, const char *what, int exists, sqlite3_stmt **s)
{
	struct st_sb b = { 0 };
	int rc, rv;

	if ((rv = st_names_sql(db, what, exists, &b)) != 0) {
		free(b.s);
		return rv;
	}
	rc = sqlite3_prepare_v2(db->h, b.s, -1, s, NULL);
	free(b.s);
	return rc == SQLITE_OK ? RM_OK : st_sql_err(db, rc, "failed to query");
}

int st_name_known(st_db *db, const char *what, const char *name, int *known)
{
	sqlite3_stmt *s;
	int rc, rv = RM_EINVAL, i;

	if (!db || !known || (rv = st_check_what(what)) != 0 ||
	    (rv = st_check_name(what, name, ST_NAME_MAX)) != 0)
		return rv ? rv : RM_EINVAL;
	*known = 0;
	if ((rv = st_names_prepare(db, what, 1, &s)) != 0)
		return rv;
	if ((i = sqlite3_bind_parameter_index(s, ":name")) > 0)
		sqlite3_bind_text(s, i, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*known = sqlite3_column_int(s, 0) != 0;
	sqlite3_finalize(s);
	return rc == SQLITE_ROW ? RM_OK : st_sql_err(db, rc, "failed to query");
}

int st_names(st_db *db, const char *what, char ***names, size_t *n)
{
	struct st_sb txt = { 0 };
	sqlite3_stmt *s;
	size_t cnt = 0, i, off;
	char **v;
	int rc, rv = RM_EINVAL;

	if (!db || !names || !n || (rv = st_check_what(what)) != 0)
		return rv ? rv : RM_EINVAL;
	*names = NULL;
	*n = 0;
	if ((rv = st_names_prepare(db, what, 0, &s)) != 0)
		return rv;
	/* the names one after the other, NUL-separated, then the pointers */
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		st_sb_add(&txt, "%s", st_col_text(s, 0));
		st_sb_add(&txt, "%c", 1);
		cnt++;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		free(txt.s);
		return st_sql_err(db, rc, "failed to query");
	}
	if ((rv = st_sb_done(db, &txt)) != 0 || !cnt) {
		free(txt.s);
		return rv;
	}
	if (!(v = malloc(cnt * sizeof(*v) + txt.len))) {
		free(txt.s);
		rm_log_error("failed to query '%s': %s", db->path, rm_strerror(RM_ENOMEM));
		return RM_ENOMEM;
	}
	memcpy(v + cnt, txt.s, txt.len);
	free(txt.s);
	for (i = 0, off = 0; i < cnt; i++) {
		char *p = (char *)(v + cnt) + off;
		size_t l = strcspn(p, "\x01");

		p[l] = '\0';
		v[i] = p;
		off += l + 1;
	}
	*names = v;
	*n = cnt;
	return RM_OK;
}
