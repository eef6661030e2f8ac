/* Statistics: per-class malloc counts (kept per heap on the fast path: one
 * add to a line the heap already holds), large-block and segment counters,
 * and the OS module's call and byte counts.  Printed at exit with
 * HAKMEM_STATS=1, on demand with hakmem_stats_print(), and by malloc_stats().
 * The exit report goes to a duplicate of stderr taken at start-up (programs
 * such as ls and sort close fd 2 before exit), or to HAKMEM_STATS_FILE.
 * _hak_figures gathers the figures that hakmem_ctl and malloc_info (ctl.c)
 * give: what the report prints, and what a walk of the slabs adds. */
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

_Atomic(uint64_t) _hak_stat_nmalloc_dead[HAK_NCLASSES], _hak_stat_refills_dead;
_Atomic(size_t) _hak_stat_slab_pages;
_Atomic(uint64_t) _hak_stat_borrowed;

typedef struct { uint64_t nmalloc[HAK_NCLASSES], refills; } heap_sums_t;
static void sum_heap(hak_heap_t* h, void* arg) {
  heap_sums_t* acc = arg;
  for (size_t c = 0; c < HAK_NCLASSES; c++) acc->nmalloc[c] += __atomic_load_n(&h->cls[c].nmalloc, __ATOMIC_RELAXED);
  acc->refills += __atomic_load_n(&h->refills, __ATOMIC_RELAXED);
}

void _hak_sb_add(hak_sbuf_t* sb, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (sb->len < sb->cap) {
    int n = vsnprintf(sb->buf + sb->len, sb->cap - sb->len, fmt, ap);
    if (n > 0) sb->len += (size_t)n < sb->cap - sb->len ? (size_t)n : sb->cap - sb->len - 1;
  }
  va_end(ap);
}

/* The report, a section a function, in the order it is printed: the header
 * and the small blocks; the large blocks and the BigCache; scavenging and
 * meshing when on; the release policy, the limit and the call sites;
 * segments, pages and threads; the OS's counts and the RSS. */
static void report_small(hak_sbuf_t* sb) {
  heap_sums_t sums = {{0}, 0};
  _hak_heaps_foreach(sum_heap, &sums);
  _hak_sb_add(sb, "hakmem: stats (version %s, pid %d, profile %s)\n", HAKMEM_VERSION, (int)getpid(),
         _hak_profile_name(hak_opt(PROFILE)));
  _hak_sb_add(sb, "classes: size mallocs\n");
  uint64_t total = 0;
  for (size_t c = 0; c < HAK_NCLASSES; c++) {
    uint64_t n = sums.nmalloc[c] + hak_load_relaxed(&_hak_stat_nmalloc_dead[c]);
    total += n;
    if (n) _hak_sb_add(sb, "  class %2zu %7u B %14llu\n", c, _hak_class_size[c], (unsigned long long)n);
  }
  _hak_sb_add(sb, "small: mallocs=%llu refills=%llu slab_pages=%zu (%zu KiB) borrowed=%llu\n", (unsigned long long)total,
         (unsigned long long)(sums.refills + hak_load_relaxed(&_hak_stat_refills_dead)),
         hak_load_relaxed(&_hak_stat_slab_pages), hak_load_relaxed(&_hak_stat_slab_pages) * (HAK_PAGE_SIZE / 1024),
         (unsigned long long)hak_load_relaxed(&_hak_stat_borrowed));
}

static void report_large(hak_sbuf_t* sb) {
  _hak_sb_add(sb, "large: allocs=%llu frees=%llu live_bytes=%llu peak_bytes=%llu\n",
         (unsigned long long)hak_load_relaxed(&_hak_stat_large_allocs),
         (unsigned long long)hak_load_relaxed(&_hak_stat_large_frees),
         (unsigned long long)hak_load_relaxed(&_hak_stat_large_bytes),
         (unsigned long long)hak_load_relaxed(&_hak_stat_large_peak_bytes));
  uint64_t bh, bm, be;
  size_t bb, bmap;
  _hak_bigcache_stats(&bh, &bm, &be, &bb, &bmap);
  _hak_sb_add(sb, "bigcache: hits=%llu misses=%llu evictions=%llu bytes=%zu mapped=%zu yielded=%llu\n", (unsigned long long)bh,
         (unsigned long long)bm, (unsigned long long)be, bb, bmap, (unsigned long long)hak_load_relaxed(&_hak_stat_bigcache_yielded));
}

static void report_policies(hak_sbuf_t* sb) {
  hak_pslot_figures_t sf, gf;
  _hak_slots_figures(&sf);
  if (sf.segments != 0) _hak_sb_add(sb, "sampled: live_blocks=%zu bytes=%zu pages=%zu segments=%zu\n", sf.live, sf.bytes, sf.pages, sf.segments);
  if (!HAK_SECURE && hak_opt(GUARD) != 0) {
    uint64_t gn, gc, ge;
    size_t gr;
    _hak_guard_figures(&gf, &gn, &gc, &gr, &ge);
    _hak_sb_add(sb, "guard: guarded=%llu capped=%llu live=%zu retired_slots=%zu errors=%llu\n", (unsigned long long)gn,
                (unsigned long long)gc, gf.live, gr, (unsigned long long)ge);
  }
  if (_hak_scavenge_enabled())
    _hak_sb_add(sb, "scavenge: passes=%llu pages_given_back=%llu bytes_given_back=%llu readmitted_pages=%llu dropped_now=%zu\n",
           (unsigned long long)hak_load_relaxed(&_hak_stat_scav_passes),
           (unsigned long long)hak_load_relaxed(&_hak_stat_scav_pages),
           (unsigned long long)hak_load_relaxed(&_hak_stat_scav_pages) * HAK_OS_PAGE,
           (unsigned long long)hak_load_relaxed(&_hak_stat_scav_readmitted), hak_load_relaxed(&_hak_stat_scav_dropped));
  if (hak_opt(MESH)) {
    uint64_t m[9];
    _hak_mesh_stats(m);
    _hak_sb_add(sb,
           "mesh: passes=%llu meshed_slabs=%llu roots=%llu dissolved=%llu unmeshed=%llu bytes_given_back=%llu "
           "barrier_waits=%llu fork_copies=%llu meshed_pages_now=%llu\n",
           (unsigned long long)m[0], (unsigned long long)m[1], (unsigned long long)m[2], (unsigned long long)m[3],
           (unsigned long long)m[4], (unsigned long long)m[5], (unsigned long long)m[6], (unsigned long long)m[7],
           (unsigned long long)m[8]);
  }
}

static void report_release(hak_sbuf_t* sb) {
  uint64_t rc, rb, ru;
  size_t parked, pmap;
  _hak_release_stats(&rc, &rb, &ru, &parked, &pmap);
  _hak_sb_add(sb, "release: decommits=%llu decommit_bytes=%llu retained_empty=%zu unmapped_large=%llu parked=%zu parked_mapped=%zu reserve_released=%llu\n",
         (unsigned long long)rc, (unsigned long long)rb, hak_load_relaxed(&_hak_retained_bytes),
         (unsigned long long)ru, parked, pmap, (unsigned long long)hak_load_relaxed(&_hak_stat_reserve_released));
  _hak_sb_add(sb, "limit: bytes=%zu releases=%llu\n", _hak_limit, (unsigned long long)_hak_limit_releases());
  if (_hak_sites_used() > 0 && sb->len + 2048 < sb->cap) sb->len += _hak_sites_report(sb->buf + sb->len, sb->cap - sb->len, 8);
}

static void report_pages(hak_sbuf_t* sb) {
  _hak_sb_add(sb, "segments: live=%zu cached=%zu abandoned=%zu (%zu slab pages)\n", hak_load_relaxed(&_hak_seg_count),
         hak_load_relaxed(&_hak_seg_cached), hak_load_relaxed(&_hak_seg_abandoned),
         hak_load_relaxed(&_hak_abandoned_pages));
  size_t psegs, pfree, pres;
  _hak_pool_stats(&psegs, &pfree, &pres);
  /* where small pages are: in slabs (the heaps'), free in the shared pool
   * (resident, or returned to the OS but still mapped) */
  _hak_sb_add(sb, "pages: in_slabs=%zu pool_free=%zu pool_resident=%zu pool_returned=%zu pool_segments=%zu (4 KiB pages) "
         "surplus_returned=%llu yielded=%llu background=%d\n",
         (size_t)hak_load_relaxed(&_hak_stat_slab_pages), pfree, pres, pfree - pres, psegs,
         (unsigned long long)hak_load_relaxed(&_hak_stat_pool_surplus),
         (unsigned long long)hak_load_relaxed(&_hak_stat_pool_yielded), (int)_hak_background_running());
  _hak_sb_add(sb,
         "threads: abandoned segments=%llu slab_pages=%llu; adopted segments=%llu slab_pages=%llu; "
         "reclaimed slabs=%llu slab_pages=%llu; emptied while abandoned segments=%llu; "
         "taken from idle heaps slabs=%llu slab_pages=%llu; "
         "given by sleeping threads heaps=%llu slabs=%llu\n",
         (unsigned long long)hak_load_relaxed(&_hak_stat_seg_abandon_total),
         (unsigned long long)hak_load_relaxed(&_hak_stat_abandon_pages),
         (unsigned long long)hak_load_relaxed(&_hak_stat_seg_adopt_total),
         (unsigned long long)hak_load_relaxed(&_hak_stat_adopt_pages),
         (unsigned long long)hak_load_relaxed(&_hak_stat_reclaimed_slabs),
         (unsigned long long)hak_load_relaxed(&_hak_stat_reclaimed_pages),
         (unsigned long long)hak_load_relaxed(&_hak_stat_seg_emptied_total),
         (unsigned long long)hak_load_relaxed(&_hak_stat_idle_slabs),
         (unsigned long long)hak_load_relaxed(&_hak_stat_idle_pages),
         (unsigned long long)hak_load_relaxed(&_hak_stat_park_heaps),
         (unsigned long long)hak_load_relaxed(&_hak_stat_park_slabs));
}

static void report_os(hak_sbuf_t* sb) {
  hak_os_stats_t os;
  hak_os_stats(&os);
  _hak_sb_add(sb, "os: mmap=%zu munmap=%zu madvise=%zu mprotect=%zu mremap=%zu\n", os.mmap_calls, os.munmap_calls,
         os.madvise_calls, os.mprotect_calls, os.mremap_calls);
  _hak_sb_add(sb, "os-bytes: mmap=%zu munmap=%zu madvise=%zu mapped=%zu peak_mapped=%zu\n", os.mmap_bytes,
         os.munmap_bytes, os.madvise_bytes, os.mapped_bytes, os.peak_mapped_bytes);
  _hak_sb_add(sb, "rss: current=%zu peak=%zu\n", _hak_os_rss_bytes(), _hak_os_peak_rss_bytes());
}

static size_t stats_format(char* buf, size_t cap) {
  hak_sbuf_t sb = {buf, 0, cap};
  report_small(&sb);
  report_large(&sb);
  report_policies(&sb);
  report_release(&sb);
  report_pages(&sb);
  report_os(&sb);
  return sb.len;
}

hak_api void hakmem_stats_print(FILE* out) {
  char buf[8192];
  size_t n = stats_format(buf, sizeof buf);
  if (out == NULL || out == stderr) {
    if (out) fflush(out);
    _hak_os_write_all(2, buf, n);
  } else {
    fwrite(buf, 1, n, out);
    fflush(out);
  }
}

hak_api void hak_malloc_stats(void) { hakmem_stats_print(stderr); }

/* The duplicate of stderr: a high descriptor number, so the program's own
 * descriptors keep the numbers they would have without hakmem; close-on-exec,
 * so an exec'd program does not inherit it.  What it refers to is recorded:
 * a program may close it or dup2 another file onto its number. */
static int report_fd = -1;
static hak_file_id_t report_id;

hak_warm void _hak_stats_init(void) {
  if (!hak_opt(STATS) || _hak_option_text(HAK_OPT_STATS_FILE) != NULL || report_fd >= 0) return;
  static const int floor[] = {900, 200, 10};
  int fd = -1;
  for (size_t i = 0; i < sizeof floor / sizeof floor[0] && fd < 0; i++) fd = _hak_os_dup_cloexec(2, floor[i]);
  if (fd < 0) return;
  if (!_hak_os_file_id(fd, false, &report_id)) {
    _hak_os_close(fd);
    return;
  }
  report_fd = fd;
}

/* Still our duplicate: open, the same file, and still close-on-exec (dup2
 * onto the number clears the flag). */
static bool report_fd_ours(void) {
  hak_file_id_t id;
  return _hak_os_file_id(report_fd, true, &id) && hak_file_id_eq(id, report_id);
}

/* HAKMEM_STATS_FILE with "%p" replaced by the pid ("%%" is a '%'); false
 * when the name does not fit. */
static bool report_path(const char* pat, char* out, size_t cap) {
  size_t n = 0;
  for (const char* s = pat; *s; s++) {
    char num[24];
    const char* add = num;
    if (s[0] == '%' && s[1] == 'p') {
      _hak_snprintf(num, sizeof num, "%d", (int)getpid());
      s++;
    } else if (s[0] == '%' && s[1] == '%') {
      num[0] = '%', num[1] = 0;
      s++;
    } else {
      num[0] = *s, num[1] = 0;
    }
    size_t k = strlen(add);
    if (n + k >= cap) return false;
    memcpy(out + n, add, k);
    n += k;
  }
  out[n] = 0;
  return true;
}

void _hak_stats_at_exit(void) {
  char buf[8192];
  size_t n = stats_format(buf, sizeof buf);
  const char* pat = _hak_option_text(HAK_OPT_STATS_FILE);
  if (pat != NULL) {
    char path[4096];
    int fd = report_path(pat, path, sizeof path) ? _hak_os_open_write(path, O_APPEND) : -1;
    if (fd >= 0) {
      _hak_os_write_all(fd, buf, n);
      _hak_os_close(fd);
      return;
    }
    _hak_message("hakmem: warning: cannot open HAKMEM_STATS_FILE=%.200s (errno %d); report on stderr\n", pat, errno);
  }
  _hak_os_write_all(report_fd_ours() ? report_fd : 2, buf, n);
}

/* ---------------------------------------------------------------- figures on request
 * Live blocks are not counted on the fast paths (a free would have to know
 * its block's size); the slab descriptors know them: `used` blocks out, of
 * which the count on the remote list are freed already. */
static void figure_slab(hak_slab_t* s, void* arg) {
  hak_figures_t* f = arg;
  /* (owner-written fields, read as the report reads the heaps' counters: a
   * slab its owner is setting up or clearing reads as empty) */
  uint32_t bsize = __atomic_load_n(&s->bsize, __ATOMIC_RELAXED), used = __atomic_load_n(&s->used, __ATOMIC_RELAXED);
  unsigned npages = __atomic_load_n(&s->npages, __ATOMIC_RELAXED), cls = __atomic_load_n(&s->cls, __ATOMIC_RELAXED);
  if (bsize == 0 || npages == 0 || cls >= HAK_NCLASSES) return;
  hak_segment_t* seg = hak_segment_of(s);
  size_t idx = hak_slab_index(s);
  uint32_t remote = hak_xf_count(hak_load_relaxed(&s->xthread_free));
  size_t held = used > remote ? used - remote : 0;   /* live, or (secure) quarantined */
  size_t live = held, bytes = held * bsize;
  if (HAK_SECURE) _hak_secure_live(s, &live, &bytes);   /* at their requests, the quarantine's left out */
  size_t cap = (((size_t)npages << HAK_PAGE_SHIFT) / bsize) - (HAK_SECURE ? 1 : 0);   /* (secure: block 0 is never handed out) */
  /* scavenged: the blocks on 4 KiB pages given back (neither free nor live)
   * and those pages, which serve no block until the slab takes them back */
  size_t phantoms = 0, dropped = 0;
  if (!HAK_SECURE) {
    phantoms = __atomic_load_n(&seg->nphantom[hak_slot_of(idx)], __ATOMIC_RELAXED);
    for (size_t i = idx; i < idx + npages && i < HAK_PAGES_PER_SEG; i++) dropped += hak_pset_has_atomic(&seg->scav.drop, i);
  }
  hak_class_figures_t* c = &f->cls[cls];
  c->live_blocks += live;
  c->free_blocks += cap > held + phantoms ? cap - held - phantoms : 0;
  c->slabs++;
  c->pages += npages;
  f->small_allocated += bytes;
  f->small_active += ((size_t)npages << HAK_PAGE_SHIFT) - dropped * HAK_OS_PAGE;
}

/* The tiers' and policies' counters, for _hak_figures. */
static void figure_counters(hak_figures_t* f) {
  uint64_t u0, u1, u2;
  size_t parked, psegs, pres;
  _hak_bigcache_stats(&u0, &u1, &u2, &f->bigcache_resident, &f->bigcache_mapped);
  _hak_release_stats(&u0, &u1, &u2, &parked, &f->batch_mapped);
  _hak_pool_stats(&psegs, &f->pool_free_pages, &pres);
  f->quarantine_mapped = _hak_secure_large_held();
  f->segments = hak_load_relaxed(&_hak_seg_small);
  f->cached_segments = hak_load_relaxed(&_hak_seg_cached);
  f->large_nmalloc = hak_load_relaxed(&_hak_stat_large_allocs);
  f->large_nfree = hak_load_relaxed(&_hak_stat_large_frees);
  f->idle_slabs = hak_load_relaxed(&_hak_stat_idle_slabs);
  f->park_slabs = hak_load_relaxed(&_hak_stat_park_slabs);
  _hak_slots_figures(&f->sampled);
  _hak_guard_figures(&f->guard, &f->guarded, &f->guard_capped, &f->guard_retired, &f->guard_errors);
  f->pool_surplus_pages = hak_load_relaxed(&_hak_stat_pool_surplus);
  f->pool_yielded_pages = hak_load_relaxed(&_hak_stat_pool_yielded);
  f->bigcache_yielded = hak_load_relaxed(&_hak_stat_bigcache_yielded);
  f->large_live = (size_t)(f->large_nmalloc - f->large_nfree);
  f->large_allocated = (size_t)hak_load_relaxed(&_hak_stat_large_usable);
  f->large_mapped = (size_t)hak_load_relaxed(&_hak_stat_large_bytes);
}

void _hak_figures(hak_figures_t* f) {
  memset(f, 0, sizeof *f);
  _hak_pool_foreach_slab(figure_slab, f);
  heap_sums_t sums = {{0}, 0};
  _hak_heaps_foreach(sum_heap, &sums);
  size_t slab_bytes = 0;
  for (size_t c = 0; c < HAK_NCLASSES; c++) {
    hak_class_figures_t* k = &f->cls[c];
    k->cls_size = _hak_class_size[c] - HAK_TRAILER;   /* the most a block holds (malloc_usable_size) */
    k->nmalloc = sums.nmalloc[c] + hak_load_relaxed(&_hak_stat_nmalloc_dead[c]);
    f->small_free_blocks += k->free_blocks;
    f->small_free_bytes += k->free_blocks * k->cls_size;
    slab_bytes += k->pages << HAK_PAGE_SHIFT;
  }
  figure_counters(f);
  hak_os_stats(&f->os);
  f->mapped = f->os.mapped_bytes;
  f->peak_mapped = f->os.peak_mapped_bytes;
  f->rss = _hak_os_rss_bytes();
  f->peak_rss = _hak_os_peak_rss_bytes();

  /* the page-slot pools' blocks: each takes a page; the rest of their
   * segments is held (freed slots' pages, resident; untouched ones), but
   * their headers */
  size_t pslot_active = (f->sampled.live_pages + f->guard.live_pages) * HAK_OS_PAGE;
  size_t pslot_held = (f->sampled.segments + f->guard.segments) * HAK_SEG_SIZE - f->sampled.header - f->guard.header;
  pslot_held = pslot_held > pslot_active ? pslot_held - pslot_active : 0;
  size_t pslot_freed = f->sampled.pages + f->guard.pages - f->sampled.live_pages - f->guard.live_pages;
  f->allocated = f->small_allocated + f->large_allocated + f->sampled.bytes + f->guard.bytes;
  f->active = f->small_active + f->large_allocated + pslot_active;   /* (a large block's usable size ends at a page) */
  /* held, not in use: free pages (the pool's, cached segments', those
   * scavenged out of slabs), freed large blocks kept (BigCache, release
   * batch, secure quarantine), and live large blocks' headroom */
  size_t large_used = f->large_allocated + f->large_live * HAK_LARGE_HDR;
  f->retained = (f->pool_free_pages << HAK_PAGE_SHIFT) +
                f->cached_segments * ((size_t)HAK_SMALL_SLAB_PAGES << HAK_PAGE_SHIFT) +
                (slab_bytes - f->small_active) + f->bigcache_mapped + f->batch_mapped + f->quarantine_mapped +
                (f->large_mapped > large_used ? f->large_mapped - large_used : 0) + pslot_held;
  f->retained_resident = hak_load_relaxed(&_hak_retained_bytes) + f->bigcache_resident + f->quarantine_mapped +
                         pslot_freed * HAK_OS_PAGE;
  /* The counters move while they are read (other threads): the figures
   * are kept in the order every moment has, mapped >= active + retained. */
  if (f->active > f->mapped) f->active = f->mapped;
  if (f->allocated > f->active) f->allocated = f->active;
  if (f->retained > f->mapped - f->active) f->retained = f->mapped - f->active;
  if (f->retained_resident > f->retained) f->retained_resident = f->retained;
  f->metadata = f->mapped - f->active - f->retained;
  /* like jemalloc's, an upper estimate: slab pages not carved yet, a
   * segment's untouched header page and a large block's untouched tail
   * count as resident; huge pages may make more so */
  f->resident = f->active + f->metadata + f->retained_resident;
}

hak_api struct mallinfo2 hak_mallinfo2(void) {
  struct mallinfo2 mi;
  memset(&mi, 0, sizeof mi);
  hak_os_stats_t os;
  hak_os_stats(&os);
  size_t large = (size_t)hak_load_relaxed(&_hak_stat_large_bytes);
  size_t small = hak_load_relaxed(&_hak_stat_slab_pages) * HAK_PAGE_SIZE;
  mi.arena = os.mapped_bytes;
  mi.ordblks = hak_load_relaxed(&_hak_seg_count);
  mi.hblks = (size_t)(hak_load_relaxed(&_hak_stat_large_allocs) - hak_load_relaxed(&_hak_stat_large_frees));
  mi.hblkhd = large;
  mi.uordblks = small + large;
  mi.fordblks = os.mapped_bytes > small + large ? os.mapped_bytes - small - large : 0;
  mi.usmblks = os.peak_mapped_bytes;
  return mi;
}
