/* The malloc and free fast paths, inline (layer 6, with alloc.c): the
 * public entry points of alloc.c and the overrides of override.c are built
 * on them.  A fast path touches only the thread's heap and the block's slab;
 * every miss goes out of line to refill.c and free.c. */
#ifndef HAK_ALLOC_H
#define HAK_ALLOC_H
#include "internal.h"
#include "slab.h"
#include <errno.h>

void _hak_free_secure(void* p, const char* op);   /* secure build: quarantine, then free (alloc.c) */

/* ---------------------------------------------------------------- fast paths */
hak_inline void* hak_malloc_inline(size_t n) {
  hak_heap_t* h = hak_heap_get();
  size_t need = n + HAK_TRAILER;
  hak_heap_cls_t* e;
  /* secure: the block freed last is still fill (a miss is reported by a
   * tail call: no frame on the fast path for it) */
  if (HAK_SECURE && hak_unlikely(hak_secure_malloc_bad())) return _hak_secure_last_failed();
  /* secure: malloc(0) gets an inaccessible block (zeroblock.c) */
  if (HAK_SECURE && hak_unlikely(n == 0)) return _hak_zero_alloc();
  if (hak_likely(n <= HAK_SMALL_FAST_MAX - HAK_TRAILER)) e = h->direct[(need + 15) >> 4];
  /* secure, HAKMEM_SECURE_GUARD_MEDIUM: blocks from that size up take the
   * generic path, which maps them like large blocks (ending at a guard page) */
  else if (need <= HAK_MEDIUM_MAX && need > n && (!HAK_SECURE || n < _hak_secure_guard_min)) e = &h->cls[hak_class_of(need)];
  else return _hak_malloc_generic(h, n, 0, (uintptr_t)__builtin_return_address(0));
  hak_slab_t* s = e->cur;
  hak_block_t* b = s->free;
  if (hak_likely(b != NULL)) {
    /* the sampling point (sample.c): one subtraction and a branch; the
     * empty heap never gets here (its slab has no block) */
    if (hak_likely((h->sample_left -= (int64_t)n) >= 0)) return hak_slab_pop(e, s, b, n);
    return _hak_malloc_due(n, h, e, (uintptr_t)__builtin_return_address(0));
  }
  return _hak_malloc_generic(h, n, 0, (uintptr_t)__builtin_return_address(0));
}

/* The descriptor of p's window (p in the segment map): segment base +
 * slabs offset + window index * 64, in one and-shift-or chain (the window
 * index sits in bits 16..21 of p), and p's offset in the window.  It is
 * p's slab when that slab's head page starts the window and the slab spans
 * it; a window inside a longer slab, or an odd slab's (page-exact ones),
 * keeps HAK_OWNER_UNUSED (its frees take the page map, out of line), as a
 * large segment's header does. */
hak_inline hak_slab_t* hak_page_slab(const void* p, uint64_t* off) {
  _Static_assert(sizeof(hak_slab_t) == 64 && HAK_WINDOW_SHIFT == 16, "descriptor arithmetic");
  *off = (uintptr_t)p & (((uintptr_t)1 << HAK_WINDOW_SHIFT) - 1);
  return (hak_slab_t*)((((uintptr_t)p & ~(uintptr_t)HAK_SEG_MASK) + offsetof(hak_segment_t, slabs)) +
                       (((uintptr_t)p >> (HAK_WINDOW_SHIFT - 6)) & ((HAK_SEG_WINDOWS - 1) << 6)));
}

/* One test for the common case: the block's slab is owned by this thread's
 * heap and not full.  The block must also be an already carved block start
 * (one multiply and compare) and not carry the free cookie (secure build: its
 * trailer must say it comes from the quarantine, secure.h). */
hak_inline void hak_free_block(void* p, const char* op) {
  if (hak_likely(hak_segmap_contains(p))) {
    hak_heap_t* h = hak_heap_get();
    uint64_t off;
    hak_slab_t* s = hak_page_slab(p, &off);
    uintptr_t xo = hak_load_relaxed(&s->xowner);
    if (hak_likely(xo == (uintptr_t)h)) {
      hak_block_t* b = (hak_block_t*)p;
      if (hak_likely(hak_is_carved_block(s, off, s->carved) &&
                     (HAK_SECURE ? hak_secure_free_ok(s, b) : b->cookie != hak_cookie()))) {
        if (HAK_SECURE) hak_secure_free_fill(s, b);
        hak_block_set_next(b, s->free);
        if (!HAK_SECURE) b->cookie = hak_cookie();
        s->free = b;
        if (hak_likely(hak_used_add(s, -1) != 0)) return;
        _hak_slab_emptied(h, s);
        return;
      }
    } else if (xo == ((uintptr_t)h | HAK_OWNER_FULL)) {
      /* our own full slab, or another thread's (or an exited thread's)
       * slab: out of line, but without the generic path's lookups */
      _hak_free_to_full(h, s, p, op);
      return;
    } else if (xo != HAK_OWNER_UNUSED) {
      _hak_free_remote(s, p, op);
      return;
    }
  }
  _hak_free_generic(p, op);
}

/* free: the secure build checks and quarantines a small block, and frees
 * the block that leaves the quarantine (quarantine.c). */
hak_inline void hak_free_inline(void* p, const char* op) {
  if (HAK_SECURE) {
    _hak_free_secure(p, op);
    return;
  }
  hak_free_block(p, op);
}

#if HAK_SECURE
/* The request of a live small block of the secure build (its trailer). */
static inline bool hak_secure_request(const hak_ptr_t* r, const void* p, size_t* req) {
  hak_slab_t* s = r->slab;
  if (s == NULL || !hak_slab_carved(s, p)) return false;
  return _hak_secure_state(s, p, req) == HAK_SEC_LIVE;
}
#else
hak_inline bool hak_secure_request(const hak_ptr_t* r, const void* p, size_t* req) { (void)r, (void)p, (void)req; return false; }
#endif
hak_inline void hak_sized_check(const void* p, size_t n, bool exact, const char* op) {
  hak_ptr_t r;
  uint32_t kind = p == NULL ? 0 : hak_ptr_classify(p, &r);
  size_t usable;
  if (kind == HAK_SEG_LARGE) {
    if (!hak_large_live_at(r.seg, p)) return;   /* free reports */
    usable = hak_large_usable(r.seg);
    /* a heap-profile sample of a small request (prof.c): a C++ sized delete
     * names a size of its class (large.size), not of its page */
    if (exact && r.seg->prof && r.seg->large.size <= HAK_MEDIUM_MAX) usable = r.seg->large.size;
  } else if (kind == HAK_SEG_SMALL && r.slab != NULL) {
    usable = r.slab->bsize - HAK_TRAILER;
  } else if ((kind == HAK_SEG_SAMPLED || kind == HAK_SEG_GUARD) && (usable = _hak_slot_usable(kind, r.seg, p)) != 0) {
    /* a heap-profile sample in a page slot (a block of its class), a
     * guarded block (its request) */
  } else {
    return;   /* free reports */
  }
  if (HAK_SECURE && exact) {
    /* secure: the block knows its request (the trailer, the large header):
     * a C++ sized delete must name exactly that */
    size_t req = usable;
    if (kind == HAK_SEG_LARGE) req = r.seg->large.size;
    else if (!hak_secure_request(&r, p, &req)) return;   /* not a live block: free reports */
    if (n != req) _hak_size_mismatch(op, p, n, req);
    return;
  }
  if (n > usable || (exact && usable > 32 && n < usable / 2 - 16))
    _hak_size_mismatch(op, p, n, usable);
}
hak_inline void* hak_aligned_inline(size_t align, size_t n) {
  if (align <= 16) return hak_malloc_inline(n);
  if (n > HAK_MAX_SIZE) {
    errno = ENOMEM;
    return NULL;
  }
  return _hak_malloc_generic(hak_heap_get(), n, align, (uintptr_t)__builtin_return_address(0));
}

/* glibc 2.36 memalign semantics: alignment rounded up to a power of two,
 * EINVAL only when no such power exists. */
hak_inline void* hak_memalign_inline(size_t align, size_t n) {
  if (align > SIZE_MAX / 2 + 1) {
    errno = EINVAL;
    return NULL;
  }
  if (align & (align - 1)) align = (size_t)1 << (64 - __builtin_clzl(align));
  return hak_aligned_inline(align, n);
}
#endif /* HAK_ALLOC_H */
