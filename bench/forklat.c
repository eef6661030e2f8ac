/* forklat — how long fork() takes with a big heap.
 *
 * Allocates MB MiB of SIZE-byte blocks (each written), then frees all but a
 * random KEEP % of them (100: none) and, with --trim=1, calls malloc_trim(0)
 * (hakmem compacts there with HAKMEM_MESH=1).  Then forks FORKS times; each
 * child exits at once.  fork_us is the median time fork() takes in the
 * parent (the page tables are copied there, and allocator atfork handlers
 * run); cycle_us the median of fork + the child's exit + waitpid.
 * Servers that fork to snapshot and shells that fork to exec pay fork_us.
 * --thread=1 starts an idle thread first: a multi-threaded process (for
 * hakmem with HAKMEM_MESH=1, that is when fork needs a write barrier). */
#define _GNU_SOURCE
#include "bench_common.h"

#include <malloc.h>
#include <sys/mman.h>
#include <pthread.h>
#include <sys/wait.h>

static uint64_t mb = 1024, size = 1000, keep = 100, trim = 0, forks = 21, seed = 42, thread = 0;

static const b_opt_t opts[] = {
    B_OPT_U("mb", "FORK_MB", &mb, 1, 1u << 20, "heap to build, MiB"),
    B_OPT_U("size", "SIZE", &size, 1, 1u << 20, "block size"),
    B_OPT_U("keep", "KEEP", &keep, 0, 100, "percent of blocks kept (the rest freed, scattered)"),
    B_OPT_U("trim", "TRIM", &trim, 0, 1, "call malloc_trim(0) after the frees"),
    B_OPT_U("forks", "FORKS", &forks, 1, 100000, "forks timed"),
    B_OPT_U("seed", "SEED", &seed, 0, UINT64_MAX, "PRNG seed"),
    B_OPT_U("thread", "THREAD", &thread, 0, 1, "start an idle second thread first (a multi-threaded process)"),
    B_OPT_LAST};

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static void* idle(void* arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

int main(int argc, char** argv) {
  b_parse(argc, argv, "fork() latency with a big heap (optionally fragmented and trimmed)", opts);
  size_t n = (size_t)((mb << 20) / size);
  void** v = mmap(NULL, n * sizeof *v, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  uint64_t* t = mmap(NULL, 2 * forks * sizeof *t, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (v == MAP_FAILED || t == MAP_FAILED) b_die(1, "mmap of the tables failed");
  uint64_t st = seed;
  for (size_t i = 0; i < n; i++) {
    v[i] = malloc(size);
    if (v[i] == NULL) b_oom(size);
    memset(v[i], (int)i, size);
  }
  size_t kept = n;
  if (keep < 100) {
    kept = 0;
    for (size_t i = 0; i < n; i++) {
      if (b_bounded((uint32_t)(b_rng(&st) >> 32), 100) < keep) {
        v[kept++] = v[i];
      } else {
        free(v[i]);
      }
    }
  }
  if (trim) malloc_trim(0);
  pthread_t tid;
  if (thread && pthread_create(&tid, NULL, idle, NULL) != 0) b_die(1, "pthread_create failed");
  uint64_t rss = b_rss_kb();
  b_snap_t a, b;
  b_snap(&a);
  for (uint64_t k = 0; k < forks; k++) {
    uint64_t t0 = b_now_ns();
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    uint64_t t1 = b_now_ns();
    if (pid < 0) b_die(1, "fork failed");
    int status;
    waitpid(pid, &status, 0);
    uint64_t t2 = b_now_ns();
    t[k] = t1 - t0;
    t[forks + k] = t2 - t0;
  }
  b_snap(&b);
  qsort(t, forks, sizeof *t, cmp_u64);
  qsort(t + forks, forks, sizeof *t, cmp_u64);
  uint64_t bad = 0;
  for (size_t i = 0; i < kept; i++) bad += ((unsigned char*)v[i])[size - 1] != ((unsigned char*)v[i])[0];
  b_result_t r;
  b_result_begin(&r, "forklat");
  b_kv(&r, "fork_us=%.1f", t[forks / 2] / 1e3);
  b_kv(&r, "cycle_us=%.1f", t[forks + forks / 2] / 1e3);
  b_kv(&r, "fork_min_us=%.1f", t[0] / 1e3);
  b_kv(&r, "fork_max_us=%.1f", t[forks - 1] / 1e3);
  b_kv(&r, "heap_rss_kb=%" PRIu64, rss);
  b_kv(&r, "blocks=%zu", n);
  b_kv(&r, "kept=%zu", kept);
  b_kv(&r, "forks=%" PRIu64, forks);
  b_kv(&r, "check=%s", bad ? "FAIL" : "ok");
  b_result_end(&r, &a, &b, "fork_us", "lower");
  return bad ? 1 : 0;
}
