/*
 * tb_mux.h - one persistent back-end connection of tb-front that carries
 * every client's requests, several in flight at once: the shape of a gRPC
 * client channel, an HTTP/2 connection or a pipelining connection pooler.
 *
 * A caller (a front-end connection thread) writes its FETCH or STORE line on
 * the shared connection, in turn with the others (a mutex keeps each line
 * whole and the order of lines the order of the waiting list), then sleeps
 * until its reply is in. One reader thread reads the connection in large
 * reads, so one read brings back the replies of several clients; it cuts
 * them in order (the back end answers a connection's requests in order),
 * hands each to its caller (a condition variable) and admits the next
 * caller when fewer than max_inflight requests are out.
 *
 * Ground truth (tb_truth.h): the reader's CPU for a reply is added to the
 * CE of its request (requests 0): from right before the read that brought
 * its first byte (or, for a reply already in the buffer, from the end of the
 * previous reply's hand-off) to the end of its hand-off; the reader's way
 * back to its next read is the last reply's, as a connection thread's tail
 * (tb_lsrv.h). The callers' own CPU is theirs to count.
 *
 * Owns the connection, the reader thread and the waiting list.
 */
#ifndef TB_MUX_H
#define TB_MUX_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "tb_tier.h"
#include "tb_truth.h"

#define TB_MUX_INFLIGHT_MAX 1024

struct tb_mux;

/*
 * Starts the reader for back end addr with at most max_inflight (1..
 * TB_MUX_INFLIGHT_MAX) requests out at once, adding the reader's CPU to
 * truth (which must outlive *out). Connects on first use and again after a
 * failure. Returns RM_OK, RM_EINVAL or RM_ENOMEM (logged).
 */
int tb_mux_open(struct tb_mux **out, const struct sockaddr_in *addr, size_t max_inflight, struct tb_truth *truth);

/*
 * Sends req (TB_CMD_FETCH or TB_CMD_STORE) on the shared connection and
 * waits for its reply, copied into buf (cap >= tb_tier_reply_bytes(
 * req->size_kb)); *len gets its length. Returns RM_OK, RM_ENOENT (the back
 * end said ERR), RM_ECLOSED (no connection, or it failed or stopped before
 * the reply), RM_EPROTO (a malformed reply: the connection is dropped) or
 * RM_EINVAL. Thread-safe; blocks while max_inflight requests are out.
 */
int tb_mux_fetch(struct tb_mux *m, const struct tb_tier_req *req, char *buf, size_t cap, size_t *len);

/* Stops the reader, fails the callers still waiting, closes the connection and frees m. NULL-tolerant. */
void tb_mux_close(struct tb_mux *m);

#endif
