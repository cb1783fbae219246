/*
 * agg_policy_test.c - the throttling policies on per-window series: the
 * configured cap (throttle above it, release once no longer pressing), the
 * EWMA overload rule with multiplicative decrease and additive increase
 * (the values are worked out by hand in the comments), both rules on one CE,
 * and what is refused.
 */
#include <string.h>

#include "rm_test.h"
#include "agg_policy.h"
#include "rm_err.h"

#define CAPNS 2000000000ull   /* 2 CPUs x 1 s */

/* One window: server utilisation and c1..c3 shares, all in permille. */
struct row {
	uint32_t util, c1, c2, c3;
};

static int feed(struct agg_policy *p, const char *srv, uint64_t win, const struct row *r,
		struct agg_policy_decision *d, size_t max, size_t *n)
{
	struct agg_policy_use u[3] = {
		{ "c1", (uint64_t)r->c1 * CAPNS / 1000 },
		{ "c2", (uint64_t)r->c2 * CAPNS / 1000 },
		{ "c3", (uint64_t)r->c3 * CAPNS / 1000 },
	};
	struct agg_policy_obs o = { win, CAPNS, (uint64_t)r->util * CAPNS / 1000, u, 3, 1000000000ull };

	return agg_policy_window(p, srv, &o, d, max, n);
}

static void test_cap_rule(void)
{
	struct agg_policy_cap cap = { "c2", "db1", 300 };
	struct agg_policy_cfg cfg;
	struct agg_policy *p;
	struct agg_policy_decision d[4];
	static const struct row rows[] = {
		{ 500, 100, 200, 100 },  /* 1: under the cap */
		{ 700, 100, 350, 100 },  /* 2: above: capped at 300 */
		{ 600, 100, 300, 100 },  /* 3: presses against it: kept */
		{ 400, 100, 230, 100 },  /* 4: below 80% (240): 1 */
		{ 400, 100, 250, 100 },  /* 5: not below 240: back to 0 */
		{ 400, 100, 100, 100 },  /* 6: 1 */
		{ 400, 100, 100, 100 },  /* 7: 2 */
		{ 400, 100, 100, 100 },  /* 8: 3: released */
	};
	size_t n, i;

	agg_policy_cfg_default(&cfg);
	cfg.caps = &cap;
	cfg.ncaps = 1;
	CU_ASSERT_EQUAL_FATAL(agg_policy_open(&p, &cfg), RM_OK);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		CU_ASSERT_EQUAL(feed(p, "db1", i + 1, &rows[i], d, 4, &n), RM_OK);
		if (i == 1) {
			CU_ASSERT_EQUAL_FATAL(n, 1);
			CU_ASSERT_STRING_EQUAL(d[0].ce, "c2");
			CU_ASSERT_EQUAL(d[0].cap_permille, 300);
			CU_ASSERT_EQUAL(d[0].prev_permille, 0);
			CU_ASSERT_EQUAL(d[0].rule, AGG_RULE_CAP);
			CU_ASSERT_EQUAL(d[0].share_permille, 350);
			CU_ASSERT_EQUAL(d[0].win, 2);
			CU_ASSERT_STRING_EQUAL(d[0].why, "c2 on db1: share 35.0% above its cap of 30.0%");
		} else if (i == 7) {
			CU_ASSERT_EQUAL_FATAL(n, 1);
			CU_ASSERT_EQUAL(d[0].cap_permille, 0);
			CU_ASSERT_EQUAL(d[0].prev_permille, 300);
			CU_ASSERT(strstr(d[0].why, "for 3 windows") != NULL);
		} else {
			CU_ASSERT_EQUAL(n, 0);
		}
		CU_ASSERT_EQUAL(agg_policy_cap_of(p, "db1", "c2"), i >= 1 && i < 7 ? 300u : 0u);
	}
	/* the same CE on another server is not capped */
	CU_ASSERT_EQUAL(feed(p, "web", 1, &rows[1], d, 4, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	agg_policy_close(p);
}

/* Seed 002 Table 4 defaults (x0.9, +1%), each change held for 2 windows. */
static void test_overload_rule(void)
{
	struct agg_policy_cfg cfg;
	struct agg_policy *p;
	struct agg_policy_decision d[4];
	/* s = 0.7 u + 0.3 s' */
	static const struct row rows[] = {
		{ 500, 100, 300, 100 },  /* 1: s = 500 */
		{ 700, 100, 500, 100 },  /* 2: s = 640 */
		{ 950, 100, 750, 100 },  /* 3: s = 857 > 850: c2 (top, 750) capped at 675, held to 6 */
		{ 900, 100, 700, 100 },  /* 4: s = 887.1, binds, but held */
		{ 900, 100, 680, 100 },  /* 5: s = 896.1, held */
		{ 880, 100, 675, 100 },  /* 6: s = 884.8, binds: 607.5 -> 608, held to 9 */
		{ 800, 100, 600, 100 },  /* 7: s = 825.4 <= 850, held */
		{ 790, 100, 600, 100 },  /* 8: s = 800.6, held */
		{ 790, 100, 600, 100 },  /* 9: s = 793.2, binds (600 >= 547.2): 617.5 -> 618, held to 12 */
		{ 790, 100, 610, 100 },  /* 10: held */
		{ 790, 100, 200, 100 },  /* 11: held: not counted */
		{ 600, 100, 400, 100 },  /* 12: does not bind (400 < 556.2), not below half: kept */
		{ 600, 100, 300, 100 },  /* 13: 300 < 309: 1 */
		{ 600, 100, 300, 100 },  /* 14: 2 */
		{ 600, 100, 300, 100 },  /* 15: 3: released */
	};
	static const uint32_t want[] = { 0, 0, 675, 675, 675, 608, 608, 608, 618, 618, 618, 618, 618, 618, 0 };
	size_t n, i;

	agg_policy_cfg_default(&cfg);
	cfg.overload = 1;
	CU_ASSERT_DOUBLE_EQUAL(cfg.md, 0.9, 1e-12);
	CU_ASSERT_EQUAL(cfg.ai_permille, 10);
	CU_ASSERT_EQUAL(cfg.hold, 2);
	CU_ASSERT_EQUAL_FATAL(agg_policy_open(&p, &cfg), RM_OK);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		CU_ASSERT_EQUAL(feed(p, "db1", i + 1, &rows[i], d, 4, &n), RM_OK);
		CU_ASSERT_EQUAL(agg_policy_cap_of(p, "db1", "c2"), want[i]);
		CU_ASSERT_EQUAL(n, (i > 0 && want[i] != want[i - 1]) ? 1u : 0u);
		if (i == 2) {
			CU_ASSERT_EQUAL_FATAL(n, 1);
			CU_ASSERT_STRING_EQUAL(d[0].ce, "c2");
			CU_ASSERT_EQUAL(d[0].rule, AGG_RULE_OVERLOAD);
			CU_ASSERT_EQUAL(d[0].smooth_permille, 857);
			CU_ASSERT_EQUAL(d[0].util_permille, 950);
			CU_ASSERT_STRING_EQUAL(d[0].why, "c2 on db1: server CPU 85.7% smoothed (EWMA a=0.70, "
							 "95.0% now) above 85.0%, top consumer at 75.0%: x0.90 of 75.0%");
		} else if (i == 5) {
			CU_ASSERT_EQUAL_FATAL(n, 1);
			CU_ASSERT_EQUAL(d[0].prev_permille, 675);
			CU_ASSERT(strstr(d[0].why, "x0.90 of 67.5%") != NULL);
		} else if (i == 8) {
			CU_ASSERT_EQUAL_FATAL(n, 1);
			CU_ASSERT(strstr(d[0].why, "presses on the cap: +10 permille") != NULL);
		} else if (i == 14) {
			CU_ASSERT_EQUAL_FATAL(n, 1);
			CU_ASSERT(strstr(d[0].why, "for 3 windows") != NULL);
			CU_ASSERT(strstr(d[0].why, "released") != NULL);
		}
	}
	/* an old or repeated window is ignored */
	CU_ASSERT_EQUAL(feed(p, "db1", 15, &rows[2], d, 4, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(feed(p, "db1", 2, &rows[2], d, 4, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	agg_policy_close(p);
}

/* With wait_applied the hold ends at the first window starting after the
 * collector applied the cap, or AGG_POLICY_APPLY_WAIT windows after. */
static void test_overload_wait_applied(void)
{
	struct agg_policy_cfg cfg;
	struct agg_policy *p;
	struct agg_policy_decision d[4];
	static const struct row over = { 950, 50, 750, 50 };
	size_t n;
	uint64_t w;

	agg_policy_cfg_default(&cfg);
	cfg.overload = 1;
	cfg.wait_applied = 1;
	CU_ASSERT_EQUAL_FATAL(agg_policy_open(&p, &cfg), RM_OK);
	CU_ASSERT_EQUAL(feed(p, "db1", 100, &over, d, 4, &n), RM_OK);
	CU_ASSERT_EQUAL(agg_policy_cap_of(p, "db1", "c2"), 675);
	/* overloaded and binding, but not yet in force */
	for (w = 101; w <= 104; w++) {
		CU_ASSERT_EQUAL(feed(p, "db1", w, &over, d, 4, &n), RM_OK);
		CU_ASSERT_EQUAL(n, 0);
	}
	/* another cap, another CE, another server: not this wait */
	CU_ASSERT_EQUAL(agg_policy_applied(p, "db1", "c2", 700, 104500000000ll), 0);
	CU_ASSERT_EQUAL(agg_policy_applied(p, "db1", "c1", 675, 104500000000ll), 0);
	CU_ASSERT_EQUAL(agg_policy_applied(p, "web", "c2", 675, 104500000000ll), 0);
	/* in force from 105.2 s: window 106 is the first it governs throughout */
	CU_ASSERT_EQUAL(agg_policy_applied(p, "db1", "c2", 675, 105200000000ll), 1);
	CU_ASSERT_EQUAL(agg_policy_applied(p, "db1", "c2", 675, 105200000000ll), 0); /* a renewal */
	CU_ASSERT_EQUAL(feed(p, "db1", 105, &over, d, 4, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(feed(p, "db1", 106, &over, d, 4, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(d[0].cap_permille, 608);
	/* never reported: judged again AGG_POLICY_APPLY_WAIT windows after */
	for (w = 107; w < 106 + 1 + AGG_POLICY_APPLY_WAIT; w++) {
		CU_ASSERT_EQUAL(feed(p, "db1", w, &over, d, 4, &n), RM_OK);
		CU_ASSERT_EQUAL(n, 0);
	}
	CU_ASSERT_EQUAL(feed(p, "db1", w, &over, d, 4, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(d[0].cap_permille, 547);
	agg_policy_close(p);
}

/* Overload that no CE explains (other work on the host) throttles nobody. */
static void test_overload_min_share(void)
{
	struct agg_policy_cfg cfg;
	struct agg_policy *p;
	struct agg_policy_decision d[4];
	static const struct row r1 = { 1000, 10, 40, 20 }, r2 = { 1000, 10, 60, 20 };
	size_t n;

	agg_policy_cfg_default(&cfg);
	cfg.overload = 1;
	CU_ASSERT_EQUAL(cfg.min_share_permille, 50);
	CU_ASSERT_EQUAL_FATAL(agg_policy_open(&p, &cfg), RM_OK);
	CU_ASSERT_EQUAL(feed(p, "s", 1, &r1, d, 4, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);   /* top consumer c2 at 4.0% < 5% */
	CU_ASSERT_EQUAL(feed(p, "s", 2, &r2, d, 4, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(d[0].cap_permille, 54);   /* x0.9 of 6.0% */
	agg_policy_close(p);
}

/* Still overloaded while the cap binds: decrease again; floor at min_cap. */
static void test_overload_again_and_floor(void)
{
	struct agg_policy_cfg cfg;
	struct agg_policy *p;
	struct agg_policy_decision d[4];
	static const struct row rows[] = {
		{ 1000, 0, 900, 0 },   /* s = 1000: c2 at 450 */
		{ 1000, 0, 440, 0 },   /* binds (440 >= 405): 225 */
		{ 1000, 0, 100, 0 },   /* does not bind (100 < 202.5): kept */
		{ 1000, 0, 225, 0 },   /* binds: 112.5 -> 113 */
		{ 1000, 0, 113, 0 },   /* 56.5 -> 57 (from the effective cap, rounded) */
		{ 1000, 0, 56, 0 },    /* 28.5 -> 29 */
		{ 1000, 0, 28, 0 },    /* 14.5 -> 15 */
		{ 1000, 0, 14, 0 },    /* 7.5 -> floor 10 */
	};
	static const uint32_t want[] = { 450, 225, 225, 113, 57, 29, 15, 10 };
	size_t n, i;

	agg_policy_cfg_default(&cfg);
	cfg.overload = 1;
	cfg.md = 0.5;
	cfg.hold = 0;                 /* judge every window */
	cfg.min_share_permille = 0;   /* follow it down to the floor */
	CU_ASSERT_EQUAL_FATAL(agg_policy_open(&p, &cfg), RM_OK);
	for (i = 0; i < 8; i++) {
		CU_ASSERT_EQUAL(feed(p, "s", i + 1, &rows[i], d, 4, &n), RM_OK);
		CU_ASSERT_EQUAL(agg_policy_cap_of(p, "s", "c2"), want[i]);
	}
	agg_policy_close(p);
}

static void test_both_rules(void)
{
	struct agg_policy_cap cap = { "c2", "db1", 300 };
	struct agg_policy_cfg cfg;
	struct agg_policy *p;
	struct agg_policy_decision d[4];
	static const struct row r1 = { 950, 50, 800, 100 }, r2 = { 900, 50, 300, 100 };
	size_t n;

	agg_policy_cfg_default(&cfg);
	cfg.overload = 1;
	cfg.md = 0.5;
	cfg.hold = 0;
	cfg.caps = &cap;
	cfg.ncaps = 1;
	CU_ASSERT_EQUAL_FATAL(agg_policy_open(&p, &cfg), RM_OK);
	/* cap 300 and overload 400: the lower one */
	CU_ASSERT_EQUAL(feed(p, "db1", 1, &r1, d, 4, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(d[0].cap_permille, 300);
	/* s = 915, still overloaded and the effective cap binds: 0.5 x 300 */
	CU_ASSERT_EQUAL(feed(p, "db1", 2, &r2, d, 4, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(d[0].cap_permille, 150);
	CU_ASSERT_EQUAL(d[0].rule, AGG_RULE_OVERLOAD);
	/* too little room for the decisions */
	{
		static const struct row r3 = { 990, 300, 200, 300 };
		struct agg_policy_cap caps[2] = { { "c1", "x", 100 }, { "c3", "x", 100 } };

		agg_policy_close(p);
		cfg.caps = caps;
		cfg.ncaps = 2;
		CU_ASSERT_EQUAL_FATAL(agg_policy_open(&p, &cfg), RM_OK);
		CU_ASSERT_EQUAL(feed(p, "x", 1, &r3, d, 1, &n), RM_EFULL);
		CU_ASSERT_EQUAL(n, 1);
		CU_ASSERT_EQUAL(agg_policy_cap_of(p, "x", "c3"), 100);
	}
	agg_policy_close(p);
}

static void test_refused(void)
{
	struct agg_policy_cap cap = { "c2", "db1", 0 };
	struct agg_policy_cfg cfg;
	struct agg_policy *p = NULL;
	struct agg_policy_obs o = { 1, 0, 0, NULL, 0, 0 };
	size_t n;

	agg_policy_cfg_default(&cfg);
	cfg.caps = &cap;
	cfg.ncaps = 1;
	CU_ASSERT_EQUAL(agg_policy_open(&p, &cfg), RM_EINVAL);
	cap.cap_permille = 1001;
	CU_ASSERT_EQUAL(agg_policy_open(&p, &cfg), RM_EINVAL);
	cap.cap_permille = 100;
	cfg.alpha = 0;
	CU_ASSERT_EQUAL(agg_policy_open(&p, &cfg), RM_EINVAL);
	cfg.alpha = 0.7;
	cfg.md = 1;
	CU_ASSERT_EQUAL(agg_policy_open(&p, &cfg), RM_EINVAL);
	cfg.md = 0.5;
	cfg.hold = 101;
	CU_ASSERT_EQUAL(agg_policy_open(&p, &cfg), RM_EINVAL);
	cfg.hold = 2;
	cfg.threshold_permille = 0;
	CU_ASSERT_EQUAL(agg_policy_open(&p, &cfg), RM_EINVAL);
	cfg.threshold_permille = 850;
	CU_ASSERT_PTR_NULL(p);
	CU_ASSERT_EQUAL_FATAL(agg_policy_open(&p, &cfg), RM_OK);
	CU_ASSERT_EQUAL(agg_policy_window(p, "db1", &o, NULL, 0, &n), RM_EINVAL); /* capacity 0 */
	agg_policy_close(p);
}

static CU_TestInfo cases[] = {
	{ "a configured cap throttles above it and releases once not pressed", test_cap_rule },
	{ "overload: EWMA, top consumer, x0.9 / +1% while it binds, held, released", test_overload_rule },
	{ "overload: the hold ends when the collector applied the cap", test_overload_wait_applied },
	{ "overload: decrease again while the cap binds, floor at min_cap", test_overload_again_and_floor },
	{ "overload: a top consumer below min_share is left alone", test_overload_min_share },
	{ "both rules on one CE take the lower cap; too many decisions", test_both_rules },
	{ "bad configurations and windows are refused", test_refused },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_policy", cases)
