/*
 * agg_throttle_test.c - the throttle controller on a real SQLite file:
 * settled windows become decisions and commands with the CE's matches,
 * acks mark them applied, leases are renewed and expire, operator commands
 * are checked and bad ones refused with a reason (unknown CE, unknown
 * server, expired, duplicate, unthrottleable resource), and a plugged-in
 * usage source (and LR) drives the policy instead of the accounting.
 */
#include <arpa/inet.h>
#include <string.h>

#include "rm_test.h"
#include "agg_throttle.h"
#include "rm_err.h"
#include "st_throttle.h"

#define S 1000000000ll
#define T0 (1800000000ll * S)   /* a window start, Unix ns */

static const char conf[] =
	"[ce c1]\nclient = 10.0.1.0/24\nserver_port = 5432\n"
	"[ce c2]\nclient = 10.0.2.7\nclient = fd00::/8\n"
	"[ce c3]\nclient = 10.0.3.0/24\n"
	"[ce xen]\nxen_domain = 3\n"
	"[throttle]\ncap = c2 db1 30%\nlease = 4s\nsettle = 1s\n";

struct fx {
	struct agg_config *cfg;
	st_db *db;
	struct agg_throttle *t;
};

static void fx_open(struct fx *f, const char *name, const char *text, const struct agg_usage_source *src)
{
	char path[512];
	struct st_node n = { "db1", "ebpf", "h", (uint64_t)S, 0, 2, T0 };

	snprintf(path, sizeof(path), "%s/%s.db", rm_test_tmpdir(), name);
	unlink(path);
	CU_ASSERT_EQUAL_FATAL(agg_config_parse(text, strlen(text), name, &f->cfg), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_open(&f->db, path, 0), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_node_seen(f->db, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(agg_throttle_open(&f->t, f->cfg, f->db, src), RM_OK);
}

static void fx_close(struct fx *f)
{
	agg_throttle_close(f->t);
	st_close(f->db);
	agg_config_free(f->cfg);
}

/* Window i of db1 (1 s, 2 CPUs): shares in permille of the capacity. */
static void put_window(struct fx *f, int i, uint32_t util, uint32_t c1, uint32_t c2, uint32_t c3)
{
	int64_t start = T0 + i * S;
	uint64_t cap = 2ull * S;

	CU_ASSERT_EQUAL(st_add_usage(f->db, "db1", start, S, ST_R_CPU, "c1", c1 * cap / 1000), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(f->db, "db1", start, S, ST_R_CPU, "c2", c2 * cap / 1000), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(f->db, "db1", start, S, ST_R_CPU, "c3", c3 * cap / 1000), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(f->db, "db1", start, S, ST_R_CPU, util * cap / 1000, cap), RM_OK);
	/* inbound bytes proportional to the CPU, for LR */
	CU_ASSERT_EQUAL(st_add_usage(f->db, "db1", start, S, ST_R_NET_RX, "c1", 1000 + c1 * 100ull), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(f->db, "db1", start, S, ST_R_NET_RX, "c2", 3000 + c2 * 100ull), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(f->db, "db1", start, S, ST_R_NET_RX, "c3", 500 + c3 * 100ull), RM_OK);
}

static size_t list(struct fx *f, const char *state, struct st_throttle **rows)
{
	struct st_throttle_query q = { state, NULL, NULL, 0, 0 };
	size_t n = 0;

	CU_ASSERT_EQUAL(st_throttle_list(f->db, &q, rows, &n), RM_OK);
	return n;
}

static void test_policy_to_commands(void)
{
	struct fx f;
	struct st_throttle *rows = NULL;
	Rametr__ThrottleCommand **cmds;
	size_t n;
	uint64_t id;
	struct agg_throttle_stats st;

	fx_open(&f, "p2c", conf, NULL);
	put_window(&f, 0, 500, 100, 200, 100);
	put_window(&f, 1, 700, 100, 400, 100);   /* c2 above its 30% cap */
	/* window 1 is not settled until T0 + 2 s + 1 s */
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0 + 2 * S + S / 2), RM_OK);
	CU_ASSERT_EQUAL(list(&f, NULL, &rows), 0);
	free(rows);
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0 + 3 * S), RM_OK);
	CU_ASSERT_EQUAL_FATAL(list(&f, NULL, &rows), 1);
	CU_ASSERT_STRING_EQUAL(rows[0].who, "policy:cap");
	CU_ASSERT_STRING_EQUAL(rows[0].ce, "c2");
	CU_ASSERT_STRING_EQUAL(rows[0].server, "db1");
	CU_ASSERT_EQUAL(rows[0].cap_permille, 300);
	CU_ASSERT_STRING_EQUAL(rows[0].state, "pending");
	CU_ASSERT_EQUAL(rows[0].expires_ns, T0 + 7 * S);
	CU_ASSERT_STRING_EQUAL(rows[0].why, "c2 on db1: share 40.0% above its cap of 30.0%");
	CU_ASSERT_STRING_EQUAL(rows[0].figures, "source=rametr win=1800000001 share=400 util=700 smooth=640 prev_cap=0");
	id = rows[0].id;
	free(rows);
	/* the same windows again: nothing new */
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0 + 3 * S + 1), RM_OK);
	CU_ASSERT_EQUAL(list(&f, NULL, &rows), 1);
	free(rows);
	/* to the collector, with the CE's matches */
	CU_ASSERT_EQUAL(agg_throttle_commands_for(f.t, "web", T0 + 3 * S, &cmds, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(agg_throttle_commands_for(f.t, "db1", T0 + 3 * S, &cmds, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(cmds[0]->id, id);
	CU_ASSERT_EQUAL(cmds[0]->cap_permille, 300);
	CU_ASSERT_EQUAL_FATAL(cmds[0]->n_match, 2);
	CU_ASSERT_EQUAL(cmds[0]->match[0]->family, 2);
	CU_ASSERT_EQUAL(cmds[0]->match[0]->prefix, 32);
	CU_ASSERT_EQUAL(cmds[0]->match[0]->addr.len, 4);
	CU_ASSERT_EQUAL(cmds[0]->match[0]->addr.data[3], 7);
	CU_ASSERT_EQUAL(cmds[0]->match[0]->sport_hi, 65535);
	CU_ASSERT_EQUAL(cmds[0]->match[1]->family, 10);
	CU_ASSERT_EQUAL(cmds[0]->match[1]->prefix, 8);
	/* c2 in windows 0-1: (200 + 400) permille of 2 s = 1.2e9 ns of CPU for
	 * (3000 + 20000) + (3000 + 40000) = 66000 bytes; at 300 permille of 2
	 * CPUs (0.6e9 ns/s): 33000 B/s */
	CU_ASSERT_EQUAL(cmds[0]->rx_rate_bps, 33000);
	{
		struct st_throttle g;

		CU_ASSERT_EQUAL(st_throttle_get(f.db, id, &g), RM_OK);
		CU_ASSERT_STRING_EQUAL(g.state, "sent");
		/* sent again until acked */
		CU_ASSERT_EQUAL(agg_throttle_commands_for(f.t, "db1", T0 + 3 * S, &cmds, &n), RM_OK);
		CU_ASSERT_EQUAL(n, 1);
		CU_ASSERT_EQUAL(agg_throttle_acked(f.t, "db1", &id, 1, T0 + 3 * S), RM_OK);
		CU_ASSERT_EQUAL(st_throttle_get(f.db, id, &g), RM_OK);
		CU_ASSERT_STRING_EQUAL(g.state, "applied");
		CU_ASSERT_EQUAL(agg_throttle_commands_for(f.t, "db1", T0 + 3 * S, &cmds, &n), RM_OK);
		CU_ASSERT_EQUAL(n, 0);
		/* an ack from the wrong node or for an unknown id is ignored */
		CU_ASSERT_EQUAL(agg_throttle_acked(f.t, "web", &id, 1, T0 + 3 * S), RM_OK);
		id = 999;
		CU_ASSERT_EQUAL(agg_throttle_acked(f.t, "db1", &id, 1, T0 + 3 * S), RM_OK);
	}
	/* lease 4 s: renewed when less than 2 s are left, while the policy keeps the cap */
	put_window(&f, 2, 650, 100, 300, 100);
	put_window(&f, 3, 650, 100, 300, 100);
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0 + 5 * S + S / 2), RM_OK);
	CU_ASSERT_EQUAL_FATAL(list(&f, "active", &rows), 1);
	CU_ASSERT_EQUAL(rows[0].expires_ns, T0 + 9 * S + S / 2);
	CU_ASSERT(strncmp(rows[0].why, "renewal of ", 11) == 0);
	CU_ASSERT_STRING_EQUAL(rows[0].who, "policy:cap");
	free(rows);
	CU_ASSERT_EQUAL(list(&f, "superseded", &rows), 1);
	free(rows);
	/* c2 stops pressing: released after 3 windows below 80% of the cap */
	put_window(&f, 4, 300, 100, 100, 100);
	put_window(&f, 5, 300, 100, 100, 100);
	put_window(&f, 6, 300, 100, 100, 100);
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0 + 8 * S), RM_OK);
	CU_ASSERT_EQUAL_FATAL(list(&f, "active", &rows), 1);
	CU_ASSERT_EQUAL(rows[0].cap_permille, 0);
	CU_ASSERT(strstr(rows[0].why, "for 3 windows") != NULL);
	free(rows);
	CU_ASSERT_EQUAL(agg_throttle_commands_for(f.t, "db1", T0 + 8 * S, &cmds, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(cmds[0]->cap_permille, 0);
	CU_ASSERT_EQUAL(cmds[0]->n_match, 0);
	/* expiry */
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0 + 20 * S), RM_OK);
	CU_ASSERT_EQUAL(list(&f, "active", &rows), 0);
	free(rows);
	CU_ASSERT_EQUAL(list(&f, "expired", &rows), 1);
	free(rows);
	agg_throttle_get_stats(f.t, &st);
	CU_ASSERT_EQUAL(st.decisions, 2);
	CU_ASSERT_EQUAL(st.renewed, 1);
	CU_ASSERT_EQUAL(st.applied, 1);
	CU_ASSERT_EQUAL(st.bad_acks, 2);
	fx_close(&f);
}

static uint64_t request(struct fx *f, const char *server, const char *ce, const char *res, uint32_t cap,
			int64_t expires)
{
	struct st_throttle c;

	memset(&c, 0, sizeof(c));
	c.created_ns = T0;
	c.expires_ns = expires;
	snprintf(c.who, sizeof(c.who), "rametrctl:root");
	snprintf(c.server, sizeof(c.server), "%s", server);
	snprintf(c.ce, sizeof(c.ce), "%s", ce);
	snprintf(c.resource, sizeof(c.resource), "%s", res);
	c.cap_permille = cap;
	snprintf(c.why, sizeof(c.why), "operator");
	snprintf(c.state, sizeof(c.state), "requested");
	CU_ASSERT_EQUAL(st_throttle_add(f->db, &c), RM_OK);
	return c.id;
}

static void expect(struct fx *f, uint64_t id, const char *state, const char *err)
{
	struct st_throttle g;

	CU_ASSERT_EQUAL_FATAL(st_throttle_get(f->db, id, &g), RM_OK);
	CU_ASSERT_STRING_EQUAL(g.state, state);
	if (err && !strstr(g.error, err)) {
		fprintf(stderr, "\ncommand %llu: expected '%s' in '%s'\n", (unsigned long long)id, err, g.error);
		CU_FAIL("refusal reason");
	}
}

static void test_operator_commands(void)
{
	struct fx f;
	uint64_t good, unk_ce, unk_srv, expired, dup, disk, xen, replace, clear;
	struct agg_throttle_stats st;

	fx_open(&f, "ops", conf, NULL);
	good = request(&f, "db1", "c3", "cpu", 200, T0 + 60 * S);
	unk_ce = request(&f, "db1", "c9", "cpu", 200, T0 + 60 * S);
	unk_srv = request(&f, "db7", "c3", "cpu", 200, T0 + 60 * S);
	expired = request(&f, "db1", "c1", "cpu", 200, T0 - S);
	disk = request(&f, "db1", "c1", "disk_read", 200, T0 + 60 * S);
	xen = request(&f, "db1", "xen", "cpu", 200, T0 + 60 * S);
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0), RM_OK);
	expect(&f, good, "pending", NULL);
	expect(&f, unk_ce, "refused", "unknown CE 'c9' (no [ce c9] rule in the aggregator's configuration)");
	expect(&f, unk_srv, "refused", "unknown server 'db7' (no collector of that name has said hello)");
	expect(&f, expired, "refused", "expired before it could be sent (1.0 s ago)");
	expect(&f, disk, "refused", "resource 'disk_read' cannot be throttled (only cpu)");
	expect(&f, xen, "refused", "CE 'xen' is defined by Xen domains only");
	dup = request(&f, "db1", "c3", "cpu", 200, T0 + 90 * S);
	replace = request(&f, "db1", "c3", "cpu", 150, T0 + 90 * S);
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0), RM_OK);
	expect(&f, dup, "refused", "duplicate of active command 1 (pending, cap 200 permille)");
	expect(&f, replace, "pending", NULL);
	expect(&f, good, "superseded", NULL);
	clear = request(&f, "db1", "c3", "cpu", 0, T0 + 90 * S);
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0), RM_OK);
	expect(&f, clear, "pending", NULL);
	expect(&f, replace, "superseded", NULL);
	agg_throttle_get_stats(f.t, &st);
	CU_ASSERT_EQUAL(st.refused, 6);
	CU_ASSERT_EQUAL(st.accepted, 3);
	fx_close(&f);
}

/* A plugged-in source: says c3 used everything. */
static int fake_source(void *arg, st_db *db, const char *server, int64_t start, int64_t len,
		       struct agg_policy_obs *o, struct agg_policy_use *use, size_t max)
{
	int *calls = arg;

	(void)db;
	(void)server;
	(void)start;
	(void)len;
	(void)max;
	(*calls)++;
	use[0].ce = "c3";
	use[0].cpu_ns = o->busy_ns;
	o->use = use;
	o->nuse = 1;
	return RM_OK;
}

static void test_sources(void)
{
	static const char ov[] = "[ce c1]\nclient = 10.0.1.0/24\n[ce c2]\nclient = 10.0.2.7\n"
				 "[ce c3]\nclient = 10.0.3.0/24\n[throttle]\noverload = on\n";
	static const char ovlr[] = "[ce c1]\nclient = 10.0.1.0/24\n[ce c2]\nclient = 10.0.2.7\n"
				   "[ce c3]\nclient = 10.0.3.0/24\n[throttle]\noverload = on\nsource = lr\n";
	struct agg_usage_source src = { "fake", fake_source, NULL };
	struct st_throttle *rows = NULL;
	struct fx f;
	int calls = 0, i;

	src.arg = &calls;
	fx_open(&f, "src", ov, &src);
	put_window(&f, 0, 950, 100, 800, 50);
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0 + 2 * S), RM_OK);
	CU_ASSERT_EQUAL(calls, 1);
	CU_ASSERT_EQUAL_FATAL(list(&f, NULL, &rows), 1);
	/* the source, not the accounting, named the top consumer */
	CU_ASSERT_STRING_EQUAL(rows[0].ce, "c3");
	CU_ASSERT_STRING_EQUAL(rows[0].who, "policy:overload");
	CU_ASSERT(strncmp(rows[0].figures, "source=fake ", 12) == 0);
	free(rows);
	fx_close(&f);

	/* LR: c2's bytes drive the CPU; it is found as the top consumer */
	fx_open(&f, "lr", ovlr, NULL);
	for (i = 0; i < 12; i++) {
		uint32_t c1 = 50 + (uint32_t)(i * 7 % 30), c3 = 40 + (uint32_t)(i * 11 % 25),
			 c2 = 100 + (uint32_t)i * 60;

		put_window(&f, i, c1 + c2 + c3, c1, c2, c3);
	}
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0 + 14 * S), RM_OK);
	CU_ASSERT(list(&f, NULL, &rows) >= 1);
	if (rows) {
		CU_ASSERT_STRING_EQUAL(rows[0].ce, "c2");
		CU_ASSERT(strncmp(rows[0].figures, "source=lr ", 10) == 0);
	}
	free(rows);
	fx_close(&f);
}

/* The overload rule judges a CE it throttled again only on a window that
 * starts after the collector acknowledged the cap (the loop's delay). */
static void test_hold_until_applied(void)
{
	static const char ov[] = "[ce c1]\nclient = 10.0.1.0/24\n[ce c2]\nclient = 10.0.2.7\n"
				 "[ce c3]\nclient = 10.0.3.0/24\n[throttle]\noverload = on\nlease = 30s\n";
	struct st_throttle *rows = NULL;
	Rametr__ThrottleCommand **cmds;
	uint64_t id;
	size_t n;
	struct fx f;
	int i;

	fx_open(&f, "hold", ov, NULL);
	put_window(&f, 0, 950, 50, 800, 50);
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0 + 2 * S), RM_OK);
	CU_ASSERT_EQUAL_FATAL(list(&f, "active", &rows), 1);
	CU_ASSERT_EQUAL(rows[0].cap_permille, 720);      /* x0.9 of 80% */
	free(rows);
	/* still overloaded and pressing on the cap, but the cap is not in force */
	for (i = 1; i <= 3; i++)
		put_window(&f, i, 950, 50, 780, 50);
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0 + 5 * S), RM_OK);
	CU_ASSERT_EQUAL_FATAL(list(&f, "active", &rows), 1);
	CU_ASSERT_EQUAL(rows[0].cap_permille, 720);
	free(rows);
	CU_ASSERT_EQUAL(agg_throttle_commands_for(f.t, "db1", T0 + 5 * S, &cmds, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	id = cmds[0]->id;
	/* acknowledged at 5.5 s: window 6 is the first the cap governs */
	CU_ASSERT_EQUAL(agg_throttle_acked(f.t, "db1", &id, 1, T0 + 5 * S + S / 2), RM_OK);
	put_window(&f, 4, 950, 50, 780, 50);
	put_window(&f, 5, 950, 50, 780, 50);
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0 + 7 * S), RM_OK);
	CU_ASSERT_EQUAL(list(&f, "active", &rows), 1);
	CU_ASSERT_EQUAL(rows ? rows[0].cap_permille : 0, 720);
	free(rows);
	put_window(&f, 6, 950, 50, 720, 50);
	CU_ASSERT_EQUAL(agg_throttle_tick(f.t, T0 + 8 * S), RM_OK);
	CU_ASSERT_EQUAL_FATAL(list(&f, "active", &rows), 1);
	CU_ASSERT_EQUAL(rows[0].cap_permille, 648);      /* x0.9 of 72% */
	CU_ASSERT(strstr(rows[0].figures, "win=1800000006 ") != NULL);
	free(rows);
	fx_close(&f);
}

/* The sockets the rules decide, as collectors get them in every Ack. */
static void test_decided(void)
{
	static const char conf[] =
		"[ce c1]\nclient = 10.1.0.0/16\nclient = fd00::7\nserver_port = 5432\n"
		"[ce any]\nclient_port = 7000-7010\n"
		"[ce guest]\nxen_domain = 3\n";
	struct agg_config *cfg = NULL;
	static struct agg_decided d;
	char big[4096];
	size_t i, n;

	CU_ASSERT_EQUAL_FATAL(agg_config_parse(conf, strlen(conf), "d.ini", &cfg), RM_OK);
	agg_throttle_decided(cfg, &d);
	/* c1: its two CIDRs; any: both families; guest: none (Xen only) */
	CU_ASSERT_EQUAL_FATAL(d.n, 4);
	CU_ASSERT_EQUAL(d.m[0].family, 2);
	CU_ASSERT_EQUAL(d.m[0].addr.len, 4);
	CU_ASSERT_EQUAL(d.m[0].addr.data[0], 10);
	CU_ASSERT_EQUAL(d.m[0].addr.data[1], 1);
	CU_ASSERT_EQUAL(d.m[0].prefix, 16);
	CU_ASSERT_EQUAL(d.m[0].sport_lo, 5432);
	CU_ASSERT_EQUAL(d.m[0].sport_hi, 5432);
	CU_ASSERT_EQUAL(d.m[0].cport_lo, 0);
	CU_ASSERT_EQUAL(d.m[0].cport_hi, 65535);
	CU_ASSERT_EQUAL(d.m[1].family, 10);
	CU_ASSERT_EQUAL(d.m[1].prefix, 128);
	CU_ASSERT_EQUAL(d.m[1].addr.data[15], 7);
	for (i = 2; i < 4; i++) {
		CU_ASSERT_EQUAL(d.m[i].family, i == 2 ? 2 : 10);
		CU_ASSERT_EQUAL(d.m[i].prefix, 0);
		CU_ASSERT_EQUAL(d.m[i].cport_lo, 7000);
		CU_ASSERT_EQUAL(d.m[i].cport_hi, 7010);
		CU_ASSERT_EQUAL(d.m[i].sport_hi, 65535);
	}
	for (i = 0; i < d.n; i++)
		CU_ASSERT_PTR_EQUAL(d.pm[i], &d.m[i]);
	agg_config_free(cfg);
	/* estimators count requests part by part: nothing may be merged */
	snprintf(big, sizeof(big), "%s[estimate db1]\nmethod = lr\n", conf);
	CU_ASSERT_EQUAL_FATAL(agg_config_parse(big, strlen(big), "e.ini", &cfg), RM_OK);
	agg_throttle_decided(cfg, &d);
	CU_ASSERT_EQUAL(d.n, 0);
	agg_config_free(cfg);
	/* more client ranges than the wire carries: none rather than some */
	n = (size_t)snprintf(big, sizeof(big), "[ce many]\n");
	for (i = 1; i <= RM_WIRE_MAX_DECIDED + 1; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "client = 10.0.0.%zu\n", i);
	CU_ASSERT_EQUAL_FATAL(agg_config_parse(big, strlen(big), "m.ini", &cfg), RM_OK);
	CU_ASSERT_EQUAL(cfg->rules[0].nclients, RM_WIRE_MAX_DECIDED + 1);
	agg_throttle_decided(cfg, &d);
	CU_ASSERT_EQUAL(d.n, 0);
	agg_config_free(cfg);
}

static CU_TestInfo cases[] = {
	{ "settled windows become decisions, commands with matches, acks, renewal, expiry", test_policy_to_commands },
	{ "operator commands are checked; bad ones refused with a reason", test_operator_commands },
	{ "a plugged-in usage source and LR drive the policy", test_sources },
	{ "an overload cap is judged again only once the collector applied it", test_hold_until_applied },
	{ "the sockets the rules decide, for collectors", test_decided },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_throttle", cases)
