/*
 * rm_part.c - the codec of one segment part and of one window's totals
 * (rm_part.h): encoder, decoder and value check, each expanded from the
 * field tables of rm_part_def.h so that they cannot disagree with each
 * other or with rametr.proto. Owns no state.
 */
#include <stdio.h>
#include <string.h>

#include "rm_part.h"
#include "rm_err.h"
#include "banned.h"

/* ---- Tuple ---- */

/* address bytes a tuple of this family carries on the wire */
static inline size_t rm_tuple_alen(uint32_t family)
{
	return family == RM_AF_INET ? 4 : family == RM_AF_INET6 ? 16 : 0;
}

static inline int rm_tuple_present(const struct rm_wtuple *t)
{
	return t->cookie || t->family || t->lport || t->rport;
}

#define RM_TSZ_U64(n, m) +rm_pb_fsz(n, t->m)
#define RM_TSZ_U32(n, m) +rm_pb_fsz(n, t->m)
#define RM_TSZ_FAMILY(n, m) +rm_pb_fsz(n, rm_wire_family(t->m))
#define RM_TSZ_ADDR(n, m) +(alen ? rm_pb_lsz(n, alen) : 0)
#define RM_TSZ_(n, m, kind) RM_TSZ_##kind(n, m)

static inline size_t rm_tuple_size(const struct rm_wtuple *t)
{
	size_t alen = rm_tuple_alen(t->family);

	return 0 RM_TUPLE_FIELDS(RM_TSZ_);
}

#define RM_TPUT_U64(n, m) b = rm_pb_put_f(b, n, t->m);
#define RM_TPUT_U32(n, m) b = rm_pb_put_f(b, n, t->m);
#define RM_TPUT_FAMILY(n, m) b = rm_pb_put_f(b, n, rm_wire_family(t->m));
#define RM_TPUT_ADDR(n, m)                         \
	if (alen) {                                \
		b = rm_pb_put_len(b, n, alen);     \
		memcpy(b, t->m, alen);             \
		b += alen;                         \
	}
#define RM_TPUT_(n, m, kind) RM_TPUT_##kind(n, m)

static inline uint8_t *rm_tuple_put(uint8_t *b, unsigned f, const struct rm_wtuple *t)
{
	size_t alen = rm_tuple_alen(t->family);

	if (!rm_tuple_present(t))
		return b;
	b = rm_pb_put_len(b, f, rm_tuple_size(t));
	RM_TUPLE_FIELDS(RM_TPUT_)
	return b;
}

void rm_tuple_set(struct rm_wtuple *d, uint64_t cookie, uint32_t family, const void *la,
		  size_t lalen, uint32_t lport, const void *ra, size_t ralen, uint32_t rport)
{
	size_t alen = rm_tuple_alen(family);

	memset(d, 0, sizeof(*d));
	d->cookie = cookie;
	d->lport = lport;
	d->rport = rport;
	/* an IP tuple counts only with both addresses */
	if (alen && lalen == alen && ralen == alen) {
		d->family = family;
		memcpy(d->laddr, la, alen);
		memcpy(d->raddr, ra, alen);
	} else if (!alen) {
		d->family = rm_wire_family(family);
	}
}

int rm_tuple_check(const char *what, uint32_t family, uint32_t lport, uint32_t rport, size_t i,
		   char *err, size_t errlen)
{
	if (family != 0 && family != RM_AF_UNIX && family != RM_AF_INET && family != RM_AF_INET6) {
		rm_errf(err, errlen, "part %zu: %s tuple has unknown family %u", i, what, family);
		return RM_EPROTO;
	}
	if (lport > 65535 || rport > 65535) {
		rm_errf(err, errlen, "part %zu: %s tuple has port %u out of range", i, what,
			lport > 65535 ? lport : rport);
		return RM_EPROTO;
	}
	return RM_OK;
}

/* ---- SegmentPart ---- */

/* bytes of comm up to its first NUL, at most RM_WIRE_COMM_MAX */
static inline size_t rm_comm_len(const struct rm_wpart *p)
{
	return strnlen(p->comm, RM_WIRE_COMM_MAX);
}

#define RM_PSZ_U64(n, m) +rm_pb_fsz(n, p->m)
#define RM_PSZ_U32(n, m) +rm_pb_fsz(n, p->m)
#define RM_PSZ_COMM(n, m) +(cl ? rm_pb_lsz(n, cl) : 0)
#define RM_PSZ_TUPLE(n, m) +(rm_tuple_present(&p->m) ? rm_pb_lsz(n, rm_tuple_size(&p->m)) : 0)
#define RM_PSZ_(n, m, kind, rule) RM_PSZ_##kind(n, m)

size_t rm_part_size(const struct rm_wpart *p)
{
	size_t cl = rm_comm_len(p);

	return 0 RM_PART_FIELDS(RM_PSZ_);
}

#define RM_PPUT_U64(n, m) b = rm_pb_put_f(b, n, p->m);
#define RM_PPUT_U32(n, m) b = rm_pb_put_f(b, n, p->m);
#define RM_PPUT_COMM(n, m)                         \
	if (cl) {                                  \
		b = rm_pb_put_len(b, n, cl);       \
		memcpy(b, p->m, cl);               \
		b += cl;                           \
	}
#define RM_PPUT_TUPLE(n, m) b = rm_tuple_put(b, n, &p->m);
#define RM_PPUT_(n, m, kind, rule) RM_PPUT_##kind(n, m)

uint8_t *rm_part_put(uint8_t *b, const struct rm_wpart *p)
{
	size_t cl = rm_comm_len(p);

	RM_PART_FIELDS(RM_PPUT_)
	return b;
}

/* the value rules of the table (RM_RULE_) */
static int rm_part_rules(const struct rm_wpart *p, size_t i, char *err, size_t errlen)
{
	const char *what = "part";

	RM_PART_FIELDS(RM_RULE_)
	return RM_OK;
}

int rm_part_check(const struct rm_wpart *p, size_t i, char *err, size_t errlen)
{
	int rv;

	if ((rv = rm_part_rules(p, i, err, errlen)) != 0)
		return rv;
	if ((rv = rm_tuple_check("in", rm_wire_family(p->in.family), p->in.lport, p->in.rport, i, err,
				 errlen)) != 0)
		return rv;
	return rm_tuple_check("out", rm_wire_family(p->out.family), p->out.lport, p->out.rport, i,
			      err, errlen);
}

/* ---- decoding ---- */

/* comm from n bytes: up to the first NUL, at most RM_WIRE_COMM_MAX (d zeroed) */
static void rm_comm_set(char *d, const uint8_t *s, size_t n)
{
	const uint8_t *z = memchr(s, 0, n);

	if (z)
		n = (size_t)(z - s);
	memcpy(d, s, n < RM_WIRE_COMM_MAX ? n : RM_WIRE_COMM_MAX);
}

int rm_pb_field(const uint8_t **q, const uint8_t *end, uint64_t *tag, uint64_t *v,
		       const uint8_t **sub, size_t *sublen)
{
	/* a tag of at most 5 bytes (field numbers fit 32 bits), as protobuf-c reads them */
	int n = rm_pb_get_v(q, end, tag);

	if (n < 0 || n > 5 || (*tag >> 3) == 0)
		return -1;
	switch (*tag & 7) {
	case 0:
		return rm_pb_get_v(q, end, v) < 0 ? -1 : 0;
	case 1:
		if (end - *q < 8)
			return -1;
		*q += 8;
		return 0;
	case 2:
		if (rm_pb_get_v(q, end, v) < 0 || *v > (uint64_t)(end - *q))
			return -1;
		*sub = *q;
		*sublen = (size_t)*v;
		*q += *sublen;
		return 0;
	case 5:
		if (end - *q < 4)
			return -1;
		*q += 4;
		return 0;
	default:
		return -1;
	}
}

#define RM_KEY(n, wt) ((uint64_t)(n) << 3 | (wt))

/*
 * The default case of a decoder's switch on tag, in a function returning
 * -1 for bytes that do not decode: an unknown field is skipped; strict: a
 * known field (NUM of TABLE gives its case) of another wire type does not decode.
 */
#define RM_GET_OTHER(TABLE, NUM)                          \
	default:                                          \
		if (!strict)                              \
			break;                            \
		switch (tag >> 3) {                       \
		TABLE(NUM)                                \
			return -1;                        \
		default:                                  \
			break;                            \
		}                                         \
		break;

/* A tuple's fields as they arrive (addresses: where and how long). */
#define RM_TRAW_MEMBER_U64(m) uint64_t m;
#define RM_TRAW_MEMBER_U32(m) uint32_t m;
#define RM_TRAW_MEMBER_FAMILY(m) uint32_t m;
#define RM_TRAW_MEMBER_ADDR(m) const uint8_t *m; size_t m##_len;
#define RM_TRAW_MEMBER_(n, m, kind) RM_TRAW_MEMBER_##kind(m)

struct rm_traw {
	RM_TUPLE_FIELDS(RM_TRAW_MEMBER_)
	int seen;
};

#define RM_TGET_U64(n, m) case RM_KEY(n, 0): t->m = v; break;
#define RM_TGET_U32(n, m) case RM_KEY(n, 0): t->m = (uint32_t)v; break;
#define RM_TGET_FAMILY(n, m) RM_TGET_U32(n, m)
#define RM_TGET_ADDR(n, m) case RM_KEY(n, 2): t->m = sub; t->m##_len = sublen; break;
#define RM_TGET_(n, m, kind) RM_TGET_##kind(n, m)
#define RM_TNUM_(n, m, kind) case n:

/*
 * The fields of a Tuple in q[0..len) into *t: of a tuple given twice the
 * last. strict: a tuple given twice (protobuf-c would merge the two its own
 * way) or a known field of another wire type is an error. Returns 0 or -1
 * (does not decode).
 */
static int rm_tuple_get(struct rm_traw *t, const uint8_t *q, size_t len, int strict)
{
	const uint8_t *end = q + len, *sub = NULL;
	size_t sublen = 0;
	uint64_t tag, v = 0;

	if (strict && t->seen)
		return -1;
	memset(t, 0, sizeof(*t));
	t->seen = 1;
	while (q < end) {
		if (rm_pb_field(&q, end, &tag, &v, &sub, &sublen) != 0)
			return -1;
		switch (tag) {
		RM_TUPLE_FIELDS(RM_TGET_)
		RM_GET_OTHER(RM_TUPLE_FIELDS, RM_TNUM_)
		}
	}
	return 0;
}

/* side: "local" or "remote"; an address of 0 bytes or of the family's size */
static int rm_addr_check(const char *what, const char *side, uint32_t family, size_t len, size_t i,
			 char *err, size_t errlen)
{
	if (len == 0)
		return RM_OK;
	if (len != 4 && len != 16) {
		rm_errf(err, errlen, "part %zu: %s %s address of %zu bytes (expected 0, 4 or 16)", i, what,
			side, len);
		return RM_EPROTO;
	}
	if (len != rm_tuple_alen(family)) {
		rm_errf(err, errlen, "part %zu: %s %s address of %zu bytes does not match family %u", i,
			what, side, len, family);
		return RM_EPROTO;
	}
	return RM_OK;
}

/* The wire's rules on a tuple as it arrived (rm_tuple_check, and its addresses' sizes). */
static int rm_traw_check(const char *what, const struct rm_traw *t, size_t i, char *err, size_t errlen)
{
	int rv;

	if (!t->seen)
		return RM_OK;
	if ((rv = rm_tuple_check(what, t->family, t->lport, t->rport, i, err, errlen)) != 0 ||
	    (rv = rm_addr_check(what, "local", t->family, t->laddr_len, i, err, errlen)) != 0)
		return rv;
	return rm_addr_check(what, "remote", t->family, t->raddr_len, i, err, errlen);
}

static void rm_traw_set(struct rm_wtuple *d, const struct rm_traw *t)
{
	rm_tuple_set(d, t->cookie, t->family, t->laddr, t->laddr_len, t->lport, t->raddr, t->raddr_len,
		     t->rport);
}

/* what arrived of a part beside its values: its tuples, the bytes of comm before a NUL */
#define RM_PRAW_U64(m)
#define RM_PRAW_U32(m)
#define RM_PRAW_COMM(m) size_t m;
#define RM_PRAW_TUPLE(m) struct rm_traw m;
#define RM_PRAW_(n, m, kind, rule) RM_PRAW_##kind(m)

struct rm_praw {
	RM_PART_FIELDS(RM_PRAW_)
};

#define RM_PGET_U64(n, m) case RM_KEY(n, 0): p->m = v; break;
#define RM_PGET_U32(n, m) case RM_KEY(n, 0): p->m = (uint32_t)v; break;
#define RM_PGET_COMM(n, m)                                                              \
	case RM_KEY(n, 2):                                                              \
		memset(p->m, 0, sizeof(p->m));                                          \
		rm_comm_set(p->m, sub, sublen);                                         \
		z = memchr(sub, 0, sublen);                                             \
		raw->m = z ? (size_t)(z - sub) : sublen;                                \
		break;
#define RM_PGET_TUPLE(n, m)                                                             \
	case RM_KEY(n, 2):                                                              \
		if (rm_tuple_get(&raw->m, sub, sublen, strict) != 0)                    \
			return -1;                                                      \
		break;
#define RM_PGET_(n, m, kind, rule) RM_PGET_##kind(n, m)
#define RM_PNUM_(n, m, kind, rule) case n:
#define RM_PSET_U64(m)
#define RM_PSET_U32(m)
#define RM_PSET_COMM(m)
#define RM_PSET_TUPLE(m) rm_traw_set(&p->m, &raw->m);
#define RM_PSET_(n, m, kind, rule) RM_PSET_##kind(m)

/* The one decoder of a SegmentPart (see rm_part_get; strict as in rm_tuple_get). 0 or -1. */
static int rm_part_parse(struct rm_wpart *p, struct rm_praw *raw, const void *buf, size_t len, int strict)
{
	const uint8_t *q = buf, *end = q + len, *sub = NULL, *z;
	size_t sublen = 0;
	uint64_t tag, v = 0;

	memset(p, 0, sizeof(*p));
	memset(raw, 0, sizeof(*raw));
	if (!buf && len)
		return -1;
	while (q < end) {
		if (rm_pb_field(&q, end, &tag, &v, &sub, &sublen) != 0)
			return -1;
		switch (tag) {
		RM_PART_FIELDS(RM_PGET_)
		RM_GET_OTHER(RM_PART_FIELDS, RM_PNUM_)
		}
	}
	RM_PART_FIELDS(RM_PSET_)
	return 0;
}

int rm_part_get(struct rm_wpart *p, const void *buf, size_t len)
{
	struct rm_praw raw;

	return rm_part_parse(p, &raw, buf, len, 0) == 0 ? RM_OK : RM_EPROTO;
}

#define RM_PCHK_U64(m)
#define RM_PCHK_U32(m)
#define RM_PCHK_COMM(m)                                                                  \
	if (raw.m > RM_WIRE_COMM_MAX) {                                                  \
		rm_errf(err, errlen, "part %zu: " #m " of %zu bytes (at most %d)", i, raw.m,  \
			RM_WIRE_COMM_MAX);                                               \
		return RM_EINVAL;                                                        \
	}
#define RM_PCHK_TUPLE(m)                                                                 \
	if (rm_traw_check(#m, &raw.m, i, err, errlen) != 0)                              \
		return RM_EINVAL;
#define RM_PCHK_(n, m, kind, rule) RM_PCHK_##kind(m)

int rm_part_decode(struct rm_wpart *p, const void *buf, size_t len, size_t i, char *err, size_t errlen)
{
	struct rm_praw raw;

	if (rm_part_parse(p, &raw, buf, len, 1) != 0) {
		rm_errf(err, errlen, "part %zu does not decode", i);
		return RM_EPROTO;
	}
	/* RM_RULE_ returns RM_EPROTO for a broken rule: told apart from bytes that do not decode */
	if (rm_part_rules(p, i, err, errlen) != 0)
		return RM_EINVAL;
	RM_PART_FIELDS(RM_PCHK_)
	return RM_OK;
}

/* ---- WindowTotals ---- */

/* the slot of (pid, cookie) in t's Go label counts, or n_go */
static size_t rm_go_find(const struct rm_totals *t, uint32_t pid, uint64_t cookie)
{
	size_t j;

	for (j = 0; j < t->n_go && (t->go[j].cookie != cookie || t->go[j].pid != pid); j++)
		;
	return j;
}

static uint64_t rm_sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

int rm_totals_go_add_pid(struct rm_totals *t, uint32_t pid, uint64_t cookie, uint64_t samples, uint64_t seg)
{
	size_t j, n = t->n_go < RM_GO_LABELS_MAX ? t->n_go : RM_GO_LABELS_MAX;
	int folded = 0;

	if (!samples && !seg)
		return 0;
	t->n_go = (uint32_t)n;
	j = rm_go_find(t, pid, cookie);
	/* a new pair: room for it, keeping one for pid 0's cookie 0, else folded into its process's cookie 0
	   if counted, else pid 0's */
	if (j == n && (cookie || pid) && n + (rm_go_find(t, 0, 0) == n) >= RM_GO_LABELS_MAX) {
		t->go_folded = rm_sat_add(t->go_folded, samples);
		folded = 1;
		cookie = 0;
		if ((j = rm_go_find(t, pid, 0)) == n)
			j = rm_go_find(t, pid = 0, 0);
	}
	if (j == t->n_go) {
		t->go[j].cookie = cookie;
		t->go[j].samples = 0;
		t->go[j].seg = 0;
		t->go[j].pid = pid;
		t->go[j].pad = 0;
		t->n_go++;
	}
	t->go[j].samples = rm_sat_add(t->go[j].samples, samples);
	t->go[j].seg = rm_sat_add(t->go[j].seg, seg);
	return folded;
}

int rm_totals_go_add_seg(struct rm_totals *t, uint64_t cookie, uint64_t samples, uint64_t seg)
{
	return rm_totals_go_add_pid(t, 0, cookie, samples, seg);
}

int rm_totals_go_add(struct rm_totals *t, uint64_t cookie, uint64_t samples)
{
	return rm_totals_go_add_seg(t, cookie, samples, 0);
}

uint64_t rm_totals_go_set(struct rm_totals *t, uint64_t period_ns, const struct rm_golabel *c, size_t n)
{
	uint64_t folded = 0;
	size_t i;

	t->go_period_ns = period_ns;
	for (i = 0; i < n; i++)
		if (rm_totals_go_add_pid(t, c[i].pid, c[i].cookie, c[i].samples, c[i].seg))
			folded = rm_sat_add(folded, c[i].samples);
	return folded;
}

#define RM_WADD_(n, m, kind, rule) d->m += (n) == 1 ? 0 : s->m;

void rm_totals_add(struct rm_totals *d, const struct rm_totals *s)
{
	size_t j;

	RM_TOTALS_FIELDS(RM_WADD_)
	if (s->go_period_ns)
		d->go_period_ns = s->go_period_ns;
	d->go_folded = rm_sat_add(d->go_folded, s->go_folded);
	for (j = 0; j < s->n_go && j < RM_GO_LABELS_MAX; j++)
		rm_totals_go_add_pid(d, s->go[j].pid, s->go[j].cookie, s->go[j].samples, s->go[j].seg);
}

/* the rules of the Go label counts (rm_totals_check) */
static int rm_go_check(const struct rm_totals *p, size_t i, char *err, size_t errlen)
{
	size_t j, k;

	if (p->n_go > RM_GO_LABELS_MAX) {
		rm_errf(err, errlen, "window totals %zu: %u Go label counts (at most %d)", i, p->n_go,
			RM_GO_LABELS_MAX);
		return RM_EPROTO;
	}
	if (p->go_period_ns > RM_GO_PERIOD_MAX) {
		rm_errf(err, errlen, "window totals %zu: absurd go_period_ns %llu", i,
			(unsigned long long)p->go_period_ns);
		return RM_EPROTO;
	}
	if ((p->n_go || p->go_folded) && !p->go_period_ns) {
		rm_errf(err, errlen, "window totals %zu: Go label counts without go_period_ns", i);
		return RM_EPROTO;
	}
	if (p->go_period_ns && p->go_folded > RM_WIRE_ABSURD_NS / p->go_period_ns) {
		rm_errf(err, errlen, "window totals %zu: absurd go_folded %llu", i,
			(unsigned long long)p->go_folded);
		return RM_EPROTO;
	}
	for (j = 0; j < p->n_go; j++) {
		if (p->go[j].samples > RM_WIRE_ABSURD_NS / (p->go_period_ns ? p->go_period_ns : 1)) {
			rm_errf(err, errlen, "window totals %zu: absurd Go label samples %llu (cookie %llu)", i,
				(unsigned long long)p->go[j].samples, (unsigned long long)p->go[j].cookie);
			return RM_EPROTO;
		}
		if (p->go[j].seg > RM_WIRE_ABSURD_NS / (p->go_period_ns ? p->go_period_ns : 1)) {
			rm_errf(err, errlen, "window totals %zu: absurd Go segment samples %llu (cookie %llu)", i,
				(unsigned long long)p->go[j].seg, (unsigned long long)p->go[j].cookie);
			return RM_EPROTO;
		}
		for (k = 0; k < j; k++)
			if (p->go[k].cookie == p->go[j].cookie && p->go[k].pid == p->go[j].pid) {
				rm_errf(err, errlen, "window totals %zu: Go label cookie %llu of process %u counted twice",
					i, (unsigned long long)p->go[j].cookie, p->go[j].pid);
				return RM_EPROTO;
			}
	}
	return RM_OK;
}

int rm_totals_check(const struct rm_totals *p, size_t i, char *err, size_t errlen)
{
	const char *what = "window totals";

	RM_TOTALS_FIELDS(RM_RULE_)
	return rm_go_check(p, i, err, errlen);
}

/* WindowTotals' fields past the table (rm_part_def.h) */
#define RM_GO_PERIOD_F 24
#define RM_GO_FOLDED_F 25
#define RM_GO_LABELS_F 26

/* a GoLabelCount's fields: 0 or -1 (does not decode; a known field of another wire type) */
static int rm_go_get(const uint8_t *q, size_t len, uint64_t *cookie, uint64_t *samples, uint64_t *seg,
		     uint32_t *pid)
{
	const uint8_t *end = q + len, *sub = NULL;
	size_t sublen = 0;
	uint64_t tag, v = 0;

	*cookie = *samples = *seg = 0;
	*pid = 0;
	while (q < end) {
		if (rm_pb_field(&q, end, &tag, &v, &sub, &sublen) != 0)
			return -1;
		if (tag == RM_KEY(1, 0))
			*cookie = v;
		else if (tag == RM_KEY(2, 0))
			*samples = v;
		else if (tag == RM_KEY(3, 0))
			*seg = v;
		else if (tag == RM_KEY(4, 0))
			*pid = (uint32_t)v; /* a uint32 sent as more: its low 32 bits, as protobuf-c reads it */
		else if ((tag >> 3) >= 1 && (tag >> 3) <= 4)
			return -1;
	}
	return 0;
}

static size_t rm_go_size(const struct rm_golabel *g)
{
	return rm_pb_fsz(1, g->cookie) + rm_pb_fsz(2, g->samples) + rm_pb_fsz(3, g->seg) + rm_pb_fsz(4, g->pid);
}

#define RM_WGET_(n, m, kind, rule) case RM_KEY(n, 0): t->m = v; break;
#define RM_WNUM_(n, m, kind, rule) case n:

int rm_totals_decode(struct rm_totals *t, const void *buf, size_t len, size_t i, char *err, size_t errlen)
{
	const uint8_t *q = buf, *end = q + len, *sub = NULL;
	size_t sublen = 0;
	uint64_t tag, v = 0, cookie, samples, seg;
	uint32_t pid;

	memset(t, 0, sizeof(*t));
	while (q < end) {
		if (rm_pb_field(&q, end, &tag, &v, &sub, &sublen) != 0)
			goto malformed;
		switch (tag) {
		RM_TOTALS_FIELDS(RM_WGET_)
		case RM_KEY(RM_GO_PERIOD_F, 0):
			t->go_period_ns = v;
			break;
		case RM_KEY(RM_GO_FOLDED_F, 0):
			t->go_folded = v;
			break;
		case RM_KEY(RM_GO_LABELS_F, 2):
			if (rm_go_get(sub, sublen, &cookie, &samples, &seg, &pid) != 0)
				goto malformed;
			rm_totals_go_add_pid(t, pid, cookie, samples, seg);
			break;
		default:
			switch (tag >> 3) {
			RM_TOTALS_FIELDS(RM_WNUM_)
			case RM_GO_PERIOD_F:
			case RM_GO_FOLDED_F:
			case RM_GO_LABELS_F:
				goto malformed; /* a known field of another wire type */
			default:
				break; /* unknown: skipped */
			}
			break;
		}
	}
	return rm_totals_check(t, i, err, errlen) == RM_OK ? RM_OK : RM_EINVAL;
malformed:
	rm_errf(err, errlen, "window totals %zu do not decode", i);
	return RM_EPROTO;
}

#define RM_WSZ_(n, m, kind, rule) +rm_pb_fsz(n, t->m)

size_t rm_totals_size(const struct rm_totals *t)
{
	size_t n = 0 RM_TOTALS_FIELDS(RM_WSZ_), j;

	n += rm_pb_fsz(RM_GO_PERIOD_F, t->go_period_ns) + rm_pb_fsz(RM_GO_FOLDED_F, t->go_folded);
	for (j = 0; j < t->n_go && j < RM_GO_LABELS_MAX; j++)
		n += rm_pb_lsz(RM_GO_LABELS_F, rm_go_size(&t->go[j]));
	return n;
}

#define RM_WPUT_(n, m, kind, rule) b = rm_pb_put_f(b, n, t->m);

uint8_t *rm_totals_put(uint8_t *b, const struct rm_totals *t)
{
	size_t j;

	RM_TOTALS_FIELDS(RM_WPUT_)
	b = rm_pb_put_f(b, RM_GO_PERIOD_F, t->go_period_ns);
	b = rm_pb_put_f(b, RM_GO_FOLDED_F, t->go_folded);
	for (j = 0; j < t->n_go && j < RM_GO_LABELS_MAX; j++) {
		b = rm_pb_put_len(b, RM_GO_LABELS_F, rm_go_size(&t->go[j]));
		b = rm_pb_put_f(b, 1, t->go[j].cookie);
		b = rm_pb_put_f(b, 2, t->go[j].samples);
		b = rm_pb_put_f(b, 3, t->go[j].seg);
		b = rm_pb_put_f(b, 4, t->go[j].pid);
	}
	return b;
}
