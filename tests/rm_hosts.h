/*
 * rm_hosts.h - what the tests that run services on the testbed's
 * namespace "hosts" (scripts/netns.sh) share: the hosts' session lock,
 * netns.sh itself, processes started on the root namespace or inside a
 * host (logs in files, remembered so that they are killed at exit whatever
 * happened), waiting for a line in a log, stopping by SIGTERM, a
 * process's CPU time and the machine's busy and steal jiffies.
 *
 * The includer defines RM_SOURCE_DIR and includes rm_test.h and
 * tb_testutil.h first. One test process at a time uses it (static state).
 */
#ifndef RM_HOSTS_H
#define RM_HOSTS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RM_HOSTS_SESSION_LOCK "/run/rametr-testbed.lock" /* scripts/netns.sh session-lock */
#define RM_HOSTS_LOCK_WAIT_S 120
#define RM_HOSTS_MAX_PIDS 32

static pid_t rm_hosts_pids[RM_HOSTS_MAX_PIDS];
static size_t rm_hosts_npids;
static int rm_hosts_own; /* this process brought the hosts up: take them down at exit */

/* Runs "bash scripts/netns.sh ARGS" (stdout to the test's stderr); its exit code. */
static inline int rm_hosts_netns(const char *args)
{
	char cmd[512];
	int st;

	snprintf(cmd, sizeof(cmd), "bash '%s/scripts/netns.sh' %s 1>&2", RM_SOURCE_DIR, args);
	st = system(cmd);
	return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Kills (SIGKILL) and reaps every process started here, then takes the hosts down if ours. */
static inline void rm_hosts_cleanup(void)
{
	size_t i;

	for (i = 0; i < rm_hosts_npids; i++)
		if (rm_hosts_pids[i] > 0)
			kill(rm_hosts_pids[i], SIGKILL);
	for (i = 0; i < rm_hosts_npids; i++)
		if (rm_hosts_pids[i] > 0) {
			waitpid(rm_hosts_pids[i], NULL, 0);
			rm_test_forget(rm_hosts_pids[i]);
		}
	rm_hosts_npids = 0;
	if (rm_hosts_own)
		rm_hosts_netns("down");
	rm_hosts_own = 0;
}

/*
 * Takes the hosts' session lock (held until exit; the descriptor is not
 * inherited), waiting up to RM_HOSTS_LOCK_WAIT_S for another user, then
 * brings the hosts up from a clean state and arranges rm_hosts_cleanup at
 * exit. Returns 0, -1 if the lock stayed taken, -2 if the hosts cannot be
 * made.
 */
static inline int rm_hosts_up(void)
{
	int fd = open(RM_HOSTS_SESSION_LOCK, O_CREAT | O_RDWR | O_CLOEXEC, 0644), i;

	if (fd < 0)
		return -1;
	for (i = 0; i < RM_HOSTS_LOCK_WAIT_S * 10; i++) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			break;
		if (errno != EWOULDBLOCK && errno != EINTR) {
			i = RM_HOSTS_LOCK_WAIT_S * 10;
			break;
		}
		if (i == 0)
			fprintf(stderr, "the testbed hosts are in use ('%s'); waiting\n", RM_HOSTS_SESSION_LOCK);
		usleep(100000);
	}
	if (i == RM_HOSTS_LOCK_WAIT_S * 10) {
		close(fd);
		return -1;
	}
	atexit(rm_hosts_cleanup);
	rm_hosts_own = 1;
	rm_hosts_netns("down");
	return rm_hosts_netns("up") == 0 ? 0 : -2;
}

/*
 * The start of a test's one run on the hosts: as root, makes directory
 * `sub` under the test's temporary directory (its path into dir, and
 * rametr.db there into db) and brings the hosts up. Returns 0, or nonzero
 * with the reason the test skips in why.
 */
static inline int rm_hosts_begin(const char *sub, char *dir, size_t dirlen, char *db, size_t dblen, char *why,
				 size_t whylen)
{
	int rv;

	if (geteuid() != 0) {
		snprintf(why, whylen, "network namespaces need root");
		return 1;
	}
	snprintf(dir, dirlen, "%s/%s", rm_test_tmpdir(), sub);
	mkdir(dir, 0755);
	snprintf(db, dblen, "%s/rametr.db", dir);
	if ((rv = rm_hosts_up()) != 0) {
		snprintf(why, whylen, "%s",
			 rv == -1 ? "the testbed hosts stayed in use by another run" : "cannot create the hosts");
		return 1;
	}
	return 0;
}

/*
 * Starts argv (PATH lookup for argv[0]) with stdout and stderr appended to
 * log, remembered for cleanup. Returns the pid or -1.
 */
static inline pid_t rm_hosts_spawn(char *const argv[], const char *log)
{
	pid_t pid = rm_test_fork();

	if (pid == 0) {
		int fd = open(log, O_CREAT | O_WRONLY | O_APPEND, 0644);

		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (pid > 0 && rm_hosts_npids < RM_HOSTS_MAX_PIDS)
		rm_hosts_pids[rm_hosts_npids++] = pid;
	return pid;
}

/* Starts tool_argv inside host h's namespace (ip netns exec rm-h ...), as rm_hosts_spawn. */
static inline pid_t rm_hosts_spawn_in(const char *h, char *const tool_argv[], const char *log)
{
	char ns[32];
	char *argv[48] = { "ip", "netns", "exec", ns };
	size_t i;

	snprintf(ns, sizeof(ns), "rm-%s", h);
	for (i = 0; tool_argv[i] && i + 5 < sizeof(argv) / sizeof(argv[0]); i++)
		argv[4 + i] = tool_argv[i];
	return rm_hosts_spawn(argv, log);
}

/* pid was reaped elsewhere: not to be killed at cleanup. */
static inline void rm_hosts_forget(pid_t pid)
{
	size_t i;

	for (i = 0; i < rm_hosts_npids; i++)
		if (rm_hosts_pids[i] == pid)
			rm_hosts_pids[i] = -1;
	rm_test_forget(pid);
}

/* Waits up to ms for text in file path while pid lives; 0, or -1 (the log is printed). */
static inline int rm_hosts_wait_text(const char *path, const char *text, pid_t pid, int ms)
{
	int waited;
	char *s;

	for (waited = 0; waited < ms; waited += 50) {
		int found;

		s = tbt_slurp(path);
		found = s && strstr(s, text);
		free(s);
		if (found)
			return 0;
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			rm_hosts_forget(pid);
			break;
		}
		usleep(50000);
	}
	s = tbt_slurp(path);
	fprintf(stderr, "'%s' never said '%s':\n%s\n", path, text, s ? s : "(no log)");
	free(s);
	return -1;
}

/* SIGTERM to pid, wait up to ms; its exit code (-1 on timeout or no pid). */
static inline int rm_hosts_stop(pid_t pid, int ms)
{
	int rc;

	if (pid <= 0)
		return -1;
	kill(pid, SIGTERM);
	rc = tbt_wait(pid, ms);
	rm_hosts_forget(pid);
	return rc;
}

/*
 * Prints the last `lines` lines of dir/name to stderr (a failed process's
 * log, so that the test's output says why when the directory is removed).
 */
static inline void rm_hosts_log_tail(const char *dir, const char *name, size_t lines)
{
	static char buf[65536]; /* the file's last 64 KiB at most */
	char path[512];
	size_t n, i, nl = 0;
	long size;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "r"))) {
		fprintf(stderr, "failed to open '%s'\n", path);
		return;
	}
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fseek(f, size > (long)sizeof(buf) ? size - (long)sizeof(buf) : 0, SEEK_SET);
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	/* the start of the last `lines` lines (a final newline ends the last one) */
	for (i = n; i > 0; i--)
		if (buf[i - 1] == '\n' && i < n && ++nl == lines)
			break;
	fprintf(stderr, "--- the last lines of '%s' ---\n", path);
	fwrite(buf + i, 1, n - i, stderr);
	fprintf(stderr, "--- end of '%s' ---\n", path);
}

/*
 * rm_hosts_stop, and when it fails (an exit code not 0, or no stop within
 * ms) the last 40 lines of its log dir/log to stderr, so that a test's
 * output says why after its directory is removed. Returns as rm_hosts_stop.
 */
static inline int rm_hosts_stop_logged(pid_t pid, int ms, const char *dir, const char *log)
{
	int rc = rm_hosts_stop(pid, ms);

	if (rc != 0)
		rm_hosts_log_tail(dir, log, 40);
	return rc;
}

/*
 * In a test case: skips it when the run was skipped (skip_why) or the eBPF
 * collector did not attach; otherwise fails it fatally when Rametr did not run
 * (why non-empty, printed).
 */
#define RM_HOSTS_NEED_RAMETR(skipped, skip_why, why)                                       \
	do {                                                                               \
		if (skipped)                                                               \
			RM_TEST_SKIP("%s", (skip_why));                                    \
		if (strstr((why), "did not attach"))                                       \
			RM_TEST_SKIP("ebpf collector unavailable: %s", (why));             \
		if ((why)[0])                                                              \
			fprintf(stderr, "rametr: %s\n", (why));                            \
		CU_ASSERT_FATAL(!(why)[0]);                                                \
	} while (0)

/*
 * Starts rametr-aggregator bin with the source tree's testbed/<ini>, database
 * db, listening on ipc://<dir>/aggregator.ipc (written to url), its log in
 * <dir>/aggregator.log; *pid is what it was spawned as (-1: not spawned; a
 * running process is the caller's to stop). Returns 0 once it listens, else
 * -1 with why filled.
 */
static inline int rm_hosts_start_aggregator(const char *bin, const char *dir, const char *ini, const char *db,
					    char *url, size_t urllen, pid_t *pid, char *why, size_t whylen)
{
	char conf[400], log[400];

	snprintf(url, urllen, "ipc://%s/aggregator.ipc", dir);
	snprintf(conf, sizeof(conf), "%s/testbed/%s", RM_SOURCE_DIR, ini);
	snprintf(log, sizeof(log), "%s/aggregator.log", dir);
	{
		char *argv[] = { (char *)bin, "--config", conf, "--db", (char *)db, "--listen", url, NULL };

		*pid = rm_hosts_spawn(argv, log);
	}
	if (*pid < 0 || rm_hosts_wait_text(log, "listening on", *pid, 10000) != 0) {
		snprintf(why, whylen, "rametr-aggregator did not start");
		return -1;
	}
	return 0;
}

/* The wall clock (CLOCK_REALTIME) in ns, the clock of Rametr's window times. */
static inline int64_t rm_hosts_real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * CPU time of process pid so far in ns, its exited threads' included: the
 * process's CPU clock (clock_getcpuclockid: the kernel's sum of its
 * threads' on-CPU time, exact), or where that cannot be read the sum over
 * its live threads (/proc/<pid>/task/<tid>/schedstat, first field); 0 if
 * neither can. Not utime + stime of /proc/<pid>/stat: the kernel scales
 * those ticks to the same total but keeps each monotonic, so over a few
 * seconds their sum can lag or lead it by tens of percent.
 */
static inline uint64_t rm_hosts_proc_cpu_ns(pid_t pid)
{
	char path[320];
	struct dirent *de;
	struct timespec ts;
	clockid_t clk;
	uint64_t sum = 0;
	DIR *d;

	if (clock_getcpuclockid(pid, &clk) == 0 && clock_gettime(clk, &ts) == 0)
		return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(d = opendir(path)))
		return 0;
	while ((de = readdir(d)) != NULL) {
		unsigned long long ns = 0;
		char *s;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat", (int)pid, de->d_name);
		s = tbt_slurp(path);
		if (s && sscanf(s, "%llu", &ns) == 1)
			sum += ns;
		free(s);
	}
	closedir(d);
	return sum;
}

/* Busy and steal jiffies of the machine so far (0 0 if unreadable). */
static inline void rm_hosts_jiffies(unsigned long long *busy, unsigned long long *steal)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");

	*busy = *steal = 0;
	if (!f)
		return;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		   &v[6], &v[7]) == 8) {
		*busy = v[0] + v[1] + v[2] + v[5] + v[6];
		*steal = v[7];
	}
	fclose(f);
}

#endif
