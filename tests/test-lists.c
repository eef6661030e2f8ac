/* The class lists behind the fast paths (src/slab.c, src/refill.c; docs/DESIGN.md "The
 * class lists behind the fast paths").  A program that keeps many blocks,
 * frees one at random and allocates another (alloc-test's pattern: every
 * slab nearly full, frees spread over all of them) must find a free block in
 * its current slab for most mallocs.  A slab that gets a block back
 * waits at the end of its class list while more frees gather in it; put
 * right behind the current slab, it came up with one block or two, and
 * most mallocs (and as many frees, into full slabs) left the fast paths.
 *
 * Asserted on counts from the stats report ("small: mallocs=N refills=R"),
 * never on time: in the steady phase, refills per malloc stay below BOUND.
 * The run is deterministic (a fixed seed, one thread).
 *
 * usage: test-lists [slots [ops]]   (default 200000 blocks, 4000000 ops) */
#include "hak_test.h"
#include "hakmem.h"
#include "stats_report.h"

/* measured: 22 % with the slab at the end of its list, 73 % with it right
 * behind the current slab (200,000 blocks, 4 M ops) */
#define BOUND 0.40

static ht_rng_t rng = {1};
static size_t rand_size(void) { return (size_t)ht_range(&rng, 8, 1024); }

/* mallocs and refills so far, from the stats report */
static void counts(unsigned long long* mallocs, unsigned long long* refills) {
  char* buf = ht_stats_report();
  const char* line = strstr(buf, "\nsmall: mallocs=");
  if (line == NULL || sscanf(line, "\nsmall: mallocs=%llu refills=%llu", mallocs, refills) != 2) {
    fprintf(stderr, "test-lists: no 'small: mallocs= refills=' line in the stats report:\n%s\n", buf);
    exit(2);
  }
  free(buf);
}

int main(int argc, char** argv) {
  size_t slots = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000;
  size_t ops = argc > 2 ? strtoul(argv[2], NULL, 10) : 4000000;
  unsigned char** slot = calloc(slots, sizeof *slot);
  if (slot == NULL) return 2;
  for (size_t i = 0; i < slots; i++) {
    size_t n = rand_size();
    slot[i] = malloc(n);
    if (slot[i] == NULL) return 2;
    slot[i][0] = (unsigned char)n;
  }
  /* warm: the lists reach their steady order */
  for (size_t k = 0; k < ops / 4; k++) {
    size_t i = (size_t)ht_below(&rng, slots), n = rand_size();
    free(slot[i]);
    slot[i] = malloc(n);
    slot[i][0] = (unsigned char)n;
  }
  unsigned long long m0, r0, m1, r1;
  counts(&m0, &r0);
  for (size_t k = 0; k < ops; k++) {
    size_t i = (size_t)ht_below(&rng, slots), n = rand_size();
    free(slot[i]);
    slot[i] = malloc(n);
    slot[i][0] = (unsigned char)n;
  }
  counts(&m1, &r1);
  for (size_t i = 0; i < slots; i++) free(slot[i]);
  free(slot);
  double share = m1 > m0 ? (double)(r1 - r0) / (double)(m1 - m0) : 1.0;
  printf("random replacement, %zu blocks of 8..1024 B, %zu ops: %llu mallocs, %llu refills (%.2f %% of mallocs; bound %.0f %%)\n",
         slots, ops, m1 - m0, r1 - r0, 100.0 * share, 100.0 * BOUND);
  if (m1 - m0 < ops) {
    printf("FAILED: the stats report counted %llu mallocs for %zu\n", m1 - m0, ops);
    return 1;
  }
  if (share > BOUND) {
    printf("FAILED: %.2f %% of mallocs took the refill path (bound %.0f %%)\n", 100.0 * share, 100.0 * BOUND);
    return 1;
  }
  printf("test-lists: ok\n");
  return 0;
}
