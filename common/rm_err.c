/*
 * rm_err.c - error strings and the tiny stderr logger shared by all
 * programs. Owns nothing else.
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

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
static int rm_verbose;

void rm_log_init(const char *progname)
{
	if (progname)
		rm_progname = progname;
}

void rm_log_set_verbose(int verbose)
{
	rm_verbose = verbose;
}

static void rm_vlog(const char *level, const char *fmt, va_list ap)
{
	char buf[1024];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	fprintf(stderr, "%s: %s%s\n", rm_progname, level, buf);
}

#define RM_LOG_FN(name, level, cond)                \
	void name(const char *fmt, ...)             \
	{                                           \
		va_list ap;                         \
		if (!(cond))                        \
			return;                     \
		va_start(ap, fmt);                  \
		rm_vlog(level, fmt, ap);            \
		va_end(ap);                         \
	}

RM_LOG_FN(rm_log_error, "error: ", rm_verbose >= 0)
RM_LOG_FN(rm_log_warn, "warning: ", rm_verbose >= 0)
RM_LOG_FN(rm_log_info, "", rm_verbose >= 0)
RM_LOG_FN(rm_log_debug, "debug: ", rm_verbose > 0)
