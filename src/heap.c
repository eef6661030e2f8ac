/* Per-thread heaps: the static empty heap a new thread starts on, the pool
 * of heaps (made in 64-byte strides, reused after thread exit), thread exit
 * (a heap's slabs handed to the abandoned list), adoption of exited threads'
 * slabs, the collection of everything a heap holds empty, and fork. */
#include "internal.h"
#include "slab.h"
#include <sched.h>

hak_heap_t _hak_heap_empty = {.direct = {[0 ... HAK_DIRECT_N - 1] = &_hak_heap_empty.cls[0]},
                              .cls = {[0 ... HAK_NCLASSES - 1] = {.cur = &_hak_slab_empty}}};
__thread hak_heap_t* _hak_tls_heap __attribute__((tls_model("initial-exec"))) = &_hak_heap_empty;
/* The heap the thread owns (NULL: none yet, or it exited).  _hak_tls_heap
 * is the same heap but for a moment while park.c hands a sleeping thread's
 * slabs over: then the empty heap, so that a thread waking meanwhile takes
 * the slow path and waits (init.c). */
__thread hak_heap_t* _hak_tls_own __attribute__((tls_model("initial-exec")));
/* ---------------------------------------------------------------- heap pool */
static pthread_mutex_t heap_lock = PTHREAD_MUTEX_INITIALIZER;
static hak_heap_t* heap_pool;      /* released heaps */
static hak_heap_t* heap_all;       /* every heap ever made */
static uint8_t* heap_chunk;
static size_t heap_chunk_left;
#define HEAP_STRIDE hak_align_up(sizeof(hak_heap_t), 64)
#define HEAP_CHUNK ((size_t)64 << 10)   /* heaps are mapped this many bytes at a time */

/* A heap from the pool is reset whole; a new one is zero already (a fresh
 * mapping), and only its nonzero fields are written, so that the pages of
 * what it does not use yet (lending, profiling) stay untouched. */
static void heap_init_fresh(hak_heap_t* h) {
  for (size_t c = 0; c < HAK_NCLASSES; c++) hak_avail_clear(h, c);
}
static void heap_reset(hak_heap_t* h) {
  for (size_t c = 0; c < HAK_NCLASSES; c++) {
    hak_avail_clear(h, c);
    h->lend.slab[c] = NULL;
    h->lend.n[c] = h->lend.used[c] = 0;
    h->tick.nmalloc[c] = 0;
    hak_counter_set(&h->cls[c].nmalloc, 0);
  }
  h->full = NULL;
  h->members = NULL;
  h->nsegs = 0;
  h->tick.next_ms = 0;
  h->scav.next_ms = h->scav.gap_ms = 0;
  h->no_resident = 0;
  hak_store_relaxed(&h->xremote_hint, 0);
  hak_store_relaxed(&h->slow_n, 0);
  h->idle_seen = 0;
  h->busy_depth = 0;
  h->sample_left = 0;
  memset(&h->sample, 0, sizeof h->sample);
}

hak_warm hak_heap_t* _hak_heap_acquire(void) {
  hak_lock(&heap_lock);
  hak_heap_t* h = heap_pool;
  bool fresh = h == NULL;
  if (h != NULL) {
    heap_pool = h->next_free;
  } else {
    if (heap_chunk_left < HEAP_STRIDE) {
      heap_chunk = _hak_os_map(HEAP_CHUNK, NULL);
      heap_chunk_left = heap_chunk ? HEAP_CHUNK : 0;
    }
    if (heap_chunk_left >= HEAP_STRIDE) {
      h = (hak_heap_t*)heap_chunk;
      heap_chunk += HEAP_STRIDE;
      heap_chunk_left -= HEAP_STRIDE;
      for (size_t i = 0; i < HAK_DIRECT_N; i++) h->direct[i] = &h->cls[_hak_class_small[i]];
      h->next_all = heap_all;
      heap_all = h;
    }
  }
  if (h != NULL) {
    if (fresh) heap_init_fresh(h);
    else heap_reset(h);
    h->in_use = 1;
  }
  hak_unlock(&heap_lock);
  return h;
}

static void heap_release_to_pool(hak_heap_t* h) {
  hak_lock(&heap_lock);
  h->in_use = 0;
  h->thread.slot = NULL;   /* the thread's slot is about to be freed with it: park.c keeps off */
  h->thread.tid = 0;
  h->next_free = heap_pool;
  heap_pool = h;
  hak_unlock(&heap_lock);
}

/* The owner names itself for park.c: where its heap pointer is, its thread
 * id, its signal mask. */
hak_warm void _hak_heap_bind(hak_heap_t* h, hak_heap_t** slot, int32_t tid, uint64_t mask) {
  hak_lock(&heap_lock);
  h->thread.slot = slot;
  h->thread.tid = tid;
  h->thread.mask = mask;
  __atomic_store_n(&h->thread.mask_stale, 0, __ATOMIC_RELAXED);
  h->thread.skip = h->thread.backoff = 0;
  hak_unlock(&heap_lock);
}

void _hak_heaps_foreach(void (*fn)(hak_heap_t*, void*), void* arg) {
  hak_lock(&heap_lock);
  for (hak_heap_t* h = heap_all; h; h = h->next_all) fn(h, arg);
  hak_unlock(&heap_lock);
}

/* ---------------------------------------------------------------- abandon / adopt */
static void slab_abandon(hak_heap_t* h, hak_slab_t* s) {
  _hak_slab_collect(s);
  if (hak_slab_is_empty(s)) {
    _hak_slab_release(h, s);
    return;
  }
  atomic_store_explicit(&s->xowner, HAK_OWNER_ABANDONED, memory_order_seq_cst);
  atomic_fetch_add_explicit(&_hak_stat_abandon_pages, s->npages, memory_order_relaxed);
  atomic_fetch_add_explicit(&_hak_abandoned_pages, s->npages, memory_order_relaxed);
}

/* Every slab of h to the abandoned list, its segments with them (h keeps
 * none; the empty ones are given back); h's xbusy held. */
static void heap_abandon_slabs(hak_heap_t* h) {
  for (size_t c = 0; c < HAK_NCLASSES; c++) {
    hak_slab_t* s = h->cls[c].cur == &_hak_slab_empty ? NULL : h->cls[c].cur;
    hak_avail_clear(h, c);
    while (s) {
      hak_slab_t* next = s->next;
      s->next = s->prev = NULL;
      slab_abandon(h, s);
      s = next;
    }
    h->lend.slab[c] = NULL;   /* (loans: from slabs that are not h's now) */
  }
  hak_slab_t* s = h->full;
  h->full = NULL;
  while (s) {
    hak_slab_t* next = s->next;
    s->next = s->prev = NULL;
    slab_abandon(h, s);
    s = next;
  }
  _hak_pool_abandon(h);
}

/* Hand every slab and segment of h to the abandoned list; h goes back to the
 * pool.  Called at thread exit, by the owner inside hak_heap_enter (init.c),
 * whose hak_heap_leave this makes. */
hak_warm void _hak_heap_abandon(hak_heap_t* h) {
  if (h == NULL || h == &_hak_heap_empty) return;
  hak_assert_cmp(h->in_use, ==, 1);
  hak_assert_cmp(h->busy_depth, ==, 1);
  _hak_mesh_heap_exit(h);   /* meshed slabs become ordinary ones: nobody owns them next */
  heap_abandon_slabs(h);
  for (size_t c = 0; c < HAK_NCLASSES; c++) {
    atomic_fetch_add_explicit(&_hak_stat_nmalloc_dead[c], h->cls[c].nmalloc, memory_order_relaxed);
    hak_counter_set(&h->cls[c].nmalloc, 0);
  }
  atomic_fetch_add_explicit(&_hak_stat_refills_dead, h->refills, memory_order_relaxed);
  hak_counter_set(&h->refills, 0);
  hak_heap_leave(h);   /* h has no slab left; the next thread to take it waits on nothing */
  heap_release_to_pool(h);
  _hak_pool_abandoned_tick(false);   /* a thread exit is a slow path too: collect what others freed into exited threads' slabs */
}

/* A sleeping thread's heap, held by park.c (xbusy, and the thread's heap
 * pointer moved aside): its slabs become the process's, as at its exit, and
 * the heap stays the thread's, empty.  How many slabs it had. */
hak_warm size_t _hak_heap_give_slabs(hak_heap_t* h) {
  if (h->members == NULL) return 0;
  size_t n = 0;
  for (hak_member_t* m = h->members; m != NULL; m = m->next) n += m->used;
  heap_abandon_slabs(h);
  return n;
}

/* Abandoned slab s is h's now: collect it, release it when empty (true:
 * that was h's last slab in its segment, which may be gone), else put it on
 * h's lists. */
static bool heap_adopt_one(hak_heap_t* h, hak_slab_t* s) {
  hak_assert_cmp(hak_load_relaxed(&s->xowner), ==, HAK_OWNER_ABANDONED);
  atomic_fetch_sub_explicit(&_hak_abandoned_pages, s->npages, memory_order_relaxed);
  atomic_store_explicit(&s->xowner, (uintptr_t)h, memory_order_seq_cst);
  s->next = s->prev = NULL;
  if (!_hak_slab_collect(s)) _hak_slab_look_again(s, h);
  if (hak_slab_is_empty(s)) return _hak_slab_release(h, s);
  atomic_fetch_add_explicit(&_hak_stat_adopt_pages, s->npages, memory_order_relaxed);
  if (s->free != NULL || hak_slab_bump(s, s->carved) < hak_slab_limit(s)) {
    hak_avail_push(h, s);
  } else {
    _hak_slab_to_full(h, s);
  }
  return false;
}

/* The abandoned slabs `mask` of seg are h's now (pool.c, _hak_pool_adopt):
 * collect each, release the empty ones, put the rest on h's lists. */
void _hak_heap_adopt(hak_heap_t* h, hak_segment_t* seg, const hak_pset_t* mask) {
  hak_pset_t stale;
  _hak_seg_take_remote(seg, mask, &stale);   /* every slab is collected below: their bits are stale */
  for (size_t i = hak_pset_next(mask, 0); i < HAK_PAGES_PER_SEG; i = hak_pset_next(mask, i + 1))
    if (heap_adopt_one(h, hak_slab_at(seg, i))) break;   /* the segment may be gone */
}

/* One abandoned slab of the class h needs (pool.c chose it). */
void _hak_heap_adopt_slab(hak_heap_t* h, hak_slab_t* s) {
  hak_pset_t one = {{0}}, stale;
  hak_pset_add(&one, hak_slab_index(s));
  _hak_seg_take_remote(hak_segment_of(s), &one, &stale);
  heap_adopt_one(h, s);
}

/* Release what this heap holds empty: collect remote frees, release empty
 * slabs (including the one kept per class), and adopt abandoned segments so
 * their empty slabs are released too. */
void _hak_collect_heap(hak_heap_t* h) {
  if (h == &_hak_heap_empty) return;
  hak_heap_enter(h);
  hak_segment_t* ab;
  hak_pset_t abmask;
  while ((ab = _hak_pool_adopt(h, 0, &abmask)) != NULL) _hak_heap_adopt(h, ab, &abmask);
  _hak_heap_collect_remote(h);
  for (size_t c = 0; c < HAK_NCLASSES; c++) {
    hak_slab_t* s = h->cls[c].cur == &_hak_slab_empty ? NULL : h->cls[c].cur;
    while (s) {
      hak_slab_t* next = s->next;
      _hak_slab_collect(s);
      if (hak_slab_is_empty(s)) {
        hak_avail_remove(h, s);
        _hak_slab_release(h, s);
      }
      s = next;
    }
  }
  _hak_mesh_pass(h, true);
  _hak_scavenge_pass(h, true);
  _hak_pool_tick(_hak_clock_ms(), 0, true);
  hak_heap_leave(h);
}

/* ---------------------------------------------------------------- idle heaps */
/* Only an owner takes remote frees in, so the blocks other threads free into
 * the slabs of a thread that stopped calling malloc stay resident, and no
 * heap can reuse their pages: a main thread that built the data and now
 * waits while its workers free it kept it all (larson: 6 MB of 24).  So,
 * every eighth of a decommit delay (release.c, from any heap's release tick
 * or the background clock) and before a heap maps a new segment (refill.c),
 * each heap whose owner entered no slow path since the last look and has
 * remote frees waiting is locked -- xbusy, which the owner
 * takes on each slow path, tried, never waited for -- and its slabs whose
 * every block out is on their remote list go back to the pool.  The owner's
 * fast paths may run meanwhile: malloc touches a class's current slab, never
 * taken here; free touches a slab it has a live block in, and these have
 * none.  The used count is read with acquire: it is stored with release
 * (internal.h, hak_used_add), so the owner's last free into the slab is
 * complete when it reads as the remote list's length. */
_Atomic(uint64_t) _hak_stat_idle_slabs, _hak_stat_idle_pages;

static unsigned idle_take(hak_heap_t* h, hak_slab_t* s) {
  uintptr_t xo = hak_load_relaxed(&s->xowner);
  if ((xo & ~HAK_OWNER_FULL) != (uintptr_t)h || h->cls[s->cls].cur == s) return 0;   /* (flags: mesh, profiler) */
  hak_segment_t* seg = hak_segment_of(s);
  size_t idx = hak_slab_index(s);
  if (hak_pset_has_atomic(&seg->mesh.pages, idx) || seg->nphantom[hak_slot_of(idx)] != 0) return 0;
  uintptr_t v = atomic_load_explicit(&s->xthread_free, memory_order_acquire);
  if (v == 0 || (v & HAK_XF_NOTIFYING) || hak_xf_count(v) != __atomic_load_n(&s->used, __ATOMIC_ACQUIRE)) return 0;
  /* no block of it is out: take its remote list (its blocks go with it) */
  if (!atomic_compare_exchange_strong_explicit(&s->xthread_free, &v, 0, memory_order_acquire, memory_order_relaxed))
    return 0;
  if (xo & HAK_OWNER_FULL) hak_list_remove(&h->full, s);
  else hak_avail_remove(h, s);   /* not the head: the current slab stays */
  _hak_slab_forget(h, s);
  unsigned n = s->npages;
  _hak_slab_clear(s);
  atomic_fetch_add_explicit(&_hak_stat_idle_slabs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&_hak_stat_idle_pages, n, memory_order_relaxed);
  return n;
}

/* Returns the slabs given back (0 also when it is not yet time to look). */
hak_warm size_t _hak_heaps_idle_tick(uint64_t now, uint64_t delay) {
  static _Atomic(uint64_t) next_ms;
  if (hak_opt(MESH)) return 0;   /* compaction keeps slabs of its own in view (mesh.c) */
  uint64_t due = hak_load_relaxed(&next_ms);
  if (now < due || !atomic_compare_exchange_strong(&next_ms, &due, now + (delay / 8 > 1 ? delay / 8 : 1))) return 0;
  size_t given = 0;
  hak_heap_t* self = hak_heap_get();
  hak_lock(&heap_lock);
  for (hak_heap_t* h = heap_all; h != NULL; h = h->next_all) {
    if (!h->in_use || h == self) continue;
    uint64_t n = hak_load_relaxed(&h->slow_n);
    bool idle = n == h->idle_seen;
    h->idle_seen = n;
    if (!idle || !hak_load_relaxed(&h->xremote_hint)) continue;
    uint32_t free_ = 0;
    if (!atomic_compare_exchange_strong_explicit(&h->xbusy, &free_, 1, memory_order_acquire, memory_order_relaxed)) continue;
    given += _hak_pool_give_taken(h, idle_take);
    atomic_store_explicit(&h->xbusy, 0, memory_order_release);
  }
  hak_unlock(&heap_lock);
  return given;
}

/* The owner found its heap held by an idle tick: it lasts a walk of the
 * heap's slabs. */
void _hak_heap_wait(hak_heap_t* h) {
  for (unsigned i = 0; atomic_exchange_explicit(&h->xbusy, 1, memory_order_acquire) != 0; i++) {
    if (i < 64) __builtin_ia32_pause();
    else sched_yield();
  }
}

/* ---------------------------------------------------------------- fork */
void _hak_heaps_fork_prepare(void) { hak_lock(&heap_lock); }
void _hak_heaps_fork_parent(void) { hak_unlock(&heap_lock); }
void _hak_heaps_fork_child(hak_heap_t* self) {
  /* The other threads' heaps are left as they are: they may have been in the
   * middle of a list update when fork() ran, so walking them is not safe.
   * Their blocks stay valid; frees of them from the child go the remote way. */
  pthread_mutex_init(&heap_lock, NULL);
  /* the other threads are gone: their heaps are never locked out again nor
   * given back (one may be mid-change); ours is the forking thread's, in no
   * slow path */
  for (hak_heap_t* h = heap_all; h != NULL; h = h->next_all) {
    hak_store_relaxed(&h->xbusy, h->in_use && h != self ? 1u : 0u);
    if (h != self) h->thread.slot = NULL;   /* (park.c: a dead thread's slot may be a new thread's) */
  }
  if (self != NULL && self != &_hak_heap_empty) self->busy_depth = 0;
  /* A thread that was notifying a remote free into one of our slabs does
   * not exist here: clear its tag, or the slab's remote list (and every
   * remote free into it from the child's threads) would never be collected. */
  if (self == NULL || self == &_hak_heap_empty) return;
  for (hak_member_t* m = self->members; m != NULL; m = m->next)
    for (size_t i = hak_pset_next(&m->mask, 0); i < HAK_PAGES_PER_SEG; i = hak_pset_next(&m->mask, i + 1)) {
      hak_slab_t* s = hak_slab_at(hak_segment_of(m), i);
      uintptr_t v = hak_load_relaxed(&s->xthread_free);
      if (!(v & HAK_XF_NOTIFYING)) continue;   /* read only: no copy-on-write fault */
      hak_store_relaxed(&s->xthread_free, v & ~HAK_XF_NOTIFYING);
      _hak_slab_rearm(s, self);
    }
}
