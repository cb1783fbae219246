/*
 * ctl_bill.h - the pure core of `rametrctl bill`: the rate card, the
 * allocation of the unaccountable share to tenants, prices, and the FOCUS
 * rows. No files, clocks or database here: the driver (ctl_main.c) reads
 * the rate card text and the storage rows and writes what this returns.
 */
#ifndef RM_CTL_BILL_H
#define RM_CTL_BILL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ctl_out.h"
#include "st.h"

#define CTL_RATE_SETS_MAX 256

/* Prices in micro-units of the currency per pricing unit: per core-hour
 * for cpu, per GiB for the byte resources. */
struct ctl_rate_set {
	char name[64];        /* "" for [default], else the server or class name */
	int is_class;
	int64_t price[ST_R_COUNT];
	int has[ST_R_COUNT];  /* price[r] given */
	char servers[1024];   /* a class: its servers, comma-separated */
};

struct ctl_rates {
	char currency[4];     /* ISO 4217, default "USD" */
	char account[64];     /* BillingAccountId/Name, default "rametr" */
	char issuer[64];      /* InvoiceIssuerName, default "Rametr" */
	struct ctl_rate_set set[CTL_RATE_SETS_MAX];
	size_t nset;          /* set[0] is [default] */
};

/*
 * Parses a rate card, an INI file read as the daemons' configuration
 * (rm_conf_parse: comments start with '#' or ';' at a line's start or after
 * white space): top-level currency/account/issuer; sections
 * [default], [server NAME], [class NAME] (with servers = a, b) holding
 * cpu, net_rx, net_tx, disk_read, disk_write = decimal prices (at most 6
 * decimals; 0 gives showback). name is used in messages ("rates.ini:3:
 * ..."). RM_OK, or RM_ECONFIG after logging every problem.
 */
int ctl_rates_parse(const char *text, size_t len, const char *name, struct ctl_rates *out);

/* The price of resource r on server: [server NAME], else a [class] listing
 * it, else [default], else 0. */
int64_t ctl_rates_price(const struct ctl_rates *rt, const char *server, enum st_resource r);

enum ctl_share { CTL_SHARE_NONE, CTL_SHARE_WEIGHTED, CTL_SHARE_EVEN };

/* "none", "weighted", "even": RM_OK or RM_EINVAL (logs nothing). */
int ctl_share_parse(const char *s, enum ctl_share *out);

struct ctl_charge {
	char tenant[64];           /* a CE or ST_CE_UNACCOUNTABLE */
	char server[64];
	enum st_resource resource;
	int64_t start_ns, end_ns;  /* the charge period */
	int64_t measured;          /* the tenant's own U_c (V for the unaccountable row) */
	int64_t shared;            /* its part of V (0 with CTL_SHARE_NONE) */
	int64_t quantity;          /* measured + shared */
	int64_t price;             /* micro-units per pricing unit */
	int64_t cost;              /* micro-units, quantity * price rounded half up */
	enum ctl_share method;
};

/*
 * Turns st_query_usage_step rows (per server, CE, resource and period, with
 * the ST_CE_UNACCOUNTABLE row of each group) into charges. The
 * unaccountable share V of each (server, resource, period) stays its own
 * row (none), or is split over the CEs of that group in proportion to their
 * usage (weighted; evenly when they used nothing) or evenly (even), by
 * largest remainder, so that per group the quantities sum to U exactly. A
 * negative V, or a V with no CE to carry it, stays its own row. Rows with
 * quantity 0 are left out. Sorted by period, tenant, server, resource.
 * RM_OK with *out malloc'd (NULL when *n = 0), RM_EINVAL (a sum or cost
 * beyond int64), RM_ENOMEM. Pure.
 */
int ctl_bill_compute(const struct st_row *rows, size_t n, const struct ctl_rates *rt,
		     enum ctl_share share, struct ctl_charge **out, size_t *nout);

/* The FOCUS columns, in output order, and their number. */
extern const char *const ctl_focus_columns[];
extern const size_t ctl_focus_ncolumns;

/*
 * Prints charges as FOCUS rows (CSV with a header line when header != 0,
 * or a JSON array) for the billing period [bp_start, bp_end). Returns RM_OK,
 * RM_EIO, RM_EINVAL (fmt table).
 */
int ctl_bill_print(FILE *f, enum ctl_fmt fmt, const struct ctl_charge *c, size_t n,
		   const struct ctl_rates *rt, int64_t bp_start, int64_t bp_end, int header);

#endif
