// SPDX-License-Identifier: GPL-2.0
/*
 * golabel.bpf.c - labels on the goroutines of watched Go processes (map
 * pids, filled by col_golabel.c) and their CPU split by sampling:
 *
 *   golabel_recv    tp_btf/sock_recv_length: a thread of a watched process
 *                   (in the watched network namespace, netns_ino) received
 *                   from a stream socket (TCP or unix); the goroutine it
 *                   runs (the *g in Go's TLS slot at fsbase + g_tls_off)
 *                   gets the socket's cookie as its label. A datagram
 *                   socket leaves the goroutine's label as it was (one
 *                   socket serves every sender). On a TCP connection whose
 *                   two ends are on this node (map origins) it gets the
 *                   label of the goroutine that last sent on it instead,
 *                   when that had one and was of the same process: a Go
 *                   program that calls itself (a gateway in front of its
 *                   own gRPC server, all tenants on one connection)
 *                   carries the caller's label across. Between two
 *                   processes the receiver keeps its socket's cookie (a
 *                   client's label names its own connection, not a
 *                   tenant's): pairing follows those.
 *   golabel_send    tp_btf/sock_send_length: a thread of a watched process
 *                   sent on a TCP connection. Once the process's goroutine
 *                   creations are followed (label_sends), a goroutine
 *                   without a label takes the connection's cookie (a
 *                   connection's writer goroutine, as grpc-go's, made
 *                   before then, serves that connection). On a
 *                   connection within the node (map origins) the label the
 *                   goroutine had before (0 if none, or one taken from a
 *                   send) and its process are kept for the receiving end,
 *                   which, when it is the same process and that label is
 *                   0, counts it in the process's bare_sends (the writer
 *                   goroutine is fed by the callers over a channel: it
 *                   carries their labels once hand-offs are followed).
 *   golabel_newg    uprobe on newproc's call of runqput (the call in
 *                   runtime.newproc.func1, on the system stack: the new *g
 *                   in RBX, its creator in m.curg), attached to a Go
 *                   executable once a window's samples show one of its
 *                   processes' user goroutines working without a label
 *                   (col_golabel.c, gl_want_follow): the new goroutine gets
 *                   its creator's label (none if it starts on a runtime
 *                   function: rt_lo..rt_hi, the runtime's own goroutines).
 *   golabel_ready   uprobe in runtime.ready(gp), attached when that is still
 *                   so in a window after the creation uprobe's (or the
 *                   process receives its own sends made without a label):
 *                   a goroutine readied by a labelled one takes its label
 *                   unless it holds one from a receive of its own (a hand-off).
 *   golabel_sample  perf_event (cpu-clock on every CPU): on a thread of a
 *                   watched process, the goroutine it runs for (m.curg, also
 *                   while on the system stack or the signal stack for it),
 *                   counted per (window, process, label); no m.curg, an
 *                   unreadable g or one of the runtime's own goroutines
 *                   counts as GOLABEL_IDLE, a user goroutine without a label
 *                   as 0. With have_tasks,
 *                   the sample is also added to the thread's pending
 *                   samples in the socket hooks' task storage (map tasks,
 *                   shared with rametr.bpf.c), which move with its CPU
 *                   when the counters charge it: each part then says how
 *                   many samples fell in its CPU.
 *
 * The layout (TLS slot, g.m, m.curg, g.startpc, g.goid, the runtime's text) is per process, in its pids
 * entry: watched processes may be different Go builds.
 *
 * A label is kept by *g with the goroutine's id (runtime.g.goid): a g the
 * runtime reuses for a new goroutine carries a void label, whether or not
 * the creation uprobe is attached.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "golabel.h"
#include "rametr.h"

char LICENSE[] SEC("license") = "GPL";

#define IPPROTO_TCP 6
#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define SOCK_STREAM 1
#define MSG_PEEK 2
#define MSG_ERRQUEUE 0x2000

const volatile __u64 window_ns = 1000000000ULL;
const volatile __u64 offset_ns = 0;  /* added to CLOCK_MONOTONIC before dividing (col_bpf's windows) */
const volatile __u32 netns_ino = 0;  /* nonzero: receives of threads in this network namespace only */
const volatile __u32 have_tasks = 0; /* map tasks is rametr.bpf.c's (the loader reused its fd) */
/* set by the loader once a watched process's sends label its goroutines (golabel_proc.label_sends):
 * until then a send to another node leaves golabel_send before any map lookup */
__u32 label_sends = 0;
/* the watched processes' bits (GOLABEL_PID_BITS), kept by the loader with map pids */
__u64 pid_bits[GOLABEL_PID_BITS / 64] = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GOLABEL_PIDS_MAX);
	__type(key, __u32); /* tgid */
	__type(value, struct golabel_proc);
} pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GOLABEL_LABELS_MAX);
	__type(key, struct golabel_gkey);
	__type(value, struct golabel_label);
} labels SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GOLABEL_COUNTS_MAX);
	__type(key, struct golabel_ckey);
	__type(value, __u64); /* samples */
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GOLABEL_ORIGINS_MAX);
	__type(key, struct golabel_okey);
	__type(value, struct golabel_origin);
} origins SEC(".maps");

/* rametr.bpf.c's per-thread state (its fd reused by the loader when have_tasks) */
#include "rm_tasks.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GOLABEL_ST_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

#define GL_INLINE static __always_inline

/* Can process tgid be a watched one (its bit in pid_bits)? 0: it is not; 1: look it up in pids. */
GL_INLINE int gl_maybe(__u32 tgid)
{
	return (pid_bits[(tgid / 64) & (GOLABEL_PID_BITS / 64 - 1)] >> (tgid % 64)) & 1;
}

GL_INLINE void gl_stat(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &i);

	if (v)
		(*v)++;
}

/* The label entry cur says goroutine goid holds (0: none, or it was another goroutine's on the same g). */
GL_INLINE __u64 gl_label(const struct golabel_label *cur, __u64 goid)
{
	return cur && cur->goid == goid ? cur->cookie : 0;
}

/*
 * Sets the label of goroutine goid, on g k, to v (0: none); cur is k's entry
 * as looked up (NULL: none). An entry that exists is written in place
 * (aligned 8-byte stores, each read whole): a keep-alive connection's
 * goroutine reads its socket again and again, and an LRU map's update
 * allocates a new element every time (~200 ns). For a new goroutine on a
 * reused g the cookie is written before the id, so that a sampler in
 * between sees a void label rather than the dead goroutine's. An entry is
 * made only for a label.
 */
GL_INLINE void gl_set_at(const struct golabel_gkey *k, struct golabel_label *cur, __u64 v, __u64 goid)
{
	if (cur) {
		if (cur->cookie != v)
			cur->cookie = v;
		if (cur->goid != goid)
			cur->goid = goid;
	} else if (v) {
		struct golabel_label l = { .cookie = v, .goid = goid };

		bpf_map_update_elem(&labels, k, &l, BPF_ANY);
	}
}

GL_INLINE void gl_set(const struct golabel_gkey *k, __u64 v, __u64 goid)
{
	gl_set_at(k, bpf_map_lookup_elem(&labels, k), v, goid);
}

/* The *g in the current thread's TLS slot (its goroutine, g0 or gsignal); 0 if unreadable. */
GL_INLINE __u64 gl_cur_g(const struct golabel_proc *p)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 fs = t->thread.fsbase, g = 0;

	if (!fs || bpf_probe_read_user(&g, sizeof(g), (void *)(fs + p->g_tls_off)) != 0)
		return 0;
	return g;
}

/* A user word at p + off into *v: 0, or -1 if unreadable. */
GL_INLINE int gl_word(__u64 p, __u64 off, __u64 *v)
{
	return p ? bpf_probe_read_user(v, sizeof(*v), (void *)(p + off)) : -1;
}

/* Goroutine g's id into *goid: 0, or -1 if unreadable. */
GL_INLINE int gl_goid(const struct golabel_proc *p, __u64 g, __u64 *goid)
{
	return gl_word(g, p->g_goid_off, goid);
}

/* The label goroutine g (of process p, key k) holds now: 0 if none or unreadable. */
GL_INLINE __u64 gl_label_of(const struct golabel_proc *p, const struct golabel_gkey *k)
{
	struct golabel_label *cur = bpf_map_lookup_elem(&labels, k);
	__u64 goid;

	if (!cur || gl_goid(p, k->g, &goid))
		return 0;
	return gl_label(cur, goid);
}

/* The goroutine the current thread runs for (m.curg): 1 and *curg (0: none), or 0 if unreadable. */
GL_INLINE int gl_curg(const struct golabel_proc *p, __u64 *curg)
{
	__u64 g, m;

	if (!(g = gl_cur_g(p)) || gl_word(g, p->g_m_off, &m) || gl_word(m, p->m_curg_off, curg))
		return 0;
	return 1;
}

/* The current network namespace's inode, or 0. */
GL_INLINE __u32 gl_netns(void)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct nsproxy *ns = t->nsproxy;
	struct net *net;

	if (!ns || !(net = ns->net_ns))
		return 0;
	return net->ns.inum;
}

/* Is the current thread in the watched network namespace (any, without netns_ino)? */
GL_INLINE int gl_ours(void)
{
	return !netns_ino || gl_netns() == netns_ino;
}

/*
 * The key of sk's connection as its receiving end sees it into *k when both
 * ends are on this node (a loopback address, or one address at both ends):
 * 1, or 0. sent: sk is the sending end (its local end is the key's remote).
 */
GL_INLINE int gl_okey(struct sock *sk, int sent, struct golabel_okey *k)
{
	__u32 a[4] = {}, b[4] = {}, pa, pb;
	__u16 fam = sk->__sk_common.skc_family;

	if (fam == AF_INET) {
		a[0] = sk->__sk_common.skc_rcv_saddr;
		b[0] = sk->__sk_common.skc_daddr;
		/* 127.0.0.0/8 (network order: the first byte is the lowest) */
		if (a[0] != b[0] && (a[0] & 0xff) != 127)
			return 0;
	} else if (fam == AF_INET6) {
		BPF_CORE_READ_INTO(&a, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32);
		BPF_CORE_READ_INTO(&b, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32);
		if ((a[0] != b[0] || a[1] != b[1] || a[2] != b[2] || a[3] != b[3]) &&
		    !(!a[0] && !a[1] && !a[2] && a[3] == bpf_htonl(1)) &&                          /* ::1 */
		    !(!a[0] && !a[1] && a[2] == bpf_htonl(0xffff) && (a[3] & 0xff) == 127))      /* v4-mapped */
			return 0;
	} else {
		return 0;
	}
	pa = sk->__sk_common.skc_num;
	pb = bpf_ntohs(sk->__sk_common.skc_dport);
	__builtin_memcpy(sent ? k->raddr : k->laddr, a, sizeof(a));
	__builtin_memcpy(sent ? k->laddr : k->raddr, b, sizeof(b));
	k->lport = sent ? pb : pa;
	k->rport = sent ? pa : pb;
	k->netns = gl_netns();
	k->family = fam;
	return 1;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(golabel_recv, struct sock *sk, int ret, int flags)
{
	struct golabel_origin *o;
	struct golabel_okey ok = {};
	struct golabel_gkey k = {};
	struct golabel_proc *p;
	__u64 cookie, goid;

	if (ret <= 0 || (flags & (MSG_PEEK | MSG_ERRQUEUE)))
		return 0;
	k.tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	if (!gl_maybe(k.tgid) || !(p = bpf_map_lookup_elem(&pids, &k.tgid)) || !gl_ours())
		return 0;
	if (sk->sk_type != SOCK_STREAM ||
	    (sk->sk_protocol != IPPROTO_TCP && sk->__sk_common.skc_family != AF_UNIX))
		return 0;
	/* the cookie the helper returns, read directly when the socket has one (as rametr.bpf.c) */
	cookie = sk->__sk_common.skc_cookie.counter;
	if (!cookie)
		cookie = bpf_get_socket_cookie(sk);
	if (!(k.g = gl_cur_g(p)) || gl_goid(p, k.g, &goid)) {
		gl_stat(GOLABEL_ST_READS_BAD);
		return 0;
	}
	gl_stat(GOLABEL_ST_READS);
	/* a connection of the process to itself: what it brings is its sender's goroutine's work */
	if (sk->sk_protocol == IPPROTO_TCP && gl_okey(sk, 0, &ok) && (o = bpf_map_lookup_elem(&origins, &ok)) &&
	    o->tgid == k.tgid) {
		if (o->label && o->label != cookie) {
			gl_stat(GOLABEL_ST_ORIGIN);
			cookie = o->label;
		} else if (!o->label && p->bare_sends < 0xffffffffU) {
			/* a writer goroutine fed by others (grpc-go's): ask for hand-offs */
			__sync_fetch_and_add(&p->bare_sends, 1);
		}
	}
	gl_set(&k, cookie, goid);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(golabel_send, struct sock *sk, int ret, int flags)
{
	struct golabel_origin v = {}, *o;
	struct golabel_okey ok = {};
	struct golabel_gkey k = {};
	struct golabel_label *cur;
	struct golabel_proc *p;
	__u64 goid, label = 0, cookie;
	int within;

	/* every send on the node comes here: the socket's own fields first, the maps after */
	if (ret <= 0 || sk->sk_type != SOCK_STREAM || sk->sk_protocol != IPPROTO_TCP)
		return 0;
	within = gl_okey(sk, 1, &ok);
	if (!within && !label_sends)
		return 0;
	k.tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	if (!gl_maybe(k.tgid) || !(p = bpf_map_lookup_elem(&pids, &k.tgid)) || (!within && !p->label_sends))
		return 0;
	/* the key holds the sender's namespace already: no second read of it */
	if (netns_ino && (within ? ok.netns : gl_netns()) != netns_ino)
		return 0;
	if ((k.g = gl_cur_g(p)) && !gl_goid(p, k.g, &goid)) {
		cur = bpf_map_lookup_elem(&labels, &k);
		if (!(label = gl_label(cur, goid)) && p->label_sends) {
			/*
			 * A goroutine without a label that writes a connection works for it, as
			 * one that reads it does (grpc-go's writer goroutine, created before
			 * goroutine creations were followed). Within the node the label is
			 * marked as taken from a send: it does not travel to the receiving end
			 * (below) and a hand-off replaces it.
			 */
			cookie = sk->__sk_common.skc_cookie.counter;
			if (!cookie)
				cookie = bpf_get_socket_cookie(sk);
			gl_stat(GOLABEL_ST_SENT);
			gl_set_at(&k, cur, within ? cookie | GOLABEL_INHERITED | GOLABEL_SENT : cookie, goid);
		}
	}
	if (!within)
		return 0;
	v.tgid = k.tgid;
	v.label = label & GOLABEL_SENT ? 0 : label & ~GOLABEL_INHERITED;
	if ((o = bpf_map_lookup_elem(&origins, &ok))) {
		if (o->label != v.label || o->tgid != v.tgid) { /* two 8-byte-aligned stores; a reader may see one */
			o->label = v.label;
			o->tgid = v.tgid;
		}
	} else {
		bpf_map_update_elem(&origins, &ok, &v, BPF_ANY);
	}
	return 0;
}

/* Does goroutine gp of process p start on a runtime function (the runtime's own goroutines)? */
GL_INLINE int gl_runtime_g(const struct golabel_proc *p, __u64 gp)
{
	__u64 pc = 0;

	return p->rt_hi && bpf_probe_read_user(&pc, sizeof(pc), (void *)(gp + p->g_startpc_off)) == 0 &&
	       pc >= p->rt_lo && pc < p->rt_hi;
}

SEC("uprobe")
int golabel_newg(struct pt_regs *ctx)
{
	struct golabel_gkey k = {};
	struct golabel_proc *p;
	__u64 v = 0, goid;

	k.tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	if (!(p = bpf_map_lookup_elem(&pids, &k.tgid)))
		return 0;
	gl_stat(GOLABEL_ST_NEWG);
	if (gl_curg(p, &k.g) && k.g && (v = gl_label_of(p, &k)))
		v |= GOLABEL_INHERITED;
	k.g = ctx->bx;
	if (!v || gl_goid(p, k.g, &goid))
		return 0; /* nothing to carry: a label left on a reused g is void under its new id */
	/* the runtime's own goroutines (GC mark workers, finalizers) work for every tenant */
	if (gl_runtime_g(p, k.g))
		return 0;
	gl_stat(GOLABEL_ST_INHERIT);
	gl_set(&k, v, goid);
	return 0;
}

/*
 * uprobe in runtime.ready(gp), on the system stack of the goroutine that
 * readies gp (m.curg): a channel send to a parked receiver, a worker
 * handing back its answer, an unlock waking a waiter. gp takes the waker's
 * label unless it holds one from a receive of its own (a connection's
 * goroutine woken by another's unlock stays its connection's): a pool's
 * worker fed by a channel works for the goroutine that handed it the job.
 */
SEC("uprobe")
int golabel_ready(struct pt_regs *ctx)
{
	struct golabel_gkey k = {};
	struct golabel_label *own;
	struct golabel_proc *p;
	__u64 v, mine, goid;

	k.tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	if (!(p = bpf_map_lookup_elem(&pids, &k.tgid)))
		return 0;
	if (!gl_curg(p, &k.g) || !k.g || !(v = gl_label_of(p, &k)))
		return 0;
	v |= GOLABEL_INHERITED;
	k.g = ctx->ax;
	if (!k.g || gl_goid(p, k.g, &goid))
		return 0;
	own = bpf_map_lookup_elem(&labels, &k);
	mine = gl_label(own, goid);
	/* a label from a receive of its own stays; one it already holds needs no write */
	if (mine && (!(mine & GOLABEL_INHERITED) || mine == v))
		return 0;
	if (gl_runtime_g(p, k.g))
		return 0;
	gl_stat(GOLABEL_ST_HANDED);
	gl_set_at(&k, own, v, goid);
	return 0;
}

/* Adds a sample to key k's count. */
GL_INLINE void gl_count(const struct golabel_ckey *k)
{
	__u64 one = 1, *c;

	if ((c = bpf_map_lookup_elem(&counts, k)) != NULL) {
		__sync_fetch_and_add(c, 1);
		return;
	}
	/* a first sample, or two CPUs' first at once (EEXIST: add to the winner's) */
	if (bpf_map_update_elem(&counts, k, &one, BPF_NOEXIST) == 0)
		return;
	if ((c = bpf_map_lookup_elem(&counts, k)) != NULL) {
		__sync_fetch_and_add(c, 1);
		return;
	}
	gl_stat(GOLABEL_ST_LOST);
}

SEC("perf_event")
int golabel_sample(struct bpf_perf_event_data *ctx)
{
	struct golabel_ckey ck = {};
	struct golabel_gkey gk = {};
	struct golabel_proc *p;
	struct rm_task *t;

	gk.tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	if (!gl_maybe(gk.tgid) || !(p = bpf_map_lookup_elem(&pids, &gk.tgid)))
		return 0;
	gl_stat(GOLABEL_ST_SAMPLES);
	ck.tgid = gk.tgid;
	ck.win = (bpf_ktime_get_ns() + offset_ns) / window_ns;
	if (!gl_curg(p, &gk.g)) {
		gl_stat(GOLABEL_ST_UNREAD);
		ck.cookie = GOLABEL_IDLE;
	} else if (!gk.g) {
		ck.cookie = GOLABEL_IDLE;
	} else {
		/* 0: a goroutine without a label, or on a g whose label was a dead goroutine's */
		ck.cookie = gl_label_of(p, &gk) & ~(GOLABEL_INHERITED | GOLABEL_SENT);
		/* the runtime's own goroutines count as its stack does: 0 is user goroutines without a label */
		if (!ck.cookie && gl_runtime_g(p, gk.g))
			ck.cookie = GOLABEL_IDLE;
	}
	gl_count(&ck);
	/* the thread's pending samples, which its next counter claim charges with its CPU (rametr.bpf.c) */
	if (have_tasks && (t = bpf_task_storage_get(&tasks, bpf_get_current_task_btf(), 0, 0)) != NULL)
		__sync_fetch_and_add(&t->smp, 1);
	return 0;
}
