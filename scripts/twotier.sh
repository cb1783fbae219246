#!/usr/bin/env bash
# scripts/twotier.sh - the multi-host experiment of seed 000 §7.2 (Fig. 4):
# the two-tier synthetic shared service on five namespace "hosts"
# (scripts/netns.sh) — tb-front, the caching front-end (300 KB LRU), on fe;
# tb-back, the storage tier, on be; one tb-load per CE on c1, c2, c3 (30, 60
# and 90 req/s, GET with per-CE hot sets so that about half the requests hit
# the cache) — watched by one rametr-collector per server host (node ids fe
# and be, --netns rm-fe / rm-be) streaming to one rametr-aggregator in the
# root namespace. Then, per server, the services' own ground truth against
# what Rametr stored (tb-compare), U, V and V/U, and `rametrctl check`.
#
# Variants of the front-end:
#   a  a new back-end connection per cache miss, a thread per client connection
#   b  a pool of 4 persistent back-end connections shared by all CEs
#   c  b, plus a reader thread handing requests to 4 worker threads
#
# Usage: scripts/twotier.sh [--variant a|b|c] [--arrival uniform|lognormal]
#          [--duration S] [--out DIR] [--tolerance PCT] [--max-v PCT]
#          [--build DIR] [--collector-arg ARG]... [--no-follow-replies] [--no-netns]
#          [--front-arg ARG]...
#   --build DIR        use the programs already built in DIR (default: build
#                      the tree into ./build, as scripts/demo.sh does)
#   --collector-arg A  extra argument for both collectors (repeatable)
#   --no-follow-replies  do not pass --follow-replies (passed by default when
#                      the collector has it: thread pools, variant c; add
#                      --collector-arg --follow-wakeups to compare)
#   --no-netns         development only: collectors without --netns (each
#                      then sees every thread of the machine)
#   --front-arg A      extra argument for tb-front, after the variant's
#                      (repeatable; e.g. --front-arg --workers --front-arg 1)
# Exit 0 only if every CE's CPU error is within --tolerance (default 1%) at
# both servers, V <= --max-v percent of U (default 3%) at both, and every
# window balances.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
variant=b arrival=uniform duration=60 out=/tmp/rametr-twotier tolerance=1.0 maxv=3.0
build="" use_netns=1 col_extra=() follow=1 front_extra=()
while [ $# -gt 0 ]; do
	case "$1" in
	--variant) variant=$2; shift 2 ;;
	--arrival) arrival=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--tolerance) tolerance=$2; shift 2 ;;
	--max-v) maxv=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	--collector-arg) col_extra+=("$2"); shift 2 ;;
	--no-follow-replies) follow=0; shift ;;
	--front-arg) front_extra+=("$2"); shift 2 ;;
	--no-netns) use_netns=0; shift ;;
	-h|--help) sed -n '2,36p' "$0"; exit 0 ;;
	*) echo "twotier: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
case "$variant" in
a) front_mode=(--backend-mode per-request --workers 0) ;;
b) front_mode=(--backend-mode pool:4 --workers 0) ;;
c) front_mode=(--backend-mode pool:4 --workers 4) ;;
*) echo "twotier: bad --variant '$variant': expected a, b or c" >&2; exit 2 ;;
esac
case "$arrival" in uniform|lognormal) ;; *) echo "twotier: bad --arrival '$arrival'" >&2; exit 2 ;; esac
[[ "$duration" =~ ^[0-9]+$ ]] && [ "$duration" -gt 0 ] || { echo "twotier: bad --duration '$duration'" >&2; exit 2; }

cd "$top"
bash scripts/setup.sh
if [ -z "$build" ]; then
	echo "== building"
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j"$(nproc)" >build.log 2>&1 || { tail -30 build.log >&2; echo "twotier: build failed (build.log)" >&2; exit 1; }
	build=$top/build
fi
B=$(cd "$build" && pwd)
for p in aggregator/rametr-aggregator collector/rametr-collector ctl/rametrctl testbed/tb-front \
	 testbed/tb-back testbed/tb-load testbed/tb-compare; do
	[ -x "$B/$p" ] || { echo "twotier: '$B/$p' is missing (build it first)" >&2; exit 1; }
done
NETNS="bash $top/scripts/netns.sh"
if [ $use_netns -eq 1 ] && ! "$B/collector/rametr-collector" --help 2>&1 | grep -q -- '--netns'; then
	echo "twotier: this rametr-collector has no --netns (use --no-netns to develop without it)" >&2
	exit 1
fi
if [ $follow -eq 1 ] && "$B/collector/rametr-collector" --help 2>&1 | grep -q -- '--follow-replies'; then
	col_extra+=(--follow-replies)
fi

out=$(realpath -m "$out")
db=$out/rametr.db
url=ipc://$out/aggregator.ipc
fe=$($NETNS addr fe) be=$($NETNS addr be)
fe_port=7100 be_port=7101
pids=() own_hosts=0
cleanup() {
	local rc=$?
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	# Only once the hosts are ours: never tear down another user's.
	if [ $own_hosts -eq 1 ]; then $NETNS down || rc=1; fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits up to 30 s for a line matching $2 in file $1 while process $3 lives.
wait_log() {
	local i
	for i in $(seq 1 600); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || break
		sleep 0.05
	done
	cat "$1" >&2
	echo "twotier: '$1' never said '$2'" >&2
	return 1
}
# Stops process $1 with SIGTERM and reports a failure exit ($2: its name, $3: its log).
stop() {
	kill -TERM "$1" 2>/dev/null || true
	if ! wait "$1"; then
		tail -20 "$3" >&2
		echo "twotier: $2 failed" >&2
		return 1
	fi
}

# One user of the hosts at a time (another run or the integration test).
exec 8>"$($NETNS session-lock)"
if ! flock -n 8; then
	echo "twotier: the testbed hosts are in use; waiting (at most 15 min)"
	flock -w 900 8 || { echo "twotier: the testbed hosts stayed busy" >&2; exit 1; }
fi
own_hosts=1
rm -rf "$out" && mkdir -p "$out"
echo "== hosts: namespaces rm-fe rm-be rm-c1 rm-c2 rm-c3 on 10.213.0.0/24"
$NETNS down >/dev/null
$NETNS up
$NETNS status

echo "== aggregator (root namespace) and one collector per server host (logs in $out)"
"$B/aggregator/rametr-aggregator" --config testbed/twotier.ini --db "$db" --listen "$url" \
	>"$out/aggregator.log" 2>&1 &
agg=$!; pids+=($agg)
wait_log "$out/aggregator.log" "listening on" $agg
cols=()
for h in fe be; do
	nsarg=()
	[ $use_netns -eq 1 ] && nsarg=(--netns "rm-$h")
	"$B/collector/rametr-collector" --aggregator "$url" --node "$h" "${nsarg[@]}" --window 1s \
		--spool "$out/spool-$h" "${col_extra[@]}" >"$out/collector-$h.log" 2>&1 &
	cols+=($!); pids+=($!)
done
echo "collector arguments: ${nsarg[*]:+--netns rm-HOST} ${col_extra[*]}"
wait_log "$out/collector-fe.log" "attached" "${cols[0]}"
wait_log "$out/collector-be.log" "attached" "${cols[1]}"

echo "== variant $variant: tb-back on be ($be:$be_port), tb-front ${front_mode[*]} ${front_extra[*]} on fe ($fe:$fe_port)"
$NETNS exec be "$B/testbed/tb-back" --listen "$be:$be_port" --truth "$out/truth-be.csv" \
	--cpu-us-base 500 --cpu-us-per-kb 300 >"$out/tb-back.log" 2>&1 &
back=$!; pids+=($back)
wait_log "$out/tb-back.log" "listening" $back
$NETNS exec fe "$B/testbed/tb-front" --listen "$fe:$fe_port" --backend "$be:$be_port" \
	--truth "$out/truth-fe.csv" --stats "$out/stats-fe.csv" --cache-kb 300 "${front_mode[@]}" \
	"${front_extra[@]}" >"$out/tb-front.log" 2>&1 &
front=$!; pids+=($front)
wait_log "$out/tb-front.log" "listening" $front

# busy and steal jiffies of the whole machine (/proc/stat)
cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $9 }' /proc/stat; }
read -r busy0 steal0 < <(cpu_ticks)

echo "== 3 CEs for ${duration}s ($arrival arrivals): c1 30 req/s, c2 60 req/s, c3 90 req/s"
loads=() seed=1
for spec in c1:30 c2:60 c3:90; do
	ce=${spec%%:*} rate=${spec##*:}
	$NETNS exec "$ce" "$B/testbed/tb-load" --proto get --server "$fe:$fe_port" --bind "$($NETNS addr "$ce")" \
		--ce "$ce" --rate "$rate" --duration "$duration" --arrival "$arrival" --cpu-us 1000:3000 \
		--addr-base $((seed * 1000000)) --addr-range 100000 --hot 6 --hot-frac 0.6 --size-kb 1:16 \
		--seed $seed --out "$out/requests-$ce.csv" >"$out/load-$ce.txt" 2>"$out/load-$ce.log" &
	loads+=($!); pids+=($!)
	seed=$((seed + 1))
done
load_ok=1
for p in "${loads[@]}"; do wait "$p" || load_ok=0; done
read -r busy1 steal1 < <(cpu_ticks)
cat "$out"/load-*.txt
[ $load_ok -eq 1 ] || { cat "$out"/load-*.log >&2; echo "twotier: a load generator reported errors" >&2; exit 1; }
stop $front tb-front "$out/tb-front.log"
stop $back tb-back "$out/tb-back.log"
grep -E '^(cache|workers)' "$out/tb-front.log"
sleep 1.5   # let the last window close
for i in 0 1; do
	h=$([ $i -eq 0 ] && echo fe || echo be)
	stop "${cols[$i]}" "collector $h" "$out/collector-$h.log"
done
stop $agg aggregator "$out/aggregator.log"
pids=()

fail=0
for h in fe be; do
	echo
	echo "== $h: ground truth (the service's own CLOCK_THREAD_CPUTIME_ID per CE) vs Rametr"
	"$B/testbed/tb-compare" --truth "$out/truth-$h.csv" --db "$db" --server "$h" --tolerance "$tolerance" \
		| tee "$out/compare-$h.txt" || fail=1
	vu=$(sed -n 's/.*(\(-\{0,1\}[0-9.]*\)% of U).*/\1/p' "$out/compare-$h.txt")
	if [ -z "$vu" ] || ! awk -v v="$vu" -v m="$maxv" 'BEGIN { exit !(v <= m && v >= -m) }'; then
		echo "twotier: $h: V is ${vu:-?}% of U, more than $maxv%" >&2
		fail=1
	fi
	echo
	echo "== $h: rametrctl check (sum_c U_c + V = U in every window)"
	"$B/ctl/rametrctl" check --db "$db" --server "$h" || fail=1
done

echo
echo "== summary: variant $variant, $arrival arrivals, ${duration}s"
printf '%-5s %-4s %12s %12s %8s\n' HOST CE TRUTH_CPU_S RAMETR_CPU_S ERROR_%
for h in fe be; do
	awk -v h="$h" '$1 ~ /^c[0-9]+$/ && NF >= 4 { printf "%-5s %-4s %12.3f %12s %8s\n", h, $1, $2, $3, $4 }' \
		"$out/compare-$h.txt"
done
for h in fe be; do
	sed -n "s/^server total U \([0-9.]*\) s, unaccountable V \(-\{0,1\}[0-9.]*\) s (\(-\{0,1\}[0-9.]*\)% of U)/$h  U \1 s  V \2 s  V\/U \3%/p" \
		"$out/compare-$h.txt"
done
# The services' thread clocks (CLOCK_THREAD_CPUTIME_ID) leave out time stolen
# by the hypervisor; timestamps taken with the monotonic clock do not.
awk -v b=$((busy1 - busy0)) -v s=$((steal1 - steal0)) 'BEGIN { printf "machine during the load: %d busy + %d steal jiffies (steal %.2f%%)\n", b, s, b + s ? 100 * s / (b + s) : 0 }'
awk -F, 'NR > 1 { r += $2; h += $3; m += $4; e += $5 } END { if (r) printf "front-end cache: %d requests, %d hits (%.1f%%), %d misses, %d back-end errors\n", r, h, 100 * h / r, m, e }' \
	"$out/stats-fe.csv"
if [ $fail -ne 0 ]; then
	echo "twotier: FAILED (tolerance ${tolerance}%, V/U at most ${maxv}%)" >&2
	exit 1
fi
echo "twotier: ok (every CE within ${tolerance}% at fe and be, V/U at most ${maxv}%)"
