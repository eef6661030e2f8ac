/* The page pool: the free pages of every small segment belong to the process,
 * not to a heap.  Any heap takes a run of pages for a slab from any segment
 * and gives an empty slab's pages back at once, under one lock, without a
 * syscall; the pages age and are decommitted here, process-wide.  Segments
 * keep a member entry per heap that has slabs in them (internal.h), which is
 * how a heap finds its remote frees and how exited threads' slabs wait for
 * an adopter (the abandoned list). */
#include "internal.h"

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static hak_segment_t* pool_avail;       /* small segments with free pages (not cached) */
static hak_segment_t* pool_abandoned;   /* segments with an abandoned entry */
_Atomic(uint64_t) _hak_pool_gives;      /* slabs given back so far: heaps' "look again" epoch */
_Atomic(size_t) _hak_pool_segs;         /* segments on pool_avail */
_Atomic(int) _hak_abandoned_hint;       /* a remote free reached an abandoned slab */
_Atomic(uint64_t) _hak_stat_seg_abandon_total, _hak_stat_seg_adopt_total, _hak_stat_seg_emptied_total;
_Atomic(size_t) _hak_abandoned_pages;
/* Every abandoned slab, also by class (linked through its next/prev, which
 * no heap list uses while it is abandoned), so that a heap that needs a slab
 * of a class adopts one with room rather than new pages (_hak_pool_adopt_slab). */
static hak_slab_t *ab_cls[HAK_NCLASSES], *ab_cls_tail[HAK_NCLASSES];
static _Atomic(uint32_t) ab_cls_n[HAK_NCLASSES];
static size_t pool_low[2] = {SIZE_MAX, SIZE_MAX};   /* the fewest retained bytes at a take: since the last tick, and the tick before (aging) */

/* How many segments of the pool (beyond the heap's own) a heap looks at for
 * a free run before it takes the next option: the list is most recently
 * freed first, where resident pages are. */
#define POOL_SCAN 64

#if HAK_DEBUG >= 2
/* A segment's member entries agree with its pages (pool lock; debug build):
 * masks disjoint and on used pages, one abandoned entry at most, and the
 * used-page count is what the free bitmap leaves. */
static bool pool_seg_valid(const hak_segment_t* seg) {
  hak_pset_t seen = {{0}}, slab_pages = hak_small_free_pages(), stray;
  int abandoned = 0;
  for (size_t i = 0; i < HAK_SEG_MEMBERS; i++) {
    const hak_member_t* m = &seg->members[i];
    if (hak_pset_intersects(&m->mask, &seen)) return false;
    hak_pset_or(&seen, &seen, &m->mask);
    abandoned += !hak_pset_empty(&m->mask) && m->heap == NULL;
  }
  hak_pset_andnot(&slab_pages, &slab_pages, &seg->pool.free_pages);
  if (hak_pset_andnot(&stray, &seen, &slab_pages)) return false;
  for (size_t i = hak_pset_next(&seen, 0); i < HAK_PAGES_PER_SEG; i = hak_pset_next(&seen, i + 1)) {
    const hak_slab_t* s = hak_slab_at(seg, i);   /* a head page maps to itself, and its slab's pages are used */
    if (hak_pmap_head(seg, i) != i || hak_slab_index(s) != i || !hak_pset_all_run(&slab_pages, i, s->npages))
      return false;
  }
  /* the map: a free page names no slab; a used one the slab whose run holds it */
  for (size_t i = HAK_HDR_PAGES; i < HAK_HDR_PAGES + HAK_SMALL_SLAB_PAGES; i++) {
    const hak_slab_t* s = hak_slab_at(seg, i);
    if (hak_pset_has(&seg->pool.free_pages, i) ? s != NULL : s == NULL) return false;
    size_t h = hak_pmap_head(seg, i);
    if (s != NULL && (h > i || !hak_pset_has(&seen, h) || hak_slab_at(seg, h) != s)) return false;
  }
  return abandoned <= 1 && abandoned == (seg->pool.abandoned ? 1 : 0) && seg->used_pages == hak_pset_count(&slab_pages);
}
#endif

/* ---------------------------------------------------------------- lists (pool lock) */
static void avail_link(hak_segment_t* seg) {
  if (seg->pool.listed) return;
  seg->prev = NULL;
  seg->next = pool_avail;
  if (pool_avail) pool_avail->prev = seg;
  pool_avail = seg;
  seg->pool.listed = 1;
  atomic_fetch_add_explicit(&_hak_pool_segs, 1, memory_order_relaxed);
}
static void avail_unlink(hak_segment_t* seg) {
  if (!seg->pool.listed) return;
  if (seg->prev) seg->prev->next = seg->next;
  else pool_avail = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
  seg->next = seg->prev = NULL;
  seg->pool.listed = 0;
  atomic_fetch_sub_explicit(&_hak_pool_segs, 1, memory_order_relaxed);
}
static void ab_link(hak_segment_t* seg) {
  if (seg->pool.abandoned) return;
  seg->pool.abprev = NULL;
  seg->pool.abnext = pool_abandoned;
  if (pool_abandoned) pool_abandoned->pool.abprev = seg;
  pool_abandoned = seg;
  seg->pool.abandoned = 1;
  atomic_fetch_add_explicit(&_hak_seg_abandoned, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&_hak_stat_seg_abandon_total, 1, memory_order_relaxed);
}
static void ab_unlink(hak_segment_t* seg) {
  if (!seg->pool.abandoned) return;
  if (seg->pool.abprev) seg->pool.abprev->pool.abnext = seg->pool.abnext;
  else pool_abandoned = seg->pool.abnext;
  if (seg->pool.abnext) seg->pool.abnext->pool.abprev = seg->pool.abprev;
  seg->pool.abnext = seg->pool.abprev = NULL;
  seg->pool.abandoned = 0;
  atomic_fetch_sub_explicit(&_hak_seg_abandoned, 1, memory_order_relaxed);
}

static void ab_slab_link(hak_slab_t* s) {   /* at the tail */
  s->next = NULL;
  s->prev = ab_cls_tail[s->cls];
  if (s->prev != NULL) s->prev->next = s;
  else ab_cls[s->cls] = s;
  ab_cls_tail[s->cls] = s;
  atomic_fetch_add_explicit(&ab_cls_n[s->cls], 1, memory_order_relaxed);
}
static void ab_slab_unlink(hak_slab_t* s) {
  if (s->prev != NULL) s->prev->next = s->next;
  else ab_cls[s->cls] = s->next;
  if (s->next != NULL) s->next->prev = s->prev;
  else ab_cls_tail[s->cls] = s->prev;
  s->next = s->prev = NULL;
  atomic_fetch_sub_explicit(&ab_cls_n[s->cls], 1, memory_order_relaxed);
}
static void ab_slabs_link(hak_segment_t* seg, const hak_pset_t* mask) {
  for (size_t i = hak_pset_next(mask, 0); i < HAK_PAGES_PER_SEG; i = hak_pset_next(mask, i + 1)) ab_slab_link(hak_slab_at(seg, i));
}
static void ab_slabs_unlink(hak_segment_t* seg, const hak_pset_t* mask) {
  for (size_t i = hak_pset_next(mask, 0); i < HAK_PAGES_PER_SEG; i = hak_pset_next(mask, i + 1)) ab_slab_unlink(hak_slab_at(seg, i));
}

/* ---------------------------------------------------------------- member entries (pool lock) */
/* h's entry in seg (h NULL: the abandoned entry), or NULL. */
/* (a member entry is in use while it has slabs; `used` counts them) */
static hak_member_t* member_of(hak_segment_t* seg, const hak_heap_t* h) {
  for (size_t i = 0; i < seg->pool.members_hw; i++)
    if (seg->members[i].used != 0 && seg->members[i].heap == h) return &seg->members[i];
  return NULL;
}
static hak_member_t* member_slot(hak_segment_t* seg) {
  for (size_t i = 0; i < HAK_SEG_MEMBERS; i++)
    if (seg->members[i].used == 0) return &seg->members[i];
  return NULL;
}
/* Can h put a slab in seg: it has an entry there, or a free one is left. */
static bool member_room(hak_segment_t* seg, const hak_heap_t* h) {
  return member_of(seg, h) != NULL || member_slot(seg) != NULL;
}
static void member_link(hak_heap_t* h, hak_member_t* m) {
  m->heap = h;
  m->prev = NULL;
  m->next = h->members;
  if (h->members) h->members->prev = m;
  h->members = m;
  h->nsegs++;
}
static void member_unlink(hak_heap_t* h, hak_member_t* m) {
  if (m->prev) m->prev->next = m->next;
  else h->members = m->next;
  if (m->next) m->next->prev = m->prev;
  m->next = m->prev = NULL;
  m->heap = NULL;
  h->nsegs--;
}
static void member_add(hak_heap_t* h, hak_segment_t* seg, size_t idx) {
  hak_member_t* m = member_of(seg, h);
  if (m == NULL) {
    m = member_slot(seg);
    hak_assert(m != NULL);
    size_t i = (size_t)(m - seg->members);
    if (i >= seg->pool.members_hw) seg->pool.members_hw = (uint8_t)(i + 1);
    member_link(h, m);
  }
  hak_pset_add(&m->mask, idx);
  m->used++;
}
/* Slab idx of h (NULL: abandoned) leaves seg; true when that was h's last there. */
static bool member_drop(hak_heap_t* h, hak_segment_t* seg, size_t idx) {
  hak_member_t* m = member_of(seg, h);
  hak_assert(m != NULL && hak_pset_has(&m->mask, idx));
  hak_pset_del(&m->mask, idx);
  if (--m->used != 0) return false;
  if (h != NULL) member_unlink(h, m);
  else ab_unlink(seg);
  return true;
}

/* ---------------------------------------------------------------- taking pages */
/* Where a run of n pages of `bits` goes (HAK_PAGES_PER_SEG: nowhere): the
 * first that fits, the lowest; with `top` the highest, for blocks that span
 * pages, so that in a segment advised for huge pages the two kinds meet in
 * the middle: huge pages back the dense half (thp.c, _hak_thp_slab).  A run
 * of whole windows starts on a window (its slab's frees take the fast
 * path, alloc.h).  (Best fit at any page kept 1.15x the resident pages of
 * this in a workload of random sizes to 512 KiB.) */
hak_warm size_t _hak_pool_find_run(const hak_pset_t* bits, unsigned n, bool top) {
  size_t found = HAK_PAGES_PER_SEG, step = n % HAK_WINDOW_PAGES == 0 ? HAK_WINDOW_PAGES : 1;
  for (size_t i = hak_pset_next(bits, 0); i < HAK_PAGES_PER_SEG;) {
    size_t j = hak_pset_next_gap(bits, i), a = hak_align_up(i, step);
    if (j >= a + n) {
      if (!top) return a;
      found = (j - n) / step * step;
    }
    i = hak_pset_next(bits, j);
  }
  return found;
}
/* Where a slab goes in seg: page-exact slabs (place 2) from the top of
 * every segment, so that they keep out of the windows the others need;
 * blocks that span pages (1) from the top of a segment advised for huge
 * pages; the rest (0) from the bottom. */
hak_inline bool seg_top(const hak_segment_t* seg, int place) { return place == 2 || (place == 1 && seg->thp != 0); }
hak_warm static size_t seg_run(const hak_segment_t* seg, pages_from_t from, unsigned n, int place) {
  if (from == PAGES_ANY) return _hak_pool_find_run(&seg->pool.free_pages, n, seg_top(seg, place));
  hak_pset_t resident;
  if (!hak_pset_and(&resident, &seg->pool.free_pages, &seg->age.dirty)) return HAK_PAGES_PER_SEG;
  return _hak_pool_find_run(&resident, n, seg_top(seg, place));
}

/* Pages [idx, idx + n) of seg become a slab of h (pool lock). */
static bool pool_claim(hak_heap_t* h, hak_segment_t* seg, size_t idx, unsigned npages, uint32_t bsize, bool* zero) {
  hak_assert(hak_pset_all_run(&seg->pool.free_pages, idx, npages));
  _hak_thp_slab(seg, idx, npages, bsize);
  /* secure: pages never used are PROT_NONE; no more mappings
   * (vm.max_map_count) is out of memory */
  *zero = false;
  if (HAK_SECURE && !hak_pset_all_run(&seg->sec.open, idx, npages)) {
    if (!_hak_secure_slab_pages(seg, idx, npages)) return false;
    *zero = hak_pset_count_run(&seg->sec.open, idx, npages) == 0;
    hak_pset_add_run(&seg->sec.open, idx, npages);
  }
  hak_pset_del_run(&seg->pool.free_pages, idx, npages);
  seg->used_pages += npages;
  _hak_pages_reused(seg, idx, npages);
  size_t r = hak_load_relaxed(&_hak_retained_bytes);
  if (r < pool_low[0]) pool_low[0] = r;
  /* a bit left from the slab that had these pages before would hide the
   * first remote free into the new one (remote_notify skips a set bit) */
  atomic_fetch_and_explicit(&seg->xremote[idx >> 6], ~((uint64_t)1 << (idx & 63)), memory_order_relaxed);
  /* the page map: each page names the head (hak_slab_of, the fast paths) */
  hak_assert_cmp(npages, >=, HAK_SLAB_MIN_PAGES);   /* (so slots are unique: internal.h) */
  if (!hak_window_slab(idx, npages)) __atomic_store_n(&seg->shead[hak_slot_of(idx)], (uint16_t)idx, __ATOMIC_RELAXED);
  hak_pmap_set(seg, idx, npages, false);
  member_add(h, seg, idx);
  hak_assert_expensive(pool_seg_valid(seg));
  if (hak_pset_empty(&seg->pool.free_pages)) avail_unlink(seg);
  atomic_fetch_add_explicit(&_hak_stat_slab_pages, npages, memory_order_relaxed);
  return true;
}

/* A run of pages for a slab of class cls of heap h: from the segments h has
 * slabs in (PAGES_OWN: only pages still resident, no fault), then from any
 * segment of the pool (PAGES_RESIDENT: resident pages; PAGES_ANY: any free
 * run), or from a new segment (PAGES_NEW).  NULL when there is none (or no
 * memory). */
hak_warm hak_segment_t* _hak_pool_take(hak_heap_t* h, size_t cls, pages_from_t from, size_t* idx_out, bool* zero) {
  unsigned npages = _hak_class_pages[cls];
  uint32_t bsize = _hak_class_size[cls];
  /* where in a segment (seg_top) */
  int place = bsize >= HAK_EXACT_MIN ? 2 : bsize > HAK_OS_PAGE ? 1 : 0;
  hak_segment_t* seg = NULL;
  size_t idx = HAK_PAGES_PER_SEG;
  if (from != PAGES_NEW) {
    hak_lock(&pool_lock);
    for (hak_member_t* m = h->members; m != NULL && seg == NULL; m = m->next) {
      hak_segment_t* g = hak_segment_of(m);
      if ((idx = seg_run(g, from, npages, place)) < HAK_PAGES_PER_SEG) seg = g;
    }
    int k = from == PAGES_OWN ? POOL_SCAN : 0;
    for (hak_segment_t* g = pool_avail; g != NULL && seg == NULL && k < POOL_SCAN; g = g->next, k++)
      if (member_room(g, h) && (idx = seg_run(g, from, npages, place)) < HAK_PAGES_PER_SEG) seg = g;
    if (seg == NULL) {
      hak_unlock(&pool_lock);
      return NULL;
    }
  } else {
    seg = _hak_segment_alloc(HAK_SEG_SIZE, 0, HAK_SEG_SMALL, (size_t)h->nsegs << HAK_SEG_SHIFT, bsize);
    if (seg == NULL) return NULL;
    hak_lock(&pool_lock);   /* nobody else knows seg yet */
    idx = _hak_pool_find_run(&seg->pool.free_pages, npages, seg_top(seg, place));
    avail_link(seg);
  }
  bool ok = pool_claim(h, seg, idx, npages, bsize, zero);
  hak_unlock(&pool_lock);
  if (!ok) return NULL;
  *idx_out = idx;
  return seg;
}

/* ---------------------------------------------------------------- giving pages back */
/* The pages of h's empty slab at idx (its descriptors cleared: slab.c) go back
 * to the pool (pool lock).  Returns the segment when it emptied (the caller
 * frees it after unlocking); *gone says h has no slab left in it. */
hak_warm static hak_segment_t* pool_give_locked(hak_heap_t* h, hak_segment_t* seg, size_t idx, unsigned n, bool* gone) {
  *gone = member_drop(h, seg, idx);
  atomic_fetch_and_explicit(&seg->xremote[idx >> 6], ~((uint64_t)1 << (idx & 63)), memory_order_relaxed);
  atomic_fetch_sub_explicit(&_hak_stat_slab_pages, n, memory_order_relaxed);
  atomic_fetch_add_explicit(&_hak_pool_gives, 1, memory_order_relaxed);
  /* a pointer into a free run finds no slab (the map keeps only the head) */
  hak_pmap_set(seg, idx, n, true);
  hak_pset_add_run(&seg->pool.free_pages, idx, n);
  seg->used_pages -= n;
  hak_assert_expensive(pool_seg_valid(seg));
  bool empty = seg->used_pages == 0;
  if (!empty || hak_load_relaxed(&_hak_seg_cached) < (size_t)hak_opt(SEG_CACHE))
    _hak_pages_freed(seg, idx, n);   /* else the whole segment is unmapped */
  if (!empty) {
    avail_link(seg);
    return NULL;
  }
  avail_unlink(seg);
  return seg;
}

/* pool_give_locked for a walk under the lock: a segment that empties joins
 * *emptied, which pool_free_emptied frees after the lock (the segment cache
 * takes it).  True when h has no slab left in seg. */
static bool pool_give_walking(hak_heap_t* h, hak_segment_t* seg, size_t idx, unsigned n, hak_segment_t** emptied) {
  bool gone;
  hak_segment_t* e = pool_give_locked(h, seg, idx, n, &gone);
  if (e != NULL) {
    if (h == NULL) atomic_fetch_add_explicit(&_hak_stat_seg_emptied_total, 1, memory_order_relaxed);
    e->next = *emptied;
    *emptied = e;
  }
  return gone;
}
static void pool_free_emptied(hak_segment_t* emptied) {
  while (emptied != NULL) {
    hak_segment_t* seg = emptied;
    emptied = seg->next;
    seg->next = NULL;
    _hak_segment_free(seg);
  }
}

hak_warm bool _hak_pool_give(hak_heap_t* h, hak_segment_t* seg, size_t idx, unsigned n) {
  bool gone;
  hak_lock(&pool_lock);
  hak_segment_t* empty = pool_give_locked(h, seg, idx, n, &gone);
  hak_unlock(&pool_lock);
  if (empty != NULL) _hak_segment_free(empty);
  return gone;
}

/* ---------------------------------------------------------------- idle heaps */
/* The slabs of h (whose owner is locked out: heap.c) that take() clears go
 * back to the pool, under the pool lock; take returns the slab's page count,
 * 0 to keep it.  Returns the slabs given back. */
size_t _hak_pool_give_taken(hak_heap_t* h, unsigned (*take)(hak_heap_t*, hak_slab_t*)) {
  size_t given = 0;
  hak_segment_t* emptied = NULL;
  hak_lock(&pool_lock);
  for (hak_member_t *m = h->members, *mnext; m != NULL; m = mnext) {
    mnext = m->next;   /* m goes with h's last slab in its segment */
    hak_segment_t* seg = hak_segment_of(m);
    hak_pset_t heads = m->mask;   /* (m's mask changes as slabs go) */
    for (size_t idx = hak_pset_next(&heads, 0); idx < HAK_PAGES_PER_SEG; idx = hak_pset_next(&heads, idx + 1)) {
      unsigned n = take(h, hak_slab_at(seg, idx));
      if (n == 0) continue;
      given++;
      if (pool_give_walking(h, seg, idx, n, &emptied)) break;
    }
  }
  hak_unlock(&pool_lock);
  pool_free_emptied(emptied);
  return given;
}

/* ---------------------------------------------------------------- exited threads */
/* h's thread exits: its slabs (marked abandoned by heap.c) wait in their
 * segments' abandoned entries for an adopter. */
hak_warm void _hak_pool_abandon(hak_heap_t* h) {
  hak_lock(&pool_lock);
  while (h->members != NULL) {
    hak_member_t* m = h->members;
    hak_segment_t* seg = hak_segment_of(m);
    hak_member_t* a = member_of(seg, NULL);   /* the segment's abandoned entry, if any */
    ab_slabs_link(seg, &m->mask);
    member_unlink(h, m);   /* m->heap = NULL: m is an abandoned entry now ... */
    if (a != NULL) {   /* ... unless the segment has one: one per segment */
      hak_pset_or(&a->mask, &a->mask, &m->mask);
      a->used += m->used;
      memset(&m->mask, 0, sizeof m->mask);
      m->used = 0;
    }
    ab_link(seg);
  }
  hak_unlock(&pool_lock);
}

/* Take the abandoned slabs of one segment, unless no more than `keep`
 * segments wait: they become h's (the caller collects them); their mask. */
hak_warm hak_segment_t* _hak_pool_adopt(hak_heap_t* h, size_t keep, hak_pset_t* mask) {
  if (hak_load_relaxed(&_hak_seg_abandoned) <= keep) return NULL;
  hak_lock(&pool_lock);
  hak_segment_t* seg = hak_load_relaxed(&_hak_seg_abandoned) > keep ? pool_abandoned : NULL;
  if (seg != NULL) {
    ab_unlink(seg);
    hak_member_t* a = member_of(seg, NULL);
    hak_member_t* mine = member_of(seg, h);
    *mask = a->mask;
    ab_slabs_unlink(seg, &a->mask);
    if (mine != NULL) {
      hak_pset_or(&mine->mask, &mine->mask, &a->mask);
      mine->used += a->used;
      memset(&a->mask, 0, sizeof a->mask);
      a->used = 0;
    } else {
      member_link(h, a);
    }
    atomic_fetch_add_explicit(&_hak_stat_seg_adopt_total, 1, memory_order_relaxed);
  }
  hak_unlock(&pool_lock);
  return seg;
}

/* Of an abandoned slab's cap blocks, those it could hand out once its
 * remote frees are in. */
static uint32_t ab_room(const hak_slab_t* s, uint32_t cap) {
  uint32_t out = __atomic_load_n(&s->used, __ATOMIC_RELAXED);
  uint32_t back = hak_xf_count(hak_load_relaxed(&s->xthread_free));
  return out - back < cap ? cap - (out - back) : 0;
}

/* An abandoned slab of class cls with room becomes h's (the caller collects
 * it): of the first few, the fullest that has an eighth of its blocks free,
 * so that the sparse ones drain and go back; NULL when none has. */
#define AB_SCAN 16
hak_warm hak_slab_t* _hak_pool_adopt_slab(hak_heap_t* h, size_t cls) {
  if (hak_load_relaxed(&ab_cls_n[cls]) == 0) return NULL;
  hak_lock(&pool_lock);
  hak_slab_t *best = NULL, *s = ab_cls[cls], *next;
  uint32_t best_room = UINT32_MAX;
  for (unsigned k = 0; s != NULL && k < AB_SCAN; s = next, k++) {
    next = s->next;
    uint32_t cap = hak_slab_limit(s) / s->bsize, room = ab_room(s, cap);
    if (room < cap / 8 + 1) {   /* to the back: the next look starts with others */
      if (next != NULL) {
        ab_slab_unlink(s);
        ab_slab_link(s);
      }
      continue;
    }
    if (room >= best_room || !member_room(hak_segment_of(s), h)) continue;
    best = s;
    best_room = room;
  }
  if (best != NULL) {
    hak_segment_t* seg = hak_segment_of(best);
    size_t idx = hak_slab_index(best);
    ab_slab_unlink(best);
    member_drop(NULL, seg, idx);   /* (the segment leaves the abandoned list with its last) */
    member_add(h, seg, idx);
    hak_assert_expensive(pool_seg_valid(seg));
  }
  hak_unlock(&pool_lock);
  return best;
}

/* The clock of abandoned slabs (nobody owns them), driven by heaps' slow
 * paths and thread exits: collect the remote frees that reached them and
 * give back the slabs those emptied -- at once when a remote free into an
 * abandoned slab raised the hint (at most once a millisecond), else every
 * half decommit delay.  (Their segments' empty pages age with the pool.) */
hak_warm void _hak_pool_abandoned_tick(bool force) {
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
  hak_lock(&pool_lock);
  for (hak_segment_t *seg = pool_abandoned, *next; seg; seg = next) {
    next = seg->pool.abnext;
    hak_member_t* a = member_of(seg, NULL);
    hak_pset_t bits;
    _hak_abandoned_collect(seg, &a->mask, &bits);   /* the slabs the remote frees emptied */
    for (size_t idx = hak_pset_next(&bits, 0); idx < HAK_PAGES_PER_SEG; idx = hak_pset_next(&bits, idx + 1)) {
      unsigned n = hak_slab_at(seg, idx)->npages;
      ab_slab_unlink(hak_slab_at(seg, idx));
      _hak_slab_clear(hak_slab_at(seg, idx));
      atomic_fetch_sub_explicit(&_hak_abandoned_pages, n, memory_order_relaxed);
      if (pool_give_walking(NULL, seg, idx, n, &emptied)) break;   /* (counted as emptied while abandoned) */
    }
  }
  hak_unlock(&pool_lock);
  pool_free_emptied(emptied);
}

/* ---------------------------------------------------------------- aging */
/* Resident free pages beyond what the program reused lately.  Aging (below)
 * decommits a page free at two snapshots; but when slabs come and go fast
 * (threads handing work around, larson), every free page is taken again now
 * and then while as many others are freed, so no page stays free for two
 * snapshots and the pool kept a resident reserve as large as it ever grew
 * (larsonN: 8 MB of free pages beside 11 MB in slabs).  So the count is aged
 * too: the fewest resident free pages there were at any take since the tick
 * before last were not needed for half a decommit delay (two ticks), and as
 * many go now -- the last pages of the least recently given segments, which
 * the next takes reach last (find_run takes from the bottom, the list is
 * newest first).  The count is release.c's (_hak_retained_bytes), whose part
 * outside the pool (cached segments) is left out.  (pool lock) */
_Atomic(uint64_t) _hak_stat_pool_surplus;
static size_t pool_trim_surplus(size_t n, hak_segment_t* tail) {
  size_t want = n;
  for (hak_segment_t* seg = tail; seg != NULL && n != 0; seg = seg->prev) {
    /* (not in a half backed by huge pages: one page would split it) */
    hak_pset_t pages = seg->pool.free_pages;
    if (seg->thp & 1) hak_pset_del_run(&pages, 0, HAK_PAGES_PER_SEG / 2);
    if (seg->thp & 2) hak_pset_del_run(&pages, HAK_PAGES_PER_SEG / 2, HAK_PAGES_PER_SEG / 2);
    n -= _hak_segment_decommit_top(seg, &pages, n);
  }
  return want - n;
}
/* now_free: the pool's resident free pages; tail: its last segment (both
 * from the tick's walk). */
static void pool_age_count(size_t now_free, hak_segment_t* tail) {
  size_t retained = hak_load_relaxed(&_hak_retained_bytes) >> HAK_PAGE_SHIFT;
  size_t other = retained > now_free ? retained - now_free : 0;
  size_t low = (pool_low[0] < pool_low[1] ? pool_low[0] : pool_low[1]);
  low = low == SIZE_MAX ? 0 : low >> HAK_PAGE_SHIFT;
  size_t surplus = low > other ? low - other : 0;
  if (surplus > now_free) surplus = now_free;
  if (surplus != 0) {
    surplus = pool_trim_surplus(surplus, tail);
    atomic_fetch_add_explicit(&_hak_stat_pool_surplus, surplus, memory_order_relaxed);
  }
  /* the pages gone now leave both windows' counts */
  size_t gone = surplus << HAK_PAGE_SHIFT;
  pool_low[1] = pool_low[0] == SIZE_MAX ? SIZE_MAX : (pool_low[0] > gone ? pool_low[0] - gone : 0);
  pool_low[0] = hak_load_relaxed(&_hak_retained_bytes);
}

/* One reserve for the process (bigcache.c, _hak_bigcache_yield): before a
 * large block faults in `bytes` of new pages, the small tier decommits as
 * many of its resident free pages: the cached empty segments', then the
 * pool's that its takes reach last. */
_Atomic(uint64_t) _hak_stat_pool_yielded;
void _hak_pool_yield(size_t bytes) {
  size_t n = hak_align_up(bytes, HAK_OS_PAGE) >> HAK_PAGE_SHIFT;
  if (n == 0 || hak_opt(DECOMMIT) == HAK_DECOMMIT_OFF || hak_load_relaxed(&_hak_retained_bytes) == 0) return;
  size_t cached = _hak_segment_cache_yield(n);   /* whole empty segments first */
  atomic_fetch_add_explicit(&_hak_stat_pool_yielded, cached, memory_order_relaxed);
  if ((n -= cached) == 0) return;
  hak_lock(&pool_lock);
  hak_segment_t* tail = pool_avail;
  while (tail != NULL && tail->next != NULL) tail = tail->next;
  n = pool_trim_surplus(n, tail);
  if (n != 0) {
    atomic_fetch_add_explicit(&_hak_stat_pool_yielded, n, memory_order_relaxed);
    size_t gone = n << HAK_PAGE_SHIFT;   /* (gone from the aging count's windows too) */
    for (int i = 0; i < 2; i++)
      if (pool_low[i] != SIZE_MAX) pool_low[i] = pool_low[i] > gone ? pool_low[i] - gone : 0;
  }
  hak_unlock(&pool_lock);
}

/* The pool's page clock, process-wide (any heap's release tick and the
 * background thread drive it): pages empty for the last two snapshots are
 * decommitted (release.c, _hak_segment_age); `force`: every resident free
 * page now (over the lean target, malloc_trim). */
hak_warm void _hak_pool_tick(uint64_t now, uint64_t delay, bool force) {
  static _Atomic(uint64_t) next_ms;
  if (!force) {
    uint64_t due = hak_load_relaxed(&next_ms);
    /* (a quarter delay: the segments' own clocks keep their pace, and a
     * background tick a little early still finds them due) */
    if (now < due || !atomic_compare_exchange_strong(&next_ms, &due, now + (delay / 4 > 1 ? delay / 4 : 1))) return;
  }
  hak_lock(&pool_lock);
  size_t now_free = 0;
  hak_segment_t* tail = NULL;
  for (hak_segment_t* seg = pool_avail; seg != NULL; tail = seg, seg = seg->next) {
    if (force) _hak_segment_decommit_free_pages(seg);
    else if (!hak_pset_empty(&seg->age.dirty) || !hak_pset_empty(&seg->age.old) || !hak_pset_empty(&seg->age.old2))
      _hak_segment_age(seg, now, delay);
    now_free += hak_pset_count(&seg->age.dirty);   /* (dirty pages are free pages) */
  }
  if (!force) pool_age_count(now_free, tail);
  hak_unlock(&pool_lock);
}

/* Pages [lo, lo + n) of seg lose their huge-page advice (scavenge.c gives
 * pages of a slab back: the segment's advice is the pool's). */
void _hak_pool_thp_demote(hak_segment_t* seg, unsigned lo, unsigned n) {
  hak_lock(&pool_lock);
  if (seg->thp & 3) _hak_thp_demote(seg, lo, n);
  hak_unlock(&pool_lock);
}

/* Where the pool's pages are (stats.c): segments with free pages, their free
 * pages and of those the resident ones. */
void _hak_pool_stats(size_t* segs, size_t* free_pages, size_t* resident) {
  *segs = *free_pages = *resident = 0;
  hak_lock(&pool_lock);
  for (hak_segment_t* seg = pool_avail; seg != NULL; seg = seg->next) {
    ++*segs;
    *free_pages += hak_pset_count(&seg->pool.free_pages);
    *resident += hak_pset_count(&seg->age.dirty);
  }
  hak_unlock(&pool_lock);
}

/* Every slab of every small segment, once (stats.c, the figures on
 * request): the heaps' member entries, then the abandoned ones.  The pool
 * lock is taken at the first heap, after the heap lock (their order), and
 * held to the end, so no slab moves between a heap and the abandoned
 * entries (a thread exit, an adoption) while they are read; a slab the
 * owner is setting up or clearing shows its descriptor as it is. */
typedef struct { void (*fn)(hak_slab_t*, void*); void* arg; bool locked; } slab_walk_t;
static void walk_mask(hak_segment_t* seg, const hak_pset_t* mask, slab_walk_t* w) {
  for (size_t i = hak_pset_next(mask, 0); i < HAK_PAGES_PER_SEG; i = hak_pset_next(mask, i + 1)) w->fn(hak_slab_at(seg, i), w->arg);
}
static void walk_heap(hak_heap_t* h, void* arg) {
  slab_walk_t* w = arg;
  if (!w->locked) hak_lock(&pool_lock);
  w->locked = true;
  for (hak_member_t* m = h->members; m != NULL; m = m->next) walk_mask(hak_segment_of(m), &m->mask, w);
}
void _hak_pool_foreach_slab(void (*fn)(hak_slab_t*, void*), void* arg) {
  slab_walk_t w = {fn, arg, false};
  _hak_heaps_foreach(walk_heap, &w);
  if (!w.locked) hak_lock(&pool_lock);
  for (hak_segment_t* seg = pool_abandoned; seg != NULL; seg = seg->pool.abnext) {
    hak_member_t* a = member_of(seg, NULL);
    if (a != NULL) walk_mask(seg, &a->mask, &w);
  }
  hak_unlock(&pool_lock);
}

void _hak_pool_fork_prepare(void) { hak_lock(&pool_lock); }
void _hak_pool_fork_parent(void) { hak_unlock(&pool_lock); }
void _hak_pool_fork_child(void) { pthread_mutex_init(&pool_lock, NULL); }
