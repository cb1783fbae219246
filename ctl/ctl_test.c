/*
 * ctl_test.c - tests of rametrctl: the value/share formatting against an
 * independent floating-point rendering, then the real rametrctl binary run
 * on databases built through st_*: table, JSON and CSV content, filters,
 * per-window rows, the unaccountable breakdown, split counts, check, and
 * exit codes 0/1/2.
 */
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl_out.h"
#include "ctl_time.h"
#include "ctl_usage.h"
#include "rm_err.h"
#include "rm_test.h"
#include "st.h"
#include "st_rollup.h"
#include "banned.h"

#define SEC 1000000000LL
#define W (10 * SEC)
#define T0 (1700000000LL * SEC)

/* The fixture: s1 cpu over two windows, s1 net_rx, s2 cpu. */
#define S1_WEB_0 1234567891ULL
#define S1_WEB_1 500000000ULL
#define S1_DB_0 300000001ULL
#define S1_TOT_0 2000000000ULL
#define S1_TOT_1 600000000ULL
#define S1_UNSEG_0 400000000ULL
#define S1_RX_WEB 4096ULL
#define S1_RX_TOT 5000ULL
#define S2_CACHE 10ULL
#define S1_SPLIT_0 3ULL
#define S1_SPLIT_1 4ULL

static char out[1 << 18], err[1 << 14];

static const char *binary(void)
{
	const char *e = getenv("RAMETRCTL");

	return e && e[0] ? e : RAMETRCTL_PATH;
}

static void slurp(FILE *f, char *buf, size_t len)
{
	size_t n = fread(buf, 1, len - 1, f);

	buf[n] = '\0';
}

/* Runs "[env] rametrctl args" through sh; stdout into out, stderr into
 * err. Returns the exit status (or -1 if it did not exit normally). */
static int run(const char *env, const char *args)
{
	char cmd[2048], errpath[512];
	FILE *p, *e;
	int st;

	snprintf(errpath, sizeof(errpath), "%s/stderr.txt", rm_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s '%s' %s 2>'%s'", env ? env : "", binary(), args, errpath);
	p = popen(cmd, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	slurp(p, out, sizeof(out));
	st = pclose(p);
	e = fopen(errpath, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	slurp(e, err, sizeof(err));
	fclose(e);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *fixture(void)
{
	static char path[512];
	st_db *db;

	if (path[0])
		return path;
	snprintf(path, sizeof(path), "%s/ctl.db", rm_test_tmpdir());
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_begin(db), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0, W, ST_R_CPU, "web", S1_WEB_0), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0, W, ST_R_CPU, "db", S1_DB_0), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0, W, ST_R_CPU, S1_TOT_0, 4 * W), RM_OK);
	CU_ASSERT_EQUAL(st_add_unacct(db, "s1", T0, W, ST_R_CPU, "unsegmented", S1_UNSEG_0), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0 + W, W, ST_R_CPU, "web", S1_WEB_1), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0 + W, W, ST_R_CPU, S1_TOT_1, 4 * W), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0, W, ST_R_NET_RX, "web", S1_RX_WEB), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0, W, ST_R_NET_RX, S1_RX_TOT, 0), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, "s2", T0, W, ST_R_CPU, "cache", S2_CACHE), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s2", T0, W, ST_R_CPU, S2_CACHE, 2 * W), RM_OK);
	CU_ASSERT_EQUAL(st_add_split(db, "s1", T0, W, S1_SPLIT_0), RM_OK);
	CU_ASSERT_EQUAL(st_add_split(db, "s1", T0 + W, W, S1_SPLIT_1), RM_OK);
	CU_ASSERT_EQUAL(st_commit(db), RM_OK);
	st_close(db);
	return path;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* The line of out whose whitespace-separated fields start with f1 f2 f3;
 * copied into line. Returns 1 if found. */
static int find_line(const char *f1, const char *f2, const char *f3, char *line, size_t len)
{
	const char *p = out;

	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t l = nl ? (size_t)(nl - p) : strlen(p);
		char buf[512], a[128], b[128], c[128];

		snprintf(buf, sizeof(buf), "%.*s", (int)l, p);
		if (sscanf(buf, "%127s %127s %127s", a, b, c) == 3 && !strcmp(a, f1) &&
		    !strcmp(b, f2) && !strcmp(c, f3)) {
			snprintf(line, len, "%s", buf);
			return 1;
		}
		p += l + (nl ? 1 : 0);
	}
	return 0;
}

/* Independent renderings for people (floating point; the fixture avoids ties). */
/* cpu in the largest of core-h, core-min, core-s, core-ms it reaches 1 in
 * (values of at least 1 core-ms: two decimals) */
static void expect_cpu(char *buf, size_t len, double ns)
{
	if (ns >= 3.6e12)
		snprintf(buf, len, "%.2f core-h", ns / 3.6e12);
	else if (ns >= 60e9)
		snprintf(buf, len, "%.2f core-min", ns / 60e9);
	else if (ns >= 1e9)
		snprintf(buf, len, "%.2f core-s", ns / 1e9);
	else
		snprintf(buf, len, "%.2f core-ms", ns / 1e6);
}

static void expect_share(char *buf, size_t len, double v, double total)
{
	snprintf(buf, len, "%.2f%%", 100.0 * v / total);
}

static void test_formatting(void)
{
	char a[64], b[64];
	size_t i;

	CU_ASSERT_STRING_EQUAL(ctl_fmt_share(5, 0, a, sizeof(a)), "-");
	CU_ASSERT_STRING_EQUAL(ctl_fmt_share(0, 7, a, sizeof(a)), "0.00%");
	CU_ASSERT_STRING_EQUAL(ctl_fmt_share(INT64_MAX, (uint64_t)INT64_MAX, a, sizeof(a)), "100.00%");
	for (i = 1; i < 50; i++) {
		int64_t v = (int64_t)(i * 7919 % 1000);
		uint64_t t = 1000 + i * 13;

		ctl_fmt_share(v, t, a, sizeof(a));
		expect_share(b, sizeof(b), (double)v, (double)t);
		CU_ASSERT_STRING_EQUAL(a, b);
	}
	ctl_fmt_share(-250, 1000, a, sizeof(a));
	CU_ASSERT_STRING_EQUAL(a, "-25.00%");

	/* fixed-point digits, across the 64-bit boundary of the quotient */
	{
		static const struct {
			unsigned __int128 q;
			int dec;
			const char *want;
		} fx[] = {
			{ 0, 0, "0" },
			{ 0, 3, "0.000" },
			{ 7, 2, "0.07" },
			{ 12345000, 6, "12.345000" },
			{ 100, 2, "1.00" },
			{ UINT64_MAX, 0, "18446744073709551615" },
			{ (unsigned __int128)UINT64_MAX + 1, 12, "18446744.073709551616" },
			{ (unsigned __int128)UINT64_MAX * 1000 + 7, 3, "18446744073709551615.007" },
		};
		char fb[96];

		for (i = 0; i < sizeof(fx) / sizeof(fx[0]); i++) {
			fb[sizeof(fb) - 1] = '\0';
			CU_ASSERT_STRING_EQUAL(ctl_fixed(fb + sizeof(fb) - 1, fx[i].q, fx[i].dec), fx[i].want);
		}
	}

	/* the table's units: small amounts stay readable */
	CU_ASSERT_STRING_EQUAL(ctl_human_amount(ST_R_CPU, 0, a, sizeof(a)), "0.00 core-h");
	CU_ASSERT_STRING_EQUAL(ctl_human_amount(ST_R_CPU, 27 * 3600 * SEC / 4, a, sizeof(a)), "6.75 core-h");
	CU_ASSERT_STRING_EQUAL(ctl_human_amount(ST_R_CPU, 90 * SEC, a, sizeof(a)), "1.50 core-min");
	CU_ASSERT_STRING_EQUAL(ctl_human_amount(ST_R_CPU, 1234567891, a, sizeof(a)), "1.23 core-s");
	CU_ASSERT_STRING_EQUAL(ctl_human_amount(ST_R_CPU, -565432110, a, sizeof(a)), "-565.43 core-ms");
	CU_ASSERT_STRING_EQUAL(ctl_human_amount(ST_R_CPU, 1234, a, sizeof(a)), "0.00123 core-ms");
	CU_ASSERT_STRING_EQUAL(ctl_human_amount(ST_R_CPU, 1, a, sizeof(a)), "0.00000100 core-ms");
	CU_ASSERT_STRING_EQUAL(ctl_human_amount(ST_R_NET_RX, 4096, a, sizeof(a)), "4.00 KiB");
	CU_ASSERT_STRING_EQUAL(ctl_human_amount(ST_R_NET_RX, 1000, a, sizeof(a)), "1000 B");
	/* 1 ms of cpu over a day: 1.157e-8 cores; 100 B a day: 0.001157 B/s */
	CU_ASSERT_STRING_EQUAL(ctl_human_rate(ST_R_CPU, 1000000, 86400 * SEC, a, sizeof(a)),
			       "0.0000000116 cores");
	CU_ASSERT_STRING_EQUAL(ctl_human_rate(ST_R_NET_TX, 100, 86400 * SEC, a, sizeof(a)), "0.00116 B/s");
	CU_ASSERT_STRING_EQUAL(ctl_human_rate(ST_R_CPU, 3 * SEC, 2 * SEC, a, sizeof(a)), "1.50 cores");
	CU_ASSERT_STRING_EQUAL(ctl_human_rate(ST_R_CPU, 0, 2 * SEC, a, sizeof(a)), "0.00 cores");
	CU_ASSERT_STRING_EQUAL(ctl_human_rate(ST_R_DISK_READ, 3 << 20, 2 * SEC, a, sizeof(a)), "1.50 MiB/s");
}

static void test_usage_table(void)
{
	char db[600], line[512], v[64], s[64];
	uint64_t s1_cpu_tot = S1_TOT_0 + S1_TOT_1, web = S1_WEB_0 + S1_WEB_1;
	int64_t vrow = (int64_t)(s1_cpu_tot - web - S1_DB_0);
	const char *pweb, *pdb, *pv, *prx;

	snprintf(db, sizeof(db), "usage --db '%s'", fixture());
	CU_ASSERT_EQUAL_FATAL(run(NULL, db), 0);
	CU_ASSERT_STRING_EQUAL(err, "");
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "SERVER"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "SHARE"));
	/* 7 rows + header */
	CU_ASSERT_EQUAL(count_lines(out), 8);

	CU_ASSERT_FATAL(find_line("s1", "web", "cpu", line, sizeof(line)));
	expect_cpu(v, sizeof(v), (double)web);
	expect_share(s, sizeof(s), (double)web, (double)s1_cpu_tot);
	CU_ASSERT_PTR_NOT_NULL(strstr(line, v));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, s));
	/* without --since the period is the stored one, [T0, T0 + 2 W): the
	 * average is web / 20 s = 0.0867 cores (over decades it was 0.00) */
	CU_ASSERT_PTR_NOT_NULL(strstr(line, " 0.0867 cores "));

	CU_ASSERT_FATAL(find_line("s1", ST_CE_UNACCOUNTABLE, "cpu", line, sizeof(line)));
	expect_cpu(v, sizeof(v), (double)vrow);
	expect_share(s, sizeof(s), (double)vrow, (double)s1_cpu_tot);
	CU_ASSERT_PTR_NOT_NULL(strstr(line, v));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, s));

	CU_ASSERT_FATAL(find_line("s1", "web", "net_rx", line, sizeof(line)));
	snprintf(v, sizeof(v), "%.2f KiB", S1_RX_WEB / 1024.0);
	CU_ASSERT_PTR_NOT_NULL(strstr(line, v));
	CU_ASSERT_FATAL(find_line("s1", ST_CE_UNACCOUNTABLE, "net_rx", line, sizeof(line)));
	snprintf(v, sizeof(v), " %llu B", S1_RX_TOT - S1_RX_WEB);
	CU_ASSERT_PTR_NOT_NULL(strstr(line, v));
	CU_ASSERT(find_line("s2", "cache", "cpu", line, sizeof(line)));
	CU_ASSERT(find_line("s2", ST_CE_UNACCOUNTABLE, "cpu", line, sizeof(line)));

	/* Order: within s1/cpu, larger value first, V last; then net_rx. */
	pweb = strstr(out, "s1      web");
	pdb = strstr(out, "s1      db");
	pv = strstr(out, "s1      " ST_CE_UNACCOUNTABLE "  cpu");
	prx = strstr(out, "net_rx");
	CU_ASSERT(pweb && pdb && pv && prx && pweb < pdb && pdb < pv && pv < prx);

	/* Aligned: the last column (SHARE) is right-aligned, so every line of
	 * the table has the same length. */
	{
		const char *p = out, *nl;
		long len = -1;
		int same = 1;

		for (; (nl = strchr(p, '\n')); p = nl + 1) {
			if (len < 0)
				len = nl - p;
			else if (nl - p != len)
				same = 0;
		}
		CU_ASSERT(same);
		CU_ASSERT(len > 0);
	}

	snprintf(db, sizeof(db), "usage --db '%s' --no-unaccountable", fixture());
	CU_ASSERT_EQUAL(run(NULL, db), 0);
	CU_ASSERT_PTR_NULL(strstr(out, ST_CE_UNACCOUNTABLE));
	CU_ASSERT_EQUAL(count_lines(out), 5);
}

static void test_usage_json_csv(void)
{
	char args[700], expect[512], t0[64], t_end[64];
	uint64_t s1_cpu_tot = S1_TOT_0 + S1_TOT_1, web = S1_WEB_0 + S1_WEB_1;
	const char *p, *until = "2024-01-01T00:00:00Z";
	int objs = 0;

	/* without --since the period starts at the first stored window (T0) */
	ctl_time_format(T0, t0, sizeof(t0));
	ctl_time_format(T0 + 2 * W, t_end, sizeof(t_end));
	snprintf(args, sizeof(args), "usage --db '%s' -o json --until %s", fixture(), until);
	CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
	CU_ASSERT_EQUAL(out[0], '[');
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n]\n"));
	for (p = out; (p = strchr(p, '{')); p++)
		objs++;
	CU_ASSERT_EQUAL(objs, 7);
	snprintf(expect, sizeof(expect),
		 "\"period_end\": \"%s\", \"server\": \"s1\", \"ce\": \"web\", \"resource\": \"cpu\", "
		 "\"value\": %llu, \"total\": %llu, \"unit\": \"ns\"}", until,
		 (unsigned long long)web, (unsigned long long)s1_cpu_tot);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, expect));
	snprintf(expect, sizeof(expect),
		 "{\"period_start\": \"%s\", \"period_end\": \"%s\", \"server\": \"s1\", "
		 "\"ce\": \"%s\", \"resource\": \"net_rx\", \"value\": %llu, "
		 "\"total\": %llu, \"unit\": \"bytes\"}",
		 t0, until, ST_CE_UNACCOUNTABLE, S1_RX_TOT - S1_RX_WEB, S1_RX_TOT);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, expect));
	CU_ASSERT_PTR_NULL(strstr(out, "window_start"));

	snprintf(args, sizeof(args), "usage --db '%s' -o csv", fixture());
	CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
	CU_ASSERT_EQUAL(strncmp(out, "period_start,period_end,server,ce,resource,value,total,unit\n", 59), 0);
	CU_ASSERT_EQUAL(count_lines(out), 8);
	/* ... and without --until ends at the end of the last (T0 + 2 W) */
	snprintf(expect, sizeof(expect), "%s,%s,s1,%s,cpu,%llu,%llu,ns\n", t0, t_end, ST_CE_UNACCOUNTABLE,
		 (unsigned long long)(s1_cpu_tot - web - S1_DB_0), (unsigned long long)s1_cpu_tot);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, expect));
	/* --since still means what it says */
	snprintf(args, sizeof(args), "usage --db '%s' -o csv --since 0 --until %s", fixture(), until);
	CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n1970-01-01T00:00:00Z,"));
	/* an --until before the first window: an empty period, nothing */
	snprintf(args, sizeof(args), "usage --db '%s' -o csv --until %lld", fixture(), T0 / SEC - 1);
	CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
	CU_ASSERT_EQUAL(count_lines(out), 1);

	/* Empty result: valid JSON and a CSV header. */
	snprintf(args, sizeof(args), "usage --db '%s' -o json --until 2000-01-01", fixture());
	CU_ASSERT_EQUAL(run(NULL, args), 0);
	CU_ASSERT_STRING_EQUAL(out, "[]\n");
	snprintf(args, sizeof(args), "usage --db '%s' -o csv --ce web --until 2000-01-01", fixture());
	CU_ASSERT_EQUAL(run(NULL, args), 0);
	CU_ASSERT_EQUAL(count_lines(out), 1);
	/* An unknown server or CE is an error naming the known ones. */
	snprintf(args, sizeof(args), "usage --db '%s' -o csv --ce webb", fixture());
	CU_ASSERT_EQUAL(run(NULL, args), 1);
	CU_ASSERT_STRING_EQUAL(out, "");
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown ce 'webb'; did you mean 'web'? known: cache, db, web"));
	snprintf(args, sizeof(args), "unaccountable --db '%s' --server nobody", fixture());
	CU_ASSERT_EQUAL(run(NULL, args), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown server 'nobody'; known: s1, s2"));
}

static void test_filters_and_windows(void)
{
	char args[700], expect[512], t[64], v[64];

	/* --since at the second window's start (RFC 3339) leaves only it. */
	ctl_time_format(T0 + W, t, sizeof(t));
	snprintf(args, sizeof(args), "usage --db '%s' --since %s --server s1 --resource cpu",
		 fixture(), t);
	CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
	CU_ASSERT(find_line("s1", "web", "cpu", expect, sizeof(expect)));
	expect_cpu(v, sizeof(v), (double)S1_WEB_1);
	CU_ASSERT_PTR_NOT_NULL(strstr(expect, v));
	CU_ASSERT_PTR_NULL(strstr(out, " db "));
	CU_ASSERT_PTR_NULL(strstr(out, "net_rx"));
	CU_ASSERT_PTR_NULL(strstr(out, "s2"));

	/* --until as Unix seconds before everything: nothing. */
	snprintf(args, sizeof(args), "usage --db '%s' --until %lld", fixture(), T0 / SEC);
	CU_ASSERT_EQUAL(run(NULL, args), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "no usage recorded"));
	/* A relative --since (1d ago) excludes the 2023 fixture. */
	snprintf(args, sizeof(args), "usage --db '%s' --since 1d -o csv", fixture());
	CU_ASSERT_EQUAL(run(NULL, args), 0);
	CU_ASSERT_EQUAL(count_lines(out), 1);

	/* --ce: only that CE. */
	snprintf(args, sizeof(args), "usage --db '%s' --ce web -o csv", fixture());
	CU_ASSERT_EQUAL(run(NULL, args), 0);
	CU_ASSERT_EQUAL(count_lines(out), 3);
	CU_ASSERT_PTR_NULL(strstr(out, ST_CE_UNACCOUNTABLE));

	/* --per-window: window_start per row. */
	snprintf(args, sizeof(args), "usage --db '%s' --per-window -o json --server s1 --resource cpu",
		 fixture());
	CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
	snprintf(expect, sizeof(expect),
		 "\"ce\": \"web\", \"resource\": \"cpu\", \"value\": %llu, \"total\": %llu, "
		 "\"unit\": \"ns\", \"window_start\": %lld, \"window_len\": %lld}",
		 S1_WEB_1, S1_TOT_1, T0 + W, W);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, expect));
	snprintf(args, sizeof(args), "usage --db '%s' --per-window --server s1 --resource cpu",
		 fixture());
	CU_ASSERT_EQUAL(run(NULL, args), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "WINDOW"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, ctl_time_format(T0, t, sizeof(t))));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, ctl_time_format(T0 + W, t, sizeof(t))));
	CU_ASSERT_EQUAL(count_lines(out), 1 + 3 + 2);

	/* RAMETR_DB when there is no --db. */
	snprintf(args, sizeof(args), "RAMETR_DB='%s'", fixture());
	CU_ASSERT_EQUAL(run(args, "usage -o csv --server s2"), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "s2,cache,cpu,"));
}

static void test_unaccountable(void)
{
	char args[700], line[512], v[64];
	uint64_t tot = S1_TOT_0 + S1_TOT_1, V = tot - S1_WEB_0 - S1_WEB_1 - S1_DB_0;

	snprintf(args, sizeof(args), "unaccountable --db '%s'", fixture());
	CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "REASON"));
	CU_ASSERT_FATAL(find_line("s1", "cpu", "unsegmented", line, sizeof(line)));
	expect_cpu(v, sizeof(v), (double)S1_UNSEG_0);
	CU_ASSERT_PTR_NOT_NULL(strstr(line, v));
	CU_ASSERT_FATAL(find_line("s1", "cpu", ST_REASON_UNEXPLAINED, line, sizeof(line)));
	expect_cpu(v, sizeof(v), (double)(V - S1_UNSEG_0));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, v));
	CU_ASSERT(find_line("s1", "net_rx", ST_REASON_UNEXPLAINED, line, sizeof(line)));
	CU_ASSERT_PTR_NULL(strstr(out, "s2")); /* s2 is fully attributed */

	snprintf(args, sizeof(args), "unaccountable --db '%s' -o csv --resource cpu", fixture());
	CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
	CU_ASSERT_EQUAL(strncmp(out, "server,resource,reason,value,total,unit\n", 40), 0);
	snprintf(line, sizeof(line), "s1,cpu,%s,%llu,%llu,ns\n", ST_REASON_UNEXPLAINED,
		 (unsigned long long)(V - S1_UNSEG_0), (unsigned long long)tot);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, line));
	CU_ASSERT_EQUAL(count_lines(out), 3);
}

static void test_check(void)
{
	char path[512], args[700], line[512];
	st_db *db;
	int w;

	snprintf(path, sizeof(path), "%s/check.db", rm_test_tmpdir());
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	for (w = 0; w < 3; w++) {
		CU_ASSERT_EQUAL(st_add_usage(db, "s", T0 + w * W, W, ST_R_CPU, "a", 100 + w), RM_OK);
		CU_ASSERT_EQUAL(st_add_unacct(db, "s", T0 + w * W, W, ST_R_CPU, "lost", 5), RM_OK);
		CU_ASSERT_EQUAL(st_add_total(db, "s", T0 + w * W, W, ST_R_CPU, 105 + w, 0), RM_OK);
		CU_ASSERT_EQUAL(st_add_usage(db, "s", T0 + w * W, W, ST_R_DISK_WRITE, "a", 4096), RM_OK);
		CU_ASSERT_EQUAL(st_add_total(db, "s", T0 + w * W, W, ST_R_DISK_WRITE, 4096, 0), RM_OK);
	}
	snprintf(args, sizeof(args), "check --db '%s'", path);
	CU_ASSERT_EQUAL(run(NULL, args), 0);
	CU_ASSERT_STRING_EQUAL(out, "6 windows checked, all balanced\n");

	/* A late total for window 1 that nothing explains. */
	CU_ASSERT_EQUAL(st_add_total(db, "s", T0 + W, W, ST_R_CPU, 3, 0), RM_OK);
	st_close(db);
	CU_ASSERT_EQUAL(run(NULL, args), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "RESIDUAL"));
	CU_ASSERT_FATAL(find_line("s", "cpu", ctl_time_format(T0 + W, path, sizeof(path)), line,
				  sizeof(line)));
	/* TOTAL ATTRIBUTED EXPLAINED RESIDUAL UNIT */
	{
		char a[64], b[64], c[64];
		unsigned long long tot, att;
		long long expl, res;

		CU_ASSERT_EQUAL(sscanf(line, "%63s %63s %63s %llu %llu %lld %lld", a, b, c, &tot, &att,
				       &expl, &res), 7);
		CU_ASSERT_EQUAL(tot, 105 + 1 + 3);
		CU_ASSERT_EQUAL(att, 100 + 1);
		CU_ASSERT_EQUAL(expl, 5);
		CU_ASSERT_EQUAL(res, 3);
	}
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "6 windows checked, 1 unbalanced"));
	/* Restricted to a balanced resource, it passes. */
	snprintf(args + strlen(args), sizeof(args) - strlen(args), " --resource disk_write");
	CU_ASSERT_EQUAL(run(NULL, args), 0);
	CU_ASSERT_STRING_EQUAL(out, "3 windows checked, all balanced\n");
}

static void expect_usage_error(const char *args, const char *msg)
{
	CU_ASSERT_EQUAL(run(NULL, args), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, msg));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "hint: see 'rametrctl"));
	CU_ASSERT_STRING_EQUAL(out, "");
}

static void test_exit_codes(void)
{
	char args[700];

	CU_ASSERT_EQUAL(run(NULL, "--help"), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: rametrctl <command>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "unaccountable"));
	CU_ASSERT_EQUAL(run(NULL, "usage --help"), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "--per-window"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "RAMETR_DB"));
	CU_ASSERT_EQUAL(run(NULL, "check -h"), 0);
	CU_ASSERT_PTR_NULL(strstr(out, "--per-window"));

	expect_usage_error("usage --bogus", "unknown option '--bogus'");
	expect_usage_error("usage -x", "unknown option '-x'");
	expect_usage_error("usage --since someday", "invalid time 'someday'");
	expect_usage_error("usage --since 2026-13", "invalid time '2026-13' for --since: month out of range");
	expect_usage_error("usage --step 5y", "invalid --step '5y'");
	expect_usage_error("usage --group-by tenant", "invalid --group-by 'tenant'");
	expect_usage_error("usage --top 0", "invalid --top '0'");
	expect_usage_error("usage --step 1h --per-window", "do not combine");
	expect_usage_error("usage --until 2023-02-30T00:00:00Z", "day out of range");
	expect_usage_error("usage --since now --until 1h", "is after --until");
	expect_usage_error("usage --resource gpu", "unknown resource 'gpu'");
	expect_usage_error("usage -o xml", "unknown output format 'xml'");
	expect_usage_error("usage --server", "requires a value");
	expect_usage_error("usage --server ''", "invalid --server");
	expect_usage_error("usage extra", "unexpected argument 'extra'");
	expect_usage_error("unaccountable --ce web", "'--ce' does not apply to 'unaccountable'");
	expect_usage_error("check -o json", "'--output' does not apply to 'check'");
	expect_usage_error("frobnicate", "unknown command 'frobnicate'");
	expect_usage_error("--db x usage", "options go after the command");
	CU_ASSERT_EQUAL(run(NULL, ""), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "usage: rametrctl"));

	/* Cannot open the database: exit 1 with a clear message. */
	snprintf(args, sizeof(args), "usage --db '%s/nonexistent.db'", rm_test_tmpdir());
	CU_ASSERT_EQUAL(run(NULL, args), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "rametrctl: error: failed to open '"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "nonexistent.db': No such file or directory"));
	snprintf(args, sizeof(args), "check --db '%s'", rm_test_tmpdir());
	CU_ASSERT_EQUAL(run(NULL, args), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "failed to open"));
	/* The default path is used without --db or $RAMETR_DB (it does not
	 * exist on a test host, so this fails, naming it). */
	if (access("/var/lib/rametr/rametr.db", F_OK) != 0) {
		CU_ASSERT_EQUAL(run("env -u RAMETR_DB", "usage"), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "'/var/lib/rametr/rametr.db'"));
	}
}

static void test_splits(void)
{
	char args[700], line[512], want[64];

	snprintf(args, sizeof(args), "splits --db '%s' --since 0", fixture());
	CU_ASSERT_EQUAL(run(NULL, args), 0);
	CU_ASSERT_EQUAL(count_lines(out), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "SPLIT_PARTS"));
	snprintf(want, sizeof(want), "s1 %llu", S1_SPLIT_0 + S1_SPLIT_1);
	{
		char a[64], b[64];

		CU_ASSERT_EQUAL(sscanf(strchr(out, '\n') + 1, "%63s %63s", a, b), 2);
		snprintf(line, sizeof(line), "%s %s", a, b);
		CU_ASSERT_STRING_EQUAL(line, want);
	}
	snprintf(args, sizeof(args), "splits --db '%s' -o csv --per-window", fixture());
	CU_ASSERT_EQUAL(run(NULL, args), 0);
	snprintf(want, sizeof(want), "s1,%llu,%lld,%lld\n", S1_SPLIT_1, T0 + W, W);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "server,split_parts,window_start,window_len\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
	snprintf(args, sizeof(args), "splits --db '%s' -o json --server s2", fixture());
	CU_ASSERT_EQUAL(run(NULL, args), 0);
	CU_ASSERT_STRING_EQUAL(out, "[]\n");
	snprintf(args, sizeof(args), "splits --db '%s' -o json", fixture());
	CU_ASSERT_EQUAL(run(NULL, args), 0);
	snprintf(want, sizeof(want), "\"split_parts\": %llu", S1_SPLIT_0 + S1_SPLIT_1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
	snprintf(args, sizeof(args), "splits --db '%s' --resource cpu", fixture());
	CU_ASSERT_EQUAL(run(NULL, args), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "'--resource' does not apply to 'splits'"));
	CU_ASSERT_EQUAL(run(NULL, "splits --help"), 0);
	CU_ASSERT_PTR_NULL(strstr(out, "--resource"));
}

/* Two servers, 3 hours of 60 s windows from 2026-11-02T00:00:00Z: on a,
 * web 2 cores, db 1 core, total 4 cores (so 1 core unaccountable) and web
 * receives 1 GiB an hour; on b, web 0.5 core and batch 1.5 cores of 2. */
#define D0 (1793577600LL * SEC)
#define MINUTE (60 * SEC)
#define GIB (1024ULL * 1024 * 1024)

static const char *fixture_month(int rolled)
{
	static char path[2][256];
	st_db *db;
	int64_t t;

	if (path[rolled][0])
		return path[rolled];
	snprintf(path[rolled], sizeof(path[rolled]), "%.200s/ctl_month%d.db", rm_test_tmpdir(), rolled);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path[rolled], 0), RM_OK);
	CU_ASSERT_EQUAL(st_begin(db), RM_OK);
	for (t = D0; t < D0 + 180 * MINUTE; t += MINUTE) {
		CU_ASSERT_EQUAL(st_add_usage(db, "a", t, MINUTE, ST_R_CPU, "web", 2 * MINUTE), RM_OK);
		CU_ASSERT_EQUAL(st_add_usage(db, "a", t, MINUTE, ST_R_CPU, "db", MINUTE), RM_OK);
		CU_ASSERT_EQUAL(st_add_total(db, "a", t, MINUTE, ST_R_CPU, 4 * MINUTE, 4 * MINUTE), RM_OK);
		CU_ASSERT_EQUAL(st_add_usage(db, "a", t, MINUTE, ST_R_NET_RX, "web", GIB / 60), RM_OK);
		CU_ASSERT_EQUAL(st_add_total(db, "a", t, MINUTE, ST_R_NET_RX, GIB / 60, 0), RM_OK);
		CU_ASSERT_EQUAL(st_add_usage(db, "b", t, MINUTE, ST_R_CPU, "web", MINUTE / 2), RM_OK);
		CU_ASSERT_EQUAL(st_add_usage(db, "b", t, MINUTE, ST_R_CPU, "batch", 3 * MINUTE / 2), RM_OK);
		CU_ASSERT_EQUAL(st_add_total(db, "b", t, MINUTE, ST_R_CPU, 2 * MINUTE, 2 * MINUTE), RM_OK);
	}
	CU_ASSERT_EQUAL(st_commit(db), RM_OK);
	if (rolled) {
		/* the windows before 2 h deleted: the buckets answer for them */
		struct st_retention r = { { 1, 0, 0, 0 } };
		int more = 1;

		CU_ASSERT_EQUAL(st_horizon_set(db, D0 + 120 * MINUTE + 1), RM_OK);
		while (more)
			CU_ASSERT_EQUAL_FATAL(st_rollup(db, &r, &more), RM_OK);
	}
	st_close(db);
	return path[rolled];
}

static void test_usage_steps_groups(void)
{
	char args[1200], line[512], first[sizeof(out)];
	int rolled;

	for (rolled = 0; rolled < 2; rolled++) {
		const char *db = fixture_month(rolled);

		/* per hour, raw integers with the periods */
		snprintf(args, sizeof(args), "usage --db '%s' --since 2026-11-02 --step 1h -o csv "
			 "--server a --resource cpu", db);
		CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
		CU_ASSERT_EQUAL(count_lines(out), 1 + 3 * 3);
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n2026-11-02T01:00:00Z,2026-11-02T02:00:00Z,a,web,cpu,"
						   "7200000000000,14400000000000,ns\n"));
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n2026-11-02T02:00:00Z,2026-11-02T03:00:00Z,a,"
						   ST_CE_UNACCOUNTABLE ",cpu,3600000000000,14400000000000,ns\n"));
		if (rolled == 0)
			snprintf(first, sizeof(first), "%s", out);
		else
			CU_ASSERT_STRING_EQUAL(out, first); /* the series answer as the windows */

		/* ce alone sums across servers: web 2.5 cores of 6 */
		snprintf(args, sizeof(args), "usage --db '%s' --since 2026-11-02 --until "
			 "2026-11-02T03:00:00Z --step 3h --group-by ce --resource cpu", db);
		CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
		CU_ASSERT(find_line("2026-11-02T00:00:00Z", "web", "cpu", line, sizeof(line)));
		CU_ASSERT_PTR_NOT_NULL(strstr(line, "7.50 core-h"));
		CU_ASSERT_PTR_NOT_NULL(strstr(line, "2.50 cores"));
		CU_ASSERT_PTR_NOT_NULL(strstr(line, "41.67%"));
		CU_ASSERT(find_line("2026-11-02T00:00:00Z", "batch", "cpu", line, sizeof(line)));
		CU_ASSERT_PTR_NOT_NULL(strstr(line, "1.50 cores"));
		CU_ASSERT_PTR_NULL(strstr(out, " a "));

		/* top 1 over the day: web and the unaccountable share */
		snprintf(args, sizeof(args), "usage --db '%s' --since 2026-11-02 --group-by ce --top 1 "
			 "--resource cpu -o csv", db);
		CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
		CU_ASSERT_EQUAL(count_lines(out), 3);
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "2026-11-02T00:00:00Z,2026-11-03T00:00:00Z,web,cpu,"
						   "27000000000000,64800000000000,ns\n"));
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "," ST_CE_UNACCOUNTABLE ",cpu,10800000000000,"));

		/* bytes in binary units; per resource only */
		snprintf(args, sizeof(args), "usage --db '%s' --since 2026-11 --group-by resource", db);
		CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "net_rx"));
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "3.00 GiB"));
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "18.00 core-h"));
		CU_ASSERT_EQUAL(count_lines(out), 3);
	}
}

/* Grouped by server and CE every storage row is its own group: the rows
 * come back complete, one per input row, ordered by period, server,
 * resource, value descending and V last, with top N applied per group. */
static void test_group_each_row(void)
{
	static const char *const sv[] = { "b", "a" }, *const ce[] = { "x", "y", "z" };
	struct st_row in[2 * ST_R_COUNT * 3 * 4];
	struct ctl_urow *o;
	size_t n = 0, no, i, s, r, d, c, top, left;
	unsigned x = 3;

	/* storage order: server, resource, period, CEs by value, V last */
	for (s = 0; s < 2; s++)
		for (r = 0; r < ST_R_COUNT; r++)
			for (d = 0; d < 3; d++) {
				for (c = 0; c < 3; c++) {
					memset(&in[n], 0, sizeof(in[n]));
					snprintf(in[n].server, sizeof(in[n].server), "%s", sv[1 - s]);
					snprintf(in[n].ce, sizeof(in[n].ce), "%s", ce[c]);
					in[n].resource = (enum st_resource)r;
					in[n].win_start_ns = (int64_t)(2 - d) * 86400000000000LL;
					in[n].win_len_ns = 86400000000000LL;
					x = x * 1103515245u + 12345u;
					in[n].value = 300 - c * 100 + (x >> 28);
					in[n].total = 1000;
					n++;
				}
				in[n] = in[n - 1];
				snprintf(in[n].ce, sizeof(in[n].ce), "%s", ST_CE_UNACCOUNTABLE);
				in[n].residual = -5;
				n++;
			}
	for (top = 0; top < 3; top++) {
		CU_ASSERT_EQUAL_FATAL(ctl_usage_group(in, n, CTL_BY_SERVER | CTL_BY_CE, 1, top, 0, 0, &o, &no, &left), RM_OK);
		CU_ASSERT_EQUAL(left, top ? n / 4 * (3 - top) : 0);
		CU_ASSERT_EQUAL_FATAL(no, top ? n / 4 * (top + 1) : n);
		for (i = 1; i < no; i++) {
			const struct ctl_urow *a = &o[i - 1], *b = &o[i];
			int av = !strcmp(a->ce, ST_CE_UNACCOUNTABLE), bv = !strcmp(b->ce, ST_CE_UNACCOUNTABLE);
			int same = a->start_ns == b->start_ns && !strcmp(a->server, b->server) &&
				   a->resource == b->resource;

			CU_ASSERT(a->start_ns <= b->start_ns);
			if (a->start_ns == b->start_ns)
				CU_ASSERT(strcmp(a->server, b->server) <= 0);
			if (same)
				CU_ASSERT(!av && (bv || a->value >= b->value));
		}
		for (i = 0; i < no; i++)
			CU_ASSERT(!strcmp(o[i].ce, ST_CE_UNACCOUNTABLE) ? o[i].value == -5 : o[i].value > 0);
		CU_ASSERT_EQUAL(o[0].start_ns, 0);
		CU_ASSERT_STRING_EQUAL(o[0].server, "a");
		CU_ASSERT_EQUAL(o[no - 1].end_ns, 3 * 86400000000000LL);
		free(o);
	}
	/* without the unaccountable rows */
	CU_ASSERT_EQUAL_FATAL(ctl_usage_group(in, n, CTL_BY_SERVER | CTL_BY_CE, 0, 0, 0, 0, &o, &no, NULL), RM_OK);
	CU_ASSERT_EQUAL(no, n / 4 * 3);
	free(o);
}

/* A table shows the 10 largest CEs per group unless --top says otherwise,
 * and says how many rows it left out; JSON and CSV keep every row. */
static void test_table_default_top(void)
{
	char path[300], args[700], ce[16];
	st_db *db;
	int c, lines;
	const char *p;

	snprintf(path, sizeof(path), "%.200s/top.db", rm_test_tmpdir());
	unlink(path);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	for (c = 0; c < 12; c++) {
		snprintf(ce, sizeof(ce), "ce%02d", c);
		CU_ASSERT_EQUAL(st_add_usage(db, "s1", 1000000000000000000LL, 1000000000LL, ST_R_CPU, ce,
					     (uint64_t)(c + 1) * 1000000), RM_OK);
	}
	CU_ASSERT_EQUAL(st_add_total(db, "s1", 1000000000000000000LL, 1000000000LL, ST_R_CPU, 100000000, 0),
			RM_OK);
	st_close(db);
	snprintf(args, sizeof(args), "usage --db '%s' --since 0 --resource cpu", path);
	CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
	for (lines = 0, p = out; (p = strchr(p, '\n')); p++)
		lines++;
	CU_ASSERT_EQUAL(lines, 1 + 10 + 1 + 2); /* head, 10 CEs, V, the note */
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "ce11 "));
	CU_ASSERT_PTR_NULL(strstr(out, "ce01 "));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "2 smaller rows left out"));
	snprintf(args, sizeof(args), "usage --db '%s' --since 0 --resource cpu --top all", path);
	CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "ce00 "));
	CU_ASSERT_PTR_NULL(strstr(out, "left out"));
	snprintf(args, sizeof(args), "usage --db '%s' --since 0 --resource cpu --top 3", path);
	CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
	CU_ASSERT_PTR_NULL(strstr(out, "ce08 "));
	CU_ASSERT_PTR_NULL(strstr(out, "left out")); /* asked for */
	snprintf(args, sizeof(args), "usage --db '%s' --since 0 --resource cpu -o csv", path);
	CU_ASSERT_EQUAL_FATAL(run(NULL, args), 0);
	for (lines = 0, p = out; (p = strchr(p, '\n')); p++)
		lines++;
	CU_ASSERT_EQUAL(lines, 1 + 12 + 1);
	snprintf(args, sizeof(args), "usage --db '%s' --top 0", path);
	CU_ASSERT_EQUAL(run(NULL, args), 2);
}

/* usage --step 1d grouped by server (and CE) reads whole days from the
 * packed day series (and the days not packed yet from the day rows): its
 * output equals, byte for byte, grouping the storage's per-day rows. */
static void test_days_as_rows(void)
{
	static const char *const variants[] = {
		"-o csv", "-o json", "", "--top all", "--top 2 -o csv", "--no-unaccountable -o csv",
		"--group-by server -o csv", "--group-by server", "--no-unaccountable --group-by server,resource",
		"--server s2 --resource net_rx -o json", "--since 1699920000 -o csv",
	};
	const int64_t d0 = 1700006400LL * SEC, day = 86400 * SEC;
	struct st_retention keep = { { 0, 0, 0, 0 } };
	char path[300], args[900], *exp = NULL;
	int64_t since = d0, until = d0 + 4 * day;
	size_t i, elen;
	int more = 1, d, sv, r, c;
	st_db *db;

	snprintf(path, sizeof(path), "%.200s/days.db", rm_test_tmpdir());
	unlink(path);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_begin(db), RM_OK);
	for (d = 0; d < 4; d++)
		for (sv = 0; sv < 2; sv++)
			for (r = 0; r < ST_R_COUNT; r++) {
				const char *server = sv ? "s2" : "s1";
				int64_t t = d0 + d * day + (int64_t)(r + 1) * 3600 * SEC;
				uint64_t sum = 0;

				if (sv == 1 && r == ST_R_DISK_WRITE && d == 2) { /* a total alone */
					CU_ASSERT_EQUAL(st_add_total(db, server, t, W, r, 999, 0), RM_OK);
					continue;
				}
				for (c = 0; c < 13; c++) { /* ties between CEs: by name */
					char ce[16];
					uint64_t v = (uint64_t)((c + d + sv) % 4 + 1) * 1000 + (uint64_t)r;

					snprintf(ce, sizeof(ce), "ce%02d", (c * 5) % 13);
					CU_ASSERT_EQUAL(st_add_usage(db, server, t, W, r, ce, v), RM_OK);
					sum += v;
				}
				CU_ASSERT_EQUAL(st_add_unacct(db, server, t, W, r, "lost", 30), RM_OK);
				/* s2 cpu on day 1: more charged than measured (V < 0) */
				CU_ASSERT_EQUAL(st_add_total(db, server, t, W, r,
							     sv && !r && d == 1 ? sum - 100 : sum + 500, 8 * W), RM_OK);
			}
	CU_ASSERT_EQUAL_FATAL(st_commit(db), RM_OK);
	/* days 0 and 1 packed, 2 and 3 read from the day rows */
	CU_ASSERT_EQUAL(st_horizon_set(db, d0 + 2 * day + 3600 * SEC), RM_OK);
	while (more)
		CU_ASSERT_EQUAL_FATAL(st_rollup(db, &keep, &more), RM_OK);

	for (i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
		const char *v = variants[i];
		enum ctl_fmt fmt = strstr(v, "json") ? CTL_FMT_JSON : strstr(v, "csv") ? CTL_FMT_CSV : CTL_FMT_TABLE;
		unsigned by = strstr(v, "group-by server") ? CTL_BY_SERVER : CTL_BY_SERVER | CTL_BY_CE;
		size_t top = strstr(v, "--top 2") ? 2 : fmt == CTL_FMT_TABLE && !strstr(v, "--top") &&
							       (by & CTL_BY_CE) ? 10 : 0;
		struct st_query q = { since, until, NULL, NULL, -1, 0 };
		struct st_row *rows;
		struct ctl_urow *g;
		size_t n, ng, left = 0;
		FILE *m;

		if (strstr(v, "--server")) {
			q.server = "s2";
			q.resource = ST_R_NET_RX;
		}
		if (strstr(v, "--since 1699920000"))
			q.since_ns = 1699920000LL * SEC;
		CU_ASSERT_EQUAL_FATAL(st_query_usage_step(db, &q, day, &rows, &n), RM_OK);
		CU_ASSERT_EQUAL_FATAL(ctl_usage_group(rows, n, by, !strstr(v, "no-unacc"), top, q.since_ns,
						      q.until_ns, &g, &ng, &left), RM_OK);
		CU_ASSERT_PTR_NOT_NULL_FATAL(m = open_memstream(&exp, &elen));
		CU_ASSERT_EQUAL(ctl_usage_print(m, fmt, g, ng, by, 1), RM_OK);
		if (left && top == 10)
			fprintf(m, "(the 10 largest CEs per period, server and resource; %zu smaller rows left "
				   "out:\n --top N for more, --top all or -o csv|json for every row)\n", left);
		fclose(m);
		snprintf(args, sizeof(args), "usage --db '%s' --since %lld --until %lld --step 1d %s", path,
			 (long long)(since / SEC), (long long)(until / SEC), v);
		CU_ASSERT_EQUAL(run(NULL, args), 0);
		if (strcmp(out, exp) != 0)
			fprintf(stderr, "differs for '%s':\n%s\n-- expected --\n%s\n", v, out, exp);
		CU_ASSERT_STRING_EQUAL(out, exp);
		CU_ASSERT(ng > 0);
		CU_ASSERT(top != 10 || left == 4 * 2 * ST_R_COUNT * 3 - 3);
		free(exp);
		exp = NULL;
		free(g);
		st_rows_free(rows);
	}
	st_close(db);
}

/* The usage table is laid out as ctl_table_print lays out a table of the
 * same cells (its own printer avoids fixed-size cells and printf). */
static void test_usage_table_layout(void)
{
	struct ctl_urow rows[40];
	struct ctl_table t = { .ncol = 0 };
	char *a = NULL, *b = NULL;
	size_t la, lb, i, k;
	unsigned by;
	FILE *m;

	memset(rows, 0, sizeof(rows));
	for (i = 0; i < 40; i++) {
		struct ctl_urow *r = &rows[i];

		snprintf(r->server, sizeof(r->server), "%s", i % 3 ? "srv-1" : "a-much-longer-server-name");
		snprintf(r->ce, sizeof(r->ce), "%s", i % 7 ? "ce" : ST_CE_UNACCOUNTABLE);
		r->resource = (enum st_resource)(i % ST_R_COUNT);
		r->start_ns = (int64_t)(i / 10) * 86400 * SEC;
		r->end_ns = r->start_ns + 86400 * SEC;
		r->value = i % 11 == 5 ? -(int64_t)(i * 977) : (int64_t)((i * i * i) << (i % 40));
		r->total = i % 13 == 4 ? 0 : (uint64_t)llabs(r->value) * 3 + 1;
	}
	for (by = CTL_BY_SERVER; by <= (CTL_BY_SERVER | CTL_BY_CE); by++) {
		t.ncol = 0;
		t.n = 0;
		memset(t.right, 0, sizeof(t.right));
		t.head[t.ncol++] = "PERIOD";
		if (by & CTL_BY_SERVER)
			t.head[t.ncol++] = "SERVER";
		if (by & CTL_BY_CE)
			t.head[t.ncol++] = "CE";
		t.head[t.ncol++] = "RESOURCE";
		t.right[t.ncol] = 1;
		t.head[t.ncol++] = "AMOUNT";
		t.right[t.ncol] = 1;
		t.head[t.ncol++] = "AVERAGE";
		t.right[t.ncol] = 1;
		t.head[t.ncol++] = "SHARE";
		for (i = 0; i < 40; i++) {
			char(*c)[CTL_CELL] = ctl_table_row(&t);

			CU_ASSERT_PTR_NOT_NULL_FATAL(c);
			k = 0;
			ctl_time_format(rows[i].start_ns, c[k++], CTL_CELL);
			if (by & CTL_BY_SERVER)
				snprintf(c[k++], CTL_CELL, "%.63s", rows[i].server);
			if (by & CTL_BY_CE)
				snprintf(c[k++], CTL_CELL, "%.63s", rows[i].ce);
			snprintf(c[k++], CTL_CELL, "%s", st_resource_name(rows[i].resource));
			ctl_human_amount(rows[i].resource, rows[i].value, c[k++], CTL_CELL);
			ctl_human_rate(rows[i].resource, rows[i].value, 86400 * SEC, c[k++], CTL_CELL);
			ctl_fmt_share(rows[i].value, rows[i].total, c[k++], CTL_CELL);
		}
		CU_ASSERT_PTR_NOT_NULL_FATAL(m = open_memstream(&a, &la));
		ctl_table_print(m, &t);
		fclose(m);
		CU_ASSERT_PTR_NOT_NULL_FATAL(m = open_memstream(&b, &lb));
		CU_ASSERT_EQUAL(ctl_usage_print(m, CTL_FMT_TABLE, rows, 40, by, 1), RM_OK);
		fclose(m);
		if (strcmp(a, b))
			fprintf(stderr, "%s\n--- generic ---\n%s\n", b, a);
		CU_ASSERT_STRING_EQUAL(b, a);
		CU_ASSERT(la > 40 * 40);
		free(a);
		free(b);
		a = b = NULL;
	}
	free(t.cells);
}

static CU_TestInfo cases[] = {
	{ "usage: steps, groups, top, calendar, units, rolled up", test_usage_steps_groups },
	{ "amount and share formatting", test_formatting },
	{ "usage as a table", test_usage_table },
	{ "usage as json and csv", test_usage_json_csv },
	{ "filters, per-window rows, RAMETR_DB", test_filters_and_windows },
	{ "unaccountable breakdown", test_unaccountable },
	{ "check finds an unbalanced window", test_check },
	{ "split parts per server and window", test_splits },
	{ "help and exit codes", test_exit_codes },
	{ "grouped by server and ce: each row its own group", test_group_each_row },
	{ "a table shows the largest CEs by default", test_table_default_top },
	{ "usage --step 1d from the packed days: as the rows", test_days_as_rows },
	{ "the usage table laid out as any table", test_usage_table_layout },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("ctl", cases)
