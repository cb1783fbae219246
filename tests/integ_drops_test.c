/*
 * integ_drops_test.c - overload end to end, with the real programs:
 * rametr-collector (eBPF backend on the running kernel, a part ring of one
 * page) streams to rametr-aggregator over real nng into a real SQLite file.
 * The collector is stopped (SIGSTOP: its consumer cannot read) while this
 * process serves 150 loopback requests, so the kernel drops most of their
 * parts. Nothing may be lost silently: the stored V has CPU and bytes under
 * reason 'dropped', and every window still balances, sum U_c + V = U.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rm_test.h"
#include "rm_err.h"
#include "st.h"

static char dir[256], conf[300], db[300], url[300], col_log[300];

/* 1 once the file at path contains s. */
static int log_has(const char *path, const char *s)
{
	return strstr(rm_test_slurp(path), s) != NULL;
}

static void *server_main(void *arg)
{
	int lfd = *(int *)arg, fd;
	char buf[256];

	while ((fd = accept(lfd, NULL, NULL)) >= 0) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		volatile unsigned x = 0;
		int i;

		for (i = 0; i < 200000; i++) /* some CPU for the segment */
			x += (unsigned)i;
		if (n > 0 && send(fd, buf, (size_t)n, 0) != n)
			perror("send");
		close(fd);
	}
	return NULL;
}

/* n requests of 100 bytes to a loopback server thread, one connection each. */
static int serve(int n)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	char buf[100];
	pthread_t th;
	int lfd, i, ok = 0;

	memset(buf, 'r', sizeof(buf));
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 16) ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen))
		return -1;
	pthread_create(&th, NULL, server_main, &lfd);
	for (i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		    send(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf) && recv(fd, buf, sizeof(buf), MSG_WAITALL) > 0)
			ok++;
		if (fd >= 0)
			close(fd);
	}
	shutdown(lfd, SHUT_RDWR);
	pthread_join(th, NULL);
	close(lfd);
	return ok == n ? 0 : -1;
}

static uint64_t reason_sum(st_db *d, const char *reason, int resource)
{
	struct st_query q = { INT64_MIN, INT64_MAX, "n1", NULL, resource, 0 };
	struct st_row *rows = NULL;
	size_t n = 0, i;
	uint64_t v = 0;

	CU_ASSERT_EQUAL_FATAL(st_query_unacct(d, &q, &rows, &n), RM_OK);
	for (i = 0; i < n; i++)
		if (!strcmp(rows[i].reason, reason))
			v += rows[i].value;
	st_rows_free(rows);
	return v;
}

static void test_drops_charged_to_v(void)
{
	char spool[300], agg_log[300];
	const char *agg_argv[] = { AGG_BIN, "--config", conf, "--db", db, "--listen", url, NULL };
	const char *col_argv[] = { COL_BIN, "--aggregator", url, "--node", "n1", "--spool", spool, "--ring-bytes", "4096",
				   "--flush-ms", "100", NULL };
	struct st_query q = { INT64_MIN, INT64_MAX, "n1", NULL, -1, 0 };
	struct st_row *rows = NULL;
	uint64_t windows = 0, dcpu, drx;
	size_t n = 0;
	st_db *d = NULL;
	pid_t agg, col;
	FILE *f;
	int i;

	if (geteuid() != 0)
		RM_TEST_SKIP("the eBPF backend needs root");
	snprintf(dir, sizeof(dir), "%s", rm_test_tmpdir());
	snprintf(conf, sizeof(conf), "%s/agg.ini", dir);
	snprintf(db, sizeof(db), "%s/rametr.db", dir);
	snprintf(url, sizeof(url), "ipc://%s/agg.ipc", dir);
	snprintf(spool, sizeof(spool), "%s/spool-n1", dir);
	snprintf(agg_log, sizeof(agg_log), "%s/aggregator.log", dir);
	snprintf(col_log, sizeof(col_log), "%s/collector.log", dir);
	f = fopen(conf, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "[aggregator]\nhorizon = 2s\n[ce local]\nclient = 127.0.0.1\n");
	fclose(f);

	agg = rm_test_spawn(agg_argv, agg_log);
	col = rm_test_spawn(col_argv, col_log);
	for (i = 0; i < 3000 && !log_has(col_log, "ebpf backend attached"); i++)
		usleep(10000);
	if (!log_has(col_log, "ebpf backend attached")) {
		kill(col, SIGKILL);
		kill(agg, SIGKILL);
		rm_test_wait(col, 5000);
		rm_test_wait(agg, 5000);
		CU_FAIL_FATAL("the collector did not attach (see its log)");
	}
	CU_ASSERT_EQUAL(serve(20), 0); /* read as usual */
	usleep(300000);
	kill(col, SIGSTOP); /* the consumer stalls: the one-page ring fills */
	CU_ASSERT_EQUAL(serve(150), 0);
	kill(col, SIGCONT);
	usleep(300000);
	CU_ASSERT_EQUAL(serve(20), 0);
	usleep(1200000); /* let the window close */
	kill(col, SIGINT);
	CU_ASSERT_EQUAL(rm_test_wait(col, 20000), 0);
	kill(agg, SIGTERM);
	CU_ASSERT_EQUAL(rm_test_wait(agg, 20000), 0);

	CU_ASSERT_EQUAL_FATAL(st_open(&d, db, ST_OPEN_READONLY), RM_OK);
	dcpu = reason_sum(d, "dropped", ST_R_CPU);
	drx = reason_sum(d, "dropped", ST_R_NET_RX);
	fprintf(stderr, "V(dropped): %llu ns cpu, %llu B rx\n", (unsigned long long)dcpu, (unsigned long long)drx);
	CU_ASSERT(dcpu > 0);
	CU_ASSERT(drx >= 100); /* at least one dropped request's bytes */
	CU_ASSERT(log_has(col_log, "parts dropped in the kernel"));
	CU_ASSERT(log_has(agg_log, "charged to V as 'dropped'"));
	/* sum U_c + V = U in every window */
	CU_ASSERT_EQUAL(st_query_identity(d, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(st_count_windows(d, &q, &windows), RM_OK);
	CU_ASSERT(windows >= 1);
	st_rows_free(rows);
	st_close(d);
}

static CU_TestInfo cases[] = {
	{ "under overload dropped parts are charged to V as 'dropped' and windows balance", test_drops_charged_to_v },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("integ_drops", cases)
