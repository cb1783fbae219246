/*
 * col_bpf_go_test.c - col_bpf_go_segs and col_bpf_go_pool, the pure part
 * of the backend's Go label counts: the parts' samples summed by cookie,
 * processes' counts merged per process and cookie into a window's totals
 * (by label and by segment, each process's apart), the largest labels kept when a window has more than the wire
 * carries, counts the wire would refuse left out, and a window's Go CPU
 * outside segments moved from a report's totals to its counts'. (The module's lifecycle and its
 * counts on a real Go server: col_bpf_test, col_golabel_test.)
 */
#include <string.h>

#include "col_bpf_go.h"
#include "rametr.h"
#include "rm_err.h"
#include "rm_test.h"

/* cookie's counts in t summed over its processes (all zero if it has none) */
static struct rm_golabel count_of(const struct rm_totals *t, uint64_t cookie)
{
	struct rm_golabel sum = { cookie, 0, 0, 0, 0 };
	uint32_t i;

	for (i = 0; i < t->n_go; i++)
		if (t->go[i].cookie == cookie) {
			sum.samples += t->go[i].samples;
			sum.seg += t->go[i].seg;
		}
	return sum;
}

/* (pid, cookie)'s count in t (all zero if it has none) */
static struct rm_golabel count_in(const struct rm_totals *t, uint32_t pid, uint64_t cookie)
{
	struct rm_golabel none = { cookie, 0, 0, pid, 0 };
	uint32_t i;

	for (i = 0; i < t->n_go; i++)
		if (t->go[i].cookie == cookie && t->go[i].pid == pid)
			return t->go[i];
	return none;
}

#define samples_of(t, cookie) (count_of((t), (cookie)).samples)
#define seg_of(t, cookie) (count_of((t), (cookie)).seg)

/* Two processes' counts of one window: one entry per process and cookie, the idle label the wire's; no segments. */
static void test_pooled(void)
{
	static const struct col_golabel_count c[] = {
		{ 0, 3, 100 }, { 0x77, 40, 100 }, { COL_GOLABEL_IDLE, 5, 100 }, { 0x77, 10, 200 }, { 0x88, 20, 200 },
		{ COL_GOLABEL_IDLE, 2, 200 },
	};
	static struct rm_totals t;
	struct rm_golabel scratch[7];
	struct col_bpf_go_stats st = { 0 };
	char err[128];
	uint32_t i;
	int bad = 1;

	CU_ASSERT_EQUAL(col_bpf_go_pool(&t, 9, c, 6, NULL, 0, 500501, scratch, &bad), 0);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(t.win, 9);
	CU_ASSERT_EQUAL(t.go_period_ns, 500501);
	CU_ASSERT_EQUAL(t.n_go, 6);
	CU_ASSERT_EQUAL(count_in(&t, 100, 0x77).samples, 40);
	CU_ASSERT_EQUAL(count_in(&t, 200, 0x77).samples, 10); /* a socket both processes read */
	CU_ASSERT_EQUAL(count_in(&t, 100, RM_GO_IDLE).samples, 5);
	CU_ASSERT_EQUAL(count_in(&t, 200, RM_GO_IDLE).samples, 2);
	CU_ASSERT_EQUAL(count_in(&t, 200, 0).samples, 0);
	CU_ASSERT_EQUAL(samples_of(&t, 0), 3);
	CU_ASSERT_EQUAL(samples_of(&t, 0x77), 50);
	CU_ASSERT_EQUAL(samples_of(&t, 0x88), 20);
	CU_ASSERT_EQUAL(samples_of(&t, RM_GO_IDLE), 7);
	for (i = 0; i < t.n_go; i++)
		CU_ASSERT_EQUAL(t.go[i].seg, 0); /* none said */
	CU_ASSERT_EQUAL(COL_GOLABEL_IDLE, RM_GO_IDLE);
	CU_ASSERT_EQUAL(t.busy_ns, 0); /* counts only: the batcher merges them with the window's totals */
	CU_ASSERT_EQUAL(rm_totals_check(&t, 0, err, sizeof(err)), RM_OK);
	/* the exit line's tally: 80 samples, 3 without a label, 7 of the runtime's */
	col_bpf_go_tally(&st, &t);
	col_bpf_go_tally(&st, &t);
	CU_ASSERT_EQUAL(st.windows, 2);
	CU_ASSERT_EQUAL(st.samples, 160);
	CU_ASSERT_EQUAL(st.unlabelled, 6);
	CU_ASSERT_EQUAL(st.runtime, 14);
}

/* A part of window win, a Go program's unless flags say otherwise. */
static struct rm_part part(uint64_t win, uint64_t cookie, uint32_t flags, uint64_t samples)
{
	struct rm_part p;

	memset(&p, 0, sizeof(p));
	p.win = win;
	p.pid = 100;
	p.in.cookie = cookie;
	p.flags = flags;
	p.samples = samples;
	return p;
}

/* The parts' samples by cookie, then with the label counts: both ways sum to the window's samples. */
static void test_segments(void)
{
	struct rm_part p[7];
	static const struct col_golabel_count c[] = { { 0x77, 30, 100 }, { 0x88, 20, 100 }, { 0, 5, 100 },
						      { COL_GOLABEL_IDLE, 5, 100 } };
	struct rm_golabel segs[4], scratch[2 * 4 + 4 + 1];
	static struct rm_totals t;
	uint64_t lab = 0, seg = 0;
	char err[128];
	uint32_t i;
	size_t n;
	int bad = 1;

	p[0] = part(9, 0x77, RM_PF_GO | RM_PF_RUNTIME, 20);
	p[1] = part(9, 0x77, RM_PF_GO | RM_PF_RUNTIME, 8);
	p[2] = part(9, 0x88, RM_PF_GO | RM_PF_RUNTIME | RM_PF_CONT | RM_PF_ANCHOR, 25); /* an anchored chain */
	p[3] = part(9, 0x99, RM_PF_GO | RM_PF_RUNTIME | RM_PF_CONT, 4);		  /* not anchored: none */
	p[4] = part(8, 0x77, RM_PF_GO | RM_PF_RUNTIME, 6);				  /* another window */
	p[5] = part(9, 0x77, RM_PF_RUNTIME, 6);					  /* a JVM's */
	p[6] = part(9, 0xaa, RM_PF_GO | RM_PF_RUNTIME, 0);				  /* no samples */
	n = col_bpf_go_segs(p, 7, 9, segs, 4);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(segs[0].cookie, 0x77);
	CU_ASSERT_EQUAL(segs[0].seg, 28);
	CU_ASSERT_EQUAL(segs[1].cookie, 0x88);
	CU_ASSERT_EQUAL(segs[1].seg, 25);
	CU_ASSERT_EQUAL(col_bpf_go_segs(p, 7, 9, segs, 1), 1); /* past cap: left out */

	n = col_bpf_go_segs(p, 7, 9, segs, 4);
	CU_ASSERT_EQUAL(col_bpf_go_pool(&t, 9, c, 4, segs, n, 500000, scratch, &bad), 0);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(seg_of(&t, 0x77), 28);
	CU_ASSERT_EQUAL(seg_of(&t, 0x88), 25);
	CU_ASSERT_EQUAL(seg_of(&t, 0), 60 - 53); /* the samples in no part */
	CU_ASSERT_EQUAL(samples_of(&t, 0x77), 30);
	for (i = 0; i < t.n_go; i++) {
		lab += t.go[i].samples;
		seg += t.go[i].seg;
	}
	CU_ASSERT_EQUAL(lab, 60);
	CU_ASSERT_EQUAL(seg, 60);
	CU_ASSERT_EQUAL(rm_totals_check(&t, 0, err, sizeof(err)), RM_OK);

	/* parts holding more samples than the window counted (the window's edge): scaled down to them */
	segs[0].seg = 90;
	segs[1].seg = 30;
	CU_ASSERT_EQUAL(col_bpf_go_pool(&t, 9, c, 4, segs, 2, 500000, scratch, &bad), 0);
	CU_ASSERT_EQUAL(seg_of(&t, 0x77), 45);
	CU_ASSERT_EQUAL(seg_of(&t, 0x88), 15);
	CU_ASSERT_EQUAL(seg_of(&t, 0), 0);
	/* no part holds a sample: all of them in cookie 0's */
	CU_ASSERT_EQUAL(col_bpf_go_pool(&t, 9, c, 4, segs, 0, 500000, scratch, &bad), 0);
	CU_ASSERT_EQUAL(seg_of(&t, 0), 60);
	CU_ASSERT_EQUAL(seg_of(&t, 0x77), 0);
}

/* Two processes by segment: each one's parts' samples bounded by its own samples, its rest in its own cookie 0. */
static void test_segments_per_process(void)
{
	static const struct col_golabel_count c[] = { { 0x77, 30, 100 }, { 0, 10, 100 }, { 0x88, 20, 200 },
						      { COL_GOLABEL_IDLE, 5, 200 } };
	struct rm_golabel segs[3], scratch[2 * 4 + 3 + 1];
	static struct rm_totals t;
	char err[128];
	int bad = 1;

	memset(segs, 0, sizeof(segs));
	segs[0] = (struct rm_golabel){ 0x77, 0, 25, 100, 0 };
	segs[1] = (struct rm_golabel){ 0x88, 0, 40, 200, 0 }; /* more than process 200 counted: scaled to 25 */
	segs[2] = (struct rm_golabel){ 0x99, 0, 7, 300, 0 };  /* a process without counts: left out */
	CU_ASSERT_EQUAL(col_bpf_go_pool(&t, 9, c, 4, segs, 3, 500000, scratch, &bad), 0);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(count_in(&t, 100, 0x77).seg, 25);
	CU_ASSERT_EQUAL(count_in(&t, 100, 0).seg, 40 - 25);
	CU_ASSERT_EQUAL(count_in(&t, 100, 0).samples, 10);
	CU_ASSERT_EQUAL(count_in(&t, 200, 0x88).seg, 25);
	CU_ASSERT_EQUAL(count_in(&t, 200, 0).seg, 0);
	CU_ASSERT_EQUAL(count_in(&t, 200, 0x88).samples, 20);
	CU_ASSERT_EQUAL(seg_of(&t, 0x99), 0);
	CU_ASSERT_EQUAL(count_in(&t, 200, RM_GO_IDLE).samples, 5);
	CU_ASSERT_EQUAL(rm_totals_check(&t, 0, err, sizeof(err)), RM_OK);
}

/* (pid, cookie)'s samples in calibrated counts c[0..n) (0 if none) */
static uint64_t cal_of(const struct col_golabel_count *c, size_t n, uint32_t pid, uint64_t cookie)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (c[i].pid == pid && c[i].cookie == cookie)
			return c[i].samples;
	return 0;
}

/* Each process's samples brought to its own CPU: what they missed unlabelled, an excess scaled down; a process
   without a figure as sampled, one without samples all unlabelled. */
static void test_calibrated(void)
{
	static const struct col_golabel_count c[] = { { 0x77, 30, 100 }, { 0, 10, 100 }, { 0x88, 20, 200 } };
	struct col_bpf_go_cpu cpu[] = { { 100, 0, 30000000 }, { 300, 0, 5000000 } };
	struct rm_golabel segs[2] = { { 0x77, 0, 28, 100, 0 }, { 0x88, 0, 10, 200, 0 } };
	struct col_golabel_count out[5];
	size_t n;

	/* 0.5 ms a sample: process 100 used 60 samples' worth, not 40; 300 used 10 and was never sampled */
	n = col_bpf_go_calibrate(c, 3, cpu, 2, 500000, segs, 2, out);
	CU_ASSERT_EQUAL_FATAL(n, 5);
	CU_ASSERT_EQUAL(cal_of(out, n, 100, 0x77), 30);
	CU_ASSERT_EQUAL(cal_of(out, n, 100, 0), 10);
	CU_ASSERT_EQUAL(cal_of(out, n, 100, COL_GOLABEL_IDLE), 20); /* what the samples missed */
	CU_ASSERT_EQUAL(cal_of(out, n, 200, 0x88), 20); /* no figure: as sampled */
	CU_ASSERT_EQUAL(cal_of(out, n, 300, COL_GOLABEL_IDLE), 10);
	CU_ASSERT_EQUAL(segs[0].seg, 28);                /* the parts' samples stay */
	CU_ASSERT_EQUAL(segs[1].seg, 10);
	/* 30 samples' worth of 40: 22.5 and 7.5 rounded down, the rest to the largest; segs by the same factor */
	cpu[0].ns = 15000000;
	n = col_bpf_go_calibrate(c, 3, cpu, 1, 500000, segs, 2, out);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT_EQUAL(cal_of(out, n, 100, 0x77), 23);
	CU_ASSERT_EQUAL(cal_of(out, n, 100, 0), 7);
	CU_ASSERT_EQUAL(segs[0].seg, 21);
	/* less than a sample's worth: the process's entries are left out; without a period all as sampled */
	cpu[0].ns = 400000;
	n = col_bpf_go_calibrate(c, 3, cpu, 1, 500000, NULL, 0, out);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(cal_of(out, n, 200, 0x88), 20);
	CU_ASSERT_EQUAL(col_bpf_go_calibrate(c, 3, cpu, 1, 0, NULL, 0, out), 3);
	/* nothing known: all as sampled */
	CU_ASSERT_EQUAL(col_bpf_go_calibrate(c, 3, NULL, 0, 500000, NULL, 0, out), 3);
	CU_ASSERT_EQUAL(memcmp(out, c, sizeof(c)), 0);
}

/* More labels than the wire carries: the largest are kept, the smallest folded into cookie 0. */
static void test_largest_kept(void)
{
	enum { N = RM_GO_LABELS_MAX + 40 };
	static struct col_golabel_count c[N];
	static struct rm_golabel scratch[N];
	static struct rm_totals t;
	uint64_t folded, want = 0, sum = 0, all = 0;
	size_t i;
	char err[128];
	int bad = 1;

	for (i = 0; i < N; i++) {
		c[i].cookie = 1000 + i;
		c[i].samples = 1 + i; /* cookie 1000 + i has i + 1 samples */
		c[i].pid = (uint32_t)(1 + i % 3);
		all += c[i].samples;
	}
	folded = col_bpf_go_pool(&t, 5, c, N, NULL, 0, 1000000, scratch, &bad);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT(t.n_go <= RM_GO_LABELS_MAX);
	CU_ASSERT(folded > 0);
	CU_ASSERT_EQUAL(t.go_folded, folded);
	CU_ASSERT_EQUAL(samples_of(&t, 0), folded);
	for (i = 0; i < t.n_go; i++)
		sum += t.go[i].samples;
	CU_ASSERT_EQUAL(sum, all); /* nothing lost */
	/* the labels kept are the largest: every kept cookie has more samples than every folded one */
	for (i = 0; i < N; i++)
		if (!samples_of(&t, c[i].cookie))
			want += c[i].samples;
	CU_ASSERT_EQUAL(want, folded);
	CU_ASSERT(samples_of(&t, 1000 + N - 1) == N);
	CU_ASSERT(samples_of(&t, 1000) == 0);
	CU_ASSERT_EQUAL(rm_totals_check(&t, 0, err, sizeof(err)), RM_OK);
}

/* Counts the wire would refuse are not set at all. */
static void test_refused(void)
{
	static const struct col_golabel_count c[] = { { 0x77, 40, 100 } };
	static struct rm_totals t;
	struct rm_golabel scratch[1];
	int bad = 0;

	col_bpf_go_pool(&t, 0, c, 1, NULL, 0, 500000, scratch, &bad);
	CU_ASSERT_EQUAL(bad, 1);
	col_bpf_go_pool(&t, 9, c, 1, NULL, 0, 0, scratch, &bad);
	CU_ASSERT_EQUAL(bad, 1);
	CU_ASSERT_EQUAL(t.n_go, 0);
	col_bpf_go_pool(&t, 9, c, 1, NULL, 0, RM_GO_PERIOD_MAX + 1, scratch, &bad);
	CU_ASSERT_EQUAL(bad, 1);
	CU_ASSERT_EQUAL(t.n_go, 0);
	CU_ASSERT_EQUAL(t.go_period_ns, 0);
	col_bpf_go_pool(&t, 9, c, 1, NULL, 0, RM_GO_PERIOD_MAX, scratch, &bad);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(samples_of(&t, 0x77), 40);
}

/*
 * A window's Go CPU outside segments taken out of a report's totals and
 * given to the counts' totals: the four fields move together, bounded by
 * the smallest, and the two records sum to the one they came from.
 */
static void test_unseg_moved(void)
{
	static const struct {
		const char *name;
		uint64_t busy, cpu, rt, go, want;
	} cases[] = {
		{ "all of a Go program's", 1000, 400, 300, 300, 300 },
		{ "part of the runtimes' CPU is a JVM's", 1000, 400, 300, 120, 120 },
		{ "none", 1000, 400, 300, 0, 0 },
		{ "go past rt (a broken report): no more than rt", 1000, 400, 100, 300, 100 },
		{ "rt past unseg_cpu: no more than it", 1000, 50, 100, 100, 50 },
		{ "unseg past busy: no more than busy", 30, 50, 100, 100, 30 },
		{ "large", UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - 1 },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rm_totals w, c;
		uint64_t x;

		memset(&w, 0, sizeof(w));
		memset(&c, 0, sizeof(c));
		w.win = c.win = 7;
		w.busy_ns = cases[i].busy;
		w.unseg_cpu_ns = cases[i].cpu;
		w.unseg_rt_ns = cases[i].rt;
		w.unseg_go_ns = cases[i].go;
		w.rx_bytes = 99;
		x = col_bpf_go_unseg_take(&w);
		if (x != cases[i].want)
			fprintf(stderr, "case '%s': took %llu, want %llu\n", cases[i].name, (unsigned long long)x,
				(unsigned long long)cases[i].want);
		CU_ASSERT_EQUAL(x, cases[i].want);
		col_bpf_go_unseg_give(&c, x);
		CU_ASSERT_EQUAL(w.busy_ns + c.busy_ns, cases[i].busy);
		CU_ASSERT_EQUAL(w.unseg_cpu_ns + c.unseg_cpu_ns, cases[i].cpu);
		CU_ASSERT_EQUAL(w.unseg_rt_ns + c.unseg_rt_ns, cases[i].rt);
		CU_ASSERT_EQUAL(w.unseg_go_ns + c.unseg_go_ns, cases[i].go);
		CU_ASSERT_EQUAL(c.busy_ns, x);
		CU_ASSERT_EQUAL(c.unseg_go_ns, x);
		CU_ASSERT_EQUAL(w.rx_bytes, 99); /* nothing else moves */
		CU_ASSERT_EQUAL(w.win, 7);
	}
}

static CU_TestInfo cases[] = {
	{ "processes' counts of a window stay apart per process and cookie", test_pooled },
	{ "the parts' samples by cookie, pooled with the labels' to the same sum", test_segments },
	{ "by segment each process's samples are bounded and completed apart", test_segments_per_process },
	{ "each process's samples calibrated to its own CPU in the window", test_calibrated },
	{ "past the wire's bound the largest labels are kept, the rest folded", test_largest_kept },
	{ "counts the wire would refuse are left out", test_refused },
	{ "a window's Go CPU outside segments moves to its counts' totals whole", test_unseg_moved },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_bpf_go", cases)
