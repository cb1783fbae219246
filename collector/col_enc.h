/*
 * col_enc.h - the collector's Batch encoder: the kernel's struct rm_part
 * and window totals (struct rm_totals) straight to the bytes of an Envelope
 * holding a Batch (rametr.proto), without building protobuf-c structures.
 *
 * Each record becomes a wire part (col_part_to_wire) that proto's codec
 * (rm_part.h) checks and encodes; the bytes are exactly what
 * rm_wire_encode() (protobuf-c) makes of the same batch converted as
 * col_sender.h describes (fields in number order, proto3 zero values left
 * out, acked_commands packed): the aggregator decodes them with
 * rm_wire_decode() like any other peer's. col_enc_test checks the identity
 * on random batches. Reason: protobuf-c's generic pack, the per-part
 * structures and rm_wire_check() cost the collector most of its CPU.
 *
 * Instead of rm_wire_check() on the result, each part is checked with
 * rm_part_check() (the rest hold by construction: comm is sanitised,
 * families the wire does not know written as 0, address lengths fixed), and every window must have
 * win != 0. Batch header fields are the caller's (node and backend checked
 * at col_sender_open(), instance/seq/window_ns non-zero).
 *
 * A window's Go label counts travel in its struct rm_totals (rm_part.h:
 * go_period_ns, go_folded, go[0..n_go) of struct rm_golabel {cookie,
 * samples}; WindowTotals fields 24..26). A source of them (the Go label
 * probes) fills a window's totals from its own plain array with
 * rm_totals_go_set(&w, period_ns, counts, n): any number of counts, cookies
 * in any order (merged; past RM_GO_LABELS_MAX folded into cookie 0 and
 * counted in go_folded), and hands w to the batcher like any window's
 * totals (col_batcher_window, which merges the counts of one window per
 * cookie); w may hold nothing but win and the counts.
 *
 * Thread safety: reentrant; struct col_enc is the caller's scratch, one per
 * thread at a time.
 */
#ifndef COL_ENC_H
#define COL_ENC_H

#include <stddef.h>
#include <stdint.h>

#include "col_backend.h"
#include "rm_part.h"

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
 * Checks part k (rm_part_check of its wire part) and appends its encoding.
 * Returns RM_OK; RM_EINVAL (err receives the reason, naming the part by its
 * index in ps, e.g. "part 3: win 0"; ps is unchanged); RM_ENOMEM.
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
			const struct rm_totals *wins, size_t nwins, const uint64_t *acks,
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
		  size_t nparts, const struct rm_totals *wins, size_t nwins, const uint64_t *acks,
		  size_t nacks, uint8_t **buf, size_t *len, char *err, size_t errlen);

/*
 * The wire part of a kernel record: every field copied (tuples as they are:
 * the encoder writes what the wire carries), comm cut at its first NUL or
 * RM_WIRE_COMM_MAX bytes with bytes outside 0x20..0x7e made '?'.
 */
void col_part_to_wire(struct rm_wpart *d, const struct rm_part *k);

/* Frees the scratch of e (not e itself); e may be reused after. */
void col_enc_free(struct col_enc *e);

#endif
