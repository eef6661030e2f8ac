/* Per-thread heaps: the static empty heap a new thread starts on, the pool
 * of heaps (made in 64-byte strides, reused after thread exit), thread exit
 * (a heap's slabs handed to the abandoned list), adoption of exited threads'
 * slabs, the collection of everything a heap holds empty, and fork. */
#include "internal.h"

hak_heap_t _hak_heap_empty = {.direct = {[0 ... HAK_DIRECT_N - 1] = &_hak_heap_empty.cls[0]},
                              .cls = {[0 ... HAK_NCLASSES - 1] = {.cur = &_hak_slab_empty}}};
__thread hak_heap_t* _hak_tls_heap __attribute__((tls_model("initial-exec"))) = &_hak_heap_empty;
/* ---------------------------------------------------------------- heap pool */
static pthread_mutex_t heap_lock = PTHREAD_MUTEX_INITIALIZER;
static hak_heap_t* heap_pool;      /* released heaps */
static hak_heap_t* heap_all;       /* every heap ever made */
static uint8_t* heap_chunk;
static size_t heap_chunk_left;
#define HEAP_STRIDE hak_align_up(sizeof(hak_heap_t), 64)

static void heap_reset(hak_heap_t* h) {
  for (size_t c = 0; c < HAK_NCLASSES; c++) {
    avail_clear(h, c);
    h->borrow[c] = NULL;
    h->borrow_n[c] = h->borrow_used[c] = 0;
    h->tick_nmalloc[c] = 0;
    hak_counter_set(&h->cls[c].nmalloc, 0);
  }
  h->full = NULL;
  h->members = NULL;
  h->nsegs = 0;
  h->next_release_ms = 0;
  h->scav_next_ms = h->scav_gap_ms = 0;
  h->no_resident = 0;
  hak_store_relaxed(&h->xremote_hint, 0);
  memset(&h->prof, 0, sizeof h->prof);
}

hak_heap_t* _hak_heap_acquire(void) {
  hak_lock(&heap_lock);
  hak_heap_t* h = heap_pool;
  if (h != NULL) {
    heap_pool = h->next_free;
  } else {
    if (heap_chunk_left < HEAP_STRIDE) {
      heap_chunk = _hak_os_map(HAK_PAGE_SIZE, NULL);
      heap_chunk_left = heap_chunk ? HAK_PAGE_SIZE : 0;
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
    heap_reset(h);
    h->in_use = 1;
  }
  hak_unlock(&heap_lock);
  return h;
}

static void heap_release_to_pool(hak_heap_t* h) {
  hak_lock(&heap_lock);
  h->in_use = 0;
  h->next_free = heap_pool;
  heap_pool = h;
  hak_unlock(&heap_lock);
}

void _hak_heaps_foreach(void (*fn)(hak_heap_t*, void*), void* arg) {
  hak_lock(&heap_lock);
  for (hak_heap_t* h = heap_all; h; h = h->next_all) fn(h, arg);
  hak_unlock(&heap_lock);
}

/* ---------------------------------------------------------------- abandon / adopt */
static void slab_abandon(hak_heap_t* h, hak_slab_t* s) {
  slab_collect(s);
  if (hak_slab_is_empty(s)) {
    slab_release(h, s);
    return;
  }
  atomic_store_explicit(&s->xowner, HAK_OWNER_ABANDONED, memory_order_seq_cst);
  atomic_fetch_add_explicit(&_hak_stat_abandon_pages, s->npages, memory_order_relaxed);
  atomic_fetch_add_explicit(&_hak_abandoned_pages, s->npages, memory_order_relaxed);
}

/* Hand every slab and segment of h to the abandoned list; h goes back to the
 * pool.  Called at thread exit, and in a fork child for the other threads. */
void _hak_heap_abandon(hak_heap_t* h) {
  if (h == NULL || h == &_hak_heap_empty) return;
  hak_assert_cmp(h->in_use, ==, 1);
  _hak_mesh_heap_exit(h);   /* meshed slabs become ordinary ones: nobody owns them next */
  for (size_t c = 0; c < HAK_NCLASSES; c++) {
    hak_slab_t* s = h->cls[c].cur == &_hak_slab_empty ? NULL : h->cls[c].cur;
    avail_clear(h, c);
    while (s) {
      hak_slab_t* next = s->next;
      s->next = s->prev = NULL;
      slab_abandon(h, s);
      s = next;
    }
    atomic_fetch_add_explicit(&_hak_stat_nmalloc_dead[c], h->cls[c].nmalloc, memory_order_relaxed);
    hak_counter_set(&h->cls[c].nmalloc, 0);
  }
  atomic_fetch_add_explicit(&_hak_stat_refills_dead, h->refills, memory_order_relaxed);
  hak_counter_set(&h->refills, 0);
  hak_slab_t* s = h->full;
  h->full = NULL;
  while (s) {
    hak_slab_t* next = s->next;
    s->next = s->prev = NULL;
    slab_abandon(h, s);
    s = next;
  }
  _hak_pool_abandon(h);
  heap_release_to_pool(h);
  _hak_pool_abandoned_tick(false);   /* a thread exit is a slow path too: collect what others freed into exited threads' slabs */
}

/* The abandoned slabs `mask` of seg are h's now (pool.c, _hak_pool_adopt):
 * collect each, release the empty ones, put the rest on h's lists. */
static void heap_adopt(hak_heap_t* h, hak_segment_t* seg, uint64_t mask) {
  seg_take_remote(seg, mask);   /* every slab is collected below: their bits are stale */
  for (uint64_t bits = mask; bits != 0; bits &= bits - 1) {
    hak_slab_t* s = &seg->slabs[__builtin_ctzll(bits)];
    hak_assert_cmp(hak_load_relaxed(&s->xowner), ==, HAK_OWNER_ABANDONED);
    atomic_fetch_sub_explicit(&_hak_abandoned_pages, s->npages, memory_order_relaxed);
    atomic_store_explicit(&s->xowner, (uintptr_t)h, memory_order_seq_cst);
    s->next = s->prev = NULL;
    if (!slab_collect(s)) slab_look_again(s, h);
    if (hak_slab_is_empty(s)) {
      if (slab_release(h, s)) break;   /* h's last slab there: the segment may be gone */
      continue;
    }
    atomic_fetch_add_explicit(&_hak_stat_adopt_pages, s->npages, memory_order_relaxed);
    if (s->free != NULL || hak_slab_bump(s, s->carved) < hak_slab_limit(s)) {
      avail_push(h, s);
    } else {
      slab_to_full(h, s);
    }
  }
}

/* Release what this heap holds empty: collect remote frees, release empty
 * slabs (including the one kept per class), and adopt abandoned segments so
 * their empty slabs are released too. */
void _hak_collect_heap(hak_heap_t* h) {
  if (h == &_hak_heap_empty) return;
  hak_segment_t* ab;
  uint64_t abmask;
  while ((ab = _hak_pool_adopt(h, 0, &abmask)) != NULL) heap_adopt(h, ab, abmask);
  heap_collect_remote(h);
  for (size_t c = 0; c < HAK_NCLASSES; c++) {
    hak_slab_t* s = h->cls[c].cur == &_hak_slab_empty ? NULL : h->cls[c].cur;
    while (s) {
      hak_slab_t* next = s->next;
      slab_collect(s);
      if (hak_slab_is_empty(s)) {
        avail_remove(h, s);
        slab_release(h, s);
      }
      s = next;
    }
  }
  _hak_mesh_pass(h, true);
  _hak_scavenge_pass(h, true);
  _hak_pool_tick(_hak_clock_ms(), 0, true);
}

/* ---------------------------------------------------------------- fork */
void _hak_heaps_fork_prepare(void) { hak_lock(&heap_lock); }
void _hak_heaps_fork_parent(void) { hak_unlock(&heap_lock); }
void _hak_heaps_fork_child(hak_heap_t* self) {
  /* The other threads' heaps are left as they are: they may have been in the
   * middle of a list update when fork() ran, so walking them is not safe.
   * Their blocks stay valid; frees of them from the child go the remote way. */
  pthread_mutex_init(&heap_lock, NULL);
  /* A thread that was notifying a remote free into one of our slabs does
   * not exist here: clear its tag, or the slab's remote list (and every
   * remote free into it from the child's threads) would never be collected. */
  if (self == NULL || self == &_hak_heap_empty) return;
  for (hak_member_t* m = self->members; m != NULL; m = m->next)
    for (uint64_t bits = m->mask; bits != 0; bits &= bits - 1) {
      hak_slab_t* s = &hak_segment_of(m)->slabs[__builtin_ctzll(bits)];
      uintptr_t v = hak_load_relaxed(&s->xthread_free);
      if (!(v & HAK_XF_NOTIFYING)) continue;   /* read only: no copy-on-write fault */
      hak_store_relaxed(&s->xthread_free, v & ~HAK_XF_NOTIFYING);
      slab_rearm(s, self);
    }
}
