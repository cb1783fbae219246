/*
 * rm_dur_test.c - tests of the duration grammar: every spelling the
 * aggregator's configuration, the collector's options and rametrctl
 * accepted before they shared it, fractions, bare seconds, overflow at the
 * 64-bit edge, and malformed input.
 */
#include <stdint.h>

#include "rm_dur.h"
#include "rm_err.h"
#include "rm_test.h"
#include "banned.h"

#define US 1000ull
#define MS 1000000ull
#define S 1000000000ull

struct dur_case {
	const char *in;
	unsigned flags;
	uint64_t ns; /* expected value when accepted */
};

static void check_ok(const struct dur_case *c, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		uint64_t v = 42;
		const char *why = "unset";
		int rv = rm_dur_parse(c[i].in, c[i].flags, &v, &why);

		if (rv != RM_OK || v != c[i].ns)
			fprintf(stderr, "'%s' (flags %u): rv %d, %llu ns, %s\n", c[i].in, c[i].flags, rv,
				(unsigned long long)v, why ? why : "");
		CU_ASSERT_EQUAL(rv, RM_OK);
		CU_ASSERT_EQUAL(v, c[i].ns);
		CU_ASSERT_PTR_NULL(why);
	}
}

static void check_bad(const struct dur_case *c, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		uint64_t v = 42;
		const char *why = NULL;
		int rv = rm_dur_parse(c[i].in, c[i].flags, &v, &why);

		if (rv != RM_EINVAL)
			fprintf(stderr, "'%s' (flags %u) accepted as %llu ns\n", c[i].in, c[i].flags,
				(unsigned long long)v);
		CU_ASSERT_EQUAL(rv, RM_EINVAL);
		CU_ASSERT_EQUAL(v, 42); /* untouched */
		CU_ASSERT_PTR_NOT_NULL_FATAL(why);
		CU_ASSERT(why[0] >= 'a' && why[0] <= 'z');
	}
}

/* What agg_config.c's horizon/lease/settle/kalman_q took: integer, unit
 * required, blanks allowed before it. */
static void test_config_spellings(void)
{
	static const struct dur_case ok[] = {
		{ "10s", 0, 10 * S },       { "1ms", 0, MS },         { "1h", 0, 3600 * S },
		{ "200us", 0, 200 * US },   { "7ns", 0, 7 },          { "2m", 0, 120 * S },
		{ "10 s", 0, 10 * S },      { "10\tms", 0, 10 * MS }, { "0s", 0, 0 },
		{ "3600000000000ns", 0, 3600 * S },
	};
	static const struct dur_case bad[] = {
		{ "5", 0, 0 }, /* kalman_q = 5: no unit */
		{ "", 0, 0 },   { "s", 0, 0 },   { "10x", 0, 0 }, { "10 ", 0, 0 }, { " 10s", 0, 0 },
		{ "10s ", 0, 0 }, { "-1s", 0, 0 }, { "+1s", 0, 0 }, { "10sec", 0, 0 }, { "1e3ms", 0, 0 },
		{ "10S", 0, 0 },  { "0x10s", 0, 0 }, { "1.s", 0, 0 }, { ".5s", 0, 0 }, { "1..5s", 0, 0 },
	};

	check_ok(ok, sizeof(ok) / sizeof(ok[0]));
	check_bad(bad, sizeof(bad) / sizeof(bad[0]));
}

/* What col_main.c's --window/--duration took: "250ms", "1s", "2m", "1h",
 * "100us", decimals, and plain seconds. */
static void test_collector_spellings(void)
{
	static const struct dur_case ok[] = {
		{ "250ms", RM_DUR_BARE_SECONDS, 250 * MS }, { "1s", RM_DUR_BARE_SECONDS, S },
		{ "2m", RM_DUR_BARE_SECONDS, 120 * S },    { "1h", RM_DUR_BARE_SECONDS, 3600 * S },
		{ "100us", RM_DUR_BARE_SECONDS, 100 * US }, { "5", RM_DUR_BARE_SECONDS, 5 * S },
		{ "0.25", RM_DUR_BARE_SECONDS, 250 * MS }, { "1.5s", RM_DUR_BARE_SECONDS, 1500 * MS },
		{ "0.5ms", RM_DUR_BARE_SECONDS, 500 * US }, { "2.5m", RM_DUR_BARE_SECONDS, 150 * S },
		{ "1.5", RM_DUR_BARE_SECONDS, 1500 * MS },
	};
	static const struct dur_case bad[] = {
		{ "5 ", RM_DUR_BARE_SECONDS, 0 }, { "abc", RM_DUR_BARE_SECONDS, 0 },
		{ "5q", RM_DUR_BARE_SECONDS, 0 }, { ".", RM_DUR_BARE_SECONDS, 0 },
		{ "-5", RM_DUR_BARE_SECONDS, 0 },
	};

	check_ok(ok, sizeof(ok) / sizeof(ok[0]));
	check_bad(bad, sizeof(bad) / sizeof(bad[0]));
}

/* What ctl_time.c's relative times took: <digits>{s,m,h,d}. */
static void test_ctl_spellings(void)
{
	static const struct dur_case ok[] = {
		{ "30s", 0, 30 * S }, { "10m", 0, 600 * S }, { "2h", 0, 7200 * S }, { "7d", 0, 7 * 86400 * S },
		{ "30d", 0, 30 * 86400 * S },
	};
	static const struct dur_case bad[] = { { "10w", 0, 0 }, { "7D", 0, 0 } };

	check_ok(ok, sizeof(ok) / sizeof(ok[0]));
	check_bad(bad, sizeof(bad) / sizeof(bad[0]));
}

/* A fraction is exact to the ns and truncated past it. */
static void test_fractions(void)
{
	static const struct dur_case ok[] = {
		{ "0.000000001s", 0, 1 },
		{ "0.0000000019s", 0, 1 },           /* truncated, not rounded */
		{ "1.123456789123s", 0, 1123456789 },
		{ "0.5ns", 0, 0 },
		{ "1.5d", 0, 129600 * S },
		{ "0.1h", 0, 360 * S },
		{ "0.333333333333333333333333h", 0, 1199999999999 }, /* digits past 18 dropped */
		{ "1.000us", 0, US },
	};

	check_ok(ok, sizeof(ok) / sizeof(ok[0]));
}

/* The 64-bit edge: 18446744073709551615 ns is the largest value. */
static void test_overflow(void)
{
	static const struct dur_case ok[] = {
		{ "18446744073709551615ns", 0, UINT64_MAX },
		{ "18446744073.709551615s", 0, UINT64_MAX },
		{ "213503d", 0, 213503ull * 86400 * S },
	};
	static const struct dur_case bad[] = {
		{ "18446744073709551616ns", 0, 0 },
		{ "18446744073709551615us", 0, 0 },
		{ "18446744073.709551616s", 0, 0 },
		{ "213504d", 0, 0 },
		{ "99999999999999999999999999s", 0, 0 },
		{ "18446744074", RM_DUR_BARE_SECONDS, 0 },
	};

	check_ok(ok, sizeof(ok) / sizeof(ok[0]));
	check_bad(bad, sizeof(bad) / sizeof(bad[0]));
}

static void test_null(void)
{
	uint64_t v = 42;
	const char *why = NULL;

	CU_ASSERT_EQUAL(rm_dur_parse(NULL, 0, &v, &why), RM_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(why);
	CU_ASSERT_EQUAL(rm_dur_parse("5s", 0, NULL, NULL), RM_EINVAL);
	CU_ASSERT_EQUAL(rm_dur_parse("5s", 0, &v, NULL), RM_OK); /* why optional */
	CU_ASSERT_EQUAL(v, 5 * S);
}

static CU_TestInfo cases[] = {
	{ "configuration spellings", test_config_spellings },
	{ "collector option spellings", test_collector_spellings },
	{ "rametrctl relative spellings", test_ctl_spellings },
	{ "fractions exact to the ns", test_fractions },
	{ "overflow at 64 bits", test_overflow },
	{ "null arguments", test_null },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("rm_dur", cases)
