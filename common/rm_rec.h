/*
 * rm_rec.h - records for programs: the one JSON (RFC 8259) and CSV
 * (RFC 4180) writer of Rametr, with the escaping rules in one place, for
 * every command that prints machine-readable output.
 *
 * A record is an array of fields, each a name and either a string or a
 * signed 64-bit integer. Callers frame their own output (a JSON array of
 * objects, a CSV header then rows):
 *
 *   struct rm_field fl[] = { RM_FIELD_STR("ce", ce), RM_FIELD_INT("value", v) };
 *   rm_csv_header(f, fl, 2);        // ce,value
 *   rm_csv_row(f, fl, 2);           // web,42
 *   rm_json_object(f, fl, 2);       // {"ce": "web", "value": 42}
 *
 * Strings (names and values) are NUL-terminated UTF-8:
 *   JSON: '"' and '\' are escaped with a backslash, bytes 0x00-0x1f as
 *         \u00XX; valid UTF-8 (non-ASCII included) is written as is; a byte
 *         that is not part of a valid UTF-8 sequence is written as \ufffd, so
 *         the output is always valid JSON.
 *   CSV:  a field is written as is unless it holds a comma, a '"', CR, LF or
 *         another byte below 0x20; then it is enclosed in '"' with every '"'
 *         doubled. Bytes are never changed otherwise. Rows end in "\n".
 * Integers are written in decimal.
 *
 * Functions write to f only and report nothing: check ferror(f) / fflush(f)
 * after the last record. Thread-safe as far as the stream is.
 */
#ifndef RM_REC_H
#define RM_REC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One field: a string value (s != NULL) or an integer value (s == NULL). */
struct rm_field {
	const char *name;
	const char *s;
	int64_t i;
};

/* A string field (NULL written as ""), an integer field. */
#define RM_FIELD_STR(n, v) ((struct rm_field){ (n), (v) ? (v) : "", 0 })
#define RM_FIELD_INT(n, v) ((struct rm_field){ (n), NULL, (int64_t)(v) })

/* Writes s as a JSON string literal, quotes included. */
void rm_json_str(FILE *f, const char *s);

/* Writes s as one CSV field (quoted only when it must be). */
void rm_csv_str(FILE *f, const char *s);

/* Writes fl[0..n) as one JSON object, {"name": value, ...}, on one line,
 * without a line end. */
void rm_json_object(FILE *f, const struct rm_field *fl, size_t n);

/* Writes the names of fl[0..n) as a CSV header line. */
void rm_csv_header(FILE *f, const struct rm_field *fl, size_t n);

/* Writes the values of fl[0..n) as a CSV line. */
void rm_csv_row(FILE *f, const struct rm_field *fl, size_t n);

#endif
