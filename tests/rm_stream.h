/*
 * rm_stream.h - the recorded stream the tests of the programs replay
 * (rametr-collector --backend replay) and what storage must then hold:
 * requests round-robin over RM_STREAM_NCE CEs, and reading that back from a
 * database file.
 */
#ifndef RM_STREAM_H
#define RM_STREAM_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rm_err.h"
#include "st.h"

#define RM_STREAM_NCE 3

/* What storage holds once a stream is applied, per CE (c1, c2, c3), and V of cpu. */
struct rm_stream_expect {
	uint64_t cpu[RM_STREAM_NCE], rx[RM_STREAM_NCE], tx[RM_STREAM_NCE];
	uint64_t unseg_cpu;
};

/*
 * Writes to path a recorded stream of nreq requests, round-robin over 3 CEs
 * (server thread base_tid + c of process base_tid, client 127.0.0.(2 + c)
 * to 127.0.0.1:7000), one every 20 ms from 1700000000 s on; each request is
 * a recv of 64 bytes, d ns of CPU, a send of 512. Fills the exact
 * expectation: a request is charged its 1 ns tail (send to wait) and, but
 * for a thread's first, its 1 ns head (wake-up to recv); the time before a
 * thread's first recv is unsegmented. Returns 0, or -1 if the file could not
 * be written.
 */
static inline int rm_stream_write(const char *path, int nreq, uint32_t base_tid, struct rm_stream_expect *ex)
{
	FILE *f = fopen(path, "w");
	uint64_t t = 1000000;
	int k;

	memset(ex, 0, sizeof(*ex));
	if (!f)
		return -1;
	fprintf(f, "rametr-events 1 window_ns=1000000000 offset_ns=1700000000000000000 ncpu=1\n");
	for (k = 0; k < nreq; k++) {
		int c = k % RM_STREAM_NCE;
		uint32_t tid = base_tid + (uint32_t)c;
		uint64_t d = 1000000 + (uint64_t)(k * 7919 % 1000) * 1000;

		fprintf(f, "%llu 0 switch prev=0 prev_state=R next=%u next_pid=%u\n", (unsigned long long)t, tid,
			base_tid);
		fprintf(f, "%llu 0 recv tid=%u pid=%u comm=srv sock=%d fam=4 laddr=127.0.0.1:7000 "
			   "raddr=127.0.0.%d:4000%d bytes=64\n",
			(unsigned long long)(t + 1), tid, base_tid, 10 + c, 2 + c, c);
		fprintf(f, "%llu 0 send tid=%u pid=%u sock=%d fam=4 laddr=127.0.0.1:7000 raddr=127.0.0.%d:4000%d "
			   "bytes=512\n",
			(unsigned long long)(t + 1 + d), tid, base_tid, 10 + c, 2 + c, c);
		fprintf(f, "%llu 0 switch prev=%u prev_state=S next=0\n", (unsigned long long)(t + 2 + d), tid);
		ex->cpu[c] += d + 1 + (k >= RM_STREAM_NCE);
		ex->rx[c] += 64;
		ex->tx[c] += 512;
		ex->unseg_cpu += k < RM_STREAM_NCE;
		t += 20000000;
	}
	return fclose(f) == 0 ? 0 : -1;
}

/* Sum of U_c (or V with ce = ST_CE_UNACCOUNTABLE) of node and resource in the database file db; 0 if none. */
static inline uint64_t rm_stream_stored(const char *db, const char *node, const char *ce, int resource)
{
	struct st_query q = { INT64_MIN, INT64_MAX, node, NULL, resource, 0 };
	struct st_row *rows = NULL;
	size_t n = 0, i;
	uint64_t v = 0;
	st_db *d = NULL;

	if (access(db, F_OK) != 0 || st_open(&d, db, ST_OPEN_READONLY) != RM_OK)
		return 0;
	if (st_query_usage(d, &q, &rows, &n) == RM_OK)
		for (i = 0; i < n; i++)
			if (!strcmp(rows[i].ce, ce))
				v = rows[i].value;
	st_rows_free(rows);
	st_close(d);
	return v;
}

#endif
