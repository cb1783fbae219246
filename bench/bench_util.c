/*
 * bench_util.c - /proc readers and order statistics for the benchmarks
 * (contracts in bench_util.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "rm_err.h"
#include "banned.h"

/* Reads an unsigned decimal at *p, advancing it; 0 if none. */
static int bench_read_u64(const char **p, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;

	if (*s < '0' || *s > '9')
		return 0;
	while (*s >= '0' && *s <= '9') {
		if (x > (UINT64_MAX - 9) / 10)
			return 0;
		x = x * 10 + (uint64_t)(*s++ - '0');
	}
	*p = s;
	*v = x;
	return 1;
}

int bench_parse_stat(const char *text, uint64_t *ticks)
{
	const char *p = text ? strrchr(text, ')') : NULL;
	uint64_t ut, st;
	int field;

	if (!p || !ticks || !strchr(text, '('))
		return RM_EPROTO;
	p++;
	/* after ')' comes field 3 (state); skip to field 14 */
	for (field = 2; field < 13; field++) {
		if (*p != ' ')
			return RM_EPROTO;
		p++;
		while (*p && *p != ' ')
			p++;
	}
	if (*p++ != ' ' || !bench_read_u64(&p, &ut) || *p++ != ' ' || !bench_read_u64(&p, &st))
		return RM_EPROTO;
	if (*p != ' ' && *p != '\n' && *p)
		return RM_EPROTO;
	*ticks = ut + st;
	return RM_OK;
}

/* Value in kB of the line "<key>:  <n> kB" in a status text. */
static int bench_status_kb(const char *text, const char *key, uint64_t *kb)
{
	size_t klen = strlen(key);
	const char *p = text;

	while (p && *p) {
		if (!strncmp(p, key, klen) && p[klen] == ':') {
			p += klen + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			if (!bench_read_u64(&p, kb) || strncmp(p, " kB", 3))
				return RM_EPROTO;
			return RM_OK;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return RM_EPROTO;
}

int bench_parse_status(const char *text, uint64_t *hwm_kb, uint64_t *rss_kb)
{
	uint64_t h, r;
	int rv;

	if (!text)
		return RM_EPROTO;
	if (hwm_kb && (rv = bench_status_kb(text, "VmHWM", &h)) != RM_OK)
		return rv;
	if (rss_kb && (rv = bench_status_kb(text, "VmRSS", &r)) != RM_OK)
		return rv;
	if (hwm_kb)
		*hwm_kb = h;
	if (rss_kb)
		*rss_kb = r;
	return RM_OK;
}

/* Reads a whole small /proc file into buf (NUL-terminated). */
static int bench_slurp(const char *path, char *buf, size_t len)
{
	size_t off = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? RM_ENOENT : RM_EIO;
	while (off + 1 < len && (n = read(fd, buf + off, len - 1 - off)) > 0)
		off += (size_t)n;
	close(fd);
	buf[off] = '\0';
	return off ? RM_OK : RM_ENOENT; /* an exited process reads empty */
}

/* pid's CPU, exact: its process clock (every thread's, the exited ones' included). */
static int bench_proc_clock(pid_t pid, uint64_t *ns)
{
	struct timespec ts;
	clockid_t clk;

	if (clock_getcpuclockid(pid, &clk) != 0 || clock_gettime(clk, &ts) != 0)
		return RM_ENOENT;
	*ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	return RM_OK;
}

int bench_proc_read(pid_t pid, struct bench_proc *out)
{
	char path[64], buf[8192];
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t ticks;
	int rv;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((rv = bench_slurp(path, buf, sizeof(buf))) != RM_OK)
		return rv;
	if ((rv = bench_parse_stat(buf, &ticks)) != RM_OK)
		return rv;
	out->cpu_ns = ticks * (1000000000ULL / (uint64_t)(hz > 0 ? hz : 100));
	if ((rv = bench_proc_clock(pid, &out->clock_ns)) != RM_OK)
		return rv;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((rv = bench_slurp(path, buf, sizeof(buf))) != RM_OK)
		return rv;
	return bench_parse_status(buf, &out->hwm_kb, &out->rss_kb);
}

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_quantile(double *v, size_t n, double q)
{
	double r;
	size_t k;

	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), bench_cmp_double);
	if (q <= 0)
		return v[0];
	if (q >= 1)
		return v[n - 1];
	r = ceil(q * (double)n - 1e-9);
	k = r < 1 ? 1 : (size_t)r;
	return v[k - 1];
}

double bench_median(double *v, size_t n)
{
	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bench_name_index(const char *s, const char *const *names, uint32_t n, uint32_t *out)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = i;
			return 1;
		}
	}
	return 0;
}
