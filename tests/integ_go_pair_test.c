/*
 * integ_go_pair_test.c - two Go servers on one node, loaded at once, each by
 * its own tenant, for real: the testbed's namespace hosts
 * (scripts/netns.sh), tb-goserver (HTTP/1.1) and tb-grpcserver (HTTP/2) on
 * rm-be watched by rametr-collector --netns rm-be (node "be", the default
 * collector: goroutine labels on) streaming to one rametr-aggregator with
 * testbed/go.ini (a rule per tenant address). Tenant c1 calls only
 * tb-goserver, many light requests; tenant c2 only tb-grpcserver, fewer
 * heavy calls, whose goroutines work partly without a label (the runtime's
 * own, the calls' before the creations are followed).
 *
 * What one Go program did without a label must go to its own tenants, not to
 * the other program's: each tenant is charged at most what its server used
 * over its whole life (+2%: a window's edge) and at least 93% of what it used
 * during the loads (measured 98-99.6% of both; before the label counts named
 * their process and were calibrated to its own clock, 87-109%). The servers' CPU is their own process clocks. Printed
 * with the samples' figures from the collector's exit line.
 *
 * RM_GO_PAIR_RUN_S=N sets the loads' seconds (default 6). Needs root, the
 * kernel's BTF and Debian's golang with grpc-go; skips otherwise. The
 * namespaces and every process are removed at exit whatever happened.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rm_err.h"
#include "rm_test.h"
#include "st.h"
#include "tb_testutil.h"
#include "tb_truth.h"
#include "rm_hosts.h"
#include "rm_usage.h"
#include "rm_phase.h"
#include "banned.h"

#define RUN_S_DEFAULT 6
#define HTTP_SERVER "10.213.0.12:7300"
#define GRPC_SERVER "10.213.0.12:7301"

static const char *ces[2] = { "c1", "c2" };

static struct {
	int done, skipped, load_ok;
	char skip_why[200];
	char rametr_why[200];
	char dir[300], db[400];
	int64_t since, until;         /* the servers' lives: from before the first spawn to after both stopped */
	uint64_t life_ns[2];          /* each server's CPU over its life (its process clock just before its stop) */
	uint64_t load_ns[2];          /* ... during the loads */
} run;

/* Spawns a server on rm-be (its log <dir>/<log>) and waits for it to listen; -1 on failure. */
static pid_t start_server(char *const argv[], const char *log)
{
	char path[512];
	pid_t pid;

	snprintf(path, sizeof(path), "%s/%s", run.dir, log);
	pid = rm_hosts_spawn_in("be", argv, path);
	if (pid < 0 || rm_hosts_wait_text(path, "listening", pid, 10000) != 0)
		return -1;
	return pid;
}

/* The one experiment run: hosts up, Rametr, both servers and both loads at once, all stopped. */
static void run_once(void)
{
	char run_s[8], truth_http[400], truth_grpc[400];
	char *http_argv[] = { TB_GOSERVER_BIN, "--listen", HTTP_SERVER, "--truth", truth_http, NULL };
	char *grpc_argv[] = { TB_GRPCSERVER_BIN, "--listen", GRPC_SERVER, "--truth", truth_grpc, NULL };
	char *l1[] = { TB_GOLOAD_BIN, "--server", HTTP_SERVER, "--bind", "10.213.0.21", "--ce", "c1",
		       "--path", "/light", "--rate", "300", "--duration", run_s, NULL };
	char *l2[] = { TB_GRPCLOAD_BIN, "--server", GRPC_SERVER, "--bind", "10.213.0.22", "--ce", "c2",
		       "--method", "Heavy", "--rate", "20", "--burst", "3", "--duration", run_s, NULL };
	pid_t agg, col, srv[2] = { -1, -1 }, load[2] = { -1, -1 };
	uint64_t c0[2];
	unsigned secs;
	int failed = 0, i, rv;

	if (run.done)
		return;
	run.done = 1;
	secs = rm_phase_secs("RM_GO_PAIR_RUN_S", RUN_S_DEFAULT, run_s, sizeof(run_s));
	if (geteuid() != 0) {
		run.skipped = 1;
		snprintf(run.skip_why, sizeof(run.skip_why), "network namespaces need root");
		return;
	}
	if (access(TB_GOSERVER_BIN, X_OK) != 0 || access(TB_GOLOAD_BIN, X_OK) != 0 ||
	    access(TB_GRPCSERVER_BIN, X_OK) != 0 || access(TB_GRPCLOAD_BIN, X_OK) != 0) {
		run.skipped = 1;
		snprintf(run.skip_why, sizeof(run.skip_why), "the testbed's Go servers are not built (needs golang-go)");
		return;
	}
	snprintf(run.dir, sizeof(run.dir), "%s/gopair", rm_test_tmpdir());
	mkdir(run.dir, 0755);
	snprintf(run.db, sizeof(run.db), "%s/rametr.db", run.dir);
	snprintf(truth_http, sizeof(truth_http), "%s/truth-http.csv", run.dir);
	snprintf(truth_grpc, sizeof(truth_grpc), "%s/truth-grpc.csv", run.dir);
	if ((rv = rm_hosts_up()) != 0) {
		run.skipped = 1;
		snprintf(run.skip_why, sizeof(run.skip_why), "%s",
			 rv == -1 ? "the testbed hosts stayed in use by another run" : "cannot create the hosts");
		return;
	}
	rm_phase_start_rametr(AGG_BIN, COL_BIN, run.dir, "go.ini", run.db, NULL, NULL, &agg, &col, run.rametr_why,
			      sizeof(run.rametr_why));
	if (!run.rametr_why[0]) {
		run.since = rm_hosts_real_ns();
		srv[0] = start_server(http_argv, "tb-goserver.log");
		srv[1] = start_server(grpc_argv, "tb-grpcserver.log");
		failed = srv[0] < 0 || srv[1] < 0;
		for (i = 0; i < 2 && !failed; i++)
			c0[i] = rm_hosts_proc_cpu_ns(srv[i]);
		if (!failed) {
			load[0] = rm_hosts_spawn_in("c1", l1, tbt_path(run.dir, "load-c1.txt"));
			load[1] = rm_hosts_spawn_in("c2", l2, tbt_path(run.dir, "load-c2.txt"));
		}
		for (i = 0; i < 2; i++) {
			if (load[i] < 0) {
				failed = 1;
				continue;
			}
			failed |= tbt_wait(load[i], (int)(secs + 60) * 1000) != 0;
			rm_hosts_forget(load[i]);
		}
		for (i = 0; i < 2 && !failed; i++)
			run.load_ns[i] = rm_hosts_proc_cpu_ns(srv[i]) - c0[i];
		sleep(2); /* the runtimes' idle work after the loads, charged as the windows close */
		for (i = 0; i < 2; i++) {
			if (srv[i] < 0)
				continue;
			run.life_ns[i] = rm_hosts_proc_cpu_ns(srv[i]);
			failed |= rm_hosts_stop(srv[i], 20000) != 0;
		}
		run.until = rm_hosts_real_ns();
		run.load_ok = !failed;
		sleep(2); /* the last windows reach the aggregator */
		rm_phase_stop_rametr(run.dir, agg, col, run.rametr_why, sizeof(run.rametr_why));
	}
	rm_hosts_cleanup();
}

static void test_each_tenant_its_own_server(void)
{
	uint64_t got[2], total;
	int64_t v;
	int i;

	run_once();
	RM_HOSTS_NEED_RAMETR(run.skipped, run.skip_why, run.rametr_why);
	CU_ASSERT_FATAL(run.load_ok);
	/* every window the servers lived in (windows start on whole seconds) */
	CU_ASSERT_EQUAL_FATAL(rm_usage_cpu(run.db, "be", run.since - 1000000000LL, run.until + 2000000000LL, ces, 2,
					   got, &total, &v), RM_OK);
	printf("\n  two Go servers on one node, each with its own tenant (U %.3f s, V %.3f s):\n", total / 1e9,
	       v / 1e9);
	for (i = 0; i < 2; i++)
		printf("  %s (%s): charged %.3f s; the server's own CPU %.3f s over its life (%.1f%%), %.3f s during "
		       "the loads (%.1f%%)\n",
		       ces[i], i ? "tb-grpcserver" : "tb-goserver", got[i] / 1e9, run.life_ns[i] / 1e9,
		       run.life_ns[i] ? 100.0 * (double)got[i] / (double)run.life_ns[i] : 0,
		       run.load_ns[i] / 1e9, run.load_ns[i] ? 100.0 * (double)got[i] / (double)run.load_ns[i] : 0);
	{
		char *log = tbt_slurp(tbt_path(run.dir, "collector-be.log")), *l = log ? strstr(log, "goroutine labels: ") : NULL;
		char *end = l ? strchr(l, '\n') : NULL;

		if (l)
			printf("  collector: %.*s\n", end ? (int)(end - l) : (int)strlen(l), l);
		free(log);
	}
	for (i = 0; i < 2; i++) {
		CU_ASSERT(run.load_ns[i] > 0);
		/* nothing of the other server's CPU */
		CU_ASSERT((double)got[i] <= 1.02 * (double)run.life_ns[i]);
		/* and its own */
		CU_ASSERT((double)got[i] >= 0.93 * (double)run.load_ns[i]);
	}
}

static CU_TestInfo cases[] = {
	{ "two Go servers loaded at once: each tenant charged its own server's CPU", test_each_tenant_its_own_server },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("integ_go_pair", cases)
