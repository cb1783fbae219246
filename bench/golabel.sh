#!/bin/sh
# golabel.sh - one measurement of labels on goroutines split by sampling
# (bench_golabel) on the testbed's gRPC server: tb-grpcserver on loopback,
# bench_golabel attached to it, three tenants each on its own connection
# from its own loopback address (127.0.0.2-4: Light, Medium and Heavy at
# RATES calls per second in bursts of BURST, as integ_grpc), for DURATION s.
# Prints bench_golabel's lines, then per tenant the sampled share against
# the server's truth (the handlers' thread CPU) and against the estimate of
# integ_grpc (that truth plus the rest of the server's CPU spread evenly per
# call), and the probes' cost per call: uprobe hits x the trap's cost (an
# empty uprobe on an emulated jcc, measured by bench_gosched in this run)
# plus the programs' run time.
#
# Needs root and the shared lock: flock /tmp/rametr-sys.lock bench/golabel.sh BUILD
# Usage: golabel.sh BUILD_DIR [--inherit site|pair] [--ready off|unlabelled|all] [--freq HZ]
# Environment: GL_RATES="60 30 15", GL_BURST=3, GL_DURATION=12, GL_PORT=7391;
# GL_ALONE=K runs tenant K (1..3) alone (the server's CPU then is that
# tenant's whole cost, for a truth from separate runs); GL_SCALE=N the
# server's --scale (0: grpc-go's own work only); GL_INFLIGHT=N each tenant
# keeps N calls in flight instead (a saturating load, for the cost per call);
# GL_SERVER=PATH another build of tb-grpcserver (with cgo, for instance).
set -eu

build=${1:?usage: golabel.sh BUILD_DIR [--ready MODE] [--freq HZ]}
shift
ready=off
inherit=site
freq=2000
while [ $# -gt 0 ]; do
	case $1 in
	--ready) ready=$2; shift 2 ;;
	--inherit) inherit=$2; shift 2 ;;
	--freq) freq=$2; shift 2 ;;
	*) echo "golabel.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
rates=${GL_RATES:-60 30 15}
burst=${GL_BURST:-3}
dur=${GL_DURATION:-12}
alone=${GL_ALONE:-0}
scale=${GL_SCALE:-1}
inflight=${GL_INFLIGHT:-0}
port=${GL_PORT:-7391}
server=${GL_SERVER:-$build/testbed/go/tb-grpcserver}
load=$build/testbed/go/tb-grpcload
dir=$(mktemp -d /tmp/golabel.XXXXXX)
spid=
gpid=

cleanup() {
	[ -n "$gpid" ] && kill "$gpid" 2>/dev/null || true
	[ -n "$spid" ] && kill "$spid" 2>/dev/null || true
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

# the server's threads' CPU so far (ns), from their schedstat
server_ns() {
	cat /proc/"$spid"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d\n", s}'
}

trap_ns=$("$build"/bench/bench_gosched --binary "$server" --seconds 1 --calls 20000 |
	sed -n 's/.*on_jcc: empty_adds_ns=\([0-9.]*\).*/\1/p')
echo "golabel.sh: uprobe trap on an emulated jcc: ${trap_ns} ns; load average $(cut -d' ' -f1-3 /proc/loadavg)"

: >"$dir"/server.log
"$server" --listen 127.0.0.1:"$port" --truth "$dir"/truth.csv --scale "$scale" >"$dir"/server.log 2>&1 &
spid=$!
i=0
until grep -q listening "$dir"/server.log; do
	i=$((i + 1)); [ $i -lt 50 ] || { echo "golabel.sh: the server did not start" >&2; exit 1; }
	sleep 0.1
done
"$build"/bench/bench_golabel --binary "$server" --pid "$spid" --seconds $((dur + 2)) --freq "$freq" \
	--inherit "$inherit" --ready "$ready" >"$dir"/golabel.out 2>&1 &
gpid=$!
i=0
until grep -q "golabel: ready" "$dir"/golabel.out; do
	i=$((i + 1)); [ $i -lt 100 ] || { cat "$dir"/golabel.out >&2; exit 1; }
	sleep 0.1
done
c0=$(server_ns)
set -- $rates
if [ "$inflight" -gt 0 ]; then
	set -- "$1 --inflight $inflight" "$2 --inflight $inflight" "$3 --inflight $inflight"
fi
l1= l2= l3=
if [ "$alone" -eq 0 ] || [ "$alone" -eq 1 ]; then
	"$load" --server 127.0.0.1:"$port" --bind 127.0.0.2 --ce c1 --method Light --rate $1 --burst "$burst" \
		--duration "$dur" >"$dir"/load1.log 2>&1 &
	l1=$!
fi
if [ "$alone" -eq 0 ] || [ "$alone" -eq 2 ]; then
	"$load" --server 127.0.0.1:"$port" --bind 127.0.0.3 --ce c2 --method Medium --rate $2 --burst "$burst" \
		--duration "$dur" >"$dir"/load2.log 2>&1 &
	l2=$!
fi
if [ "$alone" -eq 0 ] || [ "$alone" -eq 3 ]; then
	"$load" --server 127.0.0.1:"$port" --bind 127.0.0.4 --ce c3 --method Heavy --rate $3 --burst "$burst" \
		--duration "$dur" >"$dir"/load3.log 2>&1 &
	l3=$!
fi
st=0
for l in $l1 $l2 $l3; do
	wait "$l" || st=1
done
c1=$(server_ns)
wait "$gpid" || st=1
gpid=
kill -TERM "$spid"
wait "$spid" || true
spid=
cat "$dir"/golabel.out "$dir"/load*.log
[ $st -eq 0 ] || { echo "golabel.sh: a load or bench_golabel failed (files in $dir)" >&2; exit 1; }

# truth.csv: ce,requests,cpu_ns,rx_bytes,tx_bytes; golabel.out: label=127.0.0.N samples=S ...
awk -v server_ns=$((c1 - c0)) -v trap="$trap_ns" -F'[ ,=]' '
FILENAME ~ /truth/ && $1 ~ /^c[0-9]$/ { req[$1] = $2; cpu[$1] = $3; treq += $2; tcpu += $3; next }
FILENAME ~ /golabel/ && $2 == "label" { ce = "c" (substr($3, 9) - 1); smp[ce] = $5; lab += $5; next }
FILENAME ~ /golabel/ && $2 == "reads" { sreads = $3; next }
FILENAME ~ /golabel/ && $2 == "prog" { runs[$3] = $5; rns[$3] = $7; next }
END {
	per = (server_ns - tcpu) / treq
	printf "golabel.sh: server_cpu_ms=%.1f handlers_ms=%.1f calls=%d outside_handlers_us_per_call=%.1f\n",
		server_ns / 1e6, tcpu / 1e6, treq, per / 1e3
	printf "%-4s %8s %8s %9s %9s %9s %8s %8s\n", "ce", "calls", "samples", "truth_%", "est_%", "sampled_%",
		"vs_truth", "vs_est"
	for (i = 1; i <= 3; i++) {
		ce = "c" i
		if (!(ce in req))
			continue
		est = cpu[ce] + per * req[ce]
		ts = 100 * cpu[ce] / tcpu; es = 100 * est / server_ns; ss = lab ? 100 * smp[ce] / lab : 0
		printf "%-4s %8d %8d %9.2f %9.2f %9.2f %8.2f %8.2f\n", ce, req[ce], smp[ce], ts, es, ss, ss - ts, ss - es
	}
	hits = runs["newproc1"] + runs["runqput"] + runs["newg"]
	bpf = rns["read"] + rns["newproc1"] + rns["runqput"] + rns["newg"]
	printf "golabel.sh: per call: uprobe_hits=%.2f trap_us=%.2f hooks_bpf_us=%.2f server_reads=%.2f read_runs_all=%.2f sample_bpf_us=%.2f total_us=%.2f (server %.1f us per call)\n",
		hits / treq, hits * trap / 1e3 / treq, bpf / 1e3 / treq, sreads / treq, runs["read"] / treq, rns["sample"] / 1e3 / treq,
		(hits * trap + bpf + rns["sample"]) / 1e3 / treq, server_ns / 1e3 / treq
}' "$dir"/truth.csv "$dir"/golabel.out
rm -rf "$dir"
