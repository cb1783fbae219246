/*
 * rm_wire.c - the wire codec: decoding under a memory budget (a Batch
 * straight into struct rm_wbatch by the part tables' decoders, Hello and Ack
 * by protobuf-c), the version check (also on bytes that do not decode), the
 * semantic rules listed in rm_wire.h, and encoding with the protocol
 * version filled in.
 * Owns no state; every function is reentrant.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rm_wire.h"
#include "rm_err.h"
#include "banned.h"

/*
 * Decoding a message of n bytes may allocate at most
 * RM_WIRE_BUDGET_MUL * n + RM_WIRE_BUDGET_BASE bytes, capped at
 * RM_WIRE_BUDGET_CAP. Real batches need about 2-6 times their encoded size
 * (a part of ~60-150 bytes decodes to a ~300-byte struct rm_wpart); a
 * hostile message of empty parts would need ~150 times (2 bytes -> 300).
 * A window's totals decode to a struct rm_totals of about 2.2 KiB (its
 * room for RM_GO_LABELS_MAX Go label counts): a collector sends at most 64
 * windows a batch, within RM_WIRE_BUDGET_BASE; a message of thousands of
 * tiny windows is over the budget and refused.
 */
#define RM_WIRE_BUDGET_MUL 32u
#define RM_WIRE_BUDGET_BASE (1u << 20)
#define RM_WIRE_BUDGET_CAP (1ull << 30)

/*
 * What decoding allocates comes from an arena: chunks of
 * at least RM_WIRE_CHUNK_MIN bytes (the first sized for a typical batch of
 * the message's length, each next one twice the last), bump-allocated,
 * freed all at once by rm_wire_free(). A batch of thousands of parts was
 * thousands of malloc() and free() calls, a fifth of the aggregator's CPU.
 */
#define RM_WIRE_CHUNK_MIN 4096u
#define RM_WIRE_ALIGN 16u

struct rm_wire_chunk {
	struct rm_wire_chunk *next;
	size_t size, used;
	_Alignas(RM_WIRE_ALIGN) unsigned char data[];
};

struct rm_wire_budget {
	size_t left;                /* bytes protobuf-c may still allocate */
	size_t next_size;           /* size of the next chunk */
	struct rm_wire_chunk *head; /* newest chunk first */
};

/* What rm_wire_decode() returns a pointer into: the envelope, a batch's parts, and the arena. */
struct rm_wire_msg {
	Rametr__Envelope env;
	struct rm_wbatch batch;
	struct rm_wire_chunk *chunks;
};

static void rm_wire_chunks_free(struct rm_wire_chunk *c)
{
	struct rm_wire_chunk *next;

	for (; c; c = next) {
		next = c->next;
		free(c);
	}
}

/* Bump allocation in the arena; NULL past the budget or out of memory. */
static void *rm_wire_arena_alloc(struct rm_wire_budget *b, size_t size)
{
	struct rm_wire_chunk *c = b->head;
	size_t need = (size + RM_WIRE_ALIGN - 1) & ~(size_t)(RM_WIRE_ALIGN - 1), csize;
	void *p;

	if (need == 0)
		need = RM_WIRE_ALIGN;
	if (need < size)
		return NULL;
	if (!c || c->size - c->used < need) {
		csize = b->next_size > need ? b->next_size : need;
		if (!(c = malloc(sizeof(*c) + csize)))
			return NULL;
		c->size = csize;
		c->used = 0;
		c->next = b->head;
		b->head = c;
		if (b->next_size < ((size_t)1 << 28))
			b->next_size *= 2;
	}
	p = c->data + c->used;
	c->used += need;
	return p;
}

static void *rm_wire_budget_alloc(void *data, size_t size)
{
	struct rm_wire_budget *b = data;

	if (size > b->left)
		return NULL;
	b->left -= size;
	return rm_wire_arena_alloc(b, size);
}

static void rm_wire_budget_free(void *data, void *ptr)
{
	/* arena memory: freed with the whole message */
	(void)data;
	(void)ptr;
}

static int rm_wire_find(const uint8_t *p, size_t len, unsigned field, unsigned wt, uint64_t *v,
			const uint8_t **sub, size_t *sublen);

/*
 * Finds the top-level field 1 (Envelope.version) in bytes that protobuf-c
 * refused. Only trusted if every top-level field is well framed up to the
 * end, so random garbage is almost never taken for a versioned message.
 * Returns 1 and *ver if found, else 0.
 */
static int rm_wire_peek_version(const uint8_t *p, size_t len, uint32_t *ver)
{
	const uint8_t *sub = NULL;
	size_t sublen = 0;
	uint64_t v = 0;

	if (rm_wire_find(p, len, 1, 0, &v, &sub, &sublen) != 0 || v > UINT32_MAX)
		return 0;
	*ver = (uint32_t)v;
	return 1;
}

/*
 * protobuf-c keeps a field numbered 0 as an unknown field when its tag is an
 * over-long varint, but refuses the same field once re-encoded canonically:
 * refuse it here, so whatever decodes also re-encodes to something decodable.
 */
static int rm_wire_check_unknown(const ProtobufCMessage *m, char *err, size_t errlen)
{
	unsigned i;

	if (!m)
		return RM_OK;
	for (i = 0; i < m->n_unknown_fields; i++) {
		if (m->unknown_fields[i].tag == 0) {
			rm_errf(err, errlen, "field number 0 in %s", m->descriptor->short_name);
			return RM_EPROTO;
		}
	}
	return RM_OK;
}

/*
 * Walks the fields of a message in p[0..len): returns 0 and the payload of
 * the last field numbered `field` with wire type `wt` (a varint in *v, or
 * bytes in *sub and *sublen), 1 if absent, -1 if badly framed.
 */
static int rm_wire_find(const uint8_t *p, size_t len, unsigned field, unsigned wt, uint64_t *v,
			const uint8_t **sub, size_t *sublen)
{
	const uint8_t *end = p + len, *s = NULL;
	size_t sl = 0;
	uint64_t tag, x = 0;
	int found = 1;

	while (p < end) {
		if (rm_pb_field(&p, end, &tag, &x, &s, &sl) != 0)
			return -1;
		if (tag != ((uint64_t)field << 3 | wt))
			continue;
		if (wt == RM_PB_LEN) {
			*sub = s;
			*sublen = sl;
		} else {
			*v = x;
		}
		found = 0;
	}
	return found;
}

int rm_wire_peek_seq(const void *buf, size_t len, uint64_t *seq)
{
	const uint8_t *sub = NULL;
	size_t sublen = 0;
	uint64_t v = 0;

	if (!buf || !seq)
		return RM_EPROTO;
	if (rm_wire_find(buf, len, 3, 2, &v, &sub, &sublen) != 0)
		return RM_EPROTO;
	if (rm_wire_find(sub, sublen, 3, 0, &v, &sub, &sublen) != 0)
		return RM_EPROTO;
	*seq = v;
	return RM_OK;
}

int rm_wire_check_node(const char *node, char *err, size_t errlen)
{
	size_t i, n;

	if (!node || !node[0]) {
		rm_errf(err, errlen, "empty node name");
		return RM_EINVAL;
	}
	n = strlen(node);
	if (n > RM_WIRE_NODE_MAX) {
		rm_errf(err, errlen, "node name of %zu bytes (at most %d)", n, RM_WIRE_NODE_MAX);
		return RM_EINVAL;
	}
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)node[i];

		if (c < 0x21 || c > 0x7e) {
			rm_errf(err, errlen, "node name has non-printable byte 0x%02x at offset %zu",
				    c, i);
			return RM_EINVAL;
		}
	}
	return RM_OK;
}

/* what: 'field' for messages; printable ASCII incl. space, min..max bytes. */
static int rm_wire_check_text(const char *what, const char *s, size_t min, size_t max, char *err,
			      size_t errlen)
{
	size_t i, n = s ? strlen(s) : 0;

	if (n < min) {
		rm_errf(err, errlen, "empty %s", what);
		return RM_EPROTO;
	}
	if (n > max) {
		rm_errf(err, errlen, "%s of %zu bytes (at most %zu)", what, n, max);
		return RM_EPROTO;
	}
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c > 0x7e) {
			rm_errf(err, errlen, "%s has non-printable byte 0x%02x at offset %zu", what,
				    c, i);
			return RM_EPROTO;
		}
	}
	return RM_OK;
}

static int rm_wire_check_node_proto(const char *node, char *err, size_t errlen)
{
	return rm_wire_check_node(node, err, errlen) ? RM_EPROTO : RM_OK;
}

static int rm_wire_check_hello(const Rametr__Hello *h, char *err, size_t errlen)
{
	int rv;

	if ((rv = rm_wire_check_unknown(&h->base, err, errlen)) != 0)
		return rv;
	if ((rv = rm_wire_check_node_proto(h->node, err, errlen)) != 0)
		return rv;
	if ((rv = rm_wire_check_text("backend name", h->backend, 1, 63, err, errlen)) != 0)
		return rv;
	if ((rv = rm_wire_check_text("hostname", h->hostname, 0, 255, err, errlen)) != 0)
		return rv;
	if ((rv = rm_wire_check_text("token", h->token, 0, 128, err, errlen)) != 0)
		return rv;
	if (h->instance == 0) {
		rm_errf(err, errlen, "hello has instance 0");
		return RM_EPROTO;
	}
	if (h->window_ns == 0) {
		rm_errf(err, errlen, "hello has window_ns 0");
		return RM_EPROTO;
	}
	return RM_OK;
}

static int rm_wire_check_batch_head(const char *node, const char *backend, uint64_t instance, uint64_t seq,
				    uint64_t window_ns, char *err, size_t errlen);

/*
 * A Batch built in memory: its bytes get the decoder's verdict, so that the
 * rules of a part are written once (rm_part_decode).
 */
static int rm_wire_check_batch(const Rametr__Envelope *env, char *err, size_t errlen)
{
	Rametr__Envelope *d = NULL;
	uint8_t *buf = NULL;
	size_t len = 0;
	int rv;

	if (!env->batch) {
		rm_errf(err, errlen, "message has no body");
		return RM_EPROTO;
	}
	if ((rv = rm_wire_check_unknown(&env->batch->base, err, errlen)) != 0)
		return rv;
	if ((rv = rm_wire_encode(env, &buf, &len)) != 0) {
		rm_errf(err, errlen, "batch does not encode: %s", rm_strerror(rv));
		return RM_EPROTO;
	}
	rv = rm_wire_decode(buf, len, &d, err, errlen);
	rm_wire_free(d);
	free(buf);
	return rv;
}

void rm_wire_match(const Rametr__ThrottleMatch *m, struct rm_match *out)
{
	memset(out, 0, sizeof(*out));
	out->family = m->family;
	if (m->addr.data)
		memcpy(out->addr, m->addr.data, m->addr.len <= 16 ? m->addr.len : 16);
	out->prefix = m->prefix;
	out->cport_lo = m->cport_lo;
	out->cport_hi = m->cport_hi;
	out->sport_lo = m->sport_lo;
	out->sport_hi = m->sport_hi;
}

/* One ThrottleMatch (what: "command 7 match 0", for the error). */
static int rm_wire_check_match(const char *what, const Rametr__ThrottleMatch *m, char *err, size_t errlen)
{
	struct rm_match x;
	char why[96];
	int rv;

	if ((rv = rm_wire_check_unknown(&m->base, err, errlen)) != 0)
		return rv;
	if ((m->family != 2 || m->addr.len != 4) && (m->family != 10 || m->addr.len != 16)) {
		rm_errf(err, errlen, "%s: family %u with a %zu-byte address", what, m->family, m->addr.len);
		return RM_EPROTO;
	}
	rm_wire_match(m, &x);
	if (rm_match_check(&x, why, sizeof(why)) != 0) { /* the check every holder of a match makes */
		rm_errf(err, errlen, "%s: %s", what, why);
		return RM_EPROTO;
	}
	return RM_OK;
}

static int rm_wire_check_command(const Rametr__ThrottleCommand *c, char *err, size_t errlen)
{
	char what[64];
	size_t j;
	int rv;

	snprintf(what, sizeof(what), "command %" PRIu64 " CE", c->id);
	if ((rv = rm_wire_check_text(what, c->ce, 0, 63, err, errlen)) != 0)
		return rv;
	snprintf(what, sizeof(what), "command %" PRIu64 " resource", c->id);
	if ((rv = rm_wire_check_text(what, c->resource, 0, 15, err, errlen)) != 0)
		return rv;
	snprintf(what, sizeof(what), "command %" PRIu64 " reason", c->id);
	if ((rv = rm_wire_check_text(what, c->reason, 0, 255, err, errlen)) != 0)
		return rv;
	if (c->server && c->server[0] && rm_wire_check_node(c->server, NULL, 0) != 0) {
		rm_errf(err, errlen, "command %" PRIu64 ": invalid server name", c->id);
		return RM_EPROTO;
	}
	if (c->n_match > RM_WIRE_MAX_MATCH) {
		rm_errf(err, errlen, "command %" PRIu64 ": %zu matches (at most %d)", c->id,
			    c->n_match, RM_WIRE_MAX_MATCH);
		return RM_EPROTO;
	}
	for (j = 0; j < c->n_match; j++) {
		snprintf(what, sizeof(what), "command %" PRIu64 " match %zu", c->id, j);
		if ((rv = rm_wire_check_match(what, c->match[j], err, errlen)) != 0)
			return rv;
	}
	return RM_OK;
}

static int rm_wire_check_ack(const Rametr__Ack *a, char *err, size_t errlen)
{
	size_t i;
	int rv;

	if ((rv = rm_wire_check_unknown(&a->base, err, errlen)) != 0)
		return rv;
	if ((int)a->status < RAMETR__ACK__STATUS__ACK_OK ||
	    (int)a->status > RAMETR__ACK__STATUS__ACK_RETRY) {
		rm_errf(err, errlen, "unknown ack status %d", (int)a->status);
		return RM_EPROTO;
	}
	for (i = 0; i < a->n_commands; i++) {
		const Rametr__ThrottleCommand *c = a->commands[i];

		if ((rv = rm_wire_check_unknown(&c->base, err, errlen)) != 0)
			return rv;
		if (c->id == 0) {
			rm_errf(err, errlen, "command %zu: id 0", i);
			return RM_EPROTO;
		}
		if (c->cap_permille > 1000) {
			rm_errf(err, errlen, "command %" PRIu64 ": cap of %u permille (at most 1000)",
				    c->id, c->cap_permille);
			return RM_EPROTO;
		}
		if ((rv = rm_wire_check_command(c, err, errlen)) != 0)
			return rv;
	}
	if (a->n_decided > RM_WIRE_MAX_DECIDED) {
		rm_errf(err, errlen, "%zu decided matches (at most %d)", a->n_decided, RM_WIRE_MAX_DECIDED);
		return RM_EPROTO;
	}
	for (i = 0; i < a->n_decided; i++) {
		char what[40];

		snprintf(what, sizeof(what), "decided match %zu", i);
		if ((rv = rm_wire_check_match(what, a->decided[i], err, errlen)) != 0)
			return rv;
	}
	return RM_OK;
}

int rm_wire_check(const Rametr__Envelope *env, char *err, size_t errlen)
{
	int rv;

	if (!env) {
		rm_errf(err, errlen, "no message");
		return RM_EPROTO;
	}
	if (env->version != RM_PROTO_VERSION) {
		rm_errf(err, errlen, "unsupported protocol version %u (expected %d)", env->version,
			    RM_PROTO_VERSION);
		return RM_EVERSION;
	}
	if ((rv = rm_wire_check_unknown(&env->base, err, errlen)) != 0)
		return rv;
	switch (env->body_case) {
	case RAMETR__ENVELOPE__BODY_HELLO:
		return rm_wire_check_hello(env->hello, err, errlen);
	case RAMETR__ENVELOPE__BODY_BATCH:
		return rm_wire_check_batch(env, err, errlen);
	case RAMETR__ENVELOPE__BODY_ACK:
		return rm_wire_check_ack(env->ack, err, errlen);
	default:
		rm_errf(err, errlen, "message has no body");
		return RM_EPROTO;
	}
}

/* ---- batches: straight from the bytes to the wire parts ---- */

/*
 * A Batch is decoded here, not by protobuf-c: its header into struct
 * rm_wbatch, each part and window totals by the field tables' decoders
 * (rm_part_decode, rm_totals_decode), into the arena and under the budget.
 * It reads what protobuf-c would (fields in any order, the last of a
 * non-repeated one kept, unknown fields skipped, acked_commands packed or
 * not) and refuses what it would refuse (bad framing, a known field of
 * another wire type); an Envelope with a Batch given twice or beside another
 * body is refused.
 */

/*
 * The body the Envelope in buf[0..len) holds: 2, 3 or 4 (Hello, Batch, Ack;
 * the last one given), 0 for none, -1 if the fields are odd, -2 for a Batch
 * given twice or beside another body (protobuf-c would decode all and keep
 * the last; no peer sends two).
 */
static int rm_env_body(const uint8_t *buf, size_t len, uint32_t *version)
{
	const uint8_t *q = buf, *end = buf + len, *sub;
	size_t sublen;
	uint64_t tag, v;
	int body = 0, bodies = 0, batches = 0;

	*version = 0;
	while (q < end) {
		if (rm_pb_field(&q, end, &tag, &v, &sub, &sublen) != 0)
			return -1;
		if (tag == (1u << 3 | RM_PB_VARINT)) {
			*version = (uint32_t)v;
		} else if ((tag >> 3) >= 2 && (tag >> 3) <= 4 && (tag & 7) == RM_PB_LEN) {
			body = (int)(tag >> 3);
			bodies |= 1 << body;
			batches += body == 3;
		} else if ((tag >> 3) <= 4) {
			return -1; /* a known field of another wire type */
		}
	}
	return batches > 1 || (batches && bodies != (1 << 3)) ? -2 : body;
}

/* The Batch of the Envelope in buf[0..len) (one: rm_env_body). */
static const uint8_t *rm_env_batch_bytes(const uint8_t *buf, size_t len, size_t *out)
{
	const uint8_t *sub = NULL;
	uint64_t v = 0;

	return rm_wire_find(buf, len, 3, RM_PB_LEN, &v, &sub, out) == 0 ? sub : NULL;
}

static int rm_wb_string(struct rm_wire_budget *b, const char **dst, const uint8_t *sub, size_t n)
{
	char *c;

	if (!sub) {
		*dst = "";
		return 0;
	}
	if (!(c = rm_wire_budget_alloc(b, n + 1)))
		return -1;
	memcpy(c, sub, n);
	c[n] = '\0';
	*dst = c;
	return 0;
}

/* The header's rules (Batch and Hello share node and backend's). */
static int rm_wire_check_batch_head(const char *node, const char *backend, uint64_t instance, uint64_t seq,
				    uint64_t window_ns, char *err, size_t errlen)
{
	int rv;

	if ((rv = rm_wire_check_node_proto(node, err, errlen)) != 0)
		return rv;
	if ((rv = rm_wire_check_text("backend name", backend, 1, 63, err, errlen)) != 0)
		return rv;
	if (instance == 0) {
		rm_errf(err, errlen, "batch has instance 0");
		return RM_EPROTO;
	}
	if (seq == 0) {
		rm_errf(err, errlen, "batch has seq 0");
		return RM_EPROTO;
	}
	if (window_ns == 0) {
		rm_errf(err, errlen, "batch has window_ns 0");
		return RM_EPROTO;
	}
	return RM_OK;
}

/*
 * Decodes the Batch in buf[0..len) into *wb. Returns -1 if it does not
 * decode (or is over the budget), else 0, with *bad = 0, or RM_EPROTO and
 * the first broken rule in err (the header's first, then the parts', then
 * the windows').
 */
static int rm_wb_decode(struct rm_wire_budget *b, struct rm_wbatch *wb, const uint8_t *buf, size_t len, int *bad,
			char *err, size_t errlen)
{
	const uint8_t *q, *end = buf + len, *sub = NULL, *node = NULL, *backend = NULL, *a;
	size_t sublen = 0, nnode = 0, nbackend = 0, np = 0, nw = 0, na = 0;
	char perr[256] = "";
	uint64_t tag, v = 0;
	int rv, prv = 0;

	memset(wb, 0, sizeof(*wb));
	*bad = 0;
	/* pass 1: framing, wire types, counts, the header */
	for (q = buf; q < end;) {
		if (rm_pb_field(&q, end, &tag, &v, &sub, &sublen) != 0)
			return -1;
		switch (tag) {
		case 1u << 3 | RM_PB_LEN: node = sub; nnode = sublen; break;
		case 2u << 3 | RM_PB_VARINT: wb->instance = v; break;
		case 3u << 3 | RM_PB_VARINT: wb->seq = v; break;
		case 4u << 3 | RM_PB_VARINT: wb->window_ns = v; break;
		case 5u << 3 | RM_PB_VARINT: wb->clock_offset_ns = (int64_t)v; break;
		case 6u << 3 | RM_PB_LEN: backend = sub; nbackend = sublen; break;
		case 7u << 3 | RM_PB_LEN: np++; break;
		case 8u << 3 | RM_PB_LEN: nw++; break;
		case 9u << 3 | RM_PB_VARINT: na++; break;
		case 9u << 3 | RM_PB_LEN: /* packed */
			for (a = sub; a < sub + sublen; na++)
				if (rm_pb_get_v(&a, sub + sublen, &v) < 0)
					return -1;
			break;
		default:
			if ((tag >> 3) <= 9)
				return -1; /* a known field of another wire type */
			break;     /* unknown: skipped */
		}
	}
	if (rm_wb_string(b, &wb->node, node, nnode) != 0 || rm_wb_string(b, &wb->backend, backend, nbackend) != 0 ||
	    (np && !(wb->parts = rm_wire_budget_alloc(b, np * sizeof(*wb->parts)))) ||
	    (nw && !(wb->windows = rm_wire_budget_alloc(b, nw * sizeof(*wb->windows)))) ||
	    (na && !(wb->acked_commands = rm_wire_budget_alloc(b, na * sizeof(*wb->acked_commands)))))
		return -1;
	/* pass 2: the parts, windows and acks (framing already checked) */
	for (q = buf; q < end && rm_pb_field(&q, end, &tag, &v, &sub, &sublen) == 0;) {
		if (tag == (7u << 3 | RM_PB_LEN)) {
			rv = rm_part_decode(&wb->parts[wb->n_parts], sub, sublen, wb->n_parts, perr, sizeof(perr));
			wb->n_parts++;
		} else if (tag == (8u << 3 | RM_PB_LEN)) {
			rv = rm_totals_decode(&wb->windows[wb->n_windows], sub, sublen, wb->n_windows, perr,
					      sizeof(perr));
			wb->n_windows++;
		} else if (tag == (9u << 3 | RM_PB_VARINT)) {
			wb->acked_commands[wb->n_acked_commands++] = v;
			continue;
		} else if (tag == (9u << 3 | RM_PB_LEN)) {
			for (a = sub; a < sub + sublen;)
				(void)rm_pb_get_v(&a, sub + sublen, &wb->acked_commands[wb->n_acked_commands++]);
			continue;
		} else {
			continue;
		}
		if (rv == RM_EPROTO)
			return -1;
		if (rv != RM_OK && !prv) { /* the first broken rule, reported after the header's */
			prv = RM_EPROTO;
			rm_errf(err, errlen, "%s", perr);
		}
	}
	if (rm_wire_check_batch_head(wb->node, wb->backend, wb->instance, wb->seq, wb->window_ns, err, errlen) != 0)
		*bad = RM_EPROTO;
	else
		*bad = prv;
	return 0;
}

/*
 * The Envelope in buf[0..len) if it holds a Batch (*is_batch = 1): NULL if
 * it does not decode (also bytes that are no Envelope). Other bodies: NULL
 * and *is_batch = 0, protobuf-c decodes them. *bad as rm_wb_decode's.
 */
static Rametr__Envelope *rm_wb_envelope(struct rm_wire_budget *b, const uint8_t *buf, size_t len, int *is_batch,
					int *bad, char *err, size_t errlen)
{
	struct rm_wire_msg *msg;
	const uint8_t *bb;
	uint32_t version;
	size_t blen = 0;
	int body;

	body = rm_env_body(buf, len, &version);
	*is_batch = body == 3 || body == -2; /* -2: refused here; -1: protobuf-c says why */
	if (body != 3)
		return NULL;
	if (!(msg = rm_wire_arena_alloc(b, sizeof(*msg))) || !(bb = rm_env_batch_bytes(buf, len, &blen)))
		return NULL;
	memset(msg, 0, sizeof(*msg));
	rametr__envelope__init(&msg->env);
	msg->env.version = version;
	msg->env.body_case = RAMETR__ENVELOPE__BODY_BATCH;
	if (rm_wb_decode(b, &msg->batch, bb, blen, bad, err, errlen) != 0)
		return NULL;
	return &msg->env;
}

const struct rm_wbatch *rm_wire_batch(const Rametr__Envelope *env)
{
	const struct rm_wire_msg *msg;

	if (!env || env->body_case != RAMETR__ENVELOPE__BODY_BATCH || env->batch)
		return NULL;
	msg = (const struct rm_wire_msg *)((const char *)env - offsetof(struct rm_wire_msg, env));
	return &msg->batch;
}

int rm_wire_decode_seq(const void *buf, size_t len, Rametr__Envelope **out, uint64_t *seq,
		       char *err, size_t errlen)
{
	struct rm_wire_budget budget = { 0, 0, NULL };
	ProtobufCAllocator alloc = {
		.alloc = rm_wire_budget_alloc,
		.free = rm_wire_budget_free,
		.allocator_data = &budget,
	};
	Rametr__Envelope *env = NULL;
	struct rm_wire_msg *msg;
	uint32_t ver;
	uint64_t want;
	int rv, is_batch = 0, bad = 0;

	if (seq)
		*seq = 0;
	rm_errf(err, errlen, "%s", "");
	if (!out) {
		rm_errf(err, errlen, "no output envelope");
		return RM_EINVAL;
	}
	*out = NULL;
	if (len > 0 && len <= RM_WIRE_MAX_MSG && buf) {
		want = (uint64_t)len * RM_WIRE_BUDGET_MUL + RM_WIRE_BUDGET_BASE;
		budget.left = want > RM_WIRE_BUDGET_CAP ? RM_WIRE_BUDGET_CAP : (size_t)want;
		/* a batch decodes to ~3 times its length */
		budget.next_size = len * 3 + sizeof(*msg) + RM_WIRE_ALIGN;
		if (budget.next_size < RM_WIRE_CHUNK_MIN)
			budget.next_size = RM_WIRE_CHUNK_MIN;
		env = rm_wb_envelope(&budget, buf, len, &is_batch, &bad, err, errlen);
		if (!is_batch) {
			rm_wire_chunks_free(budget.head);
			budget.head = NULL;
			if ((env = rametr__envelope__unpack(&alloc, len, buf))) {
				/* the envelope moves into a struct that also holds the arena */
				if (!(msg = rm_wire_arena_alloc(&budget, sizeof(*msg)))) {
					env = NULL;
				} else {
					memset(msg, 0, sizeof(*msg));
					msg->env = *env;
					env = &msg->env;
				}
			}
		}
	}
	if (!env) {
		rm_wire_chunks_free(budget.head);
		if (len > 0 && len <= RM_WIRE_MAX_MSG && buf &&
		    rm_wire_peek_version(buf, len, &ver) && ver != RM_PROTO_VERSION) {
			rm_errf(err, errlen, "unsupported protocol version %u (expected %d)", ver,
				    RM_PROTO_VERSION);
			return RM_EVERSION;
		}
		rm_errf(err, errlen, "malformed message (%zu bytes)", len);
		return RM_EPROTO;
	}
	msg = (struct rm_wire_msg *)((char *)env - offsetof(struct rm_wire_msg, env));
	msg->chunks = budget.head;
	if (is_batch) {
		if (seq)
			*seq = msg->batch.seq;
		if (env->version != RM_PROTO_VERSION) {
			rm_errf(err, errlen, "unsupported protocol version %u (expected %d)", env->version,
				RM_PROTO_VERSION);
			rv = RM_EVERSION;
		} else {
			rv = bad; /* err holds the reason */
		}
	} else {
		rv = rm_wire_check(env, err, errlen);
	}
	if (rv != 0) {
		rm_wire_free(env);
		return rv;
	}
	rm_errf(err, errlen, "%s", "");
	*out = env;
	return RM_OK;
}

int rm_wire_decode(const void *buf, size_t len, Rametr__Envelope **out, char *err, size_t errlen)
{
	return rm_wire_decode_seq(buf, len, out, NULL, err, errlen);
}

void rm_wire_free(Rametr__Envelope *env)
{
	struct rm_wire_msg *msg;

	if (!env)
		return;
	msg = (struct rm_wire_msg *)((char *)env - offsetof(struct rm_wire_msg, env));
	/* msg itself lives in one of the chunks */
	rm_wire_chunks_free(msg->chunks);
}

int rm_wire_encode(const Rametr__Envelope *env, uint8_t **buf, size_t *len)
{
	Rametr__Envelope copy;
	size_t n, packed;
	uint8_t *b;

	if (buf)
		*buf = NULL;
	if (len)
		*len = 0;
	if (!env || !buf || !len)
		return RM_EINVAL;
	if (env->body_case != RAMETR__ENVELOPE__BODY_HELLO &&
	    env->body_case != RAMETR__ENVELOPE__BODY_BATCH &&
	    env->body_case != RAMETR__ENVELOPE__BODY_ACK)
		return RM_EINVAL;
	if ((env->body_case == RAMETR__ENVELOPE__BODY_HELLO && !env->hello) ||
	    (env->body_case == RAMETR__ENVELOPE__BODY_BATCH && !env->batch) ||
	    (env->body_case == RAMETR__ENVELOPE__BODY_ACK && !env->ack))
		return RM_EINVAL;
	copy = *env;
	if (copy.version == 0)
		copy.version = RM_PROTO_VERSION;
	n = rametr__envelope__get_packed_size(&copy);
	if (n > RM_WIRE_MAX_MSG)
		return RM_EINVAL;
	if (!(b = malloc(n ? n : 1)))
		return RM_ENOMEM;
	packed = rametr__envelope__pack(&copy, b);
	if (packed != n) {
		/* protobuf-c's own sizes disagree: never expected */
		free(b);
		return RM_EINVAL;
	}
	*buf = b;
	*len = n;
	return RM_OK;
}

int rm_wire_encode_ack(Rametr__Ack__Status status, uint64_t seq, const char *error,
		       Rametr__ThrottleCommand *const *cmds, size_t ncmds, uint8_t **buf,
		       size_t *len)
{
	Rametr__Envelope env = RAMETR__ENVELOPE__INIT;
	Rametr__Ack ack = RAMETR__ACK__INIT;

	if (ncmds && !cmds)
		return RM_EINVAL;
	ack.status = status;
	ack.seq = seq;
	ack.error = (char *)(error ? error : "");
	ack.n_commands = ncmds;
	ack.commands = (Rametr__ThrottleCommand **)cmds;
	env.version = RM_PROTO_VERSION;
	env.body_case = RAMETR__ENVELOPE__BODY_ACK;
	env.ack = &ack;
	return rm_wire_encode(&env, buf, len);
}

/* ---- the protobuf-c form into the structs of rm_part.h ---- */

const char *rm_wire_ack_status_name(int status)
{
	switch (status) {
	case RAMETR__ACK__STATUS__ACK_OK:
		return "ACK_OK";
	case RAMETR__ACK__STATUS__ACK_DUPLICATE:
		return "ACK_DUPLICATE";
	case RAMETR__ACK__STATUS__ACK_BAD_VERSION:
		return "ACK_BAD_VERSION";
	case RAMETR__ACK__STATUS__ACK_MALFORMED:
		return "ACK_MALFORMED";
	case RAMETR__ACK__STATUS__ACK_REJECTED:
		return "ACK_REJECTED";
	case RAMETR__ACK__STATUS__ACK_RETRY:
		return "ACK_RETRY";
	default:
		return "ACK_UNKNOWN";
	}
}
