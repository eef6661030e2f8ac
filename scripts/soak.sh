#!/usr/bin/env bash
# scripts/soak.sh — long run of the mixed workload in ONE process, sampling
# throughput and RSS after every step.
#
# Environment (all optional):
#   DURATION_SEC=600   how long to run (the prototype's soak: DURATION_SEC=3600)
#   STEP_ITERS=20M     operations per step (one sample per step)
#   WS=400 MIN=16 MAX=1024 SEED=42   workload (as random_mixed)
#   ALLOC=hakmem       hakmem | glibc | mimalloc | jemalloc | tcmalloc (or LIB_<name>=path)
#   OUTDIR=dir         default results/<date>-<time>-<host>-soak-<alloc>
#   NO_BUILD=1         do not run make
#   HAKMEM_*           forwarded
# Writes soak.csv (step,t_s,ops,ops_per_sec,rss_kb,cpu_ops_per_sec), summary.md, soak.png and
# prints the summary: peak RSS, steady RSS, RSS drift, first vs last window
# throughput, CV.  Definitions: docs/BENCH_SUITE.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$ROOT/scripts/lib/common.sh"

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  script_help
  exit 0
fi
[[ $# -eq 0 ]] || die "no arguments expected (settings go in the environment; see --help)"

DURATION_SEC=${DURATION_SEC:-600}
STEP_ITERS=${STEP_ITERS:-20M}
ALLOC=${ALLOC:-hakmem}
[[ $DURATION_SEC =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "DURATION_SEC must be a number of seconds"
need_python
build_progs
if [[ $ALLOC == hakmem ]]; then build_hakmem || die "hakmem does not build"; fi
lib=$(alloc_lib "$ALLOC") || die "allocator '$ALLOC' not found (scripts/setup.sh installs the peers)"

OUT=$(result_dir "soak-$ALLOC")
mkdir -p "$OUT"
env_words=("DURATION_SEC=$DURATION_SEC" "STEP_ITERS=$STEP_ITERS")
for v in WS MIN MAX SEED TOUCH; do [[ -n ${!v:-} ]] && env_words+=("$v=${!v}"); done
hakmem_env
{
  printf 'date\t%s\nhost\t%s\nalloc\t%s\nlib\t%s\n' "$(date '+%Y-%m-%d %H:%M:%S %Z')" "$(host_name)" "$ALLOC" \
    "${lib:-no preload}"
  printf 'params\t%s%s\nstep_iters\t%s\n' "${env_words[*]}" "${HAK_ENV[*]:+ ${HAK_ENV[*]}}" "$STEP_ITERS"
} >"$OUT/meta.tsv"

log "soak: $ALLOC for ${DURATION_SEC}s, ${STEP_ITERS} ops per step -> $OUT"
raw="$OUT/steps.txt"
rc=0
clean_run "$lib" "$(awk -v d="$DURATION_SEC" 'BEGIN { printf "%d", d * 1.5 + 120 }')" "${env_words[@]}" -- \
  "$ROOT/build/bench/random_mixed" >"$raw" 2>"$OUT/stderr.txt" &
pid=$!
start=$(date +%s)
while kill -0 "$pid" 2>/dev/null; do
  sleep 1
  now=$(date +%s)
  if (((now - start) % 10 == 0)); then
    last=$(grep '^STEP ' "$raw" | tail -n 1 || true)
    [[ -n $last ]] && log "soak: ${last#STEP }"
  fi
done
wait "$pid" || rc=$?
if [[ $rc != 0 ]]; then
  tail -n 5 "$OUT/stderr.txt" >&2 || true
  die "random_mixed failed (exit $rc) under $ALLOC"
fi
{
  echo "step,t_s,ops,ops_per_sec,rss_kb,cpu_ops_per_sec"
  awk '/^STEP / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                  printf "%s,%s,%s,%s,%s,%s\n", v["step"], v["t_s"], v["ops"], v["ops_per_sec"], v["rss_kb"],
                         v["cpu_ops_per_sec"] }' "$raw"
} >"$OUT/soak.csv"
result=$(grep -m1 '^RESULT ' "$raw" || true)
printf 'peak_rss_kb\t%s\n' "$(result_get "$result" peak_rss_kb || echo '')" >>"$OUT/meta.tsv"
echo "$result" >"$OUT/result.txt"
python3 "$ROOT/scripts/lib/stats.py" soak "$OUT"
echo "Results: $OUT/summary.md"
