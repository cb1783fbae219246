/*
 * ctl_out.h - how rametrctl prints query results: aligned tables for
 * people, JSON and CSV with raw integers for programs. Functions write to
 * the given stream only; thread-safe as far as the stream is.
 */
#ifndef RM_CTL_OUT_H
#define RM_CTL_OUT_H

#include <stdint.h>
#include <stdio.h>

#include "rm_rec.h"
#include "st.h"

enum ctl_fmt { CTL_FMT_TABLE, CTL_FMT_JSON, CTL_FMT_CSV };

/* An aligned table: set ncol, head[] and right[] (right-aligned columns),
 * add rows with ctl_table_row, print, then free(cells). */
#define CTL_MAXCOL 8
#define CTL_CELL 96
struct ctl_table {
	size_t ncol;
	const char *head[CTL_MAXCOL];
	int right[CTL_MAXCOL];
	char (*cells)[CTL_MAXCOL][CTL_CELL];
	size_t n, cap;
};

/* Appends a row; returns its cells (zeroed) or NULL when out of memory. */
char (*ctl_table_row(struct ctl_table *t))[CTL_CELL];

/* Prints the header and the rows, columns padded to their widest cell. */
void ctl_table_print(FILE *f, const struct ctl_table *t);

/* Prints one record: a JSON object (after "[" and with a leading ",\n"
 * unless first) or a CSV line (values only; print the header yourself). */
void ctl_record(FILE *f, enum ctl_fmt fmt, const struct rm_field *fl, size_t nf, int first);

/* fflush + ferror: RM_OK or RM_EIO. */
int ctl_flush(FILE *f);

/* "table", "json", "csv" -> *out: RM_OK or RM_EINVAL (logs nothing). */
int ctl_fmt_parse(const char *s, enum ctl_fmt *out);

/* Human amounts: cpu ns in the largest of core-h, core-min, core-s and
 * core-ms that is at least 1 ("12.35 core-h", "1.73 core-s"; 0 in core-h)
 * and per second of the period as cores ("0.51 cores"); bytes as B (an
 * integer), KiB, MiB, GiB, TiB, PiB and per second ("1.20 MiB/s"). Two
 * decimals, or below 1 in the unit as many as three significant digits
 * need (at most 12: "0.000481 cores", "0.0347 B/s"); exact, rounded half
 * away from zero. period_ns 0: rate "-". Returns buf. */
char *ctl_human_amount(enum st_resource r, int64_t v, char *buf, size_t len);
char *ctl_human_rate(enum st_resource r, int64_t v, int64_t period_ns, char *buf, size_t len);

/* Writes the rounded quotient q as a fixed-point decimal with dec (0..30)
 * fraction digits ("12.345000" for q = 12345000, dec 6; at least one digit
 * before the point), backwards, ending just before end: the caller
 * provides dec + 41 bytes before end and terminates the string. Returns
 * the first character. No printf and no 128-bit division per digit: tables
 * and bills format hundreds of thousands of amounts. */
char *ctl_fixed(char *end, unsigned __int128 q, int dec);

/* src copied into dst (len bytes), cut at len - 1 bytes; nothing if len is 0. */
void ctl_copy(char *dst, size_t len, const char *src);

/* v / total as a percentage with 2 decimals ("12.34%", rounded half away
 * from zero; negative v gives a negative share), or "-" when total is 0.
 * Returns buf. */
char *ctl_fmt_share(int64_t v, uint64_t total, char *buf, size_t len);

/* The signed amount a row stands for: residual for the computed rows
 * (ST_CE_UNACCOUNTABLE in usage, ST_REASON_UNEXPLAINED in the breakdown),
 * value otherwise. */
int64_t ctl_row_amount(const struct st_row *row);

/*
 * Prints st_query_usage() rows. Table columns SERVER CE RESOURCE [WINDOW]
 * AMOUNT (ctl_human_amount) SHARE; JSON objects server, ce, resource, value, total, unit
 * [, window_start, window_len]; CSV the same fields with a header line.
 * show_v = 0 leaves out the ST_CE_UNACCOUNTABLE rows. Returns RM_OK or
 * RM_EIO (write error) / RM_ENOMEM.
 */
int ctl_print_usage(FILE *f, enum ctl_fmt fmt, const struct st_row *rows, size_t n,
		    int per_window, int show_v);

/*
 * As ctl_print_usage, for rows of source (NULL = measured; else the name
 * of the estimator, e.g. "lr", for st_query_est() rows): the table gets a
 * first line "ESTIMATES by <source> from aggregate data (not measured)",
 * JSON objects a last field "source"; CSV columns stay exactly the same.
 */
int ctl_print_usage_src(FILE *f, enum ctl_fmt fmt, const struct st_row *rows, size_t n,
			int per_window, int show_v, const char *source);

/* Prints st_query_unacct() rows: SERVER RESOURCE [WINDOW] REASON AMOUNT SHARE
 * (share of the total U); JSON/CSV fields server, resource, reason, value,
 * total, unit [, window_start, window_len]. Returns as ctl_print_usage. */
int ctl_print_unacct(FILE *f, enum ctl_fmt fmt, const struct st_row *rows, size_t n,
		     int per_window);

/* Prints st_query_splits() rows: SERVER [WINDOW] SPLIT_PARTS; JSON/CSV
 * fields server, split_parts [, window_start, window_len]. Returns as
 * ctl_print_usage. */
int ctl_print_splits(FILE *f, enum ctl_fmt fmt, const struct st_row *rows, size_t n, int per_window);

/* Prints st_query_identity() rows as a table of raw integers: SERVER
 * RESOURCE WINDOW TOTAL ATTRIBUTED EXPLAINED RESIDUAL UNIT, where
 * ATTRIBUTED = sum U_c and EXPLAINED = sum of the stored reasons. */
int ctl_print_identity(FILE *f, const struct st_row *rows, size_t n);

#endif
