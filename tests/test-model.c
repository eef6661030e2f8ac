/* Randomized model test: a long deterministic sequence of malloc, calloc,
 * realloc, reallocarray, free, posix_memalign, aligned_alloc over a table of
 * slots.  Every block carries a pattern derived from (slot, generation) that
 * is verified before the block is freed or reallocated; realloc must keep the
 * min(old, new) prefix; calloc blocks must be zero; usable sizes must cover
 * the request and be writable.
 *
 * usage: test-model [OPS [SLOTS]]       env: HT_SEED (default 1), HT_OPS
 * Prints the seed; rerun with HT_SEED=<seed> to reproduce a failure. */
#include "hak_test.h"

typedef struct {
  uint8_t* p;
  size_t n;        /* requested size */
  size_t align;    /* requested alignment (0: none) */
  uint64_t key;    /* pattern key, (slot, generation) */
  uint32_t gen;
} slot_t;

/* Bytes of a block that carry the pattern: all of the first 4 KiB, the last
 * 64 bytes, and one 8-byte word per 4 KiB page in between (so huge blocks
 * stay cheap while every page is sampled). */
#define FULL 4096
static void pat_fill(uint8_t* p, size_t n, uint64_t key) {
  if (n <= FULL + 64) { ht_fill(p, n, key); return; }
  ht_fill_range(p, 0, FULL, key);
  for (size_t pg = FULL; pg + 8 <= n - 64; pg += 4096) {
    size_t off = pg + (ht_pat_word(key, pg) % 4088);
    if (off + 8 > n - 64) break;
    ht_fill_range(p, off, off + 8, key);
  }
  ht_fill_range(p, n - 64, n, key);
}
/* Verify the pattern of a block of (original) size n, restricted to the
 * prefix [0, lim).  Returns the first bad offset or SIZE_MAX. */
static size_t pat_check(const uint8_t* p, size_t n, size_t lim, uint64_t key) {
  if (n <= FULL + 64) return ht_check_range(p, 0, n < lim ? n : lim, key);
  size_t r = ht_check_range(p, 0, FULL < lim ? FULL : lim, key);
  if (r != SIZE_MAX) return r;
  for (size_t pg = FULL; pg + 8 <= n - 64; pg += 4096) {
    size_t off = pg + (ht_pat_word(key, pg) % 4088);
    if (off + 8 > n - 64) break;
    if (off + 8 > lim) return SIZE_MAX;
    r = ht_check_range(p, off, off + 8, key);
    if (r != SIZE_MAX) return r;
  }
  if (n - 64 < lim) return ht_check_range(p, n - 64, n < lim ? n : lim, key);
  return SIZE_MAX;
}

static ht_rng_t rng;
static size_t live_bytes, max_live;
static long nfail;
static unsigned long long counts[10];
enum { OP_MALLOC, OP_CALLOC, OP_REALLOC, OP_REALLOCARRAY, OP_FREE, OP_POSIX_MEMALIGN,
       OP_ALIGNED_ALLOC, OP_FREE_SIZED, OP_NOP };

static size_t pick_size(void) {
  uint64_t r = ht_below(&rng, 1000);
  if (r < 550) return (size_t)ht_range(&rng, 0, 128);             /* tiny */
  if (r < 850) return (size_t)ht_range(&rng, 129, 1024);          /* small */
  if (r < 970) return ht_logrange(&rng, 1025, 32 * HT_KiB);       /* medium */
  if (r < 996) return ht_logrange(&rng, 32 * HT_KiB, 256 * HT_KiB);
  return ht_logrange(&rng, 256 * HT_KiB, 8 * HT_MiB);             /* large */
}

static void bad(long op, size_t slot, const char* what, size_t n, size_t off) {
  nfail++;
  ht_failures++;
  if (nfail <= 10)
    printf("  FAILED op %ld slot %zu: %s (size %zu, offset %zu)\n", op, slot, what, n, off);
}

static void check_block(long op, size_t i, slot_t* s, const char* when) {
  ht_checks++;
  size_t off = pat_check(s->p, s->n, s->n, s->key);
  if (off != SIZE_MAX) bad(op, i, when, s->n, off);
}

static void check_fresh(long op, size_t i, slot_t* s, bool zero) {
  ht_checks++;
  if (s->p == NULL) { bad(op, i, "allocation returned NULL", s->n, 0); exit(1); }
  size_t a = s->align ? s->align : (s->n >= 16 ? 16 : 8);
  if (!ht_aligned(s->p, a)) bad(op, i, "misaligned block", s->n, (uintptr_t)s->p % a);
  size_t u = t_malloc_usable_size(s->p);
  if (u < s->n) bad(op, i, "usable size smaller than request", s->n, u);
  if (zero) {
    size_t off = ht_first_nonzero(s->p, s->n);
    if (off != SIZE_MAX) bad(op, i, "calloc block not zero", s->n, off);
  }
  /* the last usable byte must be writable */
  if (u > s->n) s->p[u - 1] = 0x5A;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  uint64_t seed = ht_env_u64("HT_SEED", 1);
  long ops = argc > 1 ? atol(argv[1]) : (long)ht_env_u64("HT_OPS", 2000000);
  size_t nslots = argc > 2 ? (size_t)atol(argv[2]) : 4096;
  size_t cap = 160 * HT_MiB;
  printf("test-model: %s names, seed=%llu ops=%ld slots=%zu (HT_SEED=%llu to reproduce)\n",
         T_NAMES, (unsigned long long)seed, ops, nslots, (unsigned long long)seed);
  rng.s = seed;
  slot_t* slots = (slot_t*)calloc(nslots, sizeof(slot_t));  /* the test's own memory */
  REQUIRE(slots != NULL);
  uint64_t digest = 0;

  for (long op = 0; op < ops; op++) {
    size_t i = (size_t)ht_below(&rng, nslots);
    slot_t* s = &slots[i];
    uint64_t r = ht_below(&rng, 100);
    if (s->p == NULL) {
      size_t n = pick_size();
      if (live_bytes + n > cap) { counts[OP_NOP]++; continue; }
      s->align = 0;
      bool zero = false;
      if (r < 55) {
        s->p = (uint8_t*)t_malloc(n);
        counts[OP_MALLOC]++;
      } else if (r < 75) {
        size_t cnt = 1, sz = n;
        if (n % 8 == 0 && n > 0) { cnt = n / 8; sz = 8; }
        s->p = (uint8_t*)(r & 1 ? t_calloc(cnt, sz) : t_calloc(sz, cnt));
        zero = true;
        counts[OP_CALLOC]++;
      } else if (r < 85) {
        s->p = (uint8_t*)t_realloc(NULL, n);
        counts[OP_REALLOC]++;
      } else if (r < 93) {
        size_t a = (size_t)16 << ht_below(&rng, ht_below(&rng, 8) == 0 ? 13 : 7); /* 16..64K */
        void* q = NULL;
        int rc = t_posix_memalign(&q, a, n);
        if (rc != 0) bad(op, i, "posix_memalign failed", n, (size_t)rc);
        s->p = (uint8_t*)q;
        s->align = a;
        counts[OP_POSIX_MEMALIGN]++;
      } else {
        size_t a = (size_t)16 << ht_below(&rng, 9); /* 16..4K */
        s->p = (uint8_t*)t_aligned_alloc(a, n);
        s->align = a;
        counts[OP_ALIGNED_ALLOC]++;
      }
      s->n = n;
      check_fresh(op, i, s, zero);
      s->gen++;
      s->key = ((uint64_t)i << 32) ^ s->gen ^ seed;
      pat_fill(s->p, n, s->key);
      live_bytes += n;
    } else if (r < 50) {
      /* free (sometimes sized) */
      check_block(op, i, s, "pattern damaged before free");
      if (r < 8 && s->align == 0) {
        t_free_sized(s->p, s->n);
        counts[OP_FREE_SIZED]++;
      } else {
        t_free(s->p);
        counts[OP_FREE]++;
      }
      live_bytes -= s->n;
      s->p = NULL;
    } else if (r < 85) {
      /* realloc to a related or a fresh size (also of aligned blocks, as
       * glibc allows; the result need only be malloc-aligned) */
      size_t m;
      uint64_t k = ht_below(&rng, 4);
      if (k == 0) m = s->n + ht_below(&rng, 64);
      else if (k == 1) m = s->n / 2 + ht_below(&rng, 16);
      else if (k == 2) m = s->n * 2 + 1;
      else m = pick_size();
      if (m > 8 * HT_MiB) m = 8 * HT_MiB;
      if (live_bytes - s->n + m > cap) { counts[OP_NOP]++; continue; }
      check_block(op, i, s, "pattern damaged before realloc");
      uint8_t* q;
      if (m == 0) m = 1;  /* realloc(p, 0) frees: tested in test-api */
      if (r < 55 && m % 4 == 0) {
        q = (uint8_t*)t_reallocarray(s->p, m / 4, 4);
        counts[OP_REALLOCARRAY]++;
      } else {
        q = (uint8_t*)t_realloc(s->p, m);
        counts[OP_REALLOC]++;
      }
      if (q == NULL) { bad(op, i, "realloc returned NULL", m, 0); exit(1); }
      size_t keep = s->n < m ? s->n : m;
      size_t off = pat_check(q, s->n, keep, s->key);
      if (off != SIZE_MAX) bad(op, i, "realloc lost content", s->n, off);
      live_bytes = live_bytes - s->n + m;
      s->p = q;
      s->n = m;
      s->align = 0;
      check_fresh(op, i, s, false);
      s->gen++;
      s->key = ((uint64_t)i << 32) ^ s->gen ^ seed;
      pat_fill(s->p, m, s->key);
    } else {
      /* verify in place */
      check_block(op, i, s, "pattern damaged (overlap or stray write)");
      counts[OP_NOP]++;
    }
    if (live_bytes > max_live) max_live = live_bytes;
    digest = digest * 31 + s->n;
    if (nfail > 10) break;
  }
  size_t live = 0;
  for (size_t i = 0; i < nslots; i++) {
    slot_t* s = &slots[i];
    if (s->p == NULL) continue;
    check_block(ops, i, s, "pattern damaged at the end");
    t_free(s->p);
    live++;
  }
  free(slots);
  printf("  malloc %llu calloc %llu realloc %llu reallocarray %llu free %llu free_sized %llu "
         "posix_memalign %llu aligned_alloc %llu verify/nop %llu\n",
         counts[OP_MALLOC], counts[OP_CALLOC], counts[OP_REALLOC], counts[OP_REALLOCARRAY],
         counts[OP_FREE], counts[OP_FREE_SIZED], counts[OP_POSIX_MEMALIGN],
         counts[OP_ALIGNED_ALLOC], counts[OP_NOP]);
  printf("  peak live %zu KiB, %zu blocks live at the end, digest %016llx\n", max_live >> 10,
         live, (unsigned long long)digest);
  return ht_done("test-model");
}
