/*
 * segmenter_test.c - unit tests of the segmenter (segmenter.h) on recorded
 * event streams, run through the replay backend (col_replay.h), which is the
 * same code the BPF program runs, in a user-space environment.
 *
 * Every case replays a small stream (inline, or a file in testdata/ whose
 * comments carry the same hand computation), asserts the exact numbers
 * computed by hand in the comment beside it, and asserts the identity of
 * every window: sum(part cpu_ns) + unseg_cpu_ns + lost_ns == busy_ns, and
 * part bytes + unsegmented bytes == total bytes for rx, tx, disk read and
 * disk write (col_replay_capture_check).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "col_replay.h"
#include "rm_err.h"
#include "rm_test.h"
#include "banned.h"

#ifndef COL_TESTDATA
#error "COL_TESTDATA must name the testdata directory"
#endif

#define SEG(cpu, n) ((((uint64_t)(cpu) + 1) << 48) | (uint64_t)(n))

static struct col_replay_capture cap;
static struct col_replay_stats st;

/* Checks the identity of every window of the last replay. */
static void assert_identity(void)
{
	char err[512];
	int rv = col_replay_capture_check(&cap, NULL, err, sizeof(err));

	if (rv != RM_OK)
		fprintf(stderr, "\nidentity: %s\n", err);
	CU_ASSERT_EQUAL(rv, RM_OK);
}

static int follow_replies; /* the next replay runs with the follow-replies option */

/* Replays stream (inline when path is NULL) into cap; RM_OK asserted, identity asserted. */
static void replay_opt(const char *stream, const char *file, unsigned fail_every, int identity)
{
	struct col_replay_opts o;
	struct col_sink sink;
	char err[512], path[512];
	int rv;

	col_replay_capture_release(&cap);
	sink = col_replay_capture_sink(&cap);
	memset(&o, 0, sizeof(o));
	memset(&st, 0, sizeof(st));
	o.fail_every = fail_every;
	o.err = err;
	o.errlen = sizeof(err);
	o.stats = &st;
	o.follow_replies = follow_replies;
	follow_replies = 0;
	if (file) {
		snprintf(path, sizeof(path), "%s/%s", COL_TESTDATA, file);
		rv = col_replay_file(path, &sink, &o);
	} else {
		rv = col_replay_buf(stream, strlen(stream), "inline", &sink, &o);
	}
	if (rv != RM_OK)
		fprintf(stderr, "\nreplay: %s\n", err);
	CU_ASSERT_EQUAL_FATAL(rv, RM_OK);
	CU_ASSERT_EQUAL(st.parts, cap.nparts);
	CU_ASSERT_EQUAL(st.windows, cap.nwins);
	if (identity) {
		assert_identity();
		CU_ASSERT_EQUAL(st.late.dropped_parts, 0);
	}
}

static void replay(const char *stream)
{
	replay_opt(stream, NULL, 0, 1);
}

static void replay_file(const char *file)
{
	replay_opt(NULL, file, 0, 1);
}

static const struct rm_part *part(size_t i)
{
	CU_ASSERT_FATAL(i < cap.nparts);
	return &cap.parts[i];
}

static const struct rm_totals *window(uint64_t w)
{
	const struct rm_totals *cw = col_replay_capture_window(&cap, w);

	CU_ASSERT_FATAL(cw != NULL);
	return cw;
}

static const struct rm_totals *win(uint64_t w)
{
	return window(w);
}

static int ipv4_is(const __u32 *addr, unsigned a, unsigned b, unsigned c, unsigned d)
{
	const unsigned char *p = (const unsigned char *)addr;

	return p[0] == a && p[1] == b && p[2] == c && p[3] == d && !addr[1] && !addr[2] && !addr[3];
}

/* ---- cases ---- */

/* testdata/simple.events: see the computation there. */
static void test_simple(void)
{
	const struct rm_part *p;
	const struct rm_totals *w;

	replay_file("simple.events");
	CU_ASSERT_EQUAL(cap.nparts, 2);
	CU_ASSERT_EQUAL(cap.nwins, 1);
	p = part(0);
	CU_ASSERT_EQUAL(p->seg_id, SEG(0, 1));
	CU_ASSERT_EQUAL(p->win, 0);
	CU_ASSERT_EQUAL(p->pid, 100);
	CU_ASSERT_EQUAL(p->tid, 101);
	CU_ASSERT_STRING_EQUAL((const char *)p->comm, "srv");
	CU_ASSERT_EQUAL(p->start_ns, 2000);
	CU_ASSERT_EQUAL(p->end_ns, 5000);
	CU_ASSERT_EQUAL(p->cpu_ns, 3000);
	CU_ASSERT_EQUAL(p->runq_ns, 0);
	CU_ASSERT_EQUAL(p->rx_bytes, 64);
	CU_ASSERT_EQUAL(p->tx_bytes, 512);
	CU_ASSERT_EQUAL(p->disk_read + p->disk_write, 0);
	CU_ASSERT_EQUAL(p->flags, RM_PF_START | RM_PF_END | RM_PF_IN_SEQ | RM_PF_OUT_SEQ);
	CU_ASSERT_EQUAL(p->in.cookie, 7);
	CU_ASSERT_EQUAL(p->in.family, RM_AF_INET);
	CU_ASSERT_EQUAL(p->in.lport, 7000);
	CU_ASSERT_EQUAL(p->in.rport, 40001);
	CU_ASSERT(ipv4_is(p->in.laddr, 127, 0, 0, 1));
	CU_ASSERT(ipv4_is(p->in.raddr, 127, 0, 0, 2));
	CU_ASSERT_EQUAL(memcmp(&p->in, &p->out, sizeof(p->in)), 0);
	CU_ASSERT_EQUAL(p->in_seq_start, 1000);
	CU_ASSERT_EQUAL(p->in_seq_end, 1064);
	CU_ASSERT_EQUAL(p->out_seq_start, 5000);
	CU_ASSERT_EQUAL(p->out_seq_end, 5512);
	CU_ASSERT_EQUAL(p->parent_seg, 0);
	/* the request's tail: after the send until the thread waits */
	p = part(1);
	CU_ASSERT_EQUAL(p->seg_id, SEG(0, 1));
	CU_ASSERT_EQUAL(p->flags, RM_PF_ASSOC | RM_PF_IN_SEQ | RM_PF_OUT_SEQ);
	CU_ASSERT_EQUAL(p->cpu_ns, 1000);
	CU_ASSERT_EQUAL(p->start_ns, 5000);
	CU_ASSERT_EQUAL(p->end_ns, 6000);
	CU_ASSERT_EQUAL(p->in.cookie, 7);
	CU_ASSERT_EQUAL(p->in_seq_start, 1000);
	CU_ASSERT_EQUAL(p->in_seq_end, 1064);
	CU_ASSERT_EQUAL(p->rx_bytes + p->tx_bytes, 0);
	w = win(0);
	CU_ASSERT_EQUAL(w->busy_ns, 5000);
	CU_ASSERT_EQUAL(w->unseg_cpu_ns, 1000);
	CU_ASSERT_EQUAL(w->lost_ns, 0);
	CU_ASSERT_EQUAL(w->rx_bytes, 64);
	CU_ASSERT_EQUAL(w->unseg_rx, 0);
	CU_ASSERT_EQUAL(w->tx_bytes, 512);
	CU_ASSERT_EQUAL(w->unseg_tx, 0);
	CU_ASSERT_EQUAL(w->dropped_parts, 0);
	CU_ASSERT_EQUAL(window(0)->capacity_ns, 5000);
	CU_ASSERT_EQUAL(st.threads, 1);
	CU_ASSERT_EQUAL(st.events, 4);
}

/* testdata/preempt.events: descheduled time excluded, runq = runnable but waiting. */
static void test_preempt(void)
{
	const struct rm_part *p;
	const struct rm_totals *w;

	replay_file("preempt.events");
	CU_ASSERT_EQUAL(cap.nparts, 2);
	p = part(0);
	CU_ASSERT_EQUAL(p->cpu_ns, 500);
	CU_ASSERT_EQUAL(p->runq_ns, 500);
	CU_ASSERT_EQUAL(p->flags, RM_PF_START | RM_PF_END);
	CU_ASSERT_EQUAL(p->rx_bytes, 10);
	CU_ASSERT_EQUAL(p->tx_bytes, 20);
	CU_ASSERT_EQUAL(p->start_ns, 200);
	CU_ASSERT_EQUAL(p->end_ns, 1500);
	CU_ASSERT_EQUAL(part(1)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 100);
	CU_ASSERT_EQUAL(part(1)->runq_ns, 0);
	w = win(0);
	CU_ASSERT_EQUAL(w->busy_ns, 1100);
	CU_ASSERT_EQUAL(w->unseg_cpu_ns, 500);
	CU_ASSERT_EQUAL(w->lost_ns, 0);
	/* idle [1000,1400) is in capacity, not in busy */
	CU_ASSERT_EQUAL(window(0)->capacity_ns, 1500);
	CU_ASSERT_EQUAL(window(0)->capacity_ns - w->busy_ns, 400);
}

/*
 * window_ns = 1000:
 *   [500,600)   no state                 -> w0 unsegmented 100
 *   [600,1000)  segment                  -> w0 part cpu 400 (START, rx 10)
 *   [1000,1700) segment                  -> w1 part cpu 700 (END, tx 20)
 *   [1700,1800) the request's tail       -> w1 part cpu 100 (ASSOC)
 *   w0 busy 500, capacity 500 ([500,1000)); w1 busy 800, capacity 800
 */
static void test_window_boundary(void)
{
	replay("rametr-events 1 window_ns=1000 offset_ns=0 ncpu=1\n"
	       "500 0 switch prev=0 prev_state=S next=101\n"
	       "600 0 recv tid=101 pid=100 sock=7 bytes=10\n"
	       "1700 0 send tid=101 pid=100 sock=7 bytes=20\n"
	       "1800 0 switch prev=101 prev_state=S next=0\n");
	CU_ASSERT_EQUAL(cap.nparts, 3);
	CU_ASSERT_EQUAL(cap.nwins, 2);
	CU_ASSERT_EQUAL(part(0)->seg_id, SEG(0, 1));
	CU_ASSERT_EQUAL(part(1)->seg_id, SEG(0, 1));
	CU_ASSERT_EQUAL(part(0)->win, 0);
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 400);
	CU_ASSERT_EQUAL(part(0)->rx_bytes, 10);
	CU_ASSERT_EQUAL(part(0)->tx_bytes, 0);
	CU_ASSERT_EQUAL(part(0)->flags, RM_PF_START);
	CU_ASSERT_EQUAL(part(0)->end_ns, 1000);
	CU_ASSERT_EQUAL(part(1)->win, 1);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 700);
	CU_ASSERT_EQUAL(part(1)->rx_bytes, 0);
	CU_ASSERT_EQUAL(part(1)->tx_bytes, 20);
	CU_ASSERT_EQUAL(part(1)->flags, RM_PF_END);
	CU_ASSERT_EQUAL(part(1)->start_ns, 600);
	CU_ASSERT_EQUAL(part(1)->end_ns, 1700);
	CU_ASSERT_EQUAL(part(0)->cpu_ns + part(1)->cpu_ns, 1700 - 600);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 500);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 100);
	CU_ASSERT_EQUAL(win(0)->rx_bytes, 10);
	CU_ASSERT_EQUAL(part(2)->win, 1);
	CU_ASSERT_EQUAL(part(2)->seg_id, SEG(0, 1));
	CU_ASSERT_EQUAL(part(2)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(2)->cpu_ns, 100);
	CU_ASSERT_EQUAL(win(1)->busy_ns, 800);
	CU_ASSERT_EQUAL(win(1)->unseg_cpu_ns, 0);
	CU_ASSERT_EQUAL(win(1)->tx_bytes, 20);
	CU_ASSERT_EQUAL(window(0)->capacity_ns, 500);
	CU_ASSERT_EQUAL(window(1)->capacity_ns, 800);
}

/*
 * A slice of 5900 ns (windows 0..6 of 1000 ns) with no event inside: only
 * RM_MAX_SPLIT = 4 windows (3..6) are split exactly, the older time
 * [600,3000) is lost, booked in window 3:
 *   w0: [500,600) unsegmented 100; part START rx 10, cpu 0
 *   w1, w2: nothing (reported, capacity 1000 each)
 *   w3: busy 2400 + 1000, lost 2400, part cpu 1000
 *   w4, w5: part cpu 1000 each
 *   w6: part cpu 500 END tx 20; [6500,6600) the tail: ASSOC part cpu 100
 */
static const char *const split_stream = "rametr-events 1 window_ns=1000 offset_ns=0 ncpu=1\n"
					"500 0 switch prev=0 prev_state=S next=101\n"
					"600 0 recv tid=101 pid=100 sock=7 bytes=10\n"
					"6500 0 send tid=101 pid=100 sock=7 bytes=20\n"
					"6600 0 switch prev=101 prev_state=S next=0\n";

static void test_split_lost(void)
{
	static const uint64_t pwin[] = { 0, 3, 4, 5, 6 }, pcpu[] = { 0, 1000, 1000, 1000, 500 };
	size_t i;

	replay(split_stream);
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 6);
	for (i = 0; i < 5; i++) {
		CU_ASSERT_EQUAL(part(i)->win, pwin[i]);
		CU_ASSERT_EQUAL(part(i)->cpu_ns, pcpu[i]);
		CU_ASSERT_EQUAL(part(i)->seg_id, SEG(0, 1));
	}
	CU_ASSERT_EQUAL(part(0)->flags, RM_PF_START);
	CU_ASSERT_EQUAL(part(0)->rx_bytes, 10);
	CU_ASSERT_EQUAL(part(4)->flags, RM_PF_END);
	CU_ASSERT_EQUAL(part(4)->tx_bytes, 20);
	CU_ASSERT_EQUAL(part(5)->win, 6);
	CU_ASSERT_EQUAL(part(5)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(5)->cpu_ns, 100);
	CU_ASSERT_EQUAL(cap.nwins, 7);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 100);
	CU_ASSERT_EQUAL(win(1)->busy_ns, 0);
	CU_ASSERT_EQUAL(win(2)->busy_ns, 0);
	CU_ASSERT_EQUAL(window(1)->capacity_ns, 1000);
	CU_ASSERT_EQUAL(win(3)->busy_ns, 3400);
	CU_ASSERT_EQUAL(win(3)->lost_ns, 2400);
	CU_ASSERT_EQUAL(win(4)->busy_ns, 1000);
	CU_ASSERT_EQUAL(win(5)->busy_ns, 1000);
	CU_ASSERT_EQUAL(win(6)->busy_ns, 600);
	CU_ASSERT_EQUAL(win(6)->unseg_cpu_ns, 0);
	CU_ASSERT_EQUAL(win(3)->lost_ns + 1000 * 3 + 500, 6500 - 600);
}

/*
 * Partial reads, then a gap:
 *   seg 1: recv [1000,1100) + recv [1100,1150) contiguous -> in_seq [1000,1150), rx 150,
 *          cpu [200,400) = 200, out_seq [9000,9010)
 *   seg 2: recv [1200,1300), recv at 1400 leaves a gap -> SEQ_SUSPECT, in_seq stays
 *          [1200,1300), rx 200, cpu [500,700) = 200
 *   tails (ASSOC): seg 1 [400,500) = 100 (ended by the next recv), seg 2
 *          [700,800) = 100 (ended by the wait)
 *   unsegmented: [100,200) = 100; busy 700
 */
static void test_partial_reads(void)
{
	const char *io = " tid=101 pid=100 sock=7 fam=4 laddr=10.0.0.1:80 raddr=10.0.0.2:999";
	char s[2048];

	snprintf(s, sizeof(s),
		 "rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
		 "100 0 switch prev=0 prev_state=S next=101\n"
		 "200 0 recv%s bytes=100 seq=1000\n"
		 "300 0 recv%s bytes=50 seq=1100\n"
		 "400 0 send%s bytes=10 seq=9000\n"
		 "500 0 recv%s bytes=100 seq=1200\n"
		 "600 0 recv%s bytes=100 seq=1400\n"
		 "700 0 send%s bytes=10 seq=9010\n"
		 "800 0 switch prev=101 prev_state=S next=0\n",
		 io, io, io, io, io, io);
	replay(s);
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 4);
	CU_ASSERT_EQUAL(part(1)->seg_id, SEG(0, 1));
	CU_ASSERT_EQUAL(part(1)->flags, RM_PF_ASSOC | RM_PF_IN_SEQ | RM_PF_OUT_SEQ);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 100);
	CU_ASSERT_EQUAL(part(3)->seg_id, SEG(0, 2));
	CU_ASSERT_EQUAL(part(3)->flags, RM_PF_ASSOC | RM_PF_IN_SEQ | RM_PF_OUT_SEQ | RM_PF_SEQ_SUSPECT);
	CU_ASSERT_EQUAL(part(3)->cpu_ns, 100);
	CU_ASSERT_EQUAL(part(0)->seg_id, SEG(0, 1));
	CU_ASSERT_EQUAL(part(0)->flags, RM_PF_START | RM_PF_END | RM_PF_IN_SEQ | RM_PF_OUT_SEQ);
	CU_ASSERT_EQUAL(part(0)->rx_bytes, 150);
	CU_ASSERT_EQUAL(part(0)->in_seq_start, 1000);
	CU_ASSERT_EQUAL(part(0)->in_seq_end, 1150);
	CU_ASSERT_EQUAL(part(0)->out_seq_start, 9000);
	CU_ASSERT_EQUAL(part(0)->out_seq_end, 9010);
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 200);
	CU_ASSERT_EQUAL(part(2)->seg_id, SEG(0, 2));
	CU_ASSERT_EQUAL(part(2)->flags,
			RM_PF_START | RM_PF_END | RM_PF_IN_SEQ | RM_PF_OUT_SEQ | RM_PF_SEQ_SUSPECT);
	CU_ASSERT_EQUAL(part(2)->rx_bytes, 200);
	CU_ASSERT_EQUAL(part(2)->in_seq_start, 1200);
	CU_ASSERT_EQUAL(part(2)->in_seq_end, 1300);
	CU_ASSERT_EQUAL(part(2)->out_seq_start, 9010);
	CU_ASSERT_EQUAL(part(2)->out_seq_end, 9020);
	CU_ASSERT_EQUAL(part(2)->cpu_ns, 200);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 700);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 100);
	CU_ASSERT_EQUAL(win(0)->rx_bytes, 350);
	CU_ASSERT_EQUAL(win(0)->tx_bytes, 20);
}

/*
 * TCP sequence numbers are 32-bit (rametr.bpf.c passes (__u32) values):
 * byte ranges that continue across 2^32 are contiguous.
 *   recv [2^32-256, 2^32) then recv at seq 0: one range [2^32-256, 2^32+100), not suspect
 *   send [2^32-100, 2^32+100) ends the segment; sends at seq 100 and 200
 *   continue it: one ASSOC part, out_seq [2^32+100, 2^32+250), tx 150
 */
static void test_seq_wrap(void)
{
	const uint64_t T = 1ULL << 32;

	replay("rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
	       "100 0 switch prev=0 prev_state=S next=101\n"
	       "200 0 recv tid=101 pid=100 sock=7 bytes=256 seq=4294967040\n"
	       "300 0 recv tid=101 pid=100 sock=7 bytes=100 seq=0\n"
	       "400 0 send tid=101 pid=100 sock=7 bytes=200 seq=4294967196\n"
	       "500 0 send tid=101 pid=100 sock=7 bytes=100 seq=100\n"
	       "600 0 send tid=101 pid=100 sock=7 bytes=50 seq=200\n"
	       "700 0 switch prev=101 prev_state=S next=0\n");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 2);
	CU_ASSERT_EQUAL(part(0)->flags, RM_PF_START | RM_PF_END | RM_PF_IN_SEQ | RM_PF_OUT_SEQ);
	CU_ASSERT_EQUAL(part(0)->in_seq_start, T - 256);
	CU_ASSERT_EQUAL(part(0)->in_seq_end, T + 100);
	CU_ASSERT_EQUAL(part(0)->in_seq_end - part(0)->in_seq_start, part(0)->rx_bytes);
	CU_ASSERT_EQUAL(part(0)->out_seq_start, T - 100);
	CU_ASSERT_EQUAL(part(0)->out_seq_end, T + 100);
	CU_ASSERT_EQUAL(part(1)->flags, RM_PF_ASSOC | RM_PF_IN_SEQ | RM_PF_OUT_SEQ);
	CU_ASSERT_EQUAL(part(1)->tx_bytes, 150);
	CU_ASSERT_EQUAL(part(1)->out_seq_start, T + 100);
	CU_ASSERT_EQUAL(part(1)->out_seq_end, T + 250);
	CU_ASSERT_EQUAL(part(1)->seg_id, part(0)->seg_id);
}

/*
 * A request on another socket before the send closes the first segment:
 *   seg 1: recv sock 7 at 200, cpu [200,500) = 300, rx 10, START|RECV, no out tuple
 *   seg 2: recv sock 8 at 500, cpu [500,900) = 400, rx 20, tx 30, START|END, out sock 8
 *   seg 2's tail [900,1000) = 100, an ASSOC part
 *   unsegmented [100,200) = 100; busy 900
 */
static void test_recv_other_socket(void)
{
	replay("rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
	       "100 0 switch prev=0 prev_state=S next=101\n"
	       "200 0 recv tid=101 pid=100 sock=7 bytes=10\n"
	       "500 0 recv tid=101 pid=100 sock=8 bytes=20\n"
	       "900 0 send tid=101 pid=100 sock=8 bytes=30\n"
	       "1000 0 switch prev=101 prev_state=S next=0\n");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 3);
	CU_ASSERT_EQUAL(part(2)->seg_id, SEG(0, 2));
	CU_ASSERT_EQUAL(part(2)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(2)->cpu_ns, 100);
	CU_ASSERT_EQUAL(part(0)->seg_id, SEG(0, 1));
	CU_ASSERT_EQUAL(part(0)->flags, RM_PF_START | RM_PF_RECV);
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 300);
	CU_ASSERT_EQUAL(part(0)->rx_bytes, 10);
	CU_ASSERT_EQUAL(part(0)->tx_bytes, 0);
	CU_ASSERT_EQUAL(part(0)->in.cookie, 7);
	CU_ASSERT_EQUAL(part(0)->out.cookie, 0);
	CU_ASSERT_EQUAL(part(0)->end_ns, 500);
	CU_ASSERT_EQUAL(part(1)->seg_id, SEG(0, 2));
	CU_ASSERT_EQUAL(part(1)->flags, RM_PF_START | RM_PF_END);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 400);
	CU_ASSERT_EQUAL(part(1)->rx_bytes, 20);
	CU_ASSERT_EQUAL(part(1)->tx_bytes, 30);
	CU_ASSERT_EQUAL(part(1)->in.cookie, 8);
	CU_ASSERT_EQUAL(part(1)->out.cookie, 8);
	CU_ASSERT_EQUAL(part(1)->start_ns, 500);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 900);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 100);
}

/*
 * Send after send on the same socket, byte ranges following each other:
 *   END part: cpu [200,500) = 300, tx 30, out_seq [1000,1030)
 *   ASSOC part (emitted by the final sweep): tx 40 + 50, the tail's CPU
 *   [500,1000) = 500, out_seq [1030,1120), start_ns 500 (the send), end_ns
 *   1000 (the wait)
 *   unsegmented [100,200) = 100; busy 900; tx 120
 */
static void test_send_after_send(void)
{
	replay("rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
	       "100 0 switch prev=0 prev_state=S next=101\n"
	       "200 0 recv tid=101 pid=100 sock=7 bytes=10 seq=100\n"
	       "500 0 send tid=101 pid=100 sock=7 bytes=30 seq=1000\n"
	       "800 0 send tid=101 pid=100 sock=7 bytes=40 seq=1030\n"
	       "900 0 send tid=101 pid=100 sock=7 bytes=50 seq=1070\n"
	       "1000 0 switch prev=101 prev_state=S next=0\n");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 2);
	CU_ASSERT_EQUAL(part(0)->flags, RM_PF_START | RM_PF_END | RM_PF_IN_SEQ | RM_PF_OUT_SEQ);
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 300);
	CU_ASSERT_EQUAL(part(0)->tx_bytes, 30);
	CU_ASSERT_EQUAL(part(1)->seg_id, part(0)->seg_id);
	CU_ASSERT_EQUAL(part(1)->flags, RM_PF_ASSOC | RM_PF_IN_SEQ | RM_PF_OUT_SEQ);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 500);
	CU_ASSERT_EQUAL(part(1)->rx_bytes, 0);
	CU_ASSERT_EQUAL(part(1)->tx_bytes, 90);
	CU_ASSERT_EQUAL(part(1)->out_seq_start, 1030);
	CU_ASSERT_EQUAL(part(1)->out_seq_end, 1120);
	CU_ASSERT_EQUAL(part(1)->out.cookie, 7);
	CU_ASSERT_EQUAL(part(1)->in.cookie, 7);
	CU_ASSERT_EQUAL(part(1)->start_ns, 500);
	CU_ASSERT_EQUAL(part(1)->end_ns, 1000);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 900);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 100);
	CU_ASSERT_EQUAL(win(0)->tx_bytes, 120);
	CU_ASSERT_EQUAL(win(0)->unseg_tx, 0);
}

/*
 * While associated, a send to another socket starts a new ASSOC part
 * once the current one has sent something:
 *   END part (out 7): cpu 300, tx 30
 *   ASSOC part: the tail [500,800) had sent nothing, so it goes on with
 *   out 9 (unix, no seq): tx 40, cpu [500,900) = 400, start_ns 500
 *   ASSOC part (out 7 again: another socket than 9): tx 50, cpu 100,
 *   start_ns 900
 *   all three carry seg 1 and in = socket 7; unsegmented [100,200) = 100
 */
static void test_assoc_other_socket(void)
{
	replay("rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
	       "100 0 switch prev=0 prev_state=S next=101\n"
	       "200 0 recv tid=101 pid=100 sock=7 fam=4 laddr=10.0.0.1:80 raddr=10.0.0.2:999 bytes=10\n"
	       "500 0 send tid=101 pid=100 sock=7 fam=4 laddr=10.0.0.1:80 raddr=10.0.0.2:999 bytes=30\n"
	       "800 0 send tid=101 pid=100 sock=9 fam=unix bytes=40\n"
	       "900 0 send tid=101 pid=100 sock=7 fam=4 laddr=10.0.0.1:80 raddr=10.0.0.2:999 bytes=50\n"
	       "1000 0 switch prev=101 prev_state=S next=0\n");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 3);
	CU_ASSERT_EQUAL(part(0)->flags, RM_PF_START | RM_PF_END);
	CU_ASSERT_EQUAL(part(0)->tx_bytes, 30);
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 300);
	CU_ASSERT_EQUAL(part(1)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(1)->out.cookie, 9);
	CU_ASSERT_EQUAL(part(1)->out.family, RM_AF_UNIX);
	CU_ASSERT_EQUAL(part(1)->tx_bytes, 40);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 400);
	CU_ASSERT_EQUAL(part(1)->start_ns, 500);
	CU_ASSERT_EQUAL(part(2)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(2)->out.cookie, 7);
	CU_ASSERT_EQUAL(part(2)->out.family, RM_AF_INET);
	CU_ASSERT_EQUAL(part(2)->tx_bytes, 50);
	CU_ASSERT_EQUAL(part(2)->cpu_ns, 100);
	CU_ASSERT_EQUAL(part(2)->start_ns, 900);
	CU_ASSERT_EQUAL(part(1)->seg_id, SEG(0, 1));
	CU_ASSERT_EQUAL(part(2)->seg_id, SEG(0, 1));
	CU_ASSERT_EQUAL(part(2)->in.cookie, 7);
	CU_ASSERT_EQUAL(win(0)->tx_bytes, 120);
	CU_ASSERT_EQUAL(win(0)->unseg_tx, 0);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 100);
}

/* testdata/fork.events: the child inherits the segment as its own. */
static void test_fork_inside(void)
{
	const struct rm_part *parent, *child;

	replay_file("fork.events");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 3);
	/* the parent's tail [600,1000), emitted by the final sweep */
	CU_ASSERT_EQUAL(part(2)->seg_id, SEG(0, 1));
	CU_ASSERT_EQUAL(part(2)->tid, 101);
	CU_ASSERT_EQUAL(part(2)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(2)->cpu_ns, 400);
	parent = part(0);
	child = part(1);
	CU_ASSERT_EQUAL(parent->seg_id, SEG(0, 1));
	CU_ASSERT_EQUAL(parent->flags, RM_PF_START | RM_PF_END);
	CU_ASSERT_EQUAL(parent->cpu_ns, 400);
	CU_ASSERT_EQUAL(parent->rx_bytes, 10);
	CU_ASSERT_EQUAL(parent->tx_bytes, 20);
	CU_ASSERT_EQUAL(child->seg_id, SEG(0, 2));
	CU_ASSERT_EQUAL(child->parent_seg, parent->seg_id);
	CU_ASSERT_EQUAL(child->flags, RM_PF_START | RM_PF_INHERIT | RM_PF_EXIT);
	CU_ASSERT_EQUAL(child->pid, 100);
	CU_ASSERT_EQUAL(child->tid, 102);
	CU_ASSERT_STRING_EQUAL((const char *)child->comm, "master");
	CU_ASSERT_EQUAL(child->in.cookie, 7);
	CU_ASSERT_EQUAL(child->start_ns, 200);
	CU_ASSERT_EQUAL(child->end_ns, 900);
	CU_ASSERT_EQUAL(child->cpu_ns, 500);
	CU_ASSERT_EQUAL(child->runq_ns, 50);
	CU_ASSERT_EQUAL(child->rx_bytes + child->tx_bytes, 0);
	CU_ASSERT_EQUAL(child->disk_write, 4096);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 1450);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 150);
	CU_ASSERT_EQUAL(win(0)->disk_write, 4096);
	CU_ASSERT_EQUAL(win(0)->unseg_disk_write, 0);
	CU_ASSERT_EQUAL(window(0)->capacity_ns, 2 * 900);
	CU_ASSERT_EQUAL(st.threads, 2);
}

/*
 * Fork outside a segment: 102 (parent 101 without state) and 103 (parent
 * associated, not in a segment) get no state; all they do is unsegmented.
 *   [100,300) 101 no state 200; [300,400) seg 100; [400,600) its tail 200
 *   (a fork is not a hand-off); [600,900) 102 300 (its disk read 512 and
 *   send 5 unsegmented); [900,1100) 103 200 -> busy 1000, unsegmented 700
 */
static void test_fork_outside(void)
{
	replay("rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
	       "100 0 switch prev=0 prev_state=S next=101\n"
	       "200 0 fork ptid=101 ppid=100 ctid=102 cpid=102\n"
	       "300 0 recv tid=101 pid=100 sock=7 bytes=10\n"
	       "400 0 send tid=101 pid=100 sock=7 bytes=10\n"
	       "500 0 fork ptid=101 ppid=100 ctid=103 cpid=103\n"
	       "600 0 switch prev=101 prev_state=S next=102\n"
	       "700 0 disk tid=102 op=R bytes=512\n"
	       "800 0 send tid=102 pid=102 sock=9 bytes=5\n"
	       "900 0 switch prev=102 prev_state=S next=103\n"
	       "1000 0 exit tid=103 pid=103\n"
	       "1100 0 switch prev=103 prev_state=X next=0\n");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 2);
	CU_ASSERT_EQUAL(part(0)->tid, 101);
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 100);
	CU_ASSERT_EQUAL(part(1)->tid, 101);
	CU_ASSERT_EQUAL(part(1)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 200);
	CU_ASSERT_EQUAL(st.threads, 1);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 1000);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 700);
	CU_ASSERT_EQUAL(win(0)->disk_read, 512);
	CU_ASSERT_EQUAL(win(0)->unseg_disk_read, 512);
	CU_ASSERT_EQUAL(win(0)->tx_bytes, 15);
	CU_ASSERT_EQUAL(win(0)->unseg_tx, 5);
}

/*
 * Exit mid-segment: the part ends at the exit with EXIT (no END); the
 * thread's state is freed, so its last 100 ns are unsegmented.
 *   [100,200) 100 unseg; [200,700) part 500; [700,800) 100 unseg; busy 700
 * Then exit in the tail of a request: an ASSOC|EXIT part with the tail's
 * CPU [950,990) = 40.
 */
static void test_exit_mid_segment(void)
{
	replay("rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
	       "100 0 switch prev=0 prev_state=S next=101\n"
	       "200 0 recv tid=101 pid=100 sock=7 bytes=10\n"
	       "700 0 exit tid=101 pid=100\n"
	       "800 0 switch prev=101 prev_state=X next=102\n"
	       "900 0 recv tid=102 pid=100 sock=8 bytes=10\n"
	       "950 0 send tid=102 pid=100 sock=8 bytes=10\n"
	       "990 0 exit tid=102 pid=100\n"
	       "1000 0 switch prev=102 prev_state=X next=0\n");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 3);
	CU_ASSERT_EQUAL(part(0)->tid, 101);
	CU_ASSERT_EQUAL(part(0)->flags, RM_PF_START | RM_PF_EXIT);
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 500);
	CU_ASSERT_EQUAL(part(0)->end_ns, 700);
	CU_ASSERT_EQUAL(part(0)->tx_bytes, 0);
	CU_ASSERT_EQUAL(part(1)->tid, 102);
	CU_ASSERT_EQUAL(part(1)->flags, RM_PF_START | RM_PF_END);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 50);
	CU_ASSERT_EQUAL(part(2)->tid, 102);
	CU_ASSERT_EQUAL(part(2)->flags, RM_PF_ASSOC | RM_PF_EXIT);
	CU_ASSERT_EQUAL(part(2)->cpu_ns, 40);
	CU_ASSERT_EQUAL(part(2)->tx_bytes + part(2)->rx_bytes, 0);
	CU_ASSERT_EQUAL(part(2)->end_ns, 990);
	/* 100 + 500 + 100 + 100 (102 before its recv) + 50 + 40 + 10 */
	CU_ASSERT_EQUAL(win(0)->busy_ns, 900);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 310);
}

/* testdata/disk.events: one part per (segment, window), whatever the disk I/O. */
static void test_disk(void)
{
	replay_file("disk.events");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 3);
	CU_ASSERT_EQUAL(part(0)->win, 0);
	CU_ASSERT_EQUAL(part(0)->flags, RM_PF_START);
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 800);
	CU_ASSERT_EQUAL(part(0)->rx_bytes, 10);
	CU_ASSERT_EQUAL(part(0)->disk_read, 4096);
	CU_ASSERT_EQUAL(part(0)->disk_write, 0);
	CU_ASSERT_EQUAL(part(1)->win, 1);
	CU_ASSERT_EQUAL(part(1)->flags, RM_PF_END);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 500);
	CU_ASSERT_EQUAL(part(1)->tx_bytes, 20);
	CU_ASSERT_EQUAL(part(1)->disk_write, 8192);
	CU_ASSERT_EQUAL(part(1)->disk_read, 0);
	CU_ASSERT_EQUAL(part(2)->win, 1);
	CU_ASSERT_EQUAL(part(2)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(2)->cpu_ns, 200);
	CU_ASSERT_EQUAL(part(2)->disk_write, 1000);
	CU_ASSERT_EQUAL(part(2)->seg_id, part(0)->seg_id);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 900);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 100);
	CU_ASSERT_EQUAL(win(0)->disk_read, 4196);
	CU_ASSERT_EQUAL(win(0)->unseg_disk_read, 100);
	CU_ASSERT_EQUAL(win(1)->busy_ns, 700);
	CU_ASSERT_EQUAL(win(1)->unseg_cpu_ns, 0);
	CU_ASSERT_EQUAL(win(1)->disk_write, 9192);
	CU_ASSERT_EQUAL(win(1)->unseg_disk_write, 0);
}

/*
 * Idle time is never busy. window_ns = 1000, two CPUs:
 *   cpu 0: 101 (no state) [100,300) and [900,1200); idle [300,900)
 *   cpu 1: idle from 50 to 1500
 *   w0: busy 200 + 100 = 300, capacity 2 * (1000 - 50) = 1900
 *   w1: busy 200, capacity 2 * (1500 - 1000) = 1000
 */
static void test_idle(void)
{
	replay("rametr-events 1 window_ns=1000 offset_ns=0 ncpu=2\n"
	       "50 1 switch prev=102 prev_state=S next=0\n"
	       "100 0 switch prev=0 prev_state=S next=101\n"
	       "300 0 switch prev=101 prev_state=S next=0\n"
	       "900 0 switch prev=0 prev_state=S next=101\n"
	       "1200 0 switch prev=101 prev_state=S next=0\n"
	       "1500 1 switch prev=0 prev_state=S next=102\n");
	CU_ASSERT_EQUAL(cap.nparts, 0);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 300);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 300);
	CU_ASSERT_EQUAL(win(1)->busy_ns, 200);
	CU_ASSERT_EQUAL(win(1)->unseg_cpu_ns, 200);
	CU_ASSERT_EQUAL(window(0)->capacity_ns, 1900);
	CU_ASSERT_EQUAL(window(1)->capacity_ns, 1000);
}

/*
 * A thread that never did socket I/O has no state: its CPU, its send and
 * its disk write are unsegmented, and no part is emitted.
 *   101 [100,400) preempted, 102 [400,600), 101 [600,1000): busy 900, all unsegmented
 */
static void test_no_state(void)
{
	replay("rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
	       "100 0 switch prev=0 prev_state=S next=101\n"
	       "400 0 switch prev=101 prev_state=R next=102\n"
	       "600 0 switch prev=102 prev_state=S next=101\n"
	       "700 0 send tid=101 pid=100 sock=5 bytes=77\n"
	       "800 0 disk tid=101 op=W bytes=4096\n"
	       "1000 0 switch prev=101 prev_state=S next=0\n");
	CU_ASSERT_EQUAL(cap.nparts, 0);
	CU_ASSERT_EQUAL(st.threads, 0);
	CU_ASSERT_EQUAL(st.emits, 0);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 900);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 900);
	CU_ASSERT_EQUAL(win(0)->tx_bytes, 77);
	CU_ASSERT_EQUAL(win(0)->unseg_tx, 77);
	CU_ASSERT_EQUAL(win(0)->disk_write, 4096);
	CU_ASSERT_EQUAL(win(0)->unseg_disk_write, 4096);
}

/*
 * Every 2nd emit fails (a full ring). window_ns = 1000:
 *   emit 1: END seg 1 (w0: cpu 200, rx 10, tx 20)                  ok
 *   emit 2: ASSOC seg 1, its tail (w0: cpu 100), flushed by the recv dropped
 *   emit 3: END seg 2 (w0: cpu 300, rx 30, tx 40)                  ok
 *   emit 4: ASSOC seg 2 (w0: tail cpu 200, disk_write 50), flushed
 *           when the tail crosses into w1                           dropped
 *   emit 5: ASSOC seg 2 (w1: tail cpu 100), flushed by the recv     ok
 *   emit 6: END seg 3 (w1: cpu 200, rx 60, tx 70)                  dropped
 *   emit 7: ASSOC seg 3 (w1: tail cpu 100), final sweep             ok
 *   w0: busy 900 = parts 500 + unseg 100 + lost 300; rx 40, tx 60 all in
 *       parts; disk_write 50 unseg; dropped 2
 *   w1: busy 400 = parts 200 + lost 200; rx 60 unseg, tx 70 unseg; dropped 1
 */
static void test_emit_failure(void)
{
	replay_opt("rametr-events 1 window_ns=1000 offset_ns=0 ncpu=1\n"
		   "100 0 switch prev=0 prev_state=S next=101\n"
		   "200 0 recv tid=101 pid=100 sock=7 bytes=10\n"
		   "400 0 send tid=101 pid=100 sock=7 bytes=20\n"
		   "500 0 recv tid=101 pid=100 sock=8 bytes=30\n"
		   "800 0 send tid=101 pid=100 sock=8 bytes=40\n"
		   "900 0 disk tid=101 op=W bytes=50\n"
		   "1100 0 recv tid=101 pid=100 sock=9 bytes=60\n"
		   "1300 0 send tid=101 pid=100 sock=9 bytes=70\n"
		   "1400 0 switch prev=101 prev_state=S next=0\n",
		   NULL, 2, 1);
	CU_ASSERT_EQUAL(st.emits, 7);
	CU_ASSERT_EQUAL(st.failed_emits, 3);
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 4);
	CU_ASSERT_EQUAL(part(0)->seg_id, SEG(0, 1));
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 200);
	CU_ASSERT_EQUAL(part(1)->seg_id, SEG(0, 2));
	CU_ASSERT_EQUAL(part(1)->flags, RM_PF_START | RM_PF_END);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 300);
	CU_ASSERT_EQUAL(part(2)->seg_id, SEG(0, 2));
	CU_ASSERT_EQUAL(part(2)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(2)->win, 1);
	CU_ASSERT_EQUAL(part(2)->cpu_ns, 100);
	CU_ASSERT_EQUAL(part(3)->seg_id, SEG(0, 3));
	CU_ASSERT_EQUAL(part(3)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(3)->cpu_ns, 100);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 900);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 100);
	CU_ASSERT_EQUAL(win(0)->lost_ns, 300);
	CU_ASSERT_EQUAL(win(0)->dropped_parts, 2);
	CU_ASSERT_EQUAL(win(0)->rx_bytes, 40);
	CU_ASSERT_EQUAL(win(0)->unseg_rx, 0);
	CU_ASSERT_EQUAL(win(0)->tx_bytes, 60);
	CU_ASSERT_EQUAL(win(0)->unseg_tx, 0);
	CU_ASSERT_EQUAL(win(0)->disk_write, 50);
	CU_ASSERT_EQUAL(win(0)->unseg_disk_write, 50);
	CU_ASSERT_EQUAL(win(1)->busy_ns, 400);
	CU_ASSERT_EQUAL(win(1)->unseg_cpu_ns, 0);
	CU_ASSERT_EQUAL(win(1)->lost_ns, 200);
	CU_ASSERT_EQUAL(win(1)->dropped_parts, 1);
	CU_ASSERT_EQUAL(win(1)->unseg_rx, 60);
	CU_ASSERT_EQUAL(win(1)->unseg_tx, 70);
}

/*
 * The multi-window segment of test_split_lost with every 2nd emit failing:
 * the parts of w3 and w5 are dropped, their CPU (1000 each) becomes lost,
 * and so is the 6th emit, the tail's part in w6 (cpu 100).
 */
static void test_emit_failure_split(void)
{
	replay_opt(split_stream, NULL, 2, 1);
	CU_ASSERT_EQUAL(st.emits, 6);
	CU_ASSERT_EQUAL(st.failed_emits, 3);
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 3);
	CU_ASSERT_EQUAL(part(0)->win, 0);
	CU_ASSERT_EQUAL(part(1)->win, 4);
	CU_ASSERT_EQUAL(part(2)->win, 6);
	CU_ASSERT_EQUAL(win(3)->lost_ns, 2400 + 1000);
	CU_ASSERT_EQUAL(win(3)->dropped_parts, 1);
	CU_ASSERT_EQUAL(win(5)->lost_ns, 1000);
	CU_ASSERT_EQUAL(win(5)->dropped_parts, 1);
	CU_ASSERT_EQUAL(win(4)->dropped_parts, 0);
	CU_ASSERT_EQUAL(win(6)->lost_ns, 100);
	CU_ASSERT_EQUAL(win(6)->dropped_parts, 1);
}

/* testdata/eventloop.events: work charged to the most recent recv. */
static void test_event_loop(void)
{
	replay_file("eventloop.events");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 5);
	/* A: closed by B's request */
	CU_ASSERT_EQUAL(part(0)->seg_id, SEG(0, 1));
	CU_ASSERT_EQUAL(part(0)->flags, RM_PF_START | RM_PF_RECV);
	CU_ASSERT_EQUAL(part(0)->in.cookie, 11);
	CU_ASSERT_EQUAL(part(0)->in.rport, 5001);
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 100);
	CU_ASSERT_EQUAL(part(0)->rx_bytes, 100);
	CU_ASSERT_EQUAL(part(0)->tx_bytes, 0);
	/* B: its work includes the reply to A */
	CU_ASSERT_EQUAL(part(1)->seg_id, SEG(0, 2));
	CU_ASSERT_EQUAL(part(1)->flags, RM_PF_START | RM_PF_END);
	CU_ASSERT_EQUAL(part(1)->in.cookie, 12);
	CU_ASSERT_EQUAL(part(1)->out.cookie, 11);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 150);
	CU_ASSERT_EQUAL(part(1)->tx_bytes, 1000);
	/* B's tail [450,500), ended by C's request on another socket */
	CU_ASSERT_EQUAL(part(2)->seg_id, SEG(0, 2));
	CU_ASSERT_EQUAL(part(2)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(2)->in.cookie, 12);
	CU_ASSERT_EQUAL(part(2)->cpu_ns, 50);
	CU_ASSERT_EQUAL(part(2)->tx_bytes, 0);
	CU_ASSERT_EQUAL(part(2)->end_ns, 500);
	/* C (IPv6): closed by the reply to B, then the reply to C is associated */
	CU_ASSERT_EQUAL(part(4)->seg_id, SEG(0, 3));
	CU_ASSERT_EQUAL(part(3)->flags, RM_PF_START | RM_PF_END);
	CU_ASSERT_EQUAL(part(3)->in.cookie, 13);
	CU_ASSERT_EQUAL(part(3)->in.family, RM_AF_INET6);
	CU_ASSERT_EQUAL(part(3)->in.rport, 5003);
	CU_ASSERT_EQUAL(part(3)->out.cookie, 12);
	CU_ASSERT_EQUAL(part(3)->cpu_ns, 200);
	CU_ASSERT_EQUAL(part(3)->tx_bytes, 2000);
	CU_ASSERT_EQUAL(part(4)->seg_id, SEG(0, 3));
	CU_ASSERT_EQUAL(part(4)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(4)->out.cookie, 13);
	CU_ASSERT_EQUAL(part(4)->cpu_ns, 100); /* C's tail [700,800) */
	CU_ASSERT_EQUAL(part(4)->tx_bytes, 3000);
	CU_ASSERT_STRING_EQUAL((const char *)part(4)->comm, "loop");
	CU_ASSERT_EQUAL(win(0)->busy_ns, 700);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 100);
	CU_ASSERT_EQUAL(win(0)->rx_bytes, 300);
	CU_ASSERT_EQUAL(win(0)->tx_bytes, 6000);
}

/* testdata/tail.events: see the computation there. */
static void test_tail(void)
{
	static const uint64_t seg[] = { SEG(0, 1), SEG(0, 1), SEG(0, 2), SEG(0, 2), SEG(0, 3), SEG(0, 3), SEG(0, 3) },
			      pwin[] = { 0, 0, 1, 1, 1, 1, 2 }, pcpu[] = { 200, 350, 300, 200, 100, 300, 300 },
			      in[] = { 7, 7, 8, 8, 9, 9, 9 };
	size_t i;

	replay_file("tail.events");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 7);
	for (i = 0; i < 7; i++) {
		CU_ASSERT_EQUAL(part(i)->seg_id, seg[i]);
		CU_ASSERT_EQUAL(part(i)->win, pwin[i]);
		CU_ASSERT_EQUAL(part(i)->cpu_ns, pcpu[i]);
		CU_ASSERT_EQUAL(part(i)->in.cookie, in[i]);
		/* a segment's part, then its tail's */
		CU_ASSERT_EQUAL(part(i)->flags & (RM_PF_END | RM_PF_ASSOC), i == 0 || i == 2 || i == 4 ? RM_PF_END
											     : RM_PF_ASSOC);
	}
	/* seg 1's tail: through a preemption and a disk wait, its disk write, until its first wait */
	CU_ASSERT_EQUAL(part(1)->disk_write, 4096);
	CU_ASSERT_EQUAL(part(1)->runq_ns, 0);
	CU_ASSERT_EQUAL(part(1)->start_ns, 400);
	CU_ASSERT_EQUAL(part(1)->end_ns, 950);
	/* seg 2's tail ends at the recv of another connection's request */
	CU_ASSERT_EQUAL(part(3)->end_ns, 1600);
	CU_ASSERT_EQUAL(part(3)->rx_bytes + part(3)->tx_bytes, 0);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 750);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 200);
	CU_ASSERT_EQUAL(win(0)->disk_write, 4096);
	CU_ASSERT_EQUAL(win(0)->unseg_disk_write, 0);
	/* seg 2 began with its head: the 50 ns since 101 woke */
	CU_ASSERT_EQUAL(part(2)->start_ns, 1150);
	CU_ASSERT_EQUAL(part(2)->rx_bytes, 30);
	CU_ASSERT_EQUAL(win(1)->busy_ns, 900);
	CU_ASSERT_EQUAL(win(1)->unseg_cpu_ns, 0);
	CU_ASSERT_EQUAL(win(2)->busy_ns, 300);
	CU_ASSERT_EQUAL(win(2)->unseg_cpu_ns, 0);
}

/*
 * The request's head: what a thread that waited for its next request does
 * on waking, up to the recv, is that request's; a disk read (or a send)
 * first means it was doing something else. window_ns = 1000:
 *   [100,300) seg 1; [300,400) its tail, then it waits
 *   [1900,2100) woken, its head: seg 2's, w1 100 (START) and w2 100
 *   [2100,2300) seg 2, END (w2: 100 + 200); [2300,2350) its tail, it waits
 *   [2500,2550) woken, reads a file (512 bytes, still seg 2's I/O): no
 *   head, [2500,2600) unsegmented 100; [2600,2700) seg 3; [2700,2800) its tail
 *   w0: busy 300 = parts; w1: busy 100 = part; w2: busy 650 = parts 550 + 100
 */
static void test_head(void)
{
	static const uint64_t seg[] = { SEG(0, 1), SEG(0, 1), SEG(0, 2), SEG(0, 2), SEG(0, 2), SEG(0, 3), SEG(0, 3) },
			      pwin[] = { 0, 0, 1, 2, 2, 2, 2 }, pcpu[] = { 200, 100, 100, 300, 50, 100, 100 },
			      flags[] = { RM_PF_START | RM_PF_END, RM_PF_ASSOC, RM_PF_START, RM_PF_END, RM_PF_ASSOC,
					  RM_PF_START | RM_PF_END, RM_PF_ASSOC };
	size_t i;

	replay("rametr-events 1 window_ns=1000 offset_ns=0 ncpu=1\n"
	       "100 0 switch prev=0 prev_state=S next=101\n"
	       "100 0 recv tid=101 pid=100 sock=7 bytes=10\n"
	       "300 0 send tid=101 pid=100 sock=7 bytes=20\n"
	       "400 0 switch prev=101 prev_state=S next=0\n"
	       "1900 0 switch prev=0 prev_state=S next=101\n"
	       "2100 0 recv tid=101 pid=100 sock=7 bytes=10\n"
	       "2300 0 send tid=101 pid=100 sock=7 bytes=20\n"
	       "2350 0 switch prev=101 prev_state=S next=0\n"
	       "2500 0 switch prev=0 prev_state=S next=101\n"
	       "2550 0 disk tid=101 op=R bytes=512\n"
	       "2600 0 recv tid=101 pid=100 sock=7 bytes=10\n"
	       "2700 0 send tid=101 pid=100 sock=7 bytes=20\n"
	       "2800 0 switch prev=101 prev_state=S next=0\n");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 7);
	for (i = 0; i < 7; i++) {
		CU_ASSERT_EQUAL(part(i)->seg_id, seg[i]);
		CU_ASSERT_EQUAL(part(i)->win, pwin[i]);
		CU_ASSERT_EQUAL(part(i)->cpu_ns, pcpu[i]);
		CU_ASSERT_EQUAL(part(i)->flags, flags[i]);
		CU_ASSERT_EQUAL(part(i)->in.cookie, 7);
	}
	/* the head's first part holds no bytes: the request's are where the recv was */
	CU_ASSERT_EQUAL(part(2)->rx_bytes, 0);
	CU_ASSERT_EQUAL(part(3)->rx_bytes, 10);
	CU_ASSERT_EQUAL(part(4)->disk_read, 512);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 300);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 0);
	CU_ASSERT_EQUAL(win(1)->busy_ns, 100);
	CU_ASSERT_EQUAL(win(1)->unseg_cpu_ns, 0);
	CU_ASSERT_EQUAL(win(2)->busy_ns, 650);
	CU_ASSERT_EQUAL(win(2)->unseg_cpu_ns, 100);
}

/*
 * A tail ends where the thread hands work over (it wakes another thread
 * of its process from a write or a futex wake), in the default
 * configuration as with follow-replies (a client thread):
 *   [100,200) no state 100; [200,400) seg 1; [400,500) its tail, until
 *   101 wakes 102; [500,600) 101 unsegmented 100; [600,700) 102 (no state)
 *   unsegmented 100 -> busy 600, parts 300, unsegmented 300
 */
static void test_tail_handoff(void)
{
	static const char stream[] = "rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
				     "100 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
				     "200 0 recv tid=101 pid=100 sock=7 bytes=10\n"
				     "400 0 send tid=101 pid=100 sock=7 bytes=20\n"
				     "500 0 wakeup tid=102 by=101\n"
				     "600 0 switch prev=101 prev_pid=100 prev_state=S next=102 next_pid=100\n"
				     "700 0 switch prev=102 prev_pid=100 prev_state=S next=0\n";
	int fr;

	for (fr = 0; fr < 2; fr++) {
		follow_replies = fr;
		replay(stream);
		CU_ASSERT_EQUAL_FATAL(cap.nparts, 2);
		CU_ASSERT_EQUAL(part(0)->cpu_ns, 200);
		CU_ASSERT_EQUAL(part(1)->flags, RM_PF_ASSOC);
		CU_ASSERT_EQUAL(part(1)->cpu_ns, 100);
		CU_ASSERT_EQUAL(part(1)->end_ns, 500);
		CU_ASSERT_EQUAL(win(0)->busy_ns, 600);
		CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 300);
	}
}

/*
 * offset_ns shifts windows: w = (ts + 300) / 1000. Window 0 holds ts
 * [1, 700), window 1 ts [700, 1700):
 *   [100,200) no state 100; [200,500) part 300; [500,700) tail 200 -> w0 busy 600
 *   [700,900) tail 200 -> w1 busy 200: the tail is cut at the window edge
 *   capacity: w0 [100,700) 600, w1 [700,900) 200
 */
static void test_offset(void)
{
	replay("rametr-events 1 window_ns=1000 offset_ns=300 ncpu=1\n"
	       "100 0 switch prev=0 prev_state=S next=101\n"
	       "200 0 recv tid=101 pid=100 sock=7 bytes=10\n"
	       "500 0 send tid=101 pid=100 sock=7 bytes=20\n"
	       "900 0 switch prev=101 prev_state=S next=0\n");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 3);
	CU_ASSERT_EQUAL(part(0)->win, 0);
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 300);
	CU_ASSERT_EQUAL(part(1)->win, 0);
	CU_ASSERT_EQUAL(part(1)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 200);
	CU_ASSERT_EQUAL(part(2)->win, 1);
	CU_ASSERT_EQUAL(part(2)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(2)->cpu_ns, 200);
	CU_ASSERT_EQUAL(part(2)->seg_id, part(0)->seg_id);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 600);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 100);
	CU_ASSERT_EQUAL(win(1)->busy_ns, 200);
	CU_ASSERT_EQUAL(win(1)->unseg_cpu_ns, 0);
	CU_ASSERT_EQUAL(window(0)->capacity_ns, 600);
	CU_ASSERT_EQUAL(window(1)->capacity_ns, 200);
}

/*
 * A part that waits more than RM_WIN_SLOTS windows and is then dropped can
 * not be accounted: its window's slot holds a newer window. (The kernel
 * loses it the same way; the replay reports it in stats.late.)
 *   w0: [100,200) unseg 100, [200,300) part cpu 100 rx 10 -> held by 101
 *   [300,16500) 102 (no state): lost 12700 in w13, then w13..w16 unsegmented;
 *   w16 claims slot 0 (w0 was kept)
 *   16700: 101's send flushes the w0 part -> dropped, late (cpu 100, rx 10);
 *   its END part (w16, cpu 100, tx 20) is dropped too, in w16, and so is
 *   its tail's part (w16, cpu 100) at the final sweep
 */
static void test_late_drop(void)
{
	char err[256];

	replay_opt("rametr-events 1 window_ns=1000 offset_ns=0 ncpu=1\n"
		   "100 0 switch prev=0 prev_state=S next=101\n"
		   "200 0 recv tid=101 pid=100 sock=7 bytes=10\n"
		   "300 0 switch prev=101 prev_state=S next=102\n"
		   "16500 0 switch prev=102 prev_state=S next=103\n"
		   "16600 0 switch prev=103 prev_state=S next=101\n"
		   "16700 0 send tid=101 pid=100 sock=7 bytes=20\n"
		   "16800 0 switch prev=101 prev_state=S next=0\n",
		   NULL, 1, 0);
	CU_ASSERT_EQUAL(cap.nparts, 0);
	CU_ASSERT_EQUAL(st.failed_emits, 3);
	CU_ASSERT_EQUAL(st.late.dropped_parts, 1);
	CU_ASSERT_EQUAL(st.late.lost_ns, 100);
	CU_ASSERT_EQUAL(st.late.unseg_rx, 10);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 200);
	CU_ASSERT_EQUAL(win(0)->dropped_parts, 0);
	CU_ASSERT_EQUAL(win(13)->lost_ns, 12700);
	CU_ASSERT_EQUAL(win(16)->dropped_parts, 2);
	CU_ASSERT_EQUAL(win(16)->lost_ns, 200);
	CU_ASSERT_EQUAL(win(16)->unseg_tx, 20);
	/* the identity of w0 falls short by exactly the late drop */
	CU_ASSERT_NOT_EQUAL(col_replay_capture_check(&cap, NULL, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(col_replay_capture_check(&cap, &st.late, err, sizeof(err)), RM_OK);
}

/* The part of segment id, or NULL. */
static const struct rm_part *part_of(uint64_t seg_id)
{
	size_t i;

	for (i = 0; i < cap.nparts; i++)
		if (cap.parts[i].seg_id == seg_id)
			return &cap.parts[i];
	return NULL;
}

/*
 * A worker takes queued requests without being woken; the reader read
 * them (stream and hand computation: aggregator/testdata/workers_front.events,
 * inlined here). With follow-replies:
 *   SEG(0,1) continuation anchored by the reply on 11: 100000 ns, in =
 *            socket 11 with the request's range [5000,5050), tx 500
 *   SEG(0,2), SEG(0,3) the reader's segments (10000 ns each)
 *   SEG(0,4) continuation, chain SEG(0,4): the miss up to the FETCH on 50
 *            (200000 ns, out [1000,1030)), not anchored
 *   SEG(0,5) continuation of chain SEG(0,4) until back's answer: 200 ns
 *   SEG(0,6) segment of back's answer on 50: 50000 ns, reply on 12
 *   SEG(0,7) anchor record of chain SEG(0,4): in = 12, [6000,6060), no cost
 *   SEG(0,8) the tail after the reply on 12 until the worker blocks: 100 ns,
 *            anchored to the request answered (12, [6000,6060))
 *   unsegmented: the worker before its first reply 100, and after it until
 *   it blocks 100 (that reply answered no request seen), the reader before
 *   its first recv 100
 */
static const char workers_stream[] =
	"rametr-events 1 window_ns=1000000000 offset_ns=1700000000000000000 ncpu=1\n"
	"1000000 0 switch prev=0 prev_state=S next=302 next_pid=300\n"
	"1000100 0 send tid=302 pid=300 comm=worker sock=11 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.1:40001 bytes=10 seq=8000 srv=1\n"
	"1000200 0 switch prev=302 prev_state=S next=301 next_pid=300\n"
	"1000300 0 recv tid=301 pid=300 comm=reader sock=11 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.1:40001 bytes=50 seq=5000 srv=1\n"
	"1010300 0 recv tid=301 pid=300 comm=reader sock=12 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.2:40002 bytes=60 seq=6000 srv=1\n"
	"1020300 0 switch prev=301 prev_state=S next=302 next_pid=300\n"
	"1120300 0 send tid=302 pid=300 sock=11 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.1:40001 bytes=500 seq=8010 srv=1\n"
	"1320300 0 send tid=302 pid=300 sock=50 fam=4 laddr=10.0.0.1:50000 raddr=10.0.0.2:9000 bytes=30 seq=1000\n"
	"1320400 0 switch prev=302 prev_state=S next=0\n"
	"1400000 0 switch prev=0 prev_state=S next=302 next_pid=300\n"
	"1400100 0 recv tid=302 pid=300 comm=worker sock=50 fam=4 laddr=10.0.0.1:50000 raddr=10.0.0.2:9000 bytes=400 seq=3000\n"
	"1450100 0 send tid=302 pid=300 sock=12 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.2:40002 bytes=600 seq=9000 srv=1\n"
	"1450200 0 switch prev=302 prev_state=S next=0\n";

static void test_follow_replies(void)
{
	const struct rm_part *p;
	const uint32_t cont_flags = RM_PF_CONT | RM_PF_ANCHOR;

	follow_replies = 1;
	replay(workers_stream);
	CU_ASSERT_EQUAL(cap.nparts, 8);
	/* the hit: one part, anchored to c1's request on 11 */
	CU_ASSERT_PTR_NOT_NULL_FATAL(p = part_of(SEG(0, 1)));
	CU_ASSERT_EQUAL(p->flags & cont_flags, cont_flags);
	CU_ASSERT(p->flags & RM_PF_END);
	CU_ASSERT(p->flags & RM_PF_IN_SEQ);
	CU_ASSERT_EQUAL(p->tid, 302);
	CU_ASSERT_EQUAL(p->pid, 300);
	CU_ASSERT_STRING_EQUAL((const char *)p->comm, "worker");
	CU_ASSERT_EQUAL(p->cpu_ns, 100000);
	CU_ASSERT_EQUAL(p->tx_bytes, 500);
	CU_ASSERT_EQUAL(p->in.cookie, 11);
	CU_ASSERT_EQUAL(p->in.rport, 40001);
	CU_ASSERT_EQUAL(p->in_seq_start, 5000);
	CU_ASSERT_EQUAL(p->in_seq_end, 5050);
	/* the reader's segments are untouched */
	CU_ASSERT_PTR_NOT_NULL_FATAL(p = part_of(SEG(0, 2)));
	CU_ASSERT_EQUAL(p->cpu_ns, 10000);
	CU_ASSERT_EQUAL(p->flags & cont_flags, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p = part_of(SEG(0, 3)));
	CU_ASSERT_EQUAL(p->cpu_ns, 10000);
	CU_ASSERT_EQUAL(p->in.cookie, 12);
	/* the miss: the chain's parts wait for its anchor */
	CU_ASSERT_PTR_NOT_NULL_FATAL(p = part_of(SEG(0, 4)));
	CU_ASSERT_EQUAL(p->flags & cont_flags, RM_PF_CONT);
	CU_ASSERT_EQUAL(p->parent_seg, SEG(0, 4));
	CU_ASSERT_EQUAL(p->cpu_ns, 200000);
	CU_ASSERT_EQUAL(p->out.cookie, 50);
	CU_ASSERT(p->flags & RM_PF_OUT_SEQ);
	CU_ASSERT_EQUAL(p->out_seq_start, 1000);
	CU_ASSERT_EQUAL(p->out_seq_end, 1030);
	CU_ASSERT_EQUAL(p->in.family, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p = part_of(SEG(0, 5)));
	CU_ASSERT_EQUAL(p->flags & cont_flags, RM_PF_CONT);
	CU_ASSERT_EQUAL(p->parent_seg, SEG(0, 4));
	CU_ASSERT_EQUAL(p->cpu_ns, 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p = part_of(SEG(0, 6)));
	CU_ASSERT_EQUAL(p->flags & cont_flags, 0);
	CU_ASSERT_EQUAL(p->in.cookie, 50);
	CU_ASSERT_EQUAL(p->cpu_ns, 50000);
	CU_ASSERT_EQUAL(p->out.cookie, 12);
	/* the anchor record: c2's request on 12, no cost */
	CU_ASSERT_PTR_NOT_NULL_FATAL(p = part_of(SEG(0, 7)));
	CU_ASSERT_EQUAL(p->flags & (cont_flags | RM_PF_IN_SEQ), RM_PF_ANCHOR | RM_PF_IN_SEQ);
	CU_ASSERT_EQUAL(p->parent_seg, SEG(0, 4));
	CU_ASSERT_EQUAL(p->in.cookie, 12);
	CU_ASSERT_EQUAL(p->in_seq_start, 6000);
	CU_ASSERT_EQUAL(p->in_seq_end, 6060);
	CU_ASSERT_EQUAL(p->cpu_ns + p->rx_bytes + p->tx_bytes + p->disk_read + p->disk_write, 0);
	CU_ASSERT_EQUAL(p->tid, 302);
	/* after the last reply: its tail, charged to the request answered */
	CU_ASSERT_PTR_NOT_NULL_FATAL(p = part_of(SEG(0, 8)));
	CU_ASSERT_EQUAL(p->flags & (cont_flags | RM_PF_IN_SEQ), cont_flags | RM_PF_IN_SEQ);
	CU_ASSERT_EQUAL(p->in.cookie, 12);
	CU_ASSERT_EQUAL(p->in_seq_start, 6000);
	CU_ASSERT_EQUAL(p->in_seq_end, 6060);
	CU_ASSERT_EQUAL(p->cpu_ns, 100);
	CU_ASSERT_EQUAL(p->tx_bytes, 0);
	CU_ASSERT_EQUAL(win(1700000000)->unseg_cpu_ns, 300);
}

/*
 * The same stream without the option: the worker is seen only from its
 * recv on 50; its tail after the reply on 12 (100) is that answer's.
 */
static void test_follow_replies_off(void)
{
	const struct rm_part *p;
	uint64_t cpu = 0;
	size_t i;

	replay(workers_stream);
	CU_ASSERT_EQUAL(cap.nparts, 4);
	for (i = 0; i < cap.nparts; i++) {
		CU_ASSERT_EQUAL(cap.parts[i].flags & (RM_PF_CONT | RM_PF_ANCHOR), 0);
		cpu += cap.parts[i].cpu_ns;
	}
	/* the reader's two and the answer from back, with its tail */
	CU_ASSERT_EQUAL(cpu, 10000 + 10000 + 50000 + 100);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p = part_of(SEG(0, 3)));
	CU_ASSERT_EQUAL(p->in.cookie, 50);
	CU_ASSERT_EQUAL(win(1700000000)->unseg_cpu_ns, 100 + 100 + 100100 + 200000 + 100 + 100);
}

/*
 * An event loop (eventloop.events with its server sockets marked) with
 * follow-replies: what it does between a reply and its next recv or wait
 * is the tail of the request answered, as is what it does between a reply
 * and the next reply:
 *   A [200,300) 100; B [300,450) 150, reply on 11; [450,500) 50, the tail
 *   of the request on 11, ended by the recv; C [500,700) 200, reply on 12;
 *   [700,750) 50 + tx 3000 anchored to C's request on 13; [750,800) 50:
 *   the tail of that request before the loop blocks
 */
static void test_follow_replies_event_loop(void)
{
	const struct rm_part *p;

	follow_replies = 1;
	replay("rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
	       "100 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	       "200 0 recv tid=101 pid=100 comm=loop sock=11 fam=4 laddr=10.0.0.1:80 raddr=10.0.0.11:5001 bytes=100 srv=1\n"
	       "300 0 recv tid=101 pid=100 comm=loop sock=12 fam=4 laddr=10.0.0.1:80 raddr=10.0.0.12:5002 bytes=100 srv=1\n"
	       "450 0 send tid=101 pid=100 comm=loop sock=11 fam=4 laddr=10.0.0.1:80 raddr=10.0.0.11:5001 bytes=1000 srv=1\n"
	       "500 0 recv tid=101 pid=100 comm=loop sock=13 fam=6 laddr=[fd00::1]:80 raddr=[fd00::13]:5003 bytes=100 srv=1\n"
	       "700 0 send tid=101 pid=100 comm=loop sock=12 fam=4 laddr=10.0.0.1:80 raddr=10.0.0.12:5002 bytes=2000 srv=1\n"
	       "750 0 send tid=101 pid=100 comm=loop sock=13 fam=6 laddr=[fd00::1]:80 raddr=[fd00::13]:5003 bytes=3000 srv=1\n"
	       "800 0 switch prev=101 prev_pid=100 prev_state=S next=0\n");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 6);
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 100);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 150);
	p = part(2);
	CU_ASSERT_EQUAL(p->flags & (RM_PF_CONT | RM_PF_ANCHOR | RM_PF_END | RM_PF_IN_SEQ),
			RM_PF_CONT | RM_PF_ANCHOR);
	CU_ASSERT_EQUAL(p->in.cookie, 11);
	CU_ASSERT_EQUAL(p->cpu_ns, 50);
	CU_ASSERT_EQUAL(part(3)->cpu_ns, 200);
	CU_ASSERT_EQUAL(part(3)->in.cookie, 13);
	p = part(4);
	CU_ASSERT_EQUAL(p->flags & (RM_PF_CONT | RM_PF_ANCHOR | RM_PF_END), RM_PF_CONT | RM_PF_ANCHOR | RM_PF_END);
	CU_ASSERT_EQUAL(p->in.cookie, 13);
	CU_ASSERT_EQUAL(p->in.family, RM_AF_INET6);
	CU_ASSERT_EQUAL(p->cpu_ns, 50);
	CU_ASSERT_EQUAL(p->tx_bytes, 3000);
	p = part(5);
	CU_ASSERT_EQUAL(p->flags & (RM_PF_CONT | RM_PF_ANCHOR | RM_PF_END), RM_PF_CONT | RM_PF_ANCHOR);
	CU_ASSERT_EQUAL(p->in.cookie, 13);
	CU_ASSERT_EQUAL(p->cpu_ns, 50);
	CU_ASSERT_EQUAL(p->tx_bytes, 0);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 700);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 100); /* before its first recv: no state */
}

/*
 * Follow-replies and waits inside a segment (tid 101, server socket 11 of
 * c1, 12 of c2):
 *   [100,200) reads A on 11, waits (S) for a result: segment A 100 ns
 *   [300,350) after the wait, replies on 11: a chain anchored to A, 50 ns
 *   [350,400) the tail until it waits for its next request: A's, 50
 *   [500,600) reads B on 12, waits for disk (D): still B; [700,800) more of
 *             B, 200 ns in all, then it waits (S) in its poll loop
 *   [900,950) after that wait, reads C: the head of C, 50 + 50 after it
 */
static void test_follow_replies_waits(void)
{
	const struct rm_part *p;

	follow_replies = 1;
	replay("rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
	       "100 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	       "100 0 recv tid=101 pid=100 sock=11 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.1:5001 bytes=10 seq=1000 srv=1\n"
	       "200 0 switch prev=101 prev_state=S next=0\n"
	       "300 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	       "350 0 send tid=101 pid=100 sock=11 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.1:5001 bytes=20 seq=7000 srv=1\n"
	       "400 0 switch prev=101 prev_state=S next=0\n"
	       "500 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	       "500 0 recv tid=101 pid=100 sock=12 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.2:5002 bytes=10 seq=2000 srv=1\n"
	       "600 0 switch prev=101 prev_state=D next=0\n"
	       "700 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	       "800 0 switch prev=101 prev_state=S next=0\n"
	       "900 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	       "950 0 recv tid=101 pid=100 sock=13 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.3:5003 bytes=10 seq=3000 srv=1\n"
	       "1000 0 switch prev=101 prev_state=S next=0\n");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 5);
	p = part(0); /* A until the wait */
	CU_ASSERT_EQUAL(p->in.cookie, 11);
	CU_ASSERT_EQUAL(p->cpu_ns, 100);
	CU_ASSERT_EQUAL(p->flags & (RM_PF_CONT | RM_PF_ANCHOR), 0);
	p = part(1); /* after the wait, up to the reply: anchored to A's bytes */
	CU_ASSERT_EQUAL(p->flags & (RM_PF_CONT | RM_PF_ANCHOR | RM_PF_END), RM_PF_CONT | RM_PF_ANCHOR | RM_PF_END);
	CU_ASSERT_EQUAL(p->in.cookie, 11);
	CU_ASSERT_EQUAL(p->in_seq_start, 1000);
	CU_ASSERT_EQUAL(p->in_seq_end, 1010);
	CU_ASSERT_EQUAL(p->cpu_ns, 50);
	CU_ASSERT_EQUAL(p->tx_bytes, 20);
	p = part(2); /* A's tail until the wait */
	CU_ASSERT_EQUAL(p->flags & (RM_PF_CONT | RM_PF_ANCHOR | RM_PF_END), RM_PF_CONT | RM_PF_ANCHOR);
	CU_ASSERT_EQUAL(p->in.cookie, 11);
	CU_ASSERT_EQUAL(p->in_seq_start, 1000);
	CU_ASSERT_EQUAL(p->in_seq_end, 1010);
	CU_ASSERT_EQUAL(p->cpu_ns, 50);
	p = part(3); /* B, across its disk wait */
	CU_ASSERT_EQUAL(p->in.cookie, 12);
	CU_ASSERT_EQUAL(p->cpu_ns, 200);
	p = part(4); /* C with its head, emitted at the end */
	CU_ASSERT_EQUAL(p->in.cookie, 13);
	CU_ASSERT_EQUAL(p->cpu_ns, 100);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 100 + 50 + 50 + 100 + 100 + 50 + 50);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 0);
}

/*
 * An event-loop proxy with follow-replies (tid 101): it answers Z on 11,
 * reads A on 12 and forwards it upstream on 50 (no reply: a call), then
 * waits. Each tail goes to its own request, not to the last one answered:
 *   [100,200) Z, reply on 11; [200,250) Z's tail, ended by the recv on 12
 *   [250,350) A, forwarded on 50; [350,400) A's tail until the wait
 */
static void test_follow_replies_proxy_tail(void)
{
	const struct rm_part *p;

	follow_replies = 1;
	replay("rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
	       "100 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	       "100 0 recv tid=101 pid=100 sock=11 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.9:5009 bytes=10 seq=1000 srv=1\n"
	       "200 0 send tid=101 pid=100 sock=11 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.9:5009 bytes=20 seq=7000 srv=1\n"
	       "250 0 recv tid=101 pid=100 sock=12 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.1:5001 bytes=10 seq=2000 srv=1\n"
	       "350 0 send tid=101 pid=100 sock=50 fam=4 laddr=10.0.0.1:50000 raddr=10.0.0.2:9000 bytes=30 seq=5000\n"
	       "400 0 switch prev=101 prev_state=S next=0\n");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 4);
	CU_ASSERT_EQUAL(part(0)->in.cookie, 11);
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 100);
	p = part(1); /* Z's tail */
	CU_ASSERT_EQUAL(p->flags & (RM_PF_CONT | RM_PF_ANCHOR | RM_PF_END), RM_PF_CONT | RM_PF_ANCHOR);
	CU_ASSERT_EQUAL(p->in.cookie, 11);
	CU_ASSERT_EQUAL(p->in_seq_start, 1000);
	CU_ASSERT_EQUAL(p->cpu_ns, 50);
	p = part(2); /* A up to its forwarding */
	CU_ASSERT_EQUAL(p->in.cookie, 12);
	CU_ASSERT_EQUAL(p->out.cookie, 50);
	CU_ASSERT_EQUAL(p->cpu_ns, 100);
	p = part(3); /* A's tail */
	CU_ASSERT_EQUAL(p->flags & (RM_PF_CONT | RM_PF_ANCHOR | RM_PF_END | RM_PF_IN_SEQ),
			RM_PF_CONT | RM_PF_ANCHOR | RM_PF_IN_SEQ);
	CU_ASSERT_EQUAL(p->in.cookie, 12);
	CU_ASSERT_EQUAL(p->in_seq_start, 2000);
	CU_ASSERT_EQUAL(p->in_seq_end, 2010);
	CU_ASSERT_EQUAL(p->cpu_ns, 50);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 300);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 0);
}

/*
 * A pool worker's tail and the hand-off of its next job (follow-replies).
 * Worker 302, reader 301, client sockets 11 and 12 (server side):
 *   [100,200)  302 replies on 11 at 150 (chain anchored to 11's request
 *              read before, 50 ns), then 50 ns of tail, blocks on a lock
 *   [300,400)  302 has the lock: 100 ns more tail, waits for a job
 *   [400,450)  301 reads a request on 12 and hands it over: wakes 302
 *   [500,700)  302 works 200 ns and replies on 12, wakes 301 to take the
 *              connection back at 705, 10 ns of tail
 *   [710,730)  301 back from its poll: 10 ns for 12's connection, reads the
 *              next request on 13 at 720
 * The tail up to the first block (50 ns) is the request's answered on 11
 * (a part anchored to it); the rest of it (100 ns, after the block) is
 * unsegmented by the hand-off, as are the worker's 10 ns after its reply
 * on 12 (its tail ended by the completion hand-off). The reader's segment
 * of 12 ends at the hand-off (40 ns); its 10 ns in its loop after it are
 * unsegmented, its 10 ns after the worker's wake-up go to 12's request (a
 * part anchored from its start). Without the wake-ups' wakers (an old
 * stream), the tail after the block goes to the next request, the
 * reader's segment lasts until it waits (50 ns), the worker's 10 ns after
 * its reply on 12 are that request's tail and the reader's 10 ns after the
 * wake-up are the head of the request on 13.
 */
static const char handoff_stream[] =
	"rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
	"100 0 switch prev=0 prev_state=S next=302 next_pid=300\n"
	"100 0 recv tid=302 pid=300 sock=11 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.1:5001 bytes=10 seq=1000 srv=1\n"
	"150 0 send tid=302 pid=300 sock=11 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.1:5001 bytes=20 seq=7000 srv=1\n"
	"200 0 switch prev=302 prev_state=S next=0\n"
	"300 0 switch prev=0 prev_state=S next=302 next_pid=300\n"
	"400 0 switch prev=302 prev_state=S next=301 next_pid=300\n"
	"400 0 recv tid=301 pid=300 sock=12 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.2:5002 bytes=10 seq=2000 srv=1\n"
	"440 0 wakeup tid=302%s\n"
	"450 0 switch prev=301 prev_state=S next=0\n"
	"500 0 switch prev=0 prev_state=S next=302 next_pid=300\n"
	"700 0 send tid=302 pid=300 sock=12 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.2:5002 bytes=20 seq=8000 srv=1\n"
	"705 0 wakeup tid=301%s\n"
	"710 0 switch prev=302 prev_state=S next=301 next_pid=300\n"
	"720 0 recv tid=301 pid=300 sock=13 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.3:5003 bytes=10 seq=3000 srv=1\n"
	"730 0 switch prev=301 prev_state=S next=0\n";

static void handoff_case(int by, uint64_t next_cpu, uint64_t reader_cpu, uint64_t done_cpu, uint64_t r13_cpu,
			 uint64_t unseg)
{
	uint64_t r12 = 0, r13 = 0, done = 0;
	char stream[sizeof(handoff_stream) + 32];
	const struct rm_part *p = NULL;
	size_t i;

	snprintf(stream, sizeof(stream), handoff_stream, by ? " by=301" : "", by ? " by=302" : "");
	follow_replies = 1;
	replay(stream);
	for (i = 0; i < cap.nparts; i++) {
		const struct rm_part *q = &cap.parts[i];

		if (q->tid == 302 && (q->flags & (RM_PF_ANCHOR | RM_PF_END)) == (RM_PF_ANCHOR | RM_PF_END) &&
		    q->in.cookie == 12)
			p = q;
		if (q->tid == 301 && (q->flags & RM_PF_CONT)) {
			/* the reader's only continuation: anchored from its start */
			CU_ASSERT_EQUAL(q->flags & (RM_PF_ANCHOR | RM_PF_IN_SEQ), RM_PF_ANCHOR | RM_PF_IN_SEQ);
			CU_ASSERT_EQUAL(q->in.cookie, 12);
			CU_ASSERT_EQUAL(q->in_seq_start, 2000);
			CU_ASSERT_EQUAL(q->in_seq_end, 2010);
			done += q->cpu_ns;
		} else if (q->tid == 301) {
			if (q->in.cookie == 12)
				r12 += q->cpu_ns;
			if (q->in.cookie == 13)
				r13 += q->cpu_ns;
		}
	}
	CU_ASSERT_EQUAL(r12, reader_cpu);
	CU_ASSERT_EQUAL(r13, r13_cpu);
	CU_ASSERT_EQUAL(done, done_cpu);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->flags & (RM_PF_CONT | RM_PF_END), RM_PF_CONT | RM_PF_END);
	CU_ASSERT_EQUAL(p->in_seq_start, 2000);
	CU_ASSERT_EQUAL(p->cpu_ns, next_cpu);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, unseg);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 100 + 100 + 50 + 210 + 20);
}

static void test_follow_replies_handoff(void)
{
	handoff_case(1, 200, 40, 10, 10, 100 + 10 + 10);
}

/*
 * The tail of a reply ends at the worker's first block: a wake-up of the
 * reader after it is no completion hand-off. Reader 301 reads on 12 at 100
 * and hands it to 302 (110); 302 replies on 12 at 300, blocks at 310, runs
 * again at 400 and wakes 301 at 420; 301 runs [450,480) and reads on 13.
 */
static void test_follow_replies_handoff_after_block(void)
{
	size_t i;

	follow_replies = 1;
	replay("rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
	       "100 0 switch prev=0 prev_state=S next=301 next_pid=300\n"
	       "100 0 recv tid=301 pid=300 sock=12 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.2:5002 bytes=10 seq=2000 srv=1\n"
	       "110 0 wakeup tid=302 by=301\n"
	       "120 0 switch prev=301 prev_state=S next=302 next_pid=300\n"
	       "120 0 send tid=302 pid=300 sock=99 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.9:5009 bytes=1 seq=1 srv=1\n"
	       "300 0 send tid=302 pid=300 sock=12 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.2:5002 bytes=20 seq=8000 srv=1\n"
	       "310 0 switch prev=302 prev_state=S next=0\n"
	       "400 0 switch prev=0 prev_state=S next=302 next_pid=300\n"
	       "420 0 wakeup tid=301 by=302\n"
	       "450 0 switch prev=302 prev_state=S next=301 next_pid=300\n"
	       "480 0 recv tid=301 pid=300 sock=13 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.3:5003 bytes=10 seq=3000 srv=1\n"
	       "490 0 switch prev=301 prev_state=S next=0\n");
	for (i = 0; i < cap.nparts; i++)
		CU_ASSERT(!(cap.parts[i].tid == 301 && (cap.parts[i].flags & RM_PF_CONT)));
	/* 301's 30 ns after the wake-up are its loop's: unsegmented */
	CU_ASSERT(win(0)->unseg_cpu_ns >= 30);
}

static void test_follow_replies_handoff_unknown_waker(void)
{
	handoff_case(0, 100 + 200, 50, 0, 10 + 10, 0);
}

/*
 * A thread that answers on a server-side socket without holding a request
 * (follow-replies: from now on it serves) and exits before it has used any
 * CPU since: its exit record is of the window it exits in, not of a window
 * it never had (the part was never given one).
 */
static void test_follow_replies_exit_after_send(void)
{
	follow_replies = 1;
	replay("rametr-events 1 window_ns=1000 offset_ns=0 ncpu=1\n"
	       "4900 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	       "5000 0 send tid=101 pid=100 sock=11 fam=4 laddr=10.0.0.1:80 raddr=10.1.0.1:40001 bytes=10 seq=8000 srv=1\n"
	       "5000 0 exit tid=101 pid=100\n"
	       "5000 0 switch prev=101 prev_state=X next=0\n");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 1);
	CU_ASSERT_EQUAL(part(0)->flags & RM_PF_EXIT, RM_PF_EXIT);
	CU_ASSERT_EQUAL(part(0)->win, 5);
	CU_ASSERT_EQUAL(part(0)->start_ns, 5000);
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 0);
	CU_ASSERT_EQUAL(win(4)->unseg_cpu_ns + win(5)->unseg_cpu_ns, 100);
}

/*
 * A client (load generator) with follow-replies: its sockets are never
 * server-side, so it has no chains and no more records than without the
 * option, and the tail rule applies to it as without the option:
 * [100,200) reply 1 on 21, its request on 22 ends it; [200,300) its tail,
 * ended by the recv; [300,400) reply 2 on 22, then [400,500) its tail with
 * a send on 23, ended by the wait: 4 parts, nothing unsegmented.
 */
static void test_follow_replies_client(void)
{
	static const char stream[] = "rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
				     "100 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
				     "100 0 recv tid=101 pid=100 sock=21 bytes=10\n"
				     "200 0 send tid=101 pid=100 sock=22 bytes=10\n"
				     "300 0 recv tid=101 pid=100 sock=22 bytes=10\n"
				     "400 0 send tid=101 pid=100 sock=21 bytes=10\n"
				     "450 0 send tid=101 pid=100 sock=23 bytes=10\n"
				     "500 0 switch prev=101 prev_state=S next=0\n";
	size_t n, i;

	replay(stream);
	n = cap.nparts;
	CU_ASSERT_EQUAL(n, 4);
	follow_replies = 1;
	replay(stream);
	CU_ASSERT_EQUAL(cap.nparts, n);
	for (i = 0; i < cap.nparts; i++)
		CU_ASSERT_EQUAL(cap.parts[i].flags & (RM_PF_CONT | RM_PF_ANCHOR), 0);
	CU_ASSERT_EQUAL(part(1)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 100);
	CU_ASSERT_EQUAL(part(3)->flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(part(3)->cpu_ns, 100);
	CU_ASSERT_EQUAL(part(3)->out.cookie, 23);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 0);
}

/*
 * A thread that reads replies on a client-side socket and hands each to
 * another thread (a multiplexed connection's reader): the hand-off ends
 * what the next read extends, so [100,300) reads [1000,1100), wakes 102 at
 * 200, and the read at 300 begins a second segment [1100,1300) up to the
 * wait at 450; without the wake-up the two reads are one segment (partial
 * reads). The wake-up of a thread that read a request on a server-side
 * socket is not this case (its segment ends at the hand-off).
 */
static void test_reader_handoff(void)
{
	static const char stream[] = "rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
				     "100 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
				     "100 0 recv tid=101 pid=100 sock=7 fam=4 laddr=10.0.0.1:5000 raddr=10.0.0.2:9000 "
				     "bytes=100 seq=1000\n"
				     "200 0 wakeup tid=102%s\n"
				     "300 0 recv tid=101 pid=100 sock=7 fam=4 laddr=10.0.0.1:5000 raddr=10.0.0.2:9000 "
				     "bytes=200 seq=1100\n"
				     "450 0 switch prev=101 prev_state=S next=0\n";
	char s[sizeof(stream) + 16];
	int fr;

	for (fr = 0; fr <= 1; fr++) {
		snprintf(s, sizeof(s), stream, " by=101");
		follow_replies = fr;
		replay(s);
		CU_ASSERT_EQUAL_FATAL(cap.nparts, 2);
		CU_ASSERT_NOT_EQUAL(part(0)->seg_id, part(1)->seg_id);
		CU_ASSERT_EQUAL(part(0)->in_seq_start, 1000);
		CU_ASSERT_EQUAL(part(0)->in_seq_end, 1100);
		CU_ASSERT_EQUAL(part(0)->cpu_ns, 200);
		CU_ASSERT_EQUAL(part(1)->in_seq_start, 1100);
		CU_ASSERT_EQUAL(part(1)->in_seq_end, 1300);
		CU_ASSERT_EQUAL(part(1)->cpu_ns, 150);
		snprintf(s, sizeof(s), stream, "");
		follow_replies = fr;
		replay(s);
		CU_ASSERT_EQUAL_FATAL(cap.nparts, 1);
		CU_ASSERT_EQUAL(part(0)->in_seq_start, 1000);
		CU_ASSERT_EQUAL(part(0)->in_seq_end, 1300);
		CU_ASSERT_EQUAL(part(0)->cpu_ns, 350);
	}
}

/*
 * Time the hypervisor stole from the CPU is on nobody's CPU: 30 ns stolen
 * while the thread was in its segment [200,500) leave it 270 ns, and busy
 * leaves them out: [100,200) no state 100, part 270, [500,600) the tail
 * 100 -> busy 470, unsegmented 100. The first reading of the steal
 * count (5000 ns since boot) only sets where counting starts.
 */
static void test_steal(void)
{
	replay("rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=1\n"
	       "100 0 steal ns=5000\n"
	       "100 0 switch prev=0 prev_state=S next=101\n"
	       "200 0 recv tid=101 pid=100 sock=7 bytes=10\n"
	       "250 0 steal ns=5030\n"
	       "500 0 send tid=101 pid=100 sock=7 bytes=20\n"
	       "600 0 switch prev=101 prev_state=S next=0\n");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 2);
	CU_ASSERT_EQUAL(part(0)->cpu_ns, 270);
	CU_ASSERT_EQUAL(part(1)->cpu_ns, 100);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 470);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 100);
}

/*
 * rm_win keeps its last answer (the env's win_lo/win_hi/win_cur); times
 * going back and forth across windows, on two CPUs, with an offset larger
 * than the first times: window w is [w * 1000 - 700, (w + 1) * 1000 - 700),
 * w0 = [0, 300), w1 = [300, 1300), w2 = [1300, 2300), w3 = [2300, 3300).
 * A cut at 1350 on cpu0 asks for 1350 (w2), then 250 (w0), then 1349 (w2),
 * after cpu1 asked for w1.
 *   cpu0: [100,250) 101 without a segment: unsegmented 150 (w0);
 *         [250,1350) 101's segment: parts w0 50 (START, rx 10), w1 1000,
 *         w2 50 (END, tx 20); [1350,2500) its tail: ASSOC parts w2 950, w3 200
 *   cpu1: first event at 1250 (nothing before it); [1250,1260) unsegmented
 *         10 (w1); [1260,1400) 201's segment: parts w1 40 (START, rx 5), w2
 *         100 (END, tx 6); [1400,2500) its tail: ASSOC parts w2 900, w3 200
 *   busy: w0 200, w1 1000 + 50 = 1050, w2 1000 + 1000 = 2000, w3 400
 */
static void test_window_cache(void)
{
	static const uint32_t tid[] = { 101, 101, 101, 201, 201 }, flags[] = { RM_PF_START, 0, RM_PF_END, RM_PF_START,
									       RM_PF_END };
	static const uint64_t pwin[] = { 0, 1, 2, 1, 2 }, pcpu[] = { 50, 1000, 50, 40, 100 },
			      rx[] = { 10, 0, 0, 5, 0 }, tx[] = { 0, 0, 20, 0, 6 };
	size_t i;

	replay("rametr-events 1 window_ns=1000 offset_ns=700 ncpu=2\n"
	       "100 0 switch prev=0 prev_state=S next=101\n"
	       "250 0 recv tid=101 pid=100 sock=7 bytes=10\n"
	       "1250 1 switch prev=0 prev_state=S next=201\n"
	       "1260 1 recv tid=201 pid=200 sock=8 bytes=5\n"
	       "1350 0 send tid=101 pid=100 sock=7 bytes=20\n"
	       "1400 1 send tid=201 pid=200 sock=8 bytes=6\n"
	       "2500 0 switch prev=101 prev_state=S next=0\n"
	       "2500 1 switch prev=201 prev_state=S next=0\n");
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 9);
	/* the tails' parts: w2 as each tail crosses into w3, w3 at the final sweep */
	for (i = 5; i < 9; i++) {
		const struct rm_part *t = part(i);

		CU_ASSERT_EQUAL(t->flags, RM_PF_ASSOC);
		CU_ASSERT_EQUAL(t->cpu_ns, t->win == 3 ? 200 : t->tid == 101 ? 950 : 900);
		CU_ASSERT(t->win == (i < 7 ? 2U : 3U));
	}
	for (i = 0; i < 5; i++) {
		CU_ASSERT_EQUAL(part(i)->tid, tid[i]);
		CU_ASSERT_EQUAL(part(i)->win, pwin[i]);
		CU_ASSERT_EQUAL(part(i)->cpu_ns, pcpu[i]);
		CU_ASSERT_EQUAL(part(i)->flags, flags[i]);
		CU_ASSERT_EQUAL(part(i)->rx_bytes, rx[i]);
		CU_ASSERT_EQUAL(part(i)->tx_bytes, tx[i]);
	}
	CU_ASSERT_EQUAL(win(0)->busy_ns, 200);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 150);
	CU_ASSERT_EQUAL(win(1)->busy_ns, 1050);
	CU_ASSERT_EQUAL(win(1)->unseg_cpu_ns, 10);
	CU_ASSERT_EQUAL(win(2)->busy_ns, 2000);
	CU_ASSERT_EQUAL(win(2)->unseg_cpu_ns, 0);
	CU_ASSERT_EQUAL(win(3)->busy_ns, 400);
	CU_ASSERT_EQUAL(win(3)->unseg_cpu_ns, 0);
}

/* The part of thread tid, segment n (cpu 0), window w, with flag f among its flags; NULL if none. */
static const struct rm_part *seg_part(uint32_t tid, uint64_t n, uint64_t w, uint32_t f)
{
	size_t i;

	for (i = 0; i < cap.nparts; i++)
		if (cap.parts[i].tid == tid && cap.parts[i].seg_id == SEG(0, n) && cap.parts[i].win == w &&
		    (cap.parts[i].flags & f) == f)
			return &cap.parts[i];
	return NULL;
}

/* The inbound tuple of p names sender d (10.0.0.d) on port port (0: none yet). */
static int from_is(const struct rm_part *p, unsigned d, unsigned port)
{
	return p && p->in.cookie == 9 && p->in.lport == 53 && p->in.rport == port &&
	       (port ? ipv4_is(p->in.raddr, 10, 0, 0, d) : !p->in.raddr[0]);
}

/* testdata/udp.events: see the computation there. */
static void test_udp(void)
{
	const struct rm_part *p;

	replay_file("udp.events");
	CU_ASSERT_EQUAL(cap.nparts, 8);
	p = seg_part(201, 1, 0, RM_PF_START | RM_PF_END);
	CU_ASSERT(from_is(p, 21, 5001));
	CU_ASSERT_FATAL(p != NULL);
	CU_ASSERT_EQUAL(p->flags, RM_PF_START | RM_PF_END);
	CU_ASSERT_EQUAL(p->cpu_ns, 3000);
	CU_ASSERT_EQUAL(p->rx_bytes, 40);
	CU_ASSERT_EQUAL(p->tx_bytes, 80);
	CU_ASSERT(ipv4_is(p->out.raddr, 10, 0, 0, 21) && p->out.rport == 5001);
	CU_ASSERT_STRING_EQUAL((const char *)p->comm, "dns");
	p = seg_part(201, 1, 0, RM_PF_ASSOC);
	CU_ASSERT(from_is(p, 21, 5001));
	CU_ASSERT_EQUAL(p ? p->cpu_ns : 0, 1000);
	/* a second datagram on the socket: a request of its own, the first unanswered */
	p = seg_part(201, 2, 0, RM_PF_START);
	CU_ASSERT(from_is(p, 22, 5002));
	CU_ASSERT_EQUAL(p ? p->flags : 0, RM_PF_START | RM_PF_RECV);
	CU_ASSERT_EQUAL(p ? p->cpu_ns : 0, 1000);
	CU_ASSERT_EQUAL(p ? p->rx_bytes : 0, 40);
	p = seg_part(201, 3, 0, RM_PF_START | RM_PF_END);
	CU_ASSERT(from_is(p, 23, 5003));
	CU_ASSERT_EQUAL(p ? p->cpu_ns : 0, 2000);
	p = seg_part(201, 3, 0, RM_PF_ASSOC);
	CU_ASSERT(from_is(p, 23, 5003));
	CU_ASSERT_EQUAL(p ? p->cpu_ns : 0, 500);
	/* the part emitted at the window edge before the sender was known keeps no sender */
	p = seg_part(201, 4, 1, RM_PF_START);
	CU_ASSERT(from_is(p, 0, 0));
	CU_ASSERT_EQUAL(p ? p->cpu_ns : 0, 1000);
	p = seg_part(201, 4, 2, RM_PF_END);
	CU_ASSERT(from_is(p, 21, 5001));
	CU_ASSERT_EQUAL(p ? p->cpu_ns : 0, 900);
	p = seg_part(201, 4, 2, RM_PF_ASSOC);
	CU_ASSERT(from_is(p, 21, 5001));
	CU_ASSERT_EQUAL(p ? p->cpu_ns : 0, 500);
	CU_ASSERT_EQUAL(win(0)->busy_ns, 8500);
	CU_ASSERT_EQUAL(win(0)->unseg_cpu_ns, 1000);
	CU_ASSERT_EQUAL(win(1)->busy_ns, 1000);
	CU_ASSERT_EQUAL(win(2)->busy_ns, 1400);
	CU_ASSERT_EQUAL(win(2)->unseg_cpu_ns, 0);
}

/* Without dgram=1 the same datagrams on one socket would be one request read in pieces. */
static void test_udp_stream_rule(void)
{
	replay("rametr-events 1 window_ns=10000 offset_ns=0 ncpu=1\n"
	       "1000 0 recv tid=201 pid=200 sock=9 fam=4 laddr=10.0.0.1:53 raddr=0.0.0.0:0 bytes=40\n"
	       "2000 0 recv tid=201 pid=200 sock=9 fam=4 laddr=10.0.0.1:53 raddr=0.0.0.0:0 bytes=40\n"
	       "3000 0 send tid=201 pid=200 sock=9 fam=4 laddr=10.0.0.1:53 raddr=0.0.0.0:0 bytes=80\n");
	CU_ASSERT_EQUAL(cap.nparts, 1);
	CU_ASSERT_EQUAL(part(0)->rx_bytes, 80);
	replay("rametr-events 1 window_ns=10000 offset_ns=0 ncpu=1\n"
	       "1000 0 recv tid=201 pid=200 sock=9 fam=4 laddr=10.0.0.1:53 raddr=0.0.0.0:0 bytes=40 dgram=1\n"
	       "2000 0 recv tid=201 pid=200 sock=9 fam=4 laddr=10.0.0.1:53 raddr=0.0.0.0:0 bytes=40 dgram=1\n"
	       "3000 0 send tid=201 pid=200 sock=9 fam=4 laddr=10.0.0.1:53 raddr=0.0.0.0:0 bytes=80 dgram=1\n");
	CU_ASSERT_EQUAL(cap.nparts, 2);
	CU_ASSERT_EQUAL(part(0)->rx_bytes, 40);
	CU_ASSERT_EQUAL(part(0)->flags, RM_PF_START | RM_PF_RECV);
	CU_ASSERT_EQUAL(part(1)->rx_bytes, 40);
	CU_ASSERT_EQUAL(part(1)->tx_bytes, 80);
	/* recvfrom without an address buffer: the sender stays unknown */
	CU_ASSERT_EQUAL(part(1)->in.rport, 0);
}

static CU_TestInfo cases[] = {
	{ "simple recv, compute, send", test_simple },
	{ "follow-replies: a thread exiting right after its first reply emits its exit in that window",
	  test_follow_replies_exit_after_send },
	{ "preemption mid-segment", test_preempt },
	{ "segment spanning a window boundary", test_window_boundary },
	{ "slice spanning more than RM_MAX_SPLIT windows", test_split_lost },
	{ "partial reads and a sequence gap", test_partial_reads },
	{ "sequence numbers wrap at 2^32", test_seq_wrap },
	{ "second request on another socket", test_recv_other_socket },
	{ "send after send on the same socket", test_send_after_send },
	{ "send to another socket while associated", test_assoc_other_socket },
	{ "fork inside a segment", test_fork_inside },
	{ "fork outside a segment", test_fork_outside },
	{ "exit mid-segment", test_exit_mid_segment },
	{ "disk I/O inside, associated, outside", test_disk },
	{ "idle time is never busy", test_idle },
	{ "thread without state", test_no_state },
	{ "emit failure every 2nd part", test_emit_failure },
	{ "emit failure across split windows", test_emit_failure_split },
	{ "event loop", test_event_loop },
	{ "the request's tail: preempted, disk wait, first wait, next recv, window edge", test_tail },
	{ "the request's tail ends at a hand-off", test_tail_handoff },
	{ "a reader of replies that hands one over begins a new segment at its next read", test_reader_handoff },
	{ "the request's head: from the wake-up to the recv, unless it did something else", test_head },
	{ "window offset", test_offset },
	{ "UDP: each datagram a request, charged to its sender once the recv returned", test_udp },
	{ "UDP: datagrams are messages, stream reads are not", test_udp_stream_rule },
	{ "late drop of a part older than the slot ring", test_late_drop },
	{ "follow-replies: a pool worker taking queued requests without a wake-up", test_follow_replies },
	{ "without follow-replies the same worker is unsegmented", test_follow_replies_off },
	{ "follow-replies on an event loop: a reply's tail is the request's answered", test_follow_replies_event_loop },
	{ "follow-replies: after a wait, work goes to the request answered, not the one read", test_follow_replies_waits },
	{ "follow-replies gives a client no chains and no more records", test_follow_replies_client },
	{ "follow-replies: hand-offs between a reader and a worker, both ways", test_follow_replies_handoff },
	{ "follow-replies: a proxy's tail after forwarding is the request forwarded", test_follow_replies_proxy_tail },
	{ "follow-replies: without the waker only the tail before the first block is", test_follow_replies_handoff_unknown_waker },
	{ "follow-replies: a reader woken after the worker's tail has ended finishes no request",
	  test_follow_replies_handoff_after_block },
	{ "time stolen by the hypervisor is in nobody's CPU", test_steal },
	{ "windows of times back and forth across window edges, offset larger than the first times", test_window_cache },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("segmenter", cases)
