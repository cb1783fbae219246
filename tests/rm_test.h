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
 */
#ifndef RM_TEST_H
#define RM_TEST_H

#include <CUnit/Basic.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/*
 * Starts the program argv[0] (a path, no PATH lookup) with stdout and stderr
 * appended to log. Returns its pid, or -1 if it could not fork.
 */
static inline pid_t rm_test_spawn(const char *const argv[], const char *log)
{
	pid_t pid = fork();

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
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
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
		rm_test_cleanup();                                                           \
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

#endif
