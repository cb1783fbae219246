#!/bin/sh
# packaging/units_test.sh - the systemd units pass `systemd-analyze verify`
# with no message at all (it exits 0 on unknown keys, so its output counts),
# with ExecStart pointed at the programs just built. Exit 77 (skipped)
# without systemd-analyze. Usage: units_test.sh UNIT_DIR AGGREGATOR COLLECTOR
set -eu
units=$1 agg=$2 col=$3
command -v systemd-analyze >/dev/null 2>&1 || { echo "SKIP: no systemd-analyze"; exit 77; }
tmp=$(mktemp -d /tmp/rametr-units-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
n=0
for u in "$units"/*.service; do
	sed -e "s#/usr/sbin/rametr-aggregator#$agg#g" -e "s#/usr/sbin/rametr-collector#$col#g" "$u" \
		>"$tmp/$(basename "$u")"
	n=$((n + 1))
done
[ "$n" -ge 2 ] || { echo "FAIL: expected the two units in '$units', found $n"; exit 1; }
if ! out=$(cd "$tmp" && systemd-analyze verify ./*.service 2>&1) || [ -n "$out" ]; then
	printf 'FAIL: systemd-analyze verify:\n%s\n' "$out"
	exit 1
fi
# the aggregator is Type=notify with a watchdog; the collector's capabilities are exactly these
grep -qx 'Type=notify' "$tmp/rametr-aggregator.service" || { echo "FAIL: aggregator not Type=notify"; exit 1; }
grep -q '^WatchdogSec=' "$tmp/rametr-aggregator.service" || { echo "FAIL: aggregator has no WatchdogSec"; exit 1; }
grep -qx 'CapabilityBoundingSet=CAP_BPF CAP_PERFMON' "$tmp/rametr-collector.service" ||
	{ echo "FAIL: collector capabilities"; exit 1; }
echo "ok: $n units verified"
