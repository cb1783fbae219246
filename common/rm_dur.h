/*
 * rm_dur.h - the one grammar of durations in Rametr, shared by the
 * aggregator's configuration (horizon, lease, settle, kalman_q), the
 * collector's options (--window, --duration) and rametrctl's relative times
 * (--since 10m, --for 30s).
 *
 * Grammar (no leading or trailing blanks, no sign, no exponent):
 *
 *   duration = number [blanks] unit
 *            | number                   only with RM_DUR_BARE_SECONDS
 *   number   = digits [ "." digits ]
 *   unit     = "ns" | "us" | "ms" | "s" | "m" | "h" | "d"
 *   blanks   = one or more spaces or tabs
 *
 * e.g. "250ms", "5s", "1m", "2h", "30d", "1.5s", "200us", "10 s"; with
 * RM_DUR_BARE_SECONDS also "2" or "0.25" (seconds). A fraction is exact to
 * the nanosecond (digits past it are dropped, never rounded up). "m" is
 * minutes, "d" is 86400 s (no calendar). Ranges (at least 1 ms, not 0, ...)
 * are the caller's: the parser only refuses what does not fit in 64 bits.
 *
 * Pure functions: no clock, no locale, no global state; thread-safe.
 */
#ifndef RM_DUR_H
#define RM_DUR_H

#include <stdint.h>

#define RM_DUR_BARE_SECONDS 0x1  /* a number without a unit is seconds */

/*
 * Parses s into nanoseconds. Returns RM_OK with *out_ns set, or RM_EINVAL
 * (s NULL, empty or malformed, or the value above UINT64_MAX ns) with *why
 * (if why != NULL) pointing at a static lowercase reason and *out_ns
 * untouched. Logs nothing.
 */
int rm_dur_parse(const char *s, unsigned flags, uint64_t *out_ns, const char **why);

#endif
