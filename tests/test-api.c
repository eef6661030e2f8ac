/* API conformance test: every entry point of the malloc API with glibc
 * semantics (alignment, zeroing, errno on failure, realloc content, usable
 * size), plus hakmem's own calls.  Built several ways (see hak_test.h):
 * standard names against libhakmem.a, hak_ names against the debug and
 * sanitizer libraries, and against glibc only (run with and without
 * LD_PRELOAD=libhakmem.so).
 *
 * usage: test-api [--require-hakmem]   exit 0 when every check passed */
#include "hak_test.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>

/* The failed-realloc checks deliberately use the pointer afterwards. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif

static char static_buf[256];
static int require_hakmem;

static int cmp_ptr(const void* a, const void* b) {
  uintptr_t x = *(const uintptr_t*)a, y = *(const uintptr_t*)b;
  return x < y ? -1 : x > y;
}

/* Minimum alignment we demand of a plain malloc(n): 16 for n >= 16 (the
 * spec), and the natural alignment of the largest fundamental object that
 * fits below that. */
static size_t min_align(size_t n) {
  if (n >= 16) return 16;
  return 8;
}

/* Capture what `fn` writes to file descriptor 2 (stderr) into buf. */
static size_t capture_stderr(void (*fn)(void*), void* arg, char* buf, size_t cap) {
  char path[] = "/tmp/hakmem-test-api-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return 0;
  unlink(path);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  fn(arg);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  off_t len = lseek(fd, 0, SEEK_END);
  size_t got = 0;
  if (len > 0) {
    lseek(fd, 0, SEEK_SET);
    ssize_t r = read(fd, buf, cap - 1);
    got = r > 0 ? (size_t)r : 0;
  }
  buf[got] = 0;
  close(fd);
  return len > 0 ? (size_t)len : 0;
}

/* ------------------------------------------------------------------------ */
static void test_os_stats(void) {
  ht_begin("hak_os_stats counts the mmap of a 64 MiB block; collect returns it");
  if (!ht_has_hakmem()) { printf("  skipped: hakmem not loaded\n"); return; }
  t_collect();
  hak_os_stats_t a, b, c;
  t_os_stats(&a);
  size_t rss0 = ht_rss();
  size_t n = 64 * HT_MiB;
  uint8_t* p = (uint8_t*)t_malloc(n);
  REQUIRE(p != NULL);
  memset(p, 0x11, n);
  size_t rss1 = ht_rss();
  t_os_stats(&b);
  CHECKF(b.mmap_calls > a.mmap_calls, "mmap_calls %zu -> %zu", a.mmap_calls, b.mmap_calls);
  CHECKF(b.mmap_bytes >= a.mmap_bytes + n, "mmap_bytes %zu -> %zu", a.mmap_bytes, b.mmap_bytes);
  CHECKF(b.mapped_bytes >= n, "mapped_bytes %zu", b.mapped_bytes);
  CHECKF(b.peak_mapped_bytes >= b.mapped_bytes, "peak %zu < mapped %zu", b.peak_mapped_bytes,
         b.mapped_bytes);
  CHECKF(rss1 >= rss0 + n - 4 * HT_MiB, "RSS %zu -> %zu after touching 64 MiB", rss0, rss1);
  t_free(p);
  t_collect();
  t_os_stats(&c);
  size_t rss2 = ht_rss();
  CHECKF(c.munmap_bytes >= b.munmap_bytes + n || c.madvise_bytes >= b.madvise_bytes + n,
         "after free+collect: munmap_bytes %zu -> %zu, madvise_bytes %zu -> %zu", b.munmap_bytes,
         c.munmap_bytes, b.madvise_bytes, c.madvise_bytes);
  CHECKF(c.mapped_bytes + n <= b.mapped_bytes || c.madvise_bytes >= b.madvise_bytes + n,
         "mapped_bytes %zu -> %zu after free+collect", b.mapped_bytes, c.mapped_bytes);
  CHECKF(rss2 + 32 * HT_MiB <= rss1, "RSS %zu -> %zu after free+collect of 64 MiB", rss1, rss2);
  CHECK(c.peak_mapped_bytes >= b.peak_mapped_bytes);
  printf("  mmap_calls %zu -> %zu, mapped %zu -> %zu -> %zu KiB, RSS %zu -> %zu -> %zu KiB\n",
         a.mmap_calls, b.mmap_calls, a.mapped_bytes >> 10, b.mapped_bytes >> 10,
         c.mapped_bytes >> 10, rss0 >> 10, rss1 >> 10, rss2 >> 10);
}

/* Every size 1..8 KiB live at once: alignment, usable size, whole usable
 * size writable, no overlap (patterns survive), owned. */
static void test_small_sizes(void) {
  ht_begin("malloc of every size 1..8192: alignment, usable size, no overlap");
  enum { N = 8192 };
  static void* blk[N + 1];
  static size_t us[N + 1];
  long bad_align = 0, bad_usable = 0, bad_owns = 0;
  for (size_t n = 1; n <= N; n++) {
    void* p = t_malloc(n);
    REQUIRE(p != NULL);
    blk[n] = p;
    if (!ht_aligned(p, min_align(n))) {
      if (bad_align++ < 5) CHECKF(0, "malloc(%zu) = %p not %zu-aligned", n, p, min_align(n));
    }
    us[n] = t_malloc_usable_size(p);
    if (us[n] < n || us[n] > 2 * n + 4096) {
      if (bad_usable++ < 5) CHECKF(0, "malloc_usable_size(malloc(%zu)) = %zu", n, us[n]);
      if (us[n] < n) us[n] = n;
    }
    if (!t_owns(p) && bad_owns++ < 5) CHECKF(0, "hak_owns(malloc(%zu)) == 0", n);
    ht_fill(p, us[n], 0x5000 + n);
  }
  long bad_pat = 0;
  for (size_t n = 1; n <= N; n++) {
    size_t off = ht_check_range(blk[n], 0, us[n], 0x5000 + n);
    if (off != SIZE_MAX && bad_pat++ < 5)
      CHECKF(0, "block of size %zu at %p: byte %zu overwritten (overlapping blocks?)", n, blk[n],
             off);
  }
  CHECK(bad_align == 0);
  CHECK(bad_usable == 0);
  CHECK(bad_owns == 0);
  CHECK(bad_pat == 0);
  /* Free in a scrambled order, then reallocate everything once more. */
  ht_rng_t r = {42};
  for (size_t i = N; i > 1; i--) {
    size_t j = 1 + ht_below(&r, i);
    void* t = blk[i]; blk[i] = blk[j]; blk[j] = t;
  }
  for (size_t n = 1; n <= N; n++) t_free(blk[n]);
  for (size_t n = 1; n <= N; n++) {
    blk[n] = t_malloc(n);
    REQUIRE(blk[n] != NULL);
    ht_fill(blk[n], n, n);
  }
  for (size_t n = 1; n <= N; n++) {
    CHECKF(ht_check(blk[n], n, n), "second round: block of size %zu corrupted", n);
    t_free(blk[n]);
  }
  printf("  %d sizes: usable size of 1, 16, 100, 1000, 8192 = %zu, %zu, %zu, %zu, %zu\n", N,
         us[1], us[16], us[100], us[1000], us[8192]);
}

static void test_large_sizes(void) {
  ht_begin("malloc of sizes 8 KiB..64 MiB: 16-byte alignment, usable size writable");
  size_t count = 0;
  for (size_t base = 8 * HT_KiB; base <= 64 * HT_MiB; base *= 2) {
    size_t sizes[] = {base - 1, base, base + 1, base + base / 3, base + base / 2 + 17};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      size_t n = sizes[k];
      if (n > 64 * HT_MiB) continue;
      uint8_t* p = (uint8_t*)t_malloc(n);
      REQUIRE(p != NULL);
      CHECKF(ht_aligned(p, 16), "malloc(%zu) = %p not 16-aligned", n, (void*)p);
      size_t u = t_malloc_usable_size(p);
      CHECKF(u >= n && u <= 2 * n + 4096, "malloc_usable_size(malloc(%zu)) = %zu", n, u);
      CHECKF(t_owns(p), "hak_owns(malloc(%zu)) == 0", n);
      if (u < n) u = n;
      memset(p, 0xA5, u);
      CHECK(p[0] == 0xA5 && p[u - 1] == 0xA5);
      t_free(p);
      count++;
    }
  }
  printf("  %zu sizes\n", count);
}

static void test_malloc0(void) {
  ht_begin("malloc(0): unique, non-NULL, freeable; realloc(NULL,0), calloc(0,0)");
  enum { N = 200 };
  void* p[N];
  for (int i = 0; i < N; i++) {
    p[i] = t_malloc(ht_opaque(0));
    REQUIRE(p[i] != NULL);
    CHECK(t_owns(p[i]));
  }
  qsort(p, N, sizeof p[0], cmp_ptr);
  int dups = 0;
  for (int i = 1; i < N; i++) dups += p[i] == p[i - 1];
  CHECKF(dups == 0, "%d duplicate pointers among %d malloc(0)", dups, N);
  for (int i = 0; i < N; i++) t_free(p[i]);
  void* q = t_realloc(NULL, 0);
  CHECK(q != NULL);
  t_free(q);
  q = t_calloc(0, 0);
  CHECK(q != NULL);
  t_free(q);
  q = t_calloc(0, 100);
  CHECK(q != NULL);
  t_free(q);
  t_free(NULL);
}

static void test_calloc(void) {
  ht_begin("calloc returns zeroed memory even when reusing dirty blocks");
  static const size_t sizes[] = {1, 8, 16, 24, 48, 100, 128, 255, 512, 1000, 1024, 2000, 4096,
                                 5000, 16384, 20000, 65536, 100000, 262144, 300000,
                                 1 << 20, (2 << 20) + 1, 4 << 20, 8 << 20, 32 << 20};
  long bad = 0;
  size_t nsizes = sizeof sizes / sizeof sizes[0];
  for (size_t k = 0; k < nsizes; k++) {
    size_t n = sizes[k];
    int reps = n <= 65536 ? 50 : n <= (1 << 20) ? 10 : 4;
    for (int r = 0; r < reps; r++) {
      uint8_t* p = (uint8_t*)t_malloc(n);
      REQUIRE(p != NULL);
      size_t u = t_malloc_usable_size(p);
      memset(p, 0xAB, u > n ? u : n);
      t_free(p);
      uint8_t* q;
      switch (r % 3) {
        case 0: q = (uint8_t*)t_calloc(1, n); break;
        case 1: q = (uint8_t*)t_calloc(n, 1); break;
        default: q = (uint8_t*)t_calloc(n % 8 ? n : n / 8, n % 8 ? 1 : 8); break;
      }
      REQUIRE(q != NULL);
      size_t off = ht_first_nonzero(q, n);
      if (off != SIZE_MAX && bad++ < 5)
        CHECKF(0, "calloc(%zu) after free of a dirty block: byte %zu = 0x%02x", n, off, q[off]);
      t_free(q);
    }
  }
  /* Bulk: many dirty blocks freed, then the same number calloc'ed. */
  static const size_t bulk_sizes[] = {16, 64, 200, 1024, 3000, 40000, 300000};
  enum { M = 600 };
  static uint8_t* blk[M];
  for (size_t k = 0; k < sizeof bulk_sizes / sizeof bulk_sizes[0]; k++) {
    size_t n = bulk_sizes[k];
    int m = n >= 300000 ? 40 : M;
    for (int i = 0; i < m; i++) {
      blk[i] = (uint8_t*)t_malloc(n);
      REQUIRE(blk[i] != NULL);
      memset(blk[i], 0xAB, n);
    }
    for (int i = 0; i < m; i++) t_free(blk[i]);
    for (int i = 0; i < m; i++) {
      blk[i] = (uint8_t*)t_calloc(1, n);
      REQUIRE(blk[i] != NULL);
      size_t off = ht_first_nonzero(blk[i], n);
      if (off != SIZE_MAX && bad++ < 5)
        CHECKF(0, "bulk calloc(%zu) #%d: byte %zu nonzero", n, i, off);
    }
    for (int i = 0; i < m; i++) t_free(blk[i]);
  }
  CHECK(bad == 0);
  printf("  %zu sizes up to 32 MiB, plus bulk reuse of %zu sizes\n", nsizes,
         sizeof bulk_sizes / sizeof bulk_sizes[0]);
}

#define EXPECT_NULL_ERRNO(expr, err)                                                  \
  do {                                                                                \
    errno = 0;                                                                        \
    void* r_ = (expr);                                                                \
    int e_ = errno;                                                                   \
    CHECKF(r_ == NULL && e_ == (err), "%s = %p, errno %d (%s); want NULL, errno %s", #expr, \
           r_, e_, strerror(e_), #err);                                               \
    if (r_ != NULL) t_free(r_);                                                       \
  } while (0)

static void test_overflow(void) {
  ht_begin("size overflow and impossible sizes: NULL with errno ENOMEM");
  size_t max = ht_opaque(SIZE_MAX), pmax = ht_opaque((size_t)PTRDIFF_MAX);
  EXPECT_NULL_ERRNO(t_malloc(max), ENOMEM);
  EXPECT_NULL_ERRNO(t_malloc(pmax + 1), ENOMEM);
  EXPECT_NULL_ERRNO(t_malloc(pmax), ENOMEM);
  EXPECT_NULL_ERRNO(t_malloc(max - 4095), ENOMEM);
  EXPECT_NULL_ERRNO(t_calloc(max / 2 + 1, 2), ENOMEM);
  EXPECT_NULL_ERRNO(t_calloc(2, max / 2 + 1), ENOMEM);
  EXPECT_NULL_ERRNO(t_calloc(ht_opaque((size_t)1 << 32), ht_opaque((size_t)1 << 32)), ENOMEM);
  EXPECT_NULL_ERRNO(t_calloc(max, max), ENOMEM);
  EXPECT_NULL_ERRNO(t_calloc(1, max), ENOMEM);
  EXPECT_NULL_ERRNO(t_calloc(pmax / 2 + 1, 2), ENOMEM);
  EXPECT_NULL_ERRNO(t_reallocarray(NULL, max / 2 + 1, 2), ENOMEM);
  EXPECT_NULL_ERRNO(t_reallocarray(NULL, ht_opaque((size_t)1 << 33), ht_opaque((size_t)1 << 31)),
                    ENOMEM);
  EXPECT_NULL_ERRNO(t_aligned_alloc(16, max), ENOMEM);
  EXPECT_NULL_ERRNO(t_aligned_alloc(4096, max - 100), ENOMEM);
  EXPECT_NULL_ERRNO(t_memalign(64, max), ENOMEM);
  EXPECT_NULL_ERRNO(t_valloc(max), ENOMEM);
  EXPECT_NULL_ERRNO(t_pvalloc(max), ENOMEM);
  EXPECT_NULL_ERRNO(t_pvalloc(max - 100), ENOMEM);

  /* Failed realloc/reallocarray leave the block alone. */
  uint8_t* p = (uint8_t*)t_malloc(100);
  REQUIRE(p != NULL);
  ht_fill(p, 100, 77);
  EXPECT_NULL_ERRNO(t_realloc(p, max), ENOMEM);
  EXPECT_NULL_ERRNO(t_realloc(p, pmax + 1), ENOMEM);
  EXPECT_NULL_ERRNO(t_reallocarray(p, max / 2 + 1, 2), ENOMEM);
  EXPECT_NULL_ERRNO(t_reallocarray(p, 3, max / 2), ENOMEM);
  CHECKF(ht_check(p, 100, 77), "block changed by a failed realloc");
  CHECK(t_owns(p));
  t_free(p);

  void* out = (void*)&static_buf;
  errno = 0;
  int rc = t_posix_memalign(&out, 16, max);
  CHECKF(rc == ENOMEM, "posix_memalign(16, SIZE_MAX) = %d", rc);
  CHECK(out == (void*)&static_buf);
  rc = t_posix_memalign(&out, (size_t)1 << 63, 16);
  CHECKF(rc == ENOMEM, "posix_memalign(2^63, 16) = %d", rc);
  CHECK(out == (void*)&static_buf);

  /* A huge but representable size, 4 x (RAM + swap): with the kernel's
   * default heuristic overcommit (vm.overcommit_memory = 0) glibc gets NULL
   * and ENOMEM, since the kernel refuses such a mapping; a caller that asks
   * for an absurd size (say, from a corrupt file header) must get NULL, not
   * memory that kills the process when it is touched.  With overcommit
   * forced on (1) a block is fine; it must then be usable. */
  struct sysinfo si;
  size_t huge = (size_t)1 << 46;
  if (sysinfo(&si) == 0) {
    size_t total = ((size_t)si.totalram + (size_t)si.totalswap) * si.mem_unit;
    if (total < huge / 4) huge = total * 4;
  }
  int overcommit = -1;
  FILE* oc = fopen("/proc/sys/vm/overcommit_memory", "r");
  if (oc) {
    if (fscanf(oc, "%d", &overcommit) != 1) overcommit = -1;
    fclose(oc);
  }
  errno = 0;
  uint8_t* h = (uint8_t*)t_malloc(ht_opaque(huge));
  int e = errno;
  if (overcommit == 0 || overcommit == 2) {
    CHECKF(h == NULL && e == ENOMEM,
           "malloc(%zu GiB = 4 x (RAM + swap)) = %p, errno %d; want NULL, ENOMEM (as glibc, "
           "vm.overcommit_memory = %d)", huge >> 30, (void*)h, e, overcommit);
  }
  if (h == NULL) {
    CHECKF(e == ENOMEM, "malloc(%zu GiB) = NULL with errno %d", huge >> 30, e);
    printf("  malloc(%zu GiB) refused (ENOMEM)\n", huge >> 30);
  } else {
    h[0] = 1;
    h[huge - 1] = 2;
    CHECK(h[0] == 1 && h[huge - 1] == 2);
    t_free(h);
    printf("  malloc(%zu GiB) succeeded (vm.overcommit_memory = %d)\n", huge >> 30, overcommit);
  }
}

static void test_align_errors(void) {
  ht_begin("posix_memalign/aligned_alloc/memalign with invalid alignments");
  static const size_t bad_pm[] = {0, 1, 2, 4, 3, 12, 24, 48, 100, 4097, 3 << 20};
  for (size_t k = 0; k < sizeof bad_pm / sizeof bad_pm[0]; k++) {
    void* out = (void*)&static_buf;
    errno = 1234;
    int rc = t_posix_memalign(&out, ht_opaque(bad_pm[k]), 64);
    CHECKF(rc == EINVAL, "posix_memalign(alignment %zu) = %d, want EINVAL", bad_pm[k], rc);
    CHECKF(errno == 1234, "posix_memalign(alignment %zu) changed errno to %d", bad_pm[k], errno);
    CHECKF(out == (void*)&static_buf, "posix_memalign(alignment %zu) modified *memptr",
           bad_pm[k]);
  }
  {
    void* out = (void*)&static_buf;
    int rc = t_posix_memalign(&out, ht_opaque(SIZE_MAX), 64);
    CHECKF(rc == EINVAL, "posix_memalign(SIZE_MAX, 64) = %d", rc);
    CHECK(out == (void*)&static_buf);
  }
  /* aligned_alloc: an alignment above SIZE_MAX/2+1 is refused with EINVAL
   * by every glibc.  A non-power-of-two alignment is rounded up by glibc
   * 2.36 (as memalign) and refused with EINVAL by glibc >= 2.38: accept
   * either, but a returned block must honour the rounded alignment. */
  EXPECT_NULL_ERRNO(t_aligned_alloc(ht_opaque(((size_t)1 << 63) + 1), 64), EINVAL);
  EXPECT_NULL_ERRNO(t_aligned_alloc(ht_opaque(SIZE_MAX), 64), EINVAL);
  EXPECT_NULL_ERRNO(t_memalign(ht_opaque(((size_t)1 << 63) + 1), 64), EINVAL);
  EXPECT_NULL_ERRNO(t_memalign(ht_opaque(SIZE_MAX), 64), EINVAL);
  static const size_t odd[] = {0, 1, 3, 12, 24, 48, 100, 4097};
  int refused = 0;
  for (size_t k = 0; k < sizeof odd / sizeof odd[0]; k++) {
    size_t a = odd[k], a2 = 1;
    while (a2 < a) a2 *= 2;
    errno = 0;
    void* p = t_aligned_alloc(ht_opaque(a), 100);
    if (p == NULL) {
      CHECKF(errno == EINVAL, "aligned_alloc(%zu, 100) = NULL with errno %d, want EINVAL", a,
             errno);
      refused++;
    } else {
      CHECKF(ht_aligned(p, a2), "aligned_alloc(%zu, 100) = %p, not %zu-aligned", a, p, a2);
      memset(p, 1, 100);
      t_free(p);
    }
    /* memalign rounds a non-power-of-two alignment up in every glibc. */
    p = t_memalign(ht_opaque(a), 100);
    CHECKF(p != NULL && ht_aligned(p, a2 < 16 ? 16 : a2), "memalign(%zu, 100) = %p", a, p);
    if (p) {
      memset(p, 1, 100);
      t_free(p);
    }
  }
  printf("  aligned_alloc refused %d of %zu non-power-of-two alignments (glibc 2.36: 0)\n",
         refused, sizeof odd / sizeof odd[0]);
}

static void test_aligned(void) {
  ht_begin("posix_memalign/aligned_alloc/memalign: alignments 16..1 MiB x 5 sizes");
  static const size_t sizes[] = {1, 100, 5000, 100000, 3 << 20};
  enum { NA = 17 };  /* 16 .. 1 MiB */
  void* blk[3][NA];
  size_t count = 0;
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    for (int f = 0; f < 3; f++) {
      for (int k = 0; k < NA; k++) {
        size_t a = (size_t)16 << k;
        void* p = NULL;
        if (f == 0) {
          int rc = t_posix_memalign(&p, a, n);
          CHECKF(rc == 0, "posix_memalign(%zu, %zu) = %d", a, n, rc);
          if (rc) p = NULL;
        } else if (f == 1) {
          p = t_aligned_alloc(a, n);
        } else {
          p = t_memalign(a, n);
        }
        REQUIRE(p != NULL);
        CHECKF(ht_aligned(p, a), "%s(%zu, %zu) = %p misaligned",
               f == 0 ? "posix_memalign" : f == 1 ? "aligned_alloc" : "memalign", a, n, p);
        size_t u = t_malloc_usable_size(p);
        CHECKF(u >= n, "usable size %zu < %zu (alignment %zu)", u, n, a);
        CHECKF(t_owns(p), "hak_owns(aligned block %zu/%zu) == 0", a, n);
        ht_fill(p, u > n ? u : n, (uint64_t)(s * 1000 + f * 100 + k));
        blk[f][k] = p;
        count++;
      }
    }
    for (int f = 0; f < 3; f++)
      for (int k = 0; k < NA; k++) {
        void* p = blk[f][k];
        size_t u = t_malloc_usable_size(p);
        CHECKF(ht_check(p, u > n ? u : n, (uint64_t)(s * 1000 + f * 100 + k)),
               "aligned block (size %zu, alignment %zu) corrupted", n, (size_t)16 << k);
        t_free(p);
      }
  }
  long page = sysconf(_SC_PAGESIZE);
  static const size_t vsizes[] = {0, 1, 100, 4095, 4096, 4097, 5000, 100000, 3 << 20};
  for (size_t s = 0; s < sizeof vsizes / sizeof vsizes[0]; s++) {
    size_t n = vsizes[s];
    uint8_t* v = (uint8_t*)t_valloc(n);
    REQUIRE(v != NULL);
    CHECKF(ht_aligned(v, (size_t)page), "valloc(%zu) = %p not page-aligned", n, (void*)v);
    CHECK(t_malloc_usable_size(v) >= n);
    memset(v, 7, n);
    uint8_t* pv = (uint8_t*)t_pvalloc(n);
    REQUIRE(pv != NULL);
    CHECKF(ht_aligned(pv, (size_t)page), "pvalloc(%zu) = %p not page-aligned", n, (void*)pv);
    size_t rounded = (n + (size_t)page - 1) / (size_t)page * (size_t)page;
    size_t u = t_malloc_usable_size(pv);
    CHECKF(u >= rounded, "pvalloc(%zu): usable size %zu < %zu", n, u, rounded);
    memset(pv, 8, rounded);
    uint8_t* m = (uint8_t*)t_memalign((size_t)page, n);
    REQUIRE(m != NULL);
    CHECKF(ht_aligned(m, (size_t)page), "memalign(page, %zu) = %p", n, (void*)m);
    memset(m, 9, n);
    CHECK(n == 0 || (v[n - 1] == 7 && m[n - 1] == 9));
    t_free(v);
    t_free(pv);
    t_free(m);
    count += 3;
  }
  printf("  %zu aligned blocks checked\n", count);
}

/* Grow one block from 1 byte to 64 MiB and back, checking the pattern
 * after every step; a second pair of blocks grows alternately so that
 * in-place growth is not always possible. */
static void test_realloc(void) {
  ht_begin("realloc keeps content across classes and tiers (1 B -> 64 MiB -> 1 B)");
  ht_rng_t r = {7};
  uint64_t key = 0xC0FFEE;
  size_t n = 1, steps = 0;
  uint8_t* p = (uint8_t*)t_realloc(NULL, n);
  REQUIRE(p != NULL);
  CHECK(t_owns(p));
  ht_fill(p, n, key);
  while (n < 64 * HT_MiB) {
    size_t m = n + n / 3 + 1 + ht_below(&r, 33);
    if (m > 64 * HT_MiB) m = 64 * HT_MiB;
    uint8_t* q = (uint8_t*)t_realloc(p, m);
    REQUIRE(q != NULL);
    CHECKF(ht_aligned(q, min_align(m)), "realloc to %zu misaligned", m);
    CHECKF(t_malloc_usable_size(q) >= m, "realloc to %zu: usable size %zu", m,
           t_malloc_usable_size(q));
    size_t off = ht_check_range(q, 0, n, key);
    CHECKF(off == SIZE_MAX, "realloc %zu -> %zu: byte %zu lost", n, m, off);
    ht_fill_range(q, n, m, key);
    p = q;
    n = m;
    steps++;
  }
  while (n > 1) {
    size_t m = n - n / 4 - 1 - ht_below(&r, 5);
    if (m < 1 || m > n) m = 1;
    uint8_t* q = (uint8_t*)t_realloc(p, m);
    REQUIRE(q != NULL);
    size_t off = ht_check_range(q, 0, m, key);
    CHECKF(off == SIZE_MAX, "realloc %zu -> %zu (shrink): byte %zu lost", n, m, off);
    p = q;
    n = m;
    steps++;
  }
  t_free(p);

  /* Alternating growth of two blocks, with a small block between. */
  size_t na = 16, nb = 24;
  uint8_t* a = (uint8_t*)t_malloc(na);
  uint8_t* b = (uint8_t*)t_malloc(nb);
  REQUIRE(a && b);
  ht_fill(a, na, 1);
  ht_fill(b, nb, 2);
  void* spacers[64];
  int ns = 0;
  while (na < 8 * HT_MiB) {
    size_t ma = na * 3 / 2 + 5, mb = nb * 3 / 2 + 3;
    uint8_t* a2 = (uint8_t*)t_realloc(a, ma);
    REQUIRE(a2 != NULL);
    if (ns < 64) { spacers[ns] = t_malloc((size_t)ns * 37 + 1); ns++; }
    uint8_t* b2 = (uint8_t*)t_realloc(b, mb);
    REQUIRE(b2 != NULL);
    CHECKF(ht_check(a2, na, 1), "alternating realloc: block a %zu -> %zu corrupted", na, ma);
    CHECKF(ht_check(b2, nb, 2), "alternating realloc: block b %zu -> %zu corrupted", nb, mb);
    ht_fill_range(a2, na, ma, 1);
    ht_fill_range(b2, nb, mb, 2);
    a = a2; b = b2; na = ma; nb = mb;
    steps += 2;
  }
  CHECK(ht_check(a, na, 1) && ht_check(b, nb, 2));
  t_free(a);
  t_free(b);
  for (int i = 0; i < ns; i++) t_free(spacers[i]);

  /* Same size, within the usable size, reallocarray. */
  uint8_t* c = (uint8_t*)t_malloc(100);
  REQUIRE(c != NULL);
  size_t u = t_malloc_usable_size(c);
  ht_fill(c, u, 3);
  uint8_t* d = (uint8_t*)t_realloc(c, 100);
  REQUIRE(d != NULL);
  CHECK(ht_check(d, 100, 3));
  uint8_t* e = (uint8_t*)t_realloc(d, u);
  REQUIRE(e != NULL);
  CHECK(ht_check(e, 100, 3));
  uint8_t* f = (uint8_t*)t_reallocarray(e, 100, 50);
  REQUIRE(f != NULL);
  CHECK(t_malloc_usable_size(f) >= 5000);
  CHECK(ht_check(f, 100, 3));
  t_free(f);

  /* realloc(p, 0) frees p and returns NULL, as glibc does. */
  for (int i = 0; i < 3; i++) {
    size_t sz = i == 0 ? 64 : i == 1 ? 20000 : 4 * HT_MiB;
    void* g = t_malloc(sz);
    REQUIRE(g != NULL);
    errno = 0;
    void* h = t_realloc(g, 0);
    CHECKF(h == NULL, "realloc(malloc(%zu), 0) = %p, want NULL (glibc)", sz, h);
    if (h) t_free(h);
    if (ht_has_hakmem() && h == NULL)
      CHECKF(!t_owns(g), "block of %zu still owned after realloc(p, 0)", sz);
  }
  printf("  %zu realloc steps\n", steps);
}

static void test_usable_and_free(void) {
  ht_begin("malloc_usable_size(NULL), free(NULL), errno kept by free, hak_free_sized");
  CHECK(t_malloc_usable_size(NULL) == 0);
  t_free(NULL);
  static const size_t sizes[] = {1, 16, 100, 1024, 5000, 100000, 3 << 20, 40 << 20};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    void* p = t_malloc(n);
    REQUIRE(p != NULL);
    memset(p, 1, n);
    errno = 1234;
    t_free(p);
    CHECKF(errno == 1234, "free of a %zu-byte block changed errno to %d", n, errno);
    p = t_malloc(n);
    REQUIRE(p != NULL);
    memset(p, 2, n);
    t_free_sized(p, n);
  }
  if (ht_has_hakmem()) t_free_sized(NULL, 0);
}

static void test_owns(void) {
  ht_begin("hak_owns: live blocks yes; stack, static, NULL, interior, foreign, freed no");
  if (!ht_has_hakmem()) { printf("  skipped: hakmem not loaded\n"); return; }
  int local = 0;
  CHECK(!t_owns(NULL));
  CHECK(!t_owns(&local));
  CHECK(!t_owns(static_buf));
  CHECK(!t_owns(static_buf + 16));
  CHECK(!t_owns("a string literal"));
  CHECK(!t_owns((void*)(uintptr_t)&test_owns));
  CHECK(!t_owns((void*)(uintptr_t)16));
  CHECK(!t_owns((void*)(uintptr_t)-16));
  void* m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  CHECK(!t_owns(m));
  CHECK(!t_owns((char*)m + 4096));
  munmap(m, 1 << 20);
#ifdef HT_FOREIGN_MALLOC
  /* hak_ names beside the system malloc: its blocks are not ours. */
  void* sys = malloc(64);
  CHECK(!t_owns(sys));
  free(sys);
#endif
  static const size_t sizes[] = {8, 64, 1000, 20000, 200000, 4 << 20};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    char* p = (char*)t_malloc(n);
    REQUIRE(p != NULL);
    CHECKF(t_owns(p), "hak_owns(malloc(%zu)) == 0", n);
    if (n > 16) CHECKF(!t_owns(p + 16), "hak_owns(interior pointer of a %zu-byte block) != 0", n);
    t_free(p);
    CHECKF(!t_owns(p), "hak_owns(freed %zu-byte block) != 0", n);
  }
#ifdef HT_DLSYM
  void* viamalloc = malloc(100);
  CHECKF(t_owns(viamalloc), "malloc is not served by the preloaded hakmem");
  free(viamalloc);
#endif
}

static void call_malloc_stats(void* arg) { (void)arg; t_malloc_stats(); }
static void call_stats_print_null(void* arg) { (void)arg; t_stats_print(NULL); }

static void test_introspection(void) {
  ht_begin("malloc_trim, mallinfo2, malloc_stats");
  CHECK(t_malloc_trim(0) >= 0);
  CHECK(t_malloc_trim(1 << 20) >= 0);
  struct mallinfo2 a = t_mallinfo2();
  enum { N = 10240 };
  static void* blk[N];
  for (int i = 0; i < N; i++) {
    blk[i] = t_malloc(1000);
    REQUIRE(blk[i] != NULL);
    memset(blk[i], 3, 1000);
  }
  struct mallinfo2 b = t_mallinfo2();
  for (int i = 0; i < N; i++) t_free(blk[i]);
  struct mallinfo2 c = t_mallinfo2();
  size_t added = (size_t)N * 1000;
  CHECKF(b.uordblks >= a.uordblks + added * 9 / 10,
         "mallinfo2.uordblks %zu -> %zu after allocating %zu bytes", a.uordblks, b.uordblks,
         added);
  CHECKF(b.arena + b.hblkhd >= b.uordblks, "mallinfo2: arena %zu + hblkhd %zu < uordblks %zu",
         b.arena, b.hblkhd, b.uordblks);
  CHECKF(c.uordblks + added * 8 / 10 <= b.uordblks,
         "mallinfo2.uordblks %zu -> %zu after freeing %zu bytes", b.uordblks, c.uordblks, added);
  printf("  mallinfo2: arena %zu -> %zu -> %zu, uordblks %zu -> %zu -> %zu\n", a.arena, b.arena,
         c.arena, a.uordblks, b.uordblks, c.uordblks);
  static char buf[1 << 16];
  size_t len = capture_stderr(call_malloc_stats, NULL, buf, sizeof buf);
  CHECKF(len > 0, "malloc_stats printed nothing on stderr");
  printf("  malloc_stats printed %zu bytes on stderr\n", len);
}

static void test_hakmem_calls(void) {
  ht_begin("hakmem_stats_print, hak_option_get, hak_version");
  if (!ht_has_hakmem()) { printf("  skipped: hakmem not loaded\n"); return; }
  FILE* f = tmpfile();
  REQUIRE(f != NULL);
  t_stats_print(f);
  fflush(f);
  long len = ftell(f);
  rewind(f);
  char line[512] = "";
  if (!fgets(line, sizeof line, f)) line[0] = 0;
  fclose(f);
  CHECKF(len > 0 && strstr(line, "hakmem") != NULL, "first line of the report: \"%s\"", line);
  printf("  report: %ld bytes, first line: %s", len, line);
  static char buf[1 << 16];
  size_t elen = capture_stderr(call_stats_print_null, NULL, buf, sizeof buf);
  CHECKF(elen > 0 && strstr(buf, "hakmem"), "hakmem_stats_print(NULL) wrote %zu bytes to stderr",
         elen);
  /* also to stdout, as users will call it */
  fflush(stdout);
  t_stats_print(stdout);
  fflush(stdout);

  long long prof = t_option_get("HAKMEM_PROFILE");
  const char* env = getenv("HAKMEM_PROFILE");
  if (env == NULL) {
    CHECKF(prof == 1, "HAKMEM_PROFILE unset: hak_option_get = %lld, want 1 (balanced)", prof);
  } else {
    CHECKF(prof >= 0 && prof <= 2, "hak_option_get(HAKMEM_PROFILE) = %lld", prof);
  }
  CHECK(t_option_get("HAKMEM_NO_SUCH_OPTION") == -1);
  CHECK(t_option_get("") == -1);
  CHECK(t_option_get("PROFILE") == -1);
  CHECK(t_option_get("hakmem_profile") == -1 || t_option_get("hakmem_profile") == prof);
  const char* v = t_version();
  CHECKF(v != NULL && strcmp(v, HAKMEM_VERSION) == 0, "hak_version() = \"%s\", header says %s",
         v ? v : "(null)", HAKMEM_VERSION);
  printf("  HAKMEM_PROFILE = %lld, version %s\n", prof, v ? v : "?");
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--require-hakmem") == 0) require_hakmem = 1;
  printf("test-api: %s names, hakmem %s\n", T_NAMES,
         ht_has_hakmem() ? "loaded" : "NOT loaded (glibc only: hakmem-specific checks skipped)");
  if (require_hakmem) REQUIRE(ht_has_hakmem());
  test_os_stats();
  test_small_sizes();
  test_large_sizes();
  test_malloc0();
  test_calloc();
  test_overflow();
  test_align_errors();
  test_aligned();
  test_realloc();
  test_usable_and_free();
  test_owns();
  test_introspection();
  test_hakmem_calls();
  return ht_done("test-api");
}
