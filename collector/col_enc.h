/*
 * col_enc.h - the collector's Batch encoder: struct rm_part and struct
 * col_window straight to the bytes of an Envelope holding a Batch
 * (rametr.proto), without building protobuf-c structures.
 *
 * The bytes are exactly what rm_wire_encode() (protobuf-c) makes of the same
 * batch converted as col_sender.h describes (fields in number order, proto3
 * zero values left out, acked_commands packed): the aggregator decodes them
 * with rm_wire_decode() like any other peer's. col_enc_test checks the
 * identity on random batches. Reason: protobuf-c's generic pack, the per-part
 * structures and rm_wire_check() cost the collector most of its CPU (issue 5).
 *
 * Instead of rm_wire_check() on the result, the encoder checks the rules an
 * rm_part can break (the rest hold by construction: comm is sanitised,
 * families mapped, address lengths fixed): every part has win != 0,
 * cpu_ns and runq_ns <= RM_WIRE_ABSURD_NS, tuple ports <= 65535; every window
 * has win != 0. Batch header fields are the caller's (node and backend
 * checked at col_sender_open(), instance/seq/window_ns non-zero).
 *
 * Thread safety: reentrant; struct col_enc is the caller's scratch, one per
 * thread at a time.
 */
#ifndef COL_ENC_H
#define COL_ENC_H

#include <stddef.h>
#include <stdint.h>

#include "col_backend.h"

/* Batch header fields (see rametr.proto Batch). */
struct col_enc_hdr {
	const char *node;
	const char *backend;
	uint64_t instance;
	uint64_t seq;
	uint64_t window_ns;
	int64_t clock_offset_ns;
};

/* Reusable scratch (per-part sizes); zero-initialise, free with col_enc_free(). */
struct col_enc {
	uint32_t *sizes;
	size_t cap;
};

/*
 * Encodes the Envelope {version RM_PROTO_VERSION, Batch {hdr, parts, wins,
 * acks}} into a new malloc'd *buf of *len bytes. Returns RM_OK; RM_EINVAL if
 * a part or window breaks a rule above (err, if not NULL, receives the reason
 * in rm_wire_check()'s words, e.g. "part 3: win 0") or the encoding would be
 * larger than RM_WIRE_MAX_MSG (err says so); RM_ENOMEM. On error *buf is NULL
 * and *len 0.
 */
int col_enc_batch(struct col_enc *e, const struct col_enc_hdr *hdr, const struct rm_part *parts,
		  size_t nparts, const struct col_window *wins, size_t nwins, const uint64_t *acks,
		  size_t nacks, uint8_t **buf, size_t *len, char *err, size_t errlen);

/*
 * The SegmentPart encoding of one part (no key or length prefix), as
 * col_enc_batch() writes it: col_enc_part_size() bytes written at p by
 * col_enc_part_put(), which returns p + that. No rule is checked: also the
 * aggregator's canonical encoding of a held part (agg_stitch.c).
 */
size_t col_enc_part_size(const struct rm_part *k);
uint8_t *col_enc_part_put(uint8_t *p, const struct rm_part *k);

/* Frees the scratch of e (not e itself); e may be reused after. */
void col_enc_free(struct col_enc *e);

#endif
