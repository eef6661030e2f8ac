# shellcheck shell=bash
# scripts/lib/testlib.sh — helpers for tests/cases/bench_*.sh.
# Sets ROOT and TMPD (removed at exit); defines fail, skip, build_bench_progs,
# expect_exit, has_keys.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
unset MAKEFLAGS MFLAGS MAKELEVEL
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-benchtest.XXXXXX")
# shellcheck disable=SC2064 # expand TMPD now
trap "rm -rf '$TMPD'" EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
skip() {
  echo "SKIP: $*"
  exit 77
}

# Build the benchmark programs; serialized with a lock so that test cases
# running in parallel do not write the same binaries at once.
build_bench_progs() {
  mkdir -p "$ROOT/build"
  if command -v flock >/dev/null 2>&1; then
    flock "$ROOT/build/.bench-progs.lock" make -s -C "$ROOT" bench-progs >"$TMPD/build.log" 2>&1
  else
    make -s -C "$ROOT" bench-progs >"$TMPD/build.log" 2>&1
  fi || {
    cat "$TMPD/build.log" >&2
    fail "make bench-progs"
  }
}

# expect_exit STATUS WHAT CMD...: run CMD, check its exit status.
expect_exit() {
  local want=$1 what=$2 rc=0
  shift 2
  "$@" >"$TMPD/out" 2>"$TMPD/err" || rc=$?
  if [[ $rc != "$want" ]]; then
    echo "--- stdout:" >&2
    head -n 5 "$TMPD/out" >&2
    echo "--- stderr:" >&2
    head -n 5 "$TMPD/err" >&2
    fail "$what: exit status $rc, expected $want ($*)"
  fi
}

# has_keys LINE KEY...: every KEY=... is in LINE.
has_keys() {
  local line=$1 k
  shift
  for k in "$@"; do
    [[ " $line " == *" $k="* ]] || {
      echo "missing key '$k' in: $line" >&2
      return 1
    }
  done
}
