/*
 * col_xen_replay.c - the replay entry point of the Xen backend: validates
 * options, opens a xentrace file (col_xen_trace.c), derives the TSC frequency
 * when none is given, and feeds the TSC-merged records to the accounting
 * (col_xen_acct.c). Owns nothing beyond one call.
 */
#include <stdlib.h>
#include <string.h>

#include "col_xen.h"
#include "col_xen_acct.h"
#include "col_xen_trace.h"
#include "rm_err.h"
#include "banned.h"

/* Windows one replay may span: more means corrupt timestamps or a wrong frequency. */
#define XR_MAX_WINDOWS (1ull << 24)

static int derive_khz(struct col_xen_file *f, const char *path, uint64_t *khz)
{
	struct col_xen_calib *c;
	struct col_xen_rec r;
	uint64_t slices;
	int rv;

	if ((rv = col_xen_calib_open(&c)) != 0)
		return rv;
	col_xen_file_rewind(f);
	while ((rv = col_xen_file_next(f, &r)) == RM_OK)
		if ((rv = col_xen_calib_feed(c, &r)) != 0)
			break;
	if (rv == RM_ENOENT)
		rv = col_xen_calib_result(c, khz, &slices);
	col_xen_calib_free(c);
	if (rv == RM_ENOENT) {
		rm_log_error("cannot derive the tsc frequency of '%s': too few scheduler switch records with "
			     "runtimes; give it with --xen-cpu-khz", path);
		return RM_EINVAL;
	}
	if (rv == RM_OK)
		rm_log_debug("'%s': tsc frequency %llu khz derived from %llu slices", path, (unsigned long long)*khz,
			     (unsigned long long)slices);
	return rv;
}

int col_xen_replay_file_ex(const char *path, const struct col_xen_opts *o, const struct col_sink *sink,
			   struct col_xen_replay_info *info)
{
	const struct col_xen_trace_stats *st;
	const struct col_xen_acct_stats *ast;
	struct col_xen_acct_cfg cfg;
	struct col_xen_acct *a = NULL;
	struct col_xen_file *f = NULL;
	struct col_xen_rec r;
	uint64_t span;
	uint32_t cpu;
	int rv;

	if (info)
		memset(info, 0, sizeof(*info));
	if (!path || !o || !sink || !sink->part || !sink->window) {
		rm_log_error("xen replay: missing trace path, options or sink");
		return RM_EINVAL;
	}
	if (o->epoch_offset_ns < 0) {
		rm_log_error("xen replay: epoch offset %lld is negative", (long long)o->epoch_offset_ns);
		return RM_EINVAL;
	}
	if (o->window_ns != 0 && o->window_ns < 1000) {
		rm_log_error("xen replay: window of %llu ns is below 1 us", (unsigned long long)o->window_ns);
		return RM_EINVAL;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.window_ns = o->window_ns ? o->window_ns : COL_XEN_DEFAULT_WINDOW_NS;
	cfg.cpu_khz = o->cpu_khz;
	cfg.epoch_offset_ns = o->epoch_offset_ns;
	cfg.dom0_charging = o->dom0_charging;

	if ((rv = col_xen_file_open(path, &f)) != 0)
		return rv;
	st = col_xen_file_stats(f);
	if (st->records == st->no_tsc) {
		rm_log_error("'%s' holds no timestamped records", path);
		rv = RM_EPROTO;
		goto out;
	}
	if (!cfg.cpu_khz) {
		if ((rv = derive_khz(f, path, &cfg.cpu_khz)) != 0)
			goto out;
		if (info)
			info->khz_derived = 1;
	}
	span = (uint64_t)((unsigned __int128)(st->last_tsc - st->first_tsc) * 1000000u / cfg.cpu_khz);
	if (span / cfg.window_ns + 2 > XR_MAX_WINDOWS) {
		rm_log_error("'%s' spans %llu windows (tsc %llu..%llu at %llu khz): corrupt timestamps or wrong "
			     "cpu frequency", path, (unsigned long long)(span / cfg.window_ns),
			     (unsigned long long)st->first_tsc, (unsigned long long)st->last_tsc,
			     (unsigned long long)cfg.cpu_khz);
		rv = RM_EPROTO;
		goto out;
	}
	cfg.tsc0 = st->first_tsc;
	if ((rv = col_xen_acct_open(&cfg, sink, &a)) != 0)
		goto out;
	for (cpu = 0; cpu <= st->max_cpu; cpu++)
		if (col_xen_file_has_cpu(f, cpu) && (rv = col_xen_acct_add_cpu(a, cpu)) != 0)
			goto out;
	col_xen_file_rewind(f);
	while ((rv = col_xen_file_next(f, &r)) == RM_OK)
		if ((rv = col_xen_acct_feed(a, &r)) != 0)
			goto out;
	if (rv != RM_ENOENT)
		goto out;
	if ((rv = col_xen_acct_finish(a)) != 0)
		goto out;
	ast = col_xen_acct_stats(a);
	if (ast->switch_mismatch || ast->lost_spans || ast->unresolved_ns)
		rm_log_warn("'%s': %llu switch mismatches, %llu lost-record spans (%llu ns charged to V), "
			    "%llu ns of cpu time with unknown state", path, (unsigned long long)ast->switch_mismatch,
			    (unsigned long long)ast->lost_spans, (unsigned long long)ast->lost_ns,
			    (unsigned long long)ast->unresolved_ns);
	if (info) {
		info->cpu_khz = cfg.cpu_khz;
		info->records = ast->records;
		info->ncpu = ast->ncpu;
		info->windows = ast->windows;
		info->parts = ast->parts;
	}
out:
	col_xen_acct_free(a);
	col_xen_file_close(f);
	return rv;
}

int col_xen_replay_file(const char *path, const struct col_xen_opts *o, const struct col_sink *sink)
{
	return col_xen_replay_file_ex(path, o, sink, NULL);
}
