#!/usr/bin/env bash
# White-box: the slab arithmetic behind the free fast path's one-compare
# check (carved block start), checked exhaustively for every size class; and
# the debug build's assertions: a slab whose counts disagree stops the
# program with one line (condition, values, file and line) and SIGABRT.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-internal-release $T/test-internal-debug
run "slab arithmetic, every class and offset" $T/test-internal-release

echo "== an assertion of the debug build fails: one line, then abort" >&2
echo "\$ $T/test-internal-debug assert" >&2
rc=0
err=$($T/test-internal-debug assert 2>&1 >/dev/null) || rc=$?
echo "$err" | sed 's/^/    | /' >&2
((rc == 134)) || die "exit status $rc, not 134 (SIGABRT)"
[[ $(grep -c . <<<"$err") == 1 ]] || die "not one line on stderr"
grep -Eq '^hakmem: assertion failed: .+ \([0-9a-fx]+ against [0-9a-fx]+\) at src/[a-z]+\.c:[0-9]+$' <<<"$err" ||
  die "the line does not name the condition, its values, file and line"
echo "ok   the assertion's line names what failed, with its values"
