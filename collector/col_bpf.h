/*
 * col_bpf.h - the eBPF backend's loader (user side of rametr.bpf.c).
 *
 * Opens, configures, loads and attaches the BPF programs; drains the part
 * ring buffer and polls the per-CPU window totals, handing both to a
 * struct col_sink (col_backend.h). Not thread-safe: one thread owns a
 * struct col_bpf.
 */
#ifndef COL_BPF_H
#define COL_BPF_H

#include <stdint.h>

#include "col_backend.h"
#include "col_bpf_go.h"

struct col_bpf;

struct col_bpf_cfg {
	uint64_t window_ns;   /* accounting window (default 1 s if 0) */
	int64_t offset_ns;    /* CLOCK_REALTIME - CLOCK_MONOTONIC; windows are wall-clock aligned */
	uint32_t self_tgid;   /* process never segmented (the collector itself); 0 = none */
	int exclude_rametr;   /* processes whose name starts with "rametr" (rametr-collector,
			       * rametr-aggregator, rametrctl) are never segmented */
	uint32_t netns_ino;   /* nonzero: only threads of this network namespace (inode) count */
	int follow_wakeups;   /* wake-up chains: a thread woken by a futex wake inherits the waker's segment */
	int follow_replies;   /* continuation chains anchored by replies (segmenter.h) */
	int cpu_counters;     /* on-CPU time from each thread's own scheduler counters read at its edges
			       * (segmenter.h, rm_ctr_edge): no context-switch hook. Not with
			       * follow_wakeups, which needs one (RM_EINVAL) */
	int handoffs_from_start; /* follow_replies: attach the hand-off hook (sched_waking) at once;
				  * else col_bpf_poll attaches it once a request is handed between
				  * threads (its reply sent, or read, by another thread than the
				  * request's). follow_wakeups always attaches it at once */
	int go_labels;        /* Go programs (found by their binaries) have their goroutines labelled with
			       * the sockets they serve and their CPU sampled per label (col_bpf_go.h) */
	uint32_t go_label_hz; /* the sampler's frequency (0: col_golabel's default) */
	int go_label_per_thread; /* the sampler per Go thread, not per CPU (col_golabel_cfg.per_thread) */
	int go_creations_from_start; /* goroutine creations followed from the start, not once a window's
				      * samples ask for it (col_golabel_cfg.creations_from_start) */
	uint32_t ring_bytes;  /* size of the part ring, a power of 2 >= 4096; 0 = 16 MiB */
	uint32_t bench_stage; /* benchmarks only: RM_STAGE_* (rametr.h); 0 = full accounting */
};

struct col_bpf_stats {
	uint64_t parts;          /* parts read from the ring */
	uint64_t windows;        /* window reports handed to the sink */
	uint64_t dropped_parts;  /* parts the kernel could not emit (ring full) */
	int handoff_hook;        /* the hand-off hook was attached (0: not yet, or not loaded) */
	uint64_t handoff_replies_before; /* requests handed between threads (reply sent or read by
					  * another thread) before the hand-off hook was attached:
					  * charged without the hand-off rule (docs/cpu-counters.md) */
	uint64_t handoff_reads_before;   /* requests read on a connection by another thread than its
					  * previous request's reader, before the hook was attached */
	uint64_t handoff_moves_before;   /* requests sent on a client-side connection another thread sent
					  * on last, by a thread serving several connections (an event
					  * loop's takeover), before the hook was attached */
	uint64_t carry_wakeups;          /* wake-ups at which a dispatcher's CPU was carried to the
					  * request its wakee reads next (docs/cpu-counters.md) */
	uint64_t carry_capped_ns;        /* of that CPU, ns left unsegmented (the wakee's carry full) */
	struct col_bpf_go_stats go;      /* goroutine labels (zeroes without go_labels) */
};

/*
 * Probes the kernel (col_probe.h), loads and attaches. Returns RM_OK,
 * RM_EPERM / RM_ENOTSUP / RM_EBPF with the reason logged. *out owned by the
 * caller, released with col_bpf_close().
 */
int col_bpf_open(struct col_bpf **out, const struct col_bpf_cfg *cfg);

/*
 * Waits up to timeout_ms for parts, hands every part in the ring to
 * sink->part, then every window-total delta to sink->window (the deltas at
 * most every COL_BPF_REPORT_MS: reading the per-CPU totals is one syscall per
 * slot; col_bpf_finish() always reports). Attaches the hand-off hook when
 * the kernel has seen a request handed between threads
 * (col_bpf_cfg.handoffs_from_start); once attached it stays attached until
 * col_bpf_finish(). Returns RM_OK or the first sink error (the remaining data
 * stays for the next call).
 */
#define COL_BPF_REPORT_MS 100
/* how long after its window's end a window's goroutine label counts are asked for (at most a quarter window) */
#define COL_BPF_GO_GRACE_MS 250
int col_bpf_poll(struct col_bpf *b, const struct col_sink *sink, int timeout_ms);

/*
 * Ends collection: detaches every hook, emits what threads still hold (a
 * task iterator sweep), then drains ring and windows into the sink. After
 * this only col_bpf_close() is valid.
 */
int col_bpf_finish(struct col_bpf *b, const struct col_sink *sink);

void col_bpf_get_stats(const struct col_bpf *b, struct col_bpf_stats *out);

/*
 * Never segment process pid (a tgid) from now on: its threads' CPU and bytes
 * count as unsegmented, never in a part, so no CE is ever charged for them.
 * Threads that already read from a socket before keep the state they have
 * until they exit: exclude a process before it serves. Returns RM_OK,
 * RM_EINVAL (pid 0), RM_EFULL (more than 256 excluded processes) or RM_EBPF.
 */
int col_bpf_exclude(struct col_bpf *b, uint32_t pid);

/* One loaded program's run count and run time, as the kernel counts them. */
struct col_bpf_prog_stat {
	char name[32];
	uint32_t id;     /* the kernel's id of the program */
	uint64_t runs;
	uint64_t run_ns;
};

/*
 * Fills out[0..max) with every loaded program's id and counters, then the
 * goroutine label module's (go_labels; id 0, summed over every time it was
 * loaded; its uprobe's runs are traps, whose own cost is not in run_ns);
 * returns how many.
 * The kernel counts only while BPF run-time statistics are enabled
 * (bpf_enable_stats(BPF_STATS_RUN_TIME), machine-wide, for benchmarks).
 */
int col_bpf_prog_stats(const struct col_bpf *b, struct col_bpf_prog_stat *out, int max);

/* Detaches and frees; NULL-tolerant. */
void col_bpf_close(struct col_bpf *b);

#endif
