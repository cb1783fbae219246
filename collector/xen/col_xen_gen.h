/*
 * col_xen_gen.h - test helper: writes traces in the exact binary format of
 * the xentrace tool (see col_xen_trace.h), with the records Xen 4.17 writes
 * for scheduling, grants, lost records, wraps and domain creation/removal.
 *
 * Records are queued per CPU; col_xen_gen_round() writes, for every CPU with
 * queued records (in CPU order), a TRC_TRACE_CPU_CHANGE record (cpu, byte
 * count) and the records, as the xentrace tool does each time it drains the
 * buffers. Callers give each CPU's records in non-decreasing TSC order.
 * Not thread-safe.
 */
#ifndef COL_XEN_GEN_H
#define COL_XEN_GEN_H

#include <stddef.h>
#include <stdint.h>

struct col_xen_gen;

/*
 * Encode one record into buf[0..cap): returns its size, or 0 if cap is too
 * small or n > 7. Pure.
 */
size_t col_xen_gen_encode(uint8_t *buf, size_t cap, int with_tsc, uint64_t tsc, uint32_t event, uint32_t n,
			  const uint32_t *extra);

/*
 * Create path (truncated) for a trace of CPUs 0..ncpu-1 whose TSC runs at
 * cpu_khz (used for the runtimes of TRC_SCHED_SWITCH_INFPREV). Returns
 * RM_OK, RM_EINVAL, RM_EIO (logged), RM_ENOMEM.
 */
int col_xen_gen_open(const char *path, uint32_t ncpu, uint64_t cpu_khz, struct col_xen_gen **out);

/* Write queued records and close; returns RM_OK or RM_EIO. NULL-tolerant. */
int col_xen_gen_close(struct col_xen_gen *g);

/* Whether switches also write TRC_SCHED_RUNSTATE_CHANGE records (default 1). */
void col_xen_gen_set_runstate(struct col_xen_gen *g, int on);

/* Write one chunk per CPU with queued records. RM_OK or RM_EIO. */
int col_xen_gen_round(struct col_xen_gen *g);

/* Queue any record. RM_EINVAL (cpu, n), RM_ENOMEM. */
int col_xen_gen_raw(struct col_xen_gen *g, uint32_t cpu, int with_tsc, uint64_t tsc, uint32_t event, uint32_t n,
		    const uint32_t *extra);

/*
 * A context switch on cpu at tsc from (pdom, pv) to (ndom, nv), as
 * sched_context_switch() traces it: SWITCH_INFPREV (runtime since this CPU's
 * previous switch, 0 for the first), SWITCH_INFNEXT, SWITCH, then runstate
 * changes prev running -> prev_state (COL_XEN_RS_*) and next runnable ->
 * running.
 */
int col_xen_gen_switch(struct col_xen_gen *g, uint32_t cpu, uint64_t tsc, uint32_t pdom, uint32_t pv,
		       uint32_t ndom, uint32_t nv, int prev_state);

/* TRC_SCHED_WAKE (dom, vcpu) and runstate blocked -> runnable, recorded on cpu. */
int col_xen_gen_wake(struct col_xen_gen *g, uint32_t cpu, uint64_t tsc, uint32_t dom, uint32_t vcpu);

/* TRC_SCHED_BLOCK (dom, vcpu) on cpu (the vCPU blocks itself). */
int col_xen_gen_block(struct col_xen_gen *g, uint32_t cpu, uint64_t tsc, uint32_t dom, uint32_t vcpu);

/* A grant event (COL_XEN_TRC_MEM_GRANT_*) naming domid, on cpu. */
int col_xen_gen_grant(struct col_xen_gen *g, uint32_t cpu, uint64_t tsc, uint32_t event, uint32_t domid);

/* TRC_LOST_RECORDS on cpu at tsc: count lost since first_tsc; (dom, vcpu) runs now. */
int col_xen_gen_lost(struct col_xen_gen *g, uint32_t cpu, uint64_t tsc, uint32_t count, uint32_t dom,
		     uint32_t vcpu, uint64_t first_tsc);

/*
 * TRC_TRACE_WRAP_BUFFER filling bytes (4..40, multiple of 4) the way Xen's
 * insert_wrap_record() does: no TSC unless the filler needs more than 7
 * words (then tsc is written).
 */
int col_xen_gen_wrap(struct col_xen_gen *g, uint32_t cpu, uint64_t tsc, uint32_t bytes);

/* Domain created / destroyed: event COL_XEN_TRC_SCHED_DOM_ADD/REM or DOM0_DOM_ADD/REM. */
int col_xen_gen_dom(struct col_xen_gen *g, uint32_t cpu, uint64_t tsc, uint32_t event, uint32_t domid);

#endif
