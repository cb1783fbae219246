/*
 * col_spool.c - the spool file and the dead-letter file: record framing
 * (length + CRC), the read offset in the header, locking, the scan that
 * cuts a torn tail at open. See col_spool.h for the format.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "col_crc.h"
#include "col_spool.h"
#include "rm_err.h"
#include "rm_wire.h"
#include "banned.h"

#define COL_SPOOL_MAGIC "RMSPOOL1"
#define COL_REC_HDR 8u

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

void col_spool_init(struct col_spool *sp)
{
	memset(sp, 0, sizeof(*sp));
	sp->fd = -1;
}

uint64_t col_spool_bytes(const struct col_spool *sp)
{
	return sp->fd >= 0 ? sp->end - sp->rd : 0;
}

int col_spool_read(const struct col_spool *sp, uint64_t off, uint64_t end, uint8_t **buf,
		   size_t *len, uint64_t *next, const char **why)
{
	return col_read_record(sp->fd, off, end, buf, len, next, why);
}

static int col_spool_load(struct col_spool *sp)
{
	char bad[4096];
	uint8_t h[COL_SPOOL_HDR], *rec;
	uint64_t off, rd, next, size, last_le_rd;
	size_t len, count;
	const char *why;
	struct stat sb;
	int fd;

again:
	fd = open(sp->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		rm_log_error("failed to open spool '%s': %s", sp->path, strerror(errno));
		return RM_EIO;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;

		close(fd);
		if (e == EWOULDBLOCK) {
			rm_log_error("spool '%s' is in use by another collector", sp->path);
			return RM_EEXIST;
		}
		rm_log_error("failed to lock spool '%s': %s", sp->path, strerror(e));
		return RM_EIO;
	}
	if (fstat(fd, &sb) != 0) {
		rm_log_error("failed to stat spool '%s': %s", sp->path, strerror(errno));
		close(fd);
		return RM_EIO;
	}
	size = (uint64_t)sb.st_size;
	if (size >= 8 && (col_pread_all(fd, h, 8, 0) != 0 || memcmp(h, COL_SPOOL_MAGIC, 8) != 0)) {
		snprintf(bad, sizeof(bad), "%s.bad", sp->path);
		rm_log_warn("spool '%s' is not a rametr spool; moved to '%s'", sp->path, bad);
		close(fd);
		if (rename(sp->path, bad) != 0) {
			rm_log_error("failed to rename '%s': %s", sp->path, strerror(errno));
			return RM_EIO;
		}
		goto again;
	}
	if (size < COL_SPOOL_HDR) {
		if (size > 0)
			rm_log_warn("spool '%s': torn header, starting an empty spool", sp->path);
		if (ftruncate(fd, 0) != 0 || col_write_header(fd, COL_SPOOL_HDR) != 0) {
			rm_log_error("failed to write spool '%s': %s", sp->path, strerror(errno));
			close(fd);
			return RM_EIO;
		}
		sp->fd = fd;
		sp->rd = sp->end = COL_SPOOL_HDR;
		return RM_OK;
	}
	if (col_pread_all(fd, h, sizeof(h), 0) != 0) {
		rm_log_error("failed to read spool '%s': %s", sp->path, strerror(errno));
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
				    sp->path, why, off, size - off);
			if (ftruncate(fd, (off_t)off) != 0) {
				rm_log_error("failed to truncate spool '%s': %s", sp->path,
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
			    sp->path, rd, fixed);
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
			rm_log_error("failed to write spool '%s': %s", sp->path, strerror(errno));
			close(fd);
			return RM_EIO;
		}
		rd = size = COL_SPOOL_HDR;
	} else if (col_write_header(fd, rd) != 0) {
		rm_log_error("failed to write spool '%s': %s", sp->path, strerror(errno));
		close(fd);
		return RM_EIO;
	}
	sp->fd = fd;
	sp->rd = rd;
	sp->end = size;
	sp->count = count;
	if (count)
		rm_log_info("spool '%s': %zu batches (%" PRIu64 " bytes) left by a previous run",
			    sp->path, count, size - rd);
	return RM_OK;
}

int col_spool_open(struct col_spool *sp, const char *path, uint64_t limit)
{
	int rv;

	col_spool_init(sp);
	if (!(sp->path = strdup(path)))
		return RM_ENOMEM;
	sp->limit = limit;
	if ((rv = col_spool_load(sp)) != RM_OK) {
		free(sp->path);
		sp->path = NULL;
	}
	return rv;
}

int col_spool_put(struct col_spool *sp, const uint8_t *buf, size_t len)
{
	if (sp->fd < 0)
		return RM_EFULL;
	if (sp->limit && sp->end + COL_REC_HDR + len > sp->limit)
		return RM_EFULL;
	if (col_append_record(sp->fd, &sp->end, buf, len) != 0) {
		int e = errno;

		rm_log_error("failed to write spool '%s': %s", sp->path, strerror(e));
		return e == ENOSPC || e == EDQUOT || e == EFBIG ? RM_EFULL : RM_EIO;
	}
	sp->count++;
	return RM_OK;
}

void col_spool_pop(struct col_spool *sp, uint64_t next)
{
	if (sp->count == 0 || next > sp->end)
		abort();
	sp->rd = next;
	sp->count = next == sp->end ? 0 : sp->count - 1;
	if (sp->count == 0) {
		/* drained: back to an empty file */
		if (ftruncate(sp->fd, COL_SPOOL_HDR) != 0)
			rm_log_warn("failed to truncate spool '%s': %s", sp->path, strerror(errno));
		sp->rd = sp->end = COL_SPOOL_HDR;
	}
	if (col_write_header(sp->fd, sp->rd) != 0)
		rm_log_warn("failed to update spool '%s': %s (its batches may be sent twice)",
			    sp->path, strerror(errno));
}

void col_spool_close(struct col_spool *sp)
{
	if (sp->fd >= 0) {
		if (sp->count == 0) {
			if (unlink(sp->path) != 0)
				rm_log_warn("failed to remove '%s': %s", sp->path, strerror(errno));
		} else {
			if (fsync(sp->fd) != 0)
				rm_log_error("failed to sync spool '%s': %s", sp->path, strerror(errno));
			rm_log_info("%zu unacked batches kept in spool '%s'", sp->count, sp->path);
		}
		close(sp->fd);
	}
	free(sp->path);
	col_spool_init(sp);
}

int col_spool_dead_letter(const char *path, const uint8_t *buf, size_t len)
{
	struct stat sb;
	uint64_t end;
	int fd, rv = RM_OK;

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || fstat(fd, &sb) != 0) {
		rm_log_error("failed to open '%s': %s", path, strerror(errno));
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
		rm_log_error("failed to write '%s': %s", path, strerror(errno));
	close(fd);
	return rv;
}
