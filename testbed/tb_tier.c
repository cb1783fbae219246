/*
 * tb_tier.c - the two-tier service's request lines (GET, PUT, FETCH, STORE), its replies
 * (built, checked, sent and received whole), and the address-to-size map the
 * clients share. Owns no state.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "rm_err.h"
#include "tb_tier.h"
#include "banned.h"

/* One numeric field: fills *out or sets *reason. */
static int tb_tier_field(const char *line, size_t len, size_t *pos, const char *name, uint32_t min,
			 uint32_t max, uint32_t *out, const char **reason)
{
	static const struct {
		const char *name, *missing, *bad, *range;
	} msgs[] = {
		{ "addr", "missing addr", "bad addr", "addr out of range" },
		{ "size_kb", "missing size_kb", "bad size_kb", "size_kb out of range" },
		{ "cpu_us", "missing cpu_us", "bad cpu_us", "cpu_us too large" },
	};
	const char *tok;
	size_t tlen, k;
	int r;

	for (k = 0; k < sizeof(msgs) / sizeof(msgs[0]); k++)
		if (strcmp(msgs[k].name, name) == 0)
			break;
	assert(k < sizeof(msgs) / sizeof(msgs[0]));
	if (!tb_next_tok(line, len, pos, &tok, &tlen)) {
		*reason = msgs[k].missing;
		return RM_EPROTO;
	}
	r = tb_tok_u32(tok, tlen, min, max, out);
	if (r == 0) {
		*reason = msgs[k].bad;
		return RM_EPROTO;
	}
	if (r < 0) {
		*reason = msgs[k].range;
		return RM_EPROTO;
	}
	return RM_OK;
}

int tb_tier_parse(enum tb_tier_cmd cmd, const char *line, size_t len, struct tb_tier_req *req,
		  const char **reason)
{
	static const char *dummy;
	const char *tok, *word;
	size_t tlen, pos = 0;
	int rv;

	if (!reason)
		reason = &dummy;
	int front;

	if (!line || !req || (cmd != TB_CMD_GET && cmd != TB_CMD_FETCH && cmd != TB_CMD_PUT &&
			      cmd != TB_CMD_STORE)) {
		*reason = "internal error";
		return RM_EINVAL;
	}
	front = cmd == TB_CMD_GET || cmd == TB_CMD_PUT;
	memset(req, 0, sizeof(*req));
	if ((rv = tb_line_clean(line, &len, reason)) != RM_OK)
		return rv;
	if (!tb_next_tok(line, len, &pos, &tok, &tlen)) {
		*reason = "empty request";
		return RM_EPROTO;
	}
	word = front ? "GET" : "FETCH";
	req->cmd = front ? TB_CMD_GET : TB_CMD_FETCH;
	if (tlen != strlen(word) || memcmp(tok, word, tlen) != 0) {
		word = front ? "PUT" : "STORE";
		req->cmd = front ? TB_CMD_PUT : TB_CMD_STORE;
		if (tlen != strlen(word) || memcmp(tok, word, tlen) != 0) {
			*reason = "unknown command";
			return RM_EPROTO;
		}
	}
	if (tb_next_ce(line, len, &pos, req->ce, reason) != RM_OK)
		return RM_EPROTO;
	if ((rv = tb_tier_field(line, len, &pos, "addr", 0, TB_ADDR_MAX, &req->addr, reason)) != RM_OK)
		return rv;
	if ((rv = tb_tier_field(line, len, &pos, "size_kb", TB_SIZE_KB_MIN, TB_SIZE_KB_MAX, &req->size_kb,
				reason)) != RM_OK)
		return rv;
	if (front &&
	    (rv = tb_tier_field(line, len, &pos, "cpu_us", 0, TB_CPU_US_MAX, &req->cpu_us, reason)) != RM_OK)
		return rv;
	if (tb_next_tok(line, len, &pos, &tok, &tlen)) {
		*reason = "trailing garbage";
		return RM_EPROTO;
	}
	return RM_OK;
}

size_t tb_tier_format(char *buf, size_t cap, const struct tb_tier_req *req)
{
	struct tb_tier_req chk;
	int n;

	if (!buf || !req)
		return 0;
	if (req->cmd == TB_CMD_GET || req->cmd == TB_CMD_PUT)
		n = snprintf(buf, cap, "%s %s %u %u %u\n", req->cmd == TB_CMD_GET ? "GET" : "PUT", req->ce,
			     req->addr, req->size_kb, req->cpu_us);
	else if (req->cmd == TB_CMD_FETCH || req->cmd == TB_CMD_STORE)
		n = snprintf(buf, cap, "%s %s %u %u\n", req->cmd == TB_CMD_FETCH ? "FETCH" : "STORE", req->ce,
			     req->addr, req->size_kb);
	else
		return 0;
	if (n < 0 || (size_t)n >= cap)
		return 0;
	if (tb_tier_parse(req->cmd, buf, (size_t)n - 1, &chk, NULL) != RM_OK || chk.cmd != req->cmd)
		return 0;
	return (size_t)n;
}

uint32_t tb_tier_size_of(uint32_t addr, uint32_t lo, uint32_t hi)
{
	uint64_t x = (uint64_t)addr + 0x9e3779b97f4a7c15ull;

	if (hi <= lo)
		return lo;
	/* splitmix64 finaliser: a fixed, well-mixed hash of the address */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	return lo + (uint32_t)(x % ((uint64_t)hi - lo + 1));
}

size_t tb_tier_build_reply(char *buf, size_t cap, uint32_t addr, uint32_t size_kb)
{
	uint32_t total;
	size_t hlen;

	if (!buf || size_kb < TB_SIZE_KB_MIN || size_kb > TB_SIZE_KB_MAX)
		return 0;
	total = tb_tier_reply_bytes(size_kb);
	if (cap < total)
		return 0;
	hlen = tb_format_ok(buf, cap, total);
	if (hlen == 0)
		return 0;
	memset(buf + hlen, tb_tier_fill(addr), total - hlen - 1);
	buf[total - 1] = '\n';
	return total;
}

int tb_tier_check_reply(const char *buf, size_t len, uint32_t addr, uint32_t size_kb)
{
	char hdr[32];
	size_t hlen, i;
	char fill = tb_tier_fill(addr);

	if (!buf || size_kb < TB_SIZE_KB_MIN || size_kb > TB_SIZE_KB_MAX ||
	    len != tb_tier_reply_bytes(size_kb))
		return RM_EPROTO;
	hlen = tb_format_ok(hdr, sizeof(hdr), (uint32_t)len);
	if (hlen == 0 || memcmp(buf, hdr, hlen) != 0 || buf[len - 1] != '\n')
		return RM_EPROTO;
	for (i = hlen; i < len - 1; i++)
		if (buf[i] != fill)
			return RM_EPROTO;
	return RM_OK;
}

int tb_tier_send(int fd, const void *buf, size_t len, uint64_t *sent, uint64_t *first_cpu_ns)
{
	const char *p = buf;
	int first = 1;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (first && first_cpu_ns && n >= 0) {
			*first_cpu_ns = tb_thread_cpu_ns();
			first = 0;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return RM_ECLOSED;
		}
		p += n;
		len -= (size_t)n;
		if (sent)
			*sent += (uint64_t)n;
	}
	return RM_OK;
}

int tb_tier_connect(const struct sockaddr_in *addr, unsigned timeout_s)
{
	struct timeval tv = { .tv_sec = (time_t)timeout_s };
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
	    connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int tb_tier_recv_reply(int fd, uint32_t addr, uint32_t size_kb, char *buf, size_t cap, size_t *len,
		       char *err, size_t errcap, uint64_t *rx)
{
	uint32_t total;
	size_t have = 0;

	if (!buf || !len || size_kb < TB_SIZE_KB_MIN || size_kb > TB_SIZE_KB_MAX)
		return RM_EINVAL;
	total = tb_tier_reply_bytes(size_kb);
	if (cap < total)
		return RM_EINVAL;
	*len = 0;
	while (have < total) {
		ssize_t n = recv(fd, buf + have, total - have, 0);

		if (n == 0)
			return RM_ECLOSED;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return RM_ECLOSED;
		}
		if (rx)
			*rx += (uint64_t)n;
		have += (size_t)n;
		if (have >= 4 && memcmp(buf, "ERR ", 4) == 0) {
			char *nl = memchr(buf, '\n', have);

			if (!nl)
				continue; /* the rest of the error line is on its way */
			if ((size_t)(nl - buf) + 1 != have)
				return RM_EPROTO; /* bytes after an error line */
			if (err && errcap) {
				size_t rl = (size_t)(nl - buf) - 4;

				if (rl >= errcap)
					rl = errcap - 1;
				memcpy(err, buf + 4, rl);
				err[rl] = '\0';
			}
			return RM_ENOENT;
		}
		if (have >= 3 && memcmp(buf, "OK ", 3) != 0)
			return RM_EPROTO;
	}
	if (tb_tier_check_reply(buf, have, addr, size_kb) != RM_OK)
		return RM_EPROTO;
	*len = have;
	return RM_OK;
}
