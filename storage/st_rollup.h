/*
 * st_rollup.h - the coarser series of the accounting tables and how long
 * each series is kept.
 *
 * Besides the windows the aggregator writes (the "1 s" series, whatever its
 * window length), storage keeps three rolled-up series with steps of 1 min,
 * 1 h and 1 day. A bucket [b, b + step) of a series holds, per server,
 * resource and CE (and per reason of V, per total/capacity, per split count)
 * the integer sum of the rows of the next finer series whose window START
 * lies in the bucket, so sum_c U_c + V = U holds in every bucket exactly as
 * in the windows it sums, and a query whose bounds are multiples of a step
 * gives the same numbers from that series as from the 1 s rows.
 *
 * Rolling up happens as windows are written: each write of a window (an
 * additive upsert) also adds its value to the window's bucket in each of
 * the three series, in the same savepoint. So every series is complete up
 * to the latest window and a query whose bounds are multiples of a step
 * reads no finer rows; a write that arrives late (for an old window) is
 * counted in every series alike. The settled horizon (st_horizon_set: the
 * time before which the aggregator expects no more writes) decides only
 * what retention deletes and what a billing job may export as final.
 *
 * Usage and totals also go, in the same savepoint, to every series summed
 * over servers (per resource and CE: for queries that do not group by
 * server) and, per server, to their calendar month (UTC; for sums over
 * whole months, e.g. monthly bills). The month series is never thinned.
 *
 * Retention deletes the rows of a series that start more than keep_ns
 * before the horizon (cut at a bucket boundary of the next coarser series,
 * which holds the same sums). Queries (st.h) then answer from the coarser
 * series.
 */
#ifndef RM_ST_ROLLUP_H
#define RM_ST_ROLLUP_H

#include <stdint.h>

#include "st.h"

enum st_series { ST_SERIES_1S = 0, ST_SERIES_1M, ST_SERIES_1H, ST_SERIES_1D, ST_SERIES_COUNT };

#define ST_NS_PER_S 1000000000LL
#define ST_ROLLUP_MAX_SPAN_NS (3600 * ST_NS_PER_S) /* retention per series and call: one tick's work */

/* Step of a series in ns (0 for ST_SERIES_1S: the stored windows), and its
 * name ("1s", "1m", "1h", "1d"; "?" out of range). Thread-safe. */
int64_t st_series_step(enum st_series s);
const char *st_series_name(enum st_series s);

/* How long each series is kept before the horizon; 0 = for ever. */
struct st_retention {
	int64_t keep_ns[ST_SERIES_COUNT];
};

/* Defaults: 1 s for 2 days, 1 min for 30 days, 1 h for 13 months (395
 * days), 1 day for ever. */
void st_retention_default(struct st_retention *r);

/*
 * The settled horizon (Unix ns): st_horizon_set() stores max(stored,
 * settled_ns) -- it never moves back. st_horizon_get() sets *settled_ns, or
 * returns RM_ENOENT (not logged) if never set. RM_OK, RM_EINVAL, RM_ESQL,
 * RM_EPERM (read-only handle, set).
 */
int st_horizon_set(st_db *db, int64_t settled_ns);
int st_horizon_get(st_db *db, int64_t *settled_ns);

/*
 * End (start + length) of the latest stored window of any server, from the
 * totals: RM_OK, RM_ENOENT (not logged) when there is none, RM_EINVAL,
 * RM_ESQL.
 */
int st_latest_end(st_db *db, int64_t *end_ns);

/*
 * Applies retention r (NULL: st_retention_default) relative to the stored
 * horizon, deleting at most max(ST_ROLLUP_MAX_SPAN_NS, the next series'
 * step) of each series per call, in one transaction of its own (RM_ESTATE
 * if one is open). *more (if not NULL) is set when a series stopped at
 * that limit: call again. Without a horizon nothing happens (RM_OK).
 * Returns RM_OK, RM_EINVAL (negative keep), RM_EPERM, RM_ESQL (nothing is
 * changed).
 */
int st_rollup(st_db *db, const struct st_retention *r, int *more);

/* State of series s: *rolled_until = INT64_MAX (every series holds every
 * write), rows starting before *kept_from were deleted by retention
 * (INT64_MIN: none). RM_OK, RM_EINVAL, RM_ESQL. */
int st_series_state(st_db *db, enum st_series s, int64_t *rolled_until, int64_t *kept_from);

#endif
