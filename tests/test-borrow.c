/* Reuse across sizes after scattered frees (src/refill.c, heap_borrow; docs/DESIGN.md
 * "Holes lent to smaller classes").  A program fills many blocks of one size,
 * frees most of them at random, then allocates blocks of a somewhat smaller
 * size (a cache refilled with other value sizes): the new blocks must go
 * into the holes the frees left, not into new slab pages.  Also: aligned
 * requests never get a lent block (it is only 16-aligned), a young heap
 * does not lend a class's fresh room to another class, and a steady
 * malloc/free cycle of one size does not keep borrowing (each loan takes the
 * refill path).
 *
 * Asserted on counts from the stats report ("slab_pages=", "borrowed=") and
 * on the blocks themselves, never on time; one thread, fixed seed.
 *
 * usage: test-borrow [blocks]   (default 200000) */
#include "hak_test.h"
#include "hakmem.h"
#include "stats_report.h"

#include <pthread.h>

static ht_rng_t rng = {7};

/* slab pages and borrowed blocks so far, from the stats report */
static unsigned long long refills;   /* set by counts() too */
static void counts(unsigned long long* pages, unsigned long long* borrowed) {
  char* buf = ht_stats_report();
  const char* line = strstr(buf, "\nsmall: ");
  const char* sp = line ? strstr(line, "slab_pages=") : NULL;
  const char* bp = line ? strstr(line, "borrowed=") : NULL;
  const char* rp = line ? strstr(line, "refills=") : NULL;
  if (sp == NULL || sscanf(sp, "slab_pages=%llu", pages) != 1 || rp == NULL || sscanf(rp, "refills=%llu", &refills) != 1) {
    fprintf(stderr, "test-borrow: no 'slab_pages=' or 'refills=' in the stats report:\n%s\n", buf);
    exit(2);
  }
  if (bp == NULL || sscanf(bp, "borrowed=%llu", borrowed) != 1) *borrowed = 0;
  free(buf);
}

static int failures;
#define EXPECT(c, ...) do { if (!(c)) { printf("  FAILED " __VA_ARGS__); printf("\n"); failures++; } } while (0)

static void* young_thread(void* arg) {
  (void)arg;
  /* a fresh heap: its first blocks of 28 B are its own class's (32 B), not
   * lent from the 48-byte slab it filled a moment ago */
  void* big[64];
  for (int i = 0; i < 64; i++) big[i] = malloc(40);
  void* p = malloc(28);
  size_t u = malloc_usable_size(p);
  EXPECT(u == 32, "a young heap lent a block: malloc(28) has %zu usable bytes, not 32", u);
  free(p);
  for (int i = 0; i < 64; i++) free(big[i]);
  return NULL;
}

int main(int argc, char** argv) {
  size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000;
  /* HAKMEM_LEND=0 (or the speed profile): no loan at all, the refill takes new slabs */
  bool lend = hak_option_get("HAKMEM_LEND") != 0;
  size_t n_new = n * 7 / 10;
  unsigned char** old = calloc(n, sizeof *old);
  unsigned char** nu = calloc(n_new, sizeof *nu);
  if (old == NULL || nu == NULL) return 2;

  pthread_t th;
  pthread_create(&th, NULL, young_thread, NULL);
  pthread_join(th, NULL);

  for (size_t i = 0; i < n; i++) {   /* fill: 40 B blocks (the 48-byte class) */
    old[i] = malloc(40);
    if (old[i] == NULL) return 2;
    memset(old[i], (int)(i & 0xFF), 40);
  }
  size_t freed = 0;
  for (size_t i = 0; i < n; i++)   /* scattered frees: 70 % at random */
    if (ht_below(&rng, 10) < 7) {
      free(old[i]);
      old[i] = NULL;
      freed++;
    }
  /* first a steady cycle of one size into the holes (a ring of 64 blocks
   * of 24 B, the 32-byte class, which has no slab yet: its blocks come back
   * as fast as they are lent): after a few loans the class must get a slab
   * of its own, whose fast path serves the cycle -- lending every time sent
   * every malloc to the refill path (3.3x the time of a pair) */
  unsigned long long r0, p2, b2, r1;
  counts(&p2, &b2);
  r0 = refills;
  void* ring[64] = {0};
  const long cycle = 1000000;
  for (long c = 0; c < cycle; c++) {
    free(ring[c & 63]);
    ring[c & 63] = malloc(24);
    if (ring[c & 63] == NULL) return 2;
    memset(ring[c & 63], 0x5A, 24);
  }
  unsigned long long b3;
  counts(&p2, &b3);
  r1 = refills;
  printf("test-borrow: a steady cycle of %ld malloc/free pairs: %llu refills, %llu loans\n", cycle, r1 - r0, b3 - b2);
  EXPECT(r1 - r0 < (unsigned long long)cycle / 100, "a steady cycle took the refill path %llu times in %ld mallocs",
         r1 - r0, cycle);
  for (int i = 0; i < 64; i++) free(ring[i]);
  unsigned long long p0, b0, p1, b1;
  counts(&p0, &b0);
  /* refill with 28 B blocks (the 32-byte class): as many as were freed */
  size_t k = 0;
  for (; k < n_new && k < freed; k++) {
    nu[k] = malloc(28);
    if (nu[k] == NULL) return 2;
    memset(nu[k], 0xA5, 28);
  }
  counts(&p1, &b1);
  /* aligned requests of the small class: their own slabs, 32-aligned */
  void* al[256];
  int misaligned = 0;
  for (int i = 0; i < 256; i++) {
    al[i] = aligned_alloc(32, 32);
    if (al[i] == NULL || ((uintptr_t)al[i] & 31)) misaligned++;
  }
  printf("test-borrow: %zu blocks of 40 B, %zu freed at random, then %zu of 28 B: slab pages %llu -> %llu, "
         "lent blocks %llu\n", n, freed, k, p0, p1, b1 - b0);
  /* without lending, the 28-byte blocks take k*32 bytes of new slabs: about
   * 1,090 pages of 4 KiB for 140,000 of them (measured: 208 with lending, as
   * a slab lends until it is 7/8 used) */
  unsigned long long fresh = (unsigned long long)(k * 32 / 4096);
  if (lend) {
    EXPECT(p1 - p0 <= fresh / 4, "the refill took %llu new slab pages (without reuse: about %llu)", p1 - p0, fresh);
    EXPECT(b1 - b0 >= k / 2, "only %llu of %zu new blocks went into the holes", b1 - b0, k);
  } else {
    EXPECT(b1 == 0, "%llu blocks lent with lending off", b1);
    EXPECT(p1 - p0 >= fresh * 3 / 4, "lending off, yet the refill took only %llu new slab pages (about %llu)", p1 - p0, fresh);
  }
  EXPECT(misaligned == 0, "%d of 256 aligned_alloc(32, 32) blocks misaligned or NULL", misaligned);
  for (size_t i = 0; i < n; i++)   /* the survivors kept their bytes */
    if (old[i] != NULL)
      for (int j = 0; j < 40; j++)
        if (old[i][j] != (unsigned char)(i & 0xFF)) {
          EXPECT(0, "block %zu byte %d changed", i, j);
          j = 40;
          i = n;
        }
  for (size_t i = 0; i < k; i++) {
    if (nu[i] == NULL) continue;
    EXPECT(malloc_usable_size(nu[i]) >= 28, "a lent block has %zu usable bytes", malloc_usable_size(nu[i]));
    if (nu[i][0] != 0xA5 || nu[i][27] != 0xA5) {
      EXPECT(0, "new block %zu changed", i);
      break;
    }
    free(nu[i]);
  }
  for (size_t i = 0; i < n; i++) free(old[i]);
  for (int i = 0; i < 256; i++) free(al[i]);
  free(old);
  free(nu);
  printf("test-borrow: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
