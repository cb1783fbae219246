/*
 * col_progstat.h - the kernel's run statistics of every loaded program of
 * a libbpf object, handed to a function one program at a time (for the
 * benchmarks: the kernel counts only while BPF run-time statistics are
 * enabled, bpf_enable_stats).
 */
#ifndef COL_PROGSTAT_H
#define COL_PROGSTAT_H

#include <stdint.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

/* Told of one program: its name, the kernel's id of it, its runs and their run time. */
typedef void (*col_progstat_fn)(void *arg, const char *name, uint32_t id, uint64_t runs, uint64_t run_ns);

/* Calls fn for every loaded program of obj whose statistics can be read; returns how many. */
static inline int col_progstat_each(struct bpf_object *obj, col_progstat_fn fn, void *arg)
{
	struct bpf_program *prog;
	int n = 0;

	bpf_object__for_each_program(prog, obj) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (fd < 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
			continue;
		fn(arg, bpf_program__name(prog), info.id, info.run_cnt, info.run_time_ns);
		n++;
	}
	return n;
}

#endif
