#!/usr/bin/env bash
# bench_verdict: the suite report decides a ratio by its confidence interval
# (scripts/lib/stats.py report, on synthetic runs): Student t quantiles; a ratio
# of runs paired by round and its interval, checked against the formula; a
# clearly separated pair is significant (its interval excludes 1) even where
# the runs spread more than 10 % (CV), a noisy overlapping pair is "≈" and "not
# distinguishable"; one verdict line per peer at the top of the report (time and
# peak RSS: faster/slower, smaller/larger; one round: no interval; a benchmark
# left with one paired round by a failed run is named), in verdict.txt; the same
# runs give the same report; CI_LEVEL.  (bench_runner: the lines at the end of a run.)
set -euo pipefail
# shellcheck source=scripts/lib/testlib.sh
. "$(dirname "$0")/../../scripts/lib/testlib.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"
S=(python3 "$ROOT/scripts/lib/stats.py")

# ---- Student t quantiles (tables: t(.975; 1, 2, 10) = 12.706, 4.303, 2.228; t(.95; 4) = 2.132)
got=$(PYTHONDONTWRITEBYTECODE=1 python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import stats
print(" ".join("%.3f" % stats.t_quantile(p, df) for p, df in
               ((.975, 1), (.975, 2), (.975, 10), (.95, 4), (.975, 1e9))))' "$ROOT/scripts/lib")
[[ $got == "12.706 4.303 2.228 2.132 1.960" ]] || fail "t quantiles: $got"

# ---- synthetic runs: 3 benchmarks x 3 rounds, hakmem and three peers
D=$TMPD/v
mkdir -p "$D"
printf 'date\t2000-01-01\nhost\ttesthost\nbaseline\tglibc\nbaseline2\ttcmalloc\nruns\t3\n' >"$D/meta.tsv"
# r BENCH ALLOC "V1 V2 V3" "RSS1 RSS2 RSS3": three rounds of one allocator.
r() {
  local k=0 v rss p
  read -r -a rss <<<"$4"
  case $1 in
    random_mixed | xthread) p="ops_per_sec=%s primary=ops_per_sec better=higher" ;;
    churn) p="elapsed_s=%s primary=elapsed_s better=lower" ;;
  esac
  for v in $3; do
    # shellcheck disable=SC2059 # p is the format
    printf "%s\t%s\t%d\tok\t1.0\tITERS=1\tRESULT bench=%s $p peak_rss_kb=%s\n" "$1" "$2" $((k + 1)) "$1" "$v" "${rss[k]}"
    k=$((k + 1))
  done
}
{
  # hakmem against glibc: about 2x in every round; on xthread glibc's runs spread
  # 26 % (CV), which the old rule (CV above 10 %) called "n.s."
  r random_mixed hakmem "200 210 190" "1000 1000 1000"
  r random_mixed glibc "100 104 96" "2000 2100 1900"
  r churn hakmem "1.0 1.1 0.9" "1000 1000 1000"
  r churn glibc "2.0 2.1 1.9" "2000 2100 1900"
  r xthread hakmem "44 44 44" "1000 1000 1000"
  r xthread glibc "17 15 10" "2000 2100 1900"
  # tcmalloc: overlapping, noisy
  r random_mixed tcmalloc "150 260 210" "900 1150 1000"
  r churn tcmalloc "0.8 1.3 1.0" "900 1150 1000"
  r xthread tcmalloc "30 60 45" "900 1150 1000"
  # jemalloc: twice as fast as hakmem, half its memory
  r random_mixed jemalloc "400 420 380" "500 520 480"
  r churn jemalloc "0.5 0.55 0.45" "500 520 480"
  r xthread jemalloc "88 90 86" "500 520 480"
} >"$D/raw.tsv"
"${S[@]}" report "$D" >"$TMPD/out" || fail "stats.py report failed"
M=$D/report.md

# One cell against the formula: xthread, hakmem / glibc = exp(mean d +- t(2) s(d) / sqrt 3),
# d = ln(44/17), ln(44/15), ln(44/10).
want=$(awk 'BEGIN { d[1] = log(44 / 17); d[2] = log(44 / 15); d[3] = log(44 / 10)
  m = (d[1] + d[2] + d[3]) / 3; for (i = 1; i <= 3; i++) ss += (d[i] - m) ^ 2
  h = 4.302652729749752 * sqrt(ss / 2) / sqrt(3)
  printf "%.2f [%.2f, %.2f]", exp(m), exp(m - h), exp(m + h) }')
grep -qF "| xthread | throughput [M ops/s] (\`ops_per_sec\`), higher is better | $want | 1.00 |" "$M" ||
  fail "xthread hakmem/glibc cell: want '$want': $(grep -m 1 '^| xthread |' "$M")"
# ... the old rule's case: glibc's runs spread more than 10 %, the interval still excludes 1
if [[ $want == "≈"* ]] || ! awk -v w="$want" 'BEGIN { split(w, f, /[][, ]+/); exit !(f[2] > 1) }'; then
  fail "xthread hakmem/glibc: the interval $want should exclude 1"
fi
cv=$("${S[@]}" summary 17 15 10)
[[ $cv == *cv_pct=25.* ]] || fail "glibc's xthread CV: $cv"
# the noisy peer: "≈" and an interval that holds 1
# cell BASE BENCH ALLOC: a cell of the summary of ratios to BASE (columns named by its header)
cell() {
  awk -F' *[|] *' -v t="## Summary: ratio to $1 " -v b="$2" -v a="$3" 'index($0, t) == 1 { on = 1 }
    on && /^[|] benchmark [|]/ { for (i = 1; i <= NF; i++) c[$i] = i }
    on && $2 == b { print $(c[a]); exit }' "$M"
}
[[ $(cell glibc xthread hakmem) == "$want" ]] || fail "cell(): $(cell glibc xthread hakmem)"
# the noisy pair (the second baseline, tcmalloc): "≈" with an interval that holds 1
for b in random_mixed churn xthread; do
  c=$(cell tcmalloc $b hakmem)
  if [[ $c != "≈"* ]] || ! awk -v w="$c" 'BEGIN { split(w, f, /[][, ]+/); exit !(f[2] < 1 && f[3] > 1) }'; then
    fail "$b hakmem/tcmalloc should be ≈ with an interval around 1: '$c'"
  fi
done
grep -q '≈: the interval holds 1' "$M" || fail "no note on ≈ under the summary"
! grep -q 'n\.s\.' "$M" || fail "the report still says n.s."

# ---- the verdict: at the top, one line per peer
vline() { grep -m 1 "^- \*\*hakmem vs $1\*\*: " "$M" || fail "no verdict line for $1"; }
g=$(vline glibc) t=$(vline tcmalloc) j=$(vline jemalloc)
first=$(grep -n -m 1 '^- \*\*hakmem vs ' "$M" | cut -d: -f1)
mach=$(grep -n -m 1 '^## ' "$M" | cut -d: -f1)
((first < mach && first <= 5)) || fail "the verdict is not at the top (line $first)"
[[ $(grep -c '^- \*\*hakmem vs ' "$M") == 3 ]] || fail "want 3 verdict lines"
[[ $g =~ time\ 0\.[0-9]+×\ \[0\.[0-9]+,\ 0\.[0-9]+\]\ —\ \*\*faster\*\*\; ]] ||
  fail "verdict against glibc (time): $g"
[[ $g == *"; peak RSS 0.50× [0."*", 0."*"] — **smaller** (3 benchmarks × 3 rounds)" ]] ||
  fail "verdict against glibc (peak RSS): $g"
[[ $t =~ time\ [0-9.]+×\ \[0\.[0-9]+,\ [1-9][0-9.]*\]\ —\ not\ distinguishable\ at\ 3\ rounds ]] ||
  fail "verdict against tcmalloc (time): $t"
[[ $t == *"peak RSS "*" — not distinguishable at 3 rounds"* ]] || fail "verdict against tcmalloc (RSS): $t"
[[ $j == *"time 2.00× ["*"] — **slower**"*"peak RSS 2.00× ["*"] — **larger**"* ]] ||
  fail "verdict against jemalloc: $j"
# the time line against glibc, all of it: the geometric mean of the three benchmarks'
# means of paired ln(time ratio), interval with Welch-Satterthwaite's df: df = 2.14, t = 4.05
# (worked by hand once; a regression value now)
[[ $g == "- **hakmem vs glibc**: time 0.43× [0.34, 0.53] — **faster**; peak RSS 0.50× [0.48, 0.52] — **smaller** (3 benchmarks × 3 rounds)" ]] ||
  fail "verdict line against glibc changed: $g"
grep -q '^Verdict: .*95 % confidence interval' "$D/verdict.txt" || fail "verdict.txt has no heading"
grep -q '^  hakmem vs glibc: time 0.43× \[0.34, 0.53\] — faster' "$D/verdict.txt" || fail "verdict.txt line"
grep -q '^peer time time_low time_high' "$D/verdict.dat" || fail "verdict.dat header"
head -n 1 "$D/ratio.dat" | grep -q '^bench hakmem hakmem_low hakmem_high glibc ' || fail "ratio.dat has no intervals"
if command -v gnuplot >/dev/null 2>&1; then
  for p in ratio.png verdict.png peak_rss.png; do
    [[ $(head -c 4 "$D/$p" 2>/dev/null | od -An -c | tr -d ' ') == '211PNG' ]] || fail "$p is not a PNG"
  done
  grep -q '!\[hakmem relative to each peer\](verdict.png)' "$M" || fail "verdict.png not in the report"
fi

# ---- the same runs give the same report (no random numbers)
cp -r "$D" "$TMPD/v2"
"${S[@]}" report "$TMPD/v2" >/dev/null || fail "second report failed"
for f in report.md verdict.txt ratio.dat verdict.dat; do
  cmp -s "$D/$f" "$TMPD/v2/$f" || fail "$f differs between two reports of the same runs"
done

# ---- CI_LEVEL (meta ci_level): an 80 % interval lies inside the 95 % one
printf 'ci_level\t80\n' >>"$TMPD/v2/meta.tsv"
"${S[@]}" report "$TMPD/v2" >/dev/null || fail "report at 80 % failed"
g80=$(grep -m 1 '^- \*\*hakmem vs glibc' "$TMPD/v2/report.md")
grep -q 'its 80 % confidence interval' "$TMPD/v2/report.md" || fail "the level is not stated"
lo95=${g#*\[} lo80=${g80#*\[}
awk -v a="${lo95%%,*}" -v b="${lo80%%,*}" 'BEGIN { exit !(b > a) }' || fail "80 % interval not narrower: $g80"

# ---- one round: the ratio without an interval
D1=$TMPD/one
mkdir -p "$D1"
printf 'date\t2000-01-01\nhost\ttesthost\nbaseline\tglibc\n' >"$D1/meta.tsv"
{
  r random_mixed hakmem "200" "1000"
  r random_mixed glibc "100" "2000"
} >"$D1/raw.tsv"
"${S[@]}" report "$D1" >/dev/null || fail "report of one round failed"
no=" — no interval from one round (RUNS=2 or more)"
grep -qxF -- "- **hakmem vs glibc**: time 0.50×$no; peak RSS 0.50×$no (1 benchmark × 1 round)" "$D1/report.md" ||
  fail "one round: $(grep -m 1 'hakmem vs glibc' "$D1/report.md")"
grep -q '^| random_mixed | .* | 2.00 (1 round) | 1.00 |$' "$D1/report.md" || fail "one round: summary cell"

# ---- a failed run: its round is not paired; a benchmark left with one round is named
{
  r random_mixed hakmem "200 210 190" "1000 1000 1000"
  r random_mixed glibc "100 104 96" "2000 2100 1900"
  r churn hakmem "1.0 1.1 0.9" "1000 1000 1000"
  r churn glibc "2.0" "2000"
  printf 'churn\tglibc\t%d\texit-1\t1.0\tITERS=1\t\n' 2 3
} >"$D1/raw.tsv"
"${S[@]}" report "$D1" >/dev/null || fail "report with failed runs failed"
grep -q '^- \*\*hakmem vs glibc\*\*: time 0.50× \[.*\] — \*\*faster\*\*; peak RSS .* (1 benchmark × 3 rounds; left out, one paired round: churn)$' \
  "$D1/report.md" || fail "failed runs: $(grep -m 1 'hakmem vs glibc' "$D1/report.md")"
grep -q '^| churn | .* | 0.50 (1 round) | 1.00 |$' "$D1/report.md" || fail "failed runs: churn cell"

# ---- the runner refuses a bad level before doing any work
expect_exit 2 "CI_LEVEL=100" env SETUP=0 NO_BUILD=1 CI_LEVEL=100 OUTDIR="$TMPD/x" "$ROOT/scripts/bench.sh"
expect_exit 2 "CI_LEVEL=abc" env SETUP=0 NO_BUILD=1 CI_LEVEL=abc OUTDIR="$TMPD/x" "$ROOT/scripts/bench.sh"
[[ ! -e $TMPD/x ]] || fail "bench.sh wrote results with a bad CI_LEVEL"
echo "ok"
