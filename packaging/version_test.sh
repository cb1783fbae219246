#!/bin/sh
# packaging/version_test.sh - every program answers --version with its name
# and the project version, exit status 0.
# Usage: version_test.sh VERSION PROGRAM...
set -eu
ver=$1
shift
for p in "$@"; do
	name=$(basename "$p")
	out=$("$p" --version) || { echo "FAIL: '$p --version' exited $?"; exit 1; }
	case $out in
	"$name $ver"*) echo "ok: $out" ;;
	*) echo "FAIL: '$p --version' printed '$out', expected '$name $ver...'"; exit 1 ;;
	esac
done
