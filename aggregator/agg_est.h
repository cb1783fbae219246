/*
 * agg_est.h - estimators of per-CE CPU from aggregate data: the LR baseline
 * of seed 000 (§7.1, eq. 2), the Kalman filter of seed 002 (Algorithm 1 with
 * the state forecasting of eq. 4 and the parameter rules of §III.C), and the
 * MARE metric of seed 002 (§IV.B). Pure logic: no I/O; LR allocates scratch
 * per call, the Kalman filter its state; the aggregator feeds them windows read from storage.
 *
 * Inputs per window of one server (what a collector-less statistics tool
 * also sees): per CE the inbound bytes, the number of completed requests and
 * the sum of their response times; the server's total busy CPU, its
 * capacity (ncpu * window length) and the window length. CEs are columns
 * 0..n-1; the caller keeps a CE at the same index across windows.
 *
 * LR (seed 000 §7.1, eq. 2): a0 + a1 x1(t) + ... + an xn(t) = y(t), x_i the
 * inbound bytes of CE i, y the server's CPU, solved by least squares
 * (Householder QR on column-scaled data) over a sliding window set: the
 * estimate of window t uses the last `nw` windows up to and including t (the
 * paper says "for each interval t" but one interval is one equation; the
 * caller picks the set size, the aggregator's default is 30 windows).
 * "Coefficients as proportions": CE i's contribution in t is a_i x_i(t) and
 * its estimate is y(t) * a_i x_i(t) / sum_j a_j x_j(t); the intercept a0 is
 * not a CE's and is spread with the rest (the paper divides all of y(t)).
 * Negative coefficients (the paper leaves them open): a CE cannot have
 * caused negative CPU, so a_i < 0 counts as 0 (its estimate is 0). A CE
 * with no bytes in any window of the set is left out of the fit (estimate
 * 0). If the remaining system is singular (fewer windows than unknowns,
 * collinear inputs: |R_jj| <= 1e-9 of its column's norm) there is no
 * estimate. If every contribution in t is 0, every estimate is 0.
 *
 * Kalman (seed 002 §III.B, eqs. 2-3, Algorithm 1): state x_t = [C_1..C_n],
 * the mean CPU seconds per request of CE i (each CE is one "transaction
 * type", so tenant = type and M = L = n); measurement z_t = U_t = CPU
 * seconds / T (eq. 3.b), H_t = [N_1/T .. N_n/T] with N_i the completed
 * requests. Per window: x- = A x; P- = A P A' + Q; K = P- H' (H P- H' + R)^-1;
 * x = x- + K (z - H x-); U_k = N_k C_k (clamped at 0 for output);
 * P = (I - K H) P-. Forecasting (eq. 4.a): C'_i,t = rt_i,t (1 - U_t) with
 * rt the mean response time and U_t the utilisation as a fraction of
 * capacity (busy / (ncpu * T), clamped to [0, 1]); A_t = diag(C'_i,t /
 * C'_i,t-1) (eq. 4.b), 1 where either is unknown (CE idle, no response
 * times); C'_i,t-1 is the CE's last known forecast. Initialisation (per CE,
 * at its first window with requests, "t = 1"): A = I, x_0 = C'_i,0, P_0 =
 * diag(C'^2); if no response time is known then x_0 = CPU / sum N (the
 * average cost of a request in that window). Q (§III.C: "square of the
 * largest one-step change in x"): diag(q^2) with q given, or, with q = 0,
 * per CE the largest |C'_i,t - C'_i,t-1| seen so far. R (§III.C: variance
 * of the measured utilisation under no load): given, in cores^2.
 *
 * MARE (seed 002 §IV.B): mean over CEs of |C_i - D_i| / D_i, estimate C
 * against measurement D; CEs with D_i = 0 are left out (undefined there).
 *
 * Thread safety: functions are pure except on the agg_kalman passed in;
 * one agg_kalman per thread.
 */
#ifndef AGG_EST_H
#define AGG_EST_H

#include <stddef.h>
#include <stdint.h>

#define AGG_EST_MAX_CES 64       /* CEs per server an estimator handles */
#define AGG_EST_LR_MAX_WINDOWS 4096
#define AGG_EST_LR_WINDOWS_DEFAULT 30
#define AGG_EST_KALMAN_R_DEFAULT 1e-4 /* cores^2: (1% of a core)^2 */

/* One window of one server. Arrays have n entries (the CEs). */
struct agg_est_win {
	const double *rx;   /* inbound bytes per CE */
	const double *req;  /* completed requests per CE */
	const double *rt;   /* sum of those requests' response times, ns (0 = unknown) */
	double cpu_ns;      /* the server's busy CPU */
	double cap_ns;      /* ncpu * window length; 0 = unknown (then 1 CPU) */
	double len_ns;      /* window length T, > 0 */
};

/*
 * LR fit over windows w[0..nw) with n CEs (n <= AGG_EST_MAX_CES, nw <=
 * AGG_EST_LR_MAX_WINDOWS): least squares of cpu_ns on rx (eq. 2). coef gets
 * n + 1 values (coef[0] = a0 in ns, coef[1 + i] = a_i in ns per byte; 0 for
 * CEs left out). *solved = 0 if the system is singular (coef all 0).
 * Returns RM_OK or RM_EINVAL (NULL, n or nw out of range, len_ns <= 0).
 */
int agg_est_lr_fit(const struct agg_est_win *w, size_t nw, size_t n, double *coef, int *solved);

/*
 * LR estimate of the last window w[nw-1] from the fit over w[0..nw):
 * out[i] = CPU ns of CE i (sum = cpu_ns unless every contribution is 0).
 * *solved as agg_est_lr_fit (out all 0 when 0). Returns as agg_est_lr_fit.
 */
int agg_est_lr(const struct agg_est_win *w, size_t nw, size_t n, double *out, int *solved);

/* Kalman filter state of one server. */
struct agg_kalman {
	size_t n, cap;       /* CEs tracked, allocated */
	double q_s, r;       /* q in CPU seconds per request (0 = auto), R in cores^2 */
	double *x;           /* C_i, CPU seconds per request */
	double *p;           /* P, n x n row-major */
	double *cprev;       /* last forecast C'_i (eq. 4.a), 0 = none */
	double *qmax;        /* largest one-step change of C'_i seen (auto Q) */
	unsigned char *init; /* CE i initialised */
	uint64_t steps;
};

/*
 * Sets up an empty filter. q_ns: the largest one-step change of a CE's CPU
 * per request in ns (Q = diag(q^2)); 0 = auto (see above). r: measurement
 * variance in cores^2, > 0. Returns RM_OK, RM_EINVAL (negative or
 * non-finite q, r <= 0 or non-finite). Release with agg_kalman_release.
 */
int agg_kalman_init(struct agg_kalman *k, double q_ns, double r);
void agg_kalman_release(struct agg_kalman *k);

/*
 * One recursive step (Algorithm 1) for window w with n CEs (n may grow
 * between calls, never shrink; n <= AGG_EST_MAX_CES). out[i] = U_i,t in CPU
 * ns (N_i * max(C_i, 0) * 1e9). Returns RM_OK, RM_EINVAL (bad arguments,
 * negative or non-finite inputs), RM_ENOMEM (state unchanged on error).
 */
int agg_kalman_step(struct agg_kalman *k, const struct agg_est_win *w, size_t n, double *out);

/*
 * MARE of est against truth over n CEs. Returns RM_OK with *mare, or
 * RM_EINVAL (NULL, or no CE with truth > 0).
 */
int agg_est_mare(const double *est, const double *truth, size_t n, double *mare);

#endif
