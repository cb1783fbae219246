/*
 * rm_phase.h - one run ("phase") of a testbed server under some tenants'
 * loads, for the tests that compare a server the tenants share with its own
 * truth (integ_go, integ_grpc): Rametr watching the namespace host rm-be,
 * the server on rm-be, the tenants' load tools on their own hosts, the
 * server's CPU from /proc over the load, every process stopped; and the
 * server's truth CSV read back in the tests' CE order; and the truth from
 * separate runs (each tenant's load alone, in rounds alternating with the
 * shared load) that integ_go, integ_grpc and integ_jvm compare Rametr with.
 *
 * The includer includes rm_err.h, st.h, tb_testutil.h, tb_truth.h, rm_hosts.h
 * and rm_usage.h first.
 */
#ifndef RM_PHASE_H
#define RM_PHASE_H

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rm_phase {
	int load_ok;                    /* every load succeeded, the server stopped cleanly */
	uint64_t server_ns;             /* the server's CPU during the load (its process CPU clock) */
	int64_t since, until;           /* the load, wall clock ns */
	unsigned long long busy, steal; /* machine jiffies during the load */
};

/*
 * The phases' length in seconds: env's value when it is a whole number in
 * [4, 600], else def (a phase of a few seconds holds a light tenant's CPU
 * to a few hundred label samples; longer ones shrink both the samples' and
 * the truth's noise). Writes it to buf (len >= 4) in the form the loads'
 * --duration takes and returns it.
 */
static inline unsigned rm_phase_secs(const char *env, unsigned def, char *buf, size_t len)
{
	const char *e = getenv(env);
	char *end = NULL;
	long v = e ? strtol(e, &end, 10) : 0;
	int ok = e && *e && !*end && v >= 4 && v <= 600;
	unsigned s = ok ? (unsigned)v : def;

	if (e && !ok)
		fprintf(stderr, "%s=%s is not a phase length of 4-600 s; using %u s\n", env, e, def);
	snprintf(buf, len, "%u", s);
	return s;
}

/* The phase's length in seconds. */
static inline double rm_phase_s(const struct rm_phase *p)
{
	return (double)(p->until - p->since) / 1e9;
}

/*
 * Starts rametr-aggregator agg_bin (testbed/<ini>, database db, its log
 * <dir>/aggregator.log, with the space-separated options agg_args added, at
 * most 8) and rametr-collector col_bin for rm-be (node "be", --netns rm-be,
 * 1 s windows, its spool and log in dir) with the space-separated options
 * col_args (at most 8) added. *agg and *col are what was spawned (-1: not),
 * to be stopped by the caller. On failure why holds the reason ("did not
 * attach" when the collector could not).
 */
static inline void rm_phase_start_rametr(const char *agg_bin, const char *col_bin, const char *dir, const char *ini,
					 const char *db, const char *agg_args, const char *col_args, pid_t *agg,
					 pid_t *col, char *why, size_t whylen)
{
	char url[400], spool[400], conf[400], args[256], aargs[256], *tok, *save = NULL;
	char *argv[20] = { (char *)col_bin, "--aggregator", url, "--node", "be", "--netns", "rm-be",
			   "--window", "1s", "--spool", spool };
	char *aargv[16] = { (char *)agg_bin, "--config", conf, "--db", (char *)db, "--listen", url };
	size_t n = 11, na = 7;

	*agg = *col = -1;
	snprintf(spool, sizeof(spool), "%s/spool-be", dir);
	snprintf(url, sizeof(url), "ipc://%s/aggregator.ipc", dir);
	snprintf(conf, sizeof(conf), "%s/testbed/%s", RM_SOURCE_DIR, ini);
	snprintf(aargs, sizeof(aargs), "%s", agg_args ? agg_args : "");
	for (tok = strtok_r(aargs, " ", &save); tok && na < 15; tok = strtok_r(NULL, " ", &save))
		aargv[na++] = tok;
	aargv[na] = NULL;
	*agg = rm_hosts_spawn(aargv, tbt_path(dir, "aggregator.log"));
	if (*agg < 0 || rm_hosts_wait_text(tbt_path(dir, "aggregator.log"), "listening on", *agg, 10000) != 0) {
		snprintf(why, whylen, "rametr-aggregator did not start (see aggregator.log)");
		return;
	}
	save = NULL;
	snprintf(args, sizeof(args), "%s", col_args ? col_args : "");
	for (tok = strtok_r(args, " ", &save); tok && n < 19; tok = strtok_r(NULL, " ", &save))
		argv[n++] = tok;
	argv[n] = NULL;
	*col = rm_hosts_spawn(argv, tbt_path(dir, "collector-be.log"));
	if (*col < 0 || rm_hosts_wait_text(tbt_path(dir, "collector-be.log"), "attached", *col, 20000) != 0)
		snprintf(why, whylen, "rametr-collector --netns rm-be did not attach (see collector-be.log)");
}

/*
 * One phase named tag: server_argv spawned on rm-be (its log
 * <dir>/<server_log>, awaited until it says "listening"), then for each k <
 * n in mask the load load_argv[k] on host hosts[k] (its log
 * <dir>/load-<host>-<tag>.txt), all awaited (idle_s + 60 s each, at least
 * 120 s); with mask 0 the server idles idle_s seconds, the loads' length. The server's CPU is read from /proc from before the loads
 * start to after the last ends; then the server is stopped. Fills *p.
 */
static inline void rm_phase_run(struct rm_phase *p, const char *dir, char *const server_argv[], const char *server_log,
				size_t n, const char *const hosts[], char *const *const load_argv[], const char *tag,
				unsigned mask, unsigned idle_s)
{
	char slog[512];
	pid_t srv, pids[8];
	uint64_t c0;
	unsigned long long b0, s0, b1, s1;
	int failed = 0, stopped;
	size_t i;

	memset(p, 0, sizeof(*p));
	if (n > 8)
		return;
	snprintf(slog, sizeof(slog), "%s/%s", dir, server_log);
	srv = rm_hosts_spawn_in("be", server_argv, slog);
	if (srv < 0 || rm_hosts_wait_text(slog, "listening", srv, 10000) != 0)
		return;
	rm_hosts_jiffies(&b0, &s0);
	c0 = rm_hosts_proc_cpu_ns(srv);
	p->since = rm_hosts_real_ns();
	for (i = 0; i < n; i++) {
		char log[64];

		pids[i] = -1;
		if (!(mask & (1u << i)))
			continue;
		snprintf(log, sizeof(log), "load-%s-%s.txt", hosts[i], tag);
		pids[i] = rm_hosts_spawn_in(hosts[i], load_argv[i], tbt_path(dir, log));
		failed += pids[i] < 0;
	}
	if (!mask)
		usleep(idle_s * 1000000u);
	for (i = 0; i < n; i++) {
		if (pids[i] < 0)
			continue;
		failed += tbt_wait(pids[i], (int)(idle_s > 60 ? idle_s + 60 : 120) * 1000) != 0;
		rm_hosts_forget(pids[i]);
	}
	p->until = rm_hosts_real_ns();
	p->server_ns = rm_hosts_proc_cpu_ns(srv) - c0;
	rm_hosts_jiffies(&b1, &s1);
	p->busy = b1 - b0;
	p->steal = s1 - s0;
	stopped = rm_hosts_stop(srv, 20000) == 0;
	p->load_ok = failed == 0 && stopped;
}

/*
 * The rows of truth file <dir>/<name> in ces[] order (n of them; a zero row
 * for a CE it lacks). RM_OK or tb_truth_load's error.
 */
static inline int rm_phase_truth(const char *dir, const char *name, const char *const ces[], size_t n,
				 struct tb_truth_row out[])
{
	struct tb_truth_row *tr = NULL;
	size_t nt = 0, i, k;
	int rv;

	memset(out, 0, n * sizeof(out[0]));
	if ((rv = tb_truth_load(tbt_path(dir, name), &tr, &nt)) != RM_OK)
		return rv;
	for (i = 0; i < nt; i++)
		for (k = 0; k < n; k++)
			if (!strcmp(tr[i].ce, ces[k]))
				out[k] = tr[i];
	free(tr);
	return RM_OK;
}

/*
 * Prints a shared phase's tenants, the truth tr against Rametr's got (ns),
 * one line each: its kind of work (work[k], named work_hdr in the header),
 * its requests (named count_hdr), both CPUs, Rametr's error and both
 * shares; then the server's CPU (server_ns, /proc) against Rametr's U
 * (total), what it charged to the tenants and V. Sets *charged and *tsum to
 * the sums of got and of the truth's CPU.
 */
static inline void rm_phase_print_tenants(size_t n, const char *const ces[], const char *const work[],
					  const char *work_hdr, const char *count_hdr, const struct tb_truth_row tr[],
					  const uint64_t got[], uint64_t total, int64_t v, uint64_t server_ns,
					  uint64_t *charged, uint64_t *tsum)
{
	size_t i;

	*charged = *tsum = 0;
	for (i = 0; i < n; i++) {
		*charged += got[i];
		*tsum += tr[i].cpu_ns;
	}
	fprintf(stderr, "%-4s %-7s %8s %10s %10s %8s %8s %8s %7s\n", "ce", work_hdr, count_hdr, "truth_s", "rametr_s",
		"error_%", "truth_%", "rametr_%", "diff_pp");
	for (i = 0; i < n; i++) {
		double err = tr[i].cpu_ns ? ((double)got[i] - (double)tr[i].cpu_ns) * 100.0 / (double)tr[i].cpu_ns : 100.0;
		double ts = *tsum ? 100.0 * (double)tr[i].cpu_ns / (double)*tsum : 0.0;
		double rs = *charged ? 100.0 * (double)got[i] / (double)*charged : 0.0;

		fprintf(stderr, "%-4s %-7s %8" PRIu64 " %10.4f %10.4f %8.2f %8.2f %8.2f %7.2f\n", ces[i], work[i],
			tr[i].requests, (double)tr[i].cpu_ns / 1e9, (double)got[i] / 1e9, err, ts, rs, rs - ts);
	}
	fprintf(stderr, "server CPU %.4f s (/proc); Rametr U %.4f s (%.1f%% of it), charged to tenants %.4f s "
		"(%.1f%% of /proc, %.1f%% of U), V %.4f s\n", (double)server_ns / 1e9, (double)total / 1e9,
		server_ns ? 100.0 * (double)total / (double)server_ns : 0.0, (double)*charged / 1e9,
		server_ns ? 100.0 * (double)*charged / (double)server_ns : 0.0,
		total ? 100.0 * (double)*charged / (double)total : 0.0, (double)v / 1e9);
}

/*
 * The phases after a shared run, for a truth from separate runs in one
 * round (integ_jvm; rm_phase_rounds for several): the server idle (slot 0,
 * tag "idle", no load), then each of the n tenants alone (slot k + 1, tag
 * "<ces[k]>-alone", mask 1 << k), each after 2.5 s for the previous phase's
 * windows to close, until one fails. run(slot, mask, tag) runs one phase
 * and returns whether every load succeeded. Returns 1 if all did.
 */
static inline int rm_phase_separate(size_t n, const char *const ces[],
				    int (*run)(size_t slot, unsigned mask, const char *tag))
{
	char tag[32];
	size_t k;

	usleep(2500000);
	if (!run(0, 0, "idle"))
		return 0;
	for (k = 0; k < n; k++) {
		usleep(2500000);
		snprintf(tag, sizeof(tag), "%s-alone", ces[k]);
		if (!run(k + 1, 1u << k, tag))
			return 0;
	}
	return 1;
}

#define RM_SEP_ROUNDS 8 /* at most, of the separate runs */
#define RM_SEP_CES 4     /* tenants, at most */

/*
 * The truth from separate runs, in rounds. Round 0 is the shared phase the
 * test runs anyway (shared[0]), then the server idle once (idle), then each
 * tenant alone (alone[0][k]); every further round r runs the tenants
 * together again (shared[r]) and then each alone (alone[r][k]), the order of
 * the tenants alone turned by one each round, each phase on a fresh server
 * with the same loads (the same open-loop rates and length) as the shared
 * phase, 2.5 s apart for the windows to close; and, with three or more
 * tenants and RM_SEP_SUBSETS=1, every group of 2..n-1 of them together
 * (sub[r][mask]).
 */
struct rm_sep {
	size_t n, rounds;       /* tenants; rounds run (all their phases answered) */
	int subsets;            /* the rounds also ran every group of 2..n-1 tenants (sub[r][mask]) */
	struct rm_phase idle;
	struct rm_phase shared[RM_SEP_ROUNDS], alone[RM_SEP_ROUNDS][RM_SEP_CES];
	struct rm_phase sub[RM_SEP_ROUNDS][1u << RM_SEP_CES];
};

/* The tenants in mask. */
static inline unsigned rm_sep_members(unsigned mask)
{
	unsigned c = 0;

	for (; mask; mask &= mask - 1)
		c++;
	return c;
}

/* The tag of a group's phase: its tenants joined by '+', then "-r<r>" from round 1 on ("c1+c3-r2"). */
static inline void rm_sep_tag_group(char *buf, size_t len, const char *const ces[], size_t n, unsigned mask,
				    size_t round)
{
	size_t k, used = 0;

	buf[0] = '\0';
	for (k = 0; k < n && used < len; k++)
		if (mask & (1u << k))
			used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "+" : "", ces[k]);
	if (round && used < len)
		snprintf(buf + used, len - used, "-r%zu", round);
}

/* The tag of a phase: "shared" (round 0), "shared-r<r>", "<ce>-alone" (round 0), "<ce>-alone-r<r>". */
static inline void rm_sep_tag(char *buf, size_t len, const char *ce, size_t round)
{
	if (ce && round)
		snprintf(buf, len, "%s-alone-r%zu", ce, round);
	else if (ce)
		snprintf(buf, len, "%s-alone", ce);
	else if (round)
		snprintf(buf, len, "shared-r%zu", round);
	else
		snprintf(buf, len, "shared");
}

/*
 * Runs the separate phases of s (s->shared[0] already run by the caller)
 * for `rounds` rounds (1..RM_SEP_ROUNDS) of n tenants (n <= RM_SEP_CES):
 * run(p, mask, tag) runs one phase into *p (mask 0: the server idle; bit k:
 * ces[k]). With environment variable RM_SEP_SUBSETS=1, each round then
 * runs every group of 2..n-1 tenants together too (s->sub[r][mask], tag
 * rm_sep_tag_group), for the Shapley truth of rm_phase_sep_report.
 * Stops at the first phase whose loads did not all succeed. Sets s->n,
 * s->subsets and s->rounds (the rounds completed); returns 1 if all were.
 */
static inline int rm_phase_rounds(struct rm_sep *s, size_t n, const char *const ces[], size_t rounds,
				  void (*run)(struct rm_phase *p, unsigned mask, const char *tag))
{
	const char *e = getenv("RM_SEP_SUBSETS");
	char tag[48];
	size_t r, j, k;
	unsigned m, full;

	s->n = n;
	s->rounds = 0;
	s->subsets = n > 2 && e && !strcmp(e, "1");
	if (n > RM_SEP_CES || rounds < 1 || rounds > RM_SEP_ROUNDS)
		return 0;
	full = (1u << n) - 1;
	usleep(2500000);
	run(&s->idle, 0, "idle");
	if (!s->idle.load_ok)
		return 0;
	for (r = 0; r < rounds; r++) {
		if (r) {
			usleep(2500000);
			rm_sep_tag(tag, sizeof(tag), NULL, r);
			run(&s->shared[r], (1u << n) - 1, tag);
			if (!s->shared[r].load_ok)
				return 0;
		}
		for (j = 0; j < n; j++) {
			k = (j + r) % n;
			usleep(2500000);
			rm_sep_tag(tag, sizeof(tag), ces[k], r);
			run(&s->alone[r][k], 1u << k, tag);
			if (!s->alone[r][k].load_ok)
				return 0;
		}
		for (j = 0; s->subsets && j < full; j++) {
			m = 1u + (unsigned)((j + r) % full); /* the groups' order turned by one each round */
			if (rm_sep_members(m) < 2 || m == full)
				continue;
			usleep(2500000);
			rm_sep_tag_group(tag, sizeof(tag), ces, n, m, r);
			run(&s->sub[r][m], m, tag);
			if (!s->sub[r][m].load_ok)
				return 0;
		}
		s->rounds = r + 1;
	}
	return 1;
}

/*
 * A test's run between rm_phase_start_rametr and rm_phase_stop_rametr: the
 * shared phase into s->shared[0] (run(p, mask, tag) as for
 * rm_phase_rounds), then, if environment variable env is a number N > 0
 * and every load of the shared phase succeeded, N rounds of separate runs
 * (at most RM_SEP_ROUNDS: rm_phase_rounds). Returns the rounds asked for
 * (0: none, also for a value that is no positive number); *ok is 1 if all
 * of them were run, else 0.
 */
static inline size_t rm_phase_shared_then_rounds(struct rm_sep *s, size_t n, const char *const ces[],
						 const char *env, int *ok,
						 void (*run)(struct rm_phase *p, unsigned mask, const char *tag))
{
	const char *e = getenv(env);
	int asked = e ? atoi(e) : 0;
	size_t rounds = asked > 0 ? (size_t)asked : 0;

	*ok = 0;
	run(&s->shared[0], (1u << n) - 1, "shared");
	if (rounds > RM_SEP_ROUNDS)
		rounds = RM_SEP_ROUNDS;
	if (rounds && s->shared[0].load_ok)
		*ok = rm_phase_rounds(s, n, ces, rounds, run);
	return rounds;
}

/* The median of v[0..n) (sorted in place); 0 for n 0. */
static inline double rm_phase_median(double *v, size_t n)
{
	size_t i, j;

	for (i = 1; i < n; i++)
		for (j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return !n ? 0.0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/*
 * One shared run against the truth from separate runs. cost[k] is tenant
 * k's CPU per request alone (the server's CPU in its phase alone less the
 * idle server's, over its requests), req[k] its requests in the shared run,
 * target the shared run's server CPU less the idle server's, got[k] what
 * Rametr charged k in the shared run and charged their sum.
 *
 * The truth of k is cost[k] x req[k], scaled by target / sum_j cost[j] x
 * req[j]: the separate runs give each tenant's share of the server's CPU,
 * and the shared run's own CPU (from /proc) gives the amount. So error_%
 * compares CPU per tenant after taking out the separate runs' additivity
 * (sum_j cost[j] x req[j] / target, printed): a tenant's error is its share's
 * error as much as its amount's. raw_% is the error against cost[k] x req[k]
 * unscaled (additivity left in). Prints one table under title (names[k]:
 * the tenant's path or method); fills truth[k] (ns), err[k] (%), pp[k]
 * (Rametr's share of charged less the truth's share of target, points) and
 * returns the additivity (0 if there is nothing to compare).
 */
static inline double rm_phase_sep_table(const char *title, size_t n, const char *const ces[],
					const char *const names[], const double cost[], const uint64_t req[],
					double target, const uint64_t got[], uint64_t charged, double truth[],
					double err[], double pp[])
{
	double raw[RM_SEP_CES], raw_sum = 0;
	size_t k;

	for (k = 0; k < n && k < RM_SEP_CES; k++) {
		raw[k] = cost[k] * (double)req[k];
		raw_sum += raw[k];
	}
	if (n > RM_SEP_CES || target <= 0 || raw_sum <= 0 || !charged)
		return 0;
	fprintf(stderr, "%s: shared run less idle %.4f s; the alone costs times the shared requests %.4f s "
		"(additivity %.3f)\n", title, target / 1e9, raw_sum / 1e9, raw_sum / target);
	fprintf(stderr, "%-4s %-7s %8s %10s %11s %10s %8s %8s %8s %8s %7s\n", "ce", "work", "requests", "us_alone",
		"sep_truth_s", "rametr_s", "error_%", "raw_%", "truth_%", "rametr_%", "diff_pp");
	for (k = 0; k < n; k++) {
		double ts, rs;

		truth[k] = raw[k] * target / raw_sum;
		ts = 100.0 * truth[k] / target;
		rs = 100.0 * (double)got[k] / (double)charged;
		err[k] = ((double)got[k] - truth[k]) * 100.0 / truth[k];
		pp[k] = rs - ts;
		fprintf(stderr, "%-4s %-7s %8" PRIu64 " %10.1f %11.4f %10.4f %8.2f %8.2f %8.2f %8.2f %7.2f\n", ces[k],
			names[k], req[k], cost[k] / 1e3, truth[k] / 1e9, (double)got[k] / 1e9, err[k],
			((double)got[k] - raw[k]) * 100.0 / raw[k], ts, rs, pp[k]);
	}
	fprintf(stderr, "charged to tenants %.1f%% of the shared run's server CPU less idle\n",
		100.0 * (double)charged / target);
	return raw_sum / target;
}

/* V of reason `reason` at node "be" over [since, until) in database db (ns); 0 if none or unreadable. */
static inline uint64_t rm_phase_v_reason(const char *db, int64_t since, int64_t until, const char *reason)
{
	struct st_query q = { since, until, "be", NULL, ST_R_CPU, 0 };
	struct st_row *rows = NULL;
	size_t n = 0, i;
	st_db *d = NULL;
	uint64_t v = 0;

	if (st_open(&d, db, ST_OPEN_READONLY) != RM_OK)
		return 0;
	if (st_query_unacct(d, &q, &rows, &n) == RM_OK)
		for (i = 0; i < n; i++)
			if (!strcmp(rows[i].reason, reason))
				v += rows[i].value;
	st_rows_free(rows);
	st_close(d);
	return v;
}

/*
 * The error of each tenant taken apart, for a shared run Rametr's
 * aggregator ran with the runtime rule off (--no-charge-runtime): seg[k]
 * is what Rametr charged k (its segments and their tails), rt the managed
 * runtime's CPU outside segments (V 'runtime'), req[k] its requests, truth[k]
 * (ns) the separate runs' truth (rm_phase_sep_table). Prints the segments'
 * error, the runtime CPU's part by requests and by CPU, and each tenant's
 * error if rt were charged f by requests and 1 - f by segments' CPU (the
 * runtime rule over the whole run rather than per window) for f = 0, 0.3,
 * 0.5, 0.7, 1, and the f that fits this run best (least squares over the
 * tenants, clamped to [0, 1]). Returns that f (-1 if there is nothing).
 */
static inline double rm_phase_sep_decompose(size_t n, const char *const ces[], const uint64_t seg[],
					    const uint64_t req[], double rt, const double truth[])
{
	static const double fs[] = { 0.0, 0.3, 0.5, 0.7, 1.0 };
	double sseg = 0, sreq = 0, a[RM_SEP_CES], b[RM_SEP_CES], ab = 0, bb = 0, best;
	size_t k, i;

	for (k = 0; k < n && k < RM_SEP_CES; k++) {
		sseg += (double)seg[k];
		sreq += (double)req[k];
	}
	if (n > RM_SEP_CES || sseg <= 0 || sreq <= 0 || rt <= 0)
		return -1;
	fprintf(stderr, "taken apart (runtime rule off): the runtime's CPU outside segments %.4f s (V 'runtime')\n",
		rt / 1e9);
	fprintf(stderr, "%-4s %10s %8s %10s %10s", "ce", "segs_s", "segs_%", "rt_by_req", "rt_by_cpu");
	for (i = 0; i < sizeof(fs) / sizeof(fs[0]); i++)
		fprintf(stderr, "   f=%.1f_%%", fs[i]);
	fprintf(stderr, "\n");
	for (k = 0; k < n; k++) {
		double q = (double)req[k] / sreq, c = (double)seg[k] / sseg;

		/* the error at f, in ns: a[k] + f * b[k] */
		a[k] = (double)seg[k] + rt * c - truth[k];
		b[k] = rt * (q - c);
		ab += a[k] * b[k];
		bb += b[k] * b[k];
		fprintf(stderr, "%-4s %10.4f %8.2f %10.4f %10.4f", ces[k], (double)seg[k] / 1e9,
			((double)seg[k] - truth[k]) * 100.0 / truth[k], rt * q / 1e9, rt * c / 1e9);
		for (i = 0; i < sizeof(fs) / sizeof(fs[0]); i++)
			fprintf(stderr, " %9.2f", (a[k] + fs[i] * b[k]) * 100.0 / truth[k]);
		fprintf(stderr, "\n");
	}
	best = bb > 0 ? -ab / bb : 0.0;
	best = best < 0 ? 0 : best > 1 ? 1 : best;
	fprintf(stderr, "the weight by requests that fits this run best: f = %.2f; errors there:", best);
	for (k = 0; k < n; k++)
		fprintf(stderr, " %s %.2f%%", ces[k], (a[k] + best * b[k]) * 100.0 / truth[k]);
	fprintf(stderr, "\n");
	return best;
}

/*
 * The Shapley truth, for separate runs that also ran every group of 2..n-1
 * tenants (s->subsets): v[mask] (ns) is a group's CPU (its phase's server
 * CPU less the idle server's, the median over the rounds) for every mask
 * but 0 and all tenants; v(all) is each shared round's own, target[r]. A
 * tenant's truth is its Shapley value: over every order of adding the
 * tenants one by one, the mean CPU the server gained when it came in,
 * sum over groups S without k of |S|! (n-1-|S|)! / n! (v(S+k) - v(S)). The
 * values sum to v(all) exactly; where costs add up (a group's CPU the sum
 * of its tenants' alone) each is the tenant's CPU alone, and where sharing
 * saves CPU each tenant's part of the saving follows what its coming in
 * saved beside each group, where the separate runs' table scales every cost
 * alone by one factor. Prints a table per round against Rametr's got[r][k]
 * and the median errors over the rounds.
 */
static inline void rm_phase_sep_shapley(const struct rm_sep *s, const char *const ces[], const double v[],
					const double target[], const uint64_t got[][RM_SEP_CES])
{
	static const double fact[RM_SEP_CES + 1] = { 1, 1, 2, 6, 24 };
	size_t n = s->n, r, k;
	unsigned full = (1u << n) - 1, m;
	double e[RM_SEP_ROUNDS], err[RM_SEP_ROUNDS][RM_SEP_CES];
	int within = 0;

	fprintf(stderr, "the Shapley truth (each tenant's mean marginal CPU over the orders of adding them; groups' "
		"CPU, median over the rounds, less idle):");
	for (m = 1; m < full; m++) {
		char tag[48];

		rm_sep_tag_group(tag, sizeof(tag), ces, n, m, 0);
		fprintf(stderr, " %s %.4f s", tag, v[m] / 1e9);
	}
	fprintf(stderr, "\n");
	for (r = 0; r < s->rounds; r++) {
		double charged = 0;

		for (k = 0; k < n; k++)
			charged += (double)got[r][k];
		fprintf(stderr, "round %zu: shared run less idle %.4f s\n%-4s %11s %10s %8s %8s %8s %7s\n", r,
			target[r] / 1e9, "ce", "shapley_s", "rametr_s", "error_%", "truth_%", "rametr_%", "diff_pp");
		for (k = 0; k < n; k++) {
			double phi = 0, ts, rs;

			for (m = 0; m < full; m++) {
				unsigned sz = rm_sep_members(m), mk = m | (1u << k);
				double with, without;

				if (m & (1u << k))
					continue;
				with = mk == full ? target[r] : v[mk];
				without = m ? v[m] : 0.0;
				phi += fact[sz] * fact[n - 1 - sz] / fact[n] * (with - without);
			}
			err[r][k] = phi > 0 ? ((double)got[r][k] - phi) * 100.0 / phi : 100.0;
			within += fabs(err[r][k]) <= 3.0;
			ts = target[r] > 0 ? 100.0 * phi / target[r] : 0.0;
			rs = charged > 0 ? 100.0 * (double)got[r][k] / charged : 0.0;
			fprintf(stderr, "%-4s %11.4f %10.4f %8.2f %8.2f %8.2f %7.2f\n", ces[k], phi / 1e9,
				(double)got[r][k] / 1e9, err[r][k], ts, rs, rs - ts);
		}
	}
	fprintf(stderr, "over the rounds, each tenant's error against the Shapley truth (%%):");
	for (k = 0; k < n; k++) {
		for (r = 0; r < s->rounds; r++)
			e[r] = err[r][k];
		fprintf(stderr, " %s median %.2f", ces[k], rm_phase_median(e, s->rounds));
	}
	fprintf(stderr, "; within 3%%: %d of %zu\n", within, s->rounds * n);
}

/*
 * What the separate runs' rounds of s give and how Rametr compares, for
 * integ_go and integ_grpc (each phase's truth in <dir>/truth-<tag>.csv, its
 * requests checked against want[k], Rametr's database db): the noise of the
 * truth (each tenant's CPU per request alone, less idle, round by round,
 * with its median and spread), then each shared round against the truth
 * from the medians (rm_phase_sep_table; taken apart with
 * rm_phase_sep_decompose when that round left V 'runtime'). Fills add[r],
 * err[r][k] and pp[r][k] for r < s->rounds and cost[k] (the medians, ns
 * per request). Returns RM_OK, RM_EPROTO if a phase answered other than
 * want[k] requests, or a truth file's or the database's error.
 */
static inline int rm_phase_sep_report(const struct rm_sep *s, const char *dir, const char *db,
				      const char *const ces[], const char *const names[], const uint64_t want[],
				      double cost[], double add[], double err[][RM_SEP_CES], double pp[][RM_SEP_CES])
{
	struct tb_truth_row ta[RM_SEP_CES];
	double idle_rate, per[RM_SEP_CES][RM_SEP_ROUNDS], v[RM_SEP_ROUNDS], truth[RM_SEP_CES];
	double vgroup[1u << RM_SEP_CES] = { 0 }, target[RM_SEP_ROUNDS];
	uint64_t gots[RM_SEP_ROUNDS][RM_SEP_CES];
	char tag[48], csv[96];
	size_t r, k, n = s->n;
	unsigned m;
	int rv;

	if (!s->rounds || n > RM_SEP_CES)
		return RM_EINVAL;
	idle_rate = (double)s->idle.server_ns / rm_phase_s(&s->idle);
	fprintf(stderr, "separate runs, %zu rounds: the server idle %.4f s in %.1f s (%.2f ms/s)\n", s->rounds,
		(double)s->idle.server_ns / 1e9, rm_phase_s(&s->idle), idle_rate / 1e6);
	fprintf(stderr, "%-4s %-7s %6s %9s %10s %10s %10s %9s %8s %14s\n", "ce", "work", "round", "requests",
		"server_s", "us_per_req", "rametr_s", "charged_%", "V_s", "from_unix_s");
	for (k = 0; k < n; k++)
		for (r = 0; r < s->rounds; r++) {
			const struct rm_phase *p = &s->alone[r][k];
			uint64_t ga[RM_SEP_CES], ua;
			int64_t va;

			rm_sep_tag(tag, sizeof(tag), ces[k], r);
			snprintf(csv, sizeof(csv), "truth-%s.csv", tag);
			if ((rv = rm_phase_truth(dir, csv, ces, n, ta)) != RM_OK)
				return rv;
			if (ta[k].requests != want[k])
				return RM_EPROTO;
			if ((rv = rm_usage_cpu(db, "be", p->since - 1000000000LL, p->until + 1500000000LL, ces, n, ga,
					       &ua, &va)) != RM_OK)
				return rv;
			per[k][r] = ((double)p->server_ns - idle_rate * rm_phase_s(p)) / (double)ta[k].requests;
			fprintf(stderr, "%-4s %-7s %6zu %9" PRIu64 " %10.4f %10.1f %10.4f %9.1f %8.4f %14.3f\n", ces[k],
				names[k], r, ta[k].requests, (double)p->server_ns / 1e9, per[k][r] / 1e3,
				(double)ga[k] / 1e9, 100.0 * (double)ga[k] / (double)p->server_ns, (double)va / 1e9,
				(double)p->since / 1e9);
		}
	fprintf(stderr, "the truth's noise: each tenant's CPU per request alone over the rounds\n");
	for (k = 0; k < n; k++) {
		double lo = per[k][0], hi = per[k][0];

		for (r = 0; r < s->rounds; r++) {
			v[r] = per[k][r];
			lo = v[r] < lo ? v[r] : lo;
			hi = v[r] > hi ? v[r] : hi;
		}
		cost[k] = rm_phase_median(v, s->rounds);
		fprintf(stderr, "%-4s median %.1f us, min %.1f, max %.1f, spread (max-min)/median %.1f%%\n", ces[k],
			cost[k] / 1e3, lo / 1e3, hi / 1e3, cost[k] > 0 ? 100.0 * (hi - lo) / cost[k] : 0.0);
		vgroup[1u << k] = cost[k] * (double)want[k];
	}
	/* the groups of 2..n-1 tenants: each member answered all its requests, the CPU's median over the rounds */
	for (m = 1; s->subsets && m < (1u << n) - 1; m++) {
		if (rm_sep_members(m) < 2)
			continue;
		for (r = 0; r < s->rounds; r++) {
			const struct rm_phase *p = &s->sub[r][m];

			rm_sep_tag_group(tag, sizeof(tag), ces, n, m, r);
			snprintf(csv, sizeof(csv), "truth-%s.csv", tag);
			if ((rv = rm_phase_truth(dir, csv, ces, n, ta)) != RM_OK)
				return rv;
			for (k = 0; k < n; k++)
				if (ta[k].requests != (m & (1u << k) ? want[k] : 0))
					return RM_EPROTO;
			v[r] = (double)p->server_ns - idle_rate * rm_phase_s(p);
		}
		vgroup[m] = rm_phase_median(v, s->rounds);
	}
	for (r = 0; r < s->rounds; r++) {
		const struct rm_phase *p = &s->shared[r];
		uint64_t got[RM_SEP_CES], req[RM_SEP_CES], u, charged = 0;
		int64_t vv, margin = r ? 1000000000LL : 2000000000LL;
		double rt;
		char title[96]; /* "round N, " and a tag of up to 47 bytes */

		rm_sep_tag(tag, sizeof(tag), NULL, r);
		snprintf(csv, sizeof(csv), "truth-%s.csv", tag);
		if ((rv = rm_phase_truth(dir, csv, ces, n, ta)) != RM_OK)
			return rv;
		if ((rv = rm_usage_cpu(db, "be", p->since - margin, p->until + (r ? 1500000000LL : margin), ces, n, got,
				       &u, &vv)) != RM_OK)
			return rv;
		for (k = 0; k < n; k++) {
			req[k] = ta[k].requests;
			charged += got[k];
			if (req[k] != want[k])
				return RM_EPROTO;
		}
		snprintf(title, sizeof(title), "round %zu, %s", r, tag);
		target[r] = (double)p->server_ns - idle_rate * rm_phase_s(p);
		memcpy(gots[r], got, n * sizeof(got[0]));
		add[r] = rm_phase_sep_table(title, n, ces, names, cost, req, target[r], got, charged, truth, err[r],
					    pp[r]);
		rt = (double)rm_phase_v_reason(db, p->since - margin, p->until + (r ? 1500000000LL : margin), "runtime");
		if (rt > 0.05 * (double)charged)
			rm_phase_sep_decompose(n, ces, got, req, rt, truth);
	}
	fprintf(stderr, "over the rounds, each tenant's error against the truth from separate runs (%%):");
	for (k = 0; k < n; k++) {
		for (r = 0; r < s->rounds; r++)
			v[r] = err[r][k];
		fprintf(stderr, " %s median %.2f", ces[k], rm_phase_median(v, s->rounds));
	}
	fprintf(stderr, "\n");
	if (s->subsets)
		rm_phase_sep_shapley(s, ces, vgroup, target, gots);
	return RM_OK;
}

/*
 * Stops Rametr after the last phase: 2.5 s for the last windows to close,
 * then the collector col and the aggregator agg; why (if still empty) says
 * which failed and how (its exit status, or that it did not stop within
 * 30 s); the failed one's log's last lines (in dir) go to stderr
 * (rm_hosts_stop_logged).
 */
static inline void rm_phase_stop_rametr(const char *dir, pid_t agg, pid_t col, char *why, size_t whylen)
{
	int rc;

	usleep(2500000);
	if ((rc = rm_hosts_stop_logged(col, 30000, dir, "collector-be.log")) != 0)
		snprintf(why, whylen, "the collector failed (collector-be.log, status %d)", rc);
	if ((rc = rm_hosts_stop_logged(agg, 30000, dir, "aggregator.log")) != 0 && !why[0])
		snprintf(why, whylen, "the aggregator failed (aggregator.log, status %d)", rc);
}

#endif
