/*
 * col_tc_test.c - admission throttling on the running kernel, in a network
 * namespace of its own (the loopback of this test only): an event-loop
 * server (one thread serves both CEs) in this process; throttling c2's
 * inbound bytes at the tc hook caps c2's request rate while c3's requests,
 * served by the same thread, keep their pace; the expiry releases it.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

#include "rm_test.h"
#include "col_tc.h"
#include "rm_err.h"

#define REQ_BYTES 100

static int lfd;
static uint16_t port;
static atomic_int stop;
static atomic_ulong served[2];

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One thread, poll over the listener and every connection. */
static void *loop_main(void *arg)
{
	struct pollfd pf[8];
	int n = 1, i, who[8];
	char buf[4096];

	(void)arg;
	pf[0].fd = lfd;
	pf[0].events = POLLIN;
	while (!atomic_load(&stop)) {
		if (poll(pf, (nfds_t)n, 50) <= 0)
			continue;
		if ((pf[0].revents & POLLIN) && n < 8) {
			struct sockaddr_in a;
			socklen_t al = sizeof(a);
			int fd = accept(lfd, (struct sockaddr *)&a, &al);

			if (fd >= 0) {
				pf[n].fd = fd;
				pf[n].events = POLLIN;
				who[n] = ((ntohl(a.sin_addr.s_addr) & 0xff) == 2) ? 0 : 1;
				n++;
			}
		}
		for (i = 1; i < n; i++) {
			ssize_t r;
			int k;

			if (!(pf[i].revents & POLLIN))
				continue;
			r = recv(pf[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (r <= 0)
				continue;
			/* one reply per complete request, 1 ms of CPU each */
			for (k = 0; k < r / REQ_BYTES; k++) {
				uint64_t end = now_ns(CLOCK_THREAD_CPUTIME_ID) + 1000000;

				while (now_ns(CLOCK_THREAD_CPUTIME_ID) < end)
					;
				send(pf[i].fd, "ok\n", 3, MSG_NOSIGNAL);
				atomic_fetch_add(&served[who[i]], 1);
			}
		}
	}
	for (i = 1; i < n; i++)
		close(pf[i].fd);
	return NULL;
}

struct cli {
	int fd;
	pthread_t th;
};

static void *cli_main(void *arg)
{
	struct cli *c = arg;
	char req[REQ_BYTES], buf[16];

	memset(req, 'r', sizeof(req));
	while (!atomic_load(&stop))
		if (send(c->fd, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req) ||
		    recv(c->fd, buf, 3, MSG_WAITALL) != 3)
			break;
	return NULL;
}

static void cli_start(struct cli *c, const char *src)
{
	struct sockaddr_in a = { .sin_family = AF_INET }, b = { .sin_family = AF_INET };
	struct timeval tv = { 0, 300000 };

	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	inet_pton(AF_INET, src, &b.sin_addr);
	CU_ASSERT_FATAL(bind(c->fd, (struct sockaddr *)&b, sizeof(b)) == 0);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	a.sin_port = htons(port);
	CU_ASSERT_FATAL(connect(c->fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	pthread_create(&c->th, NULL, cli_main, c);
}

static void rates(int ms, double *r2, double *r3)
{
	unsigned long a = atomic_load(&served[0]), b = atomic_load(&served[1]);

	usleep((useconds_t)ms * 1000);
	*r2 = (atomic_load(&served[0]) - a) * 1000.0 / ms;
	*r3 = (atomic_load(&served[1]) - b) * 1000.0 / ms;
}

static void test_police(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	struct col_tc_cfg cfg = { "lo", 0 };
	struct rm_match m;
	struct col_throttle_cmd cmd = { 0 };
	struct col_tc_stats st;
	struct col_tc *t = NULL;
	struct cli c2, c3;
	pthread_t loop;
	double r2a, r3a, r2b, r3b, r2c, r3c;
	char err[256] = "";
	int64_t expires;

	if (geteuid() != 0)
		RM_TEST_SKIP("needs root");
	/* a network namespace of our own: its loopback carries only this test */
	CU_ASSERT_FATAL(unshare(CLONE_NEWNET) == 0);
	CU_ASSERT_FATAL(system("ip link set lo up") == 0);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	listen(lfd, 8);
	getsockname(lfd, (struct sockaddr *)&a, &al);
	port = ntohs(a.sin_port);
	pthread_create(&loop, NULL, loop_main, NULL);
	CU_ASSERT_EQUAL_FATAL(col_tc_open(&t, &cfg), RM_OK);
	cli_start(&c2, "127.0.0.2");
	cli_start(&c3, "127.0.0.3");
	usleep(200000);
	rates(1000, &r2a, &r3a);

	/* c2 at 20 requests/s worth of inbound bytes, for 3 s */
	memset(&m, 0, sizeof(m));
	m.family = 2;
	inet_pton(AF_INET, "127.0.0.2", m.addr);
	m.prefix = 32;
	m.cport_hi = 65535;
	m.sport_lo = m.sport_hi = port;
	expires = (int64_t)now_ns(CLOCK_REALTIME) + 3000000000ll;
	cmd.id = 1;
	cmd.ce = "c2";
	cmd.resource = "cpu";
	cmd.cap_permille = 10;
	cmd.expires_unix_ns = expires;
	cmd.match = &m;
	cmd.nmatch = 1;
	cmd.rx_rate_bps = 0;
	CU_ASSERT_EQUAL(col_tc_apply(t, &cmd, err, sizeof(err)), RM_EINVAL);  /* no rate */
	CU_ASSERT(strstr(err, "no inbound rate") != NULL);
	cmd.rx_rate_bps = 20 * REQ_BYTES;
	/* the checks of per-thread throttling apply here too (col_slots_check) */
	cmd.ce = "c 2";
	CU_ASSERT_EQUAL(col_tc_apply(t, &cmd, err, sizeof(err)), RM_EINVAL);
	CU_ASSERT(strstr(err, "bad CE name") != NULL);
	cmd.ce = "c2";
	m.sport_lo = port + 1;
	CU_ASSERT_EQUAL(col_tc_apply(t, &cmd, err, sizeof(err)), RM_EINVAL);
	CU_ASSERT(strstr(err, "port range") != NULL);
	m.sport_lo = port;
	col_tc_stats(t, &st);
	CU_ASSERT_EQUAL(st.active, 0);
	CU_ASSERT_EQUAL_FATAL(col_tc_apply(t, &cmd, err, sizeof(err)), RM_OK);
	usleep(500000);   /* the burst (100 ms of the rate: 2 requests) drains */
	rates(1500, &r2b, &r3b);
	col_tc_stats(t, &st);
	fprintf(stderr, "\n  event loop, before: c2 %.0f req/s, c3 %.0f req/s; c2 policed at 20 req/s: "
			"c2 %.0f req/s, c3 %.0f req/s; %" PRIu64 " bytes passed, %" PRIu64 " dropped\n",
		r2a, r3a, r2b, r3b, st.passed, st.dropped);
	CU_ASSERT(r2b <= 30);                 /* the token rate, plus a little */
	CU_ASSERT(st.dropped > 0 || r2a <= 30);
	/* the same thread serves c3: it is not held back by c2's throttle */
	CU_ASSERT(r3b >= 0.5 * r3a || r3b >= 5 * r2b);
	CU_ASSERT_EQUAL(st.active, 1);
	while ((int64_t)now_ns(CLOCK_REALTIME) < expires + 200000000ll)
		usleep(50000);
	col_tc_stats(t, &st);
	CU_ASSERT_EQUAL(st.active, 0);
	CU_ASSERT_EQUAL(st.expired, 1);
	usleep(600000);   /* a dropped segment's retransmission (RTO >= 200 ms) */
	rates(1000, &r2c, &r3c);
	fprintf(stderr, "  after expiry: c2 %.0f req/s, c3 %.0f req/s\n", r2c, r3c);
	CU_ASSERT(r2c > r2b);
	atomic_store(&stop, 1);
	shutdown(c2.fd, SHUT_RDWR);
	shutdown(c3.fd, SHUT_RDWR);
	pthread_join(c2.th, NULL);
	pthread_join(c3.th, NULL);
	close(c2.fd);
	close(c3.fd);
	pthread_join(loop, NULL);
	close(lfd);
	col_tc_close(t);
}

static CU_TestInfo cases[] = {
	{ "an event-loop server: one CE's inbound requests policed, the other's not slowed, expiry",
	  test_police },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_tc", cases)
