/*
 * tb_mux.c - the shared pipelined back-end connection of tb-front (see
 * tb_mux.h): callers queue their requests on it, one reader thread reads the
 * replies back in large reads and hands each to its caller in order.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rm_err.h"
#include "tb_mux.h"
#include "banned.h"

#define TB_MUX_TIMEOUT_S 10
#define TB_MUX_READ (256u * 1024u) /* one read takes up to this much */

/* A caller waiting for its reply (on its stack). */
struct tb_mux_wait {
	uint32_t addr, size_kb;
	char ce[TB_CE_MAX];
	char *buf;
	size_t cap, len;
	int rv, done;         /* lock */
	pthread_cond_t cond;  /* done */
	struct tb_mux_wait *next;
};

struct tb_mux {
	struct sockaddr_in addr;
	struct tb_truth *truth;
	size_t max_inflight;
	pthread_mutex_t lock;
	pthread_cond_t room;       /* inflight fell below max_inflight, or stopping */
	pthread_cond_t conn;       /* fd was connected, or stopping */
	int fd;                    /* lock; -1: not connected; closed by the reader */
	struct tb_mux_wait *head, *tail; /* lock: requests out, in wire order */
	size_t inflight;           /* lock */
	int stopping;              /* lock */
	int stop_efd;
	pthread_t reader;
	char *in;                  /* reader: bytes read, not yet cut */
	size_t incap, have;
};

/* Fails every request out and drops the connection (lock held). */
static void tb_mux_drop(struct tb_mux *m)
{
	struct tb_mux_wait *w;

	while ((w = m->head) != NULL) {
		m->head = w->next;
		w->rv = RM_ECLOSED;
		w->done = 1;
		pthread_cond_signal(&w->cond);
	}
	m->tail = NULL;
	m->inflight = 0;
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	pthread_cond_broadcast(&m->room);
}

/*
 * Cuts the first reply out of m->in for w, the oldest request out. Returns
 * its length (w->rv and w->len set), 0 if it is not complete yet, or -1 if
 * the bytes are no reply (a protocol error).
 */
static long tb_mux_cut(struct tb_mux *m, struct tb_mux_wait *w)
{
	size_t total = tb_tier_reply_bytes(w->size_kb);

	if (m->have >= 4 && memcmp(m->in, "ERR ", 4) == 0) {
		char *nl = memchr(m->in, '\n', m->have);

		if (!nl)
			return m->have > TB_LINE_MAX ? -1 : 0;
		w->rv = RM_ENOENT;
		w->len = 0;
		return (long)(nl - m->in) + 1;
	}
	if (m->have >= 3 && memcmp(m->in, "OK ", 3) != 0)
		return -1;
	if (m->have < total)
		return 0;
	if (total > w->cap || tb_tier_check_reply(m->in, total, w->addr, w->size_kb) != RM_OK)
		return -1;
	memcpy(w->buf, m->in, total);
	w->rv = RM_OK;
	w->len = total;
	return (long)total;
}

/*
 * Hands every complete reply in m->in to its caller. *t0 is the thread CPU
 * time where the next reply's truth starts; it moves to the end of each
 * hand-off. Copies the CE of the last reply handed over into last_ce (left
 * as it is if none). Returns 0, or -1 on a protocol error (the connection
 * was dropped).
 */
static int tb_mux_cut_all(struct tb_mux *m, uint64_t *t0, char *last_ce)
{
	for (;;) {
		struct tb_mux_wait *w;
		char ce[TB_CE_MAX];
		uint64_t now;
		long n;

		pthread_mutex_lock(&m->lock);
		w = m->head; /* only this thread unlinks it: valid until done */
		pthread_mutex_unlock(&m->lock);
		if (!w) {
			if (m->have == 0)
				return 0;
			rm_log_warn("back-end sent %zu bytes nobody asked for: dropping the connection", m->have);
			n = -1;
		} else {
			n = tb_mux_cut(m, w);
		}
		if (n == 0)
			return 0;
		if (n < 0) {
			if (w)
				rm_log_warn("malformed reply from the back-end: dropping the connection");
			pthread_mutex_lock(&m->lock);
			tb_mux_drop(m);
			pthread_mutex_unlock(&m->lock);
			m->have = 0;
			return -1;
		}
		memcpy(ce, w->ce, sizeof(ce));
		m->have -= (size_t)n;
		memmove(m->in, m->in + n, m->have);
		pthread_mutex_lock(&m->lock);
		m->head = w->next;
		if (!m->head)
			m->tail = NULL;
		m->inflight--;
		w->done = 1;
		pthread_cond_signal(&w->cond);
		pthread_cond_signal(&m->room);
		pthread_mutex_unlock(&m->lock);
		now = tb_thread_cpu_ns();
		if (tb_truth_add(m->truth, ce, 0, now - *t0, 0, 0) != RM_OK)
			rm_log_warn("failed to record a reply of '%s'", ce);
		*t0 = now;
		memcpy(last_ce, ce, TB_CE_MAX);
	}
}

static void *tb_mux_reader(void *arg)
{
	struct tb_mux *m = arg;
	char tail_ce[TB_CE_MAX] = "";
	uint64_t t0 = 0;
	int t0_valid = 0;

	for (;;) {
		struct pollfd pfd[2];
		uint64_t pre;
		ssize_t n;
		int fd;

		pthread_mutex_lock(&m->lock);
		while (m->fd < 0 && !m->stopping)
			pthread_cond_wait(&m->conn, &m->lock);
		fd = m->fd;
		pthread_mutex_unlock(&m->lock);
		if (fd < 0)
			break; /* stopping */
		pfd[0] = (struct pollfd){ .fd = fd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = m->stop_efd, .events = POLLIN };
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			rm_log_error("failed to poll the back-end connection: %s", strerror(errno));
			break;
		}
		if (pfd[1].revents)
			break;
		pre = tb_thread_cpu_ns();
		n = recv(fd, m->in + m->have, m->incap - m->have, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		/* the way back here was the tail of the reply handed over last */
		if (tail_ce[0] && !t0_valid && tb_truth_add(m->truth, tail_ce, 0, pre - t0, 0, 0) != RM_OK)
			rm_log_warn("failed to record a reply of '%s'", tail_ce);
		if (!t0_valid) {
			t0 = pre;
			t0_valid = 1;
			tail_ce[0] = '\0';
		}
		if (n <= 0) {
			if (n < 0)
				rm_log_debug("back-end connection failed: %s", strerror(errno));
			pthread_mutex_lock(&m->lock);
			tb_mux_drop(m);
			pthread_mutex_unlock(&m->lock);
			m->have = 0;
			t0_valid = 0;
			continue;
		}
		m->have += (size_t)n;
		if (tb_mux_cut_all(m, &t0, tail_ce) != 0 || m->have == 0)
			t0_valid = 0; /* the next read starts the next reply's truth */
	}
	pthread_mutex_lock(&m->lock);
	m->stopping = 1;
	tb_mux_drop(m);
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

/* Frees m, whose lock and conditions are initialised and reader is not running. */
static void tb_mux_free(struct tb_mux *m)
{
	pthread_cond_destroy(&m->room);
	pthread_cond_destroy(&m->conn);
	pthread_mutex_destroy(&m->lock);
	if (m->stop_efd >= 0)
		close(m->stop_efd);
	free(m->in);
	free(m);
}

int tb_mux_open(struct tb_mux **out, const struct sockaddr_in *addr, size_t max_inflight, struct tb_truth *truth)
{
	struct tb_mux *m;

	if (!out || !addr || !truth || max_inflight == 0 || max_inflight > TB_MUX_INFLIGHT_MAX)
		return RM_EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return RM_ENOMEM;
	if (pthread_mutex_init(&m->lock, NULL) != 0) {
		free(m);
		return RM_ENOMEM;
	}
	if (pthread_cond_init(&m->room, NULL) != 0) {
		pthread_mutex_destroy(&m->lock);
		free(m);
		return RM_ENOMEM;
	}
	if (pthread_cond_init(&m->conn, NULL) != 0) {
		pthread_cond_destroy(&m->room);
		pthread_mutex_destroy(&m->lock);
		free(m);
		return RM_ENOMEM;
	}
	m->addr = *addr;
	m->truth = truth;
	m->max_inflight = max_inflight;
	m->fd = -1;
	m->incap = tb_tier_reply_bytes(TB_SIZE_KB_MAX) + TB_MUX_READ;
	m->in = malloc(m->incap);
	m->stop_efd = eventfd(0, EFD_CLOEXEC);
	if (!m->in || m->stop_efd < 0 || pthread_create(&m->reader, NULL, tb_mux_reader, m) != 0) {
		rm_log_error("failed to start the back-end reader: %s", strerror(errno));
		tb_mux_free(m);
		return RM_ENOMEM;
	}
	*out = m;
	return RM_OK;
}

int tb_mux_fetch(struct tb_mux *m, const struct tb_tier_req *req, char *buf, size_t cap, size_t *len)
{
	struct tb_mux_wait w;
	char line[TB_LINE_MAX];
	size_t ll;
	int rv;

	if (!m || !req || !buf || !len || (req->cmd != TB_CMD_FETCH && req->cmd != TB_CMD_STORE) ||
	    cap < tb_tier_reply_bytes(req->size_kb))
		return RM_EINVAL;
	ll = tb_tier_format(line, sizeof(line), req);
	if (ll == 0)
		return RM_EINVAL;
	memset(&w, 0, sizeof(w));
	w.addr = req->addr;
	w.size_kb = req->size_kb;
	memcpy(w.ce, req->ce, sizeof(w.ce));
	w.buf = buf;
	w.cap = cap;
	if (pthread_cond_init(&w.cond, NULL) != 0)
		return RM_ENOMEM;
	pthread_mutex_lock(&m->lock);
	while (m->inflight >= m->max_inflight && !m->stopping)
		pthread_cond_wait(&m->room, &m->lock);
	rv = m->stopping ? RM_ECLOSED : RM_OK;
	if (rv == RM_OK && m->fd < 0) {
		m->fd = tb_tier_connect(&m->addr, TB_MUX_TIMEOUT_S);
		if (m->fd < 0) {
			rm_log_debug("failed to connect to the back-end: %s", strerror(errno));
			rv = RM_ECLOSED;
		} else {
			pthread_cond_signal(&m->conn);
		}
	}
	/*
	 * Sent under the lock: the line goes out whole and the list is in wire
	 * order. It cannot block for long: at most max_inflight short lines are
	 * ever unanswered.
	 */
	if (rv == RM_OK && tb_tier_send(m->fd, line, ll, NULL, NULL) != RM_OK) {
		shutdown(m->fd, SHUT_RDWR); /* the reader fails the others and drops it */
		rv = RM_ECLOSED;
	}
	if (rv == RM_OK) {
		if (m->tail)
			m->tail->next = &w;
		else
			m->head = &w;
		m->tail = &w;
		m->inflight++;
		while (!w.done)
			pthread_cond_wait(&w.cond, &m->lock);
		rv = w.rv;
		*len = w.len;
	}
	pthread_mutex_unlock(&m->lock);
	pthread_cond_destroy(&w.cond);
	return rv;
}

void tb_mux_close(struct tb_mux *m)
{
	uint64_t one = 1;

	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->stopping = 1;
	pthread_cond_broadcast(&m->room);
	pthread_cond_broadcast(&m->conn);
	pthread_mutex_unlock(&m->lock);
	if (write(m->stop_efd, &one, sizeof(one)) != sizeof(one))
		rm_log_warn("failed to wake the back-end reader: %s", strerror(errno));
	pthread_join(m->reader, NULL);
	tb_mux_free(m);
}
