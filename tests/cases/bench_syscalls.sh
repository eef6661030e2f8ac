#!/usr/bin/env bash
# bench_syscalls: scripts/bench.sh syscalls with a short workload: hakmem's
# counters (when build/libhakmem.so exists) and strace for glibc (when strace
# works here) give per-op figures in report.md and syscalls.csv.
set -euo pipefail
# shellcheck source=scripts/lib/testlib.sh
. "$(dirname "$0")/../../scripts/lib/testlib.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"
build_bench_progs

allocs=""
[[ -r $ROOT/build/libhakmem.so ]] && allocs="hakmem"
strace_ok=0
if command -v strace >/dev/null 2>&1 && strace -f -qq -c -o /dev/null true >/dev/null 2>&1; then
  strace_ok=1
  allocs="$allocs glibc"
fi
[[ -n $allocs ]] || skip "neither build/libhakmem.so nor a working strace"

O=$TMPD/sys
env SETUP=0 NO_BUILD=1 SYSCALL_ITERS=2M SYSCALL_SHORT=200k ALLOCS="$allocs" OUTDIR="$O" \
  "$ROOT/scripts/bench.sh" syscalls >"$TMPD/out" 2>"$TMPD/err" || fail "bench.sh syscalls: $(tail -n 5 "$TMPD/err")"
[[ -s $O/report.md && -s $O/syscalls.csv ]] || fail "no report.md or syscalls.csv"
grep -q '^# hakmem syscall budget' "$TMPD/out" || fail "report not printed"
if [[ $strace_ok == 1 ]]; then
  grep -q '^glibc,strace,200000,2000000,[0-9]*,[0-9]*,[-0-9.e]*,ok,' "$O/syscalls.csv" ||
    fail "glibc strace row: $(grep glibc "$O/syscalls.csv")"
  awk -F, '$1 == "glibc" { exit !($5 > 0) }' "$O/syscalls.csv" || fail "glibc made no memory calls at start-up?"
fi
if [[ $allocs == *hakmem* ]]; then
  if grep -q '^os: mmap=' "$O"/logs/syscalls.hakmem.counters.long.err; then
    grep -q '^hakmem,counters,200000,2000000,.*,ok,' "$O/syscalls.csv" || fail "hakmem counters row"
  else
    grep -q 'no-os-line' "$O/syscalls.csv" || fail "a missing 'os:' line is not reported"
  fi
fi
echo "ok ($allocs)"
