/*
 * col_probe.h - kernel feature probes for the eBPF backend, in one place.
 *
 * Each probe answers whether this host can run a part of the backend and, if
 * not, why, in words a user can act on ("tracefs is not mounted at
 * /sys/kernel/tracing: mount -t tracefs nodev /sys/kernel/tracing").
 */
#ifndef COL_PROBE_H
#define COL_PROBE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Checks what the eBPF backend needs: root/CAP_BPF, BTF at
 * /sys/kernel/btf/vmlinux, tracefs, ring buffer and task storage maps.
 * Returns RM_OK, or RM_ENOTSUP / RM_EPERM with the reason in why.
 */
int col_probe_ebpf(char *why, size_t whylen);

/* 1 if the kernel has a tp_btf tracepoint of that name (BTF type btf_trace_<name>). */
int col_probe_tp_btf(const char *name);

/*
 * A socket inode number from which on (mod 2^32) every socket was born after
 * this call, and below which every socket born before it: the kernel numbers
 * sockets with get_next_ino(), each CPU taking batches of 1024 from one
 * shared counter and handing them out one by one. So on every CPU this
 * thread may run on, it makes (and closes) unix sockets until that CPU's
 * batch is one taken during this call, at most about a thousand per CPU:
 * afterwards a socket born on any of those CPUs is numbered from the first
 * such batch on. A CPU it may not run on keeps its older batch: sockets born
 * there are judged older than they are (the safe side). The calling thread's
 * CPU affinity is restored. Returns that number, or 0 when no fresh batch
 * showed within the bound (an unknown numbering: the caller must not rely
 * on it). Not thread-safe against the caller's own affinity changes.
 */
uint32_t col_probe_fresh_ino(void);

#endif
