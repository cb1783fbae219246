/*
 * agg_pair_dgram.c - datagrams in the pairing engine: which send a
 * received datagram is. Both ends number a directed UDP flow's datagrams by
 * the bytes counted before them (rm_part_def.h, RM_SEQ_DGRAM), the sender
 * what it sent and the receiver what it received, so the two counts differ
 * by the bytes lost on the way (and by whatever one end counted before the
 * other started). A flow keeps that difference as breakpoints: from
 * receiver position r on, sender position = r + d. A receiver's datagram
 * [r, r + len) is looked for at r + d; a send there of another length, or
 * none but sends further on, means datagrams were lost (or reordered): the
 * sends that follow, in order and without a hole, are skipped while their
 * length differs, at most AGG_DGRAM_AHEAD of them, and the first of the
 * same length is the match; its offset becomes a breakpoint at r. So one
 * lost datagram costs that datagram (it is never received, nothing is
 * charged for it) and at most the receivers it was mistaken for, never the
 * pairing of the flow from then on. Only the length is compared (no
 * content is read): a loss inside a run of datagrams of the same length
 * is found at the next datagram whose length differs, and the run in
 * between is paired one datagram off. A part that sent several datagrams
 * on the flow in a row after a reply (RM_PF_ASSOC, not RM_PF_END: a
 * segment's closing send is one datagram) holds them as one range: a
 * datagram that lies inside it is that part's.
 *
 * Pure, as the engine: positions, lengths and the send index only.
 */
#include <stdlib.h>
#include <string.h>

#include "agg_account.h"
#include "agg_pair_int.h"
#include "banned.h"

/* The offset in force at receiver position r; 0 if the flow has no breakpoint yet. */
static int64_t agg_dgram_offset(const struct agg_dgram *g, uint64_t r)
{
	int64_t d = 0;
	size_t i;

	if (!g)
		return 0;
	for (i = 0; i < g->n && g->bp[i].r <= r; i++)
		d = g->bp[i].d;
	if (i == 0 && g->n)
		d = g->bp[0].d; /* before the oldest breakpoint kept: its offset */
	return d;
}

/* Records offset d from receiver position r on (sorted by r; the oldest dropped when full). */
static int agg_dgram_mark(struct agg_flow *f, uint64_t r, int64_t d)
{
	struct agg_dgram *g = f->dg;
	size_t i;

	if (!g) {
		if (!(g = calloc(1, sizeof(*g))))
			return RM_ENOMEM;
		f->dg = g;
	}
	for (i = 0; i < g->n && g->bp[i].r < r; i++)
		;
	if (i < g->n && g->bp[i].r == r) {
		g->bp[i].d = d;
		return RM_OK;
	}
	if (g->n == AGG_DGRAM_BP) {
		if (i == 0)
			return RM_OK; /* older than everything kept */
		memmove(&g->bp[0], &g->bp[1], (i - 1) * sizeof(g->bp[0]));
		i--;
	} else {
		memmove(&g->bp[i + 1], &g->bp[i], (g->n - i) * sizeof(g->bp[0]));
		g->n++;
	}
	g->bp[i].r = r;
	g->bp[i].d = d;
	return RM_OK;
}

/* The first live send at or after index i of f, at most AGG_MAX_SCAN entries on; NULL if none. */
static struct agg_send *agg_dgram_next(struct agg_pair *e, struct agg_flow *f, size_t *i)
{
	size_t n = 0;

	for (; *i < f->nsends && n < AGG_MAX_SCAN; (*i)++, n++)
		if (f->sends[*i].part) {
			e->st.scanned += n + 1;
			return &f->sends[*i];
		}
	e->st.scanned += n;
	return NULL;
}

/*
 * When the counts are out of step beyond the look-ahead (a long outage; one
 * end counting since before the other; a count started again): the
 * datagram is the unused send of its length, among AGG_MAX_SCAN around its
 * expected place, sent closest to when it was received, after the lag of
 * the flow's last match (node clocks, which may differ: they only pick
 * among sends of the same length, and only here). NULL if none.
 */
static struct agg_send *agg_dgram_realign(struct agg_pair *e, struct agg_flow *f, const struct agg_rec *r,
					  uint64_t len)
{
	int64_t lag = f->dg ? f->dg->lag : 0, best_gap = INT64_MAX;
	struct agg_send *best = NULL;
	size_t lo, hi, i;

	agg_send_window(f, r->in_a, r->in_a + 1, &lo, &hi);
	lo = lo > AGG_MAX_SCAN / 2 ? lo - AGG_MAX_SCAN / 2 : 0;
	hi = lo + AGG_MAX_SCAN < f->nsends ? lo + AGG_MAX_SCAN : f->nsends;
	e->st.scanned += hi - lo;
	for (i = lo; i < hi; i++) {
		struct agg_send *s = &f->sends[i];
		int64_t gap;

		if (!s->part || s->used || s->b - s->a != len)
			continue;
		gap = (int64_t)(r->start_ns - s->part->end_ns) - lag;
		if (gap < 0)
			gap = -gap;
		if (gap < best_gap) {
			best_gap = gap;
			best = s;
		}
	}
	return best;
}

/*
 * An unused send of length len among the AGG_DGRAM_AHEAD live sends that
 * end at or before position q, nearest first; NULL if none.
 */
static struct agg_send *agg_dgram_behind(struct agg_pair *e, struct agg_flow *f, uint64_t q, uint64_t len)
{
	size_t lo, hi, i, n = 0;

	agg_send_window(f, q, q + 1, &lo, &hi);
	for (i = hi; i > 0 && n < AGG_DGRAM_AHEAD; i--) {
		struct agg_send *s = &f->sends[i - 1];

		e->st.scanned++;
		if (!s->part || s->b > q)
			continue;
		n++;
		if (!s->used && !s->poisoned && s->b - s->a == len)
			return s;
	}
	return NULL;
}

int agg_dgram_eval(struct agg_pair *e, struct agg_rec *r, int final, int *done)
{
	struct agg_flow *f = r->in_flow;
	uint64_t len = r->in_b - r->in_a, q, pos;
	struct agg_send *s, *match = NULL;
	int64_t d = agg_dgram_offset(f->dg, r->in_a);
	size_t i, skipped = 0;
	int hole = 0, inside = 0, rv;

	*done = 0;
	e->nacc = 0;
	if (d < 0 && (uint64_t)-d > r->in_a)
		d = 0;
	q = pos = r->in_a + (uint64_t)d;
	i = 0;
	{
		size_t lo, hi;

		agg_send_window(f, q, q + 1, &lo, &hi);
		i = lo;
	}
	/* the sends from q on, in order: the first of this length, past others */
	while ((s = agg_dgram_next(e, f, &i)) != NULL) {
		if (s->b <= pos) { /* before the position looked for (a send of an earlier datagram) */
			i++;
			continue;
		}
		if (s->a > pos) {
			hole = 1; /* a datagram whose send has not arrived (yet) */
			if (!final)
				break;
		}
		if (s->a >= pos && s->b - s->a == len) {
			match = s;
			break;
		}
		if (s->a <= pos && pos + len <= s->b && !(s->part->flags & RM_PF_END)) {
			/* inside one part's send of several datagrams (a thread sending
			 * them after a reply): that part's, wherever they begin */
			match = s;
			inside = 1;
			break;
		}
		if (++skipped > AGG_DGRAM_AHEAD)
			break;
		pos = s->b > pos ? s->b : pos;
		i++;
	}
	if ((!match || (match->a != q && !inside)) && (!hole || final)) {
		/* not where expected (and not because its send is still to come): first a
		 * datagram just behind, not taken yet (two threads reading one socket count
		 * their datagrams in the order they next call the socket, not in the order
		 * they read them) */
		struct agg_send *b = agg_dgram_behind(e, f, q, len);

		if (b) {
			match = b; /* the offset in force stays */
			goto found;
		}
	}
	if (!match && final)
		match = agg_dgram_realign(e, f, r, len);
	if (!match) {
		if (!final)
			return RM_OK;
		if ((rv = agg_acc_add(e, NULL, AGG_REASON_UNPAIRED, len)) != 0)
			return rv;
		*done = 1;
		return RM_OK;
	}
	if (!final && hole)
		return RM_OK;
	if (match->a != q && !inside) {
		/* datagrams lost (or the counts realigned): the offset from here on, and the
		 * receivers waiting on the flow look again */
		if ((rv = agg_dgram_mark(f, r->in_a, (int64_t)(match->a - r->in_a))) != 0 ||
		    (rv = agg_dgram_trigger(e, f)) != 0)
			return rv;
	}
found:
	if (!f->dg && (rv = agg_dgram_mark(f, r->in_a, d)) != 0)
		return rv;
	f->dg->lag = (int64_t)(r->start_ns - match->part->end_ns);
	/* one send per datagram; a segment repeating it in a later window is the same send */
	if (match->poisoned) {
		rv = agg_acc_add(e, NULL, AGG_REASON_UNTRUSTED_RANGE, len);
	} else if (match->part->resolved) {
		rv = agg_acc_add_dist(e, &match->part->dist, len);
		match->used = 1;
	} else if (final) {
		rv = agg_acc_add(e, NULL, AGG_REASON_PAST_HORIZON, len);
	} else {
		return RM_OK;
	}
	if (rv != 0)
		return rv;
	*done = 1;
	return RM_OK;
}

int agg_dgram_trigger(struct agg_pair *e, struct agg_flow *f)
{
	size_t i, n = 0, seen = 0;
	int rv;

	for (i = 0; i < f->nwait && n < AGG_MAX_WAKE && seen < 2 * AGG_MAX_WAKE + 32; i++, seen++) {
		struct agg_rec *r = f->wait[i].r;

		if (!r)
			continue;
		if ((rv = agg_work_push(e, r)) != 0)
			return rv;
		n++;
	}
	e->st.scanned += seen;
	if (n == AGG_MAX_WAKE && i < f->nwait)
		e->st.capped_wakes++;
	return RM_OK;
}
