#!/usr/bin/env bash
# bench_stats: the runners' statistics (scripts/lib/stats.py) on known numbers —
# median/mean/stddev/CV exactly, the suite report's paired ratios and runs.csv, the
# A/B verdicts and exit status, the soak summary's drift and window figures.
set -euo pipefail
# shellcheck source=scripts/lib/testlib.sh
. "$(dirname "$0")/../../scripts/lib/testlib.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"
S=(python3 "$ROOT/scripts/lib/stats.py")

eq() { # what got want
  [[ $2 == "$3" ]] || fail "$1: got '$2', want '$3'"
}
eq "summary 1 2 3 4" "$("${S[@]}" summary 1 2 3 4)" \
  "n=4 median=2.5 mean=2.5 stddev=1.290994449 cv_pct=51.63977795 min=1 max=4"
eq "summary 10 20 30" "$("${S[@]}" summary 10 20 30)" "n=3 median=20 mean=20 stddev=10 cv_pct=50 min=10 max=30"
eq "summary 5 1 3 (unsorted)" "$("${S[@]}" summary 5 1 3)" "n=3 median=3 mean=3 stddev=2 cv_pct=66.66666667 min=1 max=5"
eq "summary 7 (one value)" "$("${S[@]}" summary 7)" "n=1 median=7 mean=7 stddev=0 cv_pct=0 min=7 max=7"
eq "summary 2.5 3.5" "$("${S[@]}" summary 2.5 3.5)" "n=2 median=3 mean=3 stddev=0.7071067812 cv_pct=23.57022604 min=2.5 max=3.5"
expect_exit 2 "summary of a non-number" "${S[@]}" summary 1 x
expect_exit 2 "summary of nothing" "${S[@]}" summary

# ---- suite report on a synthetic raw.tsv
# results DIR PARAMS NAME VALUE...: D=DIR with a meta.tsv (date, host, the
# NAME VALUE pairs); the runs written with r have parameters PARAMS.
results() {
  D=$1 P=$2
  mkdir -p "$D"
  {
    printf 'date\t2000-01-01\nhost\ttesthost\n'
    printf '%s\t%s\n' "${@:3}"
  } >"$D/meta.tsv"
}
# One raw.tsv line: bench alloc run status RESULT-line.
r() { printf '%s\t%s\t%s\t%s\t1.0\t%s\t%s\n' "$1" "$2" "$3" "$4" "$P" "$5"; }
results "$TMPD/report" ITERS=1 baseline mimalloc
{
  R=" primary=ops_per_sec better=higher peak_rss_kb=2048 minflt=100"
  r random_mixed mimalloc 1 ok "RESULT bench=random_mixed ops_per_sec=100000000$R"
  r random_mixed hakmem 1 ok "RESULT bench=random_mixed ops_per_sec=50000000$R"
  r random_mixed mimalloc 2 ok "RESULT bench=random_mixed ops_per_sec=110000000$R"
  r random_mixed hakmem 2 ok "RESULT bench=random_mixed ops_per_sec=60000000$R"
  r random_mixed mimalloc 3 ok "RESULT bench=random_mixed ops_per_sec=120000000$R"
  r random_mixed hakmem 3 ok "RESULT bench=random_mixed ops_per_sec=70000000$R"
  r random_mixed hakmem 4 exit-139 ""
  F=" primary=rss_final_kb better=lower peak_rss_kb=4096 minflt=7"
  r fragment mimalloc 1 ok "RESULT bench=fragment rss_final_kb=1000$F"
  r fragment hakmem 1 ok "RESULT bench=fragment rss_final_kb=1500$F extra_key=5"
} >"$D/raw.tsv"
"${S[@]}" report "$D" >"$TMPD/report.out" || fail "stats.py report failed"
[[ -s $D/report.md && -s $D/runs.csv ]] || fail "report.md or runs.csv missing"
# ratio: the geometric mean of the rounds' ratios 0.5, 60/110 and 70/120 (run 4 has no pair);
# interval exp(mean +- t(2) s / sqrt 3) of their logs (bench_verdict checks the intervals)
grep -q '^| hakmem | 60.00 | 60.00 | 10.00 | 16.67 % | 0.542 \[0.447, 0.657\] | 2.0 | 100 | 3/4 |$' "$D/report.md" ||
  fail "random_mixed row of hakmem wrong: $(grep -m 1 '^| hakmem' "$D/report.md")"
grep -q '^| mimalloc | 110.00 | 110.00 | 10.00 | 9.09 % | 1.000 | 2.0 | 100 | 3/3 |$' "$D/report.md" ||
  fail "random_mixed row of mimalloc wrong"
grep -q '^| fragment | RSS after regrowth .* | 1.50 (1 round) | 1.00 |$' "$D/report.md" || fail "summary ratio of fragment wrong"
grep -q 'lower is better' "$D/report.md" || fail "no 'lower is better' note"
grep -q '^| random_mixed | hakmem | 4 | exit-139 |$' "$D/report.md" || fail "failed run not listed"
eq "runs.csv rows" "$(wc -l <"$D/runs.csv")" 10
hdr=$(head -n 1 "$D/runs.csv")
grep -q '^bench,alloc,run,status,wall_s,params,primary,better,value,' <<<"$hdr" || fail "runs.csv header"
grep -q 'extra_key' <<<"$hdr" || fail "runs.csv lacks a key of one run"
grep -q '^random_mixed,hakmem,2,ok,1.0,ITERS=1,ops_per_sec,higher,60000000,' "$D/runs.csv" || fail "runs.csv row"
cmp -s "$TMPD/report.out" "$D/report.md" || fail "printed report differs from report.md"

# ---- a lower-is-better time and a second baseline (BASELINE2, here mi241)
results "$TMPD/report2" THREADS=2 baseline mimalloc baseline2 mi241
{
  C=" primary=elapsed_s better=lower peak_rss_kb=10240 minflt=5 peak_live_bytes=5242880"
  r churn mimalloc 1 ok "RESULT bench=churn elapsed_s=2.0$C"
  r churn mi241 1 ok "RESULT bench=churn elapsed_s=1.0$C"
  r churn hakmem 1 ok "RESULT bench=churn elapsed_s=1.5$C"
} >"$D/raw.tsv"
"${S[@]}" report "$D" >/dev/null || fail "stats.py report (churn) failed"
grep -q '^| churn | elapsed time \[s\] (`elapsed_s`), lower is better | 0.75 (1 round) | 1.00 | 0.50 (1 round) |$' \
  "$D/report.md" ||
  fail "churn summary ratios to mimalloc wrong: $(grep -m 1 '^| churn |' "$D/report.md")"
grep -q '^## Summary: ratio to mi241' "$D/report.md" || fail "no summary against the second baseline"
grep -q '^| churn | elapsed time .* | 1.50 (1 round) | 2.00 (1 round) | 1.00 |$' "$D/report.md" ||
  fail "churn ratios to mi241 wrong"
grep -q '^| hakmem | 1.500 | 1.500 | 0.000 | 0.00 % | 0.750 (1 round) | 1.500 (1 round) | 10.0 | 5 | 1/1 |$' \
  "$D/report.md" ||
  fail "churn row of hakmem wrong: $(grep -m 1 '^| hakmem' "$D/report.md")"
grep -q '^| hakmem | .* | 5.0 |' "$D/report.md" || fail "peak_live_bytes not shown in MB"
printf 'baseline2\tnone\n' >>"$D/meta.tsv"
"${S[@]}" report "$D" >/dev/null || fail "stats.py report (churn, no second baseline) failed"
! grep -q 'ratio to mi241' "$D/report.md" || fail "a second baseline that was not measured is shown"

# ---- A/B verdicts
ab() { # name better A-values B-values want-verdict want-exit
  local d=$TMPD/ab-$1 i=1 rc=0 v
  mkdir -p "$d"
  printf 'figure\tops_per_sec\nbetter\t%s\nthreshold\t0.5\n' "$2" >"$d/meta.tsv"
  : >"$d/ab.tsv"
  for v in $3; do printf 'A\t%d\t%s\n' $((i++)) "$v" >>"$d/ab.tsv"; done
  i=1
  for v in $4; do printf 'B\t%d\t%s\n' $((i++)) "$v" >>"$d/ab.tsv"; done
  "${S[@]}" ab "$d" >"$d/out" || rc=$?
  grep -q "^AB verdict=$5 " "$d/out" || fail "A/B $1: want $5, got: $(grep '^AB ' "$d/out")"
  [[ $rc == "$6" ]] || fail "A/B $1: exit status $rc, want $6"
}
ab go higher "100 101 99 100 100" "110 111 109 110 110" GO 0
ab nogo higher "100 101 99 100 100" "90 91 89 90 90" NO-GO 1
ab neutral higher "100 101 99 100 100" "100.1 101.1 99.1 100.1 100.1" NEUTRAL 0
ab noise higher "100 100 100 100 100" "102 90 115 85 101" WITHIN_NOISE 0
ab lower-go lower "100 101 99 100 100" "90 91 89 90 90" GO 0
grep -q 'delta (B/A - 1, medians): \*\*+10.00 %\*\*' "$TMPD/ab-go/out" || fail "A/B delta text"

# ---- soak summary: t = 1..100 s, RSS = 1000 + t kB, ops 1e6 before t = 50 and 2e6 after
d=$TMPD/soak
mkdir -p "$d"
printf 'alloc\tx\nstep_iters\t1\n' >"$d/meta.tsv"
{
  echo "step,t_s,ops,ops_per_sec,rss_kb"
  for t in $(seq 1 100); do
    if ((t < 50)); then o=1000000; else o=2000000; fi
    echo "$t,$t,1,$o,$((1000 + t))"
  done
} >"$d/soak.csv"
"${S[@]}" soak "$d" >"$d/out" || fail "stats.py soak failed"
line=$(grep '^SOAK ' "$d/out")
# warm-up = 10 s -> first steady sample t = 11 (RSS 1011), last 1100: drift 89/1011;
# steady = median of 1011..1100 = 1055.5, printed 1056.
has_keys "$line" rss_drift_pct ops_delta_pct peak_rss_kb steady_rss_kb || fail "soak keys"
[[ " $line " == *" rss_drift_pct=8.803 "* ]] || fail "soak drift: $line"
[[ " $line " == *" ops_delta_pct=100.000 "* ]] || fail "soak first/last window: $line"
[[ " $line " == *" peak_rss_kb=1100 "* ]] || fail "soak peak: $line"
[[ " $line " == *" steady_rss_kb=1056 "* && " $line " == *" samples=100 "* ]] || fail "soak steady: $line"
echo "ok"
