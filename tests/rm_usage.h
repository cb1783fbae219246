/*
 * rm_usage.h - what the tests that run Rametr on the testbed's hosts read
 * back from its database: the CPU Rametr charged per CE at one node over a
 * span, its total U and V, with every window's balance checked.
 *
 * The includer links rm_storage and includes st.h and rm_err.h first.
 */
#ifndef RM_USAGE_H
#define RM_USAGE_H

#include <stdint.h>
#include <string.h>

/*
 * Rametr's CPU at node in [since, until) from database db: values[i] for
 * ces[i] (n of them; 0 for a CE without a row), *total (U) and *v (V's
 * residual). Returns RM_OK, st_*'s error, or RM_EPROTO if a window's
 * sum_c U_c + V is not U or its reasons do not explain V.
 */
static inline int rm_usage_cpu(const char *db, const char *node, int64_t since, int64_t until,
			       const char *const ces[], size_t n, uint64_t values[], uint64_t *total, int64_t *v)
{
	struct st_query q = { since, until, node, NULL, ST_R_CPU, 0 };
	struct st_row *rows = NULL, *bad = NULL;
	size_t nr = 0, nbad = 0, i, j;
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
		q.resource = -1;
		rv = st_query_identity(d, &q, &bad, &nbad);
		if (rv == RM_OK && nbad)
			rv = RM_EPROTO;
	}
	st_rows_free(bad);
	st_rows_free(rows);
	st_close(d);
	return rv;
}

#endif
