/* Compaction (HAKMEM_MESH=1, src/mesh.c): blocks keep their contents and
 * stay valid for free, realloc and malloc_usable_size while and after their
 * slabs are meshed, with threads writing, allocating and freeing during
 * compaction, and across fork.
 *
 *   test-mesh contents THREADS ROUNDS   writers rewrite scattered survivors,
 *                                       workers churn and free remotely, the
 *                                       main thread compacts ROUNDS times
 *   test-mesh api                       free/realloc/usable_size/owns of
 *                                       pointers into meshed slabs; thread exit
 *   test-mesh fork FORKS                fork after and during compaction: the
 *                                       child and the parent see their own memory
 *   test-mesh closed                    the program closes the mesh file and
 *                                       reuses its descriptor number
 * Every mode checks that meshing happened (the stats report's meshed_slabs). */
#include "hak_test.h"
#include "stats_report.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define NCLS 5
static const size_t sizes[NCLS] = {48, 200, 1000, 2000, 4000};

typedef struct {
  uint64_t* p;
  size_t words;   /* block size / 8 */
  uint32_t id;
  _Atomic(uint32_t) version;
} blk_t;

static blk_t* blk;
static size_t nblk;
static ht_rng_t rng = {0x1234567};

static uint64_t word_of(uint32_t id, uint32_t v) { return ((uint64_t)id << 32) | v; }

/* Write version v into every word, in order (a reader that races sees a
 * prefix of v and a suffix of v - 1). */
static void fill(blk_t* b, uint32_t v) {
  volatile uint64_t* w = b->p;
  for (size_t i = 0; i < b->words; i++) w[i] = word_of(b->id, v);
}
static bool check_exact(const blk_t* b, uint32_t v) {
  for (size_t i = 0; i < b->words; i++)
    if (b->p[i] != word_of(b->id, v)) return false;
  return true;
}
/* a snapshot taken while a writer may have been writing (fork) */
static bool check_torn(const blk_t* b) {
  uint32_t first = (uint32_t)b->p[0];
  for (size_t i = 0; i < b->words; i++) {
    uint64_t x = b->p[i];
    uint32_t v = (uint32_t)x;
    if ((x >> 32) != b->id || v > first || first - v > 1) return false;
  }
  return true;
}

static uint64_t stat_of(const char* key) { return ht_report_u64(hakmem_stats_print, NULL, key); }

/* Many blocks of a few classes, then all but ~15 % freed at random:
 * scattered survivors in sparse slabs. */
static void scatter(size_t n) {
  blk = calloc(n, sizeof *blk);   /* bookkeeping: plain malloc is fine */
  CHECK(blk != NULL);
  uint64_t** all = calloc(n, sizeof *all);
  size_t* sz = calloc(n, sizeof *sz);
  CHECK(all != NULL && sz != NULL);
  for (size_t i = 0; i < n; i++) {
    sz[i] = sizes[i % NCLS];
    all[i] = t_malloc(sz[i]);
    CHECK(all[i] != NULL);
    memset(all[i], 0xAB, sz[i]);
  }
  for (size_t i = 0; i < n; i++) {
    if (ht_rand(&rng) % 100 < 15) {
      blk_t* b = &blk[nblk];
      b->p = all[i];
      b->words = sz[i] / 8;
      b->id = (uint32_t)nblk + 1;
      atomic_store(&b->version, 1);
      fill(b, 1);
      nblk++;
    } else {
      t_free(all[i]);
    }
  }
  free(all);
  free(sz);
}

/* ---------------------------------------------------------------- contents */
static _Atomic(int) stop;
static _Atomic(uint64_t) errors;
static int nthreads;

static void* writer(void* arg) {   /* rewrites its share of the survivors */
  size_t t = (size_t)arg;
  while (!atomic_load(&stop)) {
    for (size_t i = t; i < nblk; i += (size_t)nthreads) {
      blk_t* b = &blk[i];
      if (b->p == NULL) continue;
      uint32_t v = atomic_load(&b->version);
      if (!check_exact(b, v)) atomic_fetch_add(&errors, 1);
      fill(b, v + 1);
      atomic_store(&b->version, v + 1);
    }
  }
  return NULL;
}

static void* churner(void* arg) {   /* its own blocks, pattern-checked */
  ht_rng_t r = {(uint64_t)(uintptr_t)arg * 7919 + 1};
  enum { N = 512 };
  uint8_t* slot[N] = {0};
  size_t len[N] = {0};
  while (!atomic_load(&stop)) {
    size_t k = ht_rand(&r) % N;
    if (slot[k]) {
      for (size_t j = 0; j < len[k]; j++)
        if (slot[k][j] != (uint8_t)(k + len[k])) {
          atomic_fetch_add(&errors, 1);
          break;
        }
      t_free(slot[k]);
      slot[k] = NULL;
    } else {
      len[k] = sizes[ht_rand(&r) % NCLS];
      slot[k] = t_malloc(len[k]);
      if (slot[k] == NULL) {
        atomic_fetch_add(&errors, 1);
        continue;
      }
      memset(slot[k], (int)(k + len[k]), len[k]);
    }
  }
  for (size_t k = 0; k < N; k++) t_free(slot[k]);
  return NULL;
}

static int mode_contents(int threads, int rounds) {
  if (threads > 16) threads = 16;
  nthreads = threads;
  scatter(60000);
  pthread_t w[16], c[16];
  for (int i = 0; i < threads; i++) CHECK(pthread_create(&w[i], NULL, writer, (void*)(uintptr_t)i) == 0);
  for (int i = 0; i < threads; i++) CHECK(pthread_create(&c[i], NULL, churner, (void*)(uintptr_t)(i + 1)) == 0);
  for (int r = 0; r < rounds; r++) {
    hak_collect();   /* compaction runs here, while the others write */
    /* and the main thread allocates into its (compacted) heap */
    for (int k = 0; k < 50; k++) {
      void* p = t_malloc(sizes[k % NCLS]);
      CHECK(p != NULL);
      memset(p, 1, sizes[k % NCLS]);
      t_free(p);
    }
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < threads; i++) pthread_join(w[i], NULL);
  for (int i = 0; i < threads; i++) pthread_join(c[i], NULL);
  uint64_t meshed = stat_of("meshed_slabs=");
  size_t bad = 0;
  for (size_t i = 0; i < nblk; i++)
    if (!check_exact(&blk[i], atomic_load(&blk[i].version))) bad++;
  for (size_t i = 0; i < nblk; i++) t_free(blk[i].p);
  hak_collect();
  printf("contents: %zu survivors, %d threads, %d rounds: meshed_slabs=%" PRIu64 " errors=%" PRIu64 " bad=%zu "
         "barrier_waits=%" PRIu64 "\n",
         nblk, threads, rounds, meshed, (uint64_t)atomic_load(&errors), bad, stat_of("barrier_waits="));
  CHECK(meshed > 0);
  CHECK(atomic_load(&errors) == 0);
  CHECK(bad == 0);
  return 0;
}

/* ---------------------------------------------------------------- api */
static void* remote_free_half(void* arg) {   /* frees on another thread */
  (void)arg;
  for (size_t i = 0; i < nblk; i += 2) {
    if (!check_exact(&blk[i], 1)) atomic_fetch_add(&errors, 1);
    t_free(blk[i].p);
    blk[i].p = NULL;
  }
  return NULL;
}

static void* exiting_thread(void* arg) {   /* meshes its own heap, then exits: unmeshed at exit */
  blk_t** out = arg;
  size_t n = 20000, kept = 0;
  ht_rng_t r = {99};
  blk_t* mine = calloc(n + 1, sizeof *mine);
  uint64_t** all = calloc(n, sizeof *all);
  for (size_t i = 0; i < n; i++) all[i] = t_malloc(sizes[i % NCLS]);
  for (size_t i = 0; i < n; i++) {
    if (ht_rand(&r) % 100 < 15) {
      mine[kept] = (blk_t){.p = all[i], .words = sizes[i % NCLS] / 8, .id = (uint32_t)(1000000 + i)};
      fill(&mine[kept], 7);
      kept++;
    } else {
      t_free(all[i]);
    }
  }
  free(all);
  uint64_t before = stat_of("meshed_slabs=");
  hak_collect();
  printf("exiting thread: %zu kept, meshed %" PRIu64 " slabs\n", kept, stat_of("meshed_slabs=") - before);
  mine[kept].p = NULL;
  *out = mine;
  return NULL;
}

static int mode_api(void) {
  scatter(40000);
  hak_collect();
  uint64_t meshed = stat_of("meshed_slabs=");
  CHECK(meshed > 0);
  for (size_t i = 0; i < nblk; i++) {
    CHECK(check_exact(&blk[i], 1));
    CHECK(t_malloc_usable_size(blk[i].p) >= blk[i].words * 8);
#ifndef HT_DLSYM
    CHECK(hak_owns(blk[i].p));
#endif
  }
  /* another thread frees half of them (remote frees into meshed slabs) */
  pthread_t t;
  CHECK(pthread_create(&t, NULL, remote_free_half, NULL) == 0);
  pthread_join(t, NULL);
  CHECK(atomic_load(&errors) == 0);
  hak_collect();   /* collects them into their roots; aliases that emptied dissolve */
  /* realloc: shrink in place, grow (moves, contents kept) */
  for (size_t i = 1; i < nblk; i += 2) {
    blk_t* b = &blk[i];
    size_t old = b->words * 8;
    uint64_t* q = t_realloc(b->p, old - 8);
    CHECK(q != NULL);
    b->p = q;
    b->words = (old - 8) / 8;
    CHECK(check_exact(b, 1));
    q = t_realloc(b->p, old * 3);
    CHECK(q != NULL);
    b->p = q;
    CHECK(check_exact(b, 1));
    fill(b, 2);
  }
  for (size_t i = 1; i < nblk; i += 2) {
    CHECK(check_exact(&blk[i], 2));
    t_free(blk[i].p);
  }
  /* a thread that meshed its own heap exits; its blocks stay readable and freeable */
  blk_t* theirs = NULL;
  CHECK(pthread_create(&t, NULL, exiting_thread, &theirs) == 0);
  pthread_join(t, NULL);
  size_t n = 0;
  for (; theirs[n].p != NULL; n++) {
    CHECK(check_exact(&theirs[n], 7));
    CHECK(t_malloc_usable_size(theirs[n].p) >= theirs[n].words * 8);
  }
  for (size_t i = 0; i < n; i++) t_free(theirs[i].p);
  free(theirs);
  hak_collect();
  printf("api: %zu survivors: meshed_slabs=%" PRIu64 " dissolved=%" PRIu64 " unmeshed=%" PRIu64
         " meshed_pages_now=%" PRIu64 "\n",
         nblk, stat_of("meshed_slabs="), stat_of("dissolved="), stat_of("unmeshed="), stat_of("meshed_pages_now="));
  CHECK(stat_of("unmeshed=") > 0);
  return 0;
}

static int child_check_and_scribble(bool torn);

/* ---------------------------------------------------------------- a closed mesh file */
/* A daemon closes every descriptor; the number is reused for another file.
 * hakmem must notice (no mapping or punching of that file), keep the meshed
 * blocks valid, and fork with private copies. */
static int mode_closed(void) {
  scatter(40000);
  hak_collect();
  CHECK(stat_of("meshed_slabs=") > 0);
  int fd = -1;
  char path[64], link[256];
  for (int i = 3; i < 1024 && fd < 0; i++) {
    snprintf(path, sizeof path, "/proc/self/fd/%d", i);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n > 0) {
      link[n] = 0;
      if (strstr(link, "hakmem-mesh")) fd = i;
    }
  }
  CHECK(fd >= 0);
  close(fd);
  char tmpl[] = "/tmp/test-mesh-XXXXXX";
  int other = mkstemp(tmpl);
  CHECK(other >= 0);
  if (other != fd && other >= 0) {
    CHECK(dup2(other, fd) == fd);
    close(other);
  }
  unlink(tmpl);
  CHECK(write(fd, "x", 1) == 1);
  for (size_t i = 0; i < nblk; i++) CHECK(check_exact(&blk[i], 1));
  pid_t pid = fork();   /* the fallback: private copies */
  CHECK(pid >= 0);
  if (pid == 0) _exit(child_check_and_scribble(false));
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  for (size_t i = 0; i < nblk; i++) CHECK(check_exact(&blk[i], 1));
  for (size_t i = 0; i < nblk; i += 2) t_free(blk[i].p);
  hak_collect();   /* no pass now; roots released without punching the other file */
  for (size_t i = 1; i < nblk; i += 2) {
    CHECK(check_exact(&blk[i], 1));
    t_free(blk[i].p);
  }
  hak_collect();
  struct stat sb;
  CHECK(fstat(fd, &sb) == 0 && sb.st_size == 1);   /* the other file is untouched */
  printf("closed: %zu survivors: meshed_slabs=%" PRIu64 " dissolved=%" PRIu64 " fork_copies=%" PRIu64 "\n", nblk,
         stat_of("meshed_slabs="), stat_of("dissolved="), stat_of("fork_copies="));
  return 0;
}

/* ---------------------------------------------------------------- fork */
static int child_check_and_scribble(bool torn) {
  for (size_t i = 0; i < nblk; i++) {
    blk_t* b = &blk[i];
    if (torn ? !check_torn(b) : !check_exact(b, atomic_load(&b->version))) {
      fprintf(stderr, "child: block %zu (%p) has wrong contents\n", i, (void*)b->p);
      return 1;
    }
  }
  for (size_t i = 0; i < nblk; i++) memset(blk[i].p, 0xEE, blk[i].words * 8);   /* must not reach the parent */
  for (size_t i = 0; i < nblk; i += 3) t_free(blk[i].p);
  void* p = t_malloc(100);
  if (p == NULL) return 1;
  t_free(p);
  hak_collect();
  return 0;
}

static void* fork_writer(void* arg) {   /* keeps writing the survivors while the main thread forks */
  (void)arg;
  uint32_t v = 1;
  while (!atomic_load(&stop)) {
    v++;
    for (size_t i = 0; i < nblk; i++) fill(&blk[i], v);
  }
  for (size_t i = 0; i < nblk; i++) atomic_store(&blk[i].version, v);
  return NULL;
}

static void* compactor(void* arg) {   /* compaction on another heap while the main thread forks */
  (void)arg;
  ht_rng_t r = {5};
  while (!atomic_load(&stop)) {
    enum { N = 3000 };
    void* v[N];
    for (int i = 0; i < N; i++) v[i] = t_malloc(sizes[i % NCLS]);
    for (int i = 0; i < N; i++)
      if (ht_rand(&r) % 100 >= 15) {
        t_free(v[i]);
        v[i] = NULL;
      }
    hak_collect();
    for (int i = 0; i < N; i++) t_free(v[i]);
  }
  return NULL;
}

static int do_fork(bool torn) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) _exit(child_check_and_scribble(torn));
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "fork: child failed (status %#x)\n", st);
    return 1;
  }
  return 0;
}

static int mode_fork(int forks) {
  scatter(40000);
  hak_collect();
  CHECK(stat_of("meshed_slabs=") > 0);
  /* after compaction */
  for (int f = 0; f < forks / 2; f++) {
    CHECK(do_fork(false) == 0);
    for (size_t i = 0; i < nblk; i++) CHECK(check_exact(&blk[i], atomic_load(&blk[i].version)));
  }
  /* during compaction and writes */
  pthread_t w, c;
  CHECK(pthread_create(&w, NULL, fork_writer, NULL) == 0);
  CHECK(pthread_create(&c, NULL, compactor, NULL) == 0);
  for (int f = 0; f < forks - forks / 2; f++) CHECK(do_fork(true) == 0);
  atomic_store(&stop, 1);
  pthread_join(w, NULL);
  pthread_join(c, NULL);
  for (size_t i = 0; i < nblk; i++) CHECK(check_exact(&blk[i], atomic_load(&blk[i].version)));
  printf("fork: %d forks, %zu survivors: meshed_slabs=%" PRIu64 " fork_copies=%" PRIu64 " barrier_waits=%" PRIu64 "\n",
         forks, nblk, stat_of("meshed_slabs="), stat_of("fork_copies="), stat_of("barrier_waits="));
  CHECK(stat_of("fork_copies=") > 0);
  for (size_t i = 0; i < nblk; i++) t_free(blk[i].p);
  return 0;
}

int main(int argc, char** argv) {
  alarm(240);   /* a deadlock fails instead of hanging */
  if (argc >= 2 && strcmp(argv[1], "contents") == 0)
    mode_contents(argc > 2 ? atoi(argv[2]) : 2, argc > 3 ? atoi(argv[3]) : 20);
  else if (argc >= 2 && strcmp(argv[1], "api") == 0)
    mode_api();
  else if (argc >= 2 && strcmp(argv[1], "fork") == 0)
    mode_fork(argc > 2 ? atoi(argv[2]) : 20);
  else if (argc >= 2 && strcmp(argv[1], "closed") == 0)
    mode_closed();
  else {
    fprintf(stderr, "usage: test-mesh contents THREADS ROUNDS | api | fork FORKS | closed\n");
    return 2;
  }
  return ht_done("test-mesh");
}
