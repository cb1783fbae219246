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
#include "rm_err.h"
#include "banned.h"

#define AGG_MAX_LINE 4096

struct agg_parse {
	const char *name;
	int line;
	int errors;
	struct agg_config *c;
	enum { SEC_NONE, SEC_AGG, SEC_CE, SEC_EST, SEC_UNKNOWN } sec;
};

static void agg_perr(struct agg_parse *p, const char *fmt, const char *a, const char *b)
{
	char msg[512];

	snprintf(msg, sizeof(msg), fmt, a ? a : "", b ? b : "");
	rm_log_error("%s:%d: %s", p->name, p->line, msg);
	p->errors++;
}

static char *agg_trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
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

/* "<n><unit>" with unit ns, us, ms, s, m or h (required) into ns. */
static int agg_parse_duration(const char *s, uint64_t *out)
{
	static const struct {
		const char *unit;
		uint64_t ns;
	} units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 },
		{ "m", 60000000000ULL }, { "h", 3600000000000ULL },
	};
	unsigned long long v;
	char *end;
	size_t i;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	while (isspace((unsigned char)*end))
		end++;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(end, units[i].unit) == 0) {
			if (v > UINT64_MAX / units[i].ns)
				return -1;
			*out = v * units[i].ns;
			return 0;
		}
	return -1;
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
		if (agg_parse_u32(agg_trim(buf), 65535, lo) || agg_parse_u32(agg_trim(dash + 1), 65535, hi))
			return -1;
	} else {
		if (agg_parse_u32(agg_trim(buf), 65535, lo))
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

	hdr = agg_trim(hdr);
	if (strcmp(hdr, "aggregator") == 0) {
		p->sec = SEC_AGG;
		return RM_OK;
	}
	if (strncmp(hdr, "ce", 2) == 0 && isspace((unsigned char)hdr[2])) {
		name = agg_trim(hdr + 3);
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
		p->sec = SEC_CE;
		return agg_push((void **)&p->c->rules, &p->c->nrules, sizeof(r), &r);
	}
	if (strncmp(hdr, "estimate", 8) == 0 && isspace((unsigned char)hdr[8])) {
		struct agg_est_conf e;

		name = agg_trim(hdr + 9);
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
		p->sec = SEC_EST;
		return agg_push((void **)&p->c->est, &p->c->nest, sizeof(e), &e);
	}
	agg_perr(p, "unknown section '[%s]'%s", hdr, NULL);
	p->sec = SEC_UNKNOWN;
	return RM_OK;
}

/* A key of an [estimate SERVER] section. */
static void agg_kv_est(struct agg_parse *p, struct agg_est_conf *e, const char *key, char *val)
{
	if (strcmp(key, "method") == 0) {
		char *save = NULL, *tok;

		e->methods = 0;
		for (tok = strtok_r(val, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			tok = agg_trim(tok);
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
		else if (agg_parse_duration(val, &ns) || ns == 0 || ns > AGG_CONFIG_HORIZON_MAX_NS)
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
	} else {
		agg_perr(p, "unknown key '%s' in [estimate %s]", key, e->server);
	}
}

static int agg_kv(struct agg_parse *p, char *key, char *val)
{
	struct agg_rule *r = p->c->nrules ? &p->c->rules[p->c->nrules - 1] : NULL;

	key = agg_trim(key);
	val = agg_trim(val);
	if (p->sec == SEC_UNKNOWN)
		return RM_OK;
	if (p->sec == SEC_NONE) {
		agg_perr(p, "key '%s' outside of any section%s", key, NULL);
		return RM_OK;
	}
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
			if (strncmp(val, "tcp://", 6) && strncmp(val, "ipc://", 6))
				agg_perr(p, "listen address '%s' must start with tcp:// or ipc://%s", val, NULL);
		} else if (strcmp(key, "db") == 0) {
			free(p->c->db);
			if (!(p->c->db = strdup(val)))
				return RM_ENOMEM;
		} else if (strcmp(key, "horizon") == 0) {
			uint64_t ns;

			if (agg_parse_duration(val, &ns) || ns < AGG_CONFIG_HORIZON_MIN_NS ||
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
			agg_perr(p, "unknown key '%s' in [aggregator]%s", key, NULL);
		}
		return RM_OK;
	}
	if (p->sec == SEC_EST) {
		agg_kv_est(p, &p->c->est[p->c->nest - 1], key, val);
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
	if (strcmp(key, "xen_domain") == 0) {
		char *save = NULL, *tok;

		for (tok = strtok_r(val, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			uint32_t d;

			tok = agg_trim(tok);
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

int agg_config_parse(const char *text, size_t len, const char *name, struct agg_config **out)
{
	struct agg_parse p = { .name = name ? name : "config" };
	char line[AGG_MAX_LINE];
	size_t pos = 0, i, j;
	int rv = RM_OK;

	*out = NULL;
	if (!text)
		return RM_EINVAL;
	if (!(p.c = calloc(1, sizeof(*p.c))))
		return RM_ENOMEM;
	p.c->horizon_ns = AGG_CONFIG_HORIZON_DEFAULT_NS;
	p.c->max_held = AGG_CONFIG_MAX_HELD_DEFAULT;
	while (pos < len && rv == RM_OK) {
		size_t e = pos, n;
		char *s, *eq;

		while (e < len && text[e] != '\n')
			e++;
		n = e - pos;
		p.line++;
		if (n >= sizeof(line)) {
			agg_perr(&p, "line longer than %s bytes%s", "4095", NULL);
			pos = e + 1;
			continue;
		}
		memcpy(line, text + pos, n);
		line[n] = '\0';
		pos = e + 1;
		if (memchr(line, '\0', n)) {
			agg_perr(&p, "NUL byte in line%s%s", NULL, NULL);
			continue;
		}
		s = agg_trim(line);
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *close = strchr(s, ']');

			if (!close || *agg_trim(close + 1)) {
				agg_perr(&p, "malformed section header '%s'%s", s, NULL);
				p.sec = SEC_UNKNOWN;
				continue;
			}
			*close = '\0';
			rv = agg_section(&p, s + 1);
			continue;
		}
		/* strip trailing comments after whitespace */
		for (eq = s; *eq; eq++)
			if ((*eq == ';' || *eq == '#') && eq > s && isspace((unsigned char)eq[-1])) {
				*eq = '\0';
				break;
			}
		eq = strchr(s, '=');
		if (!eq) {
			agg_perr(&p, "expected 'key = value', got '%s'%s", s, NULL);
			continue;
		}
		*eq = '\0';
		rv = agg_kv(&p, s, eq + 1);
	}
	for (i = 0; rv == RM_OK && i < p.c->nrules; i++)
		for (j = 0; j < i; j++)
			if (strcmp(p.c->rules[i].ce, p.c->rules[j].ce) == 0) {
				p.line = p.c->rules[i].line;
				agg_perr(&p, "duplicate section [ce %s]%s", p.c->rules[i].ce, NULL);
			}
	for (i = 0; rv == RM_OK && i < p.c->nest; i++) {
		p.line = p.c->est[i].line;
		if (!p.c->est[i].methods)
			agg_perr(&p, "[estimate %s] needs 'method = lr', 'kalman' or 'lr, kalman'%s", p.c->est[i].server,
				 NULL);
		for (j = 0; j < i; j++)
			if (strcmp(p.c->est[i].server, p.c->est[j].server) == 0)
				agg_perr(&p, "duplicate section [estimate %s]%s", p.c->est[i].server, NULL);
	}
	if (rv == RM_OK && p.errors)
		rv = RM_ECONFIG;
	if (rv != RM_OK) {
		agg_config_free(p.c);
		return rv;
	}
	*out = p.c;
	return RM_OK;
}

int agg_config_load(const char *path, struct agg_config **out)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rv;

	*out = NULL;
	if (!f) {
		rm_log_error("failed to read '%s': %s", path, strerror(errno));
		return RM_EIO;
	}
	for (;;) {
		size_t n;

		if (len + 4096 > cap) {
			char *nb;

			cap = cap ? cap * 2 : 8192;
			if (cap > (16u << 20) || !(nb = realloc(buf, cap))) {
				rm_log_error("failed to read '%s': too large", path);
				free(buf);
				fclose(f);
				return RM_ECONFIG;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		rm_log_error("failed to read '%s': %s", path, strerror(errno));
		free(buf);
		fclose(f);
		return RM_EIO;
	}
	fclose(f);
	rv = agg_config_parse(buf ? buf : "", len, path, out);
	free(buf);
	return rv;
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
	for (i = 0; i < c->nrules; i++) {
		free(c->rules[i].clients);
		free(c->rules[i].domains);
	}
	free(c->rules);
	free(c->est);
	free(c);
}

static int agg_cidr_match(const struct agg_cidr *c, uint32_t family, const uint8_t *a, size_t alen)
{
	int i;

	if ((int)family != c->family || alen != (c->family == AF_INET ? 4u : 16u))
		return 0;
	for (i = 0; i < c->prefix; i++) {
		uint8_t m = 0x80u >> (i % 8);

		if ((a[i / 8] & m) != (c->addr[i / 8] & m))
			return 0;
	}
	return 1;
}

int agg_config_match_tuple(const struct agg_config *c, uint32_t family, const uint8_t *raddr, size_t alen,
			   uint32_t rport, uint32_t lport)
{
	size_t i, k;

	for (i = 0; i < c->nrules; i++) {
		const struct agg_rule *r = &c->rules[i];
		int ok = r->nclients == 0;

		if (r->ndomains && !r->nclients && r->cport_lo == 0 && r->cport_hi == 65535 &&
		    r->sport_lo == 0 && r->sport_hi == 65535)
			continue; /* a Xen-only rule does not match every socket */
		for (k = 0; k < r->nclients && !ok; k++)
			ok = agg_cidr_match(&r->clients[k], family, raddr, alen);
		if (!ok)
			continue;
		if (rport < r->cport_lo || rport > r->cport_hi || lport < r->sport_lo || lport > r->sport_hi)
			continue;
		return (int)i;
	}
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
