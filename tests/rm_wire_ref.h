/*
 * rm_wire_ref.h - what the codec tests compare against: random values that
 * stress an encoder (zeros, small values, varint boundaries, huge values),
 * and protobuf-c structures built field by field, independently of the
 * field tables the codec is generated from.
 */
#ifndef RM_WIRE_REF_H
#define RM_WIRE_REF_H

#include <stdint.h>

#include "rametr.pb-c.h"
#include "rm_part.h"

static uint64_t rm_ref_rng = 0x9e3779b97f4a7c15ull;

static inline uint64_t rm_ref_rnd(void)
{
	rm_ref_rng ^= rm_ref_rng << 13;
	rm_ref_rng ^= rm_ref_rng >> 7;
	rm_ref_rng ^= rm_ref_rng << 17;
	return rm_ref_rng;
}

/* 0 often, small values, values at varint boundaries, huge values; <= max unless max is 0 */
static inline uint64_t rm_ref_rval(uint64_t max)
{
	static const uint64_t edge[] = { 0, 1, 127, 128, 16383, 16384, 1ull << 32, UINT64_MAX };
	uint64_t v;

	switch (rm_ref_rnd() % 4) {
	case 0:
		v = 0;
		break;
	case 1:
		v = rm_ref_rnd() % 300;
		break;
	case 2:
		v = edge[rm_ref_rnd() % (sizeof(edge) / sizeof(edge[0]))];
		break;
	default:
		v = rm_ref_rnd() >> (rm_ref_rnd() % 64);
		break;
	}
	return max && v > max ? v % (max + 1) : v;
}

/* The WindowTotals of k, every field by hand. */
static inline void rm_ref_totals(Rametr__WindowTotals *w, const struct rm_totals *k)
{
	rametr__window_totals__init(w);
	w->win = k->win;
	w->busy_ns = k->busy_ns;
	w->unseg_cpu_ns = k->unseg_cpu_ns;
	w->rx_bytes = k->rx_bytes;
	w->tx_bytes = k->tx_bytes;
	w->disk_read = k->disk_read;
	w->disk_write = k->disk_write;
	w->unseg_rx = k->unseg_rx;
	w->unseg_tx = k->unseg_tx;
	w->unseg_disk_read = k->unseg_disk_read;
	w->unseg_disk_write = k->unseg_disk_write;
	w->lost_ns = k->lost_ns;
	w->dropped_parts = k->dropped_parts;
	w->capacity_ns = k->capacity_ns;
	w->idle_ns = k->idle_ns;
	w->dropped_cpu_ns = k->dropped_cpu_ns;
	w->dropped_rx = k->dropped_rx;
	w->dropped_tx = k->dropped_tx;
	w->dropped_disk_read = k->dropped_disk_read;
	w->dropped_disk_write = k->dropped_disk_write;
	w->restart = k->restart;
}

#endif
