#!/usr/bin/env bash
# scripts/fig8.sh - seed 000 Fig. 8 (§7.3.1.2) on this host: throttling the CE
# that overloads a shared server, driven by an attribution.
#
# On the namespace hosts of scripts/netns.sh, tb-server (a thread per
# connection) on host fe is shared by three CEs on hosts c1, c2, c3:
#   c1  steady: 50 req/s x 2 ms CPU
#   c2  ramps CPU-heavy load: 4 stages of 250 req/s x 3 ms, the k-th starting
#       at k/5 of the run, until the server saturates
#   c3  latency-sensitive: 40 req/s x 1 ms; warning level 300 ms, SLA 600 ms
# watched by rametr-collector --netns rm-fe (node db1: only the server host's
# threads) and rametr-aggregator in the root namespace, in three modes:
#   off     no control
#   lr      the aggregator's overload rule (seed 002 Table 4: EWMA a=0.7, 85%,
#           x0.9 / +1%, each change held until the collector applied it) on
#           per-CE CPU estimated by LR from per-CE inbound bytes (seed 000 eq. 2)
#   rametr  the same rule on Rametr's own per-CE accounting
# with the collector enforcing the caps per thread (--throttle cgroup).
# --server eventloop runs tb-server --event-loop (one thread serves every
# connection) instead, c2's stages at 80 req/s, and the collector enforces
# by admission throttling (--throttle tc:rmv-fe:egress, the root-side veth
# of host fe): one thread is at most half of the 2-CPU capacity, so use a
# threshold below 50% there (e.g. --threshold 40).
# The threshold can be lowered with --threshold when other load on the
# machine keeps the server from reaching 85% (it is printed). The collector
# and the aggregator run at nice --nice (default -10): the control plane
# must not be starved by the load it polices (a saturated server here has
# ~130 runnable threads on 2 CPUs; at nice 0 a decision took seconds).
# The server, the collector and the aggregator each run in their own session
# (setsid: their own autogroup, as services would), not in the one of the
# six load generators: with autogroups on, a session shares one weight, and
# on a machine shared with other jobs the event-loop server got 0.1-0.5 CPU.
#
# Prints, per mode: c3's p95 latency over the saturated phase (the last 2/5
# of the run, c2 at full ramp) and the share of c3 requests above 300 and
# 600 ms; c1's and c3's goodput in that phase (completed / offered); c2's
# CPU share per window against the cap in force during that window (from
# the times the collector applied each cap, time-weighted when it changed
# inside the window; windows with no cap for part of them are left out):
# windows within +-5 percentage points, above and below, and how long a
# decision took to be in force; the decisions.
# Writes DIR/fig8.svg: c3's p95 latency per second for the three modes, and
# DIR/MODE/c2-windows.txt: c2's share and cap per throttled window.
#
# Usage: scripts/fig8.sh [--duration S] [--out DIR] [--modes "off lr rametr"]
#          [--build DIR] [--threshold PCT] [--server thread|eventloop] [--nice N]
# Needs root (cgroups, BPF). Exit 0 if it ran; the figures are to be read.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
duration=60 out=/tmp/rametr-fig8 modes="off lr rametr" build="" threshold=85 server=thread cnice=-10
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) duration=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--modes) modes=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	--threshold) threshold=$2; shift 2 ;;
	--server) server=$2; shift 2 ;;
	--nice) cnice=$2; shift 2 ;;
	-h|--help) sed -n '2,47p' "$0"; exit 0 ;;
	*) echo "fig8: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
case "$server" in
thread) srv_args=() enforce=cgroup c2rate=250 ;;
eventloop) srv_args=(--event-loop) enforce=tc:rmv-fe:egress c2rate=80 ;;
*) echo "fig8: bad --server '$server' (thread or eventloop)" >&2; exit 2 ;;
esac
case "$duration" in ''|*[!0-9]*) echo "fig8: bad --duration '$duration'" >&2; exit 2 ;; esac
case "$cnice" in ''|*[!0-9-]*) echo "fig8: bad --nice '$cnice'" >&2; exit 2 ;; esac
[ "$duration" -ge 20 ] || { echo "fig8: --duration must be at least 20 s" >&2; exit 2; }
if [ "$(id -u)" -ne 0 ]; then
	echo "fig8: needs root (cgroups and BPF)" >&2
	exit 1
fi
if [ -z "$build" ]; then
	build=$top/build
	cmake -S "$top" -B "$build" >/dev/null
	cmake --build "$build" -j2 >/dev/null
fi
AGG=$build/aggregator/rametr-aggregator COL=$build/collector/rametr-collector
SRV=$build/testbed/tb-server LOAD=$build/testbed/tb-load CTL=$build/ctl/rametrctl
ncpu=$(nproc)
out=$(realpath -m "$out")
mkdir -p "$out"
NETNS="bash $top/scripts/netns.sh"
fe=$($NETNS addr fe)

pids=() own_hosts=0
cleanup() {
	local p rc=$?
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
	if [ $own_hosts -eq 1 ]; then $NETNS down >/dev/null || rc=1; fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One user of the hosts at a time (twotier.sh, the integration tests).
exec 8>"$($NETNS session-lock)"
if ! flock -n 8; then
	echo "fig8: the testbed hosts are in use; waiting (at most 15 min)" >&2
	flock -w 900 8 || { echo "fig8: the testbed hosts stayed busy" >&2; exit 1; }
fi
own_hosts=1
$NETNS down >/dev/null
$NETNS up >/dev/null

# run_mode MODE: one run; leaves DIR/MODE/{c1,c2-*,c3}.csv, rametr.db, t0
run_mode() {
	local mode=$1 d=$out/$1 port k start agg col srv loads=()
	rm -rf "$d"
	mkdir -p "$d"
	port=$((20000 + RANDOM % 20000))
	{
		echo "[aggregator]"
		echo "listen = ipc://$d/agg.ipc"
		for k in c1 c2 c3; do
			echo "[ce $k]"; echo "client = $($NETNS addr $k)"; echo "server_port = $port"
		done
		if [ "$mode" != off ]; then
			echo "[throttle]"
			echo "overload = on"
			echo "threshold = $threshold%"
			echo "alpha = 0.7"
			echo "lease = 5s"
			echo "settle = 1s"
			echo "source = $mode"
		fi
	} > "$d/agg.ini"
	setsid nice -n "$cnice" "$AGG" --config "$d/agg.ini" --db "$d/rametr.db" > "$d/agg.log" 2>&1 &
	agg=$!; pids+=("$agg")
	setsid nice -n "$cnice" "$COL" --aggregator "ipc://$d/agg.ipc" --node db1 --spool "$d/spool" --netns rm-fe \
		--throttle "$([ "$mode" = off ] && echo off || echo "$enforce")" > "$d/col.log" 2>&1 &
	col=$!; pids+=("$col")
	$NETNS exec fe setsid "$SRV" --listen "$fe:$port" --truth "$d/truth.csv" "${srv_args[@]}" > "$d/srv.log" 2>&1 &
	srv=$!; pids+=("$srv")
	sleep 1.5
	start=$(date +%s%N)
	echo "$start" > "$d/t0"
	$NETNS exec c1 "$LOAD" --server "$fe:$port" --bind "$($NETNS addr c1)" --ce c1 --rate 50 --cpu-us 2000:2000 \
		--duration "$duration" --conns 16 --out "$d/c1.csv" > "$d/c1.out" 2>&1 &
	loads+=($!); pids+=($!)
	$NETNS exec c3 "$LOAD" --server "$fe:$port" --bind "$($NETNS addr c3)" --ce c3 --rate 40 --cpu-us 1000:1000 \
		--duration "$duration" --conns 16 --out "$d/c3.csv" > "$d/c3.out" 2>&1 &
	loads+=($!); pids+=($!)
	for k in 0 1 2 3; do
		(
			sleep $((k * duration / 5))
			exec $NETNS exec c2 "$LOAD" --server "$fe:$port" --bind "$($NETNS addr c2)" --ce c2 --rate "$c2rate" \
				--cpu-us 3000:3000 --duration $((duration - k * duration / 5)) --conns 32 \
				--seed $((k + 7)) --out "$d/c2-$k.csv" > "$d/c2-$k.out" 2>&1
		) &
		loads+=($!); pids+=($!)
	done
	for k in "${loads[@]}"; do wait "$k" || true; done
	sleep 2
	kill "$srv" "$col" 2>/dev/null || true
	wait "$srv" "$col" 2>/dev/null || true
	kill "$agg" 2>/dev/null || true
	wait "$agg" 2>/dev/null || true
	pids=()
}

# analyse MODE: prints the figures; writes DIR/MODE/c3-p95.txt (second p95_ms)
analyse() {
	local mode=$1 d=$out/$1 t0 sat_from end
	t0=$(cat "$d/t0")
	sat_from=$((t0 + 3 * duration * 1000000000 / 5))
	end=$((t0 + duration * 1000000000))
	# c3 per-second p95 (by send time)
	awk -F, -v t0="$t0" 'NR > 1 { printf "%d %.3f\n", int(($1 - t0) / 1e9), $2 / 1e6 }' "$d/c3.csv" |
		sort -k1,1n -k2,2g |
		awk '{ if ($1 != b && n) { i = int(0.95 * n + 0.999); print b, v[i]; n = 0 }
		       b = $1; v[++n] = $2 }
		     END { if (n) { i = int(0.95 * n + 0.999); print b, v[i] } }' > "$d/c3-p95.txt"
	# c3 in the saturated phase: p95, above warning / SLA
	awk -F, -v a="$sat_from" -v e="$end" 'NR > 1 && $1 >= a && $1 < e { print $2 / 1e6 }' "$d/c3.csv" |
		sort -g | awk -v mode="$mode" '{ v[++n] = $1; if ($1 > 300) w++; if ($1 > 600) s++ }
		END { if (!n) { printf "%-7s c3: no requests in the saturated phase\n", mode; exit }
		      i = int(0.95 * n + 0.999)
		      printf "%-7s c3 saturated phase: p95 %.1f ms, p50 %.1f ms, %.1f%% > 300 ms, %.1f%% > 600 ms (%d requests)\n",
		             mode, v[i], v[int(0.5 * n + 0.999)], 100 * w / n, 100 * s / n, n }'
	# goodput of c1 and c3 in the saturated phase: completed there / offered there
	for ce in c1 c3; do
		awk -F, -v a="$sat_from" -v e="$end" -v ce="$ce" -v mode="$mode" \
			'NR > 1 { if ($1 >= a && $1 < e) off++; c = $1 + $2; if (c >= a && c < e) done++ }
			 END { if (off) printf "%-7s %s goodput in the saturated phase: %.1f%% of offered (%d of %d)\n",
			                       mode, ce, 100 * done / off, done, off }' "$d/$ce.csv"
	done
	# c2 against the cap in force during each window, once throttled: the
	# collector logs "cap N in force at T" (Unix ns) whenever it applies a cap
	# or drops one (release, expiry); a window counts if a cap was in force
	# throughout it and is compared with the time-weighted mean of the caps in
	# force during it (windows where it changed are counted apart as well)
	"$CTL" throttle list --db "$d/rametr.db" --ce c2 -o csv > "$d/throttle.csv"
	"$CTL" usage --db "$d/rametr.db" --resource cpu --ce c2 --per-window -o csv > "$d/c2-usage.csv"
	sed -n "s/.*CE 'c2'.*command \\([0-9]*\\)[^0-9]*cap \\([0-9]*\\) in force at \\([0-9]*\\).*/\\3,\\2,\\1/p" "$d/col.log" |
		sort -t, -k1,1n > "$d/c2-caps.txt"
	# per second: did c2's cap bind (CFS periods throttled / bytes dropped)?
	sed -n "s/.*CE 'c2' cap [0-9]* bound \\([0-9]*\\) of [0-9]* [a-z]* in second \\([0-9]*\\).*/\\2,\\1/p" \
		"$d/col.log" > "$d/c2-bound.txt"
	awk -F, -v ncpu="$ncpu" -v mode="$mode" -v end="$end" -v out="$d/c2-windows.txt" '
		FILENAME ~ /caps.txt$/ { ne++; et[ne] = $1; ec[ne] = $2; eid[ne] = $3; next }
		FILENAME ~ /bound.txt$/ { bound[$1] = $2; next }
		FILENAME ~ /throttle.csv$/ { if (FNR > 1) created[$1] = $2; next }
		FNR == 1 { next }
		$2 == "c2" { ws = $7; wl = $8; we = ws + wl
			if (we > end) next
			c = 0; for (i = 1; i <= ne && et[i] <= ws; i++) c = ec[i]
			if (c <= 0) next
			# time-weighted cap over [ws, we); not throttled throughout: skip
			t = ws; sum = 0; chg = 0; ok = 1
			for (; i <= ne && et[i] < we; i++) {
				sum += c * (et[i] - t); t = et[i]; if (ec[i] != c) chg = 1; c = ec[i]
				if (c <= 0) ok = 0 }
			if (!ok) next
			sum += c * (we - t); cap = sum / wl
			share = 1000 * $4 / (ncpu * wl); dev = share - cap; n++
			if (chg) nchg++
			if (dev <= 50 && dev >= -50) { within++; if (chg) wchg++ }
			if (dev > 50) over++
			sec = sprintf("%d", ws / 1e9)
			if (dev < -50) { under++; if ((sec in bound) && bound[sec] == 0) loose++ }
			sd += (dev < 0 ? -dev : dev)
			printf "%d share %.1f%% cap %.1f%%%s%s\n", ws / 1e9, share / 10, cap / 10, chg ? " (changed)" : "",
			       (sec in bound) ? (bound[sec] ? " bound" : " not bound") : "" > out }
		END { for (i = 1; i <= ne; i++) if (eid[i] in created && ec[i] > 0) { lag[++nl] = (et[i] - created[eid[i]]) / 1e9 }
		      if (!n) { printf "%-7s c2: never throttled throughout a window (%d caps applied)\n", mode, ne; exit }
		      printf "%-7s c2 vs the cap in force, %d throttled windows: %.0f%% within +-5 pp (%d above, %d below), mean |share - cap| %.1f pp; %d windows with a cap change inside (%d within)\n",
		             mode, n, 100 * within / n, over, under, sd / n / 10, nchg, wchg
		      printf "        of the %d below: %d in seconds where the cap did not bind (the enforcer held nothing back)\n", under, loose
		      if (nl) { for (i = 1; i <= nl; i++) for (j = i + 1; j <= nl; j++) if (lag[j] < lag[i]) { x = lag[i]; lag[i] = lag[j]; lag[j] = x }
		                printf "        a cap was in force %.2f s (median; max %.2f s) after the decision, %d caps applied\n", lag[int((nl + 1) / 2)], lag[nl], nl } }' \
		"$d/c2-caps.txt" "$d/c2-bound.txt" "$d/throttle.csv" "$d/c2-usage.csv"
	awk -F, 'NR > 1 && $9 != "refused" { n++; if ($7 > 0) on++ } END { if (n) printf "        %d decisions (%d caps, %d releases)\n", n, on, n - on }' "$d/throttle.csv"
}

svg() {
	local f=$out/fig8.svg
	{
		echo '<svg xmlns="http://www.w3.org/2000/svg" width="760" height="420" font-family="sans-serif" font-size="12">'
		echo '<rect width="760" height="420" fill="white"/>'
		echo "<text x=\"380\" y=\"20\" text-anchor=\"middle\">c3 p95 latency per second (tb-server, $server, c2 ramping; seed 000 Fig. 8)</text>"
		awk -v D="$duration" 'BEGIN {
			x0 = 60; y0 = 370; w = 660; h = 320; ymax = 1500
			printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x0 + w, y0
			printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x0, y0 - h
			for (t = 0; t <= D; t += 10) printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", x0 + w * t / D, y0 + 16, t
			for (l = 0; l <= ymax; l += 300) printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d</text>\n", x0 - 4, y0 - h * l / ymax + 4, l
			printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"orange\" stroke-dasharray=\"4,4\"/><text x=\"%d\" y=\"%.1f\" fill=\"orange\">warning 300 ms</text>\n", x0, y0 - h * 300 / ymax, x0 + w, y0 - h * 300 / ymax, x0 + w - 100, y0 - h * 300 / ymax - 4
			printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"red\" stroke-dasharray=\"4,4\"/><text x=\"%d\" y=\"%.1f\" fill=\"red\">SLA 600 ms</text>\n", x0, y0 - h * 600 / ymax, x0 + w, y0 - h * 600 / ymax, x0 + w - 100, y0 - h * 600 / ymax - 4
			printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">seconds</text>\n", x0 + w / 2, y0 + 34
			printf "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" text-anchor=\"middle\">ms</text>\n", y0 - h / 2, y0 - h / 2 }'
		local i=0 color mode
		for mode in $modes; do
			case $mode in off) color=gray ;; lr) color=blue ;; *) color=green ;; esac
			[ -s "$out/$mode/c3-p95.txt" ] || continue
			awk -v D="$duration" -v c="$color" -v m="$mode" -v i="$i" '
				BEGIN { x0 = 60; y0 = 370; w = 660; h = 320; ymax = 1500; printf "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", c }
				$1 >= 0 && $1 <= D { y = $2 > ymax ? ymax : $2; printf "%.1f,%.1f ", x0 + w * $1 / D, y0 - h * y / ymax }
				END { printf "\"/>\n<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>\n", x0 + 10 + 80 * i, 44, c, m }' "$out/$mode/c3-p95.txt"
			i=$((i + 1))
		done
		echo '</svg>'
	} > "$f"
	echo "wrote $f"
}

for m in $modes; do
	case $m in off|lr|rametr) ;; *) echo "fig8: unknown mode '$m' (off, lr, rametr)" >&2; exit 2 ;; esac
	echo "fig8: running mode $m for $duration s ..." >&2
	run_mode "$m"
done
echo "fig8: server tb-server ($([ "$server" = thread ] && echo "thread per connection, enforcement cgroup" || echo "event loop, enforcement tc admission")) on host fe, ${duration} s per mode, overload threshold ${threshold}%"
for m in $modes; do
	analyse "$m"
done
svg
