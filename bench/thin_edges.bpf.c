// SPDX-License-Identifier: GPL-2.0
/*
 * thin_edges.bpf.c - a prototype of a thin kernel side for the collector
 * (docs/thin-kernel.md), for bench_thin: each edge of a watched thread (a
 * socket receive or send, a fork, an exit) appends one 64-byte record
 * (thin_edges.h) to a per-CPU batch - the socket's cookie, the TCP byte
 * range, the thread's ids and its scheduler counters, timestamped by this
 * CPU's runqueue clock - with no clock read and no per-thread state; a full
 * batch goes to the ring buffer in one bpf_ringbuf_output. thin_variant
 * selects how much of that the probes do (THIN_*), so each piece's cost is
 * the difference of two variants' run times (BPF statistics).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "thin_edges.h"

char LICENSE[] SEC("license") = "GPL";

#define MSG_PEEK 2
#define MSG_ERRQUEUE 0x2000
#define SOCK_STREAM 1

const volatile __u32 thin_variant = THIN_FULL;
const volatile __u32 netns_ino = 0;    /* nonzero: only threads of this network namespace */
const volatile __u32 thin_batch = 32;  /* records per ring write, 1..THIN_BATCH_MAX */
const volatile __u64 wakeup_bytes = 256 * 1024; /* wake the consumer at each multiple of this; a power of 2 */

__u64 ring_drops = 0;  /* records the ring had no room for */
__u64 direct_recs = 0; /* records written alone (the CPU's batch was busy) */
__s64 clk_off = 0x7fffffffffffffffLL; /* THIN_KTIME: least ktime - rq->clock seen (rametr.bpf.c's clk_off) */
__u64 net_addr = 0; /* THIN_LEAN: the watched namespace's struct net, once a thread of it was seen */

struct thin_batch {
	__u32 n;    /* records held */
	__u32 busy; /* being filled (a hook that finds it so writes its record alone) */
	__u64 rq;   /* THIN_LEAN: this CPU's runqueue, found once */
	struct thin_rec r[THIN_BATCH_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} edges SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct thin_batch);
} batches SEC(".maps");

/* This CPU's runqueue address, found through the current task once per CPU
 * (the runqueues per-CPU variable has no kallsyms address in this kernel,
 * so no __ksym / bpf_this_cpu_ptr) and kept here, as rametr.bpf.c does. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} rqs SEC(".maps");

/* THIN_TASK: the per-thread state a thick kernel side keeps (one word here) */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} tstate SEC(".maps");

#define THIN_INLINE static __always_inline

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;
#define ONCE(x) (*(volatile typeof(x) *)&(x))

THIN_INLINE int thin_ours(struct task_struct *t)
{
	struct nsproxy *ns;
	struct net *net;

	if (!netns_ino)
		return 1;
	ns = t->nsproxy; /* direct loads, as rametr.bpf.c's rm_ours */
	if (!ns)
		return 0;
	net = ns->net_ns;
	if (thin_variant == THIN_LEAN && net_addr)
		return (__u64)net == net_addr; /* a namespace's struct net lives as long as it */
	if (!net || net->ns.inum != netns_ino)
		return 0;
	if (thin_variant == THIN_LEAN)
		net_addr = (__u64)net;
	return 1;
}

THIN_INLINE struct rq *thin_rq(struct task_struct *cur)
{
	__u32 k = 0;
	__u64 *slot = bpf_map_lookup_elem(&rqs, &k);
	struct cfs_rq *cfs;
	struct rq *rq;

	if (slot && *slot)
		return bpf_rdonly_cast((void *)*slot, bpf_core_type_id_kernel(struct rq));
	cfs = cur->se.cfs_rq;
	rq = cfs ? cfs->rq : NULL;
	if (slot && rq)
		*slot = (__u64)rq;
	return rq;
}

/* Wake the consumer when the unread data crosses a multiple of wakeup_bytes
 * (rametr.bpf.c's rm_ring_flags): once per flush, not per record. */
THIN_INLINE __u64 thin_ring_flags(__u64 len)
{
	__u64 avail = bpf_ringbuf_query(&edges, BPF_RB_AVAIL_DATA);

	if (avail + len >= wakeup_bytes && (avail & (wakeup_bytes - 1)) + len >= wakeup_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

/*
 * The counters of p into r. running: p is on this CPU (rq is its runqueue):
 * its running slice up to the runqueue's clock_task is added (the kernel
 * folds it into sum_exec_runtime only at ticks and switches; a fold between
 * the reads moves exec_start, then they are read again). ts is the
 * runqueue's clock (sched_clock at its last update: a past time, behind the
 * edge by at most the time since the CPU's last scheduler event or tick), and
 * the slice since that update is left for the next edge. THIN_KTIME reads the
 * clock instead: ts is now, and the slice is counted up to now on sched_clock,
 * as the collector does (clk_off). A thread that is not running (a fork's
 * child) has no running slice: 0 is recorded as its ts.
 */
THIN_INLINE void thin_counters(struct task_struct *p, struct rq *rq, int running, struct thin_rec *r)
{
	__u64 es = 0, sum = 0, prev = 0, ct = 0, cl = 0, run = 0, now = 0;
	int i;

	for (i = 0; i < 2; i++) {
		es = ONCE(p->se.exec_start);
		sum = ONCE(p->se.sum_exec_runtime);
		prev = ONCE(p->se.prev_sum_exec_runtime);
		if (running && rq) {
			ct = ONCE(rq->clock_task);
			cl = ONCE(rq->clock);
		}
		if (ONCE(p->se.exec_start) == es)
			break;
	}
	if (running && rq && ct > es)
		run = ct - es;
	if (thin_variant == THIN_KTIME) {
		now = bpf_ktime_get_ns();
		if (running && rq && cl) {
			__s64 obs = (__s64)(now - cl), off = clk_off;

			if (obs < off) {
				clk_off = obs;
				off = obs;
			}
			run += (__u64)(obs - off);
		}
		r->ts = now;
	} else {
		r->ts = cl;
	}
	r->cpu_ns = sum + run;
	r->slice_ns = sum - prev + run;
	r->run_delay = p->sched_info.run_delay;
	r->nvcsw = (__u32)p->nvcsw;
	r->pid = p->pid;
	r->tgid = p->tgid;
}

/* Appends the record of task p's edge (running on this CPU unless !running). */
THIN_INLINE void thin_edge(struct task_struct *p, int running, __u64 cookie, __u32 seq, __u32 len, __u32 flags)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct thin_batch *b;
	struct thin_rec one, *r;
	__u32 k = 0, n, cpu = bpf_get_smp_processor_id();
	struct rq *rq = NULL;

	if (thin_variant == THIN_TASK) {
		__u64 *st = bpf_task_storage_get(&tstate, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

		if (st)
			*st = cookie;
	}
	b = bpf_map_lookup_elem(&batches, &k);
	if (!b)
		return;
	if (thin_variant == THIN_LEAN) {
		if (b->rq) {
			rq = bpf_rdonly_cast((void *)b->rq, bpf_core_type_id_kernel(struct rq));
		} else {
			struct cfs_rq *cfs = cur->se.cfs_rq;

			rq = cfs ? cfs->rq : NULL;
			b->rq = (__u64)rq;
		}
	} else if (thin_variant != THIN_RECORD) {
		rq = thin_rq(cur);
	}
	if (b->busy) {
		r = &one; /* an interrupt's edge while this CPU's batch is being filled */
	} else {
		b->busy = 1;
		n = b->n & (THIN_BATCH_MAX - 1);
		r = &b->r[n];
	}
	if (thin_variant == THIN_RECORD) {
		r->pid = p->pid;
		r->tgid = p->tgid;
	} else {
		thin_counters(p, rq, running, r);
	}
	r->cookie = cookie;
	r->seq = seq;
	r->len = len;
	r->flags = flags | cpu << THIN_F_CPU_SHIFT;
	if (r == &one) {
		__sync_fetch_and_add(&direct_recs, 1);
		if (bpf_ringbuf_output(&edges, &one, sizeof(one), thin_ring_flags(sizeof(one))) != 0)
			__sync_fetch_and_add(&ring_drops, 1);
		return;
	}
	n = (b->n & (THIN_BATCH_MAX - 1)) + 1;
	if (n >= thin_batch || n >= THIN_BATCH_MAX) {
		__u64 bytes = (__u64)n * sizeof(struct thin_rec);

		if (bytes > sizeof(b->r))
			bytes = sizeof(b->r);
		if (bpf_ringbuf_output(&edges, b->r, bytes, thin_ring_flags(bytes)) != 0)
			__sync_fetch_and_add(&ring_drops, n);
		n = 0;
	}
	b->n = n;
	b->busy = 0;
}

/* The socket's cookie: the field the helper returns, the helper only for a socket without one yet. */
THIN_INLINE __u64 thin_cookie(struct sock *sk)
{
	__u64 c = sk->__sk_common.skc_cookie.counter;

	return c ? c : bpf_get_socket_cookie(sk);
}

THIN_INLINE struct tcp_sock *thin_tcp(struct sock *sk)
{
	if (sk->sk_protocol != IPPROTO_TCP || sk->sk_type != SOCK_STREAM)
		return NULL;
	return bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
}

/* Variants that end before the record: 1 if the hook is done. */
THIN_INLINE int thin_early(struct task_struct **cur)
{
	if (thin_variant == THIN_EMPTY)
		return 1;
	*cur = bpf_get_current_task_btf();
	if (!thin_ours(*cur))
		return 1;
	return thin_variant == THIN_NETNS;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(thin_recv, struct sock *sk, int ret, int flags)
{
	struct task_struct *cur = NULL;
	struct tcp_sock *tcp;
	__u32 seq = 0, f = THIN_RECV;

	if (thin_early(&cur) || ret <= 0 || (flags & (MSG_PEEK | MSG_ERRQUEUE)))
		return 0;
	tcp = thin_tcp(sk);
	if (tcp) {
		/* left out of the prototype: rametr.bpf.c's MSG_OOB range and its
		 * FIN correction (three more loads of lines read here anyway) */
		seq = tcp->copied_seq - (__u32)ret;
		f |= THIN_F_SEQ;
	}
	thin_edge(cur, 1, thin_cookie(sk), seq, (__u32)ret, f);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(thin_send, struct sock *sk, int ret, int flags)
{
	struct task_struct *cur = NULL;
	struct tcp_sock *tcp;
	__u32 seq = 0, f = THIN_SEND;

	if (thin_early(&cur) || ret <= 0)
		return 0;
	tcp = thin_tcp(sk);
	if (tcp) {
		seq = tcp->write_seq - (__u32)ret;
		f |= THIN_F_SEQ;
	}
	thin_edge(cur, 1, thin_cookie(sk), seq, (__u32)ret, f);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(thin_fork, struct task_struct *parent, struct task_struct *child)
{
	if (thin_variant == THIN_EMPTY || thin_variant == THIN_NETNS || !thin_ours(child))
		return 0;
	thin_edge(child, 0, (__u64)parent->pid, 0, 0, THIN_FORK);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(thin_exit, struct task_struct *p, bool group_dead)
{
	if (thin_variant == THIN_EMPTY || thin_variant == THIN_NETNS || !thin_ours(p))
		return 0;
	thin_edge(p, 1, 0, 0, 0, THIN_EXIT);
	return 0;
}
