/* The small tier's inline helpers (layer 4, with slab.c, remote.c and
 * heap.c): a heap's slab lists, the owner's entry to its slow paths, the one
 * pop shared by malloc's fast path and its refill, and the empty test.  The
 * functions of those files are declared in internal.h. */
#ifndef HAK_SLAB_H
#define HAK_SLAB_H
#include "internal.h"

/* ---------------------------------------------------------------- a heap's slab lists */
static inline void hak_list_remove(hak_slab_t** head, hak_slab_t* s) {
  if (s->prev) s->prev->next = s->next;
  else *head = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = NULL;
}
static inline void hak_list_push(hak_slab_t** head, hak_slab_t* s) {
  s->prev = NULL;
  s->next = *head;
  if (*head) (*head)->prev = s;
  *head = s;
}
/* The avail list of a class has cur[cls] as head (empty: &_hak_slab_empty)
 * and tail[cls] as its last slab. */
hak_warm static inline void hak_avail_remove(hak_heap_t* h, hak_slab_t* s) {
  hak_slab_t* head = h->cls[s->cls].cur == &_hak_slab_empty ? NULL : h->cls[s->cls].cur;
  if (h->tail[s->cls] == s) h->tail[s->cls] = s->prev;
  hak_list_remove(&head, s);
  h->cls[s->cls].cur = head ? head : &_hak_slab_empty;
}
static inline void hak_avail_push(hak_heap_t* h, hak_slab_t* s) {
  hak_slab_t* head = h->cls[s->cls].cur == &_hak_slab_empty ? NULL : h->cls[s->cls].cur;
  if (head == NULL) h->tail[s->cls] = s;
  hak_list_push(&head, s);
  h->cls[s->cls].cur = head;
}
static inline void hak_avail_append(hak_heap_t* h, hak_slab_t* s) {
  hak_slab_t* tail = h->tail[s->cls];
  if (tail == NULL) {
    hak_avail_push(h, s);
    return;
  }
  s->next = NULL;
  s->prev = tail;
  tail->next = s;
  h->tail[s->cls] = s;
}
static inline void hak_avail_clear(hak_heap_t* h, size_t cls) {
  h->cls[cls].cur = &_hak_slab_empty;
  h->tail[cls] = NULL;
}

/* ---------------------------------------------------------------- the owner's slow paths */
/* The owner enters and leaves its slow paths (every change to its lists,
 * slabs and member entries happens between the two); nested calls count.
 * A thread that gives back an idle heap's emptied slabs holds xbusy while
 * it does: the owner waits for it here (heap.c, idle heaps). */
hak_inline void hak_heap_enter(hak_heap_t* h) {
  if (h == &_hak_heap_empty || h->busy_depth++ != 0) return;
  /* while park.c holds the heap, only a thread whose heap pointer it moved
   * aside may wait here (init.c): any other entry ran on a heap taken */
  hak_assert(!__atomic_load_n(&h->thread.parking, __ATOMIC_RELAXED) || hak_heap_get() == &_hak_heap_empty);
  if (hak_unlikely(atomic_exchange_explicit(&h->xbusy, 1, memory_order_acquire) != 0)) _hak_heap_wait(h);
  hak_store_relaxed(&h->slow_n, hak_load_relaxed(&h->slow_n) + 1);
}
hak_inline void hak_heap_leave(hak_heap_t* h) {
  if (h == &_hak_heap_empty || --h->busy_depth != 0) return;
  atomic_store_explicit(&h->xbusy, 0, memory_order_release);
}

/* ---------------------------------------------------------------- blocks out */
/* Hand out the first free block of slab s (class cls) for a request of req
 * bytes: the one pop shared by the fast path and the refill path. */
hak_inline hak_block_t* hak_slab_pop(hak_heap_cls_t* e, hak_slab_t* s, hak_block_t* b, size_t req) {
  if (HAK_SECURE) {
    uint32_t bsize = s->bsize;
    uintptr_t n = (uintptr_t)b->next ^ _hak_list_key ^ (uintptr_t)b;
    s->free = (hak_block_t*)n;   /* before the check (frees a register); the slow path redoes it */
    if (hak_unlikely(hak_secure_pop_bad(b, bsize, n) != 0)) return (hak_block_t*)_hak_secure_pop_slow(s, b, req);
    hak_used_add(s, 1);
    hak_secure_pop_mark(bsize, b, req);
  } else {
    s->free = hak_block_next(b);
    hak_used_add(s, 1);
    b->cookie = 0;
  }
  hak_counter_inc(&e->nmalloc);
  return b;
}

/* used == 0: no block out, unless a block scavenging took off the free list
 * was freed again (_hak_scavenge_verify: reported, counted back) */
hak_inline bool hak_slab_is_empty(hak_slab_t* s) {
  return s->used == 0 && (HAK_SECURE || hak_segment_of(s)->nphantom[hak_slot_of(hak_slab_index(s))] == 0 || _hak_scavenge_verify(s));
}

#endif /* HAK_SLAB_H */
