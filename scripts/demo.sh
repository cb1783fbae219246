#!/usr/bin/env bash
# scripts/demo.sh - the main job on one machine: aggregator (SQLite),
# collector (eBPF), the testbed's shared service on a host of its own (a
# network namespace, as a server node is), and three CEs loading it from
# outside at 30, 60 and 90 req/s; then the per-CE usage tables, the
# conservation check, the comparison with the service's own ground truth and
# an HTML report.
# Usage: scripts/demo.sh [--duration S] [--arrival uniform|lognormal] [--out DIR] [--tolerance PCT]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
duration=30 arrival=uniform out=/tmp/rametr-demo tolerance=2.0
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) duration=$2; shift 2 ;;
	--arrival) arrival=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--tolerance) tolerance=$2; shift 2 ;;
	-h|--help) sed -n '2,8p' "$0"; exit 0 ;;
	*) echo "demo: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
cd "$top"
tb_name=demo
. scripts/testbed-lib.sh # tb_wait_log
bash scripts/setup.sh
echo "== building"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >build.log 2>&1 || { tail -30 build.log >&2; echo "demo: build failed (build.log)" >&2; exit 1; }
B=$top/build
rm -rf "$out" && mkdir -p "$out"
db=$out/rametr.db
pids=()
# the service's host: a network namespace joined to this one by a veth pair;
# the CEs' addresses are on this side (testbed/demo.ini names them)
ns=rmdemo sub=10.213.7
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	ip netns del "$ns" 2>/dev/null || true
}
trap cleanup EXIT
ip netns del "$ns" 2>/dev/null || true # a demo killed before its cleanup
ip link del rmdemo0 2>/dev/null || true
ip netns add "$ns" && ip link add rmdemo0 type veth peer name rmdemo1 && ip link set rmdemo1 netns "$ns" ||
	{ echo "demo: cannot create the network namespace '$ns' (needs root and iproute2)" >&2; exit 1; }
ip addr add "$sub.1/24" dev rmdemo0
for i in 2 3 4; do ip addr add "$sub.$i/32" dev rmdemo0; done
ip link set rmdemo0 up
ip -n "$ns" addr add "$sub.100/24" dev rmdemo1 && ip -n "$ns" link set rmdemo1 up && ip -n "$ns" link set lo up

echo "== starting aggregator, collector and the shared service (logs in $out)"
"$B/aggregator/rametr-aggregator" --config testbed/demo.ini --db "$db" >"$out/aggregator.log" 2>&1 &
agg=$!; pids+=($agg)
"$B/collector/rametr-collector" --aggregator tcp://127.0.0.1:7600 --node local --netns "$ns" \
	--spool "$out/spool" >"$out/collector.log" 2>&1 &
col=$!; pids+=($col)
ip netns exec "$ns" "$B/testbed/tb-server" --listen "$sub.100:7000" --truth "$out/truth.csv" \
	>"$out/server.log" 2>&1 &
srv=$!; pids+=($srv)
# the load starts once the collector's hooks are attached (loading and verifying
# its programs takes a few seconds): work done before that is not seen
tb_wait_log "$out/collector.log" "backend attached" $col || exit 1
sleep 0.5
kill -0 $agg 2>/dev/null || { cat "$out/aggregator.log" >&2; echo "demo: aggregator did not start" >&2; exit 1; }
kill -0 $col 2>/dev/null || { cat "$out/collector.log" >&2; echo "demo: collector did not start" >&2; exit 1; }
kill -0 $srv 2>/dev/null || { cat "$out/server.log" >&2; echo "demo: tb-server did not start" >&2; exit 1; }

start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
echo "== 3 CEs for ${duration}s ($arrival arrivals): c1 30 req/s, c2 60 req/s, c3 90 req/s"
loads=()
i=2 seed=1
for spec in c1:30 c2:60 c3:90; do
	ce=${spec%%:*} rate=${spec##*:}
	"$B/testbed/tb-load" --server "$sub.100:7000" --bind "$sub.$i" --ce "$ce" --rate "$rate" \
		--duration "$duration" --arrival "$arrival" --cpu-us 1000:3000 --resp-bytes 512 --seed $seed \
		>"$out/load-$ce.txt" 2>&1 &
	loads+=($!)
	i=$((i + 1)) seed=$((seed + 1))
done
for p in "${loads[@]}"; do wait "$p" || echo "demo: a load generator reported errors" >&2; done
cat "$out"/load-*.txt | grep '^ce='
kill -TERM $srv; wait $srv || true
sleep 1.5   # let the last window close
kill -TERM $col; wait $col || { cat "$out/collector.log" >&2; echo "demo: collector failed" >&2; exit 1; }
kill -TERM $agg; wait $agg || { cat "$out/aggregator.log" >&2; echo "demo: aggregator failed" >&2; exit 1; }
pids=()

echo
echo "== rametrctl usage --server local --resource cpu"
"$B/ctl/rametrctl" usage --db "$db" --server local --resource cpu
echo
echo "== rametrctl usage --server local --resource net_rx"
"$B/ctl/rametrctl" usage --db "$db" --server local --resource net_rx
echo
echo "== rametrctl unaccountable --server local (V by reason)"
"$B/ctl/rametrctl" unaccountable --db "$db" --server local
echo
echo "== rametrctl check (sum_c U_c + V = U in every window)"
"$B/ctl/rametrctl" check --db "$db" --server local
echo
echo "== ground truth (the service's own CLOCK_THREAD_CPUTIME_ID per CE) vs Rametr"
rc=0
"$B/testbed/tb-compare" --truth "$out/truth.csv" --db "$db" --server local --tolerance "$tolerance" || rc=$?
echo
"$B/ctl/rametrctl" report --db "$db" --since "$start" -o "$out/report.html" &&
	echo "== the same as a report: $out/report.html (one self-contained HTML file)"
exit $rc
