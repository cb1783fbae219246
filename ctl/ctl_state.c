/*
 * ctl_state.c - the files of `rametrctl bill --since-last`: atomic writes
 * (temp file, fsync, rename, fsync of the directory), the job's state file,
 * and finding an export that a stopped run wrote before moving its state.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ctl_state.h"
#include "rm_err.h"
#include "banned.h"

/* Writes the whole of buf to path atomically: temp file, fsync, rename,
 * fsync of the directory. */
int ctl_write_atomic(const char *path, const char *buf, size_t len)
{
	char tmp[4200], dir[4200], *slash;
	int fd, dfd, rv = RM_OK;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
		rm_log_error("failed to create '%s': %s", tmp, strerror(errno));
		return RM_EIO;
	}
	while (len) {
		ssize_t w = write(fd, buf, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rm_log_error("failed to write '%s': %s", tmp, strerror(errno));
			rv = RM_EIO;
			break;
		}
		buf += w;
		len -= (size_t)w;
	}
	if (rv == RM_OK && fsync(fd) != 0) {
		rm_log_error("failed to sync '%s': %s", tmp, strerror(errno));
		rv = RM_EIO;
	}
	close(fd);
	if (rv == RM_OK && rename(tmp, path) != 0) {
		rm_log_error("failed to rename '%s' to '%s': %s", tmp, path, strerror(errno));
		rv = RM_EIO;
	}
	if (rv != RM_OK) {
		unlink(tmp);
		return rv;
	}
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return RM_OK;
}

/* The state of the job: RM_OK with *until set, RM_ENOENT if there is no
 * file, RM_EINVAL if it is not ours. */
int ctl_state_read(const char *path, int64_t *until)
{
	char buf[128];
	long long v;
	size_t len;
	FILE *f = fopen(path, "r");

	if (!f) {
		if (errno == ENOENT)
			return RM_ENOENT;
		rm_log_error("failed to open '%s': %s", path, strerror(errno));
		return RM_EIO;
	}
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	if (sscanf(buf, "rametr-bill-state 1 exported_until %lld", &v) != 1) {
		rm_log_error("invalid state file '%s' (not written by rametrctl bill)", path);
		return RM_EINVAL;
	}
	*until = v;
	return RM_OK;
}

int ctl_state_write(const char *path, int64_t until)
{
	char buf[96];
	int n = snprintf(buf, sizeof(buf), "rametr-bill-state 1 exported_until %lld\n", (long long)until);

	return ctl_write_atomic(path, buf, (size_t)n);
}

/* An export of the job that starts at from, left by a run that stopped
 * before moving the state: its end, or 0 (none). Removes the temporary
 * files of runs that stopped while writing. */
int64_t ctl_export_done(const char *dir, int64_t from, const char *ext)
{
	struct dirent *e;
	int64_t end = 0;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		long long a, b;
		char x[8];
		size_t l = strlen(e->d_name);

		if (!strncmp(e->d_name, "bill-", 5) && l > 4 && !strcmp(e->d_name + l - 4, ".tmp")) {
			char p[4200];

			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
			continue;
		}

		if (sscanf(e->d_name, "bill-%lld-%lld.%7s", &a, &b, x) == 3 && a == from && b > a &&
		    !strcmp(x, ext))
			end = b;
	}
	closedir(d);
	return end;
}

