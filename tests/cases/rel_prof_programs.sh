#!/usr/bin/env bash
# Heap profiles of real programs (Debian's, built without frame pointers):
# python3 (every object through malloc; the profile written on a signal
# while its dict is live) and git (log -p over a fresh repository) run with
# HAKMEM_PROF=1 under LD_PRELOAD; google-pprof loads each profile, and its
# top entries are named functions of the program or its libraries (Python's
# object and string allocators; zlib's inflate or libc's for git), not bare
# addresses.  Their output is the same as without hakmem.
set -euo pipefail
. tests/cases/core_lib.sh
command -v google-pprof >/dev/null || skip "google-pprof not installed (package google-perftools)"
need "$SO"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# top PROGRAM PROFILE [OPTION...]: the names of the five first entries
top() { google-pprof --text "${@:3}" "$1" "$2" 2>/dev/null | awk '$1 ~ /^[0-9.]+$/ && NF >= 6 && n++ < 5 { print $6 }'; }
# named NAMES: how many are not addresses
named() { grep -vc '^0x' <<<"$1" || true; }

py=$(readlink -f /usr/bin/python3 2>/dev/null || true)
if [[ -x $py ]]; then
  echo "== python3 ($py)"
  cat >"$tmp/d.py" <<'PY'
import os, signal
d = {}
for i in range(400_000):
    d["key-%d" % i] = [i, str(i * 3), (i, i + 1)]
if os.environ.get("HAKMEM_PROF_SIGNAL"):   # 12: the profile, with d live
    os.kill(os.getpid(), signal.SIGUSR2)
print(len(d), sum(v[0] for v in d.values()))
PY
  export PYTHONMALLOC=malloc PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1
  ref=$("$py" "$tmp/d.py")
  out=$(env HAKMEM_PROF=1 HAKMEM_PROF_SIGNAL=12 HAKMEM_PROF_PREFIX="$tmp/py" LD_PRELOAD="$SO" "$py" "$tmp/d.py")
  [[ $out == "$ref" ]] || bad "python3's output differs under profiling: '$out' vs '$ref'"
  f=$(ls "$tmp"/py.*.0.heap | awk 'NR == 1')
  names=$(top "$py" "$f")
  echo "$names"
  total=$(google-pprof --text "$py" "$f" 2>/dev/null | awk '/^Total:/ { print $2 }')
  echo "live: ${total:-?} MB"
  (($(named "$names") >= 4)) || bad "python3's top entries are not named: $names"
  grep -q 'Py' <<<"$names" || bad "python3's top entries name no Python function: $names"
  awk -v t="${total:-0}" 'BEGIN { exit !(t >= 20) }' || bad "python3's live estimate ${total:-none} MB (its dict alone holds more than 40)"
  unset PYTHONMALLOC
else
  echo "skip python3: not installed"
fi

if command -v git >/dev/null; then
  g=$(readlink -f "$(command -v git)")
  echo "== git ($g)"
  mkdir "$tmp/repo"
  (
    cd "$tmp/repo"
    git init -q
    for i in $(seq 1 200); do seq 1 $((i * 20)) >"f$i.txt"; done
    git add .
    git -c user.email=t@example.org -c user.name=t commit -qm one
    for i in $(seq 1 200 3); do seq 5 $((i * 21)) >"f$i.txt"; done
    git -c user.email=t@example.org -c user.name=t commit -qam two
  )
  ref=$(git -C "$tmp/repo" log -p --stat | md5sum)
  out=$(env HAKMEM_PROF=1 HAKMEM_PROF_RATE=64K HAKMEM_PROF_PREFIX="$tmp/git" LD_PRELOAD="$SO" git -C "$tmp/repo" log -p --stat | md5sum)
  [[ $out == "$ref" ]] || bad "git's output differs under profiling"
  f=$(ls "$tmp"/git.*.0.heap | awk 'NR == 1')
  names=$(top "$g" "$f" --alloc_space)
  echo "$names"
  (($(named "$names") >= 3)) || bad "git's top entries are not named: $names"
else
  echo "skip git: not installed"
fi
checks_done "real-program profile"
