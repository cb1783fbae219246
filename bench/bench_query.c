/*
 * bench_query.c - how fast rametrctl answers over a month of a large
 * deployment, and how big the database is per day of retention.
 *
 * Builds a database (default 100 tenants x 50 servers x 5 resources, every
 * tenant on every server) as the aggregator's writes leave it at END: the
 * 1 day and 1 h series over 31 days, the 1 min series where the queries'
 * edges fall (the hours around END - 30 d and the last hour), the 1 s
 * windows of the last minutes, and the current day, hour and minute
 * buckets (which every write reaches), the 1 min, 1 h and 1 day series
 * summed over servers and the calendar months per server (from those
 * rows, as the writes leave them), and the packed day series (every
 * settled day, packed by st_rollup calls as the aggregator makes them,
 * timed). The 1 min and 1 s series are not
 * generated for the whole month (1.1e9 and 5.4e10 rows): the queries below
 * read no other rows of them, and the size per day of each series is
 * computed from the bytes per row measured here. Values are integers that
 * balance (sum U_c + V = U) in every bucket.
 *
 * Then it times the real rametrctl binary (process start included) on
 *   usage --since END-30d --until END --step 1d (-o csv, and the table)
 *   usage --since END-30d --until END --group-by ce --top 10
 *   usage --since END-30d --until END --step 1d --group-by ce --top 10
 *   bill --period 2026-11 --share-unaccountable weighted (one charge
 *   period: the month; and --charge-period day)
 *   usage --since END-30d --until END --step 1d --group-by server, and
 *   --group-by ce, and -o json
 * each run several times (median printed), output to /dev/null, each also
 * as a ratio to a yardstick timed in the same run between the queries (the
 * machine is shared and noisy): one plain scan of the 30 days' per-server
 * day rows through SQLite (0.78 M rows), in this process.
 *
 * usage: bench_query [--tenants N] [--servers N] [--db PATH] [--keep] [--reuse] [--runs N]
 *                    [--writes N]
 * (--reuse: time the queries on the database --db PATH built by an earlier
 * --keep run, without building it again; sizes are then not printed.
 * --writes N: instead, time the aggregator's write path: N windows of 1 s,
 * each of 2 servers x 5 resources x (20 CEs' usage + a reason + the total)
 * through st_add_* in one transaction per window, and print rows/s)
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "rm_err.h"
#include "st.h"
#include "st_rollup.h"
#include "banned.h"

#define SEC 1000000000LL
#define MIN (60 * SEC)
#define HOUR (3600 * SEC)
#define DAY (86400 * SEC)
#define END (1796042096LL * SEC) /* 2026-11-30T12:34:56Z */
#define NQ 10 /* queries timed */

struct gen {
	sqlite3 *h;
	int tenants, servers;
	sqlite3_stmt *u, *v, *t;
	unsigned x;
	long long rows;
};

/* 48 pseudo-random bits (two steps of an LCG, 24 bits each). */
static uint64_t rnd(struct gen *g)
{
	uint64_t hi;

	g->x = g->x * 1103515245u + 12345u;
	hi = g->x >> 8;
	g->x = g->x * 1103515245u + 12345u;
	return hi << 24 | g->x >> 8;
}

static int prep(sqlite3 *h, const char *sql, sqlite3_stmt **s)
{
	if (sqlite3_prepare_v2(h, sql, -1, s, NULL) != SQLITE_OK) {
		fprintf(stderr, "bench_query: %s\n", sqlite3_errmsg(h));
		return -1;
	}
	return 0;
}

/* Runs sql on h: 0, or -1 after printing SQLite's message. */
static int exec_sql(sqlite3 *h, const char *sql)
{
	if (sqlite3_exec(h, sql, NULL, NULL, NULL) != SQLITE_OK) {
		fprintf(stderr, "bench_query: %s\n", sqlite3_errmsg(h));
		return -1;
	}
	return 0;
}

static int step_reset(sqlite3 *h, sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);

	sqlite3_reset(s);
	if (rc != SQLITE_DONE) {
		fprintf(stderr, "bench_query: insert failed: %s\n", sqlite3_errmsg(h));
		return -1;
	}
	return 0;
}

/* One bucket [start, start + len) of every server, resource and tenant:
 * into the windows (step 0) or the rolled-up series of that step. */
static int gen_bucket(struct gen *g, int64_t step, int64_t start, int64_t len)
{
	char server[24], ce[24];
	int s, r, c;

	for (s = 0; s < g->servers; s++) {
		snprintf(server, sizeof(server), "srv-%02d", s);
		for (r = 0; r < ST_R_COUNT; r++) {
			/* cpu: up to 0.04 cores per tenant; bytes: up to 64 KiB/s */
			uint64_t sum = 0, lost, scale = r == ST_R_CPU ? (uint64_t)(len / 25) : (uint64_t)(len / SEC) * 65536;

			for (c = 0; c < g->tenants; c++) {
				uint64_t val = scale ? rnd(g) % scale : 0;

				snprintf(ce, sizeof(ce), "tenant-%03d", c);
				sqlite3_bind_int64(g->u, 1, step);
				sqlite3_bind_int64(g->u, 2, start);
				sqlite3_bind_text(g->u, 3, server, -1, SQLITE_TRANSIENT);
				sqlite3_bind_int(g->u, 4, r);
				sqlite3_bind_text(g->u, 5, ce, -1, SQLITE_TRANSIENT);
				sqlite3_bind_int64(g->u, 6, (sqlite3_int64)val);
				sqlite3_bind_int64(g->u, 7, len);
				if (step_reset(g->h, g->u))
					return -1;
				sum += val;
			}
			lost = scale ? rnd(g) % (scale / 8 + 1) : 0;
			sqlite3_bind_int64(g->v, 1, step);
			sqlite3_bind_int64(g->v, 2, start);
			sqlite3_bind_text(g->v, 3, server, -1, SQLITE_TRANSIENT);
			sqlite3_bind_int(g->v, 4, r);
			sqlite3_bind_int64(g->v, 5, (sqlite3_int64)lost);
			sqlite3_bind_int64(g->v, 6, len);
			sqlite3_bind_int64(g->t, 1, step);
			sqlite3_bind_int64(g->t, 2, start);
			sqlite3_bind_text(g->t, 3, server, -1, SQLITE_TRANSIENT);
			sqlite3_bind_int(g->t, 4, r);
			sqlite3_bind_int64(g->t, 5, (sqlite3_int64)(sum + lost));
			sqlite3_bind_int64(g->t, 6, r == ST_R_CPU ? 8 * len : 0);
			sqlite3_bind_int64(g->t, 7, len);
			if (step_reset(g->h, g->v) || step_reset(g->h, g->t))
				return -1;
			g->rows += g->tenants + 2;
		}
	}
	return 0;
}

/* Bytes the file takes now (pages in use). */
static long long db_bytes(sqlite3 *h)
{
	sqlite3_stmt *s;
	long long pages = 0, size = 0, freel = 0;

	if (prep(h, "SELECT * FROM pragma_page_count, pragma_page_size, pragma_freelist_count", &s))
		return 0;
	if (sqlite3_step(s) == SQLITE_ROW) {
		pages = sqlite3_column_int64(s, 0);
		size = sqlite3_column_int64(s, 1);
		freel = sqlite3_column_int64(s, 2);
	}
	sqlite3_finalize(s);
	return (pages - freel) * size;
}

struct series_gen {
	const char *name;
	int64_t step;         /* 0: the 1 s windows */
	int64_t len;          /* bucket length */
	int64_t from[2], to[2]; /* up to two ranges generated */
	long long rows;
	long long bytes;
};

static int gen_series(struct gen *g, struct series_gen *sg)
{
	const char *tab = sg->step ? "r_" : "";
	char sql[3][512];
	long long before = db_bytes(g->h), rows0 = g->rows;
	int64_t t;
	int i;

	if (sg->step) {
		snprintf(sql[0], sizeof(sql[0]), "INSERT INTO r_usage VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
		snprintf(sql[1], sizeof(sql[1]), "INSERT INTO r_unacct VALUES (?1, ?2, ?3, ?4, 'lost', ?5)");
		snprintf(sql[2], sizeof(sql[2]), "INSERT INTO r_total VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
	} else {
		/* ?1 (step) unused: windows have their own length ?7 */
		snprintf(sql[0], sizeof(sql[0]), "INSERT INTO %susage (server, resource, win_start, win_len, "
			 "ce, value) VALUES (?3, ?4, ?2, ?7, ?5, ?6 + 0 * ?1)", tab);
		snprintf(sql[1], sizeof(sql[1]), "INSERT INTO unacct (server, resource, win_start, win_len, "
			 "reason, value) VALUES (?3, ?4, ?2, ?6, 'lost', ?5 + 0 * ?1)");
		snprintf(sql[2], sizeof(sql[2]), "INSERT INTO total (server, resource, win_start, win_len, "
			 "value, capacity) VALUES (?3, ?4, ?2, ?7, ?5, ?6 + 0 * ?1)");
	}
	if (prep(g->h, sql[0], &g->u) || prep(g->h, sql[1], &g->v) || prep(g->h, sql[2], &g->t))
		return -1;
	sqlite3_exec(g->h, "BEGIN", NULL, NULL, NULL);
	for (i = 0; i < 2; i++)
		for (t = sg->from[i]; t < sg->to[i]; t += sg->len)
			if (gen_bucket(g, sg->step, t, sg->len))
				return -1;
	if (sqlite3_exec(g->h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		fprintf(stderr, "bench_query: commit failed: %s\n", sqlite3_errmsg(g->h));
		return -1;
	}
	sqlite3_finalize(g->u);
	sqlite3_finalize(g->v);
	sqlite3_finalize(g->t);
	sg->rows = g->rows - rows0;
	sg->bytes = db_bytes(g->h) - before;
	return 0;
}

static int64_t floor_to(int64_t x, int64_t s)
{
	return x - x % s;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_CHILDREN, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Median wall time of `runs` runs of rametrctl with args, in ms; *cpu_ms
 * the median CPU time (user + system) of those runs, which waiting for a
 * core on a loaded machine does not inflate. */
static double time_cmd(const char *args, int runs, double *cpu_ms)
{
	char cmd[8192];
	double t[64], c[64];
	int i, st;

	snprintf(cmd, sizeof(cmd), "'%s' %s >/dev/null", RAMETRCTL_PATH, args);
	for (i = 0; i < runs && i < 64; i++) {
		double t0 = now_s(), c0 = cpu_s();

		st = system(cmd);
		t[i] = (now_s() - t0) * 1e3;
		c[i] = (cpu_s() - c0) * 1e3;
		if (st != 0) {
			fprintf(stderr, "bench_query: '%s' failed (status %d)\n", cmd, st);
			return -1;
		}
	}
	qsort(t, (size_t)i, sizeof(t[0]), cmp_d);
	qsort(c, (size_t)i, sizeof(c[0]), cmp_d);
	*cpu_ms = c[i / 2];
	return t[i / 2];
}

/* The write path's rate: rows/s through st_add_* into a fresh file. */
static int bench_writes(const char *path, int windows)
{
	char server[24], ce[24];
	unsigned x = 7;
	long long rows = 0;
	double t0;
	st_db *db;
	int w, s, r, c;

	unlink(path);
	rm_log_init("bench_query");
	if (st_open(&db, path, 0) != RM_OK)
		return 1;
	t0 = now_s();
	for (w = 0; w < windows; w++) {
		int64_t ws = END - (int64_t)(windows - w) * SEC;

		if (st_begin(db) != RM_OK)
			return 1;
		for (s = 0; s < 2; s++) {
			snprintf(server, sizeof(server), "srv-%02d", s);
			for (r = 0; r < ST_R_COUNT; r++) {
				uint64_t sum = 0, v;

				for (c = 0; c < 20; c++) {
					x = x * 1103515245u + 12345u;
					v = x >> 12;
					snprintf(ce, sizeof(ce), "tenant-%03d", c);
					if (st_add_usage(db, server, ws, SEC, (enum st_resource)r, ce, v) != RM_OK)
						return 1;
					sum += v;
				}
				if (st_add_unacct(db, server, ws, SEC, (enum st_resource)r, "lost", 1000) != RM_OK ||
				    st_add_total(db, server, ws, SEC, (enum st_resource)r, sum + 1000,
						 r == ST_R_CPU ? 8 * SEC : 0) != RM_OK)
					return 1;
				rows += 22;
			}
		}
		if (st_commit(db) != RM_OK)
			return 1;
	}
	t0 = now_s() - t0;
	st_close(db);
	printf("writes: %d windows, %lld rows in %.2f s: %.0f rows/s (schema v%d)\n", windows, rows, t0,
	       rows / t0, ST_SCHEMA_VERSION);
	unlink(path);
	return 0;
}

/* ms to read every row of r_usage with step 1 d and a start in [lo, hi)
 * (server, resource, CE and value of each), in this process. */
static double scan_ms(const char *path, int64_t lo, int64_t hi)
{
	sqlite3 *h;
	sqlite3_stmt *s;
	long long n = 0, sum = 0;
	double t0 = now_s();

	if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
	    prep(h, "SELECT server, resource, ce, value FROM r_usage WHERE step = 86400000000000 AND "
		    "win_start >= ?1 AND win_start < ?2", &s)) {
		sqlite3_close(h);
		return -1;
	}
	sqlite3_bind_int64(s, 1, lo);
	sqlite3_bind_int64(s, 2, hi);
	while (sqlite3_step(s) == SQLITE_ROW) {
		sum += sqlite3_column_bytes(s, 0) + sqlite3_column_int(s, 1) + sqlite3_column_bytes(s, 2) +
		       (sqlite3_column_int64(s, 3) & 1);
		n++;
	}
	sqlite3_finalize(s);
	sqlite3_close(h);
	return n + sum > 0 ? (now_s() - t0) * 1e3 : -1;
}

static void fmt_time(int64_t ns, char *buf, size_t len)
{
	time_t s = (time_t)(ns / SEC);
	struct tm tm;

	gmtime_r(&s, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tenants", required_argument, NULL, 't' }, { "servers", required_argument, NULL, 's' },
		{ "db", required_argument, NULL, 'd' },      { "keep", no_argument, NULL, 'k' },
		{ "runs", required_argument, NULL, 'r' },    { "reuse", no_argument, NULL, 'u' },
		{ "writes", required_argument, NULL, 'w' },  { NULL, 0, NULL, 0 },
	};
	struct gen g = { .tenants = 100, .servers = 50, .x = 42 };
	char path[512] = "", since[40], until[40], args[NQ][1024], load[128] = "?";
	int keep = 0, reuse = 0, runs = 5, writes = 0, ch, i;
	int64_t r1m = floor_to(END - 2 * MIN, MIN), r1h = floor_to(r1m, HOUR), r1d = floor_to(r1h, DAY);
	int64_t edge = floor_to(END - 30 * DAY, HOUR);
	struct series_gen sg[4] = {
		/* up to the current bucket of each series */
		{ "1d", DAY, DAY, { r1d - 31 * DAY, 0 }, { r1d + DAY, 0 }, 0, 0 },
		{ "1h", HOUR, HOUR, { r1d - 31 * DAY, 0 }, { r1h + HOUR, 0 }, 0, 0 },
		{ "1m", MIN, MIN, { edge - HOUR, r1h }, { edge + 2 * HOUR, r1m + MIN }, 0, 0 },
		{ "1s", 0, SEC, { r1m, 0 }, { END, 0 }, 0, 0 },
	};
	const double per_day[4] = { 1, 24, 1440, 86400 };
	const double keep_days[4] = { 0, 395, 30, 2 }; /* defaults; 1d: for ever */
	double t0, yard[64], q_ms[NQ], q_cpu[NQ], y_ms;
	long long ce_bytes = 0, ce_rows = 0, pack_bytes = 0;
	int pack_days = 0;
	FILE *f;
	st_db *db;

	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 't': g.tenants = atoi(optarg); break;
		case 's': g.servers = atoi(optarg); break;
		case 'd': snprintf(path, sizeof(path), "%s", optarg); break;
		case 'k': keep = 1; break;
		case 'r': runs = atoi(optarg); break;
		case 'u': reuse = keep = 1; break;
		case 'w': writes = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: bench_query [--tenants N] [--servers N] [--db PATH] [--keep] "
					"[--reuse] [--runs N] [--writes N]\n");
			return 2;
		}
	}
	if (g.tenants < 1 || g.tenants > 1000 || g.servers < 1 || g.servers > 100 || runs < 1) {
		fprintf(stderr, "bench_query: tenants 1..1000, servers 1..100, runs >= 1\n");
		return 2;
	}
	if (!path[0])
		snprintf(path, sizeof(path), "/tmp/bench_query.%d.db", (int)getpid());
	if (writes > 0)
		return bench_writes(path, writes);
	if (reuse) {
		if (access(path, R_OK) != 0) {
			fprintf(stderr, "bench_query: --reuse: no database at '%s'\n", path);
			return 2;
		}
		goto timed;
	}
	unlink(path);
	rm_log_init("bench_query");
	if (st_open(&db, path, 0) != RM_OK)
		return 1;
	st_close(db);
	if (sqlite3_open(path, &g.h) != SQLITE_OK)
		return 1;
	sqlite3_exec(g.h, "PRAGMA synchronous = OFF; PRAGMA cache_size = -262144", NULL, NULL, NULL);
	printf("bench_query: %d tenants x %d servers x %d resources, END = 2026-11-30T12:34:56Z\n",
	       g.tenants, g.servers, ST_R_COUNT);
	t0 = now_s();
	for (i = 0; i < 4; i++) {
		double ts = now_s();

		if (gen_series(&g, &sg[i]))
			return 1;
		printf("  generated %-2s series: %10lld rows, %8.1f MB in %.1f s\n", sg[i].name, sg[i].rows,
		       sg[i].bytes / 1e6, now_s() - ts);
	}
	{
		char sql[512];

		snprintf(sql, sizeof(sql),
			 "INSERT INTO series VALUES (0, %lld, %lld), (1, %lld, %lld), (2, %lld, %lld), "
			 "(3, %lld, %lld); INSERT INTO horizon VALUES (1, %lld)",
			 (long long)INT64_MAX, (long long)r1m, (long long)INT64_MAX, (long long)(edge - HOUR),
			 (long long)INT64_MAX, (long long)(r1d - 31 * DAY), (long long)INT64_MAX,
			 (long long)(r1d - 31 * DAY), (long long)(END - 10 * SEC));
		if (exec_sql(g.h, sql))
			return 1;
	}
	{
		/* the day series summed over servers, as the writes leave it */
		double ts = now_s();
		long long before = db_bytes(g.h);

		if (exec_sql(g.h, "INSERT INTO r_ce_usage SELECT step, win_start, resource, ce, "
				  "SUM(value) FROM r_usage WHERE step > 0 GROUP BY 1, 2, 3, 4; "
				  "INSERT INTO r_ce_total SELECT step, win_start, resource, SUM(value), "
				  "SUM(capacity) FROM r_total WHERE step > 0 GROUP BY 1, 2, 3"))
			return 1;
		ce_bytes = db_bytes(g.h) - before;
		printf("  generated the series summed over servers: %8.1f MB in %.1f s\n", ce_bytes / 1e6,
		       now_s() - ts);
		ts = now_s();
		before = db_bytes(g.h);
		/* the calendar months per server, from the day rows (the months
		 * before the generated days hold only those days, as they would) */
		if (exec_sql(g.h, "INSERT INTO r_usage SELECT -1, m, server, resource, ce, SUM(value) FROM "
				  "(SELECT CAST(strftime('%s', win_start / 1000000000, 'unixepoch', 'start of "
				  "month') AS INTEGER) * 1000000000 AS m, * FROM r_usage WHERE step = "
				  "86400000000000) GROUP BY m, server, resource, ce; "
				  "INSERT INTO r_total SELECT -1, m, server, resource, SUM(value), SUM(capacity) "
				  "FROM (SELECT CAST(strftime('%s', win_start / 1000000000, 'unixepoch', 'start "
				  "of month') AS INTEGER) * 1000000000 AS m, * FROM r_total WHERE step = "
				  "86400000000000) GROUP BY m, server, resource"))
			return 1;
		printf("  generated the month series: %8.1f MB for 2 months in %.1f s\n",
		       (db_bytes(g.h) - before) / 1e6, now_s() - ts);
	}
	{
		sqlite3_stmt *cs;

		if (prep(g.h, "SELECT (SELECT count(*) FROM r_ce_usage) + (SELECT count(*) FROM r_ce_total)",
			 &cs))
			return 1;
		if (sqlite3_step(cs) == SQLITE_ROW)
			ce_rows = sqlite3_column_int64(cs, 0);
		sqlite3_finalize(cs);
	}
	{
		/* the packed day series, as the aggregator's st_rollup calls leave
		 * it: every settled day packed, one a call (retention kept off:
		 * the generated rows are what the queries read) */
		struct st_retention all = { { 0, 0, 0, 0 } };
		sqlite3_stmt *cs;
		double ts = now_s();
		long long before = db_bytes(g.h);
		int more = 1, calls = 0;

		if (st_open(&db, path, 0) != RM_OK)
			return 1;
		while (more && calls++ < 1000)
			if (st_rollup(db, &all, &more) != RM_OK)
				return 1;
		st_close(db);
		pack_bytes = db_bytes(g.h) - before;
		if (prep(g.h, "SELECT count(DISTINCT win_start) FROM r_pack", &cs))
			return 1;
		if (sqlite3_step(cs) == SQLITE_ROW)
			pack_days = sqlite3_column_int(cs, 0);
		sqlite3_finalize(cs);
		printf("  packed %d days in %d st_rollup calls: %8.1f MB in %.1f s\n", pack_days, calls,
		       pack_bytes / 1e6, now_s() - ts);
	}
	sqlite3_close(g.h);
	printf("  built in %.1f s\n\nsize per day of retention (bytes per row measured above):\n",
	       now_s() - t0);
	for (i = 0; i < 4; i++) {
		double bpr = sg[i].rows ? (double)sg[i].bytes / sg[i].rows : 0;
		double rows_day = per_day[i] * g.servers * ST_R_COUNT * (g.tenants + 2);
		double mb_day = rows_day * bpr / 1e6;

		printf("  %-2s  %6.1f B/row  %12.0f rows/day  %12.1f MB/day", sg[i].name, bpr, rows_day,
		       mb_day);
		if (keep_days[i] > 0)
			printf("  x %3.0f days kept = %10.1f GB\n", keep_days[i], mb_day * keep_days[i] / 1e3);
		else
			printf("  kept for ever\n");
	}
	for (i = 0; i < 3; i++) {
		/* the series summed over servers: one row per resource and CE (and total) */
		double bpr = ce_rows ? (double)ce_bytes / ce_rows : 0;
		double rows_day = per_day[i] * ST_R_COUNT * (g.tenants + 1);

		printf("  %-2s summed over servers %6.1f B/row  %8.0f rows/day  %8.2f MB/day", sg[i].name, bpr,
		       rows_day, rows_day * bpr / 1e6);
		if (keep_days[i] > 0)
			printf("  x %3.0f days kept = %7.2f GB\n", keep_days[i],
			       rows_day * bpr * keep_days[i] / 1e9);
		else
			printf("  kept for ever\n");
	}
	printf("  month series: %d rows a month (about %.1f MB), kept for ever\n",
	       g.servers * ST_R_COUNT * (g.tenants + 1), g.servers * ST_R_COUNT * (g.tenants + 1) * 52.0 / 1e6);
	if (pack_days > 0)
		printf("  1d packed: %d rows/day (one per server and resource), %.2f MB/day, kept with the 1d "
		       "series (for ever)\n", g.servers * ST_R_COUNT, pack_bytes / 1e6 / pack_days);

timed:
	fmt_time(END - 30 * DAY, since, sizeof(since));
	fmt_time(END, until, sizeof(until));
	snprintf(args[0], sizeof(args[0]), "version");
	snprintf(args[1], sizeof(args[1]), "usage --db '%s' --since %s --until %s --step 1d -o csv", path,
		 since, until);
	snprintf(args[2], sizeof(args[2]), "usage --db '%s' --since %s --until %s --step 1d", path, since,
		 until);
	snprintf(args[3], sizeof(args[3]), "usage --db '%s' --since %s --until %s --group-by ce --top 10",
		 path, since, until);
	snprintf(args[4], sizeof(args[4]), "usage --db '%s' --since %s --until %s --step 1d --group-by ce "
		 "--top 10", path, since, until);
	snprintf(args[5], sizeof(args[5]), "bill --db '%s' --period 2026-11 --share-unaccountable weighted",
		 path);
	snprintf(args[6], sizeof(args[6]), "bill --db '%s' --period 2026-11 --share-unaccountable weighted "
		 "--charge-period day", path);
	snprintf(args[7], sizeof(args[7]), "usage --db '%s' --since %s --until %s --step 1d --group-by server",
		 path, since, until);
	snprintf(args[8], sizeof(args[8]), "usage --db '%s' --since %s --until %s --step 1d --group-by ce",
		 path, since, until);
	snprintf(args[9], sizeof(args[9]), "usage --db '%s' --since %s --until %s --step 1d -o json", path,
		 since, until);
	if ((f = fopen("/proc/loadavg", "r"))) {
		if (!fgets(load, sizeof(load), f))
			snprintf(load, sizeof(load), "?");
		load[strcspn(load, "\n")] = '\0';
		fclose(f);
	}
	/* the yardstick between the queries, the queries' medians */
	for (i = 0; i < NQ; i++) {
		if ((yard[i] = scan_ms(path, floor_to(END - 30 * DAY, DAY), floor_to(END, DAY) + DAY)) < 0 ||
		    (q_ms[i] = time_cmd(args[i], runs, &q_cpu[i])) < 0)
			return 1;
	}
	qsort(yard, NQ, sizeof(yard[0]), cmp_d);
	y_ms = yard[NQ / 2];
	printf("\nqueries over 30 days (median of %d runs, rametrctl process included; loadavg %s);\n"
	       "yardstick: a plain scan of the 30 days' per-server day rows in this process, median %.1f ms\n"
	       "(%.1f .. %.1f over the run); cpu: user + system time of the process\n", runs, load, y_ms,
	       yard[0], yard[NQ - 1]);
	for (i = 0; i < NQ; i++)
		printf("  %8.1f ms  %6.3f x yardstick  cpu %7.1f ms  rametrctl %.*s %s\n", q_ms[i],
		       q_ms[i] / y_ms, q_cpu[i], (int)strcspn(args[i], " "), args[i],
		       i ? strstr(args[i], "' ") + 2 : "");
	if (!keep) {
		char wal[600];

		unlink(path);
		snprintf(wal, sizeof(wal), "%s-wal", path);
		unlink(wal);
		snprintf(wal, sizeof(wal), "%s-shm", path);
		unlink(wal);
	} else {
		printf("database kept at %s\n", path);
	}
	return 0;
}
