/*
 * col_batcher.h - the collector's batching sink between a backend and the
 * sender: parts are encoded as they arrive (one read of the ring record, one
 * copy), window totals are summed per window, parts the aggregator's rules
 * decide are summed by col_merge first, and a batch goes to
 * col_sender_submit_enc() when the caller flushes (on its timer), when
 * batch_parts parts and merged records are held, when the encoding nears
 * COL_BATCH_BYTES, or when COL_MAX_WINS windows are held.
 *
 * Threads: a batcher is used by the backend's thread only, except
 * col_batcher_on_decided(), which runs on the sender's thread and only
 * stages matches in the col_merge (thread-safe there).
 */
#ifndef COL_BATCHER_H
#define COL_BATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "col_backend.h"
#include "col_enc.h"
#include "col_merge.h"
#include "col_sender.h"
#include "rm_match.h"

#define COL_BATCH_PARTS 4096  /* default batch_parts */
#define COL_MAX_WINS 64
/*
 * A batch goes when its encoding reaches this size: with one more part (at
 * most a few hundred bytes) and COL_MAX_WINS windows (each at most about
 * 3.5 KiB with RM_GO_LABELS_MAX Go label counts) it stays well under the
 * 2 MiB every aggregator takes (AGG_SERVER_MIN_MSG).
 */
#define COL_BATCH_BYTES ((size_t)1 << 20)

/* Zero it, then set sender, batch_parts (> 0) and merge (NULL: no merging). */
struct col_batcher {
	struct col_sender *sender;
	struct col_enc_parts ep;  /* the parts of the next batch, encoded */
	struct rm_totals wins[COL_MAX_WINS];
	size_t nwins;
	size_t batch_parts;   /* flush when this many parts and merged records are queued */
	struct col_merge *merge; /* parts the aggregator's rules decide, summed (NULL: --no-merge) */
	uint64_t total_parts, total_batches, refused_parts;
	int err;
};

/*
 * Queues a batch of what is encoded, the merged records first (then the
 * matches the aggregator sent last apply to the parts that follow). Nothing
 * held: RM_OK without a batch. An error of col_sender_submit_enc() is logged,
 * kept in bt->err and returned; the held parts are dropped either way.
 */
int col_batcher_flush(struct col_batcher *bt);

/* struct col_sink callbacks (arg: the batcher). Return RM_OK, or RM_ENOMEM. */
int col_batcher_part(void *arg, const struct rm_part *p);
int col_batcher_window(void *arg, const struct rm_totals *w);

/*
 * col_sender_cfg.on_decided (arg: the struct col_merge): Ack.decided staged
 * for the next flush; more than COL_MERGE_MAX_MATCH stages none.
 */
void col_batcher_on_decided(void *arg, Rametr__ThrottleMatch *const *m, size_t n);

/* Wire matches m[0..n) (checked by rm_wire) as out[0..n). */
void col_batcher_matches(Rametr__ThrottleMatch *const *m, size_t n, struct rm_match *out);

/* Frees what the batcher holds (not the sender or the merge). */
void col_batcher_free(struct col_batcher *bt);

#endif
