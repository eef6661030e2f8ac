#!/usr/bin/env bash
# bench_soak: scripts/soak.sh for about a second under glibc writes soak.csv
# with one row per step, summary.md with the SOAK line, and (with gnuplot) soak.png.
set -euo pipefail
# shellcheck source=scripts/lib/testlib.sh
. "$(dirname "$0")/../../scripts/lib/testlib.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"
build_bench_progs
O=$TMPD/soak
env NO_BUILD=1 DURATION_SEC=1 STEP_ITERS=50k ALLOC=glibc OUTDIR="$O" "$ROOT/scripts/soak.sh" \
  >"$TMPD/out" 2>"$TMPD/err" || fail "soak.sh: $(tail -n 5 "$TMPD/err")"
[[ $(head -n 1 "$O/soak.csv") == "step,t_s,ops,ops_per_sec,rss_kb,cpu_ops_per_sec" ]] || fail "soak.csv header"
n=$(($(wc -l <"$O/soak.csv") - 1))
((n >= 3)) || fail "soak.csv has only $n samples"
grep -Eq '^SOAK alloc=glibc duration_s=[0-9.]* samples=[0-9]* .*rss_drift_pct=[-0-9.]*( cpu_ops_cv_pct=[0-9.]*)?$' "$O/summary.md" ||
  fail "no SOAK line: $(cat "$O/summary.md")"
cmp -s "$O/summary.md" <(grep -v '^soak:' "$TMPD/out" | sed '/^Results: /d') || true
grep -q "^Results: $O/summary.md$" "$TMPD/out" || fail "summary path not printed"
if command -v gnuplot >/dev/null 2>&1; then
  [[ -s $O/soak.png ]] || fail "no soak.png"
fi
expect_exit 2 "soak with an unknown allocator" env NO_BUILD=1 ALLOC=nope DURATION_SEC=1 OUTDIR="$TMPD/x" \
  "$ROOT/scripts/soak.sh"
echo "ok ($n samples)"
