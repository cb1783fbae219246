/*
 * col_backend.h - what every backend (ebpf, replay, xen) hands to the
 * collector core, and nothing more.
 *
 * A backend produces segment parts (struct rm_part, see rametr.h) and
 * per-window node totals (struct col_window, summed over CPUs, as deltas since
 * the backend's previous report for that window) and pushes them into a
 * struct col_sink. The sink's functions are called from the backend's thread
 * only; they return RM_OK or an rm_err value, which the backend passes up.
 */
#ifndef COL_BACKEND_H
#define COL_BACKEND_H

#include <stdint.h>
#include <linux/types.h>

#include "rametr.h"

struct col_window {
	struct rm_wintot t;    /* t.win = window index; other fields are deltas */
	uint64_t capacity_ns;  /* ncpu * part of the window covered (delta) */
	uint64_t idle_ns;      /* idle time (Xen: idle domain), delta; 0 if unknown */
};

struct col_sink {
	void *arg;
	int (*part)(void *arg, const struct rm_part *p);
	int (*window)(void *arg, const struct col_window *w);
};

#endif
