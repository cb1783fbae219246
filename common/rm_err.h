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
 * Diagnostics to stderr, one line each, prefixed by the program name set with
 * rm_log_init(). Format like git: lowercase, quoted subject, no full stop,
 * e.g. rm_log_error("failed to open '%s': %s", path, strerror(errno)).
 * Thread-safe (one fprintf per line).
 */
void rm_log_init(const char *progname);
/* verbose: 1 adds debug messages, 0 is the default, -1 silences everything (fuzzers). */
void rm_log_set_verbose(int verbose);
void rm_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rm_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rm_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rm_log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
