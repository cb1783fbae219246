/*
 * st_rollup_test.c - tests of the 1 min / 1 h / 1 day series on real SQLite
 * files: two databases get the same writes, one answers from its series
 * (and is thinned by retention), the other from its 1 s rows only, and
 * every query -- aligned and unaligned ranges, per range and per period --
 * must answer the same from both; the migrations of a v5 and of a
 * partly rolled-up v6 file; late writes; retention in bounded steps; the
 * choice of series (st_cover).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "rm_err.h"
#include "rm_test.h"
#include "st.h"
#include "st_int.h"
#include "st_rollup.h"
#include "banned.h"

#define SEC 1000000000LL
#define MIN (60 * SEC)
#define HOUR (3600 * SEC)
#define DAY (86400 * SEC)
#define W (20 * SEC)
#define T0 (1700006400LL * SEC) /* a UTC midnight */

static st_db *open_fresh(const char *name)
{
	char path[512];
	st_db *db = NULL;

	snprintf(path, sizeof(path), "%s/%s.db", rm_test_tmpdir(), name);
	unlink(path);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	return db;
}

static const char *const servers[] = { "s1", "s2" };
static const char *const ces[] = { "web", "db", "batch" };

/* Writes the same deterministic window of usage to every db in dbs:
 * U_c for most CEs, a reason, and a total that balances them. */
static void write_window(st_db **dbs, int ndb, int64_t start, unsigned seed)
{
	int d, s, r, c;

	for (d = 0; d < ndb; d++) {
		unsigned x = seed;

		for (s = 0; s < 2; s++)
			for (r = 0; r < ST_R_COUNT; r++) {
				uint64_t sum = 0;

				for (c = 0; c < 3; c++) {
					x = x * 1103515245u + 12345u;
					if ((x >> 16) % 5 == 0)
						continue; /* not every CE in every window */
					CU_ASSERT_EQUAL(st_add_usage(dbs[d], servers[s], start, W, r, ces[c],
								     (x >> 8) % 100000), RM_OK);
					sum += (x >> 8) % 100000;
				}
				CU_ASSERT_EQUAL(st_add_unacct(dbs[d], servers[s], start, W, r, "lost", 7), RM_OK);
				CU_ASSERT_EQUAL(st_add_total(dbs[d], servers[s], start, W, r, sum + 7, 4 * W),
						RM_OK);
			}
		CU_ASSERT_EQUAL(st_add_split(dbs[d], servers[0], start, W, 1), RM_OK);
	}
}

static void fill(st_db **dbs, int ndb, int64_t from, int64_t to)
{
	int64_t t;
	int d;

	for (d = 0; d < ndb; d++)
		CU_ASSERT_EQUAL_FATAL(st_begin(dbs[d]), RM_OK);
	for (t = from; t < to; t += W)
		write_window(dbs, ndb, t, (unsigned)(t / W));
	for (d = 0; d < ndb; d++)
		CU_ASSERT_EQUAL_FATAL(st_commit(dbs[d]), RM_OK);
}

/* Makes db answer from its 1 s rows only: its rolled-up series are emptied
 * and marked as wholly deleted by retention, so st_cover never uses them. */
static void windows_only(st_db *db)
{
	CU_ASSERT_EQUAL_FATAL(sqlite3_exec(db->h,
					   "DELETE FROM r_usage; DELETE FROM r_unacct; DELETE FROM r_total; "
					   "DELETE FROM r_split; DELETE FROM r_ce_usage; DELETE FROM r_ce_total; "
					   "INSERT OR REPLACE INTO series VALUES "
					   "(1, 9223372036854775807, 9223372036854775807), "
					   "(2, 9223372036854775807, 9223372036854775807), "
					   "(3, 9223372036854775807, 9223372036854775807), "
					   "(4, 9223372036854775807, 9223372036854775807)",
					   NULL, NULL, NULL), SQLITE_OK);
}

static void roll_all(st_db *db, const struct st_retention *r)
{
	int more = 1, guard = 0;

	while (more && guard++ < 1000)
		CU_ASSERT_EQUAL_FATAL(st_rollup(db, r, &more), RM_OK);
	CU_ASSERT_EQUAL(more, 0);
}

static int rows_equal(const struct st_row *a, size_t na, const struct st_row *b, size_t nb)
{
	size_t i;

	if (na != nb)
		return 0;
	for (i = 0; i < na; i++)
		if (strcmp(a[i].server, b[i].server) || strcmp(a[i].ce, b[i].ce) ||
		    strcmp(a[i].reason, b[i].reason) || a[i].resource != b[i].resource ||
		    a[i].value != b[i].value || a[i].total != b[i].total ||
		    a[i].capacity != b[i].capacity || a[i].residual != b[i].residual ||
		    a[i].win_start_ns != b[i].win_start_ns || a[i].win_len_ns != b[i].win_len_ns)
			return 0;
	return 1;
}

/* Both databases answer q (range, and per period when step > 0) alike. */
static void same_answers(st_db *a, st_db *b, struct st_query q, int64_t step)
{
	struct st_row *ra, *rb;
	size_t na, nb;

	CU_ASSERT_EQUAL_FATAL(st_query_usage(a, &q, &ra, &na), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_query_usage(b, &q, &rb, &nb), RM_OK);
	CU_ASSERT(na > 0);
	if (!rows_equal(ra, na, rb, nb))
		fprintf(stderr, "usage differs for [%lld, %lld) (%zu vs %zu rows)\n",
			(long long)(q.since_ns - T0), (long long)(q.until_ns - T0), na, nb);
	CU_ASSERT(rows_equal(ra, na, rb, nb));
	st_rows_free(ra);
	st_rows_free(rb);
	CU_ASSERT_EQUAL_FATAL(st_query_unacct(a, &q, &ra, &na), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_query_unacct(b, &q, &rb, &nb), RM_OK);
	CU_ASSERT(rows_equal(ra, na, rb, nb));
	st_rows_free(ra);
	st_rows_free(rb);
	CU_ASSERT_EQUAL_FATAL(st_query_splits(a, &q, &ra, &na), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_query_splits(b, &q, &rb, &nb), RM_OK);
	CU_ASSERT(rows_equal(ra, na, rb, nb));
	st_rows_free(ra);
	st_rows_free(rb);
	if (step > 0) {
		CU_ASSERT_EQUAL_FATAL(st_query_usage_step(a, &q, step, &ra, &na), RM_OK);
		CU_ASSERT_EQUAL_FATAL(st_query_usage_step(b, &q, step, &rb, &nb), RM_OK);
		CU_ASSERT(na > 0);
		CU_ASSERT(rows_equal(ra, na, rb, nb));
		st_rows_free(ra);
		st_rows_free(rb);
		CU_ASSERT_EQUAL_FATAL(st_query_unacct_step(a, &q, step, &ra, &na), RM_OK);
		CU_ASSERT_EQUAL_FATAL(st_query_unacct_step(b, &q, step, &rb, &nb), RM_OK);
		CU_ASSERT(rows_equal(ra, na, rb, nb));
		st_rows_free(ra);
		st_rows_free(rb);
	}
}

/* st_query_usage_all equals the per-server rows of st_query_usage(_step)
 * summed per (resource, period, CE); V's residual is the sum of the
 * servers' residuals, its value that sum if positive. */
static void same_as_summed(st_db *db, struct st_query q, int64_t step)
{
	struct st_row *ra, *rs;
	size_t na, ns, i, j;
	int64_t sum, tot, cap, resid;
	int found, bad = 0;

	CU_ASSERT_EQUAL_FATAL(st_query_usage_all(db, &q, step, &ra, &na), RM_OK);
	CU_ASSERT_EQUAL_FATAL(step ? st_query_usage_step(db, &q, step, &rs, &ns)
				   : st_query_usage(db, &q, &rs, &ns), RM_OK);
	CU_ASSERT(na > 0);
	for (i = 0; i < na; i++) {
		CU_ASSERT_STRING_EQUAL(ra[i].server, "");
		sum = tot = cap = resid = 0;
		found = 0;
		for (j = 0; j < ns; j++) {
			if (rs[j].resource != ra[i].resource || rs[j].win_start_ns != ra[i].win_start_ns)
				continue;
			if (!strcmp(rs[j].ce, ST_CE_UNACCOUNTABLE)) { /* one per server */
				tot += (int64_t)rs[j].total;
				cap += (int64_t)rs[j].capacity;
			}
			if (strcmp(rs[j].ce, ra[i].ce))
				continue;
			found++;
			sum += (int64_t)rs[j].value;
			resid += rs[j].residual;
		}
		if (!strcmp(ra[i].ce, ST_CE_UNACCOUNTABLE))
			sum = resid > 0 ? resid : 0;
		bad += !found || sum != (int64_t)ra[i].value || tot != (int64_t)ra[i].total ||
		       cap != (int64_t)ra[i].capacity || resid != ra[i].residual;
	}
	/* and nothing left out: as many (resource, period, CE) as the servers have */
	for (j = 0; j < ns; j++) {
		found = 0;
		for (i = 0; i < na && !found; i++)
			found = rs[j].resource == ra[i].resource && rs[j].win_start_ns == ra[i].win_start_ns &&
				!strcmp(rs[j].ce, ra[i].ce);
		bad += !found;
	}
	CU_ASSERT_EQUAL(bad, 0);
	st_rows_free(ra);
	st_rows_free(rs);
}

/* Both databases answer st_query_usage_all alike. */
static void same_all(st_db *a, st_db *b, struct st_query q, int64_t step)
{
	struct st_row *ra, *rb;
	size_t na, nb;

	CU_ASSERT_EQUAL_FATAL(st_query_usage_all(a, &q, step, &ra, &na), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_query_usage_all(b, &q, step, &rb, &nb), RM_OK);
	CU_ASSERT(na > 0);
	CU_ASSERT(rows_equal(ra, na, rb, nb));
	st_rows_free(ra);
	st_rows_free(rb);
}

static struct st_query range(int64_t since, int64_t until)
{
	struct st_query q = { since, until, NULL, NULL, -1, 0 };

	return q;
}

static void test_rolled_answers_equal_windows(void)
{
	st_db *dbs[2] = { open_fresh("rolled"), open_fresh("plain") };
	struct st_row *rows;
	int64_t rolled, kept;
	size_t n;
	int i;

	/* 26 hours of 20 s windows, from 10 min before a midnight; no
	 * horizon and no st_rollup call: the series are filled by the writes */
	fill(dbs, 2, T0 - 10 * MIN, T0 + DAY + 2 * HOUR - 10 * MIN);
	windows_only(dbs[1]);
	CU_ASSERT_EQUAL(st_rollup(dbs[0], NULL, NULL), RM_OK); /* no horizon: nothing */
	CU_ASSERT_EQUAL(st_series_state(dbs[0], ST_SERIES_1M, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(rolled, INT64_MAX);
	CU_ASSERT_EQUAL(kept, INT64_MIN);
	/* aligned: whole days, hours and minutes, read from those series */
	same_answers(dbs[0], dbs[1], range(T0, T0 + DAY), DAY);
	same_answers(dbs[0], dbs[1], range(T0 - HOUR, T0 + DAY + 2 * HOUR), HOUR);
	same_answers(dbs[0], dbs[1], range(T0 + DAY, T0 + DAY + 2 * HOUR), MIN);
	/* the current (last, partial) day, hour and minute */
	same_answers(dbs[0], dbs[1], range(T0 + DAY, T0 + 2 * DAY), DAY);
	same_answers(dbs[0], dbs[1], range(T0 + DAY + HOUR, T0 + DAY + 2 * HOUR), HOUR);
	/* everything, and unaligned ranges (edges from finer series) */
	same_answers(dbs[0], dbs[1], range(INT64_MIN, INT64_MAX), DAY);
	same_answers(dbs[0], dbs[1], range(T0, T0 + DAY), HOUR);
	same_answers(dbs[0], dbs[1], range(T0 - 7 * SEC, T0 + DAY + 13 * MIN + 3 * SEC), 5 * MIN);
	same_answers(dbs[0], dbs[1], range(T0 + 3 * HOUR + 10 * SEC, T0 + 5 * HOUR + 50 * SEC), MIN);
	for (i = 0; i < 20; i++) {
		int64_t a = T0 - 10 * MIN + (int64_t)(rand() % 90000) * SEC;
		int64_t b = a + (int64_t)(rand() % 90000) * SEC;

		same_answers(dbs[0], dbs[1], range(a, b), 0);
	}
	/* summed over servers (whole days from the day series summed over
	 * servers) as from the windows, and as by grouping the servers' rows */
	same_all(dbs[0], dbs[1], range(T0 - DAY, T0 + 2 * DAY), DAY);
	same_all(dbs[0], dbs[1], range(T0 - 7 * SEC, T0 + DAY + 13 * MIN + 3 * SEC), 0);
	same_all(dbs[0], dbs[1], range(T0 - 7 * SEC, T0 + DAY + 13 * MIN + 3 * SEC), HOUR);
	{
		struct st_query qr = range(T0, T0 + 2 * DAY);

		qr.resource = ST_R_NET_TX;
		same_all(dbs[0], dbs[1], qr, DAY);
		qr.server = "s2";
		same_all(dbs[0], dbs[1], qr, DAY);
	}
	same_as_summed(dbs[0], range(T0 - 7 * SEC, T0 + DAY + 13 * MIN + 3 * SEC), HOUR);
	same_as_summed(dbs[0], range(T0, T0 + 2 * DAY), DAY);
	same_as_summed(dbs[0], range(T0 + 3 * HOUR + 10 * SEC, T0 + 5 * HOUR + 50 * SEC), 0);
	/* the buckets balance: no unbalanced row anywhere */
	{
		struct st_query q = range(INT64_MIN, INT64_MAX);

		CU_ASSERT_EQUAL(st_query_identity(dbs[0], &q, &rows, &n), RM_OK);
		CU_ASSERT_EQUAL(n, 0);
		st_rows_free(rows);
	}
	st_close(dbs[0]);
	st_close(dbs[1]);
}

static void test_retention_and_late_writes(void)
{
	st_db *dbs[2] = { open_fresh("kept"), open_fresh("all") };
	struct st_retention r = { { 2 * HOUR, 6 * HOUR, 2 * DAY, 0 } };
	struct st_query q;
	struct st_row *rows;
	int64_t rolled, kept;
	size_t n;

	fill(dbs, 2, T0, T0 + 12 * HOUR);
	windows_only(dbs[1]);
	CU_ASSERT_EQUAL(st_horizon_set(dbs[0], T0 + 12 * HOUR), RM_OK);
	roll_all(dbs[0], &r);
	/* 1 s rows older than 2 h before the horizon are gone, rolled up */
	CU_ASSERT_EQUAL(st_series_state(dbs[0], ST_SERIES_1S, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(kept, T0 + 10 * HOUR);
	CU_ASSERT_EQUAL(st_series_state(dbs[0], ST_SERIES_1M, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(kept, T0 + 6 * HOUR); /* the hours hold what is older */
	q = range(INT64_MIN, T0 + 10 * HOUR);
	q.per_window = 1;
	CU_ASSERT_EQUAL(st_query_usage(dbs[0], &q, &rows, &n), RM_OK);
	CU_ASSERT(n > 0);
	/* per window: the finest series left (hours, then minutes) */
	CU_ASSERT_EQUAL(rows[0].win_start_ns, T0);
	CU_ASSERT_EQUAL(rows[0].win_len_ns, HOUR);
	CU_ASSERT_EQUAL(rows[n - 1].win_len_ns, MIN);
	st_rows_free(rows);
	same_answers(dbs[0], dbs[1], range(T0, T0 + 12 * HOUR), HOUR);
	same_answers(dbs[0], dbs[1], range(T0 + HOUR, T0 + 11 * HOUR + 20 * SEC), HOUR);

	/* a late write into a window rolled up and deleted still counts */
	CU_ASSERT_EQUAL(st_add_usage(dbs[0], "s1", T0 + 3 * HOUR, W, ST_R_CPU, "web", 5000), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(dbs[1], "s1", T0 + 3 * HOUR, W, ST_R_CPU, "web", 5000), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(dbs[0], "s1", T0 + 3 * HOUR, W, ST_R_CPU, 5000, 0), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(dbs[1], "s1", T0 + 3 * HOUR, W, ST_R_CPU, 5000, 0), RM_OK);
	same_answers(dbs[0], dbs[1], range(T0, T0 + 12 * HOUR), 2 * HOUR);

	/* a day later: the 1 s and 1 min rows of the first day go, the day
	 * and hours stay; the whole day still answers the same */
	fill(dbs, 2, T0 + 12 * HOUR, T0 + DAY + HOUR);
	windows_only(dbs[1]);
	CU_ASSERT_EQUAL(st_horizon_set(dbs[0], T0 + DAY + HOUR), RM_OK);
	roll_all(dbs[0], &r);
	CU_ASSERT_EQUAL(st_series_state(dbs[0], ST_SERIES_1M, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(kept, T0 + DAY - 5 * HOUR);
	same_answers(dbs[0], dbs[1], range(T0, T0 + DAY), DAY);
	same_answers(dbs[0], dbs[1], range(T0 + HOUR, T0 + DAY + HOUR), HOUR);
	st_close(dbs[0]);
	st_close(dbs[1]);
}

static void test_retention_in_steps(void)
{
	st_db *db = open_fresh("slow");
	struct st_retention r = { { HOUR, HOUR, HOUR, 0 } };
	int64_t rolled, kept;
	int more = 0;

	fill(&db, 1, T0, T0 + 8 * HOUR);
	CU_ASSERT_EQUAL(st_horizon_set(db, T0 + 8 * HOUR), RM_OK);
	/* one call deletes at most ST_ROLLUP_MAX_SPAN_NS of 1 s rows */
	CU_ASSERT_EQUAL(st_rollup(db, &r, &more), RM_OK);
	CU_ASSERT_EQUAL(more, 1);
	CU_ASSERT_EQUAL(st_series_state(db, ST_SERIES_1S, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(kept, T0 + ST_ROLLUP_MAX_SPAN_NS);
	CU_ASSERT_EQUAL(rolled, INT64_MAX);
	roll_all(db, &r);
	CU_ASSERT_EQUAL(st_series_state(db, ST_SERIES_1S, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(kept, T0 + 7 * HOUR);
	/* the hours are cut at a day: nothing of them is due yet */
	CU_ASSERT_EQUAL(st_series_state(db, ST_SERIES_1H, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(kept, INT64_MIN);
	st_close(db);
}

/* The stored span: the first kept window (or, once retention deleted it,
 * the first bucket of the finest series still whole) to the end of the last. */
static void test_stored_span(void)
{
	st_db *db = open_fresh("span");
	struct st_retention r1 = { { HOUR, 0, 0, 0 } }, r2 = { { HOUR, HOUR, 0, 0 } };
	int64_t first = 0, end = 0;

	CU_ASSERT_EQUAL(st_stored_span(db, &first, &end), RM_ENOENT);
	CU_ASSERT_EQUAL(st_stored_span(db, NULL, &end), RM_EINVAL);
	CU_ASSERT_EQUAL(st_add_usage(db, "s1", T0 + 90 * SEC, W, ST_R_CPU, "web", 5), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, "s1", T0 + 2 * HOUR + 30 * SEC, W, ST_R_CPU, 9, 0), RM_OK);
	CU_ASSERT_EQUAL(st_stored_span(db, &first, &end), RM_OK);
	CU_ASSERT_EQUAL(first, T0 + 90 * SEC);
	CU_ASSERT_EQUAL(end, T0 + 2 * HOUR + 30 * SEC + W);
	/* the 1 s window at T0 + 90 s deleted: its minute is the first */
	CU_ASSERT_EQUAL(st_horizon_set(db, T0 + 3 * HOUR), RM_OK);
	roll_all(db, &r1);
	CU_ASSERT_EQUAL(st_stored_span(db, &first, &end), RM_OK);
	CU_ASSERT_EQUAL(first, T0 + MIN);
	CU_ASSERT_EQUAL(end, T0 + 2 * HOUR + 30 * SEC + W);
	/* and the minute too: its hour */
	roll_all(db, &r2);
	CU_ASSERT_EQUAL(st_stored_span(db, &first, &end), RM_OK);
	CU_ASSERT_EQUAL(first, T0);
	CU_ASSERT_EQUAL(end, T0 + 2 * HOUR + 30 * SEC + W);
	st_close(db);
}

/* Runs the SQL text fmt, ... on h. */
__attribute__((format(printf, 2, 3))) static void exec_fmt(sqlite3 *h, const char *fmt, ...)
{
	char sql[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	CU_ASSERT_EQUAL(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
}

/* A fresh file "v<version>.db" at that schema version, open in SQLite
 * alone; its path in path. */
static sqlite3 *open_old(char *path, size_t len, int version)
{
	sqlite3 *h = NULL;
	int before;

	snprintf(path, len, "%s/v%d.db", rm_test_tmpdir(), version);
	unlink(path);
	CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &h), SQLITE_OK);
	CU_ASSERT_EQUAL_FATAL(st_schema_migrate(h, path, version, 0, &before), RM_OK);
	return h;
}

/* The one integer sql answers on db's connection. */
static long long raw_count(st_db *db, const char *sql)
{
	sqlite3_stmt *s;
	long long v = -1;

	CU_ASSERT_EQUAL_FATAL(sqlite3_prepare_v2(db->h, sql, -1, &s, NULL), SQLITE_OK);
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

/* st_query_days' groups as st_query_usage_step rows (one per CE, then the
 * V row), collected by days_cb. */
struct days_rows {
	struct st_row *v;
	size_t n, cap;
};

static int days_cb(void *arg, const struct st_day *d)
{
	struct days_rows *o = arg;
	size_t i;

	for (i = 0; i <= d->n; i++) {
		struct st_row *r;

		if (o->n == o->cap) {
			o->cap = o->cap ? o->cap * 2 : 256;
			o->v = realloc(o->v, o->cap * sizeof(*o->v));
			CU_ASSERT_PTR_NOT_NULL_FATAL(o->v);
		}
		r = memset(&o->v[o->n++], 0, sizeof(*r));
		snprintf(r->server, sizeof(r->server), "%s", d->server);
		r->resource = d->resource;
		r->win_start_ns = d->start_ns;
		r->win_len_ns = DAY;
		r->total = d->total;
		r->capacity = d->capacity;
		if (i < d->n) {
			snprintf(r->ce, sizeof(r->ce), "%s", d->ce[i]);
			r->value = d->value[i];
			CU_ASSERT(i == 0 || strcmp(d->ce[i - 1], d->ce[i]) < 0);
		} else {
			/* V = U - sum_c U_c: the identity on the packed row */
			snprintf(r->ce, sizeof(r->ce), "%s", ST_CE_UNACCOUNTABLE);
			r->residual = (int64_t)(d->total - d->charged);
			r->value = r->residual > 0 ? (uint64_t)r->residual : 0;
		}
	}
	return 0;
}

/* st_query_usage_step's order: server, resource, period, value down, V last */
static int step_order(const void *pa, const void *pb)
{
	const struct st_row *a = pa, *b = pb;
	int c, va = !strcmp(a->ce, ST_CE_UNACCOUNTABLE), vb = !strcmp(b->ce, ST_CE_UNACCOUNTABLE);

	if ((c = strcmp(a->server, b->server)) != 0)
		return c;
	if (a->resource != b->resource)
		return a->resource < b->resource ? -1 : 1;
	if (a->win_start_ns != b->win_start_ns)
		return a->win_start_ns < b->win_start_ns ? -1 : 1;
	if (va != vb)
		return va - vb;
	if (a->value != b->value)
		return a->value > b->value ? -1 : 1;
	return strcmp(a->ce, b->ce);
}

/* st_query_days answers q as st_query_usage_step(q, 1 day) does; returns
 * the number of groups' rows compared. */
static size_t days_equal_step(st_db *db, struct st_query q)
{
	struct days_rows d = { 0 };
	struct st_row *rows;
	size_t n, got;

	CU_ASSERT_EQUAL_FATAL(st_query_days(db, &q, days_cb, &d), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_query_usage_step(db, &q, DAY, &rows, &n), RM_OK);
	if (d.n)
		qsort(d.v, d.n, sizeof(d.v[0]), step_order);
	CU_ASSERT(rows_equal(d.v, d.n, rows, n));
	got = d.n;
	free(d.v);
	st_rows_free(rows);
	return got;
}

/* The packed day series: settled days packed one a call, answering as the
 * day rows do (U_c, and V = U - sum U_c on the packed row), late writes
 * into a packed day reach it, a day not packed is read from the day rows,
 * and retention of the day series never passes the first day not packed. */
static void test_packed_days(void)
{
	st_db *db = open_fresh("packed");
	struct st_retention keep = { { 0, 0, 0, 0 } }, day1 = { { 0, 0, 0, DAY } };
	struct st_query q = range(T0 - 2 * DAY, T0 + 4 * DAY);
	int64_t t, until, kept, rolled;
	int found, more = 0;

	CU_ASSERT_EQUAL_FATAL(st_begin(db), RM_OK);
	for (t = T0 - DAY + 7 * MIN; t < T0 + 3 * DAY + 5 * HOUR; t += 3 * HOUR + 11 * MIN + W)
		write_window(&db, 1, t, (unsigned)(t / W));
	CU_ASSERT_EQUAL_FATAL(st_commit(db), RM_OK);
	/* nothing packed yet: every day from the day rows */
	CU_ASSERT(days_equal_step(db, q) > 0);
	CU_ASSERT_EQUAL(st_horizon_set(db, T0 + 2 * DAY + HOUR), RM_OK);
	CU_ASSERT_EQUAL(st_rollup(db, &keep, &more), RM_OK);
	CU_ASSERT_EQUAL(more, 1); /* one day a call */
	CU_ASSERT_EQUAL(st_pack_until(db, &until, &found), RM_OK);
	CU_ASSERT(found && until == T0);
	roll_all(db, &keep);
	CU_ASSERT_EQUAL(st_pack_until(db, &until, &found), RM_OK);
	CU_ASSERT(found && until == T0 + 2 * DAY);
	/* 3 days x 2 servers x 5 resources packed, the same as packing now */
	CU_ASSERT_EQUAL(raw_count(db, "SELECT count(*) FROM r_pack"), 30);
	CU_ASSERT_EQUAL(raw_count(db, "WITH k (win_start, server, resource, total, capacity, ces, reasons) AS ("
				      ST_PACK_SELECT("-1e19", "1e19") ") SELECT count(*) FROM r_pack p JOIN k "
				      "USING (win_start, server, resource) WHERE p.total = k.total AND "
				      "p.capacity = k.capacity AND p.ces IS k.ces AND p.reasons IS k.reasons"), 30);
	CU_ASSERT(days_equal_step(db, q) > 0);
	CU_ASSERT(days_equal_step(db, range(T0, T0 + DAY)) > 0);
	q.server = servers[1];
	q.resource = ST_R_NET_TX;
	CU_ASSERT(days_equal_step(db, q) > 0);
	q.server = NULL;
	q.resource = -1;

	/* late writes into a packed day: a known CE, a new one, V and U */
	CU_ASSERT_EQUAL(st_add_usage(db, servers[0], T0 + 5 * MIN, W, ST_R_CPU, ces[0], 1000), RM_OK);
	CU_ASSERT_EQUAL(st_add_usage(db, servers[0], T0 + 5 * MIN, W, ST_R_CPU, "late-ce", 77), RM_OK);
	CU_ASSERT_EQUAL(st_add_unacct(db, servers[0], T0 + 5 * MIN, W, ST_R_CPU, "late", 5), RM_OK);
	CU_ASSERT_EQUAL(st_add_total(db, servers[0], T0 + 5 * MIN, W, ST_R_CPU, 1082, 4 * W), RM_OK);
	/* ... and groups the day did not have: a CE's usage; a reason alone
	 * (no group, as in st_query_usage_step), packed or not */
	CU_ASSERT_EQUAL(st_add_usage(db, "s-late", T0 + 5 * MIN, W, ST_R_CPU, ces[1], 3), RM_OK);
	CU_ASSERT_EQUAL(st_add_unacct(db, "s-reason", T0 + 5 * MIN, W, ST_R_CPU, "lost", 3), RM_OK);
	CU_ASSERT_EQUAL(st_add_unacct(db, "s-reason", T0 + 3 * DAY, W, ST_R_CPU, "lost", 3), RM_OK);
	CU_ASSERT(days_equal_step(db, q) > 0);
	CU_ASSERT_EQUAL(raw_count(db, "SELECT count(*) FROM r_pack"), 32);
	/* a bad query */
	q.since_ns += 1;
	{
		struct days_rows d = { 0 };

		CU_ASSERT_EQUAL(st_query_days(db, &q, days_cb, &d), RM_EINVAL);
		CU_ASSERT_EQUAL(d.n, 0);
	}
	q.since_ns -= 1;

	/* retention keeping one day, the horizon far ahead: each call packs
	 * one more day and the day series is never cut past it */
	CU_ASSERT_EQUAL(st_horizon_set(db, T0 + 10 * DAY), RM_OK);
	CU_ASSERT_EQUAL(st_rollup(db, &day1, &more), RM_OK);
	CU_ASSERT_EQUAL(st_pack_until(db, &until, &found), RM_OK);
	CU_ASSERT_EQUAL(until, T0 + 3 * DAY);
	CU_ASSERT_EQUAL(st_series_state(db, ST_SERIES_1D, &rolled, &kept), RM_OK);
	CU_ASSERT(kept <= until);
	CU_ASSERT(raw_count(db, "SELECT count(*) FROM r_usage WHERE step = " ST_PACK_DAY " AND win_start >= " 
			  "(SELECT packed_until FROM pack_state)") > 0);
	roll_all(db, &day1);
	CU_ASSERT_EQUAL(st_pack_until(db, &until, &found), RM_OK);
	CU_ASSERT_EQUAL(until, T0 + 10 * DAY);
	CU_ASSERT_EQUAL(st_series_state(db, ST_SERIES_1D, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(kept, T0 + 9 * DAY);
	CU_ASSERT_EQUAL(raw_count(db, "SELECT count(*) FROM r_pack"), 0);
	CU_ASSERT_EQUAL(raw_count(db, "SELECT count(*) FROM r_usage WHERE step = " ST_PACK_DAY), 0);
	st_close(db);
}

/* A v8 file: its settled days are packed from its day rows at once. */
static void test_migrate_from_v8(void)
{
	st_db *db = open_fresh("v8");
	char path[600];
	int64_t t, until;
	int found;

	CU_ASSERT_EQUAL_FATAL(st_begin(db), RM_OK);
	for (t = T0 - DAY + 7 * MIN; t < T0 + 2 * DAY + 5 * HOUR; t += 2 * HOUR + 13 * MIN + W)
		write_window(&db, 1, t, (unsigned)(t / W));
	CU_ASSERT_EQUAL_FATAL(st_commit(db), RM_OK);
	CU_ASSERT_EQUAL(st_horizon_set(db, T0 + DAY + HOUR), RM_OK);
	CU_ASSERT_EQUAL_FATAL(sqlite3_exec(db->h, "DROP TABLE r_pack; DROP TABLE pack_state; "
					   "UPDATE schema_version SET version = 8", NULL, NULL, NULL), SQLITE_OK);
	snprintf(path, sizeof(path), "%s", db->path);
	st_close(db);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_schema_version(db), ST_SCHEMA_VERSION);
	CU_ASSERT_EQUAL(st_pack_until(db, &until, &found), RM_OK);
	CU_ASSERT(found && until == T0 + DAY);
	/* T0 - DAY and T0: 2 days x 2 servers x 5 resources */
	CU_ASSERT_EQUAL(raw_count(db, "SELECT count(*) FROM r_pack"), 20);
	CU_ASSERT(days_equal_step(db, range(T0 - DAY, T0 + 3 * DAY)) > 0);
	st_close(db);
}

static void test_migrate_from_v5(void)
{
	char path[512];
	sqlite3 *h;
	st_db *db = NULL;
	struct st_query q = range(INT64_MIN, INT64_MAX);
	struct st_row *rows;
	int64_t rolled, kept;
	size_t n;

	h = open_old(path, sizeof(path), 5);
	CU_ASSERT_EQUAL(sqlite3_exec(h,
				     "INSERT INTO usage VALUES ('s1', 0, 1700006400000000000, 10000000000, 'web', 40);"
				     "INSERT INTO total VALUES ('s1', 0, 1700006400000000000, 10000000000, 50, 0);",
				     NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_schema_version(db), ST_SCHEMA_VERSION);
	CU_ASSERT_EQUAL(st_series_state(db, ST_SERIES_1M, &rolled, &kept), RM_OK);
	CU_ASSERT_EQUAL(rolled, INT64_MAX);
	/* the migration put the window in its buckets: no rollup needed */
	CU_ASSERT_EQUAL(st_query_usage_step(db, &q, MIN, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(rows[0].ce, "web");
	CU_ASSERT_EQUAL(rows[0].value, 40);
	CU_ASSERT_EQUAL(rows[0].win_start_ns, T0);
	CU_ASSERT_EQUAL(rows[0].win_len_ns, MIN);
	CU_ASSERT_EQUAL(rows[1].residual, 10);
	st_rows_free(rows);
	st_close(db);
}

/* A v6 file whose 1 min series was rolled up to T0 + 2 min and its 1 h
 * series not at all (and a late write already in its minute): after the
 * migration every series holds every window exactly once. */
static void test_migrate_from_v6(void)
{
	char path[512];
	sqlite3 *h;
	st_db *db = NULL, *ref;
	struct st_row *rows;
	struct st_query q = range(T0, T0 + DAY);
	int64_t t;
	size_t n;

	h = open_old(path, sizeof(path), 6);
	for (t = 0; t < 4; t++) {
		/* a window of 30 s at T0 + t min, 10 + t for web, total 20 + t;
		 * the first two minutes rolled up as v6 did */
		long long ws = (long long)(T0 + t * MIN);

		exec_fmt(h, "INSERT INTO usage VALUES ('s1', 0, %lld, 30000000000, 'web', %lld);"
			    "INSERT INTO total VALUES ('s1', 0, %lld, 30000000000, %lld, 0);",
			 ws, (long long)(10 + t), ws, (long long)(20 + t));
		if (t < 2)
			exec_fmt(h, "INSERT INTO r_usage VALUES (60000000000, %lld, 's1', 0, 'web', %lld);"
				    "INSERT INTO r_total VALUES (60000000000, %lld, 's1', 0, %lld, 0);",
				 ws, (long long)(10 + t), ws, (long long)(20 + t));
	}
	exec_fmt(h, "INSERT INTO series VALUES (1, %lld, %lld)", (long long)(T0 + 2 * MIN), (long long)T0);
	sqlite3_close(h);
	CU_ASSERT_EQUAL_FATAL(st_open(&db, path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_schema_version(db), ST_SCHEMA_VERSION);
	/* per minute, per hour and per day: 46 for web of 86 */
	CU_ASSERT_EQUAL(st_query_usage_step(db, &q, MIN, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 8);
	for (t = 0; t < 4; t++) {
		CU_ASSERT_EQUAL(rows[2 * t].win_start_ns, T0 + t * MIN);
		CU_ASSERT_EQUAL(rows[2 * t].value, (uint64_t)(10 + t));
		CU_ASSERT_EQUAL(rows[2 * t + 1].residual, 10);
	}
	st_rows_free(rows);
	CU_ASSERT_EQUAL(st_query_usage_step(db, &q, DAY, &rows, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(rows[0].value, 46);
	CU_ASSERT_EQUAL(rows[0].total, 86);
	CU_ASSERT_EQUAL(rows[0].win_len_ns, DAY);
	st_rows_free(rows);
	/* the same as from the windows alone */
	{
		char p2[600];

		snprintf(p2, sizeof(p2), "%s/v6-ref.db", rm_test_tmpdir());
		unlink(p2);
		CU_ASSERT_EQUAL_FATAL(st_open(&ref, p2, 0), RM_OK);
		CU_ASSERT_EQUAL(st_begin(ref), RM_OK);
		for (t = 0; t < 4; t++) {
			CU_ASSERT_EQUAL(st_add_usage(ref, "s1", T0 + t * MIN, 30 * SEC, ST_R_CPU, "web",
						     (uint64_t)(10 + t)), RM_OK);
			CU_ASSERT_EQUAL(st_add_total(ref, "s1", T0 + t * MIN, 30 * SEC, ST_R_CPU,
						     (uint64_t)(20 + t), 0), RM_OK);
		}
		CU_ASSERT_EQUAL(st_commit(ref), RM_OK);
		windows_only(ref);
		same_answers(db, ref, range(T0, T0 + DAY), HOUR);
		same_all(db, ref, range(T0, T0 + DAY), DAY); /* the day summed over servers */
		same_answers(db, ref, range(T0 + 30 * SEC, T0 + 3 * MIN + 10 * SEC), MIN);
		st_close(ref);
	}
	st_close(db);
}

/* A v7 file (its 1 min and 1 h series not summed over servers, no month
 * series) is migrated so that both answer as the windows do. */
static void test_migrate_from_v7(void)
{
	st_db *dbs[2] = { open_fresh("v7"), open_fresh("v7_ref") };
	const int64_t nov = T0 - 14 * DAY, jan = nov + 61 * DAY;
	char path[600];
	int64_t t;
	int d;

	for (d = 0; d < 2; d++)
		CU_ASSERT_EQUAL_FATAL(st_begin(dbs[d]), RM_OK);
	for (t = nov - 2 * DAY; t < jan + DAY; t += 5 * HOUR + 7 * MIN + W)
		write_window(dbs, 2, t, (unsigned)(t / W));
	for (d = 0; d < 2; d++)
		CU_ASSERT_EQUAL_FATAL(st_commit(dbs[d]), RM_OK);
	/* what the v7 write path left: the same rows but for those */
	CU_ASSERT_EQUAL_FATAL(sqlite3_exec(dbs[0]->h,
					   "DELETE FROM r_ce_usage WHERE step != 86400000000000; "
					   "DELETE FROM r_ce_total WHERE step != 86400000000000; "
					   "DELETE FROM r_usage WHERE step = -1; DELETE FROM r_total WHERE step = -1; "
					   "DROP TABLE r_pack; DROP TABLE pack_state; "
					   "UPDATE schema_version SET version = 7", NULL, NULL, NULL), SQLITE_OK);
	snprintf(path, sizeof(path), "%s", dbs[0]->path);
	st_close(dbs[0]);
	CU_ASSERT_EQUAL_FATAL(st_open(&dbs[0], path, 0), RM_OK);
	CU_ASSERT_EQUAL(st_schema_version(dbs[0]), ST_SCHEMA_VERSION);
	CU_ASSERT(raw_count(dbs[0], "SELECT count(*) FROM r_ce_usage WHERE step = 60000000000") > 0);
	CU_ASSERT(raw_count(dbs[0], "SELECT count(*) FROM r_total WHERE step = -1") > 0);
	windows_only(dbs[1]);
	same_all(dbs[0], dbs[1], range(nov + 90 * MIN + 20 * SEC, jan + 3 * HOUR + 7 * MIN), 0);
	same_all(dbs[0], dbs[1], range(nov + 90 * MIN, jan + 3 * HOUR), HOUR);
	same_answers(dbs[0], dbs[1], range(nov, jan), 0);
	same_answers(dbs[0], dbs[1], range(nov - DAY, INT64_MAX), 0);
	st_close(dbs[0]);
	st_close(dbs[1]);
}

static void test_cover(void)
{
	struct st_series_map m = {
		.rolled = { INT64_MAX, T0 + DAY + HOUR, T0 + DAY + HOUR, T0 + DAY },
		.kept = { T0 + 20 * HOUR, T0 - DAY, T0 - 2 * DAY, T0 - 3 * DAY },
	};
	struct st_seg s[ST_SEG_MAX];
	size_t n;

	/* a day and a bit: the day, then the hour, then minutes and windows */
	n = st_cover(&m, T0, T0 + DAY + HOUR + MIN + 5 * SEC, 0, 0, s);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT(s[0].series == ST_SERIES_1D && s[0].lo == T0 && s[0].hi == T0 + DAY);
	CU_ASSERT(s[1].series == ST_SERIES_1H && s[1].hi == T0 + DAY + HOUR);
	CU_ASSERT(s[2].series == ST_SERIES_1S && s[2].lo == T0 + DAY + HOUR);
	CU_ASSERT(s[2].hi == T0 + DAY + HOUR + MIN + 5 * SEC);
	/* a 5 min step cannot use hours or days */
	n = st_cover(&m, T0 + DAY - 30 * MIN, T0 + DAY + 30 * MIN, 5 * MIN, 0, s);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(s[0].series, ST_SERIES_1M);
	/* per window: the windows where they are kept, minutes before */
	n = st_cover(&m, T0 + 19 * HOUR, T0 + 21 * HOUR, 0, 1, s);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT(s[0].series == ST_SERIES_1S && s[0].lo == T0 + 20 * HOUR);
	CU_ASSERT(s[1].series == ST_SERIES_1M && s[1].hi == T0 + 20 * HOUR);
	/* before the minutes' retention: the hours that start in the range */
	n = st_cover(&m, T0 - DAY - 90 * MIN, T0 - DAY + 30 * SEC, 0, 0, s);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT(s[0].series == ST_SERIES_1H && s[0].lo == T0 - DAY - 90 * MIN);
	CU_ASSERT(s[1].series == ST_SERIES_1M && s[1].lo == T0 - DAY);
}

/* Whole calendar months are read from the month series, and answer as the
 * windows do; st_month_start across years and a leap February. */
static void test_month_series(void)
{
	st_db *dbs[2] = { open_fresh("month_a"), open_fresh("month_b") };
	const int64_t nov = T0 - 14 * DAY, dec = nov + 30 * DAY, jan = dec + 31 * DAY, feb = jan + 31 * DAY;
	struct st_query q = { .since_ns = dec, .until_ns = jan, .resource = -1 };
	struct st_row *ra, *rb;
	size_t na, nb, i;
	int64_t t, web_a = -1, web_b = -2;
	int d;

	CU_ASSERT_EQUAL(st_month_start(nov + 5 * HOUR, 0), nov);
	CU_ASSERT_EQUAL(st_month_start(nov, 1), dec);
	CU_ASSERT_EQUAL(st_month_start(dec + DAY + 1, 1), jan);
	CU_ASSERT_EQUAL(st_month_start(feb, 1) - feb, 29 * DAY); /* 2024 */
	CU_ASSERT_EQUAL(st_month_start(dec - 1, 0), nov);
	for (d = 0; d < 2; d++)
		CU_ASSERT_EQUAL_FATAL(st_begin(dbs[d]), RM_OK);
	for (t = nov - 2 * DAY; t < feb + 2 * DAY; t += 7 * HOUR + W)
		write_window(dbs, 2, t, (unsigned)(t / W));
	for (d = 0; d < 2; d++)
		CU_ASSERT_EQUAL_FATAL(st_commit(dbs[d]), RM_OK);
	CU_ASSERT(raw_count(dbs[0], "SELECT count(*) FROM r_usage WHERE step = -1") > 0);
	windows_only(dbs[1]);
	same_answers(dbs[0], dbs[1], q, 0);
	q.since_ns = nov + 3 * HOUR;
	q.until_ns = feb + HOUR;
	same_answers(dbs[0], dbs[1], q, 0);
	q.server = "s2";
	q.resource = ST_R_NET_TX;
	same_answers(dbs[0], dbs[1], q, 0);
	q = (struct st_query){ .since_ns = INT64_MIN, .until_ns = INT64_MAX, .resource = -1 };
	same_answers(dbs[0], dbs[1], q, 0);
	/* the answer for December is its month row: changing that row shows */
	CU_ASSERT_EQUAL(sqlite3_exec(dbs[0]->h, "UPDATE r_usage SET value = value + 1 WHERE step = -1 "
					     "AND server = 's1' AND resource = 0 AND ce = 'web' AND "
					     "win_start = 1701388800000000000", NULL, NULL, NULL), SQLITE_OK);
	q = (struct st_query){ .since_ns = dec, .until_ns = jan, .server = "s1", .resource = ST_R_CPU };
	CU_ASSERT_EQUAL_FATAL(st_query_usage(dbs[0], &q, &ra, &na), RM_OK);
	CU_ASSERT_EQUAL_FATAL(st_query_usage(dbs[1], &q, &rb, &nb), RM_OK);
	for (i = 0; i < na; i++)
		if (!strcmp(ra[i].ce, "web"))
			web_a = (int64_t)ra[i].value;
	for (i = 0; i < nb; i++)
		if (!strcmp(rb[i].ce, "web"))
			web_b = (int64_t)rb[i].value;
	CU_ASSERT_EQUAL(web_a, web_b + 1);
	st_rows_free(ra);
	st_rows_free(rb);
	st_close(dbs[0]);
	st_close(dbs[1]);
}

static CU_TestInfo cases[] = {
	{ "rolled-up series answer as the windows do", test_rolled_answers_equal_windows },
	{ "retention and late writes keep the answers", test_retention_and_late_writes },
	{ "retention deletes a backlog in bounded steps", test_retention_in_steps },
	{ "the stored span, before and after retention", test_stored_span },
	{ "packed days: packing, late writes, retention", test_packed_days },
	{ "migrates a v5 file", test_migrate_from_v5 },
	{ "migrates a partly rolled-up v6 file", test_migrate_from_v6 },
	{ "migrates a v7 file", test_migrate_from_v7 },
	{ "migrates a v8 file: settled days packed", test_migrate_from_v8 },
	{ "choice of series", test_cover },
	{ "whole calendar months from the month series", test_month_series },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("st_rollup", cases)
