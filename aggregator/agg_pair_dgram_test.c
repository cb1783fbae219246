/*
 * agg_pair_dgram_test.c - datagrams paired between nodes, on recorded
 * two-tier streams: a front node F answers three CEs' requests (charged by
 * rule) and sends each on to a back end B over one UDP flow; B's receiving
 * parts must take the CE of the send each datagram is. The streams are
 * written as the collectors report them (one part per datagram, ranges at
 * RM_SEQ_DGRAM + each end's own count), with datagrams lost, reordered,
 * repeated in a later window, and fed in any order.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rm_test.h"
#include "agg_account.h"
#include "agg_config.h"
#include "agg_pair.h"
#include "rm_err.h"
#include "banned.h"

#define SEC 1000000000LL
#define H (10 * SEC)
#define MAXD 256 /* datagrams per stream */

static const char conf[] =
	"[ce c1]\nclient = 10.1.0.1\n"
	"[ce c2]\nclient = 10.1.0.2\n"
	"[ce c3]\nclient = 10.1.0.3\n";

/* The two-tier case: F (10.2.0.1:40000) -> B (10.2.0.2:53). */
#define F_ADDR 0x0100020aU /* 10.2.0.1, network order */
#define B_ADDR 0x0200020aU
#define F_PORT 40000
#define B_PORT 53

struct stream {
	struct rm_wpart p[2 * MAXD + 4];
	const char *node[2 * MAXD + 4];
	int dg[2 * MAXD + 4];  /* the datagram a receiver part is (index into the send order), -1 if none */
	int ce[2 * MAXD + 4];  /* the CE (1..3) a receiver part must get, 0 for sends */
	size_t n;
};

struct run {
	struct agg_config *cfg;
	struct agg_pair *e;
	char dist[2 * MAXD + 8][96]; /* by id */
	int resolved[2 * MAXD + 8];
	enum agg_pair_how how[2 * MAXD + 8];
};

static int on_resolved(void *arg, const struct agg_pair_result *r)
{
	struct run *R = arg;
	char *text = NULL;

	if (r->id >= 2 * MAXD + 8 || R->resolved[r->id])
		return RM_EINVAL;
	if (agg_pair_dist_format(r->dist, r->ndist, &text) != RM_OK)
		return RM_ENOMEM;
	snprintf(R->dist[r->id], sizeof(R->dist[r->id]), "%s", text);
	free(text);
	R->resolved[r->id] = 1;
	R->how[r->id] = r->how;
	return RM_OK;
}

static int on_forget(void *arg, uint64_t id)
{
	(void)arg;
	(void)id;
	return RM_OK;
}

static void run_open(struct run *R)
{
	struct agg_pair_opts o = { H, 100000 };
	struct agg_pair_sink sink = { R, on_resolved, on_forget };

	memset(R, 0, sizeof(*R));
	CU_ASSERT_EQUAL_FATAL(agg_config_parse(conf, strlen(conf), "t.ini", &R->cfg), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_pair_open(&R->e, R->cfg, &o, &sink), RM_OK);
}

static void run_close(struct run *R)
{
	agg_pair_close(R->e);
	agg_config_free(R->cfg);
}

static void tuple(struct rm_wtuple *t, uint64_t cookie, uint32_t la, uint32_t lp, uint32_t ra, uint32_t rp)
{
	memset(t, 0, sizeof(*t));
	t->cookie = cookie;
	t->family = RM_AF_INET;
	t->laddr[0] = la;
	t->lport = lp;
	t->raddr[0] = ra;
	t->rport = rp;
}

/*
 * The front's part of request i: received from CE ce's client, sent on to
 * B as a datagram of len bytes `sent` bytes into the flow.
 */
static void front_part(struct stream *s, uint64_t seg, int ce, uint64_t sent, uint64_t len)
{
	struct rm_wpart *p = &s->p[s->n];

	memset(p, 0, sizeof(*p));
	p->seg_id = seg;
	p->win = 1 + seg / 100;
	p->start_ns = p->end_ns = (uint64_t)seg * 1000;
	p->cpu_ns = 100;
	p->flags = RM_PF_START | RM_PF_END | RM_PF_OUT_SEQ;
	tuple(&p->in, 1, F_ADDR, 5300, htonl(0x0a010000U | (uint32_t)ce), 30000);
	tuple(&p->out, 2, F_ADDR, F_PORT, B_ADDR, B_PORT);
	p->out_seq_start = RM_SEQ_DGRAM + sent;
	p->out_seq_end = RM_SEQ_DGRAM + sent + len;
	s->node[s->n] = "front";
	s->dg[s->n] = -1;
	s->ce[s->n] = 0;
	s->n++;
}

/* B's part of a datagram of len bytes, `got` bytes into what B received on the flow. */
static void back_part(struct stream *s, uint64_t seg, uint64_t got, uint64_t len, int dg, int ce)
{
	struct rm_wpart *p = &s->p[s->n];

	memset(p, 0, sizeof(*p));
	p->seg_id = seg;
	p->win = 1 + seg / 100;
	p->start_ns = p->end_ns = (uint64_t)seg * 1000 + 500;
	p->cpu_ns = 1000;
	p->flags = RM_PF_START | RM_PF_IN_SEQ;
	tuple(&p->in, 3, B_ADDR, B_PORT, F_ADDR, F_PORT);
	p->in_seq_start = RM_SEQ_DGRAM + got;
	p->in_seq_end = RM_SEQ_DGRAM + got + len;
	s->node[s->n] = "back";
	s->dg[s->n] = dg;
	s->ce[s->n] = ce;
	s->n++;
}

/* The CE of request i (a fixed, mixed sequence) and its length by CE (lens[ce - 1]). */
static int ce_of(int i)
{
	static const int seq[] = { 1, 2, 3, 1, 1, 2, 3, 3, 2, 1, 3, 2, 1, 2, 2, 3, 1 };

	return seq[i % (int)(sizeof(seq) / sizeof(seq[0]))];
}

/*
 * Builds n requests through F, and B's receipt of them: lost[i] = 1 drops
 * datagram i, swap = k > 0 makes B read datagrams k and k - 1 the other
 * way round; lens by CE.
 */
static void build(struct stream *s, int n, const int *lost, int swap, const uint64_t *lens)
{
	uint64_t sent = 0, got = 0;
	int order[MAXD], i;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < n; i++) {
		front_part(s, 1 + (uint64_t)i, ce_of(i), sent, lens[ce_of(i) - 1]);
		sent += lens[ce_of(i) - 1];
		order[i] = i;
	}
	if (swap > 0) {
		order[swap] = swap - 1;
		order[swap - 1] = swap;
	}
	for (i = 0; i < n; i++) {
		int d = order[i];
		uint64_t len = lens[ce_of(d) - 1];

		if (lost && lost[d])
			continue;
		back_part(s, 1000 + (uint64_t)i, got, len, d, ce_of(d));
		got += len;
	}
}

/* Feeds s in `order` (NULL: as built); ids are mapped back through it. */
static void feed_any(struct run *R, const struct stream *s, const size_t *order, size_t *id_of)
{
	int64_t now = 0;
	size_t k;

	for (k = 0; k < s->n; k++) {
		size_t i = order ? order[k] : k;
		struct agg_pair_src src = { s->node[i], 1, SEC };
		uint64_t id;

		CU_ASSERT_EQUAL_FATAL(agg_pair_add(R->e, &src, &s->p[i], now++, &id), RM_OK);
		id_of[i] = (size_t)id;
	}
	CU_ASSERT_EQUAL(agg_pair_expire(R->e, now + 2 * H), RM_OK);
}

/* How B's parts came out: right (the CE of their datagram), wrong, V by reason. */
struct tally {
	int right, wrong, unpaired, other_v;
};

static struct tally tally(const struct run *R, const struct stream *s, const size_t *id_of)
{
	struct tally t = { 0 };
	size_t i;

	for (i = 0; i < s->n; i++) {
		char want[32];
		const char *got = R->dist[id_of[i]];

		if (s->ce[i] == 0)
			continue;
		CU_ASSERT(R->resolved[id_of[i]]);
		snprintf(want, sizeof(want), "c%d=", s->ce[i]);
		if (strncmp(got, want, strlen(want)) == 0 && !strchr(got, ';'))
			t.right++;
		else if (strcmp(got, "!" AGG_REASON_UNPAIRED "=1") == 0 || strncmp(got, "!" AGG_REASON_UNPAIRED "=", 10) == 0)
			t.unpaired++;
		else if (got[0] == '!')
			t.other_v++;
		else
			t.wrong++;
	}
	return t;
}

static const uint64_t lens_distinct[3] = { 31, 47, 62 };

static void test_in_order_any_arrival(void)
{
	struct stream *s = calloc(1, sizeof(*s));
	size_t order[2 * MAXD + 4], id_of[2 * MAXD + 4], k;
	struct run R;
	struct tally t;
	uint64_t seed;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	build(s, 120, NULL, 0, lens_distinct);
	for (seed = 0; seed < 6; seed++) {
		for (k = 0; k < s->n; k++)
			order[k] = seed == 1 ? s->n - 1 - k : k; /* 1: every receiver before its sender */
		for (k = s->n - 1; seed > 1 && k > 0; k--) {
			size_t j = (size_t)((seed * 6364136223846793005ULL + k * 1442695040888963407ULL) >> 33) % (k + 1), x;

			x = order[k];
			order[k] = order[j];
			order[j] = x;
		}
		run_open(&R);
		feed_any(&R, s, order, id_of);
		t = tally(&R, s, id_of);
		CU_ASSERT_EQUAL(t.right, 120);
		CU_ASSERT_EQUAL(t.wrong + t.unpaired + t.other_v, 0);
		/* B's parts were paired, F's decided by rule */
		CU_ASSERT_EQUAL(R.how[id_of[s->n - 1]], AGG_PAIR_BY_BYTES);
		CU_ASSERT_EQUAL(R.how[id_of[0]], AGG_PAIR_BY_RULE);
		run_close(&R);
	}
	free(s);
}

/* One lost datagram at every position in turn: B's other datagrams are all right. */
static void test_one_loss_costs_one(void)
{
	struct stream *s = calloc(1, sizeof(*s));
	size_t id_of[2 * MAXD + 4];
	int lost[MAXD], i;
	struct run R;
	struct tally t;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	for (i = 0; i < 60; i++) {
		memset(lost, 0, sizeof(lost));
		lost[i] = 1;
		build(s, 60, lost, 0, lens_distinct);
		run_open(&R);
		feed_any(&R, s, NULL, id_of);
		t = tally(&R, s, id_of);
		/* 59 received: each charged to its own CE, whatever datagram was lost */
		CU_ASSERT_EQUAL(t.right + t.wrong + t.unpaired + t.other_v, 59);
		CU_ASSERT_EQUAL(t.right, 59);
		run_close(&R);
	}
	free(s);
}

/* 5% of the datagrams lost (every 20th, and two in a row once), lengths per CE. */
static void test_loss_five_percent(void)
{
	struct stream *s = calloc(1, sizeof(*s));
	size_t id_of[2 * MAXD + 4];
	int lost[MAXD] = { 0 }, i, nlost = 0, k;
	struct run R;
	struct tally t;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	for (i = 7; i < 200; i += 20)
		lost[i] = 1;
	lost[100] = lost[101] = 1;
	for (i = 0; i < 200; i++)
		nlost += lost[i];
	build(s, 200, lost, 0, lens_distinct);
	for (k = 0; k < 2; k++) {
		size_t order[2 * MAXD + 4], j;

		for (j = 0; j < s->n; j++) /* the second round: every receiver before its sender */
			order[j] = k == 0 ? j : s->n - 1 - j;
		run_open(&R);
		feed_any(&R, s, order, id_of);
		t = tally(&R, s, id_of);
		printf("\n    200 sent, %d lost: %d right, %d wrong, %d unpaired ", nlost, t.right, t.wrong, t.unpaired);
		CU_ASSERT_EQUAL(t.right, 200 - nlost);
		CU_ASSERT_EQUAL(t.wrong + t.unpaired + t.other_v, 0);
		run_close(&R);
	}
	free(s);
}

/*
 * Every CE's datagrams of one length: a loss is found only where a length
 * changes, so the datagrams between are one off. Still, the pairing is
 * back in step after it: the wrong ones are few and bounded by that run.
 */
static void test_same_length_loss_is_bounded(void)
{
	static const uint64_t same[3] = { 40, 40, 40 };
	static const uint64_t two[3] = { 40, 40, 90 };
	struct stream *s = calloc(1, sizeof(*s));
	size_t id_of[2 * MAXD + 4];
	int lost[MAXD] = { 0 };
	struct run R;
	struct tally t;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	/* c3's datagrams are longer: the run after a loss ends at c3's next one */
	lost[3] = 1; /* c1; then 1 2 (c1, c2 off by one) until c3 at 6 */
	build(s, 60, lost, 0, two);
	run_open(&R);
	feed_any(&R, s, NULL, id_of);
	t = tally(&R, s, id_of);
	printf("\n    one length for c1 and c2: %d right, %d wrong, %d unpaired ", t.right, t.wrong, t.unpaired);
	CU_ASSERT_EQUAL(t.right + t.wrong + t.unpaired, 59);
	CU_ASSERT(t.wrong <= 2);
	CU_ASSERT(t.right >= 57);
	run_close(&R);
	/* one length for all: the loss is never seen, the rest is one off */
	build(s, 20, lost, 0, same);
	run_open(&R);
	feed_any(&R, s, NULL, id_of);
	t = tally(&R, s, id_of);
	CU_ASSERT_EQUAL(t.right + t.wrong + t.unpaired, 19);
	CU_ASSERT(t.wrong > 0); /* the limit of a content-free fingerprint, stated in docs/udp.md */
	run_close(&R);
	free(s);
}

/* Two datagrams counted the other way round (two threads reading one socket): both right. */
static void test_reorder_both_right(void)
{
	struct stream *s = calloc(1, sizeof(*s));
	size_t id_of[2 * MAXD + 4];
	struct run R;
	struct tally t;
	int k;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	for (k = 1; k < 80; k++) {
		size_t order[2 * MAXD + 4], j;

		build(s, 40, NULL, k % 40 ? k % 40 : 1, lens_distinct);
		for (j = 0; j < s->n; j++) /* the second round: every receiver before its sender */
			order[j] = k < 40 ? j : s->n - 1 - j;
		run_open(&R);
		feed_any(&R, s, order, id_of);
		t = tally(&R, s, id_of);
		CU_ASSERT_EQUAL(t.right + t.wrong + t.unpaired + t.other_v, 40);
		/* the later one first: the earlier one is found just behind, not yet taken */
		CU_ASSERT_EQUAL(t.right, 40);
		CU_ASSERT_EQUAL(t.wrong, 0);
		run_close(&R);
	}
	free(s);
}

/*
 * A datagram whose part is repeated in the next window (same segment, same
 * range) is one datagram; a receiver no send matches (the front has no
 * collector) is V "unpaired" at the horizon, not before.
 */
static void test_window_repeat_and_unpaired(void)
{
	struct stream *s = calloc(1, sizeof(*s));
	size_t id_of[2 * MAXD + 4];
	struct agg_pair_src bsrc = { "back", 1, SEC };
	struct run R;
	struct tally t;
	uint64_t id;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	build(s, 10, NULL, 0, lens_distinct);
	/* B's part of datagram 4, again in its next window: its CPU there */
	s->p[s->n] = s->p[10 + 4];
	s->p[s->n].win++;
	s->p[s->n].flags &= ~(uint32_t)RM_PF_START;
	s->node[s->n] = "back";
	s->dg[s->n] = 4;
	s->ce[s->n] = ce_of(4);
	s->n++;
	run_open(&R);
	feed_any(&R, s, NULL, id_of);
	t = tally(&R, s, id_of);
	CU_ASSERT_EQUAL(t.right, 11);
	/* a datagram from a node that reports nothing */
	back_part(s, 5000, 10000, 50, -1, 0);
	CU_ASSERT_EQUAL(agg_pair_add(R.e, &bsrc, &s->p[s->n - 1], 3 * H, &id), RM_OK);
	CU_ASSERT_FALSE(R.resolved[id]);
	CU_ASSERT_EQUAL(agg_pair_expire(R.e, 5 * H), RM_OK);
	CU_ASSERT(R.resolved[id]);
	CU_ASSERT_STRING_EQUAL(R.dist[id], "!" AGG_REASON_UNPAIRED "=50");
	run_close(&R);
	free(s);
}

/* Work is bounded: a receiver looks past at most AGG_DGRAM_AHEAD sends, and a later one is right. */
static void test_bounded_look_ahead(void)
{
	struct stream *s = calloc(1, sizeof(*s));
	size_t id_of[2 * MAXD + 4];
	int lost[MAXD] = { 0 }, i;
	struct run R;
	struct tally t;
	struct agg_pair_stats ps;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	for (i = 10; i < 70; i++) /* a long outage: 60 datagrams lost in a row */
		lost[i] = 1;
	build(s, 100, lost, 0, lens_distinct);
	run_open(&R);
	feed_any(&R, s, NULL, id_of);
	t = tally(&R, s, id_of);
	agg_pair_get_stats(R.e, &ps);
	printf("\n    60 lost in a row: %d right, %d wrong, %d unpaired, %" PRIu64 " entries examined ", t.right,
	       t.wrong, t.unpaired, ps.scanned);
	CU_ASSERT_EQUAL(t.right + t.wrong + t.unpaired + t.other_v, 40);
	CU_ASSERT_EQUAL(t.wrong, 0);
	CU_ASSERT_EQUAL(t.right, 40); /* realigned at the horizon by the senders' times */
	CU_ASSERT(ps.scanned <= 300 * (uint64_t)s->n);
	run_close(&R);
	free(s);
}

/* A part that sent three datagrams in a row (after a reply) holds one range: each received one is its. */
static void test_several_in_one_part(void)
{
	struct stream *s = calloc(1, sizeof(*s));
	size_t id_of[2 * MAXD + 4];
	struct run R;
	struct tally t;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	build(s, 6, NULL, 0, lens_distinct);
	/* front part 2 (c3, 62 bytes at 31 + 47) sends two more of 20 bytes: B reads 3 */
	s->p[2].out_seq_end += 40;
	s->p[2].flags = RM_PF_ASSOC | RM_PF_OUT_SEQ; /* its request's tail: no closing send */
	{
		uint64_t got = 31 + 47 + 62, k;

		for (k = 3; k < 6; k++) { /* datagrams 3..5 move 40 bytes on, at both ends */
			s->p[k].out_seq_start += 40;
			s->p[k].out_seq_end += 40;
			s->p[6 + k].in_seq_start += 40;
			s->p[6 + k].in_seq_end += 40;
			s->p[6 + k].seg_id += 10;
		}
		back_part(s, 2000, got, 20, 2, 3);
		back_part(s, 2001, got + 20, 20, 2, 3);
	}
	run_open(&R);
	feed_any(&R, s, NULL, id_of);
	t = tally(&R, s, id_of);
	CU_ASSERT_EQUAL(t.right, 8);
	CU_ASSERT_EQUAL(t.wrong + t.unpaired + t.other_v, 0);
	run_close(&R);
	free(s);
}

static CU_TestInfo cases[] = {
	{ "a part's several datagrams in one range", test_several_in_one_part },
	{ "three CEs through a front: each datagram takes its sender's CE, any arrival order",
	  test_in_order_any_arrival },
	{ "one lost datagram, at any position, costs only itself", test_one_loss_costs_one },
	{ "5% loss: every received datagram right", test_loss_five_percent },
	{ "a loss among datagrams of one length: bounded by the next length change", test_same_length_loss_is_bounded },
	{ "two datagrams counted the other way round are both right", test_reorder_both_right },
	{ "a datagram repeated in a later window; no sender is unpaired at the horizon",
	  test_window_repeat_and_unpaired },
	{ "a long outage: bounded look-ahead, no wrong pairing", test_bounded_look_ahead },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_pair_dgram", cases)
