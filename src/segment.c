/* SuperSlabs (segments): 4 MiB-aligned OS reservations.  A small segment is
 * carved into 64 KiB slab pages owned by one heap; a large segment holds one
 * large block.  Alignment makes pointer -> segment a mask, and the segment map
 * makes "is this ours?" one bit test.  Empty segments go to a small cache,
 * segments of exited threads to the abandoned list for adoption. */
#include "internal.h"
#include <errno.h>

_Atomic(uint8_t) _hak_segmap[HAK_SEGMAP_SIZE];
_Atomic(size_t) _hak_seg_count, _hak_seg_small, _hak_seg_cached, _hak_seg_abandoned;

static pthread_mutex_t seg_lock = PTHREAD_MUTEX_INITIALIZER;   /* cache + abandoned */
static hak_segment_t* seg_cache;
static hak_segment_t* seg_abandoned;
static _Atomic(uintptr_t) seg_hint;

void _hak_segmap_set(hak_segment_t* seg, bool on) {
  uintptr_t i = (uintptr_t)seg >> HAK_SEG_SHIFT;
  if (i >= HAK_SEGMAP_SIZE) return;   /* never produced by mmap without a high hint */
  hak_store_release(&_hak_segmap[i], on ? 1 : 0);
}

static hak_segment_t* seg_map_new(size_t map_size) {
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

hak_segment_t* _hak_segment_alloc(size_t map_size, size_t large_off, hak_seg_kind_t kind, size_t thp_hint,
                                  uint32_t first_bsize) {
  hak_segment_t* seg = NULL;
  if (kind == HAK_SEG_SMALL && hak_load_relaxed(&_hak_seg_cached) > 0) {
    pthread_mutex_lock(&seg_lock);
    seg = seg_cache;
    if (seg) {
      seg_cache = seg->next;
      atomic_fetch_sub_explicit(&_hak_seg_cached, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&seg_lock);
  }
  if (seg == NULL) {
    seg = seg_map_new(map_size);
    if (seg == NULL) return NULL;
    _hak_thp_fresh(seg, map_size, kind, large_off, thp_hint, first_bsize);
    if (kind == HAK_SEG_SMALL) atomic_fetch_add_explicit(&_hak_seg_small, 1, memory_order_relaxed);
    if (HAK_SECURE && kind == HAK_SEG_SMALL) _hak_secure_segment_guards(seg);
    _hak_segmap_set(seg, true);
  }
  /* A fresh mapping is zero: every slab descriptor reads HAK_OWNER_UNUSED.
   * A cached segment had every slab released, which zeroes descriptors too. */
  if (kind == HAK_SEG_LARGE) seg->dirty_pages = 0;   /* small: cached pages keep their state */
  seg->kind = kind;
  seg->used_pages = 0;
  seg->free_pages = kind == HAK_SEG_SMALL ? HAK_SMALL_FREE_PAGES : 0;
  seg->heap = NULL;
  seg->next = seg->prev = NULL;
  seg->map_size = map_size;
  seg->large_off = large_off;
  seg->large_size = 0;
  return seg;
}

/* Unmap a segment (small or large) and forget it: segment map, counts, and
 * the empty memory it still held. */
void _hak_segment_unmap(hak_segment_t* seg) {
  if (seg->dirty_pages)
    atomic_fetch_sub_explicit(&_hak_retained_bytes, (size_t)__builtin_popcountll(seg->dirty_pages) << HAK_PAGE_SHIFT,
                              memory_order_relaxed);
  _hak_segmap_set(seg, false);
  atomic_fetch_sub_explicit(&_hak_seg_count, 1, memory_order_relaxed);
  if (seg->kind == HAK_SEG_SMALL) atomic_fetch_sub_explicit(&_hak_seg_small, 1, memory_order_relaxed);
  _hak_os_unmap(seg, seg->map_size);
}

static void seg_cache_push(hak_segment_t* seg) {
  pthread_mutex_lock(&seg_lock);
  seg->heap = NULL;
  seg->next = seg_cache;
  seg_cache = seg;
  atomic_fetch_add_explicit(&_hak_seg_cached, 1, memory_order_relaxed);
  pthread_mutex_unlock(&seg_lock);
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
    pthread_mutex_lock(&seg_lock);
    hak_segment_t* seg = NULL;
    if (hak_load_relaxed(&_hak_seg_cached) > keep && seg_cache != NULL) {
      seg = seg_cache;
      seg_cache = seg->next;
      atomic_fetch_sub_explicit(&_hak_seg_cached, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&seg_lock);
    if (seg == NULL) return;
    _hak_segment_unmap(seg);
  }
}

/* Decommit the resident empty pages of cached segments empty for delay_ms. */
void _hak_segment_cache_decommit(uint64_t delay_ms, uint64_t now_ms) {
  if (hak_load_relaxed(&_hak_seg_cached) == 0) return;
  pthread_mutex_lock(&seg_lock);
  for (hak_segment_t* seg = seg_cache; seg; seg = seg->next)
    if (seg->dirty_pages && now_ms - seg->dirty_since >= delay_ms) _hak_segment_decommit_free_pages(seg);
  pthread_mutex_unlock(&seg_lock);
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
    for (size_t off = HAK_PAGE_SIZE; off < HAK_SEG_SIZE - (HAK_SECURE ? HAK_PAGE_SIZE : 0); off += HAK_OS_PAGE) ((volatile uint8_t*)seg)[off] = 0;
    seg->kind = HAK_SEG_SMALL;
    seg->map_size = HAK_SEG_SIZE;
    if (HAK_SECURE) _hak_secure_segment_guards(seg);
    seg->free_pages = HAK_SMALL_FREE_PAGES;
    seg->dirty_pages = seg->free_pages;
    seg->dirty_since = _hak_clock_ms();
    atomic_fetch_add_explicit(&_hak_retained_bytes, (size_t)__builtin_popcountll(seg->dirty_pages) << HAK_PAGE_SHIFT, memory_order_relaxed);
    seg_cache_push(seg);
  }
}

/* ---------------------------------------------------------------- abandoned segments
 * Segments of exited threads, with live blocks, wait here for a heap that
 * needs memory (heap.c adopts one when it has no resident free page left);
 * meanwhile the clock below collects the remote frees that reach them and
 * frees those that empty.  Doubly linked: the clock unlinks from the middle. */
_Atomic(uint64_t) _hak_stat_seg_abandon_total, _hak_stat_seg_adopt_total, _hak_stat_seg_emptied_total;
_Atomic(size_t) _hak_abandoned_pages;

static void abandoned_unlink(hak_segment_t* seg) {
  if (seg->prev) seg->prev->next = seg->next;
  else seg_abandoned = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
  seg->next = seg->prev = NULL;
  seg->abandoned = 0;
  atomic_fetch_sub_explicit(&_hak_seg_abandoned, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&_hak_abandoned_pages, seg->used_pages, memory_order_relaxed);
}

void _hak_abandoned_push(hak_segment_t* seg) {
  pthread_mutex_lock(&seg_lock);
  seg->heap = NULL;
  seg->prev = NULL;
  seg->next = seg_abandoned;
  if (seg_abandoned) seg_abandoned->prev = seg;
  seg_abandoned = seg;
  seg->abandoned = 1;
  atomic_fetch_add_explicit(&_hak_seg_abandoned, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&_hak_abandoned_pages, seg->used_pages, memory_order_relaxed);
  atomic_fetch_add_explicit(&_hak_stat_seg_abandon_total, 1, memory_order_relaxed);
  pthread_mutex_unlock(&seg_lock);
}

/* Take an abandoned segment, unless no more than `keep` wait. */
hak_segment_t* _hak_abandoned_pop(size_t keep) {
  if (hak_load_relaxed(&_hak_seg_abandoned) <= keep) return NULL;
  pthread_mutex_lock(&seg_lock);
  hak_segment_t* seg = hak_load_relaxed(&_hak_seg_abandoned) > keep ? seg_abandoned : NULL;
  if (seg) {
    abandoned_unlink(seg);
    atomic_fetch_add_explicit(&_hak_stat_seg_adopt_total, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&seg_lock);
  return seg;
}

/* The clock of abandoned segments (no owner ticks them), driven by heaps'
 * slow paths and thread exits: collect the remote frees that reached them
 * and free the segments that emptied -- at once when a remote free into an
 * abandoned slab raised the hint (at most once a millisecond), and with the
 * page aging every half decommit delay, process-wide. */
_Atomic(int) _hak_abandoned_hint;
void _hak_abandoned_age(bool force) {
  static _Atomic(uint64_t) next_age_ms, next_collect_ms;
  if (hak_load_relaxed(&_hak_seg_abandoned) == 0) return;
  uint64_t now = _hak_clock_ms(), delay = (uint64_t)hak_opt(DECOMMIT_DELAY_MS);
  uint64_t due = hak_load_relaxed(&next_age_ms);
  bool age = force || (now >= due && atomic_compare_exchange_strong(&next_age_ms, &due, now + (delay / 2 > 1 ? delay / 2 : 1)));
  if (!age) {
    due = hak_load_relaxed(&next_collect_ms);
    if (!hak_load_relaxed(&_hak_abandoned_hint) || now < due ||
        !atomic_compare_exchange_strong(&next_collect_ms, &due, now + 1))
      return;
  }
  hak_store_relaxed(&_hak_abandoned_hint, 0);
  hak_segment_t* emptied = NULL;
  pthread_mutex_lock(&seg_lock);
  for (hak_segment_t *seg = seg_abandoned, *next; seg; seg = next) {
    next = seg->next;
    uint32_t pages = seg->used_pages;
    bool empty = _hak_abandoned_collect(seg);
    atomic_fetch_sub_explicit(&_hak_abandoned_pages, pages - seg->used_pages, memory_order_relaxed);
    if (empty) {
      abandoned_unlink(seg);
      atomic_fetch_add_explicit(&_hak_stat_seg_emptied_total, 1, memory_order_relaxed);
      seg->next = emptied;
      emptied = seg;
    } else if (force) {
      _hak_segment_decommit_free_pages(seg);
    } else if (age && (seg->dirty_pages | seg->dirty_old)) {
      _hak_segment_age(seg, now, delay);
    }
  }
  pthread_mutex_unlock(&seg_lock);
  while (emptied != NULL) {   /* outside the lock: the segment cache takes it */
    hak_segment_t* seg = emptied;
    emptied = seg->next;
    seg->next = NULL;
    _hak_segment_free(seg);
  }
}

void _hak_segments_fork_prepare(void) { pthread_mutex_lock(&seg_lock); }
void _hak_segments_fork_parent(void) { pthread_mutex_unlock(&seg_lock); }
void _hak_segments_fork_child(void) { pthread_mutex_init(&seg_lock, NULL); }
