/*
 * agg_stitch.h - the stitcher: decides on whose behalf each segment part
 * was done, then hands the charges to the accountant.
 *
 * Every part of a batch goes through the pairing engine (agg_pair.h): its
 * CE comes from the configuration rules applied to its inbound socket (or,
 * for Xen parts, from the domain id), else from the upstream segment whose
 * send produced the TCP bytes it received, on any node; a part that received
 * bytes caused by several CEs has its cost split by bytes. Parts whose
 * upstream has not arrived yet are held, up to the configured horizon
 * (agg_config.h `horizon`), measured on the aggregator's clock from their
 * arrival; what is still unresolved then goes to V with a reason. V
 * reasons: see agg_account.h.
 *
 * Exactly once, across restarts: a batch's charges, the charges of held
 * parts it resolved, the held parts it adds or drops, and its sequence
 * number are committed in one storage transaction. Held parts (the pending
 * ones and those whose sends later receivers may still need) are kept in
 * storage (st_held_*) and put back into the engine when the stitcher opens.
 * The stitcher reads no clock: the horizon clock is its driver's
 * (agg_stitch_run.h), which does not run while the aggregator is down, so
 * held parts get the rest of their horizon after a restart, which is when
 * collectors resend what they could not deliver. If a transaction fails, the engine is
 * rebuilt from storage, so a batch the collector sends again is applied to
 * the state it was first applied to.
 *
 * Not thread-safe: one thread calls it (the aggregator's server loop).
 */
#ifndef AGG_STITCH_H
#define AGG_STITCH_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "rm_wire.h"
#include "agg_account.h"
#include "agg_config.h"
#include "agg_pair.h"

struct agg_stitch;

/* Parts given up per transaction, and parts of a batch or of the restore
   between two looks at a stop request: a bounded unit of work. */
#define AGG_STEP_PARTS 256

struct agg_stitch_opts {
	/* Optional (NULL: none): a stop request, e.g. set by a signal handler.
	   Looked at between bounded steps (AGG_STEP_PARTS parts) of a batch,
	   a tick and the restore at open; once set, a batch in progress is
	   rolled back (RM_ESTATE: the collector sends it again), a tick leaves
	   the rest for later and the restore stops (RM_ESTATE). */
	volatile sig_atomic_t *stop;
};

/*
 * Opens a stitcher and puts back the parts held in storage (committing
 * whatever that resolves). cfg and acct are borrowed and must outlive the
 * stitcher; opts may be NULL. Returns RM_OK; RM_EINVAL; RM_ENOMEM; RM_ESQL
 * or RM_EPROTO (a held part in storage that does not decode) with the
 * problem logged; RM_ESTATE if a stop was requested meanwhile.
 */
int agg_stitch_open(struct agg_stitch **out, const struct agg_config *cfg, struct agg_account *acct,
		    const struct agg_stitch_opts *opts);
void agg_stitch_close(struct agg_stitch *s);

/* A collector said hello at seen_unix_ns (wall clock): record the node.
   RM_OK, RM_EINVAL (err set), RM_ESQL. */
int agg_stitch_hello(struct agg_stitch *s, const Rametr__Hello *h, int64_t seen_unix_ns, char *err, size_t errlen);

/* The latest arrival (horizon clock) of the parts restored at open, 0 if
   none: a horizon clock continues from there after a restart. */
int64_t agg_stitch_resume_ns(const struct agg_stitch *s);

/*
 * Attribute and apply one batch (already validated by rm_wire_decode) that
 * arrived at now (the horizon clock: ns, non-decreasing over calls).
 * *duplicate = 1 if it had been applied before. Returns RM_OK; RM_EPROTO /
 * RM_EINVAL with err set if the batch is refused (the collector must not
 * resend it); RM_ESQL / RM_ENOMEM if it could not be stored now (retry).
 */
int agg_stitch_batch(struct agg_stitch *s, const struct rm_wbatch *b, int64_t now, int *duplicate, char *err,
		     size_t errlen);

/*
 * Gives up held parts past the horizon at now (charging them), in
 * transactions of AGG_STEP_PARTS parts, then drops expired send ranges;
 * call it about every second. On a stop request it leaves what is left for
 * the next tick or start. Returns RM_OK, or RM_ESQL / RM_ENOMEM (logged;
 * the next call tries again).
 */
int agg_stitch_tick(struct agg_stitch *s, int64_t now);

/*
 * One step of a stop that should leave every window balanced: gives up at
 * most AGG_STEP_PARTS pending parts, charging them as at the horizon, in one
 * transaction; *more = 1 if pending parts are left. Resolved parts whose
 * sends later receives may need stay held for the next start, and so do the
 * pending parts a caller leaves. RM_ESTATE (nothing done) when a stop
 * interrupted a batch: the engine is behind storage, whose held parts the
 * next start puts back. Otherwise returns as agg_stitch_tick.
 */
int agg_stitch_give_up(struct agg_stitch *s, int *more);

/* The pairing engine's counters. */
void agg_stitch_get_stats(const struct agg_stitch *s, struct agg_pair_stats *out);

#endif
