/*
 * rm_rec.c - the JSON and CSV escaping and record writing of rm_rec.h.
 */
#include <inttypes.h>
#include <string.h>

#include "rm_rec.h"
#include "banned.h"

/*
 * Length of the valid UTF-8 sequence at s (1..4), or 0 if the byte at s does
 * not start one (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF).
 */
static size_t rm_utf8_len(const unsigned char *s)
{
	size_t n, i;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void rm_json_str(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str, *run;
	size_t n;

	fputc('"', f);
	while (*s) {
		/* the longest run that goes out as it is, in one write */
		for (run = s; *s && *s != '"' && *s != '\\' && *s >= 0x20; s += n)
			if ((n = rm_utf8_len(s)) == 0)
				break;
		if (s > run)
			fwrite(run, 1, (size_t)(s - run), f);
		if (!*s)
			break;
		if (*s == '"' || *s == '\\') {
			fputc('\\', f);
			fputc(*s++, f);
		} else if (*s < 0x20) {
			fprintf(f, "\\u%04x", *s++);
		} else {
			fputs("\\ufffd", f); /* a byte that starts no valid UTF-8 sequence */
			s++;
		}
	}
	fputc('"', f);
}

static int rm_csv_needs_quotes(const char *s)
{
	for (; *s; s++)
		if (*s == ',' || *s == '"' || (unsigned char)*s < 0x20)
			return 1;
	return 0;
}

void rm_csv_str(FILE *f, const char *s)
{
	if (!rm_csv_needs_quotes(s)) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	while (*s) {
		size_t n = strcspn(s, "\"");

		fwrite(s, 1, n, f);
		s += n;
		if (*s) {
			fputs("\"\"", f);
			s++;
		}
	}
	fputc('"', f);
}

void rm_json_object(FILE *f, const struct rm_field *fl, size_t n)
{
	size_t i;

	fputc('{', f);
	for (i = 0; i < n; i++) {
		if (i)
			fputs(", ", f);
		rm_json_str(f, fl[i].name);
		fputs(": ", f);
		if (fl[i].s)
			rm_json_str(f, fl[i].s);
		else
			fprintf(f, "%" PRId64, fl[i].i);
	}
	fputc('}', f);
}

/* One CSV line of fl[0..n): the names, or the values. */
static void rm_csv_line(FILE *f, const struct rm_field *fl, size_t n, int names)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		if (names || fl[i].s)
			rm_csv_str(f, names ? fl[i].name : fl[i].s);
		else
			fprintf(f, "%" PRId64, fl[i].i);
	}
	fputc('\n', f);
}

void rm_csv_header(FILE *f, const struct rm_field *fl, size_t n)
{
	rm_csv_line(f, fl, n, 1);
}

void rm_csv_row(FILE *f, const struct rm_field *fl, size_t n)
{
	rm_csv_line(f, fl, n, 0);
}
