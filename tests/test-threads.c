/* Multi-threaded tests.
 *
 *   stress [THREADS ROUNDS SCALE]  deterministic stress in the style of
 *        mimalloc's test-stress: threads allocate blocks whose every word
 *        holds a cookie derived from the block address, keep some, free
 *        some, and swap others through a shared transfer array, so that
 *        blocks are verified and freed by other threads (also after their
 *        allocating thread has exited: threads are recreated every round).
 *   churn [THREADS BATCH]  create and join many short-lived threads (BATCH at
 *        a time) that allocate, free, and leave blocks for main to free;
 *        RSS (and hakmem's mapped bytes) after the churn must stay within a
 *        bound of the values measured after the first 1000 threads.
 *   bounded [THREADS ROUNDS SCALE]  the stress rounds, with the live bytes
 *        counted: the RSS after every round, and hakmem's mapped bytes at
 *        the end, must stay within a bound of the peak live bytes (memory of
 *        exited threads and of remotely freed blocks is reused or returned).
 *   handoff [THREADS]  short threads one after another, each freeing the
 *        blocks the previous one left and leaving its own: memory must not
 *        grow after the first 1000 threads.
 *   reuse  a thread fills slabs and exits, main frees all but one of its
 *        blocks: the next thread that allocates that class gets the freed
 *        blocks' memory back (its blocks lie in the exited thread's
 *        segments) and hakmem maps nothing new.
 *   successor  as reuse, but main (with room of its own) needs a new slab
 *        between the exit and the new thread: the exited thread's segment
 *        still goes to the new thread, and hakmem maps nothing new.
 *   idle [ROUNDS]  main allocates, two workers free its blocks while main
 *        makes no call: main's emptied slabs go back to the pool all the
 *        same, and the blocks it kept keep their bytes (run_idle).
 *   idle-race [ROUNDS]  the same while main wakes at any moment; the
 *        blocks it keeps are checked (run_idle_race).
 *   park-race [ROUNDS]  as idle-race, with the slabs main's heap gives
 *        while it sleeps (park.c) counted: main wakes at any moment.
 *   park-signal  a thread asleep in a signal handler keeps its slabs, and
 *        gives them once asleep outside it (run_park_signal).
 *   park-reuse  blocks a sleeping thread freed serve a new thread, in its
 *        pages, without a new mapping (run_park_reuse).
 *   phases [KEEP]  4 threads move through four size bands together, each
 *        band's blocks freed (KEEP: a fifth kept) before the next: with
 *        HT_PEAK_MB, the peak RSS must stay under it (run_phases).
 *   join  remote frees into a slab whose owner still has free blocks of it:
 *        after a collect, every freed block comes back once, no live one.
 *   scavenge [THREADS]  blocks of 512 B - 4 KiB filled, 90 % freed (also
 *        by other threads), malloc_trim gives the free pages of the sparse
 *        slabs back; survivors keep their words, refilled blocks (taken back
 *        from those pages) never overlap.
 *   moves [THREADS]  large blocks grow by realloc (and move), shrink, are
 *        aligned or zeroed, in every thread while others map segments: no
 *        block may stop being hakmem's ($HT_MOVES_ITERS rounds a thread).
 *   turns [THREADS]  threads take turns (each hands the turn to the next)
 *        building and freeing a working set, then main joins them: glibc
 *        frees their TLS inside pthread_join holding its stack cache lock,
 *        and a free there must not start hakmem's background thread
 *        (pthread_create takes that lock: the program hung; signals are
 *        blocked there, so the case script's timeout kills it).
 *   fork [FORKS]  fork() while other threads allocate; each child allocates,
 *        frees (also inherited blocks of other threads), starts a thread,
 *        and exits 0.  A deadlock fails through alarm().
 *
 * Sizes are smaller under ThreadSanitizer (see tests/cases/core_threads_tsan.sh). */
#include "hak_test.h"
#include "stats_report.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define HT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HT_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define HT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HT_ASAN 1
#endif
#endif

static _Atomic long failures;
static void fail(const char* fmt, ...) {
  long n = atomic_fetch_add(&failures, 1);
  if (n >= 20) return;
  va_list ap;
  va_start(ap, fmt);
  printf("  FAILED ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
}

/* ---- cookie blocks ----------------------------------------------------- */
static const uint64_t COOKIE = 0xbf58476d1ce4e5b9ull;

/* Bytes requested and not yet freed, and their peak (the bounded mode's
 * reference: memory must follow the live data). */
static _Atomic long live_bytes, live_peak;
static void live_add(long n) {
  long now = atomic_fetch_add_explicit(&live_bytes, n, memory_order_relaxed) + n;
  long peak = atomic_load_explicit(&live_peak, memory_order_relaxed);
  while (now > peak && !atomic_compare_exchange_weak(&live_peak, &peak, now)) {}
}

static uint64_t* alloc_items(size_t items, ht_rng_t* r) {
  if (items == 0) items = 1;
  if (items <= 1000 && ht_below(r, 100) == 0) items *= 40;  /* medium */
  if (ht_below(r, 10000) == 0) items = 300000 + items; /* large, ~2.4 MiB */
  /* mostly malloc; also calloc and aligned blocks, which other threads free */
  uint64_t* p;
  uint64_t how = ht_below(r, 16);
  if (how == 0) {
    p = (uint64_t*)t_calloc(items, sizeof(uint64_t));
    if (p != NULL && ht_first_nonzero(p, items * 8) != SIZE_MAX)
      fail("calloc(%zu, 8) block not zero", items);
  } else if (how == 1) {
    void* q = NULL;
    size_t a = (size_t)64 << ht_below(r, 7);  /* 64 .. 4096 */
    if (t_posix_memalign(&q, a, items * sizeof(uint64_t)) != 0) q = NULL;
    if (q != NULL && !ht_aligned(q, a)) fail("posix_memalign(%zu) = %p misaligned", a, q);
    p = (uint64_t*)q;
  } else {
    p = (uint64_t*)t_malloc(items * sizeof(uint64_t));
  }
  if (p == NULL) { fail("allocation of %zu bytes = NULL", items * 8); abort(); }
  uint64_t cookie = (uint64_t)(uintptr_t)p ^ COOKIE;
  for (size_t i = 0; i < items; i++) p[i] = (items - i) ^ cookie;
  live_add((long)(items * 8));
  return p;
}

static size_t check_items(const uint64_t* p, const char* where) {
  if (p == NULL) return 0;
  uint64_t cookie = (uint64_t)(uintptr_t)p ^ COOKIE;
  size_t items = (size_t)(p[0] ^ cookie);
  if (items == 0 || items > (64u << 20)) {
    fail("%s: block %p header damaged (items %zu)", where, (const void*)p, items);
    return 0;
  }
  for (size_t i = 0; i < items; i++) {
    if ((p[i] ^ cookie) != items - i) {
      fail("%s: block %p of %zu words damaged at word %zu", where, (const void*)p, items, i);
      return 0;
    }
  }
  return items;
}

/* Grow (or shrink) a block with realloc, possibly on another thread than
 * the one that allocated it: the old words must survive, then the block is
 * re-stamped with the cookie of its new address. */
static uint64_t* realloc_items(uint64_t* p, ht_rng_t* r) {
  size_t items = check_items(p, "before realloc");
  if (items == 0) return p;
  uint64_t old_cookie = (uint64_t)(uintptr_t)p ^ COOKIE;
  size_t n = (items > 2048 || ht_below(r, 4) == 0) ? items / 2 + 1 : items * 2 + ht_below(r, 16);
  uint64_t* q = (uint64_t*)t_realloc(p, n * sizeof(uint64_t));
  if (q == NULL) { fail("realloc(%zu) = NULL", n * 8); abort(); }
  size_t keep = n < items ? n : items;
  for (size_t i = 0; i < keep; i++)
    if ((q[i] ^ old_cookie) != items - i) {
      fail("realloc %zu -> %zu words lost word %zu", items, n, i);
      break;
    }
  uint64_t cookie = (uint64_t)(uintptr_t)q ^ COOKIE;
  for (size_t i = 0; i < n; i++) q[i] = (n - i) ^ cookie;
  live_add(((long)n - (long)items) * 8);
  return q;
}

static void free_items(uint64_t* p, const char* where) {
  if (p == NULL) return;
  live_add(-(long)(check_items(p, where) * 8));
  t_free(p);
}

/* A figure of a new hakmem_ctl snapshot (a walk of every heap's slabs). */
static size_t ctl_snapshot(const char* name) {
  size_t v = ht_ctl_figure(name);
  if (v == (size_t)-1) fail("hakmem_ctl %s", name);
  return v;
}

/* ---- stress ------------------------------------------------------------ */
#define TRANSFERS 1000
static _Atomic(uint64_t*) transfer[TRANSFERS];
static FILE* devnull;
/* one step in this many calls malloc_trim/mallinfo2/hak_os_stats/
 * hakmem_stats_print/hakmem_ctl ($HT_INTROSPECT_EVERY, default 20000) */
static uint64_t introspect_every = 20000;
static int st_scale, st_round;
static size_t st_rss_max, st_mapped_max;   /* sampled after every round */
static size_t st_huge_at_max;             /* AnonHugePages (KiB) when the RSS peaked */
static size_t mapped_now(void);

static void* stress_thread(void* arg) {
  uintptr_t tid = (uintptr_t)arg;
  ht_rng_t r = {((uint64_t)st_round << 32) ^ tid ^ 0x1234};
  size_t data_size = 0, data_top = 0, retain_size = 0, retain_top = 0;
  uint64_t** data = NULL;
  uint64_t** retained = NULL;
  long steps = (long)st_scale * 100;
  for (long s = 0; s < steps; s++) {
    if (ht_below(&r, introspect_every) == 0) {
      /* introspection and trimming while other threads allocate */
      switch (ht_below(&r, 5)) {
        case 0: t_malloc_trim(0); break;
        case 1: { struct mallinfo2 mi = t_mallinfo2(); (void)mi; break; }
        case 2: if (ht_has_hakmem()) { hak_os_stats_t st; t_os_stats(&st); } break;
        case 3:
          /* the figures on request: a new snapshot walks every heap's slabs
           * while their owners allocate (the walk under TSan) */
          if (ht_has_hakmem()) {
            (void)ctl_snapshot("stats.small.free_blocks");
            (void)ctl_snapshot("stats.class.3.live_blocks");
          }
          break;
        default:
          if (ht_has_hakmem() && devnull != NULL) t_stats_print(devnull);
          break;
      }
    }
    uint64_t x = ht_below(&r, 100);
    if (x < 35) {
      if (data_top >= data_size) {
        data_size += 1000;
        data = (uint64_t**)t_realloc(data, data_size * sizeof(*data));
        if (!data) { fail("realloc of the data array failed"); abort(); }
      }
      data[data_top++] = alloc_items(1 + ht_below(&r, 32), &r);
    } else if (x < 45) {
      if (retain_top >= retain_size) {
        retain_size += 1000;
        retained = (uint64_t**)t_realloc(retained, retain_size * sizeof(*retained));
        if (!retained) { fail("realloc of the retained array failed"); abort(); }
      }
      retained[retain_top++] = alloc_items(1 + ht_below(&r, 16), &r);
    } else if (x < 70 && data_top > 0) {
      size_t i = ht_below(&r, data_top);
      free_items(data[i], "local free");
      data[i] = data[--data_top];
    } else if (data_top > 0) {
      /* swap one of ours through the transfer array; what comes back was
       * most likely allocated by another (possibly exited) thread */
      size_t i = ht_below(&r, data_top);
      size_t t = ht_below(&r, TRANSFERS);
      uint64_t* got = atomic_exchange_explicit(&transfer[t], data[i], memory_order_acq_rel);
      if (got != NULL && ht_below(&r, 2) == 0) {
        free_items(got, "cross-thread free");
        data[i] = data[--data_top];
      } else {
        if (got != NULL && ht_below(&r, 4) == 0) got = realloc_items(got, &r);  /* cross-thread realloc */
        else check_items(got, "received block");
        data[i] = got;
        if (got == NULL) data[i] = data[--data_top];
      }
    }
  }
  for (size_t i = 0; i < retain_top; i++) free_items(retained[i], "retained free");
  for (size_t i = 0; i < data_top; i++) free_items(data[i], "final free");
  t_free(retained);
  t_free(data);
  return NULL;
}

static int run_stress(int threads, int rounds, int scale) {
  printf("stress: %d threads x %d rounds, scale %d (blocks verified by cookie, swapped "
         "through %d transfer slots)\n", threads, rounds, scale, TRANSFERS);
  st_scale = scale;
  devnull = fopen("/dev/null", "w");
  introspect_every = ht_env_u64("HT_INTROSPECT_EVERY", 20000);
  if (introspect_every == 0) introspect_every = 1;
  pthread_t* th = (pthread_t*)calloc((size_t)threads, sizeof(pthread_t));
  size_t freed_by_main = 0;
  for (int round = 0; round < rounds; round++) {
    st_round = round;
    for (int t = 0; t < threads; t++)
      if (pthread_create(&th[t], NULL, stress_thread, (void*)(uintptr_t)(t + 1)) != 0) {
        fail("pthread_create");
        return 1;
      }
    for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
    /* main frees a share of the blocks whose threads have exited */
    ht_rng_t r = {(uint64_t)round};
    for (int i = 0; i < TRANSFERS; i++) {
      if (ht_below(&r, 4) != 0) continue;
      uint64_t* p = atomic_exchange(&transfer[i], NULL);
      if (p) { free_items(p, "main free of an exited thread's block"); freed_by_main++; }
    }
    size_t rss = ht_rss(), mapped = mapped_now();
    if (rss > st_rss_max) st_rss_max = rss, st_huge_at_max = ht_anon_huge_kb();
    if (mapped > st_mapped_max) st_mapped_max = mapped;
  }
  for (int i = 0; i < TRANSFERS; i++) {
    uint64_t* p = atomic_exchange(&transfer[i], NULL);
    if (p) { free_items(p, "final transfer free"); freed_by_main++; }
  }
  free(th);
  printf("  main freed %zu blocks of exited threads\n", freed_by_main);
  return 0;
}

/* ---- churn ------------------------------------------------------------- */
#define LEFT 2
typedef struct { uint64_t* left[LEFT]; uint64_t seed; } churn_arg_t;

/* A thread-specific value whose destructor allocates and frees: it runs
 * after hakmem's own thread-exit handler (hakmem's key is older), so the
 * allocator must cope with a thread that allocates again after it "ended". */
static pthread_key_t churn_key;
static _Atomic long late_dtor_runs;
static void churn_key_dtor(void* v) {
  free_items((uint64_t*)v, "thread-exit destructor free");
  ht_rng_t r = {(uint64_t)(uintptr_t)v};
  uint64_t* a = alloc_items(1 + ht_below(&r, 100), &r);
  void* m = t_malloc(100000);
  if (m == NULL) fail("malloc in a thread-exit destructor failed");
  else memset(m, 7, 100000);
  free_items(a, "thread-exit destructor free");
  t_free(m);
  atomic_fetch_add_explicit(&late_dtor_runs, 1, memory_order_relaxed);
}

static void* churn_thread(void* arg) {
  churn_arg_t* a = (churn_arg_t*)arg;
  ht_rng_t r = {a->seed};
  uint64_t* blk[24];
  for (int i = 0; i < 24; i++) blk[i] = alloc_items(1 + ht_below(&r, 64), &r);
  if (ht_below(&r, 16) == 0) {  /* now and then a medium block and a calloc */
    void* m = t_malloc(40000);
    void* c = t_calloc(1, 3000);
    if (!m || !c) fail("churn: allocation failed");
    if (c && ht_first_nonzero(c, 3000) != SIZE_MAX) fail("churn: calloc not zero");
    t_free(m);
    t_free(c);
  }
  for (int i = LEFT; i < 24; i++) free_items(blk[i], "churn free");
  for (int i = 0; i < LEFT; i++) a->left[i] = blk[i];
  if (ht_below(&r, 4) == 0) pthread_setspecific(churn_key, alloc_items(8, &r));
  return NULL;
}

/* hakmem's mappings but the page-slot pools' segments (sampled and guarded
 * blocks: a first sample or guarded block maps one at a moment of its own;
 * the profiler's tables, mapped at the first sample, stay in). */
static size_t mapped_now(void) {
  if (!ht_has_hakmem()) return 0;
  hak_os_stats_t st;
  t_os_stats(&st);
  size_t pools = ht_ctl_figure("stats.sampled.segments") + ht_ctl_figure("stats.guard.segments");
  return st.mapped_bytes - (pools < 64 ? pools : 0) * ((size_t)4 << 20);
}

static int run_churn(long total, int batch) {
  printf("churn: %ld threads, %d at a time, each leaving %d blocks for main to free; a quarter "
         "allocate again in a thread-exit destructor\n", total, batch, LEFT);
  pthread_key_create(&churn_key, churn_key_dtor);
  churn_arg_t* args = (churn_arg_t*)calloc((size_t)batch, sizeof(churn_arg_t));
  pthread_t* th = (pthread_t*)calloc((size_t)batch, sizeof(pthread_t));
  size_t rss_base = 0, mapped_base = 0, rss_peak = 0;
  long base_at = total < 2000 ? total / 2 : 1000;
  for (long done = 0; done < total;) {
    int n = (int)(total - done < batch ? total - done : batch);
    for (int i = 0; i < n; i++) {
      args[i].seed = (uint64_t)(done + i) * 0x9E3779B97F4A7C15ull;
      if (pthread_create(&th[i], NULL, churn_thread, &args[i]) != 0) {
        fail("pthread_create failed after %ld threads", done);
        return 1;
      }
    }
    for (int i = 0; i < n; i++) {
      pthread_join(th[i], NULL);
      for (int k = 0; k < LEFT; k++) free_items(args[i].left[k], "main free of a churn block");
    }
    done += n;
    if (done == base_at || (done > base_at && done - n < base_at)) {
      rss_base = ht_rss();
      mapped_base = mapped_now();
    }
    if (done % 10000 < (long)batch) {
      size_t rss = ht_rss();
      if (rss > rss_peak) rss_peak = rss;
    }
  }
  size_t rss_end = ht_rss(), mapped_end = mapped_now();
  free(args);
  free(th);
  printf("  %ld thread-exit destructors allocated after the thread's end\n",
         atomic_load(&late_dtor_runs));
  if (atomic_load(&late_dtor_runs) == 0) fail("no thread-exit destructor ran");
  printf("  RSS after %ld threads %zu KiB, at the end %zu KiB (peak sampled %zu KiB)\n", base_at,
         rss_base >> 10, rss_end >> 10, rss_peak >> 10);
#if defined(HT_TSAN) || defined(HT_ASAN)
  printf("  (sanitizer build: RSS bound not checked)\n");
#else
  size_t bound = rss_base + 32 * HT_MiB;
  if (rss_end > bound || rss_peak > bound)
    fail("RSS grew from %zu KiB to %zu KiB (peak %zu KiB) over the thread churn (bound +32 MiB)",
         rss_base >> 10, rss_end >> 10, rss_peak >> 10);
#endif
  if (ht_has_hakmem()) {
    printf("  hakmem mapped after %ld threads %zu KiB, at the end %zu KiB\n", base_at,
           mapped_base >> 10, mapped_end >> 10);
    if (mapped_end > mapped_base + 64 * HT_MiB)
      fail("hakmem mapped bytes grew from %zu KiB to %zu KiB over the thread churn "
           "(memory of exited threads not reused?)", mapped_base >> 10, mapped_end >> 10);
  }
  return 0;
}


/* ---- bounded ----------------------------------------------------------- */
static void* bounded_last(void* arg) {   /* a later thread: its exit is a slow path like any */
  t_free(t_malloc(64));
  return arg;
}

static int run_bounded(int threads, int rounds, int scale) {
  run_stress(threads, rounds, scale);
  /* the end of the run: every block freed; the frees into exited threads'
   * slabs are collected by the next slow path or thread exit (DESIGN.md,
   * "the clock of abandoned segments", at most once a millisecond) */
  usleep(5000);
  pthread_t th;
  pthread_create(&th, NULL, bounded_last, NULL);
  pthread_join(th, NULL);
  size_t peak = (size_t)atomic_load(&live_peak), mapped_end = mapped_now();
  printf("bounded: peak live %zu KiB; after each round at most: RSS %zu KiB (huge pages %zu KiB), hakmem mapped "
         "%zu KiB; mapped at the end %zu KiB\n", peak >> 10, st_rss_max >> 10, st_huge_at_max, st_mapped_max >> 10,
         mapped_end >> 10);
  if (atomic_load(&live_bytes) != 0) fail("live byte count is %ld after every block was freed", atomic_load(&live_bytes));
  /* mapped at the end: the bound (2x peak live + 64 MiB); between
   * rounds, exited threads' segments that still hold handed-on blocks wait
   * for the next round's threads, so only the RSS is bounded there */
  if (ht_has_hakmem() && mapped_end > 2 * peak + 64 * HT_MiB)
    fail("hakmem mapped %zu KiB at the end, above 2 x peak live + 64 MiB (%zu KiB)", mapped_end >> 10,
         (2 * peak + 64 * HT_MiB) >> 10);
#if defined(HT_TSAN) || defined(HT_ASAN)
  printf("  (sanitizer build: RSS bound not checked)\n");
#else
  /* RSS: 2x + 24 MiB (the program, the libraries, empty pages not yet past their delay) */
  if (st_rss_max > 2 * peak + 24 * HT_MiB)
    fail("RSS %zu KiB, above 2 x peak live + 24 MiB (%zu KiB)", st_rss_max >> 10, (2 * peak + 24 * HT_MiB) >> 10);
#endif
  return 0;
}

/* ---- handoff ----------------------------------------------------------- */
#define HANDOFF 300
static uint64_t* handoff_slot[HANDOFF];
static void* handoff_thread(void* arg) {
  ht_rng_t r = {(uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull};
  for (int i = 0; i < HANDOFF; i++) {   /* free what the previous thread left, leave ours */
    free_items(handoff_slot[i], "free of the previous thread's block");
    handoff_slot[i] = alloc_items(1 + ht_below(&r, 128), &r);
  }
  return NULL;
}

static int run_handoff(long total) {
  printf("handoff: %ld threads one after another, each freeing the %d blocks the previous one left\n", total,
         HANDOFF);
  size_t rss_base = 0, mapped_base = 0, rss_max = 0, mapped_max = 0;
  long base_at = total < 2000 ? total / 2 : 1000;
  for (long t = 0; t < total; t++) {
    pthread_t th;
    if (pthread_create(&th, NULL, handoff_thread, (void*)(uintptr_t)(t + 1)) != 0) {
      fail("pthread_create failed after %ld threads", t);
      return 1;
    }
    pthread_join(th, NULL);
    if (t + 1 == base_at) {
      rss_base = ht_rss();
      mapped_base = mapped_now();
    } else if (t + 1 > base_at && (t + 1) % 100 == 0) {
      size_t rss = ht_rss(), mapped = mapped_now();
      if (rss > rss_max) rss_max = rss;
      if (mapped > mapped_max) mapped_max = mapped;
    }
  }
  for (int i = 0; i < HANDOFF; i++) free_items(handoff_slot[i], "final free");
  printf("  after %ld threads: RSS %zu KiB, mapped %zu KiB; later at most RSS %zu KiB, mapped %zu KiB\n", base_at,
         rss_base >> 10, mapped_base >> 10, rss_max >> 10, mapped_max >> 10);
#if !defined(HT_TSAN) && !defined(HT_ASAN)
  if (rss_max > rss_base + 16 * HT_MiB) fail("RSS grew by more than 16 MiB over the hand-offs");
#endif
  if (ht_has_hakmem() && mapped_max > mapped_base + 16 * HT_MiB)
    fail("hakmem mapped bytes grew by more than 16 MiB over the hand-offs");
  return 0;
}

/* ---- reuse ------------------------------------------------------------- */
#define REUSE_N 2000
#define REUSE_SIZE 256
static void* reuse_blocks[REUSE_N];
static void* reuse_fill(void* arg) {
  void** out = arg;
  for (int i = 0; i < REUSE_N; i++) {
    out[i] = t_malloc(REUSE_SIZE);
    if (out[i] == NULL) { fail("malloc(%d) failed", REUSE_SIZE); abort(); }
    memset(out[i], 0x5A, REUSE_SIZE);
  }
  return NULL;
}

static int run_reuse(void) {
  printf("reuse: a thread allocates %d blocks of %d B and exits; main frees all but the first; a new thread "
         "allocates %d more\n", REUSE_N, REUSE_SIZE, REUSE_N);
  if (!ht_has_hakmem()) {
    printf("  (not hakmem: skipped)\n");
    return 0;
  }
  pthread_t th;
  pthread_create(&th, NULL, reuse_fill, reuse_blocks);
  pthread_join(th, NULL);
  for (int i = 1; i < REUSE_N; i++) t_free(reuse_blocks[i]);   /* remote frees into an exited thread's slabs */
  /* (small segments, not mapped bytes: the first heap-profile sample maps
   * the profiler's tables, 1 MiB, and fell between the counts in a CI run) */
  size_t mapped_before = mapped_now(), segs_before = ht_ctl_figure("stats.small.segments");
  static void* again[REUSE_N];
  pthread_create(&th, NULL, reuse_fill, again);
  pthread_join(th, NULL);
  size_t mapped_after = mapped_now(), segs_after = ht_ctl_figure("stats.small.segments");
  const uintptr_t seg = (uintptr_t)4 << 20;   /* hakmem's SuperSlab size */
  int inside = 0;
  for (int i = 0; i < REUSE_N; i++) {
    bool hit = false;
    for (int k = 0; k < REUSE_N && !hit; k += 64)   /* the first thread's segments (sampled) */
      hit = ((uintptr_t)again[i] & ~(seg - 1)) == ((uintptr_t)reuse_blocks[k] & ~(seg - 1));
    inside += hit;
  }
  printf("  %d of %d new blocks lie in the exited thread's segments; small segments %zu -> %zu, mapped %zu -> %zu KiB\n",
         inside, REUSE_N, segs_before, segs_after, mapped_before >> 10, mapped_after >> 10);
  if (inside < REUSE_N * 9 / 10) fail("only %d of %d blocks reused the exited thread's memory", inside, REUSE_N);
  if (segs_after > segs_before) fail("hakmem mapped new segments instead of reusing the exited thread's");
  t_free(reuse_blocks[0]);
  for (int i = 0; i < REUSE_N; i++) t_free(again[i]);
  return 0;
}

/* ---- join --------------------------------------------------------------- */
/* Remote frees into a slab whose owner still has free blocks of it: the
 * owner takes the remote list with its count and joins it to its own list
 * (slab.c, _hak_slab_collect; a refill, which finds its own list empty, takes it
 * without the walk).  Main allocates JOIN_N blocks of one size, frees every
 * tenth itself, a second thread frees every other one, main collects
 * (malloc_trim) and allocates again: every freed block comes back exactly
 * once, no block still in use is handed out, and the kept blocks keep their
 * bytes. */
#define JOIN_N 600
#define JOIN_SIZE 40
static unsigned char* join_blocks[JOIN_N];
static void* join_free_even(void* arg) {
  (void)arg;
  for (int i = 0; i < JOIN_N; i += 2) t_free(join_blocks[i]);
  return NULL;
}
static bool join_freed(int i) { return i % 2 == 0 || i % 10 == 1; }
static int run_join(void) {
  printf("join: %d blocks of %d B; main frees every tenth, a thread every other one; main collects and allocates "
         "them again\n", JOIN_N, JOIN_SIZE);
  if (!ht_has_hakmem()) {
    printf("  (not hakmem: skipped)\n");
    return 0;
  }
  for (int i = 0; i < JOIN_N; i++) {
    join_blocks[i] = t_malloc(JOIN_SIZE);
    if (join_blocks[i] == NULL) { fail("malloc(%d) failed", JOIN_SIZE); return 0; }
    memset(join_blocks[i], i & 0xFF, JOIN_SIZE);
  }
  int nfreed = 0;
  for (int i = 1; i < JOIN_N; i += 10) t_free(join_blocks[i]), nfreed++;   /* the owner's own list */
  pthread_t th;
  pthread_create(&th, NULL, join_free_even, NULL);   /* the remote list */
  pthread_join(th, NULL);
  nfreed += JOIN_N / 2;
  t_malloc_trim(0);   /* takes the remote list while the owner's is not empty */
  static unsigned char* again[JOIN_N + 400];
  static bool seen[JOIN_N];
  int got = 0, n = 0;
  while (got < nfreed && n < JOIN_N + 400) {
    unsigned char* q = again[n++] = t_malloc(JOIN_SIZE);
    if (q == NULL) { fail("malloc(%d) failed", JOIN_SIZE); break; }
    for (int i = 0; i < JOIN_N; i++) {
      if (q != join_blocks[i]) continue;
      if (!join_freed(i)) fail("malloc returned block %d, which is still in use", i);
      else if (seen[i]) fail("malloc returned freed block %d twice", i);
      else seen[i] = true, got++;
    }
  }
  printf("  %d of %d freed blocks back in %d mallocs\n", got, nfreed, n);
  if (got < nfreed) fail("only %d of the %d freed blocks came back in %d mallocs", got, nfreed, n);
  for (int i = 0; i < JOIN_N; i++) {
    if (join_freed(i)) continue;
    for (int k = 0; k < JOIN_SIZE; k++)
      if (join_blocks[i][k] != (i & 0xFF)) { fail("kept block %d changed at byte %d", i, k); break; }
    t_free(join_blocks[i]);
  }
  for (int i = 0; i < n; i++) t_free(again[i]);
  return 0;
}

/* ---- successor ---------------------------------------------------------- */
/* A worker fills slabs and exits with one block still live (its segment is
 * abandoned, not emptied); then main, which has segments of its own with
 * untouched room, needs a slab of a class it has none of; then a new worker
 * allocates what the first one did.  The new worker, not main, must get the
 * exited thread's segment: had main taken it, the newcomer would map a fresh
 * segment while main sat on the adopted one's resident free pages. */
static void* successor_blocks[REUSE_N];
static int run_successor(void) {
  printf("successor: a thread allocates %d blocks of %d B and exits, leaving one; main allocates a block of a "
         "new class; a new thread allocates %d blocks of %d B\n", REUSE_N, REUSE_SIZE, REUSE_N, REUSE_SIZE);
  if (!ht_has_hakmem()) {
    printf("  (not hakmem: skipped)\n");
    return 0;
  }
  void* mine = t_malloc(100);   /* main has a segment, most of it never touched */
  pthread_t th;
  pthread_create(&th, NULL, reuse_fill, reuse_blocks);
  pthread_join(th, NULL);
  for (int i = 1; i < REUSE_N; i++) t_free(reuse_blocks[i]);
  size_t mapped_before = mapped_now(), segs_before = ht_ctl_figure("stats.small.segments");
  void* other = t_malloc(3000);   /* a class main has no slab of */
  pthread_create(&th, NULL, reuse_fill, successor_blocks);
  pthread_join(th, NULL);
  size_t mapped_after = mapped_now(), segs_after = ht_ctl_figure("stats.small.segments");
  const uintptr_t seg = (uintptr_t)4 << 20;
  int inside = 0;
  for (int i = 0; i < REUSE_N; i++)
    inside += ((uintptr_t)successor_blocks[i] & ~(seg - 1)) == ((uintptr_t)reuse_blocks[0] & ~(seg - 1));
  bool main_there = ((uintptr_t)other & ~(seg - 1)) == ((uintptr_t)reuse_blocks[0] & ~(seg - 1));
  printf("  %d of %d of the new thread's blocks lie in the exited thread's segment; main's new block %s; "
         "mapped %zu -> %zu KiB\n", inside, REUSE_N, main_there ? "too" : "in its own", mapped_before >> 10,
         mapped_after >> 10);
  if (inside < REUSE_N * 9 / 10) fail("only %d of %d blocks went to the exited thread's segment", inside, REUSE_N);
  if (segs_after > segs_before) fail("hakmem mapped a new segment for the exited thread's successor (%zu -> %zu)", segs_before, segs_after);
  t_free(reuse_blocks[0]);
  for (int i = 0; i < REUSE_N; i++) t_free(successor_blocks[i]);
  t_free(other);
  t_free(mine);
  return 0;
}

/* ---- share --------------------------------------------------------------- */
/* Pages belong to the process (src/pool.c): a thread fills 16 MiB of 256 B
 * blocks and frees them but one block in every fourth 64 KiB page, so its
 * segments keep live slabs and cannot go to the segment cache; it stays
 * alive.  A second thread then allocates 8 MiB of blocks of another size:
 * they must go into the first thread's free pages, with no new mapping and
 * no mapped byte more.  (With pages owned per heap the second thread mapped
 * 8 MiB of new segments.) */
#define SHARE_BYTES (16 << 20)
#define SHARE_SIZE 256
static void** share_blocks;
static pthread_barrier_t share_bar;
static void* share_first(void* arg) {
  (void)arg;
  size_t n = SHARE_BYTES / SHARE_SIZE;
  uintptr_t kept_page = 0;
  for (size_t i = 0; i < n; i++) {
    share_blocks[i] = t_malloc(SHARE_SIZE);
    if (share_blocks[i] == NULL) { fail("share: out of memory"); break; }
    memset(share_blocks[i], 0x5A, SHARE_SIZE);
  }
  for (size_t i = 0; i < n; i++) {
    uintptr_t page = (uintptr_t)share_blocks[i] >> 16;
    if (page % 4 == 0 && page != kept_page) {   /* keep the first block of every fourth page */
      kept_page = page;
      continue;
    }
    t_free(share_blocks[i]);
    share_blocks[i] = NULL;
  }
  pthread_barrier_wait(&share_bar);   /* the second thread allocates */
  pthread_barrier_wait(&share_bar);   /* ... and is done */
  for (size_t i = 0; i < n; i++) {
    if (share_blocks[i] == NULL) continue;
    for (int k = 0; k < SHARE_SIZE; k++)
      if (((unsigned char*)share_blocks[i])[k] != 0x5A) { fail("share: kept block %zu changed", i); break; }
    t_free(share_blocks[i]);
  }
  return NULL;
}
static void* share_second(void* arg) {
  size_t* out = arg;   /* [0] mmap calls, [1] mapped bytes: before; [2], [3]: after */
  pthread_barrier_wait(&share_bar);
  hak_os_stats_t st;
  t_os_stats(&st);
  out[0] = st.mmap_calls;
  out[1] = st.mapped_bytes;
  size_t n = (SHARE_BYTES / 2) / 1000;
  void** v = calloc(n, sizeof *v);
  for (size_t i = 0; i < n; i++) {
    v[i] = t_malloc(1000);
    if (v[i] == NULL) { fail("share: out of memory"); break; }
    memset(v[i], 0xA5, 1000);
  }
  t_os_stats(&st);
  out[2] = st.mmap_calls;
  out[3] = st.mapped_bytes;
  for (size_t i = 0; i < n; i++) t_free(v[i]);
  free(v);
  pthread_barrier_wait(&share_bar);
  return NULL;
}
static int run_share(void) {
  printf("share: a live thread frees 3/4 of 16 MiB of %d B blocks (every fourth page keeps one); another "
         "thread allocates 8 MiB of 1000 B blocks\n", SHARE_SIZE);
  if (!ht_has_hakmem()) {
    printf("  (not hakmem: skipped)\n");
    return 0;
  }
  share_blocks = calloc(SHARE_BYTES / SHARE_SIZE, sizeof *share_blocks);
  size_t out[4] = {0};
  pthread_barrier_init(&share_bar, NULL, 2);
  pthread_t a, b;
  pthread_create(&a, NULL, share_first, NULL);
  pthread_create(&b, NULL, share_second, out);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  pthread_barrier_destroy(&share_bar);
  free(share_blocks);
  printf("  second thread: %zu mmap calls, mapped %zu -> %zu KiB\n", out[2] - out[0], out[1] >> 10, out[3] >> 10);
  if (out[2] != out[0]) fail("the second thread mapped memory (%zu calls) beside the first one's free pages", out[2] - out[0]);
  if (out[3] > out[1]) fail("mapped bytes grew from %zu to %zu KiB", out[1] >> 10, out[3] >> 10);
  return 0;
}

/* ---- reserve ------------------------------------------------------------- */
/* A heap's reserve follows its reuse: a thread touches 40 size classes (each
 * keeps its emptied slab as its current one), then for some decommit delays
 * allocates only 256-byte blocks, with refills (4 slabs a round).  The 39
 * classes it stopped using must give their slabs back to the pool: the
 * pages in slabs fall to the few the live class uses.  Run with a short
 * HAKMEM_DECOMMIT_DELAY_MS (the case uses 100) and HAKMEM_BACKGROUND=0. */
static int run_reserve(void) {
  printf("reserve: 40 classes touched and left, then 256 B blocks only, for 8 decommit delays\n");
  if (!ht_has_hakmem()) {
    printf("  (not hakmem: skipped)\n");
    return 0;
  }
  void* v[1024];
  for (size_t c = 0; c < 40; c++) {
    size_t sz = 16 + c * 700;   /* 16 B .. 27 KiB: about 40 classes */
    for (int i = 0; i < 8; i++) v[i] = t_malloc(sz);
    for (int i = 0; i < 8; i++) t_free(v[i]);
  }
  size_t before = ctl_snapshot("stats.small.active");
  uint64_t delay = ht_env_u64("HAKMEM_DECOMMIT_DELAY_MS", 2000);
  uint64_t t0 = ht_now_ms();
  while (ht_now_ms() - t0 < 8 * delay) {
    for (int i = 0; i < 1024; i++) v[i] = t_malloc(256);
    for (int i = 0; i < 1024; i++) t_free(v[i]);
  }
  size_t after = ctl_snapshot("stats.small.active");
  printf("  pages in slabs: %zu KiB after the 40 classes, %zu KiB after %llu ms of 256 B blocks\n", before >> 10,
         after >> 10, (unsigned long long)(8 * delay));
  if (before < ((size_t)16 << 16)) fail("only %zu KiB in slabs after 40 classes: the setup did not work", before >> 10);
  if (after > ((size_t)8 << 16)) fail("%zu KiB still in slabs: the classes left kept their slabs", after >> 10);
  return 0;
}

/* ---- idle ---------------------------------------------------------------- */
/* A thread that stops calling malloc while others free its blocks (a main
 * thread that built the data and waits for its workers) must not keep that
 * memory: its emptied slabs go back to the pool, taken by whichever thread
 * runs the release clock (src/heap.c, idle heaps), and serve the others.
 * Each round main allocates IDLE_N blocks of 16 B - 1 KiB (many slabs of
 * each class), keeps the first eighth with a pattern, hands the rest to two
 * workers, which free them and then allocate and free blocks of their own
 * (their slow paths run the clock) while main sleeps without a malloc; the
 * pages in slabs must then fall below what main's handed blocks took.  Main
 * then wakes and allocates and frees in the same classes (its lists must be
 * whole), and checks the kept blocks: a slab with a live block taken from
 * it would have its pages handed to a worker and the pattern written over.
 * Run with a short HAKMEM_DECOMMIT_DELAY_MS (the case uses 100) and
 * HAKMEM_BACKGROUND=0; bounds on pages, not times. */
#define IDLE_N 16384
static void* idle_blocks[IDLE_N];
static _Atomic int idle_go, idle_done;
static void ht_sleep_ms(unsigned ms) { usleep(ms * 1000u); }
static void* idle_worker(void* arg) {
  int id = (int)(intptr_t)arg, round = 0;
  void* v[512];
  for (;;) {
    while (atomic_load(&idle_go) <= round) {
      if (atomic_load(&idle_go) < 0) return NULL;
      ht_sleep_ms(1);
    }
    round++;
    for (int i = id; i < IDLE_N; i += 2)
      if (i >= IDLE_N / 8) t_free(idle_blocks[i]);
    uint64_t delay = ht_env_u64("HAKMEM_DECOMMIT_DELAY_MS", 2000), t0 = ht_now_ms();
    while (ht_now_ms() - t0 < 3 * delay) {   /* the release clock runs on these slow paths */
      for (int i = 0; i < 512; i++) v[i] = t_malloc(64 + (size_t)(i % 7) * 300);
      for (int i = 0; i < 512; i++) t_free(v[i]);
      ht_sleep_ms(1);
    }
    atomic_fetch_add(&idle_done, 1);
  }
}
static int run_idle(int rounds) {
  printf("idle: %d rounds of %d blocks made by main and freed by 2 workers while main sleeps\n", rounds, IDLE_N);
  if (!ht_has_hakmem()) {
    printf("  (not hakmem: skipped)\n");
    return 0;
  }
  pthread_t w[2];
  for (int i = 0; i < 2; i++) pthread_create(&w[i], NULL, idle_worker, (void*)(intptr_t)i);
  for (int round = 0; round < rounds; round++) {
    size_t base = ctl_snapshot("stats.small.active");
    size_t bytes = 0;
    for (int i = 0; i < IDLE_N; i++) {
      size_t sz = 16 + (size_t)((i * 7919) % 1009);
      idle_blocks[i] = t_malloc(sz);
      if (i >= IDLE_N / 8) bytes += sz;
      else memset(idle_blocks[i], (int)(i & 0xff), 16);
    }
    size_t full = ctl_snapshot("stats.small.active");
    atomic_store(&idle_done, 0);
    atomic_store(&idle_go, round + 1);
    while (atomic_load(&idle_done) < 2) ht_sleep_ms(5);   /* no malloc here: main is idle */
    size_t after = ctl_snapshot("stats.small.active");
    printf("  round %d: %zu KiB in slabs before, %zu KiB with main's blocks (%zu KiB handed out), %zu KiB after the workers freed them\n",
           round, base >> 10, full >> 10, bytes >> 10, after >> 10);
    /* main keeps an eighth of its blocks and the workers' own few slabs
     * stay: what is left of main's slabs must be about what the kept blocks
     * hold, not what the freed ones did */
    if (after > base + (full - base) / 2) fail("round %d: %zu KiB still in slabs: main's emptied slabs were kept", round, after >> 10);
    for (int k = 0; k < 4; k++) {   /* main's own slow paths again, over the same classes */
      void* v[256];
      for (int i = 0; i < 256; i++) v[i] = t_malloc(16 + (size_t)((i * 31 + k) % 1009));
      for (int i = 0; i < 256; i++) t_free(v[i]);
    }
    for (int i = 0; i < IDLE_N / 8; i++) {
      unsigned char* b = idle_blocks[i];
      for (int j = 0; j < 16; j++)
        if (b[j] != (unsigned char)(i & 0xff)) {
          fail("round %d: block %d kept by main was written over (byte %d)", round, i, j);
          break;
        }
      t_free(b);
    }
  }
  atomic_store(&idle_go, -1);
  for (int i = 0; i < 2; i++) pthread_join(w[i], NULL);
  return 0;
}

/* idle-race: the same taking while the owner wakes up at any moment: main
 * allocates batches, keeps a sixteenth (blocks of 1-2 KiB whose words hold
 * their address), hands the rest (16 B - 1 KiB) to two workers through a
 * ring, and sleeps 0-15 ms between batches (each eighth batch is eight
 * times larger, and main sleeps until a slab of its is taken), so that the release clock (every eighth
 * of a delay, and before a worker maps a segment) finds it idle now and
 * then, in the middle of its workers' frees.  Every kept block is checked
 * before it is freed; the debug library checks each slab's list at its
 * refills.  Run with HAKMEM_DECOMMIT_DELAY_MS=100 and HAKMEM_BACKGROUND=0. */
#define RACE_RING 8192
static _Atomic(uint64_t*) race_ring[RACE_RING];
static _Atomic int race_stop;
static void* race_worker(void* arg) {
  uint64_t r = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull + 7;
  void* v[512];   /* enough to refill: the workers' slow paths run the release clock */
  while (!atomic_load(&race_stop)) {
    for (int i = 0; i < RACE_RING; i++) {
      uint64_t* p = atomic_exchange(&race_ring[i], NULL);
      if (p != NULL) t_free(p);
    }
    for (int i = 0; i < 512; i++) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      v[i] = t_malloc(16 + (size_t)(r >> 53));
    }
    for (int i = 0; i < 512; i++) t_free(v[i]);
  }
  for (int i = 0; i < RACE_RING; i++) {
    uint64_t* p = atomic_exchange(&race_ring[i], NULL);
    if (p != NULL) t_free(p);
  }
  return NULL;
}
static const char* race_counter = "stats.threads.idle_slabs";   /* park-race: park_slabs */
static uint64_t ctl_u64(const char* name) {
  uint64_t v = 0, epoch = 1;
  size_t vl = sizeof v;
  if (!ht_has_hakmem()) return 0;
  t_ctl("epoch", NULL, NULL, &epoch, sizeof epoch);
  t_ctl(name, &v, &vl, NULL, 0);
  return v;
}
static uint64_t idle_taken(void) { return ctl_u64(race_counter); }
static int run_idle_race(int rounds) {
  printf("%s: %d batches made by main, freed by 2 workers, main sleeping between them\n",
         strcmp(race_counter, "stats.threads.idle_slabs") == 0 ? "idle-race" : "park-race", rounds);
  pthread_t w[2];
  atomic_store(&race_stop, 0);
  for (int i = 0; i < 2; i++) pthread_create(&w[i], NULL, race_worker, (void*)(intptr_t)(i + 1));
  enum { KEEP = 512 };
  static uint64_t* kept[KEEP];
  uint64_t r = 12345;
  size_t nkept = 0, slot = 0, checked = 0;
  for (int round = 0; round < rounds; round++) {
    int batch = round % 8 == 7 ? 16384 : 2048;   /* several slabs a class before a long sleep */
    for (int i = 0; i < batch; i++) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      /* handed blocks 16 B .. 1 KiB; kept ones above, in slabs of their
       * own, so that the handed ones' slabs empty */
      size_t words = i % 16 == 0 ? 130 + (size_t)(r >> 57) : 2 + (size_t)(r >> 57);
      uint64_t* p = t_malloc(words * 8);
      if (p == NULL) {
        fail("malloc failed");
        break;
      }
      if (i % 16 == 0) {
        for (size_t k = 0; k < words; k++) p[k] = (uint64_t)(uintptr_t)p ^ k;
        p[0] = words;
        size_t j = (size_t)(r >> 20) % KEEP;
        if (kept[j] != NULL) {   /* the one it replaces: still whole? */
          uint64_t* q = kept[j];
          for (size_t k = 1; k < q[0]; k++)
            if (q[k] != ((uint64_t)(uintptr_t)q ^ k)) {
              fail("round %d: a kept block was written over", round);
              break;
            }
          t_free(q);
          checked++;
        } else {
          nkept++;
        }
        kept[j] = p;
        continue;
      }
      while (atomic_load(&race_ring[slot]) != NULL) ht_sleep_ms(1);   /* the workers are behind */
      atomic_store(&race_ring[slot], p);
      slot = (slot + 1) % RACE_RING;
    }
    /* idle: no malloc or free at all, 0-15 ms, and after a large batch
     * until the clock took one of main's slabs (it must find main idle at
     * two looks in a row; hakmem_ctl is no slow path of main's), at most
     * 500 ms */
    if (round % 8 != 7) {
      ht_sleep_ms((unsigned)(r >> 60));
    } else {
      uint64_t t0 = ht_now_ms(), before = idle_taken();
      while (idle_taken() == before && ht_now_ms() - t0 < 500) ht_sleep_ms(5);
    }
  }
  atomic_store(&race_stop, 1);
  for (int i = 0; i < 2; i++) pthread_join(w[i], NULL);
  for (size_t j = 0; j < KEEP; j++)
    if (kept[j] != NULL) {
      t_free(kept[j]);
      kept[j] = NULL;
    }
  uint64_t taken = idle_taken();
  if (ht_has_hakmem() && taken == 0)
    fail("no slab was taken from main while it slept: the test did not test");
  printf("  %zu kept blocks checked and freed; %llu slabs taken from main while it slept\n", checked, (unsigned long long)taken);
  (void)nkept;
  return 0;
}

/* park-signal: a thread asleep inside a signal handler may have been
 * stopped in the middle of a fast path; its heap must not be taken (park.c
 * tells it by its blocked signals).  A worker fills slabs, then blocks in a
 * SIGUSR1 handler while main's slow paths run the release clock for 300 ms:
 * no slab is given.  Then it sleeps outside the handler, and the same clock
 * takes its slabs (the test tests); its blocks keep their bytes. */
static sem_t sig_in, sig_out, sig_after;
/* A kept block still holds the byte it was filled with. */
static bool bytes_are(const unsigned char* b, size_t n, unsigned char v) {
  for (size_t j = 0; j < n; j++)
    if (b[j] != v) return false;
  return true;
}
static void on_usr1(int sig) {
  (void)sig;
  sem_post(&sig_in);
  while (sem_wait(&sig_out) != 0) {}
}
static void* sig_worker(void* arg) {
  unsigned char** v = arg;
  for (int i = 0; i < 4096; i++) {
    v[i] = t_malloc(16 + (size_t)(i % 61) * 16);
    memset(v[i], i & 0xff, 16);
  }
  pthread_kill(pthread_self(), SIGUSR1);   /* returns once main lets the handler go */
  sem_post(&sig_in);
  while (sem_wait(&sig_after) != 0) {}
  for (int i = 0; i < 4096; i++) {
    if (!bytes_are(v[i], 16, (unsigned char)(i & 0xff))) fail("block %d of the worker was written over", i);
    t_free(v[i]);
  }
  return NULL;
}
static void clock_run(unsigned ms) {   /* main's slow paths, for ms: the release clock's passes */
  uint64_t t0 = ht_now_ms();
  void* v[256];
  while (ht_now_ms() - t0 < ms) {
    for (int i = 0; i < 256; i++) v[i] = t_malloc(4000 + (size_t)i * 64);
    for (int i = 0; i < 256; i++) t_free(v[i]);
    ht_sleep_ms(1);
  }
}
/* park-reuse: blocks a sleeping thread freed serve another thread.  A
 * worker allocates PR_N blocks of 200 B, frees all but every sixteenth and
 * sleeps; once the kernel says it sleeps, a new thread allocates as many
 * blocks as were freed: its first refill's pass gives the worker's slabs,
 * and nine in ten of its blocks lie in the sleeping worker's slab pages,
 * with nothing new mapped.  (Main makes no allocation meanwhile: a heap
 * that needs pages may adopt a whole abandoned segment, the worker's
 * slabs of every class with it -- which made this test fail 2 runs in 10
 * on a loaded machine when main's own refills ran the passes.)  The worker
 * wakes, checks the bytes of the blocks it kept and frees them (into slabs
 * another heap owns now). */
#define PR_N 20000
static unsigned char* pr_blocks[PR_N];
static void* pr_again[PR_N];
static sem_t pr_slept, pr_wake;
static _Atomic int pr_tid;
static bool thread_sleeps(int tid) {   /* its /proc state is S (read without allocating) */
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  const char* c = strrchr(buf, ')');   /* the name may hold spaces and parentheses */
  return c != NULL && c[1] == ' ' && c[2] == 'S';
}
static void* pr_sleeper(void* arg) {
  (void)arg;
  atomic_store(&pr_tid, (int)syscall(SYS_gettid));
  for (int i = 0; i < PR_N; i++) {
    pr_blocks[i] = t_malloc(200);
    memset(pr_blocks[i], i & 0xff, 200);
  }
  for (int i = 0; i < PR_N; i++)
    if (i % 16 != 0) t_free(pr_blocks[i]);
  sem_post(&pr_slept);
  while (sem_wait(&pr_wake) != 0) {}
  for (int i = 0; i < PR_N; i += 16) {
    if (!bytes_are(pr_blocks[i], 200, (unsigned char)(i & 0xff))) fail("block %d the sleeping thread kept was written over", i);
    t_free(pr_blocks[i]);
  }
  return NULL;
}
static void* pr_taker(void* arg) {
  (void)arg;
  for (int i = 0; i < PR_N - PR_N / 16; i++) pr_again[i] = t_malloc(200);
  return NULL;
}
static int cmp_uptr(const void* a, const void* b) {
  uintptr_t x = *(const uintptr_t*)a, y = *(const uintptr_t*)b;
  return x < y ? -1 : x > y;
}
static int run_park_reuse(void) {
  printf("park-reuse: a thread frees 15 of 16 blocks and sleeps; its slabs serve a new thread\n");
  if (!ht_has_hakmem()) {
    printf("  (not hakmem: skipped)\n");
    return 0;
  }
  sem_init(&pr_slept, 0, 0);
  sem_init(&pr_wake, 0, 0);
  pthread_t a, b;
  pthread_create(&a, NULL, pr_sleeper, NULL);
  while (sem_wait(&pr_slept) != 0) {}
  for (uint64_t t0 = ht_now_ms(); !thread_sleeps(atomic_load(&pr_tid)) && ht_now_ms() - t0 < 5000;) ht_sleep_ms(1);
  uint64_t before = ctl_u64("stats.threads.park_slabs");
  /* (slab segments: the profiler's tables are mapped at the first sample) */
  size_t mapped_before = mapped_now(), segs_before = ht_ctl_figure("stats.small.segments");
  pthread_create(&b, NULL, pr_taker, NULL);
  pthread_join(b, NULL);
  size_t mapped_after = mapped_now(), segs_after = ht_ctl_figure("stats.small.segments");
  uint64_t given = ctl_u64("stats.threads.park_slabs") - before;
  static uintptr_t pages[PR_N];   /* the sleeping thread's 4 KiB pages */
  for (int i = 0; i < PR_N; i++) pages[i] = (uintptr_t)pr_blocks[i] >> 12;
  qsort(pages, PR_N, sizeof pages[0], cmp_uptr);
  int inside = 0, n = PR_N - PR_N / 16;
  for (int i = 0; i < n; i++) {
    uintptr_t pg = (uintptr_t)pr_again[i] >> 12;
    inside += bsearch(&pg, pages, PR_N, sizeof pages[0], cmp_uptr) != NULL;
  }
  printf("  %llu slabs given by the sleeping thread; %d of %d new blocks in its pages; mapped %zu -> %zu KiB\n",
         (unsigned long long)given, inside, n, mapped_before >> 10, mapped_after >> 10);
  if (given == 0) fail("the sleeping thread gave no slab");
  if (inside < n * 9 / 10) fail("only %d of %d blocks reused the sleeping thread's pages", inside, n);
  if (segs_after > segs_before) fail("hakmem mapped a new segment instead of reusing the sleeping thread's (%zu -> %zu)", segs_before, segs_after);
  sem_post(&pr_wake);
  pthread_join(a, NULL);
  for (int i = 0; i < n; i++) t_free(pr_again[i]);
  return 0;
}

static int run_park_signal(void) {
  printf("park-signal: a worker asleep in a signal handler keeps its slabs; asleep outside it, gives them\n");
  if (!ht_has_hakmem()) {
    printf("  (not hakmem: skipped)\n");
    return 0;
  }
  static unsigned char* v[4096];
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
  sem_init(&sig_in, 0, 0);
  sem_init(&sig_out, 0, 0);
  sem_init(&sig_after, 0, 0);
  pthread_t w;
  pthread_create(&w, NULL, sig_worker, v);
  while (sem_wait(&sig_in) != 0) {}
  uint64_t before = ctl_u64("stats.threads.park_slabs");
  clock_run(300);
  uint64_t during = ctl_u64("stats.threads.park_slabs");
  sem_post(&sig_out);
  while (sem_wait(&sig_in) != 0) {}   /* out of the handler, about to sleep */
  clock_run(300);
  uint64_t after = ctl_u64("stats.threads.park_slabs");
  sem_post(&sig_after);
  pthread_join(w, NULL);
  printf("  slabs given: %llu while it slept in the handler, %llu after\n", (unsigned long long)(during - before),
         (unsigned long long)(after - during));
  if (during != before) fail("slabs were taken from a thread asleep in a signal handler");
  if (after == during) fail("no slab was taken from the worker asleep outside the handler: the test did not test");
  return 0;
}

/* ---- burst --------------------------------------------------------------- */
/* After a burst the memory goes back without malloc_trim and without another
 * allocation: 4 threads allocate 256 MiB each (small, medium and large
 * blocks, every byte written), free it all and exit; main then waits two
 * decommit delays, doing nothing, and its RSS must be within 10 % + 2 MiB of
 * what it was before the burst (the background thread, src/background.c,
 * runs the release clock while the program idles).  Run with a short
 * HAKMEM_DECOMMIT_DELAY_MS (the case uses 400). */
#define BURST_BYTES ((size_t)256 << 20)
static void* burst_thread(void* arg) {
  uint64_t r = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
  size_t cap = 32768, n = 0, total = 0;
  void** v = calloc(cap, sizeof *v);
  while (total < BURST_BYTES && n < cap) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    size_t sz = n % 64 == 63 ? (128 << 10) + r % (896 << 10)   /* large: 128 KiB - 1 MiB */
              : n % 8 == 7   ? 1024 + r % (127 << 10)           /* medium */
                             : 16 + r % 1009;                   /* small */
    v[n] = t_malloc(sz);
    if (v[n] == NULL) { fail("burst: out of memory"); break; }
    memset(v[n], (int)(n & 0xFF), sz);
    total += sz;
    n++;
  }
  for (size_t i = 0; i < n; i++) t_free(v[i]);
  free(v);
  return NULL;
}
/* phases [KEEP]: 4 threads move together through four size bands (16 B -
 * 1 KiB, 1 - 16 KiB, 16 - 128 KiB, 128 KiB - 1 MiB), three rounds; in each
 * phase the threads hold about 78 MB at its end, verify their blocks and
 * free them (KEEP: one in five kept over two phases).  Each band's pages are
 * empty while the next band needs new ones: the shape that a container's
 * limit kills.  HT_PEAK_MB: the peak RSS (VmHWM) must stay under it. */
#define PHASE_LIVE ((size_t)78 << 20)
static int phases_keep;
static void* phases_thread(void* arg) {
  static const size_t band[4][2] = {{16, 1024}, {1024, 16384}, {16384, 131072}, {131072, 1048576}};
  uint64_t seed = (uintptr_t)arg * 0x9E3779B97F4A7C15ull | 1;
  size_t cap = 1 << 18, nk = 0;
  unsigned char** blk = malloc(cap * sizeof *blk);
  unsigned char** kept = malloc(cap * sizeof *kept);
  for (int round = 0; round < 3; round++)
    for (int ph = 0; ph < 4; ph++) {
      size_t held = 0, n = 0;
      while (held < PHASE_LIVE / 4 && n < cap) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        size_t sz = band[ph][0] + seed % (band[ph][1] - band[ph][0]);
        unsigned char* p = t_malloc(sz);
        if (p == NULL) {
          CHECKF(0, "phases: malloc(%zu) failed", sz);
          break;
        }
        memset(p, (int)(sz & 0xff), sz);
        p[0] = (unsigned char)(sz >> 8), p[sz - 1] = (unsigned char)(sz >> 16);
        ((size_t*)(void*)p)[0] = sz;   /* (>= 16 bytes) */
        blk[n++] = p;
        held += sz;
      }
      for (size_t i = 0; i < n; i++) {
        size_t sz = ((size_t*)(void*)blk[i])[0];
        if (blk[i][sz - 1] != (unsigned char)(sz >> 16) || blk[i][sz / 2] != (unsigned char)(sz & 0xff))
          CHECKF(0, "phases: a block of %zu B changed", sz);
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        if (phases_keep && seed % 5 == 0 && nk < cap) kept[nk++] = blk[i];
        else t_free(blk[i]);
      }
      size_t old = nk / 2;   /* kept blocks live two phases */
      for (size_t i = 0; i < old; i++) t_free(kept[i]);
      memmove(kept, kept + old, (nk - old) * sizeof *kept);
      nk -= old;
    }
  for (size_t i = 0; i < nk; i++) t_free(kept[i]);
  free(blk);
  free(kept);
  return NULL;
}
static int run_phases(int keep) {
  phases_keep = keep;
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, phases_thread, (void*)(uintptr_t)(i + 1));
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  size_t peak = ht_proc_kb("/proc/self/status", "VmHWM: %zu"), bound = (size_t)ht_env_u64("HT_PEAK_MB", 0) << 10;
  printf("phases (keep %d): peak RSS %zu KiB%s\n", keep, peak, bound ? "" : " (no bound)");
  if (bound) CHECKF(peak <= bound, "peak RSS %zu KiB, over %zu KiB", peak, bound);
  return 0;
}

static int run_burst(void) {
  long delay = (long)ht_env_u64("HAKMEM_DECOMMIT_DELAY_MS", 2000);
  printf("burst: 4 threads allocate and free %zu MiB each; then %ld ms (two decommit delays) idle\n",
         BURST_BYTES >> 20, 2 * delay);
  if (!ht_has_hakmem()) {
    printf("  (not hakmem: skipped)\n");
    return 0;
  }
  void* warm = t_malloc(100);   /* the main thread's heap exists before the baseline */
  size_t before = ht_rss();
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, burst_thread, (void*)(uintptr_t)(i + 1));
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  size_t right_after = ht_rss();
  struct timespec ts = {(time_t)(2 * delay / 1000), (long)(2 * delay % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {}
  size_t after = ht_rss();
  printf("  RSS before %zu KiB, right after the frees %zu KiB, two delays later %zu KiB\n", before >> 10,
         right_after >> 10, after >> 10);
  if (after > before + before / 10 + 2 * HT_MiB)
    fail("RSS %zu KiB two decommit delays after the burst, above %zu KiB + 10 %% + 2 MiB", after >> 10, before >> 10);
  t_free(warm);
  return 0;
}

/* ---- scavenge ----------------------------------------------------------- */
/* Scavenging (src/scavenge.c): the free 4 KiB pages inside sparse slabs are
 * given back while other threads free blocks of those slabs, and the blocks
 * on them are taken back when the slabs fill again.  Each thread fills
 * blocks of 512 B - 4 KiB, frees 90 % of them at random (a quarter of those
 * through other threads), calls malloc_trim (a forced pass over its heap)
 * while the others' frees arrive, checks every survivor's words, fills as
 * many again (the phantoms come back) and checks every block; blocks never
 * overlap.  At the end the stats report must show pages given back and
 * taken back (when hakmem runs with scavenging). */
static _Atomic(uint64_t*) scav_transfer[4096];
static void print_stats(FILE* f) { t_stats_print(f); }
static int cmp_ptr(const void* a, const void* b) {
  uintptr_t x = *(const uintptr_t*)a, y = *(const uintptr_t*)b;
  return x < y ? -1 : x > y;
}
static void* scavenge_thread(void* arg) {
  uintptr_t tid = (uintptr_t)arg;
  ht_rng_t r = {tid * 1234567 + 1};
#ifdef HT_TSAN
  enum { N = 3000 };
#else
  enum { N = 12000 };
#endif
  uint64_t** v = t_calloc(N, sizeof *v);
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) {
      uint64_t* p = (uint64_t*)t_malloc((64 + ht_below(&r, 449)) * 8);   /* 512 B .. 4 KiB */
      if (p == NULL) { fail("scavenge: malloc failed"); abort(); }
      uint64_t cookie = (uint64_t)(uintptr_t)p ^ COOKIE;   /* the first 64 words are stamped */
      for (size_t k = 0; k < 64; k++) p[k] = (64 - k) ^ cookie;
      v[i] = p;
    }
    for (int i = 0; i < N; i++) {
      if (ht_below(&r, 10) == 0) continue;   /* 10 % survive */
      if (ht_below(&r, 4) == 0) {   /* freed by whichever thread takes it */
        uint64_t* got = atomic_exchange(&scav_transfer[ht_below(&r, 4096)], v[i]);
        if (got != NULL && check_items(got, "scavenge: transferred block") != 0) t_free(got);
      } else {
        t_free(v[i]);
      }
      v[i] = NULL;
    }
    t_malloc_trim(0);   /* a forced pass while the others' frees arrive */
    for (int i = 0; i < N; i++) {
      if (v[i] == NULL) continue;
      if (check_items(v[i], "scavenge: survivor after the pass") == 0) {
        v[i] = NULL;
      } else if (ht_below(&r, 8) == 0) {   /* a survivor in a scavenged slab grows or shrinks */
        uint64_t* q = (uint64_t*)t_realloc(v[i], (64 + ht_below(&r, 449)) * 8);
        if (q == NULL) { fail("scavenge: realloc failed"); abort(); }
        uint64_t oc = (uint64_t)(uintptr_t)v[i] ^ COOKIE, nc = (uint64_t)(uintptr_t)q ^ COOKIE;
        for (size_t k = 0; k < 64; k++) {
          if ((q[k] ^ oc) != 64 - k) {
            fail("scavenge: realloc of %p lost word %zu", (void*)v[i], k);
            break;
          }
          q[k] = (64 - k) ^ nc;
        }
        v[i] = q;
      }
    }
    for (int i = 0; i < N; i++)   /* fill again: the slabs take their phantoms back */
      if (v[i] == NULL) {
        uint64_t* p = (uint64_t*)t_malloc((64 + ht_below(&r, 449)) * 8);
        if (p == NULL) { fail("scavenge: malloc failed"); abort(); }
        uint64_t cookie = (uint64_t)(uintptr_t)p ^ COOKIE;
        for (size_t k = 0; k < 64; k++) p[k] = (64 - k) ^ cookie;
        v[i] = p;
      }
    uintptr_t* sorted = t_malloc(N * sizeof *sorted);
    for (int i = 0; i < N; i++) sorted[i] = (uintptr_t)v[i];
    qsort(sorted, N, sizeof *sorted, cmp_ptr);
    for (int i = 0; i + 1 < N; i++)
      if (sorted[i] + t_malloc_usable_size((void*)sorted[i]) > sorted[i + 1]) {
        fail("scavenge: blocks %p and %p overlap", (void*)sorted[i], (void*)sorted[i + 1]);
        break;
      }
    t_free(sorted);
    for (int i = 0; i < N; i++) {
      if (check_items(v[i], "scavenge: block after the refill") != 0) t_free(v[i]);
      v[i] = NULL;
    }
  }
  t_free(v);
  return NULL;
}

static int run_scavenge(int threads) {
  printf("scavenge: %d threads fill blocks of 512 B - 4 KiB, free 90 %% (a quarter through other threads), "
         "malloc_trim, check (realloc some), fill again, 3 rounds; 20 forks meanwhile\n", threads);
  pthread_t th[16];
  if (threads > 16) threads = 16;
  for (int t = 0; t < threads; t++) pthread_create(&th[t], NULL, scavenge_thread, (void*)(uintptr_t)(t + 1));
  /* fork while they scavenge: each child allocates, checks and frees blocks
   * the parent's threads left in the transfer slots, and exits 0 */
  for (int f = 0; f < 20; f++) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(10);
      ht_rng_t r = {(uint64_t)f + 99};
      for (int i = 0; i < 2000; i++) t_free(t_malloc(16 + ht_below(&r, 4000)));
      long bad = 0;
      for (int i = 0; i < 4096; i += 7) {
        uint64_t* got = atomic_load(&scav_transfer[i]);
        if (got == NULL) continue;
        if (check_items(got, "scavenge: a block in the fork child") == 0) bad++;
        else t_free(got);   /* (the child's copy: a block of a heap whose thread is not in the child) */
      }
      t_malloc_trim(0);
      _exit(bad || atomic_load(&failures) ? 1 : 0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fail("scavenge: fork child %d failed (status %#x)", f, st);
    usleep(2000);
  }
  for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
  for (int i = 0; i < 4096; i++) {
    uint64_t* got = atomic_exchange(&scav_transfer[i], NULL);
    if (got != NULL && check_items(got, "scavenge: last transferred block") != 0) t_free(got);
  }
  if (ht_has_hakmem() && t_option_get("HAKMEM_SCAVENGE") && !t_option_get("HAKMEM_MESH")) {
    unsigned long long given = ht_report_u64(print_stats, "\nscavenge: ", "pages_given_back="),
                       back = ht_report_u64(print_stats, "\nscavenge: ", "readmitted_pages=");
    printf("  pages given back %llu, taken back %llu\n", given, back);
    if (given == 0) fail("scavenging gave no page back");
    if (back == 0) fail("no page given back was taken back by a refill");
  }
  return 0;
}

/* ---- moves ------------------------------------------------------------ */
/* Large blocks that grow by realloc move to other ranges (mremap, or into a
 * cached block) and give their old range up, while other threads map
 * segments: one may land on the range given up.  Every block must still be
 * hakmem's afterwards (a segment-map bit cleared after the range was given
 * up once took a new segment's bit: its frees aborted, "not allocated by
 * hakmem", in 1 of 200 runs of churn with 8 threads and 10 of 10 of this
 * test). */
static void* moves_thread(void* arg) {
  ht_rng_t r = {(uint64_t)(uintptr_t)arg};
  long iters = (long)ht_env_u64("HT_MOVES_ITERS", 1500);
  for (long i = 0; i < iters; i++) {
    size_t step = (size_t)(256 + ht_below(&r, 1024)) << 10;
    uint8_t* p = NULL;
    size_t n = 0;
    for (int k = 0; k < 4; k++) {   /* grow: the block moves */
      uint8_t* q = t_realloc(p, n + step);
      if (q == NULL) { fail("realloc(%zu) failed", n + step); abort(); }
      p = q;
      p[n] = (uint8_t)k;
      n += step;
    }
    void* small[8];   /* new small segments too, when the cache is off */
    for (int k = 0; k < 8; k++) small[k] = t_malloc(16 + ht_below(&r, 4000));
    void* big = t_malloc((size_t)(64 + ht_below(&r, 3000)) << 10);   /* a new mapping, maybe on a range given up */
    void* al = NULL;   /* aligned large blocks: up to 2 MiB in a segment, above in their own table */
    size_t align = (size_t)1 << (16 + ht_below(&r, 7));
    if (t_posix_memalign(&al, align, (size_t)(128 + ht_below(&r, 2048)) << 10) != 0 || ((uintptr_t)al & (align - 1)))
      fail("posix_memalign(%zu) failed or misaligned", align);
    uint8_t* z = t_calloc(1, (size_t)(200 + ht_below(&r, 2000)) << 10);
    if (z == NULL || z[0] != 0) fail("calloc of a large block not zero");
    p = t_realloc(p, n / (2 + ht_below(&r, 6)));   /* shrink: the tail is given up */
    if (p == NULL) { fail("shrinking realloc failed"); abort(); }
    for (int k = 0; k < 8; k++) t_free(small[k]);
    t_free(big);
    t_free(al);
    t_free(z);
    t_free(p);
  }
  return NULL;
}

static int run_moves(int threads) {
  printf("moves: %d threads growing large blocks by realloc (they move) while mapping others\n", threads);
  pthread_t th[64];
  if (threads > 64) threads = 64;
  for (int t = 0; t < threads; t++) pthread_create(&th[t], NULL, moves_thread, (void*)(uintptr_t)(t + 1));
  for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
  return 0;
}

/* ---- fork -------------------------------------------------------------- */
static atomic_bool fork_stop;
static int child_threads = 1;

static void* fork_bg_thread(void* arg) {
  uintptr_t tid = (uintptr_t)arg;
  ht_rng_t r = {tid * 77};
  uint64_t* mine[64] = {0};
  while (!atomic_load_explicit(&fork_stop, memory_order_relaxed)) {
    size_t i = ht_below(&r, 64);
    free_items(mine[i], "fork: background free");
    size_t items = 1 + ht_below(&r, 200);
    if (ht_below(&r, 500) == 0) items = 1 + ht_below(&r, 300000); /* up to 2.4 MiB */
    mine[i] = alloc_items(items, &r);
    if (ht_below(&r, 4) == 0) {
      size_t t = ht_below(&r, TRANSFERS);
      uint64_t* got = atomic_exchange(&transfer[t], mine[i]);
      mine[i] = NULL;
      free_items(got, "fork: background cross-thread free");
    }
  }
  for (int i = 0; i < 64; i++) free_items(mine[i], "fork: background final free");
  return NULL;
}

static void* child_thread(void* arg) {
  ht_rng_t* r = (ht_rng_t*)arg;
  for (int i = 0; i < 200; i++) free_items(alloc_items(1 + ht_below(r, 500), r), "child thread");
  return NULL;
}

static int child_main(int iter, uint64_t* inherited) {
  signal(SIGALRM, SIG_DFL);
  alarm(10);  /* a deadlocked child dies by SIGALRM, which the parent reports */
  ht_rng_t r = {(uint64_t)iter};
  long before = atomic_load(&failures);
  uint64_t* blk[300];
  for (int i = 0; i < 300; i++) blk[i] = alloc_items(1 + ht_below(&r, i % 50 == 0 ? 100000 : 100), &r);
  for (int i = 0; i < 300; i += 2) free_items(blk[i], "child free");
  free_items(inherited, "child free of a block the parent allocated");
  for (int k = 0; k < 20; k++) {  /* blocks of threads that do not exist in the child */
    uint64_t* p = atomic_exchange(&transfer[ht_below(&r, TRANSFERS)], NULL);
    free_items(p, "child free of another thread's block");
  }
  if (child_threads) {
    pthread_t t;
    if (pthread_create(&t, NULL, child_thread, &r) == 0) pthread_join(t, NULL);
    else fail("child: pthread_create failed");
  }
  for (int i = 1; i < 300; i += 2) free_items(blk[i], "child free");
  void* big = t_malloc(8 * HT_MiB);
  if (big == NULL) fail("child: malloc(8 MiB) failed");
  else { memset(big, 1, 8 * HT_MiB); t_free(big); }
  _exit(atomic_load(&failures) == before ? 0 : 1);
}

/* Fork handlers of the program itself that allocate.  They are registered
 * before the threads start, so hakmem's (registered with the second thread)
 * run first in prepare and last in parent and child: these mallocs and frees
 * run while hakmem's prepare handler holds every lock.  The large block and
 * the aligned one take the locked paths (a new mapping, the large tier). */
static void* atfork_block;
static void* atfork_large;
static void user_prepare(void) {
  atfork_block = t_malloc(3000);
  if (atfork_block) memset(atfork_block, 3, 3000);
  atfork_large = t_malloc(3 * HT_MiB + 4096 * (size_t)(atfork_block != NULL));
  if (atfork_large) memset(atfork_large, 5, 4096);
}
static void user_parent(void) {
  t_free(atfork_block);
  t_free(atfork_large);
  void* p = t_malloc(2 * HT_MiB);
  if (p) memset(p, 6, 4096);
  t_free(p);
  atfork_block = atfork_large = NULL;
}
static void user_child(void) {
  void* p = t_malloc(5000);
  if (p) memset(p, 4, 5000);
  t_free(p);
  p = t_malloc(5 * HT_MiB);
  if (p) memset(p, 4, 4096);
  t_free(p);
  t_free(atfork_block);
  t_free(atfork_large);
  atfork_block = atfork_large = NULL;
}

static int run_fork(int forks, int bg) {
  printf("fork: %d forks while %d threads allocate and free (child: %s)\n", forks, bg,
         child_threads ? "allocates, frees inherited blocks, starts a thread; "
                                       "atfork handlers allocate"
                       : "allocates, frees inherited blocks; atfork handlers allocate");
  pthread_atfork(user_prepare, user_parent, user_child);
  pthread_t th[8];
  for (int i = 0; i < bg; i++) pthread_create(&th[i], NULL, fork_bg_thread, (void*)(uintptr_t)(i + 1));
  ht_rng_t r = {99};
  int ok = 0, bad_exit = 0;
  for (int it = 0; it < forks; it++) {
    uint64_t* inherited = alloc_items(1 + ht_below(&r, 2000), &r);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) { fail("fork failed"); break; }
    if (pid == 0) child_main(it, inherited);
    free_items(inherited, "parent free after fork");
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) { fail("waitpid"); break; }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
    else {
      if (bad_exit++ < 10) {
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
          fail("fork %d: child deadlocked (killed by its 10 s alarm)", it);
        else if (WIFSIGNALED(st))
          fail("fork %d: child killed by signal %d", it, WTERMSIG(st));
        else
          fail("fork %d: child exited with status %d", it, WEXITSTATUS(st));
      }
    }
  }
  atomic_store(&fork_stop, true);
  for (int i = 0; i < bg; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < TRANSFERS; i++) free_items(atomic_exchange(&transfer[i], NULL), "fork: final");
  printf("  %d of %d children exited 0; parent RSS %zu KiB\n", ok, forks, ht_rss() >> 10);
  if (ok != forks) fail("%d children failed", forks - ok);
  return 0;
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "  FAILED: timeout (deadlock?) -- alarm fired\n";
  ssize_t w = write(1, msg, sizeof msg - 1);
  (void)w;
  _exit(3);
}

/* ---- turns ------------------------------------------------------------- */
static sem_t* turn_sem;
static int turn_n;
static long turn_left;
static void* turns_thread(void* arg) {
  int id = (int)(intptr_t)arg;
  uint64_t rng = 0x9E3779B97F4A7C15ull * (uint64_t)(id + 1);
  static __thread char* set[400];
  for (;;) {
    while (sem_wait(&turn_sem[id]) != 0) {}
    int done = turn_left <= 0;
    if (!done) {
      turn_left--;
      for (int i = 0; i < 400; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        size_t n = 16 + (size_t)((rng >> 33) % 2048);
        set[i] = malloc(n);
        if (set[i] == NULL) { fail("turns: out of memory"); break; }
        memset(set[i], id, n < 64 ? n : 64);
      }
      for (int i = 0; i < 400; i++) free(set[i]);
    }
    sem_post(&turn_sem[(id + 1) % turn_n]);
    if (done) break;
  }
  return NULL;
}
static void run_turns(int n) {
  turn_n = n;
  turn_left = 4L * n;
  turn_sem = calloc((size_t)n, sizeof *turn_sem);
  pthread_t* t = calloc((size_t)n, sizeof *t);
  if (turn_sem == NULL || t == NULL) { fail("turns: out of memory"); return; }
  for (int i = 0; i < n; i++) sem_init(&turn_sem[i], 0, 0);
  int made = 0;
  for (; made < n; made++)
    if (pthread_create(&t[made], NULL, turns_thread, (void*)(intptr_t)made) != 0) break;
  if (made < n) { fail("turns: pthread_create failed"); turn_n = made; }
  if (made == 0) return;
  sem_post(&turn_sem[0]);
  for (int i = 0; i < made; i++) pthread_join(t[i], NULL);
  printf("turns: %d threads took %d turns each and were joined\n", made, 4);
  free(t);
  free(turn_sem);
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* mode = argc > 1 ? argv[1] : "all";
  long a2 = argc > 2 ? atol(argv[2]) : 0, a3 = argc > 3 ? atol(argv[3]) : 0,
       a4 = argc > 4 ? atol(argv[4]) : 0;
  signal(SIGALRM, on_alarm);
  alarm((unsigned)ht_env_u64("HT_ALARM", 240));
  printf("test-threads: %s names, mode %s\n", T_NAMES, mode);
#ifdef HT_TSAN
  child_threads = 0;  /* TSan does not support threads in a multi-threaded fork's child */
#endif
  if (strcmp(mode, "stress") == 0 || strcmp(mode, "all") == 0)
    run_stress(a2 ? (int)a2 : 8, a3 ? (int)a3 : 10, a4 ? (int)a4 : 2000);
  if (strcmp(mode, "churn") == 0 || strcmp(mode, "all") == 0)
    run_churn(a2 ? a2 : 100000, a3 ? (int)a3 : 4);
  if (strcmp(mode, "bounded") == 0)
    run_bounded(a2 ? (int)a2 : 2, a3 ? (int)a3 : 100, a4 ? (int)a4 : 500);
  if (strcmp(mode, "handoff") == 0 || strcmp(mode, "all") == 0)
    run_handoff(a2 ? a2 : 10000);
  if (strcmp(mode, "reuse") == 0 || strcmp(mode, "all") == 0)
    run_reuse();
  if (strcmp(mode, "successor") == 0 || strcmp(mode, "all") == 0)
    run_successor();
  if (strcmp(mode, "share") == 0 || strcmp(mode, "all") == 0)
    run_share();
  if (strcmp(mode, "burst") == 0)
    run_burst();
  if (strcmp(mode, "reserve") == 0)
    run_reserve();
  if (strcmp(mode, "idle") == 0)
    run_idle(a2 ? (int)a2 : 3);
  if (strcmp(mode, "idle-race") == 0)
    run_idle_race(a2 ? (int)a2 : 300);
  if (strcmp(mode, "park-race") == 0) {
    race_counter = "stats.threads.park_slabs";
    run_idle_race(a2 ? (int)a2 : 300);
  }
  if (strcmp(mode, "park-signal") == 0)
    run_park_signal();
  if (strcmp(mode, "park-reuse") == 0)
    run_park_reuse();
  if (strcmp(mode, "phases") == 0)
    run_phases((int)a2);
  if (strcmp(mode, "join") == 0 || strcmp(mode, "all") == 0)
    run_join();
  if (strcmp(mode, "scavenge") == 0 || strcmp(mode, "all") == 0)
    run_scavenge(a2 ? (int)a2 : 4);
  if (strcmp(mode, "moves") == 0)
    run_moves(a2 ? (int)a2 : 4);
  if (strcmp(mode, "turns") == 0)
    run_turns(a2 ? (int)a2 : 256);
  if (strcmp(mode, "fork") == 0 || strcmp(mode, "all") == 0)
    run_fork(a2 ? (int)a2 : 200, a3 ? (int)a3 : 3);
  long f = atomic_load(&failures);
  printf("test-threads %s: %s\n", mode, f ? "FAILED" : "ok");
  return f ? 1 : 0;
}
