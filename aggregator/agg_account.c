/*
 * agg_account.c - applies attributed charges, split counts, held-part
 * changes and window totals to storage (through agg_store.h), one
 * transaction per collector batch or expiry pass (see agg_account.h). Owns
 * the in-memory sums of the open transaction.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "agg_account.h"
#include "agg_gomem.h"
#include "agg_restart.h"
#include "rm_err.h"
#include "banned.h"

enum agg_kind {
	AGG_K_CE = 1, AGG_K_REASON, AGG_K_SPLIT, AGG_K_EST,
	AGG_K_REQ,   /* the runtime rule's only */
	AGG_K_GO_CE, /* the Go label rule's only: a Go part's CPU charged to a CE (key), by cookie */
	AGG_K_GO_V,  /* the same charged to a V reason (key) */
	AGG_K_GO_SPLIT_CE, /* what the label rule charged a CE (key) of the Go pool, for the window's memory */
	AGG_K_GO_SPLIT_V,  /* the same for a V reason */
	AGG_K_GO_DONE,     /* the label rule split this window in this transaction (no key) */
};

struct agg_sum {
	int kind;             /* 0 = free slot */
	const char *node;
	uint64_t window_ns, win;
	const char *key;      /* CE or reason; NULL for splits */
	uint64_t cookie;      /* AGG_K_GO_*: the parts' socket cookie; else 0 */
	uint64_t v[ST_R_COUNT]; /* splits: the count in v[0]; est: requests, rt, rx; go: CPU in v[0] */
};

/* The Go label rule's memory of one open window of one node: its Go parts' charges committed so far. */
struct agg_go_ent {
	uint64_t cookie;      /* 0: the split's own charges (no parts) */
	const char *key;      /* a CE or a V reason (agg_go_key: never freed before the accountant) */
	int is_ce;
	uint64_t parts;       /* CPU of its Go parts there (the cookie's weights among destinations) */
	uint64_t charged;     /* Go CPU charged there: the parts' own, or the split's in their place */
	uint64_t split;       /* of charged, the split's own (cookie 0 only) */
};
struct agg_go_win {
	char *node;           /* owned; NULL = free slot */
	uint64_t window_ns, win;
	size_t n;
	struct agg_go_ent e[AGG_GO_WIN_ENTS];
};

/* What the runtime rule remembers of one window of one node: the CEs each process served (agg_rt_*). */
struct agg_rt_ce {
	char *ce;             /* owned */
	uint32_t pid;         /* the runtime's process (0: not said) */
	int go;               /* the process runs Go (its parts carry RM_PF_GO) */
	uint64_t cpu, req;    /* CPU charged to it by runtime threads' parts, requests they answered */
};
struct agg_rt_win {
	char *node;           /* owned; NULL = free slot */
	uint64_t window_ns, win;
	size_t n;
	struct agg_rt_ce ce[AGG_RT_CES];
};

struct agg_account {
	struct agg_store st;    /* copied */
	struct agg_sum *tab;   /* open addressing, cap a power of two */
	size_t cap, n;
	int open;              /* a transaction is open */
	int is_batch;
	struct agg_batch_meta m;
	uint64_t nch, nsplit;  /* of the open transaction */
	struct agg_account_stats stats;
	agg_account_observer obs; /* told what each commit wrote */
	void *obs_arg;
	int rt_off;            /* the runtime rule is off (agg_account_set_runtime) */
	unsigned rt_req_pm;    /* its weight: per mille by requests, the rest by CPU */
	unsigned rt_go_req_pm; /* the same for Go programs' CPU */
	unsigned rt_go_lab_req_pm; /* ... and for what their labels left unlabelled */
	struct agg_rt_win rt[AGG_RT_WINS]; /* the CEs of recent (node, window)s */
	uint64_t rt_charged, rt_left; /* of the open transaction: CPU the rule charged, left in V 'runtime' */
	int go_off;            /* the Go label rule is off (agg_account_set_go_labels) */
	uint64_t go_late;      /* this transaction's Go CPU resolved after its window's split, charged as it */
	struct agg_gomem *go_mem;  /* AGG_GO_COOKIES cookies' latest destinations */
	struct agg_go_win *go_win; /* [AGG_GO_WINS]: recent windows' committed Go charges */
	char **go_keys;        /* the memories' CEs and reasons, each once (agg_go_key) */
	size_t ngo_keys;
	uint64_t go_wins, go_lab, go_unlab, go_fold; /* of the open transaction (stats) */
	int go_seg_off;        /* counts by segment are not used (agg_account_set_go_label_segments) */
	uint64_t go_seg_wins, go_seg_sampled, go_seg_parts; /* of the open transaction (stats) */
};

int agg_account_open(struct agg_account **out, const struct agg_store *store)
{
	struct agg_account *a;

	*out = NULL;
	if (!store || !store->begin || !store->commit || !store->rollback || !store->peer_get || !store->peer_set ||
	    !store->add_usage || !store->add_unacct || !store->add_total || !store->add_split ||
	    !store->add_est_input || !store->held_put || !store->held_resolve || !store->held_delete ||
	    !store->held_load || !store->node_seen || !store->window_sums)
		return RM_EINVAL;
	if (!(a = calloc(1, sizeof(*a))))
		return RM_ENOMEM;
	if (agg_gomem_open(&a->go_mem, AGG_GO_COOKIES) != RM_OK ||
	    !(a->go_win = calloc(AGG_GO_WINS, sizeof(*a->go_win)))) {
		agg_gomem_close(a->go_mem);
		free(a);
		return RM_ENOMEM;
	}
	a->st = *store;
	a->rt_req_pm = AGG_RT_REQ_PM_DEFAULT;
	a->rt_go_req_pm = AGG_RT_GO_REQ_PM_DEFAULT;
	a->rt_go_lab_req_pm = AGG_RT_GO_LAB_REQ_PM_DEFAULT;
	a->go_seg_off = 1; /* labels alone unless asked (agg_account_set_go_label_segments) */
	*out = a;
	return RM_OK;
}

/* Frees what slot w holds and marks it free. */
static void agg_rt_clear(struct agg_rt_win *w)
{
	size_t i;

	for (i = 0; i < w->n; i++)
		free(w->ce[i].ce);
	free(w->node);
	memset(w, 0, sizeof(*w));
}

/* Frees what window slot w holds and marks it free. */
static void agg_go_win_clear(struct agg_go_win *w)
{
	free(w->node);
	memset(w, 0, sizeof(*w));
}

void agg_account_close(struct agg_account *a)
{
	size_t i;

	if (!a)
		return;
	agg_account_abort(a);
	for (i = 0; i < AGG_RT_WINS; i++)
		agg_rt_clear(&a->rt[i]);
	for (i = 0; i < AGG_GO_WINS; i++)
		agg_go_win_clear(&a->go_win[i]);
	for (i = 0; i < a->ngo_keys; i++)
		free(a->go_keys[i]);
	free(a->go_keys);
	agg_gomem_close(a->go_mem);
	free(a->go_win);
	free(a->tab);
	free(a);
}

void agg_account_set_go_label_segments(struct agg_account *a, int on)
{
	a->go_seg_off = !on;
}

void agg_account_set_go_labels(struct agg_account *a, int on)
{
	a->go_off = !on;
}

int agg_account_set_runtime(struct agg_account *a, int on, unsigned req_permille, unsigned go_permille,
			    unsigned go_lab_permille)
{
	if (req_permille > 1000 || go_permille > 1000 || go_lab_permille > 1000)
		return RM_EINVAL;
	a->rt_off = !on;
	a->rt_req_pm = req_permille;
	a->rt_go_req_pm = go_permille;
	a->rt_go_lab_req_pm = go_lab_permille;
	return RM_OK;
}

static uint64_t agg_str_hash(uint64_t h, const char *s)
{
	while (s && *s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ULL;
	return h;
}

static uint64_t agg_hash(const struct agg_sum *k)
{
	uint64_t h = (k->win * 0x9e3779b97f4a7c15ULL) ^ (k->window_ns * 31) ^ (uint64_t)k->kind ^
		     (k->cookie * 0xff51afd7ed558ccdULL);

	return agg_str_hash(agg_str_hash(h, k->node) * 0x9e3779b97f4a7c15ULL, k->key);
}

static int agg_sum_eq(const struct agg_sum *a, const struct agg_sum *b)
{
	return a->kind == b->kind && a->win == b->win && a->window_ns == b->window_ns && a->cookie == b->cookie &&
	       strcmp(a->node, b->node) == 0 && (!a->key || strcmp(a->key, b->key) == 0);
}

static int agg_sum_grow(struct agg_account *a)
{
	size_t ncap = a->cap ? a->cap * 2 : 256, i;
	struct agg_sum *nt = calloc(ncap, sizeof(*nt));

	if (!nt)
		return RM_ENOMEM;
	for (i = 0; i < a->cap; i++) {
		struct agg_sum *e = &a->tab[i];
		size_t j;

		if (!e->kind)
			continue;
		j = agg_hash(e) & (ncap - 1);
		while (nt[j].kind)
			j = (j + 1) & (ncap - 1);
		nt[j] = *e;
	}
	free(a->tab);
	a->tab = nt;
	a->cap = ncap;
	return RM_OK;
}

/* The sum of key k, created (zero) if missing. */
static int agg_sum_get(struct agg_account *a, const struct agg_sum *k, struct agg_sum **out)
{
	size_t j;
	int rv;

	if ((a->n + 1) * 2 > a->cap && (rv = agg_sum_grow(a)) != 0)
		return rv;
	j = agg_hash(k) & (a->cap - 1);
	while (a->tab[j].kind && !agg_sum_eq(&a->tab[j], k))
		j = (j + 1) & (a->cap - 1);
	if (!a->tab[j].kind) {
		a->tab[j] = *k;
		memset(a->tab[j].v, 0, sizeof(a->tab[j].v));
		a->n++;
	}
	*out = &a->tab[j];
	return RM_OK;
}

/* Node and window length of a charge: its own, else the batch's. */
static int agg_origin(const struct agg_account *a, const char *node, uint64_t window_ns, struct agg_sum *k)
{
	k->node = node ? node : (a->is_batch ? a->m.node : NULL);
	k->window_ns = window_ns ? window_ns : (a->is_batch ? a->m.window_ns : 0);
	return k->node && k->window_ns ? RM_OK : RM_EINVAL;
}

int agg_account_add(struct agg_account *a, const struct agg_charge *c)
{
	struct agg_sum k = { 0 }, *e;
	int r, rv;

	if (!a->open)
		return RM_ESTATE;
	if (!c->ce && !c->reason)
		return RM_EINVAL;
	if ((rv = agg_origin(a, c->node, c->window_ns, &k)) != 0)
		return rv;
	k.kind = c->ce ? AGG_K_CE : AGG_K_REASON;
	k.key = c->ce ? c->ce : c->reason;
	k.win = c->win;
	if ((rv = agg_sum_get(a, &k, &e)) != 0)
		return rv;
	for (r = 0; r < ST_R_COUNT; r++)
		e->v[r] += c->v[r];
	a->nch++;
	return RM_OK;
}

int agg_account_add_split(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win)
{
	struct agg_sum k = { 0 }, *e;
	int rv;

	if (!a->open)
		return RM_ESTATE;
	if ((rv = agg_origin(a, node, window_ns, &k)) != 0)
		return rv;
	k.kind = AGG_K_SPLIT;
	k.win = win;
	if ((rv = agg_sum_get(a, &k, &e)) != 0)
		return rv;
	e->v[0]++;
	a->nsplit++;
	return RM_OK;
}

/* The open transaction's sum of kind for CE ce (and cookie) of (node, window_ns, win) (agg_origin), made if missing. */
static int agg_ce_sum(struct agg_account *a, int kind, const char *node, uint64_t window_ns, uint64_t win,
		      const char *ce, uint64_t cookie, struct agg_sum **out)
{
	struct agg_sum k = { 0 };
	int rv;

	if (!a->open)
		return RM_ESTATE;
	if (!ce)
		return RM_EINVAL;
	if ((rv = agg_origin(a, node, window_ns, &k)) != 0)
		return rv;
	k.kind = kind;
	k.key = ce;
	k.win = win;
	k.cookie = cookie;
	return agg_sum_get(a, &k, out);
}

int agg_account_add_est(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win, const char *ce,
			uint64_t requests, uint64_t rt_ns, uint64_t rx)
{
	struct agg_sum *e;
	int rv;

	if ((rv = agg_ce_sum(a, AGG_K_EST, node, window_ns, win, ce, 0, &e)) != 0)
		return rv;
	/* saturate: storage refuses sums above INT64_MAX with a clear error */
	e->v[0] = e->v[0] + requests < e->v[0] ? UINT64_MAX : e->v[0] + requests;
	e->v[1] = e->v[1] + rt_ns < e->v[1] ? UINT64_MAX : e->v[1] + rt_ns;
	e->v[2] = e->v[2] + rx < e->v[2] ? UINT64_MAX : e->v[2] + rx;
	return RM_OK;
}

int agg_account_add_req(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win, const char *ce,
			uint32_t pid, int go, uint64_t requests, uint64_t cpu_ns)
{
	struct agg_sum *e;
	int rv;

	if (a->open && ce && (a->rt_off || (!requests && !cpu_ns)))
		return RM_OK;
	/* keyed by the process too: the label rule's rest goes by its own process's weights */
	if ((rv = agg_ce_sum(a, AGG_K_REQ, node, window_ns, win, ce, pid, &e)) != 0)
		return rv;
	e->v[0] = e->v[0] + requests < e->v[0] ? UINT64_MAX : e->v[0] + requests;
	e->v[1] = e->v[1] + cpu_ns < e->v[1] ? UINT64_MAX : e->v[1] + cpu_ns;
	if (go)
		e->v[2] = 1; /* a Go program's weight */
	return RM_OK;
}

int agg_account_add_go(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win, uint64_t cookie,
		       const char *ce, const char *reason, uint64_t cpu_ns)
{
	struct agg_sum k = { 0 }, *e;
	int rv;

	if (!a->open)
		return RM_ESTATE;
	if (!ce && !reason)
		return RM_EINVAL;
	if (a->go_off || !cpu_ns)
		return RM_OK;
	if ((rv = agg_origin(a, node, window_ns, &k)) != 0)
		return rv;
	k.kind = ce ? AGG_K_GO_CE : AGG_K_GO_V;
	k.key = ce ? ce : reason;
	k.win = win;
	k.cookie = cookie;
	if ((rv = agg_sum_get(a, &k, &e)) != 0)
		return rv;
	e->v[0] = e->v[0] + cpu_ns < e->v[0] ? UINT64_MAX : e->v[0] + cpu_ns;
	return RM_OK;
}

static struct agg_go_win *agg_go_win_find(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win);

/* Charges amt ns of CPU of charge c's node and window to CE ce (nothing for 0). As agg_account_add. */
static int agg_go_late_put(struct agg_account *a, const struct agg_charge *c, const char *ce, uint64_t amt)
{
	struct agg_charge part = { .win = c->win, .ce = ce, .node = c->node, .window_ns = c->window_ns };

	if (!amt)
		return RM_OK;
	part.v[ST_R_CPU] = amt;
	return agg_account_add(a, &part);
}

int agg_account_add_go_late(struct agg_account *a, const struct agg_charge *c, int *taken)
{
	const char *node = c->node ? c->node : a->m.node;
	uint64_t window_ns = c->window_ns ? c->window_ns : a->m.window_ns;
	uint64_t cpu = c->v[ST_R_CPU], sum = 0, given = 0;
	const struct agg_go_win *w;
	struct agg_charge part;
	size_t i, big = SIZE_MAX;
	int r, rv, rest = 0;

	*taken = 0;
	if (!a->open)
		return RM_ESTATE;
	if (a->go_off || !cpu || !node || !(w = agg_go_win_find(a, node, window_ns, c->win)))
		return RM_OK;
	/* the split's own charges to CEs: committed, so the split came in an earlier transaction */
	for (i = 0; i < w->n; i++) {
		if (w->e[i].cookie || !w->e[i].is_ce || !w->e[i].split)
			continue;
		if (sum + w->e[i].split < sum)
			return RM_OK; /* hostile sums: left as the part says */
		sum += w->e[i].split;
		if (big == SIZE_MAX || w->e[i].split > w->e[big].split)
			big = i;
	}
	if (!sum)
		return RM_OK;
	for (r = 0; r < ST_R_COUNT; r++)
		rest |= r != ST_R_CPU && c->v[r];
	if (rest) { /* bytes stay where the part went */
		part = *c;
		part.v[ST_R_CPU] = 0;
		if ((rv = agg_account_add(a, &part)) != 0)
			return rv;
	}
	for (i = 0; i < w->n; i++) {
		uint64_t amt;

		if (w->e[i].cookie || !w->e[i].is_ce || !w->e[i].split || i == big)
			continue;
		amt = (uint64_t)((unsigned __int128)cpu * w->e[i].split / sum);
		given += amt;
		if ((rv = agg_go_late_put(a, c, w->e[i].key, amt)) != 0)
			return rv;
	}
	/* the roundings' remainder to the largest */
	if ((rv = agg_go_late_put(a, c, w->e[big].key, cpu - given)) != 0)
		return rv;
	a->go_late += cpu;
	*taken = 1;
	return RM_OK;
}

static int agg_win_start(uint64_t window_ns, uint64_t win, int64_t *start)
{
	if (window_ns == 0 || window_ns > (uint64_t)INT64_MAX || win > (uint64_t)INT64_MAX / window_ns ||
	    win * window_ns > (uint64_t)INT64_MAX - window_ns)
		return RM_EINVAL;
	*start = (int64_t)(win * window_ns);
	return RM_OK;
}

/* A window's node totals (U) by resource (ST_R_*). */
static void agg_totals_of(const struct rm_totals *t, uint64_t v[ST_R_COUNT])
{
	v[ST_R_CPU] = t->busy_ns;
	v[ST_R_NET_RX] = t->rx_bytes;
	v[ST_R_NET_TX] = t->tx_bytes;
	v[ST_R_DISK_READ] = t->disk_read;
	v[ST_R_DISK_WRITE] = t->disk_write;
}

/*
 * A restarted collector's totals t (t->restart windows ending with t->win)
 * over what storage holds before this batch (agg_restart.h): each window
 * balanced, the rest as V 'collector_restart' in the last one.
 */
static int agg_write_restart(struct agg_account *a, const struct rm_totals *t)
{
	const struct agg_batch_meta *m = &a->m;
	uint64_t n = t->restart < AGG_RESTART_MAX_WINS ? t->restart : AGG_RESTART_MAX_WINS;
	uint64_t lump[ST_R_COUNT], short_by[ST_R_COUNT], first, j;
	struct agg_restart_win *w;
	struct agg_restart_add *add;
	int64_t start, len = (int64_t)m->window_ns;
	int r, rv = RM_OK;

	if (n > t->win)
		n = t->win;
	if (t->restart > n)
		rm_log_warn("node '%s': restart totals for %" PRIu64 " windows up to %" PRIu64 "; only the last %"
			    PRIu64 " are balanced", m->node, t->restart, t->win, n);
	first = t->win - n + 1;
	w = calloc(n, sizeof(*w));
	add = calloc(n, sizeof(*add));
	if (!w || !add) {
		free(w);
		free(add);
		return RM_ENOMEM;
	}
	for (j = 0; j < n && rv == RM_OK; j++)
		if ((rv = agg_win_start(m->window_ns, first + j, &start)) == RM_OK)
			rv = a->st.window_sums(a->st.arg, m->node, start, len, w[j].total, w[j].charged,
					       &w[j].has_total);
	if (rv == RM_OK) {
		agg_totals_of(t, lump);
		agg_restart_split(lump, w, n, add, short_by);
	}
	for (j = 0; j < n && rv == RM_OK; j++) {
		uint64_t cap = j == n - 1 ? t->capacity_ns : 0;

		agg_win_start(m->window_ns, first + j, &start);
		for (r = 0; r < ST_R_COUNT && rv == RM_OK; r++) {
			uint64_t c = r == ST_R_CPU ? cap : 0;

			if (add[j].total[r] || c) {
				rv = a->st.add_total(a->st.arg, m->node, start, len, r, add[j].total[r], c);
				a->stats.rows_written++;
			}
			if (rv == RM_OK && add[j].v[r])
				rv = a->st.add_unacct(a->st.arg, m->node, start, len, r, AGG_REASON_COLLECTOR_RESTART,
						      add[j].v[r]);
		}
	}
	for (r = 0; r < ST_R_COUNT && rv == RM_OK; r++)
		if (short_by[r])
			rm_log_warn("node '%s' windows %" PRIu64 "..%" PRIu64 ": the restarted collector measured %"
				    PRIu64 " less of resource %d than the stored parts hold; balanced on the parts",
				    m->node, first, t->win, short_by[r], r);
	free(w);
	free(add);
	return rv;
}

/* The remembered window (node, window_ns, win), or NULL. */
static struct agg_rt_win *agg_rt_find(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win)
{
	size_t i;

	for (i = 0; i < AGG_RT_WINS; i++)
		if (a->rt[i].node && a->rt[i].win == win && a->rt[i].window_ns == window_ns && !strcmp(a->rt[i].node, node))
			return &a->rt[i];
	return NULL;
}

/* One CE's inputs to the runtime rule's weight in a window. */
struct agg_rt_w {
	const char *ce; /* borrowed */
	uint64_t cpu, req;
};

/* The runtime rule's weights to gather: those of one process (its pid), or of every process of the node
   (AGG_RT_ANY_PID), of its Go programs (AGG_RT_ANY_GO) or of its other runtimes (AGG_RT_ANY_OTHER). */
#define AGG_RT_ANY_PID UINT64_MAX
#define AGG_RT_ANY_GO (UINT64_MAX - 1)
#define AGG_RT_ANY_OTHER (UINT64_MAX - 2)

/* Does a process's weight (pid, go) count for selector sel? */
static int agg_rt_sel(uint64_t sel, uint64_t pid, int go)
{
	switch (sel) {
	case AGG_RT_ANY_PID:
		return 1;
	case AGG_RT_ANY_GO:
		return go;
	case AGG_RT_ANY_OTHER:
		return !go;
	default:
		return pid == sel;
	}
}

/* Adds (ce, cpu, req) to ws[0..*n), merged by CE; CEs past AGG_RT_CES are left out. */
static void agg_rt_put(struct agg_rt_w *ws, size_t *n, const char *ce, uint64_t cpu, uint64_t req)
{
	size_t i;

	for (i = 0; i < *n && strcmp(ws[i].ce, ce); i++)
		;
	if (i == *n) {
		if (*n == AGG_RT_CES)
			return;
		ws[i].ce = ce;
		ws[i].cpu = ws[i].req = 0;
		(*n)++;
	}
	ws[i].cpu += cpu;
	ws[i].req += req;
}

/*
 * The CEs the batch's node's runtime threads served in window win - those
 * of the processes selector pid names (agg_rt_sel) - as far as this accountant
 * knows (agg_account_add_req): the CPU charged to them and the requests
 * answered, remembered from earlier batches and in this one. Returns how
 * many (into ws, AGG_RT_CES at most).
 */
static size_t agg_rt_gather(struct agg_account *a, uint64_t win, uint64_t pid, struct agg_rt_w *ws)
{
	const struct agg_rt_win *rw = agg_rt_find(a, a->m.node, a->m.window_ns, win);
	size_t i, n = 0;

	for (i = 0; rw && i < rw->n; i++)
		if (agg_rt_sel(pid, rw->ce[i].pid, rw->ce[i].go))
			agg_rt_put(ws, &n, rw->ce[i].ce, rw->ce[i].cpu, rw->ce[i].req);
	for (i = 0; i < a->cap; i++) {
		const struct agg_sum *e = &a->tab[i];

		if (e->kind == AGG_K_REQ && e->win == win && e->window_ns == a->m.window_ns &&
		    agg_rt_sel(pid, e->cookie, e->v[2] != 0) && !strcmp(e->node, a->m.node))
			agg_rt_put(ws, &n, e->key, e->v[1], e->v[0]);
	}
	return n;
}

/* The CEs of window win, else of the window before (agg_rt_gather). */
static size_t agg_rt_gather2(struct agg_account *a, uint64_t win, uint64_t pid, struct agg_rt_w *ws)
{
	size_t n = agg_rt_gather(a, win, pid, ws);

	return n || !win ? n : agg_rt_gather(a, win - 1, pid, ws);
}

/*
 * The runtime rule: charges rt ns of the batch's node's CPU in window win
 * to the CEs ws[0..n), each by its weight - req_pm per mille by its share
 * of the requests, the rest by its share of the CPU charged (all by one of
 * them when the other sums to 0) - into this transaction's sums. Exact:
 * the amounts sum to rt (the rounding's remainder goes to the CE of the
 * largest weight). Adds rt to *charged, or nothing if no CE has a weight.
 */
static int agg_rt_charge(struct agg_account *a, uint64_t win, uint64_t rt, unsigned req_pm, const struct agg_rt_w *ws,
			 size_t n, uint64_t *charged)
{
	double wt[AGG_RT_CES], wsum = 0, cpu = 0, req = 0, fr = req_pm / 1000.0;
	uint64_t amt[AGG_RT_CES], given = 0;
	size_t i, big = 0;
	int rv;

	if (!rt)
		return RM_OK;
	for (i = 0; i < n; i++) {
		cpu += (double)ws[i].cpu;
		req += (double)ws[i].req;
	}
	if (req == 0)
		fr = 0;
	else if (cpu == 0)
		fr = 1;
	for (i = 0; i < n; i++) {
		wt[i] = (req > 0 ? fr * (double)ws[i].req / req : 0) + (cpu > 0 ? (1 - fr) * (double)ws[i].cpu / cpu : 0);
		wsum += wt[i];
		if (wt[i] > wt[big])
			big = i;
	}
	if (!n || wsum <= 0)
		return RM_OK;
	for (i = 0; i < n; i++) {
		double x = (double)rt * wt[i] / wsum;

		amt[i] = x >= (double)(rt - given) ? rt - given : (uint64_t)x;
		given += amt[i];
	}
	amt[big] += rt - given;
	for (i = 0; i < n; i++) {
		struct agg_sum k = { 0 }, *e;

		if (!amt[i])
			continue;
		k.kind = AGG_K_CE;
		k.node = a->m.node;
		k.window_ns = a->m.window_ns;
		k.win = win;
		k.key = ws[i].ce;
		if ((rv = agg_sum_get(a, &k, &e)) != 0)
			return rv;
		e->v[ST_R_CPU] += amt[i];
	}
	*charged += rt;
	return RM_OK;
}

/* ---- the Go label rule ---- */

/* Where a share of the pool may go: a Go part's destination and its CPU there, by cookie. */
struct agg_go_dest {
	uint64_t cookie;
	const char *key; /* borrowed: a CE or a V reason */
	int is_ce;
	uint64_t cpu;    /* the weight among the cookie's destinations (> 0) */
	uint64_t part;   /* the CPU of the window's Go parts it holds (0: a remembered cookie's destination) */
	uint64_t amt;    /* out: what it is charged of the pool */
	uint64_t share;  /* agg_go_split's scratch: the cookie's share, at its first destination */
};

/* The samples of cookie in counts g[0..ng) by label (*lab) and by segment (*seg); 0 if it has none. */
static void agg_go_counts_of(const struct rm_golabel *g, size_t ng, uint64_t cookie, uint64_t *lab, uint64_t *seg)
{
	size_t i;

	*lab = *seg = 0;
	for (i = 0; i < ng; i++)
		if (g[i].cookie == cookie) {
			*lab = g[i].samples;
			*seg = g[i].seg;
			return;
		}
}

/*
 * Do counts g[0..ng) say where each sample's thread was (by segment) as
 * well as its goroutine's label? Both marginals then sum to the same
 * nonzero total (a collector that does not count segments sends seg 0).
 */
static int agg_go_has_seg(const struct rm_golabel *g, size_t ng)
{
	unsigned __int128 lab = 0, seg = 0;
	size_t i;

	for (i = 0; i < ng; i++) {
		lab += g[i].samples;
		seg += g[i].seg;
	}
	return seg && lab == seg;
}

/*
 * The Go label rule's split, pure: whole ns of CPU by the window's counts
 * g[0..ng) into the destinations d[0..nd) (d[].amt), by cookie. all is the
 * count of samples; each stands for whole / all ns.
 *
 * By labels alone (seg 0): a cookie's share is whole x its samples / all
 * (rounded down).
 *
 * Corrected by segments (seg nonzero: the caller found that the counts
 * carry them, agg_go_has_seg): a
 * cookie's share is the exact CPU of its parts (d[].part), plus the
 * samples labelled with it that ran in another segment, less the samples
 * of its segments that ran other labels' goroutines: whole x (samples -
 * seg samples) / all added to the parts' CPU, at least 0. Both estimate
 * the CPU of the cookie's goroutines; this one samples only where
 * segments and labels differ, so its error is that of the disagreeing
 * samples, not of them all. If the shares sum past whole (sampling noise)
 * they are scaled down to it.
 *
 * A share goes to the cookie's destinations by their cpu (the rounding's
 * remainder to the one of most CPU). Cookies 0 and RM_GO_IDLE, cookies
 * without a destination and every rounding's rest are unlabelled. Returns
 * what is unlabelled: whole - the sum of d[].amt. Exact for any input:
 * 128-bit arithmetic, sums saturating at UINT64_MAX (counts that sum past
 * it are treated as that many; rm_totals_check keeps real ones far below).
 */
static int agg_go_dest_cmp(const void *x, const void *y)
{
	uint64_t a = ((const struct agg_go_dest *)x)->cookie, b = ((const struct agg_go_dest *)y)->cookie;

	return a < b ? -1 : a > b;
}

static uint64_t agg_go_split(uint64_t whole, const struct rm_golabel *g, size_t ng, struct agg_go_dest *d, size_t nd,
			     int seg)
{
	uint64_t all = 0, given = 0;
	unsigned __int128 sum = 0;
	size_t i, j, k, end;

	for (j = 0; j < nd; j++)
		d[j].amt = d[j].share = 0;
	for (i = 0; i < ng; i++)
		all = all + g[i].samples < all ? UINT64_MAX : all + g[i].samples;
	if (!all || !whole)
		return whole;
	/* a cookie's destinations side by side (n log n: a window may hold many connections) */
	qsort(d, nd, sizeof(*d), agg_go_dest_cmp);
	/* each cookie's share, at its first destination */
	for (j = 0; j < nd; j = end) {
		unsigned __int128 part = 0, w = 0;
		uint64_t lab, sg;

		for (end = j; end < nd && d[end].cookie == d[j].cookie; end++) {
			part += d[end].part;
			w += d[end].cpu;
		}
		if (!d[j].cookie || d[j].cookie == RM_GO_IDLE || !w)
			continue;
		agg_go_counts_of(g, ng, d[j].cookie, &lab, &sg);
		if (lab > all)
			lab = all;
		if (!seg) {
			d[j].share = (uint64_t)((unsigned __int128)whole * lab / all);
		} else {
			/* each term at most whole: no overflow */
			__int128 x = (__int128)(part < whole ? part : whole) +
				     (__int128)((unsigned __int128)whole * lab / all) -
				     (__int128)((unsigned __int128)whole * (sg < all ? sg : all) / all);

			d[j].share = x <= 0 ? 0 : x > (__int128)whole ? whole : (uint64_t)x;
		}
		sum += d[j].share;
	}
	/* ... to its destinations by their cpu, the rounding's rest to the one of most */
	for (j = 0; j < nd; j = end) {
		uint64_t share = d[j].share, w = 0, out = 0, x;
		size_t big = j;

		for (end = j; end < nd && d[end].cookie == d[j].cookie; end++)
			;
		if (!share)
			continue;
		if (sum > whole)
			share = (uint64_t)((unsigned __int128)share * whole / sum);
		if (share > whole - given)
			share = whole - given; /* only when the counts saturated */
		for (k = j; k < end; k++) {
			w = w + d[k].cpu < w ? UINT64_MAX : w + d[k].cpu;
			if (d[k].cpu > d[big].cpu)
				big = k;
		}
		for (k = j; k < end && w; k++) {
			x = (uint64_t)((unsigned __int128)share * (d[k].cpu < w ? d[k].cpu : w) / w);
			if (x > share - out)
				x = share - out;
			d[k].amt += x;
			out += x;
		}
		d[big].amt += share - out;
		given += share;
	}
	return whole - given;
}

/*
 * For the statistics of a window whose counts carry samples by segment:
 * the CPU the samples put in segments received on a socket (whole x those
 * samples / all) and what the parts of those segments hold, which agree
 * when the sampler reads the segments as the collector charges them.
 */
static void agg_go_seg_stats(struct agg_account *a, uint64_t whole, const struct rm_golabel *g, size_t ng,
			     const struct agg_go_dest *d, size_t nd)
{
	unsigned __int128 all = 0, in = 0;
	uint64_t parts = 0;
	size_t i;

	for (i = 0; i < ng; i++) {
		all += g[i].samples;
		if (g[i].cookie && g[i].cookie != RM_GO_IDLE)
			in += g[i].seg;
	}
	for (i = 0; i < nd; i++)
		if (d[i].cookie && d[i].cookie != RM_GO_IDLE)
			parts = parts + d[i].part < parts ? UINT64_MAX : parts + d[i].part;
	if (!all)
		return;
	a->go_seg_wins++;
	a->go_seg_sampled += (uint64_t)((unsigned __int128)whole * in / all);
	a->go_seg_parts += parts;
}

/*
 * The memories' copy of a CE or reason name: made once, freed with the
 * accountant (the names are the configuration's CEs and the V reasons, a
 * few; a sum of the open transaction may borrow one, so none may go while
 * the memories forget entries). NULL past AGG_GO_KEYS or out of memory.
 */
static const char *agg_go_key(struct agg_account *a, const char *key)
{
	char **nk;
	size_t i;

	for (i = 0; i < a->ngo_keys; i++)
		if (!strcmp(a->go_keys[i], key))
			return a->go_keys[i];
	if (a->ngo_keys == AGG_GO_KEYS || !(nk = realloc(a->go_keys, (a->ngo_keys + 1) * sizeof(*nk))))
		return NULL;
	a->go_keys = nk;
	if (!(nk[a->ngo_keys] = strdup(key)))
		return NULL;
	return nk[a->ngo_keys++];
}

/*
 * After a commit: remembers, per node and cookie, where this transaction's
 * Go parts of its latest window went (the destination of most CPU), for
 * counts of later windows whose cookie has no part in them. Least recently
 * used cookies are forgotten first. Best effort: out of memory, one is left out.
 */
/* The remembered window (node, window_ns, win) of the Go label rule, or NULL. */
static struct agg_go_win *agg_go_win_find(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win)
{
	size_t i;

	for (i = 0; i < AGG_GO_WINS; i++)
		if (a->go_win[i].node && a->go_win[i].win == win && a->go_win[i].window_ns == window_ns &&
		    !strcmp(a->go_win[i].node, node))
			return &a->go_win[i];
	return NULL;
}

/* The transaction's sum of kind for (node, window_ns, win) and key (NULL: none), or NULL; never adds one. */
static const struct agg_sum *agg_sum_find(const struct agg_account *a, int kind, const char *node, uint64_t window_ns,
					  uint64_t win, const char *key)
{
	struct agg_sum k = { 0 };
	size_t j;

	if (!a->cap)
		return NULL;
	k.kind = kind;
	k.node = node;
	k.window_ns = window_ns;
	k.win = win;
	k.key = key;
	for (j = agg_hash(&k) & (a->cap - 1); a->tab[j].kind; j = (j + 1) & (a->cap - 1))
		if (agg_sum_eq(&a->tab[j], &k))
			return &a->tab[j];
	return NULL;
}

/* The window slot of (node, window_ns, win): found, free, or the oldest one cleared. NULL: out of memory. */
static struct agg_go_win *agg_go_win_slot(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win)
{
	struct agg_go_win *w = agg_go_win_find(a, node, window_ns, win), *old = &a->go_win[0];
	size_t i;

	if (w)
		return w;
	for (i = 0; i < AGG_GO_WINS && a->go_win[i].node; i++)
		if (a->go_win[i].win < old->win)
			old = &a->go_win[i];
	w = i < AGG_GO_WINS ? &a->go_win[i] : old;
	agg_go_win_clear(w);
	if (!(w->node = strdup(node)))
		return NULL;
	w->window_ns = window_ns;
	w->win = win;
	return w;
}

/* Adds parts and charged to the entry (cookie, key, is_ce) of window w, made if missing (best effort). */
static void agg_go_win_add(struct agg_account *a, struct agg_go_win *w, uint64_t cookie, const char *key, int is_ce,
			   uint64_t parts, uint64_t charged)
{
	size_t i;

	for (i = 0; i < w->n; i++)
		if (w->e[i].cookie == cookie && w->e[i].is_ce == is_ce && !strcmp(w->e[i].key, key))
			break;
	if (i == w->n) {
		if (w->n == AGG_GO_WIN_ENTS || !(w->e[i].key = agg_go_key(a, key)))
			return; /* not remembered: a later split of the window knows less of what it holds */
		w->e[i].cookie = cookie;
		w->e[i].is_ce = is_ce;
		w->e[i].parts = w->e[i].charged = w->e[i].split = 0;
		w->n++;
	}
	w->e[i].parts = w->e[i].parts + parts < parts ? UINT64_MAX : w->e[i].parts + parts;
	w->e[i].charged = w->e[i].charged + charged < charged ? UINT64_MAX : w->e[i].charged + charged;
}

/* Adds v to the split's own charge of the cookie-0 entry (key, is_ce) of window w, if remembered. */
static void agg_go_win_split(struct agg_go_win *w, const char *key, int is_ce, uint64_t v)
{
	size_t i;

	for (i = 0; i < w->n; i++)
		if (!w->e[i].cookie && w->e[i].is_ce == is_ce && !strcmp(w->e[i].key, key)) {
			w->e[i].split = w->e[i].split + v < v ? UINT64_MAX : w->e[i].split + v;
			return;
		}
}

/*
 * After a commit: remembers, per window of the batch's node, the Go parts'
 * charges the transaction committed (their own, or where the split put
 * them instead), for a later split of the same window.
 */
static void agg_go_remember_wins(struct agg_account *a)
{
	size_t i;

	if (!a->is_batch || a->go_off)
		return;
	for (i = 0; i < a->cap; i++) {
		const struct agg_sum *e = &a->tab[i];
		struct agg_go_win *w;
		int split;

		if (e->kind != AGG_K_GO_CE && e->kind != AGG_K_GO_V && e->kind != AGG_K_GO_SPLIT_CE &&
		    e->kind != AGG_K_GO_SPLIT_V)
			continue;
		if (e->window_ns != a->m.window_ns || strcmp(e->node, a->m.node) ||
		    !(w = agg_go_win_slot(a, e->node, e->window_ns, e->win)))
			continue;
		if (e->kind == AGG_K_GO_SPLIT_CE || e->kind == AGG_K_GO_SPLIT_V) {
			agg_go_win_add(a, w, 0, e->key, e->kind == AGG_K_GO_SPLIT_CE, 0, e->v[0]);
			agg_go_win_split(w, e->key, e->kind == AGG_K_GO_SPLIT_CE, e->v[0]);
			continue;
		}
		split = agg_sum_find(a, AGG_K_GO_DONE, e->node, e->window_ns, e->win, NULL) != NULL;
		agg_go_win_add(a, w, e->cookie, e->key, e->kind == AGG_K_GO_CE, e->v[0], split ? 0 : e->v[0]);
	}
}

static void agg_go_remember(struct agg_account *a)
{
	size_t i;

	if (a->go_off)
		return;
	agg_go_remember_wins(a);
	for (i = 0; i < a->cap; i++) {
		const struct agg_sum *e = &a->tab[i];
		struct agg_gomem_val *m;
		const char *key;

		if ((e->kind != AGG_K_GO_CE && e->kind != AGG_K_GO_V) || !e->cookie || e->cookie == RM_GO_IDLE)
			continue;
		if ((m = agg_gomem_find(a->go_mem, e->node, e->cookie)) &&
		    (e->win < m->win || (e->win == m->win && e->v[0] <= m->cpu)))
			continue; /* it knows a later window, or more CPU in this one */
		if (!(key = agg_go_key(a, e->key)))
			continue;
		if (m)
			agg_gomem_touch(a->go_mem, m); /* found above: no second lookup */
		else if (!(m = agg_gomem_put(a->go_mem, e->node, e->cookie)))
			continue;
		m->key = key;
		m->is_ce = e->kind == AGG_K_GO_CE;
		m->win = e->win;
		m->cpu = e->v[0];
	}
}

/* Adds v ns of CPU to the open transaction's charge of the batch's node in win to key (a CE or a V reason). */
static int agg_go_charge(struct agg_account *a, uint64_t win, const char *key, int is_ce, uint64_t v)
{
	struct agg_sum k = { 0 }, *e;
	int rv;

	if (!v)
		return RM_OK;
	k.kind = is_ce ? AGG_K_CE : AGG_K_REASON;
	k.node = a->m.node;
	k.window_ns = a->m.window_ns;
	k.win = win;
	k.key = key;
	if ((rv = agg_sum_get(a, &k, &e)) != 0)
		return rv;
	e->v[ST_R_CPU] += v;
	return RM_OK;
}

/* One destination of the window's Go CPU: the split's target, what it holds, what it gets now. */
struct agg_go_tgt {
	const char *key; /* borrowed */
	int is_ce;
	uint64_t target, old, amt;
};

/* The target of (key, is_ce) in t[0..*n) (cap at most), added if missing; NULL past cap. */
static struct agg_go_tgt *agg_go_tgt(struct agg_go_tgt *t, size_t *n, size_t cap, const char *key, int is_ce)
{
	size_t i;

	for (i = 0; i < *n; i++)
		if (t[i].is_ce == is_ce && !strcmp(t[i].key, key))
			return &t[i];
	if (*n == cap)
		return NULL;
	memset(&t[*n], 0, sizeof(t[*n]));
	t[*n].key = key;
	t[*n].is_ce = is_ce;
	return &t[(*n)++];
}

/*
 * What the pool gives each destination, pure: the targets t[0..nt) of the
 * window's whole Go CPU, each holding t[].old already (charged by earlier
 * batches, which storage cannot take back), and the unlabelled target
 * (the runtime rule's, holding nothing). Each gets pool x its shortfall /
 * all shortfalls, rounded down, into t[].amt; returns the unlabelled
 * share, the roundings' rest included. The shortfalls sum to at least the
 * pool (the targets sum to pool + the olds), so nobody gets more than it
 * is short of; with nothing old each gets its target.
 */
static uint64_t agg_go_fill(uint64_t pool, struct agg_go_tgt *t, size_t nt, uint64_t unlab_target)
{
	unsigned __int128 all = unlab_target;
	uint64_t given = 0;
	size_t i;

	for (i = 0; i < nt; i++)
		all += t[i].target > t[i].old ? t[i].target - t[i].old : 0;
	for (i = 0; i < nt; i++) {
		uint64_t want = t[i].target > t[i].old ? t[i].target - t[i].old : 0;

		t[i].amt = all ? (uint64_t)((unsigned __int128)pool * want / all) : 0;
		if (t[i].amt > pool - given)
			t[i].amt = pool - given;
		given += t[i].amt;
	}
	return pool - given;
}

/* What the label rule leaves unlabelled of one process: the runtime rule charges it to that process's CEs. */
struct agg_go_rest {
	uint64_t pid; /* AGG_RT_ANY_GO: the counts did not say (pid 0), or the roundings' rest */
	uint64_t ns;
};

/*
 * Pure: unlab ns, what the label rule left unlabelled of a window, split
 * between the processes whose samples it stands for - by count g[i] that
 * went to no destination: cookie 0, RM_GO_IDLE, or a cookie that none of
 * d[0..nd) holds with CPU - into r[] (room for ng + 1; at most one entry
 * per process; a process not said, pid 0, as AGG_RT_ANY_GO). Each gets
 * unlab x its samples / all such samples, rounded down, the rest to the
 * one of most; with no such samples (only roundings are left) all of it is
 * AGG_RT_ANY_GO's. The amounts sum to unlab exactly. Returns how many.
 */
static size_t agg_go_rest_split(uint64_t unlab, const struct rm_golabel *g, size_t ng, const struct agg_go_dest *d,
				size_t nd, struct agg_go_rest *r)
{
	unsigned __int128 all = 0;
	uint64_t w[RM_GO_LABELS_MAX + 1], given = 0;
	size_t i, j, n = 0, big = 0;

	if (!unlab)
		return 0;
	for (i = 0; i < ng && i < RM_GO_LABELS_MAX; i++) {
		uint64_t pid = g[i].pid ? g[i].pid : AGG_RT_ANY_GO;

		if (!g[i].samples)
			continue;
		if (g[i].cookie && g[i].cookie != RM_GO_IDLE) {
			for (j = 0; j < nd && !(d[j].cookie == g[i].cookie && d[j].cpu); j++)
				;
			if (j < nd)
				continue; /* labelled: charged by its destinations */
		}
		for (j = 0; j < n && r[j].pid != pid; j++)
			;
		if (j == n) {
			r[n].pid = pid;
			r[n].ns = 0;
			w[n++] = 0;
		}
		w[j] = w[j] + g[i].samples < w[j] ? UINT64_MAX : w[j] + g[i].samples;
		all += g[i].samples;
	}
	if (!all) {
		r[0].pid = AGG_RT_ANY_GO;
		r[0].ns = unlab;
		return 1;
	}
	for (j = 0; j < n; j++) {
		r[j].ns = (uint64_t)((unsigned __int128)unlab * w[j] / all);
		given += r[j].ns;
		if (w[j] > w[big])
			big = j;
	}
	r[big].ns += unlab - given;
	return n;
}

/*
 * Pure: unlab ns, what the label rule left unlabelled of a window whose
 * whole Go CPU is whole, split between the processes the counts g[0..ng)
 * name by what each is still owed: a process's part of whole is whole x its
 * samples / all samples (the collector calibrates each process's samples to
 * its own CPU); what its labelled destinations hold of the window (their
 * olds and what the pool gave them, tg[0..ntg), shared between processes
 * by their labelled targets d[0..nd)) is taken off; each gets unlab x what
 * it is still owed / what all are, rounded down, the rest to the one owed
 * most. So a process whose own parts were charged before the split (past
 * the collector's bound) is not owed them again, and what another left
 * unlabelled does not land on its tenants. Nobody owed anything (a window
 * the olds overfill): agg_go_rest_split's weights. Into r[] (room for ng +
 * 1); the amounts sum to unlab exactly. Returns how many.
 */
static size_t agg_go_rest_by_pid(uint64_t unlab, uint64_t whole, const struct rm_golabel *g, size_t ng,
				 const struct agg_go_dest *d, size_t nd, const struct agg_go_tgt *tg, size_t ntg,
				 struct agg_go_rest *r)
{
	double all = 0, owed[RM_GO_LABELS_MAX + 1], sum = 0;
	uint64_t given = 0;
	size_t i, j, k, n = 0, big = 0;

	if (!unlab)
		return 0;
	if (ng > RM_GO_LABELS_MAX)
		ng = RM_GO_LABELS_MAX;
	/* each process's part of the whole */
	for (i = 0; i < ng; i++) {
		uint64_t pid = g[i].pid ? g[i].pid : AGG_RT_ANY_GO;

		for (j = 0; j < n && r[j].pid != pid; j++)
			;
		if (j == n) {
			r[n].pid = pid;
			r[n].ns = 0;
			owed[n++] = 0;
		}
		owed[j] += (double)g[i].samples;
		all += (double)g[i].samples;
	}
	for (j = 0; j < n && all > 0; j++)
		owed[j] = (double)whole * owed[j] / all;
	/* ... less what its labelled destinations hold */
	for (i = 0; i < nd && all > 0; i++) {
		uint64_t pid = AGG_RT_ANY_GO;

		if (!d[i].amt)
			continue;
		for (k = 0; k < ng && g[k].cookie != d[i].cookie; k++)
			;
		if (k < ng && g[k].pid)
			pid = g[k].pid;
		for (j = 0; j < n && r[j].pid != pid; j++)
			;
		for (k = 0; k < ntg && !(tg[k].is_ce == d[i].is_ce && !strcmp(tg[k].key, d[i].key)); k++)
			;
		if (j == n || k == ntg || !tg[k].target)
			continue;
		owed[j] -= ((double)tg[k].old + (double)tg[k].amt) * (double)d[i].amt / (double)tg[k].target;
	}
	for (j = 0; j < n; j++) {
		if (owed[j] < 0)
			owed[j] = 0;
		sum += owed[j];
		if (owed[j] > owed[big])
			big = j;
	}
	if (!(sum > 0))
		return agg_go_rest_split(unlab, g, ng, d, nd, r);
	for (j = 0; j < n; j++) {
		double x = (double)unlab * owed[j] / sum;

		r[j].ns = x >= (double)(unlab - given) ? unlab - given : (uint64_t)x;
		given += r[j].ns;
	}
	r[big].ns += unlab - given;
	return n;
}

/*
 * The Go label rule on window totals t of the batch's node (counts given,
 * the rule on): takes the CPU this transaction charged for the window's Go
 * parts out of their charges, adds go ns (its unseg_go_ns): the pool. The
 * split's targets are of the window's whole Go CPU - the pool and what
 * earlier batches charged for its Go parts (remembered, AGG_GO_WINS
 * windows) - by the counts (agg_go_split, each cookie's parts in this
 * batch or earlier ones, else the cookie memory); the pool fills the
 * destinations' shortfalls (agg_go_fill). Into *unlab what is left for
 * the runtime rule, and into rest[0..*nrest) (room for RM_GO_LABELS_MAX +
 * 1) the same by process (agg_go_rest_by_pid). RM_OK or RM_ENOMEM.
 */
static int agg_go_apply(struct agg_account *a, const struct rm_totals *t, uint64_t go, uint64_t *unlab,
			struct agg_go_rest *rest, size_t *nrest)
{
	const struct agg_go_win *gw = agg_go_win_find(a, a->m.node, a->m.window_ns, t->win);
	struct agg_go_dest *d;
	struct agg_go_tgt *tg;
	uint64_t pool = go, old = 0, whole, unlab_target;
	size_t i, j, nd = 0, ntg = 0, cap = 0, ng;
	int has_seg;
	struct agg_sum k = { 0 }, *c;
	int rv = RM_OK;

	for (i = 0; i < a->cap; i++) {
		const struct agg_sum *e = &a->tab[i];

		if ((e->kind == AGG_K_GO_CE || e->kind == AGG_K_GO_V) && e->win == t->win &&
		    e->window_ns == a->m.window_ns && !strcmp(e->node, a->m.node))
			cap++;
	}
	cap += t->n_go + (gw ? gw->n : 0) + 1;
	d = calloc(cap, sizeof(*d));
	tg = calloc(cap, sizeof(*tg));
	if (!d || !tg) {
		rv = RM_ENOMEM;
		goto out;
	}
	/* this transaction's Go parts of the window (gathered first: taking them out may grow the sums) */
	for (i = 0; i < a->cap; i++) {
		const struct agg_sum *e = &a->tab[i];

		if ((e->kind != AGG_K_GO_CE && e->kind != AGG_K_GO_V) || e->win != t->win ||
		    e->window_ns != a->m.window_ns || strcmp(e->node, a->m.node))
			continue;
		d[nd].cookie = e->cookie;
		d[nd].key = e->key;
		d[nd].is_ce = e->kind == AGG_K_GO_CE;
		d[nd++].cpu = e->v[0];
	}
	/* ... out of their charges, into the pool */
	for (j = 0; j < nd; j++) {
		uint64_t x;

		memset(&k, 0, sizeof(k));
		k.kind = d[j].is_ce ? AGG_K_CE : AGG_K_REASON;
		k.node = a->m.node;
		k.window_ns = a->m.window_ns;
		k.win = t->win;
		k.key = d[j].key;
		if ((rv = agg_sum_get(a, &k, &c)) != 0)
			goto out;
		/* never more than was charged there (a caller's mistake would show as a smaller pool),
		   nor past what the pool can hold (hostile sums: the rest keeps its charge) */
		x = d[j].cpu < c->v[ST_R_CPU] ? d[j].cpu : c->v[ST_R_CPU];
		if (pool + x < pool)
			x = 0;
		c->v[ST_R_CPU] -= x;
		pool += x;
		d[j].cpu = d[j].part = x;
	}
	/* what earlier batches charged for the window's Go parts: the cookies' weights, the destinations' olds */
	for (i = 0; gw && i < gw->n; i++) {
		const struct agg_go_ent *e = &gw->e[i];
		struct agg_go_tgt *g;

		if (old + e->charged < old)
			break; /* hostile sums: the rest is not known to be there */
		if ((g = agg_go_tgt(tg, &ntg, cap, e->key, e->is_ce)))
			g->old += e->charged;
		old += e->charged;
		if (!e->cookie || !e->parts)
			continue;
		for (j = 0; j < nd && !(d[j].cookie == e->cookie && d[j].is_ce == e->is_ce && !strcmp(d[j].key, e->key));
		     j++)
			;
		if (j == nd) {
			d[nd].cookie = e->cookie;
			d[nd].key = e->key;
			d[nd].is_ce = e->is_ce;
			d[nd++].cpu = 0;
		}
		d[j].cpu = d[j].cpu + e->parts < d[j].cpu ? UINT64_MAX : d[j].cpu + e->parts;
		d[j].part = d[j].part + e->parts < d[j].part ? UINT64_MAX : d[j].part + e->parts;
	}
	/* labelled cookies without a part in the window: where their parts went last */
	for (i = 0; i < t->n_go && i < RM_GO_LABELS_MAX; i++) {
		const struct agg_gomem_val *m;
		uint64_t ck = t->go[i].cookie;

		if (!ck || ck == RM_GO_IDLE)
			continue;
		for (j = 0; j < nd && !(d[j].cookie == ck && d[j].cpu); j++)
			;
		if (j < nd || !(m = agg_gomem_find(a->go_mem, a->m.node, ck)))
			continue;
		d[nd].cookie = ck;
		d[nd].key = m->key;
		d[nd].is_ce = m->is_ce;
		d[nd++].cpu = 1;
	}
	/* the split of the window's whole Go CPU, then what the pool can give of it */
	whole = pool + old < pool ? pool : pool + old;
	if (whole == pool)
		for (i = 0; i < ntg; i++)
			tg[i].old = 0;
	ng = t->n_go < RM_GO_LABELS_MAX ? t->n_go : RM_GO_LABELS_MAX;
	has_seg = agg_go_has_seg(t->go, ng);
	unlab_target = agg_go_split(whole, t->go, ng, d, nd, has_seg && !a->go_seg_off);
	for (j = 0; j < nd; j++) {
		struct agg_go_tgt *g = agg_go_tgt(tg, &ntg, cap, d[j].key, d[j].is_ce);

		if (g)
			g->target += d[j].amt;
		else
			unlab_target += d[j].amt; /* cannot happen: cap counts every destination */
	}
	*unlab = agg_go_fill(pool, tg, ntg, unlab_target);
	*nrest = agg_go_rest_by_pid(*unlab, whole, t->go, ng, d, nd, tg, ntg, rest);
	for (j = 0; j < ntg && rv == RM_OK; j++) {
		if (!tg[j].amt)
			continue;
		if ((rv = agg_go_charge(a, t->win, tg[j].key, tg[j].is_ce, tg[j].amt)) != 0)
			break;
		/* for the window's memory: the split's charge in place of the parts' */
		memset(&k, 0, sizeof(k));
		k.kind = tg[j].is_ce ? AGG_K_GO_SPLIT_CE : AGG_K_GO_SPLIT_V;
		k.node = a->m.node;
		k.window_ns = a->m.window_ns;
		k.win = t->win;
		k.key = tg[j].key;
		if ((rv = agg_sum_get(a, &k, &c)) == 0)
			c->v[0] += tg[j].amt;
	}
	if (rv == RM_OK) {
		memset(&k, 0, sizeof(k));
		k.kind = AGG_K_GO_DONE;
		k.node = a->m.node;
		k.window_ns = a->m.window_ns;
		k.win = t->win;
		rv = agg_sum_get(a, &k, &c);
	}
	/* the memory's entries used now are the recently used ones */
	for (i = 0; i < t->n_go && i < RM_GO_LABELS_MAX && rv == RM_OK; i++) {
		struct agg_gomem_val *m = agg_gomem_find(a->go_mem, a->m.node, t->go[i].cookie);

		if (m)
			agg_gomem_touch(a->go_mem, m);
	}
	if (rv == RM_OK) {
		a->go_wins++;
		if (has_seg)
			agg_go_seg_stats(a, whole, t->go, ng, d, nd);
		a->go_lab += pool - *unlab;
		a->go_unlab += *unlab;
		a->go_fold += t->go_folded;
		if (t->go_folded)
			rm_log_warn("node '%s' window %" PRIu64 ": %" PRIu64 " Go label samples of cookies past the %d a window "
				    "holds, counted as unlabelled", a->m.node, t->win, t->go_folded, RM_GO_LABELS_MAX);
	}
out:
	free(d);
	free(tg);
	return rv;
}

/*
 * The Go label rule, then the runtime rule over the batch's window totals:
 * into rt_of[i] the CPU of w[i] that threads of a managed runtime used
 * outside segments, into left[i] what stays V 'runtime'. Go programs' CPU
 * (what the label rule leaves unlabelled, when w[i] has counts) and other
 * runtimes' each go by their own weight to the CEs of that window (else of
 * the window before it).
 */
static int agg_rt_apply(struct agg_account *a, const struct rm_totals *w, size_t nw, uint64_t *rt_of,
			uint64_t *left)
{
	struct agg_rt_w ws[AGG_RT_CES];
	struct agg_go_rest rest[RM_GO_LABELS_MAX + 1];
	size_t i, j, n, nrest;
	int rv;

	for (i = 0; i < nw; i++) {
		uint64_t go, unlab, charged = 0;
		int labels = !a->go_off && w[i].n_go && !w[i].restart;

		rt_of[i] = w[i].unseg_rt_ns < w[i].unseg_cpu_ns ? w[i].unseg_rt_ns : w[i].unseg_cpu_ns;
		go = w[i].unseg_go_ns < rt_of[i] ? w[i].unseg_go_ns : rt_of[i];
		left[i] = 0;
		if ((!rt_of[i] && !labels) || w[i].restart)
			continue;
		/* the Go label rule first: what it leaves unlabelled goes as Go's runtime CPU, each process's
		   to the CEs that process served (its goroutines' unlabelled work and its runtime's are its own) */
		unlab = go;
		nrest = 0;
		if (labels && (rv = agg_go_apply(a, &w[i], go, &unlab, rest, &nrest)) != 0)
			return rv;
		if (!labels && unlab) {
			rest[0].pid = AGG_RT_ANY_GO; /* Go programs' CPU without counts: the node's Go programs' CEs */
			rest[0].ns = unlab;
			nrest = 1;
		}
		if (!a->rt_off) {
			for (j = 0; j < nrest; j++) {
				if (!rest[j].ns)
					continue;
				n = agg_rt_gather2(a, w[i].win, rest[j].pid, ws);
				if ((rv = agg_rt_charge(a, w[i].win, rest[j].ns, labels ? a->rt_go_lab_req_pm : a->rt_go_req_pm,
							ws, n, &charged)) != 0)
					return rv;
			}
			/* other runtimes' (a JVM's), which the collector does not say by process: the CEs of the
			   node's runtimes that are no Go program */
			if (rt_of[i] > go &&
			    (rv = agg_rt_charge(a, w[i].win, rt_of[i] - go, a->rt_req_pm, ws,
						agg_rt_gather2(a, w[i].win, AGG_RT_ANY_OTHER, ws), &charged)) != 0)
				return rv;
		}
		left[i] = unlab + (rt_of[i] - go) - charged;
		a->rt_charged += charged;
		a->rt_left += left[i];
	}
	return RM_OK;
}

/* Remembers a window slot for (node, window_ns, win): found, free, or the oldest one cleared. NULL: out of memory. */
static struct agg_rt_win *agg_rt_slot(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win)
{
	struct agg_rt_win *rw = agg_rt_find(a, node, window_ns, win), *old = &a->rt[0];
	size_t i;

	if (rw)
		return rw;
	for (i = 0; i < AGG_RT_WINS && a->rt[i].node; i++)
		if (a->rt[i].win < old->win)
			old = &a->rt[i];
	rw = i < AGG_RT_WINS ? &a->rt[i] : old;
	agg_rt_clear(rw);
	if (!(rw->node = strdup(node)))
		return NULL;
	rw->window_ns = window_ns;
	rw->win = win;
	return rw;
}

/*
 * After a commit: remembers the batch's weights for the CEs of its own node
 * (agg_account_add_req), per window, for the rule in later batches. Best
 * effort: out of memory, a CE is left out.
 */
static void agg_rt_remember(struct agg_account *a)
{
	size_t i, j;

	if (!a->is_batch || a->rt_off)
		return;
	for (i = 0; i < a->cap; i++) {
		const struct agg_sum *e = &a->tab[i];
		uint64_t cpu = e->v[1], req = e->v[0];
		struct agg_rt_win *rw;

		/* (the rule's own entries, AGG_K_CE, may have a slot's string as key: never read here) */
		if (e->kind != AGG_K_REQ || e->window_ns != a->m.window_ns || strcmp(e->node, a->m.node))
			continue;
		if (!(rw = agg_rt_slot(a, e->node, e->window_ns, e->win)))
			continue;
		for (j = 0; j < rw->n && (rw->ce[j].pid != e->cookie || strcmp(rw->ce[j].ce, e->key)); j++)
			;
		if (j == rw->n) {
			if (rw->n == AGG_RT_CES || !(rw->ce[j].ce = strdup(e->key)))
				continue;
			rw->ce[j].pid = (uint32_t)e->cookie;
			rw->ce[j].go = 0;
			rw->ce[j].cpu = rw->ce[j].req = 0;
			rw->n++;
		}
		rw->ce[j].go |= e->v[2] != 0;
		rw->ce[j].cpu += cpu;
		rw->ce[j].req += req;
	}
}

/* Writes the transaction's sums and the batch's totals; rt_of, rt_left: agg_rt_apply's. */
static int agg_write_rows(struct agg_account *a, const struct rm_totals *w, size_t nw, const uint64_t *rt_of,
			  const uint64_t *rt_left)
{
	const struct agg_batch_meta *m = &a->m;
	int64_t start, len;
	size_t i;
	int r, rv;

	/* restart totals explain what was stored before this batch: first */
	for (i = 0; i < nw; i++)
		if (w[i].restart && (rv = agg_write_restart(a, &w[i])) != 0)
			return rv;

	for (i = 0; i < a->cap; i++) {
		struct agg_sum *e = &a->tab[i];

		if (!e->kind)
			continue;
		if ((rv = agg_win_start(e->window_ns, e->win, &start)) != 0)
			return rv;
		len = (int64_t)e->window_ns;
		if (e->kind == AGG_K_SPLIT) {
			if ((rv = a->st.add_split(a->st.arg, e->node, start, len, e->v[0])) != 0)
				return rv;
			a->stats.rows_written++;
			continue;
		}
		if (e->kind >= AGG_K_REQ)
			continue; /* the runtime and label rules' inputs and notes: in memory only */
		if (e->kind == AGG_K_EST) {
			if ((rv = a->st.add_est_input(a->st.arg, e->node, start, len, e->key, e->v[0], e->v[1], e->v[2])) != 0)
				return rv;
			a->stats.rows_written++;
			continue;
		}
		for (r = 0; r < ST_R_COUNT; r++) {
			if (!e->v[r])
				continue;
			rv = e->kind == AGG_K_CE ? a->st.add_usage(a->st.arg, e->node, start, len, r, e->key, e->v[r])
						 : a->st.add_unacct(a->st.arg, e->node, start, len, r, e->key, e->v[r]);
			if (rv)
				return rv;
			a->stats.rows_written++;
		}
	}
	len = (int64_t)m->window_ns;
	for (i = 0; i < nw; i++) {
		const struct rm_totals *t = &w[i];
		/* the node's totals (U), the part done outside segments, and what
		 * dropped parts held, by resource */
		uint64_t total[ST_R_COUNT];
		uint64_t unseg_of[ST_R_COUNT] = { [ST_R_CPU] = t->unseg_cpu_ns, [ST_R_NET_RX] = t->unseg_rx,
						  [ST_R_NET_TX] = t->unseg_tx,
						  [ST_R_DISK_READ] = t->unseg_disk_read,
						  [ST_R_DISK_WRITE] = t->unseg_disk_write };
		uint64_t dropped[ST_R_COUNT] = { [ST_R_CPU] = t->dropped_cpu_ns, [ST_R_NET_RX] = t->dropped_rx,
						 [ST_R_NET_TX] = t->dropped_tx,
						 [ST_R_DISK_READ] = t->dropped_disk_read,
						 [ST_R_DISK_WRITE] = t->dropped_disk_write };
		uint64_t drop[ST_R_COUNT], lost = w[i].lost_ns;

		if (t->restart)
			continue;
		agg_totals_of(t, total);

		if ((rv = agg_win_start(m->window_ns, w[i].win, &start)) != 0)
			return rv;
		/* what dropped parts held was counted as lost CPU / unsegmented
		 * bytes by the collector: move that share to 'dropped' (never
		 * more than there is, whatever the collector sent) */
		for (r = 0; r < ST_R_COUNT; r++) {
			uint64_t pool = r == ST_R_CPU ? w[i].lost_ns : unseg_of[r];

			drop[r] = dropped[r] < pool ? dropped[r] : pool;
		}
		lost -= drop[ST_R_CPU];
		for (r = 0; r < ST_R_COUNT; r++) {
			uint64_t cap = r == ST_R_CPU ? w[i].capacity_ns : 0;
			uint64_t unseg = unseg_of[r] - (r == ST_R_CPU ? rt_of[i] : drop[r]);

			if (total[r] || cap) {
				if ((rv = a->st.add_total(a->st.arg, m->node, start, len, r, total[r], cap)) != 0)
					return rv;
				a->stats.rows_written++;
			}
			if (unseg && (rv = a->st.add_unacct(a->st.arg, m->node, start, len, r, AGG_REASON_UNSEGMENTED, unseg)))
				return rv;
			if (drop[r] && (rv = a->st.add_unacct(a->st.arg, m->node, start, len, r, AGG_REASON_DROPPED, drop[r])))
				return rv;
		}
		if (lost && (rv = a->st.add_unacct(a->st.arg, m->node, start, len, ST_R_CPU, AGG_REASON_LOST, lost)))
			return rv;
		if (rt_left[i] && (rv = a->st.add_unacct(a->st.arg, m->node, start, len, ST_R_CPU, AGG_REASON_RUNTIME,
							 rt_left[i])))
			return rv;
		if (w[i].dropped_parts)
			rm_log_warn("node '%s' window %" PRIu64 ": %" PRIu64 " segment parts dropped in the kernel; their CPU and bytes are charged to V as '%s'",
				    m->node, w[i].win, w[i].dropped_parts, AGG_REASON_DROPPED);
	}
	return RM_OK;
}

/* Applies the runtime rule, then writes everything (agg_write_rows). */
static int agg_write(struct agg_account *a, const struct rm_totals *w, size_t nw)
{
	uint64_t *rt_of = NULL, *rt_left = NULL;
	int rv;

	if (nw && !a->is_batch)
		return RM_EINVAL;
	if (nw && (!(rt_of = calloc(nw, sizeof(*rt_of))) || !(rt_left = calloc(nw, sizeof(*rt_left))))) {
		free(rt_of);
		return RM_ENOMEM;
	}
	if ((rv = agg_rt_apply(a, w, nw, rt_of, rt_left)) == RM_OK)
		rv = agg_write_rows(a, w, nw, rt_of, rt_left);
	free(rt_of);
	free(rt_left);
	return rv;
}

int agg_account_begin(struct agg_account *a, const struct agg_batch_meta *m, int *duplicate)
{
	uint64_t last = 0;
	int rv;

	if (duplicate)
		*duplicate = 0;
	if (a->open)
		return RM_ESTATE;
	if (m && (!m->node || !m->seq || !m->window_ns || !duplicate))
		return RM_EINVAL;
	if (a->tab)
		memset(a->tab, 0, a->cap * sizeof(*a->tab));
	a->n = 0;
	a->nch = a->nsplit = 0;
	a->rt_charged = a->rt_left = 0;
	a->go_wins = a->go_lab = a->go_unlab = a->go_fold = a->go_late = 0;
	a->go_seg_wins = a->go_seg_sampled = a->go_seg_parts = 0;
	a->is_batch = m != NULL;
	memset(&a->m, 0, sizeof(a->m));
	if (m)
		a->m = *m;
	if ((rv = a->st.begin(a->st.arg)) != 0)
		return rv;
	if (m) {
		if ((rv = a->st.peer_get(a->st.arg, m->node, m->instance, &last)) != 0) {
			a->st.rollback(a->st.arg);
			return rv;
		}
		if (m->seq <= last) {
			a->st.rollback(a->st.arg);
			*duplicate = 1;
			a->stats.duplicates++;
			return RM_OK;
		}
		if (last && m->seq != last + 1) {
			a->stats.gaps++;
			rm_log_warn("node '%s' instance %016" PRIx64 ": batch %" PRIu64 " follows %" PRIu64
				    " (batches in between never arrived)", m->node, m->instance, m->seq, last);
		}
	}
	a->open = 1;
	return RM_OK;
}

void agg_account_observe(struct agg_account *a, agg_account_observer fn, void *arg)
{
	a->obs = fn;
	a->obs_arg = arg;
}

/* Tells the observer what the committed transaction wrote. */
static void agg_observe(const struct agg_account *a, const struct rm_totals *w, size_t nw)
{
	struct agg_account_row row;
	size_t i;

	for (i = 0; i < a->cap; i++) {
		const struct agg_sum *e = &a->tab[i];

		if (e->kind != AGG_K_CE || agg_win_start(e->window_ns, e->win, &row.start) != 0)
			continue;
		row.node = e->node;
		row.ce = e->key;
		row.len = (int64_t)e->window_ns;
		memcpy(row.v, e->v, sizeof(row.v));
		row.dropped_parts = 0;
		a->obs(a->obs_arg, &row);
	}
	for (i = 0; i < nw; i++) {
		if (w[i].restart || agg_win_start(a->m.window_ns, w[i].win, &row.start) != 0)
			continue;
		row.node = a->m.node;
		row.ce = NULL;
		row.len = (int64_t)a->m.window_ns;
		agg_totals_of(&w[i], row.v);
		row.dropped_parts = w[i].dropped_parts;
		a->obs(a->obs_arg, &row);
	}
}

int agg_account_commit(struct agg_account *a, const struct rm_totals *w, size_t nw)
{
	int rv;

	if (!a->open)
		return RM_ESTATE;
	if ((rv = agg_write(a, w, nw)) != 0)
		goto fail;
	if (a->is_batch && (rv = a->st.peer_set(a->st.arg, a->m.node, a->m.instance, a->m.seq)) != 0)
		goto fail;
	if ((rv = a->st.commit(a->st.arg)) != 0)
		goto fail;
	a->open = 0;
	if (a->is_batch)
		a->stats.batches++;
	else
		a->stats.passes++;
	a->stats.charges += a->nch;
	a->stats.splits += a->nsplit;
	a->stats.runtime_charged_ns += a->rt_charged;
	a->stats.runtime_left_ns += a->rt_left;
	a->stats.go_label_windows += a->go_wins;
	a->stats.go_labelled_ns += a->go_lab;
	a->stats.go_unlabelled_ns += a->go_unlab;
	a->stats.go_folded += a->go_fold;
	a->stats.go_late_ns += a->go_late;
	a->stats.go_seg_windows += a->go_seg_wins;
	a->stats.go_seg_sampled_ns += a->go_seg_sampled;
	a->stats.go_seg_parts_ns += a->go_seg_parts;
	if (a->obs)
		agg_observe(a, w, nw);
	agg_rt_remember(a);
	agg_go_remember(a);
	return RM_OK;
fail:
	agg_account_abort(a);
	return rv;
}

void agg_account_abort(struct agg_account *a)
{
	if (!a || !a->open)
		return;
	a->st.rollback(a->st.arg);
	a->open = 0;
}

int agg_account_held_put(struct agg_account *a, const struct st_held *h)
{
	return a->open ? a->st.held_put(a->st.arg, h) : RM_ESTATE;
}

int agg_account_held_resolve(struct agg_account *a, uint64_t id, const char *dist)
{
	return a->open ? a->st.held_resolve(a->st.arg, id, dist) : RM_ESTATE;
}

int agg_account_held_forget(struct agg_account *a, uint64_t id)
{
	return a->open ? a->st.held_delete(a->st.arg, id) : RM_ESTATE;
}

int agg_account_held_load(struct agg_account *a, int (*cb)(void *arg, const struct st_held *h), void *arg)
{
	return a->open ? RM_ESTATE : a->st.held_load(a->st.arg, cb, arg);
}

int agg_account_apply(struct agg_account *a, const struct agg_batch_meta *m, const struct agg_charge *ch,
		      size_t nch, const struct rm_totals *w, size_t nw, int *duplicate)
{
	size_t i;
	int rv;

	if (!m || !duplicate)
		return RM_EINVAL;
	if ((rv = agg_account_begin(a, m, duplicate)) != 0 || *duplicate)
		return rv;
	for (i = 0; i < nch; i++)
		if ((rv = agg_account_add(a, &ch[i])) != 0) {
			agg_account_abort(a);
			return rv;
		}
	return agg_account_commit(a, w, nw);
}

int agg_account_node(struct agg_account *a, const struct st_node *n)
{
	return a->st.node_seen(a->st.arg, n);
}

void agg_account_get_stats(const struct agg_account *a, struct agg_account_stats *out)
{
	*out = a->stats;
}
