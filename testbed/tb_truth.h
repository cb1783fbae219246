/*
 * tb_truth.h - the testbed server's ground truth per CE.
 *
 * For each CE the server counts requests, the serving threads' CPU time
 * spent on them (CLOCK_THREAD_CPUTIME_ID; each server says which span of a
 * thread's time it adds) and the request and reply bytes. The table is
 * written as CSV
 *
 *   ce,requests,cpu_ns,rx_bytes,tx_bytes
 *
 * one row per CE sorted by name, through a temporary file and rename(2), so a
 * reader never sees half a file. tb_truth_load() reads such a file back.
 *
 * Adding to a known CE takes no lock (atomic adds on a fixed array), so the
 * bookkeeping adds no wake-ups between the service's threads; only the
 * first add of a new CE takes the mutex.
 */
#ifndef TB_TRUTH_H
#define TB_TRUTH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "tb_proto.h"

#define TB_TRUTH_HEADER "ce,requests,cpu_ns,rx_bytes,tx_bytes"

struct tb_truth_row {
	char ce[TB_CE_MAX];
	uint64_t requests;
	uint64_t cpu_ns;
	uint64_t rx_bytes;
	uint64_t tx_bytes;
};

struct tb_truth {
	pthread_mutex_t lock;      /* taken only to add a new CE */
	struct tb_truth_row *rows; /* max_ces rows, unsorted, owned; never moved */
	size_t n;                  /* rows in use; published with release/acquire */
	size_t cap, max_ces;       /* cap == max_ces */
};

/* Initialises an empty table holding at most max_ces (> 0) CEs. RM_OK, RM_EINVAL or RM_ENOMEM. */
int tb_truth_init(struct tb_truth *t, size_t max_ces);

/* Frees the rows. NULL-tolerant. Not concurrent with any other call on t. */
void tb_truth_release(struct tb_truth *t);

/*
 * Adds the counters to ce's row, creating it (all zero) if needed; calling it
 * with zeros just reserves the row. Returns RM_OK, RM_EINVAL (bad name or
 * uninitialised t) or RM_EFULL (new CE but max_ces reached). Thread-safe,
 * lock-free for a known CE.
 */
int tb_truth_add(struct tb_truth *t, const char *ce, uint64_t requests, uint64_t cpu_ns,
		 uint64_t rx_bytes, uint64_t tx_bytes);

/*
 * Writes a snapshot of t to path (via "<path>.tmp.<pid>" and rename): each
 * counter as it was when read, exact once no add runs any more. Returns
 * RM_OK, RM_ENOMEM or RM_EIO (logged). Thread-safe; calls that write the
 * same path must not run concurrently.
 */
int tb_truth_write(struct tb_truth *t, const char *path);

/*
 * Reads a truth CSV. On RM_OK, *rows (caller frees with free(); NULL if
 * *n == 0) holds *n rows in file order. Returns RM_EIO (cannot open/read),
 * RM_EPROTO (bad header, malformed line or duplicate CE; logged with the line
 * number) or RM_ENOMEM.
 */
int tb_truth_load(const char *path, struct tb_truth_row **rows, size_t *n);

#endif
