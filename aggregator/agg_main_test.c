/*
 * agg_main_test.c - the daemons' configuration and reload, with the real
 * programs: rametr-collector (replay backend) streams to rametr-aggregator
 * over ipc:// into a real SQLite file while the aggregator is sent SIGHUP
 * every few milliseconds with configurations that add and remove a CE,
 * change the log level and throttling, and one that is invalid. Every CE's
 * CPU and bytes must arrive exactly once; the log says what changed and what
 * was refused. Also: options from files and drop-ins, --check-config, a bad
 * --listen leaving no database behind, and the collector's SIGHUP.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rm_test.h"
#include "rm_err.h"
#include "st.h"
#include "rm_stream.h"

#define NCE RM_STREAM_NCE
#define NREQ 3000
#define NREQ_LONG 30000 /* a stream long enough for several reloads */

static char dir[256], conf[300], db[300], url[300], agg_log[300];

/* NREQ requests over 3 CEs (client 127.0.0.2..4), each recv, d ns of CPU, send (rm_stream.h). */
static void write_stream(const char *path, int nreq, struct rm_stream_expect *ex)
{
	CU_ASSERT_EQUAL_FATAL(rm_stream_write(path, nreq, 100, ex), 0);
}

/* Replaces conf atomically (a reload may read it at any moment). */
static void put_conf(const char *text)
{
	char tmp[320];

	snprintf(tmp, sizeof(tmp), "%s.tmp", conf);
	rm_test_write_file(tmp, text);
	CU_ASSERT_EQUAL(rename(tmp, conf), 0);
}

static const char conf_a[] =
	"[aggregator]\nhorizon = 60s\n"
	"[ce c1]\nclient = 127.0.0.2\n[ce c2]\nclient = 127.0.0.3\n[ce c3]\nclient = 127.0.0.4\n";
/* a CE more (no client of the stream), a log level, throttling */
static const char conf_b[] =
	"[aggregator]\nhorizon = 60s\nlog_level = debug\n"
	"[ce c1]\nclient = 127.0.0.2\n[ce c2]\nclient = 127.0.0.3\n[ce c3]\nclient = 127.0.0.4\n"
	"[ce c4]\nclient = 127.0.0.9\n[throttle]\ncap = c4 n1 20%\n";
/* invalid: c5 overlaps c1 */
static const char conf_bad[] =
	"[aggregator]\nhorizon = 60s\n"
	"[ce c1]\nclient = 127.0.0.2\n[ce c2]\nclient = 127.0.0.3\n[ce c3]\nclient = 127.0.0.4\n"
	"[ce c5]\nclient = 127.0.0.0/8\n";
/* needs a restart */
static const char conf_horizon[] =
	"[aggregator]\nhorizon = 30s\n"
	"[ce c1]\nclient = 127.0.0.2\n[ce c2]\nclient = 127.0.0.3\n[ce c3]\nclient = 127.0.0.4\n";

static void setup(const char *name)
{
	snprintf(dir, sizeof(dir), "%s", rm_test_tmpdir());
	snprintf(conf, sizeof(conf), "%s/%s.conf", dir, name);
	snprintf(db, sizeof(db), "%s/%s.db", dir, name);
	snprintf(url, sizeof(url), "ipc://%s/%s.ipc", dir, name);
	snprintf(agg_log, sizeof(agg_log), "%s/%s-aggregator.log", dir, name);
}

static pid_t start_aggregator(void)
{
	const char *argv[] = { AGG_BIN, "--config", conf, "--db", db, "--listen", url, NULL };

	return rm_test_spawn(argv, agg_log);
}

/* Sum of U_c (or V with ce = ST_CE_UNACCOUNTABLE) of node and resource in db; 0 if none. */
static uint64_t stored(const char *node, const char *ce, int resource)
{
	return rm_stream_stored(db, node, ce, resource);
}

/* Waits up to ms for text in the file at path. */
static int wait_log(const char *path, const char *text, int ms)
{
	int i;

	for (i = 0; i < ms / 10; i++) {
		if (strstr(rm_test_slurp(path), text))
			return 1;
		usleep(10000);
	}
	fprintf(stderr, "'%s' not in %s:\n%s\n", text, path, rm_test_slurp(path));
	return 0;
}

/* How often text occurs in the file at path. */
static int count_log(const char *path, const char *text)
{
	const char *p = rm_test_slurp(path);
	int n = 0;

	while ((p = strstr(p, text))) {
		n++;
		p += strlen(text);
	}
	return n;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Collectors stream back to back (each replay of NREQ_LONG requests, every
 * part sent as is, takes about 2 s here) while the aggregator gets a
 * SIGHUP with the next configuration once the previous one was read; it
 * reloads at its next tick (every second), between two batches.
 */
static void test_reload_mid_stream(void)
{
	static const char *const ces[NCE] = { "c1", "c2", "c3" };
	static const char *const seq[] = { conf_b, conf_a, conf_bad, conf_b, conf_horizon, conf_a };
	const size_t nseq = sizeof(seq) / sizeof(seq[0]);
	char events[300], empty[300], spool[300], col_log[300], node[16];
	const char *argv[] = { COL_BIN, "--aggregator", url, "--node", node, "--backend", "replay", "--events",
			       events, "--spool", spool, "--batch-parts", "7", "--no-merge", NULL };
	/* the same node again with nothing new: delivers what its spool kept */
	const char *again[] = { COL_BIN, "--aggregator", url, "--node", node, "--backend", "replay", "--events",
				empty, "--spool", spool, "--no-merge", NULL };
	FILE *f;
	int redeliveries = 0;
	struct st_query q = { INT64_MIN, INT64_MAX, NULL, NULL, -1, 0 };
	struct st_row *rows = NULL;
	struct rm_stream_expect ex;
	size_t n = 0, i, sent = 0, ncol = 0;
	uint64_t next_hup, deadline;
	st_db *d = NULL;
	pid_t agg, col = -1;
	int c, st;

	setup("reload");
	snprintf(events, sizeof(events), "%s/n1.events", dir);
	write_stream(events, NREQ_LONG, &ex);
	snprintf(empty, sizeof(empty), "%s/empty.events", dir);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f = fopen(empty, "w"));
	fprintf(f, "rametr-events 1 window_ns=1000000000 offset_ns=1700000000000000000 ncpu=1\n");
	CU_ASSERT_EQUAL(fclose(f), 0);
	put_conf(conf_a);
	agg = start_aggregator();
	if (!wait_log(agg_log, "listening on", 10000)) {
		kill(agg, SIGKILL); /* leave nothing running */
		rm_test_wait(agg, 5000);
		CU_FAIL_FATAL("the aggregator did not start");
	}
	next_hup = mono_ms() + 300;
	deadline = mono_ms() + 120000;
	while (ncol < 20) {
		if (mono_ms() >= deadline) {
			/* stderr is not buffered: what was reached shows even if the test is killed later */
			fprintf(stderr, "mid-stream reload: after 120 s, %zu of %zu reloads sent, %d read, %zu collectors\n",
				sent, nseq, count_log(agg_log, "SIGHUP: reading"), ncol);
			CU_FAIL("the reloads and collectors did not finish within 120 s");
			break;
		}
		if (waitpid(agg, &st, WNOHANG) == agg) {
			fprintf(stderr, "the aggregator exited mid-stream (wait status %d); its log:\n%s\n", st,
				rm_test_slurp(agg_log));
			if (col > 0) {
				kill(col, SIGKILL);
				rm_test_wait(col, 5000);
			}
			CU_FAIL_FATAL("the aggregator exited mid-stream");
		}
		if (col > 0 && waitpid(col, &st, WNOHANG) == col) {
			col = -1;
			/* 3: the aggregator (slow under sanitizers) had not acknowledged
			 * everything within the collector's wait at its end; the rest
			 * is in its spool, which its next run delivers */
			if (WIFEXITED(st) && WEXITSTATUS(st) == 3 && redeliveries < 20) {
				redeliveries++;
				col = rm_test_spawn(again, col_log);
				continue;
			}
			CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		}
		if (col < 0) {
			if (sent == nseq && count_log(agg_log, "SIGHUP: reading") == (int)nseq)
				break;
			snprintf(node, sizeof(node), "n%zu", ++ncol);
			snprintf(spool, sizeof(spool), "%s/spool-%s", dir, node);
			snprintf(col_log, sizeof(col_log), "%s/reload-%s.log", dir, node);
			col = rm_test_spawn(argv, col_log);
			fprintf(stderr, "collector %s started; %zu reloads sent, %d read\n", node, sent,
				count_log(agg_log, "SIGHUP: reading"));
		}
		/* the next configuration once the last one was read */
		if (sent < nseq && mono_ms() >= next_hup && count_log(agg_log, "SIGHUP: reading") == (int)sent) {
			put_conf(seq[sent++]);
			kill(agg, SIGHUP);
			next_hup = mono_ms() + 1100;
		}
		usleep(10000);
	}
	while (col > 0) {
		st = rm_test_wait(col, 60000);
		col = -1;
		if (st == 3 && redeliveries < 20) {
			redeliveries++;
			col = rm_test_spawn(again, col_log);
		} else {
			CU_ASSERT_EQUAL(st, 0);
		}
	}
	fprintf(stderr, "%zu reloads while %zu collectors streamed (%d spools delivered by a second run)\n", sent,
		ncol, redeliveries);
	CU_ASSERT_EQUAL(count_log(agg_log, "SIGHUP: reading"), (int)nseq);
	kill(agg, SIGTERM);
	CU_ASSERT_EQUAL(rm_test_wait(agg, 10000), 0);
	for (i = 0; i < ncol; i++) {
		snprintf(node, sizeof(node), "n%zu", i + 1);
		for (c = 0; c < NCE; c++) {
			CU_ASSERT_EQUAL(stored(node, ces[c], ST_R_CPU), ex.cpu[c]);
			CU_ASSERT_EQUAL(stored(node, ces[c], ST_R_NET_RX), ex.rx[c]);
			CU_ASSERT_EQUAL(stored(node, ces[c], ST_R_NET_TX), ex.tx[c]);
		}
	}
	CU_ASSERT_EQUAL_FATAL(st_open(&d, db, ST_OPEN_READONLY), RM_OK);
	CU_ASSERT_EQUAL(st_query_identity(d, &q, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0); /* every window balances */
	st_rows_free(rows);
	st_close(d);
	/* the log says what changed and what was refused */
	CU_ASSERT_PTR_NOT_NULL(strstr(rm_test_slurp(agg_log), "CE rules: added c4; throttling on"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rm_test_slurp(agg_log), "CE rules: removed c4; throttling off"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rm_test_slurp(agg_log), "log level info -> debug"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rm_test_slurp(agg_log), "log level debug -> info"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rm_test_slurp(agg_log), "[ce c5] overlaps [ce c1]"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rm_test_slurp(agg_log), "reload refused: configuration"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rm_test_slurp(agg_log), "reload refused: horizon changed"));
	/* one line per collector run, a second run of a node included */
	CU_ASSERT_EQUAL(count_log(agg_log, "' connected (host"), (int)ncol + redeliveries);
}

/* Writes text to the drop-in file drop and runs --check-config on the test's configuration: its status
   (pclose's), its output (both streams) in out. */
static int check_drop_in(const char *drop, const char *text, char *out, size_t outlen)
{
	char cmd[1400];
	FILE *p;

	rm_test_write_file(drop, text);
	snprintf(cmd, sizeof(cmd), "'%s' --config '%s' --check-config 2>&1", AGG_BIN, conf);
	out[0] = '\0';
	if (!(p = popen(cmd, "r")))
		return -1;
	out[fread(out, 1, outlen - 1, p)] = '\0';
	return pclose(p);
}

/* Settings from the file and a drop-in; the command line overrides them. */
static void test_files_and_flags(void)
{
	char dropdir[320], drop[400], other_db[300], cmd[1400];
	pid_t agg;
	FILE *p;
	char out[2048] = "";
	int rv;

	setup("files");
	snprintf(dropdir, sizeof(dropdir), "%s.d", conf);
	snprintf(drop, sizeof(drop), "%s/50-db.conf", dropdir);
	snprintf(other_db, sizeof(other_db), "%s/from-dropin.db", dir);
	CU_ASSERT_EQUAL_FATAL(mkdir(dropdir, 0755), 0);
	put_conf("[aggregator]\nlog_level = warning\nkeep_pending = yes\n[ce c1]\nclient = 10.0.0.0/8\n");
	snprintf(cmd, sizeof(cmd), "[aggregator]\ndb = %s\nlisten = %s\n[ce c2]\nclient = 10.9.0.0/16\npriority = 2\n",
		 other_db, url);
	rm_test_write_file(drop, cmd);
	snprintf(cmd, sizeof(cmd), "'%s' --config '%s' --check-config", AGG_BIN, conf);
	p = popen(cmd, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_PTR_NOT_NULL(fgets(out, sizeof(out), p));
	CU_ASSERT_EQUAL(pclose(p), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "is valid: 2 CE rules"));
	/* the drop-in's db and listen; log_level = warning hides the info lines */
	{
		const char *argv[] = { AGG_BIN, "--config", conf, NULL };

		agg = rm_test_spawn(argv, agg_log);
	}
	usleep(500000);
	kill(agg, SIGTERM);
	CU_ASSERT_EQUAL(rm_test_wait(agg, 10000), 0);
	CU_ASSERT(access(other_db, F_OK) == 0);
	CU_ASSERT_PTR_NULL(strstr(rm_test_slurp(agg_log), "listening on"));
	/* flags override: --log-level info shows them again, --db another file */
	{
		const char *argv[] = { AGG_BIN, "--config", conf, "--log-level", "info", "--db", db, NULL };

		agg = rm_test_spawn(argv, agg_log);
	}
	CU_ASSERT(wait_log(agg_log, "storing to '", 10000));
	kill(agg, SIGTERM);
	CU_ASSERT_EQUAL(rm_test_wait(agg, 10000), 0);
	CU_ASSERT(access(db, F_OK) == 0);
	/* an unknown key is refused with its place */
	rv = check_drop_in(drop, "[aggregator]\ncolour = red\n", out, sizeof(out));
	if (!WIFEXITED(rv) || WEXITSTATUS(rv) != 2)
		fprintf(stderr, "pclose: %d, output '%s'\n", rv, out);
	CU_ASSERT(WIFEXITED(rv) && WEXITSTATUS(rv) == 2);
	snprintf(cmd, sizeof(cmd), "%s:2: unknown key 'colour' in [aggregator]", drop);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, cmd));
	/* the runtime rule's weights: percents, refused out of range with their place, taken within */
	rv = check_drop_in(drop, "[aggregator]\nruntime_by_requests = 101\n", out, sizeof(out));
	CU_ASSERT(WIFEXITED(rv) && WEXITSTATUS(rv) != 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "invalid runtime_by_requests '101' (a whole number from 0 to 100)"));
	rv = check_drop_in(drop, "[aggregator]\ngo_runtime_by_requests = 200\n", out, sizeof(out));
	CU_ASSERT(WIFEXITED(rv) && WEXITSTATUS(rv) != 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "invalid go_runtime_by_requests '200' (a whole number from 0 to 100)"));
	rv = check_drop_in(drop, "[aggregator]\ngo_labelled_runtime_by_requests = -1\n", out, sizeof(out));
	CU_ASSERT(WIFEXITED(rv) && WEXITSTATUS(rv) != 0);
	CU_ASSERT_PTR_NOT_NULL(
		strstr(out, "invalid go_labelled_runtime_by_requests '-1' (a whole number from 0 to 100)"));
	rv = check_drop_in(drop,
			   "[aggregator]\nruntime_by_requests = 0\ngo_runtime_by_requests = 100\n"
			   "go_labelled_runtime_by_requests = 40\n",
			   out, sizeof(out));
	CU_ASSERT(WIFEXITED(rv) && WEXITSTATUS(rv) == 0);
}

/* A listen address that cannot be used leaves no database file behind. */
static void test_bad_listen_no_db(void)
{
	const char *argv[] = { AGG_BIN, "--config", conf, "--db", db, "--listen", "tcp://300.1.2.3:7600", NULL };
	pid_t agg;

	setup("badlisten");
	put_conf("[aggregator]\n");
	agg = rm_test_spawn(argv, agg_log);
	CU_ASSERT_EQUAL(rm_test_wait(agg, 10000), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rm_test_slurp(agg_log), "failed to listen on 'tcp://300.1.2.3:7600'"));
	CU_ASSERT(access(db, F_OK) != 0);
	/* an existing database is never removed */
	rm_test_write_file(db, "");
	agg = rm_test_spawn(argv, agg_log);
	CU_ASSERT_EQUAL(rm_test_wait(agg, 10000), 1);
	CU_ASSERT(access(db, F_OK) == 0);
}

/*
 * The collector's settings from its file; SIGHUP reads it again. No
 * aggregator runs: the collector waits 5 s for acknowledgements at the end,
 * a SIGHUP in that time is read before its closing summary.
 */
static void test_collector_file_and_hup(void)
{
	char events[300], ccfg[300], col_log[300], text[1200];
	const char *argv[] = { COL_BIN, "--config", ccfg, NULL };
	struct rm_stream_expect ex;
	pid_t col;
	int rv;

	setup("colconf");
	snprintf(events, sizeof(events), "%s/n2.events", dir);
	snprintf(ccfg, sizeof(ccfg), "%s/collector.conf", dir);
	snprintf(col_log, sizeof(col_log), "%s/colconf-collector.log", dir);
	write_stream(events, NREQ, &ex);
	snprintf(text, sizeof(text), "[collector]\naggregator = %s\nnode = n2\nbackend = replay\nevents = %s\n"
		 "spool = %s/spool-n2\nbatch_parts = 7\n", url, events, dir);
	rm_test_write_file(ccfg, text);
	col = rm_test_spawn(argv, col_log);
	CU_ASSERT(wait_log(col_log, "node 'n2', backend replay, sending to ipc://", 10000));
	snprintf(text + strlen(text), sizeof(text) - strlen(text), "log_level = warning\n");
	rm_test_write_file(ccfg, text);
	kill(col, SIGHUP);
	rv = rm_test_wait(col, 60000);
	CU_ASSERT(rv >= 0 && rv < 128); /* not killed by the SIGHUP */
	CU_ASSERT_PTR_NOT_NULL(strstr(rm_test_slurp(col_log), "log level info -> warning"));
	/* at warning, the closing summary (info) is not written */
	CU_ASSERT_PTR_NULL(strstr(rm_test_slurp(col_log), " acked, "));
	/* a bad file at a SIGHUP changes nothing */
	(void)ex;
}

/*
 * Under systemd: the aggregator tells the service manager (NOTIFY_SOCKET,
 * here a datagram socket of the test's own) READY=1 once it listens,
 * WATCHDOG=1 every tick, RELOADING=1 then READY=1 at a SIGHUP, STOPPING=1.
 */
static void test_sd_notify(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { 0, 200000 };
	char got[8192] = "", buf[512];
	size_t len = 0;
	pid_t agg;
	int fd, i, hup = 0, term = 0;
	ssize_t n;

	setup("notify");
	put_conf(conf_a);
	CU_ASSERT_FATAL(strlen(dir) + 13 < sizeof(sa.sun_path));
	memcpy(sa.sun_path, dir, strlen(dir));
	memcpy(sa.sun_path + strlen(dir), "/notify.sock", 13);
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setenv("NOTIFY_SOCKET", sa.sun_path, 1);
	agg = start_aggregator();
	unsetenv("NOTIFY_SOCKET");
	for (i = 0; i < 60; i++) {
		if ((n = recv(fd, buf, sizeof(buf) - 1, 0)) > 0 && len + (size_t)n + 2 < sizeof(got)) {
			memcpy(got + len, buf, (size_t)n);
			len += (size_t)n;
			got[len++] = '|';
			got[len] = '\0';
		}
		if (!hup && strstr(got, "READY=1") && strstr(got, "WATCHDOG=1")) {
			put_conf(conf_b);
			kill(agg, SIGHUP);
			hup = 1;
		}
		if (hup && !term && strstr(got, "RELOADING=1")) {
			/* READY=1 again after the reload, then stop */
			if (strstr(strstr(got, "RELOADING=1"), "READY=1")) {
				kill(agg, SIGTERM);
				term = 1;
			}
		}
		if (term && strstr(got, "STOPPING=1"))
			break;
	}
	if (!term)
		kill(agg, SIGTERM);
	CU_ASSERT_EQUAL(rm_test_wait(agg, 10000), 0);
	close(fd);
	fprintf(stderr, "notifications: %s\n", got);
	CU_ASSERT_PTR_NOT_NULL(strstr(got, "READY=1\nSTATUS=serving, 3 CE rules"));
	CU_ASSERT_PTR_NOT_NULL(strstr(got, "WATCHDOG=1"));
	CU_ASSERT_PTR_NOT_NULL(strstr(got, "RELOADING=1"));
	CU_ASSERT_PTR_NOT_NULL(strstr(got, "READY=1\nSTATUS=serving, 4 CE rules"));
	CU_ASSERT_PTR_NOT_NULL(strstr(got, "STOPPING=1"));
}

static CU_TestInfo cases[] = {
	{ "SIGHUP mid-stream: nothing lost or counted twice, changes logged", test_reload_mid_stream },
	{ "settings from files and drop-ins; flags override", test_files_and_flags },
	{ "a bad --listen leaves no database behind", test_bad_listen_no_db },
	{ "the collector's file; SIGHUP changes its log level", test_collector_file_and_hup },
	{ "systemd notifications: ready, watchdog, reloading, stopping", test_sd_notify },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_main", cases)
