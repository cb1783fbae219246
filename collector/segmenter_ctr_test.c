/*
 * segmenter_ctr_test.c - unit tests of the segmenter's CPU-counter
 * functions (segmenter.h: rm_ctr_spread, rm_ctr_edge), which the eBPF
 * backend calls with what a thread's scheduler counters grew by between two
 * of its edges. A minimal user-space environment of one CPU: window slots,
 * emitted parts kept in an array. Every case checks its hand computation and
 * the identity busy = parts + unsegmented of every window.
 */
#include <linux/types.h>
#include <stdio.h>
#include <string.h>

#include "rametr.h"
#include "rm_test.h"
#include "banned.h"

#define RM_INLINE static inline
#define RM_ENV_CPU_COUNTERS(e) 1

struct rm_env {
	__u64 window_ns;
	__u64 offset_ns;
	__u32 cpu;
	__u32 follow_replies;
	__u64 win_lo, win_hi, win_cur;
	__u32 rt;
};

#define MAX_EMIT 64

static struct rm_cpu cpu0;
static struct rm_wintot slots[RM_WIN_SLOTS];
static struct rm_part emitted[MAX_EMIT];
static int nemit;

static struct rm_cpu *rm_env_cpu(struct rm_env *e)
{
	(void)e;
	return &cpu0;
}

static struct rm_wintot *rm_env_wintot(struct rm_env *e, __u64 win)
{
	struct rm_wintot *w = &slots[win % RM_WIN_SLOTS];

	(void)e;
	if (w->win == win)
		return w;
	if (w->win > win)
		return NULL;
	memset(w, 0, sizeof(*w));
	w->win = win;
	return w;
}

static int rm_env_emit(struct rm_env *e, const struct rm_part *p, const struct rm_counts *c)
{
	(void)e;
	if (nemit == MAX_EMIT)
		return -1;
	emitted[nemit] = *p;
	emitted[nemit].cpu_ns = c->cpu_ns;
	emitted[nemit].runq_ns = c->runq_ns;
	nemit++;
	return 0;
}

static __u64 rm_env_steal(struct rm_env *e)
{
	(void)e;
	return 0;
}

#include "segmenter.h"

/* windows of 1000 ns, no offset; a thread that answered a request (in its tail) */
static struct rm_env env;
static struct rm_task task;

static void setup(int mode, int tail)
{
	memset(&env, 0, sizeof(env));
	env.window_ns = 1000;
	memset(slots, 0, sizeof(slots));
	memset(&cpu0, 0, sizeof(cpu0));
	memset(&task, 0, sizeof(task));
	nemit = 0;
	task.mode = (__u32)mode;
	task.tail = (__u32)tail;
	task.cur.seg_id = 7;
	task.cur.win = 0;
}

/* Emits what the task holds; returns the CPU of all its parts of window win. */
static __u64 part_cpu(__u64 win)
{
	__u64 s = 0;
	int i;

	rm_flush(&env, &task);
	for (i = 0; i < nemit; i++)
		if (emitted[i].win == win)
			s += emitted[i].cpu_ns;
	return s;
}

/* busy = parts + unsegmented in windows 0..3 */
static void check_identity(void)
{
	__u64 w;

	rm_flush(&env, &task);
	for (w = 0; w < 4; w++) {
		const struct rm_wintot *t = &slots[w];
		__u64 parts = 0;
		int i;

		for (i = 0; i < nemit; i++)
			if (emitted[i].win == w)
				parts += emitted[i].cpu_ns;
		if (t->win != w)
			continue;
		CU_ASSERT_EQUAL(t->busy_ns, parts + t->unseg_cpu_ns + t->lost_ns);
	}
}

/* 400 ns over [900, 1300): 100 in window 0, 300 in window 1; 7 ns over [999, 1002): 2 and 5 */
static void test_spread(void)
{
	setup(RM_MODE_SEG, 0);
	rm_ctr_spread(&env, &task, 900, 1300, 400);
	CU_ASSERT_EQUAL(slots[0].busy_ns, 100);
	CU_ASSERT_EQUAL(slots[1].busy_ns, 300);
	CU_ASSERT_EQUAL(part_cpu(0), 100);
	CU_ASSERT_EQUAL(part_cpu(1), 300);
	check_identity();
	setup(RM_MODE_NONE, 0);
	rm_ctr_spread(&env, NULL, 999, 1002, 7);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 2);
	CU_ASSERT_EQUAL(slots[1].unseg_cpu_ns, 5);
	check_identity();
}

/* an interval longer than RM_MAX_SPLIT windows is spread over the last RM_MAX_SPLIT */
static void test_spread_old(void)
{
	setup(RM_MODE_NONE, 0);
	rm_ctr_spread(&env, NULL, 0, 6000, 6001);
	CU_ASSERT_EQUAL(slots[0].busy_ns, 0);
	CU_ASSERT_EQUAL(slots[1].busy_ns, 0);
	CU_ASSERT_EQUAL(slots[2].busy_ns, 1500);
	CU_ASSERT_EQUAL(slots[5].busy_ns, 1501);
	CU_ASSERT_EQUAL(slots[2].busy_ns + slots[3].busy_ns + slots[4].busy_ns + slots[5].busy_ns, 6001);
	CU_ASSERT_EQUAL(slots[2].unseg_cpu_ns, slots[2].busy_ns);
}

/* in a segment: waits do not matter, all CPU and the run-queue wait to the part */
static void test_edge_segment(void)
{
	setup(RM_MODE_SEG, 0);
	CU_ASSERT_EQUAL(rm_ctr_edge(&env, &task, 100, 500, 300, 40, 2, 25, 0), 0);
	CU_ASSERT_EQUAL(slots[0].busy_ns, 300);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 0);
	CU_ASSERT_EQUAL(task.cur.runq_ns, 25);
	CU_ASSERT_EQUAL(part_cpu(0), 300);
	check_identity();
}

/* in the tail, one wait, then a recv: the tail keeps the CPU before the thread last got the CPU, the head is returned */
static void test_edge_tail_head(void)
{
	setup(RM_MODE_ASSOC, 1);
	CU_ASSERT_EQUAL(rm_ctr_edge(&env, &task, 100, 500, 100, 30, 1, 0, 1), 30);
	CU_ASSERT_EQUAL(task.tail, 0);
	CU_ASSERT_EQUAL(slots[0].busy_ns, 70); /* the head is charged by the caller, after rm_on_recv */
	CU_ASSERT_EQUAL(part_cpu(0), 70);
	check_identity();
	/* not a recv: the head goes as the thread is charged after the wait (unsegmented) */
	setup(RM_MODE_ASSOC, 1);
	CU_ASSERT_EQUAL(rm_ctr_edge(&env, &task, 100, 500, 100, 30, 1, 0, 0), 0);
	CU_ASSERT_EQUAL(part_cpu(0), 70);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 30);
	check_identity();
}

/* several waits: the share before the first is unknown, so none of it is the tail's */
static void test_edge_waits(void)
{
	setup(RM_MODE_ASSOC, 1);
	CU_ASSERT_EQUAL(rm_ctr_edge(&env, &task, 100, 500, 100, 30, 3, 0, 1), 30);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 70);
	CU_ASSERT_EQUAL(part_cpu(0), 0);
	check_identity();
	/* no wait: all of it stays in the tail, nothing returned */
	setup(RM_MODE_ASSOC, 1);
	CU_ASSERT_EQUAL(rm_ctr_edge(&env, &task, 100, 500, 100, 30, 0, 0, 1), 0);
	CU_ASSERT_EQUAL(part_cpu(0), 100);
	CU_ASSERT_EQUAL(task.tail, 1);
	check_identity();
}

/* a thread of a managed runtime: its unsegmented CPU is also counted apart, never its parts'; a Go program's twice */
static void test_edge_runtime(void)
{
	setup(RM_MODE_ASSOC, 1);
	task.rt = RM_RT_GO;
	/* several waits: the 70 before the last one are unsegmented, the runtime's */
	CU_ASSERT_EQUAL(rm_ctr_edge(&env, &task, 100, 500, 100, 30, 3, 0, 1), 30);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 70);
	CU_ASSERT_EQUAL(slots[0].unseg_rt_ns, 70);
	CU_ASSERT_EQUAL(slots[0].unseg_go_ns, 70);
	CU_ASSERT_EQUAL(env.rt, 0);
	check_identity();
	/* in its tail, no wait: the tail's, not the runtime's */
	setup(RM_MODE_ASSOC, 1);
	task.rt = RM_RT_GO;
	CU_ASSERT_EQUAL(rm_ctr_edge(&env, &task, 100, 500, 100, 30, 0, 0, 1), 0);
	CU_ASSERT_EQUAL(part_cpu(0), 100);
	CU_ASSERT(nemit > 0 && (emitted[nemit - 1].flags & RM_PF_RUNTIME)); /* the runtime rule's weights */
	CU_ASSERT(nemit > 0 && (emitted[nemit - 1].flags & RM_PF_GO));      /* and the label rule's */
	CU_ASSERT_EQUAL(slots[0].unseg_rt_ns, 0);
	/* a JVM's part: the runtime's flag, not Go's */
	setup(RM_MODE_ASSOC, 1);
	task.rt = RM_RT_JVM;
	CU_ASSERT_EQUAL(rm_ctr_edge(&env, &task, 100, 500, 100, 30, 0, 0, 1), 0);
	CU_ASSERT_EQUAL(part_cpu(0), 100);
	CU_ASSERT(nemit > 0 && (emitted[nemit - 1].flags & (RM_PF_RUNTIME | RM_PF_GO)) == RM_PF_RUNTIME);
	/* another thread's: neither */
	setup(RM_MODE_ASSOC, 1);
	CU_ASSERT_EQUAL(rm_ctr_edge(&env, &task, 100, 500, 100, 30, 0, 0, 1), 0);
	CU_ASSERT_EQUAL(part_cpu(0), 100);
	CU_ASSERT(nemit > 0 && !(emitted[nemit - 1].flags & (RM_PF_RUNTIME | RM_PF_GO)));
	/* holding nothing: unsegmented, the runtime's (a JVM's: not Go's); another thread's is not */
	setup(RM_MODE_NONE, 0);
	task.rt = RM_RT_JVM;
	rm_ctr_edge(&env, &task, 100, 500, 40, 0, 0, 0, 0);
	task.rt = RM_RT_NONE;
	rm_ctr_edge(&env, &task, 500, 900, 25, 0, 0, 0, 0);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 65);
	CU_ASSERT_EQUAL(slots[0].unseg_rt_ns, 40);
	CU_ASSERT_EQUAL(slots[0].unseg_go_ns, 0);
	check_identity();
}

/* the CPU since the thread last got the CPU is spread over the time since, the rest before it */
static void test_edge_place(void)
{
	setup(RM_MODE_SEG, 0);
	CU_ASSERT_EQUAL(rm_ctr_edge(&env, &task, 100, 1100, 600, 400, 0, 0, 0), 0);
	CU_ASSERT_EQUAL(slots[0].busy_ns, 500); /* 200 before 700, and 300 of the 400 in [700, 1100) */
	CU_ASSERT_EQUAL(slots[1].busy_ns, 100);
	CU_ASSERT_EQUAL(part_cpu(0), 500);
	CU_ASSERT_EQUAL(part_cpu(1), 100);
	check_identity();
}

/* a head larger than the interval (the thread got the CPU before its last edge) is cut to it */
static void test_edge_head_capped(void)
{
	setup(RM_MODE_NONE, 0);
	CU_ASSERT_EQUAL(rm_ctr_edge(&env, &task, 400, 500, 50, 80, 1, 0, 1), 50);
	CU_ASSERT_EQUAL(slots[0].busy_ns, 0);
}

/*
 * Follow-replies on the counters: recorded streams of two threads of a
 * server, a pool worker w and a reader r, each step what the kernel hooks
 * do at an edge (rm_ctr_edge with what the thread's counters grew by, then
 * the edge's rm_on_*). Sockets 1 and 2 are server-side; request k came in
 * as bytes [100 k, 100 k + 60).
 */
static struct rm_task w, r;

static void fr_setup(void)
{
	setup(RM_MODE_NONE, 0);
	env.follow_replies = 1;
	env.window_ns = 1000000; /* one window: nothing is emitted for a window change */
	memset(&w, 0, sizeof(w));
	memset(&r, 0, sizeof(r));
}

static void fr_sock(int k, struct rm_tuple *tp, struct rm_inb *in)
{
	memset(tp, 0, sizeof(*tp));
	tp->cookie = (__u64)k;
	tp->family = 2;
	tp->lport = 80;
	tp->rport = 40000 + (__u32)k;
	memset(in, 0, sizeof(*in));
	in->has_seq = 1;
	in->seq_start = 100 * (__u64)k;
	in->seq_end = in->seq_start + 60;
}

/* t reads request k at now (an edge with no CPU since the last) */
static void fr_recv(struct rm_task *t, int k, __u64 now)
{
	struct rm_tuple tp;
	struct rm_inb in;

	fr_sock(k, &tp, &in);
	rm_ctr_edge(&env, t, now, now, 0, 0, 0, 0, 1);
	rm_on_recv(&env, t, now, 1, t == &w ? 2 : 3, &tp, 60, 1, in.seq_start, 1);
}

/* t replies to request k at now; d: its CPU since its last edge at from (no wait) */
static void fr_reply(struct rm_task *t, int k, __u64 from, __u64 now, __u64 d)
{
	struct rm_tuple tp;
	struct rm_inb in;

	fr_sock(k, &tp, &in);
	rm_ctr_edge(&env, t, from, now, d, 0, 0, 0, 0);
	rm_on_send(&env, t, now, 1, t == &w ? 2 : 3, &tp, 40, 1, 5000, 1, &in);
}

/* CPU of the parts emitted anchored to request k (or, k 0, of all), and how many */
static __u64 fr_anchored(int k, int *n)
{
	__u64 s = 0;
	int i;

	rm_flush(&env, &w);
	rm_flush(&env, &r);
	*n = 0;
	for (i = 0; i < nemit; i++)
		if ((emitted[i].flags & RM_PF_ANCHOR) && emitted[i].in.cookie == (__u64)k) {
			CU_ASSERT_EQUAL(emitted[i].in_seq_start, 100 * (__u64)k);
			s += emitted[i].cpu_ns;
			(*n)++;
		}
	return s;
}

/* busy = parts + unsegmented, everything flushed */
static void fr_identity(void)
{
	__u64 parts = 0;
	int i;

	rm_flush(&env, &w);
	rm_flush(&env, &r);
	for (i = 0; i < nemit; i++)
		parts += emitted[i].cpu_ns;
	CU_ASSERT_EQUAL(slots[0].busy_ns, parts + slots[0].unseg_cpu_ns);
}

/*
 * A worker woken by a reader: w answered request 1 and spent 50 ns in its
 * tail before it waited; r reads request 2 and hands it to w (both reach an
 * edge at the wake: r's 30 ns are its segment's, w's 50 ns all came before
 * its one wait, the tail of request 1). w's job of 400 ns, preempted once
 * after it took the queue's lock (a second wait), is request 2's.
 */
static void test_fr_handoff(void)
{
	int n;

	fr_setup();
	fr_reply(&w, 1, 0, 100, 0);
	CU_ASSERT_EQUAL(w.mode, RM_MODE_ASSOC);
	fr_recv(&r, 2, 200);
	rm_ctr_edge(&env, &r, 200, 300, 30, 30, 0, 0, 0);
	rm_ctr_edge(&env, &w, 100, 300, 50, 0, 1, 0, 0);
	rm_on_handoff(&env, &r, &w, 300);
	CU_ASSERT_EQUAL(r.mode, RM_MODE_ASSOC);
	CU_ASSERT(r.chain_st & RM_CHAIN_HANDED);
	/* the job: 300 ns before it last got the CPU (after its wait for the lock), 100 since */
	rm_ctr_edge(&env, &w, 300, 800, 400, 100, 1, 0, 0);
	fr_reply(&w, 2, 800, 800, 0);
	CU_ASSERT_EQUAL(fr_anchored(1, &n), 50);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(fr_anchored(2, &n), 400);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 0);
	fr_identity();
}

/*
 * A worker with two waits between its reply and the hand-off (a lock on
 * its way back to the queue, then the queue): which share came before the
 * first is not known, so none of it is request 1's tail (unsegmented); a
 * job that waits twice itself (a lock, a back-end) keeps all its CPU.
 */
static void test_fr_two_waits(void)
{
	int n;

	fr_setup();
	fr_reply(&w, 1, 0, 100, 0);
	fr_recv(&r, 2, 200);
	rm_ctr_edge(&env, &r, 200, 300, 30, 30, 0, 0, 0);
	rm_ctr_edge(&env, &w, 100, 300, 100, 0, 2, 0, 0);
	rm_on_handoff(&env, &r, &w, 300);
	rm_ctr_edge(&env, &w, 300, 900, 400, 100, 2, 0, 0);
	fr_reply(&w, 2, 900, 900, 0);
	CU_ASSERT_EQUAL(fr_anchored(1, &n), 0);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(fr_anchored(2, &n), 400);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 100);
	fr_identity();
}

/*
 * The tail after a reply, then a hand-off back: w answers request 1 and
 * at once wakes r, which handed request 1 over and holds none, to take the
 * connection back (a write to an eventfd). r's work from the wake to its
 * next wait (90 ns, read at its next recv, before it last got the CPU) is
 * request 1's; its 20 ns since are the head of request 2. w's 70 ns after
 * the hand-off, up to its one wait, are no request's: it handed the rest of
 * request 1 over.
 */
static void test_fr_tail_handback(void)
{
	int n;

	fr_setup();
	fr_recv(&r, 1, 0);
	rm_ctr_edge(&env, &r, 0, 50, 10, 10, 0, 0, 0);
	rm_on_handoff(&env, &r, &w, 50); /* request 1 to w (w holds nothing yet) */
	rm_ctr_edge(&env, &r, 50, 60, 5, 0, 1, 0, 0); /* r waits in its poll loop */
	fr_reply(&w, 1, 50, 100, 0);
	rm_ctr_edge(&env, &w, 100, 110, 8, 8, 0, 0, 0);   /* w's edge at the wake */
	rm_ctr_edge(&env, &r, 60, 110, 0, 0, 0, 0, 0);    /* r's (asleep since its last edge) */
	rm_on_handoff(&env, &w, &r, 110);
	CU_ASSERT(r.chain_st & RM_CHAIN_DONE);
	rm_ctr_edge(&env, &w, 110, 300, 70, 0, 1, 0, 0);  /* w waits for its next job */
	CU_ASSERT_EQUAL(rm_ctr_edge(&env, &r, 110, 400, 110, 20, 1, 0, 1), 20);
	fr_recv(&r, 2, 400);
	CU_ASSERT_EQUAL(fr_anchored(1, &n), 90);
	CU_ASSERT_EQUAL(n, 1);
	/* r's 10 ns of request 1 before the hand-off are its segment's, not anchored */
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 5 + 8 + 70);
	fr_identity();
}

/*
 * A reply's tail, then a sleep across two window ends: the 50 ns before the
 * wait ran right after the reply, in its window, and go to request 1 whole
 * (spread over the sleep, a share would have left in an earlier window's
 * part before the wait was seen, and the tail would have gone to the next
 * reply).
 */
static void test_fr_tail_window(void)
{
	int n;

	fr_setup();
	env.window_ns = 1000;
	fr_reply(&w, 1, 0, 100, 0);
	rm_ctr_edge(&env, &w, 100, 2500, 50, 0, 1, 0, 0);
	CU_ASSERT_EQUAL(w.mode, RM_MODE_ASSOC);
	CU_ASSERT_EQUAL(fr_anchored(1, &n), 50);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(slots[0].busy_ns, 50);
	CU_ASSERT_EQUAL(slots[1].busy_ns + slots[2].busy_ns, 0);
}

/*
 * A reader that read request 1 and waited twice before reading request 2
 * (a contended lock on the way to its queue, then its poll): its segment
 * ended at the first wait, what came after was its loop, and which share
 * came before is not known: none of the 80 ns before it last got the CPU
 * is request 1's; its 20 ns since are request 2's head. The same two waits
 * before a reply keep all of it in the segment (the chain after the first
 * wait would have been anchored to the same request).
 */
static void test_fr_reader_waits(void)
{
	fr_setup();
	fr_recv(&r, 1, 0);
	CU_ASSERT_EQUAL(rm_ctr_edge(&env, &r, 0, 500, 100, 20, 2, 0, 1), 20);
	CU_ASSERT_EQUAL(r.mode, RM_MODE_ASSOC);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 80);
	fr_setup();
	fr_recv(&r, 1, 0);
	rm_ctr_edge(&env, &r, 0, 500, 100, 20, 2, 0, 0);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 0);
	fr_identity();
}

/* t answers request k it read itself (its reader) at now; d: its CPU since its last edge at from (no wait) */
static void fr_own_reply(struct rm_task *t, int k, __u64 from, __u64 now, __u64 d)
{
	struct rm_tuple tp;
	struct rm_inb in;
	__u32 tid = t == &w ? 2 : 3;

	fr_sock(k, &tp, &in);
	in.reader = tid;
	rm_ctr_edge(&env, t, from, now, d, 0, 0, 0, 0);
	rm_on_send(&env, t, now, 1, tid, &tp, 40, 1, 5000, 1, &in);
}

/* t sends a request on the client-side connection 9 (to a back end) at now; d: its CPU since from (no wait) */
static void fr_call(struct rm_task *t, __u64 from, __u64 now, __u64 d)
{
	struct rm_tuple tp;
	struct rm_inb in;

	fr_sock(9, &tp, &in);
	tp.lport = 50000;
	tp.rport = 8080;
	rm_ctr_edge(&env, t, from, now, d, 0, 0, 0, 0);
	rm_on_send(&env, t, now, 1, t == &w ? 2 : 3, &tp, 30, 1, 7000, 0, NULL);
}

/*
 * Two threads of an event loop (a proxy with a shared pool of idle back-end
 * connections), each answering the requests it reads: w answered request 1
 * and waits (10 ns of tail before its wait); r reads request 3, takes over
 * w's idle back-end connection and wakes w to let it go (a write to w's
 * wake-up pipe) while r holds w's lock; r is preempted, w spins on the lock
 * (500 ns), waits again, and reads request 4 (20 ns since its last wake).
 * r keeps its segment (40 ns before the wake, 60 after, to its send on the
 * back-end connection); w's 520 ns from the wake to its recv, across its
 * two waits, are request 3's, none unsegmented.
 */
static void test_fr_peer_takeover(void)
{
	struct rm_tuple tp;
	struct rm_inb in;
	__u64 head;
	int n, i;

	fr_setup();
	fr_recv(&r, 2, 0);
	fr_own_reply(&r, 2, 0, 50, 20);
	fr_recv(&w, 1, 100);
	fr_own_reply(&w, 1, 100, 150, 30);
	CU_ASSERT(w.own_reply && r.own_reply);
	fr_recv(&r, 3, 200);
	rm_ctr_edge(&env, &r, 200, 300, 40, 40, 0, 0, 0); /* both reach an edge at the wake */
	rm_ctr_edge(&env, &w, 150, 300, 10, 0, 1, 0, 0);
	rm_on_handoff(&env, &r, &w, 300);
	CU_ASSERT_EQUAL(r.mode, RM_MODE_SEG);
	CU_ASSERT(w.chain_st & RM_CHAIN_PEER);
	fr_call(&r, 300, 400, 60);
	head = rm_ctr_edge(&env, &w, 300, 2000, 520, 20, 2, 0, 1);
	fr_sock(4, &tp, &in);
	rm_on_recv(&env, &w, 2000, 1, 2, &tp, 60, 1, in.seq_start, 1);
	rm_charge_cpu(&env, &w, 0, 2000, head);
	CU_ASSERT_EQUAL(w.mode, RM_MODE_SEG);
	CU_ASSERT_EQUAL(w.chain_st & RM_CHAIN_PEER, 0);
	CU_ASSERT_EQUAL(fr_anchored(3, &n), 520);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(fr_anchored(1, &n), 10);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 0);
	for (i = 0; i < nemit; i++) /* r's segment of request 3: its own 100 ns, to its send */
		if (!(emitted[i].flags & RM_PF_ANCHOR) && emitted[i].in.cookie == 3)
			CU_ASSERT_EQUAL(emitted[i].cpu_ns, 100);
	fr_identity();
}

/*
 * The same wake by a reader that hands requests to workers (it never
 * answers one itself) is the first kind: the reader's segment ends there.
 * A chain anchored to a peer's request ends at the wakee's next socket
 * edge, a send too: what it sends is no longer the peer's.
 */
static void test_fr_peer_not_reader(void)
{
	fr_setup();
	fr_recv(&w, 1, 0);
	fr_own_reply(&w, 1, 0, 50, 20);
	fr_recv(&r, 3, 200);
	rm_ctr_edge(&env, &r, 200, 300, 40, 40, 0, 0, 0);
	rm_ctr_edge(&env, &w, 50, 300, 0, 0, 1, 0, 0);
	rm_on_handoff(&env, &r, &w, 300);
	CU_ASSERT_EQUAL(r.mode, RM_MODE_ASSOC);
	CU_ASSERT(r.chain_st & RM_CHAIN_HANDED);
	CU_ASSERT_EQUAL(w.chain_st & RM_CHAIN_PEER, 0);
	/* r answers request 3 itself now; its next request's wake is the third kind, ended by w's send */
	fr_own_reply(&r, 3, 300, 350, 0);
	fr_recv(&r, 5, 400);
	rm_ctr_edge(&env, &w, 300, 500, 0, 0, 1, 0, 0);
	r.rt = RM_RT_GO; /* a runtime's threads wake each other for its own work: not this kind */
	rm_on_handoff(&env, &r, &w, 500);
	CU_ASSERT_EQUAL(w.chain_st & RM_CHAIN_PEER, 0);
	r.rt = RM_RT_NONE;
	rm_ctr_edge(&env, &w, 500, 500, 0, 0, 0, 0, 0);
	fr_recv(&r, 5, 500);
	rm_on_handoff(&env, &r, &w, 500);
	CU_ASSERT(w.chain_st & RM_CHAIN_PEER);
	fr_call(&w, 500, 700, 70);
	CU_ASSERT_EQUAL(w.chain_st & RM_CHAIN_PEER, 0);
	CU_ASSERT_EQUAL(w.mode, RM_MODE_ASSOC);
	{
		int n;

		CU_ASSERT_EQUAL(fr_anchored(5, &n), 70); /* and the send's bytes, associated with it */
	}
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 0);
	fr_identity();
}

/*
 * An event loop's thread in the middle of a request of its own is no peer's
 * wakee: w answered request 1, read request 6 and sent it on to a back end
 * (a call), then waits for the answer; r, holding request 3, wakes it. w's
 * work after the wake stays its own (its chain, anchored by its next reply,
 * here to request 6), none of it request 3's.
 */
static void test_fr_peer_busy(void)
{
	int n;

	fr_setup();
	fr_recv(&r, 2, 0);
	fr_own_reply(&r, 2, 0, 50, 20);
	fr_recv(&w, 1, 100);
	fr_own_reply(&w, 1, 100, 150, 30);
	fr_recv(&w, 6, 160);
	fr_call(&w, 160, 170, 10);
	fr_recv(&r, 3, 200);
	rm_ctr_edge(&env, &r, 200, 300, 40, 40, 0, 0, 0);
	rm_ctr_edge(&env, &w, 170, 300, 0, 0, 1, 0, 0);
	rm_on_handoff(&env, &r, &w, 300);
	CU_ASSERT_EQUAL(w.chain_st & RM_CHAIN_PEER, 0);
	rm_ctr_edge(&env, &w, 300, 900, 200, 0, 2, 0, 0);
	fr_own_reply(&w, 6, 900, 900, 0);
	CU_ASSERT_EQUAL(fr_anchored(3, &n), 0);
	CU_ASSERT_EQUAL(fr_anchored(6, &n), 200);
	fr_identity();
}

/*
 * A dispatcher's CPU carried to the thread it woke (rm_ctr_carry): two
 * wake-ups before its recv sum up, and a recv on a server-side socket puts
 * them in the segment it begins; a send, or the recv of a reply, returns
 * them unsegmented; past RM_CARRY_MAX the rest is unsegmented at once.
 */
static void test_carry(void)
{
	struct rm_tuple tp = { .cookie = 5, .family = RM_AF_INET, .lport = 80, .rport = 40000 };

	setup(RM_MODE_NONE, 0);
	env.follow_replies = 1;
	CU_ASSERT_EQUAL(rm_ctr_carry(&env, &task, 100, 200, 300), 0);
	CU_ASSERT_EQUAL(rm_ctr_carry(&env, &task, 200, 400, 200), 0);
	CU_ASSERT_EQUAL(task.carry_ns, 500);
	CU_ASSERT_EQUAL(slots[0].busy_ns, 0); /* not charged yet */
	rm_on_recv(&env, &task, 500, 1, 2, &tp, 60, 0, 0, 1);
	rm_ctr_carry_take(&env, &task, 500, 1);
	CU_ASSERT_EQUAL(task.carry_ns, 0);
	CU_ASSERT_EQUAL(slots[0].busy_ns, 500);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 0);
	CU_ASSERT_EQUAL(part_cpu(0), 500);
	check_identity();
	/* the next edge is a send: unsegmented */
	setup(RM_MODE_NONE, 0);
	env.follow_replies = 1;
	rm_ctr_carry(&env, &task, 100, 200, 300);
	CU_ASSERT_EQUAL(rm_ctr_edge(&env, &task, 100, 600, 0, 0, 0, 0, 0), 0);
	CU_ASSERT_EQUAL(task.carry_ns, 0);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 300);
	CU_ASSERT_EQUAL(slots[0].busy_ns, 300);
	check_identity();
	/* the recv of a reply (a client-side socket): unsegmented */
	setup(RM_MODE_NONE, 0);
	env.follow_replies = 1;
	rm_ctr_carry(&env, &task, 100, 200, 300);
	rm_on_recv(&env, &task, 500, 1, 2, &tp, 60, 0, 0, 0);
	rm_ctr_carry_take(&env, &task, 500, 0);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 300);
	CU_ASSERT_EQUAL(part_cpu(0), 0);
	check_identity();
	/* full: 100 ns more fit, 400 are unsegmented now */
	setup(RM_MODE_NONE, 0);
	task.carry_ns = RM_CARRY_MAX - 100;
	CU_ASSERT_EQUAL(rm_ctr_carry(&env, &task, 100, 600, 500), 400);
	CU_ASSERT_EQUAL(task.carry_ns, RM_CARRY_MAX);
	CU_ASSERT_EQUAL(slots[0].unseg_cpu_ns, 400);
	CU_ASSERT_EQUAL(slots[0].busy_ns, 400);
}

static CU_TestInfo cases[] = {
	{ "CPU over an interval is split at window edges by time, summing exactly", test_spread },
	{ "a dispatcher's CPU carried to its wakee: to the request it reads, else unsegmented; capped", test_carry },
	{ "CPU over more windows than kept is spread over the last ones", test_spread_old },
	{ "a segment keeps its CPU and wait across waits", test_edge_segment },
	{ "after one wait: the tail keeps what came before, the head is the recv's", test_edge_tail_head },
	{ "after several waits none of it is the tail's; without a wait all of it", test_edge_waits },
	{ "the head is never more than the interval", test_edge_head_capped },
	{ "a managed runtime's unsegmented CPU is counted apart", test_edge_runtime },
	{ "the CPU since the thread got the CPU is spread over the time since", test_edge_place },
	{ "follow-replies: a worker woken by a reader: its tail is the last request's, its job the next's",
	  test_fr_handoff },
	{ "follow-replies: a worker with two waits after its reply: no tail; a job's own waits keep its CPU",
	  test_fr_two_waits },
	{ "follow-replies: a reply's tail, then a hand-off back to the reader: the reader's work is the request's",
	  test_fr_tail_handback },
	{ "follow-replies: a tail before a wait across window ends stays whole in its window, the request's",
	  test_fr_tail_window },
	{ "follow-replies: a reader's two waits before its next recv: none of it is the last request's",
	  test_fr_reader_waits },
	{ "follow-replies: an event loop's thread woken by another holding a request: to its next socket edge, "
	  "across waits, the waker's request's",
	  test_fr_peer_takeover },
	{ "follow-replies: a thread whose last socket edge was no reply of its own is no peer's wakee",
	  test_fr_peer_busy },
	{ "follow-replies: a reader's or a runtime's wake is no peer's; a peer's chain ends at the wakee's send",
	  test_fr_peer_not_reader },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("segmenter_ctr", cases)
