/* Secure mode (the libhakmem-secure.so build, HAK_SECURE=1): stronger misuse
 * detection at a measured cost, without touching the default build.
 * - every small block ends with a trailer word that is its state: zero while
 *   free, cookie (address ^ secret) + request + 16 while live.  Only the
 *   allocator writes it, so every free knows exactly whether the block is
 *   live (a double free, on any thread, always) and where the request ends;
 *   the 8 bytes right after the request are a canary, checked on free (an
 *   overflow of even one byte is found);
 * - freed blocks are zeroed after their link, and the zeros and the trailer
 *   are checked when the block is handed out again (a write after free);
 * - free-list links are encoded (internal.h), blocks are carved in random
 *   order, SuperSlabs carry guard pages, large blocks end at a guard page.
 * The per-operation checks are inline in internal.h (a handful of loads and
 * compares on lines the operation writes anyway); this file holds what runs
 * rarely: carving, remote frees, and the classification of a failed check.
 * Compiled (and called) only when HAK_SECURE is 1. */
#include "internal.h"
#include <sys/mman.h>

#if HAK_SECURE
#define FILL_OFF    8      /* the free fill: bytes [8, 24) of a free block, zero */
#define FILL_END    24
#define CANARY      8      /* canary bytes right after the request */
#define T_FREE      0      /* trailer of a free (or freshly carved) block */
#define T_REMOTE    1      /* trailer of a block freed by another thread, not yet collected */

_Static_assert(FILL_END <= 32 - 8, "fill and trailer fit the smallest secure block");
_Static_assert(HAK_SEC_LIVE_BIAS == HAK_TRAILER, "a live trailer decodes to req + HAK_TRAILER");

static uint64_t* trailer(const hak_slab_t* s, const void* b) { return (uint64_t*)((uint8_t*)b + s->bsize - 8); }

static int state_of(const hak_slab_t* s, const void* b, uint64_t t, size_t* req) {
  if (t == T_FREE) return HAK_SEC_FREE;
  if (t == T_REMOTE) return HAK_SEC_REMOTE;
  uint64_t x = t - hak_sec_cookie(b);
  if (x < HAK_SEC_LIVE_BIAS || x > s->bsize) return HAK_SEC_BROKEN;
  *req = (size_t)(x - HAK_SEC_LIVE_BIAS);
  return HAK_SEC_LIVE;
}
int _hak_secure_state(hak_slab_t* s, const void* b, size_t* req) { return state_of(s, b, hak_load64(trailer(s, b)), req); }

/* malloc, when hak_secure_pop_bad found something: the end of a free list
 * (a NULL link) is fine and the pop is completed here; anything else is
 * reported.  noipa: the fast path must see a function that returns, so that
 * it can tail-call it. */
__attribute__((noipa)) void* _hak_secure_pop_slow(hak_slab_t* s, hak_block_t* b, size_t req) {
  hak_block_t* n = hak_block_next(b);   /* a link that leaves the SuperSlab: "free list corrupted" */
  size_t k = FILL_OFF;
  while (k < FILL_END && ((uint8_t*)b)[k] == 0) k++;
  if (k < FILL_END || hak_load64(trailer(s, b)) != T_FREE) {
    size_t live;
    if (_hak_secure_state(s, b, &live) == HAK_SEC_LIVE)
      _hak_fatal("hakmem: heap corruption: block %p handed out twice (free list corrupted)\n", (void*)b);
    if (k == FILL_END) k = s->bsize - 8;   /* the fill is intact: the trailer was written */
    _hak_fatal("hakmem: write after free detected in block %p (size %u, near offset %zu)\n", (void*)b, s->bsize, k);
  }
  s->free = n;
  s->used++;
  hak_secure_pop_mark(s->bsize, b, req);
  hak_counter_inc(&hak_heap_get()->cls[s->cls].nmalloc);
  return b;
}

/* Every check of a free, with a message for each failure, given the trailer
 * value t.  Returns only if the block was live and intact. */
static void check_live(hak_slab_t* s, void* b, uint64_t t, const char* op) {
  size_t req = 0;
  int st = state_of(s, b, t, &req);
  if (st == HAK_SEC_FREE || st == HAK_SEC_REMOTE) {
    _hak_double_free(op, b, s->bsize);
    _hak_fatal("hakmem: double free of %p (size %u) in %s()\n", b, s->bsize, op);   /* secure: never continue */
  }
  if (st == HAK_SEC_BROKEN)
    _hak_fatal("hakmem: heap overflow detected at the end of block %p (size %u): trailer overwritten, in %s()\n",
               b, s->bsize, op);
  const uint8_t* from = (uint8_t*)b + req;
  for (size_t k = 0; k < CANARY; k++)
    if (from[k] != (uint8_t)(HAK_SEC_CANARY64 >> (8 * k)))
      _hak_fatal("hakmem: heap overflow detected in block %p: byte %zu past its %zu requested bytes, in %s()\n", b,
                 k, req, op);
}

static void fill(void* b) { memset((uint8_t*)b + FILL_OFF, 0, FILL_END - FILL_OFF); }

/* Owner free off the fast path (full slab, emptied slab, or a failed fast
 * check, which this reports). */
void _hak_secure_free(hak_slab_t* s, void* b, const char* op) {
  check_live(s, b, hak_load64(trailer(s, b)), op);
  hak_store64(trailer(s, b), T_FREE);
  fill(b);
}

/* Remote free: claim the trailer with one atomic exchange, so two threads
 * freeing the same block cannot both pass; the owner turns the remote mark
 * into the free mark when it collects (a block it finds without the mark
 * was freed twice). */
void _hak_secure_free_remote(hak_slab_t* s, void* b, const char* op) {
  uint64_t t = __atomic_exchange_n(trailer(s, b), (uint64_t)T_REMOTE, __ATOMIC_RELAXED);
  check_live(s, b, t, op);
  fill(b);
}

/* Owner collects remote frees. */
void _hak_secure_collected(hak_slab_t* s, void* b) {
  uint64_t* t = trailer(s, b);
  if (hak_load64(t) != T_REMOTE) _hak_fatal("hakmem: double free of %p (size %u) from another thread\n", b, s->bsize);
  hak_store64(t, T_FREE);
}

/* Freshly carved blocks look like freed ones. */
void _hak_secure_carve_fill(void* b, uint32_t bsize) {
  fill(b);
  hak_store64((uint8_t*)b + bsize - 8, T_FREE);
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
