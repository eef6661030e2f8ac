# shellcheck shell=bash disable=SC2034
# Helpers sourced by the rel_*.sh cases (not a test: not executable, so
# tests/run.sh does not run it).   . tests/cases/rel_lib.sh
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  echo "skip: rel_lib.sh is a helper library, not a test"
  exit 77
fi
set -euo pipefail

RT=build/tests/rel          # programs of the rel_* cases
SO=$PWD/build/libhakmem.so
mkdir -p "$RT"

# A clean, deterministic environment: no HAKMEM_* settings from the caller.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^HAKMEM_' || true)
export LC_ALL=C
ulimit -c 0

die() { echo "FAILED: $*" >&2; exit 1; }
skip() { echo "skip: $*"; exit 77; }
need() {
  local f
  for f in "$@"; do [[ -e $f ]] || die "missing $f (run make all debug asan first)"; done
}

# Every sanitizer report is fatal.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:halt_on_error=1:detect_leaks=0:exitcode=66}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:exitcode=66}

# build OUT COMPILER SOURCE [ARGS...]: compile unless OUT is newer than the
# source, the public header, this file and every existing file in ARGS (the
# libraries it links).  The command is printed.
build() {
  local out=$1 cc=$2 src=$3 dep stale=0
  shift 3
  if [[ ! -e $out || $src -nt $out || include/hakmem.h -nt $out || tests/cases/rel_lib.sh -nt $out ]]; then
    stale=1
  else
    for dep in "$@"; do
      [[ -f $dep && $dep -nt $out ]] && stale=1
    done
  fi
  ((stale)) || return 0
  mkdir -p "$(dirname "$out")"
  echo "\$ $cc $src $* -o $out" >&2
  "$cc" "$src" "$@" -o "$out" || die "cannot build $out"
}
# shellcheck disable=SC2054
WHOLE_RELEASE=(-Wl,--whole-archive build/libhakmem.a -Wl,--no-whole-archive)
