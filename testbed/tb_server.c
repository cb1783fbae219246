/*
 * tb_server.c - tb-server, the synthetic shared service of the testbed
 * (seed 000 §7.2.1): a TCP server with one thread per connection that burns
 * a requested, known amount of CPU per request and answers with a requested
 * number of bytes, and that keeps the ground truth of what each CE consumed
 * (tb_truth.h), written to --truth every second and on SIGTERM/SIGINT.
 * Ground truth per request: what the request costs the server, the serving
 * thread's CLOCK_THREAD_CPUTIME_ID from right before the recv that completed
 * the request line (waiting for it and reading it) to right before the
 * thread's recv of the next one (or the end of the connection): the handler
 * up to the reply's first send, and the request's tail - the rest of the
 * reply and the way back to the next recv. In the event loop the tail ends
 * at the recv of the next request of any connection.
 *
 * With --event-loop, the main thread alone serves every connection (one
 * poll loop, like redis): a CE's slow request delays everyone queued behind
 * it, the case admission throttling (collector --throttle tc:DEV) is for.
 *
 * Without it, the connections are served by the testbed's line server
 * (tb_lsrv.h: a thread per connection, kept and reused; the truth from right
 * before the blocking recv, TB_TRUTH_RECV). The main thread owns the
 * listening socket and the truth file: it writes the truth every second,
 * and on a signal, once every connection is shut down and its thread
 * joined, writes the final truth and exits 0.
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rm_err.h"
#include "tb_cli.h"
#include "tb_lsrv.h"
#include "tb_proto.h"
#include "tb_truth.h"
#include "banned.h"

#define TB_WORKERS_DEFAULT 256
#define TB_WORKERS_MAX 4096
#define TB_MAX_CES 1024

struct tb_srv {
	struct tb_truth truth;
	const char *truth_path;
	pthread_mutex_t lock;
	size_t nconns;      /* --workers: connections served at once */
	uint64_t malformed; /* requests answered with ERR (guarded by lock) */
};

static void tb_usage(FILE *f)
{
	fprintf(f,
		"usage: tb-server --listen ADDR:PORT --truth FILE [--workers N] [--event-loop]\n"
		"\n"
		"  --listen ADDR:PORT  IPv4 address and TCP port to serve on (port 0: any;\n"
		"                      the bound address is printed as 'listening ADDR:PORT')\n"
		"  --truth FILE        ground-truth CSV (ce,requests,cpu_ns,rx_bytes,tx_bytes),\n"
		"                      rewritten atomically every second and on SIGTERM/SIGINT\n"
		"  --workers N         at most N connections served at once, one thread each\n"
		"                      (default %d, max %d); more wait in the listen backlog\n"
		"  --event-loop        one thread (the main one) serves every connection in a\n"
		"                      poll loop, requests one at a time\n"
		"  -h, --help          this help\n"
		"\n"
		"protocol: 'REQ <ce> <cpu_us> <resp_bytes>\\n' -> burns cpu_us (<= %u) of thread\n"
		"CPU time, replies resp_bytes (%u..%u) bytes starting 'OK <resp_bytes>\\n';\n"
		"a malformed request gets 'ERR <reason>\\n'\n",
		TB_WORKERS_DEFAULT, TB_WORKERS_MAX, TB_CPU_US_MAX, TB_RESP_MIN, TB_RESP_MAX);
}

static int tb_send_err(struct tb_srv *s, int fd, const char *reason)
{
	pthread_mutex_lock(&s->lock);
	s->malformed++;
	pthread_mutex_unlock(&s->lock);
	return tb_lsrv_send_err(fd, reason);
}

/* cpu_ns of a thread's CPU was the tail of a request of CE ce: add it to its CE. */
static void tb_tail_add(void *arg, const char *ce, uint64_t cpu_ns)
{
	struct tb_srv *s = arg;

	if (tb_truth_add(&s->truth, ce, 0, cpu_ns, 0, 0) != RM_OK)
		rm_log_warn("failed to record a request of '%s'", ce);
}

/* The thread's CPU up to thread CPU time now was the answered request's tail (event loop). */
static void tb_tail_close(struct tb_srv *s, struct tb_lsrv_tail *tl, uint64_t now)
{
	if (!tl->open)
		return;
	tl->open = 0;
	if (now > tl->from)
		tb_tail_add(s, tl->ce, now - tl->from);
}

/*
 * Serves one complete request line (without '\n') whose measurement started
 * at thread CPU time t0, for the server arg; the thread's CPU from the
 * reply's first send on is the request's tail, opened in *tl (closed by the
 * caller). Returns 0 to keep the connection, -1 to drop it. The line
 * server's serve callback (its connection threads) and the event loop's.
 */
static int tb_serve_line(void *arg, int fd, const char *line, size_t len, uint64_t t0, struct tb_lsrv_tail *tl)
{
	struct tb_srv *s = arg;
	volatile uint64_t sink;
	struct tb_req req;
	const char *reason;
	uint64_t t1, tx = 0;
	int rv;

	if (tb_parse_req(line, len, &req, &reason) != RM_OK)
		return tb_send_err(s, fd, reason);
	rv = tb_truth_add(&s->truth, req.ce, 0, 0, 0, 0);
	if (rv == RM_EFULL)
		return tb_send_err(s, fd, "too many ces");
	if (rv != RM_OK)
		return tb_send_err(s, fd, "internal error");
	sink = tb_burn_cpu(req.cpu_us);
	(void)sink;
	/* The handler's span ends when the reply's first send returns (on
	 * loopback it includes the kernel's delivery to the client); the rest
	 * of the reply and the way back to the next recv are the tail. */
	t1 = tb_thread_cpu_ns();
	rv = tb_send_reply(fd, req.resp_bytes, &tx, &t1);
	/* Served either way: the CPU was spent on behalf of req.ce. */
	if (tb_truth_add(&s->truth, req.ce, 1, t1 - t0, len + 1, tx) != RM_OK)
		rm_log_warn("failed to record a request of '%s'", req.ce);
	tb_lsrv_tail_open(tl, req.ce, t1);
	return rv == RM_OK ? 0 : -1;
}

/* The line server's other callbacks (tb_lsrv_cfg): on its connection threads, on its main thread. */
static int tb_too_long_cb(void *arg, int fd)
{
	return tb_send_err(arg, fd, "line too long");
}

static void tb_tick_cb(void *arg)
{
	struct tb_srv *s = arg;

	if (tb_truth_write(&s->truth, s->truth_path) != RM_OK)
		rm_log_warn("failed to write the truth file '%s'", s->truth_path);
}

/*
 * The main loop's once-a-second truth snapshot: writes the truth file if
 * *next_write (CLOCK_MONOTONIC ns) has passed, moving it a second on, and
 * returns the poll timeout in ms until the next write. Main thread only.
 */
static int tb_truth_tick(struct tb_srv *s, uint64_t *next_write)
{
	uint64_t now = tb_mono_ns();

	if (now >= *next_write) {
		tb_tick_cb(s);
		*next_write = now + 1000000000ull;
	}
	return (int)((*next_write - now) / 1000000ull) + 1;
}

/* Thread per connection: the line server until the signal (sfd). */
static int tb_run(struct tb_srv *s, int lfd, int sfd)
{
	struct tb_lsrv_cfg cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.serve = tb_serve_line;
	cfg.tail = tb_tail_add;
	cfg.too_long = tb_too_long_cb;
	cfg.tick = tb_tick_cb;
	cfg.arg = s;
	cfg.max_conns = s->nconns;
	cfg.truth_head = TB_TRUTH_RECV;
	return tb_lsrv_run(&cfg, lfd, sfd);
}

/* --event-loop: one thread, every connection; requests served in turn. */
struct tb_lconn {
	int fd;
	size_t have;
	int discarding;
	char buf[TB_LINE_MAX];
};

static int tb_run_loop(struct tb_srv *s, int lfd, int sfd)
{
	uint64_t next_write = tb_mono_ns() + 1000000000ull;
	size_t max = s->nconns, n = 0, i;
	struct tb_lconn *c = calloc(max, sizeof(*c));
	struct pollfd *pfd = calloc(max + 2, sizeof(*pfd));
	struct tb_lsrv_tail tl = { .open = 0 };
	int rv = RM_OK;

	if (!c || !pfd) {
		free(c);
		free(pfd);
		return RM_ENOMEM;
	}
	for (;;) {
		int timeout = tb_truth_tick(s, &next_write), k;

		pfd[0].fd = sfd;
		pfd[0].events = POLLIN;
		pfd[1].fd = n < max ? lfd : -1;
		pfd[1].events = POLLIN;
		for (i = 0; i < n; i++) {
			pfd[2 + i].fd = c[i].fd;
			pfd[2 + i].events = POLLIN;
			pfd[2 + i].revents = 0;
		}
		k = poll(pfd, (nfds_t)(n + 2), timeout);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			rm_log_error("failed to poll: %s", strerror(errno));
			rv = RM_EIO;
			break;
		}
		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				rm_log_info("got signal %u, stopping", si.ssi_signo);
			break;
		}
		for (i = 0; i < n; i++) {
			struct tb_lconn *l = &c[i];
			ssize_t r;
			uint64_t t0;
			char *nl;
			int drop = 0;

			if (!(pfd[2 + i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (l->have == sizeof(l->buf)) {
				if (!l->discarding && tb_send_err(s, l->fd, "line too long") != 0)
					drop = 1;
				l->discarding = 1;
				l->have = 0;
			}
			t0 = tb_thread_cpu_ns(); /* from right before the recv that reads it */
			r = drop ? 0 : recv(l->fd, l->buf + l->have, sizeof(l->buf) - l->have, MSG_DONTWAIT);
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (r <= 0) {
				close(l->fd);
				l->fd = -1;
				continue;
			}
			tb_tail_close(s, &tl, t0);
			l->have += (size_t)r;
			while ((nl = memchr(l->buf, '\n', l->have))) {
				size_t len = (size_t)(nl - l->buf);

				if (l->discarding)
					l->discarding = 0;
				else if (tb_serve_line(s, l->fd, l->buf, len, t0, &tl) != 0)
					drop = 1;
				l->have -= len + 1;
				memmove(l->buf, nl + 1, l->have);
				t0 = tb_thread_cpu_ns();
				if (memchr(l->buf, '\n', l->have))
					tb_tail_close(s, &tl, t0); /* a pipelined line: its request begins */
				if (drop)
					break;
			}
			if (drop) {
				close(l->fd);
				l->fd = -1;
			}
		}
		/* compact the closed ones */
		for (i = 0; i < n;) {
			if (c[i].fd < 0)
				c[i] = c[--n];
			else
				i++;
		}
		if (n < max && (pfd[1].revents & POLLIN)) {
			int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), one = 1;

			if (fd >= 0) {
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				memset(&c[n], 0, sizeof(c[n]));
				c[n++].fd = fd;
			}
		}
	}
	tb_tail_close(s, &tl, tb_thread_cpu_ns());
	for (i = 0; i < n; i++)
		close(c[i].fd);
	free(c);
	free(pfd);
	return rv;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "truth", required_argument, NULL, 't' },
		{ "workers", required_argument, NULL, 'w' },
		{ "event-loop", no_argument, NULL, 'e' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct tb_srv srv;
	struct sockaddr_in addr;
	const char *listen_s = NULL, *truth_path = NULL;
	uint64_t workers = TB_WORKERS_DEFAULT;
	int c, lfd, sfd, rv, ret = 0, event_loop = 0;

	rm_log_init("tb-server");
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			listen_s = optarg;
			break;
		case 't':
			truth_path = optarg;
			break;
		case 'w':
			if (tb_parse_u64(optarg, 1, TB_WORKERS_MAX, &workers) != RM_OK) {
				rm_log_error("bad --workers '%s': expected 1..%d", optarg, TB_WORKERS_MAX);
				return 2;
			}
			break;
		case 'e':
			event_loop = 1;
			break;
		default:
			return tb_cli_other(c, argv, "tb-server", tb_usage);
		}
	}
	if (tb_cli_extra_args(argc, argv, tb_usage))
		return 2;
	if (!listen_s || !truth_path) {
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
	memset(&srv, 0, sizeof(srv));
	srv.truth_path = truth_path;
	srv.nconns = (size_t)workers;
	if (pthread_mutex_init(&srv.lock, NULL) != 0 || tb_truth_init(&srv.truth, TB_MAX_CES) != RM_OK) {
		rm_log_error("failed to initialise the server");
		return 1;
	}
	/* The file exists (empty) from the start, so readers can poll for it. */
	if (tb_truth_write(&srv.truth, srv.truth_path) != RM_OK)
		return 1;
	lfd = tb_lsrv_listen(&addr);
	if (lfd < 0)
		return 1;

	rv = event_loop ? tb_run_loop(&srv, lfd, sfd) : tb_run(&srv, lfd, sfd);
	close(lfd);
	if (tb_truth_write(&srv.truth, srv.truth_path) != RM_OK || rv != RM_OK)
		ret = 1;
	if (srv.malformed)
		rm_log_info("answered %llu malformed requests", (unsigned long long)srv.malformed);
	tb_truth_release(&srv.truth);
	pthread_mutex_destroy(&srv.lock);
	close(sfd);
	return ret;
}
