/* Per-thread heaps and their slabs: everything behind the malloc/free fast
 * paths.  A heap owns slabs, whose pages it takes from the process's page
 * pool (pool.c) and gives back as soon as they empty; each size class keeps
 * a list of slabs with room (cur[cls] is its head) and the heap keeps one
 * list of full slabs.  Remote frees are pushed lock-free on the slab's
 * xthread_free list; a remote free into a full slab raises the owner's hint
 * so the owner looks there before it takes new pages.  Exited threads'
 * slabs are adopted. */
#include "internal.h"
#include <errno.h>

hak_slab_t _hak_slab_empty;
hak_heap_t _hak_heap_empty = {.direct = {[0 ... HAK_DIRECT_N - 1] = &_hak_heap_empty.cls[0]},
                              .cls = {[0 ... HAK_NCLASSES - 1] = {.cur = &_hak_slab_empty}}};
__thread hak_heap_t* _hak_tls_heap __attribute__((tls_model("initial-exec"))) = &_hak_heap_empty;

/* ---------------------------------------------------------------- size class tables */
const uint32_t _hak_class_size[HAK_NCLASSES] = {
    16, 32, 48, 64, 80, 96, 112, 128, 144, 160,
    192, 224, 256, 272, 320, 384, 448, 512, 544, 640,
    768, 896, 1024, 1088, 1280, 1536, 1792, 2048, 2176, 2560,
    3072, 3584, 4096, 4352, 5120, 6144, 7168, 8192, 8704, 10240,
    12288, 14336, 16384, 17408, 20480, 24576, 28672, 32768, 34816, 40960,
    49152, 57344, 65536, 69632, 81920, 98304, 114688, 131072};
/* Pages per slab: the fewest that hold at least 4 blocks and leave at most
 * 1/16 of the slab over (a 7-page slab holds 4 blocks of 112 KiB exactly).
 * Until 2026-11-25 a slab held at least 8 blocks, in 1, 2, 4, 8 or 16 pages:
 * a thread that takes one 100 KiB block took a 1 MiB slab, and threads that
 * come and go each left such slabs partly used (churn_tasks: 42 MB peak RSS
 * against glibc's 34; now 33.5).  The secure build keeps 8 blocks: block 0
 * of its slabs is never handed out (an underflow check needs a block below). */
const uint8_t _hak_class_pages[HAK_NCLASSES] = {
#if HAK_SECURE
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 8, 8, 8, 8, 8, 16, 16, 16, 16, 16};
#else
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 2, 1, 3, 2, 2, 4, 2, 5, 4, 3, 7, 4, 9, 5, 6, 7, 8};
#endif
const uint8_t _hak_class_small[HAK_SMALL_FAST_MAX / 16 + 1] = {
    HAK_SECURE, HAK_SECURE, /* 0..32 (secure: no 16-byte class) */
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 11, 11, 12, 12, 13,
    14, 14, 14, 15, 15, 15, 15, 16, 16, 16, 16, 17, 17, 17, 17, 18,
    18, 19, 19, 19, 19, 19, 19, 20, 20, 20, 20, 20, 20, 20, 20, 21,
    21, 21, 21, 21, 21, 21, 21, 22, 22, 22, 22, 22, 22, 22, 22};

/* Above 1 KiB: the class of n by the doubling of n - 1 (from 2^10) and its
 * sixteenth within it -- each class ends on a sixteenth. */
const uint8_t _hak_class_mid[7 * 16] = {
    23, 24, 24, 24, 25, 25, 25, 25, 26, 26, 26, 26, 27, 27, 27, 27,
    28, 29, 29, 29, 30, 30, 30, 30, 31, 31, 31, 31, 32, 32, 32, 32,
    33, 34, 34, 34, 35, 35, 35, 35, 36, 36, 36, 36, 37, 37, 37, 37,
    38, 39, 39, 39, 40, 40, 40, 40, 41, 41, 41, 41, 42, 42, 42, 42,
    43, 44, 44, 44, 45, 45, 45, 45, 46, 46, 46, 46, 47, 47, 47, 47,
    48, 49, 49, 49, 50, 50, 50, 50, 51, 51, 51, 51, 52, 52, 52, 52,
    53, 54, 54, 54, 55, 55, 55, 55, 56, 56, 56, 56, 57, 57, 57, 57};

/* ---------------------------------------------------------------- slab helpers */
hak_inline hak_segment_t* slab_segment(const hak_slab_t* s) { return hak_segment_of(s); }

static void list_remove(hak_slab_t** head, hak_slab_t* s) {
  if (s->prev) s->prev->next = s->next;
  else *head = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = NULL;
}
static void list_push(hak_slab_t** head, hak_slab_t* s) {
  s->prev = NULL;
  s->next = *head;
  if (*head) (*head)->prev = s;
  *head = s;
}
/* The avail list of a class has cur[cls] as head (empty: &_hak_slab_empty)
 * and tail[cls] as its last slab. */
static void avail_remove(hak_heap_t* h, hak_slab_t* s) {
  hak_slab_t* head = h->cls[s->cls].cur == &_hak_slab_empty ? NULL : h->cls[s->cls].cur;
  if (h->tail[s->cls] == s) h->tail[s->cls] = s->prev;
  list_remove(&head, s);
  h->cls[s->cls].cur = head ? head : &_hak_slab_empty;
}
static void avail_push(hak_heap_t* h, hak_slab_t* s) {
  hak_slab_t* head = h->cls[s->cls].cur == &_hak_slab_empty ? NULL : h->cls[s->cls].cur;
  if (head == NULL) h->tail[s->cls] = s;
  list_push(&head, s);
  h->cls[s->cls].cur = head;
}
static void avail_append(hak_heap_t* h, hak_slab_t* s) {
  hak_slab_t* tail = h->tail[s->cls];
  if (tail == NULL) {
    avail_push(h, s);
    return;
  }
  s->next = NULL;
  s->prev = tail;
  tail->next = s;
  h->tail[s->cls] = s;
}
static void avail_clear(hak_heap_t* h, size_t cls) {
  h->cls[cls].cur = &_hak_slab_empty;
  h->tail[cls] = NULL;
}

/* A remote free list whose count and links disagree, or that holds more
 * blocks than the slab has out: a block freed twice from other threads, or
 * a link written over after a free. */
static hak_noinline hak_noreturn void slab_list_broken(const hak_slab_t* s) {
  _hak_fatal("hakmem: heap corruption: remote free list of slab %p is longer than its live blocks (double free from another thread?)\n", (const void*)s);
}

/* A slab whose remote list slab_collect left because its notifier is not
 * done (the bit it set may be taken already): set its bit again and raise
 * the hint, so that the collector looks again. */
static void slab_rearm(hak_slab_t* s, hak_heap_t* owner /* NULL: abandoned */) {
  atomic_fetch_or_explicit(&slab_segment(s)->xremote, (uint64_t)1 << hak_slab_index(s), memory_order_relaxed);
  if (owner != NULL) hak_store_relaxed(&owner->xremote_hint, 1);
  else hak_store_relaxed(&_hak_abandoned_hint, 1);
}
static void slab_look_again(hak_slab_t* s, hak_heap_t* owner /* NULL: abandoned */) {
  if (hak_load_relaxed(&s->xthread_free) & HAK_XF_NOTIFYING) slab_rearm(s, owner);
}

/* Move the remote frees into the owner's list; false when there were none,
 * or when their first freer is still notifying (it raises the hint again).
 * A list seen non-empty and untagged stays so until taken: only the owner
 * empties it, and the tag is set only on an empty list.  The list's length
 * comes with it (internal.h, HAK_XF_COUNT_SHIFT): a refill, which finds the
 * owner's list empty, takes it whole without touching its blocks; only a
 * slab that still has free blocks walks it, to join the two.  (Secure
 * build: a collected block keeps its remote mark, which malloc accepts as
 * free: hak_secure_pop_bad.) */
static bool slab_collect(hak_slab_t* s) {
  uintptr_t v = hak_load_relaxed(&s->xthread_free);
  if (v == 0 || (v & HAK_XF_NOTIFYING)) return false;
  v = atomic_exchange_explicit(&s->xthread_free, 0, memory_order_acquire);
  hak_block_t* list = hak_xf_list(v);
  uint32_t n = hak_xf_count(v);
  if (hak_unlikely(n == 0 || n > s->used || list == NULL)) slab_list_broken(s);
  if (s->free != NULL) {
    hak_block_t* tail = list;
    for (uint32_t i = 1; i < n; i++) {
      tail = hak_block_next(tail);
      if (hak_unlikely(tail == NULL)) slab_list_broken(s);
    }
    if (hak_unlikely(hak_block_next(tail) != NULL)) slab_list_broken(s);
    hak_block_set_next(tail, s->free);
  }
  s->free = list;
  s->used -= n;
  return true;
}

/* Carve up to ~4 KiB (at least 4 blocks) of never-used blocks: touching the
 * slab lazily keeps fresh memory unfaulted until it is needed. */
static bool slab_extend(hak_slab_t* s) {
  uint32_t limit = hak_slab_limit(s);
  uint32_t bump = hak_slab_bump(s, s->carved);
  if (bump >= limit) return false;
  uint32_t bsize = s->bsize;
  uint32_t count = 4096 / bsize;
  if (count < 4) count = 4;
  uint32_t left = (limit - bump) / bsize;
  if (count > left) count = left;
  uint8_t* p = hak_slab_start(s) + bump;
  /* remote frees read carved to reject never-carved blocks: publish atomically */
  __atomic_store_n(&s->carved, s->carved + count * hak_slab_step(s), __ATOMIC_RELAXED);
  if (HAK_SECURE) {   /* random order, each block filled and marked as if freed */
    void* v[256];   /* count <= 4096 / 16 */
    /* (a slab on pages never used is zero already: with the zero fill, the
     * default, it holds what a fill would write) */
    bool fill = !s->sec_zero || _hak_secure_fill64 != 0;
    for (uint32_t i = 0; i < count; i++) {
      v[i] = p + (size_t)i * bsize;
      if (fill) _hak_secure_carve_fill(v[i], bsize);
    }
    /* block 0 of a slab is never handed out: every block handed out has a
     * block below whose trailer shows an underflow (secure.c check_live) */
    uint32_t skip = bump == 0;
    for (uint32_t i = 0; i < count - skip; i++) v[i] = v[i + skip];
    count -= skip;
    if (count == 0) return false;
    _hak_secure_shuffle(v, count);
    for (uint32_t i = 0; i < count; i++)
      hak_block_set_next((hak_block_t*)v[i], i + 1 < count ? (hak_block_t*)v[i + 1] : s->free);
    s->free = v[0];
    return true;
  }
  hak_block_t* first = (hak_block_t*)p;
  for (uint32_t i = 0; i + 1 < count; i++) {
    hak_block_t* b = (hak_block_t*)(p + (size_t)i * bsize);
    hak_block_set_next(b, (hak_block_t*)(p + (size_t)(i + 1) * bsize));
    b->cookie = hak_cookie();
  }
  hak_block_t* last = (hak_block_t*)(p + (size_t)(count - 1) * bsize);
  hak_block_set_next(last, s->free);
  last->cookie = hak_cookie();
  s->free = first;
  return true;
}

#if HAK_DEBUG >= 2
/* The owner's view of a slab agrees with itself (debug build, on the refill
 * and release paths): every block on its free list is a carved block start
 * of this slab, carries the free cookie, and is there once; free blocks and
 * blocks out together are no more than the blocks carved. */
static bool slab_is_valid(hak_slab_t* s) {
  uintptr_t xo = hak_load_relaxed(&s->xowner);
  if (xo & HAK_OWNER_MESHED || (__atomic_load_n(&slab_segment(s)->mesh_pages, __ATOMIC_RELAXED) >> hak_slab_index(s) & 1))
    return true;   /* (compaction's aliases share pages: mesh.c checks its own) */
  uint32_t carved = s->carved / hak_slab_step(s), limit = hak_slab_limit(s);
  if (s->bsize == 0 || carved > limit / s->bsize || s->npages == 0 || hak_slab_index(s) + s->npages > HAK_PAGES_PER_SEG) return false;
  uint32_t n = 0;
  for (const hak_block_t* b = s->free; b != NULL; b = hak_block_next(b)) {
    uint64_t off = (uint64_t)((const uint8_t*)b - hak_slab_start(s));
    if ((const uint8_t*)b < hak_slab_start(s) || !hak_is_carved_block(s, off, s->carved)) return false;
    if (!HAK_SECURE && b->cookie != hak_cookie()) return false;
    if (++n > carved) return false;   /* a cycle, or a block twice */
  }
  return n + s->used <= carved;
}
#endif

static bool slab_refill(hak_slab_t* s) {
  if (s->free) return true;
  slab_collect(s);
  hak_assert_expensive(slab_is_valid(s));
  if (s->free) return true;
  if (slab_extend(s)) return true;
  /* blocks on pages scavenging gave back */
  return !HAK_SECURE && slab_segment(s)->nphantom[hak_slab_index(s)] != 0 && _hak_scavenge_readmit(s);
}

static void slab_set_full(hak_heap_t* h, hak_slab_t* s) {
  list_push(&h->full, s);
  atomic_store_explicit(&s->xowner, (uintptr_t)h | HAK_OWNER_FULL, memory_order_seq_cst);
}
/* A full slab got a block back.  It goes last in its class list: the slabs
 * ahead of it serve first while frees gather in this one, so a slab that got
 * one block back is not made current only to be found full again at the
 * next malloc.  (First in the list, that ping-pong was most of larson's
 * slow-path work; second, right behind the current slab, it still sent a
 * third of alloc-test's mallocs and frees out of line: random frees over
 * many nearly full slabs left each one block or two by its turn.) */
static void slab_unfull(hak_heap_t* h, hak_slab_t* s) {
  list_remove(&h->full, s);
  hak_store_relaxed(&s->xowner, (uintptr_t)h);
  avail_append(h, s);
}
/* Pairs with the remote side (push, then read xowner): either the remote
 * free sees FULL and raises the hint, or we see its block here. */
static void slab_to_full(hak_heap_t* h, hak_slab_t* s) {   /* s on no list */
  slab_set_full(h, s);
  /* a tagged list stays full: its notifier raises the hint (unfulling it
   * would make the refill loop spin on it until the tag clears) */
  uintptr_t v = atomic_load_explicit(&s->xthread_free, memory_order_seq_cst);
  if (v != 0 && !(v & HAK_XF_NOTIFYING)) slab_unfull(h, s);
}
static void slab_mark_full(hak_heap_t* h, hak_slab_t* s) {
  avail_remove(h, s);
  slab_to_full(h, s);
}

static bool slab_release(hak_heap_t* h, hak_slab_t* s);
static int slab_retire(hak_heap_t* h, hak_slab_t* s);

/* Where memory of threads sits (stats.c): slabs emptied by remote frees and
 * given back; slab pages handed over at thread exit and taken by adopters. */
_Atomic(uint64_t) _hak_stat_reclaimed_slabs, _hak_stat_reclaimed_pages, _hak_stat_abandon_pages, _hak_stat_adopt_pages;
static void stat_reclaimed(const hak_slab_t* s) {
  atomic_fetch_add_explicit(&_hak_stat_reclaimed_slabs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&_hak_stat_reclaimed_pages, s->npages, memory_order_relaxed);
}

/* Take the remote-free bits of the slabs `mask` of seg (the segment's other
 * bits are other heaps' slabs', or abandoned ones): those set, now cleared. */
static uint64_t seg_take_remote(hak_segment_t* seg, uint64_t mask) {
  uint64_t bits = hak_load_relaxed(&seg->xremote) & mask;
  if (bits != 0) atomic_fetch_and_explicit(&seg->xremote, ~bits, memory_order_acquire);
  return bits;
}

/* The owner takes the slabs that got remote frees (segment bits, raised with
 * the heap's hint by remote_free): collects them, puts full ones that got
 * blocks back on their class list and releases the others the remote frees
 * emptied.
 * Without this, a slab freed entirely by other threads stays counted as used
 * until its class happens to reach it, and pins its pages and its segment. */
static void heap_collect_remote(hak_heap_t* h) {
  hak_store_relaxed(&h->xremote_hint, 0);
  atomic_thread_fence(memory_order_seq_cst);   /* pairs with remote_notify: bit, then hint */
  for (hak_member_t *m = h->members, *mnext; m != NULL; m = mnext) {
    mnext = m->next;   /* m goes when its last slab is released below (and its segment may) */
    hak_segment_t* seg = hak_segment_of(m);
    for (uint64_t bits = seg_take_remote(seg, m->mask); bits != 0;) {
      hak_slab_t* s = &seg->slabs[__builtin_ctzll(bits)];
      bits &= bits - 1;
      uintptr_t xo = hak_load_relaxed(&s->xowner);
      hak_assert((xo & ~HAK_OWNER_FLAGS) == (uintptr_t)h);
      if (xo & HAK_OWNER_MESHED) {
        /* frees into a meshed-away slab go to its root (mesh.c); when it
         * holds no block any more its page comes back here */
        if (_hak_mesh_collect_alias(h, s) && slab_release(h, s)) break;
        continue;
      }
      /* a slab cut for heap profiling: its list must not grow under the
       * fast path (prof.c); it is current, so its refill collects it */
      if (xo & HAK_OWNER_PROF) continue;
      if (!slab_collect(s)) {
        slab_look_again(s, h);
        continue;
      }
      /* a full slab was filled lately, so its class is allocating: it goes
       * back on the class list however many blocks came back (releasing
       * the emptied ones made a producer whose blocks all come back
       * re-carve new slabs 4 KiB at a time: xthread +11 % instructions);
       * a slab that sat on the class list and emptied is released */
      if (xo & HAK_OWNER_FULL) {
        slab_unfull(h, s);
      } else if (hak_slab_is_empty(s)) {
        stat_reclaimed(s);
        /* the heap's last slab in the segment: m is gone (maybe the segment) */
        if (slab_retire(h, s) == 2) break;
      }
    }
  }
}

/* Abandoned slabs `mask` of seg (pool.c calls this under its lock: no heap
 * owns them): collect their remote frees; the slabs those emptied, whose
 * pages the caller gives back, so memory of exited threads follows the
 * frees even when no thread adopts it. */
uint64_t _hak_abandoned_collect(hak_segment_t* seg, uint64_t mask) {
  uint64_t emptied = 0;
  for (uint64_t bits = seg_take_remote(seg, mask); bits != 0;) {
    size_t idx = (size_t)__builtin_ctzll(bits);
    hak_slab_t* s = &seg->slabs[idx];
    bits &= bits - 1;
    if (hak_load_relaxed(&s->xowner) != HAK_OWNER_ABANDONED) continue;
    if (!slab_collect(s)) {
      slab_look_again(s, NULL);
      continue;
    }
    if (!hak_slab_is_empty(s)) continue;
    stat_reclaimed(s);
    emptied |= (uint64_t)1 << idx;
  }
  return emptied;
}

static void slab_init(hak_heap_t* h, hak_segment_t* seg, size_t idx, size_t cls) {
  hak_slab_t* s = &seg->slabs[idx];
  uint32_t bsize = _hak_class_size[cls];
  unsigned npages = _hak_class_pages[cls];
  s->free = NULL;
  s->used = 0;
  s->bsize = bsize;
  s->recip = hak_slab_recip(bsize);
  s->carved = 0;
  s->cls = (uint8_t)cls;
  s->npages = (uint8_t)npages;
  s->head_off = 0;
  hak_store_relaxed(&s->xthread_free, 0);
  s->next = s->prev = NULL;
  for (unsigned i = 1; i < npages; i++) {
    seg->slabs[idx + i].head_off = (uint8_t)i;
    hak_store_relaxed(&seg->slabs[idx + i].xowner, HAK_OWNER_TAIL);
  }
  hak_store_release(&s->xowner, (uintptr_t)h);
}

/* An empty slab's descriptors are cleared before its pages go back to the
 * pool (compaction and scavenging forget it first). */
void _hak_slab_clear(hak_slab_t* s) {
  hak_segment_t* seg = slab_segment(s);
  size_t idx = hak_slab_index(s);
  unsigned n = s->npages;
  hak_assert(n >= 1 && idx + n <= HAK_PAGES_PER_SEG && s->head_off == 0);   /* (mesh.c releases aliases and roots with phantoms counted in used) */
  if (__atomic_load_n(&seg->mesh_pages, __ATOMIC_RELAXED) & ((uint64_t)1 << idx)) _hak_mesh_page_freed(seg, idx);   /* back to private memory */
  if (seg->nphantom[idx] != 0) _hak_scavenge_forget(s);
  for (unsigned i = 0; i < n; i++) {
    hak_slab_t* t = &seg->slabs[idx + i];
    hak_store_relaxed(&t->xowner, HAK_OWNER_UNUSED);
    t->free = NULL;
    t->used = t->bsize = t->carved = 0;
    t->npages = t->head_off = t->cls = 0;
  }
}

/* Return an empty slab's pages to the pool (the segment to the cache or the
 * OS when it empties).  The slab is on no list.  True when it was the heap's
 * last slab in its segment (the segment may be gone). */
static bool slab_release(hak_heap_t* h, hak_slab_t* s) {
  hak_segment_t* seg = slab_segment(s);
  for (size_t c = 0; c < s->cls; c++)   /* no loan cursor may point at it: its segment may go */
    if (h->borrow[c] == s) h->borrow[c] = NULL;
  if (h->prof.armed[s->cls] == s) {   /* nor the profiler's cut slab (prof.c; its blocks set aside go with it) */
    h->prof.armed[s->cls] = NULL;
    h->prof.stash[s->cls] = NULL;
    h->prof.narmed--;
  }
  size_t idx = hak_slab_index(s);
  unsigned n = s->npages;
  hak_assert_expensive(slab_is_valid(s));
  _hak_slab_clear(s);
  return _hak_pool_give(h, seg, idx, n);
}

static void heap_adopt(hak_heap_t* h, hak_segment_t* seg, uint64_t mask);

static hak_slab_t* slab_new(hak_heap_t* h, size_t cls, pages_from_t from) {
  if (from == PAGES_NEW) {
    /* compaction first, paced in mesh.c and scavenge.c (one or the other) */
    if (hak_opt(MESH)) _hak_mesh_pass(h, false);
    else _hak_scavenge_pass(h, false);
  }
  size_t idx;
  bool zero;
  hak_segment_t* seg = _hak_pool_take(h, cls, from, &idx, &zero);
  if (seg == NULL) return NULL;
  slab_init(h, seg, idx, cls);
  if (HAK_SECURE) seg->slabs[idx].sec_zero = zero;
  return &seg->slabs[idx];
}

/* A block of a slightly larger class (up to half again the size) from a
 * slab of this heap with room, for a class that would otherwise take new
 * pages: after scattered frees, memory freed in one size serves the next
 * sizes (a cache refilled with values of other sizes, a parser's next
 * document) instead of sitting in sparse slabs while new ones are faulted
 * in -- the reuse across sizes that coalescing gives glibc, without moving
 * anything.  The block stays its slab's (free, usable size and the secure
 * trailer go by the slab's class); the class asking keeps no slab of its
 * own, so each such malloc comes here, until the holes run out and a slab
 * of its own is made.  Only slabs carved to the end (their free blocks are
 * holes left by frees: a growing heap's young slabs keep their room for
 * their own class) and at most 7/8 used (a nearly full slab has too few
 * holes to be worth the slow path) lend, and the scan resumes where
 * the last loan was found (h->borrow[cls], trusted only while it is still
 * this heap's slab with room). */
#define BORROW_SCAN 8   /* slabs looked at per larger class and malloc */
hak_inline bool borrow_ok(const hak_heap_t* h, const hak_slab_t* t) {
  return t->free != NULL && hak_load_relaxed(&t->xowner) == (uintptr_t)h &&
         hak_slab_bump(t, t->carved) >= hak_slab_limit(t) &&   /* holes left by frees, not fresh room */
         (size_t)t->used * t->bsize * 8 <= ((size_t)t->npages << HAK_PAGE_SHIFT) * 7;
}
#define BORROW_CHECK 64   /* loans between two checks that the class grows into the holes */
static void* heap_borrow(hak_heap_t* h, size_t cls, size_t req) {
  uint32_t want = _hak_class_size[cls];
  hak_slab_t* t = h->borrow[cls];
  if (t != NULL && t->cls > cls && _hak_class_size[t->cls] <= want + want / 2 && borrow_ok(h, t)) {
    /* Lending is for a class that grows into holes.  A class whose blocks
     * come back as fast as they are lent (a steady malloc/free cycle) would
     * take the refill path for every malloc, forever (3.3x the time of a
     * malloc/free pair): when the slab's used count did not grow by half
     * the loans since the last check, the class gets a slab of its own
     * (the caller makes one when this returns NULL), whose fast path then
     * serves the cycle. */
    if (++h->borrow_n[cls] >= BORROW_CHECK) {
      if ((int64_t)t->used - (int64_t)h->borrow_used[cls] < BORROW_CHECK / 2) {
        h->borrow[cls] = NULL;
        return NULL;
      }
      h->borrow_n[cls] = 0;
      h->borrow_used[cls] = t->used;
    }
    goto lend;
  }
  for (size_t c2 = cls + 1; c2 < HAK_NCLASSES && _hak_class_size[c2] <= want + want / 2; c2++) {
    /* from the last loan's slab on when it is of this class, else from the head */
    t = h->borrow[cls] != NULL && h->borrow[cls]->cls == c2 && hak_load_relaxed(&h->borrow[cls]->xowner) == (uintptr_t)h
            ? h->borrow[cls]->next : h->cls[c2].cur;
    if (t == NULL) t = h->cls[c2].cur;
    for (int k = 0; k < BORROW_SCAN && t != NULL && t != &_hak_slab_empty; k++, t = t->next)
      if (borrow_ok(h, t)) goto lend;
  }
  h->borrow[cls] = NULL;
  return NULL;
lend:
  if (h->borrow[cls] != t) {   /* a new lender: count from here */
    h->borrow[cls] = t;
    h->borrow_n[cls] = 0;
    h->borrow_used[cls] = t->used;
  }
  atomic_fetch_add_explicit(&_hak_stat_borrowed, 1, memory_order_relaxed);
  return hak_slab_pop(&h->cls[t->cls], t, t->free, req);
}

static hak_noinline void* heap_alloc_class(hak_heap_t* h, size_t cls, size_t req, bool any_class) {
  if (hak_unlikely(h->limit_epoch != hak_load_relaxed(&_hak_limit_epoch))) {
    /* near the memory limit: this heap's empty slabs, the one kept per
     * class included, and the free pages inside its sparse slabs go back
     * (only the owner may touch them) */
    h->limit_epoch = hak_load_relaxed(&_hak_limit_epoch);
    _hak_collect_heap(h);
  }
  hak_slab_t* s = h->cls[cls].cur;
  if (s->free == NULL) {
    hak_counter_inc(&h->refills);
    if ((h->refills & 63) == 0) {   /* now and then: remote frees elsewhere, the release clock */
      if (hak_load_relaxed(&h->xremote_hint)) heap_collect_remote(h);
      _hak_heap_release_tick(h);
      _hak_pool_abandoned_tick(false);
      s = h->cls[cls].cur;
    }
  }
  for (;;) {
    if (s != &_hak_slab_empty) {
      if (slab_refill(s)) break;
      slab_mark_full(h, s);
      s = h->cls[cls].cur;
      continue;
    }
    if (hak_load_relaxed(&h->xremote_hint)) {
      heap_collect_remote(h);
      s = h->cls[cls].cur;
      if (s != &_hak_slab_empty) continue;
    }
    /* (a heap that found no resident free page skips the pool's walk until
     * some heap gives pages back: a run of loans comes here per malloc) */
    uint64_t gives = hak_load_relaxed(&_hak_pool_gives) + 1;
    s = h->no_resident == gives ? NULL : slab_new(h, cls, PAGES_OWN);
    if (s == NULL) {
      /* A heap that has slabs leaves the last abandoned segment to a thread
       * that has none (the successor of the thread that left it), unless
       * the pool has no room at all: else the newcomer takes new pages
       * while this heap sits on the adopted slabs' free room.  Adopting
       * comes before other heaps' resident pages: an exited thread's slabs
       * have room, and left alone they only drain. */
      bool has_segs = h->members != NULL;
      uint64_t abmask = 0;
      hak_segment_t* ab = _hak_pool_adopt(h, has_segs ? 1 : 0, &abmask);
      if (ab == NULL && h->no_resident != gives) {
        s = slab_new(h, cls, PAGES_RESIDENT);
        if (s == NULL && _hak_class_pages[cls] == 1) h->no_resident = gives;   /* (a longer run may just not fit) */
      }
      if (ab == NULL && s == NULL) {
        if (any_class && hak_opt(LEND)) {   /* before new pages: a sparse slab of a larger class */
          void* b = heap_borrow(h, cls, req);
          if (b != NULL) return b;
        }
        _hak_heap_release_tick(h);
        _hak_limit_grow((size_t)_hak_class_pages[cls] << HAK_PAGE_SHIFT);
        s = slab_new(h, cls, PAGES_ANY);
        if (s == NULL && has_segs) ab = _hak_pool_adopt(h, 0, &abmask);
      }
      if (ab != NULL) {
        heap_adopt(h, ab, abmask);
        s = h->cls[cls].cur;
        continue;
      }
      if (s == NULL) s = slab_new(h, cls, PAGES_NEW);
      if (s == NULL) {
        errno = ENOMEM;
        return NULL;
      }
    }
    avail_push(h, s);
  }
  return hak_slab_pop(&h->cls[cls], s, s->free, req);
}

/* Smallest class whose blocks are all `align`-aligned (slabs start on 64 KiB
 * boundaries, so a block size that is a multiple of align suffices). */
static size_t aligned_class(size_t size, size_t align) {
  if (size > HAK_MEDIUM_MAX || align > HAK_PAGE_SIZE) return HAK_NCLASSES;
  for (size_t c = hak_class_of(size); c < HAK_NCLASSES; c++)
    if ((_hak_class_size[c] & (align - 1)) == 0) return c;
  return HAK_NCLASSES;
}

void* _hak_malloc_generic(hak_heap_t* h, size_t size, size_t align, uintptr_t site) {
  if (hak_unlikely(h == &_hak_heap_empty)) {
    h = _hak_thread_init();
    if (h == NULL) {
      errno = ENOMEM;
      return NULL;
    }
  }
  if (hak_unlikely(size > HAK_MAX_SIZE)) {
    errno = ENOMEM;
    return NULL;
  }
  _hak_secure_large_recent();   /* secure: the large block freed last is still fill */
  size_t cls, need = size + HAK_TRAILER;
  if (align <= 16) {
    if (need > HAK_MEDIUM_MAX || (HAK_SECURE && size >= _hak_secure_guard_min)) return _hak_large_alloc(size, 16, false, site);
    cls = hak_class_of(need);
    if (HAK_SECURE && cls == 0) cls = 1;   /* no 16-byte class (internal.h) */
  } else {
    cls = aligned_class(need, align);
    if (cls == HAK_NCLASSES) return _hak_large_alloc(size, align, false, site);
  }
  if (hak_unlikely(hak_load_relaxed(&_hak_prof_on))) {
    /* heap profiling (prof.c): a sampled block is served elsewhere; after
     * a class allocation the class's current slab is cut to the bytes left
     * before the next sample */
    void* p = _hak_prof_before(h, cls, size, align <= 16, site);
    if (p != NULL) return p;
    p = heap_alloc_class(h, cls, size, align <= 16);
    _hak_prof_after(h, cls);
    return p;
  }
  return heap_alloc_class(h, cls, size, align <= 16);
}

/* ---------------------------------------------------------------- free */

/* Resolve the slab of p and check p is a block start; NULL (after reporting)
 * when it is not. */
static hak_slab_t* slab_of_checked(hak_segment_t* seg, const void* p, const char* op) {
  size_t idx = ((uintptr_t)p - (uintptr_t)seg) >> HAK_PAGE_SHIFT;
  hak_slab_t* s = &seg->slabs[idx];
  uintptr_t xo = hak_load_acquire(&s->xowner);
  if (xo == HAK_OWNER_TAIL) {
    idx -= s->head_off;
    s = &seg->slabs[idx];
    xo = hak_load_acquire(&s->xowner);
  }
  if (xo == HAK_OWNER_UNUSED || xo == HAK_OWNER_TAIL) {
    _hak_invalid_pointer(op, p, "not in an allocated slab");
    return NULL;
  }
  /* A carved block is a block start below the slab's limit: one multiply
   * and compare, where the limit alone costs a division (malloc_usable_size
   * is called for every block by some programs: redis).  Which of the two
   * failed is worked out only for the message. */
  size_t off = (uintptr_t)p - (uintptr_t)seg - (idx << HAK_PAGE_SHIFT);
  if (hak_unlikely(!hak_is_carved_block(s, off, __atomic_load_n(&s->carved, __ATOMIC_RELAXED)))) {
    bool start = off < hak_slab_limit(s) && hak_is_block_start(s, off);
    _hak_invalid_pointer(op, p, start ? "block was never allocated" : "not the start of a block");
    return NULL;
  }
  return s;
}

static bool list_contains(const hak_block_t* q, const hak_block_t* b, uint32_t cap) {
  for (uint32_t n = 0; q != NULL && n <= cap; q = hak_block_next(q), n++)
    if (q == b) return true;
  return false;
}
/* In the owner's list, or in a remote list slab_collect left (tagged): only
 * the owner unlinks from that one, so walking it under pushers is safe. */
static bool slab_free_list_contains(hak_slab_t* s, const hak_block_t* b) {
  uint32_t cap = hak_slab_limit(s) / s->bsize;
  /* never-carved blocks also carry no valid cookie; carved ones do */
  return list_contains(s->free, b, cap) ||
         list_contains(hak_xf_list(hak_load_acquire(&s->xthread_free)), b, cap);
}

/* Owner frees into its own slab on the generic path: full slab, emptied slab,
 * or a cookie hit that must be confirmed. */
static void local_free(hak_heap_t* h, hak_slab_t* s, hak_block_t* b, uintptr_t xo) {
  if (!HAK_SECURE && b->cookie == hak_cookie()) {   /* secure: the trailer decides, below */
    slab_collect(s);
    /* (a phantom keeps a stale cookie when its first words lie on a page
     * scavenging did not give back: scavenge.c) */
    if (slab_free_list_contains(s, b) || _hak_scavenge_is_phantom(s, b)) {
      _hak_double_free("free", b, s->bsize);
      return;
    }
  }
  if (!hak_is_carved_block(s, (size_t)((uint8_t*)b - hak_slab_start(s)), s->carved)) {
    _hak_invalid_pointer("free", b, "block was never allocated");
    return;
  }
  if (HAK_SECURE) _hak_secure_free(s, b, "free");
  if (xo & HAK_OWNER_FULL) slab_unfull(h, s);
  hak_block_set_next(b, s->free);
  if (!HAK_SECURE) b->cookie = hak_cookie();
  s->free = b;
  if (--s->used == 0) _hak_slab_emptied(h, s);
}

/* For the fast path's two out-of-line exits: the page index of p named the
 * slab's first page, so p lies in its first 64 KiB; is it a block start? */
static bool head_page_block(hak_slab_t* s, const void* p, const char* op) {
  uint64_t off = (uintptr_t)p & (HAK_PAGE_SIZE - 1);
  if (hak_is_block_start(s, off) && off < hak_slab_limit(s)) return true;
  _hak_invalid_pointer(op, p, "not the start of a block");
  return false;
}

/* A free into the caller's own full slab. */
void _hak_free_to_full(hak_heap_t* h, hak_slab_t* s, void* p, const char* op) {
  if (head_page_block(s, p, op)) local_free(h, s, (hak_block_t*)p, HAK_OWNER_FULL);
}

/* The first remote free into a slab since its owner collected it: set the
 * slab's bit in its segment, then raise the owner's hint (both seq_cst: the
 * owner clears the hint before it takes the bits, so a bit it misses leaves
 * the hint raised).  An abandoned slab has no owner to tell: the clock of
 * abandoned segments (segment.c) is told instead, and an adopter collects
 * every slab anyway. */
static void remote_notify(hak_slab_t* s) {
  hak_segment_t* seg = slab_segment(s);
  uint64_t bit = (uint64_t)1 << hak_slab_index(s);
  if (hak_load_relaxed(&seg->xremote) & bit) return;   /* set and not yet taken: its setter raises the hint */
  atomic_fetch_or_explicit(&seg->xremote, bit, memory_order_seq_cst);
  uintptr_t xo = atomic_load_explicit(&s->xowner, memory_order_seq_cst);
  hak_heap_t* owner = (hak_heap_t*)(xo & ~HAK_OWNER_FLAGS);   /* heaps are 64-byte aligned */
  if (owner != NULL) {
    if (hak_load_relaxed(&owner->xremote_hint) == 0) hak_store_relaxed(&owner->xremote_hint, 1);
  } else if (xo == HAK_OWNER_ABANDONED && hak_load_relaxed(&_hak_abandoned_hint) == 0) {
    hak_store_relaxed(&_hak_abandoned_hint, 1);   /* for the abandoned segments' clock */
  }
}

static void remote_free(hak_slab_t* s, hak_block_t* b) {
  if (!hak_is_carved_block(s, (size_t)((uint8_t*)b - hak_slab_start(s)), __atomic_load_n(&s->carved, __ATOMIC_RELAXED))) {
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
      hak_block_set_next(b, NULL);
      if (atomic_compare_exchange_weak_explicit(&s->xthread_free, &head, hak_xf_push(HAK_XF_NOTIFYING, b),
                                                memory_order_seq_cst, memory_order_relaxed)) {
        remote_notify(s);
        atomic_fetch_and_explicit(&s->xthread_free, ~HAK_XF_NOTIFYING, memory_order_release);
        return;
      }
      continue;
    }
    hak_block_set_next(b, hak_xf_list(head));
    if (atomic_compare_exchange_weak_explicit(&s->xthread_free, &head, hak_xf_push(head, b), memory_order_seq_cst,
                                              memory_order_relaxed))
      return;
  }
}

/* A free into another thread's (or an exited thread's) slab; or, while heap
 * profiling cuts it, into our own current slab (prof.c keeps it aside). */
void _hak_free_remote(hak_slab_t* s, void* p, const char* op) {
  if (hak_unlikely(hak_load_relaxed(&s->xowner) & HAK_OWNER_PROF)) {
    if (!hak_prof_stash(s, (hak_block_t*)p)) _hak_prof_free_cut(s, p, op);
    return;
  }
  if (head_page_block(s, p, op)) remote_free(s, (hak_block_t*)p);
}

void _hak_free_generic(void* p, const char* op) {
  if (p == NULL) return;
  if (!hak_segmap_contains(p)) {
    hak_segment_t* hs;
    if (_hak_huge_aligned_lookup(p, &hs)) {
      _hak_large_free(hs, p, op);
      return;
    }
    if (_hak_large_recently_freed(p)) {
      _hak_double_free(op, p, 0);
      return;
    }
    _hak_invalid_pointer(op, p, "not allocated by hakmem");
    return;
  }
  hak_segment_t* seg = hak_segment_of(p);
  if (seg->kind == HAK_SEG_LARGE) {
    if ((uint8_t*)p != (uint8_t*)seg + seg->large_off) {
      _hak_invalid_pointer(op, p, "not the start of a block");
      return;
    }
    _hak_large_free(seg, p, op);
    return;
  }
  if (HAK_SECURE && seg->kind == HAK_SEG_ZERO) {
    _hak_zero_free(seg, p, op);
    return;
  }
  hak_slab_t* s = slab_of_checked(seg, p, op);
  if (s == NULL) return;
  hak_heap_t* h = hak_heap_get();
  uintptr_t xo = hak_load_relaxed(&s->xowner);
  if ((xo & ~HAK_OWNER_FLAGS) == (uintptr_t)h && h != &_hak_heap_empty && !(xo & (HAK_OWNER_MESHED | HAK_OWNER_PROF)))
    local_free(h, s, (hak_block_t*)p, xo);
  else remote_free(s, (hak_block_t*)p);
}

/* A slab holds no block any more.  Keep it if it is its class's only one (so
 * a malloc/free ping-pong does not re-carve), else release it: 0 kept, 1
 * released, 2 released and it was the heap's last slab in its segment (which
 * may be gone). */
static int slab_retire(hak_heap_t* h, hak_slab_t* s) {
  if (h->cls[s->cls].cur == s && s->next == NULL) return 0;
  if (hak_load_relaxed(&s->xowner) & HAK_OWNER_FULL) list_remove(&h->full, s);
  else avail_remove(h, s);
  return slab_release(h, s) ? 2 : 1;
}

/* The last block of a slab came back (a local free).  Out of line: inlined
 * into the free fast path, it made every free save and restore a register. */
hak_noinline void _hak_slab_emptied(hak_heap_t* h, hak_slab_t* s) {
  if (hak_slab_is_empty(s) && slab_retire(h, s)) _hak_heap_release_tick(h);
}

/* ---------------------------------------------------------------- queries */
size_t _hak_usable_size(const void* p, const char* op) {
  if (p == NULL) return 0;
  if (!hak_segmap_contains(p)) {
    hak_segment_t* hs;
    if (_hak_huge_aligned_lookup(p, &hs)) return _hak_large_usable(hs);
    _hak_invalid_pointer(op, p, "not allocated by hakmem");
    return 0;
  }
  hak_segment_t* seg = hak_segment_of(p);
  if (seg->kind == HAK_SEG_LARGE) {
    if ((const uint8_t*)p != (uint8_t*)seg + seg->large_off || seg->used_pages != 1) {
      _hak_invalid_pointer(op, p, seg->used_pages != 1 ? "block was freed" : "not the start of a block");
      return 0;
    }
    return _hak_large_usable(seg);
  }
  if (HAK_SECURE && seg->kind == HAK_SEG_ZERO) {
    int st = _hak_zero_state(seg, p);
    if (st != 1) _hak_invalid_pointer(op, p, st == 0 ? "block was freed" : "not the start of a block");
    return 0;
  }
  hak_slab_t* s = slab_of_checked(seg, p, op);
  if (s == NULL) return 0;
  /* a freed block carries the free cookie (forged only with 2^-64 odds);
   * secure: its trailer says freed */
  const hak_block_t* b = p;
  size_t usable;
  int st = HAK_SECURE ? _hak_secure_state(s, p, &usable) : HAK_SEC_LIVE;
  if (HAK_SECURE ? st != HAK_SEC_LIVE : b->cookie == hak_cookie()) {
    if (st == HAK_SEC_BROKEN)
      _hak_fatal("hakmem: heap overflow detected at the end of block %p (size %u): trailer overwritten, in %s()\n",
                 p, s->bsize, op);
    if (op[0] == 'r') _hak_double_free(op, p, s->bsize);   /* realloc of a freed block */
    else _hak_invalid_pointer(op, p, "block was freed");
    return 0;
  }
  if (!HAK_SECURE) usable = s->bsize;
  return usable;
}

bool _hak_is_live_block(const void* p) {
  if (p == NULL) return false;
  if (!hak_segmap_contains(p)) {
    hak_segment_t* hs;
    return _hak_huge_aligned_lookup(p, &hs);
  }
  hak_segment_t* seg = hak_segment_of(p);
  if (seg->kind == HAK_SEG_LARGE) return (const uint8_t*)p == (uint8_t*)seg + seg->large_off && seg->used_pages == 1;
  if (HAK_SECURE && seg->kind == HAK_SEG_ZERO) return _hak_zero_state(seg, p) == 1;
  size_t idx = ((uintptr_t)p - (uintptr_t)seg) >> HAK_PAGE_SHIFT;
  const hak_slab_t* s = &seg->slabs[idx];
  uintptr_t xo = hak_load_acquire(&s->xowner);
  if (xo == HAK_OWNER_TAIL) {
    s -= s->head_off;
    xo = hak_load_acquire(&s->xowner);
  }
  if (xo == HAK_OWNER_UNUSED || xo == HAK_OWNER_TAIL) return false;
  size_t off = (size_t)((const uint8_t*)p - hak_slab_start(s));
  if (off >= hak_slab_limit(s) || !hak_is_block_start(s, off)) return false;
  if ((xo & ~HAK_OWNER_FLAGS) == (uintptr_t)hak_heap_get() && !hak_is_carved_block(s, off, s->carved)) return false;
  const hak_block_t* b = p;
  size_t req;
  if (HAK_SECURE) return _hak_secure_state((hak_slab_t*)s, p, &req) == HAK_SEC_LIVE;
  return b->cookie != hak_cookie();
}

/* ---------------------------------------------------------------- for compaction (mesh.c) */
bool _hak_slab_collect(hak_slab_t* s) { return slab_collect(s); }

/* Take an owned slab off its list (class list or full list). */
void _hak_slab_detach(hak_heap_t* h, hak_slab_t* s) {
  if (hak_load_relaxed(&s->xowner) & HAK_OWNER_FULL) list_remove(&h->full, s);
  else avail_remove(h, s);
}

/* Put an owned slab (on no list) back: on its class list when it has room,
 * else on the full list. */
void _hak_slab_attach(hak_heap_t* h, hak_slab_t* s) {
  atomic_store_explicit(&s->xowner, (uintptr_t)h, memory_order_seq_cst);
  s->next = s->prev = NULL;
  if (s->free != NULL || hak_slab_bump(s, s->carved) < hak_slab_limit(s)) avail_push(h, s);
  else slab_to_full(h, s);
}

bool _hak_slab_release(hak_heap_t* h, hak_slab_t* s) { return slab_release(h, s); }

/* Every slab of class cls the heap has on a list, but its current one. */
void _hak_heap_foreach_slab(hak_heap_t* h, size_t cls, void (*fn)(hak_slab_t*, void*), void* arg) {
  hak_slab_t* cur = h->cls[cls].cur;
  if (cur != &_hak_slab_empty)
    for (hak_slab_t *s = cur->next, *next; s != NULL; s = next) {
      next = s->next;
      fn(s, arg);
    }
  for (hak_slab_t *s = h->full, *next; s != NULL; s = next) {
    next = s->next;
    if (s->cls == cls) fn(s, arg);
  }
}

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
  pthread_mutex_lock(&heap_lock);
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
  pthread_mutex_unlock(&heap_lock);
  return h;
}

static void heap_release_to_pool(hak_heap_t* h) {
  pthread_mutex_lock(&heap_lock);
  h->in_use = 0;
  h->next_free = heap_pool;
  heap_pool = h;
  pthread_mutex_unlock(&heap_lock);
}

void _hak_heaps_foreach(void (*fn)(hak_heap_t*, void*), void* arg) {
  pthread_mutex_lock(&heap_lock);
  for (hak_heap_t* h = heap_all; h; h = h->next_all) fn(h, arg);
  pthread_mutex_unlock(&heap_lock);
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
    hak_assert(hak_load_relaxed(&s->xowner) == HAK_OWNER_ABANDONED);
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
void _hak_heaps_fork_prepare(void) { pthread_mutex_lock(&heap_lock); }
void _hak_heaps_fork_parent(void) { pthread_mutex_unlock(&heap_lock); }
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
