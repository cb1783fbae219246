/*
 * thin_edges.h - the record of a thin kernel side (docs/thin-kernel.md):
 * one compact record per edge of a watched thread (a socket receive or
 * send, a fork, an exit), shared by thin_edges.bpf.c and bench_thin.c.
 * __u32/__u64 only, 64 bytes, no padding; what the segmenter needs to cut
 * segments and windows in user space, without a clock read or any per-thread
 * state in the kernel.
 */
#ifndef THIN_EDGES_H
#define THIN_EDGES_H

/* What the probes do (const volatile thin_variant): each adds one piece, so
 * the cost of a piece is the difference of two variants' run times. */
enum thin_variant {
	THIN_EMPTY = 0, /* (a) return at once: the statistics' own cost and the call */
	THIN_NETNS,     /* (b) the namespace test only */
	THIN_FULL,      /* (c) the record, timestamped by this CPU's runqueue clock (no clock read) */
	THIN_KTIME,     /* (d) (c) with bpf_ktime_get_ns() as the timestamp and the exact running slice */
	THIN_TASK,      /* (e) (c) plus a task-storage lookup (get or create) */
	THIN_RECORD,    /* (f) (c) without the scheduler's counters: ids, cookie, bytes, batch */
	THIN_LEAN,      /* (g) (c) with the namespace's struct net compared by address (two loads, not three)
	                 * and the runqueue address kept in the batch (one map lookup, not two) */
	THIN_VARIANTS
};

#define THIN_VARIANT_NAMES { "empty", "netns", "full", "ktime", "task", "record", "lean" }

enum thin_kind {
	THIN_RECV = 1, /* tp_btf/sock_recv_length: bytes [seq, seq + len) consumed */
	THIN_SEND = 2, /* tp_btf/sock_send_length: bytes [seq, seq + len) queued */
	THIN_FORK = 3, /* tp_btf/sched_process_fork: pid is the child, cookie its parent's pid */
	THIN_EXIT = 4, /* tp_btf/sched_process_exit: the thread's last counters */
};

/* flags: kind in bits 0-3; THIN_F_SEQ when seq is a TCP sequence number;
 * the CPU the edge ran on in bits 16-31 (whose runqueue clock ts is). */
#define THIN_F_KIND 0xfu
#define THIN_F_SEQ 0x10u
#define THIN_F_CPU_SHIFT 16

#define THIN_BATCH_MAX 64 /* records per ring write at most (const volatile thin_batch) */

struct thin_rec {
	__u64 cookie;    /* the socket's cookie (never reused); fork: the parent's tid */
	__u64 cpu_ns;    /* the thread's on-CPU time: se.sum_exec_runtime + (rq->clock_task - se.exec_start) */
	__u64 slice_ns;  /* of it, since the thread last got the CPU (sum - prev_sum + running) */
	__u64 ts;        /* this CPU's rq->clock, sched_clock at its last update (variant ktime: bpf_ktime_get_ns()) */
	__u64 run_delay; /* sched_info.run_delay: the thread's run-queue wait, completed waits */
	__u32 pid;       /* thread id */
	__u32 tgid;      /* process id */
	__u32 seq;       /* first byte's TCP sequence number (THIN_F_SEQ) */
	__u32 len;       /* bytes (the tracepoint's ret, > 0) */
	__u32 nvcsw;     /* the thread's voluntary context switches */
	__u32 flags;     /* THIN_F_* */
};

#endif
