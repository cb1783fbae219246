/*
 * tb_mcload.c - tb-mcload, the load of one CE on a memcached server, in its
 * text protocol: `get` of --multi keys or `set` of one key with a value of
 * --size bytes, at a fixed rate from the CE's own source address (so Rametr
 * tells CEs apart by client address), one request outstanding at a time.
 * Request i is due at start + i / rate; a reply not complete within two
 * seconds is an error and ends the run. With --conn-requests N it opens a
 * new connection every N requests, so that the server's dispatcher thread
 * (which accepts and hands each connection to a worker) works for the CE
 * too. With --fill it stores every key once (values of --size bytes) and
 * exits, so that later gets find them. Keys are PREFIX:0 .. PREFIX:(keys-1),
 * taken in turn. Prints one summary line "requests=N connections=C
 * errors=E" and exits 0 if every request had a well-formed, complete reply
 * (every key of a get found), 1 otherwise, 2 on bad arguments.
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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
#include "banned.h"

#define TB_MC_REPLY_WAIT_MS 2000
#define TB_MC_SIZE_MAX (512u * 1024u)
#define TB_MC_MULTI_MAX 100u
#define TB_MC_KEY_MAX 64 /* "PREFIX:N" with its separator */

struct tb_mc {
	struct sockaddr_in srv, src;
	int have_bind;
	const char *prefix;
	uint64_t size, keys, multi, next_key;
	int set;
	char *req, *buf; /* request and reply buffers, tb_mc_cap() bytes each */
	size_t cap;
};

static void tb_usage(FILE *f)
{
	fprintf(f, "usage: tb-mcload --server ADDR:PORT (--rate R --duration S | --fill) [--bind ADDR]\n"
		   "                [--op get|set] [--size BYTES] [--keys N] [--multi K] [--prefix P]\n"
		   "                [--conn-requests N]\n"
		   "\n"
		   "  --server ADDR:PORT   memcached to load\n"
		   "  --rate R             requests per second (one outstanding at a time)\n"
		   "  --duration S         seconds of load\n"
		   "  --fill               store every key once and exit\n"
		   "  --bind ADDR          source address (the CE's own)\n"
		   "  --op get|set         request kind (default get)\n"
		   "  --size BYTES         value size (default 100, at most %u)\n"
		   "  --keys N             keys PREFIX:0 .. PREFIX:N-1, used in turn (default 100)\n"
		   "  --multi K            keys per get (default 1, at most %u)\n"
		   "  --prefix P           key prefix (default k)\n"
		   "  --conn-requests N    a new connection every N requests (default 0: one for the run)\n",
		   TB_MC_SIZE_MAX, TB_MC_MULTI_MAX);
}

/* A connected TCP socket to the server (from --bind), or -1 (logged). */
static int tb_mc_connect(const struct tb_mc *m)
{
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || (m->have_bind && bind(fd, (const struct sockaddr *)&m->src, sizeof(m->src)) != 0) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
	    connect(fd, (const struct sockaddr *)&m->srv, sizeof(m->srv)) != 0) {
		rm_log_error("failed to connect to memcached: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Sends buf[0..n) whole; 0 or -1 (logged). */
static int tb_mc_send(int fd, const char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rm_log_error("failed to send a request: %s", strerror(errno));
			return -1;
		}
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * How many bytes of the reply in buf[0..n) are a complete reply: for a get,
 * VALUE blocks ending with "END\r\n"; for a set, "STORED\r\n". Sets *found to
 * the number of VALUE blocks. 0 while incomplete, -1 if malformed.
 */
static long tb_mc_complete(const struct tb_mc *m, const char *buf, size_t n, uint64_t *found)
{
	size_t at = 0;

	*found = 0;
	if (m->set) {
		if (n < 8)
			return memcmp(buf, "STORED\r\n", n) == 0 ? 0 : -1;
		return memcmp(buf, "STORED\r\n", 8) == 0 && n == 8 ? 8 : -1;
	}
	for (;;) {
		const char *eol = memchr(buf + at, '\n', n - at);
		size_t len;
		unsigned long flags, bytes;
		char key[TB_MC_KEY_MAX + 1];

		if (!eol)
			return 0;
		len = (size_t)(eol - (buf + at)) + 1;
		if (len == 5 && memcmp(buf + at, "END\r\n", 5) == 0)
			return at + len == n ? (long)n : -1;
		if (len > 6 + TB_MC_KEY_MAX + 48 || memcmp(buf + at, "VALUE ", 6) != 0 ||
		    sscanf(buf + at, "VALUE %64s %lu %lu", key, &flags, &bytes) != 3 || bytes != m->size)
			return -1;
		if (at + len + bytes + 2 > n)
			return 0;
		at += len + bytes + 2;
		(*found)++;
	}
}

/* Waits for the whole reply to the request sent on fd; 0 or -1 (logged). */
static int tb_mc_await(const struct tb_mc *m, int fd)
{
	uint64_t deadline = tb_mono_ns() + TB_MC_REPLY_WAIT_MS * 1000000ULL, found = 0;
	size_t n = 0;
	long done = 0;

	while (done == 0) {
		struct pollfd p = { fd, POLLIN, 0 };
		uint64_t now = tb_mono_ns();
		ssize_t r;

		if (now >= deadline || n == m->cap) {
			rm_log_error("no complete reply within %d ms", TB_MC_REPLY_WAIT_MS);
			return -1;
		}
		if (poll(&p, 1, (int)((deadline - now) / 1000000ULL) + 1) < 0 && errno != EINTR) {
			rm_log_error("failed to wait for a reply: %s", strerror(errno));
			return -1;
		}
		r = recv(fd, m->buf + n, m->cap - n, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0) {
			rm_log_error("failed to read a reply: %s", r == 0 ? "connection closed" : strerror(errno));
			return -1;
		}
		n += (size_t)r;
		done = tb_mc_complete(m, m->buf, n, &found);
	}
	if (done < 0) {
		rm_log_error("malformed reply from memcached: '%.40s'", m->buf);
		return -1;
	}
	if (!m->set && found != m->multi) {
		rm_log_error("a get found %llu of %llu keys (fill them first: --fill)", (unsigned long long)found,
			     (unsigned long long)m->multi);
		return -1;
	}
	return 0;
}

/* The next request into m->req: its length. */
static size_t tb_mc_request(struct tb_mc *m)
{
	size_t n = 0;
	uint64_t k;

	if (m->set) {
		n = (size_t)snprintf(m->req, m->cap, "set %s:%llu 0 0 %llu\r\n", m->prefix,
				     (unsigned long long)m->next_key, (unsigned long long)m->size);
		memset(m->req + n, 'v', m->size);
		memcpy(m->req + n + m->size, "\r\n", 2);
		n += m->size + 2;
		m->next_key = (m->next_key + 1) % m->keys;
		return n;
	}
	memcpy(m->req, "get", 3);
	n = 3;
	for (k = 0; k < m->multi; k++) {
		n += (size_t)snprintf(m->req + n, m->cap - n, " %s:%llu", m->prefix, (unsigned long long)m->next_key);
		m->next_key = (m->next_key + 1) % m->keys;
	}
	memcpy(m->req + n, "\r\n", 2);
	return n + 2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "server", required_argument, NULL, 's' }, { "bind", required_argument, NULL, 'b' },
		{ "rate", required_argument, NULL, 'r' },   { "duration", required_argument, NULL, 'd' },
		{ "fill", no_argument, NULL, 'F' },         { "op", required_argument, NULL, 'o' },
		{ "size", required_argument, NULL, 'z' },   { "keys", required_argument, NULL, 'k' },
		{ "multi", required_argument, NULL, 'm' },  { "prefix", required_argument, NULL, 'p' },
		{ "conn-requests", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },         { "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct tb_mc m = { .src = { .sin_family = AF_INET }, .prefix = "k", .size = 100, .keys = 100, .multi = 1 };
	const char *server_s = NULL;
	uint64_t per_conn = 0, requests = 0, conns = 0, errors = 0, i, start, end, total;
	double rate = 0, duration = 0;
	int c, li = 0, fd = -1, fill = 0;

	rm_log_init("tb-mcload");
	while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		int bad = 0;

		switch (c) {
		case 's': server_s = optarg; break;
		case 'b':
			bad = tb_parse_addr(optarg, 1, &m.src) != RM_OK;
			m.have_bind = 1;
			break;
		case 'r': bad = tb_parse_pos_double(optarg, 1e6, &rate) != RM_OK; break;
		case 'd': bad = tb_parse_pos_double(optarg, 86400, &duration) != RM_OK; break;
		case 'F': fill = 1; break;
		case 'o':
			bad = strcmp(optarg, "get") != 0 && strcmp(optarg, "set") != 0;
			m.set = strcmp(optarg, "set") == 0;
			break;
		case 'z': bad = tb_parse_u64(optarg, 1, TB_MC_SIZE_MAX, &m.size) != RM_OK; break;
		case 'k': bad = tb_parse_u64(optarg, 1, 1000000000, &m.keys) != RM_OK; break;
		case 'm': bad = tb_parse_u64(optarg, 1, TB_MC_MULTI_MAX, &m.multi) != RM_OK; break;
		case 'p': bad = strlen(optarg) == 0 || strlen(optarg) > 40 || strpbrk(optarg, " \r\n:") != NULL;
			m.prefix = optarg;
			break;
		case 'n': bad = tb_parse_u64(optarg, 0, UINT64_MAX, &per_conn) != RM_OK; break;
		default: return tb_cli_other(c, argv, "tb-mcload", tb_usage);
		}
		if (bad) {
			rm_log_error("invalid --%s '%s'", opts[li].name, optarg);
			return 2;
		}
	}
	if (tb_cli_extra_args(argc, argv, tb_usage))
		return 2;
	if (!server_s || (!fill && (rate <= 0 || duration <= 0))) {
		rm_log_error("--server and either --rate and --duration or --fill are required");
		tb_usage(stderr);
		return 2;
	}
	if (tb_parse_addr(server_s, 0, &m.srv) != RM_OK) {
		rm_log_error("invalid --server '%s'", server_s);
		return 2;
	}
	if (fill)
		m.set = 1, m.multi = 1;
	m.cap = (size_t)(m.multi * (m.size + 2 * TB_MC_KEY_MAX + 64) + m.size + 256);
	m.req = malloc(m.cap);
	m.buf = malloc(m.cap);
	if (!m.req || !m.buf) {
		rm_log_error("failed to allocate buffers of %zu bytes", m.cap);
		free(m.req);
		free(m.buf);
		return 1;
	}
	start = tb_mono_ns();
	end = start + (uint64_t)(duration * 1e9);
	total = fill ? m.keys : UINT64_MAX;
	for (i = 0; i < total; i++) {
		size_t len;

		if (!fill) {
			uint64_t due = start + (uint64_t)((double)i * 1e9 / rate);

			if (due >= end)
				break;
			tb_sleep_until(due);
		}
		if (fd >= 0 && per_conn && requests % per_conn == 0) {
			close(fd);
			fd = -1;
		}
		if (fd < 0) {
			if ((fd = tb_mc_connect(&m)) < 0) {
				errors++;
				break;
			}
			conns++;
		}
		len = tb_mc_request(&m);
		if (tb_mc_send(fd, m.req, len) != 0 || tb_mc_await(&m, fd) != 0) {
			errors++;
			break;
		}
		requests++;
	}
	if (fd >= 0)
		close(fd);
	printf("requests=%llu connections=%llu errors=%llu\n", (unsigned long long)requests, (unsigned long long)conns,
	       (unsigned long long)errors);
	free(m.req);
	free(m.buf);
	return requests && errors == 0 ? 0 : 1;
}
