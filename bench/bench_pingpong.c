/*
 * bench_pingpong.c - a known segment rate for measuring the collector: TCP
 * ping-pong over loopback between client and server threads of this
 * process, paced to a target rate of round trips per second.
 *
 * Each round trip is two segments for the collector: the server's (recv of
 * the request .. send of the reply) and the client's (recv of the reply ..
 * send of the next request). Requests and replies are --size bytes, so the
 * segments actually stored can be counted from the bytes Rametr stored
 * (net_rx / size), independently of this program's own count, which it
 * prints:
 *
 *   pingpong: conns=4 size=64 seconds=10.000 round_trips=250000 rate=25000/s
 *
 * Usage: bench_pingpong --port P [--conns N] [--rate R] [--duration S] [--size B]
 *   --rate R  round trips per second over all connections (0: as fast as possible)
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "banned.h"

#define MAX_CONNS 64
#define MAX_SIZE 65536

static int size = 64;
static double rate_per_conn;
static uint64_t end_ns;

struct conn {
	int cfd, sfd;
	uint64_t trips;
	int err;
	pthread_t ct, st;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void *server_main(void *arg)
{
	struct conn *c = arg;
	char buf[MAX_SIZE];

	for (;;) {
		ssize_t r = recv(c->sfd, buf, (size_t)size, MSG_WAITALL);

		if (r != size || send(c->sfd, buf, (size_t)size, 0) != size)
			break;
	}
	return NULL;
}

static void *client_main(void *arg)
{
	struct conn *c = arg;
	char buf[MAX_SIZE];
	uint64_t next = now_ns(), step = rate_per_conn > 0 ? (uint64_t)(1e9 / rate_per_conn) : 0;

	memset(buf, 'p', (size_t)size);
	while (now_ns() < end_ns) {
		if (step) {
			uint64_t t = now_ns();

			next += step;
			if (t + 100000000ULL < next || next + 100000000ULL < t)
				next = t + step; /* far behind or ahead: restart the schedule, no burst */
			if (next > t) {
				struct timespec ts = { (time_t)(next / 1000000000ULL), (long)(next % 1000000000ULL) };

				clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
			}
		}
		if (send(c->cfd, buf, (size_t)size, 0) != size ||
		    recv(c->cfd, buf, (size_t)size, MSG_WAITALL) != size) {
			c->err = 1;
			break;
		}
		c->trips++;
	}
	shutdown(c->cfd, SHUT_RDWR);
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "port", required_argument, NULL, 'p' }, { "conns", required_argument, NULL, 'c' },
		{ "rate", required_argument, NULL, 'r' }, { "duration", required_argument, NULL, 'd' },
		{ "size", required_argument, NULL, 's' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct conn conns[MAX_CONNS];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int port = -1, nconns = 4, one = 1, lfd, i, o, errs = 0;
	double rate = 25000, duration = 10;
	uint64_t t0, t1, trips = 0;

	while ((o = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (o) {
		case 'p': port = atoi(optarg); break;
		case 'c': nconns = atoi(optarg); break;
		case 'r': rate = atof(optarg); break;
		case 'd': duration = atof(optarg); break;
		case 's': size = atoi(optarg); break;
		case 'h':
			printf("usage: bench_pingpong --port P [--conns N] [--rate R] [--duration S] [--size B]\n");
			return 0;
		default: return 2;
		}
	}
	if (optind != argc || port < 0 || port > 65535 || nconns < 1 || nconns > MAX_CONNS || rate < 0 ||
	    duration <= 0 || size < 1 || size > MAX_SIZE) {
		fprintf(stderr, "bench_pingpong: bad arguments (try --help)\n");
		return 2;
	}
	rate_per_conn = rate / nconns;
	a.sin_port = htons((uint16_t)port);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, MAX_CONNS)) {
		fprintf(stderr, "bench_pingpong: failed to listen on '127.0.0.1:%d'\n", port);
		return 1;
	}
	for (i = 0; i < nconns; i++) {
		conns[i].cfd = socket(AF_INET, SOCK_STREAM, 0);
		if (conns[i].cfd < 0 || connect(conns[i].cfd, (struct sockaddr *)&a, sizeof(a)) ||
		    (conns[i].sfd = accept(lfd, NULL, NULL)) < 0) {
			fprintf(stderr, "bench_pingpong: failed to connect to '127.0.0.1:%d'\n", port);
			return 1;
		}
		setsockopt(conns[i].cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(conns[i].sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	t0 = now_ns();
	end_ns = t0 + (uint64_t)(duration * 1e9);
	for (i = 0; i < nconns; i++) {
		pthread_create(&conns[i].st, NULL, server_main, &conns[i]);
		pthread_create(&conns[i].ct, NULL, client_main, &conns[i]);
	}
	for (i = 0; i < nconns; i++) {
		pthread_join(conns[i].ct, NULL);
		pthread_join(conns[i].st, NULL);
		trips += conns[i].trips;
		errs += conns[i].err;
		close(conns[i].cfd);
		close(conns[i].sfd);
	}
	t1 = now_ns();
	close(lfd);
	printf("pingpong: conns=%d size=%d seconds=%.3f round_trips=%llu rate=%.0f/s\n", nconns, size,
	       (double)(t1 - t0) / 1e9, (unsigned long long)trips, (double)trips * 1e9 / (double)(t1 - t0));
	if (errs) {
		fprintf(stderr, "bench_pingpong: %d connections failed\n", errs);
		return 1;
	}
	return 0;
}
