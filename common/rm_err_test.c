/*
 * rm_err_test.c - the logger's line format (priority prefix, UTC time unless
 * stderr is the journal), its levels, and the level names.
 */
#include <regex.h>
#include <sys/stat.h>

#include "rm_err.h"
#include "rm_test.h"

static int matches(const char *text, const char *re)
{
	regex_t r;
	int ok;

	CU_ASSERT_EQUAL_FATAL(regcomp(&r, re, REG_EXTENDED | REG_NEWLINE | REG_NOSUB), 0);
	ok = regexec(&r, text, 0, NULL, 0) == 0;
	regfree(&r);
	return ok;
}

static void test_format_and_levels(void)
{
	char path[300];
	char *t;

	unsetenv("JOURNAL_STREAM");
	rm_log_init("rm-test");
	rm_log_set_level(RM_LOG_INFO);
	rm_test_capture_start("fmt", path, sizeof(path));
	rm_log_error("failed to open '%s'", "x");
	rm_log_warn("w%d", 1);
	rm_log_info("hello");
	rm_log_debug("hidden");
	t = rm_test_capture_end(path);
	CU_ASSERT(matches(t, "^<3>20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
			     "rm-test: error: failed to open 'x'$"));
	CU_ASSERT(matches(t, "^<4>[-0-9T:.]+Z rm-test: warning: w1$"));
	CU_ASSERT(matches(t, "^<6>[-0-9T:.]+Z rm-test: hello$"));
	CU_ASSERT(strstr(t, "hidden") == NULL);
	free(t);

	rm_log_set_level(RM_LOG_WARNING);
	rm_test_capture_start("warn", path, sizeof(path));
	rm_log_info("info-hidden");
	rm_log_warn("shown");
	t = rm_test_capture_end(path);
	CU_ASSERT(strstr(t, "info-hidden") == NULL);
	CU_ASSERT(strstr(t, "shown") != NULL);
	free(t);

	rm_log_set_verbose(1);
	CU_ASSERT_EQUAL(rm_log_get_level(), RM_LOG_DEBUG);
	rm_test_capture_start("debug", path, sizeof(path));
	rm_log_debug("dbg");
	t = rm_test_capture_end(path);
	CU_ASSERT(matches(t, "^<7>[-0-9T:.]+Z rm-test: debug: dbg$"));
	free(t);
	rm_log_set_level(RM_LOG_INFO);
}

/* Under journald (JOURNAL_STREAM = stderr's device:inode) no time is written. */
static void test_journal_no_time(void)
{
	char path[300], js[64];
	struct stat st;
	char *t;

	rm_test_capture_start("journal", path, sizeof(path));
	CU_ASSERT_EQUAL_FATAL(fstat(2, &st), 0);
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", js, 1);
	rm_log_init("rm-test");
	rm_log_info("in the journal");
	/* a JOURNAL_STREAM naming another file (a redirected child) does not count */
	setenv("JOURNAL_STREAM", "1:1", 1);
	rm_log_init("rm-test");
	rm_log_info("redirected");
	t = rm_test_capture_end(path);
	CU_ASSERT(matches(t, "^<6>rm-test: in the journal$"));
	CU_ASSERT(matches(t, "^<6>[-0-9T:.]+Z rm-test: redirected$"));
	free(t);
	unsetenv("JOURNAL_STREAM");
	rm_log_init("rm-test");
}

static void test_level_names(void)
{
	enum rm_log_level l;

	CU_ASSERT_EQUAL(rm_log_parse_level("debug", &l), RM_OK);
	CU_ASSERT_EQUAL(l, RM_LOG_DEBUG);
	CU_ASSERT_EQUAL(rm_log_parse_level("warn", &l), RM_OK);
	CU_ASSERT_EQUAL(l, RM_LOG_WARNING);
	CU_ASSERT_EQUAL(rm_log_parse_level("error", &l), RM_OK);
	CU_ASSERT_EQUAL(l, RM_LOG_ERR);
	CU_ASSERT_EQUAL(rm_log_parse_level("loud", &l), RM_EINVAL);
	CU_ASSERT_EQUAL(rm_log_parse_level(NULL, &l), RM_EINVAL);
	CU_ASSERT_STRING_EQUAL(rm_log_level_name(RM_LOG_INFO), "info");
	CU_ASSERT_STRING_EQUAL(rm_log_level_name(RM_LOG_WARNING), "warning");
}

static CU_TestInfo cases[] = {
	{ "lines carry a priority prefix, a UTC time and the level", test_format_and_levels },
	{ "under journald lines carry no time", test_journal_no_time },
	{ "level names parse both ways", test_level_names },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("rm_err", cases)
