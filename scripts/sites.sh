#!/usr/bin/env bash
# scripts/sites.sh — the call-site learning proof: bench/sites run with
# learning on (HAKMEM_LEARN=1), with each fixed strategy forced for every
# site (HAKMEM_LEARN_FORCE=cache|release|decommit|prefault), with hakmem's
# default, and under the peers, interleaved run by run.
#
# Environment: RUNS=5, ITERS (bench/sites iterations, default 2000),
#   CONFIGS="learn cache release decommit prefault default glibc mimalloc jemalloc tcmalloc",
#   HAKMEM_PROFILE and other HAKMEM_* are forwarded, OUTDIR (default results/<date>-<time>-<host>-sites).
# Prints a Markdown table: median time, CV, peak RSS, minor faults (in all
# and by kind of site, measured by bench/sites around each call), and the
# verdict against the issue's bar (time <= 1.05 x the fastest fixed strategy,
# peak RSS <= 1.10 x the leanest fixed strategy).  The defaults take about
# 19 minutes.
#
#   scripts/sites.sh          run the experiment
#   scripts/sites.sh --help   this text
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$ROOT/scripts/lib/common.sh"
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  script_help
  exit 0
fi
[[ $# -eq 0 ]] || die "no arguments expected (settings go in the environment; see --help)"
RUNS=${RUNS:-5}
ITERS=${ITERS:-2000}
CONFIGS=${CONFIGS:-"learn cache release decommit prefault populate default glibc mimalloc jemalloc tcmalloc"}
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[[ ${NO_BUILD:-0} == 1 ]] || { make -s -C "$ROOT" all bench-progs >/dev/null || die "build failed"; }
OUT=${OUTDIR:-$ROOT/results/$(date +%Y%m%d-%H%M%S)-$(hostname)-sites}
mkdir -p "$OUT"
HAK=${LIB_hakmem:-$ROOT/build/libhakmem.so}
hak_env=()
while IFS='=' read -r k v; do [[ $k == HAKMEM_* && $k != HAKMEM_LEARN && $k != HAKMEM_LEARN_FORCE ]] && hak_env+=("$k=$v"); done < <(env)

run_one() {   # config -> RESULT line
  local c=$1 pre=() lib
  case $c in
    learn) pre=("LD_PRELOAD=$HAK" HAKMEM_LEARN=1) ;;
    cache | release | decommit | prefault | populate) pre=("LD_PRELOAD=$HAK" "HAKMEM_LEARN_FORCE=$c") ;;
    default) pre=("LD_PRELOAD=$HAK") ;;
    glibc) pre=() ;;
    *) lib=$(alloc_lib "$c") || return 1; pre=("LD_PRELOAD=$lib") ;;
  esac
  env -i PATH="$PATH" "${hak_env[@]}" "${pre[@]}" "$ROOT/build/bench/sites" --iters="$ITERS" | grep '^RESULT'
}

: > "$OUT/runs.tsv"
for r in $(seq 1 "$RUNS"); do
  for c in $CONFIGS; do
    log "sites: run $r/$RUNS $c"
    line=$(run_one "$c") || { log "sites: $c unavailable"; continue; }
    t=$(sed -n 's/.* time_s=\([0-9.]*\).*/\1/p' <<<"$line")
    rss=$(sed -n 's/.* peak_rss_kb=\([0-9]*\).*/\1/p' <<<"$line")
    flt=$(sed -n 's/.* minflt=\([0-9]*\).*/\1/p' <<<"$line")
    kinds=""
    for k in hot oneshot grower longlived; do kinds+=$'\t'$(sed -n "s/.* minflt_$k=\([0-9]*\).*/\1/p" <<<"$line"); done
    printf '%s\t%s\t%s\t%s\t%s%s\n' "$c" "$r" "$t" "$rss" "$flt" "$kinds" >> "$OUT/runs.tsv"
  done
done
python3 - "$OUT/runs.tsv" <<'PY' | tee "$OUT/report.md"
import sys, statistics as st
rows = [l.split('\t') for l in open(sys.argv[1]).read().split('\n') if l]
cfgs = []
data = {}
kinds = {}
for row in rows:
    c, r, t, rss, flt = row[:5]
    if c not in data: cfgs.append(c); data[c] = ([], [], []); kinds[c] = [[], [], [], []]
    data[c][0].append(float(t)); data[c][1].append(int(rss)); data[c][2].append(int(flt))
    for i, v in enumerate(row[5:9]):
        if v: kinds[c][i].append(int(v))
med = {c: (st.median(v[0]), st.median(v[1]), st.median(v[2])) for c, v in data.items()}
def cv(v): return 100 * st.stdev(v) / st.mean(v) if len(v) > 1 and st.mean(v) else 0.0
def kmed(c, i): return f"{st.median(kinds[c][i]):.0f}" if kinds[c][i] else "-"
print("| config | time s (median) | CV % | peak RSS MiB (median) | minor faults (median) | faults hot / oneshot / grower / longlived | runs |")
print("|---|---|---|---|---|---|---|")
for c in cfgs:
    print(f"| {c} | {med[c][0]:.3f} | {cv(data[c][0]):.1f} | {med[c][1]/1024:.1f} | {med[c][2]} | {' / '.join(kmed(c, i) for i in range(4))} | {len(data[c][0])} |")
fixed = [c for c in ("cache", "release", "decommit", "prefault", "populate") if c in med]
if "learn" in med and fixed:
    fastest = min(fixed, key=lambda c: med[c][0]); leanest = min(fixed, key=lambda c: med[c][1])
    tr = med["learn"][0] / med[fastest][0]; rr = med["learn"][1] / med[leanest][1]
    print()
    print(f"learning: time {tr:.2f} x the fastest fixed strategy ({fastest}), bar 1.05: {'met' if tr <= 1.05 else 'NOT met'}; "
          f"peak RSS {rr:.2f} x the leanest ({leanest}), bar 1.10: {'met' if rr <= 1.10 else 'NOT met'}")
PY
log "sites: report in $OUT/report.md"
