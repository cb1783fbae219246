/*
 * col_enc_test.c - tests of the collector's Batch encoder against
 * protobuf-c: random batches (zero and huge values, every tuple family,
 * absent tuples, unprintable and full-length comms, negative clock offsets,
 * acked commands) are encoded by col_enc_batch() and, converted to protobuf-c
 * structures field by field as col_sender.h describes, by rm_wire_encode();
 * the bytes must be identical and decode with rm_wire_decode(). Then the
 * inputs the encoder must refuse, with rm_wire_check()'s reasons.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "col_enc.h"
#include "rm_wire.h"
#include "rm_test.h"
#include "rm_wire_ref.h"
#include "banned.h"

/* ---- the reference: protobuf-c structures, as col_sender.h describes ---- */

struct ref_part {
	Rametr__SegmentPart p;
	Rametr__Tuple in, out;
	char comm[RM_COMM_LEN];
};

static Rametr__Tuple *ref_tuple(Rametr__Tuple *t, const struct rm_tuple *k)
{
	rametr__tuple__init(t);
	if (!k->cookie && !k->family && !k->lport && !k->rport)
		return NULL;
	t->cookie = k->cookie;
	t->lport = k->lport;
	t->rport = k->rport;
	if (k->family == RM_AF_INET || k->family == RM_AF_INET6) {
		size_t n = k->family == RM_AF_INET ? 4 : 16;

		t->family = k->family;
		t->laddr = (ProtobufCBinaryData){ n, (uint8_t *)k->laddr };
		t->raddr = (ProtobufCBinaryData){ n, (uint8_t *)k->raddr };
	} else {
		t->family = k->family == RM_AF_UNIX ? RM_AF_UNIX : 0;
	}
	return t;
}

static void ref_part(struct ref_part *d, const struct rm_part *k)
{
	const uint8_t *c = (const uint8_t *)k->comm;
	Rametr__SegmentPart *p = &d->p;
	size_t i;

	rametr__segment_part__init(p);
	for (i = 0; i < RM_COMM_LEN - 1 && c[i]; i++)
		d->comm[i] = c[i] >= 0x20 && c[i] < 0x7f ? (char)c[i] : '?';
	d->comm[i] = '\0';
	RM_REF_PART_COPY(p, k);
	p->comm = d->comm;
	p->in = ref_tuple(&d->in, &k->in);
	p->out = ref_tuple(&d->out, &k->out);
}

static int ref_encode(const struct col_enc_hdr *h, const struct rm_part *parts, size_t nparts,
		      const struct rm_totals *wins, size_t nwins, const uint64_t *acks,
		      size_t nacks, uint8_t **buf, size_t *len)
{
	Rametr__Envelope env = RAMETR__ENVELOPE__INIT;
	Rametr__Batch b = RAMETR__BATCH__INIT;
	struct ref_part *pp = calloc(nparts + 1, sizeof(*pp));
	Rametr__SegmentPart **ppp = calloc(nparts + 1, sizeof(*ppp));
	struct rm_ref_wt *ww = calloc(nwins + 1, sizeof(*ww));
	Rametr__WindowTotals **www = calloc(nwins + 1, sizeof(*www));
	size_t i;
	int rv;

	if (!pp || !ppp || !ww || !www)
		abort();
	for (i = 0; i < nparts; i++) {
		ref_part(&pp[i], &parts[i]);
		ppp[i] = &pp[i].p;
	}
	for (i = 0; i < nwins; i++) {
		rm_ref_totals(&ww[i], &wins[i]);
		www[i] = &ww[i].w;
	}
	b.node = (char *)h->node;
	b.backend = (char *)h->backend;
	b.instance = h->instance;
	b.seq = h->seq;
	b.window_ns = h->window_ns;
	b.clock_offset_ns = h->clock_offset_ns;
	b.n_parts = nparts;
	b.parts = ppp;
	b.n_windows = nwins;
	b.windows = www;
	b.n_acked_commands = nacks;
	b.acked_commands = (uint64_t *)acks;
	env.version = RM_PROTO_VERSION;
	env.body_case = RAMETR__ENVELOPE__BODY_BATCH;
	env.batch = &b;
	rv = rm_wire_encode(&env, buf, len);
	free(pp);
	free(ppp);
	free(ww);
	free(www);
	return rv;
}

/* ---- random input ---- */

static void rtuple(struct rm_tuple *t)
{
	static const uint32_t fam[] = { 0, RM_AF_UNIX, RM_AF_INET, RM_AF_INET6, 16, 44 };
	size_t i;

	memset(t, 0, sizeof(*t));
	if (rm_ref_rnd() % 4 == 0)
		return; /* absent */
	t->cookie = rm_ref_rval(0);
	t->family = fam[rm_ref_rnd() % 6];
	t->lport = (uint32_t)rm_ref_rval(65535);
	t->rport = (uint32_t)rm_ref_rval(65535);
	for (i = 0; i < 4; i++) {
		t->laddr[i] = (uint32_t)rm_ref_rval(UINT32_MAX);
		t->raddr[i] = (uint32_t)rm_ref_rval(UINT32_MAX);
	}
}

static void rpart(struct rm_part *p)
{
	uint8_t *c = (uint8_t *)p->comm;
	size_t i, n;

	memset(p, 0, sizeof(*p));
	RM_REF_PART_VALUES(p);
	rtuple(&p->in);
	rtuple(&p->out);
	n = rm_ref_rnd() % (RM_COMM_LEN + 1); /* 16: no NUL in the record at all */
	for (i = 0; i < n; i++)
		c[i] = (uint8_t)(rm_ref_rnd() % 5 == 0 ? rm_ref_rnd() % 256 : 'a' + rm_ref_rnd() % 26);
	for (; i < RM_COMM_LEN; i++)
		c[i] = 0;
	if (n && c[0] == 0)
		c[0] = 'x';
}

static void rwin(struct rm_totals *w)
{
	memset(w, 0, sizeof(*w));
	w->win = rm_ref_rval(0) | 1;
	w->busy_ns = rm_ref_rval(0);
	w->unseg_cpu_ns = rm_ref_rval(0);
	w->rx_bytes = rm_ref_rval(0);
	w->tx_bytes = rm_ref_rval(0);
	w->disk_read = rm_ref_rval(0);
	w->disk_write = rm_ref_rval(0);
	w->unseg_rx = rm_ref_rval(0);
	w->unseg_tx = rm_ref_rval(0);
	w->unseg_disk_read = rm_ref_rval(0);
	w->unseg_disk_write = rm_ref_rval(0);
	w->lost_ns = rm_ref_rval(0);
	w->dropped_parts = rm_ref_rval(0);
	w->dropped_cpu_ns = rm_ref_rval(0);
	w->dropped_rx = rm_ref_rval(0);
	w->dropped_tx = rm_ref_rval(0);
	w->dropped_disk_read = rm_ref_rval(0);
	w->dropped_disk_write = rm_ref_rval(0);
	w->capacity_ns = rm_ref_rval(0);
	w->idle_ns = rm_ref_rval(0);
	w->unseg_rt_ns = rm_ref_rval(0);
	w->unseg_go_ns = rm_ref_rval(0);
	/* Go label counts as the collector is given them: any number, any order */
	if (rm_ref_rnd() % 2) {
		struct rm_golabel c[160];
		size_t i, n = rm_ref_rnd() % 160;

		for (i = 0; i < n; i++) {
			c[i].cookie = i % 7 == 0 ? rm_ref_rval(0) : rm_ref_rnd();
			c[i].samples = rm_ref_rval(100000);
			c[i].seg = rm_ref_rnd() % 2 ? 0 : rm_ref_rval(100000);
		}
		rm_totals_go_set(w, 500000, c, n);
	}
}

/* ---- cases ---- */

static void test_identical(void)
{
	static const int64_t offs[] = { 0, 1, -1, 1700000000000000000ll, INT64_MIN };
	struct col_enc e = { 0 };
	struct rm_part parts[64];
	struct rm_totals wins[4];
	uint64_t acks[5];
	int round, mismatches = 0;

	for (round = 0; round < 2000; round++) {
		struct col_enc_hdr h = {
			.node = round % 3 ? "node-a" : "n",
			.backend = round % 2 ? "ebpf" : "replay",
			.instance = rm_ref_rval(0) | 1,
			.seq = rm_ref_rval(0) | 1,
			.window_ns = rm_ref_rval(0) | 1,
			.clock_offset_ns = offs[round % 5],
		};
		size_t np = (size_t)(rm_ref_rnd() % 65), nw = (size_t)(rm_ref_rnd() % 5), na = (size_t)(rm_ref_rnd() % 6);
		uint8_t *a = NULL, *b = NULL;
		size_t alen = 0, blen = 0, i;
		Rametr__Envelope *env = NULL;
		char err[256];

		for (i = 0; i < np; i++)
			rpart(&parts[i]);
		for (i = 0; i < nw; i++)
			rwin(&wins[i]);
		for (i = 0; i < na; i++)
			acks[i] = rm_ref_rval(0) | 1;
		CU_ASSERT_EQUAL_FATAL(col_enc_batch(&e, &h, parts, np, wins, nw, acks, na, &a, &alen,
						    err, sizeof(err)),
				      RM_OK);
		CU_ASSERT_EQUAL_FATAL(ref_encode(&h, parts, np, wins, nw, acks, na, &b, &blen), RM_OK);
		if (alen != blen || memcmp(a, b, alen) != 0) {
			if (mismatches++ == 0)
				fprintf(stderr, "round %d: %zu parts, %zu bytes vs protobuf-c's %zu\n",
					round, np, alen, blen);
		}
		/* and the aggregator takes it */
		CU_ASSERT_EQUAL(rm_wire_decode(a, alen, &env, err, sizeof(err)), RM_OK);
		if (env) {
			const struct rm_wbatch *wb = rm_wire_batch(env);
			struct rm_wpart want;

			CU_ASSERT_EQUAL_FATAL(wb->n_parts, np);
			CU_ASSERT_EQUAL(wb->n_windows, nw);
			CU_ASSERT_EQUAL(wb->n_acked_commands, na);
			/* the windows as they were given, Go label counts included */
			for (i = 0; i < nw && i < wb->n_windows; i++)
				if (memcmp(&wb->windows[i], &wins[i], sizeof(wins[i])) != 0 && mismatches++ == 0)
					fprintf(stderr, "round %d: window %zu decodes differently\n", round, i);
			/* each part as the collector made it (col_part_to_wire), decoded once:
			 * what its own encoding decodes to alone */
			for (i = 0; i < np; i++) {
				struct rm_wpart alone;
				uint8_t pa[512];
				size_t la;

				col_part_to_wire(&want, &parts[i]);
				la = rm_part_size(&want);
				CU_ASSERT_FATAL(la <= sizeof(pa));
				rm_part_put(pa, &want);
				CU_ASSERT_EQUAL(rm_part_get(&alone, pa, la), RM_OK);
				if (memcmp(&alone, &wb->parts[i], sizeof(alone)) != 0 && mismatches++ == 0)
					fprintf(stderr, "round %d: part %zu decodes differently\n", round, i);
			}
		}
		rm_wire_free(env);
		free(a);
		free(b);
	}
	CU_ASSERT_EQUAL(mismatches, 0);
	col_enc_free(&e);
}

static void expect_refused(const struct rm_part *p, size_t np, const struct rm_totals *w,
			   size_t nw, const char *why)
{
	struct col_enc e = { 0 };
	struct col_enc_hdr h = { "node-a", "ebpf", 1, 1, 1000000000, 0 };
	uint8_t *buf = (uint8_t *)1;
	size_t len = 1;
	char err[256];

	CU_ASSERT_EQUAL(col_enc_batch(&e, &h, p, np, w, nw, NULL, 0, &buf, &len, err, sizeof(err)),
			RM_EINVAL);
	CU_ASSERT_PTR_NULL(buf);
	CU_ASSERT_EQUAL(len, 0);
	if (!strstr(err, why)) {
		fprintf(stderr, "error '%s' does not say '%s'\n", err, why);
		CU_FAIL("wrong reason");
	}
	col_enc_free(&e);
}

static void test_refused(void)
{
	struct rm_part p[3];
	struct rm_totals w[2];
	size_t i;

	for (i = 0; i < 3; i++) {
		memset(&p[i], 0, sizeof(p[i]));
		p[i].win = 7;
		p[i].in.family = RM_AF_INET;
		p[i].in.lport = 80;
	}
	memset(w, 0, sizeof(w));
	w[0].win = w[1].win = 7;

	p[2].win = 0;
	expect_refused(p, 3, NULL, 0, "part 2: win 0");
	p[2].win = 7;
	p[1].cpu_ns = RM_WIRE_ABSURD_NS + 1;
	expect_refused(p, 3, NULL, 0, "part 1: absurd cpu_ns 1000000000000001");
	p[1].cpu_ns = 0;
	p[1].runq_ns = UINT64_MAX;
	expect_refused(p, 3, NULL, 0, "part 1: absurd runq_ns");
	p[1].runq_ns = 0;
	p[0].in.rport = 65536;
	expect_refused(p, 3, NULL, 0, "part 0: in tuple has port 65536 out of range");
	p[0].in.rport = 0;
	p[2].out.lport = 70000;
	expect_refused(p, 3, NULL, 0, "part 2: out tuple has port 70000 out of range");
	p[2].out.lport = 0;
	w[1].win = 0;
	expect_refused(p, 3, w, 2, "window totals 1: win 0");
	w[1].win = 7;
	/* bad arguments */
	expect_refused(NULL, 1, NULL, 0, "invalid arguments");
	/* and the same input is fine once repaired */
	{
		struct col_enc e = { 0 };
		struct col_enc_hdr h = { "node-a", "ebpf", 1, 1, 1000000000, 0 };
		uint8_t *buf = NULL;
		size_t len = 0;
		char err[256];

		CU_ASSERT_EQUAL(col_enc_batch(&e, &h, p, 3, w, 2, NULL, 0, &buf, &len, err, sizeof(err)),
				RM_OK);
		CU_ASSERT(len > 0);
		free(buf);
		col_enc_free(&e);
	}
}

/* Too many parts for RM_WIRE_MAX_MSG: refused as too large, not truncated. */
static void test_too_large(void)
{
	size_t n = RM_WIRE_MAX_MSG / 100, i;
	struct rm_part *p = calloc(n, sizeof(*p));
	struct col_enc e = { 0 };
	struct col_enc_hdr h = { "node-a", "ebpf", 1, 1, 1000000000, 0 };
	uint8_t *buf = NULL;
	size_t len = 0;
	char err[256];

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	for (i = 0; i < n; i++) {
		p[i].win = UINT64_MAX;
		p[i].seg_id = p[i].start_ns = p[i].end_ns = UINT64_MAX >> 14;
		p[i].cpu_ns = RM_WIRE_ABSURD_NS;
		p[i].in.family = RM_AF_INET6;
		p[i].in.cookie = UINT64_MAX;
		p[i].out = p[i].in;
	}
	CU_ASSERT_EQUAL(col_enc_batch(&e, &h, p, n, NULL, 0, NULL, 0, &buf, &len, err, sizeof(err)),
			RM_EINVAL);
	CU_ASSERT_PTR_NULL(buf);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "submit fewer at a time"));
	col_enc_free(&e);
	free(p);
}

/* One kernel record alone, as a wire part: protobuf-c's pack of the same part. */
static void test_part_alone(void)
{
	uint8_t a[512], b[512];
	int round, mismatches = 0;

	for (round = 0; round < 5000; round++) {
		struct rm_part k;
		struct rm_wpart w;
		struct ref_part r;
		size_t na, nb;

		rpart(&k);
		if (round % 2)
			memset(k.comm, 0, sizeof(k.comm));
		ref_part(&r, &k);
		col_part_to_wire(&w, &k);
		na = rm_part_size(&w);
		nb = rametr__segment_part__get_packed_size(&r.p);
		CU_ASSERT_FATAL(na <= sizeof(a) && nb <= sizeof(b));
		CU_ASSERT_EQUAL(rm_part_put(a, &w) - a, (ptrdiff_t)na);
		rametr__segment_part__pack(&r.p, b);
		if (na != nb || memcmp(a, b, na) != 0)
			mismatches++;
	}
	CU_ASSERT_EQUAL(mismatches, 0);
}

static CU_TestInfo cases[] = {
	{ "bytes identical to protobuf-c's on random batches", test_identical },
	{ "one record alone, as a wire part, is encoded as protobuf-c packs it", test_part_alone },
	{ "parts and windows breaking the wire rules are refused", test_refused },
	{ "a batch over the message limit is refused", test_too_large },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_enc", cases)
