/*
 * agg_est_run.h - runs the estimators of agg_est.h for the servers named in
 * [estimate SERVER] sections (agg_config.h) and stores their per-CE CPU
 * estimates per window (st_est.h), apart from the measurements.
 *
 * Inputs per window of SERVER, all from storage: the server's CPU total U
 * and capacity (stored from its collector's window totals) and, per CE, the
 * estimators' inputs the accountant stored from the server's own parts
 * (inbound bytes, completed requests, their response times; see
 * agg_account_add_est). A window is estimated once it is complete: when
 * the server has reported a window that starts at least a horizon
 * (agg_config.h `horizon`, how long pairing may still change a window's
 * CEs) after the window's end; at a stop (final pass) every window with a
 * total is estimated. Windows are estimated once, in order: a delta that
 * arrives for a window after it was estimated is not reflected.
 *
 * LR: the set of each window t is the last lr_windows windows with a total
 * up to and including t (fewer at the start; no estimate while the system
 * is singular, recorded as an unsolved window). Kalman: one filter per
 * server, stepped once per window in order; after a restart it is rebuilt
 * by replaying the windows already estimated (nothing rewritten). At most
 * AGG_EST_MAX_CES CEs per server are estimated (the first seen); the
 * inputs of others are ignored with a warning.
 *
 * Not thread-safe: the aggregator's loop calls it between batches.
 */
#ifndef AGG_EST_RUN_H
#define AGG_EST_RUN_H

#include "agg_config.h"
#include "st.h"

#define AGG_EST_RUN_BATCH 600 /* new windows estimated per server and method per tick */

struct agg_est_run;

/* cfg and db are borrowed and must outlive the runner. RM_OK, RM_EINVAL, RM_ENOMEM. */
int agg_est_run_open(struct agg_est_run **out, const struct agg_config *cfg, st_db *db);
void agg_est_run_close(struct agg_est_run *r);

/*
 * Estimates the complete windows not estimated yet (final: every window
 * with a total, until none is left), each (server, method) in one storage
 * transaction per batch of windows. Returns RM_OK or the first error
 * (logged; the next call tries again from storage's state).
 */
int agg_est_run_tick(struct agg_est_run *r, int final);

/* Windows estimated (solved) and windows without an estimate, so far. */
void agg_est_run_counts(const struct agg_est_run *r, uint64_t *solved, uint64_t *unsolved);

#endif
