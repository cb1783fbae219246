/*
 * agg_pair_int.h - what the files of the pairing engine share, and nothing
 * else includes: the records of held parts, connections ("flows") with
 * their sorted send ranges and waiting receivers, the engine's state, and
 * the functions one file of the engine calls in another:
 *   agg_pair_dist.c   distributions: built, split exactly, as text, names
 *   agg_pair_seq.c    where a byte range lies: its connection and its
 *                     position in that connection's unwrapped sequence space
 *   agg_pair_index.c  the send index: per connection, sends and waiting
 *                     receivers sorted by position, found without walks
 *   agg_pair_dgram.c  datagrams: which send a received datagram is
 *   agg_pair_ans.c    answers in order: which request of a read that
 *                     brought several a reply answers
 *   agg_pair.c        resolution: what a part is charged to, and when
 * Not thread-safe, as the engine.
 */
#ifndef AGG_PAIR_INT_H
#define AGG_PAIR_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "agg_pair.h"
#include "rm_err.h"

#define AGG_SEQ_BASE (1ULL << 40)  /* first unwrapped position of a flow (room below for late ranges) */
#define AGG_MAX_RANGE (1ULL << 47) /* longer byte ranges are malformed */
/*
 * A continuation chain (RM_PF_CONT, follow-replies) is paired with its
 * anchor record as a receiver with the send of one flow of its own: the
 * anchor "sends" [0, AGG_CHAIN_LEN) and each part of the chain "receives"
 * it, so it takes the anchor's distribution (precisely enough to split) and
 * waits, gives up and persists like any receiver.
 */
#define AGG_FAM_CHAIN 0x10000U     /* the flow of a chain (not an address family) */
#define AGG_CHAIN_LEN (1ULL << 20)
/*
 * A UDP flow (agg_pair_dgram.c): its key's family has AGG_FAM_DGRAM set;
 * positions are the datagram counts of rm_part_def.h (RM_SEQ_DGRAM off),
 * the sender's for sends, the receiver's for waiting receivers. It keeps at
 * most AGG_DGRAM_BP breakpoints of the offset between the two, and a
 * receiver looks past at most AGG_DGRAM_AHEAD sends of another length.
 */
#define AGG_FAM_DGRAM 0x20000U
#define AGG_DGRAM_BP 16
#define AGG_DGRAM_AHEAD 16
/*
 * The work per part is bounded by design, whatever the stream: a receiver's
 * evaluation examines at most AGG_MAX_SCAN send entries (the bytes past
 * them go to V "too_many_sends"), an overlap check at most AGG_MAX_SCAN (a
 * send not fully checked is untrusted), and a new or resolved send wakes at
 * most AGG_MAX_WAKE receivers (the others wait for their horizon). Entries
 * of one position are found by (position, id), never by walking them.
 */
#define AGG_MAX_SCAN 256
#define AGG_MAX_WAKE 256

/* A distribution: n shares, sorted (agg_share_cmp), weights > 0. */
struct agg_dist {
	struct agg_pair_share *s;
	size_t n;
};

struct agg_flow;

/* A UDP flow's offsets: from receiver position bp[i].r on, sender position = r + bp[i].d. */
struct agg_dgram {
	struct {
		uint64_t r;
		int64_t d;
	} bp[AGG_DGRAM_BP];
	size_t n;
	int64_t lag; /* receiver's start - sender's end (node clocks) of the last match */
};

struct agg_rec {
	uint64_t id;
	struct agg_rec *prev, *next;  /* held parts in arrival (= id) order */
	const char *node;
	uint32_t node_idx;
	uint64_t instance, window_ns, win, seg_id;
	uint64_t v[ST_R_COUNT];
	uint64_t start_ns, end_ns;    /* the part's, for the estimators' inputs */
	uint32_t flags;               /* RM_PF_* */
	uint32_t ends;                /* a merged record's requests answered (rm_wpart.ends) */
	uint32_t out_family, out_rport; /* remote end of its closing send (estimators) */
	uint64_t in_cookie; /* its in tuple's socket cookie (0: none, or a continuation's) */
	uint32_t pid;       /* its process (tgid; 0: not said) */
	uint32_t out_raddr[4];
	int64_t arrival;
	int resolved;
	int queued;                   /* on the work list */
	int capped;                   /* counted in stats.too_many_sends */
	int gc;                       /* on the forget-candidate list */
	struct agg_dist dist;         /* once resolved */
	struct agg_flow *in_flow;     /* while pending: the flow its bytes came on */
	uint64_t in_a, in_b;          /* unwrapped inbound range */
	uint64_t in_cut;              /* bytes from here on are past AGG_MAX_SCAN sends (last evaluation) */
	struct agg_flow *out_flow;    /* while its send range is in the index */
	uint64_t out_a, out_b;
	uint64_t grp;                 /* the request it serves: its segment, or an anchor's chain */
	int answer;                   /* its send is in the index and went back on the connection it read */
	int tail;                     /* a chain anchored where it ended without a reply (a request's tail) */
	int ans_wait;                 /* counted in stats.answers_waiting */
};

/* Directed connection: bytes from src:sport to dst:dport. */
struct agg_fkey {
	uint32_t family;
	uint32_t scope;   /* loopback: node index + 1 (a node's own connection); else 0 */
	uint8_t src[16], dst[16];
	uint32_t sport, dport;
};

struct agg_send {
	uint64_t a, b;         /* unwrapped [a, b) */
	uint64_t id;           /* its part's: entries are sorted by (a, id) */
	int64_t expires;
	int poisoned;          /* overlaps a send of another segment: untrusted */
	int used;              /* a receiver was resolved with these bytes */
	struct agg_rec *part;  /* NULL: removed (compacted away later) */
};

/* A pending receiver on its flow. */
struct agg_wait {
	uint64_t a, b;         /* its unwrapped inbound range */
	uint64_t id;           /* the receiver's: entries are sorted by (a, id) */
	struct agg_rec *r;     /* NULL: removed (compacted away later) */
};

/*
 * Both arrays of a flow are sorted by range start and searched by binary
 * search, bounded by the longest range they held (ranges may overlap).
 * Removal only clears the pointer; an array is compacted when half of it
 * is removed entries, so a long chain of receivers on one connection
 * costs O(log n) per step, not O(n).
 */
struct agg_flow {
	struct agg_fkey k;
	struct agg_flow *hnext;
	uint64_t ref;          /* unwrap reference: last range start seen */
	uint64_t maxlen;       /* longest send range held (recomputed when compacted) */
	struct agg_send *sends;
	size_t nsends, capsends, livesends;
	uint64_t wmaxlen;      /* longest receiver range held (recomputed when compacted) */
	struct agg_wait *wait;
	size_t nwait, capwait, livewait;
	int gc;
	struct agg_dgram *dg;  /* a UDP flow's offsets (NULL until its first receiver is matched) */
};

/* One step of the coverage sweep. */
struct agg_ev {
	uint64_t pos;
	int start;            /* 1: interval starts at pos, 0: ends */
	struct agg_send *s;
};

struct agg_pair {
	const struct agg_config *cfg;
	struct agg_pair_opts o;
	struct agg_pair_sink sink;
	char **names;                 /* interned strings */
	size_t nnames, capnames;
	struct agg_rec *head, *tail;  /* held parts */
	uint64_t next_id;
	struct agg_flow **ftab;       /* flow hash, fcap a power of two */
	size_t fcap, nflows;
	struct agg_rec **work;        /* work list: [whead, nwork) */
	size_t whead, nwork, capwork;
	struct agg_rec **gcl;         /* forget candidates */
	size_t ngc, capgc;
	struct agg_flow **fgc;        /* flows to drop if empty */
	size_t nfgc, capfgc;
	struct agg_pair_share *acc;   /* distribution being built */
	size_t nacc, capacc;
	struct agg_ev *evs;           /* sweep scratch */
	size_t capevs;
	struct agg_send **active;
	size_t capactive;
	struct agg_pair_piece *pieces;
	size_t cappieces;
	uint64_t *wtmp, *otmp;
	size_t captmp;
	struct agg_pair_stats st;
};

/* Grows *arr (elements of size bytes) to hold need; RM_OK or RM_ENOMEM (unchanged). */
static inline int agg_grow(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t ncap;
	void *na;

	if (need <= *cap)
		return RM_OK;
	ncap = *cap ? *cap : 16;
	while (ncap < need)
		ncap *= 2;
	if (!(na = realloc(*arr, ncap * size)))
		return RM_ENOMEM;
	*arr = na;
	*cap = ncap;
	return RM_OK;
}

/* ---- agg_pair_dist.c: distributions ---- */

/* Interned copy of s (NULL on ENOMEM); *idx its index when idx != NULL. */
const char *agg_intern(struct agg_pair *e, const char *s, uint32_t *idx);

/* Adds weight w for CE ce (or V reason) to e->acc, merging a share already there. */
int agg_acc_add(struct agg_pair *e, const char *ce, const char *reason, uint64_t w);

/* Makes e->wtmp and e->otmp hold n values. */
int agg_tmp_reserve(struct agg_pair *e, size_t n);

/* Adds `bytes` spread over distribution d (largest remainder) to e->acc. */
int agg_acc_add_dist(struct agg_pair *e, const struct agg_dist *d, uint64_t bytes);

/* Moves e->acc (non-empty) into a sorted, owned distribution. */
int agg_acc_take(struct agg_pair *e, struct agg_dist *out);

/* Parses agg_pair_dist_format's text into e->acc. RM_OK, RM_EINVAL, RM_ENOMEM. */
int agg_dist_parse(struct agg_pair *e, const char *text);

/* Frees d's shares; d is empty after. */
void agg_dist_free(struct agg_dist *d);

/* ---- agg_pair_seq.c: connections and positions ---- */

/* Hash of a flow key (all its bytes). */
uint64_t agg_fkey_hash(const struct agg_fkey *k);

/* Whether t is an IPv4 or IPv6 tuple. */
int agg_tuple_ip(const struct rm_wtuple *t);

/* Whether a and b name the same socket (cookie and both ends). */
int agg_same_conn(const struct rm_wtuple *a, const struct rm_wtuple *b);

/*
 * The directed key of tuple t as seen on node node_idx: sending = the bytes
 * go from t's local end to its remote end, else from remote to local.
 * Returns 0 if t is neither a TCP/IP tuple nor a unix one with both ends.
 */
int agg_fkey_make(struct agg_fkey *k, const struct rm_wtuple *t, int sending, uint32_t node_idx);

/* The flow of continuation chain `chain` of the collector run of node node_idx. */
void agg_chain_key(struct agg_fkey *k, uint32_t node_idx, uint64_t instance, uint64_t chain);

/* A part of a chain that waits for its anchor; an anchor record of a chain. */
int agg_is_chain_part(const struct rm_wpart *p);
int agg_is_chain_anchor(const struct rm_wpart *p);

/* Unwraps [start, end) on f into [*a, *b) and moves the reference there. */
void agg_flow_place(struct agg_flow *f, uint64_t start, uint64_t end, uint64_t *a, uint64_t *b);

/* Whether [start, end) is a well-formed byte range (not longer than AGG_MAX_RANGE). */
int agg_valid_range(uint64_t start, uint64_t end);

/* Whether [start, end) on IP tuple t is one datagram's range (rm_part_def.h, RM_SEQ_DGRAM). */
int agg_is_dgram(const struct rm_wtuple *t, uint64_t start, uint64_t end);

/* ---- agg_pair_index.c: the send index ---- */

/* Frees f and its arrays (not unlinked). */
void agg_flow_free(struct agg_flow *f);

/* Removes f from the flow hash and frees it. */
void agg_flow_unlink(struct agg_pair *e, struct agg_flow *f);

/* Index of the first receiver waiting on f whose range starts at or after pos. */
size_t agg_wait_lb(const struct agg_flow *f, uint64_t pos);

/* Range of f->sends that may overlap [a, b): [*lo, *hi). */
void agg_send_window(const struct agg_flow *f, uint64_t a, uint64_t b, size_t *lo, size_t *hi);

/* Drops the removed entries of f's arrays when they are half of them (or force). */
void agg_flow_compact(struct agg_flow *f, int force);

/*
 * Queues the receivers waiting on f whose followed bytes overlap [a, b):
 * at most AGG_MAX_WAKE entries are examined, those nearest to b.
 */
int agg_trigger(struct agg_pair *e, struct agg_flow *f, uint64_t a, uint64_t b);

/* Takes pending receiver r off flow f (found by its position and id). */
void agg_wait_remove(struct agg_pair *e, struct agg_flow *f, struct agg_rec *r);

/* Removes r's send from its flow (if in the index). */
int agg_send_remove(struct agg_pair *e, struct agg_rec *r);

/* Puts r's send range into the index of its flow, marking overlaps. */
int agg_send_insert(struct agg_pair *e, struct agg_rec *r, const struct agg_fkey *k, uint64_t start, uint64_t end);

/* Makes r a pending receiver of bytes [start, end) on flow key k. */
int agg_wait_on(struct agg_pair *e, struct agg_rec *r, const struct agg_fkey *k, uint64_t start, uint64_t end);

/* ---- agg_pair_dgram.c: datagrams ---- */

/*
 * Evaluates pending receiver r of a UDP flow as agg_eval does a byte
 * range: the send its datagram is (see agg_pair_dgram.c), its distribution
 * into e->acc, *done when r can be resolved now (when final: a datagram no
 * send matches is V "unpaired", one whose sender is pending "past_horizon").
 */
int agg_dgram_eval(struct agg_pair *e, struct agg_rec *r, int final, int *done);

/* Queues the oldest receivers waiting on UDP flow f (at most AGG_MAX_WAKE). */
int agg_dgram_trigger(struct agg_pair *e, struct agg_flow *f);

/* ---- agg_pair_ans.c: answers in order ---- */

/*
 * Whether pending receiver r (its sends all resolved or not) is one of the
 * answers to a read that brought several requests, and decided as such:
 * *handled = 1 when r was resolved like the request its reply answers (its
 * fellow answers too), or must wait for the rest of the answers (not when
 * final); 0 when agg_eval's split by bytes applies.
 */
int agg_ans_eval(struct agg_pair *e, struct agg_rec *r, int final, int *handled);

/*
 * Pending receiver r is given up at its horizon: the senders of its bytes
 * that only wait for more answers (agg_ans_eval) are split by bytes first,
 * so that r is not charged to V for waiting on them.
 */
int agg_ans_release(struct agg_pair *e, struct agg_rec *r);

/* ---- agg_pair.c: resolution ---- */

/* arrival + horizon, saturated. */
int64_t agg_deadline(const struct agg_pair *e, int64_t arrival);

/* Whether two held parts are parts of one segment (node, collector run, seg_id). */
int agg_same_segment(const struct agg_rec *x, const struct agg_rec *y);

/*
 * Coverage of pending receiver r's bytes by the sends of its flow into
 * e->acc; *done when r can be resolved now (always when final).
 */
int agg_eval(struct agg_pair *e, struct agg_rec *r, int final, int *done);

/* Resolves r with the distribution in e->acc (non-empty), tells the sink and wakes r's receivers. */
int agg_resolve(struct agg_pair *e, struct agg_rec *r, enum agg_pair_how how);

/* Puts r on the work list (once; not if resolved). RM_OK or RM_ENOMEM. */
int agg_work_push(struct agg_pair *e, struct agg_rec *r);

/* Puts f on the list of flows dropped if empty at the next collect. RM_OK or RM_ENOMEM. */
int agg_fgc_push(struct agg_pair *e, struct agg_flow *f);

#endif
