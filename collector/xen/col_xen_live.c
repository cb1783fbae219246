/*
 * col_xen_live.c - the live Xen backend: enables the hypervisor's trace
 * buffers through libxenctrl, maps the per-CPU rings (xenforeignmemory, as
 * the xentrace tool does), sleeps on VIRQ_TBUF (xenevtchn) or a 100 ms poll,
 * drains every ring each round (col_xen_tbuf_consume), merges the CPUs
 * (col_xen_stream) and accounts (col_xen_acct). Owns the Xen handles and the
 * mappings for one col_xen_live_run() call. Built without libxenctrl
 * (RM_WITH_XEN=OFF or no libxen-dev), col_xen_live_run() only reports that.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "col_xen.h"
#include "col_xen_acct.h"
#include "col_xen_trace.h"
#include "rm_err.h"

#ifdef COL_XEN_HAVE_LIBXEN
#include <xenctrl.h>
#include <xenevtchn.h>
#include <xenforeignmemory.h>
#include <xen/trace.h>
#include <xen/xen.h>
#endif

#include "banned.h"

#ifdef COL_XEN_HAVE_LIBXEN

/* The constants col_xen_trace.h copies must be Xen's. */
_Static_assert(COL_XEN_TRC_LOST_RECORDS == TRC_LOST_RECORDS, "event id");
_Static_assert(COL_XEN_TRC_WRAP_BUFFER == TRC_TRACE_WRAP_BUFFER, "event id");
_Static_assert(COL_XEN_TRC_CPU_CHANGE == TRC_TRACE_CPU_CHANGE, "event id");
_Static_assert(COL_XEN_TRC_RUNSTATE_CHANGE == TRC_SCHED_RUNSTATE_CHANGE, "event id");
_Static_assert(COL_XEN_TRC_CONTINUE_RUNNING == TRC_SCHED_CONTINUE_RUNNING, "event id");
_Static_assert(COL_XEN_TRC_SCHED_DOM_ADD == TRC_SCHED_DOM_ADD, "event id");
_Static_assert(COL_XEN_TRC_SCHED_DOM_REM == TRC_SCHED_DOM_REM, "event id");
_Static_assert(COL_XEN_TRC_SCHED_SLEEP == TRC_SCHED_SLEEP, "event id");
_Static_assert(COL_XEN_TRC_SCHED_WAKE == TRC_SCHED_WAKE, "event id");
_Static_assert(COL_XEN_TRC_SCHED_BLOCK == TRC_SCHED_BLOCK, "event id");
_Static_assert(COL_XEN_TRC_SCHED_SWITCH == TRC_SCHED_SWITCH, "event id");
_Static_assert(COL_XEN_TRC_SCHED_SWITCH_INFPREV == TRC_SCHED_SWITCH_INFPREV, "event id");
_Static_assert(COL_XEN_TRC_SCHED_SWITCH_INFNEXT == TRC_SCHED_SWITCH_INFNEXT, "event id");
_Static_assert(COL_XEN_TRC_SCHED_SWITCH_INFCONT == TRC_SCHED_SWITCH_INFCONT, "event id");
_Static_assert(COL_XEN_TRC_DOM0_DOM_ADD == TRC_DOM0_DOM_ADD, "event id");
_Static_assert(COL_XEN_TRC_DOM0_DOM_REM == TRC_DOM0_DOM_REM, "event id");
_Static_assert(COL_XEN_TRC_MEM_GRANT_MAP == TRC_MEM_PAGE_GRANT_MAP, "event id");
_Static_assert(COL_XEN_TRC_MEM_GRANT_UNMAP == TRC_MEM_PAGE_GRANT_UNMAP, "event id");
_Static_assert(COL_XEN_TRC_MEM_GRANT_TRANSFER == TRC_MEM_PAGE_GRANT_TRANSFER, "event id");
_Static_assert(COL_XEN_DOMID_IDLE == DOMID_IDLE, "domid");
_Static_assert(COL_XEN_DOMID_FIRST_RESERVED == DOMID_FIRST_RESERVED, "domid");
_Static_assert(COL_XEN_EXTRA_MAX == TRACE_EXTRA_MAX, "record layout");
_Static_assert(sizeof(struct col_xen_tbuf_meta) == sizeof(struct t_buf), "t_buf layout");

#define XL_TBUF_PAGES 32   /* per-CPU ring size asked for (the xentrace default) */
#define XL_POLL_MS 100
#define XL_HOLD_WINDOWS 50 /* how long an idle CPU of unknown state may hold windows */
#define XL_EVT_MASK (TRC_GEN | TRC_SCHED | TRC_DOM0OP | TRC_MEM)

/* libxenctrl's messages go to the debug log: callers see one clear error. */
static void xl_vmessage(struct xentoollog_logger *l, xentoollog_level level, int errnoval, const char *context,
			const char *format, va_list al)
{
	char buf[512];

	(void)l;
	(void)level;
	vsnprintf(buf, sizeof(buf), format, al);
	rm_log_debug("%s: %s%s%s", context ? context : "xen", buf, errnoval >= 0 ? ": " : "",
		     errnoval >= 0 ? strerror(errnoval) : "");
}

static void xl_destroy(struct xentoollog_logger *l)
{
	(void)l;
}

static struct xentoollog_logger xl_logger = { xl_vmessage, NULL, xl_destroy };

struct xl_cpu {
	void *map;            /* struct t_buf + ring, tbuf_pages pages */
	volatile struct col_xen_tbuf_meta *meta;
	const volatile uint8_t *data;
};

struct xl_live {
	xc_interface *xch;
	xenforeignmemory_handle *fmem;
	xenevtchn_handle *xce;
	xenevtchn_port_or_error_t port;
	int enabled;
	void *tinfo;
	size_t tinfo_pages;
	uint32_t ncpu;
	uint32_t tbuf_pages;
	uint32_t data_size;
	struct xl_cpu *cpu;
	uint8_t *buf;
	struct col_xen_stream *s;
	struct col_xen_acct *a;
};

static void xl_close(struct xl_live *L)
{
	uint32_t i;

	col_xen_acct_free(L->a);
	col_xen_stream_free(L->s);
	free(L->buf);
	if (L->cpu) {
		for (i = 0; i < L->ncpu; i++)
			if (L->cpu[i].map)
				xenforeignmemory_unmap(L->fmem, L->cpu[i].map, L->tbuf_pages);
		free(L->cpu);
	}
	if (L->tinfo)
		xenforeignmemory_unmap(L->fmem, L->tinfo, L->tinfo_pages);
	if (L->xce) {
		if (L->port >= 0)
			xenevtchn_unbind(L->xce, (evtchn_port_t)L->port);
		xenevtchn_close(L->xce);
	}
	if (L->enabled && xc_tbuf_disable(L->xch) != 0)
		rm_log_warn("failed to disable xen trace buffers: %s", strerror(errno));
	if (L->fmem)
		xenforeignmemory_close(L->fmem);
	if (L->xch)
		xc_interface_close(L->xch);
}

static void *map_pages(struct xl_live *L, const uint32_t *mfns, uint64_t base, size_t n, int prot)
{
	xen_pfn_t *pfn = calloc(n, sizeof(*pfn));
	void *p;
	size_t i;

	if (!pfn)
		return NULL;
	for (i = 0; i < n; i++)
		pfn[i] = mfns ? (xen_pfn_t)mfns[i] : (xen_pfn_t)(base + i);
	p = xenforeignmemory_map(L->fmem, DOMID_XEN, prot, n, pfn, NULL);
	free(pfn);
	return p;
}

/* Enable tracing and map t_info and every CPU's ring. */
static int xl_setup(struct xl_live *L)
{
	unsigned long tinfo_mfn = 0, tinfo_size = 0;
	const struct t_info *ti;
	uint32_t i;

	if (xc_tbuf_set_evt_mask(L->xch, XL_EVT_MASK) != 0)
		rm_log_warn("failed to set the xen trace event mask: %s", strerror(errno));
	if (xc_tbuf_enable(L->xch, XL_TBUF_PAGES, &tinfo_mfn, &tinfo_size) != 0) {
		int e = errno;

		rm_log_error("failed to enable xen trace buffers: %s", strerror(e));
		return e == EPERM || e == EACCES ? RM_EPERM : RM_EIO;
	}
	L->enabled = 1;
	if (tinfo_mfn == 0 || tinfo_size < XC_PAGE_SIZE) {
		rm_log_error("xen reported no trace buffer metadata (mfn %lu, %lu bytes)", tinfo_mfn, tinfo_size);
		return RM_EIO;
	}
	L->fmem = xenforeignmemory_open(&xl_logger, 0);
	if (!L->fmem) {
		rm_log_error("failed to open xen foreign memory: %s", strerror(errno));
		return RM_EIO;
	}
	L->tinfo_pages = tinfo_size / XC_PAGE_SIZE;
	L->tinfo = map_pages(L, NULL, tinfo_mfn, L->tinfo_pages, PROT_READ);
	if (!L->tinfo) {
		rm_log_error("failed to map xen trace buffer metadata: %s", strerror(errno));
		return RM_EIO;
	}
	ti = L->tinfo;
	L->tbuf_pages = ti->tbuf_size;
	if (L->tbuf_pages == 0 || (uint64_t)L->tbuf_pages * XC_PAGE_SIZE <= sizeof(struct t_buf)) {
		rm_log_error("xen trace buffers have %u pages", L->tbuf_pages);
		return RM_EIO;
	}
	L->data_size = L->tbuf_pages * XC_PAGE_SIZE - sizeof(struct t_buf);
	L->cpu = calloc(L->ncpu, sizeof(*L->cpu));
	L->buf = malloc(L->data_size);
	if (!L->cpu || !L->buf)
		return RM_ENOMEM;
	for (i = 0; i < L->ncpu; i++) {
		size_t bytes = L->tinfo_pages * XC_PAGE_SIZE, words = bytes / sizeof(uint32_t);
		uint16_t off;

		/* mfn_offset[] follows the 16-bit tbuf_size; offsets count uint32_t words */
		if (sizeof(uint16_t) * ((size_t)i + 2) > bytes)
			break;
		off = ti->mfn_offset[i];
		if (off == 0)
			continue; /* CPU without a buffer (offline) */
		if ((size_t)off + L->tbuf_pages > words) {
			rm_log_error("xen trace buffer list of cpu %u is out of range", i);
			return RM_EIO;
		}
		L->cpu[i].map = map_pages(L, (const uint32_t *)L->tinfo + off, 0, L->tbuf_pages,
					  PROT_READ | PROT_WRITE);
		if (!L->cpu[i].map) {
			rm_log_error("failed to map the xen trace buffer of cpu %u: %s", i, strerror(errno));
			return RM_EIO;
		}
		L->cpu[i].meta = L->cpu[i].map;
		L->cpu[i].data = (const volatile uint8_t *)L->cpu[i].map + sizeof(struct t_buf);
	}
	L->xce = xenevtchn_open(&xl_logger, 0);
	L->port = -1;
	if (!L->xce) {
		rm_log_error("failed to open xen event channels: %s", strerror(errno));
		return RM_EIO;
	}
	L->port = xenevtchn_bind_virq(L->xce, VIRQ_TBUF);
	if (L->port < 0) {
		rm_log_error("failed to bind VIRQ_TBUF: %s", strerror(errno));
		return RM_EIO;
	}
	return RM_OK;
}

/* Drain every ring once and account what is released. */
static int xl_round(struct xl_live *L, int drain)
{
	struct col_xen_rec r;
	uint32_t i;
	int rv;

	for (i = 0; i < L->ncpu; i++) {
		size_t len;

		if (!L->cpu[i].meta)
			continue;
		rv = col_xen_tbuf_consume(L->cpu[i].meta, L->cpu[i].data, L->data_size, L->buf, L->data_size, &len);
		if (rv != RM_OK) {
			rm_log_error("xen trace buffer of cpu %u is inconsistent (cons %u, prod %u, %u bytes)", i,
				     L->cpu[i].meta->cons, L->cpu[i].meta->prod, L->data_size);
			return rv;
		}
		if (len && (rv = col_xen_stream_push(L->s, i, L->buf, len)) != 0)
			return rv;
	}
	col_xen_stream_end_round(L->s);
	while ((rv = col_xen_stream_pop(L->s, drain, &r)) == RM_OK)
		if ((rv = col_xen_acct_feed(L->a, &r)) != 0)
			return rv;
	return rv == RM_ENOENT ? RM_OK : rv;
}

int col_xen_live_run(const struct col_xen_opts *o, const struct col_sink *sink, volatile sig_atomic_t *stop)
{
	struct xl_live L;
	struct col_xen_acct_cfg cfg;
	xc_physinfo_t info;
	struct timespec now;
	uint32_t i;
	int rv;

	if (!o || !sink || !sink->part || !sink->window || !stop || o->epoch_offset_ns < 0 ||
	    (o->window_ns != 0 && o->window_ns < 1000)) {
		rm_log_error("xen live: invalid options");
		return RM_EINVAL;
	}
	memset(&L, 0, sizeof(L));
	L.port = -1;
	errno = 0;
	L.xch = xc_interface_open(&xl_logger, &xl_logger, 0);
	if (!L.xch) {
		char why[256];

		snprintf(why, sizeof(why), "cannot open the hypervisor interface (/dev/xen/privcmd): %s",
			 errno ? strerror(errno) : "unknown error");
		rm_log_error("xen hypervisor not available: %s", why);
		return RM_ENOTSUP;
	}
	memset(&info, 0, sizeof(info));
	if (xc_physinfo(L.xch, &info) != 0) {
		rm_log_error("xen hypervisor not available: physinfo failed: %s", strerror(errno));
		xl_close(&L);
		return RM_ENOTSUP;
	}
	L.ncpu = info.max_cpu_id + 1;
	if (L.ncpu > COL_XEN_MAX_CPUS)
		L.ncpu = COL_XEN_MAX_CPUS;
	memset(&cfg, 0, sizeof(cfg));
	cfg.window_ns = o->window_ns ? o->window_ns : COL_XEN_DEFAULT_WINDOW_NS;
	cfg.cpu_khz = o->cpu_khz ? o->cpu_khz : info.cpu_khz;
	cfg.dom0_charging = o->dom0_charging;
	cfg.hold_ns = XL_HOLD_WINDOWS * cfg.window_ns;
	cfg.epoch_offset_ns = o->epoch_offset_ns;
	if (!cfg.epoch_offset_ns) {
		clock_gettime(CLOCK_REALTIME, &now); /* windows wall-clock aligned like other backends */
		cfg.epoch_offset_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	}
	if (!cfg.cpu_khz) {
		rm_log_error("xen reports no cpu frequency; give it with --xen-cpu-khz");
		xl_close(&L);
		return RM_EINVAL;
	}
	if ((rv = xl_setup(&L)) != 0 || (rv = col_xen_stream_open(L.ncpu, &L.s)) != 0 ||
	    (rv = col_xen_acct_open(&cfg, sink, &L.a)) != 0) {
		xl_close(&L);
		return rv;
	}
	for (i = 0; i < L.ncpu; i++)
		if (L.cpu[i].meta && (rv = col_xen_acct_add_cpu(L.a, i)) != 0)
			goto out;
	rm_log_info("tracing xen: %u cpus, %u-page buffers, tsc %llu khz", L.ncpu, L.tbuf_pages,
		    (unsigned long long)cfg.cpu_khz);
	while (!*stop) {
		struct pollfd pfd = { .fd = xenevtchn_fd(L.xce), .events = POLLIN };
		int n = poll(&pfd, 1, XL_POLL_MS);

		if (n < 0 && errno != EINTR) {
			rm_log_error("failed to wait for VIRQ_TBUF: %s", strerror(errno));
			rv = RM_EIO;
			goto out;
		}
		if (n > 0 && (pfd.revents & POLLIN)) {
			xenevtchn_port_or_error_t p = xenevtchn_pending(L.xce);

			if (p >= 0)
				xenevtchn_unmask(L.xce, (evtchn_port_t)p);
		}
		if ((rv = xl_round(&L, 0)) != 0)
			goto out;
	}
	if ((rv = xl_round(&L, 1)) != 0)
		goto out;
	rv = col_xen_acct_finish(L.a);
out:
	xl_close(&L);
	return rv;
}

#else /* !COL_XEN_HAVE_LIBXEN */

int col_xen_live_run(const struct col_xen_opts *o, const struct col_sink *sink, volatile sig_atomic_t *stop)
{
	(void)o;
	(void)sink;
	(void)stop;
	rm_log_error("xen hypervisor not available: %s", "this program has no libxenctrl; the live Xen backend "
		     "is rametr-collector-xen (package rametr-collector-xen; built with libxen-dev and RM_WITH_XEN=ON)");
	return RM_ENOTSUP;
}

#endif
