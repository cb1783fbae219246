/*
 * agg_stitch.c - attributes segment parts to CEs (see agg_stitch.h) and
 * converts a wire batch into the accountant's charges and window totals.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agg_stitch.h"
#include "rametr.h"
#include "rm_err.h"
#include "banned.h"

struct agg_stitch {
	const struct agg_config *cfg;
	struct agg_account *acct;
	struct agg_charge *ch;
	size_t chcap;
	struct agg_window *win;
	size_t wincap;
};

int agg_stitch_open(struct agg_stitch **out, const struct agg_config *cfg, struct agg_account *acct)
{
	struct agg_stitch *s;

	*out = NULL;
	if (!cfg || !acct)
		return RM_EINVAL;
	if (!(s = calloc(1, sizeof(*s))))
		return RM_ENOMEM;
	s->cfg = cfg;
	s->acct = acct;
	*out = s;
	return RM_OK;
}

void agg_stitch_close(struct agg_stitch *s)
{
	if (!s)
		return;
	free(s->ch);
	free(s->win);
	free(s);
}

static int64_t agg_now_unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int agg_stitch_hello(struct agg_stitch *s, const Rametr__Hello *h, char *err, size_t errlen)
{
	struct st_node n = {
		.node = h->node,
		.backend = h->backend,
		.hostname = h->hostname,
		.window_ns = h->window_ns,
		.clock_offset_ns = h->clock_offset_ns,
		.ncpu = h->ncpu,
		.seen_unix_ns = agg_now_unix_ns(),
	};
	int rv = agg_account_node(s->acct, &n);

	if (rv == RM_EINVAL)
		snprintf(err, errlen, "invalid hello from node '%s'", h->node ? h->node : "");
	return rv;
}

/* Who a part is charged to: a CE name, or NULL with *reason set. */
static const char *agg_resolve(const struct agg_stitch *s, const Rametr__SegmentPart *p, const char **reason)
{
	int i = -1;

	if (p->flags & RM_PF_DOMAIN) {
		i = agg_config_match_domain(s->cfg, p->domid);
		if (i < 0) {
			/* dom0's own remainder (not charged for guests' I/O) */
			*reason = (p->domid == 0 && !(p->flags & RM_PF_DRIVER)) ? AGG_REASON_DOM0 : AGG_REASON_NO_CE;
			return NULL;
		}
		return s->cfg->rules[i].ce;
	}
	if (p->in && p->in->raddr.len)
		i = agg_config_match_tuple(s->cfg, p->in->family, p->in->raddr.data, p->in->raddr.len,
					   p->in->rport, p->in->lport);
	if (i < 0) {
		*reason = AGG_REASON_NO_CE;
		return NULL;
	}
	return s->cfg->rules[i].ce;
}

static int agg_reserve(void **arr, size_t *cap, size_t need, size_t size)
{
	void *na;

	if (need <= *cap)
		return RM_OK;
	if (!(na = realloc(*arr, need * size)))
		return RM_ENOMEM;
	*arr = na;
	*cap = need;
	return RM_OK;
}

int agg_stitch_batch(struct agg_stitch *s, const Rametr__Batch *b, int *duplicate, char *err, size_t errlen)
{
	struct agg_batch_meta m = {
		.node = b->node,
		.backend = b->backend,
		.instance = b->instance,
		.seq = b->seq,
		.window_ns = b->window_ns,
	};
	size_t i;
	int rv;

	*duplicate = 0;
	if ((rv = agg_reserve((void **)&s->ch, &s->chcap, b->n_parts, sizeof(*s->ch))) != 0 ||
	    (rv = agg_reserve((void **)&s->win, &s->wincap, b->n_windows, sizeof(*s->win))) != 0)
		return rv;
	for (i = 0; i < b->n_parts; i++) {
		const Rametr__SegmentPart *p = b->parts[i];
		struct agg_charge *c = &s->ch[i];

		memset(c, 0, sizeof(*c));
		c->win = p->win;
		c->ce = agg_resolve(s, p, &c->reason);
		c->v[ST_R_CPU] = p->cpu_ns;
		c->v[ST_R_NET_RX] = p->rx_bytes;
		c->v[ST_R_NET_TX] = p->tx_bytes;
		c->v[ST_R_DISK_READ] = p->disk_read;
		c->v[ST_R_DISK_WRITE] = p->disk_write;
	}
	for (i = 0; i < b->n_windows; i++) {
		const Rametr__WindowTotals *t = b->windows[i];
		struct agg_window *w = &s->win[i];

		memset(w, 0, sizeof(*w));
		w->win = t->win;
		w->total[ST_R_CPU] = t->busy_ns;
		w->total[ST_R_NET_RX] = t->rx_bytes;
		w->total[ST_R_NET_TX] = t->tx_bytes;
		w->total[ST_R_DISK_READ] = t->disk_read;
		w->total[ST_R_DISK_WRITE] = t->disk_write;
		w->unseg[ST_R_CPU] = t->unseg_cpu_ns;
		w->unseg[ST_R_NET_RX] = t->unseg_rx;
		w->unseg[ST_R_NET_TX] = t->unseg_tx;
		w->unseg[ST_R_DISK_READ] = t->unseg_disk_read;
		w->unseg[ST_R_DISK_WRITE] = t->unseg_disk_write;
		w->lost_ns = t->lost_ns;
		w->capacity_ns = t->capacity_ns;
		w->dropped_parts = t->dropped_parts;
	}
	rv = agg_account_apply(s->acct, &m, s->ch, b->n_parts, s->win, b->n_windows, duplicate);
	if (rv == RM_EINVAL)
		snprintf(err, errlen, "batch %llu from node '%s' has a window beyond the representable time range",
			 (unsigned long long)b->seq, b->node);
	return rv;
}
