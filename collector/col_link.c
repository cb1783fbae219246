/*
 * col_link.c - the sender's link to the aggregator: the one thread that
 * sends a Hello on every new connection, then the oldest unacknowledged
 * batch, stop-and-wait over an nng req0 socket, and acts on the Ack (done,
 * duplicate, retry with backoff, dead letter; throttle commands and decided
 * matches passed to the callbacks). Owns the socket and its aio.
 *
 * Socket operations are nng_aio's without nng timeouts, waited for on our own
 * condition variable and cancelled when late or when col_sender_close()
 * asks: nng 1.5.2's timer queue is not relied upon, and the socket is never
 * closed under a thread blocked in it (a known source of nng deadlocks).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>

#include "col_sender_int.h"
#include "rm_clock.h"
#include "rm_nng.h"
#include "banned.h"

#define COL_BACKOFF_MIN_MS 100
#define COL_BACKOFF_MAX_MS 2000
#define COL_DOWN_LOG_MS 30000 /* "still not answering" this often */

static uint64_t col_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Sleeps *backoff ms (unless stopped) and doubles it. Caller holds mu. */
static void col_backoff(struct col_sender *s, int *backoff)
{
	struct timespec ts;

	rm_clock_mono_deadline(&ts, *backoff);
	while (!s->stop && pthread_cond_timedwait(&s->work, &s->mu, &ts) != ETIMEDOUT)
		;
	*backoff = *backoff * 2 > COL_BACKOFF_MAX_MS ? COL_BACKOFF_MAX_MS : *backoff * 2;
}

static void col_handle_commands(struct col_sender *s, const Rametr__Ack *ack)
{
	size_t i;
	unsigned k;
	int seen, refused;

	for (i = 0; i < ack->n_commands; i++) {
		const Rametr__ThrottleCommand *c = ack->commands[i];

		seen = refused = 0;
		for (k = 0; k < COL_SEEN_CMDS && k < s->nseen; k++)
			if (s->seen[k] == c->id) {
				seen = 1;
				refused = s->seen_refused[k];
			}
		if (!seen) {
			k = s->nseen % COL_SEEN_CMDS;
			s->seen[k] = c->id;
			s->seen_refused[k] = 0;
			s->nseen++;
			if (s->on_command && s->on_command(s->cmd_arg, c) != 0)
				refused = s->seen_refused[k] = 1;
		}
		if (refused)
			continue; /* not applied: never acknowledged, it expires at the aggregator */
		pthread_mutex_lock(&s->mu);
		if (col_pending_add(s, &c->id, 1) != 0)
			rm_log_error("out of memory: command %" PRIu64 " will not be acknowledged",
				     c->id);
		pthread_mutex_unlock(&s->mu);
	}
}

enum col_outcome { COL_DONE, COL_DUPLICATE, COL_RETRY, COL_DEAD };

static void col_set_down(struct col_sender *s, const char *why)
{
	uint64_t now = col_now_ms();
	size_t queued;

	if (!s->down) {
		rm_log_warn("aggregator at '%s' is not answering (%s); retrying", s->url, why);
		s->down_since_ms = s->down_logged_ms = now;
	} else if (now - s->down_logged_ms >= COL_DOWN_LOG_MS) {
		pthread_mutex_lock(&s->mu);
		queued = col_queued(s);
		pthread_mutex_unlock(&s->mu);
		rm_log_warn("aggregator at '%s' has not acknowledged for %" PRIu64 " s (%s); %zu "
			    "batches waiting, still retrying",
			    s->url, (now - s->down_since_ms) / 1000, why, queued);
		s->down_logged_ms = now;
	}
	s->down = 1;
}

/* Readies s->aio's completion flag before an operation is started on it. */
static void col_aio_arm(struct col_sender *s)
{
	pthread_mutex_lock(&s->amu);
	s->adone = 0;
	pthread_mutex_unlock(&s->amu);
}

static void col_aio_done(void *arg)
{
	struct col_sender *s = arg;

	pthread_mutex_lock(&s->amu);
	s->adone = 1;
	pthread_cond_signal(&s->acv);
	pthread_mutex_unlock(&s->amu);
}

/*
 * Waits for the operation just started on s->aio, at most ms or until close;
 * cancels it if late. Returns its nng result (NNG_ECANCELED if late).
 */
static int col_aio_wait(struct col_sender *s, int ms)
{
	struct timespec ts;

	rm_clock_mono_deadline(&ts, ms);
	pthread_mutex_lock(&s->amu);
	while (!s->adone && !atomic_load(&s->halt) &&
	       pthread_cond_timedwait(&s->acv, &s->amu, &ts) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&s->amu);
	nng_aio_cancel(s->aio); /* no effect if it completed */
	nng_aio_wait(s->aio);   /* the callback has run */
	return nng_aio_result(s->aio);
}

/*
 * One request: sends buf, awaits an Ack for seq. Called by the thread without
 * mu. On COL_DEAD, err receives the aggregator's status and error.
 */
static enum col_outcome col_request(struct col_sender *s, const uint8_t *buf, size_t len,
				    uint64_t seq, char *err, size_t errlen)
{
	Rametr__Envelope *env = NULL;
	enum col_outcome out;
	nng_msg *msg = NULL;
	char derr[256];
	int rv;

	if (nng_msg_alloc(&msg, 0) != 0) {
		rm_log_error("out of memory for a request of %zu bytes", len);
		return COL_RETRY;
	}
	if (nng_msg_append(msg, buf, len) != 0) {
		nng_msg_free(msg);
		rm_log_error("out of memory for a request of %zu bytes", len);
		return COL_RETRY;
	}
	col_aio_arm(s);
	nng_aio_set_msg(s->aio, msg);
	nng_send_aio(s->sock, s->aio);
	if ((rv = col_aio_wait(s, s->timeout_ms)) != 0) {
		nng_msg_free(nng_aio_get_msg(s->aio)); /* not sent: still ours */
		nng_aio_set_msg(s->aio, NULL);
		if (!atomic_load(&s->halt))
			col_set_down(s, rv == NNG_ECANCELED ? "timed out" : nng_strerror(rv));
		return COL_RETRY;
	}
	nng_aio_set_msg(s->aio, NULL);
	col_aio_arm(s);
	nng_recv_aio(s->sock, s->aio);
	if ((rv = col_aio_wait(s, s->timeout_ms)) != 0) {
		if (!atomic_load(&s->halt))
			col_set_down(s, rv == NNG_ECANCELED ? "timed out" : nng_strerror(rv));
		return COL_RETRY;
	}
	msg = nng_aio_get_msg(s->aio);
	nng_aio_set_msg(s->aio, NULL);
	rv = rm_wire_decode(nng_msg_body(msg), nng_msg_len(msg), &env, derr, sizeof(derr));
	nng_msg_free(msg);
	if (rv != RM_OK || env->body_case != RAMETR__ENVELOPE__BODY_ACK) {
		rm_log_warn("undecodable reply from aggregator at '%s': %s", s->url,
			    rv ? derr : "not an ack");
		rm_wire_free(env);
		return COL_RETRY;
	}
	if (s->down)
		rm_log_info("aggregator at '%s' is answering again", s->url);
	s->down = 0;
	if (env->ack->seq != seq) {
		rm_log_warn("aggregator at '%s' acked seq %" PRIu64 " for seq %" PRIu64
			    "; sending again",
			    s->url, env->ack->seq, seq);
		rm_wire_free(env);
		return COL_RETRY;
	}
	col_handle_commands(s, env->ack);
	if (s->on_decided && (env->ack->status == RAMETR__ACK__STATUS__ACK_OK ||
			      env->ack->status == RAMETR__ACK__STATUS__ACK_DUPLICATE))
		s->on_decided(s->decided_arg, env->ack->decided, env->ack->n_decided);
	switch (env->ack->status) {
	case RAMETR__ACK__STATUS__ACK_OK:
		out = COL_DONE;
		break;
	case RAMETR__ACK__STATUS__ACK_DUPLICATE:
		out = COL_DUPLICATE;
		break;
	case RAMETR__ACK__STATUS__ACK_RETRY:
		rm_log_debug("aggregator asks to retry seq %" PRIu64 ": %s", seq, env->ack->error);
		out = COL_RETRY;
		break;
	default:
		snprintf(err, errlen, "%s: %s", rm_wire_ack_status_name(env->ack->status),
			 env->ack->error[0] ? env->ack->error : "(no reason given)");
		out = COL_DEAD;
		break;
	}
	rm_wire_free(env);
	return out;
}

void col_hello(const struct col_sender *s, Rametr__Envelope *env, Rametr__Hello *h)
{
	rametr__envelope__init(env);
	rametr__hello__init(h);
	h->node = s->node;
	h->backend = s->backend;
	h->instance = s->instance;
	h->clock_offset_ns = s->clock_offset_ns;
	h->window_ns = s->window_ns;
	h->ncpu = s->ncpu;
	h->hostname = s->hostname;
	h->token = s->token ? s->token : (char *)"";
	env->version = RM_PROTO_VERSION;
	env->body_case = RAMETR__ENVELOPE__BODY_HELLO;
	env->hello = h;
}

static int col_send_hello(struct col_sender *s)
{
	static const int log_every = 30; /* attempts, ~1 min at the 2 s backoff */
	Rametr__Envelope env;
	Rametr__Hello h;
	enum col_outcome o;
	uint8_t *buf;
	size_t len;
	char err[512];
	int rv;

	col_hello(s, &env, &h);
	if ((rv = rm_wire_encode(&env, &buf, &len)) != 0)
		return rv;
	o = col_request(s, buf, len, 0, err, sizeof(err));
	free(buf);
	if (o == COL_DEAD) {
		if (s->hello_refused++ % log_every == 0)
			rm_log_error("aggregator at '%s' refused the hello of node '%s': %s", s->url,
				     s->node, err);
		return RM_EPROTO;
	}
	if (o == COL_RETRY)
		return RM_ETIMEDOUT;
	s->hello_refused = 0;
	return RM_OK;
}

static void *col_sender_main(void *arg)
{
	struct col_sender *s = arg;
	enum col_outcome o;
	int backoff = COL_BACKOFF_MIN_MS, rv;
	char err[512];

	pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		if (atomic_exchange(&s->need_hello, 0)) {
			pthread_mutex_unlock(&s->mu);
			rv = col_send_hello(s);
			pthread_mutex_lock(&s->mu);
			if (rv != RM_OK) {
				atomic_store(&s->need_hello, 1);
				col_backoff(s, &backoff);
			} else {
				backoff = COL_BACKOFF_MIN_MS;
			}
			continue;
		}
		if (!s->cur_valid) {
			if (s->spool.count == 0 && !s->head) {
				pthread_cond_wait(&s->work, &s->mu);
				continue;
			}
			col_take_cur(s);
			if (!s->cur_valid)
				continue;
		}
		if (s->cur_seq == 0) {
			snprintf(err, sizeof(err), "queued record is not a batch");
			o = COL_DEAD;
		} else {
			s->st.batches_sent++;
			if (s->cur_attempts++ > 0)
				s->st.retries++;
			pthread_mutex_unlock(&s->mu);
			o = col_request(s, s->cur_buf, s->cur_len, s->cur_seq, err, sizeof(err));
			pthread_mutex_lock(&s->mu);
		}
		switch (o) {
		case COL_DONE:
		case COL_DUPLICATE:
			if (o == COL_DONE)
				s->st.batches_acked++;
			else
				s->st.duplicates++;
			col_drop_cur(s);
			backoff = COL_BACKOFF_MIN_MS;
			break;
		case COL_DEAD:
			pthread_mutex_unlock(&s->mu);
			rv = s->dead_path ? col_spool_dead_letter(s->dead_path, s->cur_buf, s->cur_len)
					  : RM_ENOENT;
			pthread_mutex_lock(&s->mu);
			if (rv == RM_OK) {
				rm_log_error("aggregator refused batch %" PRIu64 " (%s); moved to '%s'",
					     s->cur_seq, err, s->dead_path);
				s->st.rejected++;
			} else {
				rm_log_error("aggregator refused batch %" PRIu64 " (%s) and it could "
					     "not be kept: lost",
					     s->cur_seq, err);
				s->st.rejected++;
				s->st.lost_batches++;
			}
			col_drop_cur(s);
			break;
		case COL_RETRY:
			if (!s->stop)
				col_backoff(s, &backoff);
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static void col_pipe_event(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct col_sender *s = arg;

	(void)p;
	if (ev == NNG_PIPE_EV_ADD_POST) {
		atomic_fetch_add(&s->pipes, 1);
		atomic_store(&s->need_hello, 1);
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		atomic_fetch_sub(&s->pipes, 1);
	}
}

/* The TLS configuration of a tls+tcp:// dialer. Returns RM_OK or RM_EINVAL (logged). */
static int col_tls_setup(struct col_sender *s, nng_tls_config **out)
{
	nng_tls_config *c;
	int rv;

	if ((rv = nng_tls_config_alloc(&c, NNG_TLS_MODE_CLIENT)) != 0) {
		rm_log_error("failed to set up TLS: %s", nng_strerror(rv));
		return RM_EINVAL;
	}
	*out = c;
	if ((rv = nng_tls_config_auth_mode(c, NNG_TLS_AUTH_MODE_REQUIRED)) != 0 ||
	    (rv = nng_tls_config_ca_file(c, s->tls_ca)) != 0) {
		rm_log_error("failed to load the cluster CA '%s': %s", s->tls_ca, nng_strerror(rv));
		return RM_EINVAL;
	}
	if ((rv = nng_tls_config_cert_key_file(c, s->tls_cert_key, NULL)) != 0) {
		rm_log_error("failed to load the certificate and key '%s': %s", s->tls_cert_key,
			     nng_strerror(rv));
		return RM_EINVAL;
	}
	if (s->tls_server_name && (rv = nng_tls_config_server_name(c, s->tls_server_name)) != 0) {
		rm_log_error("failed to set the aggregator's name '%s': %s", s->tls_server_name,
			     nng_strerror(rv));
		return RM_EINVAL;
	}
	return RM_OK;
}

/* Dials s->url without waiting for the aggregator. RM_OK, RM_EINVAL or RM_EIO (logged). */
static int col_dial(struct col_sender *s)
{
	nng_tls_config *tls = NULL;
	int rv;

	if (strncmp(s->url, "tls+tcp://", 10) != 0) {
		if ((rv = nng_dial(s->sock, s->url, NULL, NNG_FLAG_NONBLOCK)) != 0) {
			rm_log_error("failed to dial '%s': %s", s->url, nng_strerror(rv));
			return RM_EIO;
		}
		return RM_OK;
	}
	rv = col_tls_setup(s, &tls);
	s->tls = tls;
	if (rv != RM_OK)
		return rv;
	if ((rv = nng_dialer_create(&s->dialer, s->sock, s->url)) != 0 ||
	    (rv = nng_dialer_set_ptr(s->dialer, NNG_OPT_TLS_CONFIG, tls)) != 0 ||
	    (rv = nng_dialer_start(s->dialer, NNG_FLAG_NONBLOCK)) != 0) {
		rm_log_error("failed to dial '%s': %s", s->url, nng_strerror(rv));
		return RM_EIO;
	}
	return RM_OK;
}

int col_link_start(struct col_sender *s)
{
	int rv;

	if ((rv = nng_req0_open(&s->sock)) != 0) {
		rm_log_error("failed to open request socket: %s", nng_strerror(rv));
		return RM_EIO;
	}
	s->sock_open = 1;
	if ((rv = nng_socket_set_ms(s->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) != 0 ||
	    (rv = nng_aio_alloc(&s->aio, col_aio_done, s)) != 0 ||
	    (rv = nng_socket_set_ms(s->sock, NNG_OPT_RECONNMINT, 50)) != 0 ||
	    (rv = nng_socket_set_ms(s->sock, NNG_OPT_RECONNMAXT, 1000)) != 0 ||
	    (rv = nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, RM_WIRE_MAX_MSG)) != 0 ||
	    (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_POST, col_pipe_event, s)) != 0 ||
	    (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, col_pipe_event, s)) != 0) {
		rm_log_error("failed to set up request socket: %s", nng_strerror(rv));
		return RM_EIO;
	}
	nng_aio_set_timeout(s->aio, NNG_DURATION_INFINITE);
	if ((rv = col_dial(s)) != 0)
		return rv;
	if ((rv = pthread_create(&s->thread, NULL, col_sender_main, s)) != 0) {
		rm_log_error("failed to start the sender thread: %s", strerror(rv));
		return RM_ENOMEM;
	}
	s->thread_started = 1;
	return RM_OK;
}

void col_link_stop(struct col_sender *s)
{
	/* abandon a request in flight (it stays unacked), then let the thread end */
	pthread_mutex_lock(&s->amu);
	atomic_store(&s->halt, 1);
	pthread_cond_broadcast(&s->acv);
	pthread_mutex_unlock(&s->amu);
	if (s->thread_started)
		pthread_join(s->thread, NULL);
	s->thread_started = 0;
	if (s->sock_open) {
		/* with no connection attached one may be negotiating (a reconnect) */
		rm_nng_close_dialer(s->sock, &s->pipes, RM_NNG_SETTLE_MS);
		s->sock_open = 0;
	}
}

void col_link_free(struct col_sender *s)
{
	if (s->aio)
		nng_aio_free(s->aio);
	s->aio = NULL;
	if (s->tls)
		nng_tls_config_free(s->tls);
	s->tls = NULL;
}
