/* Page slots for sampled blocks: a heap-profile sample of a class (prof.c)
 * gets pages of its own in a slot segment (kind HAK_SEG_SAMPLED, in the
 * segment map like any other), so that its free is seen: the segment's
 * window descriptors stay HAK_OWNER_UNUSED, which sends every free there
 * out of the fast path to _hak_slots_free.  A sample served as a large
 * block instead cost a mapping, its faults and its unmapping each time
 * (glibc-simple at 6,800 samples a second: 8 % of its time; rptestN, whose
 * samples fall mostly on its 4-16 KiB blocks, the countdown being in
 * bytes: half its operations a CPU second).
 *
 * A segment holds slots of one size: a page (classes up to a page), or 32
 * pages (the rest, up to 128 KiB: a block touches only the pages it uses,
 * and a slot reused by larger blocks keeps the most it held).  Two sizes,
 * not six: each slot segment's header costs a few resident pages, and a
 * program that samples every size would have paid for six.  A segment is a
 * header (the segment descriptor, the slot size, then the slot table),
 * then slots of a gap page and the block's pages: the gaps are never
 * touched (address space only), and keep every block between pages that
 * hold none.  Freed slots are reused last in, first out, so a program that
 * keeps few samples live keeps reusing the same resident pages; the release
 * clock gives a slot's pages back once it has stayed free for a pass
 * (_hak_slots_release: a burst's samples, up to 128 KiB each, do not stay
 * resident), and such a slot is taken last.  A segment is kept once made
 * (address space: about a block per HAKMEM_PROF_RATE bytes live at the
 * high water).  Samples are rare next to mallocs (one per 2 MiB allocated
 * by default): one lock. */
#include "internal.h"
#include <sys/mman.h>

#define SLOTS_FIRST ((size_t)64 << 10)                              /* the first slot's gap page */
#define SLOTS_KINDS 2                                               /* slots of 1 page, of 32 */
#define SLOTS_BIG   32
#define SLOTS_PAGES(k) ((k) == 0 ? (size_t)1 : (size_t)SLOTS_BIG)
#define SLOTS_N(k)  ((HAK_SEG_SIZE - SLOTS_FIRST) / (SLOTS_PAGES(k) + 1) / HAK_OS_PAGE)
#define SLOTS_HDR   (((sizeof(hak_segment_t) + 63) & ~(size_t)63))   /* offset of the slot size, then the table */

typedef struct {
  uint32_t kind;               /* slots of SLOTS_PAGES(kind) pages */
  uint32_t size[SLOTS_N(0)];   /* each slot's block's usable size (0: free) */
  uint8_t touched[SLOTS_N(0)]; /* each slot's pages resident (a freed block's stay until released) */
  uint8_t* next[SLOTS_N(0)];   /* a free slot: the next free slot's page in its list */
} slots_hdr_t;
_Static_assert(SLOTS_HDR + sizeof(slots_hdr_t) <= SLOTS_FIRST, "the slot table fits the header");
_Static_assert((size_t)HAK_OS_PAGE * SLOTS_BIG >= ((size_t)128 << 10), "the largest slot holds the largest class");

static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
/* Per slot size, the free slots of every segment in three lists, linked
 * through the headers' tables (not the pages, which may be given back):
 * freed since the last release pass, freed before it (resident both), and
 * given back; the segment whose never-used slots come next. */
enum { LIST_FREED, LIST_AGED, LIST_RELEASED, LISTS };
static uint8_t* lists[LISTS][SLOTS_KINDS];
static hak_segment_t* fresh_seg[SLOTS_KINDS];
static uint32_t fresh_next[SLOTS_KINDS];
static _Atomic(size_t) slots_live, slots_live_pages, slots_bytes, slots_resident, slots_segments;

static slots_hdr_t* slots_hdr(const hak_segment_t* seg) { return (slots_hdr_t*)((uint8_t*)seg + SLOTS_HDR); }
static long slot_index(const hak_segment_t* seg, const void* p);
static uint8_t** slot_next(uint8_t* page) {
  hak_segment_t* seg = hak_segment_of(page);
  return &slots_hdr(seg)->next[slot_index(seg, page)];
}
static void list_push(uint8_t** head, uint8_t* page) {
  *slot_next(page) = *head;
  *head = page;
}
static uint8_t* list_pop(uint8_t** head) {
  uint8_t* page = *head;
  if (page != NULL) *head = *slot_next(page);
  return page;
}

/* The pages a block of `size` bytes touches. */
static size_t block_pages(size_t size) { return hak_align_up(size, HAK_OS_PAGE) / HAK_OS_PAGE; }

/* The slot p names: its index, or -1 when p is no block's start (a header,
 * gap or block-interior address). */
static long slot_index(const hak_segment_t* seg, const void* p) {
  size_t k = slots_hdr(seg)->kind;
  long i = hak_pslot_of(seg, SLOTS_FIRST, SLOTS_N(k), SLOTS_PAGES(k), p);
  return i >= 0 && hak_pslot_page(seg, SLOTS_FIRST, (size_t)i, SLOTS_PAGES(k)) == (const uint8_t*)p ? i : -1;
}

/* A fresh slot of kind k (the lock held), or NULL without memory. */
static uint8_t* slot_fresh(unsigned k) {
  if (fresh_seg[k] == NULL || fresh_next[k] == SLOTS_N(k)) {
    hak_segment_t* seg = _hak_segment_alloc(HAK_SEG_SIZE, 0, HAK_SEG_SAMPLED, 0, 0);
    if (seg == NULL) return NULL;
    slots_hdr(seg)->kind = k;
    fresh_seg[k] = seg;
    fresh_next[k] = 0;
    atomic_fetch_add_explicit(&slots_segments, 1, memory_order_relaxed);
  }
  return hak_pslot_page(fresh_seg[k], SLOTS_FIRST, fresh_next[k]++, SLOTS_PAGES(k));
}

/* Pages for a block of `size` bytes (at most 128 KiB): its start, page
 * aligned; NULL without memory. */
hak_warm void* _hak_slots_alloc(size_t size) {
  hak_assert(size > 0 && size <= (size_t)HAK_OS_PAGE * SLOTS_BIG);
  unsigned k = size > HAK_OS_PAGE;
  hak_lock(&slots_lock);
  uint8_t* page = list_pop(&lists[LIST_FREED][k]);   /* resident first, newest first */
  if (page == NULL) page = list_pop(&lists[LIST_AGED][k]);
  if (page == NULL) page = list_pop(&lists[LIST_RELEASED][k]);
  if (page == NULL) page = slot_fresh(k);
  if (page != NULL) {
    hak_segment_t* seg = hak_segment_of(page);
    long i = slot_index(seg, page);
    size_t pages = block_pages(size);
    __atomic_store_n(&slots_hdr(seg)->size[i], (uint32_t)size, __ATOMIC_RELAXED);
    if (pages > slots_hdr(seg)->touched[i]) {
      atomic_fetch_add_explicit(&slots_resident, pages - slots_hdr(seg)->touched[i], memory_order_relaxed);
      slots_hdr(seg)->touched[i] = (uint8_t)pages;
    }
  }
  hak_unlock(&slots_lock);
  if (page == NULL) return NULL;
  atomic_fetch_add_explicit(&slots_live, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&slots_live_pages, block_pages(size), memory_order_relaxed);
  atomic_fetch_add_explicit(&slots_bytes, size, memory_order_relaxed);
  return page;
}

/* The usable size of the live block p in a slot segment; 0 when p is not
 * one (the caller reports). */
size_t _hak_slots_usable(hak_segment_t* seg, const void* p) {
  long i = slot_index(seg, p);
  return i < 0 ? 0 : __atomic_load_n(&slots_hdr(seg)->size[i], __ATOMIC_RELAXED);
}

/* free() of an address in a slot segment: a live block's slot goes back
 * (and its sample leaves the profile); anything else is reported. */
hak_warm void _hak_slots_free(hak_segment_t* seg, void* p, const char* op) {
  long i = slot_index(seg, p);
  if (i < 0) {
    _hak_invalid_pointer(op, p, "not the start of a block");
    return;
  }
  unsigned k = slots_hdr(seg)->kind;
  hak_lock(&slots_lock);
  uint32_t size = slots_hdr(seg)->size[i];
  if (size != 0) {
    _hak_prof_free(p);   /* (a leaf lock, and before the slot can be reused) */
    __atomic_store_n(&slots_hdr(seg)->size[i], 0, __ATOMIC_RELAXED);
    list_push(&lists[LIST_FREED][k], p);
  }
  hak_unlock(&slots_lock);
  if (size == 0) {
    _hak_double_free(op, p, HAK_OS_PAGE * SLOTS_PAGES(k));
    return;
  }
  atomic_fetch_sub_explicit(&slots_live, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&slots_live_pages, block_pages(size), memory_order_relaxed);
  atomic_fetch_sub_explicit(&slots_bytes, size, memory_order_relaxed);
}

/* The release clock's pass (background.c): the pages of the slots free
 * since before the last pass go back to the OS, and the slots freed since
 * become the next pass's. */
hak_warm void _hak_slots_release(void) {
  if (hak_load_relaxed(&slots_segments) == 0) return;
  hak_lock(&slots_lock);
  for (unsigned k = 0; k < SLOTS_KINDS; k++) {
    uint8_t* page;
    while ((page = list_pop(&lists[LIST_AGED][k])) != NULL) {
      hak_segment_t* seg = hak_segment_of(page);
      uint8_t* touched = &slots_hdr(seg)->touched[slot_index(seg, page)];
      if (*touched != 0 && _hak_os_advise(page, (size_t)*touched * HAK_OS_PAGE, MADV_DONTNEED)) {
        atomic_fetch_sub_explicit(&slots_resident, *touched, memory_order_relaxed);
        *touched = 0;
      }
      list_push(&lists[LIST_RELEASED][k], page);
    }
    lists[LIST_AGED][k] = lists[LIST_FREED][k];
    lists[LIST_FREED][k] = NULL;
  }
  hak_unlock(&slots_lock);
}

/* Statistics: live blocks, their pages and bytes, pages resident (live
 * and freed), segments. */
void _hak_slots_figures(hak_pslot_figures_t* f) {
  f->live = hak_load_relaxed(&slots_live);
  f->live_pages = hak_load_relaxed(&slots_live_pages);
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
