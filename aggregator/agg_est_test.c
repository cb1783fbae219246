/*
 * agg_est_test.c - the estimators of agg_est.h against small examples
 * computed by hand (the arithmetic is in the comments): LR fits and shares
 * (seed 000 eq. 2), the Kalman filter's steps (seed 002 Algorithm 1, eq. 4),
 * MARE, and the edge cases: singular systems, a CE with no traffic, zero
 * CPU, windows without requests, CEs that appear later, bad input.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "rm_test.h"
#include "agg_est.h"
#include "rm_err.h"

#define NEAR(a, b, tol) CU_ASSERT(fabs((a) - (b)) <= (tol))

/* Windows of up to 4 CEs built from literal arrays. */
struct wins {
	struct agg_est_win w[8];
	double rx[8][4], req[8][4], rt[8][4];
};

static void wins_set(struct wins *s, size_t t, const double *rx, size_t n, double cpu)
{
	size_t i;

	for (i = 0; i < n; i++) {
		s->rx[t][i] = rx[i];
		s->req[t][i] = 0;
		s->rt[t][i] = 0;
	}
	s->w[t].rx = s->rx[t];
	s->w[t].req = s->req[t];
	s->w[t].rt = s->rt[t];
	s->w[t].cpu_ns = cpu;
	s->w[t].cap_ns = 1e9;
	s->w[t].len_ns = 1e9;
}

/*
 * Exact fit: y = 10 + 2 x1 + 3 x2 on 4 windows.
 *   x1 = 1 2 3 1, x2 = 1 1 2 3  ->  y = 15 17 22 21
 * The design [1 x1 x2] has rank 3, so least squares returns (10, 2, 3).
 * Last window: contributions 2*1 = 2 and 3*3 = 9, sum 11, so the estimates
 * are 21 * 2/11 = 3.8181818 and 21 * 9/11 = 17.1818181 (sum 21 = y).
 */
static void test_lr_exact(void)
{
	static const double x[4][2] = { { 1, 1 }, { 2, 1 }, { 3, 2 }, { 1, 3 } };
	static const double y[4] = { 15, 17, 22, 21 };
	struct wins s;
	double coef[3], out[2];
	int solved = -1;
	size_t t;

	for (t = 0; t < 4; t++)
		wins_set(&s, t, x[t], 2, y[t]);
	CU_ASSERT_EQUAL_FATAL(agg_est_lr_fit(s.w, 4, 2, coef, &solved), RM_OK);
	CU_ASSERT_EQUAL_FATAL(solved, 1);
	NEAR(coef[0], 10, 1e-9);
	NEAR(coef[1], 2, 1e-9);
	NEAR(coef[2], 3, 1e-9);
	CU_ASSERT_EQUAL_FATAL(agg_est_lr(s.w, 4, 2, out, &solved), RM_OK);
	CU_ASSERT_EQUAL(solved, 1);
	NEAR(out[0], 21.0 * 2 / 11, 1e-9);
	NEAR(out[1], 21.0 * 9 / 11, 1e-9);
	/* window 3 alone as the last of the set w[0..3): 22 * (6 / 12), 22 * (6 / 12) */
	CU_ASSERT_EQUAL(agg_est_lr(s.w, 3, 2, out, &solved), RM_OK);
	CU_ASSERT_EQUAL(solved, 1);
	NEAR(out[0], 11, 1e-9);
	NEAR(out[1], 11, 1e-9);
}

/*
 * A fit that is not exact, with realistic magnitudes (bytes, ns): one CE,
 * x = 0, 1000, 2000 bytes, y = 1e6, 2e6, 6e6 ns. Normal equations:
 *   mean x = 1000, mean y = 3e6, Sxy = (-1000)(-2e6) + 0 + (1000)(3e6) = 5e9,
 *   Sxx = 1e6 + 0 + 1e6 = 2e6  ->  a1 = 2500 ns/byte, a0 = 3e6 - 2.5e6 = 5e5.
 * With one CE its share is 1: the estimate of the last window is all of y.
 */
static void test_lr_least_squares(void)
{
	struct wins s;
	double coef[2], out[1];
	int solved;

	wins_set(&s, 0, (double[]){ 0 }, 1, 1e6);
	wins_set(&s, 1, (double[]){ 1000 }, 1, 2e6);
	wins_set(&s, 2, (double[]){ 2000 }, 1, 6e6);
	CU_ASSERT_EQUAL_FATAL(agg_est_lr_fit(s.w, 3, 1, coef, &solved), RM_OK);
	CU_ASSERT_EQUAL_FATAL(solved, 1);
	NEAR(coef[0], 5e5, 1e-3);
	NEAR(coef[1], 2500, 1e-9);
	CU_ASSERT_EQUAL(agg_est_lr(s.w, 3, 1, out, &solved), RM_OK);
	NEAR(out[0], 6e6, 1e-3);
}

/*
 * A negative coefficient: y = 10 + 2 x1 - 1 x2 on the windows of
 * test_lr_exact -> y = 11, 13, 14, 9; the fit is (10, 2, -1). CE 2 cannot
 * have caused negative CPU: its share is 0 and CE 1 gets all of y = 9.
 */
static void test_lr_negative(void)
{
	static const double x[4][2] = { { 1, 1 }, { 2, 1 }, { 3, 2 }, { 1, 3 } };
	static const double y[4] = { 11, 13, 14, 9 };
	struct wins s;
	double coef[3], out[2];
	int solved;
	size_t t;

	for (t = 0; t < 4; t++)
		wins_set(&s, t, x[t], 2, y[t]);
	CU_ASSERT_EQUAL_FATAL(agg_est_lr_fit(s.w, 4, 2, coef, &solved), RM_OK);
	CU_ASSERT_EQUAL_FATAL(solved, 1);
	NEAR(coef[2], -1, 1e-9);
	CU_ASSERT_EQUAL(agg_est_lr(s.w, 4, 2, out, &solved), RM_OK);
	NEAR(out[0], 9, 1e-9);
	CU_ASSERT_EQUAL(out[1], 0);
}

/*
 * Singular systems give no estimate: x2 = 2 x1 in every window (collinear),
 * a CE sending the same bytes in every window (collinear with a0), and
 * fewer windows (2) than unknowns (3).
 */
static void test_lr_singular(void)
{
	static const double col[4][2] = { { 1, 2 }, { 2, 4 }, { 3, 6 }, { 1, 2 } };
	struct wins s;
	double coef[3], out[2] = { -1, -1 };
	int solved = -1;
	size_t t;

	for (t = 0; t < 4; t++)
		wins_set(&s, t, col[t], 2, 10.0 + 7 * (double)t);
	CU_ASSERT_EQUAL(agg_est_lr(s.w, 4, 2, out, &solved), RM_OK);
	CU_ASSERT_EQUAL(solved, 0);
	CU_ASSERT_EQUAL(out[0], 0);
	CU_ASSERT_EQUAL(out[1], 0);
	for (t = 0; t < 3; t++)
		wins_set(&s, t, (double[]){ 500 }, 1, 1e6 * (double)(t + 1));
	CU_ASSERT_EQUAL(agg_est_lr_fit(s.w, 3, 1, coef, &solved), RM_OK);
	CU_ASSERT_EQUAL(solved, 0);
	wins_set(&s, 0, (double[]){ 1, 1 }, 2, 5);
	wins_set(&s, 1, (double[]){ 2, 1 }, 2, 7);
	solved = -1;
	CU_ASSERT_EQUAL(agg_est_lr_fit(s.w, 2, 2, coef, &solved), RM_OK);
	CU_ASSERT_EQUAL(solved, 0);
}

/*
 * A CE with no traffic in any window of the set is left out of the fit:
 * CE index 1 below never sends; the others are test_lr_exact's CEs, so the
 * fit and the shares are the same (3.8181818, 0, 17.1818181).
 */
static void test_lr_idle_ce(void)
{
	static const double x[4][3] = { { 1, 0, 1 }, { 2, 0, 1 }, { 3, 0, 2 }, { 1, 0, 3 } };
	static const double y[4] = { 15, 17, 22, 21 };
	struct wins s;
	double coef[4], out[3];
	int solved;
	size_t t;

	for (t = 0; t < 4; t++)
		wins_set(&s, t, x[t], 3, y[t]);
	CU_ASSERT_EQUAL_FATAL(agg_est_lr_fit(s.w, 4, 3, coef, &solved), RM_OK);
	CU_ASSERT_EQUAL_FATAL(solved, 1);
	CU_ASSERT_EQUAL(coef[2], 0);
	NEAR(coef[3], 3, 1e-9);
	CU_ASSERT_EQUAL(agg_est_lr(s.w, 4, 3, out, &solved), RM_OK);
	NEAR(out[0], 21.0 * 2 / 11, 1e-9);
	CU_ASSERT_EQUAL(out[1], 0);
	NEAR(out[2], 21.0 * 9 / 11, 1e-9);
}

/*
 * Zero CPU: y = 0 everywhere fits with every coefficient 0, so every
 * estimate is 0. A last window where no CE sent: every contribution is 0,
 * every estimate 0 (the CPU stays unexplained).
 */
static void test_lr_zero(void)
{
	static const double x[4][2] = { { 1, 1 }, { 2, 1 }, { 3, 2 }, { 1, 3 } };
	struct wins s;
	double out[2] = { -1, -1 };
	int solved;
	size_t t;

	for (t = 0; t < 4; t++)
		wins_set(&s, t, x[t], 2, 0);
	CU_ASSERT_EQUAL(agg_est_lr(s.w, 4, 2, out, &solved), RM_OK);
	CU_ASSERT_EQUAL(solved, 1);
	CU_ASSERT_EQUAL(out[0], 0);
	CU_ASSERT_EQUAL(out[1], 0);
	/* y = 10 + 2 x1 + 3 x2 with a fifth window (0, 0) -> y = 10 */
	for (t = 0; t < 4; t++)
		wins_set(&s, t, x[t], 2, 10 + 2 * x[t][0] + 3 * x[t][1]);
	wins_set(&s, 4, (double[]){ 0, 0 }, 2, 10);
	CU_ASSERT_EQUAL(agg_est_lr(s.w, 5, 2, out, &solved), RM_OK);
	CU_ASSERT_EQUAL(solved, 1);
	CU_ASSERT_EQUAL(out[0], 0);
	CU_ASSERT_EQUAL(out[1], 0);
}

static void test_lr_bad_input(void)
{
	struct wins s;
	double out[2];
	int solved;

	wins_set(&s, 0, (double[]){ 1, -1 }, 2, 1);
	CU_ASSERT_EQUAL(agg_est_lr(s.w, 1, 2, out, &solved), RM_EINVAL);
	wins_set(&s, 0, (double[]){ 1, NAN }, 2, 1);
	CU_ASSERT_EQUAL(agg_est_lr(s.w, 1, 2, out, &solved), RM_EINVAL);
	wins_set(&s, 0, (double[]){ 1, 1 }, 2, 1);
	s.w[0].len_ns = 0;
	CU_ASSERT_EQUAL(agg_est_lr(s.w, 1, 2, out, &solved), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_est_lr(s.w, 0, 2, out, &solved), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_est_lr(s.w, 1, AGG_EST_MAX_CES + 1, out, &solved), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_est_lr(NULL, 1, 2, out, &solved), RM_EINVAL);
}

/* One window of a Kalman example: T = 1 s, capacity 1 CPU second. */
static void kwin(struct wins *s, size_t t, size_t n, const double *req, const double *rt_mean_s, double cpu_s)
{
	size_t i;

	wins_set(s, t, (double[]){ 0, 0, 0, 0 }, n, cpu_s * 1e9);
	for (i = 0; i < n; i++) {
		s->req[t][i] = req[i];
		s->rt[t][i] = req[i] * rt_mean_s[i] * 1e9;
	}
}

/*
 * One CE, two windows, R = 1e-4, Q automatic.
 * Window 1: N = 10, mean rt 0.05 s, CPU 0.2 s -> U = 0.2 (of 1 CPU).
 *   eq. 4.a: C'_0 = 0.05 * (1 - 0.2) = 0.04; x_0 = 0.04, P_0 = 0.04^2 = 0.0016.
 *   A = I, Q = 0 (no change seen yet): x- = 0.04, P- = 0.0016.
 *   H = 10, z = 0.2. S = 100 * 0.0016 + 1e-4 = 0.1601; K = 0.016 / 0.1601
 *   = 0.09993754. x = 0.04 + K (0.2 - 0.4) = 0.04 - 0.0032/0.1601
 *   = 0.02001249; U_1 = 10 x = 0.2001249 s. P = (1 - 10 K) 0.0016 = 9.993754e-7.
 * Window 2: N = 20, mean rt 0.06 s, CPU 0.4 s -> U = 0.4.
 *   C'_2 = 0.06 * 0.6 = 0.036; A = 0.036 / 0.04 = 0.9 (eq. 4.b);
 *   Q = (0.036 - 0.04)^2 = 1.6e-5. x- = 0.9 * 0.02001249 = 0.01801124;
 *   P- = 0.81 * 9.993754e-7 + 1.6e-5 = 1.680949e-5. H = 20, z = 0.4.
 *   S = 400 P- + 1e-4 = 6.823798e-3; K = 20 P- / S = 0.04926727;
 *   x = 0.01801124 + K (0.4 - 20 * 0.01801124) = 0.01801124 + K * 0.03977515
 *   = 0.01997086; U_2 = 20 x = 0.3994171 s.
 */
static void test_kalman_one_ce(void)
{
	struct agg_kalman k;
	struct wins s;
	double out[1];

	CU_ASSERT_EQUAL_FATAL(agg_kalman_init(&k, 0, 1e-4), RM_OK);
	kwin(&s, 0, 1, (double[]){ 10 }, (double[]){ 0.05 }, 0.2);
	kwin(&s, 1, 1, (double[]){ 20 }, (double[]){ 0.06 }, 0.4);
	CU_ASSERT_EQUAL_FATAL(agg_kalman_step(&k, &s.w[0], 1, out), RM_OK);
	NEAR(k.x[0], 0.04 - 0.0032 / 0.1601, 1e-12);
	NEAR(out[0], 0.2001249e9, 1e2);
	NEAR(k.p[0], 9.993754e-7, 1e-12);
	CU_ASSERT_EQUAL_FATAL(agg_kalman_step(&k, &s.w[1], 1, out), RM_OK);
	NEAR(k.qmax[0], 0.004, 1e-12);
	NEAR(k.x[0], 0.01997086, 1e-8);
	NEAR(out[0], 0.3994171e9, 2e2);
	agg_kalman_release(&k);
}

/*
 * Two CEs, one window, R = 1e-4: N = (10, 5), mean rt (0.02, 0.04) s,
 * CPU 0.5 s -> U = 0.5. C'_0 = (0.01, 0.02), P_0 = diag(1e-4, 4e-4).
 * H = (10, 5): H P H' = 100e-4 + 25 * 4e-4 = 0.02, S = 0.0201.
 * P H' = (1e-3, 2e-3), K = (1e-3, 2e-3) / 0.0201. z - H x- = 0.5 - 0.2 = 0.3.
 * x = (0.01 + 0.3e-3/0.0201, 0.02 + 0.6e-3/0.0201) = (0.02492537, 0.04985075);
 * U = (10 x1, 5 x2) = (0.2492537, 0.2492537) s.
 * P11 = 1e-4 - K1 * 1e-3 = 1e-4 - 1e-6/0.0201 = 5.024876e-5;
 * P12 = 0 - K1 * 2e-3 = -2e-6/0.0201 = -9.950249e-5.
 */
static void test_kalman_two_ces(void)
{
	struct agg_kalman k;
	struct wins s;
	double out[2];

	CU_ASSERT_EQUAL_FATAL(agg_kalman_init(&k, 0, 1e-4), RM_OK);
	kwin(&s, 0, 2, (double[]){ 10, 5 }, (double[]){ 0.02, 0.04 }, 0.5);
	CU_ASSERT_EQUAL_FATAL(agg_kalman_step(&k, &s.w[0], 2, out), RM_OK);
	NEAR(k.x[0], 0.01 + 0.3e-3 / 0.0201, 1e-12);
	NEAR(k.x[1], 0.02 + 0.6e-3 / 0.0201, 1e-12);
	NEAR(out[0], 0.2492537e9, 1e2);
	NEAR(out[1], 0.2492537e9, 1e2);
	NEAR(k.p[0], 1e-4 - 1e-6 / 0.0201, 1e-12);
	NEAR(k.p[1], -2e-6 / 0.0201, 1e-12);
	NEAR(k.p[2], k.p[1], 1e-15); /* P stays symmetric */
	agg_kalman_release(&k);
}

/*
 * A window without requests: H = 0, so K = 0 and x, P only go through the
 * projection (A = I, no forecast without response times): the state is
 * unchanged and every estimate 0, also with zero CPU. Then a window with
 * requests but no response times for a new CE (index 1, appearing late):
 * it starts at x_0 = CPU / sum N. CE 0 has no requests (H_0 = 0) and no
 * covariance with CE 1, so the update is the one-CE case:
 * x_0 = 0.3 / 30 = 0.01, P_0 = 1e-4, H = 30, z = 0.3, z - H x- = 0, so
 * x = 0.01 and U = 0.3 s exactly; CE 0's state does not move.
 */
static void test_kalman_idle_and_late_ce(void)
{
	struct agg_kalman k;
	struct wins s;
	double out[2], x0;

	CU_ASSERT_EQUAL_FATAL(agg_kalman_init(&k, 0, 1e-4), RM_OK);
	kwin(&s, 0, 1, (double[]){ 10 }, (double[]){ 0.05 }, 0.2);
	CU_ASSERT_EQUAL_FATAL(agg_kalman_step(&k, &s.w[0], 1, out), RM_OK);
	x0 = k.x[0];
	kwin(&s, 1, 1, (double[]){ 0 }, (double[]){ 0 }, 0);
	CU_ASSERT_EQUAL_FATAL(agg_kalman_step(&k, &s.w[1], 1, out), RM_OK);
	CU_ASSERT_EQUAL(out[0], 0);
	CU_ASSERT_EQUAL(k.x[0], x0);
	kwin(&s, 2, 2, (double[]){ 0, 30 }, (double[]){ 0, 0 }, 0.3);
	s.rt[2][1] = 0; /* response times unknown */
	CU_ASSERT_EQUAL_FATAL(agg_kalman_step(&k, &s.w[2], 2, out), RM_OK);
	CU_ASSERT_EQUAL(k.n, 2);
	CU_ASSERT_EQUAL(out[0], 0);
	NEAR(k.x[1], 0.01, 1e-12);
	NEAR(out[1], 0.3e9, 1e-3);
	NEAR(k.x[0], x0, 1e-15); /* no cross covariance: CE 0 untouched */
	/* fewer CEs than the state holds is refused */
	CU_ASSERT_EQUAL(agg_kalman_step(&k, &s.w[0], 1, out), RM_EINVAL);
	agg_kalman_release(&k);
}

/*
 * Fixed q: Q = diag(q^2) from the first step. One CE, q = 10 ms per
 * request: P- = P_0 + 1e-4 = 0.0017 in test_kalman_one_ce's window 1;
 * S = 100 * 0.0017 + 1e-4 = 0.1701, x = 0.04 - 0.2 * 0.017 / 0.1701.
 */
static void test_kalman_fixed_q(void)
{
	struct agg_kalman k;
	struct wins s;
	double out[1];

	CU_ASSERT_EQUAL_FATAL(agg_kalman_init(&k, 10e6, 1e-4), RM_OK);
	kwin(&s, 0, 1, (double[]){ 10 }, (double[]){ 0.05 }, 0.2);
	CU_ASSERT_EQUAL_FATAL(agg_kalman_step(&k, &s.w[0], 1, out), RM_OK);
	NEAR(k.x[0], 0.04 - 0.2 * 0.017 / 0.1701, 1e-12);
	agg_kalman_release(&k);
}

static void test_kalman_bad_input(void)
{
	struct agg_kalman k;
	struct wins s;
	double out[1];

	CU_ASSERT_EQUAL(agg_kalman_init(&k, 0, 0), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_kalman_init(&k, -1, 1), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_kalman_init(&k, 0, NAN), RM_EINVAL);
	CU_ASSERT_EQUAL_FATAL(agg_kalman_init(&k, 0, 1e-4), RM_OK);
	kwin(&s, 0, 1, (double[]){ -1 }, (double[]){ 0.05 }, 0.2);
	CU_ASSERT_EQUAL(agg_kalman_step(&k, &s.w[0], 1, out), RM_EINVAL);
	kwin(&s, 0, 1, (double[]){ 1 }, (double[]){ 0.05 }, INFINITY);
	CU_ASSERT_EQUAL(agg_kalman_step(&k, &s.w[0], 1, out), RM_EINVAL);
	CU_ASSERT_EQUAL(k.n, 0);
	CU_ASSERT_EQUAL(agg_kalman_step(&k, &s.w[0], AGG_EST_MAX_CES + 1, out), RM_EINVAL);
	agg_kalman_release(&k);
	agg_kalman_release(&k); /* twice is harmless */
}

/* MARE: est (1.1, 0.8, 5), truth (1, 1, 0): (0.1 + 0.2) / 2 = 0.15 (the
   third CE has no defined relative error). No CE with truth > 0: EINVAL. */
static void test_mare(void)
{
	double m = -1;

	CU_ASSERT_EQUAL(agg_est_mare((double[]){ 1.1, 0.8, 5 }, (double[]){ 1, 1, 0 }, 3, &m), RM_OK);
	NEAR(m, 0.15, 1e-12);
	CU_ASSERT_EQUAL(agg_est_mare((double[]){ 1 }, (double[]){ 0 }, 1, &m), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_est_mare(NULL, (double[]){ 1 }, 1, &m), RM_EINVAL);
}

static CU_TestInfo cases[] = {
	{ "LR: exact fit and shares by hand", test_lr_exact },
	{ "LR: least squares by hand (bytes, ns)", test_lr_least_squares },
	{ "LR: negative coefficient gives share 0", test_lr_negative },
	{ "LR: singular systems give no estimate", test_lr_singular },
	{ "LR: CE with no traffic is left out", test_lr_idle_ce },
	{ "LR: zero CPU, window without traffic", test_lr_zero },
	{ "LR: bad input refused", test_lr_bad_input },
	{ "Kalman: one CE, two steps by hand", test_kalman_one_ce },
	{ "Kalman: two CEs, one step by hand", test_kalman_two_ces },
	{ "Kalman: idle window, late CE without rt", test_kalman_idle_and_late_ce },
	{ "Kalman: fixed Q", test_kalman_fixed_q },
	{ "Kalman: bad input refused", test_kalman_bad_input },
	{ "MARE by hand", test_mare },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("est", cases)
