#!/usr/bin/env bash
# C++: every operator new/delete form, bad_alloc/nothrow/new_handler, and a
# container stress.  Linked with libhakmem.so, and preloaded into a glibc-
# linked build; the container checksum must equal the one without hakmem.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-cxx-so $T/test-cxx-glibc "$SO"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run "test-cxx linked with libhakmem.so" $T/test-cxx-so --require-hakmem | tee "$tmp/so"
run "test-cxx (glibc-linked) with LD_PRELOAD" env LD_PRELOAD="$SO" $T/test-cxx-glibc --require-hakmem | tee "$tmp/pre"
run "test-cxx without hakmem (reference)" $T/test-cxx-glibc | tee "$tmp/ref"
ref=$(grep '^checksum' "$tmp/ref")
for v in so pre; do
  got=$(grep '^checksum' "$tmp/$v" || true)
  [[ $got == "$ref" ]] || die "container checksum differs ($v): '$got' vs reference '$ref'"
done
echo "container checksums equal: $ref"
