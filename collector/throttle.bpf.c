// SPDX-License-Identifier: GPL-2.0
/*
 * throttle.bpf.c - the kernel side of per-thread CPU throttling
 * (mechanism a): tells user space when a thread starts serving a request of a
 * throttled CE and when it turns to another CE's request, so that user space
 * can move exactly that thread into the CE's quota cgroup and back.
 *
 * Hooks tp_btf sock_recv_length (and sock_send_length with
 * release_at_send). Attached by col_throttle.c only while a throttle is
 * active. Costs one array scan of THR_MAX_MATCHES entries per received
 * message; emits a record only on a change of a thread's slot, so a thread
 * that serves one throttled connection is moved once, not per request.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "throttle.h"

char LICENSE[] SEC("license") = "GPL";

#define MSG_PEEK 2
#define MSG_ERRQUEUE 0x2000
#define AF_INET 2
#define AF_INET6 10

const volatile __u32 netns_ino = 0;        /* nonzero: only threads of this network namespace */
const volatile __u32 release_at_send = 0;  /* nonzero: leave at the segment's send */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, THR_MAX_MATCHES);
	__type(key, __u32);
	__type(value, struct thr_match);
} matches SEC(".maps");

/* tid -> slot the thread is inside (its cgroup is the slot's) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u32);
} inside SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} thr_events SEC(".maps");

static __always_inline int thr_ours(void)
{
	struct task_struct *t = bpf_get_current_task_btf();

	if (!netns_ino)
		return 1;
	return BPF_CORE_READ(t, nsproxy, net_ns, ns.inum) == netns_ino;
}

static __always_inline void thr_emit(__u32 kind, __u32 slot)
{
	struct thr_event *e = bpf_ringbuf_reserve(&thr_events, sizeof(*e), 0);
	__u64 pt = bpf_get_current_pid_tgid();

	if (!e)
		return;
	e->ts_ns = bpf_ktime_get_ns();
	e->pid = pt >> 32;
	e->tid = (__u32)pt;
	e->kind = kind;
	e->slot = slot;
	bpf_ringbuf_submit(e, 0);
}

struct thr_key {
	__u32 family;
	__u32 raddr[4];
	__u32 rport, lport;
	__u32 slot;
};

static long thr_match_one(__u32 i, struct thr_key *k)
{
	struct thr_match *m = bpf_map_lookup_elem(&matches, &i);

	if (!m || m->slot == 0 || m->family != k->family)
		return 0;
	if (k->rport < m->cport_lo || k->rport > m->cport_hi)
		return 0;
	if (k->lport < m->sport_lo || k->lport > m->sport_hi)
		return 0;
	if ((k->raddr[0] & m->mask[0]) != m->addr[0] || (k->raddr[1] & m->mask[1]) != m->addr[1] ||
	    (k->raddr[2] & m->mask[2]) != m->addr[2] || (k->raddr[3] & m->mask[3]) != m->addr[3])
		return 0;
	k->slot = m->slot;
	return 1; /* stop */
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(thr_sock_recv, struct sock *sk, int ret, int flags)
{
	struct thr_key k = {};
	__u32 tid, *cur;
	__u16 family;

	if (ret <= 0 || (flags & (MSG_PEEK | MSG_ERRQUEUE)) || !thr_ours())
		return 0;
	family = sk->__sk_common.skc_family;
	if (family == AF_INET) {
		k.raddr[0] = sk->__sk_common.skc_daddr;
	} else if (family == AF_INET6) {
		BPF_CORE_READ_INTO(&k.raddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32);
	} else {
		return 0;
	}
	k.family = family;
	k.lport = sk->__sk_common.skc_num;
	k.rport = bpf_ntohs(sk->__sk_common.skc_dport);
	bpf_loop(THR_MAX_MATCHES, thr_match_one, &k, 0);
	tid = (__u32)bpf_get_current_pid_tgid();
	cur = bpf_map_lookup_elem(&inside, &tid);
	if (k.slot) {
		if (cur && *cur == k.slot)
			return 0;
		bpf_map_update_elem(&inside, &tid, &k.slot, BPF_ANY);
		thr_emit(THR_EV_ENTER, k.slot);
	} else if (cur) {
		__u32 was = *cur;

		bpf_map_delete_elem(&inside, &tid);
		thr_emit(THR_EV_LEAVE, was);
	}
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(thr_sock_send, struct sock *sk, int ret, int flags)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), *cur, was;

	if (ret <= 0)
		return 0;
	cur = bpf_map_lookup_elem(&inside, &tid);
	if (!cur)
		return 0;
	was = *cur;
	bpf_map_delete_elem(&inside, &tid);
	thr_emit(THR_EV_LEAVE, was);
	return 0;
}
