#!/usr/bin/env bash
# API conformance, standard names (malloc, free, ...) against the release
# static library, which overrides malloc for the whole program.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-api-release
run "test-api, standard names, build/libhakmem.a" $T/test-api-release
