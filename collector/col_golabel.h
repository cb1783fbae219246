/*
 * col_golabel.h - how the CPU of watched Go processes splits between the
 * sockets their goroutines serve, by labels carried on goroutines and a
 * cpu-clock sampler (golabel.bpf.c; measured in docs/grpc.md, *Labels on
 * goroutines, split by sampling*).
 *
 * A goroutine that receives from a TCP socket (in the watched network
 * namespace) is labelled with that socket's cookie, the one the collector's
 * socket hooks report, so the aggregator's rules and pairing still decide
 * the tenant; a goroutine it creates takes its label (one uprobe on the
 * call of runtime.runqput in runtime.newproc.func1, where
 * col_gort_sched_inspect finds it, attached to a Go executable once a
 * window's samples show its user goroutines working without a label). A cpu-clock sampler
 * at freq_hz, on every online CPU or on each thread of the watched
 * processes (col_golabel_cfg.per_thread), counts for the watched threads
 * samples per window, process and label: the label of the goroutine the
 * thread runs for (m.curg); 0 for a goroutine without one;
 * COL_GOLABEL_IDLE for a thread on its system stack with no goroutine (the
 * scheduler, sysmon, idle and GC workers) or one whose goroutine could not
 * be read. UDP sockets do not label (one socket serves every sender); unix
 * stream sockets label on receive. Once an executable's creations are
 * followed, a TCP send by a goroutine without a label labels it too (a
 * connection's writer goroutine). A goroutine readied by a labelled one
 * (runtime.ready: a channel send to a parked worker, an answer handed back),
 * once that uprobe is attached, takes its label unless it holds one from a
 * receive of its own; the runtime's own goroutines take none. A worker that
 * finds its next job already queued, without being readied, keeps the label
 * of the one before. A label is void once its goroutine's g is reused (it
 * is kept with the goroutine's id). Linux/amd64, Go >= 1.17 (register ABI),
 * binaries with symbols and DWARF, or stripped ones of a known layout.
 *
 * Threading: one thread at a time per handle (the collector's loop); the
 * BPF programs run concurrently with it.
 */
#ifndef COL_GOLABEL_H
#define COL_GOLABEL_H

#include <stddef.h>
#include <stdint.h>

#include "col_progstat.h"

#define COL_GOLABEL_IDLE 0xffffffffffffffffULL /* = GOLABEL_IDLE (golabel.h) */
#define COL_GOLABEL_FREQ_DEFAULT 1999u         /* Hz; see col_golabel_cfg */
#define COL_GOLABEL_PIDS_MAX 1024              /* watched processes at once (= GOLABEL_PIDS_MAX) */
#define COL_GOLABEL_THREADS_MAX 4096           /* threads sampled at once, over every watched process */

struct col_golabel;

struct col_golabel_cfg {
	uint64_t window_ns; /* window length (0: 1 s), as col_bpf_cfg's */
	int64_t offset_ns;  /* window = (CLOCK_MONOTONIC + offset_ns) / window_ns, as col_bpf_cfg's */
	/* Samples per second of a watched thread's CPU (0: COL_GOLABEL_FREQ_DEFAULT; 10..20000).
	 * 1999 Hz: ~100 samples, the ±10% of a share, per 50 ms of a tenant's
	 * CPU in a window (at 2 kHz the measured cost was 1.1% of the testbed
	 * gRPC server's CPU, half of it the sampler's); odd so that the
	 * sampler does not tick in step with the kernel's 250/1000 Hz tick or
	 * Go's 10 ms sysmon and preemption periods. */
	uint32_t freq_hz;
	uint32_t netns_ino; /* nonzero: receives of threads in this network namespace only */
	/* 0: one cpu-clock event per online CPU, which ticks whatever runs there
	 * (every process on the machine pays for its interrupts; measured in a
	 * 2-vCPU VM: +3-5% on an unrelated CPU-bound process at 1999 Hz);
	 * 1: one per thread of the watched processes, which ticks only while
	 * that thread runs (no other process pays; the Go program pays for
	 * the event's switch in and out at every context switch of its
	 * threads: measured +8-10% of a Go server's CPU beyond the per-CPU
	 * events'). bench/RESULTS.md, *The goroutine sampler's cost*. */
	int per_thread;
	/* > 0: the socket hooks' per-thread state (rametr.bpf.c's map tasks, struct rm_task): each
	 * sample is then also added to its thread's rm_task.smp, which the CPU counters move into the
	 * part charged with the sampled CPU (rm_part.samples). 0: not. */
	int tasks_fd;
	/* 1: the creation uprobe is attached when an executable is first watched, and the hand-off
	 * uprobe at the first window whose samples ask for it; 0 (the default): each when the samples
	 * ask for it (col_golabel_drain) */
	int creations_from_start;
};

/* The samples of one label in one window. */
struct col_golabel_count {
	uint64_t cookie;  /* the socket's cookie; 0: unlabelled goroutine; COL_GOLABEL_IDLE: no goroutine */
	uint64_t samples; /* each one period_ns of a thread's CPU, in expectation */
	uint32_t pid;     /* the process (tgid) */
};

/* Counters since open, summed over CPUs. */
struct col_golabel_stats {
	uint64_t samples;   /* samples on watched processes' threads */
	uint64_t lost;      /* ... not counted: the counts map was full */
	uint64_t unread;    /* ... whose goroutine could not be read (counted as COL_GOLABEL_IDLE) */
	uint64_t reads;     /* TCP receives that labelled their goroutine */
	uint64_t reads_bad; /* ... whose goroutine could not be read */
	uint64_t newg;      /* goroutines created in watched processes */
	uint64_t inherit;   /* ... that took their creator's label */
	uint64_t handed;    /* goroutines readied by a labelled one that took its label (hand-offs) */
	uint64_t origin;    /* receives on a TCP connection within the node that took the label of the
	                       goroutine of the same process that sent (a Go program calling itself) */
	uint64_t sent;      /* TCP sends by a goroutine without a label, which took the connection's (a
	                       connection's writer goroutine) */
	uint64_t threads;   /* per_thread: threads with a sampler now (0 with samplers per CPU) */
	uint64_t creation_exes; /* executables whose goroutine creations are followed now (the uprobe attached) */
	uint64_t handoff_exes; /* executables whose hand-offs are followed now (the uprobe attached) */
};

/*
 * Loads the programs, attaches the receive hook and, unless per_thread, the
 * sampler on every online CPU, and sets *out; nothing is counted until a
 * process is watched. Returns RM_OK; RM_EINVAL for a NULL argument or
 * freq_hz outside 10..20000; RM_ENOMEM; RM_EBPF if the programs cannot be
 * loaded or attached (RM_EPERM without the privilege to, e.g. not root).
 * On failure *out is NULL and nothing stays attached. The caller owns *out
 * (col_golabel_close).
 */
int col_golabel_open(struct col_golabel **out, const struct col_golabel_cfg *cfg);

/*
 * Watches process pid, running the executable at exe_path (as this process
 * sees it, e.g. /proc/PID/exe): its receives label goroutines, its threads
 * are sampled (per_thread: those in /proc/PID/task now; col_golabel_follow
 * for later ones). Its executable (device, inode) is watched once; a second
 * pid of the same executable only joins the map. The creation uprobe and
 * the hand-off uprobe (runtime.ready) are attached later, by
 * col_golabel_drain, when windows' samples show the process's user
 * goroutines working without a label (with creations_from_start, the
 * creation uprobe at once). Returns
 * RM_OK (also if pid is already watched: no change); RM_EINVAL for pid 0 or
 * a NULL path; RM_ENOTSUP for a Go build it cannot read (not Go, stripped,
 * unknown layout: col_gort_sched_inspect); RM_ENOENT if exe_path is not an
 * ELF file; RM_EIO if it cannot be read; RM_EFULL with COL_GOLABEL_PIDS_MAX
 * processes watched; RM_EBPF if creations_from_start and the creation uprobe
 * cannot be attached. On failure
 * nothing changed.
 */
int col_golabel_watch(struct col_golabel *g, uint32_t pid, const char *exe_path);

/*
 * per_thread: samples the threads the watched processes started since they
 * were last looked at and closes the samplers of threads that ended
 * (readdir of /proc/PID/task for each; call it once a window). A thread's
 * CPU before its first look is not sampled. Best effort: failures are
 * logged. No-op with samplers per CPU.
 */
void col_golabel_follow(struct col_golabel *g);

/*
 * Stops watching pid (no-op if not watched): its threads are no longer
 * sampled nor its receives seen; the creation uprobe of its executable is
 * detached when no watched process runs it. Counts already taken stay until
 * drained; its goroutines' labels age out of the LRU map.
 */
void col_golabel_forget(struct col_golabel *g, uint32_t pid);

/* Called by col_golabel_drain once per window: its n counts (n >= 1), sorted
 * by pid then cookie, valid during the call; period_ns is one sample's CPU
 * time (1e9 / freq_hz, rounded). */
typedef void (*col_golabel_fn)(void *arg, uint64_t win, const struct col_golabel_count *c, size_t n,
			       uint64_t period_ns);

/*
 * Hands every window < before_win that has samples to fn, once, in
 * increasing order, and deletes its counts from the kernel. A window in
 * which a process's user goroutines without a label had at least 16
 * samples and 5% of its samples (its recent windows together, until then)
 * attaches the creation uprobe to its executable; such a window that
 * began after that attaches the hand-off uprobe (each logged; a failure to attach is logged once). Call it with
 * before_win <= col_golabel_window() (a window still being sampled would
 * be handed in two pieces). Returns RM_OK; RM_EINVAL for a NULL argument;
 * RM_ENOMEM or RM_EBPF (the map could not be walked): nothing handed or
 * deleted.
 */
int col_golabel_drain(struct col_golabel *g, uint64_t before_win, col_golabel_fn fn, void *arg);

/* The current window ((CLOCK_MONOTONIC + offset_ns) / window_ns). */
uint64_t col_golabel_window(const struct col_golabel *g);

/* Samples not counted since open because the counts map was full (summed over CPUs). */
uint64_t col_golabel_lost(struct col_golabel *g);

/* The counters since open into *out (zeroes if they cannot be read). */
void col_golabel_stats(struct col_golabel *g, struct col_golabel_stats *out);

/*
 * Calls fn once per loaded program (col_progstat.h) with its name, id and the kernel's run
 * statistics (runs, run_ns: nonzero only while BPF run-time statistics are
 * enabled, bpf_enable_stats). A uprobe program's runs are its traps, whose
 * own cost is not in run_ns. Returns how many programs were reported.
 */
int col_golabel_prog_stats(const struct col_golabel *g, col_progstat_fn fn, void *arg);

/* Detaches everything, frees g; NULL-tolerant. Undrained counts are dropped. */
void col_golabel_close(struct col_golabel *g);

#endif
