/*
 * ctl_state.h - durable files of the billing job: atomic writes, the state
 * file ("up to where every charge period was exported") and the exports a
 * stopped run left behind. Not thread-safe with respect to one directory.
 */
#ifndef RM_CTL_STATE_H
#define RM_CTL_STATE_H

#include <stddef.h>
#include <stdint.h>

/* Writes len bytes of buf to path atomically: path.tmp, fsync, rename,
 * fsync of the directory. RM_OK or RM_EIO (logged; the temp file removed). */
int ctl_write_atomic(const char *path, const char *buf, size_t len);

/* Reads the state file: RM_OK with *until, RM_ENOENT if there is none (not
 * logged), RM_EINVAL if it is not a state file, RM_EIO (logged). */
int ctl_state_read(const char *path, int64_t *until);

/* Writes the state atomically (ctl_write_atomic). */
int ctl_state_write(const char *path, int64_t until);

/* The end of the export "bill-<from>-<end>.<ext>" in dir, if a run wrote it
 * but stopped before moving the state; 0 if there is none. Removes the
 * temporary files of runs that stopped while writing. */
int64_t ctl_export_done(const char *dir, int64_t from, const char *ext);

#endif
