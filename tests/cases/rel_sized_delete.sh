#!/usr/bin/env bash
# A mismatched C++ sized delete is reported in one line, then abort();
# correct sized deletes (every size 1..5000, scalar and array) are silent.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v g++ >/dev/null || { echo "g++ missing"; exit 77; }
make -s all build/tests/test-sized-delete-glibc >/dev/null
L=$PWD/build/libhakmem.so
out=$(LD_PRELOAD=$L build/tests/test-sized-delete-glibc 2>&1)
[[ $out == ok ]] || { echo "FAIL: correct sized deletes: $out"; exit 1; }
rc=0
err=$(LD_PRELOAD=$L build/tests/test-sized-delete-glibc mismatch 2>&1 >/dev/null) || rc=$?
echo "mismatch: status $rc: $err"
[[ $rc == 134 ]] || { echo "FAIL: want SIGABRT"; exit 1; }
grep -Eq '^hakmem: operator delete\(\): size mismatch for 0x[0-9a-f]+ \(size given 24, block holds [0-9]+\)$' <<<"$err" ||
  { echo "FAIL: message"; exit 1; }
[[ $(wc -l <<<"$err") == 1 ]] || { echo "FAIL: more than one line"; exit 1; }
echo "sized delete: ok"

# The secure build pairs new[] with delete[] (secure.c; an unsized delete
# reports as free(), as in the default build): every correct pair
# above is silent, and each mismatch is reported in one line.
S=$PWD/build/libhakmem-secure.so
out=$(LD_PRELOAD=$S build/tests/test-sized-delete-glibc 2>&1)
[[ $out == ok ]] || { echo "FAIL: secure build, correct deletes: $out"; exit 1; }
for m in "new_delete_array:operator delete\[\]\(\): block 0x[0-9a-f]+ was not allocated by operator new\[\]" \
         "new_array_delete:free\(\): block 0x[0-9a-f]+ was allocated by operator new\[\]" \
         "new_array_free:free\(\): block 0x[0-9a-f]+ was allocated by operator new\[\]"; do
  rc=0
  err=$(LD_PRELOAD=$S build/tests/test-sized-delete-glibc "${m%%:*}" 2>&1 >/dev/null) || rc=$?
  echo "${m%%:*}: status $rc: $err"
  [[ $rc == 134 && $(wc -l <<<"$err") == 1 ]] || { echo "FAIL: want SIGABRT after one line"; exit 1; }
  grep -Eq "^hakmem: ${m#*:} \(free it with delete(\[\])?\)$" <<<"$err" || { echo "FAIL: message"; exit 1; }
done
echo "new[]/delete[] pairs (secure): ok"

# HAKMEM_SECURE_ARRAY_PAIRS=0 lets a program with such a mismatch run (the
# block is freed as any other: the next malloc of its size may take it);
# the correct pairs stay silent.
out=$(HAKMEM_SECURE_ARRAY_PAIRS=0 LD_PRELOAD=$S build/tests/test-sized-delete-glibc 2>&1)
[[ $out == ok ]] || { echo "FAIL: secure build, pairs off, correct deletes: $out"; exit 1; }
for m in new_delete_array new_array_delete new_array_free; do
  out=$(HAKMEM_SECURE_ARRAY_PAIRS=0 LD_PRELOAD=$S build/tests/test-sized-delete-glibc "$m" 2>&1)
  echo "$m, pairs off: $out"
  [[ $out == missed ]] || { echo "FAIL: want the program to go on"; exit 1; }
done
echo "new[]/delete[] pairs off (secure): ok"
