#!/usr/bin/env bash
# Fault injection (issue #6).
# (a) HAKMEM_FAIL_MMAP_AFTER=N HAKMEM_FAIL_MMAP_COUNT=K (test-only switches:
#     after N mmap calls the next K fail with ENOMEM, K=0: all of them).
#     tests/test-faults.c runs every allocating entry point (malloc small /
#     medium / large, calloc, realloc small->large and of live blocks,
#     posix_memalign incl. a 4 MiB alignment, aligned_alloc, memalign, valloc,
#     pvalloc) in rounds: each call succeeds or fails cleanly (NULL + ENOMEM,
#     posix_memalign returns ENOMEM), live blocks stay intact, and once the
#     failures are over every entry point succeeds again.  N sweeps every mmap
#     call of a clean run (heap pool, SuperSlabs, aligned over-mapping, large
#     blocks, the recovery phase), for K = 0, 1 and 3.  N=0 is "off" for
#     hakmem, so the sweep starts at 1.
#     tests/test-faults-cxx.cc: operator new / new[] / aligned new throw
#     std::bad_alloc and the nothrow forms return nullptr, for N = 2..16, K=0.
#     (N=1 leaves hakmem no memory at all before main: libstdc++'s emergency
#     exception pool is then empty too and a throw can only std::terminate.)
# (b) RLIMIT_AS 256 MiB above the current size, in a child: allocate until
#     ENOMEM, free everything, allocate again, raise the limit, allocate more.
set -euo pipefail
. tests/cases/core_lib.sh
# (the sweep counts mmap calls of a clean run: a sampled or guarded block's
# pool, tables and freed pages are calls at moments of their own, which may
# fail without any entry point failing)
sampling_off
make -s all $T/test-faults-release >/dev/null
have_cxx=0
if command -v g++ >/dev/null; then
  make -s $T/test-faults-cxx-release >/dev/null
  have_cxx=1
fi


# A clean run: how many mmap calls the program makes.
clean=$($T/test-faults-release inject) || die "faults inject without injection failed: $clean"
echo "clean run: $clean"
main_calls=$(sed -n 's/.*main_calls=\([0-9]*\).*/\1/p' <<<"$clean")
all_calls=$(sed -n 's/.* mmap_calls=\([0-9]*\).*/\1/p' <<<"$clean")
[[ -n $main_calls && -n $all_calls ]] || die "cannot read the mmap call counts"
((main_calls >= 10)) || die "the clean run made only $main_calls mmap calls"
last=$((all_calls + 4))

runs=0
for k in 0 1 3; do
  summary=""
  for ((n = 1; n <= last; n++)); do
    rc=0
    out=$(HAKMEM_FAIL_MMAP_AFTER=$n HAKMEM_FAIL_MMAP_COUNT=$k timeout -k 5 30 $T/test-faults-release inject 2>&1) || rc=$?
    runs=$((runs + 1))
    f=$(sed -n 's/.*failures=\([0-9]*\).*/\1/p' <<<"$out")
    # this run's own count of mmap calls during the main phase (it varies
    # from run to run: an aligned mapping takes one call or three, as ASLR
    # places it)
    mc=$(sed -n 's/.*main_calls=\([0-9]*\).*/\1/p' <<<"$out")
    mc=${mc:-$main_calls}
    rec=$(sed -n 's/.*recovered=\([01]\).*/\1/p' <<<"$out")
    if ((rc != 0)); then
      bad "N=$n K=$k: exit status $rc: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
    elif [[ -z $f ]]; then
      bad "N=$n K=$k: no summary line: $out"
    elif ((k == 0 && n < mc && f == 0)); then
      bad "N=$n K=$k: mmap failed from call $n on, and no entry point failed"
    elif ((k > 0)) && [[ $rec != 1 ]]; then
      bad "N=$n K=$k: did not recover"
    fi
    summary+=" $n:${f:-?}"
  done
  echo "K=$k: N:failed-calls =$summary"
done
echo "inject: $runs runs (N = 1..$last, K = 0 1 3)"

if ((have_cxx)); then
  for ((n = 2; n <= 16; n++)); do
    rc=0
    out=$(HAKMEM_FAIL_MMAP_AFTER=$n HAKMEM_FAIL_MMAP_COUNT=0 timeout -k 5 30 $T/test-faults-cxx-release 2>&1) || rc=$?
    if ((rc != 0)) || [[ $(tail -n 1 <<<"$out") != ok ]]; then
      bad "C++ N=$n: exit status $rc: $(tr '\n' ' ' <<<"$out")"
    else
      echo "ok    C++ N=$n: $(head -n 1 <<<"$out")"
    fi
  done
else
  echo "note: g++ missing: the C++ part is skipped"
fi

rc=0
out=$(timeout -k 5 60 $T/test-faults-release rlimit 2>&1) || rc=$?
echo "$out" | sed 's/^/rlimit: /'
((rc == 0)) || bad "rlimit: exit status $rc"

checks_done fault-injection
echo "all fault-injection checks passed"
