/*
 * bench_gosched.c - what following a Go program's goroutines by uprobes
 * costs, and how much there is to follow. col_gort_inspect finds
 * runtime.execute and goid's offset in --binary; then
 *
 *   1. the trap: a function of this program called --calls times, alone,
 *      with an empty uprobe and with gosched.bpf.c's gs_execute on it: the
 *      nanoseconds each adds per call (the kernel's uprobe trap, then the
 *      trap plus the probe), for a function whose first instruction the
 *      kernel executes out of line (single-stepped, as runtime.execute's
 *      stack-bound compare) and for one that starts with a nop (skipped);
 *   2. the Go program: gs_execute on runtime.execute of --binary (every
 *      process running it, or --pid) for --seconds: goroutine starts, how
 *      many switched a thread to another goroutine, how many resumed a
 *      goroutine on another thread than its last, and the probe's own run
 *      time per hit from the kernel's BPF statistics.
 *
 * Prints "gosched: ready" once attached to the Go program (a load may start
 * then), and lines "gosched: key=value ...". Needs root.
 * --entry probes runtime.execute's first instruction instead of col_gort's probe_off.
 * Usage: bench_gosched --binary PATH [--pid PID] [--seconds N] [--calls N] [--entry]
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "col_gort.h"
#include "gosched.skel.h"
#include "rm_err.h"
#include "banned.h"

struct gs_counts {
	uint64_t hits, bad_reads, switches, hops, new_goids; /* as gosched.bpf.c */
};

int gs_target(int x);
int gs_target_nop(int x);
int gs_target_jcc(int x);

/* The probed functions: x + 1, starting with an lea (executed out of line under a uprobe) or with a nop;
 * and one whose second instruction is a conditional jump (probed there, as runtime.execute's jbe). */
__asm__(".text\n.globl gs_target\n.type gs_target, @function\ngs_target:\n\tlea 1(%rdi), %eax\n\tret\n"
	".size gs_target, .-gs_target\n"
	".globl gs_target_nop\n.type gs_target_nop, @function\ngs_target_nop:\n\tnop\n\tlea 1(%rdi), %eax\n\tret\n"
	".size gs_target_nop, .-gs_target_nop\n"
	".globl gs_target_jcc\n.type gs_target_jcc, @function\ngs_target_jcc:\n\tcmp %rdi, %rdi\n\tjne 1f\n"
	"1:\tlea 1(%rdi), %eax\n\tret\n.size gs_target_jcc, .-gs_target_jcc\n");

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ns per call of fn over calls calls (best of 3 rounds). */
static double per_call(int (*volatile fn)(int), long calls)
{
	double best = 0;
	int r, acc = 0;

	for (r = 0; r < 3; r++) {
		uint64_t t0 = mono_ns();
		long i;
		double ns;

		for (i = 0; i < calls; i++)
			acc = fn(acc);
		ns = (double)(mono_ns() - t0) / (double)calls;
		if (r == 0 || ns < best)
			best = ns;
	}
	return acc == -1 ? 0 : best;
}

/* The program's run count and run time so far (BPF statistics). */
static void prog_stats(const struct bpf_program *p, uint64_t *cnt, uint64_t *ns)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	*cnt = *ns = 0;
	if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) == 0) {
		*cnt = info.run_cnt;
		*ns = info.run_time_ns;
	}
}

static int read_counts(struct gosched_bpf *skel, struct gs_counts *sum)
{
	int ncpu = libbpf_num_possible_cpus(), i;
	struct gs_counts *per;
	__u32 zero = 0;

	memset(sum, 0, sizeof(*sum));
	if (ncpu <= 0 || !(per = calloc((size_t)ncpu, sizeof(*per))))
		return RM_ENOMEM;
	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.counts), &zero, per) != 0) {
		free(per);
		return RM_EBPF;
	}
	for (i = 0; i < ncpu; i++) {
		sum->hits += per[i].hits;
		sum->bad_reads += per[i].bad_reads;
		sum->switches += per[i].switches;
		sum->hops += per[i].hops;
		sum->new_goids += per[i].new_goids;
	}
	free(per);
	return RM_OK;
}

/* ns added per call of fn (named name) by prog attached at byte at of it; < 0 if it cannot be attached. */
static double added(struct bpf_program *prog, int (*fn)(int), const char *name, long calls, double base, size_t at)
{
	LIBBPF_OPTS(bpf_uprobe_opts, o, .func_name = name);
	struct bpf_link *l;
	double ns;

	if (!(l = bpf_program__attach_uprobe_opts(prog, 0, "/proc/self/exe", at, &o))) {
		fprintf(stderr, "gosched: failed to attach a uprobe to %s: %s\n", name, strerror(errno));
		return -1;
	}
	ns = per_call(fn, calls);
	bpf_link__destroy(l);
	return ns - base;
}

/* Part 1: the trap's cost per call, alone and with gs_execute, out of line and on a nop. */
static int trap_cost(struct gosched_bpf *skel, long calls)
{
	double base = per_call(gs_target, calls), nbase = per_call(gs_target_nop, calls);
	double e = added(skel->progs.gs_empty, gs_target, "gs_target", calls, base, 0);
	double f = added(skel->progs.gs_execute, gs_target, "gs_target", calls, base, 0);
	double en = added(skel->progs.gs_empty, gs_target_nop, "gs_target_nop", calls, nbase, 0);
	double jbase = per_call(gs_target_jcc, calls);
	double ej = added(skel->progs.gs_empty, gs_target_jcc, "gs_target_jcc", calls, jbase, 3);
	double fj = added(skel->progs.gs_execute, gs_target_jcc, "gs_target_jcc", calls, jbase, 3);

	if (e < 0 || f < 0 || en < 0 || ej < 0 || fj < 0)
		return RM_EBPF;
	printf("gosched: call_ns=%.1f out_of_line: empty_uprobe_adds_ns=%.1f gs_execute_adds_ns=%.1f; "
	       "on_nop: empty_adds_ns=%.1f; on_jcc: empty_adds_ns=%.1f gs_execute_adds_ns=%.1f; calls=%ld\n", base, e,
	       f, en, ej, fj, calls);
	return RM_OK;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "binary", required_argument, NULL, 'b' },
					      { "pid", required_argument, NULL, 'p' },
					      { "seconds", required_argument, NULL, 's' },
					      { "calls", required_argument, NULL, 'c' },
					      { "entry", no_argument, NULL, 'e' },
					      { NULL, 0, NULL, 0 } };
	const char *binary = NULL;
	long pid = -1, seconds = 10, calls = 20000;
	struct gosched_bpf *skel;
	struct col_gort g;
	struct gs_counts c;
	struct bpf_link *l;
	uint64_t cnt0, ns0, cnt1, ns1;
	int opt, rv, stats_fd, entry = 0;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'b': binary = optarg; break;
		case 'p': pid = strtol(optarg, NULL, 10); break;
		case 's': seconds = strtol(optarg, NULL, 10); break;
		case 'c': calls = strtol(optarg, NULL, 10); break;
		case 'e': entry = 1; break;
		default: return 2;
		}
	}
	if (!binary || seconds <= 0 || calls <= 0 || pid == 0) {
		fprintf(stderr, "usage: bench_gosched --binary PATH [--pid PID] [--seconds N] [--calls N]\n");
		return 2;
	}
	if ((rv = col_gort_inspect(binary, &g)) != RM_OK) {
		fprintf(stderr, "gosched: '%s' cannot be followed: %s\n", binary, rm_strerror(rv));
		return 1;
	}
	printf("gosched: binary=%s version=%s execute_off=0x%" PRIx64 " probe_off=0x%" PRIx64 " goid_off=%" PRIu64
	       " probed_at=%s\n", binary, g.version, g.execute_off, g.probe_off, g.goid_off, entry ? "entry" : "probe_off");
	if (!(skel = gosched_bpf__open())) {
		fprintf(stderr, "gosched: failed to open the BPF object\n");
		return 1;
	}
	skel->rodata->goid_off = g.goid_off;
	if (gosched_bpf__load(skel) != 0) {
		fprintf(stderr, "gosched: failed to load the BPF object\n");
		gosched_bpf__destroy(skel);
		return 1;
	}
	if ((stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME)) < 0)
		fprintf(stderr, "gosched: BPF run-time statistics unavailable: %s\n", strerror(errno));
	rv = trap_cost(skel, calls);
	if (rv == RM_OK && (rv = read_counts(skel, &c)) == RM_OK) {
		/* part 2 counts from here: the trap round's garbage reads are left behind */
		__u32 zero = 0;
		int ncpu = libbpf_num_possible_cpus();
		struct gs_counts *z = calloc((size_t)(ncpu > 0 ? ncpu : 1), sizeof(*z));

		if (!z || bpf_map_update_elem(bpf_map__fd(skel->maps.counts), &zero, z, BPF_ANY) != 0)
			rv = RM_EBPF;
		free(z);
	}
	if (rv == RM_OK) {
		prog_stats(skel->progs.gs_execute, &cnt0, &ns0);
		l = bpf_program__attach_uprobe(skel->progs.gs_execute, false, (pid_t)pid, binary,
					       (size_t)(entry ? g.execute_off : g.probe_off));
		if (!l) {
			fprintf(stderr, "gosched: failed to attach to runtime.execute of '%s': %s\n", binary, strerror(errno));
			rv = RM_EBPF;
		} else {
			printf("gosched: ready\n");
			fflush(stdout);
			sleep((unsigned)seconds);
			prog_stats(skel->progs.gs_execute, &cnt1, &ns1);
			bpf_link__destroy(l);
			if ((rv = read_counts(skel, &c)) == RM_OK)
				printf("gosched: seconds=%ld hits=%" PRIu64 " switches=%" PRIu64 " hops=%" PRIu64
				       " new_goids=%" PRIu64 " bad_reads=%" PRIu64 " probe_ns_per_hit=%.1f\n",
				       seconds, c.hits, c.switches, c.hops, c.new_goids, c.bad_reads,
				       cnt1 > cnt0 ? (double)(ns1 - ns0) / (double)(cnt1 - cnt0) : 0.0);
		}
	}
	if (stats_fd >= 0)
		close(stats_fd);
	gosched_bpf__destroy(skel);
	return rv == RM_OK ? 0 : 1;
}
