/*
 * col_throttle.h - per-thread CPU throttling at the collector
 * (mechanism a): while a thread of a shared service works on a request of a
 * throttled CE, it runs in a cgroup v1 `cpu` group whose CFS quota is the
 * CE's cap; other threads (other CEs' requests) are not touched.
 *
 * How: throttle.bpf.c (attached only while at least one throttle is active)
 * reports when a thread receives on a socket matching a throttled CE
 * (ENTER) and when it next receives on a socket of no throttled CE, or sends
 * with release_at_send (LEAVE). A thread of this module moves the thread by
 * TID (writing the `tasks` file) into <root>/rametr-throttle-<pid>/s<slot>
 * and back into the cgroup it came from (read from /proc/<pid>/task/<tid>/
 * cgroup at ENTER). Moving back lazily (at the next other CE's request rather
 * than at every send) halves the moves; a move costs 5 us .. 16 ms here
 * (docs/kernel.md).
 *
 * Cap: cap_permille of the node's CPU capacity (ncpu CPUs): quota =
 * cap_permille * ncpu * period / 1000 (at least 1000 us), period 100 ms.
 * Every command carries an expiry (CLOCK_REALTIME ns): when it passes, the
 * throttle is released (threads moved back, group removed), so a lost
 * aggregator never leaves a CE throttled. A command with cap 0 releases the
 * CE at once. A new command for a CE already throttled replaces its cap,
 * matches and expiry. At open, groups left by a collector that died
 * (rametr-throttle-<pid> of a pid no longer running) are emptied into the
 * hierarchy's root and removed. Close releases everything.
 *
 * Threading: open starts one thread (event ring, moves, expiry every 20 ms);
 * every function is thread-safe.
 */
#ifndef COL_THROTTLE_H
#define COL_THROTTLE_H

#include <stddef.h>
#include <stdint.h>

#include "col_slots.h" /* struct col_throttle_cmd, the checks, the slot table */

#define COL_THROTTLE_ROOT_DEFAULT "/sys/fs/cgroup/cpu"
#define COL_THROTTLE_PERIOD_US 100000u

struct col_throttle;

struct col_throttle_cfg {
	const char *root;       /* cgroup v1 cpu hierarchy; NULL = COL_THROTTLE_ROOT_DEFAULT
	                           (mounted there if it is not) */
	uint32_t ncpu;          /* CPUs the cap is a share of; 0 = online CPUs */
	uint32_t netns_ino;     /* nonzero: only threads of this network namespace */
	int release_at_send;    /* move back at the segment's send instead of lazily */
};

/*
 * Loads throttle.bpf.c (not attached), checks the cgroup hierarchy (mounts
 * it at the default root if missing), creates rametr-throttle-<pid> under
 * it, reclaims groups of dead collectors, starts the thread. Returns RM_OK
 * and *out; RM_ENOTSUP with the reason logged if there is no cgroup v1 cpu
 * controller; RM_EPERM; RM_EBPF; RM_EIO; RM_ENOMEM.
 */
int col_throttle_open(struct col_throttle **out, const struct col_throttle_cfg *cfg);

/*
 * Applies a command. Returns RM_OK; RM_EINVAL or RM_ETIMEDOUT with the
 * reason in err for a command col_slots_check() refuses; RM_EFULL if
 * THR_MAX_SLOTS-1 CEs or THR_MAX_MATCHES matches are in use; RM_EIO /
 * RM_EBPF if the group or the hooks could not be set up (err).
 */
int col_throttle_apply(struct col_throttle *t, const struct col_throttle_cmd *cmd, char *err,
		       size_t errlen);

struct col_throttle_stats {
	uint64_t enters, leaves;     /* events from the kernel */
	uint64_t moves, move_fail;   /* tasks-file writes, failed ones (thread gone) */
	uint64_t move_ns_sum, move_ns_max;  /* from the kernel's event to the write done */
	uint64_t expired, released;  /* throttles ended by expiry, by command/close */
	uint32_t active;             /* CEs throttled now */
	int attached;                /* hooks attached now */
};
void col_throttle_stats(struct col_throttle *t, struct col_throttle_stats *out);

/* Path of the CE's group (for tests and logs), "" if the CE is not throttled. */
void col_throttle_group(struct col_throttle *t, const char *ce, char *buf, size_t len);

/* Releases every throttle, stops the thread, removes the groups. NULL-tolerant. */
void col_throttle_close(struct col_throttle *t);

#endif
