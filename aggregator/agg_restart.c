/*
 * agg_restart.c - splits a restarted collector's totals over the windows an
 * earlier instance left open (agg_restart.h).
 */
#include <string.h>

#include "agg_restart.h"
#include "banned.h"

void agg_restart_split(const uint64_t lump[ST_R_COUNT], const struct agg_restart_win *w, size_t n,
		       struct agg_restart_add *out, uint64_t short_by[ST_R_COUNT])
{
	size_t i;
	int r;

	memset(out, 0, n * sizeof(*out));
	for (r = 0; r < ST_R_COUNT; r++) {
		uint64_t need = 0, rem;

		for (i = 0; i < n; i++) {
			uint64_t held = w[i].has_total ? w[i].total[r] : w[i].charged[r];

			need = need + held < need ? UINT64_MAX : need + held;
			if (!w[i].has_total)
				out[i].total[r] = w[i].charged[r];
		}
		rem = lump[r] >= need ? lump[r] - need : 0;
		/* 0: not measured (the ebpf lump has CPU only), nothing to tell */
		short_by[r] = lump[r] >= need || !lump[r] ? 0 : need - lump[r];
		if (n && rem) {
			out[n - 1].total[r] += rem;
			out[n - 1].v[r] = rem;
		}
	}
}
