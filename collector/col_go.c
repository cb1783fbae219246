/*
 * col_go.c - the scan of /proc for Go processes to follow (col_go.h): which
 * processes run which binary, which binaries are Go programs that can be
 * followed, and which processes the caller has attached to.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "col_go.h"
#include "rm_err.h"
#include "banned.h"

struct col_go_bin {
	dev_t dev;
	ino_t ino;
	int ok;             /* a Go program that can be followed: g is valid */
	struct col_gort g;
};

struct col_go_proc {
	uint32_t pid;
	dev_t dev;
	ino_t ino;
	int alive;          /* seen by the current scan */
	void *handle;
};

struct col_go {
	char root[64];
	uint32_t netns_ino;
	struct col_go_ops ops;
	struct col_go_bin bins[COL_GO_MAX_BINS];
	size_t nbins;
	struct col_go_proc procs[COL_GO_MAX_PROCS];
	size_t nprocs;
	int full_logged;
	struct col_go_stats stats;
};

int col_go_new(struct col_go **out, const char *proc_root, uint32_t netns_ino, const struct col_go_ops *ops)
{
	struct col_go *s;

	*out = NULL;
	if (strlen(proc_root) >= sizeof(s->root))
		return RM_EINVAL;
	if (!(s = calloc(1, sizeof(*s))))
		return RM_ENOMEM;
	snprintf(s->root, sizeof(s->root), "%s", proc_root);
	s->netns_ino = netns_ino;
	s->ops = *ops;
	*out = s;
	return RM_OK;
}

/* Go's register ABI (the *g in RAX) since go1.17 on amd64; a version not known is taken to have it. */
static int has_reg_abi(const char *version)
{
	int minor;

	if (!version[0])
		return 1;
	return sscanf(version, "go1.%d", &minor) == 1 && minor >= 17;
}

/* The binary (dev, ino) of exe, inspected once; NULL if the cache had no room. */
static const struct col_go_bin *bin_get(struct col_go *s, const char *exe, dev_t dev, ino_t ino)
{
	struct col_go_bin *b;
	size_t i;
	int rv;

	for (i = 0; i < s->nbins; i++)
		if (s->bins[i].dev == dev && s->bins[i].ino == ino)
			return &s->bins[i];
	if (s->nbins == COL_GO_MAX_BINS)
		s->nbins = 0; /* start over: a binary met again is inspected again */
	b = &s->bins[s->nbins++];
	memset(b, 0, sizeof(*b));
	b->dev = dev;
	b->ino = ino;
	rv = col_gort_inspect(exe, &b->g);
	b->ok = rv == RM_OK && has_reg_abi(b->g.version);
	if (rv == RM_ENOTSUP || (rv == RM_OK && !b->ok)) {
		s->stats.unfollowable++;
		rm_log_warn("'%s' is a Go program (%s) whose goroutines cannot be followed (%s): thread segments",
			    exe, b->g.version[0] ? b->g.version : "version unknown",
			    rv == RM_ENOTSUP ? "no symbols or no DWARF" : "before go1.17");
	}
	return b;
}

/* Is process pid in the watched network namespace? */
static int in_netns(const struct col_go *s, const char *pid)
{
	char path[400];
	struct stat st;

	if (!s->netns_ino)
		return 1;
	snprintf(path, sizeof(path), "%s/%s/ns/net", s->root, pid);
	return stat(path, &st) == 0 && (uint32_t)st.st_ino == s->netns_ino;
}

static struct col_go_proc *proc_find(struct col_go *s, uint32_t pid)
{
	size_t i;

	for (i = 0; i < s->nprocs; i++)
		if (s->procs[i].pid == pid)
			return &s->procs[i];
	return NULL;
}

/* Process pid (name, its /proc entry) running binary (dev, ino) at exe: attach if it is a Go program to follow. */
static void proc_new(struct col_go *s, uint32_t pid, const char *name, const char *exe, const struct stat *st)
{
	const struct col_go_bin *b = bin_get(s, exe, st->st_dev, st->st_ino);
	struct col_go_proc *p;
	void *h = NULL;

	if (!b || !b->ok || !in_netns(s, name))
		return;
	if (s->nprocs == COL_GO_MAX_PROCS) {
		if (!s->full_logged)
			rm_log_warn("following the goroutines of %d Go processes already: process %u keeps thread segments",
				    COL_GO_MAX_PROCS, pid);
		s->full_logged = 1;
		return;
	}
	/* a process that cannot be attached to is remembered too (no handle): not tried again */
	if (s->ops.attach(s->ops.arg, pid, exe, &b->g, &h) != RM_OK)
		h = NULL;
	p = &s->procs[s->nprocs++];
	p->pid = pid;
	p->dev = st->st_dev;
	p->ino = st->st_ino;
	p->alive = 1;
	p->handle = h;
	if (!h)
		return;
	s->stats.attached++;
	rm_log_info("following the goroutines of Go process %u (%s)", pid, b->g.version[0] ? b->g.version : "go");
}

int col_go_scan(struct col_go *s)
{
	struct dirent *de;
	size_t i;
	DIR *d;

	if (!(d = opendir(s->root))) {
		rm_log_error("failed to open '%s': %s", s->root, strerror(errno));
		return RM_EIO;
	}
	for (i = 0; i < s->nprocs; i++)
		s->procs[i].alive = 0;
	while ((de = readdir(d)) != NULL) {
		char exe[400], *end;
		struct col_go_proc *p;
		struct stat st;
		unsigned long pid = strtoul(de->d_name, &end, 10);

		if (*end || !pid || pid > UINT32_MAX)
			continue;
		snprintf(exe, sizeof(exe), "%s/%s/exe", s->root, de->d_name);
		if (stat(exe, &st) != 0)
			continue; /* a kernel thread, or gone */
		if ((p = proc_find(s, (uint32_t)pid)) != NULL && p->dev == st.st_dev && p->ino == st.st_ino) {
			p->alive = 1;
			continue;
		}
		if (!p)
			proc_new(s, (uint32_t)pid, de->d_name, exe, &st);
		/* else: it executed another binary; detached below, looked at again next scan */
	}
	closedir(d);
	s->stats.followed = 0;
	for (i = 0; i < s->nprocs;) {
		if (s->procs[i].alive) {
			s->stats.followed += s->procs[i].handle != NULL;
			i++;
			continue;
		}
		if (s->procs[i].handle)
			s->ops.detach(s->ops.arg, s->procs[i].handle);
		s->procs[i] = s->procs[--s->nprocs];
	}
	return RM_OK;
}

void col_go_get_stats(const struct col_go *s, struct col_go_stats *out)
{
	*out = s->stats;
}

void col_go_free(struct col_go *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->nprocs; i++)
		if (s->procs[i].handle)
			s->ops.detach(s->ops.arg, s->procs[i].handle);
	free(s);
}
