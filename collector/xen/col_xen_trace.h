/*
 * col_xen_trace.h - reading xentrace binary data: files written by the
 * xentrace tool (replay) and the hypervisor's per-CPU trace buffers (live).
 *
 * Format decisions (checked against Debian's libxen-dev 4.17 headers,
 * xen/trace.h, the xentrace tool's writer and a real credit2 trace):
 *
 * - Everything is little-endian 32-bit words. A record is one header word
 *     bits 0..27 event id, bits 28..30 number of extra data words (0..7),
 *     bit 31 set when a 64-bit TSC (two words, low first) follows the header,
 *   then the extra words. Size = 4 + (tsc ? 8 : 0) + 4 * n bytes. This is
 *   struct t_rec of xen/trace.h. Any event id parses: the structure does not
 *   depend on the event.
 * - A file is a sequence of chunks. The xentrace tool writes, each time it
 *   drains a CPU's buffer, a TRC_TRACE_CPU_CHANGE record without TSC whose
 *   two extra words are the CPU number and the number of bytes that follow,
 *   then those bytes: whole records of that CPU, in that CPU's order (a
 *   wrapped buffer window is written as one chunk). The file must start with
 *   such a record; a chunk whose records do not end exactly at its byte count,
 *   a CPU-change record inside a chunk, a CPU id >= COL_XEN_MAX_CPUS, or any
 *   other word where a chunk header is expected is rejected (RM_EPROTO); a
 *   file that ends inside a chunk header or before a chunk's byte count is
 *   rejected as truncated (RM_ETRUNC). Errors name the file and byte offset.
 * - A record without TSC takes the TSC of the previous record of its CPU
 *   (the CPU's first TSC if none came before). A TSC lower than the previous
 *   one on the same CPU is raised to it (counted in tsc_backwards).
 * - CPUs are merged by TSC (ties: lower CPU first, then per-CPU order), so
 *   records come out in non-decreasing TSC order.
 * - TRC_TRACE_WRAP_BUFFER records (filler the hypervisor writes when a
 *   record would not fit before the end of its ring) are counted and skipped.
 * - TRC_LOST_RECORDS records are passed on: extra words are the number of
 *   records lost, domid | vcpu << 16 of the vCPU running when the record was
 *   written, and the TSC of the first lost record (low, high). The span from
 *   that TSC to the record's own TSC is what col_xen_acct charges to V.
 * - "Known" events (those col_xen_acct interprets) with fewer data words than
 *   their writer in Xen produces are counted as malformed; the parser does
 *   not fail on them, the accounting ignores them.
 *
 * Live buffers: struct col_xen_tbuf_meta mirrors struct t_buf (cons, prod,
 * both modulo 2 * data size); col_xen_tbuf_consume() copies the unread window
 * exactly as the xentrace tool does. struct col_xen_stream merges what is
 * read from all CPUs in rounds (see its comment).
 *
 * No Xen header is needed here: the event ids below are copied from
 * xen/trace.h (col_xen_live.c checks them against it at compile time).
 */
#ifndef COL_XEN_TRACE_H
#define COL_XEN_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* Event ids (xen/trace.h). */
#define COL_XEN_TRC_LOST_RECORDS 0x0001f001u
#define COL_XEN_TRC_WRAP_BUFFER 0x0001f002u
#define COL_XEN_TRC_CPU_CHANGE 0x0001f003u
#define COL_XEN_TRC_RUNSTATE_CHANGE 0x00021001u /* | old << 8 | new << 4 */
#define COL_XEN_TRC_CONTINUE_RUNNING 0x00021002u
#define COL_XEN_TRC_SCHED_DOM_ADD 0x00028001u
#define COL_XEN_TRC_SCHED_DOM_REM 0x00028002u
#define COL_XEN_TRC_SCHED_SLEEP 0x00028003u
#define COL_XEN_TRC_SCHED_WAKE 0x00028004u
#define COL_XEN_TRC_SCHED_BLOCK 0x00028006u
#define COL_XEN_TRC_SCHED_SWITCH 0x0002800au
#define COL_XEN_TRC_SCHED_SWITCH_INFPREV 0x0002800eu
#define COL_XEN_TRC_SCHED_SWITCH_INFNEXT 0x0002800fu
#define COL_XEN_TRC_SCHED_SWITCH_INFCONT 0x00028011u
#define COL_XEN_TRC_DOM0_DOM_ADD 0x00041001u
#define COL_XEN_TRC_DOM0_DOM_REM 0x00041002u
#define COL_XEN_TRC_MEM_GRANT_MAP 0x0010f001u
#define COL_XEN_TRC_MEM_GRANT_UNMAP 0x0010f002u
#define COL_XEN_TRC_MEM_GRANT_TRANSFER 0x0010f003u

/* Masks for TRC_SCHED_RUNSTATE_CHANGE, whose id carries the states. */
#define COL_XEN_RUNSTATE_MASK 0xfffff00fu
#define COL_XEN_RUNSTATE_OLD(ev) (((ev) >> 8) & 0xfu)
#define COL_XEN_RUNSTATE_NEW(ev) (((ev) >> 4) & 0xfu)

/* Xen runstates (xen/vcpu.h RUNSTATE_*). */
#define COL_XEN_RS_RUNNING 0
#define COL_XEN_RS_RUNNABLE 1
#define COL_XEN_RS_BLOCKED 2
#define COL_XEN_RS_OFFLINE 3

/* Domain ids (xen/xen.h). */
#define COL_XEN_DOMID_FIRST_RESERVED 0x7ff0u
#define COL_XEN_DOMID_IDLE 0x7fffu

#define COL_XEN_EXTRA_MAX 7        /* TRACE_EXTRA_MAX */
#define COL_XEN_HDR_TSC 0x80000000u /* TRC_HD_CYCLE_FLAG */
#define COL_XEN_MAX_CPUS 4096u     /* CPU ids accepted in a file */

/* One decoded record. */
struct col_xen_rec {
	uint64_t tsc;       /* own TSC, or inherited (has_tsc == 0) */
	uint32_t event;     /* 28-bit event id */
	uint32_t cpu;
	uint32_t nextra;    /* valid words in extra[] */
	uint32_t has_tsc;   /* 1 if the record carried its own TSC */
	uint32_t extra[COL_XEN_EXTRA_MAX];
};

/* Statistics of a parsed file (or of a stream). */
enum col_xen_class {
	COL_XEN_CLS_GEN,
	COL_XEN_CLS_SCHED,
	COL_XEN_CLS_DOM0OP,
	COL_XEN_CLS_HVM,
	COL_XEN_CLS_MEM,
	COL_XEN_CLS_PV,
	COL_XEN_CLS_SHADOW,
	COL_XEN_CLS_HW,
	COL_XEN_CLS_GUEST,
	COL_XEN_CLS_OTHER,
	COL_XEN_CLS_COUNT
};

struct col_xen_trace_stats {
	uint64_t bytes;          /* size of the input */
	uint64_t chunks;         /* CPU-change chunks */
	uint64_t records;        /* records inside chunks, wraps included */
	uint64_t by_class[COL_XEN_CLS_COUNT];
	uint64_t no_tsc;         /* records without their own TSC */
	uint64_t wraps;          /* TRC_TRACE_WRAP_BUFFER records (skipped) */
	uint64_t lost_recs;      /* TRC_LOST_RECORDS records */
	uint64_t lost_total;     /* sum of their lost-record counts */
	uint64_t malformed;      /* known events with too few data words */
	uint64_t tsc_backwards;  /* TSCs raised to their CPU's previous one */
	uint32_t ncpu;           /* distinct CPUs with records */
	uint32_t max_cpu;        /* highest CPU id with records */
	uint64_t first_tsc;      /* lowest own TSC (0 if none) */
	uint64_t last_tsc;       /* highest own TSC */
};

/* Class of an event id (by its TRC_CLS bit). Pure. */
enum col_xen_class col_xen_event_class(uint32_t event);

/* Name of a class ("gen", "sched", ...). Static string, never NULL. */
const char *col_xen_class_name(enum col_xen_class c);

/*
 * Minimum number of data words Xen writes for an interpreted event, or -1 if
 * the event is not one col_xen_acct interprets. Pure.
 */
int col_xen_event_min_extra(uint32_t event);

/*
 * Decode the record at p[0..len). On RM_OK fills *r (cpu = 0, tsc = 0 when
 * the record has none) and *used with its size. RM_ETRUNC if len is shorter
 * than the record. Pure, thread-safe.
 */
int col_xen_rec_decode(const uint8_t *p, size_t len, struct col_xen_rec *r, size_t *used);

/* ---------------------------------------------------------------- files */

struct col_xen_file;

/*
 * Open and validate a xentrace file: reads it whole into memory, walks every
 * chunk and record, fills the statistics. Errors are logged with the path and
 * byte offset: RM_EIO (cannot read), RM_ETRUNC, RM_EPROTO (see above; also
 * for an empty file). On RM_OK *out owns the file's contents; free with
 * col_xen_file_close(). Not thread-safe per object.
 */
int col_xen_file_open(const char *path, struct col_xen_file **out);

/* Release f. NULL-tolerant. */
void col_xen_file_close(struct col_xen_file *f);

/* Statistics gathered by col_xen_file_open(). Valid while f is open. */
const struct col_xen_trace_stats *col_xen_file_stats(const struct col_xen_file *f);

/* 1 if CPU cpu has records in f. */
int col_xen_file_has_cpu(const struct col_xen_file *f, uint32_t cpu);

/*
 * Next record of the TSC-merged stream (wrap records skipped). RM_OK with *r
 * filled, RM_ENOENT at the end. The order is fully determined by the file.
 */
int col_xen_file_next(struct col_xen_file *f, struct col_xen_rec *r);

/* Restart the merged stream from the beginning. */
void col_xen_file_rewind(struct col_xen_file *f);

/* ------------------------------------------------------- live buffers */

/* Mirror of struct t_buf: indexes modulo 2 * data_size; records follow. */
struct col_xen_tbuf_meta {
	uint32_t cons;
	uint32_t prod;
};

/*
 * Copy the unread bytes of one CPU's trace ring into out[0..cap) and mark
 * them read (cons = prod), as the xentrace tool does: read cons and prod
 * once, acquire fence, copy (in two pieces when the window wraps), release
 * fence, store cons. data is the ring of data_size bytes following meta.
 * *len = bytes copied (0 if nothing new). RM_EPROTO if cons/prod are out of
 * range or the window exceeds data_size; RM_EINVAL if cap < data_size.
 * The hypervisor is the only concurrent writer (of prod).
 */
int col_xen_tbuf_consume(volatile struct col_xen_tbuf_meta *meta, const volatile uint8_t *data,
			 uint32_t data_size, uint8_t *out, size_t cap, size_t *len);

/*
 * Live merge of per-CPU record streams read in rounds: each round the caller
 * pushes what it read from every CPU, then calls col_xen_stream_end_round()
 * and pops. A record is released once its TSC is <= the lowest last TSC among
 * the CPUs that delivered records in this round (a CPU with nothing new does
 * not hold the others back): everything a CPU writes later carries a later
 * TSC than what it delivered. A CPU read before another may still deliver,
 * next round, a record older than one already released; such stragglers come
 * out late (col_xen_acct clamps them). Wrap records are counted and dropped.
 */
struct col_xen_stream;

/* Create a stream for CPUs 0..ncpu-1. RM_EINVAL, RM_ENOMEM. */
int col_xen_stream_open(uint32_t ncpu, struct col_xen_stream **out);

/* Free s. NULL-tolerant. */
void col_xen_stream_free(struct col_xen_stream *s);

/*
 * Decode whole records from bytes[0..len) of CPU cpu and queue them.
 * RM_EPROTO if the bytes end inside a record or hold a CPU-change record
 * (logged), RM_EINVAL for a bad cpu, RM_ENOMEM.
 */
int col_xen_stream_push(struct col_xen_stream *s, uint32_t cpu, const uint8_t *bytes, size_t len);

/* Close the current round: sort what is queued and compute the release limit. */
void col_xen_stream_end_round(struct col_xen_stream *s);

/*
 * Pop the oldest released record: RM_OK, or RM_ENOENT when none is released.
 * With drain set, every queued record is released (end of input).
 */
int col_xen_stream_pop(struct col_xen_stream *s, int drain, struct col_xen_rec *r);

/* Statistics of everything pushed so far (bytes, records, classes, wraps). */
const struct col_xen_trace_stats *col_xen_stream_stats(const struct col_xen_stream *s);

#endif
