/*
 * agg_admit.c - the admission rules: enrolment tokens (HMAC-SHA256 with
 * mbedTLS, the library Debian's nng already uses for TLS, rather than a
 * hand-written hash) and the window tolerance. See agg_admit.h.
 */
#include <stdio.h>
#include <string.h>

#include <mbedtls/md.h>

#include "agg_admit.h"
#include "rm_err.h"
#include "banned.h"

#define AGG_ADMIT_DOMAIN "rametr-node-v1:"

int agg_admit_token(const uint8_t *secret, size_t n, const char *node, char *out)
{
	static const char hex[] = "0123456789abcdef";
	const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
	mbedtls_md_context_t ctx;
	uint8_t mac[32];
	size_t i;
	int rv;

	if (!secret || n == 0 || !node || !node[0] || !out)
		return RM_EINVAL;
	if (!md)
		return RM_EIO;
	mbedtls_md_init(&ctx);
	rv = mbedtls_md_setup(&ctx, md, 1);
	if (rv == 0)
		rv = mbedtls_md_hmac_starts(&ctx, secret, n);
	if (rv == 0)
		rv = mbedtls_md_hmac_update(&ctx, (const uint8_t *)AGG_ADMIT_DOMAIN,
					    strlen(AGG_ADMIT_DOMAIN));
	if (rv == 0)
		rv = mbedtls_md_hmac_update(&ctx, (const uint8_t *)node, strlen(node));
	if (rv == 0)
		rv = mbedtls_md_hmac_finish(&ctx, mac);
	mbedtls_md_free(&ctx);
	if (rv != 0)
		return RM_EIO;
	for (i = 0; i < sizeof(mac); i++) {
		out[2 * i] = hex[mac[i] >> 4];
		out[2 * i + 1] = hex[mac[i] & 15];
	}
	out[AGG_ADMIT_TOKEN_HEX] = '\0';
	return RM_OK;
}

int agg_admit_check_token(const uint8_t *secret, size_t n, const char *node, const char *token,
			  char *err, size_t errlen)
{
	char want[AGG_ADMIT_TOKEN_HEX + 1];
	unsigned diff = 0;
	size_t i;
	int rv;

	if ((rv = agg_admit_token(secret, n, node, want)) != RM_OK)
		return rv;
	if (!token || !token[0]) {
		snprintf(err, errlen, "no enrolment token for node '%s'", node);
		return RM_EPROTO;
	}
	if (strlen(token) != AGG_ADMIT_TOKEN_HEX) {
		snprintf(err, errlen, "enrolment token for node '%s' is not the node's", node);
		return RM_EPROTO;
	}
	for (i = 0; i < AGG_ADMIT_TOKEN_HEX; i++)
		diff |= (unsigned)(uint8_t)(want[i] ^ token[i]);
	if (diff) {
		snprintf(err, errlen, "enrolment token for node '%s' is not the node's", node);
		return RM_EPROTO;
	}
	return RM_OK;
}

/* RM_OK if window w of length len is within tol of now; else the reason in err. */
static int agg_admit_window(uint64_t w, uint64_t len, int64_t now, int64_t tol, char *err,
			    size_t errlen)
{
	/* in long double: w * len may not fit in int64 (rm_wire bounds neither) */
	long double start = (long double)w * (long double)len, end = start + (long double)len;

	if (end < (long double)now - (long double)tol) {
		snprintf(err, errlen,
			 "window %llu ends %.0Lf s before the aggregator's clock (tolerance %lld s)",
			 (unsigned long long)w, ((long double)now - end) / 1e9,
			 (long long)(tol / 1000000000));
		return RM_EPROTO;
	}
	if (start > (long double)now + (long double)tol) {
		snprintf(err, errlen,
			 "window %llu starts %.0Lf s after the aggregator's clock (tolerance %lld s)",
			 (unsigned long long)w, (start - (long double)now) / 1e9,
			 (long long)(tol / 1000000000));
		return RM_EPROTO;
	}
	return RM_OK;
}

int agg_admit_windows(const struct rm_wbatch *b, int64_t now_unix_ns, int64_t tol_ns, char *err,
		      size_t errlen)
{
	uint64_t last = 0;
	size_t i;
	int rv;

	if (!b)
		return RM_EINVAL;
	if (tol_ns <= 0)
		return RM_OK;
	for (i = 0; i < b->n_parts; i++) {
		if (i && b->parts[i].win == last)
			continue; /* parts come grouped by window: check each once */
		last = b->parts[i].win;
		if ((rv = agg_admit_window(last, b->window_ns, now_unix_ns, tol_ns, err, errlen)) != 0)
			return rv;
	}
	for (i = 0; i < b->n_windows; i++)
		if ((rv = agg_admit_window(b->windows[i].win, b->window_ns, now_unix_ns, tol_ns, err,
					   errlen)) != 0)
			return rv;
	return RM_OK;
}
