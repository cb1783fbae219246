/*
 * col_batcher_test.c - the batcher's sum of a window's reports: the Go
 * label counts the label module drains (col_golabel_fn) pooled per cookie
 * over processes and merged with the backend's totals of the window, as
 * the encoder then sends them.
 */
#include <string.h>

#include "col_batcher.h"
#include "rm_err.h"
#include "rm_test.h"

/* Two processes' counts of one window pooled per cookie, merged with the backend's totals and a later drain. */
static void test_golabel_pooled(void)
{
	static struct col_batcher bt;
	static const struct col_golabel_count c[] = {
		{ 0, 3, 100 }, { 0x77, 40, 100 }, { COL_GOLABEL_IDLE, 5, 100 },
		{ 0x77, 10, 200 }, { 0x88, 20, 200 },
	};
	struct rm_totals k;
	const struct rm_totals *w;
	size_t i;

	memset(&bt, 0, sizeof(bt));
	bt.batch_parts = COL_BATCH_PARTS;
	memset(&k, 0, sizeof(k));
	k.win = 9;
	k.busy_ns = 1000;
	k.unseg_go_ns = 30;
	CU_ASSERT_EQUAL(col_batcher_window(&bt, &k), RM_OK);
	col_batcher_golabel(&bt, 9, c, sizeof(c) / sizeof(c[0]), 500501);
	col_batcher_golabel(&bt, 9, c + 4, 1, 500501);
	CU_ASSERT_EQUAL_FATAL(bt.nwins, 1);
	w = &bt.wins[0];
	CU_ASSERT_EQUAL(w->busy_ns, 1000);
	CU_ASSERT_EQUAL(w->unseg_go_ns, 30);
	CU_ASSERT_EQUAL(w->go_period_ns, 500501);
	CU_ASSERT_EQUAL_FATAL(w->n_go, 4);
	for (i = 0; i < w->n_go; i++) {
		uint64_t want = w->go[i].cookie == 0 ? 3 : w->go[i].cookie == 0x77 ? 50
			      : w->go[i].cookie == 0x88 ? 40 : w->go[i].cookie == COL_GOLABEL_IDLE ? 5 : 0;

		CU_ASSERT_EQUAL(w->go[i].samples, want);
	}
	/* the module's idle label is the wire's */
	CU_ASSERT_EQUAL(COL_GOLABEL_IDLE, RM_GO_IDLE);
	col_batcher_free(&bt);
}

/* Counts the wire would refuse (window 0, no period, an absurd one) are left out, the batch still sendable. */
static void test_golabel_refused(void)
{
	static struct col_batcher bt;
	static const struct col_golabel_count c[] = { { 0x77, 40, 100 } };
	char err[128];

	memset(&bt, 0, sizeof(bt));
	bt.batch_parts = COL_BATCH_PARTS;
	col_batcher_golabel(&bt, 0, c, 1, 500000);
	col_batcher_golabel(&bt, 9, c, 1, 0);
	col_batcher_golabel(&bt, 9, c, 1, RM_GO_PERIOD_MAX + 1);
	CU_ASSERT_EQUAL(bt.nwins, 0);
	col_batcher_golabel(&bt, 9, c, 1, RM_GO_PERIOD_MAX);
	CU_ASSERT_EQUAL_FATAL(bt.nwins, 1);
	CU_ASSERT_EQUAL(rm_totals_check(&bt.wins[0], 0, err, sizeof(err)), RM_OK);
	col_batcher_free(&bt);
}

static CU_TestInfo cases[] = {
	{ "a window's Go label counts are pooled per cookie with its totals", test_golabel_pooled },
	{ "Go label counts the wire would refuse are left out", test_golabel_refused },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_batcher", cases)
