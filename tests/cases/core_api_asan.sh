#!/usr/bin/env bash
# API conformance, hak_ names, against the ASan+UBSan library: the test
# writes every byte of every usable size; sanitizer reports are fatal.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-api-asan
run "test-api, hak_ names, build/asan/libhakmem.a (-fsanitize=address,undefined)" $T/test-api-asan
