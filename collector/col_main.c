/*
 * col_main.c - the rametr-collector program: runs one backend (ebpf,
 * replay, xen, xen-live), batches what it produces, and hands the batches to
 * the batcher (col_batcher.h), whose batches the sender delivers to the
 * aggregator or spools. Owns the options and configuration files, the
 * flush timer (--flush-ms), the ring's drain interval and the shutdown
 * order: stop the backend, emit what it still holds, flush, spool what the
 * aggregator did not acknowledge, and remove the state file (col_restart.h)
 * the next instance of the node would otherwise take as left by a dead one.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "col_backend.h"
#include "col_batcher.h"
#include "col_bpf.h"
#include "col_merge.h"
#include "col_replay.h"
#include "col_restart.h"
#include "col_sender.h"
#include "col_tc.h"
#include "col_throttle.h"
#include "rm_conf.h"
#include "rm_dur.h"
#include "rm_err.h"
#include "rm_match.h"
#include "rm_version.h"
#include "rm_wire.h"
#ifdef RM_HAVE_XEN_BACKEND
#include "col_xen.h"
#endif
#include "banned.h"

/*
 * The ring is drained at most every COL_DRAIN_MS: the kernel wakes the
 * consumer at the first record after it caught up, so a consumer that polls
 * again at once is woken ~150 times/s at 50k parts/s (each wake-up an epoll
 * round trip here and irq work for the producer). The ring (16 MiB) holds
 * over 0.5 s of parts at 100k parts/s, and the kernel forces a wake-up when
 * it is a quarter full. A smaller --ring-bytes shortens the interval in
 * proportion (no wait for a ring under 1 MiB).
 */
#define COL_DRAIN_MS 25
#define COL_DRAIN_RING (16u << 20)

#define COL_DEFAULT_CONFIG "/etc/rametr/collector.conf"
#ifndef COL_PROG
#define COL_PROG "rametr-collector" /* rametr-collector-xen: set by the build */
#endif

static volatile sig_atomic_t col_stop;

static void col_on_signal(int sig)
{
	(void)sig;
	col_stop = 1;
}

static volatile sig_atomic_t col_hup;

static void col_on_hup(int sig)
{
	(void)sig;
	col_hup = 1;
}

static void col_reload(void);

/*
 * The batcher's window callback, which also serves a pending SIGHUP: windows
 * arrive several times a second from every backend, on the main thread.
 */
static int col_sink_window(void *arg, const struct rm_totals *w)
{
	if (col_hup) {
		col_hup = 0;
		col_reload();
	}
	return col_batcher_window(arg, w);
}

static uint64_t col_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A positive duration in rm_dur.h's grammar, plain numbers as seconds
 * ("250ms", "1s", "2m", "1h", "0.5"), at most 1e18 ns. Returns 0 on error. */
static uint64_t col_parse_dur_ns(const char *s)
{
	uint64_t ns;

	if (rm_dur_parse(s, RM_DUR_BARE_SECONDS, &ns, NULL) != 0 || ns > 1000000000000000000ull)
		return 0;
	return ns;
}

static int64_t col_clock_offset_ns(void)
{
	struct timespec rt, mono;

	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	return ((int64_t)rt.tv_sec - mono.tv_sec) * 1000000000LL + (rt.tv_nsec - mono.tv_nsec);
}

struct col_opts {
	const char *url, *node, *backend, *events, *xen_trace, *spool, *netns, *throttle;
	uint64_t window_ns, duration_ns, xen_khz;
	int follow_wakeups, follow_replies, cpu_slices, handoffs_from_start;
	int go_labels, go_label_per_thread, go_creations_from_start;
	uint32_t go_label_hz;
	int count_rametr, no_merge;
	uint32_t ring_bytes;
	uint32_t exclude[16];
	size_t n_exclude;
	size_t mem_limit;
	int flush_ms;
	const char *tls_cert, *tls_ca, *tls_server_name, *token_file;
};

/*
 * Throttle enforcement: commands from the aggregator (on the sender's
 * thread) go to the mechanism chosen with --throttle.
 */
struct col_enforcer {
	const char *node;
	struct col_throttle *cg;   /* --throttle cgroup */
	struct col_tc *tc;         /* --throttle tc:IFACE[:egress] */
};

static uint32_t col_netns_ino(const char *netns)
{
	char path[512];
	struct stat st;

	if (!netns)
		return 0;
	snprintf(path, sizeof(path), strchr(netns, '/') ? "%s" : "/var/run/netns/%s", netns);
	return stat(path, &st) == 0 ? (uint32_t)st.st_ino : 0;
}

static int col_enforcer_open(struct col_enforcer *e, const struct col_opts *o)
{
	int rv;

	if (strcmp(o->throttle, "cgroup") == 0) {
		struct col_throttle_cfg cfg = { .netns_ino = col_netns_ino(o->netns) };

		if ((rv = col_throttle_open(&e->cg, &cfg)) != 0)
			rm_log_error("failed to set up cgroup throttling: %s", rm_strerror(rv));
		return rv;
	}
	if (strncmp(o->throttle, "tc:", 3) == 0 && o->throttle[3]) {
		char ifname[64];
		struct col_tc_cfg cfg = { ifname, 0 };
		const char *colon;

		snprintf(ifname, sizeof(ifname), "%s", o->throttle + 3);
		if ((colon = strchr(o->throttle + 3, ':'))) {
			ifname[colon - (o->throttle + 3)] = '\0';
			if (strcmp(colon + 1, "egress") != 0 && strcmp(colon + 1, "ingress") != 0) {
				rm_log_error("invalid --throttle '%s' (tc:IFACE[:ingress|:egress])", o->throttle);
				return RM_EINVAL;
			}
			cfg.egress = strcmp(colon + 1, "egress") == 0;
		}
		if ((rv = col_tc_open(&e->tc, &cfg)) != 0)
			rm_log_error("failed to set up admission throttling on '%s': %s", ifname,
				     rm_strerror(rv));
		return rv;
	}
	rm_log_error("invalid --throttle '%s' (off, cgroup, tc:IFACE[:egress])", o->throttle);
	return RM_EINVAL;
}

static void col_enforcer_close(struct col_enforcer *e)
{
	col_throttle_close(e->cg);
	col_tc_close(e->tc);
	e->cg = NULL;
	e->tc = NULL;
}

static int col_on_command(void *arg, const Rametr__ThrottleCommand *c)
{
	struct col_enforcer *e = arg;
	struct rm_match m[COL_THROTTLE_MAX_MATCHES];
	struct col_throttle_cmd cmd;
	char err[256] = "";
	int rv;

	if (c->server[0] && strcmp(c->server, e->node) != 0) {
		rm_log_error("refused throttle command %" PRIu64 ": for server '%s', this is '%s'", c->id,
			     c->server, e->node);
		return RM_EINVAL;
	}
	if (!e->cg && !e->tc) {
		rm_log_warn("throttle command %" PRIu64 " for CE '%s' ignored: throttling is off "
			    "(--throttle)", c->id, c->ce);
		return RM_ENOTSUP;
	}
	if (c->n_match > COL_THROTTLE_MAX_MATCHES) {
		rm_log_error("refused throttle command %" PRIu64 ": %zu matches", c->id, c->n_match);
		return RM_EINVAL;
	}
	memset(&cmd, 0, sizeof(cmd));
	col_batcher_matches(c->match, c->n_match, m);
	cmd.id = c->id;
	cmd.ce = c->ce;
	cmd.resource = c->resource;
	cmd.cap_permille = c->cap_permille;
	cmd.expires_unix_ns = c->expires_unix_ns;
	cmd.match = m;
	cmd.nmatch = c->n_match;
	cmd.rx_rate_bps = c->rx_rate_bps;
	rv = e->cg ? col_throttle_apply(e->cg, &cmd, err, sizeof(err)) : col_tc_apply(e->tc, &cmd, err, sizeof(err));
	if (rv != RM_OK)
		rm_log_error("refused throttle command %" PRIu64 " for CE '%s': %s", c->id, c->ce, err);
	return rv;
}

static void col_usage(FILE *f)
{
	fprintf(f,
		"usage: rametr-collector --aggregator URL [--node NAME] [options]\n"
		"\n"
		"Cuts threads' lives into segments (recv .. next send) and streams them to\n"
		"the aggregator. Every option is also a key of [collector] in the\n"
		"configuration file (yes/no for switches); options given here override it.\n"
		"  --config FILE      configuration (default " COL_DEFAULT_CONFIG ", read if\n"
		"                     present), then its drop-ins FILE.d/*.conf\n"
		"  --check-config     read the configuration and options, report problems, exit\n"
		"  --aggregator URL   tcp://HOST:PORT, tls+tcp://HOST:PORT or ipc:///PATH of\n"
		"                     rametr-aggregator\n"
		"  --tls-cert FILE    tls+tcp://: PEM file with this node's certificate and key\n"
		"  --tls-ca FILE      tls+tcp://: PEM file of the cluster CA\n"
		"  --tls-server-name NAME\n"
		"                     tls+tcp://: the name in the aggregator's certificate\n"
		"                     (default: the URL's host)\n"
		"  --token-file FILE  this node's enrolment token (scripts/cert.sh issue)\n"
		"  --node NAME        this node's id (unique in the cluster; default: the host name)\n"
		"  --backend B        ebpf (default), replay, xen (trace file), xen-live\n"
		"  --events FILE      replay: recorded event stream (format: collector/col_events.h)\n"
		"  --xen-trace FILE   xen: xentrace binary file\n"
		"  --xen-cpu-khz N    xen: TSC frequency of the traced host\n"
		"  --netns NAME       ebpf: account only the threads of network namespace NAME\n"
		"                     (/var/run/netns/NAME, or a path): one collector per namespace \"host\"\n"
		"  --follow-wakeups   ebpf: a thread woken through a futex by a thread in a segment\n"
		"                     inherits that segment until its next recv (thread-pool hand-offs)\n"
		"  --no-follow-replies\n"
		"                     ebpf, replay: do not charge a serving thread's work after a reply\n"
		"                     to the request its next reply answers (on by default: thread pools\n"
		"                     that take queued requests without being woken; --follow-replies,\n"
		"                     the default, is accepted)\n"
		"  --handoffs-from-start\n"
		"                     ebpf: follow-replies' hand-off hook (a hook on every wake-up of\n"
		"                     the machine) from the start; by default it is attached once a\n"
		"                     request's reply is sent, or read, by another thread than the\n"
		"                     one that read, or sent, the request (docs/cpu-counters.md)\n"
		"  --no-go-labels     ebpf: do not follow Go programs' goroutines; by default each Go\n"
		"                     program found (by its binary) has its goroutines labelled with\n"
		"                     the TCP connection they serve and its CPU sampled per label,\n"
		"                     which the aggregator splits its CPU by (docs/go.md);\n"
		"                     --go-labels, the default, is accepted\n"
		"  --go-label-hz N    ebpf: the goroutine sampler's frequency, 10 .. 20000 (default 1999)\n"
		"  --go-label-sampler cpu|thread\n"
		"                     ebpf: where the goroutine sampler ticks: on every CPU (the\n"
		"                     default; every process there pays for its interrupts) or on\n"
		"                     each thread of the Go programs only (no other process pays;\n"
		"                     the Go programs pay more, at their context switches)\n"
		"  --go-creations-from-start\n"
		"                     ebpf: follow the goroutines each Go program creates (a uprobe\n"
		"                     that traps at every goroutine's start) from the start; by default\n"
		"                     only once its samples show its goroutines working without a\n"
		"                     label (docs/go.md)\n"
		"  --cpu-slices       ebpf: CPU cut into slices by a hook on every context switch instead\n"
		"                     of read from each thread's own scheduler counters at its socket,\n"
		"                     disk and exit events, its hand-offs and at window ends (the\n"
		"                     default; docs/cpu-counters.md); --follow-wakeups needs the hook\n"
		"                     and implies this\n"
		"  --cpu-counters     ebpf: the default CPU path (cpu_counters = no: --cpu-slices)\n"
		"  --exclude-pid PID  ebpf: never segment process PID (repeatable); the collector itself\n"
		"                     and processes named rametr* (a local aggregator, rametrctl) never are\n"
		"  --count-rametr     ebpf: segment processes named rametr* like any other\n"
		"  --no-merge         send every part as is, also those the aggregator's rules decide\n"
		"                     (by default those are sent summed per socket, thread and window)\n"
		"  --ring-bytes N     ebpf: size of the kernel's part ring, a power of 2 >= 4096 (default 16 MiB);\n"
		"                     parts it cannot take are charged to V as 'dropped'\n"
		"  --window D         accounting window, e.g. 1s (ebpf), 100ms (xen default)\n"
		"  --spool PATH       spool file for undelivered batches (default /var/lib/rametr/spool-NODE)\n"
		"  --mem-limit BYTES  batches kept in memory before spooling (default 8 MiB)\n"
		"  --flush-ms N       send a batch at least every N ms (default 250)\n"
		"  --batch-parts N    send a batch at most N parts long, merged records included\n"
		"                     (default 4096)\n"
		"  --duration D       stop after D (default: run until SIGINT/SIGTERM)\n"
		"  --throttle MODE    enforce the aggregator's throttle commands: off (default),\n"
		"                     cgroup (per-thread CPU quota, thread-per-request servers),\n"
		"                     tc:IFACE[:egress] (admission: the CE's inbound bytes policed at\n"
		"                     IFACE's ingress, or egress, e.g. a namespace's root-side veth;\n"
		"                     event-loop servers)\n"
		"  --log-level L      error, warning, info (default) or debug\n"
		"  -v, --verbose      debug messages (--log-level debug)\n"
		"  --version          print the version and exit\n"
		"Exit status: 0 when everything was acknowledged; 3 when batches were left\n"
		"unacknowledged (kept in the spool); 1 on other errors; 2 on bad usage.\n");
}


/* ---- the state left for the next instance of the node (col_restart.h) ---- */

static struct {
	int on;                       /* this run keeps a state file */
	char path[600];
	/* dead instances' lines not yet acknowledged, then this run's (last) */
	struct col_restart_state st[COL_RESTART_MAX];
	size_t n;
	uint64_t saved_win;           /* ebpf: window of the last save */
} col_rs;

#define COL_RESTART_ACK_MS 2000 /* wait at start for the report of a dead instance's windows */

static uint64_t col_now_win(uint64_t window_ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) / window_ns;
}

/*
 * The windows a dead replaying instance left: its stream's totals of every
 * window, each marked restart = 1, queued in one batch. Returns the number
 * of windows reported.
 */
static size_t col_restart_replay(const struct col_restart_state *prev, struct col_batcher *bt)
{
	struct col_replay_capture c;
	struct col_sink sink;
	char err[256];
	struct col_replay_opts ro = { .err = err, .errlen = sizeof(err) };
	size_t i, n;

	col_replay_capture_init(&c);
	sink = col_replay_capture_sink(&c);
	if (col_replay_file(prev->events, &sink, &ro) != RM_OK) {
		rm_log_warn("a previous collector of node '%s' did not stop cleanly, and its stream cannot be "
			    "replayed for the totals of the windows it left open: %s", prev->node, err);
		col_replay_capture_release(&c);
		return 0;
	}
	for (i = 0; i < c.nwins; i++) {
		c.wins[i].restart = 1;
		col_batcher_window(bt, &c.wins[i]);
	}
	col_batcher_flush(bt);
	n = c.nwins;
	col_replay_capture_release(&c);
	return n;
}

/*
 * At start: reports what a dead previous instance of the node left open
 * (its state file), then writes this run's state. Before the backend
 * runs, so that the report is a batch of its own, after the spool.
 */
static void col_restart_begin(const struct col_opts *o, struct col_batcher *bt)
{
	struct col_restart_state *own, *prev = col_rs.st;
	int ebpf = !strcmp(o->backend, "ebpf"), replay = !strcmp(o->backend, "replay"), reported = 0;
	uint64_t busy = 0, now_win = col_now_win(o->window_ns);
	size_t np = 0, keep = 0, i;
	char boot[40];

	if (!ebpf && !replay)
		return; /* the xen backends keep no state */
	snprintf(col_rs.path, sizeof(col_rs.path), "%s.state", o->spool);
	col_restart_boot_id(boot, sizeof(boot));
	if (ebpf && col_restart_busy_ns(&busy) != RM_OK)
		rm_log_warn("failed to read the kernel's busy CPU time from /proc/stat");
	if (col_restart_load(col_rs.path, prev, &np) != RM_OK)
		np = 0;
	for (i = 0; i < np; i++) {
		if (strcmp(prev[i].node, o->node) != 0)
			rm_log_warn("'%s' holds a line of a collector of node '%s', not '%s'; ignored", col_rs.path,
				    prev[i].node, o->node);
		else
			prev[keep++] = prev[i];
	}
	if (keep == COL_RESTART_MAX) {
		rm_log_warn("'%s': more than %d collectors of node '%s' died unreported; the oldest is dropped",
			    col_rs.path, COL_RESTART_MAX - 1, o->node);
		memmove(prev, prev + 1, (keep - 1) * sizeof(*prev));
		keep--;
	}
	/* this run's line goes in first, after the dead ones: killed while it
	 * reports them, the next instance finds them all */
	own = &col_rs.st[keep];
	col_rs.n = keep + 1;
	memset(own, 0, sizeof(*own));
	snprintf(own->node, sizeof(own->node), "%s", o->node);
	snprintf(own->backend, sizeof(own->backend), "%s", o->backend);
	own->window_ns = o->window_ns;
	if (replay) {
		if (!realpath(o->events, own->events))
			snprintf(own->events, sizeof(own->events), "%s", o->events);
	} else {
		own->from_win = col_rs.saved_win = now_win;
		own->busy_ns = busy;
		snprintf(own->boot, sizeof(own->boot), "%s", boot);
	}
	col_rs.on = col_restart_save(col_rs.path, col_rs.st, col_rs.n) == RM_OK;
	for (i = 0; i < keep; i++) {
		struct rm_totals lump;
		const char *why = NULL;

		if (!strcmp(prev[i].backend, "replay")) {
			size_t n = col_restart_replay(&prev[i], bt);

			if (n)
				rm_log_warn("a previous collector of node '%s' did not stop cleanly (killed?): "
					    "reporting the totals of the %zu windows of its stream '%s'; what its "
					    "delivered parts do not explain is charged to V 'collector_restart'",
					    o->node, n, prev[i].events);
			reported += n > 0;
		} else if (busy && col_restart_lump(&prev[i], o->node, o->window_ns, boot, busy, now_win, &lump,
						    &why)) {
			col_batcher_window(bt, &lump);
			col_batcher_flush(bt);
			rm_log_warn("a previous collector of node '%s' did not stop cleanly (killed?): reporting "
				    "%.3f s of busy CPU over the %llu windows it left open, from the kernel's "
				    "counters; what its delivered parts do not explain is charged to V "
				    "'collector_restart'", o->node, (double)lump.busy_ns / 1e9,
				    (unsigned long long)lump.restart);
			reported++;
		} else {
			rm_log_warn("a previous collector of node '%s' did not stop cleanly (killed?), and the "
				    "windows it left open cannot be measured: %s", o->node,
				    why ? why : "the kernel's counters are unreadable");
		}
	}
	/* acknowledged: the dead instances' lines can go; else the next instance reports them again */
	if (keep && col_rs.on && (!reported || col_sender_flush(bt->sender, COL_RESTART_ACK_MS) == RM_OK)) {
		col_rs.st[0] = *own;
		col_rs.n = 1;
		col_rs.on = col_restart_save(col_rs.path, col_rs.st, col_rs.n) == RM_OK;
	}
}

/*
 * ebpf, before each flush: once per window, if the aggregator acknowledged
 * every batch sent so far, moves the state's snapshot here: this window,
 * with the counters of now (what the window had before, delivered, is
 * taken out of the next lump: a flush interval's worth, at most).
 */
static void col_restart_tick(const struct col_opts *o, struct col_batcher *bt)
{
	struct col_sender_stats ss;
	uint64_t now_win, from, busy;

	if (!col_rs.on || (now_win = col_now_win(o->window_ns)) == col_rs.saved_win)
		return;
	col_sender_stats(bt->sender, &ss);
	rm_log_debug("state at window %llu: %zu batches unacknowledged", (unsigned long long)now_win, ss.queued);
	if (ss.queued || col_restart_busy_ns(&busy) != RM_OK)
		return;
	from = now_win;
	/* everything sent is acknowledged: the dead instances' lines too */
	if (col_rs.n > 1) {
		col_rs.st[0] = col_rs.st[col_rs.n - 1];
		col_rs.n = 1;
	}
	col_rs.st[0].from_win = from;
	col_rs.st[0].busy_ns = busy;
	if (col_restart_save(col_rs.path, col_rs.st, col_rs.n) == RM_OK)
		col_rs.saved_win = now_win;
}

static int col_run_ebpf(const struct col_opts *o, struct col_batcher *bt, const struct col_sink *sink,
			int64_t offset)
{
	struct col_bpf_cfg cfg = { .window_ns = o->window_ns, .offset_ns = offset, .self_tgid = (uint32_t)getpid(),
				   .follow_wakeups = o->follow_wakeups, .follow_replies = o->follow_replies,
				   .cpu_counters = !o->cpu_slices && !o->follow_wakeups,
				   .handoffs_from_start = o->handoffs_from_start,
				   .go_labels = o->go_labels, .go_label_hz = o->go_label_hz,
				   .go_label_per_thread = o->go_label_per_thread,
				   .go_creations_from_start = o->go_creations_from_start,
				   .exclude_rametr = !o->count_rametr, .ring_bytes = o->ring_bytes };
	size_t i;
	struct col_bpf_stats st;
	struct stat nst;
	struct col_bpf *b = NULL;
	uint64_t start = col_mono_ms(), last_flush = start, drain_ms;
	int rv;

	if (o->netns) {
		char path[512];

		snprintf(path, sizeof(path), strchr(o->netns, '/') ? "%s" : "/var/run/netns/%s", o->netns);
		if (stat(path, &nst) != 0) {
			rm_log_error("failed to open network namespace '%s': %s", path, strerror(errno));
			return RM_ENOENT;
		}
		cfg.netns_ino = (uint32_t)nst.st_ino;
		rm_log_info("accounting only network namespace '%s' (inode %u)", path, cfg.netns_ino);
	}
	if ((rv = col_bpf_open(&b, &cfg)) != 0)
		return rv;
	for (i = 0; i < o->n_exclude; i++) {
		if ((rv = col_bpf_exclude(b, o->exclude[i])) != 0) {
			col_bpf_close(b);
			return rv;
		}
	}
	rm_log_info("ebpf backend attached; node '%s', window %llu ms", o->node,
		    (unsigned long long)(o->window_ns / 1000000));
	drain_ms = o->ring_bytes && o->ring_bytes < COL_DRAIN_RING
			   ? (uint64_t)COL_DRAIN_MS * o->ring_bytes / COL_DRAIN_RING
			   : COL_DRAIN_MS;
	while (!col_stop) {
		uint64_t now, polled = col_mono_ms();

		if ((rv = col_bpf_poll(b, sink, o->flush_ms < 100 ? o->flush_ms : 100)) != 0)
			rm_log_error("backend poll failed: %s", rm_strerror(rv));
		now = col_mono_ms();
		if (now - polled < drain_ms && !col_stop) {
			/* drained before the interval: let the ring fill (a signal ends the sleep) */
			struct timespec ts = { 0, (long)(drain_ms - (now - polled)) * 1000000L };

			nanosleep(&ts, NULL);
			now = col_mono_ms();
		}
		if (now - last_flush >= (uint64_t)o->flush_ms) {
			col_restart_tick(o, bt);
			col_batcher_flush(bt);
			last_flush = now;
		}
		if (o->duration_ns && (now - start) * 1000000ULL >= o->duration_ns)
			break;
	}
	rv = col_bpf_finish(b, sink);
	col_batcher_flush(bt);
	col_bpf_get_stats(b, &st);
	rm_log_info("ebpf backend stopped: %llu parts, %llu window reports, %llu parts dropped in the kernel",
		    (unsigned long long)st.parts, (unsigned long long)st.windows,
		    (unsigned long long)st.dropped_parts);
	if (o->follow_replies && !o->follow_wakeups)
		rm_log_info("hand-off hook %s; %llu requests handed between threads (a reply sent or read by another "
			    "thread than the request's) were charged without it", st.handoff_hook ? "attached" : "never attached",
			    (unsigned long long)st.handoff_replies_before);
	if (o->follow_replies && !o->follow_wakeups && (st.handoff_reads_before || st.carry_wakeups))
		rm_log_info("%llu requests read on a connection by another thread than its previous request before "
			    "the hand-off hook; a dispatcher's CPU carried at %llu wake-ups, %llu ns of it left "
			    "unsegmented (carry full)",
			    (unsigned long long)st.handoff_reads_before, (unsigned long long)st.carry_wakeups,
			    (unsigned long long)st.carry_capped_ns);
	if (o->follow_replies && !o->follow_wakeups && st.handoff_moves_before)
		rm_log_info("%llu requests sent on a connection another thread sent on last, by a thread serving several "
			    "connections, before the hand-off hook",
			    (unsigned long long)st.handoff_moves_before);
	if (st.go.windows || st.go.unreadable || st.go.lost)
		rm_log_info("goroutine labels: %llu samples in %llu windows (%.1f%% of goroutines without a label, "
			    "%.1f%% of the runtime's own; %llu of labels past the wire's bound "
			    "sent as unlabelled), %llu not counted (map full); %u Go programs watched at the end, %u "
			    "found whose build could not be read; loaded %u times; %llu of their parts held back to go "
			    "with their windows' counts, %llu not (their window already handed, or past the bound), and %.3f s of "
			    "their CPU outside requests; %llu program-windows' samples calibrated to the program's own CPU, "
			    "%llu sent as sampled",
			    (unsigned long long)st.go.samples, (unsigned long long)st.go.windows,
			    st.go.samples ? 100.0 * (double)st.go.unlabelled / (double)st.go.samples : 0.0,
			    st.go.samples ? 100.0 * (double)st.go.runtime / (double)st.go.samples : 0.0,
			    (unsigned long long)st.go.folded, (unsigned long long)st.go.lost, st.go.watched,
			    st.go.unreadable, st.go.loads, (unsigned long long)st.go.held, (unsigned long long)st.go.unheld,
			    (double)st.go.unseg_held_ns / 1e9, (unsigned long long)st.go.calibrated,
			    (unsigned long long)st.go.uncalibrated);
	col_bpf_close(b);
	return rv;
}

/* The program's settings: options, and keys of [collector] (rm_conf.h). */
enum col_setting_id {
	COL_S_AGGREGATOR, COL_S_NODE, COL_S_BACKEND, COL_S_EVENTS, COL_S_XEN_TRACE, COL_S_XEN_KHZ, COL_S_WINDOW,
	COL_S_NETNS, COL_S_FOLLOW_WAKEUPS, COL_S_FOLLOW_REPLIES, COL_S_NO_FOLLOW_REPLIES, COL_S_CPU_SLICES,
	COL_S_CPU_COUNTERS, COL_S_HANDOFFS_FROM_START, COL_S_GO_LABELS, COL_S_NO_GO_LABELS, COL_S_GO_LABEL_HZ,
	COL_S_GO_LABEL_SAMPLER, COL_S_GO_CREATIONS_FROM_START,
	COL_S_EXCLUDE_PID, COL_S_COUNT_RAMETR,
	COL_S_NO_MERGE, COL_S_RING_BYTES, COL_S_SPOOL, COL_S_MEM_LIMIT, COL_S_FLUSH_MS, COL_S_BATCH_PARTS,
	COL_S_DURATION, COL_S_THROTTLE, COL_S_LOG_LEVEL, COL_S_VERBOSE, COL_S_CONFIG, COL_S_CHECK, COL_S_HELP,
	COL_S_VERSION, COL_S_TLS_CERT, COL_S_TLS_CA, COL_S_TLS_SERVER_NAME, COL_S_TOKEN_FILE, COL_S_COUNT
};

static const struct rm_setting col_settings[COL_S_COUNT] = {
	[COL_S_AGGREGATOR] = { "aggregator", 1, 0, 1, 0 },
	[COL_S_NODE] = { "node", 1, 0, 1, 0 },
	[COL_S_BACKEND] = { "backend", 1, 0, 1, 0 },
	[COL_S_EVENTS] = { "events", 1, 0, 1, 0 },
	[COL_S_XEN_TRACE] = { "xen-trace", 1, 0, 1, 0 },
	[COL_S_XEN_KHZ] = { "xen-cpu-khz", 1, 0, 1, 0 },
	[COL_S_WINDOW] = { "window", 1, 0, 1, 0 },
	[COL_S_NETNS] = { "netns", 1, 0, 1, 0 },
	[COL_S_FOLLOW_WAKEUPS] = { "follow-wakeups", 0, 0, 1, 0 },
	[COL_S_FOLLOW_REPLIES] = { "follow-replies", 0, 0, 1, 0 },
	[COL_S_NO_FOLLOW_REPLIES] = { "no-follow-replies", 0, 0, 1, 0 },
	[COL_S_CPU_SLICES] = { "cpu-slices", 0, 0, 1, 0 },
	[COL_S_CPU_COUNTERS] = { "cpu-counters", 0, 0, 1, 0 },
	[COL_S_HANDOFFS_FROM_START] = { "handoffs-from-start", 0, 0, 1, 0 },
	[COL_S_GO_LABELS] = { "go-labels", 0, 0, 1, 0 },
	[COL_S_NO_GO_LABELS] = { "no-go-labels", 0, 0, 1, 0 },
	[COL_S_GO_LABEL_HZ] = { "go-label-hz", 1, 0, 1, 0 },
	[COL_S_GO_LABEL_SAMPLER] = { "go-label-sampler", 1, 0, 1, 0 },
	[COL_S_GO_CREATIONS_FROM_START] = { "go-creations-from-start", 0, 0, 1, 0 },
	[COL_S_EXCLUDE_PID] = { "exclude-pid", 1, 1, 1, 0 },
	[COL_S_COUNT_RAMETR] = { "count-rametr", 0, 0, 1, 0 },
	[COL_S_NO_MERGE] = { "no-merge", 0, 0, 1, 0 },
	[COL_S_RING_BYTES] = { "ring-bytes", 1, 0, 1, 0 },
	[COL_S_SPOOL] = { "spool", 1, 0, 1, 0 },
	[COL_S_MEM_LIMIT] = { "mem-limit", 1, 0, 1, 0 },
	[COL_S_FLUSH_MS] = { "flush-ms", 1, 0, 1, 0 },
	[COL_S_BATCH_PARTS] = { "batch-parts", 1, 0, 1, 0 },
	[COL_S_DURATION] = { "duration", 1, 0, 1, 0 },
	[COL_S_THROTTLE] = { "throttle", 1, 0, 1, 0 },
	[COL_S_LOG_LEVEL] = { "log-level", 1, 0, 1, 0 },
	[COL_S_VERBOSE] = { "verbose", 0, 0, 1, 'v' },
	[COL_S_CONFIG] = { "config", 1, 0, 0, 'c' },
	[COL_S_CHECK] = { "check-config", 0, 0, 0, 0 },
	[COL_S_HELP] = { "help", 0, 0, 0, 'h' },
	[COL_S_VERSION] = { "version", 0, 0, 0, 0 },
	[COL_S_TLS_CERT] = { "tls-cert", 1, 0, 1, 0 },
	[COL_S_TLS_CA] = { "tls-ca", 1, 0, 1, 0 },
	[COL_S_TLS_SERVER_NAME] = { "tls-server-name", 1, 0, 1, 0 },
	[COL_S_TOKEN_FILE] = { "token-file", 1, 0, 1, 0 },
};


struct col_settings_ctx {
	struct col_opts *o;
	struct col_batcher *bt;
	enum rm_log_level level;
	int check;
};

static int col_bad(const struct rm_setval *v, const char *why)
{
	rm_log_error("%sinvalid %s '%s' (%s)", v->where, v->name, v->value, why);
	return RM_EINVAL;
}

/* Unsigned decimal value of v in lo..hi into *out, or an error logged. */
static int col_set_u64(const struct rm_setval *v, unsigned long long lo, unsigned long long hi, const char *why,
		       unsigned long long *out)
{
	char *end;

	errno = 0;
	*out = strtoull(v->value, &end, 10);
	if (errno || end == v->value || *end || v->value[0] == '-' || *out < lo || *out > hi)
		return col_bad(v, why);
	return RM_OK;
}

static int col_set(void *arg, const struct rm_setval *v)
{
	struct col_settings_ctx *x = arg;
	struct col_opts *o = x->o;
	int yes = strcmp(v->value, "yes") == 0;
	unsigned long long n;

	switch (v->id) {
	case COL_S_AGGREGATOR: o->url = v->value; break;
	case COL_S_NODE: o->node = v->value; break;
	case COL_S_BACKEND:
		if (strcmp(v->value, "ebpf") && strcmp(v->value, "replay") && strcmp(v->value, "xen") &&
		    strcmp(v->value, "xen-live"))
			return col_bad(v, "ebpf, replay, xen, xen-live");
		o->backend = v->value;
		break;
	case COL_S_EVENTS: o->events = v->value; break;
	case COL_S_XEN_TRACE: o->xen_trace = v->value; break;
	case COL_S_XEN_KHZ:
		if (col_set_u64(v, 1, 100000000ULL, "the TSC frequency in kHz", &n))
			return RM_EINVAL;
		o->xen_khz = n;
		break;
	case COL_S_WINDOW:
		if (!(o->window_ns = col_parse_dur_ns(v->value)))
			return col_bad(v, "a duration such as 1s or 100ms");
		break;
	case COL_S_DURATION:
		if (!(o->duration_ns = col_parse_dur_ns(v->value)))
			return col_bad(v, "a duration such as 30s or 2h");
		break;
	case COL_S_NETNS: o->netns = v->value; break;
	case COL_S_FOLLOW_WAKEUPS: o->follow_wakeups = yes; break;
	case COL_S_FOLLOW_REPLIES: o->follow_replies = yes; break;
	case COL_S_NO_FOLLOW_REPLIES: o->follow_replies = !yes; break;
	case COL_S_CPU_SLICES: o->cpu_slices = yes; break;
	case COL_S_CPU_COUNTERS: o->cpu_slices = !yes; break;
	case COL_S_HANDOFFS_FROM_START: o->handoffs_from_start = yes; break;
	case COL_S_GO_LABELS: o->go_labels = yes; break;
	case COL_S_NO_GO_LABELS: o->go_labels = !yes; break;
	case COL_S_GO_LABEL_HZ:
		if (col_set_u64(v, 10, 20000, "samples per second, 10 .. 20000", &n))
			return RM_EINVAL;
		o->go_label_hz = (uint32_t)n;
		break;
	case COL_S_GO_LABEL_SAMPLER:
		if (strcmp(v->value, "cpu") && strcmp(v->value, "thread"))
			return col_bad(v, "cpu or thread");
		o->go_label_per_thread = !strcmp(v->value, "thread");
		break;
	case COL_S_GO_CREATIONS_FROM_START: o->go_creations_from_start = yes; break;
	case COL_S_COUNT_RAMETR: o->count_rametr = yes; break;
	case COL_S_NO_MERGE: o->no_merge = yes; break;
	case COL_S_EXCLUDE_PID:
		if (o->n_exclude == 16 || col_set_u64(v, 1, UINT32_MAX, "a pid; at most 16", &n))
			return o->n_exclude == 16 ? col_bad(v, "a pid; at most 16") : RM_EINVAL;
		o->exclude[o->n_exclude++] = (uint32_t)n;
		break;
	case COL_S_RING_BYTES:
		if (col_set_u64(v, 4096, 1ULL << 30, "a power of 2, 4096 .. 1073741824", &n))
			return RM_EINVAL;
		if (n & (n - 1))
			return col_bad(v, "a power of 2, 4096 .. 1073741824");
		o->ring_bytes = (uint32_t)n;
		break;
	case COL_S_SPOOL: o->spool = v->value; break;
	case COL_S_MEM_LIMIT:
		if (col_set_u64(v, 0, 1ULL << 40, "bytes", &n))
			return RM_EINVAL;
		o->mem_limit = (size_t)n;
		break;
	case COL_S_FLUSH_MS:
		if (col_set_u64(v, 1, 3600000, "milliseconds, 1 .. 3600000", &n))
			return RM_EINVAL;
		o->flush_ms = (int)n;
		break;
	case COL_S_BATCH_PARTS:
		if (col_set_u64(v, 1, 1000000, "1 .. 1000000", &n))
			return RM_EINVAL;
		x->bt->batch_parts = (size_t)n;
		break;
	case COL_S_THROTTLE: o->throttle = v->value; break;
	case COL_S_TLS_CERT: o->tls_cert = v->value; break;
	case COL_S_TLS_CA: o->tls_ca = v->value; break;
	case COL_S_TLS_SERVER_NAME: o->tls_server_name = v->value; break;
	case COL_S_TOKEN_FILE: o->token_file = v->value; break;
	case COL_S_LOG_LEVEL:
		if (rm_log_parse_level(v->value, &x->level) != RM_OK)
			return col_bad(v, "error, warning, info, debug");
		break;
	case COL_S_VERBOSE: x->level = yes ? RM_LOG_DEBUG : RM_LOG_INFO; break;
	case COL_S_CHECK: x->check = yes; break;
	}
	return RM_OK;
}

struct col_file_ctx {
	struct rm_setvals *vals;
};

/* A line of the configuration files (rm_conf_fn): [collector] only. */
static int col_conf_line(void *arg, const char *file, int line, char *section, char *key, char *value)
{
	struct col_file_ctx *f = arg;

	if (!key) {
		if (strcmp(section, "collector") != 0) {
			rm_log_error("%s:%d: unknown section '[%s]' (the collector reads [collector])", file, line,
				     section);
			return RM_ECONFIG;
		}
		return RM_OK;
	}
	if (!section) {
		rm_log_error("%s:%d: key '%s' outside of any section", file, line, key);
		return RM_ECONFIG;
	}
	if (strcmp(section, "collector") != 0)
		return RM_OK; /* reported at its header */
	return rm_settings_key(col_settings, COL_S_COUNT, file, line, section, key, value, f->vals);
}

/*
 * The command line and the files' values: file scope, as the options point
 * into them until the end (and leak checkers see them referenced at an
 * early exit). col_config: the files to read again at a SIGHUP (NULL: none).
 */
/* The first line of path, trimmed, into buf. RM_OK or RM_EIO/RM_EINVAL (logged). */
static int col_read_token(const char *path, char *buf, size_t len)
{
	size_t n;
	FILE *f;

	if (!(f = fopen(path, "r"))) {
		rm_log_error("failed to open token file '%s': %s", path, strerror(errno));
		return RM_EIO;
	}
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	fclose(f);
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	if (n == 0) {
		rm_log_error("token file '%s' is empty", path);
		return RM_EINVAL;
	}
	return RM_OK;
}

static struct rm_setvals cmd, col_files_live;
static const char *col_config;

/*
 * SIGHUP: reads the configuration files again. The log level changes at
 * once; other settings (node, aggregator, backend, ...) need a restart,
 * which the log says. A file with errors changes nothing.
 */
static void col_reload(void)
{
	struct col_opts o = { .backend = "ebpf", .flush_ms = 250, .follow_replies = 1, .go_labels = 1 };
	struct col_batcher bt = { .batch_parts = COL_BATCH_PARTS };
	struct col_settings_ctx sx = { &o, &bt, RM_LOG_INFO, 0 };
	struct rm_setvals files = { 0 };
	struct col_file_ctx fx = { &files };
	size_t i, n = 0;
	int rv = RM_OK;

	if (!col_config) {
		rm_log_info("SIGHUP: no configuration file to read again");
		return;
	}
	rv = rm_conf_load(col_config, col_conf_line, &fx);
	if (rv == RM_OK)
		rv = rm_settings_apply(col_settings, &files, &cmd, col_set, &sx);
	if (rv != RM_OK) {
		rm_log_error("reload refused: configuration '%s': %s; the running settings are kept", col_config,
			     rm_strerror(rv));
		rm_setvals_free(&files);
		return;
	}
	for (i = 0; i < files.n; i++) {
		int k = rm_setvals_find(&col_files_live, files.v[i].id);

		if (files.v[i].id != COL_S_LOG_LEVEL && files.v[i].id != COL_S_VERBOSE &&
		    (k < 0 || strcmp(col_files_live.v[k].value, files.v[i].value) != 0))
			n++;
	}
	if (sx.level != rm_log_get_level())
		rm_log_info("log level %s -> %s", rm_log_level_name(rm_log_get_level()), rm_log_level_name(sx.level));
	rm_log_set_level(sx.level);
	rm_log_info("reloaded '%s'%s", col_config,
		    n ? "; other changed settings take effect at the next start" : "");
	rm_setvals_free(&files);
}

int main(int argc, char **argv)
{
	struct col_opts o = { .backend = "ebpf", .flush_ms = 250, .follow_replies = 1, .go_labels = 1 };
	struct col_batcher bt = { .batch_parts = COL_BATCH_PARTS };
	struct col_sink sink = { &bt, col_batcher_part, col_sink_window };
	struct col_settings_ctx sx = { &o, &bt, RM_LOG_INFO, 0 };
	struct rm_setvals files = { 0 };
	struct col_file_ctx fx = { &files };
	struct col_sender_cfg scfg;
	struct col_sender_stats ss;
	struct col_enforcer enf = { 0 };
	struct sigaction sa;
	char host[256] = "", spool[512], token[256];
	const char *config = COL_DEFAULT_CONFIG;
	int64_t offset = col_clock_offset_ns();
	int rv, frv, ci;

	rm_log_init(COL_PROG);
	if ((rv = rm_settings_argv(col_settings, COL_S_COUNT, argc, argv, &cmd)) != RM_OK) {
		col_usage(stderr);
		rm_setvals_free(&cmd);
		return rv == RM_ENOMEM ? 1 : 2;
	}
	if (rm_setvals_find(&cmd, COL_S_HELP) >= 0 || rm_setvals_find(&cmd, COL_S_VERSION) >= 0) {
		if (rm_setvals_find(&cmd, COL_S_HELP) >= 0)
			col_usage(stdout);
		else
			rm_version_print(stdout, COL_PROG);
		rm_setvals_free(&cmd);
		return 0;
	}
	/* the default file is read when it exists; a named one must */
	if ((ci = rm_setvals_find(&cmd, COL_S_CONFIG)) >= 0)
		config = cmd.v[ci].value;
	if (ci >= 0 || access(config, F_OK) == 0) {
		col_config = config;
		rv = rm_conf_load(config, col_conf_line, &fx);
	}
	if (rv == RM_OK)
		rv = rm_settings_apply(col_settings, &files, &cmd, col_set, &sx);
	if (rv != RM_OK) {
		if (rv != RM_ECONFIG || ci >= 0 || access(config, F_OK) == 0)
			rm_log_error("failed to load configuration '%s': %s", config, rm_strerror(rv));
		rm_setvals_free(&cmd);
		rm_setvals_free(&files);
		return rv == RM_ECONFIG || rv == RM_EIO ? 2 : 1;
	}
	rm_log_set_level(sx.level);
	col_files_live = files;
	gethostname(host, sizeof(host) - 1);
	if (!o.node && host[0])
		o.node = host; /* the default node name */
	if (!o.url || !o.node || o.flush_ms <= 0) {
		col_usage(stderr);
		return 2;
	}
	if (!strcmp(o.backend, "replay") && !o.events) {
		rm_log_error("--backend replay needs --events FILE");
		return 2;
	}
	if (!strcmp(o.backend, "xen") && !o.xen_trace) {
		rm_log_error("--backend xen needs --xen-trace FILE");
		return 2;
	}
	if (sx.check) {
		printf("configuration is valid: node '%s', aggregator %s, backend %s\n", o.node, o.url, o.backend);
		return 0;
	}
	if (!o.window_ns)
		o.window_ns = !strncmp(o.backend, "xen", 3) ? 100000000ULL : 1000000000ULL;
	if (!o.spool) {
		snprintf(spool, sizeof(spool), "/var/lib/rametr/spool-%s", o.node);
		o.spool = spool;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = col_on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = col_on_hup;
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	rm_log_info("node '%s', backend %s, sending to %s%s%s", o.node, o.backend, o.url,
		    col_config ? ", configuration " : "", col_config ? col_config : "");

	if (!strcmp(o.backend, "replay")) {
		/* windows of a recording come from its header, not from this clock */
		if ((rv = col_replay_window(o.events, &o.window_ns, &offset)) != 0)
			return 1;
	}
	if (o.throttle && strcmp(o.throttle, "off") != 0) {
		if ((rv = col_enforcer_open(&enf, &o)) != 0)
			return 1;
	}
	memset(&scfg, 0, sizeof(scfg));
	scfg.url = o.url;
	scfg.node = o.node;
	scfg.backend = o.backend;
	scfg.hostname = host;
	scfg.window_ns = o.window_ns;
	scfg.clock_offset_ns = offset;
	scfg.ncpu = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
	scfg.spool_path = o.spool;
	scfg.mem_limit = o.mem_limit;
	scfg.on_command = col_on_command;
	scfg.cmd_arg = &enf;
	scfg.tls_cert_key = o.tls_cert;
	scfg.tls_ca = o.tls_ca;
	scfg.tls_server_name = o.tls_server_name;
	if (o.token_file) {
		if (col_read_token(o.token_file, token, sizeof(token)) != RM_OK) {
			col_enforcer_close(&enf);
			return 1;
		}
		scfg.token = token;
	}
	enf.node = o.node;
	if (!o.no_merge) {
		if ((rv = col_merge_open(&bt.merge)) != 0) {
			rm_log_error("failed to set up merging: %s", rm_strerror(rv));
			col_enforcer_close(&enf);
			return 1;
		}
		scfg.on_decided = col_batcher_on_decided;
		scfg.decided_arg = bt.merge;
	}
	if ((rv = col_sender_open(&bt.sender, &scfg)) != 0) {
		rm_log_error("failed to start the sender: %s", rm_strerror(rv));
		col_enforcer_close(&enf);
		col_merge_close(bt.merge);
		return 1;
	}

	col_restart_begin(&o, &bt);
	if (!strcmp(o.backend, "ebpf")) {
		rv = col_run_ebpf(&o, &bt, &sink, offset);
	} else if (!strcmp(o.backend, "replay")) {
		struct col_replay_opts ropts = { .follow_replies = o.follow_replies };

		rv = col_replay_file(o.events, &sink, &ropts);
		col_batcher_flush(&bt);
#ifdef RM_HAVE_XEN_BACKEND
	} else {
		struct col_xen_opts xo = { .window_ns = o.window_ns, .cpu_khz = o.xen_khz,
					   .epoch_offset_ns = offset, .dom0_charging = 1 };

		if (!strcmp(o.backend, "xen"))
			rv = col_xen_replay_file(o.xen_trace, &xo, &sink);
		else
			rv = col_xen_live_run(&xo, &sink, &col_stop);
		col_batcher_flush(&bt);
#else
	} else {
		rm_log_error("this build has no Xen backend");
		rv = RM_ENOTSUP;
#endif
	}

	frv = col_sender_flush(bt.sender, 5000);
	if (col_hup) {
		col_hup = 0;
		col_reload();
	}
	col_sender_stats(bt.sender, &ss);
	if (frv != RM_OK)
		rm_log_error("aggregator did not acknowledge everything in time: %zu batches kept in '%s'",
			    ss.queued, o.spool);
	rm_log_info("sent %llu parts in %llu batches; %llu acked, %llu duplicates, %llu retries, %llu spooled, %llu lost",
		    (unsigned long long)bt.total_parts, (unsigned long long)bt.total_batches,
		    (unsigned long long)ss.batches_acked, (unsigned long long)ss.duplicates,
		    (unsigned long long)ss.retries, (unsigned long long)ss.spooled,
		    (unsigned long long)ss.lost_batches);
	if (bt.merge) {
		struct col_merge_stats ms;

		col_merge_get_stats(bt.merge, &ms);
		rm_log_info("%llu of those parts went summed in %llu records (the aggregator's rules decide "
			    "them)%s", (unsigned long long)ms.merged, (unsigned long long)ms.records,
			    ms.full ? "; some went as they are: too many sockets at once" : "");
	}
	if (bt.refused_parts)
		rm_log_error("%llu parts from the backend were refused (broke the wire rules)",
			     (unsigned long long)bt.refused_parts);
	col_sender_close(bt.sender);
	/* everything is acknowledged or in the spool: nothing left open for the next instance */
	if (col_rs.on && !bt.err && !ss.lost_batches)
		col_restart_remove(col_rs.path);
	col_merge_close(bt.merge);
	col_enforcer_close(&enf);
	col_batcher_free(&bt);
	if (rv != RM_OK) {
		rm_log_error("backend '%s' failed: %s", o.backend, rm_strerror(rv));
		return 1;
	}
	if (bt.err)
		return 1;
	return ss.queued ? 3 : 0;
}
