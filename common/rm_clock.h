/*
 * rm_clock.h - reading the clocks in nanoseconds: Unix (wall-clock) time,
 * as windows, command expiries and stored rows carry it, and monotonic
 * time, for intervals and timeouts. Pure logic takes times as arguments;
 * drivers read them here.
 *
 * Thread-safe.
 */
#ifndef RM_CLOCK_H
#define RM_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_REALTIME as Unix ns (fits int64 until 2262). */
int64_t rm_clock_unix_ns(void);

/* CLOCK_MONOTONIC in ns (the clock of bpf_ktime_get_ns). */
uint64_t rm_clock_mono_ns(void);

/* *ts = CLOCK_MONOTONIC now + ms, normalised: a deadline for pthread_cond_timedwait on a
 * condition variable whose clock is CLOCK_MONOTONIC. */
void rm_clock_mono_deadline(struct timespec *ts, int ms);

#endif
