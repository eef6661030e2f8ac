#!/usr/bin/env bash
# Detected misuse: double free (small, medium, large; at the head of the
# free list and later; across threads; of a block whose page scavenging gave
# back), free of a stack, static or interior
# pointer (small, medium, large block; before a block; hakmem's own
# metadata), realloc of an invalid pointer; malloc_usable_size of a freed,
# interior or never-carved block, realloc of a freed or interior pointer.  Each must die by SIGABRT after exactly one stderr
# line "hakmem: ..." that names the problem and the address (0x hex).
# Run against the release and debug libraries and through LD_PRELOAD.
set -euo pipefail
. tests/cases/core_lib.sh
sampling_off   # (blocks where the checks expect them)
need $T/test-misuse-release $T/test-misuse-debug $T/test-misuse-glibc "$SO"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# mode -> the words the message must contain (an ERE)
declare -A want=(
  [double-free-small]='double free'
  [double-free-medium]='double free'
  [double-free-large]='double free|invalid pointer'
  [double-free-small-later]='double free'
  [double-free-medium-later]='double free'
  [double-free-cross-thread]='double free'
  [double-free-remote-first]='double free'
  [double-free-scavenged]='double free'
  [free-interior-medium]='invalid pointer'
  [free-interior-large]='invalid pointer'
  [free-before-block]='invalid pointer'
  [free-segment-base]='invalid pointer'
  [free-stack]='invalid pointer'
  [free-static]='invalid pointer'
  [free-interior]='invalid pointer'
  [realloc-invalid]='invalid pointer'
  [usable-freed]='invalid pointer'
  [usable-interior]='invalid pointer'
  [usable-uncarved]='invalid pointer'
  [realloc-freed]='double free'
  [realloc-interior]='invalid pointer'
)
modes=(double-free-small double-free-medium double-free-large double-free-small-later
       double-free-medium-later double-free-cross-thread double-free-remote-first double-free-scavenged
       free-stack free-static free-interior free-interior-medium free-interior-large
       free-before-block free-segment-base realloc-invalid
       usable-freed usable-interior usable-uncarved realloc-freed realloc-interior)

fails=0
names_addr() {  # names_addr LINE ADDR: one of LINE's hex numbers equals ADDR
  local tok
  for tok in $(grep -Eo '0x[0-9a-fA-F]+' <<<"$1"); do (( tok == $2 )) && return 0; done
  return 1
}
report() {  # report LABEL PROBLEM OK-TEXT: one result line; a problem shows stderr and counts
  if [[ -n $2 ]]; then
    echo "FAIL $1: $2"
    head -n 5 "$tmp/err" | sed 's/^/     stderr: /'
    fails=$((fails + 1))
  else
    echo "ok   $1: $3"
  fi
}
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
  elif ! names_addr "$line" "$addr"; then
    problem="stderr line does not name the address $addr"
  fi
  report "$variant $mode" "$problem" "$line"
}

for mode in "${modes[@]}"; do
  check release "$mode" $T/test-misuse-release
  check debug "$mode" $T/test-misuse-debug
  check preload "$mode" env LD_PRELOAD="$SO" $T/test-misuse-glibc
done
# HAKMEM_INVALID_FREE=warn: the same one line, then the program goes on and
# the allocator is still consistent (no block handed out twice);
# HAKMEM_INVALID_FREE=ignore: silent, and consistent too.
check_soft() {  # check_soft warn|ignore MODE
  local how=$1 mode=$2 rc=0 problem="" line addr
  HAKMEM_INVALID_FREE=$how $T/test-misuse-release "$mode" >"$tmp/out" 2>"$tmp/err" || rc=$?
  addr=$(sed -n 's/^addr=//p' "$tmp/out")
  line=$(head -n 1 "$tmp/err")
  if ((rc != 0)); then
    problem="exit status $rc, want 0: $(tail -n 1 "$tmp/out")"
  elif ! grep -q 'allocator still consistent' "$tmp/out"; then
    problem="no consistency report"
  elif [[ $how == ignore ]]; then
    [[ ! -s $tmp/err ]] || problem="printed on stderr: $line"
  elif (($(wc -l <"$tmp/err") != 1)) || [[ $line != "hakmem: "* ]]; then
    problem="want exactly one 'hakmem: ' line on stderr, got $(wc -l <"$tmp/err")"
  elif ! grep -Eq "${want[$mode]}" <<<"$line"; then
    problem="stderr line does not say '${want[$mode]}'"
  elif ! names_addr "$line" "$addr"; then
    problem="stderr line does not name the address $addr"
  fi
  report "HAKMEM_INVALID_FREE=$how $mode" "$problem" "continues, allocator consistent"
}
for mode in "${modes[@]}"; do
  check_soft warn "$mode"
  check_soft ignore "$mode"
done

# The test program itself survives when nothing is wrong.
rc=0; $T/test-misuse-release bogus-mode >/dev/null 2>&1 || rc=$?
((rc == 2)) || die "test-misuse with an unknown mode: exit status $rc, want 2"
((fails == 0)) || die "$fails misuse checks failed"
echo "all ${#modes[@]} misuse modes detected correctly (3 builds; abort, warn, ignore)"
