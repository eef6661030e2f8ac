#!/usr/bin/env bash
# Call-site learning: identity of call sites (C and C++ new), a bounded table
# under 100,000 distinct sites, convergence on workloads with a known best
# strategy, learned hints (long-lived blocks keep no idle pages, growing
# blocks start in a block covering their final size), learning off = the
# profile's behaviour, and no data race (TSan).
# serial: learning weighs measured times (tests/run.sh -j runs it alone)
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s all tsan >/dev/null
mkdir -p build/tests
make -s build/tests/test-sites-release build/tests/test-sites-tsan >/dev/null
T=build/tests/test-sites-release
run() { echo "+ $*"; env -u HAKMEM_PROFILE "$@"; }

run HAKMEM_LEARN=1 $T identity
run HAKMEM_STATS=1 $T identity 2>/dev/null   # tracked for the report too
run HAKMEM_LEARN=1 $T bounded
run HAKMEM_LEARN=1 HAKMEM_LEARN_SEED=7 $T converge_cache
run HAKMEM_LEARN=1 HAKMEM_LEARN_SEED=7 HAKMEM_LEARN_BYTE_COST=2000000000 HAKMEM_BIGCACHE_MAX_MB=1024 $T converge_release
run HAKMEM_LEARN=1 $T long_trim
run HAKMEM_LEARN=1 $T grow_hint
run HAKMEM_LEARN=1 HAKMEM_DECOMMIT=dontneed $T ring on
run HAKMEM_LEARN=0 HAKMEM_DECOMMIT=dontneed $T ring off

# learning off: the same OS calls as with no site tracking at all
a=$(env -u HAKMEM_PROFILE $T off | grep '^off:')
b=$(env -u HAKMEM_PROFILE HAKMEM_LEARN=0 HAKMEM_STATS=1 $T off 2>/dev/null | grep '^off:')
echo "no tracking: $a"
echo "tracked, learning off: $b"
[ "$a" = "$b" ] || { echo "FAIL: learning off changed the behaviour"; exit 1; }

# HAKMEM_LEARN_LOG prints decision changes (two runs with one seed draw the
# same exploration numbers; their decisions still follow measured times)
d1=$(HAKMEM_LEARN=1 HAKMEM_LEARN_LOG=1 HAKMEM_LEARN_SEED=3 $T converge_cache 2>&1 | grep -c 'learn: site' || true)
d2=$(HAKMEM_LEARN=1 HAKMEM_LEARN_LOG=1 HAKMEM_LEARN_SEED=3 $T converge_cache 2>&1 | grep -c 'learn: site' || true)
echo "decision changes: $d1 / $d2"
[ "$d1" -gt 0 ] || { echo "FAIL: HAKMEM_LEARN_LOG printed no decision"; exit 1; }

# C++ operator new: the site is the caller of new, not hakmem
cat > build/tests/site-cxx.cc <<'CXX'
#include <cstdio>
#include <cstdint>
#include "hakmem.h"
__attribute__((noinline)) static char* make() { return new char[1 << 20]; }
int main() {
  char* p = make();
  uintptr_t s = (uintptr_t)hak_block_site(p);
  bool ok = s > (uintptr_t)&make && s < (uintptr_t)&make + 64;
  std::printf("cxx site %p in make %p: %s\n", (void*)s, (void*)&make, ok ? "ok" : "FAILED");
  delete[] p;
  return ok ? 0 : 1;
}
CXX
c++ -O1 -fno-omit-frame-pointer -Iinclude build/tests/site-cxx.cc build/libhakmem.a -pthread -o build/tests/site-cxx
run HAKMEM_LEARN=1 build/tests/site-cxx

# the page-fault cost the learning charges is measured on this machine, and reported
make -s bench-progs >/dev/null
line=$(env HAKMEM_STATS=1 HAKMEM_LEARN=1 LD_PRELOAD=build/libhakmem.so build/bench/sites --iters=100 2>&1 >/dev/null | grep '^sites: ' || true)
echo "+ $line"
ns=$(sed -n 's/.*page fault measured at \([0-9]*\) ns.*/\1/p' <<<"$line")
if [[ -z $ns ]] || ((ns < 100 || ns > 20000)); then echo "FAIL: no measured page-fault cost in the report: $line"; exit 1; fi

# threads under TSan (hak_ names, TSan build of the library)
run TSAN_OPTIONS="halt_on_error=1 exitcode=66" HAKMEM_LEARN=1 build/tests/test-sites-tsan threads
echo "site learning: all scenarios passed"
