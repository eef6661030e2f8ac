#!/usr/bin/env bash
# scripts/setup.sh — install what hakmem's benchmarks and tests need (Debian/Ubuntu).
#
# Idempotent: installs only the packages that are missing, runs `apt-get update`
# only when the package lists are absent or an install cannot find a package,
# waits for a concurrent apt/dpkg (lock timeout), and prints which peer
# allocators are present.  Needs root for installing (no sudo is used); without
# root it only reports what is missing.  Exit status: 0 when everything is
# installed, 1 when something could not be installed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$ROOT/scripts/lib/common.sh"

# debhelper and lintian: only for tests/cases/pkg_deb.sh (make deb, lintian)
PKGS=(build-essential gcc make libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4 gnuplot-nox strace valgrind
  python3 git sqlite3 pkg-config cmake clang libclang-rt-14-dev redis-server redis-tools debhelper lintian)
export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-y -q -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=900 --no-install-recommends)

installed() {
  [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null) == ii* ]]
}

missing() {
  local p out=()
  for p in "${PKGS[@]}"; do installed "$p" || out+=("$p"); done
  echo "${out[*]}"
}

report_peers() {
  local a lib
  local -a have=() lack=()
  for a in mimalloc jemalloc tcmalloc; do
    if lib=$(alloc_lib "$a"); then have+=("$a ($lib)"); else lack+=("$a"); fi
  done
  echo "setup: peers present: ${have[*]:-none}"
  [[ ${#lack[@]} -eq 0 ]] || echo "setup: peers absent: ${lack[*]}"
}

apt_update() {
  local i
  for i in 1 2 3; do
    if apt-get update -q -o DPkg::Lock::Timeout=900 >/dev/null 2>&1; then return 0; fi
    sleep $((i * 5))
  done
  echo "setup: apt-get update failed" >&2
  return 1
}

command -v dpkg-query >/dev/null 2>&1 || {
  echo "setup: not a Debian-like system (no dpkg-query); install by hand: ${PKGS[*]}" >&2
  exit 1
}

todo=$(missing)
if [[ -z $todo ]]; then
  echo "setup: all packages present"
  report_peers
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  echo "setup: missing packages: $todo" >&2
  echo "setup: run as root: apt-get install -y $todo" >&2
  report_peers
  exit 1
fi

echo "setup: installing: $todo"
read -r -a todo_a <<<"$todo"
# Package lists missing (fresh container): update first.
if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then apt_update || true; fi
logf=$(mktemp)
trap 'rm -f "$logf"' EXIT
ok=0
for attempt in 1 2 3; do
  if apt-get install "${APT_OPTS[@]}" "${todo_a[@]}" >"$logf" 2>&1; then
    ok=1
    break
  fi
  if grep -qE 'Unable to locate package|has no installation candidate|404 +Not Found|Failed to fetch' "$logf"; then
    apt_update || true
  elif grep -qE 'Could not get lock|Unable to acquire the dpkg frontend lock' "$logf"; then
    sleep 10
  else
    sleep 2
  fi
  # A concurrent install may have done the work meanwhile.
  todo=$(missing)
  [[ -z $todo ]] && { ok=1; break; }
  read -r -a todo_a <<<"$todo"
  echo "setup: retrying ($attempt): $todo"
done
if [[ $ok != 1 ]]; then
  echo "setup: apt-get install failed; last lines:" >&2
  tail -n 10 "$logf" >&2
fi
todo=$(missing)
report_peers
if [[ -n $todo ]]; then
  echo "setup: still missing: $todo" >&2
  exit 1
fi
echo "setup: done"
