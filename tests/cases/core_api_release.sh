#!/usr/bin/env bash
# API conformance, standard names (malloc, free, ...) against the release
# static library, which overrides malloc for the whole program; in the
# default profile, the speed and lean profiles, and lean with MADV_FREE.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-api-release
run "test-api, standard names, build/libhakmem.a" $T/test-api-release
run "test-api, HAKMEM_PROFILE=speed" env HAKMEM_PROFILE=speed $T/test-api-release
run "test-api, HAKMEM_PROFILE=lean" env HAKMEM_PROFILE=lean $T/test-api-release
run "test-api, HAKMEM_PROFILE=lean HAKMEM_DECOMMIT=free" env HAKMEM_PROFILE=lean HAKMEM_DECOMMIT=free $T/test-api-release
