/*
 * st_est.c - the estimators' tables (schema v4, see st_est.h): additive
 * inputs, the windows each method dealt with, the per-CE estimates, and the
 * query that shows them like st_query_usage shows measurements. Owns the
 * SQL of those tables (prepared per call: the estimators run once a second,
 * not per part) and the row arrays it hands out.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rm_err.h"
#include "st_est.h"
#include "st_int.h"
#include "banned.h"

int st_est_method_ok(const char *name)
{
	return name && (strcmp(name, ST_EST_LR) == 0 || strcmp(name, ST_EST_KALMAN) == 0);
}

static int st_est_check_method(const char *method)
{
	if (!st_est_method_ok(method)) {
		rm_log_error("invalid estimation method '%s': must be '%s' or '%s'", method ? method : "",
			     ST_EST_LR, ST_EST_KALMAN);
		return RM_EINVAL;
	}
	return RM_OK;
}

static int st_est_check_window(int64_t start, int64_t len)
{
	if (len <= 0 || start > INT64_MAX - len) {
		rm_log_error("invalid window [%lld, +%lld): length must be positive and the end within int64",
			     (long long)start, (long long)len);
		return RM_EINVAL;
	}
	return RM_OK;
}

static int st_est_check_value(const char *what, uint64_t v)
{
	if (v > (uint64_t)INT64_MAX) {
		rm_log_error("invalid %s %llu: above the int64 limit", what, (unsigned long long)v);
		return RM_EINVAL;
	}
	return RM_OK;
}

static int st_est_writable(const st_db *db)
{
	if (!db)
		return RM_EINVAL;
	if (db->flags & ST_OPEN_READONLY) {
		rm_log_error("failed to write to '%s': opened read-only", db->path);
		return RM_EPERM;
	}
	return RM_OK;
}

static int st_est_prepare(st_db *db, const char *sql, sqlite3_stmt **s, const char *what)
{
	int rc = sqlite3_prepare_v2(db->h, sql, -1, s, NULL);

	return rc == SQLITE_OK ? RM_OK : st_sql_err(db, rc, what);
}

/* Steps a write statement once and finalizes it. */
static int st_est_exec(st_db *db, sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);

	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? RM_OK : st_sql_err(db, rc, "failed to write to");
}

int st_add_est_input(st_db *db, const char *server, int64_t win_start_ns, int64_t win_len_ns, const char *ce,
		     uint64_t requests, uint64_t rt_ns, uint64_t rx_bytes)
{
	sqlite3_stmt *s;
	int rv;

	if ((rv = st_est_writable(db)) != 0)
		return rv;
	if ((rv = st_check_name("server", server, ST_NAME_MAX)) != 0 ||
	    (rv = st_check_name("ce", ce, ST_NAME_MAX)) != 0 ||
	    (rv = st_est_check_window(win_start_ns, win_len_ns)) != 0 ||
	    (rv = st_est_check_value("request count", requests)) != 0 ||
	    (rv = st_est_check_value("response time", rt_ns)) != 0 ||
	    (rv = st_est_check_value("byte count", rx_bytes)) != 0)
		return rv;
	if ((rv = st_est_prepare(db,
				 "INSERT INTO est_input (server, win_start, win_len, ce, requests, rt_ns, rx) "
				 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO UPDATE SET "
				 "requests = requests + excluded.requests, rt_ns = rt_ns + excluded.rt_ns, "
				 "rx = rx + excluded.rx",
				 &s, "failed to write to")) != 0)
		return rv;
	sqlite3_bind_text(s, 1, server, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, win_start_ns);
	sqlite3_bind_int64(s, 3, win_len_ns);
	sqlite3_bind_text(s, 4, ce, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 5, (sqlite3_int64)requests);
	sqlite3_bind_int64(s, 6, (sqlite3_int64)rt_ns);
	sqlite3_bind_int64(s, 7, (sqlite3_int64)rx_bytes);
	return st_est_exec(db, s);
}

/* ---- reading windows ---- */

struct st_est_buf {
	struct st_est_ce *v;
	size_t n, cap;
};

static int st_est_flush(struct st_est_window *w, struct st_est_buf *b,
			int (*cb)(void *arg, const struct st_est_window *w), void *arg)
{
	w->n = b->n;
	w->ce = b->v;
	b->n = 0;
	return cb(arg, w);
}

int st_est_windows(st_db *db, const char *server, int64_t since_ns, int64_t until_end_ns,
		   int (*cb)(void *arg, const struct st_est_window *w), void *arg)
{
	struct st_est_window w;
	struct st_est_buf b = { 0 };
	sqlite3_stmt *s;
	int rc, rv = RM_OK, have = 0;

	if (!db || !cb || st_check_name("server", server, ST_NAME_MAX) != 0)
		return RM_EINVAL;
	/* every window with a CPU total, joined with its inputs (if any) */
	if ((rv = st_est_prepare(db,
				 "SELECT t.win_start, t.win_len, t.value, t.capacity, i.ce, i.requests, i.rt_ns, i.rx "
				 "FROM total t LEFT JOIN est_input i ON i.server = t.server AND "
				 "i.win_start = t.win_start AND i.win_len = t.win_len "
				 "WHERE t.server = ?1 AND t.resource = 0 AND t.win_start >= ?2 AND "
				 "t.win_start <= ?3 - t.win_len "
				 "ORDER BY t.win_start, t.win_len, i.ce",
				 &s, "failed to read from")) != 0)
		return rv;
	sqlite3_bind_text(s, 1, server, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, since_ns);
	sqlite3_bind_int64(s, 3, until_end_ns);
	memset(&w, 0, sizeof(w));
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t start = sqlite3_column_int64(s, 0), len = sqlite3_column_int64(s, 1);

		if (have && (start != w.start_ns || len != w.len_ns)) {
			if ((rv = st_est_flush(&w, &b, cb, arg)) != 0)
				goto out;
			have = 0;
		}
		if (!have) {
			memset(&w, 0, sizeof(w));
			w.start_ns = start;
			w.len_ns = len;
			w.cpu_ns = (uint64_t)sqlite3_column_int64(s, 2);
			w.capacity_ns = (uint64_t)sqlite3_column_int64(s, 3);
			have = 1;
		}
		if (sqlite3_column_type(s, 4) == SQLITE_NULL)
			continue;
		if (b.n == b.cap) {
			size_t cap = b.cap ? b.cap * 2 : 16;
			struct st_est_ce *v = realloc(b.v, cap * sizeof(*v));

			if (!v) {
				rv = RM_ENOMEM;
				rm_log_error("failed to read from '%s': %s", db->path, rm_strerror(rv));
				goto out;
			}
			b.v = v;
			b.cap = cap;
		}
		snprintf(b.v[b.n].ce, sizeof(b.v[b.n].ce), "%s", st_col_text(s, 4));
		b.v[b.n].requests = (uint64_t)sqlite3_column_int64(s, 5);
		b.v[b.n].rt_ns = (uint64_t)sqlite3_column_int64(s, 6);
		b.v[b.n].rx = (uint64_t)sqlite3_column_int64(s, 7);
		b.n++;
	}
	if (rc != SQLITE_DONE) {
		rv = st_sql_err(db, rc, "failed to read from");
		goto out;
	}
	if (have)
		rv = st_est_flush(&w, &b, cb, arg);
out:
	sqlite3_finalize(s);
	free(b.v);
	return rv;
}

/* Runs a query for one row of one or two int64 columns: RM_ENOENT if none. */
static int st_est_one(st_db *db, sqlite3_stmt *s, int64_t *a, int64_t *b)
{
	int rc = sqlite3_step(s), rv = RM_OK;

	if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL) {
		*a = sqlite3_column_int64(s, 0);
		if (b)
			*b = sqlite3_column_int64(s, 1);
	} else if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
		rv = RM_ENOENT;
	} else {
		rv = st_sql_err(db, rc, "failed to read from");
	}
	sqlite3_finalize(s);
	return rv;
}

int st_est_latest(st_db *db, const char *server, int64_t *start_ns, int64_t *len_ns)
{
	sqlite3_stmt *s;
	int rv;

	if (!db || !start_ns || !len_ns || st_check_name("server", server, ST_NAME_MAX) != 0)
		return RM_EINVAL;
	if ((rv = st_est_prepare(db,
				 "SELECT win_start, win_len FROM total WHERE server = ?1 AND resource = 0 "
				 "ORDER BY win_start DESC, win_len DESC LIMIT 1",
				 &s, "failed to read from")) != 0)
		return rv;
	sqlite3_bind_text(s, 1, server, -1, SQLITE_STATIC);
	return st_est_one(db, s, start_ns, len_ns);
}

int st_est_back(st_db *db, const char *server, int64_t start_ns, unsigned k, int64_t *out_ns)
{
	sqlite3_stmt *s;
	int rv;

	if (!db || !out_ns || k == 0 || st_check_name("server", server, ST_NAME_MAX) != 0)
		return RM_EINVAL;
	if ((rv = st_est_prepare(db,
				 "SELECT win_start FROM total WHERE server = ?1 AND resource = 0 AND win_start < ?2 "
				 "ORDER BY win_start DESC LIMIT 1 OFFSET ?3",
				 &s, "failed to read from")) != 0)
		return rv;
	sqlite3_bind_text(s, 1, server, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, start_ns);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)k - 1);
	return st_est_one(db, s, out_ns, NULL);
}

int st_est_last(st_db *db, const char *server, const char *method, int64_t *start_ns)
{
	sqlite3_stmt *s;
	int rv;

	if (!db || !start_ns || st_check_name("server", server, ST_NAME_MAX) != 0 ||
	    st_est_check_method(method) != 0)
		return RM_EINVAL;
	if ((rv = st_est_prepare(db, "SELECT max(win_start) FROM est_window WHERE server = ?1 AND method = ?2", &s,
				 "failed to read from")) != 0)
		return rv;
	sqlite3_bind_text(s, 1, server, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, method, -1, SQLITE_STATIC);
	return st_est_one(db, s, start_ns, NULL);
}

/* Binds ?1..?4 of s to an estimate's key: server, method, window start and length. */
static void st_est_bind_window(sqlite3_stmt *s, const char *server, const char *method, int64_t win_start_ns,
			       int64_t win_len_ns)
{
	sqlite3_bind_text(s, 1, server, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, method, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, win_start_ns);
	sqlite3_bind_int64(s, 4, win_len_ns);
}

int st_est_put(st_db *db, const char *server, const char *method, int64_t win_start_ns, int64_t win_len_ns,
	       int solved, const char *const *ce, const uint64_t *value, size_t n)
{
	sqlite3_stmt *s;
	size_t i;
	int rv;

	if ((rv = st_est_writable(db)) != 0)
		return rv;
	if ((rv = st_check_name("server", server, ST_NAME_MAX)) != 0 || (rv = st_est_check_method(method)) != 0 ||
	    (rv = st_est_check_window(win_start_ns, win_len_ns)) != 0)
		return rv;
	if (solved && n && (!ce || !value)) {
		rm_log_error("invalid estimate: null array");
		return RM_EINVAL;
	}
	for (i = 0; solved && i < n; i++)
		if ((rv = st_check_name("ce", ce[i], ST_NAME_MAX)) != 0 ||
		    (rv = st_est_check_value("estimate", value[i])) != 0)
			return rv;
	if ((rv = st_est_prepare(db,
				 "INSERT OR REPLACE INTO est_window (server, method, win_start, win_len, solved) "
				 "VALUES (?1, ?2, ?3, ?4, ?5)",
				 &s, "failed to write to")) != 0)
		return rv;
	st_est_bind_window(s, server, method, win_start_ns, win_len_ns);
	sqlite3_bind_int(s, 5, solved ? 1 : 0);
	if ((rv = st_est_exec(db, s)) != 0)
		return rv;
	if ((rv = st_est_prepare(db,
				 "DELETE FROM estimate WHERE server = ?1 AND method = ?2 AND win_start = ?3 "
				 "AND win_len = ?4",
				 &s, "failed to write to")) != 0)
		return rv;
	st_est_bind_window(s, server, method, win_start_ns, win_len_ns);
	if ((rv = st_est_exec(db, s)) != 0 || !solved || !n)
		return rv;
	if ((rv = st_est_prepare(db,
				 "INSERT OR REPLACE INTO estimate (server, method, win_start, win_len, ce, value) "
				 "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
				 &s, "failed to write to")) != 0)
		return rv;
	for (i = 0; i < n; i++) {
		int rc;

		st_est_bind_window(s, server, method, win_start_ns, win_len_ns);
		sqlite3_bind_text(s, 5, ce[i], -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 6, (sqlite3_int64)value[i]);
		rc = sqlite3_step(s);
		sqlite3_reset(s);
		if (rc != SQLITE_DONE) {
			rv = st_sql_err(db, rc, "failed to write to");
			break;
		}
	}
	sqlite3_finalize(s);
	return rv;
}

/* ---- the query ---- */

int st_query_est(st_db *db, const struct st_query *q, const char *method, struct st_row **rows, size_t *n)
{
	const char *ws, *wl, *cefilter;
	char sql[3072];
	struct st_row *v = NULL;
	size_t nv = 0, cap = 0;
	sqlite3_stmt *s;
	int rc, rv, want_v = 1, i;

	if ((rv = st_check_query(db, q, rows, n)) != 0)
		return rv;
	*rows = NULL;
	*n = 0;
	if ((rv = st_est_check_method(method)) != 0)
		return rv;
	if (q->resource >= 0 && q->resource != ST_R_CPU)
		return RM_OK;
	cefilter = "1";
	if (q->ce && strcmp(q->ce, ST_CE_UNACCOUNTABLE) == 0)
		cefilter = "0";
	else if (q->ce)
		cefilter = "ce.ce = :ce", want_v = 0;
	ws = q->per_window ? "win_start" : "0";
	wl = q->per_window ? "win_len" : "0";
	/* ew: the windows method solved in the range; ce: estimates per CE;
	   tt: U and capacity over those windows; su: sum of the estimates */
	snprintf(sql, sizeof(sql),
		 "WITH ew AS (SELECT server, win_start, win_len, %s AS ws, %s AS wl FROM est_window WHERE method = :m AND solved = 1 "
		 "AND win_start >= :since AND win_start < :until%s), "
		 "ce AS (SELECT e.server AS server, ew.ws AS ws, ew.wl AS wl, e.ce AS ce, SUM(e.value) AS v "
		 "FROM estimate e JOIN ew ON e.server = ew.server AND e.win_start = ew.win_start AND "
		 "e.win_len = ew.win_len WHERE e.method = :m GROUP BY 1, 2, 3, 4), "
		 "tt AS (SELECT t.server AS server, ew.ws AS ws, ew.wl AS wl, SUM(t.value) AS t, "
		 "SUM(t.capacity) AS c FROM total t JOIN ew ON t.server = ew.server AND "
		 "t.win_start = ew.win_start AND t.win_len = ew.win_len WHERE t.resource = 0 GROUP BY 1, 2, 3), "
		 "su AS (SELECT server, ws, wl, SUM(v) AS s FROM ce GROUP BY 1, 2, 3), "
		 "gt AS (SELECT tt.server AS server, tt.ws AS ws, tt.wl AS wl, tt.t AS t, tt.c AS c, "
		 "COALESCE(su.s, 0) AS s FROM tt LEFT JOIN su ON su.server = tt.server AND su.ws = tt.ws AND "
		 "su.wl = tt.wl) "
		 "SELECT ce.server, ce.ws, ce.wl, ce.ce, 0, ce.v, gt.t, gt.c, gt.s FROM ce JOIN gt ON "
		 "gt.server = ce.server AND gt.ws = ce.ws AND gt.wl = ce.wl WHERE %s "
		 "UNION ALL SELECT server, ws, wl, '', 1, 0, t, c, s FROM gt WHERE %s "
		 "ORDER BY 1, 2, 3, 5, 6 DESC, 4",
		 ws, wl, q->server ? " AND server = :server" : "", cefilter, want_v ? "1" : "0");
	if ((rv = st_est_prepare(db, sql, &s, "failed to query")) != 0)
		return rv;
	if ((i = sqlite3_bind_parameter_index(s, ":m")) > 0)
		sqlite3_bind_text(s, i, method, -1, SQLITE_STATIC);
	st_query_bind(s, q);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct st_row *row;
		int64_t t = sqlite3_column_int64(s, 6), su = sqlite3_column_int64(s, 8);

		if (nv == cap) {
			size_t ncap = cap ? cap * 2 : 32;
			struct st_row *nvv = realloc(v, ncap * sizeof(*nvv));

			if (!nvv) {
				rv = RM_ENOMEM;
				rm_log_error("failed to query '%s': %s", db->path, rm_strerror(rv));
				goto fail;
			}
			v = nvv;
			cap = ncap;
		}
		row = &v[nv++];
		memset(row, 0, sizeof(*row));
		snprintf(row->server, sizeof(row->server), "%s", st_col_text(s, 0));
		row->resource = ST_R_CPU;
		row->win_start_ns = sqlite3_column_int64(s, 1);
		row->win_len_ns = sqlite3_column_int64(s, 2);
		row->total = t > 0 ? (uint64_t)t : 0;
		row->capacity = sqlite3_column_int64(s, 7) > 0 ? (uint64_t)sqlite3_column_int64(s, 7) : 0;
		if (sqlite3_column_int(s, 4)) {
			snprintf(row->ce, sizeof(row->ce), "%s", ST_CE_UNACCOUNTABLE);
			if (__builtin_sub_overflow(t, su, &row->residual)) {
				rv = RM_ESQL;
				rm_log_error("failed to query '%s': residual overflows int64", db->path);
				goto fail;
			}
			row->value = row->residual > 0 ? (uint64_t)row->residual : 0;
		} else {
			snprintf(row->ce, sizeof(row->ce), "%s", st_col_text(s, 3));
			row->value = sqlite3_column_int64(s, 5) > 0 ? (uint64_t)sqlite3_column_int64(s, 5) : 0;
		}
	}
	if (rc != SQLITE_DONE) {
		rv = st_sql_err(db, rc, "failed to query");
		goto fail;
	}
	sqlite3_finalize(s);
	if (nv) {
		*rows = v;
		*n = nv;
	} else {
		free(v);
	}
	return RM_OK;
fail:
	sqlite3_finalize(s);
	free(v);
	return rv;
}
