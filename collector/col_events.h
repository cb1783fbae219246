/*
 * col_events.h - the recorded event stream format ("rametr-events"), its
 * parser and its writer.
 *
 * A recorded event stream is what the kernel side of Rametr sees (context
 * switches, wakeups, socket recv/send, fork, exit, disk I/O), written down so
 * that the segmenter (segmenter.h) can be run on it in user space by the
 * replay backend (col_replay.h): for unit tests, for fuzzing, and for
 * re-running a stream captured on a real node.
 *
 * THE FORMAT, VERSION 1
 *
 * Text (ASCII), one record per line, lines end in "\n" ("\r\n" accepted).
 * '#' starts a comment that runs to the end of the line, wherever it
 * appears; blank lines and comment lines are ignored. Fields are separated
 * by spaces or tabs. Outside comments only printable ASCII, space and tab
 * are allowed.
 *
 * The first non-blank, non-comment line is the header:
 *
 *   rametr-events 1 window_ns=<n> offset_ns=<n> ncpu=<n>
 *
 *   1          format version; a reader refuses any other (RM_EVERSION)
 *   window_ns  accounting window length, 1 .. 2^62 ns
 *   offset_ns  added to every timestamp before cutting windows: window
 *              index w = (ts + offset_ns) / window_ns; 0 .. 2^63-1
 *              (on a live node: CLOCK_REALTIME - CLOCK_MONOTONIC)
 *   ncpu       number of CPUs, 1 .. 4096; events name CPUs 0 .. ncpu-1;
 *              ncpu * window_ns must not exceed 2^62
 *
 * The three keys are required, in any order; unknown keys are errors. Every
 * other line is one event:
 *
 *   <ts_ns> <cpu> <type> key=value ...
 *
 *   ts_ns      time of the event in ns (CLOCK_MONOTONIC on a live node),
 *              1 .. 2^62 (0 is reserved: the segmenter uses it as "unset")
 *   cpu        CPU the event happened on, < ncpu
 *   type       one of the types below
 *
 * Timestamps must not decrease on one CPU (events of different CPUs may be
 * interleaved in any order; the replay merges them by time, keeping file
 * order for equal timestamps). Keys may come in any order; a key may appear
 * once; unknown keys, missing required keys and malformed values are errors.
 * Numbers are unsigned decimal without sign. A "tid" is a kernel thread id
 * (task pid), a "pid" a thread group id; tid 0 is the idle task and is only
 * valid in switch events.
 *
 *   switch  prev=<tid> prev_state=<c> next=<tid> [prev_pid=<pid>] [next_pid=<pid>]
 *           Context switch from prev to next. prev=0 / next=0: the idle task.
 *           prev_state is one letter: R = prev stays runnable (preempted; its
 *           run-queue wait starts now), S = sleeping, D = uninterruptible
 *           sleep, T = stopped, X = dead, Z = zombie, I = idle kernel
 *           thread. Everything but R means "not runnable".
 *   wakeup  tid=<tid> [by=<tid>]
 *           tid becomes runnable (sched_wakeup / sched_wakeup_new). by: the
 *           thread that woke it, running on <cpu>, given only for a wake-up
 *           between threads of one process from inside a futex wake or a
 *           write (what the kernel backend takes for a hand-off under
 *           follow-replies), 0 or left out otherwise.
 *   recv    tid=<tid> pid=<pid> sock=<cookie> bytes=<n>
 *           [comm=<comm>] [fam=4|6 laddr=<addr> raddr=<addr>] [fam=unix [lsk=<id>] [rsk=<id>]]
 *           [seq=<seq>] [srv=1] [dgram=1 [from=<addr>]]
 *   send    same keys as recv (but from)
 *           A recv (send) of <n> bytes by thread tid (running on <cpu>) on
 *           the socket with cookie <cookie> (1 .. 2^64-1). bytes may be 0
 *           (EOF, ignored by the replay), at most 2^48. fam: 4 = IPv4, 6 =
 *           IPv6 (both need laddr and raddr), unix = AF_UNIX (no addresses;
 *           lsk and rsk identify this end and its peer, 1 .. 2^64-1, and seq
 *           is then the position of the byte in the connection's stream);
 *           without fam the socket has no family (0) and no addresses. An
 *           IPv4 address is written a.b.c.d:port, an IPv6 one [addr]:port.
 *           seq: TCP sequence number (32-bit, 0 .. 2^32-1) of the first
 *           byte. srv=1: the socket is the server side of its connection
 *           (its local port was bound explicitly; the follow-replies option
 *           uses it), srv=0 is the same as leaving it out.
 *           dgram=1: a datagram socket (UDP): each recv is a message of
 *           its own (segmenter.h, rm_on_dgram_recv). from (recv, fam=4|6,
 *           dgram=1): the sender's address the recv wrote out, on an
 *           unconnected socket whose raddr is the unspecified address with
 *           port 0; the replay, like the kernel, learns it at the thread's
 *           next recv or send (rm_on_dgram_src).
 *           comm: the thread's name, 1 .. 15 bytes (no NUL); space,
 *           bytes outside printable ASCII and the characters '%', '#' and
 *           '=' are written %XX (two hex digits; the parser accepts %XX for
 *           any byte but 00). On a send, comm is informational.
 *   fork    ptid=<tid> ppid=<pid> ctid=<tid> cpid=<pid>
 *           Thread ptid created thread ctid (ctid != ptid; cpid == ppid for
 *           a thread, a new pid for a process).
 *   exit    tid=<tid> pid=<pid>
 *           Thread tid (running on <cpu>) exits.
 *   steal   ns=<n>
 *           The hypervisor's count of time stolen from <cpu> (its vCPU was
 *           runnable but the host ran something else), in ns since boot,
 *           0 .. 2^62, never decreasing on one CPU: what the kernel side
 *           reads from the paravirtual steal clock at each cut. Stolen time
 *           is on nobody's CPU: it is left out of busy and of every part.
 *   disk    tid=<tid> op=R|W bytes=<n>
 *           Thread tid (running on <cpu>) issued a disk read (R) or write
 *           (W) of <n> bytes (0 .. 2^48; 0 is ignored by the replay).
 *
 * Example:
 *
 *   rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=2
 *   # a request served by thread 101 of pid 100
 *   1000 0 switch prev=0 prev_pid=0 prev_state=S next=101 next_pid=100
 *   2000 0 recv tid=101 pid=100 comm=srv sock=7 fam=4 laddr=127.0.0.1:7000 raddr=127.0.0.2:40001 bytes=64 seq=1000
 *   3000 0 send tid=101 pid=100 comm=srv sock=7 fam=4 laddr=127.0.0.1:7000 raddr=127.0.0.2:40001 bytes=512 seq=5000
 *   4000 0 switch prev=101 prev_pid=100 prev_state=S next=0 next_pid=0
 *
 * The writer emits keys in the order shown in the type list above, always
 * writes prev_pid and next_pid, and writes comm, fam/laddr/raddr, seq,
 * srv=1, dgram=1 and from only when present, so that parse(write(e)) == e and write(parse(line)) is
 * the canonical form of a line.
 *
 * The parser holds the whole stream in memory (a file is read at open).
 * Readers and the format functions are not thread-safe per object; distinct
 * objects may be used from distinct threads.
 */
#ifndef COL_EVENTS_H
#define COL_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <linux/types.h>

#include "rametr.h"

#define COL_EVENTS_VERSION 1
#define COL_EVENTS_MAX_TS (1ULL << 62)
#define COL_EVENTS_MAX_WINDOW (1ULL << 62)
#define COL_EVENTS_MAX_OFFSET 9223372036854775807ULL /* 2^63 - 1: fits an int64_t clock offset */
#define COL_EVENTS_MAX_NCPU 4096
#define COL_EVENTS_MAX_BYTES (1ULL << 48)
#define COL_EVENTS_LINE_MAX 512   /* longest line the writer can produce, with "\n" and NUL */

enum col_ev_type {
	COL_EV_SWITCH = 1,
	COL_EV_WAKEUP,
	COL_EV_RECV,
	COL_EV_SEND,
	COL_EV_FORK,
	COL_EV_EXIT,
	COL_EV_DISK,
	COL_EV_STEAL,
};

struct col_events_hdr {
	uint64_t window_ns;
	uint64_t offset_ns;
	uint32_t ncpu;
};

/* recv and send */
struct col_ev_io {
	uint32_t tid, pid;
	struct rm_tuple tuple;    /* cookie = sock, family RM_AF_* or 0, addresses as in rametr.h */
	uint64_t bytes;
	int has_seq;
	uint64_t seq;             /* valid if has_seq; < 2^32 */
	int srv;                  /* the socket is the server side of its connection */
	int dgram;                /* a datagram socket: each recv is a message */
	int has_from;             /* recv on an unconnected datagram socket: from, from_port valid */
	__u32 from[4];            /* the datagram's sender, as rm_tuple's raddr */
	__u32 from_port;
	char comm[RM_COMM_LEN];   /* NUL-terminated; "" if absent */
};

struct col_event {
	uint64_t ts_ns;
	uint32_t cpu;
	uint32_t line;            /* 1-based line in the source; 0 for events not parsed */
	enum col_ev_type type;
	union {
		struct {
			uint32_t prev_tid, prev_pid, next_tid, next_pid;
			char prev_state;  /* one of "RSDTXZI" */
		} sw;
		struct {
			uint32_t tid;
			uint32_t by;      /* the waker, 0 if unknown */
		} wakeup;
		struct col_ev_io io;  /* COL_EV_RECV, COL_EV_SEND */
		struct {
			uint32_t ptid, ppid, ctid, cpid;
		} fork;
		struct {
			uint32_t tid, pid;
		} exit;
		struct {
			uint32_t tid;
			int is_write;
			uint64_t bytes;
		} disk;
		struct {
			uint64_t ns;
		} steal;
	} u;
};

/* Name of an event type as written in streams ("switch", ...); "?" if invalid. */
const char *col_ev_type_name(enum col_ev_type t);

/* ---- parser ---- */

struct col_events;

/*
 * Opens the stream in file `path` (read into memory) and parses its header.
 * Returns RM_OK with *out set (owned by the caller, col_events_close()), or
 * RM_EIO / RM_ENOENT (cannot read), RM_EPROTO (malformed header),
 * RM_EVERSION (other format version), RM_ENOMEM, RM_EINVAL (NULL
 * arguments), with *out NULL and a message in err (if err != NULL), e.g.
 * "trace.events:1: unsupported format version '2' (this reader knows 1)".
 */
int col_events_open(struct col_events **out, const char *path, char *err, size_t errlen);

/*
 * Same for a stream in memory: buf[0 .. len) (copied; need not be
 * NUL-terminated), called `name` in messages (copied; NULL: "<buffer>").
 */
int col_events_open_buf(struct col_events **out, const char *buf, size_t len, const char *name, char *err,
			size_t errlen);

/* The stream's header; valid until col_events_close(). */
const struct col_events_hdr *col_events_header(const struct col_events *r);

/* The name used in messages (the path for files). */
const char *col_events_name(const struct col_events *r);

/*
 * Reads the next event into *ev. Returns RM_OK, RM_ENOENT at the end of the
 * stream, or RM_EPROTO for a malformed line (message in col_events_error(),
 * e.g. "events.txt:12: unknown event type 'foo'"); after an error or the end
 * every further call returns the same value.
 */
int col_events_next(struct col_events *r, struct col_event *ev);

/* Message of the last error, "" if none. Valid until the next call on r. */
const char *col_events_error(const struct col_events *r);

/* Frees r. NULL-tolerant. */
void col_events_close(struct col_events *r);

/* ---- writer ---- */

/*
 * Formats the header line (with "\n") into buf. Returns RM_OK, RM_EINVAL if
 * h is out of the ranges above, RM_ETRUNC if len is too small
 * (COL_EVENTS_LINE_MAX always suffices).
 */
int col_events_format_header(const struct col_events_hdr *h, char *buf, size_t len);

/*
 * Formats one event line (canonical form, with "\n") into buf. Returns RM_OK,
 * RM_EINVAL if the event could not be parsed back (bad type, tid 0 where not
 * allowed, bad family, comm too long, values out of range, ...), RM_ETRUNC
 * if len is too small. ev->line is not written.
 */
int col_events_format(const struct col_event *ev, char *buf, size_t len);

/* col_events_format_header / col_events_format to f; RM_EIO if writing fails. */
int col_events_write_header(FILE *f, const struct col_events_hdr *h);
int col_events_write(FILE *f, const struct col_event *ev);

#endif
