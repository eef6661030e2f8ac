#!/usr/bin/env bash
# scripts/setup.sh — install what hakmem's benchmarks and tests need (Debian/Ubuntu).
#
#   scripts/setup.sh [--bench] [--list]
#   scripts/setup.sh --help    this text
#
# Installs the missing packages of the list below (scripts/test.sh runs it),
# or with --bench only those the benchmarks need (scripts/bench.sh runs
# `setup.sh --bench` when a peer allocator is missing).  --list prints the
# packages and whether each is installed, and installs nothing.
#
# The packages, with --no-install-recommends:
#   benchmarks (--bench): build-essential gcc make python3 git gnuplot-nox strace
#          libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4 (the peers)
#   tests, in addition: valgrind sqlite3 pkg-config cmake clang
#          libclang-rt-14-dev redis-server redis-tools ruby google-perftools
#          graphviz libunwind8 mariadb-server sysbench memcached libmemcached-tools
#          (clang and its sanitizer runtime build the fuzz test, cmake the CMake
#          consumer test, sqlite3 and redis are programs run under hakmem, ruby
#          one of scripts/programs.sh's; google-pprof reads the heap profiles,
#          graphviz draws its --svg call graphs, libunwind walks the profiles'
#          stacks: tests/cases/core_prof.sh, rel_prof_programs.sh; the servers
#          and their load generators serve scripts/programs.sh servers)
# Services are not started: while apt-get installs, a /usr/sbin/policy-rc.d
# that exits 101 denies every service start (an existing policy-rc.d is put
# back afterwards), and a service unit a package brought in this run is
# disabled (redis-server, mariadb-server, memcached: deb-systemd-helper,
# update-rc.d), so no such daemon runs now or after a reboot.  The tests and
# scripts/programs.sh start the servers themselves, on 127.0.0.1 or a unix
# socket, and stop them by their process id.
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

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  script_help
  exit 0
fi
only_bench=0 list=0
for a in "$@"; do
  case $a in
    --bench) only_bench=1 ;;
    --list) list=1 ;;
    *) die "unknown argument '$a' (see --help)" ;;
  esac
done
PKGS=(build-essential gcc make python3 git gnuplot-nox strace libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4)
if ((!only_bench)); then
  # debhelper and lintian: only for tests/cases/pkg_deb.sh (make deb, lintian)
  PKGS+=(valgrind sqlite3 pkg-config cmake clang libclang-rt-14-dev redis-server redis-tools ruby google-perftools graphviz
    libunwind8 debhelper lintian mariadb-server sysbench memcached libmemcached-tools)
fi
# packages whose service must not run: PACKAGE:UNIT (the systemd unit and the
# init script are both named UNIT)
SERVICES=(redis-server:redis-server mariadb-server:mariadb memcached:memcached)
POLICY_RC_D=${POLICY_RC_D:-/usr/sbin/policy-rc.d}   # a test points this elsewhere
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

# Deny service starts while apt-get runs; the previous policy-rc.d (if any) is
# kept aside and put back by no_services_end.
policy_saved="" policy_ours=0
no_services_begin() {
  policy_ours=1
  if [[ -e $POLICY_RC_D || -L $POLICY_RC_D ]]; then
    policy_saved=$(mktemp "$POLICY_RC_D.hakmem-saved.XXXXXX")
    mv -f "$POLICY_RC_D" "$policy_saved"
  fi
  printf '#!/bin/sh\n# scripts/setup.sh (hakmem): no service starts while it installs packages\nexit 101\n' \
    >"$POLICY_RC_D"
  chmod 755 "$POLICY_RC_D"
}
no_services_end() {
  ((policy_ours)) || return 0
  rm -f "$POLICY_RC_D"
  if [[ -n $policy_saved ]]; then mv -f "$policy_saved" "$POLICY_RC_D"; fi
  policy_saved="" policy_ours=0
}
# A service package installed in this run: not started at boot either.
disable_services() {
  local p u
  for p in "${SERVICES[@]}"; do
    u=${p#*:} p=${p%%:*}
    [[ " $1 " == *" $p "* ]] && installed "$p" || continue
    if command -v deb-systemd-helper >/dev/null 2>&1; then deb-systemd-helper disable "$u.service" >/dev/null 2>&1 || true; fi
    if command -v update-rc.d >/dev/null 2>&1; then update-rc.d "$u" disable >/dev/null 2>&1 || true; fi
    echo "setup: $p installed with its service disabled (the tests start it themselves)"
  done
}

command -v dpkg-query >/dev/null 2>&1 || {
  echo "setup: not a Debian-like system (no dpkg-query); install by hand: ${PKGS[*]}" >&2
  exit 1
}

if ((list)); then
  for p in "${PKGS[@]}"; do
    if installed "$p"; then echo "$p installed"; else echo "$p missing"; fi
  done
  exit 0
fi

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
wanted=$todo
read -r -a todo_a <<<"$todo"
# Package lists missing (fresh container): update first.
if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then apt_update || true; fi
logf=$(mktemp)
trap 'no_services_end; rm -f "$logf"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
ok=0
for attempt in 1 2 3; do
  no_services_begin
  rc=0
  apt-get install "${APT_OPTS[@]}" "${todo_a[@]}" >"$logf" 2>&1 || rc=$?
  no_services_end
  if ((rc == 0)); then
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
disable_services "$wanted"
todo=$(missing)
report_peers
if [[ -n $todo ]]; then
  echo "setup: still missing: $todo" >&2
  exit 1
fi
echo "setup: done"
