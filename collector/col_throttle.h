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

#define COL_THROTTLE_ROOT_DEFAULT "/sys/fs/cgroup/cpu"
#define COL_THROTTLE_PERIOD_US 100000u
#define COL_THROTTLE_MAX_MATCHES 8   /* per command */

struct col_throttle;

struct col_throttle_cfg {
	const char *root;       /* cgroup v1 cpu hierarchy; NULL = COL_THROTTLE_ROOT_DEFAULT
	                           (mounted there if it is not) */
	uint32_t ncpu;          /* CPUs the cap is a share of; 0 = online CPUs */
	uint32_t netns_ino;     /* nonzero: only threads of this network namespace */
	int release_at_send;    /* move back at the segment's send instead of lazily */
};

/* Which inbound sockets carry the CE's requests (from the aggregator's rules). */
struct col_throttle_match {
	uint32_t family;        /* 2 or 10 */
	uint8_t addr[16];       /* network order; AF_INET uses 4 bytes */
	uint32_t prefix;        /* 0..32 / 0..128 */
	uint32_t cport_lo, cport_hi;
	uint32_t sport_lo, sport_hi;
};

struct col_throttle_cmd {
	uint64_t id;
	const char *ce;                 /* 1..63 bytes */
	const char *resource;           /* "cpu" */
	uint32_t cap_permille;          /* 0 = release, else 1..1000 */
	int64_t expires_unix_ns;
	const struct col_throttle_match *match;
	size_t nmatch;                  /* 1..COL_THROTTLE_MAX_MATCHES unless cap 0 */
	uint64_t rx_rate_bps;           /* admission (col_tc.h): inbound payload bytes/s
	                                   that keep the CE at its cap; 0 = unknown */
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
 * Applies a command. Returns RM_OK; RM_EINVAL with the reason in err for a
 * bad command (unknown resource, cap > 1000, no match, bad family or prefix,
 * bad CE name); RM_ETIMEDOUT if it has already expired (err says so);
 * RM_EFULL if THR_MAX_SLOTS-1 CEs or THR_MAX_MATCHES matches are in use;
 * RM_EIO / RM_EBPF if the group or the hooks could not be set up (err).
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

/*
 * The map entry (throttle.h) of match in for slot: address masked to its
 * prefix, ports as given. Pure; shared by both enforcers (this file's
 * cgroup one and col_tc.c's admission one), whose BPF programs read the
 * same struct thr_match.
 */
struct thr_match;
void col_throttle_make_match(const struct col_throttle_match *in, uint32_t slot, struct thr_match *out);

/* Path of the CE's group (for tests and logs), "" if the CE is not throttled. */
void col_throttle_group(struct col_throttle *t, const char *ce, char *buf, size_t len);

/* Releases every throttle, stops the thread, removes the groups. NULL-tolerant. */
void col_throttle_close(struct col_throttle *t);

#endif
