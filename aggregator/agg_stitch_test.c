/*
 * agg_stitch_test.c - stitcher + pairing engine + accountant on the
 * in-memory store (agg_store_mem.h: no database), fed with wire batches
 * built from recorded streams of several
 * nodes (testdata/, replayed by col_replay): U_c per hop and the identity
 * per window, batches arriving out of order, the horizon (driven by the
 * stitcher's clock, ticked by hand), split counts, pending parts surviving
 * a restart (and downtime not counting against the horizon), exactly once
 * across the restart, and the rebuild of the pairing state after a failed
 * transaction.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rm_test.h"
#include "agg_account.h"
#include "agg_config.h"
#include "agg_stitch_run.h"
#include "agg_store_mem.h"
#include "col_enc.h"
#include "col_replay.h"
#include "rametr.h"
#include "rm_err.h"
#include "banned.h"

#define SEC 1000000000LL
#define MAXP 32
#define MAXW 8

static const char conf[] =
	"[aggregator]\nhorizon = 10s\n"
	"[ce c1]\nclient = 10.1.0.1\n"
	"[ce c2]\nclient = 10.1.0.2\n"
	"[ce c3]\nclient = 10.1.0.3\n";

static int64_t fake_now;

static int64_t fake_clock(void *arg)
{
	(void)arg;
	return fake_now;
}

struct fixture {
	struct agg_config *cfg;
	struct agg_store_mem *db; /* survives a restart (fx_stop, fx_start) */
	struct agg_store store;
	struct agg_account *acct;
	struct agg_stitch_run *st;
};

static void fx_start(struct fixture *f)
{
	struct agg_stitch_run_opts o = { fake_clock, NULL, NULL };

	agg_store_mem_bind(f->db, &f->store);
	CU_ASSERT_EQUAL_FATAL(agg_account_open(&f->acct, &f->store), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_stitch_run_open(&f->st, f->cfg, f->acct, &o), RM_OK);
}

static void fx_stop(struct fixture *f)
{
	agg_stitch_run_close(f->st);
	agg_account_close(f->acct);
	f->st = NULL;
	f->acct = NULL;
}

static void fx_open(struct fixture *f, const char *name)
{
	(void)name;
	memset(f, 0, sizeof(*f));
	CU_ASSERT_EQUAL_FATAL(agg_store_mem_open(&f->db), RM_OK);
	fake_now = 1000 * SEC;
	CU_ASSERT_EQUAL_FATAL(agg_config_parse(conf, strlen(conf), "t.ini", &f->cfg), RM_OK);
	fx_start(f);
}

static void fx_close(struct fixture *f)
{
	fx_stop(f);
	agg_store_mem_close(f->db);
	agg_config_free(f->cfg);
}

/* ---- recorded streams and the batches built from them ---- */

struct stream {
	const char *node;
	struct col_replay_capture cap;
};

static void replay(struct stream *s, const char *node, const char *file)
{
	struct col_sink sink;
	char path[512];

	s->node = node;
	col_replay_capture_init(&s->cap);
	sink = col_replay_capture_sink(&s->cap);
	snprintf(path, sizeof(path), "%s/%s", AGG_TESTDATA, file);
	CU_ASSERT_EQUAL_FATAL(col_replay_file(path, &sink, NULL), RM_OK);
	CU_ASSERT_FATAL(s->cap.nparts > 0 && s->cap.nparts <= MAXP && s->cap.nwins <= MAXW);
}

/* A batch as the aggregator receives it: encoded by the collector's encoder, decoded by rm_wire_decode. */
struct wb {
	Rametr__Envelope *env;
};

/* Batch seq of s's parts [from, to), with the stream's windows if with_windows (m's last batch freed). */
static const struct rm_wbatch *wb_make(struct wb *m, const struct stream *s, uint64_t seq, size_t from, size_t to,
				       int with_windows)
{
	struct col_enc_hdr hdr = { s->node, "replay", 77, seq, SEC, 0 };
	struct col_enc enc = { { NULL, 0, 0, 0 } };
	uint8_t *buf = NULL;
	size_t len = 0;
	char err[256] = "";

	rm_wire_free(m->env);
	m->env = NULL;
	CU_ASSERT_EQUAL_FATAL(col_enc_batch(&enc, &hdr, s->cap.parts + from, to - from, s->cap.wins,
					    with_windows ? s->cap.nwins : 0, NULL, 0, &buf, &len, err, sizeof(err)),
			      RM_OK);
	col_enc_free(&enc);
	CU_ASSERT_EQUAL_FATAL(rm_wire_decode(buf, len, &m->env, err, sizeof(err)), RM_OK);
	free(buf);
	return rm_wire_batch(m->env);
}

static void wb_free(struct wb *m)
{
	rm_wire_free(m->env);
	m->env = NULL;
}

static int deliver(struct fixture *f, const struct rm_wbatch *b, int *dup)
{
	char err[256] = "";
	int d = -1, rv = agg_stitch_run_batch(f->st, b, &d, err, sizeof(err));

	if (dup)
		*dup = d;
	return rv;
}

static void deliver_all(struct fixture *f, const struct stream *s, uint64_t seq)
{
	struct wb m = { NULL };
	int dup;

	CU_ASSERT_EQUAL(deliver(f, wb_make(&m, s, seq, 0, s->cap.nparts, 1), &dup), RM_OK);
	CU_ASSERT_EQUAL(dup, 0);
	wb_free(&m);
}

/* ---- storage queries ---- */

static uint64_t usage_of(const struct agg_store_mem *db, const char *server, const char *ce, int resource)
{
	return agg_store_mem_usage(db, server, ce, resource);
}

static uint64_t reason_of(const struct agg_store_mem *db, const char *server, const char *reason, int resource)
{
	return agg_store_mem_unacct(db, server, reason, resource);
}

/* Windows that do not balance (sum_c U_c + V reasons != U), all servers. */
static size_t unbalanced(const struct agg_store_mem *db, uint64_t *checked)
{
	return agg_store_mem_unbalanced(db, checked);
}

static void held_count(const struct agg_store_mem *db, uint64_t *held, uint64_t *unresolved)
{
	agg_store_mem_held_count(db, held, unresolved);
}

/* The per-hop CPU of pool_*.events (hand-computed in the files). */
static void check_pool_usage(const struct agg_store_mem *db)
{
	CU_ASSERT_EQUAL(usage_of(db, "front", "c1", ST_R_CPU), 340000);
	CU_ASSERT_EQUAL(usage_of(db, "front", "c2", ST_R_CPU), 260000);
	CU_ASSERT_EQUAL(usage_of(db, "front", "c3", ST_R_CPU), 170000);
	CU_ASSERT_EQUAL(usage_of(db, "db", "c1", ST_R_CPU), 2500000);
	CU_ASSERT_EQUAL(usage_of(db, "db", "c2", ST_R_CPU), 750000);
	CU_ASSERT_EQUAL(usage_of(db, "db", "c3", ST_R_CPU), 3000000);
	CU_ASSERT_EQUAL(usage_of(db, "cache", "c2", ST_R_CPU), 700000);
	CU_ASSERT_EQUAL(usage_of(db, "db", "c2", ST_R_NET_RX), 284);
	CU_ASSERT_EQUAL(usage_of(db, "cache", "c2", ST_R_NET_TX), 64);
	/* what no segment did (thread wake-up before the first recv) is V "unsegmented" */
	CU_ASSERT_EQUAL(reason_of(db, "db", AGG_REASON_NO_CE, ST_R_CPU), 0);
	CU_ASSERT_EQUAL(reason_of(db, "db", AGG_REASON_UNPAIRED, ST_R_CPU), 0);
}

static void load_pool(struct stream *st)
{
	replay(&st[0], "front", "pool_front.events");
	replay(&st[1], "db", "pool_db.events");
	replay(&st[2], "cache", "pool_cache.events");
}

static void streams_free(struct stream *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		col_replay_capture_release(&s[i].cap);
}

/* ---- the cases ---- */

static void test_hops_and_identity(void)
{
	struct fixture f;
	struct stream st[3];
	uint64_t held, unresolved, checked = 0;

	load_pool(st);
	fx_open(&f, "hops");
	/* downstream first: the cache, then db; nothing can be charged yet */
	deliver_all(&f, &st[2], 1);
	deliver_all(&f, &st[1], 1);
	CU_ASSERT_EQUAL(usage_of(f.db, "db", "c1", ST_R_CPU), 0);
	CU_ASSERT(unbalanced(f.db, NULL) > 0); /* db's CPU is in U but not charged yet */
	held_count(f.db, &held, &unresolved);
	CU_ASSERT_EQUAL(unresolved, 1 + 5);
	/* the proxy's batch: every hop resolves */
	fake_now += SEC;
	deliver_all(&f, &st[0], 1);
	check_pool_usage(f.db);
	CU_ASSERT_EQUAL(unbalanced(f.db, &checked), 0);
	CU_ASSERT(checked >= 3 * ST_R_COUNT - 6); /* each node's window, every resource with traffic */
	/* only senders are still held, resolved, until their sends expire */
	held_count(f.db, &held, &unresolved);
	CU_ASSERT_EQUAL(unresolved, 0);
	CU_ASSERT(held > 0);
	fake_now += 10 * SEC;
	CU_ASSERT_EQUAL(agg_stitch_run_tick(f.st), RM_OK);
	held_count(f.db, &held, &unresolved);
	CU_ASSERT_EQUAL(held, 0);
	check_pool_usage(f.db); /* expiry charged nothing twice */
	CU_ASSERT_EQUAL(unbalanced(f.db, NULL), 0);
	fx_close(&f);
	streams_free(st, 3);
}

static void test_splits_recorded(void)
{
	struct fixture f;
	struct stream st[2];
	int64_t w0;

	replay(&st[0], "front", "coalesce_front.events");
	replay(&st[1], "db", "coalesce_db.events");
	fx_open(&f, "splits");
	deliver_all(&f, &st[1], 1);
	deliver_all(&f, &st[0], 1);
	/* db answered the three requests it read at once with one reply: it
	 * might have answered more (agg_pair_ans.c), so they wait for the horizon */
	fake_now += 10 * SEC;
	CU_ASSERT_EQUAL(agg_stitch_run_tick(f.st), RM_OK);
	CU_ASSERT_EQUAL(usage_of(f.db, "db", "c1", ST_R_CPU), 166668);
	CU_ASSERT_EQUAL(usage_of(f.db, "db", "c2", ST_R_CPU), 333336);
	CU_ASSERT_EQUAL(usage_of(f.db, "db", "c3", ST_R_CPU), 500003);
	CU_ASSERT_EQUAL(unbalanced(f.db, NULL), 0);
	/* db: its two parts were split; front: its reader's two parts, in two windows */
	CU_ASSERT_EQUAL(agg_store_mem_splits(f.db, "db", INT64_MIN), 2);
	CU_ASSERT_EQUAL(agg_store_mem_splits(f.db, "front", INT64_MIN), 2);
	CU_ASSERT_EQUAL(agg_store_mem_splits(f.db, "cache", INT64_MIN), 0);
	for (w0 = (int64_t)(st[0].cap.parts[0].win * (uint64_t)SEC); !agg_store_mem_splits(f.db, "front", w0);)
		w0 += SEC;
	CU_ASSERT_EQUAL(agg_store_mem_splits(f.db, "front", w0), 1);
	CU_ASSERT_EQUAL(agg_store_mem_splits(f.db, "front", w0 + SEC), 1);
	fx_close(&f);
	streams_free(st, 2);
}

static void test_horizon_by_tick(void)
{
	struct fixture f;
	struct stream st[2];
	uint64_t held, unresolved;

	replay(&st[0], "front", "untrusted_front.events");
	replay(&st[1], "db", "untrusted_db.events");
	fx_open(&f, "horizon");
	deliver_all(&f, &st[1], 1);
	deliver_all(&f, &st[0], 1);
	CU_ASSERT_EQUAL(reason_of(f.db, "db", AGG_REASON_UNTRUSTED_RANGE, ST_R_CPU), 303030 + 200100);
	CU_ASSERT_EQUAL(reason_of(f.db, "front", AGG_REASON_UNTRUSTED_RANGE, ST_R_CPU), 50000);
	CU_ASSERT_EQUAL(usage_of(f.db, "db", "c3", ST_R_CPU), 96970);
	/* the bytes from nowhere: held, the window does not balance yet */
	held_count(f.db, &held, &unresolved);
	CU_ASSERT_EQUAL(unresolved, 1);
	CU_ASSERT_EQUAL(unbalanced(f.db, NULL), 3); /* db's cpu, net_rx and net_tx */
	fake_now += 10 * SEC - 1;
	CU_ASSERT_EQUAL(agg_stitch_run_tick(f.st), RM_OK);
	CU_ASSERT_EQUAL(reason_of(f.db, "db", AGG_REASON_UNPAIRED, ST_R_CPU), 0);
	fake_now += 1;
	CU_ASSERT_EQUAL(agg_stitch_run_tick(f.st), RM_OK);
	CU_ASSERT_EQUAL(reason_of(f.db, "db", AGG_REASON_UNPAIRED, ST_R_CPU), 300000);
	CU_ASSERT_EQUAL(reason_of(f.db, "db", AGG_REASON_UNPAIRED, ST_R_NET_RX), 70);
	CU_ASSERT_EQUAL(unbalanced(f.db, NULL), 0);
	held_count(f.db, &held, &unresolved);
	CU_ASSERT_EQUAL(unresolved, 0);
	CU_ASSERT_EQUAL(held, 0);
	fx_close(&f);
	streams_free(st, 2);
}

static void test_give_up_at_stop(void)
{
	struct fixture f;
	struct stream st[2];
	uint64_t held, unresolved;

	replay(&st[0], "front", "untrusted_front.events");
	replay(&st[1], "db", "untrusted_db.events");
	fx_open(&f, "give-up");
	deliver_all(&f, &st[1], 1);
	deliver_all(&f, &st[0], 1);
	CU_ASSERT(unbalanced(f.db, NULL) > 0);
	/* stopping before the horizon: the part from nowhere is decided now */
	CU_ASSERT_EQUAL(agg_stitch_run_give_up(f.st, 60 * SEC), RM_OK);
	CU_ASSERT_EQUAL(reason_of(f.db, "db", AGG_REASON_UNPAIRED, ST_R_CPU), 300000);
	CU_ASSERT_EQUAL(unbalanced(f.db, NULL), 0);
	held_count(f.db, &held, &unresolved);
	CU_ASSERT_EQUAL(unresolved, 0);
	CU_ASSERT(held > 0); /* resolved senders stay for the next start */
	fx_stop(&f);
	fx_start(&f);
	fake_now += 20 * SEC;
	CU_ASSERT_EQUAL(agg_stitch_run_tick(f.st), RM_OK);
	CU_ASSERT_EQUAL(reason_of(f.db, "db", AGG_REASON_UNPAIRED, ST_R_CPU), 300000); /* once */
	CU_ASSERT_EQUAL(unbalanced(f.db, NULL), 0);
	held_count(f.db, &held, &unresolved);
	CU_ASSERT_EQUAL(held, 0);
	fx_close(&f);
	streams_free(st, 2);
}

static void test_pending_survive_restart(void)
{
	struct fixture f;
	struct stream st[3];
	struct agg_pair_stats ps;
	struct wb m = { NULL };
	uint64_t held, unresolved;
	int dup;

	load_pool(st);
	fx_open(&f, "restart");
	deliver_all(&f, &st[1], 1);
	deliver_all(&f, &st[2], 1);
	held_count(f.db, &held, &unresolved);
	/* db's parts wait for front's requests, the cache's for db's B1 */
	CU_ASSERT_EQUAL(unresolved, 6);
	fx_stop(&f);
	/* down for an hour: the horizon does not run while the aggregator is down */
	fake_now += 3600 * SEC;
	fx_start(&f);
	agg_stitch_run_get_stats(f.st, &ps);
	CU_ASSERT_EQUAL(ps.pending, 6);
	CU_ASSERT_EQUAL(ps.restored, held);
	/* a collector resends db's batch: recognised, not applied again */
	CU_ASSERT_EQUAL(deliver(&f, wb_make(&m, &st[1], 1, 0, st[1].cap.nparts, 1), &dup), RM_OK);
	CU_ASSERT_EQUAL(dup, 1);
	fake_now += 5 * SEC;
	CU_ASSERT_EQUAL(agg_stitch_run_tick(f.st), RM_OK);
	CU_ASSERT_EQUAL(reason_of(f.db, "db", AGG_REASON_UNPAIRED, ST_R_CPU), 0);
	/* front's batch arrives after the restart: the held parts resolve */
	deliver_all(&f, &st[0], 1);
	check_pool_usage(f.db);
	CU_ASSERT_EQUAL(unbalanced(f.db, NULL), 0);
	/* and a second restart changes nothing */
	fx_stop(&f);
	fx_start(&f);
	fake_now += 20 * SEC;
	CU_ASSERT_EQUAL(agg_stitch_run_tick(f.st), RM_OK);
	check_pool_usage(f.db);
	CU_ASSERT_EQUAL(unbalanced(f.db, NULL), 0);
	held_count(f.db, &held, &unresolved);
	CU_ASSERT_EQUAL(held, 0);
	wb_free(&m);
	fx_close(&f);
	streams_free(st, 3);
}

static void test_failed_transaction_rebuilds(void)
{
	struct fixture f;
	struct stream st[3];
	struct agg_pair_stats ps;
	uint64_t held, unresolved, held0, unresolved0;
	int64_t wstart;
	struct agg_store store;
	struct wb m = { NULL };
	int dup;

	load_pool(st);
	fx_open(&f, "rollback");
	deliver_all(&f, &st[1], 1);
	deliver_all(&f, &st[2], 1);
	held_count(f.db, &held0, &unresolved0);
	/* storage will refuse front's batch: c1's cpu on front would pass INT64_MAX */
	wstart = (int64_t)(st[0].cap.parts[0].win * (uint64_t)SEC);
	agg_store_mem_bind(f.db, &store);
	CU_ASSERT_EQUAL(store.add_usage(store.arg, "front", wstart, SEC, ST_R_CPU, "c1", (uint64_t)INT64_MAX), RM_OK);
	CU_ASSERT_NOT_EQUAL(deliver(&f, wb_make(&m, &st[0], 1, 0, st[0].cap.nparts, 1), &dup), RM_OK);
	/* nothing of it stayed: neither in storage nor in the pairing state */
	CU_ASSERT_EQUAL(usage_of(f.db, "db", "c1", ST_R_CPU), 0);
	held_count(f.db, &held, &unresolved);
	CU_ASSERT_EQUAL(held, held0);
	CU_ASSERT_EQUAL(unresolved, unresolved0);
	agg_stitch_run_get_stats(f.st, &ps);
	CU_ASSERT_EQUAL(ps.pending, unresolved0);
	CU_ASSERT_EQUAL(ps.held, held0);
	/* the obstacle goes; the same batch is sent again and applies once */
	agg_store_mem_drop_usage(f.db, "front");
	CU_ASSERT_EQUAL(deliver(&f, wb_make(&m, &st[0], 1, 0, st[0].cap.nparts, 1), &dup), RM_OK);
	CU_ASSERT_EQUAL(dup, 0);
	check_pool_usage(f.db);
	CU_ASSERT_EQUAL(unbalanced(f.db, NULL), 0);
	wb_free(&m);
	fx_close(&f);
	streams_free(st, 3);
}

static void test_batches_split_and_windows_late(void)
{
	struct fixture f;
	struct stream st[3];
	struct wb m = { NULL };
	size_t n;

	/* each node's parts in single-part batches, the windows last, all
	 * interleaved; the very first batch carries no part at all */
	load_pool(st);
	fx_open(&f, "split-batches");
	n = st[0].cap.nparts;
	CU_ASSERT_EQUAL(deliver(&f, wb_make(&m, &st[2], 1, 0, 0, 1), NULL), RM_OK);      /* cache's windows */
	CU_ASSERT_EQUAL(deliver(&f, wb_make(&m, &st[0], 1, n - 1, n, 0), NULL), RM_OK);  /* last response */
	CU_ASSERT_EQUAL(deliver(&f, wb_make(&m, &st[1], 1, 4, 5, 0), NULL), RM_OK);      /* db's D */
	CU_ASSERT_EQUAL(deliver(&f, wb_make(&m, &st[0], 2, 0, n - 1, 0), NULL), RM_OK);
	CU_ASSERT_EQUAL(deliver(&f, wb_make(&m, &st[2], 2, 0, 1, 0), NULL), RM_OK);
	CU_ASSERT_EQUAL(deliver(&f, wb_make(&m, &st[1], 2, 0, 4, 0), NULL), RM_OK);
	CU_ASSERT(unbalanced(f.db, NULL) > 0); /* front's and db's totals have not arrived */
	CU_ASSERT_EQUAL(deliver(&f, wb_make(&m, &st[0], 3, 0, 0, 1), NULL), RM_OK);
	CU_ASSERT_EQUAL(deliver(&f, wb_make(&m, &st[1], 3, 0, 0, 1), NULL), RM_OK);
	check_pool_usage(f.db);
	CU_ASSERT_EQUAL(unbalanced(f.db, NULL), 0);
	wb_free(&m);
	fx_close(&f);
	streams_free(st, 3);
}

static CU_TestInfo cases[] = {
	{ "U_c per hop and the identity per window, downstream first", test_hops_and_identity },
	{ "coalesced bytes: exact split and split counts in storage", test_splits_recorded },
	{ "the horizon: unpaired charged by the tick, not before", test_horizon_by_tick },
	{ "pending parts survive a restart; downtime does not count", test_pending_survive_restart },
	{ "a stop gives up pending parts, charged once", test_give_up_at_stop },
	{ "a failed transaction leaves no trace and the batch applies when resent", test_failed_transaction_rebuilds },
	{ "parts and window totals in many batches, interleaved", test_batches_split_and_windows_late },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_stitch", cases)
