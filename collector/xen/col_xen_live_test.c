/*
 * col_xen_live_test.c - the live Xen backend. On a host without a Xen
 * hypervisor (or a build without libxenctrl) col_xen_live_run() must fail
 * at once with RM_ENOTSUP and a clear message; on a Xen dom0 run as root it
 * traces the hypervisor for a moment and the windows must add up.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "col_xen.h"
#include "rm_err.h"
#include "rm_test.h"
#include "banned.h"

struct cap {
	uint64_t parts, windows, bad;
	uint64_t win_busy, win_parts_cpu, cur_win;
};

static int cap_part(void *arg, const struct rm_part *p)
{
	struct cap *c = arg;

	c->parts++;
	if (!(p->flags & RM_PF_DOMAIN))
		c->bad++;
	if (p->win != c->cur_win) {
		c->cur_win = p->win;
		c->win_parts_cpu = 0;
	}
	c->win_parts_cpu += p->cpu_ns;
	return RM_OK;
}

static int cap_window(void *arg, const struct rm_totals *w)
{
	struct cap *c = arg;

	c->windows++;
	if (w->win != c->cur_win)
		c->win_parts_cpu = 0; /* a window without parts */
	if (c->win_parts_cpu + w->lost_ns + w->unseg_cpu_ns != w->busy_ns ||
	    w->busy_ns + w->idle_ns != w->capacity_ns)
		c->bad++;
	c->win_parts_cpu = 0;
	c->cur_win = UINT64_MAX;
	return RM_OK;
}

static int xen_host(void)
{
	return access("/dev/xen/privcmd", F_OK) == 0 || access("/proc/xen/privcmd", F_OK) == 0;
}

static int built_with_libxen(void)
{
#ifdef COL_XEN_HAVE_LIBXEN
	return 1;
#else
	return 0;
#endif
}

static volatile sig_atomic_t stop_flag;

static void *stopper(void *arg)
{
	(void)arg;
	usleep(1500 * 1000);
	stop_flag = 1;
	return NULL;
}

/* Run col_xen_live_run() with stderr captured into log[0..cap). */
static int run_captured(const struct col_xen_opts *o, const struct col_sink *s, char *log, size_t cap)
{
	char path[300];
	int fd, saved, rv;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/stderr.txt", rm_test_tmpdir());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	rv = col_xen_live_run(o, s, &stop_flag);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	lseek(fd, 0, SEEK_SET);
	n = read(fd, log, cap - 1);
	log[n > 0 ? n : 0] = 0;
	close(fd);
	fputs(log, stderr);
	return rv;
}

static void test_live(void)
{
	struct col_xen_opts o = { 100000000, 0, 0, 1 };
	struct cap c;
	struct col_sink s = { &c, cap_part, cap_window };
	char log[4096];
	time_t t0 = time(NULL);
	pthread_t th;
	int rv;

	memset(&c, 0, sizeof(c));
	c.cur_win = UINT64_MAX;
	if (!xen_host() || !built_with_libxen()) {
		fprintf(stderr, "  no xen hypervisor here (or no libxenctrl): expecting a clear refusal\n");
		rv = run_captured(&o, &s, log, sizeof(log));
		CU_ASSERT_EQUAL(rv, RM_ENOTSUP);
		CU_ASSERT_PTR_NOT_NULL(strstr(log, "xen hypervisor not available: "));
		CU_ASSERT(time(NULL) - t0 < 10);
		CU_ASSERT_EQUAL(c.parts + c.windows, 0);
		return;
	}
	/* a Xen dom0: trace for 1.5 s (needs root) */
	stop_flag = 0;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, stopper, NULL), 0);
	rv = run_captured(&o, &s, log, sizeof(log));
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(rv, RM_OK);
	CU_ASSERT(c.windows > 0);
	CU_ASSERT_EQUAL(c.bad, 0);
}

static void test_bad_options(void)
{
	struct col_xen_opts o = { 100000000, 0, 0, 0 };
	struct cap c;
	struct col_sink s = { &c, cap_part, cap_window }, nos = { NULL, NULL, NULL };

	CU_ASSERT_EQUAL(col_xen_live_run(&o, &s, NULL), built_with_libxen() ? RM_EINVAL : RM_ENOTSUP);
	CU_ASSERT_EQUAL(col_xen_live_run(&o, &nos, &stop_flag), built_with_libxen() ? RM_EINVAL : RM_ENOTSUP);
	o.epoch_offset_ns = -5;
	CU_ASSERT_EQUAL(col_xen_live_run(&o, &s, &stop_flag), built_with_libxen() ? RM_EINVAL : RM_ENOTSUP);
}

static CU_TestInfo cases[] = {
	{ "live tracing, or a clear refusal without xen", test_live },
	{ "rejects invalid options", test_bad_options },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_xen_live", cases)
