/*
 * col_restart_fs.c - the state file on disk and the kernel counters it
 * records (col_restart.h): the only part of col_restart touching the system.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "col_restart.h"
#include "rm_err.h"
#include "banned.h"

int col_restart_load(const char *path, struct col_restart_state *s, size_t *n)
{
	char line[COL_RESTART_LINE_MAX];
	FILE *f = fopen(path, "r");
	unsigned bad = 0;

	*n = 0;
	if (!f) {
		if (errno == ENOENT)
			return RM_ENOENT;
		rm_log_error("failed to open '%s': %s", path, strerror(errno));
		return RM_EIO;
	}
	while (*n < COL_RESTART_MAX && fgets(line, sizeof(line), f)) {
		if (col_restart_parse(line, &s[*n]) == RM_OK)
			(*n)++;
		else
			bad++;
	}
	fclose(f);
	if (bad)
		rm_log_warn("'%s': %u lines are not collector state; ignored", path, bad);
	return RM_OK;
}

int col_restart_save(const char *path, const struct col_restart_state *s, size_t n)
{
	char line[COL_RESTART_LINE_MAX], tmp[4200];
	FILE *f;
	size_t i;
	int rv = RM_OK;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		return RM_EFULL;
	if (!(f = fopen(tmp, "w"))) {
		rm_log_error("failed to open '%s': %s", tmp, strerror(errno));
		return RM_EIO;
	}
	for (i = 0; i < n && rv == RM_OK; i++)
		if ((rv = col_restart_format(&s[i], line, sizeof(line))) == RM_OK && fputs(line, f) == EOF)
			rv = RM_EIO;
	if (fclose(f) != 0 && rv == RM_OK)
		rv = RM_EIO;
	if (rv == RM_EIO)
		rm_log_error("failed to write '%s': %s", tmp, strerror(errno));
	if (rv == RM_OK && rename(tmp, path) != 0) {
		rm_log_error("failed to rename '%s' to '%s': %s", tmp, path, strerror(errno));
		rv = RM_EIO;
	}
	if (rv != RM_OK)
		unlink(tmp);
	return rv;
}

int col_restart_remove(const char *path)
{
	if (unlink(path) != 0 && errno != ENOENT) {
		rm_log_error("failed to remove '%s': %s", path, strerror(errno));
		return RM_EIO;
	}
	return RM_OK;
}

int col_restart_busy_ns(uint64_t *busy)
{
	unsigned long long user, nice, sys, idle, iow, irq, sirq;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/stat", "r");
	int n;

	if (!f)
		return RM_EIO;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle, &iow, &irq, &sirq);
	fclose(f);
	if (n != 7 || hz <= 0)
		return RM_EIO;
	*busy = (uint64_t)(user + nice + sys + irq + sirq) * (1000000000ull / (uint64_t)hz);
	return RM_OK;
}

void col_restart_boot_id(char *buf, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	buf[0] = '\0';
	if (!f)
		return;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	fclose(f);
}
