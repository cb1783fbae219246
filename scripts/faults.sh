#!/usr/bin/env bash
# scripts/faults.sh - the fault suite: three namespace hosts (c1, c2, c3 of
# scripts/netns.sh) each run a rametr-collector replaying a generated event
# stream with known per-window totals to one rametr-aggregator in the root
# namespace (tcp on the bridge address); one fault is applied per row, and
# the stored database is compared with the streams' truth, window by window.
# Prints one table row per fault: parts the collectors produced (their own
# exit summaries), parts the aggregator applied (its exit summaries), windows
# balanced (rametrctl check), the aggregator's memory peak (VmHWM), and the
# verdict: "0 lost, 0 double-counted", or the exact amounts charged to V with
# their reasons, or what was lost / counted twice.
#
# Usage: scripts/faults.sh [--quick] [--build DIR] [--out DIR] [--only ROW]
#   --quick      N=3 kills, short outage, a few seconds per fault (ctest)
#   --build DIR  build directory (default: build)
#   --out DIR    keep logs, streams and databases in DIR (default: a
#                temporary directory, removed at exit)
#   --only ROWS  run these rows (comma-separated): agg-kill col-kill outage disk-full net-cut
#                clock-skew flood
# Exit 0 if every row is "0 lost, 0 double-counted" or fully charged to V,
# 1 otherwise. Needs root (namespaces, tmpfs); takes the testbed's session
# lock (scripts/netns.sh); every process, mount and namespace it made is
# removed at exit, also on failure.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build quick=0 out="" only="" keep=0
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 ;;
	--build) B=$(cd "$2" && pwd); shift ;;
	--out) out=$2; keep=1; shift ;;
	--only) only=$2; shift ;;
	-h|--help) sed -n '2,24p' "$0"; exit 0 ;;
	*) echo "faults: unknown option '$1'" >&2; exit 2 ;;
	esac
	shift
done
[ "$(id -u)" -eq 0 ] || { echo "faults: run as root (namespaces, tmpfs)" >&2; exit 2; }
AGG=$B/aggregator/rametr-aggregator COL=$B/collector/rametr-collector CTL=$B/ctl/rametrctl
for p in "$AGG" "$COL" "$CTL"; do [ -x "$p" ] || { echo "faults: '$p' not built" >&2; exit 2; }; done

if [ "$quick" -eq 1 ]; then
	NKILL=3 OUTAGE=8 NREQ=3000 CUT=3 FLOOD_IDLE=300 FLOOD_BIG=8 FLOOD_MIB=8
else
	NKILL=20 OUTAGE=300 NREQ=6000 CUT=20 FLOOD_IDLE=900 FLOOD_BIG=16 FLOOD_MIB=60
fi
HOSTS=(c1 c2 c3)
OFFSET=1700000000000000000
PORT=7390
BR=10.213.0.1
URL=tcp://$BR:$PORT
BATCH=7 # parts per batch: hundreds of acknowledged batches per stream

tb_name=faults
# shellcheck source=scripts/testbed-lib.sh
. "$top/scripts/testbed-lib.sh"
tb_init
mounts=() made_out=0
if [ -z "$out" ]; then out=$(mktemp -d /tmp/rametr-faults.XXXXXX); made_out=1; fi
mkdir -p "$out"
f_cleanup() {
	local rc=$? p m
	trap - EXIT
	for p in "${tb_pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done
	for p in "${tb_pids[@]}"; do wait "$p" 2>/dev/null || true; done
	for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
	if [ "$tb_own_hosts" -eq 1 ]; then $NETNS down >/dev/null || rc=1; fi
	if [ "$made_out" -eq 1 ] && [ "$keep" -eq 0 ]; then rm -rf "$out"; fi
	exit $rc
}
trap f_cleanup EXIT

# ---- streams and their truth ----

# gen EVENTS TRUTH NREQ T0_S SKEW_S TID: NREQ requests round-robin over CEs
# t1..t3 (clients 10.9.0.1..3), one every 20 ms from T0_S seconds; each a
# switch-in, recv of 64 bytes, d ns of CPU, send of 512 bytes, switch-out. The
# ns before the recv is the request's head and the ns after the send its tail
# (segmenter.h): both the CE's, except a thread's first head in a stream (the
# thread has no state yet), which is V 'unsegmented'. The header's offset is SKEW_S seconds
# ahead of the others' (the host's clock). TRUTH gets "window ce resource
# value" per window (window = seconds since OFFSET) and CE, V as "V:reason".
gen() {
	awk -v nreq="$3" -v t0="$4" -v skew="$5" -v tid0="$6" -v off="$OFFSET" -v ev="$1" -v tr="$2" 'BEGIN {
		printf "rametr-events 1 window_ns=1000000000 offset_ns=%s ncpu=1\n", \
			sprintf("%.0f", off / 1e9 + skew) "000000000" > ev
		t = t0 * 1e9 + 1000000
		for (k = 0; k < nreq; k++) {
			c = k % 3; tid = tid0 + c; d = 1000000 + (k * 7919 % 1000) * 1000
			printf "%.0f 0 switch prev=0 prev_state=R next=%.0f next_pid=%.0f\n", t, tid, tid0 > ev
			printf "%.0f 0 recv tid=%.0f pid=%.0f comm=srv sock=%.0f fam=4 laddr=10.8.0.1:7000 raddr=10.9.0.%.0f:4000%.0f bytes=64\n", t + 1, tid, tid0, 10 + c, c + 1, c > ev
			printf "%.0f 0 send tid=%.0f pid=%.0f sock=%.0f fam=4 laddr=10.8.0.1:7000 raddr=10.9.0.%.0f:4000%.0f bytes=512\n", t + 1 + d, tid, tid0, 10 + c, c + 1, c > ev
			printf "%.0f 0 switch prev=%.0f prev_state=S next=0\n", t + 2 + d, tid > ev
			w = skew + int(t / 1e9); ce = "t" (c + 1)
			cpu[w, ce] += d + 1 + (k >= 3); rx[w, ce] += 64; tx[w, ce] += 512; if (k < 3) un[w] += 1
			t += 20000000
		}
		for (k in cpu) { split(k, a, SUBSEP); printf "%.0f %s 0 %.0f\n%.0f %s 1 %.0f\n%.0f %s 2 %.0f\n", a[1], a[2], cpu[k], a[1], a[2], rx[k], a[1], a[2], tx[k] > tr }
		for (w in un) printf "%.0f V:unsegmented 0 %.0f\n", w, un[w] > tr
	}'
}

# Seconds one stream of NREQ requests spans (whole windows, one spare).
span_s() { echo $(( $1 * 20 / 1000 + 2 )); }

write_config() {
	printf '[aggregator]\nhorizon = 60s\n[ce t1]\nclient = 10.9.0.1\n[ce t2]\nclient = 10.9.0.2\n[ce t3]\nclient = 10.9.0.3\n' >"$1"
}

# ---- processes ----

agg_pid="" agg_hwm=0 agg_n=0
# agg_start DIR: the aggregator on the bridge address, database DIR/db/rametr.db.
agg_start() {
	local d=$1
	agg_n=$((agg_n + 1))
	"$AGG" --config "$d/agg.ini" --db "$d/db/rametr.db" --listen "$URL" >"$d/aggregator-$agg_n.log" 2>&1 &
	agg_pid=$!; tb_pids+=("$agg_pid")
	tb_wait_log "$d/aggregator-$agg_n.log" "listening on" $agg_pid
}
# Reads the running aggregator's VmHWM (kB) into agg_hwm (the largest seen).
agg_sample() {
	local h
	h=$(awk '/^VmHWM:/ { print $2 }' "/proc/$agg_pid/status" 2>/dev/null || echo 0)
	[ -n "$h" ] && [ "$h" -gt "$agg_hwm" ] && agg_hwm=$h
	return 0
}
agg_kill() { agg_sample; kill -KILL "$agg_pid" 2>/dev/null || true; wait "$agg_pid" 2>/dev/null || true; tb_forget "$agg_pid"; }
agg_stop() {
	agg_sample
	tb_stop "$agg_pid" aggregator "$1/aggregator-$agg_n.log"
}

declare -A col_pid col_n
# col_start DIR HOST EVENTS: a collector inside HOST's namespace (spool DIR/spool-HOST).
col_start() {
	local d=$1 h=$2
	col_n[$h]=$(( ${col_n[$h]:-0} + 1 ))
	ip netns exec "rm-$h" "$COL" --aggregator "$URL" --node "$h" --backend replay --events "$3" \
		--spool "$d/spool-$h" --batch-parts "$BATCH" --no-merge >"$d/collector-$h-${col_n[$h]}.log" 2>&1 &
	col_pid[$h]=$!; tb_pids+=($!)
}
# col_wait HOST [SECONDS]: wait for HOST's collector; fails if it exits
# non-zero, unless it spooled what the aggregator did not acknowledge.
col_wait() {
	local h=$1 lim=${2:-300} i rc=0
	for i in $(seq 1 $((lim * 10))); do
		kill -0 "${col_pid[$h]}" 2>/dev/null || break
		[ $((i % 10)) -eq 0 ] && agg_sample
		sleep 0.1
	done
	if kill -0 "${col_pid[$h]}" 2>/dev/null; then
		echo "faults: collector $h still running after ${lim}s" >&2
		kill -KILL "${col_pid[$h]}" 2>/dev/null || true
	fi
	wait "${col_pid[$h]}" || rc=$?
	tb_forget "${col_pid[$h]}"
	# exit 3 (1 before the exit statuses were split) with its batches kept
	# in the spool: a collector that could not deliver in time;
	# deliver_spools hands them on
	if { [ $rc -eq 3 ] || [ $rc -eq 1 ]; } && grep -q "unacked batches kept in spool" "$d/collector-$h-${col_n[$h]}.log"; then
		return 0
	fi
	[ $rc -eq 0 ] || echo "faults: collector $h exited $rc" >&2
	return $rc
}
col_kill() { kill -KILL "${col_pid[$1]}" 2>/dev/null || true; wait "${col_pid[$1]}" 2>/dev/null || true; tb_forget "${col_pid[$1]}"; }
running() { kill -0 "$1" 2>/dev/null; }
# A random delay of 20..(20+$1) ms, as seconds for sleep.
rnd_sleep() { sleep "$(awk -v r=$((RANDOM % $1 + 20)) 'BEGIN { printf "%.3f", r / 1000 }')"; }

# ---- one row ----

# row_begin NAME: fresh directory, config, database directory and counters.
row_begin() {
	row=$1 d=$out/$1
	rm -rf "$d"; mkdir -p "$d/db"
	write_config "$d/agg.ini"
	agg_hwm=0 agg_n=0 note=""
	col_n=()
	: >"$d/truth"
}
# stream ROWDIR HOST NAME NREQ T0_S [SKEW_S]: writes DIR/NAME.events, adds to the truth of HOST.
stream() {
	local d=$1 h=$2
	gen "$d/$3.events" "$d/$3.truth" "$4" "$5" "${6:-0}" $(( 100 + ${h#c} * 10 ))
	sed "s/^/$h /" "$d/$3.truth" >>"$d/truth"
}
empty_stream() { echo "rametr-events 1 window_ns=1000000000 offset_ns=$OFFSET ncpu=1" >"$1"; }

# row_end: compares the database with the truth and prints the row. What
# the truth has and the database lacks in a window is LOST, unless V
# 'collector_restart' of that window (a killed collector's open windows,
# measured by the next instance) holds it.
row_end() {
	local db=$d/db/rametr.db produced applied chk verdict h q
	produced=$(cat "$d"/collector-*.log 2>/dev/null | awk '/sent [0-9]+ parts/ { for (i = 1; i <= NF; i++) if ($i == "sent") p += $(i + 1) } END { print p + 0 }')
	applied=$(cat "$d"/aggregator-*.log | awk '/applied [0-9]+ batches/ { for (i = 1; i <= NF; i++) if ($i == "parts") p += $(i - 1) } END { print p + 0 }')
	[ "$(grep -l 'applied [0-9]* batches' "$d"/aggregator-*.log | wc -l)" -eq "$agg_n" ] || applied="$applied+"
	[ "$(grep -l 'sent [0-9]* parts' "$d"/collector-*.log | wc -l)" -eq "$(ls "$d"/collector-*.log | wc -l)" ] || produced="$produced+"
	if "$CTL" check --db "$db" >"$d/check.out" 2>&1; then
		chk="$(awk '/windows checked/ { print $1 "/" $1 }' "$d/check.out")"
	else
		chk="$(awk '/windows checked/ { print $1 - $4 "/" $1 }' "$d/check.out") UNBALANCED"
	fi
	: >"$d/stored"
	for h in "${HOSTS[@]}"; do
		q="SELECT '$h', (win_start - $OFFSET) / 1000000000, ce, resource, SUM(value) FROM usage
		     WHERE server = '$h' AND win_len = 1000000000 GROUP BY 2, 3, 4
		   UNION ALL SELECT '$h', (win_start - $OFFSET) / 1000000000, 'V:' || reason, resource, SUM(value)
		     FROM unacct WHERE server = '$h' AND win_len = 1000000000 GROUP BY 2, 3, 4;"
		sqlite3 -separator ' ' "$db" "$q" >>"$d/stored"
	done
	verdict=$(awk '
		FILENAME == ARGV[1] { T[$1 " " $2 " " $3 " " $4] = $5; next }
		{ S[$1 " " $2 " " $3 " " $4] = $5 }
		END {
			# per (host, window, resource): what the truth has that is not
			# stored, and what V holds beyond the truth, by reason
			for (k in T) {
				split(k, a, " "); s = (k in S) ? S[k] : 0; t = T[k]
				if (s < t) short[a[1] " " a[2] " " a[4]] += t - s
			}
			for (k in S) {
				split(k, a, " "); t = (k in T) ? T[k] : 0; s = S[k]
				if (s <= t) continue
				if (a[3] ~ /^V:/) vx[a[1] " " a[2] " " a[4], substr(a[3], 3)] += s - t
				else dbl[a[4]] += s - t
			}
			# V collector_restart is what a killed collector left open: it
			# stands for the shortfall of its own window, no more
			for (k in vx) {
				split(k, b, SUBSEP); split(b[1], a, " "); r = a[3]
				if (b[2] == "collector_restart") {
					m = vx[k] < short[b[1]] ? vx[k] : short[b[1]]
					short[b[1]] -= m; vr["collector_restart", r] += m
					if (vx[k] > m) dbl[r] += vx[k] - m
				} else {
					vr[b[2], r] += vx[k]
				}
			}
			for (k in short) { split(k, a, " "); lost[a[3]] += short[k] }
			name[0] = "cpu ns"; name[1] = "rx B"; name[2] = "tx B"
			out = ""
			for (r = 0; r < 3; r++) if (lost[r]) out = out sprintf("%sLOST %.0f %s", out ? "; " : "", lost[r], name[r])
			for (r = 0; r < 3; r++) if (dbl[r]) out = out sprintf("%sDOUBLE %.0f %s", out ? "; " : "", dbl[r], name[r])
			v = ""
			for (k in vr) if (vr[k]) { split(k, b, SUBSEP); v = v sprintf("%sV %.0f %s %s", v ? "; " : "", vr[k], name[b[2]], b[1]) }
			if (out == "" && v == "") out = "0 lost, 0 double-counted"
			else if (out == "") out = v " (charged to V; nothing else lost or doubled)"
			else if (v != "") out = out "; " v
			print out
		}' "$d/truth" "$d/stored")
	printf '%-10s | %9s | %9s | %-18s | %7d | %s%s\n' "$row" "$produced" "$applied" "$chk" "$((agg_hwm / 1024))" \
		"$verdict" "${note:+ [$note]}" | tee -a "$out/table"
	case "$verdict" in
	"0 lost, 0 double-counted"*) ;;
	V\ *"(charged to V; nothing else lost or doubled)"*) ;;
	*) failed=1 ;;
	esac
	case "$chk" in *UNBALANCED*) failed=1 ;; esac
}

# deliver_spools: a replaying collector exits when its stream ends; if the
# fault outlasted its wait for acknowledgements, it kept the batches in its
# spool. A new instance on the same spool (an empty stream) delivers them,
# as a restarted collector would.
deliver_spools() {
	local h hs=()
	for h in "${HOSTS[@]}"; do
		[ -s "$d/spool-$h" ] || continue
		[ -f "$d/empty.events" ] || empty_stream "$d/empty.events"
		col_start "$d" "$h" "$d/empty.events"; hs+=("$h")
	done
	[ ${#hs[@]} -gt 0 ] || return 0
	for h in "${hs[@]}"; do col_wait "$h" || note="${note:+$note, }collector $h failed delivering its spool"; done
	note="${note:+$note, }spool of ${hs[*]} delivered by a restarted collector"
}

# row_finish NOTE: waits for every host's collector, delivers what they
# spooled, stops the aggregator, prints the row.
row_finish() {
	local h
	for h in "${HOSTS[@]}"; do col_wait "$h" || note="${note:+$note, }collector $h failed"; done
	deliver_spools
	agg_stop "$d"
	note="${note:+$note, }$1"
	row_end
}

# ---- the faults ----

# Aggregator SIGKILLed at NKILL random moments while all three stream.
row_agg_kill() {
	local h k landed=0
	row_begin agg-kill
	# long enough that every kill lands while the streams still run
	for h in "${HOSTS[@]}"; do stream "$d" "$h" "$h" $((NREQ * NKILL / 3)) 0; done
	agg_start "$d"
	for h in "${HOSTS[@]}"; do col_start "$d" "$h" "$d/$h.events"; done
	for k in $(seq 1 "$NKILL"); do
		rnd_sleep 250
		running "${col_pid[c1]}" || running "${col_pid[c2]}" || running "${col_pid[c3]}" || break
		agg_kill; landed=$((landed + 1))
		rnd_sleep 100
		agg_start "$d"
	done
	row_finish "$landed/$NKILL kills mid-stream"
}

# One host's collector SIGKILLed at NKILL random moments; each time a new
# instance (same node, same spool) replays the next stretch of the host's
# time, as a restarted collector sees only what happens after its start.
row_col_kill() {
	local h k span landed=0
	row_begin col-kill
	span=$(span_s $((NREQ / 2)))
	for h in c2 c3; do stream "$d" "$h" "$h" "$NREQ" 0; done
	for k in $(seq 0 "$NKILL"); do stream "$d" c1 "c1-$k" $((NREQ / 2)) $((k * span)); done
	agg_start "$d"
	for h in c2 c3; do col_start "$d" "$h" "$d/$h.events"; done
	for k in $(seq 0 "$NKILL"); do
		col_start "$d" c1 "$d/c1-$k.events"
		[ "$k" -eq "$NKILL" ] && break
		rnd_sleep 120
		if running "${col_pid[c1]}"; then landed=$((landed + 1)); col_kill c1; else col_wait c1 || true; fi
	done
	row_finish "$landed/$NKILL kills mid-stream"
}

# The aggregator down for OUTAGE seconds: every host's collector runs a
# stretch of its stream, spools, exits; new instances on the same spools run
# the next stretches during the outage; after it, empty instances deliver.
row_outage() {
	local h k parts=4 span every
	row_begin outage
	span=$(span_s $((NREQ / parts)))
	every=$(( OUTAGE / parts ))
	for h in "${HOSTS[@]}"; do
		for k in $(seq 1 $parts); do stream "$d" "$h" "$h-$k" $((NREQ / parts)) $((k * span)); done
	done
	empty_stream "$d/empty.events"
	agg_start "$d"
	agg_stop "$d" # the database exists; the aggregator is down from here
	local t_start=$SECONDS
	for k in $(seq 1 $parts); do
		for h in "${HOSTS[@]}"; do col_start "$d" "$h" "$d/$h-$k.events"; done
		for h in "${HOSTS[@]}"; do col_wait "$h" 120 || note="collector $h failed while down"; done
		while [ $((SECONDS - t_start)) -lt $((k * every)) ]; do sleep 1; done
	done
	while [ $((SECONDS - t_start)) -lt "$OUTAGE" ]; do sleep 1; done
	agg_start "$d"
	for h in "${HOSTS[@]}"; do col_start "$d" "$h" "$d/empty.events"; done
	for h in "${HOSTS[@]}"; do col_wait "$h" || note="collector $h failed delivering"; done
	agg_stop "$d"
	note="${note:+$note, }down $((SECONDS - t_start))s, $parts spooled stretches per host"
	row_end
}

# The aggregator's database on a 24 MiB tmpfs filled to the last block while
# the collectors stream, then freed.
row_disk_full() {
	local h mnt
	row_begin disk-full
	for h in "${HOSTS[@]}"; do stream "$d" "$h" "$h" "$NREQ" 0; done
	mnt=$d/db
	mount -t tmpfs -o size=24m rametr-faults "$mnt"; mounts+=("$mnt")
	agg_start "$d"
	dd if=/dev/zero of="$mnt/fill" bs=64k 2>/dev/null || true
	for h in "${HOSTS[@]}"; do col_start "$d" "$h" "$d/$h.events"; done
	sleep "$CUT"
	agg_sample
	note="full for ${CUT}s"
	grep -qi "full\|fail" "$d/aggregator-$agg_n.log" && note="$note, aggregator logged write failures"
	running "$agg_pid" || { note="$note, aggregator DIED on the full disk"; tb_forget "$agg_pid"; }
	rm -f "$mnt/fill"
	running "$agg_pid" || agg_start "$d"
	for h in "${HOSTS[@]}"; do col_wait "$h" || note="$note, collector $h failed"; done
	deliver_spools
	agg_stop "$d"
	sqlite3 "$mnt/rametr.db" .dump >/dev/null 2>&1 || note="$note, database unreadable"
	cp "$mnt/rametr.db" "$d/rametr.db.copy" 2>/dev/null || true
	row_end
	umount "$mnt"; mounts=()
}

# Host c1's link cut (its root-side veth down) for CUT seconds, then 30%
# packet loss (netem) for CUT seconds, then restored.
row_net_cut() {
	local h lossnote
	row_begin net-cut
	for h in "${HOSTS[@]}"; do stream "$d" "$h" "$h" "$NREQ" 0; done
	agg_start "$d"
	for h in "${HOSTS[@]}"; do col_start "$d" "$h" "$d/$h.events"; done
	rnd_sleep 300
	ip link set rmv-c1 down
	sleep "$CUT"
	ip link set rmv-c1 up
	if tc qdisc add dev rmv-c1 root netem loss 30% 2>"$d/netem.err"; then
		sleep "$CUT"
		tc qdisc del dev rmv-c1 root
		lossnote="then 30% loss ${CUT}s"
	else
		lossnote="no loss phase: this kernel has no netem ($(head -1 "$d/netem.err"))"
	fi
	row_finish "c1 cut ${CUT}s, $lossnote"
}

# Host c3's clock 30 s ahead: its recording's time offset (the windows it
# reports) is 30 s later than the other hosts'.
row_clock_skew() {
	local h
	row_begin clock-skew
	stream "$d" c1 c1 "$NREQ" 0; stream "$d" c2 c2 "$NREQ" 0; stream "$d" c3 c3 "$NREQ" 0 30
	agg_start "$d"
	for h in "${HOSTS[@]}"; do col_start "$d" "$h" "$d/$h.events"; done
	row_finish "c3 windows +30s"
}

# A flood from host fe while the three stream: FLOOD_IDLE idle connections
# and FLOOD_BIG connections each sending FLOOD_MIB MiB of a 64 MiB frame.
row_flood() {
	local h fl conns
	row_begin flood
	for h in "${HOSTS[@]}"; do stream "$d" "$h" "$h" "$NREQ" 0; done
	agg_start "$d"
	setsid ip netns exec rm-fe bash -c '
		ulimit -n 8192
		for i in $(seq 1 '"$FLOOD_IDLE"'); do exec {fd}<>/dev/tcp/'"$BR/$PORT"' || break; done
		for i in $(seq 1 '"$FLOOD_BIG"'); do
			exec {fd}<>/dev/tcp/'"$BR/$PORT"' || break
			( printf "\x00SP\x00\x00\x30\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00"
			  head -c $(('"$FLOOD_MIB"' << 20)) /dev/zero ) >&$fd 2>/dev/null &
		done
		sleep 600' >"$d/flood.log" 2>&1 &
	fl=$!; tb_pids+=($fl)
	sleep 2
	for h in "${HOSTS[@]}"; do col_start "$d" "$h" "$d/$h.events"; done
	conns=$(ss -Htn state established "( sport = :$PORT )" | wc -l)
	for h in "${HOSTS[@]}"; do col_wait "$h" || note="collector $h failed"; done
	agg_sample
	deliver_spools
	kill -TERM -- "-$fl" 2>/dev/null || true; wait "$fl" 2>/dev/null || true; tb_forget "$fl"
	agg_stop "$d"
	note="${note:+$note, }$FLOOD_IDLE idle + $FLOOD_BIG x ${FLOOD_MIB} MiB partial frames, $conns connections open"
	row_end
}

rows=(agg-kill col-kill outage disk-full net-cut clock-skew flood)
[ -n "$only" ] && read -r -a rows <<<"${only//,/ }"
tb_hosts_quiet=1
tb_take_hosts
failed=0
echo "== fault suite ($([ $quick -eq 1 ] && echo quick || echo full): N=$NKILL, outage ${OUTAGE}s, $NREQ requests per host stream), $(date -u '+%F %T UTC'), load$(uptime | sed 's/.*load average//')"
printf '%-10s | %9s | %9s | %-18s | %7s | %s\n' fault produced applied windows "HWM MiB" verdict | tee "$out/table"
for r in "${rows[@]}"; do
	case "$r" in
	agg-kill) row_agg_kill ;; col-kill) row_col_kill ;; outage) row_outage ;;
	disk-full) row_disk_full ;; net-cut) row_net_cut ;; clock-skew) row_clock_skew ;;
	flood) row_flood ;;
	*) echo "faults: unknown row '$r'" >&2; exit 2 ;;
	esac
done
echo "(produced: parts the collectors' exit summaries report, '+' when a killed one could not; applied: parts the"
echo " aggregator's exit summaries report, '+' when a killed instance could not; windows: rametrctl check)"
exit $failed
