/*
 * st_rollup.c - the 1 min / 1 h / 1 day series: adding each write to its
 * buckets, retention per series, the stored horizon, and the choice of the
 * series that answer a query's range (st_cover), and the calendar month
 * arithmetic of the month series. Owns the tables r_usage, r_unacct,
 * r_total, r_split, r_ce_usage, r_ce_total, series and horizon (schema v6,
 * v7, v8); drives the packing of settled days (st_pack.c) before retention.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "rm_date.h"
#include "rm_err.h"
#include "st_int.h"
#include "banned.h"

#define MIN_NS (60 * ST_NS_PER_S)
#define HOUR_NS (3600 * ST_NS_PER_S)
#define DAY_NS (86400 * ST_NS_PER_S)

static const int64_t st_steps[ST_SERIES_COUNT] = { 0, MIN_NS, HOUR_NS, DAY_NS };
static const char *const st_series_names[ST_SERIES_COUNT] = { "1s", "1m", "1h", "1d" };

int64_t st_series_step(enum st_series s)
{
	return (int)s >= 0 && s < ST_SERIES_COUNT ? st_steps[s] : 0;
}

const char *st_series_name(enum st_series s)
{
	return (int)s >= 0 && s < ST_SERIES_COUNT ? st_series_names[s] : "?";
}

void st_retention_default(struct st_retention *r)
{
	r->keep_ns[ST_SERIES_1S] = 2 * DAY_NS;
	r->keep_ns[ST_SERIES_1M] = 30 * DAY_NS;
	r->keep_ns[ST_SERIES_1H] = 395 * DAY_NS;
	r->keep_ns[ST_SERIES_1D] = 0;
}

/* x rounded down / up to a multiple of step (> 0), saturating. */
static int64_t st_floor(int64_t x, int64_t step)
{
	int64_t m = ((x % step) + step) % step, out;

	return __builtin_sub_overflow(x, m, &out) ? INT64_MIN : out;
}

static int64_t st_ceil(int64_t x, int64_t step)
{
	int64_t m = ((x % step) + step) % step, out;

	if (m == 0)
		return x;
	return __builtin_add_overflow(x, step - m, &out) ? INT64_MAX : out;
}

static int64_t st_max(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

static int64_t st_min(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

int64_t st_month_start(int64_t ns, int add)
{
	int64_t y, days, out;
	unsigned m, d;

	rm_civil_from_days(st_floor(ns, DAY_NS) / DAY_NS, &y, &m, &d);
	y += (int64_t)(m - 1 + (unsigned)add) / 12;
	m = (m - 1 + (unsigned)add) % 12 + 1;
	days = rm_days_from_civil(y, m, 1);
	if (__builtin_mul_overflow(days, DAY_NS, &out))
		return days < 0 ? INT64_MIN : INT64_MAX;
	return out;
}

/* ---- choosing the series of a query (pure) ---- */

struct st_segs {
	struct st_seg *v;
	size_t n;
};

static void st_seg_add(struct st_segs *o, int series, int64_t lo, int64_t hi)
{
	if (lo >= hi)
		return;
	assert(o->n < ST_SEG_MAX);
	if (o->n && o->v[o->n - 1].series == series && o->v[o->n - 1].hi == lo) {
		o->v[o->n - 1].hi = hi;
		return;
	}
	o->v[o->n].series = series;
	o->v[o->n].lo = lo;
	o->v[o->n].hi = hi;
	o->n++;
}

/* [a, b) from the finest series holding each part, from series `from` up. */
static void st_cover_finest(const struct st_series_map *m, int from, int64_t a, int64_t b,
			    struct st_segs *o)
{
	int s;

	for (s = from; s < ST_SERIES_COUNT; s++) {
		int64_t hi = st_min(b, m->rolled[s]);

		if (s > 0)
			hi = st_min(hi, m->kept[s - 1]);
		st_seg_add(o, s, st_max(a, m->kept[s]), hi);
	}
}

/* [a, b) from series s and finer: whole buckets of s, the edges finer. */
static void st_cover_exact(const struct st_series_map *m, int s, int64_t a, int64_t b,
			   int64_t step_ns, struct st_segs *o)
{
	int64_t x, y;

	if (a >= b)
		return;
	if (s == ST_SERIES_1S) {
		st_seg_add(o, s, st_max(a, m->kept[s]), b);
		if (a < m->kept[s])
			st_cover_finest(m, ST_SERIES_1M, a, st_min(b, m->kept[s]), o);
		return;
	}
	if (step_ns > 0 && step_ns % st_steps[s] != 0) {
		st_cover_exact(m, s - 1, a, b, step_ns, o);
		return;
	}
	x = st_ceil(st_max(a, m->kept[s]), st_steps[s]);
	y = st_floor(st_min(b, m->rolled[s]), st_steps[s]);
	if (x >= y) {
		st_cover_exact(m, s - 1, a, b, step_ns, o);
		return;
	}
	st_cover_exact(m, s - 1, a, x, step_ns, o);
	st_seg_add(o, s, x, y);
	st_cover_exact(m, s - 1, y, b, step_ns, o);
}

size_t st_cover(const struct st_series_map *m, int64_t since, int64_t until, int64_t step_ns,
		int finest, struct st_seg *out)
{
	struct st_segs o = { out, 0 };

	if (finest)
		st_cover_finest(m, ST_SERIES_1S, since, until, &o);
	else
		st_cover_exact(m, ST_SERIES_COUNT - 1, since, until, step_ns, &o);
	return o.n;
}

/* ---- state ---- */

/* Runs sql (binding ?1..?n from v) and sets *out to its first column, or
 * *found = 0 when there is no row or it is NULL. */
static int st_int_get(st_db *db, const char *sql, const int64_t *v, int nv, int64_t *out,
		      int *found)
{
	sqlite3_stmt *s;
	int rc, i;

	*found = 0;
	rc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return st_sql_err(db, rc, "failed to query");
	for (i = 0; i < nv; i++)
		sqlite3_bind_int64(s, i + 1, v[i]);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL) {
		*out = sqlite3_column_int64(s, 0);
		*found = 1;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return st_sql_err(db, rc, "failed to query");
	return RM_OK;
}

int st_series_load(st_db *db, struct st_series_map *m)
{
	sqlite3_stmt *s;
	int rc, i;

	/* every write reaches every series: each is complete from kept on */
	for (i = 0; i < ST_SERIES_COUNT; i++) {
		m->rolled[i] = INT64_MAX;
		m->kept[i] = INT64_MIN;
	}
	rc = sqlite3_prepare_v2(db->h, "SELECT series, kept_from FROM series", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return st_sql_err(db, rc, "failed to query");
	m->month_kept = INT64_MIN;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		i = sqlite3_column_int(s, 0);
		if (i == ST_SERIES_COUNT)
			m->month_kept = sqlite3_column_int64(s, 1);
		if (i < 0 || i >= ST_SERIES_COUNT)
			continue;
		m->kept[i] = sqlite3_column_int64(s, 1);
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return st_sql_err(db, rc, "failed to query");
	return RM_OK;
}

int st_series_state(st_db *db, enum st_series s, int64_t *rolled_until, int64_t *kept_from)
{
	struct st_series_map m;
	int rv;

	if (!db || (int)s < 0 || s >= ST_SERIES_COUNT || !rolled_until || !kept_from) {
		rm_log_error("invalid series state query");
		return RM_EINVAL;
	}
	if ((rv = st_series_load(db, &m)) != 0)
		return rv;
	*rolled_until = m.rolled[s];
	*kept_from = m.kept[s];
	return RM_OK;
}

/* Runs a one-shot write binding v[0..nv) to ?1..?nv. */
static int st_write_ints(st_db *db, const char *sql, const int64_t *v, int nv, const char *what)
{
	sqlite3_stmt *st;
	int rc, i;

	rc = sqlite3_prepare_v2(db->h, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return st_sql_err(db, rc, what);
	for (i = 0; i < nv; i++)
		sqlite3_bind_int64(st, i + 1, v[i]);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? RM_OK : st_sql_err(db, rc, what);
}

/* Stores where retention stopped in series s (rolled_until: always the
 * maximum since schema v7). */
static int st_series_store(st_db *db, int s, int64_t kept)
{
	const int64_t v[2] = { s, kept };

	return st_write_ints(db, "INSERT OR REPLACE INTO series (series, rolled_until, kept_from) "
				 "VALUES (?1, 9223372036854775807, ?2)", v, 2,
			     "failed to apply retention to");
}

int st_horizon_set(st_db *db, int64_t settled_ns)
{
	if (!db)
		return RM_EINVAL;
	if (db->flags & ST_OPEN_READONLY) {
		rm_log_error("failed to write to '%s': opened read-only", db->path);
		return RM_EPERM;
	}
	return st_write_ints(db, "INSERT INTO horizon (id, settled) VALUES (1, ?1) ON CONFLICT DO UPDATE "
				 "SET settled = max(settled, excluded.settled)", &settled_ns, 1,
			     "failed to write to");
}

int st_horizon_get(st_db *db, int64_t *settled_ns)
{
	int found, rv;

	if (!db || !settled_ns)
		return RM_EINVAL;
	if ((rv = st_int_get(db, "SELECT settled FROM horizon WHERE id = 1", NULL, 0, settled_ns,
			     &found)) != 0)
		return rv;
	return found ? RM_OK : RM_ENOENT;
}

int st_latest_end(st_db *db, int64_t *end_ns)
{
	int found, rv;

	if (!db || !end_ns)
		return RM_EINVAL;
	rv = st_int_get(db, "SELECT max(e) FROM (SELECT win_start + win_len AS e FROM total "
			    "WHERE win_start = (SELECT max(win_start) FROM total))",
			NULL, 0, end_ns, &found);
	if (rv != 0)
		return rv;
	return found ? RM_OK : RM_ENOENT;
}

/* ---- retention ---- */

/* The tables of one series: "usage" or "r_usage" etc., and the filter
 * that selects the series' rows (with ?3 = its step for rolled series). */
static const char *const st_tables[] = { "usage", "unacct", "total", "split" };

/* The smallest start in series s (its rows of any table), *found = 0 if none. */
static int st_series_min(st_db *db, int s, int64_t *out, int *found)
{
	char sql[512];
	int64_t step = st_steps[s];

	if (s == ST_SERIES_1S)
		snprintf(sql, sizeof(sql),
			 "SELECT min(m) FROM (SELECT min(win_start) AS m FROM usage UNION ALL "
			 "SELECT min(win_start) FROM unacct UNION ALL SELECT min(win_start) FROM total "
			 "UNION ALL SELECT min(win_start) FROM split)");
	else
		snprintf(sql, sizeof(sql),
			 "SELECT min(m) FROM (SELECT min(win_start) AS m FROM r_usage WHERE step = ?1 "
			 "UNION ALL SELECT min(win_start) FROM r_unacct WHERE step = ?1 UNION ALL "
			 "SELECT min(win_start) FROM r_total WHERE step = ?1 UNION ALL "
			 "SELECT min(win_start) FROM r_split WHERE step = ?1)");
	return st_int_get(db, sql, &step, s == ST_SERIES_1S ? 0 : 1, out, found);
}

int st_last_start(st_db *db, int64_t *out, int *found)
{
	/* each a lookup at the end of a time index */
	return st_int_get(db, "SELECT max(m) FROM (SELECT max(win_start) AS m FROM usage UNION ALL "
			      "SELECT max(win_start) FROM unacct UNION ALL SELECT max(win_start) FROM total "
			      "UNION ALL SELECT max(win_start) FROM split)", NULL, 0, out, found);
}

int st_stored_span(st_db *db, int64_t *first_ns, int64_t *end_ns)
{
	struct st_series_map m;
	int64_t v, len;
	int s, found = 0, rv;

	if (!db || !first_ns || !end_ns) {
		rm_log_error("invalid stored span query");
		return RM_EINVAL;
	}
	if ((rv = st_series_load(db, &m)) != 0)
		return rv;
	/* the first: the finest series nothing was ever deleted from holds the
	 * oldest data; if retention cut every series, the coarsest's oldest */
	for (s = ST_SERIES_1S; s < ST_SERIES_COUNT; s++) {
		if (m.kept[s] != INT64_MIN && s + 1 < ST_SERIES_COUNT)
			continue;
		if ((rv = st_series_min(db, s, first_ns, &found)) != 0)
			return rv;
		if (found)
			break;
	}
	if (!found)
		return RM_ENOENT;
	/* the end: the latest window, or the latest bucket of the finest
	 * series holding one */
	if ((rv = st_last_start(db, &v, &found)) != 0)
		return rv;
	if (found) {
		if ((rv = st_int_get(db, "SELECT max(m) FROM (SELECT max(win_len) AS m FROM usage "
					 "WHERE win_start = ?1 UNION ALL SELECT max(win_len) FROM unacct "
					 "WHERE win_start = ?1 UNION ALL SELECT max(win_len) FROM total "
					 "WHERE win_start = ?1 UNION ALL SELECT max(win_len) FROM split "
					 "WHERE win_start = ?1)", &v, 1, &len, &found)) != 0)
			return rv;
		if (!found)
			*end_ns = v;
		else if (__builtin_add_overflow(v, len, end_ns))
			*end_ns = INT64_MAX;
		return RM_OK;
	}
	for (s = ST_SERIES_1M; s < ST_SERIES_COUNT; s++) {
		int64_t step = st_steps[s];

		if ((rv = st_int_get(db, "SELECT max(m) FROM (SELECT max(win_start) AS m FROM r_usage "
					 "WHERE step = ?1 UNION ALL SELECT max(win_start) FROM r_unacct "
					 "WHERE step = ?1 UNION ALL SELECT max(win_start) FROM r_total "
					 "WHERE step = ?1 UNION ALL SELECT max(win_start) FROM r_split "
					 "WHERE step = ?1)", &step, 1, &v, &found)) != 0)
			return rv;
		if (found) {
			if (__builtin_add_overflow(v, step, end_ns))
				*end_ns = INT64_MAX;
			return RM_OK;
		}
	}
	return RM_ENOENT;
}

/* Deletes the rows of series s starting before cutoff. */
static int st_purge(st_db *db, int s, int64_t cutoff)
{
	sqlite3_stmt *st;
	char sql[256];
	size_t t;
	int rc;

	/* the day series also has its packed rows */
	if (s == ST_SERIES_1D) {
		rc = sqlite3_prepare_v2(db->h, "DELETE FROM r_pack WHERE win_start < ?1", -1, &st, NULL);
		if (rc != SQLITE_OK)
			return st_sql_err(db, rc, "failed to apply retention to");
		sqlite3_bind_int64(st, 1, cutoff);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE)
			return st_sql_err(db, rc, "failed to apply retention to");
	}
	/* the rolled-up series also have their rows summed over servers */
	for (t = 0; t < sizeof(st_tables) / sizeof(st_tables[0]) + (s != ST_SERIES_1S ? 2 : 0); t++) {
		if (s == ST_SERIES_1S)
			snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE win_start < ?1", st_tables[t]);
		else if (t >= sizeof(st_tables) / sizeof(st_tables[0]))
			snprintf(sql, sizeof(sql), "DELETE FROM r_ce_%s WHERE step = ?2 AND win_start < ?1",
				 t == sizeof(st_tables) / sizeof(st_tables[0]) ? "usage" : "total");
		else
			snprintf(sql, sizeof(sql), "DELETE FROM r_%s WHERE step = ?2 AND win_start < ?1",
				 st_tables[t]);
		rc = sqlite3_prepare_v2(db->h, sql, -1, &st, NULL);
		if (rc != SQLITE_OK)
			return st_sql_err(db, rc, "failed to apply retention to");
		sqlite3_bind_int64(st, 1, cutoff);
		if (s != ST_SERIES_1S)
			sqlite3_bind_int64(st, 2, st_steps[s]);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE)
			return st_sql_err(db, rc, "failed to apply retention to");
	}
	return RM_OK;
}

/* One pass of retention over every series, deleting at most
 * max(ST_ROLLUP_MAX_SPAN_NS, the next series' step) of each; in the
 * caller's transaction. */
static int st_rollup_pass(st_db *db, const struct st_retention *r, int64_t horizon, int *more)
{
	struct st_series_map m;
	int64_t cutoff, lo, first;
	int s, found, rv;

	int64_t packed;
	int have_packed;

	if ((rv = st_series_load(db, &m)) != 0)
		return rv;
	/* pack the next settled day first: retention of the day series stops
	 * at the first day not packed yet */
	if ((rv = st_series_min(db, ST_SERIES_1D, &first, &found)) != 0 ||
	    (rv = st_pack_pass(db, horizon, first, found, more)) != 0 ||
	    (rv = st_pack_until(db, &packed, &have_packed)) != 0)
		return rv;
	for (s = ST_SERIES_1S; s < ST_SERIES_COUNT; s++) {
		/* the cut falls on a bucket of the next series, which then
		 * answers for what is deleted */
		int64_t align = st_steps[s + 1 < ST_SERIES_COUNT ? s + 1 : s];
		int64_t span = st_max(ST_ROLLUP_MAX_SPAN_NS, align);

		if (r->keep_ns[s] == 0 || horizon < INT64_MIN + r->keep_ns[s])
			continue;
		cutoff = st_floor(horizon - r->keep_ns[s], align);
		if (s == ST_SERIES_1D)
			cutoff = st_min(cutoff, have_packed ? packed : INT64_MIN);
		if (cutoff <= m.kept[s])
			continue;
		lo = m.kept[s];
		if (lo == INT64_MIN) {
			if ((rv = st_series_min(db, s, &first, &found)) != 0)
				return rv;
			lo = found ? st_floor(first, align) : cutoff;
		}
		if (cutoff <= lo)
			continue; /* nothing that old */
		if (cutoff - lo > span) {
			cutoff = lo + span;
			*more = 1;
		}
		if ((rv = st_purge(db, s, cutoff)) != 0)
			return rv;
		if ((rv = st_series_store(db, s, cutoff)) != 0)
			return rv;
	}
	return RM_OK;
}

int st_rollup(st_db *db, const struct st_retention *r, int *more)
{
	struct st_retention def;
	int64_t horizon;
	int rv, i, dummy = 0;

	if (!db)
		return RM_EINVAL;
	if (!more)
		more = &dummy;
	*more = 0;
	if (!r) {
		st_retention_default(&def);
		r = &def;
	}
	for (i = 0; i < ST_SERIES_COUNT; i++)
		if (r->keep_ns[i] < 0) {
			rm_log_error("invalid retention of the %s series: negative", st_series_names[i]);
			return RM_EINVAL;
		}
	if (db->flags & ST_OPEN_READONLY) {
		rm_log_error("failed to apply retention to '%s': opened read-only", db->path);
		return RM_EPERM;
	}
	rv = st_horizon_get(db, &horizon);
	if (rv == RM_ENOENT)
		return RM_OK;
	if (rv != 0)
		return rv;
	if ((rv = st_begin(db)) != 0)
		return rv;
	if ((rv = st_rollup_pass(db, r, horizon, more)) != 0 || (rv = st_commit(db)) != 0) {
		st_rollback(db);
		return rv;
	}
	return RM_OK;
}

/* ---- writes ---- */

/* Binds a write's buckets (the parameters of ST_S_R_* and ST_S_C_*, which
 * name only those they use), steps and resets st. */
static int st_bucket_write(st_db *db, sqlite3_stmt *st, const int64_t bucket[4], const char *server,
			   enum st_resource r, const char *key, uint64_t value, uint64_t cap)
{
	int rc, i, np = sqlite3_bind_parameter_count(st);

	for (i = 0; i < 4; i++)
		sqlite3_bind_int64(st, i + 1, bucket[i]);
	if (np >= 5)
		sqlite3_bind_text(st, 5, server, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 6, (int)r);
	if (np >= 7)
		sqlite3_bind_text(st, 7, key ? key : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 8, (sqlite3_int64)value);
	if (np >= 9)
		sqlite3_bind_int64(st, 9, (sqlite3_int64)cap);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? RM_OK : st_sql_err(db, rc, "failed to write to");
}

int st_rollup_add(st_db *db, enum st_stmt which, const char *server, int64_t start,
		  enum st_resource r, const char *key, uint64_t value, uint64_t cap)
{
	enum st_stmt rs = which == ST_S_USAGE ? ST_S_R_USAGE : which == ST_S_UNACCT ? ST_S_R_UNACCT :
			  which == ST_S_TOTAL ? ST_S_R_TOTAL : ST_S_R_SPLIT;
	const int64_t bucket[4] = { st_floor(start, MIN_NS), st_floor(start, HOUR_NS), st_floor(start, DAY_NS),
				    st_month_start(start, 0) };
	int rv;

	/* the 1 min, 1 h and 1 day buckets (usage and totals: and the month) */
	if ((rv = st_bucket_write(db, db->stmt[rs], bucket, server, r, key, value, cap)) != 0)
		return rv;
	/* usage and totals: the same summed over servers */
	if ((which == ST_S_USAGE || which == ST_S_TOTAL) &&
	    (rv = st_bucket_write(db, db->stmt[which == ST_S_USAGE ? ST_S_C_USAGE : ST_S_C_TOTAL], bucket,
				  server, r, key, value, cap)) != 0)
		return rv;
	/* a day already packed (a late write): its packed row too */
	if (which == ST_S_SPLIT)
		return RM_OK;
	return st_bucket_write(db, db->stmt[which == ST_S_USAGE ? ST_S_P_USAGE : which == ST_S_UNACCT ? ST_S_P_UNACCT
												: ST_S_P_TOTAL],
			       bucket, server, r, key, value, cap);
}
