/*
 * col_batcher.c - the batching sink: encodes parts into the next batch,
 * sums window totals per window, lets col_merge sum the parts the
 * aggregator's rules decide, and hands full batches to the sender.
 */
#include <string.h>

#include "col_batcher.h"
#include "rm_err.h"
#include "banned.h"

static int col_batch_enc(void *arg, const struct rm_part *p);

int col_batcher_flush(struct col_batcher *bt)
{
	int rv;

	if (bt->merge) {
		if ((rv = col_merge_drain(bt->merge, col_batch_enc, bt)) != 0)
			return rv;
		if (col_merge_sync(bt->merge))
			rm_log_info("the aggregator's rules decide %zu socket patterns: their parts are sent "
				    "summed per socket, thread and window", col_merge_nmatch(bt->merge));
	}
	if (bt->ep.n == 0 && bt->nwins == 0)
		return RM_OK;
	rv = col_sender_submit_enc(bt->sender, &bt->ep, bt->wins, bt->nwins);
	if (rv != RM_OK) {
		rm_log_error("failed to queue a batch of %zu parts: %s", bt->ep.n, rm_strerror(rv));
		bt->err = rv;
	}
	bt->total_batches++;
	col_enc_parts_reset(&bt->ep);
	bt->nwins = 0;
	return rv;
}

/* Encodes p into the next batch. */
static int col_batch_enc(void *arg, const struct rm_part *p)
{
	struct col_batcher *bt = arg;
	char err[256];
	int rv;

	if ((rv = col_enc_parts_add(&bt->ep, p, err, sizeof(err))) != 0) {
		if (rv != RM_EINVAL)
			return rv;
		/* only this part is lost, not the batch; the exit status says so */
		if (bt->refused_parts++ == 0)
			rm_log_error("refusing a part from the backend: %s (further ones are counted)",
				     err);
		bt->err = rv;
	}
	return RM_OK;
}

int col_batcher_part(void *arg, const struct rm_part *p)
{
	struct col_batcher *bt = arg;
	int rv;

	bt->total_parts++;
	if (!bt->merge || !col_merge_add(bt->merge, p)) {
		if ((rv = col_batch_enc(bt, p)) != 0)
			return rv;
	}
	/* merged records count: they go in the next batch */
	if (bt->ep.n + (bt->merge ? col_merge_held(bt->merge) : 0) >= bt->batch_parts ||
	    bt->ep.len >= COL_BATCH_BYTES)
		col_batcher_flush(bt);
	return RM_OK;
}

void col_batcher_matches(Rametr__ThrottleMatch *const *m, size_t n, struct rm_match *out)
{
	size_t i;

	for (i = 0; i < n; i++)
		rm_wire_match(m[i], &out[i]);
}

void col_batcher_on_decided(void *arg, Rametr__ThrottleMatch *const *m, size_t n)
{
	struct rm_match mm[COL_MERGE_MAX_MATCH];

	if (n > COL_MERGE_MAX_MATCH)
		n = 0; /* rm_wire refuses more; nothing merged rather than some */
	col_batcher_matches(m, n, mm);
	col_merge_stage(arg, mm, n);
}

int col_batcher_window(void *arg, const struct rm_totals *w)
{
	struct col_batcher *bt = arg;
	size_t i;

	for (i = 0; i < bt->nwins; i++)
		if (bt->wins[i].win == w->win)
			break;
	if (i == bt->nwins) {
		if (bt->nwins == COL_MAX_WINS)
			col_batcher_flush(bt);
		i = bt->nwins++;
		memset(&bt->wins[i], 0, sizeof(bt->wins[i]));
		bt->wins[i].win = w->win;
	}
	rm_totals_add(&bt->wins[i], w);
	return RM_OK;
}

void col_batcher_free(struct col_batcher *bt)
{
	col_enc_parts_free(&bt->ep);
}
