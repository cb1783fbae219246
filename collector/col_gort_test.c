/*
 * col_gort_test.c - col_gort_inspect on real binaries: tb-goserver (built
 * with Debian's golang) yields its Go version, runtime.execute's file offset
 * (checked against the ELF symbol through nm's independent reading) and
 * the cheap probe point past its stack-bound compare, goid's offset in runtime.g (checked against the layout Go 1.17..1.20 use
 * on amd64); copies of it without DWARF or without any symbols give the
 * same facts (Go's function table, the version's known layout), unless
 * their build names a Go version whose layout is not known; this test's own binary is not a Go
 * program; a missing file is an I/O error. col_gort_sched_inspect on
 * tb-grpcserver: the call of runtime.runqput in runtime.newproc.func1
 * (checked against nm's addresses and the bytes at the offset), the TLS slot
 * of a binary without cgo, g.m, m.g0 and m.curg (against Go's layout); the
 * same on stripped copies; not on a C program. Skips without golang.
 */
#include <fcntl.h>
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

/* Whether col_gort.c knows the struct layout of the Go that built v without DWARF (its gort_layouts). */
static int layout_known(const char *v)
{
	return !strncmp(v, "go1.19", 6) && (v[6] == '\0' || v[6] == '.');
}

/*
 * Stripped copies (no DWARF; no symbols at all, as Debian ships Go programs)
 * give the same facts from .gopclntab and the version's known layout; a copy
 * whose build says a Go version without a known layout cannot be followed.
 */
static void test_stripped(void)
{
	struct col_gort g, o;
	char cmd[1400], nodw[300], nosym[300], other[300];
	int want;

	need_go();
	CU_ASSERT_EQUAL_FATAL(col_gort_inspect(TB_GOSERVER_BIN, &o), RM_OK);
	want = layout_known(o.version) ? RM_OK : RM_ENOTSUP;
	snprintf(nodw, sizeof(nodw), "%s/gosrv-nodwarf", rm_test_tmpdir());
	snprintf(nosym, sizeof(nosym), "%s/gosrv-stripped", rm_test_tmpdir());
	snprintf(other, sizeof(other), "%s/gosrv-stripped-go0", rm_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "objcopy --strip-debug '%s' '%s'", TB_GOSERVER_BIN, nodw);
	CU_ASSERT_EQUAL_FATAL(sh(cmd), 0);
	CU_ASSERT_EQUAL_FATAL(rm_test_strip_go(TB_GOSERVER_BIN, nosym, 0), 0);
	CU_ASSERT_EQUAL_FATAL(rm_test_strip_go(TB_GOSERVER_BIN, other, 1), 0); /* names another Go version */
	CU_ASSERT_EQUAL(col_gort_inspect(nodw, &g), want);
	CU_ASSERT(!strncmp(g.version, "go1.", 4));
	CU_ASSERT_EQUAL(g.execute_off, o.execute_off); /* the symbols are still there */
	CU_ASSERT_EQUAL(col_gort_inspect(nosym, &g), want);
	CU_ASSERT(!strncmp(g.version, "go1.", 4)); /* .go.buildinfo is not a debug section: still there */
	CU_ASSERT_EQUAL(col_gort_is_go(nosym), RM_OK); /* still a Go program's runtime */
	if (want == RM_OK) { /* runtime.execute from Go's function table: where the symbol said */
		CU_ASSERT_EQUAL(g.execute_off, o.execute_off);
		CU_ASSERT_EQUAL(g.probe_off, o.probe_off);
		CU_ASSERT_EQUAL(g.goid_off, o.goid_off);
	}
	CU_ASSERT_EQUAL(col_gort_inspect(other, &g), RM_ENOTSUP);
	CU_ASSERT(!strncmp(g.version, "go0.", 4));
	unlink(nodw);
	unlink(nosym);
	unlink(other);
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

/* nm's address and size of sym in bin into *addr, *size: 1, or 0. */
static int nm_sym(const char *bin, const char *sym, unsigned long long *addr, unsigned long long *size)
{
	char cmd[600], line[128] = "";
	FILE *f;
	int ok;

	snprintf(cmd, sizeof(cmd), "nm -S '%s' | awk '$4 == \"%s\" {print $1, $2}'", bin, sym);
	if (!(f = popen(cmd, "r")))
		return 0;
	ok = fgets(line, sizeof(line), f) != NULL && sscanf(line, "%llx %llx", addr, size) == 2;
	pclose(f);
	return ok;
}

static void test_sched(void)
{
	unsigned long long np = 0, np_size = 0, rq = 0, rq_size = 0, text = 0, text_off = 0;
	unsigned char call[5];
	struct col_gort_sched s;
	struct col_gort g;
	char cmd[1400], line[128] = "", nodw[300], nosym[300], self[400];
	ssize_t n;
	int32_t rel;
	FILE *f;
	int fd;

	if (access(TB_GRPCSERVER_BIN, R_OK) != 0)
		RM_TEST_SKIP("tb-grpcserver is not built (needs golang-go and grpc-go)");
	CU_ASSERT_EQUAL_FATAL(col_gort_sched_inspect(TB_GRPCSERVER_BIN, &s), RM_OK);
	CU_ASSERT_FATAL(nm_sym(TB_GRPCSERVER_BIN, "runtime.newproc.func1", &np, &np_size));
	CU_ASSERT_FATAL(nm_sym(TB_GRPCSERVER_BIN, "runtime.runqput", &rq, &rq_size));
	snprintf(cmd, sizeof(cmd),
		 "readelf -SW '%s' | awk '{ for (i = 1; i < NF; i++) if ($i == \".text\") print $(i + 2), $(i + 3) }'",
		 TB_GRPCSERVER_BIN);
	CU_ASSERT_FATAL((f = popen(cmd, "r")) != NULL);
	CU_ASSERT(fgets(line, sizeof(line), f) != NULL && sscanf(line, "%llx %llx", &text, &text_off) == 2);
	pclose(f);
	/* the site is inside runtime.newproc.func1 and is a call whose target is runtime.runqput */
	CU_ASSERT(s.site_off >= np - text + text_off && s.site_off < np - text + text_off + np_size);
	CU_ASSERT_FATAL((fd = open(TB_GRPCSERVER_BIN, O_RDONLY)) >= 0);
	CU_ASSERT_EQUAL(pread(fd, call, sizeof(call), (off_t)s.site_off), (ssize_t)sizeof(call));
	close(fd);
	CU_ASSERT_EQUAL(call[0], 0xe8);
	memcpy(&rel, call + 1, sizeof(rel));
	CU_ASSERT_EQUAL(s.site_off - text_off + text + 5 + (uint64_t)(int64_t)rel, rq);
	/* built without cgo (CGO_ENABLED=0): no PT_TLS, the *g at fsbase - 8 */
	CU_ASSERT_EQUAL(s.g_tls_off, -8);
	/* struct g: stack (16), stackguard0, stackguard1, _panic, _defer (8 each), then m: 48;
	 * struct m opens with g0; for Go 1.19: morebuf (gobuf, 56), divmod (4, padded to 8), procid,
	 * gsignal (8 each), goSigStack (40), sigmask (8), tls (48), mstartfn (8), then curg: 192 */
	CU_ASSERT_EQUAL(s.g_m_off, 48);
	CU_ASSERT_EQUAL(s.m_g0_off, 0);
	CU_ASSERT_EQUAL(col_gort_inspect(TB_GRPCSERVER_BIN, &g), RM_OK);
	if (!strncmp(g.version, "go1.19", 6))
		CU_ASSERT_EQUAL(s.m_curg_off, 192);
	CU_ASSERT(s.m_curg_off > 0 && s.m_curg_off < 1024);
	CU_ASSERT_EQUAL(s.g_goid_off, g.goid_off); /* the same member the scheduler probe reads */
	/* the runtime's text spans the garbage collector's mark worker, not the program's handlers */
	{
		unsigned long long gw = 0, gw_size = 0, mm = 0, mm_size = 0;

		CU_ASSERT(s.g_startpc_off > s.g_m_off && s.g_startpc_off < 1024);
		CU_ASSERT_FATAL(nm_sym(TB_GRPCSERVER_BIN, "runtime.gcBgMarkWorker", &gw, &gw_size));
		CU_ASSERT_FATAL(nm_sym(TB_GRPCSERVER_BIN, "main.main", &mm, &mm_size));
		CU_ASSERT(s.rt_text_lo <= gw && gw < s.rt_text_hi);
		CU_ASSERT(mm < s.rt_text_lo || mm >= s.rt_text_hi);
	}

	snprintf(nodw, sizeof(nodw), "%s/grpcsrv-nodwarf", rm_test_tmpdir());
	snprintf(nosym, sizeof(nosym), "%s/grpcsrv-stripped", rm_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "objcopy --strip-debug '%s' '%s'", TB_GRPCSERVER_BIN, nodw);
	CU_ASSERT_EQUAL_FATAL(sh(cmd), 0);
	CU_ASSERT_EQUAL_FATAL(rm_test_strip_go(TB_GRPCSERVER_BIN, nosym, 0), 0);
	{
		struct col_gort_sched o = s;
		int want = layout_known(g.version) ? RM_OK : RM_ENOTSUP;

		/* without DWARF, and without any symbol: the same facts from .gopclntab and the
		 * version's layout (the runtime's span ends at its last function's padding) */
		CU_ASSERT_EQUAL(col_gort_sched_inspect(nodw, &s), want);
		CU_ASSERT_EQUAL(col_gort_sched_inspect(nosym, &s), want);
		if (want == RM_OK) {
			CU_ASSERT_EQUAL(s.site_off, o.site_off);
			CU_ASSERT_EQUAL(s.ready_off, o.ready_off);
			CU_ASSERT_EQUAL(s.g_tls_off, o.g_tls_off);
			CU_ASSERT_EQUAL(s.g_m_off, o.g_m_off);
			CU_ASSERT_EQUAL(s.m_g0_off, o.m_g0_off);
			CU_ASSERT_EQUAL(s.m_curg_off, o.m_curg_off);
			CU_ASSERT_EQUAL(s.g_startpc_off, o.g_startpc_off);
			CU_ASSERT_EQUAL(s.g_goid_off, o.g_goid_off);
			CU_ASSERT_EQUAL(s.rt_text_lo, o.rt_text_lo);
			CU_ASSERT(s.rt_text_hi >= o.rt_text_hi && s.rt_text_hi < o.rt_text_hi + 64);
		}
	}
	unlink(nodw);
	unlink(nosym);
	CU_ASSERT_FATAL((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) > 0);
	self[n] = '\0';
	CU_ASSERT_EQUAL(col_gort_sched_inspect(self, &s), RM_ENOTSUP);
	CU_ASSERT_EQUAL(col_gort_sched_inspect("/proc/self/status", &s), RM_ENOENT);
	CU_ASSERT_EQUAL(col_gort_sched_inspect("/nonexistent/gosrv", &s), RM_EIO);
}

static CU_TestInfo cases[] = {
	{ "a Go binary: version, runtime.execute, goid's offset", test_go_binary },
	{ "stripped Go binaries: the same facts from Go's function table, for a known Go version", test_stripped },
	{ "not a Go program, not ELF, missing", test_not_go },
	{ "a gRPC server: the goroutine-creation site, the TLS slot, g.m, m.g0, m.curg", test_sched },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_gort", cases)
