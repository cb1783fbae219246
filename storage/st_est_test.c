/*
 * st_est_test.c - the estimators' storage (st_est.h) on real SQLite files:
 * migration from v3 keeps the data, additive inputs, the windows the
 * estimators read (only those with a CPU total, inputs joined, bounded by
 * the window's end), the latest/back/last lookups, replacing estimates,
 * unsolved windows, and st_query_est's rows in st_query_usage's shape.
 */
#include <stdint.h>
#include <unistd.h>

#include "rm_err.h"
#include "rm_test.h"
#include "st.h"
#include "st_est.h"
#include "st_int.h"
#include "banned.h"

#define SEC 1000000000LL
#define W SEC
#define T0 (1700000000LL * SEC)

static st_db *open_new(const char *name, char *path, size_t len)
{
	st_db *db = NULL;

	snprintf(path, len, "%s/%s.db", rm_test_tmpdir(), name);
	unlink(path);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	return db;
}

static void test_migrate_from_v3(void)
{
	char path[512];
	sqlite3 *h;
	st_db *db = NULL;
	struct st_query q = { INT64_MIN, INT64_MAX, NULL, NULL, -1, 0 };
	struct st_row *rows;
	size_t n;
	int before;

	snprintf(path, sizeof(path), "%s/v3.db", rm_test_tmpdir());
	unlink(path);
	CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &h), SQLITE_OK);
	CU_ASSERT_EQUAL_FATAL(st_schema_migrate(h, path, 3, 0, &before), RM_OK);
	CU_ASSERT_EQUAL(sqlite3_exec(h, "INSERT INTO usage VALUES ('s1', 0, 1000, 10, 'ce1', 77);"
					"INSERT INTO total VALUES ('s1', 0, 1000, 10, 100, 400);",
				     NULL, NULL, NULL),
			SQLITE_OK);
	sqlite3_close(h);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_schema_version(db), 4);
	CU_ASSERT_EQUAL_FATAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT_EQUAL(rows[0].value, 77);
	st_rows_free(rows);
	/* the new tables work */
	CU_ASSERT_EQUAL(st_add_est_input(db, "s1", 1000, 10, "ce1", 3, 30, 300), RM_OK);
	CU_ASSERT_EQUAL(st_est_put(db, "s1", ST_EST_LR, 1000, 10, 1, (const char *[]){ "ce1" },
				   (uint64_t[]){ 60 }, 1),
			RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_query_est(db, &q, ST_EST_LR, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(rows[0].value, 60);
	CU_ASSERT_EQUAL(rows[1].residual, 40);
	st_rows_free(rows);
	st_close(db);
}

struct seen {
	int n;
	struct st_est_window w[8];
	struct st_est_ce ce[8][4];
};

static int collect(void *arg, const struct st_est_window *w)
{
	struct seen *s = arg;
	size_t i;

	if (s->n >= 8 || w->n > 4)
		return RM_EFULL;
	s->w[s->n] = *w;
	for (i = 0; i < w->n; i++)
		s->ce[s->n][i] = w->ce[i];
	s->w[s->n].ce = s->ce[s->n];
	s->n++;
	return RM_OK;
}

static void test_inputs_and_windows(void)
{
	char path[512];
	st_db *db = open_new("windows", path, sizeof(path));
	struct seen s = { 0 };
	int64_t start, len;

	/* windows 0..2 have CPU totals; window 3 has inputs but no total */
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0, W, ST_R_CPU, 500, 2 * W), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0 + W, W, ST_R_CPU, 700, 2 * W), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0 + 2 * W, W, ST_R_CPU, 0, 2 * W), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s2", T0, W, ST_R_CPU, 9, 9), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0 + 5 * W, W, ST_R_NET_RX, 9, 0), RM_OK); /* not cpu */
	CU_ASSERT_EQUAL(st_add_est_input(db, "s1", T0, W, "c2", 4, 40, 400), RM_OK);
	CU_ASSERT_EQUAL(st_add_est_input(db, "s1", T0, W, "c1", 1, 10, 100), RM_OK);
	CU_ASSERT_EQUAL(st_add_est_input(db, "s1", T0, W, "c1", 2, 20, 200), RM_OK); /* additive */
	CU_ASSERT_EQUAL(st_add_est_input(db, "s1", T0 + 3 * W, W, "c1", 1, 1, 1), RM_OK);
	CU_ASSERT_EQUAL(st_est_windows(db, "s1", INT64_MIN, INT64_MAX, collect, &s), RM_OK);
	CU_ASSERT_EQUAL_FATAL(s.n, 3);
	CU_ASSERT_EQUAL(s.w[0].start_ns, T0);
	CU_ASSERT_EQUAL(s.w[0].cpu_ns, 500);
	CU_ASSERT_EQUAL(s.w[0].capacity_ns, 2 * W);
	CU_ASSERT_EQUAL_FATAL(s.w[0].n, 2);
	CU_ASSERT_STRING_EQUAL(s.w[0].ce[0].ce, "c1");
	CU_ASSERT_EQUAL(s.w[0].ce[0].requests, 3);
	CU_ASSERT_EQUAL(s.w[0].ce[0].rt_ns, 30);
	CU_ASSERT_EQUAL(s.w[0].ce[0].rx, 300);
	CU_ASSERT_STRING_EQUAL(s.w[0].ce[1].ce, "c2");
	CU_ASSERT_EQUAL(s.w[1].n, 0);
	CU_ASSERT_EQUAL(s.w[2].start_ns, T0 + 2 * W);
	/* bounds: since is inclusive, until bounds the window's end */
	memset(&s, 0, sizeof(s));
	CU_ASSERT_EQUAL(st_est_windows(db, "s1", T0 + W, T0 + 3 * W - 1, collect, &s), RM_OK);
	CU_ASSERT_EQUAL_FATAL(s.n, 1);
	CU_ASSERT_EQUAL(s.w[0].start_ns, T0 + W);
	/* the callback's error stops the walk and comes back */
	memset(&s, 0, sizeof(s));
	s.n = 8;
	CU_ASSERT_EQUAL(st_est_windows(db, "s1", INT64_MIN, INT64_MAX, collect, &s), RM_EFULL);

	CU_ASSERT_EQUAL(st_est_latest(db, "s1", &start, &len), RM_OK);
	CU_ASSERT_EQUAL(start, T0 + 2 * W);
	CU_ASSERT_EQUAL(len, W);
	CU_ASSERT_EQUAL(st_est_latest(db, "nobody", &start, &len), RM_ENOENT);
	CU_ASSERT_EQUAL(st_est_back(db, "s1", T0 + 2 * W, 2, &start), RM_OK);
	CU_ASSERT_EQUAL(start, T0);
	CU_ASSERT_EQUAL(st_est_back(db, "s1", T0 + 2 * W, 3, &start), RM_ENOENT);
	CU_ASSERT_EQUAL(st_est_last(db, "s1", ST_EST_KALMAN, &start), RM_ENOENT);

	/* bad input */
	CU_ASSERT_EQUAL(st_add_est_input(db, "s1", T0, 0, "c1", 1, 1, 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_est_input(db, "s1", T0, W, "", 1, 1, 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_est_input(db, "s1", T0, W, "c1", UINT64_MAX, 1, 1), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_est_input(db, "s1", T0, W, "c1", INT64_MAX, 0, 0), RM_EINVAL); /* sum overflows */
	CU_ASSERT_EQUAL(st_est_last(db, "s1", "magic", &start), RM_EINVAL);
	st_close(db);
}

static void test_put_and_query(void)
{
	char path[512];
	st_db *db = open_new("query", path, sizeof(path)), *ro = NULL;
	struct st_query q = { INT64_MIN, INT64_MAX, "s1", NULL, -1, 0 };
	const char *ces[] = { "c1", "c2" };
	struct st_row *rows;
	size_t n;
	int64_t start;

	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0, W, ST_R_CPU, 1000, 2 * W), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0 + W, W, ST_R_CPU, 2000, 2 * W), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0 + 2 * W, W, ST_R_CPU, 4000, 2 * W), RM_OK);
	/* window 0: estimated twice, the second replaces the first */
	CU_ASSERT_EQUAL(st_est_put(db, "s1", ST_EST_KALMAN, T0, W, 1, ces, (uint64_t[]){ 1, 1 }, 2), RM_OK);
	CU_ASSERT_EQUAL(st_est_put(db, "s1", ST_EST_KALMAN, T0, W, 1, ces, (uint64_t[]){ 300, 600 }, 2), RM_OK);
	/* window 1: no estimate; window 2: only c1 */
	CU_ASSERT_EQUAL(st_est_put(db, "s1", ST_EST_KALMAN, T0 + W, W, 0, NULL, NULL, 0), RM_OK);
	CU_ASSERT_EQUAL(st_est_put(db, "s1", ST_EST_KALMAN, T0 + 2 * W, W, 1, ces, (uint64_t[]){ 4500 }, 1),
			RM_OK);
	CU_ASSERT_EQUAL(st_est_last(db, "s1", ST_EST_KALMAN, &start), RM_OK);
	CU_ASSERT_EQUAL(start, T0 + 2 * W);

	/* over the range: c1 = 300 + 4500, c2 = 600; U over the solved windows
	   0 and 2 = 5000, V = 5000 - 5400 = -400 */
	CU_ASSERT_EQUAL_FATAL(st_query_est(db, &q, ST_EST_KALMAN, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT_STRING_EQUAL(rows[0].ce, "c1");
	CU_ASSERT_EQUAL(rows[0].value, 4800);
	CU_ASSERT_EQUAL(rows[0].total, 5000);
	CU_ASSERT_EQUAL(rows[0].capacity, 4 * W);
	CU_ASSERT_EQUAL(rows[0].resource, ST_R_CPU);
	CU_ASSERT_STRING_EQUAL(rows[1].ce, "c2");
	CU_ASSERT_EQUAL(rows[1].value, 600);
	CU_ASSERT_STRING_EQUAL(rows[2].ce, ST_CE_UNACCOUNTABLE);
	CU_ASSERT_EQUAL(rows[2].residual, -400);
	CU_ASSERT_EQUAL(rows[2].value, 0);
	st_rows_free(rows);

	/* per window: window 0 (c2 600 first: value descending), window 2 */
	q.per_window = 1;
	CU_ASSERT_EQUAL_FATAL(st_query_est(db, &q, ST_EST_KALMAN, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 5);
	CU_ASSERT_STRING_EQUAL(rows[0].ce, "c2");
	CU_ASSERT_EQUAL(rows[0].win_start_ns, T0);
	CU_ASSERT_EQUAL(rows[0].win_len_ns, W);
	CU_ASSERT_EQUAL(rows[0].total, 1000);
	CU_ASSERT_STRING_EQUAL(rows[2].ce, ST_CE_UNACCOUNTABLE);
	CU_ASSERT_EQUAL(rows[2].residual, 100);
	CU_ASSERT_EQUAL(rows[2].value, 100);
	CU_ASSERT_EQUAL(rows[3].win_start_ns, T0 + 2 * W);
	CU_ASSERT_EQUAL(rows[3].value, 4500);
	st_rows_free(rows);

	/* filters: one CE (no V row), the V row only, another method, another resource */
	q.per_window = 0;
	q.ce = "c2";
	CU_ASSERT_EQUAL_FATAL(st_query_est(db, &q, ST_EST_KALMAN, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(rows[0].value, 600);
	st_rows_free(rows);
	q.ce = ST_CE_UNACCOUNTABLE;
	CU_ASSERT_EQUAL_FATAL(st_query_est(db, &q, ST_EST_KALMAN, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(rows[0].residual, -400);
	st_rows_free(rows);
	q.ce = NULL;
	CU_ASSERT_EQUAL(st_query_est(db, &q, ST_EST_LR, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	q.resource = ST_R_NET_RX;
	CU_ASSERT_EQUAL(st_query_est(db, &q, ST_EST_KALMAN, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	q.resource = -1;
	/* a range that holds only window 2 */
	q.since_ns = T0 + W;
	CU_ASSERT_EQUAL_FATAL(st_query_est(db, &q, ST_EST_KALMAN, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(rows[0].value, 4500);
	CU_ASSERT_EQUAL(rows[0].total, 4000);
	st_rows_free(rows);
	CU_ASSERT_EQUAL(st_query_est(db, &q, "nope", &rows, &n), RM_EINVAL);
	CU_ASSERT_EQUAL(st_est_put(db, "s1", ST_EST_LR, T0, W, 1, ces, (uint64_t[]){ UINT64_MAX, 1 }, 2),
			RM_EINVAL);
	st_close(db);

	/* read-only: queries work, writes refused */
	CU_ASSERT_EQUAL_FATAL(st_open(&ro, path, ST_OPEN_READONLY), RM_OK);
	q.since_ns = INT64_MIN;
	CU_ASSERT_EQUAL_FATAL(st_query_est(ro, &q, ST_EST_KALMAN, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 3);
	st_rows_free(rows);
	CU_ASSERT_EQUAL(st_add_est_input(ro, "s1", T0, W, "c1", 1, 1, 1), RM_EPERM);
	CU_ASSERT_EQUAL(st_est_put(ro, "s1", ST_EST_LR, T0, W, 0, NULL, NULL, 0), RM_EPERM);
	st_close(ro);
}

static CU_TestInfo cases[] = {
	{ "migration from v3 keeps the data", test_migrate_from_v3 },
	{ "inputs and the windows estimators read", test_inputs_and_windows },
	{ "estimates stored, replaced and queried", test_put_and_query },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("st_est", cases)
