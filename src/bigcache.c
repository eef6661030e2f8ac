/* BigCache: recently freed large blocks, kept mapped and resident in small
 * per-size-class rings, so a repeated malloc/free of the same large size
 * reuses the same pages: no mmap, no munmap, no new page faults.
 * Bounded by bytes (HAKMEM_BIGCACHE_MAX_MB) and by age
 * (HAKMEM_BIGCACHE_AGE_MS).  Evicted blocks go to the release batch
 * (release.c), which decommits them and defers and groups the munmaps.
 * Large operations are rare next to small ones and each touches at least
 * 128 KiB, so one process-wide lock costs nothing measurable here. */
#include "internal.h"

#define BC_CLASSES 52            /* 128 KiB .. 1 GiB, four classes per doubling */
#define BC_WAYS    64           /* per class; the byte budget is the real bound */
#define BC_SCAN    4            /* newest entries per class looked at by take */

typedef struct {
  hak_segment_t* seg;
  uint64_t t_ms;
} bc_entry_t;

static pthread_mutex_t bc_lock = PTHREAD_MUTEX_INITIALIZER;
hak_bss_apart static bc_entry_t bc_ring[BC_CLASSES][BC_WAYS];   /* oldest first */
static uint8_t bc_count[BC_CLASSES];
static uint64_t bc_nonempty;                      /* bit c: bc_count[c] > 0 */
_Static_assert(BC_CLASSES <= 64, "class mask");
static _Atomic(size_t) bc_bytes;
static _Atomic(size_t) bc_mapped;   /* address space of the cached blocks (statistics) */
static _Atomic(uint64_t) bc_hits, bc_misses, bc_evictions;
_Atomic(uint64_t) _hak_stat_bigcache_yielded;   /* bytes decommitted for the small tier (_hak_bigcache_yield) */
static size_t bc_total_entries;

/* Size of large class k: (4 + k % 4) << (15 + k / 4): 128K, 160K, 192K, 224K, 256K, ... */
static size_t bc_class_size(size_t k) { return (size_t)(4 + (k & 3)) << (15 + k / 4); }

/* Smallest class whose size is >= m (BC_CLASSES when too big). */
static size_t bc_class_ceil(size_t m) {
  if (m <= ((size_t)128 << 10)) return 0;
  size_t x = m - 1;
  unsigned b = 63u - (unsigned)__builtin_clzl(x);
  size_t k = (size_t)(b - 17) * 4 + ((x >> (b - 2)) & 3) + 1;
  return k < BC_CLASSES ? k : BC_CLASSES;
}
/* Largest class whose size is <= m (BC_CLASSES when none). */
static size_t bc_class_floor(size_t m) {
  size_t k = bc_class_ceil(m);
  if (k < BC_CLASSES && bc_class_size(k) == m) return k;
  if (k == 0) return BC_CLASSES;
  return k - 1 < BC_CLASSES ? k - 1 : BC_CLASSES;
}

/* The mapping size to use for a new large block: rounded up to its class so
 * the block can serve any later request of that class (the pages past the
 * request are never touched, so they cost address space only). */
hak_warm size_t _hak_bigcache_map_size(size_t need) {
  size_t k = bc_class_ceil(need);
  if (k + 4 < BC_CLASSES) return bc_class_size(k + 4);   /* twice the class: headroom to grow */
  return k < BC_CLASSES ? bc_class_size(k) : hak_align_up(need, HAK_OS_PAGE);
}

static uint64_t max_bytes(void) { return (uint64_t)hak_opt(BIGCACHE_MAX_MB) << 20; }


/* The non-empty classes among lo..hi (lock held). */
static uint64_t classes_in(size_t lo, size_t hi) {
  if (lo >= BC_CLASSES) return 0;
  if (hi >= BC_CLASSES) hi = BC_CLASSES - 1;
  uint64_t upto = hi >= 63 ? ~(uint64_t)0 : ((uint64_t)1 << (hi + 1)) - 1;
  return bc_nonempty & upto & ~(((uint64_t)1 << lo) - 1);
}

/* Take entry i out of class c's ring (lock held). */
static hak_segment_t* bc_remove_locked(size_t c, size_t i) {
  hak_segment_t* seg = bc_ring[c][i].seg;
  _hak_site_ring_leave(seg);
  memmove(&bc_ring[c][i], &bc_ring[c][i + 1], sizeof(bc_entry_t) * (size_t)(bc_count[c] - i - 1));
  if (--bc_count[c] == 0) bc_nonempty &= ~((uint64_t)1 << c);
  bc_total_entries--;
  atomic_fetch_sub_explicit(&bc_bytes, hak_large_resident(seg), memory_order_relaxed);
  atomic_fetch_sub_explicit(&bc_mapped, seg->map_size, memory_order_relaxed);
  return seg;
}

/* Blocks whose mapping is smaller than a request may still serve it when
 * their touched extent covers at least half of it and the request is big:
 * the caller grows the mapping with mremap (one or two calls) instead of
 * faulting in pages that are already resident here.  Such blocks exist when
 * a realloc grew a mapping in place to its exact size (no room for the
 * headroom) or a shrinking realloc trimmed it. */
#define BC_GROW_MIN ((size_t)1 << 20)

/* Take a cached segment for a request of `need` bytes (header included).
 * Its mapping holds `need`, or (need >= BC_GROW_MIN) it is smaller but
 * mostly touched and the caller must grow it: check seg->map_size. */
hak_warm hak_segment_t* _hak_bigcache_take(size_t need) {
  if (hak_load_relaxed(&bc_bytes) == 0) {
    atomic_fetch_add_explicit(&bc_misses, 1, memory_order_relaxed);
    return NULL;
  }
  size_t k = bc_class_ceil(need);
  size_t lo = need >= BC_GROW_MIN && k >= 8 ? k - 8 : k;   /* down to a quarter of the request */
  hak_segment_t* seg = NULL;
  hak_lock(&bc_lock);
  /* Among blocks whose mapping fits (up to 8x the request), prefer the one
   * whose touched extent already covers the request and is smallest (no
   * fault, least idle resident memory), else the most touched one (fewest
   * faults), which may be a smaller, mostly touched block to be grown
   * (never one made of two moved pieces: mremap cannot grow those).
   * large.peak is the largest size the block ever served. */
  size_t bc = BC_CLASSES, bi = 0;
  bool bcover = false;
  size_t bpeak = 0;
  for (uint64_t m = classes_in(lo, k + 12); m; m &= m - 1) {
    size_t c = (size_t)__builtin_ctzll(m);
    for (size_t i = bc_count[c] > BC_SCAN ? bc_count[c] - BC_SCAN : 0; i < bc_count[c]; i++) {
      hak_segment_t* s = bc_ring[c][i].seg;
      size_t peak = s->large.peak;
      bool fits = s->map_size >= need;
      if (!fits && (s->large.pieced || 2 * (peak + HAK_LARGE_HDR) < need)) continue;
      bool cover = fits && peak + HAK_LARGE_HDR >= need;
      if (bc == BC_CLASSES || (cover && (!bcover || peak < bpeak)) || (!cover && !bcover && peak > bpeak)) {
        bc = c;
        bi = i;
        bcover = cover;
        bpeak = peak;
      }
    }
  }
  if (bc < BC_CLASSES) seg = bc_remove_locked(bc, bi);
  hak_unlock(&bc_lock);
  atomic_fetch_add_explicit(seg ? &bc_hits : &bc_misses, 1, memory_order_relaxed);
  return seg;
}

/* Resident bytes beyond their need in live blocks that take_cover handed
 * out (a small growing buffer moved into a big cached block keeps that
 * block's touched pages).  Bounded by the cache's byte budget: without a
 * bound, small long-lived buffers could each pin a huge block's pages, which
 * the cache would have released after its delay. */
static _Atomic(size_t) bc_pinned;

static size_t excess(const hak_segment_t* seg, size_t extent) {
  size_t r = hak_large_resident(seg);
  return r > extent ? r - extent : 0;
}

/* The block now needs `extent` bytes (SIZE_MAX: it is being freed): what
 * it pins shrinks accordingly. */
void _hak_bigcache_unpin(hak_segment_t* seg, size_t extent) {
  if (seg->large.pinned == 0) return;
  size_t ex = extent == SIZE_MAX ? 0 : excess(seg, extent);
  if (ex < seg->large.pinned) {
    atomic_fetch_sub_explicit(&bc_pinned, seg->large.pinned - ex, memory_order_relaxed);
    seg->large.pinned = ex;
  }
}

/* For a block growing by realloc (or a site whose blocks do): a cached
 * segment whose mapping holds `need` bytes and whose touched extent covers
 * `extent` bytes (header included), of any larger class, as long as its
 * touched pages beyond `extent` fit the pinned budget; of the smallest
 * class that has one, the least touched.  The block grows into resident
 * memory instead of faulting in fresh pages (a growing buffer usually keeps
 * growing). */
hak_segment_t* _hak_bigcache_take_cover(size_t need, size_t extent) {
  if (hak_load_relaxed(&bc_bytes) == 0) return NULL;
  hak_segment_t* seg = NULL;
  size_t room = max_bytes() > hak_load_relaxed(&bc_pinned) ? max_bytes() - hak_load_relaxed(&bc_pinned) : 0;
  hak_lock(&bc_lock);
  size_t bc = BC_CLASSES, bi = 0, bpeak = SIZE_MAX;
  for (uint64_t m = classes_in(bc_class_ceil(need), BC_CLASSES - 1); m; m &= m - 1) {
    size_t c = (size_t)__builtin_ctzll(m);
    for (size_t i = bc_count[c] > BC_SCAN ? bc_count[c] - BC_SCAN : 0; i < bc_count[c]; i++) {
      hak_segment_t* s = bc_ring[c][i].seg;
      if (s->map_size >= need && s->large.peak + HAK_LARGE_HDR >= extent && s->large.peak < bpeak &&
          excess(s, extent) <= room) {
        bc = c;
        bi = i;
        bpeak = s->large.peak;
      }
    }
    if (bc < BC_CLASSES) break;
  }
  if (bc < BC_CLASSES) seg = bc_remove_locked(bc, bi);
  hak_unlock(&bc_lock);
  if (seg) {
    seg->large.pinned = excess(seg, extent);
    atomic_fetch_add_explicit(&bc_pinned, seg->large.pinned, memory_order_relaxed);
    atomic_fetch_add_explicit(&bc_hits, 1, memory_order_relaxed);
  }
  return seg;
}

static void bc_evict_oldest_locked(hak_segment_t** out, size_t* nout, size_t cap) {
  size_t best = BC_CLASSES;
  uint64_t best_t = UINT64_MAX;
  for (size_t c = 0; c < BC_CLASSES; c++)
    if (bc_count[c] && bc_ring[c][0].t_ms < best_t) {
      best_t = bc_ring[c][0].t_ms;
      best = c;
    }
  if (best == BC_CLASSES || *nout >= cap) return;
  out[(*nout)++] = bc_remove_locked(best, 0);
}

/* Address space the cached blocks may hold beyond the pages they touched.
 * A large mapping gets twice its class (room to grow in place), so a cache
 * full of big blocks held twice its bytes in address space: churn64 ended
 * with 115 MB mapped in the cache for 62 MB touched, over its bound of
 * twice the peak live bytes + 64 MiB. */
#define BC_VA_SLACK ((size_t)32 << 20)

/* Past the slack, a block entering the cache gives up its untouched tail
 * (one munmap; a cache that holds a block or two never gets there, so the
 * steady reuse of one size stays without OS calls). */
static void bc_trim_tail(hak_segment_t* seg) {
  size_t keep = hak_large_resident(seg);
  if (seg->large.pieced || seg->large.huge_aligned || seg->sec.guard_off || keep >= seg->map_size) return;
  if (hak_load_relaxed(&bc_mapped) + seg->map_size <= hak_load_relaxed(&bc_bytes) + keep + BC_VA_SLACK) return;
  _hak_os_unmap((uint8_t*)seg + keep, seg->map_size - keep);
  seg->map_size = keep;
}

/* Keep a freed large segment; false when it is not cacheable (the caller
 * releases it).  Blocks pushed out go to the release batch. */
hak_warm bool _hak_bigcache_put(hak_segment_t* seg) {
  uint64_t limit = max_bytes();
  if (seg->large.off >= HAK_LARGE_HDR + HAK_OS_PAGE || hak_large_resident(seg) > limit) return false;
  bc_trim_tail(seg);   /* only a block that stays: one going to the batch is decommitted whole */
  size_t k = bc_class_floor(seg->map_size);
  if (k >= BC_CLASSES) return false;
  hak_segment_t* evicted[16];
  size_t nev = 0;
  uint64_t now = _hak_clock_ms();
  hak_lock(&bc_lock);
  if (bc_count[k] == BC_WAYS) evicted[nev++] = bc_remove_locked(k, 0);
  while (hak_load_relaxed(&bc_bytes) + hak_large_resident(seg) > limit && bc_total_entries > 0 && nev < 16)
    bc_evict_oldest_locked(evicted, &nev, 16);
  bool ok = hak_load_relaxed(&bc_bytes) + hak_large_resident(seg) <= limit;
  if (ok) {
    bc_ring[k][bc_count[k]].seg = seg;
    bc_ring[k][bc_count[k]].t_ms = now;
    bc_count[k]++;
    bc_nonempty |= (uint64_t)1 << k;
    bc_total_entries++;
    atomic_fetch_add_explicit(&bc_bytes, hak_large_resident(seg), memory_order_relaxed);
    atomic_fetch_add_explicit(&bc_mapped, seg->map_size, memory_order_relaxed);
  }
  hak_unlock(&bc_lock);
  if (nev) atomic_fetch_add_explicit(&bc_evictions, nev, memory_order_relaxed);
  for (size_t i = 0; i < nev; i++) _hak_release_large(evicted[i]);
  return ok;
}

/* The process keeps one reserve, not one per tier: before the small tier
 * faults in `bytes` of new pages, the cache decommits as many of its
 * resident ones, from the ends of its oldest blocks (which stay cached, their
 * mappings reusable without a system call).  Else the free memory of one tier
 * idles beside the new pages of the other, and the peak is the sum of the
 * two tiers' peaks (mstressN: 2-6 MB cached beside 3-6 MB of free pool
 * pages).  The pool does the same for large blocks (_hak_pool_yield). */
void _hak_bigcache_yield(size_t bytes) {
  if (HAK_SECURE || hak_load_relaxed(&bc_bytes) == 0) return;
  hak_lock(&bc_lock);
  for (int n = 0; n < 8 && bytes != 0 && bc_total_entries != 0; n++) {
    size_t best = BC_CLASSES, bi = 0;
    uint64_t best_t = UINT64_MAX;
    for (uint64_t m = bc_nonempty; m; m &= m - 1) {   /* the oldest block with resident pages */
      size_t c = (size_t)__builtin_ctzll(m);
      for (size_t i = 0; i < bc_count[c]; i++)
        if (bc_ring[c][i].t_ms < best_t && hak_large_resident(bc_ring[c][i].seg) > HAK_LARGE_HDR) {
          best_t = bc_ring[c][i].t_ms;
          best = c;
          bi = i;
          break;
        }
    }
    if (best == BC_CLASSES) break;
    hak_segment_t* seg = bc_ring[best][bi].seg;
    size_t to = hak_large_resident(seg);
    size_t from = to - HAK_LARGE_HDR > bytes ? (to - bytes) & ~(size_t)(HAK_OS_PAGE - 1) : HAK_LARGE_HDR;
    if (!_hak_decommit((uint8_t*)seg + from, to - from)) break;
    seg->large.peak = from - HAK_LARGE_HDR;
    atomic_fetch_sub_explicit(&bc_bytes, to - from, memory_order_relaxed);
    atomic_fetch_add_explicit(&_hak_stat_bigcache_yielded, to - from, memory_order_relaxed);
    bytes = to - from >= bytes ? 0 : bytes - (to - from);
  }
  hak_unlock(&bc_lock);
}

/* Release entries older than max_age_ms (all of them with 0). */
void _hak_bigcache_expire(uint64_t max_age_ms) {
  if (hak_load_relaxed(&bc_bytes) == 0) return;
  uint64_t now = _hak_clock_ms();
  for (;;) {
    hak_segment_t* evicted[16];
    size_t nev = 0;
    hak_lock(&bc_lock);
    for (size_t c = 0; c < BC_CLASSES && nev < 16; c++) {
      while (bc_count[c] && nev < 16 && now - bc_ring[c][0].t_ms >= max_age_ms) evicted[nev++] = bc_remove_locked(c, 0);
    }
    hak_unlock(&bc_lock);
    if (nev) atomic_fetch_add_explicit(&bc_evictions, nev, memory_order_relaxed);
    for (size_t i = 0; i < nev; i++) _hak_release_large(evicted[i]);
    if (nev < 16) return;
  }
}

hak_warm void _hak_bigcache_stats(uint64_t* hits, uint64_t* misses, uint64_t* evictions, size_t* bytes, size_t* mapped) {
  *mapped = hak_load_relaxed(&bc_mapped);
  *hits = hak_load_relaxed(&bc_hits);
  *misses = hak_load_relaxed(&bc_misses);
  *evictions = hak_load_relaxed(&bc_evictions);
  *bytes = hak_load_relaxed(&bc_bytes);
}

void _hak_bigcache_fork_prepare(void) { hak_lock(&bc_lock); }
void _hak_bigcache_fork_parent(void) { hak_unlock(&bc_lock); }
void _hak_bigcache_fork_child(void) { pthread_mutex_init(&bc_lock, NULL); }
