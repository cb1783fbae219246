/*
 * agg_pair_test.c - the pairing engine on recorded streams: event files of
 * two or three nodes (the .events files in testdata/) are replayed through the
 * user-space segmenter (col_replay) into parts, which are fed to the engine
 * in different orders and at different times. Cases: a pooled connection
 * carrying three CEs' interleaved requests (with a second hop), arrival out
 * of order, skewed node clocks, coalesced sends and partial reads and
 * writes split exactly by bytes, overlapping sends and suspect ranges
 * (untrusted), no upstream (unpaired after the horizon), sequence wrap at
 * 2^32, expiry and the bound on held parts, and restoring held state.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rm_test.h"
#include "agg_account.h"
#include "agg_config.h"
#include "agg_pair.h"
#include "col_enc.h"
#include "col_events.h"
#include "col_replay.h"
#include "rm_err.h"
#include "banned.h"

#define SEC 1000000000LL
#define H (10 * SEC)     /* horizon used by the tests */
#define MAXP 64          /* parts per run */
#define MAXT 64          /* total rows per run */

static const char conf[] =
	"[ce c1]\nclient = 10.1.0.1\n"
	"[ce c2]\nclient = 10.1.0.2\n"
	"[ce c3]\nclient = 10.1.0.3\n";

/* One node's recorded stream, replayed. */
struct stream {
	const char *node;
	struct col_replay_capture cap;
	struct rm_wpart *wp; /* cap's parts as the collector sends them (wpart()) */
};

/* What the sink saw for one part. */
struct outcome {
	int stream;
	size_t idx;
	int resolved, forgotten, held;
	enum agg_pair_how how;
	char dist[256];
};

struct total {
	char node[64];
	char key[80];    /* CE name, or "!reason" */
	uint64_t v[ST_R_COUNT];
};

struct run {
	struct agg_config *cfg;
	struct agg_pair *e;
	struct stream *st;
	struct outcome by_id[MAXP + 1];
	struct total tot[MAXT];
	size_t ntot;
	int errors;        /* sink-side violations */
	/* for restore: state as a persisting caller would keep it */
	char held_dist[MAXP + 1][256];
	int held_live[MAXP + 1];
	int64_t arrival[MAXP + 1];
};

static void replay_follow(struct stream *s, const char *node, const char *file, int follow_replies)
{
	struct col_replay_opts o = { 0 };
	struct col_sink sink;
	char path[512];

	o.follow_replies = follow_replies;
	s->node = node;
	col_replay_capture_init(&s->cap);
	s->wp = NULL;
	sink = col_replay_capture_sink(&s->cap);
	snprintf(path, sizeof(path), "%s/%s", AGG_TESTDATA, file);
	CU_ASSERT_EQUAL_FATAL(col_replay_file(path, &sink, &o), RM_OK);
	CU_ASSERT_FATAL(s->cap.nparts > 0);
}

static void replay(struct stream *s, const char *node, const char *file)
{
	replay_follow(s, node, file, 0);
}

/*
 * Replays `file` with every timestamp moved by dts and the node's clock
 * offset by doff: the same work seen by a node whose clocks are off.
 */
static void replay_skewed(struct stream *s, const char *node, const char *file, int64_t dts, int64_t doff)
{
	struct col_events *r = NULL;
	struct col_events_hdr h;
	struct col_event ev;
	struct col_sink sink;
	char path[512], line[COL_EVENTS_LINE_MAX], err[256];
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int rv;

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	snprintf(path, sizeof(path), "%s/%s", AGG_TESTDATA, file);
	CU_ASSERT_EQUAL_FATAL(col_events_open(&r, path, err, sizeof(err)), RM_OK);
	h = *col_events_header(r);
	h.offset_ns = (uint64_t)((int64_t)h.offset_ns + doff);
	CU_ASSERT_EQUAL_FATAL(col_events_format_header(&h, line, sizeof(line)), RM_OK);
	fputs(line, f);
	while ((rv = col_events_next(r, &ev)) == RM_OK) {
		ev.ts_ns = (uint64_t)((int64_t)ev.ts_ns + dts);
		CU_ASSERT_EQUAL_FATAL(col_events_format(&ev, line, sizeof(line)), RM_OK);
		fputs(line, f);
	}
	CU_ASSERT_EQUAL_FATAL(rv, RM_ENOENT);
	col_events_close(r);
	fclose(f);
	s->node = node;
	col_replay_capture_init(&s->cap);
	s->wp = NULL;
	sink = col_replay_capture_sink(&s->cap);
	CU_ASSERT_EQUAL_FATAL(col_replay_buf(buf, len, "skewed", &sink, NULL), RM_OK);
	free(buf);
}

/*
 * Replays `file` as node `node` with the clients 10.1.0.1 and 10.1.0.3
 * swapped: the same connections on the node's side, other CEs.
 */
static void replay_swapped(struct stream *s, const char *node, const char *file, int follow_replies)
{
	struct col_replay_opts o = { 0 };
	struct col_sink sink;
	char path[512], *buf, *p;
	long len;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", AGG_TESTDATA, file);
	f = fopen(path, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL_FATAL(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	CU_ASSERT_FATAL(len > 0);
	rewind(f);
	buf = malloc((size_t)len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	CU_ASSERT_EQUAL_FATAL(fread(buf, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	for (p = buf; (p = memmem(p, (size_t)(buf + len - p), "10.1.0.", 7)) != NULL; p += 7)
		if (p + 7 < buf + len && (p[7] == '1' || p[7] == '3'))
			p[7] = p[7] == '1' ? '3' : '1';
	o.follow_replies = follow_replies;
	s->node = node;
	col_replay_capture_init(&s->cap);
	s->wp = NULL;
	sink = col_replay_capture_sink(&s->cap);
	CU_ASSERT_EQUAL_FATAL(col_replay_buf(buf, (size_t)len, node, &sink, &o), RM_OK);
	free(buf);
}

static void streams_free(struct stream *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		col_replay_capture_release(&s[i].cap);
		free(s[i].wp);
		s[i].wp = NULL;
	}
}

/* Part idx of stream s as the aggregator receives it: the collector's wire part. */
static const struct rm_wpart *wpart(struct stream *s, size_t idx)
{
	size_t i;

	if (!s->wp) {
		s->wp = calloc(s->cap.nparts, sizeof(*s->wp));
		CU_ASSERT_FATAL(s->wp != NULL);
		for (i = 0; i < s->cap.nparts; i++)
			col_part_to_wire(&s->wp[i], &s->cap.parts[i]);
	}
	return &s->wp[idx];
}

static const struct rm_wpart *part_of(const struct run *R, const struct outcome *o)
{
	return wpart(&R->st[o->stream], o->idx);
}

static uint64_t part_v(const struct rm_wpart *p, int r)
{
	switch (r) {
	case ST_R_CPU: return p->cpu_ns;
	case ST_R_NET_RX: return p->rx_bytes;
	case ST_R_NET_TX: return p->tx_bytes;
	case ST_R_DISK_READ: return p->disk_read;
	default: return p->disk_write;
	}
}

static void total_add(struct run *R, const char *node, const char *ce, const char *reason, const uint64_t *v)
{
	char key[80];
	size_t i;
	int r;

	snprintf(key, sizeof(key), "%s%s", ce ? "" : "!", ce ? ce : reason);
	for (i = 0; i < R->ntot; i++)
		if (!strcmp(R->tot[i].node, node) && !strcmp(R->tot[i].key, key))
			break;
	if (i == R->ntot) {
		if (R->ntot == MAXT) {
			R->errors++;
			return;
		}
		memset(&R->tot[i], 0, sizeof(R->tot[i]));
		snprintf(R->tot[i].node, sizeof(R->tot[i].node), "%s", node);
		snprintf(R->tot[i].key, sizeof(R->tot[i].key), "%s", key);
		R->ntot++;
	}
	for (r = 0; r < ST_R_COUNT; r++)
		R->tot[i].v[r] += v[r];
}

static int on_resolved(void *arg, const struct agg_pair_result *res)
{
	struct run *R = arg;
	struct outcome *o;
	const struct rm_wpart *p;
	char *d = NULL;
	size_t i;
	int r;

	if (res->id == 0 || res->id > MAXP || R->by_id[res->id].resolved) {
		R->errors++;
		return RM_OK;
	}
	o = &R->by_id[res->id];
	p = part_of(R, o);
	o->resolved = 1;
	o->how = res->how;
	o->held = res->held;
	/* the pieces sum exactly to the part's cost, resource by resource */
	for (r = 0; r < ST_R_COUNT; r++) {
		uint64_t sum = 0;

		for (i = 0; i < res->ndist; i++)
			sum += res->pieces[i].v[r];
		if (sum != part_v(p, r))
			R->errors++;
	}
	if (res->win != p->win || strcmp(res->node, R->st[o->stream].node) || res->seg_id != p->seg_id)
		R->errors++;
	for (i = 0; i < res->ndist; i++)
		total_add(R, res->node, res->pieces[i].ce, res->pieces[i].reason, res->pieces[i].v);
	if (agg_pair_dist_format(res->dist, res->ndist, &d) != RM_OK) {
		R->errors++;
		return RM_OK;
	}
	snprintf(o->dist, sizeof(o->dist), "%s", d);
	if (res->held) {
		snprintf(R->held_dist[res->id], sizeof(R->held_dist[0]), "%s", d);
		R->held_live[res->id] = 1;
	}
	free(d);
	return RM_OK;
}

static int on_forget(void *arg, uint64_t id)
{
	struct run *R = arg;

	if (id == 0 || id > MAXP || !R->by_id[id].resolved || R->by_id[id].forgotten)
		R->errors++;
	else
		R->by_id[id].forgotten = 1;
	if (id <= MAXP)
		R->held_live[id] = 0;
	return RM_OK;
}

static void run_open_cfg(struct run *R, struct stream *st, const char *text, size_t max_held)
{
	struct agg_pair_opts o = { H, max_held };
	struct agg_pair_sink sink = { R, on_resolved, on_forget };

	memset(R, 0, sizeof(*R));
	R->st = st;
	CU_ASSERT_EQUAL_FATAL(agg_config_parse(text, strlen(text), "t.ini", &R->cfg), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_pair_open(&R->e, R->cfg, &o, &sink), RM_OK);
}

static void run_open(struct run *R, struct stream *st)
{
	run_open_cfg(R, st, conf, 1000);
}

static void run_close(struct run *R)
{
	CU_ASSERT_EQUAL(R->errors, 0);
	agg_pair_close(R->e);
	agg_config_free(R->cfg);
}

/* Feeds part idx of stream s at time now. */
static uint64_t feed(struct run *R, int s, size_t idx, int64_t now)
{
	struct agg_pair_src src = { R->st[s].node, 7, SEC };
	uint64_t id = 0;

	uint64_t nid = agg_pair_next_id(R->e);

	CU_ASSERT_FATAL(nid <= MAXP);
	/* a new id: whatever the slot held (a restored run) is done with */
	memset(&R->by_id[nid], 0, sizeof(R->by_id[nid]));
	R->by_id[nid].stream = s;
	R->by_id[nid].idx = idx;
	CU_ASSERT_EQUAL_FATAL(agg_pair_add(R->e, &src, wpart(&R->st[s], idx), now, &id), RM_OK);
	R->by_id[id].stream = s;
	R->by_id[id].idx = idx;
	R->arrival[id] = now;
	return id;
}

/* A deterministic permutation of the (stream, part) pairs of st[0..n). */
struct item {
	int s;
	size_t i;
};

static size_t all_items(const struct stream *st, size_t n, struct item *it)
{
	size_t k = 0, s, i;

	for (s = 0; s < n; s++)
		for (i = 0; i < st[s].cap.nparts; i++)
			it[k++] = (struct item){ (int)s, i };
	return k;
}

static void reverse(struct item *it, size_t n)
{
	size_t k;

	for (k = 0; k < n / 2; k++) {
		struct item t = it[k];

		it[k] = it[n - 1 - k];
		it[n - 1 - k] = t;
	}
}

static void shuffle(struct item *it, size_t n, uint64_t seed)
{
	size_t i;

	for (i = n; i > 1; i--) {
		size_t j;
		struct item t;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		j = (size_t)((seed >> 33) % i);
		t = it[i - 1];
		it[i - 1] = it[j];
		it[j] = t;
	}
}

/*
 * Opens a run and feeds it every part of the nst streams, in the order of
 * `order`: 0 as recorded, 1 reversed, else shuffled with that seed.
 */
static void feed_all(struct run *R, struct stream *st, size_t nst, struct item *it, uint64_t order)
{
	size_t n = all_items(st, nst, it), k;

	if (order == 1)
		reverse(it, n);
	else if (order > 1)
		shuffle(it, n, order);
	run_open(R, st);
	for (k = 0; k < n; k++)
		feed(R, it[k].s, it[k].i, (int64_t)k);
}

static const struct total *total_of(const struct run *R, const char *node, const char *key)
{
	size_t i;

	for (i = 0; i < R->ntot; i++)
		if (!strcmp(R->tot[i].node, node) && !strcmp(R->tot[i].key, key))
			return &R->tot[i];
	return NULL;
}

static uint64_t tv(const struct run *R, const char *node, const char *key, int r)
{
	const struct total *t = total_of(R, node, key);

	return t ? t->v[r] : 0;
}

/* Every part of the run was resolved exactly once. */
static size_t count_resolved(const struct run *R, uint64_t nids)
{
	size_t n = 0;
	uint64_t id;

	for (id = 1; id <= nids; id++)
		n += R->by_id[id].resolved;
	return n;
}

/* The outcome of stream s's part idx in run R (by scanning ids). */
static const struct outcome *outcome_of(const struct run *R, int s, size_t idx)
{
	size_t id;

	for (id = 1; id <= MAXP; id++)
		if (R->by_id[id].stream == s && R->by_id[id].idx == idx && R->by_id[id].resolved)
			return &R->by_id[id];
	return NULL;
}

/* ---- the cases ---- */

static void test_apportion(void)
{
	static const struct {
		uint64_t total;
		uint64_t w[4];
		size_t n;
	} v[] = {
		{ 1000007, { 100, 200, 300 }, 3 },
		{ 400000, { 80, 250 }, 2 },
		{ 10, { 1, 1, 1 }, 3 },
		{ 0, { 5, 7 }, 2 },
		{ UINT64_MAX, { UINT64_MAX / 3, UINT64_MAX / 3, 2 }, 3 },
		{ 12345, { 1 }, 1 },
		{ 7, { 1, 1000000, 1, 1 }, 4 },
	};
	size_t k, i, j;

	for (k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
		unsigned __int128 W = 0;
		uint64_t out[4], sum = 0;

		agg_pair_apportion(v[k].total, v[k].w, v[k].n, out);
		for (i = 0; i < v[k].n; i++)
			W += v[k].w[i];
		for (i = 0; i < v[k].n; i++) {
			uint64_t fl = (uint64_t)(((unsigned __int128)v[k].total * v[k].w[i]) / W);

			sum += out[i];
			/* each piece is its exact share rounded down or up */
			CU_ASSERT(out[i] == fl || out[i] == fl + 1);
			/* a piece rounded up has a remainder at least as large as any rounded down */
			for (j = 0; j < v[k].n; j++) {
				uint64_t flj = (uint64_t)(((unsigned __int128)v[k].total * v[k].w[j]) / W);

				if (out[i] == fl + 1 && out[j] == flj)
					CU_ASSERT(((unsigned __int128)v[k].total * v[k].w[i]) % W >=
						  ((unsigned __int128)v[k].total * v[k].w[j]) % W);
			}
		}
		CU_ASSERT_EQUAL(sum, v[k].total);
	}
	/* the hand-computed split of coalesce_db.events */
	{
		uint64_t w[3] = { 100, 200, 300 }, out[3];

		agg_pair_apportion(1000007, w, 3, out);
		CU_ASSERT_EQUAL(out[0], 166668);
		CU_ASSERT_EQUAL(out[1], 333336);
		CU_ASSERT_EQUAL(out[2], 500003);
	}
}

/* Expected per-node totals of the pool_*.events scenario (hand-computed in the files);
 * extra: rows expected besides them. */
static void check_pool_totals_with(const struct run *R, size_t extra)
{
	/* front: rules for the requests, bytes for the responses */
	CU_ASSERT_EQUAL(tv(R, "front", "c1", ST_R_CPU), 340000);
	CU_ASSERT_EQUAL(tv(R, "front", "c2", ST_R_CPU), 260000);
	CU_ASSERT_EQUAL(tv(R, "front", "c3", ST_R_CPU), 170000);
	CU_ASSERT_EQUAL(tv(R, "front", "c1", ST_R_NET_RX), 1000);
	CU_ASSERT_EQUAL(tv(R, "front", "c2", ST_R_NET_RX), 900);
	CU_ASSERT_EQUAL(tv(R, "front", "c3", ST_R_NET_RX), 280);
	CU_ASSERT_EQUAL(tv(R, "front", "c1", ST_R_NET_TX), 1180);
	CU_ASSERT_EQUAL(tv(R, "front", "c2", ST_R_NET_TX), 1020);
	CU_ASSERT_EQUAL(tv(R, "front", "c3", ST_R_NET_TX), 330);
	/* db: every CE from the bytes of the one pooled connection */
	CU_ASSERT_EQUAL(tv(R, "db", "c1", ST_R_CPU), 2500000);
	CU_ASSERT_EQUAL(tv(R, "db", "c2", ST_R_CPU), 750000);
	CU_ASSERT_EQUAL(tv(R, "db", "c3", ST_R_CPU), 3000000);
	CU_ASSERT_EQUAL(tv(R, "db", "c1", ST_R_NET_RX), 180);
	CU_ASSERT_EQUAL(tv(R, "db", "c2", ST_R_NET_RX), 284);
	CU_ASSERT_EQUAL(tv(R, "db", "c3", ST_R_NET_RX), 80);
	CU_ASSERT_EQUAL(tv(R, "db", "c2", ST_R_NET_TX), 740);
	/* cache: two hops from the client */
	CU_ASSERT_EQUAL(tv(R, "cache", "c2", ST_R_CPU), 700000);
	CU_ASSERT_EQUAL(tv(R, "cache", "c2", ST_R_NET_TX), 64);
	/* nothing unaccountable, nothing split */
	CU_ASSERT_PTR_NULL(total_of(R, "db", "!" AGG_REASON_UNPAIRED));
	CU_ASSERT_PTR_NULL(total_of(R, "front", "!" AGG_REASON_NO_CE));
	CU_ASSERT_EQUAL(R->ntot, 3 + 3 + 1 + extra);
}

static void check_pool_totals(const struct run *R)
{
	check_pool_totals_with(R, 0);
}

static void load_pool(struct stream *st)
{
	replay(&st[0], "front", "pool_front.events");
	replay(&st[1], "db", "pool_db.events");
	replay(&st[2], "cache", "pool_cache.events");
}

static void test_pooled_connection(void)
{
	struct stream st[3];
	struct item it[MAXP];
	struct run ref, R;
	size_t n, k, i;
	uint64_t seed;

	load_pool(st);
	n = all_items(st, 3, it);
	CU_ASSERT_EQUAL_FATAL(n, 8 + 5 + 1); /* one part per segment */
	/* in order: upstream first */
	run_open(&ref, st);
	for (k = 0; k < n; k++)
		feed(&ref, it[k].s, it[k].i, (int64_t)k);
	CU_ASSERT_EQUAL(count_resolved(&ref, n), n);
	check_pool_totals(&ref);
	/* db's parts were paired on bytes, front's requests by rule */
	CU_ASSERT_EQUAL(outcome_of(&ref, 1, 0)->how, AGG_PAIR_BY_BYTES);
	CU_ASSERT_EQUAL(outcome_of(&ref, 0, 0)->how, AGG_PAIR_BY_RULE);
	CU_ASSERT_STRING_EQUAL(outcome_of(&ref, 2, 0)->dist, "c2=40"); /* 40 bytes of db's B1 */
	/* any other order: the same decision for every part */
	for (seed = 0; seed < 12; seed++) {
		all_items(st, 3, it);
		if (seed == 0) { /* everything backwards: responses before requests */
			reverse(it, n);
		} else {
			shuffle(it, n, seed);
		}
		run_open(&R, st);
		for (k = 0; k < n; k++)
			feed(&R, it[k].s, it[k].i, (int64_t)k);
		CU_ASSERT_EQUAL(count_resolved(&R, n), n);
		check_pool_totals(&R);
		for (k = 0; k < 3; k++)
			for (i = 0; i < st[k].cap.nparts; i++) {
				const struct outcome *a = outcome_of(&ref, (int)k, i), *b = outcome_of(&R, (int)k, i);

				CU_ASSERT_PTR_NOT_NULL_FATAL(a);
				CU_ASSERT_PTR_NOT_NULL_FATAL(b);
				CU_ASSERT_STRING_EQUAL(a->dist, b->dist);
			}
		run_close(&R);
	}
	run_close(&ref);
	streams_free(st, 3);
}

static void test_out_of_order(void)
{
	struct agg_pair_stats ps;
	struct stream st[3];
	struct run R;
	size_t i;

	load_pool(st);
	run_open(&R, st);
	/* front's response reader (response before request) and db first */
	for (i = 4; i < st[0].cap.nparts; i++)
		feed(&R, 0, i, 1);
	for (i = 0; i < st[1].cap.nparts; i++)
		feed(&R, 1, i, 2);
	agg_pair_get_stats(R.e, &ps);
	CU_ASSERT_EQUAL(ps.pending, 4 + 5); /* nothing can be decided yet */
	CU_ASSERT_EQUAL(ps.by_rule + ps.by_bytes, 0);
	CU_ASSERT_EQUAL(R.ntot, 0);
	/* the requests arrive: A, C, D resolve down the chain; B waits for the cache */
	for (i = 0; i < 4; i++)
		feed(&R, 0, i, 3);
	agg_pair_get_stats(R.e, &ps);
	CU_ASSERT_EQUAL(ps.pending, 2); /* db's B2 and front's response B */
	CU_ASSERT_EQUAL(tv(&R, "db", "c2", ST_R_CPU), 500000);
	CU_ASSERT_EQUAL(tv(&R, "front", "c2", ST_R_CPU), 200000);
	/* a horizon not yet passed changes nothing */
	CU_ASSERT_EQUAL(agg_pair_expire(R.e, H - 1), RM_OK);
	agg_pair_get_stats(R.e, &ps);
	CU_ASSERT_EQUAL(ps.pending, 2);
	/* the cache (the second hop) arrives last */
	feed(&R, 2, 0, 4);
	agg_pair_get_stats(R.e, &ps);
	CU_ASSERT_EQUAL(ps.pending, 0);
	check_pool_totals(&R);
	/* held: only parts with sends, until they expire */
	CU_ASSERT(ps.held > 0 && ps.sends == ps.held);
	CU_ASSERT_EQUAL(agg_pair_expire(R.e, 4 + H), RM_OK);
	agg_pair_get_stats(R.e, &ps);
	CU_ASSERT_EQUAL(ps.held, 0);
	CU_ASSERT_EQUAL(ps.sends, 0);
	CU_ASSERT_EQUAL(ps.flows, 0);
	for (i = 1; i <= 14; i++)
		CU_ASSERT(R.by_id[i].forgotten);
	run_close(&R);
	streams_free(st, 3);
}

static void test_skewed_clocks(void)
{
	struct stream st[3];
	struct item it[MAXP];
	struct run R;
	size_t n, k;

	/* front's clocks 5 s ahead (monotonic and wall), cache's wall clock 3 s behind */
	replay_skewed(&st[0], "front", "pool_front.events", 5 * SEC, 5 * SEC);
	replay(&st[1], "db", "pool_db.events");
	replay_skewed(&st[2], "cache", "pool_cache.events", 0, -3 * SEC);
	CU_ASSERT_EQUAL(st[0].cap.parts[0].win, st[1].cap.parts[0].win + 10); /* 5 s + 5 s */
	CU_ASSERT_EQUAL(st[2].cap.parts[0].win + 3, st[1].cap.parts[0].win);
	n = all_items(st, 3, it);
	shuffle(it, n, 99);
	run_open(&R, st);
	for (k = 0; k < n; k++)
		feed(&R, it[k].s, it[k].i, (int64_t)k);
	CU_ASSERT_EQUAL(count_resolved(&R, n), n);
	check_pool_totals(&R);
	run_close(&R);
	streams_free(st, 3);
}

static void test_coalesced_and_partial(void)
{
	struct stream st[2];
	struct item it[MAXP];
	const struct outcome *o;
	struct run R;
	size_t n, k, rd1;
	uint64_t seed;

	replay(&st[0], "front", "coalesce_front.events");
	replay(&st[1], "db", "coalesce_db.events");
	/* front: 201 END + ASSOC, 202, 203, 204 in two windows; db: END + ASSOC */
	CU_ASSERT_EQUAL_FATAL(st[0].cap.nparts, 6);
	CU_ASSERT_EQUAL_FATAL(st[1].cap.nparts, 2);
	for (rd1 = 0; rd1 < st[0].cap.nparts && st[0].cap.parts[rd1].tid != 204; rd1++)
		;
	CU_ASSERT_FATAL(rd1 + 1 < st[0].cap.nparts);
	CU_ASSERT_EQUAL(st[0].cap.parts[rd1 + 1].tid, 204);
	CU_ASSERT_EQUAL(st[0].cap.parts[rd1 + 1].win, st[0].cap.parts[rd1].win + 1);
	for (seed = 1; seed <= 6; seed++) {
		n = all_items(st, 2, it);
		shuffle(it, n, seed);
		run_open(&R, st);
		for (k = 0; k < n; k++)
			feed(&R, it[k].s, it[k].i, (int64_t)k);
		/* db answered the three requests it read at once with one reply: it
		 * might have answered more (agg_pair_ans.c), so its parts wait for
		 * the horizon */
		CU_ASSERT(count_resolved(&R, n) < n);
		CU_ASSERT_EQUAL(agg_pair_give_up(R.e), RM_OK);
		CU_ASSERT_EQUAL(count_resolved(&R, n), n);
		/* db: one recv covering three CEs' sends, split exactly by bytes */
		CU_ASSERT_EQUAL(tv(&R, "db", "c1", ST_R_CPU), 166668);
		CU_ASSERT_EQUAL(tv(&R, "db", "c2", ST_R_CPU), 333336);
		CU_ASSERT_EQUAL(tv(&R, "db", "c3", ST_R_CPU), 500003);
		CU_ASSERT_EQUAL(tv(&R, "db", "c1", ST_R_NET_RX), 100);
		CU_ASSERT_EQUAL(tv(&R, "db", "c2", ST_R_NET_RX), 200);
		CU_ASSERT_EQUAL(tv(&R, "db", "c3", ST_R_NET_RX), 300);
		CU_ASSERT_EQUAL(tv(&R, "db", "c1", ST_R_NET_TX), 67 + 83);
		CU_ASSERT_EQUAL(tv(&R, "db", "c2", ST_R_NET_TX), 133 + 167);
		CU_ASSERT_EQUAL(tv(&R, "db", "c3", ST_R_NET_TX), 200 + 250);
		/* front: the requests by rule, the reply's reader split by the reply's bytes */
		CU_ASSERT_EQUAL(tv(&R, "front", "c1", ST_R_CPU), 100000 + 16667 + 25000);
		CU_ASSERT_EQUAL(tv(&R, "front", "c2", ST_R_CPU), 200000 + 33333 + 50000);
		CU_ASSERT_EQUAL(tv(&R, "front", "c3", ST_R_CPU), 300000 + 50000 + 75000);
		CU_ASSERT_EQUAL(tv(&R, "front", "c1", ST_R_NET_TX), 100 + 17);
		CU_ASSERT_EQUAL(tv(&R, "front", "c2", ST_R_NET_TX), 200 + 33);
		CU_ASSERT_EQUAL(tv(&R, "front", "c3", ST_R_NET_TX), 300 + 50);
		/* the reader's two parts (two windows) each carry what it had read */
		o = outcome_of(&R, 0, rd1);
		CU_ASSERT_PTR_NOT_NULL_FATAL(o);
		CU_ASSERT_STRING_EQUAL(o->dist, "c1=50;c2=100;c3=150");
		o = outcome_of(&R, 0, rd1 + 1);
		CU_ASSERT_PTR_NOT_NULL_FATAL(o);
		CU_ASSERT_STRING_EQUAL(o->dist, "c1=150;c2=300;c3=450");
		CU_ASSERT_STRING_EQUAL(outcome_of(&R, 1, 0)->dist, "c1=100;c2=200;c3=300");
		CU_ASSERT_PTR_NULL(total_of(&R, "db", "!" AGG_REASON_UNTRUSTED_RANGE));
		{
			struct agg_pair_stats ps;

			agg_pair_get_stats(R.e, &ps);
			/* db's END and ASSOC parts (tx), front's two reader parts */
			CU_ASSERT_EQUAL(ps.split, 4);
		}
		run_close(&R);
	}
	streams_free(st, 2);
}

static void test_untrusted(void)
{
	struct agg_pair_stats ps;
	struct stream st[2];
	struct item it[MAXP];
	struct run R;
	size_t n, k;
	uint64_t seed;

	replay(&st[0], "front", "untrusted_front.events");
	replay(&st[1], "db", "untrusted_db.events");
	CU_ASSERT_EQUAL_FATAL(st[1].cap.nparts, 3);
	CU_ASSERT(st[1].cap.parts[1].flags & RM_PF_SEQ_SUSPECT);
	for (seed = 1; seed <= 6; seed++) {
		n = all_items(st, 2, it);
		shuffle(it, n, seed);
		run_open(&R, st);
		for (k = 0; k < n; k++)
			feed(&R, it[k].s, it[k].i, 0);
		/* overlapping sends: their bytes are never guessed */
		CU_ASSERT_STRING_EQUAL(outcome_of(&R, 1, 0)->dist, "c3=80;!untrusted_range=250");
		CU_ASSERT_EQUAL(tv(&R, "db", "c3", ST_R_CPU), 96970);
		CU_ASSERT_EQUAL(tv(&R, "db", "c3", ST_R_NET_TX), 24);
		/* the suspect range and what its answer caused downstream */
		CU_ASSERT_EQUAL(tv(&R, "db", "!" AGG_REASON_UNTRUSTED_RANGE, ST_R_CPU), 303030 + 200100);
		CU_ASSERT_EQUAL(tv(&R, "front", "!" AGG_REASON_UNTRUSTED_RANGE, ST_R_CPU), 50000);
		CU_ASSERT_PTR_NULL(total_of(&R, "db", "c1"));
		CU_ASSERT_PTR_NULL(total_of(&R, "db", "c2"));
		/* the senders themselves are charged by their own (trusted) receive */
		CU_ASSERT_EQUAL(tv(&R, "front", "c1", ST_R_CPU), 100000);
		CU_ASSERT_EQUAL(tv(&R, "front", "c2", ST_R_CPU), 200000);
		/* the request from nowhere waits ... */
		agg_pair_get_stats(R.e, &ps);
		CU_ASSERT_EQUAL(ps.pending, 1);
		CU_ASSERT_EQUAL(agg_pair_expire(R.e, H - 1), RM_OK);
		agg_pair_get_stats(R.e, &ps);
		CU_ASSERT_EQUAL(ps.pending, 1);
		/* ... then it is unpaired, measured from its arrival on our clock */
		CU_ASSERT_EQUAL(agg_pair_expire(R.e, H), RM_OK);
		agg_pair_get_stats(R.e, &ps);
		CU_ASSERT_EQUAL(ps.pending, 0);
		CU_ASSERT_EQUAL(ps.by_horizon, 1);
		CU_ASSERT_EQUAL(tv(&R, "db", "!" AGG_REASON_UNPAIRED, ST_R_CPU), 300000);
		CU_ASSERT_EQUAL(tv(&R, "db", "!" AGG_REASON_UNPAIRED, ST_R_NET_RX), 70);
		CU_ASSERT_EQUAL(count_resolved(&R, n), n);
		run_close(&R);
	}
	streams_free(st, 2);
}

static void test_sequence_wrap(void)
{
	struct stream st[2];
	struct item it[MAXP];
	struct run R;
	size_t n, k;
	uint64_t seed;

	replay(&st[0], "front", "wrap_front.events");
	replay(&st[1], "db", "wrap_db.events");
	CU_ASSERT_EQUAL_FATAL(st[1].cap.nparts, 2);
	/* the segmenter kept the first request in one segment across the wrap */
	CU_ASSERT_EQUAL(st[1].cap.parts[0].in_seq_start, 4294967196ULL);
	CU_ASSERT_EQUAL(st[1].cap.parts[0].in_seq_end, 4294967496ULL);
	CU_ASSERT_FALSE(st[1].cap.parts[0].flags & RM_PF_SEQ_SUSPECT);
	for (seed = 1; seed <= 4; seed++) {
		n = all_items(st, 2, it);
		shuffle(it, n, seed);
		run_open(&R, st);
		for (k = 0; k < n; k++)
			feed(&R, it[k].s, it[k].i, (int64_t)k);
		CU_ASSERT_EQUAL(count_resolved(&R, n), n);
		CU_ASSERT_EQUAL(tv(&R, "db", "c1", ST_R_CPU), 500100);
		CU_ASSERT_EQUAL(tv(&R, "db", "c1", ST_R_NET_RX), 300);
		CU_ASSERT_EQUAL(tv(&R, "db", "c2", ST_R_CPU), 200000);
		CU_ASSERT_EQUAL(R.ntot, 2 + 2); /* front c1, c2; db c1, c2 */
		run_close(&R);
	}
	streams_free(st, 2);
}

static void test_waiting_on_pending_sender(void)
{
	struct stream st[3];
	struct run R;
	size_t i;

	load_pool(st);
	run_open(&R, st);
	/* db and front's reader, but not front's requests: db waits for bytes,
	 * the reader waits for db's sends, whose parts are pending */
	for (i = 0; i < st[1].cap.nparts; i++)
		feed(&R, 1, i, 0);
	for (i = 4; i < st[0].cap.nparts; i++)
		feed(&R, 0, i, SEC);
	CU_ASSERT_EQUAL(agg_pair_expire(R.e, H - 1), RM_OK);
	CU_ASSERT_EQUAL(R.ntot, 0);
	/* db's horizon passes first: its bytes (and B2's, from the cache) were
	 * never covered: unpaired; the reader then follows db's V at once */
	CU_ASSERT_EQUAL(agg_pair_expire(R.e, H), RM_OK);
	CU_ASSERT_EQUAL(tv(&R, "db", "!" AGG_REASON_UNPAIRED, ST_R_CPU),
			1000000 + 500000 + 250000 + 1500000 + 3000000);
	CU_ASSERT_EQUAL(tv(&R, "front", "!" AGG_REASON_UNPAIRED, ST_R_CPU), 50000 + 60000 + 70000 + 80000);
	CU_ASSERT_EQUAL(R.ntot, 2);
	CU_ASSERT_EQUAL(count_resolved(&R, 9), 9);
	run_close(&R);

	/* the same with the reader arriving first: it is given up while db's
	 * B2 is still pending (past_horizon), before db is given up */
	run_open(&R, st);
	for (i = 4; i < st[0].cap.nparts; i++)
		feed(&R, 0, i, 0);
	for (i = 0; i < st[1].cap.nparts; i++)
		feed(&R, 1, i, SEC);
	CU_ASSERT_EQUAL(agg_pair_expire(R.e, H), RM_OK);
	CU_ASSERT_EQUAL(tv(&R, "front", "!" AGG_REASON_PAST_HORIZON, ST_R_CPU), 50000 + 60000 + 70000 + 80000);
	CU_ASSERT_EQUAL(R.ntot, 1);
	CU_ASSERT_EQUAL(agg_pair_expire(R.e, SEC + H), RM_OK);
	CU_ASSERT_EQUAL(tv(&R, "db", "!" AGG_REASON_UNPAIRED, ST_R_CPU), 6250000);
	run_close(&R);
	streams_free(st, 3);
}

static void test_bounded_and_expiring(void)
{
	struct agg_pair_stats ps;
	struct stream st[3];
	struct run R;
	size_t i;

	load_pool(st);
	/* at most 4 held parts: the oldest of db's 5 pending parts is given up */
	run_open_cfg(&R, st, conf, 4);
	for (i = 0; i < st[1].cap.nparts; i++)
		feed(&R, 1, i, (int64_t)i);
	agg_pair_get_stats(R.e, &ps);
	CU_ASSERT_EQUAL(ps.held, 4);
	CU_ASSERT_EQUAL(ps.evicted, 1);
	CU_ASSERT_EQUAL(tv(&R, "db", "!" AGG_REASON_PAST_HORIZON, ST_R_CPU), 1000000);
	run_close(&R);

	/* at most 6: db's 5 wait; each request that arrives resolves its part,
	 * and the oldest held (a resolved sender, then the pending B2) makes room */
	run_open_cfg(&R, st, conf, 6);
	for (i = 0; i < st[1].cap.nparts; i++)
		feed(&R, 1, i, (int64_t)i);
	for (i = 0; i < 4; i++)
		feed(&R, 0, i, 10);
	agg_pair_get_stats(R.e, &ps);
	CU_ASSERT_EQUAL(ps.held, 6);
	CU_ASSERT_EQUAL(ps.evicted, 1);
	CU_ASSERT_EQUAL(ps.dropped_sends, 2);
	CU_ASSERT_EQUAL(tv(&R, "db", "c1", ST_R_CPU), 2500000);
	CU_ASSERT_EQUAL(tv(&R, "db", "c2", ST_R_CPU), 500000);
	CU_ASSERT_EQUAL(tv(&R, "db", "c3", ST_R_CPU), 3000000);
	CU_ASSERT_EQUAL(tv(&R, "db", "!" AGG_REASON_PAST_HORIZON, ST_R_CPU), 250000);
	run_close(&R);

	/* a send expires one horizon after its arrival: a receiver arriving
	 * later finds nothing and is unpaired */
	run_open(&R, st);
	for (i = 0; i < 4; i++)
		feed(&R, 0, i, 0);
	CU_ASSERT_EQUAL(agg_pair_expire(R.e, H - 1), RM_OK);
	agg_pair_get_stats(R.e, &ps);
	CU_ASSERT_EQUAL(ps.sends, 4);
	CU_ASSERT_EQUAL(agg_pair_expire(R.e, H), RM_OK);
	agg_pair_get_stats(R.e, &ps);
	CU_ASSERT_EQUAL(ps.sends, 0);
	CU_ASSERT_EQUAL(ps.held, 0);
	feed(&R, 1, 0, H + 1);
	CU_ASSERT_EQUAL(agg_pair_expire(R.e, 2 * H + 1), RM_OK);
	CU_ASSERT_EQUAL(tv(&R, "db", "!" AGG_REASON_UNPAIRED, ST_R_CPU), 1000000);
	run_close(&R);
	streams_free(st, 3);
}

static void test_restore(void)
{
	struct stream st[3];
	struct item it[MAXP];
	struct run A, B;
	size_t n, k, half;
	uint64_t id, last = 0, pending = 0, resolved = 0;

	load_pool(st);
	n = all_items(st, 3, it);
	shuffle(it, n, 5);
	half = n / 2;
	/* A: the first half, then "restart" into B from what A held */
	run_open(&A, st);
	for (k = 0; k < half; k++)
		feed(&A, it[k].s, it[k].i, (int64_t)k);
	run_open(&B, st);
	memcpy(B.by_id, A.by_id, sizeof(A.by_id));
	memcpy(B.tot, A.tot, sizeof(A.tot));
	B.ntot = A.ntot;
	for (id = 1; id <= half; id++) {
		struct outcome *o = &A.by_id[id];
		struct agg_pair_src src = { st[o->stream].node, 7, SEC };
		const char *dist;

		if (o->forgotten)
			continue;
		/* pending, or resolved and held for its sends */
		dist = o->resolved ? A.held_dist[id] : NULL;
		CU_ASSERT(!o->resolved || A.held_live[id]);
		CU_ASSERT_EQUAL_FATAL(agg_pair_restore(B.e, id, &src, part_of(&A, o), A.arrival[id], dist), RM_OK);
		last = id;
		pending += !o->resolved;
		resolved += o->resolved;
	}
	/* both kinds were carried over */
	CU_ASSERT(pending > 0);
	CU_ASSERT(resolved > 0);
	agg_pair_close(A.e);
	agg_config_free(A.cfg);
	CU_ASSERT_EQUAL(A.errors, 0);
	/* ids continue after the last restored one */
	CU_ASSERT(agg_pair_next_id(B.e) > last);
	/* B continues with the second half: the same totals as without a restart */
	for (k = half; k < n; k++)
		feed(&B, it[k].s, it[k].i, (int64_t)k);
	check_pool_totals(&B);
	run_close(&B);
	streams_free(st, 3);
}

static void test_rules_take_precedence(void)
{
	static const char conf2[] =
		"[ce pool]\nclient = 10.0.0.1\nserver_port = 5432\n"
		"[ce c1]\nclient = 10.1.0.1\n"
		"[ce c2]\nclient = 10.1.0.2\n"
		"[ce c3]\nclient = 10.1.0.3\n";
	struct stream st[3];
	struct run R;
	size_t i;

	load_pool(st);
	run_open_cfg(&R, st, conf2, 1000);
	for (i = 0; i < st[1].cap.nparts; i++)
		feed(&R, 1, i, 0);
	/* db's segments opened on the pooled connection match the rule at once;
	 * B2 (opened by the cache's reply) matches none and waits */
	CU_ASSERT_EQUAL(tv(&R, "db", "pool", ST_R_CPU), 1000000 + 500000 + 1500000 + 3000000);
	CU_ASSERT_EQUAL(count_resolved(&R, 5), 4);
	run_close(&R);
	streams_free(st, 3);
}

/* testdata/udp_dns.events: datagrams charged by their senders' addresses. */
static void test_udp(void)
{
	struct stream st[1];
	struct run R;
	size_t k;

	replay(&st[0], "dns", "udp_dns.events");
	run_open(&R, st);
	for (k = 0; k < st[0].cap.nparts; k++)
		feed(&R, 0, k, (int64_t)k);
	CU_ASSERT_EQUAL(count_resolved(&R, st[0].cap.nparts), st[0].cap.nparts);
	CU_ASSERT_EQUAL(tv(&R, "dns", "c1", ST_R_CPU), 4000);
	CU_ASSERT_EQUAL(tv(&R, "dns", "c2", ST_R_CPU), 5000);
	CU_ASSERT_EQUAL(tv(&R, "dns", "!" AGG_REASON_NO_SENDER, ST_R_CPU), 3000);
	CU_ASSERT_EQUAL(tv(&R, "dns", "!" AGG_REASON_NO_CE, ST_R_CPU), 2000);
	CU_ASSERT_PTR_NULL(total_of(&R, "dns", "c3"));
	run_close(&R);
	streams_free(st, 1);
}

static void test_reply_to_ce_client(void)
{
	struct agg_pair_stats ps;
	size_t held;
	struct stream st[4];
	struct item it[MAXP];
	struct run R;
	const struct outcome *o;
	size_t n, k;

	load_pool(st);
	replay(&st[3], "client1", "pool_client.events");
	CU_ASSERT_EQUAL_FATAL(st[3].cap.nparts, 1);
	n = all_items(st, 4, it);
	shuffle(it, n, 3);
	run_open(&R, st);
	for (k = 0; k < n; k++)
		feed(&R, it[k].s, it[k].i, (int64_t)k);
	CU_ASSERT_EQUAL(count_resolved(&R, n), n);
	/* front's reply covers the client's bytes, but the client is the CE itself */
	o = outcome_of(&R, 3, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_STRING_EQUAL(o->dist, "!no_ce=1");
	CU_ASSERT_EQUAL(tv(&R, "client1", "!" AGG_REASON_NO_CE, ST_R_CPU), 30000);
	CU_ASSERT_PTR_NULL(total_of(&R, "client1", "c1"));
	/* and the shared services are charged as before */
	check_pool_totals_with(&R, 1);
	/* front's four responses go to CEs' clients, whose parts the rules
	 * decide: not indexed, and not held once resolved; its requests on the
	 * pool (db pairs them) are */
	agg_pair_get_stats(R.e, &ps);
	CU_ASSERT_EQUAL(ps.ruled_sends, 4 + 1); /* and client1's request C, to front's entry */
	for (k = 0, held = 0; k < st[0].cap.nparts; k++) {
		o = outcome_of(&R, 0, k);
		CU_ASSERT_PTR_NOT_NULL_FATAL(o);
		if (o->held) {
			held++;
			CU_ASSERT_EQUAL(st[0].cap.parts[k].out.rport, 5432);
		} else if (st[0].cap.parts[k].flags & RM_PF_OUT_SEQ) {
			CU_ASSERT_NOT_EQUAL(st[0].cap.parts[k].out.rport, 5432);
		}
	}
	CU_ASSERT_EQUAL(held, 4);
	run_close(&R);
	streams_free(st, 4);
}

static void test_give_up(void)
{
	struct agg_pair_stats ps;
	struct stream st[3];
	struct run R;
	size_t i;

	load_pool(st);
	run_open(&R, st);
	for (i = 0; i < st[1].cap.nparts; i++)
		feed(&R, 1, i, 0);
	for (i = 4; i < st[0].cap.nparts; i++)
		feed(&R, 0, i, 0);
	/* a stop before the horizon: everything pending is decided now, as at the horizon */
	CU_ASSERT_EQUAL(agg_pair_give_up(R.e), RM_OK);
	agg_pair_get_stats(R.e, &ps);
	CU_ASSERT_EQUAL(ps.pending, 0);
	CU_ASSERT_EQUAL(count_resolved(&R, 9), 9);
	CU_ASSERT_EQUAL(tv(&R, "db", "!" AGG_REASON_UNPAIRED, ST_R_CPU), 6250000);
	CU_ASSERT_EQUAL(tv(&R, "front", "!" AGG_REASON_UNPAIRED, ST_R_CPU), 260000);
	/* their sends stay for receivers still to come: db's five; front's
	 * four responses go to CEs' clients, which the rules decide */
	CU_ASSERT_EQUAL(ps.sends, 5);
	CU_ASSERT_EQUAL(ps.ruled_sends, 4);
	CU_ASSERT_EQUAL(agg_pair_give_up(R.e), RM_OK); /* nothing left: no-op */
	run_close(&R);
	streams_free(st, 3);
}

static void test_bad_input(void)
{
	struct agg_pair_opts o = { H, 10 }, bad = { 0, 10 };
	struct run R;
	struct agg_pair_sink sink = { &R, on_resolved, on_forget }, nosink = { &R, NULL, on_forget };
	struct agg_pair_share sh[2] = { { "c1", NULL, 3 }, { NULL, AGG_REASON_UNPAIRED, 4 } };
	struct agg_pair_src src = { "n", 1, SEC };
	struct agg_config *cfg = NULL;
	struct agg_pair *e = NULL;
	struct rm_wpart p;
	char *d = NULL;
	uint64_t id;

	memset(&R, 0, sizeof(R));
	CU_ASSERT_EQUAL_FATAL(agg_config_parse(conf, strlen(conf), "t.ini", &cfg), RM_OK);
	CU_ASSERT_EQUAL(agg_pair_open(&e, cfg, &bad, &sink), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_pair_open(&e, cfg, &o, &nosink), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_pair_open(&e, NULL, &o, &sink), RM_EINVAL);
	CU_ASSERT_PTR_NULL(e);
	CU_ASSERT_EQUAL_FATAL(agg_pair_open(&e, cfg, &o, &sink), RM_OK);
	memset(&p, 0, sizeof(p));
	src.node = "";
	CU_ASSERT_EQUAL(agg_pair_add(e, &src, &p, 0, &id), RM_EINVAL);
	src.node = "n";
	src.window_ns = 0;
	CU_ASSERT_EQUAL(agg_pair_add(e, &src, &p, 0, &id), RM_EINVAL);
	src.window_ns = SEC;
	CU_ASSERT_EQUAL(agg_pair_add(e, &src, NULL, 0, &id), RM_EINVAL);
	/* malformed distributions are refused on restore; nothing is added */
	CU_ASSERT_EQUAL(agg_pair_restore(e, 5, &src, &p, 0, "c1"), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_pair_restore(e, 5, &src, &p, 0, "c1=0"), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_pair_restore(e, 5, &src, &p, 0, "c1=3;"), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_pair_restore(e, 5, &src, &p, 0, "=3"), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_pair_restore(e, 5, &src, &p, 0, "c1=x"), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_pair_next_id(e), 1);
	/* format and parse agree */
	CU_ASSERT_EQUAL_FATAL(agg_pair_dist_format(sh, 2, &d), RM_OK);
	CU_ASSERT_STRING_EQUAL(d, "c1=3;!unpaired=4");
	/* a restored part without sends is forgotten at once (it was resolved before) */
	CU_ASSERT_EQUAL(agg_pair_restore(e, 5, &src, &p, 0, d), RM_OK);
	CU_ASSERT(R.by_id[5].forgotten == 0 && R.errors == 1); /* forget of a part this run never saw */
	R.errors = 0;
	free(d);
	CU_ASSERT_EQUAL(agg_pair_dist_format(sh, 0, &d), RM_EINVAL);
	/* ids must increase */
	CU_ASSERT_EQUAL(agg_pair_restore(e, 5, &src, &p, 0, NULL), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_pair_next_id(e), 6);
	agg_pair_close(e);
	agg_pair_close(NULL);
	agg_config_free(cfg);
}

/*
 * Follow-replies: a pool worker's continuation chains (workers_front.events,
 * hand computation there) take the CE of the request their reply answers,
 * and the back end, reached by the chain's FETCH, follows; in any order of
 * arrival.
 */
static void check_workers_totals(const struct run *R)
{
	CU_ASSERT_EQUAL(tv(R, "front", "c1", ST_R_CPU), 110000);
	CU_ASSERT_EQUAL(tv(R, "front", "c2", ST_R_CPU), 260300);
	CU_ASSERT_EQUAL(tv(R, "front", "c1", ST_R_NET_TX), 500);
	CU_ASSERT_EQUAL(tv(R, "front", "c2", ST_R_NET_TX), 30 + 600);
	CU_ASSERT_EQUAL(tv(R, "front", "!" AGG_REASON_UNANCHORED, ST_R_CPU), 0);
	CU_ASSERT_EQUAL(tv(R, "back", "c2", ST_R_CPU), 300000 + 100);
	CU_ASSERT_EQUAL(tv(R, "back", "!" AGG_REASON_UNPAIRED, ST_R_CPU), 0);

}

static void test_follow_replies(void)
{
	struct agg_pair_stats ps;
	struct stream st[2];
	struct item it[MAXP];
	struct run R;
	size_t n, k;
	uint64_t seed;

	replay_follow(&st[0], "front", "workers_front.events", 1);
	replay_follow(&st[1], "back", "workers_back.events", 1);
	n = all_items(st, 2, it);
	CU_ASSERT_EQUAL_FATAL(n, 8 + 2);
	for (seed = 0; seed < 12; seed++) {
		all_items(st, 2, it);
		if (seed == 1) { /* backwards: the anchor before its chain */
			reverse(it, n);
		} else if (seed > 1) {
			shuffle(it, n, seed);
		}
		run_open(&R, st);
		for (k = 0; k < n; k++)
			feed(&R, it[k].s, it[k].i, (int64_t)k);
		/* everything is decided at once, in any order */
		agg_pair_get_stats(R.e, &ps);
		CU_ASSERT_EQUAL(ps.pending, 0);
		CU_ASSERT_EQUAL(agg_pair_expire(R.e, (int64_t)n + H), RM_OK);
		CU_ASSERT_EQUAL(count_resolved(&R, n), n);
		check_workers_totals(&R);
		run_close(&R);
	}
	streams_free(st, 2);
	/* without the option the worker's work and the back end's (its tail too) are V */
	replay_follow(&st[0], "front", "workers_front.events", 0);
	replay_follow(&st[1], "back", "workers_back.events", 0);
	n = all_items(st, 2, it);
	run_open(&R, st);
	for (k = 0; k < n; k++)
		feed(&R, it[k].s, it[k].i, (int64_t)k);
	CU_ASSERT_EQUAL(agg_pair_expire(R.e, (int64_t)n + H), RM_OK);
	CU_ASSERT_EQUAL(tv(&R, "front", "c1", ST_R_CPU), 10000);
	CU_ASSERT_EQUAL(tv(&R, "back", "c2", ST_R_CPU), 0);
	CU_ASSERT_EQUAL(tv(&R, "back", "!" AGG_REASON_UNPAIRED, ST_R_CPU), 300000 + 100);
	run_close(&R);
	streams_free(st, 2);
}

/*
 * A pooled reverse proxy (pooled_front.events: an event loop forwarding
 * three CEs' requests over one upstream connection) in front of a
 * thread-per-connection back end whose handler waits before it replies
 * (pooled_back.events). Requests on the pooled connection are contiguous:
 * each reply must anchor only the request it answers. Follow-replies on
 * or off, in any order of arrival, the back end's CPU is each CE's
 * exactly and none is unpaired.
 */
static void test_pooled_proxy(void)
{
	struct stream st[2];
	struct item it[MAXP];
	struct run R;
	size_t n;
	uint64_t seed;
	int fr;

	for (fr = 0; fr <= 1; fr++) {
		replay_follow(&st[0], "front", "pooled_front.events", fr);
		replay_follow(&st[1], "back", "pooled_back.events", fr);
		n = all_items(st, 2, it);
		for (seed = 0; seed < 6; seed++) {
			feed_all(&R, st, 2, it, seed);
			CU_ASSERT_EQUAL(agg_pair_expire(R.e, (int64_t)n + H), RM_OK);
			CU_ASSERT_EQUAL(count_resolved(&R, n), n);
			CU_ASSERT_EQUAL(tv(&R, "front", "c1", ST_R_CPU), 100000);
			CU_ASSERT_EQUAL(tv(&R, "front", "c2", ST_R_CPU), 200000);
			CU_ASSERT_EQUAL(tv(&R, "front", "c3", ST_R_CPU), 90000);
			CU_ASSERT_EQUAL(tv(&R, "back", "c1", ST_R_CPU), 150000);
			CU_ASSERT_EQUAL(tv(&R, "back", "c2", ST_R_CPU), 260100);
			CU_ASSERT_EQUAL(tv(&R, "back", "c3", ST_R_CPU), 160100);
			CU_ASSERT_EQUAL(tv(&R, "back", "c1", ST_R_NET_TX), 500);
			CU_ASSERT_EQUAL(tv(&R, "back", "c2", ST_R_NET_TX), 700);
			CU_ASSERT_EQUAL(tv(&R, "back", "c3", ST_R_NET_TX), 300);
			CU_ASSERT_EQUAL(tv(&R, "back", "!" AGG_REASON_UNPAIRED, ST_R_CPU), 0);
			CU_ASSERT_EQUAL(tv(&R, "back", "!" AGG_REASON_UNANCHORED, ST_R_CPU), 0);
			run_close(&R);
		}
		streams_free(st, 2);
	}
}

/*
 * A connection shared by three clients' requests in flight at once
 * (mux_front.events) into a back end that reads them in one read and
 * answers them in order (mux_back.events): each reply is charged like the
 * request it answers, the tail after the last reply and the front's reader
 * of the three replies are split by bytes; in any order of arrival.
 * Without follow-replies the back end's replies are one segment's and it
 * is split by bytes: after the horizon, as it might have answered more.
 */
static void test_in_order_answers(void)
{
	struct stream st[2];
	struct item it[MAXP];
	struct run R;
	struct agg_pair_stats ps;
	size_t n;
	uint64_t seed;
	int fr;

	for (fr = 1; fr >= 0; fr--) {
		replay_follow(&st[0], "front", "mux_front.events", fr);
		replay_follow(&st[1], "back", "mux_back.events", fr);
		n = all_items(st, 2, it);
		for (seed = 0; seed < 8; seed++) {
			feed_all(&R, st, 2, it, seed);
			if (fr) {
				CU_ASSERT_EQUAL(count_resolved(&R, n), n);
				CU_ASSERT_EQUAL(tv(&R, "back", "c1", ST_R_CPU), 100000 + 300);
				CU_ASSERT_EQUAL(tv(&R, "back", "c2", ST_R_CPU), 300000 + 450);
				CU_ASSERT_EQUAL(tv(&R, "back", "c3", ST_R_CPU), 50000 + 150);
				CU_ASSERT_EQUAL(tv(&R, "back", "c1", ST_R_NET_TX), 500);
				CU_ASSERT_EQUAL(tv(&R, "back", "c2", ST_R_NET_TX), 700);
				CU_ASSERT_EQUAL(tv(&R, "back", "c3", ST_R_NET_TX), 300);
				CU_ASSERT_EQUAL(tv(&R, "front", "c1", ST_R_CPU), 10000 + 50000);
				CU_ASSERT_EQUAL(tv(&R, "front", "c2", ST_R_CPU), 10000 + 70000);
				CU_ASSERT_EQUAL(tv(&R, "front", "c3", ST_R_CPU), 10000 + 30000);
				agg_pair_get_stats(R.e, &ps);
				CU_ASSERT_EQUAL(ps.answered_in_order, 3);
				CU_ASSERT_EQUAL(ps.answers_waiting, 0);
			} else {
				/* one segment answered three requests: it waits for more */
				CU_ASSERT(count_resolved(&R, n) < n);
				agg_pair_get_stats(R.e, &ps);
				CU_ASSERT(ps.answers_waiting > 0);
				CU_ASSERT_EQUAL(agg_pair_expire(R.e, (int64_t)n + H), RM_OK);
				CU_ASSERT_EQUAL(count_resolved(&R, n), n);
				/* 450900 ns split by the request bytes 2:3:1 */
				CU_ASSERT_EQUAL(tv(&R, "back", "c1", ST_R_CPU), 150300);
				CU_ASSERT_EQUAL(tv(&R, "back", "c2", ST_R_CPU), 225450);
				CU_ASSERT_EQUAL(tv(&R, "back", "c3", ST_R_CPU), 75150);
				agg_pair_get_stats(R.e, &ps);
				CU_ASSERT_EQUAL(ps.answered_in_order, 0);
				CU_ASSERT_EQUAL(ps.answers_waiting, 0);
			}
			CU_ASSERT_EQUAL(tv(&R, "back", "!" AGG_REASON_UNPAIRED, ST_R_CPU), 0);
			CU_ASSERT_EQUAL(tv(&R, "front", "!" AGG_REASON_PAST_HORIZON, ST_R_CPU), 0);
			run_close(&R);
		}
		streams_free(st, 2);
	}
}

/*
 * A unix stream socket between two threads of one node (unix_front.events):
 * paired on both ends' identities and the bytes' positions; the same
 * identities on another node are another connection.
 */
static void test_unix(void)
{
	struct stream st[2];
	struct run R;
	size_t i;

	replay(&st[0], "front", "unix_front.events");
	CU_ASSERT_EQUAL_FATAL(st[0].cap.nparts, 3);
	run_open(&R, st);
	for (i = st[0].cap.nparts; i-- > 0;) /* receivers first */
		feed(&R, 0, i, (int64_t)(st[0].cap.nparts - i));
	CU_ASSERT_EQUAL(count_resolved(&R, 3), 3);
	CU_ASSERT_EQUAL(tv(&R, "front", "c1", ST_R_CPU), 240000);
	run_close(&R);
	/* the unix receivers on another node: nothing there sent their bytes */
	replay(&st[1], "other", "unix_front.events");
	run_open(&R, st);
	feed(&R, 0, 0, 1);
	feed(&R, 1, 1, 2);
	CU_ASSERT_EQUAL(agg_pair_expire(R.e, 2 + H), RM_OK);
	CU_ASSERT_EQUAL(tv(&R, "other", "c1", ST_R_CPU), 0);
	CU_ASSERT_EQUAL(tv(&R, "other", "!" AGG_REASON_UNPAIRED, ST_R_CPU), 200000);
	run_close(&R);
	streams_free(st, 2);
}

/* A sink that only sums, for streams with more parts than struct run keeps. */
struct sums {
	uint64_t resolved, forgotten;
	uint64_t cpu_ce, cpu_unanchored, cpu_other;
};

static int sums_resolved(void *arg, const struct agg_pair_result *res)
{
	struct sums *S = arg;
	size_t i;

	S->resolved++;
	for (i = 0; i < res->ndist; i++) {
		uint64_t v = res->pieces[i].v[ST_R_CPU];

		if (res->pieces[i].ce)
			S->cpu_ce += v;
		else if (strcmp(res->pieces[i].reason, AGG_REASON_UNANCHORED) == 0)
			S->cpu_unanchored += v;
		else
			S->cpu_other += v;
	}
	return RM_OK;
}

static int sums_forget(void *arg, uint64_t id)
{
	(void)id;
	((struct sums *)arg)->forgotten++;
	return RM_OK;
}

/*
 * The stream that made the engine spin (mux_gw.events, generated by
 * mux_gw.awk; the shape there): many sends that never resolve on one
 * multiplexed connection, read by one segment whose range grows with every
 * read. Giving them up must take work bounded per part, not per part times
 * the parts held; every part is still decided and every nanosecond charged
 * once.
 */
static void test_mux_no_spin(void)
{
	struct agg_pair_opts o = { H, 1u << 20 };
	struct agg_pair_stats ps;
	struct sums S = { 0 };
	struct agg_pair_sink sink = { &S, sums_resolved, sums_forget };
	struct agg_pair_src src = { "gw", 7, SEC };
	struct agg_config *cfg = NULL;
	struct agg_pair *e = NULL;
	struct stream st;
	uint64_t cpu = 0, id;
	size_t i;

	replay_follow(&st, "gw", "mux_gw.events", 1);
	CU_ASSERT_FATAL(st.cap.nparts > 3000);
	CU_ASSERT_EQUAL_FATAL(agg_config_parse(conf, strlen(conf), "t.ini", &cfg), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_pair_open(&e, cfg, &o, &sink), RM_OK);
	for (i = 0; i < st.cap.nparts; i++) {
		cpu += st.cap.parts[i].cpu_ns;
		CU_ASSERT_EQUAL_FATAL(agg_pair_add(e, &src, wpart(&st, i), (int64_t)i, &id), RM_OK);
	}
	agg_pair_get_stats(e, &ps);
	CU_ASSERT(ps.pending > 3000);
	CU_ASSERT_EQUAL(agg_pair_give_up(e), RM_OK);
	agg_pair_get_stats(e, &ps);
	CU_ASSERT_EQUAL(ps.pending, 0);
	CU_ASSERT_EQUAL(S.resolved, st.cap.nparts);
	CU_ASSERT_EQUAL(S.cpu_ce + S.cpu_unanchored + S.cpu_other, cpu);
	CU_ASSERT(S.cpu_unanchored > 0);
	/* the reader's parts follow a bounded number of sends; the bytes past
	 * them are V, counted */
	CU_ASSERT(ps.too_many_sends > 0);
	CU_ASSERT(S.cpu_other > 0);
	/* the work: a bounded number of index entries per part (quadratic
	 * before: 3.7k per part on this stream, 15k with four times the sends) */
	printf("\n    %zu parts, %llu index entries examined ", st.cap.nparts, (unsigned long long)ps.scanned);
	CU_ASSERT(ps.scanned <= 128 * (uint64_t)st.cap.nparts);
	agg_pair_close(e);
	agg_config_free(cfg);
	streams_free(&st, 1);
}

/*
 * Processes that call their own server over loopback (selfcall.events): a
 * thread per connection whose call is served by another thread of the same
 * process, and one event-loop thread that is both the client and the server
 * of its loopback connections, two CEs interleaved. Every hop is paired like
 * any other connection and charged to the CE whose request caused it, with
 * follow-replies on or off, in any order; two nodes whose loopback
 * connections have the same addresses, ports and sequence numbers (and other
 * CEs behind them) are kept apart.
 */
static void test_loopback_to_itself(void)
{
	static const char *const nodes[2] = { "gw", "gw2" };
	struct stream st[2];
	struct item it[MAXP];
	struct run R;
	size_t n, k;
	uint64_t seed;
	int fr, ns;

	for (fr = 1; fr >= 0; fr--) {
		for (ns = 1; ns <= 2; ns++) {
			replay_follow(&st[0], nodes[0], "selfcall.events", fr);
			if (ns == 2)
				replay_swapped(&st[1], nodes[1], "selfcall.events", fr);
			n = all_items(st, (size_t)ns, it);
			CU_ASSERT_FATAL(n <= MAXP);
			for (seed = 0; seed < 6; seed++) {
				feed_all(&R, st, (size_t)ns, it, seed);
				CU_ASSERT_EQUAL(agg_pair_expire(R.e, (int64_t)n + H), RM_OK);
				CU_ASSERT_EQUAL(count_resolved(&R, n), n);
				for (k = 0; k < (size_t)ns; k++) {
					/* gw2: c1's and c3's clients swapped */
					const char *a = k ? "c3" : "c1", *b = k ? "c1" : "c3";

					CU_ASSERT_EQUAL(tv(&R, nodes[k], a, ST_R_CPU), 20000 + 200000 + 100 + 30000);
					CU_ASSERT_EQUAL(tv(&R, nodes[k], "c2", ST_R_CPU), 10000 + 100000 + 20000);
					CU_ASSERT_EQUAL(tv(&R, nodes[k], b, ST_R_CPU), 15000 + 60000 + 25000);
					CU_ASSERT_EQUAL(tv(&R, nodes[k], a, ST_R_NET_TX), 100 + 500 + 600);
					CU_ASSERT_EQUAL(tv(&R, nodes[k], b, ST_R_NET_RX), 40 + 100 + 700);
					CU_ASSERT_EQUAL(tv(&R, nodes[k], "!" AGG_REASON_UNPAIRED, ST_R_CPU), 0);
					CU_ASSERT_EQUAL(tv(&R, nodes[k], "!" AGG_REASON_PAST_HORIZON, ST_R_CPU), 0);
				}
				run_close(&R);
			}
			streams_free(st, (size_t)ns);
		}
	}
}

static CU_TestInfo cases[] = {
	{ "largest-remainder split is exact", test_apportion },
	{ "pooled connection: three CEs' interleaved requests, two hops, any order", test_pooled_connection },
	{ "out-of-order arrival: downstream and responses first", test_out_of_order },
	{ "skewed node clocks give the same result", test_skewed_clocks },
	{ "coalesced sends, partial reads and writes: split exactly by bytes", test_coalesced_and_partial },
	{ "requests in flight on one connection, read at once: each reply charged like its request",
	  test_in_order_answers },
	{ "overlapping sends and suspect ranges are untrusted; no upstream is unpaired", test_untrusted },
	{ "sequence numbers wrapping at 2^32", test_sequence_wrap },
	{ "receivers of pending senders at the horizon", test_waiting_on_pending_sender },
	{ "held parts are bounded and sends expire", test_bounded_and_expiring },
	{ "restored state continues like the original", test_restore },
	{ "configuration rules take precedence over bytes", test_rules_take_precedence },
	{ "a reply to a CE's own client ends the chain", test_reply_to_ce_client },
	{ "UDP: datagrams charged by their senders, no sender and no rule to V", test_udp },
	{ "a stop gives up pending parts and keeps the sends", test_give_up },
	{ "bad input is refused", test_bad_input },
	{ "follow-replies: a worker's chains take the CE of the request they answer", test_follow_replies },
	{ "pooled proxy before a thread-per-connection back end: each reply anchors its own request",
	  test_pooled_proxy },
	{ "unix stream sockets are paired on a node by both ends and byte positions", test_unix },
	{ "many unresolved sends on one multiplexed connection: bounded work", test_mux_no_spin },
	{ "a process calling its own server over loopback: every hop charged to its CE", test_loopback_to_itself },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_pair", cases)
