/*
 * st_rollup.c - the 1 min / 1 h / 1 day series: rolling the finer rows up
 * into them as the settled horizon moves, retention per series, the stored
 * horizon, late writes into buckets already rolled up, and the choice of
 * the series that answer a query's range (st_cover). Owns the tables
 * r_usage, r_unacct, r_total, r_split, series and horizon (schema v6).
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

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

	for (i = 0; i < ST_SERIES_COUNT; i++) {
		m->rolled[i] = i == ST_SERIES_1S ? INT64_MAX : INT64_MIN;
		m->kept[i] = INT64_MIN;
	}
	rc = sqlite3_prepare_v2(db->h, "SELECT series, rolled_until, kept_from FROM series", -1, &s,
				NULL);
	if (rc != SQLITE_OK)
		return st_sql_err(db, rc, "failed to query");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		i = sqlite3_column_int(s, 0);
		if (i < 0 || i >= ST_SERIES_COUNT)
			continue;
		if (i != ST_SERIES_1S)
			m->rolled[i] = sqlite3_column_int64(s, 1);
		m->kept[i] = sqlite3_column_int64(s, 2);
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

static int st_series_store(st_db *db, int s, int64_t rolled, int64_t kept)
{
	const int64_t v[3] = { s, rolled, kept };

	return st_write_ints(db, "INSERT OR REPLACE INTO series (series, rolled_until, kept_from) "
				 "VALUES (?1, ?2, ?3)", v, 3, "failed to roll up");
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

int st_rollup_cache(st_db *db)
{
	struct st_series_map m;
	int rv;

	if ((rv = st_series_load(db, &m)) != 0)
		return rv;
	memcpy(db->rolled, m.rolled, sizeof(db->rolled));
	return RM_OK;
}

/* ---- rolling up ---- */

/* The tables of one series: "usage" or "r_usage" etc., and the filter
 * that selects the series' rows (with ?3 = its step for rolled series). */
static const char *const st_tables[] = { "usage", "unacct", "total", "split" };

/* Columns summed / grouped per table. */
static const char *const st_keys[] = { "server, resource, ce", "server, resource, reason",
				       "server, resource", "server" };
static const char *const st_sums[] = { "SUM(value)", "SUM(value)", "SUM(value), SUM(capacity)",
				       "SUM(parts)" };
static const char *const st_vals[] = { "value", "value", "value, capacity", "parts" };
static const char *const st_upd[] = {
	"value = value + excluded.value", "value = value + excluded.value",
	"value = value + excluded.value, capacity = capacity + excluded.capacity",
	"parts = parts + excluded.parts",
};

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

/* Rolls the rows of series s - 1 starting in [lo, hi) into series s. */
static int st_roll_range(st_db *db, int s, int64_t lo, int64_t hi)
{
	int64_t step = st_steps[s], from = st_steps[s - 1];
	char sql[1024], src[128];
	sqlite3_stmt *st;
	size_t t;
	int rc;

	for (t = 0; t < sizeof(st_tables) / sizeof(st_tables[0]); t++) {
		if (s - 1 == ST_SERIES_1S)
			snprintf(src, sizeof(src), "%s WHERE", st_tables[t]);
		else
			snprintf(src, sizeof(src), "r_%s WHERE step = ?4 AND", st_tables[t]);
		snprintf(sql, sizeof(sql),
			 "INSERT INTO r_%s (step, win_start, %s, %s) "
			 "SELECT ?3, win_start - (((win_start %% ?3) + ?3) %% ?3) AS b, %s, %s "
			 "FROM %s win_start >= ?1 AND win_start < ?2 GROUP BY b, %s "
			 "ON CONFLICT DO UPDATE SET %s",
			 st_tables[t], st_keys[t], st_vals[t], st_keys[t], st_sums[t], src,
			 st_keys[t], st_upd[t]);
		rc = sqlite3_prepare_v2(db->h, sql, -1, &st, NULL);
		if (rc != SQLITE_OK)
			return st_sql_err(db, rc, "failed to roll up");
		sqlite3_bind_int64(st, 1, lo);
		sqlite3_bind_int64(st, 2, hi);
		sqlite3_bind_int64(st, 3, step);
		if (s - 1 != ST_SERIES_1S)
			sqlite3_bind_int64(st, 4, from);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE)
			return st_sql_err(db, rc, "failed to roll up");
	}
	return RM_OK;
}

/* Deletes the rows of series s starting before cutoff. */
static int st_purge(st_db *db, int s, int64_t cutoff)
{
	sqlite3_stmt *st;
	char sql[256];
	size_t t;
	int rc;

	for (t = 0; t < sizeof(st_tables) / sizeof(st_tables[0]); t++) {
		if (s == ST_SERIES_1S)
			snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE win_start < ?1", st_tables[t]);
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

/* One pass over every series; in the caller's transaction. */
static int st_rollup_pass(st_db *db, const struct st_retention *r, int64_t horizon, int *more)
{
	struct st_series_map m;
	int64_t target, lo, hi, cutoff, first;
	int s, found, rv;

	if ((rv = st_series_load(db, &m)) != 0)
		return rv;
	for (s = ST_SERIES_1M; s < ST_SERIES_COUNT; s++) {
		int64_t step = st_steps[s];

		target = st_floor(s == ST_SERIES_1M ? horizon : m.rolled[s - 1], step);
		lo = m.rolled[s];
		if (lo == INT64_MIN) {
			/* first rollup: start at the finer series' first row */
			if ((rv = st_series_min(db, s - 1, &first, &found)) != 0)
				return rv;
			lo = found ? st_floor(first, step) : target;
			if (lo > target)
				lo = target;
			m.kept[s] = lo;
		}
		hi = target;
		if (hi - lo > ST_ROLLUP_MAX_SPAN_NS) {
			hi = lo + ST_ROLLUP_MAX_SPAN_NS;
			*more = 1;
		}
		if (hi > lo && (rv = st_roll_range(db, s, lo, hi)) != 0)
			return rv;
		if (st_max(lo, hi) == m.rolled[s])
			continue; /* nothing new: no write */
		m.rolled[s] = st_max(lo, hi);
		if ((rv = st_series_store(db, s, m.rolled[s], m.kept[s])) != 0)
			return rv;
	}
	for (s = ST_SERIES_1S; s < ST_SERIES_COUNT; s++) {
		int64_t align = st_steps[s + 1 < ST_SERIES_COUNT ? s + 1 : s];

		if (r->keep_ns[s] == 0 || horizon < INT64_MIN + r->keep_ns[s])
			continue;
		cutoff = st_floor(horizon - r->keep_ns[s], align);
		if (s + 1 < ST_SERIES_COUNT)
			cutoff = st_min(cutoff, m.rolled[s + 1]); /* never what is not rolled up */
		if (cutoff <= m.kept[s])
			continue;
		if ((rv = st_purge(db, s, cutoff)) != 0)
			return rv;
		m.kept[s] = cutoff;
		if ((rv = st_series_store(db, s, s == ST_SERIES_1S ? INT64_MAX : m.rolled[s],
					  cutoff)) != 0)
			return rv;
	}
	memcpy(db->rolled, m.rolled, sizeof(db->rolled));
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
		rm_log_error("failed to roll up '%s': opened read-only", db->path);
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
		st_rollup_cache(db);
		return rv;
	}
	return RM_OK;
}

/* ---- late writes ---- */

int st_rollup_late(st_db *db, enum st_stmt which, const char *server, int64_t start,
		   enum st_resource r, const char *key, uint64_t value, uint64_t cap)
{
	int t = which == ST_S_USAGE ? 0 : which == ST_S_UNACCT ? 1 : which == ST_S_TOTAL ? 2 : 3;
	sqlite3_stmt *st;
	char sql[512];
	int s, rc, i;

	for (s = ST_SERIES_1M; s < ST_SERIES_COUNT; s++) {
		if (start >= db->rolled[s])
			continue;
		snprintf(sql, sizeof(sql),
			 "INSERT INTO r_%s (step, win_start, %s, %s) VALUES (?1, ?2, ?3%s%s, ?5%s) "
			 "ON CONFLICT DO UPDATE SET %s",
			 st_tables[t], st_keys[t], st_vals[t], t < 3 ? ", ?4" : "", t < 2 ? ", ?6" : "",
			 t == 2 ? ", ?7" : "", st_upd[t]);
		rc = sqlite3_prepare_v2(db->h, sql, -1, &st, NULL);
		if (rc != SQLITE_OK)
			return st_sql_err(db, rc, "failed to write to");
		sqlite3_bind_int64(st, 1, st_steps[s]);
		sqlite3_bind_int64(st, 2, st_floor(start, st_steps[s]));
		sqlite3_bind_text(st, 3, server, -1, SQLITE_STATIC);
		if ((i = sqlite3_bind_parameter_index(st, "?4")) > 0)
			sqlite3_bind_int(st, i, (int)r);
		sqlite3_bind_int64(st, 5, (sqlite3_int64)value);
		if ((i = sqlite3_bind_parameter_index(st, "?6")) > 0)
			sqlite3_bind_text(st, i, key, -1, SQLITE_STATIC);
		if ((i = sqlite3_bind_parameter_index(st, "?7")) > 0)
			sqlite3_bind_int64(st, i, (sqlite3_int64)cap);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE)
			return st_sql_err(db, rc, "failed to write to");
	}
	return RM_OK;
}
