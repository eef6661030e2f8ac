/* churn — threads that come and go, leaving blocks behind for others to free.
 *
 * rounds mode (default): ROUNDS rounds; each starts THREADS-1 worker threads
 * while the main thread works as thread 0.  Thread t makes ALLOCS x (t%8+1)
 * allocations, sizes uniform over the powers of two in [MIN, MAX], 1 % of
 * them 100x larger, 0.1 % 1000x and 0.01 % 10000x (--large=0: none).  About
 * half of the blocks are retained until the thread's work ends; the others go
 * into a data array that grows by realloc 100,000 pointers at a time.  After
 * each allocation a random data slot is freed with 66 % chance, and with
 * TRANSFER % chance a random data slot is swapped (atomic exchange) with one
 * of 1,000 shared slots, so that another thread, or a later round, frees its
 * block.  A thread frees what it holds and exits; after the round the main
 * thread frees half of the shared slots (all of them after the last round).
 * tasks mode: TASKS short threads, at most THREADS alive at once; each frees
 * the blocks earlier threads left in the shared slots and in a hand-off slot
 * and leaves ALLOCS x (k%8+1) new blocks there for later threads.
 *
 * Every block carries a cookie (its address hashed, with its size code) in its
 * first and last 8 bytes, checked when it is freed.  The main figure is the
 * elapsed time; peak_live_bytes, the peak of the bytes allocated and not yet
 * freed, is there to set RSS against. */
#include "bench_common.h"

#include <dlfcn.h>

#include <pthread.h>
#include <stdatomic.h>

static uint64_t threads = 2, rounds = 400, tasks = 4000, allocs = 0, minsz = 8, maxsz = 1024, seed = 42,
                transfer = 25, large = 1;
static const char* mode = "rounds";

static const b_opt_t opts[] = {
    B_OPT_C("mode", "CHURN_MODE", &mode, "rounds|tasks", "rounds of THREADS threads, or one short thread per task"),
    B_OPT_U("threads", "THREADS", &threads, 1, 4096, "threads per round (main included); tasks: alive at once"),
    B_OPT_U("rounds", "ROUNDS", &rounds, 1, 1u << 24, "rounds (rounds mode)"),
    B_OPT_U("tasks", "TASKS", &tasks, 1, 1u << 28, "threads started in all (tasks mode)"),
    B_OPT_U("allocs", "CHURN_ALLOCS", &allocs, 0, 1u << 24,
            "allocations of thread t are this x (t%8+1) (0 = 5000 rounds, 100 tasks)"),
    B_OPT_U("min", "MIN", &minsz, 8, 1u << 20, "smallest block size (a power of two is drawn in [MIN, MAX])"),
    B_OPT_U("max", "MAX", &maxsz, 8, 1u << 20, "largest block size"),
    B_OPT_U("transfer", "TRANSFER", &transfer, 0, 100, "percent of allocations followed by a swap with a shared slot"),
    B_OPT_U("large", "LARGE", &large, 0, 1, "1 = 1 %/0.1 %/0.01 % of blocks are 100x/1000x/10000x larger"),
    B_OPT_U("seed", "SEED", &seed, 0, UINT64_MAX, "PRNG seed"),
    B_OPT_LAST};

enum { SHARED = 1000, DATA_STEP = 100000, LIVE_SLACK = 64 << 10, PAGE = 4096 };

/* A size code is a shift (bits 0-4) and an index into mult[] (bits 5-6). */
static const uint32_t mult[4] = {1, 100, 1000, 10000};
static uint32_t lo_shift, nshifts;
static uint64_t cookie_key;

static _Atomic(void*) shared[SHARED];
static _Atomic(void*) handoff; /* tasks mode: a handoff_t left for the next thread */
static _Atomic int64_t live_bytes, peak_live;
static _Atomic uint64_t nblocks, bad_blocks;

/* A thread's PRNG and the live bytes and blocks it has not yet added to the
 * global counters: an atomic per block would cost as much as the malloc. */
typedef struct {
  uint64_t rng;
  int64_t unflushed;
  uint64_t blocks;
} ctx_t;

typedef struct {
  size_t n;
  void* p[];
} handoff_t;

static void ctx_init(ctx_t* c, uint64_t a, uint64_t b) {
  uint64_t s = seed ^ (a << 16 | b);
  c->rng = b_rng(&s);
  c->unflushed = 0;
  c->blocks = 0;
}

static void live_flush(ctx_t* c) {
  int64_t now = atomic_fetch_add_explicit(&live_bytes, c->unflushed, memory_order_relaxed) + c->unflushed;
  c->unflushed = 0;
  int64_t pk = atomic_load_explicit(&peak_live, memory_order_relaxed);
  while (now > pk &&
         !atomic_compare_exchange_weak_explicit(&peak_live, &pk, now, memory_order_relaxed, memory_order_relaxed)) {
  }
}

/* peak_live_bytes is therefore exact to within LIVE_SLACK per running thread. */
static inline void live_add(ctx_t* c, int64_t d) {
  c->unflushed += d;
  if (B_UNLIKELY(c->unflushed >= LIVE_SLACK || c->unflushed <= -LIVE_SLACK)) live_flush(c);
}

static void ctx_done(ctx_t* c) {
  live_flush(c);
  atomic_fetch_add_explicit(&nblocks, c->blocks, memory_order_relaxed);
}

static inline uint32_t pick(ctx_t* c, uint32_t n) { return b_bounded((uint32_t)(b_rng(&c->rng) >> 32), n); }

static inline size_t code_size(uint64_t code) { return ((size_t)1 << (code & 31)) * mult[(code >> 5) & 3]; }

static inline uint64_t cookie(const void* p, uint64_t code) {
  return ((((uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull) ^ cookie_key) & ~0xFFull) | code;
}

static void* new_block(ctx_t* c) {
  uint64_t r = b_rng(&c->rng);
  uint64_t code = lo_shift + b_bounded((uint32_t)(r >> 32), nshifts);
  if (large) {
    uint32_t x = b_bounded((uint32_t)r, 10000);
    if (B_UNLIKELY(x < 111)) code |= (uint64_t)(x < 1 ? 3 : x < 11 ? 2 : 1) << 5;
  }
  size_t size = code_size(code);
  unsigned char* p = malloc(size);
  if (B_UNLIKELY(p == NULL)) b_oom(size);
  uint64_t ck = cookie(p, code);
  for (size_t off = 0; off < size; off += PAGE) memcpy(p + off, &ck, 8);
  memcpy(p + size - 8, &ck, 8);
  live_add(c, (int64_t)size);
  c->blocks++;
  return p;
}

/* A block whose first cookie is wrong is counted and not freed: its size is
 * lost with it. */
static void free_block(ctx_t* c, void* q) {
  if (q == NULL) return;
  unsigned char* p = q;
  uint64_t head;
  memcpy(&head, p, 8);
  if (B_UNLIKELY(head != cookie(p, head & 0x7F))) {
    atomic_fetch_add_explicit(&bad_blocks, 1, memory_order_relaxed);
    return;
  }
  size_t size = code_size(head);
  uint64_t diff = 0, w;
  for (size_t off = PAGE; off < size; off += PAGE) {
    memcpy(&w, p + off, 8);
    diff |= w ^ head;
  }
  memcpy(&w, p + size - 8, 8);
  if (B_UNLIKELY((diff | (w ^ head)) != 0)) atomic_fetch_add_explicit(&bad_blocks, 1, memory_order_relaxed);
  live_add(c, -(int64_t)size);
  free(p);
}

static void* xmalloc(ctx_t* c, size_t size) {
  void* p = malloc(size);
  if (p == NULL) b_oom(size);
  live_add(c, (int64_t)size);
  return p;
}

static void xfree(ctx_t* c, void* p, size_t size) {
  live_add(c, -(int64_t)size);
  free(p);
}

/* One thread's work in round r (rounds mode). */
static void round_work(uint64_t t, uint64_t r) {
  ctx_t c;
  ctx_init(&c, r, t);
  uint64_t n = allocs * (t % 8 + 1);
  void** kept = xmalloc(&c, n * sizeof *kept);
  void** data = NULL;
  size_t nkept = 0, ndata = 0, cap = 0;
  for (uint64_t i = 0; i < n; i++) {
    void* p = new_block(&c);
    if (b_rng(&c.rng) & 1) {
      kept[nkept++] = p;
    } else {
      if (ndata == cap) {
        data = realloc(data, (cap + DATA_STEP) * sizeof *data);
        if (data == NULL) b_oom((cap + DATA_STEP) * sizeof *data);
        live_add(&c, DATA_STEP * sizeof *data);
        cap += DATA_STEP;
      }
      data[ndata++] = p;
    }
    if (ndata == 0) continue;
    if (pick(&c, 100) < 66) {
      uint32_t k = pick(&c, (uint32_t)ndata);
      free_block(&c, data[k]);
      data[k] = NULL;
    }
    if (pick(&c, 100) < transfer) {
      uint32_t k = pick(&c, (uint32_t)ndata);
      data[k] = atomic_exchange_explicit(&shared[pick(&c, SHARED)], data[k], memory_order_acq_rel);
    }
  }
  for (size_t k = 0; k < nkept; k++) free_block(&c, kept[k]);
  for (size_t k = 0; k < ndata; k++) free_block(&c, data[k]);
  xfree(&c, kept, n * sizeof *kept);
  if (data) xfree(&c, data, cap * sizeof *data);
  ctx_done(&c);
}

typedef struct {
  uint64_t t, r;
} targ_t;

static void* worker(void* arg) {
  targ_t* a = arg;
  round_work(a->t, a->r);
  return NULL;
}

static void free_handoff(ctx_t* c, handoff_t* h) {
  if (h == NULL) return;
  for (size_t k = 0; k < h->n; k++) free_block(c, h->p[k]);
  xfree(c, h, sizeof *h + h->n * sizeof h->p[0]);
}

/* Task k (tasks mode): free what the last thread handed off, allocate, leave
 * every other block in a shared slot (freeing what was there) and the rest in
 * the hand-off slot. */
static void* task(void* arg) {
  uint64_t k = (uint64_t)(uintptr_t)arg;
  ctx_t c;
  ctx_init(&c, k, 0);
  uint64_t n = allocs * (k % 8 + 1);
  free_handoff(&c, atomic_exchange_explicit(&handoff, NULL, memory_order_acq_rel));
  handoff_t* h = xmalloc(&c, sizeof *h + n / 2 * sizeof h->p[0]);
  h->n = 0;
  for (uint64_t i = 0; i < n; i++) {
    void* p = new_block(&c);
    if (i & 1) h->p[h->n++] = p;
    else free_block(&c, atomic_exchange_explicit(&shared[pick(&c, SHARED)], p, memory_order_acq_rel));
  }
  free_handoff(&c, atomic_exchange_explicit(&handoff, h, memory_order_acq_rel));
  ctx_done(&c);
  return NULL;
}

static void start(pthread_t* tid, void* (*fn)(void*), void* arg) {
  if (pthread_create(tid, NULL, fn, arg) != 0) b_die(1, "pthread_create failed");
}

static uint64_t run_rounds(void) {
  pthread_t* tid = calloc(threads, sizeof *tid);
  targ_t* targ = calloc(threads, sizeof *targ);
  if (!tid || !targ) b_oom(threads * sizeof *targ);
  ctx_t mc;
  ctx_init(&mc, rounds, 0);
  for (uint64_t r = 0; r < rounds; r++) {
    for (uint64_t t = 1; t < threads; t++) {
      targ[t] = (targ_t){t, r};
      start(&tid[t], worker, &targ[t]);
    }
    round_work(0, r);
    for (uint64_t t = 1; t < threads; t++) pthread_join(tid[t], NULL);
    for (uint32_t j = 0; j < SHARED; j++)
      if (r + 1 == rounds || (j + r) % 2 == 0)
        free_block(&mc, atomic_exchange_explicit(&shared[j], NULL, memory_order_acq_rel));
  }
  ctx_done(&mc);
  free(tid);
  free(targ);
  return (threads - 1) * rounds;
}

static uint64_t run_tasks(void) {
  pthread_t* tid = calloc(threads, sizeof *tid);
  if (!tid) b_oom(threads * sizeof *tid);
  for (uint64_t k = 0; k < tasks; k++) {
    if (k >= threads) pthread_join(tid[k % threads], NULL);
    start(&tid[k % threads], task, (void*)(uintptr_t)k);
  }
  for (uint64_t k = 0; k < threads && k < tasks; k++) pthread_join(tid[k], NULL);
  ctx_t mc;
  ctx_init(&mc, tasks, 1);
  free_handoff(&mc, atomic_exchange_explicit(&handoff, NULL, memory_order_acq_rel));
  for (uint32_t j = 0; j < SHARED; j++)
    free_block(&mc, atomic_exchange_explicit(&shared[j], NULL, memory_order_acq_rel));
  ctx_done(&mc);
  free(tid);
  return tasks;
}

int main(int argc, char** argv) {
  b_parse(argc, argv,
          "Thread churn: rounds of THREADS threads (or TASKS short threads) allocate, keep, free and\n"
          "swap blocks through shared slots, so blocks outlive the thread that allocated them.",
          opts);
  (void)b_size_span(minsz, maxsz); /* only its checks: sizes are powers of two */
  while (((uint64_t)1 << lo_shift) < minsz) lo_shift++;
  uint32_t hi_shift = 0;
  while (((uint64_t)2 << hi_shift) <= maxsz) hi_shift++;
  if (hi_shift < lo_shift) b_die(2, "no power of two in [--min, --max] = [%" PRIu64 ", %" PRIu64 "]", minsz, maxsz);
  nshifts = hi_shift - lo_shift + 1;
  int tasks_mode = strcmp(mode, "tasks") == 0;
  if (allocs == 0) allocs = tasks_mode ? 100 : 5000;
  uint64_t ks = seed ^ 0xC0FFEEull;
  cookie_key = b_rng(&ks);

  b_snap_t a, b;
  b_snap(&a);
  uint64_t started = tasks_mode ? run_tasks() : run_rounds();
  b_snap(&b);

  uint64_t bad = atomic_load(&bad_blocks);
  int64_t live_end = atomic_load(&live_bytes), peak = atomic_load(&peak_live);
  if (bad) fprintf(stderr, "%s: %" PRIu64 " blocks lost their cookies\n", b_prog, bad);
  else if (live_end != 0) fprintf(stderr, "%s: %" PRId64 " live bytes left at the end\n", b_prog, live_end);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);

  b_result_t r;
  b_result_begin(&r, "churn");
  b_kv(&r, "mode=%s", mode);
  b_kv(&r, "threads=%" PRIu64, threads);
  if (tasks_mode) b_kv(&r, "tasks=%" PRIu64, tasks);
  else b_kv(&r, "rounds=%" PRIu64, rounds);
  b_kv(&r, "allocs=%" PRIu64, allocs);
  b_kv(&r, "min=%" PRIu64, minsz);
  b_kv(&r, "max=%" PRIu64, maxsz);
  b_kv(&r, "transfer=%" PRIu64, transfer);
  b_kv(&r, "large=%" PRIu64, large);
  b_kv(&r, "seed=%" PRIu64, seed);
  b_kv(&r, "blocks=%" PRIu64, atomic_load(&nblocks));
  b_kv(&r, "threads_started=%" PRIu64, started);
  b_kv(&r, "peak_live_bytes=%" PRId64, peak);
  b_kv(&r, "peak_overhead=%.3f", peak > 0 ? (double)ru.ru_maxrss * 1024.0 / (double)peak : 0.0);
  b_kv(&r, "live_end_bytes=%" PRId64, live_end);
  /* under hakmem: the address space it holds at the end, against the peak
   * live bytes (the bound: at most 2 x peak live + 64 MiB) */
  void (*os_stats)(void*) = (void (*)(void*))dlsym(RTLD_DEFAULT, "hak_os_stats");
  if (os_stats != NULL) {
    size_t st[10];   /* hak_os_stats_t: 10 size_t counters, mapped_bytes 9th (include/hakmem.h) */
    os_stats(st);
    b_kv(&r, "hak_mapped_end_bytes=%zu", st[8]);
    b_kv(&r, "hak_peak_mapped_bytes=%zu", st[9]);
  }
  b_kv(&r, "check=%s", bad || live_end ? "FAIL" : "ok");
  b_result_end(&r, &a, &b, "elapsed_s", "lower");
  return bad || live_end ? 1 : 0;
}
