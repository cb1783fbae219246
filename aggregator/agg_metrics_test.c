/*
 * agg_metrics_test.c - the metrics' counters: a window counts only once it
 * has been quiet for the settle time, V is U minus the tenants so the
 * tenants sum to the server's total, V never goes down when the tenants
 * were charged more than U, late amounts count when they settle in turn,
 * the pending amounts stay bounded, and the text format (families, label
 * escaping, exact seconds, health figures).
 */
#include <stdint.h>

#include "agg_metrics.h"
#include "rm_err.h"
#include "rm_test.h"
#include "banned.h"

#define SEC 1000000000LL

static char *render(struct agg_metrics *m, int64_t now)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(agg_metrics_render(m, f, now), RM_OK);
	fclose(f);
	return buf;
}

/* The value of the sample line that starts with prefix ("name{labels}"), or -1. */
static double sample(const char *text, const char *prefix)
{
	const char *p = text;
	size_t n = strlen(prefix);

	while ((p = strstr(p, prefix)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return strtod(p + n + 1, NULL);
		p += n;
	}
	return -1;
}

static const uint64_t zero[ST_R_COUNT];

static void usage(struct agg_metrics *m, const char *node, int64_t win, const char *ce, uint64_t cpu, uint64_t rx,
		  int64_t now)
{
	uint64_t v[ST_R_COUNT] = { cpu, rx, 0, 0, 0 };

	agg_metrics_usage(m, node, win * SEC, SEC, ce, v, now);
}

static void test_settle_and_v(void)
{
	struct agg_metrics *m = NULL;
	char *t;

	CU_ASSERT_EQUAL(agg_metrics_open(&m, 0, 0), RM_EINVAL);
	CU_ASSERT_EQUAL_FATAL(agg_metrics_open(&m, 5 * SEC, 1700000000 * SEC), RM_OK);
	/* window 100: U = 10 s, c1 4 s, c2 3.5 s -> V = 2.5 s */
	usage(m, "db1", 100, NULL, 10 * SEC, 1000, 0);
	usage(m, "db1", 100, "c1", 4 * SEC, 600, 0);
	agg_metrics_settle(m, 4 * SEC, 0);
	t = render(m, 4 * SEC);
	CU_ASSERT_EQUAL(sample(t, "rametr_metrics_pending_windows"), 1);
	CU_ASSERT_PTR_NULL(strstr(t, "rametr_tenant_cpu_seconds_total{"));
	free(t);
	/* a held part charged later touches the window again: it waits longer */
	usage(m, "db1", 100, "c2", 3 * SEC + SEC / 2, 100, 3 * SEC);
	agg_metrics_settle(m, 7 * SEC, 0);
	t = render(m, 7 * SEC);
	CU_ASSERT_PTR_NULL(strstr(t, "rametr_tenant_cpu_seconds_total{"));
	free(t);
	agg_metrics_settle(m, 8 * SEC, 0);
	t = render(m, 8 * SEC);
	CU_ASSERT_EQUAL(sample(t, "rametr_metrics_pending_windows"), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "rametr_tenant_cpu_seconds_total{server=\"db1\",tenant=\"c1\"} 4.000000000\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "rametr_tenant_cpu_seconds_total{server=\"db1\",tenant=\"c2\"} 3.500000000\n"));
	CU_ASSERT_PTR_NOT_NULL(
		strstr(t, "rametr_tenant_cpu_seconds_total{server=\"db1\",tenant=\"__unaccountable__\"} 2.500000000\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "rametr_server_cpu_seconds_total{server=\"db1\"} 10.000000000\n"));
	CU_ASSERT_EQUAL(sample(t, "rametr_tenant_network_receive_bytes_total{server=\"db1\",tenant=\"__unaccountable__\"}"),
			300);
	CU_ASSERT_EQUAL(sample(t, "rametr_server_network_receive_bytes_total{server=\"db1\"}"), 1000);
	CU_ASSERT_EQUAL(sample(t, "rametr_aggregator_start_time_seconds"), 1700000000);
	free(t);

	/* window 101 charges c1 more than U (V would be -1 s): V holds still */
	usage(m, "db1", 101, NULL, 2 * SEC, 0, 10 * SEC);
	usage(m, "db1", 101, "c1", 3 * SEC, 0, 10 * SEC);
	agg_metrics_settle(m, 20 * SEC, 0);
	t = render(m, 20 * SEC);
	CU_ASSERT_EQUAL(sample(t, "rametr_tenant_cpu_seconds_total{server=\"db1\",tenant=\"__unaccountable__\"}"), 2.5);
	CU_ASSERT_EQUAL(sample(t, "rametr_tenant_cpu_seconds_total{server=\"db1\",tenant=\"c1\"}"), 7);
	CU_ASSERT_EQUAL(sample(t, "rametr_server_cpu_seconds_total{server=\"db1\"}"), 12);
	free(t);
	/* window 102: U 5 s, nothing charged: 1 s repays the over-charge, V grows by 4 s */
	usage(m, "db1", 102, NULL, 5 * SEC, 0, 30 * SEC);
	/* a late amount for window 100, after it settled, counts when it settles */
	usage(m, "db1", 100, "c2", SEC, 0, 30 * SEC);
	usage(m, "db1", 100, NULL, SEC, 0, 30 * SEC);
	agg_metrics_settle(m, 40 * SEC, 0);
	t = render(m, 40 * SEC);
	CU_ASSERT_EQUAL(sample(t, "rametr_tenant_cpu_seconds_total{server=\"db1\",tenant=\"__unaccountable__\"}"), 6.5);
	CU_ASSERT_EQUAL(sample(t, "rametr_tenant_cpu_seconds_total{server=\"db1\",tenant=\"c2\"}"), 4.5);
	/* c1 7 + c2 4.5 + V 6.5 = U 18 */
	CU_ASSERT_EQUAL(sample(t, "rametr_server_cpu_seconds_total{server=\"db1\"}"), 18);
	free(t);
	agg_metrics_close(m);
}

static void test_health_and_format(void)
{
	struct agg_metrics *m = NULL;
	struct agg_metrics_health h = { 1000, 7, 3, 2 };
	char *t;

	CU_ASSERT_EQUAL_FATAL(agg_metrics_open(&m, SEC, 0), RM_OK);
	agg_metrics_batch(m, "n\"1\\", AGG_METRICS_OK, 100 * SEC);
	agg_metrics_batch(m, "n\"1\\", AGG_METRICS_DUPLICATE, 101 * SEC);
	agg_metrics_batch(m, "n2", AGG_METRICS_REFUSED, 90 * SEC);
	agg_metrics_batch(m, "n2", AGG_METRICS_RETRY, 60 * SEC);
	agg_metrics_dropped(m, "n2", 5);
	agg_metrics_set_health(m, &h);
	agg_metrics_usage(m, "s\n", 0, SEC, "t\"x", zero, 0);
	agg_metrics_settle(m, 0, 1);
	t = render(m, 111 * SEC);
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "# TYPE rametr_tenant_cpu_seconds_total counter\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "# HELP rametr_tenant_fs_writes_bytes_total "));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "rametr_tenant_cpu_seconds_total{server=\"s\\n\",tenant=\"t\\\"x\"} 0.000000000\n"));
	CU_ASSERT_EQUAL(sample(t, "rametr_collector_last_batch_age_seconds{node=\"n\\\"1\\\\\"}"), 10);
	CU_ASSERT_EQUAL(sample(t, "rametr_collector_last_batch_age_seconds{node=\"n2\"}"), 51);
	CU_ASSERT_EQUAL(sample(t, "rametr_collectors_connected"), 1);
	CU_ASSERT_EQUAL(sample(t, "rametr_collector_dropped_parts_total{node=\"n2\"}"), 5);
	CU_ASSERT_EQUAL(sample(t, "rametr_batches_total{result=\"ok\"}"), 1);
	CU_ASSERT_EQUAL(sample(t, "rametr_batches_total{result=\"duplicate\"}"), 1);
	CU_ASSERT_EQUAL(sample(t, "rametr_batches_total{result=\"refused\"}"), 1);
	CU_ASSERT_EQUAL(sample(t, "rametr_batches_total{result=\"retry\"}"), 1);
	CU_ASSERT_EQUAL(sample(t, "rametr_aggregator_parts_total"), 1000);
	CU_ASSERT_EQUAL(sample(t, "rametr_aggregator_held_parts{state=\"pending\"}"), 3);
	CU_ASSERT_EQUAL(sample(t, "rametr_aggregator_held_parts{state=\"resolved\"}"), 4);
	CU_ASSERT_EQUAL(sample(t, "rametr_aggregator_parts_evicted_total"), 2);
	free(t);
	agg_metrics_close(m);
}

/* The pending amounts are bounded: past the bound, windows settle early. */
static void test_bounded(void)
{
	struct agg_metrics *m = NULL;
	uint64_t v[ST_R_COUNT] = { 1, 0, 0, 0, 0 };
	int64_t i;
	char *t;

	CU_ASSERT_EQUAL_FATAL(agg_metrics_open(&m, 3600 * SEC, 0), RM_OK);
	for (i = 0; i <= AGG_METRICS_MAX_PENDING; i++)
		agg_metrics_usage(m, "s", i / 4 * SEC, SEC, (i & 3) ? "c" : NULL, v, 0);
	t = render(m, 0);
	CU_ASSERT_EQUAL(sample(t, "rametr_metrics_early_settled_windows_total"), AGG_METRICS_MAX_PENDING / 4);
	CU_ASSERT_EQUAL(sample(t, "rametr_metrics_pending_windows"), 1);
	CU_ASSERT_EQUAL(sample(t, "rametr_tenant_cpu_seconds_total{server=\"s\",tenant=\"c\"}"),
			AGG_METRICS_MAX_PENDING / 4 * 3 / 1e9);
	free(t);
	agg_metrics_close(m);
}

static CU_TestInfo cases[] = {
	{ "windows settle when quiet, V = U - tenants, never down", test_settle_and_v },
	{ "health figures and the text format", test_health_and_format },
	{ "pending amounts stay bounded", test_bounded },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_metrics", cases)
