/*
 * integ_udp_test.c - UDP services shared by three tenants, for real: the
 * testbed's namespace hosts (scripts/netns.sh), a server on rm-be watched
 * by rametr-collector --netns rm-be (node "be") streaming to one
 * rametr-aggregator with testbed/udp.ini (a rule per tenant address), the
 * tenants querying from rm-c1..rm-c3 with tb-uload at different rates.
 *
 *   1. tb-userver (two threads on one unconnected socket) that keeps its own
 *      per-tenant truth: Rametr's CPU per tenant within TOL_PCT of it, every
 *      window balanced.
 *   2. Debian's unbound (one thread) serving a local zone: each tenant alone
 *      (unbound's CPU from its process CPU clock), then all three
 *      at once: Rametr's per-tenant CPU of the shared run in the rank order
 *      of the tenants' CPU alone, and at least MIN_CHARGED_PCT of unbound's
 *      CPU in the shared run charged to tenants.
 *
 * One run serves all cases; the namespaces and every process are removed at
 * exit whatever happened. Needs root and the kernel's BTF; skips otherwise,
 * and skips case 2 without unbound.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rm_err.h"
#include "rm_test.h"
#include "st.h"
#include "tb_testutil.h"
#include "tb_truth.h"
#include "rm_hosts.h"
#include "rm_usage.h"
#include "banned.h"

#define NCE 3
#define TB_RUN_S "12"
#define DNS_ALONE_S "6"
#define DNS_SHARED_S "10"
#define TOL_PCT 2.0          /* tb-userver: per-tenant CPU against its truth */
#define MAX_V_PCT 5.0
#define MIN_CHARGED_PCT 90.0 /* unbound: share of its CPU charged to tenants */

static const char *ces[NCE] = { "c1", "c2", "c3" };
static const char *ce_addr[NCE] = { "10.213.0.21", "10.213.0.22", "10.213.0.23" };
static const char *tb_rates[NCE] = { "30", "60", "90" };
static const char *dns_rates[NCE] = { "400", "800", "1600" };

static struct {
	int done, skipped;
	char skip_why[200];
	char rametr_why[200];
	char dns_why[200];
	char dir[300], db[400];
	int tb_ok;                        /* tb-userver served every request */
	int64_t tb_since, tb_until;       /* its load, wall clock ns */
	int dns_ok;                       /* unbound answered every query of every run */
	uint64_t dns_alone_ns[NCE];       /* unbound's CPU with each tenant alone */
	uint64_t dns_shared_ns;           /* and with all three */
	int64_t dns_since, dns_until;     /* the shared run, wall clock ns */
	unsigned long long busy, steal;   /* machine jiffies during the tb-userver load */
} run;

static const char *in_dir(const char *name)
{
	return tbt_path(run.dir, name);
}

/* Starts the aggregator and the collector of rm-be; sets run.rametr_why on failure. */
static void start_rametr(pid_t *agg, pid_t *col)
{
	char url[400], spool[400];

	*agg = *col = -1;
	snprintf(spool, sizeof(spool), "%s/spool-be", run.dir);
	if (rm_hosts_start_aggregator(AGG_BIN, run.dir, "udp.ini", run.db, url, sizeof(url), agg, run.rametr_why,
				      sizeof(run.rametr_why)) != 0)
		return;
	{
		char *argv[] = { COL_BIN, "--aggregator", url, "--node", "be", "--netns", "rm-be", "--window", "1s",
				 "--spool", spool, NULL };

		*col = rm_hosts_spawn(argv, in_dir("collector-be.log"));
	}
	if (*col < 0 || rm_hosts_wait_text(in_dir("collector-be.log"), "attached", *col, 20000) != 0)
		snprintf(run.rametr_why, sizeof(run.rametr_why),
			 "rametr-collector --netns rm-be did not attach (see collector-be.log)");
}

/*
 * Runs tb-uload from each host of ces[which] (all if which < 0) against
 * server at rates, for secs; returns the number of loads that did not
 * answer every request.
 */
static int loads(int which, const char *server, const char *const rates[], const char *secs, const char *dns,
		 const char *tag)
{
	pid_t pids[NCE];
	int i, failed = 0;

	for (i = 0; i < NCE; i++) {
		char seed[8], log[64];
		char *argv[] = { TB_ULOAD_BIN, "--server", (char *)server, "--bind", (char *)ce_addr[i],
				 "--ce", (char *)ces[i], "--rate", (char *)rates[i], "--duration", (char *)secs,
				 "--cpu-us", "1000:3000", "--seed", seed, dns ? "--dns" : NULL, (char *)dns, NULL };

		pids[i] = -1;
		if (which >= 0 && i != which)
			continue;
		snprintf(seed, sizeof(seed), "%d", i + 1);
		snprintf(log, sizeof(log), "load-%s-%s.txt", tag, ces[i]);
		pids[i] = rm_hosts_spawn_in(ces[i], argv, in_dir(log));
	}
	for (i = 0; i < NCE; i++) {
		if (pids[i] < 0) {
			failed += which < 0 || i == which;
			continue;
		}
		failed += tbt_wait(pids[i], 120000) != 0;
		rm_hosts_forget(pids[i]);
	}
	return failed;
}

/* Phase 1: tb-userver and its truth. */
static void run_tb(void)
{
	pid_t srv;
	char *argv[] = { TB_USERVER_BIN, "--listen", "10.213.0.12:7200", "--truth", (char *)in_dir("truth.csv"),
			 "--threads", "2", NULL };
	unsigned long long b0, s0, b1, s1;

	srv = rm_hosts_spawn_in("be", argv, in_dir("tb-userver.log"));
	if (srv < 0 || rm_hosts_wait_text(in_dir("tb-userver.log"), "listening", srv, 10000) != 0)
		return;
	rm_hosts_jiffies(&b0, &s0);
	run.tb_since = rm_hosts_real_ns();
	run.tb_ok = loads(-1, "10.213.0.12:7200", tb_rates, TB_RUN_S, NULL, "tb") == 0;
	run.tb_until = rm_hosts_real_ns();
	rm_hosts_jiffies(&b1, &s1);
	run.busy = b1 - b0;
	run.steal = s1 - s0;
	if (rm_hosts_stop(srv, 20000) != 0)
		run.tb_ok = 0;
}

/* Phase 2: unbound, each tenant alone then all three. */
static void run_dns(void)
{
	char conf[400], *text;
	pid_t ub;
	int i;

	if (access("/usr/sbin/unbound", X_OK) != 0) {
		snprintf(run.dns_why, sizeof(run.dns_why), "unbound is not installed (scripts/setup.sh)");
		return;
	}
	snprintf(conf, sizeof(conf), "%s/unbound.conf", run.dir);
	if (asprintf(&text,
		     "server:\n"
		     "\tinterface: 10.213.0.12\n\tport: 53\n\tdo-daemonize: no\n\tusername: \"\"\n"
		     "\tchroot: \"\"\n\tdirectory: \"%s\"\n\tpidfile: \"\"\n\tuse-syslog: no\n\tlogfile: \"\"\n"
		     "\tnum-threads: 1\n\tdo-ip6: no\n\tdo-tcp: no\n\taccess-control: 10.213.0.0/24 allow\n"
		     "\tmodule-config: \"iterator\"\n\tlocal-zone: \"tenants.test.\" static\n"
		     "\tlocal-data: \"a.tenants.test. IN A 10.1.2.3\"\n"
		     "remote-control:\n\tcontrol-enable: no\n",
		     run.dir) < 0)
		return;
	rm_test_write_file(conf, text);
	free(text);
	{
		char *argv[] = { "/usr/sbin/unbound", "-d", "-c", conf, NULL };

		ub = rm_hosts_spawn_in("be", argv, in_dir("unbound.log"));
	}
	if (ub < 0 || rm_hosts_wait_text(in_dir("unbound.log"), "start of service", ub, 10000) != 0) {
		snprintf(run.dns_why, sizeof(run.dns_why), "unbound did not start (see unbound.log)");
		return;
	}
	run.dns_ok = 1;
	for (i = 0; i < NCE; i++) {
		char tag[16];
		uint64_t c0 = rm_hosts_proc_cpu_ns(ub);

		snprintf(tag, sizeof(tag), "dns-alone");
		run.dns_ok &= loads(i, "10.213.0.12:53", dns_rates, DNS_ALONE_S, "a.tenants.test", tag) == 0;
		run.dns_alone_ns[i] = rm_hosts_proc_cpu_ns(ub) - c0;
	}
	usleep(2500000); /* the shared run's windows hold nothing of the last alone run */
	{
		uint64_t c0 = rm_hosts_proc_cpu_ns(ub);

		run.dns_since = rm_hosts_real_ns();
		run.dns_ok &= loads(-1, "10.213.0.12:53", dns_rates, DNS_SHARED_S, "a.tenants.test", "dns-shared") == 0;
		run.dns_until = rm_hosts_real_ns();
		run.dns_shared_ns = rm_hosts_proc_cpu_ns(ub) - c0;
	}
	if (rm_hosts_stop(ub, 20000) != 0)
		run.dns_ok = 0;
	if (!run.dns_ok)
		snprintf(run.dns_why, sizeof(run.dns_why), "unbound did not answer every query (load-dns-*.txt)");
}

/* The one experiment run: hosts up, Rametr, phase 1, phase 2, all stopped. */
static void run_once(void)
{
	pid_t agg, col;

	if (run.done)
		return;
	run.done = 1;
	if (rm_hosts_begin("udp", run.dir, sizeof(run.dir), run.db, sizeof(run.db), run.skip_why,
			   sizeof(run.skip_why)) != 0) {
		run.skipped = 1;
		return;
	}
	start_rametr(&agg, &col);
	if (!run.rametr_why[0]) {
		run_tb();
		usleep(4000000); /* more than the reads' margin (2 s) and a window: phase 2's windows hold nothing of phase 1 */
		run_dns();
		usleep(1500000); /* the last window closes */
		if (rm_hosts_stop_logged(col, 30000, run.dir, "collector-be.log") != 0)
			snprintf(run.rametr_why, sizeof(run.rametr_why), "the collector failed (collector-be.log)");
		if (rm_hosts_stop_logged(agg, 30000, run.dir, "aggregator.log") != 0 && !run.rametr_why[0])
			snprintf(run.rametr_why, sizeof(run.rametr_why), "the aggregator failed (aggregator.log)");
	}
	rm_hosts_cleanup();
}

/* Rametr's CPU per CE at "be" in [since, until) (values[i] for ces[i]), U and V; as rm_usage_cpu. */
static int rametr_cpu(int64_t since, int64_t until, uint64_t values[NCE], uint64_t *total, int64_t *v)
{
	return rm_usage_cpu(run.db, "be", since, until, ces, NCE, values, total, v);
}

static void need_rametr(void)
{
	run_once();
	RM_HOSTS_NEED_RAMETR(run.skipped, run.skip_why, run.rametr_why);
}

static void test_tb_userver(void)
{
	struct tb_truth_row *tr = NULL;
	uint64_t got[NCE], total;
	size_t nt = 0, i, k;
	int64_t v;

	need_rametr();
	CU_ASSERT_FATAL(run.tb_ok);
	CU_ASSERT_EQUAL_FATAL(tb_truth_load(in_dir("truth.csv"), &tr, &nt), RM_OK);
	CU_ASSERT_EQUAL(nt, NCE);
	CU_ASSERT_EQUAL_FATAL(rametr_cpu(run.tb_since - 2000000000LL, run.tb_until + 2000000000LL, got, &total, &v),
			      RM_OK);
	fprintf(stderr, "machine during the load: %llu busy + %llu steal jiffies\n", run.busy, run.steal);
	fprintf(stderr, "%-4s %8s %12s %12s %8s\n", "ce", "requests", "truth_s", "rametr_s", "error_%");
	for (i = 0; i < nt; i++) {
		double err;

		for (k = 0; k < NCE && strcmp(ces[k], tr[i].ce); k++)
			;
		CU_ASSERT_FATAL(k < NCE);
		err = tr[i].cpu_ns ? ((double)got[k] - (double)tr[i].cpu_ns) * 100.0 / (double)tr[i].cpu_ns : 100.0;
		fprintf(stderr, "%-4s %8" PRIu64 " %12.6f %12.6f %8.3f\n", tr[i].ce, tr[i].requests,
			(double)tr[i].cpu_ns / 1e9, (double)got[k] / 1e9, err);
		CU_ASSERT(tr[i].requests >= (uint64_t)atoi(tb_rates[k]) * (uint64_t)atoi(TB_RUN_S) - 1);
		CU_ASSERT(fabs(err) <= TOL_PCT);
	}
	fprintf(stderr, "U %.6f s, V %.6f s (%.3f%% of U)\n", (double)total / 1e9, (double)v / 1e9,
		total ? (double)v * 100.0 / (double)total : 0.0);
	CU_ASSERT(total > 0);
	CU_ASSERT((double)llabs(v) * 100.0 <= MAX_V_PCT * (double)total);
	free(tr);
}

static void test_unbound(void)
{
	uint64_t got[NCE], total, charged = 0;
	int64_t v;
	int i, j;

	need_rametr();
	if (strstr(run.dns_why, "not installed"))
		RM_TEST_SKIP("%s", run.dns_why);
	if (run.dns_why[0])
		fprintf(stderr, "unbound: %s\n", run.dns_why);
	CU_ASSERT_FATAL(run.dns_ok);
	/* the windows the shared run touched (1 s windows; the alone runs ended 2.5 s before it) */
	CU_ASSERT_EQUAL_FATAL(rametr_cpu(run.dns_since - 1000000000LL, run.dns_until + 2000000000LL, got, &total, &v),
			      RM_OK);
	fprintf(stderr, "%-4s %6s %14s %14s %10s\n", "ce", "qps", "alone_cpu_s", "rametr_cpu_s", "rametr_%");
	for (i = 0; i < NCE; i++) {
		charged += got[i];
		fprintf(stderr, "%-4s %6s %14.3f %14.3f %10.1f\n", ces[i], dns_rates[i], (double)run.dns_alone_ns[i] / 1e9,
			(double)got[i] / 1e9, run.dns_shared_ns ? 100.0 * (double)got[i] / (double)run.dns_shared_ns : 0.0);
	}
	fprintf(stderr, "unbound's CPU in the shared run %.3f s (/proc schedstat), charged to tenants %.3f s (%.1f%%); "
		"U %.3f s (%.1f%% of /proc), V %.3f s; charged %.1f%% of U\n", (double)run.dns_shared_ns / 1e9,
		(double)charged / 1e9, run.dns_shared_ns ? 100.0 * (double)charged / (double)run.dns_shared_ns : 0.0,
		(double)total / 1e9, run.dns_shared_ns ? 100.0 * (double)total / (double)run.dns_shared_ns : 0.0,
		(double)v / 1e9, total ? 100.0 * (double)charged / (double)total : 0.0);
	/* the rank order of the tenants' CPU alone is Rametr's in the shared run, for the tenants
	 * the separate runs tell apart by more than 10% (each alone for a few seconds is a noisy
	 * witness: c1 and c2 alone have read within 2% of each other, either way round) */
	for (i = 0; i < NCE; i++)
		for (j = 0; j < NCE; j++)
			if ((double)run.dns_alone_ns[i] * 1.10 < (double)run.dns_alone_ns[j])
				CU_ASSERT(got[i] < got[j]);
	CU_ASSERT(run.dns_alone_ns[0] < run.dns_alone_ns[2]); /* the rates differ fourfold */
	CU_ASSERT(run.dns_shared_ns > 0);
	CU_ASSERT(total > 0);
	CU_ASSERT((double)charged * 100.0 >= MIN_CHARGED_PCT * (double)run.dns_shared_ns);
}

static CU_TestInfo cases[] = {
	{ "tb-userver's tenants: Rametr's CPU per tenant against the server's own truth", test_tb_userver },
	{ "unbound's tenants: rank order of separate runs, and its CPU charged", test_unbound },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("integ_udp", cases)
