/*
 * col_events_fuzz.c - libFuzzer target for the event stream parser and the
 * replay backend (col_events.h, col_replay.h): any input is either refused
 * with a "fuzz:..." message and a parse/limit error, or replayed; whatever
 * is replayed must satisfy the identity of every window (part + unsegmented
 * + lost == total, with the late drops of col_replay_stats as the only
 * allowed shortfall), and every failed emit must be counted as a dropped
 * part. A stream that parses must also survive the writer: write(parse(x))
 * parses again and writes the same text. The input's length picks
 * fail_every (0..3) so that drop accounting is exercised too.
 * Built only with -DRM_FUZZ=ON and CC=clang:
 *   cmake -S . -B build-fuzz -DRM_FUZZ=ON -DCMAKE_C_COMPILER=clang
 *   make -C build-fuzz col_events_fuzz
 *   build-fuzz/collector/col_events_fuzz -max_total_time=60 corpus/ collector/testdata/
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "col_replay.h"
#include "rm_err.h"
#include "banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_text {
	char *p;
	size_t len, cap;
};

static void fuzz_append(struct fuzz_text *t, const char *s)
{
	size_t n = strlen(s);

	if (t->len + n + 1 > t->cap) {
		size_t nc = (t->cap + n + 1) * 2;
		char *np = realloc(t->p, nc);

		if (!np)
			abort();
		t->p = np;
		t->cap = nc;
	}
	memcpy(t->p + t->len, s, n + 1);
	t->len += n;
}

/* The canonical text of a stream, or NULL if it does not parse. */
static char *fuzz_canon(const char *buf, size_t len)
{
	struct fuzz_text t = { NULL, 0, 0 };
	struct col_events *r = NULL;
	struct col_event ev;
	char line[COL_EVENTS_LINE_MAX];
	int rv;

	if (col_events_open_buf(&r, buf, len, "canon", NULL, 0) != RM_OK)
		return NULL;
	if (col_events_format_header(col_events_header(r), line, sizeof(line)) != RM_OK)
		abort();
	fuzz_append(&t, line);
	while ((rv = col_events_next(r, &ev)) == RM_OK) {
		/* everything the parser accepts, the writer writes */
		if (col_events_format(&ev, line, sizeof(line)) != RM_OK)
			abort();
		fuzz_append(&t, line);
	}
	if (rv != RM_ENOENT) {
		if (rv != RM_EPROTO || !col_events_error(r)[0])
			abort();
		free(t.p);
		t.p = NULL;
	}
	col_events_close(r);
	return t.p;
}

static void fuzz_round_trip(const uint8_t *data, size_t size)
{
	char *c1 = fuzz_canon((const char *)data, size), *c2;

	if (!c1)
		return;
	c2 = fuzz_canon(c1, strlen(c1));
	if (!c2 || strcmp(c1, c2) != 0)
		abort();
	free(c1);
	free(c2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct col_replay_capture cap;
	struct col_replay_stats st;
	struct col_replay_opts o;
	struct col_sink sink;
	char err[512], cerr[512];
	uint64_t dropped = 0;
	size_t i;
	int rv;

	col_replay_capture_init(&cap);
	sink = col_replay_capture_sink(&cap);
	memset(&o, 0, sizeof(o));
	o.fail_every = (unsigned)(size % 4);
	o.max_windows = 4096;
	o.err = err;
	o.errlen = sizeof(err);
	o.stats = &st;
	rv = col_replay_buf((const char *)data, size, "fuzz", &sink, &o);
	if (rv == RM_OK) {
		if (err[0])
			abort();
		if (col_replay_capture_check(&cap, &st.late, cerr, sizeof(cerr)) != RM_OK) {
			fprintf(stderr, "identity broken: %s\n", cerr);
			abort();
		}
		for (i = 0; i < cap.nwins; i++)
			dropped += cap.wins[i].dropped_parts;
		if (dropped + st.late.dropped_parts != st.failed_emits || st.parts != cap.nparts ||
		    st.parts + st.failed_emits != st.emits || st.windows != cap.nwins)
			abort();
		if (o.fail_every == 0 && st.failed_emits)
			abort();
	} else {
		if (rv != RM_EPROTO && rv != RM_EVERSION && rv != RM_EFULL)
			abort();
		if (strncmp(err, "fuzz:", 5) != 0)
			abort();
	}
	col_replay_capture_release(&cap);
	fuzz_round_trip(data, size);
	return 0;
}
