/* Figures on request: hakmem_ctl, a numeric query by name in the manner of
 * jemalloc's mallctl (what monitoring reads: allocated, active, resident,
 * mapped, retained bytes, per-class counts, the effective options), and
 * glibc's malloc_info (the same figures in glibc's XML) and mallopt (glibc's
 * parameters, mapped to a setting where hakmem has one).  The figures come
 * from stats.c's _hak_figures, computed when asked: nothing here is on a
 * fast path.  docs/TUNING.md lists every name. */
#include "internal.h"
#include <errno.h>

/* ---------------------------------------------------------------- the snapshot
 * The stats.* names read one snapshot, so that figures read one after
 * another agree with each other; writing "epoch" takes a new one (as in
 * jemalloc), and the first read takes the first.  ctl_lock guards only the
 * copy: the snapshot is computed outside it (the walk takes the heap and
 * pool locks), so it is a leaf lock. */
static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
hak_bss_apart static hak_figures_t ctl_snap;
static uint64_t ctl_epoch;   /* snapshots taken (0: none yet) */

static void ctl_refresh(void) {
  hak_figures_t f;
  _hak_figures(&f);
  hak_lock(&ctl_lock);
  ctl_snap = f;
  ctl_epoch++;
  hak_unlock(&ctl_lock);
}

/* n bytes at offset off of the snapshot (off + n within it) */
static void ctl_snap_read(size_t off, void* out, size_t n) {
  hak_lock(&ctl_lock);
  bool none = ctl_epoch == 0;
  hak_unlock(&ctl_lock);
  if (none) ctl_refresh();
  hak_lock(&ctl_lock);
  memcpy(out, (const uint8_t*)&ctl_snap + off, n);
  hak_unlock(&ctl_lock);
}

/* ---------------------------------------------------------------- the names
 * One entry a name.  In a name, '#' stands for a size-class index and '*'
 * for an option's name; `i` is the index the name matched (class or
 * option).  get and set take a value of the entry's type; either may be
 * NULL (write-only, read-only).  A read-write entry gives the value it had
 * before the write, unless write_first (epoch: the new one). */
typedef enum { CTL_SIZE, CTL_U64, CTL_BOOL, CTL_STR } ctl_type_t;   /* size_t, uint64_t, bool, const char* */
static const size_t ctl_type_size[] = {sizeof(size_t), sizeof(uint64_t), sizeof(bool), sizeof(const char*)};

typedef struct ctl_s {
  const char* name;
  ctl_type_t type;
  int (*get)(const struct ctl_s* c, size_t i, void* out);
  int (*set)(const struct ctl_s* c, size_t i, const void* in);
  size_t off;        /* figures: the field's offset in hak_figures_t (stats.class.#: in hak_class_figures_t) */
  bool write_first;
} ctl_t;

static int get_figure(const ctl_t* c, size_t i, void* out) {
  (void)i;
  ctl_snap_read(c->off, out, ctl_type_size[c->type]);
  return 0;
}
static int get_class(const ctl_t* c, size_t i, void* out) {
  ctl_snap_read(offsetof(hak_figures_t, cls) + i * sizeof(hak_class_figures_t) + c->off, out, ctl_type_size[c->type]);
  return 0;
}
static int get_nclasses(const ctl_t* c, size_t i, void* out) {
  (void)c, (void)i;
  *(size_t*)out = HAK_NCLASSES;
  return 0;
}
static int get_secure(const ctl_t* c, size_t i, void* out) {
  (void)c, (void)i;
  *(bool*)out = HAK_SECURE;
  return 0;
}
static int get_version(const ctl_t* c, size_t i, void* out) {
  (void)c, (void)i;
  *(const char**)out = HAKMEM_VERSION;
  return 0;
}
static int get_epoch(const ctl_t* c, size_t i, void* out) {
  (void)c, (void)i;
  hak_lock(&ctl_lock);
  *(uint64_t*)out = ctl_epoch;
  hak_unlock(&ctl_lock);
  return 0;
}
static int set_epoch(const ctl_t* c, size_t i, const void* in) {
  (void)c, (void)i, (void)in;   /* any value refreshes */
  ctl_refresh();
  return 0;
}
/* opt.*: the value in effect (hak_option_get's; a path option: 1 when set) */
static int get_option(const ctl_t* c, size_t i, void* out) {
  (void)c;
  _hak_options_init();
  long long v = _hak_options[i];
  *(size_t*)out = v > 0 ? (size_t)v : 0;
  return 0;
}

/* the profiler (prof.c) and the memory limit (limit.c) */
static int get_prof_active(const ctl_t* c, size_t i, void* out) {
  (void)c, (void)i;
  *(bool*)out = _hak_prof_active();
  return 0;
}
static int set_prof_active(const ctl_t* c, size_t i, const void* in) {
  (void)c, (void)i;
  _hak_prof_set_active(*(const bool*)in);
  return 0;
}
static int get_prof_rate(const ctl_t* c, size_t i, void* out) {
  (void)c, (void)i;
  *(size_t*)out = _hak_prof_rate();
  return 0;
}
static int set_prof_rate(const ctl_t* c, size_t i, const void* in) {
  (void)c, (void)i;
  if (*(const size_t*)in == 0) return EINVAL;
  _hak_prof_set_rate(*(const size_t*)in);
  return 0;
}
static int set_prof_dump(const ctl_t* c, size_t i, const void* in) {   /* a path, or NULL: the next default file */
  (void)c, (void)i;
  return _hak_prof_dump(*(const char* const*)in) == 0 ? 0 : errno ? errno : EIO;
}
static int get_limit(const ctl_t* c, size_t i, void* out) {
  (void)c, (void)i;
  *(size_t*)out = _hak_limit;
  return 0;
}
static int get_limit_releases(const ctl_t* c, size_t i, void* out) {
  (void)c, (void)i;
  *(uint64_t*)out = _hak_limit_releases();
  return 0;
}

#define FIG(name, field) {name, CTL_SIZE, get_figure, NULL, offsetof(hak_figures_t, field), false}
#define FIG_U64(name, field) {name, CTL_U64, get_figure, NULL, offsetof(hak_figures_t, field), false}
#define CLS(name, field) {"stats.class.#." name, CTL_SIZE, get_class, NULL, offsetof(hak_class_figures_t, field), false}
static const ctl_t ctl_table[] = {
    {"version", CTL_STR, get_version, NULL, 0, false},
    {"epoch", CTL_U64, get_epoch, set_epoch, 0, true},
    {"class.count", CTL_SIZE, get_nclasses, NULL, 0, false},
    {"config.secure", CTL_BOOL, get_secure, NULL, 0, false},
    {"opt.*", CTL_SIZE, get_option, NULL, 0, false},
    {"prof.active", CTL_BOOL, get_prof_active, set_prof_active, 0, false},
    {"prof.rate", CTL_SIZE, get_prof_rate, set_prof_rate, 0, false},
    {"prof.dump", CTL_STR, NULL, set_prof_dump, 0, false},
    {"limit.bytes", CTL_SIZE, get_limit, NULL, 0, false},
    {"limit.releases", CTL_U64, get_limit_releases, NULL, 0, false},
    FIG("stats.allocated", allocated),
    FIG("stats.active", active),
    FIG("stats.metadata", metadata),
    FIG("stats.resident", resident),
    FIG("stats.mapped", mapped),
    FIG("stats.retained", retained),
    FIG("stats.retained_resident", retained_resident),
    FIG("stats.peak_mapped", peak_mapped),
    FIG("stats.rss", rss),
    FIG("stats.peak_rss", peak_rss),
    FIG("stats.small.allocated", small_allocated),
    FIG("stats.small.active", small_active),
    FIG("stats.small.free_bytes", small_free_bytes),
    FIG("stats.small.free_blocks", small_free_blocks),
    FIG("stats.small.segments", segments),
    FIG("stats.small.cached_segments", cached_segments),
    FIG("stats.small.pool_free_pages", pool_free_pages),
    FIG("stats.large.live_blocks", large_live),
    FIG("stats.large.allocated", large_allocated),
    FIG("stats.large.mapped", large_mapped),
    FIG_U64("stats.large.nmalloc", large_nmalloc),
    FIG_U64("stats.large.nfree", large_nfree),
    FIG_U64("stats.threads.idle_slabs", idle_slabs),
    FIG_U64("stats.threads.park_slabs", park_slabs),
    FIG_U64("stats.small.surplus_pages", pool_surplus_pages),
    FIG_U64("stats.small.yielded_pages", pool_yielded_pages),
    FIG("stats.sampled.live_blocks", sampled.live),
    FIG("stats.sampled.bytes", sampled.bytes),
    FIG("stats.sampled.pages", sampled.pages),
    FIG("stats.sampled.segments", sampled.segments),
    FIG_U64("stats.guard.guarded", guarded),
    FIG_U64("stats.guard.capped", guard_capped),
    FIG("stats.guard.live", guard.live),
    FIG("stats.guard.bytes", guard.bytes),
    FIG("stats.guard.segments", guard.segments),
    FIG("stats.guard.retired_slots", guard_retired),
    FIG_U64("stats.guard.errors", guard_errors),
    FIG("stats.bigcache.resident", bigcache_resident),
    FIG("stats.bigcache.mapped", bigcache_mapped),
    FIG_U64("stats.bigcache.yielded", bigcache_yielded),
    FIG("stats.os.mmap", os.mmap_calls),
    FIG("stats.os.munmap", os.munmap_calls),
    FIG("stats.os.madvise", os.madvise_calls),
    FIG("stats.os.mprotect", os.mprotect_calls),
    FIG("stats.os.mremap", os.mremap_calls),
    CLS("size", cls_size),
    CLS("live_blocks", live_blocks),
    CLS("free_blocks", free_blocks),
    CLS("slabs", slabs),
    CLS("pages", pages),
    {"stats.class.#.nmalloc", CTL_U64, get_class, NULL, offsetof(hak_class_figures_t, nmalloc), false},
};
#undef FIG
#undef FIG_U64
#undef CLS

/* Does `name` match pattern p?  *i: the class index or option a '#' or '*'
 * matched. */
static bool ctl_match(const char* p, const char* name, size_t* i) {
  while (*p != 0) {
    if (*p == '#') {   /* 0 .. HAK_NCLASSES - 1, no leading zero */
      size_t v = 0, nd = 0;
      while (nd < 3 && name[nd] >= '0' && name[nd] <= '9') v = v * 10 + (size_t)(name[nd++] - '0');
      if (nd == 0 || (nd > 1 && name[0] == '0') || v >= HAK_NCLASSES) return false;
      *i = v;
      name += nd;
      p++;
    } else if (*p == '*') {   /* the rest names an option */
      int id = _hak_option_find(name);
      if (id < 0) return false;
      *i = (size_t)id;
      return true;
    } else if (*p++ != *name++) {
      return false;
    }
  }
  return *name == 0;
}

hak_api int hakmem_ctl(const char* name, void* oldp, size_t* oldlenp, const void* newp, size_t newlen) {
  if (name == NULL) return ENOENT;
  const ctl_t* c = NULL;
  size_t i = 0;
  for (size_t k = 0; k < sizeof ctl_table / sizeof ctl_table[0] && c == NULL; k++)
    if (ctl_match(ctl_table[k].name, name, &i)) c = &ctl_table[k];
  if (c == NULL) return ENOENT;
  size_t sz = ctl_type_size[c->type];
  bool write = newp != NULL || newlen != 0, read = oldp != NULL || oldlenp != NULL;
  if (write && c->set == NULL) return EPERM;
  if (write && (newp == NULL || newlen != sz)) return EINVAL;
  if (read && c->get == NULL) return EPERM;
  if (read && oldlenp == NULL) return EINVAL;
  if (read && oldp != NULL && *oldlenp != sz) {   /* the size it takes, like sysctl */
    *oldlenp = sz;
    return EINVAL;
  }
  int err = 0;
  if (write && c->write_first) err = c->set(c, i, newp);
  if (err == 0 && read && oldp != NULL) err = c->get(c, i, oldp);
  if (err == 0 && read) *oldlenp = sz;
  if (err == 0 && write && !c->write_first) err = c->set(c, i, newp);
  return err;
}

void _hak_ctl_fork_prepare(void) { hak_lock(&ctl_lock); }
void _hak_ctl_fork_parent(void) { hak_unlock(&ctl_lock); }
void _hak_ctl_fork_child(void) { pthread_mutex_init(&ctl_lock, NULL); }

/* ---------------------------------------------------------------- malloc_info
 * glibc's shape: one <heap> per arena with its free chunks by size, and
 * totals.  hakmem's pages belong to the process (pool.c), so there is one
 * heap: the small tier and every cache.  Its <sizes> are the room left in
 * each class's slabs (blocks a malloc takes without new pages: "fast"),
 * "rest" the other memory held and not in use, and "mmap" the live large
 * blocks with their mappings, which glibc too counts outside the heaps.  So
 * system current + mmap size = everything hakmem has mapped. */
hak_api int hak_malloc_info(int options, FILE* fp) {
  if (options != 0 || fp == NULL) return EINVAL;
  hak_figures_t f;
  _hak_figures(&f);
  char buf[8192];
  hak_sbuf_t sb = {buf, 0, sizeof buf};
  size_t heap = f.mapped - (f.large_mapped < f.mapped ? f.large_mapped : f.mapped);
  size_t headroom = f.large_mapped - (f.large_allocated + f.large_live * HAK_LARGE_HDR < f.large_mapped
                                          ? f.large_allocated + f.large_live * HAK_LARGE_HDR : f.large_mapped);
  size_t rest = f.retained > headroom ? f.retained - headroom : 0;
  size_t rest_pages = f.pool_free_pages + f.cached_segments * (size_t)HAK_SMALL_SLAB_PAGES;
  _hak_sb_add(&sb, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n");
  for (size_t c = 0; c < HAK_NCLASSES; c++)
    if (f.cls[c].free_blocks != 0)
      _hak_sb_add(&sb, "  <size from=\"%zu\" to=\"%zu\" total=\"%zu\" count=\"%zu\"/>\n", c ? f.cls[c - 1].cls_size + 1 : 1,
                  f.cls[c].cls_size, f.cls[c].free_blocks * f.cls[c].cls_size, f.cls[c].free_blocks);
  _hak_sb_add(&sb, "</sizes>\n");
  for (int top = 0; top < 2; top++) {
    _hak_sb_add(&sb, "<total type=\"fast\" count=\"%zu\" size=\"%zu\"/>\n", f.small_free_blocks, f.small_free_bytes);
    _hak_sb_add(&sb, "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n", rest_pages, rest);
    if (top) _hak_sb_add(&sb, "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n", f.large_live, f.large_mapped);
    _hak_sb_add(&sb, "<system type=\"current\" size=\"%zu\"/>\n<system type=\"max\" size=\"%zu\"/>\n", heap, f.peak_mapped);
    _hak_sb_add(&sb, "<aspace type=\"total\" size=\"%zu\"/>\n<aspace type=\"mprotect\" size=\"%zu\"/>\n", heap, heap);
    if (!top) _hak_sb_add(&sb, "</heap>\n");
  }
  _hak_sb_add(&sb, "</malloc>\n");
  fwrite(buf, 1, sb.len, fp);   /* (outside every lock: the stream may allocate its buffer) */
  return 0;
}

/* ---------------------------------------------------------------- mallopt
 * glibc's parameters.  Two have a hakmem meaning: M_TRIM_THRESHOLD (free
 * memory kept before it goes back to the OS: HAKMEM_LEAN_TARGET_MB, the
 * empty resident memory kept) and M_CHECK_ACTION (what a detected error
 * does: HAKMEM_INVALID_FREE).  The others concern glibc's arenas, bins and
 * heap top, which hakmem does not have: accepted and ignored.  The return
 * values are glibc's: 1, or 0 for a value glibc refuses.  A variable the
 * user set in the environment wins over the program's call. */
hak_api int hak_mallopt(int param, int value) {
  switch (param) {
    case M_TRIM_THRESHOLD:
      /* negative: glibc never trims; else bytes, rounded up to whole MiB */
      _hak_option_set(HAK_OPT_LEAN_TARGET_MB, value < 0 ? LLONG_MAX : ((long long)value + (1 << 20) - 1) >> 20);
      return 1;
    case M_CHECK_ACTION:
      /* bit 1: abort; else bit 0: print and go on; 0: ignore */
      _hak_option_set(HAK_OPT_INVALID_FREE, (value & 2) ? HAK_INVALID_ABORT : (value & 1) ? HAK_INVALID_WARN : HAK_INVALID_IGNORE);
      return 1;
    case M_MXFAST:
      return value >= 0 && (size_t)value <= 80 * sizeof(size_t) / 4;   /* glibc's MAX_FAST_SIZE */
    case M_MMAP_THRESHOLD:
      return value >= 0 && (size_t)value <= ((size_t)32 << 20);   /* glibc: at most half its 64 MiB heap */
    default:
      return 1;   /* M_TOP_PAD, M_MMAP_MAX, M_PERTURB, M_ARENA_TEST, M_ARENA_MAX, and any other, as glibc */
  }
}
