/*
 * agg_restart_test.c - the split of a restarted collector's totals over the
 * windows an earlier instance left open: windows without totals get what
 * they hold, windows with totals keep theirs, the rest is V in the last
 * window, and a lump too small to explain the windows charges nothing.
 * Values are CPU ns (resource 0) unless a case says otherwise. Then the
 * accountant on the in-memory store: a killed instance's windows, a
 * restart report over them, and the same report again.
 */
#include <string.h>

#include "rm_test.h"
#include "agg_account.h"
#include "agg_restart.h"
#include "agg_store_mem.h"
#include "rm_err.h"

#define NW 4

struct split_case {
	const char *name;
	uint64_t lump;
	size_t n;
	struct { int has_total; uint64_t total, charged; } w[NW];
	uint64_t want_total[NW], want_v[NW], want_short;
};

static const struct split_case split_cases[] = {
	{ "one window without totals: U = the lump, V = what no part explains",
	  1000, 1, { { 0, 0, 600 } }, { 1000 }, { 400 }, 0 },
	{ "one window whose totals arrived: nothing added",
	  1000, 1, { { 1, 1000, 1000 } }, { 0 }, { 0 }, 0 },
	{ "a gap of three: parts balanced where they are, the rest in the last",
	  5000, 3, { { 0, 0, 700 }, { 0, 0, 0 }, { 0, 0, 300 } }, { 700, 0, 4300 }, { 0, 0, 4000 }, 0 },
	{ "a window with totals inside the gap: its totals leave the lump",
	  5000, 3, { { 0, 0, 700 }, { 1, 2000, 2000 }, { 0, 0, 300 } }, { 700, 0, 2300 }, { 0, 0, 2000 }, 0 },
	{ "the last window has totals: the rest is added to them",
	  3000, 2, { { 0, 0, 500 }, { 1, 1000, 1000 } }, { 500, 1500 }, { 0, 1500 }, 0 },
	{ "the lump is exactly what the windows hold: no V",
	  1000, 2, { { 0, 0, 400 }, { 0, 0, 600 } }, { 400, 600 }, { 0, 0 }, 0 },
	{ "the lump is short of the parts: balanced, no V, the shortfall told",
	  900, 2, { { 0, 0, 400 }, { 0, 0, 600 } }, { 400, 600 }, { 0, 0 }, 100 },
	{ "nothing held, nothing measured: nothing written",
	  0, 2, { { 0, 0, 0 }, { 0, 0, 0 } }, { 0, 0 }, { 0, 0 }, 0 },
	{ "a resource not measured (0): windows balanced on their parts, no shortfall told",
	  0, 2, { { 0, 0, 400 }, { 1, 50, 50 } }, { 400, 0 }, { 0, 0 }, 0 },
};

static void test_split(void)
{
	size_t i, j;

	for (i = 0; i < sizeof(split_cases) / sizeof(split_cases[0]); i++) {
		const struct split_case *c = &split_cases[i];
		struct agg_restart_win w[NW];
		struct agg_restart_add out[NW];
		uint64_t lump[ST_R_COUNT] = { 0 }, short_by[ST_R_COUNT];
		int r;

		memset(w, 0, sizeof(w));
		lump[ST_R_CPU] = c->lump;
		for (j = 0; j < c->n; j++) {
			w[j].has_total = c->w[j].has_total;
			w[j].total[ST_R_CPU] = c->w[j].total;
			w[j].charged[ST_R_CPU] = c->w[j].charged;
		}
		agg_restart_split(lump, w, c->n, out, short_by);
		for (j = 0; j < c->n; j++) {
			if (out[j].total[ST_R_CPU] != c->want_total[j] || out[j].v[ST_R_CPU] != c->want_v[j])
				fprintf(stderr, "%s: window %zu got U %llu V %llu\n", c->name, j,
					(unsigned long long)out[j].total[ST_R_CPU], (unsigned long long)out[j].v[ST_R_CPU]);
			CU_ASSERT_EQUAL(out[j].total[ST_R_CPU], c->want_total[j]);
			CU_ASSERT_EQUAL(out[j].v[ST_R_CPU], c->want_v[j]);
			/* every window balances: stored + added U = stored + added (U_c + V) */
			CU_ASSERT_EQUAL(c->w[j].total + out[j].total[ST_R_CPU],
					(c->w[j].has_total ? c->w[j].total : c->w[j].charged) + out[j].v[ST_R_CPU]);
		}
		CU_ASSERT_EQUAL(short_by[ST_R_CPU], c->want_short);
		for (r = 0; r < ST_R_COUNT; r++)
			if (r != ST_R_CPU)
				CU_ASSERT_EQUAL(short_by[r], 0);
	}
}

/* Resources are split each on its own: bytes in one, CPU in another. */
static void test_resources_apart(void)
{
	struct agg_restart_win w[2];
	struct agg_restart_add out[2];
	uint64_t lump[ST_R_COUNT] = { 0 }, short_by[ST_R_COUNT];

	memset(w, 0, sizeof(w));
	lump[ST_R_CPU] = 100;
	lump[ST_R_NET_RX] = 64;
	w[0].charged[ST_R_CPU] = 30;
	w[1].charged[ST_R_NET_RX] = 80;
	agg_restart_split(lump, w, 2, out, short_by);
	CU_ASSERT_EQUAL(out[0].total[ST_R_CPU], 30);
	CU_ASSERT_EQUAL(out[1].total[ST_R_CPU], 70);
	CU_ASSERT_EQUAL(out[1].v[ST_R_CPU], 70);
	CU_ASSERT_EQUAL(out[1].total[ST_R_NET_RX], 80);
	CU_ASSERT_EQUAL(out[1].v[ST_R_NET_RX], 0);
	CU_ASSERT_EQUAL(short_by[ST_R_NET_RX], 16);
	CU_ASSERT_EQUAL(short_by[ST_R_CPU], 0);
}

#define WNS 1000000000ull
#define W0 1700000000ull

static int apply(struct agg_account *a, uint64_t instance, uint64_t seq, const struct agg_charge *ch, size_t nch,
		 const struct rm_totals *w, size_t nw)
{
	struct agg_batch_meta m = { "n1", "replay", instance, seq, WNS };
	int dup = -1, rv = agg_account_apply(a, &m, ch, nch, w, nw, &dup);

	CU_ASSERT_EQUAL(dup, 0);
	return rv;
}

static void test_account(void)
{
	struct agg_store_mem *mem;
	struct agg_store st;
	struct agg_account *a;
	/* the dead instance: window W0 complete, W0+1 with parts but no totals */
	struct agg_charge ch[] = {
		{ W0, "c1", NULL, { 600 }, NULL, 0 },
		{ W0 + 1, "c1", NULL, { 300 }, NULL, 0 },
		{ W0 + 1, NULL, "unsegmented", { 20 }, NULL, 0 },
	};
	struct rm_totals w0 = { .win = W0, .busy_ns = 600 };
	/* the next instance: totals of W0 and W0+1 from the stream, and W0+2 untouched */
	struct rm_totals rs[] = {
		{ .win = W0, .busy_ns = 600, .restart = 1 },
		{ .win = W0 + 1, .busy_ns = 1000, .restart = 1 },
		{ .win = W0 + 2, .busy_ns = 50, .restart = 1, .capacity_ns = WNS },
	};
	/* its own first batch: a part and totals in W0+2 */
	struct agg_charge own = { W0 + 2, "c1", NULL, { 70 }, NULL, 0 };
	struct rm_totals w2 = { .win = W0 + 2, .busy_ns = 70 };
	uint64_t windows = 0;

	CU_ASSERT_EQUAL_FATAL(agg_store_mem_open(&mem), RM_OK);
	agg_store_mem_bind(mem, &st);
	CU_ASSERT_EQUAL_FATAL(agg_account_open(&a, &st), RM_OK);
	CU_ASSERT_EQUAL(apply(a, 1, 1, ch, 3, &w0, 1), RM_OK);
	CU_ASSERT_EQUAL(agg_store_mem_unbalanced(mem, NULL), 1); /* W0+1 has no totals */
	CU_ASSERT_EQUAL(apply(a, 2, 1, NULL, 0, rs, 3), RM_OK);
	CU_ASSERT_EQUAL(agg_store_mem_unbalanced(mem, &windows), 0);
	CU_ASSERT_EQUAL(windows, 3);
	/* W0 kept its totals; W0+1: 1000 - 320 held; W0+2: all of it (no part yet) */
	CU_ASSERT_EQUAL(agg_store_mem_unacct(mem, "n1", AGG_REASON_COLLECTOR_RESTART, ST_R_CPU), 680 + 50);
	CU_ASSERT_EQUAL(apply(a, 2, 2, &own, 1, &w2, 1), RM_OK);
	CU_ASSERT_EQUAL(agg_store_mem_unbalanced(mem, NULL), 0);
	/* the same report again (its acknowledgement was lost): nothing changes */
	CU_ASSERT_EQUAL(apply(a, 3, 1, NULL, 0, rs, 3), RM_OK);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(mem, "n1", AGG_REASON_COLLECTOR_RESTART, ST_R_CPU), 730);
	CU_ASSERT_EQUAL(agg_store_mem_usage(mem, "n1", "c1", ST_R_CPU), 970);
	CU_ASSERT_EQUAL(agg_store_mem_unbalanced(mem, NULL), 0);
	agg_account_close(a);
	agg_store_mem_close(mem);
}

static CU_TestInfo cases[] = {
	{ "restart totals over open windows: split as the table says", test_split },
	{ "each resource is split apart", test_resources_apart },
	{ "the accountant: a killed instance's windows balanced once, a repeated report changes nothing",
	  test_account },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_restart", cases)
