#!/usr/bin/env bash
# bench_ab: scripts/ab.sh builds a git revision in a temporary worktree and
# compares it, interleaved, with a given library; prints both medians, the
# delta and a verdict; leaves no worktree behind; rejects bad revisions.
set -euo pipefail
# shellcheck source=scripts/lib/testlib.sh
. "$(dirname "$0")/../../scripts/lib/testlib.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"
[[ -r $ROOT/build/libhakmem.so ]] || skip "build/libhakmem.so is not built"
git -C "$ROOT" rev-parse --verify -q HEAD >/dev/null || skip "no git commit to build"
build_bench_progs
LIB=$ROOT/build/libhakmem.so

O=$TMPD/ab
rc=0
env NO_BUILD=1 RUNS=3 PRESET=tiny OUTDIR="$O" "$ROOT/scripts/ab.sh" HEAD "$LIB" >"$TMPD/out" 2>"$TMPD/err" || rc=$?
[[ $rc == 0 || $rc == 1 ]] || fail "ab.sh exited $rc: $(tail -n 8 "$TMPD/err")"
grep -q 'using 5' "$TMPD/err" || fail "RUNS=3 was not raised to 5"
grep -q '^AB verdict=\(GO\|NO-GO\|NEUTRAL\|WITHIN_NOISE\) delta_pct=' "$TMPD/out" || fail "no verdict line"
grep -q '^| A | ' "$TMPD/out" || fail "no medians table (A)"
grep -q '^| B | ' "$TMPD/out" || fail "no medians table (B)"
[[ $(grep -c $'^[AB]\t' "$O/ab.tsv") == 10 ]] || fail "expected 10 runs in ab.tsv"
[[ $(cut -f1 "$O/ab.tsv" | tr -d '\n') == ABABABABAB ]] || fail "runs not interleaved A B A B"
wt=$(git -C "$ROOT" worktree list)
! grep -q hakmem-ab <<<"$wt" || fail "a temporary worktree was left behind"
expect_exit 2 "bad revision" env NO_BUILD=1 "$ROOT/scripts/ab.sh" no-such-rev-xyz "$LIB"
expect_exit 2 "one argument" "$ROOT/scripts/ab.sh" HEAD
echo "ok"
