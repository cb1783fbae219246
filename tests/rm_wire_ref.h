/*
 * rm_wire_ref.h - what the codec tests compare against: random values that
 * stress an encoder (zeros, small values, varint boundaries, huge values),
 * and protobuf-c structures built field by field, independently of the
 * field tables the codec is generated from.
 */
#ifndef RM_WIRE_REF_H
#define RM_WIRE_REF_H

#include <stdint.h>
#include <string.h>

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

/*
 * Random values into the members every form of a part has (struct rm_part,
 * the kernel's record, and struct rm_wpart): p points to either. Tuples
 * and comm are each form's own.
 */
#define RM_REF_PART_VALUES(p)                                                     \
	do {                                                                      \
		(p)->seg_id = rm_ref_rval(0);                                     \
		(p)->win = rm_ref_rval(0) | 1;                                    \
		(p)->pid = (uint32_t)rm_ref_rval(UINT32_MAX);                     \
		(p)->tid = (uint32_t)rm_ref_rval(UINT32_MAX);                     \
		(p)->start_ns = rm_ref_rval(0);                                   \
		(p)->end_ns = rm_ref_rval(0);                                     \
		(p)->cpu_ns = rm_ref_rval(RM_WIRE_ABSURD_NS);                     \
		(p)->runq_ns = rm_ref_rval(RM_WIRE_ABSURD_NS);                    \
		(p)->rx_bytes = rm_ref_rval(0);                                   \
		(p)->tx_bytes = rm_ref_rval(0);                                   \
		(p)->disk_read = rm_ref_rval(0);                                  \
		(p)->disk_write = rm_ref_rval(0);                                 \
		(p)->flags = (uint32_t)rm_ref_rval(UINT32_MAX);                   \
		(p)->in_seq_start = rm_ref_rval(0);                               \
		(p)->in_seq_end = rm_ref_rval(0);                                 \
		(p)->out_seq_start = rm_ref_rval(0);                              \
		(p)->out_seq_end = rm_ref_rval(0);                                \
		(p)->parent_seg = rm_ref_rval(0);                                 \
		(p)->domid = (uint32_t)rm_ref_rval(UINT32_MAX);                   \
		(p)->vcpu = (uint32_t)rm_ref_rval(UINT32_MAX);                    \
		(p)->blocked_ns = rm_ref_rval(0);                                 \
		(p)->ends = (uint32_t)rm_ref_rval(UINT32_MAX);                    \
	} while (0)

/*
 * The members every form of a part has, copied by hand from k (struct rm_part,
 * the kernel's record, or struct rm_wpart) into a Rametr__SegmentPart p:
 * the reference the encoders are checked against. Tuples and comm are each
 * form's own.
 */
#define RM_REF_PART_COPY(p, k)                                                    \
	do {                                                                      \
		(p)->seg_id = (k)->seg_id;                                        \
		(p)->win = (k)->win;                                              \
		(p)->pid = (k)->pid;                                              \
		(p)->tid = (k)->tid;                                              \
		(p)->start_ns = (k)->start_ns;                                    \
		(p)->end_ns = (k)->end_ns;                                        \
		(p)->cpu_ns = (k)->cpu_ns;                                        \
		(p)->runq_ns = (k)->runq_ns;                                      \
		(p)->rx_bytes = (k)->rx_bytes;                                    \
		(p)->tx_bytes = (k)->tx_bytes;                                    \
		(p)->disk_read = (k)->disk_read;                                  \
		(p)->disk_write = (k)->disk_write;                                \
		(p)->flags = (k)->flags;                                          \
		(p)->in_seq_start = (k)->in_seq_start;                            \
		(p)->in_seq_end = (k)->in_seq_end;                                \
		(p)->out_seq_start = (k)->out_seq_start;                          \
		(p)->out_seq_end = (k)->out_seq_end;                              \
		(p)->parent_seg = (k)->parent_seg;                                \
		(p)->domid = (k)->domid;                                          \
		(p)->vcpu = (k)->vcpu;                                            \
		(p)->blocked_ns = (k)->blocked_ns;                                \
		(p)->ends = (k)->ends;                                            \
	} while (0)

/* A WindowTotals and the Go label counts it points to. */
struct rm_ref_wt {
	Rametr__WindowTotals w;
	Rametr__GoLabelCount g[RM_GO_LABELS_MAX];
	Rametr__GoLabelCount *gp[RM_GO_LABELS_MAX];
};

/* The WindowTotals of k (in r->w), every field by hand. */
static inline void rm_ref_totals(struct rm_ref_wt *r, const struct rm_totals *k)
{
	Rametr__WindowTotals *w = &r->w;
	size_t j;

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
	w->unseg_rt_ns = k->unseg_rt_ns;
	w->unseg_go_ns = k->unseg_go_ns;
	w->go_period_ns = k->go_period_ns;
	w->go_folded = k->go_folded;
	for (j = 0; j < k->n_go && j < RM_GO_LABELS_MAX; j++) {
		rametr__go_label_count__init(&r->g[j]);
		r->g[j].cookie = k->go[j].cookie;
		r->g[j].samples = k->go[j].samples;
		r->g[j].seg_samples = k->go[j].seg;
		r->g[j].pid = k->go[j].pid;
		r->gp[j] = &r->g[j];
	}
	w->n_go_labels = j;
	w->go_labels = j ? r->gp : NULL;
}

/* The totals protobuf-c decoded, every field by hand. */
static inline void rm_ref_totals_in(struct rm_totals *k, const Rametr__WindowTotals *w)
{
	size_t j;

	memset(k, 0, sizeof(*k));
	k->win = w->win;
	k->busy_ns = w->busy_ns;
	k->unseg_cpu_ns = w->unseg_cpu_ns;
	k->rx_bytes = w->rx_bytes;
	k->tx_bytes = w->tx_bytes;
	k->disk_read = w->disk_read;
	k->disk_write = w->disk_write;
	k->unseg_rx = w->unseg_rx;
	k->unseg_tx = w->unseg_tx;
	k->unseg_disk_read = w->unseg_disk_read;
	k->unseg_disk_write = w->unseg_disk_write;
	k->lost_ns = w->lost_ns;
	k->dropped_parts = w->dropped_parts;
	k->capacity_ns = w->capacity_ns;
	k->idle_ns = w->idle_ns;
	k->dropped_cpu_ns = w->dropped_cpu_ns;
	k->dropped_rx = w->dropped_rx;
	k->dropped_tx = w->dropped_tx;
	k->dropped_disk_read = w->dropped_disk_read;
	k->dropped_disk_write = w->dropped_disk_write;
	k->restart = w->restart;
	k->unseg_rt_ns = w->unseg_rt_ns;
	k->unseg_go_ns = w->unseg_go_ns;
	k->go_period_ns = w->go_period_ns;
	k->go_folded = w->go_folded;
	/* merged by cookie, folded past RM_GO_LABELS_MAX, as the codec does */
	for (j = 0; j < w->n_go_labels; j++)
		rm_totals_go_add_pid(k, w->go_labels[j]->pid, w->go_labels[j]->cookie, w->go_labels[j]->samples,
				     w->go_labels[j]->seg_samples);
}

static inline void rm_ref_tuple_in(struct rm_wtuple *d, const Rametr__Tuple *t)
{
	if (!t) {
		memset(d, 0, sizeof(*d));
		return;
	}
	rm_tuple_set(d, t->cookie, t->family, t->laddr.data, t->laddr.len, t->lport, t->raddr.data, t->raddr.len,
		     t->rport);
}

/* The part protobuf-c decoded, every field by hand (tuples normalised by rm_tuple_set, comm cut). */
static inline void rm_ref_part_in(struct rm_wpart *k, const Rametr__SegmentPart *p)
{
	memset(k, 0, sizeof(*k));
	k->seg_id = p->seg_id;
	k->win = p->win;
	k->pid = p->pid;
	k->tid = p->tid;
	if (p->comm)
		memcpy(k->comm, p->comm, strnlen(p->comm, RM_WIRE_COMM_MAX));
	k->start_ns = p->start_ns;
	k->end_ns = p->end_ns;
	k->cpu_ns = p->cpu_ns;
	k->runq_ns = p->runq_ns;
	k->rx_bytes = p->rx_bytes;
	k->tx_bytes = p->tx_bytes;
	k->disk_read = p->disk_read;
	k->disk_write = p->disk_write;
	k->flags = p->flags;
	rm_ref_tuple_in(&k->in, p->in);
	rm_ref_tuple_in(&k->out, p->out);
	k->in_seq_start = p->in_seq_start;
	k->in_seq_end = p->in_seq_end;
	k->out_seq_start = p->out_seq_start;
	k->out_seq_end = p->out_seq_end;
	k->parent_seg = p->parent_seg;
	k->domid = p->domid;
	k->vcpu = p->vcpu;
	k->blocked_ns = p->blocked_ns;
	k->ends = p->ends;
}

#endif
