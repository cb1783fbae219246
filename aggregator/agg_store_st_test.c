/*
 * agg_store_st_test.c - the accountant's storage on SQLite (agg_store_st.c)
 * on a real database file: each function reaches its storage/st.h
 * counterpart, a transaction commits or rolls back as a whole, refusals come
 * back as the accountant expects them, held parts go round.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rm_test.h"
#include "agg_store.h"
#include "st_est.h"
#include "rm_err.h"

#define W0 1700000000000000000LL
#define WLEN 1000000000LL

static st_db *db_open(const char *name, struct agg_store *s)
{
	char path[300];
	st_db *db = NULL;

	snprintf(path, sizeof(path), "%s/%s.db", rm_test_tmpdir(), name);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	agg_store_st(s, db);
	return db;
}

/* V of node n1 on cpu as the queries compute it, and c1's U_c */
static void usage_of(st_db *db, uint64_t *c1, int64_t *v)
{
	struct st_query q = { INT64_MIN, INT64_MAX, "n1", NULL, ST_R_CPU, 0 };
	struct st_row *rows = NULL;
	size_t n = 0, i;

	*c1 = 0;
	*v = 0;
	CU_ASSERT_EQUAL_FATAL(st_query_usage(db, &q, &rows, &n), RM_OK);
	for (i = 0; i < n; i++) {
		if (!strcmp(rows[i].ce, "c1"))
			*c1 = rows[i].value;
		else if (!strcmp(rows[i].ce, ST_CE_UNACCOUNTABLE))
			*v = rows[i].residual;
	}
	st_rows_free(rows);
}

static int est_collect(void *arg, const struct st_est_window *w)
{
	struct st_est_ce *got = arg;

	if (w->n == 1)
		*got = w->ce[0];
	return RM_OK;
}

static void test_writes(void)
{
	struct st_node node = { .node = "n1", .backend = "test", .window_ns = WLEN, .ncpu = 2, .seen_unix_ns = W0 };
	struct st_query all = { INT64_MIN, INT64_MAX, NULL, NULL, -1, 0 };
	struct st_row *rows = NULL;
	struct st_est_ce ce = { "", 0, 0, 0 };
	struct agg_store s;
	uint64_t c1, seq = 0;
	size_t n = 99;
	int64_t v;
	st_db *db = db_open("writes", &s);

	CU_ASSERT_EQUAL_FATAL(s.begin(s.arg), RM_OK);
	CU_ASSERT_EQUAL(s.node_seen(s.arg, &node), RM_OK);
	CU_ASSERT_EQUAL(s.peer_set(s.arg, "n1", 7, 3), RM_OK);
	CU_ASSERT_EQUAL(s.add_usage(s.arg, "n1", W0, WLEN, ST_R_CPU, "c1", 5000), RM_OK);
	CU_ASSERT_EQUAL(s.add_usage(s.arg, "n1", W0, WLEN, ST_R_CPU, "c1", 1000), RM_OK);
	CU_ASSERT_EQUAL(s.add_unacct(s.arg, "n1", W0, WLEN, ST_R_CPU, "lost", 3000), RM_OK);
	CU_ASSERT_EQUAL(s.add_total(s.arg, "n1", W0, WLEN, ST_R_CPU, 9000, 2 * WLEN), RM_OK);
	CU_ASSERT_EQUAL(s.add_split(s.arg, "n1", W0, WLEN, 2), RM_OK);
	CU_ASSERT_EQUAL(s.add_est_input(s.arg, "n1", W0, WLEN, "c1", 2, 4000, 155), RM_OK);
	CU_ASSERT_EQUAL_FATAL(s.commit(s.arg), RM_OK);

	usage_of(db, &c1, &v);
	CU_ASSERT_EQUAL(c1, 6000);
	CU_ASSERT_EQUAL(v, 3000);
	CU_ASSERT_EQUAL(st_query_identity(db, &all, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 0);
	st_rows_free(rows);
	CU_ASSERT_EQUAL(s.peer_get(s.arg, "n1", 7, &seq), RM_OK);
	CU_ASSERT_EQUAL(seq, 3);
	CU_ASSERT_EQUAL(s.peer_get(s.arg, "n1", 8, &seq), RM_OK);
	CU_ASSERT_EQUAL(seq, 0);
	CU_ASSERT_EQUAL_FATAL(st_est_windows(db, "n1", INT64_MIN, INT64_MAX, est_collect, &ce), RM_OK);
	CU_ASSERT_STRING_EQUAL(ce.ce, "c1");
	CU_ASSERT_EQUAL(ce.requests, 2);
	CU_ASSERT_EQUAL(ce.rt_ns, 4000);
	CU_ASSERT_EQUAL(ce.rx, 155);
	st_close(db);
}

static void test_rollback_and_refusal(void)
{
	struct agg_store s;
	uint64_t c1, seq = 1;
	int64_t v;
	st_db *db = db_open("rollback", &s);

	CU_ASSERT_EQUAL_FATAL(s.begin(s.arg), RM_OK);
	CU_ASSERT_EQUAL(s.add_usage(s.arg, "n1", W0, WLEN, ST_R_CPU, "c1", 5000), RM_OK);
	CU_ASSERT_EQUAL(s.peer_set(s.arg, "n1", 7, 3), RM_OK);
	/* a sum above INT64_MAX is refused with RM_EINVAL, which the accountant reports */
	CU_ASSERT_EQUAL(s.add_usage(s.arg, "n1", W0, WLEN, ST_R_CPU, "c1", (uint64_t)INT64_MAX), RM_EINVAL);
	s.rollback(s.arg);
	usage_of(db, &c1, &v);
	CU_ASSERT_EQUAL(c1, 0);
	CU_ASSERT_EQUAL(s.peer_get(s.arg, "n1", 7, &seq), RM_OK);
	CU_ASSERT_EQUAL(seq, 0);
	st_close(db);
}

struct held_seen {
	int n;
	uint64_t ids[4];
	char dist[4][16];
	uint8_t part0[4];
};

static int held_collect(void *arg, const struct st_held *h)
{
	struct held_seen *s = arg;

	if (s->n >= 4)
		return RM_EFULL;
	s->ids[s->n] = h->id;
	snprintf(s->dist[s->n], sizeof(s->dist[0]), "%s", h->dist ? h->dist : "-");
	if (h->part_len)
		s->part0[s->n] = ((const uint8_t *)h->part)[0];
	s->n++;
	return RM_OK;
}

static void test_held(void)
{
	static const uint8_t part[] = { 0x08, 0x01, 0x10, 0x02 };
	struct st_held h = { 9, "n1", 7, WLEN, W0, part, sizeof(part), NULL };
	struct held_seen seen = { 0 };
	struct agg_store s;
	st_db *db = db_open("held", &s);

	CU_ASSERT_EQUAL(s.held_put(s.arg, &h), RM_OK);
	h.id = 4;
	CU_ASSERT_EQUAL(s.held_put(s.arg, &h), RM_OK);
	CU_ASSERT_EQUAL(s.held_resolve(s.arg, 9, "c1"), RM_OK);
	CU_ASSERT_EQUAL(s.held_resolve(s.arg, 5, "c1"), RM_ENOENT);
	CU_ASSERT_EQUAL(s.held_load(s.arg, held_collect, &seen), RM_OK);
	CU_ASSERT_EQUAL_FATAL(seen.n, 2);
	CU_ASSERT_EQUAL(seen.ids[0], 4);
	CU_ASSERT_STRING_EQUAL(seen.dist[0], "-");
	CU_ASSERT_EQUAL(seen.ids[1], 9);
	CU_ASSERT_STRING_EQUAL(seen.dist[1], "c1");
	CU_ASSERT_EQUAL(seen.part0[1], 0x08);
	CU_ASSERT_EQUAL(s.held_delete(s.arg, 4), RM_OK);
	CU_ASSERT_EQUAL(s.held_delete(s.arg, 4), RM_OK);
	memset(&seen, 0, sizeof(seen));
	CU_ASSERT_EQUAL(s.held_load(s.arg, held_collect, &seen), RM_OK);
	CU_ASSERT_EQUAL(seen.n, 1);
	CU_ASSERT_EQUAL(seen.ids[0], 9);
	st_close(db);
}

static CU_TestInfo cases[] = {
	{ "a transaction's rows, sequence numbers and inputs reach SQLite", test_writes },
	{ "a rollback leaves nothing; a sum above INT64_MAX is refused", test_rollback_and_refusal },
	{ "held parts are put, resolved, loaded in id order and deleted", test_held },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_store_st", cases)
