/*
 * col_xen_gen.c - test helper writing xentrace files byte for byte as the
 * xentrace tool and Xen 4.17 would (layouts in col_xen_trace.h). Owns the
 * output file and one queue of encoded records per CPU.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "col_xen_gen.h"
#include "col_xen_trace.h"
#include "rm_err.h"
#include "banned.h"

struct xg_cpu {
	uint8_t *buf;
	size_t len, cap;
	uint64_t last_switch;
	int have_switch;
};

struct col_xen_gen {
	FILE *fp;
	char path[512];
	uint32_t ncpu;
	uint64_t khz;
	int runstate;
	int err;
	struct xg_cpu *cpu;
};

static void wr32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

size_t col_xen_gen_encode(uint8_t *buf, size_t cap, int with_tsc, uint64_t tsc, uint32_t event, uint32_t n,
			  const uint32_t *extra)
{
	size_t size = 4 + (with_tsc ? 8 : 0) + 4 * (size_t)n, at = 4;
	uint32_t i;

	if (n > COL_XEN_EXTRA_MAX || cap < size)
		return 0;
	wr32(buf, (event & 0x0fffffffu) | n << 28 | (with_tsc ? COL_XEN_HDR_TSC : 0));
	if (with_tsc) {
		wr32(buf + 4, (uint32_t)tsc);
		wr32(buf + 8, (uint32_t)(tsc >> 32));
		at = 12;
	}
	for (i = 0; i < n; i++)
		wr32(buf + at + 4 * i, extra[i]);
	return size;
}

int col_xen_gen_open(const char *path, uint32_t ncpu, uint64_t cpu_khz, struct col_xen_gen **out)
{
	struct col_xen_gen *g;

	if (!path || !out || ncpu == 0 || ncpu > COL_XEN_MAX_CPUS || cpu_khz == 0)
		return RM_EINVAL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return RM_ENOMEM;
	g->cpu = calloc(ncpu, sizeof(*g->cpu));
	if (!g->cpu) {
		free(g);
		return RM_ENOMEM;
	}
	g->fp = fopen(path, "wb");
	if (!g->fp) {
		rm_log_error("failed to create '%s': %s", path, strerror(errno));
		free(g->cpu);
		free(g);
		return RM_EIO;
	}
	snprintf(g->path, sizeof(g->path), "%s", path);
	g->ncpu = ncpu;
	g->khz = cpu_khz;
	g->runstate = 1;
	*out = g;
	return RM_OK;
}

void col_xen_gen_set_runstate(struct col_xen_gen *g, int on)
{
	g->runstate = on;
}

int col_xen_gen_round(struct col_xen_gen *g)
{
	uint32_t i;

	for (i = 0; i < g->ncpu; i++) {
		struct xg_cpu *c = &g->cpu[i];
		uint32_t hdr[2] = { i, (uint32_t)c->len };
		uint8_t rec[16];
		size_t n;

		if (c->len == 0)
			continue;
		n = col_xen_gen_encode(rec, sizeof(rec), 0, 0, COL_XEN_TRC_CPU_CHANGE, 2, hdr);
		if (fwrite(rec, 1, n, g->fp) != n || fwrite(c->buf, 1, c->len, g->fp) != c->len) {
			rm_log_error("failed to write '%s': %s", g->path, strerror(errno));
			g->err = RM_EIO;
			return RM_EIO;
		}
		c->len = 0;
	}
	return RM_OK;
}

int col_xen_gen_close(struct col_xen_gen *g)
{
	uint32_t i;
	int rv;

	if (!g)
		return RM_OK;
	rv = col_xen_gen_round(g);
	if (fclose(g->fp) != 0 && rv == RM_OK) {
		rm_log_error("failed to write '%s': %s", g->path, strerror(errno));
		rv = RM_EIO;
	}
	if (rv == RM_OK)
		rv = g->err;
	for (i = 0; i < g->ncpu; i++)
		free(g->cpu[i].buf);
	free(g->cpu);
	free(g);
	return rv;
}

int col_xen_gen_raw(struct col_xen_gen *g, uint32_t cpu, int with_tsc, uint64_t tsc, uint32_t event, uint32_t n,
		    const uint32_t *extra)
{
	struct xg_cpu *c;
	size_t size;

	if (cpu >= g->ncpu || n > COL_XEN_EXTRA_MAX)
		return RM_EINVAL;
	c = &g->cpu[cpu];
	if (c->cap - c->len < 40) {
		size_t ncap = c->cap ? 2 * c->cap : 4096;
		uint8_t *b = realloc(c->buf, ncap);

		if (!b)
			return RM_ENOMEM;
		c->buf = b;
		c->cap = ncap;
	}
	size = col_xen_gen_encode(c->buf + c->len, c->cap - c->len, with_tsc, tsc, event, n, extra);
	if (size == 0)
		return RM_EINVAL;
	c->len += size;
	return RM_OK;
}

static uint32_t runstate_word(uint32_t dom, uint32_t vcpu)
{
	return (dom & 0xffffu) << 16 | (vcpu & 0xffffu);
}

static uint32_t runstate_event(int old, int nw)
{
	return COL_XEN_TRC_RUNSTATE_CHANGE | ((uint32_t)old & 3u) << 8 | ((uint32_t)nw & 3u) << 4;
}

int col_xen_gen_switch(struct col_xen_gen *g, uint32_t cpu, uint64_t tsc, uint32_t pdom, uint32_t pv,
		       uint32_t ndom, uint32_t nv, int prev_state)
{
	uint32_t w[4];
	uint64_t runtime = 0;
	int rv;

	if (cpu >= g->ncpu)
		return RM_EINVAL;
	if (g->cpu[cpu].have_switch && tsc > g->cpu[cpu].last_switch)
		runtime = (tsc - g->cpu[cpu].last_switch) * 1000000u / g->khz;
	w[0] = pdom;
	w[1] = pv;
	w[2] = (uint32_t)runtime;
	if ((rv = col_xen_gen_raw(g, cpu, 1, tsc, COL_XEN_TRC_SCHED_SWITCH_INFPREV, 3, w)) != 0)
		return rv;
	w[0] = ndom;
	w[1] = nv;
	w[2] = 0;
	w[3] = ndom == COL_XEN_DOMID_IDLE ? 0xffffffffu : 1000000u; /* next slice length */
	if ((rv = col_xen_gen_raw(g, cpu, 1, tsc, COL_XEN_TRC_SCHED_SWITCH_INFNEXT, 4, w)) != 0)
		return rv;
	w[0] = pdom;
	w[1] = pv;
	w[2] = ndom;
	w[3] = nv;
	if ((rv = col_xen_gen_raw(g, cpu, 1, tsc, COL_XEN_TRC_SCHED_SWITCH, 4, w)) != 0)
		return rv;
	if (g->runstate) {
		w[0] = runstate_word(pdom, pv);
		if ((rv = col_xen_gen_raw(g, cpu, 1, tsc, runstate_event(COL_XEN_RS_RUNNING, prev_state), 1, w)) != 0)
			return rv;
		w[0] = runstate_word(ndom, nv);
		if ((rv = col_xen_gen_raw(g, cpu, 1, tsc,
					  runstate_event(COL_XEN_RS_RUNNABLE, COL_XEN_RS_RUNNING), 1, w)) != 0)
			return rv;
	}
	g->cpu[cpu].last_switch = tsc;
	g->cpu[cpu].have_switch = 1;
	return RM_OK;
}

int col_xen_gen_wake(struct col_xen_gen *g, uint32_t cpu, uint64_t tsc, uint32_t dom, uint32_t vcpu)
{
	uint32_t w[2] = { dom, vcpu };
	int rv;

	if ((rv = col_xen_gen_raw(g, cpu, 1, tsc, COL_XEN_TRC_SCHED_WAKE, 2, w)) != 0)
		return rv;
	if (!g->runstate)
		return RM_OK;
	w[0] = runstate_word(dom, vcpu);
	return col_xen_gen_raw(g, cpu, 1, tsc, runstate_event(COL_XEN_RS_BLOCKED, COL_XEN_RS_RUNNABLE), 1, w);
}

int col_xen_gen_block(struct col_xen_gen *g, uint32_t cpu, uint64_t tsc, uint32_t dom, uint32_t vcpu)
{
	uint32_t w[2] = { dom, vcpu };

	return col_xen_gen_raw(g, cpu, 1, tsc, COL_XEN_TRC_SCHED_BLOCK, 2, w);
}

int col_xen_gen_grant(struct col_xen_gen *g, uint32_t cpu, uint64_t tsc, uint32_t event, uint32_t domid)
{
	return col_xen_gen_raw(g, cpu, 1, tsc, event, 1, &domid);
}

int col_xen_gen_lost(struct col_xen_gen *g, uint32_t cpu, uint64_t tsc, uint32_t count, uint32_t dom,
		     uint32_t vcpu, uint64_t first_tsc)
{
	/* struct __packed { u32 lost_records; u16 did, vid; u64 first_tsc; } */
	uint32_t w[4] = { count, (dom & 0xffffu) | (vcpu & 0xffffu) << 16, (uint32_t)first_tsc,
			  (uint32_t)(first_tsc >> 32) };

	return col_xen_gen_raw(g, cpu, 1, tsc, COL_XEN_TRC_LOST_RECORDS, 4, w);
}

int col_xen_gen_wrap(struct col_xen_gen *g, uint32_t cpu, uint64_t tsc, uint32_t bytes)
{
	uint32_t w[COL_XEN_EXTRA_MAX] = { 0 };
	uint32_t extra;
	int with_tsc = 0;

	if (bytes < 4 || bytes > 40 || bytes % 4)
		return RM_EINVAL;
	extra = (bytes - 4) / 4;
	if (extra > COL_XEN_EXTRA_MAX) {
		with_tsc = 1;
		extra -= 2;
	}
	return col_xen_gen_raw(g, cpu, with_tsc, tsc, COL_XEN_TRC_WRAP_BUFFER, extra, w);
}

int col_xen_gen_dom(struct col_xen_gen *g, uint32_t cpu, uint64_t tsc, uint32_t event, uint32_t domid)
{
	return col_xen_gen_raw(g, cpu, 1, tsc, event, 1, &domid);
}
