#!/usr/bin/env bash
# scripts/setup.sh - make this Debian machine able to build and run Rametr.
# Idempotent: installs only missing packages (apt-get update only then),
# mounts tracefs if absent, and fails with a clear message when something
# cannot be had. Sourced or run by scripts/demo.sh and scripts/test.sh.
set -euo pipefail

PKGS=(cmake make gcc pkg-config clang llvm bpftool libbpf-dev libelf-dev zlib1g-dev
      libnng-dev libmbedtls-dev openssl libprotobuf-c-dev protobuf-c-compiler libsqlite3-dev
      libcunit1-dev
      libxen-dev libsystemd-dev iproute2 procps postgresql
      redis-server redis-tools nginx curl wrk chromium prometheus jq unbound golang-go golang-google-grpc-dev libdw-dev
      memcached mariadb-server apache2 haproxy openjdk-17-jdk-headless)

die() { echo "setup: error: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (eBPF and package installation need it)"
command -v dpkg-query >/dev/null || die "this is not a Debian system (no dpkg-query)"

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || die "apt-get update failed"
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
		|| die "failed to install: ${missing[*]}"
fi

[ -r /sys/kernel/btf/vmlinux ] || die "kernel has no BTF at '/sys/kernel/btf/vmlinux' (needs CONFIG_DEBUG_INFO_BTF)"
if ! mountpoint -q /sys/kernel/tracing; then
	mount -t tracefs nodev /sys/kernel/tracing \
		|| die "failed to mount tracefs at '/sys/kernel/tracing'"
fi
mkdir -p /var/lib/rametr
