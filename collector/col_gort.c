/*
 * col_gort.c - reads a Go binary's runtime facts (col_gort.h) with libelf
 * (sections, symbols, program headers, code bytes) and libdw (DWARF). Owns
 * nothing past a call.
 *
 * Stripped binaries (go build -ldflags=-s -w, and every Go program Debian
 * ships: its packages keep symbols and DWARF apart, in -dbgsym packages few
 * hosts install) keep Go's own function table, .gopclntab, which the runtime
 * needs for stack traces: functions are found there when .symtab lacks them
 * (Go >= 1.18's table layout). The struct members DWARF would give come
 * then from the layouts of the Go versions this file knows (gort_layouts),
 * each read from the DWARF of a binary that Go version built.
 */
#include <dwarf.h>
#include <errno.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "col_gort.h"
#include "rm_err.h"
#include "banned.h"

#define BUILDINFO_MAGIC "\xff Go buildinf:"
#define BUILDINFO_MAGIC_LEN 14
#define BUILDINFO_HDR 32
#define BUILDINFO_FLAG_INLINE 0x2 /* Go >= 1.18: version and module info inline after the header */

/* Go's small-frame prologue on amd64: cmp 0x10(%r14),%rsp (4 bytes); jbe rel32 */
static const unsigned char go_prologue[] = { 0x49, 0x3b, 0x66, 0x10, 0x0f, 0x86 };
#define GO_PROLOGUE_CMP_LEN 4

/* The section named name, or NULL. */
static Elf_Scn *find_scn(Elf *e, const char *name)
{
	size_t shstrndx;
	Elf_Scn *s = NULL;
	GElf_Shdr sh;

	if (elf_getshdrstrndx(e, &shstrndx) != 0)
		return NULL;
	while ((s = elf_nextscn(e, s)) != NULL) {
		const char *n;

		if (gelf_getshdr(s, &sh) && (n = elf_strptr(e, shstrndx, sh.sh_name)) && !strcmp(n, name))
			return s;
	}
	return NULL;
}

/* The Go version inline in .go.buildinfo (Go >= 1.18) into out->version; "" if absent or older. */
static void read_version(Elf_Scn *bi, struct col_gort *out)
{
	Elf_Data *d = elf_getdata(bi, NULL);
	const unsigned char *p;
	uint64_t len = 0;
	size_t i, shift = 0;

	out->version[0] = '\0';
	if (!d || !d->d_buf || d->d_size < BUILDINFO_HDR + 1)
		return;
	p = d->d_buf;
	if (memcmp(p, BUILDINFO_MAGIC, BUILDINFO_MAGIC_LEN) || !(p[15] & BUILDINFO_FLAG_INLINE))
		return;
	for (i = BUILDINFO_HDR; i < d->d_size && shift < 63; i++, shift += 7) { /* uvarint length */
		len |= (uint64_t)(p[i] & 0x7f) << shift;
		if (!(p[i] & 0x80))
			break;
	}
	i++;
	if (i >= d->d_size || len == 0 || len >= sizeof(out->version) || len > d->d_size - i)
		return;
	memcpy(out->version, p + i, len);
	out->version[len] = '\0';
}

/* A function in .symtab: its file offset, address and size. */
struct gort_fn {
	uint64_t off, addr, size;
};

/* What a pass over .symtab notices besides the function it looks for. */
struct gort_seen {
	int is_go;     /* runtime.main is there */
	int has_tlsg;  /* runtime.tlsg (a TLS symbol) is there ... */
	int64_t tlsg;  /* ... at this offset in the TLS block */
	uint64_t rt_lo, rt_hi; /* the addresses the runtime package's functions span (runtime.*) */
};

/* Looks the function name up in .symtab: 1 with *f filled, 0 if absent; what else it saw in *seen. */
static int find_sym(Elf *e, const char *name, struct gort_fn *f, struct gort_seen *seen)
{
	Elf_Scn *s = NULL;
	GElf_Shdr sh;
	int found = 0;

	while ((s = elf_nextscn(e, s)) != NULL) {
		Elf_Data *d;
		size_t i, n;

		if (!gelf_getshdr(s, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize)
			continue;
		if (!(d = elf_getdata(s, NULL)))
			continue;
		n = sh.sh_size / sh.sh_entsize;
		for (i = 0; i < n; i++) {
			GElf_Sym sym;
			GElf_Shdr th;
			const char *sn;
			Elf_Scn *ts;

			if (!gelf_getsym(d, (int)i, &sym) || !(sn = elf_strptr(e, sh.sh_link, sym.st_name)))
				continue;
			if (!strcmp(sn, "runtime.main"))
				seen->is_go = 1;
			if (!strncmp(sn, "runtime.", 8) && GELF_ST_TYPE(sym.st_info) == STT_FUNC && sym.st_value &&
			    sym.st_size) { /* not the markers runtime.text, runtime.etext */
				if (!seen->rt_lo || sym.st_value < seen->rt_lo)
					seen->rt_lo = sym.st_value;
				if (sym.st_value + sym.st_size > seen->rt_hi)
					seen->rt_hi = sym.st_value + sym.st_size;
			}
			if (!strcmp(sn, "runtime.tlsg") && GELF_ST_TYPE(sym.st_info) == STT_TLS) {
				seen->tlsg = (int64_t)sym.st_value;
				seen->has_tlsg = 1;
			}
			if (found || strcmp(sn, name) || GELF_ST_TYPE(sym.st_info) != STT_FUNC)
				continue;
			if (!(ts = elf_getscn(e, sym.st_shndx)) || !gelf_getshdr(ts, &th) || sym.st_value < th.sh_addr)
				continue;
			f->off = sym.st_value - th.sh_addr + th.sh_offset;
			f->addr = sym.st_value;
			f->size = sym.st_size;
			found = 1;
		}
	}
	return found;
}

/*
 * Go >= 1.18's .gopclntab: a header (magic 0xfffffff0 for 1.18-1.19,
 * 0xfffffff1 for 1.20 on; two pad bytes, the pc quantum, the pointer size,
 * then eight pointer-sized words: nfunc, nfiles, textStart, funcnameOffset,
 * cuOffset, filetabOffset, pctabOffset, pclnOffset), then at pclnOffset
 * nfunc + 1 pairs of uint32 (entry offset from textStart, offset of the
 * function's _func from pclnOffset; the last pair's entry is the end of the
 * text) and each _func opens with its entry offset and the offset of its
 * name in the name table at funcnameOffset.
 */
#define PCLN_MAGIC_118 0xfffffff0u
#define PCLN_MAGIC_120 0xfffffff1u
#define PCLN_HDR (8 + 8 * 8)

struct gort_pcln {
	const unsigned char *d;
	size_t n;
	uint64_t nfunc, text, names, ftab;
};

static uint32_t rd32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t rd64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Reads the header of e's .gopclntab: 1 with *p set, 0 without a table of a layout this reads. */
static int pcln_open(Elf *e, struct gort_pcln *p)
{
	Elf_Scn *scn = find_scn(e, ".gopclntab");
	Elf_Data *d;
	uint32_t magic;

	if (!scn || !(d = elf_getdata(scn, NULL)) || !d->d_buf || d->d_size < PCLN_HDR)
		return 0;
	p->d = d->d_buf;
	p->n = d->d_size;
	magic = rd32(p->d);
	if ((magic != PCLN_MAGIC_118 && magic != PCLN_MAGIC_120) || p->d[7] != 8)
		return 0;
	p->nfunc = rd64(p->d + 8);
	p->text = rd64(p->d + 24);
	p->names = rd64(p->d + 32);
	p->ftab = rd64(p->d + 64);
	/* the function table and the name table inside the section */
	return p->nfunc > 0 && p->nfunc < p->n / 8 && p->ftab < p->n && (p->nfunc + 1) * 8 <= p->n - p->ftab &&
	       p->names < p->n;
}

/* Function i's name (NUL-terminated inside the section) or NULL. */
static const char *pcln_name(const struct gort_pcln *p, uint64_t i)
{
	uint64_t fo = p->ftab + (uint64_t)rd32(p->d + p->ftab + 8 * i + 4), no;
	const char *n;

	if (fo > p->n - 8)
		return NULL;
	no = p->names + rd32(p->d + fo + 4);
	if (no >= p->n)
		return NULL;
	n = (const char *)p->d + no;
	return memchr(n, '\0', p->n - no) ? n : NULL;
}

/* The file offset of the loaded address addr (a PT_LOAD segment's file bytes): 1 and *off, or 0. */
static int addr_off(Elf *e, uint64_t addr, uint64_t *off)
{
	size_t i, n;

	if (elf_getphdrnum(e, &n) != 0)
		return 0;
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && addr >= ph.p_vaddr &&
		    addr - ph.p_vaddr < ph.p_filesz) {
			*off = addr - ph.p_vaddr + ph.p_offset;
			return 1;
		}
	}
	return 0;
}

/*
 * find_sym from .gopclntab: 1 with *f filled, 0 if absent (or no table). As
 * find_sym, notes runtime.main and the span of the runtime's functions in
 * *seen; a table holds no TLS symbol (tls_slot copes).
 */
static int pcln_find(Elf *e, const char *name, struct gort_fn *f, struct gort_seen *seen)
{
	struct gort_pcln p;
	uint64_t i;
	int found = 0;

	if (!pcln_open(e, &p))
		return 0;
	for (i = 0; i < p.nfunc; i++) {
		uint64_t lo = rd32(p.d + p.ftab + 8 * i), hi = rd32(p.d + p.ftab + 8 * (i + 1));
		const char *n = pcln_name(&p, i);

		if (!n || hi <= lo)
			continue;
		if (!strcmp(n, "runtime.main"))
			seen->is_go = 1;
		if (!strncmp(n, "runtime.", 8)) {
			if (!seen->rt_lo || p.text + lo < seen->rt_lo)
				seen->rt_lo = p.text + lo;
			if (p.text + hi > seen->rt_hi)
				seen->rt_hi = p.text + hi;
		}
		if (found || strcmp(n, name) || !addr_off(e, p.text + lo, &f->off))
			continue;
		f->addr = p.text + lo;
		f->size = hi - lo;
		found = 1;
	}
	return found;
}

/* A function by name: from .symtab, else from .gopclntab. 1 with *f filled, or 0. */
static int find_fn(Elf *e, const char *name, struct gort_fn *f, struct gort_seen *seen)
{
	return find_sym(e, name, f, seen) || pcln_find(e, name, f, seen);
}

/*
 * The members' offsets of struct runtime.g and runtime.m on linux/amd64 per
 * Go version, read from the DWARF of binaries those versions built (Debian
 * 12's golang-1.19: tb-goserver and tb-grpcserver, go1.19.8). Used where a
 * binary has no DWARF; a version not listed cannot be followed stripped.
 */
static const struct gort_layout {
	const char *version; /* "go1.19": any go1.19.N */
	uint64_t g_goid, g_m, g_startpc, m_g0, m_curg;
} gort_layouts[] = {
	{ "go1.19", 152, 48, 312, 0, 192 },
};

/* The layout of the Go version v ("go1.19.8"), or NULL. */
static const struct gort_layout *gort_layout(const char *v)
{
	size_t i, n;

	for (i = 0; i < sizeof(gort_layouts) / sizeof(gort_layouts[0]); i++) {
		n = strlen(gort_layouts[i].version);
		if (!strncmp(v, gort_layouts[i].version, n) && (v[n] == '\0' || v[n] == '.'))
			return &gort_layouts[i];
	}
	return NULL;
}

/* The data_member_location of member of the struct named type: 1 and *off, or 0. */
static int find_member(Dwarf *dw, const char *type, const char *member, uint64_t *off)
{
	Dwarf_Off cu_off = 0, next;
	size_t hsize;

	while (dwarf_nextcu(dw, cu_off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu, die;

		if (dwarf_offdie(dw, cu_off + hsize, &cu) && dwarf_child(&cu, &die) == 0) {
			do {
				const char *n;
				Dwarf_Die m;

				if (dwarf_tag(&die) != DW_TAG_structure_type || !(n = dwarf_diename(&die)) ||
				    strcmp(n, type) || dwarf_child(&die, &m) != 0)
					continue;
				do {
					Dwarf_Attribute a;
					Dwarf_Word w;

					if (dwarf_tag(&m) == DW_TAG_member && (n = dwarf_diename(&m)) && !strcmp(n, member) &&
					    dwarf_attr(&m, DW_AT_data_member_location, &a) && dwarf_formudata(&a, &w) == 0) {
						*off = w;
						return 1;
					}
				} while (dwarf_siblingof(&m, &m) == 0);
			} while (dwarf_siblingof(&die, &die) == 0);
		}
		cu_off = next;
	}
	return 0;
}

/* Opens path's ELF file: RM_OK with *fd and *e set (the caller's to end and close); RM_EIO (logged) or RM_ENOENT. */
static int gort_open(const char *path, int *fd, Elf **e)
{
	if ((*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		rm_log_warn("failed to open '%s': %s", path, strerror(errno));
		return RM_EIO;
	}
	elf_version(EV_CURRENT);
	if (!(*e = elf_begin(*fd, ELF_C_READ, NULL)) || elf_kind(*e) != ELF_K_ELF) {
		if (*e)
			elf_end(*e);
		close(*fd);
		return RM_ENOENT;
	}
	return RM_OK;
}

/* Where a uprobe on the function at file offset off costs least: the jbe after Go's stack-bound compare, else off. */
static uint64_t gort_probe_off(int fd, uint64_t off)
{
	unsigned char head[sizeof(go_prologue)];

	if (pread(fd, head, sizeof(head), (off_t)off) == (ssize_t)sizeof(head) && !memcmp(head, go_prologue, sizeof(head)))
		return off + GO_PROLOGUE_CMP_LEN;
	return off;
}

int col_gort_inspect(const char *path, struct col_gort *out)
{
	struct gort_seen seen = { 0 };
	struct gort_fn ex = { 0 };
	const struct gort_layout *lay;
	Elf_Scn *bi;
	Dwarf *dw;
	Elf *e;
	int fd, rv = RM_OK;

	memset(out, 0, sizeof(*out));
	if ((rv = gort_open(path, &fd, &e)) != RM_OK)
		return rv;
	if ((bi = find_scn(e, ".go.buildinfo")) != NULL) {
		seen.is_go = 1;
		read_version(bi, out);
	}
	if (!find_fn(e, "runtime.execute", &ex, &seen)) {
		rv = RM_ENOTSUP;
	} else {
		out->execute_off = ex.off;
		out->probe_off = gort_probe_off(fd, ex.off);
	}
	if (!seen.is_go) {
		rv = RM_ENOENT;
	} else if (rv == RM_OK) {
		int got = 0;

		if ((dw = dwarf_begin_elf(e, DWARF_C_READ, NULL)) != NULL) {
			got = find_member(dw, "runtime.g", "goid", &out->goid_off);
			dwarf_end(dw);
		}
		if (!got && (lay = gort_layout(out->version)) != NULL) {
			out->goid_off = lay->g_goid;
			got = 1;
		}
		if (!got)
			rv = RM_ENOTSUP;
	}
	elf_end(e);
	close(fd);
	return rv;
}

int col_gort_is_go(const char *path)
{
	struct gort_seen seen = { 0 };
	struct gort_fn f;
	Elf *e;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return RM_EIO;
	elf_version(EV_CURRENT);
	if ((e = elf_begin(fd, ELF_C_READ, NULL)) != NULL && elf_kind(e) == ELF_K_ELF) {
		if (find_scn(e, ".go.buildinfo"))
			seen.is_go = 1;
		else
			find_sym(e, "runtime.main", &f, &seen);
	}
	if (e)
		elf_end(e);
	close(fd);
	return seen.is_go ? RM_OK : RM_ENOENT;
}

/*
 * The file offset of the one "call callee" (e8 rel32) in the function in:
 * 1 and *off, or 0 if there is not exactly one in its first 4 KiB.
 */
static int find_call(int fd, const struct gort_fn *in, const struct gort_fn *callee, uint64_t *off)
{
	unsigned char buf[4096];
	size_t i, n = in->size < sizeof(buf) ? (size_t)in->size : sizeof(buf);
	int found = 0;

	if (n < 5 || pread(fd, buf, n, (off_t)in->off) != (ssize_t)n)
		return 0;
	for (i = 0; i + 5 <= n; i++) {
		int32_t rel;

		if (buf[i] != 0xe8)
			continue;
		memcpy(&rel, buf + i + 1, sizeof(rel));
		if (in->addr + i + 5 + (uint64_t)(int64_t)rel == callee->addr) {
			*off = in->off + i;
			found++;
		}
	}
	return found == 1;
}

/* The *g's slot from fsbase (col_gort.h): RM_OK, or RM_ENOTSUP for a PT_TLS block where runtime.tlsg cannot be
 * placed (no symbol, and more in the block than it). */
static int tls_slot(Elf *e, const struct gort_seen *seen, int64_t *out)
{
	size_t i, n;

	*out = -8;
	if (elf_getphdrnum(e, &n) != 0)
		return RM_ENOTSUP;
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;
		uint64_t size;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_TLS)
			continue;
		size = ph.p_align > 1 ? (ph.p_memsz + ph.p_align - 1) / ph.p_align * ph.p_align : ph.p_memsz;
		if (seen->has_tlsg)
			*out = seen->tlsg - (int64_t)size;
		else if (ph.p_memsz == 8) /* stripped: a block of Go's one pointer, runtime.tlsg, alone */
			*out = -(int64_t)size;
		else
			return RM_ENOTSUP;
	}
	return RM_OK;
}

int col_gort_sched_inspect(const char *path, struct col_gort_sched *out)
{
	struct gort_fn rq = { 0 }, np = { 0 }, rd = { 0 };
	struct gort_seen seen = { 0 };
	const struct gort_layout *lay;
	struct col_gort v = { 0 };
	Elf_Scn *bi;
	Dwarf *dw;
	Elf *e;
	int fd, rv = RM_OK;

	memset(out, 0, sizeof(*out));
	if ((rv = gort_open(path, &fd, &e)) != RM_OK)
		return rv;
	if ((bi = find_scn(e, ".go.buildinfo")) != NULL)
		read_version(bi, &v);
	if (!find_fn(e, "runtime.runqput", &rq, &seen) || !find_fn(e, "runtime.newproc.func1", &np, &seen) ||
	    !seen.is_go || !find_call(fd, &np, &rq, &out->site_off))
		rv = RM_ENOTSUP;
	if (rv == RM_OK)
		rv = tls_slot(e, &seen, &out->g_tls_off);
	if (rv == RM_OK && find_fn(e, "runtime.ready", &rd, &seen))
		out->ready_off = gort_probe_off(fd, rd.off);
	if (rv == RM_OK) {
		GElf_Ehdr eh;

		/* a position-independent build runs at a base the binary does not say: no range */
		if (gelf_getehdr(e, &eh) && eh.e_type == ET_EXEC) {
			out->rt_text_lo = seen.rt_lo;
			out->rt_text_hi = seen.rt_hi;
		}
	}
	if (rv == RM_OK) {
		int got = 0;

		if ((dw = dwarf_begin_elf(e, DWARF_C_READ, NULL)) != NULL) {
			got = find_member(dw, "runtime.g", "m", &out->g_m_off) &&
			      find_member(dw, "runtime.m", "g0", &out->m_g0_off) &&
			      find_member(dw, "runtime.m", "curg", &out->m_curg_off) &&
			      find_member(dw, "runtime.g", "startpc", &out->g_startpc_off) &&
			      find_member(dw, "runtime.g", "goid", &out->g_goid_off);
			dwarf_end(dw);
		}
		if (!got && (lay = gort_layout(v.version)) != NULL) {
			out->g_m_off = lay->g_m;
			out->m_g0_off = lay->m_g0;
			out->m_curg_off = lay->m_curg;
			out->g_startpc_off = lay->g_startpc;
			out->g_goid_off = lay->g_goid;
			got = 1;
		}
		if (!got)
			rv = RM_ENOTSUP;
	}
	elf_end(e);
	close(fd);
	return rv;
}
