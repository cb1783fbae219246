/*
 * integ_hostile_test.c - the real aggregator under hostile peers: while a
 * collector's sender (the real col_sender, over a real nng socket) submits a
 * batch every 100 ms, RM_HOSTILE_CONNS (default 2000) raw TCP peers connect
 * at once and send partial frames: 16 of them declare 64 MiB and push up to
 * 60 MiB, the others declare just under the aggregator's largest message and
 * push most of it, then all hold their connections. The aggregator's peak
 * resident memory must stay under its bound (256 MiB, the default), the
 * collector must be acknowledged in every second of the flood, the extra
 * connections must be refused and the holders closed at the idle timeout,
 * logged and counted; afterwards a real rametr-collector delivers, and the
 * aggregator stops within seconds of SIGTERM.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rm_test.h"
#include "rm_err.h"
#include "col_sender.h"

#define BOUND_MIB 256      /* the aggregator's default --mem-bound */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_LIMIT_MIB (2 * BOUND_MIB) /* ASan's shadow memory and quarantine come on top */
#else
#define RSS_LIMIT_MIB BOUND_MIB
#endif
#define BIG 16             /* peers declaring 64 MiB frames */
#define IDLE_S 6           /* --idle-timeout of the aggregator here */
#define FLOOD_S 12         /* seconds the collector is watched during the flood */
#define STOP_MS 5000       /* SIGTERM to exit after the flood (the socket's close is waited 2 s at most) */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Peak resident memory of pid in KiB (VmHWM), 0 if unknown. */
static unsigned long peak_kib(pid_t pid)
{
	char path[64], line[256];
	unsigned long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %lu kB", &v) == 1)
			break;
	fclose(f);
	return v;
}

struct peer {
	int fd;
	uint64_t want, sent; /* payload bytes to push, pushed */
};

/* Connects to port and sends the SP header of a req0 peer and a frame header. */
static int peer_open(struct peer *p, unsigned port, uint64_t declared, uint64_t push)
{
	static const uint8_t sp[8] = { 0, 'S', 'P', 0, 0x00, 0x30, 0, 0 };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	uint8_t h[16];
	int i;

	p->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->fd < 0)
		return -1;
	if (connect(p->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(p->fd);
		p->fd = -1;
		return -1;
	}
	memcpy(h, sp, 8);
	for (i = 0; i < 8; i++)
		h[8 + i] = (uint8_t)(declared >> (56 - 8 * i));
	if (write(p->fd, h, sizeof(h)) != (ssize_t)sizeof(h)) {
		close(p->fd);
		p->fd = -1;
		return -1;
	}
	fcntl(p->fd, F_SETFL, fcntl(p->fd, F_GETFL) | O_NONBLOCK);
	p->want = push;
	p->sent = 0;
	return 0;
}

/* Pushes what the socket takes; returns bytes written this round. */
static uint64_t peer_push(struct peer *p)
{
	static uint8_t junk[65536];
	uint64_t n = 0;
	ssize_t w;

	while (p->fd >= 0 && p->sent < p->want) {
		size_t chunk = p->want - p->sent < sizeof(junk) ? (size_t)(p->want - p->sent) : sizeof(junk);

		w = send(p->fd, junk, chunk, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				p->want = p->sent; /* closed by the aggregator */
			break;
		}
		p->sent += (uint64_t)w;
		n += (uint64_t)w;
	}
	return n;
}

static uint64_t acked(struct col_sender *s)
{
	struct col_sender_stats st;

	col_sender_stats(s, &st);
	return st.batches_acked;
}

/* Submits one batch of one window's totals. */
static void submit(struct col_sender *s, uint64_t win)
{
	struct rm_totals w;

	memset(&w, 0, sizeof(w));
	w.win = win;
	w.busy_ns = 1000000;
	w.unseg_cpu_ns = 1000000;
	w.capacity_ns = 1000000000;
	CU_ASSERT_EQUAL(col_sender_submit(s, NULL, 0, &w, 1), RM_OK);
}

static void test_flood(void)
{
	const char *env = getenv("RM_HOSTILE_CONNS");
	unsigned nconns = env ? (unsigned)atoi(env) : 2000, port = rm_test_free_port(), i, opened = 0;
	char dir[256], conf[300], db[300], url[300], log[300], spool[300], events[300], col_log[300];
	char idle[16], col_spool[300];
	struct col_sender_cfg cfg;
	struct col_sender *s = NULL;
	struct peer *peers;
	struct rlimit rl;
	uint64_t t0, next, last, a0, a1, pushed = 0, win = (uint64_t)time(NULL);
	unsigned long peak = 0, base, k;
	int stalled = 0, sec = 0;
	const char *text;
	pid_t agg, col;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s", rm_test_tmpdir());
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < nconns + BIG + 256) {
		rl.rlim_cur = rl.rlim_max < nconns + BIG + 256 ? rl.rlim_max : nconns + BIG + 256;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < nconns + BIG + 64)
		RM_TEST_SKIP("open-file limit %lu is too low for %u connections",
			     (unsigned long)rl.rlim_cur, nconns);
	snprintf(conf, sizeof(conf), "%s/agg.ini", dir);
	f = fopen(conf, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "[aggregator]\nhorizon = 1s\n");
	fclose(f);
	snprintf(db, sizeof(db), "%s/rametr.db", dir);
	snprintf(log, sizeof(log), "%s/aggregator.log", dir);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%u", port);
	snprintf(idle, sizeof(idle), "%d", IDLE_S);
	{
		const char *argv[] = { AGG_BIN, "--config", conf, "--db", db, "--listen", url,
				       "--idle-timeout", idle, NULL };

		agg = rm_test_spawn(argv, log);
	}
	CU_ASSERT_FATAL(agg > 0);

	/* the collector's sender, connected and acknowledged before the flood */
	snprintf(spool, sizeof(spool), "%s/spool-n1", dir);
	memset(&cfg, 0, sizeof(cfg));
	cfg.url = url;
	cfg.node = "n1";
	cfg.backend = "replay";
	cfg.hostname = "n1";
	cfg.window_ns = 1000000000;
	cfg.ncpu = 1;
	cfg.spool_path = spool;
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&s, &cfg), RM_OK);
	submit(s, win++);
	CU_ASSERT_EQUAL(col_sender_flush(s, 10000), RM_OK);
	base = peak_kib(agg);

	/* the flood: big frames first (they find free slots), then the rest */
	peers = calloc(nconns + BIG, sizeof(*peers));
	CU_ASSERT_PTR_NOT_NULL_FATAL(peers);
	for (i = 0; i < nconns + BIG; i++) {
		int big = i < BIG;

		if (peer_open(&peers[i], port, big ? 64ull << 20 : (2ull << 20) - 64,
			      big ? 60ull << 20 : (2ull << 20) - 4096) == 0)
			opened++;
	}
	fprintf(stderr, "%u of %u hostile connections made\n", opened, nconns + BIG);
	t0 = now_ms();
	next = t0;
	last = t0;
	a0 = acked(s);
	while (now_ms() - t0 < (uint64_t)FLOOD_S * 1000) {
		for (i = 0; i < nconns + BIG; i++)
			pushed += peer_push(&peers[i]);
		if (now_ms() >= next) {
			submit(s, win++);
			next += 100;
		}
		if (now_ms() - last >= 1000) {
			a1 = acked(s);
			if (a1 == a0)
				stalled++;
			fprintf(stderr, "second %d: %llu batches acknowledged, aggregator peak %lu KiB\n",
				++sec, (unsigned long long)(a1 - a0), peak_kib(agg));
			a0 = a1;
			last = now_ms();
		}
		k = peak_kib(agg);
		if (k > peak)
			peak = k;
		usleep(20000);
	}
	CU_ASSERT_EQUAL(col_sender_flush(s, 10000), RM_OK);
	fprintf(stderr, "pushed %llu MiB of partial frames; aggregator peak %lu KiB (before: %lu KiB), "
		"bound %d MiB; seconds without an acknowledgement: %d\n",
		(unsigned long long)(pushed >> 20), peak, base, BOUND_MIB, stalled);
	CU_ASSERT(peak > 0);
	CU_ASSERT(peak < (unsigned long)RSS_LIMIT_MIB * 1024);
	CU_ASSERT_EQUAL(stalled, 0);
	col_sender_close(s);

	/* the holders are closed at the idle timeout; then a real collector delivers */
	sleep(IDLE_S + 2);
	snprintf(events, sizeof(events), "%s/n2.events", dir);
	snprintf(col_spool, sizeof(col_spool), "%s/spool-n2", dir);
	snprintf(col_log, sizeof(col_log), "%s/collector-n2.log", dir);
	f = fopen(events, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "rametr-events 1 window_ns=1000000000 offset_ns=1700000000000000000 ncpu=1\n"
		   "1000 0 switch prev=0 prev_state=R next=901 next_pid=900\n"
		   "1001 0 recv tid=901 pid=900 comm=srv sock=10 fam=4 laddr=127.0.0.1:7000 "
		   "raddr=127.0.0.2:40000 bytes=64\n"
		   "2001 0 send tid=901 pid=900 sock=10 fam=4 laddr=127.0.0.1:7000 "
		   "raddr=127.0.0.2:40000 bytes=512\n"
		   "2002 0 switch prev=901 prev_state=S next=0\n");
	CU_ASSERT_EQUAL(fclose(f), 0);
	{
		const char *argv[] = { COL_BIN, "--aggregator", url, "--node", "n2", "--backend", "replay",
				       "--events", events, "--spool", col_spool, NULL };

		col = rm_test_spawn(argv, col_log);
	}
	i = (unsigned)rm_test_wait(col, 30000);
	CU_ASSERT_EQUAL(i, 0);
	if (i != 0)
		fprintf(stderr, "collector ended with status %d; its log:\n%s\n", (int)i, rm_test_slurp(col_log));
	for (i = 0; i < nconns + BIG; i++)
		if (peers[i].fd >= 0)
			close(peers[i].fd);
	free(peers);
	t0 = now_ms();
	kill(agg, SIGTERM);
	i = (unsigned)rm_test_wait(agg, 30000);
	fprintf(stderr, "aggregator stopped %llu ms after SIGTERM\n", (unsigned long long)(now_ms() - t0));
	CU_ASSERT_EQUAL(i, 0);
	CU_ASSERT(now_ms() - t0 <= STOP_MS);
	if (i != 0)
		fprintf(stderr, "aggregator ended with status %d; its log:\n%s\n", (int)i,
			rm_test_slurp(log));
	text = rm_test_slurp(log);
	CU_ASSERT(strstr(text, "refused a connection from") != NULL);
	/* closed holders: logged, or counted among the lines the rate limit held back */
	CU_ASSERT(strstr(text, "no complete message in") != NULL ||
		  strstr(text, "more closed connections not logged") != NULL);
	CU_ASSERT(strstr(text, "more refused connections not logged") != NULL);
	{
		const char *p = strstr(text, "transport: ");
		unsigned long long conns = 0, refused = 0, unver = 0, idle_closed = 0;

		CU_ASSERT_PTR_NOT_NULL_FATAL(p);
		CU_ASSERT_EQUAL(sscanf(p, "transport: %llu connections (%llu refused at the limit, %llu "
				       "without a verified certificate, %llu closed idle)",
				       &conns, &refused, &unver, &idle_closed), 4);
		fprintf(stderr, "aggregator: %llu connections taken, %llu refused at the limit, %llu "
			"closed idle\n", conns, refused, idle_closed);
		/* every hostile connection, the sender's and the collector's (which may
		 * have had to dial again): taken or refused */
		CU_ASSERT(conns + refused >= opened + 2);
		/* never more than the cap at once: a slot is taken again only after a
		 * connection was closed (idle, or the sender's and collector's own) */
		CU_ASSERT(conns <= 64 + idle_closed + 4);
		CU_ASSERT(refused + idle_closed >= opened - 64 - BIG);
		CU_ASSERT(idle_closed >= 1);
	}
}

static CU_TestInfo cases[] = {
	{ "hostile peers: memory bounded, the collector acknowledged throughout", test_flood },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("integ_hostile", cases)
