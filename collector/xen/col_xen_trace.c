/*
 * col_xen_trace.c - the xentrace binary format: record decoding, validating
 * and TSC-merging xentrace files, draining the hypervisor's per-CPU rings and
 * merging what live reads return. Owns the file contents and the merge
 * cursors; knows nothing of accounting (col_xen_acct.c). Format decisions are
 * documented in col_xen_trace.h.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "col_xen_trace.h"
#include "rm_err.h"
#include "banned.h"

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

enum col_xen_class col_xen_event_class(uint32_t event)
{
	switch ((event >> 16) & 0xfffu) {
	case 0x001: return COL_XEN_CLS_GEN;
	case 0x002: return COL_XEN_CLS_SCHED;
	case 0x004: return COL_XEN_CLS_DOM0OP;
	case 0x008: return COL_XEN_CLS_HVM;
	case 0x010: return COL_XEN_CLS_MEM;
	case 0x020: return COL_XEN_CLS_PV;
	case 0x040: return COL_XEN_CLS_SHADOW;
	case 0x080: return COL_XEN_CLS_HW;
	case 0x800: return COL_XEN_CLS_GUEST;
	default: return COL_XEN_CLS_OTHER;
	}
}

const char *col_xen_class_name(enum col_xen_class c)
{
	static const char *const names[COL_XEN_CLS_COUNT] = {
		"gen", "sched", "dom0op", "hvm", "mem", "pv", "shadow", "hw", "guest", "other",
	};

	if ((unsigned)c >= COL_XEN_CLS_COUNT)
		return "invalid";
	return names[c];
}

int col_xen_event_min_extra(uint32_t event)
{
	if ((event & COL_XEN_RUNSTATE_MASK) == COL_XEN_TRC_RUNSTATE_CHANGE)
		return 1;
	switch (event) {
	case COL_XEN_TRC_LOST_RECORDS: return 4;
	case COL_XEN_TRC_CONTINUE_RUNNING: return 1;
	case COL_XEN_TRC_SCHED_DOM_ADD:
	case COL_XEN_TRC_SCHED_DOM_REM:
	case COL_XEN_TRC_DOM0_DOM_ADD:
	case COL_XEN_TRC_DOM0_DOM_REM: return 1;
	case COL_XEN_TRC_SCHED_SLEEP:
	case COL_XEN_TRC_SCHED_WAKE:
	case COL_XEN_TRC_SCHED_BLOCK: return 2;
	case COL_XEN_TRC_SCHED_SWITCH: return 4;
	case COL_XEN_TRC_SCHED_SWITCH_INFPREV: return 3;
	case COL_XEN_TRC_SCHED_SWITCH_INFCONT: return 2;
	case COL_XEN_TRC_MEM_GRANT_MAP:
	case COL_XEN_TRC_MEM_GRANT_UNMAP:
	case COL_XEN_TRC_MEM_GRANT_TRANSFER: return 1;
	default: return -1;
	}
}

int col_xen_rec_decode(const uint8_t *p, size_t len, struct col_xen_rec *r, size_t *used)
{
	uint32_t h, n, i;
	size_t size, at;

	if (len < 4)
		return RM_ETRUNC;
	h = rd32(p);
	n = (h >> 28) & 7u;
	size = 4 + ((h & COL_XEN_HDR_TSC) ? 8 : 0) + 4 * (size_t)n;
	if (len < size)
		return RM_ETRUNC;
	memset(r, 0, sizeof(*r));
	r->event = h & 0x0fffffffu;
	r->nextra = n;
	at = 4;
	if (h & COL_XEN_HDR_TSC) {
		r->has_tsc = 1;
		r->tsc = (uint64_t)rd32(p + 4) | (uint64_t)rd32(p + 8) << 32;
		at = 12;
	}
	for (i = 0; i < n; i++)
		r->extra[i] = rd32(p + at + 4 * i);
	*used = size;
	return RM_OK;
}

/* Statistics of one record; last_tsc/have_tsc are its CPU's. */
static void stats_add(struct col_xen_trace_stats *st, const struct col_xen_rec *r, uint64_t *last_tsc,
		      uint8_t *have_tsc)
{
	int min;

	st->records++;
	st->by_class[col_xen_event_class(r->event)]++;
	if (!r->has_tsc) {
		st->no_tsc++;
	} else {
		if (*have_tsc && r->tsc < *last_tsc)
			st->tsc_backwards++;
		else
			*last_tsc = r->tsc;
		*have_tsc = 1;
		if (st->records - st->no_tsc == 1) { /* first own TSC */
			st->first_tsc = st->last_tsc = r->tsc;
		} else {
			if (r->tsc < st->first_tsc)
				st->first_tsc = r->tsc;
			if (r->tsc > st->last_tsc)
				st->last_tsc = r->tsc;
		}
	}
	if (r->event == COL_XEN_TRC_WRAP_BUFFER)
		st->wraps++;
	min = col_xen_event_min_extra(r->event);
	if (min >= 0 && r->nextra < (uint32_t)min) {
		st->malformed++;
		return;
	}
	if (r->event == COL_XEN_TRC_LOST_RECORDS) {
		st->lost_recs++;
		st->lost_total += r->extra[0];
	}
}

/* ---------------------------------------------------------------- files */

struct xf_chunk {
	size_t off;
	size_t len;
};

struct xf_cpu {
	struct xf_chunk *ch;
	uint32_t nch, cap;
	uint8_t present;
	uint8_t have_tsc;     /* scan: an own TSC was seen */
	uint64_t scan_tsc;    /* scan: last own TSC */
	uint64_t first_tsc;   /* first own TSC of this CPU */
	/* merge cursor */
	uint32_t ci;          /* current chunk */
	size_t pos;           /* offset in the current chunk */
	uint64_t last_tsc;
	struct col_xen_rec cur;
};

struct col_xen_file {
	char path[512];
	uint8_t *data;
	size_t size;
	struct xf_cpu *cpu;   /* COL_XEN_MAX_CPUS entries, allocated lazily up to max_cpu */
	uint32_t ncpu_alloc;
	uint32_t *heap;       /* CPU ids with a current record, min-heap on (tsc, cpu) */
	uint32_t nheap;
	int started;
	struct col_xen_trace_stats st;
};

static int read_all(const char *path, uint8_t **data, size_t *size)
{
	FILE *fp = fopen(path, "rb");
	struct stat sb;
	uint8_t *buf;
	size_t n;

	if (!fp) {
		rm_log_error("failed to open '%s': %s", path, strerror(errno));
		return errno == ENOENT ? RM_ENOENT : RM_EIO;
	}
	if (fstat(fileno(fp), &sb) != 0 || !S_ISREG(sb.st_mode)) {
		rm_log_error("failed to read '%s': not a regular file", path);
		fclose(fp);
		return RM_EIO;
	}
	buf = malloc(sb.st_size > 0 ? (size_t)sb.st_size : 1);
	if (!buf) {
		rm_log_error("failed to read '%s': out of memory for %lld bytes", path, (long long)sb.st_size);
		fclose(fp);
		return RM_ENOMEM;
	}
	n = fread(buf, 1, (size_t)sb.st_size, fp);
	if (n != (size_t)sb.st_size || ferror(fp)) {
		rm_log_error("failed to read '%s': %s", path, ferror(fp) ? strerror(errno) : "short read");
		free(buf);
		fclose(fp);
		return RM_EIO;
	}
	fclose(fp);
	*data = buf;
	*size = n;
	return RM_OK;
}

static int file_cpu(struct col_xen_file *f, uint32_t cpu, struct xf_cpu **out)
{
	if (cpu >= f->ncpu_alloc) {
		uint32_t n = f->ncpu_alloc ? f->ncpu_alloc : 8;
		struct xf_cpu *c;

		while (n <= cpu)
			n *= 2;
		if (n > COL_XEN_MAX_CPUS)
			n = COL_XEN_MAX_CPUS;
		c = realloc(f->cpu, n * sizeof(*c));
		if (!c)
			return RM_ENOMEM;
		memset(c + f->ncpu_alloc, 0, (n - f->ncpu_alloc) * sizeof(*c));
		f->cpu = c;
		f->ncpu_alloc = n;
	}
	*out = &f->cpu[cpu];
	return RM_OK;
}

static int add_chunk(struct xf_cpu *c, size_t off, size_t len)
{
	if (c->nch == c->cap) {
		uint32_t n = c->cap ? 2 * c->cap : 16;
		struct xf_chunk *ch = realloc(c->ch, n * sizeof(*ch));

		if (!ch)
			return RM_ENOMEM;
		c->ch = ch;
		c->cap = n;
	}
	c->ch[c->nch].off = off;
	c->ch[c->nch].len = len;
	c->nch++;
	return RM_OK;
}

static int file_scan(struct col_xen_file *f)
{
	const uint8_t *d = f->data;
	size_t off = 0;
	int rv;

	if (f->size == 0) {
		rm_log_error("'%s' is empty, not a xentrace file", f->path);
		return RM_EPROTO;
	}
	while (off < f->size) {
		struct col_xen_rec r;
		struct xf_cpu *c;
		size_t used, p, end;
		uint32_t cpu, count, ev;

		if (f->size - off < 4) {
			rm_log_error("truncated cpu-change record at byte %zu of '%s'", off, f->path);
			return RM_ETRUNC;
		}
		ev = rd32(d + off) & 0x0fffffffu;
		if (ev != COL_XEN_TRC_CPU_CHANGE) {
			if (off == 0)
				rm_log_error("'%s' is not a xentrace file: it starts with event 0x%07x, "
					     "not a cpu-change record", f->path, ev);
			else
				rm_log_error("expected a cpu-change record at byte %zu of '%s', found event 0x%07x",
					     off, f->path, ev);
			return RM_EPROTO;
		}
		if (col_xen_rec_decode(d + off, f->size - off, &r, &used) != RM_OK) {
			rm_log_error("truncated cpu-change record at byte %zu of '%s'", off, f->path);
			return RM_ETRUNC;
		}
		if (r.nextra < 2) {
			rm_log_error("cpu-change record at byte %zu of '%s' has %u data words, expected 2", off,
				     f->path, r.nextra);
			return RM_EPROTO;
		}
		cpu = r.extra[0];
		count = r.extra[1];
		if (cpu >= COL_XEN_MAX_CPUS) {
			rm_log_error("cpu-change record at byte %zu of '%s' names cpu %u (limit %u)", off, f->path,
				     cpu, COL_XEN_MAX_CPUS);
			return RM_EPROTO;
		}
		off += used;
		if (count > f->size - off) {
			rm_log_error("truncated chunk of cpu %u at byte %zu of '%s': it claims %u bytes, %zu remain",
				     cpu, off, f->path, count, f->size - off);
			return RM_ETRUNC;
		}
		if ((rv = file_cpu(f, cpu, &c)) != 0)
			return rv;
		end = off + count;
		for (p = off; p < end; p += used) {
			if (col_xen_rec_decode(d + p, end - p, &r, &used) != RM_OK) {
				rm_log_error("record at byte %zu of '%s' crosses the end of its chunk (cpu %u)", p,
					     f->path, cpu);
				return RM_EPROTO;
			}
			if (r.event == COL_XEN_TRC_CPU_CHANGE) {
				rm_log_error("cpu-change record inside the chunk of cpu %u at byte %zu of '%s'", cpu,
					     p, f->path);
				return RM_EPROTO;
			}
			if (r.has_tsc && !c->have_tsc)
				c->first_tsc = r.tsc;
			stats_add(&f->st, &r, &c->scan_tsc, &c->have_tsc);
		}
		if (count > 0) {
			if ((rv = add_chunk(c, off, count)) != 0)
				return rv;
			if (!c->present) {
				c->present = 1;
				f->st.ncpu++;
				if (cpu > f->st.max_cpu)
					f->st.max_cpu = cpu;
			}
		}
		f->st.chunks++;
		off = end;
	}
	f->st.bytes = f->size;
	return RM_OK;
}

int col_xen_file_open(const char *path, struct col_xen_file **out)
{
	struct col_xen_file *f;
	int rv;

	if (!path || !out)
		return RM_EINVAL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return RM_ENOMEM;
	snprintf(f->path, sizeof(f->path), "%s", path);
	if ((rv = read_all(path, &f->data, &f->size)) != 0) {
		free(f);
		return rv;
	}
	if ((rv = file_scan(f)) != 0) {
		if (rv == RM_ENOMEM)
			rm_log_error("failed to index '%s': out of memory", path);
		col_xen_file_close(f);
		return rv;
	}
	if (f->st.records == 0) {
		rm_log_error("'%s' holds no trace records", path);
		col_xen_file_close(f);
		return RM_EPROTO;
	}
	f->heap = calloc(f->ncpu_alloc, sizeof(*f->heap));
	if (!f->heap) {
		col_xen_file_close(f);
		return RM_ENOMEM;
	}
	*out = f;
	return RM_OK;
}

void col_xen_file_close(struct col_xen_file *f)
{
	uint32_t i;

	if (!f)
		return;
	for (i = 0; i < f->ncpu_alloc; i++)
		free(f->cpu[i].ch);
	free(f->cpu);
	free(f->heap);
	free(f->data);
	free(f);
}

const struct col_xen_trace_stats *col_xen_file_stats(const struct col_xen_file *f)
{
	return &f->st;
}

int col_xen_file_has_cpu(const struct col_xen_file *f, uint32_t cpu)
{
	return cpu < f->ncpu_alloc && f->cpu[cpu].present;
}

/* Load the next non-wrap record of CPU id into its cursor; 1 if one was loaded. */
static int cpu_load(struct col_xen_file *f, uint32_t id)
{
	struct xf_cpu *c = &f->cpu[id];

	while (c->ci < c->nch) {
		const struct xf_chunk *ch = &c->ch[c->ci];
		size_t used;
		int rv;

		if (c->pos >= ch->len) {
			c->ci++;
			c->pos = 0;
			continue;
		}
		rv = col_xen_rec_decode(f->data + ch->off + c->pos, ch->len - c->pos, &c->cur, &used);
		if (rv != RM_OK) /* cannot happen: file_scan() validated every record */
			return 0;
		c->pos += used;
		c->cur.cpu = id;
		if (c->cur.has_tsc) {
			if (c->cur.tsc < c->last_tsc)
				c->cur.tsc = c->last_tsc;
			c->last_tsc = c->cur.tsc;
		} else {
			c->cur.tsc = c->last_tsc;
		}
		if (c->cur.event == COL_XEN_TRC_WRAP_BUFFER)
			continue;
		return 1;
	}
	return 0;
}

static int heap_less(const struct col_xen_file *f, uint32_t a, uint32_t b)
{
	uint64_t ta = f->cpu[a].cur.tsc, tb = f->cpu[b].cur.tsc;

	return ta < tb || (ta == tb && a < b);
}

static void heap_down(struct col_xen_file *f, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i, t;

		if (l < f->nheap && heap_less(f, f->heap[l], f->heap[m]))
			m = l;
		if (r < f->nheap && heap_less(f, f->heap[r], f->heap[m]))
			m = r;
		if (m == i)
			return;
		t = f->heap[i];
		f->heap[i] = f->heap[m];
		f->heap[m] = t;
		i = m;
	}
}

void col_xen_file_rewind(struct col_xen_file *f)
{
	f->started = 0;
	f->nheap = 0;
}

static void file_start(struct col_xen_file *f)
{
	uint32_t i;

	f->nheap = 0;
	for (i = 0; i < f->ncpu_alloc; i++) {
		struct xf_cpu *c = &f->cpu[i];

		c->ci = 0;
		c->pos = 0;
		c->last_tsc = c->first_tsc;
		if (c->present && cpu_load(f, i))
			f->heap[f->nheap++] = i;
	}
	for (i = f->nheap / 2; i-- > 0;)
		heap_down(f, i);
	f->started = 1;
}

int col_xen_file_next(struct col_xen_file *f, struct col_xen_rec *r)
{
	uint32_t top;

	if (!f->started)
		file_start(f);
	if (f->nheap == 0)
		return RM_ENOENT;
	top = f->heap[0];
	*r = f->cpu[top].cur;
	if (!cpu_load(f, top))
		f->heap[0] = f->heap[--f->nheap];
	if (f->nheap > 0)
		heap_down(f, 0);
	return RM_OK;
}

/* ------------------------------------------------------- live buffers */

int col_xen_tbuf_consume(volatile struct col_xen_tbuf_meta *meta, const volatile uint8_t *data,
			 uint32_t data_size, uint8_t *out, size_t cap, size_t *len)
{
	uint32_t cons, prod, window, start, first;

	*len = 0;
	if (cap < data_size || data_size == 0)
		return RM_EINVAL;
	cons = meta->cons;
	prod = meta->prod;
	__atomic_thread_fence(__ATOMIC_ACQUIRE); /* read prod, then the records */
	if (cons == prod)
		return RM_OK;
	if (cons >= 2 * data_size || prod >= 2 * data_size)
		return RM_EPROTO;
	window = prod < cons ? prod + 2 * data_size - cons : prod - cons;
	if (window > data_size)
		return RM_EPROTO;
	start = cons % data_size;
	first = data_size - start;
	if (first >= window) {
		memcpy(out, (const uint8_t *)data + start, window);
	} else {
		memcpy(out, (const uint8_t *)data + start, first);
		memcpy(out + first, (const uint8_t *)data, window - first);
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* read the records, then free them */
	meta->cons = prod;
	*len = window;
	return RM_OK;
}

struct xs_rec {
	struct col_xen_rec r;
	uint64_t seq;
};

struct col_xen_stream {
	uint32_t ncpu;
	uint64_t *last_tsc;
	uint8_t *have_tsc;
	uint8_t *in_round;
	uint8_t *present;
	uint64_t *scan_tsc;
	uint8_t *scan_have;
	struct xs_rec *q;
	size_t head, n, cap;
	uint64_t seq;
	uint64_t limit;
	int have_limit;
	int sorted;
	struct col_xen_trace_stats st;
};

int col_xen_stream_open(uint32_t ncpu, struct col_xen_stream **out)
{
	struct col_xen_stream *s;

	if (!out || ncpu == 0 || ncpu > COL_XEN_MAX_CPUS)
		return RM_EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return RM_ENOMEM;
	s->ncpu = ncpu;
	s->last_tsc = calloc(ncpu, sizeof(*s->last_tsc));
	s->scan_tsc = calloc(ncpu, sizeof(*s->scan_tsc));
	s->have_tsc = calloc(ncpu, 1);
	s->scan_have = calloc(ncpu, 1);
	s->in_round = calloc(ncpu, 1);
	s->present = calloc(ncpu, 1);
	s->sorted = 1;
	if (!s->last_tsc || !s->scan_tsc || !s->have_tsc || !s->scan_have || !s->in_round || !s->present) {
		col_xen_stream_free(s);
		return RM_ENOMEM;
	}
	*out = s;
	return RM_OK;
}

void col_xen_stream_free(struct col_xen_stream *s)
{
	if (!s)
		return;
	free(s->last_tsc);
	free(s->scan_tsc);
	free(s->have_tsc);
	free(s->scan_have);
	free(s->in_round);
	free(s->present);
	free(s->q);
	free(s);
}

int col_xen_stream_push(struct col_xen_stream *s, uint32_t cpu, const uint8_t *bytes, size_t len)
{
	size_t p, used;

	if (cpu >= s->ncpu)
		return RM_EINVAL;
	s->st.bytes += len;
	if (len > 0)
		s->st.chunks++;
	for (p = 0; p < len; p += used) {
		struct col_xen_rec r;

		if (col_xen_rec_decode(bytes + p, len - p, &r, &used) != RM_OK) {
			rm_log_error("trace buffer of cpu %u ends inside a record (%zu bytes left)", cpu, len - p);
			return RM_EPROTO;
		}
		if (r.event == COL_XEN_TRC_CPU_CHANGE) {
			rm_log_error("cpu-change record in the trace buffer of cpu %u", cpu);
			return RM_EPROTO;
		}
		r.cpu = cpu;
		stats_add(&s->st, &r, &s->scan_tsc[cpu], &s->scan_have[cpu]);
		if (!s->present[cpu]) {
			s->present[cpu] = 1;
			s->st.ncpu++;
			if (cpu > s->st.max_cpu)
				s->st.max_cpu = cpu;
		}
		if (r.has_tsc) {
			if (s->have_tsc[cpu] && r.tsc < s->last_tsc[cpu])
				r.tsc = s->last_tsc[cpu];
			s->last_tsc[cpu] = r.tsc;
			s->have_tsc[cpu] = 1;
		} else {
			r.tsc = s->last_tsc[cpu];
		}
		if (r.event == COL_XEN_TRC_WRAP_BUFFER)
			continue;
		if (s->have_tsc[cpu])
			s->in_round[cpu] = 1;
		if (s->n == s->cap) {
			size_t n = s->cap ? 2 * s->cap : 1024;
			struct xs_rec *q = realloc(s->q, n * sizeof(*q));

			if (!q)
				return RM_ENOMEM;
			s->q = q;
			s->cap = n;
		}
		s->q[s->n].r = r;
		s->q[s->n].seq = s->seq++;
		s->n++;
		s->sorted = 0;
	}
	return RM_OK;
}

static int xs_cmp(const void *a, const void *b)
{
	const struct xs_rec *x = a, *y = b;

	if (x->r.tsc != y->r.tsc)
		return x->r.tsc < y->r.tsc ? -1 : 1;
	if (x->r.cpu != y->r.cpu)
		return x->r.cpu < y->r.cpu ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void stream_sort(struct col_xen_stream *s)
{
	s->sorted = 1;
	if (s->head >= s->n) {
		s->head = s->n = 0;
		return;
	}
	if (s->head > 0) {
		memmove(s->q, s->q + s->head, (s->n - s->head) * sizeof(*s->q));
		s->n -= s->head;
		s->head = 0;
	}
	qsort(s->q, s->n, sizeof(*s->q), xs_cmp);
	s->sorted = 1;
}

void col_xen_stream_end_round(struct col_xen_stream *s)
{
	uint64_t lim = 0;
	int any = 0;
	uint32_t i;

	for (i = 0; i < s->ncpu; i++) {
		if (!s->in_round[i])
			continue;
		if (!any || s->last_tsc[i] < lim)
			lim = s->last_tsc[i];
		any = 1;
		s->in_round[i] = 0;
	}
	if (any) {
		s->limit = lim;
		s->have_limit = 1;
	}
	stream_sort(s);
}

int col_xen_stream_pop(struct col_xen_stream *s, int drain, struct col_xen_rec *r)
{
	if (!s->sorted)
		stream_sort(s);
	if (s->head >= s->n)
		return RM_ENOENT;
	if (!drain && (!s->have_limit || s->q[s->head].r.tsc > s->limit))
		return RM_ENOENT;
	*r = s->q[s->head++].r;
	return RM_OK;
}

const struct col_xen_trace_stats *col_xen_stream_stats(const struct col_xen_stream *s)
{
	return &s->st;
}
