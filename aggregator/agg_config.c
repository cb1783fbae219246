/*
 * agg_config.c - parses the aggregator's INI file (format in agg_config.h)
 * and matches inbound sockets and Xen domains against its CE rules. Owns
 * the struct agg_config it returns; no I/O beyond reading the file.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_config.h"
#include "rm_addr.h"
#include "rm_conf.h"
#include "rm_dur.h"
#include "rm_err.h"
#include "banned.h"

struct agg_parse {
	const char *name;              /* the file being read (owned by c->files) */
	int line;
	int errors;
	struct agg_config *c;
	enum { SEC_NONE, SEC_AGG, SEC_CE, SEC_EST, SEC_THROTTLE, SEC_METRICS, SEC_RETENTION, SEC_UNKNOWN } sec;
};

static void agg_perr(struct agg_parse *p, const char *fmt, const char *a, const char *b)
{
	char msg[512];

	snprintf(msg, sizeof(msg), fmt, a ? a : "", b ? b : "");
	rm_log_error("%s:%d: %s", p->name, p->line, msg);
	p->errors++;
}

static int agg_valid_ce(const char *n)
{
	size_t i, len = strlen(n);

	if (len == 0 || len > 63 || (n[0] == '_' && n[1] == '_'))
		return 0;
	for (i = 0; i < len; i++)
		if (!isalnum((unsigned char)n[i]) && n[i] != '_' && n[i] != '.' && n[i] != '-')
			return 0;
	return 1;
}

static int agg_parse_u32(const char *s, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long v;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int agg_parse_range(const char *s, uint32_t *lo, uint32_t *hi)
{
	char buf[64], *dash;

	if (strlen(s) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", s);
	dash = strchr(buf, '-');
	if (dash) {
		*dash = '\0';
		if (agg_parse_u32(rm_conf_trim(buf), 65535, lo) || agg_parse_u32(rm_conf_trim(dash + 1), 65535, hi))
			return -1;
	} else {
		if (agg_parse_u32(rm_conf_trim(buf), 65535, lo))
			return -1;
		*hi = *lo;
	}
	return *lo <= *hi ? 0 : -1;
}

static int agg_parse_cidr(const char *s, struct agg_cidr *out)
{
	char buf[128], *slash;
	int maxp, i;

	if (strlen(s) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", s);
	memset(out, 0, sizeof(*out));
	slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	if (inet_pton(AF_INET, buf, out->addr) == 1) {
		out->family = AF_INET;
		maxp = 32;
	} else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
		out->family = AF_INET6;
		maxp = 128;
	} else {
		return -1;
	}
	out->prefix = maxp;
	if (slash) {
		uint32_t p;

		if (agg_parse_u32(slash + 1, (uint32_t)maxp, &p))
			return -1;
		out->prefix = (int)p;
	}
	for (i = out->prefix; i < maxp; i++)
		out->addr[i / 8] &= (uint8_t)~(0x80u >> (i % 8));
	return 0;
}

static int agg_push(void **arr, size_t *n, size_t size, const void *item)
{
	void *na = realloc(*arr, (*n + 1) * size);

	if (!na)
		return RM_ENOMEM;
	memcpy((char *)na + *n * size, item, size);
	*arr = na;
	(*n)++;
	return RM_OK;
}

static int agg_section(struct agg_parse *p, char *hdr)
{
	char *name, *q;
	struct agg_rule r;

	hdr = rm_conf_trim(hdr);
	if (strcmp(hdr, "aggregator") == 0) {
		p->sec = SEC_AGG;
		return RM_OK;
	}
	if (strcmp(hdr, "metrics") == 0) {
		p->sec = SEC_METRICS;
		return RM_OK;
	}
	if (strcmp(hdr, "throttle") == 0) {
		p->sec = SEC_THROTTLE;
		p->c->throttle.enabled = 1;
		return RM_OK;
	}
	if (strcmp(hdr, "retention") == 0) {
		p->sec = SEC_RETENTION;
		return RM_OK;
	}
	if (strncmp(hdr, "ce", 2) == 0 && isspace((unsigned char)hdr[2])) {
		name = rm_conf_trim(hdr + 3);
		if (name[0] == '"') {
			q = strchr(name + 1, '"');
			if (!q || q[1] != '\0') {
				agg_perr(p, "unterminated quote in section '%s'%s", hdr, NULL);
				p->sec = SEC_UNKNOWN;
				return RM_OK;
			}
			*q = '\0';
			name++;
		}
		if (!agg_valid_ce(name)) {
			agg_perr(p, "invalid CE name '%s' (use [A-Za-z0-9_.-], 1-63 chars, not starting with __)%s",
				 name, NULL);
			p->sec = SEC_UNKNOWN;
			return RM_OK;
		}
		memset(&r, 0, sizeof(r));
		snprintf(r.ce, sizeof(r.ce), "%s", name);
		r.cport_hi = r.sport_hi = 65535;
		r.line = p->line;
		r.file = p->name;
		p->sec = SEC_CE;
		return agg_push((void **)&p->c->rules, &p->c->nrules, sizeof(r), &r);
	}
	if (strncmp(hdr, "estimate", 8) == 0 && isspace((unsigned char)hdr[8])) {
		struct agg_est_conf e;

		name = rm_conf_trim(hdr + 9);
		if (!agg_valid_ce(name)) {
			agg_perr(p, "invalid server name '%s' in [estimate] (use [A-Za-z0-9_.-], 1-63 chars)%s", name,
				 NULL);
			p->sec = SEC_UNKNOWN;
			return RM_OK;
		}
		memset(&e, 0, sizeof(e));
		snprintf(e.server, sizeof(e.server), "%s", name);
		e.lr_windows = AGG_CONFIG_LR_WINDOWS_DEFAULT;
		e.kalman_r = AGG_CONFIG_KALMAN_R_DEFAULT;
		e.line = p->line;
		e.file = p->name;
		p->sec = SEC_EST;
		return agg_push((void **)&p->c->est, &p->c->nest, sizeof(e), &e);
	}
	agg_perr(p, "unknown section '[%s]'%s", hdr, NULL);
	p->sec = SEC_UNKNOWN;
	return RM_OK;
}

/* "a.b.c.d:port" or "[v6]:port", port 1..65535. */
static int agg_parse_addr_port(const char *s, struct agg_est_addr *out)
{
	char buf[128], *colon, *host;
	uint32_t port;

	if (strlen(s) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", s);
	memset(out, 0, sizeof(*out));
	if (buf[0] == '[') {
		char *close = strchr(buf, ']');

		if (!close || close[1] != ':')
			return -1;
		*close = '\0';
		host = buf + 1;
		colon = close + 1;
	} else {
		colon = strrchr(buf, ':');
		if (!colon)
			return -1;
		*colon = '\0';
		host = buf;
	}
	if (agg_parse_u32(colon + 1, 65535, &port) || port == 0)
		return -1;
	out->port = port;
	if (buf[0] != '[' && inet_pton(AF_INET, host, out->addr) == 1)
		out->family = AF_INET;
	else if (buf[0] == '[' && inet_pton(AF_INET6, host, out->addr) == 1)
		out->family = AF_INET6;
	else
		return -1;
	return 0;
}

/* A key of an [estimate SERVER] section. */
static void agg_kv_est(struct agg_parse *p, struct agg_est_conf *e, const char *key, char *val)
{
	if (strcmp(key, "method") == 0) {
		char *save = NULL, *tok;

		e->methods = 0;
		for (tok = strtok_r(val, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			tok = rm_conf_trim(tok);
			if (strcmp(tok, "lr") == 0)
				e->methods |= AGG_CONFIG_EST_LR;
			else if (strcmp(tok, "kalman") == 0)
				e->methods |= AGG_CONFIG_EST_KALMAN;
			else
				agg_perr(p, "unknown estimation method '%s' (lr, kalman)%s", tok, NULL);
		}
	} else if (strcmp(key, "lr_windows") == 0) {
		uint32_t n;

		if (agg_parse_u32(val, AGG_CONFIG_LR_WINDOWS_MAX, &n) || n < 2)
			agg_perr(p, "invalid lr_windows '%s' (2 to 4096)%s", val, NULL);
		else
			e->lr_windows = n;
	} else if (strcmp(key, "kalman_q") == 0) {
		uint64_t ns;

		if (strcmp(val, "auto") == 0)
			e->kalman_q_ns = 0;
		else if (rm_dur_parse(val, 0, &ns, NULL) || ns == 0 || ns > AGG_CONFIG_HORIZON_MAX_NS)
			agg_perr(p, "invalid kalman_q '%s' (auto, or CPU time per request from 1ns to 1h, e.g. 200us)%s",
				 val, NULL);
		else
			e->kalman_q_ns = ns;
	} else if (strcmp(key, "kalman_r") == 0) {
		char *end;
		double r;

		errno = 0;
		r = strtod(val, &end);
		if (errno || *end || !isfinite(r) || !(r > 0) || r > 1e6)
			agg_perr(p, "invalid kalman_r '%s' (variance of the CPU utilisation in cores^2, > 0, e.g. 1e-4)%s",
				 val, NULL);
		else
			e->kalman_r = r;
	} else if (strcmp(key, "address") == 0) {
		struct agg_est_addr a;

		if (agg_parse_addr_port(val, &a))
			agg_perr(p, "invalid address '%s' (a.b.c.d:port or [IPv6]:port)%s", val, NULL);
		else if (e->naddr == AGG_CONFIG_EST_ADDR_MAX)
			agg_perr(p, "too many addresses in [estimate %s] (at most 8)%s", e->server, NULL);
		else
			e->addr[e->naddr++] = a;
	} else {
		agg_perr(p, "unknown key '%s' in [estimate %s]", key, e->server);
	}
}

/* "30%", "2.5%" or a fraction "0.3" -> permille (0..1000); 0 or -1. */
static int agg_parse_permille(const char *s, uint32_t *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !(v >= 0))
		return -1;
	if (*end == '%' && end[1] == '\0')
		v *= 10.0;
	else if (*end == '\0' && v <= 1.0)
		v *= 1000.0;
	else
		return -1;
	if (v > 1000.0)
		return -1;
	*out = (uint32_t)(v + 0.5);
	return 0;
}

static int agg_parse_fraction(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v > lo) || !(v <= hi))
		return -1;
	*out = v;
	return 0;
}

static int agg_kv_throttle(struct agg_parse *p, char *key, char *val)
{
	struct agg_throttle_cfg *t = &p->c->throttle;
	uint32_t u;
	uint64_t ns;

	if (strcmp(key, "cap") == 0) {
		struct agg_throttle_cap c;
		char *save = NULL, *ce, *srv, *cap, *extra;

		memset(&c, 0, sizeof(c));
		ce = strtok_r(val, " \t", &save);
		srv = ce ? strtok_r(NULL, " \t", &save) : NULL;
		cap = srv ? strtok_r(NULL, " \t", &save) : NULL;
		extra = cap ? strtok_r(NULL, " \t", &save) : NULL;
		if (!cap || extra || !agg_valid_ce(ce) || strlen(srv) > 63 ||
		    agg_parse_permille(cap, &c.cap_permille) || c.cap_permille == 0) {
			agg_perr(p, "invalid cap '%s' (expected 'CE SERVER SHARE', e.g. 'c2 db1 30%%')%s",
				 ce ? ce : "", NULL);
			return RM_OK;
		}
		snprintf(c.ce, sizeof(c.ce), "%s", ce);
		snprintf(c.server, sizeof(c.server), "%s", srv);
		c.line = p->line;
		c.file = p->name;
		return agg_push((void **)&t->caps, &t->ncaps, sizeof(c), &c);
	}
	if (strcmp(key, "overload") == 0) {
		if (strcmp(val, "on") == 0 || strcmp(val, "yes") == 0 || strcmp(val, "true") == 0)
			t->overload = 1;
		else if (strcmp(val, "off") == 0 || strcmp(val, "no") == 0 || strcmp(val, "false") == 0)
			t->overload = 0;
		else
			agg_perr(p, "invalid overload '%s' (on or off)%s", val, NULL);
	} else if (strcmp(key, "min_share") == 0) {
		if (agg_parse_permille(val, &u))
			agg_perr(p, "invalid min_share '%s' (a share such as 5%% or 0.05)%s", val, NULL);
		else
			t->min_share_permille = u;
	} else if (strcmp(key, "threshold") == 0 || strcmp(key, "increase") == 0 ||
		   strcmp(key, "min_cap") == 0) {
		if (agg_parse_permille(val, &u) || u == 0)
			agg_perr(p, "invalid %s '%s' (a share such as 85%% or 0.85)", key, val);
		else if (key[0] == 't')
			t->threshold_permille = u;
		else if (key[0] == 'i')
			t->increase_permille = u;
		else
			t->min_cap_permille = u;
	} else if (strcmp(key, "alpha") == 0) {
		if (agg_parse_fraction(val, 0.0, 1.0, &t->alpha))
			agg_perr(p, "invalid alpha '%s' (0 < alpha <= 1)%s", val, NULL);
	} else if (strcmp(key, "decrease") == 0) {
		if (agg_parse_fraction(val, 0.0, 0.999, &t->decrease))
			agg_perr(p, "invalid decrease '%s' (0 < factor < 1)%s", val, NULL);
	} else if (strcmp(key, "release_windows") == 0) {
		if (agg_parse_u32(val, 1000, &u) || u == 0)
			agg_perr(p, "invalid release_windows '%s' (1 to 1000)%s", val, NULL);
		else
			t->release_windows = u;
	} else if (strcmp(key, "lease") == 0 || strcmp(key, "settle") == 0) {
		if (rm_dur_parse(val, 0, &ns, NULL) || ns < 1000000ull || ns > 3600000000000ull)
			agg_perr(p, "invalid %s '%s' (a duration from 1ms to 1h)", key, val);
		else if (key[0] == 'l')
			t->lease_ns = ns;
		else
			t->settle_ns = ns;
	} else if (strcmp(key, "source") == 0) {
		if (strcmp(val, "rametr") != 0 && strcmp(val, "lr") != 0)
			agg_perr(p, "invalid source '%s' (rametr or lr)%s", val, NULL);
		else
			snprintf(t->source, sizeof(t->source), "%s", val);
	} else {
		agg_perr(p, "unknown key '%s' in [throttle]%s", key, NULL);
	}
	return RM_OK;
}

int agg_config_find_ce(const struct agg_config *c, const char *name)
{
	size_t i;

	for (i = 0; c && name && i < c->nrules; i++)
		if (strcmp(c->rules[i].ce, name) == 0)
			return (int)i;
	return -1;
}

/* A key of [retention]: a series ("1s", "1m", "1h", "1d") = how long it is
 * kept (a duration of at least a minute, e.g. 36h, 30d) or "forever". */
static void agg_kv_retention(struct agg_parse *p, const char *key, const char *val)
{
	static const char *const series[] = { "1s", "1m", "1h", "1d" };
	uint64_t ns;
	size_t i;

	for (i = 0; i < sizeof(series) / sizeof(series[0]); i++)
		if (strcmp(key, series[i]) == 0)
			break;
	if (i == sizeof(series) / sizeof(series[0])) {
		agg_perr(p, "unknown key '%s' in [retention] (1s, 1m, 1h, 1d)%s", key, NULL);
		return;
	}
	if (strcmp(val, "forever") == 0) {
		p->c->retention_ns[i] = 0;
		return;
	}
	if (rm_dur_parse(val, 0, &ns, NULL) || ns < 60000000000ULL || ns > (uint64_t)INT64_MAX) {
		agg_perr(p, "invalid retention '%s' for '%s' (e.g. 2d, 36h, forever; at least 1m)", val,
			 key);
		return;
	}
	p->c->retention_ns[i] = (int64_t)ns;
}

static int agg_kv(struct agg_parse *p, const char *section, char *key, char *val)
{
	struct agg_rule *r = p->c->nrules ? &p->c->rules[p->c->nrules - 1] : NULL;

	if (!section) {
		agg_perr(p, "key '%s' outside of any section%s", key, NULL);
		return RM_OK;
	}
	if (p->sec == SEC_UNKNOWN)
		return RM_OK; /* its header was reported */
	if (!*val) {
		agg_perr(p, "empty value for '%s'%s", key, NULL);
		return RM_OK;
	}
	if (p->sec == SEC_AGG) {
		if (strcmp(key, "listen") == 0) {
			char *u = strdup(val);

			if (!u || agg_push((void **)&p->c->listen, &p->c->nlisten, sizeof(u), &u)) {
				free(u);
				return RM_ENOMEM;
			}
			if (strncmp(val, "tcp://", 6) && strncmp(val, "ipc://", 6) && strncmp(val, "tls+tcp://", 10))
				agg_perr(p, "listen address '%s' must start with tcp://, tls+tcp:// or ipc://%s", val,
					 NULL);
		} else if (strcmp(key, "db") == 0) {
			free(p->c->db);
			if (!(p->c->db = strdup(val)))
				return RM_ENOMEM;
		} else if (strcmp(key, "horizon") == 0) {
			uint64_t ns;

			if (rm_dur_parse(val, 0, &ns, NULL) || ns < AGG_CONFIG_HORIZON_MIN_NS ||
			    ns > AGG_CONFIG_HORIZON_MAX_NS)
				agg_perr(p, "invalid horizon '%s' (a duration from 1ms to 1h, e.g. 10s)%s", val, NULL);
			else
				p->c->horizon_ns = ns;
		} else if (strcmp(key, "max_held") == 0) {
			uint32_t n;

			if (agg_parse_u32(val, AGG_CONFIG_MAX_HELD_MAX, &n) || n == 0)
				agg_perr(p, "invalid max_held '%s' (1 to 67108864)%s", val, NULL);
			else
				p->c->max_held = n;
		} else {
			struct agg_config_kv kv = { strdup(key), strdup(val), p->name, p->line };

			if (!kv.key || !kv.value ||
			    agg_push((void **)&p->c->settings, &p->c->nsettings, sizeof(kv), &kv)) {
				free(kv.key);
				free(kv.value);
				return RM_ENOMEM;
			}
		}
		return RM_OK;
	}
	if (p->sec == SEC_EST) {
		agg_kv_est(p, &p->c->est[p->c->nest - 1], key, val);
		return RM_OK;
	}
	if (p->sec == SEC_THROTTLE)
		return agg_kv_throttle(p, key, val);
	if (p->sec == SEC_METRICS) {
		if (strcmp(key, "listen") != 0) {
			agg_perr(p, "unknown key '%s' in [metrics]%s", key, NULL);
			return RM_OK;
		}
		free(p->c->metrics_listen);
		return (p->c->metrics_listen = strdup(val)) ? RM_OK : RM_ENOMEM;
	}
	if (p->sec == SEC_RETENTION) {
		agg_kv_retention(p, key, val);
		return RM_OK;
	}
	/* SEC_CE */
	if (strcmp(key, "client") == 0) {
		struct agg_cidr c;

		if (agg_parse_cidr(val, &c)) {
			agg_perr(p, "invalid address or CIDR '%s'%s", val, NULL);
			return RM_OK;
		}
		return agg_push((void **)&r->clients, &r->nclients, sizeof(c), &c);
	}
	if (strcmp(key, "client_port") == 0 || strcmp(key, "server_port") == 0) {
		int cl = key[0] == 'c';

		if (agg_parse_range(val, cl ? &r->cport_lo : &r->sport_lo, cl ? &r->cport_hi : &r->sport_hi))
			agg_perr(p, "invalid port or range '%s' for '%s'", val, key);
		return RM_OK;
	}
	if (strcmp(key, "priority") == 0) {
		uint32_t pr;

		if (agg_parse_u32(val, 1000000, &pr))
			agg_perr(p, "invalid priority '%s' (0 to 1000000; higher wins)%s", val, NULL);
		else
			r->priority = (int)pr;
		return RM_OK;
	}
	if (strcmp(key, "xen_domain") == 0) {
		char *save = NULL, *tok;

		for (tok = strtok_r(val, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			uint32_t d;

			tok = rm_conf_trim(tok);
			if (agg_parse_u32(tok, 0x7fff, &d)) {
				agg_perr(p, "invalid Xen domain id '%s'%s", tok, NULL);
				continue;
			}
			if (agg_push((void **)&r->domains, &r->ndomains, sizeof(d), &d))
				return RM_ENOMEM;
		}
		return RM_OK;
	}
	agg_perr(p, "unknown key '%s' in [ce %s]", key, r->ce);
	return RM_OK;
}

static int agg_cidr_overlap(const struct agg_cidr *a, const struct agg_cidr *b)
{
	return a->family == b->family &&
	       rm_addr_prefix_eq(a->addr, b->addr, (uint32_t)(a->prefix < b->prefix ? a->prefix : b->prefix));
}

static void agg_cidr_str(const struct agg_cidr *c, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];

	if (!inet_ntop(c->family, c->addr, a, sizeof(a)))
		snprintf(a, sizeof(a), "?");
	snprintf(buf, len, "%s/%d", a, c->prefix);
}

/* A Xen-only rule: domains, no client, no ports; it names no socket. */
static int agg_rule_xen_only(const struct agg_rule *r)
{
	return r->ndomains && !r->nclients && r->cport_lo == 0 && r->cport_hi == 65535 && r->sport_lo == 0 &&
	       r->sport_hi == 65535;
}

/* Fills c->match, c->match_rule and each rule's match/nmatch (agg_config.h). */
static int agg_rules_matches(struct agg_config *c)
{
	size_t i, k, n = 0;

	for (i = 0; i < c->nrules; i++)
		n += agg_rule_xen_only(&c->rules[i]) ? 0 : c->rules[i].nclients ? c->rules[i].nclients : 2;
	if (n && (!(c->match = calloc(n, sizeof(*c->match))) || !(c->match_rule = calloc(n, sizeof(int)))))
		return RM_ENOMEM;
	for (i = 0; i < c->nrules; i++) {
		struct agg_rule *r = &c->rules[i];
		struct rm_match *m = c->match + c->nmatch;

		if (agg_rule_xen_only(r))
			continue;
		for (k = 0; k < r->nclients; k++) {
			m[k].family = (uint32_t)r->clients[k].family;
			memcpy(m[k].addr, r->clients[k].addr, 16);
			m[k].prefix = (uint32_t)r->clients[k].prefix;
		}
		if (!r->nclients) { /* any client: both families */
			m[k++].family = AF_INET;
			m[k++].family = AF_INET6;
		}
		r->match = m;
		r->nmatch = k;
		for (k = 0; k < r->nmatch; k++) {
			m[k].cport_lo = r->cport_lo;
			m[k].cport_hi = r->cport_hi;
			m[k].sport_lo = r->sport_lo;
			m[k].sport_hi = r->sport_hi;
			c->match_rule[c->nmatch++] = (int)i;
		}
	}
	return RM_OK;
}

/*
 * Writes into what (len bytes) the clients both rules match; 0 if their
 * sockets are disjoint.
 */
static int agg_rules_overlap(const struct agg_rule *a, const struct agg_rule *b, char *what, size_t len)
{
	char x[64], y[64];
	size_t i, k;

	if (agg_rule_xen_only(a) || agg_rule_xen_only(b))
		return 0;
	if (a->cport_hi < b->cport_lo || b->cport_hi < a->cport_lo || a->sport_hi < b->sport_lo ||
	    b->sport_hi < a->sport_lo)
		return 0;
	/* a rule without clients (ports only, e.g. a service and its callers)
	 * is no address range: file order decides as always */
	if (!a->nclients || !b->nclients)
		return 0;
	for (i = 0; i < a->nclients; i++)
		for (k = 0; k < b->nclients; k++)
			if (agg_cidr_overlap(&a->clients[i], &b->clients[k])) {
				agg_cidr_str(&a->clients[i], x, sizeof(x));
				agg_cidr_str(&b->clients[k], y, sizeof(y));
				snprintf(what, len, "clients in %s and %s", x, y);
				return 1;
			}
	return 0;
}

/*
 * Two tenants whose client address ranges overlap (with overlapping ports),
 * or that list the same Xen domain, must say which wins: a different
 * `priority`. Otherwise refused.
 */
static int agg_check_overlaps(struct agg_parse *p)
{
	char what[160];
	size_t i, j, k, l;

	for (i = 0; i < p->c->nrules; i++)
		for (j = 0; j < i; j++) {
			const struct agg_rule *a = &p->c->rules[j], *b = &p->c->rules[i];
			int dom = -1;

			if (a->priority != b->priority || strcmp(a->ce, b->ce) == 0)
				continue;
			for (k = 0; k < a->ndomains && dom < 0; k++)
				for (l = 0; l < b->ndomains; l++)
					if (a->domains[k] == b->domains[l])
						dom = (int)a->domains[k];
			if (dom >= 0)
				snprintf(what, sizeof(what), "Xen domain %d", dom);
			else if (!agg_rules_overlap(a, b, what, sizeof(what)))
				continue;
			rm_log_error("%s:%d: [ce %s] overlaps [ce %s] at %s:%d (both match %s); give the one that "
				     "wins a higher 'priority'", b->file, b->line, b->ce, a->ce, a->file, a->line, what);
			p->errors++;
		}
	return RM_OK;
}

/* Rules by priority, highest first, file order among equals (stable). */
static void agg_sort_rules(struct agg_config *c)
{
	size_t i, j;

	for (i = 1; i < c->nrules; i++) {
		struct agg_rule r = c->rules[i];

		for (j = i; j > 0 && c->rules[j - 1].priority < r.priority; j--)
			c->rules[j] = c->rules[j - 1];
		c->rules[j] = r;
	}
}

/* The name of the file being read, kept in c->files for later messages. */
static int agg_file(struct agg_parse *p, const char *file)
{
	char *f;

	if (p->name && strcmp(p->name, file) == 0)
		return RM_OK;
	if (!(f = strdup(file)) || agg_push((void **)&p->c->files, &p->c->nfiles, sizeof(f), &f)) {
		free(f);
		return RM_ENOMEM;
	}
	p->name = f;
	p->sec = SEC_NONE;
	return RM_OK;
}

/* One line of the text (rm_conf_fn). */
static int agg_line(void *arg, const char *file, int line, char *section, char *key, char *value)
{
	struct agg_parse *p = arg;
	int rv;

	if ((rv = agg_file(p, file)) != RM_OK)
		return rv;
	p->line = line;
	if (!key)
		return agg_section(p, section);
	return agg_kv(p, section, key, value);
}

static int agg_parse_begin(struct agg_parse *p)
{
	memset(p, 0, sizeof(*p));
	if (!(p->c = calloc(1, sizeof(*p->c))))
		return RM_ENOMEM;
	p->c->horizon_ns = AGG_CONFIG_HORIZON_DEFAULT_NS;
	for (size_t i = 0; i < sizeof(p->c->retention_ns) / sizeof(p->c->retention_ns[0]); i++)
		p->c->retention_ns[i] = -1;
	p->c->max_held = AGG_CONFIG_MAX_HELD_DEFAULT;
	p->c->throttle.threshold_permille = 850;
	p->c->throttle.alpha = 0.7;
	p->c->throttle.decrease = 0.9;   /* seed 002 Table 4 (agg_policy.h) */
	p->c->throttle.increase_permille = 10;
	p->c->throttle.min_cap_permille = 10;
	p->c->throttle.release_windows = 3;
	p->c->throttle.min_share_permille = 50;
	p->c->throttle.lease_ns = 10000000000ull;
	p->c->throttle.settle_ns = 1000000000ull;
	snprintf(p->c->throttle.source, sizeof(p->c->throttle.source), "rametr");
	return RM_OK;
}

/* Checks across sections once every file is read; takes rv of the reading. */
static int agg_parse_end(struct agg_parse *p, int rv, struct agg_config **out)
{
	size_t i, j;

	if (rv == RM_ECONFIG) {
		p->errors++;
		rv = RM_OK;
	}
	for (i = 0; rv == RM_OK && i < p->c->nrules; i++)
		for (j = 0; j < i; j++)
			if (strcmp(p->c->rules[i].ce, p->c->rules[j].ce) == 0) {
				p->name = p->c->rules[i].file;
				p->line = p->c->rules[i].line;
				agg_perr(p, "duplicate section [ce %s]%s", p->c->rules[i].ce, NULL);
			}
	if (rv == RM_OK)
		rv = agg_check_overlaps(p);
	for (i = 0; rv == RM_OK && i < p->c->nest; i++) {
		p->name = p->c->est[i].file;
		p->line = p->c->est[i].line;
		if (!p->c->est[i].methods)
			agg_perr(p, "[estimate %s] needs 'method = lr', 'kalman' or 'lr, kalman'%s", p->c->est[i].server,
				 NULL);
		for (j = 0; j < i; j++)
			if (strcmp(p->c->est[i].server, p->c->est[j].server) == 0)
				agg_perr(p, "duplicate section [estimate %s]%s", p->c->est[i].server, NULL);
	}
	for (i = 0; rv == RM_OK && i < p->c->throttle.ncaps; i++) {
		const struct agg_throttle_cap *c = &p->c->throttle.caps[i];

		p->name = c->file;
		p->line = c->line;
		if (agg_config_find_ce(p->c, c->ce) < 0)
			agg_perr(p, "cap for unknown CE '%s' (no [ce %s] section)", c->ce, c->ce);
		for (j = 0; j < i; j++)
			if (strcmp(p->c->throttle.caps[j].ce, c->ce) == 0 &&
			    strcmp(p->c->throttle.caps[j].server, c->server) == 0)
				agg_perr(p, "duplicate cap for CE '%s' on server '%s'", c->ce, c->server);
	}
	if (rv == RM_OK)
		agg_sort_rules(p->c);
	if (rv == RM_OK && p->errors)
		rv = RM_ECONFIG;
	if (rv == RM_OK)
		rv = agg_rules_matches(p->c); /* after the sort: match_rule holds rule indexes */
	if (rv != RM_OK) {
		agg_config_free(p->c);
		return rv;
	}
	*out = p->c;
	return RM_OK;
}

int agg_config_parse(const char *text, size_t len, const char *name, struct agg_config **out)
{
	struct agg_parse p;
	int rv;

	*out = NULL;
	if (!text)
		return RM_EINVAL;
	if ((rv = agg_parse_begin(&p)) != RM_OK)
		return rv;
	rv = rm_conf_parse(text, len, name ? name : "config", agg_line, &p);
	return agg_parse_end(&p, rv, out);
}

int agg_config_load(const char *path, struct agg_config **out)
{
	struct agg_parse p;
	int rv;

	*out = NULL;
	if ((rv = agg_parse_begin(&p)) != RM_OK)
		return rv;
	rv = rm_conf_load(path, agg_line, &p);
	if (rv != RM_OK && rv != RM_ECONFIG) {
		agg_config_free(p.c);
		return rv;
	}
	return agg_parse_end(&p, rv, out);
}

void agg_config_free(struct agg_config *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < c->nlisten; i++)
		free(c->listen[i]);
	free(c->listen);
	free(c->db);
	free(c->metrics_listen);
	for (i = 0; i < c->nrules; i++) {
		free(c->rules[i].clients);
		free(c->rules[i].domains);
	}
	free(c->rules);
	free(c->match);
	free(c->match_rule);
	free(c->est);
	free(c->throttle.caps);
	for (i = 0; i < c->nsettings; i++) {
		free(c->settings[i].key);
		free(c->settings[i].value);
	}
	free(c->settings);
	for (i = 0; i < c->nfiles; i++)
		free(c->files[i]);
	free(c->files);
	free(c);
}

int agg_config_match_tuple(const struct agg_config *c, uint32_t family, const uint8_t *raddr, size_t alen,
			   uint32_t rport, uint32_t lport)
{
	size_t k;

	if (alen != (family == AF_INET ? 4u : 16u))
		return -1;
	k = rm_match_first(c->match, c->nmatch, family, raddr, rport, lport);
	return k < c->nmatch ? c->match_rule[k] : -1;
}

int agg_config_match_socket(const struct agg_config *c, uint32_t family, const uint8_t *laddr, uint32_t lport,
			    const uint8_t *raddr, uint32_t rport)
{
	size_t k;

	switch (rm_match_tuple(c->match, c->nmatch, family, laddr, lport, raddr, rport, &k)) {
	case RM_MATCH_ENTRY:
		return c->match_rule[k];
	case RM_MATCH_OTHER_END:
		return AGG_CONFIG_OTHER_END;
	default:
		return -1;
	}
}

int agg_config_match_est_addr(const struct agg_config *c, uint32_t family, const uint8_t *addr, size_t alen,
			      uint32_t port)
{
	size_t i, k;

	for (i = 0; i < c->nest; i++)
		for (k = 0; k < c->est[i].naddr; k++) {
			const struct agg_est_addr *a = &c->est[i].addr[k];

			if ((int)family == a->family && alen == (a->family == AF_INET ? 4u : 16u) &&
			    port == a->port && memcmp(addr, a->addr, alen) == 0)
				return (int)i;
		}
	return -1;
}

int agg_config_find_est(const struct agg_config *c, const char *server)
{
	size_t i;

	for (i = 0; server && i < c->nest; i++)
		if (strcmp(c->est[i].server, server) == 0)
			return (int)i;
	return -1;
}

int agg_config_match_domain(const struct agg_config *c, uint32_t domid)
{
	size_t i, k;

	for (i = 0; i < c->nrules; i++)
		for (k = 0; k < c->rules[i].ndomains; k++)
			if (c->rules[i].domains[k] == domid)
				return (int)i;
	return -1;
}

static int agg_est_same(const struct agg_est_conf *a, const struct agg_est_conf *b)
{
	size_t i;

	if (strcmp(a->server, b->server) || a->naddr != b->naddr || a->methods != b->methods ||
	    a->lr_windows != b->lr_windows || a->kalman_q_ns != b->kalman_q_ns || a->kalman_r != b->kalman_r)
		return 0;
	for (i = 0; i < a->naddr; i++)
		if (a->addr[i].family != b->addr[i].family || a->addr[i].port != b->addr[i].port ||
		    memcmp(a->addr[i].addr, b->addr[i].addr, sizeof(a->addr[i].addr)))
			return 0;
	return 1;
}

int agg_config_restart_diff(const struct agg_config *a, const struct agg_config *b, char *what, size_t len)
{
	size_t i;

	if (a->horizon_ns != b->horizon_ns) {
		rm_errf(what, len, "horizon");
		return 1;
	}
	if (a->max_held != b->max_held) {
		rm_errf(what, len, "max_held");
		return 1;
	}
	for (i = 0; i < a->nest || i < b->nest; i++)
		if (i >= a->nest || i >= b->nest || !agg_est_same(&a->est[i], &b->est[i])) {
			rm_errf(what, len, "[estimate %s]", i < b->nest ? b->est[i].server : a->est[i].server);
			return 1;
		}
	return 0;
}

static int agg_rule_same(const struct agg_rule *a, const struct agg_rule *b)
{
	return a->nclients == b->nclients && a->ndomains == b->ndomains && a->cport_lo == b->cport_lo &&
	       a->cport_hi == b->cport_hi && a->sport_lo == b->sport_lo && a->sport_hi == b->sport_hi &&
	       a->priority == b->priority &&
	       (!a->nclients || memcmp(a->clients, b->clients, a->nclients * sizeof(*a->clients)) == 0) &&
	       (!a->ndomains || memcmp(a->domains, b->domains, a->ndomains * sizeof(*a->domains)) == 0);
}

/* Appends "<sep><word> <name>" to out, the separator after the first. */
static void agg_diff_add(char *out, size_t len, int *first, const char *word, const char *name)
{
	size_t n = strlen(out);

	if (n + 1 >= len)
		return;
	snprintf(out + n, len - n, "%s%s %s", *first ? "" : ", ", word, name);
	*first = 0;
}

int agg_config_diff(const struct agg_config *a, const struct agg_config *b, char *out, size_t len)
{
	const struct agg_throttle_cfg *x = &a->throttle, *y = &b->throttle;
	size_t i, n;
	int first = 1, order = a->nrules == b->nrules, caps = x->ncaps == y->ncaps;

	if (!len)
		return 0;
	out[0] = '\0';
	for (i = 0; i < b->nrules; i++) {
		int j = agg_config_find_ce(a, b->rules[i].ce);

		if (j < 0) {
			agg_diff_add(out, len, &first, first ? "CE rules: added" : "added", b->rules[i].ce);
		} else {
			if (!agg_rule_same(&a->rules[j], &b->rules[i]))
				agg_diff_add(out, len, &first, first ? "CE rules: changed" : "changed", b->rules[i].ce);
			if ((size_t)j != i)
				order = 0;
		}
	}
	for (i = 0; i < a->nrules; i++)
		if (agg_config_find_ce(b, a->rules[i].ce) < 0) {
			agg_diff_add(out, len, &first, first ? "CE rules: removed" : "removed", a->rules[i].ce);
			order = 0;
		}
	if (first && !order)
		agg_diff_add(out, len, &first, "CE rules:", "reordered");
	for (i = 0; caps && i < x->ncaps; i++)
		caps = strcmp(x->caps[i].ce, y->caps[i].ce) == 0 && strcmp(x->caps[i].server, y->caps[i].server) == 0 &&
		       x->caps[i].cap_permille == y->caps[i].cap_permille;
	n = strlen(out);
	if (x->enabled != y->enabled)
		snprintf(out + n, len - n, "%sthrottling %s", n ? "; " : "", y->enabled ? "on" : "off");
	else if (!caps || x->overload != y->overload || x->threshold_permille != y->threshold_permille ||
		 x->alpha != y->alpha || x->decrease != y->decrease || x->increase_permille != y->increase_permille ||
		 x->min_cap_permille != y->min_cap_permille || x->release_windows != y->release_windows ||
		 x->min_share_permille != y->min_share_permille || x->lease_ns != y->lease_ns ||
		 x->settle_ns != y->settle_ns || strcmp(x->source, y->source) != 0)
		snprintf(out + n, len - n, "%sthrottle: %s", n ? "; " : "", caps ? "policy changed" : "caps changed");
	n = strlen(out);
	if (memcmp(a->retention_ns, b->retention_ns, sizeof(a->retention_ns)) != 0)
		snprintf(out + n, len - n, "%sretention changed", n ? "; " : "");
	return out[0] != '\0';
}
