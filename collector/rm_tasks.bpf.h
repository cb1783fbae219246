/*
 * rm_tasks.bpf.h - the socket hooks' per-thread state as a BPF map
 * (struct rm_task in task storage), defined once for the two programs that
 * use it: rametr.bpf.c owns it; golabel.bpf.c declares the same map, whose
 * fd its loader reuses (col_golabel_cfg.tasks_fd), to add its samples to
 * rm_task.smp. The kernel refuses a reused fd whose definition differs.
 */
#ifndef RM_TASKS_BPF_H
#define RM_TASKS_BPF_H

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct rm_task);
} tasks SEC(".maps");

#endif
