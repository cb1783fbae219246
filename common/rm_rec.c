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

/* s's length, and whether it must be quoted as a CSV field, in one pass. */
static size_t rm_csv_scan(const char *s, int *quote)
{
	const char *p = s;

	*quote = 0;
	for (; *p; p++)
		if (*p == ',' || *p == '"' || (unsigned char)*p < 0x20)
			*quote = 1;
	return (size_t)(p - s);
}

/* v in decimal, backwards, ending just before end (21 bytes before it). */
static char *rm_i64(char *end, int64_t v)
{
	uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

	do {
		*--end = (char)('0' + (int)(a % 10));
		a /= 10;
	} while (a);
	if (v < 0)
		*--end = '-';
	return end;
}

/*
 * One CSV line of fl[0..n): the names, or the values. Built in a buffer
 * and written with one fwrite per line (a bill has a hundred thousand
 * lines of forty fields); a field too long for the buffer goes out
 * through rm_csv_str.
 */
static void rm_csv_line(FILE *f, const struct rm_field *fl, size_t n, int names)
{
	char buf[4096], num[24];
	size_t k = 0, i, l;
	int quote;

	for (i = 0; i < n; i++) {
		const char *s = names ? fl[i].name : fl[i].s;

		if (!s) {
			s = rm_i64(num + sizeof(num) - 1, fl[i].i);
			num[sizeof(num) - 1] = '\0';
		}
		l = rm_csv_scan(s, &quote);
		/* room for the separator, the field doubled and quoted, the line end */
		if (k + 2 * l + 4 > sizeof(buf)) {
			fwrite(buf, 1, k, f);
			k = 0;
			if (2 * l + 4 > sizeof(buf)) {
				if (i)
					fputc(',', f);
				rm_csv_str(f, s);
				continue;
			}
		}
		if (i)
			buf[k++] = ',';
		if (!quote) {
			memcpy(buf + k, s, l);
			k += l;
			continue;
		}
		buf[k++] = '"';
		for (; *s; s++) {
			if (*s == '"')
				buf[k++] = '"';
			buf[k++] = *s;
		}
		buf[k++] = '"';
	}
	buf[k++] = '\n';
	fwrite(buf, 1, k, f);
}

void rm_csv_header(FILE *f, const struct rm_field *fl, size_t n)
{
	rm_csv_line(f, fl, n, 1);
}

void rm_csv_row(FILE *f, const struct rm_field *fl, size_t n)
{
	rm_csv_line(f, fl, n, 0);
}
