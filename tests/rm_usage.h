/*
 * rm_usage.h - what an integration test reads back from Rametr's database:
 * the CPU charged per CE at one node over a time range, U and V, with the
 * check that every window balances. Header-only, for the tests.
 */
#ifndef RM_USAGE_H
#define RM_USAGE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rm_err.h"
#include "st.h"

/*
 * Rametr's CPU per CE at node in [since, until) from database db: values[i]
 * for ces[i] (n of them; 0 for a CE without a row), *total = U, *v = V.
 * With print, V's reasons are written to stderr. Returns RM_OK, a storage
 * error, or RM_EPROTO when a window's identity (sum_c U_c + V = U, V
 * explained by its reasons) does not hold.
 */
static inline int rm_usage_cpu(const char *db, const char *node, int64_t since, int64_t until,
			       const char *const *ces, size_t n, uint64_t *values, uint64_t *total, int64_t *v,
			       int print)
{
	struct st_query q = { since, until, node, NULL, ST_R_CPU, 0 };
	struct st_row *rows = NULL, *bad = NULL, *vr = NULL;
	size_t nr = 0, nbad = 0, nv = 0, i, j;
	st_db *d = NULL;
	int rv;

	memset(values, 0, n * sizeof(values[0]));
	*total = 0;
	*v = 0;
	if ((rv = st_open(&d, db, ST_OPEN_READONLY)) != RM_OK)
		return rv;
	if ((rv = st_query_usage(d, &q, &rows, &nr)) == RM_OK) {
		for (j = 0; j < nr; j++) {
			*total = rows[j].total;
			if (!strcmp(rows[j].ce, ST_CE_UNACCOUNTABLE))
				*v = rows[j].residual;
			for (i = 0; i < n; i++)
				if (!strcmp(rows[j].ce, ces[i]))
					values[i] = rows[j].value;
		}
		if (print && (rv = st_query_unacct(d, &q, &vr, &nv)) == RM_OK) {
			fprintf(stderr, "  %s V by reason:", node);
			for (j = 0; j < nv; j++)
				fprintf(stderr, " %s %.6f s", vr[j].reason,
					(double)(vr[j].value ? (int64_t)vr[j].value : vr[j].residual) / 1e9);
			fprintf(stderr, "\n");
		}
		q.resource = -1;
		if (rv == RM_OK)
			rv = st_query_identity(d, &q, &bad, &nbad);
		if (rv == RM_OK && nbad)
			rv = RM_EPROTO;
	}
	st_rows_free(vr);
	st_rows_free(bad);
	st_rows_free(rows);
	st_close(d);
	return rv;
}

#endif
