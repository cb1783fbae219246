// SPDX-License-Identifier: GPL-2.0
/*
 * gosched.bpf.c - bench_gosched's probes on the Go scheduler: a uprobe on
 * runtime.execute (a goroutine starts running on an OS thread; Go >= 1.17
 * passes its *g in RAX) that reads the goroutine's id at goid_off in struct
 * runtime.g (col_gort.h finds both in the binary) and counts how often a
 * thread switches goroutine and how often a goroutine resumes on another
 * thread than the one it last ran on; and an empty uprobe, whose cost is
 * the trap alone.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

const volatile __u64 goid_off = 0; /* set before load */

struct gs_counts {
	__u64 hits;      /* runtime.execute entered */
	__u64 bad_reads; /* the g's goid could not be read */
	__u64 switches;  /* the thread ran another goroutine last (or none seen yet) */
	__u64 hops;      /* the goroutine ran on another thread last */
	__u64 new_goids; /* goroutines first seen */
};

struct gs_goid {
	__u32 tgid, pad;
	__u64 goid;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32); /* tid */
	__type(value, __u64); /* goid it last ran */
} thread_goid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct gs_goid);
	__type(value, __u32); /* tid it last ran on */
} goid_thread SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gs_counts);
} counts SEC(".maps");

SEC("uprobe")
int gs_execute(struct pt_regs *ctx)
{
	__u64 pt = bpf_get_current_pid_tgid(), goid, *last;
	struct gs_goid key = { .tgid = (__u32)(pt >> 32) };
	__u32 tid = (__u32)pt, zero = 0, *on;
	struct gs_counts *c = bpf_map_lookup_elem(&counts, &zero);

	if (!c)
		return 0;
	c->hits++;
	if (bpf_probe_read_user(&goid, sizeof(goid), (void *)(ctx->ax + goid_off)) != 0) {
		c->bad_reads++;
		return 0;
	}
	last = bpf_map_lookup_elem(&thread_goid, &tid);
	if (!last) {
		c->switches++;
		bpf_map_update_elem(&thread_goid, &tid, &goid, BPF_ANY);
	} else if (*last != goid) {
		c->switches++;
		*last = goid;
	}
	key.goid = goid;
	on = bpf_map_lookup_elem(&goid_thread, &key);
	if (!on) {
		c->new_goids++;
		bpf_map_update_elem(&goid_thread, &key, &tid, BPF_ANY);
	} else if (*on != tid) {
		c->hops++;
		*on = tid;
	}
	return 0;
}

SEC("uprobe")
int gs_empty(struct pt_regs *ctx)
{
	return 0;
}
