/*
 * ctl_throttle.c - 'rametrctl throttle': list prints the stored commands
 * with who, when, why, the figures behind each decision and its state; set
 * and clear write an operator command in state "requested" and wait for the
 * aggregator to accept it (pending) or refuse it (with its reason).
 */
#include <getopt.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl_out.h"
#include "ctl_throttle.h"
#include "ctl_time.h"
#include "rm_clock.h"
#include "rm_err.h"
#include "rm_rec.h"
#include "st_throttle.h"
#include "banned.h"

#define CTL_DEFAULT_DB "/var/lib/rametr/rametr.db"
#define CTL_WAIT_MS_DEFAULT 5000

static const char ctl_thr_help[] =
	"usage: rametrctl throttle list [--db PATH] [--state STATE|active] [--server S] [--ce C]\n"
	"                               [--since TIME] [--limit N] [-o table|json|csv]\n"
	"       rametrctl throttle set --server S --ce C --cap SHARE [--for DURATION]\n"
	"                              [--why TEXT] [--wait MS] [--db PATH]\n"
	"       rametrctl throttle clear --server S --ce C [--why TEXT] [--wait MS] [--db PATH]\n"
	"\n"
	"list   the throttle commands, oldest first (newest first with --limit): who made\n"
	"       the decision (policy:cap, policy:overload, rametrctl:USER), when, the cap (a\n"
	"       share of the server's CPU capacity), its expiry, its state (requested,\n"
	"       refused, pending, sent, applied, superseded, expired), why, and the figures\n"
	"       it looked at; refusals with their reason. 'active' = pending, sent or applied.\n"
	"       -o csv gives times as Unix ns (created_ns, expires_ns).\n"
	"set    asks the aggregator to cap CE C on server S at SHARE (e.g. 30% or 0.3) of the\n"
	"       server's CPU for DURATION (default 60s; the collector releases it then by\n"
	"       itself); waits up to MS ms (default 5000, 0 = do not wait) for the aggregator\n"
	"       to accept or refuse it (unknown CE or server, expired, duplicate, ...).\n"
	"clear  asks the aggregator to release CE C on server S now.\n"
	"Exit codes: 0 ok, 1 failure or refused, 2 bad arguments.\n";

/* The fields of one stored command: times as RFC 3339 in JSON ("created",
 * "expires"), as Unix ns in CSV ("created_ns", "expires_ns"). Returns how
 * many (CTL_THR_NFIELDS). */
#define CTL_THR_NFIELDS 12
static size_t ctl_thr_fields(const struct st_throttle *r, int json, char t1[64], char t2[64],
			     struct rm_field *fl)
{
	size_t n = 0;

	fl[n++] = RM_FIELD_INT("id", r->id);
	fl[n++] = json ? RM_FIELD_STR("created", ctl_time_format(r->created_ns, t1, 64))
		       : RM_FIELD_INT("created_ns", r->created_ns);
	fl[n++] = RM_FIELD_STR("who", r->who);
	fl[n++] = RM_FIELD_STR("server", r->server);
	fl[n++] = RM_FIELD_STR("ce", r->ce);
	fl[n++] = RM_FIELD_STR("resource", r->resource);
	fl[n++] = RM_FIELD_INT("cap_permille", r->cap_permille);
	fl[n++] = json ? RM_FIELD_STR("expires", ctl_time_format(r->expires_ns, t2, 64))
		       : RM_FIELD_INT("expires_ns", r->expires_ns);
	fl[n++] = RM_FIELD_STR("state", r->state);
	fl[n++] = RM_FIELD_STR("why", r->why);
	fl[n++] = RM_FIELD_STR("figures", r->figures);
	fl[n++] = RM_FIELD_STR("error", r->error);
	return n;
}

static void ctl_thr_print(FILE *f, enum ctl_fmt fmt, const struct st_throttle *r, size_t n)
{
	struct rm_field fl[CTL_THR_NFIELDS];
	char t1[64], t2[64];
	size_t i, nf;

	if (fmt == CTL_FMT_JSON) {
		fputc('[', f);
		for (i = 0; i < n; i++) {
			nf = ctl_thr_fields(&r[i], 1, t1, t2, fl);
			fputs(i ? ",\n  " : "\n  ", f);
			rm_json_object(f, fl, nf);
		}
		fputs(n ? "\n]\n" : "]\n", f);
		return;
	}
	if (fmt == CTL_FMT_CSV) {
		struct st_throttle none = { 0 };

		/* for machines: times as Unix ns */
		nf = ctl_thr_fields(&none, 0, t1, t2, fl);
		rm_csv_header(f, fl, nf);
		for (i = 0; i < n; i++) {
			nf = ctl_thr_fields(&r[i], 0, t1, t2, fl);
			rm_csv_row(f, fl, nf);
		}
		return;
	}
	fprintf(f, "%-6s %-24s %-18s %-12s %-12s %6s %-24s %-10s %s\n", "ID", "CREATED", "WHO", "SERVER",
		"CE", "CAP", "EXPIRES", "STATE", "WHY");
	for (i = 0; i < n; i++) {
		char cap[16];

		if (r[i].cap_permille)
			snprintf(cap, sizeof(cap), "%.1f%%", r[i].cap_permille / 10.0);
		else
			snprintf(cap, sizeof(cap), "off");
		fprintf(f, "%-6" PRIu64 " %-24s %-18s %-12s %-12s %6s %-24s %-10s %s\n", r[i].id,
			ctl_time_format(r[i].created_ns, t1, sizeof(t1)), r[i].who, r[i].server, r[i].ce, cap,
			ctl_time_format(r[i].expires_ns, t2, sizeof(t2)), r[i].state, r[i].why);
		if (r[i].figures[0])
			fprintf(f, "       figures: %s\n", r[i].figures);
		if (r[i].error[0])
			fprintf(f, "       refused: %s\n", r[i].error);
	}
}

static const char *ctl_thr_user(void)
{
	const char *u = getenv("SUDO_USER");
	struct passwd *pw;

	if (u && *u)
		return u;
	pw = getpwuid(getuid());
	return pw ? pw->pw_name : "unknown";
}

/* "30%", "2.5%" or "0.3" -> permille 1..1000. */
static int ctl_thr_share(const char *s, uint32_t *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || !(v > 0))
		return -1;
	if (*end == '%' && !end[1])
		v *= 10.0;
	else if (!*end && v <= 1.0)
		v *= 1000.0;
	else
		return -1;
	if (v > 1000.0 || v < 0.5)
		return -1;
	*out = (uint32_t)(v + 0.5);
	return 0;
}

int ctl_throttle_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "db", required_argument, NULL, 'd' },
		{ "state", required_argument, NULL, 'S' },
		{ "server", required_argument, NULL, 's' },
		{ "ce", required_argument, NULL, 'c' },
		{ "since", required_argument, NULL, 'b' },
		{ "limit", required_argument, NULL, 'l' },
		{ "output", required_argument, NULL, 'o' },
		{ "cap", required_argument, NULL, 'C' },
		{ "for", required_argument, NULL, 'f' },
		{ "why", required_argument, NULL, 'w' },
		{ "wait", required_argument, NULL, 'W' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sub, *db_path = getenv("RAMETR_DB"), *state = NULL, *server = NULL, *ce = NULL,
			  *why = NULL, *err = NULL, *cap_s = NULL;
	int64_t now = rm_clock_unix_ns(), since = 0, dur = 60ll * 1000000000ll;
	enum ctl_fmt fmt = CTL_FMT_TABLE;
	long limit = 0, wait_ms = CTL_WAIT_MS_DEFAULT;
	uint32_t cap = 0;
	st_db *db = NULL;
	int c, rv, code = 0;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(ctl_thr_help, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	sub = argv[1];
	if (strcmp(sub, "list") && strcmp(sub, "set") && strcmp(sub, "clear")) {
		rm_log_error("unknown throttle command '%s' (list, set, clear)", sub);
		return 2;
	}
	optind = 2;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': db_path = optarg; break;
		case 'S': state = optarg; break;
		case 's': server = optarg; break;
		case 'c': ce = optarg; break;
		case 'w': why = optarg; break;
		case 'C': cap_s = optarg; break;
		case 'b':
			if (ctl_time_parse(optarg, now, &since, &err) != 0) {
				rm_log_error("invalid --since '%s': %s", optarg, err);
				return 2;
			}
			break;
		case 'f': {
			int64_t t;

			/* a duration: "60s" is 60 s before now as a time */
			if (ctl_time_parse(optarg, now, &t, &err) != 0 || t >= now) {
				rm_log_error("invalid --for '%s' (a duration such as 30s, 10m)", optarg);
				return 2;
			}
			dur = now - t;
			break;
		}
		case 'l':
			limit = strtol(optarg, NULL, 10);
			if (limit <= 0) {
				rm_log_error("invalid --limit '%s'", optarg);
				return 2;
			}
			break;
		case 'W':
			wait_ms = strtol(optarg, NULL, 10);
			if (wait_ms < 0 || wait_ms > 600000) {
				rm_log_error("invalid --wait '%s' (0 .. 600000 ms)", optarg);
				return 2;
			}
			break;
		case 'o':
			if (ctl_fmt_parse(optarg, &fmt) != 0) {
				rm_log_error("invalid output format '%s' (table, json, csv)", optarg);
				return 2;
			}
			break;
		case 'h': fputs(ctl_thr_help, stdout); return 0;
		default: fputs(ctl_thr_help, stderr); return 2;
		}
	}
	if (optind != argc) {
		rm_log_error("unexpected argument '%s'", argv[optind]);
		return 2;
	}
	if (!db_path)
		db_path = CTL_DEFAULT_DB;
	if (!strcmp(sub, "list")) {
		struct st_throttle_query q = { state, server, ce, since, (size_t)limit };
		struct st_throttle *rows = NULL;
		size_t n;

		if (state && strcmp(state, "active") && !st_throttle_state_valid(state)) {
			rm_log_error("unknown state '%s' (requested, refused, pending, sent, applied, "
				     "superseded, expired, active)", state);
			return 2;
		}
		if ((rv = st_open(&db, db_path, ST_OPEN_READONLY)) != 0)
			return 1;
		rv = st_throttle_list(db, &q, &rows, &n);
		st_close(db);
		if (rv != RM_OK)
			return 1;
		ctl_thr_print(stdout, fmt, rows, n);
		free(rows);
		return 0;
	}
	/* set / clear */
	if (!server || !ce) {
		rm_log_error("throttle %s needs --server and --ce", sub);
		return 2;
	}
	if (!strcmp(sub, "set")) {
		if (!cap_s || ctl_thr_share(cap_s, &cap) != 0) {
			rm_log_error("throttle set needs --cap SHARE (e.g. 30%% or 0.3; 0.1%% .. 100%%)");
			return 2;
		}
	} else if (cap_s) {
		rm_log_error("throttle clear takes no --cap");
		return 2;
	}
	{
		struct st_throttle t, g;
		int64_t deadline;

		memset(&t, 0, sizeof(t));
		t.created_ns = now;
		t.expires_ns = now + dur;
		snprintf(t.who, sizeof(t.who), "rametrctl:%s", ctl_thr_user());
		if (strlen(server) > ST_NAME_MAX || strlen(ce) > ST_NAME_MAX) {
			rm_log_error("server and CE names are at most %d bytes", ST_NAME_MAX);
			return 2;
		}
		snprintf(t.server, sizeof(t.server), "%s", server);
		snprintf(t.ce, sizeof(t.ce), "%s", ce);
		snprintf(t.resource, sizeof(t.resource), "cpu");
		t.cap_permille = cap;
		snprintf(t.why, sizeof(t.why), "%s", why ? why : (cap ? "operator cap" : "operator release"));
		snprintf(t.state, sizeof(t.state), "requested");
		if ((rv = st_open(&db, db_path, 0)) != 0)
			return 1;
		if ((rv = st_throttle_add(db, &t)) != 0) {
			st_close(db);
			return rv == RM_EINVAL ? 2 : 1;
		}
		printf("command %" PRIu64 " requested: %s on %s %s\n", t.id, ce, server,
		       cap ? cap_s : "released");
		deadline = now + wait_ms * 1000000ll;
		g = t;
		while (wait_ms > 0 && strcmp(g.state, "requested") == 0 && rm_clock_unix_ns() < deadline) {
			usleep(100000);
			if ((rv = st_throttle_get(db, t.id, &g)) != 0)
				break;
		}
		if (wait_ms == 0) {
			code = 0;
		} else if (strcmp(g.state, "refused") == 0) {
			fprintf(stderr, "rametrctl: command %" PRIu64 " refused: %s\n", t.id, g.error);
			code = 1;
		} else if (strcmp(g.state, "requested") == 0) {
			fprintf(stderr, "rametrctl: command %" PRIu64 " not picked up by the aggregator within "
					"%ld ms (is it running on '%s'?); it stays requested\n", t.id, wait_ms,
				db_path);
			code = 1;
		} else {
			printf("command %" PRIu64 " %s by the aggregator\n", t.id,
			       strcmp(g.state, "pending") == 0 ? "accepted" : g.state);
		}
		st_close(db);
	}
	return code;
}
