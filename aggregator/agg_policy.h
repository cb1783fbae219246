/*
 * agg_policy.h - throttling policies (seed 000 §6.4 / §7.3.1.2,
 * seed 002 §IV.C): per window of a server, from the per-CE CPU usage of
 * that window (from a pluggable source: Rametr's accounting, or an
 * estimator such as LR), decides which CEs to cap and at what share. Pure
 * logic: no I/O, no clock; unit-tested on recorded per-window series.
 *
 * Shares are permille of the server's capacity (all its CPUs over the
 * window): share = cpu_ns * 1000 / capacity_ns.
 *
 * Two rules, combined by taking the lower cap when both hold a CE (and a
 * hold on the second):
 *   cap       a configured limit (CE c on server s <= cap): when the CE's
 *             share in a window exceeds it, the CE is capped at it; released
 *             after release_windows windows in a row below 80% of the cap
 *             (it no longer presses against it).
 *   overload  seed 002 §IV.C / Table 4: the server's utilisation u = busy /
 *             capacity is smoothed, s = alpha u + (1 - alpha) s' (the first
 *             window: s = u). While s > threshold, the top consumer (largest
 *             share, if it holds at least min_share: overload no CE explains
 *             is left alone) is capped at md x its share (multiplicative
 *             decrease), and at md x its effective cap again on a later
 *             window where s is still above while that cap binds (its share
 *             >= 90% of it), never below min_cap. While s <= threshold, an
 *             overload cap that binds grows by ai permille (additive
 *             increase: the seed raises a limit only while requests wait on
 *             it) and is released at 1000; one that does not bind is kept,
 *             and released once the CE's share stays below half of it for
 *             release_windows judged windows in a row.
 *   hold      the seed decides once per 10 s control interval, each decision
 *             on an interval the previous one governed throughout. Here
 *             windows are shorter than the loop's delay (settle, the Ack, the
 *             collector), so after a CE's effective cap changes the overload
 *             rule does not judge that CE again (no decrease, increase or
 *             release count) until a window the new cap governed from its
 *             start: with wait_applied, the first window starting after
 *             agg_policy_applied() reports the cap in force (or, if that
 *             never comes, AGG_POLICY_APPLY_WAIT windows after the change);
 *             without, the hold windows after the one that changed it. The
 *             first throttle of a CE is not held back (nothing to wait for).
 * A decision is produced whenever a CE's effective cap changes (0 =
 * released), with the rule, the figures and a sentence saying why.
 *
 * Not thread-safe: one agg_policy per thread.
 */
#ifndef AGG_POLICY_H
#define AGG_POLICY_H

#include <stddef.h>
#include <stdint.h>

#define AGG_POLICY_NAME_MAX 63
#define AGG_POLICY_MAX_CES 64        /* CEs tracked per server */
#define AGG_POLICY_MAX_SERVERS 256
#define AGG_POLICY_THRESHOLD_DEFAULT 850
#define AGG_POLICY_ALPHA_DEFAULT 0.7
#define AGG_POLICY_MD_DEFAULT 0.9       /* seed 002 Table 4: adj_d */
#define AGG_POLICY_AI_DEFAULT 10        /* 1%: adj_i is one unit of the limit */
#define AGG_POLICY_MIN_CAP_DEFAULT 10
#define AGG_POLICY_RELEASE_WINDOWS_DEFAULT 3
#define AGG_POLICY_MIN_SHARE_DEFAULT 50
#define AGG_POLICY_HOLD_DEFAULT 2
#define AGG_POLICY_APPLY_WAIT 10        /* windows: longest wait for agg_policy_applied() */

struct agg_policy_cap {
	char ce[AGG_POLICY_NAME_MAX + 1];
	char server[AGG_POLICY_NAME_MAX + 1];
	uint32_t cap_permille;            /* 1..1000 */
};

struct agg_policy_cfg {
	const struct agg_policy_cap *caps;  /* copied */
	size_t ncaps;
	int overload;                     /* the overload rule is on */
	uint32_t threshold_permille;      /* 1..1000 */
	double alpha;                     /* (0, 1] */
	double md;                        /* (0, 1) */
	uint32_t ai_permille;             /* 1..1000 */
	uint32_t min_cap_permille;        /* 1..1000 */
	unsigned release_windows;         /* >= 1 */
	uint32_t min_share_permille;      /* 0..1000: smallest top consumer throttled */
	unsigned hold;                    /* 0..100 windows held after a change (no wait_applied) */
	int wait_applied;                 /* hold until agg_policy_applied() says the cap is in force */
};

/* Fills cfg with the defaults above: no caps, overload rule off. */
void agg_policy_cfg_default(struct agg_policy_cfg *cfg);

/* One CE's CPU in the window, as the usage source says. */
struct agg_policy_use {
	const char *ce;
	uint64_t cpu_ns;
};

/* One window of one server. */
struct agg_policy_obs {
	uint64_t win;
	uint64_t capacity_ns;             /* > 0 */
	uint64_t busy_ns;                 /* the server's measured busy CPU */
	const struct agg_policy_use *use;
	size_t nuse;
	uint64_t len_ns;                  /* window length (win = start / len_ns); 0 = unknown */
};

enum agg_policy_rule { AGG_RULE_CAP = 1, AGG_RULE_OVERLOAD = 2 };

struct agg_policy_decision {
	char ce[AGG_POLICY_NAME_MAX + 1];
	uint64_t win;
	uint32_t cap_permille;            /* new effective cap, 0 = released */
	uint32_t prev_permille;           /* before, 0 = was not capped */
	int rule;                         /* agg_policy_rule that set it */
	uint32_t share_permille;          /* the CE's share in the window */
	uint32_t util_permille;           /* the server's utilisation u */
	uint32_t smooth_permille;         /* s */
	char why[256];
};

struct agg_policy;

/*
 * Validates cfg and creates a policy. Returns RM_OK and *out; RM_EINVAL
 * (a parameter out of range, a cap of 0 or > 1000, an empty name; nothing
 * created); RM_ENOMEM.
 */
int agg_policy_open(struct agg_policy **out, const struct agg_policy_cfg *cfg);
void agg_policy_close(struct agg_policy *p);

/*
 * Feeds window o of server and writes up to max decisions into out (*n
 * gets how many). Windows of a server must come in increasing order (an
 * older or repeated one is ignored: RM_OK with *n = 0). CEs beyond
 * AGG_POLICY_MAX_CES per server are not considered. Returns RM_OK;
 * RM_EINVAL (NULL, capacity 0, more servers than AGG_POLICY_MAX_SERVERS);
 * RM_EFULL if more than max decisions were due (the first max are written,
 * the state is updated for all).
 */
int agg_policy_window(struct agg_policy *p, const char *server, const struct agg_policy_obs *o,
		      struct agg_policy_decision *out, size_t max, size_t *n);

/* 1 if window win of server has been fed already (or an older one came
 * after a newer one), else 0. */
int agg_policy_window_seen(const struct agg_policy *p, const char *server, uint64_t win);

/*
 * The collector of server reported cap_permille of ce in force since
 * applied_ns (Unix ns; the aggregator's time of the acknowledgement is a
 * safe bound). If the CE's effective cap is that cap and the policy waits
 * for it (wait_applied), its hold ends at the first window starting at or
 * after applied_ns (needs len_ns of the server's windows). Returns 1 if it
 * ended a wait, 0 otherwise (unknown CE, another cap, not waiting: a renewal).
 */
int agg_policy_applied(struct agg_policy *p, const char *server, const char *ce, uint32_t cap_permille,
		       int64_t applied_ns);

/* The CE's effective cap on server now (permille), 0 if none. */
uint32_t agg_policy_cap_of(const struct agg_policy *p, const char *server, const char *ce);

#endif
