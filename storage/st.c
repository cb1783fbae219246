/*
 * st.c - the storage handle: opening (pragmas, migration via st_schema.c),
 * closing, explicit transactions, the additive writes (usage, reasons of
 * unaccountable usage, totals, split counts), the collectors' delivery state,
 * node metadata, the aggregator's held parts, resource names, and the argument checks and SQLite error mapping
 * shared with st_query.c. Owns the sqlite3 connection and its prepared write
 * statements.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rm_err.h"
#include "st_int.h"
#include "banned.h"

static const char *const st_resource_names[ST_R_COUNT] = {
	[ST_R_CPU] = "cpu",
	[ST_R_NET_RX] = "net_rx",
	[ST_R_NET_TX] = "net_tx",
	[ST_R_DISK_READ] = "disk_read",
	[ST_R_DISK_WRITE] = "disk_write",
};

const char *st_resource_name(enum st_resource r)
{
	if ((int)r < 0 || r >= ST_R_COUNT)
		return "?";
	return st_resource_names[r];
}

int st_resource_parse(const char *name, enum st_resource *out)
{
	int i;

	if (!name || !out)
		return RM_EINVAL;
	for (i = 0; i < ST_R_COUNT; i++) {
		if (strcmp(name, st_resource_names[i]) == 0) {
			*out = (enum st_resource)i;
			return RM_OK;
		}
	}
	return RM_EINVAL;
}

const char *st_resource_unit(enum st_resource r)
{
	return r == ST_R_CPU ? "ns" : "bytes";
}

int st_check_name(const char *what, const char *name, size_t max)
{
	size_t len;

	if (!name) {
		rm_log_error("invalid %s: null", what);
		return RM_EINVAL;
	}
	len = strlen(name);
	if (len == 0 || len > max) {
		rm_log_error("invalid %s '%.*s': must be 1 to %zu bytes", what,
			     len > 80 ? 80 : (int)len, name, max);
		return RM_EINVAL;
	}
	return RM_OK;
}

int st_sql_err(const st_db *db, int rc, const char *what)
{
	const char *path = db ? db->path : "?";
	const char *msg = db && db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc);

	switch (rc & 0xff) {
	case SQLITE_CONSTRAINT:
		rm_log_error("%s '%s': value out of range (sum exceeds the int64 limit): %s",
			     what, path, msg);
		return RM_EINVAL;
	case SQLITE_NOMEM:
		rm_log_error("%s '%s': %s", what, path, msg);
		return RM_ENOMEM;
	case SQLITE_IOERR:
	case SQLITE_FULL:
	case SQLITE_CANTOPEN:
		rm_log_error("%s '%s': %s", what, path, msg);
		return RM_EIO;
	default:
		rm_log_error("%s '%s': %s", what, path, msg);
		return RM_ESQL;
	}
}

static const char *const st_stmt_sql[ST_S_COUNT] = {
	[ST_S_USAGE] =
		"INSERT INTO usage (server, resource, win_start, win_len, ce, value) "
		"VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO UPDATE SET value = value + excluded.value",
	[ST_S_UNACCT] =
		"INSERT INTO unacct (server, resource, win_start, win_len, reason, value) "
		"VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO UPDATE SET value = value + excluded.value",
	[ST_S_TOTAL] =
		"INSERT INTO total (server, resource, win_start, win_len, value, capacity) "
		"VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO UPDATE SET "
		"value = value + excluded.value, capacity = capacity + excluded.capacity",
	[ST_S_PEER_GET] = "SELECT last_seq FROM peer WHERE node = ?1 AND instance = ?2",
	[ST_S_PEER_SET] =
		"INSERT INTO peer (node, instance, last_seq) VALUES (?1, ?2, ?3) "
		"ON CONFLICT DO UPDATE SET last_seq = excluded.last_seq",
	[ST_S_NODE_SEEN] =
		"INSERT INTO node (node, backend, hostname, window_ns, clock_offset_ns, ncpu, "
		"first_seen, last_seen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7) "
		"ON CONFLICT DO UPDATE SET backend = excluded.backend, hostname = excluded.hostname, "
		"window_ns = excluded.window_ns, clock_offset_ns = excluded.clock_offset_ns, "
		"ncpu = excluded.ncpu, first_seen = min(first_seen, excluded.first_seen), "
		"last_seen = max(last_seen, excluded.last_seen)",
	[ST_S_NODE_GET] =
		"SELECT backend, hostname, window_ns, clock_offset_ns, ncpu, first_seen, last_seen "
		"FROM node WHERE node = ?1",
	[ST_S_SPLIT] =
		"INSERT INTO split (server, win_start, win_len, parts) VALUES (?1, ?2, ?3, ?4) "
		"ON CONFLICT DO UPDATE SET parts = parts + excluded.parts",
	[ST_S_HELD_PUT] =
		"INSERT OR REPLACE INTO held (id, node, instance, window_ns, arrival, part, dist) "
		"VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[ST_S_HELD_RESOLVE] = "UPDATE held SET dist = ?2 WHERE id = ?1",
	[ST_S_HELD_DELETE] = "DELETE FROM held WHERE id = ?1",
	/* a write's buckets in one statement each: ?1..?4 = its 1 min, 1 h,
	 * 1 day and calendar month buckets, ?5 server, ?6 resource, ?7 CE or
	 * reason, ?8 value, ?9 capacity */
	[ST_S_R_USAGE] =
		"INSERT INTO r_usage (step, win_start, server, resource, ce, value) "
		"VALUES (60000000000, ?1, ?5, ?6, ?7, ?8), (3600000000000, ?2, ?5, ?6, ?7, ?8), "
		"(86400000000000, ?3, ?5, ?6, ?7, ?8), (-1, ?4, ?5, ?6, ?7, ?8) "
		"ON CONFLICT DO UPDATE SET value = value + excluded.value",
	[ST_S_R_UNACCT] =
		"INSERT INTO r_unacct (step, win_start, server, resource, reason, value) "
		"VALUES (60000000000, ?1, ?5, ?6, ?7, ?8), (3600000000000, ?2, ?5, ?6, ?7, ?8), "
		"(86400000000000, ?3, ?5, ?6, ?7, ?8) ON CONFLICT DO UPDATE SET value = value + excluded.value",
	[ST_S_R_TOTAL] =
		"INSERT INTO r_total (step, win_start, server, resource, value, capacity) "
		"VALUES (60000000000, ?1, ?5, ?6, ?8, ?9), (3600000000000, ?2, ?5, ?6, ?8, ?9), "
		"(86400000000000, ?3, ?5, ?6, ?8, ?9), (-1, ?4, ?5, ?6, ?8, ?9) ON CONFLICT DO UPDATE SET "
		"value = value + excluded.value, capacity = capacity + excluded.capacity",
	[ST_S_R_SPLIT] =
		"INSERT INTO r_split (step, win_start, server, parts) VALUES (60000000000, ?1, ?5, ?8), "
		"(3600000000000, ?2, ?5, ?8), (86400000000000, ?3, ?5, ?8) "
		"ON CONFLICT DO UPDATE SET parts = parts + excluded.parts",
	[ST_S_C_USAGE] =
		"INSERT INTO r_ce_usage (step, win_start, resource, ce, value) "
		"VALUES (60000000000, ?1, ?6, ?7, ?8), (3600000000000, ?2, ?6, ?7, ?8), "
		"(86400000000000, ?3, ?6, ?7, ?8) ON CONFLICT DO UPDATE SET value = value + excluded.value",
	[ST_S_C_TOTAL] =
		"INSERT INTO r_ce_total (step, win_start, resource, value, capacity) "
		"VALUES (60000000000, ?1, ?6, ?8, ?9), (3600000000000, ?2, ?6, ?8, ?9), "
		"(86400000000000, ?3, ?6, ?8, ?9) ON CONFLICT DO UPDATE SET "
		"value = value + excluded.value, capacity = capacity + excluded.capacity",
	/* a write into a day already packed (before packed_until): into its
	 * packed row too (?3 = the day) */
	[ST_S_P_USAGE] =
		"INSERT INTO r_pack (win_start, server, resource, total, capacity, ces, reasons) "
		"SELECT ?3, ?5, ?6, NULL, NULL, st_pack_add(NULL, ?7, ?8), NULL FROM pack_state "
		"WHERE id = 1 AND ?3 < packed_until ON CONFLICT (win_start, server, resource) "
		"DO UPDATE SET ces = st_pack_add(ces, ?7, ?8)",
	[ST_S_P_UNACCT] =
		"INSERT INTO r_pack (win_start, server, resource, total, capacity, ces, reasons) "
		"SELECT ?3, ?5, ?6, NULL, NULL, NULL, st_pack_add(NULL, ?7, ?8) FROM pack_state "
		"WHERE id = 1 AND ?3 < packed_until ON CONFLICT (win_start, server, resource) "
		"DO UPDATE SET reasons = st_pack_add(reasons, ?7, ?8)",
	[ST_S_P_TOTAL] =
		"INSERT INTO r_pack (win_start, server, resource, total, capacity, ces, reasons) "
		"SELECT ?3, ?5, ?6, ?8, ?9, NULL, NULL FROM pack_state "
		"WHERE id = 1 AND ?3 < packed_until ON CONFLICT (win_start, server, resource) "
		"DO UPDATE SET total = coalesce(total, 0) + excluded.total, "
		"capacity = coalesce(capacity, 0) + excluded.capacity",
	[ST_S_SP_BEGIN] = "SAVEPOINT st_write",
	[ST_S_SP_RELEASE] = "RELEASE st_write",
	[ST_S_SP_ROLLBACK] = "ROLLBACK TO st_write",
};

void st_close(st_db *db)
{
	int i;

	if (!db)
		return;
	for (i = 0; i < ST_S_COUNT; i++)
		sqlite3_finalize(db->stmt[i]);
	if (db->h && !sqlite3_get_autocommit(db->h))
		sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(db->h);
	free(db->path);
	free(db);
}

/* Runs a pragma and checks its one-value answer when expect != NULL. */
static int st_pragma(st_db *db, const char *sql, const char *expect)
{
	sqlite3_stmt *s;
	const unsigned char *v;
	int rc;

	rc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return st_sql_err(db, rc, "failed to open");
	rc = sqlite3_step(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		sqlite3_finalize(s);
		return st_sql_err(db, rc, "failed to open");
	}
	if (expect) {
		v = rc == SQLITE_ROW ? sqlite3_column_text(s, 0) : NULL;
		if (!v || strcmp((const char *)v, expect) != 0) {
			rm_log_error("failed to open '%s': '%s' answered '%s', expected '%s'",
				     db->path, sql, v ? (const char *)v : "", expect);
			sqlite3_finalize(s);
			return RM_ESQL;
		}
	}
	sqlite3_finalize(s);
	return RM_OK;
}

int st_open(st_db **out, const char *path, unsigned flags)
{
	st_db *db;
	struct stat sb;
	int readonly = (flags & ST_OPEN_READONLY) != 0;
	int oflags, rc, rv, i;

	if (!out)
		return RM_EINVAL;
	*out = NULL;
	if (!path || !path[0]) {
		rm_log_error("failed to open database: empty path");
		return RM_EINVAL;
	}
	if (flags & ~(unsigned)ST_OPEN_READONLY) {
		rm_log_error("failed to open '%s': unknown flags 0x%x", path, flags);
		return RM_EINVAL;
	}
	/* SQLite's own message for these is a vague "unable to open database
	 * file": say what is wrong. */
	if (stat(path, &sb) != 0) {
		if (readonly || errno != ENOENT) {
			rm_log_error("failed to open '%s': %s", path, strerror(errno));
			return RM_EIO;
		}
	} else if (S_ISDIR(sb.st_mode)) {
		rm_log_error("failed to open '%s': %s", path, strerror(EISDIR));
		return RM_EIO;
	}

	db = calloc(1, sizeof(*db));
	if (!db || !(db->path = strdup(path))) {
		free(db);
		rm_log_error("failed to open '%s': %s", path, rm_strerror(RM_ENOMEM));
		return RM_ENOMEM;
	}
	db->flags = flags;
	oflags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	rc = sqlite3_open_v2(path, &db->h, oflags | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		rm_log_error("failed to open '%s': %s", path,
			     db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
		st_close(db);
		return rc == SQLITE_CANTOPEN || rc == SQLITE_PERM || rc == SQLITE_READONLY ? RM_EIO
											     : RM_ESQL;
	}
	sqlite3_extended_result_codes(db->h, 1);
	sqlite3_busy_timeout(db->h, ST_BUSY_TIMEOUT_MS);

	/* The first read catches "file is not a database" before any pragma
	 * that would write. */
	if ((rv = st_pragma(db, "PRAGMA schema_version", NULL)) != 0)
		goto fail;
	if (!readonly) {
		if ((rv = st_pragma(db, "PRAGMA journal_mode = WAL", "wal")) != 0)
			goto fail;
	}
	if ((rv = st_pragma(db, "PRAGMA synchronous = NORMAL", NULL)) != 0)
		goto fail;
	/* queries read megabytes of pages (a month of packed days: 16 MB):
	 * mapped, not copied by a read() per page */
	if (readonly && (rv = st_pragma(db, "PRAGMA mmap_size = 2147418112", NULL)) != 0)
		goto fail;
	/* the packed day series' functions: its migration and writes use them */
	if ((rc = st_pack_register(db->h)) != SQLITE_OK) {
		rv = st_sql_err(db, rc, "failed to open");
		goto fail;
	}
	if ((rv = st_schema_migrate(db->h, path, ST_SCHEMA_VERSION, readonly, &db->version)) != 0)
		goto fail;
	db->version = ST_SCHEMA_VERSION;
	/* A write and its buckets run in a savepoint whose journal holds the
	 * pages they touch (about 15, 60 KiB); SQLite moves such a journal to
	 * a temporary file past 64 KiB, which halved the write rate. Kept in
	 * memory (after the migration, whose sorts may be large). */
	if (!readonly && (rv = st_pragma(db, "PRAGMA temp_store = MEMORY", NULL)) != 0)
		goto fail;

	for (i = 0; i < ST_S_COUNT; i++) {
		if (readonly && i != ST_S_PEER_GET && i != ST_S_NODE_GET)
			continue;
		rc = sqlite3_prepare_v3(db->h, st_stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&db->stmt[i], NULL);
		if (rc != SQLITE_OK) {
			rv = st_sql_err(db, rc, "failed to open");
			goto fail;
		}
	}
	*out = db;
	return RM_OK;
fail:
	st_close(db);
	return rv;
}

int st_schema_version(st_db *db)
{
	return db ? db->version : 0;
}

int st_begin(st_db *db)
{
	int rc;

	if (!db)
		return RM_EINVAL;
	if (!sqlite3_get_autocommit(db->h)) {
		rm_log_error("failed to begin a transaction on '%s': one is already open", db->path);
		return RM_ESTATE;
	}
	rc = sqlite3_exec(db->h, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return st_sql_err(db, rc, "failed to begin a transaction on");
	return RM_OK;
}

int st_commit(st_db *db)
{
	int rc;

	if (!db)
		return RM_EINVAL;
	if (sqlite3_get_autocommit(db->h)) {
		rm_log_error("failed to commit on '%s': no transaction is open", db->path);
		return RM_ESTATE;
	}
	rc = sqlite3_exec(db->h, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		int rv = st_sql_err(db, rc, "failed to commit on");

		if (!sqlite3_get_autocommit(db->h))
			sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
		return rv;
	}
	return RM_OK;
}

void st_rollback(st_db *db)
{
	if (!db || sqlite3_get_autocommit(db->h))
		return;
	sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
}

/* Steps a prepared write (or a one-row read when row != NULL) and resets it.
 * Returns RM_OK, RM_ENOENT (read: no row), or an error. */
static int st_run(st_db *db, sqlite3_stmt *s, const char *what, int *row)
{
	int rc = sqlite3_step(s);
	int rv = RM_OK;

	if (row)
		*row = rc == SQLITE_ROW;
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		rv = st_sql_err(db, rc, what);
	if (!row) {
		sqlite3_reset(s);
		sqlite3_clear_bindings(s);
	}
	return rv;
}

static int st_check_writable(const st_db *db, const char *what)
{
	if (!db)
		return RM_EINVAL;
	if (db->flags & ST_OPEN_READONLY) {
		rm_log_error("%s '%s': opened read-only", what, db->path);
		return RM_EPERM;
	}
	return RM_OK;
}

static int st_check_window(int64_t start, int64_t len, enum st_resource r)
{
	if (len <= 0 || start > INT64_MAX - len) {
		rm_log_error("invalid window [%lld, +%lld): length must be positive and the end "
			     "within int64", (long long)start, (long long)len);
		return RM_EINVAL;
	}
	if ((int)r < 0 || r >= ST_R_COUNT) {
		rm_log_error("invalid resource %d", (int)r);
		return RM_EINVAL;
	}
	return RM_OK;
}

static int st_check_value(const char *what, uint64_t v)
{
	if (v > (uint64_t)INT64_MAX) {
		rm_log_error("invalid %s %llu: above the int64 limit", what, (unsigned long long)v);
		return RM_EINVAL;
	}
	return RM_OK;
}

/*
 * Steps the bound write statement s of table `which` and adds the same
 * value to the window's bucket in every rolled-up series (st_rollup_add),
 * all in one savepoint so that they stay equal.
 */
static int st_write(st_db *db, sqlite3_stmt *s, enum st_stmt which, const char *server,
		    int64_t start, enum st_resource r, const char *key, uint64_t value, uint64_t cap)
{
	int rv;

	/* prepared once: this runs for every row the aggregator writes */
	if ((rv = st_run(db, db->stmt[ST_S_SP_BEGIN], "failed to write to", NULL)) != 0) {
		sqlite3_reset(s);
		sqlite3_clear_bindings(s);
		return rv;
	}
	if ((rv = st_run(db, s, "failed to write to", NULL)) != 0 ||
	    (rv = st_rollup_add(db, which, server, start, r, key, value, cap)) != 0) {
		st_run(db, db->stmt[ST_S_SP_ROLLBACK], "failed to write to", NULL);
		st_run(db, db->stmt[ST_S_SP_RELEASE], "failed to write to", NULL);
		return rv;
	}
	return st_run(db, db->stmt[ST_S_SP_RELEASE], "failed to write to", NULL);
}

/* The shared body of st_add_usage and st_add_unacct. */
static int st_add_keyed(st_db *db, enum st_stmt which, const char *server, int64_t start,
			int64_t len, enum st_resource r, const char *key, uint64_t value)
{
	const char *what = which == ST_S_USAGE ? "ce" : "reason";
	sqlite3_stmt *s;
	int rv;

	if ((rv = st_check_writable(db, "failed to write to")) != 0)
		return rv;
	if ((rv = st_check_name("server", server, ST_NAME_MAX)) != 0 ||
	    (rv = st_check_name(what, key, which == ST_S_USAGE ? ST_NAME_MAX : ST_REASON_MAX)) != 0 ||
	    (rv = st_check_window(start, len, r)) != 0 || (rv = st_check_value("value", value)) != 0)
		return rv;
	if (strcmp(key, which == ST_S_USAGE ? ST_CE_UNACCOUNTABLE : ST_REASON_UNEXPLAINED) == 0) {
		rm_log_error("invalid %s '%s': reserved name", what, key);
		return RM_EINVAL;
	}
	s = db->stmt[which];
	sqlite3_bind_text(s, 1, server, -1, SQLITE_STATIC);
	sqlite3_bind_int(s, 2, (int)r);
	sqlite3_bind_int64(s, 3, start);
	sqlite3_bind_int64(s, 4, len);
	sqlite3_bind_text(s, 5, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 6, (sqlite3_int64)value);
	return st_write(db, s, which, server, start, r, key, value, 0);
}

int st_add_usage(st_db *db, const char *server, int64_t win_start_ns, int64_t win_len_ns,
		 enum st_resource r, const char *ce, uint64_t value)
{
	return st_add_keyed(db, ST_S_USAGE, server, win_start_ns, win_len_ns, r, ce, value);
}

int st_add_unacct(st_db *db, const char *server, int64_t win_start_ns, int64_t win_len_ns,
		  enum st_resource r, const char *reason, uint64_t value)
{
	return st_add_keyed(db, ST_S_UNACCT, server, win_start_ns, win_len_ns, r, reason, value);
}

int st_add_total(st_db *db, const char *server, int64_t win_start_ns, int64_t win_len_ns,
		 enum st_resource r, uint64_t value, uint64_t capacity)
{
	sqlite3_stmt *s;
	int rv;

	if ((rv = st_check_writable(db, "failed to write to")) != 0)
		return rv;
	if ((rv = st_check_name("server", server, ST_NAME_MAX)) != 0 ||
	    (rv = st_check_window(win_start_ns, win_len_ns, r)) != 0 ||
	    (rv = st_check_value("value", value)) != 0 ||
	    (rv = st_check_value("capacity", capacity)) != 0)
		return rv;
	s = db->stmt[ST_S_TOTAL];
	sqlite3_bind_text(s, 1, server, -1, SQLITE_STATIC);
	sqlite3_bind_int(s, 2, (int)r);
	sqlite3_bind_int64(s, 3, win_start_ns);
	sqlite3_bind_int64(s, 4, win_len_ns);
	sqlite3_bind_int64(s, 5, (sqlite3_int64)value);
	sqlite3_bind_int64(s, 6, (sqlite3_int64)capacity);
	return st_write(db, s, ST_S_TOTAL, server, win_start_ns, r, NULL, value, capacity);
}

/* uint64 <-> int64 by bit pattern (SQLite integers are signed). */
static sqlite3_int64 st_u2i(uint64_t v)
{
	sqlite3_int64 i;

	memcpy(&i, &v, sizeof(i));
	return i;
}

static uint64_t st_i2u(sqlite3_int64 i)
{
	uint64_t v;

	memcpy(&v, &i, sizeof(v));
	return v;
}

int st_peer_get(st_db *db, const char *node, uint64_t instance, uint64_t *last_seq)
{
	sqlite3_stmt *s;
	int rv, row;

	if (!db || !last_seq)
		return RM_EINVAL;
	*last_seq = 0;
	if ((rv = st_check_name("node", node, ST_NAME_MAX)) != 0)
		return rv;
	s = db->stmt[ST_S_PEER_GET];
	sqlite3_bind_text(s, 1, node, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, st_u2i(instance));
	rv = st_run(db, s, "failed to read from", &row);
	if (rv == RM_OK && row)
		*last_seq = st_i2u(sqlite3_column_int64(s, 0));
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return rv;
}

int st_peer_set(st_db *db, const char *node, uint64_t instance, uint64_t seq)
{
	sqlite3_stmt *s;
	int rv;

	if ((rv = st_check_writable(db, "failed to write to")) != 0)
		return rv;
	if ((rv = st_check_name("node", node, ST_NAME_MAX)) != 0)
		return rv;
	s = db->stmt[ST_S_PEER_SET];
	sqlite3_bind_text(s, 1, node, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, st_u2i(instance));
	sqlite3_bind_int64(s, 3, st_u2i(seq));
	return st_run(db, s, "failed to write to", NULL);
}

int st_node_seen(st_db *db, const struct st_node *n)
{
	sqlite3_stmt *s;
	int rv;

	if ((rv = st_check_writable(db, "failed to write to")) != 0)
		return rv;
	if (!n)
		return RM_EINVAL;
	if ((rv = st_check_name("node", n->node, ST_NAME_MAX)) != 0)
		return rv;
	if ((n->backend && strlen(n->backend) > ST_NAME_MAX) ||
	    (n->hostname && strlen(n->hostname) > 255)) {
		rm_log_error("invalid metadata of node '%s': backend or hostname too long", n->node);
		return RM_EINVAL;
	}
	if ((rv = st_check_value("window length", n->window_ns)) != 0)
		return rv;
	s = db->stmt[ST_S_NODE_SEEN];
	sqlite3_bind_text(s, 1, n->node, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, n->backend ? n->backend : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, n->hostname ? n->hostname : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 4, (sqlite3_int64)n->window_ns);
	sqlite3_bind_int64(s, 5, n->clock_offset_ns);
	sqlite3_bind_int64(s, 6, n->ncpu);
	sqlite3_bind_int64(s, 7, n->seen_unix_ns);
	return st_run(db, s, "failed to write to", NULL);
}

int st_node_get(st_db *db, const char *node, struct st_node_rec *out)
{
	sqlite3_stmt *s;
	int rv, row;

	if (!db || !out)
		return RM_EINVAL;
	if ((rv = st_check_name("node", node, ST_NAME_MAX)) != 0)
		return rv;
	memset(out, 0, sizeof(*out));
	s = db->stmt[ST_S_NODE_GET];
	sqlite3_bind_text(s, 1, node, -1, SQLITE_STATIC);
	rv = st_run(db, s, "failed to read from", &row);
	if (rv == RM_OK && !row)
		rv = RM_ENOENT;
	if (rv == RM_OK) {
		snprintf(out->node, sizeof(out->node), "%s", node);
		snprintf(out->backend, sizeof(out->backend), "%s", st_col_text(s, 0));
		snprintf(out->hostname, sizeof(out->hostname), "%s", st_col_text(s, 1));
		out->window_ns = (uint64_t)sqlite3_column_int64(s, 2);
		out->clock_offset_ns = sqlite3_column_int64(s, 3);
		out->ncpu = (uint32_t)sqlite3_column_int64(s, 4);
		out->first_seen_unix_ns = sqlite3_column_int64(s, 5);
		out->last_seen_unix_ns = sqlite3_column_int64(s, 6);
	}
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return rv;
}

int st_add_split(st_db *db, const char *server, int64_t win_start_ns, int64_t win_len_ns, uint64_t parts)
{
	sqlite3_stmt *s;
	int rv;

	if ((rv = st_check_writable(db, "failed to write to")) != 0)
		return rv;
	if ((rv = st_check_name("server", server, ST_NAME_MAX)) != 0 ||
	    (rv = st_check_window(win_start_ns, win_len_ns, ST_R_CPU)) != 0 ||
	    (rv = st_check_value("split count", parts)) != 0)
		return rv;
	s = db->stmt[ST_S_SPLIT];
	sqlite3_bind_text(s, 1, server, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, win_start_ns);
	sqlite3_bind_int64(s, 3, win_len_ns);
	sqlite3_bind_int64(s, 4, (sqlite3_int64)parts);
	return st_write(db, s, ST_S_SPLIT, server, win_start_ns, ST_R_CPU, NULL, parts, 0);
}

static int st_check_held_id(uint64_t id)
{
	if (id == 0 || id > (uint64_t)INT64_MAX) {
		rm_log_error("invalid held part id %llu: must be 1 to 2^63-1", (unsigned long long)id);
		return RM_EINVAL;
	}
	return RM_OK;
}

static int st_check_dist(const char *dist)
{
	size_t len = dist ? strlen(dist) : 0;

	if (len == 0 || len > ST_HELD_DIST_MAX) {
		rm_log_error("invalid distribution of a held part: must be 1 to %d bytes", ST_HELD_DIST_MAX);
		return RM_EINVAL;
	}
	return RM_OK;
}

int st_held_put(st_db *db, const struct st_held *h)
{
	sqlite3_stmt *s;
	int rv;

	if ((rv = st_check_writable(db, "failed to write to")) != 0)
		return rv;
	if (!h) {
		rm_log_error("invalid held part: null");
		return RM_EINVAL;
	}
	if ((rv = st_check_held_id(h->id)) != 0 || (rv = st_check_name("node", h->node, ST_NAME_MAX)) != 0 ||
	    (rv = st_check_value("window length", h->window_ns)) != 0 ||
	    (h->dist && (rv = st_check_dist(h->dist)) != 0))
		return rv;
	if (!h->window_ns || !h->part || h->part_len == 0 || h->part_len > ST_HELD_PART_MAX) {
		rm_log_error("invalid held part %llu: window 0 or part of %zu bytes (1 to %d)",
			     (unsigned long long)h->id, h->part ? h->part_len : 0, ST_HELD_PART_MAX);
		return RM_EINVAL;
	}
	s = db->stmt[ST_S_HELD_PUT];
	sqlite3_bind_int64(s, 1, (sqlite3_int64)h->id);
	sqlite3_bind_text(s, 2, h->node, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, st_u2i(h->instance));
	sqlite3_bind_int64(s, 4, (sqlite3_int64)h->window_ns);
	sqlite3_bind_int64(s, 5, h->arrival_ns);
	sqlite3_bind_blob(s, 6, h->part, (int)h->part_len, SQLITE_STATIC);
	if (h->dist)
		sqlite3_bind_text(s, 7, h->dist, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 7);
	return st_run(db, s, "failed to write to", NULL);
}

int st_held_resolve(st_db *db, uint64_t id, const char *dist)
{
	sqlite3_stmt *s;
	int rv;

	if ((rv = st_check_writable(db, "failed to write to")) != 0)
		return rv;
	if ((rv = st_check_held_id(id)) != 0 || (rv = st_check_dist(dist)) != 0)
		return rv;
	s = db->stmt[ST_S_HELD_RESOLVE];
	sqlite3_bind_int64(s, 1, (sqlite3_int64)id);
	sqlite3_bind_text(s, 2, dist, -1, SQLITE_STATIC);
	if ((rv = st_run(db, s, "failed to write to", NULL)) != 0)
		return rv;
	return sqlite3_changes(db->h) ? RM_OK : RM_ENOENT;
}

int st_held_delete(st_db *db, uint64_t id)
{
	sqlite3_stmt *s;
	int rv;

	if ((rv = st_check_writable(db, "failed to write to")) != 0)
		return rv;
	if ((rv = st_check_held_id(id)) != 0)
		return rv;
	s = db->stmt[ST_S_HELD_DELETE];
	sqlite3_bind_int64(s, 1, (sqlite3_int64)id);
	return st_run(db, s, "failed to write to", NULL);
}

int st_held_load(st_db *db, int (*cb)(void *arg, const struct st_held *h), void *arg)
{
	static const char sql[] =
		"SELECT id, node, instance, window_ns, arrival, part, dist FROM held ORDER BY id";
	sqlite3_stmt *s;
	int rc, rv = RM_OK;

	if (!db || !cb)
		return RM_EINVAL;
	rc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return st_sql_err(db, rc, "failed to read from");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct st_held h;

		memset(&h, 0, sizeof(h));
		h.id = (uint64_t)sqlite3_column_int64(s, 0);
		h.node = st_col_text(s, 1);
		h.instance = st_i2u(sqlite3_column_int64(s, 2));
		h.window_ns = (uint64_t)sqlite3_column_int64(s, 3);
		h.arrival_ns = sqlite3_column_int64(s, 4);
		h.part = sqlite3_column_blob(s, 5);
		h.part_len = (size_t)sqlite3_column_bytes(s, 5);
		h.dist = sqlite3_column_type(s, 6) == SQLITE_NULL ? NULL : st_col_text(s, 6);
		if (!h.part && h.part_len) {
			rv = st_sql_err(db, SQLITE_NOMEM, "failed to read from");
			break;
		}
		if ((rv = cb(arg, &h)) != 0)
			break;
	}
	if (rv == RM_OK && rc != SQLITE_DONE)
		rv = st_sql_err(db, rc, "failed to read from");
	sqlite3_finalize(s);
	return rv;
}

int st_window_sums(st_db *db, const char *server, int64_t win_start_ns, int64_t win_len_ns,
		   uint64_t total[ST_R_COUNT], uint64_t charged[ST_R_COUNT], int *has_total)
{
	static const char sql[] =
		"SELECT 0, resource, value FROM total WHERE server = ?1 AND win_start = ?2 AND win_len = ?3 "
		"UNION ALL SELECT 1, resource, value FROM usage WHERE server = ?1 AND win_start = ?2 AND win_len = ?3 "
		"UNION ALL SELECT 1, resource, value FROM unacct WHERE server = ?1 AND win_start = ?2 AND win_len = ?3";
	sqlite3_stmt *s;
	int rc, rv;

	if (!db || !total || !charged || !has_total)
		return RM_EINVAL;
	memset(total, 0, ST_R_COUNT * sizeof(*total));
	memset(charged, 0, ST_R_COUNT * sizeof(*charged));
	*has_total = 0;
	if ((rv = st_check_name("server", server, ST_NAME_MAX)) != 0 ||
	    (rv = st_check_window(win_start_ns, win_len_ns, ST_R_CPU)) != 0)
		return rv;
	rc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return st_sql_err(db, rc, "failed to read from");
	sqlite3_bind_text(s, 1, server, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, win_start_ns);
	sqlite3_bind_int64(s, 3, win_len_ns);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int r = sqlite3_column_int(s, 1);
		uint64_t v = (uint64_t)sqlite3_column_int64(s, 2);

		if (r < 0 || r >= ST_R_COUNT)
			continue;
		if (sqlite3_column_int(s, 0) == 0) {
			total[r] += v;
			*has_total = 1;
		} else {
			charged[r] += v;
		}
	}
	rv = rc == SQLITE_DONE ? RM_OK : st_sql_err(db, rc, "failed to read from");
	sqlite3_finalize(s);
	return rv;
}

int st_held_count(st_db *db, uint64_t *held, uint64_t *unresolved)
{
	static const char sql[] = "SELECT count(*), count(*) - count(dist) FROM held";
	sqlite3_stmt *s;
	int rc, rv = RM_OK;

	if (!db || !held || !unresolved)
		return RM_EINVAL;
	rc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return st_sql_err(db, rc, "failed to read from");
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*held = (uint64_t)sqlite3_column_int64(s, 0);
		*unresolved = (uint64_t)sqlite3_column_int64(s, 1);
	} else {
		rv = st_sql_err(db, rc, "failed to read from");
	}
	sqlite3_finalize(s);
	return rv;
}
