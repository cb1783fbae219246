/*
 * ctl_bill_test.c - tests of `rametrctl bill`: the allocation of the
 * unaccountable share (exact, largest remainder), the rate card, then the
 * real rametrctl binary on a real SQLite file: every mandatory FOCUS 1.2
 * column and the 1.3 allocation columns present and filled, quantities that
 * reconcile exactly with U, and the --since-last job killed (SIGKILL) at
 * random points and run again 50 times exporting every settled charge period
 * exactly once. (Some of the kills are aimed at the moment the job is seen to
 * have written: kill points drawn over one timed run's length alone miss the
 * writes when the machine's load changes between runs.)
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctl_bill.h"
#include "rm_err.h"
#include "rm_test.h"
#include "st.h"
#include "st_rollup.h"
#include "banned.h"

#define SEC 1000000000LL
#define HOUR (3600 * SEC)
#define D0 (1793577600LL * SEC) /* 2026-11-02T00:00:00Z */

static struct st_row row(const char *server, const char *ce, enum st_resource r, int64_t start,
			 uint64_t value, int64_t residual)
{
	struct st_row x;

	memset(&x, 0, sizeof(x));
	snprintf(x.server, sizeof(x.server), "%s", server);
	snprintf(x.ce, sizeof(x.ce), "%s", ce);
	x.resource = r;
	x.win_start_ns = start;
	x.win_len_ns = HOUR;
	x.value = value;
	x.residual = residual;
	return x;
}

static int64_t qty(const struct ctl_charge *c, size_t n, const char *tenant)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(c[i].tenant, tenant))
			return c[i].quantity;
	return -1;
}

static void test_allocation(void)
{
	struct st_row rows[] = {
		row("s1", "a", ST_R_CPU, D0, 1, 0), row("s1", "b", ST_R_CPU, D0, 1, 0),
		row("s1", "c", ST_R_CPU, D0, 1, 0), row("s1", ST_CE_UNACCOUNTABLE, ST_R_CPU, D0, 10, 10),
		row("s2", "a", ST_R_CPU, D0, 300, 0), row("s2", "b", ST_R_CPU, D0, 100, 0),
		row("s2", ST_CE_UNACCOUNTABLE, ST_R_CPU, D0, 7, 7),
		row("s3", ST_CE_UNACCOUNTABLE, ST_R_CPU, D0, 5, 5), /* no CE to carry it */
	};
	struct ctl_rates rt;
	struct ctl_charge *c;
	size_t n, i;
	int64_t sum;

	CU_ASSERT_EQUAL_FATAL(ctl_rates_parse("", 0, "none", &rt), RM_OK);
	/* none: V is its own row */
	CU_ASSERT_EQUAL_FATAL(ctl_bill_compute(rows, 8, &rt, CTL_SHARE_NONE, &c, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 8);
	free(c);
	/* even on s1: 10 over 3 CEs = 4, 3, 3 (the largest remainder by name) */
	CU_ASSERT_EQUAL_FATAL(ctl_bill_compute(rows, 4, &rt, CTL_SHARE_EVEN, &c, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT_EQUAL(qty(c, n, "a"), 1 + 4);
	CU_ASSERT_EQUAL(qty(c, n, "b"), 1 + 3);
	CU_ASSERT_EQUAL(qty(c, n, "c"), 1 + 3);
	free(c);
	/* weighted on s2: 7 by 300:100 = 5.25, 1.75 -> 5 + 1, the remainder to b */
	CU_ASSERT_EQUAL_FATAL(ctl_bill_compute(rows + 4, 4, &rt, CTL_SHARE_WEIGHTED, &c, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT_EQUAL(qty(c, n, "a"), 300 + 5);
	CU_ASSERT_EQUAL(qty(c, n, "b"), 100 + 2);
	CU_ASSERT_EQUAL(qty(c, n, ST_CE_UNACCOUNTABLE), 5); /* s3 keeps its own row */
	for (i = 0, sum = 0; i < n; i++)
		sum += c[i].quantity;
	CU_ASSERT_EQUAL(sum, 300 + 100 + 7 + 5);
	free(c);
}

static void test_rate_card(void)
{
	static const char card[] = "currency = EUR\n[default]\ncpu = 0.04\nnet_tx = 0.09 # per GiB\n"
				   "[class big]\nservers = db1, db2\ncpu = 0.06\n[server db2]\ncpu = 0\n";
	static const char bad[] = "currency = euro\n[default]\ncpu = 0.0000001\ngpu = 1\n[zone x]\n";
	struct ctl_rates rt;

	CU_ASSERT_EQUAL_FATAL(ctl_rates_parse(card, strlen(card), "r.ini", &rt), RM_OK);
	CU_ASSERT_STRING_EQUAL(rt.currency, "EUR");
	CU_ASSERT_EQUAL(ctl_rates_price(&rt, "web1", ST_R_CPU), 40000);
	CU_ASSERT_EQUAL(ctl_rates_price(&rt, "db1", ST_R_CPU), 60000);
	CU_ASSERT_EQUAL(ctl_rates_price(&rt, "db2", ST_R_CPU), 0);
	CU_ASSERT_EQUAL(ctl_rates_price(&rt, "db1", ST_R_NET_TX), 90000);
	CU_ASSERT_EQUAL(ctl_rates_price(&rt, "db1", ST_R_DISK_READ), 0);
	CU_ASSERT_EQUAL(ctl_rates_parse(bad, strlen(bad), "bad.ini", &rt), RM_ECONFIG);
}

/* The rate card is read with the daemons' INI grammar: ';' comments, a refused header's keys skipped. */
static void test_rate_card_grammar(void)
{
	static const char card[] = "; prices per core-hour and GiB\n[default]\ncpu = 0.05 ; per core-hour\n"
				   "[class web]\nservers = web#1\ncpu = 0.07\n";
	static const char bad[] = "[zone x]\ncpu = 1\n[default]\ncpu = 0.01\n";
	char many[CTL_RATE_SETS_MAX * 24 + 1] = "";
	struct ctl_rates rt;
	size_t i, n = 0;

	CU_ASSERT_EQUAL_FATAL(ctl_rates_parse(card, strlen(card), "g.ini", &rt), RM_OK);
	CU_ASSERT_EQUAL(ctl_rates_price(&rt, "db", ST_R_CPU), 50000);
	CU_ASSERT_EQUAL(ctl_rates_price(&rt, "web#1", ST_R_CPU), 70000);
	CU_ASSERT_EQUAL(ctl_rates_parse(bad, strlen(bad), "bad.ini", &rt), RM_ECONFIG);
	CU_ASSERT_EQUAL(rt.set[0].price[ST_R_CPU], 10000);
	for (i = 0; i < CTL_RATE_SETS_MAX; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "[server s%zu]\ncpu = 1\n", i);
	CU_ASSERT_EQUAL(ctl_rates_parse(many, n, "many.ini", &rt), RM_ECONFIG);
	CU_ASSERT_EQUAL(rt.nset, CTL_RATE_SETS_MAX);
}

/* ---- the real binary ---- */

static char out[1 << 20], err[1 << 14];

static int run(const char *args)
{
	char cmd[4096], errpath[600];
	FILE *p, *e;
	size_t n;
	int st;

	snprintf(errpath, sizeof(errpath), "%.500s/bill_stderr.txt", rm_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "'%s' %s 2>'%s'", RAMETRCTL_PATH, args, errpath);
	p = popen(cmd, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	st = pclose(p);
	e = fopen(errpath, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	n = fread(err, 1, sizeof(err) - 1, e);
	err[n] = '\0';
	fclose(e);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* 48 hours of hourly windows on two servers, three tenants; V > 0. */
static const char *fixture(void)
{
	static char path[300];
	st_db *db;
	int64_t t;
	unsigned x = 7;

	if (path[0])
		return path;
	snprintf(path, sizeof(path), "%.200s/bill.db", rm_test_tmpdir());
	unlink(path);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_begin(db), RM_OK);
	for (t = D0; t < D0 + 48 * HOUR; t += HOUR) {
		static const char *const sv[] = { "s1", "s2" }, *const ce[] = { "t1", "t2", "t3" };
		int s, r, c;

		for (s = 0; s < 2; s++)
			for (r = 0; r < ST_R_COUNT; r++) {
				uint64_t sum = 0;

				for (c = 0; c < 3; c++) {
					uint64_t v;

					x = x * 1103515245u + 12345u;
					v = (uint64_t)(x >> 4) * 1000;
					CU_ASSERT_EQUAL(st_add_usage(db, sv[s], t, HOUR, r, ce[c], v), RM_OK);
					sum += v;
				}
				CU_ASSERT_EQUAL(st_add_total(db, sv[s], t, HOUR, r, sum + 1234567, 0), RM_OK);
			}
	}
	CU_ASSERT_EQUAL(st_commit(db), RM_OK);
	st_close(db);
	return path;
}

/* Splits a CSV line (no quoted commas but the JSON details column) into
 * fields; returns their number. */
static size_t csv_fields(char *line, char **f, size_t max)
{
	size_t n = 0;
	char *p = line;

	while (n < max) {
		f[n++] = p;
		if (*p == '"') {
			char *q = p + 1;

			while (*q && !(q[0] == '"' && q[1] != '"'))
				q += q[0] == '"' ? 2 : 1;
			p = q + 1;
		} else {
			p += strcspn(p, ",");
		}
		if (*p != ',') {
			*p = '\0';
			break;
		}
		*p++ = '\0';
	}
	return n;
}

static int col(char **head, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(head[i], name))
			return (int)i;
	return -1;
}

static void test_focus_columns_and_reconciliation(void)
{
	/* FOCUS 1.2: the columns a dataset MUST have, and the conditional ones
	 * that apply to Rametr (usage is measured, resources and sub accounts
	 * exist); FOCUS 1.3: the allocation columns */
	static const char *const mandatory[] = {
		"BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency",
		"BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory", "ChargeClass",
		"ChargeDescription", "ChargePeriodEnd", "ChargePeriodStart", "ContractedCost",
		"EffectiveCost", "InvoiceIssuerName", "ListCost", "PricingCategory", "PricingQuantity",
		"PricingUnit", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
		"ConsumedQuantity", "ConsumedUnit", "ResourceId", "ResourceName", "ResourceType",
		"SubAccountId", "SubAccountName", "ListUnitPrice", "ContractedUnitPrice",
		"AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId",
	};
	static const char *const shares[] = { "none", "weighted", "even" };
	char args[1024], *head[64], *f[64], *line, *save = NULL, hbuf[4096];
	size_t nh, i, s;

	for (s = 0; s < 3; s++) {
		long long sum[2][ST_R_COUNT] = { { 0 } };
		int rows = 0;

		snprintf(args, sizeof(args), "bill --db '%s' --since 2026-11-02 --until 2026-11-04 --step 1h "
			 "--share-unaccountable %s", fixture(), shares[s]);
		CU_ASSERT_EQUAL_FATAL(run(args), 0);
		line = strtok_r(out, "\n", &save);
		CU_ASSERT_PTR_NOT_NULL_FATAL(line);
		snprintf(hbuf, sizeof(hbuf), "%s", line);
		nh = csv_fields(hbuf, head, 64);
		for (i = 0; i < sizeof(mandatory) / sizeof(mandatory[0]); i++) {
			if (col(head, nh, mandatory[i]) < 0)
				fprintf(stderr, "missing FOCUS column %s\n", mandatory[i]);
			CU_ASSERT(col(head, nh, mandatory[i]) >= 0);
		}
		for (i = 0; i < nh; i++)
			CU_ASSERT(col(head, i, head[i]) < 0); /* no column twice */
		while ((line = strtok_r(NULL, "\n", &save))) {
			size_t nf = csv_fields(line, f, 64);
			const char *srv = f[col(head, nh, "ResourceId")];
			enum st_resource r;

			CU_ASSERT_EQUAL_FATAL(nf, nh);
			rows++;
			/* UTC, start inclusive, end exclusive: one hour */
			CU_ASSERT_EQUAL(strlen(f[col(head, nh, "ChargePeriodStart")]), 20);
			CU_ASSERT_EQUAL(f[col(head, nh, "ChargePeriodStart")][19], 'Z');
			CU_ASSERT_STRING_EQUAL(f[col(head, nh, "BillingPeriodStart")], "2026-11-02T00:00:00Z");
			CU_ASSERT_STRING_EQUAL(f[col(head, nh, "BillingPeriodEnd")], "2026-11-04T00:00:00Z");
			CU_ASSERT_STRING_EQUAL(f[col(head, nh, "ChargeCategory")], "Usage");
			CU_ASSERT_STRING_EQUAL(f[col(head, nh, "BilledCost")], "0.000000"); /* no rate card */
			CU_ASSERT(f[col(head, nh, "AllocatedMethodDetails")][0] == '"');
			CU_ASSERT_EQUAL_FATAL(st_resource_parse(f[col(head, nh, "x_RametrResource")], &r), RM_OK);
			sum[srv[1] - '1'][r] += atoll(f[col(head, nh, "x_RametrQuantity")]);
			if (s > 0)
				CU_ASSERT_STRING_NOT_EQUAL(f[col(head, nh, "SubAccountId")], ST_CE_UNACCOUNTABLE);
		}
		CU_ASSERT_EQUAL(rows, 48 * 2 * ST_R_COUNT * (s ? 3 : 4));
		/* per server and resource the quantities sum exactly to U */
		for (i = 0; i < 2; i++) {
			char q[700];
			long long u;

			snprintf(q, sizeof(q), "usage --db '%s' --since 2026-11-02 --until 2026-11-04 "
				 "--server s%zu --group-by server -o csv", fixture(), i + 1);
			CU_ASSERT_EQUAL_FATAL(run(q), 0);
			for (enum st_resource r = 0; r < ST_R_COUNT; r++) {
				char want[64], *p;

				snprintf(want, sizeof(want), ",s%zu,%s,", i + 1, st_resource_name(r));
				p = strstr(out, want);
				CU_ASSERT_PTR_NOT_NULL_FATAL(p);
				u = atoll(p + strlen(want));
				CU_ASSERT_EQUAL(sum[i][r], u);
			}
		}
	}
	/* a price: 0.05 per core-hour */
	{
		char rates[400];
		FILE *fr;

		snprintf(rates, sizeof(rates), "%.200s/rates.ini", rm_test_tmpdir());
		fr = fopen(rates, "w");
		CU_ASSERT_PTR_NOT_NULL_FATAL(fr);
		fputs("currency = EUR\n[default]\ncpu = 0.05\n", fr);
		fclose(fr);
		snprintf(args, sizeof(args), "bill --db '%s' --period 2026-11 --rates '%s' --resource cpu -o json",
			 fixture(), rates);
		CU_ASSERT_EQUAL_FATAL(run(args), 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"BillingCurrency\": \"EUR\""));
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"ListUnitPrice\": \"0.050000\""));
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"BillingPeriodEnd\": \"2026-12-01T00:00:00Z\""));
	}
	CU_ASSERT_EQUAL(run("bill --db /nonexistent --period 2026-13"), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "invalid --period '2026-13'"));
}

/* Sums x_RametrQuantity per server (s1, s2) and resource over the CSV in
 * out; checks every row's charge period against cps/cpe when given.
 * Returns the number of rows. */
static int sum_quantities(long long sum[2][ST_R_COUNT], const char *cps, const char *cpe)
{
	char *head[64], *f[64], *line, *save = NULL, hbuf[4096];
	size_t nh;
	int rows = 0;

	memset(sum, 0, 2 * sizeof(sum[0]));
	line = strtok_r(out, "\n", &save);
	CU_ASSERT_PTR_NOT_NULL_FATAL(line);
	snprintf(hbuf, sizeof(hbuf), "%s", line);
	nh = csv_fields(hbuf, head, 64);
	while ((line = strtok_r(NULL, "\n", &save))) {
		enum st_resource r;

		CU_ASSERT_EQUAL_FATAL(csv_fields(line, f, 64), nh);
		CU_ASSERT_EQUAL_FATAL(st_resource_parse(f[col(head, nh, "x_RametrResource")], &r), RM_OK);
		sum[f[col(head, nh, "ResourceId")][1] - '1'][r] += atoll(f[col(head, nh, "x_RametrQuantity")]);
		if (cps)
			CU_ASSERT_STRING_EQUAL(f[col(head, nh, "ChargePeriodStart")], cps);
		if (cpe)
			CU_ASSERT_STRING_EQUAL(f[col(head, nh, "ChargePeriodEnd")], cpe);
		rows++;
	}
	return rows;
}

/* The charge period: by default the billing period (one row per tenant,
 * server and resource), else days or hours; every choice sums to U. */
static void test_charge_period(void)
{
	long long month[2][ST_R_COUNT], day[2][ST_R_COUNT], hour[2][ST_R_COUNT];
	static char step_out[sizeof(out)];
	char args[1024];
	int i, r;

	snprintf(args, sizeof(args), "bill --db '%s' --period 2026-11 --share-unaccountable weighted", fixture());
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	CU_ASSERT_EQUAL(sum_quantities(month, "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"), 2 * ST_R_COUNT * 3);
	snprintf(args, sizeof(args), "bill --db '%s' --period 2026-11 --share-unaccountable weighted "
		 "--charge-period day", fixture());
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	CU_ASSERT_EQUAL(sum_quantities(day, NULL, NULL), 2 * 2 * ST_R_COUNT * 3);
	snprintf(args, sizeof(args), "bill --db '%s' --since 2026-11-02 --until 2026-11-05 --step 1h", fixture());
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	memcpy(step_out, out, sizeof(out));
	snprintf(args, sizeof(args), "bill --db '%s' --since 2026-11-02 --until 2026-11-05 --charge-period hour",
		 fixture());
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	CU_ASSERT_STRING_EQUAL(out, step_out); /* hour is --step 1h */
	CU_ASSERT_EQUAL(sum_quantities(hour, NULL, NULL), 48 * 2 * ST_R_COUNT * 4);
	for (i = 0; i < 2; i++)
		for (r = 0; r < ST_R_COUNT; r++) {
			char q[700], want[64], *p;

			CU_ASSERT_EQUAL(month[i][r], day[i][r]);
			CU_ASSERT_EQUAL(month[i][r], hour[i][r]);
			snprintf(q, sizeof(q), "usage --db '%s' --since 2026-11 --server s%d --group-by server -o csv",
				 fixture(), i + 1);
			CU_ASSERT_EQUAL_FATAL(run(q), 0);
			snprintf(want, sizeof(want), ",s%d,%s,", i + 1, st_resource_name((enum st_resource)r));
			p = strstr(out, want);
			CU_ASSERT_PTR_NOT_NULL_FATAL(p);
			CU_ASSERT_EQUAL(month[i][r], atoll(p + strlen(want)));
		}
	/* an unaligned range: one charge period, exactly the range */
	snprintf(args, sizeof(args), "bill --db '%s' --since 2026-11-02T05:00:00Z --until 2026-11-03T07:00:00Z",
		 fixture());
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	CU_ASSERT(sum_quantities(day, "2026-11-02T05:00:00Z", "2026-11-03T07:00:00Z") > 0);
	snprintf(args, sizeof(args), "bill --db '%s' --period 2026-11 --charge-period week", fixture());
	CU_ASSERT_EQUAL(run(args), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "invalid --charge-period 'week'"));
	snprintf(args, sizeof(args), "bill --db '%s' --period 2026-11 --charge-period day --step 1h", fixture());
	CU_ASSERT_EQUAL(run(args), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "--charge-period or --step"));
}

/* Sums x_RametrQuantity of every export in dir, checking that the exports
 * tile [from, to) without gap or overlap. */
static void check_exports(const char *dir, int64_t from, int64_t to, long long *total)
{
	struct {
		long long a, b;
	} span[256];
	size_t n = 0, i, j;
	struct dirent *e;
	DIR *d = opendir(dir);

	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	*total = 0;
	while ((e = readdir(d))) {
		long long a, b;
		char path[1200], *buf, *line, *save = NULL;
		FILE *f;
		size_t len;

		if (e->d_name[0] == '.')
			continue;
		CU_ASSERT_FATAL(sscanf(e->d_name, "bill-%lld-%lld.csv", &a, &b) == 2);
		CU_ASSERT_PTR_NULL(strstr(e->d_name, ".tmp"));
		CU_ASSERT_FATAL(n < 256);
		span[n].a = a;
		span[n++].b = b;
		snprintf(path, sizeof(path), "%.600s/%.500s", dir, e->d_name);
		f = fopen(path, "r");
		CU_ASSERT_PTR_NOT_NULL_FATAL(f);
		buf = malloc(16 << 20);
		CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
		len = fread(buf, 1, (16 << 20) - 1, f);
		CU_ASSERT(feof(f));
		buf[len] = '\0';
		fclose(f);
		for (line = strtok_r(buf, "\n", &save), line = strtok_r(NULL, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			char *p = strrchr(line, ','), *q;

			/* ...,x_RametrQuantity,x_RametrUnit,x_RametrMeasured,x_RametrUnaccountableShare */
			for (i = 0; i < 3 && p; i++) {
				*p = '\0';
				p = strrchr(line, ',');
			}
			CU_ASSERT_PTR_NOT_NULL_FATAL(p);
			*total += strtoll(p + 1, &q, 10);
		}
		free(buf);
	}
	closedir(d);
	/* sorted by start, they must chain from `from` to `to` */
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			if (span[j].a < span[i].a) {
				long long ta = span[i].a, tb = span[i].b;

				span[i] = span[j];
				span[j].a = ta;
				span[j].b = tb;
			}
	CU_ASSERT(n > 0);
	CU_ASSERT_EQUAL(n ? span[0].a : -1, from);
	for (i = 1; i < n; i++)
		CU_ASSERT_EQUAL(span[i].a, span[i - 1].b);
	CU_ASSERT_EQUAL(n ? span[n - 1].b : -1, to);
}

/* A fingerprint of what the job has written so far: the state file's
 * inode, size and mtime, and the names of the exports in dir. */
static unsigned long long job_mark(const char *state, const char *dir)
{
	unsigned long long h = 1469598103934665603ULL;
	struct stat sb;
	struct dirent *e;
	DIR *d;

	if (stat(state, &sb) == 0)
		h = (h ^ (unsigned long long)sb.st_ino ^ (unsigned long long)sb.st_size << 20 ^
		     (unsigned long long)sb.st_mtim.tv_nsec << 7 ^ (unsigned long long)sb.st_mtim.tv_sec) *
		    1099511628211ULL;
	if ((d = opendir(dir))) {
		while ((e = readdir(d))) {
			const char *c;

			if (strncmp(e->d_name, "bill-", 5) || strstr(e->d_name, ".tmp"))
				continue;
			for (c = e->d_name; *c; c++)
				h = (h ^ (unsigned char)*c) * 1099511628211ULL;
			h += 0x9e3779b97f4a7c15ULL;
		}
		closedir(d);
	}
	return h;
}

static double mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Starts the --since-last job on db into state/dir; its output to /dev/null. */
static pid_t job_start(const char *db, const char *state, const char *dir, int weighted)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(RAMETRCTL_PATH, "rametrctl", "bill", "--db", db, "--since", "2026-11-02",
		      "--since-last", "--state", state, "--out", dir, "--step", "1h",
		      "--share-unaccountable", weighted ? "weighted" : "even", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/*
 * Waits for the job pid to change what it has written (job_mark differs
 * from before) and kills it at once (SIGKILL), or until it exits; reaps it
 * into *st. Returns 1 if it was killed after writing.
 */
static int kill_after_write(pid_t pid, const char *state, const char *dir, unsigned long long before, int *st)
{
	pid_t r;

	while ((r = waitpid(pid, st, WNOHANG)) == 0) {
		if (job_mark(state, dir) != before) {
			kill(pid, SIGKILL);
			CU_ASSERT_EQUAL(waitpid(pid, st, 0), pid);
			return WIFSIGNALED(*st);
		}
		usleep(100);
	}
	CU_ASSERT_EQUAL(r, pid);
	return 0;
}

static void test_since_last_killed(void)
{
	char dir[400], state[400], args[2000], db[400], tdir[400], tstate[400];
	int64_t horizon = D0, next;
	long long exported, want;
	double t0, run_us;
	st_db *h;
	int i, st, killed = 0, progressed = 0, aimed = 0;
	unsigned seed = (unsigned)time(NULL);
	pid_t pid;

	snprintf(db, sizeof(db), "%s", fixture());
	snprintf(dir, sizeof(dir), "%.200s/exports", rm_test_tmpdir());
	snprintf(state, sizeof(state), "%.200s/bill.state", rm_test_tmpdir());
	snprintf(tdir, sizeof(tdir), "%.200s/timed", rm_test_tmpdir());
	snprintf(tstate, sizeof(tstate), "%.200s/timed.state", rm_test_tmpdir());
	mkdir(dir, 0755);
	mkdir(tdir, 0755);
	unlink(state);
	unlink(tstate);
	srand(seed);
	CU_ASSERT_EQUAL_FATAL(st_open(&h, db, 0), RM_OK);
	/* one run that is not killed, exporting 2 hours into a scratch
	 * directory: how long a run that writes takes */
	CU_ASSERT_EQUAL(st_horizon_set(h, D0 + 2 * HOUR), RM_OK);
	t0 = mono_us();
	pid = job_start(db, tstate, tdir, 1);
	CU_ASSERT_FATAL(pid > 0);
	CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
	run_us = mono_us() - t0;
	CU_ASSERT_FATAL(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CU_ASSERT_NOT_EQUAL(job_mark(tstate, tdir), job_mark("/nonexistent", "/nonexistent"));
	/* at least 50 runs, and on until 3 killed runs had written (at most
	 * 150: the horizon reaches the end of the data after about 96) */
	for (i = 0; i < 150 && (i < 50 || progressed < 3); i++) {
		unsigned long long before = job_mark(state, dir);

		/* the horizon moves by 0 or 1 hour between runs, often to 17 s
		 * short of an hour, and never back (a horizon that went back
		 * below an hour already exported would have the job's exports
		 * run past the U the test sums); it starts where the timed run
		 * left it */
		next = horizon + (rand() % 2) * HOUR - (rand() % 2) * 17 * SEC;
		if (next > D0 + 48 * HOUR)
			next = D0 + 48 * HOUR;
		if (next > horizon)
			horizon = next;
		if (horizon < D0 + 2 * HOUR)
			horizon = D0 + 2 * HOUR;
		CU_ASSERT_EQUAL(st_horizon_set(h, horizon), RM_OK);
		pid = job_start(db, state, dir, i % 2);
		CU_ASSERT_FATAL(pid > 0);
		if (i % 4 == 3) {
			/* SIGKILL as soon as it is seen to have written (an
			 * export, its state), before it finishes */
			aimed += kill_after_write(pid, state, dir, before, &st);
		} else {
			/* SIGKILL at a uniformly random point over 1.5 times a
			 * run: before, during or after its writes */
			usleep((useconds_t)(1.5 * run_us * (rand() / ((double)RAND_MAX + 1))));
			kill(pid, SIGKILL);
			CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
		}
		CU_ASSERT(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) == 0));
		if (WIFSIGNALED(st)) {
			killed++;
			progressed += job_mark(state, dir) != before;
		}
	}
	/* the kills fell on runs that had got as far as writing, and on some
	 * that had not finished */
	CU_ASSERT(killed > 0);
	CU_ASSERT(progressed > 0);
	st_close(h);
	/* a last run that is not killed brings it up to the horizon */
	snprintf(args, sizeof(args), "bill --db '%s' --since 2026-11-02 --since-last --state '%s' --out '%s' "
		 "--step 1h", db, state, dir);
	CU_ASSERT_EQUAL(run(args), 0);
	CU_ASSERT_EQUAL(run(args), 0); /* nothing new: no second export */
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "nothing new settled"));
	check_exports(dir, D0, horizon - horizon % HOUR, &exported);
	/* everything settled, exactly once: the sum of U over the same hours */
	{
		char q[1200], *p;
		size_t k;

		want = 0;
		snprintf(q, sizeof(q), "usage --db '%s' --since 2026-11-02 --until %lld --group-by resource -o csv",
			 db, (long long)((horizon - horizon % HOUR) / SEC));
		CU_ASSERT_EQUAL_FATAL(run(q), 0);
		for (p = strchr(out, '\n'); p && p[1]; p = strchr(p + 1, '\n')) {
			char *f[16], line[512];

			snprintf(line, sizeof(line), "%.*s", (int)strcspn(p + 1, "\n"), p + 1);
			k = csv_fields(line, f, 16);
			CU_ASSERT_EQUAL_FATAL(k, 6);
			want += atoll(f[3]);
		}
	}
	CU_ASSERT_EQUAL(exported, want);
	fprintf(stderr, "since-last (seed %u): a run takes %.1f ms; %d runs, %d killed, %d of them after writing (%d "
		"aimed there); exported %lld (U %lld)\n", seed, run_us / 1e3, i, killed, progressed, aimed, exported, want);
}

/* The job with the default charge period exports whole settled days, each
 * export one charge period (its own range), once. */
static void test_since_last_whole_days(void)
{
	char dir[400], state[400], args[2000], path[600], cps[40], cpe[40];
	long long sum[2][ST_R_COUNT];
	int64_t horizon, until;
	st_db *h;
	int i, r;

	snprintf(dir, sizeof(dir), "%.200s/exports_days", rm_test_tmpdir());
	snprintf(state, sizeof(state), "%.200s/days.state", rm_test_tmpdir());
	mkdir(dir, 0755);
	unlink(state);
	CU_ASSERT_EQUAL_FATAL(st_open(&h, fixture(), 0), RM_OK);
	CU_ASSERT_EQUAL(st_horizon_set(h, D0 + 36 * HOUR), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_horizon_get(h, &horizon), RM_OK);
	st_close(h);
	until = horizon - horizon % (24 * HOUR);
	snprintf(args, sizeof(args), "bill --db '%s' --since 2026-11-02 --since-last --state '%s' --out '%s'",
		 fixture(), state, dir);
	CU_ASSERT_EQUAL_FATAL(run(args), 0);
	snprintf(path, sizeof(path), "%s/bill-%lld-%lld.csv", dir, (long long)D0, (long long)until);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, path));
	CU_ASSERT_EQUAL(run(args), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "nothing new settled"));
	{
		FILE *f = fopen(path, "r");
		size_t n;

		CU_ASSERT_PTR_NOT_NULL_FATAL(f);
		n = fread(out, 1, sizeof(out) - 1, f);
		out[n] = '\0';
		fclose(f);
	}
	snprintf(cps, sizeof(cps), "2026-11-02T00:00:00Z");
	snprintf(cpe, sizeof(cpe), "2026-11-0%dT00:00:00Z", 2 + (int)((until - D0) / (24 * HOUR)));
	CU_ASSERT_EQUAL(sum_quantities(sum, cps, cpe), 2 * ST_R_COUNT * 4);
	for (i = 0; i < 2; i++)
		for (r = 0; r < ST_R_COUNT; r++) {
			char q[700], want[64], *p;

			snprintf(q, sizeof(q), "usage --db '%s' --since 2026-11-02 --until %lld --server s%d "
				 "--group-by server -o csv", fixture(), (long long)(until / SEC), i + 1);
			CU_ASSERT_EQUAL_FATAL(run(q), 0);
			snprintf(want, sizeof(want), ",s%d,%s,", i + 1, st_resource_name((enum st_resource)r));
			p = strstr(out, want);
			CU_ASSERT_PTR_NOT_NULL_FATAL(p);
			CU_ASSERT_EQUAL(sum[i][r], atoll(p + strlen(want)));
		}
}

static CU_TestInfo cases[] = {
	{ "unaccountable share: none, weighted, even, exact", test_allocation },
	{ "rate card: precedence, errors", test_rate_card },
	{ "the rate card is read with the configuration files' grammar", test_rate_card_grammar },
	{ "FOCUS columns, reconciliation with U", test_focus_columns_and_reconciliation },
	{ "charge period: the billing period, days, hours", test_charge_period },
	{ "--since-last killed and re-run 50 times: each period once", test_since_last_killed },
	{ "--since-last by default: whole days, one charge period an export", test_since_last_whole_days },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("ctl_bill", cases)
