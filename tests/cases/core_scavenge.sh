#!/usr/bin/env bash
# Scavenging (src/scavenge.c): after scattered frees the free 4 KiB pages of
# sparse slabs go back to the OS without moving a block.  `fragment` (64 MB
# of 16 B - 4 KiB blocks, 90 % freed at random, regrown with 4 - 64 KiB
# blocks; one thread, fixed seed: the figures repeat to a few kB) must end
# within 1.65x its live bytes (2.17x without scavenging) and below 0.75x of
# the same run with HAKMEM_SCAVENGE=0; the stats report shows the pages given
# back (no such line when scavenging is off, or HAKMEM_DECOMMIT=off stops
# it).  A program that frees 90 % of its blocks at random and goes on
# without growing gets the pages back on its release tick within a bound of
# 30 s (2 s with the default delay; test-scavenge.c).  The threaded case (blocks checked word by word while other threads
# free into the slabs being scavenged, phantoms taken back by refills) runs
# in core_threads_stress and, under TSan, core_threads_tsan.
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s all bench-progs >/dev/null
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run() {   # run LABEL ENV... : RESULT line of fragment --mb=64 into $tmp/LABEL
  local label=$1; shift
  env "$@" HAKMEM_STATS=1 LD_PRELOAD=build/libhakmem.so build/bench/fragment --mb=64 >"$tmp/$label" 2>&1 ||
    { cat "$tmp/$label"; echo "FAIL: fragment ($label) failed"; exit 1; }
}
field() { grep -o "$2=[0-9.]*" "$tmp/$1" | head -1 | cut -d= -f2; }
run on -u HAKMEM_PROFILE
run off -u HAKMEM_PROFILE HAKMEM_SCAVENGE=0
on=$(field on rss_final_kb) off=$(field off rss_final_kb) ovh=$(field on final_overhead)
given=$(field on pages_given_back)
echo "fragment --mb=64: final RSS ${on} kB with scavenging (overhead ${ovh}x live), ${off} kB without; ${given:-0} pages given back"
[[ -n $given && $given -gt 0 ]] || { echo "FAIL: no 'scavenge: ... pages_given_back=' count above 0"; exit 1; }
awk -v o="$ovh" 'BEGIN { exit !(o <= 1.65) }' || { echo "FAIL: final RSS ${ovh}x the live bytes (bound 1.65x)"; exit 1; }
awk -v a="$on" -v b="$off" 'BEGIN { exit !(a <= 0.75 * b) }' || { echo "FAIL: ${on} kB is not below 0.75x of ${off} kB"; exit 1; }
grep -q '^scavenge: ' "$tmp/off" && { echo "FAIL: a scavenge line with HAKMEM_SCAVENGE=0"; exit 1; }
# nothing is decommitted, so nothing is scavenged, and the report says neither
HAKMEM_DECOMMIT=off HAKMEM_STATS=1 LD_PRELOAD=build/libhakmem.so /bin/true 2>"$tmp/nodecommit"
grep -q '^small: ' "$tmp/nodecommit" || { cat "$tmp/nodecommit"; echo "FAIL: no stats report"; exit 1; }
grep -q '^scavenge: ' "$tmp/nodecommit" && { echo "FAIL: a scavenge line with HAKMEM_DECOMMIT=off"; exit 1; }
# without growth: the release tick gives the pages back, no malloc_trim
make -s build/tests/test-scavenge-release >/dev/null
env -u HAKMEM_PROFILE build/tests/test-scavenge-release
env -u HAKMEM_PROFILE HAKMEM_SCAVENGE=0 build/tests/test-scavenge-release
env HAKMEM_PROFILE=lean build/tests/test-scavenge-release
echo "scavenging: ok"
