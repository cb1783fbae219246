/*
 * integ_xen_test.c - a Xen node like any other: rametr-collector replays the
 * real xentrace file (8 CPUs, credit2) with its Xen backend, streams to
 * rametr-aggregator over real nng into SQLite, and rametrctl shows the node.
 * What is stored must equal what the backend produces when called directly:
 * per CE (domain 14) and dom0's remainder to the nanosecond, every window
 * balanced.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rm_test.h"
#include "col_xen.h"
#include "rm_err.h"
#include "st.h"

struct direct {
	uint64_t dom14, dom0_rest, busy;
};

static int d_part(void *arg, const struct rm_part *p)
{
	struct direct *d = arg;

	if (p->domid == 14)
		d->dom14 += p->cpu_ns;
	else if (p->domid == 0 && !(p->flags & RM_PF_DRIVER))
		d->dom0_rest += p->cpu_ns;
	return RM_OK;
}

static int d_window(void *arg, const struct col_window *w)
{
	((struct direct *)arg)->busy += w->t.busy_ns;
	return RM_OK;
}

static int run(const char *const argv[], const char *log)
{
	pid_t pid = rm_test_spawn(argv, log);
	int st;

	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static uint64_t stored(st_db *d, const char *ce)
{
	struct st_query q = { INT64_MIN, INT64_MAX, "xen1", NULL, ST_R_CPU, 0 };
	struct st_row *rows = NULL;
	size_t n = 0, i;
	uint64_t v = 0;

	CU_ASSERT_EQUAL(st_query_usage(d, &q, &rows, &n), RM_OK);
	for (i = 0; i < n; i++)
		if (!strcmp(rows[i].ce, ce))
			v = rows[i].value;
	st_rows_free(rows);
	return v;
}

static void test_xen_node(void)
{
	const char *dir = rm_test_tmpdir();
	char conf[300], db[300], url[300], log[300], cmd[1200], out[4096];
	struct col_xen_opts xo = { .window_ns = 100000000ULL, .epoch_offset_ns = 1700000000000000000LL,
				   .dom0_charging = 1 };
	struct direct d = { 0 };
	struct col_sink sink = { &d, d_part, d_window };
	struct st_query q = { INT64_MIN, INT64_MAX, "xen1", NULL, -1, 0 };
	struct st_row *rows = NULL;
	size_t n = 0, got;
	st_db *sdb = NULL;
	pid_t agg;
	FILE *f, *p;
	int st;

	if (access(REAL_XEN_TRACE, R_OK) != 0) {
		fprintf(stderr, "the real Xen trace is missing at '%s' (it belongs in tests/data/xen/)\n",
			REAL_XEN_TRACE);
		CU_FAIL_FATAL("real Xen trace missing");
	}
	snprintf(conf, sizeof(conf), "%s/agg.ini", dir);
	snprintf(db, sizeof(db), "%s/rametr.db", dir);
	snprintf(url, sizeof(url), "ipc://%s/agg.ipc", dir);
	snprintf(log, sizeof(log), "%s/xen.log", dir);
	f = fopen(conf, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "[ce tenant14]\nxen_domain = 14\n");
	fclose(f);

	CU_ASSERT_EQUAL_FATAL(col_xen_replay_file(REAL_XEN_TRACE, &xo, &sink), RM_OK);
	CU_ASSERT(d.dom14 > 1000000000ULL); /* about 1.05 s in this trace */

	agg = fork();
	if (agg == 0) {
		int fd = open(log, O_CREAT | O_WRONLY | O_APPEND, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(AGG_BIN, AGG_BIN, "--config", conf, "--db", db, "--listen", url, (char *)NULL);
		_exit(127);
	}
	{
		char spool[300];
		const char *argv[] = { COL_BIN, "--aggregator", url, "--node", "xen1", "--backend", "xen",
				       "--xen-trace", REAL_XEN_TRACE, "--window", "100ms", "--spool", spool, NULL };

		snprintf(spool, sizeof(spool), "%s/spool", dir);
		CU_ASSERT_EQUAL(run(argv, log), 0);
	}
	kill(agg, SIGTERM);
	CU_ASSERT_EQUAL(waitpid(agg, &st, 0), agg);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	CU_ASSERT_EQUAL_FATAL(st_open(&sdb, db, ST_OPEN_READONLY), RM_OK);
	CU_ASSERT_EQUAL(stored(sdb, "tenant14"), d.dom14);
	CU_ASSERT_EQUAL(stored(sdb, ST_CE_UNACCOUNTABLE), d.busy - d.dom14);
	CU_ASSERT_EQUAL(st_query_unacct(sdb, &q, &rows, &n), RM_OK);
	for (got = 0; got < n; got++)
		if (!strcmp(rows[got].reason, "dom0"))
			break;
	CU_ASSERT_FATAL(got < n);
	CU_ASSERT_EQUAL(rows[got].value, d.dom0_rest);
	st_rows_free(rows);
	CU_ASSERT_EQUAL(st_query_identity(sdb, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	st_rows_free(rows);
	st_close(sdb);

	snprintf(cmd, sizeof(cmd), "%s usage --db '%s' --server xen1 --resource cpu 2>&1", CTL_BIN, db);
	p = popen(cmd, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	got = fread(out, 1, sizeof(out) - 1, p);
	out[got] = '\0';
	CU_ASSERT_EQUAL(pclose(p), 0);
	fprintf(stderr, "%s", out);
	CU_ASSERT(strstr(out, "xen1") != NULL);
	CU_ASSERT(strstr(out, "tenant14") != NULL);
	CU_ASSERT(strstr(out, "__unaccountable__") != NULL);
}

static CU_TestInfo cases[] = {
	{ "xen trace through collector, aggregator and rametrctl", test_xen_node },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("integ_xen", cases)
