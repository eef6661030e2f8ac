# tests/install.sh — sourced (POSIX sh) by the install_* and pkg_* cases after
# `set -eu`.  Sets root, tmp (a fresh directory, removed at exit) and ver
# (HAKMEM_VERSION); defines fail and need; clears the variables that would
# change what a case sees.  `install_prefix` builds the library and installs
# it under $tmp/prefix (the case is skipped when the library does not build).
# shellcheck shell=sh
root=$(cd "$(dirname "$0")/../.." && pwd)
unset MAKEFLAGS MFLAGS MAKELEVEL LD_PRELOAD HAKMEM_LIB HAKMEM_STATS HAKMEM_PROFILE
fail() { echo "FAIL: $*" >&2; exit 1; }
need() {   # need TOOL...: skip the case unless every TOOL is on PATH
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || { echo "SKIP: $t not installed"; exit 77; }
  done
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-$(basename "$0" .sh).XXXXXX")
trap 'rm -rf "$tmp"' EXIT
ver=$(sed -n 's/^#define HAKMEM_VERSION "\(.*\)"/\1/p' "$root/include/hakmem.h")

install_prefix() {
  make -s -C "$root" all >"$tmp/log" 2>&1 || { echo "SKIP: the library does not build"; exit 77; }
  prefix=$tmp/prefix
  make -s -C "$root" install PREFIX="$prefix" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; fail "make install"; }
}
