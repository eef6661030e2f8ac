/* The release policy: when and how empty memory goes back to the OS.
 * - Large blocks evicted from the BigCache are decommitted (HAKMEM_DECOMMIT)
 *   and parked in a small batch where they can still be reused; munmap is
 *   deferred until the batch overflows and then done for a group at once.
 * - Empty slab pages inside SuperSlabs and empty cached SuperSlabs are
 *   decommitted once they have been empty for HAKMEM_DECOMMIT_DELAY_MS, or at
 *   once while more than HAKMEM_LEAN_TARGET_MB of empty memory is resident.
 * Nothing here runs on a malloc/free fast path, and only memory that holds no
 * live block is ever decommitted. */
#include "internal.h"
#include <sys/mman.h>
#include <time.h>

_Atomic(size_t) _hak_retained_bytes;   /* empty but resident (slab pages, cached segments) */
static _Atomic(uint64_t) rel_decommit_calls, rel_decommit_bytes, rel_unmapped_blocks;

/* Paced passes (meshing, scavenging), run before a heap maps a new small
 * segment: at most every HAK_PACE_AUTO_MS, backing off (doubling) to
 * HAK_PACE_IDLE_MS while passes find nothing, and in any case once the
 * process's small segments grew by 1/8 since the last.  By time alone, a
 * program that grows for a while (the gap backs off towards 10 s), frees
 * scattered blocks and grows again within that gap was never compacted
 * (fragment meshed in 4 runs of 12).  By growth, walking the slabs costs
 * O(heap) per 1/8 of growth, and a heap that grows after scattered frees
 * is compacted before it has grown by more than that. */
#define HAK_PACE_GROW_DIV 8
hak_warm bool _hak_pace_due(hak_pace_t* p) {
  size_t segs = hak_load_relaxed(&_hak_seg_small), last = hak_load_relaxed(&p->segs);
  uint64_t now = _hak_clock_ms(), due = hak_load_relaxed(&p->next_ms);
  uint64_t gap = hak_load_relaxed(&p->gap_ms);
  bool grown = segs >= last + (last / HAK_PACE_GROW_DIV > 2 ? last / HAK_PACE_GROW_DIV : 2);
  if ((now < due && !grown) ||
      !atomic_compare_exchange_strong(&p->next_ms, &due, now + (gap ? gap : HAK_PACE_AUTO_MS)))
    return false;
  hak_store_relaxed(&p->segs, segs);
  return true;
}
/* After a pass: one that found work keeps the short gap, one that found
 * none doubles it (a heap that grows without scattered frees pays a walk
 * of its slabs every 10 s at most). */
void _hak_pace_found(hak_pace_t* p, bool found) {
  hak_store_relaxed(&p->gap_ms, hak_pace_gap(hak_load_relaxed(&p->gap_ms), HAK_PACE_AUTO_MS, found));
}

/* Decommit [p, p+size) with the configured method; false when off. */
bool _hak_decommit(void* p, size_t size) {
  long long mode = hak_opt(DECOMMIT);
  if (mode == HAK_DECOMMIT_OFF || size == 0) return false;
  bool ok = false;
#ifdef MADV_FREE
  /* (under a memory limit: MADV_FREE's pages count against it until reclaimed) */
  if (mode == HAK_DECOMMIT_FREE && _hak_limit == 0) ok = _hak_os_advise(p, size, MADV_FREE);
#endif
  if (!ok) ok = _hak_os_advise(p, size, MADV_DONTNEED);   /* also the fallback */
  if (ok) {
    atomic_fetch_add_explicit(&rel_decommit_calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&rel_decommit_bytes, size, memory_order_relaxed);
  }
  return ok;
}

bool _hak_retained_over_target(void) {
  return hak_load_relaxed(&_hak_retained_bytes) > ((size_t)hak_opt(LEAN_TARGET_MB) << 20);
}

/* ---------------------------------------------------------------- large batch */
#define BATCH_N 16
static pthread_mutex_t batch_lock = PTHREAD_MUTEX_INITIALIZER;
static hak_segment_t* batch[BATCH_N];   /* decommitted, still mapped; oldest first */
static size_t batch_n;
static size_t batch_va;   /* bytes of address space the parked segments hold */
static _Atomic(size_t) batch_count;
/* Parked segments cost no memory, only address space; their reuse saves the
 * mmap and munmap calls, not the page faults.  So the batch holds at most
 * this much address space: the mapped bytes at the end of a churn of big
 * blocks stay near the live bytes (churn64 kept 16 parked mappings of up
 * to 20 MiB). */
#define BATCH_VA ((size_t)32 << 20)

void _hak_unmap_large(hak_segment_t* seg) {
  atomic_fetch_add_explicit(&rel_unmapped_blocks, 1, memory_order_relaxed);
  _hak_segment_unmap(seg);
}

/* Address space of the n oldest parked segments (batch_lock held). */
static size_t batch_va_of(size_t n) {
  size_t va = 0;
  for (size_t i = 0; i < n; i++) va += batch[i]->map_size;
  return va;
}

/* A large segment leaves the BigCache: decommit it and park it in the batch;
 * when the batch is full, unmap its older half in one go. */
void _hak_release_large(hak_segment_t* seg) {
  /* parking pays for blocks a later allocation may take; a huge one is
   * unmapped at once rather than decommitted and unmapped later */
  if (hak_opt(DECOMMIT) == HAK_DECOMMIT_OFF || seg->map_size > ((size_t)64 << 20)) {
    _hak_unmap_large(seg);
    return;
  }
  _hak_decommit((uint8_t*)seg + HAK_LARGE_HDR, seg->map_size - HAK_LARGE_HDR);
  seg->large.fresh = hak_opt(DECOMMIT) == HAK_DECOMMIT_DONTNEED;
  seg->large.peak = 0;   /* nothing resident any more */
  hak_segment_t* group[BATCH_N];
  size_t ng = 0;
  hak_lock(&batch_lock);
  if (batch_n == BATCH_N) ng = BATCH_N / 2;
  size_t drop = batch_va_of(ng);   /* address space of the ng oldest */
  while (ng < batch_n && batch_va - drop + seg->map_size > BATCH_VA) drop += batch[ng++]->map_size;
  if (ng > 0) {
    batch_va -= drop;
    memcpy(group, batch, ng * sizeof *batch);
    memmove(batch, batch + ng, (batch_n - ng) * sizeof *batch);
    batch_n -= ng;
  }
  batch[batch_n++] = seg;
  batch_va += seg->map_size;
  hak_store_relaxed(&batch_count, batch_n);
  hak_unlock(&batch_lock);
  for (size_t i = 0; i < ng; i++) _hak_unmap_large(group[i]);
}

/* Reuse a parked segment whose mapping holds `need` bytes (at most twice). */
hak_warm hak_segment_t* _hak_batch_take(size_t need) {
  if (hak_load_relaxed(&batch_count) == 0) return NULL;
  hak_segment_t* seg = NULL;
  hak_lock(&batch_lock);
  for (size_t i = batch_n; i-- > 0;) {
    if (batch[i]->map_size >= need && batch[i]->map_size <= 2 * need) {
      seg = batch[i];
      batch_va -= seg->map_size;
      memmove(batch + i, batch + i + 1, (batch_n - i - 1) * sizeof *batch);
      batch_n--;
      break;
    }
  }
  hak_store_relaxed(&batch_count, batch_n);
  hak_unlock(&batch_lock);
  return seg;
}

/* Unmap every parked segment now. */
void _hak_batch_flush(void) {
  for (;;) {
    hak_segment_t* group[BATCH_N];
    hak_lock(&batch_lock);
    size_t ng = batch_n;
    memcpy(group, batch, ng * sizeof *batch);
    batch_n = 0;
    batch_va = 0;
    hak_store_relaxed(&batch_count, 0);
    hak_unlock(&batch_lock);
    for (size_t i = 0; i < ng; i++) _hak_unmap_large(group[i]);
    if (ng == 0) return;
  }
}

/* ---------------------------------------------------------------- small memory */

/* Decommit some of a segment's dirty free pages (pool lock, or seg_lock for
 * cached segments). */
static void decommit_pages(hak_segment_t* seg, const hak_pset_t* pages) {
  if (hak_opt(DECOMMIT) == HAK_DECOMMIT_OFF || hak_pset_empty(pages)) return;
  size_t n = 0;
  for (size_t lo = hak_pset_next(pages, 0); lo < HAK_PAGES_PER_SEG;) {   /* a call per run */
    size_t hi = hak_pset_next_gap(pages, lo);
    if (seg->thp & 3) _hak_thp_demote(seg, (unsigned)lo, (unsigned)(hi - lo));
    _hak_decommit((uint8_t*)seg + (lo << HAK_PAGE_SHIFT), (hi - lo) << HAK_PAGE_SHIFT);
    n += hi - lo;
    lo = hak_pset_next(pages, hi);
  }
  atomic_fetch_sub_explicit(&_hak_retained_bytes, n << HAK_PAGE_SHIFT, memory_order_relaxed);
  hak_pset_andnot(&seg->age.dirty, &seg->age.dirty, pages);
  hak_pset_andnot(&seg->age.old, &seg->age.old, pages);
  hak_pset_andnot(&seg->age.old2, &seg->age.old2, pages);
}

void _hak_segment_decommit_free_pages(hak_segment_t* seg) {
  hak_pset_t pages = seg->age.dirty;
  decommit_pages(seg, &pages);
}
/* Decommit the last n of seg's resident pages among `pages` (the ones the
 * pool's first-fit takes reach last); how many that is. */
size_t _hak_segment_decommit_top(hak_segment_t* seg, const hak_pset_t* pages, size_t n) {
  hak_pset_t p, take = {{0}};
  size_t k = 0;
  if (!hak_pset_and(&p, pages, &seg->age.dirty)) return 0;
  for (size_t i = hak_pset_prev(&p, SIZE_MAX); i != SIZE_MAX && k < n; i = i ? hak_pset_prev(&p, i - 1) : SIZE_MAX, k++)
    hak_pset_add(&take, i);
  decommit_pages(seg, &take);
  return k;
}

/* A segment's page clock, a snapshot every half delay (3/8 of it, so that a
 * tick a little early does not skip one): the pages empty at the last two
 * snapshots and not reused since are decommitted.  So a page goes back to
 * the OS after delay..1.5*delay of disuse (given ticks: the background
 * thread's come every half delay), however busy the rest of its segment
 * is.  (Aging the segment as a whole instead took pages freed a moment ago
 * along with old ones, and the program faulted them straight back in; one
 * snapshot a delay, used until 2026-11-26, let a page wait up to twice the
 * delay.) */
void _hak_segment_age(hak_segment_t* seg, uint64_t now, uint64_t delay) {
  if (now - seg->age.ms < delay / 2 - delay / 8) return;
  hak_pset_t due;
  if (hak_pset_and(&due, &seg->age.old2, &seg->age.dirty)) decommit_pages(seg, &due);
  hak_pset_and(&seg->age.old2, &seg->age.old, &seg->age.dirty);
  seg->age.old = seg->age.dirty;
  seg->age.ms = now;
}

/* Slab pages just became free in a small segment (pool lock). */
hak_warm void _hak_pages_freed(hak_segment_t* seg, size_t lo, size_t n) {
  if (hak_opt(DECOMMIT) == HAK_DECOMMIT_OFF) return;
  if (hak_pset_empty(&seg->age.dirty)) seg->age.since = _hak_clock_ms();
  size_t fresh = n - hak_pset_count_run(&seg->age.dirty, lo, n);
  hak_pset_add_run(&seg->age.dirty, lo, n);
  atomic_fetch_add_explicit(&_hak_retained_bytes, fresh << HAK_PAGE_SHIFT, memory_order_relaxed);
  if (hak_opt(DECOMMIT_DELAY_MS) == 0 || _hak_retained_over_target()) _hak_segment_decommit_free_pages(seg);
}

/* Slab pages are taken again: they are no longer empty memory. */
hak_warm void _hak_pages_reused(hak_segment_t* seg, size_t lo, size_t n) {
  size_t was = hak_pset_count_run(&seg->age.dirty, lo, n);
  hak_pset_del_run(&seg->age.old, lo, n);
  hak_pset_del_run(&seg->age.old2, lo, n);
  if (was == 0) return;
  hak_pset_del_run(&seg->age.dirty, lo, n);
  atomic_fetch_sub_explicit(&_hak_retained_bytes, was << HAK_PAGE_SHIFT, memory_order_relaxed);
}

void _hak_release_stats(uint64_t* calls, uint64_t* bytes, uint64_t* unmapped, size_t* parked, size_t* parked_mapped) {
  hak_lock(&batch_lock);
  *parked = batch_n;
  *parked_mapped = batch_va;
  hak_unlock(&batch_lock);
  *calls = hak_load_relaxed(&rel_decommit_calls);
  *bytes = hak_load_relaxed(&rel_decommit_bytes);
  *unmapped = hak_load_relaxed(&rel_unmapped_blocks);
}

void _hak_release_fork_prepare(void) { hak_lock(&batch_lock); }
void _hak_release_fork_parent(void) { hak_unlock(&batch_lock); }
void _hak_release_fork_child(void) { pthread_mutex_init(&batch_lock, NULL); }
