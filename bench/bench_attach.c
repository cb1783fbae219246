/*
 * bench_attach.c - the collector's kernel side alone, for splitting the
 * overhead measured by scripts/bench.sh: loads and attaches the eBPF
 * backend (col_bpf, the code rametr-collector runs, with the same 100 ms
 * poll) and drains the ring into a sink that only counts, until SIGINT or
 * SIGTERM. What a monitored service loses with this running is the cost of
 * the hooks and of waking the consumer; the rest of what it loses with
 * rametr-collector is the user-space pipeline (batching, encoding, sending)
 * and the aggregator.
 *
 * Prints "attach: ready" once attached, and at exit
 *   attach: seconds=12.0 parts=123456 dropped=0
 * Usage: bench_attach
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "col_bpf.h"
#include "rm_err.h"
#include "banned.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int count_part(void *arg, const struct rm_part *p)
{
	(void)p;
	++*(uint64_t *)arg;
	return RM_OK;
}

static int count_window(void *arg, const struct col_window *w)
{
	(void)arg;
	(void)w;
	return RM_OK;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct col_bpf_cfg cfg = { .window_ns = 1000000000ULL, .self_tgid = (uint32_t)getpid() };
	uint64_t parts = 0;
	struct col_sink sink = { &parts, count_part, count_window };
	struct col_bpf_stats st;
	struct sigaction sa;
	struct col_bpf *b;
	struct timespec rt, mono;
	double t0;
	int rv;

	(void)argv;
	rm_log_init("bench_attach");
	if (argc != 1) {
		fprintf(stderr, "usage: bench_attach (runs until SIGINT or SIGTERM)\n");
		return 2;
	}
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	cfg.offset_ns = ((int64_t)rt.tv_sec - mono.tv_sec) * 1000000000LL + (rt.tv_nsec - mono.tv_nsec);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if ((rv = col_bpf_open(&b, &cfg)) != RM_OK) {
		rm_log_error("failed to attach the eBPF backend: %s", rm_strerror(rv));
		return 1;
	}
	printf("attach: ready\n");
	fflush(stdout);
	t0 = mono_s();
	while (!stop)
		if ((rv = col_bpf_poll(b, &sink, 100)) != RM_OK)
			rm_log_error("backend poll failed: %s", rm_strerror(rv));
	col_bpf_finish(b, &sink);
	col_bpf_get_stats(b, &st);
	col_bpf_close(b);
	printf("attach: seconds=%.1f parts=%llu dropped=%llu\n", mono_s() - t0, (unsigned long long)parts,
	       (unsigned long long)st.dropped_parts);
	return 0;
}
