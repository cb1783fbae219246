/*
 * ctl_out.c - rametrctl's output: the aligned table (with amounts in
 * core-hours ... core-ms or B ... PiB and shares in percent), JSON and CSV records (raw
 * integers; escaping in rm_rec.h), for the usage, unaccountable, splits and
 * check commands. Owns the small table buffer used to align columns.
 */
#include <stdlib.h>
#include <string.h>

#include "ctl_out.h"
#include "ctl_time.h"
#include "rm_err.h"
#include "rm_rec.h"
#include "banned.h"


int ctl_fmt_parse(const char *s, enum ctl_fmt *out)
{
	if (!s || !out)
		return RM_EINVAL;
	if (strcmp(s, "table") == 0)
		*out = CTL_FMT_TABLE;
	else if (strcmp(s, "json") == 0)
		*out = CTL_FMT_JSON;
	else if (strcmp(s, "csv") == 0)
		*out = CTL_FMT_CSV;
	else
		return RM_EINVAL;
	return RM_OK;
}

static uint64_t ctl_abs(int64_t v)
{
	return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

char *ctl_fixed(char *end, unsigned __int128 q, int dec)
{
	uint64_t q64;
	int k = 0;

	/* the digits beyond 64 bits (a quotient over 1.8e19: never in practice) */
	while (q > UINT64_MAX) {
		*--end = (char)('0' + (int)(q % 10));
		q /= 10;
		if (++k == dec)
			*--end = '.';
	}
	q64 = (uint64_t)q;
	do {
		*--end = (char)('0' + (int)(q64 % 10));
		q64 /= 10;
		if (++k == dec)
			*--end = '.';
	} while (q64 || k <= dec);
	return end;
}

void ctl_copy(char *dst, size_t len, const char *src)
{
	size_t l;

	if (!len)
		return;
	l = strnlen(src, len - 1);
	memcpy(dst, src, l);
	dst[l] = '\0';
}

char *ctl_fmt_share(int64_t v, uint64_t total, char *buf, size_t len)
{
	char t[64], *p = t + sizeof(t) - 1;
	unsigned __int128 h;

	if (total == 0) {
		ctl_copy(buf, len, "-");
		return buf;
	}
	/* hundredths of a percent: round(|v| * 10000 / total); by hand, not
	 * printf: a table may have a hundred thousand rows */
	h = ((unsigned __int128)ctl_abs(v) * 20000 + total) / ((unsigned __int128)total * 2);
	*p = '\0';
	*--p = '%';
	p = ctl_fixed(p, h, 2);
	if (v < 0 && h)
		*--p = '-';
	ctl_copy(buf, len, p);
	return buf;
}

/* v / div (div > 0) with 2 decimals, or with as many more (up to 12) as
 * three significant digits need when |v| / div < 1: 0.000123 cores rather
 * than 0.00. Rounded half away from zero, exact (integers); formatted by
 * hand, not printf (a table may have a hundred thousand rows). */
static void ctl_dec(char *buf, size_t len, int64_t v, unsigned __int128 div, const char *unit)
{
	unsigned __int128 a = v < 0 ? (unsigned __int128)(-(v + 1)) + 1 : (unsigned __int128)v;
	unsigned __int128 p = 100, c;
	char t[128], *e = t + sizeof(t) - 1 - strnlen(unit, 63);
	int d = 2, neg;

	while (a && d < 12 && a * p < div * 100) {
		p *= 10;
		d++;
	}
	c = (a * p * 2 + div) / (div * 2);
	neg = v < 0 && c != 0; /* "-" unless it rounds to zero */
	memcpy(e, unit, strnlen(unit, 63) + 1);
	*--e = ' ';
	e = ctl_fixed(e, c, d);
	if (neg)
		*--e = '-';
	ctl_copy(buf, len, e);
}

/* Bytes (per second when per > 1) in B, KiB, ... TiB, PiB. */
static void ctl_bytes(char *buf, size_t len, int64_t v, uint64_t per, const char *suffix)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	uint64_t a = (v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v) / per;
	unsigned __int128 div = 1024;
	char u[16];
	size_t i = 0;

	if (a < 1024) {
		if (per == 1) {
			snprintf(buf, len, "%lld B", (long long)v);
		} else {
			ctl_copy(u, sizeof(u), "B");
			ctl_copy(u + 1, sizeof(u) - 1, suffix);
			ctl_dec(buf, len, v, per, u);
		}
		return;
	}
	while (i + 1 < sizeof(units) / sizeof(units[0]) && a >= div * 1024) {
		div *= 1024;
		i++;
	}
	ctl_copy(u, sizeof(u), units[i]);
	ctl_copy(u + 3, sizeof(u) - 3, suffix);
	ctl_dec(buf, len, v, div * per, u);
}

char *ctl_human_amount(enum st_resource r, int64_t v, char *buf, size_t len)
{
	/* cpu in the largest of core-h, core-min, core-s, core-ms that is at
	 * least 1 (0 in core-h) */
	static const struct {
		uint64_t ns;
		const char *unit;
	} cpu[] = { { 3600000000000ULL, "core-h" }, { 60000000000ULL, "core-min" },
		    { 1000000000ULL, "core-s" }, { 1000000ULL, "core-ms" } };
	uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	size_t i = 0;

	if (r != ST_R_CPU) {
		ctl_bytes(buf, len, v, 1, "");
		return buf;
	}
	while (a && a < cpu[i].ns && i + 1 < sizeof(cpu) / sizeof(cpu[0]))
		i++;
	ctl_dec(buf, len, v, cpu[i].ns, cpu[i].unit);
	return buf;
}

char *ctl_human_rate(enum st_resource r, int64_t v, int64_t period_ns, char *buf, size_t len)
{
	if (period_ns <= 0)
		snprintf(buf, len, "-");
	else if (r == ST_R_CPU)
		ctl_dec(buf, len, v, (unsigned __int128)period_ns, "cores");
	else if (period_ns < 1000000000LL)
		snprintf(buf, len, "-");
	else
		ctl_bytes(buf, len, v, (uint64_t)(period_ns / 1000000000LL), "/s");
	return buf;
}

int64_t ctl_row_amount(const struct st_row *row)
{
	if (strcmp(row->ce, ST_CE_UNACCOUNTABLE) == 0 ||
	    strcmp(row->reason, ST_REASON_UNEXPLAINED) == 0)
		return row->residual;
	return row->value > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)row->value;
}

/* ---- aligned tables ---- */

char (*ctl_table_row(struct ctl_table *t))[CTL_CELL]
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		void *c = realloc(t->cells, cap * sizeof(*t->cells));

		if (!c)
			return NULL;
		t->cells = c;
		t->cap = cap;
	}
	memset(t->cells[t->n], 0, sizeof(t->cells[0]));
	return t->cells[t->n++];
}

static void ctl_table_line(FILE *f, const struct ctl_table *t, const size_t *w,
			   const char *const *cells)
{
	size_t c;

	for (c = 0; c < t->ncol; c++) {
		const char *sep = c ? "  " : "";

		if (t->right[c])
			fprintf(f, "%s%*s", sep, (int)w[c], cells[c]);
		else if (c + 1 == t->ncol)
			fprintf(f, "%s%s", sep, cells[c]);
		else
			fprintf(f, "%s%-*s", sep, (int)w[c], cells[c]);
	}
	fputc('\n', f);
}

void ctl_table_print(FILE *f, const struct ctl_table *t)
{
	size_t w[CTL_MAXCOL] = { 0 }, r, c;
	const char *cells[CTL_MAXCOL];

	for (c = 0; c < t->ncol; c++)
		w[c] = strlen(t->head[c]);
	for (r = 0; r < t->n; r++)
		for (c = 0; c < t->ncol; c++)
			if (strlen(t->cells[r][c]) > w[c])
				w[c] = strlen(t->cells[r][c]);
	ctl_table_line(f, t, w, t->head);
	for (r = 0; r < t->n; r++) {
		for (c = 0; c < t->ncol; c++)
			cells[c] = t->cells[r][c];
		ctl_table_line(f, t, w, cells);
	}
}

/* ---- JSON and CSV records ---- */

void ctl_record(FILE *f, enum ctl_fmt fmt, const struct rm_field *fl, size_t nf, int first)
{
	if (fmt == CTL_FMT_JSON) {
		fputs(first ? "\n  " : ",\n  ", f);
		rm_json_object(f, fl, nf);
	} else {
		rm_csv_row(f, fl, nf);
	}
}

/* Fields of one row: kind 'u' (usage) or 'v' (unaccountable breakdown);
 * source (JSON only) labels estimates. */
static size_t ctl_fields(const struct st_row *r, int kind, int per_window, const char *source,
			 struct rm_field *fl)
{
	size_t n = 0;

	fl[n++] = (struct rm_field){ "server", r->server, 0 };
	if (kind == 'u')
		fl[n++] = (struct rm_field){ "ce", r->ce, 0 };
	fl[n++] = (struct rm_field){ "resource", st_resource_name(r->resource), 0 };
	if (kind == 'v')
		fl[n++] = (struct rm_field){ "reason", r->reason, 0 };
	fl[n++] = (struct rm_field){ "value", NULL, ctl_row_amount(r) };
	fl[n++] = (struct rm_field){ "total", NULL,
				      r->total > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)r->total };
	fl[n++] = (struct rm_field){ "unit", st_resource_unit(r->resource), 0 };
	if (per_window) {
		fl[n++] = (struct rm_field){ "window_start", NULL, r->win_start_ns };
		fl[n++] = (struct rm_field){ "window_len", NULL, r->win_len_ns };
	}
	if (source)
		fl[n++] = (struct rm_field){ "source", source, 0 };
	return n;
}

static int ctl_records(FILE *f, enum ctl_fmt fmt, const struct st_row *rows, size_t n, int kind,
		       int per_window, int show_v, const char *source)
{
	struct rm_field fl[CTL_MAXCOL + 2];
	struct st_row dummy = { .resource = ST_R_CPU };
	size_t nf, i;
	int first = 1;

	if (fmt == CTL_FMT_CSV) {
		nf = ctl_fields(&dummy, kind, per_window, NULL, fl); /* CSV columns never change */
		rm_csv_header(f, fl, nf);
	} else {
		fputc('[', f);
	}
	for (i = 0; i < n; i++) {
		if (!show_v && strcmp(rows[i].ce, ST_CE_UNACCOUNTABLE) == 0)
			continue;
		nf = ctl_fields(&rows[i], kind, per_window, fmt == CTL_FMT_JSON ? source : NULL, fl);
		ctl_record(f, fmt, fl, nf, first);
		first = 0;
	}
	if (fmt == CTL_FMT_JSON)
		fputs(first ? "]\n" : "\n]\n", f);
	return RM_OK;
}

int ctl_flush(FILE *f)
{
	if (fflush(f) != 0 || ferror(f))
		return RM_EIO;
	return RM_OK;
}

int ctl_print_usage(FILE *f, enum ctl_fmt fmt, const struct st_row *rows, size_t n,
		    int per_window, int show_v)
{
	return ctl_print_usage_src(f, fmt, rows, n, per_window, show_v, NULL);
}

int ctl_print_usage_src(FILE *f, enum ctl_fmt fmt, const struct st_row *rows, size_t n,
			int per_window, int show_v, const char *source)
{
	struct ctl_table t = { .ncol = 0 };
	char(*c)[CTL_CELL];
	size_t i, k;

	if (fmt != CTL_FMT_TABLE) {
		ctl_records(f, fmt, rows, n, 'u', per_window, show_v, source);
		return ctl_flush(f);
	}
	if (source)
		fprintf(f, "ESTIMATES by %s from aggregate data (not measured)\n", source);
	t.head[t.ncol++] = "SERVER";
	t.head[t.ncol++] = "CE";
	t.head[t.ncol++] = "RESOURCE";
	if (per_window)
		t.head[t.ncol++] = "WINDOW";
	t.right[t.ncol] = 1;
	t.head[t.ncol++] = "AMOUNT";
	t.right[t.ncol] = 1;
	t.head[t.ncol++] = "SHARE";
	for (i = 0; i < n; i++) {
		const struct st_row *r = &rows[i];
		int64_t v = ctl_row_amount(r);

		if (!show_v && strcmp(r->ce, ST_CE_UNACCOUNTABLE) == 0)
			continue;
		if (!(c = ctl_table_row(&t))) {
			free(t.cells);
			return RM_ENOMEM;
		}
		k = 0;
		snprintf(c[k++], CTL_CELL, "%s", r->server);
		snprintf(c[k++], CTL_CELL, "%s", r->ce);
		snprintf(c[k++], CTL_CELL, "%s", st_resource_name(r->resource));
		if (per_window)
			ctl_time_format(r->win_start_ns, c[k++], CTL_CELL);
		ctl_human_amount(r->resource, v, c[k++], CTL_CELL);
		ctl_fmt_share(v, r->total, c[k++], CTL_CELL);
	}
	if (t.n)
		ctl_table_print(f, &t);
	else
		fprintf(f, "no %s in the selected range\n", source ? "estimates stored" : "usage recorded");
	free(t.cells);
	return ctl_flush(f);
}

int ctl_print_unacct(FILE *f, enum ctl_fmt fmt, const struct st_row *rows, size_t n,
		     int per_window)
{
	struct ctl_table t = { .ncol = 0 };
	char(*c)[CTL_CELL];
	size_t i, k;

	if (fmt != CTL_FMT_TABLE) {
		ctl_records(f, fmt, rows, n, 'v', per_window, 1, NULL);
		return ctl_flush(f);
	}
	t.head[t.ncol++] = "SERVER";
	t.head[t.ncol++] = "RESOURCE";
	if (per_window)
		t.head[t.ncol++] = "WINDOW";
	t.head[t.ncol++] = "REASON";
	t.right[t.ncol] = 1;
	t.head[t.ncol++] = "AMOUNT";
	t.right[t.ncol] = 1;
	t.head[t.ncol++] = "SHARE";
	for (i = 0; i < n; i++) {
		const struct st_row *r = &rows[i];
		int64_t v = ctl_row_amount(r);

		if (!(c = ctl_table_row(&t))) {
			free(t.cells);
			return RM_ENOMEM;
		}
		k = 0;
		snprintf(c[k++], CTL_CELL, "%s", r->server);
		snprintf(c[k++], CTL_CELL, "%s", st_resource_name(r->resource));
		if (per_window)
			ctl_time_format(r->win_start_ns, c[k++], CTL_CELL);
		snprintf(c[k++], CTL_CELL, "%s", r->reason);
		ctl_human_amount(r->resource, v, c[k++], CTL_CELL);
		ctl_fmt_share(v, r->total, c[k++], CTL_CELL);
	}
	if (t.n)
		ctl_table_print(f, &t);
	else
		fprintf(f, "no unaccountable usage in the selected range\n");
	free(t.cells);
	return ctl_flush(f);
}

int ctl_print_splits(FILE *f, enum ctl_fmt fmt, const struct st_row *rows, size_t n, int per_window)
{
	struct ctl_table t = { .ncol = 0 };
	struct rm_field fl[4];
	char(*c)[CTL_CELL];
	size_t i, k, nf;

	if (fmt != CTL_FMT_TABLE) {
		if (fmt == CTL_FMT_CSV)
			fprintf(f, "server,split_parts%s\n", per_window ? ",window_start,window_len" : "");
		else
			fputc('[', f);
		for (i = 0; i < n; i++) {
			nf = 0;
			fl[nf++] = (struct rm_field){ "server", rows[i].server, 0 };
			fl[nf++] = (struct rm_field){ "split_parts", NULL,
						       rows[i].value > (uint64_t)INT64_MAX ? INT64_MAX
											 : (int64_t)rows[i].value };
			if (per_window) {
				fl[nf++] = (struct rm_field){ "window_start", NULL, rows[i].win_start_ns };
				fl[nf++] = (struct rm_field){ "window_len", NULL, rows[i].win_len_ns };
			}
			ctl_record(f, fmt, fl, nf, i == 0);
		}
		if (fmt == CTL_FMT_JSON)
			fputs(n ? "\n]\n" : "]\n", f);
		return ctl_flush(f);
	}
	t.head[t.ncol++] = "SERVER";
	if (per_window)
		t.head[t.ncol++] = "WINDOW";
	t.right[t.ncol] = 1;
	t.head[t.ncol++] = "SPLIT_PARTS";
	for (i = 0; i < n; i++) {
		if (!(c = ctl_table_row(&t))) {
			free(t.cells);
			return RM_ENOMEM;
		}
		k = 0;
		snprintf(c[k++], CTL_CELL, "%s", rows[i].server);
		if (per_window)
			ctl_time_format(rows[i].win_start_ns, c[k++], CTL_CELL);
		snprintf(c[k++], CTL_CELL, "%llu", (unsigned long long)rows[i].value);
	}
	if (t.n)
		ctl_table_print(f, &t);
	else
		fprintf(f, "no split parts in the selected range\n");
	free(t.cells);
	return ctl_flush(f);
}

int ctl_print_identity(FILE *f, const struct st_row *rows, size_t n)
{
	static const char *const head[] = { "SERVER", "RESOURCE", "WINDOW", "TOTAL",
					    "ATTRIBUTED", "EXPLAINED", "RESIDUAL", "UNIT" };
	struct ctl_table t = { .ncol = 8 };
	char(*c)[CTL_CELL];
	size_t i;

	for (i = 0; i < t.ncol; i++) {
		t.head[i] = head[i];
		t.right[i] = i >= 3 && i <= 6;
	}
	for (i = 0; i < n; i++) {
		const struct st_row *r = &rows[i];
		/* residual = U - sum U_c - sum reasons, so reasons = U - sum U_c - residual;
		 * computed in 128 bits since the parts may be near the int64 limits */
		__int128 explained = (__int128)r->total - (__int128)r->value - r->residual;

		if (!(c = ctl_table_row(&t))) {
			free(t.cells);
			return RM_ENOMEM;
		}
		snprintf(c[0], CTL_CELL, "%s", r->server);
		snprintf(c[1], CTL_CELL, "%s", st_resource_name(r->resource));
		ctl_time_format(r->win_start_ns, c[2], CTL_CELL);
		snprintf(c[3], CTL_CELL, "%llu", (unsigned long long)r->total);
		snprintf(c[4], CTL_CELL, "%llu", (unsigned long long)r->value);
		snprintf(c[5], CTL_CELL, "%lld", (long long)explained);
		snprintf(c[6], CTL_CELL, "%lld", (long long)r->residual);
		snprintf(c[7], CTL_CELL, "%s", st_resource_unit(r->resource));
	}
	ctl_table_print(f, &t);
	free(t.cells);
	return ctl_flush(f);
}
