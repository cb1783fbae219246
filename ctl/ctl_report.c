/*
 * ctl_report.c - the pure part of 'rametrctl report': collects query rows
 * into per-server, per-tenant amounts and chart buckets, and writes them as
 * one self-contained HTML document (see ctl_report.h). Owns the document's
 * layout, its units for people and the text that explains each figure.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_report.h"
#include "rm_err.h"
#include "banned.h"

#define RP_NAME 64
#define RP_GROUPS 3 /* charts per server: cpu, network, disk */

struct rp_why {
	size_t s;
	char reason[32];
	int64_t v[ST_R_COUNT];
};

struct ctl_report {
	struct ctl_report_period p;
	size_t ns, nt;      /* servers; tenants (V and U are kept as tenants nt and nt + 1) */
	char (*srv)[RP_NAME];
	char (*ten)[RP_NAME]; /* by usage over all servers, largest first */
	size_t *ten_by_name;  /* indexes of ten sorted by name, for lookups */
	int64_t *cur, *prev;  /* [s 0..ns][k 0..nt+1][resource]; s == ns is all servers */
	unsigned char *present; /* [s 0..ns][k 0..nt+1] */
	struct rp_why *why;
	size_t nwhy;
	size_t ntop, nl;    /* tenants with their own layer; layers (+ other + V) */
	int other;          /* a layer "other tenants" exists */
	uint64_t *chart;    /* [s][group][layer][bucket] */
	uint64_t *cap;      /* [s][bucket]: CPU capacity (ns) */
};

static const char *const rp_palette[CTL_REPORT_TOP] = {
	"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
};
#define RP_COLOR_OTHER "#9c755f"
#define RP_COLOR_V "#b4b4b4"

/* ---- periods and buckets ---- */

int64_t ctl_report_bucket_ns(int64_t span_ns, int64_t min_ns, size_t max_points)
{
	static const int64_t steps_s[] = { 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600,
					   7200, 10800, 21600, 43200, 86400, 172800, 604800,
					   1209600, 2419200 };
	const int64_t s = 1000000000LL;
	size_t i;
	int64_t b;

	if (span_ns <= 0 || max_points == 0)
		return s;
	for (i = 0; i < sizeof(steps_s) / sizeof(steps_s[0]); i++) {
		b = steps_s[i] * s;
		if (b >= min_ns && (uint64_t)((span_ns + b - 1) / b) <= max_points)
			return b;
	}
	b = steps_s[i - 1] * s;
	while (b < min_ns || (uint64_t)((span_ns + b - 1) / b) > max_points)
		b += steps_s[i - 1] * s;
	return b;
}

size_t ctl_report_nbuckets(int64_t span_ns, int64_t bucket_ns)
{
	if (span_ns <= 0 || bucket_ns <= 0)
		return 1;
	return (size_t)((span_ns - 1) / bucket_ns + 1);
}

/* ---- collecting rows ---- */

static int rp_name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static int rp_is_v(const struct st_row *row)
{
	return strcmp(row->ce, ST_CE_UNACCOUNTABLE) == 0;
}

static int64_t rp_amount(const struct st_row *row)
{
	if (rp_is_v(row))
		return row->residual;
	return row->value > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)row->value;
}

static size_t rp_server(const struct ctl_report *r, const char *name)
{
	char(*hit)[RP_NAME] = bsearch(name, r->srv, r->ns, RP_NAME, rp_name_cmp);

	return hit ? (size_t)(hit - r->srv) : (size_t)-1;
}

/* Tenant index of a row: nt for V, (size_t)-1 if unknown. */
static size_t rp_tenant(const struct ctl_report *r, const struct st_row *row)
{
	size_t lo = 0, hi = r->nt;

	if (rp_is_v(row))
		return r->nt;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(row->ce, r->ten[r->ten_by_name[mid]]);

		if (c == 0)
			return r->ten_by_name[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return (size_t)-1;
}

static int64_t *rp_at(const struct ctl_report *r, int64_t *tab, size_t s, size_t k)
{
	return &tab[(s * (r->nt + 2) + k) * ST_R_COUNT];
}

static int64_t rp_add(int64_t a, int64_t b)
{
	int64_t c;

	return __builtin_add_overflow(a, b, &c) ? (b > 0 ? INT64_MAX : INT64_MIN) : c;
}

/* Adds rows (of cur or prev) into tab, and U of each server and resource. */
static void rp_collect(struct ctl_report *r, int64_t *tab, const struct st_row *rows, size_t n, int mark)
{
	size_t i, s, k;

	for (i = 0; i < n; i++) {
		const struct st_row *row = &rows[i];

		if (row->resource >= ST_R_COUNT || (s = rp_server(r, row->server)) == (size_t)-1 ||
		    (k = rp_tenant(r, row)) == (size_t)-1)
			continue;
		rp_at(r, tab, s, k)[row->resource] = rp_add(rp_at(r, tab, s, k)[row->resource], rp_amount(row));
		rp_at(r, tab, s, r->nt + 1)[row->resource] =
			row->total > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)row->total;
		if (mark)
			r->present[s * (r->nt + 2) + k] = r->present[s * (r->nt + 2) + r->nt + 1] = 1;
	}
	for (s = 0; s < r->ns; s++)
		for (k = 0; k < r->nt + 2; k++) {
			int res;

			for (res = 0; res < ST_R_COUNT; res++)
				rp_at(r, tab, r->ns, k)[res] =
					rp_add(rp_at(r, tab, r->ns, k)[res], rp_at(r, tab, s, k)[res]);
			if (mark && r->present[s * (r->nt + 2) + k])
				r->present[r->ns * (r->nt + 2) + k] = 1;
		}
}

/* Collects the distinct names of cur: servers sorted, tenants sorted later. */
static int rp_names(struct ctl_report *r, const struct st_row *cur, size_t ncur)
{
	size_t i, j, ns = 0, nt = 0;

	r->srv = calloc(ncur ? ncur : 1, RP_NAME);
	r->ten = calloc(ncur ? ncur : 1, RP_NAME);
	if (!r->srv || !r->ten)
		return RM_ENOMEM;
	for (i = 0; i < ncur; i++) {
		snprintf(r->srv[ns++], RP_NAME, "%s", cur[i].server);
		if (!rp_is_v(&cur[i]))
			snprintf(r->ten[nt++], RP_NAME, "%s", cur[i].ce);
	}
	qsort(r->srv, ns, RP_NAME, rp_name_cmp);
	for (i = j = 0; i < ns; i++)
		if (j == 0 || strcmp(r->srv[i], r->srv[j - 1]))
			memmove(r->srv[j++], r->srv[i], RP_NAME);
	r->ns = j;
	qsort(r->ten, nt, RP_NAME, rp_name_cmp);
	for (i = j = 0; i < nt; i++)
		if (j == 0 || strcmp(r->ten[i], r->ten[j - 1]))
			memmove(r->ten[j++], r->ten[i], RP_NAME);
	r->nt = j;
	return RM_OK;
}

/* Largest CPU over all servers first, then largest network, then name. */
static int rp_ten_cmp(const void *a, const void *b, void *arg)
{
	const struct ctl_report *r = arg;
	const int64_t *x = rp_at(r, r->cur, r->ns, *(const size_t *)a);
	const int64_t *y = rp_at(r, r->cur, r->ns, *(const size_t *)b);

	if (x[ST_R_CPU] != y[ST_R_CPU])
		return x[ST_R_CPU] > y[ST_R_CPU] ? -1 : 1;
	if (x[ST_R_NET_RX] + x[ST_R_NET_TX] != y[ST_R_NET_RX] + y[ST_R_NET_TX])
		return x[ST_R_NET_RX] + x[ST_R_NET_TX] > y[ST_R_NET_RX] + y[ST_R_NET_TX] ? -1 : 1;
	return strcmp(r->ten[*(const size_t *)a], r->ten[*(const size_t *)b]);
}

static int rp_by_name_cmp(const void *a, const void *b, void *arg)
{
	const struct ctl_report *r = arg;

	return strcmp(r->ten[*(const size_t *)a], r->ten[*(const size_t *)b]);
}

/* Orders tenants by usage (they were collected in name order). */
static int rp_order(struct ctl_report *r, const struct st_row *cur, size_t ncur)
{
	size_t cells = (r->ns + 1) * (r->nt + 2), *ord, i;
	char(*ten)[RP_NAME];

	if (!(ord = calloc(r->nt + 1, sizeof(*ord))) || !(ten = calloc(r->nt + 1, RP_NAME))) {
		free(ord);
		return RM_ENOMEM;
	}
	for (i = 0; i < r->nt; i++)
		r->ten_by_name[i] = ord[i] = i;
	rp_collect(r, r->cur, cur, ncur, 1);
	qsort_r(ord, r->nt, sizeof(*ord), rp_ten_cmp, r);
	for (i = 0; i < r->nt; i++)
		memmove(ten[i], r->ten[ord[i]], RP_NAME);
	free(r->ten);
	r->ten = ten;
	qsort_r(r->ten_by_name, r->nt, sizeof(size_t), rp_by_name_cmp, r);
	free(ord);
	/* collect again with the final indexes */
	memset(r->cur, 0, cells * ST_R_COUNT * sizeof(int64_t));
	memset(r->present, 0, cells);
	rp_collect(r, r->cur, cur, ncur, 1);
	return RM_OK;
}

static int rp_reasons(struct ctl_report *r, const struct st_row *why, size_t nwhy)
{
	size_t i, j, s;

	if (!(r->why = calloc(nwhy ? nwhy : 1, sizeof(*r->why))))
		return RM_ENOMEM;
	for (i = 0; i < nwhy; i++) {
		int64_t v = strcmp(why[i].reason, ST_REASON_UNEXPLAINED) == 0 ? why[i].residual
			    : why[i].value > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)why[i].value;

		if ((s = rp_server(r, why[i].server)) == (size_t)-1 || why[i].resource >= ST_R_COUNT)
			continue;
		for (j = 0; j < r->nwhy; j++)
			if (r->why[j].s == s && strcmp(r->why[j].reason, why[i].reason) == 0)
				break;
		if (j == r->nwhy) {
			r->why[j].s = s;
			snprintf(r->why[j].reason, sizeof(r->why[j].reason), "%s", why[i].reason);
			r->nwhy++;
		}
		r->why[j].v[why[i].resource] = rp_add(r->why[j].v[why[i].resource], v);
	}
	return RM_OK;
}

int ctl_report_new(struct ctl_report **out, const struct ctl_report_period *p, const struct st_row *cur,
		   size_t ncur, const struct st_row *prev, size_t nprev, const struct st_row *why,
		   size_t nwhy)
{
	struct ctl_report *r;
	int64_t span;
	size_t cells;
	int rv;

	if (!out)
		return RM_EINVAL;
	*out = NULL;
	if (!p || p->bucket_ns <= 0 || p->nbuckets == 0 || p->nbuckets > CTL_REPORT_MAX_POINTS * 4 ||
	    p->until_ns < p->since_ns || __builtin_sub_overflow(p->until_ns, p->since_ns, &span) || (ncur && !cur) || (nprev && !prev) || (nwhy && !why))
		return RM_EINVAL;
	if (!(r = calloc(1, sizeof(*r))))
		return RM_ENOMEM;
	r->p = *p;
	if ((rv = rp_names(r, cur, ncur)) != 0)
		goto fail;
	cells = (r->ns + 1) * (r->nt + 2);
	r->ntop = r->nt < CTL_REPORT_TOP ? r->nt : CTL_REPORT_TOP;
	r->other = r->nt > r->ntop;
	r->nl = r->ntop + (size_t)r->other + 1;
	rv = RM_ENOMEM;
	if (!(r->cur = calloc(cells, ST_R_COUNT * sizeof(int64_t))) ||
	    !(r->prev = calloc(cells, ST_R_COUNT * sizeof(int64_t))) || !(r->present = calloc(cells, 1)) ||
	    !(r->ten_by_name = calloc(r->nt + 1, sizeof(size_t))) ||
	    !(r->chart = calloc((r->ns ? r->ns : 1) * RP_GROUPS * r->nl * p->nbuckets, sizeof(uint64_t))) ||
	    !(r->cap = calloc((r->ns ? r->ns : 1) * p->nbuckets, sizeof(uint64_t))))
		goto fail;
	if ((rv = rp_order(r, cur, ncur)) != 0 || (rv = rp_reasons(r, why, nwhy)) != 0)
		goto fail;
	rp_collect(r, r->prev, prev, nprev, 0);
	*out = r;
	return RM_OK;
fail:
	ctl_report_free(r);
	return rv;
}

static int rp_group(enum st_resource res)
{
	return res == ST_R_CPU ? 0 : (res == ST_R_NET_RX || res == ST_R_NET_TX) ? 1 : 2;
}

static uint64_t *rp_cell(const struct ctl_report *r, size_t s, int g, size_t l, size_t b)
{
	return &r->chart[((s * RP_GROUPS + (size_t)g) * r->nl + l) * r->p.nbuckets + b];
}

int ctl_report_add_bucket(struct ctl_report *r, size_t b, const struct st_row *rows, size_t n)
{
	size_t i, s, k, l;

	if (!r || b >= r->p.nbuckets || (n && !rows))
		return RM_EINVAL;
	for (i = 0; i < n; i++) {
		uint64_t *c;

		if (rows[i].resource >= ST_R_COUNT || (s = rp_server(r, rows[i].server)) == (size_t)-1 ||
		    (k = rp_tenant(r, &rows[i])) == (size_t)-1)
			continue;
		/* V is drawn at max(V, 0): rows[i].value for the V row */
		l = k == r->nt ? r->nl - 1 : k < r->ntop ? k : r->ntop;
		c = rp_cell(r, s, rp_group(rows[i].resource), l, b);
		*c = *c + rows[i].value < *c ? UINT64_MAX : *c + rows[i].value;
		/* every row of a server and resource carries the same capacity */
		if (rows[i].resource == ST_R_CPU && rows[i].capacity > r->cap[s * r->p.nbuckets + b])
			r->cap[s * r->p.nbuckets + b] = rows[i].capacity;
	}
	return RM_OK;
}

void ctl_report_free(struct ctl_report *r)
{
	if (!r)
		return;
	free(r->srv);
	free(r->ten);
	free(r->ten_by_name);
	free(r->cur);
	free(r->prev);
	free(r->present);
	free(r->why);
	free(r->chart);
	free(r->cap);
	free(r);
}

/* ---- units for people ---- */

/* Three significant figures for 1 <= |v| < 1000, more digits above. */
static void rp_num(char *buf, size_t len, double v, const char *unit)
{
	double a = fabs(v);

	snprintf(buf, len,
		 a >= 100 || a == 0 ? "%.0f %s" : a >= 10 ? "%.1f %s" : a >= 1 ? "%.2f %s" : a >= 0.01 ? "%.3f %s"
											 : "%.4f %s",
		 v, unit);
}

static void rp_fmt_cpu(char *buf, size_t len, int64_t ns)
{
	double s = (double)ns / 1e9, a = fabs(s);

	if (a < 1)
		rp_num(buf, len, s * 1000, "core-ms");
	else if (a < 60)
		rp_num(buf, len, s, "core-s");
	else if (a < 3600)
		rp_num(buf, len, s / 60, "core-min");
	else
		rp_num(buf, len, s / 3600, "core-h");
}

static void rp_fmt_bytes(char *buf, size_t len, double v, const char *suffix)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double a = fabs(v);
	size_t u = 0;
	char unit[16];

	while (a >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		a /= 1024;
		v /= 1024;
		u++;
	}
	snprintf(unit, sizeof(unit), "%s%s", units[u], suffix);
	if (u == 0)
		snprintf(buf, len, "%.0f %s", v, unit);
	else
		rp_num(buf, len, v, unit);
}

static void rp_fmt_amount(char *buf, size_t len, enum st_resource res, int64_t v)
{
	if (res == ST_R_CPU)
		rp_fmt_cpu(buf, len, v);
	else
		rp_fmt_bytes(buf, len, (double)v, "");
}

static void rp_fmt_share(char *buf, size_t len, int64_t v, int64_t total)
{
	if (total <= 0)
		snprintf(buf, len, "&ndash;");
	else
		snprintf(buf, len, "%.1f%%", 100.0 * (double)v / (double)total);
}

/* Change of cur against prev, as text and a CSS class (up, down, flat). */
static const char *rp_fmt_change(char *buf, size_t len, int64_t cur, int64_t prev)
{
	double d;

	if (prev <= 0) {
		snprintf(buf, len, cur > 0 ? "new" : "&ndash;");
		return "flat";
	}
	d = 100.0 * ((double)cur - (double)prev) / (double)prev;
	if (fabs(d) < 0.05) {
		snprintf(buf, len, "&plusmn;0%%");
		return "flat";
	}
	snprintf(buf, len, "%s%.1f%%", d > 0 ? "+" : "&minus;", fabs(d));
	return d > 0 ? "up" : "down";
}

static void rp_fmt_time(char *buf, size_t len, int64_t ns, int with_date, int with_time)
{
	time_t t = (time_t)(ns / 1000000000LL - (ns % 1000000000LL < 0 ? 1 : 0));
	struct tm tm;

	if (!gmtime_r(&t, &tm)) {
		snprintf(buf, len, "?");
		return;
	}
	if (with_date && with_time)
		strftime(buf, len, "%Y-%m-%d %H:%M", &tm);
	else if (with_date)
		strftime(buf, len, "%b %d", &tm);
	else if (tm.tm_sec)
		strftime(buf, len, "%H:%M:%S", &tm);
	else
		strftime(buf, len, "%H:%M", &tm);
}

static void rp_fmt_span(char *buf, size_t len, int64_t ns)
{
	int64_t s = ns / 1000000000LL;

	if (s % 86400 == 0 && s >= 86400)
		snprintf(buf, len, "%lld day%s", (long long)(s / 86400), s == 86400 ? "" : "s");
	else if (s % 3600 == 0 && s >= 3600)
		snprintf(buf, len, "%lld hour%s", (long long)(s / 3600), s == 3600 ? "" : "s");
	else if (s % 60 == 0 && s >= 60)
		snprintf(buf, len, "%lld minute%s", (long long)(s / 60), s == 60 ? "" : "s");
	else
		snprintf(buf, len, "%lld second%s", (long long)s, s == 1 ? "" : "s");
}

int ctl_html_escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		const char *e = NULL;

		switch (*s) {
		case '&': e = "&amp;"; break;
		case '<': e = "&lt;"; break;
		case '>': e = "&gt;"; break;
		case '"': e = "&quot;"; break;
		case '\'': e = "&#39;"; break;
		}
		if (e ? fputs(e, f) == EOF : fputc(*s, f) == EOF)
			return EOF;
	}
	return 0;
}

/* ---- the document ---- */

static const char rp_css[] =
	"body{font:14px/1.45 -apple-system,'Segoe UI',Roboto,'DejaVu Sans',Helvetica,Arial,sans-serif;"
	"color:#1d232a;background:#f4f5f7;margin:0}"
	"main{max-width:1180px;margin:0 auto;padding:24px 28px 40px}"
	"h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:34px 0 10px;padding-top:14px;"
	"border-top:1px solid #d5d9de}h3{font-size:14px;margin:0 0 6px;color:#3b4450}"
	".sub{color:#5b6470;margin:0 0 14px}"
	".cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}"
	".card{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:10px 16px;min-width:150px}"
	".card b{display:block;font-size:20px}.card span{color:#5b6470;font-size:12px}"
	".legend{display:flex;flex-wrap:wrap;gap:6px 16px;margin:8px 0 4px;font-size:13px}"
	".legend i{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:5px;"
	"vertical-align:-1px}"
	".charts{display:grid;grid-template-columns:minmax(0,1.6fr) minmax(0,1fr);gap:12px}"
	".charts .big{grid-row:span 2}"
	".panel{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:10px 12px}"
	".panel svg{width:100%;height:auto;display:block}"
	".note{color:#5b6470;font-size:12.5px;margin:6px 0 0}"
	"table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #dde1e6;margin:12px 0 4px;"
	"font-variant-numeric:tabular-nums}"
	"th,td{padding:5px 10px;text-align:right;border-bottom:1px solid #eceef1;white-space:nowrap}"
	"th{background:#eef0f3;font-weight:600;font-size:12.5px}th:first-child,td:first-child{text-align:left}"
	"tr.v td{color:#555;background:#f7f7f7}tr.u td{font-weight:600;border-top:2px solid #c9ced4}"
	"td .sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}"
	".up{color:#b3261e}.down{color:#1e7b34}.flat{color:#5b6470}"
	"details{margin-top:28px}summary{cursor:pointer;font-weight:600}"
	"dl{display:grid;grid-template-columns:max-content auto;gap:4px 14px;margin:8px 0}"
	"dt{font-family:monospace}dd{margin:0}"
	"@media (max-width:800px){.charts{grid-template-columns:1fr}.charts .big{grid-row:auto}}"
	"@media print{body{background:#fff}}";

struct rp_reason_text {
	const char *reason, *text;
};

static const struct rp_reason_text rp_reasons_text[] = {
	{ "unsegmented", "work done outside any request (e.g. housekeeping, idle connections)" },
	{ "no_ce", "requests from clients that match no tenant rule" },
	{ "lost", "CPU the kernel could not report in detail" },
	{ "dropped", "records the collector's kernel buffer could not take (overload)" },
	{ "dom0", "Xen driver-domain CPU not charged to a guest" },
	{ "untrusted_range", "bytes whose TCP sequence range could not be trusted" },
	{ "no_sender", "datagrams whose sender could not be read (unconnected UDP sockets)" },
	{ "unpaired", "received bytes that no known send covered" },
	{ "past_horizon", "work whose cause was still unknown when the aggregator stopped waiting" },
	{ "unanchored", "work that could not be tied to a request" },
	{ "runtime", "a managed runtime's own work (e.g. Go's scheduler) the runtime rule did not charge to tenants" },
	{ ST_REASON_UNEXPLAINED, "the part of V no stored reason covers (negative: the reasons over-count)" },
};

static const char *rp_reason_text(const char *reason)
{
	size_t i;

	for (i = 0; i < sizeof(rp_reasons_text) / sizeof(rp_reasons_text[0]); i++)
		if (strcmp(rp_reasons_text[i].reason, reason) == 0)
			return rp_reasons_text[i].text;
	return NULL;
}

static const char *rp_color(const struct ctl_report *r, size_t l)
{
	if (l == r->nl - 1)
		return RP_COLOR_V;
	return l < r->ntop ? rp_palette[l] : RP_COLOR_OTHER;
}

static size_t rp_layer_of(const struct ctl_report *r, size_t k)
{
	return k == r->nt ? r->nl - 1 : k < r->ntop ? k : r->ntop;
}

static void rp_layer_name(FILE *f, const struct ctl_report *r, size_t l)
{
	if (l == r->nl - 1)
		fputs("unaccountable (V)", f);
	else if (l < r->ntop)
		ctl_html_escape(f, r->ten[l]);
	else
		fprintf(f, "%zu other tenants", r->nt - r->ntop);
}

/* A step up from v/n among 1, 2, 2.5, 5 times a power of ten. */
static double rp_nice_step(double v, int n)
{
	double raw = v / n, p, m;

	if (!(raw > 0))
		return 1;
	p = pow(10, floor(log10(raw)));
	m = raw / p;
	return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p;
}

static void rp_axis_label(char *buf, size_t len, int g, double v, double step)
{
	if (g == 0) {
		/* enough decimals to tell the ticks apart (2.5 needs one more) */
		int d = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);

		if (step < 1 && fabs(step * pow(10, d) - round(step * pow(10, d))) > 1e-6)
			d++;
		snprintf(buf, len, "%.*f", v == 0 ? 0 : d, v);
	} else {
		rp_fmt_bytes(buf, len, v, "/s");
	}
}

#define RP_L 66.0
#define RP_R 14.0
#define RP_T 12.0
#define RP_B 28.0

static int64_t rp_bucket_len(const struct ctl_report *r, size_t b)
{
	int64_t start = r->p.since_ns + (int64_t)b * r->p.bucket_ns;
	int64_t end = start + r->p.bucket_ns;

	if (end > r->p.until_ns)
		end = r->p.until_ns;
	return end > start ? end - start : r->p.bucket_ns;
}

/* CPU capacity of server s in bucket b, in cores (0 if unknown). */
static double rp_cap(const struct ctl_report *r, size_t s, size_t b)
{
	return (double)r->cap[s * r->p.nbuckets + b] / (double)rp_bucket_len(r, b);
}

/* One stacked-area chart of server s, group g (0 cpu, 1 net, 2 disk). */
static void rp_chart(FILE *f, const struct ctl_report *r, size_t s, int g)
{
	static const char *const titles[] = { "CPU", "Network (received + sent)", "Disk (read + written)" };
	static const char *const units[] = { "cores", "bytes per second", "bytes per second" };
	size_t nb = r->p.nbuckets, b, l, t, drawn = 0;
	/* the CPU chart is the big one; the small ones keep the same text size */
	const double cw = g == 0 ? 640 : 400, ch = g == 0 ? 470 : 215;
	double pw = cw - RP_L - RP_R, ph = ch - RP_T - RP_B, top = 0, step, ymax;
	double *lo = calloc(nb, sizeof(double)), *hi = calloc(nb, sizeof(double));
	int64_t span = r->p.until_ns - r->p.since_ns;
	int with_date = span > 2 * 86400LL * 1000000000LL;
	char buf[64];

	fprintf(f, "<div class=\"panel%s\"><h3>%s <span class=\"note\">(%s)</span></h3>\n", g == 0 ? " big" : "",
		titles[g], units[g]);
	if (!lo || !hi) {
		fputs("<p class=\"note\">(out of memory while drawing)</p></div>\n", f);
		free(lo);
		free(hi);
		return;
	}
	/* the stack's height per bucket, per second of the bucket */
	for (b = 0; b < nb; b++) {
		double sum = 0;

		for (l = 0; l < r->nl; l++)
			sum += (double)*rp_cell(r, s, g, l, b);
		sum = sum / ((double)rp_bucket_len(r, b) / 1e9) / (g == 0 ? 1e9 : 1);
		if (sum > top)
			top = sum;
		if (g == 0 && rp_cap(r, s, b) > top)
			top = rp_cap(r, s, b);
	}
	if (g == 0) {
		step = rp_nice_step(top > 0 ? top : 1, 4);
	} else {
		/* nice steps in the unit the labels use (B, KiB, MiB, ...) */
		double scale = 1;

		while (top / scale >= 1024)
			scale *= 1024;
		step = rp_nice_step(top > 0 ? top / scale : 1, 4) * scale;
	}
	ymax = step * 4;
	fprintf(f, "<svg viewBox=\"0 0 %.0f %.0f\" role=\"img\" data-group=\"%d\">\n", cw, ch, g);
	for (t = 0; t <= 4; t++) {
		double y = RP_T + ph - ph * (double)t / 4;

		rp_axis_label(buf, sizeof(buf), g, step * (double)t, step);
		fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>"
			   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\" fill=\"#5b6470\">%s</text>\n",
			RP_L, cw - RP_R, y, y, t ? "#e6e8eb" : "#9aa1a9", RP_L - 6, y + 4, buf);
	}
	for (t = 0; t <= 4; t++) {
		double x = RP_L + pw * (double)t / 4;

		rp_fmt_time(buf, sizeof(buf), r->p.since_ns + (int64_t)((double)span * (double)t / 4), with_date, !with_date);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"%s\" fill=\"#5b6470\">%s</text>\n",
			x, ch - 8, t == 0 ? "start" : t == 4 ? "end" : "middle", buf);
	}
	/* layers from the bottom: tenants by size, other tenants, V on top */
	for (l = 0; l < r->nl; l++) {
		int any = 0;

		for (b = 0; b < nb; b++) {
			double v = (double)*rp_cell(r, s, g, l, b) / ((double)rp_bucket_len(r, b) / 1e9) / (g == 0 ? 1e9 : 1);

			lo[b] = hi[b];
			hi[b] = lo[b] + v;
			any |= v > 0;
		}
		if (!any)
			continue;
		fprintf(f, "<path class=\"area\" fill=\"%s\" fill-opacity=\"0.9\" stroke=\"%s\" stroke-width=\"0.6\" d=\"",
			rp_color(r, l), rp_color(r, l));
		/* upper edge left to right (bucket centres, stretched to the edges), lower edge back */
		for (b = 0; b <= nb + 1; b++) {
			size_t i = b == 0 ? 0 : b > nb ? nb - 1 : b - 1;
			double x = b == 0 ? RP_L : b > nb ? RP_L + pw : RP_L + pw * ((double)i + 0.5) / (double)nb;

			fprintf(f, "%s%.1f,%.1f", b ? "L" : "M", x, RP_T + ph - ph * (hi[i] > ymax ? 1 : hi[i] / ymax));
		}
		for (b = nb + 2; b-- > 0;) {
			size_t i = b == 0 ? 0 : b > nb ? nb - 1 : b - 1;
			double x = b == 0 ? RP_L : b > nb ? RP_L + pw : RP_L + pw * ((double)i + 0.5) / (double)nb;

			fprintf(f, "L%.1f,%.1f", x, RP_T + ph - ph * (lo[i] > ymax ? 1 : lo[i] / ymax));
		}
		fputs("Z\"><title>", f);
		rp_layer_name(f, r, l);
		fputs("</title></path>\n", f);
		drawn++;
	}
	/* the server's CPUs as a dashed line over the stack */
	for (b = 0; g == 0 && b < nb; b++)
		if (rp_cap(r, s, b) > 0)
			break;
	if (g == 0 && b < nb) {
		fputs("<path class=\"capacity\" fill=\"none\" stroke=\"#3b4450\" stroke-width=\"1.2\" "
		      "stroke-dasharray=\"5 4\" d=\"", f);
		for (b = 0; b < nb; b++) {
			double c = rp_cap(r, s, b), y = RP_T + ph - ph * (c > ymax ? 1 : c / ymax);

			fprintf(f, "%s%.1f,%.1fL%.1f,%.1f", b ? "L" : "M", RP_L + pw * (double)b / (double)nb, y,
				RP_L + pw * (double)(b + 1) / (double)nb, y);
		}
		fputs("\"><title>capacity (the server's CPUs)</title></path>\n", f);
	}
	if (!drawn)
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\" fill=\"#8a9199\">"
			   "nothing recorded</text>\n", RP_L + pw / 2, RP_T + ph / 2);
	fputs("</svg>\n", f);
	if (g == 0)
		fputs("<p class=\"note\">Average CPU cores in use per time bucket, stacked by tenant; the grey "
		      "band on top is the unaccountable share V: CPU the server used that could not be tied to "
		      "a tenant. The top edge of the stack is the server's total busy CPU; the dashed line is its "
		      "capacity (all its CPUs).</p>\n", f);
	else if (g == 1)
		fputs("<p class=\"note\">Bytes received and sent through sockets, per second, stacked by tenant "
		      "(V on top).</p>\n", f);
	else
		fputs("<p class=\"note\">Bytes read from and written to disks, per second, stacked by tenant "
		      "(V on top).</p>\n", f);
	fputs("</div>\n", f);
	free(lo);
	free(hi);
}

static void rp_cell_amount(FILE *f, enum st_resource res, int64_t v)
{
	char buf[48];

	rp_fmt_amount(buf, sizeof(buf), res, v);
	fprintf(f, "<td data-res=\"%s\" data-raw=\"%lld\">%s</td>", st_resource_name(res), (long long)v, buf);
}

static void rp_table_row(FILE *f, const struct ctl_report *r, size_t s, size_t k)
{
	const int64_t *v = rp_at(r, r->cur, s, k), *u = rp_at(r, r->cur, s, r->nt + 1);
	const int64_t *pv = rp_at(r, r->prev, s, k);
	int64_t span = r->p.until_ns - r->p.since_ns;
	const char *cls;
	char buf[48];
	int res;

	fprintf(f, "<tr class=\"%s\" data-tenant=\"", k == r->nt ? "v" : k == r->nt + 1 ? "u" : "t");
	if (k < r->nt)
		ctl_html_escape(f, r->ten[k]);
	else
		fputs(k == r->nt ? ST_CE_UNACCOUNTABLE : "", f);
	fputs("\"><td>", f);
	if (k < r->nt) {
		fprintf(f, "<span class=\"sw\" style=\"background:%s\"></span>", rp_color(r, rp_layer_of(r, k)));
		ctl_html_escape(f, r->ten[k]);
	} else if (k == r->nt) {
		fprintf(f, "<span class=\"sw\" style=\"background:%s\"></span>unaccountable (V)", RP_COLOR_V);
	} else {
		fputs("total (U)", f);
	}
	fputs("</td>", f);
	rp_cell_amount(f, ST_R_CPU, v[ST_R_CPU]);
	rp_num(buf, sizeof(buf), span > 0 ? (double)v[ST_R_CPU] / (double)span : 0, "");
	fprintf(f, "<td>%s</td>", buf);
	rp_fmt_share(buf, sizeof(buf), v[ST_R_CPU], u[ST_R_CPU]);
	fprintf(f, "<td>%s</td>", buf);
	cls = rp_fmt_change(buf, sizeof(buf), v[ST_R_CPU], pv[ST_R_CPU]);
	fprintf(f, "<td class=\"%s\" data-res=\"cpu_prev\" data-raw=\"%lld\">%s</td>", cls,
		(long long)pv[ST_R_CPU], buf);
	for (res = ST_R_NET_RX; res < ST_R_COUNT; res++)
		rp_cell_amount(f, res, v[res]);
	fputs("</tr>\n", f);
}

/* The tenants' table of server s (s == ns: all servers). */
static void rp_table(FILE *f, const struct ctl_report *r, size_t s)
{
	size_t k;

	fprintf(f, "<table class=\"tenants\" data-server=\"");
	if (s < r->ns)
		ctl_html_escape(f, r->srv[s]);
	fputs("\"><thead><tr><th>Tenant</th><th>CPU</th><th>avg cores</th><th>CPU share</th>"
	      "<th>CPU vs previous</th><th>Net received</th><th>Net sent</th><th>Disk read</th>"
	      "<th>Disk written</th></tr></thead><tbody>\n", f);
	for (k = 0; k < r->nt; k++)
		if (r->present[s * (r->nt + 2) + k])
			rp_table_row(f, r, s, k);
	rp_table_row(f, r, s, r->nt);
	rp_table_row(f, r, s, r->nt + 1);
	fputs("</tbody></table>\n", f);
}

static void rp_why_table(FILE *f, const struct ctl_report *r, size_t s)
{
	const int64_t *vv = rp_at(r, r->cur, s, r->nt);
	size_t i, n = 0;
	int res;

	for (i = 0; i < r->nwhy; i++)
		n += r->why[i].s == s;
	fputs("<h3 style=\"margin-top:16px\">Unaccountable share by reason</h3>\n", f);
	if (!n) {
		fputs("<p class=\"note\">No unaccountable usage on this server in the period.</p>\n", f);
		return;
	}
	fputs("<table class=\"reasons\"><thead><tr><th>Reason</th><th>CPU</th><th>of V's CPU</th>"
	      "<th>Net received</th><th>Net sent</th><th>Disk read</th><th>Disk written</th></tr></thead><tbody>\n", f);
	for (i = 0; i < r->nwhy; i++) {
		const char *text;
		char buf[48];

		if (r->why[i].s != s)
			continue;
		fputs("<tr data-reason=\"", f);
		ctl_html_escape(f, r->why[i].reason);
		fputs("\"><td>", f);
		ctl_html_escape(f, r->why[i].reason);
		if ((text = rp_reason_text(r->why[i].reason)) != NULL)
			fprintf(f, "<br><span class=\"note\">%s</span>", text);
		fputs("</td>", f);
		rp_cell_amount(f, ST_R_CPU, r->why[i].v[ST_R_CPU]);
		rp_fmt_share(buf, sizeof(buf), r->why[i].v[ST_R_CPU], vv[ST_R_CPU]);
		fprintf(f, "<td>%s</td>", buf);
		for (res = ST_R_NET_RX; res < ST_R_COUNT; res++)
			rp_cell_amount(f, res, r->why[i].v[res]);
		fputs("</tr>\n", f);
	}
	fputs("</tbody></table>\n", f);
}

static void rp_cards(FILE *f, const struct ctl_report *r)
{
	const int64_t *u = rp_at(r, r->cur, r->ns, r->nt + 1), *v = rp_at(r, r->cur, r->ns, r->nt);
	int64_t span = r->p.until_ns - r->p.since_ns;
	char a[48], b[48];

	rp_fmt_cpu(a, sizeof(a), u[ST_R_CPU]);
	rp_num(b, sizeof(b), span > 0 ? (double)u[ST_R_CPU] / (double)span : 0, "cores on average");
	fprintf(f, "<div class=\"cards\"><div class=\"card\"><span>CPU used</span><b>%s</b><span>%s</span></div>", a, b);
	rp_fmt_share(a, sizeof(a), v[ST_R_CPU], u[ST_R_CPU]);
	fprintf(f, "<div class=\"card\"><span>CPU unaccountable</span><b>%s</b><span>of the CPU used</span></div>", a);
	rp_fmt_bytes(a, sizeof(a), (double)u[ST_R_NET_RX] + (double)u[ST_R_NET_TX], "");
	fprintf(f, "<div class=\"card\"><span>Network</span><b>%s</b><span>received + sent</span></div>", a);
	rp_fmt_bytes(a, sizeof(a), (double)u[ST_R_DISK_READ] + (double)u[ST_R_DISK_WRITE], "");
	fprintf(f, "<div class=\"card\"><span>Disk</span><b>%s</b><span>read + written</span></div>", a);
	fprintf(f, "<div class=\"card\"><span>Tenants</span><b>%zu</b><span>on %zu server%s</span></div></div>\n",
		r->nt, r->ns, r->ns == 1 ? "" : "s");
}

int ctl_report_write(const struct ctl_report *r, FILE *f)
{
	int64_t span = r->p.until_ns - r->p.since_ns, prev;
	char t0[40], t1[40], tp[40], tg[40], sp[40], bk[40];
	size_t s, l;

	rp_fmt_time(t0, sizeof(t0), r->p.since_ns, 1, 1);
	rp_fmt_time(t1, sizeof(t1), r->p.until_ns, 1, 1);
	rp_fmt_time(tp, sizeof(tp), __builtin_sub_overflow(r->p.since_ns, span, &prev) ? INT64_MIN : prev, 1, 1);
	rp_fmt_time(tg, sizeof(tg), r->p.generated_ns, 1, 1);
	rp_fmt_span(sp, sizeof(sp), span);
	rp_fmt_span(bk, sizeof(bk), r->p.bucket_ns);
	fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
		   "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
		   "<title>Rametr usage report %s &ndash; %s UTC</title>\n<style>%s</style></head>\n<body><main>\n",
		t0, t1, rp_css);
	fprintf(f, "<h1>Resource usage by tenant</h1>\n<p class=\"sub\">%s &ndash; %s UTC (%s), compared with "
		   "the %s before (from %s). Generated %s UTC by rametrctl.</p>\n", t0, t1, sp, sp, tp, tg);
	if (r->ns == 0) {
		fputs("<p>No usage was recorded in this period.</p>\n", f);
	} else {
		rp_cards(f, r);
		fputs("<div class=\"legend\">", f);
		for (l = 0; l < r->nl; l++) {
			fprintf(f, "<span><i style=\"background:%s\"></i>", rp_color(r, l));
			rp_layer_name(f, r, l);
			fputs("</span>", f);
		}
		fputs("</div>\n", f);
		fputs("<h2>All servers</h2>\n<p class=\"note\">Each tenant's usage summed over all servers. "
		      "<b>CPU share</b> is the tenant's part of all CPU used; <b>CPU vs previous</b> compares with the "
		      "previous period of the same length. The tenants, V and the total are measured separately: "
		      "the tenants plus V add up to the total exactly.</p>\n", f);
		rp_table(f, r, r->ns);
		for (s = 0; s < r->ns; s++) {
			fputs("<section class=\"server\" data-server=\"", f);
			ctl_html_escape(f, r->srv[s]);
			fputs("\"><h2>Server ", f);
			ctl_html_escape(f, r->srv[s]);
			fprintf(f, "</h2>\n<div class=\"charts\">\n");
			rp_chart(f, r, s, 0);
			rp_chart(f, r, s, 1);
			rp_chart(f, r, s, 2);
			fprintf(f, "</div>\n<p class=\"note\">One point per bucket of %s.</p>\n", bk);
			rp_table(f, r, s);
			rp_why_table(f, r, s);
			fputs("</section>\n", f);
		}
	}
	fputs("<details><summary>How to read this report</summary>\n<dl>"
	      "<dt>tenant</dt><dd>a chargeable entity: the clients the aggregator's rules name, charged for the "
	      "work servers did on their behalf, also on servers they reached through other servers</dd>"
	      "<dt>U (total)</dt><dd>what the server itself measured: busy CPU, all socket and disk bytes</dd>"
	      "<dt>V (unaccountable)</dt><dd>U minus everything charged to tenants; its reasons are listed per "
	      "server</dd>"
	      "<dt>core-h</dt><dd>CPU time: one core busy for one hour (core-min, core-s likewise)</dd>"
	      "<dt>avg cores</dt><dd>CPU time divided by the length of the period</dd>"
	      "<dt>KiB, MiB, GiB</dt><dd>1024, 1024&sup2;, 1024&sup3; bytes</dd>"
	      "</dl><p class=\"note\">Times are UTC. A window of measurement belongs to the period its start "
	      "falls in. Exact numbers: <code>rametrctl usage</code> and <code>rametrctl unaccountable</code> "
	      "with the same --since and --until.</p></details>\n</main></body></html>\n", f);
	return ferror(f) ? RM_EIO : RM_OK;
}
