/* Secure mode (the libhakmem-secure.so build, HAK_SECURE=1): stronger misuse
 * detection at a measured cost, without touching the default build.
 * - every small block has an allocation bit in its SuperSlab's page 0: a free
 *   of a block whose bit is clear is a double free, on any thread, always;
 * - every small block ends with a trailer (requested size, check word) and
 *   the slack between the request and the trailer is filled: an overflow of
 *   even one byte is found when the block is freed;
 * - freed blocks are filled, and the fill is checked when the block is handed
 *   out again (a write after free into its first bytes is found);
 * - free-list links are encoded (internal.h), blocks are carved in random
 *   order, SuperSlabs carry guard pages, large blocks end at a guard page.
 * Compiled (and called) only when HAK_SECURE is 1. */
#include "internal.h"
#include <sys/mman.h>

#if HAK_SECURE
#define FILL_FREE  0xDF
#define FILL_SLACK 0xCA
#define BITMAP_OFF 8192
#define BITMAP_BYTES 512   /* 4096 blocks: the most a slab holds */
#define UAF_BYTES  32      /* bytes after the link words filled on free, verified on reuse */
#define CANARY_BYTES 8     /* slack bytes right after the request that are checked */
#define FILL_FREE64  0xDFDFDFDFDFDFDFDFull
#define FILL_SLACK64 0xCACACACACACACACAull

_Static_assert(BITMAP_OFF + HAK_PAGES_PER_SEG * BITMAP_BYTES <= HAK_PAGE_SIZE - HAK_OS_PAGE, "bitmaps in page 0");
_Static_assert(sizeof(hak_segment_t) <= BITMAP_OFF, "header below the bitmaps");

/* The allocation bits of a slab.  Only the owner thread touches them (a
 * remote free is checked by the cookie and cleared when the owner collects
 * it), so they need no atomics. */
static uint64_t* slab_bitmap(hak_slab_t* s) {
  hak_segment_t* seg = hak_segment_of(s);
  size_t idx = (size_t)(s - seg->slabs);
  return (uint64_t*)((uint8_t*)seg + BITMAP_OFF + idx * BITMAP_BYTES);
}
static size_t block_index(hak_slab_t* s, const void* b) {
  hak_segment_t* seg = hak_segment_of(s);
  uint64_t off = (uint64_t)((uintptr_t)b - ((uintptr_t)seg + ((size_t)(s - seg->slabs) << HAK_PAGE_SHIFT)));
  return (size_t)(((unsigned __int128)off * s->recip) >> 64);   /* exact for off < 2^32 */
}
static uint32_t* trailer(hak_slab_t* s, void* b) { return (uint32_t*)((uint8_t*)b + s->bsize - 8); }
static uint32_t trailer_check(const void* b, uint32_t req) {
  uint64_t x = (_hak_cookie_key ^ (uintptr_t)b) * 0x9E3779B97F4A7C15ull ^ req;
  return (uint32_t)(x >> 32) ^ (uint32_t)x;
}

/* Fill [from, to) with 0xCA, and check it. */
static void slack_fill(uint8_t* from, uint8_t* to) {
  while (from < to && ((uintptr_t)from & 7)) *from++ = FILL_SLACK;
  while (from + 8 <= to) { memcpy(from, &(uint64_t){FILL_SLACK64}, 8); from += 8; }
  while (from < to) *from++ = FILL_SLACK;
}
static const uint8_t* slack_bad(const uint8_t* from, const uint8_t* to) {
  while (from < to && ((uintptr_t)from & 7)) { if (*from != FILL_SLACK) return from; from++; }
  while (from + 8 <= to) {
    uint64_t w;
    memcpy(&w, from, 8);
    if (w != FILL_SLACK64) break;
    from += 8;
  }
  for (; from < to; from++) if (*from != FILL_SLACK) return from;
  return NULL;
}
static size_t uaf_end(const hak_slab_t* s) { return s->bsize - 8 < 16 + UAF_BYTES ? s->bsize - 8 : 16 + UAF_BYTES; }

/* The canary: up to CANARY_BYTES of slack right after the request; beyond
 * that, an overflow reaches the trailer, which is checked too. */
static uint8_t* canary_end(uint8_t* from, uint32_t* t) {
  return (uint8_t*)t - from > CANARY_BYTES ? from + CANARY_BYTES : (uint8_t*)t;
}
static void set_trailer(hak_slab_t* s, void* b, size_t req) {
  uint32_t* t = trailer(s, b);
  t[0] = (uint32_t)req;
  t[1] = trailer_check(b, (uint32_t)req);
  uint8_t* from = (uint8_t*)b + req;
  uint8_t* to = canary_end(from, t);
  if (to - from == 8) memcpy(from, &(uint64_t){FILL_SLACK64}, 8);
  else slack_fill(from, to);
}

/* Owner only (malloc paths). */
void _hak_secure_alloc(hak_slab_t* s, void* b, size_t req) {
  size_t i = block_index(s, b);
  uint64_t bit = (uint64_t)1 << (i & 63);
  uint64_t* w = &slab_bitmap(s)[i >> 6];
  if (*w & bit) _hak_fatal("hakmem: heap corruption: block %p handed out twice (free list corrupted)\n", b);
  *w |= bit;
  /* a freed or freshly carved block carries the free fill after its link words */
  size_t end = uaf_end(s);
  for (size_t k = 16; k + 8 <= end; k += 8) {
    uint64_t v;
    memcpy(&v, (uint8_t*)b + k, 8);
    if (v != FILL_FREE64)
      _hak_fatal("hakmem: write after free detected in block %p (size %u, near offset %zu)\n", b, s->bsize, k);
  }
  set_trailer(s, b, req);
}

/* Checks common to every free: trailer and slack intact; then the fill. */
static void check_and_fill(hak_slab_t* s, void* b, const char* op) {
  uint32_t* t = trailer(s, b);
  uint32_t req = t[0];
  if (req > s->bsize - 8 || t[1] != trailer_check(b, req))
    _hak_fatal("hakmem: heap overflow detected at the end of block %p (size %u): trailer overwritten, in %s()\n",
               b, s->bsize, op);
  uint8_t* from = (uint8_t*)b + req;
  uint8_t* to = canary_end(from, t);
  uint64_t w;
  const uint8_t* bad = NULL;
  if (to - from == 8) {
    memcpy(&w, from, 8);
    if (w != FILL_SLACK64) bad = slack_bad(from, to);
  } else {
    bad = slack_bad(from, to);
  }
  if (bad)
    _hak_fatal("hakmem: heap overflow detected in block %p: byte %zu past its %u requested bytes, in %s()\n", b,
               (size_t)(bad - ((uint8_t*)b + req)), req, op);
  size_t end = uaf_end(s);
  for (size_t k = 16; k + 8 <= end; k += 8) memcpy((uint8_t*)b + k, &(uint64_t){FILL_FREE64}, 8);
}

/* Owner free: the allocation bit says exactly whether the block is live. */
void _hak_secure_free(hak_slab_t* s, void* b, const char* op) {
  size_t i = block_index(s, b);
  uint64_t bit = (uint64_t)1 << (i & 63);
  uint64_t* w = &slab_bitmap(s)[i >> 6];
  if (!(*w & bit)) {
    _hak_double_free(op, b, s->bsize);
    _hak_fatal("hakmem: double free of %p (size %u) in %s()\n", b, s->bsize, op);   /* secure: never continue */
  }
  *w &= ~bit;
  check_and_fill(s, b, op);
}

/* Remote free: checked now, its bit cleared by the owner when it collects. */
void _hak_secure_free_remote(hak_slab_t* s, void* b, const char* op) { check_and_fill(s, b, op); }

/* Owner collects remote frees: clear their bits (a clear bit is a double free). */
void _hak_secure_collected(hak_slab_t* s, void* b) {
  size_t i = block_index(s, b);
  uint64_t bit = (uint64_t)1 << (i & 63);
  uint64_t* w = &slab_bitmap(s)[i >> 6];
  if (!(*w & bit)) _hak_fatal("hakmem: double free of %p (size %u) from another thread\n", b, s->bsize);
  *w &= ~bit;
}

size_t _hak_secure_usable(hak_slab_t* s, const void* b) { return trailer(s, (void*)b)[0]; }

/* Freshly carved blocks look like freed ones. */
void _hak_secure_carve_fill(void* b, uint32_t bsize) {
  size_t end = bsize - 8 < 16 + UAF_BYTES ? bsize - 8 : 16 + UAF_BYTES;
  if (end > 16) memset((uint8_t*)b + 16, FILL_FREE, end - 16);
}

/* Random order for a chunk of freshly carved blocks. */
void _hak_secure_shuffle(void** v, size_t n) {
  static __thread uint64_t rng;
  if (rng == 0) rng = (_hak_cookie_key ^ (uintptr_t)&rng) | 1;
  for (size_t i = n; i > 1; i--) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    size_t j = (size_t)(rng % i);
    void* t = v[i - 1];
    v[i - 1] = v[j];
    v[j] = t;
  }
}

/* Guard pages of a new SuperSlab: the top of page 0 (below the first slab)
 * and the whole last page (above the last slab) are inaccessible. */
void _hak_secure_segment_guards(hak_segment_t* seg) {
  _hak_os_protect((uint8_t*)seg + HAK_PAGE_SIZE - HAK_OS_PAGE, HAK_OS_PAGE, PROT_NONE);
  _hak_os_protect((uint8_t*)seg + HAK_SEG_SIZE - HAK_PAGE_SIZE, HAK_PAGE_SIZE, PROT_NONE);
}
#endif /* HAK_SECURE */
