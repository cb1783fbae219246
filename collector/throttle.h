/*
 * throttle.h - the contract between throttle.bpf.c (kernel) and
 * col_throttle.c (user space): the table of throttled matches the kernel
 * reads and the enter/leave records it emits.
 *
 * A match says which inbound sockets carry a throttled CE's requests: the
 * remote (client) address under a mask, the client port range and the local
 * (server) port range. When a thread receives on a socket matching an active
 * slot, the kernel records the thread as inside that slot and emits ENTER
 * once; when a thread inside a slot receives on a socket that matches no
 * slot (a request of another CE), or, with release_at_send, sends, it emits
 * LEAVE. User space moves the thread into / out of the slot's cgroup.
 * Only __u32/__u64: the file is included by both sides.
 */
#ifndef RM_THROTTLE_H
#define RM_THROTTLE_H

#define THR_MAX_MATCHES 32   /* entries of the match array */
#define THR_MAX_SLOTS 16     /* throttled CEs at once; slot 0 = none */

#define THR_EV_ENTER 1
#define THR_EV_LEAVE 2

/* One entry of the array map `matches`; slot 0 = unused entry. */
struct thr_match {
	__u32 slot;          /* 1..THR_MAX_SLOTS-1 */
	__u32 family;        /* 2 = AF_INET, 10 = AF_INET6 */
	__u32 addr[4];       /* network order, already masked; AF_INET uses addr[0] */
	__u32 mask[4];       /* network order */
	__u32 cport_lo, cport_hi;   /* client (remote) port range, host order */
	__u32 sport_lo, sport_hi;   /* server (local) port range */
};

/* One record of the ring buffer `thr_events`. */
struct thr_event {
	__u64 ts_ns;         /* bpf_ktime_get_ns (CLOCK_MONOTONIC) */
	__u32 pid, tid;
	__u32 kind;          /* THR_EV_ENTER / THR_EV_LEAVE */
	__u32 slot;          /* slot entered, or the slot left */
};

#endif
