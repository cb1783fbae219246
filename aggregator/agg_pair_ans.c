/*
 * agg_pair_ans.c - answers in order: which of the requests that one read
 * brought a server's reply answers.
 *
 * A connection that several clients share with requests in flight (a
 * proxy's or a gRPC channel's pipelined upstream) delivers several clients'
 * requests in one read. The server's thread that read them answers them one
 * by one on the same connection: its segment ends at the first reply, and
 * each further reply anchors a continuation to the same bytes (segmenter.h).
 * By bytes alone all of them would be split over every client of the read.
 * When the replies come in order, the k-th reply answers the k-th request:
 *
 *   - the read's requests are the runs of sends of one segment that tile
 *     its range exactly, every send trusted and resolved (a request cut
 *     over two reads, an overlap or a pending sender: no order is claimed);
 *   - the read's answers are the groups of receivers of exactly that range
 *     (a segment's parts, or an anchor with its record) that sent on the
 *     same connection; their reply ranges, in order, are contiguous, and
 *     the first answer is the segment that read the bytes;
 *   - there are as many answers as requests.
 *
 * Then each group is charged like its request, and its parts are resolved
 * at once. While answers may still come (some are in, but not as many as
 * the requests), the receivers wait, up to the horizon (then, or when a
 * receiver of their replies reaches its own horizon, agg_ans_release, they
 * are split by bytes); at most AGG_ANS_WAITING parts wait at once. Neither
 * a gap nor a later read on the connection ends the wait: the parts of one
 * thread reach the aggregator in any order (each CPU sends its own
 * batches). Otherwise, and for receivers of the range that answered
 * nothing (the tail after the last reply), the split by bytes of
 * agg_eval() applies. Bounded like the rest of the engine: at most
 * AGG_ANS_MAX requests and AGG_MAX_SCAN receivers are examined.
 */
#include <stdlib.h>
#include <string.h>

#include "agg_pair_int.h"
#include "banned.h"

#define AGG_ANS_MAX 64        /* requests of one read answered in order, at most */
#define AGG_ANS_WAITING 4096  /* parts waiting for more answers, at most */

/* A request of the read: a run of sends of one segment. */
struct agg_ans_req {
	const struct agg_rec *part;
	uint64_t a, b;
};

/* An answer: the receivers of the range of one segment or chain, and the reply they sent. */
struct agg_ans_grp {
	const struct agg_rec *key;  /* a member: node, run and grp identify the group */
	const struct agg_flow *out; /* the reply's connection */
	uint64_t out_a, out_b;      /* the reply's range (0, 0: none yet) */
	int first;                  /* a segment that read the bytes (not a continuation) */
};

static int agg_ans_same_grp(const struct agg_rec *x, const struct agg_rec *y)
{
	return x->node_idx == y->node_idx && x->instance == y->instance && x->grp == y->grp;
}

static int agg_ans_grp_cmp(const void *pa, const void *pb)
{
	const struct agg_ans_grp *a = pa, *b = pb;

	if (a->out_a != b->out_a)
		return a->out_a < b->out_a ? -1 : 1;
	return 0;
}

/*
 * The requests of r's range into q (at most AGG_ANS_MAX): runs of sends of
 * one segment, in order, that tile the range. Returns their number, or 0 if
 * the sends do not tile it, are untrusted or not all resolved, or are too
 * many.
 */
static size_t agg_ans_requests(struct agg_pair *e, const struct agg_rec *r, struct agg_ans_req *q)
{
	const struct agg_flow *f = r->in_flow;
	uint64_t pos = r->in_a;
	size_t lo, hi, i, n = 0;

	agg_send_window(f, r->in_a, r->in_b, &lo, &hi);
	if (hi - lo > AGG_MAX_SCAN)
		return 0;
	e->st.scanned += hi - lo;
	for (i = lo; i < hi; i++) {
		const struct agg_send *s = &f->sends[i];

		if (!s->part || s->b <= r->in_a)
			continue;
		if (s->poisoned || !s->part->resolved || s->a < r->in_a || s->b > r->in_b)
			return 0;
		if (n && agg_same_segment(q[n - 1].part, s->part) && s->a <= q[n - 1].b) {
			if (s->b > q[n - 1].b)
				q[n - 1].b = s->b; /* parts of one segment repeat its range */
			pos = q[n - 1].b;
			continue;
		}
		if (s->a != pos || n == AGG_ANS_MAX)
			return 0;
		q[n++] = (struct agg_ans_req){ s->part, s->a, s->b };
		pos = s->b;
	}
	return pos == r->in_b ? n : 0;
}

/* Whether the requests' senders are all charged alike (then order changes nothing). */
static int agg_ans_alike(const struct agg_ans_req *q, size_t n)
{
	const struct agg_dist *d0 = &q[0].part->dist;
	size_t i, j;

	for (i = 1; i < n; i++) {
		const struct agg_dist *d = &q[i].part->dist;

		if (d->n != d0->n)
			return 0;
		for (j = 0; j < d->n; j++)
			if (d->s[j].ce != d0->s[j].ce || d->s[j].reason != d0->s[j].reason || d->s[j].w != d0->s[j].w)
				return 0;
	}
	return 1;
}

/* Resolves receiver x like request q (its sends' distribution). */
static int agg_ans_resolve(struct agg_pair *e, struct agg_rec *x, const struct agg_ans_req *q)
{
	int rv;

	e->nacc = 0;
	if ((rv = agg_acc_add_dist(e, &q->part->dist, q->b - q->a)) != 0)
		return rv;
	e->st.answered_in_order++;
	return agg_resolve(e, x, AGG_PAIR_BY_BYTES);
}

int agg_ans_eval(struct agg_pair *e, struct agg_rec *r, int final, int *handled)
{
	struct agg_ans_req q[AGG_ANS_MAX];
	struct agg_ans_grp g[AGG_ANS_MAX];
	struct agg_flow *f = r->in_flow;
	struct agg_rec *sib[AGG_MAX_SCAN];
	size_t m, ng = 0, ns = 0, i, j, at;
	int ok, rv;

	*handled = 0;
	if (!f || (f->k.family & (AGG_FAM_CHAIN | AGG_FAM_DGRAM)))
		return RM_OK;
	m = agg_ans_requests(e, r, q);
	if (m < 2 || agg_ans_alike(q, m))
		return RM_OK;
	/* the receivers of exactly this range, grouped by the request they serve */
	for (at = agg_wait_lb(f, r->in_a); at < f->nwait && f->wait[at].a == r->in_a; at++) {
		struct agg_rec *x = f->wait[at].r;

		if (!x || f->wait[at].b != r->in_b || x->resolved)
			continue;
		if (ns == AGG_MAX_SCAN)
			return RM_OK;
		sib[ns++] = x;
		for (j = 0; j < ng && !agg_ans_same_grp(g[j].key, x); j++)
			;
		if (j == ng) {
			if (ng == AGG_ANS_MAX)
				return RM_OK;
			g[ng++] = (struct agg_ans_grp){ x, NULL, 0, 0, 0 };
		}
		if (x->answer) {
			if (g[j].out && (g[j].out != x->out_flow))
				return RM_OK; /* replies on two connections: no order */
			if (!g[j].out || x->out_a < g[j].out_a)
				g[j].out_a = x->out_a;
			if (!g[j].out || x->out_b > g[j].out_b)
				g[j].out_b = x->out_b;
			g[j].out = x->out_flow;
			g[j].first |= !(x->flags & (RM_PF_CONT | RM_PF_ANCHOR));
		}
	}
	/* the answers, in reply order */
	for (i = j = 0; i < ng; i++)
		if (g[i].out)
			g[j++] = g[i];
	ng = j;
	if (!ng)
		return RM_OK;
	qsort(g, ng, sizeof(*g), agg_ans_grp_cmp);
	ok = g[0].first;
	for (i = 1; ok && i < ng; i++)
		ok = g[i].out == g[0].out && g[i].out_a == g[i - 1].out_b;
	if (!ok || ng != m) {
		/* answers may still come: wait for them, unless it is too late,
		 * there are more answers than requests, or too many wait already */
		*handled = ng <= m && !final && !r->tail &&
			   (r->ans_wait || e->st.answers_waiting < AGG_ANS_WAITING);
		if (*handled && !r->ans_wait) {
			r->ans_wait = 1;
			e->st.answers_waiting++;
		}
		return RM_OK;
	}
	for (i = 0; i < ns; i++) {
		for (j = 0; j < ng && !agg_ans_same_grp(g[j].key, sib[i]); j++)
			;
		if (j < ng && (rv = agg_ans_resolve(e, sib[i], &q[j])) != 0)
			return rv;
	}
	/* the bytes of these sends were used: a later overlap cannot be undone */
	{
		size_t lo, hi;

		agg_send_window(f, r->in_a, r->in_b, &lo, &hi);
		for (i = lo; i < hi; i++)
			if (f->sends[i].part && f->sends[i].b > r->in_a)
				f->sends[i].used = 1;
	}
	*handled = r->resolved;
	return RM_OK;
}

int agg_ans_release(struct agg_pair *e, struct agg_rec *r)
{
	struct agg_flow *f = r->in_flow;
	size_t lo, hi, i;
	int rv, handled, done;

	if (!f || (f->k.family & (AGG_FAM_CHAIN | AGG_FAM_DGRAM)))
		return RM_OK;
	agg_send_window(f, r->in_a, r->in_b, &lo, &hi);
	if (hi - lo > AGG_MAX_SCAN)
		hi = lo + AGG_MAX_SCAN;
	for (i = lo; i < hi; i++) {
		struct agg_rec *s = f->sends[i].part;

		if (!s || s->resolved || !s->answer || f->sends[i].b <= r->in_a || f->sends[i].a >= r->in_b)
			continue;
		if ((rv = agg_ans_eval(e, s, 0, &handled)) != 0)
			return rv;
		if (!handled || s->resolved)
			continue;
		/* it waits for more answers only: it is split by bytes now */
		if ((rv = agg_eval(e, s, 1, &done)) != 0 || (rv = agg_resolve(e, s, AGG_PAIR_BY_HORIZON)) != 0)
			return rv;
	}
	return RM_OK;
}
