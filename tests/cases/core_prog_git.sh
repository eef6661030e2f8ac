#!/usr/bin/env bash
# git init/add/commit of a generated tree (1500 files), a second commit,
# gc --aggressive, fsck, log -p: tree and commit hashes and the log equal the
# ones made without hakmem (fixed author and committer dates).
set -euo pipefail
. tests/cases/core_lib.sh
command -v git >/dev/null || skip "git not installed"
need "$SO"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export HOME=$tmp GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.org \
  GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.org \
  GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z
gen() {  # gen DIR ROUND
  awk -v d="$1" -v r="$2" 'BEGIN { for (i = 0; i < 1500; i++) {
    if (r == 1 && i % 3 != 0) continue
    if (i < 40) system("mkdir -p " d "/dir" sprintf("%02d", i))
    f = sprintf("%s/dir%02d/file%04d.txt", d, i % 40, i)
    for (j = 0; j < i % 50 + 1; j++) printf "line %d of file %d round %d: %x\n", j, i, r, (i * 2654435761 + j + r) % 4294967296 > f
    close(f) } }'
}
scenario() {  # scenario DIR: prints the hashes, log digest and pack facts
  local d=$1
  mkdir -p "$d"
  gen "$d" 0
  git -C "$d" init -q
  git -C "$d" add -A
  git -C "$d" commit -q -m first
  gen "$d" 1
  git -C "$d" add -A
  git -C "$d" commit -q -m second
  git -C "$d" gc -q --aggressive
  git -C "$d" fsck --strict --no-progress
  git -C "$d" log --format='%T %H'
  git -C "$d" log -p --stat | sha256sum
  git -C "$d" count-objects -v | grep -E '^(count|in-pack|garbage)'
}
scenario "$tmp/ref" >"$tmp/ref.txt"
LD_PRELOAD="$SO" scenario "$tmp/out" >"$tmp/out.txt" || die "git failed under hakmem"
echo "without hakmem:"; sed 's/^/  /' "$tmp/ref.txt"
echo "with hakmem:"; sed 's/^/  /' "$tmp/out.txt"
cmp -s "$tmp/ref.txt" "$tmp/out.txt" || die "git results differ under hakmem"
echo "same trees, commits, log and pack"
