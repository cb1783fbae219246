#!/usr/bin/env bash
# bench/sampler_cost.sh - what the goroutine sampler costs, on a Go server it
# watches and on a process it does not, for each place it can tick
# (--go-label-sampler cpu|thread), against no collector and a collector
# with goroutine labels off. One aggregator; per round and mode a fresh
# collector on the whole machine, then:
#   - bench_spin pinned to CPU 1 (a process nothing watches): its thread CPU;
#   - a fresh tb-goserver on loopback under integ_go's three tenants (60, 30
#     and 15 requests/s of /light, /medium, /heavy for 12 s): its threads'
#     CPU over the load (/proc/PID/task/*/schedstat).
# Modes alternate within each round. Prints one line per round and mode:
#   sampler: round R mode M spin_cpu_s X goserver_cpu_s Y
# then per mode the medians and their ratio to "none".
# Needs root and the shared lock:
#   flock /tmp/rametr-sys.lock bench/sampler_cost.sh BUILD [ROUNDS (3)] [HZ (1999)]
set -u
[ $# -ge 1 ] || { sed -n '2,18p' "$0"; exit 2; }
B=$(cd "$1" && pwd) rounds=${2:-3} hz=${3:-1999}
top=$(cd "$(dirname "$0")/.." && pwd)
col=$B/collector/rametr-collector agg=$B/aggregator/rametr-aggregator spin=$B/bench/bench_spin
gs=$B/testbed/go/tb-goserver gl=$B/testbed/go/tb-goload
for x in "$col" "$agg" "$spin" "$gs" "$gl"; do [ -x "$x" ] || { echo "sampler_cost: no '$x'" >&2; exit 2; }; done
w=$(mktemp -d /tmp/sampler_cost.XXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
"$agg" --config "$top/testbed/go.ini" --db "$w/r.db" --listen "ipc://$w/a.ipc" >"$w/agg.log" 2>&1 &
pids+=($!)
sleep 1
port=7397
task_cpu() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
one() { # one ROUND MODE: a line
	local r=$1 m=$2 c=
	case $m in
	none) ;;
	nolabels) set -- --no-go-labels ;;
	cpu|thread) set -- --go-label-sampler "$m" --go-label-hz "$hz" ;;
	esac
	if [ "$m" != none ]; then
		"$col" --aggregator "ipc://$w/a.ipc" --node n --window 1s --spool "$w/spool-$m-$r" "$@" >"$w/col-$m-$r.log" 2>&1 &
		c=$!
		for _ in $(seq 100); do grep -q attached "$w/col-$m-$r.log" && break; sleep 0.1; done
	fi
	"$gs" --listen 127.0.0.1:$port --truth "$w/truth.csv" >"$w/gs.log" 2>&1 &
	local s=$!
	for _ in $(seq 100); do grep -q listening "$w/gs.log" && break; sleep 0.1; done
	sleep 2.5 # the collector's scan (once a window) finds the Go program and loads the labels
	local sc; sc=$(taskset -c 1 "$spin" | awk '{print $3}')
	local c0; c0=$(task_cpu $s)
	local lp=() t
	for t in "c1 /light 60 127.0.0.2" "c2 /medium 30 127.0.0.3" "c3 /heavy 15 127.0.0.4"; do
		set -- $t
		"$gl" --server 127.0.0.1:$port --bind "$4" --ce "$1" --path "$2" --rate "$3" --duration 12 >"$w/load-$1.log" 2>&1 &
		lp+=($!)
	done
	wait "${lp[@]}"
	local c1; c1=$(task_cpu $s)
	kill $s; wait $s 2>/dev/null
	[ -n "$c" ] && { kill $c; wait $c 2>/dev/null; }
	awk -v r="$r" -v m="$m" -v sc="$sc" -v a="$c0" -v b="$c1" \
		'BEGIN {printf "sampler: round %s mode %s spin_cpu_s %s goserver_cpu_s %.4f\n", r, m, sc, (b - a) / 1e9}'
}
for r in $(seq "$rounds"); do
	for m in none cpu thread nolabels; do one "$r" "$m"; done
done | tee "$w/lines"
awk '{spin[$5] = spin[$5] " " $7; go[$5] = go[$5] " " $9}
function med(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
END { ns = med(spin["none"]); ng = med(go["none"])
	for (m in spin) printf "sampler: median mode %s spin_cpu_s %.4f (x%.3f) goserver_cpu_s %.4f (x%.3f)\n", m, med(spin[m]), med(spin[m]) / ns, med(go[m]), med(go[m]) / ng }' "$w/lines"
rm -rf "$w"
