/*
 * tb_cache.h - the front-end's data cache (seed 000 §7.2.1: "the front-end
 * is configured to maintain a cache size of 300KB"): least-recently-used
 * over addresses, each entry holding the complete reply for (addr, size_kb)
 * as the back-end sent it, bounded by the bytes it holds. An entry whose
 * size differs from the request's does not count as a hit (the request
 * replaces it). One mutex guards everything, so every call is thread-safe.
 */
#ifndef TB_CACHE_H
#define TB_CACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct tb_cache_ent;

struct tb_cache {
	pthread_mutex_t lock;
	size_t cap_bytes, used_bytes, nents;
	struct tb_cache_ent **buckets;  /* chained by address */
	size_t nbuckets;                /* power of two */
	struct tb_cache_ent *mru, *lru; /* recency list */
	uint64_t hits, misses, evictions, inserts;
};

struct tb_cache_stats {
	size_t cap_bytes, used_bytes, nents;
	uint64_t hits, misses, evictions, inserts;
};

/*
 * Initialises an empty cache of cap_bytes (> 0) bytes. Returns RM_OK,
 * RM_EINVAL or RM_ENOMEM.
 */
int tb_cache_init(struct tb_cache *c, size_t cap_bytes);

/* Frees every entry. NULL-tolerant; not concurrent with other calls on c. */
void tb_cache_release(struct tb_cache *c);

/*
 * Looks up (addr, size_kb). On a hit, copies the entry's len bytes into buf
 * (cap >= len, else RM_EINVAL and nothing counted), sets *len, makes the
 * entry the most recently used and returns RM_OK; on a miss returns
 * RM_ENOENT. Hits and misses are counted.
 */
int tb_cache_get(struct tb_cache *c, uint32_t addr, uint32_t size_kb, char *buf, size_t cap,
		 size_t *len);

/*
 * Inserts a copy of data[0..len) as the entry of (addr, size_kb), replacing
 * any entry of addr, and evicts least recently used entries until it fits.
 * An object larger than the whole cache is not stored (RM_EFULL). Returns
 * RM_OK, RM_EFULL, RM_EINVAL (len 0 or NULL data) or RM_ENOMEM.
 */
int tb_cache_put(struct tb_cache *c, uint32_t addr, uint32_t size_kb, const char *data, size_t len);

/* Consistent snapshot of the counters. */
void tb_cache_stats(struct tb_cache *c, struct tb_cache_stats *out);

#endif
