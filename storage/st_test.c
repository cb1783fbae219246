/*
 * st_test.c - tests of storage on real SQLite files in rm_test_tmpdir():
 * schema creation and migration, refusal of newer/foreign/missing files,
 * additive upserts, V = U - sum U_c, the reason breakdown, the identity
 * check, delivery state across reopen, transactions, filters and argument
 * validation, the aggregator's held parts and the split counts (v3).
 */
#include <inttypes.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rm_err.h"
#include "rm_test.h"
#include "st.h"
#include "st_int.h"
#include "banned.h"

#define SEC 1000000000LL
#define W (10 * SEC) /* window length used by the tests */
#define T0 (1700000000LL * SEC)

/* Path of a database file named name in the test directory, removed. */
static char *fresh_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s.db", rm_test_tmpdir(), name);
	unlink(buf);
	return buf;
}
#define FRESH(buf, name) fresh_path(buf, sizeof(buf), name)

static st_db *open_new(const char *name)
{
	char path[512];
	st_db *db = NULL;

	CU_ASSERT_EQUAL_FATAL(st_open(&db, FRESH(path, name), 0), RM_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	return db;
}

static long long raw_int(const char *path, const char *sql)
{
	sqlite3 *h;
	sqlite3_stmt *s;
	long long v = -1;

	CU_ASSERT_EQUAL_FATAL(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	CU_ASSERT_EQUAL_FATAL(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK);
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(h);
	return v;
}

static void raw_exec(const char *path, const char *sql)
{
	sqlite3 *h;

	CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &h), SQLITE_OK);
	CU_ASSERT_EQUAL(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
}

static struct st_query all(void)
{
	struct st_query q = { .since_ns = INT64_MIN, .until_ns = INT64_MAX, .resource = -1 };

	return q;
}

static const struct st_row *find(const struct st_row *r, size_t n, const char *server,
				 enum st_resource res, const char *ce)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(r[i].server, server) && r[i].resource == res && !strcmp(r[i].ce, ce))
			return &r[i];
	return NULL;
}

static const struct st_row *find_reason(const struct st_row *r, size_t n, const char *server,
					enum st_resource res, const char *reason)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(r[i].server, server) && r[i].resource == res &&
		    !strcmp(r[i].reason, reason))
			return &r[i];
	return NULL;
}

static void test_resource_names(void)
{
	enum st_resource r, back;

	for (r = ST_R_CPU; r < ST_R_COUNT; r++) {
		CU_ASSERT_EQUAL(st_resource_parse(st_resource_name(r), &back), RM_OK);
		CU_ASSERT_EQUAL(back, r);
	}
	CU_ASSERT_STRING_EQUAL(st_resource_name(ST_R_DISK_WRITE), "disk_write");
	CU_ASSERT_STRING_EQUAL(st_resource_unit(ST_R_CPU), "ns");
	CU_ASSERT_STRING_EQUAL(st_resource_unit(ST_R_NET_RX), "bytes");
	CU_ASSERT_EQUAL(st_resource_parse("CPU", &back), RM_EINVAL);
	CU_ASSERT_EQUAL(st_resource_parse("", &back), RM_EINVAL);
	CU_ASSERT_EQUAL(st_resource_parse(NULL, &back), RM_EINVAL);
	CU_ASSERT_STRING_EQUAL(st_resource_name(ST_R_COUNT), "?");
}

static void test_create_from_empty(void)
{
	char path[512];
	st_db *db = NULL;

	CU_ASSERT_EQUAL_FATAL(st_open(&db, FRESH(path, "empty"), 0), RM_OK);
	st_close(db);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT version FROM schema_version"), ST_SCHEMA_VERSION);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM schema_version"), 1);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'usage_by_ce'"), 1);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'node'"), 1);
	{
		sqlite3 *h;
		sqlite3_stmt *s;

		CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &h), SQLITE_OK);
		CU_ASSERT_EQUAL_FATAL(sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &s, NULL), SQLITE_OK);
		CU_ASSERT_EQUAL(sqlite3_step(s), SQLITE_ROW);
		CU_ASSERT_STRING_EQUAL(st_col_text(s, 0), "wal");
		sqlite3_finalize(s);
		sqlite3_close(h);
	}
	/* Reopening an up-to-date file changes nothing. */
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_schema_version(db), ST_SCHEMA_VERSION);
	st_close(db);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM schema_version"), 1);
}

static void test_migrate_from_v1(void)
{
	char path[512];
	sqlite3 *h;
	st_db *db = NULL;
	struct st_query q = all();
	struct st_row *rows;
	struct st_node n = { .node = "n1", .backend = "replay", .hostname = "host1",
			     .window_ns = W, .clock_offset_ns = -5, .ncpu = 4, .seen_unix_ns = T0 };
	struct st_node_rec rec;
	size_t nrows;
	int before;

	FRESH(path, "v1");
	/* A file as the v1 code left it, with data in it. */
	CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &h), SQLITE_OK);
	CU_ASSERT_EQUAL_FATAL(st_schema_migrate(h, path, 1, 0, &before), RM_OK);
	CU_ASSERT_EQUAL(before, 0);
	CU_ASSERT_EQUAL(sqlite3_exec(h,
				     "INSERT INTO usage VALUES ('s1', 0, 1000, 10, 'ce1', 77);"
				     "INSERT INTO total VALUES ('s1', 0, 1000, 10, 100, 400);"
				     "INSERT INTO peer VALUES ('n1', 9, 41);",
				     NULL, NULL, NULL),
			SQLITE_OK);
	sqlite3_close(h);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT version FROM schema_version"), 1);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'node'"), 0);

	/* Read-only open does not migrate: refused. */
	CU_ASSERT_EQUAL(st_open(&db, path, ST_OPEN_READONLY), RM_EVERSION);
	CU_ASSERT_PTR_NULL(db);

	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_schema_version(db), ST_SCHEMA_VERSION);
	CU_ASSERT_EQUAL_FATAL(st_query_usage(db, &q, &rows, &nrows), RM_OK);
	CU_ASSERT_EQUAL_FATAL(nrows, 2);
	CU_ASSERT_STRING_EQUAL(rows[0].ce, "ce1");
	CU_ASSERT_EQUAL(rows[0].value, 77);
	CU_ASSERT_EQUAL(rows[0].total, 100);
	CU_ASSERT_EQUAL(rows[0].capacity, 400);
	CU_ASSERT_STRING_EQUAL(rows[1].ce, ST_CE_UNACCOUNTABLE);
	CU_ASSERT_EQUAL(rows[1].residual, 100 - 77);
	st_rows_free(rows);
	/* The v2 node table works after migration. */
	CU_ASSERT_EQUAL(st_node_seen(db, &n), RM_OK);
	CU_ASSERT_EQUAL(st_node_get(db, "n1", &rec), RM_OK);
	CU_ASSERT_STRING_EQUAL(rec.hostname, "host1");
	CU_ASSERT_EQUAL(rec.ncpu, 4);
	st_close(db);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT version FROM schema_version"), ST_SCHEMA_VERSION);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT last_seq FROM peer WHERE node = 'n1'"), 41);
}

static void test_migrate_from_v2(void)
{
	char path[512];
	sqlite3 *h;
	st_db *db = NULL;
	uint64_t seq = 0, held = 9, unresolved = 9;
	int before;

	FRESH(path, "v2");
	CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &h), SQLITE_OK);
	CU_ASSERT_EQUAL_FATAL(st_schema_migrate(h, path, 2, 0, &before), RM_OK);
	CU_ASSERT_EQUAL(sqlite3_exec(h, "INSERT INTO peer VALUES ('n1', 9, 41);", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'held'"), 0);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_schema_version(db), ST_SCHEMA_VERSION);
	CU_ASSERT_EQUAL(st_peer_get(db, "n1", 9, &seq), RM_OK);
	CU_ASSERT_EQUAL(seq, 41);
	CU_ASSERT_EQUAL(st_held_count(db, &held, &unresolved), RM_OK);
	CU_ASSERT_EQUAL(held, 0);
	CU_ASSERT_EQUAL(unresolved, 0);
	CU_ASSERT_EQUAL(st_add_split(db, "s", T0, W, 2), RM_OK);
	st_close(db);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'held'"), 1);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT parts FROM split"), 2);
}

/* Collects st_held_load's rows. */
struct held_seen {
	size_t n;
	uint64_t id[8];
	char node[8][64];
	uint64_t instance[8], window_ns[8];
	int64_t arrival[8];
	unsigned char part[8][16];
	size_t part_len[8];
	char dist[8][64];
	int has_dist[8];
	size_t stop_after;
};

static int held_cb(void *arg, const struct st_held *h)
{
	struct held_seen *s = arg;
	size_t i = s->n;

	if (i == 8)
		return RM_EFULL;
	s->id[i] = h->id;
	snprintf(s->node[i], sizeof(s->node[i]), "%s", h->node);
	s->instance[i] = h->instance;
	s->window_ns[i] = h->window_ns;
	s->arrival[i] = h->arrival_ns;
	s->part_len[i] = h->part_len < 16 ? h->part_len : 16;
	memcpy(s->part[i], h->part, s->part_len[i]);
	s->has_dist[i] = h->dist != NULL;
	snprintf(s->dist[i], sizeof(s->dist[i]), "%s", h->dist ? h->dist : "");
	s->n++;
	return s->stop_after && s->n == s->stop_after ? RM_ECLOSED : RM_OK;
}

static void test_held_parts(void)
{
	char path[512], big[ST_HELD_PART_MAX + 1];
	st_db *db = NULL;
	struct held_seen seen;
	struct st_held h = { .id = 7, .node = "front", .instance = UINT64_MAX - 1, .window_ns = W,
			     .arrival_ns = -5, .part = "\x01\x02\x00\x03", .part_len = 4, .dist = NULL };
	uint64_t held, unresolved;

	CU_ASSERT_EQUAL_FATAL(st_open(&db, FRESH(path, "held"), 0), RM_OK);
	CU_ASSERT_EQUAL(st_held_put(db, &h), RM_OK);
	h.id = 3;
	h.node = "db";
	h.arrival_ns = 1000;
	h.dist = "c1=3;!unpaired=4";
	CU_ASSERT_EQUAL(st_held_put(db, &h), RM_OK);
	h.id = 9;
	h.dist = NULL;
	CU_ASSERT_EQUAL(st_held_put(db, &h), RM_OK);
	CU_ASSERT_EQUAL(st_held_count(db, &held, &unresolved), RM_OK);
	CU_ASSERT_EQUAL(held, 3);
	CU_ASSERT_EQUAL(unresolved, 2);
	/* resolve, delete (also of a missing part), in a transaction that is rolled back */
	CU_ASSERT_EQUAL_FATAL(st_begin(db), RM_OK);
	CU_ASSERT_EQUAL(st_held_resolve(db, 7, "c2=1"), RM_OK);
	CU_ASSERT_EQUAL(st_held_delete(db, 9), RM_OK);
	st_rollback(db);
	CU_ASSERT_EQUAL(st_held_count(db, &held, &unresolved), RM_OK);
	CU_ASSERT_EQUAL(held, 3);
	CU_ASSERT_EQUAL(unresolved, 2);
	CU_ASSERT_EQUAL(st_held_resolve(db, 7, "c2=1"), RM_OK);
	CU_ASSERT_EQUAL(st_held_resolve(db, 8, "c2=1"), RM_ENOENT);
	CU_ASSERT_EQUAL(st_held_delete(db, 9), RM_OK);
	CU_ASSERT_EQUAL(st_held_delete(db, 9), RM_OK);
	st_close(db);
	/* what is left survives reopening, in id order, byte for byte */
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, ST_OPEN_READONLY), RM_OK);
	memset(&seen, 0, sizeof(seen));
	CU_ASSERT_EQUAL(st_held_load(db, held_cb, &seen), RM_OK);
	CU_ASSERT_EQUAL_FATAL(seen.n, 2);
	CU_ASSERT_EQUAL(seen.id[0], 3);
	CU_ASSERT_STRING_EQUAL(seen.node[0], "db");
	CU_ASSERT_STRING_EQUAL(seen.dist[0], "c1=3;!unpaired=4");
	CU_ASSERT_EQUAL(seen.arrival[0], 1000);
	CU_ASSERT_EQUAL(seen.id[1], 7);
	CU_ASSERT_EQUAL(seen.instance[1], UINT64_MAX - 1);
	CU_ASSERT_EQUAL(seen.window_ns[1], W);
	CU_ASSERT_EQUAL(seen.arrival[1], -5);
	CU_ASSERT_EQUAL(seen.part_len[1], 4);
	CU_ASSERT_EQUAL(memcmp(seen.part[1], "\x01\x02\x00\x03", 4), 0);
	CU_ASSERT_STRING_EQUAL(seen.dist[1], "c2=1");
	/* a callback's error stops the load and is returned */
	memset(&seen, 0, sizeof(seen));
	seen.stop_after = 1;
	CU_ASSERT_EQUAL(st_held_load(db, held_cb, &seen), RM_ECLOSED);
	CU_ASSERT_EQUAL(seen.n, 1);
	CU_ASSERT_EQUAL(st_held_put(db, &h), RM_EPERM);
	st_close(db);
	/* argument validation */
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	h.id = 0;
	CU_ASSERT_EQUAL(st_held_put(db, &h), RM_EINVAL);
	h.id = (uint64_t)INT64_MAX + 1;
	CU_ASSERT_EQUAL(st_held_put(db, &h), RM_EINVAL);
	h.id = 11;
	h.part_len = 0;
	CU_ASSERT_EQUAL(st_held_put(db, &h), RM_EINVAL);
	memset(big, 'x', sizeof(big));
	h.part = big;
	h.part_len = sizeof(big);
	CU_ASSERT_EQUAL(st_held_put(db, &h), RM_EINVAL);
	h.part_len = ST_HELD_PART_MAX;
	CU_ASSERT_EQUAL(st_held_put(db, &h), RM_OK);
	h.window_ns = 0;
	CU_ASSERT_EQUAL(st_held_put(db, &h), RM_EINVAL);
	h.window_ns = W;
	h.node = "";
	CU_ASSERT_EQUAL(st_held_put(db, &h), RM_EINVAL);
	h.node = "n";
	h.dist = "";
	CU_ASSERT_EQUAL(st_held_put(db, &h), RM_EINVAL);
	CU_ASSERT_EQUAL(st_held_put(NULL, &h), RM_EINVAL);
	CU_ASSERT_EQUAL(st_held_put(db, NULL), RM_EINVAL);
	CU_ASSERT_EQUAL(st_held_resolve(db, 7, NULL), RM_EINVAL);
	CU_ASSERT_EQUAL(st_held_load(db, NULL, NULL), RM_EINVAL);
	CU_ASSERT_EQUAL(st_held_count(db, NULL, &unresolved), RM_EINVAL);
	st_close(db);
}

static void test_splits(void)
{
	st_db *db = open_new("splits");
	struct st_query q = all();
	struct st_row *rows;
	size_t n;

	CU_ASSERT_EQUAL(st_add_split(db, "b", T0, W, 3), RM_OK);
	CU_ASSERT_EQUAL(st_add_split(db, "b", T0, W, 4), RM_OK);
	CU_ASSERT_EQUAL(st_add_split(db, "b", T0 + W, W, 1), RM_OK);
	CU_ASSERT_EQUAL(st_add_split(db, "a", T0 + W, W, 5), RM_OK);
	CU_ASSERT_EQUAL(st_add_split(db, "c", T0, W, 0), RM_OK); /* recorded, but counts nothing */
	CU_ASSERT_EQUAL_FATAL(st_query_splits(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(rows[0].server, "a");
	CU_ASSERT_EQUAL(rows[0].value, 5);
	CU_ASSERT_STRING_EQUAL(rows[1].server, "b");
	CU_ASSERT_EQUAL(rows[1].value, 8);
	CU_ASSERT_EQUAL(rows[1].win_start_ns, 0);
	st_rows_free(rows);
	q.per_window = 1;
	q.server = "b";
	q.resource = ST_R_NET_RX; /* ignored */
	CU_ASSERT_EQUAL_FATAL(st_query_splits(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(rows[0].win_start_ns, T0);
	CU_ASSERT_EQUAL(rows[0].win_len_ns, W);
	CU_ASSERT_EQUAL(rows[0].value, 7);
	CU_ASSERT_EQUAL(rows[1].win_start_ns, T0 + W);
	CU_ASSERT_EQUAL(rows[1].value, 1);
	st_rows_free(rows);
	q.since_ns = T0 + W;
	CU_ASSERT_EQUAL_FATAL(st_query_splits(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 1);
	st_rows_free(rows);
	CU_ASSERT_EQUAL(st_add_split(db, "b", T0, W, (uint64_t)INT64_MAX), RM_EINVAL); /* overflow */
	CU_ASSERT_EQUAL(st_add_split(db, "", T0, W, 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_split(db, "b", T0, 0, 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_query_splits(db, NULL, &rows, &n), RM_EINVAL);
	st_close(db);
}

static void test_refuse_newer(void)
{
	char path[512];
	st_db *db = NULL;

	CU_ASSERT_EQUAL_FATAL(st_open(&db, FRESH(path, "newer"), 0), RM_OK);
	st_close(db);
	raw_exec(path, "UPDATE schema_version SET version = version + 1");
	db = (st_db *)1;
	CU_ASSERT_EQUAL(st_open(&db, path, 0), RM_EVERSION);
	CU_ASSERT_PTR_NULL(db);
	CU_ASSERT_EQUAL(st_open(&db, path, ST_OPEN_READONLY), RM_EVERSION);
	CU_ASSERT_PTR_NULL(db);
	/* Refusal left the file as it was. */
	CU_ASSERT_EQUAL(raw_int(path, "SELECT version FROM schema_version"), ST_SCHEMA_VERSION + 1);
}

static void test_refuse_foreign_and_garbage(void)
{
	char path[512];
	st_db *db = NULL;
	FILE *f;

	raw_exec(FRESH(path, "foreign"), "CREATE TABLE something (x INTEGER)");
	CU_ASSERT_EQUAL(st_open(&db, path, 0), RM_EVERSION);
	CU_ASSERT_PTR_NULL(db);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM sqlite_master"), 1);

	f = fopen(FRESH(path, "garbage"), "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "this is not an sqlite database, not even close; padding padding padding "
		   "padding padding padding padding padding padding\n");
	fclose(f);
	CU_ASSERT_EQUAL(st_open(&db, path, 0), RM_ESQL);
	CU_ASSERT_PTR_NULL(db);
	CU_ASSERT_EQUAL(st_open(&db, path, ST_OPEN_READONLY), RM_ESQL);
	CU_ASSERT_EQUAL(st_open(&db, rm_test_tmpdir(), 0), RM_EIO);
}

static void test_readonly(void)
{
	char path[512];
	struct stat sb;
	st_db *db = (st_db *)1;
	uint64_t seq;

	CU_ASSERT_EQUAL(st_open(&db, FRESH(path, "missing"), ST_OPEN_READONLY), RM_EIO);
	CU_ASSERT_PTR_NULL(db);
	CU_ASSERT_NOT_EQUAL(stat(path, &sb), 0); /* not created */

	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_peer_set(db, "n", 1, 5), RM_OK);
	st_close(db);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, ST_OPEN_READONLY), RM_OK);
	CU_ASSERT_EQUAL(st_peer_get(db, "n", 1, &seq), RM_OK);
	CU_ASSERT_EQUAL(seq, 5);
	CU_ASSERT_EQUAL(st_add_usage(db, "s", 0, W, ST_R_CPU, "c", 1), RM_EPERM);
	CU_ASSERT_EQUAL(st_add_total(db, "s", 0, W, ST_R_CPU, 1, 0), RM_EPERM);
	CU_ASSERT_EQUAL(st_peer_set(db, "n", 1, 6), RM_EPERM);
	st_close(db);
	CU_ASSERT_EQUAL(st_open(&db, "", 0), RM_EINVAL);
	CU_ASSERT_EQUAL(st_open(NULL, path, 0), RM_EINVAL);
	CU_ASSERT_EQUAL(st_open(&db, path, 0x80), RM_EINVAL);
	st_close(NULL);
}

static void test_additive_upserts(void)
{
	st_db *db = open_new("additive");
	struct st_query q = all();
	struct st_row *rows;
	uint64_t deltas[] = { 5, 1000, 0, 123456789 }, sum = 0, tot = 0, cap = 0;
	size_t n, i;
	const struct st_row *r;

	for (i = 0; i < sizeof(deltas) / sizeof(deltas[0]); i++) {
		sum += deltas[i];
		tot += 2 * deltas[i];
		cap += 3 * deltas[i];
		CU_ASSERT_EQUAL(st_add_usage(db, "srv", T0, W, ST_R_NET_TX, "web", deltas[i]), RM_OK);
		CU_ASSERT_EQUAL(st_add_total(db, "srv", T0, W, ST_R_NET_TX, 2 * deltas[i],
					     3 * deltas[i]), RM_OK);
		CU_ASSERT_EQUAL(st_add_unacct(db, "srv", T0, W, ST_R_NET_TX, "unsegmented",
					      deltas[i]), RM_OK);
	}
	CU_ASSERT_EQUAL_FATAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	r = find(rows, n, "srv", ST_R_NET_TX, "web");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL(r->value, sum);
	CU_ASSERT_EQUAL(r->total, tot);
	CU_ASSERT_EQUAL(r->capacity, cap);
	st_rows_free(rows);
	CU_ASSERT_EQUAL_FATAL(st_query_unacct(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1); /* V = tot - sum = sum = the reason: nothing unexplained */
	CU_ASSERT_STRING_EQUAL(rows[0].reason, "unsegmented");
	CU_ASSERT_EQUAL(rows[0].value, sum);
	st_rows_free(rows);
	st_close(db);
}

static void test_overflow_refused(void)
{
	st_db *db = open_new("overflow");
	struct st_query q = all();
	struct st_row *rows;
	size_t n;

	CU_ASSERT_EQUAL(st_add_usage(db, "s", T0, W, ST_R_CPU, "c", (uint64_t)INT64_MAX), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s", T0, W, ST_R_CPU, "c", 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_usage(db, "s", T0, W, ST_R_CPU, "c", (uint64_t)INT64_MAX + 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_total(db, "s", T0, W, ST_R_CPU, 0, UINT64_MAX), RM_EINVAL);
	CU_ASSERT_EQUAL_FATAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(rows[0].value, (uint64_t)INT64_MAX); /* unchanged by the refused add */
	CU_ASSERT_EQUAL(rows[1].residual, -INT64_MAX);       /* no total: V = 0 - sum */
	CU_ASSERT_EQUAL(rows[1].value, 0);
	st_rows_free(rows);
	/* A second CE makes the sum over CEs overflow: an error, not a float. */
	CU_ASSERT_EQUAL(st_add_usage(db, "s", T0, W, ST_R_CPU, "d", (uint64_t)INT64_MAX), RM_OK);
	CU_ASSERT_EQUAL(st_query_usage(db, &q, &rows, &n), RM_ESQL);
	st_close(db);
}

struct ce_use {
	const char *ce;
	uint64_t v;
};

static void test_v_exact(void)
{
	st_db *db = open_new("vexact");
	struct ce_use u[] = { { "db", 300 }, { "web", 900 }, { "cache", 50 }, { "web", 100 } };
	uint64_t U = 2000, sum = 0;
	struct st_query q = all();
	struct st_row *rows;
	size_t n, i;
	const struct st_row *r;

	for (i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
		CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0 + (int64_t)i % 2 * W, W, ST_R_CPU, u[i].ce,
					     u[i].v), RM_OK);
		sum += u[i].v;
	}
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0, W, ST_R_CPU, U / 2, 4 * W), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0 + W, W, ST_R_CPU, U - U / 2, 4 * W), RM_OK);
	/* Another server and resource must not leak into s1/cpu. */
	CU_ASSERT_EQUAL(st_add_usage(db, "s2", T0, W, ST_R_CPU, "web", 7), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0, W, ST_R_DISK_READ, "web", 4096), RM_OK);

	CU_ASSERT_EQUAL_FATAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	/* s1/cpu: 3 CEs + V; s1/disk_read: web + V; s2/cpu: web + V */
	CU_ASSERT_EQUAL_FATAL(n, 8);
	{
		uint64_t csum = 0;
		int64_t v = 0;

		for (i = 0; i < n; i++) {
			if (strcmp(rows[i].server, "s1") || rows[i].resource != ST_R_CPU)
				continue;
			CU_ASSERT_EQUAL(rows[i].total, U);
			CU_ASSERT_EQUAL(rows[i].capacity, 8 * W);
			if (!strcmp(rows[i].ce, ST_CE_UNACCOUNTABLE))
				v = rows[i].residual;
			else
				csum += rows[i].value;
		}
		CU_ASSERT_EQUAL(csum, sum);
		CU_ASSERT_EQUAL((int64_t)csum + v, (int64_t)U); /* sum_c U_c + V = U exactly */
	}
	/* Sort: s1 before s2, cpu before disk_read, value desc, V last. */
	CU_ASSERT_STRING_EQUAL(rows[0].ce, "web");
	CU_ASSERT_EQUAL(rows[0].value, 1000);
	CU_ASSERT_STRING_EQUAL(rows[1].ce, "db");
	CU_ASSERT_STRING_EQUAL(rows[2].ce, "cache");
	CU_ASSERT_STRING_EQUAL(rows[3].ce, ST_CE_UNACCOUNTABLE);
	CU_ASSERT_EQUAL(rows[3].value, U - sum);
	CU_ASSERT_EQUAL(rows[4].resource, ST_R_DISK_READ);
	CU_ASSERT_STRING_EQUAL(rows[5].ce, ST_CE_UNACCOUNTABLE);
	CU_ASSERT_EQUAL(rows[5].residual, -4096); /* no total for disk_read: over-attributed */
	CU_ASSERT_EQUAL(rows[5].value, 0);
	CU_ASSERT_STRING_EQUAL(rows[6].server, "s2");
	st_rows_free(rows);

	/* A real CE: only its rows, no V. */
	q.ce = "web";
	CU_ASSERT_EQUAL_FATAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	for (i = 0; i < n; i++)
		CU_ASSERT_STRING_EQUAL(rows[i].ce, "web");
	r = find(rows, n, "s1", ST_R_CPU, "web");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL(r->total, U);
	st_rows_free(rows);
	/* Only V. */
	q.ce = ST_CE_UNACCOUNTABLE;
	q.server = "s1";
	q.resource = ST_R_CPU;
	CU_ASSERT_EQUAL_FATAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(rows[0].residual, (int64_t)(U - sum));
	st_rows_free(rows);
	/* Unknown CE or server: zero rows, no error. */
	q.ce = "nobody";
	rows = (struct st_row *)1;
	CU_ASSERT_EQUAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_PTR_NULL(rows);
	q.ce = NULL;
	q.server = "nowhere";
	CU_ASSERT_EQUAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	st_close(db);
}

static void test_reason_breakdown(void)
{
	st_db *db = open_new("reasons");
	struct st_query q = all();
	struct st_row *rows;
	const struct st_row *r;
	uint64_t U = 10000, uc = 6000, unseg = 2500, lost = 700;
	size_t n;

	/* cpu: V = 4000, reasons 3200: 800 unexplained. */
	CU_ASSERT_EQUAL(st_add_total(db, "s", T0, W, ST_R_CPU, U, 0), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s", T0, W, ST_R_CPU, "a", uc), RM_OK);
	CU_ASSERT_EQUAL(st_add_unacct(db, "s", T0, W, ST_R_CPU, "unsegmented", unseg), RM_OK);
	CU_ASSERT_EQUAL(st_add_unacct(db, "s", T0, W, ST_R_CPU, "lost", lost), RM_OK);
	/* net_rx: V = 100 but reasons claim 150: over-count -50. */
	CU_ASSERT_EQUAL(st_add_total(db, "s", T0, W, ST_R_NET_RX, 1000, 0), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s", T0, W, ST_R_NET_RX, "a", 900), RM_OK);
	CU_ASSERT_EQUAL(st_add_unacct(db, "s", T0, W, ST_R_NET_RX, "unsegmented", 150), RM_OK);
	/* net_tx: balanced exactly, so no unexplained row. */
	CU_ASSERT_EQUAL(st_add_total(db, "s", T0, W, ST_R_NET_TX, 500, 0), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s", T0, W, ST_R_NET_TX, "a", 400), RM_OK);
	CU_ASSERT_EQUAL(st_add_unacct(db, "s", T0, W, ST_R_NET_TX, "unsegmented", 100), RM_OK);
	/* disk_write: fully attributed, no rows at all. */
	CU_ASSERT_EQUAL(st_add_total(db, "s", T0, W, ST_R_DISK_WRITE, 64, 0), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s", T0, W, ST_R_DISK_WRITE, "a", 64), RM_OK);

	CU_ASSERT_EQUAL_FATAL(st_query_unacct(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 3 + 2 + 1);
	/* cpu: unsegmented (larger) first, then lost, unexplained last. */
	CU_ASSERT_STRING_EQUAL(rows[0].reason, "unsegmented");
	CU_ASSERT_EQUAL(rows[0].value, unseg);
	CU_ASSERT_EQUAL(rows[0].total, U);
	CU_ASSERT_STRING_EQUAL(rows[1].reason, "lost");
	CU_ASSERT_STRING_EQUAL(rows[2].reason, ST_REASON_UNEXPLAINED);
	CU_ASSERT_EQUAL(rows[2].residual, (int64_t)(U - uc - unseg - lost));
	CU_ASSERT_EQUAL(rows[2].value, U - uc - unseg - lost);
	r = find_reason(rows, n, "s", ST_R_NET_RX, ST_REASON_UNEXPLAINED);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL(r->residual, 1000 - 900 - 150);
	CU_ASSERT_EQUAL(r->value, 0);
	CU_ASSERT_PTR_NULL(find_reason(rows, n, "s", ST_R_NET_TX, ST_REASON_UNEXPLAINED));
	CU_ASSERT_PTR_NOT_NULL(find_reason(rows, n, "s", ST_R_NET_TX, "unsegmented"));
	CU_ASSERT_PTR_NULL(find_reason(rows, n, "s", ST_R_DISK_WRITE, ST_REASON_UNEXPLAINED));
	st_rows_free(rows);

	/* The reserved names are refused on write. */
	CU_ASSERT_EQUAL(st_add_unacct(db, "s", T0, W, ST_R_CPU, ST_REASON_UNEXPLAINED, 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_usage(db, "s", T0, W, ST_R_CPU, ST_CE_UNACCOUNTABLE, 1), RM_EINVAL);
	st_close(db);
}

static void test_identity(void)
{
	st_db *db = open_new("identity");
	struct st_query q = all();
	struct st_row *rows;
	uint64_t checked;
	size_t n;
	int w;

	/* Four balanced cpu windows: U = U_c + reasons. */
	for (w = 0; w < 4; w++) {
		uint64_t a = 100 * (uint64_t)(w + 1), b = 7 * (uint64_t)w, unseg = 13;

		CU_ASSERT_EQUAL(st_add_usage(db, "s", T0 + w * W, W, ST_R_CPU, "a", a), RM_OK);
		CU_ASSERT_EQUAL(st_add_usage(db, "s", T0 + w * W, W, ST_R_CPU, "b", b), RM_OK);
		CU_ASSERT_EQUAL(st_add_unacct(db, "s", T0 + w * W, W, ST_R_CPU, "unsegmented", unseg),
				RM_OK);
		CU_ASSERT_EQUAL(st_add_total(db, "s", T0 + w * W, W, ST_R_CPU, a + b + unseg, 2 * W),
				RM_OK);
	}
	CU_ASSERT_EQUAL(st_count_windows(db, &q, &checked), RM_OK);
	CU_ASSERT_EQUAL(checked, 4);
	CU_ASSERT_EQUAL(st_query_identity(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_PTR_NULL(rows);

	/* A late delta to one window's total, with nothing explaining it. */
	CU_ASSERT_EQUAL(st_add_total(db, "s", T0 + 2 * W, W, ST_R_CPU, 9, 0), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_query_identity(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_STRING_EQUAL(rows[0].server, "s");
	CU_ASSERT_EQUAL(rows[0].resource, ST_R_CPU);
	CU_ASSERT_EQUAL(rows[0].win_start_ns, T0 + 2 * W);
	CU_ASSERT_EQUAL(rows[0].win_len_ns, W);
	CU_ASSERT_EQUAL(rows[0].residual, 9);
	CU_ASSERT_EQUAL(rows[0].value, 300 + 14);
	CU_ASSERT_EQUAL(rows[0].total, 300 + 14 + 13 + 9);
	st_rows_free(rows);
	/* A window with usage but no total at all is unbalanced too (negative). */
	CU_ASSERT_EQUAL(st_add_usage(db, "s", T0 + 9 * W, W, ST_R_NET_RX, "a", 5), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_query_identity(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(rows[1].residual, -5);
	st_rows_free(rows);
	/* Filters apply: the range before the bad windows balances. */
	q.until_ns = T0 + 2 * W;
	CU_ASSERT_EQUAL(st_query_identity(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(st_count_windows(db, &q, &checked), RM_OK);
	CU_ASSERT_EQUAL(checked, 2);
	st_close(db);
}

static void test_peer_roundtrip(void)
{
	char path[512];
	st_db *db = NULL;
	uint64_t seq = 1, inst_big = UINT64_MAX - 3, seq_big = UINT64_MAX;

	CU_ASSERT_EQUAL_FATAL(st_open(&db, FRESH(path, "peer"), 0), RM_OK);
	CU_ASSERT_EQUAL(st_peer_get(db, "node-a", 42, &seq), RM_OK);
	CU_ASSERT_EQUAL(seq, 0);
	CU_ASSERT_EQUAL(st_peer_set(db, "node-a", 42, 1), RM_OK);
	CU_ASSERT_EQUAL(st_peer_set(db, "node-a", 42, 2), RM_OK);
	CU_ASSERT_EQUAL(st_peer_set(db, "node-a", 43, 17), RM_OK);
	CU_ASSERT_EQUAL(st_peer_set(db, "node-b", inst_big, seq_big), RM_OK);
	st_close(db);

	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_peer_get(db, "node-a", 42, &seq), RM_OK);
	CU_ASSERT_EQUAL(seq, 2);
	CU_ASSERT_EQUAL(st_peer_get(db, "node-a", 43, &seq), RM_OK);
	CU_ASSERT_EQUAL(seq, 17);
	CU_ASSERT_EQUAL(st_peer_get(db, "node-b", inst_big, &seq), RM_OK);
	CU_ASSERT_EQUAL(seq, seq_big);
	CU_ASSERT_EQUAL(st_peer_get(db, "node-b", 42, &seq), RM_OK);
	CU_ASSERT_EQUAL(seq, 0);
	CU_ASSERT_EQUAL(st_peer_get(db, "", 42, &seq), RM_EINVAL);
	CU_ASSERT_EQUAL(st_peer_get(db, "node-a", 42, NULL), RM_EINVAL);
	st_close(db);
}

static void test_transactions(void)
{
	char path[512];
	st_db *db = NULL;
	struct st_query q = all();
	struct st_row *rows;
	uint64_t seq;
	size_t n;

	CU_ASSERT_EQUAL_FATAL(st_open(&db, FRESH(path, "tx"), 0), RM_OK);
	CU_ASSERT_EQUAL(st_commit(db), RM_ESTATE);
	st_rollback(db); /* no-op */
	CU_ASSERT_EQUAL_FATAL(st_begin(db), RM_OK);
	CU_ASSERT_EQUAL(st_begin(db), RM_ESTATE);
	CU_ASSERT_EQUAL(st_add_usage(db, "s", T0, W, ST_R_CPU, "a", 10), RM_OK);
	CU_ASSERT_EQUAL(st_peer_set(db, "n", 1, 1), RM_OK);
	st_rollback(db);
	CU_ASSERT_EQUAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(st_peer_get(db, "n", 1, &seq), RM_OK);
	CU_ASSERT_EQUAL(seq, 0);

	CU_ASSERT_EQUAL_FATAL(st_begin(db), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s", T0, W, ST_R_CPU, "a", 10), RM_OK);
	CU_ASSERT_EQUAL(st_peer_set(db, "n", 1, 1), RM_OK);
	CU_ASSERT_EQUAL(st_commit(db), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 2);
	st_rows_free(rows);
	CU_ASSERT_EQUAL(st_peer_get(db, "n", 1, &seq), RM_OK);
	CU_ASSERT_EQUAL(seq, 1);
	/* Closing with an open transaction rolls it back. */
	CU_ASSERT_EQUAL_FATAL(st_begin(db), RM_OK);
	CU_ASSERT_EQUAL(st_peer_set(db, "n", 1, 2), RM_OK);
	st_close(db);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_peer_get(db, "n", 1, &seq), RM_OK);
	CU_ASSERT_EQUAL(seq, 1);
	st_close(db);
}

static void test_two_handles(void)
{
	char path[512];
	st_db *a = NULL, *b = NULL;
	struct st_query q = all();
	struct st_row *rows;
	size_t n;

	FRESH(path, "two");
	CU_ASSERT_EQUAL_FATAL(st_open(&a, path, 0), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_open(&b, path, ST_OPEN_READONLY), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_begin(a), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(a, "s", T0, W, ST_R_CPU, "a", 10), RM_OK);
	/* WAL: the reader is not blocked and sees the last commit. */
	CU_ASSERT_EQUAL(st_query_usage(b, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(st_commit(a), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_query_usage(b, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 2);
	st_rows_free(rows);
	st_close(b);
	st_close(a);
}

static void test_time_range(void)
{
	st_db *db = open_new("range");
	struct st_query q = all();
	struct st_row *rows;
	uint64_t expect = 0;
	size_t n;
	int w;

	/* Windows w = 0..9 with usage 1 << w: a range sum is a bit pattern. */
	for (w = 0; w < 10; w++)
		CU_ASSERT_EQUAL(st_add_usage(db, "s", T0 + w * W, W, ST_R_NET_RX, "a", 1ULL << w),
				RM_OK);
	/* [T0 + 3W, T0 + 7W): windows 3..6; a window starting at until is out. */
	q.since_ns = T0 + 3 * W;
	q.until_ns = T0 + 7 * W;
	for (w = 3; w < 7; w++)
		expect |= 1ULL << w;
	q.ce = "a";
	CU_ASSERT_EQUAL_FATAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(rows[0].value, expect);
	CU_ASSERT_EQUAL(rows[0].win_start_ns, 0);
	st_rows_free(rows);
	/* A window is selected by its start: since inside window 3 drops it. */
	q.since_ns = T0 + 3 * W + 1;
	CU_ASSERT_EQUAL_FATAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(rows[0].value, expect & ~(1ULL << 3));
	st_rows_free(rows);
	/* Empty and inverted ranges. */
	q.since_ns = q.until_ns = T0;
	CU_ASSERT_EQUAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	q.until_ns = T0 - 1;
	CU_ASSERT_EQUAL(st_query_usage(db, &q, &rows, &n), RM_EINVAL);
	/* The resource filter. */
	q = all();
	q.resource = ST_R_NET_TX;
	CU_ASSERT_EQUAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	st_close(db);
}

static void test_per_window(void)
{
	st_db *db = open_new("perwin");
	struct st_query q = all();
	struct st_row *rows;
	size_t n, i;
	int w;

	for (w = 0; w < 3; w++) {
		CU_ASSERT_EQUAL(st_add_usage(db, "s", T0 + w * W, W, ST_R_CPU, "a", 10 * (w + 1)), RM_OK);
		CU_ASSERT_EQUAL(st_add_total(db, "s", T0 + w * W, W, ST_R_CPU, 100, 2 * W), RM_OK);
	}
	q.per_window = 1;
	CU_ASSERT_EQUAL_FATAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 6);
	for (i = 0; i < n; i++) {
		int64_t wi = (int64_t)i / 2;

		CU_ASSERT_EQUAL(rows[i].win_start_ns, T0 + wi * W);
		CU_ASSERT_EQUAL(rows[i].win_len_ns, W);
		CU_ASSERT_EQUAL(rows[i].total, 100);
		CU_ASSERT_EQUAL(rows[i].capacity, 2 * W);
		if (i % 2 == 0) {
			CU_ASSERT_STRING_EQUAL(rows[i].ce, "a");
			CU_ASSERT_EQUAL(rows[i].value, 10 * (uint64_t)(wi + 1));
		} else {
			CU_ASSERT_STRING_EQUAL(rows[i].ce, ST_CE_UNACCOUNTABLE);
			CU_ASSERT_EQUAL(rows[i].residual, 100 - 10 * (wi + 1));
		}
	}
	st_rows_free(rows);
	CU_ASSERT_EQUAL_FATAL(st_query_unacct(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	for (i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(rows[i].win_start_ns, T0 + (int64_t)i * W);
		CU_ASSERT_STRING_EQUAL(rows[i].reason, ST_REASON_UNEXPLAINED);
		CU_ASSERT_EQUAL(rows[i].residual, 100 - 10 * ((int64_t)i + 1));
	}
	st_rows_free(rows);
	st_close(db);
}

static void test_argument_validation(void)
{
	st_db *db = open_new("args");
	char long_name[ST_NAME_MAX + 2];
	struct st_query q = all();
	struct st_row *rows;
	struct st_node n = { .node = "" };
	struct st_node_rec rec;
	size_t nr;

	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	CU_ASSERT_EQUAL(st_add_usage(NULL, "s", 0, W, ST_R_CPU, "a", 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_usage(db, NULL, 0, W, ST_R_CPU, "a", 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_usage(db, "", 0, W, ST_R_CPU, "a", 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_usage(db, long_name, 0, W, ST_R_CPU, "a", 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_usage(db, "s", 0, W, ST_R_CPU, long_name, 1), RM_EINVAL);
	long_name[ST_NAME_MAX] = '\0'; /* exactly the limit is fine */
	CU_ASSERT_EQUAL(st_add_usage(db, long_name, 0, W, ST_R_CPU, long_name, 1), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s", 0, W, ST_R_COUNT, "a", 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_usage(db, "s", 0, 0, ST_R_CPU, "a", 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_usage(db, "s", INT64_MAX - 5, W, ST_R_CPU, "a", 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_unacct(db, "s", 0, W, ST_R_CPU, long_name, 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_total(db, "s", 0, -W, ST_R_CPU, 1, 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_node_seen(db, &n), RM_EINVAL);
	CU_ASSERT_EQUAL(st_node_seen(db, NULL), RM_EINVAL);
	CU_ASSERT_EQUAL(st_node_get(db, "unknown", &rec), RM_ENOENT);
	CU_ASSERT_EQUAL(st_query_usage(db, NULL, &rows, &nr), RM_EINVAL);
	CU_ASSERT_EQUAL(st_query_usage(db, &q, NULL, &nr), RM_EINVAL);
	q.resource = ST_R_COUNT;
	CU_ASSERT_EQUAL(st_query_unacct(db, &q, &rows, &nr), RM_EINVAL);
	q.resource = -1;
	q.server = "";
	CU_ASSERT_EQUAL(st_query_identity(db, &q, &rows, &nr), RM_EINVAL);
	q.server = NULL;
	q.ce = long_name;
	CU_ASSERT_EQUAL(st_query_usage(db, &q, &rows, &nr), RM_OK); /* 63 bytes: valid, it exists */
	CU_ASSERT_EQUAL(nr, 1);
	st_rows_free(rows);
	st_rows_free(NULL);
	st_close(db);
}

static void test_node_metadata(void)
{
	st_db *db = open_new("nodes");
	struct st_node n = { .node = "n1", .backend = "ebpf", .hostname = "h",
			     .window_ns = W, .clock_offset_ns = 123, .ncpu = 8, .seen_unix_ns = T0 };
	struct st_node_rec rec;

	CU_ASSERT_EQUAL(st_node_seen(db, &n), RM_OK);
	n.seen_unix_ns = T0 - SEC; /* late, older report */
	n.ncpu = 16;
	n.hostname = NULL;
	CU_ASSERT_EQUAL(st_node_seen(db, &n), RM_OK);
	n.seen_unix_ns = T0 + SEC;
	CU_ASSERT_EQUAL(st_node_seen(db, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_node_get(db, "n1", &rec), RM_OK);
	CU_ASSERT_STRING_EQUAL(rec.node, "n1");
	CU_ASSERT_STRING_EQUAL(rec.backend, "ebpf");
	CU_ASSERT_STRING_EQUAL(rec.hostname, "");
	CU_ASSERT_EQUAL(rec.ncpu, 16);
	CU_ASSERT_EQUAL(rec.window_ns, W);
	CU_ASSERT_EQUAL(rec.clock_offset_ns, 123);
	CU_ASSERT_EQUAL(rec.first_seen_unix_ns, T0 - SEC);
	CU_ASSERT_EQUAL(rec.last_seen_unix_ns, T0 + SEC);
	st_close(db);
}

static CU_TestInfo cases[] = {
	{ "resource names round trip", test_resource_names },
	{ "creates the schema in an empty file", test_create_from_empty },
	{ "migrates a v1 file keeping its data", test_migrate_from_v1 },
	{ "migrates a v2 file to v3 (held parts, splits)", test_migrate_from_v2 },
	{ "held parts: put, resolve, delete, load in order, reopen", test_held_parts },
	{ "split counts: additive, per server and per window", test_splits },
	{ "refuses a newer schema version", test_refuse_newer },
	{ "refuses foreign and garbage files", test_refuse_foreign_and_garbage },
	{ "read-only open", test_readonly },
	{ "writes are additive upserts", test_additive_upserts },
	{ "int64 overflow is refused", test_overflow_refused },
	{ "V = U - sum U_c exactly", test_v_exact },
	{ "reason breakdown with unexplained residual", test_reason_breakdown },
	{ "identity query finds unbalanced windows", test_identity },
	{ "peer seq round trip across reopen", test_peer_roundtrip },
	{ "transactions", test_transactions },
	{ "two handles on one file", test_two_handles },
	{ "time range filtering", test_time_range },
	{ "per-window rows", test_per_window },
	{ "argument validation", test_argument_validation },
	{ "node metadata", test_node_metadata },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("st", cases)
