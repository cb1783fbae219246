/*
 * tb_testutil.h - process helpers shared by the testbed's tests (header-only,
 * test code only): spawn a tool with its stdout in a file or a pipe, wait for
 * it with a timeout, read a whole file, start tb-server on a free port.
 * Not thread-safe (tests are single-threaded). Children are made by
 * rm_test_fork(), so a failing test still stops them (rm_test.h).
 */
#ifndef TB_TESTUTIL_H
#define TB_TESTUTIL_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rm_test.h"

/*
 * Forks and execs argv[0] with stdout redirected to out_path (truncated) if
 * not NULL, or to the write end of a new pipe whose read end goes to
 * *pipe_rd if pipe_rd is not NULL. stderr is inherited. Returns the pid or -1.
 */
static inline pid_t tbt_spawn(char *const argv[], const char *out_path, int *pipe_rd)
{
	int p[2] = { -1, -1 };
	pid_t pid;

	if (pipe_rd && pipe2(p, O_CLOEXEC) != 0)
		return -1;
	pid = rm_test_fork();
	if (pid < 0) {
		if (pipe_rd) {
			close(p[0]);
			close(p[1]);
		}
		return -1;
	}
	if (pid == 0) {
		if (out_path) {
			int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

			if (fd < 0 || dup2(fd, 1) < 0)
				_exit(127);
		} else if (pipe_rd) {
			if (dup2(p[1], 1) < 0)
				_exit(127);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	if (pipe_rd) {
		close(p[1]);
		*pipe_rd = p[0];
	}
	return pid;
}

/*
 * Waits up to timeout_ms for pid. Returns its exit code, 128 + signal if it
 * was killed by a signal, or -1 on timeout (the process is then SIGKILLed
 * and reaped).
 */
static inline int tbt_wait(pid_t pid, int timeout_ms)
{
	int st, waited = 0;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid) {
			rm_test_forget(pid);
			break;
		}
		if (r < 0 && errno != EINTR)
			return -1;
		if (waited >= timeout_ms) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			rm_test_forget(pid);
			return -1;
		}
		usleep(10000);
		waited += 10;
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return -1;
}

/* Runs argv to completion (stdout to out_path if not NULL); returns as tbt_wait. */
static inline int tbt_run(char *const argv[], const char *out_path, int timeout_ms)
{
	pid_t pid = tbt_spawn(argv, out_path, NULL);

	return pid < 0 ? -1 : tbt_wait(pid, timeout_ms);
}

/* Whole file as a malloc'd NUL-terminated string, or NULL. */
static inline char *tbt_slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t cap = 4096, len = 0, n;
	char *buf;

	if (!f)
		return NULL;
	buf = malloc(cap);
	while (buf) {
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (len + 1 < cap)
			break;
		cap *= 2;
		{
			char *nb = realloc(buf, cap);

			if (!nb)
				free(buf);
			buf = nb;
		}
	}
	fclose(f);
	if (buf)
		buf[len] = '\0';
	return buf;
}

/* Path "<dir>/name" in a static rotating buffer: valid for the next 15 calls. */
static inline const char *tbt_path(const char *dir, const char *name)
{
	static char bufs[16][512];
	static int next;
	char *b = bufs[next++ % 16];

	snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
	return b;
}

/*
 * Starts tb-server on 127.0.0.1 port 0 with the given truth path and extra
 * arguments (NULL-terminated list, may be NULL), waits for its
 * "listening ADDR:PORT" line and stores the port. Returns the pid or -1.
 */
static inline pid_t tbt_start_server(const char *bin, const char *truth, const char *workers, int *port)
{
	char *argv[] = { (char *)bin, "--listen", "127.0.0.1:0", "--truth", (char *)truth,
			 workers ? "--workers" : NULL, (char *)workers, NULL };
	char line[128];
	size_t len = 0;
	int rd = -1;
	pid_t pid = tbt_spawn(argv, NULL, &rd);

	if (pid < 0)
		return -1;
	while (len + 1 < sizeof(line)) {
		struct pollfd pfd = { .fd = rd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, 5000) <= 0)
			break;
		n = read(rd, line + len, 1);
		if (n <= 0)
			break;
		len++;
		if (line[len - 1] == '\n')
			break;
	}
	close(rd);
	line[len] = '\0';
	if (sscanf(line, "listening 127.0.0.1:%d", port) != 1 || *port <= 0) {
		fprintf(stderr, "tb-server did not report its port (got '%s')\n", line);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		rm_test_forget(pid);
		return -1;
	}
	return pid;
}

#endif
