/*
 * st_est.h - storage of the estimators (aggregator/agg_est.h): their
 * inputs, and their per-CE CPU estimates, kept in tables of their own
 * (schema v4) so that an estimate is never read as a measurement.
 *
 *   est_input   per (server, window, CE): completed requests, the sum of
 *               their response times (ns) and inbound bytes. Additive, like
 *               the usage rows, written by the accountant in the batch's
 *               transaction.
 *   est_window  per (server, method, window): the estimator dealt with the
 *               window; solved = 0 if it could not estimate it (LR: singular
 *               system).
 *   estimate    per (server, method, window, CE): the estimated CPU (ns).
 *               Replaced, not added, when a window is estimated again.
 *
 * Methods are ST_EST_LR and ST_EST_KALMAN. Names and windows follow st.h's
 * rules; values are integers in [0, INT64_MAX]. Same thread-safety and
 * error conventions as st.h (errors logged, RM_EPERM on a read-only handle).
 */
#ifndef RM_ST_EST_H
#define RM_ST_EST_H

#include <stddef.h>
#include <stdint.h>

#include "st.h"

#define ST_EST_LR "lr"
#define ST_EST_KALMAN "kalman"

/* "lr" or "kalman" (exact). Returns 1 if name is a method, else 0. */
int st_est_method_ok(const char *name);

/* Adds to the inputs of (server, window, ce). RM_OK, RM_EINVAL (bad name,
 * window, value above INT64_MAX or a sum that would be), RM_ESQL, RM_EPERM. */
int st_add_est_input(st_db *db, const char *server, int64_t win_start_ns, int64_t win_len_ns, const char *ce,
		     uint64_t requests, uint64_t rt_ns, uint64_t rx_bytes);

/* One CE's inputs in one window. */
struct st_est_ce {
	char ce[ST_NAME_MAX + 1];
	uint64_t requests, rt_ns, rx;
};

/* One window of a server as the estimators see it. */
struct st_est_window {
	int64_t start_ns, len_ns;
	uint64_t cpu_ns, capacity_ns; /* the server's stored CPU total U and capacity */
	size_t n;                     /* CEs with inputs, sorted by name */
	const struct st_est_ce *ce;
};

/*
 * Calls cb for every window of server that has a stored CPU total with
 * since_ns <= start and start + len <= until_end_ns, in (start, len) order,
 * with the window's inputs (n = 0 when it has none). w is valid during the
 * call. Stops at cb's first non-zero return and returns it. RM_OK,
 * RM_EINVAL, RM_ESQL, RM_ENOMEM. Also on a read-only handle.
 */
int st_est_windows(st_db *db, const char *server, int64_t since_ns, int64_t until_end_ns,
		   int (*cb)(void *arg, const struct st_est_window *w), void *arg);

/* The last window (largest start, then length) of server with a stored CPU
 * total: RM_OK, RM_ENOENT (none; not logged), RM_EINVAL, RM_ESQL. */
int st_est_latest(st_db *db, const char *server, int64_t *start_ns, int64_t *len_ns);

/* The start of the k-th (k >= 1) window with a CPU total before start_ns:
 * RM_OK, RM_ENOENT (fewer than k; not logged), RM_EINVAL, RM_ESQL. */
int st_est_back(st_db *db, const char *server, int64_t start_ns, unsigned k, int64_t *out_ns);

/* The last window (by start) method dealt with for server: RM_OK,
 * RM_ENOENT (none; not logged), RM_EINVAL, RM_ESQL. */
int st_est_last(st_db *db, const char *server, const char *method, int64_t *start_ns);

/*
 * Records that method dealt with (server, window): solved = 0 (no estimate;
 * ce/value ignored) or 1 with value[i] the estimate for ce[i], i < n.
 * Replaces what was stored for that window and method. RM_OK, RM_EINVAL,
 * RM_ESQL, RM_EPERM. Call it inside st_begin/st_commit to group windows.
 */
int st_est_put(st_db *db, const char *server, const char *method, int64_t win_start_ns, int64_t win_len_ns,
	       int solved, const char *const *ce, const uint64_t *value, size_t n);

/*
 * Estimates of method in the shape of st_query_usage (same filters, rows
 * and order), resource cpu only (q->resource must be -1 or ST_R_CPU; other
 * resources give no rows): per (server, ce[, window]) value = the sum of
 * the estimates over the windows method solved in the range; total and
 * capacity = the server's U and capacity over those same windows; plus per
 * group a ST_CE_UNACCOUNTABLE row with residual = U - sum of the estimates
 * (LR divides all of U, so it is 0 unless no CE sent anything; the Kalman
 * filter's estimates need not add up to U) and value = max(residual, 0).
 * Returns as st_query_usage, plus RM_EINVAL for an unknown method.
 */
int st_query_est(st_db *db, const struct st_query *q, const char *method, struct st_row **rows, size_t *n);

#endif
