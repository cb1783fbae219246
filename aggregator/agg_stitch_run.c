/*
 * agg_stitch_run.c - the stitcher's driver (agg_stitch_run.h): the horizon
 * clock and the wall clock around the clock-free stitcher, and the time
 * bound of the stop's charging.
 */
#include <stdlib.h>

#include "agg_stitch_run.h"
#include "rm_clock.h"
#include "rm_err.h"
#include "banned.h"

struct agg_stitch_run {
	struct agg_stitch *s;
	struct agg_stitch_run_opts o;
	int64_t clock0, base, last; /* horizon clock: base + (clock - clock0), never backwards */
};

/* The default source of the horizon clock. */
static int64_t agg_mono_ns(void *arg)
{
	(void)arg;
	return (int64_t)rm_clock_mono_ns();
}

/* The horizon clock: runs with the aggregator, continues after a restart. */
static int64_t agg_run_now(struct agg_stitch_run *r)
{
	int64_t c = r->o.clock(r->o.clock_arg), now;

	if (__builtin_sub_overflow(c, r->clock0, &now) || __builtin_add_overflow(now, r->base, &now))
		now = r->last;
	if (now < r->last)
		now = r->last;
	r->last = now;
	return now;
}

int agg_stitch_run_open(struct agg_stitch_run **out, const struct agg_config *cfg, struct agg_account *acct,
			const struct agg_stitch_run_opts *opts)
{
	struct agg_stitch_opts so = { 0 };
	struct agg_stitch_run *r;
	int rv;

	if (!out)
		return RM_EINVAL;
	*out = NULL;
	if (!(r = calloc(1, sizeof(*r))))
		return RM_ENOMEM;
	if (opts)
		r->o = *opts;
	if (!r->o.clock)
		r->o.clock = agg_mono_ns;
	so.stop = r->o.stop;
	if ((rv = agg_stitch_open(&r->s, cfg, acct, &so)) != 0) {
		free(r);
		return rv;
	}
	r->base = r->last = agg_stitch_resume_ns(r->s);
	r->clock0 = r->o.clock(r->o.clock_arg);
	*out = r;
	return RM_OK;
}

void agg_stitch_run_close(struct agg_stitch_run *r)
{
	if (!r)
		return;
	agg_stitch_close(r->s);
	free(r);
}

int agg_stitch_run_hello(struct agg_stitch_run *r, const Rametr__Hello *h, char *err, size_t errlen)
{
	return agg_stitch_hello(r->s, h, rm_clock_unix_ns(), err, errlen);
}

int agg_stitch_run_batch(struct agg_stitch_run *r, const struct rm_wbatch *b, int *duplicate, char *err,
			 size_t errlen)
{
	return agg_stitch_batch(r->s, b, agg_run_now(r), duplicate, err, errlen);
}

int agg_stitch_run_tick(struct agg_stitch_run *r)
{
	return agg_stitch_tick(r->s, agg_run_now(r));
}

int agg_stitch_run_give_up(struct agg_stitch_run *r, int64_t budget_ns)
{
	int64_t until = r->o.clock(r->o.clock_arg) + budget_ns;
	int rv, more;

	do {
		if ((rv = agg_stitch_give_up(r->s, &more)) != 0)
			return rv;
	} while (more && r->o.clock(r->o.clock_arg) < until);
	return more ? RM_ETIMEDOUT : RM_OK;
}

void agg_stitch_run_get_stats(const struct agg_stitch_run *r, struct agg_pair_stats *out)
{
	agg_stitch_get_stats(r->s, out);
}
