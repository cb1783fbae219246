/*
 * col_sender.c - the collector's sender: builds Batches from backend output,
 * keeps the queue of unacknowledged encoded batches (in flight + spool file +
 * memory, oldest first), and runs the one thread that talks to the
 * aggregator over an nng req0 socket, stop-and-wait. Owns the spool file and
 * the dead-letter file; see col_sender.h for the protocol and file format.
 *
 * Socket operations are nng_aio's without nng timeouts, waited for on our own
 * condition variable and cancelled when late or when col_sender_close()
 * asks: nng 1.5.2's timer queue is not relied upon, and the socket is never
 * closed under a thread blocked in it (a known source of nng deadlocks).
 *
 * Locking: `mu` guards the queue, the counters, the pending command ids and
 * `stop`; `submit_mu` serialises col_sender_submit() so seqs are queued in
 * order. File I/O on the spool happens under `mu`, except that the thread
 * reads the head record without it (records before spool_end are immutable
 * and only the thread advances or truncates the head).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "col_enc.h"
#include "col_sender.h"
#include "banned.h"

#define COL_SPOOL_MAGIC "RMSPOOL1"
#define COL_SPOOL_HDR 16u
#define COL_REC_HDR 8u
#define COL_BACKOFF_MIN_MS 100
#define COL_BACKOFF_MAX_MS 2000
#define COL_SEEN_CMDS 64

struct col_item {
	struct col_item *next;
	uint8_t *buf;
	size_t len;
};

enum col_cur_loc { COL_CUR_MEM, COL_CUR_SPOOL };

struct col_sender {
	/* configuration, immutable after open */
	char *url, *node, *backend, *hostname, *spool_path, *dead_path;
	uint64_t window_ns;
	int64_t clock_offset_ns;
	uint32_t ncpu;
	size_t mem_limit;
	uint64_t spool_limit;
	int timeout_ms;
	int (*on_command)(void *arg, const Rametr__ThrottleCommand *cmd);
	void (*on_decided)(void *arg, Rametr__ThrottleMatch *const *m, size_t n);
	void *decided_arg;
	void *cmd_arg;
	uint64_t instance;

	nng_socket sock;
	int sock_open;
	nng_aio *aio;              /* the thread's one socket operation */
	pthread_mutex_t amu;
	pthread_cond_t acv;
	int adone;                 /* aio completed (under amu) */
	atomic_int halt;           /* close: abandon the operation in flight */
	pthread_t thread;
	int thread_started;
	atomic_int need_hello;     /* set by nng on every new connection */

	pthread_mutex_t submit_mu;
	pthread_mutex_t mu;
	pthread_cond_t work;       /* queue grew, or stop */
	pthread_cond_t done;       /* a batch left the queue, or stop */
	int stop;

	/* memory part of the queue, oldest first */
	struct col_item *head, *tail;
	size_t mem_bytes, mem_count;

	/* spool part: records [spool_rd, spool_end) are unacked */
	int spool_fd;
	uint64_t spool_rd, spool_end;
	size_t spool_count;

	/* the batch in flight: the oldest of all; thread-owned buffer */
	int cur_valid;
	enum col_cur_loc cur_loc;  /* COL_CUR_SPOOL: it is the record at spool_rd */
	uint8_t *cur_buf;
	size_t cur_len;
	uint64_t cur_off, cur_next, cur_seq;
	int cur_attempts;

	/* commands: ids to acknowledge in the next batch; recently seen ids */
	uint64_t *pending;
	size_t npending, cappending;
	uint64_t seen[COL_SEEN_CMDS];
	unsigned char seen_refused[COL_SEEN_CMDS];
	unsigned nseen;

	struct col_enc enc;        /* encoder scratch (under submit_mu) */
	uint64_t next_seq;
	int down;                  /* the aggregator did not answer the last request */
	int hello_refused;         /* hellos refused in a row (thread only) */
	struct col_sender_stats st;
};

/* ---- CRC-32 (IEEE 802.3, reflected, as zlib's crc32) ---- */

/*
 * Slicing-by-8: eight bytes per step through eight tables (table k: the CRC
 * of a byte followed by k zero bytes). Batches are spooled whenever the
 * aggregator lags, and read back; byte-at-a-time was ~10% of the
 * collector's CPU then.
 */
static uint32_t col_crc_table[8][256];
static pthread_once_t col_crc_once = PTHREAD_ONCE_INIT;

static void col_crc_init(void)
{
	uint32_t c, i, k;

	for (i = 0; i < 256; i++) {
		c = i;
		for (k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		col_crc_table[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (k = 1; k < 8; k++)
			col_crc_table[k][i] = (col_crc_table[k - 1][i] >> 8) ^
					      col_crc_table[0][col_crc_table[k - 1][i] & 0xff];
}

static uint32_t col_crc32(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu, lo, hi;

	pthread_once(&col_crc_once, col_crc_init);
	while (n >= 8) {
		lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			  (uint32_t)p[3] << 24);
		hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
		c = col_crc_table[7][lo & 0xff] ^ col_crc_table[6][(lo >> 8) & 0xff] ^
		    col_crc_table[5][(lo >> 16) & 0xff] ^ col_crc_table[4][lo >> 24] ^
		    col_crc_table[3][hi & 0xff] ^ col_crc_table[2][(hi >> 8) & 0xff] ^
		    col_crc_table[1][(hi >> 16) & 0xff] ^ col_crc_table[0][hi >> 24];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = col_crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

static void col_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t col_get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void col_put_le64(uint8_t *p, uint64_t v)
{
	col_put_le32(p, (uint32_t)v);
	col_put_le32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t col_get_le64(const uint8_t *p)
{
	return (uint64_t)col_get_le32(p) | (uint64_t)col_get_le32(p + 4) << 32;
}

/* ---- file helpers ---- */

static int col_pwrite_all(int fd, const void *buf, size_t n, uint64_t off)
{
	const uint8_t *p = buf;
	ssize_t w;

	while (n > 0) {
		w = pwrite(fd, p, n, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* 0, or -1 with errno (EIO with errno 0 meaning end of file). */
static int col_pread_all(int fd, void *buf, size_t n, uint64_t off)
{
	uint8_t *p = buf;
	ssize_t r;

	while (n > 0) {
		r = pread(fd, p, n, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0) {
			errno = 0;
			return -1;
		}
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static int col_write_header(int fd, uint64_t rd)
{
	uint8_t h[COL_SPOOL_HDR];

	memcpy(h, COL_SPOOL_MAGIC, 8);
	col_put_le64(h + 8, rd);
	return col_pwrite_all(fd, h, sizeof(h), 0);
}

/* Appends one record at *end; on failure cuts the file back to *end. */
static int col_append_record(int fd, uint64_t *end, const uint8_t *buf, size_t len)
{
	uint8_t h[COL_REC_HDR];
	int saved;

	col_put_le32(h, (uint32_t)len);
	col_put_le32(h + 4, col_crc32(buf, len));
	if (col_pwrite_all(fd, h, sizeof(h), *end) != 0 ||
	    col_pwrite_all(fd, buf, len, *end + COL_REC_HDR) != 0) {
		saved = errno;
		if (ftruncate(fd, (off_t)*end) != 0) {
			/* the torn tail is cut at the next open */
		}
		errno = saved;
		return -1;
	}
	*end += COL_REC_HDR + len;
	return 0;
}

/*
 * Reads the record at off (< end): *buf (malloc'd), *len, *next.
 * Returns 0, or -1 if it is torn or corrupt (*why says how).
 */
static int col_read_record(int fd, uint64_t off, uint64_t end, uint8_t **buf, size_t *len,
			   uint64_t *next, const char **why)
{
	uint8_t h[COL_REC_HDR], *b;
	uint32_t n;

	*buf = NULL;
	if (end - off < COL_REC_HDR) {
		*why = "torn record header";
		return -1;
	}
	if (col_pread_all(fd, h, sizeof(h), off) != 0) {
		*why = errno ? strerror(errno) : "unexpected end of file";
		return -1;
	}
	n = col_get_le32(h);
	if (n == 0 || n > RM_WIRE_MAX_MSG) {
		*why = "bad record length";
		return -1;
	}
	if (end - off - COL_REC_HDR < n) {
		*why = "torn record";
		return -1;
	}
	if (!(b = malloc(n))) {
		*why = "out of memory";
		return -1;
	}
	if (col_pread_all(fd, b, n, off + COL_REC_HDR) != 0) {
		*why = errno ? strerror(errno) : "unexpected end of file";
		free(b);
		return -1;
	}
	if (col_crc32(b, n) != col_get_le32(h + 4)) {
		*why = "checksum mismatch";
		free(b);
		return -1;
	}
	*buf = b;
	*len = n;
	*next = off + COL_REC_HDR + n;
	return 0;
}

/* ---- spool ---- */

static uint64_t col_spool_bytes(const struct col_sender *s)
{
	return s->spool_end - s->spool_rd;
}

/*
 * Opens, locks and scans the spool: cuts a torn or corrupt tail, counts the
 * unacked records. Called from open only.
 */
static int col_spool_load(struct col_sender *s)
{
	char bad[4096];
	uint8_t h[COL_SPOOL_HDR], *rec;
	uint64_t off, rd, next, size, last_le_rd;
	size_t len, count;
	const char *why;
	struct stat sb;
	int fd;

again:
	fd = open(s->spool_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		rm_log_error("failed to open spool '%s': %s", s->spool_path, strerror(errno));
		return RM_EIO;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;

		close(fd);
		if (e == EWOULDBLOCK) {
			rm_log_error("spool '%s' is in use by another collector", s->spool_path);
			return RM_EEXIST;
		}
		rm_log_error("failed to lock spool '%s': %s", s->spool_path, strerror(e));
		return RM_EIO;
	}
	if (fstat(fd, &sb) != 0) {
		rm_log_error("failed to stat spool '%s': %s", s->spool_path, strerror(errno));
		close(fd);
		return RM_EIO;
	}
	size = (uint64_t)sb.st_size;
	if (size >= 8 && (col_pread_all(fd, h, 8, 0) != 0 || memcmp(h, COL_SPOOL_MAGIC, 8) != 0)) {
		snprintf(bad, sizeof(bad), "%s.bad", s->spool_path);
		rm_log_warn("spool '%s' is not a rametr spool; moved to '%s'", s->spool_path, bad);
		close(fd);
		if (rename(s->spool_path, bad) != 0) {
			rm_log_error("failed to rename '%s': %s", s->spool_path, strerror(errno));
			return RM_EIO;
		}
		goto again;
	}
	if (size < COL_SPOOL_HDR) {
		if (size > 0)
			rm_log_warn("spool '%s': torn header, starting an empty spool", s->spool_path);
		if (ftruncate(fd, 0) != 0 || col_write_header(fd, COL_SPOOL_HDR) != 0) {
			rm_log_error("failed to write spool '%s': %s", s->spool_path, strerror(errno));
			close(fd);
			return RM_EIO;
		}
		s->spool_fd = fd;
		s->spool_rd = s->spool_end = COL_SPOOL_HDR;
		return RM_OK;
	}
	if (col_pread_all(fd, h, sizeof(h), 0) != 0) {
		rm_log_error("failed to read spool '%s': %s", s->spool_path, strerror(errno));
		close(fd);
		return RM_EIO;
	}
	rd = col_get_le64(h + 8);

	/* scan every record: find the valid end, the record boundary at or before rd */
	off = COL_SPOOL_HDR;
	last_le_rd = COL_SPOOL_HDR;
	count = 0;
	while (off < size) {
		if (col_read_record(fd, off, size, &rec, &len, &next, &why) != 0) {
			rm_log_warn("spool '%s': %s at offset %" PRIu64 ", dropping its last %" PRIu64
				    " bytes",
				    s->spool_path, why, off, size - off);
			if (ftruncate(fd, (off_t)off) != 0) {
				rm_log_error("failed to truncate spool '%s': %s", s->spool_path,
					     strerror(errno));
				free(rec);
				close(fd);
				return RM_EIO;
			}
			size = off;
			break;
		}
		free(rec);
		if (off <= rd)
			last_le_rd = off;
		if (off >= rd)
			count++;
		off = next;
	}
	if (rd < COL_SPOOL_HDR || rd > size || (rd < size && last_le_rd != rd)) {
		uint64_t fixed = rd > size ? size : last_le_rd;

		rm_log_warn("spool '%s': read offset %" PRIu64 " is not a record boundary, resuming "
			    "at %" PRIu64 " (some batches may be sent twice)",
			    s->spool_path, rd, fixed);
		rd = fixed;
		count = 0;
		for (off = COL_SPOOL_HDR; off < size; off = next) {
			if (col_read_record(fd, off, size, &rec, &len, &next, &why) != 0)
				break;
			free(rec);
			if (off >= rd)
				count++;
		}
	}
	if (count == 0) {
		if (ftruncate(fd, COL_SPOOL_HDR) != 0 || col_write_header(fd, COL_SPOOL_HDR) != 0) {
			rm_log_error("failed to write spool '%s': %s", s->spool_path, strerror(errno));
			close(fd);
			return RM_EIO;
		}
		rd = size = COL_SPOOL_HDR;
	} else if (col_write_header(fd, rd) != 0) {
		rm_log_error("failed to write spool '%s': %s", s->spool_path, strerror(errno));
		close(fd);
		return RM_EIO;
	}
	s->spool_fd = fd;
	s->spool_rd = rd;
	s->spool_end = size;
	s->spool_count = count;
	s->st.spool_bytes = col_spool_bytes(s);
	if (count)
		rm_log_info("spool '%s': %zu batches (%" PRIu64 " bytes) left by a previous run",
			    s->spool_path, count, size - rd);
	return RM_OK;
}

/*
 * Appends one batch to the spool. Caller holds mu (or is the only thread).
 * Returns RM_OK, RM_EFULL (no spool, spool_limit reached, disk full) or RM_EIO.
 */
static int col_spool_put(struct col_sender *s, const uint8_t *buf, size_t len)
{
	if (s->spool_fd < 0)
		return RM_EFULL;
	if (s->spool_limit && s->spool_end + COL_REC_HDR + len > s->spool_limit)
		return RM_EFULL;
	if (col_append_record(s->spool_fd, &s->spool_end, buf, len) != 0) {
		int e = errno;

		rm_log_error("failed to write spool '%s': %s", s->spool_path, strerror(e));
		return e == ENOSPC || e == EDQUOT || e == EFBIG ? RM_EFULL : RM_EIO;
	}
	s->spool_count++;
	s->st.spooled++;
	s->st.spool_bytes = col_spool_bytes(s);
	return RM_OK;
}

/*
 * Moves the batch in flight to the spool if only memory holds it, so that
 * what is appended next stays behind it. Caller holds mu.
 */
static int col_spool_cur(struct col_sender *s)
{
	uint64_t off = s->spool_end;
	int rv;

	if (!s->cur_valid || s->cur_loc != COL_CUR_MEM)
		return RM_OK;
	/* a batch taken from memory implies the spool was empty then and since */
	if (s->spool_count != 0 || s->spool_rd != s->spool_end)
		abort();
	if ((rv = col_spool_put(s, s->cur_buf, s->cur_len)) != 0)
		return rv;
	s->cur_loc = COL_CUR_SPOOL;
	s->cur_off = off;
	s->cur_next = s->spool_end;
	return RM_OK;
}

/* Moves the oldest batch in memory to the spool. Caller holds mu. */
static int col_spill_oldest(struct col_sender *s)
{
	struct col_item *it = s->head;
	int rv;

	if (!it)
		return RM_OK;
	if ((rv = col_spool_cur(s)) != 0)
		return rv;
	if ((rv = col_spool_put(s, it->buf, it->len)) != 0)
		return rv;
	s->head = it->next;
	if (!s->head)
		s->tail = NULL;
	s->mem_bytes -= it->len;
	s->mem_count--;
	free(it->buf);
	free(it);
	return RM_OK;
}

/* Drops the spool's head record (acked). Caller holds mu. */
static void col_spool_pop(struct col_sender *s, uint64_t next)
{
	if (s->spool_count == 0 || next > s->spool_end)
		abort();
	s->spool_rd = next;
	s->spool_count--;
	if (s->spool_count == 0) {
		/* drained: back to an empty file */
		if (ftruncate(s->spool_fd, COL_SPOOL_HDR) != 0)
			rm_log_warn("failed to truncate spool '%s': %s", s->spool_path,
				    strerror(errno));
		s->spool_rd = s->spool_end = COL_SPOOL_HDR;
	}
	if (col_write_header(s->spool_fd, s->spool_rd) != 0)
		rm_log_warn("failed to update spool '%s': %s (its batches may be sent twice)",
			    s->spool_path, strerror(errno));
	s->st.spool_bytes = col_spool_bytes(s);
}

/* Appends a refused batch to <spool>.rejected. Called by the thread only. */
static int col_dead_letter(struct col_sender *s, const uint8_t *buf, size_t len)
{
	struct stat sb;
	uint64_t end;
	int fd, rv = RM_OK;

	if (!s->dead_path)
		return RM_ENOENT;
	fd = open(s->dead_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || fstat(fd, &sb) != 0) {
		rm_log_error("failed to open '%s': %s", s->dead_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return RM_EIO;
	}
	end = (uint64_t)sb.st_size;
	if (end < COL_SPOOL_HDR) {
		if (ftruncate(fd, 0) != 0 || col_write_header(fd, COL_SPOOL_HDR) != 0)
			rv = RM_EIO;
		end = COL_SPOOL_HDR;
	}
	if (rv == RM_OK && col_append_record(fd, &end, buf, len) != 0)
		rv = RM_EIO;
	if (rv == RM_OK && fdatasync(fd) != 0)
		rv = RM_EIO;
	if (rv != RM_OK)
		rm_log_error("failed to write '%s': %s", s->dead_path, strerror(errno));
	close(fd);
	return rv;
}

/* ---- queue ---- */

static size_t col_queued(const struct col_sender *s)
{
	return s->spool_count + s->mem_count + (s->cur_valid && s->cur_loc == COL_CUR_MEM);
}

/* Drops the batch in flight (acked or dead-lettered). Caller holds mu. */
static void col_drop_cur(struct col_sender *s)
{
	if (s->cur_loc == COL_CUR_SPOOL) {
		if (s->spool_rd != s->cur_off)
			abort();
		col_spool_pop(s, s->cur_next);
	}
	free(s->cur_buf);
	s->cur_buf = NULL;
	s->cur_valid = 0;
	pthread_cond_broadcast(&s->done);
}

static int col_pending_add(struct col_sender *s, const uint64_t *ids, size_t n)
{
	uint64_t *p;
	size_t cap;

	if (s->npending + n > s->cappending) {
		cap = s->cappending ? s->cappending * 2 : 16;
		while (cap < s->npending + n)
			cap *= 2;
		if (!(p = realloc(s->pending, cap * sizeof(*p))))
			return RM_ENOMEM;
		s->pending = p;
		s->cappending = cap;
	}
	memcpy(s->pending + s->npending, ids, n * sizeof(*ids));
	s->npending += n;
	return RM_OK;
}

/* ---- the thread ---- */

static void col_ms_from_now(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Sleeps *backoff ms (unless stopped) and doubles it. Caller holds mu. */
static void col_backoff(struct col_sender *s, int *backoff)
{
	struct timespec ts;

	col_ms_from_now(&ts, *backoff);
	while (!s->stop && pthread_cond_timedwait(&s->work, &s->mu, &ts) != ETIMEDOUT)
		;
	*backoff = *backoff * 2 > COL_BACKOFF_MAX_MS ? COL_BACKOFF_MAX_MS : *backoff * 2;
}

static void col_handle_commands(struct col_sender *s, const Rametr__Ack *ack)
{
	size_t i;
	unsigned k;
	int seen, refused;

	for (i = 0; i < ack->n_commands; i++) {
		const Rametr__ThrottleCommand *c = ack->commands[i];

		seen = refused = 0;
		for (k = 0; k < COL_SEEN_CMDS && k < s->nseen; k++)
			if (s->seen[k] == c->id) {
				seen = 1;
				refused = s->seen_refused[k];
			}
		if (!seen) {
			k = s->nseen % COL_SEEN_CMDS;
			s->seen[k] = c->id;
			s->seen_refused[k] = 0;
			s->nseen++;
			if (s->on_command && s->on_command(s->cmd_arg, c) != 0)
				refused = s->seen_refused[k] = 1;
		}
		if (refused)
			continue; /* not applied: never acknowledged, it expires at the aggregator */
		pthread_mutex_lock(&s->mu);
		if (col_pending_add(s, &c->id, 1) != 0)
			rm_log_error("out of memory: command %" PRIu64 " will not be acknowledged",
				     c->id);
		pthread_mutex_unlock(&s->mu);
	}
}

enum col_outcome { COL_DONE, COL_DUPLICATE, COL_RETRY, COL_DEAD };

static void col_set_down(struct col_sender *s, const char *why)
{
	if (!s->down)
		rm_log_warn("aggregator at '%s' is not answering (%s); retrying", s->url, why);
	s->down = 1;
}

/* Readies s->aio's completion flag before an operation is started on it. */
static void col_aio_arm(struct col_sender *s)
{
	pthread_mutex_lock(&s->amu);
	s->adone = 0;
	pthread_mutex_unlock(&s->amu);
}

static void col_aio_done(void *arg)
{
	struct col_sender *s = arg;

	pthread_mutex_lock(&s->amu);
	s->adone = 1;
	pthread_cond_signal(&s->acv);
	pthread_mutex_unlock(&s->amu);
}

/*
 * Waits for the operation just started on s->aio, at most ms or until close;
 * cancels it if late. Returns its nng result (NNG_ECANCELED if late).
 */
static int col_aio_wait(struct col_sender *s, int ms)
{
	struct timespec ts;

	col_ms_from_now(&ts, ms);
	pthread_mutex_lock(&s->amu);
	while (!s->adone && !atomic_load(&s->halt) &&
	       pthread_cond_timedwait(&s->acv, &s->amu, &ts) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&s->amu);
	nng_aio_cancel(s->aio); /* no effect if it completed */
	nng_aio_wait(s->aio);   /* the callback has run */
	return nng_aio_result(s->aio);
}

/*
 * One request: sends buf, awaits an Ack for seq. Called by the thread without
 * mu. On COL_DEAD, err receives the aggregator's status and error.
 */
static enum col_outcome col_request(struct col_sender *s, const uint8_t *buf, size_t len,
				    uint64_t seq, char *err, size_t errlen)
{
	Rametr__Envelope *env = NULL;
	enum col_outcome out;
	nng_msg *msg = NULL;
	char derr[256];
	int rv;

	if (nng_msg_alloc(&msg, 0) != 0) {
		rm_log_error("out of memory for a request of %zu bytes", len);
		return COL_RETRY;
	}
	if (nng_msg_append(msg, buf, len) != 0) {
		nng_msg_free(msg);
		rm_log_error("out of memory for a request of %zu bytes", len);
		return COL_RETRY;
	}
	col_aio_arm(s);
	nng_aio_set_msg(s->aio, msg);
	nng_send_aio(s->sock, s->aio);
	if ((rv = col_aio_wait(s, s->timeout_ms)) != 0) {
		nng_msg_free(nng_aio_get_msg(s->aio)); /* not sent: still ours */
		nng_aio_set_msg(s->aio, NULL);
		if (!atomic_load(&s->halt))
			col_set_down(s, rv == NNG_ECANCELED ? "timed out" : nng_strerror(rv));
		return COL_RETRY;
	}
	nng_aio_set_msg(s->aio, NULL);
	col_aio_arm(s);
	nng_recv_aio(s->sock, s->aio);
	if ((rv = col_aio_wait(s, s->timeout_ms)) != 0) {
		if (!atomic_load(&s->halt))
			col_set_down(s, rv == NNG_ECANCELED ? "timed out" : nng_strerror(rv));
		return COL_RETRY;
	}
	msg = nng_aio_get_msg(s->aio);
	nng_aio_set_msg(s->aio, NULL);
	rv = rm_wire_decode(nng_msg_body(msg), nng_msg_len(msg), &env, derr, sizeof(derr));
	nng_msg_free(msg);
	if (rv != RM_OK || env->body_case != RAMETR__ENVELOPE__BODY_ACK) {
		rm_log_warn("undecodable reply from aggregator at '%s': %s", s->url,
			    rv ? derr : "not an ack");
		rm_wire_free(env);
		return COL_RETRY;
	}
	if (s->down)
		rm_log_info("aggregator at '%s' is answering again", s->url);
	s->down = 0;
	if (env->ack->seq != seq) {
		rm_log_warn("aggregator at '%s' acked seq %" PRIu64 " for seq %" PRIu64
			    "; sending again",
			    s->url, env->ack->seq, seq);
		rm_wire_free(env);
		return COL_RETRY;
	}
	col_handle_commands(s, env->ack);
	if (s->on_decided && (env->ack->status == RAMETR__ACK__STATUS__ACK_OK ||
			      env->ack->status == RAMETR__ACK__STATUS__ACK_DUPLICATE))
		s->on_decided(s->decided_arg, env->ack->decided, env->ack->n_decided);
	switch (env->ack->status) {
	case RAMETR__ACK__STATUS__ACK_OK:
		out = COL_DONE;
		break;
	case RAMETR__ACK__STATUS__ACK_DUPLICATE:
		out = COL_DUPLICATE;
		break;
	case RAMETR__ACK__STATUS__ACK_RETRY:
		rm_log_debug("aggregator asks to retry seq %" PRIu64 ": %s", seq, env->ack->error);
		out = COL_RETRY;
		break;
	default:
		snprintf(err, errlen, "%s: %s", rm_wire_ack_status_name(env->ack->status),
			 env->ack->error[0] ? env->ack->error : "(no reason given)");
		out = COL_DEAD;
		break;
	}
	rm_wire_free(env);
	return out;
}

static void col_hello(const struct col_sender *s, Rametr__Envelope *env, Rametr__Hello *h)
{
	rametr__envelope__init(env);
	rametr__hello__init(h);
	h->node = s->node;
	h->backend = s->backend;
	h->instance = s->instance;
	h->clock_offset_ns = s->clock_offset_ns;
	h->window_ns = s->window_ns;
	h->ncpu = s->ncpu;
	h->hostname = s->hostname;
	env->version = RM_PROTO_VERSION;
	env->body_case = RAMETR__ENVELOPE__BODY_HELLO;
	env->hello = h;
}

static int col_send_hello(struct col_sender *s)
{
	static const int log_every = 30; /* attempts, ~1 min at the 2 s backoff */
	Rametr__Envelope env;
	Rametr__Hello h;
	enum col_outcome o;
	uint8_t *buf;
	size_t len;
	char err[512];
	int rv;

	col_hello(s, &env, &h);
	if ((rv = rm_wire_encode(&env, &buf, &len)) != 0)
		return rv;
	o = col_request(s, buf, len, 0, err, sizeof(err));
	free(buf);
	if (o == COL_DEAD) {
		if (s->hello_refused++ % log_every == 0)
			rm_log_error("aggregator at '%s' refused the hello of node '%s': %s", s->url,
				     s->node, err);
		return RM_EPROTO;
	}
	if (o == COL_RETRY)
		return RM_ETIMEDOUT;
	s->hello_refused = 0;
	return RM_OK;
}

static void col_take_cur(struct col_sender *s)
{
	struct col_item *it;
	uint8_t *buf;
	size_t len;
	uint64_t off, end, next;
	const char *why;
	int rv;

	if (s->spool_count > 0) {
		off = s->spool_rd;
		end = s->spool_end;
		pthread_mutex_unlock(&s->mu);
		rv = col_read_record(s->spool_fd, off, end, &buf, &len, &next, &why);
		if (rv != 0) {
			pthread_mutex_lock(&s->mu);
			/* nothing after an unreadable record can be framed: give up the spool */
			rm_log_error("spool '%s': %s at offset %" PRIu64 "; dropping its %zu unsent "
				     "batches",
				     s->spool_path, why, off, s->spool_count);
			s->st.lost_batches += s->spool_count;
			s->spool_count = 1;
			col_spool_pop(s, s->spool_end); /* pops all: count 1 -> 0, file emptied */
			pthread_cond_broadcast(&s->done);
			return;
		}
		pthread_mutex_lock(&s->mu);
		s->cur_loc = COL_CUR_SPOOL;
		s->cur_off = off;
		s->cur_next = next;
	} else {
		it = s->head;
		s->head = it->next;
		if (!s->head)
			s->tail = NULL;
		s->mem_bytes -= it->len;
		s->mem_count--;
		buf = it->buf;
		len = it->len;
		free(it);
		s->cur_loc = COL_CUR_MEM;
	}
	s->cur_buf = buf;
	s->cur_len = len;
	s->cur_valid = 1;
	s->cur_attempts = 0;
	if (rm_wire_peek_seq(buf, len, &s->cur_seq) != RM_OK)
		s->cur_seq = 0; /* not a batch: refused below, without sending */
}

static void *col_sender_main(void *arg)
{
	struct col_sender *s = arg;
	enum col_outcome o;
	int backoff = COL_BACKOFF_MIN_MS, rv;
	char err[512];

	pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		if (atomic_exchange(&s->need_hello, 0)) {
			pthread_mutex_unlock(&s->mu);
			rv = col_send_hello(s);
			pthread_mutex_lock(&s->mu);
			if (rv != RM_OK) {
				atomic_store(&s->need_hello, 1);
				col_backoff(s, &backoff);
			} else {
				backoff = COL_BACKOFF_MIN_MS;
			}
			continue;
		}
		if (!s->cur_valid) {
			if (s->spool_count == 0 && !s->head) {
				pthread_cond_wait(&s->work, &s->mu);
				continue;
			}
			col_take_cur(s);
			if (!s->cur_valid)
				continue;
		}
		if (s->cur_seq == 0) {
			snprintf(err, sizeof(err), "queued record is not a batch");
			o = COL_DEAD;
		} else {
			s->st.batches_sent++;
			if (s->cur_attempts++ > 0)
				s->st.retries++;
			pthread_mutex_unlock(&s->mu);
			o = col_request(s, s->cur_buf, s->cur_len, s->cur_seq, err, sizeof(err));
			pthread_mutex_lock(&s->mu);
		}
		switch (o) {
		case COL_DONE:
		case COL_DUPLICATE:
			if (o == COL_DONE)
				s->st.batches_acked++;
			else
				s->st.duplicates++;
			col_drop_cur(s);
			backoff = COL_BACKOFF_MIN_MS;
			break;
		case COL_DEAD:
			pthread_mutex_unlock(&s->mu);
			rv = col_dead_letter(s, s->cur_buf, s->cur_len);
			pthread_mutex_lock(&s->mu);
			if (rv == RM_OK) {
				rm_log_error("aggregator refused batch %" PRIu64 " (%s); moved to '%s'",
					     s->cur_seq, err, s->dead_path);
				s->st.rejected++;
			} else {
				rm_log_error("aggregator refused batch %" PRIu64 " (%s) and it could "
					     "not be kept: lost",
					     s->cur_seq, err);
				s->st.rejected++;
				s->st.lost_batches++;
			}
			col_drop_cur(s);
			break;
		case COL_RETRY:
			if (!s->stop)
				col_backoff(s, &backoff);
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static void col_pipe_event(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct col_sender *s = arg;

	(void)p;
	if (ev == NNG_PIPE_EV_ADD_POST)
		atomic_store(&s->need_hello, 1);
}

/* ---- conversion ---- */

/*
 * Builds and encodes the batch (col_enc.h: the bytes protobuf-c would make,
 * without its structures). Called under submit_mu, which guards s->enc.
 * Returns RM_OK, RM_EINVAL (logged) or RM_ENOMEM.
 */
static int col_encode_batch(struct col_sender *s, uint64_t seq, const uint64_t *acks, size_t nacks,
			    const struct rm_part *parts, size_t nparts,
			    const struct col_enc_parts *ps, const struct rm_totals *wins,
			    size_t nwins, uint8_t **buf, size_t *len)
{
	struct col_enc_hdr h = {
		.node = s->node,
		.backend = s->backend,
		.instance = s->instance,
		.seq = seq,
		.window_ns = s->window_ns,
		.clock_offset_ns = s->clock_offset_ns,
	};
	char err[256];
	int rv;

	if (ps)
		rv = col_enc_batch_parts(&h, ps, wins, nwins, acks, nacks, buf, len, err, sizeof(err));
	else
		rv = col_enc_batch(&s->enc, &h, parts, nparts, wins, nwins, acks, nacks, buf, len, err,
				   sizeof(err));
	if (rv == RM_EINVAL)
		rm_log_error("refusing batch of %zu parts and %zu windows from backend '%s': %s",
			     ps ? ps->n : nparts, nwins, s->backend, err);
	return rv;
}

/* ---- public API ---- */

/* col_sender_submit() of parts[0..nparts), or of the parts encoded in ps if not NULL. */
static int col_submit(struct col_sender *s, const struct rm_part *parts, size_t nparts,
		      const struct col_enc_parts *ps, const struct rm_totals *wins, size_t nwins)
{
	struct col_item *it = NULL;
	uint64_t *acks = NULL, seq;
	size_t nacks = 0, len = 0;
	uint8_t *buf = NULL;
	int rv = RM_OK;

	if (!s || (nparts && !parts) || (nwins && !wins))
		return RM_EINVAL;
	pthread_mutex_lock(&s->submit_mu);
	pthread_mutex_lock(&s->mu);
	if (s->stop) {
		pthread_mutex_unlock(&s->mu);
		pthread_mutex_unlock(&s->submit_mu);
		return RM_ESTATE;
	}
	seq = s->next_seq;
	acks = s->pending;
	nacks = s->npending;
	s->pending = NULL;
	s->npending = s->cappending = 0;
	pthread_mutex_unlock(&s->mu);

	rv = col_encode_batch(s, seq, acks, nacks, parts, nparts, ps, wins, nwins, &buf, &len);
	if (ps)
		nparts = ps->n;
	if (rv == RM_OK && !(it = calloc(1, sizeof(*it))))
		rv = RM_ENOMEM;

	pthread_mutex_lock(&s->mu);
	if (rv == RM_OK && s->stop)
		rv = RM_ESTATE;
	if (rv == RM_OK) {
		/* make room: the oldest batches in memory go to the spool */
		while (s->mem_bytes + len > s->mem_limit && s->head && rv == RM_OK)
			rv = col_spill_oldest(s);
		if (rv == RM_OK && s->mem_bytes + len > s->mem_limit) {
			/* bigger than the memory limit by itself: straight to the spool */
			if ((rv = col_spool_cur(s)) == RM_OK && (rv = col_spool_put(s, buf, len)) == RM_OK) {
				free(buf);
				free(it);
				buf = NULL;
				it = NULL;
			}
		} else if (rv == RM_OK) {
			it->buf = buf;
			it->len = len;
			if (s->tail)
				s->tail->next = it;
			else
				s->head = it;
			s->tail = it;
			s->mem_bytes += len;
			s->mem_count++;
			buf = NULL;
			it = NULL;
		}
		if (rv != RM_OK) {
			char why[4200];

			if (!s->spool_path)
				snprintf(why, sizeof(why), "no spool configured");
			else if (rv == RM_EFULL)
				snprintf(why, sizeof(why), "spool '%s' is full", s->spool_path);
			else
				snprintf(why, sizeof(why), "spool '%s' cannot be written", s->spool_path);
			s->st.lost_batches++;
			rm_log_error("dropping batch of %zu parts and %zu windows: memory limit of %zu "
				     "bytes reached and %s; %" PRIu64 " batches lost so far",
				     nparts, nwins, s->mem_limit, why, s->st.lost_batches);
			rv = RM_EFULL;
		} else {
			s->next_seq++;
			pthread_cond_signal(&s->work);
		}
	}
	if (rv != RM_OK && nacks) {
		/* not sent: acknowledge those commands with the next batch */
		if (col_pending_add(s, acks, nacks) != 0)
			rm_log_error("out of memory: %zu commands will not be acknowledged", nacks);
	}
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_unlock(&s->submit_mu);
	free(acks);
	free(buf);
	free(it);
	return rv;
}

int col_sender_submit(struct col_sender *s, const struct rm_part *parts, size_t nparts,
		      const struct rm_totals *wins, size_t nwins)
{
	return col_submit(s, parts, nparts, NULL, wins, nwins);
}

int col_sender_submit_enc(struct col_sender *s, const struct col_enc_parts *ps,
			  const struct rm_totals *wins, size_t nwins)
{
	if (!ps)
		return RM_EINVAL;
	return col_submit(s, NULL, 0, ps, wins, nwins);
}

int col_sender_flush(struct col_sender *s, int timeout_ms)
{
	struct timespec ts;
	int rv = RM_OK;

	if (!s)
		return RM_EINVAL;
	if (timeout_ms >= 0)
		col_ms_from_now(&ts, timeout_ms);
	pthread_mutex_lock(&s->mu);
	while (col_queued(s) > 0 && !s->stop) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&s->done, &s->mu);
		} else if (pthread_cond_timedwait(&s->done, &s->mu, &ts) == ETIMEDOUT) {
			rv = col_queued(s) > 0 ? RM_ETIMEDOUT : RM_OK;
			break;
		}
	}
	if (rv == RM_OK && col_queued(s) > 0)
		rv = RM_ESTATE;
	pthread_mutex_unlock(&s->mu);
	return rv;
}

void col_sender_stats(struct col_sender *s, struct col_sender_stats *out)
{
	if (!s || !out)
		return;
	pthread_mutex_lock(&s->mu);
	*out = s->st;
	out->spool_bytes = s->spool_fd >= 0 ? col_spool_bytes(s) : 0;
	out->queued = col_queued(s);
	pthread_mutex_unlock(&s->mu);
}

uint64_t col_sender_instance(const struct col_sender *s)
{
	return s ? s->instance : 0;
}

static void col_sender_free(struct col_sender *s)
{
	struct col_item *it, *next;

	for (it = s->head; it; it = next) {
		next = it->next;
		free(it->buf);
		free(it);
	}
	free(s->cur_buf);
	if (s->spool_fd >= 0)
		close(s->spool_fd);
	if (s->aio)
		nng_aio_free(s->aio);
	pthread_cond_destroy(&s->acv);
	pthread_mutex_destroy(&s->amu);
	pthread_cond_destroy(&s->work);
	pthread_cond_destroy(&s->done);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->submit_mu);
	free(s->pending);
	col_enc_free(&s->enc);
	free(s->url);
	free(s->node);
	free(s->backend);
	free(s->hostname);
	free(s->spool_path);
	free(s->dead_path);
	free(s);
}

void col_sender_close(struct col_sender *s)
{
	struct col_item *it;
	size_t lost = 0;

	if (!s)
		return;
	pthread_mutex_lock(&s->submit_mu);
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_broadcast(&s->work);
	pthread_cond_broadcast(&s->done);
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_unlock(&s->submit_mu);
	/* abandon a request in flight (it stays unacked), then let the thread end */
	pthread_mutex_lock(&s->amu);
	atomic_store(&s->halt, 1);
	pthread_cond_broadcast(&s->acv);
	pthread_mutex_unlock(&s->amu);
	if (s->thread_started)
		pthread_join(s->thread, NULL);
	if (s->sock_open) {
		nng_close(s->sock);
		s->sock_open = 0;
	}

	/* the thread is gone: keep every unacked batch, oldest first */
	if (col_spool_cur(s) != RM_OK)
		lost++;
	while (s->head) {
		if (col_spill_oldest(s) != RM_OK) {
			it = s->head;
			s->head = it->next;
			s->mem_bytes -= it->len;
			s->mem_count--;
			free(it->buf);
			free(it);
			lost++;
		}
	}
	s->tail = NULL;
	if (lost) {
		s->st.lost_batches += lost;
		rm_log_error("%zu unacked batches lost at close: no room in spool %s%s%s", lost,
			     s->spool_path ? "'" : "", s->spool_path ? s->spool_path : "(none)",
			     s->spool_path ? "'" : "");
	}
	if (s->spool_fd >= 0) {
		if (s->spool_count == 0) {
			if (unlink(s->spool_path) != 0)
				rm_log_warn("failed to remove '%s': %s", s->spool_path, strerror(errno));
		} else {
			if (fsync(s->spool_fd) != 0)
				rm_log_error("failed to sync spool '%s': %s", s->spool_path,
					     strerror(errno));
			rm_log_info("%zu unacked batches kept in spool '%s'", s->spool_count,
				    s->spool_path);
		}
	}
	col_sender_free(s);
}

static int col_strdup(char **dst, const char *src)
{
	*dst = NULL;
	if (!src)
		return RM_OK;
	if (!(*dst = strdup(src)))
		return RM_ENOMEM;
	return RM_OK;
}

static int col_check_cfg(const struct col_sender_cfg *cfg)
{
	char err[128];

	if (!cfg->url || (strncmp(cfg->url, "tcp://", 6) != 0 && strncmp(cfg->url, "ipc://", 6) != 0)) {
		rm_log_error("unsupported aggregator url '%s' (use tcp:// or ipc://)",
			     cfg->url ? cfg->url : "");
		return RM_EINVAL;
	}
	if (rm_wire_check_node(cfg->node, err, sizeof(err)) != RM_OK) {
		rm_log_error("invalid node name '%s': %s", cfg->node ? cfg->node : "", err);
		return RM_EINVAL;
	}
	if (!cfg->backend || !cfg->backend[0] || strlen(cfg->backend) > 63) {
		rm_log_error("invalid backend name '%s'", cfg->backend ? cfg->backend : "");
		return RM_EINVAL;
	}
	if (cfg->window_ns == 0) {
		rm_log_error("invalid window of 0 ns");
		return RM_EINVAL;
	}
	if (cfg->timeout_ms < 0) {
		rm_log_error("invalid timeout of %d ms", cfg->timeout_ms);
		return RM_EINVAL;
	}
	if (cfg->spool_path && !cfg->spool_path[0]) {
		rm_log_error("empty spool path");
		return RM_EINVAL;
	}
	return RM_OK;
}

int col_sender_open(struct col_sender **out, const struct col_sender_cfg *cfg)
{
	struct col_sender *s;
	char host[256], dead[4096];
	int rv;

	if (!out)
		return RM_EINVAL;
	*out = NULL;
	if (!cfg)
		return RM_EINVAL;
	if ((rv = col_check_cfg(cfg)) != 0)
		return rv;
	if (!(s = calloc(1, sizeof(*s))))
		return RM_ENOMEM;
	s->spool_fd = -1;
	pthread_mutex_init(&s->submit_mu, NULL);
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->amu, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s->work, &ca);
		pthread_cond_init(&s->done, &ca);
		pthread_cond_init(&s->acv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (!cfg->hostname) {
		if (gethostname(host, sizeof(host)) != 0)
			host[0] = '\0';
		host[sizeof(host) - 1] = '\0';
	}
	if ((rv = col_strdup(&s->url, cfg->url)) != 0 || (rv = col_strdup(&s->node, cfg->node)) != 0 ||
	    (rv = col_strdup(&s->backend, cfg->backend)) != 0 ||
	    (rv = col_strdup(&s->hostname, cfg->hostname ? cfg->hostname : host)) != 0 ||
	    (rv = col_strdup(&s->spool_path, cfg->spool_path)) != 0)
		goto fail;
	if (s->spool_path) {
		snprintf(dead, sizeof(dead), "%s.rejected", s->spool_path);
		if ((rv = col_strdup(&s->dead_path, dead)) != 0)
			goto fail;
	}
	s->window_ns = cfg->window_ns;
	s->clock_offset_ns = cfg->clock_offset_ns;
	s->ncpu = cfg->ncpu;
	s->mem_limit = cfg->mem_limit ? cfg->mem_limit : COL_SENDER_MEM_LIMIT_DEFAULT;
	s->spool_limit = cfg->spool_limit;
	s->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : COL_SENDER_TIMEOUT_DEFAULT;
	s->on_command = cfg->on_command;
	s->on_decided = cfg->on_decided;
	s->decided_arg = cfg->decided_arg;
	s->cmd_arg = cfg->cmd_arg;
	s->next_seq = 1;
	atomic_store(&s->need_hello, 1);
	while (s->instance == 0) {
		if (getrandom(&s->instance, sizeof(s->instance), 0) != (ssize_t)sizeof(s->instance)) {
			rm_log_error("failed to draw an instance id: %s", strerror(errno));
			rv = RM_EIO;
			goto fail;
		}
	}
	{
		/* what the aggregator will check, checked now */
		Rametr__Envelope env;
		Rametr__Hello h;
		char err[256];

		col_hello(s, &env, &h);
		if (rm_wire_check(&env, err, sizeof(err)) != RM_OK) {
			rm_log_error("invalid collector configuration: %s", err);
			rv = RM_EINVAL;
			goto fail;
		}
	}
	if (s->spool_path && (rv = col_spool_load(s)) != 0)
		goto fail;

	if ((rv = nng_req0_open(&s->sock)) != 0) {
		rm_log_error("failed to open request socket: %s", nng_strerror(rv));
		rv = RM_EIO;
		goto fail;
	}
	s->sock_open = 1;
	if ((rv = nng_socket_set_ms(s->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) != 0 ||
	    (rv = nng_aio_alloc(&s->aio, col_aio_done, s)) != 0 ||
	    (rv = nng_socket_set_ms(s->sock, NNG_OPT_RECONNMINT, 50)) != 0 ||
	    (rv = nng_socket_set_ms(s->sock, NNG_OPT_RECONNMAXT, 1000)) != 0 ||
	    (rv = nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, RM_WIRE_MAX_MSG)) != 0 ||
	    (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_POST, col_pipe_event, s)) != 0) {
		rm_log_error("failed to set up request socket: %s", nng_strerror(rv));
		rv = RM_EIO;
		goto fail;
	}
	nng_aio_set_timeout(s->aio, NNG_DURATION_INFINITE);
	if ((rv = nng_dial(s->sock, s->url, NULL, NNG_FLAG_NONBLOCK)) != 0) {
		rm_log_error("failed to dial '%s': %s", s->url, nng_strerror(rv));
		rv = RM_EIO;
		goto fail;
	}
	if ((rv = pthread_create(&s->thread, NULL, col_sender_main, s)) != 0) {
		rm_log_error("failed to start the sender thread: %s", strerror(rv));
		rv = RM_ENOMEM;
		goto fail;
	}
	s->thread_started = 1;
	*out = s;
	return RM_OK;
fail:
	if (s->sock_open)
		nng_close(s->sock);
	col_sender_free(s);
	return rv;
}
