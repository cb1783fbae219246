/*
 * col_go.h - finding the Go programs among the processes a collector
 * watches, so that their goroutines are followed (docs/go.md): a scan of
 * /proc that inspects each process's binary once (col_gort.h, cached by
 * its device and inode), and has the caller attach its probes to each Go
 * process of the watched network namespace that can be followed, and detach
 * them when the process is gone or has executed another binary.
 *
 * Bounded: at most COL_GO_MAX_PROCS processes followed at once (more are
 * logged once and left to thread segments) and COL_GO_MAX_BINS binaries
 * remembered (the cache starts over when full). Not thread-safe: one
 * thread owns a struct col_go.
 */
#ifndef COL_GO_H
#define COL_GO_H

#include <stdint.h>

#include "col_gort.h"

#define COL_GO_MAX_PROCS 64
#define COL_GO_MAX_BINS 256

/* What the scan has the caller do. */
struct col_go_ops {
	/* Attach the probes to process pid, whose binary is /proc/PID/exe (exe) described by *g:
	 * RM_OK with *handle set (not NULL), or an error (logged by the callee; the process is not
	 * tried again while it runs the same binary). */
	int (*attach)(void *arg, uint32_t pid, const char *exe, const struct col_gort *g, void **handle);
	/* Detach what attach returned. */
	void (*detach)(void *arg, void *handle);
	void *arg;
};

struct col_go;

struct col_go_stats {
	uint64_t followed;    /* Go processes followed now */
	uint64_t attached;    /* processes attached so far */
	uint64_t unfollowable; /* Go binaries seen that cannot be followed (stripped, no register ABI) */
};

/*
 * Makes a scanner of the processes under proc_root ("/proc") in network
 * namespace netns_ino (0: every namespace). Returns RM_OK, RM_EINVAL (a root
 * longer than 63 bytes) or RM_ENOMEM;
 * *out released with col_go_free.
 */
int col_go_new(struct col_go **out, const char *proc_root, uint32_t netns_ino, const struct col_go_ops *ops);

/*
 * One pass over the processes: attaches to new Go processes, detaches from
 * those gone. Returns RM_OK, or RM_EIO if proc_root cannot be read (logged).
 */
int col_go_scan(struct col_go *s);

void col_go_get_stats(const struct col_go *s, struct col_go_stats *out);

/* Detaches from every process and frees; NULL-tolerant. */
void col_go_free(struct col_go *s);

#endif
