/*
 * ctl_main.c - the rametrctl program: command line parsing (commands
 * usage, unaccountable, splits, check; their options and help), choice of the
 * database (--db, $RAMETR_DB, the default path), and running the storage
 * queries. Owns the exit codes: 0 ok, 1 failure (database, unbalanced
 * windows in check), 2 bad arguments.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_out.h"
#include "ctl_report.h"
#include "ctl_throttle.h"
#include "ctl_time.h"
#include "rm_err.h"
#include "rm_version.h"
#include "st.h"
#include "st_est.h"
#include "banned.h"

#define CTL_DEFAULT_DB "/var/lib/rametr/rametr.db"
#define CTL_EXIT_OK 0
#define CTL_EXIT_FAIL 1
#define CTL_EXIT_USAGE 2

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
};

struct ctl_opts {
	const char *db;
	int64_t now_ns, since_ns, until_ns;
	const char *server, *ce;
	int resource;
	enum ctl_fmt fmt;
	int per_window, show_v;
	const char *source; /* NULL = measured, else ST_EST_LR / ST_EST_KALMAN */
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
	"  2024-05-01T12:00:00Z, 2024-05-01T14:00:00.5+02:00   RFC 3339\n"
	"  now                                                   the current time\n"
	"  30s, 10m, 2h, 7d                                      that long before now\n"
	"  1714564800                                            Unix seconds\n"
	"Defaults: --since 0 (everything), --until now.\n";

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

static int ctl_run_usage(st_db *db, const struct ctl_opts *o)
{
	struct st_query q;
	struct st_row *rows;
	size_t n;
	int rv;

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

static const struct ctl_cmd ctl_cmds[] = {
	{ "usage", O_DB | O_SINCE | O_UNTIL | O_SERVER | O_CE | O_RESOURCE | O_OUTPUT |
			   O_PER_WINDOW | O_NO_V | O_HELP | O_SOURCE,
	  "usage per chargeable entity, with the unaccountable share",
	  "[--db PATH] [--since T] [--until T] [--server S] [--ce C] [--resource R]\n"
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
	fprintf(f, "  %-14s %s\n", "throttle", "list, set or clear CPU caps of CEs (issue 6)");
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
	if (c->opts & O_NO_V)
		printf("  --no-unaccountable  leave out the %s rows\n", ST_CE_UNACCOUNTABLE);
	if (c->opts & O_SOURCE)
		printf("  --source SRC        measured (default), or the aggregator's estimates\n"
		       "                      from aggregate data: lr (seed 000 eq. 2) or kalman\n"
		       "                      (seed 002 Algorithm 1); cpu only, same columns\n");
	printf("  -h, --help          this help\n\n");
	if (c->run == ctl_run_usage)
		printf("The table shows cpu in seconds and bytes with unit B; SHARE is the\n"
		       "value as a percentage of the server's total U for that resource.\n"
		       "%s = U - sum of all CEs (negative: more charged than measured).\n"
		       "JSON and CSV carry raw integers (ns or bytes, see unit).\n"
		       "With --source lr|kalman the rows are the aggregator's estimates for\n"
		       "servers in [estimate] sections, labelled in the table (first line) and\n"
		       "in JSON (\"source\"); totals cover the windows the estimator solved.\n\n",
		       ST_CE_UNACCOUNTABLE);
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

static int ctl_time_opt(const char *cmd, const char *opt, const char *v, int64_t now,
			int64_t *out)
{
	const char *why;

	if (ctl_time_parse(v, now, out, &why) != RM_OK) {
		rm_log_error("invalid time '%s' for %s: %s", v, opt, why);
		return ctl_usage_error(cmd);
	}
	return 0;
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
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct {
		int ch;
		unsigned bit;
	} bits[] = {
		{ 'D', O_DB }, { 'S', O_SINCE }, { 'U', O_UNTIL }, { 's', O_SERVER },
		{ 'c', O_CE }, { 'r', O_RESOURCE }, { 'o', O_OUTPUT }, { 'w', O_PER_WINDOW },
		{ 'n', O_NO_V }, { 'h', O_HELP }, { 'e', O_SOURCE },
	};
	struct ctl_opts o = { .resource = -1, .fmt = CTL_FMT_TABLE, .show_v = 1 };
	const char *since = NULL, *until = NULL;
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
	if (o.source && o.resource >= 0 && o.resource != ST_R_CPU) {
		rm_log_error("the %s estimates cover cpu only, not '%s'", o.source, st_resource_name(o.resource));
		return ctl_usage_error(c->name);
	}
	o.since_ns = 0;
	o.until_ns = o.now_ns;
	if (since && (rv = ctl_time_opt(c->name, "--since", since, o.now_ns, &o.since_ns)) != 0)
		return rv;
	if (until && (rv = ctl_time_opt(c->name, "--until", until, o.now_ns, &o.until_ns)) != 0)
		return rv;
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
	rv = c->run(db, &o);
	st_close(db);
	return rv;
}

int main(int argc, char **argv)
{
	size_t i;

	rm_log_init("rametrctl");
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
