/*
 * col_restart.h - what a collector leaves behind so that the next instance
 * of its node can report the windows it did not finish: the state file
 * (<spool>.state), its format, and the totals a restarted instance derives
 * from it.
 *
 * A collector that runs writes its line of the state file at start and, on
 * the ebpf backend, again at each window it closes while the aggregator has
 * acknowledged everything sent before (cheaply: one small file replaced by
 * rename(), atomic, not synced). A collector that stops cleanly (everything
 * acknowledged or spooled) removes it. A collector that finds one at start
 * is the next instance after one that died (SIGKILL, crash, power loss):
 *   - ebpf: the file holds the first window whose totals may be missing and
 *     the kernel's cumulative busy CPU time (/proc/stat) at that moment; the
 *     new instance reports busy CPU from then to now as one lump over those
 *     windows (WindowTotals.restart = number of windows), unless the node
 *     rebooted (boot id differs) or the counters went back;
 *   - replay: the file names the stream the dead instance replayed; the
 *     stream is the node's counters, so the new instance replays it for its
 *     window totals only and reports each window's (restart = 1).
 * The aggregator splits these over the windows (aggregator/agg_restart.h):
 * windows whose totals arrived keep them; what no stored part explains is
 * V 'collector_restart'.
 *
 * Pure functions (format, parse, lump) take data and return data; the file
 * and /proc functions are the only ones touching the system. Reentrant.
 */
#ifndef COL_RESTART_H
#define COL_RESTART_H

#include <stddef.h>
#include <stdint.h>

#include "rm_part.h"

#define COL_RESTART_MAGIC "rametr-collector-state 1"
#define COL_RESTART_LINE_MAX 4608

struct col_restart_state {
	char node[64];
	char backend[16];     /* "ebpf" or "replay" */
	uint64_t window_ns;
	uint64_t from_win;    /* ebpf: first window whose totals may be missing */
	uint64_t busy_ns;     /* ebpf: /proc/stat busy CPU at from_win's snapshot */
	char boot[40];        /* ebpf: /proc/sys/kernel/random/boot_id ("" if unknown) */
	char events[4096];    /* replay: the stream's path */
};

/* One line (with '\n') into buf[len]. RM_OK, RM_EFULL (does not fit), RM_EINVAL (a field has a space or newline). */
int col_restart_format(const struct col_restart_state *s, char *buf, size_t len);

/* Parses a line of col_restart_format (trailing newline optional) into *s. RM_OK or RM_EPROTO. */
int col_restart_parse(const char *line, struct col_restart_state *s);

/*
 * The ebpf restart report: busy CPU from prev's snapshot to busy_now as
 * one lump over windows prev->from_win .. now_win (restart = their
 * number, win = now_win). Returns 1 with *out set; 0 with *why set when
 * there is nothing to report: another node or window length, another boot,
 * counters that went back, or now_win before from_win.
 */
int col_restart_lump(const struct col_restart_state *prev, const char *node, uint64_t window_ns,
		     const char *boot_now, uint64_t busy_now, uint64_t now_win, struct rm_totals *out,
		     const char **why);

/* ---- the system ---- */

/*
 * The state file holds one line per run whose windows may be open: the
 * running collector's last, before it those of dead instances whose
 * reports the aggregator has not acknowledged yet (reporting them again is
 * harmless: a window that has totals keeps them). At most COL_RESTART_MAX.
 */
#define COL_RESTART_MAX 16

/* Reads the state file's lines into s[0..*n) (max COL_RESTART_MAX; bad
 * lines are skipped with a warning). RM_OK, RM_ENOENT (none), RM_EIO. */
int col_restart_load(const char *path, struct col_restart_state *s, size_t *n);

/* Replaces the state file with s[0..n) (path.tmp, then rename). RM_OK, RM_EIO (logged), RM_EFULL, RM_EINVAL. */
int col_restart_save(const char *path, const struct col_restart_state *s, size_t n);

/* Removes the state file; RM_OK also if there was none, else RM_EIO (logged). */
int col_restart_remove(const char *path);

/* The node's busy CPU time since boot in ns (/proc/stat: user, nice, system, irq, softirq). RM_OK or RM_EIO. */
int col_restart_busy_ns(uint64_t *busy);

/* The boot id into buf (len >= 37), "" if unknown. */
void col_restart_boot_id(char *buf, size_t len);

#endif
