/*
 * agg_config.h - the aggregator's INI configuration: where to listen, where
 * to store, and the rules that map clients to chargeable entities (CEs).
 * Read from a file and its drop-ins (rm_conf.h), sections may come in any
 * file; messages name the file and line.
 *
 *   [aggregator]
 *   listen = tcp://0.0.0.0:7600        ; repeatable; tcp://, tls+tcp:// or ipc://
 *   db = /var/lib/rametr/rametr.db
 *   horizon = 10s                      ; how long a part may wait for the send
 *                                      ; that produced its bytes (default 10s):
 *                                      ; a duration (rm_dur.h: 250ms, 10s,
 *                                      ; 1.5m), 1ms .. 1h
 *   max_held = 262144                  ; parts held at most while pairing
 *                                      ; (default 262144, 1 .. 2^26)
 *   log_level = info                   ; any other key is one of the program's
 *   keep_pending = no                  ; settings (agg_main.c), kept in
 *                                      ; settings[] for it to check
 *
 *   [ce c1]                            ; or [ce "c1"]
 *   client = 127.0.0.2                 ; address or CIDR, IPv4 or IPv6; repeatable
 *   client_port = 40000-40999          ; optional port or range of the client
 *   server_port = 7000                 ; optional port or range on the server side
 *   xen_domain = 3, 4                  ; Xen domains charged to this CE
 *   priority = 10                      ; wins over overlapping rules of lower priority
 *
 *   [estimate db1]                     ; estimate per-CE CPU of server (node) db1
 *   method = lr, kalman                ; one or both (required)
 *   lr_windows = 30                    ; LR: windows in the least-squares set (2..4096)
 *   kalman_q = auto                    ; Kalman: largest one-step change of a CE's
 *                                      ; CPU per request (duration, e.g. 200us), or
 *                                      ; auto (from the forecasts, seed 002 §III.C)
 *   kalman_r = 1e-4                    ; Kalman: variance of the measured CPU
 *                                      ; utilisation, cores^2 (> 0)
 *   address = 10.0.0.5:5432            ; optional, repeatable (up to 8), IPv4
 *                                      ; a.b.c.d:port or IPv6 [addr]:port: the
 *                                      ; server's inputs come from the sends of
 *                                      ; other nodes to these addresses, not from
 *                                      ; its own parts (for a server without a
 *                                      ; collector; see agg_est_run.h)
 *   [metrics]                          ; Prometheus /metrics over HTTP; absent = off
 *   listen = 127.0.0.1:9467            ; HOST:PORT or http://HOST:PORT (docs/metrics.md)
 *
 *   [throttle]                         ; throttling; absent = off
 *   cap = c2 db1 30%                   ; CE, server, cap (share of the server's
 *                                      ; CPU capacity, % or 0..1); repeatable
 *   overload = on                      ; the EWMA overload rule (default off)
 *   threshold = 85%                    ; of the smoothed server CPU
 *   alpha = 0.7                        ; EWMA weight of the newest window
 *   decrease = 0.9                     ; multiplicative decrease (seed 002 adj_d)
 *   increase = 1%                      ; additive increase per judged window
 *   min_cap = 1%
 *   min_share = 5%                     ; overload: the top consumer must hold at
 *                                      ; least this share to be throttled
 *   release_windows = 3
 *   lease = 10s                        ; expiry of every command (refreshed
 *                                      ; while the policy keeps the cap)
 *   settle = 1s                        ; a window is decided this long after
 *                                      ; its end
 *   source = rametr                    ; per-CE usage: rametr (the accounting)
 *                                      ; or lr (LR estimate from per-CE bytes)
 *
 * A segment's inbound socket matches a rule when its remote end is in one of
 * the rule's clients (or the rule lists none) and the ports are in range.
 * Rules are tried by `priority` (a [ce] key, 0 to 1000000, default 0),
 * highest first, then in file order; the first match wins. Two rules of the
 * same priority whose client ranges overlap (with overlapping ports), or
 * that list one Xen domain, are refused with both places; rules without
 * clients (ports only) are not checked. CE names are
 * [A-Za-z0-9_.-]{1,63} and may not start with "__" (reserved).
 */
#ifndef AGG_CONFIG_H
#define AGG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "rm_match.h"

struct agg_cidr {
	int family;         /* 2 = AF_INET, 10 = AF_INET6 */
	uint8_t addr[16];   /* network order, masked */
	int prefix;
};

struct agg_rule {
	char ce[64];
	struct agg_cidr *clients;
	size_t nclients;
	uint32_t cport_lo, cport_hi;   /* 0..65535 when not given */
	uint32_t sport_lo, sport_hi;
	uint32_t *domains;
	size_t ndomains;
	int priority;                  /* higher wins where rules overlap (default 0) */
	const char *file;              /* where the [ce] section starts (c->files) */
	int line;
	/* the sockets the rule names: one match per client with the rule's
	 * ports, or both families with prefix 0 if it lists no client; none for
	 * a Xen-only rule (domains, no client, no ports). Points into
	 * agg_config.match. */
	const struct rm_match *match;
	size_t nmatch;
};

#define AGG_CONFIG_HORIZON_DEFAULT_NS 10000000000ULL /* 10 s */
#define AGG_CONFIG_HORIZON_MIN_NS 1000000ULL         /* 1 ms */
#define AGG_CONFIG_HORIZON_MAX_NS 3600000000000ULL   /* 1 h */
#define AGG_CONFIG_MAX_HELD_DEFAULT 262144
#define AGG_CONFIG_MAX_HELD_MAX (1u << 26)

#define AGG_CONFIG_EST_LR 0x1
#define AGG_CONFIG_EST_KALMAN 0x2
#define AGG_CONFIG_LR_WINDOWS_DEFAULT 30
#define AGG_CONFIG_LR_WINDOWS_MAX 4096
#define AGG_CONFIG_KALMAN_R_DEFAULT 1e-4

#define AGG_CONFIG_EST_ADDR_MAX 8

struct agg_est_addr {
	int family;                    /* 2 = AF_INET, 10 = AF_INET6 */
	uint8_t addr[16];              /* network order */
	uint32_t port;
};

/* One [estimate SERVER] section (see agg_est.h for the methods). */
struct agg_est_conf {
	char server[64];
	struct agg_est_addr addr[AGG_CONFIG_EST_ADDR_MAX]; /* `address` keys */
	size_t naddr;
	unsigned methods;              /* AGG_CONFIG_EST_* */
	uint32_t lr_windows;
	uint64_t kalman_q_ns;          /* 0 = auto */
	double kalman_r;
	const char *file;              /* c->files */
	int line;
};

struct agg_throttle_cap {
	char ce[64];
	char server[64];
	uint32_t cap_permille;         /* 1..1000 */
	const char *file;              /* c->files */
	int line;
};

struct agg_throttle_cfg {
	int enabled;                   /* a [throttle] section is present */
	int overload;
	uint32_t threshold_permille;   /* default 850 */
	double alpha;                  /* default 0.7 */
	double decrease;               /* default 0.9 */
	uint32_t increase_permille;    /* default 10 */
	uint32_t min_cap_permille;     /* default 10 */
	uint32_t release_windows;      /* default 3 */
	uint32_t min_share_permille;   /* default 50 */
	uint64_t lease_ns;             /* default 10 s */
	uint64_t settle_ns;            /* default 1 s */
	char source[16];               /* "rametr" (default) or "lr" */
	struct agg_throttle_cap *caps;
	size_t ncaps;
};

/* A key of [aggregator] the rules do not use: one of the program's settings
 * (rm_conf.h), checked by the program. */
struct agg_config_kv {
	char *key, *value;
	const char *file;              /* c->files */
	int line;
};

struct agg_config {
	char **listen;
	size_t nlisten;
	char *db;                      /* NULL if not given */
	uint64_t horizon_ns;           /* pairing horizon (default AGG_CONFIG_HORIZON_DEFAULT_NS) */
	int64_t retention_ns[4];       /* [retention] 1s, 1m, 1h, 1d: -1 not given (storage's
					* default), 0 for ever, else ns */
	size_t max_held;               /* parts held at most (default AGG_CONFIG_MAX_HELD_DEFAULT) */
	struct agg_rule *rules;
	size_t nrules;
	struct rm_match *match;        /* every rule's matches, in file order */
	int *match_rule;               /* the rule of each */
	size_t nmatch;
	struct agg_est_conf *est;      /* [estimate] sections */
	size_t nest;
	struct agg_throttle_cfg throttle;
	char *metrics_listen;          /* [metrics] listen; NULL = no /metrics */
	struct agg_config_kv *settings; /* other [aggregator] keys, in file order */
	size_t nsettings;
	char **files;                  /* the names of the files read */
	size_t nfiles;
};

/* Index of the rule of CE name; -1 if none. */
int agg_config_find_ce(const struct agg_config *c, const char *name);

/*
 * Parse configuration text; name is used in messages ("agg.ini:12: ...").
 * Returns RM_OK with *out owned by the caller (agg_config_free), or
 * RM_ECONFIG after logging every problem found, or RM_ENOMEM.
 */
int agg_config_parse(const char *text, size_t len, const char *name, struct agg_config **out);

/* Read and parse a file and its drop-ins (path.d/NAME.conf, rm_conf.h):
 * RM_EIO "failed to read '%s'" or as agg_config_parse. */
int agg_config_load(const char *path, struct agg_config **out);

void agg_config_free(struct agg_config *c);

/*
 * What a reload cannot change in a running aggregator: 0 if a and b agree on
 * horizon, max_held and the [estimate] sections; otherwise 1 with the first
 * difference named in what (len bytes). Pure.
 */
int agg_config_restart_diff(const struct agg_config *a, const struct agg_config *b, char *what, size_t len);

/*
 * Describes into out (len bytes, always terminated) how the CE rules,
 * [throttle] and [retention] of b differ from a's, e.g. "CE rules: added c4, removed c2,
 * changed c1; throttle: caps changed"; "" when they agree. Returns 1 if they
 * differ. Pure.
 */
int agg_config_diff(const struct agg_config *a, const struct agg_config *b, char *out, size_t len);

/*
 * Index of the first rule matching an inbound socket whose remote end is
 * raddr:rport (alen 4 or 16 bytes, network order) and local port lport;
 * -1 if none. Pure, thread-safe.
 */
int agg_config_match_tuple(const struct agg_config *c, uint32_t family, const uint8_t *raddr, size_t alen,
			   uint32_t rport, uint32_t lport);

#define AGG_CONFIG_OTHER_END (-2)

/*
 * What the rules say of the socket of a segment part (family 2 or 10, local
 * end laddr:lport, remote end raddr:rport, 16-byte addresses as rametr.h's
 * tuples carry them; rm_match_tuple()): the index of the first rule naming
 * it as a CE's entry; AGG_CONFIG_OTHER_END if a rule names it seen from its
 * other end (the CE's own client); -1 if none. Pure, thread-safe.
 */
int agg_config_match_socket(const struct agg_config *c, uint32_t family, const uint8_t *laddr, uint32_t lport,
			    const uint8_t *raddr, uint32_t rport);

/* Index of the [estimate] section whose `address` list holds addr:port
 * (alen 4 or 16, network order); -1 if none. Pure, thread-safe. */
int agg_config_match_est_addr(const struct agg_config *c, uint32_t family, const uint8_t *addr, size_t alen,
			      uint32_t port);

/* Index of the [estimate] section of server; -1 if none. */
int agg_config_find_est(const struct agg_config *c, const char *server);

/* Index of the first rule listing Xen domain domid; -1 if none. */
int agg_config_match_domain(const struct agg_config *c, uint32_t domid);

#endif
