#!/usr/bin/env bash
# bench/hooks_ab.sh - the kernel hooks of two builds on the same servers, in
# one run: its own redis-server and nginx (one worker, 1 KiB file) on
# loopback, loaded by redis-benchmark -c 50 GET (30000 requests) and
# wrk -t1 -c50 (3 s), in rounds rotating detached / hooks of build A /
# hooks of build B (bench_attach --profile of each build: its eBPF programs
# and ring drain, nothing sent). Per round and mode: throughput, server and
# load-generator CPU per request, and the hooks' own run time per request
# from the kernel's BPF statistics (machine-wide, ~55 ns of statistics per
# hook run included), the figure that stays put on a noisy machine; then
# medians per mode. Both builds need bench_attach with --profile.
# Usage: bench/hooks_ab.sh BUILD_A BUILD_B [ROUNDS (5)] [OUT (/tmp/hooks_ab)]
set -u
BASE=$1 NEW=$2 R=${3:-5} out=${4:-/tmp/hooks_ab}
rm -rf $out; mkdir -p $out/redis $out/nginx/www $out/nginx/tmp; chmod 755 $out
pids=(); cleanup(){ for p in "${pids[@]}"; do kill $p 2>/dev/null; done; wait 2>/dev/null; }; trap cleanup EXIT
rport=$((21000 + RANDOM % 5000)); nport=$((rport+1))
redis-server --bind 127.0.0.1 --port $rport --save '' --appendonly no --protected-mode no --dir $out/redis --logfile $out/redis/redis.log --daemonize no & rpid=$!; pids+=($rpid)
head -c 1024 /dev/zero | tr '\0' 'x' >$out/nginx/www/index.html; chmod -R a+rX $out/nginx
cat >$out/nginx/nginx.conf <<EOC
daemon off; master_process on; worker_processes 1; pid $out/nginx/nginx.pid; error_log $out/nginx/error.log warn;
events { worker_connections 1024; }
http { access_log off; client_body_temp_path $out/nginx/tmp/body; proxy_temp_path $out/nginx/tmp/proxy; fastcgi_temp_path $out/nginx/tmp/fastcgi; uwsgi_temp_path $out/nginx/tmp/uwsgi; scgi_temp_path $out/nginx/tmp/scgi;
 server { listen 127.0.0.1:$nport; root $out/nginx/www; } }
EOC
nginx -c $out/nginx/nginx.conf -p $out/nginx -e $out/nginx/error.log & npid=$!; pids+=($npid)
sleep 1
nw=$(pgrep -P $npid | head -1)
cpu() { cat /proc/$1/task/*/schedstat | awk "{s+=\$1} END {printf \"%.0f\", s}"; }
kids() { sed 's/m/ /; s/s$//' | awk '{printf "%.0f", ($1*60+$2)*1e9}'; }
att() { # build
  [ "$1" = - ] && return
  $1/bench/bench_attach --profile >$out/att.log 2>&1 & h=$!
  for i in $(seq 100); do grep -q "attach: ready" $out/att.log && break; sleep 0.1; done
}
det() { hk=0; [ -z "$h" ] && return; kill -INT $h; wait $h; h=; hk=$(awk '$2=="hooks"{sub("ns=","",$4); print $4}' $out/att.log); }
modes=(detached A B); builds=(- $BASE $NEW)
NR=30000
for ((r=1;r<=R;r++)); do
  case $((r%3)) in 1) order="0 1 2";; 2) order="1 2 0";; 0) order="2 0 1";; esac
  for k in $order; do
    h=; att ${builds[$k]}
    c0=$(cpu $rpid)
    res=$( (redis-benchmark -h 127.0.0.1 -p $rport -c 50 -n $NR -t get --csv 2>/dev/null | awk -F, '$1=="\"GET\""{gsub(/"/,"",$2); print $2}'; times) )
    c1=$(cpu $rpid)
    det; rh=$hk
    rr=$(echo "$res" | head -1); rc=$(( $(echo "$res" | tail -1 | awk '{print $1}' | kids) + $(echo "$res" | tail -1 | awk '{print $2}' | kids) ))
    h=; att ${builds[$k]}
    d0=$(cpu $nw)
    res=$( (wrk -t1 -c50 -d3s http://127.0.0.1:$nport/index.html 2>/dev/null | awk '/requests in/{print $1} $1=="Requests/sec:"{print $2}'; times) )
    d1=$(cpu $nw)
    det; nh=$hk
    nn=$(echo "$res" | sed -n 1p); nr=$(echo "$res" | sed -n 2p); nc=$(( $(echo "$res" | tail -1 | awk '{print $1}' | kids) + $(echo "$res" | tail -1 | awk '{print $2}' | kids) ))
    echo "$r ${modes[$k]} redis_rps $rr srv_ns $(( (c1-c0)/NR )) cli_ns $(( rc/NR )) hook_ns $(( rh/NR )) nginx_rps $nr srv_ns $(( (d1-d0)/nn )) cli_ns $(( nc/nn )) hook_ns $(( nh/nn ))"
  done
done | tee $out/res.txt
echo "load: $(uptime)"
med() { sort -n | awk '{a[NR]=$1}END{print a[int((NR+1)/2)]}'; }
f() { awk -v m=$1 -v c=$2 '$2==m{print $c}' $out/res.txt | med; }
for m in detached A B; do
  echo "$m | redis rps $(f $m 4) srv_ns $(f $m 6) cli_ns $(f $m 8) hook_ns $(f $m 10) | nginx rps $(f $m 12) srv_ns $(f $m 14) cli_ns $(f $m 16) hook_ns $(f $m 18)"
done
