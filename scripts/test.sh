#!/usr/bin/env bash
# scripts/test.sh — the README's test command: install what the tests need (Debian packages,
# only when missing: scripts/setup.sh), build every variant, run every test
# case, independent cases in parallel.
#
#   scripts/test.sh [PATTERN ...]   run the cases whose name contains PATTERN
#                                   (an argument NAME=VALUE is given to make)
#   scripts/test.sh --help          this text
#
# Environment: J=N  cases run at once (default: the number of CPUs, at least 2);
#              SETUP=0  do not run scripts/setup.sh
# Ends with the runner's closing line "N passed, M failed, K skipped".
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
  exit 0
fi
jobs=${J:-$(nproc 2>/dev/null || echo 2)}
[[ -n ${J:-} ]] || ((jobs >= 2)) || jobs=2
pats=() vars=()
for a in "$@"; do
  if [[ $a == *=* ]]; then vars+=("$a"); else pats+=("$a"); fi
done
if [[ ${SETUP:-1} != 0 && -f scripts/setup.sh ]]; then bash scripts/setup.sh; fi
exec make test J="$jobs" ${pats[@]:+TESTS="${pats[*]}"} "${vars[@]}"
