# Helpers sourced by the core_*.sh test cases (not a test itself: this file
# is not executable, so tests/run.sh does not run it).
#   . tests/cases/core_lib.sh
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  echo "skip: core_lib.sh is a helper library, not a test"
  exit 77
fi
set -euo pipefail

B=build
T=build/tests
SO=$PWD/build/libhakmem.so

# A clean, deterministic environment: no HAKMEM_* settings from the caller.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^HAKMEM_' || true)
export LC_ALL=C
ulimit -c 0
# let EXIT traps clean up when the runner times a case out
trap 'exit 143' TERM
trap 'exit 130' INT

die() { echo "FAILED: $*" >&2; exit 1; }
skip() { echo "skip: $*"; exit 77; }
# bad MESSAGE: a failed check, counted; the case goes on to the next check.
# checks_done WHAT: at the end, fail the case when any check failed.
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
# Placement- and count-exact tests: no sampled or guarded blocks (the
# sampling point's, on by default: HAKMEM_PROF=sample, HAKMEM_GUARD=50000),
# which would move a block, a figure or an OS call at random.
sampling_off() { export HAKMEM_PROF=off HAKMEM_GUARD=0; }
checks_done() { ((fails == 0)) || die "$fails $1 checks failed"; }

# need FILE...: the build products a case needs.
need() {
  local f
  for f in "$@"; do [[ -e $f ]] || die "missing $f (run make all debug asan tsan test-progs)"; done
}

# run DESCRIPTION CMD...: run a command showing its output; fail when it
# fails.  The header lines go to stderr, so stdout can be redirected.
run() {
  local desc=$1 rc=0
  shift
  echo "== $desc" >&2
  echo "\$ $*" >&2
  "$@" || rc=$?
  ((rc == 0)) || die "$desc: exit status $rc"
}

# Sanitizer settings: every report is fatal.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:halt_on_error=1:detect_leaks=0:exitcode=66}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:exitcode=66}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1 exitcode=66 second_deadlock_stack=1}
