#!/usr/bin/env bash
# scripts/test.sh - the whole test suite: installs what is missing, builds
# Rametr twice (plain, and with ASan + UBSan) and runs every test in both.
# Usage: scripts/test.sh [ctest args...]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
export RM_NO_SKIP=1   # as root on a capable kernel, a skipped case is a failure

run() {  # run <build dir> <cmake args...>
	local dir=$1; shift
	echo "== build $dir $*"
	cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
	cmake --build "$dir" -j"$(nproc)" >"$dir.log" 2>&1 || { grep -E "error|Error" "$dir.log" | head -40 >&2; echo "test: build failed, full log in $dir.log" >&2; exit 1; }
	echo "== test $dir"
	(cd "$dir" && ctest --output-on-failure --timeout 600 "${CTEST_ARGS[@]}")
}
CTEST_ARGS=("$@")
run build
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	run build-asan -DRM_SANITIZE=ON
