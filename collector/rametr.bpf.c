// SPDX-License-Identifier: GPL-2.0
/*
 * rametr.bpf.c - the eBPF backend's kernel side.
 *
 * Hooks only what loads on a locked-down kernel and costs nothing on
 * unrelated syscalls (docs/kernel.md): tp_btf sock_send_length /
 * sock_recv_length (bytes, 4-tuple and TCP byte range from struct sock),
 * sched_process_fork / exit (thread lineage) and block_rq_issue (disk);
 * with follow-replies, sched_waking (hand-offs inside a process), attached
 * by the collector once a process shows it hands requests over (below).
 * On-CPU time and run-queue wait: by default (cpu_counters) from each
 * thread's own scheduler counters read at those edges and by a task
 * iterator at each window's end, with no hook on context switches
 * (docs/cpu-counters.md); with the slice path, sched_switch (run-queue wait
 * from the scheduler's own sched_info).
 * Segments are cut by segmenter.h, the same code the replay backend runs in
 * user space; per-thread state lives in task storage, and one part per
 * (thread, segment, window) goes to the ring buffer, not one per syscall,
 * in per-CPU batches of up to RM_BATCH parts per ring record.
 * Per-window totals live in a per-CPU array that user space polls.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "rametr.h"

char LICENSE[] SEC("license") = "GPL";

#define MSG_OOB 1
#define MSG_PEEK 2
#define MSG_ERRQUEUE 0x2000
#define RCV_SHUTDOWN 1
#define SOCK_BINDPORT_LOCK 4
#define SOCK_STREAM 1
#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10

/* Settings, written by the loader between open and load. */
const volatile __u64 window_ns = 1000000000ULL;
const volatile __u64 offset_ns = 0;          /* CLOCK_REALTIME - CLOCK_MONOTONIC */
const volatile __u32 self_tgid = 0;          /* the collector itself: never segmented */
const volatile __u32 exclude_rametr = 0;     /* processes named rametr* are never segmented */
const volatile __u64 wakeup_bytes = 256 * 1024; /* wake the consumer at each multiple of this much data; a power of 2 */
const volatile __u32 netns_ino = 0;         /* nonzero: account only threads of this network namespace */
const volatile __u32 follow_wakeups = 0;     /* wake-up chains through futex wakes */
const volatile __u32 follow_replies = 0;     /* continuation chains anchored by replies (segmenter.h) */
const volatile __u32 bench_stage = RM_STAGE_FULL; /* benchmarks only: RM_STAGE_* */
const volatile __u32 cpu_counters = 0;       /* CPU from the threads' own counters, no sched_switch hook */
const volatile __u32 go_labels = 0;          /* golabel.bpf.c's sampler counts samples in rm_task.smp (CPU counters) */

/*
 * CPU counters: how far sched_clock (the runqueues' clock) is behind
 * bpf_ktime_get_ns, the least ktime - rq->clock seen (rq->clock is a past
 * sched_clock reading, so every sample is an upper bound). An error in it is
 * the same at both edges of an interval and cancels (segmenter.h, rm_ctr_edge;
 * docs/cpu-counters.md). Written by any CPU, only ever lowered.
 */
__s64 clk_off = 0x7fffffffffffffffLL;

/*
 * The hand-off hook (rm_sched_waking) runs at every wake-up on the machine,
 * so with follow-replies alone the collector attaches it only once a process
 * shows that it hands requests over between threads: a reply sent on a
 * server-side socket by another thread than the one that read the request
 * there (rm_sock_send), or a reply read on a client-side socket by another
 * thread than the one that last sent on it (rm_sock_recv: a reader handing
 * replies to the threads waiting for them on a shared connection). Until
 * then handoff_hook is 0 and each such request is counted in
 * handoff_replies, which the collector polls; it sets handoff_hook once the
 * hook is attached (at its start when the hook is attached from the start).
 * A third trigger, counted in handoff_reads: a request read on a server-side
 * TCP socket by another thread than the one that read the previous request
 * there (rm_sock_recv: a connection that moves between pool threads, which
 * a dispatcher thread hands to them; segmenter.h, rm_ctr_carry), not in a
 * managed runtime's process (whose threads run any goroutine).
 * A fourth, counted in handoff_moves: a request sent on a client-side TCP
 * connection by another thread than the one that last sent on it, by a
 * thread that serves several connections at once (rm_task.srv_multi: it
 * read another server-side connection between two reads of one; an event
 * loop taking over another thread's idle back-end connection, which wakes
 * the owner: segmenter.h, rm_on_handoff's third kind), not in a managed
 * runtime's process. A thread per connection sharing a pool of back-end
 * connections moves them between threads too, but serves one connection.
 */
__u32 handoff_hook = 0;
__u64 handoff_replies = 0;
__u64 handoff_reads = 0;
__u32 handoff_reads_tgid = 0; /* the process handoff_reads last counted */
__u64 handoff_moves = 0;
__u32 handoff_moves_tgid = 0; /* the process handoff_moves last counted */

/*
 * CPU counters, with the hook attached: wake-ups at which a dispatcher's
 * CPU was carried to the thread it woke (segmenter.h, rm_ctr_carry), and
 * the ns left unsegmented because the wakee already carried RM_CARRY_MAX.
 */
__u64 carry_wakeups = 0;
__u64 carry_capped_ns = 0;

/* Benchmark stages: the verifier drops the dead branches, production pays nothing. */
#define RM_STOP_AT(stage) (bench_stage == (stage))

#include "rm_tasks.bpf.h" /* map tasks: struct rm_task per thread (shared with golabel.bpf.c) */

/* Processes (tgid -> 1) never segmented: the collector, a local aggregator, ... */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} excluded SEC(".maps");

/*
 * Processes (tgid -> RM_RT_*) that run a managed runtime (Go, a JVM), which
 * the loader recognises from their binaries (col_rtscan.h): their threads'
 * unsegmented CPU is also counted in unseg_rt_ns (and a Go program's in
 * unseg_go_ns). Read when a thread's state is made and at each window sweep.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} runtimes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} parts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RM_WIN_SLOTS);
	__type(key, __u32);
	__type(value, struct rm_wintot);
} wintot SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rm_cpu);
} cpus SEC(".maps");

/*
 * Per-CPU batch of parts: a ring reservation and commit cost ~100 ns a
 * record here (a spinlock with interrupts off, an atomic commit, a helper
 * call each), so a CPU collects up to RM_BATCH parts and writes them as one
 * ring record. busy: a hook of this CPU is filling or writing it; a hook
 * that finds it busy (an interrupt's, or one that preempted the filler)
 * writes its part to the ring directly. The batch is written out when
 * full, when its CPU switches to idle or with a part older than
 * RM_BATCH_NS, and by the sweep at shutdown: parts reach user space a
 * little later, never out of their window's accounting (user space sums
 * windows over all records, whenever they come; a thread's open part is
 * held far longer).
 */
struct rm_batch {
	__u32 busy;
	__u32 n;                    /* parts held */
	__u64 t0;                   /* end_ns of the first part held */
	struct rm_part p[RM_BATCH];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rm_batch);
} batches SEC(".maps");

/*
 * Stand-in state for threads that have none (mode NONE, so everything they
 * do is unsegmented). Passing it instead of NULL keeps the verifier happy
 * where clang hoists address computations above a NULL check.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rm_task);
} nostate SEC(".maps");

/*
 * Unix stream sockets have no sequence numbers: the bytes of each direction
 * of a connection are counted here, by the sender (tx) and by the receiver
 * (rx) in one record, so that both ends number them alike. The sender's
 * hook runs when its send returns, so a receiver on another CPU may read,
 * and empty its queue, before the sender counted those bytes (always so
 * for a send larger than the socket's buffer): rx ahead of tx is the
 * sender's count to come. A connection between sockets born after the
 * hooks were attached (unix_born_from) is numbered from its first byte.
 * Bytes of an older connection may have been sent, uncounted, before the
 * collector started: its receiver's numbering is trusted (in_sync) only
 * once it emptied its queue with rx == tx, and realigned (rx = tx) when it
 * empties it with rx != tx while not trusted, or with rx behind tx. A
 * sender that finds rx past everything counted (bytes nobody counted, or a
 * record evicted and made anew) takes the trust back.
 */
struct rm_ukey {
	__u64 from, to;   /* inode numbers of the sending and the receiving end */
};

struct rm_ucnt {
	__u64 tx, rx;
	__u32 in_sync;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct rm_ukey);
	__type(value, struct rm_ucnt);
} uflows SEC(".maps");

/*
 * Socket inode numbers come from the kernel's get_next_ino(): each CPU takes
 * batches of 1024 from a shared counter. The loader, after attaching the
 * hooks, makes sockets on every CPU until each has a batch taken since; the
 * first such batch's first number is set
 * here. A socket numbered from it on (mod 2^32) was born after the hooks
 * were attached; 0: not known.
 */
__u32 unix_born_from = 0;

/* Follow-replies: the bytes last received on each server-side socket. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct rm_inb);
} inbs SEC(".maps");

/*
 * UDP: the datagram that began a thread's segment on an unconnected socket,
 * whose sender the recv writes out to user memory only after the
 * tracepoint (rm_dgram_note): read at the thread's next socket call
 * (rm_dgram_resolve).
 */
struct rm_dgram {
	__u64 uaddr;   /* user address of the sockaddr the recv fills, 0: none pending */
	__u64 seg_id;  /* the segment it began */
	__u64 cookie;  /* its socket */
	__u64 len;     /* its length */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct rm_dgram);
} dgrams SEC(".maps");

/*
 * UDP pairing: the bytes of the datagrams counted so far on each directed
 * flow of an INET datagram socket (tx: sent to, else received from, the
 * remote end), which number each datagram for the aggregator
 * (segmenter.h, rm_on_dgram_range). LRU: a flow evicted starts again at 0,
 * which the aggregator's matching absorbs like a loss.
 */
struct rm_dkey {
	__u64 cookie;
	__u32 addr[4];
	__u32 port;
	__u32 tx;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct rm_dkey);
	__type(value, __u64);
} dflows SEC(".maps");

struct rm_env {
	__u64 window_ns;
	__u64 offset_ns;
	__u32 cpu;
	__u32 follow_replies;
	__u64 win_lo, win_hi, win_cur; /* rm_win's last answer, within one hook */
	__u32 batch;                   /* parts go through this CPU's batch */
	__u32 rt;                      /* unsegmented CPU charged with no state is a runtime thread's (segmenter.h) */
	/* the label sampler's samples of the claim being charged (rm_smp_charged): smp_n samples of smp_d ns,
	 * smp_seen ns charged so far, smp_given samples placed so far; smp_n 0: none */
	__u64 smp_n, smp_d, smp_seen, smp_given;
};

#define RM_INLINE static __always_inline

#define IPPROTO_TCP 6
#define SOCK_STREAM 1

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

/*
 * sk as a TCP socket, or NULL. The checks of bpf_skc_to_tcp_sock (the
 * tracepoints see full sockets only), then a read-only cast: ~1 ns instead of
 * a ~17 ns helper call (docs/kernel.md); loads through it are
 * fault-safe.
 */
RM_INLINE struct tcp_sock *rm_tcp_sock(struct sock *sk)
{
	if (sk->sk_protocol != IPPROTO_TCP || sk->sk_type != SOCK_STREAM)
		return NULL;
	return bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
}

RM_INLINE struct rm_cpu *rm_env_cpu(struct rm_env *e)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&cpus, &k);
}

RM_INLINE struct rm_wintot *rm_env_wintot(struct rm_env *e, __u64 win)
{
	__u32 k = win % RM_WIN_SLOTS;
	struct rm_wintot *w = bpf_map_lookup_elem(&wintot, &k);

	if (!w)
		return NULL;
	if (w->win == win)
		return w;
	if (w->win > win)
		return NULL;
	__builtin_memset(w, 0, sizeof(*w));
	w->win = win;
	return w;
}

/*
 * This CPU's runqueue address, found once per CPU (the runqueues per-CPU
 * variable has no address in this kernel's kallsyms, so it is reached
 * through the current task) and kept here: two dependent loads less on
 * every hook (6-13 ns a hook measured with bench/hooks_pair.sh).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} rqs SEC(".maps");

RM_INLINE struct rq *rm_cur_rq(void)
{
	__u32 k = 0;
	__u64 *slot = bpf_map_lookup_elem(&rqs, &k);
	struct task_struct *cur;
	struct cfs_rq *cfs;
	struct rq *rq;

	if (slot && *slot)
		return bpf_rdonly_cast((void *)*slot, bpf_core_type_id_kernel(struct rq));
	/* the current task's CFS runqueue is on this CPU (set_task_rq keeps it
	 * so for every class); direct (probe-mem) loads: no helper calls */
	cur = bpf_get_current_task_btf();
	cfs = cur->se.cfs_rq;
	rq = cfs ? cfs->rq : NULL;
	if (slot && rq)
		*slot = (__u64)rq;
	return rq;
}

/*
 * The paravirtual steal clock of this CPU (ns the host ran something else
 * while this vCPU was runnable), as the scheduler last read it into its
 * runqueue (at every schedule, wake-up and tick): 0 without paravirtual
 * steal accounting, and nothing is taken off.
 */
RM_INLINE __u64 rm_env_steal(struct rm_env *e)
{
	struct rq *rq = rm_cur_rq();

	return rq ? rq->prev_steal_time_rq : 0;
}

/*
 * The run-queue wait of p so far (ns), from the scheduler's own sched_info
 * (CONFIG_SCHED_INFO): the waits it completed (run_delay) plus, if it is
 * queued on rq now (last_queued, in rq's clock), the wait still running.
 * At sched_switch the scheduler has not yet folded next's current wait into
 * run_delay (sched_info_switch runs after the tracepoint), rq->clock was
 * just updated. This replaces sched_wakeup / sched_wakeup_new hooks (~120
 * ns per wake-up, each with a clock read): the time a thread waits is read
 * when it gets the CPU. 0 without sched_info.
 */
RM_INLINE __u64 rm_run_delay(struct task_struct *p, struct rq *rq)
{
	__u64 d, q, now;

	if (!bpf_core_field_exists(p->sched_info))
		return 0;
	d = p->sched_info.run_delay;
	q = p->sched_info.last_queued;
	if (q && rq) {
		now = rq->clock;
		if (now > q)
			d += now - q;
	}
	return d;
}

RM_INLINE void rm_drop_part(struct rm_env *e, __u64 win, const struct rm_counts *c);

/*
 * Wake the consumer when the unread data crosses a multiple of wakeup_bytes
 * (a power of 2) with the len bytes about to be written: a wake-up is irq
 * work (a self-IPI, a VM exit here) that cost 1-2 us per record when every
 * record above the threshold asked for one. A crossing missed because
 * another CPU wrote in between is retried at the next multiple, and the
 * consumer's timed poll (col_bpf_poll) drains whatever is there anyway.
 */
RM_INLINE __u64 rm_ring_flags(__u64 len)
{
	__u64 avail = bpf_ringbuf_query(&parts, BPF_RB_AVAIL_DATA);

	if (avail + len >= wakeup_bytes && (avail & (wakeup_bytes - 1)) + len >= wakeup_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

struct rm_drop_ctx {
	struct rm_env *e;
	struct rm_batch *b;
};

/* bpf_loop body: account part i of a batch the ring had no room for. */
static long rm_drop_one(__u64 i, void *arg)
{
	struct rm_drop_ctx *x = arg;
	struct rm_part *p;
	struct rm_counts c;

	if (i >= RM_BATCH)
		return 1;
	p = &x->b->p[i];
	c.cpu_ns = p->cpu_ns;
	c.runq_ns = p->runq_ns;
	c.rx_bytes = p->rx_bytes;
	c.tx_bytes = p->tx_bytes;
	c.disk_read = p->disk_read;
	c.disk_write = p->disk_write;
	rm_drop_part(x->e, p->win, &c);
	return 0;
}

/* Write out what batch b holds as one ring record (its filler holds busy); a drop is accounted per part. */
RM_INLINE void rm_batch_out(struct rm_env *e, struct rm_batch *b)
{
	struct rm_drop_ctx x = { e, b };
	__u32 n = b->n;
	__u64 len;

	if (n == 0)
		return;
	if (n > RM_BATCH)
		n = RM_BATCH;
	len = n * sizeof(struct rm_part);
	if (bpf_ringbuf_output(&parts, b->p, len, rm_ring_flags(len + 8)) != 0)
		bpf_loop(n, rm_drop_one, &x, 0);
	b->n = 0;
}

RM_INLINE struct rm_batch *rm_batch_get(void)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&batches, &k);
}

/* Copy p with counters c into out. */
RM_INLINE void rm_part_fill(struct rm_part *out, const struct rm_part *p, const struct rm_counts *c)
{
	__builtin_memcpy(out, p, sizeof(*out));
	out->cpu_ns = c->cpu_ns;
	out->runq_ns = c->runq_ns;
	out->rx_bytes = c->rx_bytes;
	out->tx_bytes = c->tx_bytes;
	out->disk_read = c->disk_read;
	out->disk_write = c->disk_write;
}

RM_INLINE int rm_env_emit(struct rm_env *e, const struct rm_part *p, const struct rm_counts *c)
{
	__u64 flags = BPF_RB_NO_WAKEUP;
	struct rm_batch *b;
	struct rm_part *out;
	struct rm_cpu *cpu;

	if (RM_STOP_AT(RM_STAGE_NOEMIT))
		return 0;
	if (e->batch && (b = rm_batch_get()) != NULL && !__sync_lock_test_and_set(&b->busy, 1)) {
		__u32 n = b->n;

		if (n >= RM_BATCH) {
			rm_batch_out(e, b);
			n = 0;
		}
		n &= RM_BATCH - 1;
		rm_part_fill(&b->p[n], p, c);
		if (n == 0)
			b->t0 = p->end_ns;
		b->n = n + 1;
		if (n + 1 == RM_BATCH)
			rm_batch_out(e, b);
		*(volatile __u32 *)&b->busy = 0;
		return 0;
	}
	/* a record of its own; the ring's fill is read once per RM_QUERY_EVERY
	 * such records of a CPU (a helper call, ~20 ns; a non-atomic count: a
	 * nested hook at worst shifts the sampling) */
	out = bpf_ringbuf_reserve(&parts, sizeof(*out), 0);
	if (!out)
		return -1;
	rm_part_fill(out, p, c);
	cpu = rm_env_cpu(e);
	if (cpu && (++cpu->emitted & (RM_QUERY_EVERY - 1)) == 0)
		flags = rm_ring_flags(RM_QUERY_EVERY * (sizeof(*out) + 8));
	bpf_ringbuf_submit(out, flags);
	return 0;
}

/* Write out this CPU's batch if it holds a part older than RM_BATCH_NS at now, or if idle. */
RM_INLINE void rm_batch_age(struct rm_env *e, __u64 now, int idle)
{
	struct rm_batch *b = rm_batch_get();

	if (!b || !b->n || (!idle && now < b->t0 + RM_BATCH_NS))
		return;
	if (__sync_lock_test_and_set(&b->busy, 1))
		return;
	rm_batch_out(e, b);
	*(volatile __u32 *)&b->busy = 0;
}

/*
 * Goroutine labels with CPU counters: d ns of t's claimed CPU were charged
 * to its part (part) or unsegmented. The claim's samples (smp_n of smp_d
 * ns, rm_smp_take) go with it in proportion, the last of them with its
 * last ns: a part's samples are the samples of the CPU it holds, wherever
 * the counters' rules put that CPU, so the aggregator can compare them with
 * the goroutines' labels (docs/go.md).
 */
__noinline int rm_smp_charged_g(struct rm_env *e, struct rm_task *t, __u64 d, int part)
{
	__u64 to;

	if (!e || !e->smp_n || !d || !e->smp_d)
		return 0;
	e->smp_seen += d;
	to = e->smp_seen >= e->smp_d ? e->smp_n : e->smp_n * e->smp_seen / e->smp_d;
	if (to <= e->smp_given)
		return 0;
	if (part && t)
		__sync_fetch_and_add(&t->cur.samples, to - e->smp_given);
	e->smp_given = to;
	return 0;
}
/* a global function (checked once by the verifier, not on every charge's path), called only while a claim's
 * samples are being placed */
#define RM_ENV_CHARGED(e, t, d, part) ((void)(go_labels && (e)->smp_n && rm_smp_charged_g((e), (t), (d), (part))))

/* Before a claim of d ns of t's counter is charged: its pending samples go with it (rm_smp_charged). */
RM_INLINE void rm_smp_take(struct rm_env *e, struct rm_task *t, __u64 d)
{
	e->smp_n = e->smp_d = e->smp_seen = e->smp_given = 0;
	if (!go_labels || !d || !t->smp)
		return; /* (only the label module's threads have samples) */
	e->smp_n = __sync_lock_test_and_set(&t->smp, 0);
	e->smp_d = d;
}

#define RM_ENV_CPU_COUNTERS(e) (cpu_counters)
#include "segmenter.h"

RM_INLINE struct rm_task *rm_or_nostate(struct rm_task *t)
{
	__u32 k = 0;
	struct rm_task *n;

	if (t)
		return t;
	n = bpf_map_lookup_elem(&nostate, &k);
	if (n) {
		n->mode = RM_MODE_NONE;
		n->dirty = 0;
	}
	return n;
}

RM_INLINE void rm_env_init(struct rm_env *e)
{
	e->window_ns = window_ns;
	e->offset_ns = offset_ns;
	e->cpu = bpf_get_smp_processor_id();
	e->follow_replies = follow_replies;
	e->win_lo = e->win_hi = e->win_cur = 0;
	e->batch = 1;
	e->rt = 0;
	e->smp_n = e->smp_d = e->smp_seen = e->smp_given = 0;
}

/*
 * The server side of a connection: its local port was bound explicitly (an
 * accepted socket inherits SOCK_BINDPORT_LOCK from its listener), while a
 * client's connect() picks an ephemeral port. A client that binds its own
 * port looks like a server (documented limit).
 */
RM_INLINE int rm_is_server_side(struct sock *sk)
{
	return (sk->sk_userlocks & SOCK_BINDPORT_LOCK) != 0;
}

/* Fill *tp from the socket; returns 0, or -1 for families we do not follow. */
RM_INLINE int rm_tuple_from_sock(struct sock *sk, __u64 cookie, struct rm_tuple *tp)
{
	__u16 family = sk->__sk_common.skc_family;

	__builtin_memset(tp, 0, sizeof(*tp));
	tp->cookie = cookie;
	tp->family = family;
	if (family == AF_INET) {
		tp->laddr[0] = sk->__sk_common.skc_rcv_saddr;
		tp->raddr[0] = sk->__sk_common.skc_daddr;
	} else if (family == AF_INET6) {
		BPF_CORE_READ_INTO(&tp->laddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32);
		BPF_CORE_READ_INTO(&tp->raddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32);
	} else if (family == AF_UNIX) {
		/* the ends' inode numbers (what ss -x shows) */
		struct unix_sock *u = bpf_skc_to_unix_sock(sk);
		__u64 me = BPF_CORE_READ(sk, sk_socket, file, f_inode, i_ino), peer;

		if (u) {
			peer = BPF_CORE_READ(u, peer, sk_socket, file, f_inode, i_ino);
			tp->laddr[0] = (__u32)me;
			tp->laddr[1] = (__u32)(me >> 32);
			tp->raddr[0] = (__u32)peer;
			tp->raddr[1] = (__u32)(peer >> 32);
		}
	} else {
		return -1;
	}
	if (family != AF_UNIX) {
		tp->lport = sk->__sk_common.skc_num;
		tp->rport = bpf_ntohs(sk->__sk_common.skc_dport);
	}
	return 0;
}

/* Was the socket numbered ino born after the hooks were attached? (unix_born_from) */
RM_INLINE int rm_unix_born(__u64 ino)
{
	__u32 from = unix_born_from;

	return from && (__u32)((__u32)ino - from) < 0x80000000U;
}

/*
 * The position of `bytes` just sent (tx) or received on unix stream socket
 * sk (tuple tp) in its direction's stream, in *start; 0 if it has none (not
 * a stream, no peer, or a receiver not in step yet).
 */
RM_INLINE int rm_unix_range(struct sock *sk, const struct rm_tuple *tp, __u64 bytes, int tx, __u64 *start)
{
	struct rm_ukey k;
	struct rm_ucnt *c, zero = {};
	__u64 me = (__u64)tp->laddr[1] << 32 | tp->laddr[0], peer = (__u64)tp->raddr[1] << 32 | tp->raddr[0];

	if (sk->sk_type != SOCK_STREAM || !me || !peer)
		return 0;
	k.from = tx ? me : peer;
	k.to = tx ? peer : me;
	c = bpf_map_lookup_elem(&uflows, &k);
	if (!c) {
		/* a connection between sockets born after the hooks: every byte counted */
		zero.in_sync = rm_unix_born(me) && rm_unix_born(peer);
		bpf_map_update_elem(&uflows, &k, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&uflows, &k);
		if (!c)
			return 0;
	}
	if (tx) {
		*start = __sync_fetch_and_add(&c->tx, bytes);
		if (c->rx > *start + bytes)
			c->in_sync = 0; /* the receiver read bytes no sender counted */
		return 1;
	}
	*start = __sync_fetch_and_add(&c->rx, bytes);
	if (sk->sk_receive_queue.qlen == 0) {
		/* everything sent so far was read */
		__u64 rx = c->rx, tx = c->tx;

		if (rx == tx) {
			c->in_sync = 1;
		} else if (rx < tx || !c->in_sync) {
			c->rx = tx;
			c->in_sync = 0;
			return 0;
		}
		/* rx > tx, in step: the sender's count is still to come */
	}
	return c->in_sync;
}

/*
 * The tuple of sk into *tp. A TCP connection's tuple never changes, so when
 * the thread's part already names this socket (cookies are never reused) it
 * is copied from there: ~35 ns of socket reads saved per syscall, and after
 * a RST, when the kernel's local port reads 0, the tuple stays right.
 * t may be NULL. Returns 0, or -1 for families we do not follow.
 */
RM_INLINE int rm_tuple_get(struct sock *sk, const struct rm_task *t, int is_tcp, struct rm_tuple *tp)
{
	/* the cookie the helper returns, read directly (~25 ns of helper call
	 * saved per socket hook); the helper only for a socket without one yet */
	__u64 cookie = sk->__sk_common.skc_cookie.counter;

	if (!cookie)
		cookie = bpf_get_socket_cookie(sk);

	if (t && is_tcp && cookie) {
		if (t->cur.in.cookie == cookie) {
			__builtin_memcpy(tp, &t->cur.in, sizeof(*tp));
			return 0;
		}
		if (t->cur.out.cookie == cookie) {
			__builtin_memcpy(tp, &t->cur.out, sizeof(*tp));
			return 0;
		}
	}
	return rm_tuple_from_sock(sk, cookie, tp);
}

/*
 * With a namespace filter, this collector is the "host" made of the threads
 * of one network namespace: others are as invisible as another machine's.
 */
RM_INLINE int rm_ours(struct task_struct *t)
{
	struct nsproxy *ns;
	struct net *net;

	if (!netns_ino)
		return 1;
	/* direct (fault-safe) loads through the BTF pointer, not three
	 * bpf_probe_read_kernel calls: the test every socket hook of every
	 * thread makes first; an exiting task without nsproxy is not ours */
	ns = t->nsproxy;
	if (!ns)
		return 0;
	net = ns->net_ns;
	return net && net->ns.inum == netns_ino;
}

RM_INLINE int rm_current_ours(void)
{
	return rm_ours(bpf_get_current_task_btf());
}

/*
 * Is task part of Rametr itself (or excluded by the loader)? Checked once per
 * thread, when its state is created; the answer stays in rm_task.excluded.
 * The name rule looks at the process (group leader) name: rametr-collector,
 * rametr-aggregator, rametrctl.
 */
RM_INLINE int rm_excluded(struct task_struct *task)
{
	__u32 tgid = task->tgid;
	char c[8];

	if (self_tgid && tgid == self_tgid)
		return 1;
	if (bpf_map_lookup_elem(&excluded, &tgid))
		return 1;
	if (!exclude_rametr)
		return 0;
	if (bpf_probe_read_kernel(c, sizeof(c), task->group_leader->comm) != 0)
		return 0;
	return c[0] == 'r' && c[1] == 'a' && c[2] == 'm' && c[3] == 'e' && c[4] == 't' && c[5] == 'r';
}

/* The managed runtime task's process runs (the runtimes map): RM_RT_*, RM_RT_NONE if none. */
RM_INLINE __u32 rm_is_runtime(struct task_struct *task)
{
	__u32 tgid = task->tgid, *kind = bpf_map_lookup_elem(&runtimes, &tgid);

	return kind ? *kind : RM_RT_NONE;
}

/* The state of task, created (and its exclusion decided) if missing. */
RM_INLINE struct rm_task *rm_task_create(struct task_struct *task)
{
	struct rm_task *t = bpf_task_storage_get(&tasks, task, 0, 0);

	if (t && !(t->ctr_set & RM_CTR_NEW))
		return t;
	if (!t) {
		t = bpf_task_storage_get(&tasks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!t)
			return NULL;
		/* run-queue wait from now on (the thread is running, or not queued yet) */
		t->run_delay = rm_run_delay(task, NULL);
	}
	t->ctr_set &= ~(__u32)RM_CTR_NEW; /* (a state made for the counters keeps their marks) */
	if (rm_excluded(task))
		t->excluded = 1;
	t->rt = rm_is_runtime(task);
	/* the thread's name as its state is created: one copy per thread, not
	 * one per segment (a thread that renames itself later keeps this one) */
	bpf_probe_read_kernel_str(&t->cur.comm, sizeof(t->cur.comm), task->comm);
	return t;
}

/*
 * CPU counters: a thread's scheduler counters at ktime now. cpu: its on-CPU
 * time as CLOCK_THREAD_CPUTIME_ID reads it; slice: the part since it last
 * got the CPU; nvcsw: its voluntary switches; run_delay: its run-queue wait
 * (completed waits: a running thread has none pending).
 */
struct rm_ctr {
	__u64 cpu, slice, run_delay;
	__u32 nvcsw;
	__u32 pad;
};

#define RM_ONCE(x) (*(volatile typeof(x) *)&(x))

/*
 * The counters of p at ktime now. running: p is on the CPU of runqueue rq
 * (NULL: unknown, the running slice is left out). sum_exec_runtime is folded
 * only at ticks and switches: the running slice is added, in two pieces -
 * from exec_start to the runqueue's clock_task (both on that clock, which
 * leaves out irq and stolen time), then from the runqueue's last clock update
 * (rq->clock, sched_clock) to now, on sched_clock, which is ktime less
 * clk_off. A tick folding the slice between the reads is seen by exec_start
 * moving: then they are read again.
 */
RM_INLINE void rm_ctr_read(struct task_struct *p, struct rq *rq, __u64 now, int running, struct rm_ctr *c)
{
	__u64 es, sum, prev, ct = 0, cl = 0, run = 0;
	__s64 obs, off;
	int i;

	for (i = 0; i < 2; i++) {
		es = RM_ONCE(p->se.exec_start);
		sum = RM_ONCE(p->se.sum_exec_runtime);
		prev = RM_ONCE(p->se.prev_sum_exec_runtime);
		if (running && rq) {
			ct = RM_ONCE(rq->clock_task);
			cl = RM_ONCE(rq->clock);
		}
		if (RM_ONCE(p->se.exec_start) == es)
			break;
	}
	if (running && rq && cl) {
		if (ct > es)
			run = ct - es;
		obs = (__s64)(now - cl);
		off = clk_off;
		if (obs < off) {
			clk_off = obs;
			off = obs;
		}
		run += (__u64)(obs - off);
	}
	c->cpu = sum + run;
	c->slice = sum - prev + run;
	c->nvcsw = (__u32)p->nvcsw;
	c->run_delay = bpf_core_field_exists(p->sched_info) ? p->sched_info.run_delay : 0;
}

/* Takes t's counters as they are at now: nothing before is charged. */
RM_INLINE void rm_ctr_init(struct rm_task *t, const struct rm_ctr *c, __u64 now)
{
	t->cpu_mark = c->cpu;
	t->ctr_ns = now;
	t->nvcsw = c->nvcsw;
	t->run_delay = c->run_delay;
	t->ctr_set |= RM_CTR_SET;
}

/*
 * The state of task for its counters, made if missing: then marked
 * RM_CTR_NEW, not yet decided whether excluded (rm_task_create decides).
 */
RM_INLINE struct rm_task *rm_ctr_state(struct task_struct *task)
{
	struct rm_task *t = bpf_task_storage_get(&tasks, task, 0, 0);

	if (t)
		return t;
	t = bpf_task_storage_get(&tasks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (t)
		t->ctr_set = RM_CTR_NEW;
	return t;
}

/*
 * Moves t's CPU mark forward to cpu at now; returns the ns claimed (each
 * once, whoever moves it) and in *from when the previous claim was.
 */
RM_INLINE __u64 rm_ctr_claim(struct rm_task *t, __u64 cpu, __u64 now, __u64 *from)
{
	__u64 old = t->cpu_mark;

	*from = t->ctr_ns;
	if (cpu <= old || __sync_val_compare_and_swap(&t->cpu_mark, old, cpu) != old)
		return 0; /* lost a race: the rest is claimed at the next edge */
	t->ctr_ns = now;
	return cpu - old;
}

#define RM_CUT_RECV 0x1    /* the edge is a recv: the head is returned */
#define RM_CUT_RUNNING 0x2 /* task is the current thread (else it is being woken) */

/* An interval between two edges of a thread, for rm_ctr_edge_g. */
struct rm_ctr_iv {
	__u64 from, now, d, head, rd;
	__u32 waits, recv;
};

/*
 * segmenter.h's rm_ctr_edge as a global function: the verifier checks it
 * once, not once per path of each hook that reaches an edge (with
 * follow-replies, a chain's first wait would multiply the socket hooks'
 * states past its limit). Returns the head to charge, 0 if e, t or iv is
 * NULL.
 */
__noinline __u64 rm_ctr_edge_g(struct rm_env *e, struct rm_task *t, struct rm_ctr_iv *iv)
{
	if (!e || !t || !iv)
		return 0;
	rm_smp_take(e, t, iv->d); /* the head the caller charges after is the claim's too */
	return rm_ctr_edge(e, t, iv->from, iv->now, iv->d, iv->head, iv->waits, iv->rd, iv->recv);
}

/*
 * CPU counters: charges the CPU and run-queue wait of t (the state of task)
 * since its last edge, at an edge at now (segmenter.h, rm_ctr_edge). how:
 * RM_CUT_*; a thread being woken is not running: its counter holds all its
 * CPU, none of it since it last got the CPU. Returns the request's head to
 * charge after rm_on_recv.
 */
RM_INLINE __u64 rm_ctr_cut_how(struct rm_env *e, struct rm_task *t, struct task_struct *task, __u64 now, __u32 how)
{
	struct rq *rq = (how & RM_CUT_RUNNING) ? rm_cur_rq() : NULL;
	struct rm_ctr_iv iv;
	struct rm_ctr c;

	rm_ctr_read(task, rq, now, rq != NULL, &c);
	if (!(t->ctr_set & RM_CTR_SET)) {
		rm_ctr_init(t, &c, now);
		return 0;
	}
	iv.d = rm_ctr_claim(t, c.cpu, now, &iv.from);
	iv.now = now;
	iv.head = rq ? c.slice : 0;
	iv.waits = c.nvcsw - t->nvcsw;
	t->nvcsw = c.nvcsw;
	iv.rd = c.run_delay > t->run_delay ? c.run_delay - t->run_delay : 0;
	t->run_delay = c.run_delay;
	iv.recv = how & RM_CUT_RECV;
	return rm_ctr_edge_g(e, t, &iv);
}

/* rm_ctr_cut_how for the current thread. */
RM_INLINE __u64 rm_ctr_cut(struct rm_env *e, struct rm_task *t, struct task_struct *task, __u64 now, int recv)
{
	return rm_ctr_cut_how(e, t, task, now, RM_CUT_RUNNING | (recv ? RM_CUT_RECV : 0));
}

/* I/O by a thread we do not segment: totals and unsegmented only. */
RM_INLINE void rm_unseg_io(struct rm_env *e, __u64 now, __u64 rx, __u64 tx)
{
	struct rm_wintot *w = rm_env_wintot(e, rm_win(e, now));

	if (!w)
		return;
	RM_ADD(&w->rx_bytes, rx);
	RM_ADD(&w->unseg_rx, rx);
	RM_ADD(&w->tx_bytes, tx);
	RM_ADD(&w->unseg_tx, tx);
}

#define IPPROTO_UDP 17
#define SOCK_DGRAM 2
#define RM_NR_SENDTO 44   /* x86-64 */
#define RM_NR_RECVFROM 45
#define RM_NR_SENDMSG 46
#define RM_NR_RECVMSG 47

/* An unconnected INET UDP socket's tuple (tp from rm_tuple_get): no peer in struct sock. */
RM_INLINE int rm_udp_unconnected(struct sock *sk, const struct rm_tuple *tp)
{
	return sk->sk_protocol == IPPROTO_UDP && sk->sk_type == SOCK_DGRAM && !tp->rport &&
	       (tp->family == AF_INET || tp->family == AF_INET6);
}

/*
 * The user address of the sockaddr of the current socket syscall (the
 * source a recvfrom/recvmsg fills, the destination of a sendto/sendmsg),
 * from its arguments; 0 if the syscall names none (read/write, the mmsg
 * calls, io_uring).
 */
RM_INLINE __u64 rm_syscall_sockaddr(int tx)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	__u64 nr, name = 0;

	if (!regs)
		return 0;
	nr = regs->orig_ax;
	if (nr == (tx ? RM_NR_SENDTO : RM_NR_RECVFROM)) {
		name = regs->r8;
		barrier_var(name); /* one load of regs, not one merged with the stack's below */
	} else if (nr != (tx ? RM_NR_SENDMSG : RM_NR_RECVMSG) ||
		   bpf_probe_read_user(&name, sizeof(name), (void *)regs->si) != 0) { /* msghdr.msg_name */
		name = 0;
	}
	return name;
}

/*
 * The address and port of the sockaddr at user address ua, as a tuple's
 * remote end (16-byte address, port in host order), if its family is
 * `family`; returns 0 on success.
 */
RM_INLINE int rm_user_sockaddr(__u64 ua, __u32 family, __u32 *addr, __u32 *port)
{
	struct sockaddr_in6 sa; /* sockaddr_in is its prefix: family, port, address (flowinfo in v6) */

	/* no more than the family's sockaddr: the rest may be past a mapping */
	if (!ua || bpf_probe_read_user(&sa, family == AF_INET ? 8 : sizeof(sa), (void *)ua) != 0 ||
	    sa.sin6_family != family)
		return -1;
	*port = bpf_ntohs(sa.sin6_port);
	if (family == AF_INET) {
		addr[0] = sa.sin6_flowinfo; /* sin_addr */
		addr[1] = addr[2] = addr[3] = 0;
	} else {
		addr[0] = sa.sin6_addr.in6_u.u6_addr32[0];
		addr[1] = sa.sin6_addr.in6_u.u6_addr32[1];
		addr[2] = sa.sin6_addr.in6_u.u6_addr32[2];
		addr[3] = sa.sin6_addr.in6_u.u6_addr32[3];
	}
	return 0;
}

/* The destination of the datagram being sent on unconnected socket *tp: its remote end. Not inlined (below). */
static __noinline void rm_dgram_dest(struct rm_tuple *tp)
{
	rm_user_sockaddr(rm_syscall_sockaddr(1), tp->family, tp->raddr, &tp->rport);
}

/*
 * Counts a datagram of len bytes on the directed flow of socket `cookie`
 * to or from addr:port (tx: sent): returns the bytes counted on the flow
 * before it, or -1 if the flow could not be counted. Not inlined (below).
 */
static __noinline __s64 rm_dgram_count(__u64 cookie, const __u32 *addr, __u32 port, __u32 tx, __u64 len)
{
	struct rm_dkey k = {};
	__u64 zero = 0, *c;

	k.cookie = cookie;
	k.addr[0] = addr[0];
	k.addr[1] = addr[1];
	k.addr[2] = addr[2];
	k.addr[3] = addr[3];
	k.port = port;
	k.tx = tx;
	c = bpf_map_lookup_elem(&dflows, &k);
	if (!c) {
		bpf_map_update_elem(&dflows, &k, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&dflows, &k);
		if (!c)
			return -1;
	}
	return (__s64)(__sync_fetch_and_add(c, len) & (RM_SEQ_DGRAM - 1));
}

/*
 * A datagram of len bytes being sent on INET UDP socket tp: numbered on its
 * flow if its remote end is known. Returns its range's start for
 * rm_on_send (RM_SEQ_DGRAM + the bytes sent on the flow before it), or 0:
 * not numbered, recorded without a range. Not inlined (above).
 */
static __noinline __u64 rm_dgram_send_seq(const struct rm_tuple *tp, __u64 len)
{
	__s64 start;

	if (!tp->rport || (tp->family != AF_INET && tp->family != AF_INET6))
		return 0;
	start = rm_dgram_count(tp->cookie, tp->raddr, tp->rport, 1, len);
	if (start < 0)
		return 0;
	return RM_SEQ_DGRAM + (__u64)start;
}

/*
 * Thread t (current) began a segment with a datagram on a connected INET
 * UDP socket tp (its sender is the socket's peer): number it at once.
 */
static __noinline void rm_dgram_rx_connected(struct rm_task *t, const struct rm_tuple *tp, __u64 len)
{
	__s64 start;

	if (t->mode != RM_MODE_SEG || !tp->rport || (tp->family != AF_INET && tp->family != AF_INET6))
		return;
	start = rm_dgram_count(tp->cookie, tp->raddr, tp->rport, 0, len);
	if (start >= 0)
		rm_on_dgram_range(t, t->cur.seg_id, tp->cookie, (__u64)start, len);
}

/*
 * Thread t (current) began a segment with a datagram on unconnected socket
 * tp: remember where its recv writes the sender (it does after this hook).
 */
RM_INLINE void rm_dgram_note(struct task_struct *task, const struct rm_task *t, const struct rm_tuple *tp,
			     __u64 len)
{
	__u64 ua = rm_syscall_sockaddr(0);
	struct rm_dgram *d;

	if (!ua || t->mode != RM_MODE_SEG)
		return;
	d = bpf_task_storage_get(&dgrams, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!d)
		return;
	d->uaddr = ua;
	d->seg_id = t->cur.seg_id;
	d->cookie = tp->cookie;
	d->len = len;
}

/*
 * At a socket call of thread t (current): the recv that began its segment
 * with a datagram has returned, its sender is in user memory now
 * (segmenter.h, rm_on_dgram_src). Costs nothing unless t's segment has an
 * inbound INET tuple without a remote port (only such datagrams). Not
 * inlined: its branches would multiply the verifier's states of the
 * socket hooks.
 */
static __noinline void rm_dgram_resolve(struct task_struct *task, struct rm_task *t)
{
	struct rm_dgram *d;
	__u32 addr[4], port;

	if (t->mode == RM_MODE_NONE || t->cur.in.rport ||
	    (t->cur.in.family != AF_INET && t->cur.in.family != AF_INET6))
		return;
	d = bpf_task_storage_get(&dgrams, task, 0, 0);
	if (!d || !d->uaddr)
		return;
	if (rm_user_sockaddr(d->uaddr, t->cur.in.family, addr, &port) == 0) {
		__s64 start = rm_dgram_count(d->cookie, addr, port, 0, d->len);

		rm_on_dgram_src(t, d->seg_id, d->cookie, addr, port);
		if (start >= 0)
			rm_on_dgram_range(t, d->seg_id, d->cookie, (__u64)start, d->len);
	}
	d->uaddr = 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(rm_sock_recv, struct sock *sk, int ret, int flags)
{
	struct task_struct *task;
	struct tcp_sock *tcp;
	struct rm_tuple tup;
	struct rm_task *t;
	struct rm_env e;
	__u64 now, pid_tgid, start = 0;
	int has_seq = 0, srv;

	if (RM_STOP_AT(RM_STAGE_HOOKS))
		return 0;
	if (ret <= 0 || (flags & (MSG_PEEK | MSG_ERRQUEUE)) || !rm_current_ours())
		return 0;
	rm_env_init(&e);
	now = bpf_ktime_get_ns();
	task = bpf_get_current_task_btf();
	if (RM_STOP_AT(RM_STAGE_CLOCK))
		return (int)now + task->pid; /* keep the reads */
	t = rm_task_create(task);
	if (RM_STOP_AT(RM_STAGE_TASK))
		return t ? (int)t->mode : 0;
	tcp = rm_tcp_sock(sk);
	if (!t || t->excluded || rm_tuple_get(sk, t, tcp != NULL, &tup) < 0) {
		rm_unseg_io(&e, now, ret, 0);
		return 0;
	}
	if (tcp) {
		__u32 end;

		if (flags & MSG_OOB) {
			start = tcp->urg_seq;
		} else {
			end = tcp->copied_seq;
			/* this read also consumed the FIN */
			if ((sk->sk_shutdown & RCV_SHUTDOWN) &&
			    (sk->__sk_common.skc_flags & (1UL << SOCK_DONE)) && end == tcp->rcv_nxt)
				end--;
			start = (__u32)(end - (__u32)ret);
		}
		has_seq = 1;
	} else if (tup.family == AF_UNIX) {
		has_seq = rm_unix_range(sk, &tup, ret, 0, &start);
	}
	srv = follow_replies && rm_is_server_side(sk);
	if (srv) {
		struct rm_inb *in = bpf_sk_storage_get(&inbs, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);

		if (in) {
			/* a connection's next request read by another thread (only until the hook is attached) */
			if (!handoff_hook && tcp && in->replied && in->reader && in->reader != task->pid &&
			    !rm_is_runtime(task)) { /* a runtime moves its goroutines between threads */
				__sync_fetch_and_add(&handoff_reads, 1);
				handoff_reads_tgid = task->tgid;
			}
			if (!handoff_hook) {
				/* another connection read by this thread since its last read of this one:
				 * it serves several at once (handoff_moves) */
				if (in->reader == task->pid && in->reader_n != t->srv_n)
					t->srv_multi = 1;
				in->reader_n = ++t->srv_n;
			}
			rm_inb_update(in, has_seq, start, ret);
			in->reader = task->pid;
		}
	} else if (follow_replies && !handoff_hook && tcp) {
		/* a reply read by another thread than the request's sender */
		struct rm_inb *in = bpf_sk_storage_get(&inbs, sk, 0, 0);

		if (in && in->reader && in->reader != task->pid)
			__sync_fetch_and_add(&handoff_replies, 1);
	}
	pid_tgid = (__u64)task->tgid << 32 | (__u32)task->pid; /* not the helper: a call less */
	if (RM_STOP_AT(RM_STAGE_STATE))
		return (int)(start & 1) + (int)pid_tgid; /* keep the reads */
	if (!tcp && tup.family != AF_UNIX && sk->sk_type == SOCK_DGRAM) {
		__u64 head;

		rm_dgram_resolve(task, t); /* before the cut: a part it flushes names its sender */
		head = cpu_counters ? rm_ctr_cut(&e, t, task, now, 1) : 0;
		rm_on_dgram_recv(&e, t, now, pid_tgid >> 32, (__u32)pid_tgid, &tup, ret, srv);
		if (cpu_counters) {
			rm_charge_cpu(&e, t, rm_win(&e, now), now, head);
			rm_ctr_carry_take(&e, t, now, 0);
		}
		if (rm_udp_unconnected(sk, &tup))
			rm_dgram_note(task, t, &tup, ret);
		else if (sk->sk_protocol == IPPROTO_UDP)
			rm_dgram_rx_connected(t, &tup, ret);
		return 0;
	}
	rm_dgram_resolve(task, t);
	if (cpu_counters) {
		__u64 head = rm_ctr_cut(&e, t, task, now, 1);

		rm_on_recv(&e, t, now, pid_tgid >> 32, (__u32)pid_tgid, &tup, ret, has_seq, start, srv);
		rm_charge_cpu(&e, t, rm_win(&e, now), now, head);
		rm_ctr_carry_take(&e, t, now, srv && tcp);
		return 0;
	}
	rm_on_recv(&e, t, now, pid_tgid >> 32, (__u32)pid_tgid, &tup, ret, has_seq, start, srv);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(rm_sock_send, struct sock *sk, int ret, int flags)
{
	struct task_struct *task;
	struct tcp_sock *tcp;
	struct rm_tuple tup;
	struct rm_task *t, *own;
	struct rm_env e;
	struct rm_inb *inb = NULL;
	__u64 now, pid_tgid, start = 0;
	int has_seq = 0, srv;

	if (RM_STOP_AT(RM_STAGE_HOOKS))
		return 0;
	if (ret <= 0 || !rm_current_ours())
		return 0;
	rm_env_init(&e);
	now = bpf_ktime_get_ns();
	task = bpf_get_current_task_btf();
	if (RM_STOP_AT(RM_STAGE_CLOCK))
		return (int)now + task->pid; /* keep the reads */
	srv = follow_replies && rm_is_server_side(sk);
	/* follow-replies: a thread that replies is followed from then on */
	t = srv ? rm_task_create(task) : bpf_task_storage_get(&tasks, task, 0, 0);
	if (RM_STOP_AT(RM_STAGE_TASK))
		return t ? (int)t->mode : 0;
	tcp = rm_tcp_sock(sk);
	/* an excluded thread's state is never in a segment: unsegmented below */
	if (rm_tuple_get(sk, t, tcp != NULL, &tup) < 0) {
		rm_unseg_io(&e, now, 0, ret);
		return 0;
	}
	if (t && t->excluded)
		srv = 0;
	own = t;
	t = rm_or_nostate(t);
	if (!t)
		return 0;
	if (tcp) {
		start = (__u32)(tcp->write_seq - (__u32)ret);
		has_seq = 1;
	} else if (tup.family == AF_UNIX) {
		has_seq = rm_unix_range(sk, &tup, ret, 1, &start);
	}
	/* whatever the mode: the cut inside rm_on_send may begin a chain */
	if (srv) {
		inb = bpf_sk_storage_get(&inbs, sk, 0, 0);
	} else if (follow_replies && !handoff_hook && tcp) {
		/* a client-side request: who sent it, for its reply's reader
		 * (only until the hand-off hook is attached) */
		struct rm_inb *out = bpf_sk_storage_get(&inbs, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);

		if (out) {
			/* a connection another thread sent on last, taken by a thread that
			 * serves several connections at once (an event loop's takeover) */
			if (out->reader && out->reader != task->pid && own && own->srv_multi &&
			    !rm_is_runtime(task)) {
				__sync_fetch_and_add(&handoff_moves, 1);
				handoff_moves_tgid = task->tgid;
			}
			out->reader = task->pid;
		}
	}
	pid_tgid = (__u64)task->tgid << 32 | (__u32)task->pid; /* not the helper: a call less */
	if (RM_STOP_AT(RM_STAGE_STATE))
		return (int)(start & 1) + has_seq;
	if (!tcp && rm_udp_unconnected(sk, &tup))
		rm_dgram_dest(&tup);
	rm_dgram_resolve(task, t);
	if (cpu_counters && own)
		rm_ctr_cut(&e, own, task, now, 0);
	if (!tcp && sk->sk_protocol == IPPROTO_UDP) {
		__u64 ds = rm_dgram_send_seq(&tup, ret);

		if (ds) {
			start = ds;
			has_seq = 1;
		}
	}
	rm_on_send(&e, t, now, pid_tgid >> 32, (__u32)pid_tgid, &tup, ret, has_seq, start, srv, inb);
	if (inb) {
		/* a request answered by another thread than its reader: handed over */
		if (!inb->replied && inb->reader != task->pid && !handoff_hook)
			__sync_fetch_and_add(&handoff_replies, 1);
		rm_inb_replied(inb);
	}
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(rm_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct rm_task *pt = NULL, *nt = NULL;
	struct rm_env e;
	__u64 now, wait = 0;
	int prev_idle;

	if (RM_STOP_AT(RM_STAGE_HOOKS))
		return 0;
	/* a thread of another namespace is, for this host, an idle CPU */
	prev_idle = prev->pid == 0 || !rm_ours(prev);
	rm_env_init(&e);
	now = bpf_ktime_get_ns();
	if (RM_STOP_AT(RM_STAGE_CLOCK))
		return (int)now + prev_idle;
	if (!prev_idle && !(self_tgid && prev->tgid == self_tgid))
		pt = bpf_task_storage_get(&tasks, prev, 0, 0);
	if (next->pid && rm_ours(next))
		nt = bpf_task_storage_get(&tasks, next, 0, 0);
	if (RM_STOP_AT(RM_STAGE_TASK))
		return (pt ? (int)pt->mode : 0) + (nt ? (int)nt->mode : 0);
	/*
	 * Run-queue wait: a thread waits only while switched out, so its wait
	 * is what its run_delay grew by since it was switched out (nothing is
	 * pending while it runs). Only threads that leave and come back in a
	 * charged part (SEG, CONT) are read: most come back in none (a server
	 * woken in its recv), and reading sched_info, a cache line the
	 * scheduler has not touched yet at the tracepoint, costs ~25 ns. A
	 * thread that enters a segment while switched out (wake-up chains)
	 * has its mark set then, a new thread at its state's creation.
	 */
	if (nt && (nt->mode == RM_MODE_SEG || nt->mode == RM_MODE_CONT)) {
		__u64 rd = rm_run_delay(next, rm_cur_rq());

		wait = rd > nt->run_delay ? rd - nt->run_delay : 0;
		nt->run_delay = rd;
	}
	pt = rm_or_nostate(pt);
	nt = rm_or_nostate(nt);
	if (!pt || !nt || RM_STOP_AT(RM_STAGE_STATE))
		return 0;
	/* next's wait since it was last seen, as the wake-up time rm_on_switch takes */
	nt->wake_ns = wait && wait < now ? now - wait : 0;
	/* TASK_INTERRUPTIBLE (1): waiting for an event, not for disk I/O */
	rm_on_switch(&e, pt, prev_idle, preempt || (prev_state & 0xff) == 0, !preempt && (prev_state & 0xff) == 1,
		     nt, now);
	/* (rm_on_switch may have turned prev's associated part into a continuation) */
	if (pt->mode == RM_MODE_SEG || pt->mode == RM_MODE_CONT)
		pt->run_delay = rm_run_delay(prev, NULL);
	/* parts do not wait in an idle CPU's batch */
	rm_batch_age(&e, now, next->pid == 0);
	return 0;
}

/*
 * Hand-offs (follow-replies: a thread holding a request it just read wakes
 * a worker, a worker that just answered one wakes the reader, an event
 * loop's thread holding a request wakes another) and wake-up
 * chains (follow-wakeups). sched_waking fires in the
 * waker's context (sched_wakeup may fire later from the wakee's CPU, where
 * current is someone else).
 * Whether the waker is inside a futex wake is read from its syscall
 * registers here, not marked by the syscalls tracepoints of futex: enabling
 * any syscalls tracepoint sends every syscall of every thread through the
 * tracing slow path (~+80 ns on getppid measured here).
 */
#define RM_NR_FUTEX 202       /* x86-64 */
#define RM_NR_FUTEX_WAKE 454  /* futex2 */

RM_INLINE int rm_in_futex_wake(struct task_struct *cur)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(cur);
	int cmd;

	if (!regs)
		return 0;
	if (regs->orig_ax == RM_NR_FUTEX_WAKE)
		return 1;
	if (regs->orig_ax != RM_NR_FUTEX)
		return 0;
	cmd = (int)regs->si & 0x7f; /* without FUTEX_PRIVATE_FLAG / FUTEX_CLOCK_REALTIME */
	return cmd == 1 || cmd == 5 || cmd == 10; /* FUTEX_WAKE, FUTEX_WAKE_OP, FUTEX_WAKE_BITSET */
}

/*
 * Is the waker handing work over on purpose: inside a futex wake, or a
 * write(v) (an eventfd, a pipe)? Not inside a send: the network stack may
 * wake the peer from that syscall (loopback), and not an interrupt taken
 * in user space (orig_ax is then not a syscall number).
 */
#define RM_NR_WRITE 1
#define RM_NR_WRITEV 20

RM_INLINE int rm_in_handoff_syscall(struct task_struct *cur)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(cur);

	if (!regs)
		return 0;
	return regs->orig_ax == RM_NR_WRITE || regs->orig_ax == RM_NR_WRITEV || rm_in_futex_wake(cur);
}

/*
 * CPU counters: may waker w be a dispatcher (segmenter.h, rm_ctr_carry)? It
 * holds no request (no segment, not in a tail, no chain), never read a
 * request itself (a serving thread's CPU after a reply has rules of its
 * own) and is no managed runtime's thread (a runtime's threads wake each
 * other for its own work).
 */
RM_INLINE int rm_dispatcher(const struct rm_task *w)
{
	return (w->mode == RM_MODE_NONE || (w->mode == RM_MODE_ASSOC && !w->tail)) &&
	       !(w->chain_st & RM_CHAIN_SERVER) && !w->rt && !w->excluded && (w->ctr_set & RM_CTR_SET);
}

/*
 * CPU counters: dispatcher w (the state of cur, running) wakes p: its CPU
 * since its last edge or wake-up is claimed and carried in p's state
 * (segmenter.h, rm_ctr_carry). An edge of w: its waits take effect.
 */
static __noinline void rm_carry_wake(struct task_struct *cur, struct rm_task *w, struct task_struct *p)
{
	struct rm_task *t;
	struct rm_ctr c;
	struct rm_env e;
	__u64 now, from, d;

	if (!cur || !w || !p)
		return;
	rm_env_init(&e);
	now = bpf_ktime_get_ns();
	rm_ctr_read(cur, rm_cur_rq(), now, 1, &c);
	d = rm_ctr_claim(w, c.cpu, now, &from);
	if (c.nvcsw != w->nvcsw)
		rm_ctr_block(&e, w, now);
	w->nvcsw = c.nvcsw;
	w->run_delay = c.run_delay; /* a thread holding no request: its wait goes nowhere */
	t = rm_ctr_state(p);
	if (!t || t->excluded) {
		rm_ctr_spread(&e, 0, from, now, d);
		return;
	}
	d = rm_ctr_carry(&e, t, from, now, d);
	__sync_fetch_and_add(&carry_wakeups, 1);
	if (d)
		__sync_fetch_and_add(&carry_capped_ns, d);
}

SEC("tp_btf/sched_waking")
int BPF_PROG(rm_sched_waking, struct task_struct *p)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct rm_task *t, *w;
	struct rm_env e;
	__u64 now;
	int inherited;

	if (RM_STOP_AT(RM_STAGE_HOOKS))
		return 0;
	/* most wake-ups cross processes (an interrupt, a kworker, a peer):
	 * without wake-up chains only a thread's own process hands over, and
	 * such a wake-up costs two loads here */
	if (!follow_wakeups && p->tgid != cur->tgid)
		return 0;
	/* a waker with no task storage at all (a thread of another namespace,
	 * one no hook has seen) holds nothing: one load, not a lookup */
	if (bpf_core_field_exists(cur->bpf_storage) && !cur->bpf_storage)
		return 0;
	w = bpf_task_storage_get(&tasks, cur, 0, 0);
	if (!w || cur->pid == p->pid || !rm_ours(p))
		return 0;
	if (p->tgid == cur->tgid &&
	    ((w->mode == RM_MODE_ASSOC && w->tail) ||
	     (follow_replies &&
	      ((w->mode == RM_MODE_SEG && (w->chain_st & RM_CHAIN_REQ)) ||
	       ((w->mode == RM_MODE_CONT || w->mode == RM_MODE_ASSOC) && (w->ans_st & RM_ANS_VALID))))) &&
	    rm_in_handoff_syscall(cur)) {
		/* work handed to another thread of the process: the end of a
		 * request's tail, a follow-replies hand-off (segmenter.h, rm_on_handoff) */
		rm_env_init(&e);
		now = bpf_ktime_get_ns();
		t = bpf_task_storage_get(&tasks, p, 0, 0);
		if (cpu_counters) {
			/* both threads reach an edge here: the waker's CPU so far
			 * goes as it held work before handing it over, the
			 * wakee's (all of it before its last wait: it is not
			 * running, its counter is exact) as before the job */
			rm_ctr_cut(&e, w, cur, now, 0);
			if (t)
				rm_ctr_cut_how(&e, t, p, now, 0);
		}
		rm_on_handoff(&e, w, t, now);
		return 0;
	}
	if (cpu_counters && follow_replies && p->tgid == cur->tgid && rm_dispatcher(w) &&
	    rm_in_handoff_syscall(cur)) {
		rm_carry_wake(cur, w, p);
		return 0;
	}
	/* a reader of replies handing one over: its next read begins a new
	 * segment (segmenter.h, rm_on_pass); a flag, no edge */
	if (p->tgid == cur->tgid && w->mode == RM_MODE_SEG && !(w->chain_st & (RM_CHAIN_REQ | RM_CHAIN_PASSED)) &&
	    rm_in_handoff_syscall(cur))
		rm_on_pass(w);
	if (w->mode != RM_MODE_SEG || !follow_wakeups || !rm_in_futex_wake(cur))
		return 0;
	t = rm_task_create(p);
	if (!t || t->excluded)
		return 0;
	rm_env_init(&e);
	w->waking = 1;
	inherited = rm_on_wake_inherit(&e, w, t, bpf_ktime_get_ns(), p->tgid, p->pid);
	w->waking = 0;
	if (inherited) {
		bpf_probe_read_kernel_str(&t->cur.comm, sizeof(t->cur.comm), p->comm);
		t->run_delay = rm_run_delay(p, NULL); /* not queued yet: its wait starts now */
	}
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(rm_sched_fork, struct task_struct *parent, struct task_struct *child)
{
	struct rm_task *pt, *ct;
	struct rm_env e;
	__u64 now = 0; /* one clock read, if any is needed */

	pt = bpf_task_storage_get(&tasks, parent, 0, 0);
	if (cpu_counters && rm_ours(child)) {
		/* every thread's counter is followed from its start (0): a
		 * window sweep charges what it did before any edge of its own */
		struct rm_ctr c;

		ct = rm_ctr_state(child);
		if (ct && !(ct->ctr_set & RM_CTR_SET)) {
			rm_ctr_read(child, NULL, 0, 0, &c);
			now = bpf_ktime_get_ns();
			rm_ctr_init(ct, &c, now);
		}
	}
	if (!pt || pt->mode != RM_MODE_SEG)
		return 0;
	ct = rm_task_create(child);
	if (!ct || ct->excluded)
		return 0;
	rm_env_init(&e);
	rm_on_fork(&e, pt, ct, now ? now : bpf_ktime_get_ns(), child->tgid, child->pid);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(rm_sched_exit, struct task_struct *p)
{
	struct rm_task *t = bpf_task_storage_get(&tasks, p, 0, 0);
	struct rm_env e;

	__u64 now;

	if (!t)
		return 0;
	rm_env_init(&e);
	now = bpf_ktime_get_ns();
	if (cpu_counters)
		rm_ctr_cut(&e, t, p, now, 0); /* p is the current thread */
	rm_on_exit(&e, t, now);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(rm_block_rq_issue, struct request *rq)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct rm_task *t = NULL;
	struct rm_env e;
	__u32 op = rq->cmd_flags & 0xff;
	__u64 now;

	if (op != REQ_OP_READ && op != REQ_OP_WRITE)
		return 0;
	if (!rm_ours(task))
		return 0;
	rm_env_init(&e);
	if (task->pid)
		t = bpf_task_storage_get(&tasks, task, 0, 0);
	now = bpf_ktime_get_ns();
	if (cpu_counters && t)
		rm_ctr_cut(&e, t, task, now, 0);
	t = rm_or_nostate(t);
	if (!t)
		return 0;
	rm_on_disk(&e, t, now, rq->__data_len, op == REQ_OP_WRITE);
	return 0;
}

#define RM_MAX_CPUS 1024

/* bpf_loop body: write out CPU cpu's batch; stops past the last CPU. */
static long rm_sweep_batch(__u64 cpu, void *arg)
{
	struct rm_env *e = arg;
	struct rm_batch *b;
	__u32 k = 0;

	b = bpf_map_lookup_percpu_elem(&batches, &k, (__u32)cpu);
	if (!b)
		return 1;
	if (b->n && !__sync_lock_test_and_set(&b->busy, 1)) {
		rm_batch_out(e, b);
		*(volatile __u32 *)&b->busy = 0;
	}
	return 0;
}

/*
 * CPU counters: run by the loader just after each window's end and once
 * after attaching. Charges every thread's CPU since its last edge (split at
 * the window's end), taking the counters of threads seen for the first
 * time. A thread on a CPU now has its own hooks running maybe: one in a
 * charged part is left to its next edge or sweep, others only have their
 * CPU claimed (unsegmented); their wait count stays for their next edge.
 */
SEC("iter/task")
int rm_cut_tasks(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct rq *rq = NULL;
	struct rm_task *t;
	struct rm_ctr_iv iv;
	struct rm_ctr c;
	struct rm_env e;
	__u64 now, d, from;
	int running;

	if (!task || !rm_ours(task))
		return 0;
	t = rm_ctr_state(task);
	if (!t)
		return 0;
	now = bpf_ktime_get_ns();
	running = task->on_cpu;
	if (running) {
		struct cfs_rq *cfs = task->se.cfs_rq;

		rq = cfs ? cfs->rq : NULL;
	}
	rm_ctr_read(task, rq, now, running, &c);
	t->rt = rm_is_runtime(task); /* the loader recognises a runtime after its threads began */
	if (!(t->ctr_set & RM_CTR_SET)) {
		rm_ctr_init(t, &c, now);
		return 0;
	}
	if (running && (t->mode == RM_MODE_SEG || t->mode == RM_MODE_CONT ||
			(t->mode == RM_MODE_ASSOC &&
			 (t->tail || (follow_replies && (t->chain_st & RM_CHAIN_SERVER))))))
		return 0;
	rm_env_init(&e);
	d = rm_ctr_claim(t, c.cpu, now, &from);
	if (running) {
		/* its CPU since it got the CPU is the latest */
		__u64 r = c.slice < d ? c.slice : d, mid = now - r > from ? now - r : from;

		e.rt = t->rt;
		rm_smp_take(&e, t, d); /* unsegmented: its samples are in none */
		rm_ctr_spread(&e, NULL, from, mid, d - r);
		rm_ctr_spread(&e, NULL, mid, now, r);
		e.rt = 0;
		rm_ctr_carry_take(&e, t, now, 0);
		return 0;
	}
	iv.from = from;
	iv.now = now;
	iv.d = d;
	iv.head = 0;
	iv.rd = c.run_delay > t->run_delay ? c.run_delay - t->run_delay : 0;
	t->run_delay = c.run_delay;
	iv.waits = c.nvcsw - t->nvcsw;
	iv.recv = 0;
	rm_ctr_edge_g(&e, t, &iv);
	return 0;
}

/*
 * Run by the loader after detaching the hooks: emit what threads still hold
 * (straight to the ring), then, at the end of the walk, what every CPU's
 * batch holds.
 */
SEC("iter/task")
int rm_sweep_tasks(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct rm_task *t;
	struct rm_env e;

	rm_env_init(&e);
	e.batch = 0;
	if (!task) {
		bpf_loop(RM_MAX_CPUS, rm_sweep_batch, &e, 0);
		return 0;
	}
	t = bpf_task_storage_get(&tasks, task, 0, 0);
	if (!t)
		return 0;
	if (cpu_counters)
		rm_ctr_carry_take(&e, t, bpf_ktime_get_ns(), 0);
	rm_sweep(&e, t);
	return 0;
}
