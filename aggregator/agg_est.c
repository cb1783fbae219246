/*
 * agg_est.c - the LR baseline (seed 000 §7.1, eq. 2), the Kalman filter
 * with state forecasting (seed 002 Algorithm 1, eqs. 3-4, §III.C) and MARE
 * (seed 002 §IV.B); see agg_est.h for the model and every choice made where
 * the papers leave one open. Owns the least-squares solver (Householder QR)
 * and the Kalman state arrays.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agg_est.h"
#include "rm_err.h"
#include "banned.h"

#define AGG_EST_RANK_TOL 1e-9

static int agg_est_win_ok(const struct agg_est_win *w, size_t n)
{
	size_t i;

	if (!w->rx || !w->req || !w->rt || !(w->len_ns > 0) || !isfinite(w->len_ns) || !(w->cpu_ns >= 0) ||
	    !isfinite(w->cpu_ns) || !(w->cap_ns >= 0) || !isfinite(w->cap_ns))
		return 0;
	for (i = 0; i < n; i++)
		if (!(w->rx[i] >= 0) || !isfinite(w->rx[i]) || !(w->req[i] >= 0) || !isfinite(w->req[i]) ||
		    !(w->rt[i] >= 0) || !isfinite(w->rt[i]))
			return 0;
	return 1;
}

/* ---- LR: seed 000 §7.1, eq. 2 ---- */

/*
 * Least squares min |A b - y| for A m x p (column-major, scaled in place,
 * destroyed) by Householder QR. *solved = 0 if rank < p. b gets p values.
 */
static void agg_lsq(double *a, size_t m, size_t p, double *y, double *b, int *solved)
{
	double colnorm[AGG_EST_MAX_CES + 1];
	size_t i, j, c;

	*solved = 0;
	memset(b, 0, p * sizeof(*b));
	if (m < p)
		return;
	for (j = 0; j < p; j++) {
		double s = 0;

		for (i = 0; i < m; i++)
			s += a[j * m + i] * a[j * m + i];
		colnorm[j] = sqrt(s);
		if (colnorm[j] == 0)
			return;
	}
	for (j = 0; j < p; j++) {
		double *v = &a[j * m], norm = 0, alpha, vtv, dot;

		for (i = j; i < m; i++)
			norm += v[i] * v[i];
		norm = sqrt(norm);
		if (norm <= AGG_EST_RANK_TOL * colnorm[j])
			return; /* column j is (nearly) a combination of the ones before */
		alpha = v[j] > 0 ? -norm : norm;
		v[j] -= alpha; /* v = x - alpha e_j, the Householder vector */
		vtv = 0;
		for (i = j; i < m; i++)
			vtv += v[i] * v[i];
		for (c = j + 1; c < p; c++) {
			double *u = &a[c * m];

			dot = 0;
			for (i = j; i < m; i++)
				dot += v[i] * u[i];
			dot = 2 * dot / vtv;
			for (i = j; i < m; i++)
				u[i] -= dot * v[i];
		}
		dot = 0;
		for (i = j; i < m; i++)
			dot += v[i] * y[i];
		dot = 2 * dot / vtv;
		for (i = j; i < m; i++)
			y[i] -= dot * v[i];
		v[j] = alpha; /* R_jj; below it v is no longer needed */
	}
	for (j = p; j-- > 0;) {
		double s = y[j];

		for (c = j + 1; c < p; c++)
			s -= a[c * m + j] * b[c];
		b[j] = s / a[j * m + j];
	}
	*solved = 1;
}

int agg_est_lr_fit(const struct agg_est_win *w, size_t nw, size_t n, double *coef, int *solved)
{
	size_t active[AGG_EST_MAX_CES], na = 0, i, t, p;
	double scale[AGG_EST_MAX_CES + 1], ys = 0, b[AGG_EST_MAX_CES + 1];
	double *a, *y;

	if (!w || !coef || !solved || n > AGG_EST_MAX_CES || nw == 0 || nw > AGG_EST_LR_MAX_WINDOWS)
		return RM_EINVAL;
	for (t = 0; t < nw; t++)
		if (!agg_est_win_ok(&w[t], n))
			return RM_EINVAL;
	*solved = 0;
	memset(coef, 0, (n + 1) * sizeof(*coef));
	/* columns: the intercept, then the CEs with bytes in some window; each
	   scaled to max |value| = 1 so that bytes and ns do not meet in one
	   ill-conditioned matrix */
	scale[0] = 1;
	for (i = 0; i < n; i++) {
		double mx = 0;

		for (t = 0; t < nw; t++)
			mx = w[t].rx[i] > mx ? w[t].rx[i] : mx;
		if (mx > 0) {
			scale[1 + na] = mx;
			active[na++] = i;
		}
	}
	for (t = 0; t < nw; t++)
		ys = w[t].cpu_ns > ys ? w[t].cpu_ns : ys;
	if (ys == 0)
		ys = 1;
	p = 1 + na;
	if (!(a = malloc(nw * p * sizeof(*a))) || !(y = malloc(nw * sizeof(*y)))) {
		free(a);
		return RM_ENOMEM;
	}
	for (t = 0; t < nw; t++) {
		a[t] = 1;
		for (i = 0; i < na; i++)
			a[(1 + i) * nw + t] = w[t].rx[active[i]] / scale[1 + i];
		y[t] = w[t].cpu_ns / ys;
	}
	agg_lsq(a, nw, p, y, b, solved);
	free(a);
	free(y);
	if (!*solved)
		return RM_OK;
	coef[0] = b[0] * ys;
	for (i = 0; i < na; i++)
		coef[1 + active[i]] = b[1 + i] * ys / scale[1 + i];
	return RM_OK;
}

int agg_est_lr(const struct agg_est_win *w, size_t nw, size_t n, double *out, int *solved)
{
	double coef[AGG_EST_MAX_CES + 1], contrib[AGG_EST_MAX_CES], sum = 0;
	const struct agg_est_win *last;
	size_t i;
	int rv;

	if (!out)
		return RM_EINVAL;
	if ((rv = agg_est_lr_fit(w, nw, n, coef, solved)) != 0)
		return rv;
	memset(out, 0, n * sizeof(*out));
	if (!*solved)
		return RM_OK;
	last = &w[nw - 1];
	/* §7.1: the coefficients as proportions dividing y(t); a_i < 0 -> 0 */
	for (i = 0; i < n; i++) {
		contrib[i] = coef[1 + i] > 0 ? coef[1 + i] * last->rx[i] : 0;
		sum += contrib[i];
	}
	if (!(sum > 0))
		return RM_OK;
	for (i = 0; i < n; i++)
		out[i] = last->cpu_ns * (contrib[i] / sum);
	return RM_OK;
}

/* ---- Kalman filter: seed 002 Algorithm 1, eqs. 3-4, §III.C ---- */

int agg_kalman_init(struct agg_kalman *k, double q_ns, double r)
{
	if (!k || !(q_ns >= 0) || !isfinite(q_ns) || !(r > 0) || !isfinite(r))
		return RM_EINVAL;
	memset(k, 0, sizeof(*k));
	k->q_s = q_ns * 1e-9;
	k->r = r;
	return RM_OK;
}

void agg_kalman_release(struct agg_kalman *k)
{
	if (!k)
		return;
	free(k->x);
	free(k->p);
	free(k->cprev);
	free(k->qmax);
	free(k->init);
	k->x = k->p = k->cprev = k->qmax = NULL;
	k->init = NULL;
	k->n = k->cap = 0;
}

/* Grows the state to n CEs (new ones uninitialised, P rows/columns 0). */
static int agg_kalman_grow(struct agg_kalman *k, size_t n)
{
	double *x, *p, *cprev, *qmax;
	unsigned char *init;
	size_t i;

	if (n <= k->n)
		return RM_OK;
	x = calloc(n, sizeof(*x));
	p = calloc(n * n, sizeof(*p));
	cprev = calloc(n, sizeof(*cprev));
	qmax = calloc(n, sizeof(*qmax));
	init = calloc(n, 1);
	if (!x || !p || !cprev || !qmax || !init) {
		free(x);
		free(p);
		free(cprev);
		free(qmax);
		free(init);
		return RM_ENOMEM;
	}
	if (k->n) {
		memcpy(x, k->x, k->n * sizeof(*x));
		memcpy(cprev, k->cprev, k->n * sizeof(*cprev));
		memcpy(qmax, k->qmax, k->n * sizeof(*qmax));
		memcpy(init, k->init, k->n);
		for (i = 0; i < k->n; i++)
			memcpy(&p[i * n], &k->p[i * k->n], k->n * sizeof(*p));
	}
	agg_kalman_release(k);
	k->x = x;
	k->p = p;
	k->cprev = cprev;
	k->qmax = qmax;
	k->init = init;
	k->n = k->cap = n;
	return RM_OK;
}

int agg_kalman_step(struct agg_kalman *k, const struct agg_est_win *w, size_t n, double *out)
{
	double h[AGG_EST_MAX_CES], cf[AGG_EST_MAX_CES], ph[AGG_EST_MAX_CES], kg[AGG_EST_MAX_CES];
	double T, z, util, nsum = 0, s, innov;
	size_t i, j;
	int rv;

	if (!k || !w || !out || n < k->n || n > AGG_EST_MAX_CES || !agg_est_win_ok(w, n))
		return RM_EINVAL;
	if ((rv = agg_kalman_grow(k, n)) != 0)
		return rv;
	T = w->len_ns * 1e-9;
	z = w->cpu_ns * 1e-9 / T; /* eq. 3.b: measured utilisation, in cores */
	/* eq. 4.a's idle rate needs U_t as a fraction of the machine */
	util = w->cap_ns > 0 ? w->cpu_ns / w->cap_ns : z;
	util = util < 0 ? 0 : util > 1 ? 1 : util;
	for (i = 0; i < n; i++) {
		h[i] = w->req[i] / T; /* H_t (eq. 3.b) */
		nsum += w->req[i];
		/* eq. 4.a: C'_i,t = rt_i,t (1 - U_t), rt the mean response time */
		cf[i] = w->req[i] > 0 && w->rt[i] > 0 ? (w->rt[i] * 1e-9 / w->req[i]) * (1 - util) : 0;
	}
	/* line 2-3: project the state and the covariance ahead */
	for (i = 0; i < n; i++) {
		double ai = 1, qi;

		if (!k->init[i]) {
			if (w->req[i] <= 0)
				continue; /* a CE enters the filter with its first requests */
			/* §III.C, t = 1: A = I, x_0 = C'_0, P_0 = diag(C'_0^2) */
			k->x[i] = cf[i] > 0 ? cf[i] : (nsum > 0 ? w->cpu_ns * 1e-9 / nsum : 0);
			k->p[i * n + i] = k->x[i] * k->x[i];
			k->init[i] = 1;
			k->cprev[i] = cf[i];
			if (k->q_s > 0)
				k->p[i * n + i] += k->q_s * k->q_s; /* P- = P_0 + Q */
			continue;
		}
		if (cf[i] > 0 && k->cprev[i] > 0) {
			double d = fabs(cf[i] - k->cprev[i]);

			ai = cf[i] / k->cprev[i]; /* eq. 4.b */
			if (d > k->qmax[i])
				k->qmax[i] = d;
		}
		if (cf[i] > 0)
			k->cprev[i] = cf[i];
		k->x[i] *= ai;
		/* P- = A P A' + Q with A diagonal: row i and column i scale by a_i */
		for (j = 0; j < n; j++) {
			k->p[i * n + j] *= ai;
			k->p[j * n + i] *= ai;
		}
		qi = k->q_s > 0 ? k->q_s : k->qmax[i]; /* §III.C: largest one-step change */
		k->p[i * n + i] += qi * qi;
	}
	/* line 4: K = P- H' / (H P- H' + R); the denominator is a scalar */
	s = k->r;
	for (i = 0; i < n; i++) {
		ph[i] = 0;
		for (j = 0; j < n; j++)
			ph[i] += k->p[i * n + j] * h[j];
		s += h[i] * ph[i];
	}
	innov = z;
	for (i = 0; i < n; i++)
		innov -= h[i] * k->x[i];
	for (i = 0; i < n; i++)
		kg[i] = ph[i] / s;
	/* line 5: x = x- + K (z - H x-) */
	for (i = 0; i < n; i++)
		k->x[i] += kg[i] * innov;
	/* line 9: P = (I - K H) P- = P- - K (H P-); H P- = ph' (P symmetric) */
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++)
			k->p[i * n + j] -= kg[i] * ph[j];
	/* lines 6-8: U_k,t = N_k C_k, in ns; a negative cost is no usage */
	for (i = 0; i < n; i++)
		out[i] = w->req[i] * (k->x[i] > 0 ? k->x[i] : 0) * 1e9;
	k->steps++;
	return RM_OK;
}

/* ---- MARE: seed 002 §IV.B ---- */

int agg_est_mare(const double *est, const double *truth, size_t n, double *mare)
{
	double sum = 0;
	size_t i, m = 0;

	if (!est || !truth || !mare)
		return RM_EINVAL;
	for (i = 0; i < n; i++) {
		if (!(truth[i] > 0) || !isfinite(truth[i]) || !isfinite(est[i]))
			continue;
		sum += fabs(est[i] - truth[i]) / truth[i];
		m++;
	}
	if (!m)
		return RM_EINVAL;
	*mare = sum / (double)m;
	return RM_OK;
}
