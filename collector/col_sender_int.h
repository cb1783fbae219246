/*
 * col_sender_int.h - the sender's state, shared by its two halves and by
 * nothing else: col_sender.c (the queue of unacknowledged batches and the
 * public API) and col_link.c (the thread that talks to the aggregator).
 *
 * Locking: `mu` guards the queue, the counters, the pending command ids and
 * `stop`; `submit_mu` serialises submissions so seqs are queued in order.
 * File I/O on the spool happens under `mu`, except that the thread reads the
 * head record without it (records before spool.end are immutable and only
 * the thread advances or truncates the head).
 */
#ifndef COL_SENDER_INT_H
#define COL_SENDER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include <nng/nng.h>

#include "col_enc.h"
#include "col_sender.h"
#include "col_spool.h"

#define COL_SEEN_CMDS 64

struct col_item {
	struct col_item *next;
	uint8_t *buf;
	size_t len;
};

enum col_cur_loc { COL_CUR_MEM, COL_CUR_SPOOL };

struct col_sender {
	/* configuration, immutable after open */
	char *url, *node, *backend, *hostname, *spool_path, *dead_path;
	char *tls_cert_key, *tls_ca, *tls_server_name, *token;
	uint64_t window_ns;
	int64_t clock_offset_ns;
	uint32_t ncpu;
	size_t mem_limit;
	int timeout_ms;
	int (*on_command)(void *arg, const Rametr__ThrottleCommand *cmd);
	void (*on_decided)(void *arg, Rametr__ThrottleMatch *const *m, size_t n);
	void *decided_arg;
	void *cmd_arg;
	uint64_t instance;

	nng_socket sock;
	int sock_open;
	nng_aio *aio;              /* the thread's one socket operation */
	nng_dialer dialer;
	void *tls;                 /* nng_tls_config *, tls+tcp:// only */
	pthread_mutex_t amu;
	pthread_cond_t acv;
	int adone;                 /* aio completed (under amu) */
	atomic_int halt;           /* close: abandon the operation in flight */
	pthread_t thread;
	int thread_started;
	atomic_int need_hello;     /* set by nng on every new connection */
	atomic_int pipes;          /* connections attached now (nng's pipe callbacks) */

	pthread_mutex_t submit_mu;
	pthread_mutex_t mu;
	pthread_cond_t work;       /* queue grew, or stop */
	pthread_cond_t done;       /* a batch left the queue, or stop */
	int stop;

	/* memory part of the queue, oldest first */
	struct col_item *head, *tail;
	size_t mem_bytes, mem_count;

	/* spool part: records [spool.rd, spool.end) are unacked */
	struct col_spool spool;

	/* the batch in flight: the oldest of all; thread-owned buffer */
	int cur_valid;
	enum col_cur_loc cur_loc;  /* COL_CUR_SPOOL: it is the record at spool_rd */
	uint8_t *cur_buf;
	size_t cur_len;
	uint64_t cur_off, cur_next, cur_seq;
	int cur_attempts;

	/* commands: ids to acknowledge in the next batch; recently seen ids */
	uint64_t *pending;
	size_t npending, cappending;
	uint64_t seen[COL_SEEN_CMDS];
	unsigned char seen_refused[COL_SEEN_CMDS];
	unsigned nseen;

	struct col_enc enc;        /* encoder scratch (under submit_mu) */
	uint64_t next_seq;
	int down;                  /* the aggregator did not answer the last request */
	uint64_t down_since_ms, down_logged_ms; /* thread only */
	int hello_refused;         /* hellos refused in a row (thread only) */
	struct col_sender_stats st;
};

/* ---- the queue (col_sender.c); callers hold mu unless said otherwise ---- */

/* Batches not yet acked: in flight (if only in memory), spool, memory. */
size_t col_queued(const struct col_sender *s);
/* Makes the oldest queued batch the one in flight (drops mu while reading the spool). */
void col_take_cur(struct col_sender *s);
/* Drops the batch in flight (acked or dead-lettered); wakes col_sender_flush(). */
void col_drop_cur(struct col_sender *s);
/* Appends command ids to acknowledge in the next batch. RM_OK or RM_ENOMEM. */
int col_pending_add(struct col_sender *s, const uint64_t *ids, size_t n);

/* ---- the link (col_link.c) ---- */

/* The Hello of this sender (pointers into s). */
void col_hello(const struct col_sender *s, Rametr__Envelope *env, Rametr__Hello *h);
/*
 * Opens the req0 socket, dials s->url without waiting, starts the thread.
 * Returns RM_OK, RM_EIO (logged) or RM_ENOMEM; on error the socket may be
 * open (col_link_stop() closes it).
 */
int col_link_start(struct col_sender *s);
/* Interrupts a request in flight, joins the thread, closes the socket. Once stop is set. */
void col_link_stop(struct col_sender *s);
/* Frees what col_link_start() allocated; after col_link_stop(). */
void col_link_free(struct col_sender *s);

#endif
