/*
 * agg_pair.c - resolution in the pairing engine (see agg_pair.h): what each
 * held part is charged to and when. Classifies an arriving part (rules,
 * V, or a receiver waiting on its connection), evaluates a receiver's
 * coverage by sends, resolves parts and tells the sink, runs the work list
 * (event driven: a new send or a newly resolved sender wakes the receivers
 * it covers), gives up parts at their horizon, evicts beyond max_held, and
 * forgets parts no longer needed once the work list is empty, so no pointer
 * on it dangles. Owns the held parts (a list in arrival order) and the
 * engine's lifecycle.
 */
#include <assert.h>
#include <string.h>

#include "agg_account.h"
#include "agg_pair_int.h"
#include "banned.h"

int64_t agg_deadline(const struct agg_pair *e, int64_t arrival)
{
	int64_t d;

	return __builtin_add_overflow(arrival, (int64_t)e->o.horizon_ns, &d) ? INT64_MAX : d;
}

int agg_same_segment(const struct agg_rec *x, const struct agg_rec *y)
{
	return x->node == y->node && x->instance == y->instance && x->seg_id == y->seg_id;
}

int agg_work_push(struct agg_pair *e, struct agg_rec *r)
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

int agg_fgc_push(struct agg_pair *e, struct agg_flow *f)
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

int agg_resolve(struct agg_pair *e, struct agg_rec *r, enum agg_pair_how how)
{
	struct agg_pair_result res;
	int rv, k;
	size_t i;

	assert(!r->resolved);
	if ((rv = agg_acc_take(e, &r->dist)) != 0)
		return rv;
	r->resolved = 1;
	if (r->ans_wait) {
		r->ans_wait = 0;
		e->st.answers_waiting--;
	}
	if (r->in_flow) {
		agg_wait_remove(e, r->in_flow, r);
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
	res.ends = r->ends;
	res.start_ns = r->start_ns;
	res.end_ns = r->end_ns;
	res.out_family = r->out_family;
	res.out_rport = r->out_rport;
	res.out_raddr = r->out_raddr;
	res.in_cookie = r->in_cookie;
	res.pid = r->pid;
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
 * Examines at most AGG_MAX_SCAN send entries: the bytes from the first one
 * not examined on (r->in_cut) go to V "too_many_sends" and do not wait.
 */
int agg_eval(struct agg_pair *e, struct agg_rec *r, int final, int *done)
{
	struct agg_flow *f = r->in_flow;
	uint64_t uncovered = 0, untrusted = 0, blocked = 0, pos = r->in_a, run = 0, cut;
	const struct agg_rec *run_part = NULL;
	size_t lo, hi, i, nev = 0, nact = 0, npois = 0;
	int rv;

	if (f->k.family & AGG_FAM_DGRAM)
		return agg_dgram_eval(e, r, final, done);
	*done = 0;
	e->nacc = 0;
	agg_send_window(f, r->in_a, r->in_b, &lo, &hi);
	/* the bytes past the first AGG_MAX_SCAN entries are not followed */
	cut = r->in_b;
	if (hi - lo > AGG_MAX_SCAN) {
		hi = lo + AGG_MAX_SCAN;
		if (f->sends[hi].a < cut)
			cut = f->sends[hi].a > r->in_a ? f->sends[hi].a : r->in_a;
	}
	r->in_cut = cut;
	if ((rv = agg_grow((void **)&e->evs, &e->capevs, 2 * (hi - lo) + 1, sizeof(*e->evs))) != 0 ||
	    (rv = agg_grow((void **)&e->active, &e->capactive, hi - lo + 1, sizeof(*e->active))) != 0)
		return rv;
	e->st.scanned += hi - lo;
	for (i = lo; i < hi; i++) {
		struct agg_send *s = &f->sends[i];

		if (!s->part || s->b <= r->in_a || s->a >= cut)
			continue;
		e->evs[nev++] = (struct agg_ev){ s->a > r->in_a ? s->a : r->in_a, 1, s };
		e->evs[nev++] = (struct agg_ev){ s->b < cut ? s->b : cut, 0, s };
	}
	qsort(e->evs, nev, sizeof(*e->evs), agg_ev_cmp);
	for (i = 0; i <= nev; i++) {
		uint64_t next = i < nev ? e->evs[i].pos : cut, len = next - pos;
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
	if (cut < r->in_b && !r->capped) {
		r->capped = 1;
		e->st.too_many_sends++;
	}
	if ((rv = agg_acc_add(e, NULL, AGG_REASON_TOO_MANY_SENDS, r->in_b - cut)) != 0 ||
	    (rv = agg_acc_add(e, NULL, AGG_REASON_UNTRUSTED_RANGE, untrusted)) != 0 ||
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
	int rv, done, handled;

	/* FIFO: receivers are evaluated in the order they were woken */
	while (e->whead < e->nwork) {
		struct agg_rec *r = e->work[e->whead++];

		r->queued = 0;
		if (r->resolved)
			continue;
		if ((rv = agg_ans_eval(e, r, 0, &handled)) != 0)
			return rv;
		if (handled)
			continue;
		if ((rv = agg_eval(e, r, 0, &done)) != 0)
			return rv;
		if (done && (rv = agg_resolve(e, r, AGG_PAIR_BY_BYTES)) != 0)
			return rv;
	}
	e->whead = e->nwork = 0;
	return RM_OK;
}

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
	/* a datagram on an unconnected socket whose sender was never read
	 * (segmenter.h, rm_on_dgram_src): no address to charge by */
	if (!(p->flags & RM_PF_IN_SEQ) && (t->family == RM_AF_INET || t->family == RM_AF_INET6) && !t->rport)
		return agg_resolve_one(e, r, NULL, AGG_REASON_NO_SENDER, AGG_PAIR_BY_NONE);
	if ((p->flags & RM_PF_IN_SEQ) && agg_is_dgram(t, p->in_seq_start, p->in_seq_end)) {
		/* a datagram: the send it is, on its flow (agg_pair_dgram.c) */
		if (!agg_fkey_make(&k, t, 0, r->node_idx))
			return agg_resolve_one(e, r, NULL, AGG_REASON_NO_CE, AGG_PAIR_BY_NONE);
		k.family |= AGG_FAM_DGRAM;
		return agg_wait_on(e, r, &k, p->in_seq_start, p->in_seq_end);
	}
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
	r->ends = p->ends;
	r->out_family = p->out.family;
	r->out_rport = p->out.rport;
	/* a continuation without its anchor has an in tuple that means nothing */
	r->in_cookie = (p->flags & (RM_PF_CONT | RM_PF_ANCHOR)) == RM_PF_CONT ? 0 : p->in.cookie;
	r->pid = p->pid;
	memcpy(r->out_raddr, p->out.raddr, sizeof(r->out_raddr));
	r->arrival = arrival;
	r->grp = (p->flags & RM_PF_ANCHOR) ? p->parent_seg : p->seg_id;
	r->tail = (p->flags & (RM_PF_CONT | RM_PF_ANCHOR)) == (RM_PF_CONT | RM_PF_ANCHOR) &&
		  !(p->flags & RM_PF_OUT_SEQ);
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
		if (p->out_seq_start >= RM_SEQ_DGRAM) {
			if (!agg_is_dgram(&p->out, p->out_seq_start, p->out_seq_end))
				return RM_OK; /* not a datagram's range: nothing to pair with */
			k.family |= AGG_FAM_DGRAM;
		}
		if (agg_send_pairable(e, &p->out)) {
			int rv = agg_send_insert(e, r, &k, p->out_seq_start, p->out_seq_end);

			/* a reply on the connection it read (agg_pair_ans.c) */
			r->answer = rv == RM_OK && r->out_flow && (p->flags & RM_PF_IN_SEQ) &&
				    agg_same_conn(&p->in, &p->out);
			return rv;
		}
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

/*
 * Gives up the pending parts whose horizon passed at now_ns (all of them if
 * all), at most max of them (0: no limit); *more (if not NULL) says whether
 * one is left.
 */
static int agg_give_up(struct agg_pair *e, int64_t now_ns, int all, size_t max, int *more)
{
	struct agg_rec *r, *nx;
	size_t n = 0;
	int rv, done, handled;

	if (more)
		*more = 0;
	/* oldest first: their receivers may follow them */
	for (r = e->head; r && (all || agg_deadline(e, r->arrival) <= now_ns); r = nx) {
		nx = r->next;
		if (r->resolved)
			continue;
		if (max && n == max) {
			if (more)
				*more = 1;
			break;
		}
		if ((rv = agg_ans_release(e, r)) != 0 || (rv = agg_ans_eval(e, r, 1, &handled)) != 0 ||
		    (!handled && ((rv = agg_eval(e, r, 1, &done)) != 0 ||
				  (rv = agg_resolve(e, r, AGG_PAIR_BY_HORIZON)) != 0)) ||
		    (rv = agg_drain(e)) != 0)
			return rv;
		n++;
		/* nx is still held: parts are forgotten only by agg_collect */
	}
	return RM_OK;
}

int agg_pair_give_up(struct agg_pair *e)
{
	return agg_pair_give_up_some(e, 0, 1, 0, NULL);
}

int agg_pair_give_up_some(struct agg_pair *e, int64_t now_ns, int all, size_t max, int *more)
{
	int rv;

	if (!e)
		return RM_EINVAL;
	if ((rv = agg_give_up(e, now_ns, all, max, more)) != 0)
		return rv;
	return agg_collect(e);
}

int agg_pair_expire(struct agg_pair *e, int64_t now_ns)
{
	size_t b, i;
	int rv;

	if (!e)
		return RM_EINVAL;
	if ((rv = agg_give_up(e, now_ns, 0, 0, NULL)) != 0)
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
	e->st.held = e->st.pending = e->st.sends = e->st.answers_waiting = 0;
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
