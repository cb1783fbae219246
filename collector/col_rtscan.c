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
#include "rm_err.h"
#include "banned.h"

#define COL_RTSCAN_EXES 256 /* verdicts on executables kept */

struct col_rtscan_exe {
	dev_t dev;
	ino_t ino;
	int used, is_rt;
};

struct col_rtscan {
	char root[256];
	int map_fd;
	uint32_t netns_ino;
	uint32_t *pids;  /* in the map, sorted */
	size_t npids;
	struct col_rtscan_exe exe[COL_RTSCAN_EXES];
	size_t exe_next; /* the slot the next verdict replaces */
	int full_logged;
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

void col_rtscan_close(struct col_rtscan *s)
{
	if (!s)
		return;
	free(s->pids);
	free(s);
}

/* Is the executable at path (whose file is st) a managed runtime? Judged once per (device, inode). */
static int col_rtscan_judge(struct col_rtscan *s, const char *path, const struct stat *st)
{
	struct col_rtscan_exe *x;
	const char *kind = NULL;
	size_t i;

	for (i = 0; i < COL_RTSCAN_EXES; i++)
		if (s->exe[i].used && s->exe[i].dev == st->st_dev && s->exe[i].ino == st->st_ino)
			return s->exe[i].is_rt;
	x = &s->exe[s->exe_next];
	s->exe_next = (s->exe_next + 1) % COL_RTSCAN_EXES;
	x->used = 1;
	x->dev = st->st_dev;
	x->ino = st->st_ino;
	if (col_gort_is_go(path) == RM_OK)
		kind = "a Go program";
	else if (col_jvm_is_jvm(path) == RM_OK)
		kind = "a Java virtual machine";
	x->is_rt = kind != NULL;
	if (kind)
		rm_log_info("recognised %s (%s): its threads' CPU outside requests is reported as the runtime's", kind,
			    path);
	return x->is_rt;
}

/* Is process pid one to keep in the map? */
static int col_rtscan_is_rt(struct col_rtscan *s, const char *pid)
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
	return col_rtscan_judge(s, path, &st);
}

static int col_rtscan_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int col_rtscan_run(struct col_rtscan *s, uint32_t *n)
{
	uint32_t *now = NULL, one = 1;
	size_t nnow = 0, cap = 0, i, j;
	struct dirent *d;
	DIR *dir;

	if (!(dir = opendir(s->root))) {
		rm_log_error("failed to open '%s': %s", s->root, strerror(errno));
		return RM_EIO;
	}
	while ((d = readdir(dir)) != NULL) {
		char *end;
		unsigned long pid = strtoul(d->d_name, &end, 10);

		if (*end || !pid || pid > UINT32_MAX || !col_rtscan_is_rt(s, d->d_name))
			continue;
		if (nnow == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			uint32_t *p = realloc(now, ncap * sizeof(*p));

			if (!p) {
				closedir(dir);
				free(now);
				return RM_ENOMEM;
			}
			now = p;
			cap = ncap;
		}
		now[nnow++] = (uint32_t)pid;
	}
	closedir(dir);
	if (nnow)
		qsort(now, nnow, sizeof(*now), col_rtscan_cmp);
	/* the two sorted lists: remove what left, add what came */
	for (i = j = 0; i < s->npids || j < nnow;) {
		if (j == nnow || (i < s->npids && s->pids[i] < now[j])) {
			bpf_map_delete_elem(s->map_fd, &s->pids[i]);
			i++;
		} else if (i == s->npids || now[j] < s->pids[i]) {
			if (bpf_map_update_elem(s->map_fd, &now[j], &one, BPF_ANY) != 0) {
				if (!s->full_logged)
					rm_log_warn("failed to add process %u to the runtimes map: %s; its CPU outside "
						    "requests stays 'unsegmented'", now[j], strerror(errno));
				s->full_logged = 1;
				memmove(&now[j], &now[j + 1], (nnow - j - 1) * sizeof(*now));
				nnow--;
				continue;
			}
			j++;
		} else {
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
