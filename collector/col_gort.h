/*
 * col_gort.h - what the collector needs to know about a Go program's
 * runtime, read from its binary alone (no help from the application):
 * whether it is a Go program at all (a .go.buildinfo section or a
 * runtime.main symbol), the Go version it was built with (.go.buildinfo),
 * where the scheduler's runtime.execute starts in the file (for a uprobe:
 * in Go >= 1.17's register ABI its first argument, the goroutine's *g, is
 * in RAX), and at which offset struct runtime.g keeps the goroutine's id
 * (its goid member, from the binary's DWARF, read with elfutils' libdw).
 *
 * Where to probe: a uprobe on an instruction the kernel cannot emulate is
 * single-stepped out of line, a second trap that costs 15-50 us per hit on
 * these virtual machines against ~0.7 us for an emulated one (measured by
 * bench/bench_gosched). runtime.execute opens with Go's stack-bound check,
 * "cmp 0x10(%r14),%rsp" (not emulated) then "jbe" (a conditional jump, which
 * is); the jbe leaves RAX alone, so probe_off is the jbe's offset when the
 * function starts with those bytes, else execute_off.
 */
#ifndef COL_GORT_H
#define COL_GORT_H

#include <stdint.h>

#define COL_GORT_VERSION_MAX 48

struct col_gort {
	char version[COL_GORT_VERSION_MAX]; /* "go1.19.8"; "" if .go.buildinfo does not say */
	uint64_t execute_off;               /* file offset of runtime.execute's first instruction */
	uint64_t probe_off;                 /* where a uprobe on it costs least (below) */
	uint64_t goid_off;                  /* byte offset of goid in struct runtime.g */
};

/*
 * Inspects the ELF file at path. Returns RM_OK with *out filled for a Go
 * binary that has both the symbol and the DWARF; RM_ENOENT if it is not a Go
 * program (or not ELF); RM_ENOTSUP for a Go program without runtime.execute
 * in its symbol table or without struct runtime.g's goid in its DWARF
 * (stripped: go build -ldflags=-s -w), with out->version filled if known;
 * RM_EIO if the file cannot be opened or read. Thread-safe (no global state
 * beyond libelf's version handshake).
 */
int col_gort_inspect(const char *path, struct col_gort *out);

/*
 * Is the ELF file at path a Go program (a .go.buildinfo section or a
 * runtime.main symbol; also stripped ones that have .go.buildinfo)? Cheaper
 * than col_gort_inspect: no DWARF. Returns RM_OK if so, RM_ENOENT if not (or
 * not ELF), RM_EIO if it cannot be opened. Thread-safe.
 */
int col_gort_is_go(const char *path);

/*
 * Where a Go program's scheduler keeps the goroutine a thread runs, and
 * where new goroutines are queued (linux/amd64, Go >= 1.17's register ABI),
 * for labels carried on goroutines (col_golabel.h):
 *  - g_tls_off: the running *g's slot from the thread's fsbase: -8 without
 *    a PT_TLS segment (Go's own linker, no cgo: runtime.settls); with one
 *    (external linking, cgo), runtime.tlsg's offset in the executable's TLS
 *    block, which ends at fsbase (variant II);
 *  - g_m_off, m_g0_off, m_curg_off: struct runtime.g's m, struct
 *    runtime.m's g0 (the system stack's g) and curg (the user goroutine the
 *    thread runs, or 0), from the DWARF;
 *  - site_off: the file offset of the one "call runtime.runqput" (e8 rel32)
 *    in runtime.newproc's closure (runtime.newproc.func1, which runs
 *    newproc1 and queues the new goroutine: its *g in RBX, its creator in
 *    m.curg). The kernel emulates a call under a uprobe (no single step);
 *  - g_goid_off: struct runtime.g's goid (the goroutine's id, never reused:
 *    a label kept by *g is valid only while the g holds the same id);
 *  - g_startpc_off: struct runtime.g's startpc (the function a goroutine
 *    was started on), and rt_text_lo..rt_text_hi the addresses the runtime
 *    package's own functions (runtime.*) span, so that the runtime's
 *    goroutines (the garbage collector's mark workers, the finalizer
 *    goroutine), started by whichever goroutine first needed them, are
 *    told apart; both 0 for a position-independent build, whose load
 *    address the file does not give;
 *  - ready_off: the file offset of the jbe after runtime.ready's stack-bound
 *    compare (emulated by the kernel; RAX still holds the readied *g), or
 *    of its first instruction without that prologue; 0 without the symbol.
 */
struct col_gort_sched {
	int64_t g_tls_off;
	uint64_t g_m_off;
	uint64_t m_g0_off;
	uint64_t m_curg_off;
	uint64_t site_off;
	uint64_t g_startpc_off;
	uint64_t g_goid_off;
	uint64_t rt_text_lo, rt_text_hi;
	uint64_t ready_off; /* where a uprobe in runtime.ready(gp) costs least (its *g in RAX), 0 if absent */
};

/*
 * Inspects the ELF file at path for struct col_gort_sched. Returns RM_OK with
 * *out filled; RM_ENOENT if it is not ELF; RM_ENOTSUP for a program this
 * cannot read (not Go, stripped of symbols or DWARF, no single call of
 * runtime.runqput in runtime.newproc.func1, a PT_TLS segment without
 * runtime.tlsg); RM_EIO if the file cannot be opened. Thread-safe.
 */
int col_gort_sched_inspect(const char *path, struct col_gort_sched *out);

#endif
