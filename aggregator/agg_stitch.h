/*
 * agg_stitch.h - the stitcher: decides on whose behalf each segment part
 * was done, then hands the charges to the accountant.
 *
 * Today a part's CE comes from the configuration rules applied to the
 * remote end of the socket whose recv opened the segment (client address,
 * client port, server port), or, for Xen parts, from the domain id. Parts
 * that match no rule are unaccountable with reason "no_ce"; Xen driver-domain
 * CPU left after charging guests is "dom0". Cross-host pairing of sends and
 * receives by TCP byte range extends this module (issue 3).
 *
 * Not thread-safe: one thread calls it (the aggregator's server loop).
 */
#ifndef AGG_STITCH_H
#define AGG_STITCH_H

#include <stddef.h>

#include "rametr.pb-c.h"
#include "agg_account.h"
#include "agg_config.h"

struct agg_stitch;

/* cfg and acct are borrowed and must outlive the stitcher. */
int agg_stitch_open(struct agg_stitch **out, const struct agg_config *cfg, struct agg_account *acct);
void agg_stitch_close(struct agg_stitch *s);

/* A collector said hello: record the node. RM_OK, RM_EINVAL (err set), RM_ESQL. */
int agg_stitch_hello(struct agg_stitch *s, const Rametr__Hello *h, char *err, size_t errlen);

/*
 * Attribute and apply one batch (already validated by rm_wire_decode).
 * *duplicate = 1 if it had been applied before. Returns RM_OK; RM_EPROTO /
 * RM_EINVAL with err set if the batch is refused (the collector must not
 * resend it); RM_ESQL / RM_ENOMEM if it could not be stored now (retry).
 */
int agg_stitch_batch(struct agg_stitch *s, const Rametr__Batch *b, int *duplicate, char *err, size_t errlen);

#endif
