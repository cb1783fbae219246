/*
 * col_bpf_go.h - the eBPF backend's Go label counts: joins the runtime
 * scanner (col_rtscan) to the goroutine-label module (col_golabel) so that
 * every Go program the scanner finds is watched while it runs, and hands the
 * sampler's counts of each ended window to the sink as that window's totals
 * (rm_totals' Go label counts, per program and cookie, each program's
 * calibrated to its own process clock), for the aggregator to split the Go
 * programs' CPU by the sockets their goroutines serve (docs/go.md).
 *
 * The module (its receive hook and a cpu-clock sampler on every CPU) is
 * loaded when the first Go program is found and unloaded once none has run
 * for a whole window, so a node without Go programs pays nothing for it.
 * If it cannot be loaded, that is logged once and the Go programs' CPU is
 * charged by their threads' segments, as without it.
 *
 * While it is loaded, the parts of Go programs' threads (RM_PF_GO) are held
 * back until their window's counts are handed, and handed just before them,
 * so that the aggregator receives a window's Go parts and its counts
 * together and splits the whole of that CPU by them (it cannot take back
 * charges it has stored). Held parts are bounded (COL_BPF_GO_HELD); a part
 * past the bound, or of a window already handed, goes on at once.
 *
 * Threads: the backend's thread only.
 */
#ifndef COL_BPF_GO_H
#define COL_BPF_GO_H

#include <stdint.h>

#include "col_backend.h"
#include "col_golabel.h"

struct col_bpf_go;

struct col_bpf_go_cfg {
	uint64_t window_ns; /* the backend's window */
	int64_t offset_ns;  /* and its offset (col_bpf_cfg) */
	uint32_t netns_ino; /* nonzero: only this network namespace's receives label */
	uint32_t freq_hz;   /* sampler frequency (0: the module's default) */
	int per_thread;     /* the sampler per watched thread, not per CPU (col_golabel_cfg) */
	int creations_from_start; /* the creation uprobe attached at once (col_golabel_cfg) */
	int tasks_fd;       /* > 0: the CPU counters' per-thread state (their rm_task.smp moves the label samples
			       into the parts charged with the sampled CPU: each window's counts by segment too) */
};

#define COL_BPF_GO_HELD 16384 /* Go parts held back at most (about 4.5 MiB) */

/* Counters since open. */
struct col_bpf_go_stats {
	uint32_t watched;   /* Go programs watched now */
	uint32_t loads;     /* times the label module was loaded (again after each time no Go program ran) */
	uint32_t unreadable;/* Go programs found whose build could not be read (not watched) */
	uint64_t windows;   /* windows whose counts went to the sink */
	uint64_t samples;   /* samples in them */
	uint64_t unlabelled;/* ... of user goroutines without a label (cookie 0, folded ones too) */
	uint64_t runtime;   /* ... of the runtime's own stack and goroutines (RM_GO_IDLE) */
	uint64_t folded;    /* ... of labels past the wire's bound, handed as unlabelled */
	uint64_t lost;      /* samples the kernel could not count (its map full) */
	uint64_t held;      /* Go parts held back until their window's counts */
	uint64_t unheld;    /* ... not held: past COL_BPF_GO_HELD, or their window already handed */
	uint64_t unseg_held_ns; /* Go programs' CPU outside segments held back until their window's counts */
	uint64_t calibrated; /* programs' window counts calibrated to their own CPU (col_bpf_go_calibrate) */
	uint64_t uncalibrated; /* ... sent as sampled (no clock figure for the window: its first, a missed sweep) */
};

/* A handle with nothing loaded yet. RM_OK, RM_EINVAL, RM_ENOMEM; *out the caller's (col_bpf_go_close). */
int col_bpf_go_open(struct col_bpf_go **out, const struct col_bpf_go_cfg *cfg);

/*
 * The scanner's change function (col_rtscan_fn; arg the handle): a Go
 * program that came is watched (the module loaded first if need be), one
 * that left or exec'd something else is forgotten. Failures are logged
 * (once for the module, once per program). Returns the kind the runtimes
 * map holds for pid: RM_RT_GO_PLAIN for a Go program the loaded module
 * cannot watch (its CPU is a runtime's, charged by its threads' segments,
 * never split by other programs' labels), else after.
 */
uint32_t col_bpf_go_change(void *arg, uint32_t pid, uint32_t before, uint32_t after, const char *exe);

/*
 * Holds a copy of part p if it is a Go program's (RM_PF_GO) while the module
 * is loaded, its window not yet handed and room is left: 1 if held (the
 * caller does not pass it on), else 0.
 */
int col_bpf_go_hold(struct col_bpf_go *g, const struct rm_part *p);

/*
 * Hands the counts of every window before before_win to sink->window, one
 * struct rm_totals per window holding its win and its counts only (the
 * batcher merges them into the window's other totals), each after the
 * parts held back of that window and earlier (to sink->part); then every
 * part still held of a window before before_win; and unloads the
 * module when no Go program was watched during a whole window. Returns
 * RM_OK or the sink's first error (the remaining windows stay for the next
 * call); a failure to read the counts is logged and leaves them for the next call.
 */
int col_bpf_go_report(struct col_bpf_go *g, uint64_t before_win, const struct col_sink *sink);

void col_bpf_go_stats(const struct col_bpf_go *g, struct col_bpf_go_stats *out);

/*
 * The label module's programs and their run statistics (col_golabel_prog_stats),
 * summed over every time it was loaded since open (a program's counts are
 * kept when the module is unloaded). Returns how many programs were reported.
 */
int col_bpf_go_prog_stats(const struct col_bpf_go *g, col_progstat_fn fn, void *arg);

/*
 * Pure: the label samples that fell in the CPU of window win's Go parts
 * p[0..n) (rm_part.samples), summed by process and the cookie the
 * aggregator files each part under (its inbound socket's; none for a
 * continuation not yet anchored, whose samples are left out) into out[]
 * (.pid, .cookie, .seg; at most cap pairs, the samples of further ones
 * left out). Returns how many.
 */
size_t col_bpf_go_segs(const struct rm_part *p, size_t n, uint64_t win, struct rm_golabel *out, size_t cap);

/*
 * Pure: adds the label counts of one window's totals t (as pooled, to the
 * sink) to st: a window more, its samples, and of them those of goroutines
 * without a label (cookie 0) and of the runtime's own (RM_GO_IDLE).
 */
void col_bpf_go_tally(struct col_bpf_go_stats *st, const struct rm_totals *t);

/*
 * Pure: window win's counts c[0..n) (per process and cookie, as the label
 * module hands them) merged per (process, cookie) into *t (zeroed first;
 * win and go_period_ns set). Samples follow CPU time, so the node's Go
 * programs share one split of their CPU; the processes stay apart so that
 * what one did without a label goes to its own tenants only. With segs
 * non-NULL (segs[0..nsegs) from col_bpf_go_segs, nsegs may be 0) the counts
 * say by segment too: per process, each cookie's parts' samples (scaled
 * down if they pass the process's samples, a few of which the counters may
 * have charged to the next window), the rest as its cookie 0's, so that
 * both ways sum to the same. Most samples first, so that a window with more
 * pairs than the wire carries (RM_GO_LABELS_MAX) keeps its largest and
 * folds the smallest into a cookie 0. scratch holds n entries, 2n + nsegs +
 * 1 with segs (the caller's). Returns the samples folded; or, if the wire would refuse the
 * counts (win 0, a period of 0 or above RM_GO_PERIOD_MAX), sets *bad,
 * leaves t zeroed but for win and returns 0.
 */
uint64_t col_bpf_go_pool(struct rm_totals *t, uint64_t win, const struct col_golabel_count *c, size_t n,
			 const struct rm_golabel *segs, size_t nsegs, uint64_t period_ns, struct rm_golabel *scratch,
			 int *bad);

/* A process's CPU in a window (its process clock's growth between two window sweeps). */
struct col_bpf_go_cpu {
	uint32_t pid;
	uint32_t pad;
	uint64_t ns;
};

/*
 * Pure: calibrates window counts c[0..n) to the processes' own CPU
 * cpu[0..ncpu) so that a process's samples sum to its ns / period_ns
 * (rounded down): what its clock used beyond its samples is added as one
 * entry (pid, COL_GOLABEL_IDLE), unlabelled CPU in no segment (measured: the
 * samples a program misses fall outside its segments); a process with more
 * samples than that (a window's edge) has each entry scaled down in
 * proportion (rounded down, the rest to its entry of most samples), and its
 * segs[0..nsegs) by the same factor (their .seg, in place; NULL: none).
 * Processes not in cpu[] (all of them if period_ns is 0) are copied as they are. Writes
 * out[] (room for n + ncpu entries; entries left with 0 samples are left
 * out) and returns how many. Samples follow CPU time, but not equally in
 * every process (measured: an HTTP/1.1 server of short requests got 81% of
 * its CPU in samples, a gRPC server of long calls beside it 94%):
 * calibrated, the label split gives each Go program what its own clock
 * says it used and uses the samples only within it.
 */
size_t col_bpf_go_calibrate(const struct col_golabel_count *c, size_t n, const struct col_bpf_go_cpu *cpu, size_t ncpu,
			    uint64_t period_ns, struct rm_golabel *segs, size_t nsegs, struct col_golabel_count *out);

/*
 * At the sweep that ends window win (the backend calls it right after):
 * reads the process clock of every watched Go program, and keeps what each
 * used since the previous sweep as its CPU in win, for the calibration of
 * win's counts (col_bpf_go_calibrate). A program first read now has no
 * figure for win (its counts go as sampled); one whose clock cannot be read
 * is left out.
 */
void col_bpf_go_sweep(struct col_bpf_go *g, uint64_t win);

/*
 * Window totals w (a report's delta) on their way to the sink: while the
 * module is loaded and w's window has not been handed, takes the Go
 * programs' CPU outside segments out of w (col_bpf_go_unseg_take) and holds
 * it until the window's counts go, which carry it, so that the aggregator
 * splits it by the labels with the rest of the window's Go CPU (a window
 * reported in pieces would otherwise give the label rule only the piece
 * that happened to share the counts' batch). Held for at most
 * COL_BPF_GO_UNSEG windows at once; w passes unchanged past that. A window
 * without counts gets its held CPU back in totals of its own when it is
 * handed (col_bpf_go_report).
 */
void col_bpf_go_hold_unseg(struct col_bpf_go *g, struct rm_totals *w);

/*
 * Pure: takes a Go program's CPU outside segments out of window totals w:
 * x = unseg_go_ns, no more than unseg_rt_ns, unseg_cpu_ns or busy_ns,
 * subtracted from all four (so w stays consistent and what it and totals
 * carrying x sum to is what w was). Returns x.
 */
uint64_t col_bpf_go_unseg_take(struct rm_totals *w);

/* Pure: adds x ns of a Go program's CPU outside segments to window totals w (busy, unseg_cpu, unseg_rt, unseg_go). */
void col_bpf_go_unseg_give(struct rm_totals *w, uint64_t x);

/* Unloads the module (undrained counts are dropped) and frees g; NULL-tolerant. */
void col_bpf_go_close(struct col_bpf_go *g);

#endif
