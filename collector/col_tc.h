/*
 * col_tc.h - admission throttling at the collector (mechanism b)
 * for servers where one thread serves every CE (event loops), where moving
 * the thread into a quota group (col_throttle.h) would stall every CE queued
 * behind it. tc_police.bpf.c on the clsact hook of one interface polices a
 * throttled CE's inbound TCP payload with a token bucket at the command's
 * rx_rate_bps (the aggregator derives it from the CE's bytes per CPU second
 * and its cap), burst 100 ms of the rate (at least COL_TC_BURST_MIN bytes);
 * a payload packet passes while the bucket is not in debt and may take it
 * into debt (so a burst smaller than a segment still lets segments through
 * at the mean rate); the others are dropped and sent again by the client's
 * TCP, so the server
 * reads that CE's requests no faster than the cap allows. Pure ACKs pass.
 * The application is not touched. Expiry and cap 0 as in col_throttle.h.
 *
 * Threading: open starts one thread (expiry every 20 ms); all functions are
 * thread-safe.
 */
#ifndef COL_TC_H
#define COL_TC_H

#include <stddef.h>
#include <stdint.h>

#include "col_slots.h" /* struct col_throttle_cmd, the checks, the slot table */

#define COL_TC_BURST_MIN 64   /* bytes (was 2 KiB: 128 16-byte requests at once) */

struct col_tc;

struct col_tc_cfg {
	const char *ifname;   /* interface whose traffic reaches the server */
	int egress;           /* 0: its ingress (the server's own interface); 1: its
	                         egress (e.g. the root-side veth of a namespace) */
};

/* Loads and attaches the program (clsact created if missing, removed at
 * close if we created it). RM_OK; RM_ENOENT (no such interface); RM_EBPF;
 * RM_ENOMEM. */
int col_tc_open(struct col_tc **out, const struct col_tc_cfg *cfg);

/* As col_throttle_apply() (the same checks, col_slots_check()); RM_EINVAL
 * also for a cap without rx_rate_bps. */
int col_tc_apply(struct col_tc *t, const struct col_throttle_cmd *cmd, char *err, size_t errlen);

struct col_tc_stats {
	uint32_t active;
	uint64_t expired, released;
	uint64_t passed, dropped;    /* payload bytes of throttled CEs, all slots */
};
void col_tc_stats(struct col_tc *t, struct col_tc_stats *out);

/* Detaches, releases everything. NULL-tolerant. */
void col_tc_close(struct col_tc *t);

#endif
