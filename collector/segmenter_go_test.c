/*
 * segmenter_go_test.c - the segmenter's goroutine rules (segmenter.h,
 * rm_go_*) on recorded streams of a Go program's events (col_events.h:
 * "go" for a thread leaving its goroutine / runtime.execute, "goready" for
 * runtime.ready), replayed by the replay backend, which runs the same code
 * as rametr.bpf.c's probes. Each case of the table is a stream with its hand
 * computation beside it: the CPU charged per tenant (the inbound remote
 * port of the parts), the unsegmented CPU, and the replay's goroutine
 * counters; every window's identity is checked too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "col_replay.h"
#include "rm_err.h"
#include "rm_test.h"
#include "banned.h"

#define HDR "rametr-events 1 window_ns=1000000 offset_ns=0 ncpu=2\n"
#define A " fam=4 laddr=10.0.0.1:80 raddr=10.0.0.2:5000 srv=1"
#define B " fam=4 laddr=10.0.0.1:80 raddr=10.0.0.3:6000 srv=1"
#define NPORTS 2

static const unsigned ports[NPORTS] = { 5000, 6000 };

struct go_case {
	const char *name;
	const char *stream;
	uint64_t cpu[NPORTS];  /* CPU of the parts whose inbound remote port is ports[i] */
	uint64_t unseg;        /* window 0's unsegmented CPU */
	uint64_t conflicts, inherits;
	int follow_replies;    /* replayed with the follow-replies option */
};

static const struct go_case cases_go[] = {
	{ "a goroutine's segment follows it to another thread",
	  HDR "1000 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	      "1000 1 switch prev=0 prev_state=S next=102 next_pid=100\n"
	      "1100 0 go tid=101 pid=100 goid=7\n"          /* [1000,1100) unsegmented: 100 */
	      "1200 0 recv tid=101 pid=100 sock=1 bytes=100" A "\n" /* G7 held no request: 100 */
	      "1500 0 go tid=101 pid=100 goid=0\n"          /* G7 parks: 300 to its segment */
	      "1800 0 go tid=101 pid=100 goid=9\n"          /* the scheduler: 300 unsegmented */
	      "2000 1 go tid=102 pid=100 goid=7\n"          /* cpu 1 [1000,2000): 1000 unsegmented */
	      "2600 1 send tid=102 pid=100 sock=1 bytes=50" A "\n" /* G7 on thread 102: 600 */
	      "2700 1 go tid=102 pid=100 goid=0\n"          /* the reply's tail: 100 */
	      "2800 0 switch prev=101 prev_pid=100 prev_state=S next=0\n" /* G9 held none: 1000 */
	      "2800 1 switch prev=102 prev_pid=100 prev_state=S next=0\n", /* 100 */
	  { 1000, 0 }, 100 + 100 + 300 + 1000 + 1000 + 100, 0, 0, 0 },
	{ "two goroutines on one thread keep their own requests",
	  HDR "1000 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	      "1000 0 go tid=101 pid=100 goid=1\n"
	      "1100 0 recv tid=101 pid=100 sock=1 bytes=100" A "\n" /* 100 unsegmented */
	      "1400 0 go tid=101 pid=100 goid=0\n"          /* G1: 300 */
	      "1450 0 go tid=101 pid=100 goid=2\n"          /* 50 unsegmented */
	      "1500 0 recv tid=101 pid=100 sock=2 bytes=100" B "\n" /* 50 unsegmented */
	      "2500 0 go tid=101 pid=100 goid=0\n"          /* G2: 1000 */
	      "2500 0 go tid=101 pid=100 goid=1\n"
	      "2700 0 send tid=101 pid=100 sock=1 bytes=10" A "\n" /* G1: 200 */
	      "2700 0 go tid=101 pid=100 goid=0\n"
	      "2700 0 go tid=101 pid=100 goid=2\n"
	      "3000 0 send tid=101 pid=100 sock=2 bytes=10" B "\n" /* G2: 300 */
	      "3000 0 go tid=101 pid=100 goid=0\n"
	      "3000 0 switch prev=101 prev_pid=100 prev_state=S next=0\n",
	  { 500, 1300 }, 200, 0, 0, 0 },
	{ "a worker readied by a handler inherits its request; its next job replaces it",
	  HDR "1000 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	      "1000 0 go tid=101 pid=100 goid=1\n"
	      "1000 0 recv tid=101 pid=100 sock=1 bytes=100" A "\n"
	      "1100 0 goready tid=101 pid=100 goid=3\n"     /* the job to worker G3 */
	      "1100 0 go tid=101 pid=100 goid=0\n"          /* handler G1: 100 */
	      "1100 0 go tid=101 pid=100 goid=3\n"
	      "1900 0 goready tid=101 pid=100 goid=1\n"     /* the answer: G3 takes up G1's request, the same */
	      "1900 0 go tid=101 pid=100 goid=0\n"          /* G3 for A: 800 */
	      "1900 0 go tid=101 pid=100 goid=1\n"
	      "2000 0 send tid=101 pid=100 sock=1 bytes=10" A "\n" /* G1: 100 */
	      "2000 0 go tid=101 pid=100 goid=0\n"
	      "2000 0 go tid=101 pid=100 goid=2\n"
	      "2000 0 recv tid=101 pid=100 sock=2 bytes=100" B "\n"
	      "2100 0 goready tid=101 pid=100 goid=3\n"     /* G3's inherited request is replaced */
	      "2100 0 go tid=101 pid=100 goid=0\n"          /* handler G2: 100 */
	      "2100 0 go tid=101 pid=100 goid=3\n"
	      "2500 0 go tid=101 pid=100 goid=0\n"          /* G3 for B: 400 */
	      "2500 0 go tid=101 pid=100 goid=2\n"
	      "2600 0 send tid=101 pid=100 sock=2 bytes=10" B "\n" /* G2: 100 */
	      "2600 0 go tid=101 pid=100 goid=0\n"
	      "2600 0 switch prev=101 prev_pid=100 prev_state=S next=0\n",
	  { 1000, 600 }, 0, 0, 3, 0 },
	{ "a goroutine whose state another thread still holds runs without it",
	  HDR "1000 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	      "1000 1 switch prev=0 prev_state=S next=102 next_pid=100\n"
	      "1000 0 go tid=101 pid=100 goid=5\n"
	      "1000 0 recv tid=101 pid=100 sock=1 bytes=100" A "\n"
	      "1200 1 go tid=102 pid=100 goid=5\n"          /* 101 still holds G5: 200 unsegmented */
	      "1400 1 go tid=102 pid=100 goid=0\n"          /* G5 without its state: 200 unsegmented */
	      "1500 0 go tid=101 pid=100 goid=0\n"          /* 101 leaves G5: 500 to its request */
	      "1600 1 go tid=102 pid=100 goid=5\n"          /* 200 unsegmented; G5's state is loaded */
	      "1700 1 send tid=102 pid=100 sock=1 bytes=10" A "\n" /* 100 */
	      "1700 1 go tid=102 pid=100 goid=0\n"
	      "1700 0 switch prev=101 prev_pid=100 prev_state=S next=0\n" /* 200 unsegmented */
	      "1700 1 switch prev=102 prev_pid=100 prev_state=S next=0\n",
	  { 600, 0 }, 200 + 200 + 200 + 200, 1, 0, 0 },
	{ "a goroutine's wait ends the tail of the request it answered",
	  HDR "1000 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	      "1000 0 go tid=101 pid=100 goid=1\n"
	      "1000 0 recv tid=101 pid=100 sock=1 bytes=100" A "\n"
	      "1300 0 send tid=101 pid=100 sock=1 bytes=10" A "\n" /* 300 */
	      "1400 0 go tid=101 pid=100 goid=0\n"          /* the reply's tail: 100 */
	      "1400 0 switch prev=101 prev_pid=100 prev_state=S next=0\n"
	      "2000 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	      "2000 0 go tid=101 pid=100 goid=1\n"
	      "2100 0 recv tid=101 pid=100 sock=1 bytes=100" A "\n" /* its wait ended the tail: 100 */
	      "2400 0 send tid=101 pid=100 sock=1 bytes=10" A "\n" /* 300 */
	      "2400 0 go tid=101 pid=100 goid=0\n"
	      "2400 0 switch prev=101 prev_pid=100 prev_state=S next=0\n",
	  { 700, 0 }, 100, 0, 0, 0 },
	{ "follow-replies: a goroutine's wait anchors its reply's tail to the request answered",
	  HDR "1000 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	      "1000 0 go tid=101 pid=100 goid=1\n"
	      "1000 0 recv tid=101 pid=100 sock=1 bytes=100" A "\n"
	      "1300 0 send tid=101 pid=100 sock=1 bytes=10" A "\n" /* 300 */
	      "1400 0 go tid=101 pid=100 goid=0\n"          /* a chain, anchored to A at the wait: 100 */
	      "1500 0 go tid=101 pid=100 goid=2\n"          /* the scheduler: 100 unsegmented */
	      "1500 0 recv tid=101 pid=100 sock=2 bytes=100" B "\n"
	      "1800 0 send tid=101 pid=100 sock=2 bytes=10" B "\n" /* 300 */
	      "1800 0 go tid=101 pid=100 goid=0\n"
	      "1800 0 switch prev=101 prev_pid=100 prev_state=S next=0\n",
	  { 400, 300 }, 100, 0, 0, 1 },
	{ "a busy worker back at its queue takes up the job of the handler waiting to hand it over",
	  HDR "1000 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	      "1000 0 go tid=101 pid=100 goid=3\n"          /* worker G3, holding nothing: 100 unsegmented */
	      "1100 0 go tid=101 pid=100 goid=0\n"
	      "1100 0 go tid=101 pid=100 goid=1\n"
	      "1100 0 recv tid=101 pid=100 sock=1 bytes=100" A "\n"
	      "1200 0 go tid=101 pid=100 goid=0\n"          /* handler G1 waits to hand its job: 100 */
	      "1200 0 go tid=101 pid=100 goid=3\n"
	      "1300 0 goready tid=101 pid=100 goid=1\n"     /* G3 takes the job, readying G1: 100 unsegmented */
	      "2000 0 go tid=101 pid=100 goid=0\n"          /* G3 for A: 700 */
	      "2000 0 go tid=101 pid=100 goid=2\n"
	      "2000 0 recv tid=101 pid=100 sock=2 bytes=100" B "\n"
	      "2100 0 go tid=101 pid=100 goid=0\n"          /* handler G2 waits: 100 */
	      "2100 0 go tid=101 pid=100 goid=3\n"
	      "2200 0 goready tid=101 pid=100 goid=2\n"     /* G3 (A's, inherited) takes B's job: 100 to A */
	      "2500 0 go tid=101 pid=100 goid=0\n"          /* G3 for B: 300 */
	      "2500 0 go tid=101 pid=100 goid=1\n"
	      "2600 0 send tid=101 pid=100 sock=1 bytes=10" A "\n" /* 100 */
	      "2600 0 go tid=101 pid=100 goid=0\n"
	      "2600 0 go tid=101 pid=100 goid=2\n"
	      "2700 0 send tid=101 pid=100 sock=2 bytes=10" B "\n" /* 100 */
	      "2700 0 go tid=101 pid=100 goid=0\n"
	      "2700 0 switch prev=101 prev_pid=100 prev_state=S next=0\n",
	  { 100 + 700 + 100 + 100, 100 + 300 + 100 }, 200, 0, 2, 0 },
	{ "follow-replies: the runtime waking an idle thread is no hand-off of the goroutine's request",
	  HDR "1000 0 switch prev=0 prev_state=S next=101 next_pid=100\n"
	      "1000 0 go tid=101 pid=100 goid=1\n"
	      "1000 0 recv tid=101 pid=100 sock=1 bytes=100" A "\n"
	      "1100 0 wakeup tid=102 by=101\n"              /* a futex wake of an idle thread */
	      "1100 0 goready tid=101 pid=100 goid=3\n"     /* G1 still holds A: G3 inherits it */
	      "1200 0 go tid=101 pid=100 goid=0\n"          /* G1: 200 */
	      "1200 0 switch prev=101 prev_pid=100 prev_state=S next=0\n"
	      "1200 1 switch prev=0 prev_state=S next=102 next_pid=100\n"
	      "1200 1 go tid=102 pid=100 goid=3\n"
	      "1700 1 go tid=102 pid=100 goid=0\n"          /* G3 for A: 500 */
	      "1700 1 switch prev=102 prev_pid=100 prev_state=S next=0\n",
	  { 700, 0 }, 0, 0, 1, 1 },
};

/* Replays c and checks its figures; returns the number of mismatches (each printed). */
static int run_case(const struct go_case *c)
{
	struct col_replay_capture cap;
	struct col_replay_stats st;
	struct col_replay_opts o;
	struct col_sink sink;
	const struct rm_totals *w;
	uint64_t got[NPORTS] = { 0 };
	char err[512];
	size_t i, k;
	int rv, bad = 0;

	col_replay_capture_init(&cap);
	sink = col_replay_capture_sink(&cap);
	memset(&o, 0, sizeof(o));
	memset(&st, 0, sizeof(st));
	o.err = err;
	o.errlen = sizeof(err);
	o.stats = &st;
	o.follow_replies = c->follow_replies;
	rv = col_replay_buf(c->stream, strlen(c->stream), "inline", &sink, &o);
	if (rv != RM_OK) {
		fprintf(stderr, "\n%s: replay: %s\n", c->name, err);
		col_replay_capture_release(&cap);
		return 1;
	}
	if (col_replay_capture_check(&cap, NULL, err, sizeof(err)) != RM_OK) {
		fprintf(stderr, "\n%s: identity: %s\n", c->name, err);
		bad++;
	}
	for (i = 0; i < cap.nparts; i++)
		for (k = 0; k < NPORTS; k++)
			if (cap.parts[i].in.rport == ports[k])
				got[k] += cap.parts[i].cpu_ns;
	for (k = 0; k < NPORTS; k++) {
		if (got[k] != c->cpu[k]) {
			fprintf(stderr, "\n%s: port %u charged %llu ns, expected %llu\n", c->name, ports[k],
				(unsigned long long)got[k], (unsigned long long)c->cpu[k]);
			bad++;
		}
	}
	w = col_replay_capture_window(&cap, 0);
	if (!w || w->unseg_cpu_ns != c->unseg) {
		fprintf(stderr, "\n%s: unsegmented %llu ns, expected %llu\n", c->name,
			w ? (unsigned long long)w->unseg_cpu_ns : 0ULL, (unsigned long long)c->unseg);
		bad++;
	}
	if (st.go_conflicts != c->conflicts || st.go_inherits != c->inherits) {
		fprintf(stderr, "\n%s: %llu conflicts, %llu inherited, expected %llu and %llu\n", c->name,
			(unsigned long long)st.go_conflicts, (unsigned long long)st.go_inherits,
			(unsigned long long)c->conflicts, (unsigned long long)c->inherits);
		bad++;
	}
	col_replay_capture_release(&cap);
	return bad;
}

static void test_cases(void)
{
	size_t i;

	for (i = 0; i < sizeof(cases_go) / sizeof(cases_go[0]); i++)
		CU_ASSERT_EQUAL(run_case(&cases_go[i]), 0);
}

/* The go events round-trip through the writer, and bad ones are refused. */
static void test_format(void)
{
	static const char *const bad[] = {
		HDR "100 0 go tid=1 pid=1\n",                              /* no goid */
		HDR "100 0 goready tid=1 pid=1 goid=0\n",                  /* a goroutine readied is one */
		HDR "100 0 go tid=1 pid=1 goid=9223372036854775808\n",     /* beyond int64 */
		HDR "100 0 go tid=0 pid=1 goid=1\n",
	};
	struct col_replay_capture cap;
	struct col_sink sink;
	struct col_event ev;
	char line[COL_EVENTS_LINE_MAX];
	size_t i;

	memset(&ev, 0, sizeof(ev));
	ev.ts_ns = 100;
	ev.type = COL_EV_GOREADY;
	ev.u.go.tid = 7;
	ev.u.go.pid = 6;
	ev.u.go.goid = 42;
	CU_ASSERT_EQUAL(col_events_format(&ev, line, sizeof(line)), RM_OK);
	CU_ASSERT_STRING_EQUAL(line, "100 0 goready tid=7 pid=6 goid=42\n");
	ev.u.go.goid = 0;
	CU_ASSERT_EQUAL(col_events_format(&ev, line, sizeof(line)), RM_EINVAL);
	ev.type = COL_EV_GO;
	CU_ASSERT_EQUAL(col_events_format(&ev, line, sizeof(line)), RM_OK);
	CU_ASSERT_STRING_EQUAL(line, "100 0 go tid=7 pid=6 goid=0\n");
	col_replay_capture_init(&cap);
	sink = col_replay_capture_sink(&cap);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CU_ASSERT_EQUAL(col_replay_buf(bad[i], strlen(bad[i]), "inline", &sink, NULL), RM_EPROTO);
	col_replay_capture_release(&cap);
}

static CU_TestInfo cases[] = {
	{ "goroutine streams: CPU per request, unsegmented, conflicts, hand-offs", test_cases },
	{ "go and goready events: writer and refusals", test_format },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("segmenter_go", cases)
