/* White-box checks of the slab arithmetic the free fast path relies on,
 * linked with libhakmem.a and its internal header.  Exhaustive over every
 * size class and every offset of its slab:
 *   hak_is_carved_block(s, off, carved) == (off % d == 0 && off / d < n)
 * for n carved blocks, hak_is_block_start, hak_slab_bump, and the block
 * index ((off * recip) >> 64) that the secure build uses.  And the class
 * tables: for every request up to 128 KiB the class lookups (the clz
 * formula, and up to 1 KiB the table behind malloc's direct entries) name
 * the smallest class that holds it, and every slab is the fewest pages that
 * hold at least 4 blocks with at most 1/16 of the slab left over.  And the
 * remote-free list word (remote.c, _hak_remote_push): pushing keeps the tag, puts
 * the block first and counts it, up to the most blocks a slab holds.  And
 * the OS module's clocks (read through the vDSO's entry where the process
 * has a vDSO: os.c) and page size agree with libc's.  And the page sets
 * (internal.h) against a plain array under random runs added and removed,
 * with the pool's choice of a run (coalescing: a run freed between two free
 * runs is one run with both; whole windows start on a window). */
#include "../src/internal.h"
#include "hak_test.h"
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

static void check_class(size_t cls) {
  hak_slab_t s;
  memset(&s, 0, sizeof s);
  uint32_t d = _hak_class_size[cls];
  s.bsize = d;
  s.npages = _hak_class_pages[cls];
  s.recip = hak_slab_recip(d);
  uint32_t limit = hak_slab_limit(&s), nblocks = limit / d, e = hak_slab_step(&s);
  CHECKF(e >= 1 && e <= d, "class %zu (%u B): step %u outside [1, d]", cls, d, e);
  uint32_t ns[] = {0, 1, nblocks / 2, nblocks - 1, nblocks};
  for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
    uint32_t n = ns[k], carved = n * e;
    CHECKF(hak_slab_bump(&s, carved) == n * d, "class %zu: bump of %u blocks", cls, n);
    for (uint64_t off = 0; off < (uint64_t)limit + 2 * d; off++) {
      bool start = off % d == 0;
      if (hak_is_carved_block(&s, off, carved) != (start && off / d < n)) {
        CHECKF(0, "class %zu (%u B): carved check wrong at offset %" PRIu64 " with %u carved", cls, d, off, n);
        return;
      }
      if (k == 0 && hak_is_block_start(&s, off) != start) {
        CHECKF(0, "class %zu (%u B): block-start check wrong at offset %" PRIu64, cls, d, off);
        return;
      }
      if (k == 0 && (uint64_t)(((unsigned __int128)off * s.recip) >> 64) != off / d) {
        CHECKF(0, "class %zu (%u B): block index wrong at offset %" PRIu64, cls, d, off);
        return;
      }
    }
  }
}

/* A slab of `pages` pages holds at least 4 blocks of d bytes and leaves at
 * most 1/16 of itself over. */
static bool slab_fits(size_t d, size_t pages) {
  size_t slab = pages << HAK_PAGE_SHIFT;
  if (d >= HAK_EXACT_MIN)   /* page-exact: the fewest pages (4 at least) that leave at most an eighth over */
    return pages >= HAK_SLAB_MIN_PAGES && slab / d >= 1 && (slab % d) * 8 <= slab;
  return pages % 16 == 0 && slab / d >= 4 && (slab % d) * 16 <= slab;   /* whole 64 KiB windows */
}

static void check_lookup(void) {
  size_t want = 0;
  for (size_t n = 1; n <= HAK_MEDIUM_MAX; n++) {
    while (_hak_class_size[want] < n) want++;
    if (hak_class_of(n) != want || (n <= HAK_SMALL_FAST_MAX && _hak_class_small[(n + 15) >> 4] != want)) {
      CHECKF(0, "class of %zu B: %zu (%u B), want %zu (%u B)", n, hak_class_of(n), _hak_class_size[hak_class_of(n)],
             want, _hak_class_size[want]);
      return;
    }
  }
  /* a power of two plus a small header (a string's or array's length field)
   * rounds up by at most a sixteenth from 256 B, not by a fifth */
  for (size_t k = 256; k <= HAK_MEDIUM_MAX / 2; k *= 2)
    for (size_t hdr = 1; hdr <= 16; hdr += 5) {
      size_t d = _hak_class_size[hak_class_of(k + hdr)];
      CHECKF(d * 16 <= (k + hdr) * 17, "%zu + %zu B: a %zu-byte block", k, hdr, d);
    }
  /* a 4 KiB page and a header of up to 512 B (sqlite's page cache: 4,352-
   * 4,415 B) in a 4,608-byte block, not a 5,120-byte one */
  for (size_t hdr = 257; hdr <= 512; hdr += 51)
    CHECKF(_hak_class_size[hak_class_of(4096 + hdr)] == 4608, "4096 + %zu B: a %u-byte block", hdr,
           _hak_class_size[hak_class_of(4096 + hdr)]);
  for (size_t c = 0; c < HAK_NCLASSES; c++) {
    size_t d = _hak_class_size[c], pages = _hak_class_pages[c], slab = pages << HAK_PAGE_SHIFT;
    CHECKF(pages <= HAK_SLAB_MAX_PAGES, "class %zu (%zu B): %zu pages, more than HAK_SLAB_MAX_PAGES", c, d, pages);
    CHECKF(slab_fits(d, pages), "class %zu (%zu B): %zu blocks and %zu bytes left over in a slab of %zu pages", c, d,
           slab / d, slab % d, pages);
    for (size_t fewer = 1; fewer < pages; fewer++)
      CHECKF(!slab_fits(d, fewer), "class %zu (%zu B): %zu pages fit, fewer than the slab's %zu", c, d, fewer, pages);
  }
}

/* Push blocks of a slab at the top of the address space the segment map
 * covers, with and without the notifier's tag, as many as the densest slab
 * holds. */
static void check_xf_word(void) {
  uintptr_t base = ((uintptr_t)1 << 47) - HAK_SEG_SIZE;
  uint32_t most = (uint32_t)(HAK_PAGE_SIZE / 16);   /* blocks of the smallest class in one page */
  for (int tag = 0; tag < 2; tag++) {
    uintptr_t w = tag ? HAK_XF_NOTIFYING : 0;
    for (uint32_t i = 0; i < most; i++) {
      const hak_block_t* b = (const hak_block_t*)(base + HAK_SEG_SIZE - 16 * (i + 1));
      w = hak_xf_push(w, b);
      if (hak_xf_list(w) != b || hak_xf_count(w) != i + 1 || (w & HAK_XF_NOTIFYING) != (uintptr_t)tag) {
        CHECKF(false, "push %u (tag %d): list %p count %u tag %d", i, tag, (void*)hak_xf_list(w), hak_xf_count(w),
               (int)(w & HAK_XF_NOTIFYING));
        break;
      }
    }
    CHECKF(hak_xf_count(w) == most, "count after %u pushes: %u", most, hak_xf_count(w));
  }
}

/* `test-internal-debug assert`: the debug build's assertions assert.  A
 * slab's used count is made larger than the blocks it carved, then mallocs
 * of its class run it dry: the refill's check of the slab must print one
 * line naming the condition, its values, file and line, and abort (the case
 * reads the line and the signal). */
static int assert_mode(void) {
  uint8_t* p = t_malloc(64);
  uintptr_t xo;
  hak_slab_t* s = hak_slab_of(hak_segment_of(p), p, &xo);
  if (s == NULL) return 2;
  s->used += 100000;
  for (int i = 0; i < 100000; i++) (void)t_malloc(64);   /* never returns: the slab's refill asserts */
  printf("test-internal assert: no assertion failed\n");
  return 1;
}

static uint64_t libc_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
static void check_clocks(void) {
  uint64_t a = libc_ns(CLOCK_MONOTONIC), ns = _hak_os_clock_ns(), b = libc_ns(CLOCK_MONOTONIC);
  CHECKF(a <= ns && ns <= b, "monotonic clock: %" PRIu64 " not between libc's %" PRIu64 " and %" PRIu64, ns, a, b);
  uint64_t ms = _hak_clock_ms(), c = libc_ns(CLOCK_MONOTONIC_COARSE) / 1000000;
  CHECKF(ms <= c && c - ms <= 50, "coarse clock: %" PRIu64 " ms, libc's %" PRIu64, ms, c);
  /* (valgrind hides the vDSO: libc's wrapper then) */
  CHECKF(getauxval(AT_SYSINFO_EHDR) == 0 || _hak_os_clock_is_vdso(), "the clocks do not read the vDSO's entry");
  CHECKF(_hak_os_page_size() == (size_t)sysconf(_SC_PAGESIZE), "page size %zu", _hak_os_page_size());
}

/* ---- page sets against a model ---- */
static bool model[HAK_PAGES_PER_SEG];
static size_t model_run_end(size_t i) {   /* the first page at or after i not in the model */
  while (i < HAK_PAGES_PER_SEG && model[i]) i++;
  return i;
}
static void check_pset_against(const hak_pset_t* s, ht_rng_t* rng) {
  size_t n = 0;
  for (size_t i = 0; i < HAK_PAGES_PER_SEG; i++) n += model[i];
  CHECKF(hak_pset_count(s) == n, "count %zu, model %zu", hak_pset_count(s), n);
  CHECKF(hak_pset_empty(s) == (n == 0), "empty");
  for (int k = 0; k < 8; k++) {
    size_t i = (size_t)ht_below(rng, HAK_PAGES_PER_SEG), len = (size_t)ht_below(rng, HAK_PAGES_PER_SEG - i) + 1, c = 0;
    for (size_t j = i; j < i + len; j++) c += model[j];
    CHECKF(hak_pset_count_run(s, i, len) == c, "count of [%zu, +%zu): %zu, model %zu", i, len, hak_pset_count_run(s, i, len), c);
    CHECKF(hak_pset_all_run(s, i, len) == (c == len), "all of [%zu, +%zu)", i, len);
    size_t nx = i, pv = i, gap = model_run_end(i);
    while (nx < HAK_PAGES_PER_SEG && !model[nx]) nx++;
    while (pv != SIZE_MAX && !model[pv]) pv = pv ? pv - 1 : SIZE_MAX;
    CHECKF(hak_pset_next(s, i) == nx, "next from %zu: %zu, model %zu", i, hak_pset_next(s, i), nx);
    CHECKF(hak_pset_prev(s, i) == pv, "prev from %zu", i);
    CHECKF(hak_pset_next_gap(s, i) == gap, "gap from %zu: %zu, model %zu", i, hak_pset_next_gap(s, i), gap);
    CHECKF(hak_pset_has(s, i) == model[i], "has %zu", i);
  }
}
/* The pool's choice of a run for n pages, by the model: first fit from the
 * bottom (or the highest with top), on a window when n is whole windows. */
static size_t model_find_run(unsigned n, bool top) {
  size_t step = n % 16 == 0 ? 16 : 1, found = HAK_PAGES_PER_SEG;
  for (size_t a = 0; a + n <= HAK_PAGES_PER_SEG; a += step) {
    bool all = true;
    for (size_t j = a; j < a + n && all; j++) all = model[j];
    if (all) {
      if (!top) return a;
      found = a;
    }
  }
  return found;
}
static void check_psets(void) {
  ht_rng_t rng = {7};
  hak_pset_t s = {{0}};
  memset(model, 0, sizeof model);
  for (int op = 0; op < 4000; op++) {
    size_t lo = (size_t)ht_below(&rng, HAK_PAGES_PER_SEG), n = (size_t)ht_below(&rng, 64) + 1;
    if (lo + n > HAK_PAGES_PER_SEG) n = HAK_PAGES_PER_SEG - lo;
    bool add = ht_below(&rng, 2) == 0;
    if (add) hak_pset_add_run(&s, lo, n);
    else hak_pset_del_run(&s, lo, n);
    for (size_t j = lo; j < lo + n; j++) model[j] = add;
    check_pset_against(&s, &rng);
    unsigned want = (unsigned)(ht_below(&rng, 3) == 0 ? 16 * (ht_below(&rng, 4) + 1) : ht_below(&rng, 40) + 1);
    bool top = ht_below(&rng, 2) == 0;
    size_t got = _hak_pool_find_run(&s, want, top), exp = model_find_run(want, top);
    CHECKF(got == exp, "a run of %u pages (top %d): %zu, model %zu", want, top, got, exp);
    if (ht_failures) return;
  }
  /* coalescing: a run freed between two free runs joins both */
  memset(&s, 0, sizeof s);
  hak_pset_add_run(&s, 100, 16);
  hak_pset_add_run(&s, 132, 20);
  CHECKF(hak_pset_next_gap(&s, 100) == 116, "two runs apart");
  hak_pset_add_run(&s, 116, 16);
  CHECKF(hak_pset_next(&s, 0) == 100 && hak_pset_next_gap(&s, 100) == 152, "one run of 52 pages from 100: %zu..%zu",
         hak_pset_next(&s, 0), hak_pset_next_gap(&s, 100));
  CHECKF(_hak_pool_find_run(&s, 52, false) == 100, "the merged run serves 52 pages");
  CHECKF(_hak_pool_find_run(&s, 32, false) == 112, "whole windows start on a window: %zu", _hak_pool_find_run(&s, 32, false));
  CHECKF(_hak_pool_find_run(&s, 53, false) == HAK_PAGES_PER_SEG, "no run of 53 pages");
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "assert") == 0) return assert_mode();
  ht_begin("carved-block, block-start, bump and index arithmetic, every class; class lookup; remote-list word; clocks");
  check_lookup();
  check_xf_word();
  check_clocks();
  check_psets();
  for (size_t cls = 0; cls < HAK_NCLASSES; cls++) check_class(cls);
  printf("%ld checks, %ld failed\n", ht_checks, ht_failures);
  return ht_failures ? 1 : 0;
}
