/*
 * tb_proto.h - the testbed's line protocol, address parsing and CPU burner.
 *
 * The synthetic shared service of seed 000 §7.2 speaks one line per request:
 *
 *   REQ <ce> <cpu_us> <resp_bytes>\n
 *
 * and answers with exactly resp_bytes bytes: "OK <resp_bytes>\n", then '.'
 * padding, then a final '\n'. A malformed request gets one line
 * "ERR <reason>\n" and the connection stays usable. Everything here is pure
 * (no global state) and thread-safe.
 */
#ifndef TB_PROTO_H
#define TB_PROTO_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#define TB_CE_MAX 64                 /* including the NUL */
#define TB_LINE_MAX 256              /* longest accepted request line, with '\n' */
#define TB_CPU_US_MAX 1000000u       /* 1 s of CPU per request at most */
#define TB_RESP_MIN 16u
#define TB_RESP_MAX (1024u * 1024u)  /* 1 MiB */

struct tb_req {
	char ce[TB_CE_MAX];
	uint32_t cpu_us;
	uint32_t resp_bytes;
};

/*
 * Parses one request line of len bytes (without its '\n'; one trailing '\r'
 * is ignored). Tokens are separated by one or more spaces or tabs.
 * A CE name is 1..63 characters of [A-Za-z0-9_.:-] and does not start with
 * "__" (reserved for Rametr's own pseudo-CEs). Returns RM_OK and fills *req,
 * or RM_EPROTO and points *reason at a static lowercase reason (for the ERR
 * reply). line need not be NUL-terminated.
 */
int tb_parse_req(const char *line, size_t len, struct tb_req *req, const char **reason);

/*
 * Checks that tok[0..tlen) is a valid CE name (rules above). Returns RM_OK,
 * or RM_EPROTO with *reason (if reason is not NULL) pointing at a static
 * lowercase reason.
 */
int tb_check_ce(const char *tok, size_t tlen, const char **reason);

/*
 * The first step of parsing a request line of *len bytes (no '\n'): drops
 * one trailing '\r' from *len, then returns RM_OK, or RM_EPROTO with
 * *reason = "control character in request" if a NUL, '\n' or '\r' is left.
 */
int tb_line_clean(const char *line, size_t *len, const char **reason);

/*
 * The next token of line[*pos, len): skips spaces and tabs, then sets *tok
 * and *tlen to the run up to the next space, tab or len, moves *pos past it
 * and returns 1; returns 0 if no token is left. line need not be
 * NUL-terminated.
 */
int tb_next_tok(const char *line, size_t len, size_t *pos, const char **tok, size_t *tlen);

/*
 * Parses a decimal token of tlen bytes (digits only) into *out: returns 1,
 * 0 if malformed (empty or not a digit), -1 if outside [min, max] (then *out
 * is untouched).
 */
int tb_tok_u32(const char *tok, size_t tlen, uint32_t min, uint32_t max, uint32_t *out);

/*
 * The next token of line[*pos, len) as a CE name (rules above), copied with
 * its NUL into ce. Returns RM_OK, or RM_EPROTO with *reason = "missing ce" or
 * tb_check_ce()'s reason.
 */
int tb_next_ce(const char *line, size_t len, size_t *pos, char ce[TB_CE_MAX], const char **reason);

/*
 * Formats a request line (with '\n') into buf. Returns its length, or 0 if
 * it does not fit or req is invalid.
 */
size_t tb_format_req(char *buf, size_t cap, const struct tb_req *req);

/*
 * Formats the header "OK <resp_bytes>\n" of a reply into buf. Returns its
 * length, or 0 if it does not fit or resp_bytes is out of range.
 */
size_t tb_format_ok(char *buf, size_t cap, uint32_t resp_bytes);

/*
 * Sends the whole reply of resp_bytes bytes (header, padding, final '\n') on
 * the blocking socket fd with MSG_NOSIGNAL. Adds the bytes actually sent to
 * *sent. If first_cpu_ns is not NULL, sets it to the thread's CPU time right
 * after the first send call returns (the end of the request's ground-truth
 * span: a segment ends at the reply's first send). Returns RM_OK, RM_EINVAL
 * for an out-of-range size, or RM_ECLOSED if the peer went away (errno kept).
 */
int tb_send_reply(int fd, uint32_t resp_bytes, uint64_t *sent, uint64_t *first_cpu_ns);

/*
 * Parses "a.b.c.d:port" (IPv4; port 0..65535) or, if allow_no_port,
 * plain "a.b.c.d" (port 0). Returns RM_OK or RM_EINVAL.
 */
int tb_parse_addr(const char *s, int allow_no_port, struct sockaddr_in *out);

/* Formats sa as "a.b.c.d:port" into buf (at least 22 bytes). Returns buf. */
const char *tb_addr_str(const struct sockaddr_in *sa, char *buf, size_t cap);

/*
 * Parses an unsigned decimal in [min, max] that spans the whole string.
 * Returns RM_OK or RM_EINVAL.
 */
int tb_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/*
 * Parses a positive finite decimal (e.g. "30", "2.5") that spans the whole
 * string and is <= max. Returns RM_OK or RM_EINVAL.
 */
int tb_parse_pos_double(const char *s, double max, double *out);

/*
 * Parses "lo:hi" or "v" (lo = hi = v), both within [min, max], lo <= hi.
 * Returns RM_OK or RM_EINVAL.
 */
int tb_parse_range(const char *s, uint64_t min, uint64_t max, uint64_t *lo, uint64_t *hi);

/* CPU time of the calling thread, in ns (CLOCK_THREAD_CPUTIME_ID). */
uint64_t tb_thread_cpu_ns(void);

/* CLOCK_MONOTONIC and CLOCK_REALTIME, in ns. */
uint64_t tb_mono_ns(void);
uint64_t tb_real_ns(void);

/* Sleeps until CLOCK_MONOTONIC reaches t ns (returns at once if it has), through EINTR. */
void tb_sleep_until(uint64_t t);

/*
 * Burns us microseconds of the calling thread's CPU time in a busy loop of
 * real integer arithmetic, checking CLOCK_THREAD_CPUTIME_ID every few hundred
 * iterations (overshoot of a few microseconds). Returns a value derived from
 * the arithmetic so the compiler cannot drop it. Thread-safe.
 */
uint64_t tb_burn_cpu(uint32_t us);

#endif
