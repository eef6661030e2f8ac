#!/bin/sh
# install_layout: a staged `make install` (DESTDIR, custom PREFIX/LIBDIR) puts
# exactly the expected files in place with the install paths substituted, and
# `make uninstall` removes all of them again.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
unset MAKEFLAGS MFLAGS MAKELEVEL
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

make -s -C "$root" all >"$tmp/log" 2>&1 || { echo "SKIP: the library does not build"; exit 77; }
ver=$(sed -n 's/^#define HAKMEM_VERSION "\(.*\)"/\1/p' "$root/include/hakmem.h")
major=${ver%%.*}

stage=$tmp/stage p=/opt/hakmem-test
set -- DESTDIR="$stage" PREFIX=$p LIBDIR=$p/lib64
make -s -C "$root" install "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; fail "make install"; }

(cd "$stage" && find . ! -type d | sed 's|^\.||' | LC_ALL=C sort) >"$tmp/got"
LC_ALL=C sort >"$tmp/want" <<LIST
$p/bin/hakmem
$p/include/hakmem.h
$p/lib64/cmake/hakmem/hakmemConfig.cmake
$p/lib64/cmake/hakmem/hakmemConfigVersion.cmake
$p/lib64/libhakmem.a
$p/lib64/libhakmem.so
$p/lib64/libhakmem.so.$major
$p/lib64/libhakmem.so.$ver
$p/lib64/libhakmem-nooverride.a
$p/lib64/libhakmem-nooverride.so
$p/lib64/libhakmem-nooverride.so.$major
$p/lib64/libhakmem-nooverride.so.$ver
$p/lib64/libhakmem-secure.so
$p/lib64/libhakmem-secure.so.$major
$p/lib64/libhakmem-secure.so.$ver
$p/lib64/pkgconfig/hakmem-nooverride.pc
$p/lib64/pkgconfig/hakmem.pc
$p/share/man/man1/hakmem.1
LIST
diff -u "$tmp/want" "$tmp/got" >&2 || fail "installed file list differs"

l=$stage$p/lib64
[ "$(readlink "$l/libhakmem.so")" = "libhakmem.so.$major" ] || fail "libhakmem.so symlink"
[ "$(readlink "$l/libhakmem.so.$major")" = "libhakmem.so.$ver" ] || fail "libhakmem.so.$major symlink"
if [ ! -f "$l/libhakmem.so.$ver" ] || [ -L "$l/libhakmem.so.$ver" ]; then fail "libhakmem.so.$ver is not a file"; fi
cmp -s "$root/build/libhakmem.so" "$l/libhakmem.so.$ver" || fail "installed .so differs from the build"
for n in secure nooverride; do
  [ "$(readlink "$l/libhakmem-$n.so")" = "libhakmem-$n.so.$major" ] || fail "libhakmem-$n.so symlink"
  [ "$(readlink "$l/libhakmem-$n.so.$major")" = "libhakmem-$n.so.$ver" ] || fail "libhakmem-$n.so.$major symlink"
  cmp -s "$root/build/libhakmem-$n.so" "$l/libhakmem-$n.so.$ver" || fail "installed libhakmem-$n.so differs from the build"
  soname=$(objdump -p "$l/libhakmem-$n.so.$ver" | awk '$1 == "SONAME" { print $2 }')
  [ "$soname" = "libhakmem-$n.so.$major" ] || fail "libhakmem-$n.so has SONAME '$soname'"
done
cmp -s "$root/build/libhakmem-nooverride.a" "$l/libhakmem-nooverride.a" || fail "installed libhakmem-nooverride.a differs"
cmp -s "$root/include/hakmem.h" "$stage$p/include/hakmem.h" || fail "installed header differs"
[ -x "$stage$p/bin/hakmem" ] || fail "launcher not executable"
man=$stage$p/share/man/man1/hakmem.1
grep -q "^\.TH HAKMEM 1 .*\"hakmem $ver\"" "$man" || fail "hakmem.1 is not for version $ver"
for w in stats secure profile= lib= help version HAKMEM_LIB HAKMEM_PROFILE HAKMEM_STATS; do
  grep -q -- "$w" "$man" || fail "hakmem.1 does not describe $w"
done
grep -q "^libdir='$p/lib64'" "$stage$p/bin/hakmem" || fail "launcher default libdir not substituted"
if grep -l '@[A-Z_][A-Z_]*@' "$stage$p/bin/hakmem" "$l"/pkgconfig/*.pc "$l"/cmake/hakmem/*.cmake >&2
then fail "unsubstituted @VAR@ left in the files above"; fi
grep -qx "prefix=$p" "$l/pkgconfig/hakmem.pc" || fail "hakmem.pc prefix"
grep -qx 'libdir=${prefix}/lib64' "$l/pkgconfig/hakmem.pc" || fail "hakmem.pc libdir"
grep -qx "Version: $ver" "$l/pkgconfig/hakmem.pc" || fail "hakmem.pc version"
grep -qx 'libdir=${prefix}/lib64' "$l/pkgconfig/hakmem-nooverride.pc" || fail "hakmem-nooverride.pc libdir"
grep -qx 'Libs: -L${libdir} -lhakmem-nooverride' "$l/pkgconfig/hakmem-nooverride.pc" || fail "hakmem-nooverride.pc Libs"
grep -q "\"$p/lib64\"" "$l/cmake/hakmem/hakmemConfig.cmake" || fail "hakmemConfig.cmake libdir"
grep -q "PACKAGE_VERSION \"$ver\"" "$l/cmake/hakmem/hakmemConfigVersion.cmake" || fail "CMake version"

make -s -C "$root" uninstall "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; fail "make uninstall"; }
left=$(find "$stage" ! -type d)
[ -z "$left" ] || fail "left after uninstall: $left"
[ ! -d "$stage$p/lib64/cmake/hakmem" ] || fail "cmake/hakmem dir left after uninstall"
echo "install layout + uninstall ok"
