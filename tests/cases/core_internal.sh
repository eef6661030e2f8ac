#!/usr/bin/env bash
# White-box: the slab arithmetic behind the free fast path's one-compare
# check (carved block start), checked exhaustively for every size class.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-internal-release
run "slab arithmetic, every class and offset" $T/test-internal-release
