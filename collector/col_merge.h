/*
 * col_merge.h - sums, before they are encoded and sent, the segment parts
 * the aggregator charges by a configuration rule alone.
 *
 * The aggregator decides a part received on a socket its rules name (a CE's
 * entry, or such a socket seen from its other end: the CE's own client) by
 * the rule, before and instead of any pairing (agg_pair.h, step 2), and it
 * never looks up bytes sent on such a socket. So of those parts only the
 * sums per socket, thread and window matter: a server answering many small
 * requests on a few connections makes one record per connection and window
 * instead of one per request, which is what the collector would otherwise
 * encode and the aggregator decode, one by one. The aggregator sends the
 * sockets its rules decide with every Ack (rametr.proto Ack.decided); none
 * (no rules, estimators configured) means nothing is merged.
 *
 * A part is merged (col_merge_add returns 1) when, under the matches in
 * force:
 *   - it is none of: a continuation waiting for its anchor or an anchor
 *     record (follow-replies; a continuation anchored in place, RM_PF_CONT
 *     and RM_PF_ANCHOR, is decided by its inbound socket like any part), an
 *     inherited segment, a Xen domain or driver part;
 *   - its inbound socket is IPv4/IPv6 and decided: rm_match_tuple() finds
 *     a match naming it, from either end;
 *   - it sent no bytes (no RM_PF_OUT_SEQ range), or sent them on a decided
 *     socket.
 * Merged parts with the same (window, inbound socket cookie and remote end,
 * pid, tid) make one record (the remote end: one unconnected UDP socket
 * receives from many senders, each charged by its own address): the first part's identity and tuples (out: the first one
 * named), counters summed, start the earliest and end the latest, flags
 * or-ed, `ends` counting the parts that ended their segment (RM_PF_END: the
 * requests answered); no byte ranges (RM_PF_IN_SEQ, RM_PF_OUT_SEQ, RM_PF_SEQ_SUSPECT
 * cleared): the aggregator needs none for them. Per CE, server, resource and
 * window the aggregator charges exactly what it would have charged the parts.
 *
 * Matches change when the aggregator's configuration does: a set staged
 * from the sender's thread applies to parts added after the owner's next
 * col_merge_sync(); records merged before stay as they are (a part of a
 * socket a new configuration no longer decides, merged in the meantime, is
 * then charged to V, not guessed).
 *
 * Thread safety: col_merge_stage() may be called from any thread; every
 * other function from the owner's thread only.
 */
#ifndef COL_MERGE_H
#define COL_MERGE_H

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>

#include "rametr.h"
#include "rm_match.h" /* the sockets decided: decoded rametr.proto ThrottleMatches */

#define COL_MERGE_MAX_MATCH 64  /* = RM_WIRE_MAX_DECIDED */
#define COL_MERGE_SLOTS 4096    /* records held at most; further new keys go as they are */

struct col_merge;

struct col_merge_stats {
	uint64_t merged;   /* parts absorbed */
	uint64_t records;  /* records emitted by col_merge_drain */
	uint64_t full;     /* parts not merged because every slot was taken */
};

/* Returns RM_OK and *out (no matches in force: nothing merged), or RM_ENOMEM. */
int col_merge_open(struct col_merge **out);

/* Frees m and the records it still holds (drain first). NULL-tolerant. */
void col_merge_close(struct col_merge *m);

/*
 * Stages matches mm[0..n) (n <= COL_MERGE_MAX_MATCH, else none are staged
 * and RM_EINVAL is returned), copied, for the next col_merge_sync().
 * Staging the set in force again changes nothing. Thread-safe.
 */
int col_merge_stage(struct col_merge *m, const struct rm_match *mm, size_t n);

/* Puts the staged matches in force, if any were staged. Returns 1 if the
 * set in force changed, else 0. */
int col_merge_sync(struct col_merge *m);

/* Number of matches in force. */
size_t col_merge_nmatch(const struct col_merge *m);

/* Whether p would be merged under the matches in force (see above). Fills
 * m's cache of decisions per socket tuple, which never changes an answer. */
int col_merge_eligible(struct col_merge *m, const struct rm_part *p);

/* Absorbs p if it is eligible and a slot is free: returns 1, else 0 (the
 * caller sends p as is). */
int col_merge_add(struct col_merge *m, const struct rm_part *p);

/*
 * Hands every record held to emit (in the order their first part came) and
 * forgets them. If emit fails, the records not yet handed over stay held
 * and its error is returned; else RM_OK.
 */
int col_merge_drain(struct col_merge *m, int (*emit)(void *arg, const struct rm_part *p), void *arg);

/* Records held now. */
size_t col_merge_held(const struct col_merge *m);

void col_merge_get_stats(const struct col_merge *m, struct col_merge_stats *out);

#endif
