#!/usr/bin/env bash
# scripts/eval.sh - the whole accuracy evaluation in one command: seed 000
# §7.2 and seed 002's metric on the namespace testbed, Rametr beside the LR
# and Kalman estimators on the same runs, and real services as witnesses.
#
#   1. sweep    two-tier service (variant b: pooled back-end connections),
#               3 CEs at 15..120 req/s each, uniform vs lognormal(0,1)
#               arrivals; error per CE against the services' own thread
#               clocks, at the front-end (S1 of Fig. 5) and the back-end
#   2. factors  the caching factors of §7.2.3 at 60 req/s: request size fixed,
#               no / very high temporal locality, fully overlapping content,
#               read:write 10:1 and 1:1 (PUTs written through to the back-end)
#   3. phases   the 3-phase scenario of Table 2, shortened; per-window CPU per
#               CE per technique (stacked areas, Fig. 7) and the rank order
#   4. pg       PostgreSQL 15 (Debian) in rm-be, one role per CE, pgbench from
#               rm-c1..3; truth = on-CPU time of the backends serving each
#               role (/proc/PID/schedstat, process title names the role);
#               separate runs as in Fig. 9 (percentage of totals)
#      redis    redis-server (Debian) in rm-be, each CE its own commands via
#               redis-cli; INFO commandstats and separate runs as witnesses
#      nginx    nginx (Debian) in rm-fe as a reverse proxy with an upstream
#               keepalive pool, in front of tb-back --http in rm-be (a thread
#               per connection); truth = tb-back's own per-CE thread CPU
#      haproxy  haproxy (Debian) with 2 threads (RM_EVAL_HAPROXY_THREADS) and
#               `http-reuse always` in rm-fe in front of the same tb-back;
#               the same truth (full profile only)
#      memcached memcached (Debian) in rm-be: a listener thread hands each
#               connection to one of 4 worker threads; tb-mcload from
#               rm-c1..3, each CE on a worker of its own: truth = that
#               worker thread's CPU; separate runs as a witness
#      mariadb  MariaDB (Debian) in rm-be, a thread per connection beside
#               InnoDB's background threads; one user and query mix per CE
#               over one connection each: truth = that connection's
#               thread's CPU (performance_schema.threads gives its TID)
#      apache   apache2 (Debian) with mpm_event in rm-be: a listener thread
#               polls the keep-alive connections and hands each request to
#               a worker thread; mod_lua handlers of a cost per CE, curl
#               from rm-c1..3; truth from separate runs (the server idle,
#               each CE alone, each on a fresh server; full profile only)
#      etcd     etcd (Debian, a Go program) in rm-be through its JSON gateway,
#               which re-sends each request as gRPC over one connection to
#               itself; curl from rm-c1..3 (point reads, range scans, puts);
#               truth from separate runs as for apache (full profile only;
#               skipped there without etcd, which setup.sh does not install)
#      etcd-grpc  the same etcd and CEs over etcd's own gRPC API, one
#               HTTP/2 connection per CE (tb-etcdload), as etcd's clients
#               talk to it (full profile only, as etcd)
#
# Usage: scripts/eval.sh --profile ci|full [--out DIR] [--build DIR]
#          [--report DIR] [--only LIST] [--service-seconds S]
#   --profile ci    one synthetic configuration, short phases, short pg,
#                   redis, nginx, memcached and mariadb runs (about 5 min);
#                   checks the bounds
#   --profile full  everything (about 20 min); writes testbed/RESULTS.md and
#                   testbed/results/ (CSV, SVG)
#   --out DIR       raw runs, logs and databases (default /tmp/rametr-eval)
#   --build DIR     use the programs already built in DIR (default: build ./build)
#   --report DIR    where RESULTS.md, CSV and SVG go (default: testbed for
#                   full, OUT/report for ci)
#   --only LIST     comma-separated subset of sweep,factors,phases,pg,redis,nginx,
#                   haproxy,memcached,mariadb,apache,etcd,etcd-grpc (default:
#                   all; haproxy, apache and the etcd ones only on full)
#   --service-seconds S  how long the CEs load each real service together
#                   (default 30 full, 15 ci)
#   --separate-rounds N  apache and etcd: run the idle server and each CE
#                   alone N times (1..9, default 1); a CE's cost alone is the
#                   median of its rounds'
# Bounds checked on both profiles (exit 1 if one fails): Rametr's mean per-CE
# |error| <= 1% at both tiers on every synthetic configuration (RM_EVAL_TOL
# overrides), Rametr's rank order = the truth's in every phase, on PostgreSQL
# Rametr within 2% per CE of each role's backends' CPU, shares within 1 pp, the
# right rank order and V <= 2% of U where postgres's own non-tenant CPU is
# <= 1%, Rametr's rank order on redis = the separate runs', behind nginx's and haproxy's
# pooled upstream connections Rametr within 2% per CE of tb-back's truth, its
# shares within 1 pp, the right rank order; on memcached each CE on a worker
# of its own, Rametr within 2% per CE of its worker's CPU, 1 pp of share and
# the right rank order; on MariaDB within 1% per CE of its connection's
# thread, 0.5 pp of share, the right rank order and V within 0.5 pp of U from
# its other threads' CPU; on apache2 each CE alone within -32/-14/-6% and +2%
# of the server's CPU less idle, 21 pp of the separate runs' shares and their
# rank order, U within 2% of its threads' CPU and V at most 2 pp of U above
# its listener's CPU; on etcd (both APIs) the separate runs' rank order and
# at least 90% of its CPU charged (scripts/eval-report.sh).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
svc_set="" profile="" out=/tmp/rametr-eval build="" report="" only="" only_given="" sep_rounds=1
while [ $# -gt 0 ]; do
	case "$1" in
	--profile) profile=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	--report) report=$2; shift 2 ;;
	--only) only=$2 only_given=1; shift 2 ;;
	--service-seconds) svc_set=$2; shift 2 ;;
	--separate-rounds) sep_rounds=$2; shift 2 ;;
	-h|--help) awk 'NR > 1 && /^set -euo/ { exit } NR > 1' "$0"; exit 0 ;;
	*) echo "eval: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
tol=${RM_EVAL_TOL:-1.0}
case "$profile" in
full)
	dur=25 rates="15 30 45 60 75 90 105 120" arrivals="uniform lognormal"
	factors="size-fixed locality-none locality-high overlap-full rw-10-1 rw-1-1"
	ph1=40 ph2=20 ph3=60 svc_dur=30 sep_dur=15 ;;
ci)
	dur=15 rates="60" arrivals="uniform" factors=""
	ph1=10 ph2=8 ph3=12 svc_dur=15 sep_dur=8 ;;
*) echo "eval: --profile must be ci or full" >&2; exit 2 ;;
esac
# apache's truth comes from separate runs (about 70 s, and their noise needs
# the full profile's bounds): on the full profile only, unless named
if [ -z "$only" ]; then
	only="sweep,factors,phases,pg,redis,nginx,memcached,mariadb"
	[ "$profile" = full ] && only="$only,haproxy,apache,etcd,etcd-grpc"
fi
if [ -n "$svc_set" ]; then
	[[ "$svc_set" =~ ^[1-9][0-9]*$ ]] && [ "$svc_set" -ge 5 ] \
		|| { echo "eval: --service-seconds must be a whole number of seconds, at least 5" >&2; exit 2; }
	svc_dur=$svc_set
fi
[[ "$sep_rounds" =~ ^[1-9]$ ]] || { echo "eval: --separate-rounds must be 1..9" >&2; exit 2; }
want() { case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
for n in ${only//,/ }; do
	case ",sweep,factors,phases,pg,redis,nginx,haproxy,memcached,mariadb,apache,etcd,etcd-grpc," in
	*",$n,"*) ;;
	*) echo "eval: --only: unknown name '$n' (sweep, factors, phases, pg, redis, nginx, haproxy, memcached, mariadb, apache, etcd, etcd-grpc)" >&2; exit 2 ;;
	esac
done

cd "$top"
bash scripts/setup.sh
if [ -z "$build" ]; then
	echo "== building"
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j"$(nproc)" >build.log 2>&1 || { tail -30 build.log >&2; echo "eval: build failed (build.log)" >&2; exit 1; }
	build=$top/build
fi
B=$(cd "$build" && pwd)
for p in aggregator/rametr-aggregator collector/rametr-collector ctl/rametrctl testbed/tb-front \
	 testbed/tb-back testbed/tb-load testbed/tb-mcload; do
	[ -x "$B/$p" ] || { echo "eval: '$B/$p' is missing (build it first)" >&2; exit 1; }
done
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
for p in "$PGBIN/initdb" "$PGBIN/postgres" /usr/bin/pgbench /usr/bin/psql /usr/bin/redis-server \
	 /usr/bin/redis-cli /usr/sbin/nginx /usr/bin/curl /usr/bin/memcached /usr/sbin/mariadbd /usr/bin/mariadb \
	 /usr/bin/mariadb-install-db /usr/sbin/apache2 /usr/sbin/haproxy perl runuser; do
	command -v "$p" >/dev/null || { echo "eval: '$p' is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
out=$(realpath -m "$out")
[ -n "$report" ] || { [ "$profile" = full ] && report=$top/testbed || report=$out/report; }
report=$(realpath -m "$report")
CTL="$B/ctl/rametrctl"

# The estimators (LR, Kalman) exist when rametrctl usage has --source.
est=0
# (the help read whole first: under pipefail, grep -q's early exit could fail the pipe)
grep -q -- '--source' <<<"$("$CTL" usage --help 2>&1)" && est=1
techs="Rametr"
[ $est -eq 1 ] && techs="Rametr LR Kalman"

tb_name=eval
. "$top/scripts/testbed-lib.sh"
tb_init
# The collectors run in their default configuration, as a user runs them.
# The hosts are taken for each experiment and given back after it, so that
# other users of the testbed (tests) wait for one experiment, not for all.
tb_hosts_quiet=1
# RM_EVAL_COLLECTOR_ARGS: extra collector options, to compare a run with the
# default against another configuration (the bounds are for the default)
read -ra tb_col_extra <<<"${RM_EVAL_COLLECTOR_ARGS:-}"
rm -rf "$out" && mkdir -p "$out/runs"
RES=$out/results.csv      # exp,config,server,technique,ce,truth,value,unit,error
echo "exp,config,server,technique,ce,truth,value,unit,error" >"$RES"
addr() { $NETNS addr "$1"; }
# wait_port HOST PORT PID LOG NAME: waits up to 5 s for a listener on PORT in
# HOST's namespace; exits (showing LOG) if process PID ends first or it never comes.
wait_port() {
	local j
	for j in $(seq 1 50); do
		$NETNS exec "$1" ss -Hltn "sport = :$2" | grep -q . && return 0
		kill -0 "$3" 2>/dev/null || break
		sleep 0.1
	done
	cat "$4" >&2; echo "eval: $5 is not listening on port $2" >&2; exit 1
}

# Writes an aggregator configuration: CE cN = host cN's address on server
# port $2; with the estimators, [estimate S] for each server S in $3...
mkcfg() {
	local f=$1 port=$2 c s
	shift 2
	: >"$f"
	for c in c1 c2 c3; do printf '[ce %s]\nclient = %s\nserver_port = %s\n\n' "$c" "$(addr $c)" "$port" >>"$f"; done
	if [ $est -eq 1 ]; then
		for s in "$@"; do printf '[estimate %s]\nmethod = lr, kalman\n\n' "$s" >>"$f"; done
	fi
	# a setting under evaluation, e.g. RM_EVAL_INI_EXTRA='[aggregator]\ngo_labelled_runtime_by_requests = 0'
	[ -z "${RM_EVAL_INI_EXTRA:-}" ] || printf '%b\n' "$RM_EVAL_INI_EXTRA" >>"$f"
}

# Dumps the per-window CPU of server $2 for every technique into
# DIR/win-SERVER-TECH.csv (rametrctl's csv: server,ce,resource,value,total,
# unit,window_start,window_len).
dump_windows() {
	local d=$1 s=$2 t src
	for t in $techs; do
		case $t in Rametr) src=() ;; LR) src=(--source lr) ;; Kalman) src=(--source kalman) ;; esac
		if ! "$CTL" usage --db "$d/rametr.db" --server "$s" --resource cpu --per-window -o csv "${src[@]}" \
			>"$d/win-$s-$t.csv" 2>"$d/win-$s-$t.err"; then
			echo "eval: rametrctl usage ${src[*]} failed for $s in $d: $(head -1 "$d/win-$s-$t.err")" >&2
			: >"$d/win-$s-$t.csv"
		fi
	done
}

# Per-CE sums (ns) of a window dump, windows starting in [FROM, TO) Unix
# seconds (default all): lines "ce value"; also "__U__ total" (the server's U).
sum_windows() {
	awk -F, -v from="${2:-0}" -v to="${3:-0}" 'NR > 1 && $3 == "cpu" {
		ws = int($7 / 1e9); if (ws < from || (to > 0 && ws >= to)) next
		v[$2] += $4; if (!(ws in seen)) { seen[ws] = 1; u += $5 } }
		END { for (c in v) print c, v[c]; print "__U__", u }' "$1"
}

# Appends result rows for one run: truth lines "ce value" in file $5,
# estimates from the window dumps of server $3 in $4 (windows [$6, $7)).
add_rows() {
	local exp=$1 cfg=$2 s=$3 d=$4 truth=$5 from=${6:-0} to=${7:-0} t
	for t in $techs; do
		sum_windows "$d/win-$s-$t.csv" "$from" "$to" | awk -v ex="$exp" -v cfg="$cfg" -v s="$s" -v t="$t" '
			FNR == NR { tr[$1] = $2; next }
			{ est[$1] = $2 }
			END { for (c in tr) printf "%s,%s,%s,%s,%s,%.0f,%.0f,ns,%s\n", ex, cfg, s, t, c, tr[c], est[c] + 0,
				((c in est) && tr[c] > 0 ? sprintf("%.3f", 100 * (est[c] - tr[c]) / tr[c]) : "") }' "$truth" - \
			| sort >>"$RES"
		# windows the technique has estimates for, of the windows Rametr measured
		awk -F, -v from="$from" -v to="$to" 'NR > 1 && $2 ~ /^c[0-9]+$/ { ws = int($7 / 1e9)
			if (ws < from || (to > 0 && ws >= to)) next; if (!((FILENAME, ws) in seen)) { seen[FILENAME, ws] = 1; n[FILENAME]++ } }
			END { printf "%d %d\n", n[ARGV[1]], n[ARGV[2]] }' "$d/win-$s-Rametr.csv" "$d/win-$s-$t.csv" \
			| awk -v ex="$exp" -v cfg="$cfg" -v s="$s" -v t="$t" '{ printf "%s,%s,%s,%s,windows,%d,%d,windows,\n", ex, cfg, s, t, $1, $2 }' >>"$RES"
	done
}

# be_rows EXP CONFIG TRUTH: the results of a run on rm-be over [t_a, t_b)
# ($d): the window dumps, V by reason (v-be.csv), interval.txt, the result
# rows against TRUTH ("ce ns") and Rametr's sums (rametr-sums.txt).
be_rows() {
	dump_windows "$d" be
	"$CTL" unaccountable --db "$d/rametr.db" --server be --resource cpu --since "$t_a" --until "$t_b" -o csv \
		>"$d/v-be.csv" 2>/dev/null || :
	echo "$t_a $t_b" >"$d/interval.txt"
	add_rows "$1" "$2" be "$d" "$3" $t_a $t_b
	sum_windows "$d/win-be-Rametr.csv" $t_a $t_b >"$d/rametr-sums.txt"
}

# truth file of tb-front/tb-back -> "ce cpu_ns"
truth_lines() { awk -F, 'NR > 1 { print $1, $3 }' "$1"; }


# ---------------------------------------------------------------- synthetic
# Per-CE request CPU at the front-end (us): distinct, so the truths differ.
# The back-end's storage CPU is lighter than twotier.sh's (300 us + 150 us
# per KB) so that 3 x 120 req/s fit on a 2-core machine (about 1 core).
CPU_US=(1000:1400 1800:2200 2600:3000)
tb_back_base_us=300 tb_back_per_kb_us=150

# run_twotier EXP NAME ARRIVAL RATE FACTOR: one synthetic configuration.
run_twotier() {
	local exp=$1 name=$2 arrival=$3 rate=$4 factor=$5 d i ce base hot_frac=0.6 size=1:16 wfrac=0 loads=() ok=1
	d=$out/runs/$name; mkdir -p "$d"
	case $factor in
	base) ;;
	size-fixed) size=8:8 ;;
	locality-none) hot_frac=0 ;;
	locality-high) hot_frac=0.95 ;;
	overlap-full) ;;
	rw-10-1) wfrac=0.0909 ;;   # reads:writes 10:1
	rw-1-1) wfrac=0.5 ;;
	*) echo "eval: unknown factor '$factor'" >&2; return 2 ;;
	esac
	echo "== $name: variant b, $arrival, $rate req/s per CE, ${dur}s"
	mkcfg "$d/rametr.ini" $tb_fe_port fe be
	tb_take_hosts
	tb_rametr_start "$d" "$d/rametr.ini" fe be
	tb_twotier_start "$d" b
	read -r busy0 steal0 < <(tb_cpu_ticks)
	for i in 0 1 2; do
		ce=c$((i + 1)) base=$(((i + 1) * 1000000))
		[ "$factor" = overlap-full ] && base=1000000
		$NETNS exec "$ce" "$B/testbed/tb-load" --proto get --server "$(addr fe):$tb_fe_port" --bind "$(addr $ce)" \
			--ce "$ce" --rate "$rate" --duration "$dur" --arrival "$arrival" --cpu-us "${CPU_US[$i]}" \
			--addr-base $base --addr-range 100000 --hot 6 --hot-frac $hot_frac --size-kb $size \
			--write-frac $wfrac --seed $((i + 1)) >"$d/load-$ce.txt" 2>"$d/load-$ce.log" &
		loads+=($!); tb_pids+=($!)
	done
	for i in "${loads[@]}"; do wait "$i" || ok=0; tb_forget "$i"; done
	# the machine during the load: steal share and the load average (other users)
	read -r busy1 steal1 < <(tb_cpu_ticks)
	awk -v b=$((busy1 - busy0)) -v s=$((steal1 - steal0)) '{ printf "%.1f %.1f\n", b + s ? 100 * s / (b + s) : 0, $1 }' \
		/proc/loadavg >"$d/machine.txt"
	tb_twotier_stop
	tb_rametr_stop
	tb_release_hosts
	[ $ok -eq 1 ] || { cat "$d"/load-*.log >&2; echo "eval: $name: a load generator reported errors" >&2; return 1; }
	awk -F, 'NR > 1 { r += $2; h += $3 } END { if (r) printf "cache hit rate %.1f%%\n", 100 * h / r }' "$d/stats-fe.csv" \
		| tee "$d/cache.txt"
	for s in fe be; do
		dump_windows "$d" $s
		truth_lines "$d/truth-$s.csv" >"$d/truth-$s.txt"
	done
	add_rows "$exp" "$name" fe "$d" "$d/truth-fe.txt"
	add_rows "$exp" "$name" be "$d" "$d/truth-be.txt"
}

if want sweep; then
	for a in $arrivals; do for r in $rates; do run_twotier sweep "sweep-$a-$r" $a $r base; done; done
fi
if want factors; then
	for f in $factors; do run_twotier factors "factor-$f" uniform 60 $f; done
fi

# ---------------------------------------------------------------- phases
# Table 2, shortened: c1 light all along; c3 many cheap requests all along;
# c2 light in phase 1, CPU-heavy from phase 2, heavier every third of phase 3.
if want phases; then
	d=$out/runs/phases; mkdir -p "$d/snap"
	echo "== phases: ${ph1}/${ph2}/${ph3} s"
	mkcfg "$d/rametr.ini" $tb_fe_port fe be
	tb_take_hosts
	tb_rametr_start "$d" "$d/rametr.ini" fe be
	tb_twotier_start "$d" b
	p3a=$((ph3 / 3)) p3b=$((ph3 / 3)) p3c=$((ph3 - 2 * (ph3 / 3)))
	# per CE: "rate cpu seconds" steps
	steps_c1="10 800:1200 $((ph1 + ph2 + ph3))"
	steps_c2="20 1500:2500 $ph1;20 7000:9000 $ph2;25 7000:9000 $p3a;30 7000:9000 $p3b;35 7000:9000 $p3c"
	steps_c3="80 150:350 $((ph1 + ph2 + ph3))"
	now=$(date +%s.%N); t0=$(awk -v n="$now" 'BEGIN { print int(n) + 2 }')
	sleep "$(awk -v n="$now" -v t="$t0" 'BEGIN { print t - n }')"
	loads=()
	for i in 1 2 3; do
		ce=c$i; var=steps_$ce
		(
			IFS=';' read -ra steps <<<"${!var}"
			for st in "${steps[@]}"; do
				read -r rate cpu secs <<<"$st"
				$NETNS exec "$ce" "$B/testbed/tb-load" --proto get --server "$(addr fe):$tb_fe_port" \
					--bind "$(addr $ce)" --ce "$ce" --rate "$rate" --duration "$secs" --arrival lognormal \
					--cpu-us "$cpu" --addr-base $((i * 1000000)) --addr-range 100000 --hot 6 --hot-frac 0.6 \
					--size-kb 1:16 --seed $i >>"$d/load-$ce.txt" 2>>"$d/load-$ce.log" || exit 1
			done
		) &
		loads+=($!); tb_pids+=($!)
	done
	# the front-end's truth file (rewritten every second), sampled each second
	end=$((t0 + ph1 + ph2 + ph3 + 3))
	while [ "$(date +%s)" -lt $end ]; do
		n=$(date +%s); cp "$d/truth-fe.csv" "$d/snap/$n.csv" 2>/dev/null || true
		sleep "$(awk -v t="$(date +%s.%N)" 'BEGIN { printf "%.3f", int(t) + 1.5 - t }')"
	done
	ok=1
	for i in "${loads[@]}"; do wait "$i" || ok=0; tb_forget "$i"; done
	tb_twotier_stop
	tb_rametr_stop
	tb_release_hosts
	[ $ok -eq 1 ] || { cat "$d"/load-*.log >&2; echo "eval: phases: a load generator reported errors" >&2; exit 1; }
	dump_windows "$d" fe
	# truth per second: differences of consecutive snapshots (sampled at
	# second + 0.5, the file lags up to 1 s), as rametrctl's window csv
	ls "$d/snap" | sort -n | while read -r f; do awk -F, -v t="${f%.csv}" 'NR > 1 { print t, $1, $3 }' "$d/snap/$f"; done \
		| awk 'BEGIN { print "server,ce,resource,value,total,unit,window_start,window_len" }
			{ if ($2 in last) { g = $1 - lt[$2]   # a missed sample: spread over the gap
				for (k = lt[$2]; k < $1; k++) printf "fe,%s,cpu,%d,0,ns,%d000000000,1000000000\n", $2, ($3 - last[$2]) / g, k }
			  last[$2] = $3; lt[$2] = $1 }' >"$d/win-fe-Truth.csv"
	echo "$t0 $ph1 $ph2 $ph3" >"$d/phases.txt"
	for p in 1 2 3; do
		case $p in 1) f=$t0 to=$((t0 + ph1)) ;; 2) f=$((t0 + ph1)) to=$((t0 + ph1 + ph2)) ;; 3) f=$((t0 + ph1 + ph2)) to=$((t0 + ph1 + ph2 + ph3)) ;; esac
		sum_windows "$d/win-fe-Truth.csv" $f $to | grep -v __U__ >"$d/truth-p$p.txt"
		add_rows phases "phase$p" fe "$d" "$d/truth-p$p.txt" $f $to
	done
fi

# ---------------------------------------------------------------- PostgreSQL
# On-CPU ns of every process of namespace rm-be whose title starts with
# "postgres: ROLE " (ROLE = c1..c3), and of all its processes ("all").
# Shell builtins only between the reads, so that one sample takes little time.
pg_cpu() {
	local p t role ns pids
	pids=$(ip netns pids rm-be 2>/dev/null)
	for p in $pids; do
		t="" ns=""
		{ IFS= read -r -d '' t <"/proc/$p/cmdline"; } 2>/dev/null || [ -n "$t" ] || continue
		{ read -r ns _ <"/proc/$p/schedstat"; } 2>/dev/null || continue
		role=other
		case "$t" in "postgres: c1 "*) role=c1 ;; "postgres: c2 "*) role=c2 ;; "postgres: c3 "*) role=c3 ;; esac
		echo "$role $p $ns"
	done
}
# Differences of two pg_cpu samples, over the processes present in both: "role ns" + "all ns".
pg_diff() {
	awk 'FNR == NR { a[$2] = $3; next } ($2 in a) { d = $3 - a[$2]; s[$1] += d; all += d }
		END { for (r in s) if (r != "other") print r, s[r]; print "all", all }' "$1" "$2"
}
# Sleeps until the next whole second (+ $1 s); prints that second.
at_second() { local n; n=$(date +%s.%N); sleep "$(awk -v n="$n" -v o="${1:-0}" 'BEGIN { printf "%.3f", int(n) + 1 + o - n }')"; awk -v n="$n" 'BEGIN { print int(n) + 1 }'; }

# Rows of generate_series per query and tx/s, per CE: c1 short point queries
# at hundreds of tx/s, c2 few heavy ones, c3 between.
PG_COST=(10 20000 3000) PG_RATE=(300 15 40)
PG_COST=(${RM_EVAL_PG_COST:-${PG_COST[*]}}) PG_RATE=(${RM_EVAL_PG_RATE:-${PG_RATE[*]}})
pg_load() { # CE-index seconds DIR (output; the script is in $pgd)
	local i=$1 ce=c$1
	$NETNS exec "$ce" runuser -u postgres -- pgbench -h "$(addr be)" -p 5432 -U "$ce" -n -c 2 -j 1 -M prepared \
		-R "${PG_RATE[$i - 1]}" -T "$2" -f "$pgd/$ce.sql" eval >"$3/pgbench-$ce.txt" 2>&1
}
if want pg; then
	d=$out/runs/pg; mkdir -p "$d"
	echo "== PostgreSQL in rm-be, roles c1..c3, pgbench from rm-c1..3 (${svc_dur}s together, ${sep_dur}s alone each)"
	mkcfg "$d/rametr.ini" 5432 be
	# postgres (the server and pgbench) runs as user postgres, which may not
	# enter $out (a clone under /root): its data and scripts live in $pgd
	tb_service_dir postgres pgd
	runuser -u postgres -- "$PGBIN/initdb" -D "$pgd/data" -A trust -U postgres --no-sync >"$d/initdb.log" 2>&1 \
		|| { cat "$d/initdb.log" >&2; exit 1; }
	echo "host all all 10.213.0.0/24 trust" >>"$pgd/data/pg_hba.conf"
	tb_take_hosts
	tb_rametr_start "$d" "$d/rametr.ini" be
	$NETNS exec be runuser -u postgres -- "$PGBIN/postgres" -D "$pgd/data" -c listen_addresses="$(addr be)" \
		-c port=5432 -c unix_socket_directories="$pgd/data" -c fsync=off -c max_connections=20 \
		-c shared_buffers=32MB -c autovacuum=off >"$d/postgres.log" 2>&1 &
	pg=$!; tb_pids+=($pg)
	tb_wait_log "$d/postgres.log" "ready to accept connections" $pg
	psql_be() { runuser -u postgres -- psql -h "$(addr be)" -U postgres -q -v ON_ERROR_STOP=1 "$@"; }
	psql_be -c "CREATE DATABASE eval" >/dev/null
	for i in 1 2 3; do
		psql_be -c "CREATE ROLE c$i LOGIN" >/dev/null
		echo "SELECT sum(i) FROM generate_series(1, ${PG_COST[$i - 1]}) AS s(i);" >"$pgd/c$i.sql"
		chmod 644 "$pgd/c$i.sql"
	done
	# together: truth and Rametr over whole seconds inside the run
	loads=()
	for i in 1 2 3; do pg_load $i $((svc_dur + 4)) "$d" & loads+=($!); tb_pids+=($!); done
	sleep 2; t_a=$(at_second 0); pg_cpu >"$d/cpu-a.txt"
	sleep $((svc_dur - 1)); t_b=$(at_second 0); pg_cpu >"$d/cpu-b.txt"
	for i in "${loads[@]}"; do wait "$i" || { cat "$d"/pgbench-*.txt >&2; echo "eval: pgbench failed" >&2; exit 1; }; tb_forget "$i"; done
	pg_diff "$d/cpu-a.txt" "$d/cpu-b.txt" >"$d/truth-together.txt"
	# alone: each CE by itself, all of postgres's CPU (Fig. 9's separate runs)
	for i in 1 2 3; do
		pg_load $i $((sep_dur + 3)) "$d" & l=$!; tb_pids+=($l)
		sleep 1.5; s_a=$(at_second 0); pg_cpu >"$d/sep-a.txt"
		sleep $((sep_dur - 1)); s_b=$(at_second 0); pg_cpu >"$d/sep-b.txt"
		wait $l || { cat "$d/pgbench-c$i.txt" >&2; echo "eval: pgbench failed" >&2; exit 1; }; tb_forget $l
		# ns of CPU per second
		echo "c$i $(pg_diff "$d/sep-a.txt" "$d/sep-b.txt" | awk -v n=$((s_b - s_a)) '$1 == "all" { printf "%.0f", $2 / n }')" >>"$d/separate.txt"
	done
	# fast shutdown through the postmaster (runuser would report a SIGTERM as a failure)
	kill -INT "$(head -1 "$pgd/data/postmaster.pid")"
	wait $pg || { tail -20 "$d/postgres.log" >&2; echo "eval: postgres failed" >&2; exit 1; }
	tb_forget $pg
	tb_rametr_stop
	tb_release_hosts
	dump_windows "$d" be
	"$CTL" unaccountable --db "$d/rametr.db" --server be --resource cpu --since "$t_a" --until "$t_b" -o csv \
		>"$d/v-be.csv" 2>/dev/null || :
	grep -v '^all' "$d/truth-together.txt" >"$d/truth-backends.txt"
	echo "$t_a $t_b" >"$d/interval.txt"
	for i in 1 2 3; do echo "c$i ${PG_COST[$i - 1]} ${PG_RATE[$i - 1]}"; done >"$d/pg-load.txt"
	add_rows pg backends be "$d" "$d/truth-backends.txt" $t_a $t_b
	sum_windows "$d/win-be-Rametr.csv" $t_a $t_b >"$d/rametr-sums.txt"
fi

# ---------------------------------------------------------------- redis
# c1 GET, c2 SET, c3 LRANGE of 300 elements: each CE its own commands.
RD_CMD=("GET k1" "SET k2 vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv" "LRANGE biglist 0 299")
RD_IVL=(0.025 0.0125 0.0125)   # seconds between commands (redis-cli -i)
rd_cli() { $NETNS exec "$1" redis-cli -h "$(addr be)" -p 6379 "${@:2}"; }
# from the root namespace (10.213.0.1): no CE rule names it, Rametr leaves it unaccounted
rd_root() { redis-cli -h "$(addr be)" -p 6379 "$@"; }
rd_load() { # CE-index seconds
	local i=$1 n
	n=$(awk -v s="$2" -v iv="${RD_IVL[$1 - 1]}" 'BEGIN { printf "%d", s / iv }')
	# shellcheck disable=SC2086
	rd_cli c$i -r "$n" -i "${RD_IVL[$i - 1]}" ${RD_CMD[$i - 1]} >/dev/null
}
rd_stats() { # -> "cmd usec" lines and "cpu usec"
	rd_root INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_\([a-z]*\):calls=[0-9]*,usec=\([0-9]*\),.*/\1 \2/p'
	rd_root INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "cpu %.0f\n", s * 1e6 }'
}
if want redis; then
	d=$out/runs/redis; mkdir -p "$d/data"
	echo "== redis in rm-be, c1 GET / c2 SET / c3 LRANGE from rm-c1..3 (${svc_dur}s together, ${sep_dur}s alone each)"
	mkcfg "$d/rametr.ini" 6379 be
	tb_take_hosts
	tb_rametr_start "$d" "$d/rametr.ini" be
	$NETNS exec be redis-server --bind "$(addr be)" --port 6379 --save "" --appendonly no \
		--protected-mode no --dir "$d/data" --daemonize no >"$d/redis.log" 2>&1 &
	rd=$!; tb_pids+=($rd)
	tb_wait_log "$d/redis.log" "Ready to accept connections" $rd
	rd_root SET k1 hello >/dev/null
	for j in $(seq 1 10); do rd_root RPUSH biglist $(seq 1 30) >/dev/null; done
	loads=()
	rd_stats >"$d/stats-a0.txt"
	for i in 1 2 3; do rd_load $i $((svc_dur + 4)) & loads+=($!); tb_pids+=($!); done
	sleep 2; t_a=$(at_second 0); rd_stats >"$d/stats-a.txt"
	sleep $((svc_dur - 1)); t_b=$(at_second 0); rd_stats >"$d/stats-b.txt"
	for i in "${loads[@]}"; do wait "$i" || true; tb_forget "$i"; done
	awk 'FNR == NR { a[$1] = $2; next } { m = $1 == "get" ? "c1" : $1 == "set" ? "c2" : $1 == "lrange" ? "c3" : "";
		if (m != "") print m, ($2 - a[$1]) * 1000 }' "$d/stats-a.txt" "$d/stats-b.txt" >"$d/truth-commandstats.txt"
	for i in 1 2 3; do
		rd_load $i $((sep_dur + 3)) & l=$!; tb_pids+=($l)
		sleep 1.5; s_a=$(at_second 0); rd_stats >"$d/sep-a.txt"
		sleep $((sep_dur - 1)); s_b=$(at_second 0); rd_stats >"$d/sep-b.txt"
		wait $l || true; tb_forget $l
		# ns of CPU per second
		awk -v ce=c$i -v n=$((s_b - s_a)) 'FNR == NR { a[$1] = $2; next } $1 == "cpu" { printf "%s %.0f\n", ce, ($2 - a["cpu"]) * 1000 / n }' \
			"$d/sep-a.txt" "$d/sep-b.txt" >>"$d/separate.txt"
	done
	tb_stop $rd redis-server "$d/redis.log"
	tb_rametr_stop
	tb_release_hosts
	dump_windows "$d" be
	echo "$t_a $t_b" >"$d/interval.txt"
	add_rows redis commandstats be "$d" "$d/truth-commandstats.txt" $t_a $t_b
	sum_windows "$d/win-be-Rametr.csv" $t_a $t_b >"$d/rametr-sums.txt"
fi

# ---------------------------------------------------------------- nginx, haproxy
# A reverse proxy in rm-fe whose pooled upstream connections carry every CE's
# requests in turn, in front of tb-back --http in rm-be. Each CE fetches
# objects of its own size from rm-cN over one keep-alive connection (curl
# --rate). nginx: Debian's, one worker, an upstream keepalive pool of at most
# 4 idle connections. haproxy: Debian's, 2 threads (nbthread 2) and
# `http-reuse always`, so a CE's requests may leave on a connection another
# thread opened.
NG_PORT=8080 NG_BE_PORT=9180
NG_SIZE=(2 8 16)   # KB per request, per CE
NG_RATE=(30 30 10) # requests per second, per CE
# On-CPU ns and voluntary context switches of every thread of every process
# of namespace rm-fe (the proxy's processes; /proc/PID/schedstat alone is the
# process's main thread): "tid ns switches".
ng_cpu() {
	local p t ns
	for p in $(ip netns pids rm-fe 2>/dev/null); do
		for t in /proc/$p/task/*; do
			{ read -r ns _ <"$t/schedstat"; } 2>/dev/null &&
				echo "${t##*/} $ns $(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status" 2>/dev/null)"
		done
	done
}
# proxy_conf KIND DIR LOG: writes DIR/KIND.conf for the proxy KIND
proxy_conf() {
	local kind=$1 pd=$2 log=$3
	case $kind in
	nginx)
		mkdir -p "$pd/tmp"; chown www-data "$pd/tmp"
		cat >"$pd/nginx.conf" <<-EOF
			user www-data;
			worker_processes 1;
			pid $pd/nginx.pid;
			error_log $log;
			events { worker_connections 256; }
			http {
				access_log off;
				client_body_temp_path $pd/tmp/body;
				proxy_temp_path $pd/tmp/proxy;
				fastcgi_temp_path $pd/tmp/fastcgi;
				uwsgi_temp_path $pd/tmp/uwsgi;
				scgi_temp_path $pd/tmp/scgi;
				upstream be { server $(addr be):$NG_BE_PORT; keepalive 4; }
				server {
					listen $(addr fe):$NG_PORT;
					location / {
						proxy_pass http://be;
						proxy_http_version 1.1;
						proxy_set_header Connection "";
					}
				}
			}
		EOF
		;;
	haproxy)
		cat >"$pd/haproxy.conf" <<-EOF
			global
				nbthread ${RM_EVAL_HAPROXY_THREADS:-2}
				maxconn 256
				user www-data
				group www-data
			defaults
				mode http
				timeout connect 5s
				timeout client 60s
				timeout server 60s
				http-reuse always
			frontend fe
				bind $(addr fe):$NG_PORT
				default_backend be
			backend be
				server be1 $(addr be):$NG_BE_PORT
		EOF
		;;
	esac
}
# proxy_eval KIND: the run of the proxy KIND (nginx or haproxy)
proxy_eval() {
	local kind=$1 d=$out/runs/$1 ngd ngb ng i n ok s loads
	mkdir -p "$d"
	echo "== $kind in rm-fe before tb-back --http in rm-be, from rm-c1..3 (${svc_dur}s)"
	tb_service_dir www-data ngd
	proxy_conf $kind "$ngd" "$d/$kind-error.log"
	mkcfg "$d/rametr.ini" $NG_PORT fe be
	tb_take_hosts
	tb_rametr_start "$d" "$d/rametr.ini" fe be
	$NETNS exec be "$B/testbed/tb-back" --http --listen "$(addr be):$NG_BE_PORT" --truth "$d/truth-be.csv" \
		--cpu-us-base $tb_back_base_us --cpu-us-per-kb $tb_back_per_kb_us >"$d/tb-back.log" 2>&1 &
	ngb=$!; tb_pids+=($ngb)
	tb_wait_log "$d/tb-back.log" "listening" $ngb
	case $kind in
	nginx) $NETNS exec fe nginx -c "$ngd/nginx.conf" -p "$ngd" -e "$d/nginx-error.log" -g "daemon off;" \
		>"$d/nginx.log" 2>&1 & ;;
	haproxy) $NETNS exec fe haproxy -f "$ngd/haproxy.conf" -db >"$d/haproxy-error.log" 2>&1 & ;;
	esac
	ng=$!; tb_pids+=($ng)
	wait_port fe $NG_PORT $ng "$d/$kind-error.log" $kind
	loads=()
	for i in 1 2 3; do
		n=$((NG_RATE[i - 1] * (svc_dur + 4)))
		$NETNS exec c$i curl -sS --fail -o /dev/null --rate "${NG_RATE[i - 1]}/s" \
			"http://$(addr fe):$NG_PORT/c$i/[$((i * 100000))-$((i * 100000 + n - 1))]/${NG_SIZE[i - 1]}" \
			>"$d/load-c$i.log" 2>&1 &
		loads+=($!); tb_pids+=($!)
	done
	sleep 2; t_a=$(at_second 0); ng_cpu >"$d/cpu-a.txt"
	sleep $((svc_dur - 1)); t_b=$(at_second 0); ng_cpu >"$d/cpu-b.txt"
	ok=1
	for i in "${loads[@]}"; do wait "$i" || ok=0; tb_forget "$i"; done
	# tb-back's threads' own CPU since it started: its main thread (ticks,
	# truth file) apart from its connection threads
	for t in /proc/$ngb/task/*; do
		{ read -r ns _ <"$t/schedstat"; } 2>/dev/null && echo "$([ "${t##*/}" = "$ngb" ] && echo main || echo conn) $ns"
	done | awk '{ s[$1] += $2; n[$1]++ } END { for (k in s) print k, s[k], n[k] }' >"$d/tb-back-threads.txt"
	# haproxy leaves with 143 on SIGTERM (its hard stop); SIGUSR1 is its graceful one
	tb_stop $ng $kind "$d/$kind-error.log" $([ $kind = haproxy ] && echo USR1 || echo TERM)
	tb_stop $ngb tb-back "$d/tb-back.log"
	tb_rametr_stop
	tb_release_hosts
	[ $ok -eq 1 ] || { cat "$d"/load-*.log >&2; echo "eval: $kind: a client reported errors" >&2; exit 1; }
	echo "$t_a $t_b" >"$d/interval.txt"
	awk -v k=$kind 'FNR == NR { a[$1] = $2; next } ($1 in a) { s += $2 - a[$1] } END { print k, s }' \
		"$d/cpu-a.txt" "$d/cpu-b.txt" >"$d/proxy-cpu.txt"
	for s in fe be; do
		dump_windows "$d" $s
		"$CTL" unaccountable --db "$d/rametr.db" --server $s --resource cpu -o csv >"$d/v-$s.csv" 2>/dev/null || :
	done
	truth_lines "$d/truth-be.csv" >"$d/truth-be.txt"
	add_rows $kind pooled be "$d" "$d/truth-be.txt"
	sum_windows "$d/win-be-Rametr.csv" >"$d/rametr-sums-be.txt"
	sum_windows "$d/win-fe-Rametr.csv" $t_a $t_b >"$d/rametr-sums-fe.txt"
}
want nginx && proxy_eval nginx
want haproxy && proxy_eval haproxy

# ---------------------------------------------------------------- memcached
# Debian's memcached in rm-be: its listener thread accepts each connection and
# hands it over a pipe to the next of its 4 worker threads in turn, which
# serves it from then on. Each CE runs tb-mcload from rm-cN over one
# connection, its own kind of request. The CEs connect one after another, so
# that each lands on a worker of its own: **exact truth** is then the CPU of
# the CE's worker thread (/proc/PID/task/TID/schedstat) over the run; the one
# worker no CE uses shows that the mapping held. Separate runs (each CE alone
# at the same rate, the CPU of the listener and the workers less their idle
# CPU, per second of load) are a witness as for redis (seed 000 Fig. 9): not
# the truth, memcached is far from additive. memcached's
# listener (timers) and background threads (LRU maintainer and crawler, slab
# and hash table maintenance) work for no request.
MC_PORT=11211 MC_THREADS=4
MC_OP=(get get set)      # per CE
MC_SIZE=(100 2000 8000)  # value bytes
MC_MULTI=(1 10 1)        # keys per get
MC_RATE=(400 150 100)    # requests per second
# memcached's on-CPU ns per thread: "comm tid ns", workers in creation (TID) order
mc_threads() {
	local t ns comm
	for t in /proc/"$1"/task/*; do
		{ read -r comm <"$t/comm" && read -r ns _ <"$t/schedstat"; } 2>/dev/null || continue
		echo "$comm ${t##*/} $ns"
	done | sort -k2,2n
}
# Differences of two mc_threads samples: "w0".."w3" (workers), "listener", "background".
mc_diff() {
	awk 'FNR == NR { a[$2] = $3; next } ($2 in a) { d = $3 - a[$2]
		if ($1 == "mc-worker") print "w" w++, d; else if ($1 == "memcached") l += d; else bg += d }
		END { print "listener", l + 0; print "background", bg + 0 }' "$1" "$2"
}
mc_load() { # CE-index seconds output
	local i=$1
	$NETNS exec c$i "$B/testbed/tb-mcload" --server "$(addr be):$MC_PORT" --bind "$(addr c$i)" \
		--rate "${MC_RATE[$i - 1]}" --duration "$2" --op "${MC_OP[$i - 1]}" --size "${MC_SIZE[$i - 1]}" \
		--multi "${MC_MULTI[$i - 1]}" --keys 500 --prefix c$i >"$3" 2>&1
}
mc_requests() { sed -n 's/^requests=\([0-9]*\) .*/\1/p' "$1"; }
if want memcached; then
	d=$out/runs/memcached; mkdir -p "$d"
	echo "== memcached in rm-be ($MC_THREADS workers behind a listener), tb-mcload from rm-c1..3 (${svc_dur}s together, ${sep_dur}s alone each)"
	mkcfg "$d/rametr.ini" $MC_PORT be
	tb_take_hosts
	tb_rametr_start "$d" "$d/rametr.ini" be
	# $mc is memcached itself: netns.sh and ip netns exec exec it
	$NETNS exec be memcached -u memcache -l "$(addr be)" -p $MC_PORT -U 0 -t $MC_THREADS -m 64 \
		>"$d/memcached.log" 2>&1 &
	mc=$!; tb_pids+=($mc)
	wait_port be $MC_PORT $mc "$d/memcached.log" memcached
	# keys for the gets, from the root namespace (no CE): connections 0, 1, ...
	nconn=0
	for i in 1 2 3; do
		[ "${MC_OP[$i - 1]}" = get ] || continue
		"$B/testbed/tb-mcload" --server "$(addr be):$MC_PORT" --fill --keys 500 --size "${MC_SIZE[$i - 1]}" \
			--prefix c$i >"$d/fill-c$i.txt" 2>&1 || { cat "$d/fill-c$i.txt" >&2; echo "eval: memcached fill failed" >&2; exit 1; }
		nconn=$((nconn + 1))
	done
	# idle: memcached's own CPU with no load
	sleep 1; mc_threads $mc >"$d/idle-a.txt"; i0=$(date +%s%N); sleep 3; mc_threads $mc >"$d/idle-b.txt"; i1=$(date +%s%N)
	mc_diff "$d/idle-a.txt" "$d/idle-b.txt" | awk -v w=$((i1 - i0)) '{ print $1, $2 * 1e9 / w }' >"$d/idle.txt"
	# together: the CEs connect in turn (0.5 s apart): CE i's connection goes to worker (nconn + i - 1) mod 4
	t_a=$(at_second 0); mc_threads $mc >"$d/cpu-a.txt"; loads=()
	for i in 1 2 3; do
		mc_load $i "$svc_dur" "$d/load-c$i.txt" & loads+=($!); tb_pids+=($!)
		echo "c$i w$(((nconn + i - 1) % MC_THREADS))" >>"$d/workers.txt"
		sleep 0.5
	done
	ok=1
	for i in "${loads[@]}"; do wait "$i" || ok=0; tb_forget "$i"; done
	t_b=$(at_second 0); mc_threads $mc >"$d/cpu-b.txt"
	[ $ok -eq 1 ] || { cat "$d"/load-*.txt >&2; echo "eval: memcached: a load generator reported errors" >&2; exit 1; }
	mc_diff "$d/cpu-a.txt" "$d/cpu-b.txt" >"$d/threads-together.txt"
	awk 'FNR == NR { w[$2] = $1; next } ($1 in w) { print w[$1], $2 }' "$d/workers.txt" "$d/threads-together.txt" \
		| sort >"$d/truth-workers.txt"
	sleep 1
	# alone: each CE by itself; CPU of the listener and the workers less their
	# idle CPU, per second of load (the run's rate): "ce ns-per-s requests"
	for i in 1 2 3; do
		mc_threads $mc >"$d/sep-a.txt"; s0=$(date +%s%N)
		mc_load $i "$sep_dur" "$d/sep-c$i.txt" || { cat "$d/sep-c$i.txt" >&2; echo "eval: memcached: tb-mcload failed" >&2; exit 1; }
		mc_threads $mc >"$d/sep-b.txt"; s1=$(date +%s%N)
		mc_diff "$d/sep-a.txt" "$d/sep-b.txt" | awk -v ce=c$i -v w=$((s1 - s0)) -v n="$(mc_requests "$d/sep-c$i.txt")" \
			'FNR == NR { idle[$1] = $2; next } $1 != "background" { s += $2 - idle[$1] * w / 1e9 }
			END { printf "%s %.0f %d\n", ce, s * 1e9 / w, n }' "$d/idle.txt" - >>"$d/separate.txt"
		sleep 0.5
	done
	tb_stop $mc memcached "$d/memcached.log"
	tb_rametr_stop
	tb_release_hosts
	for i in 1 2 3; do echo "c$i $(mc_requests "$d/load-c$i.txt")"; done >"$d/requests.txt"
	be_rows memcached workers "$d/truth-workers.txt"
fi

# ---------------------------------------------------------------- apache2
# Debian's apache2 with mpm_event in rm-be: one child process whose listener
# thread accepts and polls the connections and hands each readable one to a
# free worker thread; between requests a keep-alive connection is parked with
# the listener again, so a CE's requests run on whichever workers are free.
# mod_lua serves each CE a handler of its own cost (AP_N iterations of a loop
# per request) over one keep-alive curl connection per CE. No thread is any
# CE's, so the truth comes from separate runs (as tests/integ_go_test.c): the
# server idle, then each CE's load alone, each on a fresh server with Rametr
# watching; a CE's CPU per request alone (less the idle server's CPU) times
# its requests in the shared run, scaled to the shared run's CPU less idle.
AP_PORT=8081
AP_N=(2000 40000 200000)  # loop iterations per request, per CE
AP_RATE=(60 30 10)        # requests per second, per CE
# Writes the server's configuration into $apd (an access log line per request:
# "unix-second client-address").
ap_conf() {
	cat >"$apd/h.lua" <<-'EOF'
		-- n (from the query string) iterations of a loop, then a short body
		function handle(r)
			local n = tonumber(r:parseargs()["n"]) or 1000
			local x = 0
			for i = 1, n do x = (x * 31 + i) % 1000003 end
			r.content_type = "text/plain"
			r:puts(string.format("%d\n", x))
			return apache2.OK
		end
	EOF
	cat >"$apd/apache2.conf" <<-EOF
		ServerRoot $apd
		ServerName rametr-eval
		PidFile $apd/apache2.pid
		ErrorLog $apd/error.log
		LogLevel warn
		User www-data
		Group www-data
		Listen $(addr be):$AP_PORT
		LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so
		LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
		LoadModule lua_module /usr/lib/apache2/modules/mod_lua.so
		StartServers 1
		ServerLimit 1
		ThreadsPerChild 8
		MinSpareThreads 1
		MaxSpareThreads 8
		MaxRequestWorkers 8
		KeepAlive On
		MaxKeepAliveRequests 0
		KeepAliveTimeout 30
		DocumentRoot $apd
		LogFormat "%{sec}t %a" tenant
		CustomLog $apd/access.log tenant
		LuaScope thread
		LuaMapHandler "^/c[0-9]/" $apd/h.lua handle
	EOF
	chmod 755 "$apd"; chmod 644 "$apd/h.lua" "$apd/apache2.conf"
}
# Starts a fresh apache2 ($ap, its parent process); empties its access log.
ap_up() {
	: >"$apd/access.log"; chown www-data "$apd/access.log"
	$NETNS exec be apache2 -f "$apd/apache2.conf" -DFOREGROUND >"$1" 2>&1 &
	ap=$!; tb_pids+=($ap)
	wait_port be $AP_PORT $ap "$apd/error.log" apache2
}
# The on-CPU ns of every thread of every process in rm-be (apache2's, etcd's: the only ones there)
be_cpu() {
	local p
	for p in $(ip netns pids rm-be 2>/dev/null); do cat /proc/"$p"/task/*/schedstat 2>/dev/null; done \
		| awk '{ s += $1 } END { printf "%.0f\n", s }'
}
# apache2's threads: "pid tid ns wchan" (the listener waits in epoll, the
# workers on a futex, the parent process in poll)
ap_threads() {
	local p t ns w
	for p in $(ip netns pids rm-be 2>/dev/null); do
		for t in /proc/"$p"/task/*; do
			w=""
			{ read -r ns _ <"$t/schedstat" && { read -r w <"$t/wchan" || [ -n "$w" ]; }; } 2>/dev/null || continue
			echo "$p ${t##*/} $ns ${w:-running}"
		done
	done
}
ap_load() { # CE-index seconds log
	local i=$1 n
	n=$((AP_RATE[i - 1] * $2))
	$NETNS exec c$i curl -sS --fail -o /dev/null --rate "${AP_RATE[i - 1]}/s" \
		"http://$(addr be):$AP_PORT/c$i/[1-$n]?n=${AP_N[i - 1]}" >"$3" 2>&1
}
# Requests per CE in the access log, in seconds [FROM, TO): "ce n"
ap_requests() {
	awk -v from="$1" -v to="$2" -v a1="$(addr c1)" -v a2="$(addr c2)" -v a3="$(addr c3)" \
		'$1 >= from && $1 < to { n[$2]++ } END { printf "c1 %d\nc2 %d\nc3 %d\n", n[a1], n[a2], n[a3] }' "$apd/access.log"
}
# The number of CE $2's requests in an ap_requests file $1
get_n() { awk -v c="$2" '$1 == c { print $2 }' "$1"; }
# The truth from separate runs of server $1 in $d (sep-idle-cpu.txt,
# sep-cN-cpu.txt "cpu_ns seconds ...", sep-cN-requests.txt, together-cpu.txt,
# requests.txt; with rounds, a round R after the first in sep-idle.R-* and
# sep-cN.R-*): each CE's CPU per request alone less its round's idle server,
# the median over the rounds, times its requests in the shared run, scaled to
# the shared run's CPU less idle (the median idle rate): "ce ns" lines in
# truth-separate.txt; the idle rate, that target, the additivity (1: the
# costs alone add up to the shared run), the rounds and each CE's costs per
# request over them (min, max) in separate-summary.txt.
separate_truth() {
	local i f r
	for i in 1 2 3; do
		for f in "$d/sep-c$i-cpu.txt" "$d/sep-c$i".[0-9]*-cpu.txt; do
			[ -e "$f" ] || continue
			r=${f#"$d/sep-c$i"}; r=${r%-cpu.txt}
			echo "c$i $(cut -d" " -f1,2 "$f") $(get_n "$d/sep-c$i$r-requests.txt" c$i) $(cut -d" " -f1,2 "$d/sep-idle$r-cpu.txt") r$r"
		done
	done | awk -v name="$1" -v tog="$(cat "$d/together-cpu.txt")" 'FNR == NR { n[$1] = $2; next }
		function med(a, k,   i, j, t) { for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
			return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
		BEGIN { split(tog, T, " ") }
		{ k[$1]++; ir = $5 / $6; c[$1, k[$1]] = ($2 - ir * $3) / $4; if (!($7 in seen)) { seen[$7] = 1; irs[++ni] = ir } }
		END { split("", a); for (i = 1; i <= ni; i++) a[i] = irs[i]; ir = med(a, ni); target = T[1] - ir * T[2]
			rounds = 0; spread = ""
			for (ce in k) { split("", a); lo = hi = c[ce, 1]
				for (i = 1; i <= k[ce]; i++) { a[i] = c[ce, i]; if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
				cost[ce] = med(a, k[ce]); raw[ce] = cost[ce] * n[ce]; s += raw[ce]; rounds = k[ce]
				spread = spread sprintf(" %s %.0f %.0f", ce, lo, hi) }
			if (s <= 0 || target <= 0) { print "eval: " name ": no CPU in the runs" > "/dev/stderr"; exit 1 }
			for (ce in raw) printf "%s %.0f\n", ce, raw[ce] * target / s
			printf "# idle_ns_per_s %.0f together_less_idle %.0f additivity %.4f rounds %d cost_ns_min_max%s\n", ir, target, s / target, rounds, spread > "/dev/stderr" }' \
			"$d/requests.txt" - 2>"$d/separate-summary.txt" | sort >"$d/truth-separate.txt"
}
# separate_phases PHASE [ARG...]: the separate runs' phases, $sep_rounds
# rounds of the idle server and each CE alone, as PHASE TAG CES [ARG...];
# the tags are those separate_truth reads (idle, cN; idle.R, cN.R after the
# first round).
separate_phases() {
	local r i
	for r in $(seq 1 "$sep_rounds"); do
		[ "$r" -eq 1 ] && r="" || r=.$r
		"$1" idle$r "" "${@:2}"
		for i in 1 2 3; do "$1" c$i$r $i "${@:2}"; done
	done
}
# Each CE alone is exact (all of the server's CPU less the idle server's is
# that CE's): "ce cpu-less-idle-ns rametr-ns v-ns" over each alone phase of
# $d into alone-rametr.txt (after be_rows dumped the windows).
alone_rametr() {
	local i cpu secs a b
	for i in 1 2 3; do
		read -r cpu secs a b <"$d/sep-c$i-cpu.txt"
		sum_windows "$d/win-be-Rametr.csv" "$a" "$b" | awk -v ce=c$i -v cpu="$cpu" -v secs="$secs" \
			-v idle="$(cat "$d/sep-idle-cpu.txt")" 'BEGIN { split(idle, I, " ") } { v[$1] = $2 }
			END { printf "%s %.0f %.0f %.0f\n", ce, cpu - I[1] / I[2] * secs, v[ce], v["__unaccountable__"] }'
	done >"$d/alone-rametr.txt"
}
# One phase on a fresh server: CEs in $2 ("" idle) for $sep_dur s: "cpu_ns seconds" and requests in DIR/sep-TAG-*.
ap_phase() {
	local tag=$1 ces=$2 i l=() a b c0 c1_
	ap_up "$d/apache2-$tag.log"
	for i in $ces; do ap_load $i $((sep_dur + 3)) "$d/sep-$tag-c$i.log" & l+=($!); tb_pids+=($!); done
	sleep 1.5; a=$(at_second 0); c0=$(be_cpu)
	sleep $((sep_dur - 1)); b=$(at_second 0); c1_=$(be_cpu)
	for i in "${l[@]}"; do wait "$i" || { cat "$d/sep-$tag"-*.log >&2; echo "eval: apache: curl failed" >&2; exit 1; }; tb_forget "$i"; done
	tb_stop $ap apache2 "$apd/error.log"
	echo "$((c1_ - c0)) $((b - a)) $a $b" >"$d/sep-$tag-cpu.txt"
	ap_requests "$a" "$b" >"$d/sep-$tag-requests.txt"
}
if want apache; then
	d=$out/runs/apache; mkdir -p "$d"
	echo "== apache2 (mpm_event, mod_lua) in rm-be, curl from rm-c1..3 (${svc_dur}s together; idle and each CE ${sep_dur}s alone)"
	tb_service_dir www-data apd
	ap_conf
	mkcfg "$d/rametr.ini" $AP_PORT be
	tb_take_hosts
	tb_rametr_start "$d" "$d/rametr.ini" be
	# together
	ap_up "$d/apache2.log"
	loads=()
	for i in 1 2 3; do ap_load $i $((svc_dur + 4)) "$d/load-c$i.log" & loads+=($!); tb_pids+=($!); done
	sleep 2; t_a=$(at_second 0); ap_threads >"$d/cpu-a.txt"
	sleep $((svc_dur - 1)); t_b=$(at_second 0); ap_threads >"$d/cpu-b.txt"
	ok=1
	for i in "${loads[@]}"; do wait "$i" || ok=0; tb_forget "$i"; done
	tb_stop $ap apache2 "$apd/error.log"
	[ $ok -eq 1 ] || { cat "$d"/load-*.log >&2; echo "eval: apache: a client reported errors" >&2; exit 1; }
	# "listener", "workers", "parent" (the process that forked the child) CPU over the run
	awk -v parent=$ap 'FNR == NR { a[$2] = $3; wa[$2] = $4; next } ($2 in a) { dd = $3 - a[$2]; s += dd
		if ($1 == parent) k = "parent"; else if ($4 ~ /epoll/ || wa[$2] ~ /epoll/) k = "listener"; else k = "workers"
		v[k] += dd }
		END { for (k in v) print k, v[k]; print "all", s + 0 }' "$d/cpu-a.txt" "$d/cpu-b.txt" | sort >"$d/threads-together.txt"
	echo "$(awk '$1 == "all" { print $2 }' "$d/threads-together.txt") $((t_b - t_a))" >"$d/together-cpu.txt"
	ap_requests "$t_a" "$t_b" >"$d/requests.txt"
	# separate runs, each on a fresh server
	separate_phases ap_phase
	cp "$apd/error.log" "$d/apache2-error.log"
	tb_rametr_stop
	tb_release_hosts
	separate_truth apache
	be_rows apache separate "$d/truth-separate.txt"
	alone_rametr
fi

# ---------------------------------------------------------------- MariaDB
# Debian's MariaDB in rm-be: a thread per connection (from a thread cache)
# beside InnoDB's and the server's background threads (purge, page cleaner,
# io pool, timers). Each CE is its own user with its own query mix over one
# connection held for the whole run, so the connection's thread serves that CE
# alone: **exact truth** is that thread's CPU (/proc/PID/task/TID/schedstat;
# performance_schema.threads names each connection's user and TID). The other
# threads' CPU works for no request (V).
MY_PORT=3306
MY_RATE=(200 20 40)   # statements per second, per CE
MY_ROWS=20000
# my_gen CE-index SECONDS: the CE's statements, paced, on stdout. c1 point
# selects by primary key, c2 range aggregates over 4,000 rows, c3 writes (an
# UPDATE of a row and an INSERT into a log table, in turn; autocommit).
my_gen() {
	perl -e '
		my ($ce, $rate, $secs, $rows) = @ARGV; $| = 1;
		my $n = int($rate * $secs);
		for my $i (0 .. $n - 1) {
			my $k = 1 + ($i * 7919) % $rows;
			if ($ce == 1) { print "SELECT v FROM t WHERE id = $k;\n" }
			elsif ($ce == 2) { my $e = $k + 4000; print "SELECT COUNT(*), SUM(LENGTH(v)), MAX(n) FROM t WHERE id BETWEEN $k AND $e;\n" }
			elsif ($i % 2) { print "INSERT INTO wlog (k, v) VALUES ($k, REPEAT(\x27w\x27, 200));\n" }
			else { print "UPDATE t SET n = n + 1 WHERE id = $k;\n" }
			select(undef, undef, undef, 1 / $rate);
		}
		print STDERR "statements=$n\n";' "$1" "${MY_RATE[$1 - 1]}" "$2" $MY_ROWS
}
my_load() { # CE-index seconds output
	my_gen "$1" "$2" 2>"$3" | $NETNS exec c$1 mariadb --no-defaults -h "$(addr be)" -P $MY_PORT -u c$1 -N -B eval \
		>/dev/null 2>>"$3"
}
my_root() { mariadb --no-defaults -S "$myd/sock" -u root -N -B "$@"; }
# mariadbd's on-CPU ns per thread: "tid ns"
my_threads() {
	local t ns
	for t in /proc/"$1"/task/*; do
		{ read -r ns _ <"$t/schedstat"; } 2>/dev/null && echo "${t##*/} $ns"
	done
}
if want mariadb; then
	d=$out/runs/mariadb; mkdir -p "$d"
	echo "== MariaDB in rm-be, users c1..c3 from rm-c1..3, a connection each (${svc_dur}s)"
	mkcfg "$d/rametr.ini" $MY_PORT be
	# mariadbd runs as user mysql, which may not enter $out: its files live in $myd
	tb_service_dir mysql myd
	mariadb-install-db --no-defaults --user=mysql --datadir="$myd/data" --auth-root-authentication-method=normal \
		--skip-test-db >"$d/install-db.log" 2>&1 || { cat "$d/install-db.log" >&2; exit 1; }
	tb_take_hosts
	tb_rametr_start "$d" "$d/rametr.ini" be
	# $my is mariadbd itself (netns.sh and ip netns exec exec it); SIGTERM is its clean shutdown
	$NETNS exec be mariadbd --no-defaults --user=mysql --datadir="$myd/data" --socket="$myd/sock" \
		--pid-file="$myd/mariadbd.pid" --log-error="$myd/error.log" --port=$MY_PORT --bind-address="$(addr be)" \
		--skip-name-resolve --skip-log-bin --performance-schema=ON --innodb-buffer-pool-size=64M \
		--innodb-flush-log-at-trx-commit=2 >"$d/mariadbd.log" 2>&1 &
	my=$!; tb_pids+=($my)
	tb_wait_log "$myd/error.log" "ready for connections" $my
	my_root -e "CREATE DATABASE eval" >/dev/null
	my_root eval -e "CREATE TABLE t (id INT PRIMARY KEY, n INT NOT NULL, v VARCHAR(100) NOT NULL) ENGINE=InnoDB;
		CREATE TABLE wlog (id INT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, v VARCHAR(200) NOT NULL) ENGINE=InnoDB;
		INSERT INTO t SELECT seq, seq % 97, REPEAT(CHAR(97 + seq % 26), 100) FROM seq_1_to_$MY_ROWS;
		CREATE USER c1@'%'; GRANT ALL ON eval.* TO c1@'%';
		CREATE USER c2@'%'; GRANT ALL ON eval.* TO c2@'%';
		CREATE USER c3@'%'; GRANT ALL ON eval.* TO c3@'%';" >/dev/null
	loads=()
	for i in 1 2 3; do my_load $i $((svc_dur + 4)) "$d/load-c$i.txt" & loads+=($!); tb_pids+=($!); done
	sleep 1.5
	# each CE's connection thread (one connection each, held to the end)
	my_root -e "SELECT PROCESSLIST_USER, THREAD_OS_ID FROM performance_schema.threads
		WHERE PROCESSLIST_USER IN ('c1', 'c2', 'c3') ORDER BY 1" >"$d/conn-threads.txt"
	t_a=$(at_second 0); my_threads $my >"$d/cpu-a.txt"
	sleep $((svc_dur - 1)); t_b=$(at_second 0); my_threads $my >"$d/cpu-b.txt"
	ok=1
	for i in "${loads[@]}"; do wait "$i" || ok=0; tb_forget "$i"; done
	my_root -e "SELECT PROCESSLIST_USER, THREAD_OS_ID FROM performance_schema.threads
		WHERE PROCESSLIST_USER IN ('c1', 'c2', 'c3') ORDER BY 1" >"$d/conn-threads-end.txt" || :
	tb_stop $my mariadbd "$myd/error.log"
	cp "$myd/error.log" "$d/mariadb-error.log"
	tb_rametr_stop
	tb_release_hosts
	[ $ok -eq 1 ] || { cat "$d"/load-*.txt >&2; echo "eval: mariadb: a client reported errors" >&2; exit 1; }
	[ "$(awk '{ print $1 }' "$d/conn-threads.txt" | tr '\n' ' ')" = "c1 c2 c3 " ] \
		|| { cat "$d/conn-threads.txt" >&2; echo "eval: mariadb: not one connection per CE" >&2; exit 1; }
	# "c1".."c3" (each CE's connection thread), "other" (all the other threads)
	awk 'FNR == NR { ce[$2] = $1; next } FILENAME == ARGV[2] { a[$1] = $2; next }
		($1 in a) { dd = $2 - a[$1]; if ($1 in ce) print ce[$1], dd; else o += dd } END { print "other", o + 0 }' \
		"$d/conn-threads.txt" "$d/cpu-a.txt" "$d/cpu-b.txt" | sort >"$d/threads-together.txt"
	grep '^c' "$d/threads-together.txt" >"$d/truth-threads.txt"
	for i in 1 2 3; do echo "c$i $(sed -n 's/^statements=//p' "$d/load-c$i.txt")"; done >"$d/requests.txt"
	be_rows mariadb threads "$d/truth-threads.txt"
fi

# ---------------------------------------------------------------- etcd
# Debian's etcd (a Go program) in rm-be, each CE over one keep-alive curl
# connection to etcd's JSON gateway: etcd re-sends every HTTP request as a
# gRPC call over one loopback connection to itself that all CEs share, and
# goroutines move between its threads. Reads are linearizable (a raft read
# index each, as clients ask by default), the puts go through raft and the
# write-ahead log. No thread or connection is any CE's, so the truth comes
# from separate runs, as for apache2: the server idle, then each CE alone,
# each on a fresh etcd with Rametr watching. Every phase sends a fixed number
# of requests and is measured from a whole second before its first to a
# whole second after its last, so a phase's requests are exactly its CE's.
ET_PORT=2379
ET_RATE=(150 20 40)   # requests per second, per CE
ET_KIND=(point scan put)
# Starts a fresh etcd ($et) with an empty data directory and the scan CE's
# 100 keys of 768 bytes under "r/"; a key "k1" for the point reads.
et_up() {
	rm -rf "$etd/data"
	$NETNS exec be etcd --name rametr-eval --data-dir "$etd/data" \
		--listen-client-urls "http://$(addr be):$ET_PORT" --advertise-client-urls "http://$(addr be):$ET_PORT" \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster rametr-eval=http://127.0.0.1:2380 >"$1" 2>&1 &
	et=$!; tb_pids+=($et)
	wait_port be $ET_PORT $et "$1" etcd
	local j v
	v=$(head -c 768 /dev/zero | tr '\0' x | base64 -w0)
	for j in $(seq -w 1 100); do
		printf '{"key":"%s","value":"%s"}\n' "$(printf 'r/%s' "$j" | base64 -w0)" "$v"
	done >"$etd/scan-keys.json"
	while read -r j; do
		$NETNS exec be curl -sS --fail -o /dev/null -X POST "http://$(addr be):$ET_PORT/v3/kv/put" -d "$j" \
			|| { cat "$1" >&2; echo "eval: etcd: loading the keys failed" >&2; exit 1; }
	done <"$etd/scan-keys.json"
	$NETNS exec be curl -sS --fail -o /dev/null -X POST "http://$(addr be):$ET_PORT/v3/kv/put" \
		-d "{\"key\":\"$(printf k1 | base64 -w0)\",\"value\":\"$(printf v1 | base64 -w0)\"}"
}
# One CE's load: over one keep-alive curl connection to the JSON gateway
# (ET_API gateway) or one gRPC connection to etcd's own API (grpc,
# tb-etcdload: a call per stream, overlapping when the server is slow).
et_load() { # CE-index requests log
	local i=$1 url body
	if [ "$ET_API" = grpc ]; then
		case ${ET_KIND[i - 1]} in
		point) set -- "$@" --kind point --key k1 --expect 1 ;;
		scan) set -- "$@" --kind scan --key r/ --end r0 --expect 100 ;;
		put) set -- "$@" --kind put --key w/c$i --value-bytes 100 ;;
		esac
		$NETNS exec c$i "$B/testbed/go/tb-etcdload" --server "$(addr be):$ET_PORT" --ce c$i \
			--rate "${ET_RATE[i - 1]}" --count "$2" "${@:4}" >"$3" 2>&1
		return
	fi
	url="http://$(addr be):$ET_PORT/v3/kv"
	case ${ET_KIND[i - 1]} in
	point) url=$url/range body="{\"key\":\"$(printf k1 | base64 -w0)\"}" ;;
	scan) url=$url/range body="{\"key\":\"$(printf r/ | base64 -w0)\",\"range_end\":\"$(printf r0 | base64 -w0)\"}" ;;
	put) url=$url/put body="{\"key\":\"$(printf w/c$i | base64 -w0)\",\"value\":\"$(head -c 100 /dev/zero | tr '\0' y | base64 -w0)\"}" ;;
	esac
	$NETNS exec c$i curl -sS --fail -o /dev/null --rate "${ET_RATE[i - 1]}/s" -X POST -d "$body" \
		"$url#[1-$2]" >"$3" 2>&1
}
# One phase on a fresh etcd: CEs in $2 ("" idle), each sending what it sends in
# $3 s; writes "cpu_ns seconds from to" to DIR/sep-TAG-cpu.txt and the requests
# per CE to DIR/sep-TAG-requests.txt. Sets t_a, t_b.
et_phase() {
	local tag=$1 ces=$2 secs=$3 i l=() c0 c1_ ok=1
	et_up "$d/etcd-$tag.log"
	t_a=$(at_second 0); c0=$(be_cpu)
	for i in $ces; do et_load $i $((ET_RATE[i - 1] * secs)) "$d/load-$tag-c$i.log" & l+=($!); tb_pids+=($!); done
	[ -n "$ces" ] || sleep "$secs"
	for i in "${l[@]}"; do wait "$i" || ok=0; tb_forget "$i"; done
	t_b=$(at_second 0); c1_=$(be_cpu)
	# etcd ends by raising the signal again once it has shut down (exit 143)
	kill -TERM $et 2>/dev/null || :; wait $et 2>/dev/null || :; tb_forget $et
	[ $ok -eq 1 ] || { cat "$d"/load-"$tag"-*.log >&2; echo "eval: $et_name: a CE's load failed" >&2; exit 1; }
	echo "$((c1_ - c0)) $((t_b - t_a)) $t_a $t_b" >"$d/sep-$tag-cpu.txt"
	for i in 1 2 3; do
		case " $ces " in *" $i "*) echo "c$i $((ET_RATE[i - 1] * secs))" ;; *) echo "c$i 0" ;; esac
	done >"$d/sep-$tag-requests.txt"
}
# etcd is not among scripts/setup.sh's packages: on a host with systemd,
# Debian's etcd-server starts a service of its own when installed. Named
# with --only, a missing etcd is an error; on the full profile, a skip.
# etcd_run NAME API: the whole measurement of one API (gateway, grpc) as
# server NAME in the results.
etcd_run() {
	et_name=$1 ET_API=$2
	d=$out/runs/$et_name; mkdir -p "$d"
	if [ "$ET_API" = grpc ]; then
		[ -x "$B/testbed/go/tb-etcdload" ] || { echo "eval: $et_name: tb-etcdload is not built (Debian's golang and golang-google-grpc-dev)" >&2; exit 1; }
		echo "== etcd $(etcd --version | sed -n 's/^etcd Version: //p') in rm-be over its gRPC API, tb-etcdload from rm-c1..3 (${svc_dur}s together; idle and each CE ${sep_dur}s alone)"
	else
		echo "== etcd $(etcd --version | sed -n 's/^etcd Version: //p') in rm-be through its JSON gateway, curl from rm-c1..3 (${svc_dur}s together; idle and each CE ${sep_dur}s alone)"
	fi
	etd=$(mktemp -d /tmp/rametr-svc.XXXXXX); tb_tmpdirs+=("$etd")
	mkcfg "$d/rametr.ini" $ET_PORT be
	tb_take_hosts
	tb_rametr_start "$d" "$d/rametr.ini" be
	et_phase together "1 2 3" "$svc_dur"
	cp "$d/sep-together-cpu.txt" "$d/together-cpu.txt"; cp "$d/sep-together-requests.txt" "$d/requests.txt"
	s_a=$t_a s_b=$t_b
	separate_phases et_phase "$sep_dur"
	tb_rametr_stop
	tb_release_hosts
	t_a=$s_a t_b=$s_b
	separate_truth "$et_name"
	be_rows "$et_name" separate "$d/truth-separate.txt"
	alone_rametr
}
# etcd is not among scripts/setup.sh's packages: on a host with systemd,
# Debian's etcd-server starts a service of its own when installed. Named
# with --only, a missing etcd is an error; on the full profile, a skip.
for et_api in gateway grpc; do
	et_name=etcd; [ $et_api = grpc ] && et_name=etcd-grpc
	want $et_name || continue
	if ! command -v etcd >/dev/null; then
		[ -z "$only_given" ] || { echo "eval: '$et_name' needs etcd (apt-get install etcd-server)" >&2; exit 1; }
		echo "== $et_name: etcd is not installed, skipped (apt-get install etcd-server; its own service need not run)"
		continue
	fi
	etcd_run $et_name $et_api
done

# ---------------------------------------------------------------- report
echo "== report in $report"
bash "$top/scripts/eval-report.sh" --profile "$profile" --out "$out" --report "$report" --techs "$techs" \
	--tol "$tol" --durations "$dur $ph1 $ph2 $ph3 $svc_dur $sep_dur"
