/*
 * rm_part_def.h - what a segment part and a window's totals are, written
 * down once: the part flags, the address families, and the field tables of
 * rametr.proto's SegmentPart, Tuple and WindowTotals, from which the kernel's
 * struct rm_wintot (rametr.h), the wire structs and their encoder, decoders
 * and check (rm_part.h, rm_wire.c) are generated.
 *
 * Macros only, no includes: the BPF program includes it too (rametr.h).
 *
 * A table lists X(number, member, kind[, rule]) in field-number order (the
 * order protobuf-c writes them). Kinds: U64 / U32 varints, COMM the thread
 * name (string), TUPLE a nested Tuple, FAMILY a tuple's address family
 * (written as 0 unless one of RM_AF_*), ADDR an address (bytes: 4 or 16 by
 * family, none for the others), K / N a window total the kernel keeps per CPU / one only the
 * collector knows. Rules: ANY, NONZERO, NS (at most RM_WIRE_ABSURD_NS).
 */
#ifndef RM_PART_DEF_H
#define RM_PART_DEF_H

#define RM_COMM_LEN 16

/* Part flags (SegmentPart.flags). */
#define RM_PF_START 0x1     /* first part of this segment on this thread */
#define RM_PF_END 0x2       /* the segment was closed by a send (out tuple valid) */
#define RM_PF_ASSOC 0x4     /* work done after the send, still associated: I/O, and the CPU of the
			       request's tail (segmenter.h) */
#define RM_PF_EXIT 0x8      /* the thread exited */
#define RM_PF_INHERIT 0x10  /* thread inherited the segment at fork/clone */
#define RM_PF_RECV 0x20     /* closed by a recv on another socket */
#define RM_PF_OUT_SEQ 0x40  /* out_seq_* valid (TCP) */
#define RM_PF_IN_SEQ 0x80   /* in_seq_* valid (TCP) */
#define RM_PF_SEQ_SUSPECT 0x100 /* a byte range overlapped or left a gap: not trusted */
#define RM_PF_DOMAIN 0x200  /* Xen backend: part describes a domain's vCPU */
#define RM_PF_DRIVER 0x400  /* Xen backend: driver-domain CPU charged for I/O */
#define RM_PF_CONT 0x800    /* continuation (follow-replies): work after a send, before the thread's
			       next recv; parent_seg names its chain. Without RM_PF_ANCHOR its in
			       tuple means nothing: it takes the CE of its chain's anchor */
#define RM_PF_RUNTIME 0x2000 /* the part's thread is of a process running a managed runtime (a Go
				program, a JVM): the aggregator's runtime rule weighs its CEs by such parts */
#define RM_PF_GO 0x4000     /* with RM_PF_RUNTIME: the runtime is Go's (a JVM's parts carry RM_PF_RUNTIME
			       alone); the aggregator's label rule re-splits such parts' CPU by the Go
			       label samples of their window (agg_account.h) */
#define RM_PF_ANCHOR 0x1000 /* in tuple/range set at a reply: the request last received on the socket
			       the thread answered on. With RM_PF_CONT: the part itself is anchored.
			       Without: a record (no cost) anchoring chain parent_seg; an empty in
			       tuple means the chain ended unanswered */

/*
 * Datagram ranges. With RM_PF_IN_SEQ / RM_PF_OUT_SEQ on a UDP (INET/INET6)
 * tuple, a range at or above RM_SEQ_DGRAM is one datagram: RM_SEQ_DGRAM +
 * the bytes of the datagrams counted before it on its directed flow, by the
 * end that reports it (the sender counts what it sent, the receiver what it
 * received: their counts differ by what was lost), and its length. TCP
 * ranges (32-bit sequence numbers) stay below it.
 */
#define RM_SEQ_DGRAM 0x4000000000000000ULL

/*
 * Go label counts (WindowTotals.go_labels): at most RM_GO_LABELS_MAX cookies
 * per window; cookie 0 = goroutines without a label, RM_GO_IDLE = the
 * runtime's own stack with no goroutine (scheduler, sysmon).
 */
#define RM_GO_LABELS_MAX 128
#define RM_GO_IDLE 0xffffffffffffffffULL
#define RM_GO_PERIOD_MAX 1000000000ULL /* a sampling period above 1 s is absurd */

/* Address families as on Linux (Tuple.family). */
#define RM_AF_UNIX 1
#define RM_AF_INET 2
#define RM_AF_INET6 10

/* rametr.proto SegmentPart. */
#define RM_PART_FIELDS(X)                                                                    \
	X(1, seg_id, U64, ANY) X(2, win, U64, NONZERO) X(3, pid, U32, ANY) X(4, tid, U32, ANY) \
	X(5, comm, COMM, ANY) X(6, start_ns, U64, ANY) X(7, end_ns, U64, ANY)                 \
	X(8, cpu_ns, U64, NS) X(9, runq_ns, U64, NS) X(10, rx_bytes, U64, ANY)                \
	X(11, tx_bytes, U64, ANY) X(12, disk_read, U64, ANY) X(13, disk_write, U64, ANY)      \
	X(14, flags, U32, ANY) X(15, in, TUPLE, ANY) X(16, out, TUPLE, ANY)                   \
	X(17, in_seq_start, U64, ANY) X(18, in_seq_end, U64, ANY)                             \
	X(19, out_seq_start, U64, ANY) X(20, out_seq_end, U64, ANY)                           \
	X(21, parent_seg, U64, ANY) X(22, domid, U32, ANY) X(23, vcpu, U32, ANY)              \
	X(24, blocked_ns, U64, ANY) X(25, ends, U32, ANY)

/* rametr.proto Tuple. */
#define RM_TUPLE_FIELDS(X)                                                                   \
	X(1, cookie, U64) X(2, family, FAMILY) X(3, laddr, ADDR) X(4, lport, U32)            \
	X(5, raddr, ADDR) X(6, rport, U32)

/*
 * rametr.proto WindowTotals: all uint64; win (1) is the window index. The
 * Go label counts (fields 24..26: go_period_ns, go_folded, go_labels) are
 * not in the table: they are neither kept by the kernel nor summed as the
 * table's totals are (rm_part.h struct rm_totals), and rm_part.c writes them
 * after the table's fields. A new total numbered past them must be written
 * after them too (protobuf-c writes fields in number order).
 */
#define RM_TOTALS_FIELDS(X)                                                                  \
	X(1, win, K, NONZERO) X(2, busy_ns, K, ANY) X(3, unseg_cpu_ns, K, ANY)                 \
	X(4, rx_bytes, K, ANY) X(5, tx_bytes, K, ANY) X(6, disk_read, K, ANY)                  \
	X(7, disk_write, K, ANY) X(8, unseg_rx, K, ANY) X(9, unseg_tx, K, ANY)                 \
	X(10, unseg_disk_read, K, ANY) X(11, unseg_disk_write, K, ANY) X(12, lost_ns, K, ANY)  \
	X(13, dropped_parts, K, ANY) X(14, capacity_ns, N, ANY) X(15, idle_ns, N, ANY)         \
	X(16, dropped_cpu_ns, K, ANY) X(17, dropped_rx, K, ANY) X(18, dropped_tx, K, ANY)      \
	X(19, dropped_disk_read, K, ANY) X(20, dropped_disk_write, K, ANY)      \
	X(21, restart, N, ANY) X(22, unseg_rt_ns, K, ANY) X(23, unseg_go_ns, K, ANY)

#endif
