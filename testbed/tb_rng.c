/*
 * tb_rng.c - xoshiro256** seeded by splitmix64, the normal sampler and the
 * arrival processes of the testbed's load generator. Owns no global state.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "rm_err.h"
#include "tb_rng.h"
#include "banned.h"

static uint64_t tb_splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t tb_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

void tb_rng_seed(struct tb_rng *r, uint64_t seed)
{
	uint64_t x = seed;
	int i;

	assert(r);
	for (i = 0; i < 4; i++)
		r->s[i] = tb_splitmix64(&x);
	r->has_spare = 0;
	r->spare = 0;
}

uint64_t tb_rng_next(struct tb_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = tb_rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = tb_rotl(s[3], 45);
	return out;
}

double tb_rng_unit(struct tb_rng *r)
{
	/* 53 random bits, shifted by half an ulp so 0 is impossible. */
	return ((double)(tb_rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double tb_rng_normal(struct tb_rng *r)
{
	double u, v, s, f;

	if (r->has_spare) {
		r->has_spare = 0;
		return r->spare;
	}
	do {
		u = 2.0 * tb_rng_unit(r) - 1.0;
		v = 2.0 * tb_rng_unit(r) - 1.0;
		s = u * u + v * v;
	} while (s >= 1.0 || s == 0.0);
	f = sqrt(-2.0 * log(s) / s);
	r->spare = v * f;
	r->has_spare = 1;
	return u * f;
}

uint64_t tb_rng_range(struct tb_rng *r, uint64_t lo, uint64_t hi)
{
	uint64_t span, limit, x;

	assert(lo <= hi);
	span = hi - lo + 1;
	if (span == 0) /* the full 64-bit range */
		return tb_rng_next(r);
	limit = UINT64_MAX - UINT64_MAX % span;
	do
		x = tb_rng_next(r);
	while (x >= limit);
	return lo + x % span;
}

int tb_arrival_parse(const char *s, enum tb_arrival *out)
{
	if (!s || !out)
		return RM_EINVAL;
	if (strcmp(s, "uniform") == 0)
		*out = TB_ARRIVAL_UNIFORM;
	else if (strcmp(s, "lognormal") == 0)
		*out = TB_ARRIVAL_LOGNORMAL;
	else
		return RM_EINVAL;
	return RM_OK;
}

const char *tb_arrival_name(enum tb_arrival a)
{
	return a == TB_ARRIVAL_LOGNORMAL ? "lognormal" : "uniform";
}

double tb_arrival_next(enum tb_arrival a, double rate, struct tb_rng *r)
{
	assert(rate > 0);
	if (a == TB_ARRIVAL_LOGNORMAL)
		return exp(tb_rng_normal(r)) / (exp(0.5) * rate);
	return 1.0 / rate;
}

uint64_t tb_hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; s && *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}
