/*
 * col_replay.c - the replay backend (col_replay.h): the user-space
 * environment of the segmenter (per-CPU state and window slots, per-thread
 * state by tid, the emit hook), the feeding of a time-ordered event stream
 * into it, the end-of-stream sweep and window reports, and the capture sink
 * with its identity check. Owns everything of one replay run; keeps no state
 * between calls.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "col_replay.h"
#include "rametr.h"
#include "rm_err.h"

/* ---- the segmenter's environment ---- */

struct col_replay_run;

struct rm_env {
	__u64 window_ns;
	__u64 offset_ns;
	__u32 cpu;
	__u32 follow_replies;
	__u64 win_lo, win_hi, win_cur; /* rm_win's last answer */
	__u32 rt;                      /* segmenter.h: always 0 here (no runtime is recognised in a replay) */
	struct col_replay_run *run;
};

static struct rm_cpu *col_replay_env_cpu(struct rm_env *e);
static struct rm_wintot *col_replay_env_wintot(struct rm_env *e, __u64 win);
static int col_replay_env_emit(struct rm_env *e, const struct rm_part *part, const struct rm_counts *c);
static __u64 col_replay_env_steal(struct rm_env *e);

#define RM_INLINE static inline
#define rm_env_cpu(e) col_replay_env_cpu(e)
#define rm_env_wintot(e, win) col_replay_env_wintot((e), (win))
#define rm_env_emit(e, p, c) col_replay_env_emit((e), (p), (c))
#define rm_env_steal(e) col_replay_env_steal(e)

#include "segmenter.h"

#include "banned.h"

#define COL_REPLAY_ERRLEN 384

struct col_replay_thread {
	struct col_replay_thread *next;  /* hash chain */
	uint32_t tid;
	uint32_t cpu;                    /* CPU of its last event (for the final sweep) */
	struct rm_task t;
	/* the sender of the datagram that began its segment, known at its next socket event (as rametr.bpf.c) */
	int dg_pending;
	uint64_t dg_seg, dg_cookie;
	__u32 dg_addr[4], dg_port;
};

/* The bytes last received on a server-side socket (follow-replies), as rametr.bpf.c keeps them. */
struct col_replay_inb {
	struct col_replay_inb *next;     /* hash chain */
	uint64_t cookie;
	struct rm_inb in;
};

#define COL_REPLAY_INB_BUCKETS 256

struct col_replay_cpu {
	struct rm_cpu c;
	int known;                       /* cur is known (a switch or an event told) */
	uint32_t cur;                    /* thread running on the CPU; 0 = idle */
	uint32_t cur_line;               /* line that told */
	struct rm_wintot slot[RM_WIN_SLOTS];
	unsigned char claimed[RM_WIN_SLOTS];
	uint64_t steal;                  /* the stream's last steal event on this CPU */
};

struct col_replay_run {
	const char *name;
	struct col_events_hdr hdr;
	const struct col_sink *sink;
	unsigned fail_every;
	int follow_replies;
	struct col_replay_cpu *cpus;
	struct col_replay_thread **tab;  /* hash by tid, tabsize a power of two */
	struct col_replay_inb *inbs[COL_REPLAY_INB_BUCKETS]; /* by socket cookie */
	size_t tabsize, nthreads;
	struct rm_totals *acc;           /* [nwin] harvested totals of window wmin + i */
	uint64_t wmin, nwin;
	uint64_t span_lo, span_hi;       /* [first ts, last ts] + offset_ns */
	int sink_rv;                     /* first error of sink->part */
	uint64_t bad_win;                /* window outside the stream asked for (internal error) */
	int internal;
	struct col_replay_stats st;
	struct rm_env env;
	char err[COL_REPLAY_ERRLEN];
};

static struct rm_cpu *col_replay_env_cpu(struct rm_env *e)
{
	return &e->run->cpus[e->cpu].c;
}

/* What the eBPF loader's poll does: keep what a slot holds before it is reused. */
static void col_replay_harvest(struct col_replay_run *run, const struct rm_wintot *s)
{
	/* slots are only claimed for windows inside the stream (checked at claim) */
	col_totals_add_kernel(&run->acc[s->win - run->wmin], s);
}

static struct rm_wintot *col_replay_env_wintot(struct rm_env *e, __u64 win)
{
	struct col_replay_run *run = e->run;
	struct col_replay_cpu *c = &run->cpus[e->cpu];
	unsigned i = (unsigned)(win % RM_WIN_SLOTS);
	struct rm_wintot *s = &c->slot[i];

	if (c->claimed[i]) {
		if (s->win == win)
			return s;
		if (s->win > win)
			return NULL;
	}
	if (win < run->wmin || win - run->wmin >= run->nwin) {
		/* the segmenter asked for a window no event of the stream is in */
		if (!run->internal)
			run->bad_win = win;
		run->internal = 1;
		return NULL;
	}
	if (c->claimed[i])
		col_replay_harvest(run, s);
	memset(s, 0, sizeof(*s));
	s->win = win;
	c->claimed[i] = 1;
	return s;
}

static __u64 col_replay_env_steal(struct rm_env *e)
{
	return e->run->cpus[e->cpu].steal;
}

static int col_replay_env_emit(struct rm_env *e, const struct rm_part *part, const struct rm_counts *c)
{
	struct col_replay_run *run = e->run;
	struct rm_part copy = *part, *p = &copy;
	int rv;

	p->cpu_ns = c->cpu_ns;
	p->runq_ns = c->runq_ns;
	p->rx_bytes = c->rx_bytes;
	p->tx_bytes = c->tx_bytes;
	p->disk_read = c->disk_read;
	p->disk_write = c->disk_write;

	run->st.emits++;
	if (run->sink_rv)
		return -1;
	if (run->fail_every && run->st.emits % run->fail_every == 0) {
		struct col_replay_cpu *c = &run->cpus[e->cpu];
		unsigned i = (unsigned)(p->win % RM_WIN_SLOTS);

		run->st.failed_emits++;
		if (c->claimed[i] && c->slot[i].win > p->win) {
			/* rm_flush will get NULL for this window: record what it loses */
			run->st.late.dropped_parts++;
			run->st.late.lost_ns += p->cpu_ns;
			run->st.late.unseg_rx += p->rx_bytes;
			run->st.late.unseg_tx += p->tx_bytes;
			run->st.late.unseg_disk_read += p->disk_read;
			run->st.late.unseg_disk_write += p->disk_write;
			run->st.late.dropped_cpu_ns += p->cpu_ns;
			run->st.late.dropped_rx += p->rx_bytes;
			run->st.late.dropped_tx += p->tx_bytes;
			run->st.late.dropped_disk_read += p->disk_read;
			run->st.late.dropped_disk_write += p->disk_write;
		}
		return -1;
	}
	rv = run->sink->part(run->sink->arg, p);
	if (rv != RM_OK) {
		run->sink_rv = rv;
		return -1;
	}
	run->st.parts++;
	return 0;
}

/* ---- threads ---- */

static size_t col_replay_hash(const struct col_replay_run *run, uint32_t tid)
{
	return (size_t)((tid * 2654435761u) & (run->tabsize - 1));
}

static struct col_replay_thread *col_replay_find(const struct col_replay_run *run, uint32_t tid)
{
	struct col_replay_thread *t;

	for (t = run->tab[col_replay_hash(run, tid)]; t; t = t->next)
		if (t->tid == tid)
			return t;
	return NULL;
}

static int col_replay_grow(struct col_replay_run *run)
{
	size_t n = run->tabsize * 2, i;
	struct col_replay_thread **nt = calloc(n, sizeof(*nt)), **old = run->tab;
	size_t oldsize = run->tabsize;

	if (!nt)
		return RM_ENOMEM;
	run->tab = nt;
	run->tabsize = n;
	for (i = 0; i < oldsize; i++) {
		struct col_replay_thread *t = old[i], *next;

		for (; t; t = next) {
			size_t h = col_replay_hash(run, t->tid);

			next = t->next;
			t->next = nt[h];
			nt[h] = t;
		}
	}
	free(old);
	return RM_OK;
}

/* New zeroed state for tid (which has none). */
static int col_replay_add(struct col_replay_run *run, uint32_t tid, uint32_t cpu, struct col_replay_thread **out)
{
	struct col_replay_thread *t;
	size_t h;

	if (run->nthreads >= run->tabsize && col_replay_grow(run) != RM_OK)
		return RM_ENOMEM;
	if (!(t = calloc(1, sizeof(*t))))
		return RM_ENOMEM;
	t->tid = tid;
	t->cpu = cpu;
	h = col_replay_hash(run, tid);
	t->next = run->tab[h];
	run->tab[h] = t;
	run->nthreads++;
	run->st.threads++;
	*out = t;
	return RM_OK;
}

static void col_replay_del(struct col_replay_run *run, uint32_t tid)
{
	struct col_replay_thread **pp = &run->tab[col_replay_hash(run, tid)], *t;

	for (; (t = *pp); pp = &t->next) {
		if (t->tid == tid) {
			*pp = t->next;
			free(t);
			run->nthreads--;
			return;
		}
	}
}

static struct rm_task *col_replay_task(struct col_replay_thread *t, uint32_t cpu)
{
	if (!t)
		return NULL;
	t->cpu = cpu;
	return &t->t;
}

/* ---- feeding ---- */

static int col_replay_fail(struct col_replay_run *run, int rv, uint32_t line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int col_replay_fail(struct col_replay_run *run, int rv, uint32_t line, const char *fmt, ...)
{
	char msg[COL_REPLAY_ERRLEN - 64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line)
		snprintf(run->err, sizeof(run->err), "%s:%u: %s", run->name, line, msg);
	else
		snprintf(run->err, sizeof(run->err), "%s: %s", run->name, msg);
	return rv;
}

/* tid must be the thread running on ev's CPU (an event closing its CPU slice). */
static int col_replay_running(struct col_replay_run *run, const struct col_event *ev, uint32_t tid)
{
	struct col_replay_cpu *c = &run->cpus[ev->cpu];

	if (!c->known) {
		c->known = 1;
		c->cur = tid;
		c->cur_line = ev->line;
		return RM_OK;
	}
	if (c->cur == tid)
		return RM_OK;
	if (c->cur == 0)
		return col_replay_fail(run, RM_EPROTO, ev->line, "'%s' by tid %u on cpu %u, which is idle since line %u",
				       col_ev_type_name(ev->type), tid, ev->cpu, c->cur_line);
	return col_replay_fail(run, RM_EPROTO, ev->line, "'%s' by tid %u on cpu %u, which runs tid %u since line %u",
			       col_ev_type_name(ev->type), tid, ev->cpu, c->cur, c->cur_line);
}

static int col_replay_switch(struct col_replay_run *run, const struct col_event *ev)
{
	struct col_replay_cpu *c = &run->cpus[ev->cpu];
	uint32_t prev = ev->u.sw.prev_tid, next = ev->u.sw.next_tid;
	struct rm_task *pt = NULL, *nt = NULL;

	if (c->known && c->cur != prev)
		return col_replay_fail(run, RM_EPROTO, ev->line,
				       "switch from tid %u on cpu %u, which runs tid %u since line %u", prev, ev->cpu,
				       c->cur, c->cur_line);
	if (prev)
		pt = col_replay_task(col_replay_find(run, prev), ev->cpu);
	if (next)
		nt = col_replay_task(col_replay_find(run, next), ev->cpu);
	rm_on_switch(&run->env, pt, prev == 0, ev->u.sw.prev_state == 'R', ev->u.sw.prev_state == 'S', nt,
		     ev->ts_ns);
	c->known = 1;
	c->cur = next;
	c->cur_line = ev->line;
	return RM_OK;
}

static struct col_replay_inb *col_replay_inb(struct col_replay_run *run, uint64_t cookie, int create)
{
	struct col_replay_inb **b = &run->inbs[(cookie * 0x9E3779B97F4A7C15ULL) >> 56], *i;

	for (i = *b; i; i = i->next)
		if (i->cookie == cookie)
			return i;
	if (!create || !(i = calloc(1, sizeof(*i))))
		return NULL;
	i->cookie = cookie;
	i->next = *b;
	*b = i;
	return i;
}

/* As rametr.bpf.c's rm_dgram_resolve: t's socket event; the datagram sender its last recv wrote out is known. */
static void col_replay_dgram_resolve(struct col_replay_thread *t)
{
	if (!t || !t->dg_pending)
		return;
	rm_on_dgram_src(&t->t, t->dg_seg, t->dg_cookie, t->dg_addr, t->dg_port);
	t->dg_pending = 0;
}

static int col_replay_recv(struct col_replay_run *run, const struct col_event *ev)
{
	const struct col_ev_io *io = &ev->u.io;
	struct col_replay_thread *t;
	int rv;

	if ((rv = col_replay_running(run, ev, io->tid)) != RM_OK)
		return rv;
	if (!io->bytes)
		return RM_OK;
	t = col_replay_find(run, io->tid);
	if (!t && (rv = col_replay_add(run, io->tid, ev->cpu, &t)) != RM_OK)
		return col_replay_fail(run, rv, ev->line, "out of memory");
	t->cpu = ev->cpu;
	if (run->env.follow_replies && io->srv) {
		struct col_replay_inb *in = col_replay_inb(run, io->tuple.cookie, 1);

		if (!in)
			return col_replay_fail(run, RM_ENOMEM, ev->line, "out of memory");
		rm_inb_update(&in->in, io->has_seq, io->seq, io->bytes);
		in->in.reader = io->tid; /* as rametr.bpf.c: a reply by its reader sets own_reply */
	}
	col_replay_dgram_resolve(t);
	if (io->dgram) {
		rm_on_dgram_recv(&run->env, &t->t, ev->ts_ns, io->pid, io->tid, &io->tuple, io->bytes,
				 run->env.follow_replies && io->srv);
		/* an unconnected socket: the sender is learnt at the thread's next socket event */
		if (io->has_from && !io->tuple.rport && t->t.mode == RM_MODE_SEG) {
			t->dg_pending = 1;
			t->dg_seg = t->t.cur.seg_id;
			t->dg_cookie = io->tuple.cookie;
			memcpy(t->dg_addr, io->from, sizeof(t->dg_addr));
			t->dg_port = io->from_port;
		}
	} else {
		rm_on_recv(&run->env, &t->t, ev->ts_ns, io->pid, io->tid, &io->tuple, io->bytes, io->has_seq, io->seq,
			   run->env.follow_replies && io->srv);
	}
	/* as rametr.bpf.c: the thread's name goes into a segment at its start */
	if (io->comm[0] && (t->t.cur.flags & RM_PF_START) && t->t.cur.start_ns == ev->ts_ns)
		memcpy(t->t.cur.comm, io->comm, sizeof(t->t.cur.comm));
	return RM_OK;
}

static int col_replay_send(struct col_replay_run *run, const struct col_event *ev)
{
	const struct col_ev_io *io = &ev->u.io;
	int srv = run->env.follow_replies && io->srv, rv;
	struct col_replay_inb *in = srv ? col_replay_inb(run, io->tuple.cookie, 0) : NULL;
	struct col_replay_thread *t;

	if ((rv = col_replay_running(run, ev, io->tid)) != RM_OK)
		return rv;
	if (!io->bytes)
		return RM_OK;
	t = col_replay_find(run, io->tid);
	/* as rametr.bpf.c: follow-replies follows a thread that replies */
	if (!t && srv && (rv = col_replay_add(run, io->tid, ev->cpu, &t)) != RM_OK)
		return col_replay_fail(run, rv, ev->line, "out of memory");
	col_replay_dgram_resolve(t);
	rm_on_send(&run->env, col_replay_task(t, ev->cpu), ev->ts_ns, io->pid, io->tid, &io->tuple, io->bytes,
		   io->has_seq, io->seq, srv, in ? &in->in : NULL);
	if (in)
		rm_inb_replied(&in->in);
	if (t && srv && t->t.mode == RM_MODE_ASSOC && io->comm[0] && !t->t.cur.comm[0])
		memcpy(t->t.cur.comm, io->comm, sizeof(t->t.cur.comm));
	return RM_OK;
}

static int col_replay_fork(struct col_replay_run *run, const struct col_event *ev)
{
	struct col_replay_thread *p = col_replay_find(run, ev->u.fork.ptid), *c;
	int rv;

	if (col_replay_find(run, ev->u.fork.ctid))
		return col_replay_fail(run, RM_EPROTO, ev->line, "fork of tid %u, which exists already (no exit seen)",
				       ev->u.fork.ctid);
	if (!p || p->t.mode != RM_MODE_SEG)
		return RM_OK;
	if ((rv = col_replay_add(run, ev->u.fork.ctid, ev->cpu, &c)) != RM_OK)
		return col_replay_fail(run, rv, ev->line, "out of memory");
	if (!rm_on_fork(&run->env, &p->t, &c->t, ev->ts_ns, ev->u.fork.cpid, ev->u.fork.ctid))
		col_replay_del(run, ev->u.fork.ctid);
	return RM_OK;
}

static int col_replay_exit(struct col_replay_run *run, const struct col_event *ev)
{
	struct col_replay_thread *t;
	int rv;

	if ((rv = col_replay_running(run, ev, ev->u.exit.tid)) != RM_OK)
		return rv;
	if (!(t = col_replay_find(run, ev->u.exit.tid)))
		return RM_OK;
	rm_on_exit(&run->env, &t->t, ev->ts_ns);
	col_replay_del(run, ev->u.exit.tid);
	return RM_OK;
}

static int col_replay_disk(struct col_replay_run *run, const struct col_event *ev)
{
	int rv;

	if ((rv = col_replay_running(run, ev, ev->u.disk.tid)) != RM_OK)
		return rv;
	if (!ev->u.disk.bytes)
		return RM_OK;
	rm_on_disk(&run->env, col_replay_task(col_replay_find(run, ev->u.disk.tid), ev->cpu), ev->ts_ns,
		   ev->u.disk.bytes, ev->u.disk.is_write);
	return RM_OK;
}

static int col_replay_event(struct col_replay_run *run, const struct col_event *ev)
{
	int rv = RM_OK;

	run->env.cpu = ev->cpu;
	switch (ev->type) {
	case COL_EV_SWITCH:
		rv = col_replay_switch(run, ev);
		break;
	case COL_EV_WAKEUP: {
		/* the woken thread is not on this CPU: its cpu stays */
		struct col_replay_thread *t = col_replay_find(run, ev->u.wakeup.tid);
		struct col_replay_thread *w = ev->u.wakeup.by ? col_replay_find(run, ev->u.wakeup.by) : NULL;

		/* by= names a waker of the same process; a pid both know must agree */
		if (w && w != t && (!t || !w->t.cur.pid || !t->t.cur.pid || w->t.cur.pid == t->t.cur.pid))
			rm_on_handoff(&run->env, &w->t, t ? &t->t : NULL, ev->ts_ns);
		rm_on_wakeup(t ? &t->t : NULL, ev->ts_ns);
		break;
	}
	case COL_EV_RECV:
		rv = col_replay_recv(run, ev);
		break;
	case COL_EV_SEND:
		rv = col_replay_send(run, ev);
		break;
	case COL_EV_FORK:
		rv = col_replay_fork(run, ev);
		break;
	case COL_EV_EXIT:
		rv = col_replay_exit(run, ev);
		break;
	case COL_EV_DISK:
		rv = col_replay_disk(run, ev);
		break;
	case COL_EV_STEAL:
		if (ev->u.steal.ns < run->cpus[ev->cpu].steal)
			return col_replay_fail(run, RM_EPROTO, ev->line, "steal of cpu %u goes back from %llu to %llu ns",
					       ev->cpu, (unsigned long long)run->cpus[ev->cpu].steal,
					       (unsigned long long)ev->u.steal.ns);
		run->cpus[ev->cpu].steal = ev->u.steal.ns;
		break;
	}
	if (rv != RM_OK)
		return rv;
	if (run->sink_rv)
		return col_replay_fail(run, run->sink_rv, ev->line, "the sink refused a part: %s",
				       rm_strerror(run->sink_rv));
	if (run->internal)
		return col_replay_fail(run, RM_ESTATE, ev->line, "internal error: window %llu outside the stream",
				       (unsigned long long)run->bad_win);
	return RM_OK;
}

/* ---- the run ---- */

static int col_replay_cmp(const void *a, const void *b)
{
	const struct col_event *x = a, *y = b;

	if (x->ts_ns != y->ts_ns)
		return x->ts_ns < y->ts_ns ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

static int col_replay_cmp_thread(const void *a, const void *b)
{
	const struct col_replay_thread *x = *(const struct col_replay_thread *const *)a;
	const struct col_replay_thread *y = *(const struct col_replay_thread *const *)b;

	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* All events of r, sorted by (ts, line). */
static int col_replay_load(struct col_replay_run *run, struct col_events *r, struct col_event **out, size_t *nout)
{
	struct col_event *ev = NULL, *nev;
	size_t n = 0, cap = 0;
	int rv;

	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			if (!(nev = realloc(ev, cap * sizeof(*ev)))) {
				free(ev);
				return col_replay_fail(run, RM_ENOMEM, 0, "out of memory");
			}
			ev = nev;
		}
		rv = col_events_next(r, &ev[n]);
		if (rv == RM_ENOENT)
			break;
		if (rv != RM_OK) {
			snprintf(run->err, sizeof(run->err), "%s", col_events_error(r));
			free(ev);
			return rv;
		}
		n++;
	}
	qsort(ev, n, sizeof(*ev), col_replay_cmp);
	run->st.events = n;
	*out = ev;
	*nout = n;
	return RM_OK;
}

static int col_replay_sweep(struct col_replay_run *run)
{
	struct col_replay_thread **all, *t;
	size_t i, k = 0;

	if (!run->nthreads)
		return RM_OK;
	if (!(all = calloc(run->nthreads, sizeof(*all))))
		return col_replay_fail(run, RM_ENOMEM, 0, "out of memory");
	for (i = 0; i < run->tabsize; i++)
		for (t = run->tab[i]; t; t = t->next)
			all[k++] = t;
	qsort(all, k, sizeof(*all), col_replay_cmp_thread);
	for (i = 0; i < k && !run->sink_rv; i++) {
		run->env.cpu = all[i]->cpu;
		rm_sweep(&run->env, &all[i]->t);
	}
	free(all);
	if (run->sink_rv)
		return col_replay_fail(run, run->sink_rv, 0, "the sink refused a part: %s", rm_strerror(run->sink_rv));
	if (run->internal)
		return col_replay_fail(run, RM_ESTATE, 0, "internal error: window %llu outside the stream",
				       (unsigned long long)run->bad_win);
	return RM_OK;
}

static int col_replay_report(struct col_replay_run *run)
{
	uint32_t cpu;
	uint64_t i;
	unsigned s;
	int rv;

	for (cpu = 0; cpu < run->hdr.ncpu; cpu++)
		for (s = 0; s < RM_WIN_SLOTS; s++)
			if (run->cpus[cpu].claimed[s])
				col_replay_harvest(run, &run->cpus[cpu].slot[s]);
	for (i = 0; i < run->nwin; i++) {
		struct rm_totals w;
		uint64_t lo = (run->wmin + i) * run->hdr.window_ns, hi = lo + run->hdr.window_ns;

		w = run->acc[i];
		w.win = run->wmin + i;
		if (lo < run->span_lo)
			lo = run->span_lo;
		if (hi > run->span_hi)
			hi = run->span_hi;
		w.capacity_ns = hi > lo ? (uint64_t)run->hdr.ncpu * (hi - lo) : 0;
		if ((rv = run->sink->window(run->sink->arg, &w)) != RM_OK)
			return col_replay_fail(run, rv, 0, "the sink refused window %llu: %s",
					       (unsigned long long)w.win, rm_strerror(rv));
		run->st.windows++;
	}
	return RM_OK;
}

static void col_replay_free_run(struct col_replay_run *run)
{
	size_t i;

	if (run->tab) {
		for (i = 0; i < run->tabsize; i++) {
			struct col_replay_thread *t = run->tab[i], *next;

			for (; t; t = next) {
				next = t->next;
				free(t);
			}
		}
	}
	free(run->tab);
	for (i = 0; i < COL_REPLAY_INB_BUCKETS; i++) {
		struct col_replay_inb *in = run->inbs[i], *next;

		for (; in; in = next) {
			next = in->next;
			free(in);
		}
	}
	free(run->cpus);
	free(run->acc);
}

static int col_replay_reader(struct col_replay_run *run, struct col_events *r, uint64_t max_windows)
{
	struct col_event *ev = NULL;
	size_t n = 0, i;
	int rv;

	run->hdr = *col_events_header(r);
	run->st.hdr = run->hdr;
	run->env.window_ns = run->hdr.window_ns;
	run->env.offset_ns = run->hdr.offset_ns;
	run->env.win_lo = run->env.win_hi = run->env.win_cur = 0;
	run->env.run = run;
	run->env.follow_replies = run->follow_replies;
	if ((rv = col_replay_load(run, r, &ev, &n)) != RM_OK)
		return rv;
	if (n == 0) {
		free(ev);
		return RM_OK;
	}
	run->span_lo = ev[0].ts_ns + run->hdr.offset_ns;
	run->span_hi = ev[n - 1].ts_ns + run->hdr.offset_ns;
	run->wmin = run->span_lo / run->hdr.window_ns;
	run->nwin = run->span_hi / run->hdr.window_ns - run->wmin + 1;
	if (run->nwin > max_windows) {
		free(ev);
		return col_replay_fail(run, RM_EFULL, 0, "the stream spans %llu windows, more than the limit of %llu",
				       (unsigned long long)run->nwin, (unsigned long long)max_windows);
	}
	run->tabsize = 64;
	run->tab = calloc(run->tabsize, sizeof(*run->tab));
	run->cpus = calloc(run->hdr.ncpu, sizeof(*run->cpus));
	run->acc = calloc(run->nwin, sizeof(*run->acc));
	if (!run->tab || !run->cpus || !run->acc) {
		free(ev);
		return col_replay_fail(run, RM_ENOMEM, 0, "out of memory");
	}
	for (i = 0; i < n; i++)
		if ((rv = col_replay_event(run, &ev[i])) != RM_OK)
			break;
	free(ev);
	if (rv != RM_OK)
		return rv;
	if ((rv = col_replay_sweep(run)) != RM_OK)
		return rv;
	return col_replay_report(run);
}

static int col_replay_finish(struct col_replay_run *run, int rv, const struct col_replay_opts *opts)
{
	if (opts && opts->stats)
		*opts->stats = run->st;
	if (rv != RM_OK) {
		if (opts && opts->err && opts->errlen)
			snprintf(opts->err, opts->errlen, "%s", run->err[0] ? run->err : rm_strerror(rv));
		else
			rm_log_error("%s", run->err[0] ? run->err : rm_strerror(rv));
	} else if (opts && opts->err && opts->errlen) {
		opts->err[0] = '\0';
	}
	col_replay_free_run(run);
	return rv;
}

static int col_replay_common(struct col_events *r, int rv, const char *name, const struct col_sink *sink,
			     const struct col_replay_opts *opts)
{
	struct col_replay_run run;

	memset(&run, 0, sizeof(run));
	run.name = name;
	run.sink = sink;
	if (rv == RM_OK) {
		run.name = col_events_name(r);
		run.fail_every = opts ? opts->fail_every : 0;
		run.follow_replies = opts ? opts->follow_replies : 0;
		rv = col_replay_reader(&run, r, opts && opts->max_windows ? opts->max_windows : COL_REPLAY_MAX_WINDOWS);
	}
	rv = col_replay_finish(&run, rv, opts);
	col_events_close(r);
	return rv;
}

int col_replay_file(const char *path, const struct col_sink *sink, const struct col_replay_opts *opts)
{
	struct col_replay_run tmp;
	struct col_events *r = NULL;
	int rv;

	if (!path || !sink || !sink->part || !sink->window)
		return RM_EINVAL;
	memset(&tmp, 0, sizeof(tmp));
	rv = col_events_open(&r, path, tmp.err, sizeof(tmp.err));
	if (rv != RM_OK) {
		tmp.name = path;
		return col_replay_finish(&tmp, rv, opts);
	}
	return col_replay_common(r, rv, path, sink, opts);
}

int col_replay_buf(const char *buf, size_t len, const char *name, const struct col_sink *sink,
		   const struct col_replay_opts *opts)
{
	struct col_replay_run tmp;
	struct col_events *r = NULL;
	int rv;

	if ((!buf && len) || !sink || !sink->part || !sink->window)
		return RM_EINVAL;
	memset(&tmp, 0, sizeof(tmp));
	rv = col_events_open_buf(&r, buf, len, name, tmp.err, sizeof(tmp.err));
	if (rv != RM_OK) {
		tmp.name = name;
		return col_replay_finish(&tmp, rv, opts);
	}
	return col_replay_common(r, rv, name, sink, opts);
}

int col_replay_window(const char *path, uint64_t *window_ns, int64_t *offset_ns)
{
	struct col_events *r = NULL;
	char err[COL_REPLAY_ERRLEN];
	int rv;

	if (!path || !window_ns || !offset_ns)
		return RM_EINVAL;
	if ((rv = col_events_open(&r, path, err, sizeof(err))) != RM_OK) {
		rm_log_error("%s", err);
		return rv;
	}
	*window_ns = col_events_header(r)->window_ns;
	*offset_ns = (int64_t)col_events_header(r)->offset_ns;
	col_events_close(r);
	return RM_OK;
}

/* ---- capture sink ---- */

void col_replay_capture_init(struct col_replay_capture *c)
{
	memset(c, 0, sizeof(*c));
}

void col_replay_capture_release(struct col_replay_capture *c)
{
	if (!c)
		return;
	free(c->parts);
	free(c->wins);
	col_replay_capture_init(c);
}

static int col_replay_capture_part(void *arg, const struct rm_part *p)
{
	struct col_replay_capture *c = arg;

	if (c->nparts == c->parts_cap) {
		size_t n = c->parts_cap ? c->parts_cap * 2 : 32;
		struct rm_part *np = realloc(c->parts, n * sizeof(*np));

		if (!np)
			return RM_ENOMEM;
		c->parts = np;
		c->parts_cap = n;
	}
	c->parts[c->nparts++] = *p;
	return RM_OK;
}

static int col_replay_capture_win(void *arg, const struct rm_totals *w)
{
	struct col_replay_capture *c = arg;

	if (c->nwins == c->wins_cap) {
		size_t n = c->wins_cap ? c->wins_cap * 2 : 32;
		struct rm_totals *nw = realloc(c->wins, n * sizeof(*nw));

		if (!nw)
			return RM_ENOMEM;
		c->wins = nw;
		c->wins_cap = n;
	}
	c->wins[c->nwins++] = *w;
	return RM_OK;
}

struct col_sink col_replay_capture_sink(struct col_replay_capture *c)
{
	struct col_sink s = { c, col_replay_capture_part, col_replay_capture_win };

	return s;
}

/* Index of window win in c->wins (sorted), or -1. */
static long col_replay_capture_find(const struct col_replay_capture *c, uint64_t win)
{
	size_t lo = 0, hi = c->nwins;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->wins[mid].win == win)
			return (long)mid;
		if (c->wins[mid].win < win)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

const struct rm_totals *col_replay_capture_window(const struct col_replay_capture *c, uint64_t win)
{
	size_t i;

	for (i = 0; i < c->nwins; i++)
		if (c->wins[i].win == win)
			return &c->wins[i];
	return NULL;
}

enum { COL_RQ_CPU, COL_RQ_RX, COL_RQ_TX, COL_RQ_DR, COL_RQ_DW, COL_RQ_N };

int col_replay_capture_check(const struct col_replay_capture *c, const struct rm_wintot *late, char *err,
			     size_t errlen)
{
	static const char *const names[COL_RQ_N] = { "cpu", "rx", "tx", "disk_read", "disk_write" };
	uint64_t (*sum)[COL_RQ_N] = NULL, gap[COL_RQ_N] = { 0 }, want[COL_RQ_N] = { 0 };
	size_t i;
	int r, rv = RM_OK;

	if (err && errlen)
		err[0] = '\0';
	for (i = 1; i < c->nwins; i++) {
		if (c->wins[i].win <= c->wins[i - 1].win) {
			if (err)
				snprintf(err, errlen, "window %llu reported after window %llu",
					 (unsigned long long)c->wins[i].win, (unsigned long long)c->wins[i - 1].win);
			return RM_EPROTO;
		}
	}
	if (c->nwins && !(sum = calloc(c->nwins, sizeof(*sum)))) {
		if (err)
			snprintf(err, errlen, "out of memory");
		return RM_ENOMEM;
	}
	for (i = 0; i < c->nparts; i++) {
		const struct rm_part *p = &c->parts[i];
		long k = col_replay_capture_find(c, p->win);

		if (k < 0) {
			if (err)
				snprintf(err, errlen, "part %zu (seg %#llx) is in window %llu, which was not reported", i,
					 (unsigned long long)p->seg_id, (unsigned long long)p->win);
			free(sum);
			return RM_EPROTO;
		}
		sum[k][COL_RQ_CPU] += p->cpu_ns;
		sum[k][COL_RQ_RX] += p->rx_bytes;
		sum[k][COL_RQ_TX] += p->tx_bytes;
		sum[k][COL_RQ_DR] += p->disk_read;
		sum[k][COL_RQ_DW] += p->disk_write;
	}
	if (late) {
		want[COL_RQ_CPU] = late->lost_ns;
		want[COL_RQ_RX] = late->unseg_rx;
		want[COL_RQ_TX] = late->unseg_tx;
		want[COL_RQ_DR] = late->unseg_disk_read;
		want[COL_RQ_DW] = late->unseg_disk_write;
	}
	for (i = 0; i < c->nwins && rv == RM_OK; i++) {
		const struct rm_totals *t = &c->wins[i];
		uint64_t total[COL_RQ_N] = { t->busy_ns, t->rx_bytes, t->tx_bytes, t->disk_read, t->disk_write };
		uint64_t other[COL_RQ_N] = { t->unseg_cpu_ns + t->lost_ns, t->unseg_rx, t->unseg_tx, t->unseg_disk_read,
					     t->unseg_disk_write };

		for (r = 0; r < COL_RQ_N; r++) {
			uint64_t got = sum[i][r] + other[r];

			if (got == total[r])
				continue;
			if (got < total[r] && want[r]) {
				gap[r] += total[r] - got;
				continue;
			}
			if (err)
				snprintf(err, errlen,
					 "window %llu: %s total %llu != parts %llu + unsegmented%s %llu",
					 (unsigned long long)t->win, names[r], (unsigned long long)total[r],
					 (unsigned long long)sum[i][r], r == COL_RQ_CPU ? " + lost" : "",
					 (unsigned long long)other[r]);
			rv = RM_EPROTO;
			break;
		}
	}
	for (r = 0; r < COL_RQ_N && rv == RM_OK; r++) {
		if (gap[r] != want[r]) {
			if (err)
				snprintf(err, errlen, "%s: the windows fall short by %llu in total, the late drops by %llu",
					 names[r], (unsigned long long)gap[r], (unsigned long long)want[r]);
			rv = RM_EPROTO;
		}
	}
	free(sum);
	return rv;
}
