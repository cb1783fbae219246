/*
 * tb_lsrv.h - the line server shared by tb-server, tb-back and tb-front: a
 * listening TCP socket, one thread per connection (at most max_conns at
 * once; more wait in the backlog), complete request lines handed to a
 * callback with the thread CPU time where the request's truth starts
 * (tb_lsrv_cfg.truth_head), a tick every second on the main thread, and a
 * clean stop on a signal.
 *
 * The ground truth of tb-server, tb-back and tb-front: from right before the
 * recv that reads a request (TB_TRUTH_RECV, TB_TRUTH_HEAD) on to right before
 * the thread's recv of the next one, the request's tail included (the rest
 * of its reply, the way back to the next read). Connection
 * threads accept for themselves and are kept: a thread serves one connection
 * at a time, closes it and accepts the next, so a service with a connection
 * per request (variant a) pays neither a thread creation nor a hand-off
 * between threads per request.
 */
#ifndef TB_LSRV_H
#define TB_LSRV_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "tb_proto.h"

/* A served request's tail: its CE and the thread CPU time where its truth ended. */
struct tb_lsrv_tail {
	char ce[TB_CE_MAX];
	uint64_t from;
	int open;
};

struct tb_lsrv_cfg {
	/*
	 * Serves one complete request line (line[0..len), without '\n') read
	 * on the blocking socket fd, measured from thread CPU time t0. A served
	 * request opens its tail in *tail (ce, from = where its truth ended,
	 * open = 1); the line server closes it (cfg->tail). Returns 0 to keep
	 * the connection, -1 to drop it. Called on connection threads,
	 * concurrently.
	 */
	int (*serve)(void *arg, int fd, const char *line, size_t len, uint64_t t0, struct tb_lsrv_tail *tail);
	/* The thread's CPU since tail->from, cpu_ns, was the tail of a request
	 * of CE ce: right before the next recv, or at the connection's end.
	 * Connection threads. */
	void (*tail)(void *arg, const char *ce, uint64_t cpu_ns);
	/* Answers a line longer than TB_LINE_MAX (e.g. "ERR line too long");
	 * returns 0 or -1 to drop the connection. Connection threads. */
	int (*too_long)(void *arg, int fd);
	/* Called every second and once after the stop, on the main thread. May be NULL. */
	void (*tick)(void *arg);
	void *arg;
	size_t max_conns;   /* > 0 */
	/* Where a request's truth starts (t0): one of TB_TRUTH_* */
	int truth_head;
	/* If not NULL, counts (atomically) the requests that arrived in the
	 * same read as the one before them (pipelined on their connection). */
	uint64_t *pipelined;
};

/* t0 right after the recv that completes the request line. */
#define TB_TRUTH_AFTER_RECV 0
/* Wait for a request with poll(), then t0 right before the recv, so that
 * reading it (its head, which the collector charges to it) is in its truth
 * and the wait is not. */
#define TB_TRUTH_HEAD 1
/* t0 right before the blocking recv that reads it: the wait for the request
 * (its way into and out of the sleep) and reading it are its truth. */
#define TB_TRUTH_RECV 2

/*
 * Creates a listening socket on addr (non-blocking, SO_REUSEADDR, backlog
 * 1024) and prints "listening ADDR:PORT" (the bound address) on stdout.
 * Returns the socket or -1 (logged).
 */
int tb_lsrv_listen(const struct sockaddr_in *addr);

/*
 * Serves lfd (made blocking) until the signalfd sfd becomes readable; then
 * shuts lfd and every connection down, joins the threads, calls tick once
 * and returns RM_OK, or RM_EINVAL / RM_ENOMEM / RM_EIO on setup or poll
 * failure (logged). Closes neither lfd nor sfd.
 */
int tb_lsrv_run(const struct tb_lsrv_cfg *cfg, int lfd, int sfd);

/* Opens *tail: the request of CE ce served, its truth ended at thread CPU time from. */
void tb_lsrv_tail_open(struct tb_lsrv_tail *tail, const char *ce, uint64_t from);

/* Sends "ERR <reason>\n" on fd; 0 or -1 if the peer is gone. */
int tb_lsrv_send_err(int fd, const char *reason);

#endif
