/*
 * rm_rec_test.c - tests of the JSON and CSV writer: control characters,
 * quotes, backslashes, commas, line ends, non-ASCII and invalid UTF-8, as
 * string literals, CSV fields and whole records.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rm_rec.h"
#include "rm_test.h"
#include "banned.h"

struct esc_case {
	const char *in;
	const char *json; /* rm_json_str's output */
	const char *csv;  /* rm_csv_str's output */
};

static const struct esc_case esc_cases[] = {
	{ "", "\"\"", "" },
	{ "plain", "\"plain\"", "plain" },
	{ "with space", "\"with space\"", "with space" },
	{ "a,b", "\"a,b\"", "\"a,b\"" },
	{ "say \"hi\"", "\"say \\\"hi\\\"\"", "\"say \"\"hi\"\"\"" },
	{ "back\\slash", "\"back\\\\slash\"", "back\\slash" },
	{ "line\nend", "\"line\\u000aend\"", "\"line\nend\"" },
	{ "cr\r\n", "\"cr\\u000d\\u000a\"", "\"cr\r\n\"" },
	{ "tab\there", "\"tab\\u0009here\"", "\"tab\there\"" },
	{ "\x01\x1f", "\"\\u0001\\u001f\"", "\"\x01\x1f\"" },
	{ "del\x7f", "\"del\x7f\"", "del\x7f" },
	{ "caf\xc3\xa9", "\"caf\xc3\xa9\"", "caf\xc3\xa9" },                   /* é */
	{ "\xe2\x82\xac 5", "\"\xe2\x82\xac 5\"", "\xe2\x82\xac 5" },          /* € */
	{ "\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\"", "\xf0\x9f\x98\x80" },    /* U+1F600 */
	{ "\xe2\x80\xa8", "\"\xe2\x80\xa8\"", "\xe2\x80\xa8" },                /* U+2028 is valid JSON */
	{ "bad\xff", "\"bad\\ufffd\"", "bad\xff" },                            /* not UTF-8 */
	{ "cut\xc3", "\"cut\\ufffd\"", "cut\xc3" },                            /* truncated sequence */
	{ "\xc0\xaf", "\"\\ufffd\\ufffd\"", "\xc0\xaf" },                      /* overlong '/' */
	{ "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"", "\xed\xa0\x80" },      /* surrogate */
	{ "\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"", "\xf4\x90\x80\x80" }, /* > U+10FFFF */
	{ "\"", "\"\\\"\"", "\"\"\"\"" },
	{ ",", "\",\"", "\",\"" },
};

/* What fn wrote for s, in a malloc'ed string. */
static char *capture(void (*fn)(FILE *, const char *), const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fn(f, s);
	fclose(f);
	return buf;
}

/* Every case through fn, against the output of the kind (0 JSON, 1 CSV). */
static void check_escapes(void (*fn)(FILE *, const char *), int csv)
{
	size_t i;

	for (i = 0; i < sizeof(esc_cases) / sizeof(esc_cases[0]); i++) {
		const char *want = csv ? esc_cases[i].csv : esc_cases[i].json;
		char *out = capture(fn, esc_cases[i].in);

		if (strcmp(out, want) != 0)
			fprintf(stderr, "%s case %zu: got <%s>, want <%s>\n", csv ? "csv" : "json", i, out, want);
		CU_ASSERT_STRING_EQUAL(out, want);
		free(out);
	}
}

static void test_json_strings(void)
{
	check_escapes(rm_json_str, 0);
}

static void test_csv_fields(void)
{
	check_escapes(rm_csv_str, 1);
}

static void test_records(void)
{
	const struct rm_field fl[] = {
		RM_FIELD_STR("server", "s1"),
		RM_FIELD_STR("why", "cap, \"overload\"\n"),
		RM_FIELD_INT("value", -42),
		RM_FIELD_INT("big", INT64_MAX),
		RM_FIELD_STR("none", NULL),
	};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	rm_csv_header(f, fl, 5);
	rm_csv_row(f, fl, 5);
	rm_json_object(f, fl, 5);
	rm_json_object(f, fl, 0);
	fclose(f);
	CU_ASSERT_STRING_EQUAL(buf, "server,why,value,big,none\n"
				    "s1,\"cap, \"\"overload\"\"\n\",-42,9223372036854775807,\n"
				    "{\"server\": \"s1\", \"why\": \"cap, \\\"overload\\\"\\u000a\", \"value\": -42, "
				    "\"big\": 9223372036854775807, \"none\": \"\"}{}");
	free(buf);
}

/* Rows longer than the writer's line buffer, fields that fill it exactly or
 * overflow it, quoted or not, and INT64_MIN: the same bytes as the fields
 * written one by one through rm_csv_str. */
static void test_long_rows(void)
{
	static const size_t lens[] = { 0, 1, 200, 2045, 2046, 2047, 3000, 4093, 4096, 9000 };
	struct rm_field fl[64];
	char *strs[64], *got = NULL, *want = NULL;
	size_t glen = 0, wlen = 0, n = 0, i, j, q;
	FILE *g = open_memstream(&got, &glen), *w = open_memstream(&want, &wlen);

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_PTR_NOT_NULL_FATAL(w);
	for (q = 0; q < 2; q++) {
		for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			strs[n] = malloc(lens[i] + 1);
			CU_ASSERT_PTR_NOT_NULL_FATAL(strs[n]);
			for (j = 0; j < lens[i]; j++)
				strs[n][j] = q && j % 7 == 3 ? '"' : (char)('a' + (int)(j % 26));
			strs[n][lens[i]] = '\0';
			fl[n] = (struct rm_field)RM_FIELD_STR("s", strs[n]);
			n++;
		}
		fl[n++] = (struct rm_field)RM_FIELD_INT("i", INT64_MIN);
	}
	for (i = 0; i < 3; i++) /* three lines: the buffer starts over each line */
		rm_csv_row(g, fl, n);
	for (i = 0; i < 3; i++) {
		for (j = 0; j < n; j++) {
			if (j)
				fputc(',', w);
			if (fl[j].s)
				rm_csv_str(w, fl[j].s);
			else
				fprintf(w, "%" PRId64, fl[j].i);
		}
		fputc('\n', w);
	}
	fclose(g);
	fclose(w);
	CU_ASSERT_EQUAL(glen, wlen);
	CU_ASSERT(glen == wlen && memcmp(got, want, glen) == 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(got, ",-9223372036854775808,"));
	for (i = 0; i < n; i++)
		if (fl[i].s)
			free(strs[i]);
	free(got);
	free(want);
}

static CU_TestInfo cases[] = {
	{ "json string escaping", test_json_strings },
	{ "csv field quoting", test_csv_fields },
	{ "records as csv and json", test_records },
	{ "csv rows longer than the line buffer", test_long_rows },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("rm_rec", cases)
