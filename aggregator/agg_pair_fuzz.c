/*
 * agg_pair_fuzz.c - libFuzzer target for the pairing engine (agg_pair.h) on
 * whatever the segmenter makes of an event stream: the input is replayed
 * (col_replay.h; its length picks follow-replies) into parts, which go to
 * the engine as two nodes' (the stream as node "a", then again as node "b"
 * with other arrival times), with one expiry halfway and a final give-up.
 * Every part must be resolved exactly once, its pieces summing to its cost,
 * and the engine's work (index entries examined) must stay within its bound
 * per part; run it with a per-input time bound, so that an input the work
 * bound misses still fails as a timeout:
 *   cmake -S . -B build-fuzz -DRM_FUZZ=ON -DCMAKE_C_COMPILER=clang
 *   make -C build-fuzz agg_pair_fuzz
 *   build-fuzz/aggregator/agg_pair_fuzz -timeout=2 -max_total_time=60 corpus/ aggregator/testdata
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_config.h"
#include "agg_pair.h"
#include "col_replay.h"
#include "rm_err.h"
#include "banned.h"

#define FUZZ_SEC 1000000000LL
/* Index entries examined per part at most: a part wakes at most 256
   receivers (AGG_MAX_WAKE), each examining at most 256 sends
   (AGG_MAX_SCAN), plus its own lookups. */
#define FUZZ_WORK_PER_PART (2 * 256 * 256 + 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char fuzz_conf[] = "[ce c1]\nclient = 10.1.0.1\n[ce c2]\nclient = 10.1.0.2\n";

struct fuzz_run {
	size_t nids;                 /* ids 1 .. nids */
	const struct rm_part **byid; /* the part given each id */
	uint8_t *seen;               /* per id: resolved */
};

static uint64_t fuzz_v(const struct rm_part *p, int r)
{
	switch (r) {
	case ST_R_CPU: return p->cpu_ns;
	case ST_R_NET_RX: return p->rx_bytes;
	case ST_R_NET_TX: return p->tx_bytes;
	case ST_R_DISK_READ: return p->disk_read;
	default: return p->disk_write;
	}
}

static int fuzz_resolved(void *arg, const struct agg_pair_result *res)
{
	struct fuzz_run *R = arg;
	const struct rm_part *p;
	size_t i;
	int r;

	if (res->id == 0 || res->id > R->nids || R->seen[res->id] || !R->byid[res->id])
		abort();
	R->seen[res->id] = 1;
	p = R->byid[res->id];
	for (r = 0; r < ST_R_COUNT; r++) {
		uint64_t sum = 0;

		for (i = 0; i < res->ndist; i++)
			sum += res->pieces[i].v[r];
		if (sum != fuzz_v(p, r))
			abort();
	}
	return RM_OK;
}

static int fuzz_forget(void *arg, uint64_t id)
{
	struct fuzz_run *R = arg;

	if (id == 0 || id > R->nids || !R->seen[id])
		abort();
	return RM_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct agg_config *cfg;
	struct agg_pair_opts po = { 10 * FUZZ_SEC, 1024 };
	struct col_replay_capture cap;
	struct col_replay_opts o;
	struct col_sink sink;
	struct agg_pair_sink ps;
	struct agg_pair_stats st;
	struct agg_pair *e = NULL;
	struct fuzz_run R;
	char err[512];
	size_t i, k;
	uint64_t id;

	if (!cfg && agg_config_parse(fuzz_conf, strlen(fuzz_conf), "fuzz.ini", &cfg) != RM_OK)
		abort();
	col_replay_capture_init(&cap);
	sink = col_replay_capture_sink(&cap);
	memset(&o, 0, sizeof(o));
	o.max_windows = 4096;
	o.follow_replies = (int)(size % 2);
	o.err = err;
	o.errlen = sizeof(err);
	if (col_replay_buf((const char *)data, size, "fuzz", &sink, &o) != RM_OK || cap.nparts == 0) {
		col_replay_capture_release(&cap);
		return 0;
	}
	memset(&R, 0, sizeof(R));
	R.nids = 2 * cap.nparts;
	if (!(R.seen = calloc(R.nids + 1, 1)) || !(R.byid = calloc(R.nids + 1, sizeof(*R.byid))))
		abort();
	ps.arg = &R;
	ps.resolved = fuzz_resolved;
	ps.forget = fuzz_forget;
	if (agg_pair_open(&e, cfg, &po, &ps) != RM_OK)
		abort();
	for (k = 0; k < 2; k++) {
		struct agg_pair_src src = { k ? "b" : "a", 7, FUZZ_SEC };

		for (i = 0; i < cap.nparts; i++) {
			/* node b's parts arrive in reverse order, later */
			const struct rm_part *p = &cap.parts[k ? cap.nparts - 1 - i : i];
			int64_t now = (int64_t)(k * cap.nparts + i) * (FUZZ_SEC / 100);

			if (k && i == 0 && agg_pair_expire(e, now) != RM_OK)
				abort();
			R.byid[agg_pair_next_id(e)] = p;
			if (agg_pair_add(e, &src, p, now, &id) != RM_OK)
				abort();
		}
	}
	if (agg_pair_give_up(e) != RM_OK)
		abort();
	agg_pair_get_stats(e, &st);
	if (st.pending != 0 || st.scanned > FUZZ_WORK_PER_PART * (uint64_t)(2 * cap.nparts + 1))
		abort();
	/* every part was resolved (the evicted ones too) */
	for (i = 1; i <= R.nids; i++)
		if (!R.seen[i])
			abort();
	agg_pair_close(e);
	free(R.seen);
	free(R.byid);
	col_replay_capture_release(&cap);
	return 0;
}
