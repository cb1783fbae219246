/*
 * tb_proto.c - the testbed's request line parser and formatter, the reply
 * sender, address and number parsing for the command lines, the clocks and
 * the CPU burner. Owns no state beyond a read-only padding buffer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "rm_err.h"
#include "tb_proto.h"
#include "banned.h"

#define TB_PAD_CHUNK 65536

/* Read-only reply padding (GNU range initializer, so no run-time init race). */
static const char tb_pad[TB_PAD_CHUNK] = { [0 ... TB_PAD_CHUNK - 1] = '.' };

static int tb_is_space(char c)
{
	return c == ' ' || c == '\t';
}

static int tb_ce_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == ':' || c == '-';
}

int tb_next_tok(const char *line, size_t len, size_t *pos, const char **tok, size_t *tlen)
{
	size_t i = *pos;

	while (i < len && tb_is_space(line[i]))
		i++;
	if (i == len)
		return 0;
	*tok = line + i;
	while (i < len && !tb_is_space(line[i]))
		i++;
	*tlen = (size_t)(line + i - *tok);
	*pos = i;
	return 1;
}

int tb_line_clean(const char *line, size_t *len, const char **reason)
{
	size_t i;

	if (*len > 0 && line[*len - 1] == '\r')
		(*len)--;
	for (i = 0; i < *len; i++) {
		if (line[i] == '\0' || line[i] == '\n' || line[i] == '\r') {
			*reason = "control character in request";
			return RM_EPROTO;
		}
	}
	return RM_OK;
}

int tb_tok_u32(const char *tok, size_t tlen, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (tlen == 0)
		return 0;
	for (i = 0; i < tlen; i++) {
		if (tok[i] < '0' || tok[i] > '9')
			return 0;
		v = v * 10 + (uint64_t)(tok[i] - '0');
		if (v > max)
			return -1;
	}
	if (v < min)
		return -1;
	*out = (uint32_t)v;
	return 1;
}

int tb_check_ce(const char *tok, size_t tlen, const char **reason)
{
	static const char *dummy;
	size_t i;

	if (!reason)
		reason = &dummy;
	if (!tok || tlen == 0) {
		*reason = "missing ce";
		return RM_EPROTO;
	}
	if (tlen >= TB_CE_MAX) {
		*reason = "ce name too long";
		return RM_EPROTO;
	}
	for (i = 0; i < tlen; i++) {
		if (!tb_ce_char(tok[i])) {
			*reason = "bad character in ce name";
			return RM_EPROTO;
		}
	}
	if (tlen >= 2 && tok[0] == '_' && tok[1] == '_') {
		*reason = "reserved ce name";
		return RM_EPROTO;
	}
	return RM_OK;
}

int tb_next_ce(const char *line, size_t len, size_t *pos, char ce[TB_CE_MAX], const char **reason)
{
	const char *tok;
	size_t tlen;

	if (!tb_next_tok(line, len, pos, &tok, &tlen)) {
		*reason = "missing ce";
		return RM_EPROTO;
	}
	if (tb_check_ce(tok, tlen, reason) != RM_OK)
		return RM_EPROTO;
	memcpy(ce, tok, tlen);
	ce[tlen] = '\0';
	return RM_OK;
}

int tb_parse_req(const char *line, size_t len, struct tb_req *req, const char **reason)
{
	const char *tok;
	size_t tlen, pos = 0;
	int r;

	if (!line || !req || !reason) {
		if (reason)
			*reason = "internal error";
		return RM_EINVAL;
	}
	if ((r = tb_line_clean(line, &len, reason)) != RM_OK)
		return r;
	if (!tb_next_tok(line, len, &pos, &tok, &tlen)) {
		*reason = "empty request";
		return RM_EPROTO;
	}
	if (tlen != 3 || memcmp(tok, "REQ", 3) != 0) {
		*reason = "unknown command";
		return RM_EPROTO;
	}
	if (tb_next_ce(line, len, &pos, req->ce, reason) != RM_OK)
		return RM_EPROTO;
	if (!tb_next_tok(line, len, &pos, &tok, &tlen)) {
		*reason = "missing cpu_us";
		return RM_EPROTO;
	}
	if ((r = tb_tok_u32(tok, tlen, 0, TB_CPU_US_MAX, &req->cpu_us)) != 1) {
		*reason = r < 0 ? "cpu_us too large" : "bad cpu_us";
		return RM_EPROTO;
	}
	if (!tb_next_tok(line, len, &pos, &tok, &tlen)) {
		*reason = "missing resp_bytes";
		return RM_EPROTO;
	}
	if ((r = tb_tok_u32(tok, tlen, 0, TB_RESP_MAX, &req->resp_bytes)) != 1) {
		*reason = r < 0 ? "resp_bytes too large" : "bad resp_bytes";
		return RM_EPROTO;
	}
	if (req->resp_bytes < TB_RESP_MIN) {
		*reason = "resp_bytes too small";
		return RM_EPROTO;
	}
	if (tb_next_tok(line, len, &pos, &tok, &tlen)) {
		*reason = "trailing garbage";
		return RM_EPROTO;
	}
	return RM_OK;
}

size_t tb_format_req(char *buf, size_t cap, const struct tb_req *req)
{
	const char *reason;
	struct tb_req chk;
	int n;

	if (!buf || !req)
		return 0;
	n = snprintf(buf, cap, "REQ %s %u %u\n", req->ce, req->cpu_us, req->resp_bytes);
	if (n < 0 || (size_t)n >= cap)
		return 0;
	if (tb_parse_req(buf, (size_t)n - 1, &chk, &reason) != RM_OK)
		return 0;
	return (size_t)n;
}

size_t tb_format_ok(char *buf, size_t cap, uint32_t resp_bytes)
{
	int n;

	if (!buf || resp_bytes < TB_RESP_MIN || resp_bytes > TB_RESP_MAX)
		return 0;
	n = snprintf(buf, cap, "OK %u\n", resp_bytes);
	if (n < 0 || (size_t)n >= cap)
		return 0;
	return (size_t)n;
}

int tb_send_reply(int fd, uint32_t resp_bytes, uint64_t *sent, uint64_t *first_cpu_ns)
{
	char hdr[32];
	size_t hlen, off = 0, pad_len;
	static const char nl = '\n';

	hlen = tb_format_ok(hdr, sizeof(hdr), resp_bytes);
	if (hlen == 0)
		return RM_EINVAL;
	pad_len = resp_bytes - hlen - 1;
	while (off < resp_bytes) {
		struct iovec iov[3];
		struct msghdr mh;
		int niov = 0;
		ssize_t n;

		if (off < hlen) {
			iov[niov].iov_base = hdr + off;
			iov[niov].iov_len = hlen - off;
			niov++;
		}
		if (off < hlen + pad_len) {
			size_t p = off > hlen ? off - hlen : 0;
			size_t chunk = pad_len - p;

			if (chunk > TB_PAD_CHUNK)
				chunk = TB_PAD_CHUNK;
			iov[niov].iov_base = (void *)(tb_pad + 0);
			iov[niov].iov_len = chunk;
			niov++;
			if (p + chunk == pad_len) {
				iov[niov].iov_base = (void *)&nl;
				iov[niov].iov_len = 1;
				niov++;
			}
		} else {
			iov[niov].iov_base = (void *)&nl;
			iov[niov].iov_len = 1;
			niov++;
		}
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = (size_t)niov;
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (first_cpu_ns && off == 0 && n >= 0)
			*first_cpu_ns = tb_thread_cpu_ns();
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return RM_ECLOSED;
		}
		off += (size_t)n;
		if (sent)
			*sent += (uint64_t)n;
	}
	return RM_OK;
}

int tb_parse_addr(const char *s, int allow_no_port, struct sockaddr_in *out)
{
	char host[INET_ADDRSTRLEN];
	const char *colon;
	uint64_t port = 0;
	size_t hl;

	if (!s || !out)
		return RM_EINVAL;
	colon = strchr(s, ':');
	if (!colon && !allow_no_port)
		return RM_EINVAL;
	hl = colon ? (size_t)(colon - s) : strlen(s);
	if (hl == 0 || hl >= sizeof(host))
		return RM_EINVAL;
	memcpy(host, s, hl);
	host[hl] = '\0';
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	if (inet_pton(AF_INET, host, &out->sin_addr) != 1)
		return RM_EINVAL;
	if (colon && tb_parse_u64(colon + 1, 0, 65535, &port) != RM_OK)
		return RM_EINVAL;
	out->sin_port = htons((uint16_t)port);
	return RM_OK;
}

const char *tb_addr_str(const struct sockaddr_in *sa, char *buf, size_t cap)
{
	char host[INET_ADDRSTRLEN];

	if (!inet_ntop(AF_INET, &sa->sin_addr, host, sizeof(host)))
		snprintf(host, sizeof(host), "?");
	snprintf(buf, cap, "%s:%u", host, (unsigned)ntohs(sa->sin_port));
	return buf;
}

int tb_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !out || *s < '0' || *s > '9')
		return RM_EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return RM_EINVAL;
	*out = v;
	return RM_OK;
}

int tb_parse_pos_double(const char *s, double max, double *out)
{
	char *end;
	double v;

	if (!s || !out || !((*s >= '0' && *s <= '9') || *s == '.'))
		return RM_EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || *end != '\0' || !isfinite(v) || v <= 0 || v > max)
		return RM_EINVAL;
	*out = v;
	return RM_OK;
}

int tb_parse_range(const char *s, uint64_t min, uint64_t max, uint64_t *lo, uint64_t *hi)
{
	char buf[64];
	const char *colon;
	size_t n;

	if (!s || !lo || !hi)
		return RM_EINVAL;
	colon = strchr(s, ':');
	if (!colon) {
		if (tb_parse_u64(s, min, max, lo) != RM_OK)
			return RM_EINVAL;
		*hi = *lo;
		return RM_OK;
	}
	n = (size_t)(colon - s);
	if (n == 0 || n >= sizeof(buf))
		return RM_EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (tb_parse_u64(buf, min, max, lo) != RM_OK || tb_parse_u64(colon + 1, min, max, hi) != RM_OK)
		return RM_EINVAL;
	if (*lo > *hi)
		return RM_EINVAL;
	return RM_OK;
}

static uint64_t tb_clock_ns(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) != 0)
		abort(); /* cannot fail for these clocks on Linux */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t tb_thread_cpu_ns(void)
{
	return tb_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

uint64_t tb_mono_ns(void)
{
	return tb_clock_ns(CLOCK_MONOTONIC);
}

uint64_t tb_real_ns(void)
{
	return tb_clock_ns(CLOCK_REALTIME);
}

void tb_sleep_until(uint64_t t)
{
	uint64_t now = tb_mono_ns();
	struct timespec ts;

	if (t <= now)
		return;
	ts.tv_sec = (time_t)((t - now) / 1000000000ULL);
	ts.tv_nsec = (long)((t - now) % 1000000000ULL);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

uint64_t tb_burn_cpu(uint32_t us)
{
	uint64_t start = tb_thread_cpu_ns();
	uint64_t goal = (uint64_t)us * 1000u;
	uint64_t x = start | 1, acc = 0;

	if (us == 0)
		return 0;
	for (;;) {
		int i;

		/* Real arithmetic: a xorshift step and a multiply-accumulate. */
		for (i = 0; i < 256; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			acc += x * 0x9e3779b97f4a7c15ull;
		}
		if (tb_thread_cpu_ns() - start >= goal)
			break;
	}
	return acc ^ x;
}
