/*
 * col_restart_test.c - the collector's state file: its line round-trips
 * (paths with spaces included), bad lines are refused, and the lump a
 * restarted ebpf collector reports covers the dead instance's open windows,
 * or nothing when the counters cannot tell (another node, window length or
 * boot; counters that went back). Also the file itself: saved, replaced,
 * loaded and removed in a temporary directory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rm_test.h"
#include "col_restart.h"
#include "rm_err.h"

static const struct col_restart_state base = {
	"db1", "ebpf", 1000000000ull, 1700000000ull, 5000000000ull, "0b3c1d7e-8f5a-4c2e-9a1b-2c3d4e5f6a7b", ""
};

static void test_roundtrip(void)
{
	struct col_restart_state s = base, back;
	char line[COL_RESTART_LINE_MAX];

	CU_ASSERT_EQUAL_FATAL(col_restart_format(&s, line, sizeof(line)), RM_OK);
	CU_ASSERT_EQUAL_FATAL(col_restart_parse(line, &back), RM_OK);
	CU_ASSERT_EQUAL(memcmp(&s, &back, sizeof(s)), 0);
	memset(&s, 0, sizeof(s));
	snprintf(s.node, sizeof(s.node), "c1");
	snprintf(s.backend, sizeof(s.backend), "replay");
	s.window_ns = 100000000;
	snprintf(s.events, sizeof(s.events), "/tmp/a dir/c1 stream.events");
	CU_ASSERT_EQUAL_FATAL(col_restart_format(&s, line, sizeof(line)), RM_OK);
	CU_ASSERT_EQUAL_FATAL(col_restart_parse(line, &back), RM_OK);
	CU_ASSERT_STRING_EQUAL(back.events, "/tmp/a dir/c1 stream.events");
	CU_ASSERT_STRING_EQUAL(back.boot, "");
	CU_ASSERT_EQUAL(back.window_ns, 100000000);
	CU_ASSERT_EQUAL(col_restart_format(&s, line, 20), RM_EFULL);
	snprintf(s.node, sizeof(s.node), "a b");
	CU_ASSERT_EQUAL(col_restart_format(&s, line, sizeof(line)), RM_EINVAL);
}

static void test_bad_lines(void)
{
	static const struct { const char *name, *line; } bad[] = {
		{ "empty", "" },
		{ "another magic", "rametr-collector-state 2 node=a backend=ebpf window_ns=1 from_win=1 busy_ns=1 boot= events=\n" },
		{ "no node", COL_RESTART_MAGIC " backend=ebpf window_ns=1 from_win=1 busy_ns=1 boot= events=\n" },
		{ "empty node", COL_RESTART_MAGIC " node= backend=ebpf window_ns=1 from_win=1 busy_ns=1 boot= events=\n" },
		{ "window 0", COL_RESTART_MAGIC " node=a backend=ebpf window_ns=0 from_win=1 busy_ns=1 boot= events=\n" },
		{ "negative busy", COL_RESTART_MAGIC " node=a backend=ebpf window_ns=1 from_win=1 busy_ns=-1 boot= events=\n" },
		{ "letters in a number", COL_RESTART_MAGIC " node=a backend=ebpf window_ns=1x from_win=1 busy_ns=1 boot= events=\n" },
		{ "no events key", COL_RESTART_MAGIC " node=a backend=ebpf window_ns=1 from_win=1 busy_ns=1 boot=\n" },
		{ "key inside another", COL_RESTART_MAGIC " xnode=a backend=ebpf window_ns=1 from_win=1 busy_ns=1 boot= events=\n" },
	};
	struct col_restart_state s;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rv = col_restart_parse(bad[i].line, &s);

		if (rv != RM_EPROTO)
			fprintf(stderr, "bad line '%s' was taken\n", bad[i].name);
		CU_ASSERT_EQUAL(rv, RM_EPROTO);
	}
}

struct lump_case {
	const char *name;
	const char *node, *boot;
	uint64_t window_ns, busy_now, now_win;
	int want;                  /* 1: a report */
	uint64_t want_busy, want_n;
};

static const struct lump_case lump_cases[] = {
	{ "three windows open: busy since the snapshot over all three", "db1", NULL, 1000000000ull, 7500000000ull,
	  1700000002ull, 1, 2500000000ull, 3 },
	{ "restarted within the same window: one window", "db1", NULL, 1000000000ull, 5000000000ull, 1700000000ull, 1,
	  0, 1 },
	{ "another node's file", "db2", NULL, 1000000000ull, 7500000000ull, 1700000002ull, 0, 0, 0 },
	{ "another window length", "db1", NULL, 100000000ull, 7500000000ull, 1700000002ull, 0, 0, 0 },
	{ "the node booted since", "db1", "11111111-2222-3333-4444-555555555555", 1000000000ull, 7500000000ull,
	  1700000002ull, 0, 0, 0 },
	{ "the counter went back", "db1", NULL, 1000000000ull, 4000000000ull, 1700000002ull, 0, 0, 0 },
	{ "a clock before the snapshot's window", "db1", NULL, 1000000000ull, 7500000000ull, 1699999999ull, 0, 0, 0 },
};

static void test_lump(void)
{
	size_t i;

	for (i = 0; i < sizeof(lump_cases) / sizeof(lump_cases[0]); i++) {
		const struct lump_case *c = &lump_cases[i];
		struct rm_totals t;
		const char *why = "unset";
		int got = col_restart_lump(&base, c->node, c->window_ns, c->boot ? c->boot : base.boot, c->busy_now,
					   c->now_win, &t, &why);

		if (got != c->want)
			fprintf(stderr, "%s: got %d (%s)\n", c->name, got, why ? why : "-");
		CU_ASSERT_EQUAL(got, c->want);
		if (got) {
			CU_ASSERT_PTR_NULL(why);
			CU_ASSERT_EQUAL(t.win, c->now_win);
			CU_ASSERT_EQUAL(t.busy_ns, c->want_busy);
			CU_ASSERT_EQUAL(t.restart, c->want_n);
		} else {
			CU_ASSERT_PTR_NOT_NULL(why);
		}
	}
}

static void test_replay_backend_has_no_lump(void)
{
	struct col_restart_state s = base;
	struct rm_totals t;
	const char *why;

	snprintf(s.backend, sizeof(s.backend), "replay");
	CU_ASSERT_EQUAL(col_restart_lump(&s, "db1", s.window_ns, s.boot, 9000000000ull, 1700000002ull, &t, &why), 0);
	CU_ASSERT_PTR_NOT_NULL(why);
}

static void test_file(void)
{
	char path[300], tmp[320];
	struct col_restart_state s[2] = { base, base }, back[COL_RESTART_MAX];
	uint64_t busy1 = 0, busy2 = 0;
	size_t n = 99;
	char boot[40];

	snprintf(path, sizeof(path), "%s/spool-db1.state", rm_test_tmpdir());
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	CU_ASSERT_EQUAL(col_restart_load(path, back, &n), RM_ENOENT);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(col_restart_save(path, s, 1), RM_OK);
	s[1].from_win++;
	snprintf(s[1].backend, sizeof(s[1].backend), "replay");
	snprintf(s[1].events, sizeof(s[1].events), "/srv/a stream.events");
	CU_ASSERT_EQUAL(col_restart_save(path, s, 2), RM_OK);
	CU_ASSERT_EQUAL(access(tmp, F_OK), -1);
	CU_ASSERT_EQUAL(col_restart_load(path, back, &n), RM_OK);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(memcmp(&back[0], &s[0], sizeof(s[0])), 0);
	CU_ASSERT_EQUAL(memcmp(&back[1], &s[1], sizeof(s[1])), 0);
	CU_ASSERT_EQUAL(col_restart_remove(path), RM_OK);
	CU_ASSERT_EQUAL(col_restart_remove(path), RM_OK);
	CU_ASSERT_EQUAL(col_restart_load(path, back, &n), RM_ENOENT);
	/* a line that is not state is skipped, the others are kept */
	{
		char text[2 * COL_RESTART_LINE_MAX];

		CU_ASSERT_EQUAL_FATAL(col_restart_format(&s[0], text, sizeof(text)), RM_OK);
		memmove(text + 17, text, strlen(text) + 1);
		memcpy(text, "not a state line\n", 17);
		rm_test_write_file(path, text);
	}
	CU_ASSERT_EQUAL(col_restart_load(path, back, &n), RM_OK);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(back[0].from_win, base.from_win);
	unlink(path);
	/* the kernel's counters: busy CPU never goes back; a boot id */
	CU_ASSERT_EQUAL(col_restart_busy_ns(&busy1), RM_OK);
	CU_ASSERT_EQUAL(col_restart_busy_ns(&busy2), RM_OK);
	CU_ASSERT(busy1 > 0);
	CU_ASSERT(busy2 >= busy1);
	col_restart_boot_id(boot, sizeof(boot));
	CU_ASSERT_EQUAL(strlen(boot), 36);
}

static CU_TestInfo cases[] = {
	{ "the state line round-trips; unfit fields are refused", test_roundtrip },
	{ "bad state lines are refused", test_bad_lines },
	{ "the ebpf lump covers the open windows, or nothing when the counters cannot tell", test_lump },
	{ "a replay state gives no ebpf lump", test_replay_backend_has_no_lump },
	{ "the state file: lines saved by rename, loaded, bad ones skipped, removed; the kernel's counters", test_file },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_restart", cases)
