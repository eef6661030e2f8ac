#!/usr/bin/env bash
# gcc compiles a generated C file (1500 functions) with hakmem preloaded:
# the assembly equals the one made without hakmem, and the program
# assembled and linked under hakmem prints the same result.
set -euo pipefail
. tests/cases/core_lib.sh
command -v gcc >/dev/null || skip "gcc not installed"
need "$SO"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
awk 'BEGIN { n = 1500; print "#include <stdio.h>"; print "#include <stdint.h>"
  for (i = 0; i < n; i++)
    printf "static uint64_t f%d(uint64_t x) { uint64_t a[%d]; for (int i = 0; i < %d; i++) a[i] = x * %d + i; switch (x %% 5) { case 0: x += a[%d]; break; case 1: x ^= a[0] << 3; break; case 2: x *= %d; break; default: x -= %d; } return x ^ (x >> %d); }\n", i, i % 7 + 2, i % 7 + 2, i * 2 + 1, i % 7 + 1, i + 3, i, i % 31 + 1
  print "int main(void) { uint64_t x = 1;"
  for (i = 0; i < n; i++) printf "  x = f%d(x);\n", i
  print "  printf(\"%llu\\n\", (unsigned long long)x); return 0; }" }' >"$tmp/big.c"
echo "generated $(wc -l <"$tmp/big.c") lines"
run "gcc -O1 -S without hakmem" gcc -O1 -S "$tmp/big.c" -o "$tmp/ref.s"
run "gcc -O1 -S with hakmem" env LD_PRELOAD="$SO" gcc -O1 -S "$tmp/big.c" -o "$tmp/out.s"
cmp -s "$tmp/ref.s" "$tmp/out.s" || die "the assembly differs under hakmem"
echo "same assembly ($(wc -l <"$tmp/ref.s") lines)"
run "assemble and link without hakmem" gcc "$tmp/ref.s" -o "$tmp/ref"
run "assemble and link with hakmem" env LD_PRELOAD="$SO" gcc "$tmp/out.s" -o "$tmp/out"
a=$("$tmp/ref") b=$(env LD_PRELOAD="$SO" "$tmp/out")
echo "program output: $a / $b"
[[ -n $a && $a == "$b" ]] || die "program output differs"
