/*
 * agg_restart.h - how the totals a restarted collector reports for windows
 * an earlier instance of its node left open are split over those windows.
 *
 * A collector that is killed leaves windows whose parts reached the
 * aggregator but whose totals (U) never did. The next instance of the node
 * measures what the node did over those windows from the kernel's cumulative
 * counters (or, replaying, from the stream) and reports it as one lump for
 * n windows (WindowTotals.restart = n). This module decides, from what
 * storage holds for each window before the report, what U and what V
 * ('collector_restart') each window gets, so that every window balances and
 * nothing is counted twice:
 *   - a window that has totals keeps them; they are taken out of the lump;
 *   - a window without totals gets U = what it holds (the dead instance's
 *     parts and V), also taken out of the lump;
 *   - what the lump leaves (the work no part explains) goes to the last
 *     window as U and as V 'collector_restart'.
 * If the lump is smaller than what it must explain (counters coarser than
 * the parts), the windows still balance, nothing goes to V, and the
 * shortfall is returned for the caller to log.
 *
 * Pure: takes data, returns data. Reentrant.
 */
#ifndef AGG_RESTART_H
#define AGG_RESTART_H

#include <stddef.h>
#include <stdint.h>

#include "st.h"

#define AGG_REASON_COLLECTOR_RESTART "collector_restart"
#define AGG_RESTART_MAX_WINS 3600 /* windows one report may cover (older ones are left as they are) */

/* What storage holds for one window of the report, before it. */
struct agg_restart_win {
	int has_total;                 /* any U row */
	uint64_t total[ST_R_COUNT];    /* U */
	uint64_t charged[ST_R_COUNT];  /* sum of U_c and V */
};

/* What to add to one window. */
struct agg_restart_add {
	uint64_t total[ST_R_COUNT];    /* U */
	uint64_t v[ST_R_COUNT];        /* V 'collector_restart' */
};

/*
 * Splits lump[r] over w[0..n) (oldest first; n >= 1): out[0..n) gets what
 * to add to each window (zeroed first), short_by[r] what the lump lacked to
 * explain what the windows hold (0 when it sufficed, or when lump[r] is 0:
 * a resource the report does not measure).
 */
void agg_restart_split(const uint64_t lump[ST_R_COUNT], const struct agg_restart_win *w, size_t n,
		       struct agg_restart_add *out, uint64_t short_by[ST_R_COUNT]);

#endif
