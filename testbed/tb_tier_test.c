/*
 * tb_tier_test.c - units of the two-tier service: the GET and FETCH lines,
 * the address-to-size map, replies built, checked, sent and received over a
 * real socket pair, and the front-end's LRU cache (order, byte bound, size
 * mismatch, replacement, and exact counters under concurrent use).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rm_err.h"
#include "rm_test.h"
#include "tb_cache.h"
#include "tb_tier.h"
#include "banned.h"

static void test_parse_valid(void)
{
	struct tb_tier_req r;
	const char *reason = NULL;
	const char *get = "GET c1 4294967295 1024 1000000";
	const char *fetch = "  FETCH\tce-2.x:y  0   1 \r";

	CU_ASSERT_EQUAL(tb_tier_parse(TB_CMD_GET, get, strlen(get), &r, &reason), RM_OK);
	CU_ASSERT_EQUAL(r.cmd, TB_CMD_GET);
	CU_ASSERT_STRING_EQUAL(r.ce, "c1");
	CU_ASSERT_EQUAL(r.addr, 4294967295u);
	CU_ASSERT_EQUAL(r.size_kb, 1024);
	CU_ASSERT_EQUAL(r.cpu_us, 1000000);
	CU_ASSERT_EQUAL(tb_tier_parse(TB_CMD_FETCH, fetch, strlen(fetch), &r, &reason), RM_OK);
	CU_ASSERT_EQUAL(r.cmd, TB_CMD_FETCH);
	CU_ASSERT_STRING_EQUAL(r.ce, "ce-2.x:y");
	CU_ASSERT_EQUAL(r.addr, 0);
	CU_ASSERT_EQUAL(r.size_kb, 1);
	CU_ASSERT_EQUAL(r.cpu_us, 0);
	/* not NUL-terminated: only len bytes count */
	CU_ASSERT_EQUAL(tb_tier_parse(TB_CMD_GET, "GET c 7 2 3XYZ", 11, &r, &reason), RM_OK);
	CU_ASSERT_EQUAL(r.cpu_us, 3);
}

static void test_parse_invalid(void)
{
	static const struct {
		enum tb_tier_cmd cmd;
		const char *line, *reason;
	} cases[] = {
		{ TB_CMD_GET, "", "empty request" },
		{ TB_CMD_GET, "FETCH c1 1 1", "unknown command" },
		{ TB_CMD_FETCH, "GET c1 1 1 1", "unknown command" },
		{ TB_CMD_GET, "get c1 1 1 1", "unknown command" },
		{ TB_CMD_GET, "GET", "missing ce" },
		{ TB_CMD_GET, "GET __x 1 1 1", "reserved ce name" },
		{ TB_CMD_GET, "GET c/1 1 1 1", "bad character in ce name" },
		{ TB_CMD_GET, "GET c1", "missing addr" },
		{ TB_CMD_GET, "GET c1 x 1 1", "bad addr" },
		{ TB_CMD_GET, "GET c1 4294967296 1 1", "addr out of range" },
		{ TB_CMD_GET, "GET c1 5", "missing size_kb" },
		{ TB_CMD_GET, "GET c1 5 0 1", "size_kb out of range" },
		{ TB_CMD_GET, "GET c1 5 1025 1", "size_kb out of range" },
		{ TB_CMD_GET, "GET c1 5 -1 1", "bad size_kb" },
		{ TB_CMD_GET, "GET c1 5 1", "missing cpu_us" },
		{ TB_CMD_GET, "GET c1 5 1 1000001", "cpu_us too large" },
		{ TB_CMD_GET, "GET c1 5 1 1e3", "bad cpu_us" },
		{ TB_CMD_GET, "GET c1 5 1 1 x", "trailing garbage" },
		{ TB_CMD_FETCH, "FETCH c1 5 1 1", "trailing garbage" },
		{ TB_CMD_GET, "STORE c1 1 1", "unknown command" },
		{ TB_CMD_FETCH, "PUT c1 1 1 1", "unknown command" },
		{ TB_CMD_PUT, "PUT c1 5 1", "missing cpu_us" },
		{ TB_CMD_STORE, "STORE c1 5 1 1", "trailing garbage" },
		{ TB_CMD_GET, "GET c1 5 1 1\r\r", "control character in request" },
	};
	struct tb_tier_req r;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *reason = NULL;
		int rv = tb_tier_parse(cases[i].cmd, cases[i].line, strlen(cases[i].line), &r, &reason);

		CU_ASSERT_EQUAL(rv, RM_EPROTO);
		CU_ASSERT_PTR_NOT_NULL(reason);
		if (reason && strcmp(reason, cases[i].reason) != 0) {
			fprintf(stderr, "'%s': got '%s', want '%s'\n", cases[i].line, reason, cases[i].reason);
			CU_FAIL("wrong reason");
		}
	}
	CU_ASSERT_EQUAL(tb_tier_parse(TB_CMD_GET, NULL, 0, &r, NULL), RM_EINVAL);
	CU_ASSERT_EQUAL(tb_tier_parse((enum tb_tier_cmd)7, "GET c 1 1 1", 11, &r, NULL), RM_EINVAL);
}

static void test_format_roundtrip(void)
{
	struct tb_tier_req in, out;
	char buf[TB_LINE_MAX];
	size_t n;

	memset(&in, 0, sizeof(in));
	in.cmd = TB_CMD_GET;
	snprintf(in.ce, sizeof(in.ce), "c3");
	in.addr = 3000123;
	in.size_kb = 16;
	in.cpu_us = 2500;
	n = tb_tier_format(buf, sizeof(buf), &in);
	CU_ASSERT_EQUAL(n, strlen("GET c3 3000123 16 2500\n"));
	CU_ASSERT_NSTRING_EQUAL(buf, "GET c3 3000123 16 2500\n", n);
	CU_ASSERT_EQUAL(tb_tier_parse(TB_CMD_GET, buf, n - 1, &out, NULL), RM_OK);
	CU_ASSERT_EQUAL(memcmp(&in, &out, sizeof(in)), 0);
	in.cmd = TB_CMD_PUT;
	n = tb_tier_format(buf, sizeof(buf), &in);
	CU_ASSERT_NSTRING_EQUAL(buf, "PUT c3 3000123 16 2500\n", n);
	CU_ASSERT_EQUAL(tb_tier_parse(TB_CMD_GET, buf, n - 1, &out, NULL), RM_OK);
	CU_ASSERT_EQUAL(memcmp(&in, &out, sizeof(in)), 0);
	in.cmd = TB_CMD_STORE;
	in.cpu_us = 0;
	n = tb_tier_format(buf, sizeof(buf), &in);
	CU_ASSERT_NSTRING_EQUAL(buf, "STORE c3 3000123 16\n", n);
	CU_ASSERT_EQUAL(tb_tier_parse(TB_CMD_FETCH, buf, n - 1, &out, NULL), RM_OK);
	CU_ASSERT_EQUAL(out.cmd, TB_CMD_STORE);
	in.cmd = TB_CMD_FETCH;
	n = tb_tier_format(buf, sizeof(buf), &in);
	CU_ASSERT_NSTRING_EQUAL(buf, "FETCH c3 3000123 16\n", n);
	CU_ASSERT_EQUAL(tb_tier_format(buf, 5, &in), 0);     /* does not fit */
	in.size_kb = 0;
	CU_ASSERT_EQUAL(tb_tier_format(buf, sizeof(buf), &in), 0); /* invalid */
	in.size_kb = 1;
	snprintf(in.ce, sizeof(in.ce), "__r");
	CU_ASSERT_EQUAL(tb_tier_format(buf, sizeof(buf), &in), 0);
}

static void test_size_of(void)
{
	unsigned seen[16] = { 0 };
	uint32_t a;
	int all = 1, i;

	for (a = 0; a < 16000; a++) {
		uint32_t s = tb_tier_size_of(a, 1, 16);

		CU_ASSERT_FATAL(s >= 1 && s <= 16);
		CU_ASSERT_EQUAL(s, tb_tier_size_of(a, 1, 16)); /* a function of the address */
		seen[s - 1]++;
	}
	/* every size, roughly uniformly (1000 expected each) */
	for (i = 0; i < 16; i++)
		if (seen[i] < 800 || seen[i] > 1200)
			all = 0;
	CU_ASSERT(all);
	CU_ASSERT_EQUAL(tb_tier_size_of(99, 7, 7), 7);
	CU_ASSERT_EQUAL(tb_tier_size_of(99, 7, 3), 7);
}

static void test_build_and_check(void)
{
	char *buf = malloc(4096);
	size_t n;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	n = tb_tier_build_reply(buf, 4096, 27, 4);
	CU_ASSERT_EQUAL(n, 4096);
	CU_ASSERT_NSTRING_EQUAL(buf, "OK 4096\n", 8);
	CU_ASSERT_EQUAL(buf[8], 'b'); /* 27 % 26 == 1 */
	CU_ASSERT_EQUAL(buf[4094], 'b');
	CU_ASSERT_EQUAL(buf[4095], '\n');
	CU_ASSERT_EQUAL(tb_tier_check_reply(buf, n, 27, 4), RM_OK);
	CU_ASSERT_EQUAL(tb_tier_check_reply(buf, n, 28, 4), RM_EPROTO);  /* other address's data */
	CU_ASSERT_EQUAL(tb_tier_check_reply(buf, n, 27, 3), RM_EPROTO);  /* other size */
	CU_ASSERT_EQUAL(tb_tier_check_reply(buf, n - 1, 27, 4), RM_EPROTO);
	buf[100] = 'x';
	CU_ASSERT_EQUAL(tb_tier_check_reply(buf, n, 27, 4), RM_EPROTO);
	CU_ASSERT_EQUAL(tb_tier_build_reply(buf, 4095, 27, 4), 0);       /* too small */
	CU_ASSERT_EQUAL(tb_tier_build_reply(buf, 4096, 27, 0), 0);
	CU_ASSERT_EQUAL(tb_tier_build_reply(buf, 4096, 27, 1025), 0);
	free(buf);
}

struct writer {
	int fd;
	const char *data;
	size_t len;
	int close_after;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	size_t off = 0;

	/* in small pieces, so the reader sees partial replies */
	while (off < w->len) {
		size_t k = w->len - off < 333 ? w->len - off : 333;
		ssize_t n = send(w->fd, w->data + off, k, MSG_NOSIGNAL);

		if (n <= 0)
			break;
		off += (size_t)n;
	}
	if (w->close_after)
		shutdown(w->fd, SHUT_WR);
	return NULL;
}

/* Sends data (then closes the write side if close_after) and receives one reply. */
static int roundtrip(const char *data, size_t len, int close_after, uint32_t addr, uint32_t size_kb,
		     char *buf, size_t cap, size_t *got, char *err, size_t errcap, uint64_t *rx)
{
	struct writer w;
	pthread_t th;
	int sv[2], rv;

	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	w.fd = sv[0];
	w.data = data;
	w.len = len;
	w.close_after = close_after;
	CU_ASSERT_FATAL(pthread_create(&th, NULL, writer_main, &w) == 0);
	rv = tb_tier_recv_reply(sv[1], addr, size_kb, buf, cap, got, err, errcap, rx);
	pthread_join(th, NULL);
	close(sv[0]);
	close(sv[1]);
	return rv;
}

static void test_send_and_recv(void)
{
	char *reply = malloc(8192), *buf = malloc(8192);
	char two[8192 + 64], err[64];
	size_t n, got = 0;
	uint64_t rx = 0, sent = 0, first = 0;
	int sv[2];

	CU_ASSERT_PTR_NOT_NULL_FATAL(reply);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	n = tb_tier_build_reply(reply, 8192, 5, 8);
	/* a complete reply, in pieces */
	CU_ASSERT_EQUAL(roundtrip(reply, n, 0, 5, 8, buf, 8192, &got, err, sizeof(err), &rx), RM_OK);
	CU_ASSERT_EQUAL(got, 8192);
	CU_ASSERT_EQUAL(rx, 8192);
	CU_ASSERT_EQUAL(memcmp(buf, reply, n), 0);
	/* never reads past the reply: the next bytes stay in the socket */
	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	memcpy(two, reply, n);
	memcpy(two + n, "NEXT", 4);
	CU_ASSERT_EQUAL(tb_tier_send(sv[0], two, n + 4, &sent, &first), RM_OK);
	CU_ASSERT_EQUAL(sent, n + 4);
	CU_ASSERT(first > 0);
	CU_ASSERT_EQUAL(tb_tier_recv_reply(sv[1], 5, 8, buf, 8192, &got, NULL, 0, NULL), RM_OK);
	CU_ASSERT_EQUAL(recv(sv[1], two, sizeof(two), 0), 4);
	close(sv[0]);
	close(sv[1]);
	/* an error line */
	rx = 0;
	CU_ASSERT_EQUAL(roundtrip("ERR no such thing\n", 18, 0, 5, 8, buf, 8192, &got, err, sizeof(err), &rx),
			RM_ENOENT);
	CU_ASSERT_STRING_EQUAL(err, "no such thing");
	CU_ASSERT_EQUAL(rx, 18);
	/* truncated: the peer closes early */
	CU_ASSERT_EQUAL(roundtrip(reply, 5000, 1, 5, 8, buf, 8192, &got, err, sizeof(err), NULL), RM_ECLOSED);
	/* wrong content, wrong header */
	CU_ASSERT_EQUAL(roundtrip(reply, n, 0, 6, 8, buf, 8192, &got, err, sizeof(err), NULL), RM_EPROTO);
	CU_ASSERT_EQUAL(roundtrip("HELLO", 5, 1, 5, 8, buf, 8192, &got, err, sizeof(err), NULL), RM_EPROTO);
	/* bad arguments */
	CU_ASSERT_EQUAL(tb_tier_recv_reply(0, 5, 8, buf, 100, &got, NULL, 0, NULL), RM_EINVAL);
	CU_ASSERT_EQUAL(tb_tier_recv_reply(0, 5, 0, buf, 8192, &got, NULL, 0, NULL), RM_EINVAL);
	free(reply);
	free(buf);
}

/* An object of k KB for address a, as the back-end would send it. */
static size_t obj(char *buf, uint32_t a, uint32_t k)
{
	return tb_tier_build_reply(buf, 1024 * 1024, a, k);
}

static void test_cache_lru(void)
{
	struct tb_cache c;
	struct tb_cache_stats st;
	char *o = malloc(1024 * 1024), *out = malloc(1024 * 1024);
	size_t len = 0;
	uint32_t a;

	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	CU_ASSERT_EQUAL(tb_cache_init(&c, 0), RM_EINVAL);
	CU_ASSERT_EQUAL_FATAL(tb_cache_init(&c, 10 * 1024), RM_OK);
	/* 1..4 of 2 KB each: 8 KB used */
	for (a = 1; a <= 4; a++)
		CU_ASSERT_EQUAL(tb_cache_put(&c, a, 2, o, obj(o, a, 2)), RM_OK);
	CU_ASSERT_EQUAL(tb_cache_get(&c, 1, 2, out, 1024 * 1024, &len), RM_OK); /* 1 is now the newest */
	CU_ASSERT_EQUAL(len, 2048);
	CU_ASSERT_EQUAL(tb_tier_check_reply(out, len, 1, 2), RM_OK);
	/* 5 fills the cache exactly; 6 evicts the least recently used: 2 */
	CU_ASSERT_EQUAL(tb_cache_put(&c, 5, 2, o, obj(o, 5, 2)), RM_OK);
	tb_cache_stats(&c, &st);
	CU_ASSERT_EQUAL(st.used_bytes, 10 * 1024);
	CU_ASSERT_EQUAL(st.evictions, 0);
	CU_ASSERT_EQUAL(tb_cache_put(&c, 6, 2, o, obj(o, 6, 2)), RM_OK);
	CU_ASSERT_EQUAL(tb_cache_get(&c, 2, 2, out, 1024 * 1024, &len), RM_ENOENT);
	for (a = 1; a <= 6; a++) {
		if (a == 2)
			continue;
		CU_ASSERT_EQUAL(tb_cache_get(&c, a, 2, out, 1024 * 1024, &len), RM_OK);
		CU_ASSERT_EQUAL(tb_tier_check_reply(out, len, a, 2), RM_OK);
	}
	/* now oldest to newest: 1 3 4 5 6. A size mismatch is a miss... */
	CU_ASSERT_EQUAL(tb_cache_get(&c, 3, 1, out, 1024 * 1024, &len), RM_ENOENT);
	/* ...and the request's object replaces the entry */
	CU_ASSERT_EQUAL(tb_cache_put(&c, 3, 1, o, obj(o, 3, 1)), RM_OK);
	tb_cache_stats(&c, &st);
	CU_ASSERT_EQUAL(st.used_bytes, 9 * 1024);
	CU_ASSERT_EQUAL(st.nents, 5);
	CU_ASSERT_EQUAL(tb_cache_get(&c, 3, 1, out, 1024 * 1024, &len), RM_OK);
	CU_ASSERT_EQUAL(len, 1024);
	/* oldest to newest: 1 4 5 6 3 (9 KB). A 5 KB object evicts the oldest
	 * until it fits: 1 and 4. */
	CU_ASSERT_EQUAL(tb_cache_put(&c, 7, 5, o, obj(o, 7, 5)), RM_OK);
	CU_ASSERT_EQUAL(tb_cache_get(&c, 1, 2, out, 1024 * 1024, &len), RM_ENOENT);
	CU_ASSERT_EQUAL(tb_cache_get(&c, 4, 2, out, 1024 * 1024, &len), RM_ENOENT);
	CU_ASSERT_EQUAL(tb_cache_get(&c, 5, 2, out, 1024 * 1024, &len), RM_OK);
	CU_ASSERT_EQUAL(tb_cache_get(&c, 7, 5, out, 1024 * 1024, &len), RM_OK);
	CU_ASSERT_EQUAL(tb_tier_check_reply(out, len, 7, 5), RM_OK);
	CU_ASSERT_EQUAL(tb_cache_get(&c, 3, 1, out, 1024 * 1024, &len), RM_OK);
	CU_ASSERT_EQUAL(tb_cache_get(&c, 6, 2, out, 1024 * 1024, &len), RM_OK);
	tb_cache_stats(&c, &st);
	CU_ASSERT_EQUAL(st.used_bytes, 10 * 1024);
	CU_ASSERT_EQUAL(st.nents, 4);
	CU_ASSERT_EQUAL(st.evictions, 3);  /* 2, then 1 and 4 */
	CU_ASSERT_EQUAL(st.inserts, 8);    /* 1..6, 3 again, 7 */
	CU_ASSERT_EQUAL(st.hits, 11);
	CU_ASSERT_EQUAL(st.misses, 4);
	/* larger than the whole cache: not stored, nothing evicted */
	CU_ASSERT_EQUAL(tb_cache_put(&c, 8, 11, o, obj(o, 8, 11)), RM_EFULL);
	tb_cache_stats(&c, &st);
	CU_ASSERT_EQUAL(st.nents, 4);
	/* a buffer too small for the entry: refused, not counted */
	CU_ASSERT_EQUAL(tb_cache_get(&c, 7, 5, out, 100, &len), RM_EINVAL);
	CU_ASSERT_EQUAL(tb_cache_put(&c, 9, 1, NULL, 10), RM_EINVAL);
	CU_ASSERT_EQUAL(tb_cache_put(&c, 9, 1, o, 0), RM_EINVAL);
	tb_cache_stats(&c, &st);
	CU_ASSERT_EQUAL(st.hits + st.misses, 15);
	tb_cache_release(&c);
	tb_cache_release(&c); /* twice is harmless */
	tb_cache_release(NULL);
	free(o);
	free(out);
}

#define CC_THREADS 4
#define CC_OPS 20000

struct cc_arg {
	struct tb_cache *c;
	unsigned seed;
	uint64_t hits, misses, bad;
};

static void *cc_main(void *p)
{
	struct cc_arg *a = p;
	char *buf = malloc(8192);
	int i;

	if (!buf)
		return NULL;
	for (i = 0; i < CC_OPS; i++) {
		uint32_t addr = (uint32_t)(rand_r(&a->seed) % 64);
		uint32_t k = tb_tier_size_of(addr, 1, 4);
		size_t len;

		if (tb_cache_get(a->c, addr, k, buf, 8192, &len) == RM_OK) {
			a->hits++;
			if (tb_tier_check_reply(buf, len, addr, k) != RM_OK)
				a->bad++;
		} else {
			a->misses++;
			len = tb_tier_build_reply(buf, 8192, addr, k);
			if (tb_cache_put(a->c, addr, k, buf, len) != RM_OK)
				a->bad++;
		}
	}
	free(buf);
	return NULL;
}

static void test_cache_concurrent(void)
{
	struct tb_cache c;
	struct tb_cache_stats st;
	struct cc_arg args[CC_THREADS];
	pthread_t th[CC_THREADS];
	uint64_t hits = 0, misses = 0, bad = 0;
	int i;

	CU_ASSERT_EQUAL_FATAL(tb_cache_init(&c, 48 * 1024), RM_OK);
	for (i = 0; i < CC_THREADS; i++) {
		args[i] = (struct cc_arg){ .c = &c, .seed = (unsigned)i + 1 };
		CU_ASSERT_FATAL(pthread_create(&th[i], NULL, cc_main, &args[i]) == 0);
	}
	for (i = 0; i < CC_THREADS; i++) {
		pthread_join(th[i], NULL);
		hits += args[i].hits;
		misses += args[i].misses;
		bad += args[i].bad;
	}
	tb_cache_stats(&c, &st);
	CU_ASSERT_EQUAL(bad, 0);                    /* every hit held the right data */
	CU_ASSERT_EQUAL(st.hits, hits);             /* counters exact */
	CU_ASSERT_EQUAL(st.misses, misses);
	CU_ASSERT_EQUAL(hits + misses, (uint64_t)CC_THREADS * CC_OPS);
	CU_ASSERT_EQUAL(st.inserts, misses);
	CU_ASSERT(st.used_bytes <= st.cap_bytes);
	CU_ASSERT(hits > 0 && misses > 0);          /* 64 objects of ~2.5 KB in 48 KB */
	/* every insert is still there, was evicted, or was replaced by a racing insert */
	CU_ASSERT(st.inserts >= st.evictions + st.nents);
	tb_cache_release(&c);
}

static CU_TestInfo cases[] = {
	{ "valid get and fetch lines parse", test_parse_valid },
	{ "invalid lines are rejected with a reason", test_parse_invalid },
	{ "lines format and parse back", test_format_roundtrip },
	{ "object size is a fixed, spread function of the address", test_size_of },
	{ "replies are built and checked byte by byte", test_build_and_check },
	{ "replies are sent and received whole, errors reported", test_send_and_recv },
	{ "cache keeps the most recently used within its bytes", test_cache_lru },
	{ "cache counters and contents are exact under concurrent use", test_cache_concurrent },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("tb_tier", cases)
