/* For valgrind memcheck (tests/cases/rel_valgrind.sh): one thread, linked
 * with build/libhakmem.a under the standard names, so hakmem is this
 * program's malloc.  Mixed malloc/calloc/realloc/free/memalign/
 * posix_memalign/aligned_alloc/valloc of many sizes (16 B .. 6 MiB) in a
 * 512-slot table, a pattern in every block checked before free and after
 * realloc, calloc checked zero, and malloc_trim now and then.  Asserts that
 * the blocks are hakmem's (hak_owns): valgrind must not have replaced malloc.
 *   test-valgrind [OPS]    (default 60000) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hakmem.h"

#define N 512
static struct { uint8_t* p; size_t n; uint8_t tag; } slot[N];
static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}
static void die(const char* what, const void* p, size_t n) {
  fprintf(stderr, "vg: FAILED: %s (%p, %zu)\n", what, p, n);
  exit(1);
}
static void fill(uint8_t* p, size_t n, uint8_t tag) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(tag + i * 7);
}
static void check(const uint8_t* p, size_t n, uint8_t tag) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != (uint8_t)(tag + i * 7)) die("block contents changed", p, i);
}
static size_t pick(void) {
  uint64_t r = rnd();
  switch (r % 16) {
    case 0: return 0;
    case 1: return 1 + (r >> 8) % 16;
    case 2: case 3: case 4: case 5: case 6: return 1 + (r >> 8) % 256;
    case 7: case 8: case 9: return 1 + (r >> 8) % 2048;
    case 10: case 11: return 1 + (r >> 8) % 32768;
    case 12: return 1 + (r >> 8) % (128 * 1024 + 64);
    case 13: return 100 * 1024 + (r >> 8) % (200 * 1024);
    case 14: return ((r >> 8) % 64 == 0) ? 1 + (r >> 16) % (6u << 20) : 1 + (r >> 8) % 4096;
    default: return 16 << ((r >> 8) % 8);
  }
}

int main(int argc, char** argv) {
  long ops = argc > 1 ? atol(argv[1]) : 60000;
  for (long op = 0; op < ops; op++) {
    int k = (int)(rnd() % N);
    uint8_t tag = (uint8_t)rnd();
    if (slot[k].p != NULL) {
      check(slot[k].p, slot[k].n, slot[k].tag);
      if (rnd() % 3 == 0) {   /* realloc */
        size_t n = pick();
        uint8_t* q = realloc(slot[k].p, n);
        if (n == 0) {
          slot[k].p = NULL;   /* freed (glibc semantics) */
          continue;
        }
        if (q == NULL) die("realloc failed", slot[k].p, n);
        check(q, n < slot[k].n ? n : slot[k].n, slot[k].tag);
        slot[k].p = q;
        slot[k].n = n;
        fill(q, n, slot[k].tag);
      } else {
        free(slot[k].p);
        slot[k].p = NULL;
      }
      continue;
    }
    size_t n = pick();
    void* p = NULL;
    size_t align = 16;
    switch (rnd() % 8) {
      case 0: {
        p = calloc(1 + n % 7, n / 7 + 1);
        n = (1 + n % 7) * (n / 7 + 1);
        if (p) for (size_t i = 0; i < n; i++) if (((uint8_t*)p)[i]) die("calloc not zero", p, i);
        break;
      }
      case 1: align = (size_t)64 << (rnd() % 10); p = memalign(align, n); break;
      case 2: align = (size_t)16 << (rnd() % 12); if (posix_memalign(&p, align, n) != 0) p = NULL; break;
      case 3: align = 4096; p = aligned_alloc(align, n); break;
      case 4: align = 4096; p = valloc(n); break;
      default: p = malloc(n); break;
    }
    if (p == NULL) die("allocation failed", NULL, n);
    if ((uintptr_t)p % align) die("misaligned", p, align);
    if (!hak_owns(p)) die("not a hakmem block: did valgrind replace malloc?", p, n);
    if (malloc_usable_size(p) < n) die("usable size too small", p, malloc_usable_size(p));
    slot[k].p = p;
    slot[k].n = n;
    slot[k].tag = tag;
    fill(p, n, tag);
    if (op % 20000 == 19999) malloc_trim(0);
  }
  for (int k = 0; k < N; k++) {
    if (slot[k].p) check(slot[k].p, slot[k].n, slot[k].tag);
    free(slot[k].p);
  }
  hak_os_stats_t st;
  hak_os_stats(&st);
  printf("vg: %ld operations, hakmem made %zu mmap calls\n", ops, st.mmap_calls);
  return 0;
}
