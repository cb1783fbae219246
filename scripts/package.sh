#!/usr/bin/env bash
# scripts/package.sh - builds the Debian packages of Rametr with dpkg-deb:
#   rametr-aggregator    the aggregator, its unit, /etc/rametr/aggregator.conf
#   rametr-collector     the collector (no Xen library), its unit and config
#   rametr-collector-xen rametr-collector-xen, the collector with the live Xen backend
#   rametr-ctl           rametrctl
# Usage: scripts/package.sh [--build DIR] [--out DIR]
#   --build DIR  build tree to configure and use (default: build-pkg)
#   --out DIR    where the .deb files go (default: dist)
# Prints the paths of the packages it wrote. The version is the CMake
# project version, followed by +git.<commit> when built from a git checkout.
set -euo pipefail

die() { echo "package: error: $*" >&2; exit 1; }

src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build-pkg
out=$src/dist
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done
for t in cmake dpkg-deb dpkg-shlibdeps; do
	command -v "$t" >/dev/null || die "'$t' not found (apt-get install cmake dpkg-dev)"
done

ver=$(sed -n 's/^project(rametr VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ -n "$ver" ] || die "no project version in '$src/CMakeLists.txt'"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	ver="$ver+git.$(git -C "$src" describe --always --dirty | tr -c 'A-Za-z0-9.+~\n' '.')"
fi
arch=$(dpkg --print-architecture)

cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr >/dev/null \
	|| die "cmake configure failed"
cmake --build "$build" -j"$(nproc)" --target rametr-aggregator rametr-collector rametrctl >/dev/null \
	|| die "build failed"
xen=0
if cmake --build "$build" --target rametr-collector-xen >/dev/null 2>&1; then
	xen=1
else
	echo "package: no rametr-collector-xen in this build (needs libxen-dev): skipping rametr-collector-xen" >&2
fi

stage=$(mktemp -d /tmp/rametr-pkg-XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out" "$stage/shlibs/debian"
printf 'Source: rametr\n\nPackage: rametr\nArchitecture: any\n' >"$stage/shlibs/debian/control"

# shlibdeps BINARY...: the Depends of the shared libraries they link
shlibdeps() {
	(cd "$stage/shlibs" && dpkg-shlibdeps -O "$@" 2>/dev/null) | sed -n 's/^shlibs:Depends=//p'
}

# pkg NAME COMPONENT EXTRA_DEPENDS SUMMARY DESCRIPTION
pkg() {
	local name=$1 comp=$2 extra=$3 summary=$4 desc=$5 root=$stage/$1 deps f
	mkdir -p "$root/DEBIAN"
	DESTDIR=$root cmake --install "$build" --component "$comp" --strip >/dev/null \
		|| die "install of component '$comp' failed"
	deps=$(shlibdeps $(find "$root/usr" -type f -perm -u+x))
	[ -n "$extra" ] && deps="$deps, $extra"
	{
		echo "Package: $name"
		echo "Version: $ver"
		echo "Architecture: $arch"
		echo "Maintainer: Rametr developers <rametr@localhost>"
		echo "Section: admin"
		echo "Priority: optional"
		echo "Depends: $deps"
		echo "Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)"
		echo "Description: $summary"
		echo "$desc" | fold -s -w 72 | sed 's/^/ /; s/ *$//'
	} >"$root/DEBIAN/control"
	if [ -d "$root/etc" ]; then
		(cd "$root" && find etc -type f | sed 's|^|/|') >"$root/DEBIAN/conffiles"
	fi
	for f in postinst prerm postrm; do
		if [ -f "$src/packaging/debian/$name.$f" ]; then
			install -m 0755 "$src/packaging/debian/$name.$f" "$root/DEBIAN/$f"
		fi
	done
	dpkg-deb --root-owner-group -Zxz --build "$root" "$out/${name}_${ver}_${arch}.deb" >/dev/null \
		|| die "dpkg-deb failed for '$name'"
	echo "$out/${name}_${ver}_${arch}.deb"
}

pkg rametr-aggregator aggregator "passwd, openssl" "Rametr aggregator: cluster resource accounting" \
	"Receives the segments of every node's collector, attributes CPU, network and disk use to chargeable entities (tenants) by rules and by pairing the same TCP bytes across nodes, and stores usage, the unaccountable share and totals per window in SQLite. Runs as the systemd service rametr-aggregator. rametr-cert makes the cluster's CA, certificates and enrolment tokens."
pkg rametr-collector collector "" "Rametr collector: per-node eBPF resource segments" \
	"Cuts the threads of this node into segments (from a receive to the next send) with eBPF and streams them to the Rametr aggregator; spools what cannot be delivered. Runs as the systemd service rametr-collector with CAP_BPF and CAP_PERFMON. The live Xen backend is in rametr-collector-xen."
if [ $xen = 1 ]; then
	pkg rametr-collector-xen collector-xen "rametr-collector (= $ver)" "Rametr collector with the live Xen backend" \
		"rametr-collector-xen is rametr-collector with the live Xen backend (--backend xen-live), which reads the hypervisor's trace buffers through libxenctrl. Install it only on Xen hosts: it needs the Xen libraries."
fi
pkg rametr-ctl ctl "" "Rametr command line: usage, bills and checks" \
	"rametrctl queries the database of the Rametr aggregator: usage per chargeable entity, the unaccountable share, splits, throttling, and the check that every window balances."
