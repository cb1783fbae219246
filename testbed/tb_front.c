/*
 * tb_front.c - tb-front, the caching front-end of the two-tier synthetic
 * shared service (seed 000 §7.2.1, Fig. 4). A client asks "GET <ce> <addr>
 * <size_kb> <cpu_us>" (tb_tier.h); the front-end burns cpu_us of processing
 * CPU, looks the object up in its LRU cache (tb_cache.h, 300 KB by default)
 * and on a miss fetches it from tb-back ("FETCH <ce> <addr> <size_kb>"),
 * stores it, and answers with the object.
 *
 * The three variants of the testbed are flags:
 *   --backend-mode per-request   (a) a new back-end connection per miss
 *   --backend-mode pool:N        (b) N persistent back-end connections shared
 *                                    by all clients, one request at a time each
 *   --backend-mode mux:N         one persistent back-end connection shared by
 *                                    all clients with up to N requests in
 *                                    flight, its replies read back in large
 *                                    reads by one reader thread (tb_mux.h)
 *   --workers N                  (c) with N > 0 the main thread accepts and
 *                                    reads every client connection (epoll) and
 *                                    hands each request to a pool of N worker
 *                                    threads through a queue (mutex + condvar);
 *                                    the worker does the CPU work, the back-end
 *                                    call and the reply. With 0 (default) one
 *                                    thread per client connection does it all.
 *
 * Ground truth per CE (tb_truth.h): the CPU time of every front-end thread
 * spent on a request (CLOCK_THREAD_CPUTIME_ID). A connection thread's:
 * from right before the recv that completed its request line (its head) on
 * to right before the thread's next recv (its tail: the rest of the reply,
 * the way back to the next read; tb_lsrv.h). With workers, the reader's
 * part (from right before the wait that returned the request, as a
 * connection thread's blocking recv, or right before its recv when it read
 * another request first, to the hand-off), the worker's part (its wake-up
 * for the job, or the end of its previous job, to the end of the
 * completion hand-off: tb_worker_main) and the reader's taking the
 * connection back after the reply (from right before the wait that the
 * hand-off ended to its next read or wait: tb_reader_loop) are measured on
 * each thread and added. --stats has per CE the requests, cache hits, misses and failed
 * back-end fetches. Both files are rewritten every second and at the end
 * (SIGTERM/SIGINT).
 *
 * The main thread owns the listening socket, the files, the worker threads
 * and (with workers) every client connection; a connection or worker thread
 * owns only the request it serves. The cache, the back-end pool, the truth
 * and the stats are shared under their own mutexes.
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "rm_err.h"
#include "tb_cache.h"
#include "tb_lsrv.h"
#include "tb_mux.h"
#include "tb_cli.h"
#include "tb_proto.h"
#include "tb_tier.h"
#include "tb_truth.h"
#include "banned.h"

#define TB_FRONT_CONNS_DEFAULT 256
#define TB_FRONT_CONNS_MAX 4096
#define TB_FRONT_WORKERS_MAX 256
#define TB_FRONT_POOL_MAX 256
#define TB_FRONT_MAX_CES 1024
#define TB_FRONT_BACK_TIMEOUT_S 10
#define TB_FRONT_STATS_HEADER "ce,requests,hits,misses,backend_errors"

/* Per-CE cache and back-end counters (the --stats file); added to
 * atomically, like tb_truth, so that counting adds no wake-ups. */
struct tb_fstat {
	char ce[TB_CE_MAX];
	uint64_t requests, hits, misses, be_errors;
};

/* The back-end connections: per request (n == 0), a shared pool of n, or
 * one shared multiplexed connection (mux). */
struct tb_pool {
	struct sockaddr_in addr;
	struct tb_mux *mux;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t n;
	int *fds;     /* -1: not connected (yet) */
	int *busy;
};

struct tb_fconn;

/* One request handed from the reader to a worker (variant c). */
struct tb_job {
	struct tb_fconn *conn;
	struct tb_tier_req req;
	size_t line_len;
	struct tb_job *next;
};

/* A client connection of the reader (variant c); fields are the reader's
 * unless noted. */
struct tb_fconn {
	int fd;
	char buf[TB_LINE_MAX];
	size_t have;
	int discarding;
	int busy;                  /* a job of it is queued or being served */
	int closed;                /* reader saw its end; waiting for the job */
	int broken;                /* the worker failed to reply (guarded by qlock) */
	int in_epoll;
	int dead;                  /* closed and unlinked; freed after the event batch */
	char ce[TB_CE_MAX];        /* the CE of its last job (reader) */
	struct tb_fconn *done_next; /* done list (guarded by qlock) */
	struct tb_fconn *prev, *next; /* every open connection */
};

struct tb_front {
	struct tb_truth truth;
	struct tb_cache cache;
	struct tb_pool pool;
	const char *truth_path, *stats_path;
	size_t max_conns, nworkers;

	pthread_mutex_t lock;       /* adding a new CE to stats */
	struct tb_fstat *stats;     /* TB_FRONT_MAX_CES rows, never moved */
	size_t nstats;              /* published with release/acquire */
	uint64_t malformed;         /* atomic */

	/* variant c */
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct tb_job *qhead, *qtail;
	struct tb_fconn *done;      /* finished connections (qlock) */
	int stopping;               /* qlock */
	uint64_t jobs, jobs_nowait; /* jobs taken, of which without sleeping first (qlock) */
	int done_efd;
	int epfd;
	struct tb_fconn *conns;     /* reader-owned list */
	struct tb_fconn *graveyard; /* dead connections, freed after each event batch */
	size_t nconns;
	pthread_t *workers;
};

static void tb_usage(FILE *f)
{
	fprintf(f,
		"usage: tb-front --listen ADDR:PORT --backend ADDR:PORT --truth FILE\n"
		"                [--stats FILE] [--cache-kb N] [--backend-mode per-request|pool:N|mux:N]\n"
		"                [--workers N] [--max-conns N]\n"
		"\n"
		"  --listen ADDR:PORT    IPv4 address and TCP port (port 0: any; the bound\n"
		"                        address is printed as 'listening ADDR:PORT')\n"
		"  --backend ADDR:PORT   the tb-back storage tier\n"
		"  --truth FILE          ground-truth CSV (ce,requests,cpu_ns,rx_bytes,tx_bytes)\n"
		"  --stats FILE          per-CE CSV (%s)\n"
		"  --cache-kb N          LRU cache size in KB (default 300)\n"
		"  --backend-mode M      per-request: a new back-end connection per miss\n"
		"                        (default); pool:N: N persistent connections shared\n"
		"                        by all clients (N <= %d); mux:N: one persistent\n"
		"                        connection shared by all clients, up to N requests\n"
		"                        in flight on it, its replies read back by one reader\n"
		"                        thread (N <= %d; its CPU is in the truth)\n"
		"  --workers N           0 (default): one thread per client connection does\n"
		"                        everything; N > 0: the main thread reads requests and\n"
		"                        hands them to N worker threads (N <= %d)\n"
		"  --max-conns N         client connections at once (default %d, max %d)\n"
		"  -h, --help            this help\n"
		"\n"
		"protocol: 'GET <ce> <addr> <size_kb> <cpu_us>\\n' -> burns cpu_us of CPU, then\n"
		"size_kb * 1024 bytes 'OK <n>\\n', the address's data byte, '\\n', from the cache\n"
		"or the back-end; errors get 'ERR <reason>\\n'. 'PUT' (same fields) writes the\n"
		"object through to the back-end ('STORE'), caches it and answers the same.\n"
		"Files are rewritten every second\n"
		"and on SIGTERM/SIGINT. At the end it prints 'cache hits=.. misses=.. hit_rate=..\n"
		"evictions=.. entries=.. used_kb=..' and, with workers, 'workers jobs=..\n"
		"taken_without_waiting=..' (requests a worker took from the queue without\n"
		"having slept: hand-offs that no wake-up shows).\n",
		TB_FRONT_STATS_HEADER, TB_FRONT_POOL_MAX, TB_MUX_INFLIGHT_MAX, TB_FRONT_WORKERS_MAX, TB_FRONT_CONNS_DEFAULT,
		TB_FRONT_CONNS_MAX);
}

/* ---- per-CE stats ---- */

static struct tb_fstat *tb_stat_find(struct tb_front *f, const char *ce)
{
	size_t n = __atomic_load_n(&f->nstats, __ATOMIC_ACQUIRE), i;

	for (i = 0; i < n; i++)
		if (strcmp(f->stats[i].ce, ce) == 0)
			return &f->stats[i];
	return NULL;
}

/* Adds to ce's counters (creating its row under the lock). RM_OK or RM_EFULL. */
static int tb_stat_add(struct tb_front *f, const char *ce, uint64_t req, uint64_t hit, uint64_t miss,
		       uint64_t err)
{
	struct tb_fstat *s = tb_stat_find(f, ce);

	if (!s) {
		pthread_mutex_lock(&f->lock);
		s = tb_stat_find(f, ce);
		if (!s) {
			if (f->nstats == TB_FRONT_MAX_CES) {
				pthread_mutex_unlock(&f->lock);
				return RM_EFULL;
			}
			s = &f->stats[f->nstats];
			snprintf(s->ce, sizeof(s->ce), "%s", ce);
			__atomic_store_n(&f->nstats, f->nstats + 1, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&f->lock);
	}
	__atomic_fetch_add(&s->requests, req, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->hits, hit, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->misses, miss, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->be_errors, err, __ATOMIC_RELAXED);
	return RM_OK;
}

static int tb_stat_cmp(const void *a, const void *b)
{
	return strcmp(((const struct tb_fstat *)a)->ce, ((const struct tb_fstat *)b)->ce);
}

static int tb_stats_write(struct tb_front *f)
{
	struct tb_fstat *snap;
	char tmp[4096];
	size_t n, i;
	FILE *out;
	int ok;

	if (!f->stats_path)
		return RM_OK;
	snap = malloc(TB_FRONT_MAX_CES * sizeof(*snap));
	if (!snap)
		return RM_ENOMEM;
	n = __atomic_load_n(&f->nstats, __ATOMIC_ACQUIRE);
	for (i = 0; i < n; i++) {
		const struct tb_fstat *r = &f->stats[i];

		memcpy(snap[i].ce, r->ce, sizeof(snap[i].ce));
		snap[i].requests = __atomic_load_n(&r->requests, __ATOMIC_RELAXED);
		snap[i].hits = __atomic_load_n(&r->hits, __ATOMIC_RELAXED);
		snap[i].misses = __atomic_load_n(&r->misses, __ATOMIC_RELAXED);
		snap[i].be_errors = __atomic_load_n(&r->be_errors, __ATOMIC_RELAXED);
	}
	qsort(snap, n, sizeof(*snap), tb_stat_cmp);
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", f->stats_path, (long)getpid()) >= sizeof(tmp)) {
		rm_log_error("stats path '%s' is too long", f->stats_path);
		free(snap);
		return RM_EINVAL;
	}
	out = fopen(tmp, "w");
	if (!out) {
		rm_log_error("failed to open '%s': %s", tmp, strerror(errno));
		free(snap);
		return RM_EIO;
	}
	ok = fprintf(out, "%s\n", TB_FRONT_STATS_HEADER) > 0;
	for (i = 0; ok && i < n; i++)
		ok = fprintf(out, "%s,%llu,%llu,%llu,%llu\n", snap[i].ce,
			     (unsigned long long)snap[i].requests, (unsigned long long)snap[i].hits,
			     (unsigned long long)snap[i].misses, (unsigned long long)snap[i].be_errors) > 0;
	free(snap);
	if (fclose(out) != 0)
		ok = 0;
	if (!ok || rename(tmp, f->stats_path) != 0) {
		rm_log_error("failed to write '%s': %s", f->stats_path, strerror(errno));
		unlink(tmp);
		return RM_EIO;
	}
	return RM_OK;
}

static int tb_front_write(struct tb_front *f)
{
	int rv = RM_OK;

	if (tb_truth_write(&f->truth, f->truth_path) != RM_OK)
		rv = RM_EIO;
	if (tb_stats_write(f) != RM_OK)
		rv = RM_EIO;
	return rv;
}

static void tb_front_tick(void *arg)
{
	if (tb_front_write(arg) != RM_OK)
		rm_log_warn("failed to write the truth or stats file");
}

/* ---- back-end connections ---- */

/* "per-request", "pool:N" or "mux:N" (*mux set). */
static int tb_parse_mode(const char *s, size_t *pool_n, int *mux)
{
	uint64_t n;

	*mux = 0;
	if (strcmp(s, "per-request") == 0) {
		*pool_n = 0;
		return RM_OK;
	}
	if (strncmp(s, "mux:", 4) == 0 && tb_parse_u64(s + 4, 1, TB_MUX_INFLIGHT_MAX, &n) == RM_OK) {
		*pool_n = (size_t)n;
		*mux = 1;
		return RM_OK;
	}
	if (strncmp(s, "pool:", 5) != 0 || tb_parse_u64(s + 5, 1, TB_FRONT_POOL_MAX, &n) != RM_OK)
		return RM_EINVAL;
	*pool_n = (size_t)n;
	return RM_OK;
}

static int tb_pool_init(struct tb_pool *p, const struct sockaddr_in *addr, size_t n)
{
	size_t i;

	memset(p, 0, sizeof(*p));
	p->addr = *addr;
	p->n = n;
	if (pthread_mutex_init(&p->lock, NULL) != 0)
		return RM_ENOMEM;
	if (pthread_cond_init(&p->cond, NULL) != 0) {
		pthread_mutex_destroy(&p->lock);
		return RM_ENOMEM;
	}
	if (n) {
		p->fds = malloc(n * sizeof(*p->fds));
		p->busy = calloc(n, sizeof(*p->busy));
		if (!p->fds || !p->busy) {
			free(p->fds);
			free(p->busy);
			pthread_cond_destroy(&p->cond);
			pthread_mutex_destroy(&p->lock);
			return RM_ENOMEM;
		}
		for (i = 0; i < n; i++)
			p->fds[i] = -1;
	}
	return RM_OK;
}

static void tb_pool_release(struct tb_pool *p)
{
	size_t i;

	tb_mux_close(p->mux);
	for (i = 0; i < p->n; i++)
		if (p->fds[i] >= 0)
			close(p->fds[i]);
	free(p->fds);
	free(p->busy);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
}

/* One FETCH exchange on fd. RM_OK, RM_ENOENT (back-end said ERR), RM_ECLOSED, RM_EPROTO. */
static int tb_back_exchange(int fd, const struct tb_tier_req *get, char *buf, size_t cap, size_t *len,
			    char *err, size_t errcap)
{
	struct tb_tier_req fr = *get;
	char line[TB_LINE_MAX];
	size_t ll;

	fr.cmd = get->cmd == TB_CMD_PUT ? TB_CMD_STORE : TB_CMD_FETCH;
	fr.cpu_us = 0;
	ll = tb_tier_format(line, sizeof(line), &fr);
	if (ll == 0)
		return RM_EINVAL;
	if (tb_tier_send(fd, line, ll, NULL, NULL) != RM_OK)
		return RM_ECLOSED;
	return tb_tier_recv_reply(fd, get->addr, get->size_kb, buf, cap, len, err, errcap, NULL);
}

/*
 * Fetches get's object from the back-end into buf. Per request: connect,
 * exchange, close. Pooled: take a free connection (waiting for one if all
 * are busy; connecting it if needed), exchange, give it back; a connection
 * that failed is closed, and a failure on a reused connection is retried
 * once on a fresh one. Returns RM_OK or an error (logged at debug level).
 */
static int tb_back_fetch(struct tb_pool *p, const struct tb_tier_req *get, char *buf, size_t cap,
			 size_t *len)
{
	char err[96] = "";
	size_t i, slot = 0;
	int rv, fd, attempt;

	if (p->mux) {
		struct tb_tier_req fr = *get;

		fr.cmd = get->cmd == TB_CMD_PUT ? TB_CMD_STORE : TB_CMD_FETCH;
		fr.cpu_us = 0;
		rv = tb_mux_fetch(p->mux, &fr, buf, cap, len);
		if (rv != RM_OK)
			rm_log_debug("back-end fetch failed: %s", rm_strerror(rv));
		return rv;
	}
	if (p->n == 0) {
		fd = tb_tier_connect(&p->addr, TB_FRONT_BACK_TIMEOUT_S);
		if (fd < 0) {
			rm_log_debug("failed to connect to the back-end: %s", strerror(errno));
			return RM_ECLOSED;
		}
		rv = tb_back_exchange(fd, get, buf, cap, len, err, sizeof(err));
		close(fd);
		if (rv == RM_ENOENT)
			rm_log_debug("back-end said '%s'", err);
		return rv;
	}
	pthread_mutex_lock(&p->lock);
	for (;;) {
		for (i = 0; i < p->n; i++)
			if (!p->busy[i])
				break;
		if (i < p->n)
			break;
		pthread_cond_wait(&p->cond, &p->lock);
	}
	slot = i;
	p->busy[slot] = 1;
	fd = p->fds[slot];
	pthread_mutex_unlock(&p->lock);

	rv = RM_ECLOSED;
	for (attempt = 0; attempt < 2; attempt++) {
		int reused = fd >= 0;

		if (fd < 0) {
			fd = tb_tier_connect(&p->addr, TB_FRONT_BACK_TIMEOUT_S);
			if (fd < 0) {
				rm_log_debug("failed to connect to the back-end: %s", strerror(errno));
				rv = RM_ECLOSED;
				break;
			}
		}
		rv = tb_back_exchange(fd, get, buf, cap, len, err, sizeof(err));
		if (rv == RM_OK || rv == RM_ENOENT)
			break;
		close(fd);
		fd = -1;
		if (!reused)
			break;
	}
	if (rv == RM_ENOENT)
		rm_log_debug("back-end said '%s'", err);
	pthread_mutex_lock(&p->lock);
	p->fds[slot] = fd;
	p->busy[slot] = 0;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return rv;
}

/* ---- serving a request ---- */

/*
 * The work of one parsed GET or PUT on the client socket fd: processing CPU,
 * cache lookup (GET) and back-end fetch on a miss, or store (PUT), reply. Sets *t1 to the thread CPU time
 * right after the reply's first send (or now, if nothing was sent), *tx to
 * the reply bytes sent. Returns 0 if the connection is still usable, -1 if
 * not.
 */
static int tb_front_work(struct tb_front *f, int fd, const struct tb_tier_req *req, uint64_t *t1,
			 uint64_t *tx)
{
	volatile uint64_t sink;
	uint32_t total = tb_tier_reply_bytes(req->size_kb);
	uint64_t hit = 0, miss = 0, err = 0;
	char *buf;
	size_t len = 0;
	int rv;

	sink = tb_burn_cpu(req->cpu_us);
	(void)sink;
	buf = malloc(total);
	if (!buf) {
		*t1 = tb_thread_cpu_ns();
		return tb_lsrv_send_err(fd, "out of memory");
	}
	/* A PUT always goes through to the back-end (write-through), then is cached. */
	if (req->cmd == TB_CMD_GET && tb_cache_get(&f->cache, req->addr, req->size_kb, buf, total, &len) == RM_OK) {
		hit = 1;
	} else {
		miss = 1;
		rv = tb_back_fetch(&f->pool, req, buf, total, &len);
		if (rv == RM_OK) {
			rv = tb_cache_put(&f->cache, req->addr, req->size_kb, buf, len);
			if (rv != RM_OK && rv != RM_EFULL)
				rm_log_warn("failed to cache object %u: %s", req->addr, rm_strerror(rv));
		} else {
			err = 1;
		}
	}
	if (tb_stat_add(f, req->ce, 1, hit, miss, err) != RM_OK)
		rm_log_warn("failed to count a request of '%s'", req->ce);
	if (err) {
		char line[64];
		size_t ll = (size_t)snprintf(line, sizeof(line), "ERR backend unavailable\n");

		free(buf);
		*t1 = tb_thread_cpu_ns();
		return tb_tier_send(fd, line, ll, tx, t1) == RM_OK ? 0 : -1;
	}
	*t1 = tb_thread_cpu_ns();
	rv = tb_tier_send(fd, buf, len, tx, t1);
	free(buf);
	return rv == RM_OK ? 0 : -1;
}

static int tb_front_bad(struct tb_front *f, int fd, const char *reason)
{
	__atomic_fetch_add(&f->malformed, 1, __ATOMIC_RELAXED);
	return tb_lsrv_send_err(fd, reason);
}

/* Parses a line and reserves its CE; on failure answers ERR and returns its result (0/-1) in *keep. */
static int tb_front_accept_line(struct tb_front *f, int fd, const char *line, size_t len,
				struct tb_tier_req *req, int *keep)
{
	const char *reason;
	int rv;

	if (tb_tier_parse(TB_CMD_GET, line, len, req, &reason) != RM_OK) {
		*keep = tb_front_bad(f, fd, reason);
		return RM_EPROTO;
	}
	rv = tb_truth_add(&f->truth, req->ce, 0, 0, 0, 0);
	if (rv == RM_OK)
		rv = tb_stat_add(f, req->ce, 0, 0, 0, 0);
	if (rv != RM_OK) {
		*keep = tb_front_bad(f, fd, rv == RM_EFULL ? "too many ces" : "internal error");
		return rv;
	}
	return RM_OK;
}

/* Variant a/b: the connection thread does everything. */
static int tb_front_serve(void *arg, int fd, const char *line, size_t len, uint64_t t0,
			  struct tb_lsrv_tail *tail)
{
	struct tb_front *f = arg;
	struct tb_tier_req req;
	uint64_t t1 = 0, tx = 0;
	int keep = 0, rv;

	if (tb_front_accept_line(f, fd, line, len, &req, &keep) != RM_OK)
		return keep;
	rv = tb_front_work(f, fd, &req, &t1, &tx);
	/* Served either way: the CPU was spent on behalf of req.ce. */
	if (tb_truth_add(&f->truth, req.ce, 1, t1 - t0, len + 1, tx) != RM_OK)
		rm_log_warn("failed to record a request of '%s'", req.ce);
	tb_lsrv_tail_open(tail, req.ce, t1);
	return rv;
}

static void tb_front_tail(void *arg, const char *ce, uint64_t cpu_ns)
{
	struct tb_front *f = arg;

	if (tb_truth_add(&f->truth, ce, 0, cpu_ns, 0, 0) != RM_OK)
		rm_log_warn("failed to record a request of '%s'", ce);
}

static int tb_front_too_long(void *arg, int fd)
{
	return tb_front_bad(arg, fd, "line too long");
}

/* ---- variant c: reader (main thread) and workers ---- */

static void *tb_worker_main(void *arg)
{
	struct tb_front *f = arg;
	uint64_t one = 1;

	/*
	 * A job's truth: the worker's CPU from its wake-up for the job (or, when
	 * it took the job without waiting, from the end of its previous job) to
	 * the end of the completion hand-off that gives the connection back to
	 * the reader. That is what the job costs the worker: picking it up, the
	 * work, the reply and the hand-off. Left out: going back to the queue
	 * after the hand-off until the worker waits (nothing of any request), and
	 * the inside of pthread_cond_wait around the sleep (a few syscall
	 * instructions the thread's clock cannot split between entering the wait
	 * and leaving it).
	 */
	for (;;) {
		struct tb_job *j;
		uint64_t t0, t1 = 0, tx = 0;
		int rv, waited = 0;

		pthread_mutex_lock(&f->qlock);
		t0 = tb_thread_cpu_ns(); /* no wait: the previous job ended here */
		while (!f->qhead && !f->stopping) {
			pthread_cond_wait(&f->qcond, &f->qlock);
			t0 = tb_thread_cpu_ns(); /* woken for a job */
			waited = 1;
		}
		j = f->qhead;
		if (j) {
			f->qhead = j->next;
			if (!f->qhead)
				f->qtail = NULL;
			f->jobs++;
			f->jobs_nowait += !waited;
		}
		pthread_mutex_unlock(&f->qlock);
		if (!j)
			break; /* stopping and the queue is empty */
		rv = tb_front_work(f, j->conn->fd, &j->req, &t1, &tx);
		pthread_mutex_lock(&f->qlock);
		if (rv != 0)
			j->conn->broken = 1;
		j->conn->done_next = f->done;
		f->done = j->conn;
		pthread_mutex_unlock(&f->qlock);
		if (write(f->done_efd, &one, sizeof(one)) != sizeof(one))
			rm_log_warn("failed to signal a finished request: %s", strerror(errno));
		t1 = tb_thread_cpu_ns();
		if (tb_truth_add(&f->truth, j->req.ce, 1, t1 - t0, j->line_len + 1, tx) != RM_OK)
			rm_log_warn("failed to record a request of '%s'", j->req.ce);
		free(j);
	}
	return NULL;
}

static void tb_conn_epoll(struct tb_front *f, struct tb_fconn *c, int on)
{
	struct epoll_event ev;

	if (on == c->in_epoll)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | EPOLLRDHUP;
	ev.data.ptr = c;
	if (epoll_ctl(f->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, c->fd, &ev) != 0) {
		rm_log_warn("failed to %s a connection: %s", on ? "watch" : "unwatch", strerror(errno));
		if (on)
			c->closed = 1; /* cannot watch it: drop it */
		return;
	}
	c->in_epoll = on;
}

/*
 * Once c is closed and has no job: closes its socket and moves it to the
 * graveyard, freed by tb_conns_bury() after the current batch of events
 * (a later event of the batch may still point at it). Reader only.
 */
static void tb_conn_maybe_free(struct tb_front *f, struct tb_fconn *c)
{
	if (!c->closed || c->busy || c->dead)
		return;
	tb_conn_epoll(f, c, 0);
	close(c->fd);
	c->fd = -1;
	if (c->prev)
		c->prev->next = c->next;
	else
		f->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	f->nconns--;
	c->dead = 1;
	c->prev = NULL;
	c->next = f->graveyard;
	f->graveyard = c;
}

static void tb_conns_bury(struct tb_front *f)
{
	while (f->graveyard) {
		struct tb_fconn *c = f->graveyard;

		f->graveyard = c->next;
		free(c);
	}
}

/*
 * Hands the complete lines buffered on c to the workers, one at a time: at
 * most one job per connection is in flight, so replies keep their order.
 * t0 is the reader's CPU time right after the recv that brought the bytes.
 */
static void tb_conn_lines(struct tb_front *f, struct tb_fconn *c, uint64_t t0)
{
	while (!c->busy && !c->closed) {
		char *nl = memchr(c->buf, '\n', c->have);
		struct tb_tier_req req;
		struct tb_job *j;
		size_t len;
		int keep = 0;

		if (!nl) {
			if (c->have == sizeof(c->buf)) {
				if (!c->discarding && tb_front_too_long(f, c->fd) != 0)
					c->closed = 1;
				c->discarding = 1;
				c->have = 0;
			}
			return;
		}
		len = (size_t)(nl - c->buf);
		if (c->discarding) {
			c->discarding = 0;
		} else if (tb_front_accept_line(f, c->fd, c->buf, len, &req, &keep) != RM_OK) {
			if (keep != 0)
				c->closed = 1;
		} else if (!(j = calloc(1, sizeof(*j)))) {
			if (tb_front_bad(f, c->fd, "out of memory") != 0)
				c->closed = 1;
		} else {
			uint64_t t_end;

			j->conn = c;
			j->req = req;
			j->line_len = len;
			c->busy = 1;
			memcpy(c->ce, req.ce, sizeof(c->ce));
			/* Not watched while a worker owns the reply. */
			tb_conn_epoll(f, c, 0);
			pthread_mutex_lock(&f->qlock);
			if (f->qtail)
				f->qtail->next = j;
			else
				f->qhead = j;
			f->qtail = j;
			pthread_cond_signal(&f->qcond);
			pthread_mutex_unlock(&f->qlock);
			/* The reader's part of this request ends with the hand-off. */
			t_end = tb_thread_cpu_ns();
			if (tb_truth_add(&f->truth, req.ce, 0, t_end - t0, 0, 0) != RM_OK)
				rm_log_warn("failed to record a request of '%s'", req.ce);
		}
		c->have -= len + 1;
		memmove(c->buf, nl + 1, c->have);
		t0 = tb_thread_cpu_ns(); /* a pipelined line starts now */
	}
}

/*
 * Reads what c has; a complete request line is the request's, its truth
 * from t0 (the thread's CPU clock where the reader began on it: right
 * before the wait that returned it, or right before this recv) on. Reader
 * only.
 */
static void tb_conn_readable(struct tb_front *f, struct tb_fconn *c, uint64_t t0)
{
	ssize_t n;

	if (c->busy || c->closed || c->dead)
		return;
	if (c->have == sizeof(c->buf)) { /* cannot happen: lines() empties a full buffer */
		c->closed = 1;
		tb_conn_maybe_free(f, c);
		return;
	}
	n = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, MSG_DONTWAIT);
	if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n <= 0) {
		c->closed = 1;
		tb_conn_maybe_free(f, c);
		return;
	}
	c->have += (size_t)n;
	tb_conn_lines(f, c, t0);
	tb_conn_maybe_free(f, c);
}

/*
 * Takes back the connections whose job finished (reader): each one's truth
 * from t0 (the first: right before the reader's wait, which the finished
 * job's hand-off woke) to its being watched again. Copies the CE of the last
 * one taken back into last_ce (NUL if none) when last_ce is not NULL.
 */
static void tb_conns_done(struct tb_front *f, uint64_t t0, char *last_ce, size_t ce_size)
{
	struct tb_fconn *list, *c;
	uint64_t cnt;

	if (last_ce)
		last_ce[0] = '\0';

	if (read(f->done_efd, &cnt, sizeof(cnt)) != sizeof(cnt) && errno != EAGAIN)
		rm_log_debug("short eventfd read");
	pthread_mutex_lock(&f->qlock);
	list = f->done;
	f->done = NULL;
	pthread_mutex_unlock(&f->qlock);
	while ((c = list) != NULL) {
		uint64_t t1;
		int broken;

		list = c->done_next;
		pthread_mutex_lock(&f->qlock);
		broken = c->broken;
		pthread_mutex_unlock(&f->qlock);
		c->busy = 0;
		if (broken)
			c->closed = 1;
		/* Taking the connection back is the finished request's work. */
		if (!c->closed && c->have < sizeof(c->buf) && !memchr(c->buf, '\n', c->have)) {
			tb_conn_epoll(f, c, 1);
			t1 = tb_thread_cpu_ns();
			if (tb_truth_add(&f->truth, c->ce, 0, t1 - t0, 0, 0) != RM_OK)
				rm_log_warn("failed to record a request of '%s'", c->ce);
			if (last_ce)
				snprintf(last_ce, ce_size, "%s", c->ce);
		} else if (!c->closed) {
			tb_conn_lines(f, c, tb_thread_cpu_ns()); /* a pipelined request */
			if (!c->busy && !c->closed)
				tb_conn_epoll(f, c, 1);
		}
		tb_conn_maybe_free(f, c);
		t0 = tb_thread_cpu_ns();
	}
}

static void tb_conn_accept(struct tb_front *f, int lfd)
{
	struct tb_fconn *c;
	int fd, one = 1;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			rm_log_warn("failed to accept: %s", strerror(errno));
			usleep(100000);
		}
		return;
	}
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
		rm_log_debug("failed to set TCP_NODELAY: %s", strerror(errno));
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->next = f->conns;
	if (f->conns)
		f->conns->prev = c;
	f->conns = c;
	f->nconns++;
	tb_conn_epoll(f, c, 1);
	tb_conn_maybe_free(f, c);
}

/* The reader/acceptor loop of variant c; returns at a signal. */
static int tb_reader_loop(struct tb_front *f, int lfd, int sfd)
{
	struct epoll_event ev;
	uint64_t next_tick = tb_mono_ns() + 1000000000ull;
	static int tag_sig, tag_lfd, tag_done;
	char tail_ce[sizeof(((struct tb_fconn *)0)->ce)] = "";
	uint64_t tail_t0 = 0;
	int accepting = 1;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.ptr = &tag_sig;
	if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, sfd, &ev) != 0)
		goto fail;
	ev.data.ptr = &tag_lfd;
	if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, lfd, &ev) != 0)
		goto fail;
	ev.data.ptr = &tag_done;
	if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->done_efd, &ev) != 0)
		goto fail;
	for (;;) {
		struct epoll_event evs[64];
		uint64_t now = tb_mono_ns(), mark;
		int n, i, timeout, fresh;

		/* A taken-back request's truth runs on until the reader waits again. */
		if (tail_ce[0]) {
			if (tb_truth_add(&f->truth, tail_ce, 0, tb_thread_cpu_ns() - tail_t0, 0, 0) != RM_OK)
				rm_log_warn("failed to record a request of '%s'", tail_ce);
			tail_ce[0] = '\0';
		}
		if (now >= next_tick) {
			tb_front_tick(f);
			next_tick = now + 1000000000ull;
		}
		/* At the connection limit, leave new clients in the backlog. */
		if (accepting != (f->nconns < f->max_conns)) {
			accepting = !accepting;
			ev.events = EPOLLIN;
			ev.data.ptr = &tag_lfd;
			if (epoll_ctl(f->epfd, accepting ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, lfd, &ev) != 0)
				goto fail;
		}
		timeout = (int)((next_tick - now) / 1000000ull) + 1;
		/*
		 * The reader's CPU in the wait and after it is the work of what
		 * woke it: the head of the first request it reads, or the taking
		 * back of the requests whose hand-off woke it (on to its next read,
		 * or to its next wait). The wait is counted whole to what it
		 * returns, as a connection thread's blocking recv is counted to the
		 * request it returns (tb_lsrv.h): being woken and returning the
		 * events is the head of that work, and the thread's clock cannot
		 * split the call at the sleep (about 10 us of CPU a wait here).
		 */
		mark = tb_thread_cpu_ns();
		n = epoll_wait(f->epfd, evs, 64, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		fresh = 1;
		for (i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == &tag_sig) {
				struct signalfd_siginfo si;

				if (read(sfd, &si, sizeof(si)) == sizeof(si))
					rm_log_info("got signal %u, stopping", si.ssi_signo);
				return RM_OK;
			}
			if (p == &tag_lfd) {
				if (accepting)
					tb_conn_accept(f, lfd);
			} else if (p == &tag_done) {
				char last[sizeof(tail_ce)];

				tb_conns_done(f, fresh ? mark : tb_thread_cpu_ns(), last, sizeof(last));
				if (last[0]) {
					memcpy(tail_ce, last, sizeof(tail_ce));
					tail_t0 = tb_thread_cpu_ns();
				}
				fresh = 0;
			} else {
				uint64_t t0;

				if (tail_ce[0]) { /* a read ends the taking back */
					t0 = tb_thread_cpu_ns();
					if (tb_truth_add(&f->truth, tail_ce, 0, t0 - tail_t0, 0, 0) != RM_OK)
						rm_log_warn("failed to record a request of '%s'", tail_ce);
					tail_ce[0] = '\0';
				} else {
					t0 = fresh ? mark : tb_thread_cpu_ns();
				}
				fresh = 0;
				/* may be dead already: freed only after the batch */
				tb_conn_readable(f, p, t0);
			}
		}
		tb_conns_bury(f);
	}
fail:
	rm_log_error("failed to wait for clients: %s", strerror(errno));
	return RM_EIO;
}

/*
 * Runs variant c: starts the workers, reads until a signal, then lets the
 * workers drain the queue, joins them and closes every connection.
 */
static int tb_front_run_workers(struct tb_front *f, int lfd, int sfd)
{
	size_t i, started = 0;
	int rv = RM_OK, e;

	f->epfd = epoll_create1(EPOLL_CLOEXEC);
	f->done_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	f->workers = calloc(f->nworkers, sizeof(*f->workers));
	if (f->epfd < 0 || f->done_efd < 0 || !f->workers ||
	    pthread_mutex_init(&f->qlock, NULL) != 0 || pthread_cond_init(&f->qcond, NULL) != 0) {
		rm_log_error("failed to set up the worker pool: %s", strerror(errno));
		return RM_ENOMEM;
	}
	for (i = 0; i < f->nworkers; i++) {
		e = pthread_create(&f->workers[i], NULL, tb_worker_main, f);
		if (e != 0) {
			rm_log_error("failed to start worker %zu: %s", i, strerror(e));
			rv = RM_ENOMEM;
			break;
		}
		started++;
	}
	if (rv == RM_OK)
		rv = tb_reader_loop(f, lfd, sfd);
	pthread_mutex_lock(&f->qlock);
	f->stopping = 1;
	pthread_cond_broadcast(&f->qcond);
	pthread_mutex_unlock(&f->qlock);
	for (i = 0; i < started; i++)
		pthread_join(f->workers[i], NULL);
	/* Every job is done: take the connections back and close them all. */
	tb_conns_done(f, tb_thread_cpu_ns(), NULL, 0);
	while (f->conns) {
		struct tb_fconn *c = f->conns;

		c->closed = 1;
		c->busy = 0;
		tb_conn_maybe_free(f, c);
	}
	tb_conns_bury(f);
	tb_front_tick(f);
	/* How often a worker found a request waiting and took it without being
	 * woken for it: a hand-off that no wake-up shows. */
	printf("workers jobs=%llu taken_without_waiting=%llu\n", (unsigned long long)f->jobs,
	       (unsigned long long)f->jobs_nowait);
	free(f->workers);
	close(f->epfd);
	close(f->done_efd);
	pthread_cond_destroy(&f->qcond);
	pthread_mutex_destroy(&f->qlock);
	return rv;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "backend", required_argument, NULL, 'b' },
		{ "truth", required_argument, NULL, 't' },
		{ "stats", required_argument, NULL, 's' },
		{ "cache-kb", required_argument, NULL, 'k' },
		{ "backend-mode", required_argument, NULL, 'm' },
		{ "workers", required_argument, NULL, 'w' },
		{ "max-conns", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct tb_front f;
	struct tb_lsrv_cfg cfg;
	struct sockaddr_in addr, back;
	struct tb_cache_stats cs;
	const char *listen_s = NULL, *back_s = NULL;
	uint64_t cache_kb = 300, workers = 0, conns = TB_FRONT_CONNS_DEFAULT;
	size_t pool_n = 0;
	int mux = 0, c, lfd, sfd, rv, ret = 0;

	rm_log_init("tb-front");
	memset(&f, 0, sizeof(f));
	f.epfd = f.done_efd = -1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			listen_s = optarg;
			break;
		case 'b':
			back_s = optarg;
			break;
		case 't':
			f.truth_path = optarg;
			break;
		case 's':
			f.stats_path = optarg;
			break;
		case 'k':
			if (tb_parse_u64(optarg, 1, 1024 * 1024, &cache_kb) != RM_OK) {
				rm_log_error("bad --cache-kb '%s': expected 1..1048576", optarg);
				return 2;
			}
			break;
		case 'm':
			if (tb_parse_mode(optarg, &pool_n, &mux) != RM_OK) {
				rm_log_error("bad --backend-mode '%s': expected per-request, pool:N (N 1..%d) or "
					     "mux:N (N 1..%d)", optarg, TB_FRONT_POOL_MAX, TB_MUX_INFLIGHT_MAX);
				return 2;
			}
			break;
		case 'w':
			if (tb_parse_u64(optarg, 0, TB_FRONT_WORKERS_MAX, &workers) != RM_OK) {
				rm_log_error("bad --workers '%s': expected 0..%d", optarg, TB_FRONT_WORKERS_MAX);
				return 2;
			}
			break;
		case 'c':
			if (tb_parse_u64(optarg, 1, TB_FRONT_CONNS_MAX, &conns) != RM_OK) {
				rm_log_error("bad --max-conns '%s': expected 1..%d", optarg, TB_FRONT_CONNS_MAX);
				return 2;
			}
			break;
		default:
			return tb_cli_other(c, argv, "tb-front", tb_usage);
		}
	}
	if (tb_cli_extra_args(argc, argv, tb_usage))
		return 2;
	if (!listen_s || !back_s || !f.truth_path) {
		rm_log_error("--listen, --backend and --truth are required");
		tb_usage(stderr);
		return 2;
	}
	if (tb_parse_addr(listen_s, 0, &addr) != RM_OK) {
		rm_log_error("bad --listen '%s': expected IPV4:PORT", listen_s);
		return 2;
	}
	if (tb_parse_addr(back_s, 0, &back) != RM_OK || back.sin_port == 0) {
		rm_log_error("bad --backend '%s': expected IPV4:PORT", back_s);
		return 2;
	}
	f.max_conns = (size_t)conns;
	f.nworkers = (size_t)workers;

	sfd = tb_cli_signalfd();
	if (sfd < 0)
		return 1;
	f.stats = calloc(TB_FRONT_MAX_CES, sizeof(*f.stats));
	if (!f.stats || pthread_mutex_init(&f.lock, NULL) != 0 ||
	    tb_truth_init(&f.truth, TB_FRONT_MAX_CES) != RM_OK ||
	    tb_cache_init(&f.cache, (size_t)cache_kb * 1024) != RM_OK ||
	    tb_pool_init(&f.pool, &back, mux ? 0 : pool_n) != RM_OK ||
	    (mux && tb_mux_open(&f.pool.mux, &back, pool_n, &f.truth) != RM_OK)) {
		rm_log_error("failed to initialise the front-end");
		return 1;
	}
	/* The files exist (empty) from the start, so readers can poll for them. */
	if (tb_front_write(&f) != RM_OK)
		return 1;
	lfd = tb_lsrv_listen(&addr);
	if (lfd < 0)
		return 1;
	rm_log_info("cache %llu KB, back-end %s, %s", (unsigned long long)cache_kb,
		    mux ? "one multiplexed connection" : pool_n ? "pooled connections" : "a connection per request",
		    workers ? "worker pool" : "thread per connection");
	if (workers) {
		rv = tb_front_run_workers(&f, lfd, sfd);
	} else {
		memset(&cfg, 0, sizeof(cfg));
		cfg.serve = tb_front_serve;
		cfg.tail = tb_front_tail;
		cfg.truth_head = 1;
		cfg.too_long = tb_front_too_long;
		cfg.tick = tb_front_tick;
		cfg.arg = &f;
		cfg.max_conns = f.max_conns;
		rv = tb_lsrv_run(&cfg, lfd, sfd);
	}
	close(lfd);
	if (tb_front_write(&f) != RM_OK || rv != RM_OK)
		ret = 1;
	tb_cache_stats(&f.cache, &cs);
	printf("cache hits=%llu misses=%llu hit_rate=%.3f evictions=%llu entries=%zu used_kb=%zu\n",
	       (unsigned long long)cs.hits, (unsigned long long)cs.misses,
	       cs.hits + cs.misses ? (double)cs.hits / (double)(cs.hits + cs.misses) : 0.0,
	       (unsigned long long)cs.evictions, cs.nents, cs.used_bytes / 1024);
	fflush(stdout);
	if (f.malformed)
		rm_log_info("answered %llu malformed requests", (unsigned long long)f.malformed);
	tb_pool_release(&f.pool);
	tb_cache_release(&f.cache);
	tb_truth_release(&f.truth);
	pthread_mutex_destroy(&f.lock);
	free(f.stats);
	close(sfd);
	return ret;
}
