#!/usr/bin/env bash
# The README's test command: install what the tests need (Debian packages,
# only when missing), build every variant, run every test case.
# Ends with the runner's closing line "N passed, M failed, K skipped".
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f scripts/setup.sh ]; then bash scripts/setup.sh; fi
exec make test "$@"
