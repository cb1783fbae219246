# scripts/testbed-lib.sh - the steps of a run on the namespace testbed, shared
# by scripts/twotier.sh (one experiment) and scripts/eval.sh (the whole
# evaluation): take the hosts (session lock, scripts/netns.sh up), start the
# aggregator and one collector per server host, start the two-tier service,
# stop them in order, and tear the hosts down on exit. Sourced, not run; the
# caller sets `set -euo pipefail`. Every process started is remembered in
# tb_pids and ended by PID only.
#
# Caller sets before use:   top (repository), B (build dir), tb_name (prefix
# of messages). tb_init sets NETNS and the trap; the others:
#   tb_take_hosts                 lock (waits up to 15 min), netns down + up
#   tb_release_hosts              netns down, unlock (others may run between
#                                 the experiments of a long evaluation)
#   tb_rametr_start OUT CONFIG HOST... aggregator (db OUT/rametr.db, ipc in
#                                 OUT) + one collector per HOST (--netns rm-HOST)
#   tb_rametr_stop                collectors then aggregator, after the last window
#   tb_twotier_start OUT VARIANT [FRONT_ARG...]  tb-back on be, tb-front on fe
#   tb_twotier_stop               tb-front then tb-back (they write their truth)
#   tb_wait_log FILE PATTERN PID  wait up to 30 s for PATTERN in FILE
#   tb_stop PID NAME LOG [SIG]    SIGTERM (or SIG), wait, report a failure exit
#   tb_service_dir USER VAR       sets VAR to a new directory under /tmp owned
#                                 by USER, removed at exit: for servers that drop
#                                 privileges and cannot enter the output
#                                 directory (e.g. a clone under /root)

tb_pids=() tb_tmpdirs=() tb_own_hosts=0 tb_use_netns=1 tb_col_extra=() tb_cols=() tb_col_hosts=()
tb_agg="" tb_front="" tb_back=""
tb_fe_port=7100 tb_be_port=7101
tb_back_base_us=500 tb_back_per_kb_us=300   # tb-back's storage CPU per request and per KB

tb_cleanup() {
	local rc=$? p
	for p in "${tb_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${tb_pids[@]}"; do wait "$p" 2>/dev/null || true; done
	for p in "${tb_tmpdirs[@]}"; do rm -rf -- "$p"; done
	# Only once the hosts are ours: never tear down another user's.
	if [ "$tb_own_hosts" -eq 1 ]; then $NETNS down || rc=1; fi
	exit $rc
}

tb_init() {
	NETNS="bash $top/scripts/netns.sh"
	trap tb_cleanup EXIT
	trap 'exit 130' INT TERM
}

tb_service_dir() {
	local d
	d=$(mktemp -d /tmp/rametr-svc.XXXXXX)
	tb_tmpdirs+=("$d")
	chown "$1" "$d"
	printf -v "$2" '%s' "$d"
}

# Forgets PID $1 (it has been waited for).
tb_forget() {
	local p keep=()
	for p in "${tb_pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	tb_pids=("${keep[@]}")
}

tb_wait_log() {
	local i
	for i in $(seq 1 600); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || break
		sleep 0.05
	done
	cat "$1" >&2
	echo "$tb_name: '$1' never said '$2'" >&2
	return 1
}

tb_stop() {
	kill -"${4:-TERM}" "$1" 2>/dev/null || true
	local rc=0
	wait "$1" || rc=$?
	tb_forget "$1"
	if [ $rc -ne 0 ]; then
		tail -20 "$3" >&2
		echo "$tb_name: $2 failed (exit $rc)" >&2
		return 1
	fi
}

tb_take_hosts() {
	exec 8>"$($NETNS session-lock)"
	if ! flock -n 8; then
		echo "$tb_name: the testbed hosts are in use; waiting (at most 15 min)"
		flock -w 900 8 || { echo "$tb_name: the testbed hosts stayed busy" >&2; exit 1; }
	fi
	tb_own_hosts=1
	$NETNS down >/dev/null
	$NETNS up
	if [ "${tb_hosts_quiet:-0}" -eq 0 ]; then
		echo "== hosts: namespaces rm-fe rm-be rm-c1 rm-c2 rm-c3 on 10.213.0.0/24"
		$NETNS status
	else
		$NETNS status >/dev/null
	fi
}

tb_release_hosts() {
	$NETNS down >/dev/null
	tb_own_hosts=0
	flock -u 8
}

tb_rametr_start() {
	local out=$1 config=$2 h nsarg
	shift 2
	"$B/aggregator/rametr-aggregator" --config "$config" --db "$out/rametr.db" \
		--listen "ipc://$out/aggregator.ipc" >"$out/aggregator.log" 2>&1 &
	tb_agg=$!; tb_pids+=($tb_agg)
	tb_wait_log "$out/aggregator.log" "listening on" $tb_agg
	tb_cols=() tb_col_hosts=()
	for h in "$@"; do
		nsarg=()
		[ "$tb_use_netns" -eq 1 ] && nsarg=(--netns "rm-$h")
		"$B/collector/rametr-collector" --aggregator "ipc://$out/aggregator.ipc" --node "$h" \
			"${nsarg[@]}" --window 1s --spool "$out/spool-$h" "${tb_col_extra[@]}" \
			>"$out/collector-$h.log" 2>&1 &
		tb_cols+=($!); tb_pids+=($!); tb_col_hosts+=("$h")
	done
	for h in "${!tb_cols[@]}"; do
		tb_wait_log "$out/collector-${tb_col_hosts[$h]}.log" "attached" "${tb_cols[$h]}"
	done
	tb_rametr_out=$out
}

tb_rametr_stop() {
	local i rc=0
	sleep 1.5   # let the last window close
	for i in "${!tb_cols[@]}"; do
		tb_stop "${tb_cols[$i]}" "collector ${tb_col_hosts[$i]}" \
			"$tb_rametr_out/collector-${tb_col_hosts[$i]}.log" || rc=1
	done
	tb_stop "$tb_agg" aggregator "$tb_rametr_out/aggregator.log" || rc=1
	tb_cols=()
	return $rc
}

tb_twotier_start() {
	local out=$1 variant=$2 mode fe be
	shift 2
	case "$variant" in
	a) mode=(--backend-mode per-request --workers 0) ;;
	b) mode=(--backend-mode pool:4 --workers 0) ;;
	c) mode=(--backend-mode pool:4 --workers 4) ;;
	*) echo "$tb_name: bad variant '$variant': expected a, b or c" >&2; return 2 ;;
	esac
	fe=$($NETNS addr fe) be=$($NETNS addr be)
	$NETNS exec be "$B/testbed/tb-back" --listen "$be:$tb_be_port" --truth "$out/truth-be.csv" \
		--cpu-us-base $tb_back_base_us --cpu-us-per-kb $tb_back_per_kb_us >"$out/tb-back.log" 2>&1 &
	tb_back=$!; tb_pids+=($tb_back)
	tb_wait_log "$out/tb-back.log" "listening" $tb_back
	$NETNS exec fe "$B/testbed/tb-front" --listen "$fe:$tb_fe_port" --backend "$be:$tb_be_port" \
		--truth "$out/truth-fe.csv" --stats "$out/stats-fe.csv" --cache-kb 300 "${mode[@]}" \
		"$@" >"$out/tb-front.log" 2>&1 &
	tb_front=$!; tb_pids+=($tb_front)
	tb_wait_log "$out/tb-front.log" "listening" $tb_front
	tb_twotier_out=$out
}

tb_twotier_stop() {
	local rc=0
	tb_stop "$tb_front" tb-front "$tb_twotier_out/tb-front.log" || rc=1
	tb_stop "$tb_back" tb-back "$tb_twotier_out/tb-back.log" || rc=1
	return $rc
}

# busy and steal jiffies of the whole machine (/proc/stat)
tb_cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $9 }' /proc/stat; }
