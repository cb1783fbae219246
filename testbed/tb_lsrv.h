/*
 * tb_lsrv.h - the line server shared by tb-back and tb-front: a listening
 * TCP socket, one thread per connection (at most max_conns at once; more
 * wait in the backlog), complete request lines handed to a callback with the
 * thread CPU time taken right after the recv that completed the line, a tick
 * every second on the main thread, and a clean stop on a signal.
 *
 * Same ground-truth start point as tb-server (tb_server.c). Connection
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

struct tb_lsrv_cfg {
	/*
	 * Serves one complete request line (line[0..len), without '\n') read
	 * on the blocking socket fd, measured from thread CPU time t0. Returns
	 * 0 to keep the connection, -1 to drop it. Called on connection
	 * threads, concurrently.
	 */
	int (*serve)(void *arg, int fd, const char *line, size_t len, uint64_t t0);
	/* Answers a line longer than TB_LINE_MAX (e.g. "ERR line too long");
	 * returns 0 or -1 to drop the connection. Connection threads. */
	int (*too_long)(void *arg, int fd);
	/* Called every second and once after the stop, on the main thread. May be NULL. */
	void (*tick)(void *arg);
	void *arg;
	size_t max_conns;   /* > 0 */
	/*
	 * Nonzero: wait for a request with poll() and start t0 right before the
	 * recv, so that reading it (its head, which the collector charges to it)
	 * is in its truth. Zero: t0 is taken right after the recv (a tier whose
	 * reading the collector leaves unsegmented under --follow-replies).
	 */
	int truth_head;
};

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

/* Sends "ERR <reason>\n" on fd; 0 or -1 if the peer is gone. */
int tb_lsrv_send_err(int fd, const char *reason);

#endif
