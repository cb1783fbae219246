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
 * With --profile the kernel's BPF run-time statistics are on while attached
 * (they add ~55 ns of clock reads to every run) and at exit, per program
 * that ran, then the sum over programs:
 *   attach: prog rm_sock_send runs=1234 ns_per_run=321.0
 *   attach: hooks runs=12345 ns=1234567
 * which, divided by the requests a load generator made meanwhile, is the
 * CPU the hooks took per request whatever else the machine was doing.
 * --stage hooks|clock|task|state|noemit|full runs the hooks only that far
 * (rametr.h RM_STAGE_*; default full): the macro cost of being attached at
 * all, of the clock read, of the threads' state lookups, of the socket
 * reads, of the segmenter without records.
 * --ring BYTES sizes the part ring (a power of 2; default the collector's).
 * Go programs' goroutine labels are on, as in the collector (their
 * programs' statistics are among the hooks'; the creation uprobe's runs are
 * also printed as "attach: uprobe traps=N", whose trap cost, ~0.7-1 us each
 * here, is not in its run time); --no-go-labels turns them off.
 * --netns NAME restricts the hooks to the threads of that network namespace
 * (/var/run/netns/NAME or a path), as rametr-collector --netns: threads of
 * other namespaces (a load generator) leave the hooks at their first test.
 * Usage: bench_attach [--profile] [--stage NAME] [--ring BYTES] [--netns NAME] [--cpu-slices] [--cpu-counters]
 *                     [--no-follow-replies]
 */
#include <signal.h>
#include <bpf/bpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
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

static int count_window(void *arg, const struct rm_totals *w)
{
	(void)arg;
	(void)w;
	return RM_OK;
}

static const char *const stage_names[RM_STAGE_COUNT] = RM_STAGE_NAMES;


static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct col_bpf_cfg cfg = { .window_ns = 1000000000ULL, .self_tgid = (uint32_t)getpid(), .cpu_counters = 1,
				   .follow_replies = 1, .go_labels = 1 }; /* the collector's default */
	uint64_t parts = 0;
	struct col_sink sink = { &parts, count_part, count_window };
	struct col_bpf_stats st;
	struct sigaction sa;
	struct col_bpf *b;
	struct timespec rt, mono;
	struct col_bpf_prog_stat ps[32];
	uint64_t runs = 0, ns = 0, traps = 0;
	double t0;
	int rv, prof = 0, sfd = -1, n, i;

	rm_log_init("bench_attach");
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--profile") == 0) {
			prof = 1;
		} else if (strcmp(argv[i], "--stage") == 0 && i + 1 < argc &&
			   bench_name_index(argv[i + 1], stage_names, RM_STAGE_COUNT, &cfg.bench_stage)) {
			i++;
		} else if (strcmp(argv[i], "--cpu-slices") == 0) {
			cfg.cpu_counters = 0;
		} else if (strcmp(argv[i], "--no-follow-replies") == 0) {
			cfg.follow_replies = 0;
		} else if (strcmp(argv[i], "--no-go-labels") == 0) {
			cfg.go_labels = 0;
		} else if (strcmp(argv[i], "--handoffs-from-start") == 0) {
			cfg.handoffs_from_start = 1;
		} else if (strcmp(argv[i], "--go-creations-from-start") == 0) {
			cfg.go_creations_from_start = 1;
		} else if (strcmp(argv[i], "--cpu-counters") == 0) {
			cfg.cpu_counters = 1; /* the collector's option of that name: this program's default */
		} else if (strcmp(argv[i], "--ring") == 0 && i + 1 < argc) {
			cfg.ring_bytes = (uint32_t)strtoul(argv[++i], NULL, 0);
		} else if (strcmp(argv[i], "--netns") == 0 && i + 1 < argc) {
			char path[256];
			struct stat nst;

			i++;
			snprintf(path, sizeof(path), strchr(argv[i], '/') ? "%s" : "/var/run/netns/%s", argv[i]);
			if (stat(path, &nst) != 0) {
				rm_log_error("failed to open network namespace '%s'", path);
				return 2;
			}
			cfg.netns_ino = (uint32_t)nst.st_ino;
		} else {
			fprintf(stderr, "usage: bench_attach [--profile] [--stage hooks|clock|task|state|noemit|full]"
					" [--ring BYTES] [--netns NAME] [--cpu-slices] [--cpu-counters] [--no-follow-replies] [--handoffs-from-start] [--no-go-labels] [--go-creations-from-start] (runs until SIGINT or SIGTERM)\n");
			return 2;
		}
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
	if (prof && (sfd = bpf_enable_stats(BPF_STATS_RUN_TIME)) < 0) {
		rm_log_error("failed to enable bpf run-time statistics");
		col_bpf_close(b);
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
	if (prof) {
		n = col_bpf_prog_stats(b, ps, 32);
		for (i = 0; i < n; i++) {
			if (!ps[i].runs)
				continue;
			printf("attach: prog %s runs=%llu ns_per_run=%.1f\n", ps[i].name, (unsigned long long)ps[i].runs,
			       (double)ps[i].run_ns / (double)ps[i].runs);
			runs += ps[i].runs;
			ns += ps[i].run_ns;
			if (strcmp(ps[i].name, "golabel_newg") == 0)
				traps += ps[i].runs;
		}
		printf("attach: hooks runs=%llu ns=%llu\n", (unsigned long long)runs, (unsigned long long)ns);
		/* a uprobe's trap costs the traced thread more than its program's run time */
		printf("attach: uprobe traps=%llu\n", (unsigned long long)traps);
		close(sfd);
	}
	col_bpf_close(b);
	printf("attach: seconds=%.1f parts=%llu dropped=%llu\n", mono_s() - t0, (unsigned long long)parts,
	       (unsigned long long)st.dropped_parts);
	return 0;
}
