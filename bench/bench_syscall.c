/*
 * bench_syscall.c - what the eBPF collector adds to the work it watches:
 * ns per traced socket syscall (a 16-byte TCP ping-pong over loopback
 * between two threads pinned to one CPU, counted per send or recv: it
 * includes the hooks of the switch each blocking recv causes), per untraced
 * syscall (getppid), and per context switch (a pipe ping-pong between two
 * threads pinned to one CPU, two switches a round trip) of threads the
 * collector does not trace and of threads of the traced process.
 *
 * What is traced: the collector is restricted to a network namespace of its
 * own (its netns filter, as `rametr-collector --netns`): the main thread
 * moves into a new one (unshare) before it opens the TCP sockets and starts
 * the echo thread and the traced pipe thread, which inherit it; the two
 * threads of the untraced pipe ping-pong are started before, in the
 * namespace the program began in, so the hooks see them as another host's.
 *
 * Noisy machines: every figure is the difference and the ratio against the
 * detached case measured in the same run, variants alternating within each
 * round (order reversed every other round), medians over the rounds of the
 * per-round differences and ratios. The main figures are CPU time of the
 * service's own threads (CLOCK_THREAD_CPUTIME_ID of both ends of the
 * ping-pong): hooks run in the context of the thread that makes the syscall
 * or switches, so that is what a monitored service pays, and time other
 * processes take from the CPU does not count. Wall-clock figures follow.
 * The collector's hooks are loaded in this process (col_bpf, the code
 * rametr-collector runs) and its consumer thread drains the ring on the other
 * CPU meanwhile; its own CPU is reported per part, apart.
 *
 * --breakdown also runs the benchmark stages of rametr.h (hooks that return
 * at once; + the clock read; + the threads' state lookups; + socket reads;
 * + the segmenter without records), so the cost of each piece is the
 * difference between stages.
 *
 * Output (stable, one figure per line; scripts parse it):
 *   collector overhead, median of N alternating rounds (...)
 *   operation  detached  attached  added  ratio            (header)
 *   <label, 34 columns> <detached> <attached> <added> <ratio>
 * with labels "traced socket syscall (16 B TCP)", "untraced syscall (getppid)",
 * "untraced context switch (pipe)", "context switch, traced process" (CPU
 * time), the same prefixed "wall: ",
 * and with --breakdown the same prefixed "stage hooks: ", "stage clock: ",
 * "stage task: ", "stage state: ", "stage noemit: " (CPU time); then
 *   consumer CPU per part <ns> ns (collector thread, not the service)
 *   (<P> segment parts drained while attached, <D> dropped in the kernel)
 *   profile <stage>: parts <n> dropped <n>
 *   profile <stage>: <program> runs <n> ns/run <x>
 *   profile <stage>: per <op>: hook runs <x> ns <y>
 * (the last: all programs' runs and run time during that workload alone,
 * per operation, median of the runs; <op> "socket syscall" or "untraced
 * switch"; the hooks stage is profiled too, so full minus hooks is the
 * programs' own cost net of the statistics' clock reads)
 * The profile lines come from 3 more runs per stage (full, or every stage
 * with --breakdown; runs per run on average, median ns/run) with the
 * kernel's BPF run-time statistics enabled: the
 * time each hook itself runs, which noise from other processes barely moves
 * (the tracepoint's own dispatch, ~10-20 ns, is not in it). Statistics are
 * machine-wide: programs of other processes count their runs meanwhile.
 */
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "col_bpf.h"
#include "rm_err.h"

#define MAX_ROUNDS 41
#define N_GETPPID 1000000
#define N_TCP 20000      /* round trips: 4 socket syscalls each */
#define N_SWITCH 20000   /* round trips: 2 switches each */

enum { OP_TCP, OP_GETPPID, OP_USWITCH, OP_SWITCH, OP_N };
enum { CLK_CPU, CLK_WALL, CLK_N };

/* variants: 0 detached, then bench stages; the last is the full collector */
#define V_DETACHED 0
static const struct {
	const char *label;
	int stage;
} variants[] = {
	{ "", -1 },
	{ "stage hooks: ", RM_STAGE_HOOKS },
	{ "stage clock: ", RM_STAGE_CLOCK },
	{ "stage task: ", RM_STAGE_TASK },
	{ "stage state: ", RM_STAGE_STATE },
	{ "stage noemit: ", RM_STAGE_NOEMIT },
	{ "", RM_STAGE_FULL },
};
#define NV ((int)(sizeof(variants) / sizeof(variants[0])))
#define V_FULL (NV - 1)

static const char *op_label[OP_N] = { "traced socket syscall (16 B TCP)", "untraced syscall (getppid)",
				       "untraced context switch (pipe)", "context switch, traced process" };
static const char *op_short[OP_N] = { "socket syscall", "untraced syscall", "untraced switch", "traced switch" };

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
	double s[MAX_ROUNDS];

	memcpy(s, v, (size_t)n * sizeof(*v));
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* CPU clocks of the threads a measurement charges: main and its peer; the untraced pair */
static clockid_t main_clk, echo_clk, pipe_clk, udrv_clk, uecho_clk;

struct sample {
	uint64_t wall, cpu;
};

static void mark_of(struct sample *s, clockid_t self, clockid_t peer)
{
	s->wall = clock_ns(CLOCK_MONOTONIC);
	s->cpu = clock_ns(self) + (peer ? clock_ns(peer) : 0);
}

static void mark(struct sample *s, clockid_t peer)
{
	mark_of(s, main_clk, peer);
}

static void per_op(double out[CLK_N], const struct sample *a, const struct sample *b, double n)
{
	out[CLK_CPU] = (double)(b->cpu - a->cpu) / n;
	out[CLK_WALL] = (double)(b->wall - a->wall) / n;
}

static int run_getppid(double out[CLK_N])
{
	struct sample a, b;
	int i;

	mark(&a, 0);
	for (i = 0; i < N_GETPPID; i++)
		syscall(SYS_getppid);
	mark(&b, 0);
	per_op(out, &a, &b, N_GETPPID);
	return 0;
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

/* a 16-byte ping-pong is 2 sends + 2 recvs, by this thread and the echo thread */
static int run_tcp(int cfd, double out[CLK_N])
{
	char buf[16] = "ping-pong-16byte";
	struct sample a, b;
	int i;

	mark(&a, echo_clk);
	for (i = 0; i < N_TCP; i++) {
		if (send(cfd, buf, sizeof(buf), 0) != sizeof(buf) || recv(cfd, buf, sizeof(buf), MSG_WAITALL) != sizeof(buf))
			return -1;
	}
	mark(&b, echo_clk);
	per_op(out, &a, &b, 4.0 * N_TCP);
	return 0;
}

static int pp[2][2];  /* the traced process's pipe ping-pong: main <-> pipe_main */
static int up[2][2];  /* the untraced pair's: udrv_main <-> uecho_main */

/* echoes bytes from the pipe pair p (p[0] in, p[1] out) until EOF */
static void *pipe_echo(int (*p)[2])
{
	char c;

	while (read(p[0][0], &c, 1) == 1)
		if (write(p[1][1], &c, 1) != 1)
			break;
	return NULL;
}

static void *pipe_main(void *arg)
{
	(void)arg;
	return pipe_echo(pp);
}

static void *uecho_main(void *arg)
{
	(void)arg;
	return pipe_echo(up);
}

/* a pipe round trip between two threads pinned to one CPU: 2 switches */
static int run_switch_on(int (*p)[2], clockid_t self, clockid_t peer, double out[CLK_N])
{
	struct sample a, b;
	char c = 'x';
	int i;

	mark_of(&a, self, peer);
	for (i = 0; i < N_SWITCH; i++)
		if (write(p[0][1], &c, 1) != 1 || read(p[1][0], &c, 1) != 1)
			return -1;
	mark_of(&b, self, peer);
	per_op(out, &a, &b, 2.0 * N_SWITCH);
	return 0;
}

static int run_switch(double out[CLK_N])
{
	return run_switch_on(pp, main_clk, pipe_clk, out);
}

/*
 * The untraced pair: udrv_main runs one ping-pong with uecho_main each time
 * main posts ugo, and posts udone with its result (the hand-over is outside
 * the measured interval). Both stay in the namespace the program began in.
 */
static sem_t ugo, udone;
static double uout[CLK_N];
static int urv, ustop;

static void *udrv_main(void *arg)
{
	(void)arg;
	for (;;) {
		while (sem_wait(&ugo) != 0)
			;
		if (ustop)
			return NULL;
		urv = run_switch_on(up, udrv_clk, uecho_clk, uout);
		sem_post(&udone);
	}
}

static int run_uswitch(double out[CLK_N])
{
	sem_post(&ugo);
	while (sem_wait(&udone) != 0)
		;
	memcpy(out, uout, sizeof(uout));
	return urv;
}

/*
 * Moves the calling thread into a new network namespace with its loopback
 * up; *ino: the namespace's inode (the collector's netns filter). Threads
 * it starts afterwards are in it; others stay where they were. Returns 0,
 * or -1 with a message.
 */
static int enter_netns(uint32_t *ino)
{
	struct ifreq ifr;
	struct stat st;
	int fd;

	if (unshare(CLONE_NEWNET) != 0) {
		perror("bench_syscall: failed to unshare the network namespace");
		return -1;
	}
	if ((fd = socket(AF_INET, SOCK_DGRAM, 0)) < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0 || (ifr.ifr_flags |= IFF_UP, ioctl(fd, SIOCSIFFLAGS, &ifr)) != 0) {
		perror("bench_syscall: failed to bring up 'lo' in the new namespace");
		close(fd);
		return -1;
	}
	close(fd);
	if (stat("/proc/thread-self/ns/net", &st) != 0) {
		perror("bench_syscall: failed to stat '/proc/thread-self/ns/net'");
		return -1;
	}
	*ino = (uint32_t)st.st_ino;
	return 0;
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

static int drain_win(void *arg, const struct rm_totals *w)
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

/* The collector's consumer, as in rametr-collector: poll with a 50 ms timeout. */
static void *consumer_main(void *arg)
{
	struct consumer *c = arg;

	while (!c->stop)
		col_bpf_poll(c->b, c->sink, 50);
	return NULL;
}

static uint32_t ring_bytes; /* --ring: part ring size, 0 = the collector's default */
static int follow_wakeups;  /* --follow-wakeups: the collector option of that name */
static int cpu_counters = 1; /* 0 with --cpu-slices: the collector option of that name */
static int follow_replies = 1; /* 0 with --no-follow-replies: as the collector, on by default */
static int handoffs_from_start; /* --handoffs-from-start: the collector option of that name */
static uint32_t netns_ino;      /* the namespace of the traced threads (the collector's filter) */
#define PROF_ROUNDS 3       /* profile runs per stage; the median is printed */

static const char *stage_name[RM_STAGE_COUNT] = RM_STAGE_NAMES;

/* All programs' runs and run time so far (BPF run-time statistics). */
static void stat_sum(const struct col_bpf *b, double *runs, double *ns)
{
	struct col_bpf_prog_stat ps[32];
	int n = col_bpf_prog_stats(b, ps, 32), i;

	*runs = *ns = 0;
	for (i = 0; i < n; i++) {
		*runs += (double)ps[i].runs;
		*ns += (double)ps[i].run_ns;
	}
}

/* the workloads profiled per operation: hook runs and ns per operation */
enum { PO_TCP, PO_USWITCH, PO_N };
static const char *po_name[PO_N] = { "socket syscall", "untraced switch" };

/* One run of the workloads with the kernel's BPF run-time statistics on; po[k][0..1]: runs, ns per operation. */
static int profile_once(int cfd, int stage, const struct col_sink *sink, struct col_bpf_prog_stat *ps, int *nps,
			struct col_bpf_stats *st, double po[PO_N][2])
{
	double r0, n0, r1, n1;
	struct col_bpf_cfg cfg = { .window_ns = 1000000000ULL, .bench_stage = (uint32_t)stage,
				   .ring_bytes = ring_bytes, .follow_wakeups = follow_wakeups,
				   .follow_replies = follow_replies, .cpu_counters = cpu_counters,
				   .handoffs_from_start = handoffs_from_start, .netns_ino = netns_ino };
	struct consumer c = { NULL, sink, 0 };
	struct col_bpf *b = NULL;
	double m[CLK_N];
	int sfd, rv;
	pthread_t ct;

	if ((rv = col_bpf_open(&b, &cfg)) != RM_OK) {
		fprintf(stderr, "bench_syscall: collector unavailable: %s\n", rm_strerror(rv));
		return -1;
	}
	if ((sfd = bpf_enable_stats(BPF_STATS_RUN_TIME)) < 0) {
		fprintf(stderr, "bench_syscall: failed to enable bpf run-time statistics\n");
		col_bpf_close(b);
		return -1;
	}
	c.b = b;
	if (pthread_create(&ct, NULL, consumer_main, &c)) {
		close(sfd);
		col_bpf_close(b);
		return -1;
	}
	pin(ct, 1);
	rv = run_getppid(m);
	stat_sum(b, &r0, &n0);
	rv = rv || run_tcp(cfd, m);
	stat_sum(b, &r1, &n1);
	po[PO_TCP][0] = (r1 - r0) / (4.0 * N_TCP);
	po[PO_TCP][1] = (n1 - n0) / (4.0 * N_TCP);
	rv = rv || run_uswitch(m);
	stat_sum(b, &r0, &n0);
	po[PO_USWITCH][0] = (r0 - r1) / (2.0 * N_SWITCH);
	po[PO_USWITCH][1] = (n0 - n1) / (2.0 * N_SWITCH);
	rv = rv || run_switch(m);
	c.stop = 1;
	pthread_join(ct, NULL);
	close(sfd);
	col_bpf_poll(b, sink, 0);
	col_bpf_get_stats(b, st);
	*nps = col_bpf_prog_stats(b, ps, 32);
	col_bpf_close(b);
	return rv ? -1 : 0;
}

/* PROF_ROUNDS profile runs of one stage; prints the median ns/run per program. */
static int profile(int cfd, int stage, const struct col_sink *sink)
{
	struct col_bpf_prog_stat ps[PROF_ROUNDS][32];
	struct col_bpf_stats st;
	uint64_t parts = 0, dropped = 0;
	double po[PO_N][2][PROF_ROUNDS], one[PO_N][2];
	int n[PROF_ROUNDS], r, i, k;

	for (r = 0; r < PROF_ROUNDS; r++) {
		if (profile_once(cfd, stage, sink, ps[r], &n[r], &st, one) != 0)
			return -1;
		for (k = 0; k < PO_N; k++) {
			po[k][0][r] = one[k][0];
			po[k][1][r] = one[k][1];
		}
		parts += st.parts;
		dropped += st.dropped_parts;
	}
	printf("profile %s: parts %llu dropped %llu\n", stage_name[stage], (unsigned long long)parts,
	       (unsigned long long)dropped);
	for (i = 0; i < n[0]; i++) {
		double v[PROF_ROUNDS];
		uint64_t runs = 0;

		for (r = 0; r < PROF_ROUNDS; r++) {
			/* same object, same program order in every run */
			v[r] = i < n[r] && ps[r][i].runs ? (double)ps[r][i].run_ns / (double)ps[r][i].runs : 0;
			runs += i < n[r] ? ps[r][i].runs : 0;
		}
		if (runs)
			printf("profile %s: %s runs %llu ns/run %.1f\n", stage_name[stage], ps[0][i].name,
			       (unsigned long long)(runs / PROF_ROUNDS), median(v, PROF_ROUNDS));
	}
	for (k = 0; k < PO_N; k++)
		printf("profile %s: per %s: hook runs %.2f ns %.1f\n", stage_name[stage], po_name[k],
		       median(po[k][0], PROF_ROUNDS), median(po[k][1], PROF_ROUNDS));
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: bench_syscall [--rounds N] [--breakdown] [--profile-only] [--ring BYTES]\n"
		   "                     [--follow-wakeups] [--cpu-slices] [--cpu-counters] [--no-follow-replies]\n"
		   "                     [--handoffs-from-start]\n"
		   "  --rounds N    alternating rounds, 3..%d (default 9)\n"
		   "  --breakdown   also run the collector's benchmark stages (rametr.h RM_STAGE_*)\n"
		   "  --profile-only  only the profile lines (hook run times), no alternating rounds\n"
		   "  --ring BYTES  size of the part ring (power of 2; default: the collector's)\n"
		   "  --follow-wakeups  attach with the collector's wake-up chains option\n"
		   "  --cpu-slices      attach with the collector's option of that name\n"
		   "  --no-follow-replies  attach with the collector's option of that name\n"
		   "  --handoffs-from-start  attach with the collector's option of that name (the hand-off\n"
		   "                    hook at once, not at the first request answered by another thread)\n",
		MAX_ROUNDS);
}

/* [variant][op][clock][round] */
static double res[NV][OP_N][CLK_N][MAX_ROUNDS];

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	uint64_t parts = 0, dropped = 0, cons_cpu = 0, full_parts = 0;
	struct col_sink sink = { &parts, drain, drain_win };
	int rounds = 9, breakdown = 0, profile_only = 0, lfd, cfd, one = 1, r, i, v, op, ck, rv;
	pthread_t th, ph, uth, ueth;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--breakdown")) {
			breakdown = 1;
		} else if (!strcmp(argv[i], "--ring") && i + 1 < argc) {
			ring_bytes = (uint32_t)strtoul(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--cpu-slices")) {
			cpu_counters = 0;
		} else if (!strcmp(argv[i], "--no-follow-replies")) {
			follow_replies = 0;
		} else if (!strcmp(argv[i], "--handoffs-from-start")) {
			handoffs_from_start = 1;
		} else if (!strcmp(argv[i], "--cpu-counters")) {
			cpu_counters = 1; /* the collector's option of that name: this program's default */
		} else if (!strcmp(argv[i], "--follow-wakeups")) {
			follow_wakeups = 1;
			cpu_counters = 0; /* wake-up chains need the context-switch hook */
		} else if (!strcmp(argv[i], "--profile-only")) {
			profile_only = 1;
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = atoi(argv[++i]);
			if (rounds < 3 || rounds > MAX_ROUNDS) {
				fprintf(stderr, "bench_syscall: bad round count '%s'\n", argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "bench_syscall: unknown option '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	rm_log_init("bench_syscall");
	/* the untraced pair first, then everything else in a namespace of its own */
	if (sem_init(&ugo, 0, 0) || sem_init(&udone, 0, 0) || pipe(up[0]) || pipe(up[1]) ||
	    pthread_create(&uth, NULL, udrv_main, NULL) || pthread_create(&ueth, NULL, uecho_main, NULL) ||
	    pthread_getcpuclockid(uth, &udrv_clk) || pthread_getcpuclockid(ueth, &uecho_clk))
		return 1;
	pin(uth, 0);
	pin(ueth, 0);
	if (enter_netns(&netns_ino) != 0)
		return 1;
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1) || getsockname(lfd, (struct sockaddr *)&a, &alen))
		return 1;
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(cfd, (struct sockaddr *)&a, sizeof(a)) || (echo_fd = accept(lfd, NULL, NULL)) < 0)
		return 1;
	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(echo_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (pipe(pp[0]) || pipe(pp[1]))
		return 1;
	if (pthread_create(&th, NULL, echo_main, NULL) || pthread_create(&ph, NULL, pipe_main, NULL))
		return 1;
	if (pthread_getcpuclockid(pthread_self(), &main_clk) || pthread_getcpuclockid(th, &echo_clk) ||
	    pthread_getcpuclockid(ph, &pipe_clk))
		return 1;
	/* every service thread on CPU 0 (the consumer gets CPU 1): loopback TCP's
	 * softirq work then runs in the sending thread, not wherever it lands */
	pin(pthread_self(), 0);
	pin(th, 0);
	pin(ph, 0);

	for (r = 0; r < rounds && !profile_only; r++) {
		for (i = 0; i < NV; i++) {
			/* alternate, and reverse the order every other round */
			struct col_bpf_cfg cfg = { .window_ns = 1000000000ULL, .ring_bytes = ring_bytes,
						   .follow_wakeups = follow_wakeups, .follow_replies = follow_replies,
						   .cpu_counters = cpu_counters, .handoffs_from_start = handoffs_from_start,
						   .netns_ino = netns_ino };
			struct consumer c = { NULL, &sink, 0 };
			double m[OP_N][CLK_N];
			struct col_bpf *b = NULL;
			clockid_t cclk = 0;
			uint64_t c0 = 0, p0 = parts;
			pthread_t ct;

			v = r % 2 ? NV - 1 - i : i;
			if (!breakdown && v != V_DETACHED && v != V_FULL)
				continue;
			if (v != V_DETACHED) {
				cfg.bench_stage = (uint32_t)variants[v].stage;
				if ((rv = col_bpf_open(&b, &cfg)) != RM_OK) {
					fprintf(stderr, "bench_syscall: collector unavailable: %s\n", rm_strerror(rv));
					return 1;
				}
				c.b = b;
				if (pthread_create(&ct, NULL, consumer_main, &c))
					return 1;
				pin(ct, 1);
				pthread_getcpuclockid(ct, &cclk);
				c0 = clock_ns(cclk);
			}
			if (run_getppid(m[OP_GETPPID]) || run_tcp(cfd, m[OP_TCP]) || run_uswitch(m[OP_USWITCH]) ||
			    run_switch(m[OP_SWITCH])) {
				fprintf(stderr, "bench_syscall: ping-pong failed\n");
				return 1;
			}
			if (b) {
				struct col_bpf_stats st;

				c.stop = 1;
				if (v == V_FULL)
					cons_cpu += clock_ns(cclk) - c0;
				pthread_join(ct, NULL);
				col_bpf_poll(b, &sink, 0);
				col_bpf_get_stats(b, &st);
				dropped += st.dropped_parts;
				if (v == V_FULL)
					full_parts += parts - p0;
				col_bpf_close(b);
			}
			for (op = 0; op < OP_N; op++)
				for (ck = 0; ck < CLK_N; ck++)
					res[v][op][ck][r] = m[op][ck];
		}
	}
	if (profile_only)
		goto prof;
	printf("collector overhead, median of %d alternating rounds (same run; ns per operation, CPU time of the "
	       "service's threads unless 'wall')\n", rounds);
	printf("%-34s %10s %10s %10s %8s\n", "operation", "detached", "attached", "added", "ratio");
	for (ck = 0; ck < CLK_N; ck++) {
		for (v = 1; v < NV; v++) {
			if (!breakdown && v != V_FULL)
				continue;
			if (ck == CLK_WALL && v != V_FULL)
				continue;
			for (op = 0; op < OP_N; op++) {
				double d[MAX_ROUNDS], q[MAX_ROUNDS];
				char label[96];

				for (r = 0; r < rounds; r++) {
					d[r] = res[v][op][ck][r] - res[V_DETACHED][op][ck][r];
					q[r] = res[v][op][ck][r] / res[V_DETACHED][op][ck][r];
				}
				if (ck == CLK_WALL)
					snprintf(label, sizeof(label), "wall: %s", op_short[op]);
				else if (v != V_FULL)
					snprintf(label, sizeof(label), "%s%s", variants[v].label, op_short[op]);
				else
					snprintf(label, sizeof(label), "%s", op_label[op]);
				printf("%-34s %10.1f %10.1f %+10.1f %8.3f\n", label, median(res[V_DETACHED][op][ck], rounds),
				       median(res[v][op][ck], rounds), median(d, rounds), median(q, rounds));
			}
		}
	}
	printf("consumer CPU per part %.1f ns (collector thread, not the service)\n",
	       full_parts ? (double)cons_cpu / (double)full_parts : 0.0);
	printf("(%llu segment parts drained while attached, %llu dropped in the kernel)\n", (unsigned long long)parts,
	       (unsigned long long)dropped);
prof:
	for (v = 1; v < NV; v++) {
		if (!breakdown && v != V_FULL && variants[v].stage != RM_STAGE_HOOKS)
			continue;
		if (profile(cfd, variants[v].stage, &sink) != 0)
			return 1;
	}
	shutdown(cfd, SHUT_RDWR);
	close(pp[0][1]);
	close(up[0][1]);
	ustop = 1;
	sem_post(&ugo);
	pthread_join(th, NULL);
	pthread_join(ph, NULL);
	pthread_join(uth, NULL);
	pthread_join(ueth, NULL);
	return 0;
}
