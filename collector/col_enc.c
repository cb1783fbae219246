/*
 * col_enc.c - the collector's Batch encoder: rm_part / col_window to
 * protobuf wire bytes, byte-identical to protobuf-c's pack of the same Batch
 * (see col_enc.h). A part is sized, then written, while its record is in
 * cache, onto the batch's growing parts buffer; the batch is sized, then
 * written into one buffer of the exact size. Owns no state.
 *
 * Field numbers and the mapping from rm_part follow rametr.proto and
 * col_sender.h; the three lists of fields below (COL_ENC_PART_A/B/C,
 * COL_ENC_WIN) are the only place they are written down here, used for both
 * sizes and bytes so the two cannot disagree.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "col_enc.h"
#include "rm_wire.h"
#include "rm_err.h"
#include "banned.h"

/* protobuf wire types */
#define COL_WT_VARINT 0u
#define COL_WT_LEN 2u

/* bytes of v as a varint */
static inline size_t col_vlen(uint64_t v)
{
	return (size_t)(64 - __builtin_clzll(v | 1) + 6) / 7;
}

/* bytes of the key of field f (f < 2048) */
#define COL_KLEN(f) ((f) < 16 ? 1u : 2u)

static inline uint8_t *col_put_v(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* size of a proto3 varint field: absent when 0 */
static inline size_t col_fsz(size_t klen, uint64_t v)
{
	return v ? klen + col_vlen(v) : 0;
}

static inline uint8_t *col_put_f(uint8_t *p, unsigned f, uint64_t v)
{
	if (v) {
		p = col_put_v(p, (uint64_t)f << 3 | COL_WT_VARINT);
		p = col_put_v(p, v);
	}
	return p;
}

static inline uint8_t *col_put_len(uint8_t *p, unsigned f, size_t n)
{
	p = col_put_v(p, (uint64_t)f << 3 | COL_WT_LEN);
	return col_put_v(p, n);
}

/* size of a length-delimited field of n bytes (present even if n is 0) */
static inline size_t col_lsz(unsigned f, size_t n)
{
	return COL_KLEN(f) + col_vlen(n) + n;
}

/* ---- Tuple ---- */

/* What a tuple goes out as: present, wire family, address bytes. */
struct col_tup {
	int present;
	uint32_t family;
	size_t alen;
	size_t size; /* body bytes */
};

static void col_tup(struct col_tup *t, const struct rm_tuple *k)
{
	t->present = k->cookie || k->family || k->lport || k->rport;
	t->family = 0;
	t->alen = 0;
	t->size = 0;
	if (!t->present)
		return;
	switch (k->family) {
	case RM_AF_INET:
		t->family = RM_AF_INET;
		t->alen = 4;
		break;
	case RM_AF_INET6:
		t->family = RM_AF_INET6;
		t->alen = 16;
		break;
	case RM_AF_UNIX:
		t->family = RM_AF_UNIX;
		break;
	default:
		break;
	}
	t->size = col_fsz(1, k->cookie) + col_fsz(1, t->family) + (t->alen ? 2 + t->alen : 0) +
		  col_fsz(1, k->lport) + (t->alen ? 2 + t->alen : 0) + col_fsz(1, k->rport);
}

static uint8_t *col_put_tup(uint8_t *p, unsigned f, const struct col_tup *t,
			    const struct rm_tuple *k)
{
	if (!t->present)
		return p;
	p = col_put_len(p, f, t->size);
	p = col_put_f(p, 1, k->cookie);
	p = col_put_f(p, 2, t->family);
	if (t->alen) {
		p = col_put_len(p, 3, t->alen);
		memcpy(p, k->laddr, t->alen);
		p += t->alen;
	}
	p = col_put_f(p, 4, k->lport);
	if (t->alen) {
		p = col_put_len(p, 5, t->alen);
		memcpy(p, k->raddr, t->alen);
		p += t->alen;
	}
	return col_put_f(p, 6, k->rport);
}

/* ---- SegmentPart ---- */

/* SegmentPart varint fields in number order, around comm (5) and the tuples (15, 16). */
#define COL_ENC_PART_A(X, k) X(1, (k)->seg_id) X(2, (k)->win) X(3, (k)->pid) X(4, (k)->tid)
#define COL_ENC_PART_B(X, k)                                                                    \
	X(6, (k)->start_ns) X(7, (k)->end_ns) X(8, (k)->cpu_ns) X(9, (k)->runq_ns)               \
	X(10, (k)->rx_bytes) X(11, (k)->tx_bytes) X(12, (k)->disk_read) X(13, (k)->disk_write)  \
	X(14, (k)->flags)
#define COL_ENC_PART_C(X, k)                                                                    \
	X(17, (k)->in_seq_start) X(18, (k)->in_seq_end) X(19, (k)->out_seq_start)               \
	X(20, (k)->out_seq_end) X(21, (k)->parent_seg) X(22, (k)->domid) X(23, (k)->vcpu)       \
	X(24, (k)->blocked_ns)

#define COL_SZ(f, v) +col_fsz(COL_KLEN(f), (v))
#define COL_WR(f, v) p = col_put_f(p, (f), (v));

/* bytes of comm up to its first NUL, at most RM_WIRE_COMM_MAX */
static inline size_t col_comm_len(const struct rm_part *k)
{
	const uint8_t *c = (const uint8_t *)k->comm;
	size_t n = 0;

	while (n < RM_WIRE_COMM_MAX && n < RM_COMM_LEN - 1 && c[n])
		n++;
	return n;
}

/* The rules an rm_part can break (col_enc.h). */
static int col_part_check(const struct rm_part *k, size_t i, char *err, size_t errlen)
{
	const struct rm_tuple *t[2] = { &k->in, &k->out };
	static const char *const what[2] = { "in", "out" };
	int j;

	if (k->win == 0) {
		rm_errf(err, errlen, "part %zu: win 0", i);
		return RM_EINVAL;
	}
	if (k->cpu_ns > RM_WIRE_ABSURD_NS) {
		rm_errf(err, errlen, "part %zu: absurd cpu_ns %llu", i,
			    (unsigned long long)k->cpu_ns);
		return RM_EINVAL;
	}
	if (k->runq_ns > RM_WIRE_ABSURD_NS) {
		rm_errf(err, errlen, "part %zu: absurd runq_ns %llu", i,
			    (unsigned long long)k->runq_ns);
		return RM_EINVAL;
	}
	/* an absent tuple has ports 0 */
	for (j = 0; j < 2; j++) {
		if (t[j]->lport > 65535 || t[j]->rport > 65535) {
			rm_errf(err, errlen, "part %zu: %s tuple has port %u out of range", i,
				    what[j], t[j]->lport > 65535 ? t[j]->lport : t[j]->rport);
			return RM_EINVAL;
		}
	}
	return RM_OK;
}

size_t col_enc_part_size(const struct rm_part *k)
{
	struct col_tup in, out;
	size_t n = col_comm_len(k);

	col_tup(&in, &k->in);
	col_tup(&out, &k->out);
	return 0 COL_ENC_PART_A(COL_SZ, k) COL_ENC_PART_B(COL_SZ, k) COL_ENC_PART_C(COL_SZ, k) +
	       (n ? 2 + n : 0) + (in.present ? col_lsz(15, in.size) : 0) +
	       (out.present ? col_lsz(16, out.size) : 0);
}

uint8_t *col_enc_part_put(uint8_t *p, const struct rm_part *k)
{
	const uint8_t *c = (const uint8_t *)k->comm;
	struct col_tup in, out;
	size_t i, n = col_comm_len(k);

	COL_ENC_PART_A(COL_WR, k)
	if (n) {
		p = col_put_len(p, 5, n);
		for (i = 0; i < n; i++)
			*p++ = c[i] >= 0x20 && c[i] < 0x7f ? c[i] : '?';
	}
	COL_ENC_PART_B(COL_WR, k)
	col_tup(&in, &k->in);
	col_tup(&out, &k->out);
	p = col_put_tup(p, 15, &in, &k->in);
	p = col_put_tup(p, 16, &out, &k->out);
	COL_ENC_PART_C(COL_WR, k)
	return p;
}

/* ---- WindowTotals ---- */

#define COL_ENC_WIN(X, w)                                                                        \
	X(1, (w)->t.win) X(2, (w)->t.busy_ns) X(3, (w)->t.unseg_cpu_ns) X(4, (w)->t.rx_bytes)    \
	X(5, (w)->t.tx_bytes) X(6, (w)->t.disk_read) X(7, (w)->t.disk_write)                     \
	X(8, (w)->t.unseg_rx) X(9, (w)->t.unseg_tx) X(10, (w)->t.unseg_disk_read)                \
	X(11, (w)->t.unseg_disk_write) X(12, (w)->t.lost_ns) X(13, (w)->t.dropped_parts)         \
	X(14, (w)->capacity_ns) X(15, (w)->idle_ns) X(16, (w)->t.dropped_cpu_ns)                 \
	X(17, (w)->t.dropped_rx) X(18, (w)->t.dropped_tx) X(19, (w)->t.dropped_disk_read)        \
	X(20, (w)->t.dropped_disk_write)

static size_t col_win_size(const struct col_window *w)
{
	return 0 COL_ENC_WIN(COL_SZ, w);
}

static uint8_t *col_put_win(uint8_t *p, const struct col_window *w)
{
	COL_ENC_WIN(COL_WR, w)
	return p;
}

/* ---- parts ---- */

int col_enc_parts_add(struct col_enc_parts *ps, const struct rm_part *k, char *err,
		      size_t errlen)
{
	size_t sz, need;
	int rv;

	if ((rv = col_part_check(k, ps->n, err, errlen)) != 0)
		return rv;
	sz = col_enc_part_size(k);
	need = ps->len + col_lsz(7, sz);
	if (need > ps->cap) {
		size_t ncap = ps->cap ? ps->cap * 2 : 65536;
		uint8_t *nb;

		while (ncap < need)
			ncap *= 2;
		if (!(nb = realloc(ps->buf, ncap)))
			return RM_ENOMEM;
		ps->buf = nb;
		ps->cap = ncap;
	}
	col_enc_part_put(col_put_len(ps->buf + ps->len, 7, sz), k);
	ps->len = need;
	ps->n++;
	return RM_OK;
}

void col_enc_parts_reset(struct col_enc_parts *ps)
{
	ps->len = 0;
	ps->n = 0;
}

void col_enc_parts_free(struct col_enc_parts *ps)
{
	free(ps->buf);
	memset(ps, 0, sizeof(*ps));
}

/* ---- Batch ---- */

int col_enc_batch_parts(const struct col_enc_hdr *hdr, const struct col_enc_parts *ps,
			const struct col_window *wins, size_t nwins, const uint64_t *acks,
			size_t nacks, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
	size_t i, bsize, asize = 0, total, nnode, nbackend, plen = ps ? ps->len : 0;
	uint8_t *b, *p;

	if (buf)
		*buf = NULL;
	if (len)
		*len = 0;
	if (!hdr || !hdr->node || !hdr->backend || !buf || !len || (nwins && !wins) ||
	    (nacks && !acks)) {
		rm_errf(err, errlen, "invalid arguments");
		return RM_EINVAL;
	}
	nnode = strlen(hdr->node);
	nbackend = strlen(hdr->backend);
	bsize = (nnode ? col_lsz(1, nnode) : 0) + col_fsz(1, hdr->instance) + col_fsz(1, hdr->seq) +
		col_fsz(1, hdr->window_ns) + col_fsz(1, (uint64_t)hdr->clock_offset_ns) +
		(nbackend ? col_lsz(6, nbackend) : 0) + plen;
	for (i = 0; i < nwins; i++) {
		if (wins[i].t.win == 0) {
			rm_errf(err, errlen, "window totals %zu: win 0", i);
			return RM_EINVAL;
		}
		bsize += col_lsz(8, col_win_size(&wins[i]));
	}
	for (i = 0; i < nacks; i++)
		asize += col_vlen(acks[i]);
	if (nacks)
		bsize += col_lsz(9, asize);
	total = 2 + col_lsz(3, bsize); /* version, batch */
	if (total > RM_WIRE_MAX_MSG) {
		rm_errf(err, errlen, "encoded batch of %zu bytes (at most %u); submit fewer at a time",
			    total, RM_WIRE_MAX_MSG);
		return RM_EINVAL;
	}
	if (!(b = malloc(total)))
		return RM_ENOMEM;
	p = col_put_f(b, 1, RM_PROTO_VERSION);
	p = col_put_len(p, 3, bsize);
	if (nnode) {
		p = col_put_len(p, 1, nnode);
		memcpy(p, hdr->node, nnode);
		p += nnode;
	}
	p = col_put_f(p, 2, hdr->instance);
	p = col_put_f(p, 3, hdr->seq);
	p = col_put_f(p, 4, hdr->window_ns);
	p = col_put_f(p, 5, (uint64_t)hdr->clock_offset_ns);
	if (nbackend) {
		p = col_put_len(p, 6, nbackend);
		memcpy(p, hdr->backend, nbackend);
		p += nbackend;
	}
	if (plen) {
		memcpy(p, ps->buf, plen);
		p += plen;
	}
	for (i = 0; i < nwins; i++) {
		p = col_put_len(p, 8, col_win_size(&wins[i]));
		p = col_put_win(p, &wins[i]);
	}
	if (nacks) {
		p = col_put_len(p, 9, asize);
		for (i = 0; i < nacks; i++)
			p = col_put_v(p, acks[i]);
	}
	if ((size_t)(p - b) != total) {
		/* the two passes disagree: a bug here, never sent */
		free(b);
		rm_errf(err, errlen, "internal error: encoded %zu bytes, sized %zu",
			    (size_t)(p - b), total);
		return RM_EINVAL;
	}
	*buf = b;
	*len = total;
	return RM_OK;
}

int col_enc_batch(struct col_enc *e, const struct col_enc_hdr *hdr, const struct rm_part *parts,
		  size_t nparts, const struct col_window *wins, size_t nwins, const uint64_t *acks,
		  size_t nacks, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
	size_t i;
	int rv;

	if (buf)
		*buf = NULL;
	if (len)
		*len = 0;
	if (!e || (nparts && !parts)) {
		rm_errf(err, errlen, "invalid arguments");
		return RM_EINVAL;
	}
	col_enc_parts_reset(&e->ps);
	for (i = 0; i < nparts; i++)
		if ((rv = col_enc_parts_add(&e->ps, &parts[i], err, errlen)) != 0)
			return rv;
	return col_enc_batch_parts(hdr, &e->ps, wins, nwins, acks, nacks, buf, len, err, errlen);
}

void col_enc_free(struct col_enc *e)
{
	if (!e)
		return;
	col_enc_parts_free(&e->ps);
}
