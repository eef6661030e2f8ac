#!/usr/bin/env bash
# sort(1) of 200k generated lines (in memory, with temp files, 2 threads)
# gives the same output with hakmem preloaded as without.
set -euo pipefail
. tests/cases/core_lib.sh
command -v sort >/dev/null || skip "sort not installed"
command -v awk >/dev/null || skip "awk not installed"
need "$SO"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
awk 'BEGIN { x = 12345; for (i = 0; i < 200000; i++) {
  x = (x * 1103515245 + 12345) % 2147483648
  printf "%08x %d line-%d %s\n", x, x % 1000, i, substr("abcdefghijklmnopqrstuvwxyz", x % 26 + 1, x % 17) } }' >"$tmp/in"
echo "input: $(wc -l <"$tmp/in") lines, $(wc -c <"$tmp/in") bytes"
for args in "" "-k2,2n -k1,1" "-S 1M -T $tmp --parallel=2 -k3" "-r -u -k2,2n"; do
  sort $args "$tmp/in" >"$tmp/ref"
  env LD_PRELOAD="$SO" sort $args "$tmp/in" >"$tmp/out" || die "sort $args failed under hakmem"
  cmp -s "$tmp/ref" "$tmp/out" || die "sort $args: output differs under hakmem"
  echo "ok   sort $args: $(wc -l <"$tmp/out") lines, sha256 $(sha256sum <"$tmp/out" | cut -c1-16)"
done
