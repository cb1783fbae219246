/*
 * rm_date.h - the proleptic Gregorian calendar as day counts: days since
 * 1970-01-01 from a date and back (H. Hinnant's algorithms), for code that
 * must not depend on TZ or libc's time ranges (rametrctl's times, the
 * calendar month series of storage). Pure, thread-safe.
 */
#ifndef RM_DATE_H
#define RM_DATE_H

#include <stdint.h>

/* Days since 1970-01-01 of y-m-d (m 1..12, d 1..31; not checked). */
int64_t rm_days_from_civil(int64_t y, unsigned m, unsigned d);

/* The date of day z (days since 1970-01-01). */
void rm_civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d);

#endif
