/*
 * agg_server.c - the aggregator's transport loop: one nng rep0 socket, one
 * request at a time, decode + check (rm_wire), dispatch to the handler, map
 * its result to an Ack status, embed throttle commands, reply. Owns the
 * socket and the rate limiter of its refusal log; owns no message after it
 * has been answered.
 *
 * ipc:// listener watchdog: with nng 1.5.2 (Debian 12), a peer that connects
 * to an ipc:// listener and closes at once can leave the listener deaf for
 * good: later connections complete their handshake but are never attached to
 * the socket (tcp:// is not affected). So every AGG_PROBE_EVERY_MS the server
 * sends itself a probe request (never passed to the handler) over a fresh
 * connection to each ipc listener; if no answer comes within
 * AGG_PROBE_WEDGED_MS while this loop sat idle, the listener is closed and
 * listened again (logged). Collectors reconnect by themselves.
 *
 * Admission and bounds (see agg_server.h): the connection table, filled and
 * emptied by nng's pipe callbacks (on nng's threads, under pmu), caps the
 * connections, remembers which node and instance each one said Hello for,
 * and when it last completed a message; the loop closes the idle ones.
 * The rules themselves (tokens, window tolerance) are agg_admit.c.
 *
 * Timeouts: nng 1.5.2's own operation timeouts (NNG_OPT_RECVTIMEO, aio
 * timeouts) are not relied upon, so that *stop and on_tick keep working
 * whatever nng's timer queue does: every socket operation is an nng_aio
 * without a timeout, waited for on our own condition variable and cancelled
 * with nng_aio_cancel() when our deadline passes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>

#include "agg_admit.h"
#include "agg_server.h"
#include "rm_clock.h"
#include "rm_nng.h"
#include "banned.h"

#define AGG_LOG_WINDOW_S 10  /* rate limit of the refusal log: */
#define AGG_LOG_MAX 10       /* at most this many lines per window */
#define AGG_POLL_MS 100      /* *stop is checked at least this often */
#define AGG_SEND_TIMEOUT_MS 1000
#define AGG_PROBE_EVERY_MS 2000
#define AGG_PROBE_WEDGED_MS 2000
#define AGG_PROBE_IDLE_POLLS 10 /* idle polls of AGG_POLL_MS meanwhile */
#define AGG_PROBE_LEN 12
/*
 * At close, nng_close() is waited for at most this long: with over a
 * thousand connections open, nng 1.5.2's nng_close() can wait forever for
 * connections that never finish closing (seen with 1500 and 2000 idle
 * peers, each midway through a frame; 1000 close in 0.3 s).
 */
#define AGG_CLOSE_SOCK_MS 2000

/* A probe request: magic (a protobuf Envelope never starts with 0) + nonce. */
static const uint8_t agg_probe_magic[8] = { 0, 'R', 'M', 'P', 'R', 'O', 'B', 'E' };

struct agg_listen {
	char *url;
	nng_listener l;
	int listening;
	int watched;        /* ipc:// listeners are probed */
	nng_socket probe;   /* open during one probe */
	int probe_open;
	atomic_int probe_up; /* 1 once its connection attached (nng's thread sets it) */
	int sent;
	uint32_t nonce;
	uint64_t started_ms, next_ms;
	unsigned idle_polls;
};

/*
 * The refusal log's rate limit, one per kind, so that a flood of connections
 * does not hide the refused messages.
 */
enum agg_log_kind { AGG_LOG_CONN, AGG_LOG_DROP, AGG_LOG_MSG, AGG_LOG_KINDS };
static const char *const agg_log_what[AGG_LOG_KINDS] = {
	"refused connections", "closed connections", "refused messages"
};
struct agg_log_limit {
	time_t window;
	unsigned lines;
	uint64_t suppressed;
};

/* One connection (nng pipe) of the socket. */
struct agg_conn {
	uint32_t id;
	nng_pipe p;
	uint64_t last_ms;    /* connected, or last complete message */
	uint64_t msgs;       /* complete messages */
	int closing;         /* closed by us (idle, or replaced); holds no admission slot */
	int hello;           /* node and instance are set */
	uint64_t instance;
	char node[RM_WIRE_NODE_MAX + 1];
	char peer[96];
};

/* Why a message was refused before its handler saw it. */
enum agg_why { AGG_WHY_NONE, AGG_WHY_IDENTITY, AGG_WHY_CONFLICT, AGG_WHY_WINDOW };

struct agg_server {
	nng_socket sock;
	struct agg_handler h;
	int tick_ms;
	struct agg_server_cfg cfg;  /* strings and secret not kept */
	uint8_t *secret;
	size_t secret_len;
	nng_tls_config *tls;
	size_t max_msg;
	/* connection table and counters, under pmu */
	pthread_mutex_t pmu;
	struct agg_conn *conns;     /* 2 * max_conns entries: the open ones and the closing ones */
	unsigned nconns;            /* entries in use */
	unsigned nclosing;          /* of them, closed by us and not yet gone */
	struct agg_server_stats st;
	pthread_mutex_t lmu;        /* the refusal log's rate limiter */
	/* the one aio of the loop, and how its completion is waited for */
	nng_aio *aio;
	pthread_mutex_t amu;
	pthread_cond_t acv;
	int adone;
	int sock_open;
	struct agg_listen *ls;
	size_t nls;
	/* refusal log rate limiter */
	struct agg_log_limit logs[AGG_LOG_KINDS];
};

static uint64_t agg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Readies s->aio's completion flag before an operation is started on it. */
static void agg_aio_arm(struct agg_server *s)
{
	pthread_mutex_lock(&s->amu);
	s->adone = 0;
	pthread_mutex_unlock(&s->amu);
}

static void agg_aio_done(void *arg)
{
	struct agg_server *s = arg;

	pthread_mutex_lock(&s->amu);
	s->adone = 1;
	pthread_cond_signal(&s->acv);
	pthread_mutex_unlock(&s->amu);
}

/*
 * Waits for the operation just started on s->aio, at most ms; cancels it
 * when late. Returns its nng result (NNG_ECANCELED if it was late).
 */
static int agg_aio_wait(struct agg_server *s, int ms)
{
	struct timespec ts;

	rm_clock_mono_deadline(&ts, ms);
	pthread_mutex_lock(&s->amu);
	while (!s->adone && pthread_cond_timedwait(&s->acv, &s->amu, &ts) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&s->amu);
	nng_aio_cancel(s->aio); /* no effect if it completed */
	nng_aio_wait(s->aio);   /* the callback has run */
	return nng_aio_result(s->aio);
}

/* Sends msg (consumed) as the reply to the last request. */
static int agg_reply(struct agg_server *s, nng_msg *msg)
{
	int rv;

	agg_aio_arm(s);
	nng_aio_set_msg(s->aio, msg);
	nng_send_aio(s->sock, s->aio);
	if ((rv = agg_aio_wait(s, AGG_SEND_TIMEOUT_MS)) != 0)
		nng_msg_free(nng_aio_get_msg(s->aio));
	nng_aio_set_msg(s->aio, NULL);
	return rv;
}

/* Readable address of the peer of pipe p ("?" if unknown). */
static void agg_pipe_peer(nng_pipe p, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];
	nng_sockaddr sa;
	uint64_t pid;

	snprintf(buf, len, "?");
	if (nng_pipe_id(p) < 0 || nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0)
		return;
	switch (sa.s_family) {
	case NNG_AF_INET:
		if (inet_ntop(AF_INET, &sa.s_in.sa_addr, a, sizeof(a)))
			snprintf(buf, len, "tcp://%s:%u", a, ntohs(sa.s_in.sa_port));
		break;
	case NNG_AF_INET6:
		if (inet_ntop(AF_INET6, sa.s_in6.sa_addr, a, sizeof(a)))
			snprintf(buf, len, "tcp://[%s]:%u", a, ntohs(sa.s_in6.sa_port));
		break;
	case NNG_AF_IPC:
		if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid) == 0)
			snprintf(buf, len, "ipc://%s (pid %" PRIu64 ")", sa.s_ipc.sa_path, pid);
		else
			snprintf(buf, len, "ipc://%s", sa.s_ipc.sa_path);
		break;
	default:
		break;
	}
}

/* Readable address of the peer that sent msg ("?" if unknown). */
static void agg_peer(nng_msg *msg, char *buf, size_t len)
{
	agg_pipe_peer(nng_msg_get_pipe(msg), buf, len);
}

static void agg_log_refusal(struct agg_server *s, enum agg_log_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Starts a new window of l if its time is up, logging what it suppressed. Under lmu. */
static void agg_log_roll(struct agg_log_limit *l, enum agg_log_kind kind, time_t now)
{
	if (now - l->window < AGG_LOG_WINDOW_S)
		return;
	if (l->suppressed)
		rm_log_warn("%" PRIu64 " more %s not logged in the last %d s", l->suppressed,
			    agg_log_what[kind], AGG_LOG_WINDOW_S);
	l->window = now;
	l->lines = 0;
	l->suppressed = 0;
}

/* Logs the counts of suppressed lines whose window is over (the loop calls it). */
static void agg_log_flush(struct agg_server *s)
{
	time_t now = time(NULL);
	int k;

	pthread_mutex_lock(&s->lmu);
	for (k = 0; k < AGG_LOG_KINDS; k++)
		if (s->logs[k].suppressed)
			agg_log_roll(&s->logs[k], (enum agg_log_kind)k, now);
	pthread_mutex_unlock(&s->lmu);
}

static void agg_log_refusal(struct agg_server *s, enum agg_log_kind kind, const char *fmt, ...)
{
	struct agg_log_limit *l = &s->logs[kind];
	char line[1024];
	va_list ap;

	pthread_mutex_lock(&s->lmu);
	agg_log_roll(l, kind, time(NULL));
	if (l->lines >= AGG_LOG_MAX) {
		l->suppressed++;
		pthread_mutex_unlock(&s->lmu);
		return;
	}
	l->lines++;
	pthread_mutex_unlock(&s->lmu);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	rm_log_warn("%s", line);
}

/* Ack status for a handler's return value. */
static Rametr__Ack__Status agg_status(int rv, int duplicate)
{
	switch (rv) {
	case RM_OK:
		return duplicate ? RAMETR__ACK__STATUS__ACK_DUPLICATE : RAMETR__ACK__STATUS__ACK_OK;
	case RM_EPROTO:
	case RM_EINVAL:
		return RAMETR__ACK__STATUS__ACK_REJECTED;
	case RM_EVERSION:
		return RAMETR__ACK__STATUS__ACK_BAD_VERSION;
	default:
		return RAMETR__ACK__STATUS__ACK_RETRY;
	}
}

/*
 * Encodes the Ack, with the node's commands if any and if they pass the wire
 * rules, and the decided matches. Returns RM_OK or RM_ENOMEM.
 */
static int agg_build_ack(struct agg_server *s, Rametr__Ack__Status st, uint64_t seq,
			 const char *error, const char *node, uint8_t **buf, size_t *len)
{
	Rametr__ThrottleCommand **cmds = NULL;
	Rametr__Envelope env = RAMETR__ENVELOPE__INIT;
	Rametr__Ack ack = RAMETR__ACK__INIT;
	size_t n = 0;
	char err[256];
	int rv;

	if (node && s->h.commands_for &&
	    (st == RAMETR__ACK__STATUS__ACK_OK || st == RAMETR__ACK__STATUS__ACK_DUPLICATE)) {
		if ((rv = s->h.commands_for(s->h.arg, node, &cmds, &n)) != 0) {
			rm_log_warn("failed to get the commands for node '%s': %s", node,
				    rm_strerror(rv));
			cmds = NULL;
			n = 0;
		} else if (n && !cmds) {
			rm_log_error("commands_for returned %zu commands for node '%s' and no array", n,
				     node);
			n = 0;
		}
	}
	ack.status = st;
	ack.seq = seq;
	ack.error = (char *)(error ? error : "");
	ack.n_commands = n;
	ack.commands = cmds;
	if (st == RAMETR__ACK__STATUS__ACK_OK || st == RAMETR__ACK__STATUS__ACK_DUPLICATE) {
		ack.n_decided = s->h.decided ? s->h.ndecided : 0;
		ack.decided = s->h.decided;
	}
	env.version = RM_PROTO_VERSION;
	env.body_case = RAMETR__ENVELOPE__BODY_ACK;
	env.ack = &ack;
	if (n && rm_wire_check(&env, err, sizeof(err)) != RM_OK) {
		rm_log_error("not sending the commands for node '%s': %s", node, err);
		ack.n_commands = 0;
		ack.commands = NULL;
	}
	rv = rm_wire_encode(&env, buf, len);
	if (rv == RM_EINVAL && ack.n_commands) {
		rm_log_error("the %zu commands for node '%s' do not fit in one message; not sent",
			     ack.n_commands, node);
		ack.n_commands = 0;
		ack.commands = NULL;
		rv = rm_wire_encode(&env, buf, len);
	}
	return rv;
}

/* ---- the connection table ---- */

static struct agg_conn *agg_conn_find(struct agg_server *s, uint32_t id)
{
	unsigned i;

	for (i = 0; i < s->nconns; i++)
		if (s->conns[i].id == id)
			return &s->conns[i];
	return NULL;
}

/* Whether p came through a tls+tcp:// listener. */
static int agg_pipe_is_tls(nng_pipe p)
{
	nng_listener l = nng_pipe_listener(p);
	char *url = NULL;
	int tls;

	if (nng_listener_id(l) < 0 || nng_listener_get_string(l, NNG_OPT_URL, &url) != 0)
		return 1; /* unknown: treated as TLS, so it must be verified */
	tls = strncmp(url, "tls+tcp://", 10) == 0;
	nng_strfree(url);
	return tls;
}

/* Whether p's peer presented a certificate the cluster CA verified. */
static int agg_pipe_verified(nng_pipe p)
{
	bool v = false;

	return nng_pipe_get_bool(p, NNG_OPT_TLS_VERIFIED, &v) == 0 && v;
}

/* nng's pipe callback (nng's threads): caps and tracks connections. */
static void agg_pipe_event(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct agg_server *s = arg;
	struct agg_conn *c;
	char peer[96];
	int silent = 0, refused = 0;
	unsigned open;

	if (ev == NNG_PIPE_EV_ADD_PRE) {
		agg_pipe_peer(p, peer, sizeof(peer));
		if (s->tls && agg_pipe_is_tls(p) && !agg_pipe_verified(p)) {
			pthread_mutex_lock(&s->pmu);
			s->st.conns_unverified++;
			pthread_mutex_unlock(&s->pmu);
			nng_pipe_close(p);
			agg_log_refusal(s, AGG_LOG_CONN, "refused a TLS connection from %s: no certificate signed by "
					"the cluster CA", peer);
			return;
		}
		pthread_mutex_lock(&s->pmu);
		open = s->nconns - s->nclosing;
		/* a connection we closed holds its entry until nng lets it go (which can take
		 * seconds with many peers midway through a frame), not its admission slot */
		if (open >= s->st.max_conns || s->nconns >= 2 * s->st.max_conns) {
			s->st.conns_refused++;
			refused = 1;
		} else {
			c = &s->conns[s->nconns++];
			memset(c, 0, sizeof(*c));
			c->id = (uint32_t)nng_pipe_id(p);
			c->p = p;
			c->last_ms = agg_now_ms();
			snprintf(c->peer, sizeof(c->peer), "%s", peer);
			s->st.conns_accepted++;
		}
		pthread_mutex_unlock(&s->pmu);
		if (refused) {
			nng_pipe_close(p);
			agg_log_refusal(s, AGG_LOG_CONN, "refused a connection from %s: %u connections open, the most "
					"allowed", peer, open);
		}
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		pthread_mutex_lock(&s->pmu);
		if ((c = agg_conn_find(s, (uint32_t)nng_pipe_id(p)))) {
			silent = c->msgs == 0 && !c->closing;
			if (c->msgs == 0)
				s->st.conns_silent++;
			if (c->closing)
				s->nclosing--;
			snprintf(peer, sizeof(peer), "%s", c->peer);
			*c = s->conns[--s->nconns];
		}
		pthread_mutex_unlock(&s->pmu);
		if (silent)
			agg_log_refusal(s, AGG_LOG_DROP, "connection from %s ended without a complete message (hung "
					"up, or sent a frame over %zu bytes)", peer, s->max_msg);
	}
}

/* Marks c as closed by us: it keeps its entry until nng releases it, not its admission slot. Under pmu. */
static void agg_conn_mark_closing(struct agg_server *s, struct agg_conn *c)
{
	c->closing = 1;
	s->nclosing++;
}

/* Closes connections that completed no message in idle_ms. Loop thread. */
static void agg_sweep_idle(struct agg_server *s)
{
	nng_pipe close[16];
	char peer[16][96];
	uint64_t now = agg_now_ms();
	unsigned i, n = 0;

	pthread_mutex_lock(&s->pmu);
	for (i = 0; i < s->nconns && n < 16; i++) {
		struct agg_conn *c = &s->conns[i];

		if (!c->closing && now - c->last_ms >= (uint64_t)s->cfg.idle_ms) {
			agg_conn_mark_closing(s, c);
			close[n] = c->p;
			snprintf(peer[n], sizeof(peer[n]), "%s", c->peer);
			n++;
			s->st.conns_idle_closed++;
		}
	}
	pthread_mutex_unlock(&s->pmu);
	for (i = 0; i < n; i++) {
		agg_log_refusal(s, AGG_LOG_DROP, "closing the connection from %s: no complete message in %d ms",
				peer[i], s->cfg.idle_ms);
		nng_pipe_close(close[i]);
	}
}

/* A complete message arrived on p. */
static void agg_conn_seen(struct agg_server *s, nng_pipe p)
{
	struct agg_conn *c;

	pthread_mutex_lock(&s->pmu);
	if ((c = agg_conn_find(s, (uint32_t)nng_pipe_id(p)))) {
		c->msgs++;
		c->last_ms = agg_now_ms();
	}
	pthread_mutex_unlock(&s->pmu);
}

static int64_t agg_now_unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/*
 * Admission of a Hello on p: the token, then (bind_nodes) no other collector
 * holding the node. A reconnect of the same instance closes its old
 * connection. Returns RM_OK, or RM_EPROTO with err and *why.
 */
static int agg_admit_hello(struct agg_server *s, nng_pipe p, const Rametr__Hello *h, char *err,
			   size_t errlen, enum agg_why *why)
{
	nng_pipe stale[8];
	unsigned i, n = 0;
	int rv = RM_OK;

	if (s->secret &&
	    agg_admit_check_token(s->secret, s->secret_len, h->node, h->token, err, errlen) != RM_OK) {
		*why = AGG_WHY_IDENTITY;
		return RM_EPROTO;
	}
	if (!s->cfg.bind_nodes)
		return RM_OK;
	pthread_mutex_lock(&s->pmu);
	for (i = 0; i < s->nconns; i++) {
		struct agg_conn *c = &s->conns[i];

		if (c->id == (uint32_t)nng_pipe_id(p)) {
			if (c->hello && (strcmp(c->node, h->node) || c->instance != h->instance)) {
				snprintf(err, errlen, "this connection belongs to node '%s'", c->node);
				*why = AGG_WHY_IDENTITY;
				rv = RM_EPROTO;
				break;
			}
			continue;
		}
		if (!c->hello || c->closing || strcmp(c->node, h->node) != 0)
			continue;
		if (c->instance != h->instance) {
			snprintf(err, errlen,
				 "node '%s' is connected from %s as another collector (instance "
				 "%016" PRIx64 ")",
				 h->node, c->peer, c->instance);
			*why = AGG_WHY_CONFLICT;
			rv = RM_EPROTO;
			break;
		}
		if (n < 8) {
			agg_conn_mark_closing(s, c);
			stale[n++] = c->p;
		}
	}
	pthread_mutex_unlock(&s->pmu);
	if (rv != RM_OK)
		n = 0;
	for (i = 0; i < n; i++)
		nng_pipe_close(stale[i]); /* the same collector, connected again */
	return rv;
}

/* Records that p belongs to h's node and instance (bind_nodes). */
static void agg_bind(struct agg_server *s, nng_pipe p, const Rametr__Hello *h)
{
	struct agg_conn *c;

	if (!s->cfg.bind_nodes)
		return;
	pthread_mutex_lock(&s->pmu);
	if ((c = agg_conn_find(s, (uint32_t)nng_pipe_id(p))) && !c->hello) {
		c->hello = 1;
		c->instance = h->instance;
		snprintf(c->node, sizeof(c->node), "%s", h->node);
	}
	pthread_mutex_unlock(&s->pmu);
}

/*
 * Admission of a Batch on p: (bind_nodes) its node is its connection's; its windows within the tolerance. Returns RM_OK; RM_ESTATE
 * (answered ACK_RETRY) before any Hello on p; RM_EPROTO with err and *why.
 */
static int agg_admit_batch(struct agg_server *s, nng_pipe p, const struct rm_wbatch *b, char *err,
			   size_t errlen, enum agg_why *why)
{
	struct agg_conn *c;
	int rv = RM_OK;

	if (s->cfg.bind_nodes) {
		pthread_mutex_lock(&s->pmu);
		c = agg_conn_find(s, (uint32_t)nng_pipe_id(p));
		if (!c || !c->hello) {
			snprintf(err, errlen, "no hello on this connection yet");
			rv = RM_ESTATE;
		} else if (strcmp(c->node, b->node) != 0) {
			/* any instance: a collector sends its predecessor's spool unchanged */
			snprintf(err, errlen, "batch of node '%s' on the connection of node '%s'",
				 b->node, c->node);
			*why = AGG_WHY_IDENTITY;
			rv = RM_EPROTO;
		}
		pthread_mutex_unlock(&s->pmu);
		if (rv != RM_OK)
			return rv;
	}
	if (agg_admit_windows(b, agg_now_unix_ns(), s->cfg.window_tolerance_ns, err, errlen) != RM_OK) {
		*why = AGG_WHY_WINDOW;
		return RM_EPROTO;
	}
	return RM_OK;
}

/* Counts one answered message. Caller does not hold pmu. */
static void agg_count(struct agg_server *s, Rametr__Ack__Status st, int decoded, int batch,
		      enum agg_why why)
{
	pthread_mutex_lock(&s->pmu);
	switch (st) {
	case RAMETR__ACK__STATUS__ACK_OK:
		if (batch)
			s->st.batches++;
		else
			s->st.hellos++;
		break;
	case RAMETR__ACK__STATUS__ACK_DUPLICATE:
		s->st.duplicates++;
		break;
	case RAMETR__ACK__STATUS__ACK_RETRY:
		s->st.retries++;
		break;
	default:
		if (why == AGG_WHY_IDENTITY)
			s->st.refused_identity++;
		else if (why == AGG_WHY_CONFLICT)
			s->st.refused_conflict++;
		else if (why == AGG_WHY_WINDOW)
			s->st.refused_window++;
		else if (!decoded || st == RAMETR__ACK__STATUS__ACK_MALFORMED)
			s->st.refused_malformed++;
		else
			s->st.refused_handler++;
		break;
	}
	pthread_mutex_unlock(&s->pmu);
}

void agg_server_stats(struct agg_server *s, struct agg_server_stats *out)
{
	if (!s || !out)
		return;
	pthread_mutex_lock(&s->pmu);
	*out = s->st;
	out->conns = s->nconns - s->nclosing;
	out->conns_closing = s->nclosing;
	pthread_mutex_unlock(&s->pmu);
}

/* Answers one request; msg is consumed. */
static void agg_serve_one(struct agg_server *s, nng_msg *msg)
{
	Rametr__Envelope *env = NULL;
	Rametr__Ack__Status st;
	const char *node = NULL, *what = "message";
	char err[512], peer[300], desc[128];
	nng_pipe p = nng_msg_get_pipe(msg);
	enum agg_why why = AGG_WHY_NONE;
	uint8_t *buf = NULL;
	uint64_t seq = 0;
	size_t len = 0;
	int rv, hrv = RM_OK, dup = 0, batch = 0;

	err[0] = '\0';
	agg_conn_seen(s, p);
	rv = rm_wire_decode_seq(nng_msg_body(msg), nng_msg_len(msg), &env, &seq, err, sizeof(err));
	if (rv == RM_EVERSION) {
		st = RAMETR__ACK__STATUS__ACK_BAD_VERSION;
	} else if (rv != RM_OK) {
		st = RAMETR__ACK__STATUS__ACK_MALFORMED;
	} else if (env->body_case == RAMETR__ENVELOPE__BODY_HELLO) {
		what = "hello";
		node = env->hello->node;
		hrv = agg_admit_hello(s, p, env->hello, err, sizeof(err), &why);
		if (hrv == RM_OK)
			hrv = s->h.on_hello(s->h.arg, env->hello, err, sizeof(err));
		if (hrv == RM_OK)
			agg_bind(s, p, env->hello);
		st = agg_status(hrv, 0);
	} else if (env->body_case == RAMETR__ENVELOPE__BODY_BATCH) {
		const struct rm_wbatch *b = rm_wire_batch(env);

		what = "batch";
		batch = 1;
		node = b->node;
		seq = b->seq;
		hrv = agg_admit_batch(s, p, b, err, sizeof(err), &why);
		if (hrv == RM_OK)
			hrv = s->h.on_batch(s->h.arg, b, &dup, err, sizeof(err));
		st = agg_status(hrv, dup);
	} else {
		snprintf(err, sizeof(err), "unexpected ack from a collector");
		st = RAMETR__ACK__STATUS__ACK_MALFORMED;
	}
	agg_count(s, st, rv == RM_OK, batch, why);
	if (st == RAMETR__ACK__STATUS__ACK_DUPLICATE) {
		agg_peer(msg, peer, sizeof(peer));
		agg_log_refusal(s, AGG_LOG_MSG, "batch %" PRIu64 " of node '%s' from %s was already applied: "
				"nothing stored (sent again, or replayed)", seq, node, peer);
	}
	if (st != RAMETR__ACK__STATUS__ACK_OK && st != RAMETR__ACK__STATUS__ACK_DUPLICATE) {
		if (!err[0])
			snprintf(err, sizeof(err), "%s", rm_strerror(hrv ? hrv : rv));
		agg_peer(msg, peer, sizeof(peer));
		if (node && seq)
			snprintf(desc, sizeof(desc), "%s %" PRIu64 " of node '%s'", what, seq, node);
		else if (node)
			snprintf(desc, sizeof(desc), "%s of node '%s'", what, node);
		else if (seq)
			snprintf(desc, sizeof(desc), "batch %" PRIu64, seq);
		else
			snprintf(desc, sizeof(desc), "message of %zu bytes", nng_msg_len(msg));
		if (st == RAMETR__ACK__STATUS__ACK_RETRY)
			agg_log_refusal(s, AGG_LOG_MSG, "could not take %s from %s now (%s): asked to retry", desc,
					peer, err);
		else
			agg_log_refusal(s, AGG_LOG_MSG, "refused %s from %s: %s: %s", desc, peer,
					rm_wire_ack_status_name(st), err);
	} else {
		err[0] = '\0';
	}
	rv = agg_build_ack(s, st, seq, err, node, &buf, &len);
	rm_wire_free(env);
	nng_msg_clear(msg);
	if (rv != RM_OK || nng_msg_append(msg, buf, len) != 0) {
		/* no reply: the collector times out and sends again */
		rm_log_error("failed to build a reply: %s", rm_strerror(rv ? rv : RM_ENOMEM));
		nng_msg_free(msg);
		free(buf);
		return;
	}
	free(buf);
	if ((rv = agg_reply(s, msg)) != 0)
		rm_log_debug("failed to send a reply: %s", nng_strerror(rv));
}

static int agg_is_probe(nng_msg *msg)
{
	return nng_msg_len(msg) == AGG_PROBE_LEN &&
	       memcmp(nng_msg_body(msg), agg_probe_magic, sizeof(agg_probe_magic)) == 0;
}

static void agg_probe_close(struct agg_listen *L, uint64_t now)
{
	if (L->probe_open)
		nng_close(L->probe);
	L->probe_open = 0;
	L->next_ms = now + AGG_PROBE_EVERY_MS;
}

/* Listens on L->url (with the TLS configuration for tls+tcp://). Returns an nng error. */
static int agg_listen_on(struct agg_server *s, struct agg_listen *L)
{
	int rv;

	if (strncmp(L->url, "tls+tcp://", 10) != 0)
		return nng_listen(s->sock, L->url, &L->l, 0);
	if ((rv = nng_listener_create(&L->l, s->sock, L->url)) != 0)
		return rv;
	if ((rv = nng_listener_set_ptr(L->l, NNG_OPT_TLS_CONFIG, s->tls)) != 0 ||
	    (rv = nng_listener_start(L->l, 0)) != 0)
		nng_listener_close(L->l);
	return rv;
}

static void agg_relisten(struct agg_server *s, struct agg_listen *L)
{
	int rv;

	if (L->listening)
		nng_listener_close(L->l);
	L->listening = 0;
	if ((rv = agg_listen_on(s, L)) != 0) {
		rm_log_error("failed to listen on '%s': %s", L->url, nng_strerror(rv));
		return;
	}
	L->listening = 1;
	rm_log_info("listening on '%s' again", L->url);
}

/* nng's pipe callback on a probe socket: its connection is attached (arg: the listener). */
static void agg_probe_up(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct agg_listen *L = arg;

	(void)p;
	(void)ev;
	atomic_store(&L->probe_up, 1);
}

/* One step of the probe of every watched listener; idle: the last poll found nothing. */
static void agg_probe_tick(struct agg_server *s, int idle)
{
	uint8_t buf[AGG_PROBE_LEN + 4];
	uint64_t now = agg_now_ms();
	size_t i, sz;

	for (i = 0; i < s->nls; i++) {
		struct agg_listen *L = &s->ls[i];

		if (!L->watched || now < L->next_ms)
			continue;
		if (!L->listening) {
			agg_relisten(s, L);
			L->next_ms = now + AGG_PROBE_EVERY_MS;
			continue;
		}
		if (!L->probe_open) {
			if (nng_req0_open(&L->probe) != 0)
				continue;
			L->probe_open = 1;
			atomic_store(&L->probe_up, 0);
			if (nng_pipe_notify(L->probe, NNG_PIPE_EV_ADD_POST, agg_probe_up, L) != 0 ||
			    nng_socket_set_ms(L->probe, NNG_OPT_REQ_RESENDTIME,
					      NNG_DURATION_INFINITE) != 0 ||
			    nng_dial(L->probe, L->url, NULL, NNG_FLAG_NONBLOCK) != 0) {
				agg_probe_close(L, now);
				continue;
			}
			L->sent = 0;
			L->started_ms = now;
			L->idle_polls = 0;
		}
		if (!L->sent) {
			L->nonce++;
			memcpy(buf, agg_probe_magic, sizeof(agg_probe_magic));
			memcpy(buf + 8, &L->nonce, 4);
			/* fails at once until the connection is up */
			if (nng_send(L->probe, buf, AGG_PROBE_LEN, NNG_FLAG_NONBLOCK) == 0)
				L->sent = 1;
		} else {
			sz = sizeof(buf);
			if (nng_recv(L->probe, buf, &sz, NNG_FLAG_NONBLOCK) == 0 &&
			    sz == AGG_PROBE_LEN && memcmp(buf + 8, &L->nonce, 4) == 0) {
				agg_probe_close(L, now);
				continue;
			}
		}
		if (idle)
			L->idle_polls++;
		if (now - L->started_ms >= AGG_PROBE_WEDGED_MS &&
		    L->idle_polls >= AGG_PROBE_IDLE_POLLS) {
			rm_log_warn("listener on '%s' does not take connections (no answer to a "
				    "probe in %" PRIu64 " ms); listening again",
				    L->url, now - L->started_ms);
			agg_probe_close(L, now);
			agg_relisten(s, L);
		}
	}
}

/* Counts (and logs) a turn of the loop that kept requests unread too long. */
static void agg_busy_note(struct agg_server *s, uint64_t from_ms, const char *in)
{
	uint64_t busy = agg_now_ms() - from_ms, stalls;

	pthread_mutex_lock(&s->pmu);
	if (busy > s->st.max_busy_ms)
		s->st.max_busy_ms = busy;
	if (busy < AGG_SERVER_STALL_MS) {
		pthread_mutex_unlock(&s->pmu);
		return;
	}
	stalls = ++s->st.stalls;
	s->st.stall_ms += busy;
	pthread_mutex_unlock(&s->pmu);
	rm_log_warn("did not read requests for %" PRIu64 " ms (busy with %s): a collector waiting meanwhile "
		    "was not answered for as long (%" PRIu64 " such stalls so far)",
		    busy, in, stalls);
}

int agg_server_run(struct agg_server *s, volatile sig_atomic_t *stop)
{
	uint64_t next_tick, now;
	nng_msg *msg;
	int rv;

	if (!s || !stop)
		return RM_EINVAL;
	next_tick = agg_now_ms() + (uint64_t)s->tick_ms;
	while (!*stop) {
		const char *busy_in = "a tick";
		uint64_t busy_from;

		agg_aio_arm(s);
		nng_recv_aio(s->sock, s->aio);
		rv = agg_aio_wait(s, s->tick_ms < AGG_POLL_MS ? s->tick_ms : AGG_POLL_MS);
		busy_from = agg_now_ms();
		if (rv == 0) {
			msg = nng_aio_get_msg(s->aio);
			nng_aio_set_msg(s->aio, NULL);
			if (agg_is_probe(msg)) {
				/* a complete message: the probe's connection (ours, every
				 * AGG_PROBE_EVERY_MS) is not a peer that hung up silent */
				agg_conn_seen(s, nng_msg_get_pipe(msg));
				agg_reply(s, msg); /* echo: proves the listener alive */
			} else {
				agg_serve_one(s, msg);
				pthread_mutex_lock(&s->pmu);
				s->st.requests++;
				pthread_mutex_unlock(&s->pmu);
				busy_in = "a request";
			}
		} else if (rv == NNG_ECLOSED) {
			return RM_ECLOSED;
		} else if (rv != NNG_ECANCELED && rv != NNG_ETIMEDOUT) {
			rm_log_warn("failed to receive a request: %s", nng_strerror(rv));
		}
		agg_probe_tick(s, rv != 0);
		agg_sweep_idle(s);
		agg_log_flush(s);
		now = agg_now_ms();
		if (now >= next_tick) {
			if (s->h.on_tick)
				s->h.on_tick(s->h.arg);
			next_tick = now + (uint64_t)s->tick_ms;
		}
		agg_busy_note(s, busy_from, busy_in);
	}
	return RM_OK;
}

/* Whether a tcp:// URL's host is a loopback address. */
static int agg_is_loopback(const char *url)
{
	const char *h = url + 6;

	return strncmp(h, "127.", 4) == 0 || strncmp(h, "localhost:", 10) == 0 ||
	       strncmp(h, "[::1]:", 6) == 0;
}

/* Raises the open-file limit to its hard limit: every connection is a file. */
static void agg_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			rm_log_warn("failed to raise the open-file limit: %s", strerror(errno));
	}
}

/* The server's TLS configuration from cfg. Returns RM_OK or RM_EINVAL (logged). */
static int agg_tls_setup(struct agg_server *s, const struct agg_server_cfg *cfg)
{
	int rv;

	if (!cfg->tls_cert_key || !cfg->tls_ca) {
		rm_log_error("tls+tcp:// needs the aggregator's certificate and key and the cluster CA");
		return RM_EINVAL;
	}
	if ((rv = nng_tls_config_alloc(&s->tls, NNG_TLS_MODE_SERVER)) != 0) {
		rm_log_error("failed to set up TLS: %s", nng_strerror(rv));
		return RM_EINVAL;
	}
	/*
	 * OPTIONAL, and every connection without a certificate the CA verified
	 * is closed in agg_pipe_event() before any message: with REQUIRED,
	 * nng 1.5.2 ends a failed handshake without telling us, so the refusal
	 * could be neither logged nor counted.
	 */
	if ((rv = nng_tls_config_auth_mode(s->tls, NNG_TLS_AUTH_MODE_OPTIONAL)) != 0 ||
	    (rv = nng_tls_config_ca_file(s->tls, cfg->tls_ca)) != 0) {
		rm_log_error("failed to load the cluster CA '%s': %s", cfg->tls_ca, nng_strerror(rv));
		return RM_EINVAL;
	}
	if ((rv = nng_tls_config_cert_key_file(s->tls, cfg->tls_cert_key, NULL)) != 0) {
		rm_log_error("failed to load the certificate and key '%s': %s", cfg->tls_cert_key,
			     nng_strerror(rv));
		return RM_EINVAL;
	}
	return RM_OK;
}

int agg_server_open(struct agg_server **out, const char *const *urls, size_t nurls,
		    const struct agg_handler *h, int tick_ms)
{
	/* messages up to RM_WIRE_MAX_MSG, as before the bounds existed */
	struct agg_server_cfg cfg = { .tick_ms = tick_ms,
				      .max_conns = AGG_SERVER_MAX_CONNS_DEFAULT,
				      .mem_bound = (size_t)2 * AGG_SERVER_MAX_CONNS_DEFAULT * RM_WIRE_MAX_MSG };

	return agg_server_open_cfg(out, urls, nurls, h, &cfg);
}

int agg_server_open_cfg(struct agg_server **out, const char *const *urls, size_t nurls,
			const struct agg_handler *h, const struct agg_server_cfg *cfgp)
{
	static const struct agg_server_cfg none;
	const struct agg_server_cfg *cfg = cfgp ? cfgp : &none;
	struct agg_server *s;
	size_t i, max_msg;
	int rv, tls = 0;

	if (!out)
		return RM_EINVAL;
	*out = NULL;
	if (!urls || nurls == 0 || !h || !h->on_hello || !h->on_batch || cfg->tick_ms < 0 ||
	    cfg->idle_ms < 0 || cfg->window_tolerance_ns < 0 || (cfg->secret && !cfg->secret_len)) {
		rm_log_error("invalid arguments to agg_server_open");
		return RM_EINVAL;
	}
	for (i = 0; i < nurls; i++) {
		if (urls[i] && strncmp(urls[i], "tls+tcp://", 10) == 0) {
			tls = 1;
			continue;
		}
		if (!urls[i] ||
		    (strncmp(urls[i], "tcp://", 6) != 0 && strncmp(urls[i], "ipc://", 6) != 0)) {
			rm_log_error("unsupported url '%s' (use tcp://, tls+tcp:// or ipc://)",
				     urls[i] ? urls[i] : "");
			return RM_EINVAL;
		}
	}
	if (!(s = calloc(1, sizeof(*s))))
		return RM_ENOMEM;
	s->h = *h;
	s->cfg = *cfg;
	s->cfg.tls_cert_key = s->cfg.tls_ca = NULL;
	s->cfg.secret = NULL;
	if (!s->cfg.max_conns)
		s->cfg.max_conns = AGG_SERVER_MAX_CONNS_DEFAULT;
	if (!s->cfg.idle_ms)
		s->cfg.idle_ms = AGG_SERVER_IDLE_MS_DEFAULT;
	if (!s->cfg.mem_bound)
		s->cfg.mem_bound = AGG_SERVER_MEM_BOUND_DEFAULT;
	s->tick_ms = cfg->tick_ms ? cfg->tick_ms : AGG_SERVER_TICK_DEFAULT;
	pthread_mutex_init(&s->amu, NULL);
	pthread_mutex_init(&s->pmu, NULL);
	pthread_mutex_init(&s->lmu, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s->acv, &ca);
		pthread_condattr_destroy(&ca);
	}
	max_msg = s->cfg.mem_bound / 2 / s->cfg.max_conns;
	if (max_msg > RM_WIRE_MAX_MSG)
		max_msg = RM_WIRE_MAX_MSG;
	if (max_msg < AGG_SERVER_MIN_MSG) {
		rm_log_error("a memory bound of %zu bytes is too small for %u connections (each needs "
			     "twice %zu bytes)", s->cfg.mem_bound, s->cfg.max_conns, AGG_SERVER_MIN_MSG);
		agg_server_close(s);
		return RM_EINVAL;
	}
	s->max_msg = max_msg;
	s->st.max_msg = max_msg;
	s->st.max_conns = s->cfg.max_conns;
	if (!(s->conns = calloc((size_t)2 * s->cfg.max_conns, sizeof(*s->conns)))) {
		agg_server_close(s);
		return RM_ENOMEM;
	}
	if (cfg->secret) {
		if (!(s->secret = malloc(cfg->secret_len))) {
			agg_server_close(s);
			return RM_ENOMEM;
		}
		memcpy(s->secret, cfg->secret, cfg->secret_len);
		s->secret_len = cfg->secret_len;
	}
	if (tls && (rv = agg_tls_setup(s, cfg)) != RM_OK) {
		agg_server_close(s);
		return rv;
	}
	agg_raise_nofile();
	if ((rv = nng_rep0_open(&s->sock)) != 0) {
		rm_log_error("failed to open reply socket: %s", nng_strerror(rv));
		agg_server_close(s);
		return RM_EIO;
	}
	s->sock_open = 1;
	if ((rv = nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, max_msg)) != 0 ||
	    (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_PRE, agg_pipe_event, s)) != 0 ||
	    (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, agg_pipe_event, s)) != 0 ||
	    (rv = nng_aio_alloc(&s->aio, agg_aio_done, s)) != 0) {
		rm_log_error("failed to set up reply socket: %s", nng_strerror(rv));
		agg_server_close(s);
		return RM_EIO;
	}
	nng_aio_set_timeout(s->aio, NNG_DURATION_INFINITE);
	if (!(s->ls = calloc(nurls, sizeof(*s->ls)))) {
		agg_server_close(s);
		return RM_ENOMEM;
	}
	s->nls = nurls;
	for (i = 0; i < nurls; i++) {
		struct agg_listen *L = &s->ls[i];

		if (!(L->url = strdup(urls[i]))) {
			agg_server_close(s);
			return RM_ENOMEM;
		}
		if ((rv = agg_listen_on(s, L)) != 0) {
			rm_log_error("failed to listen on '%s': %s", urls[i], nng_strerror(rv));
			agg_server_close(s);
			return RM_EIO;
		}
		L->listening = 1;
		L->watched = strncmp(urls[i], "ipc://", 6) == 0;
		L->next_ms = agg_now_ms() + AGG_PROBE_EVERY_MS;
		if (strncmp(urls[i], "tcp://", 6) == 0 && !agg_is_loopback(urls[i]))
			rm_log_warn("listening on '%s' without TLS: any host that reaches it can "
				    "connect, and the traffic can be read; use tls+tcp:// between hosts",
				    urls[i]);
	}
	*out = s;
	return RM_OK;
}

void agg_server_set_decided(struct agg_server *s, Rametr__ThrottleMatch **decided, size_t n)
{
	s->h.decided = n ? decided : NULL;
	s->h.ndecided = n;
}

/* Stops the listeners: no connection is taken while the socket closes. */
static void agg_close_listeners(struct agg_server *s)
{
	size_t i;

	for (i = 0; i < s->nls; i++)
		if (s->ls[i].listening) {
			nng_listener_close(s->ls[i].l);
			s->ls[i].listening = 0;
		}
}

struct agg_closer {
	nng_socket sock;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
};

static void *agg_closer_run(void *arg)
{
	struct agg_closer *c = arg;

	nng_close(c->sock);
	pthread_mutex_lock(&c->mu);
	c->done = 1;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/*
 * nng_close(sock) on a thread of its own, waited for at most ms. Returns 1
 * if it returned; 0 if not (the thread and the closer are left to the
 * process's exit).
 */
static int agg_close_sock(nng_socket sock, int ms)
{
	struct agg_closer *c = calloc(1, sizeof(*c));
	struct timespec ts;
	pthread_condattr_t ca;
	pthread_t t;
	int done;

	if (!c) {
		nng_close(sock);
		return 1;
	}
	c->sock = sock;
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&t, NULL, agg_closer_run, c) != 0) {
		nng_close(sock);
		done = 1;
	} else {
		rm_clock_mono_deadline(&ts, ms);
		pthread_mutex_lock(&c->mu);
		while (!c->done && pthread_cond_timedwait(&c->cv, &c->mu, &ts) != ETIMEDOUT)
			;
		done = c->done;
		pthread_mutex_unlock(&c->mu);
		if (!done) {
			pthread_detach(t);
			return 0;
		}
		pthread_join(t, NULL);
	}
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
	return done;
}

void agg_server_close(struct agg_server *s)
{
	size_t i;

	if (!s)
		return;
	/* a probe is closed during a run after its answer, attached; at a stop it may be negotiating */
	for (i = 0; i < s->nls; i++)
		if (s->ls[i].probe_open)
			rm_nng_close_dialer(s->ls[i].probe, &s->ls[i].probe_up, RM_NNG_SETTLE_MS);
	if (s->sock_open) {
		agg_close_listeners(s);
		if (!agg_close_sock(s->sock, AGG_CLOSE_SOCK_MS)) {
			/* nng's threads may still call agg_pipe_event with s: it stays */
			rm_log_warn("the transport did not close within %d ms; stopping without waiting for it",
				    AGG_CLOSE_SOCK_MS);
			return;
		}
	}
	if (s->aio)
		nng_aio_free(s->aio);
	for (i = 0; i < s->nls; i++)
		free(s->ls[i].url);
	free(s->ls);
	if (s->tls)
		nng_tls_config_free(s->tls);
	free(s->conns);
	free(s->secret);
	pthread_cond_destroy(&s->acv);
	pthread_mutex_destroy(&s->amu);
	pthread_mutex_destroy(&s->pmu);
	pthread_mutex_destroy(&s->lmu);
	free(s);
}
