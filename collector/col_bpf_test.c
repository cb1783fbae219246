/*
 * col_bpf_test.c - the real BPF programs attached to the running kernel, a
 * real client/server exchange over loopback TCP, and checks of what the
 * segments say: tuples, bytes, TCP ranges, on-CPU time (descheduled time
 * excluded), thread inheritance, disk bytes, and the per-window identity
 * busy = sum(part cpu) + unsegmented + lost.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "rm_test.h"
#include "col_bpf.h"
#include "rm_err.h"

#define MAX_PARTS 200000
#define MAX_WINS 256

/* RM_TEST_CPU_COUNTERS=1 in the environment: every case but the wake-up
 * chains' (which need the context-switch hook) runs with CPU from the
 * threads' counters (col_bpf_cfg.cpu_counters) */
static int cpu_counters;
/* open_windows: goroutine labels (col_bpf_cfg.go_labels) */
static int go_labels;
static struct rm_part *parts;
static size_t nparts;
static struct rm_totals wins[MAX_WINS];
static size_t nwins;

static int t_part(void *arg, const struct rm_part *p)
{
	(void)arg;
	if (nparts < MAX_PARTS)
		parts[nparts++] = *p;
	return RM_OK;
}

static int t_window(void *arg, const struct rm_totals *w)
{
	size_t i, j;

	(void)arg;
	for (i = 0; i < nwins; i++)
		if (wins[i].win == w->win)
			break;
	if (i == nwins) {
		if (nwins == MAX_WINS)
			return RM_OK;
		memset(&wins[nwins], 0, sizeof(wins[0]));
		wins[nwins++].win = w->win;
	}
#define ADD(f) wins[i].f += w->f;
	ADD(busy_ns) ADD(unseg_cpu_ns) ADD(rx_bytes) ADD(tx_bytes) ADD(disk_read) ADD(disk_write)
	ADD(unseg_rx) ADD(unseg_tx) ADD(unseg_disk_read) ADD(unseg_disk_write) ADD(lost_ns)
	ADD(dropped_parts) ADD(dropped_cpu_ns) ADD(dropped_rx) ADD(dropped_tx) ADD(dropped_disk_read)
	ADD(dropped_disk_write) ADD(unseg_rt_ns) ADD(unseg_go_ns)
#undef ADD
	wins[i].capacity_ns += w->capacity_ns;
	for (j = 0; j < w->n_go; j++)
		rm_totals_go_add_seg(&wins[i], w->go[j].cookie, w->go[j].samples, w->go[j].seg);
	wins[i].go_folded += w->go_folded;
	if (w->go_period_ns)
		wins[i].go_period_ns = w->go_period_ns;
	return RM_OK;
}

static const struct col_sink sink = { NULL, t_part, t_window };

/* Drains what the kernel still holds into parts and wins, then closes b. */
static void drain_close(struct col_bpf *b)
{
	int i;

	for (i = 0; i < 5; i++)
		CU_ASSERT_EQUAL(col_bpf_poll(b, &sink, 100), RM_OK);
	CU_ASSERT_EQUAL(col_bpf_finish(b, &sink), RM_OK);
	col_bpf_close(b);
}

/* The last segment (not a continuation) thread tid began with a request on local port port, or NULL. */
static const struct rm_part *last_request(pid_t tid, int port)
{
	const struct rm_part *req = NULL;
	size_t i;

	for (i = 0; i < nparts; i++)
		if (parts[i].tid == (uint32_t)tid && (parts[i].flags & RM_PF_START) && !(parts[i].flags & RM_PF_CONT) &&
		    parts[i].in.lport == (uint32_t)port && (!req || parts[i].start_ns > req->start_ns))
			req = &parts[i];
	return req;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static volatile uint64_t sink_hole;

static void burn_ms(unsigned ms)
{
	uint64_t end = thread_cpu_ns() + (uint64_t)ms * 1000000ULL, x = 1;

	while (thread_cpu_ns() < end) {
		int i;

		for (i = 0; i < 1000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	}
	sink_hole = x;
}

struct server {
	int lfd;
	uint16_t port;
	pid_t tid;
	pid_t child_tid;
	uint16_t client_port;
	int disk_ok;
	char dir[256];
};

static void *child_main(void *arg)
{
	struct server *s = arg;

	s->child_tid = (pid_t)syscall(SYS_gettid);
	burn_ms(15);
	return NULL;
}

static void *server_main(void *arg)
{
	struct server *s = arg;
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);
	char req[100], resp[1000];
	size_t got = 0;
	pthread_t child;
	int fd;

	s->tid = (pid_t)syscall(SYS_gettid);
	fd = accept(s->lfd, (struct sockaddr *)&peer, &plen);
	if (fd < 0)
		return NULL;
	s->client_port = ntohs(peer.sin_port);
	/* the request arrives in two reads: one segment, contiguous range */
	while (got < sizeof(req)) {
		ssize_t n = recv(fd, req + got, got == 0 ? 40 : sizeof(req) - got, 0);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	burn_ms(30);
	usleep(60000); /* descheduled: must not count */
	pthread_create(&child, NULL, child_main, s);
	pthread_join(child, NULL);
	{
		/* O_DIRECT write: block_rq_issue in this thread's context */
		char path[300];
		void *buf;
		int dfd;

		snprintf(path, sizeof(path), "%s/direct.bin", s->dir);
		dfd = open(path, O_CREAT | O_WRONLY | O_DIRECT | O_TRUNC, 0600);
		if (dfd >= 0 && posix_memalign(&buf, 4096, 65536) == 0) {
			memset(buf, 7, 65536);
			s->disk_ok = write(dfd, buf, 65536) == 65536 && fsync(dfd) == 0;
			free(buf);
		}
		if (dfd >= 0)
			close(dfd);
	}
	memset(resp, 'r', sizeof(resp));
	if (send(fd, resp, sizeof(resp), 0) != (ssize_t)sizeof(resp))
		s->port = 0;
	close(fd);
	return NULL;
}

/* Opens *b with windows of window_ns, wall-clock aligned; the backend's status. */
/*
 * CLOCK_REALTIME - CLOCK_MONOTONIC, as the collector's windows are aligned:
 * a window of an hour without it would be window 0 (no window) on a machine
 * up for less than an hour.
 */
static int64_t wall_offset_ns(void)
{
	struct timespec rt, mono;

	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	return ((int64_t)rt.tv_sec - mono.tv_sec) * 1000000000LL + (rt.tv_nsec - mono.tv_nsec);
}

static int open_windows(struct col_bpf **b, uint64_t window_ns)
{
	struct col_bpf_cfg cfg = { .window_ns = window_ns, .offset_ns = wall_offset_ns(), .self_tgid = 0,
				   .cpu_counters = cpu_counters, .go_labels = go_labels };

	return col_bpf_open(b, &cfg);
}

static int open_or_skip(struct col_bpf **b)
{
	return open_windows(b, 1000000000ULL);
}

static const struct rm_part *find_part(pid_t tid, uint32_t flag)
{
	size_t i;

	for (i = 0; i < nparts; i++)
		if (parts[i].tid == (uint32_t)tid && (parts[i].flags & flag))
			return &parts[i];
	return NULL;
}

static uint64_t seg_sum(uint64_t seg_id, pid_t tid, int field)
{
	uint64_t s = 0;
	size_t i;

	for (i = 0; i < nparts; i++) {
		if (parts[i].seg_id != seg_id || parts[i].tid != (uint32_t)tid)
			continue;
		switch (field) {
		case 0: s += parts[i].cpu_ns; break;
		case 1: s += parts[i].rx_bytes; break;
		case 2: s += parts[i].tx_bytes; break;
		case 3: s += parts[i].disk_write; break;
		case 4: s += parts[i].runq_ns; break;
		}
	}
	return s;
}

static void test_exchange(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	struct server s = { 0 };
	const struct rm_part *start, *end, *child;
	struct col_bpf *b = NULL;
	char req[100], resp[1000];
	size_t got = 0, i;
	pthread_t th;
	uint64_t cpu;
	int cfd, rv;

	if ((rv = open_or_skip(&b)) != RM_OK)
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	snprintf(s.dir, sizeof(s.dir), "%s", rm_test_tmpdir());
	s.lfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(bind(s.lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CU_ASSERT_FATAL(listen(s.lfd, 4) == 0);
	CU_ASSERT_FATAL(getsockname(s.lfd, (struct sockaddr *)&a, &alen) == 0);
	s.port = ntohs(a.sin_port);
	pthread_create(&th, NULL, server_main, &s);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(connect(cfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	memset(req, 'q', sizeof(req));
	CU_ASSERT_FATAL(send(cfd, req, 40, 0) == 40);
	usleep(20000);
	CU_ASSERT_FATAL(send(cfd, req + 40, 60, 0) == 60);
	while (got < sizeof(resp)) {
		ssize_t n = recv(cfd, resp + got, sizeof(resp) - got, 0);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	pthread_join(th, NULL);
	close(cfd);
	close(s.lfd);
	CU_ASSERT_EQUAL(got, sizeof(resp));
	for (i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(col_bpf_poll(b, &sink, 100), RM_OK);
	CU_ASSERT_EQUAL(col_bpf_finish(b, &sink), RM_OK);
	col_bpf_close(b);

	start = find_part(s.tid, RM_PF_START);
	end = find_part(s.tid, RM_PF_END);
	CU_ASSERT_PTR_NOT_NULL_FATAL(start);
	CU_ASSERT_PTR_NOT_NULL_FATAL(end);
	CU_ASSERT_EQUAL(start->seg_id, end->seg_id);
	/* inbound tuple: the server's side of the connection */
	CU_ASSERT_EQUAL(start->in.family, RM_AF_INET);
	CU_ASSERT_EQUAL(start->in.lport, s.port);
	CU_ASSERT_EQUAL(start->in.rport, s.client_port);
	CU_ASSERT_EQUAL(start->in.laddr[0], htonl(INADDR_LOOPBACK));
	CU_ASSERT_EQUAL(start->in.raddr[0], htonl(INADDR_LOOPBACK));
	CU_ASSERT_EQUAL(end->out.cookie, start->in.cookie);
	/* bytes: both reads in one segment, one contiguous TCP range */
	CU_ASSERT_EQUAL(seg_sum(start->seg_id, s.tid, 1), 100);
	CU_ASSERT_EQUAL(seg_sum(start->seg_id, s.tid, 2), 1000);
	CU_ASSERT(end->flags & RM_PF_IN_SEQ);
	CU_ASSERT_EQUAL(end->in_seq_end - end->in_seq_start, 100);
	CU_ASSERT_FALSE(end->flags & RM_PF_SEQ_SUSPECT);
	CU_ASSERT(end->flags & RM_PF_OUT_SEQ);
	CU_ASSERT_EQUAL(end->out_seq_end - end->out_seq_start, 1000);
	/* CPU: 30 ms burned, 60 ms asleep (excluded), child's 15 ms is the child's */
	cpu = seg_sum(start->seg_id, s.tid, 0);
	fprintf(stderr, "server segment cpu %.3f ms\n", cpu / 1e6);
	CU_ASSERT(cpu >= 29000000ULL && cpu <= 45000000ULL);
	child = find_part(s.child_tid, RM_PF_INHERIT);
	CU_ASSERT_PTR_NOT_NULL_FATAL(child);
	CU_ASSERT_EQUAL(child->parent_seg, start->seg_id);
	CU_ASSERT_EQUAL(child->in.cookie, start->in.cookie);
	cpu = seg_sum(child->seg_id, s.child_tid, 0);
	fprintf(stderr, "inherited child cpu %.3f ms\n", cpu / 1e6);
	CU_ASSERT(cpu >= 14000000ULL && cpu <= 25000000ULL);
	if (s.disk_ok) {
		uint64_t dw = seg_sum(start->seg_id, s.tid, 3);

		fprintf(stderr, "disk write in segment %llu bytes\n", (unsigned long long)dw);
		CU_ASSERT(dw >= 65536);
	}
}

/* The most CPU a window (or windows) of capacity cap may read: 2 ms a CPU of
 * slack, and with the counters 10% for the time split at its edges. */
static uint64_t busy_bound(uint64_t cap)
{
	return cap + 2000000ULL * 2 + (cpu_counters ? cap / 10 : 0);
}

/* busy = parts + unsegmented + lost (and bytes likewise) in every window recorded */
static void check_identity(void)
{
	uint64_t sum_cpu[MAX_WINS] = { 0 }, sum_rx[MAX_WINS] = { 0 }, sum_tx[MAX_WINS] = { 0 };
	uint64_t busy = 0, capacity = 0;
	size_t i, j, checked = 0;

	for (i = 0; i < nparts; i++) {
		for (j = 0; j < nwins; j++)
			if (wins[j].win == parts[i].win)
				break;
		if (j >= nwins)
			fprintf(stderr, "part of thread %u (flags %#x, start %llu ns) in window %llu, which was not reported\n",
				parts[i].tid, parts[i].flags, (unsigned long long)parts[i].start_ns,
				(unsigned long long)parts[i].win);
		CU_ASSERT_FATAL(j < nwins); /* every part's window was reported */
		sum_cpu[j] += parts[i].cpu_ns;
		sum_rx[j] += parts[i].rx_bytes;
		sum_tx[j] += parts[i].tx_bytes;
	}
	for (j = 0; j < nwins; j++) {
		const struct rm_totals *t = &wins[j];

		CU_ASSERT_EQUAL(t->busy_ns, sum_cpu[j] + t->unseg_cpu_ns + t->lost_ns);
		/* a runtime's unsegmented CPU is a subset of it, a Go program's of that */
		CU_ASSERT(t->unseg_rt_ns <= t->unseg_cpu_ns);
		CU_ASSERT(t->unseg_go_ns <= t->unseg_rt_ns);
		CU_ASSERT_EQUAL(t->rx_bytes, sum_rx[j] + t->unseg_rx);
		CU_ASSERT_EQUAL(t->tx_bytes, sum_tx[j] + t->unseg_tx);
		/* with the counters, CPU claimed over an interval that crosses a
		 * window's end is split by time (docs/cpu-counters.md): a window
		 * gets some of its neighbour's, which a short window at the
		 * collector's start or end (tens of ms here) cannot hold. Those
		 * are checked together with the rest, below */
		busy += t->busy_ns;
		capacity += wins[j].capacity_ns;
		if (!cpu_counters || wins[j].capacity_ns >= 500000000ULL)
			CU_ASSERT(t->busy_ns <= busy_bound(wins[j].capacity_ns));
		if (t->busy_ns > wins[j].capacity_ns + 2000000ULL * 2)
			fprintf(stderr, "window %llu: busy %llu > capacity %llu (lost %llu, unseg %llu, parts %llu)\n",
				(unsigned long long)t->win, (unsigned long long)t->busy_ns,
				(unsigned long long)wins[j].capacity_ns, (unsigned long long)t->lost_ns,
				(unsigned long long)t->unseg_cpu_ns, (unsigned long long)sum_cpu[j]);
		if (t->busy_ns != sum_cpu[j] + t->unseg_cpu_ns + t->lost_ns)
			fprintf(stderr, "window %llu: busy %llu parts %llu unseg %llu lost %llu\n",
				(unsigned long long)t->win, (unsigned long long)t->busy_ns,
				(unsigned long long)sum_cpu[j], (unsigned long long)t->unseg_cpu_ns,
				(unsigned long long)t->lost_ns);
		checked++;
	}
	CU_ASSERT(checked >= 1);
	CU_ASSERT(busy <= busy_bound(capacity));
	if (busy > capacity + 2000000ULL * 2)
		fprintf(stderr, "all windows: busy %llu > capacity %llu\n", (unsigned long long)busy,
			(unsigned long long)capacity);
}

static void test_identity(void)
{
	if (nwins == 0)
		RM_TEST_SKIP("no windows recorded (ebpf unavailable)");
	check_identity();
}

struct simple {
	int lfd;
	size_t req, resp;
	unsigned burn;
};

static void *simple_server(void *arg)
{
	struct simple *x = arg;
	char buf[4096];
	size_t got = 0;
	int fd = accept(x->lfd, NULL, NULL);

	if (fd < 0)
		return NULL;
	while (got < x->req) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	burn_ms(x->burn);
	memset(buf, 's', sizeof(buf));
	if (send(fd, buf, x->resp, 0) < 0)
		perror("send");
	close(fd);
	return NULL;
}

/* One request/response over loopback in the calling process's namespace. */
static int simple_exchange(size_t req, size_t resp, unsigned burn)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	struct simple x = { .req = req, .resp = resp, .burn = burn };
	char buf[4096];
	size_t got = 0;
	pthread_t th;
	int cfd;

	memset(buf, 'q', sizeof(buf));
	x.lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (x.lfd < 0 || bind(x.lfd, (struct sockaddr *)&a, sizeof(a)) || listen(x.lfd, 1) ||
	    getsockname(x.lfd, (struct sockaddr *)&a, &alen))
		return -1;
	pthread_create(&th, NULL, simple_server, &x);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(cfd, (struct sockaddr *)&a, sizeof(a)) || send(cfd, buf, req, 0) != (ssize_t)req)
		return -1;
	while (got < resp) {
		ssize_t n = recv(cfd, buf, sizeof(buf), 0);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	pthread_join(th, NULL);
	close(cfd);
	close(x.lfd);
	return got == resp ? 0 : -1;
}

static char test_ns[64];

static void drop_test_ns(void)
{
	char cmd[128];

	if (!test_ns[0])
		return;
	snprintf(cmd, sizeof(cmd), "/run/netns/%s", test_ns);
	if (access(cmd, F_OK) != 0) {
		test_ns[0] = '\0';
		return;
	}
	snprintf(cmd, sizeof(cmd), "ip netns del %s 2>/dev/null", test_ns);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: failed to remove namespace '%s'\n", test_ns);
	test_ns[0] = '\0';
}

static void test_netns_filter(void)
{
	struct col_bpf_cfg cfg = { .window_ns = 1000000000ULL, .cpu_counters = cpu_counters };
	struct col_bpf *b = NULL;
	char cmd[256], path[128];
	struct stat st;
	pid_t child;
	size_t i, ns_parts = 0, root_parts = 0;
	int fd, status, rv;

	snprintf(test_ns, sizeof(test_ns), "rm-coltest-%d", (int)getpid());
	/* removed at exit also if 'ip netns add' fails after creating it */
	atexit(drop_test_ns);
	snprintf(cmd, sizeof(cmd), "ip netns add %s && ip -n %s link set lo up", test_ns, test_ns);
	if (system(cmd) != 0)
		RM_TEST_SKIP("cannot create network namespaces ('ip netns add' failed)");
	snprintf(path, sizeof(path), "/var/run/netns/%s", test_ns);
	fd = open(path, O_RDONLY);
	CU_ASSERT_FATAL(fd >= 0 && fstat(fd, &st) == 0);
	cfg.netns_ino = (uint32_t)st.st_ino;
	nparts = 0;
	nwins = 0;
	if ((rv = col_bpf_open(&b, &cfg)) != RM_OK) {
		close(fd);
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	}
	child = fork();
	if (child == 0) {
		/* the "other host": an exchange inside the namespace */
		if (setns(fd, CLONE_NEWNET) != 0)
			_exit(2);
		_exit(simple_exchange(50, 300, 10) == 0 ? 0 : 1);
	}
	/* meanwhile, an exchange in the root namespace that must stay invisible */
	CU_ASSERT_EQUAL(simple_exchange(70, 700, 10), 0);
	CU_ASSERT_EQUAL(waitpid(child, &status, 0), child);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(fd);
	drain_close(b);
	drop_test_ns();
	for (i = 0; i < nparts; i++) {
		if (parts[i].pid == (uint32_t)child && (parts[i].flags & RM_PF_START) && parts[i].rx_bytes == 50)
			ns_parts++;
		if (parts[i].pid == (uint32_t)getpid())
			root_parts++;
	}
	CU_ASSERT_EQUAL(ns_parts, 1);   /* the namespace's server segment */
	CU_ASSERT_EQUAL(root_parts, 0); /* nothing of the root namespace */
	for (i = 0; i < nwins; i++)     /* only the namespace's threads count as busy */
		CU_ASSERT(wins[i].busy_ns < 500000000ULL);
	check_identity();
}

struct handoff {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int fd;          /* connection handed to the worker, -1 = none */
	pid_t acceptor, worker;
	int lfd;
};

static void *handoff_worker(void *arg)
{
	struct handoff *h = arg;
	char buf[400];
	int fd;

	h->worker = (pid_t)syscall(SYS_gettid);
	pthread_mutex_lock(&h->mu);
	while (h->fd < 0)
		pthread_cond_wait(&h->cv, &h->mu);
	fd = h->fd;
	pthread_mutex_unlock(&h->mu);
	burn_ms(20);
	memset(buf, 'w', sizeof(buf));
	if (send(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
		perror("send");
	return NULL;
}

static void *handoff_acceptor(void *arg)
{
	struct handoff *h = arg;
	char buf[60];
	size_t got = 0;
	int fd;

	h->acceptor = (pid_t)syscall(SYS_gettid);
	fd = accept(h->lfd, NULL, NULL);
	while (fd >= 0 && got < sizeof(buf)) {
		ssize_t n = recv(fd, buf + got, sizeof(buf) - got, 0);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	pthread_mutex_lock(&h->mu);
	h->fd = fd;
	pthread_cond_signal(&h->cv); /* FUTEX_WAKE: the worker inherits this request */
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

static void test_wakeup_chain(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct col_bpf_cfg cfg = { .window_ns = 1000000000ULL, .follow_wakeups = 1 };
	struct handoff h = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, -1, 0, 0, -1 };
	const struct rm_part *acc, *inh;
	socklen_t alen = sizeof(a);
	struct col_bpf *b = NULL;
	pthread_t tw, ta;
	char buf[400];
	size_t got = 0, i;
	uint64_t cpu = 0, tx = 0;
	int cfd, rv;

	nparts = 0;
	nwins = 0;
	if ((rv = col_bpf_open(&b, &cfg)) != RM_OK)
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	h.lfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(bind(h.lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(h.lfd, 1) == 0 &&
			getsockname(h.lfd, (struct sockaddr *)&a, &alen) == 0);
	pthread_create(&tw, NULL, handoff_worker, &h);
	usleep(50000); /* the worker sleeps in pthread_cond_wait */
	pthread_create(&ta, NULL, handoff_acceptor, &h);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(connect(cfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	memset(buf, 'q', 60);
	CU_ASSERT_FATAL(send(cfd, buf, 60, 0) == 60);
	while (got < sizeof(buf)) {
		ssize_t n = recv(cfd, buf + got, sizeof(buf) - got, 0);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	pthread_join(ta, NULL);
	pthread_join(tw, NULL);
	close(cfd);
	close(h.fd);
	close(h.lfd);
	CU_ASSERT_EQUAL(got, sizeof(buf));
	drain_close(b);

	acc = find_part(h.acceptor, RM_PF_START);
	inh = find_part(h.worker, RM_PF_INHERIT);
	CU_ASSERT_PTR_NOT_NULL_FATAL(acc);
	CU_ASSERT_PTR_NOT_NULL_FATAL(inh);
	CU_ASSERT_EQUAL(inh->parent_seg, acc->seg_id);
	CU_ASSERT_EQUAL(inh->in.cookie, acc->in.cookie); /* the worker serves the acceptor's request */
	for (i = 0; i < nparts; i++)
		if (parts[i].tid == (uint32_t)h.worker && parts[i].seg_id == inh->seg_id) {
			cpu += parts[i].cpu_ns;
			tx += parts[i].tx_bytes;
		}
	fprintf(stderr, "worker cpu inherited from the hand-off %.3f ms\n", cpu / 1e6);
	CU_ASSERT(cpu >= 19000000ULL && cpu <= 30000000ULL);
	CU_ASSERT_EQUAL(tx, 400);
	check_identity();
}

/*
 * Follow-replies: a reader accepts two connections and reads a request on
 * each; a worker takes both by polling a variable (no futex: nothing the
 * kernel sees), burns 10 ms and replies on the first, burns 20 ms and
 * replies on the second. Its first reply makes it followed; the 20 ms of
 * the second job go to a continuation anchored at the second reply: its
 * inbound tuple and byte range are those of the reader's request on that
 * connection (an accepted socket of a listener bound to an explicit port
 * is the server side).
 */
struct pool2 {
	int lfd, fd[2];
	volatile int ready;
	pid_t reader, worker;
};

static void *pool2_worker(void *arg)
{
	struct pool2 *p = arg;
	char buf[400];
	int i;

	p->worker = (pid_t)syscall(SYS_gettid);
	while (!__atomic_load_n(&p->ready, __ATOMIC_ACQUIRE))
		; /* no futex, no sleep */
	memset(buf, 'w', sizeof(buf));
	for (i = 0; i < 2; i++) {
		burn_ms(i == 0 ? 10 : 20);
		if (send(p->fd[i], buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
			perror("send");
	}
	return NULL;
}

static void *pool2_reader(void *arg)
{
	struct pool2 *p = arg;
	int i;

	p->reader = (pid_t)syscall(SYS_gettid);
	for (i = 0; i < 2; i++) {
		char buf[60];
		size_t got = 0;

		p->fd[i] = accept(p->lfd, NULL, NULL);
		while (p->fd[i] >= 0 && got < sizeof(buf)) {
			ssize_t n = recv(p->fd[i], buf + got, sizeof(buf) - got, 0);

			if (n <= 0)
				break;
			got += (size_t)n;
		}
	}
	__atomic_store_n(&p->ready, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * The replies of an event loop (redis writes all replies after reading all
 * requests): reads requests on two connections, replies on the first,
 * burns 300 us and replies on the second: those 300 us are anchored to the
 * second request, also when no context switch came between the replies.
 */
struct loop2 {
	int lfd, fd[2];
	pid_t tid;
};

static void *loop2_main(void *arg)
{
	struct loop2 *l = arg;
	char buf[60];
	uint64_t t0;
	int i;

	l->tid = (pid_t)syscall(SYS_gettid);
	for (i = 0; i < 2; i++) {
		l->fd[i] = accept(l->lfd, NULL, NULL);
		if (l->fd[i] < 0 || recv(l->fd[i], buf, sizeof(buf), MSG_WAITALL) != (ssize_t)sizeof(buf))
			return NULL;
	}
	memset(buf, 'r', sizeof(buf));
	if (send(l->fd[0], buf, 40, 0) != 40)
		perror("send");
	/* 300 us: too short for a tick to switch it out, mostly */
	for (t0 = thread_cpu_ns(); thread_cpu_ns() - t0 < 300000;)
		sink_hole++;
	if (send(l->fd[1], buf, 40, 0) != 40)
		perror("send");
	return NULL;
}

/* Listening socket on an explicit loopback port (servers bind theirs); its port or -1. */
static int listen_explicit(int *lfd)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int port, k;

	*lfd = socket(AF_INET, SOCK_STREAM, 0);
	for (port = 20000 + (int)(getpid() % 20000), k = 0; *lfd >= 0 && k < 100; k++, port++) {
		a.sin_port = htons((uint16_t)port);
		if (bind(*lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(*lfd, 4) == 0)
			return port;
	}
	return -1;
}

/*
 * Serves loop2 two clients' requests on a fresh explicit port, then closes
 * every socket. Returns the port, or -1 if the exchange failed.
 */
static int loop2_run(struct loop2 *l)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int cfd[2] = { -1, -1 }, port, ok = 1;
	pthread_t th;
	size_t i;

	if ((port = listen_explicit(&l->lfd)) < 0) {
		close(l->lfd);
		return -1;
	}
	a.sin_port = htons((uint16_t)port);
	pthread_create(&th, NULL, loop2_main, l);
	for (i = 0; i < 2; i++) {
		char q[60];

		memset(q, 'q', sizeof(q));
		cfd[i] = socket(AF_INET, SOCK_STREAM, 0);
		ok = ok && cfd[i] >= 0 && connect(cfd[i], (struct sockaddr *)&a, sizeof(a)) == 0 &&
		     send(cfd[i], q, sizeof(q), 0) == (ssize_t)sizeof(q);
	}
	for (i = 0; i < 2; i++) {
		char r[40];

		ok = ok && recv(cfd[i], r, sizeof(r), MSG_WAITALL) == (ssize_t)sizeof(r);
		close(cfd[i]);
	}
	if (!ok)
		shutdown(l->lfd, SHUT_RDWR); /* a loop still in accept returns */
	pthread_join(th, NULL);
	close(l->fd[0]);
	close(l->fd[1]);
	close(l->lfd);
	return ok ? port : -1;
}

static void test_follow_replies_loop(void)
{
	struct col_bpf_cfg cfg = { .window_ns = 1000000000ULL, .follow_replies = 1, .cpu_counters = cpu_counters };
	struct loop2 l = { -1, { -1, -1 }, 0 };
	const struct rm_part *req = NULL;
	struct col_bpf *b = NULL;
	uint64_t cpu = 0, n = 0;
	size_t i;
	int port, rv;

	nparts = 0;
	nwins = 0;
	if ((rv = col_bpf_open(&b, &cfg)) != RM_OK)
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	port = loop2_run(&l);
	drain_close(b);
	CU_ASSERT_FATAL(port > 0);

	/* the loop's segment of the second request */
	CU_ASSERT_PTR_NOT_NULL_FATAL(req = last_request(l.tid, port));
	for (i = 0; i < nparts; i++) {
		const struct rm_part *q = &parts[i];

		if (q->tid != (uint32_t)l.tid || !(q->flags & RM_PF_CONT))
			continue;
		/* no continuation is left to wait for an anchor */
		CU_ASSERT(q->flags & RM_PF_ANCHOR);
		if ((q->flags & RM_PF_ANCHOR) && q->in.cookie == req->in.cookie) {
			CU_ASSERT_EQUAL(q->in_seq_start, req->in_seq_start);
			CU_ASSERT_EQUAL(q->in_seq_end, req->in_seq_end);
			cpu += q->cpu_ns;
			n++;
		}
	}
	fprintf(stderr, "loop cpu between its replies, anchored to the second request %.3f ms\n", cpu / 1e6);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT(cpu >= 290000ULL && cpu <= 10000000ULL);
	check_identity();
}

static void test_follow_replies(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct col_bpf_cfg cfg = { .window_ns = 1000000000ULL, .follow_replies = 1, .cpu_counters = cpu_counters };
	struct pool2 p = { .lfd = -1, .fd = { -1, -1 } };
	const struct rm_part *req = NULL;
	struct col_bpf *b = NULL;
	pthread_t tw, tr;
	uint64_t cpu = 0, tx = 0, anchored = 0;
	size_t i, k;
	int cfd[2], rv, port;

	nparts = 0;
	nwins = 0;
	if ((rv = col_bpf_open(&b, &cfg)) != RM_OK)
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	p.lfd = socket(AF_INET, SOCK_STREAM, 0);
	/* an explicit port, as servers have (port 0 would not lock it) */
	for (port = 20000 + (int)(getpid() % 20000), k = 0; k < 100; k++, port++) {
		a.sin_port = htons((uint16_t)port);
		if (bind(p.lfd, (struct sockaddr *)&a, sizeof(a)) == 0)
			break;
	}
	CU_ASSERT_FATAL(k < 100 && listen(p.lfd, 2) == 0);
	pthread_create(&tw, NULL, pool2_worker, &p);
	pthread_create(&tr, NULL, pool2_reader, &p);
	for (i = 0; i < 2; i++) {
		char q[60];

		cfd[i] = socket(AF_INET, SOCK_STREAM, 0);
		CU_ASSERT_FATAL(connect(cfd[i], (struct sockaddr *)&a, sizeof(a)) == 0);
		memset(q, 'q', sizeof(q));
		CU_ASSERT_FATAL(send(cfd[i], q, sizeof(q), 0) == (ssize_t)sizeof(q));
	}
	for (i = 0; i < 2; i++) {
		char buf[400];
		size_t got = 0;

		while (got < sizeof(buf)) {
			ssize_t n = recv(cfd[i], buf + got, sizeof(buf) - got, 0);

			if (n <= 0)
				break;
			got += (size_t)n;
		}
		CU_ASSERT_EQUAL(got, sizeof(buf));
	}
	pthread_join(tr, NULL);
	pthread_join(tw, NULL);
	for (i = 0; i < 2; i++) {
		close(cfd[i]);
		close(p.fd[i]);
	}
	close(p.lfd);
	drain_close(b);

	/* the reader's segment on the second connection */
	CU_ASSERT_PTR_NOT_NULL_FATAL(req = last_request(p.reader, port));
	for (i = 0; i < nparts; i++) {
		const struct rm_part *q = &parts[i];

		if (q->tid != (uint32_t)p.worker || !(q->flags & RM_PF_ANCHOR) || q->in.cookie != req->in.cookie)
			continue;
		if (!(q->flags & RM_PF_CONT)) {
			/* the chain's anchor record: its parts emitted before the reply
			 * (at a window's end) take this request */
			CU_ASSERT(q->flags & RM_PF_IN_SEQ);
			CU_ASSERT_EQUAL(q->cpu_ns, 0);
			for (k = 0; k < nparts; k++)
				if (parts[k].tid == (uint32_t)p.worker && parts[k].parent_seg == q->parent_seg &&
				    (parts[k].flags & (RM_PF_CONT | RM_PF_ANCHOR)) == RM_PF_CONT)
					cpu += parts[k].cpu_ns;
			continue;
		}
		anchored++;
		CU_ASSERT(q->flags & RM_PF_IN_SEQ);
		CU_ASSERT_EQUAL(q->in_seq_start, req->in_seq_start);
		CU_ASSERT_EQUAL(q->in_seq_end, req->in_seq_end);
		CU_ASSERT_EQUAL(q->in.lport, (uint32_t)port);
		CU_ASSERT_EQUAL(q->out.cookie, req->in.cookie);
		cpu += q->cpu_ns;
		tx += q->tx_bytes;
	}
	/* one part anchored at the reply, and with it whatever a window's end cut off before */
	fprintf(stderr, "worker cpu charged to the second request %.3f ms\n", cpu / 1e6);
	CU_ASSERT_EQUAL(anchored, 1);
	CU_ASSERT(cpu >= 19000000ULL && cpu <= 30000000ULL);
	if (anchored != 1 || cpu < 19000000ULL || cpu > 30000000ULL)
		for (i = 0; i < nparts; i++)
			if (parts[i].tid == (uint32_t)p.worker || parts[i].tid == (uint32_t)p.reader)
				fprintf(stderr, "  %s part: win %llu chain %llu cpu %.3f ms flags 0x%x in %u->%u "
					"cookie %llu tx %llu\n", parts[i].tid == (uint32_t)p.worker ? "worker" : "reader",
					(unsigned long long)parts[i].win, (unsigned long long)parts[i].parent_seg,
					parts[i].cpu_ns / 1e6, parts[i].flags, parts[i].in.rport, parts[i].in.lport,
					(unsigned long long)parts[i].in.cookie, (unsigned long long)parts[i].tx_bytes);
	CU_ASSERT_EQUAL(tx, 400);
	check_identity();
}

/*
 * The hand-off hook, as the kernel sees it: is a link of the running kernel
 * attached to the program of b named rm_sched_waking? (Its id from b, the
 * link from the kernel's own list.) 1 yes, 0 no, -1 no such program loaded.
 */
static int waking_linked(const struct col_bpf *b)
{
	struct col_bpf_prog_stat ps[32];
	uint32_t prog = 0, id = 0;
	int n = col_bpf_prog_stats(b, ps, 32), i, found = 0;

	for (i = 0; i < n; i++)
		if (strcmp(ps[i].name, "rm_sched_waking") == 0)
			prog = ps[i].id;
	if (!prog)
		return -1;
	while (!found && bpf_link_get_next_id(id, &id) == 0) {
		struct bpf_link_info info;
		uint32_t len = sizeof(info);
		int fd = bpf_link_get_fd_by_id(id);

		if (fd < 0)
			continue; /* gone meanwhile */
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.prog_id == prog)
			found = 1;
		close(fd);
	}
	return found;
}

/*
 * A pool server's one request: the reader reads it and hands it to a
 * worker through a pipe (a write wakes the worker, asleep in its read),
 * the worker answers it.
 */
struct pipe1 {
	int lfd, fd, p[2];
};

static void *pipe1_worker(void *arg)
{
	struct pipe1 *x = arg;
	char c, buf[100];

	memset(buf, 'w', sizeof(buf));
	if (read(x->p[0], &c, 1) == 1 && send(x->fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
		perror("send");
	return NULL;
}

static void *pipe1_reader(void *arg)
{
	struct pipe1 *x = arg;
	char buf[60];

	x->fd = accept(x->lfd, NULL, NULL);
	if (x->fd >= 0 && recv(x->fd, buf, sizeof(buf), MSG_WAITALL) == (ssize_t)sizeof(buf) &&
	    write(x->p[1], "j", 1) != 1)
		perror("write");
	return NULL;
}

/* Runs pipe1 once, polling b meanwhile; 1 if the request was answered. */
static int pipe1_request(struct col_bpf *b)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct pipe1 x = { -1, -1, { -1, -1 } };
	pthread_t tw, tr;
	char q[60], r[100];
	int port, cfd, ok = 0;

	if ((port = listen_explicit(&x.lfd)) < 0 || pipe(x.p) != 0) {
		close(x.lfd);
		return 0;
	}
	a.sin_port = htons((uint16_t)port);
	pthread_create(&tw, NULL, pipe1_worker, &x);
	pthread_create(&tr, NULL, pipe1_reader, &x);
	memset(q, 'q', sizeof(q));
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (cfd >= 0 && connect(cfd, (struct sockaddr *)&a, sizeof(a)) == 0 && send(cfd, q, sizeof(q), 0) == sizeof(q))
		ok = recv(cfd, r, sizeof(r), MSG_WAITALL) == (ssize_t)sizeof(r);
	if (!ok)
		(void)!write(x.p[1], "j", 1); /* the worker must not wait for ever */
	pthread_join(tr, NULL);
	pthread_join(tw, NULL);
	CU_ASSERT_EQUAL(col_bpf_poll(b, &sink, 10), RM_OK);
	close(cfd);
	close(x.fd);
	close(x.lfd);
	close(x.p[0]);
	close(x.p[1]);
	return ok;
}

/* Polls b until its hand-off hook is attached, at most 3 s; 1 if it is. */
static int wait_handoff_hook(struct col_bpf *b)
{
	struct col_bpf_stats st;
	int i;

	for (i = 0; i < 30; i++) {
		CU_ASSERT_EQUAL(col_bpf_poll(b, &sink, 100), RM_OK);
		col_bpf_get_stats(b, &st);
		if (st.handoff_hook)
			return 1;
	}
	return 0;
}

/*
 * Follow-replies attaches the hand-off hook (sched_waking, a hook on every
 * wake-up of the machine) only once a server answers a request on another
 * thread than the one that read it: not for an event loop that answers its
 * own requests, at once for a pool that hands one over. Whether it is
 * attached is read from the kernel's list of links; the request answered
 * before it is counted. The test's threads run in a network namespace of
 * their own, the only one accounted: no other server of the host can
 * trigger the hook.
 */
static void handoff_hook_cases(struct col_bpf *b);
static void reply_reader_cases(struct col_bpf *b);
static void no_handoff_hook_yet(struct col_bpf *b);

/* Runs cases on a backend that accounts only a new network namespace,
 * which this thread (and what it starts) is in meanwhile. */
static void in_own_netns(void (*cases)(struct col_bpf *b))
{
	struct col_bpf_cfg cfg = { .window_ns = 1000000000ULL, .follow_replies = 1, .cpu_counters = cpu_counters };
	struct col_bpf *b = NULL;
	struct stat nst;
	int orig, rv;

	nparts = 0;
	nwins = 0;
	if ((orig = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
		RM_TEST_SKIP("no network namespace to return to");
	if (unshare(CLONE_NEWNET) != 0) {
		close(orig);
		RM_TEST_SKIP("cannot create a network namespace: %s", strerror(errno));
	}
	/* this thread, and the threads and processes it starts, are in it */
	if (system("ip link set lo up") == 0 && stat("/proc/thread-self/ns/net", &nst) == 0) {
		cfg.netns_ino = (uint32_t)nst.st_ino;
		if ((rv = col_bpf_open(&b, &cfg)) == RM_OK)
			cases(b);
		else
			fprintf(stderr, "ebpf backend unavailable: %s\n", rm_strerror(rv));
		CU_ASSERT_EQUAL(rv, RM_OK);
	} else {
		CU_FAIL("cannot set up the test's network namespace");
	}
	CU_ASSERT_EQUAL(setns(orig, CLONE_NEWNET), 0);
	close(orig);
}

static void test_handoff_hook_on_demand(void)
{
	in_own_netns(handoff_hook_cases);
}

/*
 * The other trigger: a reply read on a client-side connection by another
 * thread than the one that sent the request on it (a reader handing replies
 * to the threads waiting for them, on a connection they share). The server
 * answers on the thread that read the request, and before it a client that
 * reads its own replies (loop2) attaches nothing.
 */
static void test_handoff_hook_reply_reader(void)
{
	in_own_netns(reply_reader_cases);
}

/* A server thread: one connection, one 60-byte request, a 40-byte reply. */
static void *echo1_main(void *arg)
{
	int *lfd = arg, fd;
	char buf[60];

	if ((fd = accept(*lfd, NULL, NULL)) < 0)
		return NULL;
	if (recv(fd, buf, sizeof(buf), MSG_WAITALL) == (ssize_t)sizeof(buf)) {
		memset(buf, 'r', 40);
		if (send(fd, buf, 40, 0) != 40)
			perror("send");
	}
	close(fd);
	return NULL;
}

/* A thread reading one 40-byte reply on *arg (an fd); its result in the fd's place (1 read, 0 not). */
static void *reply_reader_main(void *arg)
{
	int *fd = arg;
	char r[40];

	*fd = recv(*fd, r, sizeof(r), MSG_WAITALL) == (ssize_t)sizeof(r);
	return NULL;
}

static void reply_reader_cases(struct col_bpf *b)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct col_bpf_stats st;
	pthread_t ts, tr;
	int lfd = -1, cfd, rfd, port, sent;
	char q[60];

	no_handoff_hook_yet(b);
	/* this thread sends the request, another reads the reply */
	CU_ASSERT_FATAL((port = listen_explicit(&lfd)) > 0);
	a.sin_port = htons((uint16_t)port);
	pthread_create(&ts, NULL, echo1_main, &lfd);
	memset(q, 'q', sizeof(q));
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	sent = cfd >= 0 && connect(cfd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	       send(cfd, q, sizeof(q), 0) == (ssize_t)sizeof(q);
	if (!sent)
		shutdown(lfd, SHUT_RDWR); /* the server still in accept returns */
	rfd = cfd;
	if (sent) {
		pthread_create(&tr, NULL, reply_reader_main, &rfd);
		pthread_join(tr, NULL);
	}
	pthread_join(ts, NULL);
	CU_ASSERT(sent && rfd == 1);
	CU_ASSERT(wait_handoff_hook(b));
	CU_ASSERT_EQUAL(waking_linked(b), 1);
	col_bpf_get_stats(b, &st);
	CU_ASSERT(st.handoff_replies_before >= 1);
	close(cfd);
	close(lfd);
	drain_close(b);
	check_identity();
}

/*
 * The hook is loaded, not attached, and stays so while an event loop
 * answers its own requests and its clients read their own replies (loop2):
 * nothing is handed between threads.
 */
static void no_handoff_hook_yet(struct col_bpf *b)
{
	struct loop2 l = { -1, { -1, -1 }, 0 };
	struct col_bpf_stats st;
	size_t i;

	CU_ASSERT_EQUAL(waking_linked(b), 0);
	CU_ASSERT(loop2_run(&l) > 0);
	for (i = 0; i < 5; i++)
		CU_ASSERT_EQUAL(col_bpf_poll(b, &sink, 100), RM_OK);
	col_bpf_get_stats(b, &st);
	CU_ASSERT_EQUAL(st.handoff_hook, 0);
	CU_ASSERT_EQUAL(st.handoff_replies_before, 0);
	CU_ASSERT_EQUAL(waking_linked(b), 0);
}

static void handoff_hook_cases(struct col_bpf *b)
{
	struct col_bpf_stats st;

	no_handoff_hook_yet(b);
	/* a pool: the reader hands the request to a worker, which answers it */
	CU_ASSERT(pipe1_request(b));
	CU_ASSERT(wait_handoff_hook(b));
	CU_ASSERT_EQUAL(waking_linked(b), 1);
	col_bpf_get_stats(b, &st);
	fprintf(stderr, "hand-off hook attached after %llu requests answered by another thread\n",
		(unsigned long long)st.handoff_replies_before);
	CU_ASSERT_EQUAL(st.handoff_replies_before, 1);
	/* attached for good: more hand-offs are not counted */
	CU_ASSERT(pipe1_request(b));
	col_bpf_get_stats(b, &st);
	CU_ASSERT_EQUAL(st.handoff_replies_before, 1);
	CU_ASSERT_EQUAL(waking_linked(b), 1);
	drain_close(b);
	check_identity();
}

/*
 * A dispatcher (the shape of apache's event MPM, the JDK's HttpServer): a
 * listener thread watches a kept-alive connection, burns DISP_BURN_MS of
 * CPU when its next request is ready (its per-request work) and wakes one
 * of two workers, in turn, through a condition; the worker reads the
 * request and answers it. The listener never reads or writes a socket; the
 * connection moves between the workers. The second request, read by
 * another thread than the first, attaches the hand-off hook
 * (handoff_reads); from then on, on CPU counters, each request's segment
 * holds the listener's CPU since its previous wake-up, which the
 * listener's own clock measures.
 */
#define DISP_ROUNDS 6
#define DISP_BURN_MS 1 /* a round's dispatch work, under RM_CARRY_MAX */
#define DISP_BIG_MS 3  /* the last round's, over it */

struct disp_worker {
	pthread_cond_t cond;
	int ready, job;
	pid_t tid;
	uint64_t t0[DISP_ROUNDS], t1[DISP_ROUNDS]; /* CLOCK_MONOTONIC before its recv, after its send */
	uint64_t cpu[DISP_ROUNDS];                  /* its own CPU from waking to after its send */
};

struct disp {
	pthread_mutex_t mu;
	struct disp_worker w[2];
	int fd, nworkers, stop;
	int answered;               /* requests answered */
	uint64_t lcpu[DISP_ROUNDS]; /* the listener's thread clock at each wake-up */
};

static uint64_t mono_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void *disp_worker_main(void *arg)
{
	struct disp *d = arg;
	struct disp_worker *me;
	char q[60], r[100];
	uint64_t c0;
	int k;

	memset(r, 'r', sizeof(r));
	pthread_mutex_lock(&d->mu);
	me = &d->w[d->nworkers++];
	me->tid = (pid_t)syscall(SYS_gettid);
	for (;;) {
		me->ready = 1;
		while (!me->job && !d->stop)
			pthread_cond_wait(&me->cond, &d->mu);
		if (d->stop)
			break;
		me->job = 0;
		me->ready = 0;
		k = d->answered;
		pthread_mutex_unlock(&d->mu);
		c0 = thread_cpu_ns();
		me->t0[k] = mono_now_ns();
		if (recv(d->fd, q, sizeof(q), MSG_WAITALL) != (ssize_t)sizeof(q) ||
		    send(d->fd, r, sizeof(r), 0) != (ssize_t)sizeof(r))
			perror("dispatched worker");
		me->t1[k] = mono_now_ns();
		me->cpu[k] = thread_cpu_ns() - c0;
		pthread_mutex_lock(&d->mu);
		d->answered = k + 1;
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

static void *disp_listener_main(void *arg)
{
	struct disp *d = arg;
	struct pollfd pf = { .fd = d->fd, .events = POLLIN };
	int k, ready;

	for (k = 0; k < DISP_ROUNDS; k++) {
		struct disp_worker *w = &d->w[k % 2];

		/* the previous request answered, the next worker waiting */
		do {
			usleep(10000); /* and asleep: the signal is a wake-up */
			pthread_mutex_lock(&d->mu);
			ready = d->answered == k && d->nworkers == 2 && w->ready;
			pthread_mutex_unlock(&d->mu);
		} while (!ready && !d->stop);
		if (d->stop || poll(&pf, 1, 5000) != 1)
			break;
		burn_ms(k == DISP_ROUNDS - 1 ? DISP_BIG_MS : DISP_BURN_MS);
		pthread_mutex_lock(&d->mu);
		d->lcpu[k] = thread_cpu_ns();
		w->job = 1;
		pthread_cond_signal(&w->cond);
		pthread_mutex_unlock(&d->mu);
	}
	return NULL;
}

/* The CPU of worker w's request segment of round k (0 if none). */
static uint64_t disp_segment_cpu(const struct disp_worker *w, int k, int port)
{
	uint64_t seg = 0, cpu = 0;
	size_t i;

	for (i = 0; i < nparts && !seg; i++)
		if (parts[i].tid == (uint32_t)w->tid && (parts[i].flags & RM_PF_START) &&
		    !(parts[i].flags & (RM_PF_CONT | RM_PF_ASSOC)) && parts[i].in.lport == (uint32_t)port &&
		    parts[i].start_ns >= w->t0[k] && parts[i].start_ns <= w->t1[k])
			seg = parts[i].seg_id;
	for (i = 0; i < nparts && seg; i++)
		if (parts[i].seg_id == seg && !(parts[i].flags & (RM_PF_CONT | RM_PF_ASSOC)))
			cpu += parts[i].cpu_ns;
	return cpu;
}

static void dispatcher_cases(struct col_bpf *b)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct disp d = { .mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };
	struct col_bpf_stats st;
	pthread_t tw[2], tl;
	char q[60], r[100];
	int lfd = -1, cfd = -1, port, k, ok = 1, hook = 0, low = 0;

	/* the server's threads start before this thread reads anything: a
	 * thread made inside a segment would inherit it */
	CU_ASSERT_FATAL((port = listen_explicit(&lfd)) > 0);
	a.sin_port = htons((uint16_t)port);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(cfd >= 0 && connect(cfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CU_ASSERT_FATAL((d.fd = accept(lfd, NULL, NULL)) >= 0);
	pthread_cond_init(&d.w[0].cond, NULL);
	pthread_cond_init(&d.w[1].cond, NULL);
	pthread_create(&tw[0], NULL, disp_worker_main, &d);
	pthread_create(&tw[1], NULL, disp_worker_main, &d);
	pthread_create(&tl, NULL, disp_listener_main, &d);
	no_handoff_hook_yet(b);
	memset(q, 'q', sizeof(q));
	for (k = 0; k < DISP_ROUNDS && ok; k++) {
		if (k == 2) /* two requests of one connection read by two threads */
			hook = wait_handoff_hook(b);
		ok = send(cfd, q, sizeof(q), 0) == (ssize_t)sizeof(q) &&
		     recv(cfd, r, sizeof(r), MSG_WAITALL) == (ssize_t)sizeof(r);
	}
	pthread_mutex_lock(&d.mu);
	d.stop = 1;
	pthread_cond_broadcast(&d.w[0].cond);
	pthread_cond_broadcast(&d.w[1].cond);
	pthread_mutex_unlock(&d.mu);
	shutdown(cfd, SHUT_RDWR); /* a listener still in its poll returns */
	pthread_join(tl, NULL);
	pthread_join(tw[0], NULL);
	pthread_join(tw[1], NULL);
	CU_ASSERT(ok);
	CU_ASSERT(hook);
	CU_ASSERT_EQUAL(waking_linked(b), 1);
	col_bpf_get_stats(b, &st);
	fprintf(stderr, "hand-off hook attached after %llu connection requests read by another thread "
			"(%llu replies by another thread); %llu carrying wake-ups\n",
		(unsigned long long)st.handoff_reads_before, (unsigned long long)st.handoff_replies_before,
		(unsigned long long)st.carry_wakeups);
	CU_ASSERT(st.handoff_reads_before >= 1);
	CU_ASSERT_EQUAL(st.handoff_replies_before, 0);
	close(cfd);
	close(d.fd);
	close(lfd);
	drain_close(b);
	check_identity();
	if (!cpu_counters || !ok)
		return; /* the carry is the counters' (slices charge the listener's CPU as it runs) */
	CU_ASSERT(st.carry_wakeups >= DISP_ROUNDS - 2);
	/* the last round carries RM_CARRY_MAX; the rest of its burn is counted */
	CU_ASSERT(st.carry_capped_ns >= (DISP_BIG_MS * 1000000ULL - RM_CARRY_MAX) * 9 / 10);
	for (k = 2; k < DISP_ROUNDS; k++) {
		const struct disp_worker *w = &d.w[k % 2];
		uint64_t seg = disp_segment_cpu(w, k, port), lis = d.lcpu[k] - d.lcpu[k - 1];

		fprintf(stderr, "request %d: segment %.3f ms; the listener's clock since its last wake-up %.3f ms, "
				"the worker's %.3f ms\n",
			k, seg / 1e6, lis / 1e6, w->cpu[k] / 1e6);
		/* at most what both clocks say (the listener's since its previous wake-up,
		 * whose CPU a window's sweep may have claimed first), at least its burn */
		if (k == DISP_ROUNDS - 1) {
			CU_ASSERT(seg <= RM_CARRY_MAX + w->cpu[k] + 300000ULL);
			low += seg < RM_CARRY_MAX;
		} else {
			if (k > 2)
				CU_ASSERT(seg <= lis + w->cpu[k] + 300000ULL);
			low += seg < DISP_BURN_MS * 900000ULL;
		}
	}
	/* a window's sweep in a round's burn leaves the rest unsegmented: once at most */
	CU_ASSERT(low <= 1);
}

static void test_dispatcher(void)
{
	in_own_netns(dispatcher_cases);
}

/*
 * A worker pool's tail (follow-replies): the reader hands each request to a
 * worker through a mutex + condition; the worker burns 5 ms, replies, and
 * then does 4 ms of bookkeeping before it waits for the next job - 2 ms,
 * a lock another thread holds (it blocks there), 2 ms more. None of the
 * tail is work for the next request: the first block folds the first half
 * back to unsegmented (rm_cont_block), the reader's hand-off of the next
 * request the second (rm_on_handoff). The second request's chain is its
 * 5 ms only. Right after its first reply the worker tells the reader
 * through an eventfd, and the reader spends 3 ms taking the connection
 * back: charged to the first request, from the reader's thread. (10 s
 * windows: a tail that crosses a window's end has been emitted and is no
 * longer folded.) Each charge is checked against the thread's own CPU
 * clock read around the work it covers - inside it (the burn, what must at
 * least be there) and around it (from before the thread's wait to after
 * its next one, what it cannot exceed) - not against the burn alone: on a
 * busy VM a thread's CPU in the syscalls at either end of its burn (a
 * page fault, an interrupt's work, a stalled vCPU) is its own CPU too, and
 * the kernel rightly charges it. The hand-off hook is attached on demand:
 * a first pool request (pipe1) has it attached before the case begins.
 */
struct tail2 {
	int lfd, fd[2], efd;
	pthread_mutex_t q, busy;
	pthread_cond_t cv;
	int njobs, taken, tail_done;
	pid_t reader, worker;
	/* the threads' own CPU clocks (ns) around what each charge covers:
	 * in_* inside it, out_* around it */
	uint64_t in_job, out_job, in_back, out_back;
};

/* 1 if thread tid of this process is asleep (state S in /proc/self/task/<tid>/stat). */
static int thread_asleep(pid_t tid)
{
	char path[64], buf[512], *rp;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	if (!(f = fopen(path, "r")))
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return (rp = strrchr(buf, ')')) && rp[1] == ' ' && rp[2] == 'S';
}

/* Spins (without sleeping) until thread tid is asleep, at most 2-3 s; 1 if it is. */
static int spin_until_asleep(pid_t tid)
{
	struct timespec now;
	time_t until;

	clock_gettime(CLOCK_MONOTONIC, &now);
	until = now.tv_sec + 3;
	while (clock_gettime(CLOCK_MONOTONIC, &now) == 0 && now.tv_sec < until)
		if (thread_asleep(tid))
			return 1;
	return 0;
}

static void *tail2_worker(void *arg)
{
	struct tail2 *t = arg;
	char buf[400];
	int i;

	__atomic_store_n(&t->worker, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	memset(buf, 'w', sizeof(buf));
	for (i = 0; i < 2; i++) {
		uint64_t c0 = thread_cpu_ns(), c1;

		pthread_mutex_lock(&t->q);
		while (t->taken == t->njobs)
			pthread_cond_wait(&t->cv, &t->q);
		t->taken++;
		pthread_mutex_unlock(&t->q);
		/* The case is a reader asleep when the first reply's completion
		 * wakes it: on a loaded machine it may not have got there yet. */
		if (i == 0 && !spin_until_asleep(__atomic_load_n(&t->reader, __ATOMIC_ACQUIRE)))
			fprintf(stderr, "the reader did not go to sleep within 2 s\n");
		c1 = thread_cpu_ns();
		burn_ms(5);
		if (i == 1)
			t->in_job = thread_cpu_ns() - c1;
		if (send(t->fd[i], buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
			perror("send");
		if (i == 1)
			t->out_job = thread_cpu_ns() - c0;
		if (i == 0) { /* the tail */
			uint64_t one = 1;

			if (write(t->efd, &one, sizeof(one)) != sizeof(one))
				perror("write");
			burn_ms(2);
			pthread_mutex_lock(&t->busy); /* held by the test: blocks */
			pthread_mutex_unlock(&t->busy);
			burn_ms(2);
			__atomic_store_n(&t->tail_done, 1, __ATOMIC_RELEASE);
		}
	}
	return NULL;
}

static void *tail2_reader(void *arg)
{
	struct tail2 *t = arg;
	int i;

	uint64_t c0 = 0;

	__atomic_store_n(&t->reader, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	for (i = 0; i < 2; i++) {
		char buf[60];

		t->fd[i] = accept(t->lfd, NULL, NULL);
		if (i == 1)
			t->out_back = thread_cpu_ns() - c0;
		if (t->fd[i] < 0 || recv(t->fd[i], buf, sizeof(buf), MSG_WAITALL) != (ssize_t)sizeof(buf))
			return NULL;
		pthread_mutex_lock(&t->q);
		t->njobs++;
		pthread_cond_signal(&t->cv);
		pthread_mutex_unlock(&t->q);
		if (i == 0) {
			uint64_t n, c1;

			c0 = thread_cpu_ns();
			if (read(t->efd, &n, sizeof(n)) != sizeof(n)) /* the first reply went out */
				return NULL;
			c1 = thread_cpu_ns();
			burn_ms(3);
			t->in_back = thread_cpu_ns() - c1;
		}
	}
	return NULL;
}

/* What a charge may differ from its thread's clock by: clock reads and the
 * steal the runqueue clock has not seen yet at a send (a tick's worth at
 * most, on a quiet host microseconds) */
#define TAIL2_SLACK_NS 300000ULL

/* Waits up to ms for thread tid of this process to sleep (state S); 1 if it does. */
static int wait_sleeping(pid_t tid, int ms)
{
	char path[64], buf[256];
	int i;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	for (i = 0; i < ms; i++) {
		FILE *f = fopen(path, "r");
		const char *st = NULL;

		if (f && fgets(buf, sizeof(buf), f) && (st = strrchr(buf, ')')) && st[1] == ' ' && st[2] == 'S') {
			fclose(f);
			return 1;
		}
		if (f)
			fclose(f);
		usleep(1000);
	}
	return 0;
}

static void test_follow_replies_tail(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct col_bpf_cfg cfg = { .window_ns = 10000000000ULL, .follow_replies = 1, .cpu_counters = cpu_counters };
	struct tail2 t = { .lfd = -1, .fd = { -1, -1 } };
	const struct rm_part *req = NULL, *first = NULL;
	struct col_bpf *b = NULL;
	uint64_t cpu = 0, unseg = 0, back = 0, unseg0 = 0;
	pthread_t tw, tr;
	size_t i;
	int cfd[2], rv, port;

	nparts = 0;
	nwins = 0;
	pthread_mutex_init(&t.q, NULL);
	pthread_mutex_init(&t.busy, NULL);
	pthread_cond_init(&t.cv, NULL);
	if ((rv = col_bpf_open(&b, &cfg)) != RM_OK)
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	CU_ASSERT_FATAL(pipe1_request(b));
	CU_ASSERT_FATAL(wait_handoff_hook(b));
	/* what the first request left unsegmented, reported (every 100 ms) */
	usleep(150000);
	CU_ASSERT_EQUAL(col_bpf_poll(b, &sink, 10), RM_OK);
	for (i = 0; i < nwins; i++)
		unseg0 += wins[i].unseg_cpu_ns;
	CU_ASSERT_FATAL((port = listen_explicit(&t.lfd)) > 0);
	/* the reader waits once between taking the connection back and its
	 * next request (accept returns with the request's bytes there): with
	 * CPU counters, a thread that waits twice before its next edge has the
	 * CPU before its first wait counted unsegmented (docs/cpu-counters.md),
	 * which on a loaded machine its recv racing the test's send would do */
	CU_ASSERT_FATAL(setsockopt(t.lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &(int){ 5 }, sizeof(int)) == 0);
	CU_ASSERT_FATAL((t.efd = eventfd(0, EFD_CLOEXEC)) >= 0);
	a.sin_port = htons((uint16_t)port);
	pthread_mutex_lock(&t.busy);
	pthread_create(&tw, NULL, tail2_worker, &t);
	pthread_create(&tr, NULL, tail2_reader, &t);
	/* the first request is handed over only if the worker already waits for it */
	while (!__atomic_load_n(&t.worker, __ATOMIC_ACQUIRE))
		usleep(1000);
	for (i = 0; i < 3000 && !thread_asleep(t.worker); i++)
		usleep(1000); /* on a loaded machine it may take a while to get there */
	usleep(20000);
	for (i = 0; i < 2; i++) {
		char q[60], r[400];

		memset(q, 'q', sizeof(q));
		cfd[i] = socket(AF_INET, SOCK_STREAM, 0);
		CU_ASSERT_FATAL(connect(cfd[i], (struct sockaddr *)&a, sizeof(a)) == 0);
		CU_ASSERT_FATAL(send(cfd[i], q, sizeof(q), 0) == (ssize_t)sizeof(q));
		CU_ASSERT_EQUAL(recv(cfd[i], r, sizeof(r), MSG_WAITALL), (ssize_t)sizeof(r));
		if (i == 0) {
			/* let the worker block on the lock, then finish its tail and wait */
			usleep(20000);
			pthread_mutex_unlock(&t.busy);
			while (!__atomic_load_n(&t.tail_done, __ATOMIC_ACQUIRE))
				usleep(1000);
			/* the next request is a hand-off only if the worker sleeps in its wait */
			CU_ASSERT(wait_sleeping(t.worker, 1000));
			usleep(20000);
		}
	}
	pthread_join(tr, NULL);
	pthread_join(tw, NULL);
	for (i = 0; i < 2; i++) {
		close(cfd[i]);
		close(t.fd[i]);
	}
	close(t.lfd);
	close(t.efd);
	drain_close(b);

	/* the reader's segment of the second request, and of the first */
	CU_ASSERT_PTR_NOT_NULL_FATAL(req = last_request(t.reader, port));
	for (i = 0; i < nparts; i++)
		if (parts[i].tid == (uint32_t)t.reader && (parts[i].flags & RM_PF_START) &&
		    !(parts[i].flags & RM_PF_CONT) && parts[i].in.cookie != req->in.cookie)
			first = &parts[i];
	CU_ASSERT_PTR_NOT_NULL_FATAL(first);
	for (i = 0; i < nparts; i++) {
		const struct rm_part *q = &parts[i];

		if (q->tid == (uint32_t)t.worker && (q->flags & RM_PF_ANCHOR) && q->in.cookie == req->in.cookie)
			cpu += q->cpu_ns;
		if (q->tid == (uint32_t)t.reader && (q->flags & (RM_PF_CONT | RM_PF_ANCHOR)) == (RM_PF_CONT | RM_PF_ANCHOR)) {
			CU_ASSERT_EQUAL(q->in.cookie, first->in.cookie);
			CU_ASSERT_EQUAL(q->in_seq_start, first->in_seq_start);
			CU_ASSERT_EQUAL(q->in_seq_end, first->in_seq_end);
			back += q->cpu_ns;
		}
	}
	for (i = 0; i < nwins; i++)
		unseg += wins[i].unseg_cpu_ns;
	fprintf(stderr, "worker cpu anchored to the second request %.3f ms (its own clock %.3f..%.3f ms; 4 ms of tail "
			"before it), reader's taking back the first %.3f ms (its own clock %.3f..%.3f ms)\n",
		cpu / 1e6, t.in_job / 1e6, t.out_job / 1e6, back / 1e6, t.in_back / 1e6, t.out_back / 1e6);
	CU_ASSERT(t.in_job >= 5000000ULL && t.in_back >= 3000000ULL); /* the burns are inside */
	CU_ASSERT(cpu + TAIL2_SLACK_NS >= t.in_job && cpu <= t.out_job + TAIL2_SLACK_NS);
	CU_ASSERT(back + TAIL2_SLACK_NS >= t.in_back && back <= t.out_back + TAIL2_SLACK_NS);
	CU_ASSERT(unseg - unseg0 >= 4000000ULL); /* the tail */
	check_identity();
	pthread_mutex_destroy(&t.q);
	pthread_mutex_destroy(&t.busy);
	pthread_cond_destroy(&t.cv);
}

/*
 * A unix stream socket between two threads of a server: the front thread
 * reads a TCP request, passes n bytes to the back thread over a socketpair,
 * which burns 20 ms and answers 50 bytes. Both ends' sends and recvs carry
 * the other end's identity and the bytes' positions in the stream, counted
 * from the socket's birth, so the aggregator pairs them like TCP.
 */
struct upair {
	int lfd, u[2];
	pid_t front, back;
	size_t n; /* bytes from the front to the back thread */
};

static void *upair_back(void *arg)
{
	struct upair *x = arg;
	char buf[4096];
	size_t got = 0;

	x->back = (pid_t)syscall(SYS_gettid);
	while (got < x->n) {
		size_t want = x->n - got < sizeof(buf) ? x->n - got : sizeof(buf);
		ssize_t n = recv(x->u[1], buf, want, 0);

		if (n <= 0)
			return NULL;
		got += (size_t)n;
	}
	burn_ms(20);
	if (send(x->u[1], buf, 50, 0) != 50)
		perror("send");
	return NULL;
}

static void *upair_front(void *arg)
{
	struct upair *x = arg;
	char buf[100], *big;
	size_t got = 0;
	int fd;

	x->front = (pid_t)syscall(SYS_gettid);
	fd = accept(x->lfd, NULL, NULL);
	while (fd >= 0 && got < 60) {
		ssize_t n = recv(fd, buf + got, 60 - got, 0);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	big = malloc(x->n);
	if (big)
		memset(big, 'u', x->n);
	if (!big || send(x->u[0], big, x->n, 0) != (ssize_t)x->n || recv(x->u[0], buf, 50, MSG_WAITALL) != 50 ||
	    send(fd, buf, 50, 0) != 50)
		perror("front");
	free(big);
	close(fd);
	return NULL;
}

static void unix_pairing(size_t n)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	/* one window for the whole case: it checks the ranges of one segment each, not window cuts */
	struct col_bpf_cfg cfg = { .window_ns = 3600000000000ULL, .offset_ns = wall_offset_ns(),
				   .cpu_counters = cpu_counters };
	struct upair x = { -1, { -1, -1 }, 0, 0, n };
	const struct rm_part *fsend = NULL, *brecv = NULL, *bsend = NULL, *frecv = NULL;
	socklen_t alen = sizeof(a);
	cpu_set_t all, one;
	int loader_cpu, c;
	struct col_bpf *b = NULL;
	pthread_t tf, tb;
	char buf[60];
	uint64_t cpu = 0;
	size_t i;
	int cfd, rv;

	nparts = 0;
	nwins = 0;
	loader_cpu = sched_getcpu();
	if ((rv = col_bpf_open(&b, &cfg)) != RM_OK)
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	usleep(20000); /* sockets born after the collector started, on the coarse clock */
	/* the pair born on another CPU than the loader's: numbered from that
	 * CPU's own batch of socket numbers */
	CU_ASSERT_FATAL(sched_getaffinity(0, sizeof(all), &all) == 0);
	for (c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all) && c != loader_cpu) {
			CPU_ZERO(&one);
			CPU_SET(c, &one);
			if (sched_setaffinity(0, sizeof(one), &one) == 0)
				break;
		}
	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, x.u) == 0);
	CU_ASSERT_FATAL(sched_setaffinity(0, sizeof(all), &all) == 0);
	x.lfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(bind(x.lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(x.lfd, 1) == 0 &&
			getsockname(x.lfd, (struct sockaddr *)&a, &alen) == 0);
	pthread_create(&tb, NULL, upair_back, &x);
	pthread_create(&tf, NULL, upair_front, &x);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	memset(buf, 'q', sizeof(buf));
	CU_ASSERT_FATAL(connect(cfd, (struct sockaddr *)&a, sizeof(a)) == 0 && send(cfd, buf, 60, 0) == 60);
	CU_ASSERT_EQUAL(recv(cfd, buf, 50, MSG_WAITALL), 50);
	pthread_join(tf, NULL);
	pthread_join(tb, NULL);
	close(cfd);
	close(x.lfd);
	close(x.u[0]);
	close(x.u[1]);
	drain_close(b);

	for (i = 0; i < nparts; i++) {
		const struct rm_part *p = &parts[i];

		if (p->tid == (uint32_t)x.front && (p->flags & RM_PF_END) && p->out.family == RM_AF_UNIX)
			fsend = p;
		if (p->tid == (uint32_t)x.front && (p->flags & RM_PF_START) && p->in.family == RM_AF_UNIX)
			frecv = p;
		if (p->tid == (uint32_t)x.back && (p->flags & RM_PF_START) && p->in.family == RM_AF_UNIX)
			brecv = p;
		if (p->tid == (uint32_t)x.back && (p->flags & RM_PF_END) && p->out.family == RM_AF_UNIX)
			bsend = p;
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(fsend);
	CU_ASSERT_PTR_NOT_NULL_FATAL(brecv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(bsend);
	CU_ASSERT_PTR_NOT_NULL_FATAL(frecv);
	/* front -> back: the same n bytes, seen from both ends */
	CU_ASSERT(fsend->flags & RM_PF_OUT_SEQ);
	CU_ASSERT(brecv->flags & RM_PF_IN_SEQ);
	CU_ASSERT_EQUAL(fsend->out_seq_start, 0);
	CU_ASSERT_EQUAL(fsend->out_seq_end, n);
	CU_ASSERT_EQUAL(brecv->in_seq_start, 0);
	CU_ASSERT_EQUAL(brecv->in_seq_end, n);
	CU_ASSERT(fsend->out.laddr[0] | fsend->out.laddr[1]);
	CU_ASSERT_EQUAL(memcmp(fsend->out.laddr, brecv->in.raddr, 8), 0);
	CU_ASSERT_EQUAL(memcmp(fsend->out.raddr, brecv->in.laddr, 8), 0);
	/* back -> front: 50 bytes, numbered even when the front reads them
	 * before the back's send hook counted them (a socket pair born on
	 * another CPU than the collector's loader) */
	CU_ASSERT(bsend->flags & RM_PF_OUT_SEQ);
	CU_ASSERT(frecv->flags & RM_PF_IN_SEQ);
	CU_ASSERT_EQUAL(bsend->out_seq_start, 0);
	CU_ASSERT_EQUAL(bsend->out_seq_end, 50);
	CU_ASSERT_EQUAL(frecv->in_seq_start, 0);
	CU_ASSERT_EQUAL(frecv->in_seq_end, 50);
	CU_ASSERT_EQUAL(memcmp(bsend->out.laddr, frecv->in.raddr, 8), 0);
	CU_ASSERT_EQUAL(bsend->seg_id, brecv->seg_id);
	for (i = 0; i < nparts; i++)
		if (parts[i].seg_id == brecv->seg_id && parts[i].tid == (uint32_t)x.back)
			cpu += parts[i].cpu_ns;
	fprintf(stderr, "back thread's segment over the unix socket %.3f ms\n", cpu / 1e6);
	CU_ASSERT(cpu >= 19000000ULL && cpu <= 30000000ULL);
	check_identity();
}

static void test_unix_pairing(void)
{
	unix_pairing(100);
}

/*
 * A send larger than the socket's buffer: the receiver reads its first
 * bytes, and empties the queue, while the sender is still inside its send
 * and has counted none of them. Both ends must still number them alike.
 */
static void test_unix_pairing_large(void)
{
	unix_pairing(4 << 20);
}

/*
 * A connection older than the collector, with 100 bytes queued before it
 * started: nobody counted them, so the read that takes them carries no
 * position; the next 100 bytes, sent and read once both ends are in step,
 * carry the same range at both ends.
 */
static void test_unix_older(void)
{
	struct col_bpf_cfg cfg = { .window_ns = 3600000000000ULL, .offset_ns = wall_offset_ns(),
				   .cpu_counters = cpu_counters };
	uint32_t tid = (uint32_t)syscall(SYS_gettid);
	const struct rm_part *first = NULL, *second = NULL, *sent = NULL;
	struct col_bpf *b = NULL;
	char buf[100];
	struct stat st;
	size_t i;
	int u[2], rv;

	nparts = 0;
	nwins = 0;
	memset(buf, 'o', sizeof(buf));
	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, u) == 0 && fstat(u[1], &st) == 0);
	CU_ASSERT_FATAL(send(u[0], buf, sizeof(buf), 0) == (ssize_t)sizeof(buf));
	if ((rv = col_bpf_open(&b, &cfg)) != RM_OK) {
		close(u[0]);
		close(u[1]);
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	}
	CU_ASSERT(recv(u[1], buf, sizeof(buf), MSG_WAITALL) == (ssize_t)sizeof(buf));
	CU_ASSERT(send(u[0], buf, sizeof(buf), 0) == (ssize_t)sizeof(buf));
	CU_ASSERT(recv(u[1], buf, sizeof(buf), MSG_WAITALL) == (ssize_t)sizeof(buf));
	CU_ASSERT(send(u[1], buf, 10, 0) == 10); /* ends the second read's segment */
	close(u[0]);
	close(u[1]);
	drain_close(b);

	for (i = 0; i < nparts; i++) {
		const struct rm_part *p = &parts[i];

		if (p->tid != tid)
			continue;
		if ((p->flags & RM_PF_START) && p->in.family == RM_AF_UNIX &&
		    ((uint64_t)p->in.laddr[1] << 32 | p->in.laddr[0]) == (uint64_t)st.st_ino) {
			if (!first)
				first = p;
			else if (!second && p->seg_id != first->seg_id)
				second = p;
		}
		if (!sent && (p->flags & RM_PF_OUT_SEQ) && p->out.family == RM_AF_UNIX &&
		    ((uint64_t)p->out.raddr[1] << 32 | p->out.raddr[0]) == (uint64_t)st.st_ino)
			sent = p; /* the first read's segment sent them */
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(first);
	CU_ASSERT_PTR_NOT_NULL_FATAL(second);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sent);
	CU_ASSERT(!(first->flags & RM_PF_IN_SEQ));
	CU_ASSERT(second->flags & RM_PF_IN_SEQ);
	CU_ASSERT_EQUAL(second->in_seq_end - second->in_seq_start, sizeof(buf));
	CU_ASSERT_EQUAL(second->in_seq_start, sent->out_seq_start);
	CU_ASSERT_EQUAL(second->in_seq_end, sent->out_seq_end);
	check_identity();
}

/*
 * Overload: a ring of one page and a consumer that does not read while 40
 * requests are served. Parts the kernel cannot emit are counted per window,
 * their CPU stays in lost and their bytes in unsegmented (the identity
 * holds), and the dropped_* counters say how much of those the drops were.
 */
static void test_drops(void)
{
	struct col_bpf_cfg cfg = { .window_ns = 1000000000ULL, .ring_bytes = 4096, .cpu_counters = cpu_counters };
	uint64_t dparts = 0, dcpu = 0, drx = 0, dtx = 0, rx_parts = 0;
	struct col_bpf_stats st;
	struct col_bpf *b = NULL;
	size_t i;
	int rv;

	nparts = 0;
	nwins = 0;
	if ((rv = col_bpf_open(&b, &cfg)) != RM_OK)
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	for (i = 0; i < 40; i++) /* the consumer is stalled meanwhile */
		CU_ASSERT_EQUAL(simple_exchange(50, 300, 1), 0);
	CU_ASSERT_EQUAL(col_bpf_poll(b, &sink, 0), RM_OK);
	CU_ASSERT_EQUAL(col_bpf_finish(b, &sink), RM_OK);
	col_bpf_get_stats(b, &st);
	col_bpf_close(b);
	for (i = 0; i < nwins; i++) {
		const struct rm_totals *t = &wins[i];

		dparts += t->dropped_parts;
		dcpu += t->dropped_cpu_ns;
		drx += t->dropped_rx;
		dtx += t->dropped_tx;
		CU_ASSERT(t->dropped_cpu_ns <= t->lost_ns);
		CU_ASSERT(t->dropped_rx <= t->unseg_rx);
		CU_ASSERT(t->dropped_tx <= t->unseg_tx);
		CU_ASSERT(t->dropped_disk_read <= t->unseg_disk_read);
		CU_ASSERT(t->dropped_disk_write <= t->unseg_disk_write);
	}
	for (i = 0; i < nparts; i++)
		if (parts[i].pid == (uint32_t)getpid() && (parts[i].flags & RM_PF_START) && parts[i].rx_bytes == 50)
			rx_parts++;
	fprintf(stderr, "ring of 4096 B, stalled consumer: %zu parts read, %llu dropped (%llu ns cpu, %llu B rx, %llu B tx)\n",
		nparts, (unsigned long long)dparts, (unsigned long long)dcpu, (unsigned long long)drx,
		(unsigned long long)dtx);
	CU_ASSERT(dparts > 0);
	CU_ASSERT_EQUAL(dparts, st.dropped_parts);
	CU_ASSERT(dcpu > 0);
	/* every server segment (50 B in, 300 B out) was either read or dropped */
	CU_ASSERT(drx >= 50 * (40 - rx_parts));
	CU_ASSERT(dtx > 0);
	check_identity();
}

/* A child process that serves one exchange when told to (a byte on its pipe). */
static pid_t serve_child(int *go, const char *name)
{
	int p[2];
	pid_t pid;
	char c;

	if (pipe(p) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[1]);
		if (name)
			prctl(PR_SET_NAME, name, 0, 0, 0);
		if (read(p[0], &c, 1) != 1)
			_exit(3);
		_exit(simple_exchange(50, 300, 5) == 0 ? 0 : 1);
	}
	close(p[0]);
	*go = p[1];
	return pid;
}

/*
 * Rametr's own processes never appear in the accounting: a process named
 * like one (rametr-aggregator) and a process excluded by pid serve an
 * exchange each; neither has a single part, their bytes are unsegmented,
 * while a third, ordinary process's exchange is segmented as usual.
 */
static void test_exclusion(void)
{
	struct col_bpf_cfg cfg = { .window_ns = 1000000000ULL, .exclude_rametr = 1, .cpu_counters = cpu_counters };
	struct col_bpf *b = NULL;
	pid_t named, bypid, plain;
	int gn = -1, gp = -1, gq = -1, status, rv;
	size_t i, n_named = 0, n_bypid = 0, n_plain = 0;
	uint64_t unseg_rx = 0;

	nparts = 0;
	nwins = 0;
	if ((rv = col_bpf_open(&b, &cfg)) != RM_OK)
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	named = serve_child(&gn, "rametr-aggregat");
	bypid = serve_child(&gp, NULL);
	plain = serve_child(&gq, NULL);
	CU_ASSERT_FATAL(named > 0 && bypid > 0 && plain > 0);
	CU_ASSERT_EQUAL(col_bpf_exclude(b, (uint32_t)bypid), RM_OK);
	CU_ASSERT_EQUAL(col_bpf_exclude(b, 0), RM_EINVAL);
	usleep(20000); /* let the named child set its name */
	CU_ASSERT_EQUAL(write(gn, "g", 1), 1);
	CU_ASSERT_EQUAL(write(gp, "g", 1), 1);
	CU_ASSERT_EQUAL(write(gq, "g", 1), 1);
	close(gn);
	close(gp);
	close(gq);
	CU_ASSERT(waitpid(named, &status, 0) == named && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CU_ASSERT(waitpid(bypid, &status, 0) == bypid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CU_ASSERT(waitpid(plain, &status, 0) == plain && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CU_ASSERT_EQUAL(col_bpf_poll(b, &sink, 0), RM_OK);
	CU_ASSERT_EQUAL(col_bpf_finish(b, &sink), RM_OK);
	col_bpf_close(b);
	for (i = 0; i < nparts; i++) {
		n_named += parts[i].pid == (uint32_t)named;
		n_bypid += parts[i].pid == (uint32_t)bypid;
		if (parts[i].pid == (uint32_t)plain && (parts[i].flags & RM_PF_START) && parts[i].rx_bytes == 50)
			n_plain++;
	}
	for (i = 0; i < nwins; i++)
		unseg_rx += wins[i].unseg_rx;
	CU_ASSERT_EQUAL(n_named, 0);
	CU_ASSERT_EQUAL(n_bypid, 0);
	CU_ASSERT_EQUAL(n_plain, 1);
	/* both excluded exchanges (50 B request, 300 B reply) count as unsegmented */
	CU_ASSERT(unseg_rx >= 2 * (50 + 300));
	check_identity();
}

/*
 * Run-queue wait. The kernel side reads it from the scheduler's sched_info
 * when a thread gets the CPU (no wake-up hooks); the thread's own
 * /proc/thread-self/schedstat (run_delay, the same counter as the kernel
 * keeps it) read around its segment's work is the reference.
 */
struct rq_srv {
	int lfd;
	volatile int stop;
	pid_t tid;
	/* schedstat run_delay before and after the recv, before and after the send */
	uint64_t rd_pre, rd0, rd1, rd_post;
};

static void pin_cpu0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static uint64_t run_delay_ns(void)
{
	unsigned long long on = 0, wait = 0;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &on, &wait) != 2)
		wait = 0;
	fclose(f);
	return wait;
}

static void *rq_spinner(void *arg)
{
	struct rq_srv *x = arg;

	pin_cpu0();
	while (!x->stop)
		burn_ms(1);
	return NULL;
}

static void *rq_server(void *arg)
{
	struct rq_srv *x = arg;
	char buf[64];
	int fd;

	pin_cpu0();
	x->tid = (pid_t)syscall(SYS_gettid);
	fd = accept(x->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	x->rd_pre = run_delay_ns();
	if (recv(fd, buf, 10, MSG_WAITALL) == 10) {
		x->rd0 = run_delay_ns();
		burn_ms(40); /* sharing CPU 0 with the spinner: waits about as long */
		x->rd1 = run_delay_ns();
		memset(buf, 'r', 10);
		if (send(fd, buf, 10, 0) != 10)
			x->rd1 = 0;
		x->rd_post = run_delay_ns();
	}
	close(fd);
	return NULL;
}

/*
 * Listens on loopback (*lfd, before fn starts), runs fn(arg) on a thread
 * (*th) to serve, connects, sends a 10-byte request and reads the 10-byte
 * reply. Returns the client socket, open, or -1 (asserted).
 */
static int exchange10(int *lfd, pthread_t *th, void *(*fn)(void *), void *arg)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	char buf[10];
	int cfd;

	*lfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(bind(*lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CU_ASSERT_FATAL(listen(*lfd, 1) == 0);
	CU_ASSERT_FATAL(getsockname(*lfd, (struct sockaddr *)&a, &alen) == 0);
	pthread_create(th, NULL, fn, arg);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(connect(cfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	memset(buf, 'q', sizeof(buf));
	CU_ASSERT_FATAL(send(cfd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf));
	CU_ASSERT(recv(cfd, buf, sizeof(buf), MSG_WAITALL) == (ssize_t)sizeof(buf));
	return cfd;
}

/* run_delay is read in ns on both sides; this is rounding, not tolerance */
#define RUNQ_SLACK_NS 1000ULL

static void test_runq(void)
{
	struct rq_srv x = { 0 };
	const struct rm_part *end;
	struct col_bpf *b = NULL;
	pthread_t srv, spin;
	uint64_t runq, ref, outer;
	int cfd, rv, i;

	nparts = 0;
	nwins = 0;
	if ((rv = open_or_skip(&b)) != RM_OK)
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	pthread_create(&spin, NULL, rq_spinner, &x);
	cfd = exchange10(&x.lfd, &srv, rq_server, &x);
	pthread_join(srv, NULL);
	x.stop = 1;
	pthread_join(spin, NULL);
	close(cfd);
	close(x.lfd);
	for (i = 0; i < 5; i++)
		CU_ASSERT_EQUAL(col_bpf_poll(b, &sink, 100), RM_OK);
	CU_ASSERT_EQUAL(col_bpf_finish(b, &sink), RM_OK);
	col_bpf_close(b);
	end = find_part(x.tid, RM_PF_END);
	CU_ASSERT_PTR_NOT_NULL_FATAL(end);
	CU_ASSERT_FATAL(x.rd1 > x.rd0 && x.rd_post >= x.rd1 && x.rd0 >= x.rd_pre);
	runq = seg_sum(end->seg_id, x.tid, 4);
	ref = x.rd1 - x.rd0;
	outer = x.rd_post - x.rd_pre;
	fprintf(stderr, "segment runq %.3f ms, schedstat run_delay %.3f ms inside it, %.3f ms around it\n",
		runq / 1e6, ref / 1e6, outer / 1e6);
	/* it waited: the spinner holds CPU 0 about half the time */
	CU_ASSERT(ref >= 10000000ULL);
	/* the scheduler's own waits, read inside the segment (after the recv,
	 * before the send) and around it (before the recv, after the send): on
	 * a loaded machine the waits in the syscalls at either end are long
	 * and belong to one or the other side of the segment's edges */
	CU_ASSERT(runq + RUNQ_SLACK_NS >= ref);
	CU_ASSERT(runq <= outer + RUNQ_SLACK_NS);
	check_identity();
}

/*
 * The request's tail on the real kernel (default configuration): a server
 * answers after 5 ms of work, burns 20 ms more (its tail), sleeps 30 ms
 * (its first wait: the tail ends) and burns 10 ms that belong to no request
 * before the client's close. The segment's associated parts hold the 20 ms,
 * not the 10 ms after the sleep.
 */
struct tail_srv {
	int lfd;
	pid_t tid;
	int ok;
};

static void *tail_server(void *arg)
{
	struct tail_srv *x = arg;
	char buf[16];
	int fd;

	x->tid = (pid_t)syscall(SYS_gettid);
	fd = accept(x->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	if (recv(fd, buf, 10, MSG_WAITALL) == 10) {
		burn_ms(5);
		memset(buf, 'r', 10);
		x->ok = send(fd, buf, 10, 0) == 10;
		burn_ms(20);
		usleep(30000);
		burn_ms(10);
		x->ok = x->ok && recv(fd, buf, sizeof(buf), 0) == 0;
	}
	close(fd);
	return NULL;
}

static void test_tail(void)
{
	struct tail_srv x = { 0 };
	const struct rm_part *end;
	struct col_bpf *b = NULL;
	uint64_t seg_cpu, tail_cpu = 0;
	pthread_t srv;
	size_t i;
	int cfd, rv;

	nparts = 0;
	nwins = 0;
	if ((rv = open_or_skip(&b)) != RM_OK)
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	cfd = exchange10(&x.lfd, &srv, tail_server, &x);
	close(cfd);
	pthread_join(srv, NULL);
	close(x.lfd);
	drain_close(b);
	CU_ASSERT(x.ok);
	end = find_part(x.tid, RM_PF_END);
	CU_ASSERT_PTR_NOT_NULL_FATAL(end);
	for (i = 0; i < nparts; i++)
		if (parts[i].seg_id == end->seg_id && parts[i].tid == (uint32_t)x.tid && (parts[i].flags & RM_PF_ASSOC)) {
			CU_ASSERT_EQUAL(parts[i].in.cookie, end->in.cookie);
			tail_cpu += parts[i].cpu_ns;
		}
	seg_cpu = seg_sum(end->seg_id, x.tid, 0) - tail_cpu;
	fprintf(stderr, "segment cpu %.3f ms, its tail %.3f ms\n", seg_cpu / 1e6, tail_cpu / 1e6);
	CU_ASSERT(seg_cpu >= 4500000ULL && seg_cpu <= 12000000ULL);
	/* with the counters, CPU after the wait but before the thread was last
	 * preempted is not told from the tail (docs/cpu-counters.md): up to the
	 * 10 ms after the sleep when the machine is busy */
	CU_ASSERT(tail_cpu >= 19000000ULL && tail_cpu <= (cpu_counters ? 37000000ULL : 27000000ULL));
	check_identity();
}

/*
 * Each segment's CPU against the thread's own CPU clock
 * (CLOCK_THREAD_CPUTIME_ID) read just after its recv and just before its
 * send: 200 requests of 50-450 us of work, every third with a sleep in the
 * middle. The segment also holds the rest of the recv call, the clock reads
 * and the send up to its tracepoint - on loopback that includes delivering
 * the bytes to the peer, 5-40 us here (and, after a wait, the request's
 * head) - and is never less than the clock says, give or take a few
 * requests whose edges fell in a slice the hypervisor stole from.
 */
#define PREC_N 200

struct prec_srv {
	int lfd;
	pid_t tid;
	uint64_t cpu[PREC_N];
	int ok;
};

static void burn_us(unsigned us)
{
	uint64_t end = thread_cpu_ns() + (uint64_t)us * 1000ULL, x = 1;

	while (thread_cpu_ns() < end)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	sink_hole = x;
}

static void *prec_server(void *arg)
{
	struct prec_srv *x = arg;
	char buf[8];
	uint64_t t0;
	int fd, i;

	x->tid = (pid_t)syscall(SYS_gettid);
	fd = accept(x->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	for (i = 0; i < PREC_N; i++) {
		if (recv(fd, buf, sizeof(buf), MSG_WAITALL) != (ssize_t)sizeof(buf))
			break;
		t0 = thread_cpu_ns();
		burn_us(50 + (unsigned)(i * 37 % 200));
		if (i % 3 == 0)
			usleep(300);
		burn_us(50 + (unsigned)(i * 53 % 200));
		x->cpu[i] = thread_cpu_ns() - t0;
		if (send(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
			break;
	}
	x->ok = i == PREC_N;
	close(fd);
	return NULL;
}

/* How far below the thread's clock a slice-path segment may be: measured 1-11 of 200 requests below, by
 * 1-18 us (docs/cpu-counters.md), once 31 of 200 in a CI run (by how much was not printed then); a read
 * that missed the running slice would be 100-400 us below */
#define PREC_SLICE_TOL_NS 25000

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void test_cpu_precision(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	struct prec_srv x = { 0 };
	struct { uint64_t start, seg, cpu; } segs[PREC_N + 8];
	uint64_t err[PREC_N], below = 0;
	struct col_bpf *b = NULL;
	pthread_t srv;
	char buf[8] = "request";
	size_t i, j, n = 0;
	int cfd, rv, k, nbelow = 0;

	nparts = 0;
	nwins = 0;
	if ((rv = open_or_skip(&b)) != RM_OK)
		RM_TEST_SKIP("ebpf backend unavailable");
	x.lfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(bind(x.lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(x.lfd, 1) == 0 &&
			getsockname(x.lfd, (struct sockaddr *)&a, &alen) == 0);
	CU_ASSERT_FATAL(pthread_create(&srv, NULL, prec_server, &x) == 0);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(connect(cfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	for (k = 0; k < PREC_N; k++)
		if (send(cfd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf) ||
		    recv(cfd, buf, sizeof(buf), MSG_WAITALL) != (ssize_t)sizeof(buf))
			break;
	pthread_join(srv, NULL);
	close(cfd);
	close(x.lfd);
	drain_close(b);
	CU_ASSERT_FATAL(x.ok);
	/* the server's request segments (not their tails), in order */
	for (i = 0; i < nparts; i++) {
		const struct rm_part *p = &parts[i];

		if (p->tid != (uint32_t)x.tid || (p->flags & RM_PF_ASSOC) || p->in.lport != ntohs(a.sin_port))
			continue;
		for (j = 0; j < n; j++)
			if (segs[j].seg == p->seg_id)
				break;
		if (j == n) {
			if (n == PREC_N + 8)
				continue;
			segs[n].seg = p->seg_id;
			segs[n].start = p->start_ns;
			segs[n].cpu = 0;
			n++;
		}
		segs[j].cpu += p->cpu_ns;
	}
	CU_ASSERT_EQUAL_FATAL(n, PREC_N);
	for (i = 1; i < n; i++) /* by start time */
		for (j = i; j > 0 && segs[j].start < segs[j - 1].start; j--) {
			uint64_t t0 = segs[j].start, t1 = segs[j].seg, t2 = segs[j].cpu;

			segs[j] = segs[j - 1];
			segs[j - 1].start = t0;
			segs[j - 1].seg = t1;
			segs[j - 1].cpu = t2;
		}
	k = 0;
	for (i = 0; i < n; i++) {
		/* never less than the thread's clock (100 ns of rounding); the slice path by at most
		 * its measured few µs (docs/cpu-counters.md, *Precision*) */
		if (segs[i].cpu + 100 < x.cpu[i]) {
			nbelow++;
			err[i] = 0;
			if (x.cpu[i] - segs[i].cpu > below)
				below = x.cpu[i] - segs[i].cpu;
			k += segs[i].cpu + (cpu_counters ? 100 : PREC_SLICE_TOL_NS) < x.cpu[i];
		} else {
			err[i] = segs[i].cpu + 100 - x.cpu[i];
		}
	}
	qsort(err, n, sizeof(err[0]), cmp_u64);
	fprintf(stderr, "segment cpu - thread clock over %zu requests: median %.1f us, p95 %.1f us, max %.1f us, "
		"%d below (by up to %.1f us), %d beyond the tolerance\n", n, err[n / 2] / 1e3, err[n * 95 / 100] / 1e3,
		err[n - 1] / 1e3, nbelow, below / 1e3, k);
	/* a CPU read that missed the running slice would give 0 here, the
	 * thread's clock the full 100-400 us of work. The slice path is looser
	 * on this loaded VM (measured: p95 up to 300 us, a few requests 10-20 us
	 * below the clock; docs/cpu-counters.md) */
	CU_ASSERT(k <= (int)n / (cpu_counters ? 20 : 10));
	CU_ASSERT(err[n / 2] <= 50000);
	CU_ASSERT(err[n * 95 / 100] <= (cpu_counters ? 150000ULL : 500000ULL));
	check_identity();
}

/*
 * UDP: one server thread on an unconnected socket answers datagrams from
 * three clients (127.0.0.2..4), each request burning a known CPU time; half
 * read with recvfrom, half with recvmsg, answers with sendto and sendmsg.
 * Each client's CPU is checked against the server thread's own clock: at
 * least its reads from after each recv to before its send, at most its
 * reads from after the previous reply to after this one (the request's
 * head in the recv, the segment; its tail is the way back into the next
 * recv, a few microseconds). Windows of an hour: a datagram's sender is
 * known only at the thread's next socket call, so a part of its segment
 * emitted at a window's end before that names no sender (segmenter.h,
 * rm_on_dgram_src); with 1 s windows that happened in 8 of 12 runs on a
 * loaded machine, where the exchange spans more than a second.
 */
#define UDP_CLIENTS 3
#define UDP_ROUNDS 4
/* per request, what a segment's CPU may differ from the thread's clock
 * read around it by: each path's error at its edges (test_cpu_precision;
 * docs/cpu-counters.md: the slice path is off by up to a few ms at times on
 * a loaded VM, 2.3 ms over one client's 4 requests seen here) */
#define UDP_SLACK_NS (cpu_counters ? 300000ULL : 1000000ULL)

struct udp_srv {
	int fd;
	pid_t tid;
	int served;
	/* per client, the server thread's CPU clock (ns) inside and around its requests */
	uint64_t in[UDP_CLIENTS], out[UDP_CLIENTS];
};

static void *udp_server(void *arg)
{
	struct udp_srv *x = arg;
	char buf[256];
	int i;

	uint64_t pre = thread_cpu_ns(), c0, c1;
	int k = 0;

	x->tid = (pid_t)syscall(SYS_gettid);
	for (i = 0; i < UDP_CLIENTS * UDP_ROUNDS; i++) {
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr m = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n;

		n = (i & 1) ? recvmsg(x->fd, &m, 0) : recvfrom(x->fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
		c0 = thread_cpu_ns();
		if (n <= 0)
			return NULL;
		k = buf[0] / 4;
		if (k < 0 || k >= UDP_CLIENTS)
			return NULL;
		burn_ms(2 + (unsigned)buf[0]); /* client k asks for 2 + 4k ms */
		iov.iov_len = (size_t)n * 2;
		memset(buf + n, 'a', (size_t)n);
		c1 = thread_cpu_ns();
		if (((i & 2) ? sendmsg(x->fd, &m, 0) : sendto(x->fd, buf, (size_t)n * 2, 0, (struct sockaddr *)&from,
							       sizeof(from))) != n * 2)
			return NULL;
		x->in[k] += c1 - c0;
		if (i + 1 < UDP_CLIENTS * UDP_ROUNDS) {
			c1 = thread_cpu_ns();
			x->out[k] += c1 - pre;
			pre = c1;
		}
		x->served++;
	}
	x->out[k] += thread_cpu_ns() - pre; /* the last tail ends at the thread's exit */
	return NULL;
}

static void test_udp(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in ca[UDP_CLIENTS];
	socklen_t alen = sizeof(a);
	struct udp_srv x = { 0 };
	struct col_bpf *b = NULL;
	uint64_t cpu[UDP_CLIENTS] = { 0 }, nseg[UDP_CLIENTS] = { 0 };
	int cfd[UDP_CLIENTS], k, r, rv;
	pthread_t srv;
	char buf[64];
	size_t i;

	nparts = 0;
	nwins = 0;
	if ((rv = open_windows(&b, 3600ULL * 1000000000ULL)) != RM_OK)
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	x.fd = socket(AF_INET, SOCK_DGRAM, 0);
	CU_ASSERT_FATAL(bind(x.fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CU_ASSERT_FATAL(getsockname(x.fd, (struct sockaddr *)&a, &alen) == 0);
	for (k = 0; k < UDP_CLIENTS; k++) {
		memset(&ca[k], 0, sizeof(ca[k]));
		ca[k].sin_family = AF_INET;
		ca[k].sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1 + (uint32_t)k);
		alen = sizeof(ca[k]);
		cfd[k] = socket(AF_INET, SOCK_DGRAM, 0);
		CU_ASSERT_FATAL(bind(cfd[k], (struct sockaddr *)&ca[k], sizeof(ca[k])) == 0);
		CU_ASSERT_FATAL(getsockname(cfd[k], (struct sockaddr *)&ca[k], &alen) == 0);
	}
	pthread_create(&srv, NULL, udp_server, &x);
	for (r = 0; r < UDP_ROUNDS; r++)
		for (k = 0; k < UDP_CLIENTS; k++) {
			memset(buf, 'q', sizeof(buf));
			buf[0] = (char)(4 * k);
			CU_ASSERT(sendto(cfd[k], buf, 20, 0, (struct sockaddr *)&a, sizeof(a)) == 20);
			CU_ASSERT(recv(cfd[k], buf, sizeof(buf), 0) == 40);
		}
	pthread_join(srv, NULL);
	for (k = 0; k < UDP_CLIENTS; k++)
		close(cfd[k]);
	close(x.fd);
	drain_close(b);
	CU_ASSERT_EQUAL(x.served, UDP_CLIENTS * UDP_ROUNDS);
	/* every segment of the server thread names its client: address and port, in and out */
	for (i = 0; i < nparts; i++) {
		const struct rm_part *p = &parts[i];

		if (p->tid != (uint32_t)x.tid || p->in.lport != ntohs(a.sin_port))
			continue;
		for (k = 0; k < UDP_CLIENTS; k++)
			if (p->in.raddr[0] == ca[k].sin_addr.s_addr && p->in.rport == ntohs(ca[k].sin_port))
				break;
		CU_ASSERT_FATAL(k < UDP_CLIENTS);
		cpu[k] += p->cpu_ns;
		if (p->flags & RM_PF_END) {
			nseg[k]++;
			CU_ASSERT_EQUAL(p->out.raddr[0], ca[k].sin_addr.s_addr);
			CU_ASSERT_EQUAL(p->out.rport, ntohs(ca[k].sin_port));
			CU_ASSERT_EQUAL(p->rx_bytes, 20);
			CU_ASSERT_EQUAL(p->tx_bytes, 40);
		}
	}
	for (k = 0; k < UDP_CLIENTS; k++) {
		uint64_t want = (uint64_t)UDP_ROUNDS * (2 + 4 * k) * 1000000ULL;

		fprintf(stderr, "client %d: %llu segments, cpu %.3f ms (burned %.3f ms; the server's clock %.3f..%.3f ms)\n",
			k, (unsigned long long)nseg[k], cpu[k] / 1e6, want / 1e6, x.in[k] / 1e6, x.out[k] / 1e6);
		CU_ASSERT_EQUAL(nseg[k], UDP_ROUNDS);
		CU_ASSERT(x.in[k] >= want);
		CU_ASSERT(cpu[k] + UDP_ROUNDS * UDP_SLACK_NS >= x.in[k] && cpu[k] <= x.out[k] + UDP_ROUNDS * UDP_SLACK_NS);
	}
	check_identity();
}

#if defined(TB_GOSERVER_BIN) && defined(TB_GOLOAD_BIN)
/* Can a TCP connection to 127.0.0.1:port (port 0: a unix one to path) be made? */
static int can_connect(unsigned port, const char *path)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_un u = { .sun_family = AF_UNIX };
	int fd = socket(port ? AF_INET : AF_UNIX, SOCK_STREAM, 0), ok;

	if (!port)
		snprintf(u.sun_path, sizeof(u.sun_path), "%s", path);
	ok = fd >= 0 && (port ? connect(fd, (struct sockaddr *)&a, sizeof(a)) : connect(fd, (struct sockaddr *)&u,
											  sizeof(u))) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Runs load_args (output to log) to its end while b is polled, then a window's end more. */
static void run_go_load(struct col_bpf *b, const char *const load_args[], const char *log)
{
	pid_t load = rm_test_spawn(load_args, log);
	int status = -1, i;

	CU_ASSERT(load > 0);
	while (load > 0 && waitpid(load, &status, WNOHANG) == 0)
		CU_ASSERT_EQUAL(col_bpf_poll(b, &sink, 100), RM_OK);
	rm_test_forget(load);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* a window's end after the load: the sweep counts the threads' CPU since their last edge */
	for (i = 0; i < 12; i++)
		CU_ASSERT_EQUAL(col_bpf_poll(b, &sink, 100), RM_OK);
}

/*
 * tb-goserver (the executable bin: TB_GOSERVER_BIN or a copy) under
 * tb-goload's load on two connections, on loopback TCP or (unix_path not
 * NULL) a unix socket there, the collector opened after the server
 * started; *srv_pid: the server's pid.
 */
static void run_goserver_at(const char *bin, const char *unix_path, pid_t *srv_pid, struct col_bpf_stats *st)
{
	char addr[300], truth[400], log[400];
	const char *srv_args[] = { bin, "--listen", addr, "--procs", "2", "--truth", truth, NULL };
	const char *load_args[] = { TB_GOLOAD_BIN, "--server", addr, "--ce", "c1", "--path", "/light", "--rate", "200",
				    "--duration", "1.5", "--conns", "2", NULL };
	unsigned port = unix_path ? 0 : rm_test_free_port();
	struct col_bpf *b = NULL;
	pid_t srv;
	int i, rv;

	CU_ASSERT_FATAL(port != 0 || unix_path);
	if (unix_path)
		snprintf(addr, sizeof(addr), "unix:%s", unix_path);
	else
		snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	snprintf(truth, sizeof(truth), "%s/go-truth.csv", rm_test_tmpdir());
	snprintf(log, sizeof(log), "%s/go-runtime.log", rm_test_tmpdir());
	nparts = 0;
	nwins = 0;
	/* both are stopped at the test's exit if an assertion below ends it early */
	CU_ASSERT_FATAL((srv = rm_test_spawn(srv_args, log)) > 0);
	*srv_pid = srv;
	for (i = 0; i < 100 && !can_connect(port, unix_path); i++)
		usleep(20000);
	CU_ASSERT_FATAL(i < 100); /* tb-goserver listens (its output: go-runtime.log) */
	/* opened after the server started: the loader recognises it at once */
	if ((rv = open_or_skip(&b)) != RM_OK) {
		kill(srv, SIGKILL);
		rm_test_wait(srv, 5000);
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	}
	run_go_load(b, load_args, log);
	col_bpf_get_stats(b, st);
	kill(srv, SIGTERM);
	CU_ASSERT_EQUAL(rm_test_wait(srv, 10000), 0);
	drain_close(b);
}

static void run_goserver_bin(const char *bin, pid_t *srv_pid, struct col_bpf_stats *st)
{
	run_goserver_at(bin, NULL, srv_pid, st);
}

static void run_goserver(pid_t *srv_pid, struct col_bpf_stats *st)
{
	run_goserver_bin(TB_GOSERVER_BIN, srv_pid, st);
}

/* A Go server (the testbed's, recognised from its binary) and its load, also a Go program: their threads'
 * CPU outside requests is counted as a runtime's and as a Go program's, within the unsegmented CPU */
static void test_go_runtime(void)
{
	struct col_bpf_stats st;
	uint64_t rt = 0, go = 0;
	pid_t srv = 0;
	size_t j;

	go_labels = 0;
	run_goserver(&srv, &st);
	for (j = 0; j < nwins; j++) {
		rt += wins[j].unseg_rt_ns;
		go += wins[j].unseg_go_ns;
		CU_ASSERT_EQUAL(wins[j].n_go, 0); /* no labels asked for */
	}
	fprintf(stderr, "runtime CPU outside requests: %llu ns, of it Go programs' %llu ns\n", (unsigned long long)rt,
		(unsigned long long)go);
	CU_ASSERT(go > 0);
	CU_ASSERT(go <= rt);
	/* the server's parts say whose runtime they ran in */
	for (j = 0; j < nparts; j++)
		if (parts[j].pid == (uint32_t)srv)
			CU_ASSERT_EQUAL(parts[j].flags & (RM_PF_RUNTIME | RM_PF_GO), RM_PF_RUNTIME | RM_PF_GO);
	check_identity();
}

/* Is cookie the inbound socket of a part of process pid? */
static int part_cookie(pid_t pid, uint64_t cookie)
{
	size_t j;

	for (j = 0; j < nparts; j++)
		if (parts[j].pid == (uint32_t)pid && parts[j].in.cookie == cookie)
			return 1;
	return 0;
}

/*
 * The label samples of the windows: all of them, those on the inbound
 * sockets of process srv's parts (how many such cookies in *cookies), and
 * those on other labels; *period the sampling period seen.
 */
static void go_label_samples(pid_t srv, uint64_t *all, uint64_t *labelled, uint64_t *other, size_t *cookies,
			     uint64_t *period)
{
	size_t j, k;

	*all = *labelled = *other = *period = 0;
	*cookies = 0;
	for (j = 0; j < nwins; j++) {
		if (wins[j].n_go)
			*period = wins[j].go_period_ns;
		for (k = 0; k < wins[j].n_go; k++) {
			const struct rm_golabel *c = &wins[j].go[k];

			*all += c->samples;
			if (c->cookie == 0 || c->cookie == RM_GO_IDLE)
				continue;
			/* a label is a socket the Go programs received on: the server's connections
			 * (and tb-goload's own, whose receives label its goroutines too) */
			if (part_cookie(srv, c->cookie)) {
				*labelled += c->samples;
				(*cookies)++;
			} else {
				*other += c->samples;
			}
		}
	}
}

/*
 * The samples by segment: as many as by label (each sample counted once
 * each way), some of them in the parts of segments received on a socket,
 * and as many there as those parts' CPU holds sampling periods (the
 * samples move with the CPU the counters charge; Poisson noise of a few
 * hundred samples, and a window's edge, allowed for).
 */
static void go_seg_check(void)
{
	uint64_t lab = 0, seg = 0, in = 0, period = 0, parts_ns = 0;
	size_t j, k;

	for (j = 0; j < nwins; j++)
		for (k = 0; k < wins[j].n_go; k++) {
			lab += wins[j].go[k].samples;
			seg += wins[j].go[k].seg;
			if (wins[j].go[k].cookie && wins[j].go[k].cookie != RM_GO_IDLE)
				in += wins[j].go[k].seg;
			period = wins[j].go_period_ns;
		}
	for (j = 0; j < nparts; j++)
		if ((parts[j].flags & RM_PF_GO) && parts[j].in.cookie &&
		    (parts[j].flags & (RM_PF_CONT | RM_PF_ANCHOR)) != RM_PF_CONT)
			parts_ns += parts[j].cpu_ns;
	fprintf(stderr, "samples by segment %llu (by label %llu); in segments %.4f s sampled, %.4f s in the Go parts\n",
		(unsigned long long)seg, (unsigned long long)lab, (double)(in * period) / 1e9, (double)parts_ns / 1e9);
	if (!cpu_counters) {
		CU_ASSERT_EQUAL(seg, 0); /* slices: the samples do not move with the CPU, none said */
		return;
	}
	CU_ASSERT_EQUAL(seg, lab);
	CU_ASSERT(in > 0);
	CU_ASSERT((double)(in * period) > 0.75 * (double)parts_ns && (double)(in * period) < 1.25 * (double)parts_ns);
}

static void test_go_labels(void)
{
	uint64_t labelled, other, all, period;
	struct col_bpf_stats st;
	pid_t srv = 0;
	size_t cookies;

	go_labels = 1;
	run_goserver(&srv, &st);
	go_labels = 0;
	go_label_samples(srv, &all, &labelled, &other, &cookies, &period);
	fprintf(stderr, "goroutine label samples: %llu, %llu on the server's %zu connections, %llu on other labels; "
			"period %llu ns; %u Go programs watched during the load, %llu windows\n",
		(unsigned long long)all, (unsigned long long)labelled, cookies, (unsigned long long)other,
		(unsigned long long)period, st.go.watched, (unsigned long long)st.go.windows);
	CU_ASSERT(st.go.watched >= 1); /* tb-goserver (and tb-goload while it ran) */
	CU_ASSERT(st.go.held > 0);     /* its parts waited for their windows' counts (and reached the sink:
					* check_identity finds every part's CPU in its window) */
	CU_ASSERT(period > 0 && period < 1000000000ULL);
	CU_ASSERT(cookies >= 1);
	/* most of the Go programs' sampled CPU is their connections' */
	CU_ASSERT(labelled + other >= all / 2);
	CU_ASSERT(labelled > 0);
	go_seg_check();
	check_identity();
}

/*
 * One Go server after another under the same collector, with no Go program
 * between them long enough for the label module to be unloaded: loaded
 * again for the second, it holds that server's parts for their windows'
 * counts as it did the first's, and its Go CPU outside segments too.
 */
static void test_go_labels_reloaded(void)
{
	const char *load_args[] = { TB_GOLOAD_BIN, "--server", NULL, "--ce", "c1", "--path", "/light", "--rate", "200",
				    "--duration", "1.5", "--conns", "2", NULL };
	char addr[64], truth[400], log[400];
	const char *srv_args[] = { TB_GOSERVER_BIN, "--listen", addr, "--procs", "2", "--truth", truth, NULL };
	struct col_bpf_stats st[2];
	uint64_t held, unheld, unseg;
	struct col_bpf *b = NULL;
	pid_t srv;
	int k, i, rv;
	unsigned port;

	snprintf(truth, sizeof(truth), "%s/go-truth.csv", rm_test_tmpdir());
	snprintf(log, sizeof(log), "%s/go-runtime.log", rm_test_tmpdir());
	nparts = 0;
	nwins = 0;
	go_labels = 1;
	rv = open_or_skip(&b);
	go_labels = 0;
	if (rv != RM_OK)
		RM_TEST_SKIP("ebpf backend unavailable: %s", rm_strerror(rv));
	for (k = 0; k < 2; k++) {
		CU_ASSERT_FATAL((port = rm_test_free_port()) != 0);
		snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
		load_args[2] = addr;
		CU_ASSERT_FATAL((srv = rm_test_spawn(srv_args, log)) > 0);
		for (i = 0; i < 100 && !can_connect(port, NULL); i++)
			CU_ASSERT_EQUAL(col_bpf_poll(b, &sink, 20), RM_OK);
		CU_ASSERT_FATAL(i < 100);
		/* a window's end: the loader recognises the server and loads the labels */
		for (i = 0; i < 12; i++)
			CU_ASSERT_EQUAL(col_bpf_poll(b, &sink, 100), RM_OK);
		run_go_load(b, load_args, log);
		kill(srv, SIGTERM);
		CU_ASSERT_EQUAL(rm_test_wait(srv, 10000), 0);
		/* no Go program for more than a whole window: the module unloads */
		for (i = 0; i < 35; i++)
			CU_ASSERT_EQUAL(col_bpf_poll(b, &sink, 100), RM_OK);
		col_bpf_get_stats(b, &st[k]);
	}
	drain_close(b);
	held = st[1].go.held - st[0].go.held;
	unheld = st[1].go.unheld - st[0].go.unheld;
	unseg = st[1].go.unseg_held_ns - st[0].go.unseg_held_ns;
	fprintf(stderr, "label module loaded %u times; the first server's parts %llu held, %llu not; the second's "
			"%llu held, %llu not, %.3f ms of its CPU outside segments held\n",
		st[1].go.loads, (unsigned long long)st[0].go.held, (unsigned long long)st[0].go.unheld,
		(unsigned long long)held, (unsigned long long)unheld, unseg / 1e6);
	CU_ASSERT_EQUAL(st[0].go.loads, 1);
	CU_ASSERT_EQUAL(st[1].go.loads, 2);
	CU_ASSERT(st[0].go.held > 0);
	CU_ASSERT(held > 0);
	/* a part of a window already handed (late) goes on at once: a few, not most */
	CU_ASSERT(unheld * 4 < held);
	CU_ASSERT(unseg > 0);
	check_identity();
}

/* The same server on a unix socket: its goroutines are labelled with its unix connections. */
static void test_go_labels_unix(void)
{
	uint64_t labelled, other, all, period;
	struct col_bpf_stats st;
	char path[300];
	pid_t srv = 0;
	size_t cookies, j, unix_parts = 0;

	snprintf(path, sizeof(path), "%s/goserver.sock", rm_test_tmpdir());
	go_labels = 1;
	run_goserver_at(TB_GOSERVER_BIN, path, &srv, &st);
	go_labels = 0;
	unlink(path);
	for (j = 0; j < nparts; j++)
		if (parts[j].pid == (uint32_t)srv && parts[j].in.family == RM_AF_UNIX)
			unix_parts++;
	go_label_samples(srv, &all, &labelled, &other, &cookies, &period);
	fprintf(stderr, "over a unix socket: %zu server parts read from it; label samples %llu, %llu on the server's "
			"%zu connections, %llu on other labels\n",
		unix_parts, (unsigned long long)all, (unsigned long long)labelled, cookies, (unsigned long long)other);
	CU_ASSERT(unix_parts > 0);
	CU_ASSERT(cookies >= 1);
	CU_ASSERT(labelled > 0);
	CU_ASSERT(labelled + other >= all / 2);
	check_identity();
}

/*
 * A stripped copy of tb-goserver whose build names a Go version without a
 * known struct layout (a Go program whose goroutines cannot be followed)
 * beside tb-goload (one that can): the server's parts are a
 * runtime's but not a labelled Go program's, so the aggregator never splits
 * its CPU by the load generator's labels.
 */
static void test_go_unreadable(void)
{
	struct col_bpf_stats st;
	uint64_t rt = 0, go = 0, srv_cpu = 0;
	pid_t srv = 0;
	char bin[400];
	size_t j;

	snprintf(bin, sizeof(bin), "%s/goserver-stripped-go0", rm_test_tmpdir());
	CU_ASSERT_EQUAL_FATAL(rm_test_strip_go(TB_GOSERVER_BIN, bin, 1), 0);
	go_labels = 1;
	run_goserver_bin(bin, &srv, &st);
	go_labels = 0;
	unlink(bin);
	for (j = 0; j < nwins; j++) {
		rt += wins[j].unseg_rt_ns;
		go += wins[j].unseg_go_ns;
	}
	for (j = 0; j < nparts; j++) {
		if (parts[j].pid != (uint32_t)srv)
			continue;
		srv_cpu += parts[j].cpu_ns;
		CU_ASSERT_EQUAL(parts[j].flags & (RM_PF_RUNTIME | RM_PF_GO), RM_PF_RUNTIME);
	}
	fprintf(stderr, "stripped server: %llu ns in its parts; runtime CPU outside requests %llu ns, of it "
			"labelled Go programs' %llu ns; %u unreadable, %u watched\n",
		(unsigned long long)srv_cpu, (unsigned long long)rt, (unsigned long long)go, st.go.unreadable,
		st.go.watched);
	CU_ASSERT(srv_cpu > 0);
	CU_ASSERT(st.go.unreadable >= 1);
	CU_ASSERT(go <= rt);
	check_identity();
}
#endif

static CU_TestInfo cases[] = {
	{ "client/server exchange gives the expected segment", test_exchange },
	{ "every window balances: busy = parts + unsegmented + lost", test_identity },
	{ "a namespace filter sees only that namespace's threads", test_netns_filter },
	{ "a worker woken through a futex inherits the request (wake-up chains)", test_wakeup_chain },
	{ "a worker taking queued requests without a wake-up is charged by its reply (follow-replies)",
	  test_follow_replies },
	{ "an event loop's work between two replies goes to the second request (follow-replies)",
	  test_follow_replies_loop },
	{ "a pool worker's tail after its reply goes to no request, lock waits included (follow-replies)",
	  test_follow_replies_tail },
	{ "the hand-off hook is attached at a pool's first hand-off, never for a server that answers itself",
	  test_handoff_hook_on_demand },
	{ "the hand-off hook is attached when a reply is read by another thread than its request's sender",
	  test_handoff_hook_reply_reader },
	{ "a dispatcher's CPU goes to the request it hands over; a moving connection attaches the hook",
	  test_dispatcher },
	{ "a unix stream socket's bytes carry both ends and their positions", test_unix_pairing },
	{ "a unix stream send larger than the socket's buffer is numbered alike at both ends",
	  test_unix_pairing_large },
	{ "a unix connection older than the collector is numbered once both ends are in step", test_unix_older },
	{ "rametr processes and excluded pids never appear in parts", test_exclusion },
	{ "under overload drops are counted per window and balance (ring of one page)", test_drops },
	{ "a segment's run-queue wait is the scheduler's own (sched_info)", test_runq },
	{ "a request's tail: its CPU after the reply until the first wait, not after", test_tail },
	{ "a UDP server's segments name each datagram's sender, recvfrom/recvmsg, sendto/sendmsg", test_udp },
	{ "each segment's CPU is the thread's own CPU clock between its recv and send", test_cpu_precision },
#if defined(TB_GOSERVER_BIN) && defined(TB_GOLOAD_BIN)
	{ "a Go program's CPU outside requests is counted as a runtime's and as Go's", test_go_runtime },
	{ "a Go program's goroutines are labelled with its connections, its windows carry their samples",
	  test_go_labels },
	{ "a Go program serving a unix socket: its goroutines are labelled with its unix connections",
	  test_go_labels_unix },
	{ "a Go program after another ended: the labels loaded again hold its parts for their counts",
	  test_go_labels_reloaded },
	{ "a Go program whose goroutines cannot be followed is a runtime, not split by others' labels",
	  test_go_unreadable },
#endif
	CU_TEST_INFO_NULL,
};

static int init_parts(void) __attribute__((constructor));
static int init_parts(void)
{
	const char *c = getenv("RM_TEST_CPU_COUNTERS");

	cpu_counters = c && strcmp(c, "1") == 0;
	parts = calloc(MAX_PARTS, sizeof(*parts));
	return parts ? 0 : -1;
}

RM_TEST_MAIN("col_bpf", cases)
