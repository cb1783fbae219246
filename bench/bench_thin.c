/*
 * bench_thin.c - what a thin kernel side would cost (docs/thin-kernel.md):
 * attaches thin_edges.bpf.c's probes in one variant and drains their ring
 * into a consumer that reads and counts every record, until SIGINT or
 * SIGTERM; or, with --replay-requests, times the user-space segmenter
 * (col_replay, segmenter.h) on a synthetic event stream, the work a thin
 * collector would move out of the kernel.
 *
 * Probe mode prints "thin: ready" once attached (a load may start then) and
 * at exit, with --profile (the kernel's BPF run-time statistics on while
 * attached; they add two clock reads to every run), per program that ran and
 * summed:
 *   thin: prog thin_recv runs=1234 ns_per_run=56.0
 *   thin: hooks runs=12345 ns=1234567
 * then always
 *   thin: variant=full seconds=5.0 records=123 ring_bytes=7872 left_in_batches=3 drops=0 direct=0
 *         consumer_ns=123456 consumer_ns_per_record=12.3 socket_edges=120 stale_edges=80
 * consumer_ns is this program's own CPU (the ring drain thread: polls,
 * wake-ups, reading every record) over the attached time, idle polls
 * included. Records still in the per-CPU batches at exit are counted from
 * the map (left_in_batches), not drained.
 *
 * Replay mode prints
 *   thin: replay events=400000 parse_ns_per_event=210.0 replay_ns_per_event=350.0 segmenter_ns_per_event=140.0
 *         parts=... threads=...
 * replay_ns is col_replay_buf on the stream in memory (parsing included),
 * parse_ns the parser alone over the same text; their difference is the
 * segmenter and its user-space environment per event (best of 3 runs each).
 *
 * --dump N prints the first N records drained ("thin: rec kind=... cookie=... seq=...").
 * Usage: bench_thin [--variant empty|netns|full|ktime|task|record|lean] [--netns NAME] [--batch N] [--profile] [--dump N]
 *        bench_thin --replay-requests N
 * Needs root (probe mode).
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "col_events.h"
#include "col_replay.h"
#include "rm_err.h"
#include "thin_edges.h"
#include "thin_edges.skel.h"
#include "banned.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What the consumer read: every record is touched, as a segmenter would. */
struct drain {
	uint64_t records, ring_bytes, bytes, bad;
	uint64_t dump; /* records still to print (--dump) */
	/* socket edges whose thread's cpu_ns equals its previous socket edge's:
	 * the runqueue clock had not moved since (the slice is left for later) */
	uint64_t sock_edges, stale;
	uint32_t last_pid[1 << 16];
	uint64_t last_cpu[1 << 16];
};

static int on_batch(void *ctx, void *data, size_t size)
{
	struct drain *d = ctx;
	const struct thin_rec *r = data;
	size_t i, n = size / sizeof(*r);

	d->ring_bytes += size;
	for (i = 0; i < n; i++) {
		uint32_t kind = r[i].flags & THIN_F_KIND;

		if (kind < THIN_RECV || kind > THIN_EXIT)
			d->bad++;
		d->bytes += r[i].len;
		if (kind == THIN_RECV || kind == THIN_SEND) {
			uint32_t h = r[i].pid & 0xffff;

			d->sock_edges++;
			if (d->last_pid[h] == r[i].pid && d->last_cpu[h] == r[i].cpu_ns)
				d->stale++;
			d->last_pid[h] = r[i].pid;
			d->last_cpu[h] = r[i].cpu_ns;
		}
		if (d->dump) {
			d->dump--;
			printf("thin: rec kind=%u cpu=%u pid=%u tgid=%u cookie=%llu seq=%u len=%u seq_valid=%u cpu_ns=%llu"
			       " slice_ns=%llu ts=%llu run_delay=%llu nvcsw=%u\n",
			       kind, r[i].flags >> THIN_F_CPU_SHIFT, r[i].pid, r[i].tgid, (unsigned long long)r[i].cookie,
			       r[i].seq, r[i].len, !!(r[i].flags & THIN_F_SEQ), (unsigned long long)r[i].cpu_ns,
			       (unsigned long long)r[i].slice_ns, (unsigned long long)r[i].ts,
			       (unsigned long long)r[i].run_delay, r[i].nvcsw);
		}
	}
	d->records += n;
	if (size % sizeof(*r))
		d->bad++;
	return 0;
}

static const char *const variant_names[THIN_VARIANTS] = THIN_VARIANT_NAMES;


/* Records held in the per-CPU batches (written to the ring at the next edge on their CPU). */
static uint64_t left_in_batches(struct thin_edges_bpf *skel)
{
	int ncpu = libbpf_num_possible_cpus(), i;
	size_t vsz = sizeof(uint32_t) * 2 + sizeof(uint64_t) + sizeof(struct thin_rec) * THIN_BATCH_MAX;
	uint32_t k = 0;
	uint64_t n = 0;
	char *v;

	if (ncpu <= 0 || !(v = calloc((size_t)ncpu, vsz)))
		return 0;
	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.batches), &k, v) == 0)
		for (i = 0; i < ncpu; i++)
			n += *(uint32_t *)(v + (size_t)i * vsz);
	free(v);
	return n;
}

static int probe_mode(uint32_t variant, uint32_t netns_ino, uint32_t batch, int prof, uint64_t dump)
{
	static const char *const names[THIN_VARIANTS] = THIN_VARIANT_NAMES;
	struct thin_edges_bpf *skel;
	struct ring_buffer *rb = NULL;
	struct drain *d;
	struct bpf_program *prog;
	uint64_t t0, c0, runs = 0, ns = 0, left, cons;
	int rv, sfd = -1, bad;

	if (!(d = calloc(1, sizeof(*d)))) {
		rm_log_error("failed to allocate the drain's state");
		return 1;
	}
	d->dump = dump;
	if (!(skel = thin_edges_bpf__open())) {
		rm_log_error("failed to open the thin probes");
		free(d);
		return 1;
	}
	skel->rodata->thin_variant = variant;
	skel->rodata->netns_ino = netns_ino;
	skel->rodata->thin_batch = batch;
	if ((rv = thin_edges_bpf__load(skel)) != 0) {
		rm_log_error("failed to load the thin probes: %s", strerror(-rv));
		thin_edges_bpf__destroy(skel);
		free(d);
		return 1;
	}
	if ((rv = thin_edges_bpf__attach(skel)) != 0) {
		rm_log_error("failed to attach the thin probes: %s", strerror(-rv));
		thin_edges_bpf__destroy(skel);
		free(d);
		return 1;
	}
	if (!(rb = ring_buffer__new(bpf_map__fd(skel->maps.edges), on_batch, d, NULL))) {
		rm_log_error("failed to open the thin probes' ring");
		thin_edges_bpf__destroy(skel);
		free(d);
		return 1;
	}
	if (prof && (sfd = bpf_enable_stats(BPF_STATS_RUN_TIME)) < 0) {
		rm_log_error("failed to enable bpf run-time statistics");
		ring_buffer__free(rb);
		thin_edges_bpf__destroy(skel);
		free(d);
		return 1;
	}
	printf("thin: ready\n");
	fflush(stdout);
	t0 = clock_ns(CLOCK_MONOTONIC);
	c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	/* the collector's drain: woken per 256 KiB of records, else every 25 ms */
	while (!stop)
		if ((rv = ring_buffer__poll(rb, 25)) < 0 && rv != -EINTR)
			rm_log_error("ring poll failed: %s", strerror(-rv));
	ring_buffer__consume(rb);
	cons = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
	if (prof) {
		bpf_object__for_each_program(prog, skel->obj) {
			struct bpf_prog_info info;
			__u32 len = sizeof(info);

			memset(&info, 0, sizeof(info));
			if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) != 0 || !info.run_cnt)
				continue;
			printf("thin: prog %s runs=%llu ns_per_run=%.1f\n", bpf_program__name(prog),
			       (unsigned long long)info.run_cnt, (double)info.run_time_ns / (double)info.run_cnt);
			runs += info.run_cnt;
			ns += info.run_time_ns;
		}
		printf("thin: hooks runs=%llu ns=%llu\n", (unsigned long long)runs, (unsigned long long)ns);
		close(sfd);
	}
	left = left_in_batches(skel);
	printf("thin: variant=%s seconds=%.1f records=%llu ring_bytes=%llu left_in_batches=%llu drops=%llu direct=%llu"
	       " bad=%llu consumer_ns=%llu consumer_ns_per_record=%.1f socket_edges=%llu stale_edges=%llu\n",
	       names[variant], (double)(clock_ns(CLOCK_MONOTONIC) - t0) / 1e9, (unsigned long long)d->records,
	       (unsigned long long)d->ring_bytes, (unsigned long long)left,
	       (unsigned long long)skel->bss->ring_drops, (unsigned long long)skel->bss->direct_recs,
	       (unsigned long long)d->bad, (unsigned long long)cons,
	       d->records ? (double)cons / (double)d->records : 0.0, (unsigned long long)d->sock_edges,
	       (unsigned long long)d->stale);
	bad = d->bad != 0;
	ring_buffer__free(rb);
	thin_edges_bpf__destroy(skel);
	free(d);
	return bad;
}

/* ---------------------------------------------------------------- replay mode */

/*
 * A stream of nreq requests on 2 CPUs, each served by one of 64 threads of
 * one server process on a connection of its own (srv=1): the thread gets
 * its CPU, reads 64 bytes, works, writes 512 bytes and waits again; windows
 * of 10 ms. Three events a request: the switch that gives the thread its
 * CPU (and ends the previous thread's slice), its recv and its send.
 */
static void synth_stream(FILE *f, uint64_t nreq)
{
	uint32_t prev[2] = { 0, 0 }, in_seq[64] = { 0 }, out_seq[64] = { 0 };
	uint64_t ts[2] = { 1000, 1000 }, i;

	fprintf(f, "rametr-events 1 window_ns=10000000 offset_ns=0 ncpu=2\n");
	for (i = 0; i < nreq; i++) {
		uint32_t c = (uint32_t)(i & 1), k = (uint32_t)((i >> 1) % 32) * 2 + c, tid = 101 + k;
		const char *sk = " pid=100 comm=srv fam=4 laddr=10.0.0.2:6379";

		fprintf(f, "%llu %u switch prev=%u prev_pid=%u prev_state=S next=%u next_pid=100\n",
			(unsigned long long)ts[c], c, prev[c], prev[c] ? 100 : 0, tid);
		fprintf(f, "%llu %u recv tid=%u%s raddr=10.0.0.1:%u sock=%u bytes=64 seq=%u srv=1\n",
			(unsigned long long)ts[c] + 1500, c, tid, sk, 40000 + k, 1000 + k, in_seq[k]);
		fprintf(f, "%llu %u send tid=%u%s raddr=10.0.0.1:%u sock=%u bytes=512 seq=%u srv=1\n",
			(unsigned long long)ts[c] + 7000, c, tid, sk, 40000 + k, 1000 + k, out_seq[k]);
		in_seq[k] += 64;
		out_seq[k] += 512;
		prev[c] = tid;
		ts[c] += 8500;
	}
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

static int replay_mode(uint64_t nreq)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	struct col_replay_stats st;
	struct col_replay_opts ro;
	struct col_events *r;
	struct col_event ev;
	uint64_t parts = 0, events = 0, best_parse = UINT64_MAX, best_replay = UINT64_MAX, t0, dt;
	struct col_sink sink = { &parts, count_part, count_window };
	char err[256];
	int rv, run;

	if (!(f = open_memstream(&buf, &len))) {
		rm_log_error("failed to build the synthetic stream: %s", strerror(errno));
		return 1;
	}
	synth_stream(f, nreq);
	if (fclose(f) != 0) {
		rm_log_error("failed to build the synthetic stream: %s", strerror(errno));
		free(buf);
		return 1;
	}
	for (run = 0; run < 3; run++) {
		t0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
		if ((rv = col_events_open_buf(&r, buf, len, "synthetic", err, sizeof(err))) != RM_OK) {
			rm_log_error("failed to parse the synthetic stream: %s", err);
			free(buf);
			return 1;
		}
		events = 0;
		while ((rv = col_events_next(r, &ev)) == RM_OK)
			events++;
		if (rv != RM_ENOENT)
			snprintf(err, sizeof(err), "%s", col_events_error(r));
		col_events_close(r);
		dt = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - t0;
		if (rv != RM_ENOENT) {
			rm_log_error("failed to parse the synthetic stream: %s", err);
			free(buf);
			return 1;
		}
		if (dt < best_parse)
			best_parse = dt;
		memset(&ro, 0, sizeof(ro));
		memset(&st, 0, sizeof(st));
		ro.err = err;
		ro.errlen = sizeof(err);
		ro.stats = &st;
		ro.follow_replies = 1;
		parts = 0;
		t0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
		if ((rv = col_replay_buf(buf, len, "synthetic", &sink, &ro)) != RM_OK) {
			rm_log_error("failed to replay the synthetic stream: %s", err);
			free(buf);
			return 1;
		}
		dt = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - t0;
		if (dt < best_replay)
			best_replay = dt;
	}
	free(buf);
	printf("thin: replay events=%llu parse_ns_per_event=%.1f replay_ns_per_event=%.1f segmenter_ns_per_event=%.1f"
	       " parts=%llu threads=%llu\n",
	       (unsigned long long)events, (double)best_parse / (double)events, (double)best_replay / (double)events,
	       ((double)best_replay - (double)best_parse) / (double)events, (unsigned long long)parts,
	       (unsigned long long)st.threads);
	return 0;
}

int main(int argc, char **argv)
{
	uint32_t variant = THIN_FULL, netns_ino = 0, batch = 32;
	uint64_t replay = 0, dump = 0;
	struct sigaction sa;
	int prof = 0, i;

	rm_log_init("bench_thin");
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--profile") == 0) {
			prof = 1;
		} else if (strcmp(argv[i], "--variant") == 0 && i + 1 < argc &&
			   bench_name_index(argv[i + 1], variant_names, THIN_VARIANTS, &variant)) {
			i++;
		} else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
			batch = (uint32_t)strtoul(argv[++i], NULL, 10);
			if (batch < 1 || batch > THIN_BATCH_MAX) {
				rm_log_error("invalid --batch '%s' (1..%d)", argv[i], THIN_BATCH_MAX);
				return 2;
			}
		} else if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc) {
			dump = strtoull(argv[++i], NULL, 10);
		} else if (strcmp(argv[i], "--replay-requests") == 0 && i + 1 < argc) {
			replay = strtoull(argv[++i], NULL, 10);
			if (replay < 1) {
				rm_log_error("invalid --replay-requests '%s'", argv[i]);
				return 2;
			}
		} else if (strcmp(argv[i], "--netns") == 0 && i + 1 < argc) {
			char path[256];
			struct stat nst;

			i++;
			snprintf(path, sizeof(path), strchr(argv[i], '/') ? "%s" : "/var/run/netns/%s", argv[i]);
			if (stat(path, &nst) != 0) {
				rm_log_error("failed to open network namespace '%s'", path);
				return 2;
			}
			netns_ino = (uint32_t)nst.st_ino;
		} else {
			fprintf(stderr, "usage: bench_thin [--variant empty|netns|full|ktime|task|record|lean] [--netns NAME] [--batch N]"
					" [--profile] [--dump N] (runs until SIGINT or SIGTERM)\n"
					"       bench_thin --replay-requests N\n");
			return 2;
		}
	}
	if (replay)
		return replay_mode(replay);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	return probe_mode(variant, netns_ino, batch, prof, dump);
}
