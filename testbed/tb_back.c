/*
 * tb_back.c - tb-back, the storage tier of the two-tier synthetic shared
 * service (seed 000 §7.2.1, Fig. 4). It answers "FETCH <ce> <addr>
 * <size_kb>" (tb_tier.h) with the object's size_kb KB of data, after burning
 * a storage cost of --cpu-us-base + size_kb * --cpu-us-per-kb microseconds of
 * thread CPU. One thread per connection serves one request at a time, like
 * tb-server. It keeps the ground truth per CE (tb_truth.h) — the <ce> field
 * is forwarded by the front-end for this purpose only — from right before
 * the recv that completed the request line (its head, tb_lsrv.h) on to
 * right before the thread's next recv (its tail: the rest of the reply, the
 * way back to the next read). A connection's requests may be pipelined
 * (tb-front --backend-mode mux:N): one read may bring several, served in
 * turn, each one's truth from the end of the one before; how many came so
 * is logged at exit. The truth file is rewritten
 * every second and on SIGTERM/SIGINT. With --http it speaks HTTP/1.1
 * instead (GET /<ce>/<addr>/<size_kb>, persistent connections), to stand
 * behind a real reverse proxy. Owns the truth table and its file.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rm_err.h"
#include "tb_lsrv.h"
#include "tb_cli.h"
#include "tb_proto.h"
#include "tb_tier.h"
#include "tb_truth.h"
#include "banned.h"

#define TB_BACK_CONNS_DEFAULT 256
#define TB_BACK_CONNS_MAX 4096
#define TB_BACK_MAX_CES 1024
#define TB_BACK_HTTP_HDR 64 /* room for the HTTP response's status line and headers */

struct tb_back {
	struct tb_truth truth;
	const char *truth_path;
	uint64_t cpu_base_us, cpu_per_kb_us;
	uint64_t malformed, served; /* atomic: counting adds no wake-ups */
	uint64_t pipelined;         /* atomic: requests read with the one before them */
	int http;                   /* --http */
};

/*
 * --http: the request a connection thread is reading. Its request line
 * comes first, its headers follow, the empty line ends it. A connection
 * thread serves one connection at a time, so the request is the thread's.
 */
struct tb_back_http {
	int open;             /* a request line was read: headers follow */
	char line[96];        /* the request as a FETCH line */
	size_t len, rx;       /* line's length; the request's bytes so far */
	uint64_t t0;          /* truth start: before the recv of its first line */
};

static _Thread_local struct tb_back_http tb_http;

static void tb_usage(FILE *f)
{
	fprintf(f,
		"usage: tb-back --listen ADDR:PORT --truth FILE [--cpu-us-base N]\n"
		"               [--cpu-us-per-kb N] [--max-conns N]\n"
		"\n"
		"  --listen ADDR:PORT   IPv4 address and TCP port (port 0: any; the bound\n"
		"                       address is printed as 'listening ADDR:PORT')\n"
		"  --truth FILE         ground-truth CSV (ce,requests,cpu_ns,rx_bytes,tx_bytes),\n"
		"                       rewritten atomically every second and on SIGTERM/SIGINT\n"
		"  --cpu-us-base N      storage CPU per request, microseconds (default 100)\n"
		"  --cpu-us-per-kb N    storage CPU per KB of the object (default 100)\n"
		"  --max-conns N        connections served at once, one thread each\n"
		"                       (default %d, max %d)\n"
		"  --http               HTTP/1.1: 'GET /<ce>/<addr>/<size_kb>' answers 200 with\n"
		"                       the same reply as its body; anything else ends the connection\n"
		"  -h, --help           this help\n"
		"\n"
		"protocol: 'FETCH <ce> <addr> <size_kb>\\n' -> size_kb * 1024 bytes 'OK <n>\\n',\n"
		"the address's data byte, '\\n'; a malformed request gets 'ERR <reason>\\n'.\n"
		"'STORE' (same fields) writes the object: twice the per-KB CPU, same reply\n",
		TB_BACK_CONNS_DEFAULT, TB_BACK_CONNS_MAX);
}

static int tb_back_err(struct tb_back *b, int fd, const char *reason)
{
	__atomic_fetch_add(&b->malformed, 1, __ATOMIC_RELAXED);
	return tb_lsrv_send_err(fd, reason);
}

static int tb_back_too_long(void *arg, int fd)
{
	return tb_back_err(arg, fd, "line too long");
}

/*
 * Serves the request in line[0..len) (a FETCH or STORE line), read from
 * thread CPU time t0 in rx bytes; with http, an HTTP response carries the
 * reply (errors end the connection).
 */
static int tb_back_work(struct tb_back *b, int fd, const char *line, size_t len, size_t rx, uint64_t t0,
			struct tb_lsrv_tail *tail, int http)
{
	struct tb_tier_req req;
	volatile uint64_t sink;
	const char *reason;
	uint64_t cpu_us, t1, tx = 0;
	size_t rlen, hlen = 0;
	char *reply;
	int rv;

	if (tb_tier_parse(TB_CMD_FETCH, line, len, &req, &reason) != RM_OK)
		return http ? -1 : tb_back_err(b, fd, reason);
	rv = tb_truth_add(&b->truth, req.ce, 0, 0, 0, 0);
	if (rv != RM_OK)
		return http ? -1 : tb_back_err(b, fd, rv == RM_EFULL ? "too many ces" : "internal error");
	/* The storage work: a size-dependent CPU cost, then the object's data. */
	cpu_us = b->cpu_base_us + (uint64_t)req.size_kb * b->cpu_per_kb_us * (req.cmd == TB_CMD_STORE ? 2 : 1);
	if (cpu_us > TB_CPU_US_MAX)
		cpu_us = TB_CPU_US_MAX;
	sink = tb_burn_cpu((uint32_t)cpu_us);
	(void)sink;
	reply = malloc(TB_BACK_HTTP_HDR + tb_tier_reply_bytes(req.size_kb));
	if (!reply)
		return http ? -1 : tb_back_err(b, fd, "out of memory");
	if (http) /* fits: a Content-Length of at most 10 digits */
		hlen = (size_t)snprintf(reply, TB_BACK_HTTP_HDR, "HTTP/1.1 200 OK\r\nContent-Length: %u\r\n\r\n",
					tb_tier_reply_bytes(req.size_kb));
	rlen = tb_tier_build_reply(reply + hlen, tb_tier_reply_bytes(req.size_kb), req.addr, req.size_kb);
	t1 = tb_thread_cpu_ns();
	rv = tb_tier_send(fd, reply, hlen + rlen, &tx, &t1);
	free(reply);
	/* Served either way: the CPU was spent on behalf of req.ce. */
	if (tb_truth_add(&b->truth, req.ce, 1, t1 - t0, rx, tx) != RM_OK)
		rm_log_warn("failed to record a request of '%s'", req.ce);
	tb_lsrv_tail_open(tail, req.ce, t1);
	__atomic_fetch_add(&b->served, 1, __ATOMIC_RELAXED);
	return rv == RM_OK ? 0 : -1;
}

/* --http: takes "GET /<ce>/<addr>/<size_kb> HTTP/1.1" into h as a FETCH line. */
static int tb_back_http_start(struct tb_back_http *h, const char *line, size_t len)
{
	char path[96];
	size_t i, n;

	if (len < 16 || memcmp(line, "GET /", 5) != 0 || memcmp(line + len - 9, " HTTP/1.1", 9) != 0)
		return -1;
	n = len - 5 - 9;
	if (n >= sizeof(path))
		return -1;
	memcpy(path, line + 5, n);
	for (i = 0; i < n; i++)
		if (path[i] == '/')
			path[i] = ' ';
	h->len = (size_t)snprintf(h->line, sizeof(h->line), "FETCH %.*s", (int)n, path);
	return h->len < sizeof(h->line) ? 0 : -1;
}

static int tb_back_serve(void *arg, int fd, const char *line, size_t len, uint64_t t0, struct tb_lsrv_tail *tail)
{
	struct tb_back *b = arg;
	struct tb_back_http *h = &tb_http;

	if (!b->http)
		return tb_back_work(b, fd, line, len, len + 1, t0, tail, 0);
	if (len && line[len - 1] == '\r')
		len--;
	if (!h->open) {
		if (tb_back_http_start(h, line, len) != 0) {
			__atomic_fetch_add(&b->malformed, 1, __ATOMIC_RELAXED);
			return -1;
		}
		h->open = 1;
		h->t0 = t0;
		h->rx = len + 2;
		return 0;
	}
	h->rx += len + 2;
	if (len)
		return 0; /* a header */
	h->open = 0;
	return tb_back_work(b, fd, h->line, h->len, h->rx, h->t0, tail, 1);
}

static void tb_back_tail(void *arg, const char *ce, uint64_t cpu_ns)
{
	struct tb_back *b = arg;

	if (tb_truth_add(&b->truth, ce, 0, cpu_ns, 0, 0) != RM_OK)
		rm_log_warn("failed to record a request of '%s'", ce);
}

static void tb_back_tick(void *arg)
{
	struct tb_back *b = arg;

	if (tb_truth_write(&b->truth, b->truth_path) != RM_OK)
		rm_log_warn("failed to write the truth file '%s'", b->truth_path);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "truth", required_argument, NULL, 't' },
		{ "cpu-us-base", required_argument, NULL, 'B' },
		{ "cpu-us-per-kb", required_argument, NULL, 'K' },
		{ "max-conns", required_argument, NULL, 'w' },
		{ "http", no_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct tb_lsrv_cfg cfg;
	struct tb_back b;
	struct sockaddr_in addr;
	const char *listen_s = NULL;
	uint64_t conns = TB_BACK_CONNS_DEFAULT;
	int c, lfd, sfd, rv, ret = 0;

	rm_log_init("tb-back");
	memset(&b, 0, sizeof(b));
	b.cpu_base_us = 100;
	b.cpu_per_kb_us = 100;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			listen_s = optarg;
			break;
		case 't':
			b.truth_path = optarg;
			break;
		case 'B':
			if (tb_parse_u64(optarg, 0, TB_CPU_US_MAX, &b.cpu_base_us) != RM_OK) {
				rm_log_error("bad --cpu-us-base '%s': expected 0..%u", optarg, TB_CPU_US_MAX);
				return 2;
			}
			break;
		case 'K':
			if (tb_parse_u64(optarg, 0, TB_CPU_US_MAX / TB_SIZE_KB_MAX, &b.cpu_per_kb_us) != RM_OK) {
				rm_log_error("bad --cpu-us-per-kb '%s': expected 0..%u", optarg,
					     TB_CPU_US_MAX / TB_SIZE_KB_MAX);
				return 2;
			}
			break;
		case 'w':
			if (tb_parse_u64(optarg, 1, TB_BACK_CONNS_MAX, &conns) != RM_OK) {
				rm_log_error("bad --max-conns '%s': expected 1..%d", optarg, TB_BACK_CONNS_MAX);
				return 2;
			}
			break;
		case 'H':
			b.http = 1;
			break;
		default:
			return tb_cli_other(c, argv, "tb-back", tb_usage);
		}
	}
	if (tb_cli_extra_args(argc, argv, tb_usage))
		return 2;
	if (!listen_s || !b.truth_path) {
		rm_log_error("--listen and --truth are required");
		tb_usage(stderr);
		return 2;
	}
	if (tb_parse_addr(listen_s, 0, &addr) != RM_OK) {
		rm_log_error("bad --listen '%s': expected IPV4:PORT", listen_s);
		return 2;
	}

	sfd = tb_cli_signalfd();
	if (sfd < 0)
		return 1;
	if (tb_truth_init(&b.truth, TB_BACK_MAX_CES) != RM_OK) {
		rm_log_error("failed to initialise the back-end");
		return 1;
	}
	/* The file exists (empty) from the start, so readers can poll for it. */
	if (tb_truth_write(&b.truth, b.truth_path) != RM_OK)
		return 1;
	lfd = tb_lsrv_listen(&addr);
	if (lfd < 0)
		return 1;
	memset(&cfg, 0, sizeof(cfg));
	cfg.serve = tb_back_serve;
	cfg.tail = tb_back_tail;
	cfg.too_long = tb_back_too_long;
	cfg.tick = tb_back_tick;
	cfg.arg = &b;
	cfg.max_conns = (size_t)conns;
	cfg.truth_head = 1;
	cfg.pipelined = &b.pipelined;
	rv = tb_lsrv_run(&cfg, lfd, sfd);
	close(lfd);
	/* tb_lsrv_run wrote the final truth in its last tick; check it once more. */
	if (tb_truth_write(&b.truth, b.truth_path) != RM_OK || rv != RM_OK)
		ret = 1;
	rm_log_info("served %llu requests, answered %llu malformed, %llu read with the request before them",
		    (unsigned long long)b.served, (unsigned long long)b.malformed,
		    (unsigned long long)b.pipelined);
	tb_truth_release(&b.truth);
	close(sfd);
	return ret;
}
