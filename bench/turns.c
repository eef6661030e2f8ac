/* turns — threads that take turns: a pool of THREADS threads passes one
 * turn round (thread i hands it to thread i + 1, as threads under one
 * global lock do: Ruby's, Python's, a job pool larger than its CPUs).  In
 * its turn a thread builds a working set of WS blocks of mixed sizes (MIN to
 * MAX bytes, log-uniform, each written), keeps one block in KEEP% of them in
 * a shared cache of CACHE blocks (evicting the oldest, which another thread
 * made: a remote free), and frees the rest.  TURNS turns in all, so 16 and
 * 256 threads do the same mallocs: the memory a pool needs is the working
 * set of the thread that runs plus the cache, whatever the number of threads
 * that wait.  Peak RSS is the figure (issue #43: an allocator whose threads
 * own partly used slabs holds one set of them per thread that exists).
 *   THREADS=16 build/bench/turns; THREADS=256 build/bench/turns */
#define _GNU_SOURCE
#include "bench_common.h"

#include <pthread.h>
#include <math.h>
#include <semaphore.h>

static uint64_t threads = 64, turns = 4096, ws = 2000, minsz = 16, maxsz = 2048, keep = 10, cache = 8192, seed = 42;

static const b_opt_t opts[] = {
    B_OPT_U("threads", "THREADS", &threads, 1, 4096, "threads in the pool"),
    B_OPT_U("turns", "TURNS", &turns, 1, UINT64_MAX, "turns in all (shared out round the pool)"),
    B_OPT_U("ws", "WS", &ws, 1, 1u << 24, "blocks a turn builds"),
    B_OPT_U("min", "MIN", &minsz, 1, 1ull << 30, "smallest block size"),
    B_OPT_U("max", "MAX", &maxsz, 1, 1ull << 30, "largest block size"),
    B_OPT_U("keep", "KEEP", &keep, 0, 100, "percent of a turn's blocks kept in the shared cache"),
    B_OPT_U("cache", "CACHE", &cache, 1, 1u << 24, "blocks the shared cache holds (the oldest is freed)"),
    B_OPT_U("seed", "SEED", &seed, 0, UINT64_MAX, "PRNG seed"),
    B_OPT_LAST};

static sem_t* sems;                 /* sems[i]: thread i's turn */
static unsigned char** kept;        /* the shared cache, a ring (only the thread in its turn touches it) */
static uint64_t kept_next, turn_no, bad;
static double log_min, log_span;

static size_t pick(uint64_t* rng) {
  double u = (double)(b_rng(rng) >> 11) / 9007199254740992.0;
  size_t n = (size_t)exp(log_min + u * log_span);
  return n < minsz ? minsz : n > maxsz ? maxsz : n;
}

/* One turn: the working set built, a part kept, the rest freed.  The
 * array of its pointers is part of it: a thread that waits holds nothing of
 * the program's, so what grows with the threads is the allocator's (and
 * the thread stacks', which glibc maps: about 8 KiB a thread). */
static void one_turn(uint64_t* rng) {
  unsigned char** set = malloc(ws * sizeof *set);
  if (set == NULL) b_oom(ws * sizeof *set);
  for (uint64_t i = 0; i < ws; i++) {
    size_t n = pick(rng);
    set[i] = malloc(n);
    if (set[i] == NULL) b_oom(n);
    memset(set[i], (int)(i & 0xff), n < 256 ? n : 256);
    set[i][n - 1] = (unsigned char)i;
  }
  for (uint64_t i = 0; i < ws; i++) {
    if (set[i][0] != (unsigned char)(i & 0xff)) bad++;
    if (keep && b_rng(rng) % 100 < keep) {
      uint64_t slot = kept_next++ % cache;
      free(kept[slot]);   /* made by another thread, most likely */
      kept[slot] = set[i];
    } else {
      free(set[i]);
    }
  }
  free(set);
}

static void* worker(void* arg) {
  uint64_t id = (uint64_t)(uintptr_t)arg, rng = seed * 0x9E3779B97F4A7C15ull + id + 1;
  for (;;) {
    while (sem_wait(&sems[id]) != 0) {}
    int done = turn_no >= turns;
    if (!done) {
      turn_no++;
      one_turn(&rng);
    }
    sem_post(&sems[(id + 1) % threads]);   /* the next thread's turn (at the end: its exit) */
    if (done) break;
  }
  return NULL;
}

int main(int argc, char** argv) {
  b_parse(argc, argv, "threads taking turns, each building and freeing a working set in its turn", opts);
  if (minsz > maxsz) {
    fprintf(stderr, "%s: --min must not exceed --max\n", b_prog);
    return 2;
  }
  log_min = log((double)minsz);
  log_span = log((double)maxsz + 1) - log_min;
  sems = calloc(threads, sizeof *sems);
  kept = calloc(cache, sizeof *kept);
  pthread_t* tid = calloc(threads, sizeof *tid);
  if (sems == NULL || kept == NULL || tid == NULL) b_oom(threads * sizeof *sems);
  for (uint64_t i = 0; i < threads; i++) sem_init(&sems[i], 0, 0);
  b_snap_t a, b;
  b_snap(&a);
  for (uint64_t i = 0; i < threads; i++)
    if (pthread_create(&tid[i], NULL, worker, (void*)(uintptr_t)i) != 0) {
      fprintf(stderr, "%s: pthread_create failed\n", b_prog);
      return 1;
    }
  sem_post(&sems[0]);
  for (uint64_t i = 0; i < threads; i++) pthread_join(tid[i], NULL);
  b_snap(&b);
  for (uint64_t i = 0; i < cache; i++) free(kept[i]);
  b_result_t res;
  b_result_begin(&res, "turns");
  b_kv_rate(&res, &a, &b, turns * ws);
  b_kv(&res, "threads=%" PRIu64, threads);
  b_kv(&res, "check=%s", bad ? "FAIL" : "ok");
  b_result_end(&res, &a, &b, "peak_rss_kb", "lower");
  return bad ? 1 : 0;
}
