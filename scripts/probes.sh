#!/usr/bin/env bash
# scripts/probes.sh [NAME=LIB.so ...] — which heap misuse does each allocator stop?
#
# Runs every probe of tests/test-probes.c and tests/test-probes-cxx.cc (issue
# #11: over/underflow, write/read after free, immediate reuse, uninitialised
# reads, zero-size blocks, C++ delete mismatches; 8 B, 4 KiB and 256 KiB) as a
# child process under LD_PRELOAD=LIB.so ("glibc" = no preload) and prints one
# line per probe and allocator, then "NAME: caught C / T" per allocator.
# Outcomes: caught-held (the property held: fill read back, another block
# returned), caught-SIG (killed by a signal: SIGABRT after a report, SIGSEGV
# on a guard page), missed, or error (hang, exit status other than 0).
#
# Without NAME=LIB arguments: glibc, hakmem (build/libhakmem.so),
# hakmem-secure (build/libhakmem-secure.so), and the peers found: mimalloc's
# secure build and hardened_malloc in ../shared/peers, scudo from Debian's
# libclang-rt-14-dev.
#
# With -s, runs the heap-exploitation cases of tests/test-exploits.c and
# test-exploits-cxx.cc instead (issue #30: our versions of mimalloc-bench's 116
# security cases), judged as that suite judges them: a case prints
# NOT_CAUGHT after its misuse, and is missed when that line appears (even if
# the program crashes later, at exit); caught otherwise (stopped by a signal
# or an exit status, or the property held: caught-held).
#
# Options: -o FILE   also write the outcomes as TSV (allocator probe size
#                    outcome address stderr-lines first-stderr-line) to FILE
#          -q        only the summary lines
#          -s        the exploitation cases, not the probes
# Environment: PROBE_TIMEOUT seconds per probe (60; with -s 10: the suite
# gives a case 1 s, a loaded machine needs more).  Builds the probe programs
# into build/tests/ (make; needs cc, g++).  Exit status 0, 2 on errors of use.
set -euo pipefail
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="" quiet=0 suite=0 libs=()
while (($# > 0)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    -o) (($# >= 2)) || { echo "probes.sh: -o needs a file" >&2; exit 2; }; out=$2; shift ;;
    -q) quiet=1 ;;
    -s) suite=1 ;;
    *=*) libs+=("$1") ;;
    *) echo "probes.sh: unknown argument '$1' (want NAME=LIB.so; --help)" >&2; exit 2 ;;
  esac
  shift
done
cd "$root"
if ((${#libs[@]} == 0)); then
  libs=(glibc= hakmem="$root/build/libhakmem.so" hakmem-secure="$root/build/libhakmem-secure.so")
  peers=$root/../shared/peers
  [[ -e $peers/mimalloc-2.4.1/libmimalloc-secure.so ]] && libs+=(mimalloc-secure="$(cd "$peers" && pwd)/mimalloc-2.4.1/libmimalloc-secure.so")
  for h in "$peers"/hardened_malloc-*/libhardened_malloc.so; do
    [[ -e $h ]] && libs+=(hardened_malloc="$(cd "$(dirname "$h")" && pwd)/libhardened_malloc.so")
  done
  s=$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.scudo_standalone-x86_64.so 2>/dev/null | head -n 1 || true)
  [[ -n $s ]] && libs+=(scudo="$s")
fi
for l in "${libs[@]}"; do
  f=${l#*=}
  [[ -z $f || -e $f ]] || { echo "probes.sh: ${l%%=*}: no file $f" >&2; exit 2; }
done

# (tests/tests.mk: the exploitation cases are built as the suite builds its
# own, with no optimisation and no builtins)
bin=build/tests
make -s $bin/test-probes-glibc $bin/test-probes-cxx-glibc $bin/test-exploits-glibc $bin/test-exploits-cxx-glibc >/dev/null
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
timeout_s=${PROBE_TIMEOUT:-$((suite ? 10 : 60))}
[[ -n $out ]] && : >"$out"

if ((suite)); then
  cases=$( { "$bin/test-exploits-glibc" list | sed 's/^/test-exploits-glibc /'; "$bin/test-exploits-cxx-glibc" list | sed 's/^/test-exploits-cxx-glibc /'; } )
else
  cases=$( { "$bin/test-probes-glibc" list | sed 's/^/test-probes-glibc /'; "$bin/test-probes-cxx-glibc" list | sed 's/^/test-probes-cxx-glibc /'; } )
fi
for l in "${libs[@]}"; do
  name=${l%%=*} lib=${l#*=} caught=0 total=0
  while read -r prog probe size; do
    rc=0
    # (the inner shell absorbs bash's "Aborted" job message)
    bash -c 'if [[ -n $4 ]]; then export LD_PRELOAD=$4; fi; ulimit -c 0
      timeout -k 5 "$1" "$2" "$3" "$5" >"$0/out" 2>"$0/err"' \
      "$tmp" "$timeout_s" "$bin/$prog" "$probe" "$lib" "$size" 2>/dev/null || rc=$?
    line=$(grep -m 1 . "$tmp/err" || true)
    # a miss reported is a miss, whatever happens after it (a crash at exit)
    if grep -aqx missed "$tmp/out" || grep -aq NOT_CAUGHT "$tmp/out"; then outcome=missed
    elif ((rc == 124 || rc == 137)); then outcome=error-hang
    elif ((rc > 128)); then outcome=caught-$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128)))
    elif ((rc == 0)) && { ((suite)) || grep -qx held "$tmp/out"; }; then outcome=caught-held
    elif ((suite)); then outcome=caught-exit$rc   # (the suite's rule: no NOT_CAUGHT line)
    else outcome=error-exit$rc
    fi
    total=$((total + 1))
    [[ $outcome == caught-* ]] && caught=$((caught + 1))
    addr=$(sed -n 's/^addr=//p' "$tmp/out" | tail -n 1)
    addr=${addr:--}   # (an empty field would vanish when the TSV is read back with IFS=tab)
    ((quiet)) || printf '%-16s %-22s %6s  %-14s %s\n' "$name" "$probe" "$size" "$outcome" "${line:0:110}"
    nerr=$(wc -l <"$tmp/err")
    [[ -z $out ]] || printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$probe" "$size" "$outcome" "$addr" "$nerr" "$line" >>"$out"
  done <<<"$cases"
  echo "$name: caught $caught / $total"
done
