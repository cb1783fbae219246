/*
 * rm_wire.c - the wire codec: protobuf-c unpacking under a memory budget,
 * the version check (also on bytes that do not decode), the semantic rules
 * listed in rm_wire.h, and encoding with the protocol version filled in.
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
 * A message of n bytes may make protobuf-c allocate at most
 * RM_WIRE_BUDGET_MUL * n + RM_WIRE_BUDGET_BASE bytes, capped at
 * RM_WIRE_BUDGET_CAP. Real batches need about 2-6 times their encoded size
 * (a part of ~60-150 bytes decodes to ~200-400); a hostile message of empty
 * sub-messages would need ~100 times (2 bytes -> a 200-byte struct).
 */
#define RM_WIRE_BUDGET_MUL 32u
#define RM_WIRE_BUDGET_BASE (1u << 20)
#define RM_WIRE_BUDGET_CAP (1ull << 30)

/*
 * What protobuf-c allocates while unpacking comes from an arena: chunks of
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

/* rm_wire_set_slow(): every message through protobuf-c (tests compare the two) */
static _Atomic int rm_wire_slow;

void rm_wire_set_slow(int on)
{
	rm_wire_slow = on;
}

/* What rm_wire_decode() returns a pointer into: the envelope and its arena. */
struct rm_wire_msg {
	Rametr__Envelope env;
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

/* Reads a varint at *p (< end); returns 0 and advances *p, or -1. */
static int rm_wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	unsigned shift = 0;

	while (*p < end && shift < 64) {
		uint8_t c = *(*p)++;

		x |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = x;
			return 0;
		}
		shift += 7;
	}
	return -1;
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
	const uint8_t *sub;
	size_t sublen;
	uint64_t v;

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
	const uint8_t *end = p + len;
	uint64_t tag, x;
	int found = 1;

	while (p < end) {
		if (rm_wire_varint(&p, end, &tag) != 0 || (tag >> 3) == 0)
			return -1;
		switch (tag & 7) {
		case 0:
			if (rm_wire_varint(&p, end, &x) != 0)
				return -1;
			if ((tag >> 3) == field && wt == 0) {
				*v = x;
				found = 0;
			}
			break;
		case 1:
			if (end - p < 8)
				return -1;
			p += 8;
			break;
		case 2:
			if (rm_wire_varint(&p, end, &x) != 0 || x > (uint64_t)(end - p))
				return -1;
			if ((tag >> 3) == field && wt == 2) {
				*sub = p;
				*sublen = (size_t)x;
				found = 0;
			}
			p += x;
			break;
		case 5:
			if (end - p < 4)
				return -1;
			p += 4;
			break;
		default:
			return -1;
		}
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

/* side: "local" or "remote"; the reason is formatted only on error */
static int rm_wire_check_addr(const char *what, const char *side, uint32_t family,
			      const ProtobufCBinaryData *a, size_t i, char *err, size_t errlen)
{
	size_t want;

	if (a->len == 0)
		return RM_OK;
	if (a->len != 4 && a->len != 16) {
		rm_errf(err, errlen, "part %zu: %s %s address of %zu bytes (expected 0, 4 or 16)",
			    i, what, side, a->len);
		return RM_EPROTO;
	}
	want = family == 2 ? 4 : family == 10 ? 16 : 0;
	if (a->len != want) {
		rm_errf(err, errlen, "part %zu: %s %s address of %zu bytes does not match family %u",
			    i, what, side, a->len, family);
		return RM_EPROTO;
	}
	return RM_OK;
}

static int rm_wire_check_tuple(const char *what, const Rametr__Tuple *t, size_t i, char *err,
			       size_t errlen)
{
	int rv;

	if (!t)
		return RM_OK;
	if ((rv = rm_wire_check_unknown(&t->base, err, errlen)) != 0)
		return rv;
	if (t->family != 0 && t->family != 1 && t->family != 2 && t->family != 10) {
		rm_errf(err, errlen, "part %zu: %s tuple has unknown family %u", i, what,
			    t->family);
		return RM_EPROTO;
	}
	if ((rv = rm_wire_check_addr(what, "local", t->family, &t->laddr, i, err, errlen)) != 0)
		return rv;
	if ((rv = rm_wire_check_addr(what, "remote", t->family, &t->raddr, i, err, errlen)) != 0)
		return rv;
	if (t->lport > 65535 || t->rport > 65535) {
		rm_errf(err, errlen, "part %zu: %s tuple has port %u out of range", i, what,
			    t->lport > 65535 ? t->lport : t->rport);
		return RM_EPROTO;
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

static int rm_wire_check_part(const Rametr__SegmentPart *p, size_t i, char *err, size_t errlen)
{
	size_t n;
	int rv;

	if ((rv = rm_wire_check_unknown(&p->base, err, errlen)) != 0)
		return rv;
	if (p->win == 0) {
		rm_errf(err, errlen, "part %zu: win 0", i);
		return RM_EPROTO;
	}
	n = p->comm ? strlen(p->comm) : 0;
	if (n > RM_WIRE_COMM_MAX) {
		rm_errf(err, errlen, "part %zu: comm of %zu bytes (at most %d)", i, n,
			    RM_WIRE_COMM_MAX);
		return RM_EPROTO;
	}
	if (p->cpu_ns > RM_WIRE_ABSURD_NS) {
		rm_errf(err, errlen, "part %zu: absurd cpu_ns %" PRIu64, i, p->cpu_ns);
		return RM_EPROTO;
	}
	if (p->runq_ns > RM_WIRE_ABSURD_NS) {
		rm_errf(err, errlen, "part %zu: absurd runq_ns %" PRIu64, i, p->runq_ns);
		return RM_EPROTO;
	}
	if ((rv = rm_wire_check_tuple("in", p->in, i, err, errlen)) != 0)
		return rv;
	return rm_wire_check_tuple("out", p->out, i, err, errlen);
}

static int rm_wire_check_batch(const Rametr__Batch *b, char *err, size_t errlen)
{
	size_t i;
	int rv;

	if ((rv = rm_wire_check_unknown(&b->base, err, errlen)) != 0)
		return rv;
	if ((rv = rm_wire_check_node_proto(b->node, err, errlen)) != 0)
		return rv;
	if ((rv = rm_wire_check_text("backend name", b->backend, 1, 63, err, errlen)) != 0)
		return rv;
	if (b->instance == 0) {
		rm_errf(err, errlen, "batch has instance 0");
		return RM_EPROTO;
	}
	if (b->seq == 0) {
		rm_errf(err, errlen, "batch has seq 0");
		return RM_EPROTO;
	}
	if (b->window_ns == 0) {
		rm_errf(err, errlen, "batch has window_ns 0");
		return RM_EPROTO;
	}
	for (i = 0; i < b->n_parts; i++)
		if ((rv = rm_wire_check_part(b->parts[i], i, err, errlen)) != 0)
			return rv;
	for (i = 0; i < b->n_windows; i++) {
		if ((rv = rm_wire_check_unknown(&b->windows[i]->base, err, errlen)) != 0)
			return rv;
		if (b->windows[i]->win == 0) {
			rm_errf(err, errlen, "window totals %zu: win 0", i);
			return RM_EPROTO;
		}
	}
	return RM_OK;
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
		return rm_wire_check_batch(env->batch, err, errlen);
	case RAMETR__ENVELOPE__BODY_ACK:
		return rm_wire_check_ack(env->ack, err, errlen);
	default:
		rm_errf(err, errlen, "message has no body");
		return RM_EPROTO;
	}
}

/* ---- the fast path: Envelope {version, Batch} without protobuf-c ---- */

/*
 * A batch is by far the most common message and protobuf-c's generic unpack
 * (descriptor lookups, a scan pass, one call per field) was most of the
 * aggregator's decoding cost. rm_wire_fast() decodes an Envelope holding a
 * Batch into the same structures protobuf-c would build (same values, absent
 * strings as protobuf_c_empty_string, present ones copied, empty bytes as
 * {0, NULL}), from the same arena and under the same budget. It handles only
 * the known fields, each non-repeated one at most once, with their declared
 * wire types, and varints that fit their field; on anything else (another
 * body, unknown fields, duplicates, odd framing) it gives up and protobuf-c
 * decodes the message. So every input gets protobuf-c's verdict, except
 * that the fast path needs less memory than protobuf-c and may accept a batch
 * within the budget that protobuf-c would have found over it.
 */

struct rm_fast {
	const uint8_t *p, *end;
};

/*
 * A varint at *p (< end) into *v, advancing *p: its length (1..10), or -1
 * if it does not end within 10 bytes or before end. Bound checks only near
 * the end of the buffer.
 */
static inline int rm_fast_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
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

/* Next field: 1 and *f, *wt, and the payload (*v, or *sub and *sublen); 0 at the end; -1 odd. */
static int rm_fast_next(struct rm_fast *r, unsigned *f, unsigned *wt, uint64_t *v,
			const uint8_t **sub, size_t *sublen)
{
	uint64_t tag, x;

	if (r->p == r->end)
		return 0;
	if (rm_fast_varint(&r->p, r->end, &tag) < 0 || (tag >> 3) == 0 || (tag >> 3) > 63)
		return -1;
	*f = (unsigned)(tag >> 3);
	*wt = (unsigned)(tag & 7);
	if (*wt == 0) {
		int n = rm_fast_varint(&r->p, r->end, v);

		/* ten bytes at most, the tenth only 0 or 1: the value fits 64 bits as is */
		if (n < 0 || (n == 10 && r->p[-1] > 1))
			return -1;
		return 1;
	}
	if (*wt == 2) {
		if (rm_fast_varint(&r->p, r->end, &x) < 0 || x > (uint64_t)(r->end - r->p))
			return -1;
		*sub = r->p;
		*sublen = (size_t)x;
		r->p += x;
		return 1;
	}
	return -1;
}

static void *rm_fast_alloc(struct rm_wire_budget *b, size_t size)
{
	return rm_wire_budget_alloc(b, size);
}

static int rm_fast_string(struct rm_wire_budget *b, char **dst, const uint8_t *sub, size_t n)
{
	char *c = rm_fast_alloc(b, n + 1);

	if (!c)
		return -1;
	memcpy(c, sub, n);
	c[n] = '\0';
	*dst = c;
	return 0;
}

static int rm_fast_bytes(struct rm_wire_budget *b, ProtobufCBinaryData *dst, const uint8_t *sub,
			 size_t n)
{
	dst->len = n;
	dst->data = NULL;
	if (n == 0)
		return 0;
	if (!(dst->data = rm_fast_alloc(b, n)))
		return -1;
	memcpy(dst->data, sub, n);
	return 0;
}

/* field numbers seen so far (bit f) in a message: a second one gives up */
#define RM_FAST_ONCE(seen, f)                   \
	do {                                    \
		if ((seen) & (1ull << (f)))     \
			return -1;              \
		(seen) |= 1ull << (f);          \
	} while (0)

static int rm_fast_tuple(struct rm_wire_budget *b, Rametr__Tuple **out, const uint8_t *buf,
			 size_t len)
{
	struct rm_fast r = { buf, buf + len };
	const uint8_t *sub = NULL;
	size_t sublen = 0;
	uint64_t v = 0, seen = 0;
	unsigned f, wt;
	Rametr__Tuple *t;
	int rv;

	if (!(t = rm_fast_alloc(b, sizeof(*t))))
		return -1;
	rametr__tuple__init(t);
	while ((rv = rm_fast_next(&r, &f, &wt, &v, &sub, &sublen)) == 1) {
		RM_FAST_ONCE(seen, f);
		switch (f) {
		case 1: if (wt != 0) return -1; t->cookie = v; break;
		case 2: if (wt != 0 || v > UINT32_MAX) return -1; t->family = (uint32_t)v; break;
		case 3: if (wt != 2 || rm_fast_bytes(b, &t->laddr, sub, sublen)) return -1; break;
		case 4: if (wt != 0 || v > UINT32_MAX) return -1; t->lport = (uint32_t)v; break;
		case 5: if (wt != 2 || rm_fast_bytes(b, &t->raddr, sub, sublen)) return -1; break;
		case 6: if (wt != 0 || v > UINT32_MAX) return -1; t->rport = (uint32_t)v; break;
		default: return -1;
		}
	}
	if (rv != 0)
		return -1;
	*out = t;
	return 0;
}

/* SegmentPart varint fields: number -> member, and whether it is a uint32 */
#define RM_FAST_U64(n, m) case n: if (wt != 0) return -1; p->m = v; break;
#define RM_FAST_U32(n, m) case n: if (wt != 0 || v > UINT32_MAX) return -1; p->m = (uint32_t)v; break;

static int rm_fast_part(struct rm_wire_budget *b, Rametr__SegmentPart *p, const uint8_t *buf,
			size_t len)
{
	struct rm_fast r = { buf, buf + len };
	const uint8_t *sub = NULL;
	size_t sublen = 0;
	uint64_t v = 0, seen = 0;
	unsigned f, wt;
	int rv;

	rametr__segment_part__init(p);
	while ((rv = rm_fast_next(&r, &f, &wt, &v, &sub, &sublen)) == 1) {
		RM_FAST_ONCE(seen, f);
		switch (f) {
		RM_FAST_U64(1, seg_id) RM_FAST_U64(2, win) RM_FAST_U32(3, pid) RM_FAST_U32(4, tid)
		case 5: if (wt != 2 || rm_fast_string(b, &p->comm, sub, sublen)) return -1; break;
		RM_FAST_U64(6, start_ns) RM_FAST_U64(7, end_ns) RM_FAST_U64(8, cpu_ns)
		RM_FAST_U64(9, runq_ns) RM_FAST_U64(10, rx_bytes) RM_FAST_U64(11, tx_bytes)
		RM_FAST_U64(12, disk_read) RM_FAST_U64(13, disk_write) RM_FAST_U32(14, flags)
		case 15: if (wt != 2 || rm_fast_tuple(b, &p->in, sub, sublen)) return -1; break;
		case 16: if (wt != 2 || rm_fast_tuple(b, &p->out, sub, sublen)) return -1; break;
		RM_FAST_U64(17, in_seq_start) RM_FAST_U64(18, in_seq_end) RM_FAST_U64(19, out_seq_start)
		RM_FAST_U64(20, out_seq_end) RM_FAST_U64(21, parent_seg) RM_FAST_U32(22, domid)
		RM_FAST_U32(23, vcpu) RM_FAST_U64(24, blocked_ns)
		default: return -1;
		}
	}
	return rv == 0 ? 0 : -1;
}

static int rm_fast_window(Rametr__WindowTotals *p, const uint8_t *buf, size_t len)
{
	struct rm_fast r = { buf, buf + len };
	const uint8_t *sub = NULL;
	size_t sublen = 0;
	uint64_t v = 0, seen = 0;
	unsigned f, wt;
	int rv;

	rametr__window_totals__init(p);
	while ((rv = rm_fast_next(&r, &f, &wt, &v, &sub, &sublen)) == 1) {
		RM_FAST_ONCE(seen, f);
		switch (f) {
		RM_FAST_U64(1, win) RM_FAST_U64(2, busy_ns) RM_FAST_U64(3, unseg_cpu_ns)
		RM_FAST_U64(4, rx_bytes) RM_FAST_U64(5, tx_bytes) RM_FAST_U64(6, disk_read)
		RM_FAST_U64(7, disk_write) RM_FAST_U64(8, unseg_rx) RM_FAST_U64(9, unseg_tx)
		RM_FAST_U64(10, unseg_disk_read) RM_FAST_U64(11, unseg_disk_write)
		RM_FAST_U64(12, lost_ns) RM_FAST_U64(13, dropped_parts) RM_FAST_U64(14, capacity_ns)
		RM_FAST_U64(15, idle_ns) RM_FAST_U64(16, dropped_cpu_ns) RM_FAST_U64(17, dropped_rx)
		RM_FAST_U64(18, dropped_tx) RM_FAST_U64(19, dropped_disk_read)
		RM_FAST_U64(20, dropped_disk_write)
		default: return -1;
		}
	}
	return rv == 0 ? 0 : -1;
}

#undef RM_FAST_U64
#undef RM_FAST_U32

static int rm_fast_batch(struct rm_wire_budget *b, Rametr__Batch **out, const uint8_t *buf,
			 size_t len)
{
	struct rm_fast r = { buf, buf + len };
	const uint8_t *sub = NULL, *q;
	size_t sublen = 0, np = 0, nw = 0, na = 0, i;
	uint64_t v = 0, seen = 0;
	unsigned f, wt;
	Rametr__SegmentPart *parts = NULL;
	Rametr__WindowTotals *wins = NULL;
	Rametr__Batch *bt;
	int rv;

	/* pass 1: framing, counts, and the packed acks */
	while ((rv = rm_fast_next(&r, &f, &wt, &v, &sub, &sublen)) == 1) {
		if (f == 7 && wt == 2) {
			np++;
		} else if (f == 8 && wt == 2) {
			nw++;
		} else if (f == 9 && wt == 2) {
			RM_FAST_ONCE(seen, f);
			for (q = sub; q < sub + sublen; na++)
				if (rm_fast_varint(&q, sub + sublen, &v) < 0)
					return -1;
		} else if (f >= 1 && f <= 6) {
			RM_FAST_ONCE(seen, f);
			if (wt != ((f == 1 || f == 6) ? 2u : 0u))
				return -1;
		} else {
			return -1;
		}
	}
	if (rv != 0 || !(bt = rm_fast_alloc(b, sizeof(*bt))))
		return -1;
	rametr__batch__init(bt);
	if ((np && (!(bt->parts = rm_fast_alloc(b, np * sizeof(*bt->parts))) ||
		    !(parts = rm_fast_alloc(b, np * sizeof(*parts))))) ||
	    (nw && (!(bt->windows = rm_fast_alloc(b, nw * sizeof(*bt->windows))) ||
		    !(wins = rm_fast_alloc(b, nw * sizeof(*wins))))) ||
	    (na && !(bt->acked_commands = rm_fast_alloc(b, na * sizeof(*bt->acked_commands)))))
		return -1;
	/* pass 2: the values (framing already checked) */
	r.p = buf;
	while (rm_fast_next(&r, &f, &wt, &v, &sub, &sublen) == 1) {
		switch (f) {
		case 1: if (rm_fast_string(b, &bt->node, sub, sublen)) return -1; break;
		case 2: bt->instance = v; break;
		case 3: bt->seq = v; break;
		case 4: bt->window_ns = v; break;
		case 5: bt->clock_offset_ns = (int64_t)v; break;
		case 6: if (rm_fast_string(b, &bt->backend, sub, sublen)) return -1; break;
		case 7:
			if (rm_fast_part(b, &parts[bt->n_parts], sub, sublen) != 0)
				return -1;
			bt->parts[bt->n_parts] = &parts[bt->n_parts];
			bt->n_parts++;
			break;
		case 8:
			if (rm_fast_window(&wins[bt->n_windows], sub, sublen) != 0)
				return -1;
			bt->windows[bt->n_windows] = &wins[bt->n_windows];
			bt->n_windows++;
			break;
		case 9:
			for (q = sub, i = 0; i < na; i++)
				(void)rm_fast_varint(&q, sub + sublen, &bt->acked_commands[i]);
			bt->n_acked_commands = na;
			break;
		}
	}
	*out = bt;
	return 0;
}

/* The envelope of a batch, or NULL: protobuf-c must decide. */
static Rametr__Envelope *rm_fast_envelope(struct rm_wire_budget *b, const uint8_t *buf, size_t len)
{
	struct rm_fast r = { buf, buf + len };
	const uint8_t *sub = NULL;
	size_t sublen = 0;
	uint64_t v = 0, seen = 0;
	unsigned f, wt;
	Rametr__Envelope *env;
	Rametr__Batch *bt = NULL;
	int rv;

	if (!(env = rm_fast_alloc(b, sizeof(*env))))
		return NULL;
	rametr__envelope__init(env);
	while ((rv = rm_fast_next(&r, &f, &wt, &v, &sub, &sublen)) == 1) {
		if ((seen & (1ull << f)) || (f == 1 && (wt != 0 || v > UINT32_MAX)) ||
		    (f == 3 && wt != 2) || (f != 1 && f != 3))
			return NULL;
		seen |= 1ull << f;
		if (f == 1)
			env->version = (uint32_t)v;
		else if (rm_fast_batch(b, &bt, sub, sublen) != 0)
			return NULL;
	}
	if (rv != 0 || !bt)
		return NULL;
	env->body_case = RAMETR__ENVELOPE__BODY_BATCH;
	env->batch = bt;
	return env;
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
	int rv;

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
		/* a batch decodes to ~3 times its length; the envelope copy below fits too */
		budget.next_size = len * 3 + sizeof(*msg) + RM_WIRE_ALIGN;
		if (budget.next_size < RM_WIRE_CHUNK_MIN)
			budget.next_size = RM_WIRE_CHUNK_MIN;
		if (!rm_wire_slow) {
			size_t left = budget.left, next = budget.next_size;

			if (!(env = rm_fast_envelope(&budget, buf, len))) {
				/* protobuf-c decides, with the whole budget again */
				rm_wire_chunks_free(budget.head);
				budget.head = NULL;
				budget.left = left;
				budget.next_size = next;
			}
		}
		if (!env)
			env = rametr__envelope__unpack(&alloc, len, buf);
	}
	if (env) {
		/* the envelope moves into a struct that also holds the arena */
		if (!(msg = rm_wire_arena_alloc(&budget, sizeof(*msg)))) {
			env = NULL;
		} else {
			msg->env = *env;
			msg->chunks = budget.head;
			env = &msg->env;
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
	if (seq && env->body_case == RAMETR__ENVELOPE__BODY_BATCH)
		*seq = env->batch->seq;
	if ((rv = rm_wire_check(env, err, errlen)) != 0) {
		rm_wire_free(env);
		return rv;
	}
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
