/*
 * agg_stop_test.c - the real rametr-aggregator stops within a second of
 * SIGTERM while a collector keeps it busy: batches of the stream that made
 * the pairing spin (testdata/mux_gw.events, follow-replies: thousands of
 * parts that stay pending on one multiplexed connection), as the batches of
 * one gateway node after another, sent back to back
 * over a real nng connection, the signal arriving while a batch is being
 * applied and with tens of thousands of parts pending. And with 1500
 * connections open midway through a frame (nng's own close waited forever
 * for them), it stops within a few seconds.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "rm_test.h"
#include "col_enc.h"
#include "col_replay.h"
#include "rm_clock.h"
#include "rm_err.h"
#include "rm_wire.h"
#include "banned.h"

static int64_t mono_ms(void)
{
	return (int64_t)(rm_clock_mono_ns() / 1000000);
}

/* Sends buf and waits for the Ack; returns its status, or -1 without one. */
static int ask(nng_socket c, const uint8_t *buf, size_t len)
{
	Rametr__Envelope *env = NULL;
	char err[256];
	void *rep = NULL;
	size_t rlen = 0;
	int st = -1;

	if (nng_send(c, (void *)buf, len, 0) != 0 || nng_recv(c, &rep, &rlen, NNG_FLAG_ALLOC) != 0)
		return -1;
	if (rm_wire_decode(rep, rlen, &env, err, sizeof(err)) == RM_OK && env->body_case == RAMETR__ENVELOPE__BODY_ACK)
		st = env->ack->status;
	rm_wire_free(env);
	nng_free(rep, rlen);
	return st;
}

/* Encodes env, sends it and waits for the Ack; returns as ask. */
static int ask_env(nng_socket c, const Rametr__Envelope *env)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int st;

	if (rm_wire_encode(env, &buf, &len) != RM_OK)
		return -1;
	st = ask(c, buf, len);
	free(buf);
	return st;
}

/* A REQ socket that waits long for replies (the aggregator may be busy). */
static nng_socket req_open(void)
{
	nng_socket c;

	CU_ASSERT_EQUAL_FATAL(nng_req0_open(&c), 0);
	nng_socket_set_ms(c, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_ms(c, NNG_OPT_RECVTIMEO, 20000);
	nng_socket_set_ms(c, NNG_OPT_SENDTIMEO, 5000);
	return c;
}

/*
 * The promise is a second. With AddressSanitizer the same work (the batch in
 * flight, the bounded charging of pending parts, freeing them) runs 2-4 times
 * slower, so that build is held to a proportionate bound: it checks the stop
 * path for leaks and errors, the plain build checks the second.
 */
#if defined(__SANITIZE_ADDRESS__)
#define STOP_MS 2500
#else
#define STOP_MS 1000
#endif

/* Sends SIGTERM to pid and waits for it; returns the ms it took (it must
   exit 0 within STOP_MS; killed after 10 s). */
static int64_t stop_within(pid_t pid, const char *log)
{
	int64_t t0 = mono_ms(), took;
	int rv;

	CU_ASSERT_EQUAL(kill(pid, SIGTERM), 0);
	rv = rm_test_wait(pid, 10000);
	took = mono_ms() - t0;
	CU_ASSERT_EQUAL(rv, 0);
	CU_ASSERT(took <= STOP_MS);
	if (rv != 0 || took > STOP_MS)
		fprintf(stderr, "%s\n", rm_test_slurp(log));
	return took;
}

static void test_sigterm_under_load(void)
{
	const char *dir = rm_test_tmpdir();
	char conf[300], db[300], url[320], log[300], path[512], err[256], node[32];
	const char *argv[] = { AGG_BIN, "--config", conf, "--db", db, "--listen", url, NULL };
	struct col_replay_opts ro = { 0 };
	struct col_replay_capture cap;
	struct col_sink sink;
	struct col_enc enc = { 0 };
	Rametr__Envelope env = RAMETR__ENVELOPE__INIT;
	Rametr__Hello h = RAMETR__HELLO__INIT;
	nng_socket c;
	uint8_t *buf = NULL;
	size_t len = 0;
	uint64_t inst;
	int64_t t0, took;
	pid_t pid = 0;
	FILE *f;
	int rv, sent = 0;

	snprintf(conf, sizeof(conf), "%s/agg.ini", dir);
	snprintf(db, sizeof(db), "%s/rametr.db", dir);
	snprintf(url, sizeof(url), "ipc://%s/agg.sock", dir);
	snprintf(log, sizeof(log), "%s/aggregator.log", dir);
	f = fopen(conf, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	/* a long horizon: everything the stream leaves pending stays pending */
	fputs("[aggregator]\nhorizon = 1h\n[ce c1]\nclient = 10.1.0.1\n[ce c2]\nclient = 10.1.0.2\n", f);
	CU_ASSERT_EQUAL_FATAL(fclose(f), 0);

	ro.follow_replies = 1;
	col_replay_capture_init(&cap);
	sink = col_replay_capture_sink(&cap);
	snprintf(path, sizeof(path), "%s/mux_gw.events", AGG_TESTDATA);
	CU_ASSERT_EQUAL_FATAL(col_replay_file(path, &sink, &ro), RM_OK);

	c = req_open();
	pid = rm_test_spawn(argv, log);
	CU_ASSERT_FATAL(pid > 0);
	/* from here on, a failure still stops the aggregator (out:) */
	for (rv = -1, t0 = mono_ms(); rv != 0 && mono_ms() - t0 < 5000;)
		if ((rv = nng_dial(c, url, NULL, 0)) != 0)
			usleep(20000);
	CU_ASSERT_EQUAL(rv, 0);
	if (rv != 0)
		goto out;
	h.node = "gw1";
	h.backend = "replay";
	h.hostname = "gw1";
	h.instance = 1;
	h.window_ns = 1000000000;
	h.ncpu = 2;
	env.body_case = RAMETR__ENVELOPE__BODY_HELLO;
	env.hello = &h;
	rv = ask_env(c, &env);
	CU_ASSERT_EQUAL(rv, RAMETR__ACK__STATUS__ACK_OK);
	if (rv != RAMETR__ACK__STATUS__ACK_OK)
		goto out;

	/* back to back, each batch the stream of another gateway node, for
	 * two seconds; then the signal with the next batch in flight */
	t0 = mono_ms();
	for (inst = 1;; inst++) {
		struct col_enc_hdr hdr = { node, "replay", inst, 1, 1000000000, 0 };


		snprintf(node, sizeof(node), "gw%llu", (unsigned long long)inst);
		/* a connection is bound to the node of its Hello: one each */
		if (inst > 1) {
			nng_close(c);
			c = req_open();
			CU_ASSERT_EQUAL(rv = nng_dial(c, url, NULL, 0), 0);
			if (rv != 0)
				goto out;
			h.node = node;
			h.hostname = node;
			h.instance = inst;
			rv = ask_env(c, &env);
			CU_ASSERT_EQUAL(rv, RAMETR__ACK__STATUS__ACK_OK);
			if (rv != RAMETR__ACK__STATUS__ACK_OK)
				goto out;
		}
		rv = col_enc_batch(&enc, &hdr, cap.parts, cap.nparts, cap.wins, cap.nwins, NULL, 0, &buf, &len, err,
				   sizeof(err));
		CU_ASSERT_EQUAL(rv, RM_OK);
		if (rv != RM_OK)
			goto out;
		if (mono_ms() - t0 >= 2000 && sent >= 3)
			break;
		rv = ask(c, buf, len);
		free(buf);
		CU_ASSERT_EQUAL(rv, RAMETR__ACK__STATUS__ACK_OK);
		if (rv != RAMETR__ACK__STATUS__ACK_OK)
			goto out;
		sent++;
	}
	CU_ASSERT_EQUAL(nng_send(c, buf, len, 0), 0);
	free(buf);
	usleep(20000); /* the aggregator is applying it */
	took = stop_within(pid, log);
	pid = 0;
	printf("\n    %d batches of %zu parts applied; stopped %lld ms after SIGTERM ", sent, cap.nparts,
	       (long long)took);

	/* again, with every part the first run left pending put back, the
	 * signal arriving while idle: the stop charges pending parts for a
	 * bounded time, and what it cannot charge stays held */
	nng_close(c);
	c = req_open();
	pid = rm_test_spawn(argv, log);
	CU_ASSERT_FATAL(pid > 0);
	for (rv = -1, t0 = mono_ms(); rv != RAMETR__ACK__STATUS__ACK_OK && mono_ms() - t0 < 20000;) {
		if (nng_dial(c, url, NULL, 0) != 0) {
			usleep(20000);
			continue;
		}
		rv = ask_env(c, &env);
	}
	CU_ASSERT_EQUAL(rv, RAMETR__ACK__STATUS__ACK_OK);
	if (rv != RAMETR__ACK__STATUS__ACK_OK)
		goto out;
	CU_ASSERT_PTR_NOT_NULL(strstr(rm_test_slurp(log), "restored "));
	took = stop_within(pid, log);
	pid = 0;
	printf("and %lld ms with the pending parts put back ", (long long)took);
out:
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fprintf(stderr, "%s\n", rm_test_slurp(log));
	}
	nng_close(c);
	col_enc_free(&enc);
	col_replay_capture_release(&cap);
}

#define FLOOD_CONNS 1500
#define FLOOD_STOP_MS 4000 /* the socket's close is waited for 2 s at most */

static void test_sigterm_after_flood(void)
{
	const char *dir = rm_test_tmpdir();
	char conf[300], db[300], url[320], log[300];
	const char *argv[] = { AGG_BIN, "--config", conf, "--db", db, "--listen", url, "--max-conns", "4000",
			       "--mem-bound", "17179869184", NULL };
	static const uint8_t junk[65536];
	unsigned port = rm_test_free_port(), i, open = 0;
	int fds[FLOOD_CONNS];
	struct rlimit rl;
	int64_t t0, took;
	pid_t pid;
	int rv;

	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < FLOOD_CONNS + 256) {
		rl.rlim_cur = rl.rlim_max < FLOOD_CONNS + 256 ? rl.rlim_max : FLOOD_CONNS + 256;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < FLOOD_CONNS + 256)
		RM_TEST_SKIP("open-file limit %lu is too low for %d connections", (unsigned long)rl.rlim_cur,
			     FLOOD_CONNS);
	snprintf(conf, sizeof(conf), "%s/flood.ini", dir);
	snprintf(db, sizeof(db), "%s/flood.db", dir);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%u", port);
	snprintf(log, sizeof(log), "%s/flood.log", dir);
	rm_test_write_file(conf, "[aggregator]\nhorizon = 1s\n");
	pid = rm_test_spawn(argv, log);
	CU_ASSERT_FATAL(pid > 0);
	for (t0 = mono_ms(); !strstr(rm_test_slurp(log), "listening on") && mono_ms() - t0 < 20000;)
		usleep(20000);
	/* each: a REQ peer's SP header, a frame of just under 2 MiB, 64 KiB of it */
	for (i = 0; i < FLOOD_CONNS; i++) {
		static const uint8_t h[16] = { 0, 'S', 'P', 0, 0x00, 0x30, 0, 0, 0, 0, 0, 0, 0, 0x1f, 0xff, 0xc0 };
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&a, sizeof(a)) != 0 ||
		    send(fds[i], h, sizeof(h), MSG_NOSIGNAL) != (ssize_t)sizeof(h)) {
			if (fds[i] >= 0)
				close(fds[i]);
			fds[i] = -1;
			continue;
		}
		fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
		if (send(fds[i], junk, sizeof(junk), MSG_NOSIGNAL) < 0)
			CU_ASSERT(errno == EAGAIN || errno == EWOULDBLOCK);
		open++;
	}
	CU_ASSERT_EQUAL(open, FLOOD_CONNS);
	sleep(2); /* the aggregator takes them all */
	t0 = mono_ms();
	CU_ASSERT_EQUAL(kill(pid, SIGTERM), 0);
	rv = rm_test_wait(pid, 30000);
	took = mono_ms() - t0;
	printf("stopped %lld ms after SIGTERM with %u connections open ", (long long)took, open);
	CU_ASSERT_EQUAL(rv, 0);
	CU_ASSERT(took <= FLOOD_STOP_MS);
	if (rv != 0 || took > FLOOD_STOP_MS)
		fprintf(stderr, "%s\n", rm_test_slurp(log));
	for (i = 0; i < FLOOD_CONNS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static CU_TestInfo cases[] = {
	{ "SIGTERM under a heavy stream stops the aggregator within a second", test_sigterm_under_load },
	{ "SIGTERM with 1500 connections midway through a frame stops it within seconds", test_sigterm_after_flood },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_stop", cases)
