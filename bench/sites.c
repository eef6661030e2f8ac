/* sites — four kinds of large-allocation call sites, interleaved, for the
 * call-site learning of hakmem (HAKMEM_LEARN) and any allocator.
 *   hot:       every op, malloc(256 KiB .. 320 KiB), write every page, free
 *              (one size reused at once: keeping the block pays)
 *   oneshot:   every ONESHOT_EVERY ops, a 24..64 MiB buffer written once and
 *              freed (rarely reused and huge: keeping it costs memory)
 *   grower:    every GROW_EVERY ops, a buffer grown by realloc (x1.5) from
 *              200 KiB to 24 MiB, each new part written, then freed
 *   longlived: a ring of LONG_WS blocks of 1..2 MiB, one replaced every
 *              LONG_EVERY ops (lives ~LONG_WS*LONG_EVERY ops)
 * Each kind calls malloc from its own function, so each is its own site.
 * Reports total time, peak RSS and page faults (also per kind, measured
 * around each kind's call with getrusage): the combined score. */
#include "bench_common.h"

static uint64_t iters = 4000, seed = 42, oneshot_every = 64, grow_every = 16, long_every = 8, long_ws = 16;

static const b_opt_t opts[] = {
    B_OPT_U("iters", "ITERS", &iters, 1, UINT64_MAX, "operations (one hot-site cycle each)"),
    B_OPT_U("seed", "SEED", &seed, 0, UINT64_MAX, "PRNG seed"),
    B_OPT_U("oneshot-every", "ONESHOT_EVERY", &oneshot_every, 1, 1u << 30, "ops between one-shot buffers"),
    B_OPT_U("grow-every", "GROW_EVERY", &grow_every, 1, 1u << 30, "ops between realloc-grown buffers"),
    B_OPT_U("long-every", "LONG_EVERY", &long_every, 1, 1u << 30, "ops between long-lived replacements"),
    B_OPT_U("long-ws", "LONG_WS", &long_ws, 1, 1u << 20, "long-lived blocks"),
    B_OPT_LAST};

static size_t page;
static uint64_t st;
static uint64_t faults_by_site[4];   /* minor faults taken inside each kind's function */

static long minflt_now(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}
#define SITE_CALL(k, f)                         \
  do {                                          \
    long f0_ = minflt_now();                    \
    f();                                        \
    faults_by_site[k] += (uint64_t)(minflt_now() - f0_); \
  } while (0)

static void write_pages(unsigned char* p, size_t from, size_t to) {
  for (size_t off = from; off < to; off += page) p[off] = (unsigned char)off;
}

static B_NOINLINE void site_hot(void) {
  size_t n = (256u << 10) + (b_rng(&st) & 0xffff);
  unsigned char* p = malloc(n);
  if (!p) b_oom(n);
  write_pages(p, 0, n);
  b_escape(p);
  free(p);
}

static B_NOINLINE void site_oneshot(void) {
  size_t n = (24u << 20) + b_bounded((uint32_t)b_rng(&st), 40u << 20);
  unsigned char* p = malloc(n);
  if (!p) b_oom(n);
  memset(p, 0x5A, n);
  b_escape(p);
  free(p);
}

static B_NOINLINE void site_grower(void) {
  size_t n = 200u << 10;
  unsigned char* p = malloc(n);
  if (!p) b_oom(n);
  write_pages(p, 0, n);
  while (n < (24u << 20)) {
    size_t m = n + n / 2;
    unsigned char* q = realloc(p, m);
    if (!q) b_oom(m);
    p = q;
    write_pages(p, n, m);
    n = m;
  }
  b_escape(p);
  free(p);
}

static unsigned char** ring;
static uint64_t ring_pos;
static B_NOINLINE void site_longlived(void) {
  uint64_t k = ring_pos++ % long_ws;
  free(ring[k]);
  size_t n = (1u << 20) + b_bounded((uint32_t)b_rng(&st), 1u << 20);
  ring[k] = malloc(n);
  if (!ring[k]) b_oom(n);
  write_pages(ring[k], 0, n);
}

int main(int argc, char** argv) {
  b_parse(argc, argv,
          "Four kinds of large-allocation call sites, interleaved (hot reuse, one-shot huge buffers,\n"
          "realloc growth, long-lived blocks).  Reports time, peak RSS and page faults.",
          opts);
  page = (size_t)sysconf(_SC_PAGESIZE);
  st = seed;
  ring = calloc(long_ws, sizeof *ring);
  if (!ring) b_oom(long_ws * sizeof *ring);
  b_snap_t a, b;
  b_snap(&a);
  for (uint64_t i = 0; i < iters; i++) {
    SITE_CALL(0, site_hot);
    if (i % oneshot_every == oneshot_every / 2) SITE_CALL(1, site_oneshot);
    if (i % grow_every == grow_every / 3) SITE_CALL(2, site_grower);
    if (i % long_every == 0) SITE_CALL(3, site_longlived);
  }
  b_snap(&b);
  for (uint64_t k = 0; k < long_ws; k++) free(ring[k]);
  free(ring);
  double ns = (double)(b.t_ns - a.t_ns);
  b_result_t r;
  b_result_begin(&r, "sites");
  b_kv(&r, "time_s=%.4f", ns / 1e9);
  b_kv(&r, "ops_per_sec=%.0f", ns > 0 ? (double)iters * 1e9 / ns : 0.0);
  b_kv(&r, "iters=%" PRIu64, iters);
  b_kv(&r, "seed=%" PRIu64, seed);
  b_kv(&r, "threads=1");
  b_kv(&r, "minflt_hot=%" PRIu64, faults_by_site[0]);
  b_kv(&r, "minflt_oneshot=%" PRIu64, faults_by_site[1]);
  b_kv(&r, "minflt_grower=%" PRIu64, faults_by_site[2]);
  b_kv(&r, "minflt_longlived=%" PRIu64, faults_by_site[3]);
  b_result_end(&r, &a, &b, "time_s", "lower");
  return 0;
}
