#!/usr/bin/env bash
# Detected misuse: double free (small, medium, large; at the head of the
# free list and later), free of a stack, static or interior pointer, realloc
# of an invalid pointer.  Each must die by SIGABRT after exactly one stderr
# line "hakmem: ..." that names the problem and the address (0x hex).
# Run against the release and debug libraries and through LD_PRELOAD.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-misuse-release $T/test-misuse-debug $T/test-misuse-glibc "$SO"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# mode -> the words the message must contain (an ERE)
declare -A want=(
  [double-free-small]='double free'
  [double-free-medium]='double free'
  [double-free-large]='double free|invalid pointer'
  [double-free-small-later]='double free'
  [double-free-medium-later]='double free'
  [free-stack]='invalid pointer'
  [free-static]='invalid pointer'
  [free-interior]='invalid pointer'
  [realloc-invalid]='invalid pointer'
)
modes=(double-free-small double-free-medium double-free-large double-free-small-later
       double-free-medium-later free-stack free-static free-interior realloc-invalid)

fails=0
check() {  # check VARIANT MODE CMD...
  local variant=$1 mode=$2 rc=0
  shift 2
  # (the inner shell absorbs bash's "Aborted" job message)
  bash -c '"$@" >"$0/out" 2>"$0/err"' "$tmp" "$@" "$mode" 2>/dev/null || rc=$?
  local addr line nlines problem=""
  addr=$(sed -n 's/^addr=//p' "$tmp/out")
  nlines=$(wc -l <"$tmp/err")
  line=$(head -n 1 "$tmp/err")
  if ((rc != 134)); then
    problem="exit status $rc, want 134 (SIGABRT)"
  elif [[ -z $addr ]]; then
    problem="the program did not print the address"
  elif ((nlines != 1)); then
    problem="$nlines lines on stderr, want exactly 1"
  elif [[ $line != "hakmem: "* ]]; then
    problem="stderr line does not start with 'hakmem: '"
  elif ! grep -Eq "${want[$mode]}" <<<"$line"; then
    problem="stderr line does not say '${want[$mode]}'"
  else
    local tok found=0
    for tok in $(grep -Eo '0x[0-9a-fA-F]+' <<<"$line"); do
      (( tok == addr )) && found=1
    done
    ((found)) || problem="stderr line does not name the address $addr"
  fi
  if [[ -n $problem ]]; then
    echo "FAIL $variant $mode: $problem"
    sed 's/^/     stderr: /' "$tmp/err" | head -n 5
    fails=$((fails + 1))
  else
    echo "ok   $variant $mode: $line"
  fi
}

for mode in "${modes[@]}"; do
  check release "$mode" $T/test-misuse-release
  check debug "$mode" $T/test-misuse-debug
  check preload "$mode" env LD_PRELOAD="$SO" $T/test-misuse-glibc
done
# The test program itself survives when nothing is wrong.
rc=0; $T/test-misuse-release bogus-mode >/dev/null 2>&1 || rc=$?
((rc == 2)) || die "test-misuse with an unknown mode: exit status $rc, want 2"
((fails == 0)) || die "$fails misuse checks failed"
echo "all ${#modes[@]} misuse modes x 3 variants detected correctly"
