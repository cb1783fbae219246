/*
 * agg_policy.c - the throttling policies of agg_policy.h: per server, the
 * smoothed utilisation and per CE the configured cap, the overload cap and
 * the counters that release them. Owns its copies of the configuration.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_policy.h"
#include "rm_err.h"
#include "banned.h"

struct agg_pol_ce {
	char name[AGG_POLICY_NAME_MAX + 1];
	uint32_t cfg_cap;       /* configured cap on this server, 0 = none */
	uint32_t cap_active;    /* the cap rule holds it (= cfg_cap) or 0 */
	double ocap;            /* overload cap, permille; 0 = none */
	unsigned cap_under, o_under;
	uint32_t eff;           /* effective cap last reported */
	uint64_t changed_win;   /* window whose decision changed eff */
	uint64_t hold_until;    /* the overload rule judges the CE from this window on */
	int awaiting;           /* wait_applied: the collector has not reported eff yet */
};

struct agg_pol_srv {
	char name[AGG_POLICY_NAME_MAX + 1];
	int seen;
	uint64_t last_win;
	double smooth;          /* permille */
	uint64_t len_ns;        /* window length, 0 = unknown */
	struct agg_pol_ce ce[AGG_POLICY_MAX_CES];
	size_t nce;
};

struct agg_policy {
	struct agg_policy_cfg cfg;
	struct agg_policy_cap *caps;
	struct agg_pol_srv *srv;
	size_t nsrv;
};

void agg_policy_cfg_default(struct agg_policy_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->threshold_permille = AGG_POLICY_THRESHOLD_DEFAULT;
	cfg->alpha = AGG_POLICY_ALPHA_DEFAULT;
	cfg->md = AGG_POLICY_MD_DEFAULT;
	cfg->ai_permille = AGG_POLICY_AI_DEFAULT;
	cfg->min_cap_permille = AGG_POLICY_MIN_CAP_DEFAULT;
	cfg->release_windows = AGG_POLICY_RELEASE_WINDOWS_DEFAULT;
	cfg->min_share_permille = AGG_POLICY_MIN_SHARE_DEFAULT;
	cfg->hold = AGG_POLICY_HOLD_DEFAULT;
}

int agg_policy_open(struct agg_policy **out, const struct agg_policy_cfg *cfg)
{
	struct agg_policy *p;
	size_t i;

	if (!out || !cfg)
		return RM_EINVAL;
	*out = NULL;
	if (cfg->threshold_permille < 1 || cfg->threshold_permille > 1000 || !(cfg->alpha > 0) ||
	    cfg->alpha > 1 || !(cfg->md > 0) || !(cfg->md < 1) || cfg->ai_permille < 1 ||
	    cfg->ai_permille > 1000 || cfg->min_cap_permille < 1 || cfg->min_cap_permille > 1000 ||
	    cfg->release_windows < 1 || cfg->min_share_permille > 1000 || cfg->hold > 100 ||
	    (cfg->ncaps && !cfg->caps))
		return RM_EINVAL;
	for (i = 0; i < cfg->ncaps; i++)
		if (!cfg->caps[i].ce[0] || !cfg->caps[i].server[0] || cfg->caps[i].cap_permille < 1 ||
		    cfg->caps[i].cap_permille > 1000)
			return RM_EINVAL;
	if (!(p = calloc(1, sizeof(*p))))
		return RM_ENOMEM;
	p->cfg = *cfg;
	if (cfg->ncaps) {
		if (!(p->caps = calloc(cfg->ncaps, sizeof(*p->caps)))) {
			free(p);
			return RM_ENOMEM;
		}
		memcpy(p->caps, cfg->caps, cfg->ncaps * sizeof(*p->caps));
	}
	p->cfg.caps = p->caps;
	*out = p;
	return RM_OK;
}

void agg_policy_close(struct agg_policy *p)
{
	if (!p)
		return;
	free(p->caps);
	free(p->srv);
	free(p);
}

static struct agg_pol_srv *agg_pol_server(struct agg_policy *p, const char *name, int create)
{
	struct agg_pol_srv *s;
	size_t i;

	for (i = 0; i < p->nsrv; i++)
		if (strcmp(p->srv[i].name, name) == 0)
			return &p->srv[i];
	if (!create || p->nsrv == AGG_POLICY_MAX_SERVERS)
		return NULL;
	if (!p->srv && !(p->srv = calloc(AGG_POLICY_MAX_SERVERS, sizeof(*p->srv))))
		return NULL;
	s = &p->srv[p->nsrv++];
	snprintf(s->name, sizeof(s->name), "%s", name);
	/* configured caps of this server are known from the start */
	for (i = 0; i < p->cfg.ncaps && s->nce < AGG_POLICY_MAX_CES; i++)
		if (strcmp(p->caps[i].server, name) == 0) {
			struct agg_pol_ce *c = &s->ce[s->nce++];

			snprintf(c->name, sizeof(c->name), "%s", p->caps[i].ce);
			c->cfg_cap = p->caps[i].cap_permille;
		}
	return s;
}

static struct agg_pol_ce *agg_pol_ce(struct agg_pol_srv *s, const char *name, int create)
{
	size_t i;

	for (i = 0; i < s->nce; i++)
		if (strcmp(s->ce[i].name, name) == 0)
			return &s->ce[i];
	if (!create || s->nce == AGG_POLICY_MAX_CES || !name[0] || strlen(name) > AGG_POLICY_NAME_MAX)
		return NULL;
	memset(&s->ce[s->nce], 0, sizeof(s->ce[0]));
	snprintf(s->ce[s->nce].name, sizeof(s->ce[0].name), "%s", name);
	return &s->ce[s->nce++];
}

static uint32_t agg_pol_eff(const struct agg_pol_ce *c)
{
	uint32_t o = c->ocap > 0 ? (uint32_t)lround(c->ocap) : 0;

	if (c->cap_active && o)
		return c->cap_active < o ? c->cap_active : o;
	return c->cap_active ? c->cap_active : o;
}

static uint32_t agg_pol_share(uint64_t ns, uint64_t cap)
{
	double v = (double)ns * 1000.0 / (double)cap;

	return v > 1000.0 ? 1000u : (uint32_t)lround(v);
}

int agg_policy_window(struct agg_policy *p, const char *server, const struct agg_policy_obs *o,
		      struct agg_policy_decision *out, size_t max, size_t *n)
{
	uint32_t share[AGG_POLICY_MAX_CES] = { 0 }, util;
	char ownwhy[AGG_POLICY_MAX_CES][121];
	int rule[AGG_POLICY_MAX_CES] = { 0 };
	struct agg_pol_srv *s;
	size_t i, nd = 0;
	int top = -1;

	if (!p || !server || !o || !n || (max && !out) || o->capacity_ns == 0 || (o->nuse && !o->use))
		return RM_EINVAL;
	*n = 0;
	if (!(s = agg_pol_server(p, server, 1)))
		return RM_EINVAL;
	if (s->seen && o->win <= s->last_win)
		return RM_OK;
	memset(ownwhy, 0, sizeof(ownwhy));
	for (i = 0; i < o->nuse; i++) {
		struct agg_pol_ce *c;

		if (!o->use[i].ce || !(c = agg_pol_ce(s, o->use[i].ce, 1)))
			continue;
		share[c - s->ce] += agg_pol_share(o->use[i].cpu_ns, o->capacity_ns);
	}
	util = agg_pol_share(o->busy_ns, o->capacity_ns);
	s->smooth = s->seen ? p->cfg.alpha * util + (1 - p->cfg.alpha) * s->smooth : util;
	s->seen = 1;
	s->last_win = o->win;
	if (o->len_ns)
		s->len_ns = o->len_ns;

	/* the cap rule */
	for (i = 0; i < s->nce; i++) {
		struct agg_pol_ce *c = &s->ce[i];

		if (!c->cfg_cap)
			continue;
		if (!c->cap_active && share[i] > c->cfg_cap) {
			c->cap_active = c->cfg_cap;
			c->cap_under = 0;
			rule[i] = AGG_RULE_CAP;
			snprintf(ownwhy[i], sizeof(ownwhy[i]), "share %.1f%% above its cap of %.1f%%",
				 share[i] / 10.0, c->cfg_cap / 10.0);
		} else if (c->cap_active) {
			c->cap_under = share[i] * 10 < c->cfg_cap * 8 ? c->cap_under + 1 : 0;
			if (c->cap_under >= p->cfg.release_windows) {
				c->cap_active = 0;
				rule[i] = AGG_RULE_CAP;
				snprintf(ownwhy[i], sizeof(ownwhy[i]),
					 "share below 80%% of its cap of %.1f%% for %u windows (%.1f%% now)",
					 c->cfg_cap / 10.0, c->cap_under, share[i] / 10.0);
			}
		}
	}
	/* the overload rule */
	if (p->cfg.overload) {
		for (i = 0; i < s->nce; i++)
			if (share[i] > 0 && (top < 0 || share[i] > share[top]))
				top = (int)i;
		if (s->smooth > p->cfg.threshold_permille && top >= 0 &&
		    share[top] >= p->cfg.min_share_permille) {
			struct agg_pol_ce *c = &s->ce[top];
			double eff = agg_pol_eff(c);

			/* first throttle at once; a further decrease only on a window the
			 * current cap governed, and while it binds */
			if (c->ocap == 0 || (o->win >= c->hold_until && share[top] * 10 >= eff * 9)) {
				double base = c->ocap == 0 ? share[top] : eff;

				c->ocap = base * p->cfg.md;
				if (c->ocap < p->cfg.min_cap_permille)
					c->ocap = p->cfg.min_cap_permille;
				c->o_under = 0;
				rule[top] = AGG_RULE_OVERLOAD;
				snprintf(ownwhy[top], sizeof(ownwhy[top]),
					 "server CPU %.1f%% smoothed (EWMA a=%.2f, %.1f%% now) above %.1f%%, "
					 "top consumer at %.1f%%: x%.2f of %.1f%%",
					 s->smooth / 10.0, p->cfg.alpha, util / 10.0,
					 p->cfg.threshold_permille / 10.0, share[top] / 10.0, p->cfg.md,
					 base / 10.0);
			}
		} else if (s->smooth <= p->cfg.threshold_permille) {
			for (i = 0; i < s->nce; i++) {
				struct agg_pol_ce *c = &s->ce[i];
				double eff = agg_pol_eff(c);

				if (c->ocap == 0 || o->win < c->hold_until)
					continue;
				if (share[i] * 10 >= eff * 9) {
					/* binds: requests wait on it, raise it */
					c->o_under = 0;
					c->ocap += p->cfg.ai_permille;
					rule[i] = rule[i] ? rule[i] : AGG_RULE_OVERLOAD;
					if (c->ocap >= 1000)
						c->ocap = 0;
					snprintf(ownwhy[i], sizeof(ownwhy[i]),
						 "server CPU %.1f%% smoothed at or below %.1f%%, share %.1f%% "
						 "presses on the cap: +%u permille%s",
						 s->smooth / 10.0, p->cfg.threshold_permille / 10.0,
						 share[i] / 10.0, p->cfg.ai_permille,
						 c->ocap == 0 ? ", overload cap released" : "");
					continue;
				}
				/* does not bind: kept (the seed never lowers a limit for lack of
				 * load; the server may be slowed by other work) unless the CE
				 * uses less than half of it for release_windows windows */
				c->o_under = share[i] * 2 < eff ? c->o_under + 1 : 0;
				if (c->o_under >= p->cfg.release_windows) {
					c->ocap = 0;
					rule[i] = rule[i] ? rule[i] : AGG_RULE_OVERLOAD;
					snprintf(ownwhy[i], sizeof(ownwhy[i]),
						 "server CPU %.1f%% smoothed at or below %.1f%%, share below "
						 "half the cap for %u windows (%.1f%% now): overload cap "
						 "released", s->smooth / 10.0, p->cfg.threshold_permille / 10.0,
						 c->o_under, share[i] / 10.0);
				}
			}
		}
	}
	/* report changes of the effective cap */
	for (i = 0; i < s->nce; i++) {
		struct agg_pol_ce *c = &s->ce[i];
		uint32_t e = agg_pol_eff(c);
		struct agg_policy_decision *d;

		if (e == c->eff)
			continue;
		if (nd < max) {
			d = &out[nd];
			memset(d, 0, sizeof(*d));
			snprintf(d->ce, sizeof(d->ce), "%s", c->name);
			d->win = o->win;
			d->cap_permille = e;
			d->prev_permille = c->eff;
			d->rule = rule[i] ? rule[i] : AGG_RULE_CAP;
			d->share_permille = share[i];
			d->util_permille = util;
			d->smooth_permille = (uint32_t)lround(s->smooth);
			snprintf(d->why, sizeof(d->why), "%.63s on %.63s: %.120s", c->name, server,
				 ownwhy[i][0] ? ownwhy[i] : "cap changed");
		}
		nd++;
		c->eff = e;
		c->changed_win = o->win;
		c->o_under = 0;
		c->awaiting = p->cfg.wait_applied && e != 0;
		c->hold_until = o->win + 1 + (c->awaiting ? AGG_POLICY_APPLY_WAIT : p->cfg.hold);
	}
	*n = nd < max ? nd : max;
	return nd > max ? RM_EFULL : RM_OK;
}

int agg_policy_window_seen(const struct agg_policy *p, const char *server, uint64_t win)
{
	size_t i;

	for (i = 0; p && server && i < p->nsrv; i++)
		if (strcmp(p->srv[i].name, server) == 0)
			return p->srv[i].seen && win <= p->srv[i].last_win;
	return 0;
}

int agg_policy_applied(struct agg_policy *p, const char *server, const char *ce, uint32_t cap_permille,
		       int64_t applied_ns)
{
	struct agg_pol_srv *s;
	struct agg_pol_ce *c;
	uint64_t first;

	if (!p || !server || !ce || applied_ns < 0 || !(s = agg_pol_server(p, server, 0)) ||
	    !(c = agg_pol_ce(s, ce, 0)) || !c->awaiting || c->eff != cap_permille || !s->len_ns)
		return 0;
	first = ((uint64_t)applied_ns + s->len_ns - 1) / s->len_ns;
	c->awaiting = 0;
	c->hold_until = first > c->changed_win ? first : c->changed_win + 1;
	return 1;
}

uint32_t agg_policy_cap_of(const struct agg_policy *p, const char *server, const char *ce)
{
	size_t i, j;

	if (!p || !server || !ce)
		return 0;
	for (i = 0; i < p->nsrv; i++) {
		if (strcmp(p->srv[i].name, server) != 0)
			continue;
		for (j = 0; j < p->srv[i].nce; j++)
			if (strcmp(p->srv[i].ce[j].name, ce) == 0)
				return p->srv[i].ce[j].eff;
	}
	return 0;
}
