/*
 * col_golabel.c - loads golabel.bpf.c, attaches its socket hooks and its
 * sampler at open and its creation uprobe per watched Go executable, keeps
 * the watched processes' map, and hands the sampler's counts per window
 * (col_golabel.h).
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "col_golabel.h"
#include "col_gort.h"
#include "col_progstat.h"
#include "golabel.h"
#include "golabel.skel.h"
#include "rm_clock.h"
#include "rm_err.h"
#include "banned.h"

_Static_assert(COL_GOLABEL_IDLE == GOLABEL_IDLE, "one idle label for kernel and loader");
_Static_assert(COL_GOLABEL_PIDS_MAX == GOLABEL_PIDS_MAX, "one bound on watched processes");

/*
 * A watched Go executable and its two uprobes, each attached once one of its
 * processes needs it (gl_want_follow, gl_want_handoffs).
 */
struct gl_exe {
	dev_t dev;
	ino_t ino;
	struct bpf_link *newg;  /* the creation uprobe; NULL until attached */
	uint64_t site_off;      /* where it goes; 0: attaching it failed */
	uint64_t newg_win;      /* the window it was attached in (0: from the start) */
	int label_sends;        /* its processes' sends label their goroutines (golabel_proc.label_sends) */
	struct bpf_link *ready; /* the hand-off uprobe; NULL until attached */
	uint64_t ready_off;     /* where it goes; 0: the build has no runtime.ready, or attaching it failed */
};

/*
 * Both uprobes trap on calls a Go server makes about once a request whether
 * or not it needs them (net/http starts a goroutine per request and wakes
 * it through a sync.Cond; each trap costs the traced thread several µs at
 * saturation on a virtual machine, bench/RESULTS.md), so neither is
 * attached until a window of one of the executable's processes has at least
 * GL_HANDOFF_MIN samples on user goroutines without a label, and at least
 * 1 / GL_HANDOFF_DIV of the process's samples (for the creation uprobe,
 * its recent windows together: GL_ACC_HALVE). The first such window
 * attaches the creation uprobe (a goroutine per request or per stream, as
 * grpc-go's, takes its creator's label); one that began after that
 * (GL_FOLLOW_SETTLE), when the goroutines created since still leave that
 * much unlabelled, attaches the hand-off uprobe (a pool's workers, fed over a
 * channel, never read a socket of their own and were created before).
 */
#define GL_HANDOFF_MIN 16
#define GL_HANDOFF_DIV 20
#define GL_FOLLOW_SETTLE 1
/*
 * Before the creation uprobe, the samples count over the windows so far, not
 * one window: a server under a light load (a few ms of CPU a window) would
 * otherwise charge its unlabelled calls by the runtime rule for many
 * windows. Both sums are halved whenever they pass GL_ACC_HALVE samples, so
 * the recent windows weigh most (about 4 s of CPU at the default frequency).
 */
#define GL_ACC_HALVE 8192

/* A thread of a watched process and its sampler (a cpu-clock event bound to the thread). */
struct gl_thr {
	uint32_t tid;
	struct bpf_link *link; /* closes the event's fd */
};

/* A watched process, its executable and its threads' samplers (sorted by tid). */
struct gl_pid {
	uint32_t pid;
	dev_t dev;
	ino_t ino;
	struct gl_thr *thr;
	size_t nthr;
	uint64_t acc_all, acc_zero; /* until the creation uprobe is attached: its samples, and those on
				     * user goroutines without a label, over its recent windows */
};

struct col_golabel {
	struct golabel_bpf *skel;
	struct bpf_link *recv;
	struct bpf_link *send;
	int per_thread;             /* samplers per watched thread (col_golabel_cfg.per_thread), else per CPU */
	int creations_from_start;   /* col_golabel_cfg.creations_from_start */
	struct bpf_link **samplers; /* per CPU: one per online CPU */
	int nsamplers;
	struct gl_exe exes[GOLABEL_PIDS_MAX];
	size_t nexes;
	struct gl_pid pids[GOLABEL_PIDS_MAX];
	size_t npids;
	size_t nthr;           /* per thread: samplers open, over every watched process */
	int thr_full_logged;   /* COL_GOLABEL_THREADS_MAX was reached and said so */
	int thr_fail_logged;   /* a thread's sampler failed to open and said so */
	uint64_t window_ns, offset_ns, period_ns;
};

/* One drained count, its window with it (for sorting). */
struct gl_row {
	uint64_t win;
	struct col_golabel_count c;
};

static int gl_errno_rv(int err)
{
	return err == EPERM || err == EACCES ? RM_EPERM : RM_EBPF;
}

/*
 * A cpu-clock event of period_ns running the sampler, bound to thread pid
 * (cpu -1: it ticks only while that thread runs) or to CPU cpu (pid -1: it
 * ticks whatever runs there); *out its link, which closes the event's fd.
 * Returns RM_OK; RM_ENOENT if the thread is gone or the CPU offline;
 * RM_EPERM or RM_EBPF (errno's cause in *err).
 */
static int gl_open_event(struct col_golabel *g, pid_t pid, int cpu, struct bpf_link **out, int *err)
{
	struct perf_event_attr a;
	struct bpf_link *l;
	int pfd;

	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof(a);
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.sample_period = g->period_ns; /* cpu-clock counts nanoseconds */
	pfd = (int)syscall(__NR_perf_event_open, &a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (pfd < 0) {
		*err = errno;
		return *err == ESRCH || *err == ENODEV ? RM_ENOENT : gl_errno_rv(*err);
	}
	if (!(l = bpf_program__attach_perf_event(g->skel->progs.golabel_sample, pfd))) {
		*err = errno;
		close(pfd);
		return gl_errno_rv(*err);
	}
	*out = l;
	return RM_OK;
}

/* The sampler on every online CPU (col_golabel_cfg.per_thread 0). */
static int gl_attach_samplers(struct col_golabel *g)
{
	int ncpu = libbpf_num_possible_cpus(), cpu, rv, err = 0;

	if (ncpu <= 0)
		return RM_EBPF;
	if (!(g->samplers = calloc((size_t)ncpu, sizeof(*g->samplers))))
		return RM_ENOMEM;
	for (cpu = 0; cpu < ncpu; cpu++) {
		rv = gl_open_event(g, -1, cpu, &g->samplers[g->nsamplers], &err);
		if (rv == RM_ENOENT)
			continue; /* offline */
		if (rv != RM_OK) {
			rm_log_warn("failed to attach the sampler on CPU %d: %s", cpu, strerror(err));
			return rv;
		}
		g->nsamplers++;
	}
	return g->nsamplers ? RM_OK : RM_EBPF;
}

static int gl_tid_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The threads of process pid from /proc/<pid>/task, sorted, into *out
 * (malloc'd, *n of them). RM_OK; RM_ENOENT if the process is gone; RM_ENOMEM.
 */
static int gl_list_tids(uint32_t pid, uint32_t **out, size_t *n)
{
	char path[64];
	struct dirent *de;
	uint32_t *t = NULL, *nt;
	size_t cap = 0;
	DIR *d;

	*out = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "/proc/%u/task", pid);
	if (!(d = opendir(path)))
		return RM_ENOENT;
	while ((de = readdir(d)) != NULL) {
		char *end;
		unsigned long v = strtoul(de->d_name, &end, 10);

		if (*end || !v || v > UINT32_MAX)
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 32;
			if (!(nt = realloc(t, cap * sizeof(*t)))) {
				free(t);
				closedir(d);
				return RM_ENOMEM;
			}
			t = nt;
		}
		t[(*n)++] = (uint32_t)v;
	}
	closedir(d);
	if (*n)
		qsort(t, *n, sizeof(*t), gl_tid_cmp);
	*out = t;
	return RM_OK;
}

/*
 * Brings p's samplers in line with its threads: one for each thread that
 * has none (up to COL_GOLABEL_THREADS_MAX over every process), none for a
 * thread that is gone. Best effort: a thread that cannot be sampled is
 * skipped (tried again at the next call); the first failure and reaching
 * the bound are logged, once each.
 * RM_OK, or RM_ENOMEM (nothing changed for the threads not yet reached).
 */
static int gl_follow_threads(struct col_golabel *g, struct gl_pid *p)
{
	uint32_t *tids;
	struct gl_thr *keep;
	size_t n, i, j, nk = 0;
	int rv, err = 0;

	if ((rv = gl_list_tids(p->pid, &tids, &n)) == RM_ENOENT)
		n = 0; /* gone: every sampler goes; the scanner forgets the process */
	else if (rv != RM_OK)
		return rv;
	if (!(keep = calloc(n + p->nthr + 1, sizeof(*keep)))) {
		free(tids);
		return RM_ENOMEM;
	}
	/* both lists sorted: a merge */
	for (i = j = 0; i < n || j < p->nthr;) {
		if (j < p->nthr && (i == n || p->thr[j].tid < tids[i])) {
			bpf_link__destroy(p->thr[j++].link); /* the thread is gone */
			g->nthr--;
		} else if (j < p->nthr && p->thr[j].tid == tids[i]) {
			keep[nk++] = p->thr[j++];
			i++;
		} else {
			struct bpf_link *l;

			if (g->nthr >= COL_GOLABEL_THREADS_MAX) {
				if (!g->thr_full_logged++)
					rm_log_warn("goroutine labels: %d threads sampled, the most at once; threads past them "
						    "are not sampled and their CPU is split by the others' samples",
						    COL_GOLABEL_THREADS_MAX);
			} else if ((rv = gl_open_event(g, (pid_t)tids[i], -1, &l, &err)) == RM_OK) {
				keep[nk].tid = tids[i];
				keep[nk++].link = l;
				g->nthr++;
			} else if (rv != RM_ENOENT && !g->thr_fail_logged++) {
				rm_log_warn("failed to sample thread %u of process %u: %s; such threads are tried again "
					    "each window, not logged again", tids[i], p->pid, strerror(err));
			}
			i++;
		}
	}
	free(tids);
	free(p->thr);
	p->thr = keep;
	p->nthr = nk;
	return RM_OK;
}

/* Closes every sampler of p. */
static void gl_drop_threads(struct col_golabel *g, struct gl_pid *p)
{
	size_t i;

	for (i = 0; i < p->nthr; i++)
		bpf_link__destroy(p->thr[i].link);
	g->nthr -= p->nthr;
	free(p->thr);
	p->thr = NULL;
	p->nthr = 0;
}

void col_golabel_follow(struct col_golabel *g)
{
	size_t i;

	for (i = 0; g && g->per_thread && i < g->npids; i++)
		if (gl_follow_threads(g, &g->pids[i]) != RM_OK)
			rm_log_warn("failed to follow the threads of process %u: out of memory", g->pids[i].pid);
}

int col_golabel_open(struct col_golabel **out, const struct col_golabel_cfg *cfg)
{
	struct col_golabel *g;
	uint32_t freq;
	int rv, err;

	if (!out || !cfg)
		return RM_EINVAL;
	*out = NULL;
	freq = cfg->freq_hz ? cfg->freq_hz : COL_GOLABEL_FREQ_DEFAULT;
	if (freq < 10 || freq > 20000)
		return RM_EINVAL;
	if (!(g = calloc(1, sizeof(*g))))
		return RM_ENOMEM;
	g->window_ns = cfg->window_ns ? cfg->window_ns : 1000000000ULL;
	g->offset_ns = (uint64_t)cfg->offset_ns;
	g->period_ns = (1000000000ULL + freq / 2) / freq;
	if (!(g->skel = golabel_bpf__open())) {
		free(g);
		return RM_EBPF;
	}
	g->skel->rodata->window_ns = g->window_ns;
	g->skel->rodata->offset_ns = g->offset_ns;
	g->skel->rodata->netns_ino = cfg->netns_ino;
	if (cfg->tasks_fd > 0) {
		/* the socket hooks' per-thread state: each sample also pending in its thread's */
		if ((err = bpf_map__reuse_fd(g->skel->maps.tasks, cfg->tasks_fd)) != 0) {
			rm_log_warn("failed to share the threads' segment state with the goroutine sampler: %s",
				    strerror(-err));
			col_golabel_close(g);
			return RM_EBPF;
		}
		g->skel->rodata->have_tasks = 1;
	}
	if ((err = golabel_bpf__load(g->skel)) != 0) {
		rm_log_warn("failed to load the goroutine label programs: %s", strerror(-err));
		col_golabel_close(g);
		return err == -EPERM || err == -EACCES ? RM_EPERM : RM_EBPF;
	}
	if (!(g->recv = bpf_program__attach(g->skel->progs.golabel_recv))) {
		err = errno;
		rm_log_warn("failed to attach the goroutine label receive hook: %s", strerror(err));
		col_golabel_close(g);
		return gl_errno_rv(err);
	}
	if (!(g->send = bpf_program__attach(g->skel->progs.golabel_send))) {
		err = errno;
		rm_log_warn("failed to attach the goroutine label send hook: %s", strerror(err));
		col_golabel_close(g);
		return gl_errno_rv(err);
	}
	g->per_thread = cfg->per_thread;
	g->creations_from_start = cfg->creations_from_start;
	if (!g->per_thread && (rv = gl_attach_samplers(g)) != RM_OK) {
		col_golabel_close(g);
		return rv;
	}
	*out = g;
	return RM_OK;
}

/* The kernel's bit of process pid (golabel.h, GOLABEL_PID_BITS): its word in pid_bits and the mask. */
static void gl_pid_bit(uint32_t pid, size_t *word, uint64_t *mask)
{
	*word = (pid / 64) & (GOLABEL_PID_BITS / 64 - 1);
	*mask = 1ULL << (pid % 64);
}

/* Clears process pid's bit unless another watched process shares it (called after it left g->pids). */
static void gl_pid_bit_clear(struct col_golabel *g, uint32_t pid)
{
	uint64_t mask, m;
	size_t w, v, i;

	gl_pid_bit(pid, &w, &mask);
	for (i = 0; i < g->npids; i++) {
		gl_pid_bit(g->pids[i].pid, &v, &m);
		if (v == w && m == mask)
			return;
	}
	__atomic_and_fetch(&g->skel->bss->pid_bits[w], ~mask, __ATOMIC_RELEASE);
}

static struct gl_pid *gl_find_pid(struct col_golabel *g, uint32_t pid)
{
	size_t i;

	for (i = 0; i < g->npids; i++)
		if (g->pids[i].pid == pid)
			return &g->pids[i];
	return NULL;
}

static struct gl_exe *gl_find_exe(struct col_golabel *g, dev_t dev, ino_t ino)
{
	size_t i;

	for (i = 0; i < g->nexes; i++)
		if (g->exes[i].dev == dev && g->exes[i].ino == ino)
			return &g->exes[i];
	return NULL;
}

int col_golabel_watch(struct col_golabel *g, uint32_t pid, const char *exe_path)
{
	struct golabel_proc p = { 0 };
	struct col_gort_sched s;
	struct gl_exe *x;
	struct stat st;
	uint64_t mask;
	size_t w;
	int rv, added = 0;

	if (!g || !pid || !exe_path)
		return RM_EINVAL;
	if (gl_find_pid(g, pid))
		return RM_OK;
	if (g->npids == GOLABEL_PIDS_MAX)
		return RM_EFULL;
	if (stat(exe_path, &st) != 0) {
		rm_log_warn("failed to stat '%s': %s", exe_path, strerror(errno));
		return RM_EIO;
	}
	if ((rv = col_gort_sched_inspect(exe_path, &s)) != RM_OK)
		return rv;
	if (s.g_m_off > UINT32_MAX || s.m_curg_off > UINT32_MAX || s.g_startpc_off > UINT32_MAX ||
	    s.g_goid_off > UINT32_MAX)
		return RM_ENOTSUP;
	p.g_tls_off = s.g_tls_off;
	p.g_m_off = (uint32_t)s.g_m_off;
	p.m_curg_off = (uint32_t)s.m_curg_off;
	p.g_startpc_off = (uint32_t)s.g_startpc_off;
	p.g_goid_off = (uint32_t)s.g_goid_off;
	p.rt_lo = s.rt_text_lo;
	p.rt_hi = s.rt_text_hi;
	if (!(x = gl_find_exe(g, st.st_dev, st.st_ino))) {
		x = &g->exes[g->nexes];
		memset(x, 0, sizeof(*x));
		x->dev = st.st_dev;
		x->ino = st.st_ino;
		x->site_off = s.site_off;
		x->ready_off = s.ready_off;
		/* every process of the executable (pid -1): the program looks the process up in pids */
		if (g->creations_from_start) {
			if (!(x->newg = bpf_program__attach_uprobe(g->skel->progs.golabel_newg, false, -1, exe_path,
								   (size_t)s.site_off))) {
				rm_log_warn("failed to attach the goroutine creation uprobe to '%s': %s", exe_path,
					    strerror(errno));
				return RM_EBPF;
			}
			x->label_sends = 1;
			g->skel->bss->label_sends = 1;
		}
		g->nexes++;
		added = 1;
	}
	p.label_sends = (uint32_t)x->label_sends;
	if (bpf_map_update_elem(bpf_map__fd(g->skel->maps.pids), &pid, &p, BPF_ANY) != 0) {
		rv = errno == E2BIG ? RM_EFULL : RM_EBPF;
		if (added) {
			bpf_link__destroy(x->newg);
			g->nexes--;
		}
		return rv;
	}
	/* after the map's entry: the programs look the process up from now on */
	gl_pid_bit(pid, &w, &mask);
	__atomic_or_fetch(&g->skel->bss->pid_bits[w], mask, __ATOMIC_RELEASE);
	memset(&g->pids[g->npids], 0, sizeof(g->pids[0]));
	g->pids[g->npids].pid = pid;
	g->pids[g->npids].dev = st.st_dev;
	g->pids[g->npids].ino = st.st_ino;
	if (g->per_thread && gl_follow_threads(g, &g->pids[g->npids]) != RM_OK)
		rm_log_warn("failed to follow the threads of process %u: out of memory; tried again at the next "
			    "window", pid);
	g->npids++;
	return RM_OK;
}

void col_golabel_forget(struct col_golabel *g, uint32_t pid)
{
	struct gl_pid *p, gone;
	struct gl_exe *x;
	size_t i;

	if (!g || !(p = gl_find_pid(g, pid)))
		return;
	bpf_map_delete_elem(bpf_map__fd(g->skel->maps.pids), &pid);
	gl_drop_threads(g, p);
	gone = *p;
	*p = g->pids[--g->npids];
	gl_pid_bit_clear(g, pid);
	for (i = 0; i < g->npids; i++)
		if (g->pids[i].dev == gone.dev && g->pids[i].ino == gone.ino)
			return; /* the executable still runs in a watched process */
	if ((x = gl_find_exe(g, gone.dev, gone.ino)) != NULL) {
		bpf_link__destroy(x->newg);
		bpf_link__destroy(x->ready);
		*x = g->exes[--g->nexes];
		/* sends to other nodes leave the hook at once again when no executable left labels by them */
		g->skel->bss->label_sends = 0;
		for (i = 0; i < g->nexes; i++)
			if (g->exes[i].label_sends)
				g->skel->bss->label_sends = 1;
	}
}

/*
 * Attaches prog as a uprobe at *off in process pid's executable (for every
 * process running it) into *link: 1 if attached; 0 if the process ended
 * (another of the executable may ask again) or attaching failed (logged,
 * saying what is lost; *off becomes 0, so nothing asks again).
 */
static int gl_attach_exe(struct bpf_program *prog, uint32_t pid, uint64_t *off, struct bpf_link **link,
			 const char *what, const char *lost)
{
	char path[32];
	int err;

	snprintf(path, sizeof(path), "/proc/%u/exe", pid);
	if ((*link = bpf_program__attach_uprobe(prog, false, -1, path, (size_t)*off)) != NULL)
		return 1;
	if ((err = errno) == ENOENT || err == ESRCH)
		return 0;
	rm_log_warn("failed to attach the goroutine %s uprobe to '%s': %s; %s", what, path, strerror(err), lost);
	*off = 0;
	return 0;
}

/*
 * Process pid's samples of one window ask for the hand-off uprobe (see
 * GL_HANDOFF_MIN): attaches it to x, the process's executable, unless it is
 * there, or cannot be (said once; the executable's goroutines then keep
 * their own labels when readied). A process that ended before it could be
 * attached through leaves it for the next window to ask.
 */
static void gl_want_handoffs(struct col_golabel *g, struct gl_exe *x, uint32_t pid, const char *why)
{
	if (x->ready || !x->ready_off)
		return;
	if (gl_attach_exe(g->skel->progs.golabel_ready, pid, &x->ready_off, &x->ready, "hand-off",
			  "a goroutine readied by another keeps its own label"))
		rm_log_info("process %u: %s; following hand-offs between its goroutines from now on", pid, why);
}

/*
 * From now on the sends of x's processes label their goroutines that have
 * none (golabel_proc.label_sends), for those watched now and later.
 */
static void gl_label_sends(struct col_golabel *g, struct gl_exe *x)
{
	int fd = bpf_map__fd(g->skel->maps.pids);
	struct golabel_proc p;
	size_t i;

	x->label_sends = 1;
	g->skel->bss->label_sends = 1;
	for (i = 0; i < g->npids; i++) {
		if (g->pids[i].dev != x->dev || g->pids[i].ino != x->ino ||
		    bpf_map_lookup_elem(fd, &g->pids[i].pid, &p) != 0)
			continue;
		p.label_sends = 1;
		if (bpf_map_update_elem(fd, &g->pids[i].pid, &p, BPF_EXIST) != 0)
			rm_log_warn("failed to have process %u's sends label its goroutines: %s", g->pids[i].pid,
				    strerror(errno));
	}
}

/*
 * Process pid's samples of window win show user goroutines working without
 * a label (see GL_HANDOFF_MIN): attaches the creation uprobe to x, its
 * executable unless it is there; for a window that began after it was (or
 * could not be) attached, asks for the hand-off uprobe. A
 * process that ended before either could be attached through leaves it for
 * the next window to ask.
 */
static void gl_want_follow(struct col_golabel *g, struct gl_exe *x, uint32_t pid, uint64_t win, const char *why)
{
	if (x->newg || !x->site_off) {
		if (win >= x->newg_win + GL_FOLLOW_SETTLE)
			gl_want_handoffs(g, x, pid, why);
		return;
	}
	x->newg_win = col_golabel_window(g); /* windows drained with this one may be later, not after it */
	if (gl_attach_exe(g->skel->progs.golabel_newg, pid, &x->site_off, &x->newg, "creation",
			  "a goroutine keeps no label from its creator"))
		rm_log_info("process %u: %s; following the goroutines it creates from now on", pid, why);
	if (x->newg || !x->site_off)
		gl_label_sends(g, x);
}

/* Looks at each (window, process) of rows[0..n) (sorted) for goroutines working without a label. */
static void gl_check_unlabelled(struct col_golabel *g, const struct gl_row *rows, size_t n)
{
	size_t i, j;

	for (i = 0; i < n; i = j) {
		uint64_t all = 0, zero = 0;
		struct gl_pid *p = gl_find_pid(g, rows[i].c.pid);
		struct gl_exe *x = p ? gl_find_exe(g, p->dev, p->ino) : NULL;
		const char *over = "a window";

		for (j = i; j < n && rows[j].win == rows[i].win && rows[j].c.pid == rows[i].c.pid; j++) {
			all += rows[j].c.samples;
			if (!rows[j].c.cookie)
				zero += rows[j].c.samples;
		}
		if (!x)
			continue;
		if (!x->newg && x->site_off) { /* the creation uprobe: over the recent windows */
			p->acc_all += all;
			p->acc_zero += zero;
			all = p->acc_all;
			zero = p->acc_zero;
			over = "its recent windows";
			if (p->acc_all > GL_ACC_HALVE) {
				p->acc_all /= 2;
				p->acc_zero /= 2;
			}
		}
		if (zero >= GL_HANDOFF_MIN && zero >= all / GL_HANDOFF_DIV) {
			char why[160];

			snprintf(why, sizeof(why), "%" PRIu64 " of %" PRIu64 " goroutine samples in %s were of "
				 "goroutines without a label", zero, all, over);
			gl_want_follow(g, x, rows[i].c.pid, rows[i].win, why);
		}
	}
}

/*
 * Each watched process that received GL_HANDOFF_MIN of its own sends made by
 * goroutines without a label over connections to itself
 * (golabel_proc.bare_sends: a connection's writer goroutine, fed by its
 * callers over a channel, as grpc-go's client) asks for the hand-off uprobe, through which the writer
 * carries its callers' labels to the receiving end.
 */
static void gl_check_bare_sends(struct col_golabel *g)
{
	int fd = bpf_map__fd(g->skel->maps.pids);
	struct golabel_proc p;
	size_t i;

	for (i = 0; i < g->npids; i++) {
		struct gl_exe *x;
		char why[160];

		if (bpf_map_lookup_elem(fd, &g->pids[i].pid, &p) != 0 || p.bare_sends < GL_HANDOFF_MIN ||
		    !(x = gl_find_exe(g, g->pids[i].dev, g->pids[i].ino)))
			continue;
		snprintf(why, sizeof(why), "%u of its own sends without a label received over connections to itself",
			 p.bare_sends);
		gl_want_handoffs(g, x, g->pids[i].pid, why);
	}
}

static int gl_row_cmp(const void *a, const void *b)
{
	const struct gl_row *x = a, *y = b;

	if (x->win != y->win)
		return x->win < y->win ? -1 : 1;
	if (x->c.pid != y->c.pid)
		return x->c.pid < y->c.pid ? -1 : 1;
	if (x->c.cookie != y->c.cookie)
		return x->c.cookie < y->c.cookie ? -1 : 1;
	return 0;
}

int col_golabel_drain(struct col_golabel *g, uint64_t before_win, col_golabel_fn fn, void *arg)
{
	struct golabel_ckey key, next, *prev = NULL;
	struct gl_row *rows = NULL, *nr;
	struct col_golabel_count *cs;
	size_t n = 0, cap = 0, i, j, k;
	int fd, err;

	if (!g || !fn)
		return RM_EINVAL;
	fd = bpf_map__fd(g->skel->maps.counts);
	/* the keys first: deleting while walking would restart the walk */
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (key.win >= before_win)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			if (!(nr = realloc(rows, cap * sizeof(*rows)))) {
				free(rows);
				return RM_ENOMEM;
			}
			rows = nr;
		}
		memset(&rows[n], 0, sizeof(rows[n]));
		rows[n].win = key.win;
		rows[n].c.cookie = key.cookie;
		rows[n].c.pid = key.tgid;
		n++;
	}
	if ((err = errno) != ENOENT) {
		rm_log_warn("failed to walk the goroutine label counts: %s", strerror(err));
		free(rows);
		return RM_EBPF;
	}
	if (n == 0)
		return RM_OK;
	if (!(cs = calloc(n, sizeof(*cs)))) {
		free(rows);
		return RM_ENOMEM;
	}
	/* each count read and deleted in one step: a late increment is not read twice */
	for (i = j = 0; i < n; i++) {
		uint64_t v = 0;

		memset(&key, 0, sizeof(key));
		key.win = rows[i].win;
		key.cookie = rows[i].c.cookie;
		key.tgid = rows[i].c.pid;
		if (bpf_map_lookup_and_delete_elem(fd, &key, &v) != 0)
			continue;
		if (!v)
			continue;
		rows[i].c.samples = v;
		rows[j++] = rows[i];
	}
	n = j;
	qsort(rows, n, sizeof(*rows), gl_row_cmp);
	gl_check_unlabelled(g, rows, n);
	gl_check_bare_sends(g);
	for (i = 0; i < n; i = j) {
		for (j = i, k = 0; j < n && rows[j].win == rows[i].win; j++)
			cs[k++] = rows[j].c;
		fn(arg, rows[i].win, cs, k, g->period_ns);
	}
	free(cs);
	free(rows);
	return RM_OK;
}

uint64_t col_golabel_window(const struct col_golabel *g)
{
	return (rm_clock_mono_ns() + g->offset_ns) / g->window_ns;
}

void col_golabel_stats(struct col_golabel *g, struct col_golabel_stats *out)
{
	int ncpu = libbpf_num_possible_cpus(), fd, c;
	uint64_t *per, sum[GOLABEL_ST_COUNT] = { 0 };
	uint32_t i;

	memset(out, 0, sizeof(*out));
	if (!g || ncpu <= 0 || !(per = calloc((size_t)ncpu, sizeof(*per))))
		return;
	fd = bpf_map__fd(g->skel->maps.stats);
	for (i = 0; i < GOLABEL_ST_COUNT; i++) {
		if (bpf_map_lookup_elem(fd, &i, per) != 0)
			continue;
		for (c = 0; c < ncpu; c++)
			sum[i] += per[c];
	}
	free(per);
	out->samples = sum[GOLABEL_ST_SAMPLES];
	out->lost = sum[GOLABEL_ST_LOST];
	out->unread = sum[GOLABEL_ST_UNREAD];
	out->reads = sum[GOLABEL_ST_READS];
	out->reads_bad = sum[GOLABEL_ST_READS_BAD];
	out->newg = sum[GOLABEL_ST_NEWG];
	out->inherit = sum[GOLABEL_ST_INHERIT];
	out->handed = sum[GOLABEL_ST_HANDED];
	out->origin = sum[GOLABEL_ST_ORIGIN];
	out->sent = sum[GOLABEL_ST_SENT];
	for (size_t x = 0; x < g->nexes; x++) {
		out->creation_exes += g->exes[x].newg != NULL;
		out->handoff_exes += g->exes[x].ready != NULL;
	}
	out->threads = g->nthr;
}

uint64_t col_golabel_lost(struct col_golabel *g)
{
	struct col_golabel_stats st;

	col_golabel_stats(g, &st);
	return st.lost;
}

void col_golabel_close(struct col_golabel *g)
{
	size_t i;
	int c;

	if (!g)
		return;
	for (i = 0; i < g->npids; i++)
		gl_drop_threads(g, &g->pids[i]);
	for (c = 0; c < g->nsamplers; c++)
		bpf_link__destroy(g->samplers[c]);
	free(g->samplers);
	for (i = 0; i < g->nexes; i++) {
		bpf_link__destroy(g->exes[i].newg);
		bpf_link__destroy(g->exes[i].ready);
	}
	bpf_link__destroy(g->recv);
	bpf_link__destroy(g->send);
	golabel_bpf__destroy(g->skel);
	free(g);
}

int col_golabel_prog_stats(const struct col_golabel *g, col_progstat_fn fn, void *arg)
{
	return col_progstat_each(g->skel->obj, fn, arg);
}
