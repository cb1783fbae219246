/*
 * agg_pair_index.c - the send index of the pairing engine: the hash of
 * connections, and per connection the send ranges and the waiting
 * receivers, each sorted by (position, id) so that an entry is found by
 * binary search, never by a walk; insertion (marking overlaps of different
 * segments untrusted), removal, compaction, and the wake-up of the
 * receivers whose bytes a send covers. Every scan is bounded (AGG_MAX_SCAN,
 * AGG_MAX_WAKE).
 */
#include <assert.h>
#include <string.h>

#include "agg_pair_int.h"
#include "banned.h"

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

void agg_flow_free(struct agg_flow *f)
{
	free(f->sends);
	free(f->wait);
	free(f->dg);
	free(f);
}

void agg_flow_unlink(struct agg_pair *e, struct agg_flow *f)
{
	struct agg_flow **pp = &e->ftab[agg_fkey_hash(&f->k) & (e->fcap - 1)];

	while (*pp != f)
		pp = &(*pp)->hnext;
	*pp = f->hnext;
	e->nflows--;
	agg_flow_free(f);
}

/* Index of the first send at or after (pos, id) in (start, id) order. */
static size_t agg_send_lb_id(const struct agg_flow *f, uint64_t pos, uint64_t id)
{
	size_t lo = 0, hi = f->nsends;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct agg_send *m = &f->sends[mid];

		if (m->a < pos || (m->a == pos && m->id < id))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Index of the first send whose start is >= pos. */
static size_t agg_send_lb(const struct agg_flow *f, uint64_t pos)
{
	return agg_send_lb_id(f, pos, 0);
}

/* Index of the first waiting receiver at or after (pos, id) in (start, id) order. */
static size_t agg_wait_lb_id(const struct agg_flow *f, uint64_t pos, uint64_t id)
{
	size_t lo = 0, hi = f->nwait;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct agg_wait *m = &f->wait[mid];

		if (m->a < pos || (m->a == pos && m->id < id))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

size_t agg_wait_lb(const struct agg_flow *f, uint64_t pos)
{
	return agg_wait_lb_id(f, pos, 0);
}

void agg_send_window(const struct agg_flow *f, uint64_t a, uint64_t b, size_t *lo, size_t *hi)
{
	*lo = agg_send_lb(f, a > f->maxlen ? a - f->maxlen : 0);
	*hi = agg_send_lb(f, b);
}

void agg_flow_compact(struct agg_flow *f, int force)
{
	size_t i, j;

	if (force || (f->nsends > 32 && f->livesends * 2 < f->nsends)) {
		f->maxlen = 0;
		for (i = j = 0; i < f->nsends; i++)
			if (f->sends[i].part) {
				f->sends[j++] = f->sends[i];
				if (f->sends[i].b - f->sends[i].a > f->maxlen)
					f->maxlen = f->sends[i].b - f->sends[i].a;
			}
		f->nsends = j;
	}
	if (force || (f->nwait > 32 && f->livewait * 2 < f->nwait)) {
		f->wmaxlen = 0;
		for (i = j = 0; i < f->nwait; i++)
			if (f->wait[i].r) {
				f->wait[j++] = f->wait[i];
				if (f->wait[i].b - f->wait[i].a > f->wmaxlen)
					f->wmaxlen = f->wait[i].b - f->wait[i].a;
			}
		f->nwait = j;
	}
}

int agg_trigger(struct agg_pair *e, struct agg_flow *f, uint64_t a, uint64_t b)
{
	size_t i, hi;
	int rv;

	if (f->k.family & AGG_FAM_DGRAM) /* receivers wait in their own numbering */
		return agg_dgram_trigger(e, f);
	i = agg_wait_lb(f, a > f->wmaxlen ? a - f->wmaxlen : 0);
	hi = agg_wait_lb(f, b);

	if (hi - i > AGG_MAX_WAKE) {
		i = hi - AGG_MAX_WAKE;
		e->st.capped_wakes++;
	}
	e->st.scanned += hi - i;
	for (; i < hi; i++) {
		struct agg_rec *r = f->wait[i].r;

		if (r && r->in_cut > a && (rv = agg_work_push(e, r)) != 0)
			return rv;
	}
	return RM_OK;
}

void agg_wait_remove(struct agg_pair *e, struct agg_flow *f, struct agg_rec *r)
{
	size_t i = agg_wait_lb_id(f, r->in_a, r->id);

	e->st.scanned++;
	assert(i < f->nwait && f->wait[i].r == r && "receiver not on its flow");
	f->wait[i].r = NULL;
	f->livewait--;
	agg_flow_compact(f, 0);
}

int agg_send_remove(struct agg_pair *e, struct agg_rec *r)
{
	struct agg_flow *f = r->out_flow;
	size_t i;

	if (!f)
		return RM_OK;
	i = agg_send_lb_id(f, r->out_a, r->id);
	e->st.scanned++;
	assert(i < f->nsends && f->sends[i].part == r);
	f->sends[i].part = NULL;
	f->livesends--;
	e->st.sends--;
	r->out_flow = NULL;
	agg_flow_compact(f, 0);
	return agg_fgc_push(e, f);
}

int agg_send_insert(struct agg_pair *e, struct agg_rec *r, const struct agg_fkey *k, uint64_t start, uint64_t end)
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
	s.id = r->id;
	agg_send_window(f, s.a, s.b, &lo, &hi);
	if (hi - lo > AGG_MAX_SCAN) {
		/* too many sends around to check them all: not trusted */
		lo = hi - AGG_MAX_SCAN;
		s.poisoned = 1;
		e->st.unchecked_sends++;
	}
	e->st.scanned += hi - lo;
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
	at = agg_send_lb_id(f, s.a, s.id);
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

int agg_wait_on(struct agg_pair *e, struct agg_rec *r, const struct agg_fkey *k, uint64_t start, uint64_t end)
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
	r->in_cut = r->in_b;
	at = agg_wait_lb_id(f, r->in_a, r->id);
	memmove(&f->wait[at + 1], &f->wait[at], (f->nwait - at) * sizeof(*f->wait));
	f->wait[at] = (struct agg_wait){ r->in_a, r->in_b, r->id, r };
	f->nwait++;
	f->livewait++;
	if (r->in_b - r->in_a > f->wmaxlen)
		f->wmaxlen = r->in_b - r->in_a;
	r->in_flow = f;
	e->st.pending++;
	return agg_work_push(e, r);
}
