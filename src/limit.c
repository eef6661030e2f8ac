/* The memory limit: resident memory the process is to stay under, from
 * HAKMEM_MEMORY_LIMIT or else the container's (cgroup v2 memory.max, cgroup
 * v1 memory.limit_in_bytes of the process's own group).
 *
 * Why: a container's limit is enforced by the kernel, which reclaims and
 * then kills; it knows nothing of the empty pages an allocator keeps for
 * reuse.  A program whose threads move from one size band to the next
 * (small blocks, then medium, then large) leaves each band's pages empty
 * in hakmem's pool or cache while the next band maps new ones: unlimited,
 * 4 threads holding 78 MB of live blocks at a time peaked at 181 MB (glibc
 * 85 MB), and inside a 160 MiB group hakmem was killed where glibc lived.
 *
 * How: before hakmem commits new memory in bulk (a new segment or large
 * mapping, a parked mapping reused, free pool pages that were given back
 * taken for a slab) it asks _hak_limit_grow.  While the bytes hakmem has
 * mapped plus the request stay under 7/8 of the limit (mapped bytes bound
 * the resident ones from above) that is one load and a compare.  Past it,
 * the process's resident size is read from /proc/self/statm, and when it
 * plus the request would pass 7/8 of the limit every empty and cached page
 * of every tier and heap is given back at once: the pool's free pages, the
 * BigCache and the parked large mappings, the cached segments, abandoned
 * slabs' emptied pages; and each heap, at its next refill, its empty slabs
 * (the one it keeps per class too) and the free pages of its sparse slabs.  Pages given back under a limit use MADV_DONTNEED
 * (release.c): MADV_FREE's pages stay in the group's count until reclaim.
 * Live blocks are the program's: a limit below them is not kept. */
#include "internal.h"

size_t _hak_limit;   /* bytes; 0: none */
_Atomic(uint64_t) _hak_limit_epoch;
static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t parse_limit(const char* s) {   /* "max" or a byte count */
  if (s[0] < '0' || s[0] > '9') return 0;
  unsigned long long v = 0;
  for (; *s >= '0' && *s <= '9'; s++) v = v * 10 + (unsigned)(*s - '0');
  /* cgroup v1 says "no limit" with the largest page-aligned long */
  return v >= ((unsigned long long)1 << 60) ? 0 : (size_t)v;
}

/* The limit of the group this process is in: cgroup v2's line "0::PATH",
 * else cgroup v1's memory controller line "N:...memory...:PATH". */
hak_warm static size_t cgroup_limit(void) {
  char cg[2048], path[1200], val[64];
  if (!_hak_os_read_small("/proc/self/cgroup", cg, sizeof cg)) return 0;
  for (char* line = cg; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    char* c1 = strchr(line, ':');
    char* c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    char* end = strchr(line, '\n');
    if (c2 == NULL || (end && c2 > end)) continue;
    size_t plen = end ? (size_t)(end - c2 - 1) : strlen(c2 + 1);
    if (plen > 1000) continue;
    bool v2 = c1 == line + 1 && line[0] == '0' && c2 == c1 + 1;
    bool v1 = false;
    for (char* k = c1 + 1; k + 6 <= c2 && !v1; k++) v1 = memcmp(k, "memory", 6) == 0;
    if (!v1 && !v2) continue;
    /* by hand, not snprintf: printf's code and tables are about 190 KiB of
     * libc pages that a process which never prints would fault in at start-up */
    const char* pre = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    const char* suf = v2 ? "/memory.max" : "/memory.limit_in_bytes";
    size_t n = strlen(pre);
    memcpy(path, pre, n);
    memcpy(path + n, c2 + 1, plen);
    memcpy(path + n + plen, suf, strlen(suf) + 1);
    if (_hak_os_read_small(path, val, sizeof val)) {
      size_t lim = parse_limit(val);
      if (lim) return lim;
    }
  }
  return 0;
}

hak_warm void _hak_limit_init(void) {
  size_t opt = (size_t)hak_opt(MEMORY_LIMIT);
  _hak_limit = opt ? opt : cgroup_limit();
}

/* Every empty and cached page, of every tier and heap, given back now: the
 * shared tiers here, each heap's own at its next refill (the epoch).  One
 * thread at a time; a thread that waited finds the work done when the
 * resident size has come down meanwhile. */
static void limit_release(size_t bytes, size_t high) {
  hak_lock(&limit_lock);
  if (_hak_os_rss_bytes() + bytes <= high) {
    hak_unlock(&limit_lock);
    return;
  }
  atomic_fetch_add_explicit(&_hak_limit_epoch, 1, memory_order_relaxed);
  _hak_bigcache_expire(0);
  _hak_batch_flush();
  _hak_pool_abandoned_tick(true);
  _hak_pool_tick(_hak_clock_ms(), 0, true);
  _hak_segment_cache_trim(0);
  hak_unlock(&limit_lock);
}

void _hak_limit_grow_slow(size_t bytes) {
  size_t high = _hak_limit / 8 * 7;
  if (_hak_os_rss_bytes() + bytes > high) limit_release(bytes, high);
}

void _hak_limit_fork_prepare(void) { hak_lock(&limit_lock); }
void _hak_limit_fork_parent(void) { hak_unlock(&limit_lock); }
void _hak_limit_fork_child(void) { pthread_mutex_init(&limit_lock, NULL); }

uint64_t _hak_limit_releases(void) { return hak_load_relaxed(&_hak_limit_epoch); }
