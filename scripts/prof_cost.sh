#!/usr/bin/env bash
# scripts/prof_cost.sh — what heap profiling costs: the standard suite's
# single-threaded programs (mimalloc-bench, built by scripts/bench.sh into
# BUILD) run interleaved under each named configuration, and per program the
# ratio of each configuration's median time and peak RSS to the first's.
#
#   scripts/prof_cost.sh [-r RUNS] [-o FILE.csv] NAME=VAR=VALUE,VAR=VALUE... ...
#   scripts/prof_cost.sh --help
#
# A configuration is a name and the environment of its runs, comma-separated,
# e.g. (the profiler off and on, and the library before a change):
#   scripts/prof_cost.sh -r 5 off=LD_PRELOAD=$PWD/build/libhakmem.so \
#     on=LD_PRELOAD=$PWD/build/libhakmem.so,HAKMEM_PROF=1 before=LD_PRELOAD=/tmp/old.so
# Profiles go to a temporary folder (HAKMEM_PROF_PREFIX), removed after each
# program.  The order of the configurations turns by one each run.
# Environment: BUILD (default /tmp/mimalloc-bench-build), BENCHES (default
# "cfrac espresso barnes alloc-test1 cache-thrash1 cache-scratch1 malloc-large
# mleak50 glibc-simple").
# Output: FILE.csv (bench,config,run,seconds,maxrss_kib; default
# results/prof-cost.csv), and the table on stdout.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
runs=5 out=results/prof-cost.csv
while getopts "r:o:" o; do
  case $o in
    r) runs=$OPTARG ;;
    o) out=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
(($# >= 1)) || { echo "prof_cost.sh: name at least one configuration (--help)" >&2; exit 2; }
BUILD=${BUILD:-/tmp/mimalloc-bench-build}
B=$(cd .. && pwd)/shared/mimalloc-bench/bench
[[ -x $BUILD/cfrac ]] || { echo "prof_cost.sh: no suite programs in $BUILD (scripts/bench.sh builds them)" >&2; exit 1; }
BENCHES=${BENCHES:-"cfrac espresso barnes alloc-test1 cache-thrash1 cache-scratch1 malloc-large mleak50 glibc-simple"}
cmd() {
  case $1 in
    cfrac) echo "./cfrac 17545186520507317056371138836327483792789528" ;;
    espresso) echo "./espresso $B/espresso/largest.espresso" ;;
    barnes) echo "./barnes" ;;
    alloc-test1) echo "./alloc-test 1" ;;
    cache-thrash1) echo "./cache-thrash 1 1000 1 2000000 2" ;;
    cache-scratch1) echo "./cache-scratch 1 1000 1 2000000 2" ;;
    malloc-large) echo "./malloc-large" ;;
    mleak50) echo "./mleak 50" ;;
    glibc-simple) echo "./glibc-simple" ;;
    *) echo "" ;;
  esac
}
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "bench,config,run,seconds,maxrss_kib" >"$out"
cfgs=("$@")
for ((r = 1; r <= runs; r++)); do
  for b in $BENCHES; do
    c=$(cmd "$b"); [[ -n $c ]] || { echo "prof_cost.sh: unknown program $b" >&2; exit 2; }
    in=/dev/null; [[ $b == barnes ]] && in=$B/barnes/input
    for cf in "${cfgs[@]}"; do
      name=${cf%%=*} e=${cf#*=}
      # shellcheck disable=SC2086  # (words: VAR=value pairs)
      (cd "$BUILD" && /usr/bin/time -f '%e %M' -o "$tmp/time" env ${e//,/ } HAKMEM_PROF_PREFIX="$tmp/p/x" \
        $c <"$in" >/dev/null 2>&1) || true
      read -r s m <"$tmp/time" || { s=""; m=""; }
      echo "$b,$name,$r,$s,$m" >>"$out"
      rm -rf "$tmp/p"; mkdir -p "$tmp/p"
    done
  done
  cfgs=("${cfgs[@]:1}" "${cfgs[0]}")
done
python3 - "$out" "${1%%=*}" <<'EOF'
import csv, math, statistics as st, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["seconds"] and r["maxrss_kib"]]
base = sys.argv[2]
names = list(dict.fromkeys(r["config"] for r in rows)); benches = list(dict.fromkeys(r["bench"] for r in rows))
def med(b, a, k): return st.median(float(r[k]) for r in rows if r["bench"] == b and r["config"] == a)
print("time and peak RSS ÷ %s's (medians), and the RSS difference" % base)
print("| program | " + " | ".join(names) + " |"); print("|---" * (len(names) + 1) + "|")
logs = {a: ([], []) for a in names}
for b in benches:
    t0, r0 = med(b, base, "seconds"), med(b, base, "maxrss_kib"); cells = []
    for a in names:
        t, r = med(b, a, "seconds"), med(b, a, "maxrss_kib")
        logs[a][0].append(math.log(t / t0)); logs[a][1].append(math.log(r / r0))
        cells.append("%.3f / %.3f (%+d KiB)" % (t / t0, r / r0, r - r0))
    print("| %s | %s |" % (b, " | ".join(cells)))
print("| geomean | " + " | ".join("%.3f / %.3f" % tuple(math.exp(sum(v) / len(v)) for v in logs[a]) for a in names) + " |")
EOF
