/*
 * col_slots.c - the throttled-CE table of col_slots.h: command checks, slot
 * lookup and allocation, the match entries each slot owns, expiry.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <bpf/bpf.h>

#include "col_slots.h"
#include "rm_err.h"
#include "banned.h"

void col_slots_init(struct col_slots *t, col_slots_put_fn put, void *arg)
{
	memset(t, 0, sizeof(*t));
	t->put = put;
	t->put_arg = arg;
}

int col_slots_put_map(void *arg, uint32_t k, const struct thr_match *m)
{
	int rv = bpf_map_update_elem((int)(intptr_t)arg, &k, m, BPF_ANY);

	return rv < 0 ? rv : rv ? -EIO : 0;
}

static int col_slots_check_name(const char *ce)
{
	size_t i, n = ce ? strlen(ce) : 0;

	if (n == 0 || n > 63)
		return -1;
	for (i = 0; i < n; i++) {
		char c = ce[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return -1;
	}
	return 0;
}

int col_slots_check(const struct col_throttle_cmd *c, int64_t now_unix_ns, char *err, size_t errlen)
{
	size_t i;

	if (col_slots_check_name(c->ce) != 0) {
		rm_errf(err, errlen, "bad CE name '%s'", c->ce ? c->ce : "");
		return RM_EINVAL;
	}
	if (!c->resource || strcmp(c->resource, "cpu") != 0) {
		rm_errf(err, errlen, "resource '%s' cannot be throttled here (only cpu)",
			c->resource ? c->resource : "");
		return RM_EINVAL;
	}
	if (c->cap_permille > 1000) {
		rm_errf(err, errlen, "cap of %u permille (at most 1000)", c->cap_permille);
		return RM_EINVAL;
	}
	if (c->cap_permille && (c->nmatch == 0 || c->nmatch > COL_THROTTLE_MAX_MATCHES || !c->match)) {
		rm_errf(err, errlen, "command for CE '%s' has %zu matches (1..%d)", c->ce, c->nmatch,
			COL_THROTTLE_MAX_MATCHES);
		return RM_EINVAL;
	}
	for (i = 0; c->cap_permille && i < c->nmatch; i++) {
		char why[96];

		if (rm_match_check(&c->match[i], why, sizeof(why)) != 0) {
			rm_errf(err, errlen, "match %zu: %s", i, why);
			return RM_EINVAL;
		}
	}
	if (c->expires_unix_ns <= now_unix_ns) {
		rm_errf(err, errlen, "command %" PRIu64 " for CE '%s' has already expired", c->id, c->ce);
		return RM_ETIMEDOUT;
	}
	return RM_OK;
}

uint32_t col_slots_find(const struct col_slots *t, const char *ce)
{
	uint32_t si;

	for (si = 1; si < THR_MAX_SLOTS; si++)
		if (t->slot[si].used && strcmp(t->slot[si].ce, ce) == 0)
			return si;
	return 0;
}

uint32_t col_slots_unused(const struct col_slots *t, char *err, size_t errlen)
{
	uint32_t si;

	for (si = 1; si < THR_MAX_SLOTS; si++)
		if (!t->slot[si].used)
			return si;
	rm_errf(err, errlen, "%d CEs already throttled", THR_MAX_SLOTS - 1);
	return 0;
}

uint32_t col_slots_next(const struct col_slots *t, uint32_t after)
{
	uint32_t si;

	for (si = after + 1; si < THR_MAX_SLOTS; si++)
		if (t->slot[si].used)
			return si;
	return 0;
}

uint32_t col_slots_release_all(struct col_slots *t, col_slots_release_fn release, void *arg)
{
	uint32_t si, n = 0;

	for (si = 0; (si = col_slots_next(t, si)) != 0;) {
		release(arg, si);
		n++;
	}
	return n;
}

void col_slots_make_match(const struct rm_match *in, uint32_t slot, struct thr_match *out)
{
	memset(out, 0, sizeof(*out));
	out->slot = slot;
	out->family = in->family;
	rm_match_mask(in, (uint8_t *)out->addr, (uint8_t *)out->mask);
	out->cport_lo = in->cport_lo;
	out->cport_hi = in->cport_hi;
	out->sport_lo = in->sport_lo;
	out->sport_hi = in->sport_hi;
}

/* Writes entries idx[0..n) empty and frees them. */
static void col_slots_empty(struct col_slots *t, const uint32_t *idx, size_t n)
{
	struct thr_match zero = { 0 };
	size_t i;

	for (i = 0; i < n; i++) {
		t->put(t->put_arg, idx[i], &zero);
		t->match_used[idx[i]] = 0;
	}
}

int col_slots_set(struct col_slots *t, uint32_t si, const struct col_throttle_cmd *c, char *err,
		  size_t errlen)
{
	struct col_slot *s = &t->slot[si];
	uint32_t idx[COL_THROTTLE_MAX_MATCHES], k;
	size_t n = 0, i;
	int rv;

	if (si == 0 || si >= THR_MAX_SLOTS || c->nmatch > COL_THROTTLE_MAX_MATCHES) {
		rm_errf(err, errlen, "slot %u / %zu matches out of range", si, c->nmatch);
		return RM_EINVAL;
	}
	for (k = 0; k < THR_MAX_MATCHES && n < c->nmatch; k++)
		if (!t->match_used[k])
			idx[n++] = k;
	if (n < c->nmatch) {
		rm_errf(err, errlen, "no room for %zu more matches (%d in all)", c->nmatch, THR_MAX_MATCHES);
		return RM_EFULL;
	}
	for (i = 0; i < n; i++) {
		struct thr_match m;

		col_slots_make_match(&c->match[i], si, &m);
		if ((rv = t->put(t->put_arg, idx[i], &m)) != 0) {
			rm_errf(err, errlen, "failed to update the match table: %s", strerror(-rv));
			col_slots_empty(t, idx, i);
			return RM_EBPF;
		}
		t->match_used[idx[i]] = 1;
	}
	if (s->used)
		col_slots_empty(t, s->match_idx, s->nmatch);
	memcpy(s->match_idx, idx, n * sizeof(idx[0]));
	s->nmatch = n;
	s->used = 1;
	snprintf(s->ce, sizeof(s->ce), "%s", c->ce);
	s->id = c->id;
	s->cap_permille = c->cap_permille;
	s->expires_unix_ns = c->expires_unix_ns;
	return RM_OK;
}

void col_slots_clear(struct col_slots *t, uint32_t si)
{
	struct col_slot *s = &t->slot[si];

	if (si == 0 || si >= THR_MAX_SLOTS || !s->used)
		return;
	col_slots_empty(t, s->match_idx, s->nmatch);
	memset(s, 0, sizeof(*s));
}

uint32_t col_slots_expired(const struct col_slots *t, int64_t now_unix_ns)
{
	uint32_t si;

	for (si = 1; si < THR_MAX_SLOTS; si++)
		if (t->slot[si].used && t->slot[si].expires_unix_ns <= now_unix_ns)
			return si;
	return 0;
}
