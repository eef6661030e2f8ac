/* Page slots for sampled blocks: a heap-profile sample of a class up to a
 * page (prof.c) gets a 4 KiB page of its own in a slot segment (kind
 * HAK_SEG_SAMPLED, in the segment map like any other), so that its free is
 * seen: the segment's window descriptors stay HAK_OWNER_UNUSED, which sends
 * every free there out of the fast path to _hak_slots_free.  A sample served
 * as a large block instead cost a mapping, its faults and its unmapping
 * each time (glibc-simple at 6,800 samples a second: 8 % of its time).
 *
 * A segment is a header (the segment descriptor, then the slot table) and
 * SLOTS_N slots of two pages, a gap page and the block's page: the gaps
 * are never touched (address space only), and keep every slot between two
 * pages that hold no block.  Freed slots are reused last in, first out, so
 * a program that keeps few samples live keeps reusing the same resident
 * pages; a segment is kept once made (its pages are the high water of live
 * samples, about a page per HAKMEM_PROF_RATE bytes live).  Samples are
 * rare next to mallocs (one per 512 KiB allocated by default): one lock. */
#include "internal.h"

#define SLOTS_FIRST ((size_t)64 << 10)                        /* the first slot's gap page */
#define SLOTS_N     ((HAK_SEG_SIZE - SLOTS_FIRST) / (2 * HAK_OS_PAGE))
#define SLOTS_TABLE (((sizeof(hak_segment_t) + 63) & ~(size_t)63))   /* offset of the slot table */

/* the slot table: each slot's block's usable size (0: free) */
_Static_assert(SLOTS_TABLE + SLOTS_N * sizeof(uint32_t) <= SLOTS_FIRST, "the slot table fits the header");

static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
/* The free slots of every segment, one list through their pages (free: no
 * block there): each holds the next one's page. */
static uint8_t* free_head;
static hak_segment_t* fresh_seg;  /* the segment whose never-used slots come next */
static uint32_t fresh_next;
static _Atomic(size_t) slots_live, slots_bytes, slots_resident, slots_segments;

static uint32_t* slot_size(hak_segment_t* seg, size_t i) { return (uint32_t*)((uint8_t*)seg + SLOTS_TABLE) + i; }

/* The slot p names: its index, or -1 when p is no block's start (a header,
 * gap or block-interior address). */
static long slot_index(hak_segment_t* seg, const void* p) {
  long i = hak_pslot_of(seg, SLOTS_FIRST, SLOTS_N, p);
  return i >= 0 && ((uintptr_t)p & (HAK_OS_PAGE - 1)) == 0 ? i : -1;
}

/* A page for a block of `size` bytes (at most a page): its start, page
 * aligned; NULL without memory. */
hak_warm void* _hak_slots_alloc(size_t size) {
  hak_assert(size > 0 && size <= HAK_OS_PAGE);
  hak_lock(&slots_lock);
  uint8_t* page = free_head;
  if (page != NULL) {
    free_head = *(uint8_t**)page;
  } else {
    if (fresh_seg == NULL || fresh_next == SLOTS_N) {
      fresh_seg = _hak_segment_alloc(HAK_SEG_SIZE, 0, HAK_SEG_SAMPLED, 0, 0);
      fresh_next = 0;
      if (fresh_seg == NULL) {
        hak_unlock(&slots_lock);
        return NULL;
      }
      atomic_fetch_add_explicit(&slots_segments, 1, memory_order_relaxed);
    }
    page = hak_pslot_page(fresh_seg, SLOTS_FIRST, fresh_next++);
    atomic_fetch_add_explicit(&slots_resident, 1, memory_order_relaxed);
  }
  hak_segment_t* seg = hak_segment_of(page);
  __atomic_store_n(slot_size(seg, (size_t)slot_index(seg, page)), (uint32_t)size, __ATOMIC_RELAXED);
  hak_unlock(&slots_lock);
  atomic_fetch_add_explicit(&slots_live, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&slots_bytes, size, memory_order_relaxed);
  return page;
}

/* The usable size of the live block p in a slot segment; 0 when p is not
 * one (the caller reports). */
size_t _hak_slots_usable(hak_segment_t* seg, const void* p) {
  long i = slot_index(seg, p);
  return i < 0 ? 0 : __atomic_load_n(slot_size(seg, (size_t)i), __ATOMIC_RELAXED);
}

/* free() of an address in a slot segment: a live block's slot goes back
 * (and its sample leaves the profile); anything else is reported. */
hak_warm void _hak_slots_free(hak_segment_t* seg, void* p, const char* op) {
  long i = slot_index(seg, p);
  if (i < 0) {
    _hak_invalid_pointer(op, p, "not the start of a block");
    return;
  }
  hak_lock(&slots_lock);
  uint32_t size = *slot_size(seg, (size_t)i);
  if (size != 0) {
    _hak_prof_free(p);   /* (a leaf lock, and before the slot can be reused) */
    __atomic_store_n(slot_size(seg, (size_t)i), 0, __ATOMIC_RELAXED);
    *(uint8_t**)p = free_head;
    free_head = p;
  }
  hak_unlock(&slots_lock);
  if (size == 0) {
    _hak_double_free(op, p, HAK_OS_PAGE);
    return;
  }
  atomic_fetch_sub_explicit(&slots_live, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&slots_bytes, size, memory_order_relaxed);
}

/* Statistics: live blocks, pages ever used (resident), segments. */
void _hak_slots_figures(hak_pslot_figures_t* f) {
  f->live = hak_load_relaxed(&slots_live);
  f->bytes = hak_load_relaxed(&slots_bytes);
  f->pages = hak_load_relaxed(&slots_resident);
  f->segments = hak_load_relaxed(&slots_segments);
  f->header = f->segments * SLOTS_FIRST;
}

/* fork: taken before the profiler's lock (the order _hak_slots_free takes
 * them in); the child's is new. */
void _hak_slots_fork_prepare(void) { hak_lock(&slots_lock); }
void _hak_slots_fork_parent(void) { hak_unlock(&slots_lock); }
void _hak_slots_fork_child(void) { pthread_mutex_init(&slots_lock, NULL); }
