/*
 * rm_dur.c - the duration grammar of rm_dur.h: reads a decimal number and a
 * unit into nanoseconds, exactly and with overflow checked.
 */
#include <string.h>

#include "rm_dur.h"
#include "rm_err.h"
#include "banned.h"

/* Unsigned 128-bit arithmetic for a fraction times its unit (a GCC/Clang
 * extension, as the fraction may have up to 18 digits). */
__extension__ typedef unsigned __int128 rm_dur_u128;

#define RM_DUR_FRAC_MAX 18 /* fraction digits read; further ones are dropped */

static int rm_dur_fail(const char **why, const char *reason)
{
	if (why)
		*why = reason;
	return RM_EINVAL;
}

int rm_dur_parse(const char *s, unsigned flags, uint64_t *out_ns, const char **why)
{
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = {
		{ "ns", 1ull },
		{ "us", 1000ull },
		{ "ms", 1000000ull },
		{ "s", 1000000000ull },
		{ "m", 60000000000ull },
		{ "h", 3600000000000ull },
		{ "d", 86400000000000ull },
	};
	const char *p = s;
	uint64_t whole = 0, frac = 0, frac_scale = 1, unit = 0, ns;
	size_t i;
	int nfrac = 0;
	rm_dur_u128 part;

	if (why)
		*why = NULL;
	if (!s || !out_ns)
		return rm_dur_fail(why, "missing");
	if (!*s)
		return rm_dur_fail(why, "empty");
	if (*p < '0' || *p > '9')
		return rm_dur_fail(why, "expected a number, e.g. 250ms, 5s, 1m, 2h, 30d");
	for (; *p >= '0' && *p <= '9'; p++)
		if (__builtin_mul_overflow(whole, 10, &whole) ||
		    __builtin_add_overflow(whole, (uint64_t)(*p - '0'), &whole))
			return rm_dur_fail(why, "out of range");
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return rm_dur_fail(why, "expected digits after '.'");
		for (; *p >= '0' && *p <= '9'; p++)
			if (nfrac < RM_DUR_FRAC_MAX) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				frac_scale *= 10;
				nfrac++;
			}
	}
	if (*p == '\0') {
		if (!(flags & RM_DUR_BARE_SECONDS))
			return rm_dur_fail(why, "missing unit (ns, us, ms, s, m, h or d)");
		unit = 1000000000ull;
	} else {
		while (*p == ' ' || *p == '\t')
			p++;
		for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (strcmp(p, units[i].name) == 0)
				unit = units[i].ns;
		if (!unit)
			return rm_dur_fail(why, "unknown unit (ns, us, ms, s, m, h or d)");
	}
	if (__builtin_mul_overflow(whole, unit, &ns))
		return rm_dur_fail(why, "out of range");
	part = (rm_dur_u128)frac * unit / frac_scale; /* < unit: fits */
	if (__builtin_add_overflow(ns, (uint64_t)part, &ns))
		return rm_dur_fail(why, "out of range");
	*out_ns = ns;
	return RM_OK;
}
