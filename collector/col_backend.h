/*
 * col_backend.h - what every backend (ebpf, replay, xen) hands to the
 * collector core, and nothing more.
 *
 * A backend produces segment parts (struct rm_part, see rametr.h) and
 * per-window node totals (struct rm_totals of rm_part.h, summed over CPUs,
 * as deltas since the backend's previous report for that window; win is
 * the window index) and pushes them into a
 * struct col_sink. The sink's functions are called from the backend's thread
 * only; they return RM_OK or an rm_err value, which the backend passes up.
 */
#ifndef COL_BACKEND_H
#define COL_BACKEND_H

#include <stdint.h>
#include <linux/types.h>

#include "rametr.h"
#include "rm_part.h"

/*
 * d += the kernel's per-CPU totals s (rametr.h), every total the kernel
 * keeps but win; capacity_ns and idle_ns are the backend's to add.
 */
#define COL_KADD_K(n, m) d->m += (n) == 1 ? 0 : s->m;
#define COL_KADD_N(n, m)
#define COL_KADD_(n, m, kind, rule) COL_KADD_##kind(n, m)
static inline void col_totals_add_kernel(struct rm_totals *d, const struct rm_wintot *s)
{
	RM_TOTALS_FIELDS(COL_KADD_)
}

struct col_sink {
	void *arg;
	int (*part)(void *arg, const struct rm_part *p);
	int (*window)(void *arg, const struct rm_totals *w);
};

#endif
