/* The malloc slow path: a class whose current slab has no free block
 * refills it (remote frees, more carving), moves to the next slab with room,
 * or takes a new slab's pages -- from the heap's own segments, the pool, an
 * exited thread's slabs, a larger class's holes (lending) or a new segment.
 * Also the entry for every request the fast path does not serve. */
#include "internal.h"
#include "slab.h"
#include <errno.h>

hak_warm static hak_slab_t* slab_new(hak_heap_t* h, size_t cls, pages_from_t from) {
  if (from == PAGES_NEW) {
    /* compaction first, paced in mesh.c and scavenge.c (one or the other) */
    if (hak_opt(MESH)) _hak_mesh_pass(h, false);
    else _hak_scavenge_pass(h, false);
  }
  size_t idx;
  bool zero;
  hak_segment_t* seg = _hak_pool_take(h, cls, from, &idx, &zero);
  if (seg == NULL) return NULL;
  _hak_slab_init(h, seg, idx, cls);
  if (HAK_SECURE) hak_slab_at(seg, idx)->sec_zero = zero;
  return hak_slab_at(seg, idx);
}

/* A block of a slightly larger class (up to half again the size) from a
 * slab of this heap with room, for a class that would otherwise take new
 * pages: after scattered frees, memory freed in one size serves the next
 * sizes (a cache refilled with values of other sizes, a parser's next
 * document) instead of sitting in sparse slabs while new ones are faulted
 * in -- the reuse across sizes that coalescing gives glibc, without moving
 * anything.  The block stays its slab's (free, usable size and the secure
 * trailer go by the slab's class); the class asking keeps no slab of its
 * own, so each such malloc comes here, until the holes run out and a slab
 * of its own is made.  Only slabs carved to the end (their free blocks are
 * holes left by frees: a growing heap's young slabs keep their room for
 * their own class) and at most 7/8 used (a nearly full slab has too few
 * holes to be worth the slow path) lend, and the scan resumes where
 * the last loan was found (h->lend.slab[cls], trusted only while it is still
 * this heap's slab with room). */
#define BORROW_SCAN 8   /* slabs looked at per larger class and malloc */
hak_inline bool borrow_ok(const hak_heap_t* h, const hak_slab_t* t) {
  return t->free != NULL && hak_load_relaxed(&t->xowner) == (uintptr_t)h &&
         hak_slab_bump(t, t->carved) >= hak_slab_limit(t) &&   /* holes left by frees, not fresh room */
         (size_t)t->used * t->bsize * 8 <= ((size_t)t->npages << HAK_PAGE_SHIFT) * 7;
}
#define BORROW_CHECK 64   /* loans between two checks that the class grows into the holes */
static void* heap_borrow(hak_heap_t* h, size_t cls, size_t req) {
  uint32_t want = _hak_class_size[cls];
  hak_slab_t* t = h->lend.slab[cls];
  if (t != NULL && t->cls > cls && _hak_class_size[t->cls] <= want + want / 2 && borrow_ok(h, t)) {
    /* Lending is for a class that grows into holes.  A class whose blocks
     * come back as fast as they are lent (a steady malloc/free cycle) would
     * take the refill path for every malloc, forever (3.3x the time of a
     * malloc/free pair): when the slab's used count did not grow by half
     * the loans since the last check, the class gets a slab of its own
     * (the caller makes one when this returns NULL), whose fast path then
     * serves the cycle. */
    if (++h->lend.n[cls] >= BORROW_CHECK) {
      if ((int64_t)t->used - (int64_t)h->lend.used[cls] < BORROW_CHECK / 2) {
        h->lend.slab[cls] = NULL;
        return NULL;
      }
      h->lend.n[cls] = 0;
      h->lend.used[cls] = t->used;
    }
    goto lend;
  }
  for (size_t c2 = cls + 1; c2 < HAK_NCLASSES && _hak_class_size[c2] <= want + want / 2; c2++) {
    /* from the last loan's slab on when it is of this class, else from the head */
    t = h->lend.slab[cls] != NULL && h->lend.slab[cls]->cls == c2 && hak_load_relaxed(&h->lend.slab[cls]->xowner) == (uintptr_t)h
            ? h->lend.slab[cls]->next : h->cls[c2].cur;
    if (t == NULL) t = h->cls[c2].cur;
    for (int k = 0; k < BORROW_SCAN && t != NULL && t != &_hak_slab_empty; k++, t = t->next)
      if (borrow_ok(h, t)) goto lend;
  }
  h->lend.slab[cls] = NULL;
  return NULL;
lend:
  if (h->lend.slab[cls] != t) {   /* a new lender: count from here */
    h->lend.slab[cls] = t;
    h->lend.n[cls] = 0;
    h->lend.used[cls] = t->used;
  }
  atomic_fetch_add_explicit(&_hak_stat_borrowed, 1, memory_order_relaxed);
  return hak_slab_pop(&h->cls[t->cls], t, t->free, req);
}

/* The refill path's periodic work: near the memory limit, this heap's empty
 * slabs (the one kept per class included) and the free pages inside its
 * sparse slabs go back (only the owner may touch them); every 64th refill,
 * remote frees elsewhere and the release clock.  The class's current slab. */
hak_warm static hak_slab_t* heap_refill_tick(hak_heap_t* h, size_t cls) {
  if (hak_unlikely(h->limit.epoch != hak_load_relaxed(&_hak_limit_epoch))) {
    h->limit.epoch = hak_load_relaxed(&_hak_limit_epoch);
    _hak_collect_heap(h);
  }
  hak_slab_t* s = h->cls[cls].cur;
  if (s->free == NULL) {
    hak_counter_inc(&h->refills);
    if ((h->refills & 63) == 0) {
      if (hak_load_relaxed(&h->xremote_hint)) _hak_heap_collect_remote(h);
      _hak_heap_release_tick(h);
      _hak_pool_abandoned_tick(false);
      s = h->cls[cls].cur;
    }
  }
  return s;
}

/* No slab of the class has room: a new slab's pages, from the heap's own
 * segments, an exited thread's slabs, any resident free run, a hole of a
 * larger class, any free run, idle heaps' emptied slabs, new memory -- in
 * that order.  The new slab (on no list yet); &_hak_slab_empty after an
 * adoption (the class list may have room now); NULL with *lent set to a
 * block a larger class lent; NULL and errno ENOMEM when all failed. */
hak_warm static hak_slab_t* heap_slab_new(hak_heap_t* h, size_t cls, size_t req, bool any_class, void** lent) {
  /* (a heap that found no resident free page skips the pool's walk until
   * some heap gives pages back: a run of loans comes here per malloc) */
  if (_hak_class_size[cls] >= HAK_EXACT_MIN) _hak_heap_exact_trim(h, cls);
  /* an abandoned slab of the class with room (an exited or a sleeping
   * thread's: park.c looks for sleeping ones first) before any page */
  _hak_park_pass(true);
  hak_slab_t* ad = _hak_pool_adopt_slab(h, cls);
  if (ad != NULL) {
    _hak_heap_adopt_slab(h, ad);
    return &_hak_slab_empty;
  }
  uint64_t gives = hak_load_relaxed(&_hak_pool_gives) + 1;
  hak_slab_t* s = h->no_resident == gives ? NULL : slab_new(h, cls, PAGES_OWN);
  if (s != NULL) return s;
  /* A heap that has slabs leaves the last abandoned segment to a thread
   * that has none (the successor of the thread that left it), unless the
   * pool has no room at all: else the newcomer takes new pages while this
   * heap sits on the adopted slabs' free room.  Adopting comes before other
   * heaps' resident pages: an exited thread's slabs have room, and left
   * alone they only drain. */
  bool has_segs = h->members != NULL;
  hak_pset_t abmask;
  hak_segment_t* ab = _hak_pool_adopt(h, has_segs ? 1 : 0, &abmask);
  if (ab == NULL && h->no_resident != gives) {
    s = slab_new(h, cls, PAGES_RESIDENT);
    if (s == NULL && _hak_class_pages[cls] == 1) h->no_resident = gives;   /* (a longer run may just not fit) */
  }
  if (ab == NULL && s == NULL) {
    if (any_class && hak_opt(LEND)) {   /* before new pages: a sparse slab of a larger class */
      *lent = heap_borrow(h, cls, req);
      if (*lent != NULL) return NULL;
    }
    _hak_heap_release_tick(h);
    size_t bytes = (size_t)_hak_class_pages[cls] << HAK_PAGE_SHIFT;
    _hak_limit_grow(bytes);
    _hak_bigcache_yield(bytes);   /* one reserve (bigcache.c) */
    s = slab_new(h, cls, PAGES_ANY);
    if (s == NULL && has_segs) ab = _hak_pool_adopt(h, 0, &abmask);
  }
  if (ab != NULL) {
    _hak_heap_adopt(h, ab, &abmask);
    return &_hak_slab_empty;
  }
  /* before the process grows: idle threads' emptied slabs (heap.c), and the
   * pool once more when they gave some back */
  if (s == NULL && hak_opt(DECOMMIT) != HAK_DECOMMIT_OFF &&
      _hak_heaps_idle_tick(_hak_clock_ms(), (uint64_t)hak_opt(DECOMMIT_DELAY_MS)) != 0)
    s = slab_new(h, cls, PAGES_ANY);
  if (s == NULL) s = slab_new(h, cls, PAGES_NEW);
  if (s == NULL) errno = ENOMEM;
  return s;
}

hak_warm static hak_noinline void* heap_alloc_class(hak_heap_t* h, size_t cls, size_t req, bool any_class) {
  hak_slab_t* s = heap_refill_tick(h, cls);
  for (;;) {
    if (s != &_hak_slab_empty) {
      if (_hak_slab_refill(s)) break;
      _hak_slab_mark_full(h, s);
      s = h->cls[cls].cur;
      continue;
    }
    if (hak_load_relaxed(&h->xremote_hint)) {
      _hak_heap_collect_remote(h);
      s = h->cls[cls].cur;
      if (s != &_hak_slab_empty) continue;
    }
    void* lent = NULL;
    s = heap_slab_new(h, cls, req, any_class, &lent);
    if (s == NULL) return lent;   /* (NULL: ENOMEM) */
    if (s == &_hak_slab_empty) {   /* adopted: the class list again */
      s = h->cls[cls].cur;
      continue;
    }
    hak_avail_push(h, s);
  }
  return hak_slab_pop(&h->cls[cls], s, s->free, req);
}

/* Smallest class whose blocks are all `align`-aligned (slabs start on 64 KiB
 * boundaries, so a block size that is a multiple of align suffices). */
static size_t aligned_class(size_t size, size_t align) {
  if (size > HAK_MEDIUM_MAX || align > HAK_PAGE_SIZE) return HAK_NCLASSES;
  for (size_t c = hak_class_of(size); c < HAK_NCLASSES; c++)
    if ((_hak_class_size[c] & (align - 1)) == 0) return c;
  return HAK_NCLASSES;
}

/* The countdown ran out on a class allocation (sample.c): the block from
 * what is due (a guarded block, guard.c; a heap-profile sample, prof.c), or
 * NULL: allocated as usual. */
hak_warm static void* sampled(hak_heap_t* h, size_t cls, size_t size, size_t align, uintptr_t site) {
  unsigned due = _hak_sample_due(h, size);
  void* p = NULL;
  if (due & HAK_SAMPLE_GUARD) {
    if (size != 0 && size <= HAK_OS_PAGE && align <= 16) p = _hak_guard_alloc(size, site);
    else _hak_sample_defer_guard(h);
  }
  if (p == NULL && (due & HAK_SAMPLE_PROF)) p = _hak_prof_sample_class(cls, size, align <= 16, site);
  if (p != NULL) hak_counter_inc(&h->cls[cls].nmalloc);   /* (a malloc of the class, served elsewhere) */
  return p;
}

hak_warm void* _hak_malloc_generic(hak_heap_t* h, size_t size, size_t align, uintptr_t site) {
  if (hak_unlikely(h == &_hak_heap_empty)) {
    h = _hak_thread_init();
    if (h == NULL) {
      errno = ENOMEM;
      return NULL;
    }
  }
  if (hak_unlikely(size > HAK_MAX_SIZE)) {
    errno = ENOMEM;
    return NULL;
  }
  _hak_secure_large_recent();   /* secure: the large block freed last is still fill */
  _hak_background_start();
  size_t cls, need = size + HAK_TRAILER;
  if (align <= 16) {
    if (need > HAK_MEDIUM_MAX || (HAK_SECURE && size >= _hak_secure_guard_min)) return _hak_large_alloc(size, 16, false, site);
    cls = hak_class_of(need);
    if (HAK_SECURE && cls == 0) cls = 1;   /* no 16-byte class (internal.h) */
  } else {
    cls = aligned_class(need, align);
    if (cls == HAK_NCLASSES) return _hak_large_alloc(size, align, false, site);
  }
  hak_heap_enter(h);
  void* p = NULL;
  /* the sampling point (sample.c), counted here for the mallocs the fast
   * path did not serve */
  if (hak_unlikely((h->sample_left -= (int64_t)size) < 0)) p = sampled(h, cls, size, align, site);
  if (p == NULL) p = heap_alloc_class(h, cls, size, align <= 16);
  hak_heap_leave(h);
  return p;
}

/* The fast path's countdown ran out (alloc.h): what is due is done
 * (sample.c), then the allocation as the generic path makes it, without
 * counting it again. */
hak_warm void* _hak_malloc_due(size_t size, hak_heap_t* h, hak_heap_cls_t* e, uintptr_t site) {
  size_t cls = (size_t)(e - h->cls);
  hak_heap_enter(h);
  void* p = sampled(h, cls, size, 16, site);
  if (p == NULL) p = heap_alloc_class(h, cls, size, true);
  hak_heap_leave(h);
  return p;
}
