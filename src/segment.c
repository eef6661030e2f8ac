/* SuperSlabs (segments): 4 MiB-aligned OS reservations.  A small segment is
 * carved into 4 KiB pages, which the page pool (pool.c) lends to any
 * heap; a large segment holds one large block.  Alignment makes pointer ->
 * segment a mask, and the segment map makes "is this ours?" one byte test.
 * Empty segments go to a small cache. */
#include "internal.h"
#include <errno.h>

hak_bss_apart _Atomic(uint8_t) _hak_segmap[HAK_SEGMAP_SIZE];
_Atomic(size_t) _hak_seg_count, _hak_seg_small, _hak_seg_cached, _hak_seg_abandoned;

static pthread_mutex_t seg_lock = PTHREAD_MUTEX_INITIALIZER;   /* the cache */
static hak_segment_t* seg_cache;
static _Atomic(uintptr_t) seg_hint;

void _hak_segmap_set(hak_segment_t* seg, bool on) {
  uintptr_t i = (uintptr_t)seg >> HAK_SEG_SHIFT;
  if (i >= HAK_SEGMAP_SIZE) return;   /* never produced by mmap without a high hint */
  hak_store_release(&_hak_segmap[i], on ? 1 : 0);
}

hak_warm static hak_segment_t* seg_map_new(size_t map_size) {
  uintptr_t last = hak_load_relaxed(&seg_hint);
  void* hint = NULL;
  if (last > map_size + HAK_SEG_SIZE)
    hint = (void*)((last - map_size) & ~(uintptr_t)HAK_SEG_MASK);
  hak_segment_t* seg = _hak_os_map_aligned(map_size, HAK_SEG_SIZE, hint);
  if (seg == NULL) return NULL;
  if ((uintptr_t)seg >> 47) {   /* outside the segment map: unusable */
    _hak_os_unmap(seg, map_size);
    errno = ENOMEM;
    return NULL;
  }
  hak_store_relaxed(&seg_hint, (uintptr_t)seg);
  atomic_fetch_add_explicit(&_hak_seg_count, 1, memory_order_relaxed);
  return seg;
}

hak_warm hak_segment_t* _hak_segment_alloc(size_t map_size, size_t large_off, hak_seg_kind_t kind, size_t thp_hint,
                                  uint32_t first_bsize) {
  hak_segment_t* seg = NULL;
  if (kind == HAK_SEG_SMALL && hak_load_relaxed(&_hak_seg_cached) > 0) {
    hak_lock(&seg_lock);
    seg = seg_cache;
    if (seg) {
      seg_cache = seg->next;
      atomic_fetch_sub_explicit(&_hak_seg_cached, 1, memory_order_relaxed);
    }
    hak_unlock(&seg_lock);
  }
  if (seg == NULL) {
    _hak_limit_grow(map_size);
    seg = seg_map_new(map_size);
    if (seg == NULL) return NULL;
    _hak_thp_fresh(seg, map_size, kind, large_off, thp_hint, first_bsize);
    if (kind == HAK_SEG_SMALL) atomic_fetch_add_explicit(&_hak_seg_small, 1, memory_order_relaxed);
    if (HAK_SECURE && kind == HAK_SEG_SMALL) _hak_secure_segment_guards(seg);
    _hak_segmap_set(seg, true);
  }
  /* A fresh mapping is zero: every slab descriptor reads HAK_OWNER_UNUSED.
   * A cached segment had every slab released, which zeroes descriptors too. */
  if (kind == HAK_SEG_LARGE) memset(&seg->age.dirty, 0, sizeof seg->age.dirty);   /* small: cached pages keep their state */
  seg->kind = kind;
  seg->used_pages = 0;
  if (kind == HAK_SEG_SMALL) seg->pool.free_pages = hak_small_free_pages();
  else memset(&seg->pool.free_pages, 0, sizeof seg->pool.free_pages);
  seg->next = seg->prev = NULL;
  seg->map_size = map_size;
  seg->large.off = large_off;
  seg->large.size = 0;
  return seg;
}

/* Unmap a segment (small or large) and forget it: segment map, counts, and
 * the empty memory it still held. */
void _hak_segment_unmap(hak_segment_t* seg) {
  size_t dirty = hak_pset_count(&seg->age.dirty);
  if (dirty) atomic_fetch_sub_explicit(&_hak_retained_bytes, dirty << HAK_PAGE_SHIFT, memory_order_relaxed);
  _hak_segmap_set(seg, false);
  atomic_fetch_sub_explicit(&_hak_seg_count, 1, memory_order_relaxed);
  if (seg->kind == HAK_SEG_SMALL) atomic_fetch_sub_explicit(&_hak_seg_small, 1, memory_order_relaxed);
  _hak_os_unmap(seg, seg->map_size);
}

static void seg_cache_push(hak_segment_t* seg) {
  hak_lock(&seg_lock);
  seg->next = seg_cache;
  seg_cache = seg;
  atomic_fetch_add_explicit(&_hak_seg_cached, 1, memory_order_relaxed);
  hak_unlock(&seg_lock);
}

void _hak_segment_free(hak_segment_t* seg) {
  if (seg->kind == HAK_SEG_SMALL && hak_load_relaxed(&_hak_seg_cached) < (size_t)hak_opt(SEG_CACHE)) {
    seg_cache_push(seg);
    return;
  }
  _hak_segment_unmap(seg);
}

/* Unmap cached empty segments beyond `keep`. */
void _hak_segment_cache_trim(size_t keep) {
  for (;;) {
    hak_lock(&seg_lock);
    hak_segment_t* seg = NULL;
    if (hak_load_relaxed(&_hak_seg_cached) > keep && seg_cache != NULL) {
      seg = seg_cache;
      seg_cache = seg->next;
      atomic_fetch_sub_explicit(&_hak_seg_cached, 1, memory_order_relaxed);
    }
    hak_unlock(&seg_lock);
    if (seg == NULL) return;
    _hak_segment_unmap(seg);
  }
}

/* Decommit the resident empty pages of cached segments empty for delay_ms. */
hak_warm void _hak_segment_cache_decommit(uint64_t delay_ms, uint64_t now_ms) {
  if (hak_load_relaxed(&_hak_seg_cached) == 0) return;
  hak_lock(&seg_lock);
  for (hak_segment_t* seg = seg_cache; seg; seg = seg->next)
    if (!hak_pset_empty(&seg->age.dirty) && now_ms - seg->age.since >= delay_ms) _hak_segment_decommit_free_pages(seg);
  hak_unlock(&seg_lock);
}

/* One reserve (pool.c, _hak_pool_yield): up to n resident free pages of
 * cached segments decommitted, from the segments the cache hands out last
 * (it is last in, first out); how many. */
size_t _hak_segment_cache_yield(size_t n) {
  if (n == 0 || hak_load_relaxed(&_hak_seg_cached) == 0) return 0;
  hak_segment_t* segs[64];
  size_t ns = 0, done = 0;
  hak_lock(&seg_lock);
  for (hak_segment_t* seg = seg_cache; seg != NULL && ns < 64; seg = seg->next) segs[ns++] = seg;
  while (ns-- > 0 && done < n) done += _hak_segment_decommit_top(segs[ns], &segs[ns]->age.dirty, n - done);
  hak_unlock(&seg_lock);
  return done;
}

/* Map and fault in `bytes` of SuperSlabs into the cache (HAKMEM_PREWARM). */
void _hak_segments_prewarm(size_t bytes) {
  size_t n = (bytes + HAK_SEG_SIZE - 1) / HAK_SEG_SIZE;
  if (n > (size_t)hak_opt(SEG_CACHE)) n = (size_t)hak_opt(SEG_CACHE);
  for (size_t i = 0; i < n; i++) {
    hak_segment_t* seg = seg_map_new(HAK_SEG_SIZE);
    if (seg == NULL) return;
    _hak_segmap_set(seg, true);
    atomic_fetch_add_explicit(&_hak_seg_small, 1, memory_order_relaxed);
    for (size_t off = HAK_HDR_PAGES * HAK_PAGE_SIZE; off < HAK_SEG_SIZE - (HAK_SECURE ? HAK_PAGE_SIZE : 0); off += HAK_OS_PAGE)
      ((volatile uint8_t*)seg)[off] = 0;
    seg->kind = HAK_SEG_SMALL;
    seg->map_size = HAK_SEG_SIZE;
    if (HAK_SECURE) _hak_secure_segment_guards(seg);
    seg->pool.free_pages = hak_small_free_pages();
    seg->age.dirty = seg->pool.free_pages;
    seg->age.since = _hak_clock_ms();
    atomic_fetch_add_explicit(&_hak_retained_bytes, hak_pset_count(&seg->age.dirty) << HAK_PAGE_SHIFT, memory_order_relaxed);
    seg_cache_push(seg);
  }
}

void _hak_segments_fork_prepare(void) { hak_lock(&seg_lock); }
void _hak_segments_fork_parent(void) { hak_unlock(&seg_lock); }
void _hak_segments_fork_child(void) { pthread_mutex_init(&seg_lock, NULL); }
