/* Figures on request: hakmem_ctl's names and errors, the figures following
 * what the program does (allocated up by the usable size of what it
 * allocates and back after the frees, also across threads), their order
 * (mapped >= resident >= active >= allocated), malloc_info and mallopt.
 *
 * usage: test-ctl api [--require-hakmem]   every check
 *        test-ctl xml PATH                 malloc_info(0) into PATH, and on
 *            stdout the ctl figures of the same moment ("ctl NAME VALUE"),
 *            for tests/cases/core_ctl.sh to compare with the XML
 * Run with HAKMEM_BACKGROUND=0: the background thread would change the
 * figures between two readings. */
#include "hak_test.h"

#include <pthread.h>
#include <sys/wait.h>

static size_t fig(const char* name) {
  size_t v = 0, len = sizeof v;
  int rc = t_ctl(name, &v, &len, NULL, 0);
  CHECKF(rc == 0 && len == sizeof v, "hakmem_ctl(%s): %d, len %zu", name, rc, len);
  return v;
}
/* The secure build: a block's usable size is its request, and a class's
 * size the most its blocks hold (the block less its 8-byte trailer). */
static bool secure_build(void) {
  bool on = false;
  size_t len = sizeof on;
  CHECK(t_ctl("config.secure", &on, &len, NULL, 0) == 0 && len == sizeof on);
  return on;
}
static uint64_t refresh(void) {
  uint64_t e = 0, one = 1;
  size_t len = sizeof e;
  int rc = t_ctl("epoch", &e, &len, &one, sizeof one);
  CHECKF(rc == 0, "epoch refresh: %d", rc);
  return e;
}
static size_t cls_fig(size_t c, const char* what) {
  char name[64];
  snprintf(name, sizeof name, "stats.class.%zu.%s", c, what);
  return fig(name);
}
/* the class that serves a request of n bytes (n <= 128 KiB) */
static size_t class_of(size_t n) {
  size_t k = fig("class.count");
  for (size_t c = 0; c < k; c++)
    if (cls_fig(c, "size") >= n) return c;
  return k;
}

static void check_order(const char* when) {
  refresh();
  size_t al = fig("stats.allocated"), ac = fig("stats.active"), re = fig("stats.resident"), ma = fig("stats.mapped");
  size_t rt = fig("stats.retained"), md = fig("stats.metadata"), rr = fig("stats.retained_resident");
  size_t segs = fig("stats.small.segments"), large = fig("stats.large.live_blocks");
  printf("  %s: allocated %zu active %zu resident %zu mapped %zu retained %zu (resident %zu) metadata %zu\n", when, al,
         ac, re, ma, rt, rr, md);
  CHECKF(ac >= al, "%s: active %zu < allocated %zu", when, ac, al);
  CHECKF(re >= ac, "%s: resident %zu < active %zu", when, re, ac);
  CHECKF(ma >= re, "%s: mapped %zu < resident %zu", when, ma, re);
  CHECKF(ma == ac + rt + md, "%s: mapped %zu != active %zu + retained %zu + metadata %zu", when, ma, ac, rt, md);
  CHECKF(rr <= rt, "%s: retained_resident %zu > retained %zu", when, rr, rt);
  /* metadata is what the other figures leave: headers (five 4 KiB pages per
   * segment, 8 KiB per large block), heaps and tables.  More would mean a
   * figure misses memory, less that one counts some twice. */
  size_t bound = segs * 64 * HT_KiB + large * 8 * HT_KiB + 4 * HT_MiB;
  CHECKF(md <= bound, "%s: metadata %zu above %zu (%zu segments, %zu large blocks)", when, md, bound, segs, large);
  CHECKF(md >= segs * 20 * HT_KiB + large * 8 * HT_KiB, "%s: metadata %zu below the headers of %zu segments and %zu large blocks",
         when, md, segs, large);
}

/* ------------------------------------------------------------------------ */
/* Whether heap profiling samples by default: HAKMEM_PROF unset and the
 * balanced profile (HAKMEM_PROF=sample), not the secure build's. */
static bool sampling_by_default(void) {
  const char* p = getenv("HAKMEM_PROF");
  const char* prof = getenv("HAKMEM_PROFILE");
  if (p != NULL) return strcmp(p, "off") != 0 && strcmp(p, "0") != 0;
  return prof == NULL || strcmp(prof, "balanced") == 0;
}

/* How many of the blocks below the sampling point may have served from
 * elsewhere than their class: a sampled block (a page slot, or above a page
 * a large block) or a guarded one.  About 10 samples, and at
 * HAKMEM_GUARD=1000 about 4 guarded blocks of 48 B and 100 of 20000 B (the
 * countdown is in bytes), are due in the 20 MB test_follow allocates; 0
 * with both off. */
static size_t pslot_slack(void) {
  const char* g = getenv("HAKMEM_GUARD");
  return sampling_by_default() || g == NULL || strcmp(g, "0") != 0 ? 200 : 0;
}
#define BETWEEN(v, lo, hi) ((v) >= (lo) && (v) <= (hi))

static void test_names(void) {
  ht_begin("names, sizes and errors");
  const char* v = NULL;
  size_t len = sizeof v;
  CHECK(t_ctl("version", &v, &len, NULL, 0) == 0 && v != NULL && strcmp(v, t_version()) == 0);
  size_t nclass = fig("class.count");
  char name[64];
  snprintf(name, sizeof name, "stats.class.%zu.size", nclass - 1);
  CHECKF(nclass >= 32 && nclass <= 256 && fig(name) == 128 * 1024 - (secure_build() ? 8 : 0), "class.count %zu, the last class %zu B", nclass, fig(name));
  size_t x = 0;
  len = sizeof x;
  /* the profiler's and the limit's names */
  bool on = false, want_on = sampling_by_default();
  size_t blen = sizeof on;
  CHECKF(t_ctl("prof.active", &on, &blen, NULL, 0) == 0 && on == want_on, "prof.active %d, want %d", on, want_on);
  size_t rate = 0, rlen = sizeof rate, r2 = 1 << 20;
  CHECK(t_ctl("prof.rate", &rate, &rlen, NULL, 0) == 0 && rate == 2 * 1024 * 1024);
  CHECK(t_ctl("prof.rate", NULL, NULL, &r2, sizeof r2) == 0 && fig("prof.rate") == (1u << 20));
  r2 = 0;
  CHECK(t_ctl("prof.rate", NULL, NULL, &r2, sizeof r2) == EINVAL);
  r2 = rate;
  CHECK(t_ctl("prof.rate", NULL, NULL, &r2, sizeof r2) == 0);
  const char* dump = "/nonexistent/x.heap";
  /* never started: EINVAL; sampling (the balanced default): the file cannot be made */
  CHECK(t_ctl("prof.dump", NULL, NULL, &dump, sizeof dump) == (want_on ? ENOENT : EINVAL));
  CHECK(t_ctl("prof.dump", &x, &len, NULL, 0) == EPERM);                 /* write-only */
  CHECK(t_ctl("limit.bytes", &x, &len, NULL, 0) == 0);
  CHECK(t_ctl("limit.bytes", NULL, NULL, &x, sizeof x) == EPERM);
  CHECK(t_ctl("stats.no_such_figure", &x, &len, NULL, 0) == ENOENT);
  CHECK(t_ctl("stats.allocatedx", &x, &len, NULL, 0) == ENOENT);
  CHECK(t_ctl("stats", &x, &len, NULL, 0) == ENOENT);
  CHECK(t_ctl("", &x, &len, NULL, 0) == ENOENT);
  CHECK(t_ctl(NULL, &x, &len, NULL, 0) == ENOENT);
  snprintf(name, sizeof name, "stats.class.%zu.size", nclass);
  CHECK(t_ctl(name, &x, &len, NULL, 0) == ENOENT);
  CHECK(t_ctl("stats.class.01.size", &x, &len, NULL, 0) == ENOENT);
  CHECK(t_ctl("stats.class..size", &x, &len, NULL, 0) == ENOENT);
  CHECK(t_ctl("stats.class.1.sizes", &x, &len, NULL, 0) == ENOENT);
  CHECK(t_ctl("opt.", &x, &len, NULL, 0) == ENOENT);
  CHECK(t_ctl("opt.no_such_option", &x, &len, NULL, 0) == ENOENT);
  CHECK(t_ctl("opt.hakmem_profile", &x, &len, NULL, 0) == ENOENT);
  /* a buffer of another size: EINVAL, and the size it takes */
  uint32_t small = 0;
  len = sizeof small;
  CHECK(t_ctl("stats.allocated", &small, &len, NULL, 0) == EINVAL && len == sizeof(size_t));
  len = 16;
  CHECK(t_ctl("stats.allocated", &x, &len, NULL, 0) == EINVAL && len == sizeof(size_t));
  CHECK(t_ctl("stats.allocated", &x, NULL, NULL, 0) == EINVAL);
  len = 0;
  CHECK(t_ctl("stats.allocated", NULL, &len, NULL, 0) == 0 && len == sizeof(size_t));   /* size query */
  /* writes: EPERM on a figure, EINVAL with a wrong size */
  size_t nv = 1;
  CHECK(t_ctl("stats.allocated", NULL, NULL, &nv, sizeof nv) == EPERM);
  CHECK(t_ctl("opt.decommit", NULL, NULL, &nv, sizeof nv) == EPERM);
  CHECK(t_ctl("version", NULL, NULL, &v, sizeof v) == EPERM);
  uint32_t e32 = 1;
  CHECK(t_ctl("epoch", NULL, NULL, &e32, sizeof e32) == EINVAL);
  CHECK(t_ctl("epoch", NULL, NULL, NULL, 8) == EINVAL);
  uint64_t e0 = refresh(), e1 = refresh(), e2 = 0;
  len = sizeof e2;
  CHECK(t_ctl("epoch", &e2, &len, NULL, 0) == 0);
  CHECKF(e0 >= 1 && e1 == e0 + 1 && e2 == e1, "epochs %llu %llu %llu", (unsigned long long)e0,
         (unsigned long long)e1, (unsigned long long)e2);
  /* options: every name of the table, in either case */
  static const char* const opts[] = {"PROFILE", "DECOMMIT", "DECOMMIT_DELAY_MS", "LEAN_TARGET_MB", "BIGCACHE_MAX_MB",
                                     "SEG_CACHE", "THP", "LEND", "SCAVENGE", "INVALID_FREE", "STATS_FILE"};
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
    char lower[64], env[64];
    snprintf(env, sizeof env, "HAKMEM_%s", opts[i]);
    size_t k = 0;
    for (; opts[i][k]; k++) lower[k] = (char)(opts[i][k] >= 'A' && opts[i][k] <= 'Z' ? opts[i][k] + 32 : opts[i][k]);
    lower[k] = 0;
    char name[80];
    snprintf(name, sizeof name, "opt.%s", lower);
    long long want = t_option_get(env);
    CHECKF((long long)fig(name) == want, "%s = %zu, hak_option_get(%s) = %lld", name, fig(name), env, want);
    snprintf(name, sizeof name, "opt.%s", opts[i]);
    CHECKF((long long)fig(name) == want, "%s = %zu, want %lld", name, fig(name), want);
  }
  printf("  version %s, %zu classes, opt.decommit_delay_ms %zu, epoch %llu\n", v, fig("class.count"),
         fig("opt.decommit_delay_ms"), (unsigned long long)e2);
}

/* The snapshot: figures stay as they were until epoch is written. */
static void test_snapshot(void) {
  ht_begin("the stats.* names read the snapshot of the last epoch write");
  refresh();
  size_t a0 = fig("stats.allocated");
  void* p = t_malloc(4000);
  REQUIRE(p != NULL);
  CHECKF(fig("stats.allocated") == a0, "without a refresh: %zu, want %zu", fig("stats.allocated"), a0);
  refresh();
  size_t a1 = fig("stats.allocated");
  CHECKF(a1 >= a0 + 4000, "after a refresh: %zu, want at least %zu + 4000", a1, a0);
  t_free(p);
}

#define NSMALL 3000
#define NMED 300
#define NLARGE 4
static void test_follow(void) {
  ht_begin("stats.allocated follows malloc and free (small, medium, large)");
  static void* sm[NSMALL];
  static void* md[NMED];
  static void* lg[NLARGE];
  size_t c48 = class_of(48), c1000 = class_of(1000), c20k = class_of(20000);
  check_order("start");
  refresh();
  size_t a0 = fig("stats.allocated"), l48 = cls_fig(c48, "live_blocks"), l20k = cls_fig(c20k, "live_blocks");
  size_t n48 = cls_fig(c48, "nmalloc"), large0 = fig("stats.large.live_blocks"), la0 = fig("stats.large.allocated");
  size_t tol = pslot_slack();
  size_t want = 0, want_large = 0;
  for (size_t i = 0; i < NSMALL; i++) {
    sm[i] = t_malloc(i % 2 ? 48 : 1000);
    REQUIRE(sm[i] != NULL);
    want += t_malloc_usable_size(sm[i]);
  }
  for (size_t i = 0; i < NMED; i++) {
    md[i] = t_malloc(20000);
    REQUIRE(md[i] != NULL);
    want += t_malloc_usable_size(md[i]);
  }
  for (size_t i = 0; i < NLARGE; i++) {
    lg[i] = t_malloc((i + 1) * HT_MiB + 100);
    REQUIRE(lg[i] != NULL);
    want_large += t_malloc_usable_size(lg[i]);
  }
  want += want_large;
  refresh();
  size_t a1 = fig("stats.allocated");
  printf("  allocated %zu -> %zu (+%zu; usable sizes +%zu)\n", a0, a1, a1 - a0, want);
  CHECKF(a1 - a0 == want, "allocated grew by %zu, the blocks' usable sizes add up to %zu", a1 - a0, want);
  CHECKF(BETWEEN(cls_fig(c48, "live_blocks"), l48 + NSMALL / 2 - tol, l48 + NSMALL / 2), "class %zu (48 B) live %zu -> %zu", c48, l48,
         cls_fig(c48, "live_blocks"));
  CHECKF(BETWEEN(cls_fig(c48, "nmalloc"), n48 + NSMALL / 2 - tol, n48 + NSMALL / 2), "class %zu nmalloc %zu -> %zu", c48, n48, cls_fig(c48, "nmalloc"));
  CHECKF(BETWEEN(cls_fig(c20k, "live_blocks"), l20k + NMED - tol, l20k + NMED), "class %zu (20000 B) live %zu -> %zu", c20k, l20k,
         cls_fig(c20k, "live_blocks"));
  CHECKF(cls_fig(c1000, "slabs") >= 1 && cls_fig(c1000, "pages") >= cls_fig(c1000, "slabs"), "class %zu: %zu slabs, %zu pages",
         c1000, cls_fig(c1000, "slabs"), cls_fig(c1000, "pages"));
  CHECKF(BETWEEN(fig("stats.large.live_blocks"), large0 + NLARGE, large0 + NLARGE + tol), "large live %zu -> %zu", large0, fig("stats.large.live_blocks"));
  CHECKF(BETWEEN(fig("stats.large.allocated"), la0 + want_large, la0 + want_large + tol * 20480), "large allocated %zu -> %zu, want +%zu", la0,
         fig("stats.large.allocated"), want_large);
  CHECKF(fig("stats.large.mapped") >= fig("stats.large.allocated"), "large mapped %zu < allocated %zu",
         fig("stats.large.mapped"), fig("stats.large.allocated"));
  /* the sum of the classes is the small part */
  size_t sum = 0, k = fig("class.count");
  for (size_t c = 0; c < k; c++) sum += cls_fig(c, "live_blocks") * cls_fig(c, "size");
  /* (secure build: a block counts its request, which its class's size bounds) */
  CHECKF(secure_build() ? sum >= fig("stats.small.allocated") : sum == fig("stats.small.allocated"),
         "classes' live bytes %zu, stats.small.allocated %zu", sum, fig("stats.small.allocated"));
  CHECKF(fig("stats.small.allocated") + fig("stats.large.allocated") + fig("stats.sampled.bytes") + fig("stats.guard.bytes") == a1,
         "small + large + sampled + guarded != allocated");
  check_order("allocated");
  /* a realloc that grows a large block in place counts its new size */
  size_t u = t_malloc_usable_size(lg[0]), la1 = fig("stats.large.allocated");
  lg[0] = t_realloc(lg[0], u + 300 * HT_KiB);
  REQUIRE(lg[0] != NULL);
  refresh();
  CHECKF(fig("stats.large.allocated") == la1 - u + t_malloc_usable_size(lg[0]),
         "after realloc to %zu: large allocated %zu", t_malloc_usable_size(lg[0]), fig("stats.large.allocated"));
  for (size_t i = 0; i < NSMALL; i++) t_free(sm[i]);
  for (size_t i = 0; i < NMED; i++) t_free(md[i]);
  for (size_t i = 0; i < NLARGE; i++) t_free(lg[i]);
  refresh();
  size_t a2 = fig("stats.allocated");
  printf("  after the frees: allocated %zu\n", a2);
  CHECKF(a2 == a0, "allocated %zu after the frees, %zu before the mallocs", a2, a0);
  CHECKF(fig("stats.large.live_blocks") == large0, "large live %zu, want %zu", fig("stats.large.live_blocks"), large0);
  CHECKF(cls_fig(c48, "live_blocks") == l48, "class %zu live %zu, want %zu", c48, cls_fig(c48, "live_blocks"), l48);
  check_order("freed");
  /* an alignment above 2 MiB: a mapping of its own, counted like any large block */
  void* h = t_aligned_alloc(8 * HT_MiB, 100000);
  REQUIRE(h != NULL);
  refresh();
  CHECKF(fig("stats.large.live_blocks") == large0 + 1 && fig("stats.allocated") == a0 + t_malloc_usable_size(h),
         "8 MiB-aligned block: large live %zu, allocated %zu (want %zu + %zu)", fig("stats.large.live_blocks"),
         fig("stats.allocated"), a0, t_malloc_usable_size(h));
  t_free(h);
  refresh();
  CHECKF(fig("stats.large.live_blocks") == large0 && fig("stats.allocated") == a0,
         "8 MiB-aligned block freed: large live %zu, allocated %zu", fig("stats.large.live_blocks"), fig("stats.allocated"));
  t_collect();
  check_order("collected");
}

/* Blocks freed by another thread leave the figure at once (the remote
 * list's count); blocks of a thread that exited still count. */
#define NREMOTE 2000
static void* remote_blocks[NREMOTE];
static void* alloc_thread(void* arg) {
  if (arg == NULL)
    for (size_t i = 0; i < NREMOTE; i++) remote_blocks[i] = t_malloc(64);
  return NULL;
}
static void test_threads(void) {
  ht_begin("threads: remote frees and exited threads' blocks");
  /* a first thread, so that what the C library allocates for one (its
   * thread vector, kept with the cached stack) is there before a0 */
  pthread_t t;
  static int warm;
  REQUIRE(pthread_create(&t, NULL, alloc_thread, &warm) == 0);
  pthread_join(t, NULL);
  refresh();
  size_t a0 = fig("stats.allocated");
  REQUIRE(pthread_create(&t, NULL, alloc_thread, NULL) == 0);
  pthread_join(t, NULL);
  size_t want = 0;
  for (size_t i = 0; i < NREMOTE; i++) {
    REQUIRE(remote_blocks[i] != NULL);
    want += t_malloc_usable_size(remote_blocks[i]);
  }
  refresh();
  size_t a1 = fig("stats.allocated");
  CHECKF(a1 - a0 == want, "after an exited thread's mallocs: +%zu, want +%zu", a1 - a0, want);
  for (size_t i = 0; i < NREMOTE / 2; i++) t_free(remote_blocks[i]);
  refresh();
  size_t a2 = fig("stats.allocated");
  CHECKF(a1 - a2 == want / 2, "after freeing half: -%zu, want -%zu", a1 - a2, want / 2);
  for (size_t i = NREMOTE / 2; i < NREMOTE; i++) t_free(remote_blocks[i]);
  refresh();
  CHECKF(fig("stats.allocated") == a0, "after freeing all: %zu, want %zu", fig("stats.allocated"), a0);
  printf("  %d blocks of an exited thread: +%zu, freed here: back to %zu\n", NREMOTE, a1 - a0, fig("stats.allocated"));
  check_order("threads");
  /* a fork child (of a process with threads: the figures' locks are
   * the fork handlers') asks too */
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    uint64_t e = 0, one = 1;
    size_t a = 0, len = sizeof e;
    int ok = t_ctl("epoch", &e, &len, &one, sizeof one) == 0 && e >= 2;
    len = sizeof a;
    ok = ok && t_ctl("stats.allocated", &a, &len, NULL, 0) == 0 && a > 0;
    _exit(ok ? 0 : 3);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child: status %d", st);
}

static void test_malloc_info(void) {
  ht_begin("malloc_info and mallopt");
  char* buf = NULL;
  size_t n = 0;
  FILE* f = open_memstream(&buf, &n);
  REQUIRE(f != NULL);
  CHECK(t_malloc_info(1, f) == EINVAL);
  CHECK(t_malloc_info(0, f) == 0);
  fclose(f);
  CHECKF(buf != NULL && strncmp(buf, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n", 43) == 0, "starts: %.60s",
         buf ? buf : "");
  CHECKF(buf != NULL && n > 12 && strcmp(buf + n - 10, "</malloc>\n") == 0, "ends: %s", buf ? buf + (n > 20 ? n - 20 : 0) : "");
  CHECK(buf != NULL && strstr(buf, "<total type=\"mmap\" count=\"") != NULL);
  free(buf);
  size_t lean = fig("opt.lean_target_mb");
  /* every parameter of glibc's <malloc.h> is accepted; values glibc refuses are refused */
  static const int params[] = {M_MXFAST, M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD, M_MMAP_MAX,
                               M_CHECK_ACTION, M_PERTURB, M_ARENA_TEST, M_ARENA_MAX};
  static const int values[] = {64, 128 * 1024, 0, 128 * 1024, 65536, 3, 0, 8, 8};
  for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
    CHECKF(t_mallopt(params[i], values[i]) == 1, "mallopt(%d, %d) = %d", params[i], values[i], t_mallopt(params[i], values[i]));
  CHECK(t_mallopt(M_MXFAST, 1000) == 0);
  CHECK(t_mallopt(M_MMAP_THRESHOLD, 64 << 20) == 0);
  CHECK(t_mallopt(12345, 1) == 1);
  /* the two with a hakmem meaning (unless the environment set them) */
  CHECK(t_mallopt(M_TRIM_THRESHOLD, 5 * 1024 * 1024 + 1) == 1);
  CHECK(t_mallopt(M_CHECK_ACTION, 1) == 1);
  if (getenv("HAKMEM_LEAN_TARGET_MB") == NULL)
    CHECKF(fig("opt.lean_target_mb") == 6, "M_TRIM_THRESHOLD 5 MiB + 1: opt.lean_target_mb %zu", fig("opt.lean_target_mb"));
  else
    CHECKF(fig("opt.lean_target_mb") == lean, "the environment's HAKMEM_LEAN_TARGET_MB was changed");
  if (getenv("HAKMEM_INVALID_FREE") == NULL)
    CHECKF(fig("opt.invalid_free") == 1, "M_CHECK_ACTION 1: opt.invalid_free %zu (want 1, warn)", fig("opt.invalid_free"));
  CHECK(t_mallopt(M_CHECK_ACTION, 0) == 1);
  if (getenv("HAKMEM_INVALID_FREE") == NULL) CHECK(fig("opt.invalid_free") == 2);
  CHECK(t_mallopt(M_CHECK_ACTION, 3) == 1);
  if (getenv("HAKMEM_INVALID_FREE") == NULL) CHECK(fig("opt.invalid_free") == 0);
  CHECK(t_mallopt(M_TRIM_THRESHOLD, lean << 20 > INT32_MAX ? -1 : (int)(lean << 20)) == 1);
  CHECKF(fig("opt.lean_target_mb") == lean || lean << 20 > INT32_MAX, "opt.lean_target_mb %zu, want %zu back",
         fig("opt.lean_target_mb"), lean);
  printf("  lean target %zu MiB, invalid_free %zu (restored)\n", fig("opt.lean_target_mb"), fig("opt.invalid_free"));
}

/* malloc_info and the ctl figures of one moment (no allocation between). */
static int mode_xml(const char* path) {
  FILE* f = fopen(path, "w");
  REQUIRE(f != NULL);
  fputs("", f);
  void* keep[64];
  for (size_t i = 0; i < 64; i++) keep[i] = t_malloc(i < 60 ? 24 + 40 * i : (i - 59) * HT_MiB);
  for (size_t i = 0; i < 64; i += 3) t_free(keep[i]), keep[i] = NULL;
  static const char* const names[] = {"stats.allocated", "stats.active", "stats.mapped", "stats.retained",
                                      "stats.peak_mapped", "stats.small.free_bytes", "stats.small.free_blocks",
                                      "stats.large.live_blocks", "stats.large.mapped", "class.count"};
  size_t v[sizeof names / sizeof names[0]];
  printf("start\n");
  fflush(stdout);
  refresh();
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) v[i] = fig(names[i]);
  size_t k = fig("class.count"), sizes[64], freeb[64];
  for (size_t c = 0; c < k && c < 64; c++) sizes[c] = cls_fig(c, "size"), freeb[c] = cls_fig(c, "free_blocks");
  int rc = t_malloc_info(0, f);
  fclose(f);
  CHECK(rc == 0);
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) printf("ctl %s %zu\n", names[i], v[i]);
  for (size_t c = 0; c < k && c < 64; c++) printf("class %zu %zu %zu\n", c, sizes[c], freeb[c]);
  for (size_t i = 0; i < 64; i++) t_free(keep[i]);
  return ht_done("test-ctl xml");
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* mode = argc > 1 ? argv[1] : "api";
  bool require = argc > 2 && strcmp(argv[2], "--require-hakmem") == 0;
  if (!ht_has_hakmem()) {
    printf("test-ctl: hakmem is not loaded%s\n", require ? " (required)" : "; nothing to check");
    return require ? 1 : 0;
  }
  printf("test-ctl %s (%s names)\n", mode, T_NAMES);
  if (strcmp(mode, "xml") == 0 && argc > 2) return mode_xml(argv[2]);
  if (strcmp(mode, "api") != 0) {
    fprintf(stderr, "usage: test-ctl api [--require-hakmem] | xml PATH\n");
    return 2;
  }
  test_names();
  test_snapshot();
  test_follow();
  test_threads();
  test_malloc_info();
  return ht_done("test-ctl");
}
