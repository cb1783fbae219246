/*
 * col_events.c - parser and writer of the recorded event stream format
 * (col_events.h). Owns the in-memory copy of a stream, its line cursor and
 * the per-CPU ordering check; knows nothing of the segmenter. Every
 * malformed input ends in a "name:line: message" error, never a crash: the
 * parser works on (pointer, length) spans and never relies on NUL bytes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "col_events.h"
#include "rm_err.h"
#include "banned.h"

#define COL_EVENTS_MAX_TOKENS 24
#define COL_EVENTS_ERRLEN 320

struct col_events {
	char *name;
	char *data;
	size_t len;
	size_t pos;
	uint32_t line;            /* number of the line last read */
	int state;                /* RM_OK, or the sticky RM_ENOENT / RM_EPROTO */
	struct col_events_hdr hdr;
	uint64_t *last_ts;        /* [ncpu] timestamp of the last event per CPU */
	uint32_t *last_line;      /* [ncpu] its line */
	char err[COL_EVENTS_ERRLEN];
};

struct col_events_tok {
	const char *p;
	size_t n;
};

struct col_events_kv {
	struct col_events_tok key, val;
	int used;
};

/* One event line being parsed. */
struct col_events_line {
	struct col_events *r;
	const char *type;
	struct col_events_kv kv[COL_EVENTS_MAX_TOKENS];
	size_t nkv;
};

static const char *const col_ev_names[] = {
	[COL_EV_SWITCH] = "switch", [COL_EV_WAKEUP] = "wakeup", [COL_EV_RECV] = "recv", [COL_EV_SEND] = "send",
	[COL_EV_FORK] = "fork",     [COL_EV_EXIT] = "exit",     [COL_EV_DISK] = "disk",
	[COL_EV_STEAL] = "steal",
};

const char *col_ev_type_name(enum col_ev_type t)
{
	if ((int)t < COL_EV_SWITCH || (int)t > COL_EV_STEAL)
		return "?";
	return col_ev_names[t];
}

/* ---- small helpers ---- */

static int col_events_tok_is(struct col_events_tok t, const char *s)
{
	size_t n = strlen(s);

	return t.n == n && memcmp(t.p, s, n) == 0;
}

/* 'tok' for messages: at most 40 bytes of it, then "...". */
static const char *col_events_q(struct col_events_tok t, char *buf, size_t len)
{
	if (t.n > 40)
		snprintf(buf, len, "'%.*s...'", 40, t.p);
	else
		snprintf(buf, len, "'%.*s'", (int)t.n, t.p);
	return buf;
}

/* Decimal, no sign, no spaces; -1 if not a number or above UINT64_MAX. */
static int col_events_u64(struct col_events_tok t, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (t.n == 0 || t.n > 20)
		return -1;
	for (i = 0; i < t.n; i++) {
		unsigned d;

		if (t.p[i] < '0' || t.p[i] > '9')
			return -1;
		d = (unsigned)(t.p[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/* Records "name:line: message" in r and makes RM_EPROTO sticky. */
static int col_events_fail(struct col_events *r, int rv, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int col_events_fail(struct col_events *r, int rv, const char *fmt, ...)
{
	char msg[COL_EVENTS_ERRLEN - 64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(r->err, sizeof(r->err), "%s:%u: %s", r->name, r->line ? r->line : 1, msg);
	r->state = rv;
	return rv;
}

/*
 * Next line of the stream as its content before any comment, split into
 * tokens. Returns 1 with *ntok (possibly 0 for a blank line), 0 at the end,
 * or -1 after recording an error.
 */
static int col_events_read_line(struct col_events *r, struct col_events_tok *tok, size_t *ntok)
{
	const char *s, *nl;
	size_t n, i, k = 0;

	if (r->pos >= r->len)
		return 0;
	s = r->data + r->pos;
	nl = memchr(s, '\n', r->len - r->pos);
	n = nl ? (size_t)(nl - s) : r->len - r->pos;
	r->pos += n + (nl ? 1 : 0);
	r->line++;
	if (n && s[n - 1] == '\r')
		n--;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '#')
			break;
		if (c == ' ' || c == '\t')
			continue;
		if (c < 0x20 || c >= 0x7f) {
			col_events_fail(r, RM_EPROTO, "invalid byte 0x%02x (only printable ASCII outside comments)", c);
			return -1;
		}
		if (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t') {
			if (k == COL_EVENTS_MAX_TOKENS) {
				col_events_fail(r, RM_EPROTO, "too many fields (at most %d)", COL_EVENTS_MAX_TOKENS);
				return -1;
			}
			tok[k].p = s + i;
			tok[k].n = 0;
			k++;
		}
		tok[k - 1].n++;
	}
	*ntok = k;
	return 1;
}

/* ---- header ---- */

static int col_events_parse_header(struct col_events *r, struct col_events_tok *tok, size_t ntok)
{
	int have_w = 0, have_o = 0, have_n = 0;
	uint64_t v;
	char q[64];
	size_t i;

	if (!col_events_tok_is(tok[0], "rametr-events"))
		return col_events_fail(r, RM_EPROTO,
				       "expected header 'rametr-events 1 window_ns=<n> offset_ns=<n> ncpu=<n>', got %s",
				       col_events_q(tok[0], q, sizeof(q)));
	if (ntok < 2)
		return col_events_fail(r, RM_EPROTO, "header lacks the format version");
	if (col_events_u64(tok[1], &v) != 0)
		return col_events_fail(r, RM_EPROTO, "invalid format version %s", col_events_q(tok[1], q, sizeof(q)));
	if (v != COL_EVENTS_VERSION)
		return col_events_fail(r, RM_EVERSION, "unsupported format version %s (this reader knows %d)",
				       col_events_q(tok[1], q, sizeof(q)), COL_EVENTS_VERSION);
	for (i = 2; i < ntok; i++) {
		const char *eq = memchr(tok[i].p, '=', tok[i].n);
		struct col_events_tok k, val;

		if (!eq || eq == tok[i].p || eq == tok[i].p + tok[i].n - 1)
			return col_events_fail(r, RM_EPROTO, "expected key=value, got %s",
					       col_events_q(tok[i], q, sizeof(q)));
		k.p = tok[i].p;
		k.n = (size_t)(eq - tok[i].p);
		val.p = eq + 1;
		val.n = tok[i].n - k.n - 1;
		if (col_events_tok_is(k, "window_ns")) {
			if (have_w++)
				return col_events_fail(r, RM_EPROTO, "duplicate key 'window_ns'");
			if (col_events_u64(val, &v) != 0 || v == 0 || v > COL_EVENTS_MAX_WINDOW)
				return col_events_fail(r, RM_EPROTO, "invalid value %s for 'window_ns' (expected 1 .. 2^62)",
						       col_events_q(val, q, sizeof(q)));
			r->hdr.window_ns = v;
		} else if (col_events_tok_is(k, "offset_ns")) {
			if (have_o++)
				return col_events_fail(r, RM_EPROTO, "duplicate key 'offset_ns'");
			if (col_events_u64(val, &v) != 0 || v > COL_EVENTS_MAX_OFFSET)
				return col_events_fail(r, RM_EPROTO, "invalid value %s for 'offset_ns' (expected 0 .. 2^63-1)",
						       col_events_q(val, q, sizeof(q)));
			r->hdr.offset_ns = v;
		} else if (col_events_tok_is(k, "ncpu")) {
			if (have_n++)
				return col_events_fail(r, RM_EPROTO, "duplicate key 'ncpu'");
			if (col_events_u64(val, &v) != 0 || v == 0 || v > COL_EVENTS_MAX_NCPU)
				return col_events_fail(r, RM_EPROTO, "invalid value %s for 'ncpu' (expected 1 .. %d)",
						       col_events_q(val, q, sizeof(q)), COL_EVENTS_MAX_NCPU);
			r->hdr.ncpu = (uint32_t)v;
		} else {
			return col_events_fail(r, RM_EPROTO, "unknown header key %s", col_events_q(k, q, sizeof(q)));
		}
	}
	if (!have_w || !have_o || !have_n)
		return col_events_fail(r, RM_EPROTO, "header lacks '%s'",
				       !have_w ? "window_ns" : !have_o ? "offset_ns" : "ncpu");
	if (r->hdr.window_ns > COL_EVENTS_MAX_WINDOW / r->hdr.ncpu)
		return col_events_fail(r, RM_EPROTO, "ncpu * window_ns exceeds 2^62");
	r->last_ts = calloc(r->hdr.ncpu, sizeof(*r->last_ts));
	r->last_line = calloc(r->hdr.ncpu, sizeof(*r->last_line));
	if (!r->last_ts || !r->last_line) {
		snprintf(r->err, sizeof(r->err), "%s: out of memory", r->name);
		return RM_ENOMEM;
	}
	return RM_OK;
}

static int col_events_start(struct col_events *r)
{
	struct col_events_tok tok[COL_EVENTS_MAX_TOKENS];
	size_t ntok = 0;
	int got;

	while ((got = col_events_read_line(r, tok, &ntok)) == 1 && ntok == 0)
		;
	if (got < 0)
		return r->state;
	if (got == 0)
		return col_events_fail(r, RM_EPROTO,
				       "missing header 'rametr-events 1 window_ns=<n> offset_ns=<n> ncpu=<n>'");
	return col_events_parse_header(r, tok, ntok);
}

static int col_events_new(struct col_events **out, const char *name, char *err, size_t errlen)
{
	struct col_events *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r || !(r->name = strdup(name ? name : "<buffer>"))) {
		free(r);
		rm_errf(err, errlen, "out of memory");
		return RM_ENOMEM;
	}
	*out = r;
	return RM_OK;
}

/* Parses the header of a freshly loaded r; on failure frees r and copies the message. */
static int col_events_finish_open(struct col_events **out, struct col_events *r, char *err, size_t errlen)
{
	int rv = col_events_start(r);

	if (rv != RM_OK) {
		rm_errf(err, errlen, "%s", r->err);
		col_events_close(r);
		return rv;
	}
	r->state = RM_OK;
	r->err[0] = '\0';
	*out = r;
	return RM_OK;
}

int col_events_open_buf(struct col_events **out, const char *buf, size_t len, const char *name, char *err,
			size_t errlen)
{
	struct col_events *r;
	int rv;

	if (err && errlen)
		err[0] = '\0';
	if (!out || (!buf && len))
		return RM_EINVAL;
	if ((rv = col_events_new(&r, name, err, errlen)) != RM_OK)
		return rv;
	r->data = malloc(len ? len : 1);
	if (!r->data) {
		col_events_close(r);
		rm_errf(err, errlen, "out of memory");
		return RM_ENOMEM;
	}
	if (len)
		memcpy(r->data, buf, len);
	r->len = len;
	return col_events_finish_open(out, r, err, errlen);
}

int col_events_open(struct col_events **out, const char *path, char *err, size_t errlen)
{
	struct col_events *r;
	struct stat st;
	FILE *f;
	size_t got;
	int rv;

	if (err && errlen)
		err[0] = '\0';
	if (!out || !path)
		return RM_EINVAL;
	*out = NULL;
	if (!(f = fopen(path, "rb"))) {
		rv = errno == ENOENT ? RM_ENOENT : RM_EIO;
		rm_errf(err, errlen, "failed to open '%s': %s", path, strerror(errno));
		return rv;
	}
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		rm_errf(err, errlen, "failed to read '%s': not a regular file", path);
		fclose(f);
		return RM_EIO;
	}
	if ((rv = col_events_new(&r, path, err, errlen)) != RM_OK) {
		fclose(f);
		return rv;
	}
	r->data = malloc((size_t)st.st_size + 1);
	if (!r->data) {
		fclose(f);
		col_events_close(r);
		rm_errf(err, errlen, "out of memory reading '%s'", path);
		return RM_ENOMEM;
	}
	got = fread(r->data, 1, (size_t)st.st_size, f);
	if (got != (size_t)st.st_size || ferror(f)) {
		rm_errf(err, errlen, "failed to read '%s': %s", path,
				   ferror(f) ? strerror(errno) : "file changed while reading");
		fclose(f);
		col_events_close(r);
		return RM_EIO;
	}
	fclose(f);
	r->len = got;
	return col_events_finish_open(out, r, err, errlen);
}

const struct col_events_hdr *col_events_header(const struct col_events *r)
{
	return &r->hdr;
}

const char *col_events_name(const struct col_events *r)
{
	return r->name;
}

const char *col_events_error(const struct col_events *r)
{
	return r->err;
}

void col_events_close(struct col_events *r)
{
	if (!r)
		return;
	free(r->name);
	free(r->data);
	free(r->last_ts);
	free(r->last_line);
	free(r);
}

/* ---- event lines ---- */

/* Value of key `key` (marked used); 0 if absent. */
static int col_events_take(struct col_events_line *L, const char *key, struct col_events_tok *val)
{
	size_t i;

	for (i = 0; i < L->nkv; i++) {
		if (col_events_tok_is(L->kv[i].key, key)) {
			L->kv[i].used = 1;
			*val = L->kv[i].val;
			return 1;
		}
	}
	return 0;
}

/* Unsigned value of `key` in [min, max]; *present = 0 if optional and absent. */
static int col_events_num(struct col_events_line *L, const char *key, int required, uint64_t min, uint64_t max,
			  uint64_t *out, int *present)
{
	struct col_events_tok v;
	char q[64];

	if (present)
		*present = 0;
	if (!col_events_take(L, key, &v)) {
		if (required)
			return col_events_fail(L->r, RM_EPROTO, "'%s' needs key '%s'", L->type, key);
		return RM_OK;
	}
	if (col_events_u64(v, out) != 0 || *out < min || *out > max)
		return col_events_fail(L->r, RM_EPROTO, "invalid value %s for '%s' (expected %llu .. %llu)",
				       col_events_q(v, q, sizeof(q)), key, (unsigned long long)min,
				       (unsigned long long)max);
	if (present)
		*present = 1;
	return RM_OK;
}

static int col_events_u32(struct col_events_line *L, const char *key, int required, uint32_t min, uint32_t *out)
{
	uint64_t v = 0;
	int rv = col_events_num(L, key, required, min, UINT32_MAX, &v, NULL);

	if (rv == RM_OK)
		*out = (uint32_t)v;
	return rv;
}

/* "a.b.c.d:port" (family 4) or "[v6]:port" (family 6) into addr (network order) and port. */
static int col_events_addr(struct col_events_line *L, const char *key, int fam, __u32 addr[4], __u32 *port)
{
	struct col_events_tok v, pt;
	const char *colon, *host;
	size_t hostlen;
	char hbuf[64], q[64];
	uint64_t p;

	if (!col_events_take(L, key, &v))
		return col_events_fail(L->r, RM_EPROTO, "'%s' with fam=%d needs key '%s'", L->type, fam, key);
	colon = NULL;
	for (size_t i = v.n; i > 0; i--) {
		if (v.p[i - 1] == ':') {
			colon = v.p + i - 1;
			break;
		}
	}
	if (!colon)
		goto bad;
	host = v.p;
	hostlen = (size_t)(colon - v.p);
	if (fam == 6) {
		if (hostlen < 2 || host[0] != '[' || host[hostlen - 1] != ']')
			goto bad;
		host++;
		hostlen -= 2;
	}
	if (hostlen == 0 || hostlen >= sizeof(hbuf))
		goto bad;
	memcpy(hbuf, host, hostlen);
	hbuf[hostlen] = '\0';
	memset(addr, 0, 4 * sizeof(__u32));
	if (inet_pton(fam == 6 ? AF_INET6 : AF_INET, hbuf, addr) != 1)
		goto bad;
	pt.p = colon + 1;
	pt.n = (size_t)(v.p + v.n - pt.p);
	if (col_events_u64(pt, &p) != 0 || p > 65535)
		goto bad;
	*port = (__u32)p;
	return RM_OK;
bad:
	return col_events_fail(L->r, RM_EPROTO, "invalid %s address %s for '%s' (expected %s)",
			       fam == 6 ? "IPv6" : "IPv4", col_events_q(v, q, sizeof(q)), key,
			       fam == 6 ? "[addr]:port" : "a.b.c.d:port");
}

static int col_events_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int col_events_comm(struct col_events_line *L, char comm[RM_COMM_LEN])
{
	struct col_events_tok v;
	size_t i, n = 0;
	char q[64];

	memset(comm, 0, RM_COMM_LEN);
	if (!col_events_take(L, "comm", &v))
		return RM_OK;
	for (i = 0; i < v.n; i++) {
		int c = (unsigned char)v.p[i];

		if (c == '%') {
			int hi = i + 2 < v.n ? col_events_hex(v.p[i + 1]) : -1;
			int lo = i + 2 < v.n ? col_events_hex(v.p[i + 2]) : -1;

			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return col_events_fail(L->r, RM_EPROTO,
						       "invalid escape in 'comm' %s (expected %%XX, not %%00)",
						       col_events_q(v, q, sizeof(q)));
			c = hi * 16 + lo;
			i += 2;
		}
		if (n == RM_COMM_LEN - 1)
			return col_events_fail(L->r, RM_EPROTO, "'comm' %s longer than %d bytes",
					       col_events_q(v, q, sizeof(q)), RM_COMM_LEN - 1);
		comm[n++] = (char)c;
	}
	return RM_OK;
}

static int col_events_io(struct col_events_line *L, struct col_ev_io *io)
{
	struct col_events_tok fam;
	uint64_t v;
	int rv, has;
	char q[64];

	if ((rv = col_events_u32(L, "tid", 1, 1, &io->tid)) != 0 || (rv = col_events_u32(L, "pid", 1, 1, &io->pid)) != 0)
		return rv;
	if ((rv = col_events_num(L, "sock", 1, 1, UINT64_MAX, &v, NULL)) != 0)
		return rv;
	io->tuple.cookie = v;
	if ((rv = col_events_num(L, "bytes", 1, 0, COL_EVENTS_MAX_BYTES, &io->bytes, NULL)) != 0)
		return rv;
	if ((rv = col_events_num(L, "seq", 0, 0, UINT32_MAX, &v, &has)) != 0)
		return rv;
	io->has_seq = has;
	io->seq = has ? v : 0;
	if ((rv = col_events_num(L, "srv", 0, 0, 1, &v, &has)) != 0)
		return rv;
	io->srv = has && v;
	if ((rv = col_events_num(L, "dgram", 0, 0, 1, &v, &has)) != 0)
		return rv;
	io->dgram = has && v;
	if ((rv = col_events_comm(L, io->comm)) != 0)
		return rv;
	if (!col_events_take(L, "fam", &fam)) {
		io->tuple.family = 0;
	} else if (col_events_tok_is(fam, "4") || col_events_tok_is(fam, "6")) {
		int f = fam.p[0] - '0';
		struct col_events_tok from;

		io->tuple.family = f == 4 ? RM_AF_INET : RM_AF_INET6;
		if ((rv = col_events_addr(L, "laddr", f, io->tuple.laddr, &io->tuple.lport)) != 0 ||
		    (rv = col_events_addr(L, "raddr", f, io->tuple.raddr, &io->tuple.rport)) != 0)
			return rv;
		if (!col_events_take(L, "from", &from))
			return RM_OK;
		if (!io->dgram || strcmp(L->type, "recv") != 0)
			return col_events_fail(L->r, RM_EPROTO, "'from' is only valid on a recv with dgram=1");
		io->has_from = 1;
		return col_events_addr(L, "from", f, io->from, &io->from_port);
	} else if (col_events_tok_is(fam, "unix")) {
		uint64_t id;
		int has_id;

		io->tuple.family = RM_AF_UNIX;
		/* the identities of this end and of its peer (rametr.h) */
		if ((rv = col_events_num(L, "lsk", 0, 0, UINT64_MAX, &id, &has_id)) != 0)
			return rv;
		if (has_id) {
			io->tuple.laddr[0] = (uint32_t)id;
			io->tuple.laddr[1] = (uint32_t)(id >> 32);
		}
		if ((rv = col_events_num(L, "rsk", 0, 0, UINT64_MAX, &id, &has_id)) != 0)
			return rv;
		if (has_id) {
			io->tuple.raddr[0] = (uint32_t)id;
			io->tuple.raddr[1] = (uint32_t)(id >> 32);
		}
	} else {
		return col_events_fail(L->r, RM_EPROTO, "invalid value %s for 'fam' (expected 4, 6 or unix)",
				       col_events_q(fam, q, sizeof(q)));
	}
	/* no family or unix: no addresses */
	{
		struct col_events_tok a;
		const char *which = col_events_take(L, "laddr", &a)   ? "laddr"
				    : col_events_take(L, "raddr", &a) ? "raddr"
				    : col_events_take(L, "from", &a)  ? "from"
								      : NULL;

		if (which)
			return col_events_fail(L->r, RM_EPROTO, "'%s' is only valid with fam=4 or fam=6", which);
	}
	return RM_OK;
}

static int col_events_parse_type(struct col_events_line *L, struct col_event *ev)
{
	struct col_events_tok v;
	int rv = RM_OK;
	char q[64];

	switch (ev->type) {
	case COL_EV_SWITCH:
		if ((rv = col_events_u32(L, "prev", 1, 0, &ev->u.sw.prev_tid)) != 0 ||
		    (rv = col_events_u32(L, "next", 1, 0, &ev->u.sw.next_tid)) != 0 ||
		    (rv = col_events_u32(L, "prev_pid", 0, 0, &ev->u.sw.prev_pid)) != 0 ||
		    (rv = col_events_u32(L, "next_pid", 0, 0, &ev->u.sw.next_pid)) != 0)
			return rv;
		if (!col_events_take(L, "prev_state", &v))
			return col_events_fail(L->r, RM_EPROTO, "'switch' needs key 'prev_state'");
		if (v.n != 1 || !strchr("RSDTXZI", v.p[0]))
			return col_events_fail(L->r, RM_EPROTO,
					       "invalid value %s for 'prev_state' (expected one of R S D T X Z I)",
					       col_events_q(v, q, sizeof(q)));
		ev->u.sw.prev_state = v.p[0];
		break;
	case COL_EV_WAKEUP:
		if ((rv = col_events_u32(L, "tid", 1, 1, &ev->u.wakeup.tid)) != 0 ||
		    (rv = col_events_u32(L, "by", 0, 0, &ev->u.wakeup.by)) != 0)
			return rv;
		break;
	case COL_EV_RECV:
	case COL_EV_SEND:
		rv = col_events_io(L, &ev->u.io);
		break;
	case COL_EV_FORK:
		if ((rv = col_events_u32(L, "ptid", 1, 1, &ev->u.fork.ptid)) != 0 ||
		    (rv = col_events_u32(L, "ppid", 1, 1, &ev->u.fork.ppid)) != 0 ||
		    (rv = col_events_u32(L, "ctid", 1, 1, &ev->u.fork.ctid)) != 0 ||
		    (rv = col_events_u32(L, "cpid", 1, 1, &ev->u.fork.cpid)) != 0)
			return rv;
		if (ev->u.fork.ctid == ev->u.fork.ptid)
			return col_events_fail(L->r, RM_EPROTO, "'fork' with ctid equal to ptid (%u)", ev->u.fork.ptid);
		break;
	case COL_EV_EXIT:
		if ((rv = col_events_u32(L, "tid", 1, 1, &ev->u.exit.tid)) != 0)
			return rv;
		rv = col_events_u32(L, "pid", 1, 1, &ev->u.exit.pid);
		break;
	case COL_EV_DISK:
		if ((rv = col_events_u32(L, "tid", 1, 1, &ev->u.disk.tid)) != 0)
			return rv;
		if (!col_events_take(L, "op", &v))
			return col_events_fail(L->r, RM_EPROTO, "'disk' needs key 'op'");
		if (!col_events_tok_is(v, "R") && !col_events_tok_is(v, "W"))
			return col_events_fail(L->r, RM_EPROTO, "invalid value %s for 'op' (expected R or W)",
					       col_events_q(v, q, sizeof(q)));
		ev->u.disk.is_write = v.p[0] == 'W';
		rv = col_events_num(L, "bytes", 1, 0, COL_EVENTS_MAX_BYTES, &ev->u.disk.bytes, NULL);
		break;
	case COL_EV_STEAL:
		rv = col_events_num(L, "ns", 1, 0, COL_EVENTS_MAX_TS, &ev->u.steal.ns, NULL);
		break;
	}
	return rv;
}

static int col_events_parse_event(struct col_events *r, struct col_events_tok *tok, size_t ntok, struct col_event *ev)
{
	struct col_events_line L;
	uint64_t v;
	size_t i, j;
	char q[64];
	int rv, t;

	memset(ev, 0, sizeof(*ev));
	ev->line = r->line;
	if (ntok < 3)
		return col_events_fail(r, RM_EPROTO, "expected '<ts_ns> <cpu> <type> key=value ...'");
	if (col_events_u64(tok[0], &v) != 0)
		return col_events_fail(r, RM_EPROTO, "invalid timestamp %s", col_events_q(tok[0], q, sizeof(q)));
	if (v == 0 || v > COL_EVENTS_MAX_TS)
		return col_events_fail(r, RM_EPROTO, "timestamp %llu out of range (expected 1 .. 2^62)",
				       (unsigned long long)v);
	ev->ts_ns = v;
	if (col_events_u64(tok[1], &v) != 0)
		return col_events_fail(r, RM_EPROTO, "invalid cpu %s", col_events_q(tok[1], q, sizeof(q)));
	if (v >= r->hdr.ncpu)
		return col_events_fail(r, RM_EPROTO, "cpu %llu out of range (ncpu=%u)", (unsigned long long)v,
				       r->hdr.ncpu);
	ev->cpu = (uint32_t)v;
	for (t = COL_EV_SWITCH; t <= COL_EV_STEAL; t++)
		if (col_events_tok_is(tok[2], col_ev_names[t]))
			break;
	if (t > COL_EV_STEAL)
		return col_events_fail(r, RM_EPROTO, "unknown event type %s", col_events_q(tok[2], q, sizeof(q)));
	ev->type = (enum col_ev_type)t;

	memset(&L, 0, sizeof(L));
	L.r = r;
	L.type = col_ev_names[t];
	for (i = 3; i < ntok; i++) {
		const char *eq = memchr(tok[i].p, '=', tok[i].n);
		struct col_events_kv *kv = &L.kv[L.nkv];

		if (!eq || eq == tok[i].p || eq == tok[i].p + tok[i].n - 1)
			return col_events_fail(r, RM_EPROTO, "expected key=value, got %s", col_events_q(tok[i], q, sizeof(q)));
		kv->key.p = tok[i].p;
		kv->key.n = (size_t)(eq - tok[i].p);
		kv->val.p = eq + 1;
		kv->val.n = tok[i].n - kv->key.n - 1;
		for (j = 0; j < L.nkv; j++)
			if (L.kv[j].key.n == kv->key.n && memcmp(L.kv[j].key.p, kv->key.p, kv->key.n) == 0)
				return col_events_fail(r, RM_EPROTO, "duplicate key %s", col_events_q(kv->key, q, sizeof(q)));
		L.nkv++;
	}
	if ((rv = col_events_parse_type(&L, ev)) != RM_OK)
		return rv;
	for (i = 0; i < L.nkv; i++)
		if (!L.kv[i].used)
			return col_events_fail(r, RM_EPROTO, "unknown key %s for '%s'",
					       col_events_q(L.kv[i].key, q, sizeof(q)), L.type);
	if (ev->ts_ns < r->last_ts[ev->cpu])
		return col_events_fail(r, RM_EPROTO, "timestamp %llu on cpu %u goes back in time (line %u has %llu)",
				       (unsigned long long)ev->ts_ns, ev->cpu, r->last_line[ev->cpu],
				       (unsigned long long)r->last_ts[ev->cpu]);
	r->last_ts[ev->cpu] = ev->ts_ns;
	r->last_line[ev->cpu] = r->line;
	return RM_OK;
}

int col_events_next(struct col_events *r, struct col_event *ev)
{
	struct col_events_tok tok[COL_EVENTS_MAX_TOKENS];
	size_t ntok = 0;
	int got;

	if (r->state != RM_OK)
		return r->state;
	r->err[0] = '\0';
	while ((got = col_events_read_line(r, tok, &ntok)) == 1 && ntok == 0)
		;
	if (got < 0)
		return r->state;
	if (got == 0) {
		r->state = RM_ENOENT;
		return RM_ENOENT;
	}
	return col_events_parse_event(r, tok, ntok, ev);
}

/* ---- writer ---- */

struct col_events_out {
	char *p;
	size_t len, off;
	int trunc;
};

static void col_events_put(struct col_events_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void col_events_put(struct col_events_out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->trunc)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->p + o->off, o->len - o->off, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->len - o->off) {
		o->trunc = 1;
		return;
	}
	o->off += (size_t)n;
}

static int col_events_out_done(struct col_events_out *o)
{
	if (o->trunc) {
		if (o->len)
			o->p[0] = '\0';
		return RM_ETRUNC;
	}
	return RM_OK;
}

int col_events_format_header(const struct col_events_hdr *h, char *buf, size_t len)
{
	struct col_events_out o = { buf, len, 0, 0 };

	if (!h || !buf)
		return RM_EINVAL;
	if (!h->window_ns || h->window_ns > COL_EVENTS_MAX_WINDOW || h->offset_ns > COL_EVENTS_MAX_OFFSET || !h->ncpu ||
	    h->ncpu > COL_EVENTS_MAX_NCPU || h->window_ns > COL_EVENTS_MAX_WINDOW / h->ncpu)
		return RM_EINVAL;
	if (!len)
		return RM_ETRUNC;
	col_events_put(&o, "rametr-events %d window_ns=%llu offset_ns=%llu ncpu=%u\n", COL_EVENTS_VERSION,
		       (unsigned long long)h->window_ns, (unsigned long long)h->offset_ns, h->ncpu);
	return col_events_out_done(&o);
}

static int col_events_check_io(const struct col_ev_io *io)
{
	const struct rm_tuple *t = &io->tuple;
	size_t n = strnlen(io->comm, RM_COMM_LEN);

	if (!io->tid || !io->pid || !t->cookie || io->bytes > COL_EVENTS_MAX_BYTES)
		return RM_EINVAL;
	if (io->has_seq && io->seq > UINT32_MAX)
		return RM_EINVAL;
	if ((io->srv != 0 && io->srv != 1) || (io->dgram != 0 && io->dgram != 1))
		return RM_EINVAL;
	if (io->has_from && (!io->dgram || (t->family != RM_AF_INET && t->family != RM_AF_INET6) ||
			     io->from_port > 65535 ||
			     (t->family == RM_AF_INET && (io->from[1] || io->from[2] || io->from[3]))))
		return RM_EINVAL;
	if (n == RM_COMM_LEN)
		return RM_EINVAL;
	switch (t->family) {
	case RM_AF_INET:
		if (t->laddr[1] || t->laddr[2] || t->laddr[3] || t->raddr[1] || t->raddr[2] || t->raddr[3])
			return RM_EINVAL;
		/* fall through */
	case RM_AF_INET6:
		if (t->lport > 65535 || t->rport > 65535)
			return RM_EINVAL;
		return RM_OK;
	case RM_AF_UNIX:
		if (t->lport || t->rport || t->laddr[2] || t->laddr[3] || t->raddr[2] || t->raddr[3])
			return RM_EINVAL;
		return RM_OK;
	case 0:
		if (t->lport || t->rport || t->laddr[0] || t->laddr[1] || t->laddr[2] || t->laddr[3] || t->raddr[0] ||
		    t->raddr[1] || t->raddr[2] || t->raddr[3])
			return RM_EINVAL;
		return RM_OK;
	default:
		return RM_EINVAL;
	}
}

/* Whether the parser would accept ev (apart from cpu < ncpu and time order). */
static int col_events_check(const struct col_event *ev)
{
	if (!ev->ts_ns || ev->ts_ns > COL_EVENTS_MAX_TS || ev->cpu >= COL_EVENTS_MAX_NCPU)
		return RM_EINVAL;
	switch (ev->type) {
	case COL_EV_SWITCH:
		return ev->u.sw.prev_state && strchr("RSDTXZI", ev->u.sw.prev_state) ? RM_OK : RM_EINVAL;
	case COL_EV_WAKEUP:
		return ev->u.wakeup.tid ? RM_OK : RM_EINVAL;
	case COL_EV_RECV:
	case COL_EV_SEND:
		return col_events_check_io(&ev->u.io);
	case COL_EV_FORK:
		return ev->u.fork.ptid && ev->u.fork.ppid && ev->u.fork.ctid && ev->u.fork.cpid &&
				       ev->u.fork.ctid != ev->u.fork.ptid
			       ? RM_OK
			       : RM_EINVAL;
	case COL_EV_EXIT:
		return ev->u.exit.tid && ev->u.exit.pid ? RM_OK : RM_EINVAL;
	case COL_EV_DISK:
		return ev->u.disk.tid && ev->u.disk.bytes <= COL_EVENTS_MAX_BYTES ? RM_OK : RM_EINVAL;
	case COL_EV_STEAL:
		return ev->u.steal.ns <= COL_EVENTS_MAX_TS ? RM_OK : RM_EINVAL;
	}
	return RM_EINVAL;
}

static void col_events_put_addr(struct col_events_out *o, const char *key, __u32 family, const __u32 addr[4],
				__u32 port)
{
	char a[INET6_ADDRSTRLEN];

	if (!inet_ntop(family == RM_AF_INET6 ? AF_INET6 : AF_INET, addr, a, sizeof(a))) {
		o->trunc = 1;
		return;
	}
	if (family == RM_AF_INET6)
		col_events_put(o, " %s=[%s]:%u", key, a, port);
	else
		col_events_put(o, " %s=%s:%u", key, a, port);
}

static void col_events_put_io(struct col_events_out *o, const struct col_ev_io *io)
{
	const struct rm_tuple *t = &io->tuple;
	size_t i;

	col_events_put(o, " tid=%u pid=%u", io->tid, io->pid);
	if (io->comm[0]) {
		col_events_put(o, " comm=");
		for (i = 0; i < RM_COMM_LEN && io->comm[i]; i++) {
			unsigned char c = (unsigned char)io->comm[i];

			if (c > 0x20 && c < 0x7f && c != '%' && c != '#' && c != '=')
				col_events_put(o, "%c", c);
			else
				col_events_put(o, "%%%02X", c);
		}
	}
	col_events_put(o, " sock=%llu", (unsigned long long)t->cookie);
	if (t->family == RM_AF_UNIX) {
		uint64_t l = (uint64_t)t->laddr[1] << 32 | t->laddr[0], r = (uint64_t)t->raddr[1] << 32 | t->raddr[0];

		col_events_put(o, " fam=unix");
		if (l)
			col_events_put(o, " lsk=%llu", (unsigned long long)l);
		if (r)
			col_events_put(o, " rsk=%llu", (unsigned long long)r);
	} else if (t->family == RM_AF_INET || t->family == RM_AF_INET6) {
		col_events_put(o, " fam=%d", t->family == RM_AF_INET ? 4 : 6);
		col_events_put_addr(o, "laddr", t->family, t->laddr, t->lport);
		col_events_put_addr(o, "raddr", t->family, t->raddr, t->rport);
	}
	col_events_put(o, " bytes=%llu", (unsigned long long)io->bytes);
	if (io->has_seq)
		col_events_put(o, " seq=%llu", (unsigned long long)io->seq);
	if (io->srv)
		col_events_put(o, " srv=1");
	if (io->dgram)
		col_events_put(o, " dgram=1");
	if (io->has_from)
		col_events_put_addr(o, "from", t->family, io->from, io->from_port);
}

int col_events_format(const struct col_event *ev, char *buf, size_t len)
{
	struct col_events_out o = { buf, len, 0, 0 };

	if (!ev || !buf || col_events_check(ev) != RM_OK)
		return RM_EINVAL;
	if (!len)
		return RM_ETRUNC;
	col_events_put(&o, "%llu %u %s", (unsigned long long)ev->ts_ns, ev->cpu, col_ev_type_name(ev->type));
	switch (ev->type) {
	case COL_EV_SWITCH:
		col_events_put(&o, " prev=%u prev_pid=%u prev_state=%c next=%u next_pid=%u", ev->u.sw.prev_tid,
			       ev->u.sw.prev_pid, ev->u.sw.prev_state, ev->u.sw.next_tid, ev->u.sw.next_pid);
		break;
	case COL_EV_WAKEUP:
		col_events_put(&o, " tid=%u", ev->u.wakeup.tid);
		if (ev->u.wakeup.by)
			col_events_put(&o, " by=%u", ev->u.wakeup.by);
		break;
	case COL_EV_RECV:
	case COL_EV_SEND:
		col_events_put_io(&o, &ev->u.io);
		break;
	case COL_EV_FORK:
		col_events_put(&o, " ptid=%u ppid=%u ctid=%u cpid=%u", ev->u.fork.ptid, ev->u.fork.ppid, ev->u.fork.ctid,
			       ev->u.fork.cpid);
		break;
	case COL_EV_EXIT:
		col_events_put(&o, " tid=%u pid=%u", ev->u.exit.tid, ev->u.exit.pid);
		break;
	case COL_EV_DISK:
		col_events_put(&o, " tid=%u op=%c bytes=%llu", ev->u.disk.tid, ev->u.disk.is_write ? 'W' : 'R',
			       (unsigned long long)ev->u.disk.bytes);
		break;
	case COL_EV_STEAL:
		col_events_put(&o, " ns=%llu", (unsigned long long)ev->u.steal.ns);
		break;
	}
	col_events_put(&o, "\n");
	return col_events_out_done(&o);
}

static int col_events_fputs(FILE *f, const char *line)
{
	if (fputs(line, f) == EOF)
		return RM_EIO;
	return RM_OK;
}

int col_events_write_header(FILE *f, const struct col_events_hdr *h)
{
	char line[COL_EVENTS_LINE_MAX];
	int rv;

	if (!f)
		return RM_EINVAL;
	if ((rv = col_events_format_header(h, line, sizeof(line))) != RM_OK)
		return rv;
	return col_events_fputs(f, line);
}

int col_events_write(FILE *f, const struct col_event *ev)
{
	char line[COL_EVENTS_LINE_MAX];
	int rv;

	if (!f)
		return RM_EINVAL;
	if ((rv = col_events_format(ev, line, sizeof(line))) != RM_OK)
		return rv;
	return col_events_fputs(f, line);
}
