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
# Usage: scripts/twotier.sh [--variant a|b|c] [--arrival uniform|lognormal] [--all]
#          [--duration S] [--out DIR] [--tolerance PCT] [--max-v PCT]
#          [--build DIR] [--collector-arg ARG]... [--no-follow-replies] [--no-netns]
#          [--front-arg ARG]...
#   --all              run every variant with both arrivals (6 runs, results in
#                      OUT/VARIANT-ARRIVAL) and print the table of the README:
#                      per-CE error at each tier and V/U; exit 0 only if all pass
#   --build DIR        use the programs already built in DIR (default: build
#                      the tree into ./build, as scripts/demo.sh does)
#   --collector-arg A  extra argument for both collectors (repeatable)
#   --no-follow-replies  run the collectors with --no-follow-replies (by
#                      default they run in their default configuration,
#                      which follows thread pools' replies, variant c; add
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
build="" use_netns=1 col_extra=() follow=1 front_extra=() all=0 args=()
while [ $# -gt 0 ]; do
	# args: what --all passes on to each of its runs
	case "$1" in
	--variant) variant=$2; shift 2 ;;
	--arrival) arrival=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--all) all=1; shift ;;
	--duration) duration=$2; args+=("$1" "$2"); shift 2 ;;
	--tolerance) tolerance=$2; args+=("$1" "$2"); shift 2 ;;
	--max-v) maxv=$2; args+=("$1" "$2"); shift 2 ;;
	--build) build=$2; args+=("$1" "$2"); shift 2 ;;
	--collector-arg) col_extra+=("$2"); args+=("$1" "$2"); shift 2 ;;
	--no-follow-replies) follow=0; args+=("$1"); shift ;;
	--front-arg) front_extra+=("$2"); args+=("$1" "$2"); shift 2 ;;
	--no-netns) use_netns=0; args+=("$1"); shift ;;
	-h|--help) sed -n '2,39p' "$0"; exit 0 ;;
	*) echo "twotier: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
if [ $all -eq 1 ]; then
	# One run per variant and arrival, each a full twotier.sh of its own.
	rc=0
	table="| variant | arrivals | front c1/c2/c3 | back c1/c2/c3 | V/U front, back | steal |\n|---|---|---|---|---|---|\n"
	for v in a b c; do
		for a in uniform lognormal; do
			mkdir -p "$out"
			log="$out/$v-$a.log"
			echo "== twotier --variant $v --arrival $a (log $log)"
			"$0" --variant "$v" --arrival "$a" --out "$out/$v-$a" "${args[@]}" >"$log" 2>&1 || { rc=1; tail -3 "$log" >&2; }
			row=$(awk -v v="$v" -v a="$a" '
				/^== summary/ { on = 1; next }
				on && $1 == "fe" && $2 ~ /^c[0-9]+$/ { fe = fe (fe == "" ? "" : " / ") sprintf("%+.2f", $5) }
				on && $1 == "be" && $2 ~ /^c[0-9]+$/ { be = be (be == "" ? "" : " / ") sprintf("%+.2f", $5) }
				on && $2 == "U" { vu[$1] = sprintf("%.1f%%", $NF) }
				/^machine during the load/ { st = $NF; gsub(/[()]/, "", st) }
				END { printf "| %s | %s | %s%% | %s%% | %s, %s | %s |", v, a, fe, be, vu["fe"], vu["be"], st }' "$log")
			table+="$row\n"
		done
	done
	echo
	printf "%b" "$table"
	[ $rc -eq 0 ] && echo "twotier: all six runs ok" || echo "twotier: some runs FAILED (logs in $out)" >&2
	exit $rc
fi
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
tb_name=twotier
. "$top/scripts/testbed-lib.sh"
tb_init
tb_use_netns=$use_netns
# (the help read whole first: grep -q stops reading at the match, and under
# pipefail the writer's SIGPIPE would fail the test)
if [ $use_netns -eq 1 ] && ! grep -q -- '--netns' <<<"$("$B/collector/rametr-collector" --help 2>&1)"; then
	echo "twotier: this rametr-collector has no --netns (use --no-netns to develop without it)" >&2
	exit 1
fi
[ $follow -eq 1 ] || col_extra+=(--no-follow-replies)
tb_col_extra=("${col_extra[@]}")

out=$(realpath -m "$out")
db=$out/rametr.db
fe=$($NETNS addr fe)
fe_port=$tb_fe_port

# One user of the hosts at a time (another run or the integration test).
tb_take_hosts
rm -rf "$out" && mkdir -p "$out"

echo "== aggregator (root namespace) and one collector per server host (logs in $out)"
tb_rametr_start "$out" testbed/twotier.ini fe be
echo "collector arguments: $([ $use_netns -eq 1 ] && echo --netns rm-HOST) ${col_extra[*]}"

echo "== variant $variant: tb-back on be, tb-front ${front_mode[*]} ${front_extra[*]} on fe ($fe:$fe_port)"
tb_twotier_start "$out" "$variant" "${front_extra[@]}"

read -r busy0 steal0 < <(tb_cpu_ticks)

echo "== 3 CEs for ${duration}s ($arrival arrivals): c1 30 req/s, c2 60 req/s, c3 90 req/s"
loads=() seed=1
for spec in c1:30 c2:60 c3:90; do
	ce=${spec%%:*} rate=${spec##*:}
	$NETNS exec "$ce" "$B/testbed/tb-load" --proto get --server "$fe:$fe_port" --bind "$($NETNS addr "$ce")" \
		--ce "$ce" --rate "$rate" --duration "$duration" --arrival "$arrival" --cpu-us 1000:3000 \
		--addr-base $((seed * 1000000)) --addr-range 100000 --hot 6 --hot-frac 0.6 --size-kb 1:16 \
		--seed $seed --out "$out/requests-$ce.csv" >"$out/load-$ce.txt" 2>"$out/load-$ce.log" &
	loads+=($!); tb_pids+=($!)
	seed=$((seed + 1))
done
load_ok=1
for p in "${loads[@]}"; do wait "$p" || load_ok=0; tb_forget "$p"; done
read -r busy1 steal1 < <(tb_cpu_ticks)
cat "$out"/load-*.txt
[ $load_ok -eq 1 ] || { cat "$out"/load-*.log >&2; echo "twotier: a load generator reported errors" >&2; exit 1; }
tb_twotier_stop
grep -E '^(cache|workers)' "$out/tb-front.log"
tb_rametr_stop

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
