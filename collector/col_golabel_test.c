/*
 * col_golabel_test.c - col_golabel on real hooks and a real gRPC server
 * (testbed/go's tb-grpcserver, three tb-grpcload tenants from 127.0.0.2, .3
 * and .4 calling Light, Medium and Heavy): most samples are on labelled
 * goroutines, each tenant's connection (its server-side socket's cookie,
 * read from ss -e while it is open) has samples and the heavy tenant more
 * than the light one (also on a copy of the server stripped of symbols and
 * DWARF, as distributions ship Go programs); behind a gateway calling the
 * server over one connection shared by all tenants, the calls carry their
 * callers' labels; each window is handed once and deleted; the creation
 * uprobe is attached once per executable and detached when its last process
 * is forgotten, after which the process is not counted; a receive outside
 * the watched network namespace labels nothing; Go builds it cannot read and
 * frequencies out of range are refused; close leaves no program loaded. Needs root (skips without it)
 * and the Go testbed (skips without golang).
 */
#include <bpf/bpf.h>
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <bpf/bpf.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "col_golabel.h"
#include "rm_err.h"
#include "rm_test.h"
#include "banned.h"

#define WINDOW_NS 250000000ULL
#define MAX_KEYS 256
#define TENANTS 3

/* What the drain callback saw: totals per (pid, cookie), windows in order. */
static struct {
	struct col_golabel_count tot[MAX_KEYS];
	size_t n;
	uint64_t last_win; /* the last window handed + 1 (0: none yet) */
	unsigned calls, out_of_order, empty, bad_period;
	/* from window settle_win on (0: not yet known): all samples and those of unlabelled goroutines */
	uint64_t settle_win, after_all, after_zero;
	uint64_t max_zero; /* the most unlabelled samples one window had before settle_win was known */
} seen;

static void seen_reset(void)
{
	memset(&seen, 0, sizeof(seen));
}

static void sink(void *arg, uint64_t win, const struct col_golabel_count *c, size_t n, uint64_t period_ns)
{
	size_t i, k;

	(void)arg;
	seen.calls++;
	if (seen.last_win && win < seen.last_win)
		seen.out_of_order++; /* handed twice, or out of order */
	seen.last_win = win + 1;
	if (n == 0)
		seen.empty++;
	if (period_ns != (1000000000ULL + COL_GOLABEL_FREQ_DEFAULT / 2) / COL_GOLABEL_FREQ_DEFAULT)
		seen.bad_period++;
	if (!seen.settle_win) {
		uint64_t zero = 0;

		for (i = 0; i < n; i++)
			zero += c[i].cookie ? 0 : c[i].samples;
		if (zero > seen.max_zero)
			seen.max_zero = zero;
	}
	for (i = 0; i < n; i++) {
		if (seen.settle_win && win >= seen.settle_win) {
			seen.after_all += c[i].samples;
			seen.after_zero += c[i].cookie ? 0 : c[i].samples;
		}
		for (k = 0; k < seen.n; k++)
			if (seen.tot[k].pid == c[i].pid && seen.tot[k].cookie == c[i].cookie)
				break;
		if (k == seen.n) {
			if (seen.n == MAX_KEYS)
				continue;
			seen.tot[seen.n] = c[i];
			seen.tot[seen.n++].samples = 0;
		}
		seen.tot[k].samples += c[i].samples;
	}
}

static uint64_t seen_samples(uint32_t pid, uint64_t cookie)
{
	size_t k;

	for (k = 0; k < seen.n; k++)
		if (seen.tot[k].pid == pid && seen.tot[k].cookie == cookie)
			return seen.tot[k].samples;
	return 0;
}

/* pid's samples: all, and those on labelled goroutines (a cookie, neither 0 nor idle). */
static void seen_pid(uint32_t pid, uint64_t *all, uint64_t *labelled, unsigned *nlabels)
{
	size_t k;

	*all = *labelled = 0;
	*nlabels = 0;
	for (k = 0; k < seen.n; k++) {
		if (seen.tot[k].pid != pid)
			continue;
		*all += seen.tot[k].samples;
		if (seen.tot[k].cookie != 0 && seen.tot[k].cookie != COL_GOLABEL_IDLE) {
			*labelled += seen.tot[k].samples;
			(*nlabels)++;
		}
	}
}

static void need_go(void)
{
	if (access(TB_GRPCSERVER_BIN, X_OK) != 0 || access(TB_GRPCLOAD_BIN, X_OK) != 0)
		RM_TEST_SKIP("tb-grpcserver is not built (needs golang-go and grpc-go)");
}

static int open_golabel_mode(struct col_golabel **g, uint32_t netns_ino, int per_thread)
{
	struct col_golabel_cfg cfg = { .window_ns = WINDOW_NS, .netns_ino = netns_ino, .per_thread = per_thread };

	return col_golabel_open(g, &cfg);
}

/* The same with the creation uprobe attached when an executable is watched. */
static int open_golabel_from_start(struct col_golabel **g)
{
	struct col_golabel_cfg cfg = { .window_ns = WINDOW_NS, .creations_from_start = 1 };

	return col_golabel_open(g, &cfg);
}

static int open_golabel(struct col_golabel **g, uint32_t netns_ino)
{
	return open_golabel_mode(g, netns_ino, 0);
}

/* The threads of process pid now (entries of /proc/PID/task). */
static unsigned count_threads(pid_t pid)
{
	char path[64];
	struct dirent *de;
	unsigned n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(d = opendir(path)))
		return 0;
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* col_progstat_fn: the sampler program's runs into *arg. */
static void sampler_runs(void *arg, const char *name, uint32_t id, uint64_t runs, uint64_t run_ns)
{
	(void)id;
	(void)run_ns;
	if (!strcmp(name, "golabel_sample"))
		*(uint64_t *)arg = runs;
}

/* A process spinning on the CPU until killed: its pid. */
static pid_t start_spinner(void)
{
	pid_t pid = fork();

	if (pid == 0)
		for (;;)
			;
	return pid;
}

/* Does open's rv mean this host cannot run the test (no privilege) rather than a failure? */
static int cannot(int rv)
{
	return rv == RM_EPERM || (rv == RM_EBPF && geteuid() != 0);
}

static int can_connect(unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* tb-grpcserver (or the copy of it at bin) on 127.0.0.1:port (a free one), listening: its pid. */
static pid_t start_server_bin(const char *bin, unsigned *port, char *addr, size_t len)
{
	static char log[400], truth[400];
	const char *args[] = { bin, "--listen", addr, "--truth", truth, NULL };
	pid_t pid;
	int i;

	*port = rm_test_free_port();
	CU_ASSERT_FATAL(*port != 0);
	snprintf(addr, len, "127.0.0.1:%u", *port);
	snprintf(log, sizeof(log), "%s/grpcserver.log", rm_test_tmpdir());
	snprintf(truth, sizeof(truth), "%s/grpc-truth.csv", rm_test_tmpdir());
	CU_ASSERT_FATAL((pid = rm_test_spawn(args, log)) > 0);
	for (i = 0; i < 100 && !can_connect(*port); i++)
		usleep(20000);
	CU_ASSERT_FATAL(i < 100); /* tb-grpcserver listens (its output: grpcserver.log) */
	return pid;
}

static pid_t start_server(unsigned *port, char *addr, size_t len)
{
	return start_server_bin(TB_GRPCSERVER_BIN, port, addr, len);
}

/*
 * A copy of tb-grpcserver at path (name in the test's directory) stripped of
 * symbols and DWARF; with other_go, naming a Go version whose layout is not
 * known (rm_test_strip_go).
 */
static void copy_server(char *path, size_t len, const char *name, int other_go)
{
	snprintf(path, len, "%s/%s", rm_test_tmpdir(), name);
	CU_ASSERT_EQUAL_FATAL(rm_test_strip_go(TB_GRPCSERVER_BIN, path, other_go), 0);
}

static void stop(pid_t pid)
{
	kill(pid, SIGTERM);
	CU_ASSERT_EQUAL(rm_test_wait(pid, 10000), 0);
}

/*
 * Opens the module (netns_ino as open_golabel's) into *g and watches srv, a
 * tb-grpcserver, with seen reset. Returns 0, or the error that makes labels
 * unavailable here (srv stopped: the caller skips).
 */
static int watch_server(struct col_golabel **g, pid_t srv, uint32_t netns_ino)
{
	int rv;

	if (cannot(rv = open_golabel(g, netns_ino))) {
		stop(srv);
		return rv;
	}
	CU_ASSERT_EQUAL_FATAL(rv, RM_OK);
	seen_reset();
	CU_ASSERT_EQUAL_FATAL(col_golabel_watch(*g, (uint32_t)srv, TB_GRPCSERVER_BIN), RM_OK);
	return 0;
}

/* tb-grpcload from bind calling method at 20 calls a second for secs seconds. */
static pid_t start_load(const char *addr, const char *bind, const char *ce, const char *method, const char *secs)
{
	static char log[400];
	const char *args[] = { TB_GRPCLOAD_BIN, "--server", addr, "--bind", bind, "--ce", ce, "--method", method,
			       "--rate", "20", "--burst", "2", "--duration", secs, NULL };

	snprintf(log, sizeof(log), "%s/grpcload.log", rm_test_tmpdir());
	return rm_test_spawn(args, log);
}

/*
 * The cookie of the server's connection from peer (an address), read from
 * ss -e ("sk:" is the socket's cookie as inet_diag reports it): 1, or 0 if
 * it has none open.
 */
static int conn_cookie(unsigned port, const char *peer, uint64_t *cookie)
{
	char cmd[200], line[1024], want[64];
	int found = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "ss -tnHe state established '( sport = :%u )' 2>/dev/null", port);
	snprintf(want, sizeof(want), " %s:", peer);
	if (!(f = popen(cmd, "r")))
		return 0;
	while (fgets(line, sizeof(line), f)) {
		const char *sk = strstr(line, " sk:");

		if (strstr(line, want) && sk && sscanf(sk + 4, "%" SCNx64, cookie) == 1)
			found = 1;
	}
	pclose(f);
	return found;
}

/* Programs loaded now named name (their ids in ids[], at most max): how many. */
static int progs_named(const char *name, uint32_t *ids, int max)
{
	__u32 id = 0;
	int n = 0;

	while (bpf_prog_get_next_id(id, &id) == 0) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		int fd = bpf_prog_get_fd_by_id(id);

		if (fd < 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && !strcmp(info.name, name) && n < max)
			ids[n++] = id;
		close(fd);
	}
	return n;
}

/* Links now attached running program prog_id. */
static int links_of(uint32_t prog_id)
{
	__u32 id = 0;
	int n = 0;

	while (bpf_link_get_next_id(id, &id) == 0) {
		struct bpf_link_info info;
		__u32 len = sizeof(info);
		int fd = bpf_link_get_fd_by_id(id);

		if (fd < 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.prog_id == prog_id)
			n++;
		close(fd);
	}
	return n;
}

/* The id of this handle's creation program (the one golabel_newg loaded): 0 if not exactly one. */
static uint32_t newg_prog(void)
{
	uint32_t ids[4];

	return progs_named("golabel_newg", ids, 4) == 1 ? ids[0] : 0;
}

/* Drains every window that ended (waits for the current one to end first). */
static void drain_ended(struct col_golabel *g)
{
	usleep((useconds_t)(WINDOW_NS / 1000) + 20000);
	CU_ASSERT_EQUAL(col_golabel_drain(g, col_golabel_window(g), sink, NULL), RM_OK);
}

/*
 * One step while the tenants' loads run: follows new threads, drains the
 * windows that ended, waits 100 ms and reaps the loads that exited (each
 * must have had every call answered; its slot is zeroed). How many still run.
 */
static unsigned tick_loads(struct col_golabel *g, pid_t load[TENANTS])
{
	unsigned i, running = 0;
	int status;

	struct col_golabel_stats st;

	col_golabel_follow(g);
	CU_ASSERT_EQUAL(col_golabel_drain(g, col_golabel_window(g), sink, NULL), RM_OK);
	/* the windows after the one the creation uprobe was attached in */
	col_golabel_stats(g, &st);
	if (st.creation_exes && !seen.settle_win)
		seen.settle_win = col_golabel_window(g) + 1;
	usleep(100000);
	for (i = 0; i < TENANTS; i++) {
		if (!load[i])
			continue;
		if (waitpid(load[i], &status, WNOHANG) == 0) {
			running++;
			continue;
		}
		CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* every call answered */
		rm_test_forget(load[i]);
		load[i] = 0;
	}
	return running;
}

/*
 * The three tenants' scenario with the sampler per CPU or per thread
 * (per_thread), while a process the module does not watch spins beside:
 * per CPU, the sampler also runs on the spinner (its runs outnumber the
 * samples it counts); per thread, it runs on the watched threads only
 * (runs = samples), each thread of the server has one and none is left
 * after forget.
 */
static void tenants(int per_thread, int stripped)
{
	static const char *peers[TENANTS] = { "127.0.0.2", "127.0.0.3", "127.0.0.4" };
	static const char *methods[TENANTS] = { "Light", "Medium", "Heavy" };
	static const char *ces[TENANTS] = { "c1", "c2", "c3" };
	uint64_t cookie[TENANTS] = { 0 }, all = 0, lab = 0, before;
	struct col_golabel_stats st, st2;
	struct col_golabel *g = NULL;
	unsigned port, nlab, calls, i, have = 0;
	pid_t srv, load[TENANTS];
	uint32_t newg;
	uint64_t runs = 0;
	char addr[64];
	int rv, stats_fd;
	pid_t spin;

	char bin[300];

	need_go();
	snprintf(bin, sizeof(bin), "%s", TB_GRPCSERVER_BIN);
	if (stripped) /* as Debian ships Go programs: no symbols, no DWARF */
		copy_server(bin, sizeof(bin), "grpcsrv-stripped", 0);
	srv = start_server_bin(bin, &port, addr, sizeof(addr));
	if (cannot(rv = open_golabel_mode(&g, 0, per_thread))) {
		stop(srv);
		RM_TEST_SKIP("goroutine labels unavailable: %s", rm_strerror(rv));
	}
	CU_ASSERT_EQUAL_FATAL(rv, RM_OK);
	seen_reset();
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME); /* the programs' run counts, while it is open */
	CU_ASSERT_FATAL(stats_fd >= 0);
	CU_ASSERT_FATAL((spin = start_spinner()) > 0);
	CU_ASSERT_EQUAL_FATAL(col_golabel_watch(g, (uint32_t)srv, bin), RM_OK);
	CU_ASSERT_EQUAL(col_golabel_watch(g, (uint32_t)srv, bin), RM_OK); /* again: no change */
	col_golabel_stats(g, &st);
	if (per_thread) {
		CU_ASSERT(st.threads >= 2 && st.threads == count_threads(srv)); /* every thread of the server */
	} else {
		CU_ASSERT_EQUAL(st.threads, 0);
	}
	newg = newg_prog();
	CU_ASSERT_FATAL(newg != 0);
	CU_ASSERT_EQUAL(links_of(newg), 0); /* not before a window's samples ask for it */
	CU_ASSERT_EQUAL(st.creation_exes, 0);
	for (i = 0; i < TENANTS; i++)
		CU_ASSERT_FATAL((load[i] = start_load(addr, peers[i], ces[i], methods[i], "2.5")) > 0);
	/* while the loads run: the connections' cookies, and windows drained as they end */
	do {
		for (i = 0; i < TENANTS; i++)
			if (!(have & (1u << i)) && conn_cookie(port, peers[i], &cookie[i]))
				have |= 1u << i;
	} while (tick_loads(g, load));
	drain_ended(g);
	CU_ASSERT_EQUAL(have, (1u << TENANTS) - 1); /* every tenant's connection was seen open */
	/* drained windows are gone: the same drain again hands nothing */
	calls = seen.calls;
	before = col_golabel_window(g);
	CU_ASSERT_EQUAL(col_golabel_drain(g, seen.last_win, sink, NULL), RM_OK);
	CU_ASSERT_EQUAL(seen.calls, calls);
	CU_ASSERT(seen.last_win <= before + 1);
	CU_ASSERT_EQUAL(seen.out_of_order, 0);
	CU_ASSERT_EQUAL(seen.empty, 0);
	CU_ASSERT_EQUAL(seen.bad_period, 0);
	CU_ASSERT(seen.calls >= 4); /* 2.5 s of load in 250 ms windows, drained as they ended */

	seen_pid((uint32_t)srv, &all, &lab, &nlab);
	/* the runs first: a sample of the (idle) server between the two reads counts in st alone */
	CU_ASSERT(col_golabel_prog_stats(g, sampler_runs, &runs) > 0);
	col_golabel_stats(g, &st);
	kill(spin, SIGKILL);
	CU_ASSERT(rm_test_wait(spin, 5000) != 0); /* killed */
	fprintf(stderr, "sampler per %s: %" PRIu64 " runs for %" PRIu64 " samples of the watched process, %" PRIu64
		" threads sampled\n", per_thread ? "thread" : "CPU", runs, st.samples, st.threads);
	if (per_thread) {
		CU_ASSERT(runs <= st.samples && st.samples - runs <= 2); /* it ticks on the watched threads only */
		CU_ASSERT(st.threads >= 2);
	} else {
		CU_ASSERT(runs > st.samples + st.samples / 2); /* the spinner and idle CPUs tick too */
	}
	fprintf(stderr, "server samples %" PRIu64 ", labelled %" PRIu64 " (%.1f%%) on %u labels; light %" PRIu64
		", medium %" PRIu64 ", heavy %" PRIu64 ", unlabelled %" PRIu64 ", idle %" PRIu64 "; reads %" PRIu64
		", new goroutines %" PRIu64 " (%" PRIu64 " inherited), lost %" PRIu64 ", unread %" PRIu64 "\n",
		all, lab, all ? 100.0 * (double)lab / (double)all : 0.0, nlab, seen_samples((uint32_t)srv, cookie[0]),
		seen_samples((uint32_t)srv, cookie[1]), seen_samples((uint32_t)srv, cookie[2]),
		seen_samples((uint32_t)srv, 0), seen_samples((uint32_t)srv, COL_GOLABEL_IDLE), st.reads, st.newg,
		st.inherit, st.lost, st.unread);
	CU_ASSERT(all >= 100);
	/* most of the server's CPU is on labelled goroutines (the calls of the windows before the creation
	 * uprobe was attached are not: checked from then on below) */
	CU_ASSERT(lab * 100 >= all * 60);
	CU_ASSERT(nlab >= TENANTS);
	for (i = 0; i < TENANTS; i++)
		CU_ASSERT(cookie[i] != 0 && seen_samples((uint32_t)srv, cookie[i]) > 0);
	CU_ASSERT(seen_samples((uint32_t)srv, cookie[2]) > seen_samples((uint32_t)srv, cookie[0]));
	CU_ASSERT(st.reads > 0 && st.newg > 0 && st.inherit > 0);
	/* a goroutine per call, unlabelled in the first window: the creation uprobe is attached (once) */
	CU_ASSERT_EQUAL(st.creation_exes, 1);
	CU_ASSERT_EQUAL(links_of(newg), 1);
	/* the connections' writer goroutines, made before that, took their labels from their sends */
	CU_ASSERT(st.sent > 0);
	/* from the next window on its user goroutines carry their connections' labels: hand-offs are
	 * not followed (no uprobe trap) */
	fprintf(stderr, "from window %" PRIu64 " on: %" PRIu64 " samples, %" PRIu64 " unlabelled\n", seen.settle_win,
		seen.after_all, seen.after_zero);
	CU_ASSERT(seen.settle_win != 0 && seen.after_all >= 100);
	CU_ASSERT(seen.after_zero * 20 < seen.after_all);
	CU_ASSERT_EQUAL(st.handoff_exes, 0);
	CU_ASSERT(st.samples >= all);
	CU_ASSERT_EQUAL(col_golabel_lost(g), 0);
	for (i = 0; i < seen.n; i++)
		CU_ASSERT_EQUAL(seen.tot[i].pid, (uint32_t)srv); /* only the watched process */

	/* forgotten: the uprobe goes with its last process, and its threads are no longer sampled */
	col_golabel_forget(g, (uint32_t)srv);
	CU_ASSERT_EQUAL(links_of(newg), 0);
	col_golabel_stats(g, &st);
	CU_ASSERT_EQUAL(st.threads, 0);
	drain_ended(g);
	seen_reset();
	CU_ASSERT_FATAL((load[0] = start_load(addr, peers[2], ces[2], methods[2], "1")) > 0);
	CU_ASSERT_EQUAL(rm_test_wait(load[0], 20000), 0);
	drain_ended(g);
	col_golabel_stats(g, &st2);
	CU_ASSERT_EQUAL(seen_samples((uint32_t)srv, COL_GOLABEL_IDLE) + seen_samples((uint32_t)srv, 0), 0);
	seen_pid((uint32_t)srv, &all, &lab, &nlab);
	CU_ASSERT_EQUAL(all, 0);
	CU_ASSERT_EQUAL(st2.samples, st.samples);
	CU_ASSERT_EQUAL(st2.reads, st.reads);
	stop(srv);
	col_golabel_close(g);
	close(stats_fd);
}

static void test_tenants(void)
{
	tenants(0, 0);
}

static void test_tenants_per_thread(void)
{
	tenants(1, 0);
}

static void test_tenants_stripped(void)
{
	tenants(0, 1);
}

/*
 * tb-grpcserver as its own gateway (as etcd's JSON gateway): three tenants
 * call its HTTP/1.1 port from 127.0.0.2, .3 and .4 (one keep-alive
 * connection each), and every request becomes a call over one gRPC
 * connection from the server to itself, which all tenants share. The calls'
 * goroutines are started by that connection's reader: labelled by the
 * connection alone, they would all carry its cookie. A receive on a
 * connection within the node takes the label of the goroutine that sent
 * instead, so the calls' burns land on the tenants' own connections: they
 * carry most of the labelled samples, the heavy tenant more than the light
 * one, and the shared connection's two ends few.
 */
static void test_gateway(void)
{
	static const char *peers[TENANTS] = { "127.0.0.2", "127.0.0.3", "127.0.0.4" };
	static const char *paths[TENANTS] = { "/light", "/medium", "/heavy" };
	static const char *ces[TENANTS] = { "c1", "c2", "c3" };
	static char log[400], truth[400], glog[400];
	uint64_t cookie[TENANTS] = { 0 }, all = 0, lab = 0, tenants = 0, self[2] = { 0 };
	struct col_golabel_stats st;
	struct col_golabel *g = NULL;
	unsigned port, gport, nlab, i, have = 0;
	char addr[64], gaddr[64], cmd[300], line[1024];
	const char *args[] = { TB_GRPCSERVER_BIN, "--listen", addr, "--gateway", gaddr, "--truth", truth, NULL };
	pid_t srv, load[TENANTS];
	int rv, j;
	FILE *f;

	need_go();
	if (access(TB_GOLOAD_BIN, X_OK) != 0)
		RM_TEST_SKIP("tb-goload is not built (needs golang-go)");
	port = rm_test_free_port();
	gport = rm_test_free_port();
	CU_ASSERT_FATAL(port != 0 && gport != 0 && port != gport);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	snprintf(gaddr, sizeof(gaddr), "127.0.0.1:%u", gport);
	snprintf(log, sizeof(log), "%s/gateway.log", rm_test_tmpdir());
	snprintf(truth, sizeof(truth), "%s/gateway-truth.csv", rm_test_tmpdir());
	CU_ASSERT_FATAL((srv = rm_test_spawn(args, log)) > 0);
	for (j = 0; j < 100 && !(can_connect(port) && can_connect(gport)); j++)
		usleep(20000);
	CU_ASSERT_FATAL(j < 100); /* both ports listen (its output: gateway.log) */
	if ((rv = watch_server(&g, srv, 0)) != 0)
		RM_TEST_SKIP("goroutine labels unavailable: %s", rm_strerror(rv));
	snprintf(glog, sizeof(glog), "%s/gateway-load.log", rm_test_tmpdir());
	for (i = 0; i < TENANTS; i++) {
		const char *largs[] = { TB_GOLOAD_BIN, "--server", gaddr, "--bind", peers[i], "--ce", ces[i], "--path",
					paths[i], "--rate", "40", "--duration", "3", "--conns", "1", NULL };

		CU_ASSERT_FATAL((load[i] = rm_test_spawn(largs, glog)) > 0);
	}
	do {
		for (i = 0; i < TENANTS; i++)
			if (!(have & (1u << i)) && conn_cookie(gport, peers[i], &cookie[i]))
				have |= 1u << i;
		/* the shared connection's two ends: the server's, and the gateway's (its peer is the server's port) */
		snprintf(cmd, sizeof(cmd), "ss -tnHe state established '( sport = :%u or dport = :%u )' 2>/dev/null",
			 port, port);
		if ((f = popen(cmd, "r"))) {
			for (j = 0; j < 2 && fgets(line, sizeof(line), f);) {
				const char *sk = strstr(line, " sk:");
				uint64_t c;

				if (sk && sscanf(sk + 4, "%" SCNx64, &c) == 1 && c != self[0] && c != self[1])
					self[self[0] ? 1 : 0] = c;
				j++;
			}
			pclose(f);
		}
	} while (tick_loads(g, load));
	drain_ended(g);
	CU_ASSERT_EQUAL(have, (1u << TENANTS) - 1);
	CU_ASSERT(self[0] != 0 && self[1] != 0);
	col_golabel_stats(g, &st);
	seen_pid((uint32_t)srv, &all, &lab, &nlab);
	for (i = 0; i < TENANTS; i++)
		tenants += seen_samples((uint32_t)srv, cookie[i]);
	fprintf(stderr, "gateway: server samples %" PRIu64 ", labelled %" PRIu64 "; tenants' connections %" PRIu64
		" (light %" PRIu64 ", medium %" PRIu64 ", heavy %" PRIu64 "), the shared connection's ends %" PRIu64
		" and %" PRIu64 "; receives labelled by their sender %" PRIu64 ", hand-offs %" PRIu64 "\n",
		all, lab, tenants, seen_samples((uint32_t)srv, cookie[0]), seen_samples((uint32_t)srv, cookie[1]),
		seen_samples((uint32_t)srv, cookie[2]), seen_samples((uint32_t)srv, self[0]),
		seen_samples((uint32_t)srv, self[1]), st.origin, st.handed);
	CU_ASSERT(all >= 100);
	CU_ASSERT(st.origin > 0);
	/* the calls' work is the tenants': most labelled samples on their connections, few on the shared one */
	CU_ASSERT(tenants * 100 >= lab * 70);
	CU_ASSERT((seen_samples((uint32_t)srv, self[0]) + seen_samples((uint32_t)srv, self[1])) * 100 <= lab * 15);
	CU_ASSERT(seen_samples((uint32_t)srv, cookie[2]) > seen_samples((uint32_t)srv, cookie[0]));
	stop(srv);
	col_golabel_close(g);
}

/*
 * One tenant's medium calls, 8 a second one at a time: a few samples a
 * 250 ms window, fewer than the 16 unlabelled ones that ask for the
 * creation uprobe, so only the windows' samples together can ask for it,
 * within the load.
 */
static void test_light_load(void)
{
	static char log[400];
	struct col_golabel_stats st;
	struct col_golabel *g = NULL;
	pid_t srv, load[TENANTS] = { 0 };
	unsigned port;
	char addr[64];
	int rv;

	need_go();
	srv = start_server(&port, addr, sizeof(addr));
	if ((rv = watch_server(&g, srv, 0)) != 0)
		RM_TEST_SKIP("goroutine labels unavailable: %s", rm_strerror(rv));
	{
		const char *args[] = { TB_GRPCLOAD_BIN, "--server", addr, "--bind", "127.0.0.3", "--ce", "c2", "--method",
				       "Medium", "--rate", "8", "--burst", "1", "--duration", "4", NULL };

		snprintf(log, sizeof(log), "%s/grpcload-light.log", rm_test_tmpdir());
		CU_ASSERT_FATAL((load[0] = rm_test_spawn(args, log)) > 0);
	}
	while (tick_loads(g, load))
		;
	drain_ended(g);
	col_golabel_stats(g, &st);
	fprintf(stderr, "light load: at most %" PRIu64 " unlabelled samples in one window before the creation uprobe; "
		"from window %" PRIu64 " on %" PRIu64 " samples, %" PRIu64 " unlabelled\n", seen.max_zero, seen.settle_win,
		seen.after_all, seen.after_zero);
	CU_ASSERT(seen.max_zero < 16); /* no window alone would have asked */
	CU_ASSERT_EQUAL(st.creation_exes, 1);
	CU_ASSERT(seen.settle_win != 0 && seen.after_zero * 4 < seen.after_all);
	stop(srv);
	col_golabel_close(g);
}

static void test_netns(void)
{
	struct col_golabel_stats st;
	struct col_golabel *g = NULL;
	uint64_t all = 0, lab = 0;
	unsigned port, nlab;
	struct stat ns;
	char addr[64];
	pid_t srv, load;
	int rv;

	need_go();
	CU_ASSERT_FATAL(stat("/proc/self/ns/net", &ns) == 0);
	srv = start_server(&port, addr, sizeof(addr));
	/* a namespace that is not this one: the server's receives are another host's */
	if ((rv = watch_server(&g, srv, (uint32_t)ns.st_ino + 1)) != 0)
		RM_TEST_SKIP("goroutine labels unavailable: %s", rm_strerror(rv));
	CU_ASSERT_FATAL((load = start_load(addr, "127.0.0.3", "c2", "Heavy", "1")) > 0);
	CU_ASSERT_EQUAL(rm_test_wait(load, 20000), 0);
	drain_ended(g);
	col_golabel_stats(g, &st);
	seen_pid((uint32_t)srv, &all, &lab, &nlab);
	CU_ASSERT_EQUAL(st.reads, 0);
	CU_ASSERT_EQUAL(lab, 0);
	CU_ASSERT(all > 0); /* the sampler still counts the watched process: unlabelled */
	stop(srv);
	col_golabel_close(g);
}

static void test_refused(void)
{
	struct col_golabel *g = NULL;
	char other[300], self[400];
	uint32_t ids[4];
	ssize_t n;
	int rv;

	need_go();
	if (cannot(rv = open_golabel(&g, 0)))
		RM_TEST_SKIP("goroutine labels unavailable: %s", rm_strerror(rv));
	CU_ASSERT_EQUAL_FATAL(rv, RM_OK);
	/* stripped, and built (it says) by a Go whose struct layout is not known */
	copy_server(other, sizeof(other), "grpcsrv-stripped-go0", 1);
	CU_ASSERT_EQUAL(col_golabel_watch(g, (uint32_t)getpid(), other), RM_ENOTSUP);
	CU_ASSERT_FATAL((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) > 0);
	self[n] = '\0';
	CU_ASSERT_EQUAL(col_golabel_watch(g, (uint32_t)getpid(), self), RM_ENOTSUP); /* not Go */
	CU_ASSERT_EQUAL(col_golabel_watch(g, (uint32_t)getpid(), "/nonexistent/gosrv"), RM_EIO);
	CU_ASSERT_EQUAL(col_golabel_watch(g, 0, TB_GRPCSERVER_BIN), RM_EINVAL);
	CU_ASSERT_EQUAL(col_golabel_drain(g, 1, NULL, NULL), RM_EINVAL);
	CU_ASSERT_EQUAL(links_of(newg_prog()), 0); /* nothing attached for them */
	unlink(other);
	CU_ASSERT(progs_named("golabel_sample", ids, 4) == 1);
	col_golabel_close(g);
}

static void test_bad_cfg(void)
{
	struct col_golabel_cfg cfg = { .freq_hz = 5 };
	struct col_golabel *g = (struct col_golabel *)&cfg;

	CU_ASSERT_EQUAL(col_golabel_open(&g, &cfg), RM_EINVAL);
	CU_ASSERT_PTR_NULL(g);
	cfg.freq_hz = 20001;
	CU_ASSERT_EQUAL(col_golabel_open(&g, &cfg), RM_EINVAL);
	CU_ASSERT_EQUAL(col_golabel_open(&g, NULL), RM_EINVAL);
	col_golabel_close(NULL); /* NULL-tolerant */
}

static void test_close(void)
{
	struct col_golabel *g = NULL;
	uint32_t ids[3][4];
	unsigned port;
	char addr[64];
	pid_t srv;
	int i, k, rv, left = 0;

	need_go();
	srv = start_server(&port, addr, sizeof(addr));
	if (cannot(rv = open_golabel_from_start(&g))) {
		stop(srv);
		RM_TEST_SKIP("goroutine labels unavailable: %s", rm_strerror(rv));
	}
	CU_ASSERT_EQUAL_FATAL(rv, RM_OK);
	CU_ASSERT_EQUAL(col_golabel_watch(g, (uint32_t)srv, TB_GRPCSERVER_BIN), RM_OK);
	CU_ASSERT_EQUAL_FATAL(progs_named("golabel_recv", ids[0], 4), 1);
	CU_ASSERT_EQUAL_FATAL(progs_named("golabel_newg", ids[1], 4), 1);
	CU_ASSERT_EQUAL_FATAL(progs_named("golabel_sample", ids[2], 4), 1);
	CU_ASSERT_EQUAL(links_of(ids[0][0]), 1);
	CU_ASSERT_EQUAL(links_of(ids[1][0]), 1);
	CU_ASSERT(links_of(ids[2][0]) >= 1); /* one per online CPU */
	col_golabel_close(g);
	stop(srv);
	/* programs are freed once their last link and descriptor are gone (after an RCU grace period) */
	for (k = 0; k < 50; k++) {
		left = 0;
		for (i = 0; i < 3; i++) {
			int fd = bpf_prog_get_fd_by_id(ids[i][0]);

			if (fd >= 0) {
				left++;
				close(fd);
			}
		}
		if (!left)
			break;
		usleep(20000);
	}
	CU_ASSERT_EQUAL(left, 0);
}

static CU_TestInfo cases[] = {
	{ "three tenants of a gRPC server: labelled samples per connection, drained once, forget", test_tenants },
	{ "the same with the sampler per thread: it ticks on the watched threads only", test_tenants_per_thread },
	{ "the same for a server stripped of symbols and DWARF, as distributions ship Go programs", test_tenants_stripped },
	{ "a gateway calling its own gRPC server over one connection: the calls carry their callers' labels",
	  test_gateway },
	{ "a light load: the windows' samples together ask for the creation uprobe", test_light_load },
	{ "receives outside the watched network namespace label nothing", test_netns },
	{ "Go builds it cannot read, C programs, missing files are refused", test_refused },
	{ "a sampling frequency out of range is refused", test_bad_cfg },
	{ "close detaches every program, the creation uprobe attached from the start among them", test_close },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_golabel", cases)
