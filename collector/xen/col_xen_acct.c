/*
 * col_xen_acct.c - turns a TSC-ordered stream of xentrace records into
 * per-window domain / vCPU parts and window totals (rules in col_xen_acct.h),
 * and derives the TSC frequency from a trace. Owns the per-CPU and per-vCPU
 * state and the ring of windows not yet emitted; does no I/O besides calling
 * the sink and logging.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "col_xen_acct.h"
#include "rm_err.h"
#include "banned.h"

#define XA_MAX_PENDING (1u << 24) /* windows held at once: beyond, time is corrupt */

enum { VS_UNKNOWN, VS_RUNNING, VS_RUNNABLE, VS_BLOCKED, VS_OFFLINE };
enum { DS_UNKNOWN, DS_ALIVE, DS_GONE };
enum { K_CPU, K_IDLE, K_UNSEG, K_LOST, K_RUNQ, K_BLK };

struct xa_vcpu {
	uint32_t domid, vcpu;
	uint8_t state, block_pending, sleep_pending;
	uint64_t since;
};

struct xa_cpu {
	uint8_t present, known;
	uint32_t dom, vcpu;
	uint64_t since;       /* known: charged up to here; unknown: unknown since */
};

struct xa_vacc {
	uint64_t cpu, runq, blk;
};

struct xa_grant {
	uint32_t domid;
	uint64_t n;
	uint64_t share;       /* emission scratch */
};

struct xa_win {
	uint64_t idx;
	uint64_t busy, idle, lost, unseg, cap;
	uint64_t gr_total;
	struct xa_vacc *v;
	uint32_t nv;          /* allocated entries of v */
	struct xa_grant *gr;
	uint32_t ngr, grcap;
};

struct col_xen_acct {
	struct col_xen_acct_cfg cfg;
	struct col_sink sink;
	int started, finished;
	uint64_t tsc0, t0, now;
	struct xa_cpu *cpu;
	uint32_t ncpu_alloc;
	struct xa_vcpu *vc;
	uint32_t nvc, vccap;
	uint32_t *hash;       /* vcpu index + 1; 0 = empty */
	uint32_t hcap;
	uint8_t dom_state[COL_XEN_DOMID_FIRST_RESERVED];
	struct xa_win *ring;
	uint32_t rcap, rhead, rn;
	uint64_t next_idx;    /* window at ring[rhead], the next to emit */
	uint64_t flushed_upto;
	uint32_t *order;      /* emission scratch, vccap entries */
	uint64_t *take;
	struct col_xen_acct_stats st;
};

/* ------------------------------------------------------------- helpers */

static uint64_t tsc_to_ns(const struct col_xen_acct *a, uint64_t tsc)
{
	unsigned __int128 v;

	if (tsc <= a->tsc0)
		return a->t0;
	v = (unsigned __int128)(tsc - a->tsc0) * 1000000u / a->cfg.cpu_khz + a->t0;
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

static uint32_t hash_key(uint32_t domid, uint32_t vcpu)
{
	uint32_t k = domid << 16 | vcpu;

	k ^= k >> 16;
	k *= 0x7feb352du;
	k ^= k >> 15;
	return k;
}

static int vcpu_grow(struct col_xen_acct *a)
{
	uint32_t n = a->vccap ? 2 * a->vccap : 64, i;
	struct xa_vcpu *vc = realloc(a->vc, n * sizeof(*vc));
	uint32_t *order, *hash;
	uint64_t *take;

	if (!vc)
		return RM_ENOMEM;
	a->vc = vc;
	order = realloc(a->order, n * sizeof(*order));
	if (!order)
		return RM_ENOMEM;
	a->order = order;
	take = realloc(a->take, n * sizeof(*take));
	if (!take)
		return RM_ENOMEM;
	a->take = take;
	hash = calloc(2 * n, sizeof(*hash));
	if (!hash)
		return RM_ENOMEM;
	for (i = 0; i < a->nvc; i++) {
		uint32_t h = hash_key(vc[i].domid, vc[i].vcpu) & (2 * n - 1);

		while (hash[h])
			h = (h + 1) & (2 * n - 1);
		hash[h] = i + 1;
	}
	free(a->hash);
	a->hash = hash;
	a->hcap = 2 * n;
	a->vccap = n;
	return RM_OK;
}

/*
 * Index of vCPU (domid, vcpu) in a->vc, creating it; -1 for ids that are not
 * ordinary domains' vCPUs (idle, reserved, out of range). *rv = RM_ENOMEM on
 * allocation failure.
 */
static int32_t vcpu_idx(struct col_xen_acct *a, uint32_t domid, uint32_t vcpu, int *rv)
{
	uint32_t h;

	if (domid >= COL_XEN_DOMID_FIRST_RESERVED || vcpu > 0xffffu)
		return -1;
	if (a->hcap) {
		for (h = hash_key(domid, vcpu) & (a->hcap - 1); a->hash[h]; h = (h + 1) & (a->hcap - 1)) {
			const struct xa_vcpu *v = &a->vc[a->hash[h] - 1];

			if (v->domid == domid && v->vcpu == vcpu)
				return (int32_t)(a->hash[h] - 1);
		}
	}
	if (a->nvc == a->vccap && (*rv = vcpu_grow(a)) != 0)
		return -1;
	memset(&a->vc[a->nvc], 0, sizeof(a->vc[0]));
	a->vc[a->nvc].domid = domid;
	a->vc[a->nvc].vcpu = vcpu;
	for (h = hash_key(domid, vcpu) & (a->hcap - 1); a->hash[h]; h = (h + 1) & (a->hcap - 1))
		;
	a->hash[h] = a->nvc + 1;
	return (int32_t)a->nvc++;
}

static int cpu_get(struct col_xen_acct *a, uint32_t cpu, struct xa_cpu **out)
{
	if (cpu >= COL_XEN_MAX_CPUS)
		return RM_EINVAL;
	if (cpu >= a->ncpu_alloc) {
		uint32_t n = a->ncpu_alloc ? a->ncpu_alloc : 8;
		struct xa_cpu *c;

		while (n <= cpu)
			n *= 2;
		c = realloc(a->cpu, n * sizeof(*c));
		if (!c)
			return RM_ENOMEM;
		memset(c + a->ncpu_alloc, 0, (n - a->ncpu_alloc) * sizeof(*c));
		a->cpu = c;
		a->ncpu_alloc = n;
	}
	*out = &a->cpu[cpu];
	if (!(*out)->present) {
		(*out)->present = 1;
		(*out)->known = 0;
		/* coverage starts at the trace start, or at what is already emitted */
		(*out)->since = a->started ? (a->t0 > a->flushed_upto ? a->t0 : a->flushed_upto) : 0;
		a->st.ncpu++;
	}
	return RM_OK;
}

/* ------------------------------------------------------------- windows */

static void win_reset(struct xa_win *w, uint64_t idx)
{
	w->idx = idx;
	w->busy = w->idle = w->lost = w->unseg = w->cap = w->gr_total = 0;
	if (w->nv)
		memset(w->v, 0, w->nv * sizeof(*w->v));
	w->ngr = 0;
}

/* The pending window of index idx (>= next_idx), created if needed. */
static int win_get(struct col_xen_acct *a, uint64_t idx, struct xa_win **out)
{
	uint64_t off;

	if (idx < a->next_idx) { /* would break the emitted totals: never happens */
		rm_log_error("xen accounting: charge to emitted window %llu (next %llu)", (unsigned long long)idx,
			     (unsigned long long)a->next_idx);
		return RM_ESTATE;
	}
	off = idx - a->next_idx;
	if (off >= XA_MAX_PENDING) {
		rm_log_error("xen accounting: trace time jumps %llu windows ahead of the oldest pending one",
			     (unsigned long long)off);
		return RM_EFULL;
	}
	if (off >= a->rn) {
		if (off >= a->rcap) {
			uint32_t n = a->rcap ? a->rcap : 16, i;
			struct xa_win *r;

			while (n <= off)
				n *= 2;
			r = calloc(n, sizeof(*r));
			if (!r)
				return RM_ENOMEM;
			for (i = 0; i < a->rcap; i++)
				r[i] = a->ring[(a->rhead + i) % a->rcap];
			free(a->ring);
			a->ring = r;
			a->rcap = n;
			a->rhead = 0;
		}
		while (a->rn <= off) {
			win_reset(&a->ring[(a->rhead + a->rn) % a->rcap], a->next_idx + a->rn);
			a->rn++;
		}
	}
	*out = &a->ring[(a->rhead + off) % a->rcap];
	return RM_OK;
}

static int win_vacc(struct col_xen_acct *a, struct xa_win *w, int32_t vidx, struct xa_vacc **out)
{
	if ((uint32_t)vidx >= w->nv) {
		uint32_t n = a->vccap > (uint32_t)vidx ? a->vccap : (uint32_t)vidx + 1;
		struct xa_vacc *v = realloc(w->v, n * sizeof(*v));

		if (!v)
			return RM_ENOMEM;
		memset(v + w->nv, 0, (n - w->nv) * sizeof(*v));
		w->v = v;
		w->nv = n;
	}
	*out = &w->v[vidx];
	return RM_OK;
}

/* Charge [from, to) of kind (vidx for K_CPU/K_RUNQ/K_BLK), split at window edges. */
static int charge(struct col_xen_acct *a, uint64_t from, uint64_t to, int kind, int32_t vidx)
{
	uint64_t W = a->cfg.window_ns;
	int rv;

	while (from < to) {
		uint64_t idx = from / W, end = (idx + 1) * W, d;
		struct xa_win *w;
		struct xa_vacc *v;

		if (end > to || end < from)
			end = to;
		d = end - from;
		if ((rv = win_get(a, idx, &w)) != 0)
			return rv;
		switch (kind) {
		case K_CPU:
			if ((rv = win_vacc(a, w, vidx, &v)) != 0)
				return rv;
			v->cpu += d;
			w->busy += d;
			w->cap += d;
			break;
		case K_IDLE:
			w->idle += d;
			w->cap += d;
			break;
		case K_UNSEG:
			w->unseg += d;
			w->busy += d;
			w->cap += d;
			break;
		case K_LOST:
			w->lost += d;
			w->busy += d;
			w->cap += d;
			a->st.lost_ns += d;
			break;
		case K_RUNQ:
		case K_BLK:
			if ((rv = win_vacc(a, w, vidx, &v)) != 0)
				return rv;
			if (kind == K_RUNQ)
				v->runq += d;
			else
				v->blk += d;
			break;
		}
		from = end;
	}
	return RM_OK;
}

/* Charge CPU time [from, to) to the vCPU (dom, vcpu) by its kind. */
static int charge_run(struct col_xen_acct *a, uint64_t from, uint64_t to, uint32_t dom, uint32_t vcpu)
{
	int32_t vidx;
	int rv = RM_OK;

	if (from >= to)
		return RM_OK;
	if (dom == COL_XEN_DOMID_IDLE)
		return charge(a, from, to, K_IDLE, -1);
	vidx = vcpu_idx(a, dom, vcpu, &rv);
	if (rv != RM_OK)
		return rv;
	if (vidx < 0)
		return charge(a, from, to, K_UNSEG, -1);
	return charge(a, from, to, K_CPU, vidx);
}

/* ----------------------------------------------------------- vCPU state */

/* Move vCPU vidx to state s at T, charging the state it leaves. */
static int vset(struct col_xen_acct *a, int32_t vidx, int s, uint64_t T)
{
	struct xa_vcpu *v = &a->vc[vidx];
	int rv = RM_OK;

	if (v->state == s)
		return RM_OK;
	if (T > v->since) {
		if (v->state == VS_RUNNABLE)
			rv = charge(a, v->since, T, K_RUNQ, vidx);
		else if (v->state == VS_BLOCKED || v->state == VS_OFFLINE)
			rv = charge(a, v->since, T, K_BLK, vidx);
	}
	if (rv != RM_OK)
		return rv;
	if (s != VS_RUNNING)
		v->block_pending = v->sleep_pending = 0;
	v->state = (uint8_t)s;
	v->since = T;
	return RM_OK;
}

/* vCPU index of (dom, vcpu) whose state may be tracked now, or -1. */
static int32_t vcpu_tracked(struct col_xen_acct *a, uint32_t dom, uint32_t vcpu, int running, int *rv)
{
	if (dom >= COL_XEN_DOMID_FIRST_RESERVED)
		return -1;
	if (a->dom_state[dom] == DS_GONE) {
		if (!running)
			return -1; /* late event of a destroyed domain */
		a->dom_state[dom] = DS_ALIVE; /* it runs: the id was reused */
	}
	return vcpu_idx(a, dom, vcpu, rv);
}

static int on_runstate(struct col_xen_acct *a, const struct col_xen_rec *r, uint64_t T)
{
	static const int map[4] = { VS_RUNNING, VS_RUNNABLE, VS_BLOCKED, VS_OFFLINE };
	uint32_t nw = COL_XEN_RUNSTATE_NEW(r->event), old = COL_XEN_RUNSTATE_OLD(r->event);
	int rv = RM_OK;
	int32_t vidx;

	a->st.runstate_events++;
	if (nw > 3 || old > 3) {
		a->st.bad_runstate++;
		return RM_OK;
	}
	vidx = vcpu_tracked(a, r->extra[0] >> 16, r->extra[0] & 0xffffu, nw == COL_XEN_RS_RUNNING, &rv);
	if (vidx < 0)
		return rv;
	return vset(a, vidx, map[nw], T);
}

static int on_wake(struct col_xen_acct *a, uint32_t dom, uint32_t vcpu, uint64_t T)
{
	int rv = RM_OK;
	int32_t vidx = vcpu_tracked(a, dom, vcpu, 0, &rv);

	if (vidx < 0)
		return rv;
	if (a->vc[vidx].state == VS_RUNNING) {
		a->vc[vidx].block_pending = a->vc[vidx].sleep_pending = 0;
		return RM_OK;
	}
	return vset(a, vidx, VS_RUNNABLE, T);
}

static int on_block(struct col_xen_acct *a, uint32_t dom, uint32_t vcpu, uint64_t T)
{
	int rv = RM_OK;
	int32_t vidx = vcpu_tracked(a, dom, vcpu, 1, &rv);

	if (vidx < 0)
		return rv;
	/* a vCPU blocks itself: it is running */
	if ((rv = vset(a, vidx, VS_RUNNING, T)) != 0)
		return rv;
	a->vc[vidx].block_pending = 1;
	return RM_OK;
}

static int on_sleep(struct col_xen_acct *a, uint32_t dom, uint32_t vcpu, uint64_t T)
{
	int rv = RM_OK;
	int32_t vidx = vcpu_tracked(a, dom, vcpu, 0, &rv);

	if (vidx < 0)
		return rv;
	switch (a->vc[vidx].state) {
	case VS_RUNNING:
		a->vc[vidx].sleep_pending = 1;
		return RM_OK;
	case VS_RUNNABLE:
	case VS_UNKNOWN:
		return vset(a, vidx, VS_OFFLINE, T);
	default:
		return RM_OK; /* blocked stays blocked, offline stays offline */
	}
}

static int on_dom_add(struct col_xen_acct *a, uint32_t dom)
{
	if (dom >= COL_XEN_DOMID_FIRST_RESERVED)
		return RM_OK;
	if (a->dom_state[dom] != DS_ALIVE) {
		a->st.dom_created++;
		rm_log_debug("xen domain %u created", dom);
	}
	a->dom_state[dom] = DS_ALIVE;
	return RM_OK;
}

static int on_dom_rem(struct col_xen_acct *a, uint32_t dom, uint64_t T)
{
	uint32_t i;
	int rv;

	if (dom >= COL_XEN_DOMID_FIRST_RESERVED || a->dom_state[dom] == DS_GONE)
		return RM_OK;
	a->st.dom_destroyed++;
	rm_log_debug("xen domain %u destroyed", dom);
	for (i = 0; i < a->nvc; i++) {
		if (a->vc[i].domid != dom)
			continue;
		if ((rv = vset(a, (int32_t)i, VS_UNKNOWN, T)) != 0)
			return rv;
	}
	a->dom_state[dom] = DS_GONE;
	return RM_OK;
}

/* ------------------------------------------------------------ CPU state */

/*
 * The hypervisor says (dom, vcpu) has been running on c until T: charge c's
 * time since its last cut to it (resolving an unknown state).
 */
static int cpu_ran(struct col_xen_acct *a, struct xa_cpu *c, uint32_t dom, uint32_t vcpu, uint64_t T)
{
	if (c->known) {
		if (c->dom != dom || c->vcpu != vcpu)
			a->st.switch_mismatch++;
	} else {
		a->st.resolved_cpus++;
	}
	return charge_run(a, c->since, T, dom, vcpu);
}

static int on_switch(struct col_xen_acct *a, struct xa_cpu *c, const struct col_xen_rec *r, uint64_t T)
{
	uint32_t pd = r->extra[0], pv = r->extra[1], nd = r->extra[2], nv = r->extra[3];
	int rv = RM_OK;
	int32_t vidx;

	a->st.switches++;
	if ((rv = cpu_ran(a, c, pd, pv, T)) != 0)
		return rv;
	c->known = 1;
	c->dom = nd;
	c->vcpu = nv;
	c->since = T;
	if (pd != nd || pv != nv) {
		vidx = vcpu_tracked(a, pd, pv, 0, &rv);
		if (vidx >= 0) {
			struct xa_vcpu *v = &a->vc[vidx];

			if (v->state == VS_RUNNING || v->state == VS_UNKNOWN) {
				int s = v->block_pending ? VS_BLOCKED : v->sleep_pending ? VS_OFFLINE : VS_RUNNABLE;

				if ((rv = vset(a, vidx, s, T)) != 0)
					return rv;
			}
		} else if (rv != RM_OK) {
			return rv;
		}
	}
	vidx = vcpu_tracked(a, nd, nv, 1, &rv);
	if (vidx < 0)
		return rv;
	return vset(a, vidx, VS_RUNNING, T);
}

static int on_continue(struct col_xen_acct *a, struct xa_cpu *c, uint32_t dom, uint32_t vcpu, uint64_t T)
{
	int rv;
	int32_t vidx;

	if (c->known && c->dom == dom && c->vcpu == vcpu)
		return RM_OK;
	if ((rv = cpu_ran(a, c, dom, vcpu, T)) != 0)
		return rv;
	c->known = 1;
	c->dom = dom;
	c->vcpu = vcpu;
	c->since = T;
	rv = RM_OK;
	vidx = vcpu_tracked(a, dom, vcpu, 1, &rv);
	if (vidx < 0)
		return rv;
	return vset(a, vidx, VS_RUNNING, T);
}

static int on_lost(struct col_xen_acct *a, struct xa_cpu *c, const struct col_xen_rec *r, uint64_t T)
{
	uint64_t first = tsc_to_ns(a, (uint64_t)r->extra[2] | (uint64_t)r->extra[3] << 32);
	uint32_t dom = r->extra[1] & 0xffffu, vcpu = r->extra[1] >> 16;
	int rv = RM_OK;
	int32_t vidx;

	if (first < c->since)
		first = c->since;
	if (first > T)
		first = T;
	a->st.lost_spans++;
	a->st.lost_records += r->extra[0];
	if (c->known)
		rv = charge_run(a, c->since, first, c->dom, c->vcpu);
	else
		rv = charge(a, c->since, first, K_LOST, -1);
	if (rv != RM_OK)
		return rv;
	if ((rv = charge(a, first, T, K_LOST, -1)) != 0)
		return rv;
	c->known = 1;
	c->dom = dom;
	c->vcpu = vcpu;
	c->since = T;
	vidx = vcpu_tracked(a, dom, vcpu, 1, &rv);
	if (vidx < 0)
		return rv;
	return vset(a, vidx, VS_RUNNING, T);
}

static int on_grant(struct col_xen_acct *a, struct xa_cpu *c, uint32_t dom, uint64_t T)
{
	struct xa_win *w;
	uint32_t i;
	int rv;

	if (!c->known || c->dom != 0) {
		a->st.grants_other++;
		return RM_OK;
	}
	a->st.grants_dom0++;
	if ((rv = win_get(a, T / a->cfg.window_ns, &w)) != 0)
		return rv;
	w->gr_total++;
	for (i = 0; i < w->ngr; i++) {
		if (w->gr[i].domid == dom) {
			w->gr[i].n++;
			return RM_OK;
		}
	}
	if (w->ngr == w->grcap) {
		uint32_t n = w->grcap ? 2 * w->grcap : 8;
		struct xa_grant *g = realloc(w->gr, n * sizeof(*g));

		if (!g)
			return RM_ENOMEM;
		w->gr = g;
		w->grcap = n;
	}
	w->gr[w->ngr].domid = dom;
	w->gr[w->ngr].n = 1;
	w->gr[w->ngr].share = 0;
	w->ngr++;
	return RM_OK;
}

/* ------------------------------------------------------------- emission */

static int order_cmp(const void *x, const void *y, void *ctx)
{
	const struct xa_vcpu *vc = ctx;
	const struct xa_vcpu *a = &vc[*(const uint32_t *)x], *b = &vc[*(const uint32_t *)y];

	if (a->domid != b->domid)
		return a->domid < b->domid ? -1 : 1;
	return a->vcpu < b->vcpu ? -1 : a->vcpu > b->vcpu;
}

static int grant_cmp(const void *x, const void *y)
{
	const struct xa_grant *a = x, *b = y;

	return a->domid < b->domid ? -1 : a->domid > b->domid;
}

static void part_init(const struct col_xen_acct *a, const struct xa_win *w, struct rm_part *p)
{
	uint64_t ws = w->idx * a->cfg.window_ns, we = ws + a->cfg.window_ns;

	memset(p, 0, sizeof(*p));
	p->win = w->idx;
	p->start_ns = ws > a->t0 ? ws : a->t0;
	p->end_ns = we < a->now ? we : a->now;
	p->flags = RM_PF_DOMAIN;
}

/* Emit window w (all its time is final). */
static int win_emit(struct col_xen_acct *a, struct xa_win *w)
{
	uint64_t sum = 0, parts = 0;
	uint32_t n = 0, i, j;
	struct rm_part p;
	int rv;

	for (i = 0; i < w->nv && i < a->nvc; i++)
		if (w->v[i].cpu || w->v[i].runq || w->v[i].blk)
			a->order[n++] = i;
	if (n > 1)
		qsort_r(a->order, n, sizeof(*a->order), order_cmp, a->vc);
	for (i = 0; i < n; i++)
		a->take[i] = 0;
	if (a->cfg.dom0_charging && w->gr_total > 0) {
		if (w->ngr > 1)
			qsort(w->gr, w->ngr, sizeof(*w->gr), grant_cmp);
		for (j = 0; j < w->ngr; j++)
			w->gr[j].share = 0;
		for (i = 0; i < n && a->vc[a->order[i]].domid == 0; i++) {
			uint64_t d = w->v[a->order[i]].cpu;

			for (j = 0; j < w->ngr; j++) {
				uint64_t s;

				if (w->gr[j].domid == 0 || w->gr[j].domid >= COL_XEN_DOMID_FIRST_RESERVED)
					continue;
				s = (uint64_t)((unsigned __int128)d * w->gr[j].n / w->gr_total);
				a->take[i] += s;
				w->gr[j].share += s;
			}
		}
	}
	for (i = 0; i < n; i++) {
		const struct xa_vcpu *v = &a->vc[a->order[i]];
		const struct xa_vacc *acc = &w->v[a->order[i]];

		part_init(a, w, &p);
		p.domid = v->domid;
		p.vcpu = v->vcpu;
		p.seg_id = COL_XEN_SEG_BASE | (uint64_t)v->domid << 16 | v->vcpu;
		p.cpu_ns = acc->cpu - a->take[i];
		p.runq_ns = acc->runq;
		p.blocked_ns = acc->blk;
		snprintf((char *)p.comm, sizeof(p.comm), "d%uv%u", v->domid, v->vcpu);
		if (!p.cpu_ns && !p.runq_ns && !p.blocked_ns)
			continue;
		if ((rv = a->sink.part(a->sink.arg, &p)) != 0)
			return rv;
		sum += p.cpu_ns;
		parts++;
	}
	if (a->cfg.dom0_charging) {
		for (j = 0; j < w->ngr; j++) {
			if (!w->gr[j].share)
				continue;
			part_init(a, w, &p);
			p.flags |= RM_PF_DRIVER;
			p.domid = w->gr[j].domid;
			p.seg_id = COL_XEN_SEG_BASE | COL_XEN_SEG_DRIVER | (uint64_t)w->gr[j].domid << 16;
			p.cpu_ns = w->gr[j].share;
			snprintf((char *)p.comm, sizeof(p.comm), "d%u-io", w->gr[j].domid);
			if ((rv = a->sink.part(a->sink.arg, &p)) != 0)
				return rv;
			sum += p.cpu_ns;
			parts++;
			a->st.driver_parts++;
		}
	}
	if (sum + w->lost + w->unseg != w->busy || w->busy + w->idle != w->cap) {
		rm_log_error("xen accounting: window %llu does not add up: parts %llu + lost %llu + unseg %llu, "
			     "busy %llu, idle %llu, capacity %llu", (unsigned long long)w->idx,
			     (unsigned long long)sum, (unsigned long long)w->lost, (unsigned long long)w->unseg,
			     (unsigned long long)w->busy, (unsigned long long)w->idle, (unsigned long long)w->cap);
		return RM_ESTATE;
	}
	a->st.parts += parts;
	if (w->cap > 0 || parts > 0) {
		struct rm_totals cw;

		memset(&cw, 0, sizeof(cw));
		cw.win = w->idx;
		cw.busy_ns = w->busy;
		cw.unseg_cpu_ns = w->unseg;
		cw.lost_ns = w->lost;
		cw.capacity_ns = w->cap;
		cw.idle_ns = w->idle;
		if ((rv = a->sink.window(a->sink.arg, &cw)) != 0)
			return rv;
		a->st.windows++;
	}
	return RM_OK;
}

/* Charge every known CPU and every timed vCPU state up to T. */
static int advance_to(struct col_xen_acct *a, uint64_t T)
{
	uint32_t i;
	int rv;

	for (i = 0; i < a->ncpu_alloc; i++) {
		struct xa_cpu *c = &a->cpu[i];

		if (!c->present || !c->known || c->since >= T)
			continue;
		if ((rv = charge_run(a, c->since, T, c->dom, c->vcpu)) != 0)
			return rv;
		c->since = T;
	}
	for (i = 0; i < a->nvc; i++) {
		struct xa_vcpu *v = &a->vc[i];
		int kind;

		if (v->since >= T)
			continue;
		if (v->state == VS_RUNNABLE)
			kind = K_RUNQ;
		else if (v->state == VS_BLOCKED || v->state == VS_OFFLINE)
			kind = K_BLK;
		else
			continue;
		if ((rv = charge(a, v->since, T, kind, (int32_t)i)) != 0)
			return rv;
		v->since = T;
	}
	return RM_OK;
}

/* Emit the window next_idx (whose time must be final) and move on. */
static int emit_next(struct col_xen_acct *a)
{
	int rv = RM_OK;

	if (a->rn > 0) {
		struct xa_win *w = &a->ring[a->rhead];

		rv = win_emit(a, w);
		a->rhead = (a->rhead + 1) % a->rcap;
		a->rn--;
	}
	a->next_idx++;
	a->flushed_upto = a->next_idx * a->cfg.window_ns;
	return rv;
}

/* Emit every window whose end every CPU has passed. */
static int flush(struct col_xen_acct *a)
{
	uint64_t W = a->cfg.window_ns;
	int rv;

	while ((a->next_idx + 1) * W <= a->now) {
		uint64_t mark = a->now, wend = (a->next_idx + 1) * W;
		uint32_t i;

		if (a->cfg.hold_ns && a->now > a->cfg.hold_ns) {
			uint64_t limit = a->now - a->cfg.hold_ns;

			for (i = 0; i < a->ncpu_alloc; i++) {
				struct xa_cpu *c = &a->cpu[i];

				if (c->present && !c->known && c->since < limit) {
					a->st.unresolved_ns += limit - c->since;
					c->since = limit;
				}
			}
		}
		for (i = 0; i < a->ncpu_alloc; i++)
			if (a->cpu[i].present && !a->cpu[i].known && a->cpu[i].since < mark)
				mark = a->cpu[i].since;
		if (wend > mark)
			return RM_OK;
		if ((rv = advance_to(a, wend)) != 0)
			return rv;
		if ((rv = emit_next(a)) != 0)
			return rv;
	}
	return RM_OK;
}

/* ------------------------------------------------------------------ API */

int col_xen_acct_open(const struct col_xen_acct_cfg *cfg, const struct col_sink *sink, struct col_xen_acct **out)
{
	struct col_xen_acct *a;

	if (!cfg || !sink || !out || !sink->part || !sink->window || cfg->window_ns == 0 || cfg->cpu_khz == 0 ||
	    cfg->epoch_offset_ns < 0)
		return RM_EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return RM_ENOMEM;
	a->cfg = *cfg;
	a->sink = *sink;
	*out = a;
	return RM_OK;
}

void col_xen_acct_free(struct col_xen_acct *a)
{
	uint32_t i;

	if (!a)
		return;
	for (i = 0; i < a->rcap; i++) {
		free(a->ring[i].v);
		free(a->ring[i].gr);
	}
	free(a->ring);
	free(a->cpu);
	free(a->vc);
	free(a->hash);
	free(a->order);
	free(a->take);
	free(a);
}

int col_xen_acct_add_cpu(struct col_xen_acct *a, uint32_t cpu)
{
	struct xa_cpu *c;

	return cpu_get(a, cpu, &c);
}

static void start(struct col_xen_acct *a, uint64_t tsc)
{
	uint32_t i;

	a->tsc0 = a->cfg.tsc0 ? a->cfg.tsc0 : tsc;
	a->t0 = (uint64_t)a->cfg.epoch_offset_ns;
	a->now = a->t0;
	a->next_idx = a->t0 / a->cfg.window_ns;
	a->flushed_upto = a->t0;
	for (i = 0; i < a->ncpu_alloc; i++)
		if (a->cpu[i].present)
			a->cpu[i].since = a->t0;
	a->st.first_ns = a->t0;
	a->started = 1;
}

int col_xen_acct_feed(struct col_xen_acct *a, const struct col_xen_rec *r)
{
	struct xa_cpu *c;
	uint64_t T;
	int min, rv;

	if (a->finished)
		return RM_ESTATE;
	a->st.records++;
	if (!a->started) {
		if (!r->has_tsc) {
			a->st.ignored++;
			return RM_OK;
		}
		start(a, r->tsc);
	}
	if ((rv = cpu_get(a, r->cpu, &c)) != 0)
		return rv;
	T = tsc_to_ns(a, r->tsc);
	if (T < a->now) {
		if (r->has_tsc)
			a->st.late_records++;
		T = a->now;
	}
	a->now = T;
	a->st.last_ns = T;
	min = col_xen_event_min_extra(r->event);
	if (min < 0)
		return flush(a);
	if (r->nextra < (uint32_t)min) {
		a->st.ignored++;
		return flush(a);
	}
	if (T < c->since) /* a CPU added late, or a record older than its CPU's cut */
		T = c->since;
	if ((r->event & COL_XEN_RUNSTATE_MASK) == COL_XEN_TRC_RUNSTATE_CHANGE) {
		rv = on_runstate(a, r, T);
	} else {
		switch (r->event) {
		case COL_XEN_TRC_SCHED_SWITCH:
			rv = on_switch(a, c, r, T);
			break;
		case COL_XEN_TRC_SCHED_SWITCH_INFCONT:
			rv = on_continue(a, c, r->extra[0], r->extra[1], T);
			break;
		case COL_XEN_TRC_CONTINUE_RUNNING:
			rv = on_continue(a, c, r->extra[0] >> 16, r->extra[0] & 0xffffu, T);
			break;
		case COL_XEN_TRC_SCHED_WAKE:
			rv = on_wake(a, r->extra[0], r->extra[1], T);
			break;
		case COL_XEN_TRC_SCHED_BLOCK:
			rv = on_block(a, r->extra[0], r->extra[1], T);
			break;
		case COL_XEN_TRC_SCHED_SLEEP:
			rv = on_sleep(a, r->extra[0], r->extra[1], T);
			break;
		case COL_XEN_TRC_SCHED_DOM_ADD:
		case COL_XEN_TRC_DOM0_DOM_ADD:
			rv = on_dom_add(a, r->extra[0]);
			break;
		case COL_XEN_TRC_SCHED_DOM_REM:
		case COL_XEN_TRC_DOM0_DOM_REM:
			rv = on_dom_rem(a, r->extra[0], T);
			break;
		case COL_XEN_TRC_MEM_GRANT_MAP:
		case COL_XEN_TRC_MEM_GRANT_UNMAP:
		case COL_XEN_TRC_MEM_GRANT_TRANSFER:
			rv = on_grant(a, c, r->extra[0] & 0xffffu, T);
			break;
		case COL_XEN_TRC_LOST_RECORDS:
			rv = on_lost(a, c, r, T);
			break;
		default:
			rv = RM_OK; /* INFPREV: calibration only */
			break;
		}
	}
	if (rv != RM_OK)
		return rv;
	return flush(a);
}

int col_xen_acct_finish(struct col_xen_acct *a)
{
	uint32_t i;
	int rv;

	if (a->finished)
		return RM_ESTATE;
	a->finished = 1;
	if (!a->started)
		return RM_OK;
	if ((rv = flush(a)) != 0)
		return rv;
	if ((rv = advance_to(a, a->now)) != 0)
		return rv;
	for (i = 0; i < a->ncpu_alloc; i++) {
		struct xa_cpu *c = &a->cpu[i];

		if (c->present && !c->known && c->since < a->now) {
			a->st.unresolved_ns += a->now - c->since;
			c->since = a->now;
		}
	}
	while (a->rn > 0)
		if ((rv = emit_next(a)) != 0)
			return rv;
	return RM_OK;
}

const struct col_xen_acct_stats *col_xen_acct_stats(const struct col_xen_acct *a)
{
	return &a->st;
}

/* ---------------------------------------------------------- calibration */

#define XC_MAX_SAMPLES (1u << 20)

struct xc_sample {
	uint64_t tsc;
	uint32_t ns;
	double ratio;
};

struct col_xen_calib {
	uint64_t *last;
	uint8_t *have;
	uint32_t ncpu;
	struct xc_sample *s;
	uint32_t n, cap;
};

int col_xen_calib_open(struct col_xen_calib **out)
{
	if (!out)
		return RM_EINVAL;
	*out = calloc(1, sizeof(**out));
	return *out ? RM_OK : RM_ENOMEM;
}

void col_xen_calib_free(struct col_xen_calib *c)
{
	if (!c)
		return;
	free(c->last);
	free(c->have);
	free(c->s);
	free(c);
}

int col_xen_calib_feed(struct col_xen_calib *c, const struct col_xen_rec *r)
{
	if (r->cpu >= COL_XEN_MAX_CPUS)
		return RM_EINVAL;
	if (r->cpu >= c->ncpu) {
		uint32_t n = c->ncpu ? c->ncpu : 8;
		uint64_t *last;
		uint8_t *have;

		while (n <= r->cpu)
			n *= 2;
		last = realloc(c->last, n * sizeof(*last));
		if (!last)
			return RM_ENOMEM;
		c->last = last;
		have = realloc(c->have, n);
		if (!have)
			return RM_ENOMEM;
		c->have = have;
		memset(c->last + c->ncpu, 0, (n - c->ncpu) * sizeof(*last));
		memset(c->have + c->ncpu, 0, n - c->ncpu);
		c->ncpu = n;
	}
	if (r->event == COL_XEN_TRC_LOST_RECORDS) {
		c->have[r->cpu] = 0;
		return RM_OK;
	}
	if (r->event != COL_XEN_TRC_SCHED_SWITCH_INFPREV || r->nextra < 3 || !r->has_tsc)
		return RM_OK;
	if (c->have[r->cpu] && r->extra[2] > 0 && r->tsc > c->last[r->cpu] && c->n < XC_MAX_SAMPLES) {
		if (c->n == c->cap) {
			uint32_t n = c->cap ? 2 * c->cap : 1024;
			struct xc_sample *s = realloc(c->s, n * sizeof(*s));

			if (!s)
				return RM_ENOMEM;
			c->s = s;
			c->cap = n;
		}
		c->s[c->n].tsc = r->tsc - c->last[r->cpu];
		c->s[c->n].ns = r->extra[2];
		c->s[c->n].ratio = (double)c->s[c->n].tsc / (double)r->extra[2];
		c->n++;
	}
	c->last[r->cpu] = r->tsc;
	c->have[r->cpu] = 1;
	return RM_OK;
}

static int ratio_cmp(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

int col_xen_calib_result(const struct col_xen_calib *c, uint64_t *khz, uint64_t *slices)
{
	unsigned __int128 sum_tsc = 0, sum_ns = 0;
	uint64_t used = 0, k;
	double *r, med;
	uint32_t i;

	if (slices)
		*slices = 0;
	if (c->n < 8)
		return RM_ENOENT;
	r = malloc(c->n * sizeof(*r));
	if (!r)
		return RM_ENOMEM;
	for (i = 0; i < c->n; i++)
		r[i] = c->s[i].ratio;
	qsort(r, c->n, sizeof(*r), ratio_cmp);
	med = r[c->n / 2];
	free(r);
	/* Slices near the median: drops runtimes that wrapped their 32-bit field
	 * (idle slices over 4.29 s) and the odd slice cut by a missed record. */
	for (i = 0; i < c->n; i++) {
		if (c->s[i].ratio < med * 0.9 || c->s[i].ratio > med * 1.1)
			continue;
		sum_tsc += c->s[i].tsc;
		sum_ns += c->s[i].ns;
		used++;
	}
	if (used < 8 || sum_ns < 1000000)
		return RM_ENOENT;
	k = (uint64_t)((sum_tsc * 1000000u + sum_ns / 2) / sum_ns);
	if (k < 10000 || k > 100000000)
		return RM_ENOENT;
	*khz = k;
	if (slices)
		*slices = used;
	return RM_OK;
}
