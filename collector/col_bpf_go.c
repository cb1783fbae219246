/*
 * col_bpf_go.c - the eBPF backend's Go label counts (col_bpf_go.h): loads
 * the goroutine-label module on demand, follows the runtime scanner's Go
 * programs, and turns the module's counts per window and process into one
 * window's pooled counts for the sink.
 */
#include <stdlib.h>
#include <string.h>

#include "col_bpf_go.h"
#include "col_golabel.h"
#include "rametr.h"
#include "rm_err.h"
#include "rm_part.h"
#include "banned.h"

struct col_bpf_go {
	struct col_bpf_go_cfg cfg;
	struct col_golabel *gl;     /* NULL: not loaded */
	int load_failed;            /* logged; not tried again */
	uint64_t empty_since;       /* the window from which no Go program was watched */
	struct col_bpf_go_stats st;
	/* during a report */
	const struct col_sink *sink;
	int sink_err;
	struct rm_totals *t;        /* one window's totals (large: kept here, not on the stack) */
	struct rm_golabel *merged;  /* a window's counts pooled over processes */
	size_t cap;
};

int col_bpf_go_open(struct col_bpf_go **out, const struct col_bpf_go_cfg *cfg)
{
	struct col_bpf_go *g;

	if (!out || !cfg)
		return RM_EINVAL;
	*out = NULL;
	if (!(g = calloc(1, sizeof(*g))))
		return RM_ENOMEM;
	if (!(g->t = calloc(1, sizeof(*g->t)))) {
		free(g);
		return RM_ENOMEM;
	}
	g->cfg = *cfg;
	*out = g;
	return RM_OK;
}

/* Loads the module if it is not. 0 if loaded. */
static int col_bpf_go_load(struct col_bpf_go *g)
{
	struct col_golabel_cfg c = { .window_ns = g->cfg.window_ns, .offset_ns = g->cfg.offset_ns,
				     .freq_hz = g->cfg.freq_hz, .netns_ino = g->cfg.netns_ino };
	int rv;

	if (g->gl)
		return 0;
	if (g->load_failed)
		return -1;
	if ((rv = col_golabel_open(&g->gl, &c)) != RM_OK) {
		g->load_failed = 1;
		rm_log_warn("failed to load the goroutine labels: %s; Go programs' CPU is charged by their threads' "
			    "segments", rm_strerror(rv));
		return -1;
	}
	rm_log_info("goroutine labels loaded: Go programs' CPU is split by the sockets their goroutines serve");
	return 0;
}

void col_bpf_go_change(void *arg, uint32_t pid, uint32_t before, uint32_t after, const char *exe)
{
	struct col_bpf_go *g = arg;
	int rv;

	if (before == RM_RT_GO && g->gl) {
		col_golabel_forget(g->gl, pid);
		if (g->st.watched && --g->st.watched == 0)
			g->empty_since = col_golabel_window(g->gl);
	}
	if (after != RM_RT_GO || col_bpf_go_load(g) != 0)
		return;
	if ((rv = col_golabel_watch(g->gl, pid, exe)) != RM_OK) {
		g->st.unreadable++;
		rm_log_info("not following the goroutines of Go program %u (%s): %s; its CPU is charged by its "
			    "threads' segments", pid, exe, rm_strerror(rv));
		return;
	}
	g->st.watched++;
}

static int col_bpf_go_cookie_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct rm_golabel *)a)->cookie, y = ((const struct rm_golabel *)b)->cookie;

	return x < y ? -1 : x > y;
}

/* Most samples first, so that a window past the wire's bound keeps its largest labels. */
static int col_bpf_go_samples_cmp(const void *a, const void *b)
{
	const struct rm_golabel *x = a, *y = b;

	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	return x->cookie < y->cookie ? -1 : x->cookie > y->cookie;
}

uint64_t col_bpf_go_pool(struct rm_totals *t, uint64_t win, const struct col_golabel_count *c, size_t n,
			 uint64_t period_ns, struct rm_golabel *scratch, int *bad)
{
	size_t i, m = 0;

	memset(t, 0, sizeof(*t));
	t->win = win;
	*bad = !win || !period_ns || period_ns > RM_GO_PERIOD_MAX;
	if (*bad)
		return 0;
	for (i = 0; i < n; i++) {
		scratch[i].cookie = c[i].cookie;
		scratch[i].samples = c[i].samples;
	}
	qsort(scratch, n, sizeof(*scratch), col_bpf_go_cookie_cmp);
	for (i = 0; i < n; i++) {
		if (m && scratch[m - 1].cookie == scratch[i].cookie)
			scratch[m - 1].samples += scratch[i].samples;
		else
			scratch[m++] = scratch[i];
	}
	qsort(scratch, m, sizeof(*scratch), col_bpf_go_samples_cmp);
	return rm_totals_go_set(t, period_ns, scratch, m);
}

/* col_golabel_fn: one window's counts, per process, pooled and handed to the sink. */
static void col_bpf_go_window(void *arg, uint64_t win, const struct col_golabel_count *c, size_t n,
			      uint64_t period_ns)
{
	struct col_bpf_go *g = arg;
	size_t i;
	int rv, bad;

	if (g->sink_err)
		return; /* dropped with the rest of this report (logged by the caller) */
	if (n > g->cap) {
		struct rm_golabel *p = realloc(g->merged, n * sizeof(*p));

		if (!p) {
			g->sink_err = RM_ENOMEM;
			return;
		}
		g->merged = p;
		g->cap = n;
	}
	g->st.folded += col_bpf_go_pool(g->t, win, c, n, period_ns, g->merged, &bad);
	if (bad) {
		rm_log_warn("goroutine label counts of window %llu with a period of %llu ns left out",
			    (unsigned long long)win, (unsigned long long)period_ns);
		return;
	}
	for (i = 0; i < g->t->n_go; i++)
		g->st.samples += g->t->go[i].samples;
	g->st.windows++;
	if ((rv = g->sink->window(g->sink->arg, g->t)) != RM_OK)
		g->sink_err = rv;
}

int col_bpf_go_report(struct col_bpf_go *g, uint64_t before_win, const struct col_sink *sink)
{
	uint64_t windows = g->st.windows;
	int rv;

	if (!g->gl)
		return RM_OK;
	g->sink = sink;
	g->sink_err = 0;
	rv = col_golabel_drain(g->gl, before_win, col_bpf_go_window, g);
	g->sink = NULL;
	g->st.lost = col_golabel_lost(g->gl);
	if (rv != RM_OK)
		rm_log_warn("failed to read the goroutine label counts: %s; tried again at the next window",
			    rm_strerror(rv));
	if (g->sink_err) {
		rm_log_warn("goroutine label counts of windows before %llu not handed on (%s) after %llu: those "
			    "windows' Go CPU is charged by threads' segments", (unsigned long long)before_win,
			    rm_strerror(g->sink_err), (unsigned long long)(g->st.windows - windows));
		return g->sink_err;
	}
	if (!g->st.watched && before_win > g->empty_since + 1) {
		/* no Go program for a whole window: nothing left to count */
		col_golabel_close(g->gl);
		g->gl = NULL;
		rm_log_info("goroutine labels unloaded: no Go program runs");
	}
	return RM_OK;
}

void col_bpf_go_stats(const struct col_bpf_go *g, struct col_bpf_go_stats *out)
{
	*out = g->st;
}

void col_bpf_go_close(struct col_bpf_go *g)
{
	if (!g)
		return;
	col_golabel_close(g->gl);
	free(g->merged);
	free(g->t);
	free(g);
}
