/*
 * ctl_time.c - parsing of rametrctl's time arguments (RFC 3339, 'now',
 * durations before now (rm_dur.h), Unix seconds) into Unix nanoseconds, and RFC 3339
 * formatting for display, on the calendar arithmetic of rm_date.h (no
 * timegm/gmtime: no dependence on TZ or libc ranges).
 */
#include <stdio.h>
#include <string.h>

#include "ctl_time.h"
#include "rm_date.h"
#include "rm_dur.h"
#include "rm_err.h"
#include "banned.h"

#define NS 1000000000LL

static int ctl_is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned ctl_days_in_month(int64_t y, unsigned m)
{
	static const unsigned dim[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	return m == 2 && ctl_is_leap(y) ? 29 : dim[m - 1];
}

/* Reads exactly n digits at *p into *v and advances; 0 if not n digits. */
static int ctl_digits(const char **p, int n, unsigned *v)
{
	int i;

	*v = 0;
	for (i = 0; i < n; i++) {
		if ((*p)[i] < '0' || (*p)[i] > '9')
			return 0;
		*v = *v * 10 + (unsigned)((*p)[i] - '0');
	}
	*p += n;
	return 1;
}

static int ctl_fail(const char **why, const char *reason)
{
	if (why)
		*why = reason;
	return RM_EINVAL;
}

/* Parses a run of digits (at least one) into *v; 0 on overflow or none. */
static int ctl_uint(const char **p, uint64_t *v)
{
	const char *s = *p;

	*v = 0;
	if (*s < '0' || *s > '9')
		return 0;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (*v > (UINT64_MAX - 9) / 10)
			return 0;
		*v = *v * 10 + (uint64_t)(*s - '0');
	}
	*p = s;
	return 1;
}

static int ctl_parse_rfc3339(const char *s, int64_t *out, const char **why)
{
	const char *p = s;
	unsigned y, mo, d, h, mi, sec, oh = 0, om = 0;
	int64_t secs, frac = 0, ns;
	int fd = 0, sign = 0;

	if (!ctl_digits(&p, 4, &y) || *p++ != '-' || !ctl_digits(&p, 2, &mo) || *p++ != '-' ||
	    !ctl_digits(&p, 2, &d))
		return ctl_fail(why, "expected YYYY-MM-DDThh:mm:ssZ");
	if (*p != 'T' && *p != 't' && *p != ' ')
		return ctl_fail(why, "expected 'T' between date and time");
	p++;
	if (!ctl_digits(&p, 2, &h) || *p++ != ':' || !ctl_digits(&p, 2, &mi) || *p++ != ':' ||
	    !ctl_digits(&p, 2, &sec))
		return ctl_fail(why, "expected YYYY-MM-DDThh:mm:ssZ");
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return ctl_fail(why, "expected digits after '.'");
		for (; *p >= '0' && *p <= '9'; p++, fd++)
			if (fd < 9)
				frac = frac * 10 + (*p - '0');
		for (; fd < 9; fd++)
			frac *= 10;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p++ == '-' ? -1 : 1;
		if (!ctl_digits(&p, 2, &oh) || *p++ != ':' || !ctl_digits(&p, 2, &om))
			return ctl_fail(why, "expected a +hh:mm or -hh:mm offset");
		if (oh > 23 || om > 59)
			return ctl_fail(why, "offset out of range");
	} else {
		return ctl_fail(why, "expected 'Z' or a +hh:mm / -hh:mm offset");
	}
	if (*p)
		return ctl_fail(why, "trailing characters");
	if (mo < 1 || mo > 12)
		return ctl_fail(why, "month out of range");
	if (d < 1 || d > ctl_days_in_month(y, mo))
		return ctl_fail(why, "day out of range");
	if (h > 23 || mi > 59 || sec > 59)
		return ctl_fail(why, "time of day out of range");

	secs = rm_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
	secs -= sign * (int64_t)(oh * 3600 + om * 60);
	if (__builtin_mul_overflow(secs, NS, &ns) || __builtin_add_overflow(ns, frac, &ns))
		return ctl_fail(why, "out of range (years 1678 to 2262)");
	*out = ns;
	return RM_OK;
}

int ctl_time_parse(const char *s, int64_t now_ns, int64_t *out_ns, const char **why)
{
	const char *p;
	uint64_t n, d;

	if (why)
		*why = NULL;
	if (!s || !out_ns)
		return ctl_fail(why, "missing");
	if (!*s)
		return ctl_fail(why, "empty");
	if (strcmp(s, "now") == 0) {
		*out_ns = now_ns;
		return RM_OK;
	}
	p = s;
	if (ctl_uint(&p, &n) && *p == '\0') {
		if (n > (uint64_t)(INT64_MAX / NS))
			return ctl_fail(why, "out of range");
		*out_ns = (int64_t)n * NS;
		return RM_OK;
	}
	if (rm_dur_parse(s, 0, &d, NULL) == RM_OK) {
		if (d > (uint64_t)INT64_MAX || __builtin_sub_overflow(now_ns, (int64_t)d, out_ns))
			return ctl_fail(why, "out of range");
		return RM_OK;
	}
	if (s[0] >= '0' && s[0] <= '9' && strchr(s, '-'))
		return ctl_parse_rfc3339(s, out_ns, why);
	return ctl_fail(why, "expected RFC 3339, 'now', a duration like 10m, or Unix seconds");
}

char *ctl_time_format(int64_t ns, char *buf, size_t len)
{
	int64_t secs = ns / NS, rem = ns % NS, days, sod, y;
	unsigned m, d;

	if (rem < 0) {
		rem += NS;
		secs--;
	}
	days = secs / 86400;
	sod = secs % 86400;
	if (sod < 0) {
		sod += 86400;
		days--;
	}
	rm_civil_from_days(days, &y, &m, &d);
	if (rem)
		snprintf(buf, len, "%04lld-%02u-%02uT%02d:%02d:%02d.%09lldZ", (long long)y, m, d,
			 (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60), (long long)rem);
	else
		snprintf(buf, len, "%04lld-%02u-%02uT%02d:%02d:%02dZ", (long long)y, m, d,
			 (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60));
	return buf;
}

/* The start of the month `add` months after the month of day z. */
static int64_t ctl_month_start(int64_t z, int add)
{
	int64_t y;
	unsigned m, d;
	int64_t mm;

	rm_civil_from_days(z, &y, &m, &d);
	mm = y * 12 + (m - 1) + add;
	y = mm >= 0 ? mm / 12 : (mm - 11) / 12;
	return rm_days_from_civil(y, (unsigned)(mm - y * 12) + 1, 1);
}

int ctl_period_parse(const char *s, int64_t now_ns, int64_t *start_ns, int64_t *end_ns,
		     const char **why)
{
	int64_t today = (now_ns >= 0 ? now_ns : now_ns - (86400 * NS - 1)) / (86400 * NS);
	int64_t a, b;
	unsigned y, m, d;
	const char *p = s;

	if (!s || !start_ns || !end_ns)
		return ctl_fail(why, "missing value");
	if (strcmp(s, "today") == 0) {
		a = today;
		b = today + 1;
	} else if (strcmp(s, "yesterday") == 0) {
		a = today - 1;
		b = today;
	} else if (strcmp(s, "this-month") == 0) {
		a = ctl_month_start(today, 0);
		b = ctl_month_start(today, 1);
	} else if (strcmp(s, "last-month") == 0) {
		a = ctl_month_start(today, -1);
		b = ctl_month_start(today, 0);
	} else if (strlen(s) == 7 && ctl_digits(&p, 4, &y) && *p++ == '-' && ctl_digits(&p, 2, &m)) {
		if (m < 1 || m > 12)
			return ctl_fail(why, "month out of range");
		a = rm_days_from_civil(y, m, 1);
		b = ctl_month_start(a, 1);
	} else if (strlen(s) == 10 && (p = s, ctl_digits(&p, 4, &y)) && *p++ == '-' &&
		   ctl_digits(&p, 2, &m) && *p++ == '-' && ctl_digits(&p, 2, &d)) {
		if (m < 1 || m > 12 || d < 1 || d > ctl_days_in_month(y, m))
			return ctl_fail(why, "date out of range");
		a = rm_days_from_civil(y, m, d);
		b = a + 1;
	} else {
		return RM_ENOENT;
	}
	if (a < -106751 || b > 106751)
		return ctl_fail(why, "outside the representable range");
	*start_ns = a * 86400 * NS;
	*end_ns = b * 86400 * NS;
	return RM_OK;
}

int ctl_step_parse(const char *s, int64_t *step_ns, const char **why)
{
	uint64_t v;

	if (!s || !step_ns)
		return ctl_fail(why, "missing value");
	if (rm_dur_parse(s, 0, &v, why) != RM_OK)
		return RM_EINVAL;
	if (v < (uint64_t)NS || v % (uint64_t)NS)
		return ctl_fail(why, "not a whole number of seconds");
	if (v > 3660ULL * 86400 * NS)
		return ctl_fail(why, "longer than ten years");
	*step_ns = (int64_t)v;
	return RM_OK;
}
