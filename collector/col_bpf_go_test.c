/*
 * col_bpf_go_test.c - col_bpf_go_pool, the pure part of the backend's Go
 * label counts: processes' counts pooled per cookie into a window's totals,
 * the largest labels kept when a window has more than the wire carries, and
 * counts the wire would refuse left out. (The module's lifecycle and its
 * counts on a real Go server: col_bpf_test, col_golabel_test.)
 */
#include <string.h>

#include "col_bpf_go.h"
#include "rm_err.h"
#include "rm_test.h"

static uint64_t samples_of(const struct rm_totals *t, uint64_t cookie)
{
	uint32_t i;

	for (i = 0; i < t->n_go; i++)
		if (t->go[i].cookie == cookie)
			return t->go[i].samples;
	return 0;
}

static uint64_t seg_of(const struct rm_totals *t, uint64_t cookie)
{
	uint32_t i;

	for (i = 0; i < t->n_go; i++)
		if (t->go[i].cookie == cookie)
			return t->go[i].seg;
	return 0;
}

/* Two processes' counts of one window: one total per cookie by label and by segment, the idle label the wire's. */
static void test_pooled(void)
{
	static const struct col_golabel_count c[] = {
		{ 0, 3, 9, 100 },	    { 0x77, 40, 36, 100 }, { COL_GOLABEL_IDLE, 5, 0, 100 },
		{ 0x77, 10, 10, 200 },	    { 0x88, 20, 22, 200 }, { COL_GOLABEL_IDLE, 2, 0, 200 },
		{ 0x99, 0, 3, 200 }, /* a segment's samples whose goroutines carried other labels */
	};
	static struct rm_totals t;
	struct rm_golabel scratch[7];
	char err[128];
	int bad = 1;

	CU_ASSERT_EQUAL(col_bpf_go_pool(&t, 9, c, 7, 500501, scratch, &bad), 0);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(t.win, 9);
	CU_ASSERT_EQUAL(t.go_period_ns, 500501);
	CU_ASSERT_EQUAL(t.n_go, 5);
	CU_ASSERT_EQUAL(samples_of(&t, 0), 3);
	CU_ASSERT_EQUAL(samples_of(&t, 0x77), 50);
	CU_ASSERT_EQUAL(samples_of(&t, 0x88), 20);
	CU_ASSERT_EQUAL(samples_of(&t, RM_GO_IDLE), 7);
	CU_ASSERT_EQUAL(samples_of(&t, 0x99), 0);
	CU_ASSERT_EQUAL(seg_of(&t, 0), 9);
	CU_ASSERT_EQUAL(seg_of(&t, 0x77), 46);
	CU_ASSERT_EQUAL(seg_of(&t, 0x88), 22);
	CU_ASSERT_EQUAL(seg_of(&t, 0x99), 3);
	CU_ASSERT_EQUAL(seg_of(&t, RM_GO_IDLE), 0);
	CU_ASSERT_EQUAL(COL_GOLABEL_IDLE, RM_GO_IDLE);
	CU_ASSERT_EQUAL(t.busy_ns, 0); /* counts only: the batcher merges them with the window's totals */
	CU_ASSERT_EQUAL(rm_totals_check(&t, 0, err, sizeof(err)), RM_OK);
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
	folded = col_bpf_go_pool(&t, 5, c, N, 1000000, scratch, &bad);
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
	static const struct col_golabel_count c[] = { { 0x77, 40, 0, 100 } };
	static struct rm_totals t;
	struct rm_golabel scratch[1];
	int bad = 0;

	col_bpf_go_pool(&t, 0, c, 1, 500000, scratch, &bad);
	CU_ASSERT_EQUAL(bad, 1);
	col_bpf_go_pool(&t, 9, c, 1, 0, scratch, &bad);
	CU_ASSERT_EQUAL(bad, 1);
	CU_ASSERT_EQUAL(t.n_go, 0);
	col_bpf_go_pool(&t, 9, c, 1, RM_GO_PERIOD_MAX + 1, scratch, &bad);
	CU_ASSERT_EQUAL(bad, 1);
	CU_ASSERT_EQUAL(t.n_go, 0);
	CU_ASSERT_EQUAL(t.go_period_ns, 0);
	col_bpf_go_pool(&t, 9, c, 1, RM_GO_PERIOD_MAX, scratch, &bad);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(samples_of(&t, 0x77), 40);
}

static CU_TestInfo cases[] = {
	{ "processes' counts of a window are pooled per cookie", test_pooled },
	{ "past the wire's bound the largest labels are kept, the rest folded", test_largest_kept },
	{ "counts the wire would refuse are left out", test_refused },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_bpf_go", cases)
