#!/bin/sh
# install_consumers: after `make install PREFIX=tmp`, a C program builds and
# runs against hakmem via pkg-config, and a CMake project finds it with
# find_package(hakmem CONFIG) and links hakmem::hakmem and hakmem::hakmem-static.
set -eu
. "$(dirname "$0")/../install.sh"
need pkg-config cmake cc
install_prefix

cat >"$tmp/app.c" <<'EOF_C'
#define _POSIX_C_SOURCE 200809L  /* strdup */
#include <hakmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
  if (strcmp(hak_version(), HAKMEM_VERSION) != 0) return 10;
  char* p = hak_malloc(100);
  if (!p || !hak_owns(p)) return 11;
  memset(p, 1, 100);
  hak_free(p);
  char* q = malloc(1000);           /* linking hakmem replaces malloc */
  if (!q) return 12;
  memset(q, 2, 1000);
  if (!hak_owns(q)) return 13;
  free(q);
  char* s = strdup("hakmem");       /* allocated inside libc, freed here */
  if (!s) return 14;
  free(s);
  puts("ok");
  return 0;
}
EOF_C

# --- pkg-config ---
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion hakmem)" = "$ver" ] || fail "pkg-config --modversion"
flags=$(pkg-config --cflags --libs hakmem) || fail "pkg-config --cflags --libs hakmem"
pkg-config --libs --static hakmem | grep -q -- -lpthread || fail "Libs.private lacks -lpthread"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Werror "$tmp/app.c" $flags -o "$tmp/app-pc" || fail "build with pkg-config flags ($flags)"
out=$(LD_LIBRARY_PATH="$prefix/lib" "$tmp/app-pc") || fail "pkg-config program exited $?"
[ "$out" = ok ] || fail "pkg-config program printed '$out'"
LD_LIBRARY_PATH="$prefix/lib" ldd "$tmp/app-pc" | grep -q "=> $prefix/lib/libhakmem" \
  || fail "pkg-config program does not load the installed libhakmem"

# --- CMake ---
mkdir "$tmp/cm"
cp "$tmp/app.c" "$tmp/cm/app.c"
cat >"$tmp/cm/CMakeLists.txt" <<'EOF_CM'
cmake_minimum_required(VERSION 3.13)
project(hakmem_consumer C)
find_package(hakmem 0.1 CONFIG REQUIRED)
add_executable(app_shared app.c)
target_link_libraries(app_shared PRIVATE hakmem::hakmem)
add_executable(app_static app.c)
target_link_libraries(app_static PRIVATE hakmem::hakmem-static)
find_package(hakmem 99 CONFIG QUIET)
if(hakmem_FOUND)
  message(FATAL_ERROR "hakmem ${hakmem_VERSION} accepted for a request of version 99")
endif()
EOF_CM
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/log" 2>&1 \
  || { cat "$tmp/log" >&2; fail "cmake configure"; }
cmake --build "$tmp/cm/build" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; fail "cmake build"; }
out=$("$tmp/cm/build/app_shared") || fail "CMake app_shared exited $?"   # RPATH set by CMake
[ "$out" = ok ] || fail "app_shared printed '$out'"
out=$("$tmp/cm/build/app_static") || fail "CMake app_static exited $?"
[ "$out" = ok ] || fail "app_static printed '$out'"
! ldd "$tmp/cm/build/app_static" | grep -q libhakmem || fail "app_static links libhakmem.so dynamically"
echo "pkg-config and CMake consumers ok"
