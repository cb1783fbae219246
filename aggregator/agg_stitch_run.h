/*
 * agg_stitch_run.h - the stitcher's driver: runs the stitcher (agg_stitch.h)
 * on the aggregator's clocks. It owns the horizon clock (monotonic, never
 * backwards, continuing after a restart from the latest arrival of the
 * parts put back), stamps hellos with the wall clock, and bounds the stop's
 * charging of pending parts by time.
 *
 * Not thread-safe: one thread calls it (the aggregator's server loop).
 */
#ifndef AGG_STITCH_RUN_H
#define AGG_STITCH_RUN_H

#include <signal.h>
#include <stdint.h>

#include "agg_stitch.h"

struct agg_stitch_run;

struct agg_stitch_run_opts {
	/* The horizon clock's source, ns, non-decreasing; NULL: CLOCK_MONOTONIC.
	   Only differences matter (tests pass a clock they move by hand). */
	int64_t (*clock)(void *arg);
	void *clock_arg;
	/* Optional: a stop request (see agg_stitch_opts). */
	volatile sig_atomic_t *stop;
};

/* Opens the stitcher (agg_stitch_open: cfg and acct borrowed; opts may be
   NULL) and starts the horizon clock. Returns as agg_stitch_open. */
int agg_stitch_run_open(struct agg_stitch_run **out, const struct agg_config *cfg, struct agg_account *acct,
			const struct agg_stitch_run_opts *opts);
void agg_stitch_run_close(struct agg_stitch_run *r);

/* agg_stitch_hello with the wall clock's time. */
int agg_stitch_run_hello(struct agg_stitch_run *r, const Rametr__Hello *h, char *err, size_t errlen);

/* agg_stitch_batch at the horizon clock's time. */
int agg_stitch_run_batch(struct agg_stitch_run *r, const struct rm_wbatch *b, int *duplicate, char *err,
			 size_t errlen);

/* agg_stitch_tick at the horizon clock's time; call it about every second. */
int agg_stitch_run_tick(struct agg_stitch_run *r);

/*
 * For a stop: agg_stitch_give_up steps for at most budget_ns of the clock.
 * RM_OK (nothing pending is left), RM_ETIMEDOUT (the budget ran out: the
 * rest stays held for the next start), or as agg_stitch_give_up.
 */
int agg_stitch_run_give_up(struct agg_stitch_run *r, int64_t budget_ns);

/* The pairing engine's counters. */
void agg_stitch_run_get_stats(const struct agg_stitch_run *r, struct agg_pair_stats *out);

#endif
