/* latency — per-operation latency of malloc and free on the mixed workload.
 *
 * The random_mixed loop (WS slots, sizes uniform in [MIN, MAX]), with every
 * free and every malloc timed on its own:
 *     t0 = now(); free(old); t1 = now(); p = malloc(size); t2 = now();
 * The timer is the TSC (rdtscp + lfence, calibrated against CLOCK_MONOTONIC)
 * on x86, clock_gettime elsewhere or with --timer=clock.  Its own overhead
 * (the median of back-to-back readings) is measured first and subtracted from
 * every sample (clamped at 0).  Samples go into a log-linear histogram (32
 * sub-buckets per power of two: <= 3 % error); percentiles are bucket
 * midpoints, max is exact.  The first WARMUP operations are not recorded.
 * Reported per malloc_, free_ and over both (no prefix): p50 p90 p99 p999
 * max mean, in ns.  The timer's step (timer_resolution_ns) bounds the precision:
 * on virtual machines the TSC may advance in steps of ~10 ns. */
#include "bench_common.h"
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#else
#define HAVE_TSC 0
#endif

static uint64_t iters = 5000000, warmup = 100000, ws = 400, minsz = 16, maxsz = 1024, seed = 42;
static const char* timer = HAVE_TSC ? "tsc" : "clock";
static const char* touch = "first";

static const b_opt_t opts[] = {
    B_OPT_U("iters", "ITERS", &iters, 1, UINT64_MAX, "recorded operations (one free + one malloc each)"),
    B_OPT_U("warmup", "WARMUP", &warmup, 0, UINT64_MAX, "operations run before recording"),
    B_OPT_U("ws", "WS", &ws, 1, 1u << 30, "working set: live slots"),
    B_OPT_U("min", "MIN", &minsz, 1, 1ull << 40, "smallest block size"),
    B_OPT_U("max", "MAX", &maxsz, 1, 1ull << 40, "largest block size"),
    B_OPT_U("seed", "SEED", &seed, 0, UINT64_MAX, "PRNG seed"),
    B_OPT_C("timer", "TIMER", &timer, "tsc|clock", "time source"),
    B_OPT_C("touch", "TOUCH", &touch, "first|lines|none", "how each new block is written"),
    B_OPT_LAST};

/* ------------------------------------------------------------ histogram */
#define H_SUB_BITS 5
#define H_SUB (1u << H_SUB_BITS)
#define H_LINEAR (2u * H_SUB)
#define H_BUCKETS (H_LINEAR + (64u - H_SUB_BITS - 1u) * H_SUB)

typedef struct {
  uint64_t n[H_BUCKETS];
  uint64_t count, sum, max;
} hist_t;

static inline unsigned h_index(uint64_t v) {
  if (v < H_LINEAR) return (unsigned)v;
  unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= H_SUB_BITS + 1 */
  unsigned sub = (unsigned)(v >> (e - H_SUB_BITS)) & (H_SUB - 1);
  return H_LINEAR + (e - H_SUB_BITS - 1) * H_SUB + sub;
}

/* Midpoint of a bucket's range. */
static double h_value(unsigned i) {
  if (i < H_LINEAR) return (double)i;
  unsigned e = (i - H_LINEAR) / H_SUB + H_SUB_BITS + 1, sub = (i - H_LINEAR) % H_SUB;
  double width = (double)(1ull << (e - H_SUB_BITS));
  return (double)(H_SUB + sub) * width + width / 2;
}

static inline void h_add(hist_t* h, uint64_t v) {
  h->n[h_index(v)]++;
  h->count++;
  h->sum += v;
  if (v > h->max) h->max = v;
}

static void h_merge(hist_t* dst, const hist_t* a, const hist_t* b) {
  for (unsigned i = 0; i < H_BUCKETS; i++) dst->n[i] = a->n[i] + b->n[i];
  dst->count = a->count + b->count;
  dst->sum = a->sum + b->sum;
  dst->max = a->max > b->max ? a->max : b->max;
}

static double h_pct(const hist_t* h, double p) {
  if (h->count == 0) return 0;
  uint64_t target = (uint64_t)(p * (double)h->count + 0.999999);
  if (target < 1) target = 1;
  uint64_t cum = 0;
  for (unsigned i = 0; i < H_BUCKETS; i++) {
    cum += h->n[i];
    if (cum >= target) {
      double v = h_value(i);
      return v > (double)h->max ? (double)h->max : v;
    }
  }
  return (double)h->max;
}

/* ----------------------------------------------------------------- timer */
static int use_tsc;

static inline uint64_t t_now(void) {
#if HAVE_TSC
  if (use_tsc) {
    unsigned aux;
    uint64_t t = __rdtscp(&aux);
    _mm_lfence();
    return t;
  }
#endif
  return b_now_ns();
}

static double ticks_per_ns = 1.0;

static void calibrate(void) {
  if (!use_tsc) return;
  uint64_t n0 = b_now_ns(), c0 = t_now(), n1, c1;
  do {
    n1 = b_now_ns();
    c1 = t_now();
  } while (n1 - n0 < 50000000ull); /* 50 ms */
  ticks_per_ns = (double)(c1 - c0) / (double)(n1 - n0);
  if (!(ticks_per_ns > 0.01)) b_die(1, "TSC calibration failed; use --timer=clock");
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static uint64_t timer_resolution; /* smallest nonzero step seen, in ticks */

/* Median cost, in ticks, of two back-to-back timer readings. */
static uint64_t timer_overhead(void) {
  enum { N = 100001 };
  static uint64_t d[N];
  for (int i = 0; i < N; i++) {
    uint64_t t0 = t_now();
    uint64_t t1 = t_now();
    d[i] = t1 - t0;
  }
  qsort(d, N, sizeof d[0], cmp_u64);
  /* Resolution: the smallest step between successive distinct readings. */
  uint64_t best = UINT64_MAX, prev = t_now();
  for (int changes = 0, i = 0; changes < 1000 && i < 10000000; i++) {
    uint64_t t = t_now();
    if (t != prev) {
      if (t - prev < best) best = t - prev;
      changes++;
      prev = t;
    }
  }
  timer_resolution = best == UINT64_MAX ? 0 : best;
  return d[N / 2];
}

static hist_t hm, hf, hall;

static void report(b_result_t* r, const char* prefix, const hist_t* h) {
  static const struct {
    const char* name;
    double p;
  } ps[] = {{"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}, {"p999", 0.999}};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    b_kv(r, "%s%s_ns=%.1f", prefix, ps[i].name, h_pct(h, ps[i].p) / ticks_per_ns);
  b_kv(r, "%smax_ns=%.1f", prefix, (double)h->max / ticks_per_ns);
  b_kv(r, "%smean_ns=%.2f", prefix, h->count ? (double)h->sum / (double)h->count / ticks_per_ns : 0.0);
}

int main(int argc, char** argv) {
  b_parse(argc, argv,
          "Tail latency of malloc and free on the mixed workload: every call timed, log histogram,\n"
          "timer overhead subtracted.  Reports p50/p90/p99/p99.9/max in ns.",
          opts);
  const uint32_t sp = b_size_span(minsz, maxsz);
  use_tsc = HAVE_TSC && strcmp(timer, "tsc") == 0;
  calibrate();
  const uint64_t ovh = timer_overhead();

  const uint32_t w = (uint32_t)ws;
  const int tm = b_touch_mode(touch);
  unsigned char** s = calloc(ws, sizeof *s);
  if (!s) b_oom(ws * sizeof *s);
  uint64_t st = seed;
  for (uint64_t i = 0; i < warmup; i++) {
    uint64_t r = b_rng(&st);
    uint32_t k = b_bounded((uint32_t)(r >> 32), w);
    size_t size = minsz + b_bounded((uint32_t)r, sp);
    free(s[k]);
    unsigned char* p = malloc(size);
    if (!p) b_oom(size);
    b_touch(tm, p, size, (unsigned char)k);
    s[k] = p;
  }

  b_snap_t a, b;
  b_snap(&a);
  for (uint64_t i = 0; i < iters; i++) {
    uint64_t r = b_rng(&st);
    uint32_t k = b_bounded((uint32_t)(r >> 32), w);
    size_t size = minsz + b_bounded((uint32_t)r, sp);
    unsigned char* old = s[k];
    uint64_t t0 = t_now();
    free(old);
    uint64_t t1 = t_now();
    unsigned char* p = malloc(size);
    uint64_t t2 = t_now();
    if (B_UNLIKELY(p == NULL)) b_oom(size);
    b_touch(tm, p, size, (unsigned char)k);
    s[k] = p;
    uint64_t df = t1 - t0, dm = t2 - t1;
    if (old) h_add(&hf, df > ovh ? df - ovh : 0);
    h_add(&hm, dm > ovh ? dm - ovh : 0);
  }
  b_snap(&b);
  for (uint64_t k = 0; k < ws; k++) free(s[k]);
  free(s);

  h_merge(&hall, &hm, &hf);
  double sec = (double)(b.t_ns - a.t_ns) / 1e9;
  b_result_t r;
  b_result_begin(&r, "latency");
  report(&r, "", &hall);
  report(&r, "malloc_", &hm);
  report(&r, "free_", &hf);
  b_kv(&r, "timer=%s", use_tsc ? "tsc" : "clock");
  b_kv(&r, "timer_overhead_ns=%.1f", (double)ovh / ticks_per_ns);
  b_kv(&r, "timer_resolution_ns=%.1f", (double)timer_resolution / ticks_per_ns);
  b_kv(&r, "tsc_ghz=%.4f", ticks_per_ns);
  b_kv(&r, "samples=%" PRIu64, hall.count);
  b_kv(&r, "ops_per_sec=%.0f", sec > 0 ? (double)iters / sec : 0.0);
  b_kv(&r, "ops=%" PRIu64, iters);
  b_kv(&r, "ws=%" PRIu64, ws);
  b_kv(&r, "min=%" PRIu64, minsz);
  b_kv(&r, "max=%" PRIu64, maxsz);
  b_kv(&r, "threads=1");
  b_result_end(&r, &a, &b, "p99_ns", "lower");
  return 0;
}
