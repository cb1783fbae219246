/*
 * rametr.h - the contract between the kernel side (rametr.bpf.c, or the
 * user-space segmenter fed by the replay backend) and the collector.
 *
 * Only __u32/__u64 types: this header is included by BPF code (with
 * vmlinux.h) and by user space (with <linux/types.h>).
 *
 * The kernel side emits one struct rm_part per (thread, segment, window) into
 * a ring buffer - a ring record holds 1 to RM_BATCH parts back to back, the
 * parts a CPU emitted in a row - and keeps per-CPU window totals (struct rm_wintot) in a ring
 * of RM_WIN_SLOTS slots indexed by window % RM_WIN_SLOTS that user space polls.
 */
#ifndef RM_RAMETR_H
#define RM_RAMETR_H

#ifndef __bpf__
#include <linux/types.h> /* the BPF side gets the same types from vmlinux.h */
#endif

/* Part flags (RM_PF_*), address families (RM_AF_*), RM_COMM_LEN, and the
 * field table of window totals: shared with the wire (macros only). */
#include "rm_part_def.h"

#define RM_WIN_SLOTS 16       /* per-CPU window totals kept in the kernel */
#define RM_MAX_SPLIT 4        /* windows one CPU slice is split across; older time is 'lost' */
#define RM_QUERY_EVERY 8     /* the kernel reads the ring's fill once per this many records of a CPU */
#define RM_BATCH 8           /* parts per ring record at most (a power of 2) */
#define RM_BATCH_NS 20000000ULL /* a CPU's batch is written out when it switches with a part this old */

/* Thread modes. */
#define RM_MODE_NONE 0   /* not in a segment: CPU and I/O are unsegmented */
#define RM_MODE_SEG 1    /* between a recv and the next send: CPU and I/O charged */
#define RM_MODE_ASSOC 2  /* after the send: I/O still charged to the segment's CE, CPU too while in its
			    tail (rm_task.tail: until the next recv, a hand-off or the first wait) */
#define RM_MODE_CONT 3   /* follow-replies option: after a send, work whose request is not known yet */

/* Managed runtimes the loader recognises from a binary (the runtimes map's values, rm_task.rt). */
#define RM_RT_NONE 0
#define RM_RT_GO 1       /* a Go program */
#define RM_RT_JVM 2      /* a Java virtual machine */
#define RM_RT_GO_PLAIN 3 /* a Go program whose goroutines are not labelled (its build cannot be read):
			  * a runtime like the JVM, not one of the Go programs the labels split */

/*
 * Benchmark stages (the bench_stage setting; benchmarks only, never in
 * production): how much of each hook runs, so a benchmark can say what each
 * piece costs. Any stage but FULL breaks the accounting identity.
 */
#define RM_STAGE_FULL 0    /* everything (the default) */
#define RM_STAGE_HOOKS 1   /* every hook returns at once: the cost of being attached */
#define RM_STAGE_CLOCK 2   /* socket and switch hooks: + argument checks, the clock read, the current task */
#define RM_STAGE_TASK 3    /* + the task-storage lookups (the threads' state) */
#define RM_STAGE_STATE 4   /* + socket tuple and TCP range reads, run-queue wait */
#define RM_STAGE_NOEMIT 5  /* + the segmenter, but no ring-buffer records */
#define RM_STAGE_COUNT 6
/* Their names, indexed by stage (benchmarks' options and output). */
#define RM_STAGE_NAMES { "full", "hooks", "clock", "task", "state", "noemit" }

/*
 * A socket as seen by one end. AF_UNIX: laddr[0..1] and raddr[0..1] are
 * the 64-bit identities (inode numbers) of this end and of its peer, valid
 * on this host only.
 */
struct rm_tuple {
	__u64 cookie;     /* socket cookie */
	__u32 family;     /* RM_AF_* or 0 */
	__u32 lport;      /* host order */
	__u32 rport;      /* host order */
	__u32 pad;
	__u32 laddr[4];   /* network order; IPv4 in laddr[0] */
	__u32 raddr[4];
};

struct rm_part {
	__u64 seg_id;     /* (cpu + 1) << 48 | per-CPU counter; never 0 */
	__u64 win;        /* window index of this part */
	__u32 pid;        /* tgid */
	__u32 tid;
	__u64 start_ns;   /* segment start, CLOCK_MONOTONIC */
	__u64 end_ns;     /* end of this part */
	__u64 cpu_ns;
	__u64 runq_ns;
	__u64 rx_bytes;
	__u64 tx_bytes;
	__u64 disk_read;
	__u64 disk_write;
	__u32 flags;      /* RM_PF_* */
	__u32 ends;       /* user space: a record summing merged parts, how many ended their segment; else 0 */
	struct rm_tuple in;
	struct rm_tuple out;
	__u64 in_seq_start, in_seq_end;
	__u64 out_seq_start, out_seq_end;
	__u64 parent_seg;
	__u64 comm[RM_COMM_LEN / 8];
	__u32 domid;      /* Xen backend (RM_PF_DOMAIN): domain id */
	__u32 vcpu;       /* Xen backend: vcpu id */
	__u64 blocked_ns; /* Xen backend: time blocked (not runnable) */
	__u64 samples;    /* eBPF backend, a labelled Go program's thread: the goroutine-label sampler's samples
			     that fell in this part's CPU (they move with the CPU when the counters charge it) */
};

/* The counters of a part, taken out of it atomically when it is emitted. */
struct rm_counts {
	__u64 cpu_ns, runq_ns, rx_bytes, tx_bytes, disk_read, disk_write;
};

/* States of a continuation chain (follow-replies, segmenter.h). */
#define RM_CHAIN_OUT 0x1   /* a part of it was emitted: it needs an anchor record */
#define RM_CHAIN_SLEPT 0x2 /* the thread blocked since the chain began */
#define RM_CHAIN_SERVER 0x4 /* kept across chains: the thread used a server-side socket (it serves) */
#define RM_CHAIN_REQ 0x8    /* with RM_MODE_SEG: the segment began with a recv on a server-side socket
			       (the thread holds a request it just read) */
#define RM_CHAIN_HANDED 0x10 /* the chain began when the thread handed its request to another: it holds
				none (a reader back in its poll loop) */
#define RM_CHAIN_DONE 0x20  /* the chain is anchored from its start: the thread was woken by one that
			       had just answered a request, to finish it (rm_on_handoff) */
#define RM_CHAIN_PASSED 0x40 /* with RM_MODE_SEG on a client-side socket: the thread handed what it read
				to another thread (a demultiplexing reader): its next recv begins a new
				segment instead of extending this one (rm_on_pass) */
#define RM_CHAIN_PEER 0x80  /* with RM_CHAIN_DONE: the chain is anchored to the request a peer thread
			       holds, which woke it (rm_on_handoff); it goes on across the thread's waits
			       to its next socket edge */

/* rm_task.ctr_set (CPU counters). */
#define RM_CTR_SET 0x1 /* cpu_mark, ctr_ns and nvcsw hold the thread's counters */
#define RM_CARRY_MAX 2000000ULL /* rm_task.carry_ns at most (ns); the rest stays unsegmented */
#define RM_CTR_NEW 0x2 /* state made for the counters alone (at fork, by a sweep): whether the thread
			  is excluded, and its name, are decided when it first reads a socket */

/* rm_task.own_reply (the third kind of hand-off, segmenter.h rm_on_handoff). */
#define RM_OWN_ANSWERED 0x1 /* it answered a request it read itself */
#define RM_OWN_LAST 0x2     /* and that reply was its last socket edge: it holds no request */

/* rm_task.ans_st: the request the thread last answered (follow-replies). */
#define RM_ANS_VALID 0x1
#define RM_ANS_SEQ 0x2

/* Per-thread state (task storage in the kernel). */
struct rm_task {
	__u32 mode;       /* RM_MODE_* */
	__u32 dirty;      /* cur holds something not yet emitted */
	__u64 wake_ns;    /* when the thread became runnable, 0 if not waiting */
	__u32 waking;     /* inside a futex wake (wake-up chains option) */
	__u32 chain_st;   /* RM_CHAIN_* of the open chain */
	__u64 chain;      /* open continuation chain (follow-replies), 0 if none */
	__u32 excluded;   /* a Rametr process (or one the loader excluded): never segmented */
	__u32 ans_st;     /* RM_ANS_*: ans, ans_seq_* hold the request of the thread's last reply */
	__u32 tail;       /* RM_MODE_ASSOC: in the tail of the segment it answered, CPU still charged */
	__u32 head;       /* woke from a wait holding no request: its CPU until a recv reads the next one */
	__u32 rt;         /* RM_RT_*: a thread of a process running a managed runtime: its unsegmented CPU is
			     also counted in unseg_rt_ns (and a Go program's in unseg_go_ns) */
	__u32 own_reply;  /* RM_OWN_*: it answered a request it read itself (a reply on a socket whose last
			     bytes it read: an event loop, a thread per connection; never a reader that
			     hands requests to workers, nor those workers): the third kind of hand-off */
	__u32 srv_n;      /* kernel: its reads on server-side sockets, until the hand-off hook is attached */
	__u32 srv_multi;  /* kernel: it read another server-side connection between two reads of one: it
			     serves several connections at once (an event loop) */
	__u32 srv_pad;
	__u64 run_delay;  /* kernel: the thread's run-queue wait (sched_info) already seen, ns */
	__u64 cpu_mark;   /* CPU counters (segmenter.h): the thread's on-CPU counter already accounted, ns */
	__u64 ctr_ns;     /* CPU counters: when cpu_mark was last moved (CLOCK_MONOTONIC) */
	__u32 nvcsw;      /* CPU counters: its voluntary context switches at its last edge */
	__u32 ctr_set;    /* CPU counters: RM_CTR_* */
	__u64 carry_ns;   /* CPU counters: a dispatcher's CPU carried to the request this thread reads next
			     (rm_ctr_carry), at most RM_CARRY_MAX */
	__u64 smp;        /* CPU counters: the goroutine-label sampler's samples of this thread not yet charged
			     (golabel.bpf.c adds; the next claim of its counter moves them with its CPU) */
	struct rm_tuple ans;
	__u64 ans_seq_start, ans_seq_end;
	struct rm_part cur;
};

/*
 * The bytes last received on a server-side socket (follow-replies): what a
 * reply sent on that socket answers. Socket storage in the kernel.
 */
struct rm_inb {
	__u64 seq_start, seq_end; /* TCP range, valid if has_seq */
	__u32 has_seq;
	__u32 replied;            /* a reply went out since: the next bytes begin a new request */
	__u32 reader;             /* the thread that read them (a reply by it sets rm_task.own_reply); on a
				     client-side socket, kernel: the thread that last sent on it (the
				     hand-off hook's triggers) */
	__u32 reader_n;           /* kernel, server side: the reader's srv_n after its read (rm_task) */
};

/*
 * Per-CPU, per-window totals: the WindowTotals fields the kernel keeps (kind
 * K of RM_TOTALS_FIELDS, all __u64, in field order). win identifies the
 * window held by the slot. dropped_*: what dropped parts held, already
 * counted in lost_ns (CPU) and in unseg_* (bytes): the share of those the
 * ring lost.
 */
#define RM_WINTOT_MEMBER_K(m) __u64 m;
#define RM_WINTOT_MEMBER_N(m)
#define RM_WINTOT_MEMBER_(n, m, kind, rule) RM_WINTOT_MEMBER_##kind(m)
struct rm_wintot {
	RM_TOTALS_FIELDS(RM_WINTOT_MEMBER_)
};

/* Per-CPU state: where the last accounting cut was made on this CPU. */
struct rm_cpu {
	__u64 last_ns;    /* 0 until the first event on this CPU */
	__u64 next_seg;   /* per-CPU segment counter */
	__u32 cur_tid;    /* thread on this CPU since last_ns (0 = idle or unknown) */
	__u32 emitted;    /* records this CPU emitted (wrapping): the ring's fill is read every RM_QUERY_EVERY */
	__u64 last_steal; /* the CPU's stolen-time count at the last cut; 0 = not read yet */
};

#endif
