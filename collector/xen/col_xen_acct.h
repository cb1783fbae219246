/*
 * col_xen_acct.h - pure accounting of xentrace records (no I/O): per window,
 * per domain and vCPU, CPU time, run-queue (runnable but waiting) time and
 * blocked time; idle-domain time; lost-record spans; seed 003 dom0 charging.
 *
 * Rules:
 * - Time: T(tsc) = epoch_offset_ns + (tsc - tsc0) * 10^6 / cpu_khz (128-bit,
 *   floor); every interval is cut at both ends with this one function, so
 *   pieces add up exactly. TSCs below tsc0 map to T(tsc0); records that come
 *   in older than the newest one seen (live stragglers) are treated as if
 *   they came at the newest time.
 * - CPU time, per physical CPU: the time between two TRC_SCHED_SWITCH
 *   records belongs to the previous record's "next" vCPU; it is checked
 *   against the later record's "prev" (mismatches are counted, the "prev" of
 *   the later record wins). Before a CPU's first switch its state is unknown:
 *   the first SWITCH (or SWITCH_INFCONT / CONTINUE_RUNNING) tells who ran,
 *   and that vCPU is charged back to the CPU's coverage start, i.e. the start
 *   of the trace (tracing is enabled on all CPUs at once and a CPU without
 *   records had no switch). A CPU whose state never becomes known is not
 *   covered (its time counts nowhere, not even in capacity; unresolved_ns).
 *   Every CPU's coverage ends at the last record of the trace.
 * - Domain ids: DOMID_IDLE (32767) time is idle_ns; other reserved ids
 *   (>= 0x7ff0) are unattributable: unseg_cpu_ns; everything else is a part.
 * - TRC_LOST_RECORDS on CPU c at T with first lost TSC F: the running vCPU is
 *   charged up to F, [F, T) is lost_ns (busy, unattributable: V), and from T
 *   the CPU runs the vCPU the record names. vCPU run states are not repaired
 *   (a wake-up lost in the span shows later).
 * - vCPU run states: TRC_SCHED_RUNSTATE_CHANGE when present (authoritative);
 *   also derived from SWITCH (next running; prev runnable, or blocked after a
 *   BLOCK, or offline after a SLEEP while it ran), WAKE (runnable) and SLEEP
 *   (runnable -> offline), so traces without the runstate class work too.
 *   runq_ns = time runnable; blocked_ns = time blocked or offline. A vCPU's
 *   time before its first event is not counted.
 * - Domains: TRC_SCHED_DOM_ADD / TRC_DOM0_DOM_ADD mark a domain created,
 *   ..._DOM_REM destroyed: its vCPUs stop accumulating run-queue / blocked
 *   time and forget their state (a later ADD of the id starts afresh).
 * - Dom0 charging (seed 003), per window: N_g = grant operations
 *   (TRC_MEM_PAGE_GRANT_MAP / UNMAP / TRANSFER) naming domain g, recorded on
 *   a CPU running a dom0 vCPU; N = sum over all named domains (dom0 itself and
 *   reserved ids included: their share stays with dom0). For each dom0 vCPU v
 *   with CPU time D_v in the window and each guest g: share = floor(D_v * N_g
 *   / N); guest g gets a driver part with the sum of its shares, v keeps the
 *   rest. Grants recorded while another domain ran are counted, not used.
 * - Windows are emitted in order once every CPU's time up to their end is
 *   known (all CPUs resolved or past it); with hold_ns set (live), an
 *   unresolved CPU holds windows back at most hold_ns, then its unknown time
 *   before that point is dropped (unresolved_ns). Empty windows are skipped.
 *
 * Thread safety: an acct object is used by one thread at a time.
 */
#ifndef COL_XEN_ACCT_H
#define COL_XEN_ACCT_H

#include <stdint.h>

#include "col_backend.h"
#include "col_xen_trace.h"

#define COL_XEN_SEG_BASE (1ull << 62)
#define COL_XEN_SEG_DRIVER (1ull << 47)

struct col_xen_acct_cfg {
	uint64_t window_ns;      /* > 0 */
	uint64_t cpu_khz;        /* > 0 */
	int64_t epoch_offset_ns; /* >= 0 */
	int dom0_charging;
	uint64_t tsc0;           /* TSC of T = epoch; 0 = first record with a TSC */
	uint64_t hold_ns;        /* 0 = hold windows until CPUs resolve (replay) */
};

struct col_xen_acct_stats {
	uint64_t records;          /* records fed */
	uint64_t switches;
	uint64_t switch_mismatch;  /* prev of a switch != the CPU's known vCPU */
	uint64_t resolved_cpus;    /* CPUs whose unknown state was resolved */
	uint64_t unresolved_ns;    /* CPU time never covered */
	uint64_t runstate_events;
	uint64_t bad_runstate;     /* runstate changes with invalid states */
	uint64_t grants_dom0;      /* grant ops counted for dom0 charging */
	uint64_t grants_other;     /* grant ops while dom0 did not run (not used) */
	uint64_t lost_spans;
	uint64_t lost_records;
	uint64_t lost_ns;
	uint64_t dom_created;
	uint64_t dom_destroyed;
	uint64_t late_records;     /* records older than the newest seen */
	uint64_t ignored;          /* malformed interpreted records, or before the first TSC */
	uint64_t windows;          /* windows emitted */
	uint64_t parts;            /* parts emitted */
	uint64_t driver_parts;
	uint64_t first_ns, last_ns; /* T of the first and last record */
	uint32_t ncpu;             /* CPUs accounted */
};

struct col_xen_acct;

/*
 * Create an accounting object that emits into *sink (copied; sink->arg is
 * not owned). RM_EINVAL for a bad cfg or sink, RM_ENOMEM.
 */
int col_xen_acct_open(const struct col_xen_acct_cfg *cfg, const struct col_sink *sink, struct col_xen_acct **out);

/* Free a. NULL-tolerant. Does not emit anything (call finish first). */
void col_xen_acct_free(struct col_xen_acct *a);

/*
 * Declare a physical CPU before the first record, so that it is covered from
 * the start of the trace even if its first record comes late. CPUs first
 * seen in a record are added then. RM_EINVAL (cpu >= COL_XEN_MAX_CPUS),
 * RM_ENOMEM.
 */
int col_xen_acct_add_cpu(struct col_xen_acct *a, uint32_t cpu);

/*
 * Account one record (records should come in non-decreasing TSC order).
 * May emit finished windows. Returns RM_OK, RM_ENOMEM, RM_ESTATE (broken
 * identity, logged; a bug), or a sink error.
 */
int col_xen_acct_feed(struct col_xen_acct *a, const struct col_xen_rec *r);

/*
 * End of input: charge every known state up to the last record, emit every
 * pending window. Further feeds return RM_ESTATE.
 */
int col_xen_acct_finish(struct col_xen_acct *a);

const struct col_xen_acct_stats *col_xen_acct_stats(const struct col_xen_acct *a);

/*
 * TSC frequency from a trace: for each CPU, consecutive
 * TRC_SCHED_SWITCH_INFPREV records (no lost records between) give the TSC
 * length of a slice and its runtime in ns as Xen measured it; khz = 10^6 *
 * sum(tsc) / sum(ns). Feed records in per-CPU order.
 */
struct col_xen_calib;

int col_xen_calib_open(struct col_xen_calib **out);
void col_xen_calib_free(struct col_xen_calib *c);
int col_xen_calib_feed(struct col_xen_calib *c, const struct col_xen_rec *r);

/*
 * The derived frequency: RM_OK with *khz, or RM_ENOENT if fewer than 8 slices
 * (or less than 1 ms) were seen or the result is outside 10 MHz .. 100 GHz.
 * *slices (may be NULL) gets the number of slices used.
 */
int col_xen_calib_result(const struct col_xen_calib *c, uint64_t *khz, uint64_t *slices);

#endif
