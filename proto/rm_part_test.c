/*
 * rm_part_test.c - tests of the part and window-totals codec (rm_part.h)
 * against protobuf-c: random parts and totals encode to the bytes
 * protobuf-c packs from structures built field by field here, and decode
 * back to what was encoded; protobuf-c's bytes with unknown fields decode
 * like protobuf-c decodes them; held-part blobs written by earlier versions
 * of the aggregator still decode; the value rules give their reasons.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "rm_part.h"
#include "rm_wire.h"
#include "rm_test.h"
#include "rm_wire_ref.h"
#include "banned.h"

/* ---- random input ---- */

/* a tuple as decoding leaves one (addresses only for IP families) */
static void rtuple(struct rm_wtuple *t)
{
	static const uint32_t fam[] = { 0, RM_AF_UNIX, RM_AF_INET, RM_AF_INET6 };
	size_t i, alen;

	memset(t, 0, sizeof(*t));
	if (rm_ref_rnd() % 4 == 0)
		return; /* absent */
	t->cookie = rm_ref_rval(0);
	t->family = fam[rm_ref_rnd() % 4];
	t->lport = (uint32_t)rm_ref_rval(65535);
	t->rport = (uint32_t)rm_ref_rval(65535);
	alen = t->family == RM_AF_INET ? 1 : t->family == RM_AF_INET6 ? 4 : 0;
	for (i = 0; i < alen; i++) {
		t->laddr[i] = (uint32_t)rm_ref_rval(UINT32_MAX);
		t->raddr[i] = (uint32_t)rm_ref_rval(UINT32_MAX);
	}
}

static void rpart(struct rm_wpart *p)
{
	size_t i, n;

	memset(p, 0, sizeof(*p));
	RM_REF_PART_VALUES(p);
	rtuple(&p->in);
	rtuple(&p->out);
	n = rm_ref_rnd() % (RM_WIRE_COMM_MAX + 1);
	for (i = 0; i < n; i++)
		p->comm[i] = (char)(0x20 + rm_ref_rnd() % 95);
}

/* random Go label counts: none, a few, or more cookies than a window holds */
static void rgo(struct rm_totals *t)
{
	size_t i, n = rm_ref_rnd() % 3 == 0 ? 0 : rm_ref_rnd() % 2 ? rm_ref_rnd() % 8 : rm_ref_rnd() % 200;

	memset(&t->go_period_ns, 0, sizeof(*t) - offsetof(struct rm_totals, go_period_ns));
	if (!n)
		return;
	t->go_period_ns = 1 + rm_ref_rval(RM_GO_PERIOD_MAX - 1);
	for (i = 0; i < n; i++)
		rm_totals_go_add_pid(t, rm_ref_rnd() % 3 ? (uint32_t)(rm_ref_rnd() % 4) : (uint32_t)rm_ref_rnd(),
				     i % 5 == 0 ? rm_ref_rval(0) : rm_ref_rnd(),
				     rm_ref_rval(RM_WIRE_ABSURD_NS / t->go_period_ns / 256),
				     rm_ref_rnd() % 2 ? 0 : rm_ref_rval(RM_WIRE_ABSURD_NS / t->go_period_ns / 256));
}

static void rtotals(struct rm_totals *t)
{
	uint64_t *v = (uint64_t *)t;
	size_t i;

	for (i = 0; i < offsetof(struct rm_totals, go_period_ns) / sizeof(*v); i++)
		v[i] = rm_ref_rval(0);
	t->win |= 1;
	rgo(t);
}

/* ---- the tables against rametr.proto (protobuf-c's descriptors) ---- */

struct tab_field {
	unsigned n;
	const char *name;
};

#define TAB_PART_(n, m, kind, rule) { n, #m },
#define TAB_F_(n, m, kind) { n, #m },

static void expect_table(const ProtobufCMessageDescriptor *d, const struct tab_field *t, size_t nt)
{
	size_t i;

	CU_ASSERT_EQUAL(nt, d->n_fields);
	for (i = 0; i < nt; i++) {
		const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, t[i].n);

		CU_ASSERT_PTR_NOT_NULL_FATAL(f);
		CU_ASSERT_STRING_EQUAL(f->name, t[i].name);
		CU_ASSERT(i == 0 || t[i].n > t[i - 1].n); /* number order: the order protobuf-c writes */
	}
}

static void test_tables_match_proto(void)
{
	static const struct tab_field part[] = { RM_PART_FIELDS(TAB_PART_) };
	static const struct tab_field tuple[] = { RM_TUPLE_FIELDS(TAB_F_) };
	/* and the Go label counts, written after the table */
	static const struct tab_field totals[] = { RM_TOTALS_FIELDS(TAB_PART_) { 24, "go_period_ns" },
						   { 25, "go_folded" }, { 26, "go_labels" } };
	static const struct tab_field golabel[] = { { 1, "cookie" }, { 2, "samples" }, { 3, "seg_samples" }, { 4, "pid" } };

	expect_table(&rametr__segment_part__descriptor, part, sizeof(part) / sizeof(part[0]));
	expect_table(&rametr__tuple__descriptor, tuple, sizeof(tuple) / sizeof(tuple[0]));
	expect_table(&rametr__window_totals__descriptor, totals, sizeof(totals) / sizeof(totals[0]));
	expect_table(&rametr__go_label_count__descriptor, golabel, sizeof(golabel) / sizeof(golabel[0]));
}

/* ---- the reference: protobuf-c structures, field by field ---- */

struct ref_part {
	Rametr__SegmentPart p;
	Rametr__Tuple in, out;
	char comm[RM_COMM_LEN];
};

static Rametr__Tuple *ref_tuple(Rametr__Tuple *t, const struct rm_wtuple *k)
{
	size_t n = k->family == RM_AF_INET ? 4 : k->family == RM_AF_INET6 ? 16 : 0;

	rametr__tuple__init(t);
	if (!k->cookie && !k->family && !k->lport && !k->rport)
		return NULL;
	t->cookie = k->cookie;
	t->family = k->family;
	t->lport = k->lport;
	t->rport = k->rport;
	if (n) {
		t->laddr = (ProtobufCBinaryData){ n, (uint8_t *)k->laddr };
		t->raddr = (ProtobufCBinaryData){ n, (uint8_t *)k->raddr };
	}
	return t;
}

static void ref_part(struct ref_part *d, const struct rm_wpart *k)
{
	Rametr__SegmentPart *p = &d->p;

	rametr__segment_part__init(p);
	memcpy(d->comm, k->comm, sizeof(d->comm));
	RM_REF_PART_COPY(p, k);
	p->comm = d->comm;
	p->in = ref_tuple(&d->in, &k->in);
	p->out = ref_tuple(&d->out, &k->out);
}

/* ---- cases ---- */

static void test_part_identical(void)
{
	uint8_t a[1024], b[1024];
	size_t round, mismatches = 0, roundtrip = 0;

	for (round = 0; round < 20000; round++) {
		struct rm_wpart k, back;
		struct ref_part r;
		size_t na, nb;

		rpart(&k);
		ref_part(&r, &k);
		na = rm_part_size(&k);
		nb = rametr__segment_part__get_packed_size(&r.p);
		CU_ASSERT_FATAL(na <= sizeof(a) && nb <= sizeof(b));
		CU_ASSERT_EQUAL(rm_part_put(a, &k) - a, (ptrdiff_t)na);
		rametr__segment_part__pack(&r.p, b);
		if (na != nb || memcmp(a, b, na) != 0)
			mismatches++;
		CU_ASSERT_EQUAL(rm_part_get(&back, a, na), RM_OK);
		if (memcmp(&back, &k, sizeof(k)) != 0)
			roundtrip++;
	}
	CU_ASSERT_EQUAL(mismatches, 0);
	CU_ASSERT_EQUAL(roundtrip, 0);
}

/* protobuf-c's bytes, with unknown fields after them, decode as protobuf-c decodes them */
static void test_part_from_protobuf_c(void)
{
	static const uint8_t extra[] = {
		0xb8, 0x06, 0x2a,                    /* field 103, varint 42 */
		0xc1, 0x06, 1, 2, 3, 4, 5, 6, 7, 8,  /* field 104, fixed64 */
		0xcd, 0x06, 1, 2, 3, 4,              /* field 105, fixed32 */
		0xd2, 0x06, 0x02, 'h', 'i',          /* field 106, bytes */
	};
	uint8_t a[1024];
	size_t round, differ = 0;

	for (round = 0; round < 5000; round++) {
		struct rm_wpart k, got, want;
		struct ref_part r;
		Rametr__SegmentPart *u;
		size_t n;

		rpart(&k);
		ref_part(&r, &k);
		n = rametr__segment_part__pack(&r.p, a);
		memcpy(a + n, extra, sizeof(extra));
		n += sizeof(extra);
		CU_ASSERT_EQUAL_FATAL(rm_part_get(&got, a, n), RM_OK);
		u = rametr__segment_part__unpack(NULL, n, a);
		CU_ASSERT_PTR_NOT_NULL_FATAL(u);
		memset(&want, 0, sizeof(want)); /* padding: memcmp below */
		rm_ref_part_in(&want, u);
		rametr__segment_part__free_unpacked(u, NULL);
		if (memcmp(&got, &want, sizeof(got)) != 0 || memcmp(&got, &k, sizeof(got)) != 0)
			differ++;
	}
	CU_ASSERT_EQUAL(differ, 0);
}

/* An IP tuple without both addresses, or a long comm, is normalised by either decoder. */
static void test_part_normalised(void)
{
	Rametr__SegmentPart p = RAMETR__SEGMENT_PART__INIT;
	Rametr__Tuple in = RAMETR__TUPLE__INIT, out = RAMETR__TUPLE__INIT;
	uint8_t addr[4] = { 10, 0, 0, 1 }, a[256];
	struct rm_wpart got, want;
	size_t n;

	p.win = 5;
	p.comm = "a-name-longer-than-fifteen";
	in.cookie = 7;
	in.family = RM_AF_INET;
	in.lport = 80;
	in.laddr = (ProtobufCBinaryData){ 4, addr }; /* no remote address */
	out.family = RM_AF_UNIX;
	out.rport = 9;
	p.in = &in;
	p.out = &out;
	n = rametr__segment_part__pack(&p, a);
	CU_ASSERT_EQUAL_FATAL(rm_part_get(&got, a, n), RM_OK);
	memset(&want, 0, sizeof(want)); /* padding: memcmp below */
	rm_ref_part_in(&want, &p);
	CU_ASSERT_EQUAL(memcmp(&got, &want, sizeof(got)), 0);
	CU_ASSERT_STRING_EQUAL(got.comm, "a-name-longer-t");
	CU_ASSERT_EQUAL(got.in.family, 0);
	CU_ASSERT_EQUAL(got.in.cookie, 7);
	CU_ASSERT_EQUAL(got.in.lport, 80);
	CU_ASSERT_EQUAL(got.in.laddr[0], 0);
	CU_ASSERT_EQUAL(got.out.family, RM_AF_UNIX);
	CU_ASSERT_EQUAL(got.out.rport, 9);
}

/*
 * Held-part blobs as earlier aggregators stored them in st_held (the
 * collector's encoder of the kernel record, comm empty), byte for byte.
 */
static const uint8_t old_ipv4[] = {
	0x08, 0xcd, 0x80, 0x80, 0x80, 0x80, 0x80, 0xc0, 0x01, 0x10, 0xfb, 0xe2,
	0xcf, 0xaa, 0x06, 0x18, 0x92, 0x21, 0x20, 0x93, 0x21, 0x30, 0x94, 0xb4,
	0xe4, 0xf4, 0xcb, 0x03, 0x38, 0xbf, 0xa4, 0xf1, 0xf4, 0xcb, 0x03, 0x40,
	0xab, 0xf0, 0x0c, 0x48, 0x88, 0x27, 0x50, 0xa8, 0x0b, 0x58, 0x49, 0x70,
	0xc3, 0x01, 0x7a, 0x18, 0x08, 0xa9, 0x46, 0x10, 0x02, 0x1a, 0x04, 0x0a,
	0x00, 0x00, 0x01, 0x20, 0x90, 0x3f, 0x2a, 0x04, 0x0a, 0x00, 0x00, 0x02,
	0x30, 0xc1, 0xb8, 0x02, 0x82, 0x01, 0x18, 0x08, 0xaa, 0x46, 0x10, 0x02,
	0x1a, 0x04, 0x0a, 0x00, 0x00, 0x01, 0x20, 0xd1, 0x86, 0x03, 0x2a, 0x04,
	0x0a, 0x00, 0x00, 0x03, 0x30, 0xeb, 0x31, 0x88, 0x01, 0xe8, 0x07, 0x90,
	0x01, 0x90, 0x13, 0x98, 0x01, 0x80, 0xd0, 0xac, 0xf3, 0x0e, 0xa0, 0x01,
	0xc9, 0xd0, 0xac, 0xf3, 0x0e,
};
static const uint8_t old_ipv6[] = {
	0x08, 0x85, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 0x10, 0xfc, 0xe2, 0xcf,
	0xaa, 0x06, 0x18, 0x07, 0x20, 0x08, 0x30, 0x01, 0x38, 0x02, 0x60, 0x80,
	0x20, 0x68, 0x80, 0x40, 0x70, 0x90, 0x10, 0x7a, 0x2f, 0x08, 0x37, 0x10,
	0x0a, 0x1a, 0x10, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0xbb, 0x03, 0x2a, 0x10,
	0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x02, 0x30, 0xc8, 0xdc, 0x03, 0x82, 0x01, 0x04, 0x08,
	0x38, 0x10, 0x01, 0xa8, 0x01, 0x89, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
	0x01,
};
static const uint8_t old_xen[] = {
	0x08, 0x0b, 0x10, 0xfd, 0xe2, 0xcf, 0xaa, 0x06, 0x40, 0xbf, 0x84, 0x3d,
	0x70, 0x80, 0x0c, 0xb0, 0x01, 0x03, 0xb8, 0x01, 0x01, 0xc0, 0x01, 0xc0,
	0xc4, 0x07,
};

static void expect_reencoded(const struct rm_wpart *p, const uint8_t *blob, size_t n)
{
	uint8_t a[512];

	CU_ASSERT_EQUAL_FATAL(rm_part_size(p), n);
	rm_part_put(a, p);
	CU_ASSERT_EQUAL(memcmp(a, blob, n), 0);
}

static void test_old_blobs(void)
{
	struct rm_wpart p;

	CU_ASSERT_EQUAL_FATAL(rm_part_get(&p, old_ipv4, sizeof(old_ipv4)), RM_OK);
	CU_ASSERT_EQUAL(p.seg_id, (3ull << 48) | 77);
	CU_ASSERT_EQUAL(p.win, 1700000123);
	CU_ASSERT_EQUAL(p.pid, 4242);
	CU_ASSERT_EQUAL(p.tid, 4243);
	CU_ASSERT_EQUAL(p.start_ns, 123456789012ull);
	CU_ASSERT_EQUAL(p.end_ns, 123456999999ull);
	CU_ASSERT_EQUAL(p.cpu_ns, 210987);
	CU_ASSERT_EQUAL(p.runq_ns, 5000);
	CU_ASSERT_EQUAL(p.rx_bytes, 1448);
	CU_ASSERT_EQUAL(p.tx_bytes, 73);
	CU_ASSERT_EQUAL(p.flags, RM_PF_START | RM_PF_END | RM_PF_IN_SEQ | RM_PF_OUT_SEQ);
	CU_ASSERT_EQUAL(p.in.cookie, 9001);
	CU_ASSERT_EQUAL(p.in.family, RM_AF_INET);
	CU_ASSERT_EQUAL(p.in.lport, 8080);
	CU_ASSERT_EQUAL(p.in.rport, 40001);
	CU_ASSERT_EQUAL(p.in.laddr[0], htonl(0x0a000001));
	CU_ASSERT_EQUAL(p.in.raddr[0], htonl(0x0a000002));
	CU_ASSERT_EQUAL(p.out.cookie, 9002);
	CU_ASSERT_EQUAL(p.out.lport, 50001);
	CU_ASSERT_EQUAL(p.out.rport, 6379);
	CU_ASSERT_EQUAL(p.out.raddr[0], htonl(0x0a000003));
	CU_ASSERT_EQUAL(p.in_seq_start, 1000);
	CU_ASSERT_EQUAL(p.in_seq_end, 2448);
	CU_ASSERT_EQUAL(p.out_seq_start, 4000000000ull);
	CU_ASSERT_EQUAL(p.out_seq_end, 4000000073ull);
	CU_ASSERT_STRING_EQUAL(p.comm, "");
	expect_reencoded(&p, old_ipv4, sizeof(old_ipv4));

	CU_ASSERT_EQUAL_FATAL(rm_part_get(&p, old_ipv6, sizeof(old_ipv6)), RM_OK);
	CU_ASSERT_EQUAL(p.seg_id, (1ull << 48) | 5);
	CU_ASSERT_EQUAL(p.disk_read, 4096);
	CU_ASSERT_EQUAL(p.disk_write, 8192);
	CU_ASSERT_EQUAL(p.flags, RM_PF_INHERIT | RM_PF_CONT);
	CU_ASSERT_EQUAL(p.parent_seg, (2ull << 48) | 9);
	CU_ASSERT_EQUAL(p.in.family, RM_AF_INET6);
	CU_ASSERT_EQUAL(p.in.lport, 443);
	CU_ASSERT_EQUAL(p.in.laddr[0], htonl(0x20010db8));
	CU_ASSERT_EQUAL(p.in.laddr[3], htonl(1));
	CU_ASSERT_EQUAL(p.in.raddr[3], htonl(2));
	CU_ASSERT_EQUAL(p.out.cookie, 56);
	CU_ASSERT_EQUAL(p.out.family, RM_AF_UNIX);
	expect_reencoded(&p, old_ipv6, sizeof(old_ipv6));

	CU_ASSERT_EQUAL_FATAL(rm_part_get(&p, old_xen, sizeof(old_xen)), RM_OK);
	CU_ASSERT_EQUAL(p.seg_id, 11);
	CU_ASSERT_EQUAL(p.cpu_ns, 999999);
	CU_ASSERT_EQUAL(p.flags, RM_PF_DOMAIN | RM_PF_DRIVER);
	CU_ASSERT_EQUAL(p.domid, 3);
	CU_ASSERT_EQUAL(p.vcpu, 1);
	CU_ASSERT_EQUAL(p.blocked_ns, 123456);
	CU_ASSERT_EQUAL(p.in.family, 0);
	CU_ASSERT_EQUAL(p.out.cookie, 0);
	expect_reencoded(&p, old_xen, sizeof(old_xen));
}

static void test_bad_bytes(void)
{
	static const uint8_t field0[] = { 0x00, 0x01 };
	static const uint8_t badwt[] = { 0x0b, 0x01 };          /* wire type 3 */
	static const uint8_t longlen[] = { 0x7a, 0x05, 0x08 };  /* tuple of 5 bytes, 1 there */
	static const uint8_t badtuple[] = { 0x7a, 0x02, 0x08, 0x80 }; /* varint cut */
	struct rm_wpart p;

	/* cut inside a varint, inside the in tuple; at a field's end it is a shorter part */
	CU_ASSERT_EQUAL(rm_part_get(&p, old_ipv4, 5), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_part_get(&p, old_ipv4, 60), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_part_get(&p, old_ipv4, 9), RM_OK);
	CU_ASSERT_EQUAL(p.seg_id, (3ull << 48) | 77);
	CU_ASSERT_EQUAL(p.win, 0);
	CU_ASSERT_EQUAL(rm_part_get(&p, old_ipv4, 10), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_part_get(&p, field0, sizeof(field0)), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_part_get(&p, badwt, sizeof(badwt)), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_part_get(&p, longlen, sizeof(longlen)), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_part_get(&p, badtuple, sizeof(badtuple)), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_part_get(&p, NULL, 0), RM_OK); /* an empty part: all zero */
	CU_ASSERT_EQUAL(p.win, 0);
}

/* A part received in a batch: the same decoder, and the wire's verdict on hostile bytes. */
static void test_wire_part(void)
{
	static const uint8_t ok[] = { 0x10, 0x05, 0x2a, 0x02, 'a', 'b' };          /* win 5, comm "ab" */
	static const uint8_t win0[] = { 0x08, 0x01 };                               /* seg_id only */
	static const uint8_t absurd[] = { 0x10, 0x05, 0x40, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x81, 0x02 };
	static const uint8_t wt_string[] = { 0x10, 0x05, 0x12, 0x01, 0x05 };       /* win as bytes */
	static const uint8_t wt_comm[] = { 0x10, 0x05, 0x28, 0x07 };               /* comm as a varint */
	static const uint8_t wt_tuple[] = { 0x10, 0x05, 0x7a, 0x02, 0x22, 0x00 };  /* lport as bytes */
	static const uint8_t twice[] = { 0x10, 0x05, 0x7a, 0x02, 0x08, 0x01, 0x7a, 0x02, 0x20, 0x50 };
	static const uint8_t longcomm[] = { 0x10, 0x05, 0x2a, 0x10, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h',
					    'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p' };
	static const uint8_t nulcomm[] = { 0x10, 0x05, 0x2a, 0x11, 'a', 0, 'c', 'd', 'e', 'f', 'g', 'h', 'i',
					   'j', 'k', 'l', 'm', 'n', 'o', 'p', 'q' };
	static const uint8_t family[] = { 0x10, 0x05, 0x7a, 0x02, 0x10, 0x07 };    /* family 7 */
	static const uint8_t port[] = { 0x10, 0x05, 0x82, 0x01, 0x04, 0x30, 0x80, 0x80, 0x04 }; /* out rport 65536 */
	static const uint8_t addr5[] = { 0x10, 0x05, 0x7a, 0x09, 0x10, 0x02, 0x1a, 0x05, 1, 2, 3, 4, 5 };
	static const uint8_t addr16[] = { 0x10, 0x05, 0x7a, 0x14, 0x10, 0x02, 0x1a, 0x10, 1, 2, 3, 4, 5, 6, 7, 8, 9,
					  10, 11, 12, 13, 14, 15, 16 };
	static const uint8_t longtag[] = { 0x10, 0x05, 0xf8, 0x80, 0x80, 0x80, 0x80, 0x01, 0x01 }; /* 6-byte tag */
	static const uint8_t unknown[] = { 0x10, 0x05, 0xf8, 0x80, 0x80, 0x80, 0x01, 0x01 };       /* field 2^25 */
	struct rm_wpart p;
	char err[128];
	size_t i;

	CU_ASSERT_EQUAL(rm_part_decode(&p, ok, sizeof(ok), 0, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(p.win, 5);
	CU_ASSERT_STRING_EQUAL(p.comm, "ab");
	CU_ASSERT_EQUAL(rm_part_decode(&p, unknown, sizeof(unknown), 0, err, sizeof(err)), RM_OK);
	/* cut anywhere but at a field's end: does not decode */
	for (i = 1; i < sizeof(addr16); i++)
		if (i != 2)
			CU_ASSERT_EQUAL(rm_part_decode(&p, addr16, i, 0, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_part_decode(&p, wt_string, sizeof(wt_string), 0, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "part 0 does not decode");
	CU_ASSERT_EQUAL(rm_part_decode(&p, wt_comm, sizeof(wt_comm), 1, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_part_decode(&p, wt_tuple, sizeof(wt_tuple), 1, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_part_decode(&p, twice, sizeof(twice), 1, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_part_decode(&p, longtag, sizeof(longtag), 1, err, sizeof(err)), RM_EPROTO);
	/* stored parts are read leniently: wrong wire types skipped, the last tuple kept */
	CU_ASSERT_EQUAL(rm_part_get(&p, wt_tuple, sizeof(wt_tuple)), RM_OK);
	CU_ASSERT_EQUAL(rm_part_get(&p, twice, sizeof(twice)), RM_OK);
	CU_ASSERT_EQUAL(p.in.cookie, 0);
	CU_ASSERT_EQUAL(p.in.lport, 80);
	/* decoded, and a rule broken */
	CU_ASSERT_EQUAL(rm_part_decode(&p, win0, sizeof(win0), 2, err, sizeof(err)), RM_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "part 2: win 0");
	CU_ASSERT_EQUAL(rm_part_decode(&p, absurd, sizeof(absurd), 3, err, sizeof(err)), RM_EINVAL);
	CU_ASSERT(strstr(err, "part 3: absurd cpu_ns") != NULL);
	CU_ASSERT_EQUAL(rm_part_decode(&p, longcomm, sizeof(longcomm), 4, err, sizeof(err)), RM_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "part 4: comm of 16 bytes (at most 15)");
	CU_ASSERT_EQUAL(rm_part_decode(&p, nulcomm, sizeof(nulcomm), 4, err, sizeof(err)), RM_OK);
	CU_ASSERT_STRING_EQUAL(p.comm, "a");
	CU_ASSERT_EQUAL(rm_part_decode(&p, family, sizeof(family), 5, err, sizeof(err)), RM_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "part 5: in tuple has unknown family 7");
	CU_ASSERT_EQUAL(rm_part_decode(&p, port, sizeof(port), 6, err, sizeof(err)), RM_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "part 6: out tuple has port 65536 out of range");
	CU_ASSERT_EQUAL(rm_part_decode(&p, addr5, sizeof(addr5), 7, err, sizeof(err)), RM_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "part 7: in local address of 5 bytes (expected 0, 4 or 16)");
	CU_ASSERT_EQUAL(rm_part_decode(&p, addr16, sizeof(addr16), 8, err, sizeof(err)), RM_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "part 8: in local address of 16 bytes does not match family 2");
}

/* Window totals received in a batch. */
static void test_wire_totals(void)
{
	static const uint8_t ok[] = { 0x08, 0x05, 0x10, 0x07, 0xa0, 0x06, 0x01 }; /* win 5, busy 7, field 100 */
	static const uint8_t win0[] = { 0x10, 0x07 };
	static const uint8_t wt[] = { 0x08, 0x05, 0x12, 0x00 };                   /* busy_ns as bytes */
	struct rm_totals t;
	char err[128];

	CU_ASSERT_EQUAL(rm_totals_decode(&t, ok, sizeof(ok), 0, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(t.win, 5);
	CU_ASSERT_EQUAL(t.busy_ns, 7);
	CU_ASSERT_EQUAL(rm_totals_decode(&t, ok, 3, 0, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_totals_decode(&t, wt, sizeof(wt), 0, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_totals_decode(&t, win0, sizeof(win0), 1, err, sizeof(err)), RM_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "window totals 1: win 0");
}

static void expect_check(const struct rm_wpart *p, size_t i, const char *want)
{
	char err[128];

	CU_ASSERT_EQUAL(rm_part_check(p, i, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, want);
}

static void test_check(void)
{
	struct rm_wpart p;
	char err[128];

	memset(&p, 0, sizeof(p));
	p.win = 1;
	p.cpu_ns = RM_WIRE_ABSURD_NS;
	p.runq_ns = RM_WIRE_ABSURD_NS;
	p.in.lport = p.in.rport = p.out.lport = p.out.rport = 65535;
	p.in.family = RM_AF_INET6;
	CU_ASSERT_EQUAL(rm_part_check(&p, 0, err, sizeof(err)), RM_OK);
	p.win = 0;
	expect_check(&p, 2, "part 2: win 0");
	p.win = 1;
	p.cpu_ns++;
	expect_check(&p, 1, "part 1: absurd cpu_ns 1000000000000001");
	p.cpu_ns--;
	p.runq_ns = UINT64_MAX;
	expect_check(&p, 0, "part 0: absurd runq_ns 18446744073709551615");
	p.runq_ns = 0;
	p.in.rport = 65536;
	expect_check(&p, 3, "part 3: in tuple has port 65536 out of range");
	p.in.rport = 1;
	p.out.lport = 70000;
	expect_check(&p, 4, "part 4: out tuple has port 70000 out of range");
	p.out.lport = 1;
	p.out.family = 16; /* written as 0 */
	CU_ASSERT_EQUAL(rm_part_check(&p, 0, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(rm_tuple_check("out", 16, 1, 1, 5, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "part 5: out tuple has unknown family 16");
}

static void test_totals(void)
{
	static uint8_t a[8192], b[8192];
	static struct rm_ref_wt w;
	size_t round, mismatches = 0, roundtrip = 0, j;
	struct rm_totals d, s, want;
	char err[128];

	for (round = 0; round < 5000; round++) {
		struct rm_totals t, back, dec;
		size_t na, nb;

		rtotals(&t);
		rm_ref_totals(&w, &t);
		na = rm_totals_size(&t);
		nb = rametr__window_totals__get_packed_size(&w.w);
		CU_ASSERT_FATAL(na <= sizeof(a) && nb <= sizeof(b));
		CU_ASSERT_EQUAL(rm_totals_put(a, &t) - a, (ptrdiff_t)na);
		rametr__window_totals__pack(&w.w, b);
		rm_ref_totals_in(&back, &w.w);
		if (na != nb || memcmp(a, b, na) != 0 || memcmp(&back, &t, sizeof(t)) != 0)
			mismatches++;
		/* and the batch's decoder reads its own bytes back */
		if (rm_totals_decode(&dec, a, na, 0, err, sizeof(err)) != RM_OK || memcmp(&dec, &t, sizeof(t)) != 0)
			roundtrip++;
	}
	CU_ASSERT_EQUAL(mismatches, 0);
	CU_ASSERT_EQUAL(roundtrip, 0);
	rtotals(&d);
	CU_ASSERT_EQUAL(rm_totals_check(&d, 0, err, sizeof(err)), RM_OK);
	d.win = 0;
	CU_ASSERT_EQUAL(rm_totals_check(&d, 1, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "window totals 1: win 0");

	rtotals(&d);
	rtotals(&s);
	want = d;
	want.busy_ns += s.busy_ns;
	want.unseg_cpu_ns += s.unseg_cpu_ns;
	want.rx_bytes += s.rx_bytes;
	want.tx_bytes += s.tx_bytes;
	want.disk_read += s.disk_read;
	want.disk_write += s.disk_write;
	want.unseg_rx += s.unseg_rx;
	want.unseg_tx += s.unseg_tx;
	want.unseg_disk_read += s.unseg_disk_read;
	want.unseg_disk_write += s.unseg_disk_write;
	want.lost_ns += s.lost_ns;
	want.dropped_parts += s.dropped_parts;
	want.capacity_ns += s.capacity_ns;
	want.idle_ns += s.idle_ns;
	want.dropped_cpu_ns += s.dropped_cpu_ns;
	want.dropped_rx += s.dropped_rx;
	want.dropped_tx += s.dropped_tx;
	want.dropped_disk_read += s.dropped_disk_read;
	want.dropped_disk_write += s.dropped_disk_write;
	want.restart += s.restart;
	want.unseg_rt_ns += s.unseg_rt_ns;
	want.unseg_go_ns += s.unseg_go_ns;
	/* the Go label counts: d's and s's cookies merged, s's period if it has one */
	memset(&want.go_period_ns, 0, sizeof(want) - offsetof(struct rm_totals, go_period_ns));
	memset(&d.go_period_ns, 0, sizeof(d) - offsetof(struct rm_totals, go_period_ns));
	memset(&s.go_period_ns, 0, sizeof(s) - offsetof(struct rm_totals, go_period_ns));
	d.go_period_ns = 500000;
	s.go_period_ns = 400000;
	rm_totals_go_add_seg(&d, 7, 10, 12);
	rm_totals_go_add_seg(&d, RM_GO_IDLE, 3, 0);
	rm_totals_go_add_seg(&s, 7, 5, 4);
	rm_totals_go_add_seg(&s, 0, 2, 1);
	rm_totals_go_add_seg(&s, 8, 0, 3); /* a segment's samples, none of them on its label */
	s.go_folded = 1;
	want.go_period_ns = 400000;
	want.go_folded = 1;
	want.n_go = 4;
	want.go[0] = (struct rm_golabel){ 7, 15, 16, 0, 0 };
	want.go[1] = (struct rm_golabel){ RM_GO_IDLE, 3, 0, 0, 0 };
	want.go[2] = (struct rm_golabel){ 0, 2, 1, 0, 0 };
	want.go[3] = (struct rm_golabel){ 8, 0, 3, 0, 0 };
	rm_totals_add(&d, &s);
	CU_ASSERT_EQUAL(memcmp(&d, &want, sizeof(d)), 0);
	/* a sum that would overflow saturates */
	memset(&s.go_period_ns, 0, sizeof(s) - offsetof(struct rm_totals, go_period_ns));
	rm_totals_go_add(&s, 7, UINT64_MAX - 1);
	rm_totals_add(&d, &s);
	CU_ASSERT_EQUAL(d.go[0].samples, UINT64_MAX);
	CU_ASSERT_EQUAL(d.go_period_ns, 400000);
	for (j = 0; j < d.n_go; j++)
		CU_ASSERT(d.go[j].cookie != 7 || j == 0);
}

/* more cookies than a window holds: the rest folded into cookie 0, counted */
static void test_go_fold(void)
{
	static struct rm_golabel c[3 * RM_GO_LABELS_MAX];
	struct rm_totals t;
	uint64_t sum = 0, got = 0, folded, segsum = 0, seggot = 0;
	size_t i;
	char err[160];

	memset(&t, 0, sizeof(t));
	t.win = 9;
	for (i = 0; i < 3 * RM_GO_LABELS_MAX; i++) {
		c[i].cookie = 1000 + i % (2 * RM_GO_LABELS_MAX); /* each cookie twice past the first third */
		c[i].samples = 1 + i;
		c[i].seg = i % 3;
		sum += c[i].samples;
		segsum += c[i].seg;
	}
	folded = rm_totals_go_set(&t, 500000, c, 3 * RM_GO_LABELS_MAX);
	CU_ASSERT_EQUAL(t.n_go, RM_GO_LABELS_MAX);
	CU_ASSERT_EQUAL(t.go_period_ns, 500000);
	CU_ASSERT(folded > 0);
	CU_ASSERT_EQUAL(t.go_folded, folded);
	for (i = 0; i < t.n_go; i++) {
		got += t.go[i].samples;
		seggot += t.go[i].seg;
	}
	CU_ASSERT_EQUAL(got, sum); /* nothing lost: the folded samples are cookie 0's */
	CU_ASSERT_EQUAL(seggot, segsum); /* and so are their segments' */
	CU_ASSERT_EQUAL(t.go[RM_GO_LABELS_MAX - 1].cookie, 0);
	CU_ASSERT_EQUAL(rm_totals_check(&t, 0, err, sizeof(err)), RM_OK);
	/* cookie 0 and a known cookie still merge when full */
	CU_ASSERT_EQUAL(rm_totals_go_add(&t, 0, 1), 0);
	CU_ASSERT_EQUAL(rm_totals_go_add(&t, 1000, 1), 0);
	CU_ASSERT_EQUAL(rm_totals_go_add(&t, 99, 1), 1);
	CU_ASSERT_EQUAL(t.n_go, RM_GO_LABELS_MAX);
}

/* counts of several processes: one entry per (pid, cookie); a full window folds into the process's cookie 0 */
static void test_go_pids(void)
{
	struct rm_totals t, u;
	uint8_t buf[8192];
	char err[160];
	size_t i, n;

	memset(&t, 0, sizeof(t));
	t.win = 4;
	t.go_period_ns = 500000;
	rm_totals_go_add_pid(&t, 100, 0, 5, 0);
	rm_totals_go_add_pid(&t, 200, 0, 7, 0);
	rm_totals_go_add_pid(&t, 100, 0, 1, 0);
	rm_totals_go_add_pid(&t, 200, RM_GO_IDLE, 2, 0);
	rm_totals_go_add_pid(&t, 100, RM_GO_IDLE, 3, 0);
	rm_totals_go_add_pid(&t, 200, 42, 9, 0);
	CU_ASSERT_EQUAL_FATAL(t.n_go, 5);
	CU_ASSERT(t.go[0].pid == 100 && t.go[0].cookie == 0 && t.go[0].samples == 6);
	CU_ASSERT(t.go[1].pid == 200 && t.go[1].cookie == 0 && t.go[1].samples == 7);
	CU_ASSERT(t.go[4].pid == 200 && t.go[4].cookie == 42 && t.go[4].samples == 9);
	CU_ASSERT_EQUAL(rm_totals_check(&t, 0, err, sizeof(err)), RM_OK);
	/* on the wire and back: the pids kept */
	n = rm_totals_size(&t);
	CU_ASSERT_FATAL(n <= sizeof(buf));
	CU_ASSERT_EQUAL(rm_totals_put(buf, &t) - buf, (ptrdiff_t)n);
	CU_ASSERT_EQUAL_FATAL(rm_totals_decode(&u, buf, n, 0, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(memcmp(&t, &u, sizeof(t)), 0);
	/* the same pair twice is refused (what decoding would have merged) */
	u.go[1].pid = 100;
	CU_ASSERT_EQUAL(rm_totals_check(&u, 2, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "window totals 2: Go label cookie 0 of process 100 counted twice");
	/* full: a new cookie of process 200 goes to its cookie 0; one of a process without a cookie 0 to pid 0's */
	for (i = 0; t.n_go < RM_GO_LABELS_MAX - 1; i++)
		rm_totals_go_add_pid(&t, 300, 1000 + i, 1, 0);
	CU_ASSERT_EQUAL(rm_totals_go_add_pid(&t, 200, 77, 4, 0), 1);
	CU_ASSERT_EQUAL(t.go[1].samples, 11);
	CU_ASSERT_EQUAL(t.n_go, RM_GO_LABELS_MAX - 1);
	CU_ASSERT_EQUAL(rm_totals_go_add_pid(&t, 300, 77, 4, 0), 1);
	CU_ASSERT_EQUAL_FATAL(t.n_go, RM_GO_LABELS_MAX);
	CU_ASSERT(t.go[RM_GO_LABELS_MAX - 1].pid == 0 && t.go[RM_GO_LABELS_MAX - 1].cookie == 0);
	CU_ASSERT_EQUAL(t.go[RM_GO_LABELS_MAX - 1].samples, 4);
	CU_ASSERT_EQUAL(t.go_folded, 8);
	CU_ASSERT_EQUAL(rm_totals_check(&t, 0, err, sizeof(err)), RM_OK);
}

/* hostile Go label counts: refused with a reason, or folded */
static void test_go_check(void)
{
	/* win 5, period 500000, labels {cookie 7, samples 3} twice and one of another wire type */
	static const uint8_t dup[] = { 0x08, 0x05, 0xc0, 0x01, 0xa0, 0xc2, 0x1e, 0xd2, 0x01, 0x04, 0x08, 0x07, 0x10, 0x03,
				       0xd2, 0x01, 0x04, 0x08, 0x07, 0x10, 0x03 };
	static const uint8_t noperiod[] = { 0x08, 0x05, 0xd2, 0x01, 0x04, 0x08, 0x07, 0x10, 0x03 };
	static const uint8_t badwt[] = { 0x08, 0x05, 0xc0, 0x01, 0x01, 0xd0, 0x01, 0x01 };   /* go_labels as a varint */
	static const uint8_t badsub[] = { 0x08, 0x05, 0xc0, 0x01, 0x01, 0xd2, 0x01, 0x02, 0x0a, 0x00 }; /* cookie as bytes */
	struct rm_totals t;
	char err[160];

	CU_ASSERT_EQUAL_FATAL(rm_totals_decode(&t, dup, sizeof(dup), 0, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(t.go_period_ns, 500000);
	CU_ASSERT_EQUAL(t.n_go, 1);
	CU_ASSERT_EQUAL(t.go[0].cookie, 7);
	CU_ASSERT_EQUAL(t.go[0].samples, 6);
	CU_ASSERT_EQUAL(rm_totals_decode(&t, noperiod, sizeof(noperiod), 2, err, sizeof(err)), RM_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "window totals 2: Go label counts without go_period_ns");
	CU_ASSERT_EQUAL(rm_totals_decode(&t, badwt, sizeof(badwt), 0, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_totals_decode(&t, badsub, sizeof(badsub), 0, err, sizeof(err)), RM_EPROTO);

	memset(&t, 0, sizeof(t));
	t.win = 1;
	t.go_period_ns = RM_GO_PERIOD_MAX + 1;
	CU_ASSERT_EQUAL(rm_totals_check(&t, 3, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "window totals 3: absurd go_period_ns 1000000001");
	t.go_period_ns = 1000000;
	rm_totals_go_add(&t, 5, RM_WIRE_ABSURD_NS / 1000000);
	CU_ASSERT_EQUAL(rm_totals_check(&t, 3, err, sizeof(err)), RM_OK);
	rm_totals_go_add(&t, 5, 1);
	CU_ASSERT_EQUAL(rm_totals_check(&t, 3, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "window totals 3: absurd Go label samples 1000000001 (cookie 5)");
	t.go[0].samples = 1;
	t.go[0].seg = RM_WIRE_ABSURD_NS / 1000000 + 1;
	CU_ASSERT_EQUAL(rm_totals_check(&t, 3, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "window totals 3: absurd Go segment samples 1000000001 (cookie 5)");
	t.go[0].seg = 0;
	t.go[1] = t.go[0];
	t.n_go = 2;
	CU_ASSERT_EQUAL(rm_totals_check(&t, 3, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "window totals 3: Go label cookie 5 of process 0 counted twice");
	t.n_go = RM_GO_LABELS_MAX + 1;
	CU_ASSERT_EQUAL(rm_totals_check(&t, 3, err, sizeof(err)), RM_EPROTO);
	t.n_go = 0;
	t.go_folded = RM_WIRE_ABSURD_NS;
	CU_ASSERT_EQUAL(rm_totals_check(&t, 3, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "window totals 3: absurd go_folded 1000000000000000");
	t.go_folded = 0;
	t.go_period_ns = 0;
	CU_ASSERT_EQUAL(rm_totals_check(&t, 3, err, sizeof(err)), RM_OK); /* no counts: no period needed */
}

static CU_TestInfo cases[] = {
	{ "the field tables name every field of rametr.proto, in number order", test_tables_match_proto },
	{ "random parts encode as protobuf-c packs them and decode back", test_part_identical },
	{ "protobuf-c's bytes with unknown fields decode as protobuf-c's", test_part_from_protobuf_c },
	{ "IP tuples without both addresses and long names are normalised", test_part_normalised },
	{ "held-part blobs of earlier versions decode and re-encode the same", test_old_blobs },
	{ "badly framed bytes are refused", test_bad_bytes },
	{ "a part received in a batch: hostile and truncated bytes", test_wire_part },
	{ "window totals received in a batch", test_wire_totals },
	{ "the value rules give their reasons", test_check },
	{ "window totals encode as protobuf-c packs them; add sums all but win", test_totals },
	{ "Go label counts past a window's cookies are folded into cookie 0", test_go_fold },
	{ "hostile Go label counts are merged, folded or refused with a reason", test_go_check },
	{ "Go label counts of several processes stay apart, on the wire too", test_go_pids },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("rm_part", cases)
