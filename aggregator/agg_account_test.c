/*
 * agg_account_test.c - stitcher + accountant on the in-memory store
 * (agg_store_mem.h: no database): CE attribution by rules, V reasons, the
 * identity per window, exactly-once application of batches (duplicates, new
 * instances, gaps), Xen domains, estimator inputs, dropped parts, the
 * observer, the runtime rule. The SQLite store itself is tested in agg_store_st_test.c.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rm_test.h"
#include "agg_account.h"
#include "agg_config.h"
#include "agg_stitch_run.h"
#include "agg_store_mem.h"
#include "rm_part.h"
#include "rm_err.h"

static const char conf[] =
	"[ce c1]\nclient = 127.0.0.2\n"
	"[ce c2]\nclient = 127.0.0.3\n"
	"[ce guests]\nxen_domain = 3\n"
	"[estimate n1]\nmethod = lr\n";

#define WIN_NS 1000000000ULL
#define WIN 1700000000ULL /* a window in 2023 */

struct fixture {
	struct agg_config *cfg;
	struct agg_store_mem *db;
	struct agg_store store;
	struct agg_account *acct;
	struct agg_stitch_run *st;
};

static void fx_open_conf(struct fixture *f, const char *text)
{
	CU_ASSERT_EQUAL_FATAL(agg_config_parse(text, strlen(text), "t.ini", &f->cfg), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_store_mem_open(&f->db), RM_OK);
	agg_store_mem_bind(f->db, &f->store);
	CU_ASSERT_EQUAL_FATAL(agg_account_open(&f->acct, &f->store), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_stitch_run_open(&f->st, f->cfg, f->acct, NULL), RM_OK);
}

static void fx_close(struct fixture *f)
{
	agg_stitch_run_close(f->st);
	agg_account_close(f->acct);
	agg_store_mem_close(f->db);
	agg_config_free(f->cfg);
}

static void fx_open(struct fixture *f)
{
	fx_open_conf(f, conf);
}

/* A batch as the stitcher receives it (rm_wire.h struct rm_wbatch). */
struct mk {
	struct rm_wbatch b;
	struct rm_wpart p[8];
	struct rm_totals w[2];
	uint8_t laddr[4];
};

static void mk_init(struct mk *m, uint64_t instance, uint64_t seq)
{
	memset(m, 0, sizeof(*m));
	m->b.node = "n1";
	m->b.backend = "test";
	m->b.instance = instance;
	m->b.seq = seq;
	m->b.window_ns = WIN_NS;
	m->b.parts = m->p;
	m->b.windows = m->w;
	inet_pton(AF_INET, "127.0.0.1", m->laddr);
}

static void mk_part(struct mk *m, const char *client, uint64_t cpu, uint64_t rx, uint64_t tx)
{
	size_t i = m->b.n_parts++;
	uint8_t addr[4];

	inet_pton(AF_INET, client, addr);
	rm_tuple_set(&m->p[i].in, 0, RM_AF_INET, m->laddr, 4, 7000, addr, 4, 40000 + (uint32_t)i);
	m->p[i].seg_id = i + 1;
	m->p[i].win = WIN;
	m->p[i].cpu_ns = cpu;
	m->p[i].rx_bytes = rx;
	m->p[i].tx_bytes = tx;
	m->p[i].flags = RM_PF_START | RM_PF_END;
}

static void mk_window(struct mk *m, uint64_t busy, uint64_t unseg, uint64_t rx, uint64_t tx)
{
	struct rm_totals *w = &m->w[m->b.n_windows++];

	memset(w, 0, sizeof(*w));
	w->win = WIN;
	w->busy_ns = busy;
	w->unseg_cpu_ns = unseg;
	w->rx_bytes = rx;
	w->tx_bytes = tx;
	w->capacity_ns = 2 * WIN_NS;
}

/* U_c of ce on n1 (all windows); for ST_CE_UNACCOUNTABLE, V = U - sum_c U_c */
static uint64_t usage_of(const struct agg_store_mem *db, const char *ce, int resource)
{
	if (!strcmp(ce, ST_CE_UNACCOUNTABLE))
		return agg_store_mem_total(db, "n1", resource) - agg_store_mem_usage(db, "n1", NULL, resource);
	return agg_store_mem_usage(db, "n1", ce, resource);
}

static uint64_t reason_of(const struct agg_store_mem *db, const char *reason, int resource)
{
	return agg_store_mem_unacct(db, "n1", reason, resource);
}

static size_t unbalanced(const struct agg_store_mem *db)
{
	return agg_store_mem_unbalanced(db, NULL);
}

static void test_attribution(void)
{
	struct fixture f;
	struct mk m;
	char err[256] = "";
	int dup = -1;

	fx_open(&f);
	mk_init(&m, 0xabc, 1);
	mk_part(&m, "127.0.0.2", 3000000, 100, 1000); /* c1 */
	mk_part(&m, "127.0.0.2", 2000000, 50, 500);   /* c1 */
	mk_part(&m, "127.0.0.3", 4000000, 70, 700);   /* c2 */
	mk_part(&m, "127.0.0.99", 1000000, 10, 10);   /* no rule */
	/* busy = 10 ms of parts + 5 ms unsegmented */
	mk_window(&m, 15000000, 5000000, 230, 2210);
	m.w[0].unseg_tx = 0;
	CU_ASSERT_EQUAL_FATAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(dup, 0);
	CU_ASSERT_EQUAL(usage_of(f.db, "c1", ST_R_CPU), 5000000);
	CU_ASSERT_EQUAL(usage_of(f.db, "c2", ST_R_CPU), 4000000);
	CU_ASSERT_EQUAL(usage_of(f.db, "c1", ST_R_NET_TX), 1500);
	CU_ASSERT_EQUAL(usage_of(f.db, ST_CE_UNACCOUNTABLE, ST_R_CPU), 6000000);
	CU_ASSERT_EQUAL(reason_of(f.db, "no_ce", ST_R_CPU), 1000000);
	CU_ASSERT_EQUAL(reason_of(f.db, "unsegmented", ST_R_CPU), 5000000);
	CU_ASSERT_EQUAL(unbalanced(f.db), 0);
	fx_close(&f);
}

static void test_exactly_once(void)
{
	struct agg_account_stats st;
	struct fixture f;
	struct mk m;
	char err[256];
	int dup;

	fx_open(&f);
	mk_init(&m, 1, 1);
	mk_part(&m, "127.0.0.2", 1000, 1, 1);
	CU_ASSERT_EQUAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(dup, 0);
	/* the same batch again (lost ack): recognised, not applied */
	CU_ASSERT_EQUAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(dup, 1);
	CU_ASSERT_EQUAL(usage_of(f.db, "c1", ST_R_CPU), 1000);
	/* a restarted collector (new instance) starts again at seq 1 */
	mk_init(&m, 2, 1);
	mk_part(&m, "127.0.0.2", 500, 1, 1);
	CU_ASSERT_EQUAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(dup, 0);
	CU_ASSERT_EQUAL(usage_of(f.db, "c1", ST_R_CPU), 1500);
	/* a gap is applied and counted */
	mk_init(&m, 2, 3);
	mk_part(&m, "127.0.0.2", 10, 1, 1);
	CU_ASSERT_EQUAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	agg_account_get_stats(f.acct, &st);
	CU_ASSERT_EQUAL(st.gaps, 1);
	CU_ASSERT_EQUAL(st.duplicates, 1);
	CU_ASSERT_EQUAL(st.batches, 3);
	/* ... and an old one that arrives after it is a duplicate */
	mk_init(&m, 2, 2);
	mk_part(&m, "127.0.0.2", 7, 1, 1);
	CU_ASSERT_EQUAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(dup, 1);
	CU_ASSERT_EQUAL(usage_of(f.db, "c1", ST_R_CPU), 1510);
	fx_close(&f);
}

static void test_late_totals_and_residual(void)
{
	struct fixture f;
	struct mk m;
	char err[256];
	int dup;

	fx_open(&f);
	/* parts arrive first: no total yet, so the window does not balance */
	mk_init(&m, 9, 1);
	mk_part(&m, "127.0.0.2", 4000, 0, 0);
	CU_ASSERT_EQUAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	CU_ASSERT(unbalanced(f.db) >= 1);
	/* the window's totals arrive in a later batch: now it balances */
	mk_init(&m, 9, 2);
	mk_window(&m, 4500, 500, 0, 0);
	CU_ASSERT_EQUAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(unbalanced(f.db), 0);
	fx_close(&f);
}

static void test_xen_domains(void)
{
	struct fixture f;
	struct mk m;
	char err[256];
	int dup;

	fx_open(&f);
	mk_init(&m, 5, 1);
	m.b.backend = "xen";
	mk_part(&m, "127.0.0.2", 300, 0, 0);
	mk_part(&m, "127.0.0.2", 200, 0, 0);
	mk_part(&m, "127.0.0.2", 100, 0, 0);
	memset(&m.p[0].in, 0, sizeof(m.p[0].in));
	memset(&m.p[1].in, 0, sizeof(m.p[1].in));
	memset(&m.p[2].in, 0, sizeof(m.p[2].in));
	m.p[0].flags = RM_PF_DOMAIN;                 /* guest 3 itself */
	m.p[0].domid = 3;
	m.p[1].flags = RM_PF_DOMAIN | RM_PF_DRIVER;  /* dom0 work charged to guest 3 */
	m.p[1].domid = 3;
	m.p[2].flags = RM_PF_DOMAIN;                 /* dom0's remainder */
	m.p[2].domid = 0;
	mk_window(&m, 600, 0, 0, 0);
	CU_ASSERT_EQUAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(usage_of(f.db, "guests", ST_R_CPU), 500);
	CU_ASSERT_EQUAL(reason_of(f.db, "dom0", ST_R_CPU), 100);
	CU_ASSERT_EQUAL(unbalanced(f.db), 0);
	fx_close(&f);
}

static void test_bad_window(void)
{
	struct fixture f;
	struct mk m;
	char err[256] = "";
	int dup;

	fx_open(&f);
	mk_init(&m, 1, 1);
	mk_part(&m, "127.0.0.2", 1, 0, 0);
	m.p[0].win = UINT64_MAX / 2;
	CU_ASSERT_EQUAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_EINVAL);
	CU_ASSERT(strstr(err, "beyond the representable time range") != NULL);
	CU_ASSERT_EQUAL(usage_of(f.db, "c1", ST_R_CPU), 0);
	fx_close(&f);
}

/* The estimator inputs of (node, ce) over all windows; returns the rows (ce NULL: of every CE). */
static size_t est_of(const struct agg_store_mem *db, const char *node, const char *ce, uint64_t *requests,
		     uint64_t *rt_ns, uint64_t *rx)
{
	uint64_t v[3] = { 0, 0, 0 };
	size_t n = agg_store_mem_est(db, node, ce, v);

	*requests = v[0];
	*rt_ns = v[1];
	*rx = v[2];
	return n;
}

/*
 * The estimators' inputs come with the batch, exactly once: per CE the
 * inbound bytes of all its parts, and one request per part closed by a
 * send, with its response time (end - start). c1: two completed requests
 * of 3 ms and 1 ms plus a part still open (no END): 3 parts' bytes
 * 100 + 50 + 5, 2 requests, 4 ms. c2: one request of 2 ms, 70 bytes. The
 * part of no CE gives no input.
 */
static void test_estimator_inputs(void)
{
	struct fixture f;
	struct mk m;
	uint64_t req, rt, rx;
	char err[256] = "";
	int dup = -1, i;

	fx_open(&f);
	for (i = 0; i < 2; i++) {
		mk_init(&m, 0xe57, 1);
		mk_part(&m, "127.0.0.2", 3000000, 100, 1000);
		m.p[0].start_ns = 10000000;
		m.p[0].end_ns = 13000000;
		mk_part(&m, "127.0.0.2", 1000000, 50, 500);
		m.p[1].start_ns = 20000000;
		m.p[1].end_ns = 21000000;
		mk_part(&m, "127.0.0.2", 1000000, 5, 0);
		m.p[2].flags = RM_PF_START;
		m.p[2].start_ns = 30000000;
		m.p[2].end_ns = 39000000;
		mk_part(&m, "127.0.0.3", 2000000, 70, 700);
		m.p[3].start_ns = 40000000;
		m.p[3].end_ns = 42000000;
		mk_part(&m, "127.0.0.99", 1000000, 10, 10);
		mk_window(&m, 8000000, 0, 235, 2210);
		/* the second time the same batch is a duplicate: nothing added */
		CU_ASSERT_EQUAL_FATAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
		CU_ASSERT_EQUAL(dup, i);
	}
	CU_ASSERT_EQUAL(agg_store_mem_total(f.db, "n1", ST_R_CPU), 8000000);
	/* one window, inputs of c1 and c2 only */
	CU_ASSERT_EQUAL(est_of(f.db, "n1", NULL, &req, &rt, &rx), 2);
	CU_ASSERT_EQUAL(est_of(f.db, "n1", "c1", &req, &rt, &rx), 1);
	CU_ASSERT_EQUAL(req, 2);
	CU_ASSERT_EQUAL(rt, 4000000);
	CU_ASSERT_EQUAL(rx, 155);
	CU_ASSERT_EQUAL(est_of(f.db, "n1", "c2", &req, &rt, &rx), 1);
	CU_ASSERT_EQUAL(req, 1);
	CU_ASSERT_EQUAL(rt, 2000000);
	CU_ASSERT_EQUAL(rx, 70);
	/* a node without an [estimate] section gets no inputs */
	mk_init(&m, 0xe58, 1);
	m.b.node = "n2";
	mk_part(&m, "127.0.0.2", 3000000, 100, 1000);
	mk_window(&m, 8000000, 0, 100, 1000);
	CU_ASSERT_EQUAL_FATAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(agg_store_mem_total(f.db, "n2", ST_R_CPU), 8000000);
	CU_ASSERT_EQUAL(est_of(f.db, "n2", NULL, &req, &rt, &rx), 0);
	fx_close(&f);
}

/*
 * A server with `address` in its [estimate] section takes its inputs from
 * the sends of other nodes into that address: node n1's parts for c1 (by
 * rule) end with sends to 10.0.0.2:5432 of 300 and 200 bytes; c2's part
 * sends elsewhere. Server "db" gets c1: 2 requests, 500 bytes, response
 * time unknown (0); db's own parts add nothing.
 */
static void test_estimator_inputs_by_address(void)
{
	static const char conf2[] = "[ce c1]\nclient = 127.0.0.2\n[ce c2]\nclient = 127.0.0.3\n"
				    "[estimate db]\nmethod = lr\naddress = 10.0.0.2:5432\n";
	struct fixture f;
	struct mk m;
	uint64_t req, rt, rx;
	uint8_t dst[2][4], src[4];
	char err[256] = "";
	int dup = -1, i;

	fx_open_conf(&f, conf2);
	inet_pton(AF_INET, "10.0.0.2", dst[0]);
	inet_pton(AF_INET, "10.0.0.9", dst[1]);
	inet_pton(AF_INET, "10.0.0.1", src);
	mk_init(&m, 0xadd, 1);
	mk_part(&m, "127.0.0.2", 1000000, 10, 300);
	mk_part(&m, "127.0.0.2", 1000000, 10, 200);
	mk_part(&m, "127.0.0.3", 1000000, 10, 999);
	for (i = 0; i < 3; i++)
		rm_tuple_set(&m.p[i].out, 0, RM_AF_INET, src, 4, 50000 + (uint32_t)i, dst[i == 2], 4, 5432);
	CU_ASSERT_EQUAL_FATAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	/* db's own batch: a part of c2 by rule, not an input (address given) */
	mk_init(&m, 0xdb, 1);
	m.b.node = "db";
	mk_part(&m, "127.0.0.3", 1000000, 77, 7);
	mk_window(&m, 5000000, 0, 77, 7);
	CU_ASSERT_EQUAL_FATAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(agg_store_mem_total(f.db, "db", ST_R_CPU), 5000000);
	CU_ASSERT_EQUAL(est_of(f.db, "db", NULL, &req, &rt, &rx), 1);
	CU_ASSERT_EQUAL(est_of(f.db, "db", "c1", &req, &rt, &rx), 1);
	CU_ASSERT_EQUAL(req, 2);
	CU_ASSERT_EQUAL(rx, 500);
	CU_ASSERT_EQUAL(rt, 0);
	fx_close(&f);
}

/* Parts the collector's ring dropped: their share of lost / unsegmented moves to V 'dropped'. */
static void test_dropped(void)
{
	struct fixture f;
	struct mk m;
	char err[256] = "";
	int dup = -1;

	fx_open(&f);
	mk_init(&m, 0xd0, 1);
	mk_part(&m, "127.0.0.2", 3000000, 100, 0); /* c1 */
	/* busy 10 ms = 3 parts + 2 unsegmented + 5 lost, of which 4 were in dropped parts */
	mk_window(&m, 10000000, 2000000, 300, 0);
	m.w[0].lost_ns = 5000000;
	m.w[0].unseg_rx = 200;
	m.w[0].dropped_parts = 7;
	m.w[0].dropped_cpu_ns = 4000000;
	m.w[0].dropped_rx = 150;
	CU_ASSERT_EQUAL_FATAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(usage_of(f.db, "c1", ST_R_CPU), 3000000);
	CU_ASSERT_EQUAL(reason_of(f.db, "dropped", ST_R_CPU), 4000000);
	CU_ASSERT_EQUAL(reason_of(f.db, "lost", ST_R_CPU), 1000000);
	CU_ASSERT_EQUAL(reason_of(f.db, "unsegmented", ST_R_CPU), 2000000);
	CU_ASSERT_EQUAL(reason_of(f.db, "dropped", ST_R_NET_RX), 150);
	CU_ASSERT_EQUAL(reason_of(f.db, "unsegmented", ST_R_NET_RX), 50);
	CU_ASSERT_EQUAL(usage_of(f.db, ST_CE_UNACCOUNTABLE, ST_R_CPU), 7000000);
	CU_ASSERT_EQUAL(unbalanced(f.db), 0);

	/* a collector claiming more dropped than it counted as lost / unsegmented:
	 * never more than there is, and the window still balances */
	mk_init(&m, 0xd0, 2);
	mk_window(&m, 1000000, 0, 80, 0);
	m.w[0].win = WIN + 1;
	m.w[0].lost_ns = 1000000;
	m.w[0].unseg_rx = 80;
	m.w[0].dropped_cpu_ns = 9000000;
	m.w[0].dropped_rx = 1000;
	m.w[0].dropped_tx = 5;
	CU_ASSERT_EQUAL_FATAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(reason_of(f.db, "dropped", ST_R_CPU), 5000000);
	CU_ASSERT_EQUAL(reason_of(f.db, "dropped", ST_R_NET_RX), 230);
	CU_ASSERT_EQUAL(reason_of(f.db, "dropped", ST_R_NET_TX), 0);
	CU_ASSERT_EQUAL(unbalanced(f.db), 0);
	fx_close(&f);
}

struct seen {
	int rows, totals;
	uint64_t c1_cpu, total_cpu, dropped;
	int64_t start, len;
};

static void observe(void *arg, const struct agg_account_row *row)
{
	struct seen *s = arg;

	s->rows++;
	s->start = row->start;
	s->len = row->len;
	if (!row->ce) {
		s->totals++;
		s->total_cpu += row->v[ST_R_CPU];
		s->dropped += row->dropped_parts;
	} else if (!strcmp(row->ce, "c1") && !strcmp(row->node, "n1")) {
		s->c1_cpu += row->v[ST_R_CPU];
	}
}

/* The observer hears what a commit wrote: CE usage and the window's U,
 * not the V reasons, and nothing of a duplicate or a rolled-back batch. */
static void test_observer(void)
{
	struct agg_batch_meta m = { "n1", "test", 7, 1, WIN_NS };
	struct agg_charge ch[2] = {
		{ .win = WIN, .ce = "c1", .v = { 5000, 10, 0, 0, 0 } },
		{ .win = WIN, .reason = "lost", .v = { 2000, 0, 0, 0, 0 } },
	};
	struct rm_totals w = { .win = WIN, .busy_ns = 9000, .rx_bytes = 10, .dropped_parts = 1 };
	struct rm_totals bad = { .win = UINT64_MAX / 2 };
	struct agg_account *a = NULL;
	struct seen s = { 0 };
	struct agg_store store;
	struct agg_store_mem *db = NULL;
	int dup = 0;

	CU_ASSERT_EQUAL_FATAL(agg_store_mem_open(&db), RM_OK);
	agg_store_mem_bind(db, &store);
	CU_ASSERT_EQUAL_FATAL(agg_account_open(&a, &store), RM_OK);
	agg_account_observe(a, observe, &s);
	CU_ASSERT_EQUAL(agg_account_apply(a, &m, ch, 2, &w, 1, &dup), RM_OK);
	CU_ASSERT_EQUAL(s.rows, 2);
	CU_ASSERT_EQUAL(s.totals, 1);
	CU_ASSERT_EQUAL(s.c1_cpu, 5000);
	CU_ASSERT_EQUAL(s.total_cpu, 9000);
	CU_ASSERT_EQUAL(s.dropped, 1);
	CU_ASSERT_EQUAL(s.start, (int64_t)(WIN * WIN_NS));
	CU_ASSERT_EQUAL(s.len, (int64_t)WIN_NS);
	/* the same batch again, then one that is rolled back */
	CU_ASSERT_EQUAL(agg_account_apply(a, &m, ch, 2, &w, 1, &dup), RM_OK);
	CU_ASSERT_EQUAL(dup, 1);
	m.seq = 2;
	CU_ASSERT_EQUAL(agg_account_apply(a, &m, ch, 1, &bad, 1, &dup), RM_EINVAL);
	CU_ASSERT_EQUAL(s.rows, 2);
	agg_account_observe(a, NULL, NULL);
	m.seq = 3;
	CU_ASSERT_EQUAL(agg_account_apply(a, &m, ch, 2, &w, 1, &dup), RM_OK);
	CU_ASSERT_EQUAL(s.rows, 2);
	agg_account_close(a);
	agg_store_mem_close(db);
}

/* A store and an accountant of its own (no stitcher): the runtime rule's cases. */
struct rtfx {
	struct agg_store_mem *db;
	struct agg_store store;
	struct agg_account *a;
	uint64_t seq;
	uint64_t go; /* the windows' totals' unseg_go_ns (rt_batch) */
};

static void rt_open(struct rtfx *f)
{
	memset(f, 0, sizeof(*f));
	CU_ASSERT_EQUAL_FATAL(agg_store_mem_open(&f->db), RM_OK);
	agg_store_mem_bind(f->db, &f->store);
	CU_ASSERT_EQUAL_FATAL(agg_account_open(&f->a, &f->store), RM_OK);
}

static void rt_close(struct rtfx *f)
{
	agg_account_close(f->a);
	agg_store_mem_close(f->db);
}

/*
 * One batch of node: the CPU charged to c1 and c2 (0: none) and the requests
 * they completed in window win, and the window's totals (none if busy is 0):
 * busy, unsegmented and of that the runtime's.
 */
static void rt_batch(struct rtfx *f, const char *node, uint64_t win, uint64_t c1, uint64_t r1, uint64_t c2,
		     uint64_t r2, uint64_t busy, uint64_t unseg, uint64_t rt)
{
	struct agg_batch_meta m = { node, "test", 7, ++f->seq, WIN_NS };
	struct agg_charge ch[2] = { { .win = win, .ce = "c1", .v = { c1 } }, { .win = win, .ce = "c2", .v = { c2 } } };
	struct rm_totals w = { .win = win, .busy_ns = busy, .unseg_cpu_ns = unseg, .unseg_rt_ns = rt, .unseg_go_ns = f->go };
	int dup = 0;

	if (!strcmp(node, "n2"))
		m.instance = 8; /* each node its own collector */
	CU_ASSERT_EQUAL_FATAL(agg_account_begin(f->a, &m, &dup), RM_OK);
	if (c1)
		CU_ASSERT_EQUAL(agg_account_add(f->a, &ch[0]), RM_OK);
	if (c2)
		CU_ASSERT_EQUAL(agg_account_add(f->a, &ch[1]), RM_OK);
	/* the runtime's threads served them (parts flagged RM_PF_RUNTIME): a JVM's, and with Go CPU in the
	   totals a Go program's alike */
	if (r1 || c1)
		CU_ASSERT_EQUAL(agg_account_add_req(f->a, NULL, 0, win, "c1", 10, 0, r1, c1), RM_OK);
	if (r2 || c2)
		CU_ASSERT_EQUAL(agg_account_add_req(f->a, NULL, 0, win, "c2", 10, 0, r2, c2), RM_OK);
	if (f->go && (r1 || c1))
		CU_ASSERT_EQUAL(agg_account_add_req(f->a, NULL, 0, win, "c1", 20, 1, r1, c1), RM_OK);
	if (f->go && (r2 || c2))
		CU_ASSERT_EQUAL(agg_account_add_req(f->a, NULL, 0, win, "c2", 20, 1, r2, c2), RM_OK);
	CU_ASSERT_EQUAL(agg_account_commit(f->a, &w, busy ? 1 : 0), RM_OK);
}

/* Every window of f balances, the rule charged `charged` ns and left `left` in V in all; closes f. */
static void rt_check_close(struct rtfx *f, uint64_t charged, uint64_t left)
{
	struct agg_account_stats st;

	CU_ASSERT_EQUAL(agg_store_mem_unbalanced(f->db, NULL), 0);
	agg_account_get_stats(f->a, &st);
	CU_ASSERT_EQUAL(st.runtime_charged_ns, charged);
	CU_ASSERT_EQUAL(st.runtime_left_ns, left);
	rt_close(f);
}

static void test_runtime_rule(void)
{
	struct rtfx f;

	rt_open(&f);
	/* c1: 3000 ns and 3 requests, c2: 1000 ns and 1 request; 1001 ns of the runtime's (of 1201 unsegmented):
	 * by requests (3/4, 1/4) and by CPU (3/4, 1/4) */
	rt_batch(&f, "n1", WIN, 3000, 3, 1000, 1, 5201, 1201, 1001);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU) + agg_store_mem_usage(f.db, "n1", "c2", ST_R_CPU),
			4000 + 1001);
	CU_ASSERT(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU) >= 3000 + 750);
	CU_ASSERT(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU) <= 3000 + 751);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n1", AGG_REASON_UNSEGMENTED, ST_R_CPU), 200);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n1", AGG_REASON_RUNTIME, ST_R_CPU), 0);
	CU_ASSERT_EQUAL(agg_store_mem_unbalanced(f.db, NULL), 0);
	/* requests and CPU disagree: c1 all the requests, c2 all the CPU: by the weight (default, then half each) */
	rt_batch(&f, "n1", WIN + 1, 0, 10, 4000, 0, 5000, 1000, 1000);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU), 3000 + 751 + AGG_RT_REQ_PM_DEFAULT);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c2", ST_R_CPU), 1000 + 250 + 4000 + 1000 - AGG_RT_REQ_PM_DEFAULT);
	CU_ASSERT_EQUAL(agg_account_set_runtime(f.a, 1, 500, AGG_RT_GO_REQ_PM_DEFAULT, AGG_RT_GO_LAB_REQ_PM_DEFAULT), RM_OK);
	rt_batch(&f, "n1", WIN + 2, 0, 10, 4000, 0, 5000, 1000, 1000);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU), 3000 + 751 + AGG_RT_REQ_PM_DEFAULT + 500);
	rt_check_close(&f, 3001, 0);
}

static void test_runtime_go_weight(void)
{
	struct rtfx f;

	rt_open(&f);
	/* c1 all the requests, c2 all the CPU; 1000 ns of a Go program's, 1000 of a JVM's: each by its own weight */
	f.go = 1000;
	rt_batch(&f, "n1", WIN, 0, 10, 4000, 0, 6000, 2000, 2000);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU), AGG_RT_GO_REQ_PM_DEFAULT + AGG_RT_REQ_PM_DEFAULT);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c2", ST_R_CPU),
			4000 + 2000 - AGG_RT_GO_REQ_PM_DEFAULT - AGG_RT_REQ_PM_DEFAULT);
	/* the weights set: Go's all by requests, the other all by CPU */
	CU_ASSERT_EQUAL(agg_account_set_runtime(f.a, 1, 0, 1000, AGG_RT_GO_LAB_REQ_PM_DEFAULT), RM_OK);
	rt_batch(&f, "n1", WIN + 1, 0, 10, 4000, 0, 6000, 2000, 2000);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU),
			AGG_RT_GO_REQ_PM_DEFAULT + AGG_RT_REQ_PM_DEFAULT + 1000);
	/* a Go share above the runtime's is cut to it: all of it Go's */
	f.go = 5000;
	rt_batch(&f, "n1", WIN + 2, 0, 10, 4000, 0, 5000, 1000, 1000);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU),
			AGG_RT_GO_REQ_PM_DEFAULT + AGG_RT_REQ_PM_DEFAULT + 2000);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n1", AGG_REASON_RUNTIME, ST_R_CPU), 0);
	rt_check_close(&f, 5000, 0);
}

static void test_runtime_kinds(void)
{
	struct agg_batch_meta m = { "n1", "test", 7, 1, WIN_NS };
	struct agg_charge ch[2] = { { .win = WIN, .ce = "c1", .v = { 1000 } }, { .win = WIN, .ce = "c2", .v = { 1000 } } };
	/* 3000 of the runtimes' own: 1000 a Go program's (no label counts), 2000 a JVM's */
	struct rm_totals w = { .win = WIN, .busy_ns = 5000, .unseg_cpu_ns = 3000, .unseg_rt_ns = 3000,
			       .unseg_go_ns = 1000 };
	struct rtfx f;
	int dup = 0;

	rt_open(&f);
	/* a JVM (pid 10) served c1, a Go program (pid 20) c2, on one node: each kind's CPU to its own CEs */
	CU_ASSERT_EQUAL_FATAL(agg_account_begin(f.a, &m, &dup), RM_OK);
	CU_ASSERT_EQUAL(agg_account_add(f.a, &ch[0]), RM_OK);
	CU_ASSERT_EQUAL(agg_account_add(f.a, &ch[1]), RM_OK);
	CU_ASSERT_EQUAL(agg_account_add_req(f.a, NULL, 0, WIN, "c1", 10, 0, 5, 1000), RM_OK);
	CU_ASSERT_EQUAL(agg_account_add_req(f.a, NULL, 0, WIN, "c2", 20, 1, 1, 1000), RM_OK);
	CU_ASSERT_EQUAL(agg_account_commit(f.a, &w, 1), RM_OK);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU), 1000 + 2000);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c2", ST_R_CPU), 1000 + 1000);
	/* the next window's totals before its charges: each kind by the window before's CEs, remembered */
	w.win = WIN + 1;
	m.seq = 2;
	CU_ASSERT_EQUAL_FATAL(agg_account_begin(f.a, &m, &dup), RM_OK);
	w.busy_ns = 3000;
	CU_ASSERT_EQUAL(agg_account_commit(f.a, &w, 1), RM_OK);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU), 3000 + 2000);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c2", ST_R_CPU), 2000 + 1000);
	/* a JVM alone on a node whose totals say some CPU was a Go program's: that stays V 'runtime' */
	w.win = WIN + 5;
	m.seq = 3;
	CU_ASSERT_EQUAL_FATAL(agg_account_begin(f.a, &m, &dup), RM_OK);
	CU_ASSERT_EQUAL(agg_account_add(f.a, &(struct agg_charge){ .win = WIN + 5, .ce = "c1", .v = { 1000 } }), RM_OK);
	CU_ASSERT_EQUAL(agg_account_add_req(f.a, NULL, 0, WIN + 5, "c1", 10, 0, 1, 1000), RM_OK);
	w.busy_ns = 4000;
	CU_ASSERT_EQUAL(agg_account_commit(f.a, &w, 1), RM_OK);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU), 5000 + 1000 + 2000);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n1", AGG_REASON_RUNTIME, ST_R_CPU), 1000);
	rt_check_close(&f, 8000, 1000);
}

static void test_runtime_no_ce(void)
{
	struct rtfx f;

	rt_open(&f);
	/* no CE served in the window nor in the one before: all of it stays V 'runtime' */
	rt_batch(&f, "n1", WIN, 0, 0, 0, 0, 900, 900, 700);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", NULL, ST_R_CPU), 0);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n1", AGG_REASON_RUNTIME, ST_R_CPU), 700);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n1", AGG_REASON_UNSEGMENTED, ST_R_CPU), 200);
	/* a runtime share above the unsegmented CPU is cut to it */
	rt_batch(&f, "n1", WIN + 5, 0, 0, 0, 0, 100, 100, 500);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n1", AGG_REASON_RUNTIME, ST_R_CPU), 800);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n1", AGG_REASON_UNSEGMENTED, ST_R_CPU), 200);
	rt_check_close(&f, 0, 800);
}

static void test_runtime_across_batches(void)
{
	struct rtfx f;

	rt_open(&f);
	/* the CEs' charges of a window in one batch, its totals in the next, another node's in between */
	rt_batch(&f, "n1", WIN, 2000, 2, 2000, 2, 0, 0, 0);
	rt_batch(&f, "n2", WIN, 0, 0, 0, 0, 800, 800, 800);
	rt_batch(&f, "n1", WIN, 0, 0, 0, 0, 4600, 600, 600);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU), 2300);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c2", ST_R_CPU), 2300);
	/* the other node served no CE: its runtime's CPU is its own V, never n1's CEs' */
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n2", NULL, ST_R_CPU), 0);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n2", AGG_REASON_RUNTIME, ST_R_CPU), 800);
	/* totals of a window no charge reached yet: the CEs of the window before */
	rt_batch(&f, "n1", WIN + 1, 0, 0, 0, 0, 100, 100, 100);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU), 2350);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c2", ST_R_CPU), 2350);
	CU_ASSERT_EQUAL(agg_store_mem_unbalanced(f.db, NULL), 0);
	rt_close(&f);
}

static void test_runtime_other_server(void)
{
	struct agg_batch_meta m = { "n1", "test", 7, 1, WIN_NS };
	struct agg_charge ch[2] = { { .win = WIN, .ce = "c1", .v = { 1000 } }, { .win = WIN, .ce = "c2", .v = { 9000 } } };
	struct rm_totals w = { .win = WIN, .busy_ns = 10600, .unseg_cpu_ns = 600, .unseg_rt_ns = 500 };
	struct rtfx f;
	int dup = 0;

	rt_open(&f);
	/* c2 is another server's on the same node (its parts carry no RM_PF_RUNTIME): the runtime's CPU is c1's */
	CU_ASSERT_EQUAL_FATAL(agg_account_begin(f.a, &m, &dup), RM_OK);
	CU_ASSERT_EQUAL(agg_account_add(f.a, &ch[0]), RM_OK);
	CU_ASSERT_EQUAL(agg_account_add(f.a, &ch[1]), RM_OK);
	CU_ASSERT_EQUAL(agg_account_add_req(f.a, NULL, 0, WIN, "c1", 0, 0, 2, 1000), RM_OK);
	CU_ASSERT_EQUAL(agg_account_commit(f.a, &w, 1), RM_OK);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU), 1500);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c2", ST_R_CPU), 9000);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n1", AGG_REASON_UNSEGMENTED, ST_R_CPU), 100);
	CU_ASSERT_EQUAL(agg_store_mem_unbalanced(f.db, NULL), 0);
	rt_close(&f);
}

static void test_runtime_off(void)
{
	struct agg_account_stats st;
	struct rtfx f;

	rt_open(&f);
	CU_ASSERT_EQUAL(agg_account_set_runtime(f.a, 1, 1001, 0, 0), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_account_set_runtime(f.a, 1, 0, 1001, 0), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_account_set_runtime(f.a, 1, 0, 0, 1001), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_account_set_runtime(f.a, 0, AGG_RT_REQ_PM_DEFAULT, AGG_RT_GO_REQ_PM_DEFAULT,
						AGG_RT_GO_LAB_REQ_PM_DEFAULT), RM_OK);
	rt_batch(&f, "n1", WIN, 3000, 3, 1000, 1, 5201, 1201, 1001);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU), 3000);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", "c2", ST_R_CPU), 1000);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n1", AGG_REASON_RUNTIME, ST_R_CPU), 1001);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n1", AGG_REASON_UNSEGMENTED, ST_R_CPU), 200);
	agg_account_get_stats(f.a, &st);
	CU_ASSERT_EQUAL(st.runtime_charged_ns, 0);
	CU_ASSERT_EQUAL(st.runtime_left_ns, 1001);
	/* a node without a runtime: nothing moves whether the rule is on or off */
	CU_ASSERT_EQUAL(agg_account_set_runtime(f.a, 1, AGG_RT_REQ_PM_DEFAULT, AGG_RT_GO_REQ_PM_DEFAULT,
						AGG_RT_GO_LAB_REQ_PM_DEFAULT), RM_OK);
	rt_batch(&f, "n2", WIN, 3000, 3, 1000, 1, 5200, 1200, 0);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n2", "c1", ST_R_CPU), 3000);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n2", AGG_REASON_UNSEGMENTED, ST_R_CPU), 1200);
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n2", AGG_REASON_RUNTIME, ST_R_CPU), 0);
	CU_ASSERT_EQUAL(agg_store_mem_unbalanced(f.db, NULL), 0);
	rt_close(&f);
}

/* ---- the Go label rule ---- */

#define CK1 0x1111ULL
#define CK2 0x2222ULL
#define CK3 0x3333ULL

/* A part's charge: a Go part's (cookie set, or go) or a JVM's (jvm), with one request answered. */
struct go_ch {
	uint64_t cookie;
	const char *ce;     /* NULL: to V reason */
	const char *reason;
	uint64_t cpu;
	int jvm;            /* RM_PF_RUNTIME without RM_PF_GO: no agg_account_add_go */
	uint32_t pid;       /* the part's process (0: not said) */
};

struct go_case {
	const char *name;
	int labels_off, rt_off, segs_on;
	unsigned lab_pm;          /* the unlabelled rest's weight by requests, per mille (0: the default) */
	struct go_ch before[3];   /* an earlier batch's parts (no counts) ... */
	int64_t before_dwin;      /* ... of window WIN + this (its totals with it unless 0) */
	struct go_ch ch[4];       /* the batch with the window's counts */
	uint64_t unseg, rt, go;   /* its totals' unseg_cpu_ns, unseg_rt_ns, unseg_go_ns */
	struct rm_golabel counts[5]; /* samples and seg 0 ends */
	struct go_ch after[3];    /* parts of the window resolved in a later batch (in the totals' busy_ns) */
	struct { const char *key; uint64_t cpu; } want[3]; /* CEs' U_c, or V reasons (key starting with '!') */
	uint64_t want_labelled, want_unlabelled, want_late;
	int want_segwin;          /* the window's counts carried samples by segment */
};

static const struct go_case go_cases[] = {
	{ "split exact by counts, the parts' own charges replaced", .ch = { { CK1, "c1", 0, 600 }, { CK2, "c2", 0, 400 } },
	  .unseg = 100, .rt = 100, .go = 100, .counts = { { CK1, 30 }, { CK2, 70 } },
	  .want = { { "c1", 330 }, { "c2", 770 }, { "!runtime", 0 } }, .want_labelled = 1100 },
	{ "unlabelled and idle samples go by the runtime rule",
	  .ch = { { CK1, "c1", 0, 500 }, { CK2, "c2", 0, 500 } }, .unseg = 100, .rt = 100, .go = 100,
	  .counts = { { CK1, 60 }, { CK2, 20 }, { 0, 10 }, { RM_GO_IDLE, 10 } },
	  .want = { { "c1", 770 }, { "c2", 330 }, { "!runtime", 0 } }, .want_labelled = 880, .want_unlabelled = 220 },
	{ "the unlabelled rest goes by the labelled windows' weight (by default all by requests)",
	  .ch = { { CK1, "c1", 0, 100 }, { CK1, "c1", 0, 100 }, { CK1, "c1", 0, 300 }, { CK2, "c2", 0, 500 } },
	  .counts = { { CK1, 60 }, { CK2, 20 }, { 0, 20 } },
	  /* 200 unlabelled, by requests (3:1); at the unlabelled windows' 30% it would be 715 and 285 */
	  .want = { { "c1", 600 + 150 }, { "c2", 200 + 50 }, { "!runtime", 0 } }, .want_labelled = 800,
	  .want_unlabelled = 200 },
	{ "each process's unlabelled rest goes to the CEs of that process alone",
	  .ch = { { CK1, "c1", 0, 100, 0, 100 }, { CK1, "c1", 0, 100, 0, 100 }, { CK1, "c1", 0, 300, 0, 100 },
		  { CK2, "c2", 0, 500, 0, 200 } },
	  .counts = { { CK1, 60, 0, 100, 0 }, { CK2, 20, 0, 200, 0 }, { 0, 20, 0, 200, 0 } },
	  /* the 200 unlabelled are process 200's: all to c2, none by the node's requests (3:1) */
	  .want = { { "c1", 600 }, { "c2", 200 + 200 }, { "!runtime", 0 } }, .want_labelled = 800,
	  .want_unlabelled = 200 },
	{ "two processes' rests by their own samples, an idle process's to the window before's CEs",
	  .before = { { CK3, "c3", 0, 100, 0, 300 } }, .before_dwin = -1,
	  .ch = { { CK1, "c1", 0, 600, 0, 100 }, { CK2, "c2", 0, 400, 0, 200 } },
	  .counts = { { CK1, 40, 0, 100, 0 }, { RM_GO_IDLE, 10, 0, 100, 0 }, { CK2, 20, 0, 200, 0 },
		      { 0, 10, 0, 200, 0 }, { 0, 20, 0, 300, 0 } },
	  /* 1000 ns for 100 samples; unlabelled 100 / 100 / 200 of processes 100 / 200 / 300 */
	  .want = { { "c1", 400 + 100 }, { "c2", 200 + 100 }, { "c3", 100 + 200 } }, .want_labelled = 600,
	  .want_unlabelled = 400 },
	{ "a process whose parts were charged before the split is not owed them again from the pool",
	  /* process 100's parts (500, its unlabelled goroutines' CPU included) charged by an earlier batch */
	  .before = { { CK1, "c1", 0, 500, 0, 100 } }, .before_dwin = 0,
	  .ch = { { CK2, "c2", 0, 300, 0, 200 } }, .unseg = 200, .rt = 200, .go = 200,
	  .counts = { { CK1, 20, 0, 100, 0 }, { 0, 30, 0, 100, 0 }, { CK2, 40, 0, 200, 0 }, { 0, 10, 0, 200, 0 } },
	  /* 500 each; by the unlabelled samples (30 : 10) the pool's 250 unlabelled would give c1 687, c2 313 */
	  .want = { { "c1", 500 }, { "c2", 500 }, { "!runtime", 0 } }, .want_labelled = 250, .want_unlabelled = 250 },
	{ "a process that served nobody in the window or the one before leaves its rest in V 'runtime'",
	  .ch = { { CK1, "c1", 0, 1000, 0, 100 } }, .counts = { { CK1, 60, 0, 100, 0 }, { 0, 40, 0, 300, 0 } },
	  .want = { { "c1", 600 }, { "!runtime", 400 } }, .want_labelled = 600, .want_unlabelled = 400 },
	{ "the labelled windows' weight set to half by requests, half by CPU", .lab_pm = 500,
	  .ch = { { CK1, "c1", 0, 100 }, { CK1, "c1", 0, 100 }, { CK1, "c1", 0, 300 }, { CK2, "c2", 0, 500 } },
	  .counts = { { CK1, 60 }, { CK2, 20 }, { 0, 20 } },
	  /* 200 unlabelled: 100 by requests (3:1), 100 by CPU (1:1) */
	  .want = { { "c1", 600 + 75 + 50 }, { "c2", 200 + 25 + 50 }, { "!runtime", 0 } }, .want_labelled = 800,
	  .want_unlabelled = 200 },
	{ "unlabelled and idle samples stay V 'runtime' with the runtime rule off", .rt_off = 1,
	  .ch = { { CK1, "c1", 0, 500 }, { CK2, "c2", 0, 500 } }, .unseg = 100, .rt = 100, .go = 100,
	  .counts = { { CK1, 60 }, { CK2, 20 }, { 0, 10 }, { RM_GO_IDLE, 10 } },
	  .want = { { "c1", 660 }, { "c2", 220 }, { "!runtime", 220 } }, .want_labelled = 880, .want_unlabelled = 220 },
	{ "the label rule off: the parts' charges and the runtime rule as without counts", .labels_off = 1,
	  .ch = { { CK1, "c1", 0, 500 }, { CK2, "c2", 0, 500 } }, .unseg = 100, .rt = 100, .go = 100,
	  .counts = { { CK1, 60 }, { CK2, 20 }, { 0, 20 } },
	  .want = { { "c1", 550 }, { "c2", 550 }, { "!runtime", 0 } } },
	{ "a cookie without parts in the window goes where its parts went last",
	  .before = { { CK3, "c2", 0, 300 } }, .before_dwin = -1, .ch = { { CK1, "c1", 0, 1000 } },
	  .counts = { { CK1, 50 }, { CK3, 50 } }, .want = { { "c1", 500 }, { "c2", 800 } }, .want_labelled = 1000 },
	{ "a cookie never seen is unlabelled", .rt_off = 1, .ch = { { CK1, "c1", 0, 1000 } },
	  .counts = { { CK1, 50 }, { CK3, 50 } }, .want = { { "c1", 500 }, { "!runtime", 500 } },
	  .want_labelled = 500, .want_unlabelled = 500 },
	{ "a cookie charged to several CEs is split in their proportion",
	  .ch = { { CK1, "c1", 0, 300 }, { CK1, "c2", 0, 100 }, { CK2, "c1", 0, 600 } },
	  .counts = { { CK1, 50 }, { CK2, 50 } }, .want = { { "c1", 875 }, { "c2", 125 } }, .want_labelled = 1000 },
	{ "a cookie whose parts went to V keeps its reason",
	  .ch = { { CK3, NULL, AGG_REASON_NO_CE, 200 }, { CK1, "c1", 0, 800 } }, .counts = { { CK1, 50 }, { CK3, 50 } },
	  .want = { { "c1", 500 }, { "!" AGG_REASON_NO_CE, 500 } }, .want_labelled = 1000 },
	{ "a JVM's parts keep their charges", .rt_off = 1,
	  .ch = { { CK1, "c1", 0, 300 }, { CK2, "c2", 0, 700, 1 } }, .unseg = 100, .rt = 100,
	  .counts = { { CK1, 100 } }, .want = { { "c1", 300 }, { "c2", 700 }, { "!runtime", 100 } },
	  .want_labelled = 300 },
	{ "earlier batches' charges stay; the pool fills the shortfalls of the window's split",
	  .before = { { CK1, "c1", 0, 600 } }, .before_dwin = 0, .ch = { { CK2, "c2", 0, 200 }, { CK1, "c1", 0, 200 } },
	  .counts = { { CK1, 50 }, { CK2, 50 } }, .want = { { "c1", 600 }, { "c2", 400 } }, .want_labelled = 400 },
	{ "a destination over its share keeps it; the others share the pool by shortfall",
	  .before = { { CK1, "c2", 0, 400 } }, .before_dwin = 0, .ch = { { CK2, "c1", 0, 100 } },
	  .counts = { { CK1, 50 }, { CK2, 50 } }, .want = { { "c1", 100 }, { "c2", 400 } }, .want_labelled = 100 },
	{ "a cookie seen only in an earlier batch of the window goes to its parts' CE", .rt_off = 1,
	  .before = { { CK3, "c2", 0, 100 } }, .before_dwin = 0, .ch = { { CK1, "c1", 0, 900 } },
	  .counts = { { CK1, 50 }, { CK3, 50 } }, .want = { { "c1", 500 }, { "c2", 500 } }, .want_labelled = 900 },
	{ "counts whose sum overflows: shares saturate, the pool stays exact", .rt_off = 1,
	  .ch = { { CK1, "c1", 0, 999 }, { CK2, "c2", 0, 1 } },
	  .counts = { { CK1, UINT64_MAX / 2 }, { CK2, UINT64_MAX / 2 }, { 0, UINT64_MAX / 2 } },
	  .want = { { "c1", 499 }, { "c2", 499 }, { "!runtime", 2 } }, .want_labelled = 998, .want_unlabelled = 2 },
	/* samples by segment too: a cookie's parts' CPU + (its label's samples - its segments' samples) x 10 ns */
	{ "segments corrected by the samples where label and segment differ", .rt_off = 1, .segs_on = 1,
	  .ch = { { CK1, "c1", 0, 620 }, { CK2, "c2", 0, 280 } }, .unseg = 100, .rt = 100, .go = 100,
	  .counts = { { CK1, 50, 60 }, { CK2, 40, 30 }, { 0, 10, 10 } },
	  .want = { { "c1", 520 }, { "c2", 380 }, { "!runtime", 100 } }, .want_labelled = 900, .want_unlabelled = 100,
	  .want_segwin = 1 },
	{ "the same counts by labels alone by default", .rt_off = 1,
	  .ch = { { CK1, "c1", 0, 620 }, { CK2, "c2", 0, 280 } }, .unseg = 100, .rt = 100, .go = 100,
	  .counts = { { CK1, 50, 60 }, { CK2, 40, 30 }, { 0, 10, 10 } },
	  .want = { { "c1", 500 }, { "c2", 400 }, { "!runtime", 100 } }, .want_labelled = 900, .want_unlabelled = 100,
	  .want_segwin = 1 },
	{ "a segment whose samples all ran other labels' goroutines gives its CPU up", .rt_off = 1, .segs_on = 1,
	  .ch = { { CK1, "c1", 0, 500 }, { CK3, "c2", 0, 200 } }, .unseg = 300, .rt = 300, .go = 300,
	  .counts = { { CK1, 70, 50 }, { CK3, 0, 20 }, { 0, 30, 30 } },
	  .want = { { "c1", 700 }, { "c2", 0 }, { "!runtime", 300 } }, .want_labelled = 700, .want_unlabelled = 300,
	  .want_segwin = 1 },
	{ "corrected shares past the window's CPU are scaled down to it", .rt_off = 1, .segs_on = 1,
	  .ch = { { CK1, "c1", 0, 900 }, { CK2, "c2", 0, 100 } },
	  .counts = { { CK1, 50, 10 }, { CK2, 50, 10 }, { 0, 0, 80 } },
	  .want = { { "c1", 666 }, { "c2", 333 }, { "!runtime", 1 } }, .want_labelled = 999, .want_unlabelled = 1,
	  .want_segwin = 1 },
	{ "samples by segment that do not add up to the labels' are not used", .rt_off = 1, .segs_on = 1,
	  .ch = { { CK1, "c1", 0, 620 }, { CK2, "c2", 0, 280 } }, .unseg = 100, .rt = 100, .go = 100,
	  .counts = { { CK1, 50, 60 }, { CK2, 40, 30 }, { 0, 10, 0 } },
	  .want = { { "c1", 500 }, { "c2", 400 }, { "!runtime", 100 } }, .want_labelled = 900, .want_unlabelled = 100 },
	{ "a Go part resolved after its window's split goes as the split charged the CEs", .rt_off = 1,
	  .ch = { { CK1, "c1", 0, 600 }, { CK2, "c2", 0, 400 } }, .counts = { { CK1, 30 }, { CK2, 70 } },
	  .after = { { CK3, NULL, AGG_REASON_PAST_HORIZON, 200 }, { CK3, "c1", 0, 101 } },
	  /* 300 : 700 of 200 and of 101 (the remainder to the largest) */
	  .want = { { "c1", 300 + 60 + 30 }, { "c2", 700 + 140 + 71 }, { "!" AGG_REASON_PAST_HORIZON, 0 } },
	  .want_labelled = 1000, .want_late = 301 },
	{ "with the label rule off a late Go part keeps its own charge", .rt_off = 1, .labels_off = 1,
	  .ch = { { CK1, "c1", 0, 600 }, { CK2, "c2", 0, 400 } }, .counts = { { CK1, 30 }, { CK2, 70 } },
	  .after = { { CK3, NULL, AGG_REASON_PAST_HORIZON, 200 } },
	  .want = { { "c1", 600 }, { "c2", 400 }, { "!" AGG_REASON_PAST_HORIZON, 200 } } },
	{ "segment counts whose sums overflow: shares bounded, the pool stays exact", .rt_off = 1, .segs_on = 1,
	  .ch = { { CK1, "c1", 0, 999 }, { CK2, "c2", 0, 1 } },
	  /* 2^64 samples by label and by segment: all saturates, each term stays within the window's CPU */
	  .counts = { { CK1, UINT64_MAX / 2 + 1, UINT64_MAX }, { CK2, UINT64_MAX / 2 + 1, 0 }, { 0, 0, 1 } },
	  .want = { { "c1", 999 + 500 - 1000 }, { "c2", 1 + 500 }, { "!runtime", 0 } }, .want_labelled = 1000,
	  .want_segwin = 1 },
};

/* Adds the charges c[0..3) (cpu 0 ends) of window win to the open transaction, as the stitcher does. */
static void go_add(struct rtfx *f, uint64_t win, const struct go_ch *c, uint64_t *sum)
{
	size_t i;

	for (i = 0; i < 4 && c[i].cpu; i++) {
		struct agg_charge ch = { .win = win, .ce = c[i].ce, .reason = c[i].reason, .v = { c[i].cpu } };

		CU_ASSERT_EQUAL(agg_account_add(f->a, &ch), RM_OK);
		if (c[i].ce)
			CU_ASSERT_EQUAL(agg_account_add_req(f->a, NULL, 0, win, c[i].ce, c[i].pid, !c[i].jvm, 1, c[i].cpu),
					RM_OK);
		if (!c[i].jvm)
			CU_ASSERT_EQUAL(agg_account_add_go(f->a, NULL, 0, win, c[i].cookie, c[i].ce, c[i].reason,
							   c[i].cpu), RM_OK);
		*sum += c[i].cpu;
	}
}

static void go_run(const struct go_case *c)
{
	struct agg_batch_meta m = { "n1", "test", 7, 0, WIN_NS };
	struct agg_account_stats st;
	static struct rm_totals w;
	uint64_t sum = 0, all = 0;
	struct rtfx f;
	size_t i;
	int dup = 0;

	rt_open(&f);
	agg_account_set_go_labels(f.a, !c->labels_off);
	if (c->segs_on)
		agg_account_set_go_label_segments(f.a, 1); /* else the default: labels alone */
	CU_ASSERT_EQUAL(agg_account_set_runtime(f.a, !c->rt_off, AGG_RT_REQ_PM_DEFAULT, AGG_RT_GO_REQ_PM_DEFAULT,
						c->lab_pm ? c->lab_pm : AGG_RT_GO_LAB_REQ_PM_DEFAULT), RM_OK);
	if (c->before[0].cpu) {
		m.seq = ++f.seq;
		CU_ASSERT_EQUAL_FATAL(agg_account_begin(f.a, &m, &dup), RM_OK);
		go_add(&f, WIN + (uint64_t)c->before_dwin, c->before, &sum);
		memset(&w, 0, sizeof(w));
		w.win = WIN + (uint64_t)c->before_dwin;
		w.busy_ns = sum;
		CU_ASSERT_EQUAL(agg_account_commit(f.a, &w, c->before_dwin ? 1 : 0), RM_OK);
		all = c->before_dwin ? 0 : sum;
	}
	m.seq = ++f.seq;
	CU_ASSERT_EQUAL_FATAL(agg_account_begin(f.a, &m, &dup), RM_OK);
	go_add(&f, WIN, c->ch, &all);
	memset(&w, 0, sizeof(w));
	w.win = WIN;
	w.busy_ns = all + c->unseg;
	w.unseg_cpu_ns = c->unseg;
	w.unseg_rt_ns = c->rt;
	w.unseg_go_ns = c->go;
	w.go_period_ns = 500000;
	for (i = 0; i < 5 && (c->counts[i].samples || c->counts[i].seg); i++) {
		w.go[i] = c->counts[i]; /* as given, sums past UINT64_MAX included */
		w.n_go++;
	}
	for (i = 0; i < 3 && c->after[i].cpu; i++) {
		w.busy_ns += c->after[i].cpu;
		w.rx_bytes += 7; /* each late part's bytes */
	}
	CU_ASSERT_EQUAL(agg_account_commit(f.a, &w, 1), RM_OK);
	if (c->after[0].cpu) { /* resolved later, as the stitcher charges a Go part */
		m.seq = ++f.seq;
		CU_ASSERT_EQUAL_FATAL(agg_account_begin(f.a, &m, &dup), RM_OK);
		for (i = 0; i < 3 && c->after[i].cpu; i++) {
			struct agg_charge ch = { .win = WIN, .ce = c->after[i].ce, .reason = c->after[i].reason,
						 .v = { c->after[i].cpu, 7 } };
			int taken = -1;

			CU_ASSERT_EQUAL(agg_account_add_go_late(f.a, &ch, &taken), RM_OK);
			CU_ASSERT_EQUAL(taken, !c->labels_off);
			if (!taken)
				CU_ASSERT_EQUAL(agg_account_add(f.a, &ch), RM_OK);
			CU_ASSERT_EQUAL(agg_account_add_go(f.a, NULL, 0, WIN, c->after[i].cookie, c->after[i].ce,
							   c->after[i].reason, c->after[i].cpu), RM_OK);
		}
		memset(&w, 0, sizeof(w));
		w.win = WIN;
		CU_ASSERT_EQUAL(agg_account_commit(f.a, &w, 0), RM_OK);
		/* a transaction after it counts none of it again */
		m.seq = ++f.seq;
		CU_ASSERT_EQUAL_FATAL(agg_account_begin(f.a, &m, &dup), RM_OK);
		CU_ASSERT_EQUAL(agg_account_commit(f.a, &w, 0), RM_OK);
		/* the bytes (7 each) stay where the part went */
		if (c->after[0].reason && !c->after[0].ce)
			CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n1", c->after[0].reason, ST_R_NET_RX), 7);
	}
	for (i = 0; i < 3 && c->want[i].key; i++) {
		uint64_t got = c->want[i].key[0] == '!' ? agg_store_mem_unacct(f.db, "n1", c->want[i].key + 1, ST_R_CPU)
							: agg_store_mem_usage(f.db, "n1", c->want[i].key, ST_R_CPU);

		if (got != c->want[i].cpu)
			fprintf(stderr, "%s: %s %llu, expected %llu\n", c->name, c->want[i].key, (unsigned long long)got,
				(unsigned long long)c->want[i].cpu);
		CU_ASSERT_EQUAL(got, c->want[i].cpu);
	}
	/* the identity, to the nanosecond, in every window */
	CU_ASSERT_EQUAL(agg_store_mem_unbalanced(f.db, NULL), 0);
	CU_ASSERT_EQUAL(agg_store_mem_total(f.db, "n1", ST_R_CPU),
			agg_store_mem_usage(f.db, "n1", NULL, ST_R_CPU) + agg_store_mem_unacct(f.db, "n1", NULL, ST_R_CPU));
	agg_account_get_stats(f.a, &st);
	CU_ASSERT_EQUAL(st.go_labelled_ns, c->want_labelled);
	CU_ASSERT_EQUAL(st.go_unlabelled_ns, c->want_unlabelled);
	CU_ASSERT_EQUAL(st.go_label_windows, c->labels_off ? 0 : 1);
	CU_ASSERT_EQUAL(st.go_seg_windows, (uint64_t)c->want_segwin);
	CU_ASSERT_EQUAL(st.go_late_ns, c->want_late);
	rt_close(&f);
}

static void test_go_labels(void)
{
	size_t i;

	for (i = 0; i < sizeof(go_cases) / sizeof(go_cases[0]); i++)
		go_run(&go_cases[i]);
}

/* A window of RM_GO_LABELS_MAX cookies, most never seen, and a memory past AGG_GO_COOKIES: bounded, exact. */
static void test_go_labels_many(void)
{
	struct agg_batch_meta m = { "n1", "test", 7, 0, WIN_NS };
	static struct rm_totals w;
	struct rtfx f;
	uint64_t k, total = 0;
	size_t i;
	int dup = 0;

	rt_open(&f);
	/* many windows, each one Go part on a cookie of its own: the memory forgets the oldest */
	for (k = 0; k < AGG_GO_COOKIES + 100; k += 50) {
		m.seq = ++f.seq;
		CU_ASSERT_EQUAL_FATAL(agg_account_begin(f.a, &m, &dup), RM_OK);
		for (i = 0; i < 50; i++) {
			struct agg_charge ch = { .win = WIN + k, .ce = i % 2 ? "c1" : "c2", .v = { 10 } };

			CU_ASSERT_EQUAL(agg_account_add(f.a, &ch), RM_OK);
			CU_ASSERT_EQUAL(agg_account_add_go(f.a, NULL, 0, WIN + k, 1000 + k + i, ch.ce, NULL, 10), RM_OK);
		}
		memset(&w, 0, sizeof(w));
		w.win = WIN + k;
		w.busy_ns = 500;
		CU_ASSERT_EQUAL(agg_account_commit(f.a, &w, 1), RM_OK);
		total += 500;
	}
	/* a window with only counts: the first cookies forgotten, the last ones remembered */
	m.seq = ++f.seq;
	CU_ASSERT_EQUAL_FATAL(agg_account_begin(f.a, &m, &dup), RM_OK);
	memset(&w, 0, sizeof(w));
	w.win = WIN + 10 * AGG_GO_COOKIES;
	w.busy_ns = w.unseg_cpu_ns = w.unseg_rt_ns = w.unseg_go_ns = 12800;
	w.go_period_ns = 500000;
	/* 64 of the first cookies (forgotten), the last 50 (remembered), 14 never seen */
	for (i = 0; i < RM_GO_LABELS_MAX; i++)
		rm_totals_go_add(&w, i < 64 ? 1000 + i : 1000 + (k - 50) + (i - 64), 100);
	CU_ASSERT_EQUAL(agg_account_set_runtime(f.a, 0, 0, 0, 0), RM_OK);
	CU_ASSERT_EQUAL(agg_account_commit(f.a, &w, 1), RM_OK);
	total += 12800;
	/* forgotten and never seen: unlabelled, V 'runtime' (the rule off); remembered: by label, 100 ns each */
	CU_ASSERT_EQUAL(agg_store_mem_unacct(f.db, "n1", AGG_REASON_RUNTIME, ST_R_CPU), 12800 - 50 * 100);
	CU_ASSERT_EQUAL(agg_store_mem_usage(f.db, "n1", NULL, ST_R_CPU), (total - 12800) + 50 * 100);
	CU_ASSERT_EQUAL(agg_store_mem_total(f.db, "n1", ST_R_CPU), total);
	CU_ASSERT_EQUAL(agg_store_mem_unbalanced(f.db, NULL), 0);
	rt_close(&f);
}

/* One batch with more windows than the memory holds, each split: bounded, exact, nothing used after it is freed. */
static void test_go_labels_wins(void)
{
	enum { NW = AGG_GO_WINS + 8 };
	struct agg_batch_meta m = { "n1", "test", 7, 0, WIN_NS };
	static struct rm_totals w[NW];
	uint64_t c1, c2;
	struct rtfx f;
	size_t i;
	int dup = 0;

	rt_open(&f);
	/* every window's first Go part in one batch (no totals yet) */
	m.seq = ++f.seq;
	CU_ASSERT_EQUAL_FATAL(agg_account_begin(f.a, &m, &dup), RM_OK);
	for (i = 0; i < NW; i++) {
		struct agg_charge ch = { .win = WIN + i, .ce = "c1", .v = { 10 } };

		CU_ASSERT_EQUAL(agg_account_add(f.a, &ch), RM_OK);
		CU_ASSERT_EQUAL(agg_account_add_go(f.a, NULL, 0, WIN + i, CK1, "c1", NULL, 10), RM_OK);
	}
	CU_ASSERT_EQUAL(agg_account_commit(f.a, NULL, 0), RM_OK);
	/* then each window's second part, its totals and counts: half each */
	m.seq = ++f.seq;
	CU_ASSERT_EQUAL_FATAL(agg_account_begin(f.a, &m, &dup), RM_OK);
	for (i = 0; i < NW; i++) {
		struct agg_charge ch = { .win = WIN + i, .ce = "c2", .v = { 10 } };

		CU_ASSERT_EQUAL(agg_account_add(f.a, &ch), RM_OK);
		CU_ASSERT_EQUAL(agg_account_add_go(f.a, NULL, 0, WIN + i, CK2, "c2", NULL, 10), RM_OK);
		memset(&w[i], 0, sizeof(w[i]));
		w[i].win = WIN + i;
		w[i].busy_ns = 20;
		w[i].go_period_ns = 500000;
		rm_totals_go_add(&w[i], CK1, 50);
		rm_totals_go_add(&w[i], CK2, 50);
	}
	CU_ASSERT_EQUAL(agg_account_commit(f.a, w, NW), RM_OK);
	/* a remembered window: 10 each; a forgotten one: the pool of 10 split 5/5, c1 keeping its 10 */
	c1 = agg_store_mem_usage(f.db, "n1", "c1", ST_R_CPU);
	c2 = agg_store_mem_usage(f.db, "n1", "c2", ST_R_CPU);
	CU_ASSERT_EQUAL(c1 + c2, 20 * NW);
	CU_ASSERT(c1 >= 10 * NW && c1 <= 10 * NW + 5 * (NW - AGG_GO_WINS));
	CU_ASSERT_EQUAL(agg_store_mem_unbalanced(f.db, NULL), 0);
	rt_close(&f);
}

/* Through the stitcher: Go parts by the cookie they received on, a JVM's part and a thread segment's untouched. */
static void test_go_labels_stitched(void)
{
	struct fixture f;
	struct mk m;
	char err[256] = "";
	int dup = -1;

	fx_open(&f);
	mk_init(&m, 0xabc, 1);
	mk_part(&m, "127.0.0.2", 600, 0, 0);   /* c1, Go, cookie 0xa */
	mk_part(&m, "127.0.0.3", 400, 0, 0);   /* c2, Go, cookie 0xb */
	mk_part(&m, "127.0.0.3", 2000, 0, 0);  /* c2, a JVM's (cookie 0xa too: not a Go part, not moved) */
	mk_part(&m, "127.0.0.2", 5000, 0, 0);  /* c1, no runtime */
	m.p[0].in.cookie = 0xa;
	m.p[1].in.cookie = 0xb;
	m.p[2].in.cookie = 0xa;
	m.p[0].flags |= RM_PF_RUNTIME | RM_PF_GO;
	m.p[1].flags |= RM_PF_RUNTIME | RM_PF_GO;
	m.p[2].flags |= RM_PF_RUNTIME;
	mk_window(&m, 8100, 100, 0, 0);
	m.w[0].unseg_rt_ns = m.w[0].unseg_go_ns = 100;
	m.w[0].go_period_ns = 500000;
	rm_totals_go_add(&m.w[0], 0xa, 30);
	rm_totals_go_add(&m.w[0], 0xb, 70);
	CU_ASSERT_EQUAL_FATAL(agg_stitch_run_batch(f.st, &m.b, &dup, err, sizeof(err)), RM_OK);
	/* the Go pool (600 + 400 + 100) split 30/70 by the samples */
	CU_ASSERT_EQUAL(usage_of(f.db, "c1", ST_R_CPU), 330 + 5000);
	CU_ASSERT_EQUAL(usage_of(f.db, "c2", ST_R_CPU), 770 + 2000);
	CU_ASSERT_EQUAL(reason_of(f.db, AGG_REASON_RUNTIME, ST_R_CPU), 0);
	CU_ASSERT_EQUAL(unbalanced(f.db), 0);
	fx_close(&f);
}

static CU_TestInfo cases[] = {
	{ "parts are charged to CEs by rules, the rest to V with reasons", test_attribution },
	{ "batches apply exactly once per node instance", test_exactly_once },
	{ "a window balances once its totals arrive", test_late_totals_and_residual },
	{ "xen domains and dom0 remainder", test_xen_domains },
	{ "a window out of range is refused and nothing is written", test_bad_window },
	{ "estimator inputs per CE, exactly once", test_estimator_inputs },
	{ "estimator inputs from the sends into a server", test_estimator_inputs_by_address },
	{ "dropped parts are charged to V as 'dropped', never more than was lost", test_dropped },
	{ "an observer hears what each commit wrote", test_observer },
	{ "the runtime rule charges a runtime's CPU by requests and CPU, exactly", test_runtime_rule },
	{ "a JVM's and a Go program's CPU go to the CEs of their own kind", test_runtime_kinds },
	{ "a Go program's runtime CPU by its own weight, a JVM's by the other", test_runtime_go_weight },
	{ "the runtime rule charges nothing where no CE was served", test_runtime_no_ce },
	{ "the runtime rule weighs a window's CEs across batches, per node", test_runtime_across_batches },
	{ "the runtime rule charges only the CEs the runtime's threads served", test_runtime_other_server },
	{ "the runtime rule off, and a node without a runtime", test_runtime_off },
	{ "the Go label rule: its cases, the identity in each", test_go_labels },
	{ "the Go label rule: full windows and a bounded memory", test_go_labels_many },
	{ "the Go label rule: more windows in a batch than it remembers", test_go_labels_wins },
	{ "the Go label rule through the stitcher: parts by their cookies", test_go_labels_stitched },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_account", cases)
