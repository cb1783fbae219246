/*
 * tb_compare_test.c - tests of tb-compare as a real process against a real
 * SQLite database written through the storage API (st_open, st_begin,
 * st_add_usage, st_add_total, st_commit) and truth files that match it,
 * that do not, and that name a CE Rametr never saw; plus its filters
 * (--server, --since/--until) and its argument checking.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rm_err.h"
#include "rm_test.h"
#include "st.h"
#include "tb_testutil.h"
#include "banned.h"

#define tbt_tmp(name) tbt_path(rm_test_tmpdir(), name)

#define T0 1700000000000000000ll /* window start, Unix ns */
#define WIN 10000000000ll        /* 10 s windows */
#define SEC 1000000000ull

static const char *tb_db;
static char tb_db_buf[512];

/*
 * Server s1: c1 1.0 s in window 0 and 0.5 s in window 1, c2 2.0 s in window
 * 0; U = 3.6 s (so V = 0.1 s). Server s2: c1 7 s, U = 7 s.
 */
static void tb_make_db(void)
{
	st_db *db = NULL;

	if (tb_db)
		return;
	snprintf(tb_db_buf, sizeof(tb_db_buf), "%s", tbt_tmp("rametr.db"));
	tb_db = tb_db_buf;
	CU_ASSERT_EQUAL_FATAL(st_open(&db, tb_db, 0), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_begin(db), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0, WIN, ST_R_CPU, "c1", 1 * SEC), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0 + WIN, WIN, ST_R_CPU, "c1", SEC / 2), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0, WIN, ST_R_CPU, "c2", 2 * SEC), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0, WIN, ST_R_CPU, 3 * SEC, 2 * WIN), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0 + WIN, WIN, ST_R_CPU, 6 * SEC / 10, 2 * WIN),
			RM_OK);
	/* Other resources must not leak into the cpu comparison. */
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0, WIN, ST_R_NET_RX, "c1", 999 * SEC), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0, WIN, ST_R_NET_RX, 999 * SEC, 0), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s2", T0, WIN, ST_R_CPU, "c1", 7 * SEC), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s2", T0, WIN, ST_R_CPU, 7 * SEC, 2 * WIN), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_commit(db), RM_OK);
	st_close(db);
}

static const char *tb_truth_file(const char *name, const char *rows)
{
	const char *path = tbt_tmp(name);
	FILE *f = fopen(path, "w");

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "ce,requests,cpu_ns,rx_bytes,tx_bytes\n%s", rows);
	fclose(f);
	return path;
}

/* Runs tb-compare with extra args (NULL-terminated); stdout into *out (malloc'd). */
static int tb_cmp(const char *truth, const char *db, char **out, const char *a1, const char *a2,
		  const char *a3, const char *a4)
{
	char *argv[] = { TB_COMPARE_BIN, "--truth", (char *)truth, "--db", (char *)db,
			 (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL };
	const char *opath = tbt_tmp("cmp.out");
	int rc = tbt_run(argv, opath, 30000);

	*out = tbt_slurp(opath);
	if (*out)
		fputs(*out, stderr);
	return rc;
}

static void test_matching_truth_passes(void)
{
	const char *truth;
	char *out = NULL;

	tb_make_db();
	/* c1: 1.5 s vs 1.51 s truth (-0.66%), c2: 2.0 s vs 1.98 s (+1.01%) */
	truth = tb_truth_file("match.csv", "c1,150,1510000000,100,200\nc2,200,1980000000,100,200\n");
	CU_ASSERT_EQUAL(tb_cmp(truth, tb_db, &out, "--server", "s1", NULL, NULL), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "CE"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "TRUTH_CPU_S"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "RAMETR_CPU_S"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "1.510000       1.500000"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "unaccountable V 0.100000 s"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "max error 1.010% (tolerance 2.000%)"));
	free(out);
}

static void test_mismatching_truth_fails(void)
{
	const char *truth;
	char *out = NULL;

	tb_make_db();
	/* c1 is off by 50%: fails; c2 fine. */
	truth = tb_truth_file("mismatch.csv", "c1,150,1000000000,1,1\nc2,200,2000000000,1,1\n");
	CU_ASSERT_EQUAL(tb_cmp(truth, tb_db, &out, "--server", "s1", NULL, NULL), 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "max error 50.000% (tolerance 2.000%)"));
	free(out);
	/* ... but a tolerance of 60% lets it pass. */
	CU_ASSERT_EQUAL(tb_cmp(truth, tb_db, &out, "--server", "s1", "--tolerance", "60"), 0);
	free(out);
	/* A CE Rametr never charged is -100% off. */
	truth = tb_truth_file("extra.csv", "c1,1,1500000000,1,1\nc2,1,2000000000,1,1\nc9,1,5,1,1\n");
	CU_ASSERT_EQUAL(tb_cmp(truth, tb_db, &out, "--server", "s1", NULL, NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "max error 100.000%"));
	free(out);
	/* An empty truth file compares nothing and is not a pass. */
	truth = tb_truth_file("empty.csv", "");
	CU_ASSERT_EQUAL(tb_cmp(truth, tb_db, &out, "--server", "s1", NULL, NULL), 1);
	free(out);
}

static void test_filters(void)
{
	const char *truth;
	char *out = NULL;
	char since[32], until[32];

	tb_make_db();
	/* Without --server, s2's 7 s of c1 is added: c1 = 8.5 s. */
	truth = tb_truth_file("all.csv", "c1,1,8500000000,1,1\nc2,1,2000000000,1,1\n");
	CU_ASSERT_EQUAL(tb_cmp(truth, tb_db, &out, NULL, NULL, NULL, NULL), 0);
	free(out);
	CU_ASSERT_EQUAL(tb_cmp(truth, tb_db, &out, "--server", "s1", NULL, NULL), 1);
	free(out);
	/* Only window 0 of s1: c1 = 1.0 s. */
	snprintf(since, sizeof(since), "%lld", (long long)(T0 / 1000000000ll));
	snprintf(until, sizeof(until), "%lld", (long long)((T0 + WIN) / 1000000000ll));
	truth = tb_truth_file("w0.csv", "c1,1,1000000000,1,1\nc2,1,2000000000,1,1\n");
	{
		char *argv[] = { TB_COMPARE_BIN, "--truth", (char *)truth, "--db", (char *)tb_db,
				 "--server", "s1", "--since", since, "--until", until, NULL };

		CU_ASSERT_EQUAL(tbt_run(argv, tbt_tmp("w0.out"), 30000), 0);
	}
	/* Only window 1: c2 has nothing there. */
	{
		char *argv[] = { TB_COMPARE_BIN, "--truth", (char *)truth, "--db", (char *)tb_db,
				 "--server", "s1", "--since", until, NULL };

		CU_ASSERT_EQUAL(tbt_run(argv, tbt_tmp("w1.out"), 30000), 1);
	}
}

static void test_bad_arguments(void)
{
	const char *truth;
	char *out = NULL;

	tb_make_db();
	truth = tb_truth_file("ok.csv", "c1,1,1500000000,1,1\n");
	CU_ASSERT_EQUAL(tb_cmp(truth, tb_db, &out, "--bogus", NULL, NULL, NULL), 2);
	free(out);
	CU_ASSERT_EQUAL(tb_cmp(truth, tb_db, &out, "--tolerance", "x", NULL, NULL), 2);
	free(out);
	CU_ASSERT_EQUAL(tb_cmp(truth, tb_db, &out, "--tolerance", "-1", NULL, NULL), 2);
	free(out);
	CU_ASSERT_EQUAL(tb_cmp(truth, tb_db, &out, "--since", "yesterday", NULL, NULL), 2);
	free(out);
	CU_ASSERT_EQUAL(tb_cmp(truth, tb_db, &out, "--since", "200", "--until", "100"), 2);
	free(out);
	CU_ASSERT_EQUAL(tb_cmp(truth, tb_db, &out, "stray", NULL, NULL, NULL), 2);
	free(out);
	CU_ASSERT_EQUAL(tb_cmp(truth, tbt_tmp("nonexistent.db"), &out, NULL, NULL, NULL, NULL), 2);
	free(out);
	CU_ASSERT_EQUAL(tb_cmp(tbt_tmp("nonexistent.csv"), tb_db, &out, NULL, NULL, NULL, NULL), 2);
	free(out);
	truth = tb_truth_file("garbage.csv", "c1,one,two\n");
	CU_ASSERT_EQUAL(tb_cmp(truth, tb_db, &out, NULL, NULL, NULL, NULL), 2);
	free(out);
	{
		char *argv[] = { TB_COMPARE_BIN, "--db", (char *)tb_db, NULL };
		char *help[] = { TB_COMPARE_BIN, "--help", NULL };

		CU_ASSERT_EQUAL(tbt_run(argv, tbt_tmp("x.out"), 30000), 2);
		CU_ASSERT_EQUAL(tbt_run(help, tbt_tmp("help.out"), 30000), 0);
		out = tbt_slurp(tbt_tmp("help.out"));
		CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "usage: tb-compare"));
		free(out);
	}
}

static CU_TestInfo cases[] = {
	{ "matching truth passes", test_matching_truth_passes },
	{ "mismatching truth fails", test_mismatching_truth_fails },
	{ "server and time filters select the usage", test_filters },
	{ "bad arguments and inputs exit 2", test_bad_arguments },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("tb_compare", cases)
