/*
 * tb_uload.c - tb-uload, the load of one CE on tb-userver: REQ datagrams
 * (tb_proto.h) at a fixed rate from the CE's own source address (so Rametr
 * tells CEs apart by client address), one request outstanding at a time.
 * Request i is due at start + i / rate; a reply not back within a second is
 * counted lost and the next request goes out. Each request burns a CPU time
 * drawn uniformly from --cpu-us (tb_rng.h, --seed). With --dns NAME the
 * requests are DNS queries for NAME (type A, recursion desired) instead, for
 * a real DNS server; a reply counts as answered if it is a response to that
 * query (same id, QR set) with rcode NOERROR. Prints one summary line
 * "ce=C sent=N answered=M lost=L bad=B" and exits 0 if every request was
 * answered with a well-formed reply, 1 otherwise.
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rm_err.h"
#include "tb_cli.h"
#include "tb_proto.h"
#include "tb_rng.h"
#include "banned.h"

#define TB_UREPLY_WAIT_MS 1000
#define TB_URESP_MAX 65507u

static void tb_usage(FILE *f)
{
	fprintf(f, "usage: tb-uload --server ADDR:PORT --ce NAME --rate R --duration S [--bind ADDR]\n"
		   "               [--cpu-us LO[:HI]] [--resp-bytes N] [--seed N] [--dns NAME]\n"
		   "\n"
		   "  --server ADDR:PORT  tb-userver to load\n"
		   "  --ce NAME           the CE named in the requests\n"
		   "  --rate R            requests per second (one outstanding at a time)\n"
		   "  --duration S        seconds of load\n"
		   "  --bind ADDR         source address (the CE's own)\n"
		   "  --cpu-us LO[:HI]    CPU burnt per request, uniform in [LO, HI] us (default 1000)\n"
		   "  --resp-bytes N      reply size (default 64, at most %u)\n"
		   "  --seed N            seed of the CPU draws (default 1)\n"
		   "  --dns NAME          send DNS queries for NAME (type A) instead of REQ lines\n",
		   TB_URESP_MAX);
}

/*
 * A DNS query (RFC 1035 §4.1) with id for name (type A, class IN, recursion
 * desired) into buf (TB_LINE_MAX): its length, or 0 if name is not a
 * dotted name of labels of 1..63 bytes that fits.
 */
static size_t tb_dns_query(char *buf, uint16_t id, const char *name)
{
	static const unsigned char tail[4] = { 0, 1, 0, 1 }; /* QTYPE A, QCLASS IN */
	unsigned char *b = (unsigned char *)buf;
	size_t n = 12, len = strlen(name);
	const char *p = name;

	memset(b, 0, 12);
	b[0] = (unsigned char)(id >> 8);
	b[1] = (unsigned char)id;
	b[2] = 0x01; /* RD */
	b[5] = 1;    /* QDCOUNT */
	if (len && name[len - 1] == '.')
		len--;
	while (p < name + len) {
		const char *dot = memchr(p, '.', (size_t)(name + len - p));
		size_t l = (size_t)((dot ? dot : name + len) - p);

		if (l == 0 || l > 63 || n + 1 + l + 1 + sizeof(tail) > TB_LINE_MAX)
			return 0;
		b[n++] = (unsigned char)l;
		memcpy(b + n, p, l);
		n += l;
		p += l + (dot ? 1 : 0);
	}
	if (n == 12)
		return 0;
	b[n++] = 0;
	memcpy(b + n, tail, sizeof(tail));
	return n + sizeof(tail);
}

/* Is the datagram buf[0..n) a NOERROR response to DNS query id? */
static int tb_dns_ok(const char *buf, size_t n, uint16_t id)
{
	const unsigned char *b = (const unsigned char *)buf;

	return n >= 12 && b[0] == (id >> 8) && b[1] == (id & 0xff) && (b[2] & 0x80) && (b[3] & 0x0f) == 0;
}

/*
 * Waits for the reply to a request: a REQ reply of resp_bytes, or with
 * dns_id >= 0 the response to that DNS query. 1 answered, 0 lost, -1
 * malformed.
 */
static int tb_await(int fd, uint32_t resp_bytes, int dns_id, char *buf)
{
	struct pollfd p = { fd, POLLIN, 0 };
	uint64_t deadline = tb_mono_ns() + TB_UREPLY_WAIT_MS * 1000000ULL;

	for (;;) {
		uint64_t now = tb_mono_ns();
		ssize_t n;
		int r;

		if (now >= deadline)
			return 0;
		r = poll(&p, 1, (int)((deadline - now) / 1000000ULL) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 ? 0 : -1;
		n = recv(fd, buf, TB_URESP_MAX, 0);
		if (n < 0)
			return errno == EINTR ? 0 : -1;
		if (dns_id >= 0)
			return tb_dns_ok(buf, (size_t)n, (uint16_t)dns_id) ? 1 : -1;
		return (size_t)n == resp_bytes && strncmp(buf, "OK ", 3) == 0 ? 1 : -1;
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "server", required_argument, NULL, 's' },   { "bind", required_argument, NULL, 'b' },
		{ "ce", required_argument, NULL, 'c' },       { "rate", required_argument, NULL, 'r' },
		{ "duration", required_argument, NULL, 'd' }, { "cpu-us", required_argument, NULL, 'u' },
		{ "resp-bytes", required_argument, NULL, 'p' }, { "seed", required_argument, NULL, 'S' },
		{ "dns", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },           { "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct sockaddr_in srv, src = { .sin_family = AF_INET };
	const char *server_s = NULL, *ce = NULL, *dns = NULL;
	uint64_t cpu_lo = 1000, cpu_hi = 1000, resp = 64, seed = 1, sent = 0, answered = 0, lost = 0, bad = 0;
	double rate = 0, duration = 0;
	struct tb_rng rng;
	char *buf, line[TB_LINE_MAX];
	uint64_t start, end, i;
	int c, fd, have_bind = 0;

	rm_log_init("tb-uload");
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's': server_s = optarg; break;
		case 'c': ce = optarg; break;
		case 'b':
			if (tb_parse_addr(optarg, 1, &src) != RM_OK) {
				rm_log_error("invalid --bind '%s'", optarg);
				return 2;
			}
			have_bind = 1;
			break;
		case 'r':
			if (tb_parse_pos_double(optarg, 1e6, &rate) != RM_OK) {
				rm_log_error("invalid --rate '%s'", optarg);
				return 2;
			}
			break;
		case 'd':
			if (tb_parse_pos_double(optarg, 86400, &duration) != RM_OK) {
				rm_log_error("invalid --duration '%s'", optarg);
				return 2;
			}
			break;
		case 'u':
			if (tb_parse_range(optarg, 0, TB_CPU_US_MAX, &cpu_lo, &cpu_hi) != RM_OK) {
				rm_log_error("invalid --cpu-us '%s'", optarg);
				return 2;
			}
			break;
		case 'p':
			if (tb_parse_u64(optarg, TB_RESP_MIN, TB_URESP_MAX, &resp) != RM_OK) {
				rm_log_error("invalid --resp-bytes '%s'", optarg);
				return 2;
			}
			break;
		case 'S':
			if (tb_parse_u64(optarg, 0, UINT64_MAX, &seed) != RM_OK) {
				rm_log_error("invalid --seed '%s'", optarg);
				return 2;
			}
			break;
		case 'D': dns = optarg; break;
		default: return tb_cli_other(c, argv, "tb-uload", tb_usage);
		}
	}
	if (tb_cli_extra_args(argc, argv, tb_usage))
		return 2;
	if (!server_s || !ce || rate <= 0 || duration <= 0) {
		rm_log_error("--server, --ce, --rate and --duration are required");
		tb_usage(stderr);
		return 2;
	}
	if (tb_parse_addr(server_s, 0, &srv) != RM_OK || tb_check_ce(ce, strlen(ce), NULL) != RM_OK) {
		rm_log_error("invalid --server '%s' or --ce '%s'", server_s, ce);
		return 2;
	}
	if (dns && !tb_dns_query(line, 0, dns)) {
		rm_log_error("invalid --dns '%s' (expected a dotted name)", dns);
		return 2;
	}
	buf = malloc(TB_URESP_MAX);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (!buf || fd < 0 || (have_bind && bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0) ||
	    connect(fd, (struct sockaddr *)&srv, sizeof(srv)) != 0) {
		rm_log_error("failed to open a socket to '%s': %s", server_s, strerror(errno));
		free(buf);
		if (fd >= 0)
			close(fd);
		return 1;
	}
	tb_rng_seed(&rng, seed);
	start = tb_mono_ns();
	end = start + (uint64_t)(duration * 1e9);
	for (i = 0;; i++) {
		uint64_t due = start + (uint64_t)((double)i * 1e9 / rate);
		struct tb_req req = { .resp_bytes = (uint32_t)resp };
		size_t len;
		int r;

		if (due >= end)
			break;
		tb_sleep_until(due);
		snprintf(req.ce, sizeof(req.ce), "%s", ce);
		req.cpu_us = (uint32_t)tb_rng_range(&rng, cpu_lo, cpu_hi);
		len = dns ? tb_dns_query(line, (uint16_t)i, dns) : tb_format_req(line, sizeof(line), &req);
		if (!len || send(fd, line, len, 0) != (ssize_t)len) {
			rm_log_error("failed to send a request: %s", strerror(errno));
			break;
		}
		sent++;
		r = tb_await(fd, req.resp_bytes, dns ? (int)(uint16_t)i : -1, buf);
		answered += r == 1;
		lost += r == 0;
		bad += r < 0;
	}
	printf("ce=%s sent=%llu answered=%llu lost=%llu bad=%llu\n", ce, (unsigned long long)sent,
	       (unsigned long long)answered, (unsigned long long)lost, (unsigned long long)bad);
	free(buf);
	close(fd);
	return sent && answered == sent ? 0 : 1;
}
