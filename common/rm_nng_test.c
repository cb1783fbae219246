/*
 * rm_nng_test.c - rm_nng_close_dialer on real nng sockets: a close right
 * after a nonblocking dial waits for the connection to attach (so the ASan
 * pass finds nothing lost), and gives up after its bound when nobody listens.
 */
#include <stdio.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "rm_clock.h"
#include "rm_nng.h"
#include "rm_test.h"

struct counts {
	atomic_int attached; /* now */
	atomic_int ever;     /* ADD_POST seen */
};

static void on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct counts *c = arg;

	(void)p;
	if (ev == NNG_PIPE_EV_ADD_POST) {
		atomic_fetch_add(&c->attached, 1);
		atomic_fetch_add(&c->ever, 1);
	} else {
		atomic_fetch_sub(&c->attached, 1);
	}
}

/* One req socket counting its connections into c, dialing url without waiting; 0 or an nng error. */
static int dial(nng_socket *s, const char *url, struct counts *c)
{
	int rv;

	if ((rv = nng_req0_open(s)) != 0)
		return rv;
	if ((rv = nng_pipe_notify(*s, NNG_PIPE_EV_ADD_POST, on_pipe, c)) != 0 ||
	    (rv = nng_pipe_notify(*s, NNG_PIPE_EV_REM_POST, on_pipe, c)) != 0 ||
	    (rv = nng_dial(*s, url, NULL, NNG_FLAG_NONBLOCK)) != 0) {
		nng_close(*s);
		return rv;
	}
	return 0;
}

static void test_close_after_dial(void)
{
	char url[300];
	nng_socket rep, req;
	struct counts c;
	int i, attached = 0;

	snprintf(url, sizeof(url), "ipc://%s/close.ipc", rm_test_tmpdir());
	CU_ASSERT_EQUAL_FATAL(nng_rep0_open(&rep), 0);
	CU_ASSERT_EQUAL_FATAL(nng_listen(rep, url, NULL, 0), 0);
	for (i = 0; i < 100; i++) {
		atomic_init(&c.attached, 0);
		atomic_init(&c.ever, 0);
		CU_ASSERT_EQUAL_FATAL(dial(&req, url, &c), 0);
		rm_nng_close_dialer(req, &c.attached, RM_NNG_SETTLE_MS);
		attached += atomic_load(&c.ever) > 0;
	}
	nng_close(rep);
	fprintf(stderr, "%d of 100 closed after their connection attached\n", attached);
	/* every close waited for its connection: none was closed negotiating */
	CU_ASSERT_EQUAL(attached, 100);
}

static void test_nobody_listens(void)
{
	char url[300];
	nng_socket req;
	struct counts c;
	uint64_t t0, ms;

	snprintf(url, sizeof(url), "ipc://%s/nobody.ipc", rm_test_tmpdir());
	atomic_init(&c.attached, 0);
	atomic_init(&c.ever, 0);
	CU_ASSERT_EQUAL_FATAL(dial(&req, url, &c), 0);
	t0 = rm_clock_mono_ns();
	rm_nng_close_dialer(req, &c.attached, 50);
	ms = (rm_clock_mono_ns() - t0) / 1000000;
	fprintf(stderr, "closed after %llu ms with nobody listening\n", (unsigned long long)ms);
	CU_ASSERT_EQUAL(atomic_load(&c.ever), 0);
	CU_ASSERT(ms >= 50);
	CU_ASSERT(ms < 5000);
}

static CU_TestInfo cases[] = {
	{ "a close right after a dial waits for the connection to attach", test_close_after_dial },
	{ "with nobody listening a close gives up after its bound", test_nobody_listens },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("rm_nng", cases)
