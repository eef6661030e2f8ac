# shellcheck shell=bash
# scripts/lib/common.sh — shared by scripts/bench.sh, soak.sh and ab.sh.
# Source it after setting ROOT (the repository root).

# Current peers built from release tags (newer than Debian's), in shared/peers
# beside the checkout; without that folder the allocators are Debian's only.
PEERS_DIR=${PEERS_DIR:-$(realpath -m "$ROOT/../shared/peers")}
SHARED_PEERS=(mi241 mi343 snmalloc)
# shellcheck disable=SC2034 # used by the scripts that source this file
ALL_ALLOCS=(hakmem glibc mimalloc jemalloc tcmalloc)
if [[ -d $PEERS_DIR ]]; then ALL_ALLOCS+=("${SHARED_PEERS[@]}"); fi
# shellcheck disable=SC2034
ALL_BENCHES=(random_mixed vm vm_cold larson xthread latency fragment churn churn8 churn64 churn_small churn_tasks turns)
# Variables the benchmark programs read (the command line of a program wins
# over them); the runners forward the ones the user set.
BENCH_VARS=(ITERS WS THREADS MIN MAX SEED TOUCH ROUNDS RESPAWN PRODUCERS CONSUMERS BATCH DEPTH
  WARMUP TIMER FRAG_MB MIN2 MAX2 KEEP SETTLE_MS SIZE VM_MODE STEPS DURATION_SEC STEP_ITERS
  CHURN_MODE CHURN_ALLOCS TASKS TRANSFER LARGE TURNS CACHE)

log() { printf '%s\n' "$*" >&2; }
# The calling script's header comment (line 2 up to `set -euo`), as its --help.
script_help() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
die() {
  printf '%s: error: %s\n' "${0##*/}" "$*" >&2
  exit 2
}

# The benchmark program that runs a runner benchmark name.
bench_prog() {
  case $1 in
    vm_cold) echo vm ;;
    churn*) echo churn ;;
    *) echo "$1" ;;
  esac
}

# Default parameters of a benchmark, as VAR=value words (environment of the
# program).  PRESET=standard is the prototype's shapes, long enough that every
# timed run lasts at least 0.3 s on a fast machine (vm, vm_cold, larson and xthread
# get DURATION_SEC from scripts/bench.sh for that); tiny is a smoke test that runs
# in well under a second.
bench_defaults() {
  local bench=$1 preset=${2:-standard}
  if [[ $preset == tiny ]]; then
    case $bench in
      random_mixed) echo "ITERS=200k WS=400 MIN=16 MAX=1024" ;;
      vm) echo "ITERS=20" ;;
      vm_cold) echo "VM_MODE=cold ITERS=10 MAX=1Mi" ;;
      larson) echo "ITERS=200k ROUNDS=10 WS=1000 MIN=16 MAX=1024" ;;
      xthread) echo "ITERS=100k MIN=16 MAX=1024" ;;
      latency) echo "ITERS=50k WARMUP=1000 WS=400 MIN=16 MAX=1024" ;;
      fragment) echo "FRAG_MB=8" ;;
      churn) echo "THREADS=2 ROUNDS=20" ;;
      churn8) echo "THREADS=8 ROUNDS=1 CHURN_ALLOCS=1000" ;;
      churn64) echo "THREADS=64 ROUNDS=1 CHURN_ALLOCS=100" ;;
      churn_small) echo "THREADS=2 ROUNDS=20 LARGE=0" ;;
      churn_tasks) echo "CHURN_MODE=tasks THREADS=2 TASKS=400" ;;
      turns) echo "THREADS=16 TURNS=64 WS=200" ;;
      *) return 1 ;;
    esac
  else
    case $bench in
      random_mixed) echo "ITERS=40M WS=400 MIN=16 MAX=1024" ;;
      vm) echo "ITERS=1000 SIZE=2Mi" ;;
      vm_cold) echo "VM_MODE=cold ITERS=200 WS=4 MIN=256Ki MAX=8Mi" ;;
      larson) echo "ITERS=20M ROUNDS=100 WS=1000 MIN=16 MAX=1024" ;;
      xthread) echo "ITERS=10M MIN=16 MAX=1024" ;;
      latency) echo "ITERS=6M WARMUP=100k WS=400 MIN=16 MAX=1024" ;;
      fragment) echo "FRAG_MB=200" ;;
      churn) echo "THREADS=2 ROUNDS=600" ;;
      churn8) echo "THREADS=8 ROUNDS=50" ;;
      churn64) echo "THREADS=64 ROUNDS=60 CHURN_ALLOCS=500" ;;
      churn_small) echo "THREADS=2 ROUNDS=800 LARGE=0" ;;
      churn_tasks) echo "CHURN_MODE=tasks THREADS=2 TASKS=12000" ;;
      turns) echo "THREADS=64 TURNS=4096 WS=2000" ;;
      *) return 1 ;;
    esac
  fi
}

# Find a shared library by file name: the loader cache first, then the usual
# directories.  Prints the path, or fails.
find_lib() {
  local name path dir cache
  # captured first: an awk that exits at the first match would end ldconfig with SIGPIPE
  cache=$(ldconfig -p 2>/dev/null) || true
  for name in "$@"; do
    path=$(awk -v n="$name" '$1 == n && /x86-64|64bit|aarch64/ { print $NF; exit }' <<<"$cache")
    if [[ -z $path ]]; then
      path=$(awk -v n="$name" '$1 == n { print $NF; exit }' <<<"$cache")
    fi
    if [[ -n $path && -r $path ]]; then
      echo "$path"
      return 0
    fi
    for dir in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /lib/x86_64-linux-gnu /usr/lib64 /usr/lib \
      /usr/local/lib /usr/local/lib64; do
      if [[ -r $dir/$name ]]; then
        echo "$dir/$name"
        return 0
      fi
    done
  done
  return 1
}

# The library to preload for an allocator ("" for glibc: no preload).
# LIB_<name> in the environment overrides the search.  Fails when absent.
alloc_lib() {
  local a=$1 override="LIB_$1"
  if [[ -n ${!override:-} ]]; then
    [[ -r ${!override} ]] || return 1
    echo "${!override}"
    return 0
  fi
  case $a in
    glibc) echo "" ;;
    hakmem) [[ -r $ROOT/build/libhakmem.so ]] && echo "$ROOT/build/libhakmem.so" ;;
    hakmem_secure) [[ -r $ROOT/build/libhakmem-secure.so ]] && echo "$ROOT/build/libhakmem-secure.so" ;;
    mi241_secure) [[ -r $PEERS_DIR/mimalloc-2.4.1/libmimalloc-secure.so ]] && echo "$PEERS_DIR/mimalloc-2.4.1/libmimalloc-secure.so" ;;
    hardened)   # GrapheneOS hardened_malloc, built in ../shared/peers
      local h
      for h in "$PEERS_DIR"/hardened_malloc-*/libhardened_malloc.so; do
        [[ -r $h ]] && { echo "$h"; return 0; }
      done
      return 1
      ;;
    scudo)   # LLVM's hardened allocator, Debian's libclang-rt-*-dev
      local s
      s=$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.scudo_standalone-x86_64.so 2>/dev/null | head -n 1)
      [[ -n $s ]] && echo "$s"
      ;;
    mimalloc) find_lib libmimalloc.so.2 libmimalloc.so ;;
    jemalloc) find_lib libjemalloc.so.2 libjemalloc.so ;;
    tcmalloc) find_lib libtcmalloc_minimal.so.4 libtcmalloc_minimal.so libtcmalloc.so.4 libtcmalloc.so ;;
    mi241 | mi343 | snmalloc)
      local p
      p=$PEERS_DIR/$(peer_path "$a")
      [[ -r $p ]] && echo "$p"
      ;;
    *) return 1 ;;
  esac
}

# A shared peer's library below PEERS_DIR (its folder is project-version).
peer_path() {
  case $1 in
    mi241) echo mimalloc-2.4.1/libmimalloc.so ;;
    mi343) echo mimalloc-3.4.3/libmimalloc.so ;;
    snmalloc) echo snmalloc-0.7.5/libsnmallocshim.so ;;
    *) return 1 ;;
  esac
}

# The allocator= a benchmark program prints when this allocator serves malloc.
alloc_family() {
  case $1 in
    mi241 | mi343) echo mimalloc ;;
    *) echo "$1" ;;
  esac
}

# An allocator's version, for the report: its Debian package's, a shared
# peer's release (from its folder name), hakmem's git revision.
alloc_version() {
  local pkg=""
  case $1 in
    mi241 | mi343 | snmalloc)
      local dir
      dir=$(peer_path "$1")
      dir=${dir%%/*}
      echo "v${dir##*-} release build"
      return 0
      ;;
    glibc) pkg=libc6 ;;
    mimalloc) pkg=libmimalloc2.0 ;;
    jemalloc) pkg=libjemalloc2 ;;
    tcmalloc) pkg=libtcmalloc-minimal4 ;;
    hakmem)
      local rev
      if rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null); then
        if [[ -n $(git -C "$ROOT" status --porcelain -- src include Makefile 2>/dev/null) ]]; then
          rev="$rev+dirty"
        fi
      else
        rev="uncommitted"
      fi
      echo "git $rev"
      return 0
      ;;
  esac
  dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || echo "?"
}

# Every HAKMEM_* variable of the caller's environment, as NAME=value words.
hakmem_env() {
  local v
  HAK_ENV=()
  while read -r v; do
    [[ $v == HAKMEM_* ]] && HAK_ENV+=("$v=${!v}")
  done < <(compgen -e)
  return 0
}

# The environment of one benchmark run: its defaults, then the benchmark
# variables the user set (which win).  Result in RUN_ENV (array).
bench_env() {
  local bench=$1 preset=$2 w v
  local -A seen=()
  RUN_ENV=()
  for v in "${BENCH_VARS[@]}"; do
    if [[ -n ${!v:-} ]]; then
      seen[$v]=1
    fi
  done
  for w in $(bench_defaults "$bench" "$preset"); do
    [[ -n ${seen[${w%%=*}]:-} ]] || RUN_ENV+=("$w")
  done
  for v in "${BENCH_VARS[@]}"; do
    if [[ -n ${seen[$v]:-} ]]; then
      RUN_ENV+=("$v=${!v}")
    fi
  done
  return 0
}

# Extra command-line arguments for a benchmark: ARGS_<bench>.
bench_args() {
  local var="ARGS_$1"
  # shellcheck disable=SC2034 # read by the caller
  BENCH_ARGV=()
  if [[ -n ${!var:-} ]]; then
    read -r -a BENCH_ARGV <<<"${!var}"
  fi
  return 0
}

# Run a command in a clean environment: PATH, HOME, LC_ALL=C, the preload
# (if any), HAKMEM_* variables, then the given NAME=value words, then the
# command.  Usage: clean_run LIB TIMEOUT_S ENVWORDS... -- CMD ARGS...
clean_run() {
  local lib=$1 tmo=$2
  shift 2
  local -a envw=()
  while [[ $# -gt 0 && $1 != -- ]]; do
    envw+=("$1")
    shift
  done
  shift
  local -a pre=()
  [[ -n $lib ]] && pre=("LD_PRELOAD=$lib")
  hakmem_env
  timeout -k 5 "$tmo" env -i PATH="$PATH" HOME="${HOME:-/root}" LC_ALL=C "${pre[@]}" "${HAK_ENV[@]}" "${envw[@]}" "$@"
}

# Value of KEY in a "RESULT k=v ..." line.
result_get() {
  local line=$1 key=$2 w
  for w in $line; do
    if [[ $w == "$key="* ]]; then
      echo "${w#*=}"
      return 0
    fi
  done
  return 1
}

# A short human form of a number (for progress lines).
human() {
  awk -v x="$1" 'BEGIN { a = x < 0 ? -x : x;
    if (a >= 1e9) printf "%.2fG", x / 1e9; else if (a >= 1e6) printf "%.2fM", x / 1e6;
    else if (a >= 1e4) printf "%.1fk", x / 1e3; else printf "%g", x }'
}

host_name() { hostname -s 2>/dev/null || uname -n; }

# results/<date>-<time>-<host>[-suffix], or OUTDIR when set.
result_dir() {
  local suffix=${1:-}
  if [[ -n ${OUTDIR:-} ]]; then
    echo "$OUTDIR"
  else
    echo "$ROOT/results/$(date +%Y%m%d-%H%M%S)-$(host_name)${suffix:+-$suffix}"
  fi
}

# Build hakmem (make -s at the root) unless NO_BUILD=1.  Returns 1 when the
# library cannot be built.
build_hakmem() {
  [[ ${NO_BUILD:-0} == 1 ]] && { [[ -r $ROOT/build/libhakmem.so ]]; return; }
  local logf
  logf=$(mktemp)
  if ! make -s -C "$ROOT" >"$logf" 2>&1; then
    log "warning: building hakmem failed (make -s); last lines:"
    tail -n 15 "$logf" >&2
    rm -f "$logf"
    return 1
  fi
  rm -f "$logf"
  [[ -r $ROOT/build/libhakmem.so ]]
}

build_progs() {
  [[ ${NO_BUILD:-0} == 1 && -x $ROOT/build/bench/random_mixed ]] && return 0
  local logf
  logf=$(mktemp)
  if ! make -s -C "$ROOT" bench-progs >"$logf" 2>&1; then
    cat "$logf" >&2
    rm -f "$logf"
    die "building the benchmark programs failed (make bench-progs)"
  fi
  rm -f "$logf"
}

need_python() {
  command -v python3 >/dev/null 2>&1 || die "python3 is required (scripts/setup.sh installs it)"
}
