/*
 * col_bpf.c - the eBPF backend's loader: configures and attaches
 * rametr.bpf.c through its generated skeleton, drains the ring of segment
 * parts, and turns the kernel's per-CPU window slots into per-window deltas.
 *
 * Window totals: the kernel keeps, per CPU, RM_WIN_SLOTS slots indexed by
 * window % RM_WIN_SLOTS; a slot is reset when a newer window claims it. We
 * remember, per (cpu, slot), the window and values last reported and hand
 * the sink only what grew since, so late slices (a thread that ran across a
 * window edge and switched out later) still reach the right window. Capacity
 * (online CPUs x elapsed time) is reported the same way as time passes.
 *
 * The hand-off hook (sched_waking, follow-replies) runs at every wake-up on
 * the machine; unless asked to from the start, it is attached here, between
 * two drains of the ring on the one thread that owns the backend, once the
 * kernel has counted a request handed between threads (a reply sent, or
 * read, by another thread than the request's).
 *
 * Go programs' goroutine labels are col_bpf_go's: this file only tells it
 * of the scanner's changes and asks for each ended window's counts.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "col_bpf.h"
#include "col_probe.h"
#include "col_progstat.h"
#include "col_rtscan.h"
#include "rm_clock.h"
#include "rm_err.h"
#include "rametr.skel.h"
#include "banned.h"

#define COL_BPF_MAX_WINS (2 * RM_WIN_SLOTS + 8)

struct col_bpf {
	struct rametr_bpf *skel;
	struct ring_buffer *rb;
	uint64_t window_ns;
	uint64_t offset_ns;
	int ncpu_possible;
	int ncpu_online;
	struct rm_wintot *last;      /* [ncpu_possible][RM_WIN_SLOTS] last values reported */
	struct rm_wintot *vals;      /* lookup buffer: one slot for every possible CPU */
	uint64_t cap_ts;             /* capacity reported up to this monotonic time */
	uint64_t report_ts;          /* last window report by col_bpf_poll (monotonic ns) */
	const struct col_sink *sink; /* during a poll */
	int sink_err;
	int detached;
	struct col_bpf_stats stats;
	struct bpf_link *cut_link;   /* CPU counters: the window sweep (rm_cut_tasks), else NULL */
	int handoff_wait;            /* the hand-off hook is loaded, to be attached on the first hand-off */
	int handoff_attached;        /* the hand-off hook was attached (it stays until col_bpf_finish) */
	uint64_t handoff_before;     /* hand-offs the kernel counted before the hook was attached */
	uint64_t reads_before;       /* connections' requests read by another thread, likewise */
	uint64_t reads_seen;         /* handoff_reads at the last poll */
	uint64_t moves_before;       /* client-side connections taken over by an event loop's thread, likewise */
	uint64_t moves_seen;         /* handoff_moves at the last poll */
	uint64_t swept_win;          /* CPU counters: windows before this one are swept */
	struct col_rtscan *rtscan;   /* keeps the kernel's map of managed runtimes (Go programs) */
	uint64_t rtscan_win;         /* the window of its last pass */
	struct col_bpf_go *go;       /* goroutine labels (go_labels), else NULL */
	uint64_t go_win;             /* windows before this one had their label counts asked for */
};

/*
 * CPU counters: charges every thread's CPU since its last edge, split at
 * window edges (rametr.bpf.c, rm_cut_tasks). Returns RM_OK or RM_EBPF (logged).
 */
static int col_bpf_cut(struct col_bpf *b)
{
	char buf[64];
	int fd;

	if ((fd = bpf_iter_create(bpf_link__fd(b->cut_link))) < 0) {
		rm_log_error("failed to run the window sweep: %s", strerror(errno));
		return RM_EBPF;
	}
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
	return RM_OK;
}

static uint64_t col_bpf_win_now(const struct col_bpf *b)
{
	return (rm_clock_mono_ns() + b->offset_ns) / b->window_ns;
}

/*
 * The window whose counts are due: the one COL_BPF_GO_GRACE_MS ago (at most
 * a quarter of a window). A thread busy in a segment when its window ends is
 * not cut by the sweep: its next edge, a few milliseconds later, charges
 * the window that ended. Asked for right at the window's end, the label
 * counts would go before those parts, which then go on at once and are
 * charged by their segments, not by the labels (measured on a Go server: 4%
 * of its CPU, up to 12% in a window).
 */
static uint64_t col_bpf_go_win(const struct col_bpf *b)
{
	uint64_t grace = (uint64_t)COL_BPF_GO_GRACE_MS * 1000000ull, t = rm_clock_mono_ns() + b->offset_ns;

	if (grace > b->window_ns / 4)
		grace = b->window_ns / 4;
	return t > grace ? (t - grace) / b->window_ns : 0;
}

static int col_bpf_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* A ring record: 1 to RM_BATCH parts back to back (rametr.h). */
static int col_bpf_on_part(void *ctx, void *data, size_t len)
{
	struct col_bpf *b = ctx;
	const struct rm_part *p = data;
	size_t i, n = len / sizeof(struct rm_part);
	int rv;

	if (n == 0 || n > RM_BATCH || len % sizeof(struct rm_part) != 0) {
		rm_log_warn("ignoring ring record of %zu bytes: not 1 to %d parts", len, RM_BATCH);
		return 0;
	}
	for (i = 0; i < n; i++) {
		b->stats.parts++;
		/* a Go program's part waits for its window's goroutine label counts */
		if (b->go && col_bpf_go_hold(b->go, &p[i]))
			continue;
		/* Never fail the callback: libbpf has already consumed the record. */
		if (b->sink && !b->sink_err && (rv = b->sink->part(b->sink->arg, &p[i])) != 0)
			b->sink_err = rv;
	}
	return 0;
}

int col_bpf_open(struct col_bpf **out, const struct col_bpf_cfg *cfg)
{
	struct col_bpf *b;
	char why[256];
	int rv, err;

	*out = NULL;
	if ((rv = col_probe_ebpf(why, sizeof(why))) != 0) {
		rm_log_error("ebpf backend unavailable: %s", why);
		return rv;
	}
	if (!col_probe_tp_btf("sock_send_length") || !col_probe_tp_btf("sock_recv_length")) {
		rm_log_error("ebpf backend unavailable: kernel lacks tracepoints 'sock_send_length' / 'sock_recv_length'");
		return RM_ENOTSUP;
	}
	libbpf_set_print(col_bpf_libbpf_print);
	if (!(b = calloc(1, sizeof(*b))))
		return RM_ENOMEM;
	b->window_ns = cfg->window_ns ? cfg->window_ns : 1000000000ULL;
	b->offset_ns = (uint64_t)cfg->offset_ns;
	b->ncpu_possible = libbpf_num_possible_cpus();
	b->ncpu_online = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (b->ncpu_possible <= 0 || b->ncpu_online <= 0) {
		rm_log_error("failed to count cpus");
		free(b);
		return RM_EIO;
	}
	b->last = calloc((size_t)b->ncpu_possible * RM_WIN_SLOTS, sizeof(*b->last));
	b->vals = calloc((size_t)b->ncpu_possible, sizeof(*b->vals));
	if (!b->last || !b->vals) {
		col_bpf_close(b);
		return RM_ENOMEM;
	}
	if (!(b->skel = rametr_bpf__open())) {
		rm_log_error("failed to open bpf object 'rametr': %s", strerror(errno));
		col_bpf_close(b);
		return RM_EBPF;
	}
	b->skel->rodata->window_ns = b->window_ns;
	b->skel->rodata->offset_ns = b->offset_ns;
	b->skel->rodata->self_tgid = cfg->self_tgid;
	b->skel->rodata->exclude_rametr = cfg->exclude_rametr ? 1 : 0;
	b->skel->rodata->netns_ino = cfg->netns_ino;
	b->skel->rodata->follow_replies = cfg->follow_replies ? 1 : 0;
	b->skel->rodata->follow_wakeups = cfg->follow_wakeups ? 1 : 0;
	b->skel->rodata->bench_stage = cfg->bench_stage;
	if (cfg->cpu_counters && cfg->follow_wakeups) {
		rm_log_error("cpu counters cannot go with follow-wakeups, which needs a context-switch hook");
		col_bpf_close(b);
		return RM_EINVAL;
	}
	b->skel->rodata->cpu_counters = cfg->cpu_counters ? 1 : 0;
	/* the label sampler's samples move with the CPU the counters charge (rm_part.samples) */
	b->skel->rodata->go_labels = cfg->go_labels && cfg->cpu_counters ? 1 : 0;
	if (cfg->bench_stage >= RM_STAGE_COUNT) {
		rm_log_error("bad bench stage %u", cfg->bench_stage);
		col_bpf_close(b);
		return RM_EINVAL;
	}
	if (cfg->ring_bytes) {
		if (cfg->ring_bytes < 4096 || (cfg->ring_bytes & (cfg->ring_bytes - 1))) {
			rm_log_error("bad ring size %u: must be a power of 2, at least 4096", cfg->ring_bytes);
			col_bpf_close(b);
			return RM_EINVAL;
		}
		bpf_map__set_max_entries(b->skel->maps.parts, cfg->ring_bytes);
		/* wake the consumer at a quarter full, as with the default ring */
		b->skel->rodata->wakeup_bytes = cfg->ring_bytes / 4;
	}
	if (!cfg->follow_wakeups && !cfg->follow_replies) {
		/* neither: not even the waking tracepoint is attached */
		bpf_program__set_autoload(b->skel->progs.rm_sched_waking, false);
	} else if (!cfg->follow_wakeups && !cfg->handoffs_from_start) {
		/* follow-replies: attached once a server hands a request over */
		bpf_program__set_autoattach(b->skel->progs.rm_sched_waking, false);
		b->handoff_wait = 1;
	}
	bpf_program__set_autoattach(b->skel->progs.rm_sweep_tasks, false);
	bpf_program__set_autoattach(b->skel->progs.rm_cut_tasks, false);
	if (cfg->cpu_counters)
		bpf_program__set_autoload(b->skel->progs.rm_sched_switch, false); /* the point of the option */
	else
		bpf_program__set_autoload(b->skel->progs.rm_cut_tasks, false);
	if (!col_probe_tp_btf("block_rq_issue")) {
		rm_log_warn("kernel lacks tracepoint 'block_rq_issue': disk bytes are not measured");
		bpf_program__set_autoload(b->skel->progs.rm_block_rq_issue, false);
	}
	if ((err = rametr_bpf__load(b->skel)) != 0) {
		rm_log_error("failed to load bpf object 'rametr': %s", strerror(-err));
		col_bpf_close(b);
		return err == -EPERM ? RM_EPERM : RM_EBPF;
	}
	/* attached with the others: nothing to count */
	if (!b->handoff_wait)
		b->skel->bss->handoff_hook = 1;
	/* capacity starts before the first hook is attached: attaching the
	 * others can take tens of ms (RCU grace periods under load), while the
	 * first already counts busy time */
	b->cap_ts = rm_clock_mono_ns();
	if ((err = rametr_bpf__attach(b->skel)) != 0) {
		rm_log_error("failed to attach bpf programs: %s", strerror(-err));
		col_bpf_close(b);
		return RM_EBPF;
	}
	b->handoff_attached = b->skel->links.rm_sched_waking != NULL;
	/* after the hooks: a unix socket born from here on has every byte counted */
	b->skel->bss->unix_born_from = col_probe_fresh_ino();
	if (!b->skel->bss->unix_born_from)
		rm_log_warn("socket numbering not recognised: a unix connection's bytes are paired only once both ends have been seen in step");
	if ((rv = col_rtscan_open(&b->rtscan, "/proc", bpf_map__fd(b->skel->maps.runtimes), cfg->netns_ino)) != RM_OK) {
		col_bpf_close(b);
		return rv;
	}
	if (cfg->go_labels) {
		struct col_bpf_go_cfg gc = { .window_ns = b->window_ns, .offset_ns = cfg->offset_ns,
					     .netns_ino = cfg->netns_ino, .freq_hz = cfg->go_label_hz,
					     .per_thread = cfg->go_label_per_thread,
					     .creations_from_start = cfg->go_creations_from_start,
					     .tasks_fd = cfg->cpu_counters ? bpf_map__fd(b->skel->maps.tasks) : 0 };

		if ((rv = col_bpf_go_open(&b->go, &gc)) != RM_OK) {
			col_bpf_close(b);
			return rv;
		}
		col_rtscan_on_change(b->rtscan, col_bpf_go_change, b->go);
		b->go_win = col_bpf_go_win(b);
	}
	b->rtscan_win = col_bpf_win_now(b);
	col_rtscan_run(b->rtscan, NULL); /* before the first sweep, which marks their threads */
	if (cfg->cpu_counters) {
		/* the first sweep takes every thread's counters as they are */
		if (!(b->cut_link = bpf_program__attach_iter(b->skel->progs.rm_cut_tasks, NULL))) {
			rm_log_error("failed to attach the window sweep: %s", strerror(errno));
			col_bpf_close(b);
			return RM_EBPF;
		}
		b->swept_win = col_bpf_win_now(b);
		if ((rv = col_bpf_cut(b)) != RM_OK) {
			col_bpf_close(b);
			return rv;
		}
	}
	b->rb = ring_buffer__new(bpf_map__fd(b->skel->maps.parts), col_bpf_on_part, b, NULL);
	if (!b->rb) {
		rm_log_error("failed to create ring buffer consumer: %s", strerror(errno));
		col_bpf_close(b);
		return RM_EBPF;
	}
	*out = b;
	return RM_OK;
}

struct col_win_acc {
	size_t n;
	struct rm_totals w[COL_BPF_MAX_WINS];
};

static struct rm_totals *col_acc_get(struct col_win_acc *acc, uint64_t win)
{
	size_t i;

	for (i = 0; i < acc->n; i++)
		if (acc->w[i].win == win)
			return &acc->w[i];
	if (acc->n == COL_BPF_MAX_WINS)
		return NULL;
	memset(&acc->w[acc->n], 0, sizeof(acc->w[0]));
	acc->w[acc->n].win = win;
	return &acc->w[acc->n++];
}

/* w->m += what the kernel's counter m grew by since l; l catches up (win excepted) */
#define COL_WT_DELTA_K(n, m)                       \
	if ((n) != 1 && v->m >= l->m) {            \
		w->m += v->m - l->m;               \
		l->m = v->m;                       \
	}
#define COL_WT_DELTA_N(n, m)
#define COL_WT_DELTA_(n, m, kind, rule) COL_WT_DELTA_##kind(n, m)

static void col_bpf_windows(struct col_bpf *b, struct col_win_acc *acc)
{
	uint64_t now = rm_clock_mono_ns(), t;
	uint32_t k;
	int cpu;

	for (k = 0; k < RM_WIN_SLOTS; k++) {
		if (bpf_map_lookup_elem(bpf_map__fd(b->skel->maps.wintot), &k, b->vals) != 0)
			continue;
		for (cpu = 0; cpu < b->ncpu_possible; cpu++) {
			struct rm_wintot *v = &b->vals[cpu];
			struct rm_wintot *l = &b->last[(size_t)cpu * RM_WIN_SLOTS + k];
			struct rm_totals *w;

			if (v->win == 0)
				continue;
			if (l->win != v->win) {
				memset(l, 0, sizeof(*l));
				l->win = v->win;
			}
			if (!(w = col_acc_get(acc, v->win)))
				continue;
			RM_TOTALS_FIELDS(COL_WT_DELTA_)
		}
	}
	/* capacity: online CPUs x time elapsed, split at window edges */
	t = b->cap_ts;
	while (t < now) {
		uint64_t win = (t + b->offset_ns) / b->window_ns;
		uint64_t end = (win + 1) * b->window_ns - b->offset_ns;
		struct rm_totals *w;

		if (end > now)
			end = now;
		if ((w = col_acc_get(acc, win)) != NULL)
			w->capacity_ns += (uint64_t)b->ncpu_online * (end - t);
		t = end;
	}
	b->cap_ts = now;
}

static int col_bpf_report(struct col_bpf *b, const struct col_sink *sink)
{
	struct col_win_acc *acc;
	size_t i;
	int rv = RM_OK;

	if (!(acc = calloc(1, sizeof(*acc))))
		return RM_ENOMEM;
	col_bpf_windows(b, acc);
	for (i = 0; i < acc->n && rv == RM_OK; i++) {
		b->stats.dropped_parts += acc->w[i].dropped_parts;
		b->stats.windows++;
		if (b->go)
			col_bpf_go_hold_unseg(b->go, &acc->w[i]); /* sent with the window's label counts */
		rv = sink->window(sink->arg, &acc->w[i]);
	}
	free(acc);
	return rv;
}

/*
 * A request was handed between threads (its reply sent, or read, by another
 * thread than the request's, or it was read on a connection by another
 * thread than the one that read the previous request there): attaches the
 * hand-off hook for good. On failure it is not tried again (logged); the
 * kernel goes on counting such requests.
 */
static void col_bpf_handoff_attach(struct col_bpf *b)
{
	struct bpf_link *link;

	b->handoff_wait = 0;
	if (!(link = bpf_program__attach(b->skel->progs.rm_sched_waking))) {
		rm_log_warn("failed to attach the hand-off hook: %s; requests handed over between threads are "
			    "charged without it", strerror(errno));
		return;
	}
	b->skel->links.rm_sched_waking = link; /* detached with the others */
	b->handoff_attached = 1;
	__atomic_store_n(&b->skel->bss->handoff_hook, 1, __ATOMIC_SEQ_CST);
	b->handoff_before = __atomic_load_n(&b->skel->bss->handoff_replies, __ATOMIC_SEQ_CST);
	b->reads_before = __atomic_load_n(&b->skel->bss->handoff_reads, __ATOMIC_SEQ_CST);
	b->moves_before = __atomic_load_n(&b->skel->bss->handoff_moves, __ATOMIC_SEQ_CST);
	rm_log_info("hand-off hook attached: %llu requests handed between threads (a reply sent or read by another "
		    "thread than the request's), %llu read on a connection by another thread than its previous "
		    "request and %llu sent on a connection another thread sent on last by a thread serving several "
		    "connections before it",
		    (unsigned long long)b->handoff_before, (unsigned long long)b->reads_before,
		    (unsigned long long)b->moves_before);
}

/*
 * Did a kernel count that leaves out managed runtimes' processes (*count,
 * last seen *seen, counted last in process *tgid) move, in a process that
 * runs no managed runtime once the runtimes map is brought up to date (the
 * kernel does not count it in a runtime's process, but one started since
 * the map's last pass is not in it yet)?
 */
static int col_bpf_count_due(struct col_bpf *b, const __u64 *count, uint64_t *seen, const __u32 *tgid)
{
	uint64_t n = __atomic_load_n(count, __ATOMIC_RELAXED);
	uint32_t pid, v;

	if (n == *seen)
		return 0;
	*seen = n;
	if (!b->rtscan)
		return 1;
	pid = __atomic_load_n(tgid, __ATOMIC_RELAXED);
	col_rtscan_run(b->rtscan, NULL);
	return bpf_map_lookup_elem(bpf_map__fd(b->skel->maps.runtimes), &pid, &v) != 0;
}

/*
 * Is the hand-off hook due? At once on a request handed between threads; on
 * a connection's request read by another thread than its previous one, or
 * a request sent on a connection another thread sent on last by a thread
 * serving several connections, if that process runs no managed runtime
 * (col_bpf_count_due).
 */
static int col_bpf_handoff_due(struct col_bpf *b)
{
	if (__atomic_load_n(&b->skel->bss->handoff_replies, __ATOMIC_RELAXED))
		return 1;
	return col_bpf_count_due(b, &b->skel->bss->handoff_reads, &b->reads_seen,
				 &b->skel->bss->handoff_reads_tgid) ||
	       col_bpf_count_due(b, &b->skel->bss->handoff_moves, &b->moves_seen,
				 &b->skel->bss->handoff_moves_tgid);
}

int col_bpf_poll(struct col_bpf *b, const struct col_sink *sink, int timeout_ms)
{
	uint64_t now;
	int err;

	if (b->cut_link) {
		/* wake at the window's end: the sweep splits the threads' CPU there */
		uint64_t t = rm_clock_mono_ns() + b->offset_ns;
		uint64_t left_ms = ((t / b->window_ns + 1) * b->window_ns - t) / 1000000ull + 1;

		if (timeout_ms < 0 || (uint64_t)timeout_ms > left_ms)
			timeout_ms = (int)left_ms;
	}
	b->sink = sink;
	b->sink_err = 0;
	err = ring_buffer__poll(b->rb, timeout_ms);
	if (err < 0 && err != -EINTR) {
		rm_log_error("failed to read the part ring: %s", strerror(-err));
		return RM_EIO;
	}
	/* poll wakes only above the wakeup threshold: consume what is there */
	ring_buffer__consume(b->rb);
	b->sink = NULL;
	if (b->sink_err)
		return b->sink_err;
	if (b->handoff_wait && col_bpf_handoff_due(b))
		col_bpf_handoff_attach(b);
	if (b->rtscan && col_bpf_win_now(b) > b->rtscan_win) {
		/* once a window, before its sweep: which processes run a managed runtime */
		b->rtscan_win = col_bpf_win_now(b);
		col_rtscan_run(b->rtscan, NULL);
	}
	if (b->cut_link && col_bpf_win_now(b) > b->swept_win) {
		/* a window ended: its threads' CPU since their last edges */
		b->swept_win = col_bpf_win_now(b);
		if ((err = col_bpf_cut(b)) != RM_OK)
			return err;
		if (b->go)
			col_bpf_go_sweep(b->go, b->swept_win - 1); /* the Go programs' own CPU in the window */
		b->report_ts = 0;
	}
	if (b->go && col_bpf_go_win(b) > b->go_win) {
		/* a window ended a grace ago: its goroutine label counts, after its last parts */
		b->go_win = col_bpf_go_win(b);
		if ((err = col_bpf_go_report(b->go, b->go_win, sink)) != RM_OK)
			return err;
	}
	now = rm_clock_mono_ns();
	if (now - b->report_ts < COL_BPF_REPORT_MS * 1000000ull)
		return RM_OK;
	b->report_ts = now;
	return col_bpf_report(b, sink);
}

int col_bpf_finish(struct col_bpf *b, const struct col_sink *sink)
{
	struct bpf_link *link;
	char buf[64];
	int fd, rv;

	if (!b->detached) {
		rametr_bpf__detach(b->skel);
		b->detached = 1;
		/* CPU counters: what threads used since their last edges */
		if (b->cut_link && (rv = col_bpf_cut(b)) != RM_OK)
			return rv;
	}
	link = bpf_program__attach_iter(b->skel->progs.rm_sweep_tasks, NULL);
	if (!link) {
		rm_log_warn("failed to attach the task sweep: %s; parts still held by threads are lost",
			    strerror(errno));
	} else {
		fd = bpf_iter_create(bpf_link__fd(link));
		if (fd < 0) {
			rm_log_warn("failed to run the task sweep: %s", strerror(errno));
		} else {
			while (read(fd, buf, sizeof(buf)) > 0)
				;
			close(fd);
		}
		bpf_link__destroy(link);
	}
	b->sink = sink;
	b->sink_err = 0;
	ring_buffer__consume(b->rb);
	b->sink = NULL;
	if (b->sink_err)
		return b->sink_err;
	if ((rv = col_bpf_report(b, sink)) != 0)
		return rv;
	/* the label counts of the window in progress too: nothing follows them */
	if (b->go && (rv = col_bpf_go_report(b->go, col_bpf_win_now(b) + 1, sink)) != RM_OK)
		return rv;
	return RM_OK;
}

int col_bpf_exclude(struct col_bpf *b, uint32_t pid)
{
	uint32_t one = 1;

	if (!pid)
		return RM_EINVAL;
	if (bpf_map_update_elem(bpf_map__fd(b->skel->maps.excluded), &pid, &one, BPF_ANY) != 0) {
		rm_log_error("failed to exclude pid %u: %s", pid, strerror(errno));
		return errno == E2BIG ? RM_EFULL : RM_EBPF;
	}
	return RM_OK;
}

void col_bpf_get_stats(const struct col_bpf *b, struct col_bpf_stats *out)
{
	*out = b->stats;
	out->handoff_hook = b->handoff_attached;
	/* while waiting, and after a failed attach, the kernel's count so far */
	out->handoff_replies_before = b->handoff_attached
					      ? b->handoff_before
					      : __atomic_load_n(&b->skel->bss->handoff_replies, __ATOMIC_RELAXED);
	out->handoff_reads_before = b->handoff_attached
					    ? b->reads_before
					    : __atomic_load_n(&b->skel->bss->handoff_reads, __ATOMIC_RELAXED);
	out->handoff_moves_before = b->handoff_attached
					    ? b->moves_before
					    : __atomic_load_n(&b->skel->bss->handoff_moves, __ATOMIC_RELAXED);
	out->carry_wakeups = __atomic_load_n(&b->skel->bss->carry_wakeups, __ATOMIC_RELAXED);
	out->carry_capped_ns = __atomic_load_n(&b->skel->bss->carry_capped_ns, __ATOMIC_RELAXED);
	memset(&out->go, 0, sizeof(out->go));
	if (b->go)
		col_bpf_go_stats(b->go, &out->go);
}

struct col_bpf_prog_fill {
	struct col_bpf_prog_stat *out;
	int n, max;
};

static void col_bpf_prog_add(void *arg, const char *name, uint32_t id, uint64_t runs, uint64_t run_ns)
{
	struct col_bpf_prog_fill *f = arg;

	if (f->n == f->max)
		return;
	snprintf(f->out[f->n].name, sizeof(f->out[f->n].name), "%s", name);
	f->out[f->n].id = id;
	f->out[f->n].runs = runs;
	f->out[f->n].run_ns = run_ns;
	f->n++;
}

int col_bpf_prog_stats(const struct col_bpf *b, struct col_bpf_prog_stat *out, int max)
{
	struct col_bpf_prog_fill f = { out, 0, max };

	col_progstat_each(b->skel->obj, col_bpf_prog_add, &f);
	/* the goroutine label module's, over every time it was loaded */
	if (b->go)
		col_bpf_go_prog_stats(b->go, col_bpf_prog_add, &f);
	return f.n;
}

void col_bpf_close(struct col_bpf *b)
{
	if (!b)
		return;
	ring_buffer__free(b->rb);
	bpf_link__destroy(b->cut_link);
	col_rtscan_close(b->rtscan);
	col_bpf_go_close(b->go);
	rametr_bpf__destroy(b->skel);
	free(b->last);
	free(b->vals);
	free(b);
}
