/*
 * col_probe.c - kernel feature probes for the eBPF backend (see col_probe.h).
 * Owns no state; every probe is cheap and can be called again.
 */
#include <errno.h>
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
#define COL_INO_TRIES (16 * 1024) /* enough for every CPU's batch to run out, twice */

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

uint32_t col_probe_fresh_ino(void)
{
	int i;

	for (i = 0; i < COL_INO_TRIES; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct stat st;
		int ok;

		if (fd < 0)
			return 0;
		ok = fstat(fd, &st) == 0;
		close(fd);
		if (!ok)
			return 0;
		/* the first number of a batch, just taken from the shared counter:
		 * every number handed out before it is smaller */
		if ((uint32_t)st.st_ino % COL_INO_BATCH == 1)
			return (uint32_t)st.st_ino;
	}
	return 0;
}
