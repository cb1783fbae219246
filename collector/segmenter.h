/*
 * segmenter.h - cutting a thread's life into segments, one code for kernel
 * and user space.
 *
 * This header is the segmenter of Rametr (seed 000 §5.2): a segment of a
 * thread starts at a recv on a socket and ends at the next send by that
 * thread. Its CPU is on-CPU time only; it carries the inbound and outbound
 * socket tuples, bytes in/out, disk bytes and run-queue wait. Threads created
 * inside a segment inherit it. After the send the thread stays *associated*
 * with the segment's CE: its further I/O is still charged to it, until the
 * next recv (seed 000 §5.2.2).
 *
 * The request's tail. What a thread does after answering a request, until
 * it next reads one, hands work over or waits for the next one - ending a
 * transaction, statistics, logging, flushing the rest of a reply - is work
 * for the request it answered: a server that did not serve it would not do
 * it. So after the send that ends a segment the thread's CPU, too, goes to
 * the associated part (RM_PF_ASSOC, the segment's inbound tuple and range,
 * so it is charged to the same CE) while the thread is in that tail
 * (rm_task.tail), which ends at the first of:
 * - its next recv, on any socket (the next request, an event loop's next
 *   connection, or the answer to a call of its own: a new segment begins);
 * - a hand-off: it wakes another thread of its process from a write or a
 *   futex wake (rm_on_handoff), the work is another's from then on;
 * - its first wait: it sleeps interruptibly (a poll, a condition, a lock),
 *   most likely for the next request. Being preempted does not end the
 *   tail, nor does waiting for disk I/O (a commit's flush is the request's).
 * After the tail the thread's CPU is unsegmented again until its next recv;
 * its I/O stays associated. The tail is a part of its own (a second record
 * per request), so a segment's part still ends at its send.
 * The request's head. A thread that waited for its next request (its tail
 * ended there, or it held none) and is woken spends CPU reading it before
 * the recv tells whose it is: the return from its wait, the recv call.
 * That CPU (rm_task.head: since the wake-up, in the same slice as the recv,
 * with no send or disk I/O of the thread in between) goes to the segment
 * the recv begins; anything else the thread does first ends the head.
 * With follow-replies a serving thread's CPU after a reply goes to its
 * continuation chain instead (below): a chain is exactly "the work after a
 * reply", with a rule of its own for which request it was for. The tail
 * rule covers what chains do not: threads that do not serve (clients),
 * and every thread when the option is off. One rule per thread, never
 * both: where a chain exists the tail flag is never consulted. The two
 * agree on the tail: a chain that shows nothing before the thread first
 * blocks or reads again is charged to the request answered (rm_cont_tail).
 *
 * It is pure logic with no I/O, compiled twice: into the BPF program
 * (rametr.bpf.c, per-thread state in task storage) and into user space for the
 * replay backend (col_replay.c), so that what the kernel does is unit-tested
 * on recorded event streams.
 *
 * CPU time is cut into slices at every context switch and at every segment
 * transition (recv/send/exit), and each slice is split at window boundaries.
 * Time the hypervisor stole from the CPU in a slice (rm_env_steal) is taken
 * off its end: the thread did not run then, and it is in nobody's CPU, not
 * even busy (a thread's own CPU clock leaves it out too).
 * Every slice of a non-idle thread lands in exactly one of: a part's cpu_ns,
 * the window's unseg_cpu_ns, or the window's lost_ns, and always in busy_ns.
 * So per window, summed over CPUs (a part may be flushed, or dropped, on
 * another CPU than the one its thread ran on): busy = sum(part cpu) + unseg
 * + lost, exactly; likewise for bytes. col_* and the tests check that
 * identity.
 * Of the unsegmented CPU, what threads of a process running a managed
 * runtime (rm_task.rt: a Go program or a Java virtual machine, which the
 * loader recognises from its binary) used is also counted in unseg_rt_ns (a
 * subset, never more), and of that a Go program's in unseg_go_ns.
 *
 * The includer defines, before including this header:
 *   RM_INLINE                    inline qualifier
 *   struct rm_env                with members window_ns, offset_ns (__u64), cpu and
 *                                   follow_replies (__u32), and win_lo, win_hi,
 *                                   win_cur (__u64), zeroed when the settings are set,
 *                                   and rt (__u32, 0 when set up: a charge with no
 *                                   thread's state, t NULL, is of a runtime's thread)
 *   rm_env_cpu(e)                -> struct rm_cpu *  (per-CPU state of e->cpu; may be NULL)
 *   rm_env_wintot(e, win)        -> struct rm_wintot * (slot of e->cpu for win,
 *                                   zeroed and claimed if it held an older window;
 *                                   NULL if it already holds a newer one)
 *   rm_env_emit(e, part, counts) emit a copy of *part whose six counters are
 *                                   *counts; returns 0, or negative if dropped (an
 *                                   emitter that drops later, e.g. a batch, calls
 *                                   rm_drop_part itself and returns 0)
 *   rm_env_steal(e)              -> __u64, the time stolen from e->cpu by the
 *                                   hypervisor since boot (ns), 0 if unknown
 * and includes rametr.h.
 *
 * Concurrency. In the kernel hooks can nest: an interrupt may run another
 * hook (block_rq_issue, which cuts the interrupted thread's slice, or a
 * wake-up) in the middle of one, on the same CPU and for the same thread.
 * Therefore the per-CPU cut time is claimed with a
 * compare-and-swap (a slice is accounted by whoever moves last_ns forward,
 * never twice), every counter of a part or a window is only ever added to
 * atomically, and a part's counters are taken out with an atomic exchange
 * when it is emitted (skipped for a counter that reads 0): whatever the interleaving, each nanosecond and byte
 * is counted once, in busy and in exactly one of part / unsegmented / lost.
 * (Flags and tuples of a part emitted during such an interleaving may be
 * those of a neighbouring transition; totals are exact.)
 */
#ifndef RM_SEGMENTER_H
#define RM_SEGMENTER_H

/* The includer may define RM_ENV_CHARGED(e, t, d, part): told each time d ns of thread t's CPU are charged,
 * to its part (part 1) or unsegmented (0), after the charge. */
#ifndef RM_ENV_CHARGED
#define RM_ENV_CHARGED(e, t, d, part) ((void)0)
#endif

/* CPU counters (rm_ctr_edge): the includer may define this to nonzero (a constant): then rm_cut does nothing. */
#ifndef RM_ENV_CPU_COUNTERS
#define RM_ENV_CPU_COUNTERS(e) 0
#endif

#define RM_ADD(p, v) __sync_fetch_and_add((p), (v))
/* A counter that reads 0 is not exchanged (a locked instruction, ~8 ns):
 * whatever a nested hook adds after the read stays for the next emit. */
#define RM_TAKE(p) (*(volatile __u64 *)(p) ? __sync_lock_test_and_set((p), 0) : 0)

/* Unsegmented CPU c of a thread of runtime kind rt (RM_RT_*) counted apart in window totals w, as its kind's. */
RM_INLINE void rm_unseg_rt(struct rm_wintot *w, __u32 rt, __u64 c)
{
	if (!rt)
		return;
	RM_ADD(&w->unseg_rt_ns, c);
	if (rt == RM_RT_GO)
		RM_ADD(&w->unseg_go_ns, c);
}

/*
 * The window of time ts. The last answer is kept in e ([win_lo, win_hi) is
 * window win_cur; zeroed: empty): a hook asks for the window of its slice
 * and of now several times, and a 64-bit division costs tens of cycles.
 */
RM_INLINE __u64 rm_win(struct rm_env *e, __u64 ts)
{
	__u64 w, lo;

	if (ts >= e->win_lo && ts < e->win_hi)
		return e->win_cur;
	w = (ts + e->offset_ns) / e->window_ns;
	lo = w * e->window_ns;
	e->win_cur = w;
	e->win_lo = lo >= e->offset_ns ? lo - e->offset_ns : 0;
	e->win_hi = lo + e->window_ns - e->offset_ns;
	return w;
}

RM_INLINE __u64 rm_win_start(const struct rm_env *e, __u64 w)
{
	return w * e->window_ns - e->offset_ns;
}

/*
 * A part of window win holding counters *c was dropped (the ring was full):
 * its CPU becomes 'lost' in its window, its bytes unsegmented, so the
 * identity holds; the dropped_* counters say how much of those the drop
 * caused (reason 'dropped' at the aggregator).
 */
RM_INLINE void rm_drop_part(struct rm_env *e, __u64 win, const struct rm_counts *c)
{
	struct rm_wintot *w = rm_env_wintot(e, win);

	if (!w)
		return;
	RM_ADD(&w->dropped_parts, 1);
	RM_ADD(&w->lost_ns, c->cpu_ns);
	RM_ADD(&w->unseg_rx, c->rx_bytes);
	RM_ADD(&w->unseg_tx, c->tx_bytes);
	RM_ADD(&w->unseg_disk_read, c->disk_read);
	RM_ADD(&w->unseg_disk_write, c->disk_write);
	RM_ADD(&w->dropped_cpu_ns, c->cpu_ns);
	RM_ADD(&w->dropped_rx, c->rx_bytes);
	RM_ADD(&w->dropped_tx, c->tx_bytes);
	RM_ADD(&w->dropped_disk_read, c->disk_read);
	RM_ADD(&w->dropped_disk_write, c->disk_write);
}

/* Emit t->cur if it holds anything (taking its counters), then clear its one-shot flags. */
RM_INLINE void rm_flush(struct rm_env *e, struct rm_task *t)
{
	struct rm_part *p = &t->cur;
	struct rm_counts c;

	if (t->dirty) {
		t->dirty = 0;
		c.cpu_ns = RM_TAKE(&p->cpu_ns);
		c.runq_ns = RM_TAKE(&p->runq_ns);
		c.rx_bytes = RM_TAKE(&p->rx_bytes);
		c.tx_bytes = RM_TAKE(&p->tx_bytes);
		c.disk_read = RM_TAKE(&p->disk_read);
		c.disk_write = RM_TAKE(&p->disk_write);
		if ((p->flags & (RM_PF_CONT | RM_PF_ANCHOR)) == RM_PF_CONT)
			t->chain_st |= RM_CHAIN_OUT; /* the chain's anchor must be emitted too */
		if (t->rt)
			p->flags |= t->rt == RM_RT_GO ? RM_PF_RUNTIME | RM_PF_GO : RM_PF_RUNTIME;
		if (rm_env_emit(e, p, &c) < 0)
			rm_drop_part(e, p->win, &c);
		p->samples = 0;
	}
	p->flags &= (RM_PF_IN_SEQ | RM_PF_OUT_SEQ | RM_PF_ASSOC | RM_PF_SEQ_SUSPECT | RM_PF_CONT | RM_PF_ANCHOR);
}

/* Make t->cur a part of window w, flushing what it held for another window. */
RM_INLINE void rm_task_win(struct rm_env *e, struct rm_task *t, __u64 w)
{
	if (t->cur.win != w) {
		rm_flush(e, t);
		t->cur.win = w;
	}
}

RM_INLINE __u64 rm_next_seg_id(struct rm_env *e);

/*
 * Follow-replies (an option, e->follow_replies): a worker of a thread pool
 * takes a request from a queue that another thread read, often without
 * being woken, so nothing in the kernel tells which request it works on
 * until it answers: the reply goes out on the socket the request came in
 * on. So after a send, a thread's CPU is not left unsegmented but goes to a
 * *continuation* part (RM_MODE_CONT, RM_PF_CONT), and the continuation parts
 * between one reply and the next form a *chain* (their parent_seg). When
 * the thread sends on a server-side socket (a reply), the chain is
 * anchored: the part (or, if parts of the chain were already emitted, an
 * anchor record) takes as inbound tuple and range the bytes last received
 * on that socket - the request it answers - and the aggregator charges the
 * whole chain like that request. Only threads that serve (that used a
 * server-side socket) have chains: a client's work after its sends stays
 * unsegmented, with no record. A chain that ends at the thread's next
 * recv on a server-side socket (it reads the next request itself: an event
 * loop, a thread per connection) after a wait was not work for a request:
 * its CPU goes back to unsegmented, or, if some of it was already emitted,
 * an empty anchor record tells the aggregator so. Before any wait it was
 * the tail of the request answered (rm_cont_tail).
 */

/* Turns t's associated part into the first part of a continuation at time now. */
RM_INLINE void rm_cont_begin(struct rm_env *e, struct rm_task *t, __u64 now)
{
	struct rm_part *p = &t->cur;
	__u64 id = rm_next_seg_id(e);

	if (!id)
		return;
	rm_flush(e, t);
	p->seg_id = id;
	p->win = rm_win(e, now);
	p->start_ns = now;
	p->end_ns = now;
	p->flags = RM_PF_CONT | RM_PF_START;
	p->in_seq_start = 0;
	p->in_seq_end = 0;
	p->out_seq_start = 0;
	p->out_seq_end = 0;
	__builtin_memset(&p->in, 0, sizeof(p->in));
	__builtin_memset(&p->out, 0, sizeof(p->out));
	if (!t->chain) {
		t->chain = id;
		/* SLEPT, HANDED: set by rm_seg_wait, rm_on_handoff */
		t->chain_st &= RM_CHAIN_SLEPT | RM_CHAIN_SERVER | RM_CHAIN_HANDED;
	}
	p->parent_seg = t->chain;
	t->mode = RM_MODE_CONT;
	t->tail = 0;
}

/*
 * Gives what t's continuation part holds back to the unsegmented counters
 * of its window, if that is the current window (else it stays, to be
 * emitted).
 */
RM_INLINE void rm_cont_fold(struct rm_env *e, struct rm_task *t, __u64 now)
{
	struct rm_part *p = &t->cur;
	struct rm_wintot *w;
	__u64 c;

	if (!t->dirty || p->win != rm_win(e, now) || !(w = rm_env_wintot(e, p->win)))
		return;
	c = RM_TAKE(&p->cpu_ns);
	RM_ADD(&w->unseg_cpu_ns, c);
	rm_unseg_rt(w, t->rt, c);
	RM_ADD(&w->unseg_rx, RM_TAKE(&p->rx_bytes));
	RM_ADD(&w->unseg_tx, RM_TAKE(&p->tx_bytes));
	RM_ADD(&w->unseg_disk_read, RM_TAKE(&p->disk_read));
	RM_ADD(&w->unseg_disk_write, RM_TAKE(&p->disk_write));
	RM_TAKE(&p->runq_ns);
	t->dirty = 0;
}

/*
 * t (RM_MODE_CONT) has shown nothing since the send that began its chain:
 * no part of the chain emitted, no bytes sent, no disk I/O.
 */
RM_INLINE int rm_cont_quiet(const struct rm_task *t)
{
	return !(t->chain_st & (RM_CHAIN_OUT | RM_CHAIN_DONE)) && t->chain == t->cur.seg_id && !t->cur.tx_bytes &&
	       !t->cur.disk_read && !t->cur.disk_write;
}

/*
 * The request's tail under chains: t's chain (RM_MODE_CONT) has shown
 * nothing since the reply that began it (rm_cont_quiet) and t has not
 * blocked nor been handed a job since (t->ans still valid: rm_cont_block
 * and rm_on_handoff clear it); now it blocks or reads again. What the chain holds is the
 * tail of the request t answered last (t->ans), as the tail rule charges
 * it without chains: the part is anchored to that request in place and
 * emitted, the chain is closed and t holds no request (RM_MODE_ASSOC).
 * Returns 1 if so, 0 if t is not in such a tail (nothing changed).
 */
RM_INLINE int rm_cont_tail(struct rm_env *e, struct rm_task *t, __u64 now)
{
	struct rm_part *p = &t->cur;

	if (t->mode != RM_MODE_CONT || (t->chain_st & RM_CHAIN_DONE) || !(t->ans_st & RM_ANS_VALID) ||
	    !rm_cont_quiet(t))
		return 0;
	__builtin_memcpy(&p->in, &t->ans, sizeof(p->in));
	p->flags |= RM_PF_ANCHOR;
	p->flags &= ~RM_PF_IN_SEQ;
	p->in_seq_start = 0;
	p->in_seq_end = 0;
	if (t->ans_st & RM_ANS_SEQ) {
		p->flags |= RM_PF_IN_SEQ;
		p->in_seq_start = t->ans_seq_start;
		p->in_seq_end = t->ans_seq_end;
	}
	rm_flush(e, t);
	t->chain = 0;
	t->chain_st &= RM_CHAIN_SERVER | RM_CHAIN_HANDED | RM_CHAIN_REQ;
	t->mode = RM_MODE_ASSOC;
	t->tail = 0;
	p->start_ns = now;
	return 1;
}

/*
 * Ends t's chain anchored from its start (RM_CHAIN_DONE) at time now: its
 * part is emitted, charged like the request it names; the thread is back
 * to holding no request, as after a hand-off.
 */
RM_INLINE void rm_done_end(struct rm_env *e, struct rm_task *t, __u64 now)
{
	rm_flush(e, t);
	t->chain = 0;
	t->chain_st = (t->chain_st & RM_CHAIN_SERVER) | RM_CHAIN_HANDED | RM_CHAIN_SLEPT;
	t->mode = RM_MODE_ASSOC;
	t->tail = 0;
	t->cur.start_ns = now;
}

/*
 * Ends t's chain anchored to a peer's request (RM_CHAIN_PEER, rm_on_handoff)
 * at t's socket edge at time now: its part is emitted, charged like that
 * request; the thread holds no request. fresh (a send): a continuation
 * chain of its own begins, not anchored yet (after a wait), so that what
 * the send carries goes to the request its next reply answers, not to the
 * peer's. Nothing if t has no such chain.
 */
RM_INLINE void rm_peer_end(struct rm_env *e, struct rm_task *t, __u64 now, int fresh)
{
	if (t->mode != RM_MODE_CONT || !(t->chain_st & RM_CHAIN_PEER))
		return;
	rm_flush(e, t);
	t->chain = 0;
	t->chain_st &= RM_CHAIN_SERVER | RM_CHAIN_HANDED;
	t->mode = RM_MODE_ASSOC;
	t->tail = 0;
	t->cur.start_ns = now;
	if (fresh) {
		t->chain_st |= RM_CHAIN_SLEPT;
		rm_cont_begin(e, t, now);
	}
}

/*
 * Ends t's continuation part at time now without a reply: work for no
 * request, unsegmented as without the option (no record at all), unless it
 * belongs to an earlier window: then it is emitted and its chain will need
 * an anchor record. A part anchored from its start (RM_CHAIN_DONE) is
 * emitted.
 */
RM_INLINE void rm_cont_end(struct rm_env *e, struct rm_task *t, __u64 now)
{
	if (t->mode != RM_MODE_CONT)
		return;
	if (!(t->chain_st & RM_CHAIN_DONE))
		rm_cont_fold(e, t, now);
	rm_flush(e, t);
	t->mode = RM_MODE_NONE;
}

/*
 * Thread t blocks (not preempted) at time now. A worker that blocks after
 * its reply and before sending anything else is most likely waiting for
 * its next request: what it did since the reply is the tail of the
 * request it answered (bookkeeping, signalling), charged to that request
 * (rm_cont_tail), as the tail rule charges it without chains; if the
 * thread's last reply answered no known request, it goes back to
 * unsegmented. Only the first block of a chain counts: a job's own later
 * waits (a back-end call, disk) keep their CPU in the chain. (A job taken
 * from a queue without a wait that blocks before its first send goes to
 * the request answered before it.)
 */
RM_INLINE void rm_cont_block(struct rm_env *e, struct rm_task *t, __u64 now)
{
	if (t->mode != RM_MODE_CONT) {
		t->ans_st = 0; /* the tail of its last reply, if any, ends here */
		return;
	}
	if (t->chain_st & RM_CHAIN_PEER) {
		/* a peer's request goes on across waits, to the next socket edge (rm_peer_end) */
		t->chain_st |= RM_CHAIN_SLEPT;
		t->ans_st = 0;
		return;
	}
	if (t->chain_st & RM_CHAIN_DONE) {
		/* finishing another's request ends when it waits again */
		t->ans_st = 0;
		rm_done_end(e, t, now);
		return;
	}
	if (!rm_cont_tail(e, t, now) && !(t->chain_st & RM_CHAIN_SLEPT) && rm_cont_quiet(t))
		rm_cont_fold(e, t, now);
	t->chain_st |= RM_CHAIN_SLEPT;
	t->ans_st = 0; /* the tail of its last reply, if any, ends here */
}

/*
 * Thread t, in a segment, waits for an event (an interruptible sleep: a
 * poll, a condition, a lock; not disk I/O) at time now. With follow-replies
 * what it does after the wait is no longer taken to be the request's work
 * by default: its segment ends and a chain begins, as after a send. If the
 * thread then answers on a server-side socket, the chain is charged to the
 * request it answers (a thread that waited for a worker's result, or for a
 * lock); if it reads the next request first, it was an event loop back in
 * its poll, and that work is unsegmented. A wait inside a chain never
 * folds the chain's CPU (RM_CHAIN_SLEPT).
 */
RM_INLINE void rm_seg_wait(struct rm_env *e, struct rm_task *t, __u64 now)
{
	if (!e->follow_replies || t->mode != RM_MODE_SEG || !(t->chain_st & RM_CHAIN_SERVER))
		return;
	rm_flush(e, t);
	t->mode = RM_MODE_ASSOC;
	t->tail = 0;
	t->cur.flags |= RM_PF_ASSOC;
	t->cur.start_ns = now;
	t->chain_st |= RM_CHAIN_SLEPT;
}

/*
 * Closes t's open chain. If parts of it were emitted, emits its anchor
 * record (no cost): inbound tuple tp with the range in inb (NULL: the
 * chain answered no request). The record is built in t->cur, which is
 * emitted first and given back unchanged.
 */
RM_INLINE void rm_chain_close(struct rm_env *e, struct rm_task *t, __u64 now, const struct rm_tuple *tp,
			      const struct rm_inb *inb)
{
	struct rm_part *p = &t->cur;
	struct rm_tuple save_in;
	struct rm_counts z;
	__u64 save_id, save_win, save_start, save_end, save_parent, save_is, save_ie, id;
	__u32 save_flags;

	if (t->chain && (t->chain_st & RM_CHAIN_OUT) && (id = rm_next_seg_id(e)) != 0) {
		rm_flush(e, t);
		__builtin_memcpy(&save_in, &p->in, sizeof(save_in));
		save_id = p->seg_id;
		save_win = p->win;
		save_start = p->start_ns;
		save_end = p->end_ns;
		save_parent = p->parent_seg;
		save_is = p->in_seq_start;
		save_ie = p->in_seq_end;
		save_flags = p->flags;
		__builtin_memset(&z, 0, sizeof(z));
		p->seg_id = id;
		p->win = rm_win(e, now);
		p->start_ns = now;
		p->end_ns = now;
		p->parent_seg = t->chain;
		p->flags = RM_PF_ANCHOR;
		p->in_seq_start = 0;
		p->in_seq_end = 0;
		if (tp) {
			__builtin_memcpy(&p->in, tp, sizeof(*tp));
			if (inb && inb->has_seq) {
				p->flags |= RM_PF_IN_SEQ;
				p->in_seq_start = inb->seq_start;
				p->in_seq_end = inb->seq_end;
			}
		} else {
			__builtin_memset(&p->in, 0, sizeof(p->in));
		}
		if (rm_env_emit(e, p, &z) < 0)
			rm_drop_part(e, p->win, &z); /* no cost: only dropped_parts moves */
		__builtin_memcpy(&p->in, &save_in, sizeof(save_in));
		p->seg_id = save_id;
		p->win = save_win;
		p->start_ns = save_start;
		p->end_ns = save_end;
		p->parent_seg = save_parent;
		p->in_seq_start = save_is;
		p->in_seq_end = save_ie;
		p->flags = save_flags;
	}
	t->chain = 0;
	t->chain_st &= RM_CHAIN_SERVER;
}

/* d ns of t's CPU (t NULL: unsegmented) in window w, the last at time end. */
RM_INLINE void rm_charge_cpu(struct rm_env *e, struct rm_task *t, __u64 w, __u64 end, __u64 d)
{
	struct rm_wintot *wt;

	if (!d || !(wt = rm_env_wintot(e, w)))
		return;
	RM_ADD(&wt->busy_ns, d);
	if (t && (t->mode == RM_MODE_SEG || t->mode == RM_MODE_CONT || (t->mode == RM_MODE_ASSOC && t->tail))) {
		rm_task_win(e, t, w);
		RM_ADD(&t->cur.cpu_ns, d);
		t->cur.end_ns = end;
		t->dirty = 1;
		RM_ENV_CHARGED(e, t, d, 1);
	} else {
		RM_ADD(&wt->unseg_cpu_ns, d);
		rm_unseg_rt(wt, t ? t->rt : e->rt, d);
		RM_ENV_CHARGED(e, t, d, 0);
	}
}

/*
 * Account CPU time [from, to) of thread t (NULL: a thread without state) that
 * ran on e->cpu. Splits at window boundaries; time more than RM_MAX_SPLIT
 * windows old is counted as lost in the oldest window kept.
 */
RM_INLINE void rm_account_cpu(struct rm_env *e, struct rm_task *t, __u64 from, __u64 to)
{
	__u64 wa, wb, i;

	if (to <= from)
		return;
	if (t && t->mode == RM_MODE_ASSOC && e->follow_replies && (t->chain_st & RM_CHAIN_SERVER))
		rm_cont_begin(e, t, from);
	wa = rm_win(e, from);
	wb = rm_win(e, to - 1);
	if (wb - wa >= RM_MAX_SPLIT) {
		__u64 keep = rm_win_start(e, wb - RM_MAX_SPLIT + 1);
		struct rm_wintot *lw = rm_env_wintot(e, wb - RM_MAX_SPLIT + 1);

		if (lw) {
			RM_ADD(&lw->busy_ns, keep - from);
			RM_ADD(&lw->lost_ns, keep - from);
		}
		from = keep;
		wa = wb - RM_MAX_SPLIT + 1;
	}
	for (i = 0; i < RM_MAX_SPLIT; i++) {
		__u64 w = wa + i, s, end;

		if (w > wb)
			break;
		/* the first window starts at `from`: its rm_win_start may lie
		 * before time 0 and wrap (offset_ns > w * window_ns) */
		s = w == wa ? from : rm_win_start(e, w);
		end = rm_win_start(e, w + 1);
		if (end > to)
			end = to;
		if (end <= s)
			continue;
		rm_charge_cpu(e, t, w, end, end - s);
	}
}

/* Close the CPU slice of the thread running on e->cpu at time now. */
/*
 * Move the CPU's cut time forward to now and return where the slice to
 * account starts; 0 if there is nothing to account (first event on the CPU,
 * or someone else already accounted up to now or beyond).
 */
RM_INLINE __u64 rm_claim(struct rm_cpu *c, __u64 now)
{
	__u64 old;
	int i;

	for (i = 0; i < 4; i++) {
		old = c->last_ns;
		if (old >= now)
			return 0;
		if (__sync_val_compare_and_swap(&c->last_ns, old, now) == old)
			return old;
	}
	return 0;
}

/*
 * The time stolen from e->cpu by the hypervisor since the last cut (its
 * vCPU was runnable, the host ran something else): the thread on the CPU
 * did not run then, so its slice ends that much earlier. Taken with an
 * atomic exchange, so nested hooks never count it twice.
 */
RM_INLINE __u64 rm_take_steal(struct rm_env *e, struct rm_cpu *c)
{
	__u64 now_st = rm_env_steal(e), old;

	/* nothing stolen since the last cut (the common case): no locked exchange */
	if (!now_st || now_st == *(volatile __u64 *)&c->last_steal)
		return 0;
	old = __sync_lock_test_and_set(&c->last_steal, now_st);
	return old && now_st > old ? now_st - old : 0;
}

/* [from, now) less the time stolen in it: where the slice really ends. */
RM_INLINE __u64 rm_slice_end(struct rm_env *e, struct rm_cpu *c, __u64 from, __u64 now)
{
	__u64 st = rm_take_steal(e, c);

	if (!from)
		return 0;
	return st < now - from ? now - st : from;
}

RM_INLINE void rm_cut(struct rm_env *e, struct rm_task *t, __u64 now)
{
	struct rm_cpu *c;
	__u64 from;

	if (RM_ENV_CPU_COUNTERS(e))
		return; /* the includer charged the thread's counters (rm_ctr_edge) */
	if (!(c = rm_env_cpu(e)))
		return;
	from = rm_claim(c, now);
	if (from)
		rm_account_cpu(e, t, from, rm_slice_end(e, c, from, now));
	else
		rm_take_steal(e, c);
}

RM_INLINE __u64 rm_next_seg_id(struct rm_env *e)
{
	struct rm_cpu *c = rm_env_cpu(e);

	if (!c)
		return 0;
	c->next_seg++;
	return (((__u64)e->cpu + 1) << 48) | (c->next_seg & 0xffffffffffffULL);
}

/* Start a fresh segment in t->cur (after the previous one was flushed). */
RM_INLINE void rm_seg_begin(struct rm_env *e, struct rm_task *t, __u64 now, __u64 seg_id)
{
	struct rm_part *p = &t->cur;

	p->seg_id = seg_id;
	p->win = rm_win(e, now);
	p->start_ns = now;
	p->end_ns = now;
	p->flags = RM_PF_START;
	p->parent_seg = 0;
	p->in_seq_start = 0;
	p->in_seq_end = 0;
	p->out_seq_start = 0;
	p->out_seq_end = 0;
	__builtin_memset(&p->out, 0, sizeof(p->out));
	t->mode = RM_MODE_SEG;
	t->tail = 0;
	t->dirty = 1;
}

/*
 * Follow-replies: bytes [start, start + bytes) were just received on a
 * server-side socket whose last request is *in (socket storage in the
 * kernel, a table in the replay): contiguous reads of one request extend
 * its range, anything else starts a new one. A request that follows a
 * reply on the same connection (a persistent connection, a proxy's pooled
 * upstream connection carrying many clients' requests) is contiguous with
 * the one answered but is another request: once a reply went out
 * (rm_inb_replied), the next bytes start a new range.
 */
RM_INLINE void rm_inb_update(struct rm_inb *in, int has_seq, __u64 start, __u64 bytes)
{
	if (has_seq && in->has_seq && !in->replied && (__u32)in->seq_end == (__u32)start) {
		in->seq_end += bytes;
	} else {
		in->seq_start = start;
		in->seq_end = start + bytes;
	}
	in->has_seq = has_seq;
	in->replied = 0;
}

/* A reply was sent on the server-side socket whose last request is *in. */
RM_INLINE void rm_inb_replied(struct rm_inb *in)
{
	in->replied = 1;
}

/*
 * A recv of `bytes` (> 0) on socket `tp` by thread t (state created if needed)
 * at time now. has_seq: [seq_start, seq_start + bytes) is the TCP byte range.
 * TCP sequence numbers are 32 bits: ranges are kept as 64-bit start + length
 * (end may exceed 2^32) and compared modulo 2^32. srv: the socket is the
 * server side of its connection (a request arrives; follow-replies ends the
 * thread's chain), else a reply to the thread's own request.
 */
RM_INLINE void rm_on_recv(struct rm_env *e, struct rm_task *t, __u64 now, __u32 pid, __u32 tid,
			  const struct rm_tuple *tp, __u64 bytes, int has_seq, __u64 seq_start, int srv)
{
	__u64 w = rm_win(e, now), id, hfrom = 0, hend = 0;
	struct rm_wintot *wt;
	struct rm_cpu *c;
	__u32 passed = t->chain_st & RM_CHAIN_PASSED;

	t->chain_st &= ~(__u32)RM_CHAIN_PASSED;
	if (t->head && (t->mode == RM_MODE_ASSOC || t->mode == RM_MODE_NONE) && (c = rm_env_cpu(e)) != 0) {
		/* the request's head: its slice is the new segment's (below) */
		hfrom = rm_claim(c, now);
		hend = rm_slice_end(e, c, hfrom, now);
	} else {
		rm_cut(e, t, now);
	}
	t->head = 0;
	rm_peer_end(e, t, now, 0);
	t->own_reply &= ~(__u32)RM_OWN_LAST; /* it reads: it may hold a request */
	if (srv)
		t->chain_st |= RM_CHAIN_SERVER;
	wt = rm_env_wintot(e, w);
	if (wt)
		RM_ADD(&wt->rx_bytes, bytes);
	if (t->mode == RM_MODE_SEG && t->cur.in.cookie == tp->cookie && !passed) {
		/* more bytes of the same request (partial reads) */
		rm_task_win(e, t, w);
		RM_ADD(&t->cur.rx_bytes, bytes);
		t->cur.end_ns = now;
		if (has_seq && (t->cur.flags & RM_PF_IN_SEQ) && (__u32)seq_start == (__u32)t->cur.in_seq_end)
			t->cur.in_seq_end += bytes;
		else if (has_seq)
			t->cur.flags |= RM_PF_SEQ_SUSPECT;
		t->dirty = 1;
		return;
	}
	if (t->mode == RM_MODE_CONT && !srv && (t->chain_st & RM_CHAIN_OUT)) {
		/* the answer to the chain's own request: still the chain's work */
		rm_flush(e, t);
		t->mode = RM_MODE_NONE;
	}
	rm_cont_tail(e, t, now); /* the tail of the request answered ends here */
	rm_cont_end(e, t, now);
	if (t->chain && (srv || !(t->chain_st & RM_CHAIN_OUT)))
		rm_chain_close(e, t, now, 0, 0);
	if (t->mode == RM_MODE_SEG) {
		t->cur.flags |= RM_PF_RECV;
		t->dirty = 1;
	}
	rm_flush(e, t);
	id = rm_next_seg_id(e);
	rm_seg_begin(e, t, now, id);
	if (srv)
		t->chain_st |= RM_CHAIN_REQ;
	else
		t->chain_st &= ~(__u32)RM_CHAIN_REQ;
	t->cur.pid = pid;
	t->cur.tid = tid;
	__builtin_memcpy(&t->cur.in, tp, sizeof(*tp));
	if (has_seq) {
		t->cur.flags |= RM_PF_IN_SEQ;
		t->cur.in_seq_start = seq_start;
		t->cur.in_seq_end = seq_start + bytes;
	}
	if (hend > hfrom) {
		t->cur.win = rm_win(e, hfrom);
		rm_account_cpu(e, t, hfrom, hend);
		rm_task_win(e, t, w);
		t->cur.end_ns = now;
	}
	RM_ADD(&t->cur.rx_bytes, bytes);
}

/*
 * t replied on server-side socket tp to the bytes inb last received there
 * (NULL: unknown): what a thread it wakes in its tail is to finish
 * (rm_on_handoff).
 */
RM_INLINE void rm_ans_set(const struct rm_env *e, struct rm_task *t, const struct rm_tuple *tp,
			  const struct rm_inb *inb)
{
	if (!e->follow_replies || !inb)
		return;
	__builtin_memcpy(&t->ans, tp, sizeof(*tp));
	t->ans_seq_start = inb->seq_start;
	t->ans_seq_end = inb->seq_end;
	t->ans_st = RM_ANS_VALID | (inb->has_seq ? RM_ANS_SEQ : 0);
}

/*
 * t's part just ended at a send that is no reply: a call to another
 * service. req: the part was a segment that began with a request t read
 * itself (a proxy forwarding it); what t does next, up to its first wait
 * or read, is that request's tail, so it becomes the request t answered
 * (rm_cont_tail). Otherwise no request is known.
 */
RM_INLINE void rm_ans_call(const struct rm_env *e, struct rm_task *t, int req)
{
	const struct rm_part *p = &t->cur;

	t->ans_st = 0;
	if (!e->follow_replies || !req)
		return;
	__builtin_memcpy(&t->ans, &p->in, sizeof(t->ans));
	t->ans_seq_start = p->in_seq_start;
	t->ans_seq_end = p->in_seq_end;
	t->ans_st = RM_ANS_VALID | ((p->flags & RM_PF_IN_SEQ) ? RM_ANS_SEQ : 0);
}

/*
 * A send of `bytes` (> 0) on socket `tp` by thread t (NULL: no state) at time
 * now. srv: the socket is the server side of its connection (a reply); inb:
 * the bytes last received on it (NULL if unknown), which the reply answers
 * (follow-replies: they anchor the thread's chain). With follow-replies, a
 * thread without a segment that replies (a pool worker that never reads a
 * socket itself) is followed from then on: pass its state (created) and
 * pid/tid.
 */
RM_INLINE void rm_on_send(struct rm_env *e, struct rm_task *t, __u64 now, __u32 pid, __u32 tid,
			  const struct rm_tuple *tp, __u64 bytes, int has_seq, __u64 seq_start, int srv,
			  const struct rm_inb *inb)
{
	__u64 w = rm_win(e, now);
	struct rm_wintot *wt;
	struct rm_part *p;
	int closing;

	rm_cut(e, t, now);
	if (t) {
		t->head = 0;
		rm_peer_end(e, t, now, 1);
		if (srv && inb && inb->reader == tid)
			t->own_reply = RM_OWN_ANSWERED | RM_OWN_LAST; /* it answers a request it read itself */
		else
			t->own_reply &= ~(__u32)RM_OWN_LAST; /* a call, or another's request: it holds one */
	}
	wt = rm_env_wintot(e, w);
	if (wt)
		RM_ADD(&wt->tx_bytes, bytes);
	if (!t || t->mode == RM_MODE_NONE) {
		if (wt)
			RM_ADD(&wt->unseg_tx, bytes);
		if (t && srv && e->follow_replies) {
			/* its work from now on goes to the requests it answers */
			t->chain_st |= RM_CHAIN_SERVER;
			t->mode = RM_MODE_ASSOC;
			t->tail = 0;
			rm_task_win(e, t, w); /* an exit before any CPU emits a part of this window */
			t->cur.start_ns = now;
			t->cur.pid = pid;
			t->cur.tid = tid;
			rm_ans_set(e, t, tp, inb);
		}
		return;
	}
	p = &t->cur;
	if (srv)
		t->chain_st |= RM_CHAIN_SERVER;
	closing = t->mode == RM_MODE_SEG || t->mode == RM_MODE_CONT;
	if (t->mode == RM_MODE_CONT && srv && inb) {
		/* a reply: this continuation worked for the request it answers */
		__builtin_memcpy(&p->in, tp, sizeof(*tp));
		p->flags |= RM_PF_ANCHOR;
		p->flags &= ~RM_PF_IN_SEQ;
		p->in_seq_start = 0;
		p->in_seq_end = 0;
		if (inb->has_seq) {
			p->flags |= RM_PF_IN_SEQ;
			p->in_seq_start = inb->seq_start;
			p->in_seq_end = inb->seq_end;
		}
	}
	if (t->mode == RM_MODE_ASSOC &&
	    (p->out.cookie != tp->cookie || !has_seq != !(p->flags & RM_PF_OUT_SEQ) ||
	     (has_seq && (__u32)seq_start != (__u32)p->out_seq_end))) {
		/* another socket, or a byte range that does not follow: new
		 * part, unless this one has sent nothing yet (its out tuple
		 * names no range: it is only the tail's CPU and I/O so far) */
		if (p->tx_bytes) {
			rm_flush(e, t);
			p->start_ns = now;
		}
		p->out_seq_start = seq_start;
		p->out_seq_end = seq_start;
		p->flags &= ~RM_PF_OUT_SEQ;
	}
	rm_task_win(e, t, w);
	if (closing) {
		p->out_seq_start = seq_start;
		p->out_seq_end = seq_start;
		p->flags |= RM_PF_END;
	} else {
		p->flags |= RM_PF_ASSOC;
	}
	__builtin_memcpy(&p->out, tp, sizeof(*tp));
	RM_ADD(&p->tx_bytes, bytes);
	p->end_ns = now;
	if (has_seq) {
		/* out_seq_end == seq_start modulo 2^32 here: extend, do not wrap */
		p->flags |= RM_PF_OUT_SEQ;
		p->out_seq_end += bytes;
	}
	t->dirty = 1;
	if (closing) {
		int req = t->mode == RM_MODE_SEG && (t->chain_st & RM_CHAIN_REQ);

		rm_flush(e, t);
		t->mode = RM_MODE_ASSOC;
		t->tail = 1; /* its CPU goes on to the request it answered */
		p->flags |= RM_PF_ASSOC;
		p->start_ns = now;
		p->out_seq_start = p->out_seq_end;
		if (srv && t->chain)
			rm_chain_close(e, t, now, inb ? tp : 0, inb);
		if (srv)
			rm_ans_set(e, t, tp, inb);
		else
			rm_ans_call(e, t, req);
	}
}

/*
 * Disk bytes issued in the context of thread t (NULL: no state), which must
 * be the thread running on e->cpu when t has state. A charged I/O first
 * closes the CPU slice, as recv and send do: otherwise the part would move
 * on to now's window ahead of CPU time not yet accounted, and the next cut
 * would emit several parts of one segment for the same window.
 */
RM_INLINE void rm_on_disk(struct rm_env *e, struct rm_task *t, __u64 now, __u64 bytes, int is_write)
{
	__u64 w = rm_win(e, now);
	struct rm_wintot *wt;
	int charged = t && t->mode != RM_MODE_NONE;

	if (t)
		t->head = 0; /* not reading a request */
	if (charged)
		rm_cut(e, t, now);
	wt = rm_env_wintot(e, w);
	if (charged) {
		rm_task_win(e, t, w);
		if (is_write)
			RM_ADD(&t->cur.disk_write, bytes);
		else
			RM_ADD(&t->cur.disk_read, bytes);
		t->dirty = 1;
	}
	if (!wt)
		return;
	if (is_write) {
		RM_ADD(&wt->disk_write, bytes);
		if (!charged)
			RM_ADD(&wt->unseg_disk_write, bytes);
	} else {
		RM_ADD(&wt->disk_read, bytes);
		if (!charged)
			RM_ADD(&wt->unseg_disk_read, bytes);
	}
}

/*
 * Thread t woke another thread of its process from a write or a futex
 * wake. If it is in a segment it began by reading a client-side socket (a
 * reader of replies, e.g. a gRPC channel's), it handed what it read over:
 * its next recv, even on the same socket, begins a new segment
 * (RM_CHAIN_PASSED), so a thread that reads a multiplexed connection's
 * replies for many clients pairs each read with the sends it covers, not
 * with every send since its first read. Only a flag: no CPU is cut.
 */
RM_INLINE void rm_on_pass(struct rm_task *t)
{
	if (t->mode == RM_MODE_SEG && !(t->chain_st & RM_CHAIN_REQ))
		t->chain_st |= RM_CHAIN_PASSED;
}

/*
 * The third kind of hand-off (rm_on_handoff): wakee_t's work from now on is
 * for the request waker_t holds. The wakee's chain so far ends (it was woken
 * holding none), and a chain anchored from its start to waker_t's request
 * begins (RM_CHAIN_DONE | RM_CHAIN_PEER): it goes on across the wakee's
 * waits to its next socket edge (rm_peer_end).
 */
RM_INLINE void rm_peer_begin(struct rm_env *e, const struct rm_task *waker_t, struct rm_task *wakee_t, __u64 now)
{
	struct rm_part *p;

	rm_cont_end(e, wakee_t, now);
	rm_chain_close(e, wakee_t, now, 0, 0);
	wakee_t->ans_st = 0; /* not in a reply's tail any more */
	rm_cont_begin(e, wakee_t, now);
	if (wakee_t->mode != RM_MODE_CONT)
		return; /* no segment id */
	p = &wakee_t->cur;
	__builtin_memcpy(&p->in, &waker_t->cur.in, sizeof(p->in));
	p->flags |= RM_PF_ANCHOR;
	if (waker_t->cur.flags & RM_PF_IN_SEQ) {
		p->flags |= RM_PF_IN_SEQ;
		p->in_seq_start = waker_t->cur.in_seq_start;
		p->in_seq_end = waker_t->cur.in_seq_end;
	}
	wakee_t->chain_st |= RM_CHAIN_DONE | RM_CHAIN_PEER;
}

/*
 * Thread waker_t, running on e->cpu, wakes thread wakee_t of the same
 * process at time now, from a write or a futex wake (either may be NULL:
 * no state). A waker in the tail of a request (no chain) ends that tail
 * here (and a reader of replies, rm_on_pass). With follow-replies three
 * kinds of wake-up hand work over:
 * - A thread that has just read a request on a server-side socket hands
 *   the request to another (a queue's condition, a pipe, an eventfd). The
 *   waker's segment ends there, as at a wait (rm_seg_wait): a reader that
 *   hands requests to workers is charged for reading and handing over, not
 *   for its loop until the next recv; a thread that goes on to answer the
 *   request itself has that work anchored to it by its reply. If the wakee
 *   is a worker whose chain has shown nothing since its last reply, all of
 *   that chain so far - the bookkeeping after the reply, locks taken on the
 *   way back to the queue, going to sleep - was the tail of the request it
 *   answered, not work for the next one: it goes back to unsegmented, like
 *   the first block's fold (rm_cont_block), which alone misses the tail
 *   after a contended lock. What the wakee does from now on stays in its
 *   chain.
 * - A worker in the tail of a reply (nothing sent, no block, no new job
 *   handed to it since) wakes a thread
 *   that handed a request over and holds none (RM_CHAIN_HANDED: a reader
 *   in its poll loop): to finish the request answered (take the connection
 *   back, watch it again). The wakee's work from now on until it waits
 *   again, reads a request or answers one is charged to the request the
 *   waker answered (RM_CHAIN_DONE: a part anchored from its start); once
 *   per reply.
 * - A thread holding a request it read wakes a thread of its process that
 *   holds none, both having answered requests they read themselves
 *   (rm_task.own_reply: the threads of an event loop; never a reader that
 *   hands requests to workers, nor its workers), the wakee's last socket
 *   edge being such a reply (RM_OWN_LAST: not a request it read, nor a call
 *   it made for one, whose work goes on after the wake): the waker needs something
 *   of the wakee for its request (an event loop taking over another
 *   thread's idle back-end connection wakes the owner to let it go, and the
 *   owner may spin on a lock the taker holds while the taker is off the
 *   CPU). The waker keeps its segment; the wakee's CPU from the wake to its
 *   next socket edge, across its waits, is the waker's request's
 *   (RM_CHAIN_PEER, rm_peer_begin). This kind is checked first. Not for
 *   a managed runtime's threads, which wake each other for the runtime's
 *   own work.
 */
RM_INLINE void rm_on_handoff(struct rm_env *e, struct rm_task *waker_t, struct rm_task *wakee_t, __u64 now)
{
	struct rm_part *p;

	if (!waker_t || waker_t == wakee_t)
		return;
	waker_t->head = 0; /* it hands work over, it does not read a request */
	rm_on_pass(waker_t);
	if (waker_t->mode == RM_MODE_ASSOC && waker_t->tail &&
	    !(e->follow_replies && (waker_t->chain_st & RM_CHAIN_SERVER))) {
		/* the request's tail ends where the thread hands work over */
		rm_cut(e, waker_t, now);
		waker_t->tail = 0;
	}
	if (!e->follow_replies)
		return;
	if (waker_t->mode == RM_MODE_SEG && (waker_t->chain_st & RM_CHAIN_REQ) && (waker_t->own_reply & RM_OWN_ANSWERED) &&
	    !waker_t->rt && wakee_t && (wakee_t->own_reply & RM_OWN_LAST) &&
	    (wakee_t->mode == RM_MODE_ASSOC || wakee_t->mode == RM_MODE_CONT)) {
		rm_cut(e, waker_t, now); /* the waker runs on e->cpu; it keeps its segment */
		rm_peer_begin(e, waker_t, wakee_t, now);
		return;
	}
	if (waker_t->mode == RM_MODE_SEG && (waker_t->chain_st & RM_CHAIN_REQ)) {
		rm_cut(e, waker_t, now); /* the waker runs on e->cpu */
		rm_seg_wait(e, waker_t, now);
		waker_t->chain_st |= RM_CHAIN_HANDED;
		if (wakee_t && wakee_t->mode == RM_MODE_CONT && rm_cont_quiet(wakee_t))
			rm_cont_fold(e, wakee_t, now);
		if (wakee_t)
			wakee_t->ans_st = 0; /* it has a new job: no longer in a reply's tail */
		return;
	}
	if (!(waker_t->ans_st & RM_ANS_VALID) ||
	    !(waker_t->mode == RM_MODE_CONT ? rm_cont_quiet(waker_t)
					    : waker_t->mode == RM_MODE_ASSOC && !waker_t->cur.tx_bytes &&
						      !waker_t->cur.disk_read && !waker_t->cur.disk_write) ||
	    !wakee_t || !(wakee_t->chain_st & RM_CHAIN_HANDED) ||
	    (wakee_t->mode != RM_MODE_ASSOC && wakee_t->mode != RM_MODE_CONT))
		return;
	rm_cont_end(e, wakee_t, now);
	rm_chain_close(e, wakee_t, now, 0, 0);
	rm_cont_begin(e, wakee_t, now);
	if (wakee_t->mode != RM_MODE_CONT)
		return; /* no segment id */
	p = &wakee_t->cur;
	__builtin_memcpy(&p->in, &waker_t->ans, sizeof(p->in));
	p->flags |= RM_PF_ANCHOR;
	if (waker_t->ans_st & RM_ANS_SEQ) {
		p->flags |= RM_PF_IN_SEQ;
		p->in_seq_start = waker_t->ans_seq_start;
		p->in_seq_end = waker_t->ans_seq_end;
	}
	wakee_t->chain_st |= RM_CHAIN_DONE | RM_CHAIN_HANDED;
	waker_t->ans_st = 0;
}

RM_INLINE void rm_on_wakeup(struct rm_task *t, __u64 now)
{
	if (t && !t->wake_ns)
		t->wake_ns = now;
}

/*
 * Context switch on e->cpu at time now. prev_t/next_t may be NULL (no state);
 * prev_idle: prev is the idle task; prev_runnable: prev stays runnable
 * (preempted), so its run-queue wait starts now; prev_waits: prev sleeps
 * interruptibly (waits for an event, not for disk I/O).
 */
RM_INLINE void rm_on_switch(struct rm_env *e, struct rm_task *prev_t, int prev_idle, int prev_runnable,
			    int prev_waits, struct rm_task *next_t, __u64 now)
{
	struct rm_cpu *c = rm_env_cpu(e);
	__u64 from;

	if (!c)
		return;
	from = rm_claim(c, now);
	if (from && !prev_idle)
		rm_account_cpu(e, prev_t, from, rm_slice_end(e, c, from, now));
	else
		rm_take_steal(e, c);
	if (prev_t && !prev_runnable) {
		rm_cont_block(e, prev_t, now);
		if (prev_waits) {
			rm_seg_wait(e, prev_t, now);
			prev_t->tail = 0; /* the request's tail ends at its first wait */
			/* waiting for its next request: what it does on waking reads it */
			prev_t->head = prev_t->mode == RM_MODE_ASSOC || prev_t->mode == RM_MODE_NONE;
		}
	}
	if (prev_t)
		prev_t->wake_ns = prev_runnable ? now : 0;
	if (next_t && next_t->wake_ns) {
		__u64 d = now > next_t->wake_ns ? now - next_t->wake_ns : 0;

		if (next_t->mode == RM_MODE_SEG || next_t->mode == RM_MODE_CONT) {
			rm_task_win(e, next_t, rm_win(e, now));
			RM_ADD(&next_t->cur.runq_ns, d);
			next_t->dirty = 1;
		}
		next_t->wake_ns = 0;
	}
}

/*
 * Thread `child_t` (fresh state) was created by `parent_t` while the parent
 * was in a segment: the child inherits it as a segment of its own.
 * Returns 1 if the child got a segment, 0 if the parent had none.
 */
RM_INLINE int rm_on_fork(struct rm_env *e, const struct rm_task *parent_t, struct rm_task *child_t,
			 __u64 now, __u32 child_pid, __u32 child_tid)
{
	struct rm_part *p = &child_t->cur;

	if (!parent_t || parent_t->mode != RM_MODE_SEG)
		return 0;
	__builtin_memcpy(p, &parent_t->cur, sizeof(*p));
	rm_seg_begin(e, child_t, now, rm_next_seg_id(e));
	p->start_ns = parent_t->cur.start_ns;
	p->flags |= RM_PF_INHERIT | (parent_t->cur.flags & (RM_PF_IN_SEQ | RM_PF_SEQ_SUSPECT));
	p->in_seq_start = parent_t->cur.in_seq_start;
	p->in_seq_end = parent_t->cur.in_seq_end;
	p->parent_seg = parent_t->cur.seg_id;
	p->pid = child_pid;
	p->tid = child_tid;
	p->cpu_ns = 0;
	p->runq_ns = 0;
	p->rx_bytes = 0;
	p->tx_bytes = 0;
	p->disk_read = 0;
	p->disk_write = 0;
	child_t->wake_ns = 0;
	return 1;
}

/*
 * Wake-up chains (an option): thread waker_t, in a segment and inside a
 * futex wake, makes wakee_t runnable (a hand-off to a worker thread through
 * a queue). A wakee that is not in a segment of its own inherits the
 * waker's, as a thread created there would, until its next recv. Whatever
 * the wakee still held (an associated part) is emitted first.
 * Returns 1 if the wakee inherited.
 */
RM_INLINE int rm_on_wake_inherit(struct rm_env *e, const struct rm_task *waker_t, struct rm_task *wakee_t,
				 __u64 now, __u32 wakee_pid, __u32 wakee_tid)
{
	if (!waker_t || waker_t->mode != RM_MODE_SEG || !waker_t->waking || wakee_t->mode == RM_MODE_SEG)
		return 0;
	rm_cont_end(e, wakee_t, now);
	rm_chain_close(e, wakee_t, now, 0, 0);
	rm_flush(e, wakee_t);
	if (!rm_on_fork(e, waker_t, wakee_t, now, wakee_pid, wakee_tid))
		return 0;
	wakee_t->wake_ns = now;
	return 1;
}

/* Thread t (on e->cpu) exits at time now: close its slice and its part. */
RM_INLINE void rm_on_exit(struct rm_env *e, struct rm_task *t, __u64 now)
{
	rm_cut(e, t, now);
	rm_cont_end(e, t, now);
	rm_chain_close(e, t, now, 0, 0);
	if (t->mode != RM_MODE_NONE) {
		t->cur.flags |= RM_PF_EXIT;
		t->cur.end_ns = now;
		t->dirty = 1;
	}
	rm_flush(e, t);
	t->mode = RM_MODE_NONE;
	t->tail = 0;
	t->head = 0;
}

/*
 * Datagrams (UDP). A datagram received and what the same thread sends
 * next (the answer, to the sender's address) form a segment, as a request
 * read from a stream socket does; but each datagram is a message of its
 * own: a second datagram read on the same socket before anything is sent
 * is another request, not more bytes of the first, so the open segment
 * ends there (RM_PF_RECV, as at a recv on another socket) and a new one
 * begins. Datagrams carry no byte ranges.
 */
RM_INLINE void rm_on_dgram_recv(struct rm_env *e, struct rm_task *t, __u64 now, __u32 pid, __u32 tid,
				const struct rm_tuple *tp, __u64 bytes, int srv)
{
	if (t->mode == RM_MODE_SEG && t->cur.in.cookie == tp->cookie) {
		rm_cut(e, t, now);
		t->cur.flags |= RM_PF_RECV;
		t->dirty = 1;
		rm_flush(e, t);
		t->mode = RM_MODE_NONE;
	}
	rm_on_recv(e, t, now, pid, tid, tp, bytes, 0, 0, srv);
}

/*
 * The sender of the datagram that began segment seg_id of t on socket
 * `cookie`, known only once the recv returned (an unconnected socket names
 * no peer: the kernel side reads the address the recv wrote out, at the
 * thread's next socket call): raddr (16 bytes, as rm_tuple holds them) and
 * rport (host order) become the inbound tuple's remote end, the tenant the
 * segment is charged to. Parts of the segment emitted before (a window
 * edge) keep the tuple without it. Nothing changes unless t still holds
 * that segment with no remote port.
 */
RM_INLINE void rm_on_dgram_src(struct rm_task *t, __u64 seg_id, __u64 cookie, const __u32 *raddr, __u32 rport)
{
	struct rm_part *p = &t->cur;

	if (t->mode == RM_MODE_NONE || p->seg_id != seg_id || p->in.cookie != cookie || p->in.rport || !rport)
		return;
	p->in.raddr[0] = raddr[0];
	p->in.raddr[1] = raddr[1];
	p->in.raddr[2] = raddr[2];
	p->in.raddr[3] = raddr[3];
	p->in.rport = rport;
}

/*
 * Datagrams between nodes are paired by the aggregator with the sends that
 * produced them, one by one: each end counts the bytes of the datagrams of
 * each directed flow (the kernel side, per socket and remote end), and a
 * part carries its datagram as a range at RM_SEQ_DGRAM + that count
 * (rm_part_def.h). A send's range goes through rm_on_send as a TCP range
 * does (a part after a reply that sends several datagrams on one flow
 * holds them as one range). The receiving segment's range is known once its sender
 * is (rm_on_dgram_src, or at the recv on a connected socket): start is the
 * receiver's count before this datagram, len its length. Nothing changes
 * unless t still holds segment seg_id of socket `cookie`, with its sender.
 */
RM_INLINE void rm_on_dgram_range(struct rm_task *t, __u64 seg_id, __u64 cookie, __u64 start, __u64 len)
{
	struct rm_part *p = &t->cur;

	if (t->mode == RM_MODE_NONE || p->seg_id != seg_id || p->in.cookie != cookie || !p->in.rport || !len)
		return;
	p->flags |= RM_PF_IN_SEQ;
	p->in_seq_start = RM_SEQ_DGRAM + start;
	p->in_seq_end = RM_SEQ_DGRAM + start + len;
}

/* Emit whatever t holds (collector shutdown, or a thread idle for long). */
RM_INLINE void rm_sweep(struct rm_env *e, struct rm_task *t)
{
	rm_flush(e, t);
}

/*
 * CPU counters (an option of the eBPF backend: RM_ENV_CPU_COUNTERS). No
 * hook runs on context switches: a thread's CPU is what its own on-CPU
 * counter (the one CLOCK_THREAD_CPUTIME_ID reads) grew by between two of its
 * edges - recv, send, disk I/O, exit - or a window sweep, and its run-queue
 * wait what the scheduler's run_delay grew by; the includer reads both and
 * calls rm_ctr_edge before the edge's rm_on_* (rm_cut does nothing then).
 * Every nanosecond a thread's counter grows by is claimed once (the
 * includer moves rm_task.cpu_mark forward atomically) and lands in busy and
 * in exactly one of a part, unsegmented or lost: the identity holds as
 * with slices, with busy the sum of the threads' counters. What the
 * counters cannot tell is where in the interval the CPU was used: all of it
 * goes to the window of the edge (or of the sweep) that claims it.
 */

/*
 * d ns of t's CPU (t NULL: unsegmented) used in [from, to): split at window
 * edges in proportion to the time in each window (the counters do not say
 * when in the interval it ran), the parts summing to d exactly; an interval
 * longer than RM_MAX_SPLIT windows is spread over the last RM_MAX_SPLIT.
 */
RM_INLINE void rm_ctr_spread(struct rm_env *e, struct rm_task *t, __u64 from, __u64 to, __u64 d)
{
	__u64 wa, wb, i, left = d, span, s, end, x;

	if (!d)
		return;
	if (from >= to)
		from = to - 1;
	wa = rm_win(e, from);
	wb = rm_win(e, to - 1);
	if (wb - wa >= RM_MAX_SPLIT) {
		wa = wb - RM_MAX_SPLIT + 1;
		from = rm_win_start(e, wa);
	}
	span = to - from;
	for (i = 0; i < RM_MAX_SPLIT; i++) {
		__u64 w = wa + i;

		if (w >= wb)
			break;
		s = i == 0 ? from : rm_win_start(e, w);
		end = rm_win_start(e, w + 1);
		/* d * (end - s) / span in 20-bit fixed point: no overflow below 2^44 ns */
		x = (d * (((end - s) << 20) / span)) >> 20;
		if (x > left)
			x = left;
		rm_charge_cpu(e, t, w, end - 1, x);
		left -= x;
	}
	rm_charge_cpu(e, t, wb, to, left);
}

/*
 * CPU counters: a dispatcher's work. A thread of a serving process that
 * holds no request (no segment, not in a request's tail, never read one: a
 * listener in its poll loop) wakes thread t of its process through a futex
 * or a write: it handed a ready connection to t, which will read the
 * request there. The waker's CPU since its last edge or wake-up (d ns,
 * used in [from, now), claimed from its counters) is that request's: it
 * is carried in t (rm_task.carry_ns, summed over several wake-ups) until
 * t's next edge, where rm_ctr_carry_take charges it. At most RM_CARRY_MAX
 * is carried; the rest is unsegmented now. Returns that rest (ns).
 */
RM_INLINE __u64 rm_ctr_carry(struct rm_env *e, struct rm_task *t, __u64 from, __u64 now, __u64 d)
{
	__u64 have = *(volatile __u64 *)&t->carry_ns, keep = have < RM_CARRY_MAX ? RM_CARRY_MAX - have : 0;

	if (keep > d)
		keep = d;
	if (keep)
		RM_ADD(&t->carry_ns, keep);
	rm_ctr_spread(e, 0, from, now, d - keep);
	return d - keep;
}

/*
 * CPU counters: t reached an edge at now; what it carries (rm_ctr_carry)
 * goes to the segment a recv on a server-side socket just began (req: the
 * edge is such a recv, after rm_on_recv), else unsegmented (a send, a
 * recv of a reply, disk I/O, its exit, a window's sweep): each carried ns
 * lands once, in now's window.
 */
RM_INLINE void rm_ctr_carry_take(struct rm_env *e, struct rm_task *t, __u64 now, int req)
{
	__u64 c = RM_TAKE(&t->carry_ns);

	if (!c)
		return;
	if (req && t->mode == RM_MODE_SEG && (t->chain_st & RM_CHAIN_REQ))
		rm_charge_cpu(e, t, rm_win(e, now), now, c);
	else
		rm_charge_cpu(e, 0, rm_win(e, now), now, c);
}

/*
 * CPU counters with follow-replies: t is about to be charged CPU used from
 * time `at` on; a serving thread that holds no request (after a reply) has
 * it go to a continuation chain, as rm_account_cpu does on the slice path.
 */
RM_INLINE void rm_ctr_cont(struct rm_env *e, struct rm_task *t, __u64 at, __u64 d)
{
	if (d && t->mode == RM_MODE_ASSOC && e->follow_replies && (t->chain_st & RM_CHAIN_SERVER))
		rm_cont_begin(e, t, at);
}

/*
 * CPU counters: thread t first waited (voluntarily left the CPU) at about
 * time at, since its last edge. What the slice path does when a thread
 * blocks (rm_on_switch): the request's tail ends; with follow-replies a
 * chain's first block anchors it to the request answered or folds it
 * (rm_cont_block), and a segment of a serving thread ends (rm_seg_wait).
 * The counters do not tell a wait for disk I/O from one for an event:
 * every wait counts as a wait for an event. A serving thread that waits
 * holding no request and no chain begins its next chain after a wait
 * (RM_CHAIN_SLEPT): that chain is no reply's tail, and its first block
 * must not fold it. (The slice path charges the CPU between a reply and
 * the wait, which begins the chain before it; here the counter may have
 * shown none at an edge in between, and a thread woken by a hand-off and
 * preempted in its job has the job's CPU before the preemption counted
 * before its next wait.)
 */
RM_INLINE void rm_ctr_block(struct rm_env *e, struct rm_task *t, __u64 at)
{
	if (t->mode == RM_MODE_ASSOC && e->follow_replies && (t->chain_st & RM_CHAIN_SERVER))
		t->chain_st |= RM_CHAIN_SLEPT;
	rm_cont_block(e, t, at);
	rm_seg_wait(e, t, at);
	t->tail = 0;
}

/*
 * After several waits, is all of the CPU before the thread last got the
 * CPU charged as t is charged now, whichever wait it came after? A segment
 * keeps its CPU across waits (with follow-replies a serving thread's
 * segment ends at its first wait, and what follows goes to a chain that its
 * reply anchors, most often to the same request; but at a recv that chain
 * would have been folded, the thread was a reader back in its loop: the
 * share after the first wait is not known and none of it is kept); a chain that outlived a
 * wait keeps the CPU after its later waits (RM_CHAIN_SLEPT), unless it was
 * anchored from its start (RM_CHAIN_DONE, which ends at its first wait);
 * so does the chain a serving thread that holds no request begins after a
 * wait, and a chain anchored to a peer's request (RM_CHAIN_PEER: all of the
 * thread's CPU up to its next socket edge is that request's).
 */
RM_INLINE int rm_ctr_keeps(const struct rm_env *e, const struct rm_task *t, int recv)
{
	return (t->mode == RM_MODE_SEG && !(recv && e->follow_replies && (t->chain_st & RM_CHAIN_SERVER))) ||
	       (t->mode == RM_MODE_CONT && (t->chain_st & (RM_CHAIN_SLEPT | RM_CHAIN_DONE)) == RM_CHAIN_SLEPT) ||
	       (t->mode == RM_MODE_CONT && (t->chain_st & RM_CHAIN_PEER)) ||
	       (t->mode == RM_MODE_ASSOC && e->follow_replies &&
		(t->chain_st & (RM_CHAIN_SERVER | RM_CHAIN_SLEPT)) == (RM_CHAIN_SERVER | RM_CHAIN_SLEPT));
}

/*
 * Thread t reached an edge at time now (or a sweep found it not running:
 * head 0; or a hand-off woke it: head 0); its last edge was at `from`. d:
 * what its on-CPU counter grew by in between, the last `head` ns of it
 * since it last got the CPU (so used in [now - head, now]: it has run
 * since); waits: its voluntary context switches in between; rd: its
 * run-queue wait in between. Charged as the context-switch hooks charge
 * them:
 * - no wait: all of d as t is charged now (its part, or unsegmented);
 * - after waits: the CPU before t last got the CPU (d - head) goes as t was
 *   charged before its first wait if it waited once, or if it keeps its CPU
 *   across waits (rm_ctr_keeps), and unsegmented otherwise (the share
 *   before the first wait is not known); then the thread's first wait
 *   takes effect (rm_ctr_block: the tail ends, a chain is anchored or
 *   folded, a serving thread's segment ends). The head: returned for a recv
 *   by a thread holding no segment (the request's head, which the caller
 *   charges to the segment the recv begins, after rm_on_recv), else charged
 *   as t is now.
 * With follow-replies, CPU charged to a serving thread that holds no
 * request begins a continuation chain (rm_ctr_cont).
 * Without a wait the head is spread over [now - head, now] (the thread ran
 * all that time) and the rest over the time before it (rm_ctr_spread);
 * after a wait the CPU before it is placed right after `from` (d - head ns
 * from then on: what a thread runs after an edge and before it waits
 * mostly follows the edge at once) and the head is charged to now's window. Run-queue wait goes to a part in a segment or
 * continuation. Returns the head ns to charge, or 0.
 */
RM_INLINE __u64 rm_ctr_edge(struct rm_env *e, struct rm_task *t, __u64 from, __u64 now, __u64 d, __u64 head,
			    __u32 waits, __u64 rd, int recv)
{
	__u64 mid;

	if (!recv)
		rm_ctr_carry_take(e, t, now, 0); /* the recv's caller takes it after rm_on_recv */
	if (head > d)
		head = d;
	mid = now - head > from ? now - head : from;
	if (t->mode == RM_MODE_SEG && !t->chain)
		t->chain_st &= ~(__u32)RM_CHAIN_SLEPT; /* not since its recv: a chain begun after it has not slept */
	if (!waits) {
		rm_ctr_cont(e, t, from, d);
		rm_ctr_spread(e, t, from, mid, d - head);
		rm_ctr_spread(e, t, mid, now, head);
		head = 0;
	} else {
		/* the CPU before the first wait ran right after the last edge:
		 * a thread in a reply's tail runs it and waits (the wait decides
		 * where it goes, in the window it ran in, as at a switch), not
		 * spread over its sleep */
		__u64 blk = mid - from > d - head ? from + (d - head) : mid;

		if (waits == 1 || rm_ctr_keeps(e, t, recv)) {
			rm_ctr_cont(e, t, from, d - head);
			rm_ctr_spread(e, t, from, blk, d - head);
		} else {
			e->rt = t->rt; /* unsegmented, but a runtime's counted apart */
			rm_ctr_spread(e, 0, from, blk, d - head);
			e->rt = 0;
		}
		rm_ctr_block(e, t, blk);
		if (!recv || (t->mode != RM_MODE_ASSOC && t->mode != RM_MODE_NONE)) {
			rm_ctr_cont(e, t, mid, head);
			rm_charge_cpu(e, t, rm_win(e, now), now, head);
			head = 0;
		}
	}
	if (rd && (t->mode == RM_MODE_SEG || t->mode == RM_MODE_CONT)) {
		rm_task_win(e, t, rm_win(e, now));
		RM_ADD(&t->cur.runq_ns, rd);
		t->dirty = 1;
	}
	return head;
}

#endif
