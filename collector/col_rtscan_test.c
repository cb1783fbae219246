/*
 * col_rtscan_test.c - col_rtscan on a /proc of the test's own making (pid
 * directories whose exe links to tb-goserver, to OpenJDK's java launcher, to
 * a program that is neither, or to nothing) and a real BPF hash map: the Go
 * programs and JVMs are added with their kinds, those that left are
 * removed, one that exec'd another runtime changes kind, the rest never
 * enter. Needs the right to create a
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

static CU_TestInfo cases[] = {
	{ "Go programs and JVMs enter the map, others never, leavers are removed", test_scan },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_rtscan", cases)
