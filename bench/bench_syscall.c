/*
 * bench_syscall.c - what the eBPF collector adds to the work it watches:
 * ns per traced socket send+recv (a 16-byte TCP ping-pong over loopback,
 * counted per syscall), per untraced syscall (getppid), and per context
 * switch (a pipe ping-pong between two threads, two switches a round trip).
 *
 * Noisy machines: every figure is the difference and the ratio against the
 * detached case measured in the same run, rounds alternating detached /
 * attached, the median of ROUNDS rounds each. The collector's hooks are
 * loaded in this process (col_bpf, the same code rametr-collector runs) and
 * its consumer drains the ring between rounds, so the cost measured is the
 * kernel side: what a monitored service pays.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "col_bpf.h"
#include "rm_err.h"

#define ROUNDS 9

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/* ns per getppid() */
static double run_getppid(void)
{
	const int n = 2000000;
	uint64_t t0 = now_ns();
	int i;

	for (i = 0; i < n; i++)
		syscall(SYS_getppid);
	return (double)(now_ns() - t0) / n;
}

static int echo_fd;

static void *echo_main(void *arg)
{
	char buf[16];

	(void)arg;
	for (;;) {
		ssize_t r = recv(echo_fd, buf, sizeof(buf), 0);

		if (r <= 0 || send(echo_fd, buf, (size_t)r, 0) != r)
			break;
	}
	return NULL;
}

/* ns per socket syscall: a 16-byte ping-pong is 2 sends + 2 recvs */
static double run_tcp(int cfd)
{
	const int n = 40000;
	char buf[16] = "ping-pong-16byte";
	uint64_t t0 = now_ns();
	int i;

	for (i = 0; i < n; i++) {
		if (send(cfd, buf, sizeof(buf), 0) != sizeof(buf) || recv(cfd, buf, sizeof(buf), MSG_WAITALL) != sizeof(buf))
			return -1;
	}
	return (double)(now_ns() - t0) / (4.0 * n);
}

static int pp[2][2];

static void *pipe_main(void *arg)
{
	char c;

	(void)arg;
	while (read(pp[0][0], &c, 1) == 1)
		if (write(pp[1][1], &c, 1) != 1)
			break;
	return NULL;
}

/* ns per context switch: a pipe round trip between two threads pinned to one CPU */
static double run_switch(void)
{
	const int n = 40000;
	uint64_t t0 = now_ns();
	char c = 'x';
	int i;

	for (i = 0; i < n; i++)
		if (write(pp[0][1], &c, 1) != 1 || read(pp[1][0], &c, 1) != 1)
			return -1;
	return (double)(now_ns() - t0) / (2.0 * n);
}

static int pin(pthread_t t, int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return pthread_setaffinity_np(t, sizeof(s), &s);
}

static int drain(void *arg, const struct rm_part *p)
{
	(void)p;
	++*(uint64_t *)arg;
	return RM_OK;
}

static int drain_win(void *arg, const struct col_window *w)
{
	(void)arg;
	(void)w;
	return RM_OK;
}

struct consumer {
	struct col_bpf *b;
	const struct col_sink *sink;
	volatile int stop;
};

/* The collector's consumer, as in rametr-collector: drain every 50 ms. */
static void *consumer_main(void *arg)
{
	struct consumer *c = arg;

	while (!c->stop)
		col_bpf_poll(c->b, c->sink, 50);
	return NULL;
}

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	double g[2][ROUNDS], t[2][ROUNDS], s[2][ROUNDS], gm[2], tm[2], sm[2];
	uint64_t parts = 0, dropped = 0;
	struct col_sink sink = { &parts, drain, drain_win };
	pthread_t th, ph;
	int lfd, cfd, one = 1, r, k, rv;

	rm_log_init("bench_syscall");
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1) || getsockname(lfd, (struct sockaddr *)&a, &alen))
		return 1;
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(cfd, (struct sockaddr *)&a, sizeof(a)) || (echo_fd = accept(lfd, NULL, NULL)) < 0)
		return 1;
	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(echo_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	pthread_create(&th, NULL, echo_main, NULL);
	if (pipe(pp[0]) || pipe(pp[1]))
		return 1;
	pthread_create(&ph, NULL, pipe_main, NULL);
	pin(pthread_self(), 0);
	pin(ph, 0);

	for (r = 0; r < ROUNDS; r++) {
		for (k = 0; k < 2; k++) { /* k = 0 detached, 1 attached */
			struct col_bpf_cfg cfg = { .window_ns = 1000000000ULL };
			struct col_bpf *b = NULL;

			struct consumer c = { NULL, &sink, 0 };
			pthread_t ct;

			if (k && (rv = col_bpf_open(&b, &cfg)) != RM_OK) {
				fprintf(stderr, "bench_syscall: collector unavailable: %s\n", rm_strerror(rv));
				return 1;
			}
			if (b) {
				c.b = b;
				pthread_create(&ct, NULL, consumer_main, &c);
				pin(ct, 1);
			}
			g[k][r] = run_getppid();
			t[k][r] = run_tcp(cfd);
			s[k][r] = run_switch();
			if (b) {
				struct col_bpf_stats st;

				c.stop = 1;
				pthread_join(ct, NULL);
				col_bpf_poll(b, &sink, 0);
				col_bpf_get_stats(b, &st);
				dropped += st.dropped_parts;
				col_bpf_close(b);
			}
		}
	}
	for (k = 0; k < 2; k++) {
		gm[k] = median(g[k], ROUNDS);
		tm[k] = median(t[k], ROUNDS);
		sm[k] = median(s[k], ROUNDS);
	}
	printf("collector overhead, median of %d alternating rounds (same run; ns per operation)\n", ROUNDS);
	printf("%-34s %10s %10s %10s %8s\n", "operation", "detached", "attached", "added", "ratio");
	printf("%-34s %10.1f %10.1f %+10.1f %8.3f\n", "traced socket syscall (16 B TCP)", tm[0], tm[1], tm[1] - tm[0], tm[1] / tm[0]);
	printf("%-34s %10.1f %10.1f %+10.1f %8.3f\n", "untraced syscall (getppid)", gm[0], gm[1], gm[1] - gm[0], gm[1] / gm[0]);
	printf("%-34s %10.1f %10.1f %+10.1f %8.3f\n", "context switch (pipe ping-pong)", sm[0], sm[1], sm[1] - sm[0], sm[1] / sm[0]);
	printf("(%llu segment parts drained while attached, %llu dropped in the kernel)\n", (unsigned long long)parts,
	       (unsigned long long)dropped);
	shutdown(cfd, SHUT_RDWR);
	close(pp[0][1]);
	pthread_join(th, NULL);
	pthread_join(ph, NULL);
	return 0;
}
