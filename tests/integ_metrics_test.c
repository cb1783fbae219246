/*
 * integ_metrics_test.c - the aggregator's /metrics end to end: a real
 * rametr-aggregator with [metrics] listen on an ephemeral loopback port,
 * two real collectors (replay backend) streaming recorded work of three
 * tenants over nng, and the endpoint read with nng's HTTP client. The text
 * passes Debian's `promtool check metrics`; per server and resource the
 * tenants' counters (V included) sum exactly to the server's total, and
 * every counter equals what the database holds once all windows settled.
 * The Grafana dashboard in the repository is well-formed JSON (Debian's jq)
 * and every metric its queries name is one the endpoint serves.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "rm_test.h"
#include "rm_err.h"
#include "st.h"

#define NCE 3
#define NREQ 900
#define PROMTOOL "/usr/bin/promtool"
#define JQ "/usr/bin/jq"

static const char *const nodes[2] = { "n1", "n2" };
static const char *const ces[NCE] = { "c1", "c2", "c3" };
static const char *const families[ST_R_COUNT] = {
	"cpu_seconds_total", "network_receive_bytes_total", "network_transmit_bytes_total",
	"fs_reads_bytes_total", "fs_writes_bytes_total",
};
static char dir[256], conf[300], db[300], url[300], agglog[300];
static pid_t agg = -1; /* stopped at exit, also after a failed assertion */

static void stop_aggregator(void)
{
	if (agg > 0) {
		kill(agg, SIGKILL);
		rm_test_wait(agg, 5000);
		agg = -1;
	}
}

/* A recorded stream: NREQ requests of the 3 CEs (node-dependent mix), each
 * a recv, some CPU, a send, every 30 ms, plus a little work outside any
 * request (V "unsegmented"). */
static void write_stream(const char *path, int node)
{
	FILE *f = fopen(path, "w");
	uint64_t t = 1000000;
	int k;

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "rametr-events 1 window_ns=1000000000 offset_ns=1700000000000000000 ncpu=2\n");
	for (k = 0; k < NREQ; k++) {
		int c = (k * (node + 1)) % NCE;
		uint32_t tid = 300 + (uint32_t)c;
		uint64_t d = 400000 + (uint64_t)(k * 7919 % 1000) * 900;

		fprintf(f, "%llu 0 switch prev=0 prev_state=R next=%u next_pid=300\n", (unsigned long long)t, tid);
		fprintf(f, "%llu 0 recv tid=%u pid=300 comm=srv sock=%d fam=4 laddr=127.0.0.1:7000 raddr=127.0.0.%d:4100%d bytes=%d\n",
			(unsigned long long)(t + 1), tid, 10 + c, 2 + c, c, 60 + c);
		fprintf(f, "%llu 0 send tid=%u pid=300 sock=%d fam=4 laddr=127.0.0.1:7000 raddr=127.0.0.%d:4100%d bytes=%d\n",
			(unsigned long long)(t + 1 + d), tid, 10 + c, 2 + c, c, 400 + 10 * c + node);
		fprintf(f, "%llu 0 switch prev=%u prev_state=S next=0\n", (unsigned long long)(t + 2 + d), tid);
		t += 30000000;
	}
	CU_ASSERT_EQUAL(fclose(f), 0);
}

/* GET url into a malloc'd string; NULL on failure. */
static char *http_get(const char *u)
{
	nng_url *nu = NULL;
	nng_http_client *cli = NULL;
	nng_http_req *req = NULL;
	nng_http_res *res = NULL;
	nng_aio *aio = NULL;
	char *out = NULL;
	void *body;
	size_t len;

	if (nng_url_parse(&nu, u) == 0 && nng_http_client_alloc(&cli, nu) == 0 && nng_http_req_alloc(&req, nu) == 0 &&
	    nng_http_res_alloc(&res) == 0 && nng_aio_alloc(&aio, NULL, NULL) == 0) {
		nng_aio_set_timeout(aio, 5000);
		nng_http_client_transact(cli, req, res, aio);
		nng_aio_wait(aio);
		if (nng_aio_result(aio) == 0 && nng_http_res_get_status(res) == 200) {
			nng_http_res_get_data(res, &body, &len);
			if ((out = malloc(len + 1)) != NULL) {
				memcpy(out, body, len);
				out[len] = '\0';
			}
		}
	}
	if (aio)
		nng_aio_free(aio);
	if (res)
		nng_http_res_free(res);
	if (req)
		nng_http_req_free(req);
	if (cli)
		nng_http_client_free(cli);
	nng_url_free(nu);
	return out;
}

/* A counter's exact value: seconds with 9 decimals as ns, bytes as is; -1 if absent. */
static int64_t counter(const char *text, const char *line_prefix, int cpu)
{
	const char *p = text;
	size_t n = strlen(line_prefix);
	unsigned long long a, b;

	while ((p = strstr(p, line_prefix)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ') {
			if (cpu)
				return sscanf(p + n + 1, "%llu.%9llu", &a, &b) == 2 ? (int64_t)(a * 1000000000ULL + b) : -1;
			return sscanf(p + n + 1, "%llu", &a) == 1 ? (int64_t)a : -1;
		}
		p += n;
	}
	return -1;
}

static int64_t tenant_counter(const char *text, int r, const char *node, const char *ce)
{
	char pre[256];

	snprintf(pre, sizeof(pre), "rametr_tenant_%s{server=\"%s\",tenant=\"%s\"}", families[r], node, ce);
	return counter(text, pre, r == ST_R_CPU);
}

static int64_t server_counter(const char *text, int r, const char *node)
{
	char pre[256];

	snprintf(pre, sizeof(pre), "rametr_server_%s{server=\"%s\"}", families[r], node);
	return counter(text, pre, r == ST_R_CPU);
}

/* U_c, V (ST_CE_UNACCOUNTABLE, signed) or U (ce NULL) of node and resource in the database. */
static int64_t stored(const char *node, const char *ce, int r)
{
	struct st_query q = { INT64_MIN, INT64_MAX, node, NULL, r, 0 };
	struct st_row *rows = NULL;
	size_t n = 0, i;
	int64_t v = 0;
	st_db *d = NULL;

	if (st_open(&d, db, ST_OPEN_READONLY) != RM_OK)
		return -1;
	if (st_query_usage(d, &q, &rows, &n) == RM_OK)
		for (i = 0; i < n; i++) {
			if (!ce)
				v = (int64_t)rows[i].total;
			else if (!strcmp(rows[i].ce, ce))
				v = strcmp(ce, ST_CE_UNACCOUNTABLE) ? (int64_t)rows[i].value : rows[i].residual;
		}
	st_rows_free(rows);
	st_close(d);
	return v;
}

/* The metrics port from the aggregator's log line "serving metrics on http://127.0.0.1:PORT/metrics". */
static int metrics_port(void)
{
	const char *p = strstr(rm_test_slurp(agglog), "serving metrics on http://127.0.0.1:");
	int port = 0;

	if (p && sscanf(p + strlen("serving metrics on http://127.0.0.1:"), "%d", &port) != 1)
		port = 0;
	return port;
}

/* Every rametr_* name in the dashboard's queries is a family of text. */
static void check_dashboard(const char *text)
{
	char out[300], log[300], name[128], type[160];
	const char *argv[] = { "/bin/sh", "-c", "exec " JQ " -r '.. | .expr? // empty' \"$0\" >\"$1\"", RM_DASHBOARD, out,
			       NULL };
	const char *p;
	int names = 0;

	snprintf(out, sizeof(out), "%s/exprs.txt", dir);
	snprintf(log, sizeof(log), "%s/jq.log", dir);
	if (access(JQ, X_OK) != 0) {
		CU_FAIL("no " JQ " (Debian package jq)");
		return;
	}
	CU_ASSERT_EQUAL_FATAL(rm_test_wait(rm_test_spawn(argv, log), 30000), 0);
	for (p = rm_test_slurp(out); (p = strstr(p, "rametr_")) != NULL; p += strlen(name)) {
		size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz_");

		snprintf(name, sizeof(name), "%.*s", (int)n, p);
		snprintf(type, sizeof(type), "# TYPE %s ", name);
		if (!strstr(text, type))
			fprintf(stderr, "the dashboard queries '%s', which /metrics does not serve\n", name);
		CU_ASSERT_PTR_NOT_NULL(strstr(text, type));
		names++;
	}
	CU_ASSERT(names >= 15);
}

static void test_metrics_end_to_end(void)
{
	char events[2][300], spool[2][300], murl[300], prom[300], plog[300];
	const char *aargv[] = { AGG_BIN, "--config", conf, "--db", db, "--listen", url, NULL };
	pid_t col[2];
	char *text = NULL;
	int i, r, c, port = 0, settled = 0;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s", rm_test_tmpdir());
	snprintf(conf, sizeof(conf), "%s/agg.ini", dir);
	snprintf(db, sizeof(db), "%s/rametr.db", dir);
	snprintf(url, sizeof(url), "ipc://%s/agg.ipc", dir);
	snprintf(agglog, sizeof(agglog), "%s/aggregator.log", dir);
	f = fopen(conf, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "[aggregator]\nhorizon = 1s\n[metrics]\nlisten = 127.0.0.1:0\n"
		   "[ce c1]\nclient = 127.0.0.2\n[ce c2]\nclient = 127.0.0.3\n[ce c3]\nclient = 127.0.0.4\n");
	fclose(f);

	agg = rm_test_spawn(aargv, agglog);
	CU_ASSERT_FATAL(agg > 0);
	atexit(stop_aggregator);
	for (i = 0; i < 500 && !(port = metrics_port()); i++)
		usleep(10000);
	if (!port) {
		fprintf(stderr, "aggregator log:\n%s\n", rm_test_slurp(agglog));
		CU_FAIL_FATAL("the aggregator did not serve metrics");
	}
	snprintf(murl, sizeof(murl), "http://127.0.0.1:%d/metrics", port);
	for (i = 0; i < 2; i++) {
		char log[300];
		const char *cargv[] = { COL_BIN, "--aggregator", url, "--node", nodes[i], "--backend", "replay",
					"--events", events[i], "--spool", spool[i], "--batch-parts", "40", NULL };

		snprintf(events[i], sizeof(events[i]), "%s/%s.events", dir, nodes[i]);
		snprintf(spool[i], sizeof(spool[i]), "%s/spool-%s", dir, nodes[i]);
		snprintf(log, sizeof(log), "%s/collector-%s.log", dir, nodes[i]);
		write_stream(events[i], i);
		col[i] = rm_test_spawn(cargv, log);
	}
	for (i = 0; i < 2; i++)
		CU_ASSERT_EQUAL(rm_test_wait(col[i], 60000), 0); /* killed if it has not ended by then */
	/* windows settle once quiet for the horizon + 2 s */
	for (i = 0; i < 300 && !settled; i++) {
		free(text);
		text = http_get(murl);
		settled = text && strstr(text, "\nrametr_metrics_pending_windows 0\n") &&
			  server_counter(text, ST_R_CPU, "n1") > 0 && server_counter(text, ST_R_CPU, "n2") > 0;
		if (!settled)
			usleep(50000);
	}
	CU_ASSERT_FATAL(settled);

	/* promtool accepts the text */
	snprintf(prom, sizeof(prom), "%s/metrics.txt", dir);
	snprintf(plog, sizeof(plog), "%s/promtool.log", dir);
	f = fopen(prom, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
	if (access(PROMTOOL, X_OK) == 0) {
		const char *pargv[] = { "/bin/sh", "-c", "exec " PROMTOOL " check metrics <\"$0\"", prom, NULL };
		pid_t p = rm_test_spawn(pargv, plog);

		CU_ASSERT_EQUAL(rm_test_wait(p, 30000), 0);
		if (rm_test_slurp(plog)[0])
			fprintf(stderr, "promtool: %s\n", rm_test_slurp(plog));
	} else {
		CU_FAIL("no " PROMTOOL " (Debian package prometheus)");
	}

	for (i = 0; i < 2; i++)
		for (r = 0; r < ST_R_COUNT; r++) {
			int64_t sum = 0, u = server_counter(text, r, nodes[i]), v;

			for (c = 0; c < NCE; c++) {
				int64_t x = tenant_counter(text, r, nodes[i], ces[c]);

				CU_ASSERT_EQUAL(x, stored(nodes[i], ces[c], r));
				sum += x > 0 ? x : 0;
			}
			v = tenant_counter(text, r, nodes[i], ST_CE_UNACCOUNTABLE);
			CU_ASSERT_EQUAL(v, stored(nodes[i], ST_CE_UNACCOUNTABLE, r));
			CU_ASSERT_EQUAL(u, stored(nodes[i], NULL, r));
			CU_ASSERT_EQUAL(sum + v, u);
			if (sum + v != u || u != stored(nodes[i], NULL, r))
				fprintf(stderr, "%s %s: tenants %lld + V %lld, server %lld, database %lld\n", nodes[i],
					families[r], (long long)sum, (long long)v, (long long)u,
					(long long)stored(nodes[i], NULL, r));
		}
	CU_ASSERT(server_counter(text, ST_R_CPU, "n1") > 500000000LL);
	CU_ASSERT(tenant_counter(text, ST_R_CPU, "n1", ST_CE_UNACCOUNTABLE) > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\nrametr_batches_total{result=\"refused\"} 0\n"));
	CU_ASSERT(counter(text, "rametr_collector_last_batch_age_seconds{node=\"n1\"}", 0) >= 0);
	CU_ASSERT_EQUAL(counter(text, "rametr_collectors_connected", 0), 2);
	check_dashboard(text);
	kill(agg, SIGTERM);
	CU_ASSERT_EQUAL(rm_test_wait(agg, 10000), 0);
	agg = -1;
	{
		/* batches and parts as the aggregator's own summary at the stop counts them
		 * (how many parts the collectors merge depends on timing) */
		const char *log = rm_test_slurp(agglog), *a = strstr(log, "applied "), *b = strstr(log, "pairing: ");
		unsigned long long batches = 0, rule = 0, bytes = 0, split = 0, horizon = 0, evicted = 0, none = 0;

		CU_ASSERT(a && sscanf(a, "applied %llu batches", &batches) == 1);
		CU_ASSERT(b && sscanf(b, "pairing: %llu parts by rule, %llu by bytes (%llu split), %llu at the horizon, "
				      "%llu evicted, %llu without CE", &rule, &bytes, &split, &horizon, &evicted, &none) == 6);
		CU_ASSERT(batches >= 2);
		CU_ASSERT_EQUAL(counter(text, "rametr_batches_total{result=\"ok\"}", 0), (int64_t)batches);
		CU_ASSERT(rule > 0);
		CU_ASSERT_EQUAL(counter(text, "rametr_aggregator_parts_total", 0),
				(int64_t)(rule + bytes + horizon + evicted + none));
	}
	free(text);
}

static CU_TestInfo cases[] = {
	{ "metrics pass promtool and sum to the server's total", test_metrics_end_to_end },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("integ_metrics", cases)
