/*
 * golabel.h - what golabel.bpf.c and bench_golabel.c share: a prototype
 * that labels a Go server's goroutines with the tenant whose connection they
 * read (the peer's IPv4 address), passes the label on to the goroutines they
 * create, and splits the server's CPU by sampling which goroutine runs
 * (docs/grpc.md, *Labels on goroutines, split by sampling*). __u32/__u64
 * only.
 */
#ifndef GOLABEL_H
#define GOLABEL_H

/* Does readying a goroutine (runtime.ready's runqput, from a running
 * goroutine) pass the readier's label on (const volatile gl_ready)? */
enum gl_ready {
	GL_READY_OFF = 0,        /* never: labels come from reads and creation only */
	GL_READY_UNLABELLED = 1, /* to a goroutine that has no label yet */
	GL_READY_ALL = 2,        /* always, replacing the goroutine's label */
};

#define GL_LABELS_MAX 256 /* labels counted apart (peer addresses); samples of more are in s_*_lab only */

/* Per-CPU counters (map counts, one entry); the loader sums the CPUs. */
struct gl_counts {
	__u64 samples;      /* samples on the server's threads */
	__u64 s_user_lab;   /* ... on a goroutine (g == m.curg) that has a label */
	__u64 s_user_unlab; /* ... on a goroutine without a label */
	__u64 s_g0_lab;     /* ... on the system stack (g == m.g0) for a labelled m.curg */
	__u64 s_g0_unlab;   /* ... on the system stack for an unlabelled m.curg */
	__u64 s_g0_idle;    /* ... on the system stack with no m.curg (scheduler, sysmon, idle GC) */
	__u64 s_other;      /* ... on neither (the signal stack) */
	__u64 s_bad;        /* ... where the TLS slot, g or m could not be read */
	__u64 reads;        /* TCP receives of the server that labelled their goroutine */
	__u64 reads_bad;    /* ... whose goroutine could not be read */
	__u64 newprocs;     /* goroutines created (runtime.newproc1, or newproc's call of runqput) */
	__u64 inherits;     /* ... given their creator's label */
	__u64 unlabels;     /* ... of an unlabelled creator: a reused g's old label cleared */
	__u64 runqputs;     /* runtime.runqput entered */
	__u64 readies;      /* ... with no creation pending on the thread and a goroutine running (m.curg) */
	__u64 ready_labels; /* ... of them, the readier's label passed on (gl_ready) */
};

/* Samples of one label (map label_samples, per CPU, keyed by the label). */
struct gl_label_samples {
	__u64 user; /* on the label's goroutines */
	__u64 g0;   /* on the system stack for one of them */
};

#endif
