#!/usr/bin/env bash
# API conformance against the debug library (-O0, internal assertions), with
# the standard names and with the hak_ names.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-api-debug $T/test-api-hakdebug
run "test-api, standard names, build/debug/libhakmem.a" $T/test-api-debug
run "test-api, hak_ names, build/debug/libhakmem.a" $T/test-api-hakdebug
