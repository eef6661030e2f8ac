#!/usr/bin/env bash
# A mismatched C++ sized delete is reported in one line, then abort();
# correct sized deletes (every size 1..5000, scalar and array) are silent.
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s all >/dev/null
command -v g++ >/dev/null || { echo "g++ missing"; exit 77; }
mkdir -p build/tests
g++ -O1 -fsized-deallocation tests/rel/sized_delete.cc -o build/tests/sized_delete
L=$PWD/build/libhakmem.so
out=$(LD_PRELOAD=$L build/tests/sized_delete 2>&1)
[[ $out == ok ]] || { echo "FAIL: correct sized deletes: $out"; exit 1; }
rc=0
err=$(LD_PRELOAD=$L build/tests/sized_delete mismatch 2>&1 >/dev/null) || rc=$?
echo "mismatch: status $rc: $err"
[[ $rc == 134 ]] || { echo "FAIL: want SIGABRT"; exit 1; }
grep -Eq '^hakmem: operator delete\(\): size mismatch for 0x[0-9a-f]+ \(size given 24, block holds [0-9]+\)$' <<<"$err" ||
  { echo "FAIL: message"; exit 1; }
[[ $(wc -l <<<"$err") == 1 ]] || { echo "FAIL: more than one line"; exit 1; }
echo "sized delete: ok"
