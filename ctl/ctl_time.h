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

/*
 * Parses a calendar period: today, yesterday, this-month, last-month (UTC),
 * YYYY-MM (a month) or YYYY-MM-DD (a day) into [*start_ns, *end_ns).
 * Returns RM_OK; RM_ENOENT (nothing set) when s is not of these forms, so
 * that the caller can try ctl_time_parse; RM_EINVAL with *why for a
 * calendar form out of range. Logs nothing.
 */
int ctl_period_parse(const char *s, int64_t now_ns, int64_t *start_ns, int64_t *end_ns,
		     const char **why);

/* Parses a step, a duration (rm_dur.h: 30s, 5m, 1h, 1d, 7d) of whole
 * seconds, at least 1 s and at most ten years, into ns. RM_OK or RM_EINVAL
 * with *why. Logs nothing. */
int ctl_step_parse(const char *s, int64_t *step_ns, const char **why);

#endif
