/*
 * tb_load.c - tb-load, the open-loop load generator of one CE (seed 000
 * §7.2.2). Arrival times follow a uniform or lognormal process fixed in
 * advance of completions (tb_rng.h); each arrival takes an idle persistent
 * connection from a pool (opening a new one up to --conns, else it waits in
 * a FIFO and is counted as queued). All sockets are bound to the CE's own
 * source address so that Rametr can tell CEs apart by client address.
 * Single-threaded: one epoll loop drives a timerfd for arrivals and the
 * non-blocking connections. Owns every request record, connection and the
 * optional per-request CSV.
 *
 * Two protocols: "req" (tb-server's REQ line, tb_proto.h) and "get" (the
 * two-tier service's GET line, tb_tier.h). With get, each request names an
 * address drawn from this CE's own distribution — with probability
 * --hot-frac one of the --hot first addresses of its range, else any of the
 * --addr-range addresses from --addr-base — and the object's size, a fixed
 * function of the address (tb_tier_size_of over --size-kb), so that the
 * front-end's cache hits part of the requests. Every reply is checked: its
 * header, its length and its content (the address's data byte).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "rm_err.h"
#include "tb_cli.h"
#include "tb_proto.h"
#include "tb_rng.h"
#include "tb_tier.h"
#include "banned.h"

#define TB_CONNS_DEFAULT 16
#define TB_CONNS_MAX 1024
#define TB_DRAIN_S 30          /* wait this long after the last arrival */
#define TB_LOG_ERRORS 5        /* log the first few failures, count the rest */

enum tb_rstate { TB_R_WAITING = 0, TB_R_SENT, TB_R_DONE, TB_R_FAILED };
enum tb_lproto { TB_P_REQ = 0, TB_P_GET };

struct tb_rec {
	uint64_t arrival_ns;  /* scheduled, CLOCK_MONOTONIC */
	uint64_t latency_ns;  /* completion - arrival, for TB_R_DONE */
	uint32_t cpu_us;
	uint32_t addr, size_kb; /* get only */
	uint8_t state;
	uint8_t write;        /* get only: a PUT */
};

enum tb_cstate { TB_C_CLOSED = 0, TB_C_CONNECTING, TB_C_IDLE, TB_C_BUSY };

struct tb_lconn {
	int fd;
	enum tb_cstate state;
	size_t req;              /* record index while CONNECTING (with has_req) or BUSY */
	int has_req;
	char out[TB_LINE_MAX];   /* request line being sent */
	size_t out_len, out_off;
	char hdr[64];            /* first reply line, until its '\n' */
	size_t hdr_len;
	int hdr_done, is_err;
	uint64_t got;            /* reply bytes received */
	uint32_t expect;         /* resp_bytes asked for */
	char fill;               /* the reply's data byte */
	uint32_t epevents;       /* registered epoll events */
};

struct tb_load {
	/* options */
	struct sockaddr_in server, bind;
	int has_bind;
	char ce[TB_CE_MAX];
	double rate, duration;
	enum tb_arrival arrival;
	uint64_t cpu_lo, cpu_hi, resp_bytes, seed, nconns;
	const char *out_path;
	enum tb_lproto proto;
	uint64_t addr_base, addr_range, hot, size_lo, size_hi;
	double hot_frac, write_frac;

	/* state */
	struct tb_rng rng;
	int epfd, tfd;
	struct tb_lconn *conns;
	size_t open_conns;
	struct tb_rec *recs;
	size_t nrecs, cap_recs;
	size_t *queue;           /* FIFO of record indices waiting for a connection */
	size_t q_head, q_len, q_cap;
	uint64_t start_ns, start_real_ns;
	double next_off_s;       /* offset of the next arrival from start */
	int arrivals_done;
	uint64_t sent, completed, errors, queued;
};

static void tb_usage(FILE *f)
{
	fprintf(f,
		"usage: tb-load --server ADDR:PORT --ce NAME --rate R --duration S\n"
		"               [--bind ADDR] [--arrival uniform|lognormal] [--cpu-us LO:HI]\n"
		"               [--resp-bytes N] [--seed N] [--conns N] [--out FILE]\n"
		"               [--proto req|get] [--addr-base N] [--addr-range N] [--hot N]\n"
		"               [--hot-frac P] [--size-kb LO:HI]\n"
		"\n"
		"  --server ADDR:PORT  the tb-server (req) or tb-front (get) to load\n"
		"  --bind ADDR         source IPv4 address of every connection (e.g. 127.0.0.2)\n"
		"  --ce NAME           chargeable entity named in each request\n"
		"  --rate R            mean arrival rate, requests/s (open loop)\n"
		"  --duration S        seconds during which requests arrive\n"
		"  --arrival A         uniform (spacing 1/R, default) or lognormal\n"
		"                      (inter-arrival exp(Z)/(e^0.5 R), Z ~ N(0,1))\n"
		"  --cpu-us LO:HI      per-request CPU, uniform in [LO, HI] us (default 1000:3000,\n"
		"                      max %u)\n"
		"  --resp-bytes N      reply size, %u..%u (default 512)\n"
		"  --seed N            RNG seed (default: a hash of the CE name)\n"
		"  --conns N           at most N persistent connections (default %d)\n"
		"  --out FILE          CSV send_unix_ns,latency_ns,cpu_us of completed requests\n"
		"                      (send_unix_ns = scheduled arrival; latency includes any wait;\n"
		"                      get adds addr,size_kb)\n"
		"  --proto P           req (tb-server, default) or get (the two-tier tb-front)\n"
		"  get only:\n"
		"  --addr-base N       first address of this CE's range (default 0)\n"
		"  --addr-range N      addresses in the range (default 10000)\n"
		"  --hot N             the first N addresses of the range are hot (default 0)\n"
		"  --hot-frac P        probability in [0, 1] of a hot address (default 0)\n"
		"  --size-kb LO:HI     object sizes, a fixed function of the address\n"
		"                      (default 1:16, max %u)\n"
		"  --write-frac P      probability in [0, 1] that a request is a PUT (a\n"
		"                      write-through of the object) instead of a GET (default 0)\n"
		"\n"
		"prints 'ce=.. sent=.. completed=.. errors=.. queued=.. p50_ms=.. p95_ms=..\n"
		"p99_ms=.. rate=..' (rate = completed / duration); exit 0 if every request\n"
		"completed, 1 on errors, 2 on bad arguments; waits at most %d s after the\n"
		"last arrival for outstanding replies\n",
		TB_CPU_US_MAX, TB_RESP_MIN, TB_RESP_MAX, TB_CONNS_DEFAULT, TB_SIZE_KB_MAX, TB_DRAIN_S);
}

static void tb_fail_req(struct tb_load *l, size_t ri, const char *why)
{
	struct tb_rec *r = &l->recs[ri];

	if (r->state == TB_R_DONE || r->state == TB_R_FAILED)
		return;
	r->state = TB_R_FAILED;
	l->errors++;
	if (l->errors <= TB_LOG_ERRORS)
		rm_log_error("request %zu of '%s' failed: %s", ri, l->ce, why);
	else if (l->errors == TB_LOG_ERRORS + 1)
		rm_log_error("more requests failed; only counting from now on");
}

static int tb_ep_set(struct tb_load *l, struct tb_lconn *c, uint32_t events)
{
	struct epoll_event ev;

	if (c->epevents == events)
		return 0;
	memset(&ev, 0, sizeof(ev));
	ev.events = events;
	ev.data.u64 = (uint64_t)(c - l->conns);
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, c->fd, &ev) != 0)
		return -1;
	c->epevents = events;
	return 0;
}

/* Closes c, failing its request if it has one (why != NULL). */
static void tb_close_conn(struct tb_load *l, struct tb_lconn *c, const char *why)
{
	if (c->state == TB_C_CLOSED)
		return;
	if (c->has_req)
		tb_fail_req(l, c->req, why ? why : "connection closed");
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->state = TB_C_CLOSED;
	l->open_conns--;
}

/* Writes what is left of c's request line. Returns 0, or -1 if c was closed. */
static int tb_flush_out(struct tb_load *l, struct tb_lconn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			tb_close_conn(l, c, strerror(errno));
			return -1;
		}
		c->out_off += (size_t)n;
	}
	if (tb_ep_set(l, c, EPOLLIN | EPOLLRDHUP | (c->out_off < c->out_len ? EPOLLOUT : 0)) != 0) {
		tb_close_conn(l, c, "epoll_ctl failed");
		return -1;
	}
	return 0;
}

/* Puts request ri on the idle connection c. */
static void tb_start_req(struct tb_load *l, struct tb_lconn *c, size_t ri)
{
	const struct tb_rec *r = &l->recs[ri];

	if (l->proto == TB_P_GET) {
		struct tb_tier_req g;

		memset(&g, 0, sizeof(g));
		g.cmd = r->write ? TB_CMD_PUT : TB_CMD_GET;
		snprintf(g.ce, sizeof(g.ce), "%s", l->ce);
		g.addr = r->addr;
		g.size_kb = r->size_kb;
		g.cpu_us = r->cpu_us;
		c->out_len = tb_tier_format(c->out, sizeof(c->out), &g);
		c->expect = tb_tier_reply_bytes(r->size_kb);
		c->fill = tb_tier_fill(r->addr);
	} else {
		struct tb_req req;

		memset(&req, 0, sizeof(req));
		snprintf(req.ce, sizeof(req.ce), "%s", l->ce);
		req.cpu_us = r->cpu_us;
		req.resp_bytes = (uint32_t)l->resp_bytes;
		c->out_len = tb_format_req(c->out, sizeof(c->out), &req);
		c->expect = req.resp_bytes;
		c->fill = '.';
	}
	c->req = ri;
	c->has_req = 1;
	c->state = TB_C_BUSY;
	c->out_off = 0;
	c->hdr_len = 0;
	c->hdr_done = 0;
	c->is_err = 0;
	c->got = 0;
	if (c->out_len == 0) { /* options were validated; cannot happen */
		tb_close_conn(l, c, "cannot format the request");
		return;
	}
	l->recs[ri].state = TB_R_SENT;
	l->sent++;
	tb_flush_out(l, c);
}

/* Opens a new connection for request ri. */
static void tb_open_conn(struct tb_load *l, size_t ri)
{
	struct tb_lconn *c = NULL;
	struct epoll_event ev;
	int fd, one = 1;
	size_t i;

	for (i = 0; i < l->nconns; i++) {
		if (l->conns[i].state == TB_C_CLOSED) {
			c = &l->conns[i];
			break;
		}
	}
	if (!c) { /* callers check open_conns < nconns */
		tb_fail_req(l, ri, "no connection slot");
		return;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		tb_fail_req(l, ri, strerror(errno));
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (l->has_bind) {
		setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
		if (bind(fd, (const struct sockaddr *)&l->bind, sizeof(l->bind)) != 0) {
			tb_fail_req(l, ri, strerror(errno));
			close(fd);
			return;
		}
	}
	if (connect(fd, (const struct sockaddr *)&l->server, sizeof(l->server)) != 0 &&
	    errno != EINPROGRESS) {
		tb_fail_req(l, ri, strerror(errno));
		close(fd);
		return;
	}
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->state = TB_C_CONNECTING;
	c->req = ri;
	c->has_req = 1;
	c->epevents = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
	memset(&ev, 0, sizeof(ev));
	ev.events = c->epevents;
	ev.data.u64 = (uint64_t)(c - l->conns);
	l->open_conns++;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
		tb_close_conn(l, c, strerror(errno));
}

static int tb_queue_push(struct tb_load *l, size_t ri)
{
	if (l->q_len == l->q_cap) {
		size_t cap = l->q_cap ? l->q_cap * 2 : 64, i;
		size_t *nq = malloc(cap * sizeof(*nq));

		if (!nq)
			return RM_ENOMEM;
		for (i = 0; i < l->q_len; i++)
			nq[i] = l->queue[(l->q_head + i) % l->q_cap];
		free(l->queue);
		l->queue = nq;
		l->q_cap = cap;
		l->q_head = 0;
	}
	l->queue[(l->q_head + l->q_len) % l->q_cap] = ri;
	l->q_len++;
	return RM_OK;
}

static size_t tb_queue_pop(struct tb_load *l)
{
	size_t ri = l->queue[l->q_head];

	l->q_head = (l->q_head + 1) % l->q_cap;
	l->q_len--;
	return ri;
}

/* Gives request ri a connection now, or queues it. */
static void tb_dispatch(struct tb_load *l, size_t ri, int from_queue)
{
	size_t i;

	if (!from_queue && l->q_len > 0) { /* keep FIFO order behind waiting requests */
		l->queued++;
		if (tb_queue_push(l, ri) != RM_OK)
			tb_fail_req(l, ri, "out of memory");
		return;
	}
	for (i = 0; i < l->nconns; i++) {
		if (l->conns[i].state == TB_C_IDLE) {
			tb_start_req(l, &l->conns[i], ri);
			return;
		}
	}
	if (l->open_conns < l->nconns) {
		tb_open_conn(l, ri);
		return;
	}
	if (!from_queue)
		l->queued++;
	if (tb_queue_push(l, ri) != RM_OK)
		tb_fail_req(l, ri, "out of memory");
}

/* Hands waiting requests to free or new connections. */
static void tb_drain_queue(struct tb_load *l)
{
	while (l->q_len > 0) {
		size_t i;
		int free_slot = l->open_conns < l->nconns;

		for (i = 0; !free_slot && i < l->nconns; i++)
			free_slot = l->conns[i].state == TB_C_IDLE;
		if (!free_slot)
			return;
		tb_dispatch(l, tb_queue_pop(l), 1);
	}
}

/* Creates the records of every arrival due by now and dispatches them. */
static int tb_arrivals(struct tb_load *l, uint64_t now)
{
	while (!l->arrivals_done) {
		uint64_t at = l->start_ns + (uint64_t)(l->next_off_s * 1e9);
		struct tb_rec *r;

		if (l->next_off_s >= l->duration) {
			l->arrivals_done = 1;
			break;
		}
		if (at > now)
			break;
		if (l->nrecs == l->cap_recs) {
			size_t cap = l->cap_recs ? l->cap_recs * 2 : 1024;
			struct tb_rec *nr = realloc(l->recs, cap * sizeof(*nr));

			if (!nr) {
				rm_log_error("out of memory after %zu requests", l->nrecs);
				return RM_ENOMEM;
			}
			l->recs = nr;
			l->cap_recs = cap;
		}
		r = &l->recs[l->nrecs];
		memset(r, 0, sizeof(*r));
		r->arrival_ns = at;
		r->cpu_us = (uint32_t)tb_rng_range(&l->rng, l->cpu_lo, l->cpu_hi);
		if (l->proto == TB_P_GET) {
			uint64_t span = l->hot && tb_rng_unit(&l->rng) < l->hot_frac ? l->hot : l->addr_range;

			r->addr = (uint32_t)(l->addr_base + tb_rng_range(&l->rng, 0, span - 1));
			r->size_kb = tb_tier_size_of(r->addr, (uint32_t)l->size_lo, (uint32_t)l->size_hi);
			/* drawn only when asked for: the same seed gives the same GETs as before */
			if (l->write_frac > 0)
				r->write = tb_rng_unit(&l->rng) < l->write_frac;
		}
		r->state = TB_R_WAITING;
		l->nrecs++;
		tb_dispatch(l, l->nrecs - 1, 0);
		/* Uniform: k / rate exactly, so no rounding drift adds an arrival. */
		if (l->arrival == TB_ARRIVAL_UNIFORM)
			l->next_off_s = (double)l->nrecs / l->rate;
		else
			l->next_off_s += tb_arrival_next(l->arrival, l->rate, &l->rng);
	}
	return RM_OK;
}

static int tb_arm_timer(struct tb_load *l)
{
	struct itimerspec its;
	uint64_t at;

	memset(&its, 0, sizeof(its));
	if (!l->arrivals_done) {
		at = l->start_ns + (uint64_t)(l->next_off_s * 1e9);
		its.it_value.tv_sec = (time_t)(at / 1000000000ull);
		its.it_value.tv_nsec = (long)(at % 1000000000ull);
	}
	if (timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL) != 0) {
		rm_log_error("failed to arm the arrival timer: %s", strerror(errno));
		return RM_EIO;
	}
	return RM_OK;
}

/* Consumes received reply bytes of a busy connection. */
static void tb_on_bytes(struct tb_load *l, struct tb_lconn *c, const char *buf, size_t n, uint64_t now)
{
	size_t i = 0;

	if (c->state != TB_C_BUSY) {
		tb_close_conn(l, c, NULL); /* unsolicited bytes */
		return;
	}
	while (!c->hdr_done && i < n) {
		char ch = buf[i++];

		c->got++;

		if (c->hdr_len + 1 >= sizeof(c->hdr)) {
			tb_close_conn(l, c, "reply header too long");
			return;
		}
		c->hdr[c->hdr_len++] = ch;
		if (ch == '\n') {
			char want[64];
			size_t wl = tb_format_ok(want, sizeof(want), c->expect);

			c->hdr[c->hdr_len] = '\0';
			c->hdr_done = 1;
			if (c->hdr_len > 4 && memcmp(c->hdr, "ERR ", 4) == 0) {
				c->is_err = 1;
			} else if (wl == 0 || c->hdr_len != wl || memcmp(c->hdr, want, wl) != 0) {
				tb_close_conn(l, c, "malformed reply header");
				return;
			}
		}
	}
	if (!c->hdr_done)
		return;
	/* The body: the data byte, then a final '\n' (nothing after it). */
	if (!c->is_err) {
		for (; i < n; i++, c->got++) {
			char want = c->got + 1 == c->expect ? '\n' : c->fill;

			if (c->got >= c->expect)
				break; /* too long: reported below */
			if (buf[i] != want) {
				tb_close_conn(l, c, "reply content does not match the request");
				return;
			}
		}
	}
	c->got += n - i;
	if (c->is_err) {
		char why[96];

		if (c->got != c->hdr_len) {
			tb_close_conn(l, c, "bytes after an error reply");
			return;
		}
		c->hdr[c->hdr_len - 1] = '\0';
		snprintf(why, sizeof(why), "server said '%s'", c->hdr);
		tb_fail_req(l, c->req, why);
	} else if (c->got < c->expect) {
		return;
	} else if (c->got > c->expect) {
		tb_close_conn(l, c, "reply longer than asked for");
		return;
	} else {
		struct tb_rec *r = &l->recs[c->req];

		r->state = TB_R_DONE;
		r->latency_ns = now - r->arrival_ns;
		l->completed++;
	}
	c->has_req = 0;
	c->state = TB_C_IDLE;
}

static void tb_on_conn(struct tb_load *l, struct tb_lconn *c, uint32_t ev)
{
	static char buf[65536];

	if (c->state == TB_C_CONNECTING && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t el = sizeof(err);

		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
			err = errno;
		if (err != 0) {
			char why[128];

			snprintf(why, sizeof(why), "failed to connect: %s", strerror(err));
			tb_close_conn(l, c, why);
			return;
		}
		c->state = TB_C_IDLE;
		c->has_req = 0;
		tb_start_req(l, c, c->req);
		return;
	}
	if (c->state == TB_C_BUSY && (ev & EPOLLOUT)) {
		if (tb_flush_out(l, c) != 0)
			return;
	}
	if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		for (;;) {
			ssize_t n = recv(c->fd, buf, sizeof(buf), 0);

			if (n > 0) {
				tb_on_bytes(l, c, buf, (size_t)n, tb_mono_ns());
				if (c->state == TB_C_CLOSED)
					return;
				continue;
			}
			if (n == 0) {
				tb_close_conn(l, c, "server closed the connection");
				return;
			}
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				tb_close_conn(l, c, strerror(errno));
			return;
		}
	}
}

static int tb_busy(const struct tb_load *l)
{
	size_t i;

	if (l->q_len > 0)
		return 1;
	for (i = 0; i < l->nconns; i++)
		if (l->conns[i].state == TB_C_CONNECTING || l->conns[i].state == TB_C_BUSY)
			return 1;
	return 0;
}

static int tb_run(struct tb_load *l)
{
	struct epoll_event ev;
	uint64_t deadline = 0;
	int rv;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u64 = UINT64_MAX;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tfd, &ev) != 0) {
		rm_log_error("failed to watch the timer: %s", strerror(errno));
		return RM_EIO;
	}
	l->start_ns = tb_mono_ns();
	l->start_real_ns = tb_real_ns();
	for (;;) {
		struct epoll_event evs[64];
		uint64_t now = tb_mono_ns();
		int n, i, timeout = -1;

		if ((rv = tb_arrivals(l, now)) != RM_OK)
			return rv;
		tb_drain_queue(l);
		if ((rv = tb_arm_timer(l)) != RM_OK)
			return rv;
		if (l->arrivals_done) {
			if (!deadline)
				deadline = now + TB_DRAIN_S * 1000000000ull;
			if (!tb_busy(l))
				break;
			if (now >= deadline)
				break;
			timeout = (int)((deadline - now) / 1000000ull) + 1;
		}
		n = epoll_wait(l->epfd, evs, 64, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rm_log_error("failed to wait for events: %s", strerror(errno));
			return RM_EIO;
		}
		for (i = 0; i < n; i++) {
			if (evs[i].data.u64 == UINT64_MAX) {
				uint64_t exp;

				if (read(l->tfd, &exp, sizeof(exp)) < 0 && errno != EAGAIN)
					rm_log_debug("timerfd read: %s", strerror(errno));
				continue;
			}
			tb_on_conn(l, &l->conns[evs[i].data.u64], evs[i].events);
		}
	}
	return RM_OK;
}

static int tb_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile p (0 < p <= 100) of n sorted values, in ms. */
static double tb_pct_ms(const uint64_t *v, size_t n, double p)
{
	size_t k;

	if (n == 0)
		return 0;
	k = (size_t)ceil((p / 100.0) * (double)n);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return (double)v[k - 1] / 1e6;
}

static int tb_report(struct tb_load *l)
{
	uint64_t *lat = NULL;
	size_t i, nl = 0;
	FILE *f = NULL;
	int rv = RM_OK;

	/* Whatever did not finish by the deadline has failed. */
	for (i = 0; i < l->nrecs; i++)
		if (l->recs[i].state == TB_R_WAITING || l->recs[i].state == TB_R_SENT)
			tb_fail_req(l, i, "no reply before the drain deadline");
	if (l->completed) {
		lat = malloc(l->completed * sizeof(*lat));
		if (!lat) {
			rm_log_error("out of memory");
			return RM_ENOMEM;
		}
	}
	if (l->out_path) {
		f = fopen(l->out_path, "w");
		if (!f) {
			rm_log_error("failed to open '%s': %s", l->out_path, strerror(errno));
			rv = RM_EIO;
		} else {
			fprintf(f, l->proto == TB_P_GET ? "send_unix_ns,latency_ns,cpu_us,addr,size_kb\n"
							: "send_unix_ns,latency_ns,cpu_us\n");
		}
	}
	for (i = 0; i < l->nrecs; i++) {
		const struct tb_rec *r = &l->recs[i];

		if (r->state != TB_R_DONE)
			continue;
		lat[nl++] = r->latency_ns;
		if (f && l->proto == TB_P_GET)
			fprintf(f, "%" PRIu64 ",%" PRIu64 ",%u,%u,%u\n",
				l->start_real_ns + (r->arrival_ns - l->start_ns), r->latency_ns, r->cpu_us,
				r->addr, r->size_kb);
		else if (f)
			fprintf(f, "%" PRIu64 ",%" PRIu64 ",%u\n",
				l->start_real_ns + (r->arrival_ns - l->start_ns), r->latency_ns, r->cpu_us);
	}
	if (f && (ferror(f) | fclose(f))) {
		rm_log_error("failed to write '%s': %s", l->out_path, strerror(errno));
		rv = RM_EIO;
	}
	if (nl > 1)
		qsort(lat, nl, sizeof(*lat), tb_u64_cmp);
	printf("ce=%s sent=%" PRIu64 " completed=%" PRIu64 " errors=%" PRIu64 " queued=%" PRIu64
	       " p50_ms=%.3f p95_ms=%.3f p99_ms=%.3f rate=%.2f\n",
	       l->ce, l->sent, l->completed, l->errors, l->queued, tb_pct_ms(lat, nl, 50),
	       tb_pct_ms(lat, nl, 95), tb_pct_ms(lat, nl, 99), (double)l->completed / l->duration);
	fflush(stdout);
	free(lat);
	return rv;
}

static void tb_load_release(struct tb_load *l)
{
	size_t i;

	for (i = 0; l->conns && i < l->nconns; i++)
		if (l->conns[i].state != TB_C_CLOSED)
			close(l->conns[i].fd);
	free(l->conns);
	free(l->recs);
	free(l->queue);
	if (l->epfd >= 0)
		close(l->epfd);
	if (l->tfd >= 0)
		close(l->tfd);
}

static int tb_bad(const char *opt, const char *val, const char *want)
{
	rm_log_error("bad %s '%s': expected %s", opt, val, want);
	tb_usage(stderr);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "server", required_argument, NULL, 's' },
		{ "bind", required_argument, NULL, 'b' },
		{ "ce", required_argument, NULL, 'c' },
		{ "rate", required_argument, NULL, 'r' },
		{ "duration", required_argument, NULL, 'd' },
		{ "arrival", required_argument, NULL, 'a' },
		{ "cpu-us", required_argument, NULL, 'u' },
		{ "resp-bytes", required_argument, NULL, 'p' },
		{ "seed", required_argument, NULL, 'S' },
		{ "conns", required_argument, NULL, 'n' },
		{ "out", required_argument, NULL, 'o' },
		{ "proto", required_argument, NULL, 'P' },
		{ "addr-base", required_argument, NULL, 'A' },
		{ "addr-range", required_argument, NULL, 'R' },
		{ "hot", required_argument, NULL, 'H' },
		{ "hot-frac", required_argument, NULL, 'F' },
		{ "write-frac", required_argument, NULL, 'W' },
		{ "size-kb", required_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct tb_load l;
	const char *server_s = NULL, *ce = NULL;
	int c, has_seed = 0, rv;
	size_t i;

	rm_log_init("tb-load");
	memset(&l, 0, sizeof(l));
	l.epfd = l.tfd = -1;
	l.arrival = TB_ARRIVAL_UNIFORM;
	l.cpu_lo = 1000;
	l.cpu_hi = 3000;
	l.resp_bytes = 512;
	l.nconns = TB_CONNS_DEFAULT;
	l.addr_range = 10000;
	l.size_lo = 1;
	l.size_hi = 16;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			server_s = optarg;
			if (tb_parse_addr(optarg, 0, &l.server) != RM_OK || l.server.sin_port == 0)
				return tb_bad("--server", optarg, "IPV4:PORT");
			break;
		case 'b':
			if (tb_parse_addr(optarg, 1, &l.bind) != RM_OK || l.bind.sin_port != 0)
				return tb_bad("--bind", optarg, "an IPv4 address without port");
			l.has_bind = 1;
			break;
		case 'c':
			ce = optarg;
			break;
		case 'r':
			if (tb_parse_pos_double(optarg, 1e6, &l.rate) != RM_OK)
				return tb_bad("--rate", optarg, "a number in (0, 1e6]");
			break;
		case 'd':
			if (tb_parse_pos_double(optarg, 7 * 86400, &l.duration) != RM_OK)
				return tb_bad("--duration", optarg, "seconds in (0, 604800]");
			break;
		case 'a':
			if (tb_arrival_parse(optarg, &l.arrival) != RM_OK)
				return tb_bad("--arrival", optarg, "uniform or lognormal");
			break;
		case 'u':
			if (tb_parse_range(optarg, 0, TB_CPU_US_MAX, &l.cpu_lo, &l.cpu_hi) != RM_OK)
				return tb_bad("--cpu-us", optarg, "LO:HI or N within 0..1000000, LO <= HI");
			break;
		case 'p':
			if (tb_parse_u64(optarg, TB_RESP_MIN, TB_RESP_MAX, &l.resp_bytes) != RM_OK)
				return tb_bad("--resp-bytes", optarg, "16..1048576");
			break;
		case 'S':
			if (tb_parse_u64(optarg, 0, UINT64_MAX, &l.seed) != RM_OK)
				return tb_bad("--seed", optarg, "an unsigned integer");
			has_seed = 1;
			break;
		case 'n':
			if (tb_parse_u64(optarg, 1, TB_CONNS_MAX, &l.nconns) != RM_OK)
				return tb_bad("--conns", optarg, "1..1024");
			break;
		case 'o':
			l.out_path = optarg;
			break;
		case 'P':
			if (strcmp(optarg, "req") == 0)
				l.proto = TB_P_REQ;
			else if (strcmp(optarg, "get") == 0)
				l.proto = TB_P_GET;
			else
				return tb_bad("--proto", optarg, "req or get");
			break;
		case 'A':
			if (tb_parse_u64(optarg, 0, TB_ADDR_MAX, &l.addr_base) != RM_OK)
				return tb_bad("--addr-base", optarg, "0..4294967295");
			break;
		case 'R':
			if (tb_parse_u64(optarg, 1, (uint64_t)TB_ADDR_MAX + 1, &l.addr_range) != RM_OK)
				return tb_bad("--addr-range", optarg, "1..4294967296");
			break;
		case 'H':
			if (tb_parse_u64(optarg, 0, (uint64_t)TB_ADDR_MAX + 1, &l.hot) != RM_OK)
				return tb_bad("--hot", optarg, "0..4294967296");
			break;
		case 'F':
			if (strcmp(optarg, "0") == 0)
				l.hot_frac = 0;
			else if (tb_parse_pos_double(optarg, 1.0, &l.hot_frac) != RM_OK)
				return tb_bad("--hot-frac", optarg, "a probability in [0, 1]");
			break;
		case 'W':
			if (strcmp(optarg, "0") == 0)
				l.write_frac = 0;
			else if (tb_parse_pos_double(optarg, 1.0, &l.write_frac) != RM_OK)
				return tb_bad("--write-frac", optarg, "a probability in [0, 1]");
			break;
		case 'K':
			if (tb_parse_range(optarg, TB_SIZE_KB_MIN, TB_SIZE_KB_MAX, &l.size_lo, &l.size_hi) != RM_OK)
				return tb_bad("--size-kb", optarg, "LO:HI or N within 1..1024, LO <= HI");
			break;
		default:
			return tb_cli_other(c, argv, "tb-load", tb_usage);
		}
	}
	if (tb_cli_extra_args(argc, argv, tb_usage))
		return 2;
	if (!server_s || !ce || l.rate == 0 || l.duration == 0) {
		rm_log_error("--server, --ce, --rate and --duration are required");
		tb_usage(stderr);
		return 2;
	}
	if (l.addr_base + l.addr_range - 1 > TB_ADDR_MAX) {
		rm_log_error("--addr-base plus --addr-range goes past address %u", TB_ADDR_MAX);
		return 2;
	}
	if (l.hot > l.addr_range) {
		rm_log_error("--hot %llu is larger than --addr-range %llu", (unsigned long long)l.hot,
			     (unsigned long long)l.addr_range);
		return 2;
	}
	{
		struct tb_req probe;
		char line[TB_LINE_MAX];

		memset(&probe, 0, sizeof(probe));
		if (strlen(ce) >= sizeof(probe.ce))
			return tb_bad("--ce", ce, "a name of 1..63 characters [A-Za-z0-9_.:-]");
		snprintf(probe.ce, sizeof(probe.ce), "%s", ce);
		probe.cpu_us = (uint32_t)l.cpu_hi;
		probe.resp_bytes = (uint32_t)l.resp_bytes;
		if (tb_format_req(line, sizeof(line), &probe) == 0)
			return tb_bad("--ce", ce, "a name of 1..63 characters [A-Za-z0-9_.:-], not starting with '__'");
		snprintf(l.ce, sizeof(l.ce), "%s", ce);
	}
	tb_rng_seed(&l.rng, has_seed ? l.seed : tb_hash_str(l.ce));
	signal(SIGPIPE, SIG_IGN);

	l.conns = calloc((size_t)l.nconns, sizeof(*l.conns));
	l.epfd = epoll_create1(EPOLL_CLOEXEC);
	l.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (!l.conns || l.epfd < 0 || l.tfd < 0) {
		rm_log_error("failed to set up the event loop: %s", strerror(errno));
		tb_load_release(&l);
		return 1;
	}
	for (i = 0; i < l.nconns; i++)
		l.conns[i].fd = -1;
	rv = tb_run(&l);
	if (rv == RM_OK)
		rv = tb_report(&l);
	tb_load_release(&l);
	if (rv != RM_OK)
		return 1;
	return l.errors ? 1 : 0;
}
