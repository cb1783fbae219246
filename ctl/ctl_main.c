/*
 * ctl_main.c - the rametrctl program: command line parsing (commands
 * usage, unaccountable, splits, bill, check; their options and help), choice
 * of the database (--db, $RAMETR_DB, the default path), running the storage
 * queries, and the driver of bill (rate card file, the --since-last job).
 * Owns the exit codes: 0 ok, 1 failure (database, unbalanced windows in
 * check, unknown server or CE), 2 bad arguments.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl_bill.h"
#include "ctl_out.h"
#include "ctl_report.h"
#include "ctl_state.h"
#include "ctl_throttle.h"
#include "ctl_time.h"
#include "ctl_usage.h"
#include "rm_err.h"
#include "rm_version.h"
#include "st.h"
#include "st_est.h"
#include "st_rollup.h"
#include "banned.h"

#define CTL_DEFAULT_DB "/var/lib/rametr/rametr.db"
#define CTL_EXIT_OK 0
#define CTL_EXIT_FAIL 1
#define CTL_EXIT_USAGE 2
#define CTL_DAY_NS (86400LL * 1000000000LL)
#define CTL_TABLE_TOP 10 /* usage: CEs per group a table shows unless --top says */

/* Options, as bits of what each command accepts. */
enum {
	O_DB = 1 << 0,
	O_SINCE = 1 << 1,
	O_UNTIL = 1 << 2,
	O_SERVER = 1 << 3,
	O_CE = 1 << 4,
	O_RESOURCE = 1 << 5,
	O_OUTPUT = 1 << 6,
	O_PER_WINDOW = 1 << 7,
	O_NO_V = 1 << 8,
	O_HELP = 1 << 9,
	O_SOURCE = 1 << 10,
	O_STEP = 1 << 11,
	O_GROUP = 1 << 12,
	O_TOP = 1 << 13,
	O_BILL = 1 << 14, /* --period --rates --share-unaccountable --since-last --state --out */
};

struct ctl_opts {
	const char *db;
	int64_t now_ns, since_ns, until_ns;
	const char *server, *ce;
	int resource;
	enum ctl_fmt fmt;
	int per_window, show_v, fmt_given;
	const char *source; /* NULL = measured, else ST_EST_LR / ST_EST_KALMAN */
	int64_t step_ns;    /* usage: 0 = one row per range */
	unsigned by;        /* usage: CTL_BY_* */
	size_t top;         /* usage: 0 = all */
	int top_given;      /* usage: --top given (else a table shows the top CTL_TABLE_TOP) */
	const char *rates;  /* bill: rate card file, NULL = all prices 0 */
	enum ctl_share share;
	int since_last;     /* bill: the job */
	int charge_whole;   /* bill: one charge period = the billing period (step_ns 0) */
	const char *state, *outdir;
	int since_given;
};

struct ctl_cmd {
	const char *name;
	unsigned opts;
	const char *summary;
	const char *synopsis;
	int (*run)(st_db *db, const struct ctl_opts *o);
};

static const char ctl_help_times[] =
	"Times (--since, --until) select windows by their start, since <= start < until:\n"
	"  today, yesterday, this-month, last-month (UTC)      calendar periods: their\n"
	"  2026-11, 2026-11-05                                   start; as --since without\n"
	"                                                        --until, also their end\n"
	"  2024-05-01T12:00:00Z, 2024-05-01T14:00:00.5+02:00   RFC 3339\n"
	"  now                                                   the current time\n"
	"  30s, 10m, 2h, 7d                                      that long before now\n"
	"  1714564800                                            Unix seconds\n"
	"Defaults: --since 0 (everything), --until now; usage without --since: from the\n"
	"first stored window to the end of the last (or to --until).\n";

static const char ctl_help_db[] =
	"The database is --db PATH, else $RAMETR_DB, else " CTL_DEFAULT_DB ";\n"
	"it is opened read-only.\n";

static void ctl_hint(const char *cmd)
{
	if (cmd)
		fprintf(stderr, "hint: see 'rametrctl %s --help'\n", cmd);
	else
		fprintf(stderr, "hint: see 'rametrctl --help'\n");
}

static int ctl_usage_error(const char *cmd)
{
	ctl_hint(cmd);
	return CTL_EXIT_USAGE;
}

static void ctl_print_rows_err(const char *what, int rv)
{
	rm_log_error("failed to print %s: %s", what, rm_strerror(rv));
}

static void ctl_query(const struct ctl_opts *o, struct st_query *q)
{
	memset(q, 0, sizeof(*q));
	q->since_ns = o->since_ns;
	q->until_ns = o->until_ns;
	q->server = o->server;
	q->ce = o->ce;
	q->resource = o->resource;
	q->per_window = o->per_window;
}

/* The left-out note under a table that shows the top CEs by default. */
static void ctl_left_note(const struct ctl_opts *o, size_t top, size_t left)
{
	if (left && top != o->top)
		printf("(the %d largest CEs per period%s and resource; %zu smaller rows left out:\n"
		       " --top N for more, --top all or -o csv|json for every row)\n", CTL_TABLE_TOP,
		       o->by & CTL_BY_SERVER ? ", server" : "", left);
}

/* Usage per whole day grouped by server (and CE), from the packed days. */
static int ctl_run_days(st_db *db, const struct ctl_opts *o, const struct st_query *q, size_t top)
{
	struct ctl_days x;
	int rv;

	ctl_days_init(&x, stdout, o->fmt, o->by, o->show_v, top);
	rv = st_query_days(db, q, ctl_days_add, &x);
	if (rv == RM_EINVAL && x.in)
		rm_log_error("failed to group the usage: a sum exceeds the int64 limit");
	if (rv == RM_OK && (rv = ctl_days_finish(&x)) == RM_OK) {
		ctl_left_note(o, top, x.left_out);
		rv = ctl_flush(stdout);
		if (rv)
			ctl_print_rows_err("usage", rv);
	} else if (rv == RM_EIO || rv == RM_ENOMEM) {
		ctl_print_rows_err("usage", rv);
	}
	ctl_days_free(&x);
	return rv ? CTL_EXIT_FAIL : CTL_EXIT_OK;
}

/* Measured usage grouped per o->by (and per period of o->step_ns). */
static int ctl_run_grouped(st_db *db, const struct ctl_opts *o)
{
	struct ctl_urow *g;
	struct st_query q;
	struct st_row *rows;
	size_t n, ng, left = 0, top = o->top;
	int rv;

	/* a table is read by a person: by default the largest CEs only */
	if (o->fmt == CTL_FMT_TABLE && !o->top_given && (o->by & CTL_BY_CE))
		top = CTL_TABLE_TOP;
	ctl_query(o, &q);
	q.per_window = 0;
	/* whole days per server: one packed row per server, resource and day */
	if (o->step_ns == CTL_DAY_NS && (o->by & CTL_BY_SERVER) && !o->ce)
		return ctl_run_days(db, o, &q, top);
	/* without servers in the rows, storage sums them over servers */
	if (!(o->by & CTL_BY_SERVER))
		rv = st_query_usage_all(db, &q, o->step_ns, &rows, &n);
	else
		rv = o->step_ns ? st_query_usage_step(db, &q, o->step_ns, &rows, &n)
				: st_query_usage(db, &q, &rows, &n);
	if (rv != 0)
		return CTL_EXIT_FAIL;
	rv = ctl_usage_group(rows, n, o->by, o->show_v, top, o->since_ns, o->until_ns, &g, &ng, &left);
	st_rows_free(rows);
	if (rv) {
		rm_log_error("failed to group the usage: %s", rv == RM_EINVAL ? "a sum exceeds the int64 limit"
									      : rm_strerror(rv));
		return CTL_EXIT_FAIL;
	}
	rv = ctl_usage_print(stdout, o->fmt, g, ng, o->by, o->step_ns != 0);
	free(g);
	if (rv == RM_OK)
		ctl_left_note(o, top, left);
	if (rv || (rv = ctl_flush(stdout)) != 0) {
		ctl_print_rows_err("usage", rv);
		return CTL_EXIT_FAIL;
	}
	return CTL_EXIT_OK;
}

static int ctl_run_usage(st_db *db, const struct ctl_opts *o)
{
	struct st_query q;
	struct st_row *rows;
	size_t n;
	int rv;

	if (!o->source && !o->per_window)
		return ctl_run_grouped(db, o);
	ctl_query(o, &q);
	rv = o->source ? st_query_est(db, &q, o->source, &rows, &n) : st_query_usage(db, &q, &rows, &n);
	if (rv != 0)
		return CTL_EXIT_FAIL;
	rv = ctl_print_usage_src(stdout, o->fmt, rows, n, o->per_window, o->show_v, o->source);
	st_rows_free(rows);
	if (rv) {
		ctl_print_rows_err("usage", rv);
		return CTL_EXIT_FAIL;
	}
	return CTL_EXIT_OK;
}

static int ctl_run_unacct(st_db *db, const struct ctl_opts *o)
{
	struct st_query q;
	struct st_row *rows;
	size_t n;
	int rv;

	ctl_query(o, &q);
	if ((rv = st_query_unacct(db, &q, &rows, &n)) != 0)
		return CTL_EXIT_FAIL;
	rv = ctl_print_unacct(stdout, o->fmt, rows, n, o->per_window);
	st_rows_free(rows);
	if (rv) {
		ctl_print_rows_err("the unaccountable breakdown", rv);
		return CTL_EXIT_FAIL;
	}
	return CTL_EXIT_OK;
}

static int ctl_run_splits(st_db *db, const struct ctl_opts *o)
{
	struct st_query q;
	struct st_row *rows;
	size_t n;
	int rv;

	ctl_query(o, &q);
	if ((rv = st_query_splits(db, &q, &rows, &n)) != 0)
		return CTL_EXIT_FAIL;
	rv = ctl_print_splits(stdout, o->fmt, rows, n, o->per_window);
	st_rows_free(rows);
	if (rv) {
		ctl_print_rows_err("the split parts", rv);
		return CTL_EXIT_FAIL;
	}
	return CTL_EXIT_OK;
}

static int ctl_run_check(st_db *db, const struct ctl_opts *o)
{
	struct st_query q;
	struct st_row *rows;
	uint64_t checked;
	size_t n;
	int rv;

	ctl_query(o, &q);
	if ((rv = st_count_windows(db, &q, &checked)) != 0 ||
	    (rv = st_query_identity(db, &q, &rows, &n)) != 0)
		return CTL_EXIT_FAIL;
	if (n == 0) {
		printf("%llu windows checked, all balanced\n", (unsigned long long)checked);
		return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
	}
	rv = ctl_print_identity(stdout, rows, n);
	st_rows_free(rows);
	if (rv) {
		ctl_print_rows_err("the unbalanced windows", rv);
		return CTL_EXIT_FAIL;
	}
	printf("%llu windows checked, %zu unbalanced (total != attributed + explained)\n",
	       (unsigned long long)checked, n);
	fflush(stdout);
	return CTL_EXIT_FAIL;
}

/* Reads the rate card (or all-zero prices without one). */
static int ctl_load_rates(const char *path, struct ctl_rates *rt)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int rv;

	if (!path)
		return ctl_rates_parse("", 0, "(none)", rt);
	if (!(f = fopen(path, "r"))) {
		rm_log_error("failed to open '%s': %s", path, strerror(errno));
		return RM_EIO;
	}
	text = malloc(1 << 20);
	if (!text) {
		fclose(f);
		return RM_ENOMEM;
	}
	len = fread(text, 1, (1 << 20) - 1, f);
	if (ferror(f) || !feof(f)) {
		rm_log_error("failed to read '%s': %s", path, ferror(f) ? strerror(errno) : "larger than 1 MiB");
		fclose(f);
		free(text);
		return RM_EIO;
	}
	fclose(f);
	rv = ctl_rates_parse(text, len, path, rt);
	free(text);
	return rv;
}

/* The charges of [since, until) per charge period of o->step_ns, or for
 * the whole of it (o->charge_whole: whole calendar months are then read
 * from the month series). */
static int ctl_bill_rows(st_db *db, const struct ctl_opts *o, const struct ctl_rates *rt,
			 int64_t since, int64_t until, struct ctl_charge **c, size_t *n)
{
	struct st_query q;
	struct st_row *rows;
	size_t nr;
	int rv;

	ctl_query(o, &q);
	q.since_ns = since;
	q.until_ns = until;
	q.ce = NULL;
	q.per_window = 0;
	rv = o->charge_whole ? st_query_usage(db, &q, &rows, &nr) : st_query_usage_step(db, &q, o->step_ns, &rows, &nr);
	if (rv != 0)
		return rv;
	/* per range: the charge period is the billing period */
	for (size_t i = 0; o->charge_whole && i < nr; i++) {
		rows[i].win_start_ns = since;
		rows[i].win_len_ns = until - since;
	}
	rv = ctl_bill_compute(rows, nr, rt, o->share, c, n);
	st_rows_free(rows);
	if (rv)
		rm_log_error("failed to compute the bill: %s", rv == RM_EINVAL ? "a cost exceeds the int64 "
									  "limit" : rm_strerror(rv));
	return rv;
}

/* The job: exports each settled charge period exactly once across runs. */
static int ctl_bill_job(st_db *db, const struct ctl_opts *o, const struct ctl_rates *rt)
{
	const char *ext = o->fmt == CTL_FMT_JSON ? "json" : "csv";
	int64_t from, horizon, until, done, align;
	struct ctl_charge *c;
	char path[4200], *buf = NULL;
	size_t n, blen = 0;
	FILE *mf;
	int rv;

	if (access(o->outdir, W_OK) != 0) {
		rm_log_error("failed to use --out '%s': %s", o->outdir, strerror(errno));
		return CTL_EXIT_FAIL;
	}
	rv = ctl_state_read(o->state, &from);
	if (rv == RM_ENOENT) {
		if (!o->since_given) {
			rm_log_error("no state in '%s' yet: give --since for the first run", o->state);
			return CTL_EXIT_USAGE;
		}
		from = o->since_ns;
	} else if (rv != RM_OK) {
		return CTL_EXIT_FAIL;
	}
	/* a run stopped between writing its export and moving the state */
	if ((done = ctl_export_done(o->outdir, from, ext)) != 0) {
		if (ctl_state_write(o->state, done) != RM_OK)
			return CTL_EXIT_FAIL;
		from = done;
	}
	rv = st_horizon_get(db, &horizon);
	if (rv == RM_ENOENT) {
		fprintf(stderr, "rametrctl: nothing settled yet\n");
		return CTL_EXIT_OK;
	}
	if (rv != RM_OK)
		return CTL_EXIT_FAIL;
	/* whole settled charge periods; with --charge-period period, whole days */
	align = o->step_ns ? o->step_ns : CTL_DAY_NS;
	until = horizon - ((horizon % align) + align) % align;
	if (until <= from) {
		fprintf(stderr, "rametrctl: nothing new settled (exported until %lld)\n", (long long)from);
		return CTL_EXIT_OK;
	}
	if (ctl_bill_rows(db, o, rt, from, until, &c, &n) != RM_OK)
		return CTL_EXIT_FAIL;
	if (!(mf = open_memstream(&buf, &blen))) {
		free(c);
		return CTL_EXIT_FAIL;
	}
	rv = ctl_bill_print(mf, o->fmt, c, n, rt, from, until, 1);
	free(c);
	if (fclose(mf) != 0 || rv != RM_OK) {
		free(buf);
		return CTL_EXIT_FAIL;
	}
	snprintf(path, sizeof(path), "%s/bill-%lld-%lld.%s", o->outdir, (long long)from,
		 (long long)until, ext);
	/* the export first, then the state: a stop in between is found above */
	rv = ctl_write_atomic(path, buf, blen);
	free(buf);
	if (rv != RM_OK || ctl_state_write(o->state, until) != RM_OK)
		return CTL_EXIT_FAIL;
	printf("%s\n", path);
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

static int ctl_run_bill(st_db *db, const struct ctl_opts *o)
{
	struct ctl_rates *rt = malloc(sizeof(*rt));
	struct ctl_charge *c;
	size_t n;
	int rv;

	if (!rt)
		return CTL_EXIT_FAIL;
	if (ctl_load_rates(o->rates, rt) != RM_OK) {
		free(rt);
		return CTL_EXIT_FAIL;
	}
	if (o->since_last) {
		rv = ctl_bill_job(db, o, rt);
		free(rt);
		return rv;
	}
	if (ctl_bill_rows(db, o, rt, o->since_ns, o->until_ns, &c, &n) != RM_OK) {
		free(rt);
		return CTL_EXIT_FAIL;
	}
	rv = ctl_bill_print(stdout, o->fmt, c, n, rt, o->since_ns, o->until_ns, 1);
	free(c);
	free(rt);
	if (rv) {
		ctl_print_rows_err("the bill", rv);
		return CTL_EXIT_FAIL;
	}
	return CTL_EXIT_OK;
}

static const struct ctl_cmd ctl_cmds[] = {
	{ "usage", O_DB | O_SINCE | O_UNTIL | O_SERVER | O_CE | O_RESOURCE | O_OUTPUT |
			   O_PER_WINDOW | O_NO_V | O_HELP | O_SOURCE | O_STEP | O_GROUP | O_TOP,
	  "usage per chargeable entity, with the unaccountable share",
	  "[--db PATH] [--since T] [--until T] [--server S] [--ce C] [--resource R]\n"
	  "       [--step D] [--group-by server,ce,resource] [--top N]\n"
	  "       [-o table|json|csv] [--per-window] [--no-unaccountable]\n"
	  "       [--source measured|lr|kalman]",
	  ctl_run_usage },
	{ "unaccountable", O_DB | O_SINCE | O_UNTIL | O_SERVER | O_RESOURCE | O_OUTPUT |
				   O_PER_WINDOW | O_HELP,
	  "the unaccountable share broken down by reason",
	  "[--db PATH] [--since T] [--until T] [--server S] [--resource R]\n"
	  "       [-o table|json|csv] [--per-window]",
	  ctl_run_unacct },
	{ "splits", O_DB | O_SINCE | O_UNTIL | O_SERVER | O_OUTPUT | O_PER_WINDOW | O_HELP,
	  "segment parts whose cost was split over several CEs by bytes",
	  "[--db PATH] [--since T] [--until T] [--server S] [-o table|json|csv]\n"
	  "       [--per-window]",
	  ctl_run_splits },
	{ "bill", O_DB | O_SINCE | O_UNTIL | O_SERVER | O_RESOURCE | O_OUTPUT | O_STEP | O_HELP | O_BILL,
	  "charges per tenant, server, resource and period as FOCUS rows",
	  "[--db PATH] (--period P | --since T [--until T])\n"
	  "       [--charge-period period|day|hour | --step D]\n"
	  "       [--rates FILE] [--share-unaccountable none|weighted|even]\n"
	  "       [--server S] [--resource R] [-o csv|json]\n"
	  "   or: rametrctl bill --since-last --state FILE --out DIR [--since T] [...]",
	  ctl_run_bill },
	{ "check", O_DB | O_SINCE | O_UNTIL | O_SERVER | O_RESOURCE | O_HELP,
	  "verify sum_c U_c + V = U in every window (exit 1 if not)",
	  "[--db PATH] [--since T] [--until T] [--server S] [--resource R]",
	  ctl_run_check },
};

#define CTL_NCMDS (sizeof(ctl_cmds) / sizeof(ctl_cmds[0]))

static void ctl_help_main(FILE *f)
{
	size_t i;

	fprintf(f, "usage: rametrctl <command> [options]\n\n"
		   "Query the resource accounting database of Rametr.\n\nCommands:\n");
	for (i = 0; i < CTL_NCMDS; i++)
		fprintf(f, "  %-14s %s\n", ctl_cmds[i].name, ctl_cmds[i].summary);
	fprintf(f, "  %-14s %s\n", "throttle", "list, set or clear CPU caps of CEs");
	fprintf(f, "  %-14s %s\n", "report", "a self-contained HTML report with charts, for people");
	fprintf(f, "  %-14s %s\n", "version", "print the version (also --version)");
	fprintf(f, "\nRun 'rametrctl <command> --help' for a command's options.\n");
}

static void ctl_help_cmd(const struct ctl_cmd *c)
{
	printf("usage: rametrctl %s %s\n\n%s.\n\nOptions:\n", c->name, c->synopsis, c->summary);
	printf("  --db PATH           the database\n"
	       "  --since T           first window start to include\n"
	       "  --until T           windows must start before T\n"
	       "  --server S          only server S\n");
	if (c->opts & O_CE)
		printf("  --ce C              only chargeable entity C (%s: only the\n"
		       "                      unaccountable share)\n", ST_CE_UNACCOUNTABLE);
	if (c->opts & O_RESOURCE)
		printf("  --resource R        only R: cpu, net_rx, net_tx, disk_read, disk_write\n");
	if (c->opts & O_OUTPUT)
		printf("  -o, --output FMT    table (default), json or csv\n"
		       "  --per-window        one row per window instead of per range\n");
	if (c->opts & O_STEP)
		printf("  --step D            one row per period of D (30s, 5m, 1h, 1d, 7d; UTC);\n"
		       "                      --since rounds down and --until up to a multiple of D\n"
		       "  --group-by LIST     server, ce and/or resource, comma-separated or repeated\n"
		       "                      (default server,ce; ce alone sums across servers;\n"
		       "                      resources always stay apart)\n"
		       "  --top N|all         per period, resource (and server) the N largest CEs\n"
		       "                      and the unaccountable share (table: 10 by default,\n"
		       "                      with a line saying how many rows were left out;\n"
		       "                      json and csv: all)\n");
	if (c->opts & O_BILL)
		printf("  --period P          the billing period: 2026-11, last-month, 2026-11-05, ...\n"
		       "  --charge-period C   period (default: one row per tenant, server and\n"
		       "                      resource for the whole billing period, as on a\n"
		       "                      monthly invoice), day or hour\n"
		       "  --step D            any other charge period (30m, 6h, 7d; UTC)\n"
		       "  --rates FILE        the rate card (without one every price is 0: showback)\n"
		       "  --share-unaccountable M\n"
		       "                      none (default: rows of %s), weighted by\n"
		       "                      the tenants' usage, or even\n"
		       "  --since-last        export what settled since the last run (whole days,\n"
		       "                      or whole charge periods of day, hour or --step)\n"
		       "                      (each exactly once) into --out DIR, remembered in\n"
		       "                      --state FILE; the first run needs --since\n", ST_CE_UNACCOUNTABLE);
	if (c->opts & O_NO_V)
		printf("  --no-unaccountable  leave out the %s rows\n", ST_CE_UNACCOUNTABLE);
	if (c->opts & O_SOURCE)
		printf("  --source SRC        measured (default), or the aggregator's estimates\n"
		       "                      from aggregate data: lr (seed 000 eq. 2) or kalman\n"
		       "                      (seed 002 Algorithm 1); cpu only, same columns\n");
	printf("  -h, --help          this help\n\n");
	if (c->run == ctl_run_usage)
		printf("The table shows cpu in core-h, core-min, core-s or core-ms (AMOUNT: the\n"
		       "largest unit it reaches 1 in) and cores (AVERAGE over the period), bytes\n"
		       "in B/KiB/MiB/GiB and per second (more digits below 1: 0.000123 cores);\n"
		       "SHARE is the amount as a percentage of the total U of the group's\n"
		       "servers for that resource. Without --since the period starts at the\n"
		       "first stored window and ends at the end of the last (or at --until).\n"
		       "%s = U - sum of all CEs (negative: more charged than measured).\n"
		       "JSON and CSV carry raw integers (ns or bytes, see unit) and the period\n"
		       "(period_start, period_end: UTC, end exclusive). With --per-window or\n"
		       "--source the rows are per window/range: cpu in seconds, bytes in B.\n"
		       "With --source lr|kalman the rows are the aggregator's estimates for\n"
		       "servers in [estimate] sections, labelled in the table (first line) and\n"
		       "in JSON (\"source\"); totals cover the windows the estimator solved.\n\n",
		       ST_CE_UNACCOUNTABLE);
	else if (c->run == ctl_run_bill)
		printf("One FOCUS 1.2 row per tenant, server, resource and charge period (CSV by\n"
		       "default): BilledCost = PricingQuantity x ListUnitPrice (core-hours or GiB),\n"
		       "the 1.3 allocation columns and x_Rametr* columns with the raw integers.\n"
		       "Per server, resource and period the x_RametrQuantity values sum to U.\n"
		       "See docs/reports.md for the rate card format.\n\n");
	else if (c->run == ctl_run_splits)
		printf("A part (what one thread did for one segment in one window) is split\n"
		       "when it received bytes that segments of several CEs had sent (or bytes\n"
		       "the aggregator could not attribute): its cost was divided by bytes.\n\n");
	else if (c->run == ctl_run_unacct)
		printf("Reasons are as the aggregator stored them; '%s' is the\n"
		       "part of the unaccountable share no stored reason covers (negative:\n"
		       "the reasons over-count). SHARE is relative to the server's total U.\n\n",
		       ST_REASON_UNEXPLAINED);
	else
		printf("Prints 'N windows checked, all balanced' (exit 0), or the windows\n"
		       "where total != attributed + explained, raw integers (exit 1).\n\n");
	printf("%s%s", ctl_help_times, ctl_help_db);
}

static int ctl_check_name(const char *cmd, const char *opt, const char *v)
{
	size_t len = strlen(v);

	if (len == 0 || len > ST_NAME_MAX) {
		rm_log_error("invalid %s '%s': must be 1 to %d bytes", opt, v, ST_NAME_MAX);
		return ctl_usage_error(cmd);
	}
	return 0;
}

/* A time argument; *end (if not NULL) is set to the end of a calendar
 * period, else left alone. */
static int ctl_time_opt(const char *cmd, const char *opt, const char *v, int64_t now,
			int64_t *out, int64_t *end)
{
	const char *why;
	int64_t e;
	int rv;

	if ((rv = ctl_period_parse(v, now, out, &e, &why)) == RM_OK) {
		if (end)
			*end = e;
		return 0;
	}
	if (rv != RM_ENOENT || ctl_time_parse(v, now, out, &why) != RM_OK) {
		rm_log_error("invalid time '%s' for %s: %s", v, opt, why);
		return ctl_usage_error(cmd);
	}
	return 0;
}

/* The billing period and the job's options. */
static int ctl_bill_opts(const char *cmd, struct ctl_opts *o, const char *period, const char *since,
			 const char *until, const char *charge)
{
	const char *why;

	o->since_given = since != NULL;
	if (charge && o->step_ns) {
		rm_log_error("give --charge-period or --step, not both");
		return ctl_usage_error(cmd);
	}
	if (charge && !strcmp(charge, "day")) {
		o->step_ns = CTL_DAY_NS;
	} else if (charge && !strcmp(charge, "hour")) {
		o->step_ns = CTL_DAY_NS / 24;
	} else if (charge && strcmp(charge, "period")) {
		rm_log_error("invalid --charge-period '%s' (period, day, hour)", charge);
		return ctl_usage_error(cmd);
	}
	o->charge_whole = !o->step_ns;
	if (o->fmt == CTL_FMT_TABLE && !o->fmt_given)
		o->fmt = CTL_FMT_CSV;
	if (o->fmt == CTL_FMT_TABLE) {
		rm_log_error("bill writes csv or json");
		return ctl_usage_error(cmd);
	}
	if (o->since_last) {
		if (!o->state || !o->outdir || period || until) {
			rm_log_error("--since-last needs --state FILE and --out DIR, and no --period or --until");
			return ctl_usage_error(cmd);
		}
		return 0;
	}
	if (o->state || o->outdir) {
		rm_log_error("--state and --out go with --since-last");
		return ctl_usage_error(cmd);
	}
	if (period && (since || until)) {
		rm_log_error("give --period or --since/--until, not both");
		return ctl_usage_error(cmd);
	}
	if (period && ctl_period_parse(period, o->now_ns, &o->since_ns, &o->until_ns, &why) != RM_OK) {
		rm_log_error("invalid --period '%s' (2026-11, last-month, this-month, 2026-11-05, ...)", period);
		return ctl_usage_error(cmd);
	}
	if (!period && !since) {
		rm_log_error("give the billing period: --period or --since");
		return ctl_usage_error(cmd);
	}
	return 0;
}

/* Rounds --since down and --until up to multiples of the step. */
static int ctl_align_step(const char *cmd, struct ctl_opts *o)
{
	int64_t st = o->step_ns, m;

	m = ((o->since_ns % st) + st) % st;
	o->since_ns -= m;
	m = ((o->until_ns % st) + st) % st;
	if (m && __builtin_add_overflow(o->until_ns, st - m, &o->until_ns)) {
		rm_log_error("--until is too late for --step");
		return ctl_usage_error(cmd);
	}
	return 0;
}

/* usage without --since: the period starts at the first stored window and,
 * without --until, ends at the end of the last (not at 1970 and now, which
 * would average the amounts over decades). Nothing stored: left as it is. */
static int ctl_stored_period(st_db *db, struct ctl_opts *o, int until_given)
{
	int64_t first, end;
	int rv = st_stored_span(db, &first, &end);

	if (rv == RM_ENOENT)
		return 0;
	if (rv != RM_OK)
		return CTL_EXIT_FAIL;
	if (!until_given)
		o->until_ns = end;
	o->since_ns = first < o->until_ns ? first : o->until_ns;
	return o->step_ns ? ctl_align_step("usage", o) : 0;
}

/* Edit distance of a and b (both at most ST_NAME_MAX bytes). */
static size_t ctl_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), i, j, prev[ST_NAME_MAX + 2], cur[ST_NAME_MAX + 2];

	if (la > ST_NAME_MAX || lb > ST_NAME_MAX)
		return SIZE_MAX;
	for (j = 0; j <= lb; j++)
		prev[j] = j;
	for (i = 1; i <= la; i++) {
		cur[0] = i;
		for (j = 1; j <= lb; j++) {
			size_t d = prev[j - 1] + (a[i - 1] != b[j - 1]);

			if (prev[j] + 1 < d)
				d = prev[j] + 1;
			if (cur[j - 1] + 1 < d)
				d = cur[j - 1] + 1;
			cur[j] = d;
		}
		memcpy(prev, cur, (lb + 1) * sizeof(prev[0]));
	}
	return prev[lb];
}

/* An unknown server or CE is an error (exit 1) naming the known ones,
 * the closest first. */
static int ctl_check_known(st_db *db, const char *what, const char *name)
{
	char **names, list[1024];
	size_t n, i, best = SIZE_MAX, len = 0;
	int known;

	if (st_name_known(db, what, name, &known) != RM_OK)
		return CTL_EXIT_FAIL;
	if (known)
		return 0;
	if (st_names(db, what, &names, &n) != RM_OK)
		return CTL_EXIT_FAIL;
	const char *closest = NULL;

	for (i = 0; i < n; i++)
		if (ctl_distance(name, names[i]) < best) {
			best = ctl_distance(name, names[i]);
			closest = names[i];
		}
	list[0] = '\0';
	for (i = 0; i < n && len < 200; i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", len ? ", " : "", names[i]);
	if (i < n)
		snprintf(list + len, sizeof(list) - len, ", ... (%zu in all)", n);
	if (!n)
		rm_log_error("unknown %s '%s': the database holds no %s names", what, name, what);
	else if (best <= 2)
		rm_log_error("unknown %s '%s'; did you mean '%s'? known: %s", what, name, closest, list);
	else
		rm_log_error("unknown %s '%s'; known: %s", what, name, list);
	free(names);
	return CTL_EXIT_FAIL;
}

static const char *ctl_optname(const struct option *opts, int ch)
{
	for (; opts->name; opts++)
		if (opts->val == ch)
			return opts->name;
	return "?";
}

static int ctl_main_cmd(const struct ctl_cmd *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "db", required_argument, NULL, 'D' },
		{ "since", required_argument, NULL, 'S' },
		{ "until", required_argument, NULL, 'U' },
		{ "server", required_argument, NULL, 's' },
		{ "ce", required_argument, NULL, 'c' },
		{ "resource", required_argument, NULL, 'r' },
		{ "output", required_argument, NULL, 'o' },
		{ "per-window", no_argument, NULL, 'w' },
		{ "no-unaccountable", no_argument, NULL, 'n' },
		{ "source", required_argument, NULL, 'e' },
		{ "step", required_argument, NULL, 't' },
		{ "group-by", required_argument, NULL, 'g' },
		{ "top", required_argument, NULL, 'T' },
		{ "period", required_argument, NULL, 'P' },
		{ "rates", required_argument, NULL, 'R' },
		{ "share-unaccountable", required_argument, NULL, 'A' },
		{ "since-last", no_argument, NULL, 'L' },
		{ "charge-period", required_argument, NULL, 'C' },
		{ "state", required_argument, NULL, 'F' },
		{ "out", required_argument, NULL, 'O' },
		{ "format", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct {
		int ch;
		unsigned bit;
	} bits[] = {
		{ 'D', O_DB }, { 'S', O_SINCE }, { 'U', O_UNTIL }, { 's', O_SERVER },
		{ 'c', O_CE }, { 'r', O_RESOURCE }, { 'o', O_OUTPUT }, { 'w', O_PER_WINDOW },
		{ 'n', O_NO_V }, { 'h', O_HELP }, { 'e', O_SOURCE }, { 't', O_STEP },
		{ 'g', O_GROUP }, { 'T', O_TOP }, { 'P', O_BILL }, { 'R', O_BILL }, { 'A', O_BILL },
		{ 'L', O_BILL }, { 'F', O_BILL }, { 'O', O_BILL }, { 'C', O_BILL },
	};
	struct ctl_opts o = { .resource = -1, .fmt = CTL_FMT_TABLE, .show_v = 1 };
	const char *since = NULL, *until = NULL, *period = NULL, *charge = NULL;
	struct timespec ts;
	enum st_resource res;
	st_db *db;
	size_t i;
	int ch, rv;

	clock_gettime(CLOCK_REALTIME, &ts);
	o.now_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;

	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
		const char *arg = argv[optind - 1];

		if (ch == '?') {
			if (optopt)
				rm_log_error("unknown option '-%c'", optopt);
			else
				rm_log_error("unknown option '%s'", arg);
			return ctl_usage_error(c->name);
		}
		if (ch == ':') {
			rm_log_error("option '%s' requires a value", arg);
			return ctl_usage_error(c->name);
		}
		for (i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
			if (bits[i].ch == ch && !(c->opts & bits[i].bit)) {
				rm_log_error("option '--%s' does not apply to '%s'",
					     ctl_optname(longopts, ch), c->name);
				return ctl_usage_error(c->name);
			}
		switch (ch) {
		case 'h':
			ctl_help_cmd(c);
			return CTL_EXIT_OK;
		case 'D':
			if (!optarg[0]) {
				rm_log_error("invalid --db: empty path");
				return ctl_usage_error(c->name);
			}
			o.db = optarg;
			break;
		case 'S':
			since = optarg;
			break;
		case 'U':
			until = optarg;
			break;
		case 's':
			if ((rv = ctl_check_name(c->name, "--server", optarg)) != 0)
				return rv;
			o.server = optarg;
			break;
		case 'c':
			if ((rv = ctl_check_name(c->name, "--ce", optarg)) != 0)
				return rv;
			o.ce = optarg;
			break;
		case 'r':
			if (st_resource_parse(optarg, &res) != RM_OK) {
				rm_log_error("unknown resource '%s' (cpu, net_rx, net_tx, disk_read, "
					     "disk_write)", optarg);
				return ctl_usage_error(c->name);
			}
			o.resource = (int)res;
			break;
		case 'o':
			o.fmt_given = 1;
			if (ctl_fmt_parse(optarg, &o.fmt) != RM_OK) {
				rm_log_error("unknown output format '%s' (table, json, csv)", optarg);
				return ctl_usage_error(c->name);
			}
			break;
		case 'w':
			o.per_window = 1;
			break;
		case 'n':
			o.show_v = 0;
			break;
		case 't': {
			const char *why;

			if (ctl_step_parse(optarg, &o.step_ns, &why) != RM_OK) {
				rm_log_error("invalid --step '%s': %s", optarg, why);
				return ctl_usage_error(c->name);
			}
			break;
		}
		case 'g':
			if (ctl_by_parse(optarg, &o.by) != RM_OK) {
				rm_log_error("invalid --group-by '%s' (server, ce, resource, comma-separated)",
					     optarg);
				return ctl_usage_error(c->name);
			}
			break;
		case 'T': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			o.top_given = 1;
			if (!strcmp(optarg, "all")) {
				o.top = 0;
				break;
			}
			if (optarg[0] < '1' || optarg[0] > '9' || *end || v > 1000000) {
				rm_log_error("invalid --top '%s' (1 to 1000000, or all)", optarg);
				return ctl_usage_error(c->name);
			}
			o.top = v;
			break;
		}
		case 'P':
			period = optarg;
			break;
		case 'R':
			o.rates = optarg;
			break;
		case 'A':
			if (ctl_share_parse(optarg, &o.share) != RM_OK) {
				rm_log_error("invalid --share-unaccountable '%s' (none, weighted, even)", optarg);
				return ctl_usage_error(c->name);
			}
			break;
		case 'L':
			o.since_last = 1;
			break;
		case 'C':
			charge = optarg;
			break;
		case 'F':
			o.state = optarg;
			break;
		case 'O':
			o.outdir = optarg;
			break;
		case 'e':
			if (strcmp(optarg, "measured") == 0) {
				o.source = NULL;
			} else if (st_est_method_ok(optarg)) {
				o.source = strcmp(optarg, ST_EST_LR) == 0 ? ST_EST_LR : ST_EST_KALMAN;
			} else {
				rm_log_error("unknown source '%s' (measured, lr, kalman)", optarg);
				return ctl_usage_error(c->name);
			}
			break;
		}
	}
	if (optind < argc) {
		rm_log_error("unexpected argument '%s'", argv[optind]);
		return ctl_usage_error(c->name);
	}
	if ((o.step_ns || o.by || o.top) && (o.source || o.per_window)) {
		rm_log_error("--step, --group-by and --top do not combine with --per-window or --source");
		return ctl_usage_error(c->name);
	}
	if (o.source && o.resource >= 0 && o.resource != ST_R_CPU) {
		rm_log_error("the %s estimates cover cpu only, not '%s'", o.source, st_resource_name(o.resource));
		return ctl_usage_error(c->name);
	}
	o.since_ns = 0;
	o.until_ns = o.now_ns;
	if (since && (rv = ctl_time_opt(c->name, "--since", since, o.now_ns, &o.since_ns,
					until ? NULL : &o.until_ns)) != 0)
		return rv;
	if (until && (rv = ctl_time_opt(c->name, "--until", until, o.now_ns, &o.until_ns, NULL)) != 0)
		return rv;
	if (c->run == ctl_run_bill && (rv = ctl_bill_opts(c->name, &o, period, since, until, charge)) != 0)
		return rv;
	if (o.step_ns && (rv = ctl_align_step(c->name, &o)) != 0)
		return rv;
	if (!o.by)
		o.by = CTL_BY_SERVER | CTL_BY_CE;
	if (o.until_ns < o.since_ns) {
		rm_log_error("--since '%s' is after --until '%s'", since ? since : "0",
			     until ? until : "now");
		return ctl_usage_error(c->name);
	}
	if (!o.db)
		o.db = getenv("RAMETR_DB");
	if (!o.db || !o.db[0])
		o.db = CTL_DEFAULT_DB;

	if (st_open(&db, o.db, ST_OPEN_READONLY) != RM_OK)
		return CTL_EXIT_FAIL;
	if ((o.server && (rv = ctl_check_known(db, "server", o.server)) != 0) ||
	    (o.ce && strcmp(o.ce, ST_CE_UNACCOUNTABLE) != 0 &&
	     (rv = ctl_check_known(db, "ce", o.ce)) != 0)) {
		st_close(db);
		return rv;
	}
	if (c->run == ctl_run_usage && !since && (rv = ctl_stored_period(db, &o, until != NULL)) != 0) {
		st_close(db);
		return rv;
	}
	rv = c->run(db, &o);
	st_close(db);
	return rv;
}

int main(int argc, char **argv)
{
	size_t i;

	rm_log_init("rametrctl");
	/* one thread writes stdout: no lock per character; into a file or a
	 * pipe, 64 KiB at a time (hundreds of thousands of rows are common) */
	__fsetlocking(stdout, FSETLOCKING_BYCALLER);
	if (!isatty(STDOUT_FILENO))
		setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	if (argc < 2) {
		ctl_help_main(stderr);
		return CTL_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		rm_version_print(stdout, "rametrctl");
		return CTL_EXIT_OK;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		if (argc > 2 && strcmp(argv[1], "help") == 0) {
			for (i = 0; i < CTL_NCMDS; i++)
				if (!strcmp(argv[2], ctl_cmds[i].name)) {
					ctl_help_cmd(&ctl_cmds[i]);
					return CTL_EXIT_OK;
				}
		}
		ctl_help_main(stdout);
		return CTL_EXIT_OK;
	}
	for (i = 0; i < CTL_NCMDS; i++)
		if (!strcmp(argv[1], ctl_cmds[i].name))
			return ctl_main_cmd(&ctl_cmds[i], argc - 1, argv + 1);
	if (!strcmp(argv[1], "throttle"))
		return ctl_throttle_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "report"))
		return ctl_report_main(argc - 1, argv + 1);
	if (argv[1][0] == '-')
		rm_log_error("unknown option '%s' (options go after the command)", argv[1]);
	else
		rm_log_error("unknown command '%s'", argv[1]);
	return ctl_usage_error(NULL);
}
