#!/usr/bin/env bash
# Heap-misuse probes (issue #11; scripts/probes.sh, tests/rel/probes.c and
# probes_cxx.cc): every probe runs as a child process under the default and
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

listed=$(awk -F'\t' '$1 == "hakmem" { print $2, $3 }' "$tmp/tsv" | sort)
tabled=$(awk '{ print $1, $2 }' <<<"$want" | sort)
[[ $listed == "$tabled" ]] || die "the table and the probe list differ: $(diff <(echo "$listed") <(echo "$tabled") | tr '\n' ' ')"

fails=0
while IFS=$'\t' read -r lib probe size outcome addr nerr line; do
  col=3; [[ $lib == hakmem-secure ]] && col=4
  need_caught=$(awk -v p="$probe" -v s="$size" -v c=$col '$1 == p && $2 == s { print $c }' <<<"$want")
  if [[ $outcome == error* ]]; then
    echo "FAIL $lib $probe $size: $outcome ($line)"; fails=$((fails + 1))
  elif [[ $need_caught == C && $outcome != caught-* ]]; then
    echo "FAIL $lib $probe $size: $outcome, want caught"; fails=$((fails + 1))
  elif [[ $outcome == caught-ABRT ]] && { ((nerr != 1)) || ! grep -Eq '^hakmem: .*0x[0-9a-f]+' <<<"$line"; }; then
    echo "FAIL $lib $probe $size: abort with $nerr stderr lines, first: $line"; fails=$((fails + 1))
  elif [[ $need_caught == - && $outcome == caught-* ]]; then
    echo "note $lib $probe $size: $outcome beyond the table${line:+: $line}"
  fi
done <"$tmp/tsv"
((fails == 0)) || die "$fails probe outcomes not as required"
echo "probes: every required outcome held"
