/*
 * col_replay_test.c - tests of the event stream format (col_events.h) and
 * of the replay backend's mechanics (col_replay.h): malformed and
 * inconsistent streams rejected with "name:line: message", the writer's
 * round trip, merging of CPUs by time, window reports and capacity, sink
 * errors, limits, the file API and the capture sink's identity check. The
 * segmenter's behaviour itself is tested in segmenter_test.c.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "col_replay.h"
#include "rm_err.h"
#include "rm_test.h"
#include "banned.h"

#ifndef COL_TESTDATA
#error "COL_TESTDATA must name the testdata directory"
#endif

static const char *const testdata_files[] = { "simple.events", "preempt.events", "fork.events", "eventloop.events",
					       "disk.events", "udp.events" };

#define HDR "rametr-events 1 window_ns=1000 offset_ns=0 ncpu=2\n"

/* Replays stream into *cap with the identity checked; returns the replay's rv, err filled. */
static int replay_into(const char *stream, size_t len, struct col_replay_capture *cap, struct col_replay_stats *st,
		       char *err, size_t errlen)
{
	struct col_sink sink = col_replay_capture_sink(cap);
	struct col_replay_opts o;
	char cerr[512];
	int rv;

	memset(&o, 0, sizeof(o));
	o.err = err;
	o.errlen = errlen;
	o.stats = st;
	rv = col_replay_buf(stream, len, "t.events", &sink, &o);
	if (rv == RM_OK) {
		int crv = col_replay_capture_check(cap, NULL, cerr, sizeof(cerr));

		if (crv != RM_OK)
			fprintf(stderr, "\nidentity: %s\n", cerr);
		CU_ASSERT_EQUAL(crv, RM_OK);
	}
	return rv;
}

static int slurp(const char *path, char **out, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return -1;
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
	    !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	buf[n] = '\0';
	*out = buf;
	*len = (size_t)n;
	return 0;
}

/* ---- malformed streams ---- */

struct bad_case {
	const char *stream;
	int rv;
	const char *msg; /* the whole message, "t.events:<line>: ..." */
};

static const struct bad_case bad_cases[] = {
	{ "", RM_EPROTO, "t.events:1: missing header 'rametr-events 1 window_ns=<n> offset_ns=<n> ncpu=<n>'" },
	{ "# only a comment\n\n", RM_EPROTO,
	  "t.events:2: missing header 'rametr-events 1 window_ns=<n> offset_ns=<n> ncpu=<n>'" },
	{ "hello world\n", RM_EPROTO,
	  "t.events:1: expected header 'rametr-events 1 window_ns=<n> offset_ns=<n> ncpu=<n>', got 'hello'" },
	{ "# c\nrametr-events 2 window_ns=1000 offset_ns=0 ncpu=1\n", RM_EVERSION,
	  "t.events:2: unsupported format version '2' (this reader knows 1)" },
	{ "rametr-events 1 window_ns=1000 offset_ns=0\n", RM_EPROTO, "t.events:1: header lacks 'ncpu'" },
	{ "rametr-events 1 window_ns=1000 offset_ns=9223372036854775808 ncpu=1\n", RM_EPROTO,
	  "t.events:1: invalid value '9223372036854775808' for 'offset_ns' (expected 0 .. 2^63-1)" },
	{ "rametr-events 1 window_ns=0 offset_ns=0 ncpu=1\n", RM_EPROTO,
	  "t.events:1: invalid value '0' for 'window_ns' (expected 1 .. 2^62)" },
	{ "rametr-events 1 window_ns=1000 offset_ns=0 ncpu=1 color=red\n", RM_EPROTO,
	  "t.events:1: unknown header key 'color'" },
	{ "rametr-events 1 window_ns=4611686018427387904 offset_ns=0 ncpu=2\n", RM_EPROTO,
	  "t.events:1: ncpu * window_ns exceeds 2^62" },
	{ HDR "100 0 switch prev=0 prev_state=S next=101\n200 0 foo tid=1\n", RM_EPROTO,
	  "t.events:3: unknown event type 'foo'" },
	{ HDR "\n# comment\n100 0 recv tid=101 pid=100 bytes=1\n", RM_EPROTO, "t.events:4: 'recv' needs key 'sock'" },
	{ HDR "100 0 recv tid=101 pid=100 sock=1 bytes=1 color=red\n", RM_EPROTO,
	  "t.events:2: unknown key 'color' for 'recv'" },
	{ HDR "100 0 recv tid=101 tid=102 pid=100 sock=1 bytes=1\n", RM_EPROTO, "t.events:2: duplicate key 'tid'" },
	{ HDR "100 0 recv tid=abc pid=100 sock=1 bytes=1\n", RM_EPROTO,
	  "t.events:2: invalid value 'abc' for 'tid' (expected 1 .. 4294967295)" },
	{ HDR "100 0 recv tid=0 pid=100 sock=1 bytes=1\n", RM_EPROTO,
	  "t.events:2: invalid value '0' for 'tid' (expected 1 .. 4294967295)" },
	{ HDR "100 0 recv tid=4294967296 pid=100 sock=1 bytes=1\n", RM_EPROTO,
	  "t.events:2: invalid value '4294967296' for 'tid' (expected 1 .. 4294967295)" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=1 seq=4294967296\n", RM_EPROTO,
	  "t.events:2: invalid value '4294967296' for 'seq' (expected 0 .. 4294967295)" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=281474976710657\n", RM_EPROTO,
	  "t.events:2: invalid value '281474976710657' for 'bytes' (expected 0 .. 281474976710656)" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=18446744073709551616\n", RM_EPROTO,
	  "t.events:2: invalid value '18446744073709551616' for 'bytes' (expected 0 .. 281474976710656)" },
	{ HDR "100 2 wakeup tid=1\n", RM_EPROTO, "t.events:2: cpu 2 out of range (ncpu=2)" },
	{ HDR "0 0 wakeup tid=1\n", RM_EPROTO, "t.events:2: timestamp 0 out of range (expected 1 .. 2^62)" },
	{ HDR "-5 0 wakeup tid=1\n", RM_EPROTO, "t.events:2: invalid timestamp '-5'" },
	{ HDR "100 0 wakeup\n", RM_EPROTO, "t.events:2: 'wakeup' needs key 'tid'" },
	{ HDR "100 0\n", RM_EPROTO, "t.events:2: expected '<ts_ns> <cpu> <type> key=value ...'" },
	{ HDR "100 0 wakeup tid\n", RM_EPROTO, "t.events:2: expected key=value, got 'tid'" },
	{ HDR "100 0 wakeup tid=\n", RM_EPROTO, "t.events:2: expected key=value, got 'tid='" },
	{ HDR "100 0 wakeup tid=1 by=-1\n", RM_EPROTO,
	  "t.events:2: invalid value '-1' for 'by' (expected 0 .. 4294967295)" },
	{ HDR "100 0 wakeup tid=1\n50 1 wakeup tid=1\n40 0 wakeup tid=1\n", RM_EPROTO,
	  "t.events:4: timestamp 40 on cpu 0 goes back in time (line 2 has 100)" },
	{ HDR "100 0 switch prev=0 prev_state=Q next=1\n", RM_EPROTO,
	  "t.events:2: invalid value 'Q' for 'prev_state' (expected one of R S D T X Z I)" },
	{ HDR "100 0 switch prev=0 next=1\n", RM_EPROTO, "t.events:2: 'switch' needs key 'prev_state'" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=1 fam=4 laddr=1.2.3:80 raddr=1.2.3.4:1\n", RM_EPROTO,
	  "t.events:2: invalid IPv4 address '1.2.3:80' for 'laddr' (expected a.b.c.d:port)" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=1 fam=4 laddr=1.2.3.4:65536 raddr=1.2.3.4:1\n", RM_EPROTO,
	  "t.events:2: invalid IPv4 address '1.2.3.4:65536' for 'laddr' (expected a.b.c.d:port)" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=1 fam=6 laddr=::1:80 raddr=[::1]:1\n", RM_EPROTO,
	  "t.events:2: invalid IPv6 address '::1:80' for 'laddr' (expected [addr]:port)" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=1 fam=4 laddr=1.2.3.4:80\n", RM_EPROTO,
	  "t.events:2: 'recv' with fam=4 needs key 'raddr'" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=1 fam=unix laddr=1.2.3.4:80\n", RM_EPROTO,
	  "t.events:2: 'laddr' is only valid with fam=4 or fam=6" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=1 fam=4 laddr=1.2.3.4:53 raddr=0.0.0.0:0 from=1.2.3.5:9\n",
	  RM_EPROTO, "t.events:2: 'from' is only valid on a recv with dgram=1" },
	{ HDR "100 0 send tid=1 pid=1 sock=1 bytes=1 fam=4 laddr=1.2.3.4:53 raddr=0.0.0.0:0 dgram=1 from=1.2.3.5:9\n",
	  RM_EPROTO, "t.events:2: 'from' is only valid on a recv with dgram=1" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=1 dgram=1 from=1.2.3.5:9\n", RM_EPROTO,
	  "t.events:2: 'from' is only valid with fam=4 or fam=6" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=1 fam=4 laddr=1.2.3.4:53 raddr=0.0.0.0:0 dgram=1 from=1.2.3.5\n",
	  RM_EPROTO, "t.events:2: invalid IPv4 address '1.2.3.5' for 'from' (expected a.b.c.d:port)" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=1 dgram=2\n", RM_EPROTO,
	  "t.events:2: invalid value '2' for 'dgram' (expected 0 .. 1)" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=1 fam=5\n", RM_EPROTO,
	  "t.events:2: invalid value '5' for 'fam' (expected 4, 6 or unix)" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=1 comm=abcdefghijklmnop\n", RM_EPROTO,
	  "t.events:2: 'comm' 'abcdefghijklmnop' longer than 15 bytes" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=1 comm=a%2\n", RM_EPROTO,
	  "t.events:2: invalid escape in 'comm' 'a%2' (expected %XX, not %00)" },
	{ HDR "100 0 recv tid=1 pid=1 sock=1 bytes=1 comm=a%00b\n", RM_EPROTO,
	  "t.events:2: invalid escape in 'comm' 'a%00b' (expected %XX, not %00)" },
	{ HDR "100 0 wakeup tid=1\x01\n", RM_EPROTO,
	  "t.events:2: invalid byte 0x01 (only printable ASCII outside comments)" },
	{ HDR "100 0 disk tid=1 op=X bytes=1\n", RM_EPROTO, "t.events:2: invalid value 'X' for 'op' (expected R or W)" },
	{ HDR "100 0 fork ptid=1 ppid=1 ctid=1 cpid=1\n", RM_EPROTO, "t.events:2: 'fork' with ctid equal to ptid (1)" },
	{ HDR "100 0 exit tid=1\n", RM_EPROTO, "t.events:2: 'exit' needs key 'pid'" },
	{ HDR "100 0 wakeup tid=1 a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9 j=10 k=11 l=12 m=13 n=14 o=15 p=16 q=17 r=18 "
	      "s=19 t=20 u=21\n",
	  RM_EPROTO, "t.events:2: too many fields (at most 24)" },
	/* replay consistency */
	{ HDR "100 0 switch prev=0 prev_state=S next=101\n200 0 recv tid=102 pid=100 sock=1 bytes=1\n", RM_EPROTO,
	  "t.events:3: 'recv' by tid 102 on cpu 0, which runs tid 101 since line 2" },
	{ HDR "100 0 switch prev=101 prev_state=S next=0\n200 0 send tid=101 pid=100 sock=1 bytes=1\n", RM_EPROTO,
	  "t.events:3: 'send' by tid 101 on cpu 0, which is idle since line 2" },
	{ HDR "100 1 recv tid=101 pid=100 sock=1 bytes=1\n200 1 switch prev=102 prev_state=S next=0\n", RM_EPROTO,
	  "t.events:3: switch from tid 102 on cpu 1, which runs tid 101 since line 2" },
	{ HDR "100 0 exit tid=5 pid=5\n200 0 disk tid=6 op=R bytes=1\n", RM_EPROTO,
	  "t.events:3: 'disk' by tid 6 on cpu 0, which runs tid 5 since line 2" },
	{ HDR "100 0 recv tid=101 pid=100 sock=1 bytes=1\n150 0 recv tid=101 pid=100 sock=2 bytes=1\n"
	      "200 0 fork ptid=101 ppid=100 ctid=102 cpid=100\n300 0 fork ptid=101 ppid=100 ctid=102 cpid=100\n",
	  RM_EPROTO, "t.events:5: fork of tid 102, which exists already (no exit seen)" },
};

static void test_malformed(void)
{
	size_t i;

	for (i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *c = &bad_cases[i];
		struct col_replay_capture cap;
		struct col_replay_stats st;
		char err[512];
		int rv;

		col_replay_capture_init(&cap);
		memset(err, 'x', sizeof(err));
		err[sizeof(err) - 1] = '\0';
		rv = replay_into(c->stream, strlen(c->stream), &cap, &st, err, sizeof(err));
		if (rv != c->rv || strcmp(err, c->msg) != 0)
			fprintf(stderr, "\ncase %zu: rv %d (%s), message \"%s\"\n  expected rv %d, \"%s\"\n", i, rv,
				rm_strerror(rv), err, c->rv, c->msg);
		CU_ASSERT_EQUAL(rv, c->rv);
		CU_ASSERT_STRING_EQUAL(err, c->msg);
		/* nothing reaches the sink from a stream refused by the parser or at its first event */
		CU_ASSERT_EQUAL(cap.nwins, 0);
		col_replay_capture_release(&cap);
	}
}

/* A malformed line in the middle stops the replay there, no window is reported. */
static void test_malformed_midway(void)
{
	static const char s[] = HDR "100 0 switch prev=0 prev_state=S next=101\n"
				    "200 0 recv tid=101 pid=100 sock=7 bytes=10\n"
				    "300 0 send tid=101 pid=100 sock=7 bytes=10\n"
				    "400 0 sned tid=101 pid=100 sock=7 bytes=10\n";
	struct col_replay_capture cap;
	struct col_replay_stats st;
	char err[256];

	col_replay_capture_init(&cap);
	CU_ASSERT_EQUAL(replay_into(s, sizeof(s) - 1, &cap, &st, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "t.events:5: unknown event type 'sned'");
	CU_ASSERT_EQUAL(cap.nparts, 0);
	CU_ASSERT_EQUAL(cap.nwins, 0);
	col_replay_capture_release(&cap);
}

/* Errors are logged when no buffer is given, and NULL arguments are refused. */
static void test_bad_arguments(void)
{
	struct col_replay_capture cap;
	struct col_sink sink, nosink = { NULL, NULL, NULL };
	struct col_events *r = (struct col_events *)&cap;

	col_replay_capture_init(&cap);
	sink = col_replay_capture_sink(&cap);
	CU_ASSERT_EQUAL(col_replay_buf(NULL, 5, "x", &sink, NULL), RM_EINVAL);
	CU_ASSERT_EQUAL(col_replay_buf("", 0, "x", NULL, NULL), RM_EINVAL);
	CU_ASSERT_EQUAL(col_replay_buf("", 0, "x", &nosink, NULL), RM_EINVAL);
	CU_ASSERT_EQUAL(col_replay_file(NULL, &sink, NULL), RM_EINVAL);
	/* opts NULL: the message goes to rm_log_error (stderr) */
	CU_ASSERT_EQUAL(col_replay_buf("garbage\n", 8, "logged", &sink, NULL), RM_EPROTO);
	CU_ASSERT_EQUAL(col_events_open_buf(&r, NULL, 3, "x", NULL, 0), RM_EINVAL);
	CU_ASSERT_EQUAL(col_events_open(NULL, "x", NULL, 0), RM_EINVAL);
	col_events_close(NULL);
	col_replay_capture_release(NULL);
	col_replay_capture_release(&cap);
}

/* ---- format details ---- */

/* Comments, blank lines, CRLF, tabs and any key order are accepted; defaults are filled in. */
static void test_syntax_accepted(void)
{
	static const char s[] = "# leading comment\r\n"
				"\r\n"
				"  rametr-events\t1 ncpu=1 offset_ns=0 window_ns=1000   # trailing comment\r\n"
				"100 0 switch next=101 prev_state=S prev=0\r\n"
				"200\t0\trecv bytes=5 sock=9 pid=100 tid=101 seq=7 fam=6 raddr=[2001:db8::2]:443 "
				"laddr=[::1]:8080 comm=a%20b%25\r\n"
				"300 0 disk bytes=0 op=W tid=101";
	struct col_events *r = NULL;
	struct col_event ev;
	char err[256];
	const unsigned char *a;

	CU_ASSERT_EQUAL_FATAL(col_events_open_buf(&r, s, sizeof(s) - 1, "syntax", err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(col_events_header(r)->window_ns, 1000);
	CU_ASSERT_EQUAL(col_events_header(r)->offset_ns, 0);
	CU_ASSERT_EQUAL(col_events_header(r)->ncpu, 1);
	CU_ASSERT_STRING_EQUAL(col_events_name(r), "syntax");
	CU_ASSERT_EQUAL_FATAL(col_events_next(r, &ev), RM_OK);
	CU_ASSERT_EQUAL(ev.line, 4);
	CU_ASSERT_EQUAL(ev.type, COL_EV_SWITCH);
	CU_ASSERT_EQUAL(ev.u.sw.prev_tid, 0);
	CU_ASSERT_EQUAL(ev.u.sw.next_tid, 101);
	CU_ASSERT_EQUAL(ev.u.sw.prev_pid, 0);
	CU_ASSERT_EQUAL(ev.u.sw.prev_state, 'S');
	CU_ASSERT_EQUAL_FATAL(col_events_next(r, &ev), RM_OK);
	CU_ASSERT_EQUAL(ev.line, 5);
	CU_ASSERT_EQUAL(ev.ts_ns, 200);
	CU_ASSERT_EQUAL(ev.type, COL_EV_RECV);
	CU_ASSERT_EQUAL(ev.u.io.tid, 101);
	CU_ASSERT_EQUAL(ev.u.io.pid, 100);
	CU_ASSERT_EQUAL(ev.u.io.bytes, 5);
	CU_ASSERT_EQUAL(ev.u.io.has_seq, 1);
	CU_ASSERT_EQUAL(ev.u.io.seq, 7);
	CU_ASSERT_EQUAL(ev.u.io.tuple.cookie, 9);
	CU_ASSERT_EQUAL(ev.u.io.tuple.family, RM_AF_INET6);
	CU_ASSERT_EQUAL(ev.u.io.tuple.lport, 8080);
	CU_ASSERT_EQUAL(ev.u.io.tuple.rport, 443);
	a = (const unsigned char *)ev.u.io.tuple.raddr;
	CU_ASSERT(a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0d && a[3] == 0xb8 && a[15] == 2);
	a = (const unsigned char *)ev.u.io.tuple.laddr;
	CU_ASSERT(a[0] == 0 && a[15] == 1);
	CU_ASSERT_STRING_EQUAL(ev.u.io.comm, "a b%");
	/* last line without "\n" */
	CU_ASSERT_EQUAL_FATAL(col_events_next(r, &ev), RM_OK);
	CU_ASSERT_EQUAL(ev.type, COL_EV_DISK);
	CU_ASSERT_EQUAL(ev.u.disk.is_write, 1);
	CU_ASSERT_EQUAL(ev.u.disk.bytes, 0);
	CU_ASSERT_EQUAL(col_events_next(r, &ev), RM_ENOENT);
	CU_ASSERT_EQUAL(col_events_next(r, &ev), RM_ENOENT);
	CU_ASSERT_STRING_EQUAL(col_events_error(r), "");
	col_events_close(r);
}

/* After an error the reader keeps returning it. */
static void test_sticky_error(void)
{
	static const char s[] = HDR "1 0 wakeup tid=1\n2 0 bogus\n3 0 wakeup tid=1\n";
	struct col_events *r = NULL;
	struct col_event ev;

	CU_ASSERT_EQUAL_FATAL(col_events_open_buf(&r, s, sizeof(s) - 1, "s", NULL, 0), RM_OK);
	CU_ASSERT_EQUAL(col_events_next(r, &ev), RM_OK);
	CU_ASSERT_EQUAL(col_events_next(r, &ev), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(col_events_error(r), "s:3: unknown event type 'bogus'");
	CU_ASSERT_EQUAL(col_events_next(r, &ev), RM_EPROTO);
	col_events_close(r);
}

/* Formats every event of r; returns the text (malloc'd) or NULL. */
static char *format_all(struct col_events *r)
{
	size_t cap = 4096, len = 0;
	char *out = malloc(cap), line[COL_EVENTS_LINE_MAX];
	struct col_event ev;
	int rv;

	if (!out)
		return NULL;
	if (col_events_format_header(col_events_header(r), out, cap) != RM_OK) {
		free(out);
		return NULL;
	}
	len = strlen(out);
	while ((rv = col_events_next(r, &ev)) == RM_OK) {
		size_t n;

		if (col_events_format(&ev, line, sizeof(line)) != RM_OK)
			break;
		n = strlen(line);
		if (len + n + 1 > cap) {
			char *no = realloc(out, cap * 2 + n);

			if (!no)
				break;
			out = no;
			cap = cap * 2 + n;
		}
		memcpy(out + len, line, n + 1);
		len += n;
	}
	if (rv != RM_ENOENT) {
		free(out);
		return NULL;
	}
	return out;
}

/* write(parse(f)) parses again to the same text, and replays to the same parts and windows. */
static void test_round_trip(void)
{
	size_t i;

	for (i = 0; i < sizeof(testdata_files) / sizeof(testdata_files[0]); i++) {
		struct col_replay_capture c1, c2;
		struct col_replay_stats s1, s2;
		struct col_events *r = NULL;
		char path[512], err[256], *t1, *t2;
		size_t k;

		snprintf(path, sizeof(path), "%s/%s", COL_TESTDATA, testdata_files[i]);
		CU_ASSERT_EQUAL_FATAL(col_events_open(&r, path, err, sizeof(err)), RM_OK);
		t1 = format_all(r);
		col_events_close(r);
		CU_ASSERT_PTR_NOT_NULL_FATAL(t1);
		CU_ASSERT_EQUAL_FATAL(col_events_open_buf(&r, t1, strlen(t1), "t1", err, sizeof(err)), RM_OK);
		t2 = format_all(r);
		col_events_close(r);
		CU_ASSERT_PTR_NOT_NULL_FATAL(t2);
		CU_ASSERT_STRING_EQUAL(t1, t2);

		col_replay_capture_init(&c1);
		col_replay_capture_init(&c2);
		{
			struct col_sink sink = col_replay_capture_sink(&c1);
			struct col_replay_opts o;

			memset(&o, 0, sizeof(o));
			o.stats = &s1;
			CU_ASSERT_EQUAL(col_replay_file(path, &sink, &o), RM_OK);
		}
		CU_ASSERT_EQUAL(replay_into(t2, strlen(t2), &c2, &s2, err, sizeof(err)), RM_OK);
		CU_ASSERT_EQUAL(c1.nparts, c2.nparts);
		CU_ASSERT_EQUAL(c1.nwins, c2.nwins);
		for (k = 0; k < c1.nparts && k < c2.nparts; k++)
			CU_ASSERT_EQUAL(memcmp(&c1.parts[k], &c2.parts[k], sizeof(c1.parts[k])), 0);
		for (k = 0; k < c1.nwins && k < c2.nwins; k++)
			CU_ASSERT_EQUAL(memcmp(&c1.wins[k], &c2.wins[k], sizeof(c1.wins[k])), 0);
		CU_ASSERT_EQUAL(s1.events, s2.events);
		col_replay_capture_release(&c1);
		col_replay_capture_release(&c2);
		free(t1);
		free(t2);
	}
}

/* The writer's canonical form, its refusals and truncation. */
static void test_writer(void)
{
	struct col_events_hdr h = { 1000000000, 7, 4 };
	struct col_event ev;
	char buf[COL_EVENTS_LINE_MAX];
	FILE *f;
	char path[512];

	CU_ASSERT_EQUAL(col_events_format_header(&h, buf, sizeof(buf)), RM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "rametr-events 1 window_ns=1000000000 offset_ns=7 ncpu=4\n");
	h.ncpu = 0;
	CU_ASSERT_EQUAL(col_events_format_header(&h, buf, sizeof(buf)), RM_EINVAL);
	h.ncpu = 4;

	memset(&ev, 0, sizeof(ev));
	ev.ts_ns = 2000;
	ev.cpu = 3;
	ev.type = COL_EV_RECV;
	ev.u.io.tid = 101;
	ev.u.io.pid = 100;
	ev.u.io.tuple.cookie = 7;
	ev.u.io.tuple.family = RM_AF_INET;
	ev.u.io.tuple.laddr[0] = htonl(0x7f000001);
	ev.u.io.tuple.raddr[0] = htonl(0x0a000002);
	ev.u.io.tuple.lport = 7000;
	ev.u.io.tuple.rport = 40001;
	ev.u.io.bytes = 64;
	ev.u.io.has_seq = 1;
	ev.u.io.seq = 4294967295u;
	snprintf(ev.u.io.comm, sizeof(ev.u.io.comm), "my srv#1=%%");
	CU_ASSERT_EQUAL(col_events_format(&ev, buf, sizeof(buf)), RM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "2000 3 recv tid=101 pid=100 comm=my%20srv%231%3D%25 sock=7 fam=4 "
				    "laddr=127.0.0.1:7000 raddr=10.0.0.2:40001 bytes=64 seq=4294967295\n");
	/* too small a buffer */
	CU_ASSERT_EQUAL(col_events_format(&ev, buf, 20), RM_ETRUNC);
	CU_ASSERT_STRING_EQUAL(buf, "");
	/* events the parser would refuse */
	ev.u.io.seq = 1ULL << 32;
	CU_ASSERT_EQUAL(col_events_format(&ev, buf, sizeof(buf)), RM_EINVAL);
	ev.u.io.seq = 0;
	ev.u.io.tuple.family = RM_AF_UNIX;
	CU_ASSERT_EQUAL(col_events_format(&ev, buf, sizeof(buf)), RM_EINVAL); /* addresses with unix */
	ev.u.io.tuple.family = 99;
	CU_ASSERT_EQUAL(col_events_format(&ev, buf, sizeof(buf)), RM_EINVAL);
	ev.u.io.tuple.family = RM_AF_INET;
	ev.u.io.tid = 0;
	CU_ASSERT_EQUAL(col_events_format(&ev, buf, sizeof(buf)), RM_EINVAL);
	ev.u.io.tid = 101;
	ev.ts_ns = 0;
	CU_ASSERT_EQUAL(col_events_format(&ev, buf, sizeof(buf)), RM_EINVAL);
	ev.ts_ns = 1;
	ev.type = (enum col_ev_type)42;
	CU_ASSERT_EQUAL(col_events_format(&ev, buf, sizeof(buf)), RM_EINVAL);

	memset(&ev, 0, sizeof(ev));
	ev.ts_ns = 5;
	ev.type = COL_EV_SWITCH;
	ev.u.sw.prev_tid = 101;
	ev.u.sw.prev_pid = 100;
	ev.u.sw.prev_state = 'R';
	CU_ASSERT_EQUAL(col_events_format(&ev, buf, sizeof(buf)), RM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "5 0 switch prev=101 prev_pid=100 prev_state=R next=0 next_pid=0\n");
	ev.u.sw.prev_state = 'Q';
	CU_ASSERT_EQUAL(col_events_format(&ev, buf, sizeof(buf)), RM_EINVAL);

	/* write a stream to a file with the FILE API and replay it */
	snprintf(path, sizeof(path), "%s/written.events", rm_test_tmpdir());
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	h.ncpu = 1;
	h.offset_ns = 0;
	h.window_ns = 1000;
	CU_ASSERT_EQUAL(col_events_write_header(f, &h), RM_OK);
	memset(&ev, 0, sizeof(ev));
	ev.ts_ns = 100;
	ev.type = COL_EV_SWITCH;
	ev.u.sw.next_tid = 101;
	ev.u.sw.prev_state = 'S';
	CU_ASSERT_EQUAL(col_events_write(f, &ev), RM_OK);
	memset(&ev, 0, sizeof(ev));
	ev.ts_ns = 200;
	ev.type = COL_EV_RECV;
	ev.u.io.tid = 101;
	ev.u.io.pid = 100;
	ev.u.io.tuple.cookie = 3;
	ev.u.io.bytes = 10;
	CU_ASSERT_EQUAL(col_events_write(f, &ev), RM_OK);
	ev.ts_ns = 700;
	ev.type = COL_EV_SEND;
	CU_ASSERT_EQUAL(col_events_write(f, &ev), RM_OK);
	CU_ASSERT_EQUAL(fclose(f), 0);
	{
		struct col_replay_capture cap;
		struct col_sink sink;
		struct col_replay_opts o;
		char err[256];

		col_replay_capture_init(&cap);
		sink = col_replay_capture_sink(&cap);
		memset(&o, 0, sizeof(o));
		o.err = err;
		o.errlen = sizeof(err);
		CU_ASSERT_EQUAL(col_replay_file(path, &sink, &o), RM_OK);
		CU_ASSERT_EQUAL(cap.nparts, 1);
		CU_ASSERT_EQUAL(cap.nparts ? cap.parts[0].cpu_ns : 0, 500);
		CU_ASSERT_EQUAL(col_replay_capture_check(&cap, NULL, err, sizeof(err)), RM_OK);
		col_replay_capture_release(&cap);
	}
	/* a wake-up with its waker, and without (by=0 is left out) */
	memset(&ev, 0, sizeof(ev));
	ev.ts_ns = 3000;
	ev.type = COL_EV_WAKEUP;
	ev.u.wakeup.tid = 302;
	ev.u.wakeup.by = 301;
	CU_ASSERT_EQUAL(col_events_format(&ev, buf, sizeof(buf)), RM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "3000 0 wakeup tid=302 by=301\n");
	ev.u.wakeup.by = 0;
	CU_ASSERT_EQUAL(col_events_format(&ev, buf, sizeof(buf)), RM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "3000 0 wakeup tid=302\n");
}

/* ---- replay mechanics ---- */

/* The example of the format documentation replays as documented. */
static void test_documented_example(void)
{
	static const char s[] =
		"rametr-events 1 window_ns=1000000000 offset_ns=0 ncpu=2\n"
		"1000 0 switch prev=0 prev_pid=0 prev_state=S next=101 next_pid=100\n"
		"1500 0 wakeup tid=102\n"
		"2000 0 recv tid=101 pid=100 comm=srv sock=7 fam=4 laddr=127.0.0.1:7000 raddr=127.0.0.2:40001 bytes=64 seq=1000\n"
		"3000 0 send tid=101 pid=100 comm=srv sock=7 fam=4 laddr=127.0.0.1:7000 raddr=127.0.0.2:40001 bytes=512 seq=5000\n"
		"4000 1 fork ptid=101 ppid=100 ctid=103 cpid=100\n"
		"5000 1 exit tid=103 pid=100\n"
		"6000 0 disk tid=101 op=W bytes=4096\n";
	struct col_replay_capture cap;
	struct col_replay_stats st;
	char err[256];

	col_replay_capture_init(&cap);
	CU_ASSERT_EQUAL_FATAL(replay_into(s, sizeof(s) - 1, &cap, &st, err, sizeof(err)), RM_OK);
	/* END part (cpu [2000,3000)), then the ASSOC part with the disk write, at the sweep */
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 2);
	CU_ASSERT_EQUAL(cap.parts[0].cpu_ns, 1000);
	CU_ASSERT_EQUAL(cap.parts[0].flags, RM_PF_START | RM_PF_END | RM_PF_IN_SEQ | RM_PF_OUT_SEQ);
	CU_ASSERT_EQUAL(cap.parts[1].flags, RM_PF_ASSOC | RM_PF_IN_SEQ | RM_PF_OUT_SEQ);
	CU_ASSERT_EQUAL(cap.parts[1].disk_write, 4096);
	CU_ASSERT_EQUAL(st.threads, 1); /* 103 forked outside a segment */
	CU_ASSERT_EQUAL(st.events, 7);
	CU_ASSERT_EQUAL_FATAL(cap.nwins, 1);
	/* cpu 0: [1000,2000) + [2000,3000) + [3000,6000); cpu 1 saw no switch */
	CU_ASSERT_EQUAL(cap.wins[0].busy_ns, 5000);
	CU_ASSERT_EQUAL(cap.wins[0].capacity_ns, 2 * 5000);
	col_replay_capture_release(&cap);
}

/*
 * CPUs written one after the other are merged by time: the same events
 * sorted by time give the same result. Equal timestamps keep file order.
 */
static void test_merge_by_time(void)
{
	static const char grouped[] = HDR "100 0 switch prev=0 prev_state=S next=101\n"
					  "200 0 recv tid=101 pid=100 sock=7 bytes=10\n"
					  "300 0 fork ptid=101 ppid=100 ctid=102 cpid=100\n"
					  "900 0 send tid=101 pid=100 sock=7 bytes=10\n"
					  "1000 0 switch prev=101 prev_state=S next=0\n"
					  "300 1 switch prev=0 prev_state=S next=102\n"
					  "1500 1 send tid=102 pid=100 sock=7 bytes=10\n"
					  "1600 1 switch prev=102 prev_state=S next=0\n";
	static const char sorted[] = HDR "100 0 switch prev=0 prev_state=S next=101\n"
					 "200 0 recv tid=101 pid=100 sock=7 bytes=10\n"
					 "300 0 fork ptid=101 ppid=100 ctid=102 cpid=100\n"
					 "300 1 switch prev=0 prev_state=S next=102\n"
					 "900 0 send tid=101 pid=100 sock=7 bytes=10\n"
					 "1000 0 switch prev=101 prev_state=S next=0\n"
					 "1500 1 send tid=102 pid=100 sock=7 bytes=10\n"
					 "1600 1 switch prev=102 prev_state=S next=0\n";
	struct col_replay_capture a, b;
	struct col_replay_stats sa, sb;
	char err[256];
	size_t i;

	col_replay_capture_init(&a);
	col_replay_capture_init(&b);
	CU_ASSERT_EQUAL_FATAL(replay_into(grouped, sizeof(grouped) - 1, &a, &sa, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL_FATAL(replay_into(sorted, sizeof(sorted) - 1, &b, &sb, err, sizeof(err)), RM_OK);
	/*
	 * The child (102) was forked at 300 inside the segment, so it has
	 * state when cpu 1 switches to it at 300 (fork comes first in file
	 * order): its part has cpu [300,1000) in w0 and [1000,1500) in w1.
	 * The two requests' tails come last, from the final sweep.
	 */
	CU_ASSERT_EQUAL_FATAL(a.nparts, 5);
	CU_ASSERT_EQUAL(a.parts[1].tid, 102);
	CU_ASSERT_EQUAL(a.parts[1].win, 0);
	CU_ASSERT_EQUAL(a.parts[1].cpu_ns, 700);
	CU_ASSERT_EQUAL(a.parts[2].tid, 102);
	CU_ASSERT_EQUAL(a.parts[2].win, 1);
	CU_ASSERT_EQUAL(a.parts[2].cpu_ns, 500);
	CU_ASSERT_EQUAL(a.parts[2].flags, RM_PF_END);
	CU_ASSERT_EQUAL_FATAL(a.nparts, b.nparts);
	CU_ASSERT_EQUAL_FATAL(a.nwins, b.nwins);
	for (i = 0; i < a.nparts; i++)
		CU_ASSERT_EQUAL(memcmp(&a.parts[i], &b.parts[i], sizeof(a.parts[i])), 0);
	for (i = 0; i < a.nwins; i++)
		CU_ASSERT_EQUAL(memcmp(&a.wins[i], &b.wins[i], sizeof(a.wins[i])), 0);
	col_replay_capture_release(&a);
	col_replay_capture_release(&b);
}

/*
 * Windows are reported once each, in order, including empty ones, summed
 * over CPUs; capacity covers [first ts, last ts) only. window_ns = 1000,
 * events from 1500 to 4200 on two CPUs:
 *   w1 [1500,2000) capacity 2 * 500; w2, w3 2 * 1000; w4 [4000,4200) 2 * 200
 */
static void test_windows(void)
{
	static const char s[] = HDR "1500 0 switch prev=0 prev_state=S next=101\n"
				    "1700 1 switch prev=0 prev_state=S next=102\n"
				    "2500 1 switch prev=102 prev_state=S next=0\n"
				    "4200 0 switch prev=101 prev_state=S next=0\n";
	struct col_replay_capture cap;
	struct col_replay_stats st;
	char err[256];

	col_replay_capture_init(&cap);
	CU_ASSERT_EQUAL_FATAL(replay_into(s, sizeof(s) - 1, &cap, &st, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL_FATAL(cap.nwins, 4);
	CU_ASSERT_EQUAL(st.windows, 4);
	CU_ASSERT_EQUAL(cap.wins[0].win, 1);
	CU_ASSERT_EQUAL(cap.wins[3].win, 4);
	CU_ASSERT_EQUAL(cap.wins[0].capacity_ns, 1000);
	CU_ASSERT_EQUAL(cap.wins[1].capacity_ns, 2000);
	CU_ASSERT_EQUAL(cap.wins[2].capacity_ns, 2000);
	CU_ASSERT_EQUAL(cap.wins[3].capacity_ns, 400);
	/* cpu 0 [1500,4200), cpu 1 [1700,2500) */
	CU_ASSERT_EQUAL(cap.wins[0].busy_ns, 500 + 300);
	CU_ASSERT_EQUAL(cap.wins[1].busy_ns, 1000 + 500);
	CU_ASSERT_EQUAL(cap.wins[2].busy_ns, 1000);
	CU_ASSERT_EQUAL(cap.wins[3].busy_ns, 200);
	CU_ASSERT_EQUAL(cap.wins[3].idle_ns, 0);
	CU_ASSERT_PTR_NULL(col_replay_capture_window(&cap, 0));
	CU_ASSERT_PTR_NULL(col_replay_capture_window(&cap, 5));
	col_replay_capture_release(&cap);

	/* a stream without events reports nothing */
	col_replay_capture_init(&cap);
	CU_ASSERT_EQUAL(replay_into(HDR, strlen(HDR), &cap, &st, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(cap.nwins, 0);
	CU_ASSERT_EQUAL(st.hdr.ncpu, 2);
	col_replay_capture_release(&cap);
}

/*
 * A live node's offset (CLOCK_REALTIME - CLOCK_MONOTONIC) gives wall-clock
 * window indexes. O = 1763800000999999000, window 1 s: ts 1000 is the edge
 * between windows 1763800000 and 1763800001.
 *   W0 = 1763800000: [500,600) unsegmented 100, [600,1000) part 400; capacity 500
 *   W1: [1000,1500) part 500 (END), [1500,1600) the tail's part 100; capacity 600
 */
static void test_wall_clock_offset(void)
{
	static const char s[] = "rametr-events 1 window_ns=1000000000 offset_ns=1763800000999999000 ncpu=1\n"
				"500 0 switch prev=0 prev_state=S next=101\n"
				"600 0 recv tid=101 pid=100 sock=7 bytes=10\n"
				"1500 0 send tid=101 pid=100 sock=7 bytes=20\n"
				"1600 0 switch prev=101 prev_state=S next=0\n";
	const uint64_t W0 = 1763800000ULL;
	struct col_replay_capture cap;
	struct col_replay_stats st;
	char err[256], path[512];
	uint64_t window_ns = 0;
	int64_t offset = 0;
	FILE *f;

	col_replay_capture_init(&cap);
	CU_ASSERT_EQUAL_FATAL(replay_into(s, sizeof(s) - 1, &cap, &st, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL_FATAL(cap.nwins, 2);
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 3);
	CU_ASSERT_EQUAL(cap.wins[0].win, W0);
	CU_ASSERT_EQUAL(cap.wins[1].win, W0 + 1);
	CU_ASSERT_EQUAL(cap.wins[0].busy_ns, 500);
	CU_ASSERT_EQUAL(cap.wins[0].unseg_cpu_ns, 100);
	CU_ASSERT_EQUAL(cap.wins[0].capacity_ns, 500);
	CU_ASSERT_EQUAL(cap.wins[1].busy_ns, 600);
	CU_ASSERT_EQUAL(cap.wins[1].capacity_ns, 600);
	CU_ASSERT_EQUAL(cap.parts[0].win, W0);
	CU_ASSERT_EQUAL(cap.parts[0].cpu_ns, 400);
	CU_ASSERT_EQUAL(cap.parts[1].win, W0 + 1);
	CU_ASSERT_EQUAL(cap.parts[1].cpu_ns, 500);
	CU_ASSERT_EQUAL(cap.parts[1].flags, RM_PF_END);
	CU_ASSERT_EQUAL(cap.parts[2].win, W0 + 1);
	CU_ASSERT_EQUAL(cap.parts[2].cpu_ns, 100);
	CU_ASSERT_EQUAL(cap.parts[2].flags, RM_PF_ASSOC);
	CU_ASSERT_EQUAL(cap.wins[1].unseg_cpu_ns, 0);
	col_replay_capture_release(&cap);

	/* the collector takes window and clock offset from the header */
	snprintf(path, sizeof(path), "%s/wall.events", rm_test_tmpdir());
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(s, f);
	fclose(f);
	CU_ASSERT_EQUAL(col_replay_window(path, &window_ns, &offset), RM_OK);
	CU_ASSERT_EQUAL(window_ns, 1000000000ULL);
	CU_ASSERT_EQUAL(offset, 1763800000999999000LL);
	snprintf(path, sizeof(path), "%s/none.events", rm_test_tmpdir());
	CU_ASSERT_EQUAL(col_replay_window(path, &window_ns, &offset), RM_ENOENT);
	CU_ASSERT_EQUAL(col_replay_window(NULL, &window_ns, &offset), RM_EINVAL);
}

/* More than RM_WIN_SLOTS windows: slots are reused, nothing is lost on the way. */
static void test_slot_reuse(void)
{
	char s[8192];
	size_t off;
	int i;
	struct col_replay_capture cap;
	struct col_replay_stats st;
	char err[256];

	/*
	 * 40 windows (2.5 times the slot ring), thread 101 in one segment runs
	 * 100 ns in each: w0 110 ns ([10,20) + [500,600)), then 100 ns each; one
	 * part per window
	 */
	off = (size_t)snprintf(s, sizeof(s), "%s",
			       HDR "10 0 recv tid=101 pid=100 sock=7 bytes=1\n20 0 switch prev=101 prev_state=S next=0\n");
	for (i = 0; i < 40; i++)
		off += (size_t)snprintf(s + off, sizeof(s) - off,
					"%d 0 switch prev=0 prev_state=S next=101\n"
					"%d 0 switch prev=101 prev_state=S next=0\n",
					i * 1000 + 500, i * 1000 + 600);
	col_replay_capture_init(&cap);
	CU_ASSERT_EQUAL_FATAL(replay_into(s, off, &cap, &st, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL(cap.nwins, 40);
	CU_ASSERT_EQUAL(cap.nparts, 40);
	for (i = 0; i < 40 && (size_t)i < cap.nparts && (size_t)i < cap.nwins; i++) {
		CU_ASSERT_EQUAL(cap.wins[i].busy_ns, i == 0 ? 110 : 100);
		CU_ASSERT_EQUAL(cap.parts[i].win, (uint64_t)i);
		CU_ASSERT_EQUAL(cap.parts[i].cpu_ns, i == 0 ? 110 : 100);
	}
	col_replay_capture_release(&cap);
}

static int fail_part_after;

static int failing_part(void *arg, const struct rm_part *p)
{
	(void)arg;
	(void)p;
	return fail_part_after-- > 0 ? RM_OK : RM_EFULL;
}

static int failing_window(void *arg, const struct rm_totals *w)
{
	(void)arg;
	return w->win >= 1 ? RM_ECLOSED : RM_OK;
}

/* A sink error stops the replay and is passed up. */
static void test_sink_error(void)
{
	struct col_sink sink = { NULL, failing_part, failing_window };
	struct col_replay_opts o;
	struct col_replay_stats st;
	char err[256], path[512];

	memset(&o, 0, sizeof(o));
	o.err = err;
	o.errlen = sizeof(err);
	o.stats = &st;
	snprintf(path, sizeof(path), "%s/eventloop.events", COL_TESTDATA);
	/* the 2nd part is B's END part, emitted at the send of line 17 */
	fail_part_after = 1;
	CU_ASSERT_EQUAL(col_replay_file(path, &sink, &o), RM_EFULL);
	if (!strstr(err, "eventloop.events:17: the sink refused a part: full"))
		fprintf(stderr, "\nmessage: %s\n", err);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "eventloop.events:17: the sink refused a part: full"));
	CU_ASSERT_EQUAL(st.parts, 1);
	CU_ASSERT_EQUAL(st.windows, 0);

	/* windows: disk.events has windows 0 and 1; the sink refuses window 1 */
	snprintf(path, sizeof(path), "%s/disk.events", COL_TESTDATA);
	fail_part_after = 100;
	CU_ASSERT_EQUAL(col_replay_file(path, &sink, &o), RM_ECLOSED);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "disk.events: the sink refused window 1: closed"));
	CU_ASSERT_EQUAL(st.windows, 1);
	CU_ASSERT_EQUAL(st.parts, 3);
}

/* Streams spanning too many windows are refused before anything runs. */
static void test_window_limit(void)
{
	static const char s[] = "rametr-events 1 window_ns=1 offset_ns=0 ncpu=1\n"
				"1 0 wakeup tid=1\n"
				"4611686018427387904 0 wakeup tid=1\n";
	static const char four[] = HDR "1 0 wakeup tid=1\n3999 0 wakeup tid=1\n";
	static const char three[] = HDR "1 0 wakeup tid=1\n2999 0 wakeup tid=1\n";
	struct col_replay_capture cap;
	struct col_sink sink;
	struct col_replay_opts o;
	char err[256];

	col_replay_capture_init(&cap);
	sink = col_replay_capture_sink(&cap);
	memset(&o, 0, sizeof(o));
	o.err = err;
	o.errlen = sizeof(err);
	CU_ASSERT_EQUAL(col_replay_buf(s, sizeof(s) - 1, "big", &sink, &o), RM_EFULL);
	CU_ASSERT_STRING_EQUAL(err, "big: the stream spans 4611686018427387904 windows, more than the limit of 1048576");
	o.max_windows = 3;
	CU_ASSERT_EQUAL(col_replay_buf(four, strlen(four), "four", &sink, &o), RM_EFULL);
	CU_ASSERT_STRING_EQUAL(err, "four: the stream spans 4 windows, more than the limit of 3");
	CU_ASSERT_EQUAL(col_replay_buf(three, strlen(three), "three", &sink, &o), RM_OK);
	CU_ASSERT_STRING_EQUAL(err, "");
	CU_ASSERT_EQUAL(cap.nwins, 3);
	col_replay_capture_release(&cap);
}

/* The file API: missing file, a directory, and the message format. */
static void test_files(void)
{
	struct col_replay_capture cap;
	struct col_sink sink;
	struct col_replay_opts o;
	struct col_events *r = NULL;
	char err[512], path[512];

	col_replay_capture_init(&cap);
	sink = col_replay_capture_sink(&cap);
	memset(&o, 0, sizeof(o));
	o.err = err;
	o.errlen = sizeof(err);
	snprintf(path, sizeof(path), "%s/no-such.events", rm_test_tmpdir());
	CU_ASSERT_EQUAL(col_replay_file(path, &sink, &o), RM_ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "failed to open '"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no-such.events': No such file or directory"));
	CU_ASSERT_EQUAL(col_replay_file(rm_test_tmpdir(), &sink, &o), RM_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a regular file"));
	CU_ASSERT_EQUAL(col_events_open(&r, path, NULL, 0), RM_ENOENT);
	CU_ASSERT_PTR_NULL(r);

	/* a malformed file names itself and the line */
	snprintf(path, sizeof(path), "%s/bad.events", rm_test_tmpdir());
	{
		FILE *f = fopen(path, "w");

		CU_ASSERT_PTR_NOT_NULL_FATAL(f);
		fputs(HDR "# fine so far\n100 0 wakeup tid=1\n200 0 walkup tid=1\n", f);
		fclose(f);
	}
	CU_ASSERT_EQUAL(col_replay_file(path, &sink, &o), RM_EPROTO);
	{
		char want[600];

		snprintf(want, sizeof(want), "%s:4: unknown event type 'walkup'", path);
		CU_ASSERT_STRING_EQUAL(err, want);
	}
	col_replay_capture_release(&cap);
}

/* The capture check finds every kind of broken identity. */
static void test_check_detects(void)
{
	struct col_replay_capture cap;
	struct col_replay_stats st;
	struct rm_wintot late;
	char err[256], path[512], *buf = NULL;
	size_t len = 0;

	snprintf(path, sizeof(path), "%s/fork.events", COL_TESTDATA);
	CU_ASSERT_EQUAL_FATAL(slurp(path, &buf, &len), 0);
	col_replay_capture_init(&cap);
	CU_ASSERT_EQUAL_FATAL(replay_into(buf, len, &cap, &st, err, sizeof(err)), RM_OK);
	CU_ASSERT_EQUAL_FATAL(cap.nparts, 3);
	CU_ASSERT_EQUAL(col_replay_capture_check(&cap, NULL, err, sizeof(err)), RM_OK);

	cap.parts[1].cpu_ns++;
	CU_ASSERT_EQUAL(col_replay_capture_check(&cap, NULL, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "window 0: cpu total 1450 != parts 1301 + unsegmented + lost 150");
	cap.parts[1].cpu_ns--;

	cap.parts[1].disk_write--;
	CU_ASSERT_EQUAL(col_replay_capture_check(&cap, NULL, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "window 0: disk_write total 4096 != parts 4095 + unsegmented 0");
	/* a shortfall is accepted only if it is exactly the late drops */
	memset(&late, 0, sizeof(late));
	late.unseg_disk_write = 1;
	CU_ASSERT_EQUAL(col_replay_capture_check(&cap, &late, err, sizeof(err)), RM_OK);
	late.unseg_disk_write = 2;
	CU_ASSERT_EQUAL(col_replay_capture_check(&cap, &late, err, sizeof(err)), RM_EPROTO);
	cap.parts[1].disk_write++;

	cap.parts[0].win = 9;
	CU_ASSERT_EQUAL(col_replay_capture_check(&cap, NULL, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "is in window 9, which was not reported"));
	cap.parts[0].win = 0;

	cap.wins[0].unseg_rx++;
	CU_ASSERT_EQUAL(col_replay_capture_check(&cap, NULL, err, sizeof(err)), RM_EPROTO);
	CU_ASSERT_STRING_EQUAL(err, "window 0: rx total 10 != parts 10 + unsegmented 1");
	cap.wins[0].unseg_rx--;
	CU_ASSERT_EQUAL(col_replay_capture_check(&cap, NULL, err, sizeof(err)), RM_OK);
	col_replay_capture_release(&cap);
	free(buf);
}

static CU_TestInfo cases[] = {
	{ "malformed streams rejected with file:line", test_malformed },
	{ "malformed line midway", test_malformed_midway },
	{ "bad arguments", test_bad_arguments },
	{ "syntax accepted", test_syntax_accepted },
	{ "errors are sticky", test_sticky_error },
	{ "writer round trip", test_round_trip },
	{ "writer", test_writer },
	{ "documented example", test_documented_example },
	{ "cpus merged by time", test_merge_by_time },
	{ "window reports and capacity", test_windows },
	{ "wall-clock offset", test_wall_clock_offset },
	{ "window slots reused", test_slot_reuse },
	{ "sink errors passed up", test_sink_error },
	{ "window limit", test_window_limit },
	{ "file api", test_files },
	{ "identity check detects breakage", test_check_detects },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_replay", cases)
