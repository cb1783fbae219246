// SPDX-License-Identifier: GPL-2.0
/*
 * golabel.bpf.c - bench_golabel's probes on one Go server (target_tgid):
 * labels carried on goroutines, and the server's CPU split by sampling.
 *
 *   gl_read     tp_btf/sock_recv_length: a thread of the server received
 *               from a TCP connection; the goroutine it runs (the *g in Go's
 *               TLS slot, fsbase + g_tls_off) gets the peer's IPv4 address
 *               as its label.
 *   gl_newproc  uprobe on runtime.newproc1(fn, callergp, callerpc) (Go >=
 *               1.17 register ABI: callergp in RBX): the creator's label (or
 *               none) is kept for this thread until ...
 *   gl_runqput  uprobe on runtime.runqput(pp, gp, next) (gp in RBX), which
 *               newproc's closure calls next on the same thread with the new
 *               goroutine: it gets the kept label, or loses the label of the
 *               dead goroutine whose g it reuses. Any other runqput with a
 *               goroutine running (runtime.ready) passes the readier's
 *               label on as gl_ready says.
 *   gl_newg     uprobe on newproc's call of runqput (the call instruction
 *               in runtime.newproc.func1, on the system stack: the new *g in
 *               RBX, its creator in m.curg): the new goroutine gets its
 *               creator's label, or none; one uprobe per creation where the
 *               pair above takes one per creation plus one per runqput
 *               (the loader attaches one way or the other).
 *   gl_sample   perf_event (cpu-clock on every CPU): on a thread of the
 *               server, which goroutine runs (g == m.curg), or the system
 *               stack (g == m.g0, on behalf of m.curg if there is one), and
 *               its label; counted per label.
 *
 * The uprobes go on the jbe after Go's stack-bound compare (emulated by the
 * kernel, RAX and RBX untouched; col_gort.h). Offsets into struct runtime.g
 * and runtime.m come from the binary's DWARF (set before load).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "golabel.h"

char LICENSE[] SEC("license") = "GPL";

#define AF_INET 2
#define IPPROTO_TCP 6
#define MSG_PEEK 2

const volatile __u32 target_tgid = 0;
const volatile __s64 g_tls_off = -8; /* the *g's slot from the thread's fsbase */
const volatile __u64 g_m_off = 0;    /* runtime.g.m */
const volatile __u64 m_g0_off = 0;   /* runtime.m.g0 */
const volatile __u64 m_curg_off = 0; /* runtime.m.curg */
const volatile __u32 gl_ready = GL_READY_OFF;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);   /* the goroutine's *g */
	__type(value, __u32); /* its label */
} g_label SEC(".maps");

/* A creation under way on a thread: newproc1 seen, runqput of the new g not yet. */
struct gl_pending {
	__u32 label; /* the creator's; 0: none */
	__u32 set;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tid */
	__type(value, struct gl_pending);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, GL_LABELS_MAX);
	__type(key, __u32);
	__type(value, struct gl_label_samples);
} label_samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gl_counts);
} counts SEC(".maps");

#define GL_INLINE static __always_inline

GL_INLINE struct gl_counts *gl_counts(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&counts, &zero);
}

/* The *g in the current thread's TLS slot (the goroutine it runs, or g0); 0 if unreadable. */
GL_INLINE __u64 gl_cur_g(void)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	__u64 fs = BPF_CORE_READ(t, thread.fsbase), g = 0;

	if (!fs || bpf_probe_read_user(&g, sizeof(g), (void *)(fs + g_tls_off)) != 0)
		return 0;
	return g;
}

/* A user word at p + off into *v: 0, or -1 if unreadable. */
GL_INLINE int gl_word(__u64 p, __u64 off, __u64 *v)
{
	return p ? bpf_probe_read_user(v, sizeof(*v), (void *)(p + off)) : -1;
}

GL_INLINE __u32 gl_label_of(__u64 g)
{
	__u32 *l = g ? bpf_map_lookup_elem(&g_label, &g) : NULL;

	return l ? *l : 0;
}

GL_INLINE void gl_set_label(__u64 g, __u32 label)
{
	if (label)
		bpf_map_update_elem(&g_label, &g, &label, BPF_ANY);
	else
		bpf_map_delete_elem(&g_label, &g);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(gl_read, struct sock *sk, int ret, int flags)
{
	struct gl_counts *c;
	__u32 label;
	__u64 g;

	if ((__u32)(bpf_get_current_pid_tgid() >> 32) != target_tgid || ret <= 0 || (flags & MSG_PEEK))
		return 0;
	if (sk->__sk_common.skc_family != AF_INET || sk->sk_protocol != IPPROTO_TCP)
		return 0;
	if (!(c = gl_counts()))
		return 0;
	label = sk->__sk_common.skc_daddr;
	if (!(g = gl_cur_g())) {
		c->reads_bad++;
		return 0;
	}
	c->reads++;
	gl_set_label(g, label);
	return 0;
}

SEC("uprobe")
int gl_newproc(struct pt_regs *ctx)
{
	struct gl_pending p = { .set = 1 };
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct gl_counts *c = gl_counts();

	if (!c)
		return 0;
	c->newprocs++;
	p.label = gl_label_of(ctx->bx);
	bpf_map_update_elem(&pending, &tid, &p, BPF_ANY);
	return 0;
}

SEC("uprobe")
int gl_runqput(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), label;
	struct gl_counts *c = gl_counts();
	struct gl_pending *p;
	__u64 gp = ctx->bx, g0, m, curg;

	if (!c)
		return 0;
	c->runqputs++;
	if ((p = bpf_map_lookup_elem(&pending, &tid)) != NULL && p->set) {
		label = p->label;
		bpf_map_delete_elem(&pending, &tid);
		if (label)
			c->inherits++;
		else
			c->unlabels++;
		gl_set_label(gp, label);
		return 0;
	}
	/* not a creation: runtime.ready from a running goroutine (m.curg), or the scheduler moving work (none) */
	if (!(g0 = gl_cur_g()) || gl_word(g0, g_m_off, &m) || gl_word(m, m_curg_off, &curg) || !curg)
		return 0;
	c->readies++;
	if (gl_ready == GL_READY_OFF || !(label = gl_label_of(curg)))
		return 0;
	if (gl_ready == GL_READY_UNLABELLED && gl_label_of(gp))
		return 0;
	c->ready_labels++;
	gl_set_label(gp, label);
	return 0;
}

SEC("uprobe")
int gl_newg(struct pt_regs *ctx)
{
	struct gl_counts *c = gl_counts();
	__u64 g0, m, curg;
	__u32 label = 0;

	if (!c)
		return 0;
	c->newprocs++;
	if (!(g0 = gl_cur_g()) || gl_word(g0, g_m_off, &m) || gl_word(m, m_curg_off, &curg))
		curg = 0;
	label = gl_label_of(curg);
	if (label)
		c->inherits++;
	else
		c->unlabels++;
	gl_set_label(ctx->bx, label);
	return 0;
}

SEC("perf_event")
int gl_sample(struct bpf_perf_event_data *ctx)
{
	struct gl_label_samples zero_s = {}, *s;
	struct gl_counts *c;
	__u64 g, m, g0, curg;
	__u32 label;
	int on_g0;

	if ((__u32)(bpf_get_current_pid_tgid() >> 32) != target_tgid || !(c = gl_counts()))
		return 0;
	c->samples++;
	if (!(g = gl_cur_g()) || gl_word(g, g_m_off, &m) || gl_word(m, m_g0_off, &g0) || gl_word(m, m_curg_off, &curg)) {
		c->s_bad++;
		return 0;
	}
	on_g0 = g == g0;
	if (!on_g0 && g != curg) {
		c->s_other++;
		return 0;
	}
	if (on_g0 && !curg) {
		c->s_g0_idle++;
		return 0;
	}
	label = gl_label_of(curg);
	if (!label) {
		if (on_g0)
			c->s_g0_unlab++;
		else
			c->s_user_unlab++;
		return 0;
	}
	if (on_g0)
		c->s_g0_lab++;
	else
		c->s_user_lab++;
	s = bpf_map_lookup_elem(&label_samples, &label);
	if (!s) {
		bpf_map_update_elem(&label_samples, &label, &zero_s, BPF_NOEXIST);
		if (!(s = bpf_map_lookup_elem(&label_samples, &label)))
			return 0;
	}
	if (on_g0)
		s->g0++;
	else
		s->user++;
	return 0;
}
