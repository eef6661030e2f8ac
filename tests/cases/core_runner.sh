#!/usr/bin/env bash
# The test runner itself, on made-up cases (TEST_CASES, TEST_LOGDIR): with -j 3
# cases overlap, a "# serial" case overlaps none, each case's lines come out
# whole (a failed case's block is not split by another case's line), the
# closing line counts right, "failed:" names the failed cases, the exit
# status is 1 on a failure and 0 without; -j 1 runs in sorted order, one at
# a time; MAKEFLAGS=-j2 (make -j2 test) is honoured.
set -euo pipefail
. tests/cases/core_lib.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

mkdir "$tmp/cases"
# mk NAME STATUS [serial]: a case that records its start and end, prints 40
# lines, sleeps 1.5 s and exits STATUS
mk() {
  {
    echo '#!/usr/bin/env bash'
    echo "# made-up case $1"
    [[ ${3:-} == serial ]] && echo '# serial: the runner test'
    echo "echo \"$1 start \$(date +%s.%N)\" >>$tmp/times"
    echo "for i in \$(seq 40); do echo \"$1 line \$i\"; done"
    [[ $2 == 77 ]] && echo "echo 'skip: made up'"
    echo 'sleep 1.5'
    echo "echo \"$1 end \$(date +%s.%N)\" >>$tmp/times"
    echo "exit $2"
  } >"$tmp/cases/$1.sh"
  chmod +x "$tmp/cases/$1.sh"
}
mk a_pass 0; mk b_fail 1; mk c_pass 0; mk d_skip 77; mk e_fail 3; mk f_serial 0 serial; mk g_pass 0

# runner OUT -j N: run it on the made-up cases; status in $rc
runner() {
  local out=$1
  shift
  : >"$tmp/times"
  rc=0
  env TEST_NOBUILD=1 TEST_CASES="$tmp/cases" TEST_LOGDIR="$tmp/logs" TEST_TAIL=5 bash tests/run.sh "$@" >"$out" 2>&1 || rc=$?
}
# intervals NAME: "start end" of a case
interval() { awk -v n="$1" '$1 == n { t[$2] = $3 } END { print t["start"], t["end"] }' "$tmp/times"; }
overlap() {   # A B: do the two cases' runs overlap?
  local a b
  read -r -a a <<<"$(interval "$1")"
  read -r -a b <<<"$(interval "$2")"
  awk -v s1="${a[0]}" -v e1="${a[1]}" -v s2="${b[0]}" -v e2="${b[1]}" 'BEGIN { exit !(s1 < e2 && s2 < e1) }'
}
# a failed case's block: "FAIL NAME", then indented lines only, all its own
blocks_whole() {
  awk '/^FAIL [a-z_]+$/ { cur = $2; next }
       /^    / { if (cur == "") { print "indented line outside a block: " $0; bad = 1 }
                 else if ($0 ~ /line [0-9]+$/ && $0 !~ cur) { print "line of another case in " cur ": " $0; bad = 1 }
                 next }
       { cur = "" }
       END { exit bad }' "$1"
}

echo "== -j 3"
runner "$tmp/j3" -j 3
((rc == 1)) || bad "-j 3: exit status $rc, want 1"
[[ $(tail -n 1 "$tmp/j3") == "4 passed, 2 failed, 1 skipped" ]] || bad "-j 3: closing line '$(tail -n 1 "$tmp/j3")'"
grep -qx 'failed: b_fail e_fail' "$tmp/j3" || grep -qx 'failed: e_fail b_fail' "$tmp/j3" || bad "-j 3: no 'failed:' line naming both"
for n in a_pass c_pass f_serial g_pass; do grep -Eq "^PASS $n \([0-9.]+s\)$" "$tmp/j3" || bad "-j 3: no PASS line for $n"; done
grep -qx 'SKIP d_skip (made up)' "$tmp/j3" || bad "-j 3: no SKIP line for d_skip"
blocks_whole "$tmp/j3" || bad "-j 3: a failed case's lines are split"
[[ -f $tmp/logs/b_fail.log && $(grep -c '^b_fail line' "$tmp/logs/b_fail.log") == 40 ]] || bad "-j 3: no whole log for b_fail"
n=0
for x in a_pass b_fail c_pass d_skip e_fail g_pass; do
  overlap f_serial "$x" && bad "-j 3: the serial case overlapped $x"
  overlap a_pass "$x" && [[ $x != a_pass ]] && n=$((n + 1))
done
((n >= 1)) || bad "-j 3: a_pass overlapped no other case: not parallel"
tail -n 4 "$tmp/j3" | sed 's/^/    /'
echo "ok   -j 3: a_pass ran beside $n other cases, the serial one alone"

echo "== -j 1: sorted order, one at a time"
runner "$tmp/j1" -j 1
((rc == 1)) || bad "-j 1: exit status $rc"
order=$(grep -oE '^(PASS|FAIL|SKIP) [a-z_]+' "$tmp/j1" | awk '{ print $2 }' | tr '\n' ' ')
[[ $order == "a_pass b_fail c_pass d_skip e_fail f_serial g_pass " ]] || bad "-j 1: order '$order'"
for x in b_fail c_pass d_skip e_fail f_serial g_pass; do overlap a_pass "$x" && bad "-j 1: a_pass overlapped $x"; done
[[ $(tail -n 1 "$tmp/j1") == "4 passed, 2 failed, 1 skipped" ]] || bad "-j 1: closing line '$(tail -n 1 "$tmp/j1")'"
echo "ok   -j 1: $order"

echo "== MAKEFLAGS=-j2, only passing cases: exit status 0"
rm "$tmp/cases/b_fail.sh" "$tmp/cases/e_fail.sh"
MAKEFLAGS="-j2 --jobserver-auth=3,4" runner "$tmp/mk"
((rc == 0)) || bad "MAKEFLAGS=-j2: exit status $rc, want 0"
[[ $(tail -n 1 "$tmp/mk") == "4 passed, 0 failed, 1 skipped" ]] || bad "MAKEFLAGS=-j2: closing line '$(tail -n 1 "$tmp/mk")'"
n=0
for x in c_pass d_skip g_pass; do overlap a_pass "$x" && n=$((n + 1)); done
((n >= 1)) || bad "MAKEFLAGS=-j2: a_pass overlapped nothing: -j not taken from MAKEFLAGS"
echo "ok   $(tail -n 1 "$tmp/mk")"

checks_done runner
echo "the runner checks passed"
