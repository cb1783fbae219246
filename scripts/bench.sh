#!/usr/bin/env bash
# scripts/bench.sh - the collector's overhead, all figures in one
# table: figure, value, target, met?
#   micro      build/bench/bench_syscall (ns added per traced/untraced syscall
#              and per context switch; its own alternating rounds)
#   macro      redis-server under redis-benchmark and nginx under wrk at
#              saturation, and the testbed's Go servers (build/testbed/go,
#              run with --scale 0: the server's own request handling, no
#              burn): tb-goserver (HTTP/1.1) under wrk, tb-grpcserver (gRPC)
#              under tb-grpcload's closed loop (--inflight 50; loads
#              gohttp and grpc), rounds rotating detached / attached
#              (rametr-collector --backend ebpf -> local rametr-aggregator ->
#              SQLite) / hooks only (bench_attach): each round's own ratio
#              attached/detached of throughput and p99, median over the
#              rounds; the attached rounds must show the servers' CPU in
#              `rametrctl usage`
#   budget     the kernel hooks' CPU per request under each load, stage by
#              stage (bench_attach --profile --stage S), against the
#              machine's busy CPU per request detached
#   transport  parts/s through col_sender -> nng -> aggregator -> SQLite
#              (bench_transport), stored parts counted from the database
#   collector  the collector's own CPU (utime+stime) and peak RSS while the
#              eBPF backend handles a known segment rate (bench_pingpong);
#              the rate achieved is counted from the stored bytes
#   overhead   one line per load on stdout, `overhead: <load>
#              hooks_cpu_per_request_pct=<x> server=<name> uprobe_traps_per_request=<t>`:
#              the full hooks' CPU per request (BPF run-time statistics, net of the
#              empty hooks'; for a Go server with the goroutine labels' programs, and
#              <t> their creation uprobe's traps, whose own cost is beyond that)
#              over the server's own CPU per request measured detached (its
#              processes' /proc, the macro rounds' median), one per load
#              (redis, nginx, gohttp, grpc); and the untraced
#              context switch's and the traced socket syscall's added ns (micro)
# Layout (the overhead targets'): the servers run in a network namespace of
# their own, pinned to CPU 0, reached over a veth pair; the load generators
# run in the namespace the script runs in, pinned to CPU 1; the collector and
# bench_attach account only the servers' namespace (--netns), so the load
# generators' socket syscalls leave the hooks at their first test and the
# hooks' CPU per request is the servers'. --same-netns runs the earlier
# layout instead: everything on loopback in one namespace, unpinned, the
# collector unrestricted (the hooks then also run for the load generators).
# Usage: scripts/bench.sh [--quick] [--rounds N] [--out DIR] [--skip-micro]
#                         [--cpu-slices] [--cpu-counters] [--no-follow-replies] [--json FILE]
#                         [--same-netns] [--handoffs-from-start] [--go-creations-from-start]
#                         [--thin] [--thin-rounds N]
# --cpu-slices, --cpu-counters, --no-follow-replies, --handoffs-from-start: the collector (and the
# benchmarks' hooks) with that option; --go-creations-from-start: the collector and the hook
# budget's bench_attach with it (goroutine creations followed from a Go server's start). Without them the collector and the
# benchmarks' hooks run the collector's default (counters with follow-replies).
# --json FILE: the whole table, the overhead lines and the load average as JSON.
# --thin: after the hook budget, a thin kernel side's prototype (bench_thin:
# bench/thin_edges.bpf.c, docs/thin-kernel.md) in each variant and the
# collector's hooks (bench_attach --stage hooks / full), alternating, N rounds
# (--thin-rounds, default 3) under each load; one line per load and variant,
# `thin: <load> variant=<v> hook_runs_per_request=<x> hooks_ns_per_request=<y>
# pct_of_server=<z> ...`, computed as hooks_cpu_per_request_pct (medians of
# the rounds, net of the empty variant; the collector's net of its empty stage).
# Adds about 4 minutes to a --quick run with 3 rounds.
# --rounds: macro rounds per mode (default 7; 3 with --quick, which also runs every
# load shorter). A full run takes about 9 minutes (12 with --rounds 15), --quick about 3.
# A Go server that is not built (no Debian golang) or does not start is said
# so on stderr and in the table, and the others are measured without it.
# Servers, ports, configs and the database live in DIR (default: a new
# /tmp/rametr-bench.XXXX, kept); nothing is left running.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
quick=0 rounds=7 rounds_set=0 out= skip_micro=0 json= col_opts=() go_opts=() same_netns=0 thin=0 thin_rounds=3
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1; shift ;;
	--rounds) rounds=$2 rounds_set=1; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--skip-micro) skip_micro=1; shift ;;
	--cpu-slices) col_opts+=(--cpu-slices); shift ;;
	--no-follow-replies) col_opts+=(--no-follow-replies); shift ;;
	--handoffs-from-start) col_opts+=(--handoffs-from-start); shift ;;
	--go-creations-from-start) go_opts+=(--go-creations-from-start); shift ;;
	--cpu-counters) col_opts+=(--cpu-counters); shift ;;
	--json) json=$2; shift 2 ;;
	--same-netns) same_netns=1; shift ;;
	--thin) thin=1; shift ;;
	--thin-rounds) thin=1 thin_rounds=$2; shift 2 ;;
	-h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
	*) echo "bench: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench: invalid --rounds '$rounds'" >&2; exit 2; }
[[ "$thin_rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench: invalid --thin-rounds '$thin_rounds'" >&2; exit 2; }
if [ $quick = 1 ]; then
	redis_n=20000 wrk_s=2 go_s=1 pp_s=4 idle_s=3 tp_s=3
	[ "$rounds_set" = 1 ] || rounds=3
else
	redis_n=100000 wrk_s=5 go_s=3 pp_s=15 idle_s=10 tp_s=10
	[ "$rounds_set" = 1 ] || rounds=7
fi
pp_rate=25000   # round trips/s = 50k segments/s (a server and a client segment each)
pp_size=64      # bytes of a request and of a reply
tp_size=100     # net_rx bytes of each synthetic transport part

cd "$top"
bash scripts/setup.sh
echo "== building" >&2
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >build.log 2>&1 || { tail -30 build.log >&2; echo "bench: build failed (build.log)" >&2; exit 1; }
B=$top/build
[ -n "$out" ] || out=$(mktemp -d /tmp/rametr-bench.XXXX)
rm -rf "$out" && mkdir -p "$out" && chmod 755 "$out"   # nginx workers (nobody) read its files
stat=$B/bench/bench_stat
ctl=$B/ctl/rametrctl

pids=()
sns= veth=
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ -z "$veth" ] || ip link del "$veth" 2>/dev/null || true
	[ -z "$sns" ] || ip netns del "$sns" 2>/dev/null || true
}
trap cleanup EXIT
forget() { local keep=() p; for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done; pids=("${keep[@]}"); }
stop() { kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; forget "$1"; }

# A free loopback TCP port: below the ephemeral range (32768-60999 here), not
# the demo's, and not in any socket now.
used_ports=" 7000 7600 "
free_port() { # VAR: sets VAR (not a subshell, so the ports handed out are remembered)
	local p
	while :; do
		p=$((20000 + RANDOM % 12000))
		case "$used_ports" in *" $p "*) continue ;; esac
		ss -Htan "sport = :$p" 2>/dev/null | grep -q . && continue
		used_ports+="$p "
		printf -v "$1" '%s' "$p"
		return
	done
}
cpu_ns() { "$stat" proc "$1" | sed -n 's/.*cpu_ns=\([0-9]*\).*/\1/p'; }
hwm_kb() { "$stat" proc "$1" | sed -n 's/.*hwm_kb=\([0-9]*\).*/\1/p'; }
# A server's CPU, exact: its process clock (/proc/PID/stat counts 10 ms
# ticks, 1% of a 1 s load per reading).
clock_ns() { "$stat" proc "$1" | sed -n 's/.*clock_ns=\([0-9]*\).*/\1/p'; }
# The server's whole CPU (all its processes) in ns: sum over pids.
cpu_sum() { local s=0 p; for p in "$@"; do s=$((s + $(clock_ns "$p"))); done; echo $s; }
# rametrctl usage value (raw integer) of one CE: db server ce resource
usage_of() {
	"$ctl" usage --db "$1" --server "$2" --ce "$3" --resource "$4" -o csv --no-unaccountable |
		awk -F, -v ce="$3" '$4 == ce { s += $6 } END { printf "%.0f\n", s }'
}
wait_log() { # file pattern pid seconds [lines with pattern already there]
	local i n
	for ((i = 0; i < $4 * 10; i++)); do
		n=$(grep -c "$2" "$1" 2>/dev/null) || true
		[ "${n:-0}" -gt "${5:-0}" ] && return 0
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
calc() { awk "BEGIN { printf \"%.${2:-2}f\", ($1) }"; }
sgn() { awk "BEGIN { printf \"%+.1f\", ($1) }"; }
rows=() ovh=()
row() { rows+=("$1|$2|$3|$4"); }   # figure value target met
met() { awk "BEGIN { exit !($1) }" && echo yes || echo NO; }

# ---------------------------------------------------------------- micro
if [ $skip_micro = 0 ]; then
	echo "== micro: build/bench/bench_syscall" >&2
	"$B/bench/bench_syscall" "${col_opts[@]}" >"$out/micro.txt" 2>&1 || { cat "$out/micro.txt" >&2; echo "bench: bench_syscall failed" >&2; exit 1; }
	cat "$out/micro.txt" >&2
	# lines ending in: detached attached added ratio (numbers); the name before them
	nrows=${#rows[@]}
	while IFS='|' read -r name added ratio; do
		row "micro: $name" "$added ns (x$ratio)" "-" "-"
	done < <(awk 'NF >= 5 && $(NF-3) ~ /^[0-9.]+$/ && $(NF-2) ~ /^[0-9.]+$/ && $(NF-1) ~ /^[-+]?[0-9.]+$/ && $NF ~ /^[0-9.]+$/ {
		n = $1; for (i = 2; i <= NF - 4; i++) n = n " " $i; print n "|" $(NF-1) "|" $NF }' "$out/micro.txt")
	[ ${#rows[@]} -gt $nrows ] || row "micro: no figure lines recognised (see $out/micro.txt)" "-" "-" "NO"
	micro_added() { awk -v l="$1" 'index($0, l) == 1 { print $(NF-1) + 0 }' "$out/micro.txt"; }
	cs_added=$(micro_added "untraced context switch (pipe)")
	tcs_added=$(micro_added "context switch, traced process")
	sock_added=$(micro_added "traced socket syscall")
	if [ -n "$cs_added" ]; then
		ovh+=("untraced_context_switch_added_ns=$cs_added")
		row "overhead: untraced context switch (threads outside the collector's namespace), ns added" "$cs_added" "<= 10" "$(met "$cs_added <= 10")"
	fi
	if [ -n "$tcs_added" ]; then
		ovh+=("traced_process_context_switch_added_ns=$tcs_added")
		row "context switch between two threads of a traced process, ns added (not the target's figure)" "$tcs_added" "-" "-"
	fi
	if [ -n "$sock_added" ]; then
		ovh+=("traced_socket_syscall_added_ns=$sock_added")
		row "overhead: traced socket syscall, ns added" "$sock_added" "<= 150" "$(met "$sock_added <= 150")"
	fi
	# the same two from the kernel's BPF run-time statistics during each
	# workload alone (steadier than CPU-time differences on a busy machine):
	# the programs' own run time per operation, full minus the empty hooks
	# (which is the statistics' clock reads); the tracepoint's dispatch is in neither
	prof_op() { awk -v s="$1" -v o="per $2:" '$1 == "profile" && $2 == s ":" && index($0, o) { print $NF }' "$out/micro.txt"; }
	for op in "socket syscall" "untraced switch"; do
		pf=$(prof_op full "$op") ph=$(prof_op hooks "$op")
		[ -n "$pf" ] && [ -n "$ph" ] || continue
		net=$(calc "$pf - $ph" 1)
		if [ "$op" = "socket syscall" ]; then
			ovh+=("traced_socket_syscall_hook_ns=$net")
			row "traced socket syscall: the hooks' own run time per syscall (BPF statistics, net of the empty hooks')" "$net ns ($pf - $ph)" "-" "-"
		else
			ovh+=("untraced_context_switch_hook_ns=$net")
			row "untraced context switch: the hooks' own run time per switch (BPF statistics, net of the empty hooks')" "$net ns ($pf - $ph)" "-" "-"
		fi
	done
fi

# ---------------------------------------------------------------- servers
free_port rport; free_port nport; free_port ppport; free_port tpport; free_port gport; free_port grport
node=bench
# where the servers listen and how they and the load generators are started
# (see Layout above); nsx: runs a command in the servers' namespace
if [ $same_netns = 1 ]; then
	sip=127.0.0.1 nsx=() srv_pin=() lg_pin=() ns_opt=()
else
	sns=rmbench$$ veth=rmb$$a sub=10.214.$((RANDOM % 250))
	ip netns add "$sns"
	ip link add "$veth" type veth peer name rmb$$b
	ip link set rmb$$b netns "$sns"
	ip addr add "$sub.1/30" dev "$veth" && ip link set "$veth" up
	ip -n "$sns" addr add "$sub.2/30" dev rmb$$b && ip -n "$sns" link set rmb$$b up && ip -n "$sns" link set lo up
	sip=$sub.2 nsx=(ip netns exec "$sns") srv_pin=(taskset -c 0) lg_pin=(taskset -c 1) ns_opt=(--netns "$sns")
fi
db=$out/rametr.db
# a CE per server by its port, and one for its clients
{
	printf '[aggregator]\nlisten = ipc://%s/agg.ipc\n' "$out"
	printf '[ce %s]\nserver_port = %s\n[ce %s_client]\nclient_port = %s\n' redis $rport redis $rport nginx $nport nginx $nport \
		gohttp $gport gohttp $gport grpc $grport grpc $grport
	printf '[ce pp_srv]\nserver_port = %s\n[ce pp_cli]\nclient_port = %s\n' $ppport $ppport
} >"$out/agg.ini"
"$B/aggregator/rametr-aggregator" --config "$out/agg.ini" --db "$db" >"$out/aggregator.log" 2>&1 &
agg=$!; pids+=($agg)

mkdir -p "$out/redis"
"${nsx[@]}" "${srv_pin[@]}" redis-server --bind "$sip" --port "$rport" --save '' --appendonly no --protected-mode no \
	--dir "$out/redis" --logfile "$out/redis/redis.log" --daemonize no &
redis=$!; pids+=($redis)

mkdir -p "$out/nginx/www" "$out/nginx/tmp"
head -c 1024 /dev/zero | tr '\0' 'x' >"$out/nginx/www/index.html"
chmod -R a+rX "$out/nginx"
cat >"$out/nginx/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
pid $out/nginx/nginx.pid;
error_log $out/nginx/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path $out/nginx/tmp/body;
	proxy_temp_path $out/nginx/tmp/proxy;
	fastcgi_temp_path $out/nginx/tmp/fastcgi;
	uwsgi_temp_path $out/nginx/tmp/uwsgi;
	scgi_temp_path $out/nginx/tmp/scgi;
	server {
		listen $sip:$nport;
		root $out/nginx/www;
	}
}
EOF
"${nsx[@]}" "${srv_pin[@]}" nginx -c "$out/nginx/nginx.conf" -p "$out/nginx" -e "$out/nginx/error.log" &
nginx_master=$!; pids+=($nginx_master)

for i in $(seq 50); do
	redis-cli -h "$sip" -p "$rport" ping >/dev/null 2>&1 && (exec 3<>/dev/tcp/$sip/$nport) 2>/dev/null && break
	sleep 0.1
done
kill -0 $agg 2>/dev/null || { cat "$out/aggregator.log" >&2; echo "bench: aggregator did not start" >&2; exit 1; }
redis-cli -h "$sip" -p "$rport" ping >/dev/null || { cat "$out/redis/redis.log" >&2; echo "bench: redis-server did not start" >&2; exit 1; }
(exec 3<>/dev/tcp/$sip/$nport) 2>/dev/null || { cat "$out/nginx/error.log" >&2; echo "bench: nginx did not start" >&2; exit 1; }
nginx_pids="$nginx_master $(pgrep -P "$nginx_master" | tr '\n' ' ')"

# The testbed's Go servers, by load: gohttp (tb-goserver under wrk) and grpc
# (tb-grpcserver under tb-grpcload). Both with --scale 0: no burn loop, so a
# request costs the server what net/http or grpc-go and the runtime spend on
# it (as nginx's static file and redis's GET: the server's own handling).
# Taskset to CPU 0, the runtime sets GOMAXPROCS 1. gl: the loads whose server
# runs; a server not built or not started is left out, said so, in gl_out.
declare -A go_srv=([gohttp]=tb-goserver [grpc]=tb-grpcserver) go_lg=([gohttp]=wrk [grpc]=tb-grpcload)
declare -A go_port=([gohttp]=$gport [grpc]=$grport) go_pid
gl=() gl_out=()
go_leave() { # load why: leaves the load out from now on, on stderr and in the table
	local keep=() l
	for l in "${gl[@]}"; do [ "$l" = "$1" ] || keep+=("$l"); done
	gl=("${keep[@]}")
	gl_out+=("$1|$2")
	echo "bench: ${go_srv[$1]} ($1): $2; the other servers are measured without it" >&2
}
for l in gohttp grpc; do
	gbin=$B/testbed/go/${go_srv[$l]}
	if [ ! -x "$gbin" ] || { [ $l = grpc ] && [ ! -x "$B/testbed/go/tb-grpcload" ]; }; then
		gl+=("$l"); go_leave $l "not built ($gbin; the build needs Debian's golang-go and golang-google-grpc-dev, see scripts/setup.sh)"
		continue
	fi
	mkdir -p "$out/$l"
	"${nsx[@]}" "${srv_pin[@]}" "$gbin" --listen "$sip:${go_port[$l]}" --truth "$out/$l/truth.csv" --scale 0 \
		>"$out/$l/server.log" 2>&1 &
	go_pid[$l]=$!; pids+=(${go_pid[$l]}); gl+=("$l")
	for i in $(seq 50); do
		(exec 3<>/dev/tcp/$sip/${go_port[$l]}) 2>/dev/null && break
		kill -0 ${go_pid[$l]} 2>/dev/null || break
		sleep 0.1
	done
	if ! (exec 3<>/dev/tcp/$sip/${go_port[$l]}) 2>/dev/null; then
		cat "$out/$l/server.log" >&2
		stop ${go_pid[$l]}
		go_leave $l "did not start (its log above, $out/$l/server.log)"
	fi
done

col=
start_collector() { # log (appended to: wait for this run's line, not an earlier run's)
	local before
	before=$(grep -c "ebpf backend attached" "$1" 2>/dev/null) || true
	"$B/collector/rametr-collector" --aggregator "ipc://$out/agg.ipc" --node "$node" \
		--spool "$out/spool" "${col_opts[@]}" "${go_opts[@]}" "${ns_opt[@]}" >>"$1" 2>&1 &
	col=$!; pids+=($col)
	wait_log "$1" "ebpf backend attached" "$col" 20 "${before:-0}" || { cat "$1" >&2; echo "bench: collector did not attach" >&2; exit 1; }
}
stop_collector() {
	kill -TERM "$col"; wait "$col" || { tail -20 "$out/collector.log" >&2; echo "bench: collector failed" >&2; exit 1; }
	forget "$col"; col=
}

# p99 of a wrk --latency report, in ms
wrk_p99() { awk '$1 == "99%" { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
	f = (u == "us") ? 0.001 : (u == "s") ? 1000 : (u == "m") ? 60000 : 1; printf "%.3f\n", v * f }' "$1"; }
wrk_rps() { awk '$1 == "Requests/sec:" { print $2 }' "$1"; }
wrk_reqs() { awk '$2 == "requests" && $3 == "in" { print $1 }' "$1"; }
# the two loads, on stdout (every round and the hook budget run the same)
redis_load() { "${lg_pin[@]}" redis-benchmark -h "$sip" -p "$rport" -c 50 -n "$redis_n" -t get --csv; }
nginx_load() { "${lg_pin[@]}" wrk -t1 -c50 -d"${wrk_s}s" --latency "http://$sip:$nport/index.html"; }
# the Go servers' loads, closed loops of 50 requests in flight as the others'
# (wrk: C, one thread, as for nginx, so the load generator spends less per
# request than the server; tb-goload is an open loop at a fixed rate, which
# queues without bound above the server's capacity instead of saturating it)
go_load() { # gohttp|grpc, on stdout
	if [ "$1" = gohttp ]; then
		"${lg_pin[@]}" wrk -t1 -c50 -d"${go_s}s" --latency "http://$sip:$gport/light?ce=bench"
	else
		"${lg_pin[@]}" "$B/testbed/go/tb-grpcload" --server "$sip:$grport" --ce bench --method Light \
			--inflight 50 --duration "$go_s"
	fi
}
# tb-grpcload's summary: calls ok failed seconds p99_ms
grpc_stat() { sed -n 's/^tb-grpcload: .*: \([0-9]*\) calls, \([0-9]*\) ok, \([0-9]*\) failed, [0-9]* bytes in \([0-9.]*\) s .*, p99 \([0-9.]*\) ms$/\1 \2 \3 \4 \5/p' "$1"; }
go_reqs() { if [ "$1" = gohttp ]; then wrk_reqs "$2"; else grpc_stat "$2" | awk '{ print $2 }'; fi; }
go_rps() { if [ "$1" = gohttp ]; then wrk_rps "$2"; else grpc_stat "$2" | awk '$4 > 0 { printf "%.2f\n", $2 / $4 }'; fi; }
go_p99() { if [ "$1" = gohttp ]; then wrk_p99 "$2"; else grpc_stat "$2" | awk '{ print $5 }'; fi; }
go_ok() { # load file: the load ran whole (no error, no failed call, figures there)
	if [ "$1" = gohttp ]; then
		[ -n "$(wrk_p99 "$2")" ] && ! grep -q 'Non-2xx\|Socket errors' "$2"
	else
		grpc_stat "$2" | awk '{ exit !($1 > 0 && $3 == 0 && $4 > 0) }'
	fi
}
# bench_attach ARGS... in the background, logging to LOG, until attached: start_attach LOG [ARG...] (sets hooks)
start_attach() {
	"$B/bench/bench_attach" "${@:2}" "${col_opts[@]}" "${go_opts[@]}" "${ns_opt[@]}" >"$1" 2>&1 &
	hooks=$!; pids+=($hooks)
	wait_log "$1" "attach: ready" $hooks 20 || { cat "$1" >&2; echo "bench: bench_attach did not attach" >&2; exit 1; }
}
# redis-benchmark --csv: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
redis_field() { awk -F, -v c="$2" '$1 == "\"GET\"" { gsub(/"/, "", $c); print $c }' "$1"; }

# ---------------------------------------------------------------- macro
# modes: 0 detached, 1 attached (rametr-collector -> aggregator -> SQLite),
# 2 the kernel hooks alone (bench_attach: col_bpf draining into a counter)
echo "== macro: $rounds rounds each detached / attached / hooks only (redis-benchmark -c 50 -n $redis_n GET; wrk -t1 -c 50 -d ${wrk_s}s;" \
	"Go servers: ${gl[*]:-none}, ${go_s}s each)" >&2
declare -A r_rps r_p99 n_rps n_p99 r_srv r_lg n_srv n_lg
# the Go loads' figures, by "load,mode"; their attached rounds' server CPU and
# the collector's and aggregator's CPU and wall time during them, by load
declare -A g_rps g_p99 g_srv g_lg g_att g_col g_agg g_wall
# a load generator's own CPU: lg_run FILE CMD... runs CMD, then writes the
# subshell's children times (bash 'times': user and system) to FILE
lg_run() { ( "${@:2}"; rc=$?; times >"$1"; exit $rc ); }
lg_ns() { awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { v = $i; sub(/s$/, "", v); split(v, a, "m"); t += a[1] * 60 + a[2] }
	printf "%.0f\n", t * 1e9 }' "$1"; }
# each server's own CPU over the whole time the collector was attached
# (span_mark - at attach, + before the stop): what it may be charged, its
# idle runtime work between the loads included
declare -A span_ns
span_mark() {
	local s p
	for s in redis nginx "${gl[@]}"; do
		case $s in redis) p=$redis ;; nginx) p=$nginx_pids ;; *) p=${go_pid[$s]} ;; esac
		kill -0 ${p%% *} 2>/dev/null || continue
		span_ns[$s]=$((${span_ns[$s]:-0} $1 $(cpu_sum $p)))
	done
}
redis_att_ns=0 nginx_att_ns=0 col_macro_ns=0 agg_macro_ns=0 col_macro_wall=0 col_att_wall=0
modes=(detached attached hooks-only)
hooks=
for ((r = 1; r <= rounds; r++)); do
	case $((r % 3)) in 1) order="0 1 2" ;; 2) order="1 2 0" ;; 0) order="2 0 1" ;; esac   # rotate which mode goes first
	for k in $order; do
		tag=${modes[$k]}
		if [ $k = 1 ]; then start_collector "$out/collector.log"; c0=$(cpu_ns $col) a0=$(cpu_ns $agg) t0=$(date +%s%N); span_mark -; fi
		if [ $k = 2 ]; then start_attach "$out/attach-$r.log"; fi
		rc0=$(cpu_sum $redis)
		lg_run "$out/lg" redis_load >"$out/redis-$r-$tag.csv" 2>"$out/redis-$r-$tag.err"
		rc1=$(cpu_sum $redis)
		r_srv[$k]+=" $(((rc1 - rc0) / redis_n))" r_lg[$k]+=" $(($(lg_ns "$out/lg") / redis_n))"
		nc0=$(cpu_sum $nginx_pids)
		lg_run "$out/lg" nginx_load >"$out/wrk-$r-$tag.txt" 2>&1
		nc1=$(cpu_sum $nginx_pids)
		nreq=$(wrk_reqs "$out/wrk-$r-$tag.txt")
		[ "${nreq:-0}" -gt 0 ] || { cat "$out/wrk-$r-$tag.txt" >&2; echo "bench: wrk made no requests (round $r, $tag)" >&2; exit 1; }
		n_srv[$k]+=" $(((nc1 - nc0) / nreq))" n_lg[$k]+=" $(($(lg_ns "$out/lg") / nreq))"
		# a failed or erroring load generator must not become a figure
		[ -n "$(redis_field "$out/redis-$r-$tag.csv" 7)" ] || { cat "$out/redis-$r-$tag.csv" "$out/redis-$r-$tag.err" >&2; echo "bench: redis-benchmark gave no result (round $r, $tag)" >&2; exit 1; }
		if [ -z "$(wrk_p99 "$out/wrk-$r-$tag.txt")" ] || grep -q 'Non-2xx' "$out/wrk-$r-$tag.txt"; then
			cat "$out/wrk-$r-$tag.txt" >&2; echo "bench: wrk gave no result or errors (round $r, $tag)" >&2; exit 1
		fi
		r_rps[$k]+=" $(redis_field "$out/redis-$r-$tag.csv" 2)"
		r_p99[$k]+=" $(redis_field "$out/redis-$r-$tag.csv" 7)"
		n_rps[$k]+=" $(wrk_rps "$out/wrk-$r-$tag.txt")"
		n_p99[$k]+=" $(wrk_p99 "$out/wrk-$r-$tag.txt")"
		if [ $k = 1 ]; then
			redis_att_ns=$((redis_att_ns + rc1 - rc0)) nginx_att_ns=$((nginx_att_ns + nc1 - nc0))
			col_macro_ns=$((col_macro_ns + $(cpu_ns $col) - c0)) agg_macro_ns=$((agg_macro_ns + $(cpu_ns $agg) - a0))
			col_macro_wall=$((col_macro_wall + $(date +%s%N) - t0))
		fi
		echo "   round $r $tag: redis $(redis_field "$out/redis-$r-$tag.csv" 2) req/s p99 $(redis_field "$out/redis-$r-$tag.csv" 7) ms;" \
			"nginx $(wrk_rps "$out/wrk-$r-$tag.txt") req/s p99 $(wrk_p99 "$out/wrk-$r-$tag.txt") ms" >&2
		# the Go servers, in the same mode; the collector's and the aggregator's
		# CPU during their loads apart (the collector also scans /proc for
		# managed runtimes once a window, col_rtscan)
		for l in "${gl[@]}"; do
			gf=$out/$l-$r-$tag.txt
			[ $k != 1 ] || { gc0=$(cpu_ns $col) ga0=$(cpu_ns $agg) gt0=$(date +%s%N); }
			sc0=$(clock_ns ${go_pid[$l]} 2>/dev/null) || sc0=
			lg_run "$out/lg" go_load $l >"$gf" 2>&1 || true
			sc1=$(clock_ns ${go_pid[$l]} 2>/dev/null) || sc1=
			nreq=$(go_reqs $l "$gf")
			if [ -z "$sc0" ] || [ -z "$sc1" ] || ! go_ok $l "$gf" || [ "${nreq:-0}" -le 0 ]; then
				cat "$gf" "$out/$l/server.log" >&2
				go_leave $l "its load failed or the server exited (round $r, $tag; $gf and $out/$l/server.log above)"
				continue
			fi
			g_srv[$l,$k]+=" $(((sc1 - sc0) / nreq))" g_lg[$l,$k]+=" $(($(lg_ns "$out/lg") / nreq))"
			g_rps[$l,$k]+=" $(go_rps $l "$gf")" g_p99[$l,$k]+=" $(go_p99 $l "$gf")"
			if [ $k = 1 ]; then
				g_att[$l]=$((${g_att[$l]:-0} + sc1 - sc0)) g_col[$l]=$((${g_col[$l]:-0} + $(cpu_ns $col) - gc0))
				g_agg[$l]=$((${g_agg[$l]:-0} + $(cpu_ns $agg) - ga0)) g_wall[$l]=$((${g_wall[$l]:-0} + $(date +%s%N) - gt0))
			fi
			echo "   round $r $tag: $l (${go_srv[$l]}) $(go_rps $l "$gf") req/s p99 $(go_p99 $l "$gf") ms" >&2
		done
		if [ $k = 1 ]; then
			col_att_wall=$((col_att_wall + $(date +%s%N) - t0))
			sleep 1.2   # let the last window close before detaching
			span_mark +
			stop_collector
		fi
		if [ $k = 2 ]; then stop $hooks; fi
	done
done
med() { "$stat" median $1; }
# the median over rounds of each round's own ratio (its modes ran minutes
# apart at most, in rotating order): drift of the machine between rounds
# cancels, which medians of the raw figures do not do
ratio_med() { # "detached values" "other values" (one per round, same order)
	med "$(awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, " "); split(b, y, " ");
		for (i = 1; i <= n; i++) printf "%.6f ", y[i] / x[i] }')"
}
# a load's name in the table: redis, nginx, or the Go load with its server
lname() { case $1 in redis|nginx) echo "$1" ;; *) echo "$1 (${go_srv[$1]})" ;; esac; }
for s in redis nginx "${gl[@]}"; do
	for k in 1 2; do
		if [ $s = redis ]; then d_rps=${r_rps[0]} a_rps=${r_rps[$k]} d_p99=${r_p99[0]} a_p99=${r_p99[$k]}
		elif [ $s = nginx ]; then d_rps=${n_rps[0]} a_rps=${n_rps[$k]} d_p99=${n_p99[0]} a_p99=${n_p99[$k]}
		else d_rps=${g_rps[$s,0]} a_rps=${g_rps[$s,$k]} d_p99=${g_p99[$s,0]} a_p99=${g_p99[$s,$k]}; fi
		loss=$(calc "(1 - $(ratio_med "$d_rps" "$a_rps")) * 100" 1)
		inc=$(calc "($(ratio_med "$d_p99" "$a_p99") - 1) * 100" 1)
		if [ $k = 1 ]; then
			row "$(lname $s) throughput, median req/s detached -> attached; median of the rounds' own ratios" \
				"$(calc "$(med "$d_rps")" 0) -> $(calc "$(med "$a_rps")" 0); $(sgn "-($loss)")%" "loss <= 2%" "$(met "$loss <= 2")"
			row "$(lname $s) p99 latency, median ms detached -> attached; median of the rounds' own ratios" \
				"$(med "$d_p99") -> $(med "$a_p99"); $(sgn "$inc")%" "<= +5%" "$(met "$inc <= 5")"
		else
			row "$(lname $s) with the kernel hooks only (bench_attach): throughput, p99 (median of the rounds' own ratios)" "$(sgn "-($loss)")%, $(sgn "$inc")%" "-" "-"
		fi
	done
done
# which process bounds each load (the busier one per request) and what
# attaching added to each, from their own CPU: the server's /proc, the load
# generator's times
for s in redis nginx "${gl[@]}"; do
	if [ $s = redis ]; then d_s=${r_srv[0]} a_s=${r_srv[1]} d_l=${r_lg[0]} a_l=${r_lg[1]} lg=redis-benchmark
	elif [ $s = nginx ]; then d_s=${n_srv[0]} a_s=${n_srv[1]} d_l=${n_lg[0]} a_l=${n_lg[1]} lg=wrk
	else d_s=${g_srv[$s,0]} a_s=${g_srv[$s,1]} d_l=${g_lg[$s,0]} a_l=${g_lg[$s,1]} lg=${go_lg[$s]}; fi
	row "$(lname $s): CPU per request of the server / of $lg, median us detached -> attached; median of the rounds' own ratios" \
		"$(calc "$(med "$d_s") / 1000" 1) -> $(calc "$(med "$a_s") / 1000" 1) ($(sgn "($(ratio_med "$d_s" "$a_s") - 1) * 100")%) / $(calc "$(med "$d_l") / 1000" 1) -> $(calc "$(med "$a_l") / 1000" 1) ($(sgn "($(ratio_med "$d_l" "$a_l") - 1) * 100")%)" "-" "-"
done
# the attached rounds are only meaningful if the collector accounted the servers' work
sleep 0.5
for s in redis nginx "${gl[@]}"; do
	acc=$(usage_of "$db" "$node" $s cpu)
	case $s in redis) own=$redis_att_ns sname=redis-server ;; nginx) own=$nginx_att_ns sname=nginx-server ;;
		*) own=${g_att[$s]} sname=${go_srv[$s]} ;; esac
	pct=$(calc "($own > 0 ? $acc * 100 / $own : 0)" 0)
	row "$sname CPU charged to CE '$s' / its own /proc CPU (attached rounds)" "$(calc "$acc / 1e9" 2) s / $(calc "$own / 1e9" 2) s = $pct%" "> 0 (accounted)" "$(met "$acc > 0")"
	own=${span_ns[$s]:-0}
	pct=$(calc "($own > 0 ? $acc * 100 / $own : 0)" 1)
	row "$sname CPU charged to CE '$s' / its own /proc CPU over the whole time the collector was attached (between the loads too)" \
		"$(calc "$acc / 1e9" 2) s / $(calc "$own / 1e9" 2) s = $pct%" "<= 100%" "$(met "$own > 0 && $acc <= $own * 1.005")"
done
row "collector CPU during the attached macro rounds" "$(calc "$col_macro_ns * 100 / $col_macro_wall" 1)% of one core" "-" "-"
# the Go loads' apart: their windows also hold the collector's scan of /proc
# for managed runtimes (and its first look at each Go binary); whether it
# recognised the servers as Go programs, from its log
for s in "${gl[@]}"; do
	nrec=$(grep -c "recognised a Go program (/proc/${go_pid[$s]}/exe)" "$out/collector.log") || true
	row "collector CPU during the attached $(lname $s) loads (its collector logged it recognised as a Go program in ${nrec:-0} of $rounds attached rounds)" \
		"$(calc "${g_col[$s]} * 100 / ${g_wall[$s]}" 1)% of one core" "-" "-"
	row "aggregator CPU during the attached $(lname $s) loads" "$(calc "${g_agg[$s]} * 100 / ${g_wall[$s]}" 1)% of one core" "-" "-"
done
# (fields counted from the message, not the line: the log's prefix may change)
macro_parts=$(awk '/ebpf backend stopped:/ { sub(/.*ebpf backend stopped: /, ""); p += $1; d += $6 } END { printf "%.0f %.0f\n", p, d }' "$out/collector.log")
row "parts/s the collector handled during the attached macro rounds" "$(calc "${macro_parts% *} * 1e9 / $col_att_wall" 0)/s" "-" "-"
row "parts dropped in the kernel during the attached macro rounds (counted, charged to V as 'dropped')" "${macro_parts#* }" "0" "$(met "${macro_parts#* } == 0")"
# "N of those parts went summed in M records": parts the aggregator's rules decide (col_merge.h)
macro_merged=$(awk '/went summed in/ { sub(/.*: /, ""); p += $1; r += $8 } END { printf "%.0f %.0f\n", p, r }' "$out/collector.log")
row "of those, parts sent summed per socket, thread and window (the rules decide them) -> records" "${macro_merged% *} -> ${macro_merged#* }" "-" "-"
row "aggregator CPU during the attached macro rounds (same host here)" "$(calc "$agg_macro_ns * 100 / $col_macro_wall" 1)% of one core" "-" "-"

# ---------------------------------------------------------------- hook budget per request
# What each piece of the kernel hooks costs a request, from the kernel's own
# BPF run-time statistics (bench_attach --profile --stage S, one load each):
# steadier than the throughput medians above, which move by several points
# between runs. The statistics add two clock reads to every run: the empty
# stage ("hooks") is that plus the tracepoint's call, so the other stages are
# shown net of it. The share is of the machine's busy CPU per request in a
# detached run (user+system+irq+softirq of all CPUs from /proc/stat, steal
# left out): what a CPU-bound run would lose to the hooks.
echo "== hook budget: bench_attach --profile per stage under each load" >&2
busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
tick_ns=$((1000000000 / $(getconf CLK_TCK)))
budget_load() { # redis|nginx|gohttp|grpc out-file: runs the load, prints the requests made (none if it failed)
	if [ "$1" = redis ]; then
		redis_load >"$2" 2>&1
		echo "$redis_n"
	elif [ "$1" = nginx ]; then
		nginx_load >"$2" 2>&1
		wrk_reqs "$2"
	else
		go_load "$1" >"$2" 2>&1 || true
		if go_ok "$1" "$2"; then go_reqs "$1" "$2"; fi
	fi
}
budget_fail() { # load out-file what: a load that gave no requests stops the bench, a Go load is left out
	cat "$2" >&2
	case $1 in redis|nginx) echo "bench: $1 load gave no requests (hook budget${3:+, $3})" >&2; exit 1 ;; esac
	go_leave "$1" "its load gave no requests (hook budget${3:+, $3}; $2 above)"
}
stages=(hooks clock task state noemit full)
for s in redis nginx "${gl[@]}"; do
	b0=$(busy_ticks)
	nreq=$(budget_load $s "$out/budget-$s-detached.txt")
	b1=$(busy_ticks)
	[ "${nreq:-0}" -gt 0 ] || { budget_fail $s "$out/budget-$s-detached.txt"; continue; }
	cpu_req=$(calc "($b1 - $b0) * $tick_ns / $nreq" 0)
	vals= empty=0 runs_req= traps_req=0
	for st in "${stages[@]}"; do
		# goroutine labels (Go servers only, the collector's default) with the full hooks alone, so
		# that their programs' cost is in the net figure rather than in the empty hooks'
		if [ $st = full ]; then start_attach "$out/budget-$s-$st.log" --profile --stage $st
		else start_attach "$out/budget-$s-$st.log" --profile --stage $st --no-go-labels; fi
		nreq=$(budget_load $s "$out/budget-$s-$st.txt")
		stop $hooks
		[ "${nreq:-0}" -gt 0 ] || { budget_fail $s "$out/budget-$s-$st.txt" $st; continue 2; }
		read -r hruns hns < <(sed -n 's/^attach: hooks runs=\([0-9]*\) ns=\([0-9]*\)$/\1 \2/p' "$out/budget-$s-$st.log")
		[ -n "${hns:-}" ] || { cat "$out/budget-$s-$st.log" >&2; echo "bench: no hook statistics from bench_attach ($s, $st)" >&2; exit 1; }
		ns_req=$(calc "$hns / $nreq" 0)
		if [ $st = hooks ]; then
			empty=$ns_req
			vals="empty hooks $ns_req"
		else
			vals+=", $st +$(calc "$ns_req - $empty" 0)"
		fi
		[ $st = full ] && { runs_req=$(calc "$hruns / $nreq" 2); full_net=$(calc "$ns_req - $empty" 0); full_gross=$ns_req
			traps=$(sed -n 's/^attach: uprobe traps=\([0-9]*\)$/\1/p' "$out/budget-$s-$st.log")
			traps_req=$(calc "${traps:-0} / $nreq" 2); }
	done
	row "$(lname $s): kernel hook runs per request; hook CPU per request by stage, ns (stages cumulative, net of the empty hooks')" "$runs_req runs; $vals" "-" "-"
	row "$(lname $s): the full hooks' CPU per request (net) / the machine's busy CPU per request detached" "$full_net ns / $cpu_req ns = $(calc "$full_net * 100 / $cpu_req" 1)%" "-" "-"
	# against the server's own CPU per request, detached (its processes, the macro rounds' median)
	if [ $s = redis ]; then srv_req=$(med "${r_srv[0]}") lg_req=$(med "${r_lg[0]}") srv_name=redis-server
	elif [ $s = nginx ]; then srv_req=$(med "${n_srv[0]}") lg_req=$(med "${n_lg[0]}") srv_name=nginx
	else srv_req=$(med "${g_srv[$s,0]}") lg_req=$(med "${g_lg[$s,0]}") srv_name=${go_srv[$s]}; fi
	pct=$(calc "$full_net * 100 / $srv_req" 2)
	ovh+=("$s hooks_cpu_per_request_pct=$pct server=$srv_name uprobe_traps_per_request=$traps_req")
	row "overhead: $(lname $s): the full hooks' CPU per request, net (gross: with the empty hooks') / $srv_name's own CPU per request detached" \
		"$full_net ns ($full_gross ns) / $(calc "$srv_req" 0) ns = $pct% ($(calc "$full_gross * 100 / $srv_req" 2)%)" "<= 1.5%" "$(met "$pct <= 1.5")"
	[ "$traps_req" = 0 ] || row "$(lname $s): goroutine-label uprobe traps per request (each ~0.7-1 us of the traced thread beyond its program's run time: bench_gosched)" "$traps_req" "-" "-"
	# the statistics are per program, not per process: the hooks above ran for
	# the load generator's sockets too; against both processes' CPU
	row "$(lname $s): the same hooks' CPU per request / the CPU per request of $srv_name and its load generator together, detached" \
		"$full_net ns / $(calc "$srv_req + $lg_req" 0) ns = $(calc "$full_net * 100 / ($srv_req + $lg_req)" 2)%" "-" "-"
done

# ---------------------------------------------------------------- thin kernel side (--thin)
# bench_thin's variants (empty, netns, record, full, ktime, task, lean with
# batches of 64) and the collector's
# hooks (bench_attach --stage hooks / full) in turn, thin_rounds times under
# each load; per variant the median over rounds of the hooks' CPU per request
# (BPF statistics), net of the median of its empty variant, over the server's
# CPU per request detached (as hooks_cpu_per_request_pct above).
thin_lines=()
if [ $thin = 1 ]; then
	echo "== thin: bench_thin variants and the collector's hooks, alternating, $thin_rounds rounds under each load" >&2
	tvars=(empty netns record full ktime task lean col-hooks col-full)
	for s in redis nginx; do
		declare -A t_ns=() t_runs=() t_recs=() t_cons=() t_stale=()
		cons_empty=0
		for ((r = 1; r <= thin_rounds; r++)); do
			for v in "${tvars[@]}"; do
				f=$out/thin-$s-$r-$v
				if [ "${v#col-}" != "$v" ]; then
					start_attach "$f.log" --profile --stage "${v#col-}"
				else
					bopt=(); [ "$v" = lean ] && bopt=(--batch 64)   # lean: also half the ring writes
					"$B/bench/bench_thin" --variant "$v" --profile "${bopt[@]}" "${ns_opt[@]}" >"$f.log" 2>&1 &
					hooks=$!; pids+=($hooks)
					wait_log "$f.log" "thin: ready" $hooks 20 || { cat "$f.log" >&2; echo "bench: bench_thin did not attach" >&2; exit 1; }
				fi
				nreq=$(budget_load $s "$f.txt")
				stop $hooks
				[ "${nreq:-0}" -gt 0 ] || { cat "$f.txt" >&2; echo "bench: $s load gave no requests (thin, $v)" >&2; exit 1; }
				read -r hruns hns < <(sed -n 's/^\(attach\|thin\): hooks runs=\([0-9]*\) ns=\([0-9]*\)$/\2 \3/p' "$f.log")
				[ -n "${hns:-}" ] || { cat "$f.log" >&2; echo "bench: no hook statistics ($s, $v)" >&2; exit 1; }
				t_ns[$v]+=" $(calc "$hns / $nreq" 1)" t_runs[$v]+=" $(calc "$hruns / $nreq" 3)"
				recs=$(sed -n 's/^thin: variant=.* records=\([0-9]*\) .* left_in_batches=\([0-9]*\) .*/\1 \2/p' "$f.log")
				cons=$(sed -n 's/^thin: variant=.* consumer_ns=\([0-9]*\) .*/\1/p' "$f.log")
				if [ -n "$recs" ]; then
					t_recs[$v]+=" $(calc "(${recs% *} + ${recs#* }) / $nreq" 3)"
					# the consumer's CPU per record, net of the empty variant's in this round
					# (its polls every 25 ms with nothing to read; empty runs first)
					[ "$v" = empty ] && cons_empty=$cons
					[ "${recs% *}" -gt 0 ] && t_cons[$v]+=" $(calc "($cons - $cons_empty) / ${recs% *}" 1)"
					# socket edges that saw no CPU since the thread's previous one (runqueue clock not moved)
					read -r se st < <(sed -n 's/^thin: variant=.* socket_edges=\([0-9]*\) stale_edges=\([0-9]*\)$/\1 \2/p' "$f.log")
					[ "${se:-0}" -gt 0 ] && t_stale[$v]+=" $(calc "$st * 100 / $se" 1)"
				fi
			done
		done
		if [ $s = redis ]; then srv_req=$(med "${r_srv[0]}") srv_name=redis-server
		else srv_req=$(med "${n_srv[0]}") srv_name=nginx; fi
		for v in netns record full ktime task lean col-full; do
			base=$([ $v = col-full ] && echo col-hooks || echo empty)
			net=$(calc "$(med "${t_ns[$v]}") - $(med "${t_ns[$base]}")" 1)
			pct=$(calc "$net * 100 / $srv_req" 2)
			l="$s variant=$([ $v = col-full ] && echo collector || echo $v) hook_runs_per_request=$(calc "$(med "${t_runs[$v]}")" 2)"
			l+=" hooks_ns_per_request=$net pct_of_server=$pct server=$srv_name server_ns_per_request=$(calc "$srv_req" 0)"
			[ -n "${t_recs[$v]:-}" ] && l+=" records_per_request=$(calc "$(med "${t_recs[$v]}")" 3)"
			[ -n "${t_cons[$v]:-}" ] && l+=" consumer_ns_per_record_net=$(calc "$(med "${t_cons[$v]}")" 1)"
			[ -n "${t_stale[$v]:-}" ] && l+=" stale_edges_pct=$(calc "$(med "${t_stale[$v]}")" 1)"
			l+=" rounds_ns_per_request=$(echo ${t_ns[$v]} | tr ' ' ',') empty_ns_per_request=$(echo ${t_ns[$base]} | tr ' ' ',')"
			thin_lines+=("$l")
			row "thin: $s, $v: hooks' CPU per request, net (median of $thin_rounds rounds) / $srv_name's CPU per request detached" \
				"$net ns / $(calc "$srv_req" 0) ns = $pct%" "<= 1.5%" "$(met "$pct <= 1.5")"
		done
	done
	replay=$("$B/bench/bench_thin" --replay-requests 200000) || { echo "bench: bench_thin --replay-requests failed" >&2; exit 1; }
	thin_lines+=("${replay#thin: }")
fi

# ---------------------------------------------------------------- collector CPU and memory at a known segment rate
echo "== collector: idle ${idle_s}s, then bench_pingpong at $pp_rate round trips/s for ${pp_s}s" >&2
stop $redis; stop $nginx_master
for l in "${gl[@]}"; do stop ${go_pid[$l]}; done
start_collector "$out/collector.log"
sleep 1
c0=$(cpu_ns $col); t0=$(date +%s%N); sleep "$idle_s"; c1=$(cpu_ns $col); t1=$(date +%s%N)
"${nsx[@]}" "$B/bench/bench_pingpong" --port "$ppport" --rate $pp_rate --duration "$pp_s" --size $pp_size | tee "$out/pingpong.txt" >&2
c2=$(cpu_ns $col); t2=$(date +%s%N)
hwm=$(hwm_kb $col)
sleep 1.2
stop_collector
sleep 0.5
segs=$(( ($(usage_of "$db" "$node" pp_srv net_rx) + $(usage_of "$db" "$node" pp_cli net_rx)) / pp_size ))
trips=$(sed -n 's/.*round_trips=\([0-9]*\).*/\1/p' "$out/pingpong.txt")
pp_secs=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' "$out/pingpong.txt")
seg_rate=$(calc "$segs / $pp_secs" 0)
idle_pct=$(calc "($c1 - $c0) * 100 / ($t1 - $t0)" 2)
load_pct=$(calc "($c2 - $c1) * 100 / ($t2 - $t1)" 2)
# what the segments add over the idle machine, scaled linearly to 50k segments/s
scaled=$(calc "$idle_pct + ($load_pct - $idle_pct) * 50000 / $seg_rate" 2)
row "ping-pong segments stored / made (2 per round trip)" "$segs / $((2 * trips))" "equal" "$(met "$segs == 2 * $trips")"
row "collector CPU, idle machine (other agents' activity only)" "$idle_pct% of one core" "-" "-"
row "collector CPU at $seg_rate segments/s (stored)" "$load_pct% of one core" "-" "-"
row "collector CPU scaled to 50k segments/s" "$scaled% of one core" "<= 2%" "$(met "$scaled <= 2")"
row "collector peak RSS (VmHWM)" "$(calc "$hwm / 1024" 1) MiB" "-" "-"
# the same load with only the ring drain (bench_attach): what is left of the
# collector's CPU is batching, encoding and sending
start_attach "$out/attach-pp.log"
h0=$(cpu_ns $hooks); t0=$(date +%s%N)
"${nsx[@]}" "$B/bench/bench_pingpong" --port "$ppport" --rate $pp_rate --duration "$pp_s" --size $pp_size >"$out/pingpong-attach.txt"
h1=$(cpu_ns $hooks); t1=$(date +%s%N)
stop $hooks
htrips=$(sed -n 's/.*round_trips=\([0-9]*\).*/\1/p' "$out/pingpong-attach.txt")
hsecs=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' "$out/pingpong-attach.txt")
row "ring drain alone (bench_attach) at $(calc "2 * $htrips / $hsecs" 0) segments/s (made)" "$(calc "($h1 - $h0) * 100 / ($t1 - $t0)" 2)% of one core" "-" "-"

# ---------------------------------------------------------------- transport
echo "== transport: bench_transport for ${tp_s}s (plain, then paired) into a fresh aggregator" >&2
tdb=$out/transport.db
free_port tport
cat >"$out/transport.ini" <<EOF
[aggregator]
listen = tcp://127.0.0.1:$tport
[ce bench]
server_port = $tpport
EOF
"$B/aggregator/rametr-aggregator" --config "$out/transport.ini" --db "$tdb" >"$out/transport-agg.log" 2>&1 &
tagg=$!; pids+=($tagg)
wait_log "$out/transport-agg.log" "listening on" $tagg 10 || { cat "$out/transport-agg.log" >&2; echo "bench: aggregator did not start" >&2; exit 1; }
for mode in plain paired; do
	tnode=transport-$mode
	"$B/bench/bench_transport" --aggregator "tcp://127.0.0.1:$tport" --node $tnode --spool "$out/$tnode.spool" \
		--server-port "$tpport" --duration "$tp_s" --size $tp_size $([ $mode = paired ] && echo --paired) |
		tee "$out/$tnode.txt" >&2
	sent=$(sed -n 's/.*parts=\([0-9]*\).*/\1/p' "$out/$tnode.txt")
	tsecs=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' "$out/$tnode.txt")
	# stored and charged to the CE: every part's bytes are charged to 'bench' (by rule, or by pairing)
	stored=$(( $(usage_of "$tdb" $tnode bench net_rx) / tp_size ))
	"$ctl" check --db "$tdb" --server $tnode >"$out/$tnode-check.txt" 2>&1 && balanced=yes || balanced=NO
	what=$([ $mode = paired ] && echo "half the parts paired by TCP bytes" || echo "every part decided by a rule")
	row "transport ($what): parts/s stored, col_sender -> nng tcp -> aggregator -> SQLite" "$(calc "$stored / $tsecs" 0)/s" ">= 50000/s" "$(met "$stored / $tsecs >= 50000")"
	row "transport ($mode): parts made - parts stored and charged (drops)" "$((sent - stored)) of $sent" "0" "$(met "$sent == $stored")"
	row "transport ($mode): rametrctl check, every window balanced" "$balanced" "yes" "$([ $balanced = yes ] && echo yes || echo NO)"
done
stop $tagg

stop $agg
pids=()

# ---------------------------------------------------------------- table
# the Go servers left out, and why (not built, not started, a failed load)
for x in "${gl_out[@]}"; do row "$(lname "${x%%|*}"): not measured" "${x#*|}" "-" "-"; done
load=$(cut -d' ' -f1-3 /proc/loadavg)
for o in "${ovh[@]}"; do echo "overhead: $o"; done
for o in "${thin_lines[@]}"; do echo "thin: $o"; done
echo
layout=$([ $same_netns = 1 ] && echo "one namespace, loopback, collector unrestricted (--same-netns; not the targets' layout)" ||
	echo "servers in their own namespace on CPU 0, load generators outside on CPU 1, collector --netns (the targets' layout)")
echo "Rametr collector overhead ($(date -u +%Y-%m-%dT%H:%MZ); $(nproc) cores, $(uname -r); $([ $quick = 1 ] && echo quick || echo full) run, $rounds rounds; collector options: ${col_opts[*]:-none}; $layout; load average $load; files in $out)"
echo
echo "| figure | value | target | met? |"
echo "|---|---|---|---|"
for x in "${rows[@]}"; do
	IFS='|' read -r f v t m <<<"$x"
	echo "| $f | $v | $t | $m |"
done
if [ -n "$json" ]; then
	# the table and the overhead lines as JSON (jq builds it: strings escaped)
	{ printf '%s\n' "${rows[@]}"; } | jq -R -s \
		--arg date "$(date -u +%Y-%m-%dT%H:%MZ)" --arg kernel "$(uname -r)" --arg load "$load" \
		--arg opts "${col_opts[*]:-} ${go_opts[*]:-}" --argjson quick "$quick" --argjson rounds "$rounds" \
		--arg layout "$([ $same_netns = 1 ] && echo same-netns || echo server-netns)" \
		--arg ovh "$(printf '%s\n' "${ovh[@]}")" '
		def kv: split(" ") | map(select(length > 0) | capture("^(?<k>[^=]+)=(?<v>.*)$")
			| { (.k): (.v | tonumber? // .) }) | add;
		{ date: $date, kernel: $kernel, load_average: $load, collector_options: $opts, quick: ($quick == 1),
		  layout: $layout,
		  rounds: $rounds,
		  rows: (split("\n") | map(select(length > 0) | split("|")
			| { figure: .[0], value: .[1], target: .[2], met: .[3] })),
		  overhead: ($ovh | split("\n") | map(select(length > 0)
			| if test("^[a-z0-9_-]+ hooks_cpu") then ({ load: split(" ")[0] } + (sub("^[a-z0-9_-]+ "; "") | kv))
			  else kv end)) }' >"$json" || { echo "bench: failed to write '$json'" >&2; exit 1; }
	echo "(JSON: $json)"
fi
