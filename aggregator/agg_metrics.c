/*
 * agg_metrics.c - the counters behind the aggregator's /metrics: windows
 * waiting to settle, the usage counters they settle into (with V computed
 * as U - sum_c U_c per window), the collectors' and stitcher's health, and
 * their rendering in the Prometheus text format (see agg_metrics.h).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agg_metrics.h"
#include "rm_err.h"
#include "banned.h"

#define AM_NAME 64
#define AM_T_U (-1)   /* the server's total U */
#define AM_T_V (-2)   /* V as counted */
#define AM_T_SUM (-3) /* sum of the tenants' counters (for V) */

struct am_counter {
	int used;
	uint32_t sid;
	int32_t tid; /* tenant index, or AM_T_* */
	uint64_t v[ST_R_COUNT];
};

struct am_window {
	uint32_t sid;
	int64_t start, len, touch_ns;
	int settle; /* marked while settling */
};

struct am_record {
	size_t w; /* index into windows */
	int32_t tid;
	uint64_t v[ST_R_COUNT];
};

struct am_node {
	char name[AM_NAME];
	int64_t last_ns;
	uint64_t dropped;
};

struct agg_metrics {
	pthread_mutex_t mu;
	int64_t settle_ns, start_unix_ns;
	char (*srv)[AM_NAME];
	size_t ns, srv_cap;
	char (*ten)[AM_NAME];
	size_t nt, ten_cap;
	struct am_counter *ctr; /* open addressing, cap a power of two */
	size_t nctr, ctr_cap;
	struct am_window *win;
	size_t nwin, win_cap;
	size_t *widx;           /* open addressing over win: index + 1, 0 = free */
	size_t widx_cap;
	struct am_record *rec;
	size_t nrec, rec_cap;
	struct am_node *nodes;
	size_t nnodes, nodes_cap;
	uint64_t batches[4];
	uint64_t lost, early;
	struct agg_metrics_health health;
};

int agg_metrics_open(struct agg_metrics **out, int64_t settle_ns, int64_t start_unix_ns)
{
	struct agg_metrics *m;

	if (!out)
		return RM_EINVAL;
	*out = NULL;
	if (settle_ns <= 0)
		return RM_EINVAL;
	if (!(m = calloc(1, sizeof(*m))))
		return RM_ENOMEM;
	if (pthread_mutex_init(&m->mu, NULL) != 0) {
		free(m);
		return RM_ENOMEM;
	}
	m->settle_ns = settle_ns;
	m->start_unix_ns = start_unix_ns;
	*out = m;
	return RM_OK;
}

void agg_metrics_close(struct agg_metrics *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->mu);
	free(m->srv);
	free(m->ten);
	free(m->ctr);
	free(m->win);
	free(m->widx);
	free(m->rec);
	free(m->nodes);
	free(m);
}

/* Grows *arr (of *cap items of size) to hold n + 1. 0 or -1. */
static int am_reserve(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t ncap;
	void *na;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	if (!(na = realloc(*arr, ncap * size)))
		return -1;
	*arr = na;
	*cap = ncap;
	return 0;
}

/* Index of name in names[0..*n), added if missing; -1 if out of memory. */
static long am_intern(char (**names)[AM_NAME], size_t *n, size_t *cap, const char *name)
{
	size_t i;

	for (i = *n; i-- > 0;)
		if (strcmp((*names)[i], name) == 0)
			return (long)i;
	if (am_reserve((void **)names, cap, *n, AM_NAME))
		return -1;
	snprintf((*names)[*n], AM_NAME, "%s", name);
	return (long)(*n)++;
}

static size_t am_hash(uint32_t sid, int32_t tid)
{
	uint64_t k = ((uint64_t)sid << 32) | (uint32_t)tid;

	return (size_t)((k * 0x9e3779b97f4a7c15ULL) >> 20);
}

/* The counter of (sid, tid), created (zero) if missing; NULL if out of
 * memory. Only a creation moves the table: finding an existing counter
 * leaves earlier pointers valid. */
static struct am_counter *am_counter(struct agg_metrics *m, uint32_t sid, int32_t tid)
{
	size_t j;

	if (m->ctr_cap) {
		j = am_hash(sid, tid) & (m->ctr_cap - 1);
		while (m->ctr[j].used && (m->ctr[j].sid != sid || m->ctr[j].tid != tid))
			j = (j + 1) & (m->ctr_cap - 1);
		if (m->ctr[j].used)
			return &m->ctr[j];
	}
	if ((m->nctr + 1) * 2 > m->ctr_cap) {
		size_t ncap = m->ctr_cap ? m->ctr_cap * 2 : 64, i;
		struct am_counter *nt = calloc(ncap, sizeof(*nt));

		if (!nt)
			return NULL;
		for (i = 0; i < m->ctr_cap; i++) {
			if (!m->ctr[i].used)
				continue;
			j = am_hash(m->ctr[i].sid, m->ctr[i].tid) & (ncap - 1);
			while (nt[j].used)
				j = (j + 1) & (ncap - 1);
			nt[j] = m->ctr[i];
		}
		free(m->ctr);
		m->ctr = nt;
		m->ctr_cap = ncap;
	}
	j = am_hash(sid, tid) & (m->ctr_cap - 1);
	while (m->ctr[j].used)
		j = (j + 1) & (m->ctr_cap - 1);
	m->ctr[j].used = 1;
	m->ctr[j].sid = sid;
	m->ctr[j].tid = tid;
	m->nctr++;
	return &m->ctr[j];
}

static uint64_t am_sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static size_t am_win_hash(uint32_t sid, int64_t start, int64_t len)
{
	uint64_t h = ((uint64_t)start * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)len * 31) ^ sid;

	return (size_t)(h ^ (h >> 29));
}

/* Rebuilds the index of win[] with room for at least 2 * (nwin + 1). -1 if out of memory. */
static int am_win_reindex(struct agg_metrics *m)
{
	size_t cap = m->widx_cap ? m->widx_cap : 64, i, j;

	while (cap < 2 * (m->nwin + 1))
		cap *= 2;
	if (cap != m->widx_cap) {
		size_t *n = calloc(cap, sizeof(*n));

		if (!n)
			return -1;
		free(m->widx);
		m->widx = n;
		m->widx_cap = cap;
	} else {
		memset(m->widx, 0, cap * sizeof(*m->widx));
	}
	for (i = 0; i < m->nwin; i++) {
		j = am_win_hash(m->win[i].sid, m->win[i].start, m->win[i].len) & (cap - 1);
		while (m->widx[j])
			j = (j + 1) & (cap - 1);
		m->widx[j] = i + 1;
	}
	return 0;
}

/* Index of the pending window (sid, start, len), added if missing; -1 if out of memory. */
static long am_window(struct agg_metrics *m, uint32_t sid, int64_t start, int64_t len)
{
	size_t j, i;

	if (2 * (m->nwin + 1) > m->widx_cap && am_win_reindex(m))
		return -1;
	j = am_win_hash(sid, start, len) & (m->widx_cap - 1);
	for (; m->widx[j]; j = (j + 1) & (m->widx_cap - 1)) {
		const struct am_window *w = &m->win[m->widx[j] - 1];

		if (w->sid == sid && w->start == start && w->len == len)
			return (long)(m->widx[j] - 1);
	}
	if (am_reserve((void **)&m->win, &m->win_cap, m->nwin, sizeof(*m->win)))
		return -1;
	i = m->nwin++;
	memset(&m->win[i], 0, sizeof(m->win[i]));
	m->win[i].sid = sid;
	m->win[i].start = start;
	m->win[i].len = len;
	m->widx[j] = i + 1;
	return (long)i;
}

/* Settles the windows marked in win[].settle: their records into the
 * counters, then V of each server touched (after all its records, so that
 * V never counts a window's U before that window's tenants). */
static void am_settle_marked(struct agg_metrics *m)
{
	unsigned char *touched = calloc(m->ns + 1, 1);
	size_t *map = calloc(m->nwin + 1, sizeof(size_t));
	size_t i, j, r;

	if (!touched || !map) {
		free(touched);
		free(map);
		return; /* tried again at the next settle */
	}
	for (j = 0; j < m->nrec; j++) {
		const struct am_record *rec = &m->rec[j];
		uint32_t sid = m->win[rec->w].sid;
		struct am_counter *k, *sum = NULL;

		if (!m->win[rec->w].settle)
			continue;
		/* create both first: a creation may move the table */
		if (!am_counter(m, sid, rec->tid) || (rec->tid != AM_T_U && !am_counter(m, sid, AM_T_SUM))) {
			m->lost++;
			continue;
		}
		k = am_counter(m, sid, rec->tid);
		if (rec->tid != AM_T_U)
			sum = am_counter(m, sid, AM_T_SUM);
		for (r = 0; r < ST_R_COUNT; r++) {
			k->v[r] = am_sat_add(k->v[r], rec->v[r]);
			if (sum)
				sum->v[r] = am_sat_add(sum->v[r], rec->v[r]);
		}
		touched[sid] = 1;
	}
	/* V = U - sum_c U_c over everything settled, never going down */
	for (i = 0; i < m->ns; i++) {
		struct am_counter *sum, *tot, *v;

		if (!touched[i])
			continue;
		if (!am_counter(m, (uint32_t)i, AM_T_SUM) || !am_counter(m, (uint32_t)i, AM_T_U) ||
		    !am_counter(m, (uint32_t)i, AM_T_V)) {
			m->lost++;
			continue;
		}
		sum = am_counter(m, (uint32_t)i, AM_T_SUM);
		tot = am_counter(m, (uint32_t)i, AM_T_U);
		v = am_counter(m, (uint32_t)i, AM_T_V);
		for (r = 0; r < ST_R_COUNT; r++)
			if (tot->v[r] > sum->v[r] && tot->v[r] - sum->v[r] > v->v[r])
				v->v[r] = tot->v[r] - sum->v[r];
	}
	/* drop the settled windows and their records */
	for (i = j = 0; i < m->nwin; i++) {
		map[i] = m->win[i].settle ? (size_t)-1 : j;
		if (!m->win[i].settle)
			m->win[j++] = m->win[i];
	}
	m->nwin = j;
	for (r = j = 0; r < m->nrec; r++)
		if (map[m->rec[r].w] != (size_t)-1) {
			m->rec[j] = m->rec[r];
			m->rec[j++].w = map[m->rec[r].w];
		}
	m->nrec = j;
	if (am_win_reindex(m) && m->nwin) {
		/* without an index no window can be found: settle them all */
		for (i = 0; i < m->nwin; i++)
			m->win[i].settle = 1;
		m->early += m->nwin;
		free(touched);
		free(map);
		am_settle_marked(m);
		return;
	}
	free(touched);
	free(map);
}

static void am_settle_all(struct agg_metrics *m)
{
	size_t i;

	for (i = 0; i < m->nwin; i++)
		m->win[i].settle = 1;
	am_settle_marked(m);
}

void agg_metrics_usage(struct agg_metrics *m, const char *node, int64_t start, int64_t len, const char *ce,
		       const uint64_t v[ST_R_COUNT], int64_t now_ns)
{
	long sid, w, tid = AM_T_U;
	size_t i;

	if (!m || !node || !v)
		return;
	pthread_mutex_lock(&m->mu);
	if (m->nrec >= AGG_METRICS_MAX_PENDING) {
		m->early += m->nwin;
		am_settle_all(m);
	}
	if ((sid = am_intern(&m->srv, &m->ns, &m->srv_cap, node)) < 0 ||
	    (ce && (tid = am_intern(&m->ten, &m->nt, &m->ten_cap, ce)) < 0)) {
		m->lost++;
		goto out;
	}
	if ((w = am_window(m, (uint32_t)sid, start, len)) < 0) {
		m->lost++;
		goto out;
	}
	i = (size_t)w;
	m->win[i].touch_ns = now_ns;
	if (am_reserve((void **)&m->rec, &m->rec_cap, m->nrec, sizeof(*m->rec))) {
		m->lost++;
		goto out;
	}
	m->rec[m->nrec].w = i;
	m->rec[m->nrec].tid = (int32_t)tid;
	memcpy(m->rec[m->nrec].v, v, sizeof(m->rec[m->nrec].v));
	m->nrec++;
out:
	pthread_mutex_unlock(&m->mu);
}

static struct am_node *am_node(struct agg_metrics *m, const char *node)
{
	size_t i;

	for (i = 0; i < m->nnodes; i++)
		if (strcmp(m->nodes[i].name, node) == 0)
			return &m->nodes[i];
	if (am_reserve((void **)&m->nodes, &m->nodes_cap, m->nnodes, sizeof(*m->nodes)))
		return NULL;
	memset(&m->nodes[m->nnodes], 0, sizeof(m->nodes[0]));
	snprintf(m->nodes[m->nnodes].name, AM_NAME, "%s", node);
	return &m->nodes[m->nnodes++];
}

void agg_metrics_dropped(struct agg_metrics *m, const char *node, uint64_t parts)
{
	struct am_node *n;

	if (!m || !node)
		return;
	pthread_mutex_lock(&m->mu);
	if ((n = am_node(m, node)) != NULL)
		n->dropped = am_sat_add(n->dropped, parts);
	pthread_mutex_unlock(&m->mu);
}

void agg_metrics_settle(struct agg_metrics *m, int64_t now_ns, int all)
{
	size_t i;

	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	for (i = 0; i < m->nwin; i++)
		m->win[i].settle = all || now_ns - m->win[i].touch_ns >= m->settle_ns;
	am_settle_marked(m);
	pthread_mutex_unlock(&m->mu);
}

void agg_metrics_batch(struct agg_metrics *m, const char *node, enum agg_metrics_result result, int64_t now_ns)
{
	struct am_node *n;

	if (!m || !node || (unsigned)result > AGG_METRICS_RETRY)
		return;
	pthread_mutex_lock(&m->mu);
	m->batches[result]++;
	if ((n = am_node(m, node)) != NULL)
		n->last_ns = now_ns;
	pthread_mutex_unlock(&m->mu);
}

void agg_metrics_set_health(struct agg_metrics *m, const struct agg_metrics_health *h)
{
	if (!m || !h)
		return;
	pthread_mutex_lock(&m->mu);
	m->health = *h;
	pthread_mutex_unlock(&m->mu);
}

/* ---- the text format ---- */

static void am_label(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void am_family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A value: CPU ns as seconds (exact decimal), bytes as an integer. */
static void am_value(FILE *f, int r, uint64_t v)
{
	if (r == ST_R_CPU)
		fprintf(f, " %" PRIu64 ".%09" PRIu64 "\n", v / 1000000000u, v % 1000000000u);
	else
		fprintf(f, " %" PRIu64 "\n", v);
}

static int am_ctr_cmp(const void *a, const void *b, void *arg)
{
	const struct agg_metrics *sm = arg;
	const struct am_counter *x = *(const struct am_counter *const *)a, *y = *(const struct am_counter *const *)b;
	int c = strcmp(sm->srv[x->sid], sm->srv[y->sid]);

	if (c)
		return c;
	if ((x->tid < 0) != (y->tid < 0))
		return x->tid < 0 ? 1 : -1; /* V after the tenants */
	return x->tid < 0 ? 0 : strcmp(sm->ten[x->tid], sm->ten[y->tid]);
}

static const struct {
	const char *tenant, *server, *help;
} am_names[ST_R_COUNT] = {
	[ST_R_CPU] = { "rametr_tenant_cpu_seconds_total", "rametr_server_cpu_seconds_total", "CPU time" },
	[ST_R_NET_RX] = { "rametr_tenant_network_receive_bytes_total", "rametr_server_network_receive_bytes_total",
			  "bytes received through sockets" },
	[ST_R_NET_TX] = { "rametr_tenant_network_transmit_bytes_total",
			  "rametr_server_network_transmit_bytes_total", "bytes sent through sockets" },
	[ST_R_DISK_READ] = { "rametr_tenant_fs_reads_bytes_total", "rametr_server_fs_reads_bytes_total",
			     "bytes read from disk" },
	[ST_R_DISK_WRITE] = { "rametr_tenant_fs_writes_bytes_total", "rametr_server_fs_writes_bytes_total",
			      "bytes written to disk" },
};

static void am_render_usage(struct agg_metrics *m, FILE *f)
{
	const struct am_counter **list = calloc(m->nctr + 1, sizeof(*list));
	size_t i, n = 0;
	int r;
	char help[256];

	if (!list)
		return;
	for (i = 0; i < m->ctr_cap; i++)
		if (m->ctr[i].used && m->ctr[i].tid != AM_T_SUM)
			list[n++] = &m->ctr[i];
	qsort_r(list, n, sizeof(*list), am_ctr_cmp, m);
	for (r = 0; r < ST_R_COUNT; r++) {
		snprintf(help, sizeof(help), "%s charged to a tenant on a server over settled windows%s; tenant=\"%s\" "
			 "is the unaccountable share, so the tenants sum to the server's total",
			 am_names[r].help, r == ST_R_CPU ? ", in seconds" : "", AGG_METRICS_V_TENANT);
		am_family(f, am_names[r].tenant, "counter", help);
		for (i = 0; i < n; i++) {
			if (list[i]->tid == AM_T_U)
				continue;
			fprintf(f, "%s{server=\"", am_names[r].tenant);
			am_label(f, m->srv[list[i]->sid]);
			fputs("\",tenant=\"", f);
			am_label(f, list[i]->tid == AM_T_V ? AGG_METRICS_V_TENANT : m->ten[list[i]->tid]);
			fputs("\"}", f);
			am_value(f, r, list[i]->v[r]);
		}
		snprintf(help, sizeof(help), "%s of a server as its collector measured it, over settled windows%s",
			 am_names[r].help, r == ST_R_CPU ? ", in seconds" : "");
		am_family(f, am_names[r].server, "counter", help);
		for (i = 0; i < n; i++) {
			if (list[i]->tid != AM_T_U)
				continue;
			fprintf(f, "%s{server=\"", am_names[r].server);
			am_label(f, m->srv[list[i]->sid]);
			fputs("\"}", f);
			am_value(f, r, list[i]->v[r]);
		}
	}
	free(list);
}

int agg_metrics_render(struct agg_metrics *m, FILE *f, int64_t now_ns)
{
	static const char *const results[] = { "ok", "duplicate", "refused", "retry" };
	size_t i, connected = 0;

	if (!m || !f)
		return RM_EINVAL;
	pthread_mutex_lock(&m->mu);
	am_render_usage(m, f);
	am_family(f, "rametr_collector_last_batch_age_seconds", "gauge",
		  "seconds since the last batch from a collector's node");
	for (i = 0; i < m->nnodes; i++) {
		if (!m->nodes[i].last_ns)
			continue;
		connected += now_ns - m->nodes[i].last_ns < AGG_METRICS_CONNECTED_NS;
		fputs("rametr_collector_last_batch_age_seconds{node=\"", f);
		am_label(f, m->nodes[i].name);
		fprintf(f, "\"} %.3f\n", (double)(now_ns - m->nodes[i].last_ns) / 1e9);
	}
	am_family(f, "rametr_collectors_connected", "gauge", "collectors heard from in the last 30 seconds");
	fprintf(f, "rametr_collectors_connected %zu\n", connected);
	am_family(f, "rametr_collector_dropped_parts_total", "counter",
		  "segment parts a collector's kernel ring could not take (charged to V as dropped)");
	for (i = 0; i < m->nnodes; i++) {
		fputs("rametr_collector_dropped_parts_total{node=\"", f);
		am_label(f, m->nodes[i].name);
		fprintf(f, "\"} %" PRIu64 "\n", m->nodes[i].dropped);
	}
	am_family(f, "rametr_batches_total", "counter",
		  "batches from collectors by answer: ok, duplicate (applied before), refused (never to be sent "
		  "again), retry (could not be stored now)");
	for (i = 0; i < 4; i++)
		fprintf(f, "rametr_batches_total{result=\"%s\"} %" PRIu64 "\n", results[i], m->batches[i]);
	am_family(f, "rametr_aggregator_parts_total", "counter", "segment parts taken in by the stitcher");
	fprintf(f, "rametr_aggregator_parts_total %" PRIu64 "\n", m->health.parts);
	am_family(f, "rametr_aggregator_held_parts", "gauge",
		  "parts the stitcher holds: pending (waiting for the send of their bytes) or resolved (kept for "
		  "later receivers)");
	fprintf(f, "rametr_aggregator_held_parts{state=\"pending\"} %" PRIu64 "\n", m->health.pending);
	fprintf(f, "rametr_aggregator_held_parts{state=\"resolved\"} %" PRIu64 "\n",
		m->health.held > m->health.pending ? m->health.held - m->health.pending : 0);
	am_family(f, "rametr_aggregator_parts_evicted_total", "counter",
		  "pending parts given up early because max_held parts were held");
	fprintf(f, "rametr_aggregator_parts_evicted_total %" PRIu64 "\n", m->health.evicted);
	am_family(f, "rametr_metrics_pending_windows", "gauge", "windows not yet settled into the usage counters");
	fprintf(f, "rametr_metrics_pending_windows %zu\n", m->nwin);
	am_family(f, "rametr_metrics_early_settled_windows_total", "counter",
		  "windows settled before they were quiet, because too many amounts were pending");
	fprintf(f, "rametr_metrics_early_settled_windows_total %" PRIu64 "\n", m->early);
	am_family(f, "rametr_metrics_lost_amounts_total", "counter",
		  "amounts left out of the counters for lack of memory");
	fprintf(f, "rametr_metrics_lost_amounts_total %" PRIu64 "\n", m->lost);
	am_family(f, "rametr_aggregator_start_time_seconds", "gauge",
		  "when the aggregator started (Unix seconds); the counters start at zero then");
	fprintf(f, "rametr_aggregator_start_time_seconds %" PRId64 ".%03" PRId64 "\n", m->start_unix_ns / 1000000000,
		(m->start_unix_ns % 1000000000) / 1000000);
	pthread_mutex_unlock(&m->mu);
	return ferror(f) ? RM_EIO : RM_OK;
}
