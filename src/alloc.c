/* The public entry points (hak_*): the inline malloc and free fast paths and
 * the calls built on them.  A fast path touches only the thread's heap and
 * the block's slab; every miss goes to the out-of-line paths in refill.c and free.c. */
#include "internal.h"
#include "slab.h"
#include "alloc.h"
#include <errno.h>
#include <unistd.h>

#if HAK_SECURE
/* The secure build's free, out of line: one lookup of a small block's slab
 * (the head slab of a multi-page one) for the checks and fill of the
 * quarantine's entry, then the ordinary free of the block that leaves the
 * quarantine (its slab's owner may have changed since: a thread exited). */
void _hak_free_secure(void* p, const char* op) {
  hak_ptr_t r;
  if (hak_likely(hak_ptr_classify(p, &r) == HAK_SEG_SMALL)) {
    hak_slab_t* s = r.slab;
    if (s != NULL && hak_slab_carved(s, p)) {
      size_t off = (uintptr_t)p - (uintptr_t)hak_slab_start(s);
      void* b = _hak_secure_quarantine(s, p, off, op);
      if (b != NULL) hak_free_block(b, op);
      return;
    }
  }
  hak_free_block(p, op);   /* large and zero-size blocks; what is no block start, reported */
}

/* Free every block this thread's quarantine holds (thread exit, collect). */
void _hak_secure_flush(bool dying) {
  void* b;
  while ((b = _hak_secure_quarantine_pop(dying)) != NULL) hak_free_block(b, "free");
}
#endif

/* The common case as cheap as free's: a live block of a slab, with the same
 * checks (carved block start, no free cookie); everything else, and the
 * secure build (its trailer holds the requested size), out of line. */
hak_inline size_t small_usable(const void* p) {   /* 0: not the common case */
  if (!HAK_SECURE && hak_likely(hak_segmap_contains(p))) {
    uint64_t off;
    const hak_slab_t* s = hak_page_slab(p, &off);
    uintptr_t xo = hak_load_relaxed(&s->xowner);
    if (hak_likely(xo != HAK_OWNER_UNUSED &&
                   hak_is_carved_block(s, off, __atomic_load_n(&s->carved, __ATOMIC_RELAXED)) &&
                   ((const hak_block_t*)p)->cookie != hak_cookie()))
      return s->bsize;
  }
  return 0;
}

/* ---------------------------------------------------------------- API */
hak_warm hak_entry_aligned hak_api void* hak_malloc(size_t n) { return hak_malloc_inline(n); }
hak_warm hak_entry_aligned hak_api void hak_free(void* p) { hak_free_inline(p, "free"); }
/* Sized free: the size must be one the block could have been allocated (or
 * realloc'ed in place) with: at most its usable size and, when `exact`, at
 * least half of it (the class spacing and realloc's in-place rule put every
 * legitimate size there).  `exact` is for C++ sized delete, whose memory
 * comes from plain operator new; C's free_sized is only checked from above,
 * since programs also hand it memory from the aligned calls. */
hak_api void hak_free_sized(void* p, size_t n) {
  hak_sized_check(p, n, false, "free_sized");
  hak_free_inline(p, "free_sized");
}
hak_api void hak_free_aligned_sized(void* p, size_t align, size_t n) {
  (void)align;
  hak_sized_check(p, n, false, "free_aligned_sized");
  hak_free_inline(p, "free_aligned_sized");
}

hak_warm hak_api void* hak_calloc(size_t count, size_t size) {
  size_t total;
  if (hak_unlikely(__builtin_mul_overflow(count, size, &total))) {
    errno = ENOMEM;
    return NULL;
  }
  if (total > HAK_MEDIUM_MAX) {
    if (hak_heap_get() == &_hak_heap_empty && _hak_thread_init() == NULL) {
      errno = ENOMEM;
      return NULL;
    }
    if (total > HAK_MAX_SIZE) {
      errno = ENOMEM;
      return NULL;
    }
    return _hak_large_alloc(total, 16, true, (uintptr_t)__builtin_return_address(0));
  }
  void* p = hak_malloc_inline(total);
  if (hak_likely(p != NULL)) memset(p, 0, total);
  return p;
}

/* The block moves: a new one, the bytes both hold, the old one freed (the
 * one realloc by copy, for every tier). */
hak_warm static hak_noinline void* realloc_move(void* p, size_t n, size_t usable) {
  void* q = hak_malloc_inline(n);
  if (q == NULL) return NULL;
  memcpy(q, p, n < usable ? n : usable);
  hak_free_inline(p, "realloc");
  return q;
}

/* Everything but a live small block and a nonzero size: NULL, free-like
 * zero, too large, large blocks, misuse, the secure build. */
hak_warm static hak_noinline void* realloc_slow(void* p, size_t n) {
  if (p == NULL) return hak_malloc_inline(n);
  if (n == 0) {   /* glibc: free and return NULL */
    hak_free_inline(p, "realloc");
    return NULL;
  }
  if (hak_unlikely(n > HAK_MAX_SIZE)) {
    (void)_hak_usable_size(p, "realloc");   /* still report a bad pointer */
    errno = ENOMEM;
    return NULL;
  }
  hak_ptr_t r;
  hak_segment_t* seg = NULL;
  if (hak_ptr_classify(p, &r) == HAK_SEG_LARGE && hak_large_live_at(r.seg, p)) seg = r.seg;
  else (void)_hak_huge_aligned_lookup(p, &seg);   /* resized as large blocks are, not by the half rule */
  if (seg != NULL) {
    size_t usable = hak_large_usable(seg);
    void* q = _hak_large_realloc(seg, p, n);   /* NULL: it moves by copy, here */
    return q != NULL ? q : realloc_move(p, n, usable);
  }
  size_t usable = _hak_usable_size(p, "realloc");
  /* invalid pointer, reported (warn/ignore mode); secure: usable is the
   * requested size, 0 for a live malloc(0) block */
  if (usable == 0 && !(HAK_SECURE && _hak_is_live_block(p))) return NULL;
  if (!HAK_SECURE && n <= usable && n >= usable / 2) return p;   /* secure: always move (fresh trailer) */
  return realloc_move(p, n, usable);
}

/* In place when the new size keeps the block at least half used (a string
 * growing within its class, or shrinking a little): no register saved, no
 * call.  A size above HAK_MAX_SIZE moves, and malloc fails it with ENOMEM. */
hak_warm hak_api void* hak_realloc(void* p, size_t n) {
  size_t usable = small_usable(p);   /* 0 for NULL */
  if (hak_likely(usable != 0 && n != 0)) {
    if (n <= usable && n >= usable / 2) return p;
    return realloc_move(p, n, usable);
  }
  return realloc_slow(p, n);
}

hak_api void* hak_reallocarray(void* p, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return hak_realloc(p, total);
}

hak_warm hak_api void* hak_memalign(size_t align, size_t n) { return hak_memalign_inline(align, n); }
hak_warm hak_api void* hak_aligned_alloc(size_t align, size_t n) { return hak_memalign_inline(align, n); }

hak_warm hak_api int hak_posix_memalign(void** out, size_t align, size_t n) {
  if (align == 0 || (align & (align - 1)) || (align % sizeof(void*)) != 0) return EINVAL;
  int saved = errno;
  void* p = hak_aligned_inline(align, n);
  if (p == NULL) {
    errno = saved;
    return ENOMEM;
  }
  *out = p;
  return 0;
}

hak_api void* hak_valloc(size_t n) { return hak_aligned_inline(_hak_os_page_size(), n); }

hak_api void* hak_pvalloc(size_t n) {
  size_t ps = _hak_os_page_size();
  size_t r;
  if (__builtin_add_overflow(n, ps - 1, &r)) {
    errno = ENOMEM;
    return NULL;
  }
  r &= ~(ps - 1);
  return hak_aligned_inline(ps, r ? r : ps);
}

hak_warm hak_api size_t hak_malloc_usable_size(const void* p) {
  size_t n = small_usable(p);
  return hak_likely(n != 0) ? n : _hak_usable_size(p, "malloc_usable_size");
}

hak_api int hak_owns(const void* p) { return _hak_is_live_block(p); }

/* Give back every cached and empty page now: the BigCache and the release
 * batch, this thread's empty slabs and free pages (after adopting abandoned
 * segments), and the cached SuperSlabs. */
hak_api void hak_collect(void) {
  _hak_secure_flush(false);   /* secure: the quarantines too */
  _hak_secure_large_flush();
  _hak_bigcache_expire(0);
  _hak_batch_flush();
  _hak_collect_heap(hak_heap_get());
  _hak_segment_cache_trim(0);
}

hak_api int hak_malloc_trim(size_t pad) {
  (void)pad;
  hak_os_stats_t before, after;
  hak_os_stats(&before);
  hak_collect();
  hak_os_stats(&after);
  return after.munmap_bytes + after.madvise_bytes > before.munmap_bytes + before.madvise_bytes;
}

hak_api const char* hak_version(void) { return HAKMEM_VERSION; }
