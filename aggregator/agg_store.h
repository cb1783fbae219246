/*
 * agg_store.h - the storage the accountant writes through: one transaction
 * at a time, the rows of usage (U_c), unaccountable usage (V), node totals
 * (U), split counts and estimator inputs, the collectors' sequence numbers,
 * the stitcher's held parts and node metadata. The accountant (and the
 * stitcher through it) sees only these functions, so their logic runs and
 * is tested without a database; agg_store_st.c binds them to SQLite
 * (storage/st.h), the aggregator's real storage.
 *
 * Every function returns RM_OK or an rm_err as its st.h counterpart does
 * (RM_ESQL for a database error, RM_EINVAL for a value storage refuses,
 * RM_ENOENT for a resolve of an unknown held part). Windows are
 * [start, start + len) in ns; resources are enum st_resource.
 * Thread safety: as the backing storage; the accountant uses one thread.
 */
#ifndef AGG_STORE_H
#define AGG_STORE_H

#include <stdint.h>

#include "st.h"

struct agg_store {
	void *arg;
	/* one transaction: begin, writes, then commit or rollback */
	int (*begin)(void *arg);
	int (*commit)(void *arg);
	void (*rollback)(void *arg);
	/* the last batch sequence number applied of (node, collector run); 0 if none */
	int (*peer_get)(void *arg, const char *node, uint64_t instance, uint64_t *last_seq);
	int (*peer_set)(void *arg, const char *node, uint64_t instance, uint64_t seq);
	/* rows, added to what the window already holds */
	int (*add_usage)(void *arg, const char *node, int64_t start, int64_t len, enum st_resource r,
			 const char *ce, uint64_t value);
	int (*add_unacct)(void *arg, const char *node, int64_t start, int64_t len, enum st_resource r,
			  const char *reason, uint64_t value);
	int (*add_total)(void *arg, const char *node, int64_t start, int64_t len, enum st_resource r,
			 uint64_t value, uint64_t capacity);
	int (*add_split)(void *arg, const char *node, int64_t start, int64_t len, uint64_t parts);
	int (*add_est_input)(void *arg, const char *node, int64_t start, int64_t len, const char *ce,
			     uint64_t requests, uint64_t rt_ns, uint64_t rx_bytes);
	/* the stitcher's held parts (st.h struct st_held) */
	int (*held_put)(void *arg, const struct st_held *h);
	int (*held_resolve)(void *arg, uint64_t id, const char *dist);
	int (*held_delete)(void *arg, uint64_t id);
	int (*held_load)(void *arg, int (*cb)(void *cbarg, const struct st_held *h), void *cbarg);
	/* what a window holds: U, U_c + V, whether it has any U (st_window_sums) */
	int (*window_sums)(void *arg, const char *node, int64_t start, int64_t len, uint64_t total[ST_R_COUNT],
			   uint64_t charged[ST_R_COUNT], int *has_total);
	/* a collector's hello */
	int (*node_seen)(void *arg, const struct st_node *n);
};

/* The store writing to db (borrowed: it must outlive every use of *out). */
void agg_store_st(struct agg_store *out, st_db *db);

#endif
