/*
 * st_schema.c - the database schema and its ordered migrations. Owns the
 * st_schema_steps array (step i brings a file from version i to i+1) and
 * the logic that decides, on open, whether a file is migrated, accepted or
 * refused. The version lives in the one-row table schema_version.
 *
 * Adding a schema change = appending a step here and bumping
 * ST_SCHEMA_VERSION in st.h; never edit a step that has shipped.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "rm_err.h"
#include "st_int.h"
#include "st_throttle.h"
#include "banned.h"

/* Where series s was rolled up to in a v6 file (the smallest start its
 * v6 rollup had not summed yet); no row: never rolled up. */
#define ST_V7_FROM(s) "COALESCE((SELECT rolled_until FROM series WHERE series = " #s "), " \
		      "-9223372036854775807 - 1)"

static const char *const st_schema_steps[] = {
	/* v1: the accounting tables and the delivery state. Values are
	 * integers (ns, bytes) and must stay so: the CHECKs turn an int64
	 * overflow in an additive upsert (which SQLite would silently make a
	 * REAL) into a constraint failure. */
	"CREATE TABLE schema_version (version INTEGER NOT NULL);"
	"INSERT INTO schema_version (version) VALUES (0);"
	"CREATE TABLE usage ("
	"  server TEXT NOT NULL, resource INTEGER NOT NULL,"
	"  win_start INTEGER NOT NULL, win_len INTEGER NOT NULL,"
	"  ce TEXT NOT NULL,"
	"  value INTEGER NOT NULL CHECK (typeof(value) = 'integer' AND value >= 0),"
	"  PRIMARY KEY (server, resource, win_start, win_len, ce)) WITHOUT ROWID;"
	"CREATE TABLE unacct ("
	"  server TEXT NOT NULL, resource INTEGER NOT NULL,"
	"  win_start INTEGER NOT NULL, win_len INTEGER NOT NULL,"
	"  reason TEXT NOT NULL,"
	"  value INTEGER NOT NULL CHECK (typeof(value) = 'integer' AND value >= 0),"
	"  PRIMARY KEY (server, resource, win_start, win_len, reason)) WITHOUT ROWID;"
	"CREATE TABLE total ("
	"  server TEXT NOT NULL, resource INTEGER NOT NULL,"
	"  win_start INTEGER NOT NULL, win_len INTEGER NOT NULL,"
	"  value INTEGER NOT NULL CHECK (typeof(value) = 'integer' AND value >= 0),"
	"  capacity INTEGER NOT NULL CHECK (typeof(capacity) = 'integer' AND capacity >= 0),"
	"  PRIMARY KEY (server, resource, win_start, win_len)) WITHOUT ROWID;"
	"CREATE TABLE peer ("
	"  node TEXT NOT NULL, instance INTEGER NOT NULL, last_seq INTEGER NOT NULL,"
	"  PRIMARY KEY (node, instance)) WITHOUT ROWID;",

	/* v2: lookups by CE and by time, and node metadata. (The primary keys
	 * already serve lookups by server and server+resource+time.) */
	"CREATE INDEX usage_by_ce ON usage (ce, win_start);"
	"CREATE INDEX usage_by_time ON usage (win_start);"
	"CREATE INDEX unacct_by_time ON unacct (win_start);"
	"CREATE INDEX total_by_time ON total (win_start);"
	"CREATE TABLE node ("
	"  node TEXT PRIMARY KEY NOT NULL, backend TEXT NOT NULL, hostname TEXT NOT NULL,"
	"  window_ns INTEGER NOT NULL, clock_offset_ns INTEGER NOT NULL,"
	"  ncpu INTEGER NOT NULL, first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL"
	") WITHOUT ROWID;",

	/* v3: pairing of sends with receives by TCP byte range. held: the
	 * parts the aggregator keeps between batches (opaque part bytes, the
	 * distribution once resolved); split: per server and window, how many
	 * parts had their cost divided over several CEs by bytes. */
	"CREATE TABLE held ("
	"  id INTEGER PRIMARY KEY CHECK (id > 0),"
	"  node TEXT NOT NULL, instance INTEGER NOT NULL,"
	"  window_ns INTEGER NOT NULL CHECK (window_ns > 0),"
	"  arrival INTEGER NOT NULL, part BLOB NOT NULL, dist TEXT);"
	"CREATE TABLE split ("
	"  server TEXT NOT NULL, win_start INTEGER NOT NULL, win_len INTEGER NOT NULL,"
	"  parts INTEGER NOT NULL CHECK (typeof(parts) = 'integer' AND parts >= 0),"
	"  PRIMARY KEY (server, win_start, win_len)) WITHOUT ROWID;"
	"CREATE INDEX split_by_time ON split (win_start);",

	/* v4: estimators (st_est.h). est_input: per server, window and CE the
	 * aggregate inputs the estimators use (completed requests, the sum of
	 * their response times, inbound bytes). est_window: the windows an
	 * estimator has dealt with (solved = 0: it could not estimate that
	 * one); estimate: its per-CE CPU estimates, kept apart from the
	 * measured usage. */
	"CREATE TABLE est_input ("
	"  server TEXT NOT NULL, win_start INTEGER NOT NULL, win_len INTEGER NOT NULL,"
	"  ce TEXT NOT NULL,"
	"  requests INTEGER NOT NULL CHECK (typeof(requests) = 'integer' AND requests >= 0),"
	"  rt_ns INTEGER NOT NULL CHECK (typeof(rt_ns) = 'integer' AND rt_ns >= 0),"
	"  rx INTEGER NOT NULL CHECK (typeof(rx) = 'integer' AND rx >= 0),"
	"  PRIMARY KEY (server, win_start, win_len, ce)) WITHOUT ROWID;"
	"CREATE TABLE est_window ("
	"  server TEXT NOT NULL, method TEXT NOT NULL,"
	"  win_start INTEGER NOT NULL, win_len INTEGER NOT NULL,"
	"  solved INTEGER NOT NULL CHECK (solved IN (0, 1)),"
	"  PRIMARY KEY (server, method, win_start, win_len)) WITHOUT ROWID;"
	"CREATE TABLE estimate ("
	"  server TEXT NOT NULL, method TEXT NOT NULL,"
	"  win_start INTEGER NOT NULL, win_len INTEGER NOT NULL, ce TEXT NOT NULL,"
	"  value INTEGER NOT NULL CHECK (typeof(value) = 'integer' AND value >= 0),"
	"  PRIMARY KEY (server, method, win_start, win_len, ce)) WITHOUT ROWID;"
	"CREATE INDEX est_window_by_time ON est_window (method, win_start);",

	/* v5: throttle commands and their decisions (st_throttle.c). */
	st_throttle_schema,

	/* v6: the 1 min / 1 h / 1 day series (st_rollup.c). Rows keyed by
	 * (step, bucket start, ...) so that a range of one series is one
	 * stretch of the key; series: what each series has rolled up
	 * (buckets before rolled_until) and deleted (rows before kept_from);
	 * horizon: the settled horizon. A v5 file starts with no rolled-up
	 * rows; the aggregator rolls its windows up as it runs. */
	"CREATE TABLE r_usage ("
	"  step INTEGER NOT NULL, win_start INTEGER NOT NULL,"
	"  server TEXT NOT NULL, resource INTEGER NOT NULL, ce TEXT NOT NULL,"
	"  value INTEGER NOT NULL CHECK (typeof(value) = 'integer' AND value >= 0),"
	"  PRIMARY KEY (step, win_start, server, resource, ce)) WITHOUT ROWID;"
	"CREATE TABLE r_unacct ("
	"  step INTEGER NOT NULL, win_start INTEGER NOT NULL,"
	"  server TEXT NOT NULL, resource INTEGER NOT NULL, reason TEXT NOT NULL,"
	"  value INTEGER NOT NULL CHECK (typeof(value) = 'integer' AND value >= 0),"
	"  PRIMARY KEY (step, win_start, server, resource, reason)) WITHOUT ROWID;"
	"CREATE TABLE r_total ("
	"  step INTEGER NOT NULL, win_start INTEGER NOT NULL,"
	"  server TEXT NOT NULL, resource INTEGER NOT NULL,"
	"  value INTEGER NOT NULL CHECK (typeof(value) = 'integer' AND value >= 0),"
	"  capacity INTEGER NOT NULL CHECK (typeof(capacity) = 'integer' AND capacity >= 0),"
	"  PRIMARY KEY (step, win_start, server, resource)) WITHOUT ROWID;"
	"CREATE TABLE r_split ("
	"  step INTEGER NOT NULL, win_start INTEGER NOT NULL, server TEXT NOT NULL,"
	"  parts INTEGER NOT NULL CHECK (typeof(parts) = 'integer' AND parts >= 0),"
	"  PRIMARY KEY (step, win_start, server)) WITHOUT ROWID;"
	"CREATE TABLE series ("
	"  series INTEGER PRIMARY KEY, rolled_until INTEGER NOT NULL, kept_from INTEGER NOT NULL);"
	"CREATE TABLE horizon (id INTEGER PRIMARY KEY CHECK (id = 1), settled INTEGER NOT NULL);",

	/* v7: the rolled-up series are kept up to date as windows are
	 * written (each write also adds to its 1 min, 1 h and 1 day buckets),
	 * so they are complete up to the latest window. A v6 file has its
	 * series complete only before each rolled_until: the windows (and
	 * finer buckets) from there on are added now, finest first, and
	 * rolled_until loses its meaning (kept at the maximum). */
	"INSERT INTO r_usage (step, win_start, server, resource, ce, value) SELECT 60000000000, win_start - (((win_start % 60000000000) + 60000000000) % 60000000000) AS b, server, resource, ce, SUM(value) "
	"FROM usage WHERE win_start >= " ST_V7_FROM(1) " GROUP BY b, server, resource, ce "
	"ON CONFLICT DO UPDATE SET value = value + excluded.value;"
	"INSERT INTO r_unacct (step, win_start, server, resource, reason, value) SELECT 60000000000, win_start - (((win_start % 60000000000) + 60000000000) % 60000000000) AS b, server, resource, reason, SUM(value) "
	"FROM unacct WHERE win_start >= " ST_V7_FROM(1) " GROUP BY b, server, resource, reason "
	"ON CONFLICT DO UPDATE SET value = value + excluded.value;"
	"INSERT INTO r_total (step, win_start, server, resource, value, capacity) SELECT 60000000000, win_start - (((win_start % 60000000000) + 60000000000) % 60000000000) AS b, server, resource, SUM(value), SUM(capacity) "
	"FROM total WHERE win_start >= " ST_V7_FROM(1) " GROUP BY b, server, resource "
	"ON CONFLICT DO UPDATE SET value = value + excluded.value, capacity = capacity + excluded.capacity;"
	"INSERT INTO r_split (step, win_start, server, parts) SELECT 60000000000, win_start - (((win_start % 60000000000) + 60000000000) % 60000000000) AS b, server, SUM(parts) "
	"FROM split WHERE win_start >= " ST_V7_FROM(1) " GROUP BY b, server "
	"ON CONFLICT DO UPDATE SET parts = parts + excluded.parts;"
	"INSERT INTO r_usage (step, win_start, server, resource, ce, value) SELECT 3600000000000, win_start - (((win_start % 3600000000000) + 3600000000000) % 3600000000000) AS b, server, resource, ce, SUM(value) "
	"FROM r_usage WHERE step = 60000000000 AND win_start >= " ST_V7_FROM(2) " GROUP BY b, server, resource, ce "
	"ON CONFLICT DO UPDATE SET value = value + excluded.value;"
	"INSERT INTO r_unacct (step, win_start, server, resource, reason, value) SELECT 3600000000000, win_start - (((win_start % 3600000000000) + 3600000000000) % 3600000000000) AS b, server, resource, reason, SUM(value) "
	"FROM r_unacct WHERE step = 60000000000 AND win_start >= " ST_V7_FROM(2) " GROUP BY b, server, resource, reason "
	"ON CONFLICT DO UPDATE SET value = value + excluded.value;"
	"INSERT INTO r_total (step, win_start, server, resource, value, capacity) SELECT 3600000000000, win_start - (((win_start % 3600000000000) + 3600000000000) % 3600000000000) AS b, server, resource, SUM(value), SUM(capacity) "
	"FROM r_total WHERE step = 60000000000 AND win_start >= " ST_V7_FROM(2) " GROUP BY b, server, resource "
	"ON CONFLICT DO UPDATE SET value = value + excluded.value, capacity = capacity + excluded.capacity;"
	"INSERT INTO r_split (step, win_start, server, parts) SELECT 3600000000000, win_start - (((win_start % 3600000000000) + 3600000000000) % 3600000000000) AS b, server, SUM(parts) "
	"FROM r_split WHERE step = 60000000000 AND win_start >= " ST_V7_FROM(2) " GROUP BY b, server "
	"ON CONFLICT DO UPDATE SET parts = parts + excluded.parts;"
	"INSERT INTO r_usage (step, win_start, server, resource, ce, value) SELECT 86400000000000, win_start - (((win_start % 86400000000000) + 86400000000000) % 86400000000000) AS b, server, resource, ce, SUM(value) "
	"FROM r_usage WHERE step = 3600000000000 AND win_start >= " ST_V7_FROM(3) " GROUP BY b, server, resource, ce "
	"ON CONFLICT DO UPDATE SET value = value + excluded.value;"
	"INSERT INTO r_unacct (step, win_start, server, resource, reason, value) SELECT 86400000000000, win_start - (((win_start % 86400000000000) + 86400000000000) % 86400000000000) AS b, server, resource, reason, SUM(value) "
	"FROM r_unacct WHERE step = 3600000000000 AND win_start >= " ST_V7_FROM(3) " GROUP BY b, server, resource, reason "
	"ON CONFLICT DO UPDATE SET value = value + excluded.value;"
	"INSERT INTO r_total (step, win_start, server, resource, value, capacity) SELECT 86400000000000, win_start - (((win_start % 86400000000000) + 86400000000000) % 86400000000000) AS b, server, resource, SUM(value), SUM(capacity) "
	"FROM r_total WHERE step = 3600000000000 AND win_start >= " ST_V7_FROM(3) " GROUP BY b, server, resource "
	"ON CONFLICT DO UPDATE SET value = value + excluded.value, capacity = capacity + excluded.capacity;"
	"INSERT INTO r_split (step, win_start, server, parts) SELECT 86400000000000, win_start - (((win_start % 86400000000000) + 86400000000000) % 86400000000000) AS b, server, SUM(parts) "
	"FROM r_split WHERE step = 3600000000000 AND win_start >= " ST_V7_FROM(3) " GROUP BY b, server "
	"ON CONFLICT DO UPDATE SET parts = parts + excluded.parts;"
	"UPDATE series SET rolled_until = 9223372036854775807;"
	/* the 1 day series summed over servers, per resource and CE (and the
	 * servers' totals per resource), for queries that do not group by
	 * server: 500 rows a day where r_usage has 25 500 at 50 servers */
	"CREATE TABLE r_ce_usage ("
	"  step INTEGER NOT NULL, win_start INTEGER NOT NULL,"
	"  resource INTEGER NOT NULL, ce TEXT NOT NULL,"
	"  value INTEGER NOT NULL CHECK (typeof(value) = 'integer' AND value >= 0),"
	"  PRIMARY KEY (step, win_start, resource, ce)) WITHOUT ROWID;"
	"CREATE TABLE r_ce_total ("
	"  step INTEGER NOT NULL, win_start INTEGER NOT NULL, resource INTEGER NOT NULL,"
	"  value INTEGER NOT NULL CHECK (typeof(value) = 'integer' AND value >= 0),"
	"  capacity INTEGER NOT NULL CHECK (typeof(capacity) = 'integer' AND capacity >= 0),"
	"  PRIMARY KEY (step, win_start, resource)) WITHOUT ROWID;"
	"INSERT INTO r_ce_usage SELECT step, win_start, resource, ce, SUM(value) FROM r_usage "
	"WHERE step = 86400000000000 GROUP BY 1, 2, 3, 4;"
	"INSERT INTO r_ce_total SELECT step, win_start, resource, SUM(value), SUM(capacity) FROM r_total "
	"WHERE step = 86400000000000 GROUP BY 1, 2, 3;",

	/* v8: the 1 min and 1 h series summed over servers too (same tables,
	 * their steps), so that a query without servers reads the edges of
	 * its range from them; and the calendar month (UTC) of the usage and
	 * totals per server (r_usage / r_total rows with step = -1, keyed by
	 * the month's first ns), for bills with one charge period per month.
	 * A v7 file gets them from its 1 min, 1 h and 1 day rows. */
	"INSERT INTO r_ce_usage SELECT step, win_start, resource, ce, SUM(value) FROM r_usage "
	"WHERE step IN (60000000000, 3600000000000) GROUP BY 1, 2, 3, 4;"
	"INSERT INTO r_ce_total SELECT step, win_start, resource, SUM(value), SUM(capacity) FROM r_total "
	"WHERE step IN (60000000000, 3600000000000) GROUP BY 1, 2, 3;"
	"INSERT INTO r_usage (step, win_start, server, resource, ce, value) SELECT -1, m, server, resource, "
	"ce, SUM(value) FROM (SELECT CAST(strftime('%s', win_start / 1000000000, 'unixepoch', "
	"'start of month') AS INTEGER) * 1000000000 AS m, server, resource, ce, value FROM r_usage "
	"WHERE step = 86400000000000) GROUP BY m, server, resource, ce;"
	"INSERT INTO r_total (step, win_start, server, resource, value, capacity) SELECT -1, m, server, "
	"resource, SUM(value), SUM(capacity) FROM (SELECT CAST(strftime('%s', win_start / 1000000000, "
	"'unixepoch', 'start of month') AS INTEGER) * 1000000000 AS m, server, resource, value, capacity "
	"FROM r_total WHERE step = 86400000000000) GROUP BY m, server, resource;",

	/* v9: the packed day series (st_pack.c): per (day, server, resource)
	 * one row with U, the capacity and every CE's U_c and reason's V_k in
	 * blobs, for whole-day queries that keep servers and CEs apart (1 row
	 * where the day series has one per CE). Days before pack_state's
	 * packed_until are packed; a v8 file gets every settled day (before
	 * the horizon's day) packed from its day rows now. total and
	 * capacity are NULL where the day has no total row. A rowid table: a
	 * blob of 100 CEs (about 2 KB) stays on its leaf page. */
	"CREATE TABLE r_pack ("
	"  win_start INTEGER NOT NULL, server TEXT NOT NULL, resource INTEGER NOT NULL,"
	"  total INTEGER CHECK (total IS NULL OR (typeof(total) = 'integer' AND total >= 0)),"
	"  capacity INTEGER CHECK (capacity IS NULL OR (typeof(capacity) = 'integer' AND capacity >= 0)),"
	"  ces BLOB, reasons BLOB);"
	"CREATE UNIQUE INDEX r_pack_key ON r_pack (win_start, server, resource);"
	"CREATE TABLE pack_state (id INTEGER PRIMARY KEY CHECK (id = 1), packed_until INTEGER NOT NULL);"
	"INSERT INTO pack_state SELECT 1, settled - (((settled % " ST_PACK_DAY ") + " ST_PACK_DAY ") % "
	ST_PACK_DAY ") FROM horizon WHERE id = 1;"
	"INSERT INTO r_pack (win_start, server, resource, total, capacity, ces, reasons) "
	ST_PACK_SELECT("-9223372036854775808", "(SELECT packed_until FROM pack_state WHERE id = 1)") ";",
};

const int st_schema_nsteps = (int)(sizeof(st_schema_steps) / sizeof(st_schema_steps[0]));

_Static_assert(sizeof(st_schema_steps) / sizeof(st_schema_steps[0]) == ST_SCHEMA_VERSION,
	       "ST_SCHEMA_VERSION must equal the number of migration steps");

/* Runs one statement that yields a single integer; *out = 0 if no row. */
static int st_int_query(sqlite3 *h, const char *sql, long long *out)
{
	sqlite3_stmt *s;
	int rc;

	*out = 0;
	rc = sqlite3_prepare_v2(h, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(s, 0);
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return rc;
}

/* Reads the file's version: 0 for an empty database; -1 for a database
 * holding tables but no schema_version (not ours). */
static int st_read_version(sqlite3 *h, long long *version)
{
	long long n;
	int rc;

	rc = st_int_query(h, "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
			     "AND name = 'schema_version'", &n);
	if (rc != SQLITE_OK)
		return rc;
	if (n == 0) {
		rc = st_int_query(h, "SELECT count(*) FROM sqlite_master", &n);
		*version = n ? -1 : 0;
		return rc;
	}
	return st_int_query(h, "SELECT max(version) FROM schema_version", version);
}

static int st_schema_fail(sqlite3 *h, const char *path, int in_tx)
{
	rm_log_error("failed to open '%s': %s", path, sqlite3_errmsg(h));
	if (in_tx)
		sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
	return RM_ESQL;
}

int st_schema_migrate(sqlite3 *h, const char *path, int target, int readonly, int *version)
{
	long long v;
	char sql[96];
	int rc, i;

	assert(h && path && version);
	assert(target >= 1 && target <= st_schema_nsteps);
	*version = 0;

	if (!readonly) {
		/* IMMEDIATE: two processes opening a fresh file at once must not
		 * both migrate it; the second waits, then sees it done. */
		rc = sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL);
		if (rc != SQLITE_OK)
			return st_schema_fail(h, path, 0);
	}
	rc = st_read_version(h, &v);
	if (rc != SQLITE_OK)
		return st_schema_fail(h, path, !readonly);

	if (v < 0 || v > target || (readonly && v != target)) {
		if (v < 0)
			rm_log_error("failed to open '%s': not a rametr database "
				     "(it has tables but no schema_version)", path);
		else if (v > target)
			rm_log_error("failed to open '%s': schema version %lld is newer than "
				     "this program supports (%d); upgrade rametr", path, v, target);
		else if (v == 0)
			rm_log_error("failed to open '%s': not a rametr database (empty)", path);
		else
			rm_log_error("failed to open '%s': schema version %lld is older than %d; "
				     "open it read-write once (e.g. start the aggregator) to migrate it",
				     path, v, target);
		if (!readonly)
			sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
		return RM_EVERSION;
	}
	*version = (int)v;
	if (readonly)
		return RM_OK;

	for (i = (int)v; i < target; i++) {
		rc = sqlite3_exec(h, st_schema_steps[i], NULL, NULL, NULL);
		if (rc != SQLITE_OK) {
			rm_log_error("failed to open '%s': migration to schema version %d failed: %s",
				     path, i + 1, sqlite3_errmsg(h));
			sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
			return RM_ESQL;
		}
	}
	if (v < target) {
		snprintf(sql, sizeof(sql), "UPDATE schema_version SET version = %d", target);
		rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
		if (rc != SQLITE_OK)
			return st_schema_fail(h, path, 1);
	}
	rc = sqlite3_exec(h, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return st_schema_fail(h, path, 1);
	return RM_OK;
}
