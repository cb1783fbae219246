/*
 * st_int.h - internals shared by the storage sources (st.c, st_schema.c,
 * st_query.c) and its tests. Not part of the public API.
 */
#ifndef RM_ST_INT_H
#define RM_ST_INT_H

#include <sqlite3.h>

#include "st.h"
#include "st_rollup.h"

/* Prepared write statements, prepared once at open. */
enum st_stmt {
	ST_S_USAGE,
	ST_S_UNACCT,
	ST_S_TOTAL,
	ST_S_PEER_GET,
	ST_S_PEER_SET,
	ST_S_NODE_SEEN,
	ST_S_NODE_GET,
	ST_S_SPLIT,
	ST_S_HELD_PUT,
	ST_S_HELD_RESOLVE,
	ST_S_HELD_DELETE,
	/* the same writes into their buckets of the rolled-up series (st_rollup_add) */
	ST_S_R_USAGE,
	ST_S_R_UNACCT,
	ST_S_R_TOTAL,
	ST_S_R_SPLIT,
	/* usage and totals into the series summed over servers */
	ST_S_C_USAGE,
	ST_S_C_TOTAL,
	/* late writes into a day already packed (st_pack.c) */
	ST_S_P_USAGE,
	ST_S_P_UNACCT,
	ST_S_P_TOTAL,
	/* the savepoint around a window's write and its buckets' */
	ST_S_SP_BEGIN,
	ST_S_SP_RELEASE,
	ST_S_SP_ROLLBACK,
	ST_S_COUNT
};

struct st_db {
	sqlite3 *h;
	char *path;       /* for messages */
	unsigned flags;   /* ST_OPEN_* */
	int version;      /* schema version of the file */
	sqlite3_stmt *stmt[ST_S_COUNT];
};

/* Where each series holds complete data: series s has the buckets starting
 * in [kept[s], rolled[s]). Every write goes to every series at once, so
 * rolled[s] = INT64_MAX; kept[s] is where retention stopped (INT64_MIN:
 * nothing deleted). */
struct st_series_map {
	int64_t rolled[ST_SERIES_COUNT];
	int64_t kept[ST_SERIES_COUNT];
	int64_t month_kept; /* the month series (row ST_SERIES_COUNT of table series; never
			     * deleted by retention): complete from here on */
};

/* The latest window start of any table (*found = 0: no window): RM_OK or
 * st_sql_err's code. */
int st_last_start(st_db *db, int64_t *out, int *found);

/* Reads the map from the database: RM_OK or st_sql_err's code. */
int st_series_load(st_db *db, struct st_series_map *m);

/* What st_agg_query returns: the rows of st_query_usage, st_query_unacct,
 * st_query_usage_all. */
enum { ST_AGG_USAGE = 0, ST_AGG_UNACCT = 1, ST_AGG_USAGE_ALL = 2 };

/*
 * Runs the scans sql[0] (usage: server, resource, win_start, win_len, ce,
 * value), sql[1] (unacct: ..., reason, value) and sql[2] (total: ...,
 * value, capacity) -- NULL to skip one -- and returns the rows of mode
 * (ST_AGG_*), grouped per range, per window (q->per_window) or per period
 * (step > 0). st_agg.c.
 */
int st_agg_query(st_db *db, const struct st_query *q, int64_t step, int mode,
		 const char *const sql[3], struct st_row **rows, size_t *n);

/* A part of a query's range answered from one series: rows of series
 * `series` whose start is in [lo, hi). */
struct st_seg {
	int series;
	int64_t lo, hi;
};
#define ST_SEG_MAX 64
#define ST_SEG_MONTH ST_SERIES_COUNT /* series of a segment read from the calendar months */

/*
 * The segments that answer [since, until) (st_rollup.c, pure):
 *   finest = 0: from the coarsest series whose buckets fit exactly, using
 *               only series whose step divides step_ns when step_ns > 0;
 *   finest = 1: from the finest series still holding each part.
 * Where no series holds a part exactly (finer rows deleted by retention),
 * the buckets starting in it are used. Returns the number of segments
 * (disjoint, at most ST_SEG_MAX) written to out.
 */
size_t st_cover(const struct st_series_map *m, int64_t since, int64_t until, int64_t step_ns,
		int finest, struct st_seg *out);

/* The step stored with the rows of the calendar month series (r_usage and
 * r_total only; win_start = the month's first ns, UTC). */
#define ST_STEP_MONTH (-1)

/* The start (Unix ns, UTC) of the month `add` (0 or 1) months after the
 * month holding ns; saturates at the int64 limits. Pure. */
int64_t st_month_start(int64_t ns, int add);

/* Adds a write (window start `start`) to its bucket in every rolled-up
 * series (usage and totals also to their calendar month and to every
 * series summed over servers). which: ST_S_USAGE, ST_S_UNACCT (key = CE or reason), ST_S_TOTAL
 * (value, cap), ST_S_SPLIT (value = parts; r unused). Call in the
 * savepoint of the window's write. RM_OK or st_sql_err's code. */
int st_rollup_add(st_db *db, enum st_stmt which, const char *server, int64_t start,
		  enum st_resource r, const char *key, uint64_t value, uint64_t cap);

/* ---- the packed day series (st_pack.c) ---- */

/* Registers the SQL functions st_pack(name, value) (aggregate: the packed
 * blob of the sums per name, NULL for no rows) and st_pack_add(blob, name,
 * value) (the blob with value added to name's entry) on h. SQLite's code. */
int st_pack_register(sqlite3 *h);

/* The day rows of [LO, HI) (SQL expressions) packed, one row per (day,
 * server, resource) with any day row: win_start, server, resource, total,
 * capacity (NULL without a total row), ces, reasons. Ordered by day,
 * server, resource. */
#define ST_PACK_DAY "86400000000000"
#define ST_PACK_KEYS(TAB, LO, HI) \
	"SELECT win_start, server, resource FROM " TAB " WHERE step = " ST_PACK_DAY " AND win_start >= " LO \
	" AND win_start < " HI
#define ST_PACK_OF(FN, TAB, A) \
	"(SELECT st_pack(" FN ", value) FROM " TAB " " A " WHERE " A ".step = " ST_PACK_DAY " AND " A \
	".win_start = k.win_start AND " A ".server = k.server AND " A ".resource = k.resource)"
#define ST_PACK_SELECT(LO, HI) \
	"SELECT k.win_start, k.server, k.resource, t.value, t.capacity, " \
	ST_PACK_OF("u.ce", "r_usage", "u") ", " ST_PACK_OF("x.reason", "r_unacct", "x") " FROM (" \
	ST_PACK_KEYS("r_usage", LO, HI) " UNION " ST_PACK_KEYS("r_unacct", LO, HI) " UNION " \
	ST_PACK_KEYS("r_total", LO, HI) ") k LEFT JOIN r_total t ON t.step = " ST_PACK_DAY \
	" AND t.win_start = k.win_start AND t.server = k.server AND t.resource = k.resource " \
	"WHERE 1 ORDER BY 1, 2, 3"

/* Days before *until are packed (*found = 0: none yet). RM_OK or st_sql_err's code. */
int st_pack_until(st_db *db, int64_t *until, int *found);

/* Packs the next settled day (ending at or before horizon) not yet packed,
 * starting at first_day's day when nothing was packed yet (have_first = 0:
 * no day rows; packing starts at the horizon's day); sets *more = 1 if
 * more remain. In the caller's transaction. RM_OK or st_sql_err's code. */
int st_pack_pass(st_db *db, int64_t horizon, int64_t first_day, int have_first, int *more);

/* Number of migration steps; step i (0-based) brings a file to version i+1. */
extern const int st_schema_nsteps;

/*
 * Brings the database on h to schema version target (1..st_schema_nsteps)
 * in one IMMEDIATE transaction, or, when readonly, only checks it is there.
 * Sets *version to the version found before migrating. Returns RM_OK,
 * RM_EVERSION (newer than target, older and readonly, or a foreign database),
 * RM_ESQL. Logs "failed to open '<path>': ...".
 */
int st_schema_migrate(sqlite3 *h, const char *path, int target, int readonly, int *version);

/* Logs "<what> '<path>': <sqlite message>" and maps the SQLite result code
 * rc to an rm_err (constraint failures from overflow -> RM_EINVAL). */
int st_sql_err(const st_db *db, int rc, const char *what);

/* Argument checks (log the problem and return RM_EINVAL, or RM_OK). */
int st_check_name(const char *what, const char *name, size_t max);
int st_check_query(const st_db *db, const struct st_query *q, void *rows, size_t *n);
/* Binds q's fields to whichever of :since, :until, :server, :res, :ce statement s names (st_query.c). */
void st_query_bind(sqlite3_stmt *s, const struct st_query *q);

/* Column text, "" for NULL. */
static inline const char *st_col_text(sqlite3_stmt *s, int col)
{
	const unsigned char *t = sqlite3_column_text(s, col);

	return t ? (const char *)t : "";
}

#endif
