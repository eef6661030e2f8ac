/* libFuzzer driver for hakmem's whole API (hak_ names), checked against a
 * model of the live blocks.
 *
 * The input is a stream of operations.  Each operation reads an opcode byte,
 * a slot byte and, as needed, size and alignment selectors; when the input
 * runs out, missing bytes read as 0.  A slot table (NSLOTS entries) holds the
 * live blocks: pointer, requested size, usable size, alignment asked for and
 * a per-block tag that seeds the byte pattern written into the block.
 *
 * Checked after every call:
 *   - success: alignment (16 for blocks >= 16 bytes, the requested power of
 *     two for the aligned calls, the page for valloc/pvalloc),
 *     malloc_usable_size >= requested and the usable tail writable, calloc
 *     memory zero, realloc keeps the prefix, hak_owns() is true;
 *   - failure: NULL with errno == ENOMEM (EINVAL for a bad alignment), the
 *     out-pointer of posix_memalign untouched, a failed realloc leaves the
 *     old block intact;
 *   - every block's pattern is intact when it is freed, reallocated, and on
 *     the "check all" operation (and after malloc_trim/hak_collect);
 *   - a freed pointer that is not live again is not hak_owns().
 * Sizes and alignments are chosen adversarially: 0, 1, class boundaries
 * (16, 128, 1024, 8 KiB, 128 KiB, +-1), random small/medium, 1..64 MiB,
 * and impossible ones (SIZE_MAX-ish, PTRDIFF_MAX+1, overflowing products);
 * alignments 0..4 MiB, non-powers of two, SIZE_MAX.
 * Total live memory is capped (LIVE_CAP) so the fuzzer never runs out of RAM.
 * Sizes the kernel may or may not give (above the cap up to the 47-bit
 * address space: hakmem maps with MAP_NORESERVE) may fail or succeed; a
 * success is checked (first and last byte) and freed.  Larger sizes must fail.
 *
 * Built by tests/cases/rel_fuzz.sh:
 *   clang -fsanitize=fuzzer,address,undefined tests/fuzz/fuzz_api.c <hakmem, ASan>
 * With -DFUZZ_STANDALONE it gets a main() that runs the files given as
 * arguments once each (reproducing a crash without libFuzzer). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hakmem.h"

#define NSLOTS 64
#define LIVE_CAP ((size_t)256 << 20)
#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define FULL_FILL_MAX (256 * KiB)   /* larger blocks: pattern on stripes */
#define STRIPE 64 * KiB             /* one 64-byte stripe per 64 KiB */

typedef struct {
  unsigned char* p;
  size_t n;        /* requested size */
  size_t usable;   /* malloc_usable_size at allocation */
  size_t align;    /* alignment guaranteed */
  uint32_t tag;    /* pattern seed */
  int live;
} slot_t;

static slot_t slots[NSLOTS];
static int trace;   /* FUZZ_TRACE=1: print every call (to reproduce a failure) */
/* FUZZ_AVOID_KNOWN=1 steers around library bugs already reported, so a long
 * run can look for new ones.  Off by default: the test case fails on them.
 *   bug 1: realloc of a 0-byte block aligned above 2 MiB returns NULL
 *          (malloc_usable_size is 0, taken for "invalid pointer"). */
static int avoid_known;
#define TRACE(...) \
  do {             \
    if (trace) fprintf(stderr, __VA_ARGS__); \
  } while (0)
static size_t live_bytes;
static uint32_t next_tag = 1;

/* ------------------------------------------------------------------ failure */
static void fail(const char* what, const slot_t* s, size_t extra) {
  fprintf(stderr, "fuzz_api: CHECK FAILED: %s (block %p, size %zu, usable %zu, align %zu; %zu)\n", what,
          s ? (void*)s->p : NULL, s ? s->n : 0, s ? s->usable : 0, s ? s->align : 0, extra);
  abort();
}
#define CHECK(c, what, s, extra) \
  do {                           \
    if (!(c)) fail(what, s, (size_t)(extra)); \
  } while (0)

/* ------------------------------------------------------------------ input */
typedef struct {
  const uint8_t* d;
  size_t n, i;
} in_t;
static uint8_t rd8(in_t* in) { return in->i < in->n ? in->d[in->i++] : 0; }
static uint32_t rd32(in_t* in) {
  uint32_t x = 0;
  for (int k = 0; k < 4; k++) x = x << 8 | rd8(in);
  return x;
}

/* ------------------------------------------------------------------ patterns */
static inline uint8_t pat(uint32_t tag, size_t i) {
  return (uint8_t)(tag * 0x9Du ^ (uint32_t)i ^ (uint32_t)(i >> 8) * 0x3Bu);
}

/* Apply fn to the checked regions of [0, n): everything for blocks up to
 * FULL_FILL_MAX, else the first 64 KiB, a 64-byte stripe every 64 KiB and
 * the last 4 KiB. */
typedef int (*region_fn)(unsigned char* p, size_t from, size_t to, uint32_t tag);
/* ... clipped to [0, lim): the regions a block of n bytes was filled on,
 * as far as a prefix of lim bytes goes (realloc). */
static int regions_clip(unsigned char* p, size_t n, size_t lim, uint32_t tag, region_fn fn) {
#define CLIP(a, b) ((a) >= lim ? 1 : fn(p, (a), (b) < lim ? (b) : lim, tag))
  if (n <= FULL_FILL_MAX) return CLIP(0, n);
  if (!CLIP(0, 64 * KiB)) return 0;
  for (size_t o = STRIPE; o + 64 <= n - 4 * KiB; o += STRIPE)
    if (!CLIP(o, o + 64)) return 0;
  return CLIP(n - 4 * KiB, n);
#undef CLIP
}
static int regions(unsigned char* p, size_t n, uint32_t tag, region_fn fn) { return regions_clip(p, n, n, tag, fn); }
static int do_fill(unsigned char* p, size_t a, size_t b, uint32_t tag) {
  for (size_t i = a; i < b; i++) p[i] = pat(tag, i);
  return 1;
}
static size_t bad_at;
static int do_check(unsigned char* p, size_t a, size_t b, uint32_t tag) {
  for (size_t i = a; i < b; i++)
    if (p[i] != pat(tag, i)) {
      bad_at = i;
      return 0;
    }
  return 1;
}
static int do_zero(unsigned char* p, size_t a, size_t b, uint32_t tag) {
  (void)tag;
  for (size_t i = a; i < b; i++)
    if (p[i] != 0) {
      bad_at = i;
      return 0;
    }
  return 1;
}

/* The usable tail [n, usable): written (pattern) when short, else its last byte. */
static void fill_tail(slot_t* s) {
  if (s->usable - s->n <= 64 * KiB) do_fill(s->p, s->n, s->usable, s->tag);
  else s->p[s->usable - 1] = pat(s->tag, s->usable - 1);
}
static void check_tail(const slot_t* s) {
  int ok = s->usable - s->n <= 64 * KiB ? do_check(s->p, s->n, s->usable, s->tag)
                                        : s->p[s->usable - 1] == pat(s->tag, s->usable - 1);
  CHECK(ok, "usable tail beyond the requested size was overwritten", s, bad_at);
}

static void check_slot(const slot_t* s) {
  if (!s->live) return;
  CHECK(regions(s->p, s->n, s->tag, do_check), "block contents changed", s, bad_at);
  check_tail(s);
  CHECK(hak_owns(s->p), "hak_owns() is false for a live block", s, 0);
}
static void check_all(void) {
  for (int i = 0; i < NSLOTS; i++) check_slot(&slots[i]);
}

/* ------------------------------------------------------------------ sizes */
static size_t pick_size(in_t* in) {
  uint8_t k = rd8(in);
  static const size_t fixed[] = {0, 1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 112, 127, 128, 129,
                                 160, 255, 256, 257, 1023, 1024, 1025, 2048, 4095, 4096, 4097, 8191, 8192,
                                 8193, 16384, 65535, 65536, 65537, 131071, 131072, 131073, 262144,
                                 1 * MiB, 2 * MiB - 1, 2 * MiB, 2 * MiB + 1, 4 * MiB - 8192, 4 * MiB,
                                 4 * MiB + 1, 64 * MiB};
  const size_t nfixed = sizeof fixed / sizeof fixed[0];
  if (k < 100) return fixed[k % nfixed];
  if (k < 160) return rd8(in) | (size_t)(rd8(in) & 3) << 8;                  /* 0..1023 */
  if (k < 210) return (rd32(in) % (128 * KiB)) + 1;                            /* medium */
  if (k < 235) return 1 * MiB + rd32(in) % (63 * MiB);                         /* large 1..64 MiB */
  if (k < 240) return 128 * KiB + (size_t)(rd8(in) - 128);                     /* the boundary +-128 */
  switch (k) {                                                                 /* impossible */
    case 240: return SIZE_MAX;
    case 241: return SIZE_MAX - 15;
    case 242: return SIZE_MAX / 2;
    case 243: return SIZE_MAX / 2 + 1;
    case 244: return SIZE_MAX - 4095;
    case 245: return (size_t)PTRDIFF_MAX - 4 * MiB;
    case 246: return (size_t)1 << 40;   /* 1 TiB: may or may not be given */
    case 247: return (size_t)1 << 30;   /* 1 GiB: idem */
    default: return 16 + (rd8(in) & 15);
  }
}
/* The kernel decides (MAP_NORESERVE): a success is allowed above the cap. */
#define ADDR_SPACE ((size_t)1 << 47)
static int maybe_size(size_t n) { return n > LIVE_CAP && n <= ADDR_SPACE; }
static int impossible_size(size_t n) { return n > ADDR_SPACE; }

static size_t pick_align(in_t* in) {
  uint8_t k = rd8(in);
  static const size_t fixed[] = {0, 1, 2, 3, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 1000, 4096, 4097,
                                 8192, 65536, 65537, 131072, 1 * MiB, 2 * MiB, 2 * MiB + 1, 4 * MiB,
                                 3 * MiB, 8 * MiB, 64 * MiB, (size_t)1 << 30, (size_t)1 << 40, SIZE_MAX,
                                 SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 2};
  const size_t nfixed = sizeof fixed / sizeof fixed[0];
  if (k < 200) return fixed[k % nfixed];
  if (k < 230) return (size_t)1 << (rd8(in) % 23);   /* powers of two up to 4 MiB */
  return rd8(in) | (size_t)rd8(in) << 8;             /* anything up to 64 KiB */
}
static size_t pow2_ceil(size_t a) {
  if (a <= 1) return 1;
  return (size_t)1 << (64 - __builtin_clzl(a - 1));
}

/* ------------------------------------------------------------------ slots */
static size_t min_align(size_t n) { return n >= 16 ? 16 : (n >= 8 ? 8 : 1); }

/* A call returned p for n bytes (align: what it promised).  Check and record. */
static void adopt(slot_t* s, void* p, size_t n, size_t align, int zeroed) {
  size_t a = align > min_align(n) ? align : min_align(n);
  slot_t t = {.p = p, .n = n, .align = a, .tag = next_tag++, .live = 1};
  CHECK(((uintptr_t)p & (a - 1)) == 0, "misaligned block", &t, (uintptr_t)p & (a - 1));
  t.usable = hak_malloc_usable_size(p);
  CHECK(t.usable >= n, "usable size smaller than the request", &t, t.usable);
  CHECK(n == 0 || t.usable <= n + n / 2 + 8 * KiB + 4 * MiB, "usable size absurdly large", &t, t.usable);
  if (zeroed) CHECK(regions(t.p, n, 0, do_zero), "calloc memory not zero", &t, bad_at);
  regions(t.p, n, t.tag, do_fill);
  fill_tail(&t);
  CHECK(hak_owns(p), "hak_owns() false for a new block", &t, 0);
  *s = t;
  live_bytes += t.usable;
  TRACE("  -> %p usable %zu\n", p, t.usable);
}
/* A huge success above the cap: touch both ends and give it back. */
static void huge_success(void* p, size_t n) {
  volatile unsigned char* c = p;
  c[0] = 1;
  c[n - 1] = 2;
  CHECK(c[0] == 1 && c[n - 1] == 2, "huge block not writable", NULL, n);
  hak_free(p);
}

static int is_live_elsewhere(const void* p) {
  for (int i = 0; i < NSLOTS; i++)
    if (slots[i].live && slots[i].p == p) return 1;
  return 0;
}
static void forget(slot_t* s) {
  live_bytes -= s->usable;
  s->live = 0;
}
static void after_free(const void* p) {
  if (!is_live_elsewhere(p)) CHECK(!hak_owns(p), "hak_owns() true for a freed block", NULL, (uintptr_t)p);
}

/* The expected failure of a call that must fail (or may, for maybe_size). */
static void expect_fail(void* p, size_t n, const char* what) {
  if (p == NULL) {
    CHECK(errno == ENOMEM, what, NULL, (size_t)errno);
    return;
  }
  if (maybe_size(n)) {
    huge_success(p, n);
    return;
  }
  fail(what, NULL, n);
}

/* Room under the cap for n more bytes (with slack for rounding)? */
static int fits(size_t n) { return n <= LIVE_CAP && live_bytes + n + 8 * KiB <= LIVE_CAP; }

/* ------------------------------------------------------------------ operations */
enum { OP_MALLOC, OP_CALLOC, OP_REALLOC, OP_REALLOCARRAY, OP_FREE, OP_FREE_SIZED, OP_POSIX_MEMALIGN,
       OP_ALIGNED_ALLOC, OP_MEMALIGN, OP_VALLOC, OP_PVALLOC, OP_USABLE, OP_TRIM, OP_COLLECT, OP_CHECK,
       OP_REALLOC_NULL, OP_REALLOC_ZERO, OP_COUNT };

static void free_slot(slot_t* s, int how) {
  if (!s->live) return;
  check_slot(s);
  void* p = s->p;
  TRACE("free/%d(%p [size %zu]) (slot %d)\n", how, p, s->n, (int)(s - slots));
  forget(s);
  if (how == 0) hak_free(p);
  else if (how == 1) hak_free_sized(p, s->n);
  else CHECK(hak_realloc(p, 0) == NULL, "realloc(p, 0) did not return NULL", s, 0);
  after_free(p);
}

/* memalign & co.  `want` is the alignment promised (a rounded up to a power
 * of two, glibc 2.36).  Alignments above 1 GiB may fail (ENOMEM: the address
 * space for the over-mapping may not exist); below, the call must succeed. */
static void op_aligned(slot_t* s, int op, size_t a, size_t n) {
  free_slot(s, 0);
  errno = 0;
  const size_t page = 4096;
  size_t want = a, need = n;
  if (op == OP_VALLOC || op == OP_PVALLOC) {
    want = page;
    if (op == OP_PVALLOC) {
      need = n > SIZE_MAX - page ? SIZE_MAX : (n + page - 1) & ~(page - 1);
      if (need == 0) need = page;
    }
  } else if (op == OP_POSIX_MEMALIGN) {
    if (a == 0 || (a & (a - 1)) != 0 || a % sizeof(void*) != 0) {
      void* out = (void*)(uintptr_t)0xdeadbeef;
      CHECK(hak_posix_memalign(&out, a, n) == EINVAL, "posix_memalign: bad alignment not EINVAL", NULL, a);
      CHECK(out == (void*)(uintptr_t)0xdeadbeef, "posix_memalign changed *out on failure", NULL, a);
      return;
    }
  } else {
    if (a > SIZE_MAX / 2 + 1) {
      void* p = op == OP_MEMALIGN ? hak_memalign(a, n) : hak_aligned_alloc(a, n);
      CHECK(p == NULL && errno == EINVAL, "memalign/aligned_alloc: impossible alignment not EINVAL", NULL, a);
      return;
    }
    want = pow2_ceil(a);
  }
  int may_fail = impossible_size(need) || maybe_size(need) || want > ((size_t)1 << 30);
  if (!may_fail && !fits(need)) return;
  void* p = NULL;
  int r = 0;
  TRACE("aligned op %d: align %zu size %zu (slot %d)\n", op, a, n, (int)(s - slots));
  switch (op) {
    case OP_POSIX_MEMALIGN:
      p = (void*)(uintptr_t)0xdeadbeef;
      r = hak_posix_memalign(&p, a, n);
      if (r != 0) {
        CHECK(r == ENOMEM, "posix_memalign failure not ENOMEM", NULL, (size_t)r);
        CHECK(p == (void*)(uintptr_t)0xdeadbeef, "posix_memalign changed *out on failure", NULL, n);
        p = NULL;
        errno = ENOMEM;   /* (posix_memalign does not set errno) */
      }
      break;
    case OP_ALIGNED_ALLOC: p = hak_aligned_alloc(a, n); break;
    case OP_MEMALIGN: p = hak_memalign(a, n); break;
    case OP_VALLOC: p = hak_valloc(n); break;
    default: p = hak_pvalloc(n); break;
  }
  if (impossible_size(need)) {
    CHECK(p == NULL && errno == ENOMEM, "aligned allocation of an impossible size", NULL, need);
    return;
  }
  if (p == NULL) {
    CHECK(may_fail, "aligned allocation failed", NULL, need);
    CHECK(errno == ENOMEM, "aligned allocation failed without ENOMEM", NULL, (size_t)errno);
    return;
  }
  CHECK(((uintptr_t)p & (want - 1)) == 0, "misaligned aligned block", NULL, want);
  if (!fits(need)) {
    huge_success(p, need);
    return;
  }
  adopt(s, p, need, want, 0);   /* pvalloc: the whole pages are the block's */
}

static void op_realloc(slot_t* s, size_t n, int array, size_t count) {
  if (!s->live) return;
  if (avoid_known && s->usable == 0 && s->align > 2 * MiB) return;   /* bug 1 */
  check_slot(s);
  size_t total = n;
  int overflow = 0;
  if (array) overflow = __builtin_mul_overflow(count, n, &total);
  if (!overflow && !impossible_size(total) && !maybe_size(total) && !fits(total > s->usable ? total - s->usable : 0))
    return;
  errno = 0;
  void* old = s->p;
  TRACE("realloc%s(%p [size %zu], %zu x %zu) (slot %d)\n", array ? "array" : "", old, s->n, count, n, (int)(s - slots));
  void* q = array ? hak_reallocarray(old, count, n) : hak_realloc(old, n);
  if (overflow || impossible_size(total) || maybe_size(total)) {
    if (q == NULL) {
      CHECK(errno == ENOMEM, "failed realloc: errno not ENOMEM", s, (size_t)errno);
      check_slot(s);   /* the old block stays, intact */
      return;
    }
    CHECK(!overflow && maybe_size(total), "realloc of an impossible size succeeded", s, total);
    /* it moved or grew: the prefix is there; give it back */
    CHECK(regions_clip(q, s->n, s->n, s->tag, do_check), "realloc lost the prefix (huge)", s, bad_at);
    forget(s);
    huge_success(q, total);
    return;
  }
  if (total == 0) {   /* glibc: realloc(p, 0) frees and returns NULL */
    CHECK(q == NULL, "realloc(p, 0) did not return NULL", s, 0);
    forget(s);
    after_free(old);
    return;
  }
  CHECK(q != NULL, "realloc failed", s, total);
  size_t keep = s->n < total ? s->n : total;
  CHECK(regions_clip(q, s->n, keep, s->tag, do_check), "realloc lost the prefix", s, bad_at);
  forget(s);
  if (q != old) after_free(old);
  adopt(s, q, total, 16, 0);
}

static void run_op(in_t* in) {
  uint8_t op = rd8(in) % OP_COUNT;
  slot_t* s = &slots[rd8(in) % NSLOTS];
  switch (op) {
    case OP_MALLOC: {
      size_t n = pick_size(in);
      free_slot(s, 0);
      if (!fits(n) && !impossible_size(n) && !maybe_size(n)) return;
      errno = 0;
      TRACE("malloc(%zu) (slot %d)\n", n, (int)(s - slots));
      void* p = hak_malloc(n);
      if (impossible_size(n) || maybe_size(n)) {
        expect_fail(p, n, "malloc of an impossible size");
        return;
      }
      CHECK(p != NULL, "malloc failed", NULL, n);
      adopt(s, p, n, 16, 0);
      return;
    }
    case OP_CALLOC: {
      size_t n = pick_size(in);
      size_t c = rd8(in) % 5;
      uint8_t k = rd8(in);
      if (k == 255) c = SIZE_MAX / 2 + 1;   /* overflowing products */
      else if (k == 254) c = (SIZE_MAX / (n ? n : 1)) + 1;
      free_slot(s, 0);
      size_t total;
      int overflow = __builtin_mul_overflow(c, n, &total);
      if (!overflow && !fits(total) && !impossible_size(total) && !maybe_size(total)) return;
      errno = 0;
      TRACE("calloc(%zu, %zu) (slot %d)\n", c, n, (int)(s - slots));
      void* p = hak_calloc(c, n);
      if (overflow || impossible_size(total) || maybe_size(total)) {
        if (overflow) CHECK(p == NULL && errno == ENOMEM, "calloc with an overflowing product", NULL, c);
        else expect_fail(p, total, "calloc of an impossible size");
        return;
      }
      CHECK(p != NULL, "calloc failed", NULL, total);
      adopt(s, p, total, 16, 1);
      return;
    }
    case OP_REALLOC: op_realloc(s, pick_size(in), 0, 1); return;
    case OP_REALLOCARRAY: {
      size_t n = pick_size(in);
      size_t c = rd8(in) % 4;
      if (rd8(in) == 255) c = SIZE_MAX / 4 + 1;
      op_realloc(s, n, 1, c);
      return;
    }
    case OP_REALLOC_NULL: {   /* realloc(NULL, n) is malloc(n) */
      size_t n = pick_size(in);
      free_slot(s, 0);
      if (!fits(n) && !impossible_size(n) && !maybe_size(n)) return;
      errno = 0;
      TRACE("realloc(NULL, %zu) (slot %d)\n", n, (int)(s - slots));
      void* p = hak_realloc(NULL, n);
      if (impossible_size(n) || maybe_size(n)) {
        expect_fail(p, n, "realloc(NULL) of an impossible size");
        return;
      }
      CHECK(p != NULL, "realloc(NULL, n) failed", NULL, n);
      adopt(s, p, n, 16, 0);
      return;
    }
    case OP_REALLOC_ZERO: free_slot(s, 2); return;
    case OP_FREE: free_slot(s, 0); return;
    case OP_FREE_SIZED: free_slot(s, 1); return;
    case OP_POSIX_MEMALIGN:
    case OP_ALIGNED_ALLOC:
    case OP_MEMALIGN: {
      size_t a = pick_align(in);
      size_t n = pick_size(in);
      op_aligned(s, op, a, n);
      return;
    }
    case OP_VALLOC:
    case OP_PVALLOC: op_aligned(s, op, 0, pick_size(in)); return;
    case OP_USABLE:
      if (s->live) CHECK(hak_malloc_usable_size(s->p) == s->usable, "usable size changed", s, hak_malloc_usable_size(s->p));
      CHECK(hak_malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) != 0", NULL, 0);
      return;
    case OP_TRIM:
      (void)hak_malloc_trim(rd8(in));
      check_all();
      return;
    case OP_COLLECT:
      hak_collect();
      check_all();
      return;
    case OP_CHECK: check_all(); return;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int inited;
  if (!inited) {
    inited = 1;
    const char* t = getenv("FUZZ_TRACE");
    trace = t && *t == '1';
    t = getenv("FUZZ_AVOID_KNOWN");
    avoid_known = t && *t == '1';
  }
  in_t in = {data, size, 0};
  unsigned ops = 0;
  while (in.i < in.n && ops++ < 4096) run_op(&in);
  check_all();
  for (int i = 0; i < NSLOTS; i++) free_slot(&slots[i], i % 3);
  if (live_bytes != 0) fail("model: live bytes left after freeing everything", NULL, live_bytes);
  return 0;
}

#ifdef FUZZ_STANDALONE
int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    FILE* f = fopen(argv[i], "rb");
    if (!f) {
      perror(argv[i]);
      return 2;
    }
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    printf("ok %s (%zu bytes)\n", argv[i], n);
  }
  return 0;
}
#endif
