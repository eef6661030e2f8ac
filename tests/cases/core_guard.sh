#!/usr/bin/env bash
# Guarded allocations (HAKMEM_GUARD, src/guard.c, docs/SECURITY.md): with
# every allocation the pool holds guarded (HAKMEM_GUARD=1), each error is
# caught once, named, with the access's (or the free's) stack, the block's
# allocation stack and, once freed, its free stack, symbolised: an overflow by
# a byte and by a page, an underflow, a read and a write after free, a double
# free, a write into the slack; the program then continues (and with
# HAKMEM_GUARD_ABORT=1 it aborts); a program's own SIGSEGV handler gets the
# faults that are not the pool's; blocks used correctly, across threads and
# a fork, get no report, and the pool never holds more than its 64 blocks;
# release and debug builds (and that last case under ThreadSanitizer); the
# model and thread tests of the debug build with guarded blocks among theirs.
set -euo pipefail
. tests/cases/core_lib.sh
need "$T/test-guard-release" "$T/test-guard-debug" "$T/test-guard-tsan" "$SO"
export HAKMEM_GUARD_PER_SEC=0   # (every allocation asked for, not a hundred a second)

# mode -> the words the report's first line must contain (an ERE)
declare -A want=(
  [overflow]='heap buffer overflow: a write .* byte 32 of the 32-byte block .*\(1 past its end\)'
  [overflow-page]='heap buffer overflow: a write .* byte 4096 of the 32-byte block'
  [underflow]='heap buffer underflow: a write .* byte -1 of the 32-byte block .*\(1 before its start\)'
  [uaf-read]='use after free: a read .* byte 5 of the freed 48-byte block'
  [uaf-write]='use after free: a write .* byte 5 of the freed 48-byte block'
  [double-free]='double free of the 48-byte block 0x[0-9a-f]+ in free\(\)'
  [slack]='a write past the end of the 13-byte block .* \(byte 13 from its start\), found by free\(\)'
)
# mode -> the function the first stack names first, and whether a free stack is expected
# (a free's stack may start at hakmem's free, the call's frame: main then)
declare -A first=([overflow]=bad_write [overflow-page]=bad_write [underflow]=bad_write [uaf-read]=bad_read
  [uaf-write]=bad_write [double-free]='(main|c?free)' [slack]='(main|c?free)')
declare -A freed=([uaf-read]=1 [uaf-write]=1 [double-free]=1)

for prog in "$T/test-guard-release" "$T/test-guard-debug"; do
  echo "== ${prog##*/}"
  for m in overflow overflow-page underflow uaf-read uaf-write double-free slack; do
    st=0
    out=$(HAKMEM_GUARD=1 "$prog" "$m" 2>"$T/guard.err") || st=$?
    err=$(cat "$T/guard.err")
    lines=$(grep -c '^hakmem: guarded allocation: ' <<<"$err" || true)
    head1=$(grep -m1 '^hakmem: guarded allocation: ' <<<"$err" || true)
    # the first frame of the first stack, and the stacks present
    f1=$(awk '/^  (the access|the free that found it)/ { getline; print; exit }' <<<"$err")
    alloc=$(awk '/^  allocated/ { getline; print; exit }' <<<"$err")
    if ((st != 0)) || [[ $out != continued ]]; then bad "$m: exit $st, stdout '$out' (expected: continued): $err"
    elif ((lines != 1)); then bad "$m: $lines reports, expected 1: $err"
    elif ! grep -Eq "${want[$m]}" <<<"$head1"; then bad "$m: '$head1' does not match '${want[$m]}'"
    elif ! grep -Eq "in ${first[$m]}(\.[a-z0-9.]+)?\+0x" <<<"$f1"; then bad "$m: the first stack starts '$f1', expected ${first[$m]}"
    elif ! grep -q "in make_block" <<<"$alloc"; then bad "$m: the allocation stack starts '$alloc', expected make_block"
    elif [[ -n ${freed[$m]:-} ]] && ! grep -q '^  freed (thread' <<<"$err"; then bad "$m: no free stack: $err"
    elif [[ -z ${freed[$m]:-} ]] && grep -q '^  freed' <<<"$err"; then bad "$m: a free stack for a live block: $err"
    else echo "ok   $m: ${head1#hakmem: guarded allocation: }"
    fi
  done
done

echo "== HAKMEM_GUARD_ABORT=1: the report, then abort"
st=0
HAKMEM_GUARD=1 HAKMEM_GUARD_ABORT=1 "$T/test-guard-release" uaf-write >/dev/null 2>"$T/guard.err" || st=$?
((st == 134)) && grep -q 'use after free' "$T/guard.err" && echo "ok   exit 134 after the report" ||
  bad "abort mode: exit $st: $(cat "$T/guard.err")"

echo "== the program's own SIGSEGV handler gets faults that are not the pool's"
st=0
HAKMEM_GUARD=1 "$T/test-guard-release" chain 2>"$T/guard.err" || st=$?
((st == 7)) && ! grep -q 'guarded allocation' "$T/guard.err" && echo "ok   exit 7 (its handler)" ||
  bad "chain: exit $st, expected 7: $(cat "$T/guard.err")"

echo "== used correctly (sizes to a page, realloc, another thread's frees, a fork): no report"
for prog in "$T/test-guard-release" "$T/test-guard-debug" "$T/test-guard-tsan"; do
  st=0
  out=$(HAKMEM_GUARD=1 "$prog" clean 2>"$T/guard.err") || st=$?
  ((st == 0)) && ! grep -q 'guarded allocation' "$T/guard.err" && echo "ok   ${prog##*/}: ${out//$'\n'/ }" ||
    bad "clean (${prog##*/}): exit $st: $out $(cat "$T/guard.err")"
done

echo "== the allocator's own checks with guarded blocks among the others (debug build: its invariants asserted)"
need "$T/test-model-debug" "$T/test-threads-debug"
run "test-model, every allocation the pool holds guarded" env HAKMEM_GUARD=1 "$T/test-model-debug" 200000 >/dev/null
run "test-model, one in 3 guarded, profiling on" env HAKMEM_GUARD=3 HAKMEM_PROF=1 HAKMEM_PROF_RATE=4K \
  HAKMEM_PROF_PREFIX="$T/guard-prof" "$T/test-model-debug" 200000 >/dev/null
rm -f "$T"/guard-prof.*
run "test-threads stress, every allocation the pool holds guarded" env HAKMEM_GUARD=1 "$T/test-threads-debug" stress >/dev/null

echo "== the statistics report's guard line"
line=$(HAKMEM_GUARD=1 HAKMEM_STATS=1 LD_PRELOAD="$SO" /bin/ls / 2>&1 >/dev/null | grep '^guard:' || true)
[[ $line =~ ^guard:\ guarded=[1-9][0-9]*\ capped=0\ live=[0-9]+\ retired_slots=0\ errors=0$ ]] && echo "ok   $line" ||
  bad "no guard line (or a wrong one) in the report: '$line'"
echo "== the default (HAKMEM_GUARD=50000, at most 100 a second): some blocks guarded, the pool bounded"
line=$(env -u HAKMEM_GUARD -u HAKMEM_GUARD_PER_SEC HAKMEM_STATS=1 "$T/test-model-release" 2000000 2>&1 >/dev/null | grep '^guard:' || true)
[[ $line =~ ^guard:\ guarded=([0-9]+)\ capped=[0-9]+\ live=([0-9]+)\ retired_slots=0\ errors=0$ ]] &&
  ((BASH_REMATCH[1] >= 1 && BASH_REMATCH[2] <= 64)) && echo "ok   $line" || bad "the default's guard line: '$line'"

echo "== HAKMEM_GUARD_PER_SEC=20 bounds the guarded blocks a second"
t0=$(date +%s%N)
line=$(HAKMEM_GUARD=1 HAKMEM_GUARD_PER_SEC=20 HAKMEM_STATS=1 "$T/test-model-release" 1000000 2>&1 >/dev/null | grep '^guard:' || true)
secs=$(( ($(date +%s%N) - t0) / 1000000000 + 1 ))
if [[ $line =~ ^guard:\ guarded=([0-9]+)\ capped=([0-9]+) ]]; then
  g=${BASH_REMATCH[1]} c=${BASH_REMATCH[2]}
  ((g >= 1 && g <= 20 * (secs + 1) && c > 0)) && echo "ok   $g guarded, $c left unguarded, in about $secs s" ||
    bad "HAKMEM_GUARD_PER_SEC=20: $g guarded, $c capped in about $secs s: '$line'"
else
  bad "no guard line: '$line'"
fi
rm -f "$T/guard.err"
checks_done "guarded allocation"
