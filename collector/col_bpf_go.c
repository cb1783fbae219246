/*
 * col_bpf_go.c - the eBPF backend's Go label counts (col_bpf_go.h): loads
 * the goroutine-label module on demand, follows the runtime scanner's Go
 * programs, and turns the module's counts per window and process into one
 * window's pooled counts for the sink.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "col_bpf_go.h"
#include "col_golabel.h"
#include "rametr.h"
#include "rm_err.h"
#include "rm_part.h"
#include "banned.h"

#define COL_BPF_GO_PROGS 8 /* the label module's programs, with room */
#define COL_BPF_GO_SEGS 512 /* a window's cookies whose parts' samples are counted (the rest: cookie 0's) */
#define COL_BPF_GO_UNSEG 8  /* windows whose Go CPU outside segments is held at once (normally one or two) */
#define COL_BPF_GO_CPU_WINS 4 /* windows whose CPU per program is kept until their counts go (normally one) */

/* A watched Go program's CPU per window: its process clock read at each window's sweep. */
struct col_bpf_go_proc {
	uint32_t pid;
	int read;                          /* last_ns holds a reading */
	uint64_t last_ns;                  /* its clock at the last sweep */
	uint64_t win[COL_BPF_GO_CPU_WINS]; /* by win % COL_BPF_GO_CPU_WINS: the window (0: none) ... */
	uint64_t ns[COL_BPF_GO_CPU_WINS];  /* ... and its CPU in it */
};

/* A window's Go CPU outside segments, held until its counts go. */
struct col_bpf_go_unseg {
	uint64_t win, ns;
};

/* A label module program's run statistics, summed over the times it was loaded. */
struct col_bpf_go_prog {
	char name[32];
	uint64_t runs, run_ns;
};

/* The label module's programs' statistics by name. */
struct col_bpf_go_progs {
	struct col_bpf_go_prog p[COL_BPF_GO_PROGS];
	size_t n;
};

struct col_bpf_go {
	struct col_bpf_go_cfg cfg;
	struct col_bpf_go_progs progs; /* of the module's earlier loads */
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
	struct rm_golabel segs[COL_BPF_GO_SEGS]; /* a window's parts' samples by cookie */
	struct rm_part *held;       /* Go parts held back, in arrival order */
	size_t nheld, capheld;
	uint64_t handed_win;        /* windows before this one were handed: their parts go on at once */
	struct col_bpf_go_unseg unseg[COL_BPF_GO_UNSEG]; /* held Go CPU outside segments, by window */
	size_t nunseg;
	struct col_bpf_go_proc *procs;  /* the watched programs' CPU per window */
	size_t nprocs, capprocs;
	struct col_bpf_go_cpu *cpu;     /* a window's, for its calibration (capprocs) */
	struct col_golabel_count *cal;  /* a window's counts calibrated */
	size_t capcal;
	uint64_t swept_win;             /* the window the last sweep ended */
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

int col_bpf_go_hold(struct col_bpf_go *g, const struct rm_part *p)
{
	if (!g->gl || !(p->flags & RM_PF_GO))
		return 0;
	if (p->win < g->handed_win || g->nheld == COL_BPF_GO_HELD) {
		g->st.unheld++;
		return 0;
	}
	if (g->nheld == g->capheld) {
		size_t ncap = g->capheld ? g->capheld * 2 : 256;
		struct rm_part *h;

		if (ncap > COL_BPF_GO_HELD)
			ncap = COL_BPF_GO_HELD;
		if (!(h = realloc(g->held, ncap * sizeof(*h)))) {
			g->st.unheld++;
			return 0;
		}
		g->held = h;
		g->capheld = ncap;
	}
	g->held[g->nheld++] = *p;
	g->st.held++;
	return 1;
}

/*
 * Passes the held parts of windows before win to the sink, in arrival
 * order, keeping the others; from then on parts of those windows go on at
 * once. Stops at the sink's first error (recorded; the parts not yet passed
 * stay held).
 */
static void col_bpf_go_release(struct col_bpf_go *g, uint64_t win)
{
	size_t i, k = 0;
	int rv;

	for (i = 0; i < g->nheld; i++) {
		if (g->held[i].win < win && !g->sink_err) {
			if ((rv = g->sink->part(g->sink->arg, &g->held[i])) != RM_OK)
				g->sink_err = rv;
			else
				continue;
		}
		g->held[k++] = g->held[i];
	}
	g->nheld = k;
	if (win > g->handed_win)
		g->handed_win = win;
}

uint64_t col_bpf_go_unseg_take(struct rm_totals *w)
{
	uint64_t x = w->unseg_go_ns;

	if (x > w->unseg_rt_ns)
		x = w->unseg_rt_ns;
	if (x > w->unseg_cpu_ns)
		x = w->unseg_cpu_ns;
	if (x > w->busy_ns)
		x = w->busy_ns;
	w->unseg_go_ns -= x;
	w->unseg_rt_ns -= x;
	w->unseg_cpu_ns -= x;
	w->busy_ns -= x;
	return x;
}

void col_bpf_go_unseg_give(struct rm_totals *w, uint64_t x)
{
	w->unseg_go_ns += x;
	w->unseg_rt_ns += x;
	w->unseg_cpu_ns += x;
	w->busy_ns += x;
}

/* The slot of window win's held Go CPU outside segments; g->nunseg if none. */
static size_t col_bpf_go_unseg_find(const struct col_bpf_go *g, uint64_t win)
{
	size_t i;

	for (i = 0; i < g->nunseg && g->unseg[i].win != win; i++)
		;
	return i;
}

void col_bpf_go_hold_unseg(struct col_bpf_go *g, struct rm_totals *w)
{
	size_t i;

	if (!g->gl || !w->unseg_go_ns || w->restart || w->win < g->handed_win)
		return;
	if ((i = col_bpf_go_unseg_find(g, w->win)) == g->nunseg) {
		if (g->nunseg == COL_BPF_GO_UNSEG)
			return;
		g->unseg[g->nunseg].win = w->win;
		g->unseg[g->nunseg++].ns = 0;
	}
	g->unseg[i].ns += col_bpf_go_unseg_take(w);
}

/*
 * Hands the held Go CPU outside segments of windows before win (which had
 * no counts) to the sink in totals of their own. Stops at the sink's first
 * error (recorded; the rest stays held).
 */
static void col_bpf_go_unseg_release(struct col_bpf_go *g, uint64_t win)
{
	size_t i = 0;
	int rv;

	while (i < g->nunseg && !g->sink_err) {
		if (g->unseg[i].win >= win) {
			i++;
			continue;
		}
		memset(g->t, 0, sizeof(*g->t));
		g->t->win = g->unseg[i].win;
		col_bpf_go_unseg_give(g->t, g->unseg[i].ns);
		if ((rv = g->sink->window(g->sink->arg, g->t)) != RM_OK) {
			g->sink_err = rv;
			break;
		}
		g->st.unseg_held_ns += g->unseg[i].ns;
		g->unseg[i] = g->unseg[--g->nunseg];
	}
}

/* Loads the module if it is not. 0 if loaded. */
static int col_bpf_go_load(struct col_bpf_go *g)
{
	struct col_golabel_cfg c = { .window_ns = g->cfg.window_ns, .offset_ns = g->cfg.offset_ns,
				     .freq_hz = g->cfg.freq_hz, .netns_ino = g->cfg.netns_ino,
				     .per_thread = g->cfg.per_thread, .tasks_fd = g->cfg.tasks_fd,
				     .creations_from_start = g->cfg.creations_from_start };
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
	/* everything was handed at the last unload (handed_win past every window):
	   from now on each window's parts wait for its counts again */
	g->handed_win = 0;
	g->st.loads++;
	rm_log_info("goroutine labels loaded: Go programs' CPU is split by the sockets their goroutines serve");
	return 0;
}

/* Forgets watched program pid's CPU figures. */
static void col_bpf_go_proc_drop(struct col_bpf_go *g, uint32_t pid)
{
	size_t i;

	for (i = 0; i < g->nprocs; i++)
		if (g->procs[i].pid == pid) {
			g->procs[i] = g->procs[--g->nprocs];
			return;
		}
}

/* Starts keeping watched program pid's CPU per window (best effort: out of memory, its counts go as sampled). */
static void col_bpf_go_proc_add(struct col_bpf_go *g, uint32_t pid)
{
	col_bpf_go_proc_drop(g, pid);
	if (g->nprocs == g->capprocs) {
		size_t ncap = g->capprocs ? g->capprocs * 2 : 8;
		struct col_bpf_go_proc *p = realloc(g->procs, ncap * sizeof(*p));
		struct col_bpf_go_cpu *c;

		if (!p)
			return;
		g->procs = p;
		if (!(c = realloc(g->cpu, ncap * sizeof(*c))))
			return;
		g->cpu = c;
		g->capprocs = ncap;
	}
	memset(&g->procs[g->nprocs], 0, sizeof(g->procs[0]));
	g->procs[g->nprocs++].pid = pid;
}

void col_bpf_go_sweep(struct col_bpf_go *g, uint64_t win)
{
	/* the clocks grew by one window since the last sweep, unless a sweep was missed */
	int one = win && g->swept_win + 1 == win;
	size_t i;

	g->swept_win = win;
	for (i = 0; i < g->nprocs; i++) {
		struct col_bpf_go_proc *p = &g->procs[i];
		struct timespec ts;
		clockid_t clk;
		uint64_t now;

		if (clock_getcpuclockid((pid_t)p->pid, &clk) != 0 || clock_gettime(clk, &ts) != 0) {
			p->read = 0; /* gone, or not readable: its next counts go as sampled */
			continue;
		}
		now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		if (p->read && now >= p->last_ns && one) {
			p->win[win % COL_BPF_GO_CPU_WINS] = win;
			p->ns[win % COL_BPF_GO_CPU_WINS] = now - p->last_ns;
		}
		p->last_ns = now;
		p->read = 1;
	}
}

/* The watched programs' CPU in window win, into g->cpu; how many. */
static size_t col_bpf_go_cpu_of(struct col_bpf_go *g, uint64_t win)
{
	size_t i, n = 0;

	for (i = 0; i < g->nprocs; i++) {
		const struct col_bpf_go_proc *p = &g->procs[i];

		if (win && p->win[win % COL_BPF_GO_CPU_WINS] == win) {
			g->cpu[n].pid = p->pid;
			g->cpu[n].pad = 0;
			g->cpu[n++].ns = p->ns[win % COL_BPF_GO_CPU_WINS];
		}
	}
	return n;
}

size_t col_bpf_go_calibrate(const struct col_golabel_count *c, size_t n, const struct col_bpf_go_cpu *cpu, size_t ncpu,
			    uint64_t period_ns, struct rm_golabel *segs, size_t nsegs, struct col_golabel_count *out)
{
	size_t i, j, k, m = 0;

	if (!period_ns)
		ncpu = 0; /* no scale: as sampled (the wire refuses such counts anyway) */
	for (i = 0; i < n; i++) {
		for (j = 0; j < ncpu && cpu[j].pid != c[i].pid; j++)
			;
		if (j == ncpu && c[i].samples)
			out[m++] = c[i]; /* no figure: as sampled */
	}
	for (j = 0; j < ncpu; j++) {
		uint64_t want = cpu[j].ns / period_ns, given = 0;
		unsigned __int128 have = 0;
		size_t first = m, big;

		for (k = 0; k < j && cpu[k].pid != cpu[j].pid; k++)
			;
		if (k < j)
			continue; /* a pid named twice: its first figure */
		for (i = 0; i < n; i++)
			have += c[i].pid == cpu[j].pid ? c[i].samples : 0;
		if (want >= have) {
			/* samples are missed outside segments (the sampled CPU in parts matches the parts'):
			   the process's entries as sampled, what its clock used beyond them unlabelled */
			for (i = 0; i < n; i++)
				if (c[i].pid == cpu[j].pid && c[i].samples)
					out[m++] = c[i];
			if (want > have) {
				out[m].cookie = COL_GOLABEL_IDLE;
				out[m].samples = want - (uint64_t)have;
				out[m++].pid = cpu[j].pid;
			}
			continue;
		}
		/* more samples than its clock grew by (a window's edge): scaled down to it */
		for (i = 0; i < n; i++) {
			if (c[i].pid != cpu[j].pid || !c[i].samples)
				continue;
			out[m] = c[i];
			out[m].samples = (uint64_t)((unsigned __int128)c[i].samples * want / have);
			given += out[m++].samples;
		}
		/* the rounding's rest to its entry of most samples */
		for (i = big = first; i < m; i++)
			if (out[i].samples > out[big].samples)
				big = i;
		if (m > first)
			out[big].samples += want - given;
		for (k = 0; segs && k < nsegs; k++)
			if (segs[k].pid == cpu[j].pid)
				segs[k].seg = (uint64_t)((unsigned __int128)segs[k].seg * want / have);
		/* entries scaled to nothing are left out */
		for (i = k = first; i < m; i++)
			if (out[i].samples)
				out[k++] = out[i];
		m = k;
	}
	return m;
}

uint32_t col_bpf_go_change(void *arg, uint32_t pid, uint32_t before, uint32_t after, const char *exe)
{
	struct col_bpf_go *g = arg;
	int rv;

	/* only a watched program is RM_RT_GO while the module is loaded */
	if (before == RM_RT_GO && g->gl) {
		col_golabel_forget(g->gl, pid);
		col_bpf_go_proc_drop(g, pid);
		if (g->st.watched && --g->st.watched == 0)
			g->empty_since = col_golabel_window(g->gl);
	}
	if (after != RM_RT_GO || col_bpf_go_load(g) != 0)
		return after;
	if ((rv = col_golabel_watch(g->gl, pid, exe)) != RM_OK) {
		g->st.unreadable++;
		rm_log_info("not following the goroutines of Go program %u (%s): %s; its CPU is charged by its "
			    "threads' segments", pid, exe, rm_strerror(rv));
		return RM_RT_GO_PLAIN;
	}
	g->st.watched++;
	col_bpf_go_proc_add(g, pid);
	return RM_RT_GO;
}

/* By process, then cookie: a pair's entries side by side. */
static int col_bpf_go_key_cmp(const void *a, const void *b)
{
	const struct rm_golabel *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->cookie < y->cookie ? -1 : x->cookie > y->cookie;
}

/* Most samples first, so that a window past the wire's bound keeps its largest labels. */
static int col_bpf_go_samples_cmp(const void *a, const void *b)
{
	const struct rm_golabel *x = a, *y = b;

	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	if (x->seg != y->seg)
		return x->seg > y->seg ? -1 : 1;
	return col_bpf_go_key_cmp(a, b);
}

size_t col_bpf_go_segs(const struct rm_part *p, size_t n, uint64_t win, struct rm_golabel *out, size_t cap)
{
	size_t i, j, m = 0;

	for (i = 0; i < n; i++) {
		uint64_t ck;

		if (p[i].win != win || !(p[i].flags & RM_PF_GO) || !p[i].samples)
			continue;
		/* the cookie the aggregator files the part under: none for a continuation not anchored */
		ck = (p[i].flags & (RM_PF_CONT | RM_PF_ANCHOR)) == RM_PF_CONT ? 0 : p[i].in.cookie;
		if (!ck || ck == RM_GO_IDLE)
			continue;
		for (j = 0; j < m && (out[j].cookie != ck || out[j].pid != p[i].pid); j++)
			;
		if (j == m) {
			if (m == cap)
				continue; /* its samples stay in cookie 0's */
			out[m].cookie = ck;
			out[m].samples = out[m].seg = 0;
			out[m].pid = p[i].pid;
			out[m].pad = 0;
			m++;
		}
		out[j].seg += p[i].samples;
	}
	return m;
}

void col_bpf_go_tally(struct col_bpf_go_stats *st, const struct rm_totals *t)
{
	uint32_t i;

	for (i = 0; i < t->n_go; i++) {
		st->samples += t->go[i].samples;
		if (!t->go[i].cookie)
			st->unlabelled += t->go[i].samples;
		else if (t->go[i].cookie == RM_GO_IDLE)
			st->runtime += t->go[i].samples;
	}
	st->windows++;
}

uint64_t col_bpf_go_pool(struct rm_totals *t, uint64_t win, const struct col_golabel_count *c, size_t n,
			 const struct rm_golabel *segs, size_t nsegs, uint64_t period_ns, struct rm_golabel *scratch,
			 int *bad)
{
	size_t i, j, k, m = n;

	memset(t, 0, sizeof(*t));
	t->win = win;
	*bad = !win || !period_ns || period_ns > RM_GO_PERIOD_MAX;
	if (*bad)
		return 0;
	for (i = 0; i < n; i++) {
		scratch[i].cookie = c[i].cookie;
		scratch[i].samples = c[i].samples;
		scratch[i].seg = 0;
		scratch[i].pid = c[i].pid;
		scratch[i].pad = 0;
	}
	/* by segment, per process: its parts' samples, as many in all as its samples by label (a window's
	   edge may put a few in the parts of the next: then they are scaled down), the rest in its cookie 0
	   (its CPU in no part); the parts of a process without samples are left out */
	for (i = 0; segs && i < n; i++) {
		unsigned __int128 all = 0, in = 0, given = 0;
		uint32_t pid = c[i].pid;

		for (j = 0; j < i && c[j].pid != pid; j++)
			;
		if (j < i)
			continue; /* the process is done */
		for (j = i; j < n; j++)
			all += c[j].pid == pid ? c[j].samples : 0;
		for (k = 0; k < nsegs; k++)
			in += segs[k].pid == pid ? segs[k].seg : 0;
		if (!all)
			continue;
		for (k = 0; k < nsegs; k++) {
			if (segs[k].pid != pid)
				continue;
			scratch[m] = segs[k];
			scratch[m].samples = 0;
			scratch[m].seg = (uint64_t)(in > all ? (unsigned __int128)segs[k].seg * all / in : segs[k].seg);
			given += scratch[m++].seg;
		}
		scratch[m].cookie = 0;
		scratch[m].samples = 0;
		scratch[m].seg = (uint64_t)(all - given);
		scratch[m].pid = pid;
		scratch[m++].pad = 0;
	}
	qsort(scratch, m, sizeof(*scratch), col_bpf_go_key_cmp);
	for (i = k = 0; i < m; i++) {
		if (k && !col_bpf_go_key_cmp(&scratch[k - 1], &scratch[i])) {
			scratch[k - 1].samples += scratch[i].samples;
			scratch[k - 1].seg += scratch[i].seg;
		} else {
			scratch[k++] = scratch[i];
		}
	}
	qsort(scratch, k, sizeof(*scratch), col_bpf_go_samples_cmp);
	return rm_totals_go_set(t, period_ns, scratch, k);
}

/* col_golabel_fn: one window's counts, per process, pooled and handed to the sink. */
static void col_bpf_go_window(void *arg, uint64_t win, const struct col_golabel_count *c, size_t n,
			      uint64_t period_ns)
{
	struct col_bpf_go *g = arg;
	size_t h, nsegs = 0, ncpu;
	uint64_t unseg;
	int rv, bad;

	if (g->sink_err)
		return; /* dropped with the rest of this report (logged by the caller) */
	/* the samples in its parts' CPU (the label module shares the counters' per-thread state) */
	if (g->cfg.tasks_fd > 0)
		nsegs = col_bpf_go_segs(g->held, g->nheld, win, g->segs, COL_BPF_GO_SEGS);
	/* each program's samples calibrated to its own CPU in the window */
	if (n + g->nprocs > g->capcal) {
		struct col_golabel_count *p = realloc(g->cal, (n + g->nprocs) * sizeof(*p));

		if (!p) {
			g->sink_err = RM_ENOMEM;
			return;
		}
		g->cal = p;
		g->capcal = n + g->nprocs;
	}
	ncpu = col_bpf_go_cpu_of(g, win);
	n = col_bpf_go_calibrate(c, n, g->cpu, ncpu, period_ns, g->cfg.tasks_fd > 0 ? g->segs : NULL, nsegs, g->cal);
	c = g->cal;
	g->st.calibrated += ncpu;
	g->st.uncalibrated += g->nprocs > ncpu ? g->nprocs - ncpu : 0;
	col_bpf_go_release(g, win + 1); /* the window's Go parts just before its counts */
	if (g->sink_err)
		return;
	if (2 * n + nsegs + 1 > g->cap) {
		struct rm_golabel *p = realloc(g->merged, (2 * n + nsegs + 1) * sizeof(*p));

		if (!p) {
			g->sink_err = RM_ENOMEM;
			return;
		}
		g->merged = p;
		g->cap = 2 * n + nsegs + 1;
	}
	g->st.folded += col_bpf_go_pool(g->t, win, c, n, g->cfg.tasks_fd > 0 ? g->segs : NULL, nsegs, period_ns,
					g->merged, &bad);
	if (bad) {
		rm_log_warn("goroutine label counts of window %llu with a period of %llu ns left out",
			    (unsigned long long)win, (unsigned long long)period_ns);
		return;
	}
	col_bpf_go_tally(&g->st, g->t);
	/* the window's Go CPU outside segments with its counts: the label rule's pool (kept held if not sent) */
	h = col_bpf_go_unseg_find(g, win);
	unseg = h < g->nunseg ? g->unseg[h].ns : 0;
	col_bpf_go_unseg_give(g->t, unseg);
	if ((rv = g->sink->window(g->sink->arg, g->t)) != RM_OK) {
		g->sink_err = rv;
		return;
	}
	if (h < g->nunseg)
		g->unseg[h] = g->unseg[--g->nunseg];
	g->st.unseg_held_ns += unseg;
}

/* col_progstat_fn (arg: a struct col_bpf_go_progs): adds one program's statistics to its name's. */
static void col_bpf_go_keep(void *arg, const char *name, uint32_t id, uint64_t runs, uint64_t run_ns)
{
	struct col_bpf_go_progs *ps = arg;
	size_t i;

	(void)id;
	for (i = 0; i < ps->n && strcmp(ps->p[i].name, name); i++)
		;
	if (i == ps->n) {
		if (ps->n == COL_BPF_GO_PROGS)
			return;
		snprintf(ps->p[ps->n++].name, sizeof(ps->p[0].name), "%s", name);
	}
	ps->p[i].runs += runs;
	ps->p[i].run_ns += run_ns;
}

/* Unloads the module, keeping its programs' statistics. */
static void col_bpf_go_unload(struct col_bpf_go *g)
{
	if (!g->gl)
		return;
	col_golabel_prog_stats(g->gl, col_bpf_go_keep, &g->progs);
	col_golabel_close(g->gl);
	g->gl = NULL;
}

int col_bpf_go_prog_stats(const struct col_bpf_go *g, col_progstat_fn fn, void *arg)
{
	struct col_bpf_go_progs sum = g->progs; /* the earlier loads' sums, plus the loaded module's own */
	size_t i;

	if (g->gl)
		col_golabel_prog_stats(g->gl, col_bpf_go_keep, &sum);
	for (i = 0; i < sum.n; i++)
		fn(arg, sum.p[i].name, 0, sum.p[i].runs, sum.p[i].run_ns);
	return (int)sum.n;
}

int col_bpf_go_report(struct col_bpf_go *g, uint64_t before_win, const struct col_sink *sink)
{
	uint64_t windows = g->st.windows;
	int rv, err;

	if (!g->gl)
		return RM_OK;
	g->sink = sink;
	g->sink_err = 0;
	col_golabel_follow(g->gl); /* threads started in the window just ended are sampled from now on */
	rv = col_golabel_drain(g->gl, before_win, col_bpf_go_window, g);
	if (rv == RM_OK) {
		col_bpf_go_release(g, before_win); /* windows without counts: their parts as they are */
		col_bpf_go_unseg_release(g, before_win);
	}
	else
		rm_log_warn("failed to read the goroutine label counts: %s; tried again at the next window",
			    rm_strerror(rv));
	g->st.lost = col_golabel_lost(g->gl);
	if (!g->sink_err && !g->st.watched && before_win > g->empty_since + 1) {
		/* no Go program for a whole window: nothing left to count, nothing to hold */
		col_bpf_go_release(g, UINT64_MAX);
		col_bpf_go_unseg_release(g, UINT64_MAX);
		if (!g->sink_err) {
			col_bpf_go_unload(g);
			rm_log_info("goroutine labels unloaded: no Go program runs");
		}
	}
	err = g->sink_err;
	g->sink = NULL;
	if (err)
		rm_log_warn("failed to hand on goroutine label counts before window %llu (%s) after %llu windows: "
			    "the failing window's counts are lost (its Go CPU charged by threads' segments); parts "
			    "still held are handed at the next window", (unsigned long long)before_win,
			    rm_strerror(err), (unsigned long long)(g->st.windows - windows));
	return err;
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
	free(g->held);
	free(g->procs);
	free(g->cpu);
	free(g->cal);
	free(g->merged);
	free(g->t);
	free(g);
}
