/*
 * col_xen.h - the Xen backend of the collector: per-domain / per-vCPU CPU
 * accounting from xentrace data, replayed from a file or read live from the
 * hypervisor's trace buffers, pushed into a struct col_sink (col_backend.h).
 *
 * Output, per window (see col_xen_acct.h for every rule):
 * - one struct rm_part per (domain, vCPU) with any CPU, run-queue or blocked
 *   time in the window: flags RM_PF_DOMAIN, domid, vcpu, cpu_ns, runq_ns,
 *   blocked_ns, seg_id = 1 << 62 | domid << 16 | vcpu, win, start_ns/end_ns
 *   = the window clipped to the trace;
 * - with dom0_charging (seed 003), one part per guest with grant operations
 *   done while dom0 ran: flags RM_PF_DOMAIN | RM_PF_DRIVER, domid = guest,
 *   vcpu = 0, seg_id = 1 << 62 | 1 << 47 | domid << 16, cpu_ns = its share of
 *   dom0's CPU; dom0's own parts keep the remainder;
 * - one struct rm_totals: t.busy_ns (non-idle), idle_ns (idle domain),
 *   capacity_ns (CPU time covered), t.lost_ns (lost-record spans, V),
 *   t.unseg_cpu_ns (CPU time of reserved domain ids other than idle).
 *   Always: sum(part cpu) + lost + unseg == busy and busy + idle == capacity.
 *
 * Time line: trace ns T = epoch_offset_ns + (tsc - tsc0) * 10^6 / cpu_khz,
 * tsc0 = the first TSC of the trace; window index = T / window_ns. A replay
 * with epoch_offset_ns = 0 numbers windows from the trace start; the live
 * backend defaults to CLOCK_REALTIME at start, so its window indexes are
 * wall-clock aligned like the other backends' (start_ns / end_ns are then
 * Unix ns).
 *
 * CEs: parts carry domid / vcpu; mapping domains (or sets of them) to CEs is
 * the aggregator's configuration. A driver part belongs to its guest's CE;
 * dom0's remainder is V unless dom0 itself is mapped to a CE.
 */
#ifndef COL_XEN_H
#define COL_XEN_H

#include <signal.h>
#include <stdint.h>

#include "col_backend.h"

#define COL_XEN_DEFAULT_WINDOW_NS 100000000ull /* 100 ms, seed 003 */

struct col_xen_opts {
	uint64_t window_ns;      /* 0 = COL_XEN_DEFAULT_WINDOW_NS */
	uint64_t cpu_khz;        /* TSC frequency; 0 = derive (see below) */
	int64_t epoch_offset_ns; /* T of the first record, >= 0; live: 0 = CLOCK_REALTIME at start */
	int dom0_charging;       /* seed 003: charge dom0 CPU to guests by grant ops */
};

/* What a replay found (for tests and logs). */
struct col_xen_replay_info {
	uint64_t cpu_khz;        /* used: given, or derived from the trace */
	int khz_derived;         /* 1 if derived */
	uint64_t records;        /* records fed to the accounting (wraps skipped) */
	uint32_t ncpu;
	uint64_t windows;        /* struct rm_totals emitted */
	uint64_t parts;          /* struct rm_part emitted */
};

/*
 * Replay a xentrace file written by the xentrace tool. With o->cpu_khz == 0
 * the TSC frequency is derived from the trace itself: the runtime (ns, Xen
 * system time) that TRC_SCHED_SWITCH_INFPREV reports for each slice against
 * the TSC distance between that CPU's consecutive switches (the file holds no
 * frequency record); if the trace has no such pairs, RM_EINVAL asks for
 * --xen-cpu-khz. Returns RM_OK, the file errors of col_xen_file_open()
 * (RM_EIO, RM_ENOENT, RM_ETRUNC, RM_EPROTO; logged), RM_EINVAL for bad
 * options, or the first error a sink function returns. info may be NULL.
 * Runs in the caller's thread; sink functions are called from it.
 */
int col_xen_replay_file(const char *path, const struct col_xen_opts *o, const struct col_sink *sink);
int col_xen_replay_file_ex(const char *path, const struct col_xen_opts *o, const struct col_sink *sink,
			   struct col_xen_replay_info *info);

/*
 * Trace the running hypervisor until *stop becomes non-zero: enables the
 * trace buffers (scheduler, memory, domain events), maps every CPU's ring,
 * waits on VIRQ_TBUF (and polls every 100 ms), merges the CPUs and accounts
 * as the replay does; cpu_khz 0 = xc_physinfo()'s. On return tracing is
 * disabled. Returns RM_OK after a stop, RM_ENOTSUP (logged as "xen hypervisor
 * not available: ...") when there is no Xen (or the build has no libxenctrl),
 * RM_EPERM/RM_EIO when tracing cannot be set up, or a sink error.
 */
int col_xen_live_run(const struct col_xen_opts *o, const struct col_sink *sink, volatile sig_atomic_t *stop);

#endif
