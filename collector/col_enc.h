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
 * structures and rm_wire_check() cost the collector most of its CPU.
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

/*
 * Parts encoded so far for one batch: each as the Batch.parts field (key,
 * length, SegmentPart), in order. The collector encodes each part as it
 * leaves the ring, so a part is read once and copied once. Zero-initialise;
 * col_enc_parts_reset() empties it keeping the memory, col_enc_parts_free()
 * releases it.
 */
struct col_enc_parts {
	uint8_t *buf;
	size_t len, cap;
	size_t n;     /* parts in buf */
};

/*
 * Checks part k against the rules above and appends its encoding. Returns
 * RM_OK; RM_EINVAL (err receives the reason, naming the part by its index
 * in ps, e.g. "part 3: win 0"; ps is unchanged); RM_ENOMEM.
 */
int col_enc_parts_add(struct col_enc_parts *ps, const struct rm_part *k, char *err,
		      size_t errlen);
void col_enc_parts_reset(struct col_enc_parts *ps);
void col_enc_parts_free(struct col_enc_parts *ps);

/*
 * Encodes the Envelope {version RM_PROTO_VERSION, Batch {hdr, the parts in
 * ps (may be NULL: none), wins, acks}} into a new malloc'd *buf of *len
 * bytes. Returns RM_OK; RM_EINVAL if a window has win 0 or the encoding
 * would be larger than RM_WIRE_MAX_MSG (err says which); RM_ENOMEM. On
 * error *buf is NULL and *len 0.
 */
int col_enc_batch_parts(const struct col_enc_hdr *hdr, const struct col_enc_parts *ps,
			const struct col_window *wins, size_t nwins, const uint64_t *acks,
			size_t nacks, uint8_t **buf, size_t *len, char *err, size_t errlen);

/* Reusable scratch of col_enc_batch(); zero-initialise, free with col_enc_free(). */
struct col_enc {
	struct col_enc_parts ps;
};

/*
 * col_enc_parts_add() of parts[0..nparts) into e's emptied scratch, then
 * col_enc_batch_parts(). Returns as those (RM_EINVAL for the first part or
 * window breaking a rule; also for NULL arguments).
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
