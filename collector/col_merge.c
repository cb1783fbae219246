/*
 * col_merge.c - the part merger of col_merge.h. Owns the matches in force,
 * the staged ones (behind a mutex: the sender's thread stages them), and an
 * open-addressing table of records keyed by (window, inbound socket cookie
 * and remote end, pid, tid), with the order in which its records were opened.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "col_merge.h"
#include "rm_err.h"
#include "banned.h"

#define COL_MERGE_NOMERGE (RM_PF_INHERIT | RM_PF_DOMAIN | RM_PF_DRIVER)
#define COL_MERGE_CHAIN (RM_PF_CONT | RM_PF_ANCHOR)
#define COL_MERGE_RANGES (RM_PF_IN_SEQ | RM_PF_OUT_SEQ | RM_PF_SEQ_SUSPECT)
#define COL_MERGE_HASH (COL_MERGE_SLOTS * 2) /* table size: a power of 2, half full at most */
#define COL_MERGE_DCACHE 1024 /* decisions cached, by socket cookie (a power of 2) */

struct col_merge {
	struct rm_match match[COL_MERGE_MAX_MATCH];
	size_t nmatch;
	/* staged by col_merge_stage */
	pthread_mutex_t mu;
	atomic_int staged;
	struct rm_match st_match[COL_MERGE_MAX_MATCH];
	size_t st_nmatch;
	/* records, and the table of their indexes (-1: empty) */
	struct rm_part rec[COL_MERGE_SLOTS];
	size_t nrec;
	int32_t slot[COL_MERGE_HASH];
	struct col_merge_stats st;
	/* the last decision per socket tuple under the matches in force (gen) */
	struct {
		struct rm_tuple t;
		uint32_t gen;
		int decided;
	} dcache[COL_MERGE_DCACHE];
	uint32_t gen;
};

int col_merge_open(struct col_merge **out)
{
	struct col_merge *m;

	*out = NULL;
	if (!(m = calloc(1, sizeof(*m))))
		return RM_ENOMEM;
	if (pthread_mutex_init(&m->mu, NULL) != 0) {
		free(m);
		return RM_ENOMEM;
	}
	memset(m->slot, 0xff, sizeof(m->slot));
	m->gen = 1; /* cache entries (gen 0) start invalid */
	*out = m;
	return RM_OK;
}

void col_merge_close(struct col_merge *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->mu);
	free(m);
}

int col_merge_stage(struct col_merge *m, const struct rm_match *mm, size_t n)
{
	if (n > COL_MERGE_MAX_MATCH || (n && !mm))
		return RM_EINVAL;
	pthread_mutex_lock(&m->mu);
	if (n)
		memcpy(m->st_match, mm, n * sizeof(*mm));
	m->st_nmatch = n;
	atomic_store(&m->staged, 1);
	pthread_mutex_unlock(&m->mu);
	return RM_OK;
}

int col_merge_sync(struct col_merge *m)
{
	int changed;

	if (!atomic_load(&m->staged))
		return 0;
	pthread_mutex_lock(&m->mu);
	changed = m->st_nmatch != m->nmatch ||
		  (m->nmatch && memcmp(m->st_match, m->match, m->nmatch * sizeof(m->match[0])) != 0);
	if (changed) {
		memcpy(m->match, m->st_match, m->st_nmatch * sizeof(m->match[0]));
		m->nmatch = m->st_nmatch;
		m->gen++; /* cached decisions were for the old set */
	}
	atomic_store(&m->staged, 0);
	pthread_mutex_unlock(&m->mu);
	return changed;
}

size_t col_merge_nmatch(const struct col_merge *m)
{
	return m->nmatch;
}

/* The aggregator's agg_rule_of(t) != AGG_RULE_NONE (agg_pair.c). */
static int col_decided(const struct col_merge *m, const struct rm_tuple *t)
{
	return rm_match_tuple(m->match, m->nmatch, t->family, (const uint8_t *)t->laddr, t->lport,
			      (const uint8_t *)t->raddr, t->rport, NULL) != RM_MATCH_NONE;
}

/*
 * col_decided through the cache: a connection's parts carry the same tuple
 * again and again; the whole tuple is compared (its ports may read 0 after
 * a reset), so the answer is always col_decided's.
 */
static int col_decided_cached(struct col_merge *m, const struct rm_tuple *t)
{
	uint32_t i = (uint32_t)((t->cookie * 0x9e3779b97f4a7c15ull) >> 54) & (COL_MERGE_DCACHE - 1);

	if (m->dcache[i].gen == m->gen && memcmp(&m->dcache[i].t, t, sizeof(*t)) == 0)
		return m->dcache[i].decided;
	m->dcache[i].t = *t;
	m->dcache[i].gen = m->gen;
	m->dcache[i].decided = col_decided(m, t);
	return m->dcache[i].decided;
}

int col_merge_eligible(struct col_merge *m, const struct rm_part *p)
{
	/* a chain's part waits for its anchor, an anchor record stands for its
	 * chain; a part anchored in place is decided by its inbound socket */
	if (!m->nmatch || (p->flags & COL_MERGE_NOMERGE) ||
	    ((p->flags & COL_MERGE_CHAIN) && (p->flags & COL_MERGE_CHAIN) != COL_MERGE_CHAIN) ||
	    !col_decided_cached(m, &p->in))
		return 0;
	if ((p->flags & RM_PF_OUT_SEQ) && p->out_seq_end != p->out_seq_start && !col_decided_cached(m, &p->out))
		return 0;
	return 1;
}

static uint32_t col_merge_hash(const struct rm_part *p)
{
	uint64_t h = p->win * 0x9e3779b97f4a7c15ull;

	h ^= p->in.cookie + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
	h ^= ((uint64_t)p->in.raddr[0] << 32 | (p->in.raddr[3] ^ p->in.rport)) + (h << 6) + (h >> 2);
	h ^= ((uint64_t)p->pid << 32 | p->tid) + 0x8cb92ba72f3d8dd7ull + (h << 6) + (h >> 2);
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (uint32_t)h & (COL_MERGE_HASH - 1);
}

static int col_same_key(const struct rm_part *a, const struct rm_part *b)
{
	return a->win == b->win && a->in.cookie == b->in.cookie && a->pid == b->pid && a->tid == b->tid &&
	       a->in.rport == b->in.rport && memcmp(a->in.raddr, b->in.raddr, sizeof(a->in.raddr)) == 0;
}

int col_merge_add(struct col_merge *m, const struct rm_part *p)
{
	uint32_t h;
	struct rm_part *r;

	if (!col_merge_eligible(m, p))
		return 0;
	for (h = col_merge_hash(p); m->slot[h] >= 0; h = (h + 1) & (COL_MERGE_HASH - 1))
		if (col_same_key(&m->rec[m->slot[h]], p))
			break;
	if (m->slot[h] < 0) {
		if (m->nrec == COL_MERGE_SLOTS) {
			m->st.full++;
			return 0;
		}
		r = &m->rec[m->nrec];
		*r = *p;
		r->ends = p->ends + ((p->flags & RM_PF_END) ? 1 : 0);
		r->flags &= ~(__u32)COL_MERGE_RANGES;
		r->in_seq_start = r->in_seq_end = 0;
		r->out_seq_start = r->out_seq_end = 0;
		m->slot[h] = (int32_t)m->nrec++;
		m->st.merged++;
		return 1;
	}
	r = &m->rec[m->slot[h]];
	r->cpu_ns += p->cpu_ns;
	r->runq_ns += p->runq_ns;
	r->rx_bytes += p->rx_bytes;
	r->tx_bytes += p->tx_bytes;
	r->disk_read += p->disk_read;
	r->disk_write += p->disk_write;
	r->samples += p->samples;
	if (p->start_ns < r->start_ns)
		r->start_ns = p->start_ns;
	if (p->end_ns > r->end_ns)
		r->end_ns = p->end_ns;
	r->flags |= p->flags & ~(__u32)COL_MERGE_RANGES;
	r->ends += p->ends + ((p->flags & RM_PF_END) ? 1 : 0);
	if (!r->out.family && !r->out.cookie)
		r->out = p->out;
	m->st.merged++;
	return 1;
}

int col_merge_drain(struct col_merge *m, int (*emit)(void *arg, const struct rm_part *p), void *arg)
{
	size_t i, done;
	int rv = RM_OK;

	for (done = 0; done < m->nrec; done++)
		if ((rv = emit(arg, &m->rec[done])) != 0)
			break;
	m->st.records += done;
	if (done == m->nrec) {
		m->nrec = 0;
		memset(m->slot, 0xff, sizeof(m->slot));
		return RM_OK;
	}
	/* keep the records not handed over, re-indexed */
	memmove(m->rec, m->rec + done, (m->nrec - done) * sizeof(m->rec[0]));
	m->nrec -= done;
	memset(m->slot, 0xff, sizeof(m->slot));
	for (i = 0; i < m->nrec; i++) {
		uint32_t h = col_merge_hash(&m->rec[i]);

		while (m->slot[h] >= 0)
			h = (h + 1) & (COL_MERGE_HASH - 1);
		m->slot[h] = (int32_t)i;
	}
	return rv;
}

size_t col_merge_held(const struct col_merge *m)
{
	return m->nrec;
}

void col_merge_get_stats(const struct col_merge *m, struct col_merge_stats *out)
{
	*out = m->st;
}
