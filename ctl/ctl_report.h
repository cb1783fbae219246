/*
 * ctl_report.h - the HTML report of rametrctl: turns storage query rows
 * into one self-contained HTML document (inline CSS and SVG, no script, no
 * fetch) that shows, per server, CPU, network and disk by tenant over time
 * as stacked areas with the unaccountable share V on top, the tenants'
 * usage, share and change against the previous period, and V by reason.
 *
 * The pure part (ctl_report_new .. ctl_report_write) takes rows and writes
 * text: no clock, no database, no file of its own. ctl_report_main() is the
 * driver (ctl_report_run.c): options, queries, the output file.
 *
 * Not thread-safe per report; separate reports are independent.
 */
#ifndef RM_CTL_REPORT_H
#define RM_CTL_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "st.h"

#define CTL_REPORT_MAX_POINTS 240 /* buckets per chart at most */
#define CTL_REPORT_TOP 8          /* tenants drawn as their own layer */

/* The period of a report: [since_ns, until_ns), compared with the previous
 * period of the same length [2 * since_ns - until_ns, since_ns). The charts
 * have nbuckets buckets [since_ns + i * bucket_ns, ...), the last one cut
 * at until_ns. generated_ns is printed as the time of the report. */
struct ctl_report_period {
	int64_t since_ns, until_ns;
	int64_t bucket_ns;
	size_t nbuckets;
	int64_t generated_ns;
};

/*
 * The bucket width for a period of span_ns: the smallest of 1 s, 2 s, 5 s,
 * 10 s, 15 s, 30 s, 1, 2, 5, 10, 15, 30 min, 1, 2, 3, 6, 12 h, 1, 2, 7,
 * 14, 28 days, then multiples of 28 days, that is >= min_ns and gives at
 * most max_points buckets. span_ns <= 0 or max_points 0 gives 1 s. Pure.
 */
int64_t ctl_report_bucket_ns(int64_t span_ns, int64_t min_ns, size_t max_points);

/* Number of buckets of width bucket_ns covering span_ns (at least 1). */
size_t ctl_report_nbuckets(int64_t span_ns, int64_t bucket_ns);

struct ctl_report;

/*
 * Starts a report over period p from the rows of the whole period:
 * cur = st_query_usage() of [since, until), prev = st_query_usage() of the
 * previous period, why = st_query_unacct() of [since, until) (all per
 * range, not per window; any of them may be empty). The servers and
 * tenants of the report are those in cur. Copies what it needs (the rows
 * may be freed after the call). Returns RM_OK and *out (free with
 * ctl_report_free), RM_EINVAL (NULL out/p, bucket_ns <= 0, nbuckets 0 or
 * above CTL_REPORT_MAX_POINTS * 4, until < since, a span beyond int64) or
 * RM_ENOMEM.
 */
int ctl_report_new(struct ctl_report **out, const struct ctl_report_period *p, const struct st_row *cur,
		   size_t ncur, const struct st_row *prev, size_t nprev, const struct st_row *why,
		   size_t nwhy);

/*
 * Adds the rows of bucket b (st_query_usage() per range over that bucket's
 * time span) to the charts. Rows of servers or tenants not in cur are
 * ignored. RM_OK, RM_EINVAL (b >= nbuckets).
 */
int ctl_report_add_bucket(struct ctl_report *r, size_t b, const struct st_row *rows, size_t n);

/*
 * Writes the HTML document to f. Every name from the database is HTML
 * escaped. Each table cell holding an amount carries its raw integer
 * (ns or bytes) in a data-raw attribute, so programs can check the
 * document against the database. Returns RM_OK or RM_EIO (write error).
 */
int ctl_report_write(const struct ctl_report *r, FILE *f);

void ctl_report_free(struct ctl_report *r);

/* Writes s to f with &, <, >, " and ' escaped for HTML text and attribute
 * values. Returns 0 or EOF. */
int ctl_html_escape(FILE *f, const char *s);

/* Runs 'report' with argv[0] = "report" (ctl_report_run.c). Returns the
 * exit code: 0 written, 1 failure (database, output file), 2 bad arguments. */
int ctl_report_main(int argc, char **argv);

#endif
