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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "agg_server.h"
#include "banned.h"

#define AGG_LOG_WINDOW_S 10  /* rate limit of the refusal log: */
#define AGG_LOG_MAX 10       /* at most this many lines per window */
#define AGG_POLL_MS 100      /* *stop is checked at least this often */
#define AGG_SEND_TIMEOUT_MS 1000
#define AGG_PROBE_EVERY_MS 2000
#define AGG_PROBE_WEDGED_MS 2000
#define AGG_PROBE_IDLE_POLLS 10 /* idle polls of AGG_POLL_MS meanwhile */
#define AGG_PROBE_LEN 12

/* A probe request: magic (a protobuf Envelope never starts with 0) + nonce. */
static const uint8_t agg_probe_magic[8] = { 0, 'R', 'M', 'P', 'R', 'O', 'B', 'E' };

struct agg_listen {
	char *url;
	nng_listener l;
	int listening;
	int watched;        /* ipc:// listeners are probed */
	nng_socket probe;   /* open during one probe */
	int probe_open;
	int sent;
	uint32_t nonce;
	uint64_t started_ms, next_ms;
	unsigned idle_polls;
};

struct agg_server {
	nng_socket sock;
	struct agg_handler h;
	int tick_ms;
	/* the one aio of the loop, and how its completion is waited for */
	nng_aio *aio;
	pthread_mutex_t amu;
	pthread_cond_t acv;
	int adone;
	int sock_open;
	struct agg_listen *ls;
	size_t nls;
	/* refusal log rate limiter */
	time_t log_window;
	unsigned log_lines;
	uint64_t log_suppressed;
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

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
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

/* Readable address of the peer that sent msg ("?" if unknown). */
static void agg_peer(nng_msg *msg, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];
	nng_sockaddr sa;
	nng_pipe p = nng_msg_get_pipe(msg);
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

static void agg_log_refusal(struct agg_server *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void agg_log_refusal(struct agg_server *s, const char *fmt, ...)
{
	time_t now = time(NULL);
	char line[1024];
	va_list ap;

	if (now - s->log_window >= AGG_LOG_WINDOW_S) {
		if (s->log_suppressed)
			rm_log_warn("%" PRIu64 " more refused messages not logged in the last %d s",
				    s->log_suppressed, AGG_LOG_WINDOW_S);
		s->log_window = now;
		s->log_lines = 0;
		s->log_suppressed = 0;
	}
	if (s->log_lines >= AGG_LOG_MAX) {
		s->log_suppressed++;
		return;
	}
	s->log_lines++;
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

/* Answers one request; msg is consumed. */
static void agg_serve_one(struct agg_server *s, nng_msg *msg)
{
	Rametr__Envelope *env = NULL;
	Rametr__Ack__Status st;
	const char *node = NULL, *what = "message";
	char err[512], peer[300], desc[128];
	uint8_t *buf = NULL;
	uint64_t seq = 0;
	size_t len = 0;
	int rv, hrv = RM_OK, dup = 0;

	err[0] = '\0';
	rv = rm_wire_decode_seq(nng_msg_body(msg), nng_msg_len(msg), &env, &seq, err, sizeof(err));
	if (rv == RM_EVERSION) {
		st = RAMETR__ACK__STATUS__ACK_BAD_VERSION;
	} else if (rv != RM_OK) {
		st = RAMETR__ACK__STATUS__ACK_MALFORMED;
	} else if (env->body_case == RAMETR__ENVELOPE__BODY_HELLO) {
		what = "hello";
		node = env->hello->node;
		hrv = s->h.on_hello(s->h.arg, env->hello, err, sizeof(err));
		st = agg_status(hrv, 0);
	} else if (env->body_case == RAMETR__ENVELOPE__BODY_BATCH) {
		what = "batch";
		node = env->batch->node;
		seq = env->batch->seq;
		hrv = s->h.on_batch(s->h.arg, env->batch, &dup, err, sizeof(err));
		st = agg_status(hrv, dup);
	} else {
		snprintf(err, sizeof(err), "unexpected ack from a collector");
		st = RAMETR__ACK__STATUS__ACK_MALFORMED;
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
			agg_log_refusal(s, "could not take %s from %s now (%s): asked to retry", desc,
					peer, err);
		else
			agg_log_refusal(s, "refused %s from %s: %s: %s", desc, peer,
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

static void agg_relisten(struct agg_server *s, struct agg_listen *L)
{
	int rv;

	if (L->listening)
		nng_listener_close(L->l);
	L->listening = 0;
	if ((rv = nng_listen(s->sock, L->url, &L->l, 0)) != 0) {
		rm_log_error("failed to listen on '%s': %s", L->url, nng_strerror(rv));
		return;
	}
	L->listening = 1;
	rm_log_info("listening on '%s' again", L->url);
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
			if (nng_socket_set_ms(L->probe, NNG_OPT_REQ_RESENDTIME,
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

int agg_server_run(struct agg_server *s, volatile sig_atomic_t *stop)
{
	uint64_t next_tick, now;
	nng_msg *msg;
	int rv;

	if (!s || !stop)
		return RM_EINVAL;
	next_tick = agg_now_ms() + (uint64_t)s->tick_ms;
	while (!*stop) {
		agg_aio_arm(s);
		nng_recv_aio(s->sock, s->aio);
		rv = agg_aio_wait(s, s->tick_ms < AGG_POLL_MS ? s->tick_ms : AGG_POLL_MS);
		if (rv == 0) {
			msg = nng_aio_get_msg(s->aio);
			nng_aio_set_msg(s->aio, NULL);
			if (agg_is_probe(msg))
				agg_reply(s, msg); /* echo: proves the listener alive */
			else
				agg_serve_one(s, msg);
		} else if (rv == NNG_ECLOSED) {
			return RM_ECLOSED;
		} else if (rv != NNG_ECANCELED && rv != NNG_ETIMEDOUT) {
			rm_log_warn("failed to receive a request: %s", nng_strerror(rv));
		}
		agg_probe_tick(s, rv != 0);
		now = agg_now_ms();
		if (now >= next_tick) {
			if (s->h.on_tick)
				s->h.on_tick(s->h.arg);
			next_tick = now + (uint64_t)s->tick_ms;
		}
	}
	return RM_OK;
}

int agg_server_open(struct agg_server **out, const char *const *urls, size_t nurls,
		    const struct agg_handler *h, int tick_ms)
{
	struct agg_server *s;
	size_t i;
	int rv;

	if (!out)
		return RM_EINVAL;
	*out = NULL;
	if (!urls || nurls == 0 || !h || !h->on_hello || !h->on_batch || tick_ms < 0) {
		rm_log_error("invalid arguments to agg_server_open");
		return RM_EINVAL;
	}
	for (i = 0; i < nurls; i++) {
		if (!urls[i] ||
		    (strncmp(urls[i], "tcp://", 6) != 0 && strncmp(urls[i], "ipc://", 6) != 0)) {
			rm_log_error("unsupported url '%s' (use tcp:// or ipc://)",
				     urls[i] ? urls[i] : "");
			return RM_EINVAL;
		}
	}
	if (!(s = calloc(1, sizeof(*s))))
		return RM_ENOMEM;
	s->h = *h;
	s->tick_ms = tick_ms ? tick_ms : AGG_SERVER_TICK_DEFAULT;
	if ((rv = nng_rep0_open(&s->sock)) != 0) {
		rm_log_error("failed to open reply socket: %s", nng_strerror(rv));
		free(s);
		return RM_EIO;
	}
	s->sock_open = 1;
	pthread_mutex_init(&s->amu, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s->acv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if ((rv = nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, RM_WIRE_MAX_MSG)) != 0 ||
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
		if ((rv = nng_listen(s->sock, urls[i], &L->l, 0)) != 0) {
			rm_log_error("failed to listen on '%s': %s", urls[i], nng_strerror(rv));
			agg_server_close(s);
			return RM_EIO;
		}
		L->listening = 1;
		L->watched = strncmp(urls[i], "ipc://", 6) == 0;
		L->next_ms = agg_now_ms() + AGG_PROBE_EVERY_MS;
	}
	*out = s;
	return RM_OK;
}

void agg_server_set_decided(struct agg_server *s, Rametr__ThrottleMatch **decided, size_t n)
{
	s->h.decided = n ? decided : NULL;
	s->h.ndecided = n;
}

void agg_server_close(struct agg_server *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->nls; i++)
		if (s->ls[i].probe_open)
			nng_close(s->ls[i].probe);
	if (s->sock_open)
		nng_close(s->sock);
	if (s->aio)
		nng_aio_free(s->aio);
	for (i = 0; i < s->nls; i++)
		free(s->ls[i].url);
	free(s->ls);
	pthread_cond_destroy(&s->acv);
	pthread_mutex_destroy(&s->amu);
	free(s);
}
