/*
 * col_replay.h - the replay backend: runs a recorded event stream
 * (col_events.h) through the user-space build of the segmenter
 * (segmenter.h) and hands the resulting segment parts and window totals to a
 * struct col_sink (col_backend.h), exactly as the eBPF backend does with what
 * the kernel produces.
 *
 * The environment it gives the segmenter mirrors rametr.bpf.c:
 *   - per-CPU struct rm_cpu and a per-CPU ring of RM_WIN_SLOTS struct
 *     rm_wintot; rm_env_wintot() claims and zeroes a slot holding an older
 *     window (what the slot held is kept, as the eBPF loader's poll would
 *     have read it) and returns NULL for a slot holding a newer one;
 *   - per-thread struct rm_task in a hash by tid, created at a recv (bytes >
 *     0) and at a fork whose parent is in a segment, looked up without
 *     creation for send, switch, wakeup, disk and exit, freed at exit;
 *   - rm_env_emit() hands the part to sink->part, or fails every Nth call
 *     (opts.fail_every) to simulate a full ring buffer.
 * Events are fed in time order (events of all CPUs merged by timestamp, file
 * order for equal timestamps): switch -> rm_on_switch (prev tid 0 = idle,
 * prev_state R = runnable), wakeup -> rm_on_wakeup, recv -> rm_on_recv (and
 * the event's comm into the part when a segment starts, as the BPF program
 * does; with dgram=1 rm_on_dgram_recv), send -> rm_on_send, fork -> rm_on_fork,
 * exit -> rm_on_exit, disk -> rm_on_disk; recv, send and disk of 0 bytes are
 * ignored. A recv's datagram sender (from) reaches the segmenter
 * (rm_on_dgram_src) at the thread's next recv or send, as in the kernel. At the end every
 * thread is swept (rm_sweep, in tid order) and then every window from the
 * first event's to the last event's is reported once, summed over CPUs, with
 * capacity_ns = ncpu * (part of the window inside [first ts, last ts)) and
 * idle_ns = 0.
 *
 * Consistency checks beyond the parser's: recv, send, exit and disk close
 * the CPU slice of the thread running on their CPU, so their tid must be the
 * one the last switch on that CPU put there (if there was one; otherwise the
 * event tells which thread runs), and a switch's prev must be that thread
 * too; a fork must not create a tid that has state. Violations are
 * RM_EPROTO errors "name:line: message".
 *
 * The whole stream is held in memory (about 130 bytes per event). Not
 * thread-safe per call; independent calls may run in parallel.
 */
#ifndef COL_REPLAY_H
#define COL_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "col_backend.h"
#include "col_events.h"

#define COL_REPLAY_MAX_WINDOWS (1ULL << 20)  /* default cap on the windows one stream may span */

struct col_replay_stats {
	struct col_events_hdr hdr; /* the stream's header */
	uint64_t events;           /* events read */
	uint64_t threads;          /* thread states created */
	uint64_t emits;            /* rm_env_emit calls */
	uint64_t parts;            /* parts accepted by the sink */
	uint64_t failed_emits;     /* emits failed on purpose (opts.fail_every) */
	uint64_t windows;          /* window reports accepted by the sink */
	/*
	 * Failed emits the segmenter could not account because the part's
	 * window slot on the emitting CPU already held a newer window (the part
	 * had waited more than RM_WIN_SLOTS windows): dropped_parts, lost_ns
	 * (its cpu_ns) and unseg_* (its bytes) as they would have been added to
	 * that window. The kernel loses these the same way; they are NOT in the
	 * reported window totals, so the identity of that window falls short
	 * by exactly this much. All zero in normal operation.
	 */
	struct rm_wintot late;
};

struct col_replay_opts {
	unsigned fail_every;       /* make every Nth rm_env_emit fail (1 = all); 0 = never */
	uint64_t max_windows;      /* refuse streams spanning more windows (RM_EFULL); 0 = COL_REPLAY_MAX_WINDOWS */
	char *err;                 /* if set, the error message goes here (errlen bytes), else to rm_log_error */
	size_t errlen;
	struct col_replay_stats *stats; /* if set, filled in (also on error, with what was done) */
	int follow_replies;        /* the follow-replies option of the segmenter (srv=1 events) */
};

/*
 * Replays the stream in file `path` (or in buf[0 .. len), called `name` in
 * messages) into sink. opts may be NULL (defaults). Returns RM_OK; RM_EIO /
 * RM_ENOENT (cannot read the file), RM_EPROTO (malformed or inconsistent
 * stream, "name:line: message"), RM_EVERSION, RM_EFULL (more than
 * max_windows windows), RM_ENOMEM, RM_EINVAL (NULL sink or sink function);
 * or the first error a sink function returned (replay stops there).
 * Parts reach the sink while the stream is replayed, windows at the end.
 */
int col_replay_file(const char *path, const struct col_sink *sink, const struct col_replay_opts *opts);
int col_replay_buf(const char *buf, size_t len, const char *name, const struct col_sink *sink,
		   const struct col_replay_opts *opts);

/*
 * Reads only the header of the stream in `path`: its window length and its
 * offset_ns (on a live node the clock offset CLOCK_REALTIME -
 * CLOCK_MONOTONIC, so it is what the collector announces as its clock
 * offset). Returns RM_OK, or the errors of col_events_open() with the
 * message logged (rm_log_error). The stream's ncpu is in
 * col_events_header() for callers that open the stream themselves.
 */
int col_replay_window(const char *path, uint64_t *window_ns, int64_t *offset_ns);

/*
 * A sink that keeps copies of everything it is given, for tests, fuzzing
 * and self-checks. init before use, release after; not thread-safe.
 */
struct col_replay_capture {
	struct rm_part *parts;
	size_t nparts, parts_cap;
	struct rm_totals *wins;
	size_t nwins, wins_cap;
};

void col_replay_capture_init(struct col_replay_capture *c);
/* The sink writing into c (c borrowed). Its functions return RM_OK or RM_ENOMEM. */
struct col_sink col_replay_capture_sink(struct col_replay_capture *c);
/* Frees what c holds and re-initialises it. NULL-tolerant. */
void col_replay_capture_release(struct col_replay_capture *c);
/* The window report for window win, or NULL. */
const struct rm_totals *col_replay_capture_window(const struct col_replay_capture *c, uint64_t win);

/*
 * Checks what c captured: windows reported in increasing order, once each;
 * every part's window reported; and per window
 *   busy_ns    == sum(part cpu_ns)     + unseg_cpu_ns     + lost_ns
 *   rx_bytes   == sum(part rx_bytes)   + unseg_rx
 *   tx_bytes   == sum(part tx_bytes)   + unseg_tx
 *   disk_read  == sum(part disk_read)  + unseg_disk_read
 *   disk_write == sum(part disk_write) + unseg_disk_write
 * If late (col_replay_stats.late) is non-NULL and non-zero, each right side
 * may fall short of its left side instead, by exactly late's amount in total
 * over all windows. Returns RM_OK, or RM_EPROTO with the first violation
 * described in err.
 */
int col_replay_capture_check(const struct col_replay_capture *c, const struct rm_wintot *late, char *err,
			     size_t errlen);

#endif
