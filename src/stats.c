/* Statistics: per-class malloc counts (kept per heap on the fast path: one
 * add to a line the heap already holds), large-block and segment counters,
 * and the OS module's call and byte counts.  Printed at exit with
 * HAKMEM_STATS=1, on demand with hakmem_stats_print(), and by malloc_stats().
 * The exit report goes to a duplicate of stderr taken at start-up (programs
 * such as ls and sort close fd 2 before exit), or to HAKMEM_STATS_FILE. */
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
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

typedef struct { char* buf; size_t len, cap; } sbuf_t;
static void sb_add(sbuf_t* sb, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf_t* sb, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (sb->len < sb->cap) {
    int n = vsnprintf(sb->buf + sb->len, sb->cap - sb->len, fmt, ap);
    if (n > 0) sb->len += (size_t)n < sb->cap - sb->len ? (size_t)n : sb->cap - sb->len - 1;
  }
  va_end(ap);
}

static size_t stats_format(char* buf, size_t cap) {
  sbuf_t sb = {buf, 0, cap};
  heap_sums_t sums = {{0}, 0};
  _hak_heaps_foreach(sum_heap, &sums);
  static const char* const prof[] = {"speed", "balanced", "lean"};
  long long pr = hak_opt(PROFILE);
  sb_add(&sb, "hakmem: stats (version %s, pid %d, profile %s)\n", HAKMEM_VERSION, (int)getpid(),
         pr >= 0 && pr < 3 ? prof[pr] : "?");
  sb_add(&sb, "classes: size mallocs\n");
  uint64_t total = 0;
  for (size_t c = 0; c < HAK_NCLASSES; c++) {
    uint64_t n = sums.nmalloc[c] + hak_load_relaxed(&_hak_stat_nmalloc_dead[c]);
    total += n;
    if (n) sb_add(&sb, "  class %2zu %7u B %14llu\n", c, _hak_class_size[c], (unsigned long long)n);
  }
  sb_add(&sb, "small: mallocs=%llu refills=%llu slab_pages=%zu (%zu KiB) borrowed=%llu\n", (unsigned long long)total,
         (unsigned long long)(sums.refills + hak_load_relaxed(&_hak_stat_refills_dead)),
         hak_load_relaxed(&_hak_stat_slab_pages), hak_load_relaxed(&_hak_stat_slab_pages) * (HAK_PAGE_SIZE / 1024),
         (unsigned long long)hak_load_relaxed(&_hak_stat_borrowed));
  sb_add(&sb, "large: allocs=%llu frees=%llu live_bytes=%llu peak_bytes=%llu\n",
         (unsigned long long)hak_load_relaxed(&_hak_stat_large_allocs),
         (unsigned long long)hak_load_relaxed(&_hak_stat_large_frees),
         (unsigned long long)hak_load_relaxed(&_hak_stat_large_bytes),
         (unsigned long long)hak_load_relaxed(&_hak_stat_large_peak_bytes));
  uint64_t bh, bm, be, rc, rb, ru;
  size_t bb, bmap, parked, pmap;
  _hak_bigcache_stats(&bh, &bm, &be, &bb, &bmap);
  _hak_release_stats(&rc, &rb, &ru, &parked, &pmap);
  sb_add(&sb, "bigcache: hits=%llu misses=%llu evictions=%llu bytes=%zu mapped=%zu\n", (unsigned long long)bh,
         (unsigned long long)bm, (unsigned long long)be, bb, bmap);
  if (_hak_scavenge_enabled())
    sb_add(&sb, "scavenge: passes=%llu pages_given_back=%llu bytes_given_back=%llu readmitted_pages=%llu dropped_now=%zu\n",
           (unsigned long long)hak_load_relaxed(&_hak_stat_scav_passes),
           (unsigned long long)hak_load_relaxed(&_hak_stat_scav_pages),
           (unsigned long long)hak_load_relaxed(&_hak_stat_scav_pages) * HAK_OS_PAGE,
           (unsigned long long)hak_load_relaxed(&_hak_stat_scav_readmitted), hak_load_relaxed(&_hak_stat_scav_dropped));
  if (hak_opt(MESH)) {
    uint64_t m[9];
    _hak_mesh_stats(m);
    sb_add(&sb,
           "mesh: passes=%llu meshed_slabs=%llu roots=%llu dissolved=%llu unmeshed=%llu bytes_given_back=%llu "
           "barrier_waits=%llu fork_copies=%llu meshed_pages_now=%llu\n",
           (unsigned long long)m[0], (unsigned long long)m[1], (unsigned long long)m[2], (unsigned long long)m[3],
           (unsigned long long)m[4], (unsigned long long)m[5], (unsigned long long)m[6], (unsigned long long)m[7],
           (unsigned long long)m[8]);
  }
  sb_add(&sb, "release: decommits=%llu decommit_bytes=%llu retained_empty=%zu unmapped_large=%llu parked=%zu parked_mapped=%zu\n",
         (unsigned long long)rc, (unsigned long long)rb, hak_load_relaxed(&_hak_retained_bytes),
         (unsigned long long)ru, parked, pmap);
  if (_hak_sites_used() > 0 && sb.len + 2048 < sb.cap) sb.len += _hak_sites_report(sb.buf + sb.len, sb.cap - sb.len, 8);
  sb_add(&sb, "segments: live=%zu cached=%zu abandoned=%zu (%zu slab pages)\n", hak_load_relaxed(&_hak_seg_count),
         hak_load_relaxed(&_hak_seg_cached), hak_load_relaxed(&_hak_seg_abandoned),
         hak_load_relaxed(&_hak_abandoned_pages));
  size_t psegs, pfree, pres;
  _hak_pool_stats(&psegs, &pfree, &pres);
  /* where small pages are: in slabs (the heaps'), free in the shared pool
   * (resident, or returned to the OS but still mapped) */
  sb_add(&sb, "pages: in_slabs=%zu pool_free=%zu pool_resident=%zu pool_returned=%zu pool_segments=%zu (64 KiB pages) background=%d\n",
         (size_t)hak_load_relaxed(&_hak_stat_slab_pages), pfree, pres, pfree - pres, psegs, (int)_hak_background_running());
  sb_add(&sb,
         "threads: abandoned segments=%llu slab_pages=%llu; adopted segments=%llu slab_pages=%llu; "
         "reclaimed slabs=%llu slab_pages=%llu; emptied while abandoned segments=%llu\n",
         (unsigned long long)hak_load_relaxed(&_hak_stat_seg_abandon_total),
         (unsigned long long)hak_load_relaxed(&_hak_stat_abandon_pages),
         (unsigned long long)hak_load_relaxed(&_hak_stat_seg_adopt_total),
         (unsigned long long)hak_load_relaxed(&_hak_stat_adopt_pages),
         (unsigned long long)hak_load_relaxed(&_hak_stat_reclaimed_slabs),
         (unsigned long long)hak_load_relaxed(&_hak_stat_reclaimed_pages),
         (unsigned long long)hak_load_relaxed(&_hak_stat_seg_emptied_total));
  hak_os_stats_t os;
  hak_os_stats(&os);
  sb_add(&sb, "os: mmap=%zu munmap=%zu madvise=%zu mprotect=%zu mremap=%zu\n", os.mmap_calls, os.munmap_calls,
         os.madvise_calls, os.mprotect_calls, os.mremap_calls);
  sb_add(&sb, "os-bytes: mmap=%zu munmap=%zu madvise=%zu mapped=%zu peak_mapped=%zu\n", os.mmap_bytes,
         os.munmap_bytes, os.madvise_bytes, os.mapped_bytes, os.peak_mapped_bytes);
  sb_add(&sb, "rss: current=%zu peak=%zu\n", _hak_os_rss_bytes(), _hak_os_peak_rss_bytes());
  return sb.len;
}

static void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

hak_api void hakmem_stats_print(FILE* out) {
  char buf[8192];
  size_t n = stats_format(buf, sizeof buf);
  if (out == NULL || out == stderr) {
    if (out) fflush(out);
    write_all(2, buf, n);
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
static dev_t report_dev;
static ino_t report_ino;

void _hak_stats_init(void) {
  if (!hak_opt(STATS) || _hak_option_text(HAK_OPT_STATS_FILE) != NULL || report_fd >= 0) return;
  static const int floor[] = {900, 200, 10};
  int fd = -1;
  for (size_t i = 0; i < sizeof floor / sizeof floor[0] && fd < 0; i++) fd = fcntl(2, F_DUPFD_CLOEXEC, floor[i]);
  struct stat st;
  if (fd < 0) return;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return;
  }
  report_dev = st.st_dev;
  report_ino = st.st_ino;
  report_fd = fd;
}

/* Still our duplicate: open, the same file, and still close-on-exec (dup2
 * onto the number clears the flag). */
static bool report_fd_ours(void) {
  struct stat st;
  if (report_fd < 0) return false;
  int fl = fcntl(report_fd, F_GETFD);
  return fl >= 0 && (fl & FD_CLOEXEC) && fstat(report_fd, &st) == 0 && st.st_dev == report_dev &&
         st.st_ino == report_ino;
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
    int fd = report_path(pat, path, sizeof path) ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
    if (fd >= 0) {
      write_all(fd, buf, n);
      close(fd);
      return;
    }
    _hak_message("hakmem: warning: cannot open HAKMEM_STATS_FILE=%.200s (errno %d); report on stderr\n", pat, errno);
  }
  write_all(report_fd_ours() ? report_fd : 2, buf, n);
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
