/*
 * col_merge_test.c - the part merger on hand-made parts: which parts are
 * merged (decided inbound socket from either end, IPv4-mapped addresses,
 * prefixes and port ranges, sends to decided sockets only, chain / inherit /
 * Xen parts never), how records sum, staging of matches, a full table and an
 * emitter that fails.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "col_merge.h"
#include "rm_err.h"
#include "rm_test.h"
#include "banned.h"

/* [ce c1] client = 10.1.0.0/16, server_port = 5432 (as agg_throttle_decided makes it) */
static const struct rm_match c1 = { 2, { 10, 1 }, 16, 0, 65535, 5432, 5432 };

static void tuple4(struct rm_tuple *t, uint64_t cookie, const char *laddr, uint32_t lport, const char *raddr,
		   uint32_t rport)
{
	memset(t, 0, sizeof(*t));
	t->cookie = cookie;
	t->family = RM_AF_INET;
	inet_pton(AF_INET, laddr, &t->laddr[0]);
	inet_pton(AF_INET, raddr, &t->raddr[0]);
	t->lport = lport;
	t->rport = rport;
}

/* The server's part of a request from client 10.1.0.1:40001, replied on the same socket. */
static void server_part(struct rm_part *p, uint64_t win, uint32_t tid, uint64_t cookie, uint64_t cpu)
{
	memset(p, 0, sizeof(*p));
	p->seg_id = 1000 + cpu;
	p->win = win;
	p->pid = 300;
	p->tid = tid;
	p->start_ns = 1000 * cpu;
	p->end_ns = 1000 * cpu + 500;
	p->cpu_ns = cpu;
	p->runq_ns = 1;
	p->rx_bytes = 100;
	p->tx_bytes = 200;
	p->flags = RM_PF_START | RM_PF_END | RM_PF_IN_SEQ | RM_PF_OUT_SEQ;
	tuple4(&p->in, cookie, "10.0.0.2", 5432, "10.1.0.1", 40001);
	p->out = p->in;
	p->in_seq_start = 5000;
	p->in_seq_end = 5100;
	p->out_seq_start = 9000;
	p->out_seq_end = 9200;
}

static struct col_merge *open_with(const struct rm_match *m, size_t n)
{
	struct col_merge *cm = NULL;

	CU_ASSERT_EQUAL_FATAL(col_merge_open(&cm), RM_OK);
	CU_ASSERT_EQUAL_FATAL(col_merge_stage(cm, m, n), RM_OK);
	CU_ASSERT_EQUAL(col_merge_sync(cm), n != 0);
	return cm;
}

struct sink {
	struct rm_part got[16];
	size_t n;
	size_t fail_at; /* emit fails for the record of this index (SIZE_MAX: never) */
};

static int sink_emit(void *arg, const struct rm_part *p)
{
	struct sink *s = arg;

	if (s->n == s->fail_at) {
		s->fail_at = (size_t)-1;
		return RM_EIO;
	}
	if (s->n < 16)
		s->got[s->n] = *p;
	s->n++;
	return RM_OK;
}

static int drop_all(void *arg, const struct rm_part *p)
{
	(void)arg;
	(void)p;
	return RM_OK;
}

static void test_nothing_without_matches(void)
{
	struct col_merge *cm = NULL;
	struct rm_part p;

	CU_ASSERT_EQUAL_FATAL(col_merge_open(&cm), RM_OK);
	server_part(&p, 7, 301, 11, 10);
	CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 0);
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 0);
	CU_ASSERT_EQUAL(col_merge_held(cm), 0);
	col_merge_close(cm);
}

static void test_sums(void)
{
	struct col_merge *cm = open_with(&c1, 1);
	struct col_merge_stats st;
	struct sink s = { .fail_at = (size_t)-1 };
	struct rm_part p;

	server_part(&p, 7, 301, 11, 10);
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	server_part(&p, 7, 301, 11, 30);
	p.flags = RM_PF_RECV | RM_PF_IN_SEQ; /* closed by a recv: no sends */
	p.tx_bytes = 0;
	memset(&p.out, 0, sizeof(p.out));
	p.disk_write = 4096;
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	server_part(&p, 7, 301, 11, 5); /* earlier start, earlier end */
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	/* another thread, another socket, another window: records of their own */
	server_part(&p, 7, 302, 11, 1);
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	server_part(&p, 7, 301, 12, 2);
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	server_part(&p, 8, 301, 11, 3);
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	CU_ASSERT_EQUAL(col_merge_held(cm), 4);
	CU_ASSERT_EQUAL(col_merge_drain(cm, sink_emit, &s), RM_OK);
	CU_ASSERT_EQUAL_FATAL(s.n, 4);
	CU_ASSERT_EQUAL(col_merge_held(cm), 0);
	/* the first record: three parts summed, in the order they came */
	CU_ASSERT_EQUAL(s.got[0].seg_id, 1010);
	CU_ASSERT_EQUAL(s.got[0].win, 7);
	CU_ASSERT_EQUAL(s.got[0].tid, 301);
	CU_ASSERT_EQUAL(s.got[0].cpu_ns, 45);
	CU_ASSERT_EQUAL(s.got[0].runq_ns, 3);
	CU_ASSERT_EQUAL(s.got[0].rx_bytes, 300);
	CU_ASSERT_EQUAL(s.got[0].tx_bytes, 400);
	CU_ASSERT_EQUAL(s.got[0].disk_write, 4096);
	CU_ASSERT_EQUAL(s.got[0].start_ns, 5000);
	CU_ASSERT_EQUAL(s.got[0].end_ns, 30500);
	CU_ASSERT_EQUAL(s.got[0].flags, RM_PF_START | RM_PF_END | RM_PF_RECV);
	CU_ASSERT_EQUAL(s.got[0].in_seq_start | s.got[0].in_seq_end | s.got[0].out_seq_start |
				s.got[0].out_seq_end, 0);
	CU_ASSERT_EQUAL(s.got[0].in.cookie, 11);
	CU_ASSERT_EQUAL(s.got[0].out.cookie, 11);
	CU_ASSERT_EQUAL(s.got[1].tid, 302);
	CU_ASSERT_EQUAL(s.got[2].in.cookie, 12);
	CU_ASSERT_EQUAL(s.got[3].win, 8);
	CU_ASSERT_EQUAL(s.got[3].cpu_ns, 3);
	/* the first record sums two requests answered and a part closed by a recv; the others one each */
	CU_ASSERT_EQUAL(s.got[0].ends, 2);
	CU_ASSERT_EQUAL(s.got[1].ends, 1);
	col_merge_get_stats(cm, &st);
	CU_ASSERT_EQUAL(st.merged, 6);
	CU_ASSERT_EQUAL(st.records, 4);
	/* a later part of the same key opens a new record */
	server_part(&p, 7, 301, 11, 10);
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	CU_ASSERT_EQUAL(col_merge_held(cm), 1);
	col_merge_close(cm);
}

/* One unconnected UDP socket, datagrams from two senders: a record per sender. */
static void test_udp_senders(void)
{
	struct col_merge *cm = open_with(&c1, 1);
	struct sink s = { .fail_at = (size_t)-1 };
	struct rm_part p;

	server_part(&p, 7, 301, 11, 10);
	p.flags = RM_PF_START | RM_PF_END;
	tuple4(&p.in, 11, "0.0.0.0", 5432, "10.1.0.1", 40001);
	p.out = p.in;
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	tuple4(&p.in, 11, "0.0.0.0", 5432, "10.1.0.2", 40001);
	p.out = p.in;
	p.cpu_ns = 20;
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	tuple4(&p.in, 11, "0.0.0.0", 5432, "10.1.0.1", 40002);
	p.out = p.in;
	p.cpu_ns = 40;
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	tuple4(&p.in, 11, "0.0.0.0", 5432, "10.1.0.2", 40001);
	p.out = p.in;
	p.cpu_ns = 80;
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	CU_ASSERT_EQUAL(col_merge_drain(cm, sink_emit, &s), RM_OK);
	CU_ASSERT_EQUAL_FATAL(s.n, 3);
	CU_ASSERT_EQUAL(s.got[0].cpu_ns, 10);
	CU_ASSERT_EQUAL(s.got[0].in.rport, 40001);
	CU_ASSERT_EQUAL(s.got[1].cpu_ns, 100);
	CU_ASSERT_EQUAL(s.got[1].in.raddr[0], s.got[1].out.raddr[0]);
	CU_ASSERT_EQUAL(s.got[2].cpu_ns, 40);
	CU_ASSERT_EQUAL(s.got[2].in.rport, 40002);
	col_merge_close(cm);
}

static void test_which_parts(void)
{
	struct col_merge *cm = open_with(&c1, 1);
	struct rm_part p;

	/* the CE's own client, receiving the reply: the rule seen from the other end */
	server_part(&p, 7, 901, 5, 10);
	tuple4(&p.in, 5, "10.1.0.1", 40001, "10.0.0.2", 5432);
	p.out = p.in;
	CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 1);
	/* a client outside the prefix, or on another server port: pairing decides */
	server_part(&p, 7, 301, 11, 10);
	tuple4(&p.in, 11, "10.0.0.2", 5432, "10.2.0.1", 40001);
	p.out = p.in;
	CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 0);
	server_part(&p, 7, 301, 11, 10);
	p.in.lport = 5433;
	CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 0);
	/* decisions are per tuple, not per cookie: the same socket reading another
	 * local port (0 after a reset) is decided again */
	server_part(&p, 7, 301, 11, 10);
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	p.in.lport = 0;
	p.out.lport = 0;
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 0);
	CU_ASSERT_EQUAL_FATAL(col_merge_drain(cm, drop_all, NULL), RM_OK);
	/* the client as an IPv4-mapped IPv6 address */
	server_part(&p, 7, 301, 11, 10);
	p.in.family = RM_AF_INET6;
	memset(p.in.laddr, 0, sizeof(p.in.laddr));
	memset(p.in.raddr, 0, sizeof(p.in.raddr));
	inet_pton(AF_INET6, "::ffff:10.0.0.2", p.in.laddr);
	inet_pton(AF_INET6, "::ffff:10.1.200.9", p.in.raddr);
	p.out = p.in;
	CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 1);
	/* sends to a socket the rules do not decide (a back end): their bytes may be paired */
	server_part(&p, 7, 301, 11, 10);
	tuple4(&p.out, 50, "10.0.0.2", 50000, "10.0.0.3", 6379);
	CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 0);
	p.out_seq_end = p.out_seq_start; /* no bytes in the range */
	CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 1);
	p.flags &= ~(uint32_t)RM_PF_OUT_SEQ;
	p.out_seq_end = p.out_seq_start + 10;
	CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 1);
	/* chains, inherited segments, Xen: never */
	{
		static const uint32_t never[] = { RM_PF_CONT, RM_PF_ANCHOR, RM_PF_INHERIT, RM_PF_DOMAIN,
						  RM_PF_DRIVER };
		size_t i;

		for (i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
			server_part(&p, 7, 301, 11, 10);
			p.flags |= never[i];
			CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 0);
			CU_ASSERT_EQUAL(col_merge_add(cm, &p), 0);
		}
	}
	/* a continuation anchored in place (a reply's tail) is decided by its inbound socket */
	server_part(&p, 7, 301, 11, 10);
	p.flags |= RM_PF_CONT | RM_PF_ANCHOR;
	CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 1);
	/* unix sockets, no inbound socket */
	server_part(&p, 7, 301, 11, 10);
	p.in.family = RM_AF_UNIX;
	CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 0);
	memset(&p.in, 0, sizeof(p.in));
	CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 0);
	CU_ASSERT_EQUAL(col_merge_held(cm), 0);
	col_merge_close(cm);
}

static void test_staging(void)
{
	struct col_merge *cm = NULL;
	struct rm_match any[2] = { { 2, { 0 }, 0, 7000, 7010, 0, 65535 },
					  { 10, { 0 }, 0, 7000, 7010, 0, 65535 } };
	struct rm_part p;

	CU_ASSERT_EQUAL_FATAL(col_merge_open(&cm), RM_OK);
	server_part(&p, 7, 301, 11, 10);
	tuple4(&p.in, 11, "127.0.0.1", 40001, "127.0.0.1", 7003); /* a client of port 7003 */
	p.out = p.in;
	CU_ASSERT_EQUAL(col_merge_stage(cm, any, 2), RM_OK);
	CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 0); /* not in force before the sync */
	CU_ASSERT_EQUAL(col_merge_sync(cm), 1);
	CU_ASSERT_EQUAL(col_merge_nmatch(cm), 2);
	CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 1);
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1); /* (its decision is cached now) */
	CU_ASSERT_EQUAL(col_merge_stage(cm, any, 2), RM_OK);
	CU_ASSERT_EQUAL(col_merge_sync(cm), 0); /* the same set again */
	CU_ASSERT_EQUAL(col_merge_sync(cm), 0); /* nothing staged */
	CU_ASSERT_EQUAL(col_merge_stage(cm, any, COL_MERGE_MAX_MATCH + 1), RM_EINVAL);
	CU_ASSERT_EQUAL(col_merge_stage(cm, NULL, 1), RM_EINVAL);
	CU_ASSERT_EQUAL(col_merge_nmatch(cm), 2);
	/* the aggregator's rules went away: nothing merged from the sync on */
	CU_ASSERT_EQUAL(col_merge_stage(cm, NULL, 0), RM_OK);
	CU_ASSERT_EQUAL(col_merge_sync(cm), 1);
	CU_ASSERT_EQUAL(col_merge_eligible(cm, &p), 0);
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 0);
	/* and back: decided again, not a stale "no" */
	CU_ASSERT_EQUAL(col_merge_stage(cm, any, 2), RM_OK);
	CU_ASSERT_EQUAL(col_merge_sync(cm), 1);
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	CU_ASSERT_EQUAL(col_merge_held(cm), 1);
	col_merge_close(cm);
}

static void test_full_and_failing_emit(void)
{
	struct col_merge *cm = open_with(&c1, 1);
	struct col_merge_stats st;
	struct sink s = { .fail_at = 2 };
	struct rm_part p;
	uint64_t k;

	for (k = 0; k < COL_MERGE_SLOTS; k++) {
		server_part(&p, 7, 301, 100 + k, 1);
		CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	}
	server_part(&p, 7, 301, 99, 1); /* a new key: no slot */
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 0);
	server_part(&p, 7, 301, 100, 1); /* a key held: merged */
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	col_merge_get_stats(cm, &st);
	CU_ASSERT_EQUAL(st.full, 1);
	CU_ASSERT_EQUAL(st.merged, COL_MERGE_SLOTS + 1);
	/* the emitter fails at the third record: two handed over, the rest kept */
	CU_ASSERT_EQUAL(col_merge_drain(cm, sink_emit, &s), RM_EIO);
	CU_ASSERT_EQUAL(s.n, 2);
	CU_ASSERT_EQUAL(col_merge_held(cm), COL_MERGE_SLOTS - 2);
	/* the kept records are still found by key */
	server_part(&p, 7, 301, 102, 1);
	CU_ASSERT_EQUAL(col_merge_add(cm, &p), 1);
	CU_ASSERT_EQUAL(col_merge_held(cm), COL_MERGE_SLOTS - 2);
	CU_ASSERT_EQUAL(col_merge_drain(cm, sink_emit, &s), RM_OK);
	CU_ASSERT_EQUAL(s.n, COL_MERGE_SLOTS);
	CU_ASSERT_EQUAL(s.got[0].cpu_ns, 2); /* cookie 100: two parts */
	CU_ASSERT_EQUAL(s.got[2].in.cookie, 102);
	CU_ASSERT_EQUAL(s.got[2].cpu_ns, 2);
	col_merge_close(cm);
}

static CU_TestInfo cases[] = {
	{ "nothing is merged without matches", test_nothing_without_matches },
	{ "records sum the parts of a socket, thread and window", test_sums },
	{ "which parts are merged", test_which_parts },
	{ "an unconnected UDP socket's senders are records of their own", test_udp_senders },
	{ "matches are staged, then put in force", test_staging },
	{ "a full table and a failing emitter lose nothing", test_full_and_failing_emit },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_merge", cases)
