/*
 * col_xen_trace_test.c - the xentrace parser on the real credit2 trace
 * (checked against a separate scanner written here), on generated traces,
 * on truncated and garbage files, and the live ring / stream helpers.
 */
#include <endian.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "col_xen_gen.h"
#include "col_xen_trace.h"
#include "rm_err.h"
#include "rm_test.h"
#include "banned.h"

/* ------------------------------------------------- independent scanner */

struct ind_rec {
	uint32_t cpu, event, nextra, has_tsc;
	uint64_t tsc; /* own or inherited */
	uint32_t extra[7];
};

struct ind_chunk {
	uint32_t cpu;
	size_t off, len;
};

struct ind {
	uint8_t *data;
	size_t size;
	struct ind_rec *rec;
	size_t nrec;
	struct ind_chunk *ch;
	size_t nch;
	uint64_t by_cls[16];
	uint64_t wraps, no_tsc;
	uint32_t cpus_seen[COL_XEN_MAX_CPUS / 32];
};

static uint32_t w32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Class index as the header names them: one bit per class in bits 16..27. */
static int ind_class(uint32_t ev)
{
	static const uint32_t bits[] = { 0x001, 0x002, 0x004, 0x008, 0x010, 0x020, 0x040, 0x080, 0x800 };
	uint32_t c = (ev >> 16) & 0xfff;
	int i;

	for (i = 0; i < 9; i++)
		if (c == bits[i])
			return i;
	return 9;
}

static uint8_t *slurp(const char *path, size_t *size)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *d;
	long n;

	if (!fp)
		return NULL;
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	d = malloc(n > 0 ? (size_t)n : 1);
	if (d && fread(d, 1, (size_t)n, fp) != (size_t)n) {
		free(d);
		d = NULL;
	}
	fclose(fp);
	*size = (size_t)n;
	return d;
}

/* Straightforward walk of a well-formed file: returns 0 on success. */
static int ind_scan(const char *path, struct ind *x)
{
	uint64_t last[COL_XEN_MAX_CPUS];
	size_t off = 0, cap = 0, chcap = 0;

	memset(x, 0, sizeof(*x));
	memset(last, 0, sizeof(last));
	x->data = slurp(path, &x->size);
	if (!x->data)
		return -1;
	/* first own TSC of each CPU, for leading records without one */
	while (off + 12 <= x->size) {
		uint32_t cpu = w32(x->data + off + 4), len = w32(x->data + off + 8);
		size_t p = off + 12;

		while (p < off + 12 + len) {
			uint32_t h = w32(x->data + p);

			if ((h >> 31) && !last[cpu])
				last[cpu] = (uint64_t)w32(x->data + p + 4) | (uint64_t)w32(x->data + p + 8) << 32;
			p += 4 + ((h >> 31) ? 8 : 0) + 4 * ((h >> 28) & 7);
		}
		off += 12 + len;
	}
	off = 0;
	while (off < x->size) {
		uint32_t h = w32(x->data + off), cpu, len;
		size_t p;

		if ((h & 0x0fffffff) != 0x1f003 || off + 12 > x->size)
			return -2;
		cpu = w32(x->data + off + 4);
		len = w32(x->data + off + 8);
		if (off + 12 + len > x->size || cpu >= COL_XEN_MAX_CPUS)
			return -3;
		if (x->nch == chcap) {
			chcap = chcap ? 2 * chcap : 64;
			x->ch = realloc(x->ch, chcap * sizeof(*x->ch));
		}
		x->ch[x->nch].cpu = cpu;
		x->ch[x->nch].off = off + 12;
		x->ch[x->nch].len = len;
		x->nch++;
		x->cpus_seen[cpu / 32] |= 1u << (cpu % 32);
		for (p = off + 12; p < off + 12 + len;) {
			struct ind_rec *r;
			uint32_t i;

			h = w32(x->data + p);
			if (x->nrec == cap) {
				cap = cap ? 2 * cap : 4096;
				x->rec = realloc(x->rec, cap * sizeof(*x->rec));
			}
			r = &x->rec[x->nrec++];
			memset(r, 0, sizeof(*r));
			r->cpu = cpu;
			r->event = h & 0x0fffffff;
			r->nextra = (h >> 28) & 7;
			r->has_tsc = h >> 31;
			p += 4;
			if (r->has_tsc) {
				r->tsc = (uint64_t)w32(x->data + p) | (uint64_t)w32(x->data + p + 4) << 32;
				last[cpu] = r->tsc;
				p += 8;
			} else {
				r->tsc = last[cpu];
				x->no_tsc++;
			}
			for (i = 0; i < r->nextra; i++, p += 4)
				r->extra[i] = w32(x->data + p);
			x->by_cls[ind_class(r->event)]++;
			if (r->event == 0x1f002)
				x->wraps++;
		}
		if (p != off + 12 + len)
			return -4;
		off = off + 12 + len;
	}
	return 0;
}

static void ind_free(struct ind *x)
{
	free(x->data);
	free(x->rec);
	free(x->ch);
}

static int real_trace_present(void)
{
	if (access(REAL_XEN_TRACE, R_OK) == 0)
		return 1;
	fprintf(stderr, "FAIL: the real xen trace '%s' is missing: it belongs in tests/data/xen/\n",
		REAL_XEN_TRACE);
	CU_FAIL_FATAL("real xen trace missing (" REAL_XEN_TRACE ")");
	return 0;
}

static const char *tmp(const char *name)
{
	static char path[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(path[i], sizeof(path[i]), "%s/%s", rm_test_tmpdir(), name);
	return path[i];
}

static void write_bytes(const char *path, const void *d, size_t n)
{
	FILE *fp = fopen(path, "wb");

	CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
	CU_ASSERT_EQUAL(fwrite(d, 1, n, fp), n);
	fclose(fp);
}

/* ---------------------------------------------------------------- cases */

static void test_real_trace_counts(void)
{
	const struct col_xen_trace_stats *st;
	struct col_xen_file *f = NULL;
	struct col_xen_rec r;
	struct ind x;
	uint64_t n = 0, prev_tsc = 0, total = 0;
	int c, ok = 1;

	if (!real_trace_present())
		return;
	CU_ASSERT_EQUAL_FATAL(ind_scan(REAL_XEN_TRACE, &x), 0);
	CU_ASSERT_EQUAL_FATAL(col_xen_file_open(REAL_XEN_TRACE, &f), RM_OK);
	st = col_xen_file_stats(f);
	CU_ASSERT_EQUAL(st->bytes, x.size);
	CU_ASSERT_EQUAL(st->chunks, x.nch);
	CU_ASSERT_EQUAL(st->records, x.nrec);
	CU_ASSERT_EQUAL(st->wraps, x.wraps);
	CU_ASSERT_EQUAL(st->no_tsc, x.no_tsc);
	for (c = 0; c < COL_XEN_CLS_COUNT; c++) {
		CU_ASSERT_EQUAL(st->by_class[c], x.by_cls[c]);
		total += st->by_class[c];
		fprintf(stderr, "  class %-6s %llu\n", col_xen_class_name(c), (unsigned long long)st->by_class[c]);
	}
	CU_ASSERT_EQUAL(total, st->records);
	fprintf(stderr, "  %llu bytes, %llu chunks, %llu records (%llu without tsc, %llu wraps) on %u cpus\n",
		(unsigned long long)st->bytes, (unsigned long long)st->chunks, (unsigned long long)st->records,
		(unsigned long long)st->no_tsc, (unsigned long long)st->wraps, st->ncpu);
	/* what the data's README states: 8 CPUs, wraps, no lost records */
	CU_ASSERT_EQUAL(st->ncpu, 8);
	CU_ASSERT(st->wraps > 0);
	CU_ASSERT_EQUAL(st->lost_recs, 0);
	CU_ASSERT(st->by_class[COL_XEN_CLS_SCHED] > 0);
	CU_ASSERT(st->by_class[COL_XEN_CLS_HVM] > 0);
	/* every interpreted record has the shape Xen writes */
	CU_ASSERT_EQUAL(st->malformed, 0);
	CU_ASSERT_EQUAL(st->tsc_backwards, 0);

	/* the merged stream: every non-wrap record once, TSC order, per-CPU order kept */
	{
		size_t *pos = calloc(COL_XEN_MAX_CPUS, sizeof(*pos));
		size_t **idx = calloc(COL_XEN_MAX_CPUS, sizeof(*idx));
		size_t *cnt = calloc(COL_XEN_MAX_CPUS, sizeof(*cnt));
		size_t i;

		for (i = 0; i < x.nrec; i++)
			if (x.rec[i].event != 0x1f002)
				cnt[x.rec[i].cpu]++;
		for (i = 0; i < COL_XEN_MAX_CPUS; i++)
			if (cnt[i])
				idx[i] = malloc(cnt[i] * sizeof(size_t));
		memset(cnt, 0, COL_XEN_MAX_CPUS * sizeof(*cnt));
		for (i = 0; i < x.nrec; i++)
			if (x.rec[i].event != 0x1f002)
				idx[x.rec[i].cpu][cnt[x.rec[i].cpu]++] = i;
		while (col_xen_file_next(f, &r) == RM_OK) {
			const struct ind_rec *e;

			if (r.tsc < prev_tsc)
				ok = 0;
			prev_tsc = r.tsc;
			if (r.cpu >= COL_XEN_MAX_CPUS || pos[r.cpu] >= cnt[r.cpu]) {
				ok = 0;
				break;
			}
			e = &x.rec[idx[r.cpu][pos[r.cpu]++]];
			if (e->event != r.event || e->nextra != r.nextra || e->tsc != r.tsc || e->has_tsc != r.has_tsc ||
			    memcmp(e->extra, r.extra, sizeof(r.extra)) != 0)
				ok = 0;
			n++;
		}
		CU_ASSERT(ok);
		CU_ASSERT_EQUAL(n, st->records - st->wraps);
		for (i = 0; i < COL_XEN_MAX_CPUS; i++) {
			CU_ASSERT_EQUAL(pos[i], cnt[i]);
			free(idx[i]);
		}
		free(pos);
		free(idx);
		free(cnt);
	}
	/* rewinding replays the same stream */
	col_xen_file_rewind(f);
	n = 0;
	while (col_xen_file_next(f, &r) == RM_OK)
		n++;
	CU_ASSERT_EQUAL(n, st->records - st->wraps);
	col_xen_file_close(f);
	ind_free(&x);
}

static void test_decode_roundtrip(void)
{
	uint32_t extra[7] = { 1, 2, 3, 0xdeadbeef, 5, 6, 0xffffffff };
	uint8_t buf[64];
	struct col_xen_rec r;
	size_t used, size;
	uint32_t n;
	int tsc;

	for (tsc = 0; tsc <= 1; tsc++) {
		for (n = 0; n <= 7; n++) {
			size = col_xen_gen_encode(buf, sizeof(buf), tsc, 0x123456789abcull, 0x28006, n, extra);
			CU_ASSERT_EQUAL(size, 4 + (tsc ? 8u : 0u) + 4 * n);
			CU_ASSERT_EQUAL(col_xen_rec_decode(buf, size, &r, &used), RM_OK);
			CU_ASSERT_EQUAL(used, size);
			CU_ASSERT_EQUAL(r.event, 0x28006);
			CU_ASSERT_EQUAL(r.nextra, n);
			CU_ASSERT_EQUAL(r.has_tsc, (uint32_t)tsc);
			CU_ASSERT_EQUAL(r.tsc, tsc ? 0x123456789abcull : 0);
			CU_ASSERT_EQUAL(memcmp(r.extra, extra, 4 * n), 0);
			/* one byte short of the record */
			CU_ASSERT_EQUAL(col_xen_rec_decode(buf, size - 1, &r, &used), RM_ETRUNC);
		}
	}
	CU_ASSERT_EQUAL(col_xen_rec_decode(buf, 3, &r, &used), RM_ETRUNC);
	CU_ASSERT_EQUAL(col_xen_gen_encode(buf, 8, 1, 0, 1, 0, extra), 0);
	CU_ASSERT_EQUAL(col_xen_event_class(COL_XEN_TRC_MEM_GRANT_MAP), COL_XEN_CLS_MEM);
	CU_ASSERT_EQUAL(col_xen_event_class(COL_XEN_TRC_SCHED_SWITCH), COL_XEN_CLS_SCHED);
	CU_ASSERT_EQUAL(col_xen_event_class(COL_XEN_TRC_LOST_RECORDS), COL_XEN_CLS_GEN);
	CU_ASSERT_EQUAL(col_xen_event_class(0x00081001), COL_XEN_CLS_HVM);
	CU_ASSERT_EQUAL(col_xen_event_class(0x0fff0000), COL_XEN_CLS_OTHER);
}

/* Two CPUs over three rounds, records without TSC, wraps: merge order by hand. */
static void test_merge_generated(void)
{
	const char *path = tmp("merge.bin");
	struct col_xen_gen *g;
	struct col_xen_file *f;
	struct col_xen_rec r;
	uint32_t w[2] = { 7, 9 };
	/* expected (cpu, tsc, event) in merged order */
	static const struct { uint32_t cpu; uint64_t tsc; uint32_t ev; } want[] = {
		{ 0, 100, 0x28004 }, { 1, 150, 0x28004 }, { 1, 150, 0x81001 }, { 0, 200, 0x28004 },
		{ 0, 200, 0x81001 }, { 0, 250, 0x28006 }, { 1, 250, 0x28004 }, { 1, 300, 0x28004 },
	};
	size_t i = 0;

	CU_ASSERT_EQUAL_FATAL(col_xen_gen_open(path, 2, 1000000, &g), RM_OK);
	CU_ASSERT_EQUAL(col_xen_gen_raw(g, 0, 1, 100, 0x28004, 2, w), RM_OK);
	CU_ASSERT_EQUAL(col_xen_gen_raw(g, 1, 1, 150, 0x28004, 2, w), RM_OK);
	CU_ASSERT_EQUAL(col_xen_gen_raw(g, 1, 0, 0, 0x81001, 0, w), RM_OK); /* inherits 150 */
	CU_ASSERT_EQUAL(col_xen_gen_round(g), RM_OK);
	CU_ASSERT_EQUAL(col_xen_gen_raw(g, 0, 1, 200, 0x28004, 2, w), RM_OK);
	CU_ASSERT_EQUAL(col_xen_gen_wrap(g, 0, 0, 16), RM_OK);
	CU_ASSERT_EQUAL(col_xen_gen_raw(g, 0, 0, 0, 0x81001, 0, w), RM_OK); /* inherits 200 */
	CU_ASSERT_EQUAL(col_xen_gen_raw(g, 1, 1, 250, 0x28004, 2, w), RM_OK);
	CU_ASSERT_EQUAL(col_xen_gen_round(g), RM_OK);
	CU_ASSERT_EQUAL(col_xen_gen_raw(g, 0, 1, 250, 0x28006, 2, w), RM_OK); /* tie at 250: lower cpu first */
	CU_ASSERT_EQUAL(col_xen_gen_wrap(g, 1, 260, 40), RM_OK); /* long filler carries a TSC */
	CU_ASSERT_EQUAL(col_xen_gen_raw(g, 1, 1, 300, 0x28004, 2, w), RM_OK);
	CU_ASSERT_EQUAL_FATAL(col_xen_gen_close(g), RM_OK);

	CU_ASSERT_EQUAL_FATAL(col_xen_file_open(path, &f), RM_OK);
	CU_ASSERT_EQUAL(col_xen_file_stats(f)->wraps, 2);
	CU_ASSERT_EQUAL(col_xen_file_stats(f)->chunks, 6);
	CU_ASSERT_EQUAL(col_xen_file_stats(f)->ncpu, 2);
	CU_ASSERT_EQUAL(col_xen_file_stats(f)->first_tsc, 100);
	CU_ASSERT_EQUAL(col_xen_file_stats(f)->last_tsc, 300);
	while (col_xen_file_next(f, &r) == RM_OK) {
		if (i < sizeof(want) / sizeof(want[0])) {
			CU_ASSERT_EQUAL(r.cpu, want[i].cpu);
			CU_ASSERT_EQUAL(r.tsc, want[i].tsc);
			CU_ASSERT_EQUAL(r.event, want[i].ev);
		}
		i++;
	}
	CU_ASSERT_EQUAL(i, sizeof(want) / sizeof(want[0]));
	col_xen_file_close(f);
}

static void expect_open(const char *path, int rv)
{
	struct col_xen_file *f = NULL;

	CU_ASSERT_EQUAL(col_xen_file_open(path, &f), rv);
	CU_ASSERT_PTR_NULL(f);
	col_xen_file_close(f);
}

static void test_truncated_files(void)
{
	const char *src = tmp("whole.bin"), *cut = tmp("cut.bin");
	struct col_xen_gen *g;
	uint32_t w[4] = { 0, 0, 1, 0 };
	uint8_t *d;
	size_t n, at;
	int i;

	CU_ASSERT_EQUAL_FATAL(col_xen_gen_open(src, 2, 1000000, &g), RM_OK);
	for (i = 0; i < 4; i++) {
		CU_ASSERT_EQUAL(col_xen_gen_raw(g, 0, 1, 1000 + i, 0x2800a, 4, w), RM_OK);
		CU_ASSERT_EQUAL(col_xen_gen_raw(g, 1, 1, 1000 + i, 0x2800a, 4, w), RM_OK);
		CU_ASSERT_EQUAL(col_xen_gen_round(g), RM_OK);
	}
	CU_ASSERT_EQUAL_FATAL(col_xen_gen_close(g), RM_OK);
	d = slurp(src, &n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	/* each chunk: 12-byte header + one 28-byte record */
	CU_ASSERT_EQUAL_FATAL(n, 8 * 40);
	/* every cut that is not a chunk boundary is an error; boundaries are valid files */
	for (at = 1; at < n; at = at == 81 ? n - 41 : at + 1) {
		write_bytes(cut, d, at);
		if (at % 40 == 0) {
			struct col_xen_file *f = NULL;

			CU_ASSERT_EQUAL(col_xen_file_open(cut, &f), RM_OK);
			CU_ASSERT_EQUAL(col_xen_file_stats(f)->records, at / 40);
			col_xen_file_close(f);
		} else {
			expect_open(cut, RM_ETRUNC);
		}
	}
	free(d);
	/* the real trace cut in the middle of a chunk */
	if (real_trace_present()) {
		d = slurp(REAL_XEN_TRACE, &n);
		CU_ASSERT_PTR_NOT_NULL_FATAL(d);
		write_bytes(cut, d, n / 2 + 3);
		expect_open(cut, RM_ETRUNC);
		write_bytes(cut, d, n - 1);
		expect_open(cut, RM_ETRUNC);
		free(d);
	}
}

static void test_garbage_files(void)
{
	const char *path = tmp("garbage.bin");
	uint8_t buf[4096];
	uint32_t hdr[2], w[4] = { 0 };
	size_t n, i;
	unsigned seed = 12345;

	expect_open(tmp("does-not-exist.bin"), RM_ENOENT);
	write_bytes(path, buf, 0);
	expect_open(path, RM_EPROTO); /* empty */
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(rand_r(&seed) >> 7);
	buf[0] = 0x42; /* never a cpu-change header */
	write_bytes(path, buf, sizeof(buf));
	expect_open(path, RM_EPROTO);
	expect_open(rm_test_tmpdir(), RM_EIO); /* a directory */

	/* a chunk whose byte count ends inside a record */
	hdr[0] = 0;
	hdr[1] = 28 - 4;
	n = col_xen_gen_encode(buf, sizeof(buf), 0, 0, COL_XEN_TRC_CPU_CHANGE, 2, hdr);
	n += col_xen_gen_encode(buf + n, sizeof(buf) - n, 1, 5, 0x2800a, 4, w);
	write_bytes(path, buf, n);
	expect_open(path, RM_EPROTO);
	/* a cpu id beyond the limit */
	hdr[0] = 5000;
	hdr[1] = 28;
	n = col_xen_gen_encode(buf, sizeof(buf), 0, 0, COL_XEN_TRC_CPU_CHANGE, 2, hdr);
	n += col_xen_gen_encode(buf + n, sizeof(buf) - n, 1, 5, 0x2800a, 4, w);
	write_bytes(path, buf, n);
	expect_open(path, RM_EPROTO);
	/* a cpu-change record inside a chunk */
	hdr[0] = 0;
	hdr[1] = 12;
	n = col_xen_gen_encode(buf, sizeof(buf), 0, 0, COL_XEN_TRC_CPU_CHANGE, 2, hdr);
	n += col_xen_gen_encode(buf + n, sizeof(buf) - n, 0, 0, COL_XEN_TRC_CPU_CHANGE, 2, hdr);
	write_bytes(path, buf, n);
	expect_open(path, RM_EPROTO);
	/* a cpu-change record with one data word */
	n = col_xen_gen_encode(buf, sizeof(buf), 0, 0, COL_XEN_TRC_CPU_CHANGE, 1, hdr);
	write_bytes(path, buf, n);
	expect_open(path, RM_EPROTO);
	/* only empty chunks: no records */
	hdr[1] = 0;
	n = col_xen_gen_encode(buf, sizeof(buf), 0, 0, COL_XEN_TRC_CPU_CHANGE, 2, hdr);
	write_bytes(path, buf, n);
	expect_open(path, RM_EPROTO);
	/* a valid chunk followed by garbage */
	hdr[1] = 28;
	n = col_xen_gen_encode(buf, sizeof(buf), 0, 0, COL_XEN_TRC_CPU_CHANGE, 2, hdr);
	n += col_xen_gen_encode(buf + n, sizeof(buf) - n, 1, 5, 0x2800a, 4, w);
	memcpy(buf + n, "garbage!", 8);
	write_bytes(path, buf, n + 8);
	expect_open(path, RM_EPROTO);
}

/*
 * A writer that behaves like Xen's __insert_record() on one ring of a size
 * that is not a power of two: records never straddle the end (a wrap record
 * fills the rest), indexes run modulo 2 * size.
 */
struct ring {
	struct col_xen_tbuf_meta meta;
	uint8_t data[4096 - 8];
};

static uint32_t ring_free(const struct ring *rg)
{
	uint32_t ds = sizeof(rg->data), used;

	used = rg->meta.prod >= rg->meta.cons ? rg->meta.prod - rg->meta.cons
					       : rg->meta.prod + 2 * ds - rg->meta.cons;
	return ds - used;
}

/* Returns 1 if written, 0 if the ring is full (record lost). */
static int ring_put(struct ring *rg, uint64_t tsc, uint32_t ev, uint32_t n, const uint32_t *extra)
{
	uint32_t ds = sizeof(rg->data), size = 12 + 4 * n, off = rg->meta.prod % ds, to_end = ds - off;
	uint32_t need = size;

	if (to_end < size)
		need += to_end;
	if (ring_free(rg) < need)
		return 0;
	if (to_end < size) {
		uint32_t fill[7] = { 0 }, extra_words = (to_end - 4) / 4;
		int with_tsc = 0;

		if (extra_words > 7) {
			with_tsc = 1;
			extra_words -= 2;
		}
		CU_ASSERT_EQUAL(col_xen_gen_encode(rg->data + off, to_end, with_tsc, tsc, COL_XEN_TRC_WRAP_BUFFER,
						   extra_words, fill), to_end);
		rg->meta.prod = (rg->meta.prod + to_end) % (2 * ds);
		off = 0;
	}
	CU_ASSERT_EQUAL(col_xen_gen_encode(rg->data + off, size, 1, tsc, ev, n, extra), size);
	rg->meta.prod = (rg->meta.prod + size) % (2 * ds);
	return 1;
}

static void test_tbuf_consume(void)
{
	static struct ring rg;
	static uint8_t out[sizeof(rg.data)];
	struct col_xen_stream *s;
	struct col_xen_rec r;
	uint64_t written = 0, read = 0, tsc = 1000, expect_tsc = 1000;
	size_t len;
	int round, ok = 1;

	memset(&rg, 0, sizeof(rg));
	CU_ASSERT_EQUAL_FATAL(col_xen_stream_open(1, &s), RM_OK);
	for (round = 0; round < 300; round++) {
		/* a varying burst, sometimes filling the ring completely */
		int burst = (round * 37) % 250, i;

		for (i = 0; i < burst; i++) {
			uint32_t extra[7] = { (uint32_t)written, 1, 2, 3, 4, 5, 6 };

			if (!ring_put(&rg, tsc, 0x28004, 1 + (uint32_t)(written % 7), extra))
				break;
			written++;
			tsc += 10;
		}
		CU_ASSERT_EQUAL(col_xen_tbuf_consume(&rg.meta, rg.data, sizeof(rg.data), out, sizeof(out), &len),
				RM_OK);
		CU_ASSERT_EQUAL(rg.meta.cons, rg.meta.prod);
		CU_ASSERT_EQUAL(col_xen_stream_push(s, 0, out, len), RM_OK);
		col_xen_stream_end_round(s);
		while (col_xen_stream_pop(s, 0, &r) == RM_OK) {
			if (r.event != 0x28004 || r.extra[0] != (uint32_t)read || r.tsc != expect_tsc ||
			    r.nextra != 1 + read % 7)
				ok = 0;
			read++;
			expect_tsc += 10;
		}
	}
	CU_ASSERT(ok);
	CU_ASSERT_EQUAL(read, written);
	CU_ASSERT(col_xen_stream_stats(s)->wraps > 0);
	CU_ASSERT(written > 10000);
	col_xen_stream_free(s);

	/* nothing new */
	CU_ASSERT_EQUAL(col_xen_tbuf_consume(&rg.meta, rg.data, sizeof(rg.data), out, sizeof(out), &len), RM_OK);
	CU_ASSERT_EQUAL(len, 0);
	/* inconsistent indexes are refused, not followed */
	rg.meta.cons = 2 * sizeof(rg.data);
	CU_ASSERT_EQUAL(col_xen_tbuf_consume(&rg.meta, rg.data, sizeof(rg.data), out, sizeof(out), &len),
			RM_EPROTO);
	rg.meta.cons = 0;
	rg.meta.prod = sizeof(rg.data) + 4;
	CU_ASSERT_EQUAL(col_xen_tbuf_consume(&rg.meta, rg.data, sizeof(rg.data), out, sizeof(out), &len),
			RM_EPROTO);
	CU_ASSERT_EQUAL(col_xen_tbuf_consume(&rg.meta, rg.data, sizeof(rg.data), out, 16, &len), RM_EINVAL);
}

/*
 * The live merge fed with the real trace's chunks in xentrace's rounds (a
 * round ends when a CPU comes again) releases the same records as the file
 * merge, in non-decreasing TSC order.
 */
static void test_stream_matches_file(void)
{
	struct col_xen_stream *s;
	struct col_xen_file *f;
	struct col_xen_rec r, q;
	struct ind x;
	uint8_t in_round[COL_XEN_MAX_CPUS];
	uint64_t n = 0, prev = 0, same = 0, late = 0;
	size_t i;
	int rv;

	if (!real_trace_present())
		return;
	CU_ASSERT_EQUAL_FATAL(ind_scan(REAL_XEN_TRACE, &x), 0);
	CU_ASSERT_EQUAL_FATAL(col_xen_file_open(REAL_XEN_TRACE, &f), RM_OK);
	CU_ASSERT_EQUAL_FATAL(col_xen_stream_open(8, &s), RM_OK);
	memset(in_round, 0, sizeof(in_round));
	for (i = 0; i <= x.nch; i++) {
		if (i == x.nch || in_round[x.ch[i].cpu]) {
			col_xen_stream_end_round(s);
			memset(in_round, 0, sizeof(in_round));
			while ((rv = col_xen_stream_pop(s, i == x.nch, &r)) == RM_OK) {
				CU_ASSERT_EQUAL_FATAL(col_xen_file_next(f, &q), RM_OK);
				if (r.tsc < prev)
					late++;
				prev = r.tsc;
				if (r.cpu == q.cpu && r.tsc == q.tsc && r.event == q.event &&
				    memcmp(r.extra, q.extra, sizeof(r.extra)) == 0)
					same++;
				n++;
			}
		}
		if (i < x.nch) {
			in_round[x.ch[i].cpu] = 1;
			CU_ASSERT_EQUAL(col_xen_stream_push(s, x.ch[i].cpu, x.data + x.ch[i].off, x.ch[i].len), RM_OK);
		}
	}
	CU_ASSERT_EQUAL(col_xen_file_next(f, &q), RM_ENOENT);
	CU_ASSERT_EQUAL(n, col_xen_file_stats(f)->records - col_xen_file_stats(f)->wraps);
	fprintf(stderr, "  stream: %llu records, %llu identical to the file merge, %llu out of order\n",
		(unsigned long long)n, (unsigned long long)same, (unsigned long long)late);
	CU_ASSERT_EQUAL(same, n);
	CU_ASSERT_EQUAL(late, 0);
	CU_ASSERT_EQUAL(col_xen_stream_stats(s)->records, col_xen_file_stats(f)->records);
	CU_ASSERT_EQUAL(col_xen_stream_stats(s)->wraps, col_xen_file_stats(f)->wraps);
	/* bytes ending inside a record are refused */
	CU_ASSERT_EQUAL(col_xen_stream_push(s, 0, x.data + x.ch[0].off, 10), RM_EPROTO);
	CU_ASSERT_EQUAL(col_xen_stream_push(s, 8, x.data + x.ch[0].off, 0), RM_EINVAL);
	col_xen_stream_free(s);
	col_xen_file_close(f);
	ind_free(&x);
}

static CU_TestInfo cases[] = {
	{ "parses the whole real trace", test_real_trace_counts },
	{ "decodes and encodes records", test_decode_roundtrip },
	{ "merges cpus by tsc, skipping wraps", test_merge_generated },
	{ "rejects truncated files", test_truncated_files },
	{ "rejects garbage files", test_garbage_files },
	{ "drains a wrapping trace ring like xentrace", test_tbuf_consume },
	{ "live stream merge matches the file merge", test_stream_matches_file },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_xen_trace", cases)
