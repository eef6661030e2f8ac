/* Heap profiling (HAKMEM_PROF, src/prof.c): programs whose profiles
 * tests/cases/core_prof.sh reads with google-pprof.  Each mode holds memory
 * in functions with names of their own (noinline), so the profile can be
 * checked by name.
 *   split [MiB]  three functions hold 60 %, 30 % and 10 % of the live
 *             bytes, 160 MiB or MiB in all (mixed sizes, some large blocks,
 *             short-lived churn between)
 *   leaks     leaky() keeps its blocks, tidy() frees all of its own
 *   lazy PATH the balanced default (HAKMEM_PROF unset): sampling is on; no
 *             unwinder is loaded after 10 small blocks; after 64 MiB held
 *             in lazy_keep() one is, and hakmem_prof_dump(PATH) writes them
 *   signal-first  SIGUSR2 before any sample
 *   dump PATH hakmem_prof_dump(PATH), then a signal (HAKMEM_PROF_SIGNAL)
 *   peak      grows in steps (HAKMEM_PROF_PEAK=1)
 *   fork      the parent holds in parent_keep(), a child in child_keep()
 *   threads   four threads hold in thread_keep() and exit; main in main_keep()
 *   exec      a profile, then exec of this program in mode exec2 (same pid)
 *   corrupt   children profile allocations below a corrupted frame chain
 *             (every allocation sampled: HAKMEM_PROF_RATE=1); each must exit 0
 *   late D A  profiling started at run time (profile D), then stopped (A)
 *   slots     sampled blocks of up to a page in page slots (HAKMEM_PROF_RATE=1):
 *             their sizes, realloc, calloc, alignment, frees from another
 *             thread, two segments' worth live, the slots reused
 *   slot-double-free, slot-interior, slot-usable-freed
 *             misuse of a sampled block: must die with the one-line report */
#include "hak_test.h"
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>

static void* keep[1 << 20];
static size_t nkeep;
static unsigned rng = 12345;
static unsigned next_rand(void) {
  rng = rng * 1103515245u + 12345u;
  return rng >> 8;
}
/* a request size: mostly small, now and then a large block (> 128 KiB) */
static size_t some_size(void) {
  unsigned r = next_rand();
  return r % 64 == 0 ? (size_t)160 * 1024 + r % 65536 : 16 + r % 3000;
}
static void hold(void* p, size_t n) {
  CHECK(p != NULL);
  memset(p, 0x5A, n);
  keep[nkeep++] = p;
}
static void churn(void) {   /* short-lived blocks between the kept ones */
  void* volatile t = t_malloc(16 + next_rand() % 500);
  ((char*)t)[0] = 1;
  t_free(t);
}

__attribute__((noinline)) void alloc_sixty(size_t n) { hold(t_malloc(n), n); }
__attribute__((noinline)) void alloc_thirty(size_t n) { hold(t_malloc(n), n); }
__attribute__((noinline)) void alloc_ten(size_t n) { hold(t_malloc(n), n); }

static int mode_split(size_t mib) {
  size_t goal = mib << 20, got[3] = {0, 0, 0};
  while (got[0] + got[1] + got[2] < goal) {
    size_t n = some_size();
    /* deal each function its share of bytes, not of calls */
    size_t tot = got[0] + got[1] + got[2] + n;
    if (got[0] + n <= tot * 6 / 10) alloc_sixty(n), got[0] += n;
    else if (got[1] + n <= tot * 3 / 10) alloc_thirty(n), got[1] += n;
    else alloc_ten(n), got[2] += n;
    churn();
  }
  printf("live bytes: sixty %zu thirty %zu ten %zu\n", got[0], got[1], got[2]);
  return 0;
}

__attribute__((noinline)) void leaky(size_t n) { hold(t_malloc(n), n); }
__attribute__((noinline)) void* tidy(size_t n) {
  void* p = t_malloc(n);
  __asm__ volatile("" : : "r"(p) : "memory");   /* (no tail call: tidy's frame stays in the stack) */
  return p;
}
static int mode_leaks(void) {
  for (int i = 0; i < 20000; i++) {
    leaky(1000);
    void* p = tidy(1000);
    t_free(p);
  }
  return 0;
}

__attribute__((noinline)) void dump_keep(size_t n) { hold(t_malloc(n), n); }
static int mode_dump(const char* path) {
  for (int i = 0; i < 8000; i++) dump_keep(1024);
  CHECKF(hakmem_prof_dump(path) == 0, "hakmem_prof_dump(%s): %s", path, strerror(errno));
  raise(SIGUSR2);   /* HAKMEM_PROF_SIGNAL=12: the next numbered profile */
  return 0;
}

/* Profiling started and stopped at run time (hakmem_ctl "prof.active"):
 * the caller's countdown looks at once, another thread's (reloaded idle
 * while profiling was off) within 1 MiB, so late_keep's and
 * late_thread_keep's 16 MiB are sampled and early_keep's and after_keep's
 * are not. */
__attribute__((noinline)) void early_keep(size_t n) { hold(t_malloc(n), n); }
__attribute__((noinline)) void late_keep(size_t n) { hold(t_malloc(n), n); }
__attribute__((noinline)) void late_thread_keep(size_t n) { hold(t_malloc(n), n); }
__attribute__((noinline)) void after_keep(size_t n) { hold(t_malloc(n), n); }
static pthread_barrier_t late_bar;
static void* late_worker(void* arg) {
  (void)arg;
  for (int i = 0; i < 1024; i++) early_keep(1024);
  pthread_barrier_wait(&late_bar);   /* main starts profiling */
  pthread_barrier_wait(&late_bar);
  for (int i = 0; i < 16384; i++) late_thread_keep(1024);
  return NULL;
}
static int mode_late(const char* during, const char* after) {
  for (int i = 0; i < 16384; i++) early_keep(1024);
  pthread_t t;
  pthread_barrier_init(&late_bar, NULL, 2);
  CHECK(pthread_create(&t, NULL, late_worker, NULL) == 0);
  pthread_barrier_wait(&late_bar);
  bool on = true;
  CHECK(hakmem_ctl("prof.active", NULL, NULL, &on, sizeof on) == 0);
  pthread_barrier_wait(&late_bar);
  for (int i = 0; i < 16384; i++) late_keep(1024);
  pthread_join(t, NULL);
  CHECKF(hakmem_prof_dump(during) == 0, "hakmem_prof_dump(%s): %s", during, strerror(errno));
  on = false;
  CHECK(hakmem_ctl("prof.active", NULL, NULL, &on, sizeof on) == 0);
  for (int i = 0; i < 16384; i++) after_keep(1024);
  CHECKF(hakmem_prof_dump(after) == 0, "hakmem_prof_dump(%s): %s", after, strerror(errno));
  return ht_failures != 0;
}

/* Every allocation sampled (HAKMEM_PROF_RATE=1): the blocks of every class
 * (up to 128 KiB) live in page slots, counted by stats.sampled.*. */
static size_t sampled(const char* what) {
  size_t v = ht_ctl_figure(what);
  CHECKF(v != (size_t)-1, "hakmem_ctl %s", what);
  return v;
}
static pthread_barrier_t slot_bar;
static void* slot_free_worker(void* arg) {
  void** v = arg;
  pthread_barrier_wait(&slot_bar);
  for (int i = 0; i < 256; i++) t_free(v[i]);
  return NULL;
}
/* (run with HAKMEM_BACKGROUND=0: the release thread's start allocates
 * for glibc, a live sample the counts below would see) */
static int mode_slots(void) {
  t_free(t_malloc(8));   /* (a heap's first malloc reloads its countdown: not a sample) */
  printf("slots:\n");   /* (stdout's buffer, a live sample, made before the count) */
  fflush(stdout);
  size_t live0 = sampled("stats.sampled.live_blocks");
  /* (at HAKMEM_PROF_RATE=1 the intervals are 1 or 2 bytes, rarely more: a
   * request of 16 bytes or more is always sampled) */
  static const size_t sizes[] = {16, 17, 100, 1000, 3000, 4000, 5000, 20000, 100000};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    size_t n = sizes[k];
    uint8_t* p = t_malloc(n);
    CHECKF(p != NULL && ((uintptr_t)p & 4095) == 0, "malloc(%zu) = %p: not a page slot", n, (void*)p);
    size_t u = t_malloc_usable_size(p);
    CHECKF(u >= n && u <= (n <= 4096 ? 4096 : 131072), "malloc(%zu): usable %zu", n, u);
    memset(p, 0xA5, u);
    CHECKF(sampled("stats.sampled.live_blocks") == live0 + 1, "malloc(%zu): live samples %zu, %zu before", n,
           sampled("stats.sampled.live_blocks"), live0);
    uint8_t* q = t_realloc(p, n * 3 + 5000);   /* out of the slot: a slot of 32 pages, or above 128 KiB a large block */
    CHECK(q != NULL);
    for (size_t i = 0; i < u && i < n * 3 + 5000; i++) CHECKF(q[i] == 0xA5, "realloc(%zu) lost byte %zu", n, i);
    size_t want = live0 + (t_malloc_usable_size(q) <= 131072);
    CHECKF(sampled("stats.sampled.live_blocks") == want, "realloc(%zu): %zu live samples, want %zu (the old slot freed)", n,
           sampled("stats.sampled.live_blocks"), want);
    t_free(q);
    CHECKF(sampled("stats.sampled.live_blocks") == live0, "free after realloc(%zu): %zu live samples", n, sampled("stats.sampled.live_blocks"));
    uint8_t* z = t_calloc(1, n);   /* a reused slot's page holds old bytes: calloc clears them */
    for (size_t i = 0; i < n; i++) CHECKF(z[i] == 0, "calloc(1, %zu): byte %zu is %u", n, i, z[i]);
    t_free(z);
  }
  void* a = NULL;
  CHECK(t_posix_memalign(&a, 256, 200) == 0 && ((uintptr_t)a & 255) == 0);
  t_free(a);
  /* blocks sampled here, freed by another thread */
  /* (what pthread_create allocates is sampled too: counted from after it) */
  static void* v[256];
  pthread_t t;
  pthread_barrier_init(&slot_bar, NULL, 2);
  CHECK(pthread_create(&t, NULL, slot_free_worker, v) == 0);
  size_t mid = sampled("stats.sampled.live_blocks");
  for (int i = 0; i < 256; i++) v[i] = t_malloc(64 + i);
  CHECK(sampled("stats.sampled.live_blocks") == mid + 256);
  pthread_barrier_wait(&slot_bar);
  CHECK(pthread_join(t, NULL) == 0);
  size_t after = sampled("stats.sampled.live_blocks");
  CHECKF(after <= mid, "live samples %zu after another thread freed 256, %zu before they were made", after, mid);
  /* more live than a segment holds (504), then all freed and taken again:
   * the pages are reused, not added to */
  static void* w[1200];
  for (int i = 0; i < 1200; i++) w[i] = t_malloc(500);
  size_t pages = sampled("stats.sampled.pages");
  CHECKF(pages >= 1200, "1,200 live samples in %zu slot pages", pages);
  for (int i = 0; i < 1200; i++) t_free(w[i]);
  for (int i = 0; i < 1200; i++) w[i] = t_malloc(700);
  /* (reused, not 1,200 added; a few pages may be other blocks sampled
   * meanwhile, every allocation being sampled: stdio's, the figures') */
  CHECKF(sampled("stats.sampled.pages") <= pages + 16, "slot pages %zu after reuse, %zu before", sampled("stats.sampled.pages"), pages);
  for (int i = 0; i < 1200; i++) t_free(w[i]);
  CHECKF(sampled("stats.sampled.live_blocks") == after, "live samples %zu at the end, %zu before the 1,200", sampled("stats.sampled.live_blocks"), after);
  printf("slots: %s (%zu pages)\n", ht_failures ? "FAILED" : "ok", pages);
  return ht_failures != 0;
}
static int mode_slot_misuse(const char* m) {
  t_free(t_malloc(8));
  fprintf(stderr, "%s\n", m);   /* (stderr's buffer first) */
  size_t n = strstr(m, "-medium") != NULL ? 20000 : 100;   /* (a slot of 32 pages, of one) */
  uint8_t* p = t_malloc(n);
  CHECKF(((uintptr_t)p & 4095) == 0, "malloc(%zu) = %p: not a page slot", n, (void*)p);
  if (!strncmp(m, "slot-double-free", 16)) {
    t_free(p);
    t_free(p);
  } else if (!strncmp(m, "slot-interior", 13)) {
    t_free(p + (n > 4096 ? 4096 : 16));
  } else {
    t_free(p);
    (void)t_malloc_usable_size(p);
  }
  return 0;   /* not reached: the report aborts */
}

__attribute__((noinline)) void peak_keep(size_t n) { hold(t_malloc(n), n); }
static int mode_peak(void) {
  for (int i = 0; i < 40000; i++) peak_keep(1024);
  return 0;
}

__attribute__((noinline)) void parent_keep(size_t n) { hold(t_malloc(n), n); }
__attribute__((noinline)) void child_keep(size_t n) { hold(t_malloc(n), n); }
static int mode_fork(void) {
  for (int i = 0; i < 16000; i++) parent_keep(1024);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    for (int i = 0; i < 16000; i++) child_keep(1024);
    printf("child %d\n", (int)getpid());
    exit(0);   /* an ordinary exit: the child writes its own profile */
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  printf("parent %d\n", (int)getpid());
  return 0;
}

__attribute__((noinline)) void thread_keep(void** slot, size_t n) {
  *slot = t_malloc(n);
  memset(*slot, 1, n);
}
__attribute__((noinline)) void main_keep(size_t n) { hold(t_malloc(n), n); }
static void* thread_main(void* arg) {
  void** slots = arg;
  for (int i = 0; i < 8000; i++) {
    thread_keep(&slots[i], 1024);
    churn();
  }
  return NULL;
}
static int mode_threads(void) {
  static void* slots[4][8000];
  pthread_t t[4];
  for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, thread_main, slots[i]) == 0);
  for (int i = 0; i < 4; i++) CHECK(pthread_join(t[i], NULL) == 0);
  for (int i = 0; i < 8000; i++) main_keep(1024);
  /* the exited threads' blocks are freed from here: half of them */
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 8000; j += 2) t_free(slots[i][j]);
  return 0;
}

__attribute__((noinline)) void before_exec(size_t n) { hold(t_malloc(n), n); }
__attribute__((noinline)) void after_exec(size_t n) { hold(t_malloc(n), n); }
static int mode_exec(const char* self) {
  for (int i = 0; i < 8000; i++) before_exec(1024);
  CHECK(hakmem_prof_dump(NULL) == 0);
  execl(self, self, "exec2", (char*)NULL);
  perror("execl");
  return 1;
}
static int mode_exec2(void) {
  for (int i = 0; i < 8000; i++) after_exec(1024);
  return 0;
}

/* A frame whose saved frame pointer and return address are overwritten, and
 * allocations below it; the child never returns through it. */
static volatile uintptr_t bad_fp, bad_ra;
__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void broken_frame(void) {
  uintptr_t* fp = __builtin_frame_address(0);
  fp[0] = bad_fp;
  fp[1] = bad_ra;
  for (int i = 0; i < 3000; i++) {
    void* volatile p = t_malloc(16 + (size_t)i % 5000);
    if (i % 2) t_free(p);
  }
  _exit(hakmem_prof_dump(NULL) == 0 ? 0 : 3);
}
__attribute__((noinline)) static void above_broken(void) {
  broken_frame();
  __asm__ volatile("");
}
static int mode_corrupt(void) {
  /* a page no read may touch, kept so that no later mapping takes its place
   * (an unmapped page may be mapped again by the time the walk reads it) */
  void* gone = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(gone != MAP_FAILED);
  uintptr_t cases[][2] = {
      {0xdead0000beefULL, 0x1234},                              /* garbage */
      {(uintptr_t)gone, (uintptr_t)&mode_corrupt + 16},         /* a real return address, the frame unmapped */
      {(uintptr_t)gone + 8, 0},                                 /* no return address */
      {(uintptr_t)&bad_fp, (uintptr_t)&above_broken + 4},       /* a frame in static data */
      {1, (uintptr_t)gone},                                     /* a return into unmapped memory */
      {(uintptr_t)gone, (uintptr_t)&broken_frame + 24},         /* a frame-pointer function: CFA from an unmapped frame */
      {(uintptr_t)__builtin_frame_address(0) - 64, (uintptr_t)&broken_frame + 24},   /* a frame below, a cycle */
  };
  int fails = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      bad_fp = cases[c][0];
      bad_ra = cases[c][1];
      above_broken();
      _exit(4);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    printf("broken frame %zu: %s %d%s\n", c, WIFEXITED(st) ? "exit" : "signal",
           WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), ok ? "" : "  FAILED");
    fails += !ok;
  }
  return fails != 0;
}

/* A fault outside the stack walk, profiling on: the program's own SIGSEGV
 * handler (installed before profiling started) still gets it ("chain"), and
 * without one the process dies of it ("fault"): the unwinder's fault guard
 * takes only the faults of its own walks. */
static void on_segv(int sig) {
  (void)sig;
  _exit(7);
}
static int mode_fault(bool chain) {
  if (chain) signal(SIGSEGV, on_segv);
  bool on = true;
  CHECK(hakmem_ctl("prof.active", NULL, NULL, &on, sizeof on) == 0);
  for (int i = 0; i < 1000; i++) t_free(t_malloc(1000));   /* samples: the walk runs */
  volatile int* volatile bad = (int*)16;
  return *bad;
}

/* libgcc_s or libunwind in this process's mappings (read without
 * allocating: a malloc here could be the first sample). */
static bool unwinder_mapped(void) {
  static char maps[1 << 20];
  int fd = open("/proc/self/maps", O_RDONLY);
  CHECK(fd >= 0);
  size_t n = 0;
  ssize_t r;
  while (fd >= 0 && n < sizeof maps - 1 && (r = read(fd, maps + n, sizeof maps - 1 - n)) > 0) n += (size_t)r;
  if (fd >= 0) close(fd);
  maps[n] = 0;
  return strstr(maps, "libgcc_s") != NULL || strstr(maps, "libunwind") != NULL;
}

__attribute__((noinline)) void lazy_keep(size_t n) { hold(t_malloc(n), n); }
static int mode_lazy(const char* path) {
  bool on = false;
  size_t len = sizeof on;
  CHECK(hakmem_ctl("prof.active", &on, &len, NULL, 0) == 0 && on);
  /* (a first sample or guarded block within these 160 bytes: about 1 in 10,000) */
  for (int i = 0; i < 10; i++) t_free(t_malloc(16));
  CHECK(!unwinder_mapped());
  for (int i = 0; i < 1024; i++) lazy_keep(64 << 10);
  CHECK(unwinder_mapped());
  CHECK(hakmem_prof_dump(path) == 0);
  return ht_failures != 0;
}

int main(int argc, char** argv) {
  const char* m = argc > 1 ? argv[1] : "";
  if (!strcmp(m, "split")) return mode_split(argc > 2 ? (size_t)atol(argv[2]) : 160);
  if (!strcmp(m, "leaks")) return mode_leaks();
  if (!strcmp(m, "lazy") && argc > 2) return mode_lazy(argv[2]);
  if (!strcmp(m, "signal-first")) return raise(SIGUSR2) != 0;   /* (HAKMEM_PROF_SIGNAL=12, before any sample) */
  if (!strcmp(m, "dump") && argc > 2) return mode_dump(argv[2]);
  if (!strcmp(m, "peak")) return mode_peak();
  if (!strcmp(m, "late") && argc > 3) return mode_late(argv[2], argv[3]);
  if (!strcmp(m, "slots")) return mode_slots();
  if (!strncmp(m, "slot-", 5)) return mode_slot_misuse(m);
  if (!strcmp(m, "fork")) return mode_fork();
  if (!strcmp(m, "threads")) return mode_threads();
  if (!strcmp(m, "exec")) return mode_exec(argv[0]);
  if (!strcmp(m, "exec2")) return mode_exec2();
  if (!strcmp(m, "corrupt")) return mode_corrupt();
  if (!strcmp(m, "chain")) return mode_fault(true);
  if (!strcmp(m, "fault")) return mode_fault(false);
  fprintf(stderr, "usage: %s split|leaks|dump PATH|peak|fork|threads|exec|corrupt\n", argv[0]);
  return 2;
}
