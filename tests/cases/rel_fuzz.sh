#!/usr/bin/env bash
# Fuzzing (issue #6): tests/fuzz/fuzz_api.c drives random sequences of every
# hak_* call against a model of the live blocks (contents, usable sizes,
# alignment, calloc zeroing, realloc prefix, errno), under libFuzzer, ASan
# and UBSan, for FUZZ_SECONDS (default 60) from a temporary copy of the seed
# corpus tests/fuzz/corpus/ (the repository is not modified).  Fails on any
# crash, model mismatch, sanitizer report, timeout or out-of-memory.
#
# The library is compiled again for this (tests/tests.mk): src/unity.c with
# clang, the `make asan` flags with the debug build's assertions
# (HAK_DEBUG=2) and -fsanitize=fuzzer-no-link, so libFuzzer sees hakmem's
# branches (build/asan/libhakmem.a is built by gcc, without coverage: it
# links and runs, but the fuzzer is then blind to the library and only sees
# its own 4 branches).  FUZZ_LIB=asan fuzzes with build/asan/libhakmem.a
# anyway.  Afterwards the grown corpus is replayed through a standalone
# build of the driver (cc, no libFuzzer) linked with build/asan/libhakmem.a,
# so `make asan`'s library sees every input too.
#
# Environment: FUZZ_SECONDS  time to fuzz (default 60)
#              FUZZ_SEED     libFuzzer seed (default: random, printed)
#              FUZZ_KEEP     directory to copy the grown corpus and any crash to
#              REL_STRICT=1  do not steer around library bugs already reported
#                            (FUZZ_AVOID_KNOWN, see fuzz_api.c)
# Reproduce a crash: build/tests/fuzz/fuzz_api FILE (FUZZ_TRACE=1 prints the calls).
set -euo pipefail
. tests/cases/core_lib.sh
command -v clang >/dev/null || skip "clang not installed"
FZ=build/tests/fuzz
mkdir -p $FZ
secs=${FUZZ_SECONDS:-60}

# libFuzzer present?  (Debian: libclang-rt-14-dev, pulled in by clang-14)
echo 'int LLVMFuzzerTestOneInput(const char* d, unsigned long n) { return 0; }' >$FZ/probe.c
clang -fsanitize=fuzzer $FZ/probe.c -o $FZ/probe 2>/dev/null || skip "clang cannot link libFuzzer (install libclang-rt-14-dev)"

# (the library with every assertion, the expensive walks too, the debug
# build's level: the fuzzer's sequences reach states the other tests do not)
make -s FUZZ_LIB="${FUZZ_LIB:-clang}" $FZ/fuzz_api || die "cannot build $FZ/fuzz_api"

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/corpus"
cp tests/fuzz/corpus/* "$tmp/corpus/"
echo "seed corpus: $(ls "$tmp/corpus" | wc -l) files; fuzzing for ${secs}s"
if [[ ${REL_STRICT:-1} != 1 ]]; then export FUZZ_AVOID_KNOWN=1; fi
seed=()
[[ -n ${FUZZ_SEED:-} ]] && seed=(-seed="$FUZZ_SEED")
rc=0
# -rss_limit_mb: the model caps live blocks at 256 MiB; BigCache, ASan and
# libFuzzer come on top, and ASan's shadow of every address range hakmem has
# ever mapped stays resident after munmap: large blocks mapped and unmapped
# at new addresses grow the process by ~40 MB/s of fuzzing while hakmem's own
# mapping stays small (HAKMEM_STATS: mapped 25 MB, RSS 560 MB after 10 s),
# so the limit is set far above what hakmem holds.  -timeout: one input may
# not take 30 s.
ASAN_OPTIONS=abort_on_error=0:halt_on_error=1:detect_leaks=0:allocator_may_return_null=1 \
  $FZ/fuzz_api "${seed[@]}" -max_total_time="$secs" -timeout=30 -rss_limit_mb=8192 -max_len=4096 \
  -print_final_stats=1 -artifact_prefix="$tmp/" "$tmp/corpus" >"$tmp/log" 2>&1 || rc=$?
grep -E '^INFO: Seed|^#[0-9]+.*(INITED|DONE)|^Done|^stat::' "$tmp/log" || true
if [[ -n ${FUZZ_KEEP:-} ]]; then
  mkdir -p "$FUZZ_KEEP"
  cp -r "$tmp/corpus" "$tmp/log" "$FUZZ_KEEP/"
  cp "$tmp"/crash-* "$tmp"/timeout-* "$tmp"/oom-* "$tmp"/leak-* "$FUZZ_KEEP/" 2>/dev/null || true
fi
bad=$(grep -m 5 -E 'ERROR: |CHECK FAILED|runtime error|==[0-9]+==' "$tmp/log" || true)
if ((rc != 0)) || [[ -n $bad ]]; then
  grep -B2 -A25 -E 'CHECK FAILED|ERROR: ' "$tmp/log" >"$tmp/errs" || tail -n 40 "$tmp/log"
  head -n 60 "$tmp/errs"
  for a in "$tmp"/crash-* "$tmp"/timeout-* "$tmp"/oom-*; do
    [[ -e $a ]] || continue
    echo "input that failed ($(basename "$a")), base64: $(base64 -w0 "$a")"
    echo "  reproduce: printf %s '$(base64 -w0 "$a")' | base64 -d >in && FUZZ_TRACE=1 $FZ/fuzz_api in"
  done
  die "the fuzzer found a problem (exit status $rc)"
fi
# The grown corpus once more, through the standalone driver (no libFuzzer)
# built by cc against `make asan`'s own build/asan/libhakmem.a.
make -s $FZ/fuzz_api_replay || die "cannot build $FZ/fuzz_api_replay"
nin=$(ls "$tmp/corpus" | wc -l)
$FZ/fuzz_api_replay "$tmp"/corpus/* >"$tmp/replay" 2>&1 || {
  tail -n 30 "$tmp/replay"
  die "replaying the corpus against build/asan/libhakmem.a failed"
}
echo "replayed the $nin corpus files against build/asan/libhakmem.a: ok"
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/log")
cov=$(grep -E '^#[0-9]+.*DONE' "$tmp/log" | grep -Eo 'cov: [0-9]+ ft: [0-9]+' | tail -n 1)
echo "ok: $execs inputs in ${secs}s, no crash (${cov:-coverage not reported})"
