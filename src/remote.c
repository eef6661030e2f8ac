/* Remote frees: a free into another thread's (or an exited thread's) slab
 * is pushed lock-free on the slab's xthread_free list, and the owner is told
 * by a bit in the segment and a hint in its heap; the owner (or, for exited
 * threads' slabs, the pool's clock) takes the lists in bulk. */
#include "internal.h"
#include "slab.h"

/* A slab whose remote list _hak_slab_collect left because its notifier is not
 * done (the bit it set may be taken already): set its bit again and raise
 * the hint, so that the collector looks again. */
void _hak_slab_rearm(hak_slab_t* s, hak_heap_t* owner /* NULL: abandoned */) {
  size_t idx = hak_slab_index(s);
  atomic_fetch_or_explicit(&hak_segment_of(s)->xremote[idx >> 6], (uint64_t)1 << (idx & 63), memory_order_relaxed);
  if (owner != NULL) hak_store_relaxed(&owner->xremote_hint, 1);
  else hak_store_relaxed(&_hak_abandoned_hint, 1);
}
void _hak_slab_look_again(hak_slab_t* s, hak_heap_t* owner /* NULL: abandoned */) {
  if (hak_load_relaxed(&s->xthread_free) & HAK_XF_NOTIFYING) _hak_slab_rearm(s, owner);
}
/* Where memory of threads sits (stats.c): slabs emptied by remote frees and
 * given back; slab pages handed over at thread exit and taken by adopters. */
_Atomic(uint64_t) _hak_stat_reclaimed_slabs, _hak_stat_reclaimed_pages, _hak_stat_abandon_pages, _hak_stat_adopt_pages;
static void stat_reclaimed(const hak_slab_t* s) {
  atomic_fetch_add_explicit(&_hak_stat_reclaimed_slabs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&_hak_stat_reclaimed_pages, s->npages, memory_order_relaxed);
}

/* Take the remote-free bits of the slabs `mask` of seg (the segment's other
 * bits are other heaps' slabs', or abandoned ones): *taken, those set, now
 * cleared; false when none was. */
bool _hak_seg_take_remote(hak_segment_t* seg, const hak_pset_t* mask, hak_pset_t* taken) {
  uint64_t any = 0;
  for (size_t k = 0; k < HAK_PSET_WORDS; k++) {
    uint64_t bits = mask->w[k] ? hak_load_relaxed(&seg->xremote[k]) & mask->w[k] : 0;
    if (bits != 0) atomic_fetch_and_explicit(&seg->xremote[k], ~bits, memory_order_acquire);
    taken->w[k] = bits;
    any |= bits;
  }
  return any != 0;
}

/* The owner takes the slabs that got remote frees (segment bits, raised with
 * the heap's hint by _hak_remote_push): collects them, puts full ones that got
 * blocks back on their class list and releases the others the remote frees
 * emptied.
 * Without this, a slab freed entirely by other threads stays counted as used
 * until its class happens to reach it, and pins its pages and its segment. */
void _hak_heap_collect_remote(hak_heap_t* h) {
  hak_store_relaxed(&h->xremote_hint, 0);
  atomic_thread_fence(memory_order_seq_cst);   /* pairs with remote_notify: bit, then hint */
  for (hak_member_t *m = h->members, *mnext; m != NULL; m = mnext) {
    mnext = m->next;   /* m goes when its last slab is released below (and its segment may) */
    hak_segment_t* seg = hak_segment_of(m);
    hak_pset_t bits;
    if (!_hak_seg_take_remote(seg, &m->mask, &bits)) continue;
    for (size_t i = hak_pset_next(&bits, 0); i < HAK_PAGES_PER_SEG; i = hak_pset_next(&bits, i + 1)) {
      hak_slab_t* s = hak_slab_at(seg, i);
      uintptr_t xo = hak_load_relaxed(&s->xowner);
      hak_assert_cmp(xo & ~HAK_OWNER_FLAGS, ==, (uintptr_t)h);
      if (xo & HAK_OWNER_MESHED) {
        /* frees into a meshed-away slab go to its root (mesh.c); when it
         * holds no block any more its page comes back here */
        if (_hak_mesh_collect_alias(h, s) && _hak_slab_release(h, s)) break;
        continue;
      }
      if (!_hak_slab_collect(s)) {
        _hak_slab_look_again(s, h);
        continue;
      }
      /* a full slab was filled lately, so its class is allocating: it goes
       * back on the class list however many blocks came back (releasing
       * the emptied ones made a producer whose blocks all come back
       * re-carve new slabs 4 KiB at a time: xthread +11 % instructions);
       * a slab that sat on the class list and emptied is released */
      if (xo & HAK_OWNER_FULL) {
        _hak_slab_unfull(h, s);
      } else if (hak_slab_is_empty(s)) {
        stat_reclaimed(s);
        /* the heap's last slab in the segment: m is gone (maybe the segment) */
        if (_hak_slab_retire(h, s) == 2) break;
      }
    }
  }
}

/* Abandoned slabs `mask` of seg (pool.c calls this under its lock: no heap
 * owns them): collect their remote frees; the slabs those emptied, whose
 * pages the caller gives back, so memory of exited threads follows the
 * frees even when no thread adopts it. */
void _hak_abandoned_collect(hak_segment_t* seg, const hak_pset_t* mask, hak_pset_t* emptied) {
  hak_pset_t bits;
  memset(emptied, 0, sizeof *emptied);
  if (!_hak_seg_take_remote(seg, mask, &bits)) return;
  for (size_t idx = hak_pset_next(&bits, 0); idx < HAK_PAGES_PER_SEG; idx = hak_pset_next(&bits, idx + 1)) {
    hak_slab_t* s = hak_slab_at(seg, idx);
    if (hak_load_relaxed(&s->xowner) != HAK_OWNER_ABANDONED) continue;
    if (!_hak_slab_collect(s)) {
      _hak_slab_look_again(s, NULL);
      continue;
    }
    if (!hak_slab_is_empty(s)) continue;
    stat_reclaimed(s);
    hak_pset_add(emptied, idx);
  }
}
/* The first remote free into a slab since its owner collected it: set the
 * slab's bit in its segment, then raise the owner's hint (both seq_cst: the
 * owner clears the hint before it takes the bits, so a bit it misses leaves
 * the hint raised).  An abandoned slab has no owner to tell: the clock of
 * abandoned segments (segment.c) is told instead, and an adopter collects
 * every slab anyway. */
static void remote_notify(hak_slab_t* s) {
  hak_segment_t* seg = hak_segment_of(s);
  size_t idx = hak_slab_index(s);
  _Atomic(uint64_t)* word = &seg->xremote[idx >> 6];
  uint64_t bit = (uint64_t)1 << (idx & 63);
  if (hak_load_relaxed(word) & bit) return;   /* set and not yet taken: its setter raises the hint */
  atomic_fetch_or_explicit(word, bit, memory_order_seq_cst);
  uintptr_t xo = atomic_load_explicit(&s->xowner, memory_order_seq_cst);
  hak_heap_t* owner = (hak_heap_t*)(xo & ~HAK_OWNER_FLAGS);   /* heaps are 64-byte aligned */
  if (owner != NULL) {
    if (hak_load_relaxed(&owner->xremote_hint) == 0) hak_store_relaxed(&owner->xremote_hint, 1);
  } else if (xo == HAK_OWNER_ABANDONED && hak_load_relaxed(&_hak_abandoned_hint) == 0) {
    hak_store_relaxed(&_hak_abandoned_hint, 1);   /* for the abandoned segments' clock */
  }
}

void _hak_remote_push(hak_slab_t* s, hak_block_t* b) {
  if (!hak_slab_carved(s, b)) {
    _hak_invalid_pointer("free", b, "block was never allocated");
    return;
  }
  if (HAK_SECURE) {
    _hak_secure_free_remote(s, b, "free");   /* claims the trailer atomically */
  } else {
    if (b->cookie == hak_cookie()) {
      _hak_double_free("free", b, s->bsize);
      return;
    }
    b->cookie = hak_cookie();
  }
  /* The block is pushed before the owner is told, and once pushed the owner
   * may take it, empty the slab and unmap the segment: so the free that
   * makes the list non-empty pushes it tagged (the owner leaves a tagged
   * list alone), tells the owner, and clears the tag as its last touch of
   * the slab.  Later frees keep the tag and touch nothing after their push. */
  uintptr_t head = hak_load_relaxed(&s->xthread_free);
  for (;;) {
    if (hak_unlikely(head == 0)) {
      hak_fork_ready();   /* the tag below is what a child's handler clears */
      hak_block_set_next(b, NULL);
      if (atomic_compare_exchange_weak_explicit(&s->xthread_free, &head, hak_xf_push(HAK_XF_NOTIFYING, b),
                                                memory_order_seq_cst, memory_order_relaxed)) {
        remote_notify(s);
        atomic_fetch_and_explicit(&s->xthread_free, ~HAK_XF_NOTIFYING, memory_order_release);
        return;
      }
      continue;
    }
    hak_assert_cmp(hak_xf_count(head), <, hak_slab_limit(s) / s->bsize);   /* the list holds fewer blocks than the slab */
    hak_block_set_next(b, hak_xf_list(head));
    if (atomic_compare_exchange_weak_explicit(&s->xthread_free, &head, hak_xf_push(head, b), memory_order_seq_cst,
                                              memory_order_relaxed))
      return;
  }
}
