/* Large blocks (above HAK_MEDIUM_MAX): one mmap-backed segment each, header
 * in the first page and the block at HAK_LARGE_HDR (or at its alignment), so
 * free() finds the header by the same mask as for slabs.  realloc grows in
 * place with mremap or moves the pages (no copy) to a new aligned range.
 * Alignments above HAK_MAX_ALIGN_SEG cannot sit inside the first 4 MiB of a
 * segment: those few blocks are found through a small locked table. */
#include "internal.h"
#include "slab.h"
#include <errno.h>
#include <sys/mman.h>

_Atomic(uint64_t) _hak_stat_large_allocs, _hak_stat_large_frees;
_Atomic(uint64_t) _hak_stat_large_bytes, _hak_stat_large_peak_bytes;
/* usable bytes of the live blocks (what malloc_usable_size says): the
 * mappings above count headroom for growth, up to twice the block */
_Atomic(uint64_t) _hak_stat_large_usable;

/* Recently freed large block addresses: a double free of a large block,
 * whose mapping is gone, is still named as such (best effort). */
#define RECENT_N 64
static _Atomic(uintptr_t) recent_freed[RECENT_N];
static _Atomic(unsigned) recent_pos;

static void large_account(size_t add, size_t sub) {
  uint64_t now = atomic_fetch_add_explicit(&_hak_stat_large_bytes, add - sub, memory_order_relaxed) + add - sub;
  uint64_t peak = hak_load_relaxed(&_hak_stat_large_peak_bytes);
  while (now > peak && !atomic_compare_exchange_weak_explicit(&_hak_stat_large_peak_bytes, &peak, now,
                                                              memory_order_relaxed, memory_order_relaxed)) {
  }
}
static void large_usable(size_t add, size_t sub) {
  atomic_fetch_add_explicit(&_hak_stat_large_usable, add - sub, memory_order_relaxed);
}

/* ---------------------------------------------------------------- huge alignment table */
#define HUGE_N 256
static pthread_mutex_t huge_lock = PTHREAD_MUTEX_INITIALIZER;
hak_bss_apart static struct { uintptr_t p; hak_segment_t* seg; } huge_tab[HUGE_N];
static _Atomic(size_t) huge_count;

bool _hak_huge_aligned_lookup(const void* p, hak_segment_t** seg_out) {
  if (hak_load_relaxed(&huge_count) == 0) return false;
  bool found = false;
  hak_lock(&huge_lock);
  for (size_t i = 0; i < HUGE_N; i++)
    if (huge_tab[i].p == (uintptr_t)p) {
      *seg_out = huge_tab[i].seg;
      found = true;
      break;
    }
  hak_unlock(&huge_lock);
  return found;
}

static void* huge_aligned_alloc(size_t size, size_t align) {
  size_t map;
  if (__builtin_add_overflow(align, hak_align_up(size ? size : 1, HAK_OS_PAGE), &map)) {
    errno = ENOMEM;
    return NULL;
  }
  _hak_os_reserve = true;
  hak_segment_t* seg = _hak_os_map_aligned(map, align, NULL);
  _hak_os_reserve = false;
  if (seg == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  seg->kind = HAK_SEG_LARGE;
  seg->dirty_pages = 0;
  seg->map_size = map;
  seg->large_off = align;
  seg->large_size = size;
  seg->large_fresh = 1;
  seg->used_pages = 1;
  seg->huge_aligned = 1;   /* in the huge table, not in the segment map */
  uintptr_t p = (uintptr_t)seg + align;
  bool ok = false;
  hak_lock(&huge_lock);
  for (size_t i = 0; i < HUGE_N; i++)
    if (huge_tab[i].p == 0) {
      huge_tab[i].p = p;
      huge_tab[i].seg = seg;
      atomic_fetch_add_explicit(&huge_count, 1, memory_order_relaxed);
      ok = true;
      break;
    }
  hak_unlock(&huge_lock);
  if (!ok) {
    _hak_os_unmap(seg, map);
    errno = ENOMEM;
    return NULL;
  }
  /* counted as every large block is (its free subtracts the same) */
  atomic_fetch_add_explicit(&_hak_stat_large_allocs, 1, memory_order_relaxed);
  large_account(map, 0);
  large_usable(hak_large_usable(seg), 0);
  return (void*)p;
}

static void huge_remove(uintptr_t p) {
  hak_lock(&huge_lock);
  for (size_t i = 0; i < HUGE_N; i++)
    if (huge_tab[i].p == p) {
      huge_tab[i].p = 0;
      huge_tab[i].seg = NULL;
      atomic_fetch_sub_explicit(&huge_count, 1, memory_order_relaxed);
      break;
    }
  hak_unlock(&huge_lock);
}

/* ---------------------------------------------------------------- alloc / free */
/* Call-site tracking is on with learning, a forced strategy, or statistics. */
static bool sites_on(void) { return hak_opt(LEARN) || hak_opt(LEARN_FORCE) || hak_opt(STATS); }

/* Fault the pages of a new block in one call (site strategy "prefault"). */
static void prefault(hak_segment_t* seg, void* p, size_t size) {
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
  uint8_t* a = (uint8_t*)hak_align_up((uintptr_t)p, HAK_OS_PAGE);
  size_t n = hak_align_up(size, HAK_OS_PAGE);
  if (!_hak_os_advise(a, n, MADV_POPULATE_WRITE))
    for (size_t i = 0; i < n; i += HAK_OS_PAGE) ((volatile uint8_t*)a)[i] = 0;
  seg->prefaulted = 1;
}

/* Grow a large segment's mapping to at least new_map bytes, keeping its
 * pages (no copy): in place when the following range is free (to the
 * headroom of its class, else exactly), else by moving the pages to a fresh
 * aligned range.  Returns the segment (moved or not) or NULL, when it is
 * unchanged.  The caller accounts the bytes. */
static hak_segment_t* large_grow_map(hak_segment_t* seg, size_t new_map) {
  if (seg->pieced) return NULL;
  _hak_limit_grow(new_map - seg->map_size);
  size_t grown = seg->thp ? new_map : _hak_bigcache_map_size(new_map);   /* advised: exactly (thp.c) */
  if (_hak_os_remap(seg, seg->map_size, grown, 0, NULL) != NULL ||
      (grown != new_map && _hak_os_remap(seg, seg->map_size, grown = new_map, 0, NULL) != NULL)) {
    seg->map_size = grown;
    return seg;
  }
  hak_segment_t* nseg = _hak_os_map_aligned(new_map, HAK_SEG_SIZE, NULL);
  if (nseg == NULL || ((uintptr_t)nseg >> 47)) {
    if (nseg) _hak_os_unmap(nseg, new_map);
    return NULL;
  }
  /* Out of the segment map before its range is given up: once it is, another
   * thread may map a segment there and set the bit, which a clear after the
   * call would then take from it (its blocks "not allocated by hakmem"). */
  _hak_segmap_set(seg, false);
  if (_hak_os_remap(seg, seg->map_size, new_map, MREMAP_MAYMOVE | MREMAP_FIXED, nseg) != nseg) {
    _hak_segmap_set(seg, true);
    _hak_os_unmap(nseg, new_map);
    return NULL;
  }
  nseg->map_size = new_map;
  _hak_segmap_set(nseg, true);
  return nseg;
}

#define LARGE_TRIM_MIN ((size_t)64 << 10)

/* A large block: from the BigCache (resident pages, no syscall), else from
 * the release batch (decommitted but mapped), else a new mapping rounded up
 * to its BigCache class so it can be reused for any size of that class. */
hak_warm void* _hak_large_alloc(size_t size, size_t align, bool zero, uintptr_t site) {
  if (align > HAK_MAX_ALIGN_SEG) {
    void* p = huge_aligned_alloc(size, align);   /* fresh mapping: already zero */
    if (p) hak_segment_of((uint8_t*)p - align)->site = HAK_SITE_NONE;
    return p;
  }
  uint32_t sidx = HAK_SITE_NONE;
  int strategy = HAK_STRAT_CACHE;
  uint64_t t0 = 0;
  bool long_lived = false;
  size_t final_size = 0;
  if (sites_on()) {
    sidx = _hak_site_index(site);
    strategy = _hak_site_before_alloc(sidx, &t0, &long_lived, &final_size);
  }
  size_t off = align > HAK_LARGE_HDR ? align : HAK_LARGE_HDR;
  size_t need;
  if (__builtin_add_overflow(off, size ? size : 1, &need) || need > HAK_MAX_SIZE) {
    errno = ENOMEM;
    return NULL;
  }
  need = hak_align_up(need, HAK_OS_PAGE);
  bool guard = HAK_SECURE && off == HAK_LARGE_HDR;   /* secure: the block ends at a guard page */
  if (guard) need += HAK_OS_PAGE;
  hak_segment_t* seg = NULL;
  if (HAK_SECURE && off == HAK_LARGE_HDR) {
    seg = _hak_secure_large_take(need);
    if (seg != NULL) _hak_thp_held(seg, off + size);
  } else if (off == HAK_LARGE_HDR) {
    /* a site whose blocks grow by realloc: first a cached block that
     * covers what this one will grow to */
    if (final_size / 2 > size && final_size <= HAK_MAX_SIZE - HAK_LARGE_HDR) {
      seg = _hak_bigcache_take_cover(need, hak_align_up(off + final_size, HAK_OS_PAGE));
      if (seg == NULL) seg = _hak_bigcache_take(need);
    } else {
      seg = _hak_bigcache_take(need);
    }
    if (seg != NULL && seg->map_size < need) {   /* a smaller, mostly touched block: grow it */
      hak_segment_t* g = large_grow_map(seg, need);
      if (g == NULL) _hak_release_large(seg);
      seg = g;
    }
    if (seg == NULL) {
      seg = _hak_batch_take(need);
      /* a parked mapping is decommitted: its pages come back as it is used
       * (a fresh mapping is checked in _hak_segment_alloc) */
      if (seg != NULL) _hak_limit_grow(need);
    }
  }
  if (seg == NULL) {
    /* decided once: an advised block is mapped exactly (thp.c) */
    bool huge = _hak_thp_exact(off + size);
    size_t map = off == HAK_LARGE_HDR && !huge ? _hak_bigcache_map_size(need) : need;
    _hak_os_reserve = true;   /* user-sized: subject to the overcommit policy */
    seg = _hak_segment_alloc(map, off, HAK_SEG_LARGE, huge ? size : 0, 0);
    if (seg == NULL && map != need) seg = _hak_segment_alloc(need, off, HAK_SEG_LARGE, huge ? size : 0, 0);
    if (seg == NULL) {
      /* out of address space or memory: give back what is cached and retry once */
      _hak_bigcache_expire(0);
      _hak_batch_flush();
      seg = _hak_segment_alloc(need, off, HAK_SEG_LARGE, huge ? size : 0, 0);
      if (seg == NULL) {
        _hak_os_reserve = false;
        errno = ENOMEM;
        return NULL;
      }
    }
    _hak_os_reserve = false;
    seg->large_fresh = 1;
    seg->huge_aligned = 0;
    seg->pieced = 0;
    seg->large_peak = 0;
    seg->guard_off = 0;
  }
  seg->large_off = off;
  if (guard) {
    /* The block ends at the guard page, to its alignment (16, or the
     * caller's up to HAK_LARGE_HDR: memalign & co.).  A new mapping gets its
     * guard (and its headroom after it: a write far past the block faults
     * too) once; a held mapping (secure quarantine) keeps where it has it
     * and the block moves up to end there, or its accessible part grows to
     * the block's end (more rights: no other CPU's TLB to flush, which is
     * what an mprotect to PROT_NONE of used pages costs: docs/SECURITY.md). */
    size_t end = off + hak_align_up(size, HAK_OS_PAGE), a = align > 16 ? align : 16;
    if (seg->guard_off == 0)
      seg->guard_off = _hak_os_protect((uint8_t*)seg + end, seg->map_size - end, PROT_NONE) ? end : seg->map_size;
    else if (seg->guard_off < end && _hak_os_protect((uint8_t*)seg + seg->guard_off, end - seg->guard_off,
                                                     PROT_READ | PROT_WRITE))
      seg->guard_off = end;
    if (seg->guard_off > end && seg->guard_off - size >= HAK_SEG_SIZE &&
        _hak_os_protect((uint8_t*)seg + end, seg->guard_off - end, PROT_NONE))
      seg->guard_off = end;   /* (rare: the block must start in the first HAK_SEG_SIZE, where free finds it) */
    if (seg->guard_off >= end && seg->guard_off - size < HAK_SEG_SIZE)
      seg->large_off = (seg->guard_off - size) & ~(a - 1);   /* >= off: a divides off */
  } else {
    seg->guard_off = 0;
  }
  seg->large_size = size;
  seg->used_pages = 1;   /* live; 0 while cached or parked */
  _hak_secure_large_alloc(seg);
  if (long_lived && !seg->large_fresh && seg->large_peak > size + LARGE_TRIM_MIN) {
    /* a reused block's resident pages beyond the request would idle for the
     * long life of the block: decommit them */
    size_t from = hak_align_up(seg->large_off + size, HAK_OS_PAGE), to = hak_large_resident(seg);
    if (to > from && _hak_decommit((uint8_t*)seg + from, to - from)) seg->large_peak = from - HAK_LARGE_HDR;
  }
  size_t resident_before = seg->large_fresh ? 0 : hak_align_up(seg->large_peak, HAK_OS_PAGE);
  if (size > seg->large_peak) seg->large_peak = size;
  atomic_fetch_add_explicit(&_hak_stat_large_allocs, 1, memory_order_relaxed);
  large_account(seg->map_size, 0);
  large_usable(hak_large_usable(seg), 0);
  void* p = (uint8_t*)seg + seg->large_off;
  if (zero && !seg->large_fresh) memset(p, 0, size);
  seg->prefaulted = 0;
  if ((strategy == HAK_STRAT_PREFAULT || strategy == HAK_STRAT_POPULATE) && resident_before < size)
    prefault(seg, p, size);
  seg->large_fresh = 0;
  seg->site = sidx;
  if (sidx != HAK_SITE_NONE) _hak_site_after_alloc(sidx, seg, size, t0, resident_before);
  seg->prof = 0;
  if (hak_unlikely(hak_load_relaxed(&_hak_prof_on))) _hak_prof_large(seg, p, size, site);   /* sampled? (prof.c) */
  return p;
}

/* The block's usable size: its request rounded to whole pages (the mapping
 * may be larger: headroom for reuse, which the block does not own). */

hak_warm void _hak_large_free(hak_segment_t* seg, void* p, const char* op) {
  if (seg->used_pages != 1) {
    _hak_double_free(op, p, 0);
    return;
  }
  /* A heap-profile sample is no longer live.  A small block the profiler
   * served here has no reuse beyond the next sample: its pages go back at
   * once (below) rather than wait in the BigCache, where a small program's
   * freed samples held more than its slabs (espresso: 180 KiB).  (With
   * call-site records on, HAKMEM_STATS or HAKMEM_LEARN, the site's own
   * strategy decides, as for any large block.) */
  bool small_sample = false;
  if (hak_unlikely(seg->prof)) {
    seg->prof = 0;
    small_sample = hak_large_usable(seg) <= HAK_MEDIUM_MAX;
    _hak_prof_free(p);
  }
  _hak_secure_large_check(seg, op);
  seg->used_pages = 0;
  _hak_bigcache_unpin(seg, SIZE_MAX);
  if (seg->guard_off && !HAK_SECURE) {   /* (secure: the block is not reused) */
    _hak_os_protect((uint8_t*)seg + seg->guard_off, HAK_OS_PAGE, PROT_READ | PROT_WRITE);
    seg->guard_off = 0;
  }
  unsigned i = atomic_fetch_add_explicit(&recent_pos, 1, memory_order_relaxed) % RECENT_N;
  hak_store_relaxed(&recent_freed[i], (uintptr_t)p);
  atomic_fetch_add_explicit(&_hak_stat_large_frees, 1, memory_order_relaxed);
  large_account(0, seg->map_size);
  large_usable(0, hak_large_usable(seg));
  if (_hak_thp_wants_sample(seg)) _hak_thp_sample(_hak_site_touched(seg));
  if (seg->huge_aligned) {
    huge_remove((uintptr_t)p);
    _hak_os_unmap(seg, seg->map_size);
    return;
  }
  if (HAK_SECURE) {   /* not cached: inaccessible for a while, then unmapped */
    _hak_secure_large_quarantine(seg);
    return;
  }
  if (seg->site == HAK_SITE_NONE) {
    if (small_sample || !_hak_bigcache_put(seg)) _hak_release_large(seg);
    _hak_background_wake();   /* the cache's blocks age while the program idles */
  } else {
    uint64_t t0;
    uint32_t sidx = seg->site;
    int st = _hak_site_on_free(seg, &t0);
    bool cached = false;
    size_t resident = hak_large_resident(seg);
    if (st == HAK_STRAT_CACHE || st == HAK_STRAT_PREFAULT) {
      /* within the site's learned ring, else decommitted (kept mapped) */
      if (_hak_site_ring_enter(seg)) {
        cached = _hak_bigcache_put(seg);
        if (!cached) _hak_site_ring_leave(seg);
      }
      if (!cached) _hak_release_large(seg);
    } else if (st == HAK_STRAT_RELEASE || st == HAK_STRAT_POPULATE) {
      _hak_unmap_large(seg);
    } else {
      _hak_release_large(seg);
    }
    /* seg may be gone (unmapped) or reused by another thread by now: the
     * episode is recorded from values taken before */
    _hak_site_after_free(sidx, st, t0, cached ? resident : 0);
  }
  hak_heap_t* h = hak_heap_get();
  if (h != &_hak_heap_empty) {
    hak_heap_enter(h);
    _hak_heap_release_tick(h);
    hak_heap_leave(h);
  }
}

bool _hak_large_recently_freed(const void* p) {
  for (unsigned i = 0; i < RECENT_N; i++)
    if (hak_load_relaxed(&recent_freed[i]) == (uintptr_t)p) return true;
  return false;
}

/* ---------------------------------------------------------------- realloc */
/* A growing block moving into a cached one is copied up to this size (one
 * mapping stays one mapping), above it its pages are moved by mremap. */
#define LARGE_COPY_MAX ((size_t)1 << 20)

static void* large_realloc(hak_segment_t* seg, void* p, size_t size) {
  size_t off = seg->large_off;
  size_t usable = hak_large_usable(seg);
  if (HAK_SECURE || size <= HAK_MEDIUM_MAX / 2 || (seg->huge_aligned && size > seg->map_size - off)) {
    return NULL;   /* becomes small (or a huge-aligned block grows): the caller copies */
  }
  size_t new_map = hak_align_up(off + size, HAK_OS_PAGE);
  if (new_map <= seg->map_size) {
    /* fits the mapping (it has headroom); when it shrank a lot, give back
     * the tail beyond the headroom a new block of this size would get */
    size_t keep = _hak_bigcache_map_size(new_map);
    if (size < seg->large_size && keep < seg->map_size && seg->map_size - keep >= (size_t)256 * 1024 && !seg->huge_aligned) {
      if (_hak_os_unmap((uint8_t*)seg + keep, seg->map_size - keep)) {
        large_account(0, seg->map_size - keep);
        seg->map_size = keep;
        if (seg->large_peak > keep - off) seg->large_peak = keep - off;
      }
    }
    seg->large_size = size;
    large_usable(hak_large_usable(seg), usable);
    if (size > seg->large_peak) seg->large_peak = size;
    _hak_bigcache_unpin(seg, off + size);
    return p;
  }
  /* a cached block whose touched extent covers the new size: move the
   * block's touched pages over the start of it and grow into resident
   * memory (no page faults), rather than into fresh pages */
  if (!seg->huge_aligned) {
    hak_segment_t* b = _hak_bigcache_take_cover(new_map, off + size);
    if (b != NULL) {
      size_t len = hak_align_up(off + (seg->large_peak > seg->large_size ? seg->large_peak : seg->large_size), HAK_OS_PAGE);
      if (len > seg->map_size) len = seg->map_size;
      size_t old_map = seg->map_size, b_map = b->map_size, b_peak = b->large_peak, b_pinned = b->pinned;
      uint8_t b_pieced = b->pieced;
      bool moved;
      _hak_segmap_set(seg, false);   /* before its range is given up (see large_grow_map) */
      if (len - off <= LARGE_COPY_MAX || seg->pieced) {
        /* small yet (or two pieces, which mremap cannot move as one): copy
         * it, which keeps b one mapping (mremap cannot later grow a range
         * made of two moved pieces) */
        memcpy(b, seg, sizeof *seg);
        b->pieced = b_pieced;
        memcpy((uint8_t*)b + off, p, usable);
        _hak_os_unmap(seg, old_map);
        moved = true;
      } else {
        moved = _hak_os_remap(seg, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, b) == b;
        if (moved && old_map > len) _hak_os_unmap((uint8_t*)seg + len, old_map - len);
        if (moved) b->pieced = 1;
      }
      if (moved) {
        atomic_fetch_sub_explicit(&_hak_seg_count, 1, memory_order_relaxed);
        _hak_bigcache_unpin(b, SIZE_MAX);   /* b's header is now the block's: its pin is the old one */
        b->pinned = b_pinned;
        b->map_size = b_map;   /* b's header page is now the block's own */
        b->large_size = size;
        b->large_peak = b_peak > size ? b_peak : size;
        large_account(b_map - old_map, 0);
        large_usable(hak_large_usable(b), usable);
        return (uint8_t*)b + off;
      }
      _hak_segmap_set(seg, true);   /* could not move: still here */
      _hak_bigcache_unpin(b, SIZE_MAX);
      _hak_release_large(b);   /* ... and give b back */
    }
  }
  /* grow the mapping in place, or move its pages to a fresh range (no copy) */
  size_t old_map = seg->map_size;
  hak_segment_t* nseg = large_grow_map(seg, new_map);
  if (nseg == NULL) return NULL;   /* last resort: the caller copies */
  nseg->large_size = size;
  if (size > nseg->large_peak) nseg->large_peak = size;
  large_account(nseg->map_size - old_map, 0);
  large_usable(hak_large_usable(nseg), usable);
  return (uint8_t*)nseg + off;
}

/* A large block resized in place or moved without a copy; NULL when it is
 * to move by copy (a new block, the caller's: alloc.c realloc_move).  A
 * heap-profile sample that stays one block keeps its sample, at its new
 * address and size (prof.c). */
void* _hak_large_realloc(hak_segment_t* seg, void* p, size_t size) {
  if (hak_likely(!seg->prof)) return large_realloc(seg, p, size);
  void* q = large_realloc(seg, p, size);
  if (q != NULL) _hak_prof_moved(p, q, size);
  return q;
}

void _hak_large_fork_prepare(void) {
  hak_lock(&huge_lock);
  _hak_secure_large_fork(0);
}
void _hak_large_fork_parent(void) {
  _hak_secure_large_fork(1);
  hak_unlock(&huge_lock);
}
void _hak_large_fork_child(void) {
  _hak_secure_large_fork(2);
  pthread_mutex_init(&huge_lock, NULL);
}
