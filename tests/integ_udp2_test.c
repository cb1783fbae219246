/*
 * integ_udp2_test.c - datagrams paired between nodes, for real: on the
 * testbed's namespace hosts (scripts/netns.sh), three tenants on rm-c1..3
 * query a tb-userver front on rm-fe, which sends each request on over UDP
 * to a tb-userver back end on rm-be (a resolver asking its upstream). One
 * collector per host (nodes "fe" and "be") streams to one aggregator with
 * testbed/udp.ini: rules name the tenants' addresses only, so the back
 * end's datagrams (all from the front) are charged through pairing with
 * the front's sends, whose CEs the rules decide.
 *
 *   1. No loss: Rametr's CPU per tenant at the back end within TOL_PCT of
 *      the back end's own truth; V small.
 *   2. LOSS_PCT of the front's datagrams lost on the way (marked by the
 *      front, dropped by the back end's kernel on arrival; the front sends
 *      them again after 50 ms): the same bound, so a lost datagram costs
 *      itself (it never reaches the back end) and shifts no later pairing.
 *
 * The tenants ask for replies of different sizes, so their requests differ
 * in length (docs/udp.md: the pairing compares lengths, not contents).
 * Namespaces and every process are removed at exit whatever happened.
 * Needs root and the kernel's BTF; skips otherwise.
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
#define LOSS_PCT "5"
#define TOL_PCT 2.0   /* back end: per-tenant CPU against its truth */
#define MAX_V_PCT 5.0 /* back end: V of U */
#define NPHASE 2

static const char *ces[NCE] = { "c1", "c2", "c3" };
static const char *ce_addr[NCE] = { "10.213.0.21", "10.213.0.22", "10.213.0.23" };
static const char *rates[NCE] = { "30", "60", "90" };
static const char *cpu_us[NCE] = { "1000:3000", "1000:1500", "1500:2500" }; /* 4 digits: lengths 15, 16, 17 */
static const char *resp[NCE] = { "64", "256", "1024" };
static const char *phase_name[NPHASE] = { "noloss", "loss" };

static struct {
	int done, skipped;
	char skip_why[200];
	char rametr_why[200];
	char dir[300], db[400];
	int ok[NPHASE];                 /* every request answered, servers stopped cleanly */
	int64_t since[NPHASE], until[NPHASE];
	unsigned long long busy[NPHASE], steal[NPHASE];
} run;

static const char *in_dir(const char *name)
{
	return tbt_path(run.dir, name);
}

/* Starts the aggregator and the collectors of rm-fe and rm-be; sets run.rametr_why on failure. */
static void start_rametr(pid_t *agg, pid_t col[2])
{
	static const char *hosts[2] = { "fe", "be" };
	char url[400];
	int i;

	*agg = col[0] = col[1] = -1;
	if (rm_hosts_start_aggregator(AGG_BIN, run.dir, "udp.ini", run.db, url, sizeof(url), agg, run.rametr_why,
				      sizeof(run.rametr_why)) != 0)
		return;
	for (i = 0; i < 2; i++) {
		char ns[16], spool[400], log[64];
		char *argv[] = { COL_BIN, "--aggregator", url, "--node", (char *)hosts[i], "--netns", ns,
				 "--window", "1s", "--spool", spool, NULL };

		snprintf(ns, sizeof(ns), "rm-%s", hosts[i]);
		snprintf(spool, sizeof(spool), "%s/spool-%s", run.dir, hosts[i]);
		snprintf(log, sizeof(log), "collector-%s.log", hosts[i]);
		col[i] = rm_hosts_spawn(argv, in_dir(log));
		if (col[i] < 0 || rm_hosts_wait_text(in_dir(log), "attached", col[i], 20000) != 0) {
			snprintf(run.rametr_why, sizeof(run.rametr_why),
				 "rametr-collector --netns %s did not attach (see %s)", ns, log);
			return;
		}
	}
}

/* The three tenants' loads against the front, at once; the number that did not get every answer. */
static int loads(int phase)
{
	pid_t pids[NCE];
	int i, failed = 0;

	for (i = 0; i < NCE; i++) {
		char seed[8], log[64];
		char *argv[] = { TB_ULOAD_BIN, "--server", "10.213.0.11:7301", "--bind", (char *)ce_addr[i], "--ce",
				 (char *)ces[i], "--rate", (char *)rates[i], "--duration", RUN_S, "--cpu-us",
				 (char *)cpu_us[i], "--resp-bytes", (char *)resp[i], "--seed", seed, NULL };

		snprintf(seed, sizeof(seed), "%d", i + 1);
		snprintf(log, sizeof(log), "load-%s-%s.txt", phase_name[phase], ces[i]);
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
	return failed;
}

/* One phase: a back end and a front (losing loss of its datagrams), the tenants' load, both stopped. */
static void run_phase(int phase, const char *loss)
{
	char btruth[64], ftruth[64], blog[64], flog[64];
	pid_t be, fe = -1;
	unsigned long long b0, s0, b1, s1;

	snprintf(btruth, sizeof(btruth), "truth-be-%s.csv", phase_name[phase]);
	snprintf(ftruth, sizeof(ftruth), "truth-fe-%s.csv", phase_name[phase]);
	snprintf(blog, sizeof(blog), "back-%s.log", phase_name[phase]);
	snprintf(flog, sizeof(flog), "front-%s.log", phase_name[phase]);
	{
		char *argv[] = { TB_USERVER_BIN, "--listen", "10.213.0.12:7300", "--truth", (char *)in_dir(btruth),
				 "--threads", "2", "--drop-marked", NULL };

		be = rm_hosts_spawn_in("be", argv, in_dir(blog));
	}
	if (be < 0 || rm_hosts_wait_text(in_dir(blog), "listening", be, 10000) != 0)
		return;
	{
		char *argv[] = { TB_USERVER_BIN, "--listen", "10.213.0.11:7301", "--truth", (char *)in_dir(ftruth),
				 "--threads", "2", "--forward", "10.213.0.12:7300", "--loss", (char *)loss,
				 "--seed", "7", NULL };

		fe = rm_hosts_spawn_in("fe", argv, in_dir(flog));
	}
	if (fe < 0 || rm_hosts_wait_text(in_dir(flog), "listening", fe, 10000) != 0) {
		rm_hosts_stop(be, 20000);
		return;
	}
	rm_hosts_jiffies(&b0, &s0);
	run.since[phase] = rm_hosts_real_ns();
	run.ok[phase] = loads(phase) == 0;
	run.until[phase] = rm_hosts_real_ns();
	rm_hosts_jiffies(&b1, &s1);
	run.busy[phase] = b1 - b0;
	run.steal[phase] = s1 - s0;
	if (rm_hosts_stop(fe, 20000) != 0)
		run.ok[phase] = 0;
	if (rm_hosts_stop(be, 20000) != 0)
		run.ok[phase] = 0;
}

static void run_once(void)
{
	pid_t agg, col[2];
	int i;

	if (run.done)
		return;
	run.done = 1;
	if (rm_hosts_begin("udp2", run.dir, sizeof(run.dir), run.db, sizeof(run.db), run.skip_why,
			   sizeof(run.skip_why)) != 0) {
		run.skipped = 1;
		return;
	}
	start_rametr(&agg, col);
	if (!run.rametr_why[0]) {
		run_phase(0, "0");
		/* The next phase starts more than the margin of the reads (2 s) and a
		 * window (1 s) after this one ends: no window read for one holds
		 * anything of the other. */
		usleep(4000000);
		run_phase(1, LOSS_PCT);
		usleep(1500000); /* the last window closes */
		for (i = 0; i < 2; i++)
			if (rm_hosts_stop_logged(col[i], 30000, run.dir, i ? "collector-be.log" : "collector-fe.log") != 0 &&
			    !run.rametr_why[0])
				snprintf(run.rametr_why, sizeof(run.rametr_why), "a collector failed (collector-*.log)");
		if (rm_hosts_stop_logged(agg, 30000, run.dir, "aggregator.log") != 0 && !run.rametr_why[0])
			snprintf(run.rametr_why, sizeof(run.rametr_why), "the aggregator failed (aggregator.log)");
	}
	rm_hosts_cleanup();
}

/* Rametr's CPU per CE at node in [since, until), U and V, as rm_usage_cpu; V's reasons printed. */
static int rametr_cpu(const char *node, int64_t since, int64_t until, uint64_t values[NCE], uint64_t *total,
		      int64_t *v)
{
	struct st_query q = { since, until, node, NULL, ST_R_CPU, 0 };
	struct st_row *vr = NULL;
	size_t nv = 0, j;
	st_db *d = NULL;

	if (st_open(&d, run.db, ST_OPEN_READONLY) == RM_OK && st_query_unacct(d, &q, &vr, &nv) == RM_OK) {
		fprintf(stderr, "  %s V by reason:", node);
		for (j = 0; j < nv; j++)
			fprintf(stderr, " %s %.6f s", vr[j].reason,
				(double)(vr[j].value ? (int64_t)vr[j].value : vr[j].residual) / 1e9);
		fprintf(stderr, "\n");
	}
	st_rows_free(vr);
	st_close(d);
	return rm_usage_cpu(run.db, node, since, until, ces, NCE, values, total, v);
}

static void need_rametr(void)
{
	run_once();
	RM_HOSTS_NEED_RAMETR(run.skipped, run.skip_why, run.rametr_why);
}

/* The back end's tenants in phase `phase`: Rametr's CPU per tenant, through the front's sends, against its truth. */
static void check_phase(int phase)
{
	struct tb_truth_row *tr = NULL;
	uint64_t got[NCE], total, charged = 0;
	char truth[64];
	size_t nt = 0, i, k;
	int64_t v;

	need_rametr();
	CU_ASSERT_FATAL(run.ok[phase]);
	snprintf(truth, sizeof(truth), "truth-be-%s.csv", phase_name[phase]);
	CU_ASSERT_EQUAL_FATAL(tb_truth_load(in_dir(truth), &tr, &nt), RM_OK);
	CU_ASSERT_EQUAL(nt, NCE);
	fprintf(stderr, "\n%s: machine during the load: %llu busy + %llu steal jiffies\n", phase_name[phase],
		run.busy[phase], run.steal[phase]);
	CU_ASSERT_EQUAL_FATAL(rametr_cpu("be", run.since[phase] - 2000000000LL, run.until[phase] + 2000000000LL, got,
					 &total, &v),
			      RM_OK);
	fprintf(stderr, "%-4s %8s %12s %12s %8s\n", "ce", "requests", "truth_s", "rametr_s", "error_%");
	for (i = 0; i < nt; i++) {
		double err;

		for (k = 0; k < NCE && strcmp(ces[k], tr[i].ce); k++)
			;
		CU_ASSERT_FATAL(k < NCE);
		charged += got[k];
		err = tr[i].cpu_ns ? ((double)got[k] - (double)tr[i].cpu_ns) * 100.0 / (double)tr[i].cpu_ns : 100.0;
		fprintf(stderr, "%-4s %8" PRIu64 " %12.6f %12.6f %8.3f\n", tr[i].ce, tr[i].requests,
			(double)tr[i].cpu_ns / 1e9, (double)got[k] / 1e9, err);
		CU_ASSERT(tr[i].requests >= (uint64_t)atoi(rates[k]) * (uint64_t)atoi(RUN_S) - 1);
		CU_ASSERT(fabs(err) <= TOL_PCT);
	}
	fprintf(stderr, "be: U %.6f s, charged %.6f s, V %.6f s (%.3f%% of U)\n", (double)total / 1e9,
		(double)charged / 1e9, (double)v / 1e9, total ? (double)v * 100.0 / (double)total : 0.0);
	CU_ASSERT(total > 0);
	CU_ASSERT((double)llabs(v) * 100.0 <= MAX_V_PCT * (double)total);
	free(tr);
	/* the front, for the record: its tenants are charged by the rules */
	CU_ASSERT_EQUAL(rametr_cpu("fe", run.since[phase] - 2000000000LL, run.until[phase] + 2000000000LL, got, &total,
				   &v),
			RM_OK);
	fprintf(stderr, "fe: U %.6f s, c1 %.6f c2 %.6f c3 %.6f s, V %.6f s\n", (double)total / 1e9,
		(double)got[0] / 1e9, (double)got[1] / 1e9, (double)got[2] / 1e9, (double)v / 1e9);
}

static void test_no_loss(void)
{
	check_phase(0);
}

static void test_loss(void)
{
	char *log;

	check_phase(1);
	/* the front did lose datagrams: "forwarded: N datagrams lost on purpose" with N > 0 */
	log = tbt_slurp(in_dir("front-loss.log"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(log);
	{
		const char *p = strstr(log, "forwarded: ");
		unsigned long long lost = 0, again = 0;

		CU_ASSERT_PTR_NOT_NULL(p);
		if (p && sscanf(p, "forwarded: %llu datagrams lost on purpose, %llu sent again", &lost, &again) == 2)
			fprintf(stderr, "front: %llu datagrams lost, %llu requests sent again\n", lost, again);
		CU_ASSERT(lost > 0);
		CU_ASSERT(again >= lost);
	}
	free(log);
}

static CU_TestInfo cases[] = {
	{ "a UDP back end's tenants through a front: CPU per tenant against its own truth", test_no_loss },
	{ "5% of the front's datagrams lost: the same bound, no later pairing shifted", test_loss },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("integ_udp2", cases)
