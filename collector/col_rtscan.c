/*
 * col_rtscan.c - keeps the kernel's map of processes that run a managed
 * runtime in step with /proc (col_rtscan.h). Owns the scanner's tables:
 * the runtimes in the map (sorted process ids) and the verdicts on
 * executables.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <bpf/bpf.h>

#include "col_gort.h"
#include "col_jvm.h"
#include "col_rtscan.h"
#include "rametr.h"
#include "rm_err.h"
#include "banned.h"

#define COL_RTSCAN_EXES 256 /* verdicts on executables kept */

struct col_rtscan_exe {
	dev_t dev;
	ino_t ino;
	int used;
	uint32_t kind; /* RM_RT_* */
};

/* A process in the map, its runtime's kind as judged, the map's value and its executable. */
struct col_rtscan_pid {
	uint32_t pid, kind;
	uint32_t mapped; /* the kind the map holds: kind, or the change function's finer one */
	dev_t dev;
	ino_t ino;
};

struct col_rtscan {
	char root[256];
	int map_fd;
	uint32_t netns_ino;
	struct col_rtscan_pid *pids; /* in the map, sorted by pid */
	size_t npids;
	struct col_rtscan_exe exe[COL_RTSCAN_EXES];
	size_t exe_next; /* the slot the next verdict replaces */
	int full_logged;
	col_rtscan_fn on_change;
	void *on_change_arg;
};

int col_rtscan_open(struct col_rtscan **out, const char *proc_root, int map_fd, uint32_t netns_ino)
{
	struct col_rtscan *s;

	*out = NULL;
	if (!proc_root || strlen(proc_root) >= sizeof(s->root) || map_fd < 0)
		return RM_EINVAL;
	if (!(s = calloc(1, sizeof(*s))))
		return RM_ENOMEM;
	snprintf(s->root, sizeof(s->root), "%s", proc_root);
	s->map_fd = map_fd;
	s->netns_ino = netns_ino;
	*out = s;
	return RM_OK;
}

void col_rtscan_on_change(struct col_rtscan *s, col_rtscan_fn fn, void *arg)
{
	s->on_change = fn;
	s->on_change_arg = arg;
}

void col_rtscan_close(struct col_rtscan *s)
{
	if (!s)
		return;
	free(s->pids);
	free(s);
}

/* The managed runtime the executable at path (whose file is st) runs: RM_RT_*. Judged once per (device, inode). */
static uint32_t col_rtscan_judge(struct col_rtscan *s, const char *path, const struct stat *st)
{
	struct col_rtscan_exe *x;
	const char *kind = NULL;
	size_t i;

	for (i = 0; i < COL_RTSCAN_EXES; i++)
		if (s->exe[i].used && s->exe[i].dev == st->st_dev && s->exe[i].ino == st->st_ino)
			return s->exe[i].kind;
	x = &s->exe[s->exe_next];
	s->exe_next = (s->exe_next + 1) % COL_RTSCAN_EXES;
	x->used = 1;
	x->dev = st->st_dev;
	x->ino = st->st_ino;
	x->kind = RM_RT_NONE;
	if (col_gort_is_go(path) == RM_OK) {
		kind = "a Go program";
		x->kind = RM_RT_GO;
	} else if (col_jvm_is_jvm(path) == RM_OK) {
		kind = "a Java virtual machine";
		x->kind = RM_RT_JVM;
	}
	if (kind)
		rm_log_info("recognised %s (%s): its threads' CPU outside requests is reported as the runtime's", kind,
			    path);
	return x->kind;
}

/*
 * The managed runtime process pid runs (RM_RT_*), RM_RT_NONE if it is not
 * one to keep in the map; its executable's identity into p.
 */
static uint32_t col_rtscan_kind(struct col_rtscan *s, const char *pid, struct col_rtscan_pid *p)
{
	char path[320];
	struct stat st;

	if (s->netns_ino) {
		snprintf(path, sizeof(path), "%s/%s/ns/net", s->root, pid);
		if (stat(path, &st) != 0 || (uint32_t)st.st_ino != s->netns_ino)
			return 0;
	}
	snprintf(path, sizeof(path), "%s/%s/exe", s->root, pid);
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return 0; /* a kernel thread, gone, or not ours to read */
	p->dev = st.st_dev;
	p->ino = st.st_ino;
	return col_rtscan_judge(s, path, &st);
}

static int col_rtscan_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct col_rtscan_pid *)a)->pid, y = ((const struct col_rtscan_pid *)b)->pid;

	return x < y ? -1 : x > y;
}

/*
 * Tells the change function, if any, that pid went from kind before (as
 * the map held it) to after (as judged); the kind the map is to hold.
 */
static uint32_t col_rtscan_tell(struct col_rtscan *s, uint32_t pid, uint32_t before, uint32_t after)
{
	char exe[320];
	uint32_t kind;

	if (!s->on_change)
		return after;
	snprintf(exe, sizeof(exe), "%s/%u/exe", s->root, pid);
	kind = s->on_change(s->on_change_arg, pid, before, after, exe);
	return after == RM_RT_NONE || kind == RM_RT_NONE ? after : kind;
}

/* Puts p in the map (pid -> its kind). 0, or -1 if the map refused it (logged once). */
static int col_rtscan_put(struct col_rtscan *s, const struct col_rtscan_pid *p)
{
	if (bpf_map_update_elem(s->map_fd, &p->pid, &p->mapped, BPF_ANY) == 0)
		return 0;
	if (!s->full_logged)
		rm_log_warn("failed to add process %u to the runtimes map: %s; its CPU outside requests stays "
			    "'unsegmented'", p->pid, strerror(errno));
	s->full_logged = 1;
	return -1;
}

int col_rtscan_run(struct col_rtscan *s, uint32_t *n)
{
	struct col_rtscan_pid *now = NULL, one;
	size_t nnow = 0, cap = 0, i, j;
	struct dirent *d;
	uint32_t kind;
	DIR *dir;

	if (!(dir = opendir(s->root))) {
		rm_log_error("failed to open '%s': %s", s->root, strerror(errno));
		return RM_EIO;
	}
	while ((d = readdir(dir)) != NULL) {
		char *end;
		unsigned long pid = strtoul(d->d_name, &end, 10);

		if (*end || !pid || pid > UINT32_MAX || !(kind = col_rtscan_kind(s, d->d_name, &one)))
			continue;
		if (nnow == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct col_rtscan_pid *p = realloc(now, ncap * sizeof(*p));

			if (!p) {
				closedir(dir);
				free(now);
				return RM_ENOMEM;
			}
			now = p;
			cap = ncap;
		}
		one.pid = (uint32_t)pid;
		one.kind = kind;
		one.mapped = kind;
		now[nnow++] = one;
	}
	closedir(dir);
	if (nnow)
		qsort(now, nnow, sizeof(*now), col_rtscan_cmp);
	/* the two sorted lists: remove what left, add what came, rewrite a process that exec'd another executable */
	for (i = j = 0; i < s->npids || j < nnow;) {
		if (j == nnow || (i < s->npids && s->pids[i].pid < now[j].pid)) {
			bpf_map_delete_elem(s->map_fd, &s->pids[i].pid);
			col_rtscan_tell(s, s->pids[i].pid, s->pids[i].mapped, RM_RT_NONE);
			i++;
		} else if (i == s->npids || now[j].pid < s->pids[i].pid || now[j].kind != s->pids[i].kind ||
			   now[j].dev != s->pids[i].dev || now[j].ino != s->pids[i].ino) {
			int same = i < s->npids && now[j].pid == s->pids[i].pid;
			uint32_t before = same ? s->pids[i].mapped : RM_RT_NONE;

			now[j].mapped = col_rtscan_tell(s, now[j].pid, before, now[j].kind);
			if (col_rtscan_put(s, &now[j]) != 0) {
				col_rtscan_tell(s, now[j].pid, now[j].mapped, RM_RT_NONE);
				if (same) {
					bpf_map_delete_elem(s->map_fd, &s->pids[i].pid);
					i++;
				}
				memmove(&now[j], &now[j + 1], (nnow - j - 1) * sizeof(*now));
				nnow--;
				continue;
			}
			i += same;
			j++;
		} else {
			now[j].mapped = s->pids[i].mapped;
			i++;
			j++;
		}
	}
	free(s->pids);
	s->pids = now;
	s->npids = nnow;
	if (n)
		*n = (uint32_t)nnow;
	return RM_OK;
}
