#!/usr/bin/env bash
# scripts/netns.sh - the testbed's "hosts": one network namespace per host,
# joined by veth pairs to a bridge in the root namespace, on a private test
# subnet used nowhere else. Nothing outside these names is touched, and the
# namespaces have no default route: traffic stays between them.
#
#   host  namespace  address          root-side veth
#   fe    rm-fe      10.213.0.11/24   rmv-fe      (front-end)
#   be    rm-be      10.213.0.12/24   rmv-be      (back-end)
#   c1    rm-c1      10.213.0.21/24   rmv-c1      (CE c1)
#   c2    rm-c2      10.213.0.22/24   rmv-c2      (CE c2)
#   c3    rm-c3      10.213.0.23/24   rmv-c3      (CE c3)
#   bridge rm-br0 in the root namespace: 10.213.0.1/24
#
# The names are fixed, so two users of the hosts at once would tear each
# other down: a user (scripts/twotier.sh, tests/integ_twotier_test) holds an
# exclusive flock(1) on /run/rametr-testbed.lock for its whole run
# ('netns.sh session-lock' prints the path). up and down themselves are
# serialised by /run/rametr-netns.lock.
#
# Usage: scripts/netns.sh up          create what is missing (idempotent)
#        scripts/netns.sh down        stop every process left in the hosts and
#                                     remove all of the above, also half-created
#                                     state; exit 1 if something remains
#        scripts/netns.sh status      list the hosts; exit 0 only if all are up
#        scripts/netns.sh exec HOST CMD [ARG...]   run CMD inside HOST
#        scripts/netns.sh addr HOST   print HOST's address (fe, be, c1.., br)
#        scripts/netns.sh hosts       print the host names
#        scripts/netns.sh session-lock  print the path users of the hosts lock
set -euo pipefail

HOSTS=(fe be c1 c2 c3)
declare -A ADDR=([fe]=10.213.0.11 [be]=10.213.0.12 [c1]=10.213.0.21 [c2]=10.213.0.22
		 [c3]=10.213.0.23 [br]=10.213.0.1)
PREFIX=24
BRIDGE=rm-br0
LOCK=/run/rametr-netns.lock
SESSION_LOCK=/run/rametr-testbed.lock

die() { echo "netns: error: $*" >&2; exit 1; }
ns_of() { echo "rm-$1"; }
veth_of() { echo "rmv-$1"; }
ns_exists() { [ -e "/run/netns/$(ns_of "$1")" ]; }
link_exists() { ip link show dev "$1" >/dev/null 2>&1; }
known_host() { local h; for h in "${HOSTS[@]}"; do [ "$h" = "$1" ] && return 0; done; return 1; }

# Serialises up/down of concurrent callers (a test and the experiment).
lock() {
	exec 9>"$LOCK"
	flock -w 60 9 || die "another netns.sh holds '$LOCK'"
}

up_bridge() {
	link_exists "$BRIDGE" || ip link add "$BRIDGE" type bridge
	sysctl -qw "net.ipv6.conf.$BRIDGE.disable_ipv6=1" 2>/dev/null || true
	ip addr replace "${ADDR[br]}/$PREFIX" dev "$BRIDGE"
	ip link set "$BRIDGE" up
}

up_host() {
	local h=$1 ns veth
	ns=$(ns_of "$h") veth=$(veth_of "$h")
	ns_exists "$h" || ip netns add "$ns"
	ip -n "$ns" link set lo up
	# Left over from a broken run: our veth whose peer is not this host's eth0.
	if link_exists "$veth" && ! ip -n "$ns" link show dev eth0 >/dev/null 2>&1; then
		ip link del "$veth"
	fi
	if ! link_exists "$veth"; then
		ip -n "$ns" link del eth0 2>/dev/null || true
		ip link add "$veth" type veth peer name eth0 netns "$ns"
	fi
	sysctl -qw "net.ipv6.conf.$veth.disable_ipv6=1" 2>/dev/null || true
	ip link set "$veth" master "$BRIDGE"
	ip link set "$veth" up
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null || true
	ip -n "$ns" addr replace "${ADDR[$h]}/$PREFIX" dev eth0
	ip -n "$ns" link set eth0 up
}

# A failing step (set -e) or die removes everything again, also a namespace
# that 'ip netns add' created before it failed: up leaves all hosts or none.
cmd_up() {
	local h
	lock
	trap 'rc=$?; if [ $rc -ne 0 ]; then echo "netns: up failed, removing the hosts" >&2; down_locked || true; fi' EXIT
	up_bridge
	# not in an || list, where bash would ignore set -e inside up_host
	for h in "${HOSTS[@]}"; do up_host "$h"; done
	cmd_status >/dev/null || die "hosts are not all up after 'up'"
	trap - EXIT
}

# Stops the processes still running inside host h's namespace (TERM, then KILL).
stop_procs() {
	local ns i p pids
	ns=$(ns_of "$1")
	pids=$(ip netns pids "$ns" 2>/dev/null || true)
	[ -z "$pids" ] && return 0
	echo "netns: stopping processes left in $ns: $(echo $pids)" >&2
	for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
	for i in $(seq 1 40); do
		pids=$(ip netns pids "$ns" 2>/dev/null || true)
		[ -z "$pids" ] && return 0
		sleep 0.05
	done
	for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
	sleep 0.1
}

cmd_down() {
	lock
	down_locked
}

down_locked() {
	local h i left
	for h in "${HOSTS[@]}"; do
		if ns_exists "$h"; then
			stop_procs "$h"
			ip netns del "$(ns_of "$h")" 2>/dev/null || true
		fi
	done
	# The kernel destroys a namespace (and its veth ends) asynchronously.
	for h in "${HOSTS[@]}"; do
		for i in $(seq 1 50); do
			link_exists "$(veth_of "$h")" || break
			[ "$i" -eq 20 ] && ip link del "$(veth_of "$h")" 2>/dev/null || true
			sleep 0.05
		done
	done
	link_exists "$BRIDGE" && ip link del "$BRIDGE" 2>/dev/null || true
	left=$(leftovers)
	[ -z "$left" ] || die "could not remove: $left"
}

# Names of this script's objects that still exist.
leftovers() {
	local h out=()
	for h in "${HOSTS[@]}"; do
		ns_exists "$h" && out+=("netns $(ns_of "$h")")
		link_exists "$(veth_of "$h")" && out+=("link $(veth_of "$h")")
	done
	link_exists "$BRIDGE" && out+=("link $BRIDGE")
	echo "${out[*]:-}"
}

cmd_status() {
	local h ok=0 state
	if ! link_exists "$BRIDGE"; then
		echo "bridge $BRIDGE missing"; ok=1
	elif ! ip -4 addr show dev "$BRIDGE" | grep -q "inet ${ADDR[br]}/"; then
		echo "bridge $BRIDGE no address"; ok=1
	else
		echo "bridge $BRIDGE ${ADDR[br]} up"
	fi
	for h in "${HOSTS[@]}"; do
		state=up
		if ! ns_exists "$h"; then
			state="no namespace"
		elif ! link_exists "$(veth_of "$h")"; then
			state="no veth"
		elif ! ip -n "$(ns_of "$h")" -4 addr show dev eth0 2>/dev/null | grep -q "inet ${ADDR[$h]}/"; then
			state="no address"
		fi
		[ "$state" = up ] || ok=1
		echo "host $h $(ns_of "$h") ${ADDR[$h]} $state"
	done
	return $ok
}

[ $# -ge 1 ] || { sed -n '2,31p' "$0" >&2; exit 2; }
case "$1" in
up|down)
	[ "$(id -u)" -eq 0 ] || die "run as root (network namespaces need it)"
	"cmd_$1" ;;
status) cmd_status ;;
exec)
	[ $# -ge 3 ] || die "usage: netns.sh exec HOST CMD [ARG...]"
	known_host "$2" || die "unknown host '$2' (one of: ${HOSTS[*]})"
	ns_exists "$2" || die "host '$2' is not up (run 'netns.sh up')"
	h=$2; shift 2
	exec ip netns exec "$(ns_of "$h")" "$@" ;;
addr)
	[ $# -eq 2 ] && [ -n "${ADDR[$2]:-}" ] || die "usage: netns.sh addr HOST (one of: ${HOSTS[*]} br)"
	echo "${ADDR[$2]}" ;;
hosts) echo "${HOSTS[*]}" ;;
session-lock) echo "$SESSION_LOCK" ;;
-h|--help) sed -n '2,31p' "$0" ;;
*) echo "netns: unknown command '$1'" >&2; sed -n '2,31p' "$0" >&2; exit 2 ;;
esac
