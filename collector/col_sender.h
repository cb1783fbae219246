/*
 * col_sender.h - the collector's side of the transport: turns segment parts
 * and window totals into Batches and delivers each exactly once (in seq
 * order) to the aggregator, across aggregator outages and collector
 * restarts.
 *
 * Delivery: one nng req0 socket, one request in flight (stop-and-wait). A
 * thread sends a Hello (again after every new connection), then the oldest
 * unacknowledged batch, and waits for an Ack carrying the same seq:
 *   ACK_OK, ACK_DUPLICATE           the batch is done and dropped;
 *   ACK_RETRY, timeout, no peer,
 *   an undecodable or mismatched reply
 *                                   sent again after a backoff of 100 ms,
 *                                   doubling up to 2 s (the same batch: order
 *                                   is kept);
 *   ACK_BAD_VERSION, ACK_MALFORMED,
 *   ACK_REJECTED                    the aggregator's error is logged and the
 *                                   batch is moved to the dead-letter file
 *                                   <spool_path>.rejected; the next one goes.
 * While the aggregator does not answer, that is logged at once and again
 * every 30 s with the number of batches waiting.
 * A Hello refused by the aggregator is logged and retried every 2 s;
 * batches wait behind it. nng's own REQ resend is disabled; the aggregator
 * deduplicates by (node, instance, seq), so a batch sent again after a lost
 * reply is answered ACK_DUPLICATE.
 *
 * Queue: batches not yet acknowledged live, oldest first, in
 *   [the batch in flight] + spool file + memory,
 * so every batch in the spool is older than every batch in memory. When the
 * encoded batches in memory would exceed mem_limit, the oldest ones (and the
 * batch in flight, if only held in memory) are appended to the spool; the
 * spool is sent first. col_sender_close() appends what is still in memory
 * to the spool, so nothing unacknowledged is lost by a restart or an
 * aggregator outage; the next col_sender_open() on the same spool sends
 * those batches first, unchanged (their own node, instance and seq). Only a
 * crash of the collector process (SIGKILL) loses the batches then in memory.
 *
 * Spool file (col_spool.h, also the format of the dead-letter file
 * <spool_path>.rejected, whose read offset stays 16): records are only
 * appended and read back oldest first; a torn tail is cut off at open; the
 * spool is locked while a sender has it open.
 *
 * Files: col_sender.c (queue and API), col_link.c (the thread and socket),
 * col_spool.c (the file), col_crc.c (its checksum); col_batcher.h is the
 * collector's batching sink in front of col_sender_submit_enc().
 *
 * Conversion (col_sender_submit): rm_part -> SegmentPart field by field;
 * comm from the bytes of rm_part.comm up to the first NUL (at most 15 bytes,
 * bytes outside printable ASCII replaced by '?'); tuples: family, cookie and
 * ports, laddr/raddr as 4 (AF_INET) or 16 (AF_INET6) network-order bytes,
 * none for AF_UNIX; a tuple of another family is sent as family 0 (cookie
 * and ports kept); an all-zero tuple is left out (SegmentPart.in/out absent).
 * col_window -> WindowTotals: every field of t, capacity_ns, idle_ns.
 * The bytes are written by col_enc.h (what protobuf-c would pack).
 */
#ifndef COL_SENDER_H
#define COL_SENDER_H

#include <stddef.h>
#include <stdint.h>

#include "col_backend.h"
#include "col_enc.h"
#include "rm_wire.h"

#define COL_SENDER_MEM_LIMIT_DEFAULT (8u << 20)
#define COL_SENDER_TIMEOUT_DEFAULT 2000

struct col_sender;

struct col_sender_cfg {
	const char *url;          /* tcp://host:port, tls+tcp://host:port or ipc:///path */
	/* tls+tcp:// only (required there): this node's certificate and key (one
	   PEM file), the cluster CA that must have signed the aggregator's, and
	   the name the aggregator's certificate must carry (NULL: the URL's host) */
	const char *tls_cert_key;
	const char *tls_ca;
	const char *tls_server_name;
	const char *token;        /* enrolment token sent in the Hello; NULL: none */
	const char *node;         /* node id: rm_wire_check_node() rules */
	const char *backend;      /* "ebpf", "replay", "xen" */
	const char *hostname;     /* NULL: gethostname() */
	uint64_t window_ns;       /* > 0 */
	int64_t clock_offset_ns;  /* CLOCK_REALTIME - CLOCK_MONOTONIC */
	uint32_t ncpu;
	const char *spool_path;   /* file for batches that do not fit in memory or are
	                             unacked at close; NULL: none (then such batches are
	                             lost, loudly) */
	size_t mem_limit;         /* bytes of encoded batches kept in memory
	                             (COL_SENDER_MEM_LIMIT_DEFAULT if 0) */
	uint64_t spool_limit;     /* max bytes of the spool file, 0 = limited by the disk */
	int timeout_ms;           /* per request (COL_SENDER_TIMEOUT_DEFAULT if 0) */
	/* Called on the sender's thread for each new command found in an Ack
	   (a command id seen before is acknowledged again but not passed twice).
	   Returns 0 if the command was applied: its id is acknowledged in the
	   next batch; non-zero if it was refused (the callback logs why): it is
	   never acknowledged, so the aggregator does not count it applied.
	   cmd is valid during the call only. May call col_sender_submit(), never
	   col_sender_close() or col_sender_flush(). May be NULL. */
	int (*on_command)(void *arg, const Rametr__ThrottleCommand *cmd);
	void *cmd_arg;
	/* Called on the sender's thread with Ack.decided (checked by rm_wire:
	   at most RM_WIRE_MAX_DECIDED, n may be 0) of every ACK_OK or
	   ACK_DUPLICATE, the Hello's included; m is valid during the call only.
	   Must not block. May be NULL. */
	void (*on_decided)(void *arg, Rametr__ThrottleMatch *const *m, size_t n);
	void *decided_arg;
};

/*
 * Creates a sender: validates cfg (RM_EINVAL, with a logged reason), draws a
 * random non-zero 64-bit instance id, opens and locks the spool (RM_EIO if
 * it cannot be opened or read, RM_EEXIST if another sender holds it) and
 * loads the batches a previous run left there, opens the nng socket and dials
 * without waiting for the aggregator (RM_EIO if the URL is refused), and
 * starts the sending thread. cfg's strings are copied. Returns RM_OK and *out,
 * or an error (RM_ENOMEM too) with *out NULL.
 */
int col_sender_open(struct col_sender **out, const struct col_sender_cfg *cfg);

/*
 * Builds a Batch of parts[0..nparts) and wins[0..nwins) (either may be
 * empty) with the next seq (1, 2, 3, ...), the ids of commands received since
 * the previous batch in acked_commands, encodes and queues it; spills the
 * oldest batches to the spool if memory would exceed mem_limit.
 * Returns RM_OK; RM_EINVAL if the input breaks the wire rules (e.g. a part of
 * window 0, logged with the reason; nothing is queued and the seq is not
 * used) or the batch would encode to more than RM_WIRE_MAX_MSG (split it);
 * RM_EFULL if it fits neither in memory nor in the spool: the batch is then
 * dropped, counted in lost_batches and logged as an error (its seq is not
 * used); RM_ESTATE after close began; RM_ENOMEM. Thread-safe.
 */
int col_sender_submit(struct col_sender *s, const struct rm_part *parts, size_t nparts,
		      const struct col_window *wins, size_t nwins);

/*
 * As col_sender_submit(), with parts already checked and encoded by
 * col_enc_parts_add() (the collector encodes each part as it leaves the
 * ring). ps is only read. RM_EINVAL also if ps is NULL.
 */
int col_sender_submit_enc(struct col_sender *s, const struct col_enc_parts *ps,
			  const struct col_window *wins, size_t nwins);

/*
 * Waits until every batch queued so far (spool included) has been acked or
 * dead-lettered. Returns RM_OK, or RM_ETIMEDOUT after timeout_ms (< 0: no
 * limit). Thread-safe; not from on_command.
 */
int col_sender_flush(struct col_sender *s, int timeout_ms);

struct col_sender_stats {
	uint64_t batches_sent;   /* batch requests sent, retries included */
	uint64_t batches_acked;  /* answered ACK_OK */
	uint64_t duplicates;     /* answered ACK_DUPLICATE */
	uint64_t retries;        /* batch requests sent again (ACK_RETRY, timeout, no peer) */
	uint64_t spooled;        /* batches written to the spool, in total */
	uint64_t spool_bytes;    /* bytes of unacked records now in the spool */
	uint64_t lost_batches;   /* dropped: memory and spool full, or no spool at close */
	uint64_t rejected;       /* moved to the dead-letter file */
	size_t queued;           /* batches not yet acked (in flight, spool, memory) */
};

/* Copies the current counters into *out. Thread-safe. */
void col_sender_stats(struct col_sender *s, struct col_sender_stats *out);

/* The random instance id of this sender (never 0). */
uint64_t col_sender_instance(const struct col_sender *s);

/*
 * Stops the thread (interrupting a request in flight, which then counts as
 * unacked), appends every unacked batch to the spool in order, syncs it (or
 * removes it if empty) and frees s. Does not wait for the aggregator: call
 * col_sender_flush() first to drain. NULL-tolerant.
 */
void col_sender_close(struct col_sender *s);

#endif
