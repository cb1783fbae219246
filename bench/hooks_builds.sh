#!/usr/bin/env bash
# bench/hooks_builds.sh - the kernel hooks' CPU per request of several builds
# (or of one build's benchmark stages), in the overhead targets' layout:
# redis-server and nginx (one worker, 1 KiB file) in a network namespace of
# their own on CPU 0 behind a veth pair, redis-benchmark -c 50 GET and
# wrk -t1 -c50 outside on CPU 1, each build's bench_attach --profile
# --netns of the servers' namespace. Per round, build and load it runs the
# load twice, with --stage hooks (the empty hooks: the statistics' own
# clock reads and the tracepoint's call) and with --stage full (or the
# build's extra arguments, which come after and so override the stage: the
# empty run stays the empty hooks); builds alternate within each round. It
# prints first each server's own CPU per request detached (its processes'
# /proc), then one line per round, build, load and stage:
#   R <round> <label> <load> <hooks|full> nsreq <BPF run time per request> partsreq <x> <prog>:<ns per run> ...
# and per label and load the median over the rounds of the full runs, net
# of the median of its empty runs, with its share of the server's CPU per
# request (hooks_cpu_per_request_pct as scripts/bench.sh computes it):
#   <load> <label> net_ns_per_request=<x> pct_of_server=<y> rounds=<n,...>
# The statistics count the load generators' runs too, which leave the hooks
# at the namespace test. Needs root, redis-server, redis-benchmark, nginx,
# wrk. Nothing is left running; its files stay in a new /tmp/hooks_builds.XXXX.
# Usage: bench/hooks_builds.sh ROUNDS REDIS_REQUESTS WRK_SECONDS LABEL=BUILD[:ARGS] ...
#   BUILD: a build tree (bench/bench_attach inside); ARGS: more bench_attach
#   arguments for the full runs, e.g. base=build:--stage noemit
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,24p' "$0"; exit 2; }
rounds=$1 redis_n=$2 wrk_s=$3
shift 3
vars=("$@")
top=$(cd "$(dirname "$0")/.." && pwd)
stat=$top/build/bench/bench_stat
[ -x "$stat" ] || { echo "hooks_builds: no '$stat' (build the tree first)" >&2; exit 2; }
out=$(mktemp -d /tmp/hooks_builds.XXXX)
chmod 755 "$out"   # nginx's worker (nobody) reads its files
pids=() sns=rmhb$$ veth=rmhb$$a sub=10.216.$((RANDOM % 250))
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	ip link del "$veth" 2>/dev/null || true
	ip netns del "$sns" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$sns"
ip link add "$veth" type veth peer name rmhb$$b
ip link set rmhb$$b netns "$sns"
ip addr add "$sub.1/30" dev "$veth" && ip link set "$veth" up
ip -n "$sns" addr add "$sub.2/30" dev rmhb$$b && ip -n "$sns" link set rmhb$$b up && ip -n "$sns" link set lo up
sip=$sub.2 rport=$((20000 + RANDOM % 6000)) nport=$((26000 + RANDOM % 6000))
mkdir -p "$out/redis" "$out/nginx/www" "$out/nginx/tmp"
ip netns exec "$sns" taskset -c 0 redis-server --bind "$sip" --port $rport --save '' --appendonly no \
	--protected-mode no --dir "$out/redis" --logfile "$out/redis/redis.log" --daemonize no &
redis=$!; pids+=($redis)
head -c 1024 /dev/zero | tr '\0' x >"$out/nginx/www/index.html"
chmod -R a+rX "$out/nginx"
cat >"$out/nginx/nginx.conf" <<EOC
daemon off; master_process on; worker_processes 1; pid $out/nginx/nginx.pid; error_log $out/nginx/error.log warn;
events { worker_connections 1024; }
http { access_log off; client_body_temp_path $out/nginx/tmp/body; proxy_temp_path $out/nginx/tmp/proxy;
 fastcgi_temp_path $out/nginx/tmp/fastcgi; uwsgi_temp_path $out/nginx/tmp/uwsgi; scgi_temp_path $out/nginx/tmp/scgi;
 server { listen $sip:$nport; root $out/nginx/www; } }
EOC
ip netns exec "$sns" taskset -c 0 nginx -c "$out/nginx/nginx.conf" -p "$out/nginx" -e "$out/nginx/error.log" &
nginx=$!; pids+=($nginx)
for _ in $(seq 50); do
	redis-cli -h "$sip" -p $rport ping >/dev/null 2>&1 && (exec 3<>/dev/tcp/$sip/$nport) 2>/dev/null && break
	sleep 0.1
done
redis-cli -h "$sip" -p $rport ping >/dev/null || { echo "hooks_builds: redis-server did not start" >&2; exit 1; }
(exec 3<>/dev/tcp/$sip/$nport) 2>/dev/null || { echo "hooks_builds: nginx did not start" >&2; exit 1; }
nginx_pids="$nginx $(pgrep -P $nginx | tr '\n' ' ')"
cpu_sum() { local s=0 p; for p in "$@"; do s=$((s + $("$stat" proc "$p" | sed -n 's/.*cpu_ns=\([0-9]*\).*/\1/p'))); done; echo $s; }
# a load, its output to FILE; prints the requests it made
load() { # redis|nginx FILE
	if [ "$1" = redis ]; then
		taskset -c 1 redis-benchmark -h "$sip" -p $rport -c 50 -n "$redis_n" -t get --csv >"$2" 2>&1
		grep -q '"GET"' "$2" && echo "$redis_n"
	else
		taskset -c 1 wrk -t1 -c50 -d"${wrk_s}s" "http://$sip:$nport/index.html" >"$2" 2>&1
		awk '$2 == "requests" && $3 == "in" { print $1 }' "$2"
	fi
}
declare -A srv_ns
for l in redis nginx; do
	if [ $l = redis ]; then p=$redis; else p=$nginx_pids; fi
	c0=$(cpu_sum $p); n=$(load $l "$out/detached-$l.txt"); c1=$(cpu_sum $p)
	[ "${n:-0}" -gt 0 ] || { cat "$out/detached-$l.txt" >&2; echo "hooks_builds: $l load made no requests" >&2; exit 1; }
	srv_ns[$l]=$(((c1 - c0) / n))
	echo "detached $l server_ns_per_request ${srv_ns[$l]}"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; r++)); do
	for v in "${vars[@]}"; do
		lab=${v%%=*} spec=${v#*=} extra=()
		[[ $spec == *:* ]] && read -r -a extra <<<"${spec#*:}"
		bin=${spec%%:*}/bench/bench_attach
		[ -x "$bin" ] || { echo "hooks_builds: no '$bin'" >&2; exit 2; }
		for l in redis nginx; do
			for st in hooks full; do
				log=$out/$lab-$l-$st-$r.log args=(--profile --stage $st --netns "$sns")
				[ $st = hooks ] || args+=("${extra[@]}")
				"$bin" "${args[@]}" >"$log" 2>&1 &
				h=$!; pids+=($h)
				for _ in $(seq 100); do grep -q "attach: ready" "$log" && break; sleep 0.1; done
				grep -q "attach: ready" "$log" || { cat "$log" >&2; echo "hooks_builds: '$bin' did not attach" >&2; exit 1; }
				n=$(load $l "$out/load.txt")
				kill -TERM $h; wait $h || true
				[ "${n:-0}" -gt 0 ] || { cat "$out/load.txt" >&2; echo "hooks_builds: $l load made no requests" >&2; exit 1; }
				hns=$(sed -n 's/^attach: hooks runs=[0-9]* ns=\([0-9]*\)$/\1/p' "$log")
				parts=$(sed -n 's/^attach: seconds=.* parts=\([0-9]*\) .*/\1/p' "$log")
				per=$(sed -n 's/^attach: prog \(rm_sock_[a-z]*\) runs=[0-9]* ns_per_run=\([0-9.]*\)$/\1:\2/p' "$log" | tr '\n' ' ')
				echo "R $r $lab $l $st nsreq $((hns / n)) partsreq $(awk "BEGIN { printf \"%.2f\", $parts / $n }") $per" | tee -a "$out/rounds.txt"
			done
		done
	done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
med() { "$stat" median $1; } # (word-split: one number each)
for l in redis nginx; do
	for v in "${vars[@]}"; do
		lab=${v%%=*}
		e=$(awk -v b="$lab" -v l=$l '$1 == "R" && $3 == b && $4 == l && $5 == "hooks" { printf "%s ", $7 }' "$out/rounds.txt")
		f=$(awk -v b="$lab" -v l=$l '$1 == "R" && $3 == b && $4 == l && $5 == "full" { printf "%s ", $7 }' "$out/rounds.txt")
		net=$(awk "BEGIN { printf \"%.0f\", $(med "$f") - $(med "$e") }")
		echo "$l $lab net_ns_per_request=$net pct_of_server=$(awk "BEGIN { printf \"%.2f\", $net * 100 / ${srv_ns[$l]} }") rounds=$(echo $f | tr ' ' ',')"
	done
done
