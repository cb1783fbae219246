/*
 * ctl_usage.h - what `rametrctl usage` makes of the storage rows: grouping
 * by server, CE and/or resource (per period), the top N, and printing with
 * human units in the table (core-h down to core-ms and average cores for
 * cpu, B, KiB, MiB, GiB for bytes) and raw integers with explicit periods
 * in JSON and CSV.
 * ctl_usage_group is pure; the printers write to the given stream only.
 */
#ifndef RM_CTL_USAGE_H
#define RM_CTL_USAGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ctl_out.h"
#include "st.h"

/* What rows are grouped by (bits); resource is always kept apart, since
 * the resources' units differ. */
enum { CTL_BY_SERVER = 1, CTL_BY_CE = 2, CTL_BY_RESOURCE = 4 };

/* Parses "server,ce" (any of server, ce, resource, comma-separated) and
 * ORs the bits into *by. RM_OK, or RM_EINVAL (logs nothing). */
int ctl_by_parse(const char *s, unsigned *by);

struct ctl_urow {
	char server[64];          /* "" when not grouped by server */
	char ce[64];              /* "" when not grouped by CE */
	enum st_resource resource;
	int64_t start_ns, end_ns; /* the period [start, end) */
	int64_t value;            /* sum; the unaccountable row may be negative */
	uint64_t total;           /* U of the group's servers over the period */
};

/*
 * Groups st_query_usage / st_query_usage_step rows (in their order) by `by`
 * (CTL_BY_*). Rows with win_len_ns 0 are per range: their period is
 * [since, until). Without CTL_BY_CE the unaccountable share is summed with
 * the CEs (so the value is U) unless show_v = 0, which leaves it out. top > 0
 * keeps, per period, resource (and server when grouped by it), the top CEs
 * by value and the unaccountable row; *left_out (if not NULL) is set to the
 * number of rows it left out. Sorted by period, server, resource, value
 * descending, unaccountable last. RM_OK with *out malloc'd (NULL when
 * *nout = 0), RM_EINVAL (a sum beyond int64), RM_ENOMEM. Pure.
 */
int ctl_usage_group(const struct st_row *rows, size_t n, unsigned by, int show_v, size_t top,
		    int64_t since, int64_t until, struct ctl_urow **out, size_t *nout, size_t *left_out);

/*
 * Prints grouped rows. Table: [PERIOD when per_period] [SERVER] [CE]
 * RESOURCE AMOUNT AVERAGE SHARE (share of the group's U). JSON/CSV:
 * period_start, period_end (RFC 3339 UTC, end exclusive), [server], [ce],
 * resource, value, total, unit -- raw integers (ns or bytes). Returns RM_OK,
 * RM_EIO (write error), RM_ENOMEM.
 */
int ctl_usage_print(FILE *f, enum ctl_fmt fmt, const struct ctl_urow *r, size_t n, unsigned by,
		    int per_period);

/*
 * Grouped rows of whole days straight from st_query_days groups (grouped
 * by server, with or without CE; not summed over servers): the same rows
 * and order as ctl_usage_group over st_query_usage_step(1 day) rows and
 * ctl_usage_print, without a row per CE in memory. ctl_days_init sets up
 * x for stream f; ctl_days_add is st_query_days' callback (RM_OK,
 * RM_EINVAL for a sum beyond int64, RM_ENOMEM); JSON/CSV records are
 * printed as they come, table rows (the top `top` CEs per group when top
 * > 0, left_out counting the others) kept (names interned) and printed by
 * ctl_days_finish (RM_OK, RM_EIO, RM_ENOMEM); ctl_days_free frees them.
 */
struct ctl_days_int;
struct ctl_days {
	FILE *f;
	enum ctl_fmt fmt;
	unsigned by;
	int show_v;
	size_t top;
	size_t n;              /* rows kept or printed */
	size_t left_out;
	struct ctl_days_int *in;
};

void ctl_days_init(struct ctl_days *x, FILE *f, enum ctl_fmt fmt, unsigned by, int show_v, size_t top);
int ctl_days_add(void *x, const struct st_day *d);
int ctl_days_finish(struct ctl_days *x);
void ctl_days_free(struct ctl_days *x);

#endif
