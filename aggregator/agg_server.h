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
 * count of the suppressed ones, logged when the 10 s are over; refused
 * connections, closed connections and refused messages have a limit each,
 * so that a flood of one does not hide the others). Messages larger than RM_WIRE_MAX_MSG are
 * refused by nng itself (NNG_OPT_RECVMAXSZ): the peer's connection is closed.
 *
 * ipc:// listeners are watched: nng 1.5.2 can leave one deaf after a peer
 * connects and hangs up at once. agg_server_run() sends itself a small probe
 * request over a fresh connection every 2 s (answered by the server, never
 * passed to the handler) and listens again if it goes unanswered while idle
 * (logged as "listener on '<url>' does not take connections ...").
 *
 * Security and bounds (struct agg_server_cfg; agg_server_open() takes the
 * defaults, with no TLS, no tokens and no binding):
 *   tls+tcp:// listeners use nng's TLS (mbedTLS here) with mutual
 *   authentication: a peer must present a certificate signed by the cluster
 *   CA, or its connection is closed as it arrives, before any message is
 *   read (logged, counted: nng's REQUIRED mode would close it in the
 *   handshake without a word, so the server asks for the certificate and
 *   checks NNG_OPT_TLS_VERIFIED itself). A tcp:// listener on an address that is not loopback is
 *   warned about at open.
 *   With a cluster secret, a Hello must carry the node's enrolment token
 *   (agg_admit.h), or it is refused (ACK_REJECTED).
 *   With bind_nodes, a connection belongs to the node and instance of its
 *   first accepted Hello: a batch of another node on it is refused
 *   (ACK_REJECTED; another instance is fine: a collector sends the spool of
 *   the run before it unchanged), a batch before any Hello is asked to retry (the
 *   collector says Hello on every new connection), and a Hello for a node
 *   that another connection holds with another instance is refused (a
 *   second collector under one name); the same instance on a new connection
 *   (a reconnect) closes the old one.
 *   With window_tolerance_ns, a batch with a window outside that distance of
 *   the aggregator's clock is refused (ACK_REJECTED, agg_admit.h).
 *   A batch already applied (handler's *duplicate: sent again after a lost
 *   reply, or replayed) is answered ACK_DUPLICATE, stores nothing, and is
 *   logged and counted.
 *   At most max_conns connections: one more is closed as it arrives. A
 *   connection that completes no message in idle_ms is closed (a peer that
 *   holds a partial frame or nothing). A connection the server closed gives
 *   its admission slot back at once, though nng may hold it (and its partial
 *   frame) for seconds more; at most max_conns such are held, beyond which
 *   new connections are refused too. The largest message is
 *   mem_bound / (2 * max_conns) (at most RM_WIRE_MAX_MSG; at least
 *   AGG_SERVER_MIN_MSG, or open fails), so partial and queued frames of the
 *   open and the closing connections together stay within mem_bound; a larger frame
 *   closes its connection as soon as its length is read. The open-file
 *   limit is raised to its hard limit at open.
 * Every refusal is logged through the rate limiter above and counted in
 * struct agg_server_stats.
 *
 * Threading: requests are served one at a time on the thread that calls
 * agg_server_run(); all handler functions are called on that thread only.
 * agg_server_stats() may be called from any thread.
 */
#ifndef AGG_SERVER_H
#define AGG_SERVER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "rm_wire.h"

#define AGG_SERVER_TICK_DEFAULT 1000
#define AGG_SERVER_MAX_CONNS_DEFAULT 64
#define AGG_SERVER_IDLE_MS_DEFAULT 60000
#define AGG_SERVER_MEM_BOUND_DEFAULT ((size_t)256 << 20)
#define AGG_SERVER_MIN_MSG ((size_t)2 << 20) /* > the collector's largest batch */

/* A turn of the loop this long keeps collectors unanswered: half the
   collectors' default reply timeout (col_sender.h). */
#define AGG_SERVER_STALL_MS 1000

struct agg_server;

struct agg_handler {
	void *arg;
	/* A Hello from a collector (checked by rm_wire_decode). Returns RM_OK or
	   an rm_err (see the status mapping above) with a reason in err. */
	int (*on_hello)(void *arg, const Rametr__Hello *h, char *err, size_t errlen);
	/* A Batch (checked by rm_wire_decode). Sets *duplicate (initially 0) if
	   (node, instance, seq) was already applied. Returns as on_hello. */
	int (*on_batch)(void *arg, const struct rm_wbatch *b, int *duplicate, char *err,
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

struct agg_server_cfg {
	int tick_ms;                 /* 0: AGG_SERVER_TICK_DEFAULT */
	const char *tls_cert_key;    /* PEM: this aggregator's certificate and key (tls+tcp://) */
	const char *tls_ca;          /* PEM: the cluster CA that signs every collector's */
	const uint8_t *secret;       /* cluster secret for enrolment tokens; NULL: none asked */
	size_t secret_len;
	int bind_nodes;              /* a connection belongs to the node of its Hello */
	int64_t window_tolerance_ns; /* 0: windows are not checked against the clock */
	unsigned max_conns;          /* 0: AGG_SERVER_MAX_CONNS_DEFAULT */
	int idle_ms;                 /* 0: AGG_SERVER_IDLE_MS_DEFAULT */
	size_t mem_bound;            /* 0: AGG_SERVER_MEM_BOUND_DEFAULT */
};

/*
 * Counters since open; every refusal is in exactly one of the refused_*
 * ones. The last four are the server's own health, for its operator and its
 * metrics: a collector that is not answered shows here, not only in its own
 * log. A turn of the loop is one request (or a probe) plus the tick when
 * due, measured from the moment a request was read to the next read.
 */
struct agg_server_stats {
	uint64_t conns;              /* connections open now */
	uint64_t conns_closing;      /* closed by the server, not yet released by nng (each holds
	                                its partial frame, none an admission slot) */
	uint64_t conns_accepted;
	uint64_t conns_refused;      /* closed on arrival: max_conns reached */
	uint64_t conns_unverified;   /* closed on arrival: TLS without a certificate the
	                                cluster CA signed */
	uint64_t conns_idle_closed;  /* closed: no complete message in idle_ms */
	uint64_t conns_silent;       /* ended before any complete message (hung up, frame
	                                larger than max_msg, idle) */
	uint64_t refused_malformed;  /* ACK_MALFORMED or ACK_BAD_VERSION */
	uint64_t refused_identity;   /* no or wrong token; batch of another node than its
	                                connection's */
	uint64_t refused_conflict;   /* Hello for a node another collector holds */
	uint64_t refused_window;     /* window outside the tolerance */
	uint64_t refused_handler;    /* the handler's ACK_REJECTED / ACK_BAD_VERSION */
	uint64_t duplicates;         /* batches already applied: nothing stored */
	uint64_t retries;            /* answered ACK_RETRY */
	uint64_t hellos, batches;    /* accepted (ACK_OK) */
	size_t max_msg;              /* the largest message taken, bytes */
	unsigned max_conns;
	uint64_t requests;           /* requests answered (probes not counted) */
	uint64_t stalls;             /* turns of AGG_SERVER_STALL_MS or more: requests waited
	                                unread (each logged) */
	uint64_t stall_ms;           /* the time spent in those turns */
	uint64_t max_busy_ms;        /* the longest turn */
};

/*
 * Opens a rep0 socket listening on urls[0..nurls) (tcp://host:port,
 * tls+tcp://host:port or ipc:///path) with the settings in cfg (NULL: all
 * defaults). h is copied; on_hello and on_batch are required. cfg's strings
 * and secret are read during the call only. Returns RM_OK and *out; RM_EINVAL for bad
 * arguments or another URL scheme (logged); RM_EIO if a listen fails, logged
 * as "failed to listen on '<url>': <reason>"; RM_ENOMEM. On error *out is NULL.
 */
int agg_server_open_cfg(struct agg_server **out, const char *const *urls, size_t nurls,
			const struct agg_handler *h, const struct agg_server_cfg *cfg);

/* agg_server_open_cfg() with the defaults but tick_ms and messages up to
   RM_WIRE_MAX_MSG (tcp:// and ipc:// only; for tests and benchmarks). */
int agg_server_open(struct agg_server **out, const char *const *urls, size_t nurls,
		    const struct agg_handler *h, int tick_ms);

/* Copies the counters into *out. Thread-safe; NULL-tolerant. */
void agg_server_stats(struct agg_server *s, struct agg_server_stats *out);

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
/* Closes the socket (collectors see the aggregator as down) and frees s:
   the listeners first, then the socket, waited for at most 2 s: if nng
   does not return by then, a warning is logged and s is left allocated for
   nng's threads (the caller is stopping). Not while agg_server_run() runs on another thread.
   NULL-tolerant. */
void agg_server_close(struct agg_server *s);

#endif
