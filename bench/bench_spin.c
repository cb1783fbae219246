/*
 * bench_spin.c - a fixed amount of CPU-bound work (no system calls, no
 * memory beyond registers), for what a hook or a sampler costs processes
 * that are not watched: run it with and without the thing measured, pinned
 * to one CPU, and compare the thread CPU it took. Prints one line:
 *   spin: cpu_s <thread CPU seconds> wall_s <seconds> iterations <N>
 * Usage: bench_spin [ITERATIONS (1500000000)]
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t clock_ns(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1500000000ULL, i;
	uint64_t x = 88172645463325252ULL, acc = 0, c0, w0;
	volatile uint64_t sink;

	if (!n) {
		fprintf(stderr, "usage: bench_spin [ITERATIONS > 0]\n");
		return 2;
	}
	c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	w0 = clock_ns(CLOCK_MONOTONIC);
	for (i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		acc += x * 0x9e3779b97f4a7c15ULL;
	}
	sink = acc;
	(void)sink;
	printf("spin: cpu_s %.4f wall_s %.4f iterations %" PRIu64 "\n",
	       (double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / 1e9, (double)(clock_ns(CLOCK_MONOTONIC) - w0) / 1e9, n);
	return 0;
}
