/*
 * rm_err.h - the one error enum of Rametr.
 *
 * Every fallible function in every module returns an `int` that is either
 * RM_OK (0) or one of the values below. rm_strerror() turns a value into a
 * short lowercase description. Detailed context (file names, line numbers,
 * peer addresses) is printed by the caller with rm_log_error(), never encoded
 * in the return value.
 */
#ifndef RM_ERR_H
#define RM_ERR_H

#include <stddef.h>

enum rm_err {
	RM_OK = 0,
	RM_ENOMEM,     /* out of memory */
	RM_EINVAL,     /* invalid argument */
	RM_EPROTO,     /* malformed message */
	RM_EVERSION,   /* unsupported protocol or schema version */
	RM_EIO,        /* i/o error (file, socket) */
	RM_ETIMEDOUT,  /* timed out */
	RM_ECLOSED,    /* object closed or peer gone */
	RM_ENOENT,     /* no such entry */
	RM_EFULL,      /* bounded resource full (queue, disk) */
	RM_ECONFIG,    /* malformed configuration */
	RM_EBPF,       /* BPF program failed to load or attach */
	RM_ESQL,       /* database error */
	RM_EPERM,      /* permission denied */
	RM_EEXIST,     /* entry already exists (duplicate) */
	RM_ENOTSUP,    /* not supported on this host */
	RM_ETRUNC,     /* truncated input */
	RM_ESTATE,     /* operation not valid in this state */
	RM_ERR_COUNT
};

/* Returns a static lowercase description of rv; never NULL. Thread-safe. */
const char *rm_strerror(int rv);

/*
 * Formats a message into a caller's error buffer err of errlen bytes
 * (truncated, always NUL-terminated); does nothing if err is NULL or errlen
 * is 0. For functions that hand their reason back ("err, errlen" arguments).
 */
void rm_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Diagnostics to stderr, one line each, in the sd-daemon(3) format: a
 * syslog priority prefix ("<3>" error, "<4>" warning, "<6>" info, "<7>"
 * debug), then, unless stderr is the journal (JOURNAL_STREAM names it, see
 * systemd.exec(5)), the UTC time, then the program name set with
 * rm_log_init(), e.g.
 *   <3>2026-11-25T15:02:10.123Z rametr-aggregator: error: failed to open 'x': ...
 * Format messages like git: lowercase, quoted subject, no full stop, e.g.
 * rm_log_error("failed to open '%s': %s", path, strerror(errno)).
 * Thread-safe (one fprintf per line; the level may change while others log).
 */
enum rm_log_level {
	RM_LOG_QUIET = -1,    /* nothing (fuzzers) */
	RM_LOG_ERR = 3,
	RM_LOG_WARNING = 4,
	RM_LOG_INFO = 6,      /* the default */
	RM_LOG_DEBUG = 7,
};

/* Sets the program name and looks whether stderr is the journal. */
void rm_log_init(const char *progname);
/* Messages above level are not written. */
void rm_log_set_level(enum rm_log_level level);
enum rm_log_level rm_log_get_level(void);
/* "error", "warning", "info" or "debug" (also "err", "warn", "quiet") into
 * *out: RM_OK, or RM_EINVAL for anything else. */
int rm_log_parse_level(const char *s, enum rm_log_level *out);
/* The name rm_log_parse_level() reads for level. */
const char *rm_log_level_name(enum rm_log_level level);
/* verbose: 1 is debug, 0 the default (info), -1 silences everything. */
void rm_log_set_verbose(int verbose);
void rm_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rm_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rm_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rm_log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
