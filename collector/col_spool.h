/*
 * col_spool.h - the sender's spool file: an append-only file of encoded
 * batches with a read offset in its header, read back oldest first, and the
 * dead-letter file of refused batches in the same format.
 *
 * Format:
 *   header, 16 bytes:  "RMSPOOL1" (8 bytes), u64 LE offset of the first
 *                      record not yet acknowledged (>= 16);
 *   records:           u32 LE length n (1..RM_WIRE_MAX_MSG),
 *                      u32 LE CRC-32 (col_crc.h) of the n bytes,
 *                      n bytes.
 * Records are only appended; the offset advances as records are popped and
 * the file is truncated to its header when drained, and removed at close if
 * empty. A torn or corrupt tail is cut off at open with a warning; a file
 * with another magic is renamed to <path>.bad with a warning and a new spool
 * started. The file is locked (flock) while open.
 *
 * Threads: a struct col_spool is not locked; its owner serialises calls,
 * except that col_spool_read() of a record before `end` may run beside
 * col_spool_put() (records before end never change).
 */
#ifndef COL_SPOOL_H
#define COL_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#define COL_SPOOL_HDR 16u

struct col_spool {
	char *path;          /* owned; NULL: no spool */
	int fd;              /* -1: no spool (every put is RM_EFULL) */
	uint64_t limit;      /* max bytes of the file, 0 = limited by the disk */
	uint64_t rd, end;    /* records [rd, end) are unacked */
	size_t count;        /* how many */
};

/* An empty, closed spool (fd -1): col_spool_close() on it is a no-op. */
void col_spool_init(struct col_spool *sp);

/*
 * Opens, locks and scans the spool at path (copied): cuts a torn or corrupt
 * tail, counts the unacked records (logged if any). Returns RM_OK; RM_EIO if
 * it cannot be opened, read or written; RM_EEXIST if another process or
 * spool holds the lock; RM_ENOMEM. Each error is logged.
 */
int col_spool_open(struct col_spool *sp, const char *path, uint64_t limit);

/* Bytes of unacked records. */
uint64_t col_spool_bytes(const struct col_spool *sp);

/*
 * Appends one record. Returns RM_OK; RM_EFULL (no spool, limit reached, disk
 * full; the last logged); RM_EIO (logged).
 */
int col_spool_put(struct col_spool *sp, const uint8_t *buf, size_t len);

/*
 * Reads the record at off (< end): *buf (malloc'd, the caller frees), *len,
 * *next. Returns 0, or -1 if it is torn or corrupt (*why says how, *buf NULL).
 */
int col_spool_read(const struct col_spool *sp, uint64_t off, uint64_t end, uint8_t **buf,
		   size_t *len, uint64_t *next, const char **why);

/* Drops the head record, whose successor starts at next; next == end drops all. */
void col_spool_pop(struct col_spool *sp, uint64_t next);

/*
 * Syncs the spool (or removes it if empty, logging what it keeps), unlocks
 * and closes it, frees path. Idempotent.
 */
void col_spool_close(struct col_spool *sp);

/*
 * Appends buf to the dead-letter file at path (created in the spool format,
 * read offset 16) and syncs it. Returns RM_OK or RM_EIO (logged).
 */
int col_spool_dead_letter(const char *path, const uint8_t *buf, size_t len);

#endif
