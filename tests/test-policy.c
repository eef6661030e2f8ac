/* Tests of the large-block and release machinery (BigCache and its
 * cross-size reuse, release batch, decommit modes, profiles, malloc_trim,
 * THP, OS calls in steady state).
 * Linked against build/libhakmem.a; one scenario per run: test-policy NAME.
 * The case script sets the environment (profiles, overrides) per scenario. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "hak_test.h"   /* CHECKF, ht_failures; standard names (hakmem is malloc) */


static long minflt(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}
static size_t os_calls(void) {
  hak_os_stats_t s;
  hak_os_stats(&s);
  return s.mmap_calls + s.munmap_calls + s.madvise_calls + s.mremap_calls + s.mprotect_calls;
}
/* A number from the stats report: the value after "key=" on the line starting with `line`. */
static unsigned long long stat_value(const char* line, const char* key) {
  char* buf = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  hakmem_stats_print(f);
  fclose(f);
  unsigned long long v = ~0ull;
  for (char* l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    if (strncmp(l, line, strlen(line)) != 0) continue;
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", key);
    char* k = strstr(l, pat);
    if (k) v = strtoull(k + strlen(pat), NULL, 10);
    break;
  }
  free(buf);
  return v;
}
static void touch(void* p, size_t n) {
  for (size_t i = 0; i < n; i += 4096) ((volatile char*)p)[i] = 1;
}

/* repeated malloc/free of one large size: no OS call, no fault after the first */
static void t_bigcache_hit(void) {
  size_t n = 2u << 20;
  void* p = malloc(n);
  touch(p, n);
  free(p);
  size_t calls = os_calls();
  long flt = minflt();
  for (int i = 0; i < 200; i++) {
    void* q = malloc(n);
    touch(q, n);
    free(q);
  }
  CHECKF(os_calls() == calls, "os calls grew by %zu", os_calls() - calls);
  CHECKF(minflt() - flt < 16, "page faults %ld", minflt() - flt);
  CHECKF(stat_value("bigcache:", "hits") >= 200, "hits %llu", stat_value("bigcache:", "hits"));
}

/* the cache is bounded by HAKMEM_BIGCACHE_MAX_MB (the script sets 32) */
static void t_bigcache_bound(void) {
  enum { N = 40 };
  void* p[N];
  for (int i = 0; i < N; i++) {
    p[i] = malloc((size_t)(3 + i % 3) << 20);
    touch(p[i], (size_t)(3 + i % 3) << 20);
  }
  for (int i = 0; i < N; i++) free(p[i]);
  unsigned long long bytes = stat_value("bigcache:", "bytes");
  CHECKF(bytes <= (32ull << 20), "cached %llu bytes", bytes);
  CHECKF(stat_value("bigcache:", "evictions") > 0, "no evictions");
}

/* with BIGCACHE_MAX_MB=0 and DECOMMIT=dontneed a freed block is decommitted:
 * its pages read back zero when the mapping is reused, and RSS falls */
static void t_batch_dontneed(void) {
  size_t n = 8u << 20;
  size_t before = ht_rss_kb();
  unsigned char* p = malloc(n);
  memset(p, 0xAB, n);
  size_t during = ht_rss_kb();
  free(p);
  size_t after = ht_rss_kb();
  CHECKF(during > before + 7 * 1024, "rss did not grow (%zu -> %zu)", before, during);
  CHECKF(after + 7 * 1024 < during, "rss did not fall (%zu -> %zu)", during, after);
  unsigned char* q = malloc(n);
  if (q == p) {
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i += 512) nonzero += q[i] != 0;
    CHECKF(nonzero == 0, "%zu stale bytes in a reused decommitted block", nonzero);
  }
  free(q);
  CHECKF(stat_value("release:", "decommits") >= 1, "no decommit");
}

/* calloc of a reused (dirty) large block is zero */
static void t_calloc_reuse(void) {
  for (int i = 0; i < 20; i++) {
    size_t n = (size_t)(300 + 37 * i) << 10;
    unsigned char* p = malloc(n);
    memset(p, 0x5A, n);
    free(p);
    unsigned char* q = calloc(1, n);
    for (size_t k = 0; k < n; k++)
      if (q[k]) {
        CHECKF(0, "calloc byte %zu of %zu is %d", k, n, q[k]);
        break;
      }
    free(q);
  }
}

/* A pattern byte for offset i of block `tag`. */
static unsigned char pat(size_t i, unsigned tag) { return (unsigned char)((i >> 12) * 31 + i + tag); }
static void fill(unsigned char* p, size_t from, size_t to, unsigned tag) {
  for (size_t i = (from + 508) / 509 * 509; i < to; i += 509) p[i] = pat(i, tag);
}
static size_t check_fill(const unsigned char* p, size_t n, unsigned tag) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i += 509) bad += p[i] != pat(i, tag);
  return bad;
}

/* Cross-size reuse of the large tier: a block growing by realloc moves into
 * a cached bigger block whose touched extent covers it (copied while small,
 * its pages moved by mremap beyond 1 MiB) and grows into resident memory:
 * contents preserved, few page faults; growing it past that block's mapping
 * still works (mremap, or a copy when the range is two moved pieces). */
static void t_cross_realloc(void) {
  size_t big = 48u << 20;
  unsigned tag = 1;
  for (int round = 0; round < 2; round++) {
    /* a cached, fully touched 48 MiB block */
    unsigned char* c = malloc(big);
    touch(c, big);
    free(c);
    /* round 0 starts small (copied), round 1 at 1.5 MiB (pages moved) */
    size_t n = round == 0 ? 200u << 10 : 1536u << 10;
    unsigned char* p = malloc(n);
    fill(p, 0, n, tag);   /* touches every page */
    long flt = minflt();
    while (n < (24u << 20)) {
      size_t m = n + n / 2;
      p = realloc(p, m);
      CHECKF(p != NULL, "realloc to %zu", m);
      if (p == NULL) return;
      CHECKF(check_fill(p, n, tag) == 0, "round %d: contents lost growing %zu -> %zu", round, n, m);
      fill(p, n, m, tag);
      n = m;
    }
    long grow_faults = minflt() - flt;
    printf("cross_realloc: round %d: %ld faults growing to %zu MiB\n", round, grow_faults, n >> 20);
    /* without the cached block: ~6,000 (one per 4 KiB page) */
    CHECKF(grow_faults < 1500, "round %d: %ld faults growing into a cached block", round, grow_faults);
    /* past the 112 MiB mapping of the cached block */
    size_t m = 160u << 20;
    p = realloc(p, m);
    CHECKF(p != NULL, "realloc to %zu", m);
    if (p == NULL) return;
    CHECKF(check_fill(p, n, tag) == 0, "round %d: contents lost growing past the mapping", round);
    fill(p, n, m, tag);
    CHECKF(check_fill(p, m, tag) == 0, "round %d: contents", round);
    /* and shrinking back */
    p = realloc(p, 300u << 10);
    CHECKF(p != NULL && check_fill(p, 300u << 10, tag) == 0, "round %d: contents after shrinking", round);
    free(p);
    tag++;
  }
}

/* End of the mapping that holds p (from /proc/self/maps), 0 if unknown. */
static uintptr_t mapping_end(const void* p) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) return 0;
  unsigned long a, b, end = 0;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "%lx-%lx", &a, &b) == 2 && a <= (uintptr_t)p && (uintptr_t)p < b) end = b;
  fclose(f);
  return end;
}

/* A cached block whose mapping is smaller than a request but covers most of
 * it (a realloc that could not grow in place moved it to a mapping of its
 * exact size) serves the request: its mapping is grown, its resident pages
 * are reused (few faults), and calloc of it is zero. */
static void t_cross_grow(void) {
  size_t n = 8u << 20;
  unsigned char* p = malloc(n);
  memset(p, 1, n);
  uintptr_t end = mapping_end(p);
  /* occupy the range after the mapping: the realloc must move */
  void* wall = end ? mmap((void*)end, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) : MAP_FAILED;
  CHECKF(wall == (void*)end, "cannot place a wall after the block's mapping");
  size_t m = end - (uintptr_t)p + (4u << 20);   /* past the mapping's headroom */
  p = realloc(p, m);
  CHECKF(p != NULL, "realloc");
  if (p == NULL) return;
  memset(p, 2, m);
  free(p);   /* cached: mapping of exactly m + header, all of it touched */
  long flt = minflt();
  size_t big = m + (2u << 20);
  unsigned char* q = calloc(1, big);
  long faults = minflt() - flt;
  size_t nz = 0;
  for (size_t i = 0; i < big; i += 97) nz += q[i] != 0;
  printf("cross_grow: %zu MiB block from a cached %zu MiB one: %s, %ld faults\n", big >> 20, m >> 20,
         q == p ? "same address" : "moved", faults);
  CHECKF(nz == 0, "%zu non-zero bytes in calloc of a grown cached block", nz);
  /* reusing it faults in the 2 MiB beyond (512 pages), not all 5,000+ */
  CHECKF(faults < (long)(m >> 12) / 2, "%ld faults: the cached block was not reused", faults);
  free(q);
  munmap(wall, 4096);
}

/* A growing realloc with nothing suitable cached: the usual path (mremap in
 * place or moving the pages), contents preserved, and calloc of a block that
 * was grown into is zero. */
static void t_cross_calloc(void) {
  unsigned char* c = malloc(32u << 20);
  memset(c, 0x77, 32u << 20);
  free(c);
  unsigned char* p = malloc(300u << 10);
  fill(p, 0, 300u << 10, 9);
  p = realloc(p, 20u << 20);   /* takes the cached block */
  CHECKF(p != NULL && check_fill(p, 300u << 10, 9) == 0, "contents after the move");
  free(p);
  unsigned char* z = calloc(1, 30u << 20);   /* reuses it: dirty, must read zero */
  size_t nz = 0;
  for (size_t i = 0; i < (30u << 20); i += 97) nz += z[i] != 0;
  CHECKF(nz == 0, "%zu non-zero bytes in calloc of a reused block", nz);
  free(z);
}

/* Small long-lived buffers that grew by realloc into big cached blocks do
 * not pin those blocks' pages without bound: what they hold beyond their
 * size stays within the cache's byte budget (HAKMEM_BIGCACHE_MAX_MB, set to
 * 64 by the script).  Eight rounds of: a 40 MiB buffer written and freed
 * (cached), then a 300 KiB buffer grown to 900 KiB and kept.  Unbounded,
 * each kept buffer would hold a 40 MiB block: 320 MiB after malloc_trim. */
static void t_cross_pin(void) {
  size_t start = ht_rss_kb();
  unsigned char* keep[8];
  for (int r = 0; r < 8; r++) {
    unsigned char* big = malloc(40u << 20);
    touch(big, 40u << 20);
    free(big);
    unsigned char* p = malloc(300u << 10);
    fill(p, 0, 300u << 10, (unsigned)r + 20);
    for (size_t n = 300u << 10; n < (900u << 10);) {
      size_t m = n + n / 2;
      p = realloc(p, m);
      CHECKF(p != NULL, "realloc to %zu", m);
      if (p == NULL) return;
      fill(p, n, m, (unsigned)r + 20);
      n = m;
    }
    keep[r] = p;
  }
  malloc_trim(0);
  size_t now = ht_rss_kb();
  printf("cross_pin: RSS %zu KiB at start, %zu KiB with 8 kept buffers after malloc_trim\n", start, now);
  /* bound: the 64 MiB budget plus the buffers (8 x ~1 MiB) and 8 MiB slack */
  CHECKF(now < start + (64u << 10) + (16u << 10), "RSS %zu KiB: kept buffers pin cached blocks beyond the budget", now);
  for (int r = 0; r < 8; r++) {
    CHECKF(check_fill(keep[r], 300u << 10, (unsigned)r + 20) == 0, "buffer %d contents", r);
    free(keep[r]);
  }
}

/* build a 1 GiB live set of mixed small and large blocks, free it all;
 * mode "wait": RSS back within 10 % + 8 MiB within one second (lean);
 * mode "trim": the same immediately after malloc_trim(0) (every profile) */
static void t_rss_return(int trim) {
  size_t start = ht_rss_kb();
  size_t nsmall = 600000, nlarge = 300;
  void** small = malloc(nsmall * sizeof *small);
  void** large = malloc(nlarge * sizeof *large);
  uint64_t s = 12345;
  for (size_t i = 0; i < nsmall; i++) {   /* ~ 600k x avg 880 B = 0.5 GiB */
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    size_t n = 16 + (s >> 33) % 1744;
    small[i] = malloc(n);
    memset(small[i], 1, n);
  }
  for (size_t i = 0; i < nlarge; i++) {   /* 300 x ~1.7 MiB = 0.5 GiB */
    size_t n = (size_t)(1 + i % 5) * (700u << 10);
    large[i] = malloc(n);
    touch(large[i], n);
  }
  size_t peak = ht_rss_kb();
  CHECKF(peak > start + 900 * 1024, "live set too small: %zu KiB", peak - start);
  for (size_t i = 0; i < nsmall; i++) free(small[(i * 7919) % nsmall]);   /* scattered */
  for (size_t i = 0; i < nlarge; i++) free(large[i]);
  free(small);
  free(large);
  size_t bound = start + start / 10 + 8 * 1024;
  size_t now = ht_rss_kb();
  if (trim) {
    malloc_trim(0);
    now = ht_rss_kb();
  } else {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
      now = ht_rss_kb();
      clock_gettime(CLOCK_MONOTONIC, &t);
      double el = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9;
      if (now <= bound || el > 1.0) break;
      /* allocator activity drives the release clock, as in a live program */
      free(malloc(64));
      usleep(20000);
    }
  }
  printf("rss: start %zu KiB, peak %zu KiB, after %zu KiB, bound %zu KiB\n", start, peak, now, bound);
  CHECKF(now <= bound, "rss %zu KiB above %zu KiB", now, bound);
}

/* OS calls per op in a steady mixed run (the library's own counters) */
static void t_steady_calls(void) {
  enum { WS = 400 };
  void* slot[WS] = {0};
  uint64_t s = 88172645463325252ull;
  long ops = 4000000;
  size_t calls0 = 0;
  for (long i = 0; i < ops; i++) {
    if (i == ops / 4) calls0 = os_calls();   /* after warm-up */
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    size_t k = s % WS, n = 16 + (s >> 20) % 1009;
    free(slot[k]);
    slot[k] = malloc(n);
    ((char*)slot[k])[0] = 1;
  }
  size_t d = os_calls() - calls0;
  printf("steady: %zu OS calls in %ld ops\n", d, ops - ops / 4);
  CHECKF(d == 0, "%zu OS memory calls in steady state", d);
  for (int k = 0; k < WS; k++) free(slot[k]);
}

/* The page heap (src/pool.c): the pages of one class's slabs, emptied and
 * given back, serve another class's slabs without an OS call and without
 * faulting pages in again (they are still resident: the balanced profile,
 * which the case runs; lean gives them back at once, speed does not track
 * which free pages are resident). */
static void t_cross_class(void) {
  enum { NA = 4096, NB = 960 };   /* 2 MiB of 512-byte blocks (32 slabs), then 1.9 MiB of 2 KiB blocks */
  static char* a[NA];
  static char* b[NB];
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < NA; i++) {
    a[i] = malloc(512);
    if (a[i] == NULL) { CHECKF(0, "malloc failed"); return; }
    memset(a[i], 1, 512);
    if ((uintptr_t)a[i] < lo) lo = (uintptr_t)a[i];
    if ((uintptr_t)a[i] > hi) hi = (uintptr_t)a[i];
  }
  for (int i = 0; i < NA; i++) free(a[i]);
  size_t calls0 = os_calls();
  long flt0 = minflt();
  int inside = 0;
  for (int i = 0; i < NB; i++) {
    b[i] = malloc(2000);
    if (b[i] == NULL) { CHECKF(0, "malloc failed"); return; }
    memset(b[i], 2, 2000);
    inside += (uintptr_t)b[i] >= lo && (uintptr_t)b[i] <= hi;
  }
  size_t calls = os_calls() - calls0;
  long flt = minflt() - flt0;
  printf("cross_class: %d of %d blocks of 2 KiB in the 512-byte class's former pages; %zu OS calls, %ld faults\n", inside, NB,
         calls, flt);
  CHECKF(calls == 0, "%zu OS memory calls for pages another class gave back", calls);
  CHECKF(inside >= NB * 9 / 10, "only %d of %d blocks on the pages the other class gave back", inside, NB);
  CHECKF(flt < 48, "%ld page faults taking back resident pages (1.9 MiB: 480 pages)", flt);
  for (int i = 0; i < NB; i++) free(b[i]);
}

/* Page-exact slabs (blocks from 16 KiB: slab.c's table).  A freed block's
 * pages join their free neighbours and serve blocks of another size at once,
 * without an OS call or a fault; and the empty slabs such classes keep as
 * reserves stay within 64 pages when a class takes a new slab (one of each
 * of the 16 classes would keep 221). */
static void t_exact(void) {
  enum { NA = 64, NB = 30 };
  static char* a[NA];
  static char* b[NB];
  free(malloc(64));
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < NA; i++) {
    a[i] = malloc(20000);   /* 5 pages each */
    if (a[i] == NULL) { CHECKF(0, "malloc failed"); return; }
    memset(a[i], 1, 20000);
    if ((uintptr_t)a[i] < lo) lo = (uintptr_t)a[i];
    if ((uintptr_t)a[i] + 20480 > hi) hi = (uintptr_t)a[i] + 20480;
  }
  for (int i = 0; i < NA; i++) free(a[i]);
  size_t calls0 = os_calls();
  long flt0 = minflt();
  int inside = 0;
  for (int i = 0; i < NB; i++) {
    b[i] = malloc(40000);   /* 10 pages each: two freed blocks' runs joined */
    if (b[i] == NULL) { CHECKF(0, "malloc failed"); return; }
    memset(b[i], 2, 40000);
    inside += (uintptr_t)b[i] >= lo && (uintptr_t)b[i] + 40000 <= hi;
  }
  size_t calls = os_calls() - calls0;
  long flt = minflt() - flt0;
  printf("exact: %d of %d blocks of 40 KB on the pages of 20 KB blocks; %zu OS calls, %ld faults\n", inside, NB, calls, flt);
  CHECKF(calls == 0, "%zu OS memory calls for pages freed blocks gave back", calls);
  CHECKF(inside == NB, "only %d of %d blocks on the pages the smaller blocks gave back", inside, NB);
  CHECKF(flt < 16, "%ld page faults taking back resident pages (1.2 MB: 300 pages)", flt);
  for (int i = 0; i < NB; i++) free(b[i]);
  static const size_t sizes[] = {16384, 17408, 20480, 24576, 28672, 32768, 34816, 40960,
                                 49152, 57344, 65536, 69632, 81920, 98304, 114688, 131072};
  unsigned long long before = stat_value("pages:", "in_slabs");
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    char* p = malloc(sizes[k]);
    if (p == NULL) { CHECKF(0, "malloc failed"); return; }
    p[0] = 1;
    free(p);
  }
  unsigned long long after = stat_value("pages:", "in_slabs");
  printf("exact: slab pages %llu before one block of each class, %llu after\n", before, after);
  CHECKF(after <= before + 64 + 32, "%llu slab pages kept after one block of each class (before: %llu)", after, before);
}

/* THP modes must not break alignment or realloc of big blocks */
static void t_thp(void) {
  for (size_t n = 1u << 20; n <= (64u << 20); n *= 2) {
    char* p = malloc(n);
    CHECKF(((uintptr_t)p & 15) == 0, "align");
    memset(p, 7, n);
    p = realloc(p, n * 3 / 2);
    CHECKF(p && p[n - 1] == 7 && p[0] == 7, "realloc content");
    void* a = NULL;
    CHECKF(posix_memalign(&a, 2u << 20, n) == 0 && ((uintptr_t)a & ((2u << 20) - 1)) == 0, "2 MiB alignment");
    free(a);
    free(p);
  }
}

/* profile defaults and explicit overrides (the script exports the env) */
static void t_profile(const char* want_profile, const char* name, long long want) {
  long long prof = hak_option_get("HAKMEM_PROFILE");
  long long v = hak_option_get(name);
  printf("profile=%lld %s=%lld\n", prof, name, v);
  CHECKF(prof == atoll(want_profile), "profile %lld", prof);
  CHECKF(v == want, "%s = %lld, want %lld", name, v, want);
}

/* One block of each class from 4 KiB up, its first byte written: a carve
 * takes one block in those classes (slab.c, slab_extend), so each block
 * costs the page written and hardly another.  A carve of four blocks wrote
 * the first words of three more, a page each (espresso: 124 KB of peak RSS). */
static void t_carve_faults(void) {
  free(malloc(64));   /* the thread's heap and first segment exist */
  void* keep[64];
  size_t k = 0;
  long before = minflt();
  for (size_t n = 4097; n <= (128u << 10) && k < 64; k++) {
    char* p = malloc(n);
    CHECKF(p != NULL, "malloc(%zu)", n);
    if (p == NULL) return;
    p[0] = 1;
    keep[k] = p;
    n = malloc_usable_size(p) + 1;   /* the next class */
  }
  long faults = minflt() - before;
  printf("carve_faults: %zu classes from 4 KiB up, one block each: %ld page faults\n", k, faults);
  CHECKF(k >= 20, "only %zu classes from 4 KiB to 128 KiB", k);
  CHECKF(faults <= 2 * (long)k + 24, "%ld page faults for %zu blocks, each written at its first byte", faults, k);
  for (size_t i = 0; i < k; i++) free(keep[i]);
}

/* One reserve for the process (docs/DESIGN.md, "One reserve, all the
 * same"): 24 MiB of small blocks freed leave the pool's pages resident;
 * large blocks of as many bytes written then take the place of those pages
 * rather than add to them, and back: the large blocks freed into the
 * BigCache make way for small blocks again.  Bounds on RSS and the yield
 * counts, with huge pages off (a huge page is given back whole or not at
 * all) and DONTNEED (MADV_FREE's pages stay in RSS until reclaimed). */
static void t_one_reserve(void) {
  enum { NS = 24 * 1024, NL = 3 };   /* within the balanced profile's 8 cached segments */
  static char* s[NS];
  char* l[NL];
  for (int i = 0; i < NS; i++) { s[i] = malloc(1000); if (!s[i]) { CHECKF(0, "malloc failed"); return; } memset(s[i], 1, 1000); }
  for (int i = 0; i < NS; i++) free(s[i]);
  size_t r1 = ht_rss_kb();
  for (int i = 0; i < NL; i++) { l[i] = malloc(8 << 20); if (!l[i]) { CHECKF(0, "malloc failed"); return; } memset(l[i], 2, 8 << 20); }
  size_t r2 = ht_rss_kb();
  unsigned long long pages = stat_value("pages:", "yielded");
  printf("one_reserve: small freed %zu KiB, 24 MiB large written %zu KiB, pool pages yielded %llu\n", r1, r2, pages);
  CHECKF(r2 <= r1 + 4 * 1024, "large blocks added %zu KiB beside the pool's free pages", r2 - r1);
  CHECKF(pages != ~0ull && pages >= 20 * 256, "the pool yielded %llu pages for 24 MiB", pages);
  for (int i = 0; i < NL; i++) free(l[i]);
  size_t r3 = ht_rss_kb();
  for (int i = 0; i < NS; i++) { s[i] = malloc(1000); if (!s[i]) { CHECKF(0, "malloc failed"); return; } memset(s[i], 3, 1000); }
  size_t r4 = ht_rss_kb();
  unsigned long long bytes = stat_value("bigcache:", "yielded");
  printf("one_reserve: large freed %zu KiB, 24 MiB small written %zu KiB, cached bytes yielded %llu\n", r3, r4, bytes);
  CHECKF(r4 <= r3 + 4 * 1024, "small blocks added %zu KiB beside the cached large blocks", r4 > r3 ? r4 - r3 : 0);
  CHECKF(bytes != ~0ull && bytes >= (20ull << 20), "the BigCache yielded %llu bytes for 24 MiB", bytes);
  for (int i = 0; i < NS; i++) free(s[i]);
}

int main(int argc, char** argv) {
  const char* t = argc > 1 ? argv[1] : "";
  if (!strcmp(t, "bigcache_hit")) t_bigcache_hit();
  else if (!strcmp(t, "bigcache_bound")) t_bigcache_bound();
  else if (!strcmp(t, "batch_dontneed")) t_batch_dontneed();
  else if (!strcmp(t, "calloc_reuse")) t_calloc_reuse();
  else if (!strcmp(t, "cross_realloc")) t_cross_realloc();
  else if (!strcmp(t, "cross_calloc")) t_cross_calloc();
  else if (!strcmp(t, "cross_grow")) t_cross_grow();
  else if (!strcmp(t, "cross_pin")) t_cross_pin();
  else if (!strcmp(t, "rss_wait")) t_rss_return(0);
  else if (!strcmp(t, "rss_trim")) t_rss_return(1);
  else if (!strcmp(t, "steady_calls")) t_steady_calls();
  else if (!strcmp(t, "thp")) t_thp();
  else if (!strcmp(t, "carve_faults")) t_carve_faults();
  else if (!strcmp(t, "cross_class")) t_cross_class();
  else if (!strcmp(t, "exact")) t_exact();
  else if (!strcmp(t, "one_reserve")) t_one_reserve();
  else if (!strcmp(t, "profile") && argc == 5) t_profile(argv[2], argv[3], atoll(argv[4]));
  else {
    fprintf(stderr, "usage: test-policy SCENARIO\n");
    return 2;
  }
  printf("%s: %s\n", t, ht_failures ? "FAILED" : "ok");
  return ht_failures ? 1 : 0;
}
