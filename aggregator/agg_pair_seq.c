/*
 * agg_pair_seq.c - where a received or sent byte range lies, for the
 * pairing engine: the directed connection it belongs to (a flow key: TCP
 * 4-tuple, unix socket pair, loopback scoped per node, or a continuation
 * chain's own flow) and its position there, 32-bit TCP sequence numbers
 * unwrapped into one 64-bit space per connection.
 */
#include <string.h>

#include "agg_pair_int.h"
#include "rm_addr.h"
#include "banned.h"

uint64_t agg_fkey_hash(const struct agg_fkey *k)
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

int agg_tuple_ip(const struct rm_wtuple *t)
{
	return t->family == RM_AF_INET || t->family == RM_AF_INET6;
}

int agg_same_conn(const struct rm_wtuple *a, const struct rm_wtuple *b)
{
	return a->family == b->family && a->cookie == b->cookie && a->lport == b->lport && a->rport == b->rport &&
	       !memcmp(a->laddr, b->laddr, sizeof(a->laddr)) && !memcmp(a->raddr, b->raddr, sizeof(a->raddr));
}

int agg_fkey_make(struct agg_fkey *k, const struct rm_wtuple *t, int sending, uint32_t node_idx)
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

void agg_chain_key(struct agg_fkey *k, uint32_t node_idx, uint64_t instance, uint64_t chain)
{
	memset(k, 0, sizeof(*k));
	k->family = AGG_FAM_CHAIN;
	k->scope = node_idx + 1;
	memcpy(k->src, &instance, sizeof(instance));
	memcpy(k->dst, &chain, sizeof(chain));
}

int agg_is_chain_part(const struct rm_wpart *p)
{
	return (p->flags & (RM_PF_CONT | RM_PF_ANCHOR)) == RM_PF_CONT && p->parent_seg;
}

int agg_is_chain_anchor(const struct rm_wpart *p)
{
	return (p->flags & (RM_PF_CONT | RM_PF_ANCHOR)) == RM_PF_ANCHOR && p->parent_seg;
}

/* The unwrapped position of 32-bit sequence seq nearest to the flow's reference. */
static uint64_t agg_unwrap(const struct agg_flow *f, uint64_t seq)
{
	uint32_t d = (uint32_t)seq - (uint32_t)f->ref;

	return f->ref + (uint64_t)(int64_t)(int32_t)d;
}

void agg_flow_place(struct agg_flow *f, uint64_t start, uint64_t end, uint64_t *a, uint64_t *b)
{
	if (f->k.family & AGG_FAM_DGRAM) { /* 62-bit counts: nothing wraps */
		*a = start - RM_SEQ_DGRAM;
		*b = end - RM_SEQ_DGRAM;
		return;
	}
	*a = agg_unwrap(f, start);
	*b = *a + (end - start);
	f->ref = *a;
}

int agg_valid_range(uint64_t start, uint64_t end)
{
	return end >= start && end - start <= AGG_MAX_RANGE;
}

int agg_is_dgram(const struct rm_wtuple *t, uint64_t start, uint64_t end)
{
	return agg_tuple_ip(t) && start >= RM_SEQ_DGRAM && end > start && end - start <= 65535;
}
