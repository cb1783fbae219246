/*
 * col_probe.c - kernel feature probes for the eBPF backend (see col_probe.h).
 * Owns no state; every probe is cheap and can be called again.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "col_probe.h"
#include "rm_err.h"
#include "banned.h"

#define TRACEFS_MAGIC_NR 0x74726163
#define COL_INO_BATCH 1024u       /* the kernel's LAST_INO_BATCH */
#define COL_INO_TRIES (2 * 1024) /* enough for one CPU's batch to run out, twice */

int col_probe_ebpf(char *why, size_t whylen)
{
	struct statfs sfs;

	if (geteuid() != 0) {
		snprintf(why, whylen, "the eBPF backend needs root (CAP_BPF and CAP_PERFMON)");
		return RM_EPERM;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		snprintf(why, whylen, "kernel BTF missing at '/sys/kernel/btf/vmlinux': %s", strerror(errno));
		return RM_ENOTSUP;
	}
	if (statfs("/sys/kernel/tracing", &sfs) != 0 || sfs.f_type != TRACEFS_MAGIC_NR) {
		snprintf(why, whylen,
			 "tracefs is not mounted at '/sys/kernel/tracing': run 'mount -t tracefs nodev /sys/kernel/tracing'");
		return RM_ENOTSUP;
	}
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) != 1) {
		snprintf(why, whylen, "kernel has no BPF ring buffer");
		return RM_ENOTSUP;
	}
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) != 1) {
		snprintf(why, whylen, "kernel has no BPF task storage");
		return RM_ENOTSUP;
	}
	return RM_OK;
}

int col_probe_tp_btf(const char *name)
{
	struct btf *btf = btf__load_vmlinux_btf();
	char tname[128];
	int found;

	if (!btf)
		return 0;
	snprintf(tname, sizeof(tname), "btf_trace_%s", name);
	found = btf__find_by_name_kind(btf, tname, BTF_KIND_TYPEDEF) > 0;
	btf__free(btf);
	return found;
}

/* The inode number of a new unix socket, closed again; 0 on failure. */
static uint32_t col_probe_ino(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct stat st;
	int ok;

	if (fd < 0)
		return 0;
	ok = fstat(fd, &st) == 0;
	close(fd);
	return ok ? (uint32_t)st.st_ino : 0;
}

/*
 * Sockets on this CPU until one opens a batch taken at or after `from` (0:
 * any fresh batch). Returns the first number of that batch, or of the
 * batch in use when it already is from `from` on; 0 when none showed.
 */
static uint32_t col_probe_drain(uint32_t from)
{
	int i;

	for (i = 0; i < COL_INO_TRIES; i++) {
		uint32_t ino = col_probe_ino();

		if (!ino)
			return 0;
		/* the batch in use was taken after `from`: nothing old left here */
		if (from && (uint32_t)(ino - from) < 0x80000000u)
			return ino;
		/* the first number of a batch, just taken from the shared counter:
		 * every number handed out before it is smaller */
		if (ino % COL_INO_BATCH == 1)
			return ino;
	}
	return 0;
}

uint32_t col_probe_fresh_ino(void)
{
	cpu_set_t all, one;
	uint32_t from = 0;
	int cpu;

	if (sched_getaffinity(0, sizeof(all), &all) != 0)
		return col_probe_drain(0);
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		uint32_t got;

		if (!CPU_ISSET(cpu, &all))
			continue;
		/* a CPU we may not run on keeps its batch: its sockets are judged old */
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (sched_setaffinity(0, sizeof(one), &one) != 0)
			continue;
		/* the first fresh batch is the smallest taken after this call began */
		if (!(got = col_probe_drain(from)) || from)
			continue;
		from = got;
	}
	if (sched_setaffinity(0, sizeof(all), &all) != 0)
		return 0;
	return from;
}
