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
  memset(&seg->age.dirty, 0, sizeof seg->age.dirty);
  seg->map_size = map;
  seg->large.off = align;
  seg->large.size = size;
  seg->large.fresh = 1;
  seg->used_pages = 1;
  seg->large.huge_aligned = 1;   /* in the huge table, not in the segment map */
  seg->site.entry = HAK_SITE_NONE;
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
  seg->large.prefaulted = 1;
}

/* Grow a large segment's mapping to at least new_map bytes, keeping its
 * pages (no copy): in place when the following range is free (to the
 * headroom of its class, else exactly), else by moving the pages to a fresh
 * aligned range.  Returns the segment (moved or not) or NULL, when it is
 * unchanged.  The caller accounts the bytes. */
static hak_segment_t* large_grow_map(hak_segment_t* seg, size_t new_map) {
  if (seg->large.pieced) return NULL;
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

/* What the call site's record says of a new block (site.c), decided before
 * the block is taken; without records, the BigCache's way. */
typedef struct {
  uint32_t sidx;        /* the site's entry, HAK_SITE_NONE without records */
  int strategy;         /* HAK_STRAT_* */
  uint64_t t0;          /* the episode's start (site.c) */
  bool long_lived;      /* the site's blocks live long: trim what a reused mapping holds beyond them */
  size_t final_size;    /* what the site's blocks grow to by realloc (0: not known) */
} large_site_t;

hak_warm static void site_decide(large_site_t* st, uintptr_t site) {
  st->sidx = HAK_SITE_NONE;
  st->strategy = HAK_STRAT_CACHE;
  st->t0 = 0;
  st->long_lived = false;
  st->final_size = 0;
  if (sites_on()) {
    st->sidx = _hak_site_index(site);
    st->strategy = _hak_site_before_alloc(st->sidx, &st->t0, &st->long_lived, &st->final_size);
  }
}

/* A held mapping for a block of the default alignment, `need` bytes with
 * its header (and, secure, its guard page), or NULL.  Secure: one from the
 * large quarantine (its fill checked there), advised for huge pages if a
 * fresh one would be (thp.c).  Default: the BigCache's (resident, no
 * syscall; for a site whose blocks grow by realloc, first one that covers
 * what the block will grow to), else the release batch's (decommitted but
 * mapped). */
hak_warm static hak_segment_t* take_held(size_t need, size_t size, size_t final_size) {
  hak_segment_t* seg;
  if (HAK_SECURE) {
    seg = _hak_secure_large_take(need);
    if (seg != NULL) _hak_thp_held(seg, HAK_LARGE_HDR + size);
    return seg;
  }
  if (final_size / 2 > size && final_size <= HAK_MAX_SIZE - HAK_LARGE_HDR) {
    seg = _hak_bigcache_take_cover(need, hak_align_up(HAK_LARGE_HDR + final_size, HAK_OS_PAGE));
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
  return seg;
}

/* A new mapping for a block at `off` needing `need` bytes: rounded up to its
 * BigCache class, so it can be reused for any size of that class, unless it
 * is advised for huge pages (then exactly: thp.c, decided once here).  Out
 * of address space or memory: what is cached is given back, and one retry.
 * NULL with errno ENOMEM. */
hak_warm static hak_segment_t* map_fresh(size_t need, size_t off, size_t size) {
  bool huge = _hak_thp_exact(off + size);
  size_t map = off == HAK_LARGE_HDR && !huge ? _hak_bigcache_map_size(need) : need;
  size_t hint = huge ? size : 0;
  _hak_os_reserve = true;   /* user-sized: subject to the overcommit policy */
  hak_segment_t* seg = _hak_segment_alloc(map, off, HAK_SEG_LARGE, hint, 0);
  if (seg == NULL && map != need) seg = _hak_segment_alloc(need, off, HAK_SEG_LARGE, hint, 0);
  if (seg == NULL) {
    _hak_bigcache_expire(0);
    _hak_batch_flush();
    seg = _hak_segment_alloc(need, off, HAK_SEG_LARGE, hint, 0);
  }
  _hak_os_reserve = false;
  if (seg == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  seg->large.fresh = 1;
  seg->large.huge_aligned = 0;
  seg->large.pieced = 0;
  seg->large.peak = 0;
  seg->sec.guard_off = 0;
  return seg;
}

/* A reused mapping's resident pages beyond a long-lived block's request
 * would idle for the block's long life: decommit them. */
static void trim_resident(hak_segment_t* seg, size_t size) {
  size_t from = hak_align_up(seg->large.off + size, HAK_OS_PAGE), to = hak_large_resident(seg);
  if (to > from && _hak_decommit((uint8_t*)seg + from, to - from)) seg->large.peak = from - HAK_LARGE_HDR;
}

/* The block is live in its mapping (large.off and sec.guard_off set): its
 * header, its canary (secure), the trim of a long-lived block, the
 * counters.  Returns the bytes of the block that were resident before (0
 * for a fresh mapping), which the site's prefault and record use. */
hak_warm static size_t block_setup(hak_segment_t* seg, size_t size, bool long_lived) {
  seg->large.size = size;
  seg->used_pages = 1;   /* live; 0 while cached or parked */
  _hak_secure_large_alloc(seg);
  if (long_lived && !seg->large.fresh && seg->large.peak > size + LARGE_TRIM_MIN) trim_resident(seg, size);
  size_t resident_before = seg->large.fresh ? 0 : hak_align_up(seg->large.peak, HAK_OS_PAGE);
  if (size > seg->large.peak) seg->large.peak = size;
  atomic_fetch_add_explicit(&_hak_stat_large_allocs, 1, memory_order_relaxed);
  large_account(seg->map_size, 0);
  large_usable(hak_large_usable(seg), 0);
  return resident_before;
}

/* The after-steps: zeroed if asked (a fresh mapping is zero already),
 * prefaulted by the site's strategy, recorded by the site (site.c) and by
 * the heap profiler if it samples the block (prof.c). */
hak_warm static void* block_ready(hak_segment_t* seg, size_t size, bool zero, const large_site_t* st,
                                  size_t resident_before, uintptr_t site) {
  void* p = hak_large_block(seg);
  if (zero && !seg->large.fresh) memset(p, 0, size);
  seg->large.prefaulted = 0;
  if ((st->strategy == HAK_STRAT_PREFAULT || st->strategy == HAK_STRAT_POPULATE) && resident_before < size)
    prefault(seg, p, size);
  seg->large.fresh = 0;
  seg->site.entry = st->sidx;
  if (st->sidx != HAK_SITE_NONE) _hak_site_after_alloc(st->sidx, seg, size, st->t0, resident_before);
  seg->prof = 0;
  _hak_sample_large(seg, p, size, site);   /* its bytes count to the sampling point (a huge-aligned block never comes here) */
  return p;
}

/* A large block: a held mapping (take_held), else a new one (map_fresh);
 * the secure build places the block to end at its guard page (secure.c). */
hak_warm void* _hak_large_alloc(size_t size, size_t align, bool zero, uintptr_t site) {
  if (align > HAK_MAX_ALIGN_SEG) return huge_aligned_alloc(size, align);   /* fresh mapping: already zero */
  large_site_t st;
  site_decide(&st, site);
  size_t off = align > HAK_LARGE_HDR ? align : HAK_LARGE_HDR;
  size_t need;
  if (__builtin_add_overflow(off, size ? size : 1, &need) || need > HAK_MAX_SIZE) {
    errno = ENOMEM;
    return NULL;
  }
  need = hak_align_up(need, HAK_OS_PAGE);
  bool guard = HAK_SECURE && off == HAK_LARGE_HDR;   /* secure: the block ends at a guard page */
  if (guard) need += HAK_OS_PAGE;
  hak_segment_t* seg = off == HAK_LARGE_HDR ? take_held(need, size, st.final_size) : NULL;
  if (seg == NULL && (seg = map_fresh(need, off, size)) == NULL) return NULL;
  seg->large.off = off;
  if (guard) _hak_secure_large_place(seg, size, align);
  else seg->sec.guard_off = 0;
  size_t resident_before = block_setup(seg, size, st.long_lived);
  if (size > resident_before) _hak_pool_yield(size - resident_before);   /* one reserve (bigcache.c) */
  return block_ready(seg, size, zero, &st, resident_before, site);
}

/* A heap-profile sample is no longer live (prof.c).  True when the
 * profiler served a small block here: it has no reuse beyond the next
 * sample, so its pages go back at once rather than wait in the BigCache,
 * where a small program's freed samples held more than its slabs
 * (espresso: 180 KiB).  (With call-site records on, HAKMEM_STATS or
 * HAKMEM_LEARN, the site's own strategy decides, as for any large block.) */
static bool sample_freed(hak_segment_t* seg, void* p) {
  seg->prof = 0;
  bool small = hak_large_usable(seg) <= HAK_MEDIUM_MAX;
  _hak_prof_free(p);
  return small;
}

/* The block is no longer live: unpinned from the BigCache's budget, its
 * address remembered (a later double free is named), the counters, and the
 * sample of how much of it was touched (thp.c). */
hak_warm static void block_retire(hak_segment_t* seg, void* p) {
  seg->used_pages = 0;
  _hak_bigcache_unpin(seg, SIZE_MAX);
  if (seg->sec.guard_off && !HAK_SECURE) {   /* (secure: the block is not reused) */
    _hak_os_protect((uint8_t*)seg + seg->sec.guard_off, HAK_OS_PAGE, PROT_READ | PROT_WRITE);
    seg->sec.guard_off = 0;
  }
  unsigned i = atomic_fetch_add_explicit(&recent_pos, 1, memory_order_relaxed) % RECENT_N;
  hak_store_relaxed(&recent_freed[i], (uintptr_t)p);
  atomic_fetch_add_explicit(&_hak_stat_large_frees, 1, memory_order_relaxed);
  large_account(0, seg->map_size);
  large_usable(0, hak_large_usable(seg));
  if (_hak_thp_wants_sample(seg)) _hak_thp_sample(_hak_site_touched(seg));
}

/* A freed block of a site with records: where it goes is the site's
 * strategy (site.c), and the episode is recorded. */
hak_warm static void free_by_site(hak_segment_t* seg) {
  uint64_t t0;
  uint32_t sidx = seg->site.entry;
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

/* A large block freed: a huge-aligned one unmapped, a secure one held in
 * the quarantine (quarantine.c), else kept in the BigCache or released as
 * its site's strategy says; then the release clock ticks. */
hak_warm void _hak_large_free(hak_segment_t* seg, void* p, const char* op) {
  if (seg->used_pages != 1) {
    _hak_double_free(op, p, 0);
    return;
  }
  bool small_sample = hak_unlikely(seg->prof) && sample_freed(seg, p);
  _hak_secure_large_check(seg, op);
  block_retire(seg, p);
  if (seg->large.huge_aligned) {
    huge_remove((uintptr_t)p);
    _hak_os_unmap(seg, seg->map_size);
    return;
  }
  if (HAK_SECURE) {   /* not cached: inaccessible for a while, then unmapped */
    _hak_secure_large_quarantine(seg);
    return;
  }
  if (seg->site.entry == HAK_SITE_NONE) {
    if (small_sample || !_hak_bigcache_put(seg)) _hak_release_large(seg);
    _hak_background_wake();   /* the cache's blocks age while the program idles */
  } else {
    free_by_site(seg);
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

/* The new size fits the mapping (it has headroom); when it shrank a lot,
 * the tail beyond the headroom a new block of this size would get is given
 * back (a huge-aligned block's too: its tail is the mapping's tail). */
static void* resize_in_map(hak_segment_t* seg, void* p, size_t size, size_t new_map, size_t usable) {
  size_t off = seg->large.off;
  size_t keep = _hak_bigcache_map_size(new_map);
  if (size < seg->large.size && keep < seg->map_size && seg->map_size - keep >= (size_t)256 * 1024) {
    if (_hak_os_unmap((uint8_t*)seg + keep, seg->map_size - keep)) {
      large_account(0, seg->map_size - keep);
      seg->map_size = keep;
      if (seg->large.peak > keep - off) seg->large.peak = keep - off;
    }
  }
  seg->large.size = size;
  large_usable(hak_large_usable(seg), usable);
  if (size > seg->large.peak) seg->large.peak = size;
  _hak_bigcache_unpin(seg, off + size);
  return p;
}

/* Move a block's touched pages over the start of cached block b, header
 * included (seg's mapping is gone after): copied while it is small, or made
 * of two pieces, which mremap cannot move as one (a copy keeps b one
 * mapping: mremap cannot later grow a range made of two moved pieces); else
 * moved by mremap.  False: nothing moved, seg is still there. */
static bool move_pages(hak_segment_t* seg, hak_segment_t* b, void* p, size_t usable) {
  size_t off = seg->large.off, old_map = seg->map_size;
  size_t len = hak_align_up(off + (seg->large.peak > seg->large.size ? seg->large.peak : seg->large.size), HAK_OS_PAGE);
  if (len > old_map) len = old_map;
  if (len - off <= LARGE_COPY_MAX || seg->large.pieced) {
    uint8_t b_pieced = b->large.pieced;
    memcpy(b, seg, HAK_SEG_LARGE_HDR_USED);
    b->large.pieced = b_pieced;
    memcpy((uint8_t*)b + off, p, usable);
    _hak_os_unmap(seg, old_map);
    return true;
  }
  if (_hak_os_remap(seg, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, b) != b) return false;
  if (old_map > len) _hak_os_unmap((uint8_t*)seg + len, old_map - len);
  b->large.pieced = 1;
  return true;
}

/* A cached block whose touched extent covers the new size: the block moves
 * over the start of it and grows into resident memory (no page faults),
 * rather than into fresh pages.  NULL when there is none, or the move
 * failed (the cached block is then given back). */
static void* move_into_cached(hak_segment_t* seg, void* p, size_t size, size_t new_map, size_t usable) {
  size_t off = seg->large.off;
  hak_segment_t* b = _hak_bigcache_take_cover(new_map, off + size);
  if (b == NULL) return NULL;
  size_t old_map = seg->map_size, b_map = b->map_size, b_peak = b->large.peak, b_pinned = b->large.pinned;
  _hak_segmap_set(seg, false);   /* before its range is given up (see large_grow_map) */
  if (!move_pages(seg, b, p, usable)) {
    _hak_segmap_set(seg, true);   /* could not move: still here */
    _hak_bigcache_unpin(b, SIZE_MAX);
    _hak_release_large(b);   /* ... and give b back */
    return NULL;
  }
  atomic_fetch_sub_explicit(&_hak_seg_count, 1, memory_order_relaxed);
  _hak_bigcache_unpin(b, SIZE_MAX);   /* b's header is now the block's: its pin is the old one */
  b->large.pinned = b_pinned;
  b->map_size = b_map;   /* b's header page is now the block's own */
  b->large.size = size;
  b->large.peak = b_peak > size ? b_peak : size;
  large_account(b_map - old_map, 0);
  large_usable(hak_large_usable(b), usable);
  return (uint8_t*)b + off;
}

/* In the mapping, else into a cached block, else the mapping grown in place
 * or its pages moved to a fresh range (no copy); NULL: the caller copies. */
static void* large_realloc(hak_segment_t* seg, void* p, size_t size) {
  size_t off = seg->large.off;
  size_t usable = hak_large_usable(seg);
  if (HAK_SECURE || size <= HAK_MEDIUM_MAX / 2 || (seg->large.huge_aligned && size > seg->map_size - off)) {
    return NULL;   /* becomes small (or a huge-aligned block grows): the caller copies */
  }
  size_t new_map = hak_align_up(off + size, HAK_OS_PAGE);
  if (new_map <= seg->map_size) return resize_in_map(seg, p, size, new_map, usable);
  if (!seg->large.huge_aligned) {
    void* q = move_into_cached(seg, p, size, new_map, usable);
    if (q != NULL) return q;
  }
  size_t old_map = seg->map_size;
  hak_segment_t* nseg = large_grow_map(seg, new_map);
  if (nseg == NULL) return NULL;   /* last resort: the caller copies */
  nseg->large.size = size;
  if (size > nseg->large.peak) nseg->large.peak = size;
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
