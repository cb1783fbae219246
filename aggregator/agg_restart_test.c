/*
 * agg_restart_test.c - the split of a restarted collector's totals over the
 * windows an earlier instance left open: windows without totals get what
 * they hold, windows with totals keep theirs, the rest is V in the last
 * window, and a lump too small to explain the windows charges nothing.
 * Values are CPU ns (resource 0) unless a case says otherwise.
 */
#include <string.h>

#include "rm_test.h"
#include "agg_restart.h"

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

static CU_TestInfo cases[] = {
	{ "restart totals over open windows: split as the table says", test_split },
	{ "each resource is split apart", test_resources_apart },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_restart", cases)
