#!/usr/bin/env bash
# A small program pays little of the library (docs/DESIGN.md, "A small
# program"): the code every process runs is one group of pages (hak_warm),
# the libraries are linked with 64 KiB segment alignment, and the kernel maps
# a file's pages 64 KiB around each first touch -- so `smallproc` (100
# blocks, no stdio) has at most 64 KiB of libhakmem.so's code resident, and
# at most 136 KiB of its file pages in all.  Before the grouping, every page
# of the code was resident (92 KiB, 160 KiB in all).  Both preloaded and
# linked; also with HAKMEM_STATS=1, whose report at exit runs more code (only
# the bound on the code before exit is asserted: smallproc reads its pages
# before it returns).  A bound on pages, not a time; the same in every run.
set -euo pipefail
. tests/cases/core_lib.sh
# The defaults sample one allocation per 2 MiB and guard one in 50,000:
# smallproc's 40 KB are sampled or guarded in about 3 runs in 100, and such
# a run loads the unwinder and the profiler's code, by design (test-prof
# lazy asserts that 10 blocks load nothing).  The bound here is the
# allocator's own code: both off.
sampling_off
make -s all bench-progs >/dev/null
need "$SO" build/bench/smallproc
for i in 1 2 3; do
  for mode in preload stats; do
    if [[ $mode == preload ]]; then out=$(LD_PRELOAD=$SO build/bench/smallproc)
    else out=$(HAKMEM_STATS=1 LD_PRELOAD=$SO build/bench/smallproc 2>/dev/null); fi
    text=$(sed -n 's/.*HakText:\([0-9]*\)kB.*/\1/p' <<<"$out")
    file=$(sed -n 's/.*HakFile:\([0-9]*\)kB.*/\1/p' <<<"$out")
    echo "run $i ($mode): $out"
    [[ -n $text && -n $file ]] || die "smallproc printed no HakText/HakFile: $out"
    ((file > 0)) || die "smallproc found no libhakmem mapping: $out"
    ((text <= 64)) || bad "run $i ($mode): $text KiB of libhakmem.so's code resident (bound 64)"
    ((file <= 136)) || bad "run $i ($mode): $file KiB of libhakmem.so's file pages resident (bound 136)"
  done
done
checks_done "small-program"
echo "ok: a small program keeps at most 64 KiB of the library's code resident"
