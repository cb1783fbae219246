/*
 * agg_account.h - the accountant: turns attributed charges and window totals
 * of one collector batch into U_c, V and U rows in storage, exactly once.
 * It writes through a storage interface (agg_store.h), never to a database
 * itself: its logic runs and is tested without one.
 *
 * One batch is applied in one storage transaction together with the
 * collector's sequence number, so a batch sent twice (lost ack, aggregator
 * restart) is recognised and applied once. In the same transaction go the
 * charges of parts of other nodes that the batch resolved (pairing, see
 * agg_pair.h), the split counts, and the changes to the parts the stitcher
 * holds (st_held_*), so that after a crash the held parts and the charges
 * agree. An expiry pass (no batch) uses the same transaction without a
 * sequence number. Charges are summed per (node, window, CE or reason,
 * resource) in memory before they are written.
 *
 * V reasons written here: "unsegmented" (work done outside any segment),
 * "no_ce" (segments whose client matched no CE rule and that received no
 * TCP byte range), "lost" (CPU of parts the kernel could not emit, slices
 * older than the kernel keeps, Xen lost-record spans), "dom0" (Xen
 * driver-domain CPU not charged to a guest), "untrusted_range" (bytes whose
 * TCP range cannot be trusted: overlapping sends of two threads on one
 * socket, a receive range with a gap or overlap), "unpaired" (received bytes
 * that no send covered within the horizon), "past_horizon" (received bytes
 * whose sender was still unresolved at the horizon, or parts dropped because
 * the aggregator held too many), "collector_restart" (work a killed
 * collector's windows hold that no stored part explains, from the totals
 * its node's next collector measured: agg_restart.h).
 * U is the collector's own measurement of the node (busy CPU, all socket and
 * disk bytes), so sum_c U_c + V = U is checked, not assumed: any difference
 * shows as the "unexplained" residual in storage queries.
 *
 * Not thread-safe: one thread applies batches.
 */
#ifndef AGG_ACCOUNT_H
#define AGG_ACCOUNT_H

#include <stddef.h>
#include <stdint.h>

#include "agg_store.h"
#include "rm_part.h"
#include "st.h"

#define AGG_REASON_UNSEGMENTED "unsegmented"
#define AGG_REASON_NO_CE "no_ce"
#define AGG_REASON_LOST "lost"
#define AGG_REASON_DROPPED "dropped"  /* parts the collector's kernel ring could not take */
#define AGG_REASON_DOM0 "dom0"
#define AGG_REASON_UNTRUSTED_RANGE "untrusted_range"
#define AGG_REASON_UNPAIRED "unpaired"
#define AGG_REASON_PAST_HORIZON "past_horizon"
#define AGG_REASON_UNANCHORED "unanchored"
#define AGG_REASON_NO_SENDER "no_sender" /* a datagram whose sender was not read (unconnected UDP socket) */
#define AGG_REASON_TOO_MANY_SENDS "too_many_sends" /* received bytes past the sends the pairing follows per part */
#define AGG_REASON_RUNTIME "runtime" /* a managed runtime's CPU outside segments that the runtime rule did not charge */

/*
 * The runtime rule. The collector reports, per window, the part of its
 * unsegmented CPU that threads of a process running a managed runtime (a Go
 * program, a JVM) used (rm_totals.unseg_rt_ns, of which Go programs'
 * unseg_go_ns): the runtime's own work (scheduler, sysmon, garbage
 * collector, JIT, a dispatcher) and the program's between requests, which
 * follow the requests it serves. Unless switched off, the accountant
 * charges that CPU of a window of a node to the CEs the node's runtime
 * threads served in that window (else in the window before), by weights:
 * per mille by each CE's share of the requests they answered, the rest by
 * its share of the CPU they were charged for it (agg_account_add_req) -
 * Go programs' CPU AGG_RT_GO_REQ_PM_DEFAULT per mille by requests, what
 * their goroutine labels left unlabelled (a window the label rule split)
 * AGG_RT_GO_LAB_REQ_PM_DEFAULT, other runtimes' AGG_RT_REQ_PM_DEFAULT
 * (measured: Go's runtime work follows the CPU the requests take more than
 * their count, a JVM's the count; once labels have charged the goroutines'
 * own work, what is left - the scheduler and the network poller waking
 * each call's goroutine - follows the count; docs/go.md);
 * the amounts sum to it exactly. What the Go label rule left unlabelled is
 * divided between the processes its counts name (rm_golabel.pid) by what
 * each is still owed (its part of the window's Go CPU by its samples, less
 * what its labelled CEs hold of the window) and goes to the CEs that
 * process served (in the window, else the one before); the rest per node
 * and kind: Go programs' CPU without counts (or counts that name no
 * process) to the CEs of the node's Go programs, other runtimes' (a JVM's)
 * to the CEs of the node's runtimes that are no Go program - two runtimes
 * of a kind on one node share their CEs; other servers' CEs get none. What finds
 * no CE stays V 'runtime' (so does all of it when the rule is off). The
 * CEs of a window are those this accountant saw charged in it: in this
 * batch or remembered from earlier ones (AGG_RT_WINS windows, AGG_RT_CES
 * CEs each, since the aggregator started; a CE past those has no weight).
 */
#define AGG_RT_REQ_PM_DEFAULT 700
#define AGG_RT_GO_REQ_PM_DEFAULT 300
#define AGG_RT_GO_LAB_REQ_PM_DEFAULT 1000
#define AGG_RT_WINS 64
#define AGG_RT_CES 64

/*
 * The Go label rule. A node's collector may send, with a window's totals,
 * a cpu-clock sampler's counts of its Go programs' samples per goroutine
 * label (rm_totals.go: a socket cookie, the one the goroutine's reader
 * received on; 0 a goroutine without a label; RM_GO_IDLE the runtime's own
 * stack). Samples are proportional to CPU, so they split the Go programs'
 * CPU of the window: unless switched off, when the batch carrying a
 * window's counts is committed, the CPU charged in this transaction for
 * that node-window's Go parts (RM_PF_GO, agg_account_add_go) plus the
 * window's unseg_go_ns is the pool, which is charged anew. The split is of
 * the window's whole Go CPU (the pool and what earlier batches charged for
 * its Go parts, remembered for AGG_GO_WINS windows, AGG_GO_WIN_ENTS
 * (cookie, destination)s each): each labelled cookie's share (its samples
 * / all samples, rounded down; or, when the counts also say which
 * segment each sample's thread was in, its parts' exact CPU corrected by
 * the samples where segment and label differ, if switched on:
 * agg_go_split in agg_account.c) goes to where the window's Go parts
 * received on that cookie were charged (several CEs or V reasons: in
 * proportion to their CPU, the rounding's remainder to the largest), else
 * to where that cookie's parts went in the latest window that had some
 * (AGG_GO_COOKIES cookies remembered, least recently used forgotten
 * first); the rest - cookie 0, RM_GO_IDLE, cookies never seen, the
 * roundings - is unlabelled. Storage only adds, so earlier batches'
 * charges stay: the pool goes to each destination (and to the unlabelled
 * share) in proportion to how far it is short of its share, which gives
 * each its share whenever the pool suffices. The unlabelled part goes as
 * the runtime rule charges Go programs' CPU (else V 'runtime'). Everything
 * sums to the pool exactly; the memories only make it more accurate and
 * are lost at a restart. Windows without counts: as before.
 */
#define AGG_GO_COOKIES 4096
#define AGG_GO_WINS 32       /* windows whose committed Go charges are remembered */
#define AGG_GO_WIN_ENTS 256  /* (cookie, destination)s remembered per window */
#define AGG_GO_KEYS 4096     /* CE and reason names the memories hold */

/* One attributed piece of usage: to a CE (ce != NULL) or to V (reason). */
struct agg_charge {
	uint64_t win;
	const char *ce;       /* borrowed; NULL = unaccountable */
	const char *reason;   /* borrowed; used when ce == NULL */
	uint64_t v[ST_R_COUNT];
	const char *node;     /* borrowed; NULL = the batch's node */
	uint64_t window_ns;   /* 0 = the batch's window length */
};

struct agg_batch_meta {
	const char *node, *backend;
	uint64_t instance, seq, window_ns;
};

struct agg_account;

/* store is copied; what it writes to must outlive the accountant. RM_OK,
   RM_EINVAL (a store function missing), RM_ENOMEM. */
int agg_account_open(struct agg_account **out, const struct agg_store *store);

/* The runtime rule (above): on (the default) or off, and its weights by
 * requests in per mille (0..1000; the rest by CPU): go_permille for Go
 * programs' CPU, go_lab_permille for what their labels left unlabelled in
 * a window the label rule split, req_permille for other runtimes'. RM_OK,
 * RM_EINVAL. */
int agg_account_set_runtime(struct agg_account *a, int on, unsigned req_permille, unsigned go_permille,
			    unsigned go_lab_permille);
void agg_account_close(struct agg_account *a);

/* The Go label rule (above): on (the default) or off. */
void agg_account_set_go_labels(struct agg_account *a, int on);

/* Whether the Go label rule corrects segments by the counts' samples by
 * segment, when a window's counts carry them (above): on, or off (the
 * default: labels alone; docs/go.md says why). */
void agg_account_set_go_label_segments(struct agg_account *a, int on);

/*
 * Starts applying a batch (m) or an expiry pass (m == NULL, then duplicate
 * may be NULL): opens the storage transaction, and for a batch checks its
 * (node, instance, seq): if applied before, sets *duplicate = 1, closes the
 * transaction and returns RM_OK (nothing else to do). m and the strings it
 * points to are borrowed until commit/abort. Returns RM_OK, RM_EINVAL (bad
 * meta), RM_ESTATE (already started), RM_ESQL.
 */
int agg_account_begin(struct agg_account *a, const struct agg_batch_meta *m, int *duplicate);

/* Adds a charge (in memory until commit). RM_OK, RM_EINVAL (no CE nor
 * reason, no node or window length for an expiry pass), RM_ESTATE, RM_ENOMEM. */
int agg_account_add(struct agg_account *a, const struct agg_charge *c);

/* Counts one split part of node (NULL = the batch's) in window win. As agg_account_add. */
int agg_account_add_split(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win);

/*
 * Adds to the estimators' inputs (st_est.h est_input) of (node, window win,
 * CE ce): completed requests, the sum of their response times (ns) and
 * inbound bytes; node NULL / window_ns 0 = the batch's. Summed in memory,
 * written at commit. As agg_account_add.
 */
int agg_account_add_est(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win, const char *ce,
			uint64_t requests, uint64_t rt_ns, uint64_t rx);

/*
 * Counts requests of CE ce answered, and CPU charged to it (ns), by threads
 * of a managed runtime (parts flagged RM_PF_RUNTIME) of process pid (0: not
 * said; go nonzero: a Go program's, RM_PF_GO) on node (NULL = the batch's)
 * in window win (window_ns 0 = the batch's): the runtime rule's weights,
 * kept in memory, never written. As agg_account_add; nothing is kept while
 * the rule is off.
 */
int agg_account_add_req(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win, const char *ce,
			uint32_t pid, int go, uint64_t requests, uint64_t cpu_ns);

/*
 * Counts CPU a Go program's part (RM_PF_GO) received on socket cookie (its
 * in tuple's; 0 for none) was charged, with agg_account_add in this
 * transaction, to CE ce or, ce NULL, to V reason, on node (NULL = the
 * batch's) in window win (window_ns 0 = the batch's): the Go label rule's
 * pool and its cookies' destinations. ce / reason are borrowed until
 * commit. Kept in memory, never written; nothing while the rule is off.
 * As agg_account_add.
 */
int agg_account_add_go(struct agg_account *a, const char *node, uint64_t window_ns, uint64_t win, uint64_t cookie,
		       const char *ce, const char *reason, uint64_t cpu_ns);

/*
 * A charge c of a Go program's part (RM_PF_GO) resolved only after the
 * label rule split its window in an earlier transaction (the stitcher held
 * it for pairing past the batch that carried the window's counts, so it was
 * not in that window's pool): its CPU is charged as the split charged the
 * window's CEs, in proportion to their amounts (the roundings' remainder
 * to the largest), its bytes where c says; *taken = 1. Nothing is charged
 * and *taken = 0 when the rule is off, the window's split is not
 * remembered (never split, before a restart, or past AGG_GO_WINS) or
 * charged no CE: then charge c with agg_account_add. The total charged
 * equals c's, so the identity holds. RM_OK, RM_ESTATE (no transaction), or
 * agg_account_add's errors. Counted in go_late_ns.
 */
int agg_account_add_go_late(struct agg_account *a, const struct agg_charge *c, int *taken);

/*
 * Changes to the stitcher's held parts, written at once in the open
 * transaction (st_held_put / st_held_resolve / st_held_delete). RM_OK,
 * RM_ESTATE (no transaction), or storage's errors; a resolve of an
 * unknown part is RM_ENOENT.
 */
int agg_account_held_put(struct agg_account *a, const struct st_held *h);
int agg_account_held_resolve(struct agg_account *a, uint64_t id, const char *dist);
int agg_account_held_forget(struct agg_account *a, uint64_t id);

/* Reads every held part (st_held_load), outside any transaction. */
int agg_account_held_load(struct agg_account *a, int (*cb)(void *arg, const struct st_held *h), void *arg);

/*
 * Writes the summed charges and split counts, the batch's window totals
 * w[0..nw) (none for an expiry pass) and its sequence number, and commits.
 * Returns RM_OK; RM_EINVAL for a window whose start does not fit in int64;
 * RM_ESTATE; RM_ESQL / RM_ENOMEM. On error nothing is written (rolled back).
 */
int agg_account_commit(struct agg_account *a, const struct rm_totals *w, size_t nw);

/* Rolls back what was started; no-op if nothing was. */
void agg_account_abort(struct agg_account *a);

/*
 * Applies one batch: begin, add every charge, commit. *duplicate = 1 (and
 * nothing written) if this (node, instance, seq) was applied before.
 * Returns RM_OK, RM_EINVAL for a window whose start does not fit in int64,
 * RM_ESQL / RM_ENOMEM (nothing written; the collector should retry).
 */
int agg_account_apply(struct agg_account *a, const struct agg_batch_meta *m, const struct agg_charge *ch,
		      size_t nch, const struct rm_totals *w, size_t nw, int *duplicate);

/* Records a collector's hello (node metadata, last seen). */
int agg_account_node(struct agg_account *a, const struct st_node *n);

/*
 * What a commit wrote, for an observer (the metrics): one call per CE and
 * window with the CE's usage (ce set), and per batch window with the node's
 * total U (ce NULL) and the parts its collector dropped. Called after the
 * transaction committed, never for a rolled-back one; the strings are valid
 * during the call only.
 */
struct agg_account_row {
	const char *node, *ce;
	int64_t start, len;
	uint64_t v[ST_R_COUNT];
	uint64_t dropped_parts;
};
typedef void (*agg_account_observer)(void *arg, const struct agg_account_row *row);

/* Sets (fn NULL: removes) the observer of commits. */
void agg_account_observe(struct agg_account *a, agg_account_observer fn, void *arg);

struct agg_account_stats {
	uint64_t batches, duplicates, charges, rows_written, gaps;
	uint64_t passes;  /* committed expiry passes */
	uint64_t splits;  /* split parts counted */
	uint64_t runtime_charged_ns; /* CPU the runtime rule charged to CEs */
	uint64_t runtime_left_ns;    /* a runtime's CPU left in V 'runtime' (no CE, or the rule off) */
	uint64_t go_label_windows;   /* windows the Go label rule split */
	uint64_t go_labelled_ns;     /* Go CPU it charged by labels to their cookies' CEs (or V reasons) */
	uint64_t go_unlabelled_ns;   /* Go CPU it left to the runtime rule (no label, the runtime's own, unknown cookies) */
	uint64_t go_late_ns;         /* Go parts' CPU resolved after their window's split, charged as it
	                                (agg_account_add_go_late) */
	uint64_t go_folded;          /* samples of cookies past a window's RM_GO_LABELS_MAX, counted as unlabelled */
	uint64_t go_seg_windows;     /* of go_label_windows, those whose counts also carried samples by segment
					(used to correct segments when agg_account_set_go_label_segments is on) */
	uint64_t go_seg_sampled_ns;  /* in those: the CPU the samples put in segments received on a socket */
	uint64_t go_seg_parts_ns;    /* ... and what those segments' parts held (the two agree when the sampler
					reads each thread's segment as the collector charges it) */
};
void agg_account_get_stats(const struct agg_account *a, struct agg_account_stats *out);

#endif
