/*
 * integ_throttle_test.c - throttling end to end with the real programs:
 * rametr-aggregator, rametr-collector --throttle cgroup (real BPF, real
 * cgroup v1 groups) and rametrctl, around a thread-per-connection TCP
 * service in this process that two CEs (clients bound to 127.0.0.3 and
 * 127.0.0.4) load with CPU-bound requests. An operator command goes from
 * rametrctl through storage, the aggregator's check and an Ack to the
 * collector, which caps c2's serving thread while c3's keeps its pace; the
 * collector's ack makes it "applied"; its expiry releases the thread without
 * any further command; bad commands are refused with their reason.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "rm_test.h"
#include "rm_err.h"
#include "st_throttle.h"

static char dir[256], conf[300], db[300], url[300];

struct conn {
	pthread_t th;
	int fd;
	atomic_int tid;
	clockid_t clk;
	atomic_ulong reqs;
};

static struct {
	int lfd;
	uint16_t port;
	pthread_t acc;
	struct conn c[2];
	atomic_int n;
} srv;

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	char buf[64];

	pthread_getcpuclockid(pthread_self(), &c->clk);
	atomic_store(&c->tid, (int)syscall(SYS_gettid));
	for (;;) {
		uint64_t end;

		if (recv(c->fd, buf, sizeof(buf), 0) <= 0)
			break;
		end = now_ns(CLOCK_THREAD_CPUTIME_ID) + 2000000;
		while (now_ns(CLOCK_THREAD_CPUTIME_ID) < end)
			;
		if (send(c->fd, "ok\n", 3, MSG_NOSIGNAL) != 3)
			break;
		atomic_fetch_add(&c->reqs, 1);
	}
	return NULL;
}

static void *acc_main(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(srv.lfd, NULL, NULL), i;

		if (fd < 0)
			return NULL;
		i = atomic_load(&srv.n);
		if (i == 2) {
			close(fd);
			continue;
		}
		srv.c[i].fd = fd;
		pthread_create(&srv.c[i].th, NULL, conn_main, &srv.c[i]);
		atomic_store(&srv.n, i + 1);
	}
}

struct cli {
	int fd;
	atomic_int stop;
	pthread_t th;
};

static void *cli_main(void *arg)
{
	struct cli *c = arg;
	char buf[16];

	while (!atomic_load(&c->stop))
		if (send(c->fd, "req\n", 4, MSG_NOSIGNAL) != 4 || recv(c->fd, buf, sizeof(buf), 0) <= 0)
			break;
	return NULL;
}

static void cli_start(struct cli *c, const char *src)
{
	struct sockaddr_in a = { .sin_family = AF_INET }, b = { .sin_family = AF_INET };

	memset(c, 0, sizeof(*c));
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	inet_pton(AF_INET, src, &b.sin_addr);
	CU_ASSERT_FATAL(bind(c->fd, (struct sockaddr *)&b, sizeof(b)) == 0);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	a.sin_port = htons(srv.port);
	CU_ASSERT_FATAL(connect(c->fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	pthread_create(&c->th, NULL, cli_main, c);
}

static void cli_stop(struct cli *c)
{
	atomic_store(&c->stop, 1);
	shutdown(c->fd, SHUT_RDWR);
	pthread_join(c->th, NULL);
	close(c->fd);
}

/* Runs rametrctl throttle ARGS..., output to log; returns its exit code. */
static int ctl(const char *log, const char *const *args)
{
	const char *argv[16] = { CTL_BIN, "throttle" };
	pid_t pid;
	int i = 2;

	while (*args && i < 14)
		argv[i++] = *args++;
	argv[i++] = "--db";
	argv[i++] = db;
	argv[i] = NULL;
	pid = rm_test_spawn(argv, log);
	return rm_test_wait(pid, 20000);
}

static void cgroup_of(int tid, char *buf, size_t len)
{
	char path[64], line[512];
	FILE *f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/self/task/%d/cgroup", tid);
	if (!(f = fopen(path, "r")))
		return;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, ":cpu:") || strstr(line, ":cpu,") || strstr(line, ",cpu:")) {
			snprintf(buf, len, "%s", strrchr(line, ':') + 1);
			buf[strcspn(buf, "\n")] = '\0';
			break;
		}
	fclose(f);
}

static void rates(double ms, double *r0, double *r1, unsigned long *q1)
{
	uint64_t a = now_ns(srv.c[0].clk), b = now_ns(srv.c[1].clk), t = now_ns(CLOCK_MONOTONIC);
	unsigned long n1 = atomic_load(&srv.c[1].reqs);
	double dt;

	usleep((useconds_t)(ms * 1000));
	dt = (double)(now_ns(CLOCK_MONOTONIC) - t);
	*r0 = (double)(now_ns(srv.c[0].clk) - a) / dt;
	*r1 = (double)(now_ns(srv.c[1].clk) - b) / dt;
	*q1 = (unsigned long)((atomic_load(&srv.c[1].reqs) - n1) * 1000.0 / ms);
}

static void test_end_to_end(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	char log[300], spool[300], cg[256], orig[256], col_log[300];
	pid_t agg, col;
	struct cli c2, c3;
	double r0, r1, r0b, r1b;
	unsigned long q1, q1b;
	uint32_t ncpu = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
	double cap_cpu = 0.1 * ncpu; /* 10% of the node */
	int i;
	FILE *f;

	if (geteuid() != 0)
		RM_TEST_SKIP("needs root (cgroups, BPF)");
	snprintf(dir, sizeof(dir), "%s", rm_test_tmpdir());
	snprintf(conf, sizeof(conf), "%s/agg.ini", dir);
	snprintf(db, sizeof(db), "%s/rametr.db", dir);
	snprintf(url, sizeof(url), "ipc://%s/agg.ipc", dir);
	snprintf(spool, sizeof(spool), "%s/spool", dir);
	fprintf(stderr, "\n  in %s\n", dir);
	/* the service */
	srv.lfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(bind(srv.lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	listen(srv.lfd, 8);
	getsockname(srv.lfd, (struct sockaddr *)&a, &al);
	srv.port = ntohs(a.sin_port);
	pthread_create(&srv.acc, NULL, acc_main, NULL);
	f = fopen(conf, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "[ce c2]\nclient = 127.0.0.3\nserver_port = %u\n[ce c3]\nclient = 127.0.0.4\n"
		   "server_port = %u\n[throttle]\nlease = 5s\n", srv.port, srv.port);
	fclose(f);
	{
		const char *av[] = { AGG_BIN, "--config", conf, "--db", db, "--listen", url, NULL };
		const char *cv[] = { COL_BIN, "--aggregator", url, "--node", "db1", "--spool", spool,
				     "--throttle", "cgroup", NULL };

		snprintf(log, sizeof(log), "%s/aggregator.log", dir);
		agg = rm_test_spawn(av, log);
		snprintf(col_log, sizeof(col_log), "%s/collector.log", dir);
		col = rm_test_spawn(cv, col_log);
	}
	cli_start(&c2, "127.0.0.3");
	cli_start(&c3, "127.0.0.4");
	for (i = 0; i < 300 && atomic_load(&srv.n) < 2; i++)
		usleep(10000);
	CU_ASSERT_FATAL(atomic_load(&srv.n) == 2);
	usleep(50000);
	/* conn 0 is c2's: the clients connected in that order */
	cgroup_of(atomic_load(&srv.c[0].tid), orig, sizeof(orig));
	/* the collector has said hello when the node is in storage */
	for (i = 0; i < 200; i++) {
		struct st_node_rec nr;
		st_db *h = NULL;
		int found = 0;

		if (st_open(&h, db, ST_OPEN_READONLY) == RM_OK) {
			found = st_node_get(h, "db1", &nr) == RM_OK;
			st_close(h);
		}
		if (found)
			break;
		usleep(50000);
	}
	CU_ASSERT_FATAL(i < 200);
	{
		const char *bad[] = { "set", "--server", "db1", "--ce", "nope", "--cap", "10%", NULL };

		snprintf(log, sizeof(log), "%s/ctl-probe.log", dir);
		CU_ASSERT_EQUAL(ctl(log, bad), 1);
		CU_ASSERT(strstr(rm_test_slurp(log), "refused: unknown CE 'nope'") != NULL);
	}
	rates(700, &r0b, &r1b, &q1b);

	/* cap c2 at 10% of the node for 3 s */
	{
		const char *set[] = { "set", "--server", "db1", "--ce", "c2", "--cap", "10%", "--for", "12s", NULL };
		const char *unk[] = { "set", "--server", "db9", "--ce", "c2", "--cap", "10%", NULL };
		const char *dup[] = { "set", "--server", "db1", "--ce", "c2", "--cap", "10%", NULL };

		snprintf(log, sizeof(log), "%s/ctl-set.log", dir);
		CU_ASSERT_EQUAL(ctl(log, set), 0);
		/* accepted, sent or already applied by the time rametrctl looks */
		CU_ASSERT(strstr(rm_test_slurp(log), " by the aggregator") != NULL);
		usleep(800000);
		snprintf(log, sizeof(log), "%s/ctl-unk.log", dir);
		CU_ASSERT_EQUAL(ctl(log, unk), 1);
		CU_ASSERT(strstr(rm_test_slurp(log), "unknown server 'db9'") != NULL);
		snprintf(log, sizeof(log), "%s/ctl-dup.log", dir);
		CU_ASSERT_EQUAL(ctl(log, dup), 1);
		CU_ASSERT(strstr(rm_test_slurp(log), "duplicate of active command") != NULL);
	}
	/* the collector moves c2's thread when its poll next sees the command: wait for it, 5 s at most */
	for (int w = 0; w < 50; w++) {
		cgroup_of(atomic_load(&srv.c[0].tid), cg, sizeof(cg));
		if (strstr(cg, "rametr-throttle-"))
			break;
		usleep(100000);
	}
	CU_ASSERT(strstr(cg, "rametr-throttle-") != NULL);
	cgroup_of(atomic_load(&srv.c[1].tid), cg, sizeof(cg));
	CU_ASSERT_STRING_EQUAL(cg, orig);
	/* the last c2 command is the refused duplicate: look at the accepted one */
	{
		struct st_throttle_query q = { "active", "db1", "c2", 0, 0 };
		struct st_throttle *rows = NULL;
		st_db *h = NULL;
		size_t n = 0;

		CU_ASSERT_EQUAL_FATAL(st_open(&h, db, ST_OPEN_READONLY), RM_OK);
		for (i = 0; i < 100; i++) {
			free(rows);
			rows = NULL;
			CU_ASSERT_EQUAL(st_throttle_list(h, &q, &rows, &n), RM_OK);
			if (n == 1 && strcmp(rows[0].state, "applied") == 0)
				break;
			usleep(100000);
		}
		CU_ASSERT_EQUAL(n, 1);
		if (n == 1) {
			CU_ASSERT_STRING_EQUAL(rows[0].state, "applied");
			CU_ASSERT(strncmp(rows[0].who, "rametrctl:", 10) == 0);
			CU_ASSERT_EQUAL(rows[0].cap_permille, 100);
		}
		free(rows);
		st_close(h);
	}
	rates(1000, &r0, &r1, &q1);
	fprintf(stderr, "\n  before: c2 thread %.3f CPU, c3 thread %.3f CPU (%lu req/s); "
			"capped at %.2f CPU: c2 %.3f, c3 %.3f (%lu req/s)\n",
		r0b, r1b, q1b, cap_cpu, r0, r1, q1);
	/* the quota plus the kernel's bandwidth slack (5 ms per CPU per 100 ms period) */
	CU_ASSERT(r0 <= cap_cpu + 0.15);
	{
		char path[300], line[128];
		unsigned long thr = 0;
		FILE *st;

		snprintf(path, sizeof(path), "/sys/fs/cgroup/cpu/rametr-throttle-%d/s1/cpu.stat", (int)col);
		if ((st = fopen(path, "r"))) {
			while (fgets(line, sizeof(line), st))
				sscanf(line, "nr_throttled %lu", &thr);
			fclose(st);
		}
		/* the kernel held it back, or it never reached its quota (a busy machine) */
		CU_ASSERT(thr > 0 || r0 <= cap_cpu);
	}
	/* c3 kept its pace. The machine is shared and its load changes between
	 * the two intervals, so: at least half its earlier rate, or at least
	 * about what the capped thread got in the same interval */
	CU_ASSERT(q1 >= 0.5 * q1b || r1 >= 0.8 * r0);
	/* expiry: the collector releases by itself; the aggregator marks it */
	for (i = 0; i < 200; i++) {
		cgroup_of(atomic_load(&srv.c[0].tid), cg, sizeof(cg));
		if (strcmp(cg, orig) == 0)
			break;
		usleep(100000);
	}
	CU_ASSERT_STRING_EQUAL(cg, orig);
	CU_ASSERT(strstr(rm_test_slurp(col_log), "expired") != NULL);
	/* the aggregator marks it expired at its next tick */
	for (i = 0; i < 50; i++) {
		const char *lst[] = { "list", "--ce", "c2", "-o", "csv", NULL };

		snprintf(log, sizeof(log), "%s/ctl-list.log", dir);
		unlink(log);
		CU_ASSERT_EQUAL(ctl(log, lst), 0);
		if (strstr(rm_test_slurp(log), ",expired,"))
			break;
		usleep(100000);
	}
	CU_ASSERT(strstr(rm_test_slurp(log), ",expired,") != NULL);
	CU_ASSERT(strstr(rm_test_slurp(log), ",refused,") != NULL);
	cli_stop(&c2);
	cli_stop(&c3);
	kill(col, SIGTERM);
	CU_ASSERT_EQUAL(rm_test_wait(col, 15000), 0);
	kill(agg, SIGTERM);
	CU_ASSERT_EQUAL(rm_test_wait(agg, 15000), 0);
	shutdown(srv.lfd, SHUT_RDWR);
	close(srv.lfd);
	pthread_join(srv.acc, NULL);
	for (i = 0; i < 2; i++) {
		shutdown(srv.c[i].fd, SHUT_RDWR);
		pthread_join(srv.c[i].th, NULL);
		close(srv.c[i].fd);
	}
}

static CU_TestInfo cases[] = {
	{ "rametrctl -> aggregator -> collector caps one CE's thread; expiry releases; bad commands refused",
	  test_end_to_end },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("integ_throttle", cases)
