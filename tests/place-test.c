/* Where a new slab's pages come from (src/heap.c, slab_new; docs/DESIGN.md
 * "Threads", "Adoption, and where a slab's pages come from"): of a heap's
 * segments with room, the fullest.  A sparse segment then drains and its
 * pages age out or go back as a whole, instead of being touched again by
 * every new slab because it happens to come first on the heap's list
 * (mstress: median peak RSS 20.7 MB with the list's order, 18.0 with the
 * fullest; docs/BENCHMARKS.md, "New slabs in the fullest segment").
 *
 * One thread, deterministic: two SuperSlabs of 1000-byte blocks (one 64 KiB
 * page a slab); the fuller one (B) gets 16 slabs freed, then the sparse one
 * (A) all but one block, so A is first on the heap's list of segments with
 * room.  4 slabs of 4 KiB blocks must all land in B (before the change all
 * 64 blocks landed in A).
 *
 * usage: place-test */
#include "hak_test.h"
#include "hakmem.h"

#define SEG_SHIFT 22           /* 4 MiB SuperSlabs */
#define SMALL 1000             /* class 1024: 64 blocks in a one-page slab */
#define PER_SLAB 64
#define N (PER_SLAB * 63 * 2)  /* two segments' worth of slabs */
#define BIG 4000               /* class 4096: 16 blocks a slab */
#define NBIG (16 * 4)

static void* blk[N];
static void* big[NBIG];

static uintptr_t seg_of(const void* p) { return (uintptr_t)p >> SEG_SHIFT; }

int main(void) {
  for (size_t i = 0; i < N; i++)
    if ((blk[i] = malloc(SMALL)) == NULL) return 2;
  /* A: the segment of the first block; B: another that holds at least
   * 48 slabs of these blocks */
  uintptr_t a = seg_of(blk[0]), b = 0;
  size_t in_a = 0, in_b = 0;
  for (size_t i = 0; i < N; i++) {
    if (seg_of(blk[i]) == a) in_a++;
    else if (b == 0) b = seg_of(blk[i]);
  }
  for (size_t i = 0; i < N; i++) in_b += seg_of(blk[i]) == b;
  if (in_a < 48 * PER_SLAB || in_b < 48 * PER_SLAB) {
    fprintf(stderr, "place-test: setup: %zu and %zu blocks in the first two segments\n", in_a, in_b);
    return 2;
  }
  /* B: free 16 whole slabs (aligned groups of 64 blocks of one page) */
  size_t freed_b = 0;
  uintptr_t page = 0;
  size_t run = 0;
  for (size_t i = 0; i < N && freed_b < 16 * PER_SLAB; i++) {
    if (seg_of(blk[i]) != b) continue;
    uintptr_t pg = (uintptr_t)blk[i] >> 16;
    if (pg != page) page = pg, run = 0;
    if (++run > PER_SLAB) continue;
    free(blk[i]);
    blk[i] = NULL;
    freed_b++;
  }
  /* A: everything but one block, so A goes to the head of the list */
  void* last = NULL;
  for (size_t i = 0; i < N; i++) {
    if (blk[i] == NULL || seg_of(blk[i]) != a) continue;
    if (last == NULL) {
      last = blk[i];
      continue;
    }
    free(blk[i]);
    blk[i] = NULL;
  }
  size_t wrong = 0;
  for (size_t i = 0; i < NBIG; i++) {
    if ((big[i] = malloc(BIG)) == NULL) return 2;
    memset(big[i], 1, BIG);
    if (seg_of(big[i]) != b) wrong++;
  }
  printf("place-test: %d blocks of %d B (4 new slabs): %zu outside the fullest segment with room\n", NBIG, BIG,
         wrong);
  if (wrong != 0) {
    printf("FAILED: new slabs went to a sparse segment\n");
    return 1;
  }
  for (size_t i = 0; i < N; i++) free(blk[i]);
  for (size_t i = 0; i < NBIG; i++) free(big[i]);
  puts("place-test: ok");
  return 0;
}
