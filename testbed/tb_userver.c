/*
 * tb_userver.c - tb-userver, the testbed's UDP service: the shared service
 * of tb-server (tb_proto.h's REQ line, a known CPU burnt per request) over
 * datagrams, one request per datagram and one reply datagram sent back to
 * the request's sender, with the same ground truth per CE (tb_truth.h).
 *
 * Ground truth per request: the serving thread's CLOCK_THREAD_CPUTIME_ID
 * from right before the recvfrom that got the request to right before the
 * thread's next recvfrom (the handler, the reply, and the way back), as
 * tb-server counts a request and its tail.
 *
 * --forward ADDR:PORT makes it a front: each request is sent on, unchanged,
 * to the tb-userver at ADDR:PORT over a connected UDP socket of the serving
 * thread (a resolver asking its upstream), and the back end's reply is
 * relayed to the client; no CPU is burnt here. --loss PCT loses that share
 * of the forwarded datagrams on the way: the front marks them (first byte
 * 'X', same length) and the back end, run with --drop-marked, has its
 * kernel drop them on arrival (a socket filter), as a lossy network would;
 * the front sends the request again when no reply came within 50 ms.
 *
 * --threads N threads read the one socket (a resolver's worker threads); the
 * main thread owns the socket and the truth file: it writes the truth every
 * second and, on SIGTERM/SIGINT, shuts the socket down (every blocked
 * recvfrom returns), joins the threads, writes the final truth and exits 0.
 */
#include <errno.h>
#include <getopt.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rm_err.h"
#include "tb_cli.h"
#include "tb_proto.h"
#include "tb_rng.h"
#include "tb_truth.h"
#include "banned.h"

#define TB_UTHREADS_MAX 64
#define TB_UMAX_CES 1024
#define TB_URESP_MAX 65507u /* the largest UDP payload over IPv4 */
#define TB_UFWD_WAIT_MS 50   /* front: a forwarded request not answered by then is sent again */
#define TB_UFWD_TRIES 4
#define TB_ULOST_MARK 'X'    /* first byte of a forwarded datagram the back end's kernel drops */

struct tb_usrv {
	struct tb_truth truth;
	int fd;
	volatile int stopping;
	pthread_mutex_t lock;
	uint64_t malformed; /* requests answered with ERR (guarded by lock) */
	/* front (--forward): the back end, the share lost (basis points), the seed */
	int forward;
	struct sockaddr_in fwd;
	uint64_t loss_bp, seed;
	uint64_t lost, retried; /* datagrams lost on purpose, requests sent again (guarded by lock) */
};

/* One serving thread. */
struct tb_uthr {
	struct tb_usrv *s;
	size_t idx;
};

static void tb_usage(FILE *f)
{
	fprintf(f,
		"usage: tb-userver --listen ADDR:PORT --truth FILE [--threads N]\n"
		"                  [--forward ADDR:PORT [--loss PCT] [--seed N]] [--drop-marked]\n"
		"\n"
		"  --listen ADDR:PORT  IPv4 address and UDP port to serve on (port 0: any;\n"
		"                      the bound address is printed as 'listening ADDR:PORT')\n"
		"  --truth FILE        ground-truth CSV (ce,requests,cpu_ns,rx_bytes,tx_bytes),\n"
		"                      rewritten atomically every second and on SIGTERM/SIGINT\n"
		"  --threads N         threads reading the socket (default 1, max %d)\n"
		"  --forward ADDR:PORT front: send each request on to the tb-userver there and\n"
		"                      relay its reply (no CPU burnt here)\n"
		"  --loss PCT          front: lose PCT%% (0..50) of the forwarded datagrams on the\n"
		"                      way (marked, dropped by a back end run with --drop-marked),\n"
		"                      each sent again after 50 ms without a reply\n"
		"  --seed N            front: seed of the losses (default 1)\n"
		"  --drop-marked       back end: the kernel drops datagrams a front marked lost\n"
		"  -h, --help          this help\n"
		"\n"
		"protocol: one datagram 'REQ <ce> <cpu_us> <resp_bytes>' -> burns cpu_us (<= %u)\n"
		"of thread CPU time, replies one datagram of resp_bytes (%u..%u) bytes starting\n"
		"'OK <resp_bytes>\\n' to its sender; a malformed request gets 'ERR <reason>\\n'\n",
		TB_UTHREADS_MAX, TB_CPU_US_MAX, TB_RESP_MIN, TB_URESP_MAX);
}

static void tb_uerr(struct tb_usrv *s, const struct sockaddr_in *to, const char *reason)
{
	char msg[128];
	int n = snprintf(msg, sizeof(msg), "ERR %s\n", reason);

	pthread_mutex_lock(&s->lock);
	s->malformed++;
	pthread_mutex_unlock(&s->lock);
	if (n > 0 && (size_t)n < sizeof(msg))
		(void)sendto(s->fd, msg, (size_t)n, 0, (const struct sockaddr *)to, sizeof(*to));
}

/* A reply datagram of req->resp_bytes bytes into buf (at least TB_URESP_MAX): its length, or 0. */
static size_t tb_ureply(char *buf, const struct tb_req *req)
{
	size_t h = tb_format_ok(buf, TB_URESP_MAX, req->resp_bytes);

	if (!h || req->resp_bytes > TB_URESP_MAX || h >= req->resp_bytes)
		return 0;
	memset(buf + h, '.', req->resp_bytes - h - 1);
	buf[req->resp_bytes - 1] = '\n';
	return req->resp_bytes;
}

/*
 * Front: sends request in[0..n) on over fd (connected to the back end),
 * losing it on purpose with the configured odds, until a reply comes into
 * out (at least TB_URESP_MAX bytes): its length, or 0.
 */
static size_t tb_uforward(struct tb_usrv *s, int fd, struct tb_rng *rng, char *in, size_t n, char *out)
{
	int i;

	for (i = 0; i < TB_UFWD_TRIES && !s->stopping; i++) {
		int lose = s->loss_bp && tb_rng_next(rng) % 10000 < s->loss_bp;
		char first = in[0];
		ssize_t r;

		if (lose)
			in[0] = TB_ULOST_MARK;
		r = send(fd, in, n, 0);
		in[0] = first;
		if (r != (ssize_t)n) {
			rm_log_warn("failed to forward a request: %s", strerror(errno));
			return 0;
		}
		pthread_mutex_lock(&s->lock);
		s->lost += lose != 0;
		s->retried += i > 0;
		pthread_mutex_unlock(&s->lock);
		r = recv(fd, out, TB_URESP_MAX, 0);
		if (r > 0)
			return (size_t)r;
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			rm_log_warn("failed to read the back end's reply: %s", strerror(errno));
			return 0;
		}
	}
	return 0;
}

/*
 * Front: a UDP socket of this thread connected to the back end (its local
 * address and port chosen by the kernel, as a client's: not bound, so it
 * is not taken for a server's socket); -1 on failure.
 */
static int tb_uforward_socket(const struct tb_usrv *s)
{
	struct timeval tv = { 0, TB_UFWD_WAIT_MS * 1000 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, (const struct sockaddr *)&s->fwd, sizeof(s->fwd)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) {
		rm_log_error("failed to open a socket to the back end: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Back end: the kernel drops the datagrams a front marked lost, before anyone reads them. */
static int tb_udrop_marked(int fd)
{
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 8), /* the payload's first byte, after the UDP header */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TB_ULOST_MARK, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, 0),
		BPF_STMT(BPF_RET | BPF_K, 0xffffffffU),
	};
	struct sock_fprog prog = { sizeof(code) / sizeof(code[0]), code };

	return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog));
}

static void *tb_uworker(void *arg)
{
	struct tb_uthr *thr = arg;
	struct tb_usrv *s = thr->s;
	struct tb_rng rng;
	int ffd = -1;
	char in[TB_LINE_MAX], *out = malloc(TB_URESP_MAX);
	char prev_ce[TB_CE_MAX];
	int prev = 0;
	uint64_t from = 0;

	if (!out) {
		rm_log_error("failed to allocate a reply buffer");
		return NULL;
	}
	tb_rng_seed(&rng, s->seed * 1000 + thr->idx);
	if (s->forward && (ffd = tb_uforward_socket(s)) < 0) {
		free(out);
		return NULL;
	}
	while (!s->stopping) {
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		uint64_t now = tb_thread_cpu_ns();
		const char *reason;
		volatile uint64_t sink;
		struct tb_req req;
		ssize_t n;
		size_t len;

		/* the last request's span ends right before this recvfrom */
		if (prev && now > from && tb_truth_add(&s->truth, prev_ce, 0, now - from, 0, 0) != RM_OK)
			rm_log_warn("failed to record a request of '%s'", prev_ce);
		prev = 0;
		n = recvfrom(s->fd, in, sizeof(in), MSG_TRUNC, (struct sockaddr *)&peer, &plen);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (!s->stopping)
				rm_log_error("recvfrom failed: %s", strerror(errno));
			break;
		}
		if (s->stopping)
			break;
		if (n == 0 || plen != sizeof(peer))
			continue; /* shut down, or not an IPv4 sender */
		if ((size_t)n > sizeof(in)) {
			tb_uerr(s, &peer, "line too long");
			continue;
		}
		len = (size_t)n;
		if (len && in[len - 1] == '\n')
			len--;
		if (tb_parse_req(in, len, &req, &reason) != RM_OK) {
			tb_uerr(s, &peer, reason);
			continue;
		}
		if (req.resp_bytes > TB_URESP_MAX) {
			tb_uerr(s, &peer, "reply too large for a datagram");
			continue;
		}
		if (tb_truth_add(&s->truth, req.ce, 0, 0, 0, 0) != RM_OK) {
			tb_uerr(s, &peer, "too many ces");
			continue;
		}
		if (s->forward) {
			if (!(len = tb_uforward(s, ffd, &rng, in, (size_t)n, out))) {
				tb_uerr(s, &peer, "the back end did not answer");
				continue;
			}
		} else {
			sink = tb_burn_cpu(req.cpu_us);
			(void)sink;
			len = tb_ureply(out, &req);
		}
		if (sendto(s->fd, out, len, 0, (struct sockaddr *)&peer, sizeof(peer)) != (ssize_t)len)
			rm_log_warn("failed to answer a request of '%s': %s", req.ce, strerror(errno));
		if (tb_truth_add(&s->truth, req.ce, 1, 0, (uint64_t)n, len) != RM_OK)
			rm_log_warn("failed to record a request of '%s'", req.ce);
		memcpy(prev_ce, req.ce, sizeof(prev_ce));
		from = now;
		prev = 1;
	}
	if (ffd >= 0)
		close(ffd);
	free(out);
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' }, { "truth", required_argument, NULL, 't' },
		{ "threads", required_argument, NULL, 'n' }, { "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },       { "forward", required_argument, NULL, 'f' },
		{ "loss", required_argument, NULL, 'L' },    { "seed", required_argument, NULL, 'S' },
		{ "drop-marked", no_argument, NULL, 'd' },   { NULL, 0, NULL, 0 },
	};
	const char *listen_s = NULL, *truth_path = NULL, *fwd_s = NULL;
	struct tb_uthr thr[TB_UTHREADS_MAX];
	uint64_t loss_pct = 0, seed = 1;
	int drop_marked = 0;
	struct sockaddr_in addr;
	socklen_t alen = sizeof(addr);
	pthread_t th[TB_UTHREADS_MAX];
	struct tb_usrv s;
	uint64_t nthreads = 1;
	sigset_t sigs;
	char abuf[32];
	size_t i, started = 0;
	int c, rv = 1;

	rm_log_init("tb-userver");
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'l': listen_s = optarg; break;
		case 't': truth_path = optarg; break;
		case 'n':
			if (tb_parse_u64(optarg, 1, TB_UTHREADS_MAX, &nthreads) != RM_OK) {
				rm_log_error("invalid --threads '%s' (expected 1..%d)", optarg, TB_UTHREADS_MAX);
				return 2;
			}
			break;
		case 'f': fwd_s = optarg; break;
		case 'L':
			if (tb_parse_u64(optarg, 0, 50, &loss_pct) != RM_OK) {
				rm_log_error("invalid --loss '%s' (expected 0..50)", optarg);
				return 2;
			}
			break;
		case 'S':
			if (tb_parse_u64(optarg, 0, UINT64_MAX / 2000, &seed) != RM_OK) {
				rm_log_error("invalid --seed '%s'", optarg);
				return 2;
			}
			break;
		case 'd': drop_marked = 1; break;
		default: return tb_cli_other(c, argv, "tb-userver", tb_usage);
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
		rm_log_error("invalid --listen '%s' (expected a.b.c.d:port)", listen_s);
		return 2;
	}
	memset(&s, 0, sizeof(s));
	if (fwd_s && tb_parse_addr(fwd_s, 0, &s.fwd) != RM_OK) {
		rm_log_error("invalid --forward '%s' (expected a.b.c.d:port)", fwd_s);
		return 2;
	}
	s.forward = fwd_s != NULL;
	s.loss_bp = loss_pct * 100;
	s.seed = seed;
	pthread_mutex_init(&s.lock, NULL);
	if (tb_truth_init(&s.truth, TB_UMAX_CES) != RM_OK) {
		rm_log_error("failed to allocate the truth table");
		return 1;
	}
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* the threads inherit it: signals come to sigtimedwait */
	s.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s.fd < 0 || bind(s.fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
	    getsockname(s.fd, (struct sockaddr *)&addr, &alen) != 0) {
		rm_log_error("failed to bind '%s': %s", listen_s, strerror(errno));
		goto out;
	}
	if (drop_marked && tb_udrop_marked(s.fd) != 0) {
		rm_log_error("failed to attach the drop filter: %s", strerror(errno));
		goto out;
	}
	for (i = 0; i < nthreads; i++) {
		thr[i].s = &s;
		thr[i].idx = i;
		if (pthread_create(&th[i], NULL, tb_uworker, &thr[i]) != 0) {
			rm_log_error("failed to start a thread");
			goto stop;
		}
		started++;
	}
	printf("listening %s\n", tb_addr_str(&addr, abuf, sizeof(abuf)));
	fflush(stdout);
	for (;;) {
		struct timespec sec = { 1, 0 };

		if (sigtimedwait(&sigs, NULL, &sec) >= 0)
			break;
		if (errno != EAGAIN && errno != EINTR) {
			rm_log_error("sigtimedwait failed: %s", strerror(errno));
			goto stop;
		}
		(void)tb_truth_write(&s.truth, truth_path);
	}
	rv = 0;
stop:
	s.stopping = 1;
	shutdown(s.fd, SHUT_RDWR); /* wakes every blocked recvfrom */
	for (i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	if (tb_truth_write(&s.truth, truth_path) != RM_OK)
		rv = 1;
	if (s.malformed)
		rm_log_info("%llu malformed requests answered with ERR", (unsigned long long)s.malformed);
	if (s.forward)
		rm_log_info("forwarded: %llu datagrams lost on purpose, %llu sent again", (unsigned long long)s.lost,
			    (unsigned long long)s.retried);
out:
	if (s.fd >= 0)
		close(s.fd);
	tb_truth_release(&s.truth);
	return rv;
}
