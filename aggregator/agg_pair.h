/*
 * agg_pair.h - the pairing engine: follows causality across threads and
 * hosts by pairing each received byte range with the send that produced it
 * (seed 000 §5.1.1: inside a component causality is carried by the thread,
 * between components by the message).
 *
 * Pure logic: no I/O, no clock, no randomness. Given segment parts (with the
 * node that sent them and an arrival time on the aggregator's clock) it
 * decides, for each part, a distribution of its cost over CEs and reasons of
 * unaccountable usage (V), weighted by bytes, or "not yet".
 *
 * How a part is resolved, in this order:
 *   0. continuations (follow-replies, segmenter.h): a part flagged RM_PF_CONT
 *      without RM_PF_ANCHOR takes the distribution of its chain's anchor
 *      record (RM_PF_ANCHOR without RM_PF_CONT, same node and collector run,
 *      parent_seg = the chain), which is itself resolved by its inbound
 *      socket like any part: the request the chain's reply answered. An
 *      anchor record with no inbound socket (the chain answered nothing),
 *      or no anchor within the horizon: V "unanchored";
 *   1. Xen parts (RM_PF_DOMAIN): the domain rules (agg_config_match_domain),
 *      else "dom0" (dom0's remainder) or "no_ce";
 *   2. the configuration rules applied to the part's inbound socket
 *      (agg_config_match_tuple): the entry CEs, they take precedence;
 *      and when the rules match that socket seen from its other end, the
 *      part is a CE's own client receiving a reply: V "no_ce" (the CE's
 *      client is not a shared service; its work is not charged to the CE
 *      by pairing, as before pairing existed);
 *   3. a part flagged RM_PF_SEQ_SUSPECT, or whose inbound range is malformed:
 *      V "untrusted_range" (never guessed);
 *   4. a TCP inbound range (RM_PF_IN_SEQ, IPv4/IPv6 tuple with addresses;
 *      or a unix stream socket's, both ends named, on the same node):
 *      the range [in_seq_start, in_seq_end) received on tuple T (node B) is
 *      looked up among the send ranges on the mirrored tuple (laddr<->raddr,
 *      lport<->rport) reported by any node. Each byte covered by a send takes
 *      the distribution of the part that sent it (parts of one segment all
 *      carry the segment's inbound range, so a send carries its segment's
 *      CE); the part's distribution is the sum over the bytes, exact in
 *      integers (largest remainder). The part waits ("pending") until every
 *      byte is covered by a send whose part is resolved;
 *   5. an IPv4/IPv6 part without a TCP range whose inbound tuple names no
 *      remote port: a datagram on an unconnected UDP socket whose sender
 *      was not read (recvmmsg, io_uring, a part emitted before the recv
 *      returned): V "no_sender";
 *   6. anything else (no TCP range, no rule): V "no_ce". Datagrams are
 *      not paired across nodes: a UDP request no rule decides is "no_ce".
 * A part's own sends (RM_PF_OUT_SEQ, non-empty out range) enter the send
 * index whatever its resolution; a V resolution propagates to receivers as
 * V with the same reason, so work caused by unaccountable work stays
 * unaccountable. Except sends on a socket whose receiving end step 2
 * decides (the rules name it, from either end: a CE's entry or its own
 * client): no receiver would ever look them up, so they are not indexed
 * (stats.ruled_sends) and their part, once resolved, is not held.
 *
 * Untrusted ranges: send ranges of *different* segments on one connection
 * that overlap (two threads sending at once: the kernel read write_seq after
 * the socket lock was released) are both marked untrusted, for good: bytes a
 * receiver got from an untrusted send go to V "untrusted_range". Overlaps
 * among parts of one segment are normal (a segment's ASSOC parts in later
 * windows repeat its cumulative send range) and cover the same bytes once.
 * An overlap found after a receiver of those bytes was resolved cannot be
 * undone; it is counted in stats.late_overlaps.
 *
 * Time: a pending part is given up `horizon_ns` after its arrival (never on
 * node timestamps, which may be skewed by seconds: pairing is on bytes).
 * Then bytes no send covers go to V "unpaired", bytes covered by a send whose
 * part is still pending to V "past_horizon", untrusted bytes to
 * "untrusted_range", the rest to the senders' distributions. Send ranges
 * expire `horizon_ns` after their arrival. At most `max_held` parts are held
 * (pending or with a send in the index); beyond that the oldest is dropped:
 * if still pending, all its cost goes to V "past_horizon"
 * (stats.evicted counts them).
 *
 * Work is bounded per part, whatever the input: a receiver's bytes are
 * followed through at most 256 send entries (the bytes past them go to V
 * "too_many_sends", stats.too_many_sends), a send among more than 256
 * others is not checked against all of them and is untrusted
 * (stats.unchecked_sends), and a send or a resolved sender wakes at most
 * the 256 nearest waiting receivers (stats.capped_wakes; the others are
 * decided at their horizon). stats.scanned counts the index entries
 * examined.
 *
 * TCP sequence numbers are 32 bits: ranges are 64-bit start + length,
 * compared modulo 2^32; per connection they are unwrapped into one 64-bit
 * space relative to the last range seen on it (a range more than 2^31 bytes
 * away from it on the same connection would be misplaced). Ranges on
 * loopback addresses are kept per node (two nodes' 127.0.0.1 connections
 * are different connections).
 *
 * Results go to a sink, synchronously, from inside agg_pair_add(),
 * agg_pair_restore() and agg_pair_expire():
 *   resolved(r)  once per part: its distribution and its cost split into
 *                pieces (per CE or reason) that sum exactly to the part's;
 *                r->held says the engine keeps the part (its sends are in
 *                the index), so a caller persisting state must keep the
 *                distribution (agg_pair_dist_format) to restore it;
 *   forget(id)   once per part, after resolved(): the engine dropped it.
 * Pointers in r are valid during the call only. If a sink function returns
 * an error, the engine stops, returns that error and must be reset
 * (agg_pair_reset) before further use.
 *
 * Persistence is the caller's: to rebuild the engine after a restart, call
 * agg_pair_restore() for every part still held, in id order, with the
 * distribution of the resolved ones; pending parts then wait again.
 *
 * Not thread-safe: one thread uses an engine.
 */
#ifndef AGG_PAIR_H
#define AGG_PAIR_H

#include <stddef.h>
#include <stdint.h>

#include "agg_config.h"
#include "rm_part.h"
#include "st.h"

/* Where a part comes from. node: 1..ST_NAME_MAX bytes; window_ns > 0. */
struct agg_pair_src {
	const char *node;
	uint64_t instance;  /* collector run: seg_id is unique per (node, instance) */
	uint64_t window_ns; /* the node's window length (part.win * window_ns = window start) */
};

/*
 * One share of a distribution: bytes weight w (> 0) for CE ce, or, when ce
 * is NULL, for the V reason `reason`. Distributions are sorted: CEs by name,
 * then reasons by name; a name appears once.
 */
struct agg_pair_share {
	const char *ce;
	const char *reason;
	uint64_t w;
};

/* One piece of a part's cost: v[r] for CE ce (or V reason when ce is NULL). */
struct agg_pair_piece {
	const char *ce;
	const char *reason;
	uint64_t v[ST_R_COUNT];
};

/* How a part was resolved (for statistics). */
enum agg_pair_how {
	AGG_PAIR_BY_RULE = 1,  /* configuration rule (socket or Xen domain) */
	AGG_PAIR_BY_BYTES,     /* paired with upstream sends (may include V shares) */
	AGG_PAIR_BY_HORIZON,   /* given up at the horizon (partly paired or not) */
	AGG_PAIR_BY_EVICTION,  /* dropped because max_held was reached */
	AGG_PAIR_BY_NONE,      /* no rule and no TCP range ("no_ce"), untrusted, dom0 */
	AGG_PAIR_BY_RESTORE,   /* restored with its distribution (no resolved() call) */
};

struct agg_pair_result {
	uint64_t id;
	const char *node;   /* interned: valid until agg_pair_close */
	uint64_t instance, window_ns, win, seg_id;
	uint32_t flags;     /* the part's RM_PF_* */
	uint32_t ends;      /* a merged record's requests answered (rm_wpart.ends); 0 for one part */
	uint64_t start_ns, end_ns; /* the part's (node monotonic) */
	uint32_t out_family, out_rport; /* the part's out tuple: family (0 = none), remote port */
	const uint32_t *out_raddr;  /* and remote address (4 words, network order) */
	uint32_t pid;        /* the part's process (tgid; 0: not said): the runtime rule's weights are per process */
	uint64_t in_cookie;  /* the socket cookie its segment received on (0: none; a continuation's without
			       its anchor: 0): a Go part's label (agg_account_add_go) */
	const struct agg_pair_share *dist;
	size_t ndist;
	const struct agg_pair_piece *pieces; /* ndist pieces, same order as dist */
	enum agg_pair_how how;
	int split;          /* ndist > 1 and the part has a cost: its cost was split */
	int held;           /* the engine keeps the part (sends in the index) */
};

struct agg_pair_sink {
	void *arg;
	int (*resolved)(void *arg, const struct agg_pair_result *r);
	int (*forget)(void *arg, uint64_t id);
};

struct agg_pair_opts {
	uint64_t horizon_ns; /* > 0 */
	size_t max_held;     /* > 0 */
};

struct agg_pair;

/*
 * Opens an engine. cfg (rules) and sink are borrowed (sink is copied) and
 * must outlive the engine. Returns RM_OK and *out, RM_EINVAL (NULL cfg,
 * sink without functions, horizon or max_held 0), RM_ENOMEM.
 */
int agg_pair_open(struct agg_pair **out, const struct agg_config *cfg, const struct agg_pair_opts *opts,
		  const struct agg_pair_sink *sink);

/* Frees everything (no sink calls). NULL-tolerant. */
void agg_pair_close(struct agg_pair *e);

/* Drops every part, flow and send (no sink calls); ids start again at 1
   (agg_pair_restore then continues them after the restored ones). */
void agg_pair_reset(struct agg_pair *e);

/*
 * Adds a part that arrived at now_ns (aggregator clock, non-decreasing over
 * calls). Assigns it the next id (*id, increasing). The sink may be called
 * for this part and for any held part its bytes resolve. Returns RM_OK,
 * RM_EINVAL (bad src, NULL part), RM_ENOMEM or a sink's error.
 */
int agg_pair_add(struct agg_pair *e, const struct agg_pair_src *src, const struct rm_wpart *p, int64_t now_ns,
		 uint64_t *id);

/*
 * Puts back a part held before (same id, arrival, source): dist = the
 * distribution given by resolved() (agg_pair_dist_format text), or NULL for a
 * part that was pending. Ids must be given in increasing order and above
 * every id assigned so far by agg_pair_add; later adds get larger ids.
 * A restored pending part is evaluated again (the sink may be called).
 * Returns RM_OK, RM_EINVAL (bad arguments, ids out of order, malformed
 * dist), RM_ENOMEM or a sink's error.
 */
int agg_pair_restore(struct agg_pair *e, uint64_t id, const struct agg_pair_src *src, const struct rm_wpart *p,
		     int64_t arrival_ns, const char *dist);

/* The id the next agg_pair_add will assign. */
uint64_t agg_pair_next_id(const struct agg_pair *e);

/*
 * Gives up pending parts whose horizon has passed at now_ns, expires old
 * send ranges, and forgets what is no longer needed. Returns RM_OK,
 * RM_ENOMEM or a sink's error.
 */
int agg_pair_expire(struct agg_pair *e, int64_t now_ns);

/*
 * Gives up every pending part now, as if its horizon had passed (oldest
 * first, so receivers of given-up senders follow them); sends stay in the
 * index. For a stop that should leave nothing undecided. Returns as
 * agg_pair_expire.
 */
int agg_pair_give_up(struct agg_pair *e);

/*
 * The same in bounded steps: gives up at most max pending parts (0: no
 * limit), oldest first, those whose horizon passed at now_ns or, if all,
 * every one; *more (may be NULL) = 1 if one is left for another call.
 * Sends are not expired (agg_pair_expire does that). Returns as
 * agg_pair_expire. A caller that must stay responsive (a signal, a
 * collector waiting) calls it in a loop and checks between calls.
 */
int agg_pair_give_up_some(struct agg_pair *e, int64_t now_ns, int all, size_t max, int *more);

/*
 * Formats dist as text, "ce=w;...;!reason=w" (what agg_pair_restore reads),
 * into a new malloc'd string *out. RM_OK, RM_EINVAL (n == 0, a zero weight),
 * RM_ENOMEM.
 */
int agg_pair_dist_format(const struct agg_pair_share *dist, size_t n, char **out);

struct agg_pair_stats {
	uint64_t added, restored;
	uint64_t by_rule, by_bytes, by_horizon, by_none;
	uint64_t evicted;        /* pending parts given up because max_held was reached */
	uint64_t dropped_sends;  /* resolved parts dropped early (max_held) with their send */
	uint64_t split;          /* resolved parts whose cost was split over several shares */
	uint64_t late_overlaps;  /* overlaps found after a receiver of those bytes was resolved */
	uint64_t ruled_sends;    /* send ranges not indexed: the rules decide their receiver */
	uint64_t scanned;        /* index entries examined (the engine's work; bounded per part) */
	uint64_t too_many_sends; /* receivers with bytes past the sends followed per part (V) */
	uint64_t capped_wakes;   /* sends or senders that woke only the nearest receivers */
	uint64_t unchecked_sends; /* sends untrusted because too many sends were around to check */
	uint64_t answered_in_order; /* parts charged like the request their reply answers, among several
				       requests of one read (agg_pair_ans.c) */
	uint64_t answers_waiting; /* current: pending parts waiting for more answers to their read */
	uint64_t held, pending, sends, flows; /* current */
};
void agg_pair_get_stats(const struct agg_pair *e, struct agg_pair_stats *out);

/*
 * Splits total into n pieces proportional to weights w[0..n) (their sum
 * must be > 0): out[i] = floor(total * w[i] / W), then one more unit to the
 * pieces with the largest remainders (ties: lower index) until the pieces
 * sum exactly to total. Pure; exposed for tests.
 */
void agg_pair_apportion(uint64_t total, const uint64_t *w, size_t n, uint64_t *out);

#endif
