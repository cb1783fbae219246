/*
 * integ_est_test.c - the estimators end to end: rametr-collector (replay
 * backend) streams a recorded service to rametr-aggregator configured with
 * [estimate n1] method = lr, kalman; at its stop the aggregator estimates
 * every window; rametrctl prints the estimates in the measured columns.
 *
 * The recorded service: 3 CEs whose requests cost 1, 2 and 3 ms of CPU and
 * carry 64 bytes each, at rates that vary per window (so LR's system is
 * not singular). The server's CPU is then exactly linear in the CEs' bytes
 * (plus each request's 1 ns tail and 1 ns head), so LR must reproduce the
 * measured per-CE CPU closely; the Kalman filter's forecast (eq. 4.a)
 * misses by the idle factor (1 - U), so it is checked with a looser bound.
 * The figures are printed.
 */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rm_test.h"
#include "rm_err.h"
#include "st.h"
#include "st_est.h"

#define NCE 3
#define NWIN 40
#define T3 (1700000000000000000LL + 3000000000LL)

static char dir[256], conf[300], db[300], url[300];
static const char *ces[NCE] = { "c1", "c2", "c3" };

static int nreq(int w, int c)
{
	return 3 + (w * (c + 3) * 7 + c * 5) % 11;
}

static void write_stream(const char *path, uint64_t *truth)
{
	FILE *f = fopen(path, "w");
	int w, c, j, seen[NCE] = { 0 };

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	memset(truth, 0, NCE * sizeof(*truth));
	fprintf(f, "rametr-events 1 window_ns=1000000000 offset_ns=1700000000000000000 ncpu=1\n");
	for (w = 0; w < NWIN; w++) {
		uint64_t t = (uint64_t)w * 1000000000ULL + 1000000;

		for (c = 0; c < NCE; c++)
			for (j = 0; j < nreq(w, c); j++) {
				uint32_t tid = 100 + (uint32_t)c;
				uint64_t d = (uint64_t)(c + 1) * 1000000;

				fprintf(f, "%llu 0 switch prev=0 prev_state=R next=%u next_pid=100\n",
					(unsigned long long)t, tid);
				fprintf(f, "%llu 0 recv tid=%u pid=100 comm=srv sock=%d fam=4 laddr=127.0.0.1:7000 "
					   "raddr=127.0.0.%d:4000%d bytes=64\n",
					(unsigned long long)(t + 1), tid, 10 + c, 2 + c, c);
				fprintf(f, "%llu 0 send tid=%u pid=100 sock=%d fam=4 laddr=127.0.0.1:7000 "
					   "raddr=127.0.0.%d:4000%d bytes=512\n",
					(unsigned long long)(t + 1 + d), tid, 10 + c, 2 + c, c);
				fprintf(f, "%llu 0 switch prev=%u prev_state=S next=0\n", (unsigned long long)(t + 2 + d),
					tid);
				/* its 1 ns tail (send to wait) and, but for the thread's
				 * first, its 1 ns head (wake-up to recv) are its own */
				truth[c] += d + 1 + (uint64_t)seen[c];
				seen[c] = 1;
				t += 15000000;
			}
	}
	CU_ASSERT_EQUAL(fclose(f), 0);
}

/* Per-CE sums of source (NULL = measured) over everything, and the total U they cover. */
static void sums(st_db *d, const char *source, int64_t since, uint64_t *v, uint64_t *total)
{
	struct st_query q = { since, INT64_MAX, "n1", NULL, ST_R_CPU, 0 };
	struct st_row *rows = NULL;
	size_t n = 0, i;
	int c;

	memset(v, 0, NCE * sizeof(*v));
	if (source) {
		CU_ASSERT_EQUAL_FATAL(st_query_est(d, &q, source, &rows, &n), RM_OK);
	} else {
		CU_ASSERT_EQUAL_FATAL(st_query_usage(d, &q, &rows, &n), RM_OK);
	}
	for (i = 0; i < n; i++)
		for (c = 0; c < NCE; c++)
			if (!strcmp(rows[i].ce, ces[c])) {
				v[c] = rows[i].value;
				*total = rows[i].total;
			}
	st_rows_free(rows);
}

static void test_estimates_end_to_end(void)
{
	char events[300], spool[300], log[300], cmd[1024], line[256];
	uint64_t truth[NCE], meas[NCE], meas3[NCE], lr[NCE], kal[NCE], tm = 0, tl = 0, tk = 0, t3 = 0;
	pid_t agg, col;
	st_db *d = NULL;
	FILE *f, *p;
	int c, rows = 0, header = 0;

	snprintf(dir, sizeof(dir), "%s", rm_test_tmpdir());
	snprintf(conf, sizeof(conf), "%s/agg.ini", dir);
	snprintf(db, sizeof(db), "%s/rametr.db", dir);
	snprintf(url, sizeof(url), "ipc://%s/agg.ipc", dir);
	snprintf(events, sizeof(events), "%s/n1.events", dir);
	snprintf(spool, sizeof(spool), "%s/spool", dir);
	f = fopen(conf, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "[aggregator]\nhorizon = 2s\n"
		   "[ce c1]\nclient = 127.0.0.2\n[ce c2]\nclient = 127.0.0.3\n[ce c3]\nclient = 127.0.0.4\n"
		   "[estimate n1]\nmethod = lr, kalman\nlr_windows = 20\n");
	fclose(f);
	write_stream(events, truth);
	{
		const char *aargv[] = { AGG_BIN, "--config", conf, "--db", db, "--listen", url, NULL };
		const char *cargv[] = { COL_BIN, "--aggregator", url, "--node", "n1", "--backend", "replay",
					"--events", events, "--spool", spool, NULL };

		snprintf(log, sizeof(log), "%s/aggregator.log", dir);
		agg = rm_test_spawn(aargv, log);
		snprintf(log, sizeof(log), "%s/collector.log", dir);
		col = rm_test_spawn(cargv, log);
	}
	CU_ASSERT_EQUAL(rm_test_wait(col, 60000), 0);
	kill(agg, SIGTERM);
	CU_ASSERT_EQUAL(rm_test_wait(agg, 20000), 0);

	CU_ASSERT_EQUAL_FATAL(st_open(&d, db, ST_OPEN_READONLY), RM_OK);
	sums(d, NULL, INT64_MIN, meas, &tm);
	sums(d, NULL, T3, meas3, &t3); /* LR has estimates from window 3 on */
	sums(d, ST_EST_LR, INT64_MIN, lr, &tl);
	sums(d, ST_EST_KALMAN, INT64_MIN, kal, &tk);
	st_close(d);
	for (c = 0; c < NCE; c++) {
		double el = 100.0 * ((double)lr[c] - (double)meas3[c]) / (double)meas3[c];
		double ek = 100.0 * ((double)kal[c] - (double)meas[c]) / (double)meas[c];

		fprintf(stderr, "%s: measured %.6f s (truth %.6f s), kalman %.6f s (%+.3f%%); "
				"windows 3..: measured %.6f s, lr %.6f s (%+.4f%%)\n",
			ces[c], meas[c] / 1e9, truth[c] / 1e9, kal[c] / 1e9, ek, meas3[c] / 1e9, lr[c] / 1e9, el);
		CU_ASSERT_EQUAL(meas[c], truth[c]);
		/* LR's set is solvable from the 4th window on (3 CEs + a0); its
		   shares carry the few ns per request around segments */
		CU_ASSERT(fabs(el) < 0.01);
		CU_ASSERT(kal[c] > 0);
		CU_ASSERT(fabs(ek) < 25);
	}
	CU_ASSERT(tk > 0 && tl > 0 && tm > 0);

	/* the CSV contract, and LR per window against the measurement */
	snprintf(cmd, sizeof(cmd), "'%s' usage --db '%s' --server n1 --resource cpu --per-window -o csv "
				   "--source lr --no-unaccountable --since 0 --until 2000000000",
		 CTL_BIN, db);
	p = popen(cmd, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	while (fgets(line, sizeof(line), p)) {
		char server[64], ce[64], res[16], unit[8];
		long long value, total, ws, wl;
		int w;

		if (!header) {
			CU_ASSERT_STRING_EQUAL(line, "server,ce,resource,value,total,unit,window_start,window_len\n");
			header = 1;
			continue;
		}
		CU_ASSERT_EQUAL_FATAL(sscanf(line, "%63[^,],%63[^,],%15[^,],%lld,%lld,%7[^,],%lld,%lld", server, ce,
					     res, &value, &total, unit, &ws, &wl),
				      8);
		w = (int)((ws - 1700000000000000000LL) / 1000000000LL);
		CU_ASSERT_FATAL(w >= 0 && w < NWIN);
		c = ce[1] - '1';
		CU_ASSERT_FATAL(c >= 0 && c < NCE);
		/* exact linear data: LR's share is (d_c + 2 ns) n_c of y */
		CU_ASSERT(llabs(value - (long long)nreq(w, c) * ((c + 1) * 1000000LL + 2)) <= 2);
		CU_ASSERT_STRING_EQUAL(unit, "ns");
		rows++;
	}
	CU_ASSERT_EQUAL(pclose(p), 0);
	/* windows 3..NWIN-1 have LR estimates, each with the 3 CEs */
	CU_ASSERT_EQUAL(rows, (NWIN - 3) * NCE);
	fprintf(stderr, "lr: %d per-window rows, all within 2 ns of (d_c + 2 ns) n_c\n", rows);
}

static CU_TestInfo cases[] = {
	{ "LR and Kalman estimates through the real programs", test_estimates_end_to_end },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("integ_est", cases)
