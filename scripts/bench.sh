#!/usr/bin/env bash
# scripts/bench.sh — hakmem against its peers, in one run (also: make bench).
#
#   scripts/bench.sh [suite]     the benchmark suite (default)
#   scripts/bench.sh syscalls    the syscall budget (MODE=syscalls does the same)
#   scripts/bench.sh list        benchmarks, allocators found, defaults
#   scripts/bench.sh --help
#
# Environment (all optional):
#   RUNS=3            runs per benchmark and allocator (RUNS=10: the full measurement)
#   BENCHES="..."     benchmarks to run (default: all; see `list`)
#   ALLOCS="..."      allocators (default: hakmem glibc mimalloc jemalloc tcmalloc, and
#                     mi241 mi343 snmalloc when ../shared/peers is beside the checkout)
#   PRESET=standard   parameter set: standard (the prototype's shapes, every timed
#                     run 0.3 s or longer) or tiny (smoke test)
#   MIN_RUN_SEC=0.3   vm, vm_cold, larson and xthread repeat their work in the
#                     process until a run has lasted this long (DURATION_SEC; PRESET=standard only;
#                     0: off)
#   CI_LEVEL=95       confidence level (%) of the ratios' intervals: a ratio (runs
#                     paired by round, Student t interval of the paired log ratios)
#                     whose interval holds 1 is shown with "≈" (not distinguishable);
#                     the report opens with one verdict line per peer, hakmem's
#                     geometric mean over the benchmarks with its interval, also
#                     printed at the end of the run (docs/BENCH_SUITE.md, "Reading
#                     the report")
#   BASELINE=mimalloc the allocator ratios are taken against
#   BASELINE2=mi241   a second ratio column and summary, when it was measured
#   OUTDIR=dir        where to write (default results/<date>-<time>-<host>[-syscalls])
#   SETUP=auto        auto: run scripts/setup.sh --bench (compiler, python3, git,
#                     gnuplot, strace, the peers) when a peer is missing and we
#                     are root; 1: always run it; 0: never
#   NO_BUILD=1        do not run make (use the existing build/)
#   RUN_TIMEOUT=600   seconds before a run is killed (counted as failed)
#   ARGS_<bench>="--opt=v ..."   extra command-line arguments for one benchmark
#   ITERS WS THREADS MIN MAX SEED ...  forwarded to every selected benchmark
#                     program (they replace the preset's values)
#   HAKMEM_*          forwarded to every run
#   LIB_<alloc>=path  use this library for an allocator instead of searching
# Syscall mode: SYSCALL_ITERS=200M (long run), SYSCALL_SHORT (short run,
#   default a tenth of SYSCALL_ITERS), SYSCALL_STRACE_HAKMEM=1 (also strace hakmem).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$ROOT/scripts/lib/common.sh"
STATS="$ROOT/scripts/lib/stats.py"


MODE_ARG=${1:-${MODE:-suite}}
case $MODE_ARG in
  -h | --help | help)
    script_help
    exit 0
    ;;
  suite | syscalls | list) ;;
  *)
    log "${0##*/}: unknown mode '$MODE_ARG' (suite, syscalls, list, --help)"
    exit 2
    ;;
esac
[[ $# -le 1 ]] || die "too many arguments (settings go in the environment; see --help)"

RUNS=${RUNS:-3}
PRESET=${PRESET:-standard}
BASELINE=${BASELINE:-mimalloc}
BASELINE2=${BASELINE2:-mi241}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
SETUP=${SETUP:-auto}
MIN_RUN_SEC=${MIN_RUN_SEC:-0.3}
CI_LEVEL=${CI_LEVEL:-95}
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer (got '$RUNS')"
[[ $RUN_TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "RUN_TIMEOUT must be a positive integer"
[[ $PRESET == standard || $PRESET == tiny ]] || die "PRESET must be standard or tiny (got '$PRESET')"
[[ $MIN_RUN_SEC =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "MIN_RUN_SEC must be a number of seconds (got '$MIN_RUN_SEC')"
if ! [[ $CI_LEVEL =~ ^[0-9]+(\.[0-9]+)?$ ]] || ! awk -v c="$CI_LEVEL" 'BEGIN { exit !(c >= 50 && c < 100) }'; then
  die "CI_LEVEL must be a percentage from 50 to below 100 (got '$CI_LEVEL')"
fi

read -r -a BENCH_LIST <<<"${BENCHES:-${ALL_BENCHES[*]}}"
read -r -a ALLOC_LIST <<<"${ALLOCS:-${ALL_ALLOCS[*]}}"
for b in "${BENCH_LIST[@]}"; do
  bench_defaults "$b" standard >/dev/null || die "unknown benchmark '$b' (known: ${ALL_BENCHES[*]})"
done
for a in "${ALLOC_LIST[@]}"; do
  [[ $a =~ ^[A-Za-z0-9_]+$ ]] || die "bad allocator name '$a'"
  libvar="LIB_$a"
  [[ " ${ALL_ALLOCS[*]} " == *" $a "* || -n ${!libvar:-} ]] ||
    die "unknown allocator '$a' (known: ${ALL_ALLOCS[*]}; or set LIB_$a=path)"
done

# The benchmarks whose figure is a rate get DURATION_SEC=MIN_RUN_SEC: their
# fixed work takes a few milliseconds under some allocators (vm: 1,000 cycles),
# too short for a figure that repeats.  Not when the user set DURATION_SEC.
min_run_env() {
  [[ $PRESET == standard && -z ${DURATION_SEC:-} ]] || return 0
  awk -v s="$MIN_RUN_SEC" 'BEGIN { exit !(s + 0 > 0) }' || return 0
  case $1 in
    vm | vm_cold | larson | xthread) RUN_ENV+=("DURATION_SEC=$MIN_RUN_SEC") ;;
  esac
  return 0
}

# ---------------------------------------------------------------- peers
# Peers in ALLOCS whose library is not found; with "debian", only those that
# scripts/setup.sh installs (not the shared ones).
missing_peers() {
  local a out=()
  for a in "${ALLOC_LIST[@]}"; do
    [[ $a == hakmem || $a == glibc ]] && continue
    [[ ${1:-} == debian && " ${SHARED_PEERS[*]} " == *" $a "* ]] && continue
    alloc_lib "$a" >/dev/null || out+=("$a")
  done
  echo "${out[*]}"
}
absent=$(missing_peers)
if [[ $SETUP == 1 || ($SETUP == auto && -n $(missing_peers debian) && $(id -u) == 0) ]]; then
  log "running scripts/setup.sh${absent:+ (missing: $absent)}"
  "$ROOT/scripts/setup.sh" --bench >&2 || log "warning: scripts/setup.sh failed; continuing with what is installed"
  absent=$(missing_peers)
fi
if [[ $MODE_ARG == syscalls ]] && ! command -v strace >/dev/null 2>&1; then
  log "warning: strace is not installed: peers cannot be measured in syscall mode"
fi

# ---------------------------------------------------------------- build
need_python
build_progs
hak_ok=1
if [[ " ${ALLOC_LIST[*]} " == *" hakmem "* ]] && ! build_hakmem; then
  hak_ok=0
  absent="hakmem${absent:+ $absent}"
fi

ACTIVE=()
declare -A LIB=()
for a in "${ALLOC_LIST[@]}"; do
  if [[ $a == hakmem && $hak_ok == 0 ]]; then continue; fi
  if lib=$(alloc_lib "$a"); then
    ACTIVE+=("$a")
    LIB[$a]=$lib
  fi
done
present="${ACTIVE[*]}"
log "allocators present: ${present:-none}${absent:+; absent (skipped): $absent}"
[[ ${#ACTIVE[@]} -gt 0 ]] || die "no allocator to measure"

if [[ $MODE_ARG == list ]]; then
  echo "benchmarks (PRESET=$PRESET defaults):"
  for b in "${ALL_BENCHES[@]}"; do
    RUN_ENV=()
    min_run_env "$b"
    printf '  %-13s %s%s\n' "$b" "$(bench_defaults "$b" "$PRESET")" "${RUN_ENV[*]:+ ${RUN_ENV[*]}}"
  done
  echo "allocators:"
  for a in "${ALL_ALLOCS[@]}"; do
    if [[ -n ${LIB[$a]+x} ]]; then
      printf '  %-9s %s (%s)\n' "$a" "${LIB[$a]:-no preload}" "$(alloc_version "$a")"
    else
      printf '  %-9s absent\n' "$a"
    fi
  done
  exit 0
fi

# ---------------------------------------------------------------- output
SUFFIX=""
[[ $MODE_ARG == syscalls ]] && SUFFIX=syscalls
OUT=$(result_dir "$SUFFIX")
mkdir -p "$OUT/logs"
hakmem_env
user_env=()
for v in "${BENCH_VARS[@]}"; do [[ -n ${!v:-} ]] && user_env+=("$v=${!v}"); done
{
  printf 'date\t%s\n' "$(date '+%Y-%m-%d %H:%M:%S %Z')"
  printf 'host\t%s\n' "$(host_name)"
  printf 'machine\t%s, %s CPUs, %s MB RAM\n' \
    "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || uname -m)" "$(nproc)" \
    "$(awk '/^MemTotal/ { printf "%d", $2 / 1024 }' /proc/meminfo 2>/dev/null)"
  printf 'kernel\t%s\n' "$(uname -sr)"
  printf 'thp\t%s\n' "$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo '?')"
  printf 'runs\t%s\n' "$RUNS"
  printf 'preset\t%s\n' "$PRESET"
  printf 'order\tinterleaved: for each benchmark, run k of every allocator (%s) before run k+1\n' "$present"
  printf 'baseline\t%s\n' "$BASELINE"
  printf 'baseline2\t%s\n' "$BASELINE2"
  printf 'ci_level\t%s\n' "$CI_LEVEL"
  printf 'hakmem_env\t%s\n' "${HAK_ENV[*]:-}"
  printf 'user_env\t%s\n' "${user_env[*]:-}"
  printf 'command\t%s\n' "${MODE:+MODE=$MODE }RUNS=$RUNS${BENCHES:+ BENCHES=\"$BENCHES\"}${ALLOCS:+ ALLOCS=\"$ALLOCS\"} scripts/bench.sh $MODE_ARG"
  printf 'absent\t%s\n' "$absent"
  for a in "${ACTIVE[@]}"; do
    printf 'lib_%s\t%s\n' "$a" "${LIB[$a]}"
    printf 'ver_%s\t%s\n' "$a" "$(alloc_version "$a")"
  done
} >"$OUT/meta.tsv"

LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')
if awk -v l="$LOAD_BEFORE" -v n="$(nproc)" 'BEGIN { exit !(l + 0 > 0.3 * n) }'; then
  log "warning: the machine is busy (load average $LOAD_BEFORE on $(nproc) CPUs): expect noisy figures"
fi

# ---------------------------------------------------------------- suite
run_suite() {
  local total=$((${#BENCH_LIST[@]} * RUNS * ${#ACTIVE[@]})) n=0 b a k prog base rc status line t0 t1 wall
  : >"$OUT/raw.tsv"
  log "suite: ${#BENCH_LIST[@]} benchmarks x ${#ACTIVE[@]} allocators x $RUNS runs = $total runs -> $OUT"
  for b in "${BENCH_LIST[@]}"; do
    prog="$ROOT/build/bench/$(bench_prog "$b")"
    bench_env "$b" "$PRESET"
    min_run_env "$b"
    bench_args "$b"
    local params="${RUN_ENV[*]}${BENCH_ARGV[*]:+ ${BENCH_ARGV[*]}}"
    for ((k = 1; k <= RUNS; k++)); do
      for a in "${ACTIVE[@]}"; do
        n=$((n + 1))
        base="$OUT/logs/$b.$a.$k"
        printf '[%3d/%d] %-13s %-9s run %d/%d ... ' "$n" "$total" "$b" "$a" "$k" "$RUNS" >&2
        t0=$(date +%s.%N)
        rc=0
        clean_run "${LIB[$a]}" "$RUN_TIMEOUT" "${RUN_ENV[@]}" -- "$prog" "${BENCH_ARGV[@]}" \
          >"$base.out" 2>"$base.err" || rc=$?
        t1=$(date +%s.%N)
        wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
        line=$(grep -m1 '^RESULT ' "$base.out" || true)
        status=ok
        if [[ $rc == 124 || $rc == 137 ]]; then
          status="timeout"
        elif [[ $rc != 0 ]]; then
          status="exit-$rc"
        elif [[ -z $line ]]; then
          status="no-result"
        elif [[ $(result_get "$line" allocator) != "$(alloc_family "$a")" && " ${ALL_ALLOCS[*]} " == *" $a "* ]]; then
          status="wrong-allocator($(result_get "$line" allocator))"
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$b" "$a" "$k" "$status" "$wall" "$params" "$line" >>"$OUT/raw.tsv"
        if [[ $status == ok ]]; then
          local prim val
          prim=$(result_get "$line" primary || echo ops_per_sec)
          val=$(result_get "$line" "$prim" || echo "?")
          log "$prim=$(human "$val") (${wall}s)"
        else
          log "FAILED: $status (see $base.err)"
          tail -n 3 "$base.err" >&2 || true
        fi
      done
    done
  done
  printf 'load\t%s / %s\n' "$LOAD_BEFORE" "$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')" >>"$OUT/meta.tsv"
  python3 "$STATS" report "$OUT"
}

# ---------------------------------------------------------------- syscalls
# One measurement: prints "status mmap munmap madvise mprotect mremap brk".
# source=counters: hakmem's HAKMEM_STATS=1 report; source=strace: strace -c.
sys_measure() {
  local a=$1 source=$2 iters=$3 tag=$4 base rc=0 line
  base="$OUT/logs/syscalls.$a.$source.$tag"
  local prog="$ROOT/build/bench/random_mixed"
  if [[ $source == counters ]]; then
    HAKMEM_STATS=1 clean_run "${LIB[$a]}" "$RUN_TIMEOUT" "${RUN_ENV[@]}" "ITERS=$iters" -- "$prog" \
      "${BENCH_ARGV[@]}" >"$base.out" 2>"$base.err" || rc=$?
    if [[ $rc != 0 ]]; then
      echo "exit-$rc"
      return
    fi
    line=$(grep -E '^os: mmap=' "$base.err" | tail -n 1 || true)
    if [[ -z $line ]]; then
      echo "no-os-line"
      return
    fi
    local -A c=([mmap]=0 [munmap]=0 [madvise]=0 [mprotect]=0 [mremap]=0)
    local w
    for w in $line; do
      [[ $w =~ ^(mmap|munmap|madvise|mprotect|mremap)=([0-9]+)$ ]] && c[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
    done
    echo "ok ${c[mmap]} ${c[munmap]} ${c[madvise]} ${c[mprotect]} ${c[mremap]} 0"
  else
    local -a pre=() senv=()
    [[ -n ${LIB[$a]} ]] && pre=(-E "LD_PRELOAD=${LIB[$a]}")
    local w
    hakmem_env
    for w in "${HAK_ENV[@]}" "${RUN_ENV[@]}" "ITERS=$iters"; do senv+=(-E "$w"); done
    timeout -k 5 "$RUN_TIMEOUT" env -i PATH="$PATH" HOME="${HOME:-/root}" LC_ALL=C \
      strace -f -qq --seccomp-bpf -c -e trace=memory -o "$base.strace" "${pre[@]}" "${senv[@]}" \
      "$prog" "${BENCH_ARGV[@]}" >"$base.out" 2>"$base.err" || rc=$?
    if [[ $rc != 0 ]]; then
      echo "exit-$rc"
      return
    fi
    awk 'BEGIN { split("mmap munmap madvise mprotect mremap brk", n, " "); for (i in n) c[n[i]] = 0 }
         $1 !~ /^-/ && ($NF in c) && $4 ~ /^[0-9]+$/ { c[$NF] += $4 }
         END { printf "ok %d %d %d %d %d %d\n", c["mmap"], c["munmap"], c["madvise"], c["mprotect"], c["mremap"], c["brk"] }' \
      "$base.strace"
  fi
}

run_syscalls() {
  local long=${SYSCALL_ITERS:-200M} short=${SYSCALL_SHORT:-} a src phase it res
  local nlong nshort
  nlong=$(python3 -c 'import sys
s=sys.argv[1]; m={"k":10**3,"K":10**3,"M":10**6,"G":10**9}
print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))' "$long") || die "bad SYSCALL_ITERS '$long'"
  if [[ -z $short ]]; then nshort=$((nlong / 10)); else
    nshort=$(python3 -c 'import sys
s=sys.argv[1]; m={"k":10**3,"K":10**3,"M":10**6,"G":10**9}
print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))' "$short") || die "bad SYSCALL_SHORT '$short'"
  fi
  ((nshort < nlong)) || die "SYSCALL_SHORT ($nshort) must be below SYSCALL_ITERS ($nlong)"
  bench_env random_mixed "$PRESET"
  local -a keep=()
  for w in "${RUN_ENV[@]}"; do [[ $w == ITERS=* ]] || keep+=("$w"); done
  RUN_ENV=("${keep[@]}")
  bench_args random_mixed
  {
    printf 'params\t%s ITERS=%s|%s\n' "${RUN_ENV[*]}" "$nshort" "$nlong"
    printf 'short\t%s\nlong\t%s\ndiff\t%s\ntarget\t1e-8\n' "$nshort" "$nlong" "$((nlong - nshort))"
  } >>"$OUT/meta.tsv"
  : >"$OUT/syscalls.tsv"
  local have_strace=1 notes=""
  command -v strace >/dev/null 2>&1 || {
    have_strace=0
    notes="strace is not installed: only hakmem's counters were read."
  }
  local jobs=()
  for a in "${ACTIVE[@]}"; do
    if [[ $a == hakmem ]]; then
      jobs+=("$a:counters")
      [[ $have_strace == 1 && ${SYSCALL_STRACE_HAKMEM:-1} == 1 ]] && jobs+=("$a:strace")
    elif [[ $have_strace == 1 ]]; then
      jobs+=("$a:strace")
    fi
  done
  local n=0 total=$((${#jobs[@]} * 2)) j
  log "syscalls: random_mixed short=$nshort long=$nlong ops, ${#jobs[@]} measurements -> $OUT"
  for j in "${jobs[@]}"; do
    a=${j%%:*} src=${j#*:}
    for phase in short long; do
      n=$((n + 1))
      [[ $phase == short ]] && it=$nshort || it=$nlong
      printf '[%2d/%d] syscalls %-9s %-8s %-5s (%s ops) ... ' "$n" "$total" "$a" "$src" "$phase" "$it" >&2
      res=$(sys_measure "$a" "$src" "$it" "$phase")
      read -r -a f <<<"$res"
      if [[ ${f[0]} == ok ]]; then
        log "mmap=${f[1]} munmap=${f[2]} madvise=${f[3]} mprotect=${f[4]} mremap=${f[5]} brk=${f[6]}"
      else
        log "FAILED: ${f[0]}"
        if [[ ${f[0]} == no-os-line ]]; then
          notes="${notes:+$notes }hakmem printed no 'os: mmap=N munmap=N ...' line with HAKMEM_STATS=1: its counters are unavailable, see the strace rows."
        fi
      fi
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$a" "$src" "$phase" "$it" "${f[0]}" \
        "${f[1]:-}" "${f[2]:-}" "${f[3]:-}" "${f[4]:-}" "${f[5]:-}" "${f[6]:-}" >>"$OUT/syscalls.tsv"
    done
  done
  [[ -n $notes ]] && printf 'notes\t%s\n' "$notes" >>"$OUT/meta.tsv"
  python3 "$STATS" syscalls "$OUT"
}

start=$(date +%s)
if [[ $MODE_ARG == syscalls ]]; then run_syscalls; else run_suite; fi
log "done in $(($(date +%s) - start)) s; results in $OUT"
if [[ $MODE_ARG == suite && -s $OUT/verdict.txt ]]; then cat "$OUT/verdict.txt"; fi
echo "Results: $OUT/report.md"
