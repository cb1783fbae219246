/*
 * agg_store_mem.h - the accountant's storage (agg_store.h) in memory: the
 * same rows, sums, refusals and transactions as the SQLite store, kept in
 * arrays, so that the stitcher and accountant run on replayed streams
 * without a database and what they wrote can be read back. Sums above
 * INT64_MAX are refused (RM_EINVAL) as storage refuses them; a rollback
 * puts back the state of the begin.
 * Not thread-safe.
 */
#ifndef AGG_STORE_MEM_H
#define AGG_STORE_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "agg_store.h"

struct agg_store_mem;

/* RM_OK and *out, or RM_ENOMEM. */
int agg_store_mem_open(struct agg_store_mem **out);
/* NULL-tolerant. */
void agg_store_mem_close(struct agg_store_mem *m);
/* The store functions on m (borrowed: m must outlive their use). */
void agg_store_mem_bind(struct agg_store_mem *m, struct agg_store *out);

/* U_c of ce, V of reason, over every window of node, resource r. */
uint64_t agg_store_mem_usage(const struct agg_store_mem *m, const char *node, const char *ce, int r);
uint64_t agg_store_mem_unacct(const struct agg_store_mem *m, const char *node, const char *reason, int r);

/* U of node, resource r, over every window. */
uint64_t agg_store_mem_total(const struct agg_store_mem *m, const char *node, int r);

/*
 * The estimator inputs of node's ce (NULL: every CE) over every window,
 * added to v[0] requests, v[1] response time (ns), v[2] inbound bytes;
 * returns how many (window, CE) rows were summed.
 */
size_t agg_store_mem_est(const struct agg_store_mem *m, const char *node, const char *ce, uint64_t v[3]);

/*
 * The (node, resource, window) with any value in which U != sum_c U_c + sum
 * of the reasons (as st_query_identity); *windows (may be NULL) = how many
 * (node, resource, window) have any value.
 */
size_t agg_store_mem_unbalanced(const struct agg_store_mem *m, uint64_t *windows);

/* Split parts of node in the window starting at start (INT64_MIN: all windows). */
uint64_t agg_store_mem_splits(const struct agg_store_mem *m, const char *node, int64_t start);

/* Held parts, and of those unresolved. */
void agg_store_mem_held_count(const struct agg_store_mem *m, uint64_t *held, uint64_t *unresolved);

/* Drops every U_c row of node (outside any transaction). */
void agg_store_mem_drop_usage(struct agg_store_mem *m, const char *node);

#endif
