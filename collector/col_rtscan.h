/*
 * col_rtscan.h - which processes of the host run a managed runtime (a Go
 * program or a Java virtual machine, recognised from its executable's ELF
 * file by col_gort and col_jvm): one pass over /proc keeps a kernel map of
 * their process ids and kinds (tgid -> RM_RT_GO, RM_RT_JVM, or the kind the
 * change function chose) in step, so
 * that the kernel counts their threads' unsegmented CPU apart
 * (rm_totals.unseg_rt_ns, a Go program's also in unseg_go_ns). Each executable
 * (device, inode) is judged once (a bounded cache); a process whose
 * executable is gone or unreadable is not a runtime.
 *
 * Not thread-safe: one thread owns a scanner.
 */
#ifndef COL_RTSCAN_H
#define COL_RTSCAN_H

#include <stdint.h>

struct col_rtscan;

/*
 * A scanner of proc_root (normally "/proc") that keeps the BPF hash map
 * map_fd (u32 -> u32) in step; netns_ino nonzero: only processes of that
 * network namespace (inode) are looked at. RM_OK, RM_EINVAL, RM_ENOMEM.
 */
int col_rtscan_open(struct col_rtscan **out, const char *proc_root, int map_fd, uint32_t netns_ino);

/*
 * One pass: adds the runtimes that appeared to the map and removes those
 * that exited (or exec'd something else; one that exec'd another runtime
 * gets its new kind). *n (may be NULL): how many are in
 * the map after it. RM_OK; RM_EIO if proc_root cannot be read (logged);
 * RM_ENOMEM. A map that refuses an entry (full) is logged once and the
 * process left out.
 */
int col_rtscan_run(struct col_rtscan *s, uint32_t *n);

/*
 * Told of every change a pass makes: a runtime that came (before
 * RM_RT_NONE), left (after RM_RT_NONE; the map no longer has it), or whose
 * process exec'd another executable (kinds may be equal: a Go program that
 * exec'd another Go program). before is the kind the map held, after the
 * kind judged from the executable; for a process that stays, the function
 * returns the kind the map is to hold (after, or a finer kind such as
 * RM_RT_GO_PLAIN for RM_RT_GO), which the next change's before is; it is
 * ignored when after is RM_RT_NONE. A process whose entry the map then
 * refuses is told again, as leaving. exe is the process's executable as the
 * scanner sees it (proc_root/PID/exe), valid during the call. Called on the
 * thread of col_rtscan_run.
 */
typedef uint32_t (*col_rtscan_fn)(void *arg, uint32_t pid, uint32_t before, uint32_t after, const char *exe);

/* Sets (fn NULL: clears) the function told of changes; the next pass tells it of changes from then on. */
void col_rtscan_on_change(struct col_rtscan *s, col_rtscan_fn fn, void *arg);

void col_rtscan_close(struct col_rtscan *s);

#endif
