/*
 * ctl_bill.c - the pure core of `rametrctl bill`: rate card parsing and
 * lookup, the integer allocation of the unaccountable share (largest
 * remainder), prices in micro-units, and the FOCUS 1.2 rows (with the 1.3
 * allocation columns and x_Rametr* columns) as CSV or JSON.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_bill.h"
#include "ctl_time.h"
#include "rm_conf.h"
#include "rm_err.h"
#include "banned.h"

#define NS_PER_CORE_HOUR (3600LL * 1000000000LL)
#define BYTES_PER_GIB (1024LL * 1024 * 1024)

/* ---- rate card ---- */

/* A decimal with at most 6 fraction digits into micro-units. */
static int ctl_micro(const char *s, int64_t *out)
{
	int64_t v = 0;
	int frac = -1;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s == '.' && frac < 0) {
			frac = 0;
			continue;
		}
		if (!isdigit((unsigned char)*s) || frac == 6 || v > (INT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (*s - '0');
		if (frac >= 0)
			frac++;
	}
	for (frac = frac < 0 ? 0 : frac; frac < 6; frac++) {
		if (v > INT64_MAX / 10)
			return -1;
		v *= 10;
	}
	*out = v;
	return 0;
}

struct ctl_rates_read {
	struct ctl_rates *rt;
	struct ctl_rate_set *cur; /* the section being read; NULL at the top or after a bad header */
	int in_section;           /* a section header was read (cur NULL: its keys are skipped) */
};

/* One header or key of the rate card (rm_conf_fn). */
static int ctl_rates_line(void *arg, const char *file, int line, char *section, char *key, char *val)
{
	struct ctl_rates_read *rd = arg;
	struct ctl_rates *rt = rd->rt;
	struct ctl_rate_set *cur;
	enum st_resource r;
	char *nm;

	if (!key) {
		rd->in_section = 1;
		rd->cur = NULL;
		if (strcmp(section, "default") == 0) {
			rd->cur = &rt->set[0];
			return RM_OK;
		}
		nm = strchr(section, ' ');
		if (!nm || (strncmp(section, "server ", 7) && strncmp(section, "class ", 6)) ||
		    !*(nm = rm_conf_trim(nm)) || strlen(nm) > ST_NAME_MAX) {
			rm_log_error("%s:%d: unknown section '[%s]' ([default], [server NAME], [class NAME])", file,
				     line, section);
			return RM_ECONFIG;
		}
		if (rt->nset == CTL_RATE_SETS_MAX) {
			rm_log_error("%s:%d: more than %d sections", file, line, CTL_RATE_SETS_MAX);
			return RM_ECONFIG;
		}
		rd->cur = cur = &rt->set[rt->nset++];
		cur->is_class = section[0] == 'c';
		snprintf(cur->name, sizeof(cur->name), "%s", nm);
		return RM_OK;
	}
	if (!rd->in_section) {
		if (strcmp(key, "currency") == 0 && strlen(val) == 3 && isupper((unsigned char)val[0]) &&
		    isupper((unsigned char)val[1]) && isupper((unsigned char)val[2]))
			snprintf(rt->currency, sizeof(rt->currency), "%s", val);
		else if (strcmp(key, "account") == 0 && *val && strlen(val) < sizeof(rt->account))
			snprintf(rt->account, sizeof(rt->account), "%s", val);
		else if (strcmp(key, "issuer") == 0 && *val && strlen(val) < sizeof(rt->issuer))
			snprintf(rt->issuer, sizeof(rt->issuer), "%s", val);
		else {
			rm_log_error("%s:%d: invalid '%s = %s' (currency = ISO 4217 code, account, issuer)", file,
				     line, key, val);
			return RM_ECONFIG;
		}
		return RM_OK;
	}
	if (!(cur = rd->cur)) /* the keys of a refused section: its header was reported */
		return RM_OK;
	if (cur->is_class && strcmp(key, "servers") == 0 && strlen(val) < sizeof(cur->servers)) {
		snprintf(cur->servers, sizeof(cur->servers), "%s", val);
		return RM_OK;
	}
	if (st_resource_parse(key, &r) != RM_OK) {
		rm_log_error("%s:%d: unknown key '%s' (cpu, net_rx, net_tx, disk_read, disk_write%s)", file, line,
			     key, cur->is_class ? ", servers" : "");
		return RM_ECONFIG;
	}
	if (ctl_micro(val, &cur->price[r])) {
		rm_log_error("%s:%d: invalid price '%s' for %s (a decimal >= 0, at most 6 decimals)", file, line,
			     val, key);
		return RM_ECONFIG;
	}
	cur->has[r] = 1;
	return RM_OK;
}

int ctl_rates_parse(const char *text, size_t len, const char *name, struct ctl_rates *rt)
{
	struct ctl_rates_read rd = { rt, NULL, 0 };
	int rv;

	memset(rt, 0, sizeof(*rt));
	snprintf(rt->currency, sizeof(rt->currency), "USD");
	snprintf(rt->account, sizeof(rt->account), "rametr");
	snprintf(rt->issuer, sizeof(rt->issuer), "Rametr");
	rt->nset = 1; /* [default] */
	rv = rm_conf_parse(text ? text : "", text ? len : 0, name, ctl_rates_line, &rd);
	return rv == RM_OK ? RM_OK : RM_ECONFIG;
}

/* Whether the comma-separated list holds name. */
static int ctl_in_list(const char *list, const char *name)
{
	size_t nl = strlen(name);

	while (*list) {
		size_t l;

		while (*list == ' ' || *list == ',')
			list++;
		l = strcspn(list, ", ");
		if (l == nl && strncmp(list, name, l) == 0)
			return 1;
		list += l;
	}
	return 0;
}

int64_t ctl_rates_price(const struct ctl_rates *rt, const char *server, enum st_resource r)
{
	size_t i;

	for (i = 1; i < rt->nset; i++)
		if (!rt->set[i].is_class && rt->set[i].has[r] && strcmp(rt->set[i].name, server) == 0)
			return rt->set[i].price[r];
	for (i = 1; i < rt->nset; i++)
		if (rt->set[i].is_class && rt->set[i].has[r] && ctl_in_list(rt->set[i].servers, server))
			return rt->set[i].price[r];
	return rt->set[0].has[r] ? rt->set[0].price[r] : 0;
}

int ctl_share_parse(const char *s, enum ctl_share *out)
{
	if (!s || !out)
		return RM_EINVAL;
	if (strcmp(s, "none") == 0)
		*out = CTL_SHARE_NONE;
	else if (strcmp(s, "weighted") == 0)
		*out = CTL_SHARE_WEIGHTED;
	else if (strcmp(s, "even") == 0)
		*out = CTL_SHARE_EVEN;
	else
		return RM_EINVAL;
	return RM_OK;
}

/* ---- allocation ---- */

struct ctl_rem {
	size_t idx;
	unsigned __int128 rem;
};

static const struct ctl_charge *ctl_sort_base;

static int ctl_rem_cmp(const void *pa, const void *pb)
{
	const struct ctl_rem *a = pa, *b = pb;

	if (a->rem != b->rem)
		return a->rem > b->rem ? -1 : 1;
	return strcmp(ctl_sort_base[a->idx].tenant, ctl_sort_base[b->idx].tenant);
}

/*
 * Splits v >= 0 over c[0..k) by weights w (their measured usage; all equal
 * when even or when they sum to 0): floor shares, then one more unit to the
 * largest remainders (ties by tenant name). Exact: the shares sum to v.
 */
static int ctl_split(struct ctl_charge *c, size_t k, int64_t v, int even)
{
	unsigned __int128 sum = 0;
	struct ctl_rem *rem;
	int64_t given = 0;
	size_t i;

	for (i = 0; i < k && !even; i++)
		sum += (unsigned __int128)(c[i].measured > 0 ? c[i].measured : 0);
	if (sum == 0)
		even = 1;
	if (!(rem = malloc(k * sizeof(*rem))))
		return RM_ENOMEM;
	for (i = 0; i < k; i++) {
		unsigned __int128 w = even ? 1 : (unsigned __int128)(c[i].measured > 0 ? c[i].measured : 0);
		unsigned __int128 num = (unsigned __int128)v * w, den = even ? k : sum;

		c[i].shared = (int64_t)(num / den);
		given += c[i].shared;
		rem[i].idx = i;
		rem[i].rem = num % den;
	}
	ctl_sort_base = c;
	qsort(rem, k, sizeof(*rem), ctl_rem_cmp);
	for (i = 0; given < v; i++, given++)
		c[rem[i].idx].shared++;
	free(rem);
	return RM_OK;
}

static int ctl_charge_cmp(const void *pa, const void *pb)
{
	const struct ctl_charge *a = pa, *b = pb;
	int c;

	if (a->start_ns != b->start_ns)
		return a->start_ns < b->start_ns ? -1 : 1;
	if ((c = strcmp(a->tenant, b->tenant)) != 0)
		return c;
	if ((c = strcmp(a->server, b->server)) != 0)
		return c;
	return (int)a->resource - (int)b->resource;
}

/* quantity * price / unit in micro-units, rounded half away from zero. */
static int ctl_cost(struct ctl_charge *c)
{
	__int128 num = (__int128)c->quantity * c->price, unit = c->resource == ST_R_CPU ? NS_PER_CORE_HOUR
											: BYTES_PER_GIB;
	__int128 q = (num >= 0 ? num + unit / 2 : num - unit / 2) / unit;

	if (q > INT64_MAX || q < INT64_MIN)
		return RM_EINVAL;
	c->cost = (int64_t)q;
	return RM_OK;
}

int ctl_bill_compute(const struct st_row *rows, size_t n, const struct ctl_rates *rt,
		     enum ctl_share share, struct ctl_charge **out, size_t *nout)
{
	struct ctl_charge *c = NULL;
	size_t i, j, w = 0;
	int rv = RM_OK;

	*out = NULL;
	*nout = 0;
	if (n && !(c = calloc(n, sizeof(*c))))
		return RM_ENOMEM;
	/* rows come grouped by (server, resource, period), the V row last */
	for (i = 0; i < n; i = j) {
		size_t first = w, k;
		int64_t v = 0;
		int has_v = 0;

		for (j = i; j < n && !strcmp(rows[j].server, rows[i].server) &&
			    rows[j].resource == rows[i].resource && rows[j].win_start_ns == rows[i].win_start_ns;
		     j++) {
			struct ctl_charge *x = &c[w];
			int is_v = strcmp(rows[j].ce, ST_CE_UNACCOUNTABLE) == 0;

			if (is_v) {
				v = rows[j].residual;
				has_v = 1;
			}
			snprintf(x->tenant, sizeof(x->tenant), "%s", rows[j].ce);
			snprintf(x->server, sizeof(x->server), "%s", rows[j].server);
			x->resource = rows[j].resource;
			x->start_ns = rows[j].win_start_ns;
			x->end_ns = rows[j].win_start_ns + rows[j].win_len_ns;
			x->measured = is_v ? rows[j].residual : (int64_t)rows[j].value;
			x->price = ctl_rates_price(rt, x->server, x->resource);
			x->method = CTL_SHARE_NONE;
			if (!is_v)
				w++;
		}
		k = w - first; /* the CEs of the group (V not yet stored) */
		if (share != CTL_SHARE_NONE && has_v && v > 0 && k) {
			if ((rv = ctl_split(&c[first], k, v, share == CTL_SHARE_EVEN)) != 0)
				goto fail;
			for (size_t m = first; m < w; m++)
				c[m].method = share;
		} else if (has_v && v != 0) {
			/* its own row: copy the V row (it was written at c[w]) */
			for (size_t m = i; m < j; m++)
				if (!strcmp(rows[m].ce, ST_CE_UNACCOUNTABLE)) {
					struct ctl_charge *x = &c[w++];

					snprintf(x->tenant, sizeof(x->tenant), "%s", ST_CE_UNACCOUNTABLE);
					snprintf(x->server, sizeof(x->server), "%s", rows[m].server);
					x->resource = rows[m].resource;
					x->start_ns = rows[m].win_start_ns;
					x->end_ns = rows[m].win_start_ns + rows[m].win_len_ns;
					x->measured = v;
					x->shared = 0;
					x->price = ctl_rates_price(rt, x->server, x->resource);
					x->method = CTL_SHARE_NONE;
				}
		}
	}
	/* quantities and costs; drop zero rows */
	for (i = 0, j = 0; i < w; i++) {
		if (__builtin_add_overflow(c[i].measured, c[i].shared, &c[i].quantity)) {
			rv = RM_EINVAL;
			goto fail;
		}
		if (c[i].quantity == 0)
			continue;
		if ((rv = ctl_cost(&c[i])) != 0)
			goto fail;
		c[j++] = c[i];
	}
	if (!j) {
		free(c);
		return RM_OK;
	}
	qsort(c, j, sizeof(*c), ctl_charge_cmp);
	*out = c;
	*nout = j;
	return RM_OK;
fail:
	free(c);
	return rv;
}

/* ---- FOCUS rows ---- */

const char *const ctl_focus_columns[] = {
	"BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodStart",
	"BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ChargeClass",
	"ChargeDescription", "ChargeFrequency", "BilledCost", "EffectiveCost", "ListCost",
	"ContractedCost", "ListUnitPrice", "ContractedUnitPrice", "PricingCategory",
	"PricingQuantity", "PricingUnit", "ConsumedQuantity", "ConsumedUnit", "ProviderName",
	"PublisherName", "InvoiceIssuerName", "ServiceName", "ServiceCategory", "ResourceId",
	"ResourceName", "ResourceType", "SubAccountId", "SubAccountName", "AllocatedMethodId",
	"AllocatedMethodDetails", "AllocatedResourceId", "x_RametrResource", "x_RametrQuantity",
	"x_RametrUnit", "x_RametrMeasured", "x_RametrUnaccountableShare",
};
const size_t ctl_focus_ncolumns = sizeof(ctl_focus_columns) / sizeof(ctl_focus_columns[0]);

/* v / div as a decimal with `dec` fraction digits, rounded half away from 0. */
static char *ctl_decimal(char *buf, size_t len, int64_t v, int64_t div, int dec)
{
	unsigned __int128 a = v < 0 ? (unsigned __int128)(-(v + 1)) + 1 : (unsigned __int128)v, p = 1, q;
	char tmp[96], *e = tmp + sizeof(tmp) - 1;
	int i;

	for (i = 0; i < dec; i++)
		p *= 10;
	q = (a * p * 2 + (unsigned __int128)div) / ((unsigned __int128)div * 2);
	*e = '\0';
	e = ctl_fixed(e, q, dec);
	if (v < 0 && q)
		*--e = '-';
	ctl_copy(buf, len, e);
	return buf;
}

/* parts[0..n) joined into buf (len > 0), cut at len - 1 bytes. Returns buf.
 * A bill's per-row strings are built so, not by snprintf (a third of a
 * 25 000-row bill's time went to formatting them). */
static char *ctl_join(char *buf, size_t len, const char *const *parts, size_t n)
{
	size_t k = 0, i, l;

	for (i = 0; i < n && k + 1 < len; i++) {
		if ((l = strlen(parts[i])) > len - 1 - k)
			l = len - 1 - k;
		memcpy(buf + k, parts[i], l);
		k += l;
	}
	buf[k] = '\0';
	return buf;
}

static const char *ctl_method_name(enum ctl_share m)
{
	return m == CTL_SHARE_WEIGHTED ? "weighted" : m == CTL_SHARE_EVEN ? "even" : "none";
}

int ctl_bill_print(FILE *f, enum ctl_fmt fmt, const struct ctl_charge *c, size_t n,
		   const struct ctl_rates *rt, int64_t bp_start, int64_t bp_end, int header)
{
	static const char *const service[ST_R_COUNT] = { "Rametr CPU", "Rametr Network",
							 "Rametr Network", "Rametr Disk",
							 "Rametr Disk" };
	static const char *const category[ST_R_COUNT] = { "Compute", "Networking", "Networking",
							  "Storage", "Storage" };
	struct rm_field fl[64];
	char bps[40], bpe[40], cps[40], cpe[40], desc[200], cost[48], price[48], pq[64], details[256],
		method[48], measured[32], shared[32];
	int64_t cps_ns = INT64_MIN, cpe_ns = INT64_MIN; /* what cps and cpe hold */
	size_t i, k;

	if (fmt == CTL_FMT_TABLE)
		return RM_EINVAL;
	ctl_time_format(bp_start, bps, sizeof(bps));
	ctl_time_format(bp_end, bpe, sizeof(bpe));
	if (fmt == CTL_FMT_CSV && header)
		for (k = 0; k < ctl_focus_ncolumns; k++)
			fprintf(f, "%s%s", k ? "," : "", ctl_focus_columns[k]);
	if (fmt == CTL_FMT_CSV && header)
		fputc('\n', f);
	if (fmt == CTL_FMT_JSON)
		fputc('[', f);
	for (i = 0; i < n; i++) {
		const struct ctl_charge *x = &c[i];
		int cpu = x->resource == ST_R_CPU;
		int64_t unit = cpu ? NS_PER_CORE_HOUR : BYTES_PER_GIB;

		if (x->start_ns != cps_ns || cps_ns == INT64_MIN)
			ctl_time_format(cps_ns = x->start_ns, cps, sizeof(cps));
		if (x->end_ns != cpe_ns || cpe_ns == INT64_MIN)
			ctl_time_format(cpe_ns = x->end_ns, cpe, sizeof(cpe));
		ctl_join(desc, sizeof(desc),
			 (const char *const[]){ st_resource_name(x->resource), " of ", x->tenant, " on ", x->server,
						cpu ? " (per core-hour)" : " (per GiB)" }, 6);
		ctl_decimal(cost, sizeof(cost), x->cost, 1000000, 6);
		ctl_decimal(price, sizeof(price), x->price, 1000000, 6);
		ctl_decimal(pq, sizeof(pq), x->quantity, unit, 12);
		ctl_join(method, sizeof(method), (const char *const[]){ "rametr-", ctl_method_name(x->method) }, 2);
		ctl_decimal(measured, sizeof(measured), x->measured, 1, 0);
		ctl_decimal(shared, sizeof(shared), x->shared, 1, 0);
		ctl_join(details, sizeof(details),
			 (const char *const[]){ "{\"Measured\": ", measured, ", \"UnaccountableShare\": ", shared,
						", \"Unit\": \"", st_resource_unit(x->resource), "\", \"Share\": \"",
						ctl_method_name(x->method), "\"}" }, 9);
		k = 0;
		fl[k++] = (struct rm_field){ "BillingAccountId", rt->account, 0 };
		fl[k++] = (struct rm_field){ "BillingAccountName", rt->account, 0 };
		fl[k++] = (struct rm_field){ "BillingCurrency", rt->currency, 0 };
		fl[k++] = (struct rm_field){ "BillingPeriodStart", bps, 0 };
		fl[k++] = (struct rm_field){ "BillingPeriodEnd", bpe, 0 };
		fl[k++] = (struct rm_field){ "ChargePeriodStart", cps, 0 };
		fl[k++] = (struct rm_field){ "ChargePeriodEnd", cpe, 0 };
		fl[k++] = (struct rm_field){ "ChargeCategory", "Usage", 0 };
		fl[k++] = (struct rm_field){ "ChargeClass", "", 0 };
		fl[k++] = (struct rm_field){ "ChargeDescription", desc, 0 };
		fl[k++] = (struct rm_field){ "ChargeFrequency", "Usage-Based", 0 };
		fl[k++] = (struct rm_field){ "BilledCost", cost, 0 };
		fl[k++] = (struct rm_field){ "EffectiveCost", cost, 0 };
		fl[k++] = (struct rm_field){ "ListCost", cost, 0 };
		fl[k++] = (struct rm_field){ "ContractedCost", cost, 0 };
		fl[k++] = (struct rm_field){ "ListUnitPrice", price, 0 };
		fl[k++] = (struct rm_field){ "ContractedUnitPrice", price, 0 };
		fl[k++] = (struct rm_field){ "PricingCategory", "Standard", 0 };
		fl[k++] = (struct rm_field){ "PricingQuantity", pq, 0 };
		fl[k++] = (struct rm_field){ "PricingUnit", cpu ? "Core-Hours" : "GiB", 0 };
		fl[k++] = (struct rm_field){ "ConsumedQuantity", pq, 0 };
		fl[k++] = (struct rm_field){ "ConsumedUnit", cpu ? "Core-Hours" : "GiB", 0 };
		fl[k++] = (struct rm_field){ "ProviderName", "Rametr", 0 };
		fl[k++] = (struct rm_field){ "PublisherName", "Rametr", 0 };
		fl[k++] = (struct rm_field){ "InvoiceIssuerName", rt->issuer, 0 };
		fl[k++] = (struct rm_field){ "ServiceName", service[x->resource], 0 };
		fl[k++] = (struct rm_field){ "ServiceCategory", category[x->resource], 0 };
		fl[k++] = (struct rm_field){ "ResourceId", x->server, 0 };
		fl[k++] = (struct rm_field){ "ResourceName", x->server, 0 };
		fl[k++] = (struct rm_field){ "ResourceType", "Server", 0 };
		fl[k++] = (struct rm_field){ "SubAccountId", x->tenant, 0 };
		fl[k++] = (struct rm_field){ "SubAccountName", x->tenant, 0 };
		fl[k++] = (struct rm_field){ "AllocatedMethodId", method, 0 };
		fl[k++] = (struct rm_field){ "AllocatedMethodDetails", details, 0 };
		fl[k++] = (struct rm_field){ "AllocatedResourceId", x->tenant, 0 };
		fl[k++] = (struct rm_field){ "x_RametrResource", st_resource_name(x->resource), 0 };
		fl[k++] = (struct rm_field){ "x_RametrQuantity", NULL, x->quantity };
		fl[k++] = (struct rm_field){ "x_RametrUnit", st_resource_unit(x->resource), 0 };
		fl[k++] = (struct rm_field){ "x_RametrMeasured", NULL, x->measured };
		fl[k++] = (struct rm_field){ "x_RametrUnaccountableShare", NULL, x->shared };
		ctl_record(f, fmt, fl, k, i == 0);
	}
	if (fmt == CTL_FMT_JSON)
		fputs(n ? "\n]\n" : "]\n", f);
	return ctl_flush(f);
}
