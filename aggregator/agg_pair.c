/*
 * agg_pair.c - the pairing engine (see agg_pair.h). Owns every held part
 * (a doubly linked list in arrival order), the connections ("flows", a hash
 * by directed 4-tuple) with their sorted send ranges and the receivers
 * waiting on them, the interned names (nodes, CEs, reasons) that results
 * point to, and the scratch space of one evaluation. Resolution is event
 * driven: a new send range or a newly resolved sender puts the receivers
 * whose bytes it covers on a work list; parts no longer needed are
 * forgotten once the work list is empty, so no pointer on it dangles.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_account.h"
#include "agg_pair.h"
#include "rm_addr.h"
#include "rm_err.h"
#include "banned.h"

#define AGG_SEQ_BASE (1ULL << 40)  /* first unwrapped position of a flow (room below for late ranges) */
#define AGG_MAX_RANGE (1ULL << 47) /* longer byte ranges are malformed */
/*
 * A continuation chain (RM_PF_CONT, follow-replies) is paired with its
 * anchor record as a receiver with the send of one flow of its own: the
 * anchor "sends" [0, AGG_CHAIN_LEN) and each part of the chain "receives"
 * it, so it takes the anchor's distribution (precisely enough to split) and
 * waits, gives up and persists like any receiver.
 */
#define AGG_FAM_CHAIN 0x10000U     /* the flow of a chain (not an address family) */
#define AGG_CHAIN_LEN (1ULL << 20)

/* A distribution: n shares, sorted (agg_share_cmp), weights > 0. */
struct agg_dist {
	struct agg_pair_share *s;
	size_t n;
};

struct agg_flow;

struct agg_rec {
	uint64_t id;
	struct agg_rec *prev, *next;  /* held parts in arrival (= id) order */
	const char *node;
	uint32_t node_idx;
	uint64_t instance, window_ns, win, seg_id;
	uint64_t v[ST_R_COUNT];
	uint64_t start_ns, end_ns;    /* the part's, for the estimators' inputs */
	uint32_t flags;               /* RM_PF_* */
	uint32_t out_family, out_rport; /* remote end of its closing send (estimators) */
	uint32_t out_raddr[4];
	int64_t arrival;
	int resolved;
	int queued;                   /* on the work list */
	int gc;                       /* on the forget-candidate list */
	struct agg_dist dist;         /* once resolved */
	struct agg_flow *in_flow;     /* while pending: the flow its bytes came on */
	uint64_t in_a, in_b;          /* unwrapped inbound range */
	struct agg_flow *out_flow;    /* while its send range is in the index */
	uint64_t out_a, out_b;
};

/* Directed connection: bytes from src:sport to dst:dport. */
struct agg_fkey {
	uint32_t family;
	uint32_t scope;   /* loopback: node index + 1 (a node's own connection); else 0 */
	uint8_t src[16], dst[16];
	uint32_t sport, dport;
};

struct agg_send {
	uint64_t a, b;         /* unwrapped [a, b) */
	int64_t expires;
	int poisoned;          /* overlaps a send of another segment: untrusted */
	int used;              /* a receiver was resolved with these bytes */
	struct agg_rec *part;  /* NULL: removed (compacted away later) */
};

/* A pending receiver on its flow. */
struct agg_wait {
	uint64_t a, b;         /* its unwrapped inbound range */
	struct agg_rec *r;     /* NULL: removed (compacted away later) */
};

/*
 * Both arrays of a flow are sorted by range start and searched by binary
 * search, bounded by the longest range they held (ranges may overlap).
 * Removal only clears the pointer; an array is compacted when half of it
 * is removed entries, so a long chain of receivers on one connection
 * costs O(log n) per step, not O(n).
 */
struct agg_flow {
	struct agg_fkey k;
	struct agg_flow *hnext;
	uint64_t ref;          /* unwrap reference: last range start seen */
	uint64_t maxlen;       /* longest send range held */
	struct agg_send *sends;
	size_t nsends, capsends, livesends;
	uint64_t wmaxlen;      /* longest receiver range held */
	struct agg_wait *wait;
	size_t nwait, capwait, livewait;
	int gc;
};

/* One step of the coverage sweep. */
struct agg_ev {
	uint64_t pos;
	int start;            /* 1: interval starts at pos, 0: ends */
	struct agg_send *s;
};

struct agg_pair {
	const struct agg_config *cfg;
	struct agg_pair_opts o;
	struct agg_pair_sink sink;
	char **names;                 /* interned strings */
	size_t nnames, capnames;
	struct agg_rec *head, *tail;  /* held parts */
	uint64_t next_id;
	struct agg_flow **ftab;       /* flow hash, fcap a power of two */
	size_t fcap, nflows;
	struct agg_rec **work;        /* work list: [whead, nwork) */
	size_t whead, nwork, capwork;
	struct agg_rec **gcl;         /* forget candidates */
	size_t ngc, capgc;
	struct agg_flow **fgc;        /* flows to drop if empty */
	size_t nfgc, capfgc;
	struct agg_pair_share *acc;   /* distribution being built */
	size_t nacc, capacc;
	struct agg_ev *evs;           /* sweep scratch */
	size_t capevs;
	struct agg_send **active;
	size_t capactive;
	struct agg_pair_piece *pieces;
	size_t cappieces;
	uint64_t *wtmp, *otmp;
	size_t captmp;
	struct agg_pair_stats st;
};

/* ---- small helpers ---- */

static int agg_grow(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t ncap;
	void *na;

	if (need <= *cap)
		return RM_OK;
	ncap = *cap ? *cap : 16;
	while (ncap < need)
		ncap *= 2;
	if (!(na = realloc(*arr, ncap * size)))
		return RM_ENOMEM;
	*arr = na;
	*cap = ncap;
	return RM_OK;
}

void agg_pair_apportion(uint64_t total, const uint64_t *w, size_t n, uint64_t *out)
{
	unsigned __int128 W = 0;
	uint64_t given = 0, left;
	size_t i;

	for (i = 0; i < n; i++)
		W += w[i];
	assert(n > 0 && W > 0);
	for (i = 0; i < n; i++) {
		out[i] = (uint64_t)(((unsigned __int128)total * w[i]) / W);
		given += out[i];
	}
	/* fewer than n units are left; each goes to the largest remainder */
	for (left = total - given; left > 0; left--) {
		unsigned __int128 best = 0;
		size_t bi = n;

		for (i = 0; i < n; i++) {
			unsigned __int128 rem = ((unsigned __int128)total * w[i]) % W;

			/* a piece that got its unit already is no longer behind */
			if (out[i] > (uint64_t)(((unsigned __int128)total * w[i]) / W))
				continue;
			if (bi == n || rem > best) {
				best = rem;
				bi = i;
			}
		}
		assert(bi < n);
		out[bi]++;
	}
}

/* Interned copy of s (NULL on ENOMEM); *idx its index when idx != NULL. */
static const char *agg_intern(struct agg_pair *e, const char *s, uint32_t *idx)
{
	size_t i;
	char *c;

	for (i = e->nnames; i-- > 0;)
		if (strcmp(e->names[i], s) == 0)
			goto found;
	if (agg_grow((void **)&e->names, &e->capnames, e->nnames + 1, sizeof(*e->names)) != 0)
		return NULL;
	if (!(c = strdup(s)))
		return NULL;
	i = e->nnames++;
	e->names[i] = c;
found:
	if (idx)
		*idx = (uint32_t)i;
	return e->names[i];
}

static const char *const agg_reasons[] = {
	AGG_REASON_NO_CE, AGG_REASON_DOM0, AGG_REASON_UNTRUSTED_RANGE, AGG_REASON_UNPAIRED,
	AGG_REASON_PAST_HORIZON, AGG_REASON_UNSEGMENTED, AGG_REASON_LOST, AGG_REASON_UNANCHORED,
};

static int agg_share_cmp(const struct agg_pair_share *a, const struct agg_pair_share *b)
{
	if (!a->ce != !b->ce)
		return a->ce ? -1 : 1;
	return strcmp(a->ce ? a->ce : a->reason, b->ce ? b->ce : b->reason);
}

static int agg_share_qcmp(const void *a, const void *b)
{
	return agg_share_cmp(a, b);
}

/* ---- the distribution being built (e->acc) ---- */

static int agg_acc_add(struct agg_pair *e, const char *ce, const char *reason, uint64_t w)
{
	struct agg_pair_share k = { ce, reason, w };
	size_t i;
	int rv;

	if (!w)
		return RM_OK;
	for (i = 0; i < e->nacc; i++)
		if (agg_share_cmp(&e->acc[i], &k) == 0) {
			e->acc[i].w += w;
			return RM_OK;
		}
	if ((rv = agg_grow((void **)&e->acc, &e->capacc, e->nacc + 1, sizeof(*e->acc))) != 0)
		return rv;
	e->acc[e->nacc++] = k;
	return RM_OK;
}

static int agg_tmp_reserve(struct agg_pair *e, size_t n)
{
	size_t cap = e->captmp;
	int rv;

	if ((rv = agg_grow((void **)&e->wtmp, &cap, n, sizeof(uint64_t))) != 0)
		return rv;
	cap = e->captmp;
	if ((rv = agg_grow((void **)&e->otmp, &cap, n, sizeof(uint64_t))) != 0)
		return rv;
	e->captmp = cap;
	return RM_OK;
}

/* Adds `bytes` spread over distribution d (largest remainder) to e->acc. */
static int agg_acc_add_dist(struct agg_pair *e, const struct agg_dist *d, uint64_t bytes)
{
	size_t i;
	int rv;

	if (!bytes)
		return RM_OK;
	if ((rv = agg_tmp_reserve(e, d->n)) != 0)
		return rv;
	for (i = 0; i < d->n; i++)
		e->wtmp[i] = d->s[i].w;
	agg_pair_apportion(bytes, e->wtmp, d->n, e->otmp);
	for (i = 0; i < d->n; i++)
		if ((rv = agg_acc_add(e, d->s[i].ce, d->s[i].reason, e->otmp[i])) != 0)
			return rv;
	return RM_OK;
}

/* Moves e->acc (non-empty) into a sorted, owned distribution. */
static int agg_acc_take(struct agg_pair *e, struct agg_dist *out)
{
	assert(e->nacc > 0);
	if (!(out->s = malloc(e->nacc * sizeof(*out->s))))
		return RM_ENOMEM;
	memcpy(out->s, e->acc, e->nacc * sizeof(*out->s));
	out->n = e->nacc;
	qsort(out->s, out->n, sizeof(*out->s), agg_share_qcmp);
	e->nacc = 0;
	return RM_OK;
}

/* ---- the distribution as text ---- */

int agg_pair_dist_format(const struct agg_pair_share *dist, size_t n, char **out)
{
	size_t len = 1, i, off = 0;
	char *buf;

	if (!out)
		return RM_EINVAL;
	*out = NULL;
	if (!dist || n == 0)
		return RM_EINVAL;
	for (i = 0; i < n; i++) {
		if (!dist[i].w || (!dist[i].ce && !dist[i].reason))
			return RM_EINVAL;
		len += strlen(dist[i].ce ? dist[i].ce : dist[i].reason) + 2 + 21;
	}
	if (!(buf = malloc(len)))
		return RM_ENOMEM;
	/* "%s%s%s=%llu" per share, written by hand: this runs for every resolved part */
	for (i = 0; i < n; i++) {
		const char *name = dist[i].ce ? dist[i].ce : dist[i].reason;
		size_t nl = strlen(name), nd = 0;
		char digits[20];
		uint64_t w = dist[i].w;

		assert(off + nl + 2 + 20 < len);
		if (i)
			buf[off++] = ';';
		if (!dist[i].ce)
			buf[off++] = '!';
		memcpy(buf + off, name, nl);
		off += nl;
		buf[off++] = '=';
		do {
			digits[nd++] = (char)('0' + w % 10);
			w /= 10;
		} while (w);
		while (nd)
			buf[off++] = digits[--nd];
	}
	buf[off] = '\0';
	*out = buf;
	return RM_OK;
}

/* Parses agg_pair_dist_format's text into e->acc. RM_OK, RM_EINVAL, RM_ENOMEM. */
static int agg_dist_parse(struct agg_pair *e, const char *text)
{
	const char *p = text;
	int rv;

	e->nacc = 0;
	while (*p) {
		char name[ST_NAME_MAX + 1], *end;
		const char *eq = strchr(p, '='), *nm = p, *interned;
		unsigned long long w;
		int is_reason = *p == '!';
		size_t nlen, i;

		if (is_reason)
			nm++;
		if (!eq || eq <= nm || (size_t)(eq - nm) > ST_NAME_MAX)
			return RM_EINVAL;
		nlen = (size_t)(eq - nm);
		memcpy(name, nm, nlen);
		name[nlen] = '\0';
		if (strchr(name, ';') || !(eq[1] >= '0' && eq[1] <= '9'))
			return RM_EINVAL;
		errno = 0;
		w = strtoull(eq + 1, &end, 10);
		if (errno || w == 0 || (*end && *end != ';'))
			return RM_EINVAL;
		interned = NULL;
		if (is_reason)
			for (i = 0; i < sizeof(agg_reasons) / sizeof(agg_reasons[0]); i++)
				if (strcmp(agg_reasons[i], name) == 0)
					interned = agg_reasons[i];
		if (!interned && !(interned = agg_intern(e, name, NULL)))
			return RM_ENOMEM;
		if ((rv = agg_acc_add(e, is_reason ? NULL : interned, is_reason ? interned : NULL, w)) != 0)
			return rv;
		if (*end && !end[1])
			return RM_EINVAL; /* a trailing ';' */
		p = *end ? end + 1 : end;
	}
	return e->nacc ? RM_OK : RM_EINVAL;
}

/* ---- flows ---- */

static uint64_t agg_fkey_hash(const struct agg_fkey *k)
{
	const unsigned char *b = (const unsigned char *)k;
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < sizeof(*k); i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static int agg_is_loopback(uint32_t fam, const uint8_t *a)
{
	static const uint8_t v6lo[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };

	return fam == RM_AF_INET ? a[0] == 127 : memcmp(a, v6lo, 16) == 0;
}

static int agg_tuple_ip(const struct rm_wtuple *t)
{
	return t->family == RM_AF_INET || t->family == RM_AF_INET6;
}

/*
 * The directed key of tuple t as seen on node node_idx: sending = the bytes
 * go from t's local end to its remote end, else from remote to local.
 * Returns 0 if t is neither a TCP/IP tuple nor a unix one with both ends.
 */
static int agg_fkey_make(struct agg_fkey *k, const struct rm_wtuple *t, int sending, uint32_t node_idx)
{
	uint32_t fl, fr;
	uint8_t l[16], r[16];

	memset(k, 0, sizeof(*k));
	if (t->family == RM_AF_UNIX) {
		/* both ends' identities, on this node only */
		if (!(t->laddr[0] | t->laddr[1]) || !(t->raddr[0] | t->raddr[1]))
			return 0;
		k->family = RM_AF_UNIX;
		k->scope = node_idx + 1;
		memcpy(k->src, sending ? t->laddr : t->raddr, 8);
		memcpy(k->dst, sending ? t->raddr : t->laddr, 8);
		return 1;
	}
	if (!agg_tuple_ip(t) || t->lport > 65535 || t->rport > 65535)
		return 0;
	rm_addr_norm(t->family, t->laddr, &fl, l);
	rm_addr_norm(t->family, t->raddr, &fr, r);
	if (fl != fr)
		return 0;
	k->family = fl;
	memcpy(k->src, sending ? l : r, 16);
	memcpy(k->dst, sending ? r : l, 16);
	k->sport = sending ? t->lport : t->rport;
	k->dport = sending ? t->rport : t->lport;
	if (agg_is_loopback(fl, l) || agg_is_loopback(fl, r))
		k->scope = node_idx + 1;
	return 1;
}

/* The flow of continuation chain `chain` of the collector run of node node_idx. */
static void agg_chain_key(struct agg_fkey *k, uint32_t node_idx, uint64_t instance, uint64_t chain)
{
	memset(k, 0, sizeof(*k));
	k->family = AGG_FAM_CHAIN;
	k->scope = node_idx + 1;
	memcpy(k->src, &instance, sizeof(instance));
	memcpy(k->dst, &chain, sizeof(chain));
}

/* A part of a chain that waits for its anchor; an anchor record of a chain. */
static int agg_is_chain_part(const struct rm_wpart *p)
{
	return (p->flags & (RM_PF_CONT | RM_PF_ANCHOR)) == RM_PF_CONT && p->parent_seg;
}

static int agg_is_chain_anchor(const struct rm_wpart *p)
{
	return (p->flags & (RM_PF_CONT | RM_PF_ANCHOR)) == RM_PF_ANCHOR && p->parent_seg;
}

static int agg_ftab_grow(struct agg_pair *e)
{
	size_t ncap = e->fcap ? e->fcap * 2 : 256, i;
	struct agg_flow **nt = calloc(ncap, sizeof(*nt));

	if (!nt)
		return RM_ENOMEM;
	for (i = 0; i < e->fcap; i++) {
		struct agg_flow *f = e->ftab[i], *nx;

		for (; f; f = nx) {
			size_t j = agg_fkey_hash(&f->k) & (ncap - 1);

			nx = f->hnext;
			f->hnext = nt[j];
			nt[j] = f;
		}
	}
	free(e->ftab);
	e->ftab = nt;
	e->fcap = ncap;
	return RM_OK;
}

/* The flow of key k, created if missing (first position base + seq). NULL on ENOMEM. */
static struct agg_flow *agg_flow_get(struct agg_pair *e, const struct agg_fkey *k, uint64_t seq)
{
	struct agg_flow *f;
	size_t j;

	if (e->fcap) {
		for (f = e->ftab[agg_fkey_hash(k) & (e->fcap - 1)]; f; f = f->hnext)
			if (memcmp(&f->k, k, sizeof(*k)) == 0)
				return f;
	}
	if ((e->nflows + 1) * 2 > e->fcap && agg_ftab_grow(e) != 0)
		return NULL;
	if (!(f = calloc(1, sizeof(*f))))
		return NULL;
	f->k = *k;
	f->ref = AGG_SEQ_BASE + (uint32_t)seq;
	j = agg_fkey_hash(k) & (e->fcap - 1);
	f->hnext = e->ftab[j];
	e->ftab[j] = f;
	e->nflows++;
	return f;
}

static void agg_flow_free(struct agg_flow *f)
{
	free(f->sends);
	free(f->wait);
	free(f);
}

static void agg_flow_unlink(struct agg_pair *e, struct agg_flow *f)
{
	struct agg_flow **pp = &e->ftab[agg_fkey_hash(&f->k) & (e->fcap - 1)];

	while (*pp != f)
		pp = &(*pp)->hnext;
	*pp = f->hnext;
	e->nflows--;
	agg_flow_free(f);
}

/* The unwrapped position of 32-bit sequence seq nearest to the flow's reference. */
static uint64_t agg_unwrap(const struct agg_flow *f, uint64_t seq)
{
	uint32_t d = (uint32_t)seq - (uint32_t)f->ref;

	return f->ref + (uint64_t)(int64_t)(int32_t)d;
}

/* Unwraps [start, end) on f into [*a, *b) and moves the reference there. */
static void agg_flow_place(struct agg_flow *f, uint64_t start, uint64_t end, uint64_t *a, uint64_t *b)
{
	*a = agg_unwrap(f, start);
	*b = *a + (end - start);
	f->ref = *a;
}

/* Index of the first send whose start is >= pos. */
static size_t agg_send_lb(const struct agg_flow *f, uint64_t pos)
{
	size_t lo = 0, hi = f->nsends;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->sends[mid].a < pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Index of the first waiting receiver whose start is >= pos. */
static size_t agg_wait_lb(const struct agg_flow *f, uint64_t pos)
{
	size_t lo = 0, hi = f->nwait;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->wait[mid].a < pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Range of f->sends that may overlap [a, b): [*lo, *hi). */
static void agg_send_window(const struct agg_flow *f, uint64_t a, uint64_t b, size_t *lo, size_t *hi)
{
	*lo = agg_send_lb(f, a > f->maxlen ? a - f->maxlen : 0);
	*hi = agg_send_lb(f, b);
}

/* Drops the removed entries of f's arrays when they are half of them (or force). */
static void agg_flow_compact(struct agg_flow *f, int force)
{
	size_t i, j;

	if (force || (f->nsends > 32 && f->livesends * 2 < f->nsends)) {
		for (i = j = 0; i < f->nsends; i++)
			if (f->sends[i].part)
				f->sends[j++] = f->sends[i];
		f->nsends = j;
		if (!j)
			f->maxlen = 0;
	}
	if (force || (f->nwait > 32 && f->livewait * 2 < f->nwait)) {
		for (i = j = 0; i < f->nwait; i++)
			if (f->wait[i].r)
				f->wait[j++] = f->wait[i];
		f->nwait = j;
		if (!j)
			f->wmaxlen = 0;
	}
}

/* arrival + horizon, saturated. */
static int64_t agg_deadline(const struct agg_pair *e, int64_t arrival)
{
	int64_t d;

	return __builtin_add_overflow(arrival, (int64_t)e->o.horizon_ns, &d) ? INT64_MAX : d;
}

static int agg_same_segment(const struct agg_rec *x, const struct agg_rec *y)
{
	return x->node == y->node && x->instance == y->instance && x->seg_id == y->seg_id;
}

/* ---- lists ---- */

static int agg_work_push(struct agg_pair *e, struct agg_rec *r)
{
	int rv;

	if (r->queued || r->resolved)
		return RM_OK;
	if (e->whead == e->nwork)
		e->whead = e->nwork = 0;
	if ((rv = agg_grow((void **)&e->work, &e->capwork, e->nwork + 1, sizeof(*e->work))) != 0)
		return rv;
	e->work[e->nwork++] = r;
	r->queued = 1;
	return RM_OK;
}

static int agg_gc_push(struct agg_pair *e, struct agg_rec *r)
{
	int rv;

	if (r->gc)
		return RM_OK;
	if ((rv = agg_grow((void **)&e->gcl, &e->capgc, e->ngc + 1, sizeof(*e->gcl))) != 0)
		return rv;
	e->gcl[e->ngc++] = r;
	r->gc = 1;
	return RM_OK;
}

static int agg_fgc_push(struct agg_pair *e, struct agg_flow *f)
{
	int rv;

	if (f->gc)
		return RM_OK;
	if ((rv = agg_grow((void **)&e->fgc, &e->capfgc, e->nfgc + 1, sizeof(*e->fgc))) != 0)
		return rv;
	e->fgc[e->nfgc++] = f;
	f->gc = 1;
	return RM_OK;
}

/* Queues the receivers waiting on f whose bytes overlap [a, b). */
static int agg_trigger(struct agg_pair *e, struct agg_flow *f, uint64_t a, uint64_t b)
{
	size_t i = agg_wait_lb(f, a > f->wmaxlen ? a - f->wmaxlen : 0), hi = agg_wait_lb(f, b);
	int rv;

	for (; i < hi; i++) {
		struct agg_rec *r = f->wait[i].r;

		if (r && f->wait[i].b > a && (rv = agg_work_push(e, r)) != 0)
			return rv;
	}
	return RM_OK;
}

static void agg_wait_remove(struct agg_flow *f, struct agg_rec *r)
{
	size_t i;

	for (i = agg_wait_lb(f, r->in_a); i < f->nwait && f->wait[i].r != r; i++)
		;
	assert(i < f->nwait && "receiver not on its flow");
	f->wait[i].r = NULL;
	f->livewait--;
	agg_flow_compact(f, 0);
}

/* ---- resolution ---- */

static void agg_dist_free(struct agg_dist *d)
{
	free(d->s);
	d->s = NULL;
	d->n = 0;
}

/* Makes e->acc the distribution of r, tells the sink, wakes r's receivers. */
static int agg_resolve(struct agg_pair *e, struct agg_rec *r, enum agg_pair_how how)
{
	struct agg_pair_result res;
	int rv, k;
	size_t i;

	assert(!r->resolved);
	if ((rv = agg_acc_take(e, &r->dist)) != 0)
		return rv;
	r->resolved = 1;
	if (r->in_flow) {
		agg_wait_remove(r->in_flow, r);
		if ((rv = agg_fgc_push(e, r->in_flow)) != 0)
			return rv;
		r->in_flow = NULL;
		e->st.pending--;
	}
	if ((rv = agg_grow((void **)&e->pieces, &e->cappieces, r->dist.n, sizeof(*e->pieces))) != 0 ||
	    (rv = agg_tmp_reserve(e, r->dist.n)) != 0)
		return rv;
	for (i = 0; i < r->dist.n; i++) {
		e->pieces[i].ce = r->dist.s[i].ce;
		e->pieces[i].reason = r->dist.s[i].reason;
		e->wtmp[i] = r->dist.s[i].w;
	}
	for (k = 0; k < ST_R_COUNT; k++) {
		agg_pair_apportion(r->v[k], e->wtmp, r->dist.n, e->otmp);
		for (i = 0; i < r->dist.n; i++)
			e->pieces[i].v[k] = e->otmp[i];
	}
	memset(&res, 0, sizeof(res));
	res.id = r->id;
	res.node = r->node;
	res.instance = r->instance;
	res.window_ns = r->window_ns;
	res.win = r->win;
	res.seg_id = r->seg_id;
	res.flags = r->flags;
	res.start_ns = r->start_ns;
	res.end_ns = r->end_ns;
	res.out_family = r->out_family;
	res.out_rport = r->out_rport;
	res.out_raddr = r->out_raddr;
	res.dist = r->dist.s;
	res.ndist = r->dist.n;
	res.pieces = e->pieces;
	res.how = how;
	res.held = r->out_flow != NULL;
	for (k = 0; k < ST_R_COUNT && r->dist.n > 1; k++)
		res.split |= r->v[k] != 0;
	switch (how) {
	case AGG_PAIR_BY_RULE: e->st.by_rule++; break;
	case AGG_PAIR_BY_BYTES: e->st.by_bytes++; break;
	case AGG_PAIR_BY_HORIZON: e->st.by_horizon++; break;
	case AGG_PAIR_BY_EVICTION: e->st.evicted++; break;
	default: e->st.by_none++; break;
	}
	if (res.split)
		e->st.split++;
	if ((rv = e->sink.resolved(e->sink.arg, &res)) != 0)
		return rv;
	if (r->out_flow && (rv = agg_trigger(e, r->out_flow, r->out_a, r->out_b)) != 0)
		return rv;
	return agg_gc_push(e, r);
}

/* Resolves r to a single share (a CE or a V reason) of weight 1. */
static int agg_resolve_one(struct agg_pair *e, struct agg_rec *r, const char *ce, const char *reason,
			   enum agg_pair_how how)
{
	int rv;

	e->nacc = 0;
	if ((rv = agg_acc_add(e, ce, reason, 1)) != 0)
		return rv;
	return agg_resolve(e, r, how);
}

static int agg_ev_cmp(const void *pa, const void *pb)
{
	const struct agg_ev *a = pa, *b = pb;

	if (a->pos != b->pos)
		return a->pos < b->pos ? -1 : 1;
	return a->start - b->start; /* ends first */
}

/*
 * Coverage of pending receiver r's bytes by the sends of its flow, built
 * into e->acc. Sets *done when r can be resolved now: every byte covered by
 * a resolved send or an untrusted one; when final, anything left goes to V
 * ("unpaired": no send; "past_horizon": its sender is still pending).
 */
static int agg_eval(struct agg_pair *e, struct agg_rec *r, int final, int *done)
{
	struct agg_flow *f = r->in_flow;
	uint64_t uncovered = 0, untrusted = 0, blocked = 0, pos = r->in_a, run = 0;
	const struct agg_rec *run_part = NULL;
	size_t lo, hi, i, nev = 0, nact = 0, npois = 0;
	int rv;

	*done = 0;
	e->nacc = 0;
	agg_send_window(f, r->in_a, r->in_b, &lo, &hi);
	if ((rv = agg_grow((void **)&e->evs, &e->capevs, 2 * (hi - lo) + 1, sizeof(*e->evs))) != 0 ||
	    (rv = agg_grow((void **)&e->active, &e->capactive, hi - lo + 1, sizeof(*e->active))) != 0)
		return rv;
	for (i = lo; i < hi; i++) {
		struct agg_send *s = &f->sends[i];

		if (!s->part || s->b <= r->in_a)
			continue;
		e->evs[nev++] = (struct agg_ev){ s->a > r->in_a ? s->a : r->in_a, 1, s };
		e->evs[nev++] = (struct agg_ev){ s->b < r->in_b ? s->b : r->in_b, 0, s };
	}
	qsort(e->evs, nev, sizeof(*e->evs), agg_ev_cmp);
	for (i = 0; i <= nev; i++) {
		uint64_t next = i < nev ? e->evs[i].pos : r->in_b, len = next - pos;
		const struct agg_rec *rep = NULL;
		size_t j;

		if (len) {
			/* [pos, next): the active sends cover it */
			if (nact == 0) {
				uncovered += len;
			} else if (npois) {
				untrusted += len;
			} else {
				for (j = 0; j < nact; j++)
					if (e->active[j]->part->resolved &&
					    (!rep || e->active[j]->part->id < rep->id))
						rep = e->active[j]->part;
				if (!rep)
					blocked += len;
			}
			if (rep != run_part && run) {
				if ((rv = agg_acc_add_dist(e, &run_part->dist, run)) != 0)
					return rv;
				run = 0;
			}
			if (rep) {
				run_part = rep;
				run += len;
			}
			pos = next;
		}
		if (i == nev)
			break;
		if (e->evs[i].start) {
			e->active[nact++] = e->evs[i].s;
			npois += e->evs[i].s->poisoned != 0;
		} else {
			for (j = 0; j < nact && e->active[j] != e->evs[i].s; j++)
				;
			assert(j < nact);
			npois -= e->active[j]->poisoned != 0;
			e->active[j] = e->active[--nact];
		}
	}
	if (run && (rv = agg_acc_add_dist(e, &run_part->dist, run)) != 0)
		return rv;
	if (!final && (uncovered || blocked)) {
		e->nacc = 0;
		return RM_OK;
	}
	if ((rv = agg_acc_add(e, NULL, AGG_REASON_UNTRUSTED_RANGE, untrusted)) != 0 ||
	    (rv = agg_acc_add(e, NULL, f->k.family == AGG_FAM_CHAIN ? AGG_REASON_UNANCHORED : AGG_REASON_UNPAIRED,
			      uncovered)) != 0 ||
	    (rv = agg_acc_add(e, NULL, AGG_REASON_PAST_HORIZON, blocked)) != 0)
		return rv;
	/* the sends whose clean bytes were used: a later overlap cannot be undone */
	for (i = lo; i < hi; i++)
		if (f->sends[i].part && f->sends[i].b > r->in_a && !f->sends[i].poisoned &&
		    f->sends[i].part->resolved)
			f->sends[i].used = 1;
	*done = 1;
	return RM_OK;
}

/* Evaluates the work list until it is empty. */
static int agg_drain(struct agg_pair *e)
{
	int rv, done;

	/* FIFO: receivers are evaluated in the order they were woken */
	while (e->whead < e->nwork) {
		struct agg_rec *r = e->work[e->whead++];

		r->queued = 0;
		if (r->resolved)
			continue;
		if ((rv = agg_eval(e, r, 0, &done)) != 0)
			return rv;
		if (done && (rv = agg_resolve(e, r, AGG_PAIR_BY_BYTES)) != 0)
			return rv;
	}
	e->whead = e->nwork = 0;
	return RM_OK;
}

/* ---- held parts ---- */

static void agg_rec_unlink(struct agg_pair *e, struct agg_rec *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		e->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		e->tail = r->prev;
	e->st.held--;
}

static void agg_rec_free(struct agg_rec *r)
{
	agg_dist_free(&r->dist);
	free(r);
}

/* Removes r's send from its flow (if in the index). */
static int agg_send_remove(struct agg_pair *e, struct agg_rec *r)
{
	struct agg_flow *f = r->out_flow;
	size_t i;

	if (!f)
		return RM_OK;
	for (i = agg_send_lb(f, r->out_a); i < f->nsends && f->sends[i].part != r; i++)
		;
	assert(i < f->nsends);
	f->sends[i].part = NULL;
	f->livesends--;
	e->st.sends--;
	r->out_flow = NULL;
	agg_flow_compact(f, 0);
	return agg_fgc_push(e, f);
}

/* Forgets the candidates that are resolved and hold no send; drops empty flows. */
static int agg_collect(struct agg_pair *e)
{
	size_t i;
	int rv = RM_OK;

	assert(e->whead == e->nwork);
	for (i = 0; i < e->ngc; i++) {
		struct agg_rec *r = e->gcl[i];

		r->gc = 0;
		if (rv || !r->resolved || r->out_flow)
			continue;
		agg_rec_unlink(e, r);
		rv = e->sink.forget(e->sink.arg, r->id);
		agg_rec_free(r);
	}
	e->ngc = 0;
	for (i = 0; i < e->nfgc; i++) {
		struct agg_flow *f = e->fgc[i];

		f->gc = 0;
		if (f->livesends == 0 && f->livewait == 0)
			agg_flow_unlink(e, f);
	}
	e->nfgc = 0;
	return rv;
}

/* Puts r's send range into the index of its flow, marking overlaps. */
static int agg_send_insert(struct agg_pair *e, struct agg_rec *r, const struct agg_fkey *k, uint64_t start,
			   uint64_t end)
{
	struct agg_send s = { 0 };
	struct agg_flow *f;
	size_t lo, hi, i, at;
	int rv;

	if (!(f = agg_flow_get(e, k, start)))
		return RM_ENOMEM;
	if ((rv = agg_grow((void **)&f->sends, &f->capsends, f->nsends + 1, sizeof(*f->sends))) != 0) {
		agg_fgc_push(e, f);
		return rv;
	}
	agg_flow_place(f, start, end, &s.a, &s.b);
	s.expires = agg_deadline(e, r->arrival);
	s.part = r;
	agg_send_window(f, s.a, s.b, &lo, &hi);
	for (i = lo; i < hi; i++) {
		struct agg_send *o = &f->sends[i];

		if (!o->part || o->b <= s.a || agg_same_segment(o->part, r))
			continue;
		/* two segments claim the same bytes: neither is trusted, and
		 * both stay as long as either does */
		if (!o->poisoned && o->used)
			e->st.late_overlaps++;
		o->poisoned = s.poisoned = 1;
		if (o->expires < s.expires)
			o->expires = s.expires;
		else
			s.expires = o->expires;
		if ((rv = agg_trigger(e, f, o->a, o->b)) != 0)
			return rv;
	}
	at = agg_send_lb(f, s.a);
	while (at < f->nsends && f->sends[at].a == s.a)
		at++;
	memmove(&f->sends[at + 1], &f->sends[at], (f->nsends - at) * sizeof(*f->sends));
	f->sends[at] = s;
	f->nsends++;
	f->livesends++;
	if (s.b - s.a > f->maxlen)
		f->maxlen = s.b - s.a;
	e->st.sends++;
	r->out_flow = f;
	r->out_a = s.a;
	r->out_b = s.b;
	return agg_trigger(e, f, s.a, s.b);
}

/* Makes r a pending receiver of bytes [start, end) on flow key k. */
static int agg_wait_on(struct agg_pair *e, struct agg_rec *r, const struct agg_fkey *k, uint64_t start,
		       uint64_t end)
{
	struct agg_flow *f = agg_flow_get(e, k, start);
	size_t at;
	int rv;

	if (!f)
		return RM_ENOMEM;
	if ((rv = agg_grow((void **)&f->wait, &f->capwait, f->nwait + 1, sizeof(*f->wait))) != 0) {
		agg_fgc_push(e, f);
		return rv;
	}
	agg_flow_place(f, start, end, &r->in_a, &r->in_b);
	at = agg_wait_lb(f, r->in_a + 1);
	memmove(&f->wait[at + 1], &f->wait[at], (f->nwait - at) * sizeof(*f->wait));
	f->wait[at] = (struct agg_wait){ r->in_a, r->in_b, r };
	f->nwait++;
	f->livewait++;
	if (r->in_b - r->in_a > f->wmaxlen)
		f->wmaxlen = r->in_b - r->in_a;
	r->in_flow = f;
	e->st.pending++;
	return agg_work_push(e, r);
}

static int agg_valid_range(uint64_t start, uint64_t end)
{
	return end >= start && end - start <= AGG_MAX_RANGE;
}

#define AGG_RULE_NONE (-1)
#define AGG_RULE_OTHER_END AGG_CONFIG_OTHER_END

/*
 * What the configuration rules say of a part received on socket t (step 2
 * in agg_pair.h): the index of the rule naming t as a CE's entry;
 * AGG_RULE_OTHER_END if a rule names t seen from its other end (t is the
 * CE's own client); AGG_RULE_NONE if no rule applies (or t is not IP).
 */
static int agg_rule_of(const struct agg_pair *e, const struct rm_wtuple *t)
{
	if (!agg_tuple_ip(t))
		return AGG_RULE_NONE;
	return agg_config_match_socket(e->cfg, t->family, (const uint8_t *)t->laddr, t->lport,
				       (const uint8_t *)t->raddr, t->rport);
}

/*
 * Whether bytes sent on out could ever be paired: not when the rules decide
 * the socket that receives them (out seen from the other end), whichever
 * node it is on, as step 2 comes before pairing. Such sends are not indexed,
 * so a part whose sends are all of that kind is not held once resolved.
 */
static int agg_send_pairable(const struct agg_pair *e, const struct rm_wtuple *out)
{
	struct rm_wtuple m = *out;

	memcpy(m.laddr, out->raddr, sizeof(m.laddr));
	memcpy(m.raddr, out->laddr, sizeof(m.raddr));
	m.lport = out->rport;
	m.rport = out->lport;
	return agg_rule_of(e, &m) == AGG_RULE_NONE;
}

/*
 * Decides what r (just linked) waits for or is: rule, V, or a receiver.
 * Sets *how_out for immediate resolutions, or leaves r pending on a flow.
 */
static int agg_classify(struct agg_pair *e, struct agg_rec *r, const struct rm_wpart *p)
{
	const struct rm_wtuple *t = &p->in;
	struct agg_fkey k;
	int i = -1;

	if (agg_is_chain_part(p)) {
		/* a continuation: the request its chain's anchor names */
		agg_chain_key(&k, r->node_idx, r->instance, p->parent_seg);
		return agg_wait_on(e, r, &k, 0, AGG_CHAIN_LEN);
	}
	if (agg_is_chain_anchor(p) && !t->family && !t->cookie)
		return agg_resolve_one(e, r, NULL, AGG_REASON_UNANCHORED, AGG_PAIR_BY_NONE);
	if (p->flags & RM_PF_DOMAIN) {
		i = agg_config_match_domain(e->cfg, p->domid);
		if (i >= 0)
			goto rule;
		/* dom0's own remainder (not charged for guests' I/O) */
		return agg_resolve_one(e, r, NULL,
				       (p->domid == 0 && !(p->flags & RM_PF_DRIVER)) ? AGG_REASON_DOM0
										  : AGG_REASON_NO_CE,
				       AGG_PAIR_BY_NONE);
	}
	i = agg_rule_of(e, t);
	if (i >= 0)
		goto rule;
	/* seen from the other end this socket is one the rules name as a CE's
	 * entry: these bytes are a reply to the CE's own client, which is not
	 * a shared service; the chain ends here */
	if (i == AGG_RULE_OTHER_END)
		return agg_resolve_one(e, r, NULL, AGG_REASON_NO_CE, AGG_PAIR_BY_NONE);
	if (!(p->flags & RM_PF_IN_SEQ) || !agg_fkey_make(&k, t, 0, r->node_idx))
		return agg_resolve_one(e, r, NULL, AGG_REASON_NO_CE, AGG_PAIR_BY_NONE);
	if ((p->flags & RM_PF_SEQ_SUSPECT) || !agg_valid_range(p->in_seq_start, p->in_seq_end))
		return agg_resolve_one(e, r, NULL, AGG_REASON_UNTRUSTED_RANGE, AGG_PAIR_BY_NONE);
	if (p->in_seq_end == p->in_seq_start)
		return agg_resolve_one(e, r, NULL, AGG_REASON_NO_CE, AGG_PAIR_BY_NONE);
	return agg_wait_on(e, r, &k, p->in_seq_start, p->in_seq_end);
rule:
	{
		const char *ce = agg_intern(e, e->cfg->rules[i].ce, NULL);

		if (!ce)
			return RM_ENOMEM;
		return agg_resolve_one(e, r, ce, NULL, AGG_PAIR_BY_RULE);
	}
}

/* Drops the oldest held parts while more than max_held are held. */
static int agg_evict(struct agg_pair *e)
{
	int rv;

	while (e->st.held > e->o.max_held) {
		struct agg_rec *r = e->head;

		if (!r->resolved) {
			e->nacc = 0;
			if ((rv = agg_acc_add(e, NULL, AGG_REASON_PAST_HORIZON, r->in_b - r->in_a)) != 0 ||
			    (rv = agg_resolve(e, r, AGG_PAIR_BY_EVICTION)) != 0)
				return rv;
		} else {
			e->st.dropped_sends++;
		}
		if ((rv = agg_send_remove(e, r)) != 0 || (rv = agg_gc_push(e, r)) != 0 ||
		    (rv = agg_drain(e)) != 0 || (rv = agg_collect(e)) != 0)
			return rv;
	}
	return RM_OK;
}

static int agg_check_src(const struct agg_pair_src *src, const struct rm_wpart *p)
{
	size_t n;

	if (!src || !p || !src->node || !src->window_ns)
		return RM_EINVAL;
	n = strlen(src->node);
	return n && n <= ST_NAME_MAX ? RM_OK : RM_EINVAL;
}

/* Creates and links the record of part p (id, arrival given); registers its send. */
static int agg_rec_new(struct agg_pair *e, uint64_t id, const struct agg_pair_src *src, const struct rm_wpart *p,
		       int64_t arrival, struct agg_rec **out)
{
	struct agg_rec *r;
	struct agg_fkey k;

	*out = NULL;
	if (!(r = calloc(1, sizeof(*r))))
		return RM_ENOMEM;
	if (!(r->node = agg_intern(e, src->node, &r->node_idx))) {
		free(r);
		return RM_ENOMEM;
	}
	r->id = id;
	r->instance = src->instance;
	r->window_ns = src->window_ns;
	r->win = p->win;
	r->seg_id = p->seg_id;
	r->start_ns = p->start_ns;
	r->end_ns = p->end_ns;
	r->flags = p->flags;
	r->out_family = p->out.family;
	r->out_rport = p->out.rport;
	memcpy(r->out_raddr, p->out.raddr, sizeof(r->out_raddr));
	r->arrival = arrival;
	r->v[ST_R_CPU] = p->cpu_ns;
	r->v[ST_R_NET_RX] = p->rx_bytes;
	r->v[ST_R_NET_TX] = p->tx_bytes;
	r->v[ST_R_DISK_READ] = p->disk_read;
	r->v[ST_R_DISK_WRITE] = p->disk_write;
	r->prev = e->tail;
	if (e->tail)
		e->tail->next = r;
	else
		e->head = r;
	e->tail = r;
	e->st.held++;
	*out = r;
	if (agg_is_chain_anchor(p)) {
		agg_chain_key(&k, r->node_idx, r->instance, p->parent_seg);
		return agg_send_insert(e, r, &k, 0, AGG_CHAIN_LEN);
	}
	if ((p->flags & RM_PF_OUT_SEQ) && !(p->flags & RM_PF_DOMAIN) && p->out_seq_end > p->out_seq_start &&
	    agg_valid_range(p->out_seq_start, p->out_seq_end) && agg_fkey_make(&k, &p->out, 1, r->node_idx)) {
		if (agg_send_pairable(e, &p->out))
			return agg_send_insert(e, r, &k, p->out_seq_start, p->out_seq_end);
		e->st.ruled_sends++;
	}
	return RM_OK;
}

/* After a part entered: work, forget, evict. */
static int agg_settle(struct agg_pair *e, struct agg_rec *r)
{
	int rv;

	if ((rv = agg_drain(e)) != 0 || (rv = agg_gc_push(e, r)) != 0 || (rv = agg_collect(e)) != 0)
		return rv;
	return agg_evict(e);
}

int agg_pair_add(struct agg_pair *e, const struct agg_pair_src *src, const struct rm_wpart *p, int64_t now_ns,
		 uint64_t *id)
{
	struct agg_rec *r;
	int rv;

	if (!e || !id || agg_check_src(src, p) != 0)
		return RM_EINVAL;
	*id = e->next_id;
	if ((rv = agg_rec_new(e, e->next_id, src, p, now_ns, &r)) != 0) {
		if (r) /* linked: the caller resets the engine anyway */
			e->next_id++;
		return rv;
	}
	e->next_id++;
	e->st.added++;
	if ((rv = agg_classify(e, r, p)) != 0)
		return rv;
	return agg_settle(e, r);
}

int agg_pair_restore(struct agg_pair *e, uint64_t id, const struct agg_pair_src *src, const struct rm_wpart *p,
		     int64_t arrival_ns, const char *dist)
{
	struct agg_rec *r;
	int rv;

	if (!e || agg_check_src(src, p) != 0 || id < e->next_id || id == UINT64_MAX)
		return RM_EINVAL;
	if (dist && (rv = agg_dist_parse(e, dist)) != 0)
		return rv;
	if ((rv = agg_rec_new(e, id, src, p, arrival_ns, &r)) != 0) {
		if (r)
			e->next_id = id + 1;
		return rv;
	}
	e->next_id = id + 1;
	e->st.restored++;
	if (dist) {
		/* the sink saw it resolved before the restart: no second call;
		 * e->acc still holds the parsed distribution */
		if ((rv = agg_acc_take(e, &r->dist)) != 0)
			return rv;
		r->resolved = 1;
		if (r->out_flow && (rv = agg_trigger(e, r->out_flow, r->out_a, r->out_b)) != 0)
			return rv;
	} else if ((rv = agg_classify(e, r, p)) != 0) {
		return rv;
	}
	return agg_settle(e, r);
}

/* Gives up the pending parts whose horizon passed at now_ns (all of them if all). */
static int agg_give_up(struct agg_pair *e, int64_t now_ns, int all)
{
	struct agg_rec *r, *nx;
	int rv, done;

	/* oldest first: their receivers may follow them */
	for (r = e->head; r && (all || agg_deadline(e, r->arrival) <= now_ns); r = nx) {
		nx = r->next;
		if (r->resolved)
			continue;
		if ((rv = agg_eval(e, r, 1, &done)) != 0 || (rv = agg_resolve(e, r, AGG_PAIR_BY_HORIZON)) != 0 ||
		    (rv = agg_drain(e)) != 0)
			return rv;
		/* nx is still held: parts are forgotten only by agg_collect */
	}
	return RM_OK;
}

int agg_pair_give_up(struct agg_pair *e)
{
	int rv;

	if (!e)
		return RM_EINVAL;
	if ((rv = agg_give_up(e, 0, 1)) != 0)
		return rv;
	return agg_collect(e);
}

int agg_pair_expire(struct agg_pair *e, int64_t now_ns)
{
	size_t b, i;
	int rv;

	if (!e)
		return RM_EINVAL;
	if ((rv = agg_give_up(e, now_ns, 0)) != 0)
		return rv;
	/* send ranges past their expiry, one pass per flow */
	for (b = 0; b < e->fcap; b++) {
		struct agg_flow *f;

		for (f = e->ftab[b]; f; f = f->hnext) {
			int changed = 0;

			for (i = 0; i < f->nsends; i++) {
				struct agg_rec *sr = f->sends[i].part;

				/* a pending sender is given up first (its deadline is
				 * not later than its send's expiry) */
				if (!sr || f->sends[i].expires > now_ns || !sr->resolved)
					continue;
				f->sends[i].part = NULL;
				f->livesends--;
				e->st.sends--;
				sr->out_flow = NULL;
				changed = 1;
				if ((rv = agg_gc_push(e, sr)) != 0)
					return rv;
			}
			if (changed) {
				agg_flow_compact(f, 1);
				if ((rv = agg_fgc_push(e, f)) != 0)
					return rv;
			}
		}
	}
	return agg_collect(e);
}

/* ---- lifecycle ---- */

int agg_pair_open(struct agg_pair **out, const struct agg_config *cfg, const struct agg_pair_opts *opts,
		  const struct agg_pair_sink *sink)
{
	struct agg_pair *e;

	if (!out)
		return RM_EINVAL;
	*out = NULL;
	if (!cfg || !opts || !sink || !sink->resolved || !sink->forget || !opts->horizon_ns ||
	    opts->horizon_ns > (uint64_t)INT64_MAX / 4 || !opts->max_held)
		return RM_EINVAL;
	if (!(e = calloc(1, sizeof(*e))))
		return RM_ENOMEM;
	e->cfg = cfg;
	e->o = *opts;
	e->sink = *sink;
	e->next_id = 1;
	*out = e;
	return RM_OK;
}

void agg_pair_reset(struct agg_pair *e)
{
	struct agg_rec *r, *nx;
	size_t b;

	if (!e)
		return;
	for (r = e->head; r; r = nx) {
		nx = r->next;
		agg_rec_free(r);
	}
	e->head = e->tail = NULL;
	for (b = 0; b < e->fcap; b++) {
		struct agg_flow *f, *fn;

		for (f = e->ftab[b]; f; f = fn) {
			fn = f->hnext;
			agg_flow_free(f);
		}
		e->ftab[b] = NULL;
	}
	e->nflows = 0;
	e->whead = e->nwork = e->ngc = e->nfgc = e->nacc = 0;
	e->st.held = e->st.pending = e->st.sends = 0;
	e->next_id = 1;
}

void agg_pair_close(struct agg_pair *e)
{
	size_t i;

	if (!e)
		return;
	agg_pair_reset(e);
	for (i = 0; i < e->nnames; i++)
		free(e->names[i]);
	free(e->names);
	free(e->ftab);
	free(e->work);
	free(e->gcl);
	free(e->fgc);
	free(e->acc);
	free(e->evs);
	free(e->active);
	free(e->pieces);
	free(e->wtmp);
	free(e->otmp);
	free(e);
}

uint64_t agg_pair_next_id(const struct agg_pair *e)
{
	return e->next_id;
}

void agg_pair_get_stats(const struct agg_pair *e, struct agg_pair_stats *out)
{
	*out = e->st;
	out->flows = e->nflows;
}
