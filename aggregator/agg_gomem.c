/*
 * agg_gomem.c - the Go label rule's memory of sockets (see agg_gomem.h):
 * a fixed array of entries, a hash of (node, cookie) chained through the
 * entries, and a list of the entries in order of use.
 */
#include <stdlib.h>
#include <string.h>

#include "agg_gomem.h"
#include "rm_err.h"
#include "banned.h"

#define AGG_GOMEM_NONE UINT32_MAX

struct agg_gomem_ent {
	struct agg_gomem_val v;    /* first: a value's address is its entry's */
	char *node;                /* owned; NULL: free */
	uint64_t cookie;
	uint32_t hnext;            /* the next entry of its hash chain */
	uint32_t older, newer;     /* its neighbours in the order of use */
};

struct agg_gomem {
	struct agg_gomem_ent *e;
	size_t cap, n;
	uint32_t *head;            /* [nhead] hash chains */
	size_t nhead;              /* a power of two, at least 2 cap */
	uint32_t oldest, newest;   /* the order of use */
};

int agg_gomem_open(struct agg_gomem **out, size_t cap)
{
	struct agg_gomem *m;
	size_t i;

	*out = NULL;
	if (cap < 1 || cap >= AGG_GOMEM_NONE / 2)
		return RM_EINVAL;
	if (!(m = calloc(1, sizeof(*m))))
		return RM_ENOMEM;
	for (m->nhead = 16; m->nhead < 2 * cap; m->nhead *= 2)
		;
	m->cap = cap;
	if (!(m->e = calloc(cap, sizeof(*m->e))) || !(m->head = malloc(m->nhead * sizeof(*m->head)))) {
		free(m->e);
		free(m);
		return RM_ENOMEM;
	}
	for (i = 0; i < m->nhead; i++)
		m->head[i] = AGG_GOMEM_NONE;
	m->oldest = m->newest = AGG_GOMEM_NONE;
	*out = m;
	return RM_OK;
}

static size_t agg_gomem_hash(const struct agg_gomem *m, const char *node, uint64_t cookie)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *node; node++)
		h = (h ^ (unsigned char)*node) * 0x100000001b3ULL;
	h ^= cookie * 0x9e3779b97f4a7c15ULL;
	h ^= h >> 29;
	return (size_t)(h * 0xbf58476d1ce4e5b9ULL >> 32) & (m->nhead - 1);
}

static uint32_t agg_gomem_idx(const struct agg_gomem *m, const struct agg_gomem_val *v)
{
	return (uint32_t)((const struct agg_gomem_ent *)(const void *)v - m->e);
}

/* Takes entry i out of the order of use. */
static void agg_gomem_unlink(struct agg_gomem *m, uint32_t i)
{
	struct agg_gomem_ent *x = &m->e[i];

	if (x->older != AGG_GOMEM_NONE)
		m->e[x->older].newer = x->newer;
	else
		m->oldest = x->newer;
	if (x->newer != AGG_GOMEM_NONE)
		m->e[x->newer].older = x->older;
	else
		m->newest = x->older;
	x->older = x->newer = AGG_GOMEM_NONE;
}

/* Puts entry i at the recent end of the order of use. */
static void agg_gomem_link_newest(struct agg_gomem *m, uint32_t i)
{
	m->e[i].older = m->newest;
	m->e[i].newer = AGG_GOMEM_NONE;
	if (m->newest != AGG_GOMEM_NONE)
		m->e[m->newest].newer = i;
	else
		m->oldest = i;
	m->newest = i;
}

struct agg_gomem_val *agg_gomem_find(struct agg_gomem *m, const char *node, uint64_t cookie)
{
	uint32_t i;

	for (i = m->head[agg_gomem_hash(m, node, cookie)]; i != AGG_GOMEM_NONE; i = m->e[i].hnext)
		if (m->e[i].cookie == cookie && !strcmp(m->e[i].node, node))
			return &m->e[i].v;
	return NULL;
}

void agg_gomem_touch(struct agg_gomem *m, struct agg_gomem_val *v)
{
	uint32_t i = agg_gomem_idx(m, v);

	if (m->newest == i)
		return;
	agg_gomem_unlink(m, i);
	agg_gomem_link_newest(m, i);
}

/* Forgets the least recently used entry; its index. */
static uint32_t agg_gomem_evict(struct agg_gomem *m)
{
	uint32_t i = m->oldest, *p;
	struct agg_gomem_ent *x = &m->e[i];

	for (p = &m->head[agg_gomem_hash(m, x->node, x->cookie)]; *p != i; p = &m->e[*p].hnext)
		;
	*p = x->hnext;
	agg_gomem_unlink(m, i);
	free(x->node);
	x->node = NULL;
	m->n--;
	return i;
}

struct agg_gomem_val *agg_gomem_put(struct agg_gomem *m, const char *node, uint64_t cookie)
{
	struct agg_gomem_val *v = agg_gomem_find(m, node, cookie);
	struct agg_gomem_ent *x;
	char *copy;
	size_t h;
	uint32_t i;

	if (v) {
		agg_gomem_touch(m, v);
		return v;
	}
	if (!(copy = strdup(node)))
		return NULL;
	i = m->n < m->cap ? (uint32_t)m->n : agg_gomem_evict(m);
	x = &m->e[i];
	memset(x, 0, sizeof(*x));
	x->node = copy;
	x->cookie = cookie;
	h = agg_gomem_hash(m, node, cookie);
	x->hnext = m->head[h];
	m->head[h] = i;
	agg_gomem_link_newest(m, i);
	m->n++;
	return &x->v;
}

size_t agg_gomem_count(const struct agg_gomem *m)
{
	return m->n;
}

void agg_gomem_close(struct agg_gomem *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->cap; i++)
		free(m->e[i].node);
	free(m->e);
	free(m->head);
	free(m);
}
