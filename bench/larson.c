/* larson — a Larson-style server simulation.
 *
 * T threads; each owns an array of WS slots for one round and replaces random
 * blocks in it (free the old block, malloc a new one of a random size in
 * [MIN, MAX], write it).  Between rounds the arrays move on: in round r thread
 * t works on array (t + r) mod T, so the first free of each slot in a round
 * releases a block another thread allocated (a cross-thread free).
 * --respawn=1 starts new threads every round (the old ones exit), as the
 * original Larson benchmark does, so blocks also outlive their thread.
 * ITERS is the total over all threads and rounds; ops_per_sec counts
 * free+malloc operations per second over all threads.
 * --duration=SEC runs rounds (of ITERS / ROUNDS operations each) until SEC
 * seconds have passed instead of ROUNDS of them (scripts/bench.sh: 0.3 s). */
#include "bench_common.h"

#include <pthread.h>

static uint64_t iters = 20000000, ws = 1000, minsz = 16, maxsz = 1024, seed = 42, threads = 0, rounds = 100,
                respawn = 0;
static double duration = 0;
static const char* touch = "first";

static const b_opt_t opts[] = {
    B_OPT_U("threads", "THREADS", &threads, 0, 4096, "threads (0 = number of CPUs)"),
    B_OPT_U("iters", "ITERS", &iters, 1, UINT64_MAX, "total operations over all threads"),
    B_OPT_U("ws", "WS", &ws, 1, 1u << 28, "slots per array (one array per thread)"),
    B_OPT_U("rounds", "ROUNDS", &rounds, 1, 1u << 24, "rounds; arrays change threads between rounds"),
    B_OPT_U("min", "MIN", &minsz, 1, 1ull << 40, "smallest block size"),
    B_OPT_U("max", "MAX", &maxsz, 1, 1ull << 40, "largest block size"),
    B_OPT_U("seed", "SEED", &seed, 0, UINT64_MAX, "PRNG seed"),
    B_OPT_U("respawn", "RESPAWN", &respawn, 0, 1, "1 = new threads every round (old ones exit)"),
    B_OPT_C("touch", "TOUCH", &touch, "first|lines|none", "how each new block is written"),
    B_OPT_D("duration", "DURATION_SEC", &duration, 0, 1u << 30,
            "run rounds until this many seconds have passed (0 = ROUNDS rounds)"),
    B_OPT_LAST};

typedef struct {
  unsigned char** slot;
  uint64_t rng;
} array_t;

static array_t* arrays;
static uint64_t per_round; /* operations per thread per round */
static uint32_t span;
static int tmode;
static pthread_barrier_t barrier;
/* Rounds to run.  With --duration the main thread sets it, before the barrier
 * that ends a round, to end the run with that round; the threads read it after
 * that barrier, which orders the two. */
static uint64_t last_round;

static void work(array_t* a) { b_replace_ops(a->slot, per_round, (uint32_t)ws, (size_t)minsz, span, tmode, &a->rng); }

typedef struct {
  uint64_t id, round;
} targ_t;

static void* persistent(void* arg) {
  targ_t* t = arg;
  pthread_barrier_wait(&barrier); /* start */
  for (uint64_t r = 0; r < last_round; r++) {
    work(&arrays[(t->id + r) % threads]);
    pthread_barrier_wait(&barrier);
  }
  return NULL;
}

static void* one_round(void* arg) {
  targ_t* t = arg;
  work(&arrays[(t->id + t->round) % threads]);
  return NULL;
}

int main(int argc, char** argv) {
  b_parse(argc, argv,
          "Larson-style server: THREADS threads replace random blocks in their arrays; arrays move to\n"
          "another thread every round, so blocks are freed by a thread other than their allocator.",
          opts);
  if (threads == 0) threads = b_ncpus();
  span = b_size_span(minsz, maxsz);
  tmode = b_touch_mode(touch);
  per_round = iters / (threads * rounds);
  if (per_round == 0) per_round = 1;
  last_round = duration > 0 ? UINT64_MAX : rounds;

  arrays = calloc(threads, sizeof *arrays);
  pthread_t* tid = calloc(threads, sizeof *tid);
  targ_t* targ = calloc(threads, sizeof *targ);
  if (!arrays || !tid || !targ) b_oom(threads * sizeof *arrays);
  uint64_t sm = seed;
  for (uint64_t t = 0; t < threads; t++) {
    arrays[t].slot = calloc(ws, sizeof *arrays[t].slot);
    if (!arrays[t].slot) b_oom(ws * sizeof *arrays[t].slot);
    arrays[t].rng = b_rng(&sm);
    targ[t].id = t;
  }

  b_snap_t a, b;
  if (!respawn) {
    if (pthread_barrier_init(&barrier, NULL, (unsigned)threads + 1) != 0) b_die(1, "pthread_barrier_init failed");
    for (uint64_t t = 0; t < threads; t++)
      if (pthread_create(&tid[t], NULL, persistent, &targ[t]) != 0) b_die(1, "pthread_create failed");
    b_snap(&a);
    uint64_t t_end = a.t_ns + (uint64_t)(duration * 1e9);
    pthread_barrier_wait(&barrier);
    for (uint64_t r = 0; r < last_round; r++) {
      if (duration > 0 && b_now_ns() >= t_end) last_round = r + 1;
      pthread_barrier_wait(&barrier);
    }
    b_snap(&b);
    for (uint64_t t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    pthread_barrier_destroy(&barrier);
  } else {
    b_snap(&a);
    uint64_t t_end = a.t_ns + (uint64_t)(duration * 1e9);
    for (uint64_t r = 0; r < last_round; r++) {
      if (duration > 0 && b_now_ns() >= t_end) last_round = r + 1;
      for (uint64_t t = 0; t < threads; t++) {
        targ[t].round = r;
        if (pthread_create(&tid[t], NULL, one_round, &targ[t]) != 0) b_die(1, "pthread_create failed");
      }
      for (uint64_t t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    }
    b_snap(&b);
  }
  uint64_t rss_live = b_rss_kb();
  uint64_t total = per_round * threads * last_round;

  uint64_t bad = 0;
  for (uint64_t t = 0; t < threads; t++) {
    for (uint64_t k = 0; k < ws; k++) {
      unsigned char* p = arrays[t].slot[k];
      if (p && tmode != B_TOUCH_NONE && p[0] != (unsigned char)k) bad++;
      free(p);
    }
    free(arrays[t].slot);
  }
  free(arrays);
  free(tid);
  free(targ);
  if (bad) fprintf(stderr, "%s: %" PRIu64 " live blocks lost their contents\n", b_prog, bad);

  b_result_t r;
  b_result_begin(&r, "larson");
  b_kv_rate(&r, &a, &b, total);
  double cpu = b_cpu_s(&a, &b);
  b_kv(&r, "ops_per_cpu_sec=%.0f", cpu > 0 ? (double)total / cpu : 0.0);
  b_kv(&r, "threads=%" PRIu64, threads);
  b_kv(&r, "rounds=%" PRIu64, last_round);
  b_kv(&r, "ws=%" PRIu64, ws);
  b_kv(&r, "min=%" PRIu64, minsz);
  b_kv(&r, "max=%" PRIu64, maxsz);
  b_kv(&r, "respawn=%" PRIu64, respawn);
  b_kv(&r, "rss_live_kb=%" PRIu64, rss_live);
  b_kv(&r, "check=%s", bad ? "FAIL" : "ok");
  b_result_end(&r, &a, &b, "ops_per_sec", "higher");
  return bad ? 1 : 0;
}
