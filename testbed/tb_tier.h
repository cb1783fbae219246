/*
 * tb_tier.h - the protocol of the two-tier synthetic shared service of seed
 * 000 §7.2.1 (Fig. 4): a caching front-end (tb-front) in front of a storage
 * back-end (tb-back).
 *
 * A client asks the front-end for the data at an address:
 *
 *   GET <ce> <addr> <size_kb> <cpu_us>\n
 *
 * (cpu_us: the front-end's per-request processing CPU). On a cache miss the
 * front-end asks the back-end
 *
 *   FETCH <ce> <addr> <size_kb>\n
 *
 * A client may also (re)write the object at an address: "PUT" with the
 * fields of GET. The object's content is a fixed function of its address,
 * so a write carries no body; the front-end writes it through to the
 * back-end with "STORE" (the fields of FETCH), puts it in its cache and
 * answers exactly as for a GET.
 *
 * where <ce> is forwarded for the back-end's ground truth only (Rametr never
 * sees it). Both answer with exactly size_kb * 1024 bytes: "OK <bytes>\n",
 * then the address's data byte (tb_tier_fill) repeated, then '\n' — so a
 * reply can be checked against the address it claims to hold. A malformed
 * request or a failure gets one line "ERR <reason>\n" and the connection
 * stays usable. CE names follow tb_proto.h. Everything here is thread-safe
 * and holds no state.
 */
#ifndef TB_TIER_H
#define TB_TIER_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "tb_proto.h"

#define TB_SIZE_KB_MIN 1u
#define TB_SIZE_KB_MAX 1024u          /* a reply is at most TB_RESP_MAX bytes */
#define TB_ADDR_MAX UINT32_MAX

enum tb_tier_cmd { TB_CMD_GET = 0, TB_CMD_FETCH, TB_CMD_PUT, TB_CMD_STORE };

struct tb_tier_req {
	enum tb_tier_cmd cmd;
	char ce[TB_CE_MAX];
	uint32_t addr;
	uint32_t size_kb;
	uint32_t cpu_us;     /* GET and PUT; 0 for FETCH and STORE */
};

/*
 * Parses one request line of len bytes (without its '\n'; one trailing '\r'
 * is ignored) that must be a request of cmd's tier: GET or PUT for
 * TB_CMD_GET and TB_CMD_PUT (the front-end's), FETCH or STORE for
 * TB_CMD_FETCH and TB_CMD_STORE (the back-end's); req->cmd is the one found. Returns RM_OK and fills *req, or
 * RM_EPROTO with *reason pointing at a static lowercase reason. line need not
 * be NUL-terminated.
 */
int tb_tier_parse(enum tb_tier_cmd cmd, const char *line, size_t len, struct tb_tier_req *req,
		  const char **reason);

/*
 * Formats req (its cmd decides the form) with the trailing '\n' into buf.
 * Returns the length, or 0 if it does not fit or req is invalid.
 */
size_t tb_tier_format(char *buf, size_t cap, const struct tb_tier_req *req);

/* Bytes of the reply to a request of size_kb KB. */
static inline uint32_t tb_tier_reply_bytes(uint32_t size_kb)
{
	return size_kb * 1024u;
}

/* The data byte of address addr (a lowercase letter). */
static inline char tb_tier_fill(uint32_t addr)
{
	return (char)('a' + addr % 26u);
}

/*
 * Size in KB of the object at addr when objects are lo..hi KB (lo <= hi):
 * a fixed hash of the address, so every client sees the same object size.
 */
uint32_t tb_tier_size_of(uint32_t addr, uint32_t lo, uint32_t hi);

/*
 * Writes the whole reply for (addr, size_kb) into buf (cap >= its size).
 * Returns its length, or 0 if size_kb is out of range or buf too small.
 */
size_t tb_tier_build_reply(char *buf, size_t cap, uint32_t addr, uint32_t size_kb);

/*
 * Checks that buf[0..len) is exactly the reply for (addr, size_kb).
 * Returns RM_OK or RM_EPROTO.
 */
int tb_tier_check_reply(const char *buf, size_t len, uint32_t addr, uint32_t size_kb);

/*
 * Sends len bytes of buf on the blocking socket fd with MSG_NOSIGNAL, adding
 * what was sent to *sent (if not NULL). If first_cpu_ns is not NULL, sets it
 * to the thread's CPU time right after the first send call returns (the end
 * of a request's ground-truth span). Returns RM_OK, or RM_ECLOSED if the peer
 * went away (errno kept).
 */
int tb_tier_send(int fd, const void *buf, size_t len, uint64_t *sent, uint64_t *first_cpu_ns);

/*
 * A new blocking TCP connection to addr with TCP_NODELAY and send and
 * receive timeouts of timeout_s seconds. Returns the socket, or -1 with
 * errno set.
 */
int tb_tier_connect(const struct sockaddr_in *addr, unsigned timeout_s);

/*
 * Receives the reply to a request for (addr, size_kb) from the blocking
 * socket fd into buf (cap >= tb_tier_reply_bytes(size_kb)); never reads past
 * the reply. On RM_OK, buf holds the complete, checked reply and *len its
 * length. If the peer answered "ERR ...", returns RM_ENOENT with the reason
 * (without "ERR " and '\n', NUL-terminated, truncated to errcap) in err.
 * Returns RM_ECLOSED if the connection ended early or failed, RM_EPROTO if
 * the reply is malformed (the connection is then unusable), RM_EINVAL on bad
 * arguments. *rx (if not NULL) gets the bytes received added.
 */
int tb_tier_recv_reply(int fd, uint32_t addr, uint32_t size_kb, char *buf, size_t cap, size_t *len,
		       char *err, size_t errcap, uint64_t *rx);

#endif
