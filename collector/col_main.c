/*
 * col_main.c - the rametr-collector program: runs one backend (ebpf,
 * replay, xen, xen-live) into the batcher (col_batcher.h), whose batches
 * the sender delivers to the aggregator or spools. Owns the options, the
 * flush timer (--flush-ms), the ring's drain interval and the shutdown
 * order: stop the backend, emit what it still holds, flush, spool what the
 * aggregator did not acknowledge.
 */
#include <errno.h>
#include <getopt.h>
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
#include "col_sender.h"
#include "col_tc.h"
#include "col_throttle.h"
#include "rm_dur.h"
#include "rm_err.h"
#include "rm_match.h"
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

static volatile sig_atomic_t col_stop;

static void col_on_signal(int sig)
{
	(void)sig;
	col_stop = 1;
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
	const char *tls_cert, *tls_ca, *tls_server_name, *token_file;
	uint64_t window_ns, duration_ns, xen_khz;
	int follow_wakeups, follow_replies;
	int count_rametr, no_merge;
	uint32_t ring_bytes;
	uint32_t exclude[16];
	size_t n_exclude;
	size_t mem_limit;
	int flush_ms;
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

static void col_usage(FILE *f)
{
	fprintf(f,
		"usage: rametr-collector --aggregator URL --node NAME [options]\n"
		"\n"
		"Cuts threads' lives into segments (recv .. next send) and streams them to\n"
		"the aggregator.\n"
		"  --aggregator URL   tcp://HOST:PORT, tls+tcp://HOST:PORT or ipc:///PATH of\n"
		"                     rametr-aggregator\n"
		"  --tls-cert FILE    tls+tcp://: PEM file with this node's certificate and key\n"
		"  --tls-ca FILE      tls+tcp://: PEM file of the cluster CA\n"
		"  --tls-server-name NAME\n"
		"                     tls+tcp://: the name in the aggregator's certificate\n"
		"                     (default: the URL's host)\n"
		"  --token-file FILE  this node's enrolment token (scripts/cert.sh issue)\n"
		"  --node NAME        this node's id (unique in the cluster)\n"
		"  --backend B        ebpf (default), replay, xen (trace file), xen-live\n"
		"  --events FILE      replay: recorded event stream (format: collector/col_events.h)\n"
		"  --xen-trace FILE   xen: xentrace binary file\n"
		"  --xen-cpu-khz N    xen: TSC frequency of the traced host\n"
		"  --netns NAME       ebpf: account only the threads of network namespace NAME\n"
		"                     (/var/run/netns/NAME, or a path): one collector per namespace \"host\"\n"
		"  --follow-wakeups   ebpf: a thread woken through a futex by a thread in a segment\n"
		"                     inherits that segment until its next recv (thread-pool hand-offs)\n"
		"  --follow-replies   ebpf, replay: a thread's work after a send is charged to the request\n"
		"                     its next reply answers (thread pools that take queued requests\n"
		"                     without being woken)\n"
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
		"  -v, --verbose\n"
		"Exit status: 0 when everything was acknowledged; 3 when batches were left\n"
		"unacknowledged (kept in the spool); 1 on other errors; 2 on bad usage.\n");
}


static int col_run_ebpf(const struct col_opts *o, struct col_batcher *bt, const struct col_sink *sink,
			int64_t offset)
{
	struct col_bpf_cfg cfg = { .window_ns = o->window_ns, .offset_ns = offset, .self_tgid = (uint32_t)getpid(),
				   .follow_wakeups = o->follow_wakeups, .follow_replies = o->follow_replies,
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
	col_bpf_close(b);
	return rv;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "aggregator", required_argument, NULL, 'a' },
		{ "node", required_argument, NULL, 'n' },
		{ "backend", required_argument, NULL, 'b' },
		{ "events", required_argument, NULL, 'e' },
		{ "xen-trace", required_argument, NULL, 'x' },
		{ "xen-cpu-khz", required_argument, NULL, 'k' },
		{ "window", required_argument, NULL, 'w' },
		{ "netns", required_argument, NULL, 'N' },
		{ "follow-wakeups", no_argument, NULL, 'W' },
		{ "follow-replies", no_argument, NULL, 'F' },
		{ "exclude-pid", required_argument, NULL, 'X' },
		{ "count-rametr", no_argument, NULL, 'R' },
		{ "no-merge", no_argument, NULL, 'M' },
		{ "ring-bytes", required_argument, NULL, 'r' },
		{ "spool", required_argument, NULL, 's' },
		{ "mem-limit", required_argument, NULL, 'm' },
		{ "flush-ms", required_argument, NULL, 'f' },
		{ "batch-parts", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },
		{ "throttle", required_argument, NULL, 'T' },
		{ "tls-cert", required_argument, NULL, 'C' },
		{ "tls-ca", required_argument, NULL, 'A' },
		{ "tls-server-name", required_argument, NULL, 'S' },
		{ "token-file", required_argument, NULL, 'K' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct col_opts o = { .backend = "ebpf", .flush_ms = 250 };
	struct col_batcher bt = { .batch_parts = COL_BATCH_PARTS };
	struct col_sink sink = { &bt, col_batcher_part, col_batcher_window };
	struct col_sender_cfg scfg;
	struct col_sender_stats ss;
	struct col_enforcer enf = { 0 };
	struct sigaction sa;
	char host[256] = "", spool[512], token[256];
	int64_t offset = col_clock_offset_ns();
	int c, rv, frv;

	rm_log_init("rametr-collector");
	while ((c = getopt_long(argc, argv, "vh", lopts, NULL)) != -1) {
		switch (c) {
		case 'a': o.url = optarg; break;
		case 'n': o.node = optarg; break;
		case 'b': o.backend = optarg; break;
		case 'e': o.events = optarg; break;
		case 'x': o.xen_trace = optarg; break;
		case 'k': o.xen_khz = strtoull(optarg, NULL, 10); break;
		case 's': o.spool = optarg; break;
		case 'N': o.netns = optarg; break;
		case 'W': o.follow_wakeups = 1; break;
		case 'F': o.follow_replies = 1; break;
		case 'R': o.count_rametr = 1; break;
		case 'M': o.no_merge = 1; break;
		case 'r': {
			char *end;
			unsigned long long v = strtoull(optarg, &end, 10);

			if (*end || v < 4096 || v > (1ULL << 30) || (v & (v - 1))) {
				rm_log_error("invalid --ring-bytes '%s' (a power of 2, 4096 .. 1073741824)", optarg);
				return 2;
			}
			o.ring_bytes = (uint32_t)v;
			break;
		}
		case 'X': {
			char *end;
			unsigned long pid = strtoul(optarg, &end, 10);

			if (*end || pid == 0 || pid > UINT32_MAX || o.n_exclude == 16) {
				rm_log_error("invalid --exclude-pid '%s' (a pid; at most 16)", optarg);
				return 2;
			}
			o.exclude[o.n_exclude++] = (uint32_t)pid;
			break;
		}
		case 'm': o.mem_limit = strtoull(optarg, NULL, 10); break;
		case 'f': o.flush_ms = atoi(optarg); break;
		case 'p':
			bt.batch_parts = strtoul(optarg, NULL, 10);
			if (bt.batch_parts == 0 || bt.batch_parts > 1000000) {
				rm_log_error("invalid --batch-parts '%s' (1 .. 1000000)", optarg);
				return 2;
			}
			break;
		case 'w':
			if (!(o.window_ns = col_parse_dur_ns(optarg))) {
				rm_log_error("invalid --window '%s'", optarg);
				return 2;
			}
			break;
		case 'd':
			if (!(o.duration_ns = col_parse_dur_ns(optarg))) {
				rm_log_error("invalid --duration '%s'", optarg);
				return 2;
			}
			break;
		case 'T': o.throttle = optarg; break;
		case 'C': o.tls_cert = optarg; break;
		case 'A': o.tls_ca = optarg; break;
		case 'S': o.tls_server_name = optarg; break;
		case 'K': o.token_file = optarg; break;
		case 'v': rm_log_set_verbose(1); break;
		case 'h': col_usage(stdout); return 0;
		default: col_usage(stderr); return 2;
		}
	}
	if (!o.url || !o.node || optind != argc || o.flush_ms <= 0) {
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
	if (strcmp(o.backend, "ebpf") && strcmp(o.backend, "replay") && strcmp(o.backend, "xen") &&
	    strcmp(o.backend, "xen-live")) {
		rm_log_error("unknown backend '%s' (ebpf, replay, xen, xen-live)", o.backend);
		return 2;
	}
	if (!o.window_ns)
		o.window_ns = !strncmp(o.backend, "xen", 3) ? 100000000ULL : 1000000000ULL;
	if (!o.spool) {
		snprintf(spool, sizeof(spool), "/var/lib/rametr/spool-%s", o.node);
		o.spool = spool;
	}
	gethostname(host, sizeof(host) - 1);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = col_on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

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
	scfg.on_command = col_on_command;
	scfg.cmd_arg = &enf;
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
