#!/usr/bin/env bash
# scripts/package-test.sh - the packages in a fresh Debian root: installs
# them with apt (dependencies from the Debian mirror), starts
# rametr-aggregator and rametr-collector from the installed configuration
# files (no systemd in a chroot: the daemons are started as the units would,
# the aggregator as user rametr, the collector as root with only CAP_BPF and
# CAP_PERFMON), checks that the collector's segments reach the database, then
# purges the packages and checks that nothing of them is left.
# Runs in a network namespace of its own (the packaged 127.0.0.1:7600 does
# not collide with anything). Needs root.
# Usage: scripts/package-test.sh ROOT DEB...
#   ROOT  a Debian 12 root, e.g. made by
#         debootstrap --variant=minbase bookworm ROOT http://deb.debian.org/debian
set -euo pipefail

die() { echo "package-test: error: $*" >&2; exit 1; }
say() { echo "package-test: $*"; }

[ $# -ge 2 ] || die "usage: $0 ROOT DEB..."
[ "$(id -u)" -eq 0 ] || die "run as root"
root=$(cd "$1" && pwd); shift
[ -x "$root/usr/bin/apt-get" ] || die "'$root' is not a Debian root (no apt-get)"

mounted=()
cleanup() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
	rm -rf "$root/tmp/rametr-debs"
}
trap cleanup EXIT
for m in proc sys dev; do
	mount --rbind "/$m" "$root/$m"
	mount --make-rslave "$root/$m"
	mounted+=("$root/$m")
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/tmp/rametr-debs"
debs=()
for d in "$@"; do
	cp "$d" "$root/tmp/rametr-debs/"
	debs+=("/tmp/rametr-debs/$(basename "$d")")
done

in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }

say "installing ${debs[*]}"
in_root apt-get update -qq
in_root apt-get install -y -qq --no-install-recommends "${debs[@]}" >/dev/null
in_root dpkg -l 'rametr-*' | grep '^ii'
in_root getent passwd rametr
in_root ls -ld /var/lib/rametr /var/lib/rametr-collector /etc/rametr /etc/rametr/aggregator.conf.d
in_root rametr-aggregator --version
in_root rametr-aggregator --check-config
in_root rametr-collector --check-config
in_root rametr-cert init /tmp/rametr-pki >/dev/null
in_root rametr-cert issue /tmp/rametr-pki n1 >/dev/null
in_root openssl verify -CAfile /tmp/rametr-pki/ca.pem /tmp/rametr-pki/n1.pem
in_root rm -rf /tmp/rametr-pki

say "starting both daemons from /etc/rametr in a network namespace of their own"
unshare --net --fork bash -euo pipefail -c '
	root=$1
	ip link set lo up
	in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
	# exec: $! is the aggregator itself
	exec_root() { exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
	(exec_root setpriv --reuid=rametr --regid=rametr --init-groups --bounding-set=-all --no-new-privs \
		rametr-aggregator >"$root/tmp/agg.log" 2>&1) &
	agg=$!
	trap "kill -KILL $agg 2>/dev/null || true" EXIT
	for i in $(seq 1 100); do grep -q "listening on" "$root/tmp/agg.log" && break; sleep 0.1; done
	# requests over loopback for the collector to see (any process on the
	# host counts; this one is sure to run while it attaches)
	if command -v python3 >/dev/null; then
		python3 -c "
import socket, threading, time
s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen()
def serve():
    c, _ = s.accept()
    while c.recv(64): c.send(b\"pong\")
threading.Thread(target=serve, daemon=True).start()
k = socket.create_connection(s.getsockname()); t = time.time()
while time.time() - t < 5: k.send(b\"ping\"); k.recv(64); time.sleep(0.002)
" &
	fi
	in_root setpriv --bounding-set=-all,+bpf,+perfmon --no-new-privs \
		rametr-collector --duration 4s >"$root/tmp/col.log" 2>&1
	echo "collector exit status $?"
	wait $(jobs -p | grep -v "^$agg\$") 2>/dev/null || true
	kill -TERM $agg
	rc=0
	wait $agg || rc=$?
	echo "aggregator exit status $rc"
	[ $rc -eq 0 ]
' _ "$root"
sed 's/^/  aggregator: /' "$root/tmp/agg.log"
sed 's/^/  collector: /' "$root/tmp/col.log"
grep -q "ebpf backend attached" "$root/tmp/col.log" || die "the collector did not attach"
grep -q "sent [1-9][0-9]* parts" "$root/tmp/col.log" || die "the collector sent no parts"
grep -q "connected (host" "$root/tmp/agg.log" || die "the collector did not reach the aggregator"
in_root ls -l /var/lib/rametr
in_root rametrctl usage --db /var/lib/rametr/rametr.db | head -8
in_root rametrctl check --db /var/lib/rametr/rametr.db
rm -f "$root/tmp/agg.log" "$root/tmp/col.log"

say "purging"
in_root apt-get purge -y -qq rametr-aggregator rametr-collector rametr-collector-xen rametr-ctl >/dev/null 2>&1 ||
	in_root apt-get purge -y -qq rametr-aggregator rametr-collector rametr-ctl >/dev/null
left=$(in_root dpkg -l 'rametr-*' 2>/dev/null | grep -E '^(ii|rc)' || true)
[ -z "$left" ] || die "packages left after purge: $left"
for p in /etc/rametr /var/lib/rametr /var/lib/rametr-collector /usr/sbin/rametr-aggregator \
	/usr/sbin/rametr-collector /usr/sbin/rametr-cert /usr/bin/rametrctl /usr/lib/systemd/system/rametr-aggregator.service; do
	[ ! -e "$root$p" ] || die "'$p' left after purge"
done
! in_root getent passwd rametr >/dev/null || die "user rametr left after purge"
say "installed, started and purged cleanly"
