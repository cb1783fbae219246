/*
 * rm_date_test.c - tests of the calendar day counts: known dates (the
 * epoch, leap days, centuries, before 1970) and a round trip over every
 * day of 1600..2400.
 */
#include <stdint.h>

#include "rm_date.h"
#include "rm_test.h"
#include "banned.h"

static void test_known_dates(void)
{
	static const struct {
		int64_t y;
		unsigned m, d;
		int64_t days;
	} k[] = {
		{ 1970, 1, 1, 0 },      { 1969, 12, 31, -1 },   { 2000, 2, 29, 11016 },
		{ 2000, 3, 1, 11017 },  { 1900, 3, 1, -25508 }, { 2026, 11, 1, 20758 },
		{ 2024, 2, 29, 19782 }, { 1600, 1, 1, -135140 },
	};
	size_t i;

	for (i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		int64_t y;
		unsigned m, d;

		CU_ASSERT_EQUAL(rm_days_from_civil(k[i].y, k[i].m, k[i].d), k[i].days);
		rm_civil_from_days(k[i].days, &y, &m, &d);
		CU_ASSERT(y == k[i].y && m == k[i].m && d == k[i].d);
	}
}

static void test_round_trip(void)
{
	int64_t z, y, py = 0;
	unsigned m, d, pm = 0, pd = 0;
	int bad = 0;

	for (z = rm_days_from_civil(1600, 1, 1); z < rm_days_from_civil(2400, 1, 1); z++) {
		rm_civil_from_days(z, &y, &m, &d);
		bad += rm_days_from_civil(y, m, d) != z;
		/* the next day of the previous one */
		if (pm)
			bad += !((y == py && m == pm && d == pd + 1) || (y == py && m == pm + 1 && d == 1) ||
				 (y == py + 1 && m == 1 && d == 1 && pm == 12));
		py = y;
		pm = m;
		pd = d;
	}
	CU_ASSERT_EQUAL(bad, 0);
}

static CU_TestInfo cases[] = {
	{ "known dates", test_known_dates },
	{ "round trip, day after day", test_round_trip },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("rm_date", cases)
