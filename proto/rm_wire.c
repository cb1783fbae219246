/*
 * rm_wire.c - the wire codec: protobuf-c unpacking under a memory budget,
 * the version check (also on bytes that do not decode), the semantic rules
 * listed in rm_wire.h, and encoding with the protocol version filled in.
 * Owns no state; every function is reentrant.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rm_wire.h"
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

static void rm_wire_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void rm_wire_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
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
			rm_wire_err(err, errlen, "field number 0 in %s", m->descriptor->short_name);
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
		rm_wire_err(err, errlen, "empty node name");
		return RM_EINVAL;
	}
	n = strlen(node);
	if (n > RM_WIRE_NODE_MAX) {
		rm_wire_err(err, errlen, "node name of %zu bytes (at most %d)", n, RM_WIRE_NODE_MAX);
		return RM_EINVAL;
	}
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)node[i];

		if (c < 0x21 || c > 0x7e) {
			rm_wire_err(err, errlen, "node name has non-printable byte 0x%02x at offset %zu",
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
		rm_wire_err(err, errlen, "empty %s", what);
		return RM_EPROTO;
	}
	if (n > max) {
		rm_wire_err(err, errlen, "%s of %zu bytes (at most %zu)", what, n, max);
		return RM_EPROTO;
	}
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c > 0x7e) {
			rm_wire_err(err, errlen, "%s has non-printable byte 0x%02x at offset %zu", what,
				    c, i);
			return RM_EPROTO;
		}
	}
	return RM_OK;
}

static int rm_wire_check_addr(const char *what, uint32_t family, const ProtobufCBinaryData *a,
			      size_t i, char *err, size_t errlen)
{
	size_t want;

	if (a->len != 0 && a->len != 4 && a->len != 16) {
		rm_wire_err(err, errlen, "part %zu: %s address of %zu bytes (expected 0, 4 or 16)", i,
			    what, a->len);
		return RM_EPROTO;
	}
	if (a->len == 0)
		return RM_OK;
	want = family == 2 ? 4 : family == 10 ? 16 : 0;
	if (a->len != want) {
		rm_wire_err(err, errlen, "part %zu: %s address of %zu bytes does not match family %u",
			    i, what, a->len, family);
		return RM_EPROTO;
	}
	return RM_OK;
}

static int rm_wire_check_tuple(const char *what, const Rametr__Tuple *t, size_t i, char *err,
			       size_t errlen)
{
	char sub[32];
	int rv;

	if (!t)
		return RM_OK;
	if ((rv = rm_wire_check_unknown(&t->base, err, errlen)) != 0)
		return rv;
	if (t->family != 0 && t->family != 1 && t->family != 2 && t->family != 10) {
		rm_wire_err(err, errlen, "part %zu: %s tuple has unknown family %u", i, what,
			    t->family);
		return RM_EPROTO;
	}
	snprintf(sub, sizeof(sub), "%s local", what);
	if ((rv = rm_wire_check_addr(sub, t->family, &t->laddr, i, err, errlen)) != 0)
		return rv;
	snprintf(sub, sizeof(sub), "%s remote", what);
	if ((rv = rm_wire_check_addr(sub, t->family, &t->raddr, i, err, errlen)) != 0)
		return rv;
	if (t->lport > 65535 || t->rport > 65535) {
		rm_wire_err(err, errlen, "part %zu: %s tuple has port %u out of range", i, what,
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
	if (h->instance == 0) {
		rm_wire_err(err, errlen, "hello has instance 0");
		return RM_EPROTO;
	}
	if (h->window_ns == 0) {
		rm_wire_err(err, errlen, "hello has window_ns 0");
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
		rm_wire_err(err, errlen, "part %zu: win 0", i);
		return RM_EPROTO;
	}
	n = p->comm ? strlen(p->comm) : 0;
	if (n > RM_WIRE_COMM_MAX) {
		rm_wire_err(err, errlen, "part %zu: comm of %zu bytes (at most %d)", i, n,
			    RM_WIRE_COMM_MAX);
		return RM_EPROTO;
	}
	if (p->cpu_ns > RM_WIRE_ABSURD_NS) {
		rm_wire_err(err, errlen, "part %zu: absurd cpu_ns %" PRIu64, i, p->cpu_ns);
		return RM_EPROTO;
	}
	if (p->runq_ns > RM_WIRE_ABSURD_NS) {
		rm_wire_err(err, errlen, "part %zu: absurd runq_ns %" PRIu64, i, p->runq_ns);
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
		rm_wire_err(err, errlen, "batch has instance 0");
		return RM_EPROTO;
	}
	if (b->seq == 0) {
		rm_wire_err(err, errlen, "batch has seq 0");
		return RM_EPROTO;
	}
	if (b->window_ns == 0) {
		rm_wire_err(err, errlen, "batch has window_ns 0");
		return RM_EPROTO;
	}
	for (i = 0; i < b->n_parts; i++)
		if ((rv = rm_wire_check_part(b->parts[i], i, err, errlen)) != 0)
			return rv;
	for (i = 0; i < b->n_windows; i++) {
		if ((rv = rm_wire_check_unknown(&b->windows[i]->base, err, errlen)) != 0)
			return rv;
		if (b->windows[i]->win == 0) {
			rm_wire_err(err, errlen, "window totals %zu: win 0", i);
			return RM_EPROTO;
		}
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
		rm_wire_err(err, errlen, "command %" PRIu64 ": invalid server name", c->id);
		return RM_EPROTO;
	}
	if (c->n_match > RM_WIRE_MAX_MATCH) {
		rm_wire_err(err, errlen, "command %" PRIu64 ": %zu matches (at most %d)", c->id,
			    c->n_match, RM_WIRE_MAX_MATCH);
		return RM_EPROTO;
	}
	for (j = 0; j < c->n_match; j++) {
		const Rametr__ThrottleMatch *m = c->match[j];

		if ((rv = rm_wire_check_unknown(&m->base, err, errlen)) != 0)
			return rv;
		if ((m->family != 2 || m->addr.len != 4) && (m->family != 10 || m->addr.len != 16)) {
			rm_wire_err(err, errlen,
				    "command %" PRIu64 " match %zu: family %u with a %zu-byte address",
				    c->id, j, m->family, m->addr.len);
			return RM_EPROTO;
		}
		if (m->prefix > (m->family == 2 ? 32u : 128u)) {
			rm_wire_err(err, errlen, "command %" PRIu64 " match %zu: prefix %u too long",
				    c->id, j, m->prefix);
			return RM_EPROTO;
		}
		if (m->cport_hi > 65535 || m->sport_hi > 65535 || m->cport_lo > m->cport_hi ||
		    m->sport_lo > m->sport_hi) {
			rm_wire_err(err, errlen, "command %" PRIu64 " match %zu: bad port range", c->id,
				    j);
			return RM_EPROTO;
		}
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
		rm_wire_err(err, errlen, "unknown ack status %d", (int)a->status);
		return RM_EPROTO;
	}
	for (i = 0; i < a->n_commands; i++) {
		const Rametr__ThrottleCommand *c = a->commands[i];

		if ((rv = rm_wire_check_unknown(&c->base, err, errlen)) != 0)
			return rv;
		if (c->id == 0) {
			rm_wire_err(err, errlen, "command %zu: id 0", i);
			return RM_EPROTO;
		}
		if (c->cap_permille > 1000) {
			rm_wire_err(err, errlen, "command %" PRIu64 ": cap of %u permille (at most 1000)",
				    c->id, c->cap_permille);
			return RM_EPROTO;
		}
		if ((rv = rm_wire_check_command(c, err, errlen)) != 0)
			return rv;
	}
	return RM_OK;
}

int rm_wire_check(const Rametr__Envelope *env, char *err, size_t errlen)
{
	int rv;

	if (!env) {
		rm_wire_err(err, errlen, "no message");
		return RM_EPROTO;
	}
	if (env->version != RM_PROTO_VERSION) {
		rm_wire_err(err, errlen, "unsupported protocol version %u (expected %d)", env->version,
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
		rm_wire_err(err, errlen, "message has no body");
		return RM_EPROTO;
	}
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
	rm_wire_err(err, errlen, "%s", "");
	if (!out) {
		rm_wire_err(err, errlen, "no output envelope");
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
			rm_wire_err(err, errlen, "unsupported protocol version %u (expected %d)", ver,
				    RM_PROTO_VERSION);
			return RM_EVERSION;
		}
		rm_wire_err(err, errlen, "malformed message (%zu bytes)", len);
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
