/* Scavenging (HAKMEM_SCAVENGE): the free 4 KiB pages inside sparse slabs
 * given back to the OS, without moving a block.
 *
 * After scattered frees a slab that keeps one live block keeps its whole
 * run of pages resident, and blocks of other sizes need new pages
 * (`fragment`: 1.4x glibc's RSS).  Meshing (mesh.c) merges sparse slabs; it
 * needs a file-backed heap, a write barrier and a fork plan, so it is off by
 * default.  Scavenging takes the part of that memory that needs none of it:
 * a 4 KiB page of a slab whose every block is free holds nothing, and
 * MADV_DONTNEED gives it back.  The blocks overlapping such a page are
 * *phantoms*: taken off the slab's free list (their links lay in the page)
 * and counted in the segment header, not in `used`, so the slab still
 * empties and is released when its last live block is freed.  A slab whose
 * free list and fresh room run out takes its phantoms back
 * (`_hak_scavenge_readmit`, on the refill path): their pages fault in again
 * as zero pages and are linked as free blocks.  Blocks whose 4 KiB page
 * holds one live block are left alone, so classes of small blocks give back
 * little (a page of 64-byte blocks is empty only when all 64 are), large
 * classes most.
 *
 * A pass walks the heap's own slabs (never the current slab of a class, and
 * only slabs carved to their end and at most half full), collects their
 * remote frees, marks the free blocks in a bitmap from the free list, and
 * drops the pages whose blocks are all free.  It runs where meshing would:
 * before a heap maps a new segment, paced by time and growth (a steady
 * state maps no segment and makes no call), and in malloc_trim/hak_collect.
 *
 * Invariants: a phantom is never on a free list and never handed out; a
 * dropped page holds only phantoms (and slab space past the last block);
 * seg->drop and seg->nphantom are the owner's, cleared when the slab's pages
 * are freed (slab.c, _hak_slab_clear); the owner stores them relaxed, since
 * the figures walk (stats.c) reads them while it writes.  Not in the secure build (its blocks
 * carry fills and trailers) and not with meshing (its live maps count every
 * carved block off the free list as live). */
#include "internal.h"
#include "slab.h"

#include <sys/mman.h>

#define SCAV_MAX_BLOCKS ((64 << 10) / 16)   /* the most blocks a slab holds (16-byte blocks, 64 KiB: slab.c) */

_Atomic(uint64_t) _hak_stat_scav_passes, _hak_stat_scav_pages, _hak_stat_scav_readmitted;
_Atomic(size_t) _hak_stat_scav_dropped;   /* pages given back and not taken back yet */

#define OS_PER_PAGE (HAK_PAGE_SIZE / HAK_OS_PAGE)   /* 1 */
_Static_assert(OS_PER_PAGE == 1, "a slab's pages are OS pages");
hak_inline bool dropped(const hak_segment_t* seg, size_t idx, size_t j) { return hak_pset_has_atomic(&seg->scav.drop, idx + j); }

/* Does block b of s (an owned slab) overlap a page given back? */
hak_inline bool block_dropped(const hak_segment_t* seg, size_t idx, size_t lo, uint32_t bsize) {
  for (size_t j = lo / HAK_OS_PAGE; j <= (lo + bsize - 1) / HAK_OS_PAGE; j++)
    if (dropped(seg, idx, j)) return true;
  return false;
}
bool _hak_scavenge_is_phantom(const hak_slab_t* s, const void* b) {
  const hak_segment_t* seg = hak_segment_of(s);
  size_t idx = hak_slab_index(s);
  return seg->nphantom[hak_slot_of(idx)] != 0 && block_dropped(seg, idx, (size_t)((const uint8_t*)b - hak_slab_start(s)), s->bsize);
}

/* The free blocks of s (its free list, after its remote frees) in map;
 * false when the list is longer than the slab (corrupt: left alone). */
static bool free_map(hak_slab_t* s, uint64_t* map, uint32_t nb) {
  memset(map, 0, ((nb + 63) / 64) * 8);
  uint8_t* start = hak_slab_start(s);
  uint32_t n = 0;
  for (hak_block_t* b = s->free; b != NULL; b = hak_block_next(b)) {
    uint32_t i = (uint32_t)(((uint8_t*)b - start) / s->bsize);
    if (++n > nb || i >= nb) return false;
    map[i / 64] |= (uint64_t)1 << (i % 64);
  }
  return true;
}

#define NEWDROP_WORDS (HAK_SLAB_MAX_PAGES * OS_PER_PAGE / 64)

/* The 4 KiB pages of slab s (nb blocks up to limit, free ones in map) not
 * given back yet whose every overlapping block is free, in newdrop; false
 * when there is none. */
static bool free_pages(hak_slab_t* s, const uint64_t* map, uint64_t* newdrop) {
  hak_segment_t* seg = hak_segment_of(s);
  size_t idx = hak_slab_index(s);
  uint32_t limit = hak_slab_limit(s), bsize = s->bsize;
  size_t nos = (size_t)s->npages * OS_PER_PAGE;
  bool any = false;
  for (size_t j = 0; j < nos; j++) {
    size_t lo = j * HAK_OS_PAGE;
    if (lo >= limit || dropped(seg, idx, j)) continue;
    size_t hi = lo + HAK_OS_PAGE < limit ? lo + HAK_OS_PAGE : limit;
    bool all = true;
    for (size_t i = lo / bsize; i <= (hi - 1) / bsize && all; i++) all = (map[i / 64] >> (i % 64)) & 1;
    if (all) {
      newdrop[j / 64] |= (uint64_t)1 << (j % 64);
      any = true;
    }
  }
  return any;
}

/* The free list rebuilt in address order without the blocks on the pages
 * of newdrop: those become phantoms.  Returns how many did. */
static uint32_t relink_free(hak_slab_t* s, const uint64_t* map, uint32_t nb, const uint64_t* newdrop) {
  uint8_t* start = hak_slab_start(s);
  uint32_t bsize = s->bsize;
  hak_block_t* head = NULL;
  hak_block_t* last = NULL;
  uint32_t phantoms = 0;
  for (uint32_t i = 0; i < nb; i++) {
    if (!((map[i / 64] >> (i % 64)) & 1)) continue;
    size_t lo = (size_t)i * bsize, hi = lo + bsize - 1;
    bool ph = false;
    for (size_t j = lo / HAK_OS_PAGE; j <= hi / HAK_OS_PAGE && !ph; j++) ph = (newdrop[j / 64] >> (j % 64)) & 1;
    if (ph) {
      phantoms++;
      continue;
    }
    hak_block_t* b = (hak_block_t*)(start + lo);
    if (last != NULL) hak_block_set_next(last, b);
    else head = b;
    last = b;
  }
  if (last != NULL) hak_block_set_next(last, NULL);
  s->free = head;
  return phantoms;
}

/* The pages of newdrop marked given back and given back, a run at a time;
 * how many. */
static size_t give_back(hak_slab_t* s, const uint64_t* newdrop) {
  hak_segment_t* seg = hak_segment_of(s);
  size_t idx = hak_slab_index(s);
  size_t nos = (size_t)s->npages * OS_PER_PAGE;
  uint8_t* start = hak_slab_start(s);
  size_t n = 0;
  for (size_t j = 0; j < nos;) {
    if (!((newdrop[j / 64] >> (j % 64)) & 1)) {
      j++;
      continue;
    }
    size_t k = j;
    while (k < nos && ((newdrop[k / 64] >> (k % 64)) & 1)) {
      hak_pset_add_atomic(&seg->scav.drop, idx + k);
      k++;
    }
    /* an advised half of the segment is advised no more, or khugepaged
     * would fill the pages back in (thp.c) */
    _hak_pool_thp_demote(seg, (unsigned)idx, s->npages);
    /* DONTNEED (not the release policy's MADV_FREE option): the pages must
     * read as zeros from now on, which the checks below rely on */
    _hak_os_advise(start + j * HAK_OS_PAGE, (k - j) * HAK_OS_PAGE, MADV_DONTNEED);
    n += k - j;
    j = k;
  }
  return n;
}

/* Drop the all-free pages of one slab (its remote frees collected); the
 * pages dropped. */
static size_t scavenge_slab(hak_slab_t* s, uint64_t* map) {
  hak_segment_t* seg = hak_segment_of(s);
  size_t idx = hak_slab_index(s);
  uint32_t nb = hak_slab_limit(s) / s->bsize;
  if (nb > SCAV_MAX_BLOCKS) return 0;
  if (s->free == NULL || !free_map(s, map, nb)) return 0;
  uint64_t newdrop[NEWDROP_WORDS] = {0};
  if (!free_pages(s, map, newdrop)) return 0;
  uint32_t phantoms = relink_free(s, map, nb, newdrop);
  __atomic_store_n(&seg->nphantom[hak_slot_of(idx)], (uint16_t)(seg->nphantom[hak_slot_of(idx)] + phantoms), __ATOMIC_RELAXED);
  return give_back(s, newdrop);
}

/* Clear the slab's given-back marks; the pages they named. */
static size_t drop_clear(hak_segment_t* seg, size_t idx, unsigned npages) {
  size_t pages = 0;
  for (unsigned k = 0; k < npages; k++) {
    if (!hak_pset_has_atomic(&seg->scav.drop, idx + k)) continue;
    pages++;
    hak_pset_del_atomic(&seg->scav.drop, idx + k);
  }
  __atomic_store_n(&seg->nphantom[hak_slot_of(idx)], 0, __ATOMIC_RELAXED);
  if (pages) atomic_fetch_sub_explicit(&_hak_stat_scav_dropped, pages, memory_order_relaxed);
  return pages;
}

/* A slab with phantoms whose free list and fresh room ran out takes them
 * back (slab.c, _hak_slab_refill, which tests for phantoms): true when it has
 * free blocks again. */
bool _hak_scavenge_readmit(hak_slab_t* s) {
  hak_segment_t* seg = hak_segment_of(s);
  size_t idx = hak_slab_index(s);
  uint32_t limit = hak_slab_limit(s), bsize = s->bsize, nb = limit / bsize;
  uint8_t* start = hak_slab_start(s);
  hak_block_t* head = s->free;
  /* from the top down, so the list runs in address order */
  for (uint32_t i = nb; i-- > 0;) {
    size_t lo = (size_t)i * bsize;
    if (!block_dropped(seg, idx, lo, bsize)) continue;
    hak_block_t* b = (hak_block_t*)(start + lo);
    /* A phantom whose first words lie on a given-back page reads zeros
     * unless something wrote it since: a double free of it (the free cookie
     * was gone with the page, so free took it, and malloc may have handed
     * it out again) or a write after free.  Then it is not linked. */
    if (dropped(seg, idx, lo / HAK_OS_PAGE) && (b->next != NULL || b->cookie != 0)) {
      _hak_double_free("malloc", b, bsize);
      continue;
    }
    hak_block_set_next(b, head);
    b->cookie = hak_cookie();
    head = b;
  }
  s->free = head;
  atomic_fetch_add_explicit(&_hak_stat_scav_readmitted, drop_clear(seg, idx, s->npages), memory_order_relaxed);
  return head != NULL;
}

/* A slab with phantoms whose `used` reached 0 (hak_slab_is_empty): is it
 * empty?  Not when a phantom was freed again after its page was given back:
 * its cookie went with the page, so free took it and counted it, and the
 * slab would be released under a live block.  Such a phantom is on the free
 * list (unlinked here), or it was handed out again and written (its first
 * words no longer read as zeros).  Each is reported, and counted back in
 * `used` (under HAKMEM_INVALID_FREE=warn or ignore the program goes on with
 * the slab kept).  The walk is bounded by the slab's blocks. */
bool _hak_scavenge_verify(hak_slab_t* s) {
  hak_segment_t* seg = hak_segment_of(s);
  size_t idx = hak_slab_index(s);
  uint8_t* start = hak_slab_start(s);
  uint32_t bsize = s->bsize, nb = hak_slab_limit(s) / bsize, n = 0;
  hak_block_t* prev = NULL;
  for (hak_block_t* b = s->free; b != NULL && n++ <= nb;) {
    hak_block_t* next = hak_block_next(b);
    if (block_dropped(seg, idx, (size_t)((uint8_t*)b - start), bsize)) {
      _hak_double_free("free", b, bsize);
      if (prev != NULL) hak_block_set_next(prev, next);
      else s->free = next;
      b->next = NULL;   /* (zero again, as the readmission expects) */
      b->cookie = 0;
      hak_used_add(s, 1);
    } else {
      prev = b;
    }
    b = next;
  }
  /* a given-back page that nothing touched since is not resident: only the
   * resident ones are read (a read of the others would map the zero page,
   * a fault per page: fragment's final frees took twice the time) */
  unsigned char vec[HAK_SLAB_MAX_PAGES * OS_PER_PAGE];
  size_t nos = (size_t)s->npages * OS_PER_PAGE;
  if (nos > sizeof vec || !_hak_os_resident(start, nos * HAK_OS_PAGE, vec)) memset(vec, 1, sizeof vec);
  for (uint32_t i = 0; i < nb; i++) {
    size_t lo = (size_t)i * bsize;
    if (!dropped(seg, idx, lo / HAK_OS_PAGE) || (lo / HAK_OS_PAGE < sizeof vec && !(vec[lo / HAK_OS_PAGE] & 1))) continue;
    hak_block_t* b = (hak_block_t*)(start + lo);
    if (b->next != NULL || b->cookie != 0) {
      _hak_double_free("free", b, bsize);
      hak_used_add(s, 1);
    }
  }
  return s->used == 0;
}

/* The slab's pages are freed (slab.c, _hak_slab_clear): its dropped pages
 * are free pages like the others now. */
void _hak_scavenge_forget(hak_slab_t* s) { drop_clear(hak_segment_of(s), hak_slab_index(s), s->npages); }

typedef struct {
  hak_heap_t* h;
  uint64_t* map;
  size_t pages;
} scav_t;

static void scavenge_one(hak_slab_t* s, void* arg) {
  scav_t* sc = arg;
  if (hak_load_relaxed(&s->xowner) & HAK_OWNER_FLAGS) return;   /* full, meshed: nothing free, or not ours */
  if (hak_slab_bump(s, s->carved) < hak_slab_limit(s)) return;   /* fresh room: young, not sparse */
  if ((size_t)s->used * s->bsize * 2 > hak_slab_limit(s)) return;   /* more than half full */
  _hak_slab_collect(s);
  if (hak_slab_is_empty(s)) {
    /* emptied by remote frees: released whole (its pages serve any class) */
    _hak_slab_detach(sc->h, s);
    _hak_slab_release(sc->h, s);
    return;
  }
  sc->pages += scavenge_slab(s, sc->map);
}

/* Does scavenging run in this process?  Not in the secure build, not with
 * meshing, and not when nothing is decommitted (HAKMEM_DECOMMIT=off). */
bool _hak_scavenge_enabled(void) {
  return !HAK_SECURE && hak_opt(SCAVENGE) && !hak_opt(MESH) && hak_opt(DECOMMIT) != HAK_DECOMMIT_OFF;
}
hak_inline bool scavenge_on(const hak_heap_t* h) { return h != &_hak_heap_empty && _hak_scavenge_enabled(); }

/* One pass over the heap's slabs; the pages given back. */
hak_warm static size_t scavenge_heap(hak_heap_t* h) {
  atomic_fetch_add_explicit(&_hak_stat_scav_passes, 1, memory_order_relaxed);
  uint64_t map[SCAV_MAX_BLOCKS / 64];
  scav_t sc = {h, map, 0};
  for (size_t cls = 0; cls < HAK_NCLASSES; cls++) _hak_heap_foreach_slab(h, cls, scavenge_one, &sc);
  if (sc.pages) {
    atomic_fetch_add_explicit(&_hak_stat_scav_pages, sc.pages, memory_order_relaxed);
    atomic_fetch_add_explicit(&_hak_stat_scav_dropped, sc.pages, memory_order_relaxed);
  }
  return sc.pages;
}

/* Before a heap maps a new segment (paced, process-wide) and in
 * malloc_trim/hak_collect (forced). */
hak_warm void _hak_scavenge_pass(hak_heap_t* h, bool forced) {
  static hak_pace_t pace;
  if (!scavenge_on(h) || (!forced && !_hak_pace_due(&pace))) return;
  _hak_pace_found(&pace, scavenge_heap(h) != 0);
}

/* On the heap's release tick (release.c): a program that frees scattered
 * blocks and does not grow again maps no segment, so without this its
 * sparse slabs kept their pages until malloc_trim.  At most once per
 * decommit delay (at least HAK_PACE_AUTO_MS), and, while passes find nothing,
 * twice as seldom each time up to HAK_PACE_IDLE_MS (hak_pace_gap, as the
 * paced passes before a new segment back off): a steady state that keeps
 * sparse slabs pays one walk of its slabs per 10 s.  Pages given back here
 * were free at the pass; one freed a moment earlier may be taken back soon
 * (a fault), at most once per delay. */
hak_warm void _hak_scavenge_tick(hak_heap_t* h, uint64_t now, uint64_t delay) {
  if (now < h->scav.next_ms || !scavenge_on(h)) return;
  uint64_t base = delay > HAK_PACE_AUTO_MS ? delay : HAK_PACE_AUTO_MS;
  if (h->scav.next_ms == 0) {   /* the heap's first tick starts its clock: a short thread never pays a pass */
    h->scav.gap_ms = base;
    h->scav.next_ms = now + base;
    return;
  }
  h->scav.gap_ms = hak_pace_gap(h->scav.gap_ms, base, scavenge_heap(h) != 0);
  h->scav.next_ms = now + h->scav.gap_ms;
}
