/*
 * bench_transport.c - how many segment parts per second the transport
 * carries end to end: col_sender (the collector's sender, linked here) ->
 * nng -> a running rametr-aggregator (agg_server -> stitcher -> accountant
 * -> SQLite). Synthetic parts of a server on 127.0.0.1:<server-port> are
 * submitted in batches of --batch-parts as fast as the aggregator acks them
 * (at most --inflight batches queued, so the figure is the sustained rate,
 * not the speed of filling memory), with matching window totals, for
 * --duration seconds; then it waits until everything is acked.
 *
 * Every part carries --size bytes received, so the parts the aggregator
 * actually stored are counted from the database (net_rx / size, by
 * scripts/bench.sh through rametrctl), not from this program's count, which
 * it prints:
 *
 *   transport: parts=600000 batches=147 seconds=10.21 rate=58765/s retries=0 spooled=0 lost=0 rejected=0
 *
 * --paired: every second part is a back end's segment whose CE the
 * aggregator must find by pairing its received TCP range with the range the
 * front end's part sent (two tiers, as in seed 000 Fig. 4); the front end's
 * parts then enter the send index and are held until the horizon.
 *
 * The server port must not be one the synthetic connections use (6000,
 * 40000-40999, 50000-50999): a rule on it would match them too.
 *
 * --decode ROUNDS: no aggregator; one batch of the same parts, encoded as the
 * collector encodes it, is decoded ROUNDS times as the aggregator decodes a
 * request, each part into the struct the stitcher works on (rm_wpart):
 *
 *   decode: parts=4096 rounds=2000 seconds=1.234 rate=6639000/s ns_per_part=150.6
 *
 * Usage: bench_transport --aggregator URL --node NAME --spool PATH --server-port P
 *        [--duration S] [--batch-parts N] [--size B] [--inflight N] [--paired]
 *        bench_transport --decode ROUNDS [--batch-parts N] [--size B] [--paired]
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "col_enc.h"
#include "col_sender.h"
#include "rametr.h"
#include "rm_wire.h"
#include "rm_err.h"
#include "banned.h"

#define WIN_NS 1000000000ULL

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void fill_tuple(struct rm_tuple *t, uint64_t cookie, uint32_t laddr, uint32_t lport, uint32_t raddr,
		       uint32_t rport)
{
	memset(t, 0, sizeof(*t));
	t->cookie = cookie;
	t->family = RM_AF_INET;
	t->lport = lport;
	t->rport = rport;
	t->laddr[0] = htonl(laddr);
	t->raddr[0] = htonl(raddr);
}

#define FRONT 0x7f000001u /* 127.0.0.1: the server the rule names */
#define CLIENT 0x7f000002u
#define BACK 0x7f000003u  /* 127.0.0.3:BACK_PORT: a back end no rule names */
#define BACK_PORT 6000
#define CONNS 1000
#define CLIENT_PORT 40000    /* clients' ports: CLIENT_PORT .. + CONNS - 1 */
#define FRONT_OUT_PORT 50000 /* the front end's ports towards the back end */

static uint64_t out_seq[CONNS];

/* Part i of the stream. Plain: a request to the front end, decided by the
 * rule. Paired (every odd part): the back end's segment serving the front
 * end's request; its CE comes from pairing its received TCP range with the
 * range the front end's part (the even part before it) sent. */
static void make_part(struct rm_part *p, uint64_t i, uint64_t win, uint64_t now, int port, int size, int paired)
{
	uint32_t conn = (uint32_t)((paired ? i / 2 : i) % CONNS);

	memset(p, 0, sizeof(*p));
	p->seg_id = (1ULL << 48) | (i + 1);
	p->win = win;
	p->start_ns = now;
	p->end_ns = now + 1000;
	p->cpu_ns = 1000;
	p->rx_bytes = (uint64_t)size;
	p->tx_bytes = (uint64_t)size;
	p->flags = RM_PF_START | RM_PF_END;
	if (!paired || i % 2 == 0) {
		p->pid = 4000;
		p->tid = 4000 + conn % 8;
		memcpy(p->comm, "front", 6);
		fill_tuple(&p->in, 1000 + conn, FRONT, (uint32_t)port, CLIENT, CLIENT_PORT + conn);
		if (!paired) {
			fill_tuple(&p->out, 1000 + conn, FRONT, (uint32_t)port, CLIENT, CLIENT_PORT + conn);
			return;
		}
		fill_tuple(&p->out, 3000 + conn, FRONT, FRONT_OUT_PORT + conn, BACK, BACK_PORT);
		p->flags |= RM_PF_OUT_SEQ;
		p->out_seq_start = out_seq[conn];
		p->out_seq_end = out_seq[conn] + (uint64_t)size;
	} else {
		p->pid = 5000;
		p->tid = 5000 + conn % 8;
		memcpy(p->comm, "back", 5);
		fill_tuple(&p->in, 5000 + conn, BACK, BACK_PORT, FRONT, FRONT_OUT_PORT + conn);
		fill_tuple(&p->out, 5000 + conn, BACK, BACK_PORT, FRONT, FRONT_OUT_PORT + conn);
		p->flags |= RM_PF_IN_SEQ;
		p->in_seq_start = out_seq[conn];
		p->in_seq_end = out_seq[conn] + (uint64_t)size;
		out_seq[conn] += (uint64_t)size;
	}
}

/* The parts of one decoded batch as the stitcher takes them: *n of them (d: scratch, unused). */
static const struct rm_wpart *take_parts(const Rametr__Envelope *env, struct rm_wpart *d, size_t *n)
{
	const struct rm_wbatch *b = rm_wire_batch(env);

	(void)d;
	*n = b->n_parts;
	return b->parts;
}

/* --decode: rounds decodes of one batch of n parts. */
static int bench_decode(long rounds, int n, int size, int paired)
{
	struct col_enc_hdr hdr = { "bench", "replay", 1, 1, WIN_NS, 0 };
	struct col_enc enc = { { NULL, 0, 0, 0 } };
	struct rm_part *parts = calloc((size_t)n, sizeof(*parts));
	struct rm_wpart *got = calloc((size_t)n, sizeof(*got));
	uint64_t now = clock_ns(CLOCK_REALTIME), win = now / WIN_NS, t0, t1, sum = 0;
	struct rm_totals w = { .win = win, .busy_ns = 1 };
	uint8_t *buf = NULL;
	size_t len = 0, np;
	char err[256];
	long r;
	int i, rv = 1;

	if (!parts || !got)
		goto out;
	for (i = 0; i < n; i++)
		make_part(&parts[i], (uint64_t)i, win, now, 8080, size, paired);
	if (col_enc_batch(&enc, &hdr, parts, (size_t)n, &w, 1, NULL, 0, &buf, &len, err, sizeof(err)) != RM_OK) {
		rm_log_error("failed to encode the batch: %s", err);
		goto out;
	}
	t0 = clock_ns(CLOCK_MONOTONIC);
	for (r = 0; r < rounds; r++) {
		Rametr__Envelope *env = NULL;

		if (rm_wire_decode(buf, len, &env, err, sizeof(err)) != RM_OK) {
			rm_log_error("failed to decode the batch: %s", err);
			goto out;
		}
		const struct rm_wpart *ps = take_parts(env, got, &np);

		if (np != (size_t)n)
			goto out;
		sum += ps[n - 1].cpu_ns;
		rm_wire_free(env);
	}
	t1 = clock_ns(CLOCK_MONOTONIC);
	printf("decode: parts=%d rounds=%ld bytes=%zu seconds=%.3f rate=%.0f/s ns_per_part=%.1f\n", n, rounds, len,
	       (double)(t1 - t0) / 1e9, (double)n * (double)rounds * 1e9 / (double)(t1 - t0),
	       (double)(t1 - t0) / ((double)n * (double)rounds));
	rv = sum == (uint64_t)rounds * parts[n - 1].cpu_ns ? 0 : 1;
out:
	col_enc_free(&enc);
	free(buf);
	free(parts);
	free(got);
	return rv;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "aggregator", required_argument, NULL, 'a' }, { "node", required_argument, NULL, 'n' },
		{ "spool", required_argument, NULL, 'S' },      { "server-port", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },   { "batch-parts", required_argument, NULL, 'b' },
		{ "size", required_argument, NULL, 's' },       { "inflight", required_argument, NULL, 'i' },
		{ "paired", no_argument, NULL, 'P' },           { "help", no_argument, NULL, 'h' },
		{ "decode", required_argument, NULL, 'D' },
		{ NULL, 0, NULL, 0 },
	};
	const char *url = NULL, *node = NULL, *spool = NULL;
	int port = -1, batch = 4096, size = 100, inflight = 4, paired = 0, o, rv;
	double duration = 10;
	long decode = 0;
	struct col_sender_cfg cfg;
	struct col_sender_stats ss;
	struct col_sender *s;
	struct rm_part *parts;
	uint64_t offset, t0, t1, stop, seq = 0, nparts = 0, nbatches = 0;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	rm_log_init("bench_transport");
	while ((o = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (o) {
		case 'a': url = optarg; break;
		case 'n': node = optarg; break;
		case 'S': spool = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'd': duration = atof(optarg); break;
		case 'b': batch = atoi(optarg); break;
		case 's': size = atoi(optarg); break;
		case 'i': inflight = atoi(optarg); break;
		case 'P': paired = 1; break;
		case 'D': decode = atol(optarg); break;
		case 'h':
			printf("usage: bench_transport --aggregator URL --node NAME --spool PATH --server-port P\n"
			       "       [--duration S] [--batch-parts N] [--size B] [--inflight N] [--paired]\n"
			       "       bench_transport --decode ROUNDS [--batch-parts N] [--size B] [--paired]\n");
			return 0;
		default: return 2;
		}
	}
	if (decode) {
		if (optind != argc || decode < 1 || batch < 2 || batch > 100000 || batch % 2 || size < 1) {
			rm_log_error("bad arguments (try --help)");
			return 2;
		}
		return bench_decode(decode, batch, size, paired);
	}
	if (optind != argc || !url || !node || !spool || port < 1 || port > 65535 || duration <= 0 || batch < 1 ||
	    batch > 100000 || batch % 2 || size < 1 || inflight < 1 || port == BACK_PORT ||
	    (port >= CLIENT_PORT && port < CLIENT_PORT + CONNS) || (port >= FRONT_OUT_PORT && port < FRONT_OUT_PORT + CONNS)) {
		rm_log_error("bad arguments (try --help)");
		return 2;
	}
	parts = calloc((size_t)batch, sizeof(*parts));
	if (!parts)
		return 1;
	offset = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
	memset(&cfg, 0, sizeof(cfg));
	cfg.url = url;
	cfg.node = node;
	cfg.backend = "replay";
	cfg.window_ns = WIN_NS;
	cfg.clock_offset_ns = (int64_t)offset;
	cfg.ncpu = (uint32_t)(ncpu > 0 ? ncpu : 1);
	cfg.spool_path = spool;
	if ((rv = col_sender_open(&s, &cfg)) != RM_OK) {
		rm_log_error("failed to start the sender: %s", rm_strerror(rv));
		return 1;
	}
	t0 = clock_ns(CLOCK_MONOTONIC);
	stop = t0 + (uint64_t)(duration * 1e9);
	for (;;) {
		uint64_t now = clock_ns(CLOCK_MONOTONIC), win = (now + offset) / WIN_NS;
		struct rm_totals w;
		int i;

		if (now >= stop)
			break;
		col_sender_stats(s, &ss);
		if (ss.queued >= (size_t)inflight) {
			usleep(200);
			continue;
		}
		memset(&w, 0, sizeof(w));
		w.win = win;
		for (i = 0; i < batch; i++) {
			struct rm_part *p = &parts[i];

			make_part(p, seq++, win, now, port, size, paired);
			w.busy_ns += p->cpu_ns;
			w.rx_bytes += p->rx_bytes;
			w.tx_bytes += p->tx_bytes;
		}
		/* capacity grows with the time covered; count it per batch so the
		 * window never holds more busy time than capacity */
		w.capacity_ns = w.busy_ns;
		if ((rv = col_sender_submit(s, parts, (size_t)batch, &w, 1)) != RM_OK) {
			rm_log_error("failed to queue a batch: %s", rm_strerror(rv));
			break;
		}
		nparts += (uint64_t)batch;
		nbatches++;
	}
	rv = col_sender_flush(s, 120000);
	t1 = clock_ns(CLOCK_MONOTONIC);
	col_sender_stats(s, &ss);
	col_sender_close(s);
	free(parts);
	printf("transport: parts=%llu batches=%llu seconds=%.3f rate=%.0f/s retries=%llu spooled=%llu lost=%llu "
	       "rejected=%llu\n",
	       (unsigned long long)nparts, (unsigned long long)nbatches, (double)(t1 - t0) / 1e9,
	       (double)nparts * 1e9 / (double)(t1 - t0), (unsigned long long)ss.retries,
	       (unsigned long long)ss.spooled, (unsigned long long)ss.lost_batches, (unsigned long long)ss.rejected);
	if (rv != RM_OK) {
		rm_log_error("aggregator did not acknowledge everything: %s", rm_strerror(rv));
		return 1;
	}
	return 0;
}
