/*
 * rm_test.h - the one test harness of Rametr (CUnit basic runner).
 *
 * A foo_test.c ends with a table of named cases and RM_TEST_MAIN:
 *
 *   static CU_TestInfo cases[] = {
 *       { "decodes a batch", test_decode_batch },
 *       CU_TEST_INFO_NULL,
 *   };
 *   RM_TEST_MAIN("wire", cases)
 *
 * The program exits 0 only if every case ran and passed. A case that needs
 * something the host does not have (no BPF, not root) calls RM_TEST_SKIP with
 * a reason; ctest then reports the test as skipped (exit code 77), never as
 * passed; with RM_NO_SKIP set in the environment (CI as root) a skip fails
 * the test instead. Helpers below create temporary directories that are removed at exit.
 *
 * What a test starts, it stops, also when an assertion fails half-way: every
 * child made by rm_test_fork() (rm_test_spawn() uses it) is remembered until
 * rm_test_wait() reaps it; at exit (normal, exit() or a failed _FATAL
 * assertion) the ones still running get SIGTERM, then SIGKILL after 5 s.
 * A child also gets SIGTERM from the kernel if the test dies first
 * (PR_SET_PDEATHSIG: a crash or ctest's timeout kill leaves nothing behind).
 */
#ifndef RM_TEST_H
#define RM_TEST_H

#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define RM_TEST_SKIP_CODE 77

static int rm_test_skipped;

#define RM_TEST_SKIP(...)                                  \
	do {                                               \
		fprintf(stderr, "SKIP: " __VA_ARGS__);     \
		fprintf(stderr, "\n");                     \
		rm_test_skipped = 1;                       \
		return;                                    \
	} while (0)

/* Path of a fresh temporary directory (static buffer, one per program). */
static inline const char *rm_test_tmpdir(void)
{
	static char dir[256];

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/rametr-test-XXXXXX");
		if (!mkdtemp(dir)) {
			perror("mkdtemp");
			exit(1);
		}
	}
	return dir;
}

static inline void rm_test_cleanup(void)
{
	const char *d = rm_test_tmpdir();
	char cmd[300];

	if (getenv("RM_TEST_KEEP"))
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: failed to remove '%s'\n", d);
}

/*
 * Captures this process's stderr into <tmpdir>/<name>.log (path returned in
 * path) until rm_test_capture_end(), which restores stderr, echoes the text
 * to it and returns the captured text (malloc'd; the caller frees it).
 * Not reentrant: one capture at a time.
 */
static int rm_test_saved_stderr = -1;

static inline void rm_test_capture_start(const char *name, char *path, size_t pathlen)
{
	FILE *f;

	snprintf(path, pathlen, "%s/%s.log", rm_test_tmpdir(), name);
	fflush(stderr);
	rm_test_saved_stderr = dup(2);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	dup2(fileno(f), 2);
	fclose(f);
}

static inline char *rm_test_capture_end(const char *path)
{
	char *text;
	long n;
	FILE *f;

	fflush(stderr);
	dup2(rm_test_saved_stderr, 2);
	close(rm_test_saved_stderr);
	f = fopen(path, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	text = calloc(1, (size_t)n + 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	CU_ASSERT_EQUAL(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	fputs(text, stderr);
	return text;
}

/* The children rm_test_fork() made and nobody reaped yet (0: free slot). */
static pid_t rm_test_children[64];

/* Forgets pid (it has been reaped). */
static inline void rm_test_forget(pid_t pid)
{
	size_t i;

	for (i = 0; i < sizeof(rm_test_children) / sizeof(rm_test_children[0]); i++)
		if (rm_test_children[i] == pid)
			rm_test_children[i] = 0;
}

/*
 * fork() for tests, from the main thread (the death signal follows the
 * thread that forked). In the child: SIGTERM when the test process dies, and
 * _exit(127) if it already has. In the parent: the child is remembered for
 * rm_test_stop_children(). Returns what fork() returns.
 */
static inline pid_t rm_test_fork(void)
{
	pid_t parent = getpid(), pid = fork();
	size_t i;

	if (pid == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
			_exit(127);
		return 0;
	}
	for (i = 0; pid > 0 && i < sizeof(rm_test_children) / sizeof(rm_test_children[0]); i++)
		if (rm_test_children[i] == 0) {
			rm_test_children[i] = pid;
			break;
		}
	return pid;
}

/*
 * Stops the children rm_test_fork() made that are still running: SIGTERM,
 * up to 5 s to exit, then SIGKILL; reaps them. A pid reaped elsewhere
 * (waitpid ECHILD) is only forgotten, never signalled.
 */
static inline void rm_test_stop_children(void)
{
	size_t i, n = sizeof(rm_test_children) / sizeof(rm_test_children[0]);
	int live = 0, round, st;

	for (i = 0; i < n; i++) {
		pid_t p = rm_test_children[i];

		if (p <= 0)
			continue;
		if (waitpid(p, &st, WNOHANG) == 0) {
			fprintf(stderr, "stopping pid %d, which the test left running\n", (int)p);
			kill(p, SIGTERM);
			live++;
		} else {
			rm_test_children[i] = 0;
		}
	}
	for (round = 0; live > 0 && round < 500; round++) {
		usleep(10000);
		for (live = 0, i = 0; i < n; i++) {
			if (rm_test_children[i] <= 0)
				continue;
			if (waitpid(rm_test_children[i], &st, WNOHANG) == 0)
				live++;
			else
				rm_test_children[i] = 0;
		}
	}
	for (i = 0; i < n; i++) {
		if (rm_test_children[i] <= 0)
			continue;
		kill(rm_test_children[i], SIGKILL);
		while (waitpid(rm_test_children[i], &st, 0) < 0 && errno == EINTR)
			;
		rm_test_children[i] = 0;
	}
}

static pid_t rm_test_main_pid;

/*
 * At the test program's exit: the children first (they may write into the
 * directory), then the directory. Nothing in a forked child that exits.
 */
static inline void rm_test_at_exit(void)
{
	if (getpid() != rm_test_main_pid)
		return;
	rm_test_stop_children();
	rm_test_cleanup();
}

/*
 * Starts the program argv[0] (a path, no PATH lookup) with stdout and stderr
 * appended to log, through rm_test_fork(). Returns its pid, or -1 if it
 * could not fork.
 */
static inline pid_t rm_test_spawn(const char *const argv[], const char *log)
{
	pid_t pid = rm_test_fork();

	if (pid == 0) {
		int fd = open(log, O_CREAT | O_WRONLY | O_APPEND, 0600);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/*
 * Waits up to ms for pid to end; returns its exit status (128 + signal if
 * killed), or -1 on timeout, after killing it (SIGKILL) and reaping it.
 */
static inline int rm_test_wait(pid_t pid, int ms)
{
	int st, i;

	for (i = 0; i < ms / 10; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			rm_test_forget(pid);
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	rm_test_forget(pid);
	return -1;
}

/*
 * The text of the file at path (a spawned program's log), at most its first
 * 64 KiB; "" if it cannot be read. A static buffer: valid until the next call.
 */
static inline const char *rm_test_slurp(const char *path)
{
	static char buf[65536];
	size_t n = 0;
	FILE *f = fopen(path, "r");

	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

/* Writes text to the file at path (created or truncated); fails the case if it cannot. */
static inline void rm_test_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	CU_ASSERT_EQUAL(fclose(f), 0);
}

/*
 * Copies the Go executable src to dst (executable), stripped of all symbols
 * and DWARF as distributions ship Go programs; with other_go, every "go1."
 * of its bytes made "go0." (same length), so that its build names a Go
 * version whose struct layout the collector does not know. 0, or -1 if the
 * paths do not fit or objcopy, perl or chmod failed.
 */
static inline int rm_test_strip_go(const char *src, const char *dst, int other_go)
{
	char cmd[4096];
	int n, st;

	if (other_go)
		n = snprintf(cmd, sizeof(cmd), "objcopy --strip-all '%s' '%s.tmp' && perl -0777 -pe 's/go1\\./go0./g' "
			     "'%s.tmp' > '%s' && rm -f '%s.tmp' && chmod 755 '%s'", src, dst, dst, dst, dst, dst);
	else
		n = snprintf(cmd, sizeof(cmd), "objcopy --strip-all '%s' '%s' && chmod 755 '%s'", src, dst, dst);
	if (n < 0 || (size_t)n >= sizeof(cmd))
		return -1;
	st = system(cmd);
	return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

#define RM_TEST_MAIN(suite_name, case_table)                                              \
	int main(int argc, char **argv)                                                      \
	{                                                                                    \
		CU_SuiteInfo suites[] = {                                                    \
			{ suite_name, NULL, NULL, NULL, NULL, case_table },                  \
			CU_SUITE_INFO_NULL,                                                  \
		};                                                                           \
		unsigned failed, run;                                                        \
		(void)argc;                                                                  \
		(void)argv;                                                                  \
		rm_test_main_pid = getpid();                                                 \
		atexit(rm_test_at_exit);                                                     \
		if (CU_initialize_registry() != CUE_SUCCESS)                                 \
			return 1;                                                            \
		if (CU_register_suites(suites) != CUE_SUCCESS)                               \
			return 1;                                                            \
		CU_basic_set_mode(CU_BRM_VERBOSE);                                           \
		if (argc > 1) {                                                              \
			CU_pSuite s = CU_get_suite(suite_name);                               \
			CU_pTest t = s ? CU_get_test(s, argv[1]) : NULL;                       \
			if (!t) {                                                            \
				fprintf(stderr, "no case '%s'\n", argv[1]);                  \
				return 2;                                                    \
			}                                                                    \
			CU_basic_run_test(s, t);                                              \
		} else {                                                                     \
			CU_basic_run_tests();                                                \
		}                                                                            \
		failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();      \
		run = CU_get_number_of_tests_run();                                          \
		CU_cleanup_registry();                                                       \
		if (failed)                                                                  \
			return 1;                                                            \
		if (run == 0)                                                                \
			return 1;                                                            \
		if (rm_test_skipped && getenv("RM_NO_SKIP")) {                               \
			fprintf(stderr, "a case was skipped and RM_NO_SKIP is set\n");     \
			return 1;                                                            \
		}                                                                            \
		return rm_test_skipped ? RM_TEST_SKIP_CODE : 0;                              \
	}

/*
 * A TCP port on 127.0.0.1 that was free a moment ago (bound, read, closed):
 * for a server the test starts next, or one nothing listens on. 0 if none
 * could be had.
 */
static inline unsigned rm_test_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	unsigned port = 0;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

#endif
