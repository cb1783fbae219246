/*
 * agg_gomem.h - the Go label rule's memory of sockets: for each (node,
 * cookie), where the Go parts received on that socket were charged in the
 * latest window that had some, so that a window's label counts for a
 * socket without parts in it still find a destination (agg_account). A
 * fixed number of entries; the least recently used is forgotten first.
 * Finding, adding and touching an entry take constant time, whatever the
 * number remembered.
 *
 * Pure: no clock, file, socket or lock. Not thread-safe: one thread owns a
 * memory.
 */
#ifndef AGG_GOMEM_H
#define AGG_GOMEM_H

#include <stddef.h>
#include <stdint.h>

/* What is remembered of a socket; the caller's to fill. */
struct agg_gomem_val {
	const char *key; /* borrowed: a CE or V reason name that outlives the memory */
	int is_ce;       /* key is a CE, else a V reason */
	uint64_t win;    /* the latest window with parts */
	uint64_t cpu;    /* their CPU there */
};

struct agg_gomem;

/* A memory of at most cap (>= 1) entries. RM_OK, RM_EINVAL, RM_ENOMEM. */
int agg_gomem_open(struct agg_gomem **out, size_t cap);

/* The value of (node, cookie), or NULL; its place in the order of use is left as it is. */
struct agg_gomem_val *agg_gomem_find(struct agg_gomem *m, const char *node, uint64_t cookie);

/* Makes v (from agg_gomem_find or agg_gomem_put) the most recently used. */
void agg_gomem_touch(struct agg_gomem *m, struct agg_gomem_val *v);

/*
 * The value of (node, cookie), made (zeroed, forgetting the least recently
 * used entry when full) if missing; the most recently used either way.
 * NULL if node could not be copied (out of memory).
 */
struct agg_gomem_val *agg_gomem_put(struct agg_gomem *m, const char *node, uint64_t cookie);

/* How many entries are remembered. */
size_t agg_gomem_count(const struct agg_gomem *m);

void agg_gomem_close(struct agg_gomem *m);

#endif
