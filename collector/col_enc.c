/*
 * col_enc.c - the collector's Batch encoder: the kernel's records turned
 * into wire parts (rm_part.h) and encoded with proto's codec onto the
 * batch's growing parts buffer while the record is in cache; the Batch
 * framing (header, parts, window totals, acks) sized, then written into one
 * buffer of the exact size, byte-identical to protobuf-c's pack (see
 * col_enc.h). Owns no state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "col_enc.h"
#include "rm_wire.h"
#include "rm_err.h"
#include "banned.h"

/* ---- the kernel's record as a wire part ---- */

/* a tuple as the kernel wrote it (rm_part_put writes what the wire carries) */
#define COL_TO_WIRE_T_U64(m) d->m = k->m;
#define COL_TO_WIRE_T_U32(m) d->m = k->m;
#define COL_TO_WIRE_T_FAMILY(m) d->m = k->m;
#define COL_TO_WIRE_T_ADDR(m) memcpy(d->m, k->m, sizeof(d->m));
#define COL_TO_WIRE_T_(n, m, kind) COL_TO_WIRE_T_##kind(m)

static inline void col_tuple_to_wire(struct rm_wtuple *d, const struct rm_tuple *k)
{
	RM_TUPLE_FIELDS(COL_TO_WIRE_T_)
}

#define COL_TO_WIRE_U64(m) d->m = k->m;
#define COL_TO_WIRE_U32(m) d->m = k->m;
#define COL_TO_WIRE_TUPLE(m) col_tuple_to_wire(&d->m, &k->m);
#define COL_TO_WIRE_COMM(m)                                                     \
	for (i = 0; i < RM_WIRE_COMM_MAX && c[i]; i++)                          \
		d->m[i] = c[i] >= 0x20 && c[i] < 0x7f ? (char)c[i] : '?';      \
	memset(d->m + i, 0, sizeof(d->m) - i);
#define COL_TO_WIRE_(n, m, kind, rule) COL_TO_WIRE_##kind(m)

void col_part_to_wire(struct rm_wpart *d, const struct rm_part *k)
{
	const uint8_t *c = (const uint8_t *)k->comm;
	size_t i;

	RM_PART_FIELDS(COL_TO_WIRE_)
}

/* ---- parts ---- */

int col_enc_parts_add(struct col_enc_parts *ps, const struct rm_part *k, char *err,
		      size_t errlen)
{
	struct rm_wpart w;
	size_t sz, need;

	col_part_to_wire(&w, k);
	if (rm_part_check(&w, ps->n, err, errlen) != 0)
		return RM_EINVAL;
	sz = rm_part_size(&w);
	need = ps->len + rm_pb_lsz(7, sz);
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
	rm_part_put(rm_pb_put_len(ps->buf + ps->len, 7, sz), &w);
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
			const struct rm_totals *wins, size_t nwins, const uint64_t *acks,
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
	bsize = (nnode ? rm_pb_lsz(1, nnode) : 0) + rm_pb_fsz(2, hdr->instance) + rm_pb_fsz(3, hdr->seq) +
		rm_pb_fsz(4, hdr->window_ns) + rm_pb_fsz(5, (uint64_t)hdr->clock_offset_ns) +
		(nbackend ? rm_pb_lsz(6, nbackend) : 0) + plen;
	for (i = 0; i < nwins; i++) {
		if (rm_totals_check(&wins[i], i, err, errlen) != 0)
			return RM_EINVAL;
		bsize += rm_pb_lsz(8, rm_totals_size(&wins[i]));
	}
	for (i = 0; i < nacks; i++)
		asize += rm_pb_vlen(acks[i]);
	if (nacks)
		bsize += rm_pb_lsz(9, asize);
	total = 2 + rm_pb_lsz(3, bsize); /* version, batch */
	if (total > RM_WIRE_MAX_MSG) {
		rm_errf(err, errlen, "encoded batch of %zu bytes (at most %u); submit fewer at a time",
			    total, RM_WIRE_MAX_MSG);
		return RM_EINVAL;
	}
	if (!(b = malloc(total)))
		return RM_ENOMEM;
	p = rm_pb_put_f(b, 1, RM_PROTO_VERSION);
	p = rm_pb_put_len(p, 3, bsize);
	if (nnode) {
		p = rm_pb_put_len(p, 1, nnode);
		memcpy(p, hdr->node, nnode);
		p += nnode;
	}
	p = rm_pb_put_f(p, 2, hdr->instance);
	p = rm_pb_put_f(p, 3, hdr->seq);
	p = rm_pb_put_f(p, 4, hdr->window_ns);
	p = rm_pb_put_f(p, 5, (uint64_t)hdr->clock_offset_ns);
	if (nbackend) {
		p = rm_pb_put_len(p, 6, nbackend);
		memcpy(p, hdr->backend, nbackend);
		p += nbackend;
	}
	if (plen) {
		memcpy(p, ps->buf, plen);
		p += plen;
	}
	for (i = 0; i < nwins; i++) {
		p = rm_pb_put_len(p, 8, rm_totals_size(&wins[i]));
		p = rm_totals_put(p, &wins[i]);
	}
	if (nacks) {
		p = rm_pb_put_len(p, 9, asize);
		for (i = 0; i < nacks; i++)
			p = rm_pb_put_v(p, acks[i]);
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
		  size_t nparts, const struct rm_totals *wins, size_t nwins, const uint64_t *acks,
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
