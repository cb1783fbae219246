/*
 * agg_server.h - the aggregator's side of the transport: an nng rep0 socket
 * listening on one or more URLs, answering every request of every collector
 * with exactly one Ack.
 *
 * Each request is decoded and checked with rm_wire_decode() and handed to
 * the handler; the reply's status is:
 *   ACK_MALFORMED    bytes that do not decode or break the wire rules
 *                    (rm_wire.h; error = rm_wire_decode's text), or an Ack
 *                    sent by a collector;
 *   ACK_BAD_VERSION  another protocol version (or a handler's RM_EVERSION);
 *   ACK_REJECTED     the handler returned RM_EPROTO or RM_EINVAL (error = the
 *                    handler's err, or rm_strerror() if it left it empty);
 *   ACK_RETRY        the handler returned any other error (RM_ESQL, RM_EIO,
 *                    RM_EFULL, ...): the collector sends the batch again;
 *   ACK_DUPLICATE    on_batch returned RM_OK and set *duplicate;
 *   ACK_OK           otherwise.
 * Every reply carries the request's Batch.seq (0 for a Hello, or when the
 * bytes did not decode). After ACK_OK or ACK_DUPLICATE, commands_for() is
 * asked for the commands to embed for the node. Every refused message is
 * logged once with its peer (rate-limited: at most 10 lines per 10 s, then a
 * count of the suppressed ones). Messages larger than RM_WIRE_MAX_MSG are
 * refused by nng itself (NNG_OPT_RECVMAXSZ): the peer's connection is closed.
 *
 * ipc:// listeners are watched: nng 1.5.2 can leave one deaf after a peer
 * connects and hangs up at once. agg_server_run() sends itself a small probe
 * request over a fresh connection every 2 s (answered by the server, never
 * passed to the handler) and listens again if it goes unanswered while idle
 * (logged as "listener on '<url>' does not take connections ...").
 *
 * Threading: requests are served one at a time on the thread that calls
 * agg_server_run(); all handler functions are called on that thread only.
 */
#ifndef AGG_SERVER_H
#define AGG_SERVER_H

#include <signal.h>
#include <stddef.h>

#include "rm_wire.h"

#define AGG_SERVER_TICK_DEFAULT 1000

struct agg_server;

struct agg_handler {
	void *arg;
	/* A Hello from a collector (checked by rm_wire_decode). Returns RM_OK or
	   an rm_err (see the status mapping above) with a reason in err. */
	int (*on_hello)(void *arg, const Rametr__Hello *h, char *err, size_t errlen);
	/* A Batch (checked by rm_wire_decode). Sets *duplicate (initially 0) if
	   (node, instance, seq) was already applied. Returns as on_hello. */
	int (*on_batch)(void *arg, const Rametr__Batch *b, int *duplicate, char *err,
			size_t errlen);
	/* Optional: commands to embed in the Ack to this node. The handler keeps
	   ownership; *cmds must stay valid until the next call of any handler
	   function. Commands breaking the wire rules (id 0, cap > 1000) make the
	   server send the Ack without commands (logged). A non-zero return is
	   logged and the Ack goes without commands. */
	int (*commands_for)(void *arg, const char *node, Rametr__ThrottleCommand ***cmds, size_t *n);
	/* Optional: matches sent as Ack.decided in every ACK_OK / ACK_DUPLICATE
	   (replies to a Hello included): borrowed, must outlive the server. */
	Rametr__ThrottleMatch **decided;
	size_t ndecided;
	/* Optional: called about every tick_ms, also when no request arrives. */
	void (*on_tick)(void *arg);
};

/*
 * Opens a rep0 socket listening on urls[0..nurls) (tcp://host:port or
 * ipc:///path). h is copied; on_hello and on_batch are required. tick_ms 0
 * means AGG_SERVER_TICK_DEFAULT. Returns RM_OK and *out; RM_EINVAL for bad
 * arguments or another URL scheme (logged); RM_EIO if a listen fails, logged
 * as "failed to listen on '<url>': <reason>"; RM_ENOMEM. On error *out is NULL.
 */
int agg_server_open(struct agg_server **out, const char *const *urls, size_t nurls,
		    const struct agg_handler *h, int tick_ms);

/*
 * Serves requests until *stop becomes non-zero (checked at least every
 * 100 ms; a signal handler may set it). Returns RM_OK when stopped,
 * RM_EINVAL for NULL arguments, RM_ECLOSED if the socket was closed.
 * Never returns because of what a peer sent.
 */
int agg_server_run(struct agg_server *s, volatile sig_atomic_t *stop);

/* Replaces the handler's decided matches (borrowed, as in agg_handler), for
   the replies that follow. On the thread of agg_server_run() only (a handler
   function), or while it does not run. */
void agg_server_set_decided(struct agg_server *s, Rametr__ThrottleMatch **decided, size_t n);
/* Closes the socket (collectors see the aggregator as down) and frees s.
   Not while agg_server_run() runs on another thread. NULL-tolerant. */
void agg_server_close(struct agg_server *s);

#endif
