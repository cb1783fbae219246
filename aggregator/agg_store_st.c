/*
 * agg_store_st.c - the accountant's storage (agg_store.h) on the
 * aggregator's SQLite database: each function is its storage/st.h
 * counterpart on the st_db the store was made with.
 */
#include "agg_store.h"
#include "st_est.h"
#include "banned.h"

static int agg_st_begin(void *arg)
{
	return st_begin(arg);
}

static int agg_st_commit(void *arg)
{
	return st_commit(arg);
}

static void agg_st_rollback(void *arg)
{
	st_rollback(arg);
}

static int agg_st_peer_get(void *arg, const char *node, uint64_t instance, uint64_t *last_seq)
{
	return st_peer_get(arg, node, instance, last_seq);
}

static int agg_st_peer_set(void *arg, const char *node, uint64_t instance, uint64_t seq)
{
	return st_peer_set(arg, node, instance, seq);
}

static int agg_st_add_usage(void *arg, const char *node, int64_t start, int64_t len, enum st_resource r,
			    const char *ce, uint64_t value)
{
	return st_add_usage(arg, node, start, len, r, ce, value);
}

static int agg_st_add_unacct(void *arg, const char *node, int64_t start, int64_t len, enum st_resource r,
			     const char *reason, uint64_t value)
{
	return st_add_unacct(arg, node, start, len, r, reason, value);
}

static int agg_st_add_total(void *arg, const char *node, int64_t start, int64_t len, enum st_resource r,
			    uint64_t value, uint64_t capacity)
{
	return st_add_total(arg, node, start, len, r, value, capacity);
}

static int agg_st_add_split(void *arg, const char *node, int64_t start, int64_t len, uint64_t parts)
{
	return st_add_split(arg, node, start, len, parts);
}

static int agg_st_add_est_input(void *arg, const char *node, int64_t start, int64_t len, const char *ce,
				uint64_t requests, uint64_t rt_ns, uint64_t rx_bytes)
{
	return st_add_est_input(arg, node, start, len, ce, requests, rt_ns, rx_bytes);
}

static int agg_st_held_put(void *arg, const struct st_held *h)
{
	return st_held_put(arg, h);
}

static int agg_st_held_resolve(void *arg, uint64_t id, const char *dist)
{
	return st_held_resolve(arg, id, dist);
}

static int agg_st_held_delete(void *arg, uint64_t id)
{
	return st_held_delete(arg, id);
}

static int agg_st_held_load(void *arg, int (*cb)(void *cbarg, const struct st_held *h), void *cbarg)
{
	return st_held_load(arg, cb, cbarg);
}

static int agg_st_window_sums(void *arg, const char *node, int64_t start, int64_t len,
			      uint64_t total[ST_R_COUNT], uint64_t charged[ST_R_COUNT], int *has_total)
{
	return st_window_sums(arg, node, start, len, total, charged, has_total);
}

static int agg_st_node_seen(void *arg, const struct st_node *n)
{
	return st_node_seen(arg, n);
}

void agg_store_st(struct agg_store *out, st_db *db)
{
	out->arg = db;
	out->begin = agg_st_begin;
	out->commit = agg_st_commit;
	out->rollback = agg_st_rollback;
	out->peer_get = agg_st_peer_get;
	out->peer_set = agg_st_peer_set;
	out->add_usage = agg_st_add_usage;
	out->add_unacct = agg_st_add_unacct;
	out->add_total = agg_st_add_total;
	out->add_split = agg_st_add_split;
	out->add_est_input = agg_st_add_est_input;
	out->held_put = agg_st_held_put;
	out->held_resolve = agg_st_held_resolve;
	out->held_delete = agg_st_held_delete;
	out->held_load = agg_st_held_load;
	out->window_sums = agg_st_window_sums;
	out->node_seen = agg_st_node_seen;
}
