/*
 * ctl_report_test.c - tests of 'rametrctl report': the choice of chart
 * buckets and the HTML escaping, then the real rametrctl binary on a real
 * SQLite file with known values (two servers, four tenants, one of them
 * named with HTML's special characters, V with reasons and an unexplained
 * rest, a previous period), the report loaded in real headless Chromium:
 * it renders, its charts have drawn areas, and every amount shown (tenants,
 * V, totals, all servers, previous period, reasons) equals what the test
 * wrote to the database.
 */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl_report.h"
#include "rm_err.h"
#include "rm_test.h"
#include "st.h"
#include "banned.h"

#define SEC 1000000000LL
#define T0 (1800000000LL * SEC) /* start of the period */
#define SPAN (3600 * SEC)
#define NWIN 360                /* windows of 1 s, one every 10 s */
#define NS 2
#define NT 4

static const char *const servers[NS] = { "db1", "web&1" };
static const char *const tenants[NT] = { "c1", "c2", "x<b>&\"'y", "c3" };

/* The test's own account of what it wrote: [server][tenant, V = NT, U = NT + 1][resource]. */
static int64_t want[NS][NT + 2][ST_R_COUNT], want_prev[NS][NT + 2][ST_R_COUNT];
static int64_t want_why[NS][3][ST_R_COUNT]; /* unsegmented, lost, unexplained */
static const char *const reasons[3] = { "unsegmented", "lost", ST_REASON_UNEXPLAINED };

static void test_buckets(void)
{
	CU_ASSERT_EQUAL(ctl_report_bucket_ns(7 * 86400 * SEC, SEC, 240), 3600 * SEC);
	CU_ASSERT_EQUAL(ctl_report_nbuckets(7 * 86400 * SEC, 3600 * SEC), 168);
	CU_ASSERT_EQUAL(ctl_report_bucket_ns(30 * SEC, SEC, 240), SEC);
	CU_ASSERT_EQUAL(ctl_report_nbuckets(30 * SEC, SEC), 30);
	CU_ASSERT_EQUAL(ctl_report_bucket_ns(3600 * SEC, SEC, 240), 15 * SEC);
	CU_ASSERT_EQUAL(ctl_report_bucket_ns(3601 * SEC, SEC, 240), 30 * SEC);
	CU_ASSERT_EQUAL(ctl_report_nbuckets(3601 * SEC, 30 * SEC), 121);
	CU_ASSERT_EQUAL(ctl_report_bucket_ns(31 * 86400 * SEC, SEC, 240), 21600 * SEC);
	/* beyond the table: whole multiples of 28 days, still within the bound */
	CU_ASSERT(ctl_report_nbuckets(100LL * 365 * 86400 * SEC,
				      ctl_report_bucket_ns(100LL * 365 * 86400 * SEC, SEC, 240)) <= 240);
	CU_ASSERT_EQUAL(ctl_report_bucket_ns(100LL * 365 * 86400 * SEC, SEC, 240) % (2419200 * SEC), 0);
	CU_ASSERT_EQUAL(ctl_report_bucket_ns(60 * SEC, 10 * SEC, 240), 10 * SEC);
	CU_ASSERT_EQUAL(ctl_report_bucket_ns(0, SEC, 240), SEC);
}

static void test_escape(void)
{
	char buf[128] = { 0 };
	FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(ctl_html_escape(f, "a<b>&\"c'd"), 0);
	fclose(f);
	CU_ASSERT_STRING_EQUAL(buf, "a&lt;b&gt;&amp;&quot;c&#39;d");
}

/* An empty period is a valid document that says so. */
static void test_empty(void)
{
	struct ctl_report_period p = { T0, T0 + SPAN, 15 * SEC, 240, T0 };
	struct ctl_report *r = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL_FATAL(ctl_report_new(&r, &p, NULL, 0, NULL, 0, NULL, 0), RM_OK);
	CU_ASSERT_EQUAL(ctl_report_add_bucket(r, 240, NULL, 0), RM_EINVAL);
	CU_ASSERT_EQUAL(ctl_report_write(r, f), RM_OK);
	fclose(f);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "No usage was recorded in this period."));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "</html>"));
	ctl_report_free(r);
	free(buf);
	p.bucket_ns = 0;
	CU_ASSERT_EQUAL(ctl_report_new(&r, &p, NULL, 0, NULL, 0, NULL, 0), RM_EINVAL);
	CU_ASSERT_PTR_NULL(r);
}

/* Usage of tenant k on server s in window i of the period (prev: the one before). */
static uint64_t usage(int s, int k, int res, int i, int prev)
{
	static const uint64_t base[ST_R_COUNT] = { 20000000, 3000, 5000, 700, 9000 };

	if ((s == 0 && k == 3) || (s == 1 && (k == 1 || k == 2)))
		return 0; /* c3 only on web&1; c2 and the odd name only on db1 */
	if (res == ST_R_DISK_READ && k != 1)
		return 0;
	return base[res] * (uint64_t)(k + 1) + (uint64_t)(i % 7) * 1000 * (uint64_t)(s + 1) + (prev ? 12345 : 0);
}

static void fill(st_db *d, int prev)
{
	int s, k, res, i;

	CU_ASSERT_EQUAL_FATAL(st_begin(d), RM_OK);
	for (s = 0; s < NS; s++)
		for (i = 0; i < NWIN; i++) {
			int64_t t = T0 - (prev ? SPAN : 0) + (int64_t)i * 10 * SEC;

			for (res = 0; res < ST_R_COUNT; res++) {
				uint64_t sum = 0, unseg = 4000 + (uint64_t)i, lost = res == ST_R_CPU ? 900 : 0;
				uint64_t rest = (uint64_t)(i % 3) * 10;

				for (k = 0; k < NT; k++) {
					uint64_t v = usage(s, k, res, i, prev);

					if (!v)
						continue;
					CU_ASSERT_EQUAL(st_add_usage(d, servers[s], t, SEC, res, tenants[k], v), RM_OK);
					sum += v;
					(prev ? want_prev : want)[s][k][res] += (int64_t)v;
				}
				CU_ASSERT_EQUAL(st_add_unacct(d, servers[s], t, SEC, res, "unsegmented", unseg), RM_OK);
				if (lost)
					CU_ASSERT_EQUAL(st_add_unacct(d, servers[s], t, SEC, res, "lost", lost), RM_OK);
				CU_ASSERT_EQUAL(st_add_total(d, servers[s], t, SEC, res, sum + unseg + lost + rest,
							     res == ST_R_CPU ? 2 * SEC : 0), RM_OK);
				(prev ? want_prev : want)[s][NT][res] += (int64_t)(unseg + lost + rest);
				(prev ? want_prev : want)[s][NT + 1][res] += (int64_t)(sum + unseg + lost + rest);
				if (!prev) {
					want_why[s][0][res] += (int64_t)unseg;
					want_why[s][1][res] += (int64_t)lost;
					want_why[s][2][res] += (int64_t)rest;
				}
			}
		}
	CU_ASSERT_EQUAL_FATAL(st_commit(d), RM_OK);
}

/* Appended to a copy of the report (the report itself has no script): lists
 * every amount the page shows with its raw value, and whether the charts
 * were laid out and drawn. */
static const char check_js[] =
	"<script>(function(){var o=[],drawn=0,laid=0,caps=0;"
	"document.querySelectorAll('svg path.capacity').forEach(function(p){if(p.getBBox().width>100)caps++;});"
	"document.querySelectorAll('svg path.area').forEach(function(p){var b=p.getBBox();"
	"if(b.width>100&&b.height>1)drawn++;});"
	"document.querySelectorAll('.panel svg').forEach(function(s){if(s.getBoundingClientRect().width>150)laid++;});"
	"document.querySelectorAll('table.tenants tr[data-tenant]').forEach(function(tr){"
	"var srv=tr.closest('table').getAttribute('data-server');"
	"tr.querySelectorAll('td[data-raw]').forEach(function(td){"
	"o.push(['T',srv,tr.getAttribute('data-tenant'),td.getAttribute('data-res'),td.getAttribute('data-raw')]);});});"
	"document.querySelectorAll('table.reasons tr[data-reason]').forEach(function(tr){"
	"var srv=tr.closest('section').getAttribute('data-server');"
	"tr.querySelectorAll('td[data-raw]').forEach(function(td){"
	"o.push(['R',srv,tr.getAttribute('data-reason'),td.getAttribute('data-res'),td.getAttribute('data-raw')]);});});"
	"var pre=document.createElement('pre');pre.id='rmcheck';"
	"pre.textContent='drawn '+drawn+' laid '+laid+' caps '+caps+'\\n'+o.map(function(a){return a.map(function(x){return encodeURIComponent(x)||'-';}).join(' ');}).join('\\n')+'\\nend';"
	"document.body.appendChild(pre);})();</script>";

static char dir[256], db[300], html[300], page[300], dom[300];

/* The whole file at path, malloc'd and NUL-terminated ("" if unreadable). */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	char chunk[65536];
	size_t n;

	while (f && m && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		fwrite(chunk, 1, n, m);
	if (f)
		fclose(f);
	if (m)
		fclose(m);
	return buf ? buf : strdup("");
}

static int run(const char *const argv[], const char *log, int ms)
{
	pid_t pid = rm_test_spawn(argv, log);

	return pid < 0 ? -1 : rm_test_wait(pid, ms);
}

/* percent-decodes s in place */
static void pct_decode(char *s)
{
	char *o = s;

	for (; *s; s++) {
		unsigned x;

		if (*s == '%' && sscanf(s + 1, "%2x", &x) == 1) {
			*o++ = (char)x;
			s += 2;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

static int find_server(const char *name)
{
	int s;

	for (s = 0; s < NS; s++)
		if (!strcmp(servers[s], name))
			return s;
	return name[0] ? -2 : -1; /* "" = all servers */
}

static int64_t sum_servers(int64_t tab[NS][NT + 2][ST_R_COUNT], int s, int k, int res)
{
	return s >= 0 ? tab[s][k][res] : tab[0][k][res] + tab[1][k][res];
}

/* Checks one line "T server tenant res raw" or "R server reason res raw". Returns 1 if it matches. */
static int check_line(char *line, int *ntable, int *nreason)
{
	char kind[4], srv[256], name[256], res[32];
	long long raw;
	int s, k, r;

	if (sscanf(line, "%3s %255s %255s %31s %lld", kind, srv, name, res, &raw) != 5)
		return 0;
	if (!strcmp(srv, "-"))
		srv[0] = '\0';
	if (!strcmp(name, "-"))
		name[0] = '\0';
	pct_decode(srv);
	pct_decode(name);
	if ((s = find_server(srv)) == -2)
		return 0;
	if (kind[0] == 'R') {
		for (k = 0; k < 3 && strcmp(reasons[k], name); k++)
			;
		if (k == 3 || s < 0)
			return 0;
		for (r = 0; r < ST_R_COUNT && strcmp(st_resource_name(r), res); r++)
			;
		(*nreason)++;
		return r < ST_R_COUNT && want_why[s][k][r] == raw;
	}
	if (!strcmp(name, ST_CE_UNACCOUNTABLE))
		k = NT;
	else if (!name[0])
		k = NT + 1;
	else
		for (k = 0; k < NT && strcmp(tenants[k], name); k++)
			;
	if (k == NT && strcmp(name, ST_CE_UNACCOUNTABLE))
		return 0;
	(*ntable)++;
	if (!strcmp(res, "cpu_prev"))
		return sum_servers(want_prev, s, k, ST_R_CPU) == raw;
	for (r = 0; r < ST_R_COUNT && strcmp(st_resource_name(r), res); r++)
		;
	return r < ST_R_COUNT && sum_servers(want, s, k, r) == raw;
}

static void test_chromium(void)
{
	char since[32], until[32], udir[300], log[300], *text, *p, *line, *save;
	const char *chromium = "/usr/bin/chromium";
	int ntable = 0, nreason = 0, bad = 0, drawn = -1, laid = -1, caps = -1;
	size_t len;
	FILE *f;
	st_db *d = NULL;

	if (access(chromium, X_OK) != 0)
		RM_TEST_SKIP("no %s (Debian package chromium)", chromium);
	snprintf(dir, sizeof(dir), "%s", rm_test_tmpdir());
	snprintf(db, sizeof(db), "%s/rametr.db", dir);
	snprintf(html, sizeof(html), "%s/report.html", dir);
	snprintf(page, sizeof(page), "%s/check.html", dir);
	snprintf(dom, sizeof(dom), "%s/dom.html", dir);
	snprintf(log, sizeof(log), "%s/chromium.log", dir);
	snprintf(udir, sizeof(udir), "--user-data-dir=%s/profile", dir);
	CU_ASSERT_EQUAL_FATAL(st_open(&d, db, 0), RM_OK);
	fill(d, 0);
	fill(d, 1);
	st_close(d);

	snprintf(since, sizeof(since), "%lld", T0 / SEC);
	snprintf(until, sizeof(until), "%lld", (T0 + SPAN) / SEC);
	{
		const char *argv[] = { RAMETRCTL_PATH, "report", "--db", db, "--since", since, "--until", until,
				       "-o", html, NULL };
		char rlog[300];

		snprintf(rlog, sizeof(rlog), "%s/report.log", dir);
		CU_ASSERT_EQUAL_FATAL(run(argv, rlog, 30000), 0);
	}
	/* self-contained: nothing to fetch, no script; the odd name escaped */
	text = slurp(html);
	len = strlen(text);
	CU_ASSERT(len > 20000);
	CU_ASSERT_PTR_NULL(strstr(text, "<script"));
	CU_ASSERT_PTR_NULL(strstr(text, "http:"));
	CU_ASSERT_PTR_NULL(strstr(text, "https:"));
	CU_ASSERT_PTR_NULL(strstr(text, "src="));
	CU_ASSERT_PTR_NULL(strstr(text, "url("));
	CU_ASSERT_PTR_NULL(strstr(text, "<link"));
	CU_ASSERT_PTR_NULL(strstr(text, "x<b>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "x&lt;b&gt;&amp;&quot;&#39;y"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "web&amp;1"));

	/* a copy with the check script before </body> */
	p = strstr(text, "</body>");
	f = p ? fopen(page, "w") : NULL;
	if (!f)
		free(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fwrite(text, 1, (size_t)(p - text), f);
	fputs(check_js, f);
	fputs(p, f);
	CU_ASSERT_EQUAL(fclose(f), 0);
	free(text);
	{
		char url[320];
		const char *argv[] = { "/bin/sh", "-c", "exec \"$0\" \"$@\" >\"$RM_DOM\"", chromium, "--headless",
				       "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
				       "--disable-background-networking", "--disable-component-update",
				       "--disable-sync", udir, "--window-size=1280,2000", "--dump-dom", url, NULL };

		snprintf(url, sizeof(url), "file://%s", page);
		setenv("RM_DOM", dom, 1);
		CU_ASSERT_EQUAL_FATAL(run(argv, log, 120000), 0);
	}
	text = slurp(dom);
	p = strstr(text, "<pre id=\"rmcheck\">");
	if (!p)
		fprintf(stderr, "chromium wrote no check result; its log:\n%s\n", rm_test_slurp(log));
	if (!p)
		free(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	p += strlen("<pre id=\"rmcheck\">");
	CU_ASSERT_EQUAL(sscanf(p, "drawn %d laid %d caps %d", &drawn, &laid, &caps), 3);
	CU_ASSERT_EQUAL(caps, NS); /* one capacity line per server's CPU chart */
	/* per server: cpu, net and disk charts, each with 3 or 4 tenant layers and V */
	CU_ASSERT(drawn >= NS * 3 * 3);
	CU_ASSERT_EQUAL(laid, NS * 3);
	for (line = strtok_r(p, "\n", &save); line && strncmp(line, "end", 3); line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "drawn", 5))
			continue;
		if (!check_line(line, &ntable, &nreason)) {
			fprintf(stderr, "shown amount differs from the database: %s\n", line);
			bad++;
		}
	}
	CU_ASSERT_PTR_NOT_NULL(line);
	CU_ASSERT_EQUAL(bad, 0);
	/* all servers: 4 tenants + V + U; db1: 3 + 2; web&1: 2 + 2; 6 amounts each */
	CU_ASSERT_EQUAL(ntable, (6 + 5 + 4) * 6);
	/* db1 and web&1: unsegmented, lost (cpu), unexplained; 5 amounts each */
	CU_ASSERT_EQUAL(nreason, NS * 3 * 5);
	free(text);
}

/* Exit codes: 2 for bad arguments, 1 for a database that cannot be read; no file then. */
static void test_exit_codes(void)
{
	char out[300], log[300], missing[300];
	const char *no_output[] = { RAMETRCTL_PATH, "report", "--db", "/nonexistent.db", NULL };
	const char *bad_time[] = { RAMETRCTL_PATH, "report", "--since", "yesterday-ish", "-o", out, NULL };
	const char *reversed[] = { RAMETRCTL_PATH, "report", "--since", "1h", "--until", "2h", "-o", out, NULL };
	const char *extra[] = { RAMETRCTL_PATH, "report", "-o", out, "stray", NULL };
	const char *no_db[] = { RAMETRCTL_PATH, "report", "--db", missing, "-o", out, NULL };

	snprintf(out, sizeof(out), "%s/never.html", rm_test_tmpdir());
	snprintf(log, sizeof(log), "%s/exit.log", rm_test_tmpdir());
	snprintf(missing, sizeof(missing), "%s/missing.db", rm_test_tmpdir());
	CU_ASSERT_EQUAL(run(no_output, log, 10000), 2);
	CU_ASSERT_EQUAL(run(bad_time, log, 10000), 2);
	CU_ASSERT_EQUAL(run(reversed, log, 10000), 2);
	CU_ASSERT_EQUAL(run(extra, log, 10000), 2);
	CU_ASSERT_EQUAL(run(no_db, log, 10000), 1);
	CU_ASSERT_NOT_EQUAL(access(out, F_OK), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(rm_test_slurp(log), "no output file"));
}

static CU_TestInfo cases[] = {
	{ "chart buckets fit the bound", test_buckets },
	{ "names are escaped for HTML", test_escape },
	{ "an empty period says so", test_empty },
	{ "bad arguments exit 2, an unreadable database 1", test_exit_codes },
	{ "headless Chromium shows the database's amounts", test_chromium },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("ctl_report", cases)
