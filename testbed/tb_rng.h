/*
 * tb_rng.h - the testbed's seeded random numbers and arrival processes.
 *
 * A small xoshiro256** generator seeded through splitmix64 (no global rand()),
 * a uniform double in (0, 1), a standard normal (Marsaglia's polar method),
 * bounded integers, and the two arrival processes of seed 000 §7.2.2:
 * "uniform" (requests evenly spaced, inter-arrival 1/rate) and "lognormal"
 * (inter-arrival exp(Z), Z ~ N(0,1), i.e. lognormal(0, 1.0), scaled by
 * 1 / (e^0.5 * rate) so that its mean is 1/rate; coefficient of variation
 * sqrt(e - 1) ~ 1.31). A tb_rng is not thread-safe; use one per thread.
 */
#ifndef TB_RNG_H
#define TB_RNG_H

#include <stdint.h>

struct tb_rng {
	uint64_t s[4];
	double spare;    /* second normal of the last polar draw */
	int has_spare;
};

enum tb_arrival { TB_ARRIVAL_UNIFORM = 0, TB_ARRIVAL_LOGNORMAL };

/* Seeds r deterministically from seed (any value, 0 included). */
void tb_rng_seed(struct tb_rng *r, uint64_t seed);

/* Next 64 random bits. */
uint64_t tb_rng_next(struct tb_rng *r);

/* Uniform double in the open interval (0, 1). */
double tb_rng_unit(struct tb_rng *r);

/* Standard normal N(0, 1). */
double tb_rng_normal(struct tb_rng *r);

/* Uniform integer in [lo, hi] (lo <= hi), without modulo bias. */
uint64_t tb_rng_range(struct tb_rng *r, uint64_t lo, uint64_t hi);

/*
 * Parses "uniform" or "lognormal" into *out. Returns RM_OK or RM_EINVAL.
 * tb_arrival_name() returns the name of a (static string).
 */
int tb_arrival_parse(const char *s, enum tb_arrival *out);
const char *tb_arrival_name(enum tb_arrival a);

/*
 * Next inter-arrival time in seconds for mean rate `rate` (> 0) requests/s.
 * Uniform draws nothing from r.
 */
double tb_arrival_next(enum tb_arrival a, double rate, struct tb_rng *r);

/* Deterministic 64-bit FNV-1a hash of a string (for default seeds). */
uint64_t tb_hash_str(const char *s);

#endif
