#!/usr/bin/env bash
# python3 (PYTHONMALLOC=malloc, so every object goes through malloc) builds
# a dict of 2M entries, deletes a third, sorts; same output with hakmem
# preloaded as without.
set -euo pipefail
. tests/cases/core_lib.sh
command -v python3 >/dev/null || skip "python3 not installed"
need "$SO"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/dict.py" <<'PY'
d = {}
n = 2_000_000
for i in range(n):
    d["k%d" % ((i * 7919) % 10_000_019)] = (i, str(i * 3))
for i in range(0, n, 3):
    del d["k%d" % ((i * 7919) % 10_000_019)]
s = 0
for k, v in d.items():
    s = (s * 31 + len(k) + v[0] + len(v[1])) % (1 << 61)
lst = sorted(d.values(), key=lambda t: t[1])
print(len(d), s, lst[0], lst[-1])
PY
export PYTHONHASHSEED=0 PYTHONMALLOC=malloc PYTHONDONTWRITEBYTECODE=1
run "python3 without hakmem" python3 "$tmp/dict.py" >"$tmp/ref"
run "python3 with LD_PRELOAD=$SO" env LD_PRELOAD="$SO" HAKMEM_STATS=1 python3 "$tmp/dict.py" >"$tmp/out" 2>"$tmp/err"
grep -q '^os:' "$tmp/err" || die "hakmem was not active in python3 (no HAKMEM_STATS report)"
echo "reference: $(cat "$tmp/ref")"
echo "hakmem:    $(cat "$tmp/out")"
cmp -s "$tmp/ref" "$tmp/out" || die "python3 output differs under hakmem"
echo "same output"
