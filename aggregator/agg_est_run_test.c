/*
 * agg_est_run_test.c - the estimators run by the aggregator on a real
 * SQLite file: windows are estimated only once complete (a horizon behind
 * the server's latest window) or at the final pass, LR reproduces an exact
 * linear model's shares, unsolvable LR windows are recorded as such, the
 * Kalman filter returns the truth when its forecast (eq. 4.a) is exact,
 * and a restart (new runner, replayed filter) gives the same estimates as
 * an uninterrupted run.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "rm_test.h"
#include "agg_config.h"
#include "agg_est_run.h"
#include "rm_err.h"
#include "st.h"
#include "st_est.h"

#define SEC 1000000000LL
#define T0 (1700000000LL * SEC)
#define NWIN 10

static const char conf[] = "[aggregator]\nhorizon = 2s\n"
			   "[estimate s1]\nmethod = lr, kalman\nlr_windows = 5\n";

/*
 * Window k (1 s, 2 CPUs): x1 = 1000 (1 + k mod 3) bytes, x2 = 500 (1 + k^2
 * mod 5) bytes, y = 2000 x1 + 3000 x2 ns (a0 = 0). Requests: x / 100, so a
 * request of c1 costs 200 us and one of c2 300 us; the response time is
 * chosen as C / (1 - U), which makes eq. 4.a's forecast exact.
 */
static double x1_of(int k) { return 1000.0 * (1 + k % 3); }
static double x2_of(int k) { return 500.0 * (1 + (k * k) % 5); }

static st_db *fill(const char *name)
{
	char path[512];
	st_db *db = NULL;
	int k;

	snprintf(path, sizeof(path), "%s/%s.db", rm_test_tmpdir(), name);
	unlink(path);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	for (k = 0; k < NWIN; k++) {
		double x1 = x1_of(k), x2 = x2_of(k), y = 2000 * x1 + 3000 * x2, u = y / (2.0 * SEC);
		int64_t s = T0 + k * SEC;

		CU_ASSERT_EQUAL_FATAL(st_add_total(db, "s1", s, SEC, ST_R_CPU, (uint64_t)y, 2 * SEC), RM_OK);
		CU_ASSERT_EQUAL_FATAL(st_add_est_input(db, "s1", s, SEC, "c1", (uint64_t)(x1 / 100),
						       (uint64_t)llround(x1 / 100 * 200000 / (1 - u)), (uint64_t)x1),
				      RM_OK);
		CU_ASSERT_EQUAL_FATAL(st_add_est_input(db, "s1", s, SEC, "c2", (uint64_t)(x2 / 100),
						       (uint64_t)llround(x2 / 100 * 300000 / (1 - u)), (uint64_t)x2),
				      RM_OK);
	}
	return db;
}

/* Per-window estimates of method for ce: out[k] (-1 where none). Returns the count. */
static int per_window(st_db *db, const char *method, const char *ce, double *out)
{
	struct st_query q = { INT64_MIN, INT64_MAX, "s1", ce, -1, 1 };
	struct st_row *rows;
	size_t n, i;
	int k, cnt = 0;

	for (k = 0; k < NWIN; k++)
		out[k] = -1;
	CU_ASSERT_EQUAL_FATAL(st_query_est(db, &q, method, &rows, &n), RM_OK);
	for (i = 0; i < n; i++) {
		k = (int)((rows[i].win_start_ns - T0) / SEC);
		CU_ASSERT_FATAL(k >= 0 && k < NWIN);
		out[k] = (double)rows[i].value;
		cnt++;
	}
	st_rows_free(rows);
	return cnt;
}

static void test_complete_windows_and_lr(void)
{
	struct agg_config *cfg = NULL;
	struct agg_est_run *r = NULL;
	st_db *db = fill("lr");
	double c1[NWIN], c2[NWIN];
	uint64_t solved, unsolved;
	int64_t last;
	int k;

	CU_ASSERT_EQUAL_FATAL(agg_config_parse(conf, strlen(conf), "t.ini", &cfg), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_est_run_open(&r, cfg, db), RM_OK);
	/* latest window starts at T0 + 9 s; horizon 2 s: windows ending by
	   T0 + 7 s are complete, k = 0..6 */
	CU_ASSERT_EQUAL_FATAL(agg_est_run_tick(r, 0), RM_OK);
	CU_ASSERT_EQUAL(st_est_last(db, "s1", ST_EST_LR, &last), RM_OK);
	CU_ASSERT_EQUAL(last, T0 + 6 * SEC);
	CU_ASSERT_EQUAL(st_est_last(db, "s1", ST_EST_KALMAN, &last), RM_OK);
	CU_ASSERT_EQUAL(last, T0 + 6 * SEC);
	agg_est_run_counts(r, &solved, &unsolved);
	/* LR: k = 0, 1 have fewer windows than unknowns (3); k = 2..6 solved.
	   Kalman: all 7. */
	CU_ASSERT_EQUAL(solved, 5 + 7);
	CU_ASSERT_EQUAL(unsolved, 2);
	/* a second tick without new windows changes nothing */
	CU_ASSERT_EQUAL_FATAL(agg_est_run_tick(r, 0), RM_OK);
	agg_est_run_counts(r, &solved, &unsolved);
	CU_ASSERT_EQUAL(solved, 12);

	/* the fit is exact (a0 = 0, a1 = 2000, a2 = 3000), so each share is
	   a_i x_i: e.g. k = 2: c1 = 2000 * 3000 = 6e6, c2 = 3000 * 2500 = 7.5e6 */
	CU_ASSERT_EQUAL(per_window(db, ST_EST_LR, "c1", c1), 5);
	per_window(db, ST_EST_LR, "c2", c2);
	CU_ASSERT_EQUAL(c1[2], 6e6);
	CU_ASSERT_EQUAL(c2[2], 7.5e6);
	for (k = 0; k < NWIN; k++) {
		if (k < 2 || k > 6) {
			CU_ASSERT_EQUAL(c1[k], -1);
			continue;
		}
		CU_ASSERT(fabs(c1[k] - 2000 * x1_of(k)) <= 1);
		CU_ASSERT(fabs(c2[k] - 3000 * x2_of(k)) <= 1);
	}
	/* the final pass estimates the rest */
	CU_ASSERT_EQUAL_FATAL(agg_est_run_tick(r, 1), RM_OK);
	CU_ASSERT_EQUAL(per_window(db, ST_EST_LR, "c1", c1), 8);
	CU_ASSERT(fabs(c1[9] - 2000 * x1_of(9)) <= 1);
	agg_est_run_close(r);
	agg_config_free(cfg);
	st_close(db);
}

/* Kalman with an exact forecast: the innovation is 0 in every window, so
   each estimate is N_i C_i, the truth: c1 = 2 x1 * 1000... = 2000 x1. */
static void test_kalman_exact_forecast(void)
{
	struct agg_config *cfg = NULL;
	struct agg_est_run *r = NULL;
	st_db *db = fill("kalman");
	double c1[NWIN], c2[NWIN];
	int k;

	CU_ASSERT_EQUAL_FATAL(agg_config_parse(conf, strlen(conf), "t.ini", &cfg), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_est_run_open(&r, cfg, db), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_est_run_tick(r, 1), RM_OK);
	CU_ASSERT_EQUAL(per_window(db, ST_EST_KALMAN, "c1", c1), NWIN);
	per_window(db, ST_EST_KALMAN, "c2", c2);
	for (k = 0; k < NWIN; k++) {
		CU_ASSERT(fabs(c1[k] - 2000 * x1_of(k)) <= 2);
		CU_ASSERT(fabs(c2[k] - 3000 * x2_of(k)) <= 2);
	}
	agg_est_run_close(r);
	agg_config_free(cfg);
	st_close(db);
}

/*
 * A restart in the middle: the new runner rebuilds the filter from the
 * windows already estimated and continues; every estimate equals that of
 * an uninterrupted run. The data here make the forecast inexact (response
 * times halved after window 4), so the filter's state matters.
 */
static void test_restart_same_estimates(void)
{
	struct agg_config *cfg = NULL;
	struct agg_est_run *r = NULL;
	st_db *a = fill("once"), *b = fill("restart");
	double ea[NWIN], eb[NWIN];
	int k;

	for (k = 5; k < NWIN; k++) {
		/* make c1's forecast wrong: twice the response time */
		CU_ASSERT_EQUAL(st_add_est_input(a, "s1", T0 + k * SEC, SEC, "c1", 0, 2000000, 0), RM_OK);
		CU_ASSERT_EQUAL(st_add_est_input(b, "s1", T0 + k * SEC, SEC, "c1", 0, 2000000, 0), RM_OK);
	}
	CU_ASSERT_EQUAL_FATAL(agg_config_parse(conf, strlen(conf), "t.ini", &cfg), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_est_run_open(&r, cfg, a), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_est_run_tick(r, 1), RM_OK);
	agg_est_run_close(r);
	CU_ASSERT_EQUAL_FATAL(agg_est_run_open(&r, cfg, b), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_est_run_tick(r, 0), RM_OK); /* k = 0..6 */
	agg_est_run_close(r);
	CU_ASSERT_EQUAL_FATAL(agg_est_run_open(&r, cfg, b), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_est_run_tick(r, 1), RM_OK); /* replays 0..6, then 7..9 */
	agg_est_run_close(r);
	CU_ASSERT_EQUAL(per_window(a, ST_EST_KALMAN, "c1", ea), NWIN);
	CU_ASSERT_EQUAL(per_window(b, ST_EST_KALMAN, "c1", eb), NWIN);
	for (k = 0; k < NWIN; k++)
		CU_ASSERT_EQUAL(ea[k], eb[k]);
	/* and the wrong forecast did move the estimate off the truth */
	CU_ASSERT(fabs(ea[6] - 2000 * x1_of(6)) > 1000);
	CU_ASSERT_EQUAL(per_window(a, ST_EST_LR, "c1", ea), 8);
	CU_ASSERT_EQUAL(per_window(b, ST_EST_LR, "c1", eb), 8);
	for (k = 0; k < NWIN; k++)
		CU_ASSERT_EQUAL(ea[k], eb[k]);
	agg_config_free(cfg);
	st_close(a);
	st_close(b);
}

/* A server that reported nothing yet, and a zero-CPU window with no inputs. */
static void test_nothing_yet(void)
{
	static const char c2[] = "[estimate quiet]\nmethod = lr, kalman\n";
	struct agg_config *cfg = NULL;
	struct agg_est_run *r = NULL;
	char path[512];
	st_db *db = NULL;
	uint64_t solved = 9, unsolved = 9;

	snprintf(path, sizeof(path), "%s/quiet.db", rm_test_tmpdir());
	unlink(path);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_config_parse(c2, strlen(c2), "t.ini", &cfg), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_est_run_open(&r, cfg, db), RM_OK);
	CU_ASSERT_EQUAL(agg_est_run_tick(r, 1), RM_OK);
	agg_est_run_counts(r, &solved, &unsolved);
	CU_ASSERT_EQUAL(solved, 0);
	CU_ASSERT_EQUAL(unsolved, 0);
	CU_ASSERT_EQUAL(st_add_total(db, "quiet", T0, SEC, ST_R_CPU, 0, 2 * SEC), RM_OK);
	CU_ASSERT_EQUAL(agg_est_run_tick(r, 1), RM_OK);
	agg_est_run_counts(r, &solved, &unsolved);
	/* both deal with it: no CE, so no estimate rows (LR fits a0 = y alone) */
	CU_ASSERT_EQUAL(solved, 2);
	CU_ASSERT_EQUAL(unsolved, 0);
	agg_est_run_close(r);
	agg_config_free(cfg);
	st_close(db);
}

static CU_TestInfo cases[] = {
	{ "complete windows only; LR reproduces exact shares", test_complete_windows_and_lr },
	{ "Kalman returns the truth when the forecast is exact", test_kalman_exact_forecast },
	{ "a restart gives the same estimates", test_restart_same_estimates },
	{ "a server with nothing stored yet", test_nothing_yet },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_est_run", cases)
