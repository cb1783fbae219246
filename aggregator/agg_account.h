/*
 * agg_account.h - the accountant: turns attributed charges and window totals
 * of one collector batch into U_c, V and U rows in storage, exactly once.
 *
 * One batch is applied in one storage transaction together with the
 * collector's sequence number, so a batch sent twice (lost ack, aggregator
 * restart) is recognised and applied once. Charges are summed per (window,
 * CE or reason, resource) in memory before they are written.
 *
 * V reasons written here: "unsegmented" (work done outside any segment),
 * "no_ce" (segments whose client matched no CE rule), "lost" (CPU of parts
 * the kernel could not emit, slices older than the kernel keeps, Xen
 * lost-record spans), "dom0" (Xen driver-domain CPU not charged to a guest).
 * U is the collector's own measurement of the node (busy CPU, all socket and
 * disk bytes), so sum_c U_c + V = U is checked, not assumed: any difference
 * shows as the "unexplained" residual in storage queries.
 *
 * Not thread-safe: one thread applies batches.
 */
#ifndef AGG_ACCOUNT_H
#define AGG_ACCOUNT_H

#include <stddef.h>
#include <stdint.h>

#include "st.h"

#define AGG_REASON_UNSEGMENTED "unsegmented"
#define AGG_REASON_NO_CE "no_ce"
#define AGG_REASON_LOST "lost"
#define AGG_REASON_DOM0 "dom0"

/* One attributed piece of usage: to a CE (ce != NULL) or to V (reason). */
struct agg_charge {
	uint64_t win;
	const char *ce;       /* borrowed; NULL = unaccountable */
	const char *reason;   /* borrowed; used when ce == NULL */
	uint64_t v[ST_R_COUNT];
};

/* Per-window node totals (deltas), as measured by the collector. */
struct agg_window {
	uint64_t win;
	uint64_t total[ST_R_COUNT];    /* U: busy ns, rx, tx, disk read, disk write */
	uint64_t unseg[ST_R_COUNT];    /* part of U done outside segments */
	uint64_t lost_ns;
	uint64_t capacity_ns;
	uint64_t dropped_parts;
};

struct agg_batch_meta {
	const char *node, *backend;
	uint64_t instance, seq, window_ns;
};

struct agg_account;

/* db is borrowed and must outlive the accountant. */
int agg_account_open(struct agg_account **out, st_db *db);
void agg_account_close(struct agg_account *a);

/*
 * Applies one batch. *duplicate = 1 (and nothing written) if this
 * (node, instance, seq) was applied before. Returns RM_OK, RM_EINVAL for a
 * window whose start does not fit in int64, RM_ESQL / RM_ENOMEM (nothing
 * written; the collector should retry).
 */
int agg_account_apply(struct agg_account *a, const struct agg_batch_meta *m, const struct agg_charge *ch,
		      size_t nch, const struct agg_window *w, size_t nw, int *duplicate);

/* Records a collector's hello (node metadata, last seen). */
int agg_account_node(struct agg_account *a, const struct st_node *n);

struct agg_account_stats {
	uint64_t batches, duplicates, charges, rows_written, gaps;
};
void agg_account_get_stats(const struct agg_account *a, struct agg_account_stats *out);

#endif
