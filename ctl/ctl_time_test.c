/*
 * ctl_time_test.c - tests of rametrctl's time parsing and formatting:
 * every accepted form, offsets and fractions, range limits, malformed
 * input, and a calendar cross-check against libc's timegm().
 */
#include <stdint.h>
#include <time.h>

#include "ctl_time.h"
#include "rm_err.h"
#include "rm_test.h"
#include "banned.h"

#define NS 1000000000LL
#define NOW (1700000000LL * NS + 123456789LL)

static int64_t parse_ok(const char *s)
{
	int64_t v = -1;
	const char *why = NULL;
	int rv = ctl_time_parse(s, NOW, &v, &why);

	if (rv != RM_OK)
		fprintf(stderr, "'%s' refused: %s\n", s, why ? why : "?");
	CU_ASSERT_EQUAL(rv, RM_OK);
	CU_ASSERT_PTR_NULL(why);
	return v;
}

static void parse_bad(const char *s)
{
	int64_t v = 42;
	const char *why = NULL;

	CU_ASSERT_EQUAL(ctl_time_parse(s, NOW, &v, &why), RM_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(why);
	CU_ASSERT_EQUAL(v, 42); /* untouched */
	if (why)
		CU_ASSERT(why[0] >= 'a' && why[0] <= 'z');
}

/* Unix seconds of a UTC civil time according to libc. */
static int64_t libc_secs(int y, int mo, int d, int h, int mi, int s)
{
	struct tm tm = { .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d,
			 .tm_hour = h, .tm_min = mi, .tm_sec = s };

	return (int64_t)timegm(&tm);
}

static void test_now_and_relative(void)
{
	CU_ASSERT_EQUAL(parse_ok("now"), NOW);
	CU_ASSERT_EQUAL(parse_ok("30s"), NOW - 30 * NS);
	CU_ASSERT_EQUAL(parse_ok("10m"), NOW - 10 * 60 * NS);
	CU_ASSERT_EQUAL(parse_ok("2h"), NOW - 2 * 3600 * NS);
	CU_ASSERT_EQUAL(parse_ok("7d"), NOW - 7 * 86400 * NS);
	CU_ASSERT_EQUAL(parse_ok("0s"), NOW);
	/* the shared duration grammar (rm_dur.h): its other units and fractions too */
	CU_ASSERT_EQUAL(parse_ok("10ms"), NOW - 10000000LL);
	CU_ASSERT_EQUAL(parse_ok("1.5h"), NOW - 5400 * NS);
	CU_ASSERT_EQUAL(parse_ok("5 m"), NOW - 5 * 60 * NS);
	parse_bad("10w");
	parse_bad("-5m");
	parse_bad("m");
	parse_bad("5m ");
	parse_bad("99999999999999999999d");
	parse_bad("200000d"); /* now - 547 years: before 1678 */
}

static void test_unix_seconds(void)
{
	CU_ASSERT_EQUAL(parse_ok("0"), 0);
	CU_ASSERT_EQUAL(parse_ok("1700000000"), 1700000000LL * NS);
	CU_ASSERT_EQUAL(parse_ok("9223372036"), 9223372036LL * NS);
	parse_bad("9223372037");
	parse_bad("1700000000.5");
	parse_bad("-1");
	parse_bad("17e8");
}

static void test_rfc3339(void)
{
	int64_t base = libc_secs(2023, 11, 14, 22, 13, 20) * NS;

	CU_ASSERT_EQUAL(parse_ok("1970-01-01T00:00:00Z"), 0);
	CU_ASSERT_EQUAL(parse_ok("2023-11-14T22:13:20Z"), base);
	CU_ASSERT_EQUAL(parse_ok("2023-11-14t22:13:20z"), base);
	CU_ASSERT_EQUAL(parse_ok("2023-11-14 22:13:20Z"), base);
	CU_ASSERT_EQUAL(parse_ok("2023-11-15T00:13:20+02:00"), base);
	CU_ASSERT_EQUAL(parse_ok("2023-11-14T17:43:20-04:30"), base);
	CU_ASSERT_EQUAL(parse_ok("2023-11-14T22:13:20+00:00"), base);
	CU_ASSERT_EQUAL(parse_ok("2023-11-14T22:13:20.5Z"), base + NS / 2);
	CU_ASSERT_EQUAL(parse_ok("2023-11-14T22:13:20.000000001Z"), base + 1);
	CU_ASSERT_EQUAL(parse_ok("2023-11-14T22:13:20.1234567891234Z"), base + 123456789);
	CU_ASSERT_EQUAL(parse_ok("1969-12-31T23:59:59.5Z"), -NS / 2);
	CU_ASSERT_EQUAL(parse_ok("2024-02-29T00:00:00Z"), libc_secs(2024, 2, 29, 0, 0, 0) * NS);
	CU_ASSERT_EQUAL(parse_ok("2000-02-29T12:00:00Z"), libc_secs(2000, 2, 29, 12, 0, 0) * NS);
	CU_ASSERT_EQUAL(parse_ok("2262-04-11T23:47:16Z"), 9223372036LL * NS);
	CU_ASSERT_EQUAL(parse_ok("1678-01-01T00:00:00Z"), libc_secs(1678, 1, 1, 0, 0, 0) * NS);
}

static void test_rfc3339_errors(void)
{
	parse_bad("2023-11-14");
	parse_bad("2023-11-14T22:13Z");
	parse_bad("2023-11-14T22:13:20");         /* no offset */
	parse_bad("2023-11-14T22:13:20+0200");
	parse_bad("2023-11-14T22:13:20+24:00");
	parse_bad("2023-11-14T22:13:20+02:60");
	parse_bad("2023-13-01T00:00:00Z");
	parse_bad("2023-00-01T00:00:00Z");
	parse_bad("2023-02-29T00:00:00Z");        /* not a leap year */
	parse_bad("1900-02-29T00:00:00Z");        /* not a leap year either */
	parse_bad("2023-04-31T00:00:00Z");
	parse_bad("2023-11-14T24:00:00Z");
	parse_bad("2023-11-14T22:60:00Z");
	parse_bad("2016-12-31T23:59:60Z");        /* leap second refused */
	parse_bad("2023-11-14T22:13:20.Z");
	parse_bad("2023-11-14T22:13:20Zjunk");
	parse_bad("2023-11-14X22:13:20Z");
	parse_bad("23-11-14T22:13:20Z");
	parse_bad("2263-01-01T00:00:00Z");        /* beyond int64 ns */
	parse_bad("1677-01-01T00:00:00Z");
	parse_bad("yesterday");
	parse_bad("");
	parse_bad(NULL);
}

static void test_calendar_against_libc(void)
{
	int y, m, d, checked = 0;
	char buf[64];

	/* Every 3rd day of a span of years covering leap rules, both signs. */
	for (y = 1899; y <= 2101; y += 7) {
		for (m = 1; m <= 12; m++) {
			for (d = 1; d <= 28; d += 3) {
				int64_t expect = libc_secs(y, m, d, d % 24, (d * 7) % 60, (d * 13) % 60) * NS;

				snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02dZ", y, m, d,
					 d % 24, (d * 7) % 60, (d * 13) % 60);
				CU_ASSERT_EQUAL(parse_ok(buf), expect);
				checked++;
			}
		}
	}
	CU_ASSERT(checked > 1000);
}

static void test_format_round_trip(void)
{
	int64_t vals[] = { 0, 1, -1, NOW, -NS / 2, 9223372036LL * NS, 951782400LL * NS,
			   libc_secs(1900, 3, 1, 0, 0, 0) * NS };
	char buf[64];
	size_t i;

	for (i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		ctl_time_format(vals[i], buf, sizeof(buf));
		CU_ASSERT_EQUAL(parse_ok(buf), vals[i]);
	}
	CU_ASSERT_STRING_EQUAL(ctl_time_format(0, buf, sizeof(buf)), "1970-01-01T00:00:00Z");
	ctl_time_format(NOW, buf, sizeof(buf));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, ".123456789Z"));
}

static int64_t at(const char *rfc)
{
	int64_t v = 0;

	CU_ASSERT_EQUAL(ctl_time_parse(rfc, 0, &v, NULL), RM_OK);
	return v;
}

static void test_periods_and_steps(void)
{
	int64_t now = at("2026-03-15T10:20:30Z"), a = 0, b = 0, st = 0;
	const char *why = NULL;

	CU_ASSERT_EQUAL(ctl_period_parse("today", now, &a, &b, &why), RM_OK);
	CU_ASSERT(a == at("2026-03-15T00:00:00Z") && b == at("2026-03-16T00:00:00Z"));
	CU_ASSERT_EQUAL(ctl_period_parse("yesterday", now, &a, &b, &why), RM_OK);
	CU_ASSERT(a == at("2026-03-14T00:00:00Z") && b == at("2026-03-15T00:00:00Z"));
	CU_ASSERT_EQUAL(ctl_period_parse("this-month", now, &a, &b, &why), RM_OK);
	CU_ASSERT(a == at("2026-03-01T00:00:00Z") && b == at("2026-04-01T00:00:00Z"));
	CU_ASSERT_EQUAL(ctl_period_parse("last-month", now, &a, &b, &why), RM_OK);
	CU_ASSERT(a == at("2026-02-01T00:00:00Z") && b == at("2026-03-01T00:00:00Z"));
	CU_ASSERT_EQUAL(ctl_period_parse("last-month", at("2026-01-31T23:59:59Z"), &a, &b, &why), RM_OK);
	CU_ASSERT(a == at("2025-12-01T00:00:00Z") && b == at("2026-01-01T00:00:00Z"));
	CU_ASSERT_EQUAL(ctl_period_parse("2026-12", now, &a, &b, &why), RM_OK);
	CU_ASSERT(a == at("2026-12-01T00:00:00Z") && b == at("2027-01-01T00:00:00Z"));
	CU_ASSERT_EQUAL(ctl_period_parse("2024-02-29", now, &a, &b, &why), RM_OK);
	CU_ASSERT(a == at("2024-02-29T00:00:00Z") && b == at("2024-03-01T00:00:00Z"));
	CU_ASSERT_EQUAL(ctl_period_parse("2023-02-29", now, &a, &b, &why), RM_EINVAL);
	CU_ASSERT_EQUAL(ctl_period_parse("2026-13", now, &a, &b, &why), RM_EINVAL);
	CU_ASSERT_EQUAL(ctl_period_parse("7d", now, &a, &b, &why), RM_ENOENT);
	CU_ASSERT_EQUAL(ctl_period_parse("2026-11-05T00:00:00Z", now, &a, &b, &why), RM_ENOENT);

	CU_ASSERT_EQUAL(ctl_step_parse("5m", &st, &why), RM_OK);
	CU_ASSERT_EQUAL(st, 300 * 1000000000LL);
	CU_ASSERT_EQUAL(ctl_step_parse("1d", &st, &why), RM_OK);
	CU_ASSERT_EQUAL(st, 86400 * 1000000000LL);
	CU_ASSERT_EQUAL(ctl_step_parse("7d", &st, &why), RM_OK);
	CU_ASSERT_EQUAL(ctl_step_parse("1500ms", &st, &why), RM_EINVAL);
	CU_ASSERT_EQUAL(ctl_step_parse("0m", &st, &why), RM_EINVAL);
	CU_ASSERT_EQUAL(ctl_step_parse("5", &st, &why), RM_EINVAL);
	CU_ASSERT_EQUAL(ctl_step_parse("5y", &st, &why), RM_EINVAL);
	CU_ASSERT_EQUAL(ctl_step_parse("99999d", &st, &why), RM_EINVAL);
}

static CU_TestInfo cases[] = {
	{ "calendar periods and steps", test_periods_and_steps },
	{ "now and relative durations", test_now_and_relative },
	{ "plain unix seconds", test_unix_seconds },
	{ "rfc3339 with offsets and fractions", test_rfc3339 },
	{ "rfc3339 errors", test_rfc3339_errors },
	{ "calendar agrees with timegm", test_calendar_against_libc },
	{ "format and parse round trip", test_format_round_trip },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("ctl_time", cases)
