/*
 * agg_main.c - the rametr-aggregator program: reads the configuration,
 * opens storage, and serves collectors until SIGINT/SIGTERM. Wires
 * transport (agg_server) -> stitcher (with the pairing engine) ->
 * accountant -> storage, and the server's tick to the stitcher's expiry of
 * held parts past the horizon and to the estimators ([estimate] sections),
 * which get a final pass over every window at a stop.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agg_account.h"
#include "agg_config.h"
#include "agg_est_run.h"
#include "agg_metrics.h"
#include "agg_server.h"
#include "agg_stitch_run.h"
#include "agg_throttle.h"
#include "rm_clock.h"
#include "rm_err.h"
#include "st.h"
#include "st_rollup.h"
#include "banned.h"

/* A stop charges pending parts for at most this long: a signal stops the
   aggregator within a second, whatever it is doing. */
#define AGG_STOP_BUDGET_NS 100000000LL

static volatile sig_atomic_t agg_stop;

static void agg_on_signal(int sig)
{
	(void)sig;
	agg_stop = 1;
}

struct agg_main {
	struct agg_stitch_run *stitch;
	struct agg_est_run *est;       /* NULL: no [estimate] section */
	struct agg_throttle *thr;
	struct agg_metrics *metrics;   /* NULL: no [metrics] listen */
	st_db *db;
	const struct agg_config *cfg;
};

static int64_t agg_now_unix(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void agg_on_commit(void *arg, const struct agg_account_row *row)
{
	agg_metrics_usage(arg, row->node, row->start, row->len, row->ce, row->v, (int64_t)rm_clock_mono_ns());
	if (row->dropped_parts)
		agg_metrics_dropped(arg, row->node, row->dropped_parts);
}

static int agg_on_hello(void *arg, const Rametr__Hello *h, char *err, size_t errlen)
{
	struct agg_main *m = arg;

	return agg_stitch_run_hello(m->stitch, h, err, errlen);
}

static int agg_on_batch(void *arg, const Rametr__Batch *b, int *duplicate, char *err, size_t errlen)
{
	struct agg_main *m = arg;
	int rv = agg_stitch_run_batch(m->stitch, b, duplicate, err, errlen);

	/* the acks of throttle commands hold also for a batch sent twice; a
	 * failure to record them is logged and does not refuse the batch */
	if (rv == RM_OK && b->n_acked_commands)
		agg_throttle_acked(m->thr, b->node, b->acked_commands, b->n_acked_commands, agg_now_unix());
	if (m->metrics)
		agg_metrics_batch(m->metrics, b->node, rv == RM_OK ? (*duplicate ? AGG_METRICS_DUPLICATE : AGG_METRICS_OK)
					  : rv == RM_EPROTO || rv == RM_EINVAL ? AGG_METRICS_REFUSED : AGG_METRICS_RETRY,
				  (int64_t)rm_clock_mono_ns());
	return rv;
}

static int agg_commands_for(void *arg, const char *node, Rametr__ThrottleCommand ***cmds, size_t *n)
{
	struct agg_main *m = arg;

	return agg_throttle_commands_for(m->thr, node, agg_now_unix(), cmds, n);
}

/* The settled horizon is the end of the latest stored window less the
 * pairing horizon; the windows before it are rolled up (st_rollup.h). */
static void agg_rollup_tick(struct agg_main *m)
{
	struct st_retention r;
	int64_t end, h = (int64_t)m->cfg->horizon_ns;
	size_t i;

	st_retention_default(&r);
	for (i = 0; i < ST_SERIES_COUNT; i++)
		if (m->cfg->retention_ns[i] >= 0)
			r.keep_ns[i] = m->cfg->retention_ns[i];
	if (st_latest_end(m->db, &end) != RM_OK || end < INT64_MIN + h)
		return;
	if (st_horizon_set(m->db, end - h) == RM_OK)
		st_rollup(m->db, &r, NULL);
}

static void agg_on_tick(void *arg)
{
	struct agg_main *m = arg;

	/* a failure is logged by storage; the next tick tries again */
	agg_stitch_run_tick(m->stitch);
	if (m->est)
		agg_est_run_tick(m->est, 0);
	agg_throttle_tick(m->thr, agg_now_unix());
	if (m->metrics) {
		struct agg_pair_stats ps;
		struct agg_metrics_health h;

		agg_stitch_run_get_stats(m->stitch, &ps);
		h = (struct agg_metrics_health){ ps.added, ps.held, ps.pending, ps.evicted };
		agg_metrics_set_health(m->metrics, &h);
		agg_metrics_settle(m->metrics, (int64_t)rm_clock_mono_ns(), 0);
	}
	agg_rollup_tick(m);
}

/* Security and bound flags; each overrides the configuration's field. */
struct agg_sec_opts {
	const char *tls_cert, *tls_ca, *secret_file;
	uint64_t window_tolerance_s, idle_timeout_s, mem_bound;
	unsigned max_conns;
	int set_tolerance, set_idle, set_bound, set_conns;
};

/* Parses the number of flag c. Returns RM_OK or RM_EINVAL (logged). */
static int agg_sec_number(struct agg_sec_opts *o, int c, const char *arg)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' ||
	    (c == 'N' && (v == 0 || v > 100000)) || (c == 'I' && (v == 0 || v > 86400)) ||
	    (c == 'W' && v > 100ull * 365 * 86400) || (c == 'B' && v == 0)) {
		rm_log_error("invalid value '%s' for --%s", arg,
			     c == 'N' ? "max-conns" : c == 'I' ? "idle-timeout" :
			     c == 'W' ? "window-tolerance" : "mem-bound");
		return RM_EINVAL;
	}
	switch (c) {
	case 'W': o->window_tolerance_s = v; o->set_tolerance = 1; break;
	case 'N': o->max_conns = (unsigned)v; o->set_conns = 1; break;
	case 'I': o->idle_timeout_s = v; o->set_idle = 1; break;
	default: o->mem_bound = v; o->set_bound = 1; break;
	}
	return RM_OK;
}

/*
 * The cluster secret: the file's first line (surrounding space removed), at
 * least 16 bytes. Returns a malloc'd string, or NULL (logged).
 */
static char *agg_read_secret(const char *path)
{
	char line[1024];
	size_t n;
	FILE *f;
	char *p;

	if (!(f = fopen(path, "r"))) {
		rm_log_error("failed to open '%s': %s", path, strerror(errno));
		return NULL;
	}
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	for (p = line; *p == ' ' || *p == '\t'; p++)
		;
	n = strlen(p);
	while (n && (p[n - 1] == '\n' || p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
		p[--n] = '\0';
	if (n < 16) {
		rm_log_error("cluster secret '%s' is shorter than 16 bytes", path);
		return NULL;
	}
	return strdup(p);
}

static void agg_usage(FILE *f)
{
	fprintf(f,
		"usage: rametr-aggregator --config FILE [--db PATH] [--listen URL]... [--keep-pending]\n"
		"                         [--metrics-listen HOST:PORT] [-v]\n"
		"\n"
		"Receives segment batches from collectors, attributes them to chargeable\n"
		"entities by the rules in FILE and by pairing sends with receives of the same\n"
		"TCP bytes across nodes, and stores U_c, V and U per window in SQLite.\n"
		"  --config FILE   INI configuration ([aggregator] listen/db/horizon/max_held,\n"
		"                  [ce NAME] rules, [estimate SERVER] LR/Kalman estimators,\n"
		"                  [throttle] caps and overload rule, [metrics] listen)\n"
		"  --db PATH       SQLite file (overrides the config's db)\n"
		"  --listen URL    tcp://HOST:PORT or ipc:///PATH (repeatable; overrides the config)\n"
		"  --keep-pending  on SIGINT/SIGTERM keep the parts still waiting for the bytes'\n"
		"                  sender for the next start (default: charge them as at the\n"
		"                  horizon, so every window balances once stopped)\n"
		"  --tls-cert FILE PEM file with this aggregator's certificate and key\n"
		"                  (tls+tcp:// listeners; made by scripts/cert.sh)\n"
		"  --tls-ca FILE   PEM file of the cluster CA: collectors must present a\n"
		"                  certificate it signed\n"
		"  --cluster-secret FILE\n"
		"                  every collector must prove its node name with the token\n"
		"                  derived from this secret (scripts/cert.sh issue)\n"
		"  --window-tolerance SECONDS\n"
		"                  refuse batches with windows further than this from this\n"
		"                  host's clock (default 0: not checked)\n"
		"  --max-conns N   connections at most (default 64)\n"
		"  --idle-timeout SECONDS\n"
		"                  close a connection that completes no message this long\n"
		"                  (default 60)\n"
		"  --mem-bound BYTES\n"
		"                  memory for the messages of all connections (default 256 MiB;\n"
		"                  the largest message is BYTES / (2 * max-conns))\n"
		"  --metrics-listen HOST:PORT  serve Prometheus metrics on http://HOST:PORT/metrics\n"
		"                  (overrides the config's [metrics] listen; default: not served)\n"
		"  -v, --verbose   debug messages\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "db", required_argument, NULL, 'd' },
		{ "listen", required_argument, NULL, 'l' },
		{ "keep-pending", no_argument, NULL, 'k' },
		{ "tls-cert", required_argument, NULL, 'C' },
		{ "tls-ca", required_argument, NULL, 'A' },
		{ "cluster-secret", required_argument, NULL, 'S' },
		{ "window-tolerance", required_argument, NULL, 'W' },
		{ "max-conns", required_argument, NULL, 'N' },
		{ "idle-timeout", required_argument, NULL, 'I' },
		{ "mem-bound", required_argument, NULL, 'B' },
		{ "metrics-listen", required_argument, NULL, 'M' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *db_path = NULL, *listen[16], *metrics_listen = NULL;
	struct agg_config *cfg = NULL;
	struct agg_account *acct = NULL;
	struct agg_stitch_run *stitch = NULL;
	struct agg_est_run *est = NULL;
	struct agg_server *srv = NULL;
	struct agg_throttle *thr = NULL;
	struct agg_metrics *metrics = NULL;
	struct agg_metrics_http *mhttp = NULL;
	static struct agg_decided decided; /* borrowed by the server for its life */
	struct agg_main m = { 0 };
	struct agg_account_stats st;
	struct agg_pair_stats ps;
	struct sigaction sa;
	st_db *db = NULL;
	struct agg_store store;
	size_t nlisten = 0, i;
	int c, rv, keep_pending = 0;
	struct agg_sec_opts sec = { 0 };
	char *secret = NULL;

	rm_log_init("rametr-aggregator");
	while ((c = getopt_long(argc, argv, "c:d:l:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config = optarg; break;
		case 'd': db_path = optarg; break;
		case 'l':
			if (nlisten == sizeof(listen) / sizeof(listen[0])) {
				rm_log_error("too many --listen addresses");
				return 2;
			}
			listen[nlisten++] = optarg;
			break;
		case 'k': keep_pending = 1; break;
		case 'C': sec.tls_cert = optarg; break;
		case 'A': sec.tls_ca = optarg; break;
		case 'S': sec.secret_file = optarg; break;
		case 'W':
		case 'N':
		case 'I':
		case 'B':
			if (agg_sec_number(&sec, c, optarg) != RM_OK)
				return 2;
			break;
		case 'M': metrics_listen = optarg; break;
		case 'v': rm_log_set_verbose(1); break;
		case 'h': agg_usage(stdout); return 0;
		default: agg_usage(stderr); return 2;
		}
	}
	if (!config || optind != argc) {
		agg_usage(stderr);
		return 2;
	}
	if ((rv = agg_config_load(config, &cfg)) != 0) {
		rm_log_error("failed to load configuration '%s': %s", config, rm_strerror(rv));
		return rv == RM_ECONFIG ? 2 : 1;
	}
	if (!db_path)
		db_path = cfg->db ? cfg->db : "/var/lib/rametr/rametr.db";
	if (nlisten == 0)
		for (i = 0; i < cfg->nlisten && nlisten < sizeof(listen) / sizeof(listen[0]); i++)
			listen[nlisten++] = cfg->listen[i];
	if (nlisten == 0)
		listen[nlisten++] = "tcp://127.0.0.1:7600";
	if (!metrics_listen)
		metrics_listen = cfg->metrics_listen;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = agg_on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	rv = st_open(&db, db_path, 0);
	if (rv == RM_OK) {
		agg_store_st(&store, db);
		rv = agg_account_open(&acct, &store);
	}
	/* usage settles into the metrics once quiet for the horizon (held parts are charged by then) */
	if (rv == RM_OK && metrics_listen &&
	    (rv = agg_metrics_open(&metrics, (int64_t)cfg->horizon_ns + 2000000000ll, agg_now_unix())) == RM_OK &&
	    (rv = agg_metrics_http_open(&mhttp, metrics_listen, metrics)) == RM_OK)
		agg_account_observe(acct, agg_on_commit, metrics);
	if (rv == RM_OK) {
		struct agg_stitch_run_opts so = { .stop = &agg_stop };

		rv = agg_stitch_run_open(&stitch, cfg, acct, &so);
	}
	if (rv == RM_OK && cfg->nest)
		rv = agg_est_run_open(&est, cfg, db);
	if (rv == RM_OK && (rv = agg_throttle_open(&thr, cfg, db, NULL)) != RM_OK)
		rm_log_error("failed to set up throttling: %s", rm_strerror(rv));
	if (rv == RM_OK) {
		struct agg_handler h = {
			.arg = &m,
			.on_hello = agg_on_hello,
			.on_batch = agg_on_batch,
			.commands_for = agg_commands_for,
			.on_tick = agg_on_tick,
		};

		agg_throttle_decided(cfg, &decided);
		h.decided = decided.n ? decided.pm : NULL;
		h.ndecided = decided.n;
		if (cfg->nrules && !decided.n)
			rm_log_info("collectors send every part as is (%s)",
				    cfg->nest ? "estimators configured" : "rules of too many clients");

		m.stitch = stitch;
		m.est = est;
		m.thr = thr;
		m.metrics = metrics;
		m.db = db;
		m.cfg = cfg;

		struct agg_server_cfg scfg = {
			.tick_ms = 1000,
			.bind_nodes = 1,
			.tls_cert_key = sec.tls_cert ? sec.tls_cert : cfg->tls_cert,
			.tls_ca = sec.tls_ca ? sec.tls_ca : cfg->tls_ca,
			.window_tolerance_ns = (int64_t)(sec.set_tolerance ? sec.window_tolerance_s
									 : cfg->window_tolerance_s) * 1000000000ll,
			.max_conns = sec.set_conns ? sec.max_conns : cfg->max_conns,
			.idle_ms = (int)((sec.set_idle ? sec.idle_timeout_s : cfg->idle_timeout_s) * 1000),
			.mem_bound = (size_t)(sec.set_bound ? sec.mem_bound : cfg->mem_bound),
		};
		const char *secret_file = sec.secret_file ? sec.secret_file : cfg->secret_file;

		if (secret_file && !(secret = agg_read_secret(secret_file))) {
			rv = RM_EINVAL;
		} else {
			scfg.secret = (const uint8_t *)secret;
			scfg.secret_len = secret ? strlen(secret) : 0;
			rv = agg_server_open_cfg(&srv, listen, nlisten, &h, &scfg);
		}
	}
	if (rv == RM_OK) {
		for (i = 0; i < nlisten; i++)
			rm_log_info("listening on %s, storing to '%s', %zu CE rules", listen[i], db_path, cfg->nrules);
		rv = agg_server_run(srv, &agg_stop);
	}
	/* a crash keeps pending parts (they are stored with every batch); a
	 * stop decides them unless they are to wait for the next start */
	if (stitch && !keep_pending) {
		int grv = agg_stitch_run_give_up(stitch, AGG_STOP_BUDGET_NS);

		if (grv == RM_ETIMEDOUT || grv == RM_ESTATE)
			rm_log_warn("stopping without charging every part still pending; the rest stay held for the "
				    "next start");
		else if (grv != RM_OK)
			rm_log_warn("failed to charge the parts still pending; they stay held for the next start");
	}
	if (est) {
		uint64_t solved, unsolved;

		if (agg_est_run_tick(est, 1) != RM_OK)
			rm_log_warn("failed to estimate the last windows; the next start does");
		agg_est_run_counts(est, &solved, &unsolved);
		rm_log_info("estimators: %llu windows estimated, %llu without an estimate (singular)",
			    (unsigned long long)solved, (unsigned long long)unsolved);
	}
	if (acct) {
		agg_account_get_stats(acct, &st);
		rm_log_info("applied %llu batches (%llu duplicates ignored, %llu gaps), %llu parts",
			    (unsigned long long)st.batches, (unsigned long long)st.duplicates,
			    (unsigned long long)st.gaps, (unsigned long long)st.charges);
	}
	if (stitch) {
		agg_stitch_run_get_stats(stitch, &ps);
		rm_log_info("pairing: %llu parts by rule, %llu by bytes (%llu split), %llu at the horizon, "
			    "%llu evicted, %llu without CE; %llu sends to sockets the rules decide not indexed; "
			    "%llu with bytes past the sends followed per part, %llu sends unchecked, %llu wake-ups "
			    "capped; %llu held (%llu pending) kept for the next start",
			    (unsigned long long)ps.by_rule, (unsigned long long)ps.by_bytes,
			    (unsigned long long)ps.split, (unsigned long long)ps.by_horizon,
			    (unsigned long long)ps.evicted, (unsigned long long)ps.by_none,
			    (unsigned long long)ps.ruled_sends, (unsigned long long)ps.too_many_sends,
			    (unsigned long long)ps.unchecked_sends, (unsigned long long)ps.capped_wakes,
			    (unsigned long long)ps.held, (unsigned long long)ps.pending);
	}
	if (thr) {
		struct agg_throttle_stats ts;

		agg_throttle_get_stats(thr, &ts);
		if (ts.windows || ts.accepted || ts.refused)
			rm_log_info("throttling: %llu windows, %llu decisions, %llu operator commands "
				    "accepted, %llu refused, %llu sent, %llu applied, %llu renewed, %llu expired",
				    (unsigned long long)ts.windows, (unsigned long long)ts.decisions,
				    (unsigned long long)ts.accepted, (unsigned long long)ts.refused,
				    (unsigned long long)ts.sent, (unsigned long long)ts.applied,
				    (unsigned long long)ts.renewed, (unsigned long long)ts.expired);
	}
	if (srv) {
		struct agg_server_stats ss;

		agg_server_stats(srv, &ss);
		rm_log_info("transport: %llu connections (%llu refused at the limit, %llu without a "
			    "verified certificate, %llu closed idle), "
			    "refused %llu malformed, %llu identity, %llu node conflicts, %llu windows out of "
			    "tolerance, %llu by the stitcher; %llu duplicates",
			    (unsigned long long)ss.conns_accepted, (unsigned long long)ss.conns_refused,
			    (unsigned long long)ss.conns_unverified, (unsigned long long)ss.conns_idle_closed,
			    (unsigned long long)ss.refused_malformed,
			    (unsigned long long)ss.refused_identity, (unsigned long long)ss.refused_conflict,
			    (unsigned long long)ss.refused_window, (unsigned long long)ss.refused_handler,
			    (unsigned long long)ss.duplicates);
		struct agg_server_health sh;

		agg_server_get_health(srv, &sh);
		rm_log_info("server: %llu requests answered; %llu times requests waited unread for %d ms or more "
			    "(%llu ms in all, longest turn %llu ms)",
			    (unsigned long long)sh.requests, (unsigned long long)sh.stalls, AGG_SERVER_STALL_MS,
			    (unsigned long long)sh.stall_ms, (unsigned long long)sh.max_busy_ms);
	}
	agg_server_close(srv);
	free(secret);
	agg_metrics_http_close(mhttp);
	agg_est_run_close(est);
	agg_throttle_close(thr);
	agg_stitch_run_close(stitch);
	agg_account_close(acct);
	agg_metrics_close(metrics);
	st_close(db);
	agg_config_free(cfg);
	if (rv == RM_ESTATE && agg_stop) {
		rm_log_info("stopped while putting back the held parts; they stay held for the next start");
		rv = RM_OK;
	}
	if (rv != RM_OK) {
		rm_log_error("stopped: %s", rm_strerror(rv));
		return 1;
	}
	return 0;
}
