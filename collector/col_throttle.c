/*
 * col_throttle.c - per-thread CPU throttling (see col_throttle.h): loads and
 * attaches throttle.bpf.c, owns the cgroup v1 groups rametr-throttle-<pid>/
 * s<slot> (one per slot of its throttled-CE table, col_slots.h), the table
 * of moved threads (tid -> group it came from), and the
 * thread that drains the kernel's enter/leave records, moves threads and
 * expires throttles.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "col_throttle.h"
#include "rm_clock.h"
#include "rm_err.h"
#include "throttle.h"
#include "throttle.skel.h"
#include "banned.h"

#define COL_THR_MAX_MOVED 8192
#define COL_THR_TICK_MS 20

/* The cgroup of a slot of the table (col_slots.h), while the slot is used. */
struct col_thr_group {
	char dir[512];
	int tasks_fd;                 /* <dir>/tasks, kept open; -1 = none */
	int have_stat;
	uint64_t nr_periods, nr_throttled;   /* cpu.stat at the last second's report */
};

struct col_thr_moved {
	uint32_t tid;                 /* 0 = free entry */
	uint32_t slot;
	char orig[256];               /* cgroup path relative to root, "/" */
};

struct col_throttle {
	pthread_mutex_t mu;
	pthread_t th;
	int th_started;
	volatile int stop;
	struct throttle_bpf *skel;
	struct bpf_link *l_recv, *l_send;
	struct ring_buffer *rb;
	char root[256];
	char parent[384];
	uint32_t ncpu;
	int release_at_send;
	struct col_slots tab;          /* the throttled CEs and their matches */
	struct col_thr_group grp[THR_MAX_SLOTS];
	struct col_thr_moved *moved;
	size_t nmoved_hw;              /* high-water mark of used entries */
	int64_t last_sec;              /* Unix second of the last binding report */
	struct col_throttle_stats st;
};

static int col_thr_write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	if (n < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	close(fd);
	return 0;
}

/* Writes tid into an open tasks file; 0 or -errno. */
static int col_thr_move_fd(int fd, uint32_t tid)
{
	char buf[16];
	int n = snprintf(buf, sizeof(buf), "%u", tid);

	if (write(fd, buf, (size_t)n) < 0)
		return -errno;
	return 0;
}

static int col_thr_move_path(const char *root, const char *rel, uint32_t tid)
{
	char path[640], buf[16];

	snprintf(path, sizeof(path), "%s%s/tasks", root, strcmp(rel, "/") ? rel : "");
	snprintf(buf, sizeof(buf), "%u", tid);
	return col_thr_write_file(path, buf);
}

/* The cpu-hierarchy path of tid (of process pid) into rel; 0 or -1. */
static int col_thr_cgroup_of(uint32_t pid, uint32_t tid, char *rel, size_t len)
{
	char path[96], line[512];
	FILE *f;
	int found = -1;

	snprintf(path, sizeof(path), "/proc/%u/task/%u/cgroup", pid, tid);
	if (!(f = fopen(path, "re")))
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2, *tok, *save = NULL;

		if (!c1 || !(c2 = strchr(c1 + 1, ':')))
			continue;
		*c2 = '\0';
		for (tok = strtok_r(c1 + 1, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			if (strcmp(tok, "cpu") == 0) {
				size_t n = strcspn(c2 + 1, "\n");

				if (n == 0 || n >= len)
					break;
				memcpy(rel, c2 + 1, n);
				rel[n] = '\0';
				found = 0;
				break;
			}
		}
		if (found == 0)
			break;
	}
	fclose(f);
	return found;
}

static struct col_thr_moved *col_thr_find(struct col_throttle *t, uint32_t tid)
{
	size_t i;

	for (i = 0; i < t->nmoved_hw; i++)
		if (t->moved[i].tid == tid)
			return &t->moved[i];
	return NULL;
}

static struct col_thr_moved *col_thr_alloc(struct col_throttle *t)
{
	size_t i;

	for (i = 0; i < t->nmoved_hw; i++)
		if (t->moved[i].tid == 0)
			return &t->moved[i];
	if (t->nmoved_hw == COL_THR_MAX_MOVED)
		return NULL;
	return &t->moved[t->nmoved_hw++];
}

/* Moves a moved thread back where it came from and forgets it. Caller holds mu. */
static void col_thr_move_back(struct col_throttle *t, struct col_thr_moved *m, uint64_t ev_ts)
{
	int rv = col_thr_move_path(t->root, m->orig, m->tid);

	if (rv == -ENOENT) /* its group is gone: the root then */
		rv = col_thr_move_path(t->root, "/", m->tid);
	if (rv == 0) {
		uint64_t d = ev_ts ? rm_clock_mono_ns() - ev_ts : 0;

		t->st.moves++;
		t->st.move_ns_sum += d;
		if (d > t->st.move_ns_max)
			t->st.move_ns_max = d;
	} else if (rv != -ESRCH) {
		t->st.move_fail++;
		rm_log_warn("failed to move thread %u back to cgroup '%s': %s", m->tid, m->orig,
			    strerror(-rv));
	} else {
		t->st.move_fail++;
	}
	m->tid = 0;
}

static int col_thr_on_event(void *ctx, void *data, size_t len)
{
	struct col_throttle *t = ctx;
	const struct thr_event *e = data;
	struct col_thr_moved *m;
	struct col_thr_group *g;
	uint64_t d;
	int rv;

	if (len < sizeof(*e) || e->slot == 0 || e->slot >= THR_MAX_SLOTS)
		return 0;
	pthread_mutex_lock(&t->mu);
	if (e->kind == THR_EV_LEAVE) {
		t->st.leaves++;
		if ((m = col_thr_find(t, e->tid)))
			col_thr_move_back(t, m, e->ts_ns);
		goto out;
	}
	t->st.enters++;
	g = &t->grp[e->slot];
	if (!t->tab.slot[e->slot].used)
		goto out; /* released meanwhile */
	m = col_thr_find(t, e->tid);
	if (!m) {
		if (!(m = col_thr_alloc(t))) {
			rm_log_warn("too many throttled threads (%d); thread %u not throttled",
				    COL_THR_MAX_MOVED, e->tid);
			goto out;
		}
		if (col_thr_cgroup_of(e->pid, e->tid, m->orig, sizeof(m->orig)) != 0) {
			t->st.move_fail++; /* thread gone already */
			goto out;
		}
		m->tid = e->tid;
	}
	m->slot = e->slot;
	rv = col_thr_move_fd(g->tasks_fd, e->tid);
	if (rv != 0) {
		t->st.move_fail++;
		if (rv != -ESRCH)
			rm_log_warn("failed to move thread %u into '%s': %s", e->tid, g->dir,
				    strerror(-rv));
		m->tid = 0;
		goto out;
	}
	d = rm_clock_mono_ns() - e->ts_ns;
	t->st.moves++;
	t->st.move_ns_sum += d;
	if (d > t->st.move_ns_max)
		t->st.move_ns_max = d;
out:
	pthread_mutex_unlock(&t->mu);
	return 0;
}

static void col_thr_detach(struct col_throttle *t)
{
	bpf_link__destroy(t->l_recv);
	bpf_link__destroy(t->l_send);
	t->l_recv = t->l_send = NULL;
	t->st.attached = 0;
}

static int col_thr_attach(struct col_throttle *t, char *err, size_t errlen)
{
	if (t->l_recv)
		return RM_OK;
	t->l_recv = bpf_program__attach(t->skel->progs.thr_sock_recv);
	if (!t->l_recv) {
		rm_errf(err, errlen, "failed to attach sock_recv_length: %s", strerror(errno));
		return RM_EBPF;
	}
	if (t->release_at_send) {
		t->l_send = bpf_program__attach(t->skel->progs.thr_sock_send);
		if (!t->l_send) {
			rm_errf(err, errlen, "failed to attach sock_send_length: %s",
				    strerror(errno));
			col_thr_detach(t);
			return RM_EBPF;
		}
	}
	t->st.attached = 1;
	return RM_OK;
}

/* Removes slot si's group (closed, rmdir'ed). Caller holds mu. */
static void col_thr_group_remove(struct col_throttle *t, uint32_t si)
{
	struct col_thr_group *g = &t->grp[si];

	if (g->tasks_fd >= 0)
		close(g->tasks_fd);
	g->tasks_fd = -1;
	if (rmdir(g->dir) != 0 && errno != ENOENT)
		rm_log_warn("failed to remove cgroup '%s': %s", g->dir, strerror(errno));
}

/* Ends a throttle: matches off, threads back, group removed. Caller holds mu. */
static void col_thr_release(void *arg, uint32_t si)
{
	struct col_throttle *t = arg;
	size_t i;

	if (!t->tab.slot[si].used)
		return;
	col_slots_clear(&t->tab, si);
	/* threads still inside: back, and out of the kernel's table */
	for (i = 0; i < t->nmoved_hw; i++) {
		struct col_thr_moved *m = &t->moved[i];

		if (m->tid && m->slot == si) {
			uint32_t tid = m->tid;

			bpf_map_delete_elem(bpf_map__fd(t->skel->maps.inside), &tid);
			col_thr_move_back(t, m, 0);
		}
	}
	col_thr_group_remove(t, si);
	t->st.active--;
	if (t->st.active == 0)
		col_thr_detach(t);
}

static void col_thr_expire(struct col_throttle *t)
{
	int64_t now = rm_clock_unix_ns();
	uint32_t i;

	pthread_mutex_lock(&t->mu);
	while ((i = col_slots_expired(&t->tab, now)) != 0) {
		rm_log_info("throttle of CE '%s' (command %" PRIu64 ") expired; cap 0 in force "
			    "at %" PRId64, t->tab.slot[i].ce, t->tab.slot[i].id, now);
		col_thr_release(t, i);
		t->st.expired++;
	}
	pthread_mutex_unlock(&t->mu);
}

/* nr_periods and nr_throttled of a group's cpu.stat; 0 or -1. */
static int col_thr_cpu_stat(const char *dir, uint64_t *periods, uint64_t *throttled)
{
	char path[640], line[128];
	FILE *f;
	int got = 0;

	snprintf(path, sizeof(path), "%s/cpu.stat", dir);
	if (!(f = fopen(path, "re")))
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;

		if (sscanf(line, "nr_periods %llu", &v) == 1) {
			*periods = v;
			got |= 1;
		} else if (sscanf(line, "nr_throttled %llu", &v) == 1) {
			*throttled = v;
			got |= 2;
		}
	}
	fclose(f);
	return got == 3 ? 0 : -1;
}

/*
 * Once per second (Unix, at the first tick after it ends): for each
 * throttled CE, whether its quota bound in that second (CFS periods in which
 * the group was throttled), so that a CE below its cap can be told apart
 * from one its cap held down ("bound 3 of 10 periods in second S").
 */
static void col_thr_report(struct col_throttle *t)
{
	int64_t sec = rm_clock_unix_ns() / 1000000000ll;
	uint32_t i;

	if (sec == t->last_sec)
		return;
	pthread_mutex_lock(&t->mu);
	for (i = 0; (i = col_slots_next(&t->tab, i)) != 0;) {
		const struct col_slot *s = &t->tab.slot[i];
		struct col_thr_group *g = &t->grp[i];
		uint64_t p = 0, th = 0;

		if (col_thr_cpu_stat(g->dir, &p, &th) != 0)
			continue;
		if (t->last_sec && g->have_stat && p >= g->nr_periods && th >= g->nr_throttled)
			rm_log_info("CE '%s' cap %u bound %" PRIu64 " of %" PRIu64 " periods in second %" PRId64,
				    s->ce, s->cap_permille, th - g->nr_throttled, p - g->nr_periods,
				    t->last_sec);
		g->have_stat = 1;
		g->nr_periods = p;
		g->nr_throttled = th;
	}
	pthread_mutex_unlock(&t->mu);
	t->last_sec = sec;
}

static void *col_thr_main(void *arg)
{
	struct col_throttle *t = arg;

	while (!t->stop) {
		ring_buffer__poll(t->rb, COL_THR_TICK_MS);
		col_thr_expire(t);
		col_thr_report(t);
	}
	return NULL;
}

int col_throttle_apply(struct col_throttle *t, const struct col_throttle_cmd *c, char *err, size_t errlen)
{
	struct col_thr_group *g;
	char path[600], val[32];
	uint64_t quota;
	uint32_t si;
	int rv, fresh = 0;

	if (!t || !c)
		return RM_EINVAL;
	if ((rv = col_slots_check(c, rm_clock_unix_ns(), err, errlen)) != 0)
		return rv;
	pthread_mutex_lock(&t->mu);
	si = col_slots_find(&t->tab, c->ce);
	if (c->cap_permille == 0) {
		if (si) {
			col_thr_release(t, si);
			t->st.released++;
			rm_log_info("released CE '%s', command %" PRIu64 "; cap 0 in force at %" PRId64,
				    c->ce, c->id, rm_clock_unix_ns());
		}
		pthread_mutex_unlock(&t->mu);
		return RM_OK;
	}
	if (!si) {
		if (!(si = col_slots_unused(&t->tab, err, errlen))) {
			pthread_mutex_unlock(&t->mu);
			return RM_EFULL;
		}
		g = &t->grp[si];
		memset(g, 0, sizeof(*g));
		g->tasks_fd = -1;
		snprintf(g->dir, sizeof(g->dir), "%s/s%u", t->parent, si);
		if (mkdir(g->dir, 0755) != 0 && errno != EEXIST) {
			rm_errf(err, errlen, "failed to create cgroup '%s': %s", g->dir,
				    strerror(errno));
			pthread_mutex_unlock(&t->mu);
			return RM_EIO;
		}
		snprintf(path, sizeof(path), "%s/tasks", g->dir);
		if ((g->tasks_fd = open(path, O_WRONLY | O_CLOEXEC)) < 0) {
			rm_errf(err, errlen, "failed to open '%s': %s", path, strerror(errno));
			rmdir(g->dir);
			pthread_mutex_unlock(&t->mu);
			return RM_EIO;
		}
		fresh = 1;
	}
	g = &t->grp[si];
	/* quota */
	quota = (uint64_t)c->cap_permille * t->ncpu * COL_THROTTLE_PERIOD_US / 1000u;
	if (quota < 1000)
		quota = 1000;
	snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", g->dir);
	snprintf(val, sizeof(val), "%u", COL_THROTTLE_PERIOD_US);
	if ((rv = col_thr_write_file(path, val)) == 0) {
		snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", g->dir);
		snprintf(val, sizeof(val), "%" PRIu64, quota);
		rv = col_thr_write_file(path, val);
	}
	if (rv != 0) {
		rm_errf(err, errlen, "failed to write '%s': %s", path, strerror(-rv));
		rv = RM_EIO;
		goto fail;
	}
	/* the hooks, then the matches that make them act */
	if ((rv = col_thr_attach(t, err, errlen)) != 0 || (rv = col_slots_set(&t->tab, si, c, err, errlen)) != 0)
		goto fail;
	if (fresh)
		t->st.active++;
	pthread_mutex_unlock(&t->mu);
	/* "cap N in force at T" (Unix ns): scripts/fig8.sh compares each window
	 * with the caps in force during it */
	rm_log_info("throttling CE '%s' to %u permille of %u CPUs (quota %" PRIu64 " us per %u us), "
		    "command %" PRIu64 "; cap %u in force at %" PRId64, c->ce, c->cap_permille, t->ncpu,
		    quota, COL_THROTTLE_PERIOD_US, c->id, c->cap_permille, rm_clock_unix_ns());
	return RM_OK;
fail:
	if (fresh) {
		col_thr_group_remove(t, si);
		if (t->st.active == 0)
			col_thr_detach(t);
	}
	pthread_mutex_unlock(&t->mu);
	return rv;
}

/* Empties and removes groups of collectors that are no longer running. */
static void col_thr_reclaim(struct col_throttle *t)
{
	DIR *d = opendir(t->root);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char sub[640], tasks[1024], line[32];
		DIR *d2;
		struct dirent *de2;
		unsigned pid;

		if (sscanf(de->d_name, "rametr-throttle-%u", &pid) != 1 || kill((pid_t)pid, 0) == 0 ||
		    errno != ESRCH)
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", t->root, de->d_name);
		if ((d2 = opendir(sub))) {
			while ((de2 = readdir(d2))) {
				FILE *f;

				if (de2->d_name[0] != 's')
					continue;
				snprintf(tasks, sizeof(tasks), "%s/%s/tasks", sub, de2->d_name);
				if ((f = fopen(tasks, "re"))) {
					while (fgets(line, sizeof(line), f))
						col_thr_move_path(t->root, "/", (uint32_t)strtoul(line, NULL, 10));
					fclose(f);
				}
				tasks[strlen(tasks) - 6] = '\0';
				rmdir(tasks);
			}
			closedir(d2);
		}
		if (rmdir(sub) == 0)
			rm_log_warn("removed throttle group '%s' left by collector %u", sub, pid);
	}
	closedir(d);
}

static int col_thr_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

int col_throttle_open(struct col_throttle **out, const struct col_throttle_cfg *cfg)
{
	struct col_throttle *t;
	char path[512];
	long n;
	int rv, i;

	if (!out || !cfg)
		return RM_EINVAL;
	*out = NULL;
	if (!(t = calloc(1, sizeof(*t))))
		return RM_ENOMEM;
	if (!(t->moved = calloc(COL_THR_MAX_MOVED, sizeof(*t->moved)))) {
		free(t);
		return RM_ENOMEM;
	}
	pthread_mutex_init(&t->mu, NULL);
	for (i = 0; i < THR_MAX_SLOTS; i++)
		t->grp[i].tasks_fd = -1;
	snprintf(t->root, sizeof(t->root), "%s", cfg->root ? cfg->root : COL_THROTTLE_ROOT_DEFAULT);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	t->ncpu = cfg->ncpu ? cfg->ncpu : (uint32_t)(n > 0 ? n : 1);
	t->release_at_send = cfg->release_at_send;
	snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", t->root);
	if (access(path, F_OK) != 0 && !cfg->root) {
		mkdir(t->root, 0755);
		if (mount("cgroup", t->root, "cgroup", 0, "cpu") != 0)
			rm_log_warn("failed to mount the cgroup v1 cpu hierarchy at '%s': %s", t->root,
				    strerror(errno));
	}
	if (access(path, F_OK) != 0) {
		rm_log_error("no cgroup v1 cpu controller at '%s' (%s): per-thread throttling needs "
			     "it (cgroup v2 has no per-thread absolute cap)", t->root, path);
		rv = RM_ENOTSUP;
		goto fail;
	}
	col_thr_reclaim(t);
	snprintf(t->parent, sizeof(t->parent), "%s/rametr-throttle-%d", t->root, (int)getpid());
	if (mkdir(t->parent, 0755) != 0 && errno != EEXIST) {
		rv = errno == EACCES || errno == EPERM ? RM_EPERM : RM_EIO;
		rm_log_error("failed to create cgroup '%s': %s", t->parent, strerror(errno));
		goto fail;
	}
	libbpf_set_print(col_thr_libbpf_print);
	if (!(t->skel = throttle_bpf__open())) {
		rm_log_error("failed to open the throttle BPF program: %s", strerror(errno));
		rv = RM_EBPF;
		goto fail;
	}
	t->skel->rodata->netns_ino = cfg->netns_ino;
	t->skel->rodata->release_at_send = cfg->release_at_send ? 1 : 0;
	if (throttle_bpf__load(t->skel) != 0) {
		rm_log_error("failed to load the throttle BPF program: %s", strerror(errno));
		rv = RM_EBPF;
		goto fail;
	}
	col_slots_init(&t->tab, col_slots_put_map, (void *)(intptr_t)bpf_map__fd(t->skel->maps.matches));
	if (!(t->rb = ring_buffer__new(bpf_map__fd(t->skel->maps.thr_events), col_thr_on_event, t, NULL))) {
		rm_log_error("failed to open the throttle ring buffer: %s", strerror(errno));
		rv = RM_EBPF;
		goto fail;
	}
	if (pthread_create(&t->th, NULL, col_thr_main, t) != 0) {
		rv = RM_ENOMEM;
		goto fail;
	}
	t->th_started = 1;
	*out = t;
	return RM_OK;
fail:
	col_throttle_close(t);
	return rv;
}

void col_throttle_stats(struct col_throttle *t, struct col_throttle_stats *out)
{
	pthread_mutex_lock(&t->mu);
	*out = t->st;
	pthread_mutex_unlock(&t->mu);
}

void col_throttle_group(struct col_throttle *t, const char *ce, char *buf, size_t len)
{
	uint32_t i;

	if (len)
		buf[0] = '\0';
	pthread_mutex_lock(&t->mu);
	if ((i = col_slots_find(&t->tab, ce)) != 0)
		snprintf(buf, len, "%s", t->grp[i].dir);
	pthread_mutex_unlock(&t->mu);
}

void col_throttle_close(struct col_throttle *t)
{
	if (!t)
		return;
	t->stop = 1;
	if (t->th_started)
		pthread_join(t->th, NULL);
	if (t->skel) {
		pthread_mutex_lock(&t->mu);
		t->st.released += col_slots_release_all(&t->tab, col_thr_release, t);
		pthread_mutex_unlock(&t->mu);
	}
	col_thr_detach(t);
	if (t->st.enters || t->st.moves)
		rm_log_info("per-thread throttling: %" PRIu64 " enters, %" PRIu64 " leaves, %" PRIu64
			    " moves (%" PRIu64 " failed: thread gone or not movable), kernel event to move "
			    "done %.2f ms mean, %.2f ms max",
			    t->st.enters, t->st.leaves, t->st.moves, t->st.move_fail,
			    t->st.moves ? (double)t->st.move_ns_sum / (double)t->st.moves / 1e6 : 0.0,
			    (double)t->st.move_ns_max / 1e6);
	ring_buffer__free(t->rb);
	throttle_bpf__destroy(t->skel);
	if (t->parent[0] && rmdir(t->parent) != 0 && errno != ENOENT)
		rm_log_warn("failed to remove cgroup '%s': %s", t->parent, strerror(errno));
	pthread_mutex_destroy(&t->mu);
	free(t->moved);
	free(t);
}
