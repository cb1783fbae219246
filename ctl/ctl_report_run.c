/*
 * ctl_report_run.c - the driver of 'rametrctl report': its options, the
 * storage queries the report needs (the period, the previous period, V's
 * reasons, one query per chart bucket), and the output file, written to a
 * temporary name and renamed so that a reader never sees half a report.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl_report.h"
#include "ctl_time.h"
#include "rm_clock.h"
#include "rm_err.h"
#include "st.h"
#include "banned.h"

#define RPR_DEFAULT_DB "/var/lib/rametr/rametr.db"
#define RPR_EXIT_OK 0
#define RPR_EXIT_FAIL 1
#define RPR_EXIT_USAGE 2

static void rpr_help(FILE *f)
{
	fprintf(f,
		"usage: rametrctl report [--db PATH] [--since T] [--until T] [--server S] -o FILE\n"
		"\n"
		"Writes one self-contained HTML file (no scripts, nothing fetched: it can be\n"
		"mailed as an attachment) showing, per server, CPU, network and disk by tenant\n"
		"over time as stacked areas with the unaccountable share on top, a table of\n"
		"the tenants' usage, share and change against the previous period of the same\n"
		"length, and the unaccountable share by reason.\n"
		"\n"
		"Options:\n"
		"  --db PATH           the database (else $RAMETR_DB, else " RPR_DEFAULT_DB ")\n"
		"  --since T           start of the period (default 7d: seven days before now)\n"
		"  --until T           end of the period (default now)\n"
		"  --server S          only server S\n"
		"  -o, --output FILE   where to write the report ('-' = standard output)\n"
		"  -h, --help          this help\n"
		"\n"
		"Times as for 'rametrctl usage' (RFC 3339, Unix seconds, now, 30m, 2h, 7d).\n"
		"Charts have at most %d points: the bucket is the shortest of 1 s, 2 s, 5 s,\n"
		"... 1 h, 2 h, ... 1 d, 7 d that fits the period.\n",
		CTL_REPORT_MAX_POINTS);
}

static int rpr_usage_error(void)
{
	fprintf(stderr, "hint: see 'rametrctl report --help'\n");
	return RPR_EXIT_USAGE;
}

static int rpr_query(st_db *db, const char *server, int64_t since, int64_t until, struct st_row **rows, size_t *n)
{
	struct st_query q = { .since_ns = since, .until_ns = until, .server = server, .resource = -1 };

	return st_query_usage(db, &q, rows, n);
}

/* Builds the report from the database. RM_OK and *out, or an error (logged by storage). */
static int rpr_build(st_db *db, const struct ctl_report_period *p, const char *server, struct ctl_report **out)
{
	struct st_query q = { .since_ns = p->since_ns, .until_ns = p->until_ns, .server = server, .resource = -1 };
	int64_t span = p->until_ns - p->since_ns, pstart;
	struct st_row *cur = NULL, *prev = NULL, *why = NULL, *rows;
	size_t ncur = 0, nprev = 0, nwhy = 0, n, b;
	int rv;

	if (__builtin_sub_overflow(p->since_ns, span, &pstart))
		pstart = INT64_MIN;
	if ((rv = rpr_query(db, server, p->since_ns, p->until_ns, &cur, &ncur)) != 0 ||
	    (rv = rpr_query(db, server, pstart, p->since_ns, &prev, &nprev)) != 0 ||
	    (rv = st_query_unacct(db, &q, &why, &nwhy)) != 0 ||
	    (rv = ctl_report_new(out, p, cur, ncur, prev, nprev, why, nwhy)) != 0)
		goto done;
	for (b = 0; b < p->nbuckets && ncur; b++) {
		int64_t t0 = p->since_ns + (int64_t)b * p->bucket_ns;
		int64_t t1 = p->until_ns - t0 > p->bucket_ns ? t0 + p->bucket_ns : p->until_ns;

		if ((rv = rpr_query(db, server, t0, t1, &rows, &n)) != 0)
			break;
		rv = ctl_report_add_bucket(*out, b, rows, n);
		st_rows_free(rows);
		if (rv)
			break;
	}
	if (rv) {
		ctl_report_free(*out);
		*out = NULL;
	}
done:
	st_rows_free(cur);
	st_rows_free(prev);
	st_rows_free(why);
	return rv;
}

static int rpr_write(const struct ctl_report *r, const char *path)
{
	char tmp[4096];
	FILE *f;
	int rv;

	if (strcmp(path, "-") == 0) {
		rv = ctl_report_write(r, stdout);
		if (rv == RM_OK && fflush(stdout) != 0)
			rv = RM_EIO;
		if (rv)
			rm_log_error("failed to write the report to standard output");
		return rv;
	}
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp%ld", path, (long)getpid()) >= sizeof(tmp)) {
		rm_log_error("failed to open '%s': path too long", path);
		return RM_EINVAL;
	}
	if (!(f = fopen(tmp, "w"))) {
		rm_log_error("failed to open '%s': %s", tmp, strerror(errno));
		return RM_EIO;
	}
	rv = ctl_report_write(r, f);
	if (fclose(f) != 0)
		rv = RM_EIO;
	if (rv == RM_OK && rename(tmp, path) != 0) {
		rm_log_error("failed to rename '%s' to '%s': %s", tmp, path, strerror(errno));
		rv = RM_EIO;
	} else if (rv) {
		rm_log_error("failed to write '%s'", tmp);
	}
	if (rv)
		unlink(tmp);
	return rv;
}

int ctl_report_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "db", required_argument, NULL, 'D' },
		{ "since", required_argument, NULL, 'S' },
		{ "until", required_argument, NULL, 'U' },
		{ "server", required_argument, NULL, 's' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *db_path = NULL, *since = "7d", *until = "now", *server = NULL, *output = NULL, *why;
	struct ctl_report_period p = { 0 };
	struct ctl_report *r = NULL;
	st_db *db = NULL;
	int64_t span;
	int ch, rv;

	p.generated_ns = rm_clock_unix_ns();
	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'D': db_path = optarg; break;
		case 'S': since = optarg; break;
		case 'U': until = optarg; break;
		case 's': server = optarg; break;
		case 'o': output = optarg; break;
		case 'h': rpr_help(stdout); return RPR_EXIT_OK;
		case ':':
			rm_log_error("option '%s' requires a value", argv[optind - 1]);
			return rpr_usage_error();
		default:
			rm_log_error("unknown option '%s'", argv[optind - 1]);
			return rpr_usage_error();
		}
	}
	if (optind < argc) {
		rm_log_error("unexpected argument '%s'", argv[optind]);
		return rpr_usage_error();
	}
	if (!output || !output[0]) {
		rm_log_error("no output file: give -o FILE (or -o - for standard output)");
		return rpr_usage_error();
	}
	if (server && (!server[0] || strlen(server) > ST_NAME_MAX)) {
		rm_log_error("invalid --server '%s': must be 1 to %d bytes", server, ST_NAME_MAX);
		return rpr_usage_error();
	}
	if (ctl_time_parse(since, p.generated_ns, &p.since_ns, &why) != RM_OK) {
		rm_log_error("invalid time '%s' for --since: %s", since, why);
		return rpr_usage_error();
	}
	if (ctl_time_parse(until, p.generated_ns, &p.until_ns, &why) != RM_OK) {
		rm_log_error("invalid time '%s' for --until: %s", until, why);
		return rpr_usage_error();
	}
	if (p.until_ns <= p.since_ns) {
		rm_log_error("--since '%s' is not before --until '%s'", since, until);
		return rpr_usage_error();
	}
	if (__builtin_sub_overflow(p.until_ns, p.since_ns, &span)) {
		rm_log_error("the period from '%s' to '%s' is too long", since, until);
		return rpr_usage_error();
	}
	p.bucket_ns = ctl_report_bucket_ns(span, 1000000000LL, CTL_REPORT_MAX_POINTS);
	p.nbuckets = ctl_report_nbuckets(span, p.bucket_ns);
	if (!db_path)
		db_path = getenv("RAMETR_DB");
	if (!db_path || !db_path[0])
		db_path = RPR_DEFAULT_DB;
	if (st_open(&db, db_path, ST_OPEN_READONLY) != RM_OK)
		return RPR_EXIT_FAIL;
	rv = rpr_build(db, &p, server, &r);
	st_close(db);
	if (rv) {
		rm_log_error("failed to build the report: %s", rm_strerror(rv));
		return RPR_EXIT_FAIL;
	}
	rv = rpr_write(r, output);
	ctl_report_free(r);
	return rv ? RPR_EXIT_FAIL : RPR_EXIT_OK;
}
