#!/usr/bin/env bash
# bench_args: the benchmark programs' argument handling — --help, bad options
# and values exit 2 with a message, environment variables are read and the
# command line wins over them, number suffixes.
set -euo pipefail
# shellcheck source=scripts/lib/testlib.sh
. "$(dirname "$0")/../../scripts/lib/testlib.sh"
build_bench_progs
B=$ROOT/build/bench

for p in random_mixed vm larson xthread latency fragment churn turns; do
  expect_exit 0 "$p --help" "$B/$p" --help
  grep -q '^usage: ' "$TMPD/out" || fail "$p --help prints no usage line"
  expect_exit 2 "$p unknown option" "$B/$p" --no-such-option=1
  grep -q "unknown option" "$TMPD/err" || fail "$p: no message for an unknown option"
  expect_exit 2 "$p positional argument" "$B/$p" 100
  expect_exit 2 "$p bad number" "$B/$p" --seed=12x
  grep -q "not a number" "$TMPD/err" || fail "$p: no message for a bad number"
  expect_exit 2 "$p option without value" "$B/$p" --seed
  expect_exit 2 "$p bad environment value" env SEED=abc "$B/$p" --help
done
expect_exit 0 "grow --help" "$B/grow" --help
expect_exit 2 "grow unknown option" "$B/grow" --no-such-option=1
expect_exit 2 "grow --keep=0" "$B/grow" --keep=0
expect_exit 0 "grow, 50 rounds" "$B/grow" --rounds=50
grep -q "check=ok" "$TMPD/out" || fail "grow: a buffer's contents did not move with it"
expect_exit 2 "random_mixed --ws=0" "$B/random_mixed" --ws=0
grep -q "out of range" "$TMPD/err" || fail "no out-of-range message"
expect_exit 2 "random_mixed min > max" "$B/random_mixed" --min=100 --max=10 --iters=1
expect_exit 2 "fragment min2 > max2" "$B/fragment" --min2=100 --max2=10 --mb=1
expect_exit 2 "random_mixed --touch=bad" "$B/random_mixed" --touch=bad --iters=1
expect_exit 2 "vm --mode=bad" "$B/vm" --mode=bad
expect_exit 2 "fragment --keep=101" "$B/fragment" --keep=101
expect_exit 2 "iters overflow" "$B/random_mixed" --iters=99999999999999999999
expect_exit 2 "churn --mode=bad" "$B/churn" --mode=bad
expect_exit 2 "churn min > max" "$B/churn" --min=100 --max=10
expect_exit 2 "churn no power of two in [min, max]" "$B/churn" --min=9 --max=15
grep -q "no power of two" "$TMPD/err" || fail "churn: no message for a range without a power of two"
expect_exit 2 "churn --min below the cookie" "$B/churn" --min=4
expect_exit 2 "churn --transfer=101" "$B/churn" --transfer=101
expect_exit 2 "churn --large=2" "$B/churn" --large=2
expect_exit 2 "churn --threads=0" "$B/churn" --threads=0
expect_exit 2 "churn bad CHURN_MODE" env CHURN_MODE=x "$B/churn" --help

ops() { sed -n 's/.* ops=\([0-9]*\).*/\1/p' "$TMPD/out"; }
expect_exit 0 "ITERS from the environment" env ITERS=1000 "$B/random_mixed"
[[ $(ops) == 1000 ]] || fail "ITERS=1000 ran $(ops) ops"
expect_exit 0 "command line over environment" env ITERS=1000 "$B/random_mixed" --iters=2000
[[ $(ops) == 2000 ]] || fail "--iters=2000 with ITERS=1000 ran $(ops) ops"
expect_exit 0 "k suffix" "$B/random_mixed" --iters=3k
[[ $(ops) == 3000 ]] || fail "--iters=3k ran $(ops) ops"
expect_exit 0 "Ki suffix" "$B/random_mixed" --iters=2Ki
[[ $(ops) == 2048 ]] || fail "--iters=2Ki ran $(ops) ops"
expect_exit 0 "threads default" "$B/larson" --iters=10k --rounds=2
want=$(nproc)
grep -q " threads=$want " "$TMPD/out" || fail "larson threads default is not the CPU count ($want): $(cat "$TMPD/out")"
expect_exit 0 "churn knobs from the environment" env CHURN_MODE=tasks TASKS=7 THREADS=3 CHURN_ALLOCS=10 \
  "$B/churn" --threads=2
has_keys "$(cat "$TMPD/out")" mode tasks threads_started allocs || fail "churn keys"
grep -q ' mode=tasks threads=2 tasks=7 allocs=10 .* threads_started=7 ' "$TMPD/out" ||
  fail "churn environment/command line: $(cat "$TMPD/out")"
echo "ok"
