/*
 * integ_go_test.c - a Go server shared by three tenants, for real: the
 * testbed's namespace hosts (scripts/netns.sh), tb-goserver (Debian's
 * golang, net/http, HTTP/1.1 keep-alive) on rm-be watched by
 * rametr-collector --netns rm-be (node "be") streaming to one
 * rametr-aggregator with testbed/go.ini (a rule per tenant address), each
 * tenant calling its own path (different CPU per request) with tb-goload
 * from rm-c1..rm-c3.
 *
 *   1. tb-goserver's own truth: every request counted, the paths' costs in
 *      their order, and the truth (handler spans only) within the server's
 *      CPU from /proc.
 *   2. Rametr's CPU per tenant against that truth: printed with the shares,
 *      the server's CPU charged to tenants and V; checked for the balance
 *      of every window and the tenants' rank order.
 *
 * RM_GO_POOL=N runs tb-goserver with --pool N (a worker goroutine burns each
 * request, handed over a channel), RM_GO_SCALE=N with --scale N (N times
 * the CPU per request) and RM_GO_RATES="R1 R2 R3" sets the tenants' rates
 * (default 60 30 15), RM_GO_PROCS=N runs it with GOMAXPROCS N; RM_GO_COLLECTOR_ARGS (space-separated)
 * adds options to the collector.
 * One run serves all cases; the namespaces and every process are removed at
 * exit whatever happened. Needs root, the kernel's BTF and Debian's golang;
 * skips otherwise.
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
#define RUN_S "12"
#define SERVER "10.213.0.12:7300"
#define MAX_COL_ARGS 8

static const char *ces[NCE] = { "c1", "c2", "c3" };
static const char *ce_addr[NCE] = { "10.213.0.21", "10.213.0.22", "10.213.0.23" };
static const char *paths[NCE] = { "/light", "/medium", "/heavy" };
static char rates[NCE][12] = { "60", "30", "15" };

static struct {
	int done, skipped;
	char skip_why[200];
	char rametr_why[200];
	char dir[300], db[400];
	int load_ok;                    /* every request answered, the server stopped cleanly */
	uint64_t server_ns;             /* tb-goserver's CPU during the load (/proc schedstat) */
	int64_t since, until;           /* the load, wall clock ns */
	unsigned long long busy, steal; /* machine jiffies during the load */
	char col_args[256];
} run;

static const char *in_dir(const char *name)
{
	return tbt_path(run.dir, name);
}

/* Starts the aggregator and the collector of rm-be; sets run.rametr_why on failure. */
static void start_rametr(pid_t *agg, pid_t *col)
{
	char url[400], spool[400];
	char *argv[16 + MAX_COL_ARGS] = { COL_BIN, "--aggregator", url, "--node", "be", "--netns", "rm-be",
					  "--window", "1s", "--spool", spool };
	size_t n = 11;
	char *tok, *save = NULL;

	*agg = *col = -1;
	snprintf(spool, sizeof(spool), "%s/spool-be", run.dir);
	if (rm_hosts_start_aggregator(AGG_BIN, run.dir, "go.ini", run.db, url, sizeof(url), agg, run.rametr_why,
				      sizeof(run.rametr_why)) != 0)
		return;
	snprintf(run.col_args, sizeof(run.col_args), "%s", getenv("RM_GO_COLLECTOR_ARGS") ? getenv("RM_GO_COLLECTOR_ARGS") : "");
	for (tok = strtok_r(run.col_args, " ", &save); tok && n < 10 + MAX_COL_ARGS; tok = strtok_r(NULL, " ", &save))
		argv[n++] = tok;
	argv[n] = NULL;
	*col = rm_hosts_spawn(argv, in_dir("collector-be.log"));
	if (*col < 0 || rm_hosts_wait_text(in_dir("collector-be.log"), "attached", *col, 20000) != 0)
		snprintf(run.rametr_why, sizeof(run.rametr_why),
			 "rametr-collector --netns rm-be did not attach (see collector-be.log)");
}

/* tb-goserver on rm-be and the three tenants' loads at once; sets run.load_ok. */
static void run_load(void)
{
	const char *pool = getenv("RM_GO_POOL"), *scale = getenv("RM_GO_SCALE"), *procs = getenv("RM_GO_PROCS");
	char *sargv[] = { TB_GOSERVER_BIN, "--listen", SERVER, "--truth", (char *)in_dir("truth.csv"),
			  "--pool", (char *)(pool ? pool : "0"), "--scale", (char *)(scale ? scale : "1"),
			  "--procs", (char *)(procs ? procs : "0"), NULL };
	pid_t srv, pids[NCE];
	uint64_t c0;
	unsigned long long b0, s0, b1, s1;
	int i, failed = 0;

	srv = rm_hosts_spawn_in("be", sargv, in_dir("tb-goserver.log"));
	if (srv < 0 || rm_hosts_wait_text(in_dir("tb-goserver.log"), "listening", srv, 10000) != 0)
		return;
	rm_hosts_jiffies(&b0, &s0);
	c0 = rm_hosts_proc_cpu_ns(srv);
	run.since = rm_hosts_real_ns();
	for (i = 0; i < NCE; i++) {
		char log[64];
		char *argv[] = { TB_GOLOAD_BIN, "--server", SERVER, "--bind", (char *)ce_addr[i], "--ce", (char *)ces[i],
				 "--path", (char *)paths[i], "--rate", rates[i], "--duration", RUN_S, NULL };

		snprintf(log, sizeof(log), "load-%s.txt", ces[i]);
		pids[i] = rm_hosts_spawn_in(ces[i], argv, in_dir(log));
	}
	for (i = 0; i < NCE; i++) {
		if (pids[i] < 0) {
			failed++;
			continue;
		}
		failed += tbt_wait(pids[i], 120000) != 0;
		rm_hosts_forget(pids[i]);
	}
	run.until = rm_hosts_real_ns();
	run.server_ns = rm_hosts_proc_cpu_ns(srv) - c0;
	rm_hosts_jiffies(&b1, &s1);
	run.busy = b1 - b0;
	run.steal = s1 - s0;
	run.load_ok = failed == 0 && rm_hosts_stop(srv, 20000) == 0;
}

/* The one experiment run: hosts up, Rametr, the load, all stopped. */
static void run_once(void)
{
	pid_t agg, col;
	int rv;

	if (run.done)
		return;
	run.done = 1;
	if (getenv("RM_GO_RATES") && sscanf(getenv("RM_GO_RATES"), "%11s %11s %11s", rates[0], rates[1], rates[2]) != NCE) {
		run.skipped = 1;
		snprintf(run.skip_why, sizeof(run.skip_why), "RM_GO_RATES must be three rates");
		return;
	}
	if (geteuid() != 0) {
		run.skipped = 1;
		snprintf(run.skip_why, sizeof(run.skip_why), "network namespaces need root");
		return;
	}
	if (access(TB_GOSERVER_BIN, X_OK) != 0 || access(TB_GOLOAD_BIN, X_OK) != 0) {
		run.skipped = 1;
		snprintf(run.skip_why, sizeof(run.skip_why), "tb-goserver is not built (needs golang-go)");
		return;
	}
	snprintf(run.dir, sizeof(run.dir), "%s/go", rm_test_tmpdir());
	mkdir(run.dir, 0755);
	snprintf(run.db, sizeof(run.db), "%s/rametr.db", run.dir);
	if ((rv = rm_hosts_up()) != 0) {
		run.skipped = 1;
		snprintf(run.skip_why, sizeof(run.skip_why), "%s",
			 rv == -1 ? "the testbed hosts stayed in use by another run" : "cannot create the hosts");
		return;
	}
	start_rametr(&agg, &col);
	if (!run.rametr_why[0]) {
		run_load();
		usleep(2500000); /* the last windows close */
		if (rm_hosts_stop(col, 30000) != 0)
			snprintf(run.rametr_why, sizeof(run.rametr_why), "the collector failed (collector-be.log)");
		if (rm_hosts_stop(agg, 30000) != 0 && !run.rametr_why[0])
			snprintf(run.rametr_why, sizeof(run.rametr_why), "the aggregator failed (aggregator.log)");
	}
	rm_hosts_cleanup();
}

static void need_run(void)
{
	run_once();
	RM_HOSTS_NEED_RAMETR(run.skipped, run.skip_why, run.rametr_why);
	CU_ASSERT_FATAL(run.load_ok);
}

/* The truth's rows in ces[] order (zero rows for a CE it lacks); RM_OK or tb_truth_load's error. */
static int load_truth(struct tb_truth_row out[NCE])
{
	struct tb_truth_row *tr = NULL;
	size_t nt = 0, i, k;
	int rv;

	memset(out, 0, NCE * sizeof(out[0]));
	if ((rv = tb_truth_load(in_dir("truth.csv"), &tr, &nt)) != RM_OK)
		return rv;
	for (i = 0; i < nt; i++)
		for (k = 0; k < NCE; k++)
			if (!strcmp(tr[i].ce, ces[k]))
				out[k] = tr[i];
	free(tr);
	return RM_OK;
}

static void test_truth(void)
{
	struct tb_truth_row tr[NCE];
	uint64_t sum = 0;
	int i;

	need_run();
	CU_ASSERT_EQUAL_FATAL(load_truth(tr), RM_OK);
	for (i = 0; i < NCE; i++) {
		CU_ASSERT_EQUAL(tr[i].requests, (uint64_t)atoi(rates[i]) * (uint64_t)atoi(RUN_S));
		CU_ASSERT(tr[i].tx_bytes == tr[i].requests * 256);
		sum += tr[i].cpu_ns;
	}
	/* per request, /light < /medium < /heavy (3x apart in work) */
	for (i = 0; i + 1 < NCE; i++)
		CU_ASSERT_FATAL(tr[i].requests > 0 && tr[i + 1].requests > 0);
	for (i = 0; i + 1 < NCE; i++)
		CU_ASSERT((double)tr[i].cpu_ns / (double)tr[i].requests <
			  (double)tr[i + 1].cpu_ns / (double)tr[i + 1].requests);
	fprintf(stderr, "tb-goserver's CPU %.3f s (/proc schedstat), its handlers' truth %.3f s (%.1f%%)\n",
		(double)run.server_ns / 1e9, (double)sum / 1e9,
		run.server_ns ? 100.0 * (double)sum / (double)run.server_ns : 0.0);
	CU_ASSERT(sum > 0);
	CU_ASSERT(sum <= run.server_ns);
}

static void test_rametr(void)
{
	struct tb_truth_row tr[NCE];
	uint64_t got[NCE], total, charged = 0, tsum = 0;
	int64_t v;
	int i, j;

	need_run();
	CU_ASSERT_EQUAL_FATAL(load_truth(tr), RM_OK);
	CU_ASSERT_EQUAL_FATAL(rm_usage_cpu(run.db, "be", run.since - 2000000000LL, run.until + 2000000000LL, ces, NCE,
					   got, &total, &v), RM_OK);
	for (i = 0; i < NCE; i++) {
		charged += got[i];
		tsum += tr[i].cpu_ns;
	}
	fprintf(stderr, "pool %s, collector options: '%s'; machine during the load: %llu busy + %llu steal jiffies\n",
		getenv("RM_GO_POOL") ? getenv("RM_GO_POOL") : "0",
		getenv("RM_GO_COLLECTOR_ARGS") ? getenv("RM_GO_COLLECTOR_ARGS") : "", run.busy, run.steal);
	fprintf(stderr, "%-4s %-7s %8s %10s %10s %8s %8s %8s %7s\n", "ce", "path", "requests", "truth_s", "rametr_s",
		"error_%", "truth_%", "rametr_%", "diff_pp");
	for (i = 0; i < NCE; i++) {
		double err = tr[i].cpu_ns ? ((double)got[i] - (double)tr[i].cpu_ns) * 100.0 / (double)tr[i].cpu_ns : 100.0;
		double ts = tsum ? 100.0 * (double)tr[i].cpu_ns / (double)tsum : 0.0;
		double rs = charged ? 100.0 * (double)got[i] / (double)charged : 0.0;

		fprintf(stderr, "%-4s %-7s %8" PRIu64 " %10.4f %10.4f %8.2f %8.2f %8.2f %7.2f\n", ces[i], paths[i],
			tr[i].requests, (double)tr[i].cpu_ns / 1e9, (double)got[i] / 1e9, err, ts, rs, rs - ts);
	}
	fprintf(stderr, "server CPU %.4f s (/proc); Rametr U %.4f s (%.1f%% of it), charged to tenants %.4f s "
		"(%.1f%% of /proc, %.1f%% of U), V %.4f s\n", (double)run.server_ns / 1e9, (double)total / 1e9,
		run.server_ns ? 100.0 * (double)total / (double)run.server_ns : 0.0, (double)charged / 1e9,
		run.server_ns ? 100.0 * (double)charged / (double)run.server_ns : 0.0,
		total ? 100.0 * (double)charged / (double)total : 0.0, (double)v / 1e9);
	/* what the handlers' spans leave out (parsing, scheduling, GC, the pool's hand-off) split
	 * evenly per request: an estimate of each tenant's full CPU, printed beside the truth */
	if (run.server_ns > tsum) {
		uint64_t nreq = tr[0].requests + tr[1].requests + tr[2].requests;
		double per = nreq ? (double)(run.server_ns - tsum) / (double)nreq : 0.0;

		fprintf(stderr, "outside the handlers' spans: %.1f us per request; truth + that per request:\n", per / 1e3);
		for (i = 0; i < NCE; i++) {
			double est = (double)tr[i].cpu_ns + per * (double)tr[i].requests;

			fprintf(stderr, "%-4s est %.4f s, rametr error %.2f%%, est share %.2f%%\n", ces[i], est / 1e9,
				est > 0 ? ((double)got[i] - est) * 100.0 / est : 0.0, 100.0 * est / (double)run.server_ns);
		}
	}
	CU_ASSERT(total > 0);
	/* each tenant's work is at least 1.5x the next one's: Rametr ranks them as the truth does */
	for (i = 0; i < NCE; i++)
		for (j = 0; j < NCE; j++)
			if ((double)tr[i].cpu_ns * 1.5 < (double)tr[j].cpu_ns)
				CU_ASSERT(got[i] < got[j]);
}

static CU_TestInfo cases[] = {
	{ "tb-goserver's own truth: every request, the paths' costs, within its CPU", test_truth },
	{ "Rametr's CPU per tenant of a Go server against its truth", test_rametr },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("integ_go", cases)
