#!/usr/bin/env bash
# bench_runner: a tiny end-to-end run of scripts/bench.sh (PRESET=tiny, RUNS=1,
# glibc plus hakmem when build/libhakmem.so exists plus mimalloc when
# installed) writes report.md, runs.csv and (with gnuplot) the charts; runs are
# interleaved; the verdict lines at the top and at the end of the run;
# benchmark/allocator selection and bad settings; a library that
# fails to preload is caught; the shared peers (mi241 mi343 snmalloc) are
# offered only when their folder exists and pass the allocator check.
set -euo pipefail
# shellcheck source=scripts/lib/testlib.sh
. "$(dirname "$0")/../../scripts/lib/testlib.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"
build_bench_progs
# shellcheck source=scripts/lib/common.sh
. "$ROOT/scripts/lib/common.sh"

allocs="glibc"
[[ -r $ROOT/build/libhakmem.so ]] && allocs="$allocs hakmem"
alloc_lib mimalloc >/dev/null && allocs="$allocs mimalloc"
read -r -a A <<<"$allocs"
run() { env SETUP=0 NO_BUILD=1 PRESET=tiny "$@"; }

O=$TMPD/suite
run RUNS=1 ALLOCS="$allocs" OUTDIR="$O" "$ROOT/scripts/bench.sh" >"$TMPD/out" 2>"$TMPD/err" ||
  fail "bench.sh failed: $(tail -n 5 "$TMPD/err")"
[[ -s $O/report.md ]] || fail "no report.md"
[[ -s $O/runs.csv ]] || fail "no runs.csv"
want=$((1 + ${#ALL_BENCHES[@]} * ${#A[@]}))
[[ $(wc -l <"$O/runs.csv") == "$want" ]] || fail "runs.csv has $(wc -l <"$O/runs.csv") lines, want $want"
bad=$(awk -F, 'NR > 1 && $4 != "ok"' "$O/runs.csv")
[[ -z $bad ]] || fail "failed runs: $bad"
grep -q "^Results: $O/report.md$" "$TMPD/out" || fail "the report path is not printed"
grep -q '^## Summary: ratio to' "$TMPD/out" || fail "no summary table on stdout"
for b in random_mixed vm vm_cold larson xthread latency fragment churn churn8 churn64 churn_small churn_tasks turns; do
  grep -q "^## $b — " "$O/report.md" || fail "report.md has no section for $b"
done
grep -q '^\[ *1/[0-9]*\] random_mixed *glibc *run 1/1' "$TMPD/err" || fail "no progress lines on stderr"
pngs="ratio.png peak_rss.png"
if [[ " $allocs " == *" hakmem "* ]]; then
  # the verdict: at the top of the report and again at the end of the run, before the path
  [[ $(sed -n 5p "$O/report.md") == "- **hakmem vs glibc**: time "* ]] || fail "no verdict at the top of report.md"
  tail -n 4 "$TMPD/out" | grep -q '^  hakmem vs glibc: time .*no interval from one round' ||
    fail "the verdict is not printed at the end: $(tail -n 4 "$TMPD/out")"
  pngs="$pngs verdict.png"
fi
if command -v gnuplot >/dev/null 2>&1; then
  for p in $pngs; do
    [[ $(head -c 4 "$O/$p" 2>/dev/null | od -An -c | tr -d ' ') == '211PNG' ]] || fail "$p is not a PNG"
  done
else
  echo "note: gnuplot not installed, charts not checked"
fi

# Selection and interleaving: run k of every allocator before run k+1.
O2=$TMPD/sel
run RUNS=2 BENCHES="vm random_mixed" ALLOCS="$allocs" OUTDIR="$O2" "$ROOT/scripts/bench.sh" >/dev/null 2>"$TMPD/err" ||
  fail "bench.sh with BENCHES failed: $(tail -n 5 "$TMPD/err")"
got=$(cut -f1-3 "$O2/raw.tsv" | tr '\t' ':' | tr '\n' ' ')
want=""
for b in vm random_mixed; do for k in 1 2; do for a in "${A[@]}"; do want+="$b:$a:$k "; done; done; done
[[ $got == "$want" ]] || fail "run order: got '$got', want '$want'"

# A library that does not preload is caught, not measured as glibc.
echo "not a library" >"$TMPD/fake.so"
run RUNS=1 BENCHES=vm ALLOCS=mimalloc LIB_mimalloc="$TMPD/fake.so" OUTDIR="$TMPD/fake" "$ROOT/scripts/bench.sh" \
  >/dev/null 2>"$TMPD/err" || fail "bench.sh with a broken library should still finish"
grep -q 'wrong-allocator(glibc)' "$TMPD/fake/raw.tsv" || fail "a failed preload was not detected"

# The shared peers: listed only when PEERS_DIR exists; measured as themselves.
PEERS_DIR=/nonexistent run "$ROOT/scripts/bench.sh" list >"$TMPD/out" 2>&1 || fail "bench.sh list without peers"
! grep -qE '^  (mi241|mi343|snmalloc) ' "$TMPD/out" || fail "shared peers listed without their folder"
expect_exit 2 "mi241 without its folder" run PEERS_DIR=/nonexistent ALLOCS=mi241 OUTDIR="$TMPD/x" "$ROOT/scripts/bench.sh"
peers=""
for a in mi241 mi343 snmalloc; do alloc_lib "$a" >/dev/null && peers="$peers $a"; done
if [[ -n $peers ]]; then
  run RUNS=1 BENCHES=churn_tasks ALLOCS="glibc$peers" OUTDIR="$TMPD/peers" "$ROOT/scripts/bench.sh" >/dev/null \
    2>"$TMPD/err" || fail "bench.sh with the shared peers failed: $(tail -n 5 "$TMPD/err")"
  bad=$(awk -F'\t' '$4 != "ok"' "$TMPD/peers/raw.tsv")
  [[ -z $bad ]] || fail "shared peers' runs failed: $bad"
  if [[ $peers == *mi241* ]]; then
    grep -q '^## Summary: ratio to mi241' "$TMPD/peers/report.md" || fail "no ratios to mi241"
  fi
else
  echo "note: no shared peers in $PEERS_DIR, not checked"
fi

# Bad settings: exit status 2 and a message.
expect_exit 2 "unknown benchmark" run BENCHES=nope OUTDIR="$TMPD/x" "$ROOT/scripts/bench.sh"
expect_exit 2 "unknown allocator" run ALLOCS=nope OUTDIR="$TMPD/x" "$ROOT/scripts/bench.sh"
expect_exit 2 "RUNS=0" run RUNS=0 OUTDIR="$TMPD/x" "$ROOT/scripts/bench.sh"
expect_exit 2 "unknown mode" run OUTDIR="$TMPD/x" "$ROOT/scripts/bench.sh" nosuchmode
expect_exit 0 "--help" "$ROOT/scripts/bench.sh" --help
grep -q 'RUNS=3' "$TMPD/out" || fail "--help does not describe RUNS"
echo "ok (allocators: $allocs)"
