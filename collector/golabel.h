/*
 * golabel.h - what golabel.bpf.c and its loader (col_golabel.c) share:
 * labels carried on the goroutines of watched Go processes (the socket a
 * goroutine last received from, by cookie, passed on to the goroutines it
 * creates) and a cpu-clock sampler's counts per window and label. __u32 and
 * __u64 only.
 */
#ifndef GOLABEL_H
#define GOLABEL_H

/* The label of samples on no goroutine: the thread on its system stack (g0)
 * with no m.curg (the scheduler, sysmon, an idle or GC worker thread), or a
 * thread whose goroutine could not be read (not yet a Go thread). Label 0
 * is a user goroutine that has none (it never received from a TCP socket
 * and neither did its creator). */
#define GOLABEL_IDLE 0xffffffffffffffffULL

/*
 * Bounds (the maps are preallocated):
 *  - GOLABEL_PIDS_MAX watched processes;
 *  - GOLABEL_LABELS_MAX labelled goroutines of all of them at once (an LRU:
 *    the least recently labelled or read goroutine loses its label first;
 *    a goroutine that ended keeps its entry, void, until its *g is
 *    labelled again or evicted), 32 bytes of key and value, ~5.5 MiB with
 *    the hash's overhead;
 *  - GOLABEL_COUNTS_MAX (window, process, label) counts not yet drained:
 *    at two windows in the map (the current one and the one being drained)
 *    that is 8192 labels with samples per window over all processes; a
 *    sample that finds the map full is counted in GOLABEL_ST_LOST instead
 *    (~1.3 MiB).
 */
#define GOLABEL_PIDS_MAX 1024
/* The watched processes' ids as bits (tgid modulo this, a power of two; the .bss array pid_bits, set
 * by the loader): the programs that run for every thread of the node leave at one load when a
 * thread's process cannot be watched, before the pids map's lookup (512 bytes). */
#define GOLABEL_PID_BITS 4096
/* A label's value: the socket's cookie, with this bit set when the goroutine took it from another
 * (its creator, or the goroutine that readied it) rather than from a receive of its own. */
#define GOLABEL_INHERITED 0x8000000000000000ULL
/* ... and this one too when it took it from a send on a connection within the node (golabel_send):
 * such a label does not travel to the connection's receiving end. */
#define GOLABEL_SENT 0x4000000000000000ULL
#define GOLABEL_LABELS_MAX 65536
#define GOLABEL_COUNTS_MAX 16384
/* TCP connections between two ends on this node whose last sender's label is kept (map origins, an
 * LRU: the connection written least recently loses its entry first), ~60 bytes each with the hash's
 * overhead: ~250 KiB. */
#define GOLABEL_ORIGINS_MAX 4096

/* A watched process (map pids, keyed by tgid): where its Go build keeps the
 * running goroutine (col_gort_sched). Whether the thread is on its system
 * stack (g == m.g0) does not matter: samples go to m.curg either way. */
struct golabel_proc {
	__s64 g_tls_off;  /* the running *g's slot from the thread's fsbase */
	__u32 g_m_off;    /* runtime.g.m */
	__u32 m_curg_off; /* runtime.m.curg (0 while the thread runs no goroutine) */
	__u32 g_startpc_off; /* runtime.g.startpc */
	__u32 bare_sends; /* golabel_recv adds: receives of the process's own sends on a connection within
			   * the node by a goroutine without a label (the receiver learns nothing: the loader
			   * then follows hand-offs) */
	__u32 g_goid_off; /* runtime.g.goid: a label is the goroutine's only while its g holds that id */
	__u32 label_sends; /* nonzero: a send by a goroutine without a label labels it (golabel_send); set
			    * with the creation uprobe, when the process's goroutines work unlabelled */
	__u64 rt_lo, rt_hi; /* a goroutine started on a function in [rt_lo, rt_hi) is the runtime's: it
			     * takes no label from its creator (0, 0: no such range known) */
};

/* A goroutine (map labels): its process and its *g. */
struct golabel_gkey {
	__u32 tgid;
	__u32 pad;
	__u64 g;
};

/*
 * A goroutine's label (map labels' value): the socket's cookie and the id
 * (runtime.g.goid) of the goroutine that held the g when it was labelled.
 * The runtime reuses a dead goroutine's g for a new one, with a new id, so
 * a label whose goid is not the g's current one is no label: nothing has
 * to clear it when a goroutine is created.
 */
struct golabel_label {
	__u64 cookie;
	__u64 goid;
};

/*
 * A TCP connection whose ends are both on this node (a loopback address, or
 * the same address at both ends), as its receiving end sees it (map
 * origins, value struct golabel_origin). IPv4 addresses in laddr[0] and
 * raddr[0].
 */
struct golabel_okey {
	__u32 laddr[4]; /* the receiving end's address */
	__u32 raddr[4]; /* the sending end's */
	__u32 lport, rport;
	__u32 netns;    /* the network namespace's inode */
	__u32 family;
};

/* Who last sent on such a connection: the goroutine's label (0: it had none) and its process. */
struct golabel_origin {
	__u64 label;
	__u32 tgid;
	__u32 pad;
};

/* A count (map counts, value __u64 samples): window, process, label. */
struct golabel_ckey {
	__u64 win;    /* (CLOCK_MONOTONIC + offset_ns) / window_ns */
	__u64 cookie; /* the label: a socket cookie, 0 or GOLABEL_IDLE */
	__u32 tgid;
	__u32 pad;
};

/* Per-CPU statistics (map stats, an array of __u64 indexed by these). */
enum golabel_stat {
	GOLABEL_ST_SAMPLES = 0, /* samples on a watched process's threads */
	GOLABEL_ST_LOST,        /* ... not counted: the counts map was full */
	GOLABEL_ST_UNREAD,      /* ... whose goroutine could not be read (counted as GOLABEL_IDLE) */
	GOLABEL_ST_READS,       /* TCP receives that labelled their goroutine */
	GOLABEL_ST_READS_BAD,   /* ... whose goroutine could not be read */
	GOLABEL_ST_NEWG,        /* goroutines created in a watched process */
	GOLABEL_ST_INHERIT,     /* ... that took their creator's label */
	GOLABEL_ST_HANDED,      /* goroutines readied by a labelled one that took its label (a hand-off) */
	GOLABEL_ST_ORIGIN,      /* receives on a connection of a process to itself that took its sender's label */
	GOLABEL_ST_SENT,        /* sends by a goroutine without a label, which took the connection's */
	GOLABEL_ST_COUNT
};

#endif
