/*
 * agg_throttle.h - the aggregator's throttle controller: closes
 * the loop from attribution to enforcement.
 *
 * Every tick it
 *   1. checks the commands operators wrote (state "requested", see
 *      st_throttle.h) and refuses, with a stored reason, those for an
 *      unknown CE (no [ce] rule), an unknown server (no collector of that
 *      name said hello), an unthrottleable resource (only cpu), a CE whose
 *      rule the collector cannot match (Xen domains only, more than
 *      RM_WIRE_MAX_MATCH clients), an expiry already past, or a duplicate
 *      of an active command (same server, CE, resource and cap); the others
 *      become "pending" and supersede the active commands of that server,
 *      CE and resource;
 *   2. feeds every window that has settled (its end + settle has passed) of
 *      every server to the policy (agg_policy.h), with per-CE CPU from the
 *      usage source, and stores each decision as a pending command (who:
 *      "policy:cap" / "policy:overload"; why; figures) superseding the
 *      previous one; a released cap becomes a command with cap 0;
 *   3. renews the policy's commands that have less than half their lease
 *      left while the policy keeps the cap (a new id and expiry);
 *   4. marks active commands whose expiry passed as "expired".
 * commands_for() hands a node's pending and sent commands to the transport,
 * each with the matches of its CE's rule (client CIDRs and ports) and, for
 * admission throttling, the inbound byte rate that keeps the CE at its cap
 * (cap x the server's CPU capacity x the CE's bytes per CPU ns over the
 * last 10 s before the command), and marks them sent; acked() marks the ids a collector acknowledged as applied
 * and tells the policy (agg_policy_applied()) from when the cap is in force, so that the overload rule judges
 * that CE again only on windows the cap governed throughout.
 *
 * Usage sources: "rametr" reads per-CE CPU of the window from storage (the
 * accounting); "lr" estimates it with LR (agg_est.h, seed 000 eq. 2) from
 * per-CE inbound bytes and the server's total CPU over the last 30 windows,
 * as a tool without Rametr's segments would; a test may plug its own.
 *
 * Not thread-safe: the aggregator's server loop calls it.
 */
#ifndef AGG_THROTTLE_H
#define AGG_THROTTLE_H

#include <stddef.h>
#include <stdint.h>

#include "agg_config.h"
#include "agg_policy.h"
#include "rametr.pb-c.h"
#include "st.h"
#include "rm_wire.h"

#define AGG_THROTTLE_LOOKBACK_NS 30000000000ll  /* windows older than this are not fed */
#define AGG_THROTTLE_LR_WINDOWS 30

/*
 * A source of per-CE CPU usage for one settled window of one server. Fills
 * o->use[0..o->nuse) (at most max entries of use, CE names valid until the
 * next call) and may adjust o->busy_ns / o->capacity_ns (preset from the
 * stored totals). Returns RM_OK, RM_ENOENT (no estimate for this window: it
 * is skipped), or an error (logged by the caller).
 */
struct agg_usage_source {
	const char *name;
	int (*window)(void *arg, st_db *db, const char *server, int64_t start_ns, int64_t len_ns,
		      struct agg_policy_obs *o, struct agg_policy_use *use, size_t max);
	void *arg;
};

struct agg_throttle;

/*
 * cfg (its [throttle] section and CE rules) and db are borrowed. src NULL:
 * the source named in cfg->throttle.source. Returns RM_OK, RM_EINVAL (a cap
 * or parameter the policy refuses), RM_ENOMEM.
 */
int agg_throttle_open(struct agg_throttle **out, const struct agg_config *cfg, st_db *db,
		      const struct agg_usage_source *src);
void agg_throttle_close(struct agg_throttle *t);

/* One pass of 1-4 above at time now (Unix ns). Returns RM_OK or the first
 * storage error (logged; the next tick tries again). */
int agg_throttle_tick(struct agg_throttle *t, int64_t now_ns);

/*
 * The commands to embed in the Ack to node: its pending and sent commands
 * not yet expired, marked sent. *cmds stays valid until the next call or
 * close. Returns RM_OK (possibly *n = 0), or a storage error.
 */
int agg_throttle_commands_for(struct agg_throttle *t, const char *node, int64_t now_ns,
			      Rametr__ThrottleCommand ***cmds, size_t *n);

/* The collector of node acknowledged ids[0..n): sent -> applied. Unknown ids
 * and ids of other servers are ignored (counted). Returns RM_OK or a storage error. */
int agg_throttle_acked(struct agg_throttle *t, const char *node, const uint64_t *ids, size_t n,
		       int64_t now_ns);

struct agg_throttle_stats {
	uint64_t windows;     /* windows fed to the policy */
	uint64_t decisions;   /* policy decisions stored */
	uint64_t renewed, expired, refused, accepted, sent, applied, bad_acks;
};
void agg_throttle_get_stats(const struct agg_throttle *t, struct agg_throttle_stats *out);

/*
 * The inbound sockets the configuration rules decide, as wire matches for
 * Ack.decided (rametr.proto): collectors may sum the parts received on them
 * (whose sends go to such sockets too) per socket, thread and window, as
 * step 2 of agg_pair.h charges them by the rule alone. A rule on any client
 * gives both families with prefix 0; Xen-only rules give none.
 */
struct agg_decided {
	Rametr__ThrottleMatch m[RM_WIRE_MAX_DECIDED];
	Rametr__ThrottleMatch *pm[RM_WIRE_MAX_DECIDED];
	uint8_t addr[RM_WIRE_MAX_DECIDED][16];
	size_t n;
};

/*
 * Fills *d from cfg (borrowed: d points into itself only). n is 0 - no
 * merging - when cfg has [estimate] sections (estimators count requests
 * and response times part by part) or more matches than the wire allows.
 * Pure.
 */
void agg_throttle_decided(const struct agg_config *cfg, struct agg_decided *d);

#endif
