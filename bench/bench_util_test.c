/*
 * bench_util_test.c - the benchmarks' /proc parsing on recorded lines and on
 * this process and a reaped child, and the order statistics on known data.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rm_test.h"
#include "bench_util.h"
#include "rm_err.h"

static void test_parse_stat(void)
{
	/* comm with a space and a ')' in it, as the kernel writes it */
	const char *line = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 120 0 0 0 "
			   "1234 567 0 0 20 0 3 0 100 1000 200 18446744073709551615\n";
	const char *plain = "17 (redis-server) R 1 17 17 0 -1 4194304 5 0 0 0 10 20 0 0 20 0 1 0 5 6 7";
	uint64_t t = 0;

	CU_ASSERT_EQUAL(bench_parse_stat(line, &t), RM_OK);
	CU_ASSERT_EQUAL(t, 1234 + 567);
	CU_ASSERT_EQUAL(bench_parse_stat(plain, &t), RM_OK);
	CU_ASSERT_EQUAL(t, 30);
	CU_ASSERT_EQUAL(bench_parse_stat("17 (x) R 1 2 3", &t), RM_EPROTO);          /* too short */
	CU_ASSERT_EQUAL(bench_parse_stat("17 x R 1 17 17 0 -1 4 5 0 0 0 10 20", &t), RM_EPROTO); /* no comm */
	CU_ASSERT_EQUAL(bench_parse_stat("17 (x) R 1 17 17 0 -1 4 5 0 0 0 1a 20 0", &t), RM_EPROTO);
	CU_ASSERT_EQUAL(bench_parse_stat("", &t), RM_EPROTO);
	CU_ASSERT_EQUAL(bench_parse_stat(NULL, &t), RM_EPROTO);
}

static void test_parse_status(void)
{
	const char *st = "Name:\tcat\nVmPeak:\t   8000 kB\nVmHWM:\t    1700 kB\nVmRSS:\t    1500 kB\nThreads:\t1\n";
	uint64_t h = 0, r = 0;

	CU_ASSERT_EQUAL(bench_parse_status(st, &h, &r), RM_OK);
	CU_ASSERT_EQUAL(h, 1700);
	CU_ASSERT_EQUAL(r, 1500);
	CU_ASSERT_EQUAL(bench_parse_status("Name:\tkthreadd\nThreads:\t1\n", &h, NULL), RM_EPROTO); /* kernel thread */
	CU_ASSERT_EQUAL(bench_parse_status("VmHWM:\t12 MB\n", &h, NULL), RM_EPROTO);
	CU_ASSERT_EQUAL(bench_parse_status("XVmHWM:\t12 kB\n", &h, NULL), RM_EPROTO);
}

static void test_proc_self_and_gone(void)
{
	struct bench_proc a, b;
	struct timespec t0, t1;
	volatile uint64_t x = 0;
	pid_t child;
	int status;

	CU_ASSERT_EQUAL_FATAL(bench_proc_read(getpid(), &a), RM_OK);
	CU_ASSERT(a.hwm_kb > 0 && a.rss_kb > 0 && a.hwm_kb >= a.rss_kb);
	/* burn 300 ms of CPU: the reading must grow by most of it (ticks are 10 ms) */
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	do {
		x += 1;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
	} while ((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec) < 300000000LL);
	CU_ASSERT_EQUAL_FATAL(bench_proc_read(getpid(), &b), RM_OK);
	CU_ASSERT(b.cpu_ns >= a.cpu_ns + 250000000ULL);
	CU_ASSERT(b.cpu_ns <= a.cpu_ns + 2000000000ULL);
	/* the process clock, exact: at least the 300 ms */
	CU_ASSERT(b.clock_ns >= a.clock_ns + 300000000ULL);
	CU_ASSERT(b.clock_ns <= a.clock_ns + 2000000000ULL);

	child = fork();
	CU_ASSERT_FATAL(child >= 0);
	if (child == 0)
		_exit(0);
	CU_ASSERT_EQUAL(waitpid(child, &status, 0), child);
	CU_ASSERT_EQUAL(bench_proc_read(child, &a), RM_ENOENT);
}

static void test_quantiles(void)
{
	double v[100], w[4] = { 4, 1, 3, 2 }, one[1] = { 7 };
	int i;

	for (i = 0; i < 100; i++)
		v[i] = 100 - i; /* 100 .. 1, unsorted */
	CU_ASSERT_DOUBLE_EQUAL(bench_quantile(v, 100, 0.99), 99, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(bench_quantile(v, 100, 0.5), 50, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(bench_quantile(v, 100, 0), 1, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(bench_quantile(v, 100, 1), 100, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(bench_quantile(v, 10, 0.99), 10, 1e-9); /* first 10 sorted: 1..10 */
	CU_ASSERT_DOUBLE_EQUAL(bench_median(w, 4), 2.5, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(bench_median(w, 3), 2, 1e-9);           /* 1 2 3 */
	CU_ASSERT_DOUBLE_EQUAL(bench_median(one, 1), 7, 1e-9);
	CU_ASSERT(isnan(bench_median(one, 0)));
	CU_ASSERT(isnan(bench_quantile(one, 0, 0.5)));
}

static void test_name_index(void)
{
	static const char *const names[3] = { "hooks", "clock", "full" };
	uint32_t i = 7;

	CU_ASSERT_EQUAL(bench_name_index("clock", names, 3, &i), 1);
	CU_ASSERT_EQUAL(i, 1);
	CU_ASSERT_EQUAL(bench_name_index("full", names, 3, &i), 1);
	CU_ASSERT_EQUAL(i, 2);
	CU_ASSERT_EQUAL(bench_name_index("ful", names, 3, &i), 0);
	CU_ASSERT_EQUAL(bench_name_index("", names, 3, &i), 0);
	CU_ASSERT_EQUAL(i, 2);
}

static CU_TestInfo cases[] = {
	{ "stat lines: utime+stime after the last ')', malformed refused", test_parse_stat },
	{ "status: VmHWM and VmRSS in kB, missing refused", test_parse_status },
	{ "this process's CPU grows by what it burns; a reaped child is gone", test_proc_self_and_gone },
	{ "nearest-rank quantiles and the median", test_quantiles },
	{ "a name's index, or none (out untouched)", test_name_index },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("bench_util", cases)
