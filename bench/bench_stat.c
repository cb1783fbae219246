/*
 * bench_stat.c - the command-line face of bench_util for scripts/bench.sh:
 *
 *   bench_stat proc PID             cpu_ns=<utime+stime ns> clock_ns=<process clock ns, exact>
 *                                   hwm_kb=<peak RSS> rss_kb=<RSS>
 *   bench_stat median V...          the median of the numbers
 *   bench_stat quantile Q V...      the Q-quantile (0..1, nearest rank)
 *
 * Exit 0, 1 if the process cannot be read, 2 on bad arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "rm_err.h"
#include "banned.h"

static int bench_numbers(int argc, char **argv, double **out)
{
	double *v = calloc((size_t)argc + 1, sizeof(*v));
	int i;

	if (!v)
		return -1;
	for (i = 0; i < argc; i++) {
		char *end;

		v[i] = strtod(argv[i], &end);
		if (end == argv[i] || *end) {
			fprintf(stderr, "bench_stat: not a number '%s'\n", argv[i]);
			free(v);
			return -1;
		}
	}
	*out = v;
	return argc;
}

int main(int argc, char **argv)
{
	double *v, q;
	int n, rv;

	if (argc == 3 && !strcmp(argv[1], "proc")) {
		struct bench_proc p;

		if ((rv = bench_proc_read((pid_t)atoi(argv[2]), &p)) != RM_OK) {
			fprintf(stderr, "bench_stat: failed to read process '%s': %s\n", argv[2], rm_strerror(rv));
			return 1;
		}
		printf("cpu_ns=%llu clock_ns=%llu hwm_kb=%llu rss_kb=%llu\n", (unsigned long long)p.cpu_ns,
		       (unsigned long long)p.clock_ns, (unsigned long long)p.hwm_kb, (unsigned long long)p.rss_kb);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "median")) {
		if ((n = bench_numbers(argc - 2, argv + 2, &v)) < 0)
			return 2;
		printf("%.6g\n", bench_median(v, (size_t)n));
		free(v);
		return 0;
	}
	if (argc >= 4 && !strcmp(argv[1], "quantile")) {
		char *end;

		q = strtod(argv[2], &end);
		if (end == argv[2] || *end || q < 0 || q > 1) {
			fprintf(stderr, "bench_stat: invalid quantile '%s' (0..1)\n", argv[2]);
			return 2;
		}
		if ((n = bench_numbers(argc - 3, argv + 3, &v)) < 0)
			return 2;
		printf("%.6g\n", bench_quantile(v, (size_t)n, q));
		free(v);
		return 0;
	}
	fprintf(stderr, "usage: bench_stat proc PID | median V... | quantile Q V...\n");
	return 2;
}
