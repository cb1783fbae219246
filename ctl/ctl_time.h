/*
 * ctl_time.h - the time arguments of rametrctl (--since, --until) and the
 * display of window starts. Pure functions: no clock, no locale, no global
 * state; thread-safe.
 */
#ifndef RM_CTL_TIME_H
#define RM_CTL_TIME_H

#include <stddef.h>
#include <stdint.h>

/*
 * Parses a time argument into Unix nanoseconds. Accepted forms:
 *   now                        now_ns
 *   <digits>                   Unix seconds, e.g. 1700000000
 *   <duration>                 now minus a duration in rm_dur.h's grammar
 *                              (unit required), e.g. 30s, 10m, 2h, 7d, 1.5h
 *   YYYY-MM-DDThh:mm:ss[.f]Z   RFC 3339, with Z or a +hh:mm / -hh:mm offset,
 *                              optional fraction (digits past ns are dropped);
 *                              't', 'z' and ' ' as separator are accepted too;
 *                              leap second 60 is refused
 * Returns RM_OK with *out_ns set, or RM_EINVAL (NULL or malformed input,
 * fields out of range, result outside int64 ns, i.e. outside 1677..2262) with
 * *why (if why != NULL) pointing at a static lowercase reason. Logs nothing.
 */
int ctl_time_parse(const char *s, int64_t now_ns, int64_t *out_ns, const char **why);

/* Formats ns as RFC 3339 UTC ("2023-11-14T22:13:20Z", with ".fffffffff" when
 * ns is not a whole second) into buf; truncates to len. Returns buf. */
char *ctl_time_format(int64_t ns, char *buf, size_t len);

#endif
