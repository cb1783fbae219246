/*
 * tb_lsrv.c - the thread-per-connection line server of tb-server, tb-back
 * and tb-front (tb_lsrv.h). Owns the connection threads and the accepted
 * sockets for the length of tb_lsrv_run (a connection thread closes its
 * socket when done); the request handling belongs to the callbacks.
 *
 * Threads accept for themselves (leader/follower): every idle connection
 * thread blocks in accept() on the shared listening socket and the kernel
 * wakes one per connection, which then serves that connection to its end
 * and goes back to accept(). When the last idle thread takes a connection
 * it starts another one, up to max_conns, so a thread is created only when
 * the number of open connections grows, never per connection; with every
 * thread busy, new connections wait in the backlog. The main thread only
 * ticks and waits for the stop signal.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rm_err.h"
#include "tb_lsrv.h"
#include "tb_proto.h"
#include "tb_tier.h"
#include "banned.h"

struct tb_lsrv;

/* A connection thread's slot. */
struct tb_lconn {
	struct tb_lsrv *srv;
	pthread_t th;
	int taken;  /* thread started or being started (lock) */
	int fd;     /* connection being served, -1 when none (lock) */
};

struct tb_lsrv {
	const struct tb_lsrv_cfg *cfg;
	int lfd;
	pthread_mutex_t lock;
	struct tb_lconn *conns;
	size_t idle;    /* threads in accept() or about to be (lock) */
	int stopping;   /* (lock) */
};

int tb_lsrv_send_err(int fd, const char *reason)
{
	char msg[160];
	int n = snprintf(msg, sizeof(msg), "ERR %s\n", reason ? reason : "error");

	if (n < 0 || (size_t)n >= sizeof(msg))
		return -1;
	return tb_tier_send(fd, msg, (size_t)n, NULL, NULL) == RM_OK ? 0 : -1;
}

void tb_lsrv_tail_open(struct tb_lsrv_tail *tail, const char *ce, uint64_t from)
{
	snprintf(tail->ce, sizeof(tail->ce), "%s", ce);
	tail->from = from;
	tail->open = 1;
}

/* Closes tl, the tail of the request served last, at thread CPU time now. */
static void tb_lsrv_tail_close(const struct tb_lsrv_cfg *cfg, struct tb_lsrv_tail *tl, uint64_t now)
{
	if (!tl->open)
		return;
	tl->open = 0;
	if (cfg->tail && now > tl->from)
		cfg->tail(cfg->arg, tl->ce, now - tl->from);
}

/*
 * Serves one connection until the peer closes it, it fails, or serve drops
 * it; the last request's tail is left open in *tl (the connection's end is
 * that request's).
 */
static void tb_lsrv_serve_lines(const struct tb_lsrv_cfg *cfg, int fd, struct tb_lsrv_tail *tl)
{
	char buf[TB_LINE_MAX];
	size_t have = 0;
	int discarding = 0, t0_valid = 0;
	uint64_t t0 = 0, pre;

	for (;;) {
		char *nl = memchr(buf, '\n', have);
		size_t len;

		if (!nl) {
			ssize_t n;

			if (have == sizeof(buf)) {
				/* No newline within TB_LINE_MAX bytes: answer once,
				 * then drop bytes up to the next newline. */
				if (!discarding && cfg->too_long(cfg->arg, fd) != 0)
					return;
				discarding = 1;
				have = 0;
			}
			/* TB_TRUTH_HEAD: wait first, then read, so that the reading is
			 * in the request's truth and the wait is not */
			if (cfg->truth_head == TB_TRUTH_HEAD &&
			    poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, -1) < 0 && errno != EINTR)
				return;
			pre = tb_thread_cpu_ns();
			n = recv(fd, buf + have, sizeof(buf) - have, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return; /* peer closed (possibly mid-request), or failed */
			tb_lsrv_tail_close(cfg, tl, pre);
			/* The last recv before a complete line counts. */
			t0 = cfg->truth_head != TB_TRUTH_AFTER_RECV ? pre : tb_thread_cpu_ns();
			t0_valid = 1;
			have += (size_t)n;
			continue;
		}
		len = (size_t)(nl - buf);
		if (!t0_valid) { /* a pipelined line already in the buffer */
			t0 = tb_thread_cpu_ns();
			tb_lsrv_tail_close(cfg, tl, t0);
			if (cfg->pipelined)
				__atomic_fetch_add(cfg->pipelined, 1, __ATOMIC_RELAXED);
		}
		if (discarding)
			discarding = 0;
		else if (cfg->serve(cfg->arg, fd, buf, len, t0, tl) != 0)
			return;
		t0_valid = 0;
		have -= len + 1;
		memmove(buf, nl + 1, have);
	}
}

static void *tb_lsrv_conn_main(void *arg);

/*
 * Starts the thread of a free slot, if any (lock held). The new thread counts
 * as idle from now on. Returns 0, or -1 if no slot is free or it failed.
 */
static int tb_lsrv_spawn(struct tb_lsrv *s)
{
	struct tb_lconn *c = NULL;
	size_t i;
	int rv;

	for (i = 0; i < s->cfg->max_conns; i++) {
		if (!s->conns[i].taken) {
			c = &s->conns[i];
			break;
		}
	}
	if (!c)
		return -1;
	c->taken = 1;
	s->idle++;
	rv = pthread_create(&c->th, NULL, tb_lsrv_conn_main, c);
	if (rv != 0) {
		rm_log_warn("failed to start a connection thread: %s", strerror(rv));
		c->taken = 0;
		s->idle--;
		return -1;
	}
	return 0;
}

static void *tb_lsrv_conn_main(void *arg)
{
	struct tb_lconn *c = arg;
	struct tb_lsrv *s = c->srv;
	struct tb_lsrv_tail tl;
	int one = 1;

	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		int e = errno;

		pthread_mutex_lock(&s->lock);
		if (s->stopping) {
			s->idle--;
			pthread_mutex_unlock(&s->lock);
			if (fd >= 0)
				close(fd);
			break;
		}
		if (fd < 0) {
			pthread_mutex_unlock(&s->lock);
			if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
				rm_log_warn("failed to accept: %s", strerror(e));
				usleep(100000);
			}
			continue; /* ECONNABORTED, EINTR, EAGAIN: accept again */
		}
		c->fd = fd;
		s->idle--;
		/* The last idle thread got a connection: keep one accepting. */
		if (s->idle == 0)
			tb_lsrv_spawn(s);
		pthread_mutex_unlock(&s->lock);

		if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
			rm_log_debug("failed to set TCP_NODELAY: %s", strerror(errno));
		tl.open = 0;
		tb_lsrv_serve_lines(s->cfg, fd, &tl);

		/* Idle again; the main thread no longer touches fd once it is -1. */
		pthread_mutex_lock(&s->lock);
		c->fd = -1;
		s->idle++;
		pthread_mutex_unlock(&s->lock);
		close(fd);
		/* the connection's end (reading its EOF, closing it) is its last request's */
		tb_lsrv_tail_close(s->cfg, &tl, tb_thread_cpu_ns());
	}
	return NULL;
}

int tb_lsrv_listen(const struct sockaddr_in *addr)
{
	struct sockaddr_in bound;
	socklen_t blen = sizeof(bound);
	char abuf[64];
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rm_log_error("failed to create a socket: %s", strerror(errno));
		return -1;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0 || listen(fd, 1024) != 0 ||
	    getsockname(fd, (struct sockaddr *)&bound, &blen) != 0) {
		rm_log_error("failed to listen on '%s': %s", tb_addr_str(addr, abuf, sizeof(abuf)),
			     strerror(errno));
		close(fd);
		return -1;
	}
	printf("listening %s\n", tb_addr_str(&bound, abuf, sizeof(abuf)));
	fflush(stdout);
	return fd;
}

/* Ticks every second until the signalfd sfd is readable. */
static int tb_lsrv_wait(const struct tb_lsrv_cfg *cfg, int sfd)
{
	uint64_t next_tick = tb_mono_ns() + 1000000000ull;

	for (;;) {
		struct pollfd pfd = { .fd = sfd, .events = POLLIN };
		uint64_t now = tb_mono_ns();
		int n;

		if (now >= next_tick) {
			if (cfg->tick)
				cfg->tick(cfg->arg);
			next_tick = now + 1000000000ull;
		}
		n = poll(&pfd, 1, (int)((next_tick - now) / 1000000ull) + 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rm_log_error("failed to poll: %s", strerror(errno));
			return RM_EIO;
		}
		if (pfd.revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				rm_log_info("got signal %u, stopping", si.ssi_signo);
			return RM_OK;
		}
	}
}

int tb_lsrv_run(const struct tb_lsrv_cfg *cfg, int lfd, int sfd)
{
	struct tb_lsrv s;
	size_t i;
	int rv, fl;

	if (!cfg || !cfg->serve || !cfg->too_long || cfg->max_conns == 0 || lfd < 0 || sfd < 0)
		return RM_EINVAL;
	/* Connection threads block in accept(). */
	fl = fcntl(lfd, F_GETFL);
	if (fl < 0 || fcntl(lfd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
		rm_log_error("failed to make the listening socket blocking: %s", strerror(errno));
		return RM_EIO;
	}
	memset(&s, 0, sizeof(s));
	s.cfg = cfg;
	s.lfd = lfd;
	s.conns = calloc(cfg->max_conns, sizeof(*s.conns));
	if (!s.conns || pthread_mutex_init(&s.lock, NULL) != 0) {
		rm_log_error("failed to set up the connection threads");
		free(s.conns);
		return RM_ENOMEM;
	}
	for (i = 0; i < cfg->max_conns; i++) {
		s.conns[i].srv = &s;
		s.conns[i].fd = -1;
	}
	pthread_mutex_lock(&s.lock);
	rv = tb_lsrv_spawn(&s) == 0 ? RM_OK : RM_ENOMEM;
	pthread_mutex_unlock(&s.lock);
	if (rv == RM_OK)
		rv = tb_lsrv_wait(cfg, sfd);
	/* Stop: wake every thread out of its recv or accept, then join them. */
	pthread_mutex_lock(&s.lock);
	s.stopping = 1;
	for (i = 0; i < cfg->max_conns; i++)
		if (s.conns[i].fd >= 0)
			shutdown(s.conns[i].fd, SHUT_RDWR);
	pthread_mutex_unlock(&s.lock);
	shutdown(lfd, SHUT_RDWR); /* accept() returns EINVAL in every waiting thread */
	for (i = 0; i < cfg->max_conns; i++) {
		int taken;

		/* A thread may start another while we join: re-read under the lock. */
		pthread_mutex_lock(&s.lock);
		taken = s.conns[i].taken;
		pthread_mutex_unlock(&s.lock);
		if (taken)
			pthread_join(s.conns[i].th, NULL);
	}
	if (cfg->tick)
		cfg->tick(cfg->arg);
	pthread_mutex_destroy(&s.lock);
	free(s.conns);
	return rv;
}
