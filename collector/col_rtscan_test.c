/*
 * col_rtscan_test.c - col_rtscan on a /proc of the test's own making (pid
 * directories whose exe links to tb-goserver, to OpenJDK's java launcher, to
 * a program that is neither, or to nothing) and a real BPF hash map: the Go
 * programs and JVMs are added with their kinds, those that left are
 * removed, one that exec'd another runtime changes kind, the rest never
 * enter; the change function hears of every change once, also of a Go
 * program that exec'd another Go program. Needs the right to create a
 * BPF map (root); skips otherwise.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "rm_test.h"
#include "col_rtscan.h"
#include "rametr.h"
#include "rm_err.h"

static char root[320];

/* A pid directory of the fake /proc whose exe links to target (NULL: none). */
static void mk_pid(const char *pid, const char *target)
{
	char p[400];

	snprintf(p, sizeof(p), "%s/%s", root, pid);
	CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/%s/exe", root, pid);
	if (target)
		CU_ASSERT_EQUAL_FATAL(symlink(target, p), 0);
}

static void rm_pid(const char *pid)
{
	char p[400];

	snprintf(p, sizeof(p), "%s/%s/exe", root, pid);
	unlink(p);
	snprintf(p, sizeof(p), "%s/%s", root, pid);
	CU_ASSERT_EQUAL(rmdir(p), 0);
}

/* The kind the map holds for pid, RM_RT_NONE if it holds none. */
static uint32_t in_map(int fd, uint32_t pid)
{
	uint32_t v;

	return bpf_map_lookup_elem(fd, &pid, &v) == 0 ? v : RM_RT_NONE;
}

static void test_scan(void)
{
	struct col_rtscan *s = NULL;
	uint32_t n = 99;
	int fd;

	snprintf(root, sizeof(root), "%s/proc", rm_test_tmpdir());
	CU_ASSERT_EQUAL_FATAL(mkdir(root, 0755), 0);
	fd = bpf_map_create(BPF_MAP_TYPE_HASH, "rt_test", sizeof(uint32_t), sizeof(uint32_t), 64, NULL);
	if (fd < 0)
		RM_TEST_SKIP("cannot create a BPF map: %s", strerror(errno));
	mk_pid("101", TB_GOSERVER_BIN);
	mk_pid("102", "/bin/sh");
	mk_pid("105", RM_JAVA_BIN);
	mk_pid("103", NULL);        /* a kernel thread: no exe */
	mk_pid("self", TB_GOSERVER_BIN); /* not a process id */
	CU_ASSERT_EQUAL_FATAL(col_rtscan_open(&s, root, fd, 0), RM_OK);
	CU_ASSERT_EQUAL(col_rtscan_run(s, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT_EQUAL(in_map(fd, 101), RM_RT_GO);
	CU_ASSERT_EQUAL(in_map(fd, 105), RM_RT_JVM);
	CU_ASSERT(!in_map(fd, 102));
	CU_ASSERT(!in_map(fd, 103));
	/* 101 and 105 exit, 104 starts (the same executable: judged from the cache) */
	rm_pid("101");
	rm_pid("105");
	mk_pid("104", TB_GOSERVER_BIN);
	CU_ASSERT_EQUAL(col_rtscan_run(s, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT(!in_map(fd, 105));
	CU_ASSERT(!in_map(fd, 101));
	CU_ASSERT_EQUAL(in_map(fd, 104), RM_RT_GO);
	/* 104 execs a JVM: the same process id, another kind */
	rm_pid("104");
	mk_pid("104", RM_JAVA_BIN);
	CU_ASSERT_EQUAL(col_rtscan_run(s, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(in_map(fd, 104), RM_RT_JVM);
	/* a network namespace filter no process of this /proc is in: all leave */
	col_rtscan_close(s);
	CU_ASSERT_EQUAL_FATAL(col_rtscan_open(&s, root, fd, 1), RM_OK);
	CU_ASSERT_EQUAL(col_rtscan_run(s, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	col_rtscan_close(s);
	/* a /proc that cannot be read, bad arguments */
	CU_ASSERT_EQUAL_FATAL(col_rtscan_open(&s, "/nonexistent/proc", fd, 0), RM_OK);
	CU_ASSERT_EQUAL(col_rtscan_run(s, &n), RM_EIO);
	col_rtscan_close(s);
	CU_ASSERT_EQUAL(col_rtscan_open(&s, root, -1, 0), RM_EINVAL);
	rm_pid("102");
	rm_pid("103");
	rm_pid("104");
	rm_pid("self");
	rmdir(root);
	close(fd);
}

/* What the change function heard. */
static struct told {
	uint32_t pid, before, after;
	char exe[400];
} told[16];
static size_t ntold;
static uint32_t finer_pid; /* hear() keeps this process as RM_RT_GO_PLAIN when it is judged a Go program */

static uint32_t hear(void *arg, uint32_t pid, uint32_t before, uint32_t after, const char *exe)
{
	CU_ASSERT_PTR_EQUAL(arg, &ntold);
	CU_ASSERT_FATAL(ntold < sizeof(told) / sizeof(told[0]));
	told[ntold].pid = pid;
	told[ntold].before = before;
	told[ntold].after = after;
	snprintf(told[ntold].exe, sizeof(told[ntold].exe), "%s", exe);
	ntold++;
	return pid == finer_pid && after == RM_RT_GO ? RM_RT_GO_PLAIN : after;
}

/* Did the function hear pid go from before to after, with its exe link? */
static int heard(uint32_t pid, uint32_t before, uint32_t after)
{
	char exe[400];
	size_t i;

	snprintf(exe, sizeof(exe), "%s/%u/exe", root, pid);
	for (i = 0; i < ntold; i++)
		if (told[i].pid == pid && told[i].before == before && told[i].after == after &&
		    strcmp(told[i].exe, exe) == 0)
			return 1;
	return 0;
}

static void test_changes(void)
{
	struct col_rtscan *s = NULL;
	uint32_t n = 0;
	int fd;

	snprintf(root, sizeof(root), "%s/proc2", rm_test_tmpdir());
	CU_ASSERT_EQUAL_FATAL(mkdir(root, 0755), 0);
	fd = bpf_map_create(BPF_MAP_TYPE_HASH, "rt_test2", sizeof(uint32_t), sizeof(uint32_t), 64, NULL);
	if (fd < 0)
		RM_TEST_SKIP("cannot create a BPF map: %s", strerror(errno));
	mk_pid("201", TB_GOSERVER_BIN);
	mk_pid("202", RM_JAVA_BIN);
	mk_pid("203", "/bin/sh");
	CU_ASSERT_EQUAL_FATAL(col_rtscan_open(&s, root, fd, 0), RM_OK);
	col_rtscan_on_change(s, hear, &ntold);
	CU_ASSERT_EQUAL(col_rtscan_run(s, &n), RM_OK);
	CU_ASSERT_EQUAL(ntold, 2);
	CU_ASSERT(heard(201, RM_RT_NONE, RM_RT_GO));
	CU_ASSERT(heard(202, RM_RT_NONE, RM_RT_JVM));
	/* nothing changed: nothing told */
	ntold = 0;
	CU_ASSERT_EQUAL(col_rtscan_run(s, &n), RM_OK);
	CU_ASSERT_EQUAL(ntold, 0);
	/* 201 execs another Go program, 202 exits, 203 execs a Go program */
	rm_pid("201");
	mk_pid("201", TB_GOLOAD_BIN);
	rm_pid("202");
	rm_pid("203");
	mk_pid("203", TB_GOSERVER_BIN);
	CU_ASSERT_EQUAL(col_rtscan_run(s, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT_EQUAL(ntold, 3);
	CU_ASSERT(heard(201, RM_RT_GO, RM_RT_GO));
	CU_ASSERT(heard(202, RM_RT_JVM, RM_RT_NONE));
	CU_ASSERT(heard(203, RM_RT_NONE, RM_RT_GO));
	CU_ASSERT_EQUAL(in_map(fd, 201), RM_RT_GO);
	CU_ASSERT(!in_map(fd, 202));
	/* a finer kind chosen for a Go program that came: the map holds it, the
	 * next pass (which judges it RM_RT_GO again) tells nothing, its exit
	 * tells the finer kind as before */
	finer_pid = 204;
	mk_pid("204", TB_GOSERVER_BIN);
	ntold = 0;
	CU_ASSERT_EQUAL(col_rtscan_run(s, &n), RM_OK);
	CU_ASSERT_EQUAL(ntold, 1);
	CU_ASSERT(heard(204, RM_RT_NONE, RM_RT_GO));
	CU_ASSERT_EQUAL(in_map(fd, 204), RM_RT_GO_PLAIN);
	ntold = 0;
	CU_ASSERT_EQUAL(col_rtscan_run(s, &n), RM_OK);
	CU_ASSERT_EQUAL(ntold, 0);
	CU_ASSERT_EQUAL(in_map(fd, 204), RM_RT_GO_PLAIN);
	rm_pid("204");
	CU_ASSERT_EQUAL(col_rtscan_run(s, &n), RM_OK);
	CU_ASSERT_EQUAL(ntold, 1);
	CU_ASSERT(heard(204, RM_RT_GO_PLAIN, RM_RT_NONE));
	CU_ASSERT(!in_map(fd, 204));
	finer_pid = 0;
	/* cleared: told nothing more */
	col_rtscan_on_change(s, NULL, NULL);
	ntold = 0;
	rm_pid("201");
	CU_ASSERT_EQUAL(col_rtscan_run(s, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(ntold, 0);
	col_rtscan_close(s);
	rm_pid("203");
	rmdir(root);
	close(fd);
}

static CU_TestInfo cases[] = {
	{ "Go programs and JVMs enter the map, others never, leavers are removed", test_scan },
	{ "every change is told once: came, left, exec'd another executable; the map holds the kind chosen",
	  test_changes },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_rtscan", cases)
