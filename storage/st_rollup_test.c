/*
 * st_rollup_test.c - tests of the 1 min / 1 h / 1 day series on real SQLite
 * files: two databases get the same writes, one is rolled up (and
 * thinned by retention), and every query must answer the same from both;
 * the migration of a v5 file; late writes; retention never deleting what is
 * not rolled up; the choice of series (st_cover).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "rm_err.h"
#include "rm_test.h"
#include "st.h"
#include "st_int.h"
#include "st_rollup.h"
#include "banned.h"

#define SEC 1000000000LL
#define MIN (60 * SEC)
#define HOUR (3600 * SEC)
#define DAY (86400 * SEC)
#define W (20 * SEC)
#define T0 (1700006400LL * SEC) /* a UTC midnight */

static st_db *open_fresh(const char *name)
{
	char path[512];
	st_db *db = NULL;

	snprintf(path, sizeof(path), "%s/%s.db", rm_test_tmpdir(), name);
	unlink(path);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	return db;
}

static const char *const servers[] = { "s1", "s2" };
static const char *const ces[] = { "web", "db", "batch" };

/* Writes the same deterministic window of usage to every db in dbs:
 * U_c for most CEs, a reason, and a total that balances them. */
static void write_window(st_db **dbs, int ndb, int64_t start, unsigned seed)
{
	int d, s, r, c;

	for (d = 0; d < ndb; d++) {
		unsigned x = seed;

		for (s = 0; s < 2; s++)
			for (r = 0; r < ST_R_COUNT; r++) {
				uint64_t sum = 0;

				for (c = 0; c < 3; c++) {
					x = x * 1103515245u + 12345u;
					if ((x >> 16) % 5 == 0)
						continue; /* not every CE in every window */
					CU_ASSERT_EQUAL(st_add_usage(dbs[d], servers[s], start, W, r, ces[c],
								     (x >> 8) % 100000), RM_OK);
					sum += (x >> 8) % 100000;
				}
				CU_ASSERT_EQUAL(st_add_unacct(dbs[d], servers[s], start, W, r, "lost", 7), RM_OK);
				CU_ASSERT_EQUAL(st_add_total(dbs[d], servers[s], start, W, r, sum + 7, 4 * W),
						RM_OK);
			}
		CU_ASSERT_EQUAL(st_add_split(dbs[d], servers[0], start, W, 1), RM_OK);
	}
}

static void fill(st_db **dbs, int ndb, int64_t from, int64_t to)
{
	int64_t t;
	int d;

	for (d = 0; d < ndb; d++)
		CU_ASSERT_EQUAL_FATAL(st_begin(dbs[d]), RM_OK);
	for (t = from; t < to; t += W)
		write_window(dbs, ndb, t, (unsigned)(t / W));
	for (d = 0; d < ndb; d++)
		CU_ASSERT_EQUAL_FATAL(st_commit(dbs[d]), RM_OK);
}

static void roll_all(st_db *db, const struct st_retention *r)
{
	int more = 1, guard = 0;

	while (more && guard++ < 1000)
		CU_ASSERT_EQUAL_FATAL(st_rollup(db, r, &more), RM_OK);
	CU_ASSERT_EQUAL(more, 0);
}

static int rows_equal(const struct st_row *a, size_t na, const struct st_row *b, size_t nb)
{
	size_t i;

	if (na != nb)
		return 0;
	for (i = 0; i < na; i++)
		if (strcmp(a[i].server, b[i].server) || strcmp(a[i].ce, b[i].ce) ||
		    strcmp(a[i].reason, b[i].reason) || a[i].resource != b[i].resource ||
		    a[i].value != b[i].value || a[i].total != b[i].total ||
		    a[i].capacity != b[i].capacity || a[i].residual != b[i].residual ||
		    a[i].win_start_ns != b[i].win_start_ns || a[i].win_len_ns != b[i].win_len_ns)
			return 0;
	return 1;
}

/* Both databases answer q (range, and per period when step > 0) alike. */
static void same_answers(st_db *a, st_db *b, struct st_query q, int64_t step)
{
	struct st_row *ra, *rb;
	size_t na, nb;

	CU_ASSERT_EQUAL_FATAL(st_query_usage(a, &q, &ra, &na), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_query_usage(b, &q, &rb, &nb), RM_OK);
	CU_ASSERT(na > 0);
	if (!rows_equal(ra, na, rb, nb))
		fprintf(stderr, "usage differs for [%lld, %lld) (%zu vs %zu rows)\n",
			(long long)(q.since_ns - T0), (long long)(q.until_ns - T0), na, nb);
	CU_ASSERT(rows_equal(ra, na, rb, nb));
	st_rows_free(ra);
	st_rows_free(rb);
	CU_ASSERT_EQUAL_FATAL(st_query_unacct(a, &q, &ra, &na), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_query_unacct(b, &q, &rb, &nb), RM_OK);
	CU_ASSERT(rows_equal(ra, na, rb, nb));
	st_rows_free(ra);
	st_rows_free(rb);
	CU_ASSERT_EQUAL_FATAL(st_query_splits(a, &q, &ra, &na), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_query_splits(b, &q, &rb, &nb), RM_OK);
	CU_ASSERT(rows_equal(ra, na, rb, nb));
	st_rows_free(ra);
	st_rows_free(rb);
	if (step > 0) {
		CU_ASSERT_EQUAL_FATAL(st_query_usage_step(a, &q, step, &ra, &na), RM_OK);
		CU_ASSERT_EQUAL_FATAL(st_query_usage_step(b, &q, step, &rb, &nb), RM_OK);
		CU_ASSERT(na > 0);
		CU_ASSERT(rows_equal(ra, na, rb, nb));
		st_rows_free(ra);
		st_rows_free(rb);
		CU_ASSERT_EQUAL_FATAL(st_query_unacct_step(a, &q, step, &ra, &na), RM_OK);
		CU_ASSERT_EQUAL_FATAL(st_query_unacct_step(b, &q, step, &rb, &nb), RM_OK);
		CU_ASSERT(rows_equal(ra, na, rb, nb));
		st_rows_free(ra);
		st_rows_free(rb);
	}
}

static struct st_query range(int64_t since, int64_t until)
{
	struct st_query q = { since, until, NULL, NULL, -1, 0 };

	return q;
}

static void test_rolled_answers_equal_windows(void)
{
	st_db *dbs[2] = { open_fresh("rolled"), open_fresh("plain") };
	struct st_row *rows;
	int64_t rolled, kept;
	size_t n;
	int i;

	/* 26 hours of 10 s windows, from 10 min before a midnight */
	fill(dbs, 2, T0 - 10 * MIN, T0 + DAY + 2 * HOUR - 10 * MIN);
	CU_ASSERT_EQUAL(st_rollup(dbs[0], NULL, NULL), RM_OK); /* no horizon: nothing */
	CU_ASSERT_EQUAL(st_series_state(dbs[0], ST_SERIES_1M, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(rolled, INT64_MIN);
	CU_ASSERT_EQUAL(st_horizon_set(dbs[0], T0 + DAY + HOUR + 30 * SEC), RM_OK);
	CU_ASSERT_EQUAL(st_horizon_set(dbs[0], T0), RM_OK); /* never back */
	roll_all(dbs[0], NULL);
	CU_ASSERT_EQUAL(st_series_state(dbs[0], ST_SERIES_1M, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(rolled, T0 + DAY + HOUR);
	CU_ASSERT_EQUAL(kept, T0 - 10 * MIN);
	CU_ASSERT_EQUAL(st_series_state(dbs[0], ST_SERIES_1H, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(rolled, T0 + DAY + HOUR);
	CU_ASSERT_EQUAL(kept, T0 - HOUR);
	CU_ASSERT_EQUAL(st_series_state(dbs[0], ST_SERIES_1D, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(rolled, T0 + DAY);

	same_answers(dbs[0], dbs[1], range(INT64_MIN, INT64_MAX), DAY);
	same_answers(dbs[0], dbs[1], range(T0, T0 + DAY), HOUR);
	same_answers(dbs[0], dbs[1], range(T0 - 7 * SEC, T0 + DAY + 13 * MIN + 3 * SEC), 5 * MIN);
	same_answers(dbs[0], dbs[1], range(T0 + 3 * HOUR + 10 * SEC, T0 + 5 * HOUR + 50 * SEC), MIN);
	for (i = 0; i < 20; i++) {
		int64_t a = T0 - 10 * MIN + (int64_t)(rand() % 90000) * SEC;
		int64_t b = a + (int64_t)(rand() % 90000) * SEC;

		same_answers(dbs[0], dbs[1], range(a, b), 0);
	}
	/* the buckets balance: no unbalanced row anywhere */
	{
		struct st_query q = range(INT64_MIN, INT64_MAX);

		CU_ASSERT_EQUAL(st_query_identity(dbs[0], &q, &rows, &n), RM_OK);
		CU_ASSERT_EQUAL(n, 0);
		st_rows_free(rows);
	}
	st_close(dbs[0]);
	st_close(dbs[1]);
}

static void test_retention_and_late_writes(void)
{
	st_db *dbs[2] = { open_fresh("kept"), open_fresh("all") };
	struct st_retention r = { { 2 * HOUR, 6 * HOUR, 2 * DAY, 0 } };
	struct st_query q;
	struct st_row *rows;
	int64_t rolled, kept;
	size_t n;

	fill(dbs, 2, T0, T0 + 12 * HOUR);
	CU_ASSERT_EQUAL(st_horizon_set(dbs[0], T0 + 12 * HOUR), RM_OK);
	roll_all(dbs[0], &r);
	/* 1 s rows older than 2 h before the horizon are gone, rolled up */
	CU_ASSERT_EQUAL(st_series_state(dbs[0], ST_SERIES_1S, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(kept, T0 + 10 * HOUR);
	CU_ASSERT_EQUAL(st_series_state(dbs[0], ST_SERIES_1M, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(kept, T0 + 6 * HOUR); /* the hours hold what is older */
	q = range(INT64_MIN, T0 + 10 * HOUR);
	q.per_window = 1;
	CU_ASSERT_EQUAL(st_query_usage(dbs[0], &q, &rows, &n), RM_OK);
	CU_ASSERT(n > 0);
	/* per window: the finest series left (hours, then minutes) */
	CU_ASSERT_EQUAL(rows[0].win_start_ns, T0);
	CU_ASSERT_EQUAL(rows[0].win_len_ns, HOUR);
	CU_ASSERT_EQUAL(rows[n - 1].win_len_ns, MIN);
	st_rows_free(rows);
	same_answers(dbs[0], dbs[1], range(T0, T0 + 12 * HOUR), HOUR);
	same_answers(dbs[0], dbs[1], range(T0 + HOUR, T0 + 11 * HOUR + 20 * SEC), HOUR);

	/* a late write into a window rolled up and deleted still counts */
	CU_ASSERT_EQUAL(st_add_usage(dbs[0], "s1", T0 + 3 * HOUR, W, ST_R_CPU, "web", 5000), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(dbs[1], "s1", T0 + 3 * HOUR, W, ST_R_CPU, "web", 5000), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(dbs[0], "s1", T0 + 3 * HOUR, W, ST_R_CPU, 5000, 0), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(dbs[1], "s1", T0 + 3 * HOUR, W, ST_R_CPU, 5000, 0), RM_OK);
	same_answers(dbs[0], dbs[1], range(T0, T0 + 12 * HOUR), 2 * HOUR);

	/* a day later: the 1 s and 1 min rows of the first day go, the day
	 * and hours stay; the whole day still answers the same */
	fill(dbs, 2, T0 + 12 * HOUR, T0 + DAY + HOUR);
	CU_ASSERT_EQUAL(st_horizon_set(dbs[0], T0 + DAY + HOUR), RM_OK);
	roll_all(dbs[0], &r);
	CU_ASSERT_EQUAL(st_series_state(dbs[0], ST_SERIES_1M, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(kept, T0 + DAY - 5 * HOUR);
	same_answers(dbs[0], dbs[1], range(T0, T0 + DAY), DAY);
	same_answers(dbs[0], dbs[1], range(T0 + HOUR, T0 + DAY + HOUR), HOUR);
	st_close(dbs[0]);
	st_close(dbs[1]);
}

static void test_retention_waits_for_rollup(void)
{
	st_db *db = open_fresh("slow");
	struct st_retention r = { { HOUR, HOUR, HOUR, 0 } };
	int64_t rolled, kept, rolled1h, kept1h;
	int more = 0;

	fill(&db, 1, T0, T0 + 8 * HOUR);
	CU_ASSERT_EQUAL(st_horizon_set(db, T0 + 8 * HOUR), RM_OK);
	/* one call rolls at most ST_ROLLUP_MAX_SPAN_NS of 1 min */
	CU_ASSERT_EQUAL(st_rollup(db, &r, &more), RM_OK);
	CU_ASSERT_EQUAL(more, 1);
	CU_ASSERT_EQUAL(st_series_state(db, ST_SERIES_1M, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(rolled, T0 + ST_ROLLUP_MAX_SPAN_NS);
	CU_ASSERT_EQUAL(st_series_state(db, ST_SERIES_1H, &rolled1h, &kept1h), RM_OK);
	/* nothing deleted beyond what the next series holds */
	CU_ASSERT_EQUAL(st_series_state(db, ST_SERIES_1S, &rolled, &kept), RM_OK);
	CU_ASSERT(kept <= T0 + ST_ROLLUP_MAX_SPAN_NS);
	CU_ASSERT_EQUAL(st_series_state(db, ST_SERIES_1M, &rolled, &kept), RM_OK);
	CU_ASSERT(kept <= rolled1h);
	roll_all(db, &r);
	CU_ASSERT_EQUAL(st_series_state(db, ST_SERIES_1S, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(kept, T0 + 7 * HOUR);
	st_close(db);
}

static void test_migrate_from_v5(void)
{
	char path[512];
	sqlite3 *h;
	st_db *db = NULL;
	struct st_query q = range(INT64_MIN, INT64_MAX);
	struct st_row *rows;
	int64_t rolled, kept;
	size_t n;
	int before;

	snprintf(path, sizeof(path), "%s/v5.db", rm_test_tmpdir());
	unlink(path);
	CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &h), SQLITE_OK);
	CU_ASSERT_EQUAL_FATAL(st_schema_migrate(h, path, 5, 0, &before), RM_OK);
	CU_ASSERT_EQUAL(sqlite3_exec(h,
				     "INSERT INTO usage VALUES ('s1', 0, 1700006400000000000, 10000000000, 'web', 40);"
				     "INSERT INTO total VALUES ('s1', 0, 1700006400000000000, 10000000000, 50, 0);",
				     NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_schema_version(db), 6);
	CU_ASSERT_EQUAL(st_horizon_set(db, T0 + 2 * MIN), RM_OK);
	roll_all(db, NULL);
	CU_ASSERT_EQUAL(st_series_state(db, ST_SERIES_1M, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(rolled, T0 + 2 * MIN);
	CU_ASSERT_EQUAL(st_query_usage_step(db, &q, MIN, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(rows[0].ce, "web");
	CU_ASSERT_EQUAL(rows[0].value, 40);
	CU_ASSERT_EQUAL(rows[0].win_start_ns, T0);
	CU_ASSERT_EQUAL(rows[0].win_len_ns, MIN);
	CU_ASSERT_EQUAL(rows[1].residual, 10);
	st_rows_free(rows);
	st_close(db);
}

static void test_cover(void)
{
	struct st_series_map m = {
		.rolled = { INT64_MAX, T0 + DAY + HOUR, T0 + DAY + HOUR, T0 + DAY },
		.kept = { T0 + 20 * HOUR, T0 - DAY, T0 - 2 * DAY, T0 - 3 * DAY },
	};
	struct st_seg s[ST_SEG_MAX];
	size_t n;

	/* a day and a bit: the day, then the hour, then minutes and windows */
	n = st_cover(&m, T0, T0 + DAY + HOUR + MIN + 5 * SEC, 0, 0, s);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT(s[0].series == ST_SERIES_1D && s[0].lo == T0 && s[0].hi == T0 + DAY);
	CU_ASSERT(s[1].series == ST_SERIES_1H && s[1].hi == T0 + DAY + HOUR);
	CU_ASSERT(s[2].series == ST_SERIES_1S && s[2].lo == T0 + DAY + HOUR);
	CU_ASSERT(s[2].hi == T0 + DAY + HOUR + MIN + 5 * SEC);
	/* a 5 min step cannot use hours or days */
	n = st_cover(&m, T0 + DAY - 30 * MIN, T0 + DAY + 30 * MIN, 5 * MIN, 0, s);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(s[0].series, ST_SERIES_1M);
	/* per window: the windows where they are kept, minutes before */
	n = st_cover(&m, T0 + 19 * HOUR, T0 + 21 * HOUR, 0, 1, s);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT(s[0].series == ST_SERIES_1S && s[0].lo == T0 + 20 * HOUR);
	CU_ASSERT(s[1].series == ST_SERIES_1M && s[1].hi == T0 + 20 * HOUR);
	/* before the minutes' retention: the hours that start in the range */
	n = st_cover(&m, T0 - DAY - 90 * MIN, T0 - DAY + 30 * SEC, 0, 0, s);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT(s[0].series == ST_SERIES_1H && s[0].lo == T0 - DAY - 90 * MIN);
	CU_ASSERT(s[1].series == ST_SERIES_1M && s[1].lo == T0 - DAY);
}

static CU_TestInfo cases[] = {
	{ "rolled-up series answer as the windows do", test_rolled_answers_equal_windows },
	{ "retention and late writes keep the answers", test_retention_and_late_writes },
	{ "retention never deletes what is not rolled up", test_retention_waits_for_rollup },
	{ "migrates a v5 file", test_migrate_from_v5 },
	{ "choice of series", test_cover },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("st_rollup", cases)
