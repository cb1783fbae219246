#!/usr/bin/env bash
# bench/hooks_pair.sh - the kernel hooks of two builds compared on the very
# same events: both builds' bench_attach --profile attached at once (each
# loads its own programs and maps; the kernel runs both programs on every
# event, one after the other), under bench_pingpong (25k round trips/s,
# 4 s). The program that runs second finds the socket and task already in
# cache and reads ~25-60 ns cheaper per run, so every pairing runs in both
# orders and each build's figure is its mean ns/run over both positions.
# A build against itself differs by a few ns this way, where alternating
# runs of one build move by 30 ns and more on this machine.
# Prints each pairing's raw lines (position, A or B, hook, ns/run), then
# per build and hook:
#   mean A|B HOOK NS
# Usage: bench/hooks_pair.sh BUILD_A BUILD_B [STAGE (full)] [PAIRS (2)]
#   BUILD_*: build trees (bench/bench_attach inside); STAGE: bench_attach
#   --stage (hooks clock task state noemit full)
set -u
[ $# -ge 2 ] || { sed -n '2,16p' "$0"; exit 2; }
A=$1/bench/bench_attach B=$2/bench/bench_attach stage=${3:-full} n=${4:-2}
top=$(cd "$(dirname "$0")/.." && pwd)
pp=$top/build/bench/bench_pingpong
[ -x "$pp" ] || pp=$1/bench/bench_pingpong
for x in "$A" "$B" "$pp"; do [ -x "$x" ] || { echo "hooks_pair: no '$x'" >&2; exit 2; }; done
out=$(mktemp -d /tmp/hooks_pair.XXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
attach() { # binary log: starts it, waits until attached
	"$1" --stage "$stage" --profile >"$2" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do grep -q "attach: ready" "$2" && return 0; sleep 0.1; done
	cat "$2" >&2; echo "hooks_pair: '$1' did not attach" >&2; exit 1
}
pair() { # first-binary first-label second-binary second-label
	local port=$((20000 + RANDOM % 12000))
	pids=()
	attach "$1" "$out/first.log"
	attach "$3" "$out/second.log"
	"$pp" --port "$port" --rate 25000 --duration 4 >/dev/null || { echo "hooks_pair: bench_pingpong failed" >&2; exit 1; }
	kill -INT "${pids[@]}"; wait "${pids[@]}"; pids=()
	for pos in first second; do
		b=$([ $pos = first ] && echo "$2" || echo "$4")
		awk -v pos=$pos -v b="$b" '$2 == "prog" && $3 ~ /^rm_(sock|sched_switch)/ {
			sub("ns_per_run=", "", $5); print pos, b, $3, $5 }' "$out/$pos.log"
	done
}
for ((i = 0; i < n; i++)); do
	pair "$A" A "$B" B >>"$out/raw.txt"
	pair "$B" B "$A" A >>"$out/raw.txt"
done
cat "$out/raw.txt"
awk '{ s[$2 " " $3] += $4; c[$2 " " $3]++ } END { for (k in s) printf "mean %s %.1f\n", k, s[k] / c[k] }' "$out/raw.txt" | sort
rm -rf "$out"
