/*
 * rm_part.h - a segment part and a window's totals as the wire carries them,
 * and their codec: the structs, the encoder (byte-identical to protobuf-c's
 * pack), the decoder, and the check of a part's values, all generated from
 * the field tables of rm_part_def.h.
 *
 * struct rm_wpart is what the aggregator works on and what the collector
 * turns each kernel record (rametr.h struct rm_part, the BPF program's
 * contract) into before it is encoded; struct rm_totals is the one form of a
 * window's node totals in the collector, on the wire and in the aggregator.
 * Member names, meanings and units are rametr.proto's.
 *
 * A part's canonical encoding (rm_part_put) is the SegmentPart protobuf-c
 * packs: fields in number order, proto3 zeros left out, a tuple present if
 * it has a cookie, a family or a port, IP addresses of the family's size.
 * The same bytes are the Batch.parts entries the collector sends and the
 * held-part blobs the aggregator stores.
 *
 * Thread safety: all functions are reentrant; they share no state.
 */
#ifndef RM_PART_H
#define RM_PART_H

#include <stddef.h>
#include <stdint.h>

#include "rm_part_def.h"

#define RM_WIRE_COMM_MAX 15          /* bytes in SegmentPart.comm */
#define RM_WIRE_ABSURD_NS 1000000000000000ull /* 1e15 ns: no part has this much */

/* The members of the tables' kinds. */
#define RM_MEMBER_U64(m) uint64_t m;
#define RM_MEMBER_U32(m) uint32_t m;
#define RM_MEMBER_FAMILY(m) uint32_t m;
#define RM_MEMBER_ADDR(m) uint32_t m[4];       /* network order; IPv4 in [0] */
#define RM_MEMBER_COMM(m) char m[RM_COMM_LEN]; /* NUL-terminated, printable */
#define RM_MEMBER_TUPLE(m) struct rm_wtuple m;
#define RM_TUPLE_MEMBER_(n, m, kind) RM_MEMBER_##kind(m)
#define RM_PART_MEMBER_(n, m, kind, rule) RM_MEMBER_##kind(m)
#define RM_TOTALS_MEMBER_(n, m, kind, rule) uint64_t m;

/*
 * A socket as seen by one end. family is 0 (none), RM_AF_UNIX (laddr[0..1],
 * raddr[0..1]: the host-local identities of the two ends, which the wire
 * does not carry), RM_AF_INET or RM_AF_INET6 (both addresses set: a decoded
 * IP tuple without them has family 0). Another family (a collector's part
 * before encoding) is encoded as 0, without addresses.
 */
struct rm_wtuple {
	RM_TUPLE_FIELDS(RM_TUPLE_MEMBER_)
};

/* One part: what one thread did for one segment within one window. */
struct rm_wpart {
	RM_PART_FIELDS(RM_PART_MEMBER_)
};

/* Samples of one Go label in a window (rametr.proto GoLabelCount). */
struct rm_golabel {
	uint64_t cookie;  /* socket cookie; 0 = no label; RM_GO_IDLE = no goroutine */
	uint64_t samples; /* samples whose goroutine carried this label */
	uint64_t seg;     /* samples that fell in the CPU of segments received on this socket (cookie 0: in
			     none); zero for every cookie when the collector does not say */
	uint32_t pid;     /* the sampled process (tgid); 0: not said (the node's processes pooled) */
	uint32_t pad;     /* 0 */
};

/*
 * A window's node totals (deltas), win = window index; then its Go label
 * counts (WindowTotals 24..26): go_period_ns the sampler's period (0: no
 * counts), go[0..n_go) the samples per process and cookie, each pair once (rm_totals_go_add_pid),
 * go_folded the samples of cookies past RM_GO_LABELS_MAX, also counted in
 * cookie 0.
 */
struct rm_totals {
	RM_TOTALS_FIELDS(RM_TOTALS_MEMBER_)
	uint64_t go_period_ns;
	uint64_t go_folded;
	uint32_t n_go;
	uint32_t pad;     /* 0 */
	struct rm_golabel go[RM_GO_LABELS_MAX];
};

/* The family a tuple's family is written as: itself if one of RM_AF_*, else 0. */
static inline uint32_t rm_wire_family(uint32_t family)
{
	return family == RM_AF_INET || family == RM_AF_INET6 || family == RM_AF_UNIX ? family : 0;
}

/* Bytes of p's canonical encoding (no key or length prefix). */
size_t rm_part_size(const struct rm_wpart *p);

/* Writes rm_part_size(p) bytes at b; returns b + that. */
uint8_t *rm_part_put(uint8_t *b, const struct rm_wpart *p);

/*
 * Decodes a SegmentPart from buf[0..len) into *p (zeroed first): any
 * protobuf encoding of it (fields in any order, the last of a repeated one
 * kept, unknown fields skipped), tuples normalised as struct rm_wtuple says
 * (a family the wire does not know becomes 0), comm cut at its first NUL or
 * RM_WIRE_COMM_MAX bytes. rm_part_put() of the result decodes to the same. Values are not checked (see
 * rm_part_check). Returns RM_OK, or RM_EPROTO if the bytes do not decode.
 */
int rm_part_get(struct rm_wpart *p, const void *buf, size_t len);

/*
 * Decodes part i of a received Batch from buf[0..len) into *p, as
 * rm_part_get() does (the same code), and checks it as the wire does: a
 * known field of another wire type, or a tuple given twice, does not
 * decode; the rules of
 * rm_part_check(); comm at most RM_WIRE_COMM_MAX bytes before a NUL; each
 * tuple as it arrived of family 0, 1, 2 or 10, with addresses of 0 bytes or
 * of the family's size (4 or 16). Returns RM_OK; RM_EPROTO if the bytes do
 * not decode ("part 3 does not decode"); RM_EINVAL for a broken rule, with
 * the reason in err ("part 3: win 0").
 */
int rm_part_decode(struct rm_wpart *p, const void *buf, size_t len, size_t i, char *err, size_t errlen);

/*
 * The value rules of a part (named i in the reason): win != 0; cpu_ns and
 * runq_ns <= RM_WIRE_ABSURD_NS; each tuple's ports <= 65535 (and its family
 * as encoded one of 0, 1, 2, 10: always). Returns RM_OK, or RM_EPROTO with
 * the reason in err (e.g. "part 3: win 0").
 */
int rm_part_check(const struct rm_wpart *p, size_t i, char *err, size_t errlen);

/*
 * The tuple rules of rm_part_check on a tuple's values (what: "in" or
 * "out"), for any form of a tuple. Returns RM_OK or RM_EPROTO.
 */
int rm_tuple_check(const char *what, uint32_t family, uint32_t lport, uint32_t rport, size_t i,
		   char *err, size_t errlen);

/*
 * Sets *d from a tuple's decoded values, normalised as struct rm_wtuple
 * says (la/ra: lalen/ralen bytes, network order).
 */
void rm_tuple_set(struct rm_wtuple *d, uint64_t cookie, uint32_t family, const void *la,
		  size_t lalen, uint32_t lport, const void *ra, size_t ralen, uint32_t rport);

/*
 * The value rules of the tables, for any struct with a table's member
 * names: RM_PART_FIELDS(RM_RULE_) or RM_TOTALS_FIELDS(RM_RULE_) in a
 * function with p (a pointer to it), what ("part", "window totals"), i,
 * err and errlen in scope; a broken rule returns RM_EPROTO from that
 * function with the reason, e.g. "part 3: win 0" (rm_err.h needed).
 */
#define RM_RULE_ANY(p, m)
#define RM_RULE_NONZERO(p, m)                                                     \
	if ((p)->m == 0) {                                                         \
		rm_errf(err, errlen, "%s %zu: " #m " 0", what, i);                 \
		return RM_EPROTO;                                                  \
	}
#define RM_RULE_NS(p, m)                                                          \
	if ((p)->m > RM_WIRE_ABSURD_NS) {                                          \
		rm_errf(err, errlen, "%s %zu: absurd " #m " %llu", what, i,        \
			(unsigned long long)(p)->m);                                \
		return RM_EPROTO;                                                  \
	}
#define RM_RULE_(n, m, kind, rule) RM_RULE_##rule(p, m)

/*
 * The value rules of window totals (named i in the reason): win != 0; the
 * Go label counts: n_go <= RM_GO_LABELS_MAX, go_period_ns <= RM_GO_PERIOD_MAX
 * and nonzero if there are counts, each cookie once, and each count's CPU
 * (samples x go_period_ns) and go_folded's at most RM_WIRE_ABSURD_NS (so
 * their sum cannot overflow). Returns RM_OK, or RM_EPROTO with the reason
 * in err ("window totals 1: win 0").
 */
int rm_totals_check(const struct rm_totals *p, size_t i, char *err, size_t errlen);

/*
 * Adds samples (by label) and seg (by segment) of cookie in process pid (0:
 * not said) to t's Go label counts, merged by (pid, cookie) (the sums
 * saturate). A pair not yet counted when t holds RM_GO_LABELS_MAX (with
 * room kept for pid 0's cookie 0) is folded: its samples and seg go to
 * cookie 0 of its process if that is counted, else of pid 0, its samples
 * also to go_folded. Returns 1 if folded, else 0. samples and seg 0: nothing.
 */
int rm_totals_go_add_pid(struct rm_totals *t, uint32_t pid, uint64_t cookie, uint64_t samples, uint64_t seg);

/* rm_totals_go_add_pid(t, 0, cookie, samples, seg): a process not said. */
int rm_totals_go_add_seg(struct rm_totals *t, uint64_t cookie, uint64_t samples, uint64_t seg);

/* rm_totals_go_add_seg(t, cookie, samples, 0): label counts alone. */
int rm_totals_go_add(struct rm_totals *t, uint64_t cookie, uint64_t samples);

/*
 * The collector's entry for a window's Go label counts: sets t's sampling
 * period to period_ns and adds c[0..n) (any number, in any order, repeated
 * (pid, cookie) pairs merged) with rm_totals_go_add_pid. Returns how many
 * samples were folded into a cookie 0.
 */
uint64_t rm_totals_go_set(struct rm_totals *t, uint64_t period_ns, const struct rm_golabel *c, size_t n);

/*
 * Decodes window totals i of a received Batch from buf[0..len) into *t
 * (zeroed first; unknown fields skipped, the last of a repeated value kept;
 * the Go label counts added with rm_totals_go_add_pid: a (pid, cookie) given
 * twice is merged, pairs past RM_GO_LABELS_MAX folded into a cookie 0 and go_folded)
 * and checks them (rm_totals_check). Returns RM_OK; RM_EPROTO if the bytes
 * do not decode (also a known field of another wire type); RM_EINVAL for a
 * broken rule, with the reason in err.
 */
int rm_totals_decode(struct rm_totals *t, const void *buf, size_t len, size_t i, char *err, size_t errlen);

/* d->m += s->m for every total of the table but win, and go_folded; s's
   Go label counts added to d's (rm_totals_go_add); d's go_period_ns is s's
   if s has one. */
void rm_totals_add(struct rm_totals *d, const struct rm_totals *s);

/* Bytes of the WindowTotals encoding of t, and writing them (returns b + that). */
size_t rm_totals_size(const struct rm_totals *t);
uint8_t *rm_totals_put(uint8_t *b, const struct rm_totals *t);

/* ---- protobuf wire primitives (the encoders here and the Batch framing) ---- */

#define RM_PB_VARINT 0u
#define RM_PB_LEN 2u

/* bytes of v as a varint */
static inline size_t rm_pb_vlen(uint64_t v)
{
	return (size_t)(64 - __builtin_clzll(v | 1) + 6) / 7;
}

/* bytes of the key of field f (f < 2048) */
#define RM_PB_KLEN(f) ((f) < 16 ? 1u : 2u)

static inline uint8_t *rm_pb_put_v(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* size of a proto3 varint field f: absent when 0 */
static inline size_t rm_pb_fsz(unsigned f, uint64_t v)
{
	return v ? RM_PB_KLEN(f) + rm_pb_vlen(v) : 0;
}

static inline uint8_t *rm_pb_put_f(uint8_t *p, unsigned f, uint64_t v)
{
	if (v) {
		p = rm_pb_put_v(p, (uint64_t)f << 3 | RM_PB_VARINT);
		p = rm_pb_put_v(p, v);
	}
	return p;
}

/* key and length of a length-delimited field f of n bytes */
static inline uint8_t *rm_pb_put_len(uint8_t *p, unsigned f, size_t n)
{
	p = rm_pb_put_v(p, (uint64_t)f << 3 | RM_PB_LEN);
	return rm_pb_put_v(p, n);
}

/* size of a length-delimited field f of n bytes (present even if n is 0) */
static inline size_t rm_pb_lsz(unsigned f, size_t n)
{
	return RM_PB_KLEN(f) + rm_pb_vlen(n) + n;
}

/*
 * The next field in [*q, end): its tag (number << 3 | wire type), and its
 * payload: a varint in *v, bytes in *sub and *sublen (wire type 2), nothing
 * (fixed 32 and 64 bits, skipped). Returns 0 and advances *q, or -1 if the
 * field is badly framed (also a tag of more than 5 bytes), of a wire type
 * protobuf no longer has (groups) or numbered 0.
 */
int rm_pb_field(const uint8_t **q, const uint8_t *end, uint64_t *tag, uint64_t *v, const uint8_t **sub,
		size_t *sublen);

/*
 * A varint at *pp (< end) into *v, advancing *pp: its length (1..10), or -1
 * if it does not end within 10 bytes or before end. Bound checks only near
 * the end of the buffer.
 */
static inline int rm_pb_get_v(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
	const uint8_t *p = *pp;
	uint64_t x, c;
	int i, n;

	if (p < end && p[0] < 0x80) {
		*v = p[0];
		*pp = p + 1;
		return 1;
	}
	n = end - p < 10 ? (int)(end - p) : 10;
	x = 0;
	for (i = 0; i < n; i++) {
		c = p[i];
		x |= (c & 0x7f) << (7 * i);
		if (c < 0x80) {
			*v = x;
			*pp = p + i + 1;
			return i + 1;
		}
	}
	return -1;
}

#endif
