/*
 * rm_clock_test.c - the clock reads: Unix ns agree with time(2), monotonic
 * ns never go back and advance across a sleep.
 */
#include <time.h>
#include <unistd.h>

#include "rm_clock.h"
#include "rm_test.h"
#include "banned.h"

static void test_unix(void)
{
	time_t before = time(NULL);
	int64_t ns = rm_clock_unix_ns();
	time_t after = time(NULL);

	CU_ASSERT(ns / 1000000000ll >= (int64_t)before);
	CU_ASSERT(ns / 1000000000ll <= (int64_t)after);
}

static void test_mono(void)
{
	uint64_t a = rm_clock_mono_ns(), b, c;
	int i;

	for (i = 0, b = a; i < 1000; i++) {
		c = rm_clock_mono_ns();
		CU_ASSERT(c >= b);
		b = c;
	}
	usleep(20000);
	c = rm_clock_mono_ns();
	CU_ASSERT(c - a >= 20000000ull);
}

static CU_TestInfo cases[] = {
	{ "unix ns agree with time(2)", test_unix },
	{ "monotonic ns never go back", test_mono },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("rm_clock", cases)
