/*
 * agg_pair_dist.c - distributions of the pairing engine: the one being
 * built while a part is evaluated (e->acc), its move into a part's sorted
 * distribution, the exact split of a cost or of bytes by weights (largest
 * remainder), the text form that persists a distribution, and the interned
 * names (nodes, CEs, reasons) that distributions point to.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "agg_account.h"
#include "agg_pair_int.h"
#include "banned.h"

void agg_pair_apportion(uint64_t total, const uint64_t *w, size_t n, uint64_t *out)
{
	unsigned __int128 W = 0;
	uint64_t given = 0, left;
	size_t i;

	for (i = 0; i < n; i++)
		W += w[i];
	assert(n > 0 && W > 0);
	for (i = 0; i < n; i++) {
		out[i] = (uint64_t)(((unsigned __int128)total * w[i]) / W);
		given += out[i];
	}
	/* fewer than n units are left; each goes to the largest remainder */
	for (left = total - given; left > 0; left--) {
		unsigned __int128 best = 0;
		size_t bi = n;

		for (i = 0; i < n; i++) {
			unsigned __int128 rem = ((unsigned __int128)total * w[i]) % W;

			/* a piece that got its unit already is no longer behind */
			if (out[i] > (uint64_t)(((unsigned __int128)total * w[i]) / W))
				continue;
			if (bi == n || rem > best) {
				best = rem;
				bi = i;
			}
		}
		assert(bi < n);
		out[bi]++;
	}
}

const char *agg_intern(struct agg_pair *e, const char *s, uint32_t *idx)
{
	size_t i;
	char *c;

	for (i = e->nnames; i-- > 0;)
		if (strcmp(e->names[i], s) == 0)
			goto found;
	if (agg_grow((void **)&e->names, &e->capnames, e->nnames + 1, sizeof(*e->names)) != 0)
		return NULL;
	if (!(c = strdup(s)))
		return NULL;
	i = e->nnames++;
	e->names[i] = c;
found:
	if (idx)
		*idx = (uint32_t)i;
	return e->names[i];
}

static const char *const agg_reasons[] = {
	AGG_REASON_NO_CE, AGG_REASON_DOM0, AGG_REASON_UNTRUSTED_RANGE, AGG_REASON_UNPAIRED,
	AGG_REASON_PAST_HORIZON, AGG_REASON_UNSEGMENTED, AGG_REASON_LOST, AGG_REASON_UNANCHORED,
	AGG_REASON_TOO_MANY_SENDS, AGG_REASON_NO_SENDER,
};

static int agg_share_cmp(const struct agg_pair_share *a, const struct agg_pair_share *b)
{
	if (!a->ce != !b->ce)
		return a->ce ? -1 : 1;
	return strcmp(a->ce ? a->ce : a->reason, b->ce ? b->ce : b->reason);
}

static int agg_share_qcmp(const void *a, const void *b)
{
	return agg_share_cmp(a, b);
}

int agg_acc_add(struct agg_pair *e, const char *ce, const char *reason, uint64_t w)
{
	struct agg_pair_share k = { ce, reason, w };
	size_t i;
	int rv;

	if (!w)
		return RM_OK;
	for (i = 0; i < e->nacc; i++)
		if (agg_share_cmp(&e->acc[i], &k) == 0) {
			e->acc[i].w += w;
			return RM_OK;
		}
	if ((rv = agg_grow((void **)&e->acc, &e->capacc, e->nacc + 1, sizeof(*e->acc))) != 0)
		return rv;
	e->acc[e->nacc++] = k;
	return RM_OK;
}

int agg_tmp_reserve(struct agg_pair *e, size_t n)
{
	size_t cap = e->captmp;
	int rv;

	if ((rv = agg_grow((void **)&e->wtmp, &cap, n, sizeof(uint64_t))) != 0)
		return rv;
	cap = e->captmp;
	if ((rv = agg_grow((void **)&e->otmp, &cap, n, sizeof(uint64_t))) != 0)
		return rv;
	e->captmp = cap;
	return RM_OK;
}

int agg_acc_add_dist(struct agg_pair *e, const struct agg_dist *d, uint64_t bytes)
{
	size_t i;
	int rv;

	if (!bytes)
		return RM_OK;
	if ((rv = agg_tmp_reserve(e, d->n)) != 0)
		return rv;
	for (i = 0; i < d->n; i++)
		e->wtmp[i] = d->s[i].w;
	agg_pair_apportion(bytes, e->wtmp, d->n, e->otmp);
	for (i = 0; i < d->n; i++)
		if ((rv = agg_acc_add(e, d->s[i].ce, d->s[i].reason, e->otmp[i])) != 0)
			return rv;
	return RM_OK;
}

int agg_acc_take(struct agg_pair *e, struct agg_dist *out)
{
	assert(e->nacc > 0);
	if (!(out->s = malloc(e->nacc * sizeof(*out->s))))
		return RM_ENOMEM;
	memcpy(out->s, e->acc, e->nacc * sizeof(*out->s));
	out->n = e->nacc;
	qsort(out->s, out->n, sizeof(*out->s), agg_share_qcmp);
	e->nacc = 0;
	return RM_OK;
}

int agg_pair_dist_format(const struct agg_pair_share *dist, size_t n, char **out)
{
	size_t len = 1, i, off = 0;
	char *buf;

	if (!out)
		return RM_EINVAL;
	*out = NULL;
	if (!dist || n == 0)
		return RM_EINVAL;
	for (i = 0; i < n; i++) {
		if (!dist[i].w || (!dist[i].ce && !dist[i].reason))
			return RM_EINVAL;
		len += strlen(dist[i].ce ? dist[i].ce : dist[i].reason) + 2 + 21;
	}
	if (!(buf = malloc(len)))
		return RM_ENOMEM;
	/* "%s%s%s=%llu" per share, written by hand: this runs for every resolved part */
	for (i = 0; i < n; i++) {
		const char *name = dist[i].ce ? dist[i].ce : dist[i].reason;
		size_t nl = strlen(name), nd = 0;
		char digits[20];
		uint64_t w = dist[i].w;

		assert(off + nl + 2 + 20 < len);
		if (i)
			buf[off++] = ';';
		if (!dist[i].ce)
			buf[off++] = '!';
		memcpy(buf + off, name, nl);
		off += nl;
		buf[off++] = '=';
		do {
			digits[nd++] = (char)('0' + w % 10);
			w /= 10;
		} while (w);
		while (nd)
			buf[off++] = digits[--nd];
	}
	buf[off] = '\0';
	*out = buf;
	return RM_OK;
}

int agg_dist_parse(struct agg_pair *e, const char *text)
{
	const char *p = text;
	int rv;

	e->nacc = 0;
	while (*p) {
		char name[ST_NAME_MAX + 1], *end;
		const char *eq = strchr(p, '='), *nm = p, *interned;
		unsigned long long w;
		int is_reason = *p == '!';
		size_t nlen, i;

		if (is_reason)
			nm++;
		if (!eq || eq <= nm || (size_t)(eq - nm) > ST_NAME_MAX)
			return RM_EINVAL;
		nlen = (size_t)(eq - nm);
		memcpy(name, nm, nlen);
		name[nlen] = '\0';
		if (strchr(name, ';') || !(eq[1] >= '0' && eq[1] <= '9'))
			return RM_EINVAL;
		errno = 0;
		w = strtoull(eq + 1, &end, 10);
		if (errno || w == 0 || (*end && *end != ';'))
			return RM_EINVAL;
		interned = NULL;
		if (is_reason)
			for (i = 0; i < sizeof(agg_reasons) / sizeof(agg_reasons[0]); i++)
				if (strcmp(agg_reasons[i], name) == 0)
					interned = agg_reasons[i];
		if (!interned && !(interned = agg_intern(e, name, NULL)))
			return RM_ENOMEM;
		if ((rv = agg_acc_add(e, is_reason ? NULL : interned, is_reason ? interned : NULL, w)) != 0)
			return rv;
		if (*end && !end[1])
			return RM_EINVAL; /* a trailing ';' */
		p = *end ? end + 1 : end;
	}
	return e->nacc ? RM_OK : RM_EINVAL;
}

void agg_dist_free(struct agg_dist *d)
{
	free(d->s);
	d->s = NULL;
	d->n = 0;
}
