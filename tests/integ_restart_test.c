/*
 * integ_restart_test.c - the real programs end to end: rametr-collector
 * (replay backend) streams over real nng to rametr-aggregator, which stores
 * into a real SQLite file. The aggregator is killed (SIGKILL) mid-stream and
 * restarted, twice; a collector is stopped while the aggregator is down and
 * a new collector delivers its spool. Every CE's CPU and bytes must arrive
 * exactly once: the stored totals equal the recorded stream's, to the
 * nanosecond and byte, and every window balances. Last, parts held for
 * pairing (a node whose requests came over a pooled connection from a node
 * not heard from yet) survive the aggregator being killed, and are charged
 * to the right CEs when the upstream node's batches arrive after the restart.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rm_test.h"
#include "rm_err.h"
#include "st.h"
#include "rm_stream.h"

#define NCE RM_STREAM_NCE
#define NREQ 3000

static char dir[256], conf[300], db[300], url[300];

/* NREQ requests round-robin over 3 CEs, threads base_tid.. (rm_stream.h), and the exact expectation. */
static void write_stream(const char *path, uint32_t base_tid, struct rm_stream_expect *ex)
{
	CU_ASSERT_EQUAL_FATAL(rm_stream_write(path, NREQ, base_tid, ex), 0);
}

static pid_t start_aggregator(void)
{
	char log[300];
	const char *argv[] = { AGG_BIN, "--config", conf, "--db", db, "--listen", url, NULL };

	snprintf(log, sizeof(log), "%s/aggregator.log", dir);
	return rm_test_spawn(argv, log);
}

static pid_t start_collector(const char *node, const char *events, const char *spool, const char *batch)
{
	char log[300];
	const char *argv[] = { COL_BIN, "--aggregator", url, "--node", node, "--backend", "replay",
			       "--events", events, "--spool", spool, "--batch-parts", batch, NULL };

	snprintf(log, sizeof(log), "%s/collector-%s.log", dir, node);
	return rm_test_spawn(argv, log);
}

/* Sum of U_c (or V with ce = ST_CE_UNACCOUNTABLE) of node and resource in db; 0 if none. */
static uint64_t stored(const char *node, const char *ce, int resource)
{
	return rm_stream_stored(db, node, ce, resource);
}

static void check_exact(const char *node, const struct rm_stream_expect *ex)
{
	static const char *ces[NCE] = { "c1", "c2", "c3" };
	struct st_query q = { INT64_MIN, INT64_MAX, node, NULL, -1, 0 };
	struct st_row *rows = NULL;
	size_t n = 0;
	uint64_t windows = 0;
	st_db *d = NULL;
	int c;

	for (c = 0; c < NCE; c++) {
		CU_ASSERT_EQUAL(stored(node, ces[c], ST_R_CPU), ex->cpu[c]);
		CU_ASSERT_EQUAL(stored(node, ces[c], ST_R_NET_RX), ex->rx[c]);
		CU_ASSERT_EQUAL(stored(node, ces[c], ST_R_NET_TX), ex->tx[c]);
		if (stored(node, ces[c], ST_R_CPU) != ex->cpu[c])
			fprintf(stderr, "%s %s cpu: stored %llu, recorded %llu\n", node, ces[c],
				(unsigned long long)stored(node, ces[c], ST_R_CPU), (unsigned long long)ex->cpu[c]);
	}
	CU_ASSERT_EQUAL(stored(node, ST_CE_UNACCOUNTABLE, ST_R_CPU), ex->unseg_cpu);
	CU_ASSERT_EQUAL_FATAL(st_open(&d, db, ST_OPEN_READONLY), RM_OK);
	CU_ASSERT_EQUAL(st_query_identity(d, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(st_count_windows(d, &q, &windows), RM_OK);
	CU_ASSERT(windows >= 60);
	st_rows_free(rows);
	st_close(d);
}

static void setup(void)
{
	FILE *f;

	snprintf(dir, sizeof(dir), "%s", rm_test_tmpdir());
	snprintf(conf, sizeof(conf), "%s/agg.ini", dir);
	snprintf(db, sizeof(db), "%s/rametr.db", dir);
	snprintf(url, sizeof(url), "ipc://%s/agg.ipc", dir);
	f = fopen(conf, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "[aggregator]\nhorizon = 60s\n"
		   "[ce c1]\nclient = 127.0.0.2\n[ce c2]\nclient = 127.0.0.3\n[ce c3]\nclient = 127.0.0.4\n");
	fclose(f);
}

static void test_aggregator_killed_mid_stream(void)
{
	char events[300], spool[300];
	struct rm_stream_expect ex;
	uint64_t seen, before;
	pid_t agg, col;
	int kills, i, rv;

	setup();
	snprintf(events, sizeof(events), "%s/n1.events", dir);
	snprintf(spool, sizeof(spool), "%s/spool-n1", dir);
	write_stream(events, 100, &ex);
	agg = start_aggregator();
	/* 3000 requests in batches of 7 parts: a few hundred batches in flight */
	col = start_collector("n1", events, spool, "7");
	for (kills = 0; kills < 2; kills++) {
		before = stored("n1", "c1", ST_R_CPU);
		for (i = 0; i < 3000; i++) {
			seen = stored("n1", "c1", ST_R_CPU);
			if (seen > before)
				break;
			usleep(1000);
		}
		if (!(seen > before && seen < ex.cpu[0])) { /* nothing new, or no longer mid-stream */
			fprintf(stderr, "c1 at %llu of %llu ns before the kill (was %llu)\n", (unsigned long long)seen,
				(unsigned long long)ex.cpu[0], (unsigned long long)before);
			kill(col, SIGKILL); /* leave nothing running for the next cases */
			kill(agg, SIGKILL);
			rm_test_wait(col, 5000);
			rm_test_wait(agg, 5000);
			CU_FAIL_FATAL("the aggregator could not be killed mid-stream");
		}
		kill(agg, SIGKILL);
		CU_ASSERT_EQUAL(rm_test_wait(agg, 5000), 128 + SIGKILL);
		fprintf(stderr, "killed the aggregator with c1 at %.1f%% of its cpu\n", 100.0 * seen / ex.cpu[0]);
		usleep(300000);
		agg = start_aggregator();
	}
	rv = rm_test_wait(col, 60000);
	CU_ASSERT_EQUAL(rv, 0);
	kill(agg, SIGTERM);
	CU_ASSERT_EQUAL(rm_test_wait(agg, 10000), 0);
	check_exact("n1", &ex);
}

static void test_spool_survives_collector_restart(void)
{
	char events[300], empty[300], spool[300];
	struct rm_stream_expect ex;
	pid_t agg, col;
	FILE *f;

	setup();
	snprintf(events, sizeof(events), "%s/n2.events", dir);
	snprintf(empty, sizeof(empty), "%s/empty.events", dir);
	snprintf(spool, sizeof(spool), "%s/spool-n2", dir);
	write_stream(events, 200, &ex);
	f = fopen(empty, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "rametr-events 1 window_ns=1000000000 offset_ns=1700000000000000000 ncpu=1\n");
	fclose(f);
	/* no aggregator: the collector gives up after its flush timeout, spools,
	 * and says so in its exit status */
	col = start_collector("n2", events, spool, "50");
	CU_ASSERT_EQUAL(rm_test_wait(col, 30000), 3);
	CU_ASSERT(access(spool, F_OK) == 0);
	CU_ASSERT_EQUAL(stored("n2", "c1", ST_R_CPU), 0);
	/* a new collector (new instance) on the same spool delivers it once */
	agg = start_aggregator();
	col = start_collector("n2", empty, spool, "50");
	CU_ASSERT_EQUAL(rm_test_wait(col, 30000), 0);
	kill(agg, SIGTERM);
	CU_ASSERT_EQUAL(rm_test_wait(agg, 10000), 0);
	check_exact("n2", &ex);
}

#define NPOOL 600

/*
 * Two recorded streams of one pooled connection 10.0.0.1:50000 ->
 * 10.0.0.2:5432: node "up" receives the CEs' requests (one thread per CE,
 * clients 127.0.0.2..4, so rules name the CE) and forwards each on the pool
 * with its TCP byte range; node "down" reads them one by one, works a
 * request-dependent time and answers. No rule matches on "down": its CEs
 * come only from pairing its received bytes with up's sends.
 */
static void write_pool_streams(const char *up, const char *down, struct rm_stream_expect *exu, struct rm_stream_expect *exd)
{
	FILE *fu = fopen(up, "w"), *fd = fopen(down, "w");
	uint64_t t = 1000000, seq = 1000, rseq = 70000;
	int k;

	CU_ASSERT_PTR_NOT_NULL_FATAL(fu);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fd);
	memset(exu, 0, sizeof(*exu));
	memset(exd, 0, sizeof(*exd));
	fprintf(fu, "rametr-events 1 window_ns=1000000000 offset_ns=1700000000000000000 ncpu=1\n");
	fprintf(fd, "rametr-events 1 window_ns=1000000000 offset_ns=1700000000000000000 ncpu=1\n");
	for (k = 0; k < NPOOL; k++) {
		int c = k % NCE;
		uint32_t tid = 700 + (uint32_t)c;
		uint64_t len = 50 + (uint64_t)(k * 37 % 200), e = 20000 + (uint64_t)(k * 13 % 50) * 1000;
		uint64_t d = 500000 + (uint64_t)(k * 7919 % 1000) * 1000;

		fprintf(fu, "%llu 0 switch prev=0 prev_state=S next=%u next_pid=700\n", (unsigned long long)t, tid);
		fprintf(fu, "%llu 0 recv tid=%u pid=700 comm=up sock=%d fam=4 laddr=10.0.0.1:80 raddr=127.0.0.%d:4100%d bytes=64 seq=%llu\n",
			(unsigned long long)(t + 1), tid, 20 + c, 2 + c, c, (unsigned long long)(5000 + 64 * (uint64_t)k));
		fprintf(fu, "%llu 0 send tid=%u pid=700 sock=50 fam=4 laddr=10.0.0.1:50000 raddr=10.0.0.2:5432 bytes=%llu seq=%llu\n",
			(unsigned long long)(t + 1 + e), tid, (unsigned long long)len, (unsigned long long)seq);
		fprintf(fu, "%llu 0 switch prev=%u prev_state=S next=0\n", (unsigned long long)(t + 2 + e), tid);
		exu->cpu[c] += e + 1 + (k >= NCE); /* its tail and head, as in write_stream */
		exu->rx[c] += 64;
		exu->tx[c] += len;
		exu->unseg_cpu += k < NCE;

		fprintf(fd, "%llu 0 switch prev=0 prev_state=S next=800 next_pid=800\n", (unsigned long long)(t + 5000000));
		fprintf(fd, "%llu 0 recv tid=800 pid=800 comm=down sock=60 fam=4 laddr=10.0.0.2:5432 raddr=10.0.0.1:50000 bytes=%llu seq=%llu\n",
			(unsigned long long)(t + 5000001), (unsigned long long)len, (unsigned long long)seq);
		fprintf(fd, "%llu 0 send tid=800 pid=800 sock=60 fam=4 laddr=10.0.0.2:5432 raddr=10.0.0.1:50000 bytes=100 seq=%llu\n",
			(unsigned long long)(t + 5000001 + d), (unsigned long long)rseq);
		fprintf(fd, "%llu 0 switch prev=800 prev_state=S next=0\n", (unsigned long long)(t + 5000002 + d));
		exd->cpu[c] += d + 1 + (k >= 1); /* one thread: a head from the second request on */
		exd->rx[c] += len;
		exd->tx[c] += 100;
		exd->unseg_cpu += k < 1;
		seq += len;
		rseq += 100;
		t += 10000000;
	}
	CU_ASSERT_EQUAL(fclose(fu), 0);
	CU_ASSERT_EQUAL(fclose(fd), 0);
}

static void held_parts(uint64_t *held, uint64_t *unresolved)
{
	st_db *d = NULL;

	*held = *unresolved = 0;
	CU_ASSERT_EQUAL_FATAL(st_open(&d, db, ST_OPEN_READONLY), RM_OK);
	CU_ASSERT_EQUAL(st_held_count(d, held, unresolved), RM_OK);
	st_close(d);
}

static void check_node(const char *node, const struct rm_stream_expect *ex)
{
	static const char *ces[NCE] = { "c1", "c2", "c3" };
	struct st_query q = { INT64_MIN, INT64_MAX, node, NULL, -1, 0 };
	struct st_row *rows = NULL;
	size_t n = 0;
	st_db *d = NULL;
	int c;

	for (c = 0; c < NCE; c++) {
		CU_ASSERT_EQUAL(stored(node, ces[c], ST_R_CPU), ex->cpu[c]);
		CU_ASSERT_EQUAL(stored(node, ces[c], ST_R_NET_RX), ex->rx[c]);
		CU_ASSERT_EQUAL(stored(node, ces[c], ST_R_NET_TX), ex->tx[c]);
	}
	CU_ASSERT_EQUAL(stored(node, ST_CE_UNACCOUNTABLE, ST_R_CPU), ex->unseg_cpu);
	CU_ASSERT_EQUAL_FATAL(st_open(&d, db, ST_OPEN_READONLY), RM_OK);
	CU_ASSERT_EQUAL(st_query_identity(d, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	st_rows_free(rows);
	st_close(d);
}

static void test_pending_parts_survive_restart(void)
{
	char up[300], down[300], spu[300], spd[300];
	struct rm_stream_expect exu, exd;
	uint64_t held, unresolved;
	pid_t agg, col;

	setup();
	snprintf(up, sizeof(up), "%s/up.events", dir);
	snprintf(down, sizeof(down), "%s/down.events", dir);
	snprintf(spu, sizeof(spu), "%s/spool-up", dir);
	snprintf(spd, sizeof(spd), "%s/spool-down", dir);
	write_pool_streams(up, down, &exu, &exd);
	agg = start_aggregator();
	/* the downstream node first: all its parts wait for the upstream's bytes */
	col = start_collector("down", down, spd, "50");
	CU_ASSERT_EQUAL(rm_test_wait(col, 60000), 0);
	held_parts(&held, &unresolved);
	/* per request its segment's part and its tail's */
	CU_ASSERT_EQUAL(unresolved, 2 * NPOOL);
	if (unresolved != 2 * NPOOL)
		fprintf(stderr, "unresolved %llu, expected %d\n", (unsigned long long)unresolved, 2 * NPOOL);
	CU_ASSERT_EQUAL(stored("down", "c1", ST_R_CPU), 0);
	/* the aggregator dies holding them */
	kill(agg, SIGKILL);
	CU_ASSERT_EQUAL(rm_test_wait(agg, 5000), 128 + SIGKILL);
	agg = start_aggregator();
	/* the upstream node's batches arrive after the restart */
	col = start_collector("up", up, spu, "50");
	CU_ASSERT_EQUAL(rm_test_wait(col, 60000), 0);
	kill(agg, SIGTERM);
	CU_ASSERT_EQUAL(rm_test_wait(agg, 10000), 0);
	check_node("up", &exu);
	check_node("down", &exd);
	held_parts(&held, &unresolved);
	CU_ASSERT_EQUAL(unresolved, 0);
}

static CU_TestInfo cases[] = {
	{ "aggregator killed twice mid-stream: nothing lost, nothing twice", test_aggregator_killed_mid_stream },
	{ "spool of a stopped collector is delivered by the next one", test_spool_survives_collector_restart },
	{ "parts held for pairing survive the aggregator being killed", test_pending_parts_survive_restart },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("integ_restart", cases)
