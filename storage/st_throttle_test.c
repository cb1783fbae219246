/*
 * st_throttle_test.c - the throttle table on a real SQLite file: ids
 * assigned and kept, duplicates refused, state changes, queries by state
 * (and "active"), server, CE, time and limit, bad input, and the migration
 * of a v3 file.
 */
#include <sqlite3.h>
#include <string.h>

#include "rm_test.h"
#include "rm_err.h"
#include "st_int.h"
#include "st_throttle.h"

static void fresh(char *path, size_t len, const char *name)
{
	snprintf(path, len, "%s/%s.db", rm_test_tmpdir(), name);
	unlink(path);
}

static void mk(struct st_throttle *t, const char *server, const char *ce, uint32_t cap, const char *state)
{
	memset(t, 0, sizeof(*t));
	t->created_ns = 1000;
	t->expires_ns = 5000;
	snprintf(t->who, sizeof(t->who), "policy:overload");
	snprintf(t->server, sizeof(t->server), "%s", server);
	snprintf(t->ce, sizeof(t->ce), "%s", ce);
	snprintf(t->resource, sizeof(t->resource), "cpu");
	t->cap_permille = cap;
	snprintf(t->why, sizeof(t->why), "c2 on db1: share 35.0%% above its cap of 30.0%%");
	snprintf(t->figures, sizeof(t->figures), "win=12 share=350 util=900 smooth=870");
	snprintf(t->state, sizeof(t->state), "%s", state);
}

static void test_add_get_state(void)
{
	char path[512];
	st_db *db = NULL;
	struct st_throttle t, g;

	fresh(path, sizeof(path), "thr");
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	mk(&t, "db1", "c2", 300, "pending");
	CU_ASSERT_EQUAL(st_throttle_add(db, &t), RM_OK);
	CU_ASSERT_EQUAL(t.id, 1);
	mk(&t, "db1", "c3", 200, "requested");
	CU_ASSERT_EQUAL(st_throttle_add(db, &t), RM_OK);
	CU_ASSERT_EQUAL(t.id, 2);
	t.id = 10;
	CU_ASSERT_EQUAL(st_throttle_add(db, &t), RM_OK);
	CU_ASSERT_EQUAL(t.id, 10);
	CU_ASSERT_EQUAL(st_throttle_add(db, &t), RM_EEXIST);
	t.id = 0;
	CU_ASSERT_EQUAL(st_throttle_add(db, &t), RM_OK);
	CU_ASSERT_EQUAL(t.id, 11);
	CU_ASSERT_EQUAL(st_throttle_get(db, 1, &g), RM_OK);
	CU_ASSERT_STRING_EQUAL(g.who, "policy:overload");
	CU_ASSERT_STRING_EQUAL(g.server, "db1");
	CU_ASSERT_STRING_EQUAL(g.ce, "c2");
	CU_ASSERT_STRING_EQUAL(g.resource, "cpu");
	CU_ASSERT_EQUAL(g.cap_permille, 300);
	CU_ASSERT_EQUAL(g.expires_ns, 5000);
	CU_ASSERT_STRING_EQUAL(g.figures, "win=12 share=350 util=900 smooth=870");
	CU_ASSERT_STRING_EQUAL(g.state, "pending");
	CU_ASSERT_EQUAL(st_throttle_set_state(db, 2, "refused", "unknown CE 'c3'", 2000), RM_OK);
	CU_ASSERT_EQUAL(st_throttle_get(db, 2, &g), RM_OK);
	CU_ASSERT_STRING_EQUAL(g.state, "refused");
	CU_ASSERT_STRING_EQUAL(g.error, "unknown CE 'c3'");
	CU_ASSERT_EQUAL(g.updated_ns, 2000);
	CU_ASSERT_EQUAL(g.created_ns, 1000);
	CU_ASSERT_EQUAL(st_throttle_set_state(db, 99, "sent", NULL, 1), RM_ENOENT);
	CU_ASSERT_EQUAL(st_throttle_set_state(db, 1, "bogus", NULL, 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_throttle_get(db, 99, &g), RM_ENOENT);
	/* bad input */
	mk(&t, "", "c2", 300, "pending");
	CU_ASSERT_EQUAL(st_throttle_add(db, &t), RM_EINVAL);
	mk(&t, "db1", "c2", 1001, "pending");
	CU_ASSERT_EQUAL(st_throttle_add(db, &t), RM_EINVAL);
	mk(&t, "db1", "c2", 100, "nope");
	CU_ASSERT_EQUAL(st_throttle_add(db, &t), RM_EINVAL);
	st_close(db);
}

static void test_list(void)
{
	char path[512];
	st_db *db = NULL;
	struct st_throttle t, *rows = NULL;
	struct st_throttle_query q = { 0 };
	static const char *const states[] = { "pending", "sent", "applied", "refused", "expired" };
	size_t n, i;

	fresh(path, sizeof(path), "list");
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	for (i = 0; i < 5; i++) {
		mk(&t, i < 3 ? "db1" : "web", i % 2 ? "c2" : "c3", 100, states[i]);
		t.created_ns = 1000 + (int64_t)i;
		CU_ASSERT_EQUAL(st_throttle_add(db, &t), RM_OK);
	}
	CU_ASSERT_EQUAL(st_throttle_list(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 5);
	CU_ASSERT_EQUAL(rows[0].id, 1);
	free(rows);
	q.state = "active";
	CU_ASSERT_EQUAL(st_throttle_list(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 3);
	free(rows);
	q.state = "refused";
	CU_ASSERT_EQUAL(st_throttle_list(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(rows[0].id, 4);
	free(rows);
	q.state = NULL;
	q.server = "db1";
	q.ce = "c3";
	CU_ASSERT_EQUAL(st_throttle_list(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 2);
	free(rows);
	q.server = q.ce = NULL;
	q.since_ns = 1003;
	CU_ASSERT_EQUAL(st_throttle_list(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 2);
	free(rows);
	q.since_ns = 0;
	q.limit = 2;
	CU_ASSERT_EQUAL(st_throttle_list(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(rows[0].id, 5);   /* newest first */
	CU_ASSERT_EQUAL(rows[1].id, 4);
	free(rows);
	q.state = "whatever";
	CU_ASSERT_EQUAL(st_throttle_list(db, &q, &rows, &n), RM_EINVAL);
	st_close(db);
}

static void test_migrate_v3(void)
{
	char path[512];
	sqlite3 *h;
	st_db *db = NULL;
	struct st_throttle t;
	int before;

	fresh(path, sizeof(path), "v3");
	CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &h), SQLITE_OK);
	CU_ASSERT_EQUAL_FATAL(st_schema_migrate(h, path, 3, 0, &before), RM_OK);
	sqlite3_close(h);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_schema_version(db), ST_SCHEMA_VERSION);
	mk(&t, "db1", "c2", 300, "pending");
	CU_ASSERT_EQUAL(st_throttle_add(db, &t), RM_OK);
	st_close(db);
}

static CU_TestInfo cases[] = {
	{ "commands are stored with ids, states and reasons", test_add_get_state },
	{ "commands are listed by state, server, CE, time, newest first with a limit", test_list },
	{ "a v3 file gains the throttle table", test_migrate_v3 },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("st_throttle", cases)
