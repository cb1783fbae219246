/*
 * rm_conf_test.c - the INI reader (file:line messages, comments, drop-ins)
 * and the merge of a program's settings from files and the command line.
 */
#include <sys/stat.h>

#include "rm_conf.h"
#include "rm_err.h"
#include "rm_test.h"

enum { S_NAME, S_ADDR, S_FLAG, S_CONFIG, S_COUNT };

static const struct rm_setting table[S_COUNT] = {
	[S_NAME] = { "node-name", 1, 0, 1, 'n' },
	[S_ADDR] = { "addr", 1, 1, 1, 0 },
	[S_FLAG] = { "follow", 0, 0, 1, 'f' },
	[S_CONFIG] = { "config", 1, 0, 0, 0 },
};

struct seen {
	char log[64][128];
	int n;
};

static int collect(void *arg, const char *file, int line, char *section, char *key, char *value)
{
	struct seen *s = arg;

	if (s->n < 64)
		snprintf(s->log[s->n++], sizeof(s->log[0]), "%s:%d [%s] %s=%s", file, line, section ? section : "-",
			 key ? key : "", value ? value : "");
	return RM_OK;
}

static void test_parse(void)
{
	static const char text[] = "# c\n[a]\nk = v ; comment\n  k2=x;y  \n\n[b \"q\"]\nz = 1 # c\n";
	struct seen s = { .n = 0 };

	CU_ASSERT_EQUAL(rm_conf_parse(text, strlen(text), "t.conf", collect, &s), RM_OK);
	CU_ASSERT_EQUAL_FATAL(s.n, 5);
	CU_ASSERT_STRING_EQUAL(s.log[0], "t.conf:2 [a] =");
	CU_ASSERT_STRING_EQUAL(s.log[1], "t.conf:3 [a] k=v");
	CU_ASSERT_STRING_EQUAL(s.log[2], "t.conf:4 [a] k2=x;y");
	CU_ASSERT_STRING_EQUAL(s.log[3], "t.conf:6 [b \"q\"] =");
	CU_ASSERT_STRING_EQUAL(s.log[4], "t.conf:7 [b \"q\"] z=1");
}

static void test_parse_errors(void)
{
	static const char text[] = "[a]\nnovalue\n[broken\nk = 1\n[c]\nk = 2\n";
	struct seen s = { .n = 0 };
	char log[300];
	char *out;

	rm_test_capture_start("errors", log, sizeof(log));
	CU_ASSERT_EQUAL(rm_conf_parse(text, strlen(text), "e.conf", collect, &s), RM_ECONFIG);
	out = rm_test_capture_end(log);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "e.conf:2: expected 'key = value', got 'novalue'"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "e.conf:3: malformed section header '[broken'"));
	free(out);
	/* the keys of a malformed section are skipped, the next section is read */
	CU_ASSERT_EQUAL_FATAL(s.n, 3);
	CU_ASSERT_STRING_EQUAL(s.log[2], "e.conf:6 [c] k=2");
}

static void test_settings_merge(void)
{
	char *argv[] = { "prog", "-n", "cli", "--follow", NULL };
	char *argv2[] = { "prog", "--addr", "c1", NULL };
	struct rm_setvals files = { 0 }, cmd = { 0 };
	const char *got[S_COUNT] = { 0 };
	const char *addrs[4];
	size_t i, na = 0;

	CU_ASSERT_EQUAL(rm_settings_key(table, S_COUNT, "f", 2, "p", "node_name", "file", &files), RM_OK);
	CU_ASSERT_EQUAL(rm_settings_key(table, S_COUNT, "f", 3, "p", "addr", "a1", &files), RM_OK);
	CU_ASSERT_EQUAL(rm_settings_key(table, S_COUNT, "f", 4, "p", "addr", "a2", &files), RM_OK);
	CU_ASSERT_EQUAL(rm_settings_key(table, S_COUNT, "f", 5, "p", "follow", "off", &files), RM_OK);
	CU_ASSERT_EQUAL_FATAL(files.n, 4);
	CU_ASSERT_STRING_EQUAL(files.v[3].value, "no");
	CU_ASSERT_STRING_EQUAL(files.v[0].where, "f:2: ");

	CU_ASSERT_EQUAL_FATAL(rm_settings_argv(table, S_COUNT, 4, argv, &cmd), RM_OK);
	CU_ASSERT_EQUAL_FATAL(cmd.n, 2);
	CU_ASSERT_STRING_EQUAL(cmd.v[0].name, "--node-name");
	CU_ASSERT_STRING_EQUAL(cmd.v[1].value, "yes");
	/* files first, then the command line: the last value wins */
	for (i = 0; i < files.n; i++)
		got[files.v[i].id] = files.v[i].value;
	for (i = 0; i < cmd.n; i++)
		got[cmd.v[i].id] = cmd.v[i].value;
	CU_ASSERT_STRING_EQUAL(got[S_NAME], "cli");
	CU_ASSERT_STRING_EQUAL(got[S_FLAG], "yes");
	rm_setvals_free(&cmd);

	/* a repeatable setting on the command line replaces all the files' values */
	CU_ASSERT_EQUAL_FATAL(rm_settings_argv(table, S_COUNT, 3, argv2, &cmd), RM_OK);
	for (i = 0; i < files.n; i++)
		if (files.v[i].id == S_ADDR && rm_setvals_find(&cmd, S_ADDR) < 0)
			addrs[na++] = files.v[i].value;
	for (i = 0; i < cmd.n; i++)
		if (cmd.v[i].id == S_ADDR)
			addrs[na++] = cmd.v[i].value;
	CU_ASSERT_EQUAL(na, 1);
	CU_ASSERT_STRING_EQUAL(addrs[0], "c1");
	rm_setvals_free(&cmd);
	rm_setvals_free(&files);
}

static const char *apply_addrs[8];
static size_t apply_n;
static int apply_refuse;

static int apply_fn(void *arg, const struct rm_setval *v)
{
	(void)arg;
	if (v->id == S_ADDR && apply_n < 8)
		apply_addrs[apply_n++] = v->value;
	if (v->id == S_NAME && strcmp(v->value, "bad") == 0) {
		apply_refuse++;
		return RM_EINVAL;
	}
	return RM_OK;
}

static void test_settings_apply(void)
{
	char *argv[] = { "prog", "--addr", "c1", "--addr", "c2", "--node-name", "bad", NULL };
	struct rm_setvals files = { 0 }, cmd = { 0 };

	CU_ASSERT_EQUAL(rm_settings_key(table, S_COUNT, "f", 1, "p", "addr", "a1", &files), RM_OK);
	CU_ASSERT_EQUAL(rm_settings_key(table, S_COUNT, "f", 2, "p", "node-name", "ok", &files), RM_OK);
	CU_ASSERT_EQUAL_FATAL(rm_settings_argv(table, S_COUNT, 7, argv, &cmd), RM_OK);
	CU_ASSERT_EQUAL(rm_settings_apply(table, &files, &cmd, apply_fn, NULL), RM_ECONFIG);
	CU_ASSERT_EQUAL(apply_n, 2);
	CU_ASSERT_STRING_EQUAL(apply_addrs[0], "c1");
	CU_ASSERT_STRING_EQUAL(apply_addrs[1], "c2");
	CU_ASSERT_EQUAL(apply_refuse, 1);
	/* without the command line the files' values are applied */
	apply_n = 0;
	CU_ASSERT_EQUAL(rm_settings_apply(table, &files, NULL, apply_fn, NULL), RM_OK);
	CU_ASSERT_EQUAL(apply_n, 1);
	rm_setvals_free(&cmd);
	rm_setvals_free(&files);
}

static void test_settings_errors(void)
{
	char *bad1[] = { "prog", "--nope", NULL };
	char *bad2[] = { "prog", "--addr", NULL };
	char *bad3[] = { "prog", "extra", NULL };
	struct rm_setvals v = { 0 };
	char log[300];
	char *out;

	rm_test_capture_start("settings", log, sizeof(log));
	CU_ASSERT_EQUAL(rm_settings_argv(table, S_COUNT, 2, bad1, &v), RM_EINVAL);
	CU_ASSERT_EQUAL(rm_settings_argv(table, S_COUNT, 2, bad2, &v), RM_EINVAL);
	CU_ASSERT_EQUAL(rm_settings_argv(table, S_COUNT, 2, bad3, &v), RM_EINVAL);
	CU_ASSERT_EQUAL(rm_settings_key(table, S_COUNT, "f", 7, "p", "colour", "red", &v), RM_ECONFIG);
	CU_ASSERT_EQUAL(rm_settings_key(table, S_COUNT, "f", 8, "p", "config", "/x", &v), RM_ECONFIG);
	CU_ASSERT_EQUAL(rm_settings_key(table, S_COUNT, "f", 9, "p", "follow", "maybe", &v), RM_ECONFIG);
	out = rm_test_capture_end(log);
	CU_ASSERT_EQUAL(v.n, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "unknown option '--nope'"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "option '--addr' requires a value"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "unexpected argument 'extra'"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "f:7: unknown key 'colour' in [p]"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "f:8: unknown key 'config' in [p]"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "f:9: invalid follow 'maybe' (yes or no)"));
	free(out);
	rm_setvals_free(&v);
}

static void test_load_dropins(void)
{
	char path[300], dir[310], f[400];
	struct seen s = { .n = 0 };

	snprintf(path, sizeof(path), "%s/x.conf", rm_test_tmpdir());
	snprintf(dir, sizeof(dir), "%s.d", path);
	rm_test_write_file(path, "[m]\nk = main\n");
	CU_ASSERT_EQUAL(rm_conf_load(path, collect, &s), RM_OK);
	CU_ASSERT_EQUAL(s.n, 2);
	CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
	snprintf(f, sizeof(f), "%s/b.conf", dir);
	rm_test_write_file(f, "[m]\nk = b\n");
	snprintf(f, sizeof(f), "%s/a.conf", dir);
	rm_test_write_file(f, "[m]\nk = a\n");
	snprintf(f, sizeof(f), "%s/c.conf.dpkg-old", dir);
	rm_test_write_file(f, "[m]\nk = old\n");
	snprintf(f, sizeof(f), "%s/.hidden.conf", dir);
	rm_test_write_file(f, "[m]\nk = hidden\n");
	s.n = 0;
	CU_ASSERT_EQUAL(rm_conf_load(path, collect, &s), RM_OK);
	CU_ASSERT_EQUAL_FATAL(s.n, 6);
	CU_ASSERT_PTR_NOT_NULL(strstr(s.log[1], "x.conf:2 [m] k=main"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s.log[3], "a.conf:2 [m] k=a"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s.log[5], "b.conf:2 [m] k=b"));
}

static CU_TestInfo cases[] = {
	{ "sections, keys, comments, line numbers", test_parse },
	{ "malformed lines are reported with file:line", test_parse_errors },
	{ "files then command line; repeatable options replace", test_settings_merge },
	{ "apply: every value tried, refusals counted", test_settings_apply },
	{ "unknown options and keys are refused", test_settings_errors },
	{ "drop-ins: *.conf in byte order, others ignored", test_load_dropins },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("rm_conf", cases)
