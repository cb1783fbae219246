/*
 * st.h - Rametr's storage: per-window resource accounting in SQLite.
 *
 * What is stored, per server s, resource r and window t = [win_start,
 * win_start + win_len) in Unix nanoseconds:
 *   U_c  usage charged to chargeable entity (CE) c      (st_add_usage)
 *   V_k  unaccountable usage with an explicit reason k  (st_add_unacct)
 *   U    the server's total usage and its capacity      (st_add_total)
 * plus the collectors' delivery state (st_peer_*), node metadata
 * (st_node_*), the parts the aggregator holds while it pairs sends with
 * receives (st_held_*) and the count of parts whose cost was split over
 * several CEs by bytes (st_add_split, st_query_splits). The unaccountable share V is not stored: queries compute it as
 * V = U - sum_c U_c, so sum_c U_c + V = U holds exactly by construction, and
 * st_query_identity() checks that the explicit reasons explain all of V.
 *
 * Values are integers (ns for cpu, bytes otherwise) in [0, INT64_MAX]. Every
 * write is an additive upsert (value = value + delta): the aggregator
 * receives deltas, possibly late or in several pieces, and may apply them in
 * any order. A sum that would exceed INT64_MAX is refused (RM_EINVAL), never
 * silently turned into a float.
 *
 * Names (server, CE, node) are 1..ST_NAME_MAX bytes; reasons are
 * 1..ST_REASON_MAX bytes. The CE ST_CE_UNACCOUNTABLE and the reason
 * ST_REASON_UNEXPLAINED are reserved for query results.
 *
 * Thread safety: an st_db handle is not thread-safe; use one handle per
 * thread (several handles, also in several processes, may share one file:
 * WAL mode, writers wait up to ST_BUSY_TIMEOUT_MS for each other).
 *
 * Errors: functions return RM_OK or an enum rm_err value and log the cause
 * with rm_log_error() (argument errors included, except a NULL handle, so a
 * caller can just pass the code up); documented exceptions are st_resource_parse() and RM_ENOENT
 * from st_node_get(), which log nothing. Writes through a handle opened with
 * ST_OPEN_READONLY return RM_EPERM.
 */
#ifndef RM_ST_H
#define RM_ST_H

#include <stddef.h>
#include <stdint.h>

enum st_resource {
	ST_R_CPU = 0,
	ST_R_NET_RX,
	ST_R_NET_TX,
	ST_R_DISK_READ,
	ST_R_DISK_WRITE,
	ST_R_COUNT
};
/* The numeric values above are stored in database files: never renumber. */

/* "cpu", "net_rx", "net_tx", "disk_read", "disk_write"; "?" for a value out of
 * range. Static string, never NULL. Thread-safe. */
const char *st_resource_name(enum st_resource r);

/* Parses a resource name as returned by st_resource_name() (exact,
 * case-sensitive). Returns RM_OK and sets *out, or RM_EINVAL (nothing
 * logged: the caller knows the context) for NULL or an unknown name. */
int st_resource_parse(const char *name, enum st_resource *out);

/* Unit of a resource's values: "ns" for cpu, "bytes" otherwise. */
const char *st_resource_unit(enum st_resource r);

#define ST_CE_UNACCOUNTABLE "__unaccountable__"
#define ST_REASON_UNEXPLAINED "unexplained"
#define ST_NAME_MAX 63    /* server, CE and node names */
#define ST_REASON_MAX 31  /* reasons of unaccountable usage */
#define ST_BUSY_TIMEOUT_MS 5000
#define ST_SCHEMA_VERSION 9 /* schema version this code creates and reads */

#define ST_OPEN_READONLY 0x1

typedef struct st_db st_db;

/*
 * Opens (flags = 0: creating it if missing) the database at path and sets
 * WAL mode, synchronous=NORMAL and a busy timeout of ST_BUSY_TIMEOUT_MS.
 * A file with an older schema is migrated to ST_SCHEMA_VERSION in one
 * transaction (all steps or none). With ST_OPEN_READONLY the file must
 * exist and already be at ST_SCHEMA_VERSION; nothing is created or migrated.
 * Returns RM_OK and a handle in *out (free with st_close), or, with *out =
 * NULL and a "failed to open '<path>': ..." error logged:
 *   RM_EINVAL   NULL out/path, empty path, unknown flags
 *   RM_EIO      the file is missing (read-only) or cannot be opened/created
 *   RM_EVERSION the schema is newer than this code, or older and read-only,
 *               or the file is an SQLite database that is not Rametr's
 *   RM_ESQL     any other SQLite failure (e.g. the file is not a database)
 *   RM_ENOMEM   out of memory
 */
int st_open(st_db **out, const char *path, unsigned flags);

/* Closes the handle, rolling back an open transaction. NULL-tolerant. */
void st_close(st_db *db);

/* Schema version of the open database (always ST_SCHEMA_VERSION once open). */
int st_schema_version(st_db *db);

/*
 * Explicit transactions. st_begin() starts a write transaction (BEGIN
 * IMMEDIATE, waiting for other writers up to the busy timeout): RM_OK,
 * RM_ESTATE if one is already open, RM_ESQL. st_commit(): RM_OK, RM_ESTATE
 * if none is open, RM_ESQL (the transaction is then rolled back).
 * st_rollback() undoes the open transaction; no-op if none or db is NULL.
 * Without st_begin() every write is its own transaction.
 */
int st_begin(st_db *db);
int st_commit(st_db *db);
void st_rollback(st_db *db);

/*
 * Exactly-once delivery: the highest batch seq applied per (node, collector
 * instance). st_peer_get() sets *last_seq to the stored value, or 0 if the
 * pair is unknown (returns RM_OK in both cases). st_peer_set() stores seq as
 * given (the caller keeps it monotonic; call it in the transaction that
 * applies the batch). Full uint64 range for instance and seq.
 * RM_EINVAL for NULL/empty/too long node or NULL last_seq; RM_ESQL.
 */
int st_peer_get(st_db *db, const char *node, uint64_t instance, uint64_t *last_seq);
int st_peer_set(st_db *db, const char *node, uint64_t instance, uint64_t seq);

/* Node metadata as announced by a collector (Hello / Batch). */
struct st_node {
	const char *node;     /* 1..ST_NAME_MAX bytes */
	const char *backend;  /* NULL or up to ST_NAME_MAX bytes */
	const char *hostname; /* NULL or up to 255 bytes */
	uint64_t window_ns;
	int64_t clock_offset_ns;
	uint32_t ncpu;
	int64_t seen_unix_ns; /* when the node was heard from */
};

/* The stored record of a node. */
struct st_node_rec {
	char node[ST_NAME_MAX + 1];
	char backend[ST_NAME_MAX + 1];
	char hostname[256];
	uint64_t window_ns;
	int64_t clock_offset_ns;
	uint32_t ncpu;
	int64_t first_seen_unix_ns; /* smallest seen_unix_ns ever reported */
	int64_t last_seen_unix_ns;  /* largest seen_unix_ns ever reported */
};

/* Upserts node metadata: backend, hostname, window, offset and ncpu are
 * replaced by the latest call; first/last seen keep the min/max.
 * RM_EINVAL for NULL n, bad names, window_ns > INT64_MAX; RM_ESQL. */
int st_node_seen(st_db *db, const struct st_node *n);

/* Copies the record of node into *out: RM_OK, RM_ENOENT if unknown (not
 * logged), RM_EINVAL, RM_ESQL. */
int st_node_get(st_db *db, const char *node, struct st_node_rec *out);

/*
 * Additive writes for window [win_start_ns, win_start_ns + win_len_ns):
 * win_len_ns > 0 and the end must not overflow int64; windows are keyed by
 * (start, length), so rows of different lengths never mix. value (and
 * capacity) must be <= INT64_MAX; a zero value still records the window.
 *   st_add_usage   U_c: usage of CE ce (not ST_CE_UNACCOUNTABLE)
 *   st_add_unacct  V_k: unaccountable usage with reason (not
 *                  ST_REASON_UNEXPLAINED), e.g. "unsegmented", "lost"
 *   st_add_total   U: the server's total, plus capacity (e.g. ncpu * covered
 *                  window ns for cpu, 0 if unknown); capacity is additive too
 * Returns RM_OK, RM_EINVAL (bad argument, or the stored sum would exceed
 * INT64_MAX: nothing is changed), RM_ESQL.
 */
int st_add_usage(st_db *db, const char *server, int64_t win_start_ns, int64_t win_len_ns,
		 enum st_resource r, const char *ce, uint64_t value);
int st_add_unacct(st_db *db, const char *server, int64_t win_start_ns, int64_t win_len_ns,
		  enum st_resource r, const char *reason, uint64_t value);
int st_add_total(st_db *db, const char *server, int64_t win_start_ns, int64_t win_len_ns,
		 enum st_resource r, uint64_t value, uint64_t capacity);

/* Query filter. Windows are selected by their start: since_ns <= start <
 * until_ns (INT64_MIN, INT64_MAX select everything; until_ns == since_ns
 * selects nothing). server/ce NULL = all.
 *
 * The range is answered from the coarsest series (st_rollup.h) whose
 * buckets fit it exactly, the edges from finer series, so the sums are
 * those of the stored windows (st_query_usage: whole calendar months from
 * the month series). Where retention deleted the finer rows of a
 * part, the buckets that start in it are used. per_window rows are the
 * windows of the finest series still holding each part (buckets of
 * win_len = their step where the windows were deleted). */
struct st_query {
	int64_t since_ns, until_ns;
	const char *server, *ce;
	int resource;   /* enum st_resource, or -1 = all */
	int per_window; /* nonzero: one row per window instead of per range */
};

struct st_row {
	char server[64];
	char ce[64];      /* st_query_usage: the CE or ST_CE_UNACCOUNTABLE */
	char reason[32];  /* st_query_unacct: the reason or ST_REASON_UNEXPLAINED */
	enum st_resource resource;
	int64_t win_start_ns, win_len_ns; /* 0 unless per_window (or identity) */
	uint64_t value;
	uint64_t total;    /* U of that server+resource over the same range/window */
	uint64_t capacity; /* capacity over the same range/window */
	int64_t residual;  /* see each query */
};

/*
 * One row per (server, ce, resource[, window]) with value = sum of U_c and
 * residual = 0, plus per (server, resource[, window]) a row with ce =
 * ST_CE_UNACCOUNTABLE whose residual = V = U - sum_c U_c exactly (signed:
 * negative means more was charged to CEs than the total, e.g. totals not yet
 * arrived) and value = max(V, 0). The V row is left out when q->ce names a
 * real CE; q->ce = ST_CE_UNACCOUNTABLE returns only V rows. A group appears
 * if it has any U_c or U in the range. Sorted by server, resource[, window
 * start, length], then value descending (ties by CE name), V row last.
 * Returns RM_OK with *rows malloc'd (NULL when *n == 0; free with
 * st_rows_free), RM_EINVAL (NULL arguments, bad names, resource out of
 * range, until < since), RM_ESQL (incl. a sum overflowing int64),
 * RM_ENOMEM. Unknown server/CE gives zero rows.
 */
int st_query_usage(st_db *db, const struct st_query *q, struct st_row **rows, size_t *n);

/*
 * As st_query_usage and st_query_unacct, with one row per period
 * [k*step_ns, (k+1)*step_ns) of Unix time (win_start_ns/win_len_ns = the
 * period; each window goes to the period of its start) instead of per
 * range or window (q->per_window is ignored). step_ns > 0, else RM_EINVAL.
 * Series whose step divides step_ns answer the whole periods.
 */
int st_query_usage_step(st_db *db, const struct st_query *q, int64_t step_ns, struct st_row **rows,
			size_t *n);
int st_query_unacct_step(st_db *db, const struct st_query *q, int64_t step_ns, struct st_row **rows,
			 size_t *n);

/*
 * As st_query_usage (step_ns = 0) or st_query_usage_step, with the rows of
 * every server summed into rows with server "": per (resource, range or
 * period, CE) the sum of U_c, and one __unaccountable__ row for the
 * servers together: residual = sum U - sum U_c, value = max(residual, 0)
 * (total and capacity summed). Without q->server, whole days are read from
 * the day series summed over servers (500 rows a day for 100 CEs and 5
 * resources, whatever the number of servers). q->per_window is ignored.
 * Errors as st_query_usage (step_ns < 0: RM_EINVAL).
 */
int st_query_usage_all(st_db *db, const struct st_query *q, int64_t step_ns, struct st_row **rows,
		       size_t *n);

/*
 * One (server, resource, UTC day) of the packed day series: U, the
 * capacity, and every CE's U_c of that day (n entries, sorted by name,
 * bytewise; values > 0 or stored zeros), charged = their sum. V = total -
 * charged exactly (signed), so sum_c U_c + V = U. The pointers are valid
 * during the callback only.
 */
struct st_day {
	const char *server;
	enum st_resource resource;
	int64_t start_ns; /* the day's first ns; the day is 86400 s long */
	uint64_t total, capacity, charged;
	size_t n;
	const char *const *ce;
	const uint64_t *value;
};

/*
 * The days of [q->since_ns, q->until_ns) (both multiples of 86400 s; q->ce
 * NULL and q->per_window 0, else RM_EINVAL) one group at a time, in the
 * order of st_query_usage_step with step = 1 day: day, server, resource.
 * The same groups and sums as st_query_usage_step's rows (a group appears
 * if it has any U_c or U row that day), read from one packed row per
 * group for the days packed (settled days, st_rollup) and from the day
 * series for the rest. cb's first non-zero return stops the query and is
 * returned. RM_OK, RM_EINVAL, RM_ESQL (incl. a sum beyond int64),
 * RM_ENOMEM. Also on a read-only handle.
 */
int st_query_days(st_db *db, const struct st_query *q, int (*cb)(void *arg, const struct st_day *d),
		  void *arg);

/*
 * Breakdown of V = U - sum_c U_c per (server, resource, reason[, window]):
 * one row per stored reason with a nonzero sum (value = that sum, residual =
 * 0), plus a row with reason ST_REASON_UNEXPLAINED whose residual = V -
 * sum(stored reasons) when that is nonzero (negative means the reasons
 * over-count V) and value = max(residual, 0). ce is empty; q->ce is ignored. Groups where V and every
 * reason are 0 produce no rows. Sorted like st_query_usage, unexplained last.
 * Returns as st_query_usage.
 */
int st_query_unacct(st_db *db, const struct st_query *q, struct st_row **rows, size_t *n);

/*
 * The windows that do not balance: one row per (server, resource, window)
 * in the range where residual = U - sum_c U_c - sum(reasons) != 0, with
 * value = sum_c U_c, total = U, capacity, win_start_ns/win_len_ns set and
 * ce/reason empty. Always per window (q->per_window and q->ce are ignored).
 * Zero rows = every window balances. Returns as st_query_usage.
 */
int st_query_identity(st_db *db, const struct st_query *q, struct st_row **rows, size_t *n);

/* Number of distinct (server, resource, window) with any stored value in the
 * range of q (q->ce and q->per_window ignored): what st_query_identity
 * checks. RM_OK, RM_EINVAL, RM_ESQL. */
int st_count_windows(st_db *db, const struct st_query *q, uint64_t *n);

/*
 * Names of servers or CEs (what: "server" or "ce") ever stored and still
 * kept in some series. st_name_known() sets *known (RM_OK); st_names()
 * returns them sorted in *names (one malloc'd block: free(*names) frees
 * all; NULL when *n = 0). RM_EINVAL (bad what or name), RM_ESQL, RM_ENOMEM.
 * Cheap for st_name_known; st_names reads every kept series' names.
 */
int st_name_known(st_db *db, const char *what, const char *name, int *known);
int st_names(st_db *db, const char *what, char ***names, size_t *n);

/*
 * The span of what is stored, for a query that names no period: *first_ns =
 * the start of the earliest window still kept (where retention deleted the
 * 1 s windows, the earliest bucket of the finest series that still holds
 * its oldest data), *end_ns = the end (start + length) of the latest window
 * (of the finest series holding any row). Reads a few index ends, not
 * rows. RM_OK; RM_ENOENT (not logged) when nothing is stored; RM_EINVAL
 * (NULL argument); RM_ESQL. Also on a read-only handle.
 */
int st_stored_span(st_db *db, int64_t *first_ns, int64_t *end_ns);

/* Frees rows returned by the queries. NULL-tolerant. */
void st_rows_free(struct st_row *rows);

/*
 * Split parts: the number of segment parts of server s in window t whose
 * cost the aggregator divided by bytes over several CEs (or CEs and V
 * reasons), because they received bytes caused by several. Additive like
 * the other writes: st_add_split() adds `parts` (<= INT64_MAX) to the
 * window's count; same window rules as st_add_usage. RM_OK, RM_EINVAL,
 * RM_ESQL, RM_EPERM.
 */
int st_add_split(st_db *db, const char *server, int64_t win_start_ns, int64_t win_len_ns, uint64_t parts);

/*
 * Split counts per server (per window with q->per_window) in the range of
 * q: one row per group with a nonzero count, value = the count, server and
 * (per window) win_start_ns/win_len_ns set; ce, reason, total, capacity and
 * residual are empty/0. q->ce and q->resource are ignored. Sorted by server
 * then window. Returns as st_query_usage.
 */
int st_query_splits(st_db *db, const struct st_query *q, struct st_row **rows, size_t *n);

/*
 * Held parts: what the aggregator's pairing engine must get back after a
 * restart (parts still waiting for the send that produced their bytes, and
 * parts whose sends later receives may still need). Written in the
 * transaction of the batch (or expiry) that changed them, so that they and
 * the charges stay consistent. The part itself is opaque bytes for storage.
 */
#define ST_HELD_PART_MAX 4096 /* bytes of one held part */
#define ST_HELD_DIST_MAX 65536 /* bytes of one distribution text */

struct st_held {
	uint64_t id;          /* 1..INT64_MAX, unique; st_held_load's order */
	const char *node;     /* 1..ST_NAME_MAX bytes */
	uint64_t instance;    /* collector instance (full uint64 range) */
	uint64_t window_ns;   /* 1..INT64_MAX */
	int64_t arrival_ns;   /* on the aggregator's clock */
	const void *part;     /* part_len bytes, 1..ST_HELD_PART_MAX */
	size_t part_len;
	const char *dist;     /* NULL while unresolved; else 1..ST_HELD_DIST_MAX bytes */
};

/* Inserts (or replaces) the held part h->id. RM_OK, RM_EINVAL, RM_ESQL, RM_EPERM. */
int st_held_put(st_db *db, const struct st_held *h);

/*
 * Sets the distribution of held part id (dist as in struct st_held, not
 * NULL). RM_OK; RM_ENOENT (not logged) if there is no such part; RM_EINVAL,
 * RM_ESQL, RM_EPERM.
 */
int st_held_resolve(st_db *db, uint64_t id, const char *dist);

/* Deletes held part id; RM_OK also if there was none. RM_EINVAL, RM_ESQL, RM_EPERM. */
int st_held_delete(st_db *db, uint64_t id);

/*
 * Calls cb for every held part in increasing id order; the pointers in *h
 * are valid during the call only. Stops at cb's first non-zero return and
 * returns it. RM_OK, RM_EINVAL (NULL db or cb), RM_ESQL, RM_ENOMEM. Also on
 * a read-only handle.
 */
int st_held_load(st_db *db, int (*cb)(void *arg, const struct st_held *h), void *arg);

/*
 * What window [win_start_ns, +win_len_ns) of server holds, by resource:
 * total[r] = U, charged[r] = sum of U_c + sum of V (every reason);
 * *has_total = 1 if any U row of the window exists (even of value 0).
 * Reads the open transaction's writes too. RM_OK, RM_EINVAL, RM_ESQL.
 */
int st_window_sums(st_db *db, const char *server, int64_t win_start_ns, int64_t win_len_ns,
		   uint64_t total[ST_R_COUNT], uint64_t charged[ST_R_COUNT], int *has_total);

/* Number of held parts, and of those unresolved. RM_OK, RM_EINVAL, RM_ESQL. */
int st_held_count(st_db *db, uint64_t *held, uint64_t *unresolved);

#endif
