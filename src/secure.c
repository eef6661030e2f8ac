/* Secure mode (the libhakmem-secure.so build, HAK_SECURE=1): stronger misuse
 * detection at a measured cost, without touching the default build.
 * - every small block ends with a trailer word that is its state: 0 while
 *   free (1 on a remote list, 2 in a quarantine), cookie (address ^ secret) +
 *   request + 8 while live.  Only the allocator writes it, so every free
 *   knows exactly whether the block is live (a double free, on any thread,
 *   always) and where the request ends; the bytes right after the request,
 *   up to 8 and up to the trailer, are a canary, checked on free (an
 *   overflow of even one byte is found, in the trailer when there is no
 *   room for a canary);
 *   the trailer of the block below is checked too (an underflow);
 * - freed blocks are filled (HAKMEM_SECURE_FILL) and held in a quarantine
 *   (quarantine.c); the fill is checked when they leave it, and again in
 *   part when the block is handed out (a write after free);
 * - free-list links are encoded (internal.h), blocks are carved in random
 *   order, SuperSlabs carry guard pages, large blocks end at a guard page.
 * The per-operation checks are inline in secure.h (a handful of loads and
 * compares on lines the operation writes anyway); this file holds what runs
 * rarely: carving, remote frees, and the classification of a failed check.
 * Compiled (and called) only when HAK_SECURE is 1. */
#include "internal.h"
#include <sys/mman.h>

#if HAK_SECURE
#define FILL_OFF    8      /* checked on malloc: bytes [8, 24) of a free block hold the fill */
#define FILL_END    24
#define CANARY      8      /* canary bytes right after the request, at most (up to the trailer) */
#define T_FREE      HAK_SEC_T_FREE
#define T_REMOTE    HAK_SEC_T_REMOTE
#define T_QUAR      HAK_SEC_T_QUAR

uint64_t _hak_secure_fill64;           /* the fill byte, 8 times (HAKMEM_SECURE_FILL) */
size_t _hak_secure_guard_min = SIZE_MAX;   /* HAKMEM_SECURE_GUARD_MEDIUM, 0 = SIZE_MAX */
static bool shuffle_off;                   /* HAKMEM_SECURE_SHUFFLE=0 (_hak_secure_shuffle) */
static bool array_pairs_off;              /* HAKMEM_SECURE_ARRAY_PAIRS=0 (_hak_secure_new_array) */

/* hak_sec_fill_diff (secure.h) of more than 64 bytes: the bits by which
 * len bytes at p differ from the fill f, ORed together.  A block leaving
 * the quarantine is read whole (a write after free anywhere in what its
 * free filled), which was 28 % of the secure build's instructions on
 * random_mixed (blocks of 16 B - 1 KiB) with 16-byte vectors; where the CPU
 * has AVX2, 32-byte vectors take half the loads, XORs and ORs.  The last
 * 64 bytes are read apart and may overlap the loop's. */
static uint64_t fill_diff_sse2(const uint8_t* p, size_t len, uint64_t f) {
  hak_v2u64 fv = { f, f };
  const uint8_t* end = p + len - 64;
  hak_v2u64 acc = (*(const hak_v2u64*)end ^ fv) | (*(const hak_v2u64*)(end + 16) ^ fv) |
                  (*(const hak_v2u64*)(end + 32) ^ fv) | (*(const hak_v2u64*)(end + 48) ^ fv);
  for (; p < end; p += 64)
    acc |= (*(const hak_v2u64*)p ^ fv) | (*(const hak_v2u64*)(p + 16) ^ fv) | (*(const hak_v2u64*)(p + 32) ^ fv) |
           (*(const hak_v2u64*)(p + 48) ^ fv);
  return acc[0] | acc[1];
}
typedef uint64_t hak_v4u64 __attribute__((vector_size(32), aligned(8), may_alias));
__attribute__((target("avx2"))) static uint64_t fill_diff_avx2(const uint8_t* p, size_t len, uint64_t f) {
  hak_v4u64 fv = { f, f, f, f };
  const uint8_t* end = p + len;
  hak_v4u64 acc = (*(const hak_v4u64*)(end - 64) ^ fv) | (*(const hak_v4u64*)(end - 32) ^ fv);
  for (; end - p >= 128; p += 128)
    acc |= (*(const hak_v4u64*)p ^ fv) | (*(const hak_v4u64*)(p + 32) ^ fv) | (*(const hak_v4u64*)(p + 64) ^ fv) |
           (*(const hak_v4u64*)(p + 96) ^ fv);
  if (end - p > 64) acc |= (*(const hak_v4u64*)p ^ fv) | (*(const hak_v4u64*)(p + 32) ^ fv);
  return acc[0] | acc[1] | acc[2] | acc[3];
}
/* With the zero fill (the default) a byte differs from the fill when it is
 * not zero: the loads are ORed together, no XOR (half the vector
 * instructions of the loop above: random_mixed went from 491 to 472
 * instructions an operation), and one VPTEST says whether any bit is set. */
__attribute__((target("avx2"))) static uint64_t zero_diff_avx2(const uint8_t* p, size_t len, uint64_t f) {
  (void)f;
  const uint8_t* end = p + len;
  hak_v4u64 acc = *(const hak_v4u64*)(end - 64) | *(const hak_v4u64*)(end - 32);
  for (; end - p >= 128; p += 128)
    acc |= *(const hak_v4u64*)p | *(const hak_v4u64*)(p + 32) | *(const hak_v4u64*)(p + 64) | *(const hak_v4u64*)(p + 96);
  if (end - p > 64) acc |= *(const hak_v4u64*)p | *(const hak_v4u64*)(p + 32);
  typedef long long v4di __attribute__((vector_size(32)));
  return !__builtin_ia32_ptestz256((v4di)acc, (v4di)acc);
}
uint64_t (*_hak_secure_fill_diff_long)(const uint8_t* p, size_t len, uint64_t f) = fill_diff_sse2;

hak_warm void _hak_secure_init(void) {
  __builtin_cpu_init();
  _hak_secure_fill64 = (uint64_t)hak_opt(SECURE_FILL) * 0x0101010101010101ull;
  if (__builtin_cpu_supports("avx2") && hak_opt(SECURE_AVX2))
    _hak_secure_fill_diff_long = _hak_secure_fill64 == 0 ? zero_diff_avx2 : fill_diff_avx2;
  shuffle_off = !hak_opt(SECURE_SHUFFLE);
  array_pairs_off = !hak_opt(SECURE_ARRAY_PAIRS);
  if (hak_opt(SECURE_GUARD_MEDIUM) > 0) _hak_secure_guard_min = (size_t)hak_opt(SECURE_GUARD_MEDIUM);
}

/* Per-thread xorshift seeded from the secret: carve order, quarantine
 * eviction.  Not for cryptography: it only has to be unknown in advance. */
uint64_t _hak_secure_rand(void) {
  static __thread uint64_t rng;
  if (rng == 0) rng = (_hak_cookie_key ^ (uintptr_t)&rng) | 1;
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

_Static_assert(FILL_END <= 32 - 8, "fill and trailer fit the smallest secure block");
_Static_assert(HAK_SEC_LIVE_BIAS == HAK_TRAILER, "a live trailer decodes to req + HAK_TRAILER");

static uint64_t* trailer(const hak_slab_t* s, const void* b) { return (uint64_t*)((uint8_t*)b + s->bsize - 8); }

static int state_of(const hak_slab_t* s, const void* b, uint64_t t, size_t* req) {
  if (t == T_FREE || t == T_QUAR) return HAK_SEC_FREE;
  if (t == T_REMOTE) return HAK_SEC_REMOTE;
  uint64_t x = t - hak_sec_cookie(b);
  if (x >= HAK_SEC_LIVE_BIAS + s->bsize && x <= 2 * (uint64_t)s->bsize) x -= s->bsize;   /* from new[]: live too */
  if (x < HAK_SEC_LIVE_BIAS || x > s->bsize) return HAK_SEC_BROKEN;
  *req = (size_t)(x - HAK_SEC_LIVE_BIAS);
  return HAK_SEC_LIVE;
}
int _hak_secure_state(hak_slab_t* s, const void* b, size_t* req) { return state_of(s, b, hak_load64(trailer(s, b)), req); }

/* The figures (stats.c): the live blocks of slab s and the bytes asked for
 * them, what malloc_usable_size says of each, from their trailers.  A block
 * held in a quarantine or freed by another thread is neither live nor free.
 * Called with the page pool's lock held, so the slab's pages stay; its owner
 * may be handing blocks out meanwhile, so each trailer is read once, whole. */
void _hak_secure_live(const hak_slab_t* s, size_t* live, size_t* bytes) {
  uint32_t bsize = __atomic_load_n(&s->bsize, __ATOMIC_RELAXED);
  size_t end = hak_slab_bump(s, __atomic_load_n(&s->carved, __ATOMIC_RELAXED));
  const uint8_t* base = hak_slab_start(s);
  size_t n = 0, sum = 0, req;
  for (size_t off = bsize; off + bsize <= end; off += bsize) {   /* (block 0 is never handed out) */
    uint64_t t = __atomic_load_n((const uint64_t*)(base + off + bsize - 8), __ATOMIC_RELAXED);
    if (state_of(s, base + off, t, &req) == HAK_SEC_LIVE) n++, sum += req;
  }
  *live = n;
  *bytes = sum;
}

/* malloc, when hak_secure_pop_bad found something: the end of a free list
 * (a NULL link) is fine and the pop is completed here; anything else is
 * reported.  noipa: the fast path must see a function that returns, so that
 * it can tail-call it. */
__attribute__((noipa)) void* _hak_secure_pop_slow(hak_slab_t* s, hak_block_t* b, size_t req) {
  hak_block_t* n = hak_block_next(b);   /* a link that leaves the SuperSlab: "free list corrupted" */
  size_t k = FILL_OFF;
  while (k < FILL_END && ((uint8_t*)b)[k] == (uint8_t)_hak_secure_fill64) k++;
  if (k < FILL_END || hak_sec_trailer_not_free(hak_load64(trailer(s, b))) != 0) {
    size_t live;
    if (_hak_secure_state(s, b, &live) == HAK_SEC_LIVE)
      _hak_fatal("hakmem: heap corruption: block %p handed out twice (free list corrupted)\n", (void*)b);
    if (k == FILL_END) k = s->bsize - 8;   /* the fill is intact: the trailer was written */
    _hak_fatal("hakmem: write after free detected in block %p (size %u, near offset %zu)\n", (void*)b, s->bsize, k);
  }
  s->free = n;
  hak_used_add(s, 1);
  hak_secure_pop_mark(s->bsize, b, req);
  hak_counter_inc(&hak_heap_get()->cls[s->cls].nmalloc);
  return b;
}

/* A trailer any block may hold: a free state, or live and decoding to a
 * request that fits the block. */
static bool trailer_valid(const void* b, uint32_t bsize, uint64_t t) {
  if (t <= T_QUAR) return true;
  uint64_t x = t - hak_sec_cookie(b);
  return x >= HAK_SEC_LIVE_BIAS && x <= 2 * (uint64_t)bsize;   /* (a block from new[] above bsize) */
}

/* The first of len bytes at p that is not the fill byte. */
static size_t fill_broken_at_byte(const uint8_t* p, size_t len) {
  size_t i = 0;
  while (i < len && p[i] == (uint8_t)_hak_secure_fill64) i++;
  return i;
}

/* Every check of a free, with a message for each failure, given the trailer
 * value t.  Returns only if the block was live and intact: a state that is
 * not live, a broken trailer, a broken canary after the request, and the
 * trailer of the block below, which an underflow of even one byte changes
 * (block 0 of a slab is never handed out, so every block has one). */
static size_t check_live(hak_slab_t* s, void* b, uint64_t t, const char* op) {
  size_t req = 0;
  int st = state_of(s, b, t, &req);
  if (st == HAK_SEC_FREE || st == HAK_SEC_REMOTE) {
    _hak_double_free(op, b, s->bsize);
    _hak_fatal("hakmem: double free of %p (size %u) in %s()\n", b, s->bsize, op);   /* secure: never continue */
  }
  if (st == HAK_SEC_BROKEN)
    _hak_fatal("hakmem: heap overflow detected at the end of block %p (size %u): trailer overwritten, in %s()\n",
               b, s->bsize, op);
  if (t - hak_sec_cookie(b) - HAK_SEC_LIVE_BIAS > s->bsize - HAK_SEC_LIVE_BIAS)   /* still marked: delete[] did not free it */
    _hak_fatal("hakmem: %s(): block %p was allocated by operator new[] (free it with delete[])\n", op, b);
  const uint8_t* from = (uint8_t*)b + req;
  size_t room = s->bsize - 8 - req;   /* canary bytes: up to CANARY, before the trailer */
  if (hak_likely(((hak_load64(from) ^ HAK_SEC_CANARY64) & hak_sec_canary_mask(room)) == 0)) goto below;
  for (size_t k = 0; k < CANARY && k < room; k++)
    if (from[k] != (uint8_t)(HAK_SEC_CANARY64 >> (8 * k)))
      _hak_fatal("hakmem: heap overflow detected in block %p: byte %zu past its %zu requested bytes, in %s()\n", b,
                 k, req, op);
below:;
  if (req + HAK_SEC_SLACK_END <= s->bsize && hak_sec_slack_diff(from + 8, _hak_secure_fill64) != 0)
    _hak_fatal("hakmem: heap overflow detected in block %p: byte %zu past its %zu requested bytes, in %s()\n", b,
               (size_t)8 + fill_broken_at_byte(from + 8, 32), req, op);
  size_t off = (size_t)((uint8_t*)b - hak_slab_start(s));
  if (off >= s->bsize && !trailer_valid((uint8_t*)b - s->bsize, s->bsize, hak_load64((uint8_t*)b - 8)))
    _hak_fatal("hakmem: heap underflow detected below block %p (size %u): the block below's trailer was overwritten, "
               "in %s()\n", b, s->bsize, op);
  return req;
}

/* A block that leaves the quarantine must still say so: anything else is
 * a broken heap (the quarantine checked the block when it came in). */
static void check_released(hak_slab_t* s, void* b, uint64_t t, const char* op) {
  if (t != T_QUAR && t != T_FREE && t != T_REMOTE)   /* its state word written over while it was held */
    _hak_fatal("hakmem: write after free detected in block %p (size %u, near offset %u)\n", b, s->bsize, s->bsize - 8);
  if (t != T_QUAR)
    _hak_fatal("hakmem: heap corruption: block %p (size %u) left the quarantine in state %#llx, in %s()\n", b,
               s->bsize, (unsigned long long)t, op);
}

/* Owner free off the fast path (full slab, emptied slab, or a failed fast
 * check, which this reports). */
void _hak_secure_free(hak_slab_t* s, void* b, const char* op) {
  check_released(s, b, hak_load64(trailer(s, b)), op);
  hak_store64(trailer(s, b), T_FREE);
}

/* Remote free (of a block the quarantine let go): mark the trailer remote.
 * The mark stays when the owner takes the list (without walking it: heap.c,
 * _hak_slab_collect), and malloc accepts it as free (hak_secure_pop_bad); a
 * second free of the block finds it not live. */
void _hak_secure_free_remote(hak_slab_t* s, void* b, const char* op) {
  check_released(s, b, __atomic_exchange_n(trailer(s, b), (uint64_t)T_REMOTE, __ATOMIC_RELAXED), op);
}

/* A check of hak_secure_enter failed (secure.h): which one, reported. */
_Noreturn hak_cold void _hak_secure_free_failed(hak_slab_t* s, void* b, uint64_t t, const char* op) {
  check_live(s, b, t, op);
  _hak_fatal("hakmem: heap corruption at block %p (size %u) in %s()\n", b, s->bsize, op);
}

/* Where a write after free that hak_sec_fill_diff (secure.h) found lies:
 * the offset of the first word of p's len bytes that is not fill. */
static size_t fill_broken_at(const void* p, size_t len) {
  const uint64_t* w = p;
  size_t i = 0;
  while (i < len / 8 && w[i] == _hak_secure_fill64) i++;
  return i * 8;
}
_Noreturn hak_cold void _hak_secure_fill_failed(void* b, size_t len, uint32_t bsize) {
  _hak_fatal("hakmem: write after free detected in block %p (size %u, near offset %zu)\n", b, bsize,
             fill_broken_at(b, len));
}

/* Freshly carved blocks look like freed ones: all fill (a slab's pages may
 * hold an earlier slab's blocks: no previous owner's data), trailer free. */
void _hak_secure_carve_fill(void* b, uint32_t bsize) {
  memset(b, (int)(uint8_t)_hak_secure_fill64, bsize - 8);
  hak_store64((uint8_t*)b + bsize - 8, T_FREE);
}

/* Random order for a chunk of freshly carved blocks (about 4 KiB: the
 * next allocation is not the block after the last one, so an overflow's
 * neighbour cannot be arranged by allocating in order).  It costs locality:
 * a program that walks its objects in the order it made them misses the
 * cache on each, where address order lets the prefetcher run ahead.
 * python (PYTHONMALLOC=malloc, a dict of 300,000 entries; its garbage
 * collector walks every object) took 2.4-2.9 s with it and 1.5-1.8 s without
 * (the default build 1.3-1.6 s); the standard suite's programs, whose
 * blocks stay in cache, did not move (docs/BENCHMARKS.md).  So it is an
 * option, on by default (HAKMEM_SECURE_SHUFFLE). */
void _hak_secure_shuffle(void** v, size_t n) {
  if (shuffle_off) return;
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)(_hak_secure_rand() % i);
    void* t = v[i - 1];
    v[i - 1] = v[j];
    v[j] = t;
  }
}

/* C++ new[] and delete[] must pair: a block from new[] freed by delete (or
 * free), or a block from new (or malloc) freed by delete[], is reported.
 * Only the array calls pay: new[] adds the block size to the block's live
 * trailer (a large block: a flag in its header), delete[] checks it and
 * takes it off before the ordinary free; a plain free or delete of a block
 * that still carries it fails the free's own trailer check, and the slow
 * path (check_live) names the mismatch.  delete[] of a new'd char passes no
 * size (char has no destructor), so only such a mark can tell. */
static uint64_t* live_trailer(const hak_ptr_t* r, void* p, uint32_t* bsize) {
  hak_slab_t* s = r->slab;
  if (s == NULL || hak_slab_block_at(s, p) != (uint8_t*)p) return NULL;   /* no block: free reports it */
  *bsize = s->bsize;
  return trailer(s, p);
}

/* With HAKMEM_SECURE_ARRAY_PAIRS=0 no block is marked, so neither free
 * nor delete[] finds a mismatch: for programs that delete a new char[] with
 * plain delete (mimalloc-bench's cache-scratch does), a mistake with no
 * effect where the elements have no destructor; with one, the pointer freed
 * is not the block's start and free reports that instead. */
void _hak_secure_new_array(void* p) {
  hak_ptr_t r;
  if (p == NULL || array_pairs_off) return;
  uint32_t kind = hak_ptr_classify(p, &r), bsize;
  uint64_t* t;
  if (kind == HAK_SEG_LARGE) r.seg->sec.array = 1;
  else if (kind == HAK_SEG_SMALL && (t = live_trailer(&r, p, &bsize)) != NULL) hak_store64(t, hak_load64(t) + bsize);
}

void _hak_secure_delete_array(void* p, const char* op) {
  hak_ptr_t r;
  if (p == NULL || array_pairs_off) return;
  uint32_t kind = hak_ptr_classify(p, &r), bsize;
  uint64_t* t;
  if (kind == HAK_SEG_LARGE) {
    if (!hak_large_live_at(r.seg, p)) return;   /* free reports */
    if (!r.seg->sec.array) goto mismatch;
    r.seg->sec.array = 0;
    return;
  }
  if (kind != HAK_SEG_SMALL || (t = live_trailer(&r, p, &bsize)) == NULL) return;
  uint64_t x = hak_load64(t) - hak_sec_cookie(p) - HAK_SEC_LIVE_BIAS;
  if (x - bsize <= bsize - HAK_SEC_LIVE_BIAS) {   /* marked (secure.h) */
    hak_store64(t, hak_load64(t) - bsize);
    return;
  }
  if (x > bsize - HAK_SEC_LIVE_BIAS) return;   /* not live: free reports */
mismatch:
  _hak_fatal("hakmem: %s(): block %p was not allocated by operator new[] (free it with delete)\n", op, p);
}

/* Guarded memcpy: the secure library's memcpy (override.c) checks that the
 * bytes it writes lie inside one live block's request when the destination
 * is in a hakmem segment (one byte past it is an overflow, one byte before it
 * an underflow, a freed block a write after free), then copies.  A copy is
 * where most overflows of a heap buffer happen, and it runs before anything
 * else sees the damage: the suite's programs that overrun a block with
 * memcpy and never free it are caught only here (issue #30).  The check is
 * a segment-map byte for a destination outside the heap, and a slab lookup,
 * a multiply (the block index, by the slab's reciprocal) and the trailer
 * for one inside.  Only calls through the PLT come here: the compiler's
 * inline copies of a constant size, and libc's calls inside itself, do not.
 * The copy itself is libc's memmove (glibc's memcpy and memmove are the
 * same code for copies that do not overlap), named so that the compiler
 * does not turn it back into a call to memcpy, which is this function. */
extern void* hak_libc_memmove(void* d, const void* s, size_t n) __asm__("memmove");

_Noreturn hak_cold static void copy_outside(const char* op, const void* d, size_t n, const void* b, size_t req) {
  if (b == NULL)
    _hak_fatal("hakmem: %s(): write of %zu bytes at %p outside any block (heap overflow or underflow)\n", op, n, d);
  if ((const uint8_t*)d < (const uint8_t*)b)
    _hak_fatal("hakmem: heap underflow detected in %s(): write of %zu bytes at %p starts %zu bytes below block %p\n", op,
               n, d, (size_t)((const uint8_t*)b - (const uint8_t*)d), b);
  _hak_fatal("hakmem: heap overflow detected in %s(): write of %zu bytes at %p runs %zu bytes past the %zu requested "
             "bytes of block %p\n", op, n, d, (size_t)((const uint8_t*)d + n - ((const uint8_t*)b + req)), req, b);
}
_Noreturn hak_cold static void copy_freed(const char* op, const void* d, size_t n, const void* b) {
  _hak_fatal("hakmem: write after free detected in %s(): write of %zu bytes at %p into freed block %p\n", op, n, d, b);
}

/* The n bytes written at d (d in a hakmem segment, n > 0) lie in one live
 * block's request, or the program is stopped with a report: the slow half,
 * which classifies. */
_Noreturn hak_cold static void check_write_failed(const void* d, size_t n, const char* op) {
  hak_ptr_t r;
  uint32_t kind = hak_ptr_classify(d, &r);
  const uint8_t* p = d;
  const uint8_t* b;
  size_t req;
  if (kind == HAK_SEG_LARGE) {
    b = hak_large_block(r.seg);
    if (p >= b && hak_load_relaxed(&r.seg->used_pages) != 1) copy_freed(op, d, n, b);   /* in the large quarantine */
    copy_outside(op, d, n, b, hak_large_usable(r.seg));
  }
  if (kind != HAK_SEG_SMALL) copy_outside(op, d, n, NULL, 0);   /* zero-size blocks: no byte to write */
  hak_slab_t* s = r.slab;
  if (s == NULL || (b = hak_slab_block_at(s, p)) == NULL) copy_outside(op, d, n, NULL, 0);
  uint32_t bsize = s->bsize;
  int st = _hak_secure_state(s, b, &req);
  /* a write that starts past b's request and reaches its trailer or the
   * next block is an underflow of the next block (p[-1] = ...); every
   * block that was never handed out (block 0 of each slab, the uncarved
   * rest) reads as free */
  if ((st != HAK_SEC_LIVE || p >= b + req) && p + n > b + bsize - 8) copy_outside(op, d, n, b + bsize, 0);
  if (st == HAK_SEC_FREE || st == HAK_SEC_REMOTE) copy_freed(op, d, n, b);
  if (st != HAK_SEC_LIVE) copy_outside(op, d, n, NULL, 0);   /* a broken trailer */
  copy_outside(op, d, n, b, req);
}

/* ... and the common half: a live small block (its slab, the block by the
 * slab's reciprocal, its trailer decoded inline) or a large one. */
void _hak_secure_check_write(const void* d, size_t n, const char* op) {
  hak_ptr_t r;
  uint32_t kind = hak_ptr_classify_mapped(d, &r);
  const uint8_t* p = d;
  if (hak_likely(kind == HAK_SEG_SMALL)) {
    hak_slab_t* s = r.slab;
    const uint8_t* b = s != NULL ? hak_slab_block_at(s, p) : NULL;
    if (hak_likely(b != NULL)) {
      uint32_t bsize = s->bsize;
      uint64_t req = hak_load64(b + bsize - 8) - hak_sec_cookie(b) - HAK_SEC_LIVE_BIAS;
      if (req > bsize - HAK_SEC_LIVE_BIAS) req -= bsize;   /* from new[] (secure.h) */
      if (hak_likely(req <= bsize - HAK_SEC_LIVE_BIAS && n <= req && (size_t)(p - b) <= req - n)) return;
    }
  } else if (kind == HAK_SEG_LARGE) {
    /* a large block's mapping may end before the next 4 MiB: what follows
     * it there is another mapping, not hakmem's */
    hak_segment_t* seg = r.seg;
    if ((size_t)(p - (const uint8_t*)seg) >= seg->map_size) return;
    const uint8_t* b = hak_large_block(seg);
    size_t usable = hak_large_usable(seg);   /* up to the guard page, as malloc_usable_size says */
    if (hak_likely(p >= b && hak_load_relaxed(&seg->used_pages) == 1 && n <= usable && (size_t)(p - b) <= usable - n))
      return;
  }
  check_write_failed(d, n, op);
}

void* _hak_secure_memcpy(void* d, const void* s, size_t n) {
  if (hak_segmap_contains(d) && n != 0) _hak_secure_check_write(d, n, "memcpy");
  return hak_libc_memmove(d, s, n);
}

/* Guard pages of a new SuperSlab: the top of page 0 (below the first slab)
 * and the whole last page (above the last slab) are inaccessible, and so is
 * every slab page until a slab first takes it (_hak_secure_slab_pages,
 * seg->sec.open): a write far past a block (a bad index) meets an
 * inaccessible page unless it lands in a slab.  A page stays accessible
 * once used: protecting it again at every slab release cost espresso 3.8x
 * and mstress 11x the default's time (an mprotect per slab made and
 * released, measured 2026-11-24). */
void _hak_secure_segment_guards(hak_segment_t* seg) {
  if (!hak_opt(SECURE_GUARD_PAGES)) return;   /* the user's choice: huge pages over guards */
  size_t from = HAK_HDR_PAGES * HAK_PAGE_SIZE;
  _hak_os_protect((uint8_t*)seg + from, HAK_SEG_SIZE - from, PROT_NONE);
}
bool _hak_secure_slab_pages(hak_segment_t* seg, size_t idx, size_t npages) {
  if (!hak_opt(SECURE_GUARD_PAGES)) return true;
  return _hak_os_protect((uint8_t*)seg + (idx << HAK_PAGE_SHIFT), npages << HAK_PAGE_SHIFT, PROT_READ | PROT_WRITE);
}
#endif /* HAK_SECURE */

/* ---------------------------------------------------------------- large blocks
 * A large block ends at a guard page (placed there by
 * _hak_secure_large_place); below it, a canary of LARGE_CANARY bytes (in
 * the header page's slack, or below an aligned block), checked on free and
 * realloc: an underflow.  A freed large block is
 * filled, canary included, up to its guard page (or the end of its last
 * page): every byte of a held mapping outside a live block is fill or was
 * never written, so a new block taken from it holds no earlier owner's
 * bytes without a second pass, and the fill is checked when the mapping is
 * taken again or let go (a write after free); from LARGE_DROP_MIN the
 * pages are dropped instead of filled (below). */
#if HAK_SECURE
#define LARGE_CANARY 32
_Static_assert(offsetof(hak_segment_t, pmap) <= HAK_LARGE_HDR - LARGE_CANARY,
               "the canary below a large block is slack");

void _hak_secure_large_alloc(hak_segment_t* seg) {
  seg->sec.array = 0;
  uint64_t* c = (uint64_t*)(hak_large_block(seg) - LARGE_CANARY);
  for (int i = 0; i < LARGE_CANARY / 8; i++) c[i] = hak_sec_cookie(&c[i]);
}

/* A large block of the default alignment ends at its mapping's guard page,
 * to its alignment (16, or the caller's up to HAK_LARGE_HDR: memalign & co.;
 * large.off is HAK_LARGE_HDR on entry, which the alignment divides).  A new mapping
 * (sec.guard_off 0) gets its guard, and its headroom after it (a write far past
 * the block faults too), once; a held mapping (the large quarantine) keeps
 * where it has it and the block moves up to end there, or its accessible
 * part grows to the block's end (more rights: no other CPU's TLB to flush,
 * which is what an mprotect to PROT_NONE of used pages costs:
 * docs/SECURITY.md).  Sets sec.guard_off and large.off. */
void _hak_secure_large_place(hak_segment_t* seg, size_t size, size_t align) {
  size_t end = seg->large.off + hak_align_up(size, HAK_OS_PAGE), a = align > 16 ? align : 16;
  if (seg->sec.guard_off == 0)
    seg->sec.guard_off = _hak_os_protect((uint8_t*)seg + end, seg->map_size - end, PROT_NONE) ? end : seg->map_size;
  else if (seg->sec.guard_off < end && _hak_os_protect((uint8_t*)seg + seg->sec.guard_off, end - seg->sec.guard_off,
                                                   PROT_READ | PROT_WRITE))
    seg->sec.guard_off = end;
  if (seg->sec.guard_off > end && seg->sec.guard_off - size >= HAK_SEG_SIZE &&
      _hak_os_protect((uint8_t*)seg + end, seg->sec.guard_off - end, PROT_NONE))
    seg->sec.guard_off = end;   /* (rare: the block must start in the first HAK_SEG_SIZE, where free finds it) */
  if (seg->sec.guard_off >= end && seg->sec.guard_off - size < HAK_SEG_SIZE)
    seg->large.off = (seg->sec.guard_off - size) & ~(a - 1);   /* >= HAK_LARGE_HDR: a divides it */
}

void _hak_secure_large_check(hak_segment_t* seg, const char* op) {
  if (seg->sec.array)   /* from new[], not freed by delete[] (above) */
    _hak_fatal("hakmem: %s(): block %p was allocated by operator new[] (free it with delete[])\n", op,
               (void*)hak_large_block(seg));
  if (seg->large.huge_aligned) return;   /* its own mapping, no canary */
  const uint64_t* c = (const uint64_t*)(hak_large_block(seg) - LARGE_CANARY);
  for (int i = 0; i < LARGE_CANARY / 8; i++)
    if (c[i] != hak_sec_cookie(&c[i]))
      _hak_fatal("hakmem: heap underflow detected below block %p (large block): the %d bytes below it were "
                 "overwritten, in %s()\n", (void*)hak_large_block(seg), LARGE_CANARY, op);
}

/* What a freed block's fill covers: its canary, the block, and the rest of
 * its last page (an overflow short of the guard page wrote there). */
static uint8_t* large_fill_range(hak_segment_t* seg, size_t* len) {
  size_t from = seg->large.off - LARGE_CANARY;
  size_t to = seg->sec.guard_off ? seg->sec.guard_off : hak_align_up(seg->large.off + seg->large.size, HAK_OS_PAGE);
  *len = to - from;
  return (uint8_t*)seg + from;
}

/* A freed block whose fill spans at least LARGE_DROP_MIN bytes, when the
 * fill byte is 0 (the default): its whole pages are dropped (MADV_DONTNEED)
 * instead of written.  They read as zero, which is the fill, without a pass
 * over them, and leave the RSS at once; a page written after the free is
 * resident again, so the check reads only the resident pages (mincore).
 * One madvise instead of two passes over the block (the fill, and its check
 * when the mapping is taken or let go): malloc-large, blocks of 5-25 MiB,
 * spent 43 % of its samples in them (docs/BENCHMARKS.md).  Below the bound
 * the passes cost less than the call and the faults that follow it. */
#define LARGE_DROP_MIN ((size_t)1 << 20)
/* Whether a fill range of len bytes is dropped: decided by the range alone,
 * which does not change while the block is held, so the check needs no
 * mark.  (If the madvise fails, the range is written with zeros instead;
 * the check's resident pages are then all of them, read whole.) */
static bool large_drops(size_t len) { return _hak_secure_fill64 == 0 && len >= LARGE_DROP_MIN; }

void _hak_secure_large_fill(hak_segment_t* seg) {
  size_t len;
  uint8_t* p = large_fill_range(seg, &len);
  if (large_drops(len)) {
    uint8_t* pg = (uint8_t*)hak_align_up((uintptr_t)p, HAK_OS_PAGE);   /* (the fill range ends at a page) */
    memset(p, 0, (size_t)(pg - p));
    if (_hak_os_advise(pg, (size_t)(p + len - pg), MADV_DONTNEED)) return;
  }
  memset(p, (int)(uint8_t)_hak_secure_fill64, len);
}

/* The first word of len bytes at p that is not fill, or NULL. */
static const uint8_t* fill_broken(const uint8_t* p, size_t len) {
  if (hak_likely(len == 0 || hak_sec_fill_diff(p, len, _hak_secure_fill64) == 0)) return NULL;   /* (the vector check, secure.h) */
  return p + fill_broken_at(p, len);
}
/* ... of a dropped block's pages: only those resident again can hold
 * anything but zero. */
static const uint8_t* dropped_broken(const uint8_t* pg, size_t len) {
  enum { CHUNK = 4096 };   /* pages a mincore call asks about: 16 MiB */
  unsigned char vec[CHUNK];
  for (size_t at = 0; at < len; at += (size_t)CHUNK * HAK_OS_PAGE) {
    size_t n = len - at < (size_t)CHUNK * HAK_OS_PAGE ? len - at : (size_t)CHUNK * HAK_OS_PAGE;
    const uint8_t* q = pg + at;
    if (!_hak_os_resident((void*)q, n, vec)) {   /* cannot tell: read them all */
      if ((q = fill_broken(q, n)) != NULL) return q;
      continue;
    }
    for (size_t i = 0; i < n / HAK_OS_PAGE; i++) {
      const uint8_t* b = (vec[i] & 1) ? fill_broken(q + i * HAK_OS_PAGE, HAK_OS_PAGE) : NULL;
      if (b != NULL) return b;
    }
  }
  return NULL;
}

/* The first 16 bytes of a held block are still fill (quarantine.c,
 * _hak_secure_large_recent), read without touching a dropped page nothing
 * wrote: a read maps the zero page there, which counts as resident, as a
 * written page does, to the check when the block is taken or let go. */
bool _hak_secure_large_head_ok(hak_segment_t* seg) {
  size_t len;
  (void)large_fill_range(seg, &len);
  const uint8_t* b = hak_large_block(seg);
  unsigned char v;
  if (large_drops(len) && ((uintptr_t)b & (HAK_OS_PAGE - 1)) == 0 && _hak_os_resident((void*)b, HAK_OS_PAGE, &v) &&
      !(v & 1))
    return true;   /* dropped and not written since */
  return ((hak_load64(b) ^ _hak_secure_fill64) | (hak_load64(b + 8) ^ _hak_secure_fill64)) == 0;
}

/* The fill of a freed block is intact (it is taken again or let go). */
void _hak_secure_large_verify(hak_segment_t* seg) {
  size_t len;
  const uint8_t* p = large_fill_range(seg, &len);   /* 16-byte aligned: large.off is, LARGE_CANARY is */
  const uint8_t* bad;
  if (large_drops(len)) {
    const uint8_t* pg = (const uint8_t*)hak_align_up((uintptr_t)p, HAK_OS_PAGE);
    bad = fill_broken(p, (size_t)(pg - p));
    if (bad == NULL) bad = dropped_broken(pg, (size_t)(p + len - pg));
  } else {
    bad = fill_broken(p, len);
  }
  if (hak_likely(bad == NULL)) return;
  _hak_fatal("hakmem: write after free detected in block %p (large block, near offset %zd)\n",
             (void*)hak_large_block(seg), (ssize_t)(bad - hak_large_block(seg)));
}
#endif
