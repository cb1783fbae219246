/*
 * rm_err.c - error strings and the tiny stderr logger shared by all
 * programs (priority prefix, time, level). Owns nothing else.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rm_err.h"
#include "banned.h"

static const char *const rm_errstr[RM_ERR_COUNT] = {
	[RM_OK] = "success",
	[RM_ENOMEM] = "out of memory",
	[RM_EINVAL] = "invalid argument",
	[RM_EPROTO] = "malformed message",
	[RM_EVERSION] = "unsupported version",
	[RM_EIO] = "i/o error",
	[RM_ETIMEDOUT] = "timed out",
	[RM_ECLOSED] = "closed",
	[RM_ENOENT] = "no such entry",
	[RM_EFULL] = "full",
	[RM_ECONFIG] = "malformed configuration",
	[RM_EBPF] = "bpf program failed",
	[RM_ESQL] = "database error",
	[RM_EPERM] = "permission denied",
	[RM_EEXIST] = "already exists",
	[RM_ENOTSUP] = "not supported on this host",
	[RM_ETRUNC] = "truncated input",
	[RM_ESTATE] = "invalid state",
};

void rm_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

const char *rm_strerror(int rv)
{
	if (rv < 0 || rv >= RM_ERR_COUNT || !rm_errstr[rv])
		return "unknown error";
	return rm_errstr[rv];
}

static const char *rm_progname = "rametr";
static _Atomic int rm_level = RM_LOG_INFO;
static int rm_journal; /* stderr is the journal: it stamps the time itself */

/* JOURNAL_STREAM is "DEV:INODE" of the journal's socket; it counts only
 * while stderr is still that socket (not when a child's stderr was
 * redirected). */
static int rm_stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) != 0)
		return 0;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void rm_log_init(const char *progname)
{
	if (progname)
		rm_progname = progname;
	rm_journal = rm_stderr_is_journal();
}

void rm_log_set_level(enum rm_log_level level)
{
	rm_level = level;
}

enum rm_log_level rm_log_get_level(void)
{
	return (enum rm_log_level)rm_level;
}

static const struct {
	const char *name;
	enum rm_log_level level;
} rm_levels[] = {
	{ "error", RM_LOG_ERR }, { "warning", RM_LOG_WARNING }, { "info", RM_LOG_INFO },
	{ "debug", RM_LOG_DEBUG }, { "quiet", RM_LOG_QUIET }, { "err", RM_LOG_ERR },
	{ "warn", RM_LOG_WARNING },
};

int rm_log_parse_level(const char *s, enum rm_log_level *out)
{
	size_t i;

	for (i = 0; s && i < sizeof(rm_levels) / sizeof(rm_levels[0]); i++)
		if (strcmp(s, rm_levels[i].name) == 0) {
			*out = rm_levels[i].level;
			return RM_OK;
		}
	return RM_EINVAL;
}

const char *rm_log_level_name(enum rm_log_level level)
{
	size_t i;

	for (i = 0; i < sizeof(rm_levels) / sizeof(rm_levels[0]); i++)
		if (rm_levels[i].level == level)
			return rm_levels[i].name;
	return "?";
}

void rm_log_set_verbose(int verbose)
{
	rm_level = verbose > 0 ? RM_LOG_DEBUG : verbose < 0 ? RM_LOG_QUIET : RM_LOG_INFO;
}

static void rm_vlog(int prio, const char *level, const char *fmt, va_list ap)
{
	char buf[1024], stamp[40] = "";

	if (prio > rm_level)
		return;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	if (!rm_journal) {
		struct timespec ts;
		struct tm tm;
		size_t n;

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(stamp + n, sizeof(stamp) - n, ".%03ldZ ", ts.tv_nsec / 1000000);
	}
	fprintf(stderr, "<%d>%s%s: %s%s\n", prio, stamp, rm_progname, level, buf);
}

#define RM_LOG_FN(name, prio, level)                \
	void name(const char *fmt, ...)             \
	{                                           \
		va_list ap;                         \
		va_start(ap, fmt);                  \
		rm_vlog(prio, level, fmt, ap);      \
		va_end(ap);                         \
	}

RM_LOG_FN(rm_log_error, RM_LOG_ERR, "error: ")
RM_LOG_FN(rm_log_warn, RM_LOG_WARNING, "warning: ")
RM_LOG_FN(rm_log_info, RM_LOG_INFO, "")
RM_LOG_FN(rm_log_debug, RM_LOG_DEBUG, "debug: ")
