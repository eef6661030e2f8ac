#!/bin/sh
# pkg_deb: `make deb`'s packages (built here into a temporary directory by
# pkg/deb.sh) are lintian clean, install with apt-get, work from the
# system's paths (the launcher with the run-time package alone, then a
# pkg-config and a CMake consumer with the development package), and remove
# again with --purge, leaving the machine as it was.  Skipped unless root
# with apt-get, dpkg-buildpackage and debhelper, and when a hakmem package is
# already installed (this case would remove it).
set -eu
. "$(dirname "$0")/../install.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: not root (installs packages)"; exit 77; }
need apt-get dpkg-query dpkg-buildpackage dh setsid cc pkg-config cmake python3
unset PKG_CONFIG_PATH CMAKE_PREFIX_PATH DEB_BUILD_OPTIONS
export DEBIAN_FRONTEND=noninteractive
pkgs="libhakmem0 libhakmem-dev"
# One run at a time on this machine (another checkout's test run included):
# the packages are machine-wide.
if command -v flock >/dev/null 2>&1 && [ -d /run/lock ]; then
  exec 9>/run/lock/hakmem-pkg_deb.lock
  flock -w 200 9 || { echo "SKIP: another pkg_deb run holds /run/lock/hakmem-pkg_deb.lock"; exit 77; }
fi
status() { dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null || true; }
installed() { case $(status "$1") in ii*) return 0 ;; esac; return 1; }
present() { case $(status "$1") in '' | un*) return 1 ;; esac; return 0; }   # any state but unknown
for p in $pkgs; do
  ! present "$p" || { echo "SKIP: $p is already on this machine (dpkg-query -W $p)"; exit 77; }
done
apt_opts="-y -q -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=300 --no-install-recommends"
# apt_run LOG ARGS...: apt-get in a session of its own, so that a signal to this
# case's process group (the runner's timeout) cannot interrupt dpkg halfway
apt_run() {
  log=$1
  shift
  # shellcheck disable=SC2086
  setsid -w apt-get $apt_opts "$@" >"$log" 2>&1
}
added=0
cleanup() {
  if [ "$added" = 1 ]; then
    on=
    for p in $pkgs; do ! present "$p" || on="$on $p"; done
    # shellcheck disable=SC2086
    [ -z "$on" ] || apt_run "$tmp/remove.log" remove --purge $on || cat "$tmp/remove.log" >&2
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM   # the runner's timeout: still remove the packages
chmod 755 "$tmp"   # apt's unprivileged user reads the .deb files

# --- build ---
"$root/pkg/deb.sh" "$tmp/deb" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; fail "pkg/deb.sh"; }
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
run_deb=$tmp/deb/libhakmem0_${ver}_$arch.deb dev_deb=$tmp/deb/libhakmem-dev_${ver}_$arch.deb
[ -f "$run_deb" ] && [ -f "$dev_deb" ] || fail "no packages for $ver: $(ls "$tmp/deb")"
dpkg-deb -I "$run_deb" >"$tmp/info" || fail "dpkg-deb -I"
grep -q '^ Depends: libc6' "$tmp/info" || fail "libhakmem0 lacks its libc6 dependency: $(cat "$tmp/info")"
dpkg-deb -f "$dev_deb" Depends >"$tmp/info"
grep -q "libhakmem0 (= $ver)" "$tmp/info" || fail "libhakmem-dev Depends: $(cat "$tmp/info")"
dpkg-deb --ctrl-tarfile "$run_deb" | tar -xf - -C "$tmp" ./shlibs ./symbols
for l in libhakmem libhakmem-secure libhakmem-nooverride; do
  grep -qx "$l 0 libhakmem0 (>= $ver)" "$tmp/shlibs" || fail "shlibs lacks $l: $(cat "$tmp/shlibs")"
  grep -q "^$l.so.0 libhakmem0 #MINVER#" "$tmp/symbols" || fail "symbols lacks $l.so.0"
done
# debian/libhakmem0.symbols lists exactly what the libraries export
if grep -A 20 'dpkg-gensymbols: warning' "$tmp/deb/build.log" >&2; then
  fail "the exports differ from debian/libhakmem0.symbols (above)"
fi
if command -v lintian >/dev/null 2>&1; then
  lintian --fail-on error,warning "$tmp"/deb/*.changes >"$tmp/lintian" 2>&1 || { cat "$tmp/lintian" >&2; fail "lintian"; }
  if grep -E '^[EW]: ' "$tmp/lintian" >&2; then fail "lintian errors or warnings (above)"; fi
else
  echo "note: lintian not installed; not run"
fi

# --- the run-time package alone: the launcher finds libhakmem.so.0 ---
added=1
apt_run "$tmp/log" install "$run_deb" || { cat "$tmp/log" >&2; fail "apt-get install libhakmem0"; }
installed libhakmem0 || fail "libhakmem0 not installed after apt-get install"
lib=/usr/lib/$multiarch
[ ! -e "$lib/libhakmem.so" ] || fail "$lib/libhakmem.so comes with the run-time package"
rc=0
/usr/bin/hakmem --stats -- python3 -c 'print(sum(range(10)))' >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" = 0 ] || fail "hakmem --stats -- python3: exit $rc: $(cat "$tmp/err")"
[ "$(cat "$tmp/out")" = 45 ] || fail "python3 printed '$(cat "$tmp/out")'"
grep -q "^hakmem: stats (version $ver" "$tmp/err" || fail "no statistics report: $(cat "$tmp/err")"
grep -q '^small: mallocs=[1-9]' "$tmp/err" || fail "python3's mallocs did not go to hakmem: $(cat "$tmp/err")"
/usr/bin/hakmem --secure -- cat /proc/self/maps >"$tmp/out" || fail "hakmem --secure"
grep -q " $lib/libhakmem-secure\.so\.$ver\$" "$tmp/out" || fail "hakmem --secure did not map libhakmem-secure.so"
/usr/bin/hakmem -- cat /proc/self/maps >"$tmp/out" || fail "hakmem -- cat"
grep -q " $lib/libhakmem\.so\.$ver\$" "$tmp/out" || fail "hakmem did not map libhakmem.so"
[ -f /usr/share/man/man1/hakmem.1.gz ] || fail "no manual page"

# --- the development package: pkg-config and CMake consumers ---
apt_run "$tmp/log" install "$dev_deb" || { cat "$tmp/log" >&2; fail "apt-get install libhakmem-dev"; }
installed libhakmem-dev || fail "libhakmem-dev not installed after apt-get install"
cat >"$tmp/app.c" <<'EOF_C'
#include <hakmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {   /* OVERRIDE: 1 when linking hakmem replaces malloc */
  char* p = hak_malloc(100);
  char* q = malloc(100);
  if (!p || !q) return 10;
  memset(p, 1, 100);
  memset(q, 2, 100);
  if (!hak_owns(p) || hak_owns(q) != OVERRIDE) return 11;
  if (strcmp(hak_version(), HAKMEM_VERSION) != 0) return 12;
  free(q);
  hak_free(p);
  puts("ok");
  return 0;
}
EOF_C
check() {   # check WHAT PROGRAM LIBNAME|-: runs it, checks what it loads
  rc=0
  "$2" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" = 0 ] && [ "$(cat "$tmp/out")" = ok ] || fail "$1: exit $rc, output '$(cat "$tmp/out")' $(cat "$tmp/err")"
  ldd "$2" >"$tmp/ldd" 2>&1 || true
  if [ "$3" = - ]; then
    ! grep -q libhakmem "$tmp/ldd" || fail "$1 loads a hakmem library: $(cat "$tmp/ldd")"
  else
    # /lib is /usr/lib on a merged-/usr system
    grep -Eq "$3\.so\.0 => (/usr)?/lib/$multiarch/$3\.so\.0 " "$tmp/ldd" \
      || fail "$1 does not load $lib/$3.so.0: $(cat "$tmp/ldd")"
  fi
}
for m in hakmem hakmem-nooverride; do
  [ "$(pkg-config --modversion $m)" = "$ver" ] || fail "pkg-config --modversion $m"
done
o=1
for m in hakmem hakmem-nooverride; do
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Werror -DOVERRIDE=$o "$tmp/app.c" $(pkg-config --cflags --libs $m) -o "$tmp/app-$m" \
    || fail "cc with pkg-config $m"
  check "pkg-config $m program" "$tmp/app-$m" "lib$m"
  o=0
done
mkdir "$tmp/cm"
cp "$tmp/app.c" "$tmp/cm/app.c"
cat >"$tmp/cm/CMakeLists.txt" <<'EOF_CM'
cmake_minimum_required(VERSION 3.13)
project(hakmem_deb_consumer C)
find_package(hakmem 0.1 CONFIG REQUIRED)
add_executable(app_shared app.c)
target_compile_definitions(app_shared PRIVATE OVERRIDE=1)
target_link_libraries(app_shared PRIVATE hakmem::hakmem)
add_executable(app_static app.c)
target_compile_definitions(app_static PRIVATE OVERRIDE=1)
target_link_libraries(app_static PRIVATE hakmem::hakmem-static)
add_executable(app_nooverride app.c)
target_compile_definitions(app_nooverride PRIVATE OVERRIDE=0)
target_link_libraries(app_nooverride PRIVATE hakmem::nooverride)
EOF_CM
cmake -S "$tmp/cm" -B "$tmp/cm/build" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; fail "cmake configure"; }
grep -q "hakmem_DIR:PATH=$lib/cmake/hakmem" "$tmp/cm/build/CMakeCache.txt" \
  || fail "CMake did not find the packaged hakmem: $(grep hakmem_DIR "$tmp/cm/build/CMakeCache.txt")"
cmake --build "$tmp/cm/build" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; fail "cmake build"; }
check "CMake app_shared" "$tmp/cm/build/app_shared" libhakmem
check "CMake app_static" "$tmp/cm/build/app_static" -
check "CMake app_nooverride" "$tmp/cm/build/app_nooverride" libhakmem-nooverride

# --- removal ---
# shellcheck disable=SC2086
apt_run "$tmp/log" remove --purge $pkgs || { cat "$tmp/log" >&2; fail "apt-get remove --purge"; }
added=0
for p in $pkgs; do ! present "$p" || fail "$p still known to dpkg after --purge"; done
for f in /usr/bin/hakmem /usr/include/hakmem.h "$lib/libhakmem.so.0" "$lib/pkgconfig/hakmem.pc" "$lib/cmake/hakmem"; do
  [ ! -e "$f" ] || fail "$f left after removal"
done
echo "Debian packages ok: built, lintian clean, installed, used, removed"
