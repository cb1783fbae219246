/*
 * col_gort_test.c - col_gort_inspect on real binaries: tb-goserver (built
 * with Debian's golang) yields its Go version, runtime.execute's file offset
 * (checked against the ELF symbol through nm's independent reading) and
 * the cheap probe point past its stack-bound compare, goid's offset in runtime.g (checked against the layout Go 1.17..1.20 use
 * on amd64); copies of it without DWARF or without any symbols are Go
 * programs that cannot be followed; this test's own binary is not a Go
 * program; a missing file is an I/O error. Skips without golang.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "col_gort.h"
#include "rm_err.h"
#include "rm_test.h"
#include "banned.h"

static void need_go(void)
{
	if (access(TB_GOSERVER_BIN, R_OK) != 0)
		RM_TEST_SKIP("tb-goserver is not built (needs golang-go)");
}

/* Runs cmd (a shell line); its exit status, or -1. */
static int sh(const char *cmd)
{
	int st = system(cmd);

	return st == -1 ? -1 : WEXITSTATUS(st);
}

static void test_go_binary(void)
{
	struct col_gort g;
	char cmd[600], line[128] = "";
	unsigned long long vaddr = 0, sh_addr = 0, sh_off = 0;
	FILE *f;

	need_go();
	CU_ASSERT_EQUAL_FATAL(col_gort_inspect(TB_GOSERVER_BIN, &g), RM_OK);
	CU_ASSERT_EQUAL(col_gort_is_go(TB_GOSERVER_BIN), RM_OK);
	CU_ASSERT(!strncmp(g.version, "go1.", 4));
	/* runtime.execute's address by nm, .text's address and offset by readelf: the same file offset */
	snprintf(cmd, sizeof(cmd), "nm '%s' | awk '$3 == \"runtime.execute\" {print $1}'", TB_GOSERVER_BIN);
	CU_ASSERT_FATAL((f = popen(cmd, "r")) != NULL);
	CU_ASSERT(fgets(line, sizeof(line), f) != NULL && sscanf(line, "%llx", &vaddr) == 1);
	pclose(f);
	snprintf(cmd, sizeof(cmd),
		 "readelf -SW '%s' | awk '{ for (i = 1; i < NF; i++) if ($i == \".text\") print $(i + 2), $(i + 3) }'",
		 TB_GOSERVER_BIN);
	CU_ASSERT_FATAL((f = popen(cmd, "r")) != NULL);
	CU_ASSERT(fgets(line, sizeof(line), f) != NULL && sscanf(line, "%llx %llx", &sh_addr, &sh_off) == 2);
	pclose(f);
	CU_ASSERT(vaddr > sh_addr);
	CU_ASSERT_EQUAL(g.execute_off, vaddr - sh_addr + sh_off);
	/* Go's toolchain opens runtime.execute with its stack-bound check: the probe goes on the jbe */
	CU_ASSERT_EQUAL(g.probe_off, g.execute_off + 4);
	/* struct g of Go 1.17..1.20 on amd64: stack (16), stackguard0/1, _panic, _defer, m (8 each),
	 * sched (gobuf, 56), syscallsp, syscallpc, stktopsp, param (8 each), atomicstatus, stackLock
	 * (4 each), then goid: 152 */
	if (!strncmp(g.version, "go1.17", 6) || !strncmp(g.version, "go1.18", 6) || !strncmp(g.version, "go1.19", 6) ||
	    !strncmp(g.version, "go1.20", 6))
		CU_ASSERT_EQUAL(g.goid_off, 152);
	CU_ASSERT(g.goid_off > 0 && g.goid_off < 512);
}

static void test_stripped(void)
{
	struct col_gort g;
	char cmd[1400], nodw[300], nosym[300];

	need_go();
	snprintf(nodw, sizeof(nodw), "%s/gosrv-nodwarf", rm_test_tmpdir());
	snprintf(nosym, sizeof(nosym), "%s/gosrv-stripped", rm_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "objcopy --strip-debug '%s' '%s' && objcopy --strip-all '%s' '%s'", TB_GOSERVER_BIN,
		 nodw, TB_GOSERVER_BIN, nosym);
	CU_ASSERT_EQUAL_FATAL(sh(cmd), 0);
	CU_ASSERT_EQUAL(col_gort_inspect(nodw, &g), RM_ENOTSUP);
	CU_ASSERT(!strncmp(g.version, "go1.", 4));
	CU_ASSERT(g.execute_off > 0);
	CU_ASSERT_EQUAL(col_gort_inspect(nosym, &g), RM_ENOTSUP);
	CU_ASSERT(!strncmp(g.version, "go1.", 4)); /* .go.buildinfo is not a debug section: still there */
	CU_ASSERT_EQUAL(col_gort_is_go(nosym), RM_OK); /* still a Go program's runtime */
	unlink(nodw);
	unlink(nosym);
}

static void test_not_go(void)
{
	struct col_gort g;
	char self[400];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	CU_ASSERT_FATAL(n > 0);
	self[n] = '\0';
	CU_ASSERT_EQUAL(col_gort_inspect(self, &g), RM_ENOENT);
	CU_ASSERT_EQUAL(col_gort_inspect("/proc/self/status", &g), RM_ENOENT); /* not ELF */
	CU_ASSERT_EQUAL(col_gort_inspect("/nonexistent/gosrv", &g), RM_EIO);
	CU_ASSERT_EQUAL(col_gort_is_go(self), RM_ENOENT);
	CU_ASSERT_EQUAL(col_gort_is_go("/proc/self/status"), RM_ENOENT);
	CU_ASSERT_EQUAL(col_gort_is_go("/nonexistent/gosrv"), RM_EIO);
}

static CU_TestInfo cases[] = {
	{ "a Go binary: version, runtime.execute, goid's offset", test_go_binary },
	{ "stripped Go binaries cannot be followed", test_stripped },
	{ "not a Go program, not ELF, missing", test_not_go },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_gort", cases)
