/*
 * tb_tier_e2e_test.c - the two-tier service as real processes on loopback:
 * tb-back and tb-front on free ports of 127.0.0.1 and three tb-load GET
 * clients (c1, c2, c3 from 127.0.0.2..4) in each variant (a connection per
 * miss, a shared pool, a worker pool), whose counts must agree with both
 * tiers' ground truth and the front-end's cache statistics; the front-end
 * facing malformed, pipelined and over-long lines, and a dead back-end;
 * tb-load rejecting replies with the wrong content; tb-back --http;
 * argument checking.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rm_err.h"
#include "rm_test.h"
#include "tb_proto.h"
#include "tb_testutil.h"
#include "tb_tier.h"
#include "tb_truth.h"
#include "banned.h"

#define tbt_tmp(name) tbt_path(rm_test_tmpdir(), name)

/*
 * Spawns argv (a server printing "listening 127.0.0.1:PORT" first) and
 * stores the port. Returns the pid or -1.
 */
static pid_t start_listener(char *const argv[], int *port)
{
	char line[128];
	size_t len = 0;
	int rd = -1;
	pid_t pid = tbt_spawn(argv, NULL, &rd);

	if (pid < 0)
		return -1;
	while (len + 1 < sizeof(line)) {
		struct pollfd pfd = { .fd = rd, .events = POLLIN };

		if (poll(&pfd, 1, 5000) <= 0 || read(rd, line + len, 1) != 1)
			break;
		if (line[len++] == '\n')
			break;
	}
	line[len] = '\0';
	/* keep the pipe's read end open: the server may print more at exit */
	if (sscanf(line, "listening 127.0.0.1:%d", port) != 1 || *port <= 0) {
		fprintf(stderr, "'%s' did not report its port (got '%s')\n", argv[0], line);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(rd);
		return -1;
	}
	close(rd);
	return pid;
}

static pid_t start_back(const char *truth, int *port)
{
	char *argv[] = { TB_BACK_BIN, "--listen", "127.0.0.1:0", "--truth", (char *)truth,
			 "--cpu-us-base", "100", "--cpu-us-per-kb", "50", NULL };

	return start_listener(argv, port);
}

static pid_t start_front(int back_port, const char *mode, const char *workers, const char *truth,
			 const char *stats, int *port)
{
	char backend[64];
	char *argv[] = { TB_FRONT_BIN, "--listen", "127.0.0.1:0", "--backend", backend, "--truth", (char *)truth,
			 "--stats", (char *)stats, "--backend-mode", (char *)mode, "--workers", (char *)workers,
			 NULL };

	snprintf(backend, sizeof(backend), "127.0.0.1:%d", back_port);
	return start_listener(argv, port);
}

/* SIGTERM and wait: the exit code (0 expected). */
static int stop(pid_t pid)
{
	if (pid <= 0)
		return -1;
	kill(pid, SIGTERM);
	return tbt_wait(pid, 20000);
}

struct sum {
	char ce[64];
	unsigned long long sent, completed, errors, queued;
};

static int parse_sum(const char *path, struct sum *s)
{
	char *txt = tbt_slurp(path);
	int n;

	memset(s, 0, sizeof(*s));
	if (!txt)
		return -1;
	n = sscanf(txt, "ce=%63s sent=%llu completed=%llu errors=%llu queued=%llu", s->ce, &s->sent,
		   &s->completed, &s->errors, &s->queued);
	if (n != 5)
		fprintf(stderr, "unexpected summary in '%s': '%s'\n", path, txt);
	free(txt);
	return n == 5 ? 0 : -1;
}

/* Totals of one tb-load --out file of the get protocol. */
struct reqs {
	uint64_t n, cpu_us, line_bytes, reply_bytes;
};

static int read_reqs(const char *path, const char *ce, struct reqs *r)
{
	FILE *f = fopen(path, "r");
	char line[256];
	int first = 1;

	memset(r, 0, sizeof(*r));
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long send, lat;
		unsigned cpu, addr, kb;
		char req[128];

		if (first) {
			first = 0;
			if (strcmp(line, "send_unix_ns,latency_ns,cpu_us,addr,size_kb\n") != 0)
				break;
			continue;
		}
		if (sscanf(line, "%llu,%llu,%u,%u,%u", &send, &lat, &cpu, &addr, &kb) != 5)
			break;
		r->n++;
		r->cpu_us += cpu;
		r->line_bytes += (uint64_t)snprintf(req, sizeof(req), "GET %s %u %u %u\n", ce, addr, kb, cpu);
		r->reply_bytes += (uint64_t)kb * 1024;
	}
	fclose(f);
	return first ? -1 : 0;
}

/* Row ce of a truth file, or zeros. */
static struct tb_truth_row truth_of(const struct tb_truth_row *rows, size_t n, const char *ce)
{
	struct tb_truth_row z;
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(rows[i].ce, ce) == 0)
			return rows[i];
	memset(&z, 0, sizeof(z));
	return z;
}

struct fstat_row {
	unsigned long long requests, hits, misses, errors;
};

/* The front-end's --stats row of ce; -1 if absent. */
static int stats_of(const char *path, const char *ce, struct fstat_row *s)
{
	char *txt = tbt_slurp(path), *p;
	char key[80];
	int rv = -1;

	memset(s, 0, sizeof(*s));
	if (!txt)
		return -1;
	if (strncmp(txt, "ce,requests,hits,misses,backend_errors\n", 39) != 0) {
		free(txt);
		return -1;
	}
	snprintf(key, sizeof(key), "\n%s,", ce);
	p = strstr(txt, key);
	if (p && sscanf(p + strlen(key), "%llu,%llu,%llu,%llu", &s->requests, &s->hits, &s->misses,
			&s->errors) == 4)
		rv = 0;
	free(txt);
	return rv;
}

/* wfrac: tb-load's --write-frac; "1" makes every request a PUT (write-through). */
static void run_variant(const char *name, const char *mode, const char *workers, const char *wfrac)
{
	int all_writes = strcmp(wfrac, "1") == 0;
	static const char *ces[] = { "c1", "c2", "c3" };
	static const char *rates[] = { "30", "60", "90" };
	static const char *binds[] = { "127.0.0.2", "127.0.0.3", "127.0.0.4" };
	char tfront[300], tback[300], stats[300], server[64];
	struct tb_truth_row *fr = NULL, *br = NULL;
	size_t nf = 0, nb = 0, i;
	uint64_t hits = 0, misses = 0;
	pid_t back, front, loads[3];
	int bport = 0, fport = 0;

	fprintf(stderr, "variant %s: --backend-mode %s --workers %s\n", name, mode, workers);
	snprintf(tfront, sizeof(tfront), "%s", tbt_tmp("front.csv"));
	snprintf(tback, sizeof(tback), "%s", tbt_tmp("back.csv"));
	snprintf(stats, sizeof(stats), "%s", tbt_tmp("stats.csv"));
	back = start_back(tback, &bport);
	CU_ASSERT_FATAL(back > 0);
	front = start_front(bport, mode, workers, tfront, stats, &fport);
	if (front <= 0) {
		stop(back);
		CU_FAIL_FATAL("tb-front did not start");
	}
	snprintf(server, sizeof(server), "127.0.0.1:%d", fport);
	for (i = 0; i < 3; i++) {
		char base[32], out[300], sumf[310];
		char *argv[] = { TB_LOAD_BIN, "--proto", "get", "--server", server, "--bind", (char *)binds[i],
				 "--ce", (char *)ces[i], "--rate", (char *)rates[i], "--duration", "2",
				 "--cpu-us", "200:600", "--addr-base", base, "--addr-range", "1000", "--hot", "6",
				 "--hot-frac", "0.6", "--size-kb", "1:16", "--write-frac", (char *)wfrac,
				 "--out", out, NULL };

		snprintf(base, sizeof(base), "%zu", (i + 1) * 100000);
		snprintf(out, sizeof(out), "%s", tbt_path(rm_test_tmpdir(), ces[i]));
		snprintf(sumf, sizeof(sumf), "%s.sum", out);
		loads[i] = tbt_spawn(argv, sumf, NULL);
		CU_ASSERT(loads[i] > 0);
	}
	for (i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(tbt_wait(loads[i], 60000), 0);
	CU_ASSERT_EQUAL(stop(front), 0);
	CU_ASSERT_EQUAL(stop(back), 0);

	CU_ASSERT_EQUAL_FATAL(tb_truth_load(tfront, &fr, &nf), RM_OK);
	CU_ASSERT_EQUAL_FATAL(tb_truth_load(tback, &br, &nb), RM_OK);
	CU_ASSERT_EQUAL(nf, 3);
	for (i = 0; i < 3; i++) {
		char out[300], sumf[310];
		struct tb_truth_row f = truth_of(fr, nf, ces[i]), b = truth_of(br, nb, ces[i]);
		struct fstat_row st;
		struct reqs r;
		struct sum s;

		snprintf(out, sizeof(out), "%s", tbt_path(rm_test_tmpdir(), ces[i]));
		snprintf(sumf, sizeof(sumf), "%s.sum", out);
		CU_ASSERT_EQUAL_FATAL(parse_sum(sumf, &s), 0);
		CU_ASSERT_EQUAL_FATAL(read_reqs(out, ces[i], &r), 0);
		CU_ASSERT_EQUAL_FATAL(stats_of(stats, ces[i], &st), 0);
		fprintf(stderr, "  %s: sent %llu completed %llu; front %" PRIu64 " req %.3f s; hits %llu misses %llu; "
			"back %" PRIu64 " req %.3f s\n", ces[i], s.sent, s.completed, f.requests,
			(double)f.cpu_ns / 1e9, st.hits, st.misses, b.requests, (double)b.cpu_ns / 1e9);
		/* the loader: everything it sent came back, checked */
		CU_ASSERT_EQUAL(s.errors, 0);
		CU_ASSERT_EQUAL(s.completed, s.sent);
		CU_ASSERT_EQUAL(r.n, s.completed);
		CU_ASSERT(s.sent >= 2 * (uint64_t)atoi(rates[i]) - 1);
		/* the front-end saw exactly those requests, bytes and CPU */
		CU_ASSERT_EQUAL(f.requests, s.completed);
		CU_ASSERT_EQUAL(f.rx_bytes, r.line_bytes);
		CU_ASSERT_EQUAL(f.tx_bytes, r.reply_bytes);
		CU_ASSERT(f.cpu_ns >= r.cpu_us * 1000);
		CU_ASSERT(f.cpu_ns <= 2 * r.cpu_us * 1000 + r.n * 2000000);
		/* each request hit or missed; each miss reached the back-end once */
		CU_ASSERT_EQUAL(st.requests, f.requests);
		CU_ASSERT_EQUAL(st.hits + st.misses, st.requests);
		CU_ASSERT_EQUAL(st.errors, 0);
		CU_ASSERT_EQUAL(b.requests, st.misses);
		/* the back-end burned at least 100 + 50 us per KB (1 KB or more) per fetch,
		 * twice the per-KB part per store; a PUT never hits */
		CU_ASSERT(b.cpu_ns >= b.requests * (all_writes ? 200000 : 150000));
		if (all_writes)
			CU_ASSERT_EQUAL(st.hits, 0);
		CU_ASSERT(b.tx_bytes >= b.requests * 1024 && b.tx_bytes <= b.requests * 16 * 1024);
		hits += st.hits;
		misses += st.misses;
	}
	/* hot sets of 6 objects per CE in 300 KB: part of the requests hit */
	fprintf(stderr, "  hit rate %.3f\n", hits + misses ? (double)hits / (double)(hits + misses) : 0.0);
	if (!all_writes) {
		CU_ASSERT(hits > (hits + misses) / 10);
		CU_ASSERT(misses > (hits + misses) / 10);
	}
	free(fr);
	free(br);
}

static void test_variant_a(void)
{
	run_variant("a", "per-request", "0", "0");
}

static void test_variant_b(void)
{
	run_variant("b", "pool:2", "0", "0");
}

/* Every request a PUT: written through to the back-end, never served from the cache. */
static void test_writes(void)
{
	run_variant("b, writes only", "pool:2", "0", "1");
}

static void test_variant_c(void)
{
	run_variant("c", "pool:2", "3", "0");
}

/* One shared back-end connection, up to 4 requests in flight on it (tb_mux.h); reads and writes. */
static void test_variant_mux(void)
{
	run_variant("b, one multiplexed connection", "mux:4", "0", "0");
	run_variant("b, one multiplexed connection, writes only", "mux:4", "0", "1");
}

/* Connects to 127.0.0.1:port; the socket or -1. */
static int dial(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Reads exactly n bytes within 10 s; 0 or -1. */
static int read_n(int fd, char *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t k;

		if (poll(&pfd, 1, 10000) <= 0)
			return -1;
		k = recv(fd, buf + got, n - got, 0);
		if (k <= 0)
			return -1;
		got += (size_t)k;
	}
	return 0;
}

static int send_str(int fd, const char *s)
{
	return send(fd, s, strlen(s), MSG_NOSIGNAL) == (ssize_t)strlen(s) ? 0 : -1;
}

/* Expects the line want (with '\n') next on fd. */
static void expect_line(int fd, const char *want)
{
	char buf[256];

	CU_ASSERT_FATAL(strlen(want) < sizeof(buf));
	CU_ASSERT_EQUAL_FATAL(read_n(fd, buf, strlen(want)), 0);
	buf[strlen(want)] = '\0';
	if (strcmp(buf, want) != 0)
		fprintf(stderr, "got '%s', want '%s'\n", buf, want);
	CU_ASSERT_STRING_EQUAL(buf, want);
}

/* Expects the object (addr, kb) next on fd. */
static void expect_obj(int fd, uint32_t addr, uint32_t kb)
{
	char *buf = malloc(kb * 1024);

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	CU_ASSERT_EQUAL(read_n(fd, buf, kb * 1024), 0);
	CU_ASSERT_EQUAL(tb_tier_check_reply(buf, kb * 1024, addr, kb), RM_OK);
	free(buf);
}

static void check_front_lines(const char *workers)
{
	char long_line[400];
	int bport = 0, fport = 0, fd;
	pid_t back, front;

	back = start_back(tbt_tmp("lback.csv"), &bport);
	CU_ASSERT_FATAL(back > 0);
	front = start_front(bport, "pool:1", workers, tbt_tmp("lfront.csv"), tbt_tmp("lstats.csv"), &fport);
	if (front <= 0) {
		stop(back);
		CU_FAIL_FATAL("tb-front did not start");
	}
	fd = dial(fport);
	CU_ASSERT_FATAL(fd >= 0);
	/* a malformed line gets a reason, and the connection stays usable */
	CU_ASSERT_EQUAL(send_str(fd, "GET c1 1 0 5\n"), 0);
	expect_line(fd, "ERR size_kb out of range\n");
	CU_ASSERT_EQUAL(send_str(fd, "REQ c1 100 100\n"), 0);
	expect_line(fd, "ERR unknown command\n");
	CU_ASSERT_EQUAL(send_str(fd, "GET c1 42 2 100\n"), 0);
	expect_obj(fd, 42, 2);
	/* pipelined: two requests in one write come back in order (a miss, then a hit) */
	CU_ASSERT_EQUAL(send_str(fd, "GET c1 43 3 100\nGET c1 42 2 100\n"), 0);
	expect_obj(fd, 43, 3);
	expect_obj(fd, 42, 2);
	/* an over-long line gets one error; the next line is served */
	memset(long_line, 'x', sizeof(long_line) - 1);
	long_line[sizeof(long_line) - 1] = '\0';
	CU_ASSERT_EQUAL(send_str(fd, long_line), 0);
	CU_ASSERT_EQUAL(send_str(fd, "\nGET c2 44 1 0\n"), 0);
	expect_line(fd, "ERR line too long\n");
	expect_obj(fd, 44, 1);
	close(fd);
	/* a client that goes away mid-request does not hurt the others */
	fd = dial(fport);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(send_str(fd, "GET c3 45 8 20000\n"), 0);
	close(fd);
	fd = dial(fport);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(send_str(fd, "GET c3 46 1 0\n"), 0);
	expect_obj(fd, 46, 1);
	close(fd);
	CU_ASSERT_EQUAL(stop(front), 0);
	CU_ASSERT_EQUAL(stop(back), 0);
	{
		struct fstat_row st;

		CU_ASSERT_EQUAL(stats_of(tbt_tmp("lstats.csv"), "c1", &st), 0);
		CU_ASSERT_EQUAL(st.requests, 3);
		CU_ASSERT_EQUAL(st.hits, 1);
		CU_ASSERT_EQUAL(st.misses, 2);
	}
}

static void test_front_lines(void)
{
	check_front_lines("0");
}

static void test_front_lines_workers(void)
{
	check_front_lines("2");
}

/* A free TCP port with nothing listening on it (a dead back-end). */
static void test_dead_backend(void)
{
	static const char *modes[] = { "per-request", "pool:2", "mux:2" };
	size_t m;

	for (m = 0; m < 3; m++) {
		struct fstat_row st;
		int fport = 0, fd;
		pid_t front = start_front((int)rm_test_free_port(), modes[m], "0", tbt_tmp("dfront.csv"),
					  tbt_tmp("dstats.csv"), &fport);

		CU_ASSERT_FATAL(front > 0);
		fd = dial(fport);
		CU_ASSERT_FATAL(fd >= 0);
		CU_ASSERT_EQUAL(send_str(fd, "GET c1 7 1 10\nGET c1 7 1 10\n"), 0);
		expect_line(fd, "ERR backend unavailable\n");
		expect_line(fd, "ERR backend unavailable\n"); /* nothing was cached */
		close(fd);
		CU_ASSERT_EQUAL(stop(front), 0);
		CU_ASSERT_EQUAL(stats_of(tbt_tmp("dstats.csv"), "c1", &st), 0);
		CU_ASSERT_EQUAL(st.requests, 2);
		CU_ASSERT_EQUAL(st.misses, 2);
		CU_ASSERT_EQUAL(st.errors, 2);
	}
}

/* Is there something to read on fd within ms? */
static int readable(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, ms) == 1;
}

static void test_back_conn_limit(void)
{
	char *argv[] = { TB_BACK_BIN, "--listen", "127.0.0.1:0", "--truth", (char *)tbt_tmp("cback.csv"),
			 "--max-conns", "2", "--cpu-us-base", "0", "--cpu-us-per-kb", "0", NULL };
	struct tb_truth_row *rows = NULL;
	size_t n = 0;
	int port = 0, a, b, c, d;
	pid_t back = start_listener(argv, &port);

	CU_ASSERT_FATAL(back > 0);
	/* two connections take both threads; a third waits in the backlog */
	a = dial(port);
	b = dial(port);
	c = dial(port);
	CU_ASSERT_FATAL(a >= 0 && b >= 0 && c >= 0);
	CU_ASSERT_EQUAL(send_str(a, "FETCH c1 1 1\n"), 0);
	expect_obj(a, 1, 1);
	CU_ASSERT_EQUAL(send_str(b, "FETCH c2 2 2\n"), 0);
	expect_obj(b, 2, 2);
	CU_ASSERT_EQUAL(send_str(c, "FETCH c3 3 1\n"), 0);
	CU_ASSERT(!readable(c, 300));
	/* one closes: its thread takes the waiting connection */
	close(a);
	CU_ASSERT(readable(c, 5000));
	expect_obj(c, 3, 1);
	close(c);
	/* a connection per request, many times over, on the kept threads (b holds one) */
	for (d = 0; d < 50; d++) {
		int fd = dial(port);

		CU_ASSERT_FATAL(fd >= 0);
		CU_ASSERT_EQUAL(send_str(fd, "FETCH c1 9 1\n"), 0);
		expect_obj(fd, 9, 1);
		close(fd);
	}
	/* malformed */
	CU_ASSERT_EQUAL(send_str(b, "FETCH c2 2\n"), 0);
	expect_line(b, "ERR missing size_kb\n");
	CU_ASSERT_EQUAL(send_str(b, "GET c2 2 2 2\n"), 0);
	expect_line(b, "ERR unknown command\n");
	/* stopping with connections open */
	CU_ASSERT_EQUAL(stop(back), 0);
	close(b);
	CU_ASSERT_EQUAL_FATAL(tb_truth_load(tbt_tmp("cback.csv"), &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 3);
	if (n == 3) {
		CU_ASSERT_STRING_EQUAL(rows[0].ce, "c1");
		CU_ASSERT_EQUAL(rows[0].requests, 51);
		CU_ASSERT_EQUAL(rows[0].tx_bytes, 51 * 1024);
		CU_ASSERT_EQUAL(rows[1].requests, 1);
		CU_ASSERT_EQUAL(rows[1].rx_bytes, strlen("FETCH c2 2 2\n"));
		CU_ASSERT_EQUAL(rows[2].requests, 1);
	}
	free(rows);
}

/*
 * tb-back --http: two requests sent at once on one persistent connection,
 * each answered with a 200 whose body is the object; a request that is no
 * GET of /<ce>/<addr>/<size_kb> ends the connection; the truth counts each
 * request's bytes and the response's.
 */
static void test_back_http(void)
{
	static const char hdr1[] = "HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n";
	static const char hdr2[] = "HTTP/1.1 200 OK\r\nContent-Length: 2048\r\n\r\n";
	static const char req1[] = "GET /c1/5/1 HTTP/1.1\r\nHost: be\r\n\r\n";
	static const char req2[] = "GET /c2/6/2 HTTP/1.1\r\nHost: be\r\nX-A: b\r\n\r\n";
	char *argv[] = { TB_BACK_BIN, "--http", "--listen", "127.0.0.1:0", "--truth", (char *)tbt_tmp("hback.csv"),
			 "--cpu-us-base", "0", "--cpu-us-per-kb", "0", NULL };
	struct tb_truth_row *rows = NULL;
	char both[sizeof(req1) + sizeof(req2)], c;
	size_t n = 0;
	int port = 0, fd;
	pid_t back = start_listener(argv, &port);

	CU_ASSERT_FATAL(back > 0);
	fd = dial(port);
	CU_ASSERT_FATAL(fd >= 0);
	snprintf(both, sizeof(both), "%s%s", req1, req2);
	CU_ASSERT_EQUAL(send_str(fd, both), 0);
	expect_line(fd, hdr1);
	expect_obj(fd, 5, 1);
	expect_line(fd, hdr2);
	expect_obj(fd, 6, 2);
	CU_ASSERT_EQUAL(send_str(fd, "POST /c1/5/1 HTTP/1.1\r\n\r\n"), 0);
	CU_ASSERT(readable(fd, 5000));
	CU_ASSERT_EQUAL(recv(fd, &c, 1, 0), 0); /* closed */
	close(fd);
	CU_ASSERT_EQUAL(stop(back), 0);
	CU_ASSERT_EQUAL_FATAL(tb_truth_load(tbt_tmp("hback.csv"), &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 2);
	if (n == 2) {
		CU_ASSERT_STRING_EQUAL(rows[0].ce, "c1");
		CU_ASSERT_EQUAL(rows[0].requests, 1);
		CU_ASSERT_EQUAL(rows[0].rx_bytes, strlen(req1));
		CU_ASSERT_EQUAL(rows[0].tx_bytes, strlen(hdr1) + 1024);
		CU_ASSERT_STRING_EQUAL(rows[1].ce, "c2");
		CU_ASSERT_EQUAL(rows[1].requests, 1);
		CU_ASSERT_EQUAL(rows[1].rx_bytes, strlen(req2));
		CU_ASSERT_EQUAL(rows[1].tx_bytes, strlen(hdr2) + 2048);
	}
	free(rows);
}

/* A server that answers every line with a 1 KB reply of the wrong data. */
struct liar {
	int lfd;
	int served;
};

static void *liar_main(void *arg)
{
	struct liar *l = arg;
	char line[256], reply[1024];
	int fd;

	tb_tier_build_reply(reply, sizeof(reply), 0, 1);
	memset(reply + 8, '#', sizeof(reply) - 9);
	/* until the listening socket is shut down */
	while ((fd = accept(l->lfd, NULL, NULL)) >= 0) {
		while (recv(fd, line, sizeof(line), 0) > 0) {
			if (send(fd, reply, sizeof(reply), MSG_NOSIGNAL) != (ssize_t)sizeof(reply))
				break;
			l->served++;
		}
		close(fd);
	}
	return NULL;
}

static void test_load_checks_content(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct liar l = { .lfd = socket(AF_INET, SOCK_STREAM, 0) };
	char server[64];
	pthread_t th;
	struct sum s;
	char *argv[] = { TB_LOAD_BIN, "--proto", "get", "--server", server, "--ce", "c1", "--rate", "20",
			 "--duration", "0.2", "--size-kb", "1", "--conns", "1", NULL };

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CU_ASSERT_FATAL(l.lfd >= 0 && bind(l.lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
			listen(l.lfd, 4) == 0 && getsockname(l.lfd, (struct sockaddr *)&sa, &len) == 0);
	snprintf(server, sizeof(server), "127.0.0.1:%d", ntohs(sa.sin_port));
	CU_ASSERT_FATAL(pthread_create(&th, NULL, liar_main, &l) == 0);
	CU_ASSERT_EQUAL(tbt_run(argv, tbt_tmp("liar.sum"), 30000), 1);
	shutdown(l.lfd, SHUT_RDWR);
	close(l.lfd);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(parse_sum(tbt_tmp("liar.sum"), &s), 0);
	CU_ASSERT(s.sent >= 1);
	CU_ASSERT_EQUAL(s.completed, 0);
	CU_ASSERT_EQUAL(s.errors, s.sent);
	CU_ASSERT(l.served >= 1);
}

static void test_bad_arguments(void)
{
	static const char *front_bad[][12] = {
		{ "--bogus", NULL },
		{ "--listen", "127.0.0.1:0", "--truth", "/tmp/x", NULL },                     /* no backend */
		{ "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:1", NULL },              /* no truth */
		{ "--listen", "x", "--backend", "127.0.0.1:1", "--truth", "/tmp/x", NULL },
		{ "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:0", "--truth", "/tmp/x", NULL },
		{ "--backend-mode", "pool:0", NULL },
		{ "--backend-mode", "pool", NULL },
		{ "--backend-mode", "mux:0", NULL },
		{ "--backend-mode", "mux:1025", NULL },
		{ "--backend-mode", "sometimes", NULL },
		{ "--workers", "257", NULL },
		{ "--cache-kb", "0", NULL },
		{ "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:1", "--truth", "/tmp/x", "extra", NULL },
	};
	static const char *back_bad[][8] = {
		{ "--bogus", NULL },
		{ "--listen", "127.0.0.1:0", NULL },
		{ "--truth", "/tmp/x", NULL },
		{ "--cpu-us-base", "1000001", NULL },
		{ "--cpu-us-per-kb", "x", NULL },
		{ "--max-conns", "0", NULL },
	};
	static const char *load_bad[][4] = {
		{ "--proto", "http", NULL },
		{ "--size-kb", "0:4", NULL },
		{ "--size-kb", "8:4", NULL },
		{ "--size-kb", "1025", NULL },
		{ "--hot-frac", "1.5", NULL },
		{ "--hot", "20", NULL },                 /* more than --addr-range 10 */
		{ "--addr-base", "4294967295", NULL },   /* range goes past the last address */
	};
	size_t i, j;

	for (i = 0; i < sizeof(front_bad) / sizeof(front_bad[0]); i++) {
		char *argv[16] = { TB_FRONT_BIN };

		for (j = 0; front_bad[i][j]; j++)
			argv[j + 1] = (char *)front_bad[i][j];
		CU_ASSERT_EQUAL(tbt_run(argv, "/dev/null", 10000), 2);
	}
	for (i = 0; i < sizeof(back_bad) / sizeof(back_bad[0]); i++) {
		char *argv[12] = { TB_BACK_BIN };

		for (j = 0; back_bad[i][j]; j++)
			argv[j + 1] = (char *)back_bad[i][j];
		CU_ASSERT_EQUAL(tbt_run(argv, "/dev/null", 10000), 2);
	}
	for (i = 0; i < sizeof(load_bad) / sizeof(load_bad[0]); i++) {
		char *argv[20] = { TB_LOAD_BIN, "--server", "127.0.0.1:1", "--ce", "c", "--rate", "1",
				   "--duration", "1", "--proto", "get", "--addr-range", "10" };

		for (j = 0; load_bad[i][j]; j++)
			argv[13 + j] = (char *)load_bad[i][j];
		CU_ASSERT_EQUAL(tbt_run(argv, "/dev/null", 10000), 2);
	}
	{
		char *help[] = { TB_FRONT_BIN, "--help", NULL };
		char *bhelp[] = { TB_BACK_BIN, "--help", NULL };

		CU_ASSERT_EQUAL(tbt_run(help, "/dev/null", 10000), 0);
		CU_ASSERT_EQUAL(tbt_run(bhelp, "/dev/null", 10000), 0);
	}
}

static CU_TestInfo cases[] = {
	{ "variant a (connection per miss) agrees with both truths", test_variant_a },
	{ "variant b (shared pool) agrees with both truths", test_variant_b },
	{ "PUTs are written through and never hit", test_writes },
	{ "variant c (worker pool) agrees with both truths", test_variant_c },
	{ "one multiplexed back-end connection agrees with both truths", test_variant_mux },
	{ "front-end answers bad, pipelined and long lines in order", test_front_lines },
	{ "front-end with workers answers bad, pipelined and long lines in order", test_front_lines_workers },
	{ "front-end reports a dead back-end and caches nothing", test_dead_backend },
	{ "back-end keeps its threads and queues connections past its limit", test_back_conn_limit },
	{ "back-end speaks HTTP/1.1 on persistent connections (--http)", test_back_http },
	{ "tb-load rejects replies with the wrong data", test_load_checks_content },
	{ "bad arguments exit 2", test_bad_arguments },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("tb_tier_e2e", cases)
