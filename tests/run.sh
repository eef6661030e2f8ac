#!/usr/bin/env bash
# hakmem test runner (`make test`).
#
#   tests/run.sh [PATTERN ...]
#
# Builds the libraries (`make all debug asan tsan`) and the test programs
# (`make test-progs`), then runs every executable tests/cases/*.sh in sorted
# order, each from the repository root, with a timeout.  A case passes with
# exit status 0, is skipped with 77, and fails otherwise; its output goes to
# build/test-logs/NAME.log, whose tail is printed on failure.
#
# PATTERN selects cases by name (without .sh): a glob when it contains * ? or
# [, a substring otherwise; several patterns select the union.
#
# Environment: TEST_TIMEOUT  seconds per case (default 300)
#              TEST_NOBUILD  1 = do not build first
#              TEST_TAIL     lines of log shown for a failed case (default 30)
# The last line of output is always "N passed, M failed, K skipped".
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
make_cmd=${MAKE:-make}
timeout_s=${TEST_TIMEOUT:-300}
tail_n=${TEST_TAIL:-30}
logdir=build/test-logs
mkdir -p "$logdir"

passed=0 failed=0 skipped=0
failed_names=()

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
# On failure: the first lines that look like errors, then the tail of the log.
show_tail() {
  local hits
  hits=$(grep -n -E 'FAIL|ERROR|[Ee]rror:|WARNING: .*Sanitizer|runtime error|Invalid (read|write)|Assertion|Segmentation|Aborted|timed out' "$1" |
    head -n 12 || true)
  if [[ -n $hits ]]; then
    echo "    first error lines:"
    sed 's/^/    ! /' <<<"$hits"
  fi
  echo "    last lines:"
  tail -n "$tail_n" "$1" | sed 's/^/    | /'
}
summary() {
  if ((failed > 0)); then
    echo "failed: ${failed_names[*]}"
  fi
  echo "$passed passed, $failed failed, $skipped skipped"
}

selected() {
  local name=$1 pat
  (($# == 1)) && return 0
  shift
  for pat in "$@"; do
    pat=${pat##*/}
    pat=${pat%.sh}
    case $pat in
      *[*?[]*) [[ $name == $pat ]] && return 0 ;;
      *) [[ $name == *"$pat"* ]] && return 0 ;;
    esac
  done
  return 1
}

# ---- build -----------------------------------------------------------------
if [[ ${TEST_NOBUILD:-0} != 1 ]]; then
  jobs=$(nproc 2>/dev/null || echo 2)
  t0=$(now)
  blog=$logdir/build.log
  if ! { $make_cmd -s -j"$jobs" all debug asan tsan && $make_cmd -s -j"$jobs" test-progs; } >"$blog" 2>&1; then
    echo "FAIL build"
    show_tail "$blog"
    failed=1
    failed_names+=(build)
    summary
    exit 1
  fi
  echo "built libraries and test programs ($(elapsed "$t0" "$(now)")s)"
fi

# ---- run -------------------------------------------------------------------
shopt -s nullglob
cases=(tests/cases/*.sh)
IFS=$'\n' cases=($(printf '%s\n' "${cases[@]}" | LC_ALL=C sort)) || true
unset IFS
suite_t0=$(now)
for c in "${cases[@]}"; do
  [[ -f $c && -x $c ]] || continue
  name=$(basename "$c" .sh)
  selected "$name" "$@" || continue
  log=$logdir/$name.log
  t0=$(now)
  timeout -k 10 "$timeout_s" "$c" </dev/null >"$log" 2>&1
  rc=$?
  dt=$(elapsed "$t0" "$(now)")
  case $rc in
    0)
      echo "PASS $name (${dt}s)"
      passed=$((passed + 1))
      ;;
    77)
      reason=$(grep -m1 -i '^skip' "$log" | sed 's/^skip[a-z]*:* *//I' || true)
      echo "SKIP $name${reason:+ ($reason)}"
      skipped=$((skipped + 1))
      ;;
    *)
      if ((rc == 124 || rc == 137)); then
        echo "(timed out after ${timeout_s}s)" >>"$log"
      fi
      echo "FAIL $name"
      echo "    exit status $rc after ${dt}s; log: $log"
      show_tail "$log"
      failed=$((failed + 1))
      failed_names+=("$name")
      ;;
  esac
done
echo "ran in $(elapsed "$suite_t0" "$(now)")s"
summary
((failed == 0))
