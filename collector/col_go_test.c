/*
 * col_go_test.c - the scan for Go processes (col_go.h) over a /proc of the
 * test's own making: process directories whose exe links to tb-goserver (a
 * Go program) or to a C program, with an ns/net file whose inode stands for
 * the namespace. A table of named steps, each a change to that tree, one
 * scan, and the attaches and detaches it must cause.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "col_go.h"
#include "rm_err.h"
#include "rm_test.h"
#include "banned.h"

#ifndef TB_GOSERVER_BIN
#error "TB_GOSERVER_BIN must name the testbed's Go server"
#endif

#define MAXP 8

static char root[PATH_MAX], self[PATH_MAX]; /* self: this test, a C program */
static uint32_t attached[MAXP], detached[MAXP];
static int nattached, ndetached, fail_attach;

static int on_attach(void *arg, uint32_t pid, const char *exe, const struct col_gort *g, void **handle)
{
	(void)arg;
	(void)exe;
	if (fail_attach || nattached == MAXP || !g->probe_off || !g->ready_probe_off || !g->leave_probe_off[0])
		return RM_EBPF;
	attached[nattached++] = pid;
	*handle = (void *)(uintptr_t)pid;
	return RM_OK;
}

static void on_detach(void *arg, void *handle)
{
	(void)arg;
	if (ndetached < MAXP)
		detached[ndetached++] = (uint32_t)(uintptr_t)handle;
}

/* Process pid of the fake /proc runs bin (NULL: it is gone) in namespace file ns ("a" or "b"). */
static void proc_set(uint32_t pid, const char *bin, const char *ns)
{
	char d[PATH_MAX + 32], p[PATH_MAX + 64], t[PATH_MAX + 32];

	snprintf(d, sizeof(d), "%s/%u", root, pid);
	snprintf(p, sizeof(p), "%s/exe", d);
	unlink(p);
	snprintf(p, sizeof(p), "%s/ns/net", d);
	unlink(p);
	snprintf(p, sizeof(p), "%s/ns", d);
	rmdir(p);
	rmdir(d);
	if (!bin)
		return;
	CU_ASSERT_FATAL(mkdir(d, 0755) == 0);
	CU_ASSERT_FATAL(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/exe", d);
	CU_ASSERT_FATAL(symlink(bin, p) == 0);
	snprintf(p, sizeof(p), "%s/ns/net", d);
	snprintf(t, sizeof(t), "%s/ns-%s", root, ns);
	CU_ASSERT_FATAL(link(t, p) == 0); /* the same inode as the namespace's file */
}

static uint32_t ns_ino(const char *ns)
{
	char t[PATH_MAX + 32];
	struct stat st;

	snprintf(t, sizeof(t), "%s/ns-%s", root, ns);
	CU_ASSERT_FATAL(stat(t, &st) == 0);
	return (uint32_t)st.st_ino;
}

struct step {
	const char *name;
	uint32_t pid;
	const char *bin;      /* "go", "c" or NULL (the process is gone); pid 0: no change */
	const char *ns;
	int fail;             /* the attach fails */
	uint32_t attach;      /* the pid the scan must attach to, 0: none */
	uint32_t detach;      /* the pid the scan must detach from, 0: none */
	uint64_t followed;
};

static const struct step steps[] = {
	{ "a Go process of the namespace is attached to", 100, "go", "a", 0, 100, 0, 1 },
	{ "a scan again changes nothing", 0, NULL, NULL, 0, 0, 0, 1 },
	{ "a C program is not", 101, "c", "a", 0, 0, 0, 1 },
	{ "a Go process of another namespace is not", 102, "go", "b", 0, 0, 0, 1 },
	{ "a second Go process is", 103, "go", "a", 0, 103, 0, 2 },
	{ "a process that is gone is detached from", 100, NULL, NULL, 0, 0, 100, 1 },
	{ "a C program that executes the Go program is attached to", 101, "go", "a", 0, 101, 0, 2 },
	{ "a Go process that executes a C program is detached from", 103, "c", "a", 0, 0, 103, 1 },
	{ "... and not attached to again", 0, NULL, NULL, 0, 0, 0, 1 },
	{ "a process that cannot be attached to is not followed", 104, "go", "a", 1, 0, 0, 1 },
	{ "... nor tried again", 0, NULL, NULL, 0, 0, 0, 1 },
};

static void test_scan(void)
{
	struct col_go_ops ops = { .attach = on_attach, .detach = on_detach, .arg = NULL };
	char tmpl[] = "/tmp/col_go_test.XXXXXX", t[PATH_MAX + 32];
	struct col_go_stats st;
	struct col_go *s;
	size_t i;
	FILE *f;

	CU_ASSERT_FATAL(readlink("/proc/self/exe", self, sizeof(self) - 1) > 0);
	CU_ASSERT_FATAL(mkdtemp(tmpl) != NULL);
	snprintf(root, sizeof(root), "%s", tmpl);
	for (i = 0; i < 2; i++) {
		snprintf(t, sizeof(t), "%s/ns-%s", root, i ? "b" : "a");
		CU_ASSERT_FATAL((f = fopen(t, "w")) != NULL);
		fclose(f);
	}
	CU_ASSERT_EQUAL_FATAL(col_go_new(&s, root, ns_ino("a"), &ops), RM_OK);
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		const struct step *c = &steps[i];
		int ok;

		if (c->pid)
			proc_set(c->pid, !c->bin ? NULL : !strcmp(c->bin, "go") ? TB_GOSERVER_BIN : self, c->ns);
		nattached = ndetached = 0;
		fail_attach = c->fail;
		CU_ASSERT_EQUAL(col_go_scan(s), RM_OK);
		col_go_get_stats(s, &st);
		ok = (c->attach ? nattached == 1 && attached[0] == c->attach : nattached == 0) &&
		     (c->detach ? ndetached == 1 && detached[0] == c->detach : ndetached == 0) && st.followed == c->followed;
		if (!ok)
			fprintf(stderr, "\n%s: %d attached (%u), %d detached (%u), %llu followed\n", c->name, nattached,
				nattached ? attached[0] : 0, ndetached, ndetached ? detached[0] : 0,
				(unsigned long long)st.followed);
		CU_ASSERT(ok);
	}
	ndetached = 0;
	col_go_free(s);
	CU_ASSERT_EQUAL(ndetached, 1); /* 101, still followed */
	for (i = 100; i <= 104; i++)
		proc_set((uint32_t)i, NULL, NULL);
	for (i = 0; i < 2; i++) {
		snprintf(t, sizeof(t), "%s/ns-%s", root, i ? "b" : "a");
		unlink(t);
	}
	CU_ASSERT_EQUAL(rmdir(root), 0);
}

static void test_bad_root(void)
{
	struct col_go_ops ops = { .attach = on_attach, .detach = on_detach, .arg = NULL };
	struct col_go *s;

	CU_ASSERT_EQUAL(col_go_new(&s, "/nonexistent/proc", 0, &ops), RM_OK);
	CU_ASSERT_EQUAL(col_go_scan(s), RM_EIO);
	col_go_free(s);
	CU_ASSERT_EQUAL(col_go_new(&s, "/a/root/longer/than/sixty/three/bytes/is/refused/by/the/scanner/x", 0, &ops),
			RM_EINVAL);
}

static CU_TestInfo cases[] = {
	{ "processes found, attached to and detached from, scan by scan", test_scan },
	{ "a /proc that cannot be read", test_bad_root },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_go", cases)
