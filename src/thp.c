/* Transparent huge pages: where hakmem asks the kernel for 2 MiB pages.
 *
 * Why: on a virtual machine a TLB miss walks two page tables, and a heap of
 * tens of megabytes in 4 KiB pages misses the TLB on most first touches of a
 * block: advised everywhere, huge pages cut hakmem's user time on the churn
 * benchmarks by half and more, and its page faults by 5-8x (mimalloc 2.4.1
 * advises its whole arena; docs/BENCHMARKS.md, "Huge pages").  What they
 * cost is memory: the first touch of a 2 MiB range commits all of it, and
 * khugepaged (max_ptes_none 511 by default) collapses a range back into a
 * huge page as long as one 4 KiB page of it is present, undoing decommits.
 *
 * So, with HAKMEM_THP=auto (the default):
 * - a new small segment is advised MADV_HUGEPAGE, before anything touches
 *   it, when it will likely be filled (thp_big: the heap taking it is big,
 *   or the process's slabs are big and dense); a small heap (a thread that
 *   allocates a little, the start of a process) keeps 4 KiB pages, so a
 *   thousand small threads do not each commit 2 MiB; each half of it only
 *   once it holds a slab of blocks of at most a page (the first half at once
 *   when the segment is mapped for such a slab), since a huge page commits
 *   the untouched ends of blocks that span pages;
 * - the first decommit in an advised half of a segment advises that half
 *   MADV_NOHUGEPAGE (segment->thp keeps which halves are advised): memory
 *   the release policy gave back stays given back, khugepaged leaves it;
 * - a large block that covers a whole 2 MiB range is advised (its mapping,
 *   see _hak_thp_fresh) once freed large blocks were seen dense
 *   (thp_large_dense);
 * - on a system whose THP mode is "always" (the kernel would back every
 *   aligned 2 MiB of a segment with a huge page) the segments of small heaps
 *   are advised MADV_NOHUGEPAGE instead.
 * HAKMEM_THP=never advises every new segment MADV_NOHUGEPAGE (when the
 * system mode would otherwise give huge pages); =always advises every new
 * segment and large mapping MADV_HUGEPAGE and never demotes.
 *
 * Every call here is on a slow path: a new mapping, a decommit.  The
 * decision is taken once per mapping: a segment keeps its advice in the
 * cache and when another heap adopts it.  (Collapsing a segment half once
 * slabs filled it, MADV_COLLAPSE, was tried: it added RSS on churn and
 * churn_small and no clear speed.) */
#include "internal.h"
#include <sys/mman.h>

enum { THP_HALF = HAK_SEG_SIZE / 2, THP_PAGE = 2u << 20 };

static int thp_sys_always = -1;   /* the kernel's mode is "always": 1, else 0; -1 before it is read */

/* Read /sys/kernel/mm/transparent_hugepage/enabled once (open/read: no
 * allocation).  Unreadable: assume "madvise", where advice is what counts. */
hak_warm static bool thp_system_always(void) {
  int v = __atomic_load_n(&thp_sys_always, __ATOMIC_RELAXED);
  if (v >= 0) return v;
  v = 0;
  char buf[64];
  if (_hak_os_read_small("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf))
    v = strstr(buf, "[always]") != NULL;
  __atomic_store_n(&thp_sys_always, v, __ATOMIC_RELAXED);
  return v;
}

static void thp_advise(void* p, size_t size, bool huge) {
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
  _hak_os_advise(p, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
  (void)p, (void)size, (void)huge;
#endif
}

/* Will a new small segment be filled?  Yes when the heap taking it already
 * holds HAKMEM_THP_HEAP_MB of segments, or when the process's slabs use that
 * much and fill at least half of its small segments (threads come and go and
 * hand their segments on: each heap is small, the memory is dense).  No for
 * a process of many threads that each allocate a little: 200 threads of
 * 100 KiB take 24 MB in 4 KiB pages and 415 MB when every segment starts
 * with a huge page (mimalloc 2.4.1: 417 MB). */
static bool thp_big(size_t heap_bytes) {
  size_t min = (size_t)hak_opt(THP_HEAP_MB) << 20;
  if (heap_bytes >= min) return true;
  size_t used = hak_load_relaxed(&_hak_stat_slab_pages) * HAK_PAGE_SIZE;
  return used >= min && used >= hak_load_relaxed(&_hak_seg_small) * (HAK_SEG_SIZE / 2);
}

/* Under a memory limit (HAKMEM_MEMORY_LIMIT or the container's) auto mode
 * advises no huge page: one that hakmem gives back in part (a page
 * decommitted, its half demoted) stays charged to the container whole until
 * the kernel splits it, which it does only under pressure.  In a 160 MiB
 * group the group's count reached its limit while the process held 126 MB
 * resident, and the kernel killed it now and then (rel_memory_limit); with
 * 4 KiB pages the count stays at the resident size. */
static long long thp_mode(void) {
  long long m = hak_opt(THP);
  return m == HAK_THP_AUTO && _hak_limit != 0 ? HAK_THP_NEVER : m;
}

/* Are this process's large blocks touched densely?  A huge page commits
 * its whole 2 MiB at the first touch: a block written all over (a buffer, a
 * matrix) gains a TLB reach 512 times larger and faults 512 times less
 * (bench/vm: 0.74x the time of 4 KiB pages, cold), but a block touched here
 * and there (a hash table sized for the worst case: xz -6's encoder) is
 * committed whole (xz: 74.3 MB peak RSS against 58.9).  The evidence is the
 * resident share of unadvised large blocks when they are freed (mincore,
 * one free in 8 after the first 16): large blocks are advised once at least
 * two samples average 90 %, and every 8th one stays unadvised, a probe that
 * keeps the evidence current (an advised block reads as fully resident).
 * A process whose large blocks are never freed shows no evidence and keeps
 * 4 KiB pages for them, as glibc does. */
enum { DENSE_PM = 900, PROBE_EVERY = 8 };
static _Atomic(uint32_t) large_dense_pm;     /* moving average of the resident share, per mille */
static _Atomic(uint32_t) large_samples, large_frees, large_fresh;
static bool thp_large_dense(void) {
  if (hak_load_relaxed(&large_samples) < 2 || hak_load_relaxed(&large_dense_pm) < DENSE_PM) return false;
  return (atomic_fetch_add_explicit(&large_fresh, 1, memory_order_relaxed) + 1) % PROBE_EVERY != 0;
}
bool _hak_thp_wants_sample(const hak_segment_t* seg) {
  if (thp_mode() != HAK_THP_AUTO || seg->thp || seg->large.huge_aligned || seg->large.off + seg->large.size < THP_PAGE)
    return false;
  uint32_t n = atomic_fetch_add_explicit(&large_frees, 1, memory_order_relaxed);
  return n < 16 || n % 8 == 0;
}
void _hak_thp_sample(double touched) {
  if (touched < 0) return;
  uint32_t pm = (uint32_t)(touched * 1000), old = hak_load_relaxed(&large_dense_pm);
  /* (racing updates may lose one sample: an estimate) */
  hak_store_relaxed(&large_dense_pm, hak_load_relaxed(&large_samples) == 0 ? pm : (old * 3 + pm) / 4);
  atomic_fetch_add_explicit(&large_samples, 1, memory_order_relaxed);
}

/* Is a fresh large block that ends `end` bytes into its mapping advised
 * (HAKMEM_THP=auto)?  Then large.c maps it without the headroom to grow in
 * place (twice its class): a 2.4 MB block in a 5 MiB advised mapping took
 * 4 MiB of huge pages, its last one mostly past the block's end, and 64
 * threads' such blocks put core_threads_churn over its RSS bound in CI.
 * Growth then moves or extends the mapping with mremap (no copy). */
hak_warm bool _hak_thp_exact(size_t end) { return thp_mode() == HAK_THP_AUTO && end >= THP_PAGE && thp_large_dense(); }

/* A held mapping taken again for a block ending `end` bytes into it (the
 * secure build's large quarantine, which stands in for the BigCache: from
 * 1 MiB its pages were dropped at free, so the block faults them in again).
 * It is advised now if a fresh mapping would be, else every reuse of a
 * mapping made before the evidence came faults in 4 KiB pages: malloc-large
 * (blocks of 5-25 MiB) took 13.7 s under the secure build without this and
 * 10.5 s with it (medians of 3).  A mapping left unadvised (a probe) is
 * sampled at its free and may be advised at its next reuse. */
void _hak_thp_held(hak_segment_t* seg, size_t end) {
  if (seg->thp || !_hak_thp_exact(end)) return;
  thp_advise(seg, seg->map_size, true);
  seg->thp = 1;
}

/* A fresh mapping, before anything touches it (a touch would map the 2 MiB
 * range around it in 4 KiB pages for good).  Small segment: `hint` is the
 * bytes of segments the taking heap already holds; large: the block is
 * [seg + off, seg + off + hint) when large.c chose to advise it, hint 0 when
 * not. */
hak_warm void _hak_thp_fresh(hak_segment_t* seg, size_t map_size, hak_seg_kind_t kind, size_t off, size_t hint,
                    uint32_t first_bsize) {
  long long mode = thp_mode();
  uint8_t halves = 0;
  /* (no write to seg before the advice: a fresh mapping reads zero) */
  if (kind != HAK_SEG_SMALL && kind != HAK_SEG_LARGE) return;   /* the secure build's zero-size blocks: PROT_NONE */
  if (mode == HAK_THP_ALWAYS) {
    thp_advise(seg, map_size, true);   /* nothing to demote: the user asked */
  } else if (mode == HAK_THP_NEVER) {
    if (thp_system_always()) thp_advise(seg, map_size, false);
  } else if (kind == HAK_SEG_LARGE) {
    /* A block that covers a whole 2 MiB range (header page included).  The
     * whole mapping is advised: advice on part of it would split it into two
     * kernel mappings, and mremap (realloc growth) cannot move or grow a
     * range that spans two.  large.c maps such a block exactly
     * (_hak_thp_exact): a 2 MiB range the mapping covers only in part stays
     * in 4 KiB pages, so the advice commits nothing past the block's end. */
    if (hint != 0) {   /* large.c's decision (_hak_thp_exact), taken once */
      thp_advise(seg, map_size, true);
      halves = 1;
    }
  } else if (thp_big(hint)) {
    /* the first half now (the header touches it) when the slab the segment
     * is mapped for holds blocks of at most a page; the second when its
     * first slab comes (_hak_thp_slab): not for blocks that span pages.  A
     * segment mapped for such blocks (a heap growing with medium blocks)
     * waits for a slab of small blocks in its first half too: its header
     * page is then in 4 KiB pages, which khugepaged may collapse later */
    if (first_bsize <= HAK_OS_PAGE) {
      thp_advise(seg, THP_HALF, true);
      halves = 1 | HAK_THP_SECOND_OPEN;
    } else {
      if (thp_system_always()) thp_advise(seg, THP_HALF, false);
      halves = HAK_THP_FIRST_OPEN | HAK_THP_SECOND_OPEN;
    }
  } else if (thp_system_always()) {
    thp_advise(seg, map_size, false);
  }
  seg->thp = halves;
}

/* Pages [lo, lo + n) of a small segment are about to be decommitted: an
 * advised half they touch is advised no more, so khugepaged does not fill
 * the decommitted pages back in. */
void _hak_thp_demote(hak_segment_t* seg, unsigned lo, unsigned n) {
  for (unsigned half = 0; half < 2; half++) {
    unsigned first = half * (HAK_PAGES_PER_SEG / 2), last = first + HAK_PAGES_PER_SEG / 2;
    if ((seg->thp & (1u << half)) && lo < last && lo + n > first) {
      thp_advise((uint8_t*)seg + (size_t)half * THP_HALF, THP_HALF, false);
      seg->thp &= (uint8_t) ~(1u << half);
    }
  }
}

/* A slab of blocks of `bsize` bytes goes to pages [idx, idx + n) of a small
 * segment.  The second half of an advised segment is advised only when its
 * first slab holds blocks of at most a page: blocks that span pages (medium
 * classes) often leave pages of their ends untouched (a 20 KiB request in a
 * 24 KiB block), which a huge page would commit (fragment: 26 MB of 280). */
hak_warm void _hak_thp_slab(hak_segment_t* seg, size_t idx, unsigned n, uint32_t bsize) {
  if ((seg->thp & HAK_THP_FIRST_OPEN) && idx < HAK_PAGES_PER_SEG / 2 && bsize <= HAK_OS_PAGE) {
    seg->thp &= (uint8_t)~HAK_THP_FIRST_OPEN;
    thp_advise(seg, THP_HALF, true);
    seg->thp |= 1;
  }
  if (!(seg->thp & HAK_THP_SECOND_OPEN) || idx + n <= HAK_PAGES_PER_SEG / 2) return;
  seg->thp &= (uint8_t)~HAK_THP_SECOND_OPEN;
  if (bsize <= HAK_OS_PAGE) {
    thp_advise((uint8_t*)seg + THP_HALF, THP_HALF, true);
    seg->thp |= 2;
  } else if (thp_system_always()) {
    thp_advise((uint8_t*)seg + THP_HALF, THP_HALF, false);
  }
}
