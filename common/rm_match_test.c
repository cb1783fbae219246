/*
 * rm_match_test.c - tests of the socket matcher: a table of sockets against
 * a table of matches (prefixes, port ranges, families, IPv4-mapped IPv6),
 * tuples matched from either end, checks of malformed matches, and masks.
 */
#include <arpa/inet.h>
#include <string.h>

#include "rm_err.h"
#include "rm_match.h"
#include "rm_test.h"
#include "banned.h"

/* A match from text: "10.1.0.0", 16, client ports, server ports. */
static struct rm_match mk(const char *ip, uint32_t prefix, uint32_t clo, uint32_t chi, uint32_t slo,
			  uint32_t shi)
{
	struct rm_match m = { .prefix = prefix, .cport_lo = clo, .cport_hi = chi, .sport_lo = slo, .sport_hi = shi };

	if (inet_pton(AF_INET, ip, m.addr) == 1)
		m.family = 2;
	else if (inet_pton(AF_INET6, ip, m.addr) == 1)
		m.family = 10;
	return m;
}

/* A 16-byte tuple address (as rametr.h carries it) and its family. */
static uint32_t tup_addr(const char *ip, uint8_t a[16])
{
	memset(a, 0, 16);
	if (inet_pton(AF_INET, ip, a) == 1)
		return 2;
	CU_ASSERT_EQUAL_FATAL(inet_pton(AF_INET6, ip, a), 1);
	return 10;
}

struct sock_case {
	const char *name;
	const char *raddr;
	uint32_t rport, lport;
	int want; /* rm_match_first's index, -1 for none */
};

static void test_sockets(void)
{
	struct rm_match m[4];
	static const struct sock_case cases[] = {
		{ "in the /16, server port 5432", "10.1.200.3", 40000, 5432, 0 },
		{ "in the /16, other server port", "10.1.200.3", 40000, 5433, -1 },
		{ "outside the /16", "10.2.0.1", 40000, 5432, -1 },
		{ "host /32, client port in range", "127.0.0.2", 40999, 80, 1 },
		{ "host /32, client port past range", "127.0.0.2", 41000, 80, -1 },
		{ "host /32, client port before range", "127.0.0.2", 39999, 80, -1 },
		{ "other host", "127.0.0.3", 40500, 80, -1 },
		{ "ipv6 /8", "fd12::1", 1, 7000, 2 },
		{ "ipv6 outside /8", "fe80::1", 1, 7000, -1 },
		{ "any ipv4 (prefix 0), first match wins", "10.1.0.9", 7005, 5432, 0 },
		{ "any ipv4 (prefix 0)", "192.0.2.1", 7005, 1, 3 },
		{ "any ipv4 (prefix 0), port out", "192.0.2.1", 7011, 1, -1 },
	};
	size_t i;

	m[0] = mk("10.1.0.0", 16, 0, 65535, 5432, 5432);
	m[1] = mk("127.0.0.2", 32, 40000, 40999, 0, 65535);
	m[2] = mk("fd00::", 8, 0, 65535, 7000, 7000);
	m[3] = mk("0.0.0.0", 0, 7000, 7010, 0, 65535);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t a[16];
		uint32_t fam = tup_addr(cases[i].raddr, a);
		size_t got = rm_match_first(m, 4, fam, a, cases[i].rport, cases[i].lport);
		int want = cases[i].want < 0 ? 4 : cases[i].want;

		if ((int)got != want)
			fprintf(stderr, "%s: got %zu, want %d\n", cases[i].name, got, want);
		CU_ASSERT_EQUAL(got, (size_t)want);
		CU_ASSERT_EQUAL(rm_match_sock(&m[0], fam, a, cases[i].rport, cases[i].lport), cases[i].want == 0);
	}
}

struct tuple_case {
	const char *name;
	const char *laddr;
	uint32_t lport;
	const char *raddr;
	uint32_t rport;
	int want;
	size_t idx;
};

static void test_tuples(void)
{
	struct rm_match m[2];
	static const struct tuple_case cases[] = {
		{ "server side: entry", "10.0.0.5", 5432, "10.1.2.3", 40000, RM_MATCH_ENTRY, 0 },
		{ "client side: other end", "10.1.2.3", 40000, "10.0.0.5", 5432, RM_MATCH_OTHER_END, 0 },
		{ "ipv4-mapped remote end", "::ffff:10.0.0.5", 5432, "::ffff:10.1.2.3", 40000, RM_MATCH_ENTRY, 0 },
		{ "ipv4-mapped local end", "::ffff:10.1.2.3", 40000, "::ffff:10.0.0.5", 5432, RM_MATCH_OTHER_END, 0 },
		{ "second match", "fd00::1", 7000, "fd00::2", 1, RM_MATCH_ENTRY, 1 },
		{ "neither end", "10.0.0.5", 5433, "10.1.2.3", 40000, RM_MATCH_NONE, 0 },
		{ "mixed families after mapping", "fd00::9", 40000, "::ffff:10.0.0.5", 5432, RM_MATCH_NONE, 0 },
	};
	size_t i;

	m[0] = mk("10.1.0.0", 16, 0, 65535, 5432, 5432);
	m[1] = mk("fd00::", 16, 0, 65535, 7000, 7000);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t la[16], ra[16];
		uint32_t fam = tup_addr(cases[i].laddr, la);
		size_t idx = 99;
		int got;

		CU_ASSERT_EQUAL(tup_addr(cases[i].raddr, ra), fam);
		got = rm_match_tuple(m, 2, fam, la, cases[i].lport, ra, cases[i].rport, &idx);
		if (got != cases[i].want)
			fprintf(stderr, "%s: got %d, want %d\n", cases[i].name, got, cases[i].want);
		CU_ASSERT_EQUAL(got, cases[i].want);
		if (cases[i].want == RM_MATCH_ENTRY)
			CU_ASSERT_EQUAL(idx, cases[i].idx);
	}
	/* not IP: nothing */
	{
		uint8_t z[16] = { 0 };
		struct rm_match any = mk("0.0.0.0", 0, 0, 65535, 0, 65535);

		CU_ASSERT_EQUAL(rm_match_tuple(&any, 1, 1, z, 0, z, 0, NULL), RM_MATCH_NONE);
		CU_ASSERT_EQUAL(rm_match_tuple(&any, 1, 2, z, 0, z, 0, NULL), RM_MATCH_ENTRY);
		CU_ASSERT_EQUAL(rm_match_tuple(&any, 0, 2, z, 0, z, 0, NULL), RM_MATCH_NONE);
	}
}

struct check_case {
	const char *name;
	struct rm_match m;
	int want;
};

static void test_check(void)
{
	static const struct check_case cases[] = {
		{ "ipv4 /32", { 2, { 10 }, 32, 0, 65535, 0, 65535 }, RM_OK },
		{ "ipv6 /128", { 10, { 0xfd }, 128, 1, 1, 2, 2 }, RM_OK },
		{ "ipv4 /0", { 2, { 0 }, 0, 0, 0, 0, 0 }, RM_OK },
		{ "ipv4 /33", { 2, { 10 }, 33, 0, 65535, 0, 65535 }, RM_EINVAL },
		{ "ipv6 /129", { 10, { 0 }, 129, 0, 65535, 0, 65535 }, RM_EINVAL },
		{ "family 0", { 0, { 0 }, 0, 0, 65535, 0, 65535 }, RM_EINVAL },
		{ "family 1", { 1, { 0 }, 0, 0, 65535, 0, 65535 }, RM_EINVAL },
		{ "client ports reversed", { 2, { 10 }, 8, 5, 4, 0, 65535 }, RM_EINVAL },
		{ "server ports reversed", { 2, { 10 }, 8, 0, 65535, 7001, 7000 }, RM_EINVAL },
		{ "client port past 65535", { 2, { 10 }, 8, 0, 65536, 0, 65535 }, RM_EINVAL },
		{ "server port past 65535", { 2, { 10 }, 8, 0, 65535, 70000, 70000 }, RM_EINVAL },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[128] = "";
		int got = rm_match_check(&cases[i].m, err, sizeof(err));

		if (got != cases[i].want)
			fprintf(stderr, "%s: got %d, want %d\n", cases[i].name, got, cases[i].want);
		CU_ASSERT_EQUAL(got, cases[i].want);
		CU_ASSERT_EQUAL(err[0] != '\0', cases[i].want != RM_OK);
	}
	/* an unchecked overlong prefix names nothing */
	{
		uint8_t a[16] = { 10 };

		CU_ASSERT_EQUAL(rm_match_sock(&cases[3].m, 2, a, 1, 1), 0);
	}
}

static void test_mask(void)
{
	struct rm_match m4 = mk("10.1.255.7", 12, 0, 0, 0, 0), m6 = mk("fd12:3456::1", 20, 0, 0, 0, 0);
	static const uint8_t a4[16] = { 10, 0 }, k4[16] = { 0xff, 0xf0 };
	static const uint8_t a6[16] = { 0xfd, 0x12, 0x30 }, k6[16] = { 0xff, 0xff, 0xf0 };
	uint8_t a[16], k[16];

	memset(m4.addr + 4, 0xee, 12); /* junk past an IPv4 address is ignored */
	rm_match_mask(&m4, a, k);
	CU_ASSERT_EQUAL(memcmp(a, a4, 16), 0);
	CU_ASSERT_EQUAL(memcmp(k, k4, 16), 0);
	rm_match_mask(&m6, a, k);
	CU_ASSERT_EQUAL(memcmp(a, a6, 16), 0);
	CU_ASSERT_EQUAL(memcmp(k, k6, 16), 0);
}

static CU_TestInfo cases[] = {
	{ "sockets against matches", test_sockets },
	{ "tuples from either end", test_tuples },
	{ "malformed matches refused", test_check },
	{ "address masked to its prefix", test_mask },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("rm_match", cases)
