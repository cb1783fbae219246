/*
 * agg_main.c - the rametr-aggregator program: reads the configuration,
 * opens storage, and serves collectors until SIGINT/SIGTERM. Wires
 * transport (agg_server) -> stitcher (with the pairing engine) ->
 * accountant -> storage, and the server's tick to the stitcher's expiry of
 * held parts past the horizon and to the estimators ([estimate] sections),
 * which get a final pass over every window at a stop.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "agg_account.h"
#include "agg_config.h"
#include "agg_est_run.h"
#include "agg_metrics.h"
#include "agg_server.h"
#include "agg_stitch_run.h"
#include "agg_throttle.h"
#include "rm_conf.h"
#include "rm_clock.h"
#include "rm_err.h"
#include "rm_version.h"
#include "st.h"
#include "st_rollup.h"
#include "banned.h"

/* A stop charges pending parts for at most this long: a signal stops the
   aggregator within a second, whatever it is doing. */
#define AGG_STOP_BUDGET_NS 100000000LL
#define AGG_DEFAULT_CONFIG "/etc/rametr/aggregator.conf"

static volatile sig_atomic_t agg_stop;

static void agg_on_signal(int sig)
{
	(void)sig;
	agg_stop = 1;
}

static volatile sig_atomic_t agg_reload;

static void agg_on_hup(int sig)
{
	(void)sig;
	agg_reload = 1;
}

struct agg_opts;
struct rm_setvals;

struct agg_main {
	struct agg_stitch_run *stitch;
	struct agg_est_run *est;       /* NULL: no [estimate] section */
	struct agg_throttle *thr;
	/* for a reload (SIGHUP), on the server's thread between requests: */
	struct agg_config *cfg;        /* running; its contents are replaced */
	struct agg_server *srv;
	struct agg_decided *decided;   /* borrowed by srv */
	st_db *db;
	struct agg_opts *o;
	const struct rm_setvals *cmd;  /* the command line, which overrides the files */
	struct agg_throttle_stats thr_before; /* of the throttles replaced at reloads */
	char last_node[64];            /* the last hello logged */
	uint64_t last_instance;
	struct agg_metrics *metrics;   /* NULL: no [metrics] listen */
};

static void agg_reload_config(struct agg_main *m);

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
	int rv = agg_stitch_run_hello(m->stitch, h, err, errlen);

	/* a collector says hello on every new connection (twice at its start:
	 * once per connection attempt that succeeds); a run is logged once */
	if (rv == RM_OK && (h->instance != m->last_instance || strcmp(h->node, m->last_node) != 0)) {
		rm_log_info("node '%s' connected (host '%s', backend %s, run %016llx, window %llu ms, %u CPUs)",
			    h->node, h->hostname, h->backend, (unsigned long long)h->instance,
			    (unsigned long long)(h->window_ns / 1000000), h->ncpu);
		m->last_instance = h->instance;
		snprintf(m->last_node, sizeof(m->last_node), "%s", h->node);
	} else if (rv == RM_OK) {
		rm_log_debug("node '%s' connected again (run %016llx)", h->node, (unsigned long long)h->instance);
	}
	return rv;
}

static int agg_on_batch(void *arg, const struct rm_wbatch *b, int *duplicate, char *err, size_t errlen)
{
	struct agg_main *m = arg;
	int rv = agg_stitch_run_batch(m->stitch, b, duplicate, err, errlen);

	/* the acks of throttle commands hold also for a batch sent twice; a
	 * failure to record them is logged and does not refuse the batch */
	if (rv == RM_OK && b->n_acked_commands && m->thr)
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

	if (!m->thr) {
		*n = 0;
		return RM_OK;
	}
	return agg_throttle_commands_for(m->thr, node, agg_now_unix(), cmds, n);
}

/* The settled horizon is the end of the latest stored window less the
 * pairing horizon; retention counts back from it (st_rollup.h). */
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

	/* under systemd (NOTIFY_SOCKET): alive while the server loop turns */
	sd_notify(0, "WATCHDOG=1");
	if (agg_reload) {
		agg_reload = 0;
		sd_notify(0, "RELOADING=1\nSTATUS=reading the configuration again");
		agg_reload_config(m);
		sd_notifyf(0, "READY=1\nSTATUS=serving, %zu CE rules", m->cfg->nrules);
	}
	/* a failure is logged by storage; the next tick tries again */
	agg_stitch_run_tick(m->stitch);
	if (m->est)
		agg_est_run_tick(m->est, 0);
	if (m->thr)
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
		"usage: rametr-aggregator [--config FILE] [--db PATH] [--listen URL]... [options]\n"
		"\n"
		"Receives segment batches from collectors, attributes them to chargeable\n"
		"entities by the rules in FILE and by pairing sends with receives of the same\n"
		"TCP bytes across nodes, and stores U_c, V and U per window in SQLite.\n"
		"  --config FILE   INI configuration (default " AGG_DEFAULT_CONFIG "), then its\n"
		"                  drop-ins FILE.d/*.conf: [aggregator] listen/db/horizon/max_held\n"
		"                  and every option below, [ce NAME] rules, [estimate SERVER]\n"
		"                  LR/Kalman estimators, [throttle] caps and overload rule,\n"
		"                  [metrics] listen;\n"
		"                  options given here override the files\n"
		"  --db PATH       SQLite file (default /var/lib/rametr/rametr.db)\n"
		"  --listen URL    tcp://HOST:PORT, tls+tcp://HOST:PORT or ipc:///PATH\n"
		"                  (repeatable; default tcp://127.0.0.1:7600)\n"
		"  --keep-pending  on SIGINT/SIGTERM keep the parts still waiting for the bytes'\n"
		"                  sender for the next start (default: charge them as at the\n"
		"                  horizon, so every window balances once stopped)\n"
		"  --no-charge-runtime\n"
		"                  leave a managed runtime's CPU outside requests (a Go program's\n"
		"                  scheduler, sysmon, GC; a JVM's JIT, GC, dispatcher) in V\n"
		"                  'runtime' instead of charging it to the tenants its server\n"
		"                  served in the window (by their requests and their CPU;\n"
		"                  docs/go.md); charge_runtime = no\n"
		"  --runtime-by-requests PCT\n"
		"                  the runtime rule's weight by requests for a JVM or another\n"
		"                  runtime, 0-100 percent (default 70; the rest by CPU; 0: in\n"
		"                  proportion to the CPU charged); runtime_by_requests = PCT\n"
		"  --go-runtime-by-requests PCT\n"
		"                  the same for Go programs (default 30);\n"
		"                  go_runtime_by_requests = PCT\n"
		"  --go-labelled-runtime-by-requests PCT\n"
		"                  the same for what a Go program's goroutine labels left\n"
		"                  unlabelled in a window they split (default 100);\n"
		"                  go_labelled_runtime_by_requests = PCT\n"
		"  --no-go-labels  do not split a Go program's CPU by the samples of its\n"
		"                  goroutines' labels (the socket each serves) when its\n"
		"                  collector sends them: its threads' segments and the runtime\n"
		"                  rule decide, as without them (docs/go.md); go_labels = no\n"
		"  --go-label-segments\n"
		"                  take each connection's segments' exact CPU, corrected by\n"
		"                  the samples where the running goroutine's label and its\n"
		"                  thread's segment differ, instead of the labels' samples\n"
		"                  alone (when the collector counts both). Off by default:\n"
		"                  measured, it charged a light tenant less and a heavy one\n"
		"                  more than labels alone (docs/go.md); go_label_segments = yes\n"
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
		"  --max-conns N   connections at most (default 64; one the aggregator closed\n"
		"                  frees its place at once)\n"
		"  --idle-timeout SECONDS\n"
		"                  close a connection that completes no message this long\n"
		"                  (default 60)\n"
		"  --mem-bound BYTES\n"
		"                  memory for the messages of all connections (default 256 MiB;\n"
		"                  the largest message is BYTES / (2 * max-conns))\n"
		"  --metrics-listen HOST:PORT  serve Prometheus metrics on http://HOST:PORT/metrics\n"
		"                  (overrides the config's [metrics] listen; default: not served)\n"
		"  --log-level L   error, warning, info (default) or debug\n"
		"  -v, --verbose   debug messages (--log-level debug)\n"
		"  --check-config  read the configuration, report problems, and exit\n"
		"  --version       print the version and exit\n"
		"SIGHUP reads the configuration again: CE rules, estimators, throttling and\n"
		"the log level change without a restart (listen and db need one).\n");
}

/* The program's settings: options, and keys of [aggregator] (rm_conf.h). */
enum agg_setting_id {
	AGG_S_CONFIG, AGG_S_DB, AGG_S_LISTEN, AGG_S_KEEP_PENDING, AGG_S_METRICS_LISTEN, AGG_S_LOG_LEVEL,
	AGG_S_VERBOSE, AGG_S_CHECK, AGG_S_HELP, AGG_S_VERSION, AGG_S_TLS_CERT, AGG_S_TLS_CA, AGG_S_SECRET,
	AGG_S_WINDOW_TOLERANCE, AGG_S_MAX_CONNS, AGG_S_IDLE_TIMEOUT, AGG_S_MEM_BOUND, AGG_S_CHARGE_RUNTIME,
	AGG_S_NO_CHARGE_RUNTIME, AGG_S_RUNTIME_BY_REQUESTS, AGG_S_GO_RUNTIME_BY_REQUESTS,
	AGG_S_GO_LAB_RUNTIME_BY_REQUESTS, AGG_S_GO_LABELS, AGG_S_NO_GO_LABELS, AGG_S_GO_LABEL_SEGMENTS,
	AGG_S_NO_GO_LABEL_SEGMENTS, AGG_S_COUNT
};

static const struct rm_setting agg_settings[AGG_S_COUNT] = {
	[AGG_S_CONFIG] = { "config", 1, 0, 0, 'c' },
	[AGG_S_DB] = { "db", 1, 0, 0, 'd' },          /* in files: agg_config's db */
	[AGG_S_LISTEN] = { "listen", 1, 1, 0, 'l' },  /* in files: agg_config's listen */
	[AGG_S_KEEP_PENDING] = { "keep-pending", 0, 0, 1, 'k' },
	[AGG_S_METRICS_LISTEN] = { "metrics-listen", 1, 0, 0, 0 }, /* in files: [metrics] listen */
	[AGG_S_LOG_LEVEL] = { "log-level", 1, 0, 1, 0 },
	[AGG_S_VERBOSE] = { "verbose", 0, 0, 1, 'v' },
	[AGG_S_CHECK] = { "check-config", 0, 0, 0, 0 },
	[AGG_S_HELP] = { "help", 0, 0, 0, 'h' },
	[AGG_S_VERSION] = { "version", 0, 0, 0, 0 },
	[AGG_S_TLS_CERT] = { "tls-cert", 1, 0, 1, 0 },
	[AGG_S_TLS_CA] = { "tls-ca", 1, 0, 1, 0 },
	[AGG_S_SECRET] = { "cluster-secret", 1, 0, 1, 0 },
	[AGG_S_WINDOW_TOLERANCE] = { "window-tolerance", 1, 0, 1, 0 },
	[AGG_S_MAX_CONNS] = { "max-conns", 1, 0, 1, 0 },
	[AGG_S_IDLE_TIMEOUT] = { "idle-timeout", 1, 0, 1, 0 },
	[AGG_S_MEM_BOUND] = { "mem-bound", 1, 0, 1, 0 },
	[AGG_S_CHARGE_RUNTIME] = { "charge-runtime", 0, 0, 1, 0 },
	[AGG_S_NO_CHARGE_RUNTIME] = { "no-charge-runtime", 0, 0, 1, 0 },
	[AGG_S_RUNTIME_BY_REQUESTS] = { "runtime-by-requests", 1, 0, 1, 0 },
	[AGG_S_GO_RUNTIME_BY_REQUESTS] = { "go-runtime-by-requests", 1, 0, 1, 0 },
	[AGG_S_GO_LAB_RUNTIME_BY_REQUESTS] = { "go-labelled-runtime-by-requests", 1, 0, 1, 0 },
	[AGG_S_GO_LABELS] = { "go-labels", 0, 0, 1, 0 },
	[AGG_S_NO_GO_LABELS] = { "no-go-labels", 0, 0, 1, 0 },
	[AGG_S_GO_LABEL_SEGMENTS] = { "go-label-segments", 0, 0, 1, 0 },
	[AGG_S_NO_GO_LABEL_SEGMENTS] = { "no-go-label-segments", 0, 0, 1, 0 },
};

struct agg_opts {
	const char *config, *db, *metrics_listen;
	const char *listen[16];
	size_t nlisten;
	int keep_pending, check;
	int no_charge_runtime;  /* the accountant's runtime rule off */
	int no_go_labels;       /* its Go label rule off */
	int go_label_segs;      /* its Go label rule corrects segments by the samples (else labels alone) */
	uint64_t rt_req_pct;    /* its weight by requests, percent (the rest by CPU) */
	uint64_t rt_go_req_pct; /* the same for Go programs */
	uint64_t rt_go_lab_req_pct; /* ... for what their labels left unlabelled */
	enum rm_log_level level;
	/* transport security and bounds; 0 / NULL: the server's default */
	const char *tls_cert, *tls_ca, *secret_file;
	uint64_t window_tolerance_s, idle_timeout_s, mem_bound;
	unsigned max_conns;
};

/* Parses the whole number of a bound setting into *out, within [lo, hi].
   Returns RM_OK or RM_EINVAL (logged with the setting's file:line). */
static int agg_set_number(const struct rm_setval *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	unsigned long long n;
	char *end;

	errno = 0;
	n = strtoull(v->value, &end, 10);
	if (errno || end == v->value || *end || v->value[0] == '-' || n < lo || n > hi) {
		rm_log_error("%sinvalid %s '%s' (a whole number from %llu to %llu)", v->where, v->name, v->value,
			     (unsigned long long)lo, (unsigned long long)hi);
		return RM_EINVAL;
	}
	*out = n;
	return RM_OK;
}

static int agg_set(void *arg, const struct rm_setval *v)
{
	struct agg_opts *o = arg;
	int yes = strcmp(v->value, "yes") == 0, rv;

	switch (v->id) {
	case AGG_S_CONFIG: o->config = v->value; break;
	case AGG_S_DB: o->db = v->value; break;
	case AGG_S_METRICS_LISTEN: o->metrics_listen = v->value; break;
	case AGG_S_LISTEN:
		if (o->nlisten == sizeof(o->listen) / sizeof(o->listen[0])) {
			rm_log_error("%stoo many %s addresses (at most 16)", v->where, v->name);
			return RM_EINVAL;
		}
		o->listen[o->nlisten++] = v->value;
		break;
	case AGG_S_KEEP_PENDING: o->keep_pending = yes; break;
	case AGG_S_CHARGE_RUNTIME: o->no_charge_runtime = !yes; break;
	case AGG_S_NO_CHARGE_RUNTIME: o->no_charge_runtime = yes; break;
	case AGG_S_GO_LABELS: o->no_go_labels = !yes; break;
	case AGG_S_NO_GO_LABELS: o->no_go_labels = yes; break;
	case AGG_S_GO_LABEL_SEGMENTS: o->go_label_segs = yes; break;
	case AGG_S_NO_GO_LABEL_SEGMENTS: o->go_label_segs = !yes; break;
	case AGG_S_RUNTIME_BY_REQUESTS:
		return agg_set_number(v, 0, 100, &o->rt_req_pct);
	case AGG_S_GO_RUNTIME_BY_REQUESTS:
		return agg_set_number(v, 0, 100, &o->rt_go_req_pct);
	case AGG_S_GO_LAB_RUNTIME_BY_REQUESTS:
		return agg_set_number(v, 0, 100, &o->rt_go_lab_req_pct);
	case AGG_S_VERBOSE: o->level = yes ? RM_LOG_DEBUG : RM_LOG_INFO; break;
	case AGG_S_CHECK: o->check = yes; break;
	case AGG_S_TLS_CERT: o->tls_cert = v->value; break;
	case AGG_S_TLS_CA: o->tls_ca = v->value; break;
	case AGG_S_SECRET: o->secret_file = v->value; break;
	case AGG_S_WINDOW_TOLERANCE:
		return agg_set_number(v, 0, 100ull * 365 * 86400, &o->window_tolerance_s);
	case AGG_S_IDLE_TIMEOUT:
		return agg_set_number(v, 1, 86400, &o->idle_timeout_s);
	case AGG_S_MEM_BOUND:
		return agg_set_number(v, 1, UINT64_MAX, &o->mem_bound);
	case AGG_S_MAX_CONNS: {
		uint64_t n;

		if ((rv = agg_set_number(v, 1, 100000, &n)) != RM_OK)
			return rv;
		o->max_conns = (unsigned)n;
		break;
	}
	case AGG_S_LOG_LEVEL:
		if (rm_log_parse_level(v->value, &o->level) != RM_OK) {
			rm_log_error("%sinvalid %s '%s' (error, warning, info, debug)", v->where, v->name, v->value);
			return RM_EINVAL;
		}
		break;
	}
	return RM_OK;
}

/*
 * Loads the configuration files at o->config and applies their settings,
 * then the command line's (cmd), to o. Returns RM_OK with *out, or an error
 * after logging every problem (file:line).
 */
static int agg_load(struct agg_opts *o, const struct rm_setvals *cmd, struct rm_setvals *files,
		    struct agg_config **out)
{
	struct agg_config *cfg = NULL;
	size_t i;
	int rv, errors = 0;

	if ((rv = agg_config_load(o->config, &cfg)) != RM_OK)
		return rv;
	for (i = 0; i < cfg->nsettings; i++) {
		const struct agg_config_kv *kv = &cfg->settings[i];

		rv = rm_settings_key(agg_settings, AGG_S_COUNT, kv->file, kv->line, "aggregator", kv->key, kv->value,
				     files);
		if (rv == RM_ENOMEM) {
			agg_config_free(cfg);
			return rv;
		}
		errors += rv != RM_OK;
	}
	o->level = RM_LOG_INFO;
	if (rm_settings_apply(agg_settings, files, cmd, agg_set, o) != RM_OK || errors) {
		agg_config_free(cfg);
		return RM_ECONFIG;
	}
	*out = cfg;
	return RM_OK;
}

/* The database at path and its journal files, removed after a failed first start. */
static void agg_remove_db(const char *path)
{
	static const char *const sfx[] = { "", "-wal", "-shm", "-journal" };
	char p[4200];
	size_t i;

	for (i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", path, sfx[i]);
		unlink(p);
	}
}

/* The listen addresses and database o and cfg give (flags over files). */
static void agg_effective(struct agg_opts *o, const struct agg_config *cfg, const char **db)
{
	size_t i;

	*db = o->db ? o->db : cfg->db ? cfg->db : "/var/lib/rametr/rametr.db";
	if (!o->nlisten)
		for (i = 0; i < cfg->nlisten && o->nlisten < sizeof(o->listen) / sizeof(o->listen[0]); i++)
			o->listen[o->nlisten++] = cfg->listen[i];
	if (!o->nlisten)
		o->listen[o->nlisten++] = "tcp://127.0.0.1:7600";
}

static void agg_throttle_stats_add(struct agg_throttle_stats *to, const struct agg_throttle_stats *s)
{
	to->windows += s->windows;
	to->decisions += s->decisions;
	to->renewed += s->renewed;
	to->expired += s->expired;
	to->refused += s->refused;
	to->accepted += s->accepted;
	to->sent += s->sent;
	to->applied += s->applied;
	to->bad_acks += s->bad_acks;
}

/*
 * Swaps the contents of the running configuration run and nc, except the
 * [estimate] array and [metrics] listen, which stay with run: the estimators
 * and the metrics server keep pointers into them until a restart. A second
 * call undoes the first.
 */
static void agg_config_swap(struct agg_config *run, struct agg_config *nc)
{
	struct agg_config tmp = *run;

	*run = *nc;
	*nc = tmp;
	nc->est = run->est;
	run->est = tmp.est;
	nc->metrics_listen = run->metrics_listen;
	run->metrics_listen = tmp.metrics_listen;
}

/*
 * SIGHUP: reads the files again and, if they are valid, replaces the CE
 * rules, [throttle] and the log level of the running aggregator. Runs on
 * the server's thread between two requests, so every batch is attributed
 * wholly by the old or wholly by the new rules; parts still held are
 * decided by the rules in force when they are decided. The throttle policy
 * starts afresh (commands in force stay until their lease ends).
 */
static void agg_reload_config(struct agg_main *m)
{
	struct agg_opts no = { .config = m->o->config };
	struct rm_setvals files = { 0 };
	struct agg_config *nc = NULL;
	struct agg_throttle_stats ts;
	struct agg_throttle *thr = NULL;
	char what[512];
	const char *db, *ndb;
	size_t i;
	int rv, changed, listen_changed;

	rm_log_info("SIGHUP: reading '%s' again", m->o->config);
	if ((rv = agg_load(&no, m->cmd, &files, &nc)) != RM_OK) {
		rm_log_error("reload refused: configuration '%s': %s; the running configuration is kept",
			     m->o->config, rm_strerror(rv));
		rm_setvals_free(&files);
		return;
	}
	if (agg_config_restart_diff(m->cfg, nc, what, sizeof(what))) {
		rm_log_error("reload refused: %s changed, which needs a restart; the running configuration is "
			     "kept", what);
		goto out;
	}
	agg_effective(m->o, m->cfg, &db);
	agg_effective(&no, nc, &ndb);
	listen_changed = strcmp(db, ndb) != 0 || no.nlisten != m->o->nlisten;
	for (i = 0; !listen_changed && i < no.nlisten; i++)
		listen_changed = strcmp(no.listen[i], m->o->listen[i]) != 0;
	if (listen_changed)
		rm_log_warn("listen addresses and the database change at the next start only; still listening "
			    "on %s, storing to '%s'", m->o->listen[0], db);
	if ((rv = rm_setvals_find(m->cmd, AGG_S_METRICS_LISTEN)) < 0 &&
	    (!nc->metrics_listen != !m->o->metrics_listen ||
	     (nc->metrics_listen && strcmp(nc->metrics_listen, m->o->metrics_listen) != 0)))
		rm_log_warn("[metrics] listen changes at the next start only");
	changed = agg_config_diff(m->cfg, nc, what, sizeof(what));
	if (changed) {
		/* the new throttle gets the running config object, filled below */
		agg_throttle_get_stats(m->thr, &ts);
		agg_throttle_stats_add(&m->thr_before, &ts);
		agg_throttle_close(m->thr);
		m->thr = NULL;
		agg_config_swap(m->cfg, nc);
		/* the running [estimate] array equals the new one
		 * (agg_config_restart_diff) but for where it was read */
		for (i = 0; i < nc->nest; i++) {
			m->cfg->est[i].file = nc->est[i].file;
			m->cfg->est[i].line = nc->est[i].line;
		}
		if ((rv = agg_throttle_open(&thr, m->cfg, m->db, NULL)) != RM_OK) {
			/* cannot happen for a config that parsed; go back to the old one */
			rm_log_error("reload refused: failed to set up throttling: %s", rm_strerror(rv));
			agg_config_swap(m->cfg, nc);
			if (agg_throttle_open(&thr, m->cfg, m->db, NULL) != RM_OK)
				rm_log_error("failed to set up throttling again; throttling is off until a restart");
			m->thr = thr;
			goto out;
		}
		m->thr = thr;
		agg_throttle_decided(m->cfg, m->decided);
		agg_server_set_decided(m->srv, m->decided->pm, m->decided->n);
	}
	if (no.level != rm_log_get_level())
		rm_log_info("log level %s -> %s", rm_log_level_name(rm_log_get_level()), rm_log_level_name(no.level));
	rm_log_set_level(no.level);
	m->o->keep_pending = no.keep_pending;
	rm_log_info("reloaded '%s': %s; %zu CE rules, %zu throttle caps, %zu sockets decided by rule", m->o->config,
		    changed ? what : "rules and throttling unchanged", m->cfg->nrules, m->cfg->throttle.ncaps,
		    m->decided->n);
out:
	agg_config_free(nc);
	rm_setvals_free(&files);
}

int main(int argc, char **argv)
{
	struct agg_opts o = { .config = AGG_DEFAULT_CONFIG, .rt_req_pct = AGG_RT_REQ_PM_DEFAULT / 10,
			   .rt_go_req_pct = AGG_RT_GO_REQ_PM_DEFAULT / 10,
			   .rt_go_lab_req_pct = AGG_RT_GO_LAB_REQ_PM_DEFAULT / 10 };
	struct rm_setvals cmd = { 0 }, files = { 0 };
	const char *db_path, **listen;
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
	struct stat dbst;
	st_db *db = NULL;
	struct agg_store store;
	char *secret = NULL;
	size_t nlisten, i;
	int rv, served = 0, db_existed;

	rm_log_init("rametr-aggregator");
	if ((rv = rm_settings_argv(agg_settings, AGG_S_COUNT, argc, argv, &cmd)) != RM_OK) {
		agg_usage(stderr);
		rm_setvals_free(&cmd);
		return rv == RM_ENOMEM ? 1 : 2;
	}
	if (rm_setvals_find(&cmd, AGG_S_HELP) >= 0 || rm_setvals_find(&cmd, AGG_S_VERSION) >= 0) {
		if (rm_setvals_find(&cmd, AGG_S_HELP) >= 0)
			agg_usage(stdout);
		else
			rm_version_print(stdout, "rametr-aggregator");
		rm_setvals_free(&cmd);
		return 0;
	}
	if ((rv = rm_setvals_find(&cmd, AGG_S_CONFIG)) >= 0)
		o.config = cmd.v[rv].value;
	if ((rv = agg_load(&o, &cmd, &files, &cfg)) != 0) {
		rm_log_error("failed to load configuration '%s': %s", o.config, rm_strerror(rv));
		rm_setvals_free(&cmd);
		rm_setvals_free(&files);
		return rv == RM_ECONFIG ? 2 : 1;
	}
	rm_log_set_level(o.level);
	agg_effective(&o, cfg, &db_path);
	listen = o.listen;
	nlisten = o.nlisten;
	if (!o.metrics_listen)
		o.metrics_listen = cfg->metrics_listen;
	if (o.check) {
		printf("configuration '%s' is valid: %zu CE rules, %zu estimators, %zu throttle caps\n", o.config,
		       cfg->nrules, cfg->nest, cfg->throttle.ncaps);
		agg_config_free(cfg);
		rm_setvals_free(&cmd);
		rm_setvals_free(&files);
		return 0;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = agg_on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = agg_on_hup;
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	db_existed = stat(db_path, &dbst) == 0;
	rv = st_open(&db, db_path, 0);
	if (rv == RM_OK) {
		agg_store_st(&store, db);
		rv = agg_account_open(&acct, &store);
		if (rv == RM_OK)
			rv = agg_account_set_runtime(acct, !o.no_charge_runtime, (unsigned)o.rt_req_pct * 10,
						     (unsigned)o.rt_go_req_pct * 10, (unsigned)o.rt_go_lab_req_pct * 10);
		if (rv == RM_OK)
			agg_account_set_go_labels(acct, !o.no_go_labels);
		if (rv == RM_OK)
			agg_account_set_go_label_segments(acct, o.go_label_segs);
	}
	/* usage settles into the metrics once quiet for the horizon (held parts are charged by then) */
	if (rv == RM_OK && o.metrics_listen &&
	    (rv = agg_metrics_open(&metrics, (int64_t)cfg->horizon_ns + 2000000000ll, agg_now_unix())) == RM_OK &&
	    (rv = agg_metrics_http_open(&mhttp, o.metrics_listen, metrics)) == RM_OK)
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
		m.cfg = cfg;
		m.decided = &decided;
		m.db = db;
		m.o = &o;
		m.cmd = &cmd;
		m.metrics = metrics;

		struct agg_server_cfg scfg = {
			.tick_ms = 1000,
			.bind_nodes = 1,
			.tls_cert_key = o.tls_cert,
			.tls_ca = o.tls_ca,
			.window_tolerance_ns = (int64_t)o.window_tolerance_s * 1000000000ll,
			.max_conns = o.max_conns,
			.idle_ms = (int)(o.idle_timeout_s * 1000),
			.mem_bound = (size_t)o.mem_bound,
		};

		if (o.secret_file && !(secret = agg_read_secret(o.secret_file))) {
			rv = RM_EINVAL;
		} else {
			scfg.secret = (const uint8_t *)secret;
			scfg.secret_len = secret ? strlen(secret) : 0;
			rv = agg_server_open_cfg(&srv, listen, nlisten, &h, &scfg);
		}
		m.srv = srv;
	}
	if (rv == RM_OK) {
		served = 1;
		for (i = 0; i < nlisten; i++)
			rm_log_info("listening on %s, storing to '%s', %zu CE rules", listen[i], db_path, cfg->nrules);
		sd_notifyf(0, "READY=1\nSTATUS=serving, %zu CE rules", cfg->nrules);
		rv = agg_server_run(srv, &agg_stop);
		sd_notify(0, "STOPPING=1\nSTATUS=stopping: deciding the parts still held");
	}
	/* a crash keeps pending parts (they are stored with every batch); a
	 * stop decides them unless they are to wait for the next start */
	if (stitch && !o.keep_pending) {
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
		rm_log_info("runtime rule %s: %.3f s of managed runtimes' CPU outside requests charged to CEs, %.3f s "
			    "left in V 'runtime'", o.no_charge_runtime ? "off" : "on",
			    (double)st.runtime_charged_ns / 1e9, (double)st.runtime_left_ns / 1e9);
		rm_log_info("Go label rule %s: %llu windows split by goroutine labels, %.3f s of Go programs' CPU "
			    "charged by label, %.3f s left to the runtime rule (%llu samples past a window's cookies); "
			    "%.3f s of Go parts resolved after their window's split charged as it",
			    o.no_go_labels ? "off" : "on", (unsigned long long)st.go_label_windows,
			    (double)st.go_labelled_ns / 1e9, (double)st.go_unlabelled_ns / 1e9,
			    (unsigned long long)st.go_folded, (double)st.go_late_ns / 1e9);
		if (st.go_seg_windows)
			rm_log_info("Go label rule: %llu windows counted by segment too (segments corrected by them: %s); "
				    "the samples put %.3f s in segments received on a socket, whose parts held %.3f s",
				    (unsigned long long)st.go_seg_windows, o.go_label_segs ? "on" : "off",
				    (double)st.go_seg_sampled_ns / 1e9, (double)st.go_seg_parts_ns / 1e9);
	}
	if (stitch) {
		agg_stitch_run_get_stats(stitch, &ps);
		rm_log_info("pairing: %llu parts by rule, %llu by bytes (%llu split), %llu at the horizon, "
			    "%llu evicted, %llu without CE; %llu sends to sockets the rules decide not indexed; "
			    "%llu with bytes past the sends followed per part, %llu sends unchecked, %llu wake-ups "
			    "capped; %llu held (%llu pending) kept for the next start; %llu charged like the one "
			    "request their reply answers among several read at once",
			    (unsigned long long)ps.by_rule, (unsigned long long)ps.by_bytes,
			    (unsigned long long)ps.split, (unsigned long long)ps.by_horizon,
			    (unsigned long long)ps.evicted, (unsigned long long)ps.by_none,
			    (unsigned long long)ps.ruled_sends, (unsigned long long)ps.too_many_sends,
			    (unsigned long long)ps.unchecked_sends, (unsigned long long)ps.capped_wakes,
			    (unsigned long long)ps.held, (unsigned long long)ps.pending,
			    (unsigned long long)ps.answered_in_order);
	}
	if (m.stitch)
		thr = m.thr; /* replaced at reloads */
	if (thr || m.thr_before.windows || m.thr_before.accepted || m.thr_before.refused) {
		struct agg_throttle_stats ts = m.thr_before, now;

		if (thr) {
			agg_throttle_get_stats(thr, &now);
			agg_throttle_stats_add(&ts, &now);
		}
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
		rm_log_info("server: %llu requests answered; %llu times requests waited unread for %d ms or more "
			    "(%llu ms in all, longest turn %llu ms); %llu connections open, %llu closed and not yet "
			    "released",
			    (unsigned long long)ss.requests, (unsigned long long)ss.stalls, AGG_SERVER_STALL_MS,
			    (unsigned long long)ss.stall_ms, (unsigned long long)ss.max_busy_ms,
			    (unsigned long long)ss.conns, (unsigned long long)ss.conns_closing);
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
	if (!served && !db_existed) {
		/* nothing was stored: leave no empty database behind */
		rm_log_info("removing '%s': created by this start, which failed", db_path);
		agg_remove_db(db_path);
	}
	rm_setvals_free(&cmd);
	rm_setvals_free(&files);
	if (rv != RM_OK) {
		rm_log_error("stopped: %s", rm_strerror(rv));
		return 1;
	}
	return 0;
}
