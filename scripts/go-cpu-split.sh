#!/bin/sh
# go-cpu-split.sh - where a running Go server's CPU goes, by what its threads
# were doing: samples its on-CPU stacks with perf for a while and sorts each
# sample by the first kind of work its stack shows (the handlers' code in
# package main, the garbage collector, sysmon, net/http and its I/O, grpc-go, the
# netpoller, the scheduler), in total and per thread.
#
# Usage: scripts/go-cpu-split.sh PID SECONDS [OUT_DIR]
#   PID      the Go server's process id (in any network namespace)
#   SECONDS  how long to sample (at 2999 Hz, call stacks by frame pointer)
#   OUT_DIR  where perf.data and the stacks are kept (default: a new /tmp dir)
# Prints two tables: per kind, the samples and their share of all; per thread,
# its samples and its share of each kind. Needs perf (linux-perf) and root.
#
# Kinds, first match wins, over all frames of a sample:
#   handler   a function of package main (the service's own code)
#   gc        runtime.gc*, bgsweep, bgscavenge, markroot, scanobject, sweepone
#             (a request's allocation paying GC assist lands here too)
#   sysmon    runtime.sysmon
#   http      net/http, bufio, net, internal/poll, syscall (reading and
#             parsing a request, writing its reply, accepting connections)
#   grpc      grpc-go and its HTTP/2 framer (google.golang.org/grpc,
#             golang.org/x/net/http2) outside the I/O above: decoding and
#             encoding frames, starting a call's goroutine, queueing replies
#   netpoll   runtime.netpoll (epoll_wait for ready connections)
#   sched     any other runtime function (finding work, idle Ps spinning,
#             parking and waking threads, timers)
#   kernel    no user frame at all (interrupts, softirq work)
set -eu

[ $# -ge 2 ] || { echo "usage: $0 PID SECONDS [OUT_DIR]" >&2; exit 2; }
pid=$1
secs=$2
out=${3:-$(mktemp -d /tmp/go-cpu-split.XXXXXX)}
mkdir -p "$out"
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
[ -d "/proc/$pid" ] || { echo "no process $pid" >&2; exit 1; }

perf record -q -F 2999 -g -p "$pid" -o "$out/perf.data" -- sleep "$secs" >"$out/record.log" 2>&1 ||
	{ echo "failed to record process $pid (see $out/record.log)" >&2; exit 1; }
perf script -i "$out/perf.data" -F tid,ip,sym >"$out/stacks.txt" 2>/dev/null ||
	{ echo "failed to read '$out/perf.data'" >&2; exit 1; }

awk -v out="$out" '
function kind(stack) {
	if (stack ~ / main\./) return "handler"
	if (stack ~ / runtime\.(gc[A-Z]|bgsweep|bgscavenge|markroot|scanobject|sweepone)/) return "gc"
	if (stack ~ / runtime\.sysmon/) return "sysmon"
	if (stack ~ / (net\/http\.|bufio\.|net\.|internal\/poll\.|syscall\.)/) return "http"
	if (stack ~ / (google\.golang\.org\/grpc|golang\.org\/x\/net\/http2)/) return "grpc"
	if (stack ~ / runtime\.netpoll/) return "netpoll"
	if (stack ~ / runtime\./) return "sched"
	return "kernel"
}
function flush() {
	if (tid == "") return
	k = kind(stack); n[k]++; nt[tid]++; ntk[tid, k]++; total++
	tid = ""; stack = ""
}
/^[ \t]*[0-9]+[ \t]*$/ { flush(); tid = $1; stack = ""; next }
/^$/ { flush(); next }
{ stack = stack " " $2 }
END {
	flush()
	split("handler http grpc gc sysmon netpoll sched kernel", kinds, " ")
	printf "%d samples in %s (perf.data, stacks.txt)\n", total, out
	printf "%-8s %8s %7s\n", "kind", "samples", "share_%"
	for (i = 1; i <= 8; i++)
		printf "%-8s %8d %7.1f\n", kinds[i], n[kinds[i]], total ? 100 * n[kinds[i]] / total : 0
	printf "%-8s %8s %7s", "thread", "samples", "share_%"
	for (i = 1; i <= 8; i++) printf " %7s", kinds[i]
	printf "   (per thread: %% of its samples)\n"
	for (t in nt) {
		printf "%-8s %8d %7.1f", t, nt[t], 100 * nt[t] / total
		for (i = 1; i <= 8; i++) printf " %7.1f", 100 * ntk[t, kinds[i]] / nt[t]
		printf "\n"
	}
}' "$out/stacks.txt"
