/*
 * agg_admit_test.c - the admission rules on data: tokens (against the one
 * openssl computes as scripts/cert.sh does) and the window tolerance at its
 * edges.
 */
#include <string.h>

#include <CUnit/Basic.h>

#include "agg_admit.h"
#include "rm_err.h"
#include "rm_test.h"

static const uint8_t secret[] = "0123456789abcdef0123456789abcdef";

static void test_token(void)
{
	char tok[AGG_ADMIT_TOKEN_HEX + 1], other[AGG_ADMIT_TOKEN_HEX + 1], err[256];

	CU_ASSERT_EQUAL(agg_admit_token(secret, sizeof(secret) - 1, "n1", tok), RM_OK);
	CU_ASSERT_EQUAL(strlen(tok), AGG_ADMIT_TOKEN_HEX);
	/* openssl: printf 'rametr-node-v1:n1' | openssl dgst -sha256 -mac HMAC -macopt key:<secret> */
	CU_ASSERT_STRING_EQUAL(tok, "7bcb4497b1e7fc6018846e3ed81a3ab1b2133aff9274058268b7399ffabfdf9e");
	CU_ASSERT_EQUAL(agg_admit_token(secret, sizeof(secret) - 1, "n2", other), RM_OK);
	CU_ASSERT_STRING_NOT_EQUAL(tok, other);
	CU_ASSERT_EQUAL(agg_admit_check_token(secret, sizeof(secret) - 1, "n1", tok, err, sizeof(err)),
			RM_OK);
	CU_ASSERT_EQUAL(agg_admit_check_token(secret, sizeof(secret) - 1, "n2", tok, err, sizeof(err)),
			RM_EPROTO);
	CU_ASSERT(strstr(err, "is not the node's") != NULL);
	CU_ASSERT_EQUAL(agg_admit_check_token(secret, sizeof(secret) - 1, "n1", "", err, sizeof(err)),
			RM_EPROTO);
	CU_ASSERT(strstr(err, "no enrolment token") != NULL);
	CU_ASSERT_EQUAL(agg_admit_check_token(secret, sizeof(secret) - 1, "n1", "abc", err, sizeof(err)),
			RM_EPROTO);
	tok[10] ^= 1;
	CU_ASSERT_EQUAL(agg_admit_check_token(secret, sizeof(secret) - 1, "n1", tok, err, sizeof(err)),
			RM_EPROTO);
	CU_ASSERT_EQUAL(agg_admit_token(secret, 0, "n1", tok), RM_EINVAL);
	CU_ASSERT_EQUAL(agg_admit_token(secret, 4, "", tok), RM_EINVAL);
}

static int windows_ok(uint64_t win, int64_t now, int64_t tol, char *err, size_t errlen)
{
	struct rm_wbatch b = { 0 };
	struct rm_totals w = { .win = win };

	b.window_ns = 1000000000;
	b.n_windows = 1;
	b.windows = &w;
	return agg_admit_windows(&b, now, tol, err, errlen);
}

static void test_windows(void)
{
	const int64_t now = 1700000000ll * 1000000000ll, tol = 60ll * 1000000000ll;
	struct rm_wbatch b = { 0 };
	struct rm_wpart pp[2] = { { 0 } };
	char err[256];

	/* window 1700000000 holds now; [now - 60 s, now + 60 s] is admitted */
	CU_ASSERT_EQUAL(windows_ok(1700000000, now, tol, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(windows_ok(1700000000 - 61, now, tol, err, sizeof(err)), RM_OK); /* ends at -60 s */
	CU_ASSERT_EQUAL(windows_ok(1700000000 - 62, now, tol, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT(strstr(err, "ends 61 s before the aggregator's clock (tolerance 60 s)") != NULL);
	CU_ASSERT_EQUAL(windows_ok(1700000000 + 60, now, tol, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(windows_ok(1700000000 + 61, now, tol, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT(strstr(err, "starts 61 s after") != NULL);
	/* no tolerance: anything goes; absurd windows do not overflow */
	CU_ASSERT_EQUAL(windows_ok(3, now, 0, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(windows_ok(UINT64_MAX / 2, now, tol, err, sizeof(err)), RM_EPROTO);
	/* parts are checked too, the second one's window being out */
	pp[0].win = 1700000000;
	pp[1].win = 1600000000;
	b.window_ns = 1000000000;
	b.n_parts = 2;
	b.parts = pp;
	CU_ASSERT_EQUAL(agg_admit_windows(&b, now, tol, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT(strstr(err, "window 1600000000") != NULL);
	pp[1].win = 1700000001;
	CU_ASSERT_EQUAL(agg_admit_windows(&b, now, tol, err, sizeof(err)), RM_OK);
}

static CU_TestInfo cases[] = {
	{ "enrolment tokens", test_token },
	{ "window tolerance", test_windows },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_admit", cases)
