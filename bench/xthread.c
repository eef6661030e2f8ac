/* xthread — every free is remote: producers allocate, consumers free.
 *
 * PRODUCERS threads allocate blocks (random sizes in [MIN, MAX], first bytes
 * written) and hand them over in batches of BATCH pointers through a bounded
 * queue of DEPTH batches; CONSUMERS threads take batches, read each block's
 * first byte and free it.  Batch containers are preallocated and recycled
 * through a second queue, so the only malloc/free calls are the measured
 * ones.  The queues are mutex + condition variable rings touched once per
 * batch (2 lock round trips per BATCH blocks on each side), which keeps their
 * cost small next to BATCH mallocs and frees.
 * ops_per_sec counts blocks (one malloc + one remote free each) per second.
 * --duration=SEC: the producers stop after SEC seconds instead of after ITERS
 * blocks (scripts/bench.sh: 0.3 s). */
#include "bench_common.h"

#include <pthread.h>

static uint64_t iters = 10000000, threads = 0, producers = 0, consumers = 0, batch = 256, depth = 16, minsz = 16,
                maxsz = 1024, seed = 42;
static double duration = 0;
static uint64_t t_end; /* with --duration: set before the start barrier */
static const char* touch = "first";

static const b_opt_t opts[] = {
    B_OPT_U("threads", "THREADS", &threads, 0, 4096, "threads (0 = number of CPUs, at least 2); half produce"),
    B_OPT_U("producers", "PRODUCERS", &producers, 0, 4096, "producer threads (0 = threads/2)"),
    B_OPT_U("consumers", "CONSUMERS", &consumers, 0, 4096, "consumer threads (0 = threads - producers)"),
    B_OPT_U("iters", "ITERS", &iters, 1, UINT64_MAX, "blocks to transfer in total"),
    B_OPT_U("batch", "BATCH", &batch, 1, 1u << 20, "blocks per queue transfer"),
    B_OPT_U("depth", "DEPTH", &depth, 1, 1u << 20, "queue capacity in batches"),
    B_OPT_U("min", "MIN", &minsz, 1, 1ull << 40, "smallest block size"),
    B_OPT_U("max", "MAX", &maxsz, 1, 1ull << 40, "largest block size"),
    B_OPT_U("seed", "SEED", &seed, 0, UINT64_MAX, "PRNG seed"),
    B_OPT_C("touch", "TOUCH", &touch, "first|lines|none", "how each new block is written"),
    B_OPT_D("duration", "DURATION_SEC", &duration, 0, 1u << 30,
            "producers stop after this many seconds instead of ITERS blocks (0 = off)"),
    B_OPT_LAST};

/* A bounded ring of batch pointers.  Capacity >= number of batches, so push
 * never waits; pop waits until an item arrives or the queue is closed. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  void** ring;
  size_t cap, head, count;
  int waiters, closed;
} queue_t;

static void q_init(queue_t* q, size_t cap) {
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cv, NULL);
  q->ring = calloc(cap, sizeof *q->ring);
  if (!q->ring) b_oom(cap * sizeof *q->ring);
  q->cap = cap;
  q->head = q->count = 0;
  q->waiters = q->closed = 0;
}

static void q_push(queue_t* q, void* item) {
  pthread_mutex_lock(&q->mu);
  q->ring[(q->head + q->count) % q->cap] = item;
  q->count++;
  int wake = q->waiters > 0;
  pthread_mutex_unlock(&q->mu);
  if (wake) pthread_cond_signal(&q->cv);
}

static void q_close(queue_t* q) {
  pthread_mutex_lock(&q->mu);
  q->closed = 1;
  pthread_mutex_unlock(&q->mu);
  pthread_cond_broadcast(&q->cv);
}

/* NULL when the queue is closed and empty. */
static void* q_pop(queue_t* q) {
  for (int spin = 0;; spin++) {
    pthread_mutex_lock(&q->mu);
    if (q->count > 0 || q->closed || spin >= 64) break;
    pthread_mutex_unlock(&q->mu);
    sched_yield();
  }
  while (q->count == 0 && !q->closed) {
    q->waiters++;
    pthread_cond_wait(&q->cv, &q->mu);
    q->waiters--;
  }
  void* item = NULL;
  if (q->count > 0) {
    item = q->ring[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
  }
  pthread_mutex_unlock(&q->mu);
  return item;
}

typedef struct {
  size_t n;
  unsigned char* p[];
} batch_t;

static queue_t full_q, empty_q;
static uint32_t span;
static int tmode;
static pthread_barrier_t start;

typedef struct {
  uint64_t quota, rng, sum;
} worker_t;

static void* producer(void* arg) {
  worker_t* w = arg;
  const uint32_t sp = span;
  const size_t lo = (size_t)minsz;
  const int tm = tmode;
  uint64_t st = w->rng, left = w->quota, made = 0;
  pthread_barrier_wait(&start);
  while (left > 0) {
    if (duration > 0 && b_now_ns() >= t_end) break;
    batch_t* bt = q_pop(&empty_q);
    size_t n = left < batch ? (size_t)left : (size_t)batch;
    for (size_t i = 0; i < n; i++) {
      uint64_t r = b_rng(&st);
      size_t size = lo + b_bounded((uint32_t)r, sp);
      unsigned char* p = malloc(size);
      if (B_UNLIKELY(p == NULL)) b_oom(size);
      b_touch(tm, p, size, (unsigned char)(r >> 56));
      bt->p[i] = p;
    }
    bt->n = n;
    left -= n;
    made += n;
    q_push(&full_q, bt);
  }
  w->quota = made; /* what this producer made */
  return NULL;
}

static void* consumer(void* arg) {
  worker_t* w = arg;
  uint64_t sum = 0, cnt = 0;
  const int tm = tmode;
  pthread_barrier_wait(&start);
  for (;;) {
    batch_t* bt = q_pop(&full_q);
    if (!bt) break;
    for (size_t i = 0; i < bt->n; i++) {
      if (tm != B_TOUCH_NONE) sum += bt->p[i][0];
      free(bt->p[i]);
    }
    cnt += bt->n;
    q_push(&empty_q, bt);
  }
  w->sum = sum;
  w->quota = cnt;
  return NULL;
}

int main(int argc, char** argv) {
  b_parse(argc, argv,
          "Remote frees: producer threads allocate, consumer threads free, blocks handed over in\n"
          "batches through a bounded queue.  Every free happens on another thread.",
          opts);
  if (threads == 0) threads = b_ncpus();
  if (threads < 2) threads = 2;
  if (producers == 0) producers = consumers ? (consumers < threads ? threads - consumers : 1) : threads / 2;
  if (consumers == 0) consumers = threads > producers ? threads - producers : 1;
  threads = producers + consumers;
  span = b_size_span(minsz, maxsz);
  tmode = b_touch_mode(touch);

  /* DEPTH batch containers bound the blocks in flight to DEPTH * BATCH. */
  size_t nbatch = (size_t)depth;
  q_init(&full_q, nbatch);
  q_init(&empty_q, nbatch);
  batch_t** all = calloc(nbatch, sizeof *all);
  if (!all) b_oom(nbatch * sizeof *all);
  for (size_t i = 0; i < nbatch; i++) {
    all[i] = calloc(1, sizeof(batch_t) + batch * sizeof(unsigned char*));
    if (!all[i]) b_oom(batch * sizeof(unsigned char*));
    q_push(&empty_q, all[i]);
  }

  pthread_t* tid = calloc(threads, sizeof *tid);
  worker_t* wk = calloc(threads, sizeof *wk);
  if (!tid || !wk) b_oom(threads * sizeof *wk);
  uint64_t sm = seed;
  for (uint64_t t = 0; t < producers; t++) {
    wk[t].quota = duration > 0 ? UINT64_MAX : iters / producers + (t < iters % producers ? 1 : 0);
    wk[t].rng = b_rng(&sm);
  }
  if (pthread_barrier_init(&start, NULL, (unsigned)threads + 1) != 0) b_die(1, "pthread_barrier_init failed");
  for (uint64_t t = 0; t < threads; t++)
    if (pthread_create(&tid[t], NULL, t < producers ? producer : consumer, &wk[t]) != 0)
      b_die(1, "pthread_create failed");

  b_snap_t a, b;
  b_snap(&a);
  t_end = a.t_ns + (uint64_t)(duration * 1e9);
  pthread_barrier_wait(&start);
  for (uint64_t t = 0; t < producers; t++) pthread_join(tid[t], NULL);
  q_close(&full_q);
  for (uint64_t t = producers; t < threads; t++) pthread_join(tid[t], NULL);
  b_snap(&b);

  uint64_t freed = 0, sum = 0, made = 0;
  for (uint64_t t = 0; t < producers; t++) made += wk[t].quota;
  for (uint64_t t = producers; t < threads; t++) {
    freed += wk[t].quota;
    sum += wk[t].sum;
  }
  for (size_t i = 0; i < nbatch; i++) free(all[i]);
  free(all);
  free(tid);
  free(wk);
  if (freed != made) b_die(1, "transferred %" PRIu64 " blocks, expected %" PRIu64, freed, made);

  b_result_t r;
  b_result_begin(&r, "xthread");
  b_kv_rate(&r, &a, &b, made);
  double cpu = b_cpu_s(&a, &b);
  b_kv(&r, "ops_per_cpu_sec=%.0f", cpu > 0 ? (double)made / cpu : 0.0);
  b_kv(&r, "threads=%" PRIu64, threads);
  b_kv(&r, "producers=%" PRIu64, producers);
  b_kv(&r, "consumers=%" PRIu64, consumers);
  b_kv(&r, "batch=%" PRIu64, batch);
  b_kv(&r, "depth=%" PRIu64, depth);
  b_kv(&r, "min=%" PRIu64, minsz);
  b_kv(&r, "max=%" PRIu64, maxsz);
  b_kv(&r, "checksum=%" PRIu64, sum);
  b_result_end(&r, &a, &b, "ops_per_sec", "higher");
  return 0;
}
