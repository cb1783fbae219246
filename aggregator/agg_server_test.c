/*
 * agg_server_test.c - tests of the aggregator's transport loop with real nng
 * REQ clients over ipc:// (and tcp://127.0.0.1): bad input of every kind
 * gets the documented Ack and the server keeps serving; handler results map
 * to Ack statuses; commands reach the Ack; ticks; listen errors; the
 * refusal log names the peer and is rate-limited.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "agg_server.h"
#include "rm_test.h"
#include "banned.h"

/* ---- a test handler whose answers depend on the batch's seq ---- */

struct th {
	atomic_int hellos, batches, ticks;
	char last_node[64];
	uint64_t last_instance;
	Rametr__ThrottleCommand cmd[2], *pcmd[2];
	int bad_commands;
};

static int th_on_hello(void *arg, const Rametr__Hello *h, char *err, size_t errlen)
{
	struct th *t = arg;

	snprintf(t->last_node, sizeof(t->last_node), "%s", h->node);
	t->last_instance = h->instance;
	atomic_fetch_add(&t->hellos, 1);
	if (strcmp(h->node, "unwelcome") == 0) {
		snprintf(err, errlen, "node 'unwelcome' is not in the cluster configuration");
		return RM_EINVAL;
	}
	return RM_OK;
}

static int th_on_batch(void *arg, const struct rm_wbatch *b, int *dup, char *err, size_t errlen)
{
	struct th *t = arg;

	atomic_fetch_add(&t->batches, 1);
	snprintf(t->last_node, sizeof(t->last_node), "%s", b->node);
	switch (b->seq) {
	case 100:
		snprintf(err, errlen, "part 3 maps to no chargeable entity");
		return RM_EPROTO;
	case 101:
		snprintf(err, errlen, "window_ns 7 does not match the configured 1000000000");
		return RM_EINVAL;
	case 102:
		snprintf(err, errlen, "database is locked");
		return RM_ESQL;
	case 103:
		return RM_EIO; /* no text: rm_strerror is used */
	case 104:
		snprintf(err, errlen, "write queue full");
		return RM_EFULL;
	case 105:
		*dup = 1;
		snprintf(err, errlen, "ignored text");
		return RM_OK;
	case 106:
		snprintf(err, errlen, "schema of version 3 expected");
		return RM_EVERSION;
	case 107: /* a handler too slow for a collector's patience */
		usleep((AGG_SERVER_STALL_MS + 100) * 1000);
		return RM_OK;
	default:
		return RM_OK;
	}
}

static int th_commands(void *arg, const char *node, Rametr__ThrottleCommand ***cmds, size_t *n)
{
	struct th *t = arg;

	if (strcmp(node, "node-cmd") != 0) {
		*n = 0;
		return RM_OK;
	}
	if (strcmp(node, "node-cmd") == 0 && t->bad_commands)
		t->cmd[1].cap_permille = 5000;
	*cmds = t->pcmd;
	*n = 2;
	return RM_OK;
}

static void th_tick(void *arg)
{
	struct th *t = arg;

	atomic_fetch_add(&t->ticks, 1);
}

static void th_init(struct th *t)
{
	memset(t, 0, sizeof(*t));
	rametr__throttle_command__init(&t->cmd[0]);
	rametr__throttle_command__init(&t->cmd[1]);
	t->cmd[0].id = 41;
	t->cmd[0].ce = "tenant-a";
	t->cmd[0].server = "db";
	t->cmd[0].resource = "cpu";
	t->cmd[0].cap_permille = 300;
	t->cmd[0].reason = "over budget";
	t->cmd[1].id = 42;
	t->cmd[1].ce = "tenant-b";
	t->cmd[1].resource = "cpu";
	t->cmd[1].cap_permille = 0;
	t->pcmd[0] = &t->cmd[0];
	t->pcmd[1] = &t->cmd[1];
}

/* ---- a server running on its own thread ---- */

struct srv {
	struct agg_server *s;
	struct th th;
	pthread_t thread;
	volatile sig_atomic_t stop;
	int run_rv;
	char url[320];
};

static void *srv_main(void *arg)
{
	struct srv *v = arg;

	v->run_rv = agg_server_run(v->s, &v->stop);
	return NULL;
}

/* the sockets "the rules decide": one pattern, sent with every OK / DUPLICATE ack */
static uint8_t dec_addr[4] = { 10, 1, 0, 0 };
static Rametr__ThrottleMatch dec_m = { PROTOBUF_C_MESSAGE_INIT(&rametr__throttle_match__descriptor), 2,
				       { 4, dec_addr }, 16, 0, 65535, 5432, 5432 };
static Rametr__ThrottleMatch *dec_pm[1] = { &dec_m };

static void srv_start(struct srv *v, const char *name, int tick_ms, const char *extra_url)
{
	static int fini_registered;
	struct agg_handler h = { 0 };
	const char *urls[2];

	/* let nng reap closed sockets before the leak check at exit */
	if (!fini_registered++)
		atexit(nng_fini);

	memset(v, 0, sizeof(*v));
	th_init(&v->th);
	snprintf(v->url, sizeof(v->url), "ipc://%s/%s.sock", rm_test_tmpdir(), name);
	h.arg = &v->th;
	h.on_hello = th_on_hello;
	h.on_batch = th_on_batch;
	h.commands_for = th_commands;
	h.decided = dec_pm;
	h.ndecided = 1;
	h.on_tick = th_tick;
	urls[0] = v->url;
	urls[1] = extra_url;
	CU_ASSERT_EQUAL_FATAL(agg_server_open(&v->s, urls, extra_url ? 2 : 1, &h, tick_ms), RM_OK);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&v->thread, NULL, srv_main, v), 0);
}

static void srv_stop(struct srv *v)
{
	v->stop = 1;
	pthread_join(v->thread, NULL);
	CU_ASSERT_EQUAL(v->run_rv, RM_OK);
	agg_server_close(v->s);
}

/* ---- a REQ client ---- */

static nng_socket client(const char *url, int timeout_ms)
{
	nng_socket c;

	CU_ASSERT_EQUAL_FATAL(nng_req0_open(&c), 0);
	nng_socket_set_ms(c, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_ms(c, NNG_OPT_RECVTIMEO, timeout_ms);
	nng_socket_set_ms(c, NNG_OPT_SENDTIMEO, timeout_ms);
	CU_ASSERT_EQUAL_FATAL(nng_dial(c, url, NULL, 0), 0);
	return c;
}

/* Sends bytes, returns the decoded Ack envelope (NULL on no reply). */
static Rametr__Envelope *ask(nng_socket c, const void *buf, size_t len)
{
	Rametr__Envelope *env = NULL;
	void *rep = NULL;
	size_t replen = 0;
	char err[256];
	int rv;

	if ((rv = nng_send(c, (void *)buf, len, 0)) != 0)
		return NULL;
	if ((rv = nng_recv(c, &rep, &replen, NNG_FLAG_ALLOC)) != 0)
		return NULL;
	rv = rm_wire_decode(rep, replen, &env, err, sizeof(err));
	nng_free(rep, replen);
	CU_ASSERT_EQUAL(rv, RM_OK);
	if (rv != RM_OK)
		return NULL;
	CU_ASSERT_EQUAL(env->body_case, RAMETR__ENVELOPE__BODY_ACK);
	if (env->body_case != RAMETR__ENVELOPE__BODY_ACK) {
		rm_wire_free(env);
		return NULL;
	}
	return env;
}

/* Asks and checks status, seq and (if non-NULL) the exact error text. */
static void expect(nng_socket c, const void *buf, size_t len, int status, uint64_t seq,
		   const char *error)
{
	Rametr__Envelope *env = ask(c, buf, len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(env);
	if ((int)env->ack->status != status || env->ack->seq != seq ||
	    (error && strcmp(env->ack->error, error) != 0)) {
		fprintf(stderr, "got %s seq %llu '%s', expected %s seq %llu '%s'\n",
			rm_wire_ack_status_name(env->ack->status), (unsigned long long)env->ack->seq,
			env->ack->error, rm_wire_ack_status_name(status), (unsigned long long)seq,
			error ? error : "*");
		CU_FAIL("unexpected ack");
	}
	rm_wire_free(env);
}

/* A valid encoded batch of node with seq and one part. */
static uint8_t *batch(const char *node, uint64_t seq, uint32_t version, size_t *len)
{
	Rametr__Envelope env = RAMETR__ENVELOPE__INIT;
	Rametr__Batch b = RAMETR__BATCH__INIT;
	Rametr__SegmentPart p = RAMETR__SEGMENT_PART__INIT, *pp = &p;
	uint8_t *buf = NULL;

	p.seg_id = 1;
	p.win = 1700000000;
	p.cpu_ns = 1000;
	p.comm = "worker";
	b.node = (char *)node;
	b.instance = 77;
	b.seq = seq;
	b.window_ns = 1000000000;
	b.backend = "replay";
	b.n_parts = 1;
	b.parts = &pp;
	env.version = version;
	env.body_case = RAMETR__ENVELOPE__BODY_BATCH;
	env.batch = &b;
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&env, &buf, len), RM_OK);
	return buf;
}

static uint8_t *hello(const char *node, size_t *len)
{
	Rametr__Envelope env = RAMETR__ENVELOPE__INIT;
	Rametr__Hello h = RAMETR__HELLO__INIT;
	uint8_t *buf = NULL;

	h.node = (char *)node;
	h.backend = "ebpf";
	h.instance = 5;
	h.window_ns = 1000000000;
	h.ncpu = 2;
	h.hostname = "h";
	env.body_case = RAMETR__ENVELOPE__BODY_HELLO;
	env.hello = &h;
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode(&env, &buf, len), RM_OK);
	return buf;
}

/* ---- stderr capture ---- */

static size_t count_lines(const char *text, const char *needle)
{
	size_t n = 0;
	const char *p = text;

	while ((p = strstr(p, needle))) {
		n++;
		p += strlen(needle);
	}
	return n;
}

/* ---- cases ---- */

static void test_bad_input(void)
{
	static const uint8_t garbage[] = { 0xde, 0xad, 0xbe, 0xef, 0xff, 0xff, 0xff, 0x01, 0x02 };
	struct srv v;
	nng_socket c;
	uint8_t *b;
	size_t len;
	char log[512], want[64], *text;

	srv_start(&v, "bad", 1000, NULL);
	c = client(v.url, 5000);
	rm_test_capture_start("bad", log, sizeof(log));
	/* a valid batch first */
	b = batch("node-a", 1, 1, &len);
	expect(c, b, len, RAMETR__ACK__STATUS__ACK_OK, 1, "");
	free(b);
	/* garbage */
	expect(c, garbage, sizeof(garbage), RAMETR__ACK__STATUS__ACK_MALFORMED, 0,
	       "malformed message (9 bytes)");
	/* truncations of a valid batch (all of them are in rm_wire_test; few here
	 * to stay under the refusal log's rate limit) */
	b = batch("node-a", 7, 1, &len);
	{
		size_t k, n;

		for (k = 1; k <= 3; k++) {
			Rametr__Envelope *env;

			n = len * k / 4;
			env = ask(c, b, n);

			CU_ASSERT_PTR_NOT_NULL_FATAL(env);
			CU_ASSERT_EQUAL(env->ack->status, RAMETR__ACK__STATUS__ACK_MALFORMED);
			snprintf(want, sizeof(want), "malformed message (%zu bytes)", n);
			CU_ASSERT(strcmp(env->ack->error, want) == 0 ||
				  strcmp(env->ack->error, "message has no body") == 0);
			rm_wire_free(env);
		}
	}
	free(b);
	/* wrong version: the seq is still echoed */
	b = batch("node-a", 8, 2, &len);
	expect(c, b, len, RAMETR__ACK__STATUS__ACK_BAD_VERSION, 8,
	       "unsupported protocol version 2 (expected 1)");
	free(b);
	/* empty message */
	expect(c, "", 0, RAMETR__ACK__STATUS__ACK_MALFORMED, 0, "malformed message (0 bytes)");
	/* decodable but breaking a wire rule */
	b = batch("bad node", 9, 1, &len);
	expect(c, b, len, RAMETR__ACK__STATUS__ACK_MALFORMED, 9,
	       "node name has non-printable byte 0x20 at offset 3");
	free(b);
	/* an ack is not a request */
	CU_ASSERT_EQUAL_FATAL(rm_wire_encode_ack(0, 3, NULL, NULL, 0, &b, &len), RM_OK);
	expect(c, b, len, RAMETR__ACK__STATUS__ACK_MALFORMED, 0, "unexpected ack from a collector");
	free(b);
	/* and the server still serves valid batches */
	b = batch("node-a", 2, 1, &len);
	expect(c, b, len, RAMETR__ACK__STATUS__ACK_OK, 2, "");
	free(b);
	text = rm_test_capture_end(log);
	CU_ASSERT_EQUAL(atomic_load(&v.th.batches), 2);
	/* refusals are logged once each, with the peer */
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "refused batch 8 from ipc://"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "ACK_BAD_VERSION: unsupported protocol version 2"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "(pid "));
	CU_ASSERT_EQUAL(count_lines(text, "refused batch 8 "), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "refused batch 9 from ipc://"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "refused message of 9 bytes from ipc://"));
	free(text);
	nng_close(c);
	srv_stop(&v);
}

static void test_rate_limit(void)
{
	struct srv v;
	nng_socket c;
	char log[512], *text;
	int i;

	srv_start(&v, "rate", 1000, NULL);
	c = client(v.url, 5000);
	rm_test_capture_start("rate", log, sizeof(log));
	for (i = 0; i < 25; i++)
		expect(c, "\xff\xff", 2, RAMETR__ACK__STATUS__ACK_MALFORMED, 0,
		       "malformed message (2 bytes)");
	text = rm_test_capture_end(log);
	CU_ASSERT_EQUAL(count_lines(text, "refused message of 2 bytes from ipc://"), 10);
	free(text);
	nng_close(c);
	srv_stop(&v);
}

static void test_handler_errors(void)
{
	struct srv v;
	nng_socket c;
	uint8_t *b;
	size_t len;

	srv_start(&v, "handler", 1000, NULL);
	c = client(v.url, 5000);
#define CASE(seq, status, text)                          \
	do {                                             \
		b = batch("node-a", seq, 1, &len);        \
		expect(c, b, len, status, seq, text);     \
		free(b);                                 \
	} while (0)
	CASE(100, RAMETR__ACK__STATUS__ACK_REJECTED, "part 3 maps to no chargeable entity");
	CASE(101, RAMETR__ACK__STATUS__ACK_REJECTED,
	     "window_ns 7 does not match the configured 1000000000");
	CASE(102, RAMETR__ACK__STATUS__ACK_RETRY, "database is locked");
	CASE(103, RAMETR__ACK__STATUS__ACK_RETRY, "i/o error");
	CASE(104, RAMETR__ACK__STATUS__ACK_RETRY, "write queue full");
	CASE(105, RAMETR__ACK__STATUS__ACK_DUPLICATE, "");
	CASE(106, RAMETR__ACK__STATUS__ACK_BAD_VERSION, "schema of version 3 expected");
	CASE(107, RAMETR__ACK__STATUS__ACK_OK, "");
#undef CASE
	CU_ASSERT_EQUAL(atomic_load(&v.th.batches), 8);
	/* hellos */
	b = hello("node-h", &len);
	expect(c, b, len, RAMETR__ACK__STATUS__ACK_OK, 0, "");
	free(b);
	CU_ASSERT_STRING_EQUAL(v.th.last_node, "node-h");
	CU_ASSERT_EQUAL(v.th.last_instance, 5);
	b = hello("unwelcome", &len);
	expect(c, b, len, RAMETR__ACK__STATUS__ACK_REJECTED, 0,
	       "node 'unwelcome' is not in the cluster configuration");
	free(b);
	CU_ASSERT_EQUAL(atomic_load(&v.th.hellos), 2);
	nng_close(c);
	srv_stop(&v);
}

static void test_commands(void)
{
	Rametr__Envelope *env;
	struct srv v;
	nng_socket c;
	uint8_t *b;
	size_t len;

	srv_start(&v, "cmd", 1000, NULL);
	c = client(v.url, 5000);
	b = batch("node-cmd", 1, 1, &len);
	env = ask(c, b, len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(env);
	CU_ASSERT_EQUAL(env->ack->status, RAMETR__ACK__STATUS__ACK_OK);
	CU_ASSERT_EQUAL_FATAL(env->ack->n_commands, 2);
	CU_ASSERT_EQUAL(env->ack->commands[0]->id, 41);
	CU_ASSERT_STRING_EQUAL(env->ack->commands[0]->ce, "tenant-a");
	CU_ASSERT_STRING_EQUAL(env->ack->commands[0]->server, "db");
	CU_ASSERT_EQUAL(env->ack->commands[0]->cap_permille, 300);
	CU_ASSERT_STRING_EQUAL(env->ack->commands[0]->reason, "over budget");
	CU_ASSERT_EQUAL(env->ack->commands[1]->id, 42);
	/* and the sockets the rules decide */
	CU_ASSERT_EQUAL_FATAL(env->ack->n_decided, 1);
	CU_ASSERT_EQUAL(env->ack->decided[0]->family, 2);
	CU_ASSERT_EQUAL(env->ack->decided[0]->addr.len, 4);
	CU_ASSERT_EQUAL(env->ack->decided[0]->addr.data[1], 1);
	CU_ASSERT_EQUAL(env->ack->decided[0]->prefix, 16);
	CU_ASSERT_EQUAL(env->ack->decided[0]->sport_lo, 5432);
	rm_wire_free(env);
	free(b);
	/* other nodes get none */
	b = batch("node-a", 1, 1, &len);
	env = ask(c, b, len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(env);
	CU_ASSERT_EQUAL(env->ack->n_commands, 0);
	rm_wire_free(env);
	free(b);
	/* hellos carry them too */
	b = hello("node-cmd", &len);
	env = ask(c, b, len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(env);
	CU_ASSERT_EQUAL(env->ack->n_commands, 2);
	CU_ASSERT_EQUAL(env->ack->n_decided, 1);
	rm_wire_free(env);
	free(b);
	/* refused batches do not */
	b = batch("node-cmd", 102, 1, &len);
	env = ask(c, b, len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(env);
	CU_ASSERT_EQUAL(env->ack->status, RAMETR__ACK__STATUS__ACK_RETRY);
	CU_ASSERT_EQUAL(env->ack->n_commands, 0);
	CU_ASSERT_EQUAL(env->ack->n_decided, 0);
	rm_wire_free(env);
	free(b);
	/* commands that break the wire rules are not sent; the ack still is */
	v.th.bad_commands = 1;
	b = batch("node-cmd", 2, 1, &len);
	env = ask(c, b, len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(env);
	CU_ASSERT_EQUAL(env->ack->status, RAMETR__ACK__STATUS__ACK_OK);
	CU_ASSERT_EQUAL(env->ack->n_commands, 0);
	rm_wire_free(env);
	free(b);
	nng_close(c);
	srv_stop(&v);
}

static void test_tick_and_tcp(void)
{
	struct srv v;
	nng_socket c;
	char tcp[64];
	uint8_t *b;
	size_t len;
	int port, tries;

	/* find a free port: listening is part of what is tested */
	for (tries = 0; tries < 20; tries++) {
		struct agg_server *probe = NULL;
		struct agg_handler h = { .on_hello = th_on_hello, .on_batch = th_on_batch };
		const char *u = tcp;

		port = 20000 + (int)((getpid() * 7 + tries * 131) % 30000);
		snprintf(tcp, sizeof(tcp), "tcp://127.0.0.1:%d", port);
		if (agg_server_open(&probe, &u, 1, &h, 0) == RM_OK) {
			agg_server_close(probe);
			break;
		}
	}
	CU_ASSERT_FATAL(tries < 20);
	srv_start(&v, "tick", 50, tcp);
	usleep(400 * 1000);
	CU_ASSERT(atomic_load(&v.th.ticks) >= 3);
	CU_ASSERT(atomic_load(&v.th.ticks) <= 9);
	c = client(tcp, 5000);
	b = batch("node-tcp", 3, 1, &len);
	expect(c, b, len, RAMETR__ACK__STATUS__ACK_OK, 3, "");
	free(b);
	CU_ASSERT_STRING_EQUAL(v.th.last_node, "node-tcp");
	nng_close(c);
	srv_stop(&v);
}

/* Sends a valid batch on fresh connections until answered; returns ms taken or -1. */
static long served_within(const char *url, uint64_t seq, int deadline_ms)
{
	Rametr__Envelope *env = NULL;
	struct timespec t0, t1;
	nng_socket c;
	uint8_t *b;
	size_t len;
	long ms = 0;

	b = batch("node-a", seq, 1, &len);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!env && ms < deadline_ms) {
		CU_ASSERT_EQUAL_FATAL(nng_req0_open(&c), 0);
		nng_socket_set_ms(c, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
		nng_socket_set_ms(c, NNG_OPT_RECVTIMEO, 1000);
		nng_socket_set_ms(c, NNG_OPT_SENDTIMEO, 1000);
		if (nng_dial(c, url, NULL, 0) == 0)
			env = ask(c, b, len);
		else
			usleep(100 * 1000); /* e.g. while the server listens again */
		nng_close(c);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	}
	free(b);
	if (!env)
		return -1;
	CU_ASSERT_EQUAL(env->ack->status, RAMETR__ACK__STATUS__ACK_OK);
	rm_wire_free(env);
	return ms;
}

/* ---- raw peers: misbehaving below the protocol, on plain sockets ---- */

static int raw_connect(const char *url)
{
	int fd = -1;

	if (strncmp(url, "ipc://", 6) == 0) {
		struct sockaddr_un a;

		memset(&a, 0, sizeof(a));
		a.sun_family = AF_UNIX;
		snprintf(a.sun_path, sizeof(a.sun_path), "%s", url + 6);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
			close(fd);
			fd = -1;
		}
	} else {
		struct sockaddr_in a;
		const char *colon = strrchr(url, ':');

		memset(&a, 0, sizeof(a));
		a.sin_family = AF_INET;
		a.sin_port = htons((uint16_t)atoi(colon + 1));
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
			close(fd);
			fd = -1;
		}
	}
	CU_ASSERT(fd >= 0);
	return fd;
}

static void raw_write(int fd, const void *buf, size_t n)
{
	/* the server may close first: EPIPE is part of the game */
	if (send(fd, buf, n, MSG_NOSIGNAL) < 0 && errno != EPIPE && errno != ECONNRESET)
		CU_FAIL("raw write failed");
}

/* The SP handshake of a REQ v0 peer (protocol 0x30), and the server's answer. */
static void raw_handshake(int fd)
{
	static const uint8_t hello[8] = { 0, 'S', 'P', 0, 0x00, 0x30, 0, 0 };
	uint8_t in[8];
	size_t got = 0;
	ssize_t r;

	raw_write(fd, hello, sizeof(hello));
	while (got < sizeof(in) && (r = recv(fd, in + got, sizeof(in) - got, 0)) > 0)
		got += (size_t)r;
	CU_ASSERT_EQUAL(got, sizeof(in));
}

/* An ipc message frame header: type 1, 64-bit big-endian length. */
static void raw_frame(int fd, uint64_t len)
{
	uint8_t h[9];
	int i;

	h[0] = 1;
	for (i = 0; i < 8; i++)
		h[1 + i] = (uint8_t)(len >> (56 - 8 * i));
	raw_write(fd, h, sizeof(h));
}

/* tcp frames have no type byte: the same header minus its first byte */
static void raw_frame_tcp(int fd, uint64_t len)
{
	uint8_t h[8];
	int i;

	for (i = 0; i < 8; i++)
		h[i] = (uint8_t)(len >> (56 - 8 * i));
	raw_write(fd, h, sizeof(h));
}

/*
 * Peers misbehaving at the transport level, on ipc:// and tcp://: the server
 * must keep serving valid requests after each of them. With nng 1.5.2 some
 * of them leave an ipc listener deaf; the server's watchdog listens again.
 */
static void test_raw_peers(void)
{
	static const uint8_t junk[64] = "GET / HTTP/1.0\r\n\r\n and some more junk here";
	const char *urls[2];
	char tcp[64];
	struct srv v;
	uint64_t seq = 1;
	long ms;
	int u, kind, fd, fd2, k, port, tries;

	for (tries = 0; tries < 20; tries++) {
		struct agg_server *probe = NULL;
		struct agg_handler h = { .on_hello = th_on_hello, .on_batch = th_on_batch };
		const char *x = tcp;

		port = 20000 + (int)((getpid() * 13 + tries * 177) % 30000);
		snprintf(tcp, sizeof(tcp), "tcp://127.0.0.1:%d", port);
		if (agg_server_open(&probe, &x, 1, &h, 0) == RM_OK) {
			agg_server_close(probe);
			break;
		}
	}
	CU_ASSERT_FATAL(tries < 20);
	srv_start(&v, "raw", 1000, tcp);
	urls[0] = v.url;
	urls[1] = tcp;
	for (u = 0; u < 2; u++) {
		int is_ipc = u == 0;

		for (kind = 0; kind < 8; kind++) {
			fd = raw_connect(urls[u]);
			CU_ASSERT_FATAL(fd >= 0);
			fd2 = -1;
			switch (kind) {
			case 0: /* connect, close */
				break;
			case 1: /* not speaking SP at all */
				raw_write(fd, junk, sizeof(junk));
				break;
			case 2: /* oversized message */
				raw_handshake(fd);
				if (is_ipc)
					raw_frame(fd, (uint64_t)RM_WIRE_MAX_MSG + 1);
				else
					raw_frame_tcp(fd, (uint64_t)RM_WIRE_MAX_MSG + 1);
				raw_write(fd, junk, sizeof(junk));
				break;
			case 3: /* a REQ peer resending an oversized message on new connections */
				for (k = 0; k < 10; k++) {
					if (k)
						fd = raw_connect(urls[u]);
					raw_handshake(fd);
					if (is_ipc)
						raw_frame(fd, 1ull << 40);
					else
						raw_frame_tcp(fd, 1ull << 40);
					raw_write(fd, junk, sizeof(junk));
					if (k < 9)
						close(fd);
				}
				break;
			case 4: /* a message cut short */
				raw_handshake(fd);
				if (is_ipc)
					raw_frame(fd, 1000);
				else
					raw_frame_tcp(fd, 1000);
				raw_write(fd, junk, 10);
				break;
			case 5: /* a message without a request id */
				raw_handshake(fd);
				if (is_ipc)
					raw_frame(fd, 4);
				else
					raw_frame_tcp(fd, 4);
				raw_write(fd, "abcd", 4);
				break;
			case 6: /* silent before the handshake, kept open while others are served */
				fd2 = fd;
				fd = -1;
				break;
			case 7: /* silent after the handshake, kept open */
				raw_handshake(fd);
				fd2 = fd;
				fd = -1;
				break;
			}
			if (fd >= 0)
				close(fd);
			ms = served_within(urls[u], seq++, 15000);
			if (ms < 0 || ms > 1000)
				fprintf(stderr, "%s, misbehaviour %d: served again after %ld ms\n",
					urls[u], kind, ms);
			CU_ASSERT(ms >= 0);
			if (fd2 >= 0)
				close(fd2);
		}
	}
	/* the handler saw the valid batches only */
	CU_ASSERT_EQUAL(atomic_load(&v.th.batches), (int)seq - 1);
	srv_stop(&v);
}

/* The watchdog's probe requests are answered by the server, never by the handler. */
static void test_probe_echo(void)
{
	uint8_t probe[12] = { 0, 'R', 'M', 'P', 'R', 'O', 'B', 'E', 1, 2, 3, 4 }, rep[32];
	size_t sz = sizeof(rep);
	struct agg_server_stats st;
	struct srv v;
	nng_socket c;

	srv_start(&v, "probe", 1000, NULL);
	c = client(v.url, 5000);
	CU_ASSERT_EQUAL_FATAL(nng_send(c, probe, sizeof(probe), 0), 0);
	CU_ASSERT_EQUAL_FATAL(nng_recv(c, rep, &sz, 0), 0);
	CU_ASSERT_EQUAL(sz, sizeof(probe));
	CU_ASSERT_EQUAL(memcmp(rep, probe, sizeof(probe)), 0);
	/* a near miss is an ordinary malformed message */
	probe[7] = 'X';
	expect(c, probe, sizeof(probe), RAMETR__ACK__STATUS__ACK_MALFORMED, 0,
	       "malformed message (12 bytes)");
	/* the server's own probes (every 2 s) never reach the handler either,
	 * and their connections, each a complete message, are not counted (nor
	 * logged) as peers that hung up without one */
	usleep(4500 * 1000);
	CU_ASSERT_EQUAL(atomic_load(&v.th.batches), 0);
	CU_ASSERT_EQUAL(atomic_load(&v.th.hellos), 0);
	agg_server_stats(v.s, &st);
	CU_ASSERT(st.conns_accepted >= 2); /* ours, and at least one probe's */
	CU_ASSERT_EQUAL(st.conns_silent, 0);
	nng_close(c);
	srv_stop(&v);
}

static void test_open_errors(void)
{
	struct agg_handler h = { .on_hello = th_on_hello, .on_batch = th_on_batch };
	struct agg_server *s = (struct agg_server *)1;
	const char *url;
	char path[512], log[512], *text;

	url = "inproc://x";
	CU_ASSERT_EQUAL(agg_server_open(&s, &url, 1, &h, 0), RM_EINVAL);
	CU_ASSERT_PTR_NULL(s);
	snprintf(path, sizeof(path), "ipc://%s/no/such/dir/agg.sock", rm_test_tmpdir());
	url = path;
	rm_test_capture_start("open", log, sizeof(log));
	CU_ASSERT_EQUAL(agg_server_open(&s, &url, 1, &h, 0), RM_EIO);
	text = rm_test_capture_end(log);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "failed to listen on 'ipc://"));
	free(text);
	CU_ASSERT_PTR_NULL(s);
	CU_ASSERT_EQUAL(agg_server_open(&s, &url, 0, &h, 0), RM_EINVAL);
	h.on_batch = NULL;
	CU_ASSERT_EQUAL(agg_server_open(&s, &url, 1, &h, 0), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_server_run(NULL, NULL), RM_EINVAL);
	agg_server_close(NULL);
}

/* A request the loop kept others waiting for shows in the health figures. */
static void test_health(void)
{
	struct agg_server_stats h;
	struct srv v;
	nng_socket c;
	uint8_t *b;
	size_t len;

	srv_start(&v, "health", 0, NULL);
	c = client(v.url, 5000);
	b = batch("node-a", 1, 1, &len);
	expect(c, b, len, RAMETR__ACK__STATUS__ACK_OK, 1, "");
	free(b);
	b = batch("node-a", 107, 1, &len);
	expect(c, b, len, RAMETR__ACK__STATUS__ACK_OK, 107, "");
	free(b);
	nng_close(c);
	v.stop = 1;
	pthread_join(v.thread, NULL);
	CU_ASSERT_EQUAL(v.run_rv, RM_OK);
	agg_server_stats(v.s, &h);
	agg_server_close(v.s);
	CU_ASSERT_EQUAL(h.requests, 2);
	CU_ASSERT_EQUAL(h.stalls, 1);
	CU_ASSERT(h.stall_ms >= AGG_SERVER_STALL_MS);
	CU_ASSERT(h.max_busy_ms >= AGG_SERVER_STALL_MS);
}

static CU_TestInfo cases[] = {
	{ "bad input gets the documented acks", test_bad_input },
	{ "refusal log is rate-limited", test_rate_limit },
	{ "handler results map to ack statuses", test_handler_errors },
	{ "commands land in the ack", test_commands },
	{ "ticks and tcp", test_tick_and_tcp },
	{ "peers misbehaving below the protocol", test_raw_peers },
	{ "probes are answered by the server", test_probe_echo },
	{ "open errors", test_open_errors },
	{ "a request that kept the others waiting shows in the health figures", test_health },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_server", cases)
