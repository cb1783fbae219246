/*
 * col_slots.h - the table of throttled CEs that both throttle mechanisms
 * keep (col_throttle.h: threads moved into quota groups; col_tc.h: inbound
 * payload policed): one slot per CE with its command (id, cap, expiry), the
 * entries of the kernel's match array (struct thr_match, throttle.h) each
 * slot owns, the checks every throttle command passes, and which slots have
 * expired. The mechanisms keep only what is theirs (groups, buckets) beside
 * it, indexed by the same slot number.
 *
 * The table does no I/O and reads no clock: match entries are written
 * through the put function given to col_slots_init (the mechanisms pass
 * col_slots_put_map, a BPF array map), the time is an argument. Slot 0 is
 * never used (the kernel's "no slot"). Not thread-safe: the owner holds its
 * lock around every call.
 */
#ifndef COL_SLOTS_H
#define COL_SLOTS_H

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>

#include "rm_match.h"
#include "throttle.h"

#define COL_THROTTLE_MAX_MATCHES 8   /* per command */

/* A throttle command as both mechanisms take it (a decoded ThrottleCommand). */
struct col_throttle_cmd {
	uint64_t id;
	const char *ce;                 /* [A-Za-z0-9_.-]{1,63} */
	const char *resource;           /* "cpu" */
	uint32_t cap_permille;          /* 0 = release, else 1..1000 */
	int64_t expires_unix_ns;
	const struct rm_match *match;   /* which inbound sockets carry the CE's requests */
	size_t nmatch;                  /* 1..COL_THROTTLE_MAX_MATCHES unless cap 0 */
	uint64_t rx_rate_bps;           /* admission (col_tc.h): inbound payload bytes/s
	                                   that keep the CE at its cap; 0 = unknown */
};

struct col_slot {
	int used;
	char ce[64];
	uint64_t id;                    /* of the command in force */
	uint32_t cap_permille;
	int64_t expires_unix_ns;
	size_t nmatch;
	uint32_t match_idx[COL_THROTTLE_MAX_MATCHES];   /* entries of the match array */
};

/* Writes entry k of the match array (an all-zero m empties it); 0 or a
 * negative errno. */
typedef int (*col_slots_put_fn)(void *arg, uint32_t k, const struct thr_match *m);

struct col_slots {
	struct col_slot slot[THR_MAX_SLOTS];
	uint8_t match_used[THR_MAX_MATCHES];
	col_slots_put_fn put;
	void *put_arg;
};

/* An empty table whose match entries are written by put(arg, ...). */
void col_slots_init(struct col_slots *t, col_slots_put_fn put, void *arg);

/* A put function for a BPF array map of struct thr_match: arg is its fd,
 * as (void *)(intptr_t)fd. */
int col_slots_put_map(void *arg, uint32_t k, const struct thr_match *m);

/*
 * The checks every mechanism applies to a command, with the time now (Unix
 * ns): RM_OK; RM_EINVAL with the reason in err for a bad CE name, a
 * resource other than "cpu", a cap above 1000, a cap without 1..
 * COL_THROTTLE_MAX_MATCHES matches, or a malformed match (rm_match_check);
 * RM_ETIMEDOUT if it has already expired.
 */
int col_slots_check(const struct col_throttle_cmd *c, int64_t now_unix_ns, char *err, size_t errlen);

/* The slot of CE ce, or 0 if it has none. */
uint32_t col_slots_find(const struct col_slots *t, const char *ce);

/* An unused slot, or 0 with the reason in err if all THR_MAX_SLOTS-1 are
 * in use. */
uint32_t col_slots_unused(const struct col_slots *t, char *err, size_t errlen);

/* The first used slot after slot `after` (0 to start), or 0 if none:
 *   for (si = 0; (si = col_slots_next(t, si)) != 0;) ... */
uint32_t col_slots_next(const struct col_slots *t, uint32_t after);

/*
 * Puts command c (checked) in force in slot si (c->ce's slot, or an unused
 * one, which becomes c->ce's): takes c->nmatch free entries and writes c's
 * matches there, then empties the slot's former entries, and records c.
 * RM_OK; RM_EFULL if too few entries are free, RM_EBPF if a write failed
 * (the entries written are emptied again), with the reason in err: the
 * slot is then as it was.
 */
int col_slots_set(struct col_slots *t, uint32_t si, const struct col_throttle_cmd *c, char *err,
		  size_t errlen);

/* Empties slot si's entries and frees the slot. Nothing if it is unused. */
void col_slots_clear(struct col_slots *t, uint32_t si);

/* A mechanism's release of slot si (its own part, then col_slots_clear). */
typedef void (*col_slots_release_fn)(void *arg, uint32_t si);

/* Calls release(arg, si) for every used slot, in slot order, on a
 * mechanism's close. Returns how many slots were released. */
uint32_t col_slots_release_all(struct col_slots *t, col_slots_release_fn release, void *arg);

/* A used slot whose command expired at or before now (Unix ns), or 0. */
uint32_t col_slots_expired(const struct col_slots *t, int64_t now_unix_ns);

/* The match array entry of match in for slot: address masked to its prefix
 * (rm_match_mask), ports as given. */
void col_slots_make_match(const struct rm_match *in, uint32_t slot, struct thr_match *out);

#endif
