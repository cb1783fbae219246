/*
 * tb_cache.c - the front-end's LRU cache: a chained hash of entries by
 * address plus a doubly linked recency list, bounded by bytes held. Owns
 * every entry and its data copy.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "rm_err.h"
#include "tb_cache.h"
#include "banned.h"

struct tb_cache_ent {
	uint32_t addr, size_kb;
	char *data;
	size_t len;
	struct tb_cache_ent *hnext;       /* bucket chain */
	struct tb_cache_ent *newer, *older;
};

static size_t tb_cache_bucket(const struct tb_cache *c, uint32_t addr)
{
	return (size_t)((addr * 2654435761u) & (uint32_t)(c->nbuckets - 1));
}

int tb_cache_init(struct tb_cache *c, size_t cap_bytes)
{
	size_t nb = 64;

	if (!c || cap_bytes == 0)
		return RM_EINVAL;
	memset(c, 0, sizeof(*c));
	/* about one bucket per KB of capacity (the smallest object), at most 64 Ki */
	while (nb < cap_bytes / 1024 && nb < 65536)
		nb *= 2;
	c->buckets = calloc(nb, sizeof(*c->buckets));
	if (!c->buckets)
		return RM_ENOMEM;
	if (pthread_mutex_init(&c->lock, NULL) != 0) {
		free(c->buckets);
		c->buckets = NULL;
		return RM_ENOMEM;
	}
	c->nbuckets = nb;
	c->cap_bytes = cap_bytes;
	return RM_OK;
}

void tb_cache_release(struct tb_cache *c)
{
	struct tb_cache_ent *e, *next;

	if (!c || !c->buckets)
		return;
	for (e = c->mru; e; e = next) {
		next = e->older;
		free(e->data);
		free(e);
	}
	free(c->buckets);
	c->buckets = NULL;
	c->mru = c->lru = NULL;
	c->nents = c->used_bytes = 0;
	pthread_mutex_destroy(&c->lock);
}

/* Unlinks e from the recency list (lock held). */
static void tb_cache_unlist(struct tb_cache *c, struct tb_cache_ent *e)
{
	if (e->newer)
		e->newer->older = e->older;
	else
		c->mru = e->older;
	if (e->older)
		e->older->newer = e->newer;
	else
		c->lru = e->newer;
	e->newer = e->older = NULL;
}

/* Puts e at the most recently used end (lock held). */
static void tb_cache_front(struct tb_cache *c, struct tb_cache_ent *e)
{
	e->newer = NULL;
	e->older = c->mru;
	if (c->mru)
		c->mru->newer = e;
	c->mru = e;
	if (!c->lru)
		c->lru = e;
}

static struct tb_cache_ent *tb_cache_find(struct tb_cache *c, uint32_t addr)
{
	struct tb_cache_ent *e;

	for (e = c->buckets[tb_cache_bucket(c, addr)]; e; e = e->hnext)
		if (e->addr == addr)
			return e;
	return NULL;
}

/* Removes and frees e (lock held). */
static void tb_cache_drop(struct tb_cache *c, struct tb_cache_ent *e)
{
	struct tb_cache_ent **pp = &c->buckets[tb_cache_bucket(c, e->addr)];

	while (*pp != e) {
		assert(*pp);
		pp = &(*pp)->hnext;
	}
	*pp = e->hnext;
	tb_cache_unlist(c, e);
	assert(c->used_bytes >= e->len && c->nents > 0);
	c->used_bytes -= e->len;
	c->nents--;
	free(e->data);
	free(e);
}

int tb_cache_get(struct tb_cache *c, uint32_t addr, uint32_t size_kb, char *buf, size_t cap,
		 size_t *len)
{
	struct tb_cache_ent *e;
	int rv = RM_ENOENT;

	if (!c || !buf || !len)
		return RM_EINVAL;
	pthread_mutex_lock(&c->lock);
	e = tb_cache_find(c, addr);
	if (e && e->size_kb == size_kb) {
		if (e->len > cap) {
			rv = RM_EINVAL;
			goto out;
		}
		memcpy(buf, e->data, e->len);
		*len = e->len;
		tb_cache_unlist(c, e);
		tb_cache_front(c, e);
		c->hits++;
		rv = RM_OK;
	} else {
		c->misses++;
	}
out:
	pthread_mutex_unlock(&c->lock);
	return rv;
}

int tb_cache_put(struct tb_cache *c, uint32_t addr, uint32_t size_kb, const char *data, size_t len)
{
	struct tb_cache_ent *e, *old;
	size_t b;

	if (!c || !data || len == 0)
		return RM_EINVAL;
	if (len > c->cap_bytes)
		return RM_EFULL;
	/* Allocate and copy outside the lock. */
	e = calloc(1, sizeof(*e));
	if (!e)
		return RM_ENOMEM;
	e->data = malloc(len);
	if (!e->data) {
		free(e);
		return RM_ENOMEM;
	}
	memcpy(e->data, data, len);
	e->addr = addr;
	e->size_kb = size_kb;
	e->len = len;
	pthread_mutex_lock(&c->lock);
	old = tb_cache_find(c, addr);
	if (old)
		tb_cache_drop(c, old);
	while (c->used_bytes + len > c->cap_bytes) {
		assert(c->lru);
		tb_cache_drop(c, c->lru);
		c->evictions++;
	}
	b = tb_cache_bucket(c, addr);
	e->hnext = c->buckets[b];
	c->buckets[b] = e;
	tb_cache_front(c, e);
	c->used_bytes += len;
	c->nents++;
	c->inserts++;
	pthread_mutex_unlock(&c->lock);
	return RM_OK;
}

void tb_cache_stats(struct tb_cache *c, struct tb_cache_stats *out)
{
	if (!c || !out)
		return;
	pthread_mutex_lock(&c->lock);
	out->cap_bytes = c->cap_bytes;
	out->used_bytes = c->used_bytes;
	out->nents = c->nents;
	out->hits = c->hits;
	out->misses = c->misses;
	out->evictions = c->evictions;
	out->inserts = c->inserts;
	pthread_mutex_unlock(&c->lock);
}
