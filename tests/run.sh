#!/usr/bin/env bash
# hakmem test runner (`make test`).
#
#   tests/run.sh [-j N] [PATTERN ...]
#   tests/run.sh --help
#
# Builds the libraries (`make all debug asan tsan`), the test programs
# (`make test-progs`) and the benchmark programs (`make bench-progs`), then
# runs every executable tests/cases/*.sh, each from the repository root, with
# a timeout.  A case passes with exit status 0, is skipped with 77, and fails
# otherwise; its output goes to build/test-logs/NAME.log, whose tail is
# printed on failure.
#
# -j N runs up to N cases at once (default 1; `make test J=N`, or `make -jN
# test`).  Each case's lines are printed whole when it ends.  A case with a
# line "# serial" (or "# serial: why") in the comment block at the top of its
# file (timing- or RSS-sensitive, binds a port, or installs packages) runs
# alone, after the others.  With -j 1 every case runs in sorted order.
#
# PATTERN selects cases by name (without .sh): a glob when it contains * ? or
# [, a substring otherwise; several patterns select the union.
#
# Environment: TEST_TIMEOUT  seconds per case (default 300; 600 with -j N > 1,
#                           as cases then share the CPUs)
#              TEST_NOBUILD  1 = do not build first
#              TEST_TAIL     lines of log shown for a failed case (default 30)
#              TEST_CASES    folder of the cases (default tests/cases), and
#              TEST_LOGDIR   of the logs (default build/test-logs): the
#                            runner's own test (core_runner) uses others
# The last line of output is always "N passed, M failed, K skipped".
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

# -j from the command line, else from make's flags (`make -j4 test`)
par=""
if [[ ${MAKEFLAGS:-} =~ (^|[[:space:]])-j([0-9]+) ]]; then par=${BASH_REMATCH[2]}; fi
pats=()
while (($# > 0)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    -j) (($# >= 2)) || { echo "run.sh: -j needs a number" >&2; exit 2; }; par=$2; shift ;;
    -j*) par=${1#-j} ;;
    *) pats+=("$1") ;;
  esac
  shift
done
par=${par:-1}
[[ $par =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: -j wants a positive number, not '$par'" >&2; exit 2; }
set -- "${pats[@]}"
make_cmd=${MAKE:-make}
timeout_s=${TEST_TIMEOUT:-300}
if [[ -z ${TEST_TIMEOUT:-} ]] && ((par > 1)); then timeout_s=600; fi
tail_n=${TEST_TAIL:-30}
logdir=${TEST_LOGDIR:-build/test-logs}
mkdir -p "$logdir"

passed=0 failed=0 skipped=0
failed_names=()

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
# On failure: the first lines that look like errors, then the tail of the log.
show_tail() {
  local hits
  hits=$(grep -n -m 12 -E 'FAIL|ERROR|[Ee]rror:|WARNING: .*Sanitizer|runtime error|Invalid (read|write)|Assertion|Segmentation|Aborted|timed out' "$1" ||
    true)
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
  if ! { $make_cmd -s -j"$jobs" all debug asan tsan && $make_cmd -s -j"$jobs" test-progs bench-progs; } >"$blog" 2>&1; then
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
# run_case FILE: runs one case and writes its lines for the terminal to
# $logdir/NAME.result, the first line being PASS, SKIP or FAIL.
run_case() {
  local c=$1 name log t0 rc dt reason
  name=$(basename "$c" .sh)
  log=$logdir/$name.log
  t0=$(now)
  timeout -k 10 "$timeout_s" "$c" </dev/null >"$log" 2>&1
  rc=$?
  dt=$(elapsed "$t0" "$(now)")
  {
    case $rc in
      0) echo PASS; echo "PASS $name (${dt}s)" ;;
      77)
        reason=$(grep -m1 -i '^skip' "$log" | sed 's/^skip[a-z]*:* *//I' || true)
        echo SKIP
        echo "SKIP $name${reason:+ ($reason)}"
        ;;
      *)
        if ((rc == 124 || rc == 137)); then
          echo "(timed out after ${timeout_s}s)" >>"$log"
        fi
        echo FAIL
        echo "FAIL $name"
        echo "    exit status $rc after ${dt}s; log: $log"
        show_tail "$log"
        ;;
    esac
  } >"$logdir/$name.result"
}

# report NAME: print a finished case's lines and count it.
report() {
  local res=$logdir/$1.result kind
  kind=$(sed -n 1p "$res")
  sed 1d "$res"
  rm -f "$res"
  case $kind in
    PASS) passed=$((passed + 1)) ;;
    SKIP) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1)); failed_names+=("$1") ;;
  esac
}

# "# serial" in the comment block that opens the file
is_serial() { awk 'NR > 1 && !/^#/ { exit } /^# serial([: ]|$)/ { f = 1 } END { exit !f }' "$1"; }

shopt -s nullglob
cases=("${TEST_CASES:-tests/cases}"/*.sh)
IFS=$'\n' cases=($(printf '%s\n' "${cases[@]}" | LC_ALL=C sort)) || true
unset IFS
together=() alone=()
for c in "${cases[@]}"; do
  [[ -f $c && -x $c ]] || continue
  selected "$(basename "$c" .sh)" "$@" || continue
  if ((par > 1)) && is_serial "$c"; then alone+=("$c"); else together+=("$c"); fi
done

declare -A running=()   # pid -> case name
# wait_one: wait for one running case to end, print it
wait_one() {
  local pid=""
  wait -n -p pid "${!running[@]}"
  [[ -n $pid && -n ${running[$pid]:-} ]] || return 0
  report "${running[$pid]}"
  unset "running[$pid]"
}
trap 'kill -TERM "${!running[@]}" 2>/dev/null; exit 130' INT TERM

suite_t0=$(now)
for c in "${together[@]}"; do
  while ((${#running[@]} >= par)); do wait_one; done
  run_case "$c" &
  running[$!]=$(basename "$c" .sh)
done
while ((${#running[@]} > 0)); do wait_one; done
for c in "${alone[@]}"; do
  run_case "$c"
  report "$(basename "$c" .sh)"
done
echo "ran in $(elapsed "$suite_t0" "$(now)")s${alone[*]:+ (${#alone[@]} serial cases alone)}"
summary
((failed == 0))
