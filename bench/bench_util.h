/*
 * bench_util.h - the small pieces of logic the benchmarks share: reading a
 * process's CPU time and peak memory from /proc, and order statistics
 * (median, percentiles) of measured samples. Pure functions on buffers and
 * arrays, plus two readers of /proc files; unit-tested in bench_util_test.c.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Parses the text of /proc/PID/stat: utime + stime (fields 14 and 15, in
 * clock ticks) into *ticks. The command name (field 2) may hold spaces and
 * parentheses; the fields are counted after its last ')'. Returns RM_OK, or
 * RM_EPROTO if the text is not a stat line. Thread-safe.
 */
int bench_parse_stat(const char *text, uint64_t *ticks);

/*
 * Parses the text of /proc/PID/status: VmHWM (peak resident set) and VmRSS
 * in kB into *hwm_kb and *rss_kb (either may be NULL). Returns RM_OK, or
 * RM_EPROTO if a wanted line is missing or malformed. Thread-safe.
 */
int bench_parse_status(const char *text, uint64_t *hwm_kb, uint64_t *rss_kb);

struct bench_proc {
	uint64_t cpu_ns;   /* utime + stime of the whole process, ns (10 ms ticks) */
	uint64_t clock_ns; /* its CPU, ns, exact: its process clock (CLOCK_PROCESS_CPUTIME_ID's) */
	uint64_t hwm_kb;   /* peak resident set */
	uint64_t rss_kb;   /* current resident set */
};

/*
 * Reads /proc/<pid>/stat, the process's CPU clock and /proc/<pid>/status
 * into *out. Returns RM_OK,
 * RM_ENOENT if the process does not exist, RM_EIO if a file cannot be read,
 * RM_EPROTO if one is malformed.
 */
int bench_proc_read(pid_t pid, struct bench_proc *out);

/*
 * The q-quantile (0 <= q <= 1) of v[0..n) by the nearest-rank method: the
 * smallest sample with at least ceil(q * n) samples <= it (q = 0: the
 * minimum). Sorts v in place. n must be > 0; returns NaN if n == 0.
 */
double bench_quantile(double *v, size_t n, double q);

/* The median of v[0..n): the mean of the two middle samples for even n.
 * Sorts v in place; NaN if n == 0. */
double bench_median(double *v, size_t n);

/* The index in names[0..n) of the name s (a benchmark's option value) into
 * *out: 1, or 0 (out untouched) if s names none. */
int bench_name_index(const char *s, const char *const *names, uint32_t n, uint32_t *out);

#endif
