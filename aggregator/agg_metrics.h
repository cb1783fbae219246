/*
 * agg_metrics.h - the aggregator's Prometheus metrics: counters of usage per
 * tenant, server and resource, the servers' totals, and the aggregator's
 * own health, rendered in the Prometheus text format (version 0.0.4).
 *
 * Usage is counted once its window has settled: the accountant reports
 * every commit (agg_metrics_usage), and a window's amounts move into the
 * counters when nothing was added to it for settle_ns on the aggregator's
 * clock (held parts are charged within the pairing horizon, so settle_ns is
 * the horizon plus a margin). At that moment the window's unaccountable
 * share V = U - sum_c U_c is known and is counted as the tenant
 * "__unaccountable__", so that the sum over tenants equals the server's
 * total. A counter never goes down: when a window charges the tenants more
 * than U (a negative V, as 'rametrctl check' would show), V stays where it
 * is until U catches up, and meanwhile the tenants sum to more than U.
 * Amounts arriving for a window after it settled are counted when they
 * settle in turn.
 *
 * Counters live in memory and start at zero when the aggregator starts
 * (rametr_aggregator_start_time_seconds tells Prometheus about the reset;
 * rate() and increase() handle it). Windows still settling at a stop are in
 * storage but not in the counters.
 *
 * Bounds: at most AGG_METRICS_MAX_PENDING unsettled amounts are kept; past
 * that the oldest windows are settled early (counted in
 * rametr_metrics_early_settled_windows_total). Servers and tenants are
 * kept for the life of the process.
 *
 * Thread-safe: every function takes the object's mutex, so the server loop
 * may feed it while an HTTP thread renders it.
 */
#ifndef AGG_METRICS_H
#define AGG_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "st.h"

#define AGG_METRICS_MAX_PENDING 1000000
#define AGG_METRICS_CONNECTED_NS 30000000000LL /* a collector heard from this recently is connected */
#define AGG_METRICS_V_TENANT ST_CE_UNACCOUNTABLE

struct agg_metrics;

/* Opens an empty set of metrics. settle_ns > 0; start_unix_ns is exported as
 * rametr_aggregator_start_time_seconds. RM_OK, RM_EINVAL, RM_ENOMEM. */
int agg_metrics_open(struct agg_metrics **out, int64_t settle_ns, int64_t start_unix_ns);
void agg_metrics_close(struct agg_metrics *m);

/*
 * Committed usage of window [start, start + len) of server node: of tenant
 * ce, or with ce == NULL the server's total U; v holds one amount per
 * resource (ns of CPU, bytes). now_ns is the aggregator's monotonic clock.
 * Amounts that cannot be kept (out of memory) are counted in
 * rametr_metrics_lost_amounts_total. Never fails.
 */
void agg_metrics_usage(struct agg_metrics *m, const char *node, int64_t start, int64_t len, const char *ce,
		       const uint64_t v[ST_R_COUNT], int64_t now_ns);

/* Parts the collector of node reports dropped in its kernel ring. */
void agg_metrics_dropped(struct agg_metrics *m, const char *node, uint64_t parts);

/* Moves every window quiet since now_ns - settle_ns into the counters (all
 * windows if all != 0, e.g. at a stop). Call it about every second. */
void agg_metrics_settle(struct agg_metrics *m, int64_t now_ns, int all);

enum agg_metrics_result { AGG_METRICS_OK, AGG_METRICS_DUPLICATE, AGG_METRICS_REFUSED, AGG_METRICS_RETRY };

/* A batch from node was answered with result (at now_ns, monotonic). */
void agg_metrics_batch(struct agg_metrics *m, const char *node, enum agg_metrics_result result, int64_t now_ns);

/* The stitcher's figures: parts taken in (total), parts held now and of
 * those the ones still pending, parts evicted because too many were held. */
struct agg_metrics_health {
	uint64_t parts, held, pending, evicted;
};
void agg_metrics_set_health(struct agg_metrics *m, const struct agg_metrics_health *h);

/*
 * Writes every metric in the Prometheus text format to f (ages relative to
 * now_ns, monotonic). Returns RM_OK or RM_EIO.
 */
int agg_metrics_render(struct agg_metrics *m, FILE *f, int64_t now_ns);

/*
 * The HTTP endpoint (agg_metrics_http.c, nng's HTTP server): serves GET
 * /metrics on listen ("HOST:PORT" or "http://HOST:PORT") from nng's own
 * threads. m is borrowed and must outlive the server. Returns RM_OK and
 * *out, or RM_EINVAL (bad address) / RM_EIO (cannot listen), logged as
 * "failed to serve metrics on '<listen>': <reason>".
 */
struct agg_metrics_http;
int agg_metrics_http_open(struct agg_metrics_http **out, const char *listen, struct agg_metrics *m);
void agg_metrics_http_close(struct agg_metrics_http *h);

#endif
