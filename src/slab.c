/* Slabs and the heap's class lists: the size-class tables; one slab's life
 * (made from pool pages, carved lazily, its remote frees collected into the
 * owner's list, released to the pool when empty); and the lists a heap keeps
 * per class (slabs with room, cur[cls] at the head) and of its full slabs.
 * With remote.c and heap.c the small-block tier; its functions are declared
 * in internal.h, its inline list helpers are slab.h's. */
#include "internal.h"
#include "slab.h"

hak_slab_t _hak_slab_empty;
_Atomic(uint64_t) _hak_stat_reserve_released;   /* kept empty slabs given back by the reserve tick */

/* ---------------------------------------------------------------- size class tables */
const uint32_t _hak_class_size[HAK_NCLASSES] = {
    16, 32, 48, 64, 80, 96, 112, 128, 144, 160,
    192, 224, 256, 272, 320, 384, 448, 512, 544, 640,
    768, 896, 1024, 1088, 1280, 1536, 1792, 2048, 2176, 2560,
    3072, 3584, 4096, 4352, 4608, 5120, 6144, 7168, 8192, 8704, 10240,
    12288, 14336, 16384, 17408, 20480, 24576, 28672, 32768, 34816, 40960,
    49152, 57344, 65536, 69632, 81920, 98304, 114688, 131072};
/* Pages (4 KiB) per slab.  Up to 14 KiB: whole windows (64 KiB,
 * internal.h), the fewest that hold at least 4 blocks and leave at most
 * 1/16 of the slab over.  From HAK_EXACT_MIN (16 KiB): page-exact, the
 * fewest pages (HAK_SLAB_MIN_PAGES at least) that leave at most an eighth
 * over -- one block, two of 17 KiB in 9 pages -- so that a class in use
 * costs a block's pages and a freed block's pages join their free
 * neighbours at once (pool.c places them from the top of a segment).  A
 * class in use costs the pages its blocks touched (carving is lazy),
 * whatever its slab's size.  Measured 2026-11-28 against page-exact slabs
 * for the small classes (the fewest 4 KiB pages, with 4 KiB or 64 KiB at
 * least): a program that frees at random over many full slabs (alloc-test's
 * pattern, tests/test-lists.c) takes the refill path for 21 % of its
 * mallocs with 64 KiB slabs, 36 % with 32 KiB, 53 % with 16 KiB and 73 %
 * with one page (1.22x and 2.7x the instructions with 32 KiB and one page),
 * until threads cache blocks rather than slabs.  The secure build keeps 8
 * blocks and whole windows: block 0 of its slabs is never handed out (an
 * underflow check needs a block below). */
const uint16_t _hak_class_pages[HAK_NCLASSES] = {
#if HAK_SECURE
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 32, 32, 32, 32, 32, 64, 64, 64, 64, 64, 128, 128, 128, 128, 128, 256, 256, 256, 256, 256};
#else
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 32, 16, 16, 32, 4, 9, 5, 6, 7, 8, 9, 10, 12, 14, 16, 17, 20, 24, 28, 32};
#endif
const uint8_t _hak_class_small[HAK_SMALL_FAST_MAX / 16 + 1] = {
    HAK_SECURE, HAK_SECURE, /* 0..32 (secure: no 16-byte class) */
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 11, 11, 12, 12, 13,
    14, 14, 14, 15, 15, 15, 15, 16, 16, 16, 16, 17, 17, 17, 17, 18,
    18, 19, 19, 19, 19, 19, 19, 20, 20, 20, 20, 20, 20, 20, 20, 21,
    21, 21, 21, 21, 21, 21, 21, 22, 22, 22, 22, 22, 22, 22, 22};

/* Above 1 KiB: the class of n by the doubling of n - 1 (from 2^10) and its
 * sixteenth within it -- each class ends on a sixteenth. */
const uint8_t _hak_class_mid[7 * 16] = {
    23, 24, 24, 24, 25, 25, 25, 25, 26, 26, 26, 26, 27, 27, 27, 27,
    28, 29, 29, 29, 30, 30, 30, 30, 31, 31, 31, 31, 32, 32, 32, 32,
    33, 34, 35, 35, 36, 36, 36, 36, 37, 37, 37, 37, 38, 38, 38, 38,
    39, 40, 40, 40, 41, 41, 41, 41, 42, 42, 42, 42, 43, 43, 43, 43,
    44, 45, 45, 45, 46, 46, 46, 46, 47, 47, 47, 47, 48, 48, 48, 48,
    49, 50, 50, 50, 51, 51, 51, 51, 52, 52, 52, 52, 53, 53, 53, 53,
    54, 55, 55, 55, 56, 56, 56, 56, 57, 57, 57, 57, 58, 58, 58, 58};

/* A remote free list whose count and links disagree, or that holds more
 * blocks than the slab has out: a block freed twice from other threads, or
 * a link written over after a free. */
static hak_noinline hak_noreturn void slab_list_broken(const hak_slab_t* s) {
  _hak_fatal("hakmem: heap corruption: remote free list of slab %p is longer than its live blocks (double free from another thread?)\n", (const void*)s);
}

/* Move the remote frees into the owner's list; false when there were none,
 * or when their first freer is still notifying (it raises the hint again).
 * A list seen non-empty and untagged stays so until taken: only the owner
 * empties it, and the tag is set only on an empty list.  The list's length
 * comes with it (internal.h, HAK_XF_COUNT_SHIFT): a refill, which finds the
 * owner's list empty, takes it whole without touching its blocks; only a
 * slab that still has free blocks walks it, to join the two.  (Secure
 * build: a collected block keeps its remote mark, which malloc accepts as
 * free: hak_secure_pop_bad.) */
hak_warm bool _hak_slab_collect(hak_slab_t* s) {
  uintptr_t v = hak_load_relaxed(&s->xthread_free);
  if (v == 0 || (v & HAK_XF_NOTIFYING)) return false;
  v = atomic_exchange_explicit(&s->xthread_free, 0, memory_order_acquire);
  hak_block_t* list = hak_xf_list(v);
  uint32_t n = hak_xf_count(v);
  if (hak_unlikely(n == 0 || n > s->used || list == NULL)) slab_list_broken(s);
  if (s->free != NULL) {
    hak_block_t* tail = list;
    for (uint32_t i = 1; i < n; i++) {
      tail = hak_block_next(tail);
      if (hak_unlikely(tail == NULL)) slab_list_broken(s);
    }
    if (hak_unlikely(hak_block_next(tail) != NULL)) slab_list_broken(s);
    hak_block_set_next(tail, s->free);
  }
#if HAK_DEBUG >= 2
  else {   /* (taken whole without a walk: the debug build counts it) */
    uint32_t k = 0;
    for (const hak_block_t* b = list; b != NULL && k <= n; b = hak_block_next(b)) k++;
    hak_assert_cmp(k, ==, n);
  }
#endif
  s->free = list;
  hak_used_add(s, -(int32_t)n);
  return true;
}

/* Carve up to ~4 KiB of never-used blocks, at least one: touching the slab
 * lazily keeps fresh memory unfaulted until it is needed.  Carving writes
 * each block's first words, so every block carved costs a page from 4 KiB
 * up: at least 4 blocks a carve, as until 2026-11-27, made a class whose
 * program held one or two such blocks fault in four pages (espresso's
 * buffers, growing through 25 classes from 4 KiB: 124 KiB of its peak RSS;
 * `python3 -c 1` 160 KiB).  The secure build keeps 4: block 0 of a slab is
 * never handed out. */
static bool slab_extend(hak_slab_t* s) {
  uint32_t limit = hak_slab_limit(s);
  uint32_t bump = hak_slab_bump(s, s->carved);
  if (bump >= limit) return false;
  uint32_t bsize = s->bsize;
  uint32_t count = 4096 / bsize;
  uint32_t least = HAK_SECURE ? 4 : 1;
  if (count < least) count = least;
  uint32_t left = (limit - bump) / bsize;
  if (count > left) count = left;
  uint8_t* p = hak_slab_start(s) + bump;
  /* remote frees read carved to reject never-carved blocks: publish atomically */
  __atomic_store_n(&s->carved, s->carved + count * hak_slab_step(s), __ATOMIC_RELAXED);
  if (HAK_SECURE) {   /* random order, each block filled and marked as if freed */
    void* v[256];   /* count <= 4096 / 16 */
    /* (a slab on pages never used is zero already: with the zero fill, the
     * default, it holds what a fill would write) */
    bool fill = !s->sec_zero || _hak_secure_fill64 != 0;
    for (uint32_t i = 0; i < count; i++) {
      v[i] = p + (size_t)i * bsize;
      if (fill) _hak_secure_carve_fill(v[i], bsize);
    }
    /* block 0 of a slab is never handed out: every block handed out has a
     * block below whose trailer shows an underflow (secure.c check_live) */
    uint32_t skip = bump == 0;
    for (uint32_t i = 0; i < count - skip; i++) v[i] = v[i + skip];
    count -= skip;
    if (count == 0) return false;
    _hak_secure_shuffle(v, count);
    for (uint32_t i = 0; i < count; i++)
      hak_block_set_next((hak_block_t*)v[i], i + 1 < count ? (hak_block_t*)v[i + 1] : s->free);
    s->free = v[0];
    return true;
  }
  hak_block_t* first = (hak_block_t*)p;
  for (uint32_t i = 0; i + 1 < count; i++) {
    hak_block_t* b = (hak_block_t*)(p + (size_t)i * bsize);
    hak_block_set_next(b, (hak_block_t*)(p + (size_t)(i + 1) * bsize));
    b->cookie = hak_cookie();
  }
  hak_block_t* last = (hak_block_t*)(p + (size_t)(count - 1) * bsize);
  hak_block_set_next(last, s->free);
  last->cookie = hak_cookie();
  s->free = first;
  return true;
}

#if HAK_DEBUG >= 2
/* The owner's view of a slab agrees with itself (debug build, on the refill
 * and release paths): its shape fits its segment; every block on its free
 * list is a carved block start of this slab, carries the free cookie, and is
 * there once; free blocks and blocks out together are no more than the
 * blocks carved.  Each check asserts with its values; true when all held. */
static bool slab_is_valid(hak_slab_t* s) {
  uintptr_t xo = hak_load_relaxed(&s->xowner);
  if (xo & HAK_OWNER_MESHED || hak_pset_has_atomic(&hak_segment_of(s)->mesh.pages, hak_slab_index(s)))
    return true;   /* (compaction's aliases share pages: mesh.c checks its own) */
  hak_assert_cmp(s->bsize, !=, 0);
  hak_assert_cmp(s->npages, !=, 0);
  hak_assert_cmp(hak_slab_index(s) + s->npages, <=, HAK_PAGES_PER_SEG);
  uint32_t carved = s->carved / hak_slab_step(s), limit = hak_slab_limit(s);
  hak_assert_cmp(carved, <=, limit / s->bsize);
  uint32_t n = 0;
  for (const hak_block_t* b = s->free; b != NULL; b = hak_block_next(b)) {
    hak_assert_cmp((uintptr_t)b, >=, (uintptr_t)hak_slab_start(s));
    hak_assert(hak_is_carved_block(s, (uint64_t)((const uint8_t*)b - hak_slab_start(s)), s->carved));
    if (!HAK_SECURE) hak_assert_cmp(b->cookie, ==, hak_cookie());
    hak_assert_cmp(++n, <=, carved);   /* else a cycle, or a block twice */
  }
  hak_assert_cmp(n + s->used, <=, carved);
  return true;
}
#endif

hak_warm bool _hak_slab_refill(hak_slab_t* s) {
  if (s->free) return true;
  _hak_slab_collect(s);
  hak_assert_expensive(slab_is_valid(s));
  if (s->free) return true;
  if (slab_extend(s)) return true;
  /* blocks on pages scavenging gave back */
  return !HAK_SECURE && hak_segment_of(s)->nphantom[hak_slot_of(hak_slab_index(s))] != 0 && _hak_scavenge_readmit(s);
}

static void slab_set_full(hak_heap_t* h, hak_slab_t* s) {
  hak_list_push(&h->full, s);
  atomic_store_explicit(&s->xowner, (uintptr_t)h | HAK_OWNER_FULL, memory_order_seq_cst);
}
/* A full slab got a block back.  It goes last in its class list: the slabs
 * ahead of it serve first while frees gather in this one, so a slab that got
 * one block back is not made current only to be found full again at the
 * next malloc.  (First in the list, that ping-pong was most of larson's
 * slow-path work; second, right behind the current slab, it still sent a
 * third of alloc-test's mallocs and frees out of line: random frees over
 * many nearly full slabs left each one block or two by its turn.) */
hak_warm void _hak_slab_unfull(hak_heap_t* h, hak_slab_t* s) {
  hak_list_remove(&h->full, s);
  hak_store_relaxed(&s->xowner, (uintptr_t)h);
  hak_avail_append(h, s);
}
/* Pairs with the remote side (push, then read xowner): either the remote
 * free sees FULL and raises the hint, or we see its block here. */
hak_warm void _hak_slab_to_full(hak_heap_t* h, hak_slab_t* s) {   /* s on no list */
  slab_set_full(h, s);
  /* a tagged list stays full: its notifier raises the hint (unfulling it
   * would make the refill loop spin on it until the tag clears) */
  uintptr_t v = atomic_load_explicit(&s->xthread_free, memory_order_seq_cst);
  if (v != 0 && !(v & HAK_XF_NOTIFYING)) _hak_slab_unfull(h, s);
}
hak_warm void _hak_slab_mark_full(hak_heap_t* h, hak_slab_t* s) {
  hak_avail_remove(h, s);
  _hak_slab_to_full(h, s);
}

hak_warm void _hak_slab_init(hak_heap_t* h, hak_segment_t* seg, size_t idx, size_t cls) {
  hak_slab_t* s = hak_slab_at(seg, idx);
  hak_assert(hak_segmap_contains(seg));   /* the segment map knows every segment a slab is made in */
  hak_assert_cmp(seg->kind, ==, HAK_SEG_SMALL);
  hak_assert_cmp(idx + _hak_class_pages[cls], <=, HAK_PAGES_PER_SEG);
  uint32_t bsize = _hak_class_size[cls];
  unsigned npages = _hak_class_pages[cls];
  s->free = NULL;
  /* (the fields the figures walk reads while the owner sets them: stats.c) */
  __atomic_store_n(&s->used, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&s->bsize, bsize, __ATOMIC_RELAXED);
  s->recip = hak_slab_recip(bsize);
  s->carved = 0;
  __atomic_store_n(&s->cls, (uint8_t)cls, __ATOMIC_RELAXED);
  __atomic_store_n(&s->npages, (uint16_t)npages, __ATOMIC_RELAXED);
  hak_store_relaxed(&s->xthread_free, 0);
  s->next = s->prev = NULL;
  hak_assert_cmp(hak_pmap_head(seg, idx + npages - 1), ==, idx);   /* (the pool mapped its pages: pool_claim) */
  hak_store_release(&s->xowner, (uintptr_t)h);
}

/* An empty slab's descriptor is cleared before its pages go back to the
 * pool, which unmaps them (compaction and scavenging forget it first). */
hak_warm void _hak_slab_clear(hak_slab_t* s) {
  hak_segment_t* seg = hak_segment_of(s);
  size_t idx = hak_slab_index(s);
  hak_assert_cmp(s->npages, >=, 1);
  hak_assert_cmp(idx + s->npages, <=, HAK_PAGES_PER_SEG);
  hak_assert_cmp(hak_pmap_head(seg, idx), ==, idx);
  if (hak_pset_has_atomic(&seg->mesh.pages, idx)) _hak_mesh_page_freed(seg, idx);   /* back to private memory */
  if (seg->nphantom[hak_slot_of(idx)] != 0) _hak_scavenge_forget(s);
  hak_store_relaxed(&s->xowner, HAK_OWNER_UNUSED);
  s->free = NULL;
  s->carved = 0;
  __atomic_store_n(&s->used, 0, __ATOMIC_RELAXED);   /* (read by the figures walk: stats.c) */
  __atomic_store_n(&s->bsize, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&s->npages, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&s->cls, 0, __ATOMIC_RELAXED);
}

/* Return an empty slab's pages to the pool (the segment to the cache or the
 * OS when it empties).  The slab is on no list.  True when it was the heap's
 * last slab in its segment (the segment may be gone). */
/* h's references to its slab s, which leaves it. */
hak_warm void _hak_slab_forget(hak_heap_t* h, hak_slab_t* s) {
  for (size_t c = 0; c < s->cls; c++)   /* no loan cursor may point at it: its segment may go */
    if (h->lend.slab[c] == s) h->lend.slab[c] = NULL;
}
hak_warm bool _hak_slab_release(hak_heap_t* h, hak_slab_t* s) {
  hak_segment_t* seg = hak_segment_of(s);
  hak_assert_cmp(hak_load_relaxed(&s->xowner) & ~HAK_OWNER_FLAGS, ==, (uintptr_t)h);   /* only the owner releases */
  hak_assert(hak_segmap_contains(seg));
  _hak_slab_forget(h, s);
  size_t idx = hak_slab_index(s);
  unsigned n = s->npages;
  hak_assert_expensive(slab_is_valid(s));
  _hak_slab_clear(s);
  return _hak_pool_give(h, seg, idx, n);
}
/* A slab holds no block any more.  Keep it if it is its class's only one (so
 * a malloc/free ping-pong does not re-carve), else release it: 0 kept, 1
 * released, 2 released and it was the heap's last slab in its segment (which
 * may be gone). */
static bool slab_is_reserve(hak_heap_t* h, hak_slab_t* s) { return h->cls[s->cls].cur == s && s->next == NULL; }
hak_warm int _hak_slab_retire(hak_heap_t* h, hak_slab_t* s) {
  if (slab_is_reserve(h, s)) return 0;
  if (hak_load_relaxed(&s->xowner) & HAK_OWNER_FULL) hak_list_remove(&h->full, s);
  else hak_avail_remove(h, s);
  return _hak_slab_release(h, s) ? 2 : 1;
}

/* The last block of a slab came back (a local free).  Out of line: inlined
 * into the free fast path, it made every free save and restore a register. */
hak_warm hak_noinline void _hak_slab_emptied(hak_heap_t* h, hak_slab_t* s) {
  hak_heap_enter(h);
  if (hak_slab_is_empty(s) && _hak_slab_retire(h, s)) _hak_heap_release_tick(h);
  hak_heap_leave(h);
}
/* The heap's own reserve, at its release tick (at most every half decommit
 * delay): the empty slab a class keeps as its current one goes to the pool
 * when the class made no malloc since the last tick.  The reserve so holds
 * what the heap reused within the last delay or so, not one slab per class
 * it ever used: a thread that moved on to other sizes (a program's phases)
 * kept a slab of every class of every phase, for as long as it lived. */
hak_warm void _hak_heap_reserve_tick(hak_heap_t* h) {
  for (size_t c = 0; c < HAK_NCLASSES; c++) {
    uint32_t n = (uint32_t)h->cls[c].nmalloc;
    hak_slab_t* s = h->cls[c].cur;
    if (n == h->tick.nmalloc[c] && s != &_hak_slab_empty && slab_is_reserve(h, s) &&
        !(hak_load_relaxed(&s->xowner) & HAK_OWNER_FLAGS) && hak_slab_is_empty(s)) {
      hak_avail_remove(h, s);
      _hak_slab_release(h, s);
      atomic_fetch_add_explicit(&_hak_stat_reserve_released, 1, memory_order_relaxed);
    }
    h->tick.nmalloc[c] = n;
  }
}

/* A class of page-exact slabs (a block or two each) is about to take a new
 * slab: the empty reserves the other such classes keep go to the pool, the
 * largest first, until at most HAK_EXACT_RESERVE pages stay kept.  Each
 * reserve serves its class's malloc/free cycle without the pool (a slab
 * taken and given back per block took 12x the time of the cycle), but one
 * per class is a block of each size a program went through: buffers grown
 * through the sizes kept one block of every size on the way. */
#define HAK_EXACT_RESERVE 64   /* pages: 256 KiB */
hak_warm void _hak_heap_exact_trim(hak_heap_t* h, size_t cls) {
  size_t kept = 0;
  for (size_t c = 0; c < HAK_NCLASSES; c++) {
    hak_slab_t* s = h->cls[c].cur;
    if (_hak_class_size[c] < HAK_EXACT_MIN || c == cls || s == &_hak_slab_empty || !slab_is_reserve(h, s) || !hak_slab_is_empty(s) ||
        (hak_load_relaxed(&s->xowner) & HAK_OWNER_FLAGS))
      continue;
    kept += s->npages;
    if (kept <= HAK_EXACT_RESERVE) continue;
    kept -= s->npages;
    hak_avail_remove(h, s);
    _hak_slab_release(h, s);
  }
}

/* ---------------------------------------------------------------- for compaction (mesh.c) */

/* Take an owned slab off its list (class list or full list). */
void _hak_slab_detach(hak_heap_t* h, hak_slab_t* s) {
  if (hak_load_relaxed(&s->xowner) & HAK_OWNER_FULL) hak_list_remove(&h->full, s);
  else hak_avail_remove(h, s);
}

/* Put an owned slab (on no list) back: on its class list when it has room,
 * else on the full list. */
void _hak_slab_attach(hak_heap_t* h, hak_slab_t* s) {
  atomic_store_explicit(&s->xowner, (uintptr_t)h, memory_order_seq_cst);
  s->next = s->prev = NULL;
  if (s->free != NULL || hak_slab_bump(s, s->carved) < hak_slab_limit(s)) hak_avail_push(h, s);
  else _hak_slab_to_full(h, s);
}

/* Every slab of class cls the heap has on a list, but its current one. */
void _hak_heap_foreach_slab(hak_heap_t* h, size_t cls, void (*fn)(hak_slab_t*, void*), void* arg) {
  hak_slab_t* cur = h->cls[cls].cur;
  if (cur != &_hak_slab_empty)
    for (hak_slab_t *s = cur->next, *next; s != NULL; s = next) {
      next = s->next;
      fn(s, arg);
    }
  for (hak_slab_t *s = h->full, *next; s != NULL; s = next) {
    next = s->next;
    if (s->cls == cls) fn(s, arg);
  }
}
