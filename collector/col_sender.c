/*
 * col_sender.c - the sender's queue and API: builds Batches from backend
 * output, keeps the unacknowledged encoded batches (in flight + spool +
 * memory, oldest first; col_spool.c owns the file), spills the oldest to the
 * spool past mem_limit, and keeps everything unacked at close. The thread
 * that delivers them is col_link.c; see col_sender.h for the protocol.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "col_enc.h"
#include "col_sender_int.h"
#include "rm_clock.h"
#include "banned.h"

/*
 * Appends one batch to the spool and counts it. Caller holds mu (or is the
 * only thread). Returns as col_spool_put().
 */
static int col_sender_spool_put(struct col_sender *s, const uint8_t *buf, size_t len)
{
	int rv;

	if ((rv = col_spool_put(&s->spool, buf, len)) != RM_OK)
		return rv;
	s->st.spooled++;
	s->st.spool_bytes = col_spool_bytes(&s->spool);
	return RM_OK;
}

/*
 * Moves the batch in flight to the spool if only memory holds it, so that
 * what is appended next stays behind it. Caller holds mu.
 */
static int col_spool_cur(struct col_sender *s)
{
	uint64_t off = s->spool.end;
	int rv;

	if (!s->cur_valid || s->cur_loc != COL_CUR_MEM)
		return RM_OK;
	/* a batch taken from memory implies the spool was empty then and since */
	if (s->spool.count != 0 || s->spool.rd != s->spool.end)
		abort();
	if ((rv = col_sender_spool_put(s, s->cur_buf, s->cur_len)) != 0)
		return rv;
	s->cur_loc = COL_CUR_SPOOL;
	s->cur_off = off;
	s->cur_next = s->spool.end;
	return RM_OK;
}

/* Moves the oldest batch in memory to the spool. Caller holds mu. */
static int col_spill_oldest(struct col_sender *s)
{
	struct col_item *it = s->head;
	int rv;

	if (!it)
		return RM_OK;
	if ((rv = col_spool_cur(s)) != 0)
		return rv;
	if ((rv = col_sender_spool_put(s, it->buf, it->len)) != 0)
		return rv;
	s->head = it->next;
	if (!s->head)
		s->tail = NULL;
	s->mem_bytes -= it->len;
	s->mem_count--;
	free(it->buf);
	free(it);
	return RM_OK;
}

size_t col_queued(const struct col_sender *s)
{
	return s->spool.count + s->mem_count + (s->cur_valid && s->cur_loc == COL_CUR_MEM);
}

/* Drops the batch in flight (acked or dead-lettered). Caller holds mu. */
void col_drop_cur(struct col_sender *s)
{
	if (s->cur_loc == COL_CUR_SPOOL) {
		if (s->spool.rd != s->cur_off)
			abort();
		col_spool_pop(&s->spool, s->cur_next);
		s->st.spool_bytes = col_spool_bytes(&s->spool);
	}
	free(s->cur_buf);
	s->cur_buf = NULL;
	s->cur_valid = 0;
	pthread_cond_broadcast(&s->done);
}

int col_pending_add(struct col_sender *s, const uint64_t *ids, size_t n)
{
	uint64_t *p;
	size_t cap;

	if (s->npending + n > s->cappending) {
		cap = s->cappending ? s->cappending * 2 : 16;
		while (cap < s->npending + n)
			cap *= 2;
		if (!(p = realloc(s->pending, cap * sizeof(*p))))
			return RM_ENOMEM;
		s->pending = p;
		s->cappending = cap;
	}
	memcpy(s->pending + s->npending, ids, n * sizeof(*ids));
	s->npending += n;
	return RM_OK;
}

void col_take_cur(struct col_sender *s)
{
	struct col_item *it;
	uint8_t *buf;
	size_t len;
	uint64_t off, end, next;
	const char *why;
	int rv;

	if (s->spool.count > 0) {
		off = s->spool.rd;
		end = s->spool.end;
		pthread_mutex_unlock(&s->mu);
		rv = col_spool_read(&s->spool, off, end, &buf, &len, &next, &why);
		if (rv != 0) {
			pthread_mutex_lock(&s->mu);
			/* nothing after an unreadable record can be framed: give up the spool */
			rm_log_error("spool '%s': %s at offset %" PRIu64 "; dropping its %zu unsent "
				     "batches",
				     s->spool_path, why, off, s->spool.count);
			s->st.lost_batches += s->spool.count;
			col_spool_pop(&s->spool, s->spool.end); /* pops all, file emptied */
			s->st.spool_bytes = col_spool_bytes(&s->spool);
			pthread_cond_broadcast(&s->done);
			return;
		}
		pthread_mutex_lock(&s->mu);
		s->cur_loc = COL_CUR_SPOOL;
		s->cur_off = off;
		s->cur_next = next;
	} else {
		it = s->head;
		s->head = it->next;
		if (!s->head)
			s->tail = NULL;
		s->mem_bytes -= it->len;
		s->mem_count--;
		buf = it->buf;
		len = it->len;
		free(it);
		s->cur_loc = COL_CUR_MEM;
	}
	s->cur_buf = buf;
	s->cur_len = len;
	s->cur_valid = 1;
	s->cur_attempts = 0;
	if (rm_wire_peek_seq(buf, len, &s->cur_seq) != RM_OK)
		s->cur_seq = 0; /* not a batch: refused below, without sending */
}

/* ---- conversion ---- */

/*
 * Builds and encodes the batch (col_enc.h: the bytes protobuf-c would make,
 * without its structures). Called under submit_mu, which guards s->enc.
 * Returns RM_OK, RM_EINVAL (logged) or RM_ENOMEM.
 */
static int col_encode_batch(struct col_sender *s, uint64_t seq, const uint64_t *acks, size_t nacks,
			    const struct rm_part *parts, size_t nparts,
			    const struct col_enc_parts *ps, const struct rm_totals *wins,
			    size_t nwins, uint8_t **buf, size_t *len)
{
	struct col_enc_hdr h = {
		.node = s->node,
		.backend = s->backend,
		.instance = s->instance,
		.seq = seq,
		.window_ns = s->window_ns,
		.clock_offset_ns = s->clock_offset_ns,
	};
	char err[256];
	int rv;

	if (ps)
		rv = col_enc_batch_parts(&h, ps, wins, nwins, acks, nacks, buf, len, err, sizeof(err));
	else
		rv = col_enc_batch(&s->enc, &h, parts, nparts, wins, nwins, acks, nacks, buf, len, err,
				   sizeof(err));
	if (rv == RM_EINVAL)
		rm_log_error("refusing batch of %zu parts and %zu windows from backend '%s': %s",
			     ps ? ps->n : nparts, nwins, s->backend, err);
	return rv;
}

/* col_sender_submit() of parts[0..nparts), or of the parts encoded in ps if not NULL. */
static int col_submit(struct col_sender *s, const struct rm_part *parts, size_t nparts,
		      const struct col_enc_parts *ps, const struct rm_totals *wins, size_t nwins)
{
	struct col_item *it = NULL;
	uint64_t *acks = NULL, seq;
	size_t nacks = 0, len = 0;
	uint8_t *buf = NULL;
	int rv = RM_OK;

	if (!s || (nparts && !parts) || (nwins && !wins))
		return RM_EINVAL;
	pthread_mutex_lock(&s->submit_mu);
	pthread_mutex_lock(&s->mu);
	if (s->stop) {
		pthread_mutex_unlock(&s->mu);
		pthread_mutex_unlock(&s->submit_mu);
		return RM_ESTATE;
	}
	seq = s->next_seq;
	acks = s->pending;
	nacks = s->npending;
	s->pending = NULL;
	s->npending = s->cappending = 0;
	pthread_mutex_unlock(&s->mu);

	rv = col_encode_batch(s, seq, acks, nacks, parts, nparts, ps, wins, nwins, &buf, &len);
	if (ps)
		nparts = ps->n;
	if (rv == RM_OK && !(it = calloc(1, sizeof(*it))))
		rv = RM_ENOMEM;

	pthread_mutex_lock(&s->mu);
	if (rv == RM_OK && s->stop)
		rv = RM_ESTATE;
	if (rv == RM_OK) {
		/* make room: the oldest batches in memory go to the spool */
		while (s->mem_bytes + len > s->mem_limit && s->head && rv == RM_OK)
			rv = col_spill_oldest(s);
		if (rv == RM_OK && s->mem_bytes + len > s->mem_limit) {
			/* bigger than the memory limit by itself: straight to the spool */
			if ((rv = col_spool_cur(s)) == RM_OK && (rv = col_sender_spool_put(s, buf, len)) == RM_OK) {
				free(buf);
				free(it);
				buf = NULL;
				it = NULL;
			}
		} else if (rv == RM_OK) {
			it->buf = buf;
			it->len = len;
			if (s->tail)
				s->tail->next = it;
			else
				s->head = it;
			s->tail = it;
			s->mem_bytes += len;
			s->mem_count++;
			buf = NULL;
			it = NULL;
		}
		if (rv != RM_OK) {
			char why[4200];

			if (!s->spool_path)
				snprintf(why, sizeof(why), "no spool configured");
			else if (rv == RM_EFULL)
				snprintf(why, sizeof(why), "spool '%s' is full", s->spool_path);
			else
				snprintf(why, sizeof(why), "spool '%s' cannot be written", s->spool_path);
			s->st.lost_batches++;
			rm_log_error("dropping batch of %zu parts and %zu windows: memory limit of %zu "
				     "bytes reached and %s; %" PRIu64 " batches lost so far",
				     nparts, nwins, s->mem_limit, why, s->st.lost_batches);
			rv = RM_EFULL;
		} else {
			s->next_seq++;
			pthread_cond_signal(&s->work);
		}
	}
	if (rv != RM_OK && nacks) {
		/* not sent: acknowledge those commands with the next batch */
		if (col_pending_add(s, acks, nacks) != 0)
			rm_log_error("out of memory: %zu commands will not be acknowledged", nacks);
	}
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_unlock(&s->submit_mu);
	free(acks);
	free(buf);
	free(it);
	return rv;
}

int col_sender_submit(struct col_sender *s, const struct rm_part *parts, size_t nparts,
		      const struct rm_totals *wins, size_t nwins)
{
	return col_submit(s, parts, nparts, NULL, wins, nwins);
}

int col_sender_submit_enc(struct col_sender *s, const struct col_enc_parts *ps,
			  const struct rm_totals *wins, size_t nwins)
{
	if (!ps)
		return RM_EINVAL;
	return col_submit(s, NULL, 0, ps, wins, nwins);
}

int col_sender_flush(struct col_sender *s, int timeout_ms)
{
	struct timespec ts;
	int rv = RM_OK;

	if (!s)
		return RM_EINVAL;
	if (timeout_ms >= 0)
		rm_clock_mono_deadline(&ts, timeout_ms);
	pthread_mutex_lock(&s->mu);
	while (col_queued(s) > 0 && !s->stop) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&s->done, &s->mu);
		} else if (pthread_cond_timedwait(&s->done, &s->mu, &ts) == ETIMEDOUT) {
			rv = col_queued(s) > 0 ? RM_ETIMEDOUT : RM_OK;
			break;
		}
	}
	if (rv == RM_OK && col_queued(s) > 0)
		rv = RM_ESTATE;
	pthread_mutex_unlock(&s->mu);
	return rv;
}

void col_sender_stats(struct col_sender *s, struct col_sender_stats *out)
{
	if (!s || !out)
		return;
	pthread_mutex_lock(&s->mu);
	*out = s->st;
	out->spool_bytes = s->spool.fd >= 0 ? col_spool_bytes(&s->spool) : 0;
	out->queued = col_queued(s);
	pthread_mutex_unlock(&s->mu);
}

uint64_t col_sender_instance(const struct col_sender *s)
{
	return s ? s->instance : 0;
}

static void col_sender_free(struct col_sender *s)
{
	struct col_item *it, *next;

	for (it = s->head; it; it = next) {
		next = it->next;
		free(it->buf);
		free(it);
	}
	free(s->cur_buf);
	col_spool_close(&s->spool);
	col_link_free(s);
	pthread_cond_destroy(&s->acv);
	pthread_mutex_destroy(&s->amu);
	pthread_cond_destroy(&s->work);
	pthread_cond_destroy(&s->done);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->submit_mu);
	free(s->pending);
	col_enc_free(&s->enc);
	free(s->url);
	free(s->node);
	free(s->backend);
	free(s->hostname);
	free(s->spool_path);
	free(s->dead_path);
	free(s->tls_cert_key);
	free(s->tls_ca);
	free(s->tls_server_name);
	free(s->token);
	free(s);
}

void col_sender_close(struct col_sender *s)
{
	struct col_item *it;
	size_t lost = 0;

	if (!s)
		return;
	pthread_mutex_lock(&s->submit_mu);
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_broadcast(&s->work);
	pthread_cond_broadcast(&s->done);
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_unlock(&s->submit_mu);
	col_link_stop(s);

	/* the thread is gone: keep every unacked batch, oldest first */
	if (col_spool_cur(s) != RM_OK)
		lost++;
	while (s->head) {
		if (col_spill_oldest(s) != RM_OK) {
			it = s->head;
			s->head = it->next;
			s->mem_bytes -= it->len;
			s->mem_count--;
			free(it->buf);
			free(it);
			lost++;
		}
	}
	s->tail = NULL;
	if (lost) {
		s->st.lost_batches += lost;
		rm_log_error("%zu unacked batches lost at close: no room in spool %s%s%s", lost,
			     s->spool_path ? "'" : "", s->spool_path ? s->spool_path : "(none)",
			     s->spool_path ? "'" : "");
	}
	col_spool_close(&s->spool);
	col_sender_free(s);
}

static int col_strdup(char **dst, const char *src)
{
	*dst = NULL;
	if (!src)
		return RM_OK;
	if (!(*dst = strdup(src)))
		return RM_ENOMEM;
	return RM_OK;
}

static int col_check_cfg(const struct col_sender_cfg *cfg)
{
	char err[128];

	if (!cfg->url || (strncmp(cfg->url, "tcp://", 6) != 0 && strncmp(cfg->url, "ipc://", 6) != 0 &&
			  strncmp(cfg->url, "tls+tcp://", 10) != 0)) {
		rm_log_error("unsupported aggregator url '%s' (use tcp://, tls+tcp:// or ipc://)",
			     cfg->url ? cfg->url : "");
		return RM_EINVAL;
	}
	if (strncmp(cfg->url, "tls+tcp://", 10) == 0 && (!cfg->tls_cert_key || !cfg->tls_ca)) {
		rm_log_error("'%s' needs this node's certificate and key and the cluster CA", cfg->url);
		return RM_EINVAL;
	}
	if (rm_wire_check_node(cfg->node, err, sizeof(err)) != RM_OK) {
		rm_log_error("invalid node name '%s': %s", cfg->node ? cfg->node : "", err);
		return RM_EINVAL;
	}
	if (!cfg->backend || !cfg->backend[0] || strlen(cfg->backend) > 63) {
		rm_log_error("invalid backend name '%s'", cfg->backend ? cfg->backend : "");
		return RM_EINVAL;
	}
	if (cfg->window_ns == 0) {
		rm_log_error("invalid window of 0 ns");
		return RM_EINVAL;
	}
	if (cfg->timeout_ms < 0) {
		rm_log_error("invalid timeout of %d ms", cfg->timeout_ms);
		return RM_EINVAL;
	}
	if (cfg->spool_path && !cfg->spool_path[0]) {
		rm_log_error("empty spool path");
		return RM_EINVAL;
	}
	return RM_OK;
}

int col_sender_open(struct col_sender **out, const struct col_sender_cfg *cfg)
{
	struct col_sender *s;
	char host[256], dead[4096];
	int rv;

	if (!out)
		return RM_EINVAL;
	*out = NULL;
	if (!cfg)
		return RM_EINVAL;
	if ((rv = col_check_cfg(cfg)) != 0)
		return rv;
	if (!(s = calloc(1, sizeof(*s))))
		return RM_ENOMEM;
	col_spool_init(&s->spool);
	pthread_mutex_init(&s->submit_mu, NULL);
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->amu, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s->work, &ca);
		pthread_cond_init(&s->done, &ca);
		pthread_cond_init(&s->acv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (!cfg->hostname) {
		if (gethostname(host, sizeof(host)) != 0)
			host[0] = '\0';
		host[sizeof(host) - 1] = '\0';
	}
	if ((rv = col_strdup(&s->url, cfg->url)) != 0 || (rv = col_strdup(&s->node, cfg->node)) != 0 ||
	    (rv = col_strdup(&s->backend, cfg->backend)) != 0 ||
	    (rv = col_strdup(&s->hostname, cfg->hostname ? cfg->hostname : host)) != 0 ||
	    (rv = col_strdup(&s->spool_path, cfg->spool_path)) != 0 ||
	    (rv = col_strdup(&s->tls_cert_key, cfg->tls_cert_key)) != 0 ||
	    (rv = col_strdup(&s->tls_ca, cfg->tls_ca)) != 0 ||
	    (rv = col_strdup(&s->tls_server_name, cfg->tls_server_name)) != 0 ||
	    (rv = col_strdup(&s->token, cfg->token)) != 0)
		goto fail;
	if (s->spool_path) {
		snprintf(dead, sizeof(dead), "%s.rejected", s->spool_path);
		if ((rv = col_strdup(&s->dead_path, dead)) != 0)
			goto fail;
	}
	s->window_ns = cfg->window_ns;
	s->clock_offset_ns = cfg->clock_offset_ns;
	s->ncpu = cfg->ncpu;
	s->mem_limit = cfg->mem_limit ? cfg->mem_limit : COL_SENDER_MEM_LIMIT_DEFAULT;
	s->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : COL_SENDER_TIMEOUT_DEFAULT;
	s->on_command = cfg->on_command;
	s->on_decided = cfg->on_decided;
	s->decided_arg = cfg->decided_arg;
	s->cmd_arg = cfg->cmd_arg;
	s->next_seq = 1;
	atomic_store(&s->need_hello, 1);
	while (s->instance == 0) {
		if (getrandom(&s->instance, sizeof(s->instance), 0) != (ssize_t)sizeof(s->instance)) {
			rm_log_error("failed to draw an instance id: %s", strerror(errno));
			rv = RM_EIO;
			goto fail;
		}
	}
	{
		/* what the aggregator will check, checked now */
		Rametr__Envelope env;
		Rametr__Hello h;
		char err[256];

		col_hello(s, &env, &h);
		if (rm_wire_check(&env, err, sizeof(err)) != RM_OK) {
			rm_log_error("invalid collector configuration: %s", err);
			rv = RM_EINVAL;
			goto fail;
		}
	}
	if (s->spool_path && (rv = col_spool_open(&s->spool, s->spool_path, cfg->spool_limit)) != 0)
		goto fail;
	s->st.spool_bytes = col_spool_bytes(&s->spool);

	if ((rv = col_link_start(s)) != 0)
		goto fail;
	*out = s;
	return RM_OK;
fail:
	col_link_stop(s);
	col_sender_free(s);
	return rv;
}
