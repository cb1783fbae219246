/*
 * rm_phase.h - one run ("phase") of a testbed server under some tenants'
 * loads, for the tests that compare a server the tenants share with its own
 * truth (integ_go, integ_grpc): Rametr watching the namespace host rm-be,
 * the server on rm-be, the tenants' load tools on their own hosts, the
 * server's CPU from /proc over the load, every process stopped; and the
 * server's truth CSV read back in the tests' CE order.
 *
 * The includer includes rm_err.h, tb_testutil.h, tb_truth.h and rm_hosts.h
 * first.
 */
#ifndef RM_PHASE_H
#define RM_PHASE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rm_phase {
	int load_ok;                    /* every load succeeded, the server stopped cleanly */
	uint64_t server_ns;             /* the server's CPU during the load (/proc schedstat) */
	int64_t since, until;           /* the load, wall clock ns */
	unsigned long long busy, steal; /* machine jiffies during the load */
};

/* The phase's length in seconds. */
static inline double rm_phase_s(const struct rm_phase *p)
{
	return (double)(p->until - p->since) / 1e9;
}

/*
 * Starts rametr-aggregator agg_bin (testbed/<ini>, database db) and
 * rametr-collector col_bin for rm-be (node "be", --netns rm-be, 1 s
 * windows, its spool and log in dir) with the space-separated options
 * col_args (at most 8) added. *agg and *col are what was spawned (-1: not),
 * to be stopped by the caller. On failure why holds the reason ("did not
 * attach" when the collector could not).
 */
static inline void rm_phase_start_rametr(const char *agg_bin, const char *col_bin, const char *dir, const char *ini,
					 const char *db, const char *col_args, pid_t *agg, pid_t *col, char *why,
					 size_t whylen)
{
	char url[400], spool[400], args[256], *tok, *save = NULL;
	char *argv[20] = { (char *)col_bin, "--aggregator", url, "--node", "be", "--netns", "rm-be",
			   "--window", "1s", "--spool", spool };
	size_t n = 11;

	*agg = *col = -1;
	snprintf(spool, sizeof(spool), "%s/spool-be", dir);
	if (rm_hosts_start_aggregator(agg_bin, dir, ini, db, url, sizeof(url), agg, why, whylen) != 0)
		return;
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
 * <dir>/load-<host>-<tag>.txt), all awaited; with mask 0 the server idles
 * idle_s seconds. The server's CPU is read from /proc from before the loads
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
		failed += tbt_wait(pids[i], 120000) != 0;
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
 * The phases after a shared run, for a truth from separate runs: the server
 * idle (slot 0, tag "idle", no load), then each of the n tenants alone
 * (slot k + 1, tag "<ces[k]>-alone", mask 1 << k), each after 2.5 s for the
 * previous phase's windows to close, until one fails. run(slot, mask, tag)
 * runs one phase and returns whether every load succeeded. Returns 1 if all
 * did.
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

/*
 * Stops Rametr after the last phase: 2.5 s for the last windows to close,
 * then the collector col and the aggregator agg; why (if still empty) says
 * which failed.
 */
static inline void rm_phase_stop_rametr(pid_t agg, pid_t col, char *why, size_t whylen)
{
	usleep(2500000);
	if (rm_hosts_stop(col, 30000) != 0)
		snprintf(why, whylen, "the collector failed (collector-be.log)");
	if (rm_hosts_stop(agg, 30000) != 0 && !why[0])
		snprintf(why, whylen, "the aggregator failed (aggregator.log)");
}

#endif
