#!/usr/bin/env bash
# bench_results: small valid runs of every benchmark program print one RESULT
# line with the expected keys and sane values, under glibc and (when built)
# under build/libhakmem.so; steps mode prints STEP lines; churn counts its
# blocks, threads and live bytes, and a spoiled block makes it exit 1.
set -euo pipefail
# shellcheck source=scripts/lib/testlib.sh
. "$(dirname "$0")/../../scripts/lib/testlib.sh"
build_bench_progs
B=$ROOT/build/bench
COMMON=(bench elapsed_s user_s sys_s minflt majflt nvcsw nivcsw peak_rss_kb rss_kb allocator primary better)

libs=("")
[[ -r $ROOT/build/libhakmem.so ]] && libs+=("$ROOT/build/libhakmem.so")

check() { # name expected-bench keys... -- cmd...
  local bench=$1 lib=$2
  shift 2
  local -a keys=()
  while [[ $1 != -- ]]; do
    keys+=("$1")
    shift
  done
  shift
  local rc=0
  env ${lib:+LD_PRELOAD=$lib} "$@" >"$TMPD/out" 2>"$TMPD/err" || rc=$?
  [[ $rc == 0 ]] || fail "$* exited $rc under ${lib:-glibc}: $(head -n 3 "$TMPD/err")"
  local n line
  n=$(grep -c '^RESULT ' "$TMPD/out" || true)
  [[ $n == 1 ]] || fail "$*: $n RESULT lines"
  line=$(grep '^RESULT ' "$TMPD/out")
  has_keys "$line" "${COMMON[@]}" "${keys[@]}" || fail "$*: keys missing"
  [[ " $line " == *" bench=$bench "* ]] || fail "$*: not bench=$bench: $line"
  local want=glibc
  [[ -n $lib ]] && want=hakmem
  [[ " $line " == *" allocator=$want "* ]] || fail "$*: allocator is not $want: $line"
  [[ " $line " != *" check=FAIL "* ]] || fail "$*: integrity check failed: $line"
  local prim val
  prim=$(sed -n 's/.* primary=\([a-z0-9_]*\).*/\1/p' <<<"$line")
  val=$(sed -n "s/.* $prim=\([0-9.]*\).*/\1/p" <<<"$line")
  awk -v v="$val" 'BEGIN { exit !(v + 0 > 0) }' || fail "$*: primary figure $prim=$val is not positive"
  LAST=$line
}

# churn's counts in the last RESULT line: blocks, threads started; no live
# bytes at the end, a positive peak of them, not above twice the peak RSS.
churn_counts() {
  [[ " $LAST " == *" blocks=$1 threads_started=$2 "* ]] || fail "churn: want blocks=$1 threads_started=$2: $LAST"
  [[ " $LAST " == *" live_end_bytes=0 "* ]] || fail "churn: live bytes left: $LAST"
  awk -v l="$LAST" 'BEGIN { n = split(l, w, " "); for (i = 1; i <= n; i++) { split(w[i], kv, "="); v[kv[1]] = kv[2] }
    exit !(v["peak_live_bytes"] > 0 && v["peak_live_bytes"] <= 2 * 1024 * v["peak_rss_kb"]) }' ||
    fail "churn: peak_live_bytes out of range: $LAST"
}

for lib in "${libs[@]}"; do
  check random_mixed "$lib" ops_per_sec ns_per_op ops ws min max seed touch threads check -- \
    "$B/random_mixed" --iters=100k
  check random_mixed "$lib" ops_per_sec -- "$B/random_mixed" --iters=50k --touch=lines --min=1 --max=5000
  check random_mixed "$lib" ops_per_sec -- "$B/random_mixed" --iters=50k --touch=none
  check vm "$lib" ns_per_op minflt_per_op iters size -- "$B/vm" --iters=5
  check vm_cold "$lib" ns_per_op minflt_per_op iters ws min max -- "$B/vm" --mode=cold --iters=5 --max=1Mi
  check larson "$lib" ops_per_sec ops_per_cpu_sec threads rounds ws check -- "$B/larson" --iters=100k --rounds=5 --threads=2
  check larson "$lib" ops_per_sec respawn -- "$B/larson" --iters=100k --rounds=5 --threads=3 --respawn=1
  check xthread "$lib" ops_per_sec producers consumers batch checksum -- "$B/xthread" --iters=50k --threads=2
  check xthread "$lib" ops_per_sec -- "$B/xthread" --iters=50k --producers=3 --consumers=1 --batch=7 --depth=2
  check latency "$lib" p50_ns p90_ns p99_ns p999_ns max_ns malloc_p99_ns free_p99_ns timer_overhead_ns samples -- \
    "$B/latency" --iters=20k --warmup=100
  check latency "$lib" p99_ns -- "$B/latency" --iters=5k --warmup=0 --timer=clock
  check fragment "$lib" rss_final_kb rss_grow_kb rss_after_free_kb rss_end_kb live_final_kb final_overhead -- \
    "$B/fragment" --mb=4
  CHURN=(peak_live_bytes peak_overhead live_end_bytes blocks threads_started mode threads allocs check)
  check churn "$lib" "${CHURN[@]}" rounds -- "$B/churn" --rounds=3 --threads=3 --allocs=500
  churn_counts 9000 6 # 3 rounds x 500 x (1 + 2 + 3) blocks, 2 threads started a round
  check churn "$lib" "${CHURN[@]}" -- "$B/churn" --rounds=2 --threads=2 --allocs=300 --large=0 --transfer=100
  churn_counts 1800 2
  check churn "$lib" "${CHURN[@]}" tasks -- "$B/churn" --mode=tasks --tasks=50 --threads=3 --allocs=20
  churn_counts 4380 50 # 20 x (6 x 36 + 1 + 2) blocks
done

# Percentiles are ordered.
check latency "" p99_ns -- "$B/latency" --iters=20k
awk -v l="$LAST" 'BEGIN { n = split(l, w, " "); for (i = 1; i <= n; i++) { split(w[i], kv, "="); v[kv[1]] = kv[2] }
  exit !(v["p50_ns"] <= v["p90_ns"] && v["p90_ns"] <= v["p99_ns"] && v["p99_ns"] <= v["p999_ns"] && v["p999_ns"] <= v["max_ns"]) }' ||
  fail "latency percentiles out of order: $LAST"

# Steps mode.
"$B/random_mixed" --steps=3 --step-iters=10k >"$TMPD/out" || fail "steps mode"
[[ $(grep -c '^STEP step=[0-9]* t_s=[0-9.]* ops=10000 ops_per_sec=[0-9]* rss_kb=[0-9]* cpu_ops_per_sec=[0-9]*$' "$TMPD/out") == 3 ]] ||
  fail "steps mode: expected 3 STEP lines: $(cat "$TMPD/out")"
grep -q '^RESULT .* ops=30000 ' "$TMPD/out" || fail "steps mode: RESULT does not count 30000 ops"
"$B/random_mixed" --duration=0.2 --step-iters=10k >"$TMPD/out" || fail "duration mode"
grep -q '^STEP ' "$TMPD/out" || fail "duration mode printed no STEP line"
# A block spoiled while it is live (its last 8 bytes, by a malloc wrapper) is
# caught when it is freed: exit status 1, check=FAIL.
cat >"$TMPD/spoil.c" <<'EOF'
#include <stddef.h>
#include <string.h>
extern void* __libc_malloc(size_t);
static unsigned long calls;
static unsigned char* last;
/* Every 100th time, spoil the last 8 bytes of the 64-byte block returned before. */
void* malloc(size_t n) {
  unsigned char* p = __libc_malloc(n);
  if (n == 64) {
    if (last && ++calls % 100 == 0) memset(last + 56, 0xA5, 8);
    last = p;
  }
  return p;
}
EOF
${CC:-cc} -shared -fPIC -O1 -o "$TMPD/spoil.so" "$TMPD/spoil.c" || fail "cannot build the spoiling malloc wrapper"
expect_exit 1 "churn with spoiled blocks" env LD_PRELOAD="$TMPD/spoil.so" "$B/churn" --threads=1 --rounds=1 \
  --allocs=1000 --min=64 --max=64 --large=0 --transfer=0
grep -q ' check=FAIL ' "$TMPD/out" || fail "churn with spoiled blocks: no check=FAIL: $(cat "$TMPD/out")"
grep -q 'lost their cookies' "$TMPD/err" || fail "churn with spoiled blocks: no message"
echo "ok (${#libs[@]} allocators)"
