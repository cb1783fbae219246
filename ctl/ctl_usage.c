/*
 * ctl_usage.c - `rametrctl usage` beyond the storage rows: grouping by
 * server / CE / resource per period with exact integer sums, the top N per
 * group, and the output with human units (table) or raw integers and
 * explicit periods (JSON, CSV). Owns the hash table used for grouping.
 */
#include <stdlib.h>
#include <string.h>

#include "ctl_time.h"
#include "ctl_usage.h"
#include "rm_err.h"
#include "banned.h"

int ctl_by_parse(const char *s, unsigned *by)
{
	const char *p = s;

	if (!s || !by || !*s)
		return RM_EINVAL;
	while (*p) {
		size_t l = strcspn(p, ",");

		if (l == 6 && !strncmp(p, "server", 6))
			*by |= CTL_BY_SERVER;
		else if (l == 2 && !strncmp(p, "ce", 2))
			*by |= CTL_BY_CE;
		else if (l == 8 && !strncmp(p, "resource", 8))
			*by |= CTL_BY_RESOURCE;
		else
			return RM_EINVAL;
		p += l;
		if (*p == ',' && *++p == '\0')
			return RM_EINVAL;
	}
	return RM_OK;
}

/* ---- grouping ---- */

struct ctl_grp {
	struct ctl_urow *v;
	size_t n, cap;
	size_t *slot; /* hash slots: index + 1, 0 = empty */
	size_t nslot;
	size_t *seen; /* per group: the input block that last added its total */
};

static uint64_t ctl_hash(const struct ctl_urow *k)
{
	uint64_t h = 1469598103934665603ULL;
	const unsigned char *p;

	for (p = (const unsigned char *)k->server; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	h = (h ^ 0xff) * 1099511628211ULL;
	for (p = (const unsigned char *)k->ce; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	h ^= (uint64_t)k->start_ns * 0x9e3779b97f4a7c15ULL + (uint64_t)k->resource;
	return h * 1099511628211ULL;
}

static int ctl_same(const struct ctl_urow *a, const struct ctl_urow *b)
{
	return a->start_ns == b->start_ns && a->resource == b->resource &&
	       !strcmp(a->server, b->server) && !strcmp(a->ce, b->ce);
}

static int ctl_grp_grow(struct ctl_grp *g)
{
	size_t nslot = g->nslot ? g->nslot * 2 : 1024, i;
	size_t *slot = calloc(nslot, sizeof(*slot));

	if (!slot)
		return RM_ENOMEM;
	for (i = 0; i < g->n; i++) {
		size_t j = ctl_hash(&g->v[i]) & (nslot - 1);

		while (slot[j])
			j = (j + 1) & (nslot - 1);
		slot[j] = i + 1;
	}
	free(g->slot);
	g->slot = slot;
	g->nslot = nslot;
	return RM_OK;
}

/* The group of key k (created zeroed but for the key); NULL on ENOMEM. */
static struct ctl_urow *ctl_grp_get(struct ctl_grp *g, const struct ctl_urow *k, size_t *idx)
{
	size_t j;

	if ((g->n + 1) * 2 > g->nslot && ctl_grp_grow(g) != RM_OK)
		return NULL;
	for (j = ctl_hash(k) & (g->nslot - 1); g->slot[j]; j = (j + 1) & (g->nslot - 1))
		if (ctl_same(&g->v[g->slot[j] - 1], k)) {
			*idx = g->slot[j] - 1;
			return &g->v[*idx];
		}
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 256;
		struct ctl_urow *v = realloc(g->v, cap * sizeof(*v));
		size_t *seen = realloc(g->seen, cap * sizeof(*seen));

		if (v)
			g->v = v;
		if (seen)
			g->seen = seen;
		if (!v || !seen)
			return NULL;
		g->cap = cap;
	}
	g->v[g->n] = *k;
	g->seen[g->n] = SIZE_MAX;
	g->slot[j] = g->n + 1;
	*idx = g->n;
	return &g->v[g->n++];
}

static int ctl_is_v(const struct ctl_urow *r)
{
	return strcmp(r->ce, ST_CE_UNACCOUNTABLE) == 0;
}

static int ctl_urow_cmp(const void *pa, const void *pb)
{
	const struct ctl_urow *a = pa, *b = pb;
	int c;

	if (a->start_ns != b->start_ns)
		return a->start_ns < b->start_ns ? -1 : 1;
	if ((c = strcmp(a->server, b->server)) != 0)
		return c;
	if (a->resource != b->resource)
		return a->resource < b->resource ? -1 : 1;
	if (ctl_is_v(a) != ctl_is_v(b))
		return ctl_is_v(a) ? 1 : -1;
	if (a->value != b->value)
		return a->value > b->value ? -1 : 1;
	return strcmp(a->ce, b->ce);
}

static int ctl_cmp_i64(const void *pa, const void *pb)
{
	int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;

	return a < b ? -1 : a > b;
}

/*
 * Grouped by server and CE, every storage row is its own group, and the
 * storage order (server, resource, period, CEs by value, V last) is the
 * output order within a period: the rows are only converted and placed
 * by period, stably (one pass to count the periods, one to place).
 */
static int ctl_usage_each(const struct st_row *rows, size_t n, int show_v, int64_t since, int64_t until,
			  struct ctl_grp *g)
{
	int64_t *starts = NULL;
	size_t *pos = NULL, i, np = 0, lo, hi, acc;
	int rv = RM_ENOMEM;

	if (!n)
		return RM_OK;
	if (!(starts = malloc(n * sizeof(*starts))) || !(g->v = malloc(n * sizeof(*g->v))))
		goto done;
	for (i = 0; i < n; i++)
		starts[i] = rows[i].win_len_ns ? rows[i].win_start_ns : since;
	qsort(starts, n, sizeof(*starts), ctl_cmp_i64);
	for (i = 0; i < n; i++)
		if (!i || starts[i] != starts[np - 1])
			starts[np++] = starts[i];
	if (!(pos = calloc(np, sizeof(*pos))))
		goto done;
	/* pass 1: rows per period (binary search of the period), pass 2: place */
	for (int pass = 0; pass < 2; pass++) {
		for (i = 0, acc = 0; pass && i < np; i++) { /* counts -> first places */
			size_t c = pos[i];

			pos[i] = acc;
			acc += c;
		}
		for (i = 0; i < n; i++) {
			const struct st_row *r = &rows[i];
			int64_t st = r->win_len_ns ? r->win_start_ns : since;
			struct ctl_urow *u;

			if (!show_v && strcmp(r->ce, ST_CE_UNACCOUNTABLE) == 0)
				continue;
			for (lo = 0, hi = np; hi - lo > 1;)
				if (starts[(lo + hi) / 2] <= st)
					lo = (lo + hi) / 2;
				else
					hi = (lo + hi) / 2;
			if (!pass) {
				pos[lo]++;
				continue;
			}
			u = &g->v[pos[lo]++];
			ctl_copy(u->server, sizeof(u->server), r->server);
			ctl_copy(u->ce, sizeof(u->ce), r->ce);
			u->resource = r->resource;
			u->start_ns = st;
			u->end_ns = r->win_len_ns ? r->win_start_ns + r->win_len_ns : until;
			u->value = ctl_row_amount(r);
			u->total = r->total;
			g->n++;
		}
	}
	rv = RM_OK;
done:
	free(starts);
	free(pos);
	return rv;
}

int ctl_usage_group(const struct st_row *rows, size_t n, unsigned by, int show_v, size_t top,
		    int64_t since, int64_t until, struct ctl_urow **out, size_t *nout, size_t *left_out)
{
	struct ctl_grp g = { 0 };
	size_t i, block = 0, idx, w, run;
	int rv = RM_OK;

	*out = NULL;
	*nout = 0;
	if (left_out)
		*left_out = 0;
	if ((by & (CTL_BY_SERVER | CTL_BY_CE)) == (CTL_BY_SERVER | CTL_BY_CE)) {
		if ((rv = ctl_usage_each(rows, n, show_v, since, until, &g)) != 0)
			goto fail;
		goto keep_top;
	}
	for (i = 0; i < n; i++) {
		const struct st_row *r = &rows[i];
		struct ctl_urow k, *u;
		int64_t amt = ctl_row_amount(r);
		int is_v = strcmp(r->ce, ST_CE_UNACCOUNTABLE) == 0;

		/* rows of one (server, resource, period) are consecutive: a block */
		if (i && (strcmp(r->server, rows[i - 1].server) || r->resource != rows[i - 1].resource ||
			  r->win_start_ns != rows[i - 1].win_start_ns))
			block++;
		if (is_v && !show_v)
			continue;
		memset(&k, 0, sizeof(k));
		if (by & CTL_BY_SERVER)
			snprintf(k.server, sizeof(k.server), "%s", r->server);
		if (by & CTL_BY_CE)
			snprintf(k.ce, sizeof(k.ce), "%s", r->ce);
		k.resource = r->resource;
		k.start_ns = r->win_len_ns ? r->win_start_ns : since;
		k.end_ns = r->win_len_ns ? r->win_start_ns + r->win_len_ns : until;
		if (!(u = ctl_grp_get(&g, &k, &idx))) {
			rv = RM_ENOMEM;
			goto fail;
		}
		if (__builtin_add_overflow(u->value, amt, &u->value)) {
			rv = RM_EINVAL;
			goto fail;
		}
		if (g.seen[idx] != block) {
			g.seen[idx] = block;
			if (__builtin_add_overflow(u->total, r->total, &u->total)) {
				rv = RM_EINVAL;
				goto fail;
			}
		}
	}
	if (g.n)
		qsort(g.v, g.n, sizeof(g.v[0]), ctl_urow_cmp);
keep_top:
	/* top N per (period, server, resource): sorted, V last in each run */
	for (i = 0, w = 0, run = 0; top && i < g.n; i++) {
		if (i && (g.v[i].start_ns != g.v[i - 1].start_ns || g.v[i].resource != g.v[i - 1].resource ||
			  strcmp(g.v[i].server, g.v[i - 1].server)))
			run = 0;
		if (!ctl_is_v(&g.v[i]) && run++ >= top) {
			if (left_out)
				(*left_out)++;
			continue;
		}
		g.v[w++] = g.v[i];
	}
	if (top)
		g.n = w;
	free(g.slot);
	free(g.seen);
	if (!g.n) {
		free(g.v);
		return RM_OK;
	}
	*out = g.v;
	*nout = g.n;
	return RM_OK;
fail:
	free(g.slot);
	free(g.seen);
	free(g.v);
	return rv;
}

/* ---- output ---- */

/* Appends cell c padded to width w (right-aligned or not; the last
 * column unpadded), after the separator unless first: ctl_table_print's
 * layout. Returns the end. */
static char *ctl_cell(char *p, const char *c, size_t w, int right, int first, int last)
{
	size_t l = strlen(c);

	if (!first) {
		*p++ = ' ';
		*p++ = ' ';
	}
	if (right && l < w) {
		memset(p, ' ', w - l);
		p += w - l;
	}
	memcpy(p, c, l);
	p += l;
	if (!right && !last && l < w) {
		memset(p, ' ', w - l);
		p += w - l;
	}
	return p;
}

/* The formatted cells of a row that are not the row's own strings. */
struct ctl_fcells {
	char amount[32], rate[32], share[32];
};

/* A row of the table: names by pointer (a grouped row's own, or interned). */
struct ctl_trow {
	const char *server, *ce;
	enum st_resource resource;
	int64_t start_ns, end_ns, value;
	uint64_t total;
};

/*
 * The table of grouped rows, laid out as ctl_table_print would lay it out
 * (columns padded to their widest cell) without a fixed-size cell per
 * column and row and without printf: a --step 1d table may have a hundred
 * thousand rows. Periods are formatted once per distinct start.
 */
static int ctl_table_rows(FILE *f, const struct ctl_trow *rows, size_t n, unsigned by, int per_period)
{
	const char *head[CTL_MAXCOL];
	int right[CTL_MAXCOL] = { 0 };
	size_t w[CTL_MAXCOL], ncol = 0, i, c;
	struct ctl_fcells *fc;
	char period[40] = "", line[CTL_MAXCOL * 112], *p;
	const char *cells[CTL_MAXCOL];
	int64_t pstart = 0;
	int have_p = 0;

	if (!n) {
		fprintf(f, "no usage recorded in the selected range\n");
		return RM_OK;
	}
	if (per_period)
		head[ncol++] = "PERIOD";
	if (by & CTL_BY_SERVER)
		head[ncol++] = "SERVER";
	if (by & CTL_BY_CE)
		head[ncol++] = "CE";
	head[ncol++] = "RESOURCE";
	right[ncol] = 1;
	head[ncol++] = "AMOUNT";
	right[ncol] = 1;
	head[ncol++] = "AVERAGE";
	right[ncol] = 1;
	head[ncol++] = "SHARE";
	if (!(fc = malloc(n * sizeof(*fc))))
		return RM_ENOMEM;
	for (c = 0; c < ncol; c++)
		w[c] = strlen(head[c]);
	/* pass 1: format and measure; pass 2: print */
	for (int pass = 0; pass < 2; pass++) {
		if (pass) {
			p = line;
			for (c = 0; c < ncol; c++)
				p = ctl_cell(p, head[c], w[c], right[c], c == 0, c + 1 == ncol);
			*p++ = '\n';
			fwrite(line, 1, (size_t)(p - line), f);
		}
		have_p = 0;
		for (i = 0; i < n; i++) {
			const struct ctl_trow *r = &rows[i];

			if (per_period && (!have_p || r->start_ns != pstart)) {
				ctl_time_format(pstart = r->start_ns, period, sizeof(period));
				have_p = 1;
			}
			if (!pass) {
				ctl_human_amount(r->resource, r->value, fc[i].amount, sizeof(fc[i].amount));
				ctl_human_rate(r->resource, r->value, r->end_ns - r->start_ns, fc[i].rate,
					       sizeof(fc[i].rate));
				ctl_fmt_share(r->value, r->total, fc[i].share, sizeof(fc[i].share));
			}
			c = 0;
			if (per_period)
				cells[c++] = period;
			if (by & CTL_BY_SERVER)
				cells[c++] = r->server;
			if (by & CTL_BY_CE)
				cells[c++] = r->ce;
			cells[c++] = st_resource_name(r->resource);
			cells[c++] = fc[i].amount;
			cells[c++] = fc[i].rate;
			cells[c++] = fc[i].share;
			if (!pass) {
				for (c = 0; c < ncol; c++) {
					size_t l = strlen(cells[c]);

					if (l > w[c])
						w[c] = l;
				}
				continue;
			}
			p = line;
			for (c = 0; c < ncol; c++)
				p = ctl_cell(p, cells[c], w[c], right[c], c == 0, c + 1 == ncol);
			*p++ = '\n';
			fwrite(line, 1, (size_t)(p - line), f);
		}
	}
	free(fc);
	return RM_OK;
}

static int ctl_usage_table(FILE *f, const struct ctl_urow *rows, size_t n, unsigned by,
			   int per_period)
{
	struct ctl_trow *t = n ? malloc(n * sizeof(*t)) : NULL;
	size_t i;
	int rv;

	if (n && !t)
		return RM_ENOMEM;
	for (i = 0; i < n; i++)
		t[i] = (struct ctl_trow){ rows[i].server, rows[i].ce, rows[i].resource, rows[i].start_ns,
					  rows[i].end_ns, rows[i].value, rows[i].total };
	rv = ctl_table_rows(f, t, n, by, per_period);
	free(t);
	return rv;
}

/* The CSV header or the JSON "[" of grouped rows. */
static void ctl_usage_head(FILE *f, enum ctl_fmt fmt, unsigned by)
{
	if (fmt == CTL_FMT_CSV)
		fprintf(f, "period_start,period_end%s%s,resource,value,total,unit\n",
			by & CTL_BY_SERVER ? ",server" : "", by & CTL_BY_CE ? ",ce" : "");
	else
		fputc('[', f);
}

/* The formatted period of the previous record: rows share periods. */
struct ctl_period_cache {
	char s[40], e[40];
	int64_t s_ns, e_ns;
	int set;
};

/* One JSON object or CSV line of grouped row r. */
static void ctl_usage_rec(FILE *f, enum ctl_fmt fmt, const struct ctl_urow *r, unsigned by, int first,
			  struct ctl_period_cache *pc)
{
	struct rm_field fl[CTL_MAXCOL + 2];
	size_t nf = 0;

	if (!pc->set || r->start_ns != pc->s_ns)
		ctl_time_format(pc->s_ns = r->start_ns, pc->s, sizeof(pc->s));
	if (!pc->set || r->end_ns != pc->e_ns)
		ctl_time_format(pc->e_ns = r->end_ns, pc->e, sizeof(pc->e));
	pc->set = 1;
	fl[nf++] = (struct rm_field){ "period_start", pc->s, 0 };
	fl[nf++] = (struct rm_field){ "period_end", pc->e, 0 };
	if (by & CTL_BY_SERVER)
		fl[nf++] = (struct rm_field){ "server", r->server, 0 };
	if (by & CTL_BY_CE)
		fl[nf++] = (struct rm_field){ "ce", r->ce, 0 };
	fl[nf++] = (struct rm_field){ "resource", st_resource_name(r->resource), 0 };
	fl[nf++] = (struct rm_field){ "value", NULL, r->value };
	fl[nf++] = (struct rm_field){ "total", NULL,
				      r->total > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)r->total };
	fl[nf++] = (struct rm_field){ "unit", st_resource_unit(r->resource), 0 };
	ctl_record(f, fmt, fl, nf, first);
}

int ctl_usage_print(FILE *f, enum ctl_fmt fmt, const struct ctl_urow *rows, size_t n, unsigned by,
		    int per_period)
{
	struct ctl_period_cache pc = { .set = 0 };
	size_t i;
	int rv;

	if (fmt == CTL_FMT_TABLE) {
		if ((rv = ctl_usage_table(f, rows, n, by, per_period)) != 0)
			return rv;
		return ctl_flush(f);
	}
	ctl_usage_head(f, fmt, by);
	for (i = 0; i < n; i++)
		ctl_usage_rec(f, fmt, &rows[i], by, i == 0, &pc);
	if (fmt == CTL_FMT_JSON)
		fputs(n ? "\n]\n" : "]\n", f);
	return ctl_flush(f);
}

/* ---- whole days from the packed day series ---- */

struct ctl_days_int {
	struct ctl_ent {
		const char *ce;
		uint64_t value;
	} *ents;
	size_t ecap;
	struct ctl_trow *rows; /* table: the rows kept */
	size_t cap;
	char **names;          /* interned server and CE names: hash slots */
	size_t nslot, nnames;
	struct ctl_period_cache pc;
};

/* The interned copy of name (valid until ctl_days_free), NULL on ENOMEM. */
static const char *ctl_intern(struct ctl_days_int *in, const char *name)
{
	uint64_t h = 1469598103934665603ULL;
	const unsigned char *p;
	size_t j;

	if ((in->nnames + 1) * 2 > in->nslot) {
		size_t nslot = in->nslot ? in->nslot * 2 : 256, i;
		char **slot = calloc(nslot, sizeof(*slot));

		if (!slot)
			return NULL;
		for (i = 0; i < in->nslot; i++) {
			if (!in->names[i])
				continue;
			for (h = 1469598103934665603ULL, p = (const unsigned char *)in->names[i]; *p; p++)
				h = (h ^ *p) * 1099511628211ULL;
			for (j = h & (nslot - 1); slot[j]; j = (j + 1) & (nslot - 1))
				;
			slot[j] = in->names[i];
		}
		free(in->names);
		in->names = slot;
		in->nslot = nslot;
		h = 1469598103934665603ULL;
	}
	for (p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	for (j = h & (in->nslot - 1); in->names[j]; j = (j + 1) & (in->nslot - 1))
		if (strcmp(in->names[j], name) == 0)
			return in->names[j];
	if (!(in->names[j] = strdup(name)))
		return NULL;
	in->nnames++;
	return in->names[j];
}

/* Stable merge sort of e[0..n) by value, largest first (tmp: n entries).
 * The entries come sorted by name, so ties stay by name: the order of
 * st_query_usage_step, without comparing names. */
static void ctl_ent_sort(struct ctl_ent *e, struct ctl_ent *tmp, size_t n)
{
	size_t h = n / 2, i = 0, j, k = 0;

	if (n < 2)
		return;
	ctl_ent_sort(e, tmp, h);
	ctl_ent_sort(e + h, tmp, n - h);
	for (j = h; i < h && j < n;)
		tmp[k++] = e[j].value > e[i].value ? e[j++] : e[i++];
	while (i < h)
		tmp[k++] = e[i++];
	memcpy(e, tmp, k * sizeof(*e)); /* the rest e[j..n) is in place */
}

/* The top n of e[0..m) (sorted by name) into e[0..n), in the order of
 * ctl_ent_sort: one pass, each entry compared with the smallest kept. */
static void ctl_ent_top(struct ctl_ent *e, size_t m, size_t n)
{
	size_t k = 0, i, j;

	for (i = 0; i < m; i++) {
		struct ctl_ent x = e[i];

		if (k == n && x.value <= e[k - 1].value)
			continue;
		/* after every kept entry of at least its value (ties by name) */
		for (j = k < n ? k : n - 1; j > 0 && e[j - 1].value < x.value; j--)
			e[j] = e[j - 1];
		e[j] = x;
		if (k < n)
			k++;
	}
}

void ctl_days_init(struct ctl_days *x, FILE *f, enum ctl_fmt fmt, unsigned by, int show_v, size_t top)
{
	memset(x, 0, sizeof(*x));
	x->f = f;
	x->fmt = fmt;
	x->by = by;
	x->show_v = show_v;
	x->top = top;
}

/* One grouped row: kept for the table, printed at once otherwise. */
static int ctl_days_emit(struct ctl_days *x, const struct st_day *d, const char *ce, int64_t value)
{
	const char *server = x->by & CTL_BY_SERVER ? d->server : "";
	int64_t end = d->start_ns + 86400 * 1000000000LL;
	struct ctl_days_int *in = x->in;
	struct ctl_urow u;

	if (x->fmt == CTL_FMT_TABLE) {
		struct ctl_trow *t;

		if (x->n == in->cap) {
			size_t cap = in->cap ? in->cap * 2 : 4096;
			struct ctl_trow *v = realloc(in->rows, cap * sizeof(*v));

			if (!v)
				return RM_ENOMEM;
			in->rows = v;
			in->cap = cap;
		}
		t = &in->rows[x->n];
		if (!(t->server = ctl_intern(in, server)) || !(t->ce = ctl_intern(in, ce)))
			return RM_ENOMEM;
		t->resource = d->resource;
		t->start_ns = d->start_ns;
		t->end_ns = end;
		t->value = value;
		t->total = d->total;
		x->n++;
		return RM_OK;
	}
	ctl_copy(u.server, sizeof(u.server), server);
	ctl_copy(u.ce, sizeof(u.ce), ce);
	u.resource = d->resource;
	u.start_ns = d->start_ns;
	u.end_ns = end;
	u.value = value;
	u.total = d->total;
	if (x->n == 0)
		ctl_usage_head(x->f, x->fmt, x->by);
	ctl_usage_rec(x->f, x->fmt, &u, x->by, x->n == 0, &in->pc);
	x->n++;
	return RM_OK;
}

int ctl_days_add(void *arg, const struct st_day *d)
{
	struct ctl_days *x = arg;
	size_t i, keep;
	int rv;

	if (!x->in && !(x->in = calloc(1, sizeof(*x->in))))
		return RM_ENOMEM;
	if (d->total > (uint64_t)INT64_MAX || d->charged > (uint64_t)INT64_MAX)
		return RM_EINVAL;
	/* without CEs the unaccountable share is summed in: the value is U
	 * (without it, a group of no CE has no row) */
	if (!(x->by & CTL_BY_CE) && !x->show_v && !d->n)
		return RM_OK;
	if (!(x->by & CTL_BY_CE))
		return ctl_days_emit(x, d, "", x->show_v ? (int64_t)d->total : (int64_t)d->charged);
	if (d->n > x->in->ecap) {
		struct ctl_ent *e = realloc(x->in->ents, 2 * d->n * sizeof(*e));

		if (!e)
			return RM_ENOMEM;
		x->in->ents = e;
		x->in->ecap = d->n;
	}
	for (i = 0; i < d->n; i++) {
		x->in->ents[i].ce = d->ce[i];
		x->in->ents[i].value = d->value[i];
	}
	keep = x->top && x->top < d->n ? x->top : d->n;
	if (keep < d->n)
		ctl_ent_top(x->in->ents, d->n, keep);
	else
		ctl_ent_sort(x->in->ents, x->in->ents + d->n, d->n);
	x->left_out += d->n - keep;
	for (i = 0; i < keep; i++)
		if ((rv = ctl_days_emit(x, d, x->in->ents[i].ce, (int64_t)x->in->ents[i].value)) != 0)
			return rv;
	if (x->show_v)
		return ctl_days_emit(x, d, ST_CE_UNACCOUNTABLE, (int64_t)d->total - (int64_t)d->charged);
	return RM_OK;
}

int ctl_days_finish(struct ctl_days *x)
{
	int rv;

	if (x->fmt == CTL_FMT_TABLE) {
		if ((rv = ctl_table_rows(x->f, x->in ? x->in->rows : NULL, x->n, x->by, 1)) != 0)
			return rv;
		return ctl_flush(x->f);
	}
	if (x->n == 0)
		ctl_usage_head(x->f, x->fmt, x->by);
	if (x->fmt == CTL_FMT_JSON)
		fputs(x->n ? "\n]\n" : "]\n", x->f);
	return ctl_flush(x->f);
}

void ctl_days_free(struct ctl_days *x)
{
	size_t i;

	if (x->in) {
		free(x->in->ents);
		free(x->in->rows);
		for (i = 0; i < x->in->nslot; i++)
			free(x->in->names[i]);
		free(x->in->names);
	}
	free(x->in);
	x->in = NULL;
}
