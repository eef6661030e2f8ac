#!/usr/bin/env bash
# Valgrind memcheck over hakmem's own code: test-api, test-model and a small
# threaded stress, hak_ names, linked with the release library.  hakmem maps
# its memory itself, so memcheck checks hakmem's accesses (and the tests'),
# not the blocks.  malloc in the executable is hakmem's: keep valgrind from
# redirecting it (--soname-synonyms=somalloc=nouserintercepts).
set -euo pipefail
. tests/cases/core_lib.sh
command -v valgrind >/dev/null || skip "valgrind not installed"
need $T/test-api-hak $T/test-model-hak $T/test-threads-hak
vg=(valgrind --error-exitcode=99 -q --soname-synonyms=somalloc=nouserintercepts)
run "valgrind test-api (hak_ names, build/libhakmem.a)" "${vg[@]}" $T/test-api-hak
run "valgrind test-model, 100k ops" env HT_SEED=31 "${vg[@]}" $T/test-model-hak 100000
run "valgrind test-threads stress, 4 threads" "${vg[@]}" $T/test-threads-hak stress 4 2 100
