/*
 * rm_wire.h - the wire codec of Rametr: turning bytes received from a peer
 * into a checked rametr.proto Envelope, and Envelopes into bytes. A Batch
 * is decoded straight into the parts and window totals the aggregator works
 * on (struct rm_wbatch: rm_part.h's structs, by its field tables' decoder),
 * never into protobuf-c structs; Hello and Ack through protobuf-c.
 *
 * Everything that arrives from the network goes through rm_wire_decode(),
 * which never crashes on any input, bounds the memory a message may make it
 * allocate, and checks the semantic rules below, so that the code behind it
 * (aggregator handlers, the collector's ack handling) only ever sees
 * well-formed messages.
 *
 * Semantic rules (rm_wire_check):
 *   - Envelope.version == RM_PROTO_VERSION, exactly one body set;
 *   - no field numbered 0 anywhere (other unknown fields are kept; in a
 *     Batch, skipped), no tag longer than 5 bytes; a Batch given twice or
 *     beside another body, or a part with a tuple given twice, is malformed;
 *   - node names: 1..RM_WIRE_NODE_MAX bytes of printable ASCII without
 *     spaces (0x21..0x7e), see rm_wire_check_node();
 *   - Hello: node valid, backend 1..63 printable bytes, token at most 128,
 *     hostname at most 255
 *     printable bytes, instance != 0, window_ns != 0;
 *   - Batch: node valid, backend as in Hello, instance != 0, seq != 0,
 *     window_ns != 0; every part has win != 0, comm <= 15 bytes,
 *     cpu_ns and runq_ns <= RM_WIRE_ABSURD_NS; its tuples (in, out; either may
 *     be absent) have family 0, 1, 2 or 10, addresses of 0 bytes or of the
 *     family's size (4 for AF_INET, 16 for AF_INET6; none for 0 and AF_UNIX)
 *     and ports <= 65535; every WindowTotals has win != 0 and Go label
 *     counts as rm_totals_check() says (a period of at most 1 s given with
 *     them, no count's CPU absurd; cookies repeated are merged, past
 *     RM_GO_LABELS_MAX folded into cookie 0 and go_folded);
 *   - Ack: status is a known Ack.Status, every command has id != 0,
 *     cap_permille <= 1000, ce of 0..63 and resource of 0..15 and reason of
 *     0..255 printable bytes, server empty or a valid node name, at most
 *     RM_WIRE_MAX_MATCH matches, each of family 2 or 10 with an address of
 *     the family's size, prefix <= 32 / 128, ports <= 65535 and lo <= hi;
 *     at most RM_WIRE_MAX_DECIDED decided matches, each checked likewise.
 *
 * Thread safety: all functions are reentrant; they share no state.
 */
#ifndef RM_WIRE_H
#define RM_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "rametr.pb-c.h"
#include "rm_err.h"
#include "rm_match.h"
#include "rm_part.h"

#define RM_PROTO_VERSION 1
#define RM_WIRE_MAX_MSG (64u << 20)  /* largest message either side accepts */
#define RM_WIRE_NODE_MAX 63          /* bytes in a node name */
#define RM_WIRE_MAX_MATCH 8           /* ThrottleCommand.match entries */
#define RM_WIRE_MAX_DECIDED 64        /* Ack.decided entries */

/*
 * A decoded Batch: the header as rametr.proto's Batch (node and backend
 * NUL-terminated, "" when absent), the parts and window totals as rm_part.h
 * has them, the acked command ids. Lives in its envelope's arena.
 */
struct rm_wbatch {
	const char *node, *backend;
	uint64_t instance, seq, window_ns;
	int64_t clock_offset_ns;
	struct rm_wpart *parts;
	size_t n_parts;
	struct rm_totals *windows;
	size_t n_windows;
	uint64_t *acked_commands;
	size_t n_acked_commands;
};

/*
 * Decodes len bytes from buf into a new Envelope and checks it. For a
 * Batch, env->body_case is RAMETR__ENVELOPE__BODY_BATCH, env->batch is NULL
 * and the batch is rm_wire_batch(env).
 * Returns:
 *   RM_OK       *out is the envelope, free it with rm_wire_free();
 *   RM_EPROTO   undecodable bytes (incl. len 0, truncated, garbage, len >
 *               RM_WIRE_MAX_MSG, or more decoded memory than such a message
 *               can legitimately need): err = "malformed message (N bytes)";
 *               or a semantic rule above broken: err says which;
 *   RM_EVERSION version != RM_PROTO_VERSION (also found in bytes that do not
 *               decode, if their version field is readable):
 *               err = "unsupported protocol version V (expected 1)";
 *   RM_EINVAL   out is NULL.
 * On error *out is NULL. err (may be NULL) receives a NUL-terminated text of
 * at most errlen bytes, "" on success.
 */
int rm_wire_decode(const void *buf, size_t len, Rametr__Envelope **out, char *err, size_t errlen);

/*
 * As rm_wire_decode(), and in addition *seq (may be NULL) receives the
 * Batch.seq of the message whenever its bytes decoded, even if it was then
 * refused for its version or a semantic rule; 0 otherwise. Lets a server
 * answer a refused batch with its seq.
 */
int rm_wire_decode_seq(const void *buf, size_t len, Rametr__Envelope **out, uint64_t *seq,
		       char *err, size_t errlen);

/*
 * The batch of an envelope rm_wire_decode() returned, valid as long as the
 * envelope; NULL if it holds another body (or is NULL).
 */
const struct rm_wbatch *rm_wire_batch(const Rametr__Envelope *env);

/*
 * Frees an envelope returned by rm_wire_decode() and everything in it, all
 * at once (its parts live in one arena: never free or keep a part of it
 * separately). NULL-tolerant.
 */
void rm_wire_free(Rametr__Envelope *env);

/*
 * Encodes env into a new malloc'd buffer (*buf, free() it) of *len bytes.
 * If env->version is 0 the encoding carries RM_PROTO_VERSION (env itself is
 * not modified). Does not run rm_wire_check(); callers that build messages
 * from untrusted input should. Returns RM_OK, RM_EINVAL (NULL argument, no
 * body set, or encoding larger than RM_WIRE_MAX_MSG) or RM_ENOMEM; on error
 * *buf is NULL and *len 0.
 */
int rm_wire_encode(const Rametr__Envelope *env, uint8_t **buf, size_t *len);

/*
 * Checks the semantic rules above on an envelope built in memory (the
 * version included; a Batch's parts by encoding it and decoding the bytes).
 * Returns RM_OK, RM_EVERSION or RM_EPROTO with the reason in err.
 */
int rm_wire_check(const Rametr__Envelope *env, char *err, size_t errlen);

/* RM_OK if node is a valid node name, else RM_EINVAL with the reason in err. */
int rm_wire_check_node(const char *node, char *err, size_t errlen);

/*
 * Encodes an Envelope holding one Ack {status, seq, error (may be NULL),
 * commands[0..ncmds)} into a new malloc'd buffer. The commands are only read.
 * Returns as rm_wire_encode().
 */
int rm_wire_encode_ack(Rametr__Ack__Status status, uint64_t seq, const char *error,
		       Rametr__ThrottleCommand *const *cmds, size_t ncmds, uint8_t **buf,
		       size_t *len);

/*
 * Finds Batch.seq in encoded Envelope bytes without decoding the rest (for
 * queues of encoded batches). Returns RM_OK and *seq, or RM_EPROTO if the
 * bytes are not framed as an Envelope holding a Batch with a seq.
 */
int rm_wire_peek_seq(const void *buf, size_t len, uint64_t *seq);

/* "ACK_OK", "ACK_DUPLICATE", ...; "ACK_UNKNOWN" for other values. Static. */
const char *rm_wire_ack_status_name(int status);

/*
 * The match m says (rm_match.h) into *out: address bytes beyond m's (at
 * most 16) zero. For a message rm_wire_check() accepted.
 */
void rm_wire_match(const Rametr__ThrottleMatch *m, struct rm_match *out);

#endif
