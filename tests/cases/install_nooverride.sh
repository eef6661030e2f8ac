#!/bin/sh
# install_nooverride: the no-override library exports only the hak_ API; a
# program linked with it (pkg-config hakmem-nooverride, CMake
# hakmem::nooverride / hakmem::nooverride-static, against `make install
# PREFIX=tmp`) keeps glibc's malloc and uses hak_malloc & co. beside it, and
# hakmem's own thread-exit, fork and statistics machinery still works there.
set -eu
. "$(dirname "$0")/../install.sh"
need pkg-config cmake cc nm ldd
install_prefix
lib=$prefix/lib/libhakmem-nooverride.so.$ver

# --- exports: the hak_ API and nothing else ---
nm -D --defined-only "$lib" >"$tmp/syms" || fail "nm -D $lib"
awk '{ print $NF }' "$tmp/syms" >"$tmp/names"
grep -q '^hak_malloc$' "$tmp/names" || fail "hak_malloc not exported: $(cat "$tmp/names")"
if grep -v -E '^(hak_|hakmem_)' "$tmp/names" >"$tmp/other"; then
  fail "exports other than hak_*/hakmem_*: $(cat "$tmp/other")"
fi
nm --defined-only "$prefix/lib/libhakmem-nooverride.a" >"$tmp/asyms" || fail "nm libhakmem-nooverride.a"
if grep -E ' [TWDB] (malloc|free|calloc|realloc|posix_memalign|memalign|aligned_alloc|malloc_usable_size|_Znwm|_ZdlPv)$' \
  "$tmp/asyms" >"$tmp/other"; then
  fail "libhakmem-nooverride.a defines standard names: $(cat "$tmp/other")"
fi

cat >"$tmp/app.c" <<'EOF_C'
#define _POSIX_C_SOURCE 200809L  /* strdup */
#include <hakmem.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A thread that allocates from its own hakmem heap, keeps one block and exits. */
static void* worker(void* arg) {
  (void)arg;
  for (int i = 0; i < 2000; i++) {
    char* p = hak_malloc((size_t)(i % 700) + 1);
    if (!p) return NULL;
    p[0] = (char)i;
    hak_free(p);
  }
  char* keep = hak_malloc(48);
  if (keep) memset(keep, 7, 48);
  return keep;
}

int main(void) {
  char* g = malloc(100);                       /* glibc's malloc, untouched */
  if (!g) return 10;
  memset(g, 1, 100);
  if (hak_owns(g)) return 10;
  if (malloc_usable_size(g) < 100) return 11;  /* glibc's malloc_usable_size */
  char* h = hak_malloc(100);
  if (!h) return 12;
  memset(h, 2, 100);
  if (!hak_owns(h)) return 12;
  if (hak_malloc_usable_size(h) < 100) return 13;
  h = hak_realloc(h, 5000);
  if (!h || !hak_owns(h) || h[99] != 2) return 14;
  int* c = hak_calloc(1000, sizeof(int));
  if (!c || !hak_owns(c)) return 15;
  for (int i = 0; i < 1000; i++) if (c[i] != 0) return 16;
  g = realloc(g, 4000);                         /* glibc's realloc */
  if (!g || hak_owns(g) || g[99] != 1) return 17;
  free(g);
  char* s = strdup("hakmem");                   /* allocated inside libc */
  if (!s || hak_owns(s)) return 18;
  free(s);

  pthread_t t[4];
  void* kept[4];
  for (int i = 0; i < 4; i++) if (pthread_create(&t[i], NULL, worker, NULL)) return 19;
  for (int i = 0; i < 4; i++) {
    if (pthread_join(t[i], &kept[i]) || !kept[i] || !hak_owns(kept[i])) return 20;
    if (((char*)kept[i])[47] != 7) return 21;
    hak_free(kept[i]);                          /* a block of an exited thread */
  }

  pid_t pid = fork();                           /* hakmem's fork handlers */
  if (pid < 0) return 22;
  if (pid == 0) {
    char* p = hak_malloc(3000);
    char* q = malloc(3000);
    int bad = !p || !hak_owns(p) || !q || hak_owns(q);
    hak_free(p);
    free(q);
    hak_free(h);
    _exit(bad ? 1 : 0);
  }
  int st;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 23;
  hak_free(h);
  hak_free(c);
  puts("ok");
  return 0;
}
EOF_C

# run WHAT PROGRAM: runs it with the statistics report on, checks its output,
# that the report was printed and that exited threads abandoned their heaps
run() {
  rc=0
  HAKMEM_STATS=1 "$2" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" = 0 ] || fail "$1: exit status $rc; stderr: $(cat "$tmp/err")"
  [ "$(cat "$tmp/out")" = ok ] || fail "$1: printed '$(cat "$tmp/out")'"
  grep -q "^hakmem: stats (version $ver" "$tmp/err" || fail "$1: no statistics report: $(cat "$tmp/err")"
  grep -q '^threads: abandoned segments=[1-9]' "$tmp/err" \
    || fail "$1: exited threads did not hand back their heaps: $(grep '^threads:' "$tmp/err")"
}
# links NAME PROGRAM: whether the program needs libNAME.so at run time
links() { ldd "$2" >"$tmp/ldd" 2>&1 || true; grep -q "$1\.so" "$tmp/ldd"; }

# --- pkg-config ---
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion hakmem-nooverride)" = "$ver" ] || fail "pkg-config --modversion"
flags=$(pkg-config --cflags --libs hakmem-nooverride) || fail "pkg-config hakmem-nooverride"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Werror "$tmp/app.c" $flags -pthread -Wl,-rpath,"$prefix/lib" -o "$tmp/app-pc" \
  || fail "build with pkg-config flags ($flags)"
links libhakmem-nooverride "$tmp/app-pc" || fail "app-pc does not load libhakmem-nooverride: $(cat "$tmp/ldd")"
! grep -q 'libhakmem\.so' "$tmp/ldd" || fail "app-pc loads libhakmem.so: $(cat "$tmp/ldd")"
run "pkg-config program" "$tmp/app-pc"
cc -std=c11 -Wall -Werror "$tmp/app.c" $(pkg-config --cflags hakmem-nooverride) \
  "$(pkg-config --variable=libdir hakmem-nooverride)/libhakmem-nooverride.a" -pthread -o "$tmp/app-pc-static" \
  || fail "static build with pkg-config"
! links libhakmem "$tmp/app-pc-static" || fail "static program loads a hakmem library: $(cat "$tmp/ldd")"
run "static pkg-config program" "$tmp/app-pc-static"

# --- CMake ---
mkdir "$tmp/cm"
cp "$tmp/app.c" "$tmp/cm/app.c"
cat >"$tmp/cm/CMakeLists.txt" <<'EOF_CM'
cmake_minimum_required(VERSION 3.13)
project(hakmem_nooverride_consumer C)
find_package(hakmem 0.1 CONFIG REQUIRED)
find_package(Threads REQUIRED)
add_executable(app_shared app.c)
target_link_libraries(app_shared PRIVATE hakmem::nooverride Threads::Threads)
add_executable(app_static app.c)
target_link_libraries(app_static PRIVATE hakmem::nooverride-static)
EOF_CM
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/log" 2>&1 \
  || { cat "$tmp/log" >&2; fail "cmake configure"; }
cmake --build "$tmp/cm/build" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; fail "cmake build"; }
links libhakmem-nooverride "$tmp/cm/build/app_shared" || fail "app_shared does not load libhakmem-nooverride"
run "CMake app_shared" "$tmp/cm/build/app_shared"   # RPATH set by CMake
! links libhakmem "$tmp/cm/build/app_static" || fail "app_static loads a hakmem library: $(cat "$tmp/ldd")"
run "CMake app_static" "$tmp/cm/build/app_static"
echo "no-override library ok: glibc malloc kept, hak_ API beside it (pkg-config, CMake, shared, static)"
