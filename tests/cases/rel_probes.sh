#!/usr/bin/env bash
# Heap-misuse probes (issue #11; scripts/probes.sh, tests/test-probes.c and
# test-probes-cxx.cc): every probe runs as a child process under the default and
# the secure library.  A probe marked C below must be caught by that build
# (stopped by a signal, or the property held); "-" may be missed.  The default
# column is what the default build caught when the probes were written (no
# regression); the secure column is what the secure build's mechanisms
# guarantee (docs/SECURITY.md: canaries and trailers, the quarantine and its
# fill, zero-size blocks, free slab pages and large blocks made PROT_NONE,
# exact sized delete).  A hakmem abort must come with exactly one "hakmem:" line naming
# an address.  Probes caught beyond the table are printed, not failed.
# The table is the source of the probe rows of docs/SECURITY.md.
set -euo pipefail
. tests/cases/rel_lib.sh
sampling_off   # (blocks where the checks expect them)
need build/libhakmem.so build/libhakmem-secure.so
command -v g++ >/dev/null || skip "g++ missing (the C++ probes)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# probe size | default | secure
want=$(cat <<'TABLE'
overflow_1                  8  -  C
overflow_1               4096  -  C
overflow_1             262144  -  C
overflow_32                 8  -  C
overflow_32              4096  -  C
overflow_32            262144  -  C
overflow_1m                 8  -  C
overflow_1m              4096  -  C
overflow_1m            262144  C  C
underflow_1                 8  -  C
underflow_1              4096  -  C
underflow_1            262144  -  C
underflow_32                8  -  C
underflow_32             4096  -  C
underflow_32           262144  -  C
write_after_free            8  -  C
write_after_free         4096  -  C
write_after_free       262144  -  C
read_after_free             8  C  C
read_after_free          4096  -  C
read_after_free        262144  -  C
reuse_immediate             8  -  C
reuse_immediate          4096  C  C
reuse_immediate        262144  -  C
reuse_downsize              8  -  C
reuse_downsize           4096  C  C
reuse_downsize         262144  -  C
realloc_same                8  C  C
realloc_same             4096  -  C
realloc_same           262144  -  C
uninit_read                 8  C  C
uninit_read              4096  -  C
uninit_read            262144  -  C
zero_read                   0  -  C
zero_write                  0  -  C
zero_read_freed             0  -  C
zero_write_freed            0  C  C
delete_wrong_size           8  -  C
delete_wrong_size        4096  -  C
delete_wrong_size      262144  -  C
delete_array_mismatch       8  -  C
delete_array_mismatch    4096  C  C
delete_array_mismatch  262144  C  C
TABLE
)

bash scripts/probes.sh -o "$tmp/tsv" hakmem="$PWD/build/libhakmem.so" hakmem-secure="$PWD/build/libhakmem-secure.so"

probe_outcomes "$tmp/tsv" "$want"
((PROBE_FAILS == 0)) || die "$PROBE_FAILS probe outcomes not as required"
echo "probes: every required outcome held"
