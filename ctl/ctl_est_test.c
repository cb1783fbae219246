/*
 * ctl_est_test.c - `rametrctl usage --source lr|kalman`: the real binary on
 * a real SQLite file holding measurements and estimates of the same
 * windows. Estimates come out in exactly the measured columns (the CSV
 * header is the contract the testbed parses), labelled in the table and in
 * JSON, never mixed with the measured rows; bad sources and non-cpu
 * resources are refused with exit code 2.
 */
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rm_err.h"
#include "rm_test.h"
#include "st.h"
#include "st_est.h"
#include "banned.h"

#define SEC 1000000000LL
#define W SEC
#define T0 (1700000000LL * SEC)

static char out[1 << 16], err[1 << 14];

static void slurp(FILE *f, char *buf, size_t len)
{
	size_t n = fread(buf, 1, len - 1, f);

	buf[n] = '\0';
}

/* Runs "rametrctl args"; stdout into out, stderr into err; the exit status. */
static int run(const char *args)
{
	const char *e = getenv("RAMETRCTL");
	char cmd[2048], errpath[512];
	FILE *p, *ef;
	int st;

	snprintf(errpath, sizeof(errpath), "%s/stderr.txt", rm_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "'%s' %s 2>'%s'", e && e[0] ? e : RAMETRCTL_PATH, args, errpath);
	p = popen(cmd, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	slurp(p, out, sizeof(out));
	st = pclose(p);
	ef = fopen(errpath, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(ef);
	slurp(ef, err, sizeof(err));
	fclose(ef);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * s1, two 1 s windows: measured c1 = 0.6 s / 0.2 s, c2 = 0.3 s / 0.7 s of
 * U = 1.0 s / 1.0 s. LR estimated both (c1 0.5/0.25, c2 0.5/0.75), Kalman
 * only the second (c1 0.1, c2 0.8).
 */
static const char *fixture(void)
{
	static char path[512];
	const char *ces[] = { "c1", "c2" };
	st_db *db;

	if (path[0])
		return path;
	snprintf(path, sizeof(path), "%s/est.db", rm_test_tmpdir());
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0, W, ST_R_CPU, "c1", 600000000), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0, W, ST_R_CPU, "c2", 300000000), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0 + W, W, ST_R_CPU, "c1", 200000000), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0 + W, W, ST_R_CPU, "c2", 700000000), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0, W, ST_R_CPU, 1000000000, 2 * W), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0 + W, W, ST_R_CPU, 1000000000, 2 * W), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0, W, ST_R_NET_RX, "c1", 4096), RM_OK);
	CU_ASSERT_EQUAL(st_est_put(db, "s1", ST_EST_LR, T0, W, 1, ces, (uint64_t[]){ 500000000, 500000000 }, 2),
			RM_OK);
	CU_ASSERT_EQUAL(st_est_put(db, "s1", ST_EST_LR, T0 + W, W, 1, ces,
				   (uint64_t[]){ 250000000, 750000000 }, 2),
			RM_OK);
	CU_ASSERT_EQUAL(st_est_put(db, "s1", ST_EST_KALMAN, T0, W, 0, NULL, NULL, 0), RM_OK);
	CU_ASSERT_EQUAL(st_est_put(db, "s1", ST_EST_KALMAN, T0 + W, W, 1, ces,
				   (uint64_t[]){ 100000000, 800000000 }, 2),
			RM_OK);
	st_close(db);
	return path;
}

#define HDR "server,ce,resource,value,total,unit,window_start,window_len\n"

static void test_csv_contract(void)
{
	char args[1024], expect[2048];

	/* measured and estimated: the same header, their own values */
	snprintf(args, sizeof(args), "usage --db '%s' --server s1 --resource cpu --per-window -o csv", fixture());
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	CU_ASSERT_EQUAL(strncmp(out, HDR, strlen(HDR)), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "s1,c1,cpu,600000000,1000000000,ns,1700000000000000000,1000000000\n"));

	snprintf(args, sizeof(args),
		 "usage --db '%s' --server s1 --resource cpu --per-window -o csv --source lr", fixture());
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	snprintf(expect, sizeof(expect),
		 HDR "s1,c1,cpu,500000000,1000000000,ns,1700000000000000000,1000000000\n"
		     "s1,c2,cpu,500000000,1000000000,ns,1700000000000000000,1000000000\n"
		     "s1,__unaccountable__,cpu,0,1000000000,ns,1700000000000000000,1000000000\n"
		     "s1,c2,cpu,750000000,1000000000,ns,1700000001000000000,1000000000\n"
		     "s1,c1,cpu,250000000,1000000000,ns,1700000001000000000,1000000000\n"
		     "s1,__unaccountable__,cpu,0,1000000000,ns,1700000001000000000,1000000000\n");
	CU_ASSERT_STRING_EQUAL(out, expect);

	/* Kalman: only the window it solved; its estimates need not add up to U */
	snprintf(args, sizeof(args), "usage --db '%s' -o csv --source kalman --no-unaccountable", fixture());
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	snprintf(expect, sizeof(expect),
		 "server,ce,resource,value,total,unit\n"
		 "s1,c2,cpu,800000000,1000000000,ns\n"
		 "s1,c1,cpu,100000000,1000000000,ns\n");
	CU_ASSERT_STRING_EQUAL(out, expect);
	/* --source measured is the default */
	snprintf(args, sizeof(args), "usage --db '%s' -o csv --source measured --resource cpu --ce c1", fixture());
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "s1,c1,cpu,800000000,2000000000,ns\n"));
}

static void test_labelled(void)
{
	char args[1024];

	snprintf(args, sizeof(args), "usage --db '%s' --source kalman", fixture());
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	CU_ASSERT_EQUAL(strncmp(out, "ESTIMATES by kalman", 19), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "SERVER"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "800.00 core-ms"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "80.00%"));
	CU_ASSERT_PTR_NULL(strstr(out, "net_rx"));
	/* the measured table carries no label */
	snprintf(args, sizeof(args), "usage --db '%s'", fixture());
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	CU_ASSERT_PTR_NULL(strstr(out, "ESTIMATES"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "net_rx"));
	/* JSON: a "source" field on every estimate */
	snprintf(args, sizeof(args), "usage --db '%s' -o json --source lr --ce c2", fixture());
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"ce\": \"c2\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"value\": 1250000000"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"source\": \"lr\""));
	snprintf(args, sizeof(args), "usage --db '%s' -o json", fixture());
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	CU_ASSERT_PTR_NULL(strstr(out, "\"source\""));
	/* nothing estimated in the range */
	snprintf(args, sizeof(args), "usage --db '%s' --source lr --until 1600000000", fixture());
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "no estimates stored"));
}

static void test_refused(void)
{
	char args[1024];

	snprintf(args, sizeof(args), "usage --db '%s' --source svm", fixture());
	CU_ASSERT_EQUAL(run(args), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown source 'svm'"));
	snprintf(args, sizeof(args), "usage --db '%s' --source lr --resource net_rx", fixture());
	CU_ASSERT_EQUAL(run(args), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "cpu only"));
	snprintf(args, sizeof(args), "unaccountable --db '%s' --source lr", fixture());
	CU_ASSERT_EQUAL(run(args), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "does not apply"));
	snprintf(args, sizeof(args), "usage --help");
	CU_ASSERT_EQUAL(run(args), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "--source"));
}

static CU_TestInfo cases[] = {
	{ "estimates in the measured CSV columns", test_csv_contract },
	{ "estimates labelled in table and json", test_labelled },
	{ "bad sources refused", test_refused },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("ctl_est", cases)
