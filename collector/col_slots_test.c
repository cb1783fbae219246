/*
 * col_slots_test.c - the throttled-CE table both throttle mechanisms share:
 * the command checks (a table of commands, among them what admission
 * throttling used to let through: bad CE names, reversed or too large port
 * ranges), slots and their match entries as written to a recording match
 * array, replacement, release, running out of slots and entries, a failed
 * write undone, and expiry.
 */
#include <errno.h>
#include <string.h>

#include "col_slots.h"
#include "rm_err.h"
#include "rm_test.h"
#include "banned.h"

#define NOW 1700000000000000000ll

/* The match array as the kernel would see it, and a write to fail. */
static struct thr_match arr[THR_MAX_MATCHES];
static int puts_done, fail_at = -1;

static int put_rec(void *arg, uint32_t k, const struct thr_match *m)
{
	(void)arg;
	CU_ASSERT_FATAL(k < THR_MAX_MATCHES);
	if (puts_done++ == fail_at)
		return -EPERM;
	arr[k] = *m;
	return 0;
}

static void reset(struct col_slots *t)
{
	memset(arr, 0, sizeof(arr));
	puts_done = 0;
	fail_at = -1;
	col_slots_init(t, put_rec, NULL);
}

/* Entries of the array that lead to slot si. */
static size_t entries_of(uint32_t si)
{
	size_t k, n = 0;

	for (k = 0; k < THR_MAX_MATCHES; k++)
		n += arr[k].slot == si;
	return n;
}

static const struct rm_match m_ok = { 2, { 10, 1 }, 16, 0, 65535, 5432, 5432 };

struct check_case {
	const char *name;
	const char *ce, *resource;
	uint32_t cap;
	int64_t expires;
	struct rm_match m;
	size_t nmatch;
	int want;
	const char *err; /* in the reason */
};

static void test_check(void)
{
	static const struct check_case cases[] = {
		{ "good", "c2", "cpu", 300, NOW + 1, { 2, { 10 }, 8, 0, 65535, 5432, 5432 }, 1, RM_OK, "" },
		{ "release needs no match", "c2", "cpu", 0, NOW + 1, { 0 }, 0, RM_OK, "" },
		{ "expired", "c2", "cpu", 300, NOW, { 2, { 10 }, 8, 0, 65535, 0, 65535 }, 1, RM_ETIMEDOUT,
		  "already expired" },
		{ "release expired", "c2", "cpu", 0, NOW - 1, { 0 }, 0, RM_ETIMEDOUT, "already expired" },
		{ "resource", "c2", "disk_read", 300, NOW + 1, { 2, { 10 }, 8, 0, 65535, 0, 65535 }, 1, RM_EINVAL,
		  "only cpu" },
		{ "no resource", "c2", NULL, 300, NOW + 1, { 2, { 10 }, 8, 0, 65535, 0, 65535 }, 1, RM_EINVAL,
		  "only cpu" },
		{ "cap 1001", "c2", "cpu", 1001, NOW + 1, { 2, { 10 }, 8, 0, 65535, 0, 65535 }, 1, RM_EINVAL,
		  "at most 1000" },
		{ "no match", "c2", "cpu", 300, NOW + 1, { 0 }, 0, RM_EINVAL, "matches" },
		{ "too many matches", "c2", "cpu", 300, NOW + 1, { 2, { 10 }, 8, 0, 65535, 0, 65535 },
		  COL_THROTTLE_MAX_MATCHES + 1, RM_EINVAL, "matches" },
		{ "prefix 33", "c2", "cpu", 300, NOW + 1, { 2, { 10 }, 33, 0, 65535, 0, 65535 }, 1, RM_EINVAL,
		  "prefix" },
		{ "family 3", "c2", "cpu", 300, NOW + 1, { 3, { 10 }, 8, 0, 65535, 0, 65535 }, 1, RM_EINVAL,
		  "family" },
		/* what admission throttling (col_tc.c) used to accept */
		{ "CE name with a slash", "../etc", "cpu", 300, NOW + 1, { 2, { 10 }, 8, 0, 65535, 0, 65535 }, 1,
		  RM_EINVAL, "bad CE name" },
		{ "CE name with a space", "c 2", "cpu", 300, NOW + 1, { 2, { 10 }, 8, 0, 65535, 0, 65535 }, 1,
		  RM_EINVAL, "bad CE name" },
		{ "CE name with a quote", "c'2", "cpu", 300, NOW + 1, { 2, { 10 }, 8, 0, 65535, 0, 65535 }, 1,
		  RM_EINVAL, "bad CE name" },
		{ "empty CE name", "", "cpu", 300, NOW + 1, { 2, { 10 }, 8, 0, 65535, 0, 65535 }, 1, RM_EINVAL,
		  "bad CE name" },
		{ "no CE name", NULL, "cpu", 0, NOW + 1, { 0 }, 0, RM_EINVAL, "bad CE name" },
		{ "CE name of 64 bytes", "c234567890123456789012345678901234567890123456789012345678901234", "cpu",
		  300, NOW + 1, { 2, { 10 }, 8, 0, 65535, 0, 65535 }, 1, RM_EINVAL, "bad CE name" },
		{ "client ports reversed", "c2", "cpu", 300, NOW + 1, { 2, { 10 }, 8, 40000, 30000, 0, 65535 }, 1,
		  RM_EINVAL, "port range" },
		{ "server ports reversed", "c2", "cpu", 300, NOW + 1, { 2, { 10 }, 8, 0, 65535, 7001, 7000 }, 1,
		  RM_EINVAL, "port range" },
		{ "server port 65536", "c2", "cpu", 300, NOW + 1, { 2, { 10 }, 8, 0, 65535, 0, 65536 }, 1, RM_EINVAL,
		  "port range" },
		{ "client port 70000", "c2", "cpu", 300, NOW + 1, { 2, { 10 }, 8, 70000, 70000, 0, 65535 }, 1,
		  RM_EINVAL, "port range" },
	};
	struct rm_match mm[COL_THROTTLE_MAX_MATCHES + 1];
	size_t i, k;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct check_case *x = &cases[i];
		struct col_throttle_cmd c = { .id = 7, .ce = x->ce, .resource = x->resource, .cap_permille = x->cap,
					      .expires_unix_ns = x->expires, .match = mm, .nmatch = x->nmatch };
		char err[256] = "";
		int got;

		for (k = 0; k < sizeof(mm) / sizeof(mm[0]); k++)
			mm[k] = x->m;
		got = col_slots_check(&c, NOW, err, sizeof(err));
		if (got != x->want || !strstr(err, x->err))
			fprintf(stderr, "%s: got %d '%s', want %d '%s'\n", x->name, got, err, x->want, x->err);
		CU_ASSERT_EQUAL(got, x->want);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, x->err));
	}
}

static struct col_throttle_cmd cmd(const char *ce, uint64_t id, const struct rm_match *m, size_t n)
{
	struct col_throttle_cmd c = { .id = id, .ce = ce, .resource = "cpu", .cap_permille = 300,
				      .expires_unix_ns = NOW + (int64_t)id, .match = m, .nmatch = n };
	return c;
}

static void test_set_replace_clear(void)
{
	struct col_slots t;
	struct rm_match two[2] = { m_ok, m_ok };
	struct col_throttle_cmd c;
	char err[256] = "";
	uint32_t si;

	reset(&t);
	two[1].addr[1] = 2;
	CU_ASSERT_EQUAL(col_slots_find(&t, "c2"), 0);
	si = col_slots_unused(&t, NULL, 0);
	CU_ASSERT_EQUAL(si, 1); /* slot 0 is the kernel's "none" */
	c = cmd("c2", 1, two, 2);
	CU_ASSERT_EQUAL_FATAL(col_slots_set(&t, si, &c, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(col_slots_find(&t, "c2"), si);
	CU_ASSERT_EQUAL(t.slot[si].nmatch, 2);
	CU_ASSERT_EQUAL(t.slot[si].id, 1);
	CU_ASSERT_EQUAL(entries_of(si), 2);
	/* the kernel's entry: masked, family, ports */
	CU_ASSERT_EQUAL(arr[t.slot[si].match_idx[0]].family, 2);
	CU_ASSERT_EQUAL(((uint8_t *)arr[t.slot[si].match_idx[0]].addr)[1], 1);
	CU_ASSERT_EQUAL(((uint8_t *)arr[t.slot[si].match_idx[0]].mask)[1], 0xff);
	CU_ASSERT_EQUAL(((uint8_t *)arr[t.slot[si].match_idx[0]].mask)[2], 0);
	CU_ASSERT_EQUAL(arr[t.slot[si].match_idx[1]].sport_lo, 5432);
	/* a replacement: one match now, the old entries emptied */
	c = cmd("c2", 2, &m_ok, 1);
	CU_ASSERT_EQUAL_FATAL(col_slots_set(&t, si, &c, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(entries_of(si), 1);
	CU_ASSERT_EQUAL(t.slot[si].id, 2);
	CU_ASSERT_EQUAL(col_slots_unused(&t, NULL, 0), 2);
	/* release */
	col_slots_clear(&t, si);
	CU_ASSERT_EQUAL(entries_of(si), 0);
	CU_ASSERT_EQUAL(col_slots_find(&t, "c2"), 0);
	CU_ASSERT_EQUAL(col_slots_unused(&t, NULL, 0), 1);
	col_slots_clear(&t, si); /* again: nothing */
	col_slots_clear(&t, 0);
}

static void test_full(void)
{
	struct col_slots t;
	struct rm_match eight[COL_THROTTLE_MAX_MATCHES];
	struct col_throttle_cmd c;
	char err[256] = "", ce[8];
	uint32_t si, i;

	reset(&t);
	for (i = 0; i < COL_THROTTLE_MAX_MATCHES; i++)
		eight[i] = m_ok;
	/* THR_MAX_MATCHES / 8 CEs take every entry */
	for (i = 0; i < THR_MAX_MATCHES / COL_THROTTLE_MAX_MATCHES; i++) {
		snprintf(ce, sizeof(ce), "c%u", i);
		c = cmd(ce, i + 1, eight, COL_THROTTLE_MAX_MATCHES);
		CU_ASSERT_EQUAL_FATAL(col_slots_set(&t, col_slots_unused(&t, NULL, 0), &c, err, sizeof(err)), RM_OK);
	}
	c = cmd("more", 99, eight, 1);
	si = col_slots_unused(&t, NULL, 0);
	CU_ASSERT_EQUAL(col_slots_set(&t, si, &c, err, sizeof(err)), RM_EFULL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no room"));
	CU_ASSERT_EQUAL(col_slots_find(&t, "more"), 0);
	CU_ASSERT_EQUAL(col_slots_unused(&t, NULL, 0), si); /* as it was */
	/* every slot in use */
	reset(&t);
	for (i = 1; i < THR_MAX_SLOTS; i++) {
		snprintf(ce, sizeof(ce), "c%u", i);
		c = cmd(ce, i, &m_ok, 1);
		CU_ASSERT_EQUAL_FATAL(col_slots_set(&t, col_slots_unused(&t, NULL, 0), &c, err, sizeof(err)), RM_OK);
	}
	CU_ASSERT_EQUAL(col_slots_unused(&t, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "CEs already throttled"));
	CU_ASSERT_EQUAL(col_slots_set(&t, 0, &c, err, sizeof(err)), RM_EINVAL);
}

/* A failed write leaves the slot and the array as they were. */
static void test_failed_write(void)
{
	struct col_slots t;
	struct rm_match three[3] = { m_ok, m_ok, m_ok };
	struct thr_match before[THR_MAX_MATCHES];
	struct col_throttle_cmd c;
	char err[256] = "";
	size_t k, used = 0;

	reset(&t);
	c = cmd("c2", 1, &m_ok, 1);
	CU_ASSERT_EQUAL_FATAL(col_slots_set(&t, 1, &c, err, sizeof(err)), RM_OK);
	memcpy(before, arr, sizeof(arr));
	fail_at = puts_done + 2; /* the third write of the replacement */
	c = cmd("c2", 2, three, 3);
	CU_ASSERT_EQUAL(col_slots_set(&t, 1, &c, err, sizeof(err)), RM_EBPF);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "match table"));
	CU_ASSERT_EQUAL(memcmp(arr, before, sizeof(arr)), 0);
	CU_ASSERT_EQUAL(t.slot[1].id, 1);
	CU_ASSERT_EQUAL(t.slot[1].nmatch, 1);
	for (k = 0; k < THR_MAX_MATCHES; k++)
		used += t.match_used[k];
	CU_ASSERT_EQUAL(used, 1);
}

static void test_expiry(void)
{
	struct col_slots t;
	struct col_throttle_cmd c;
	char err[256] = "";

	reset(&t);
	c = cmd("c2", 5, &m_ok, 1); /* expires NOW + 5 */
	CU_ASSERT_EQUAL_FATAL(col_slots_set(&t, 1, &c, err, sizeof(err)), RM_OK);
	c = cmd("c3", 9, &m_ok, 1);
	CU_ASSERT_EQUAL_FATAL(col_slots_set(&t, 2, &c, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(col_slots_expired(&t, NOW + 4), 0);
	CU_ASSERT_EQUAL(col_slots_expired(&t, NOW + 5), 1);
	CU_ASSERT_EQUAL(col_slots_expired(&t, NOW + 9), 1);
	col_slots_clear(&t, 1);
	CU_ASSERT_EQUAL(col_slots_expired(&t, NOW + 9), 2);
	col_slots_clear(&t, 2);
	CU_ASSERT_EQUAL(col_slots_expired(&t, INT64_MAX), 0);
}

static void test_walk(void)
{
	struct col_slots t;
	struct col_throttle_cmd c;
	char err[256] = "";
	uint32_t si, seen = 0, n = 0;

	reset(&t);
	CU_ASSERT_EQUAL(col_slots_next(&t, 0), 0);
	c = cmd("c3", 1, &m_ok, 1);
	CU_ASSERT_EQUAL_FATAL(col_slots_set(&t, 3, &c, err, sizeof(err)), RM_OK);
	c = cmd("c9", 2, &m_ok, 1);
	CU_ASSERT_EQUAL_FATAL(col_slots_set(&t, THR_MAX_SLOTS - 1, &c, err, sizeof(err)), RM_OK);
	for (si = 0; (si = col_slots_next(&t, si)) != 0; n++)
		seen |= 1u << si;
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT_EQUAL(seen, (1u << 3) | (1u << (THR_MAX_SLOTS - 1)));
}

/* A mechanism's release as col_slots_release_all sees it: records the slot, frees it. */
static uint32_t released_mask;

static void release_rec(void *arg, uint32_t si)
{
	released_mask |= 1u << si;
	col_slots_clear(arg, si);
}

static void test_release_all(void)
{
	struct col_slots t;
	struct col_throttle_cmd c;
	char err[256] = "";

	reset(&t);
	released_mask = 0;
	CU_ASSERT_EQUAL(col_slots_release_all(&t, release_rec, &t), 0);
	c = cmd("c2", 1, &m_ok, 1);
	CU_ASSERT_EQUAL_FATAL(col_slots_set(&t, 2, &c, err, sizeof(err)), RM_OK);
	c = cmd("c5", 2, &m_ok, 1);
	CU_ASSERT_EQUAL_FATAL(col_slots_set(&t, 5, &c, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(col_slots_release_all(&t, release_rec, &t), 2);
	CU_ASSERT_EQUAL(released_mask, (1u << 2) | (1u << 5));
	CU_ASSERT_EQUAL(col_slots_next(&t, 0), 0);
	CU_ASSERT_EQUAL(entries_of(2) + entries_of(5), 0);
}

static CU_TestInfo cases[] = {
	{ "used slots walked in order", test_walk },
	{ "commands checked, the stricter rules for both", test_check },
	{ "set, replace and clear a slot's matches", test_set_replace_clear },
	{ "out of entries or slots", test_full },
	{ "a failed write is undone", test_failed_write },
	{ "expiry", test_expiry },
	{ "every used slot released on close", test_release_all },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_slots", cases)
