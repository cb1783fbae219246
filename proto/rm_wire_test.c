/*
 * rm_wire_test.c - tests of the wire codec: round trips of every message
 * type, every truncation of valid messages, seeded random garbage and
 * mutations, versions, every semantic rule and the decode memory budget.
 * With RM_WIRE_CORPUS=<dir> in the environment, the round-trip case also
 * writes its encodings there as a seed corpus for rm_wire_fuzz.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rm_test.h"
#include "rm_wire.h"
#include "rm_wire_ref.h"
#include "banned.h"

/* A valid batch of 3 parts (IPv4, IPv6, UNIX/none tuples) and 2 window totals. */
struct sample {
	Rametr__Envelope env;
	Rametr__Batch batch;
	Rametr__SegmentPart part[3], *pparts[3];
	Rametr__Tuple tin[3], tout[3];
	Rametr__WindowTotals win[2], *pwins[2];
	Rametr__GoLabelCount go[3], *pgo[3];
	uint64_t acked[2];
	uint8_t v4a[4], v4b[4], v6a[16], v6b[16];
};

static void sample_init(struct sample *s)
{
	size_t i;

	memset(s, 0, sizeof(*s));
	rametr__envelope__init(&s->env);
	rametr__batch__init(&s->batch);
	s->batch.node = "node-a";
	s->batch.backend = "replay";
	s->batch.instance = 0x1234567890abcdefull;
	s->batch.seq = 7;
	s->batch.window_ns = 1000000000ull;
	s->batch.clock_offset_ns = -42;
	inet_pton(AF_INET, "10.0.0.1", s->v4a);
	inet_pton(AF_INET, "10.0.0.2", s->v4b);
	inet_pton(AF_INET6, "2001:db8::1", s->v6a);
	inet_pton(AF_INET6, "2001:db8::2", s->v6b);
	for (i = 0; i < 3; i++) {
		Rametr__SegmentPart *p = &s->part[i];

		rametr__segment_part__init(p);
		rametr__tuple__init(&s->tin[i]);
		rametr__tuple__init(&s->tout[i]);
		p->seg_id = (1ull << 48) | (i + 1);
		p->win = 1700000000ull + i;
		p->pid = 100 + (uint32_t)i;
		p->tid = 200 + (uint32_t)i;
		p->comm = i == 0 ? "nginx" : i == 1 ? "postgres: wal w" : "";
		p->start_ns = 5000 + i;
		p->end_ns = 9000 + i;
		p->cpu_ns = 1234 + i;
		p->runq_ns = 55;
		p->rx_bytes = 100;
		p->tx_bytes = 200;
		p->disk_read = 4096;
		p->disk_write = 8192;
		p->flags = 0x1 | 0x2 | 0x40 | 0x80;
		p->in_seq_start = 1;
		p->in_seq_end = 101;
		p->out_seq_start = 7;
		p->out_seq_end = 207;
		p->parent_seg = 3;
		p->domid = 4;
		p->vcpu = 1;
		p->blocked_ns = 17;
		p->in = &s->tin[i];
		p->out = &s->tout[i];
		s->pparts[i] = p;
	}
	s->tin[0].family = 2;
	s->tin[0].cookie = 77;
	s->tin[0].laddr = (ProtobufCBinaryData){ 4, s->v4a };
	s->tin[0].raddr = (ProtobufCBinaryData){ 4, s->v4b };
	s->tin[0].lport = 80;
	s->tin[0].rport = 51000;
	s->tout[0] = s->tin[0];
	s->tin[1].family = 10;
	s->tin[1].cookie = 78;
	s->tin[1].laddr = (ProtobufCBinaryData){ 16, s->v6a };
	s->tin[1].raddr = (ProtobufCBinaryData){ 16, s->v6b };
	s->tin[1].lport = 5432;
	s->tin[1].rport = 40000;
	s->tout[1] = s->tin[1];
	s->tin[2].family = 1;
	s->tin[2].cookie = 79;
	s->part[2].out = NULL; /* absent tuple */
	for (i = 0; i < 2; i++) {
		Rametr__WindowTotals *w = &s->win[i];

		rametr__window_totals__init(w);
		w->win = 1700000000ull + i;
		w->busy_ns = 3000000 + i;
		w->unseg_cpu_ns = 1000;
		w->rx_bytes = 10;
		w->tx_bytes = 20;
		w->disk_read = 30;
		w->disk_write = 40;
		w->unseg_rx = 1;
		w->unseg_tx = 2;
		w->unseg_disk_read = 3;
		w->unseg_disk_write = 4;
		w->lost_ns = 5;
		w->dropped_parts = 6;
		w->capacity_ns = 2000000000ull;
		w->idle_ns = 7;
		s->pwins[i] = w;
	}
	/* window 0 carries Go label counts: a cookie, unlabelled, the runtime's own */
	for (i = 0; i < 3; i++) {
		rametr__go_label_count__init(&s->go[i]);
		s->go[i].cookie = i == 0 ? 0xc0ffee : i == 1 ? 0 : RM_GO_IDLE;
		s->go[i].samples = 100 - 40 * i;
		s->pgo[i] = &s->go[i];
	}
	s->win[0].go_period_ns = 500000;
	s->win[0].n_go_labels = 3;
	s->win[0].go_labels = s->pgo;
	s->acked[0] = 11;
	s->acked[1] = 12;
	s->batch.n_parts = 3;
	s->batch.parts = s->pparts;
	s->batch.n_windows = 2;
	s->batch.windows = s->pwins;
	s->batch.n_acked_commands = 2;
	s->batch.acked_commands = s->acked;
	s->env.body_case = RAMETR__ENVELOPE__BODY_BATCH;
	s->env.batch = &s->batch;
}

static void hello_init(Rametr__Envelope *env, Rametr__Hello *h)
{
	rametr__envelope__init(env);
	rametr__hello__init(h);
	h->node = "node-b";
	h->backend = "ebpf";
	h->instance = 99;
	h->clock_offset_ns = 1700000000000000000ll;
	h->window_ns = 500000000ull;
	h->ncpu = 8;
	h->hostname = "b.example.org";
	env->body_case = RAMETR__ENVELOPE__BODY_HELLO;
	env->hello = h;
}

static void corpus_write(const char *name, const uint8_t *buf, size_t len)
{
	const char *dir = getenv("RM_WIRE_CORPUS");
	char path[512];
	FILE *f;

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(fwrite(buf, 1, len, f), len);
	fclose(f);
}

static void test_roundtrip_batch(void)
{
	const struct rm_wbatch *wb;
	struct sample s;
	Rametr__Envelope *d = NULL;
	uint8_t *buf;
	size_t len, i;
	char err[256];

	sample_init(&s);
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&s.env, &buf, &len), RM_OK);
	CU_ASSERT_EQUAL(s.env.version, 0); /* encode does not touch its input */
	corpus_write("batch", buf, len);
	CU_ASSERT_EQUAL_FATAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_OK);
	CU_ASSERT_STRING_EQUAL(err, "");
	CU_ASSERT_EQUAL(d->version, RM_PROTO_VERSION);
	CU_ASSERT_EQUAL_FATAL(d->body_case, RAMETR__ENVELOPE__BODY_BATCH);
	CU_ASSERT_PTR_NULL(d->batch); /* a batch is decoded into rm_wbatch only */
	wb = rm_wire_batch(d);
	CU_ASSERT_PTR_NOT_NULL_FATAL(wb);
	CU_ASSERT_STRING_EQUAL(wb->node, "node-a");
	CU_ASSERT_STRING_EQUAL(wb->backend, "replay");
	CU_ASSERT_EQUAL(wb->instance, s.batch.instance);
	CU_ASSERT_EQUAL(wb->seq, 7);
	CU_ASSERT_EQUAL(wb->window_ns, s.batch.window_ns);
	CU_ASSERT_EQUAL(wb->clock_offset_ns, -42);
	CU_ASSERT_EQUAL_FATAL(wb->n_parts, 3);
	for (i = 0; i < 3; i++) {
		struct rm_wpart want;

		/* every field as protobuf-c's own structs say, copied by hand (rm_wire_ref.h) */
		rm_ref_part_in(&want, &s.part[i]);
		CU_ASSERT_EQUAL(memcmp(&wb->parts[i], &want, sizeof(want)), 0);
		CU_ASSERT_STRING_EQUAL(wb->parts[i].comm, s.part[i].comm);
	}
	CU_ASSERT_EQUAL_FATAL(wb->n_windows, 2);
	for (i = 0; i < 2; i++) {
		struct rm_totals want;

		rm_ref_totals_in(&want, &s.win[i]);
		CU_ASSERT_EQUAL(memcmp(&wb->windows[i], &want, sizeof(want)), 0);
	}
	/* the Go label counts, as sent */
	CU_ASSERT_EQUAL(wb->windows[0].go_period_ns, 500000);
	CU_ASSERT_EQUAL_FATAL(wb->windows[0].n_go, 3);
	CU_ASSERT_EQUAL(wb->windows[0].go[0].cookie, 0xc0ffee);
	CU_ASSERT_EQUAL(wb->windows[0].go[0].samples, 100);
	CU_ASSERT_EQUAL(wb->windows[0].go[2].cookie, RM_GO_IDLE);
	CU_ASSERT_EQUAL(wb->windows[0].go[2].samples, 20);
	CU_ASSERT_EQUAL(wb->windows[1].n_go, 0);
	CU_ASSERT_EQUAL_FATAL(wb->n_acked_commands, 2);
	CU_ASSERT_EQUAL(wb->acked_commands[0], 11);
	CU_ASSERT_EQUAL(wb->acked_commands[1], 12);
	rm_wire_free(d);
	/* the seq is found without decoding */
	{
		uint64_t seq = 0;

		CU_ASSERT_EQUAL(rm_wire_peek_seq(buf, len, &seq), RM_OK);
		CU_ASSERT_EQUAL(seq, 7);
		CU_ASSERT_EQUAL(rm_wire_peek_seq(buf, len - 1, &seq), RM_EPROTO);
		CU_ASSERT_EQUAL(rm_wire_peek_seq("\x08\x01", 2, &seq), RM_EPROTO);
	}
	free(buf);
}

static void test_roundtrip_hello(void)
{
	Rametr__Envelope env, *d = NULL;
	Rametr__Hello h;
	uint8_t *buf;
	size_t len;
	char err[256];

	hello_init(&env, &h);
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&env, &buf, &len), RM_OK);
	corpus_write("hello", buf, len);
	CU_ASSERT_EQUAL_FATAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL_FATAL(d->body_case, RAMETR__ENVELOPE__BODY_HELLO);
	CU_ASSERT_STRING_EQUAL(d->hello->node, h.node);
	CU_ASSERT_STRING_EQUAL(d->hello->backend, h.backend);
	CU_ASSERT_STRING_EQUAL(d->hello->hostname, h.hostname);
	CU_ASSERT_EQUAL(d->hello->instance, h.instance);
	CU_ASSERT_EQUAL(d->hello->clock_offset_ns, h.clock_offset_ns);
	CU_ASSERT_EQUAL(d->hello->window_ns, h.window_ns);
	CU_ASSERT_EQUAL(d->hello->ncpu, h.ncpu);
	rm_wire_free(d);
	free(buf);
}

/* A match of clients in a4/16 (a4: 4 bytes, e.g. 10.1.0.0) on server port 5432. */
static void match_init(Rametr__ThrottleMatch *m, uint8_t *a4)
{
	rametr__throttle_match__init(m);
	m->family = 2;
	m->addr.data = a4;
	m->addr.len = 4;
	m->prefix = 16;
	m->cport_hi = 65535;
	m->sport_lo = m->sport_hi = 5432;
}

static void test_roundtrip_ack(void)
{
	Rametr__ThrottleCommand c[2], *pc[2];
	Rametr__ThrottleMatch m, *pm = &m;
	Rametr__Envelope *d = NULL;
	uint8_t *buf, a4[4] = { 10, 1, 0, 0 };
	size_t len;
	char err[256];
	int st;

	for (st = RAMETR__ACK__STATUS__ACK_OK; st <= RAMETR__ACK__STATUS__ACK_RETRY; st++) {
		rametr__throttle_command__init(&c[0]);
		rametr__throttle_command__init(&c[1]);
		match_init(&m, a4);
		c[0].n_match = 1;
		c[0].match = &pm;
		c[0].id = 5;
		c[0].ce = "tenant-a";
		c[0].server = "db";
		c[0].resource = "cpu";
		c[0].cap_permille = 250;
		c[0].expires_unix_ns = 1800000000000000000ll;
		c[0].reason = "over quota";
		c[1].id = 6;
		c[1].ce = "tenant-b";
		pc[0] = &c[0];
		pc[1] = &c[1];
		CU_ASSERT_EQUAL_FATAL(rm_wire_encode_ack(st, 1000 + st, st ? "oops" : NULL, pc, 2, &buf,
							 &len),
				      RM_OK);
		if (st == 0)
			corpus_write("ack", buf, len);
		CU_ASSERT_EQUAL_FATAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_OK);
		CU_ASSERT_EQUAL_FATAL(d->body_case, RAMETR__ENVELOPE__BODY_ACK);
		CU_ASSERT_EQUAL((int)d->ack->status, st);
		CU_ASSERT_EQUAL(d->ack->seq, 1000u + st);
		CU_ASSERT_STRING_EQUAL(d->ack->error, st ? "oops" : "");
		CU_ASSERT_EQUAL_FATAL(d->ack->n_commands, 2);
		CU_ASSERT_EQUAL(d->ack->commands[0]->id, 5);
		CU_ASSERT_STRING_EQUAL(d->ack->commands[0]->ce, "tenant-a");
		CU_ASSERT_STRING_EQUAL(d->ack->commands[0]->server, "db");
		CU_ASSERT_STRING_EQUAL(d->ack->commands[0]->resource, "cpu");
		CU_ASSERT_EQUAL(d->ack->commands[0]->cap_permille, 250);
		CU_ASSERT_EQUAL(d->ack->commands[0]->expires_unix_ns, c[0].expires_unix_ns);
		CU_ASSERT_STRING_EQUAL(d->ack->commands[0]->reason, "over quota");
		CU_ASSERT_EQUAL_FATAL(d->ack->commands[0]->n_match, 1);
		CU_ASSERT_EQUAL(d->ack->commands[0]->match[0]->family, 2);
		CU_ASSERT_EQUAL(d->ack->commands[0]->match[0]->addr.len, 4);
		CU_ASSERT(memcmp(d->ack->commands[0]->match[0]->addr.data, a4, 4) == 0);
		CU_ASSERT_EQUAL(d->ack->commands[0]->match[0]->prefix, 16);
		CU_ASSERT_EQUAL(d->ack->commands[0]->match[0]->sport_lo, 5432);
		CU_ASSERT_EQUAL(d->ack->commands[0]->match[0]->cport_hi, 65535);
		CU_ASSERT_EQUAL(d->ack->commands[1]->id, 6);
		CU_ASSERT_STRING_EQUAL(rm_wire_ack_status_name(st) + 0, rm_wire_ack_status_name(d->ack->status));
		rm_wire_free(d);
		free(buf);
	}
	CU_ASSERT_STRING_EQUAL(rm_wire_ack_status_name(RAMETR__ACK__STATUS__ACK_REJECTED), "ACK_REJECTED");
	CU_ASSERT_STRING_EQUAL(rm_wire_ack_status_name(42), "ACK_UNKNOWN");
}

/* Every strict prefix of a valid message is refused with a clear error. */
static void truncations(const uint8_t *buf, size_t len)
{
	Rametr__Envelope *d;
	char err[256], want[64];
	size_t n;
	int rv;

	for (n = 0; n < len; n++) {
		d = (Rametr__Envelope *)1;
		rv = rm_wire_decode(buf, n, &d, err, sizeof(err));
		CU_ASSERT_EQUAL(rv, RM_EPROTO);
		CU_ASSERT_PTR_NULL(d);
		snprintf(want, sizeof(want), "malformed message (%zu bytes)", n);
		if (strcmp(err, want) != 0 && strcmp(err, "message has no body") != 0) {
			fprintf(stderr, "prefix of %zu bytes: unexpected error '%s'\n", n, err);
			CU_FAIL("unexpected error text for a truncated message");
		}
	}
}

static void test_truncated(void)
{
	Rametr__Envelope env;
	Rametr__Hello h;
	struct sample s;
	uint8_t *buf;
	size_t len;

	sample_init(&s);
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&s.env, &buf, &len), RM_OK);
	CU_ASSERT(len > 200);
	truncations(buf, len);
	free(buf);
	hello_init(&env, &h);
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&env, &buf, &len), RM_OK);
	truncations(buf, len);
	free(buf);
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode_ack(RAMETR__ACK__STATUS__ACK_RETRY, 9, "busy", NULL, 0,
						 &buf, &len),
			      RM_OK);
	truncations(buf, len);
	free(buf);
}

static uint64_t rng_state;

static uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

/* Decodes arbitrary bytes; checks the outcome is consistent. Returns rv. */
static int decode_any(const uint8_t *buf, size_t len)
{
	Rametr__Envelope *d = (Rametr__Envelope *)1, *d2 = NULL;
	uint8_t *b2;
	size_t l2;
	char err[256];
	int rv;

	err[0] = 'x';
	rv = rm_wire_decode(buf, len, &d, err, sizeof(err));
	if (rv == RM_OK && rm_wire_batch(d)) {
		/* a batch protobuf-c can read too, with the same parts and windows (rm_wire_ref.h) */
		const struct rm_wbatch *wb = rm_wire_batch(d);
		Rametr__Envelope *u = rametr__envelope__unpack(NULL, len, buf);
		size_t i, differ = 0;

		CU_ASSERT_PTR_NOT_NULL_FATAL(u);
		CU_ASSERT_EQUAL_FATAL(u->body_case, RAMETR__ENVELOPE__BODY_BATCH);
		CU_ASSERT_EQUAL_FATAL(u->batch->n_parts, wb->n_parts);
		CU_ASSERT_EQUAL_FATAL(u->batch->n_windows, wb->n_windows);
		CU_ASSERT_EQUAL(u->batch->seq, wb->seq);
		CU_ASSERT_STRING_EQUAL(u->batch->node, wb->node);
		for (i = 0; i < wb->n_parts; i++) {
			struct rm_wpart want, again;
			uint8_t pb[512];
			size_t n = rm_part_size(&wb->parts[i]);

			rm_ref_part_in(&want, u->batch->parts[i]);
			differ += memcmp(&want, &wb->parts[i], sizeof(want)) != 0;
			/* and re-encodes to a part that decodes the same */
			CU_ASSERT_FATAL(n <= sizeof(pb));
			rm_part_put(pb, &wb->parts[i]);
			differ += rm_part_decode(&again, pb, n, i, err, sizeof(err)) != RM_OK ||
				  memcmp(&again, &wb->parts[i], sizeof(again)) != 0;
		}
		for (i = 0; i < wb->n_windows; i++) {
			struct rm_totals want;

			rm_ref_totals_in(&want, u->batch->windows[i]);
			differ += memcmp(&want, &wb->windows[i], sizeof(want)) != 0;
		}
		CU_ASSERT_EQUAL(differ, 0);
		rametr__envelope__free_unpacked(u, NULL);
		rm_wire_free(d);
	} else if (rv == RM_OK) {
		CU_ASSERT_PTR_NOT_NULL_FATAL(d);
		CU_ASSERT_STRING_EQUAL(err, "");
		/* whatever decodes must re-encode and decode again */
		CU_ASSERT_EQUAL_FATAL(rm_wire_encode(d, &b2, &l2), RM_OK);
		CU_ASSERT_EQUAL(rm_wire_decode(b2, l2, &d2, err, sizeof(err)), RM_OK);
		rm_wire_free(d2);
		free(b2);
		rm_wire_free(d);
	} else {
		CU_ASSERT(rv == RM_EPROTO || rv == RM_EVERSION);
		CU_ASSERT_PTR_NULL(d);
		CU_ASSERT(err[0] != '\0');
	}
	return rv;
}

static void test_garbage(void)
{
	uint8_t buf[600];
	size_t i, n, refused = 0, total = 20000;

	rng_state = 0x9e3779b97f4a7c15ull;
	for (i = 0; i < total; i++) {
		size_t j;

		n = rng() % sizeof(buf);
		for (j = 0; j < n; j++)
			buf[j] = (uint8_t)rng();
		/* half of the inputs start like an envelope so the parser goes deeper */
		if (i % 2 && n >= 4) {
			buf[0] = 0x08;
			buf[1] = 0x01;
			buf[2] = (uint8_t)(0x12 + 8 * (rng() % 3)); /* hello, batch or ack */
			buf[3] = (uint8_t)(n - 4 < 0x80 ? n - 4 : 0x7f);
		}
		if (decode_any(buf, n) != RM_OK)
			refused++;
	}
	/* nearly all random inputs must be refused (a few may well be valid) */
	CU_ASSERT(refused > total * 9 / 10);
}

static void test_mutations(void)
{
	struct sample s;
	uint8_t *buf, *m;
	size_t len, i, k, refused = 0, total = 20000;

	sample_init(&s);
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&s.env, &buf, &len), RM_OK);
	m = malloc(len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	rng_state = 12345;
	for (i = 0; i < total; i++) {
		memcpy(m, buf, len);
		for (k = 0; k < 1 + rng() % 4; k++)
			m[rng() % len] = (uint8_t)rng();
		if (decode_any(m, len - rng() % 3) != RM_OK)
			refused++;
	}
	/* mutations hit both the parser and the semantic rules */
	CU_ASSERT(refused > 0 && refused < total);
	free(m);
	free(buf);
}

static void test_version(void)
{
	Rametr__Envelope *d = NULL;
	struct sample s;
	uint8_t *buf;
	size_t len;
	uint64_t seq = 0;
	char err[256];

	sample_init(&s);
	s.env.version = 2;
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&s.env, &buf, &len), RM_OK);
	CU_ASSERT_EQUAL(rm_wire_decode_seq(buf, len, &d, &seq, err, sizeof(err)), RM_EVERSION);
	CU_ASSERT_PTR_NULL(d);
	CU_ASSERT_STRING_EQUAL(err, "unsupported protocol version 2 (expected 1)");
	CU_ASSERT_EQUAL(seq, 7); /* decodable: the seq is known for the reply */
	free(buf);
	/* a version-2 message whose body we cannot parse still gets a version error */
	CU_ASSERT_EQUAL(rm_wire_decode("\x08\x02\x1a\x01\x0f", 5, &d, err, sizeof(err)), RM_EVERSION);
	CU_ASSERT_STRING_EQUAL(err, "unsupported protocol version 2 (expected 1)");
	/* ... but the same bytes with version 1 are just malformed */
	CU_ASSERT_EQUAL(rm_wire_decode("\x08\x01\x1a\x01\x0f", 5, &d, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "malformed message (5 bytes)");
	/* and badly framed bytes are never taken for a version */
	CU_ASSERT_EQUAL(rm_wire_decode("\x08\x02\x1a\x05\x0f", 5, &d, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "malformed message (5 bytes)");
	/* version absent (0): strip the version field of a valid message */
	s.env.version = 1;
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&s.env, &buf, &len), RM_OK);
	CU_ASSERT_EQUAL(rm_wire_decode(buf + 2, len - 2, &d, err, sizeof(err)), RM_EVERSION);
	CU_ASSERT_STRING_EQUAL(err, "unsupported protocol version 0 (expected 1)");
	free(buf);
}

static void test_len_limits(void)
{
	Rametr__Envelope *d = (Rametr__Envelope *)1;
	uint8_t *big;
	char err[256];

	CU_ASSERT_EQUAL(rm_wire_decode("", 0, &d, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "malformed message (0 bytes)");
	CU_ASSERT_PTR_NULL(d);
	CU_ASSERT_EQUAL(rm_wire_decode(NULL, 0, &d, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_wire_decode("\x08\x01", 2, NULL, err, sizeof(err)), RM_EINVAL);
	/* err may be NULL or tiny */
	CU_ASSERT_EQUAL(rm_wire_decode("\xff", 1, &d, NULL, 0), RM_EPROTO);
	CU_ASSERT_EQUAL(rm_wire_decode("\xff", 1, &d, err, 4), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "mal");
	big = calloc(1, (size_t)RM_WIRE_MAX_MSG + 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(big);
	big[0] = 0x08;
	big[1] = 0x01;
	CU_ASSERT_EQUAL(rm_wire_decode(big, (size_t)RM_WIRE_MAX_MSG + 1, &d, err, sizeof(err)),
			RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "malformed message (67108865 bytes)");
	free(big);
}

/* A message of many empty parts would decode to ~100x its size: refused. */
static void test_budget(void)
{
	Rametr__Envelope *d = NULL;
	struct sample s;
	uint8_t *buf, *big;
	size_t len, n = 4u << 20, i, off;
	char err[256], want[64];
	Rametr__SegmentPart *parts, **pp;

	/* hostile: version 1, batch of 2M empty parts (field 7, length 0) */
	big = malloc(n + 16);
	CU_ASSERT_PTR_NOT_NULL_FATAL(big);
	off = 0;
	big[off++] = 0x08;
	big[off++] = 0x01;
	big[off++] = 0x1a;
	/* varint of n */
	for (i = n; i >= 0x80; i >>= 7)
		big[off++] = (uint8_t)(i | 0x80);
	big[off++] = (uint8_t)i;
	for (i = 0; i < n; i += 2) {
		big[off + i] = 0x3a;
		big[off + i + 1] = 0x00;
	}
	CU_ASSERT_EQUAL(rm_wire_decode(big, off + n, &d, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_PTR_NULL(d);
	snprintf(want, sizeof(want), "malformed message (%zu bytes)", off + n);
	CU_ASSERT_STRING_EQUAL(err, want);
	/* the same framing with few parts parses (and fails the semantic rules, the
	 * first being the missing node name):
	 * so it is the budget that refused the big one */
	big[3] = 20;
	memmove(big + 4, big + off, 20);
	CU_ASSERT_EQUAL(rm_wire_decode(big, 4 + 20, &d, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "empty node name");
	free(big);

	/* legitimate: 50000 realistic small parts (no tuples) decode fine */
	sample_init(&s);
	parts = calloc(50000, sizeof(*parts));
	pp = calloc(50000, sizeof(*pp));
	CU_ASSERT_FATAL(parts && pp);
	for (i = 0; i < 50000; i++) {
		rametr__segment_part__init(&parts[i]);
		parts[i].seg_id = (2ull << 48) | i;
		parts[i].win = 1700000000;
		parts[i].pid = 1;
		parts[i].tid = 1;
		parts[i].cpu_ns = 1;
		pp[i] = &parts[i];
	}
	s.batch.n_parts = 50000;
	s.batch.parts = pp;
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&s.env, &buf, &len), RM_OK);
	CU_ASSERT_EQUAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_OK);
	CU_ASSERT_PTR_NOT_NULL(d);
	if (d)
		CU_ASSERT_EQUAL(rm_wire_batch(d)->n_parts, 50000);
	rm_wire_free(d);
	free(buf);
	free(parts);
	free(pp);
}

/* Mutates a fresh valid sample, encodes, decodes: expects RM_EPROTO and text. */
static void expect_semantic(void (*mutate)(struct sample *), const char *want)
{
	Rametr__Envelope *d = NULL;
	struct sample s;
	uint8_t *buf;
	size_t len;
	char err[256];
	int rv;

	sample_init(&s);
	mutate(&s);
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&s.env, &buf, &len), RM_OK);
	rv = rm_wire_decode(buf, len, &d, err, sizeof(err));
	CU_ASSERT_EQUAL(rv, RM_EPROTO);
	CU_ASSERT_PTR_NULL(d);
	if (!strstr(err, want)) {
		fprintf(stderr, "expected '%s' in '%s'\n", want, err);
		CU_FAIL("semantic error text");
	}
	/* rm_wire_check gives the same verdict without the bytes */
	CU_ASSERT_EQUAL(rm_wire_check(&(Rametr__Envelope){ .base = s.env.base,
							     .version = 1,
							     .body_case = s.env.body_case,
							     .batch = s.env.batch },
				      err, sizeof(err)),
			RM_EPROTO);
	rm_wire_free(d);
	free(buf);
}

static Rametr__Hello g_hello;
static char g_long[300];

static void m_no_body(struct sample *s) { s->env.body_case = 0; }
static void m_node_empty(struct sample *s) { s->batch.node = ""; }
static void m_node_long(struct sample *s)
{
	memset(g_long, 'n', 64);
	g_long[64] = 0;
	s->batch.node = g_long;
}
static void m_node_space(struct sample *s) { s->batch.node = "node a"; }
static void m_node_ctrl(struct sample *s) { s->batch.node = "node\x01"; }
static void m_node_8bit(struct sample *s) { s->batch.node = "n\xc3\xa9"; }
static void m_backend_empty(struct sample *s) { s->batch.backend = ""; }
static void m_instance0(struct sample *s) { s->batch.instance = 0; }
static void m_seq0(struct sample *s) { s->batch.seq = 0; }
static void m_window0(struct sample *s) { s->batch.window_ns = 0; }
static void m_win0(struct sample *s) { s->part[1].win = 0; }
static void m_comm16(struct sample *s) { s->part[0].comm = "0123456789abcdef"; }
static void m_cpu(struct sample *s) { s->part[0].cpu_ns = RM_WIRE_ABSURD_NS + 1; }
static void m_runq(struct sample *s) { s->part[2].runq_ns = UINT64_MAX; }
static void m_family(struct sample *s) { s->tin[0].family = 16; }
static void m_addr5(struct sample *s) { s->tin[0].laddr.len = 3; }
static void m_addr_v4_16(struct sample *s) { s->tin[0].raddr = s->tin[1].raddr; }
static void m_addr_unix(struct sample *s) { s->tin[2].laddr = s->tin[0].laddr; }
static void m_port(struct sample *s) { s->tout[1].rport = 65536; }
static void m_wtot0(struct sample *s) { s->win[1].win = 0; }
static void m_go_period0(struct sample *s) { s->win[0].go_period_ns = 0; }
static void m_go_period(struct sample *s) { s->win[0].go_period_ns = 2000000000ull; }
static void m_go_samples(struct sample *s) { s->go[2].samples = UINT64_MAX; }
static void m_go_sum(struct sample *s) /* the sum of a cookie given twice overflows */
{
	s->go[0].samples = s->go[1].samples = (RM_WIRE_ABSURD_NS / 500000) / 2 + 1;
	s->go[1].cookie = s->go[0].cookie;
}
static void m_hello_node(struct sample *s)
{
	Rametr__Envelope e;

	hello_init(&e, &g_hello);
	g_hello.node = "";
	s->env.body_case = RAMETR__ENVELOPE__BODY_HELLO;
	s->env.hello = &g_hello;
}
static void m_hello_window(struct sample *s)
{
	Rametr__Envelope e;

	hello_init(&e, &g_hello);
	g_hello.window_ns = 0;
	s->env.body_case = RAMETR__ENVELOPE__BODY_HELLO;
	s->env.hello = &g_hello;
}
static void m_hello_instance(struct sample *s)
{
	Rametr__Envelope e;

	hello_init(&e, &g_hello);
	g_hello.instance = 0;
	s->env.body_case = RAMETR__ENVELOPE__BODY_HELLO;
	s->env.hello = &g_hello;
}
static void m_hello_host(struct sample *s)
{
	Rametr__Envelope e;

	hello_init(&e, &g_hello);
	memset(g_long, 'h', 256);
	g_long[256] = 0;
	g_hello.hostname = g_long;
	s->env.body_case = RAMETR__ENVELOPE__BODY_HELLO;
	s->env.hello = &g_hello;
}

static void test_semantic(void)
{
	/* encoding a message without a body is refused up front */
	{
		struct sample s;
		uint8_t *buf = (uint8_t *)1;
		size_t len = 1;

		sample_init(&s);
		m_no_body(&s);
		CU_ASSERT_EQUAL(rm_wire_encode(&s.env, &buf, &len), RM_EINVAL);
		CU_ASSERT_PTR_NULL(buf);
		CU_ASSERT_EQUAL(len, 0);
		CU_ASSERT_EQUAL(rm_wire_encode(NULL, &buf, &len), RM_EINVAL);
	}
	/* a body-less envelope on the wire: just the version field */
	{
		Rametr__Envelope *d = NULL;
		char err[256];

		CU_ASSERT_EQUAL(rm_wire_decode("\x08\x01", 2, &d, err, sizeof(err)), RM_EPROTO);
		CU_ASSERT_STRING_EQUAL(err, "message has no body");
	}
	/* a field numbered 0 (reachable through an over-long tag varint) */
	{
		Rametr__Envelope env, *d = NULL;
		Rametr__Hello h;
		uint8_t *buf, *b2;
		size_t len;
		char err[256];

		hello_init(&env, &h);
		CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&env, &buf, &len), RM_OK);
		b2 = malloc(len + 3);
		CU_ASSERT_PTR_NOT_NULL_FATAL(b2);
		memcpy(b2, buf, len);
		memcpy(b2 + len, "\x82\x00\x00", 3);
		CU_ASSERT_EQUAL(rm_wire_decode(b2, len + 3, &d, err, sizeof(err)), RM_EPROTO);
		CU_ASSERT_STRING_EQUAL(err, "field number 0 in Envelope");
		/* an unknown field with a real number is kept (forward compatibility) */
		memcpy(b2 + len, "\xfa\x01\x00", 3); /* field 31, empty bytes */
		CU_ASSERT_EQUAL(rm_wire_decode(b2, len + 3, &d, err, sizeof(err)), RM_OK);
		rm_wire_free(d);
		free(b2);
		free(buf);
	}
	expect_semantic(m_node_empty, "empty node name");
	expect_semantic(m_node_long, "node name of 64 bytes (at most 63)");
	expect_semantic(m_node_space, "node name has non-printable byte 0x20 at offset 4");
	expect_semantic(m_node_ctrl, "node name has non-printable byte 0x01 at offset 4");
	expect_semantic(m_node_8bit, "node name has non-printable byte 0xc3 at offset 1");
	expect_semantic(m_backend_empty, "empty backend name");
	expect_semantic(m_instance0, "batch has instance 0");
	expect_semantic(m_seq0, "batch has seq 0");
	expect_semantic(m_window0, "batch has window_ns 0");
	expect_semantic(m_win0, "part 1: win 0");
	expect_semantic(m_comm16, "part 0: comm of 16 bytes (at most 15)");
	expect_semantic(m_cpu, "part 0: absurd cpu_ns 1000000000000001");
	expect_semantic(m_runq, "part 2: absurd runq_ns 18446744073709551615");
	expect_semantic(m_family, "part 0: in tuple has unknown family 16");
	expect_semantic(m_addr5, "part 0: in local address of 3 bytes (expected 0, 4 or 16)");
	expect_semantic(m_addr_v4_16, "part 0: in remote address of 16 bytes does not match family 2");
	expect_semantic(m_addr_unix, "part 2: in local address of 4 bytes does not match family 1");
	expect_semantic(m_port, "part 1: out tuple has port 65536 out of range");
	expect_semantic(m_wtot0, "window totals 1: win 0");
	expect_semantic(m_go_period0, "window totals 0: Go label counts without go_period_ns");
	expect_semantic(m_go_period, "window totals 0: absurd go_period_ns 2000000000");
	expect_semantic(m_go_samples, "window totals 0: absurd Go label samples 18446744073709551615 (cookie 18446744073709551615)");
	expect_semantic(m_go_sum, "window totals 0: absurd Go label samples 2000000002 (cookie 12648430)");
	expect_semantic(m_hello_node, "empty node name");
	expect_semantic(m_hello_window, "hello has window_ns 0");
	expect_semantic(m_hello_instance, "hello has instance 0");
	expect_semantic(m_hello_host, "hostname of 256 bytes (at most 255)");
}

/* Encodes an Ack carrying n decided matches, each *m. */
static void encode_decided(const Rametr__ThrottleMatch *m, size_t n, uint8_t **buf, size_t *len)
{
	Rametr__Envelope env = RAMETR__ENVELOPE__INIT;
	Rametr__Ack ack = RAMETR__ACK__INIT;
	Rametr__ThrottleMatch *pm[RM_WIRE_MAX_DECIDED + 1];
	size_t i;

	for (i = 0; i < n && i <= RM_WIRE_MAX_DECIDED; i++)
		pm[i] = (Rametr__ThrottleMatch *)m;
	ack.seq = 1;
	ack.n_decided = n;
	ack.decided = pm;
	env.version = RM_PROTO_VERSION;
	env.body_case = RAMETR__ENVELOPE__BODY_ACK;
	env.ack = &ack;
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&env, buf, len), RM_OK);
}

static void test_ack_decided(void)
{
	Rametr__ThrottleMatch m;
	Rametr__Envelope *d = NULL;
	uint8_t a4[4] = { 10, 1, 0, 0 }, *buf;
	size_t len;
	char err[256];

	match_init(&m, a4);
	encode_decided(&m, RM_WIRE_MAX_DECIDED, &buf, &len);
	CU_ASSERT_EQUAL_FATAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(d->ack->n_decided, RM_WIRE_MAX_DECIDED);
	CU_ASSERT_EQUAL(d->ack->decided[0]->sport_lo, 5432);
	rm_wire_free(d);
	d = NULL;
	free(buf);
	encode_decided(&m, RM_WIRE_MAX_DECIDED + 1, &buf, &len);
	CU_ASSERT_EQUAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "65 decided matches (at most 64)");
	free(buf);
	m.prefix = 33;
	encode_decided(&m, 1, &buf, &len);
	CU_ASSERT_EQUAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "decided match 0: prefix 33 too long");
	free(buf);
	m.prefix = 16;
	m.sport_lo = 5433;
	encode_decided(&m, 2, &buf, &len);
	CU_ASSERT_EQUAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "decided match 0: bad port range");
	free(buf);
	CU_ASSERT_PTR_NULL(d);
}

static void test_ack_rules(void)
{
	Rametr__ThrottleCommand c, *pc = &c;
	Rametr__Envelope *d = NULL;
	uint8_t *buf;
	size_t len;
	char err[256];

	rametr__throttle_command__init(&c);
	c.id = 0;
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode_ack(0, 1, NULL, &pc, 1, &buf, &len), RM_OK);
	CU_ASSERT_EQUAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "command 0: id 0");
	free(buf);
	c.id = 3;
	c.cap_permille = 1001;
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode_ack(0, 1, NULL, &pc, 1, &buf, &len), RM_OK);
	CU_ASSERT_EQUAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "command 3: cap of 1001 permille (at most 1000)");
	free(buf);
	/* matches: family and address size, prefix, ports, count */
	{
		Rametr__ThrottleMatch m, *pm[RM_WIRE_MAX_MATCH + 1];
		uint8_t a16[16] = { 0xfd };
		static const struct {
			uint32_t family, alen, prefix, clo, chi, slo, shi;
			const char *want;
		} bad[] = {
			{ 2, 16, 8, 0, 65535, 0, 65535, "command 3 match 0: family 2 with a 16-byte address" },
			{ 10, 4, 8, 0, 65535, 0, 65535, "command 3 match 0: family 10 with a 4-byte address" },
			{ 7, 4, 8, 0, 65535, 0, 65535, "command 3 match 0: family 7 with a 4-byte address" },
			{ 2, 4, 33, 0, 65535, 0, 65535, "command 3 match 0: prefix 33 too long" },
			{ 10, 16, 129, 0, 65535, 0, 65535, "command 3 match 0: prefix 129 too long" },
			{ 2, 4, 8, 0, 65536, 0, 65535, "command 3 match 0: bad port range" },
			{ 2, 4, 8, 10, 9, 0, 65535, "command 3 match 0: bad port range" },
			{ 2, 4, 8, 0, 65535, 7000, 6999, "command 3 match 0: bad port range" },
		};
		size_t k;

		c.cap_permille = 300;
		c.n_match = 1;
		c.match = pm;
		for (k = 0; k <= RM_WIRE_MAX_MATCH; k++)
			pm[k] = &m;
		for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
			rametr__throttle_match__init(&m);
			m.family = bad[k].family;
			m.addr.data = a16;
			m.addr.len = bad[k].alen;
			m.prefix = bad[k].prefix;
			m.cport_lo = bad[k].clo;
			m.cport_hi = bad[k].chi;
			m.sport_lo = bad[k].slo;
			m.sport_hi = bad[k].shi;
			CU_ASSERT_EQUAL_FATAL(rm_wire_encode_ack(0, 1, NULL, &pc, 1, &buf, &len), RM_OK);
			CU_ASSERT_EQUAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_EPROTO);
			CU_ASSERT_STRING_EQUAL(err, bad[k].want);
			free(buf);
		}
		rametr__throttle_match__init(&m);
		m.family = 10;
		m.addr.data = a16;
		m.addr.len = 16;
		m.prefix = 128;
		m.cport_hi = m.sport_hi = 65535;
		c.n_match = RM_WIRE_MAX_MATCH;
		CU_ASSERT_EQUAL_FATAL(rm_wire_encode_ack(0, 1, NULL, &pc, 1, &buf, &len), RM_OK);
		CU_ASSERT_EQUAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_OK);
		rm_wire_free(d);
		d = NULL;
		free(buf);
		c.n_match = RM_WIRE_MAX_MATCH + 1;
		CU_ASSERT_EQUAL_FATAL(rm_wire_encode_ack(0, 1, NULL, &pc, 1, &buf, &len), RM_OK);
		CU_ASSERT_EQUAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_EPROTO);
		CU_ASSERT_STRING_EQUAL(err, "command 3: 9 matches (at most 8)");
		free(buf);
		c.n_match = 0;
		c.server = "bad node";
		CU_ASSERT_EQUAL_FATAL(rm_wire_encode_ack(0, 1, NULL, &pc, 1, &buf, &len), RM_OK);
		CU_ASSERT_EQUAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_EPROTO);
		CU_ASSERT_STRING_EQUAL(err, "command 3: invalid server name");
		free(buf);
		c.server = "db1";
		c.ce = "tab\there";
		CU_ASSERT_EQUAL_FATAL(rm_wire_encode_ack(0, 1, NULL, &pc, 1, &buf, &len), RM_OK);
		CU_ASSERT_EQUAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_EPROTO);
		CU_ASSERT(strstr(err, "command 3 CE has non-printable byte 0x09") != NULL);
		free(buf);
		c.ce = "";
	}
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode_ack(17, 1, NULL, NULL, 0, &buf, &len), RM_OK);
	CU_ASSERT_EQUAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "unknown ack status 17");
	free(buf);
	CU_ASSERT_EQUAL(rm_wire_encode_ack(0, 1, NULL, NULL, 2, &buf, &len), RM_EINVAL);
}

static void test_check_node(void)
{
	char err[128];

	CU_ASSERT_EQUAL(rm_wire_check_node("web-1.example", err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(rm_wire_check_node(NULL, err, sizeof(err)), RM_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "empty node name");
	CU_ASSERT_EQUAL(rm_wire_check_node("a\tb", err, sizeof(err)), RM_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "node name has non-printable byte 0x09 at offset 1");
}

/* Batches with hostile parts: refused as a whole, with the seq when the bytes decode. */
static void test_batch_hostile(void)
{
	struct sample s;
	Rametr__Envelope *d = NULL;
	uint8_t *buf, *b2;
	size_t len, n, i;
	uint64_t seq = 0;
	char err[256];

	sample_init(&s);
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&s.env, &buf, &len), RM_OK);
	/* cut anywhere: never accepted with parts missing unless cut at a field's end of the envelope */
	for (n = 1; n < len; n++) {
		int rv = rm_wire_decode(buf, n, &d, err, sizeof(err));

		CU_ASSERT(rv == RM_EPROTO || rv == RM_EVERSION);
		CU_ASSERT_PTR_NULL(d);
	}
	/* the batch given twice, or beside a hello: refused */
	b2 = malloc(2 * len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b2);
	memcpy(b2, buf, len);
	memcpy(b2 + len, buf, len);
	CU_ASSERT_EQUAL(rm_wire_decode(b2, 2 * len, &d, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT(strstr(err, "malformed message") != NULL);
	{
		Rametr__Envelope he;
		Rametr__Hello h;
		uint8_t *hb;
		size_t hl;

		hello_init(&he, &h);
		CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&he, &hb, &hl), RM_OK);
		CU_ASSERT_FATAL(hl <= len);
		memcpy(b2, hb, hl);
		memcpy(b2 + hl, buf, len);
		CU_ASSERT_EQUAL(rm_wire_decode(b2, hl + len, &d, err, sizeof(err)), RM_EPROTO);
		free(hb);
	}
	free(b2);
	free(buf);
	/* a part breaking a rule: refused with the reason, its seq known */
	s.part[1].win = 0;
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&s.env, &buf, &len), RM_OK);
	CU_ASSERT_EQUAL(rm_wire_decode_seq(buf, len, &d, &seq, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "part 1: win 0");
	CU_ASSERT_EQUAL(seq, 7);
	free(buf);
	/* ... after the header's: the header's reason first */
	s.batch.instance = 0;
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&s.env, &buf, &len), RM_OK);
	CU_ASSERT_EQUAL(rm_wire_decode(buf, len, &d, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "batch has instance 0");
	free(buf);
	/* a part whose bytes do not decode (its win as bytes): the message is malformed */
	sample_init(&s);
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&s.env, &buf, &len), RM_OK);
	for (i = 0; i + 6 <= len; i++) /* part 0's win: field 2, varint 1700000000 */
		if (memcmp(buf + i, "\x10\x80\xe2\xcf\xaa\x06", 6) == 0)
			break;
	CU_ASSERT_FATAL(i + 6 <= len);
	buf[i] = 0x12; /* win as bytes, of a length beyond the part: it does not decode */
	CU_ASSERT_EQUAL(rm_wire_decode_seq(buf, len, &d, &seq, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT(strstr(err, "malformed message") != NULL);
	CU_ASSERT_PTR_NULL(d);
	free(buf);
}

static CU_TestInfo cases[] = {
	{ "batches with hostile parts are refused", test_batch_hostile },
	{ "round trip of a batch", test_roundtrip_batch },
	{ "round trip of a hello", test_roundtrip_hello },
	{ "round trip of acks of every status", test_roundtrip_ack },
	{ "every truncation is refused", test_truncated },
	{ "random garbage", test_garbage },
	{ "random mutations of a batch", test_mutations },
	{ "unknown and missing version", test_version },
	{ "empty, null and oversized input", test_len_limits },
	{ "decode memory budget", test_budget },
	{ "semantic rules", test_semantic },
	{ "ack rules", test_ack_rules },
	{ "ack decided matches", test_ack_decided },
	{ "node name rule", test_check_node },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("rm_wire", cases)
