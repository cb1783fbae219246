/*
 * tb_compare.c - tb-compare, the accuracy check of seed 000 §7.2: it sets
 * the CPU time Rametr stored per CE (storage API, st_query_usage over the
 * whole range, resource cpu) against the ground truth that tb-server wrote,
 * prints one line per CE with the relative error, the totals and the
 * server's unaccountable share, and exits 0 only if every CE of the truth
 * file is within the tolerance. Owns the truth rows, the query rows and the
 * read-only database handle while it runs.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rm_err.h"
#include "st.h"
#include "tb_cli.h"
#include "tb_proto.h"
#include "tb_truth.h"
#include "banned.h"

/* Per-CE sums over the rows of the query. */
struct tb_cmp_ce {
	char ce[64];
	uint64_t rametr_ns;
	int in_truth;
};

/* Per-server U and V (V signed: U - sum of the CEs). */
struct tb_cmp_srv {
	char server[64];
	uint64_t total_ns;
	int64_t unacct_ns;
};

static void tb_usage(FILE *f)
{
	fprintf(f,
		"usage: tb-compare --truth FILE --db FILE [--server NODE] [--since T] [--until T]\n"
		"                  [--tolerance PCT]\n"
		"\n"
		"  --truth FILE      ground truth written by tb-server\n"
		"  --db FILE         Rametr's database (opened read-only)\n"
		"  --server NODE     only this server's usage (default: all servers, summed)\n"
		"  --since T         only windows starting at or after T (Unix seconds)\n"
		"  --until T         only windows starting before T (Unix seconds)\n"
		"  --tolerance PCT   largest accepted |error| per CE, percent (default 2.0)\n"
		"\n"
		"error = (rametr - truth) / truth; exit 0 if every CE of the truth file is\n"
		"within the tolerance, 1 if not (or the truth file names no CE), 2 on bad\n"
		"arguments or unreadable inputs\n");
}

static struct tb_cmp_ce *tb_find_ce(struct tb_cmp_ce *v, size_t n, const char *ce)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(v[i].ce, ce) == 0)
			return &v[i];
	return NULL;
}

static int tb_parse_time(const char *opt, const char *s, int64_t *ns)
{
	double v;

	if (tb_parse_pos_double(s, 9.2e9, &v) != RM_OK) {
		rm_log_error("bad %s '%s': expected Unix seconds", opt, s);
		return RM_EINVAL;
	}
	*ns = (int64_t)(v * 1e9);
	return RM_OK;
}

/* Error of r against t in percent; INFINITY if t == 0 < r. */
static double tb_err_pct(uint64_t t, uint64_t r)
{
	if (t == 0)
		return r == 0 ? 0.0 : INFINITY;
	return ((double)r - (double)t) * 100.0 / (double)t;
}

static int tb_compare(const struct tb_truth_row *truth, size_t nt, const struct st_row *rows,
		      size_t nr, double tol)
{
	struct tb_cmp_ce *ces = NULL;
	struct tb_cmp_srv *srvs = NULL;
	size_t nce = 0, nsrv = 0, i, j;
	uint64_t sum_t = 0, sum_r = 0, sum_u = 0;
	int64_t sum_v = 0;
	double max_err = 0;
	int ok = 1;

	ces = calloc(nt + nr + 1, sizeof(*ces));
	srvs = calloc(nr + 1, sizeof(*srvs));
	if (!ces || !srvs) {
		rm_log_error("out of memory");
		free(ces);
		free(srvs);
		return 2;
	}
	for (i = 0; i < nt; i++) {
		snprintf(ces[nce].ce, sizeof(ces[nce].ce), "%s", truth[i].ce);
		ces[nce++].in_truth = 1;
	}
	for (i = 0; i < nr; i++) {
		const struct st_row *r = &rows[i];
		struct tb_cmp_srv *s = NULL;
		struct tb_cmp_ce *c;

		if (r->resource != ST_R_CPU)
			continue;
		for (j = 0; j < nsrv; j++)
			if (strcmp(srvs[j].server, r->server) == 0)
				s = &srvs[j];
		if (!s) {
			s = &srvs[nsrv++];
			snprintf(s->server, sizeof(s->server), "%s", r->server);
			s->total_ns = r->total;
		}
		if (strcmp(r->ce, ST_CE_UNACCOUNTABLE) == 0) {
			s->unacct_ns = r->residual;
			continue;
		}
		c = tb_find_ce(ces, nce, r->ce);
		if (!c) {
			c = &ces[nce++];
			snprintf(c->ce, sizeof(c->ce), "%s", r->ce);
		}
		c->rametr_ns += r->value;
	}
	if (nsrv > 1)
		rm_log_warn("the database holds %zu servers and their usage is summed; "
			    "use --server to compare one", nsrv);

	printf("%-24s %14s %14s %9s\n", "CE", "TRUTH_CPU_S", "RAMETR_CPU_S", "ERROR_%");
	for (i = 0; i < nt; i++) {
		struct tb_cmp_ce *c = tb_find_ce(ces, nce, truth[i].ce);
		double e = tb_err_pct(truth[i].cpu_ns, c->rametr_ns);

		sum_t += truth[i].cpu_ns;
		sum_r += c->rametr_ns;
		if (!(fabs(e) <= tol))
			ok = 0;
		if (fabs(e) > max_err || isinf(e))
			max_err = fabs(e);
		printf("%-24s %14.6f %14.6f %9.3f\n", truth[i].ce, (double)truth[i].cpu_ns / 1e9,
		       (double)c->rametr_ns / 1e9, e);
	}
	for (i = 0; i < nce; i++) {
		if (ces[i].in_truth)
			continue;
		sum_r += ces[i].rametr_ns;
		printf("%-24s %14s %14.6f %9s  (not in truth)\n", ces[i].ce, "-",
		       (double)ces[i].rametr_ns / 1e9, "-");
	}
	printf("%-24s %14.6f %14.6f %9.3f\n", "TOTAL", (double)sum_t / 1e9, (double)sum_r / 1e9,
	       tb_err_pct(sum_t, sum_r));
	for (i = 0; i < nsrv; i++) {
		sum_u += srvs[i].total_ns;
		sum_v += srvs[i].unacct_ns;
	}
	printf("server total U %.6f s, unaccountable V %.6f s (%.3f%% of U)\n", (double)sum_u / 1e9,
	       (double)sum_v / 1e9, sum_u ? (double)sum_v * 100.0 / (double)sum_u : 0.0);
	if (nt == 0) {
		rm_log_error("the truth file names no ce");
		ok = 0;
	}
	printf("max error %.3f%% (tolerance %.3f%%)\n", max_err, tol);
	free(ces);
	free(srvs);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "truth", required_argument, NULL, 't' },
		{ "db", required_argument, NULL, 'd' },
		{ "server", required_argument, NULL, 's' },
		{ "since", required_argument, NULL, 'S' },
		{ "until", required_argument, NULL, 'U' },
		{ "tolerance", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *truth_path = NULL, *db_path = NULL, *server = NULL;
	struct tb_truth_row *truth = NULL;
	struct st_row *rows = NULL;
	struct st_query q;
	size_t nt = 0, nr = 0;
	double tol = 2.0;
	st_db *db = NULL;
	int c, rv, ret;

	rm_log_init("tb-compare");
	memset(&q, 0, sizeof(q));
	/* Everything unless --since/--until narrow it (st.h: since <= start < until). */
	q.since_ns = INT64_MIN;
	q.until_ns = INT64_MAX;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			truth_path = optarg;
			break;
		case 'd':
			db_path = optarg;
			break;
		case 's':
			server = optarg;
			if (!*server || strlen(server) > ST_NAME_MAX) {
				rm_log_error("bad --server '%s': expected 1..%d characters", optarg,
					     ST_NAME_MAX);
				return 2;
			}
			break;
		case 'S':
			if (tb_parse_time("--since", optarg, &q.since_ns) != RM_OK)
				return 2;
			break;
		case 'U':
			if (tb_parse_time("--until", optarg, &q.until_ns) != RM_OK)
				return 2;
			break;
		case 'T':
			if (tb_parse_pos_double(optarg, 1e6, &tol) != RM_OK) {
				rm_log_error("bad --tolerance '%s': expected a percentage > 0", optarg);
				return 2;
			}
			break;
		default:
			return tb_cli_other(c, argv, "tb-compare", tb_usage);
		}
	}
	if (tb_cli_extra_args(argc, argv, tb_usage))
		return 2;
	if (!truth_path || !db_path) {
		rm_log_error("--truth and --db are required");
		tb_usage(stderr);
		return 2;
	}
	if (q.until_ns <= q.since_ns) {
		rm_log_error("--until must be after --since");
		return 2;
	}
	if (tb_truth_load(truth_path, &truth, &nt) != RM_OK)
		return 2;
	if ((rv = st_open(&db, db_path, ST_OPEN_READONLY)) != RM_OK) {
		free(truth);
		return 2;
	}
	q.server = server;
	q.ce = NULL;
	q.resource = ST_R_CPU;
	q.per_window = 0;
	if ((rv = st_query_usage(db, &q, &rows, &nr)) != RM_OK) {
		rm_log_error("failed to query '%s': %s", db_path, rm_strerror(rv));
		st_close(db);
		free(truth);
		return 2;
	}
	ret = tb_compare(truth, nt, rows, nr, tol);
	st_rows_free(rows);
	st_close(db);
	free(truth);
	return ret;
}
