/* vm — large blocks and the OS: page faults, RSS and time per large malloc.
 *
 * --mode=hot (bench=vm, the prototype's "VM scenario"): ITERS times
 *   malloc(SIZE) (default 2 MiB), write one byte in every page, free.
 *   An allocator that keeps (caches) the block pays the page faults once;
 *   one that unmaps it pays SIZE/4096 faults and two syscalls every time.
 * --mode=cold (bench=vm_cold): WS live slots (default 4); each iteration
 *   frees a random slot's block and allocates a new one of a random size in
 *   [MIN, MAX] (default 256 KiB .. 8 MiB), writing every page, so that
 *   size-keyed caches mostly miss.
 * --duration=SEC repeats the ITERS iterations until SEC seconds have passed
 *   (scripts/bench.sh sets 0.3 s: a run of a few milliseconds is noise).
 * ns_per_op is the time of one iteration (malloc + touch + free). */
#include "bench_common.h"

static uint64_t iters = 100, size = 0, ws = 0, minsz = 0, maxsz = 0, seed = 42;
static double duration = 0;
static const char* mode = "hot";

static const b_opt_t opts[] = {
    B_OPT_C("mode", "VM_MODE", &mode, "hot|cold", "hot: one fixed size; cold: random large sizes"),
    B_OPT_U("iters", "ITERS", &iters, 1, UINT64_MAX, "iterations (malloc + touch every page + free)"),
    B_OPT_U("size", "SIZE", &size, 1, 1ull << 40, "hot: block size in bytes (0 = 2Mi)"),
    B_OPT_U("ws", "WS", &ws, 0, 1u << 20, "cold: live slots (0 = 4)"),
    B_OPT_U("min", "MIN", &minsz, 0, 1ull << 40, "cold: smallest size (0 = 256Ki)"),
    B_OPT_U("max", "MAX", &maxsz, 0, 1ull << 40, "cold: largest size (0 = 8Mi)"),
    B_OPT_U("seed", "SEED", &seed, 0, UINT64_MAX, "PRNG seed (cold)"),
    B_OPT_D("duration", "DURATION_SEC", &duration, 0, 1u << 30,
            "repeat the ITERS iterations until this many seconds have passed (0 = once)"),
    B_OPT_LAST};

static size_t page;

static inline void touch_pages(unsigned char* p, size_t n) {
  for (size_t off = 0; off < n; off += page) p[off] = (unsigned char)off;
  p[n - 1] = 1;
}

int main(int argc, char** argv) {
  b_parse(argc, argv,
          "Large blocks: malloc + write every page + free (hot: 2 MiB each time; cold: random sizes\n"
          "256 KiB..8 MiB over a few live slots).  Reports ns/op, page faults and RSS.",
          opts);
  page = (size_t)sysconf(_SC_PAGESIZE);
  int cold = strcmp(mode, "cold") == 0;
  if (!cold && size == 0) size = 2u << 20;
  if (cold) {
    if (ws == 0) ws = 4;
    if (minsz == 0) minsz = 256u << 10;
    if (maxsz == 0) maxsz = 8u << 20;
    (void)b_size_span(minsz, maxsz);
  }

  unsigned char** slots = NULL;
  if (cold) {
    slots = calloc(ws, sizeof *slots);
    if (!slots) b_oom(ws * sizeof *slots);
  }
  uint64_t st = seed, bytes = 0, done = 0;
  uint32_t span = cold ? b_size_span(minsz, maxsz) : 0;
  b_snap_t a, b;
  b_snap(&a);
  uint64_t t_end = a.t_ns + (uint64_t)(duration * 1e9);
  do {
    if (!cold) {
      for (uint64_t i = 0; i < iters; i++) {
        unsigned char* p = malloc(size);
        if (!p) b_oom(size);
        touch_pages(p, size);
        b_escape(p);
        free(p);
      }
      bytes += iters * size;
    } else {
      for (uint64_t i = 0; i < iters; i++) {
        uint64_t r = b_rng(&st);
        uint32_t k = b_bounded((uint32_t)(r >> 32), (uint32_t)ws);
        size_t n = minsz + b_bounded((uint32_t)r, span);
        free(slots[k]);
        unsigned char* p = malloc(n);
        if (!p) b_oom(n);
        touch_pages(p, n);
        slots[k] = p;
        bytes += n;
      }
    }
    done += iters;
  } while (duration > 0 && b_now_ns() < t_end);
  b_snap(&b);
  uint64_t rss_live = b_rss_kb();
  if (cold) {
    for (uint64_t k = 0; k < ws; k++) free(slots[k]);
    free(slots);
  }

  double ns = (double)(b.t_ns - a.t_ns);
  long minflt = b.ru.ru_minflt - a.ru.ru_minflt;
  b_result_t r;
  b_result_begin(&r, cold ? "vm_cold" : "vm");
  b_kv(&r, "ns_per_op=%.1f", ns / (double)done);
  b_kv(&r, "ops_per_sec=%.0f", ns > 0 ? (double)done * 1e9 / ns : 0.0);
  b_kv(&r, "minflt_per_op=%.2f", (double)minflt / (double)done);
  b_kv(&r, "gb_per_sec=%.3f", ns > 0 ? (double)bytes / ns : 0.0);
  b_kv(&r, "iters=%" PRIu64, done);
  if (cold) {
    b_kv(&r, "ws=%" PRIu64, ws);
    b_kv(&r, "min=%" PRIu64, minsz);
    b_kv(&r, "max=%" PRIu64, maxsz);
    b_kv(&r, "seed=%" PRIu64, seed);
  } else {
    b_kv(&r, "size=%" PRIu64, size);
  }
  b_kv(&r, "rss_loop_end_kb=%" PRIu64, rss_live);
  b_kv(&r, "threads=1");
  b_result_end(&r, &a, &b, "ns_per_op", "lower");
  return 0;
}
