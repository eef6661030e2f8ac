/* The free slow path and the pointer lookups: the fast path's out-of-line
 * exits (a free into the caller's full slab, into another thread's slab),
 * the generic free that checks every pointer (large blocks, tail pages,
 * misuse), and the queries (usable size, live block) built on one lookup. */
#include "internal.h"
#include "slab.h"

/* ---------------------------------------------------------------- free */

/* The slab of p (classified: r) when p is a carved block start; NULL,
 * after reporting, when it is not. */
static hak_slab_t* slab_of_checked(const hak_ptr_t* r, const void* p, const char* op) {
  hak_slab_t* s = r->slab;
  if (s == NULL) {
    /* the first block of a slab given back: its second free */
    size_t page = ((uintptr_t)p & HAK_SEG_MASK) >> HAK_PAGE_SHIFT;
    if (((uintptr_t)p & (HAK_PAGE_SIZE - 1)) == 0 && page >= HAK_HDR_PAGES && hak_pmap_head(r->seg, page) == page)
      _hak_double_free(op, p, SIZE_MAX);
    else
      _hak_invalid_pointer(op, p, "not in an allocated slab");
    return NULL;
  }
  /* A carved block is a block start below the slab's limit: one multiply
   * and compare, where the limit alone costs a division (malloc_usable_size
   * is called for every block by some programs: redis).  Which of the two
   * failed is worked out only for the message. */
  if (hak_unlikely(!hak_slab_carved(s, p))) {
    size_t off = (uintptr_t)p - (uintptr_t)hak_slab_start(s);
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
/* In the owner's list, or in a remote list _hak_slab_collect left (tagged): only
 * the owner unlinks from that one, so walking it under pushers is safe. */
static bool slab_free_list_contains(hak_slab_t* s, const hak_block_t* b) {
  uint32_t cap = hak_slab_limit(s) / s->bsize;
  /* never-carved blocks also carry no valid cookie; carved ones do */
  return list_contains(s->free, b, cap) ||
         list_contains(hak_xf_list(hak_load_acquire(&s->xthread_free)), b, cap);
}

/* Owner frees into its own slab on the generic path: full slab, emptied slab,
 * or a cookie hit that must be confirmed. */
hak_warm static void local_free(hak_heap_t* h, hak_slab_t* s, hak_block_t* b, uintptr_t xo) {
  if (!HAK_SECURE && b->cookie == hak_cookie()) {   /* secure: the trailer decides, below */
    _hak_slab_collect(s);
    /* (a phantom keeps a stale cookie when its first words lie on a page
     * scavenging did not give back: scavenge.c) */
    if (slab_free_list_contains(s, b) || _hak_scavenge_is_phantom(s, b)) {
      _hak_double_free("free", b, s->bsize);
      return;
    }
  }
  if (!hak_slab_carved(s, b)) {
    _hak_invalid_pointer("free", b, "block was never allocated");
    return;
  }
  if (HAK_SECURE) _hak_secure_free(s, b, "free");
  hak_assert_cmp(hak_load_relaxed(&s->xowner) & ~HAK_OWNER_FLAGS, ==, (uintptr_t)h);   /* (xo: the flags alone from _hak_free_to_full) */
  hak_assert_cmp(s->used, !=, 0);   /* a block out to come back */
  if (xo & HAK_OWNER_FULL) _hak_slab_unfull(h, s);
  hak_block_set_next(b, s->free);
  if (!HAK_SECURE) b->cookie = hak_cookie();
  s->free = b;
  if (hak_used_add(s, -1) == 0) _hak_slab_emptied(h, s);
}

/* For the fast path's two out-of-line exits: is p (in slab s, by the page
 * map) a block start? */
static bool head_page_block(hak_slab_t* s, const void* p, const char* op) {
  uint64_t off = (uint64_t)((const uint8_t*)p - hak_slab_start(s));
  /* a carved block start lies below the limit: the common case takes one
   * multiply, where the limit alone costs a division (every remote free) */
  if (hak_likely(hak_is_carved_block(s, off, __atomic_load_n(&s->carved, __ATOMIC_RELAXED)))) return true;
  if (hak_is_block_start(s, off) && off < hak_slab_limit(s)) return true;   /* never carved: the caller says so */
  _hak_invalid_pointer(op, p, "not the start of a block");
  return false;
}

/* A free into the caller's own full slab. */
hak_warm void _hak_free_to_full(hak_heap_t* h, hak_slab_t* s, void* p, const char* op) {
  if (!head_page_block(s, p, op)) return;
  hak_heap_enter(h);
  local_free(h, s, (hak_block_t*)p, HAK_OWNER_FULL);
  hak_heap_leave(h);
}
/* A free into another thread's (or an exited thread's) slab.  Out of line:
 * inlined, its call saved registers on every free's fast path. */
hak_warm hak_noinline void _hak_free_remote(hak_slab_t* s, void* p, const char* op) {
  if (head_page_block(s, p, op)) _hak_remote_push(s, (hak_block_t*)p);
}

hak_warm void _hak_free_generic(void* p, const char* op) {
  if (p == NULL) return;
  hak_ptr_t r;
  uint32_t kind = hak_ptr_classify(p, &r);
  if (kind == 0) {   /* in no segment of the map: aligned above 2 MiB (large.c's table), freed, or not ours */
    hak_segment_t* hs;
    if (_hak_huge_aligned_lookup(p, &hs)) _hak_large_free(hs, p, op);
    else if (_hak_large_recently_freed(p)) _hak_double_free(op, p, 0);
    else _hak_invalid_pointer(op, p, "not allocated by hakmem");
    return;
  }
  /* the segment map and the header agree: a segment starts here */
  hak_assert_cmp(kind, >=, HAK_SEG_SMALL);
  hak_assert_cmp(kind, <=, HAK_SEG_GUARD);
  if (kind == HAK_SEG_SAMPLED) {
    _hak_slots_free(r.seg, p, op);
    return;
  }
  if (kind == HAK_SEG_GUARD) {
    /* (the caller: the program's call of free, which reaches here by a tail
     * call, or a frame of hakmem's entry points) */
    _hak_guard_free(r.seg, p, op, (uintptr_t)__builtin_return_address(0));
    return;
  }
  if (kind == HAK_SEG_LARGE) {
    if ((uint8_t*)p != hak_large_block(r.seg)) {
      _hak_invalid_pointer(op, p, "not the start of a block");
      return;
    }
    _hak_large_free(r.seg, p, op);
    return;
  }
  if (HAK_SECURE && kind == HAK_SEG_ZERO) {
    _hak_zero_free(r.seg, p, op);
    return;
  }
  hak_slab_t* s = slab_of_checked(&r, p, op);
  if (s == NULL) return;
  hak_heap_t* h = hak_heap_get();
  uintptr_t xo = hak_load_relaxed(&s->xowner);
  if ((xo & ~HAK_OWNER_FLAGS) == (uintptr_t)h && h != &_hak_heap_empty && !(xo & HAK_OWNER_MESHED)) {
    hak_heap_enter(h);
    local_free(h, s, (hak_block_t*)p, xo);
    hak_heap_leave(h);
  } else {
    _hak_remote_push(s, (hak_block_t*)p);
  }
}
/* ---------------------------------------------------------------- queries */
/* A live block's usable size in a segment of page slots (kind: a heap-profile
 * sample's, slots.c, or a guarded block's, guard.c); 0 when p is not one. */
size_t _hak_slot_usable(uint32_t kind, hak_segment_t* seg, const void* p) {
  return kind == HAK_SEG_SAMPLED ? _hak_slots_usable(seg, p) : _hak_guard_usable(seg, p);
}

size_t _hak_usable_size(const void* p, const char* op) {
  if (p == NULL) return 0;
  hak_ptr_t r;
  uint32_t kind = hak_ptr_classify(p, &r);
  if (kind == 0) {
    hak_segment_t* hs;
    if (_hak_huge_aligned_lookup(p, &hs)) return hak_large_usable(hs);
    _hak_invalid_pointer(op, p, "not allocated by hakmem");
    return 0;
  }
  if (kind == HAK_SEG_LARGE) {
    if (!hak_large_live_at(r.seg, p)) {
      _hak_invalid_pointer(op, p, r.seg->used_pages != 1 ? "block was freed" : "not the start of a block");
      return 0;
    }
    return hak_large_usable(r.seg);
  }
  if (kind == HAK_SEG_SAMPLED || kind == HAK_SEG_GUARD) {
    size_t u = _hak_slot_usable(kind, r.seg, p);
    if (u == 0) _hak_invalid_pointer(op, p, "not a live block");
    return u;
  }
  if (HAK_SECURE && kind == HAK_SEG_ZERO) {
    int st = _hak_zero_state(r.seg, p);
    if (st != 1) _hak_invalid_pointer(op, p, st == 0 ? "block was freed" : "not the start of a block");
    return 0;
  }
  hak_slab_t* s = slab_of_checked(&r, p, op);
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
  hak_ptr_t r;
  uint32_t kind = hak_ptr_classify(p, &r);
  if (kind == 0) {
    hak_segment_t* hs;
    return _hak_huge_aligned_lookup(p, &hs);
  }
  if (kind == HAK_SEG_LARGE) return hak_large_live_at(r.seg, p);
  if (kind == HAK_SEG_SAMPLED || kind == HAK_SEG_GUARD) return _hak_slot_usable(kind, r.seg, p) != 0;
  if (HAK_SECURE && kind == HAK_SEG_ZERO) return _hak_zero_state(r.seg, p) == 1;
  const hak_slab_t* s = r.slab;
  uintptr_t xo = r.xo;
  if (s == NULL) return false;
  size_t off = (size_t)((const uint8_t*)p - hak_slab_start(s));
  if (off >= hak_slab_limit(s) || !hak_is_block_start(s, off)) return false;
  if ((xo & ~HAK_OWNER_FLAGS) == (uintptr_t)hak_heap_get() && !hak_is_carved_block(s, off, s->carved)) return false;
  const hak_block_t* b = p;
  size_t req;
  if (HAK_SECURE) return _hak_secure_state((hak_slab_t*)s, p, &req) == HAK_SEC_LIVE;
  return b->cookie != hak_cookie();
}
