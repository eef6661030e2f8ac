#!/usr/bin/env bash
# scripts/ab.sh REV_A REV_B — is hakmem at REV_B faster than at REV_A?
#
# REV: a git revision (commit, branch, tag, HEAD~1 ...), WORKTREE (the current
# tree with its uncommitted changes), or a path to a built libhakmem.so.
# Each git revision is checked out with `git worktree add` into a temporary
# directory, built there with `make -s`, and its build/libhakmem.so copied out.
# The benchmark programs are built once from the current tree, so both sides
# run the same benchmark.  Runs are interleaved A B A B ...
#
# Environment (all optional):
#   RUNS=10          runs per side (at least 5)
#   BENCH=random_mixed   benchmark (scripts/bench.sh list); its preset parameters,
#                    plus ITERS WS ... and ARGS_<bench> as in scripts/bench.sh
#   PRESET=standard  parameter preset (standard | tiny)
#   FIGURE=key       the RESULT key compared (default: the benchmark's primary
#                    figure); e.g. FIGURE=cpu_s (process CPU time, lower is
#                    better) on a shared machine, where waiting for a core
#                    inflates wall-clock figures
#   THRESHOLD=0.5    percent: GO when B is better by at least this, NO-GO when
#                    worse by at least this, NEUTRAL in between
#   SPREAD=mad       what "noise" is, over the per-run ratios B_k/A_k - 1 (%):
#                    mad (1.4826 x median absolute deviation: a stddev that one
#                    outlier run does not dominate), stddev, or ci95 (2 standard
#                    errors of their mean)
#   OUTDIR=dir       default results/<date>-<time>-<host>-ab
#   RUN_TIMEOUT=600  seconds per run
#   HAKMEM_*         forwarded to both sides
# Verdict: WITHIN NOISE when the spread is larger than |delta|, else GO /
# NO-GO / NEUTRAL as above.  Exit status: 0, or 1 on NO-GO, 2 on errors.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$ROOT/scripts/lib/common.sh"

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  script_help
  exit 0
fi
[[ $# -eq 2 ]] || die "usage: scripts/ab.sh REV_A REV_B (see --help)"
REV_A=$1 REV_B=$2
RUNS=${RUNS:-10}
BENCH=${BENCH:-random_mixed}
PRESET=${PRESET:-standard}
THRESHOLD=${THRESHOLD:-0.5}
SPREAD=${SPREAD:-mad}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
[[ $RUNS =~ ^[0-9]+$ ]] || die "RUNS must be a number"
if ((RUNS < 5)); then
  log "ab: RUNS=$RUNS is too few for a verdict; using 5"
  RUNS=5
fi
[[ $THRESHOLD =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "THRESHOLD must be a number (percent)"
[[ $SPREAD == mad || $SPREAD == stddev || $SPREAD == ci95 ]] || die "SPREAD must be mad, stddev or ci95"
bench_defaults "$BENCH" "$PRESET" >/dev/null || die "unknown benchmark '$BENCH'"
need_python

TMP=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-ab.XXXXXX")
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  rm -rf "$TMP"
  git -C "$ROOT" worktree prune >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Build one side: leaves the library at $TMP/lib-$side.so and its description
# in DESC.
build_side() {
  local side=$1 rev=$2 dest="$TMP/lib-$1.so" desc
  if [[ $rev == WORKTREE ]]; then
    log "ab: building $side = the current tree"
    make -s -C "$ROOT" >"$TMP/build-$side.log" 2>&1 || {
      tail -n 20 "$TMP/build-$side.log" >&2
      die "building the current tree failed"
    }
    cp "$ROOT/build/libhakmem.so" "$dest"
    desc="WORKTREE ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'no commit') + uncommitted changes)"
  elif [[ -f $rev ]]; then
    cp "$rev" "$dest"
    desc="library $rev"
  else
    local sha
    sha=$(git -C "$ROOT" rev-parse --verify --quiet "$rev^{commit}") || die "'$rev' is not a git revision, WORKTREE or a file"
    local wt="$TMP/wt-$side"
    log "ab: building $side = $rev (${sha:0:12}) in a temporary worktree"
    git -C "$ROOT" worktree add --detach "$wt" "$sha" >"$TMP/wt-$side.log" 2>&1 || {
      cat "$TMP/wt-$side.log" >&2
      die "git worktree add failed for $rev"
    }
    (unset MAKEFLAGS MFLAGS MAKELEVEL && make -s -C "$wt") >"$TMP/build-$side.log" 2>&1 || {
      tail -n 20 "$TMP/build-$side.log" >&2
      die "building $rev failed"
    }
    [[ -r $wt/build/libhakmem.so ]] || die "building $rev produced no build/libhakmem.so"
    cp "$wt/build/libhakmem.so" "$dest"
    git -C "$ROOT" worktree remove --force "$wt" >/dev/null 2>&1 || true
    desc="$rev (${sha:0:12})"
  fi
  DESC=$desc
}

build_side A "$REV_A"
DESC_A=$DESC
build_side B "$REV_B"
DESC_B=$DESC
build_progs

OUT=$(result_dir ab)
mkdir -p "$OUT/logs"
prog="$ROOT/build/bench/$(bench_prog "$BENCH")"
bench_env "$BENCH" "$PRESET"
bench_args "$BENCH"
params="${RUN_ENV[*]}${BENCH_ARGV[*]:+ ${BENCH_ARGV[*]}}"
: >"$OUT/ab.tsv"
figure=${FIGURE:-} better=""
if [[ -n $figure ]]; then
  case $figure in
    *_s | *_ns | *_kb | minflt | majflt) better=lower ;;
    *) better=higher ;;
  esac
fi
log "ab: $BENCH ($params), $RUNS runs per side, interleaved A B -> $OUT"
for ((k = 1; k <= RUNS; k++)); do
  for side in A B; do
    base="$OUT/logs/$side.$k"
    idx=$((2 * k - 1))
    [[ $side == B ]] && idx=$((2 * k))
    printf '[%2d/%d] %s run %d/%d ... ' "$idx" $((2 * RUNS)) "$side" "$k" "$RUNS" >&2
    rc=0
    clean_run "$TMP/lib-$side.so" "$RUN_TIMEOUT" "${RUN_ENV[@]}" -- "$prog" "${BENCH_ARGV[@]}" \
      >"$base.out" 2>"$base.err" || rc=$?
    line=$(grep -m1 '^RESULT ' "$base.out" || true)
    if [[ $rc != 0 || -z $line ]]; then
      log "FAILED (exit $rc; see $base.err)"
      continue
    fi
    if [[ $(result_get "$line" allocator) != hakmem ]]; then
      log "FAILED: the library was not preloaded (allocator=$(result_get "$line" allocator))"
      continue
    fi
    [[ -n $figure ]] || {
      figure=$(result_get "$line" primary || echo ops_per_sec)
      better=$(result_get "$line" better || echo higher)
    }
    val=$(result_get "$line" "$figure" || echo "")
    if [[ -z $val ]]; then
      log "FAILED: no '$figure' in the RESULT line"
      continue
    fi
    printf '%s\t%s\t%s\n' "$side" "$k" "$val" >>"$OUT/ab.tsv"
    log "$figure=$(human "$val")"
  done
done
[[ -n $figure ]] || die "no run succeeded"
hakmem_env
{
  printf 'date\t%s\nhost\t%s\n' "$(date '+%Y-%m-%d %H:%M:%S %Z')" "$(host_name)"
  printf 'a\t%s\nb\t%s\nbench\t%s\nparams\t%s%s\n' "$DESC_A" "$DESC_B" "$BENCH" "$params" \
    "${HAK_ENV[*]:+ ${HAK_ENV[*]}}"
  printf 'figure\t%s\nbetter\t%s\nthreshold\t%s\nspread\t%s\n' "$figure" "$better" "$THRESHOLD" "$SPREAD"
} >"$OUT/meta.tsv"
rc=0
python3 "$ROOT/scripts/lib/stats.py" ab "$OUT" || rc=$?
echo "Results: $OUT/report.md"
exit "$rc"
