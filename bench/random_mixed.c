/* random_mixed — the single-threaded mixed small-size workload.
 *
 * WS live slots; each operation draws a slot and a size uniform in [MIN, MAX]
 * from one splitmix64 number, frees the slot's block (if any), allocates a new
 * block of that size and writes to it once (--touch: by default the first
 * min(size, 64) bytes).  ops_per_sec counts these free+malloc operations.
 *
 * --usable=1 asks malloc_usable_size of each block after its malloc and
 * before its free, and counts the bytes, as Redis's zmalloc does on every
 * allocation (its used_memory): the path a real server takes that plain
 * malloc/free loops do not (issue 27).
 *
 * Steps mode (--steps=N and/or --duration=SEC, with --step-iters=N) runs the
 * same loop in one process and prints after each step
 *   STEP step=K t_s=T ops=N ops_per_sec=X rss_kb=R cpu_ops_per_sec=C
 *   (C: operations per second of process CPU time, which leaves out the
 *   time the process waited for a core on a shared machine)
 * (used by scripts/soak.sh), then the RESULT line over all steps. */
#include "bench_common.h"
#include <malloc.h>

static uint64_t iters = 20000000, ws = 400, minsz = 16, maxsz = 1024, seed = 42;
static uint64_t steps = 0, step_iters = 2000000;
static double duration = 0;
static const char* touch = "first";
static uint64_t usable = 0;
static size_t usable_bytes;   /* what --usable counted (printed, so the calls stay) */

static const b_opt_t opts[] = {
    B_OPT_U("iters", "ITERS", &iters, 1, UINT64_MAX, "operations (free + malloc) to run"),
    B_OPT_U("ws", "WS", &ws, 1, 1u << 30, "working set: live slots"),
    B_OPT_U("min", "MIN", &minsz, 1, 1ull << 40, "smallest block size in bytes"),
    B_OPT_U("max", "MAX", &maxsz, 1, 1ull << 40, "largest block size in bytes"),
    B_OPT_U("seed", "SEED", &seed, 0, UINT64_MAX, "PRNG seed"),
    B_OPT_C("touch", "TOUCH", &touch, "first|lines|none", "how each new block is written"),
    B_OPT_U("usable", "USABLE", &usable, 0, 1, "1: malloc_usable_size of each block after malloc and before free (Redis)"),
    B_OPT_U("steps", "STEPS", &steps, 0, UINT64_MAX, "steps mode: number of steps (0 = until --duration)"),
    B_OPT_D("duration", "DURATION_SEC", &duration, 0, 1u << 30, "steps mode: run this many seconds (0 = off)"),
    B_OPT_U("step-iters", "STEP_ITERS", &step_iters, 1, UINT64_MAX, "steps mode: operations per step"),
    B_OPT_LAST};

static unsigned char** slots;
static uint64_t rng;
static uint32_t span;
static int tmode;

/* The measured loop: kept free of anything but the PRNG, the allocator calls
 * and the write. */
static B_NOINLINE void run_ops(uint64_t n) { b_replace_ops(slots, n, (uint32_t)ws, (size_t)minsz, span, tmode, &rng); }
/* The same loop with the usable-size calls of a server that counts its memory. */
static B_NOINLINE void run_ops_usable(uint64_t n) {
  uint64_t st = rng;
  size_t counted = usable_bytes;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t r = b_rng(&st);
    uint32_t k = b_bounded((uint32_t)(r >> 32), (uint32_t)ws);
    size_t size = (size_t)minsz + b_bounded((uint32_t)r, span);
    if (slots[k] != NULL) counted -= malloc_usable_size(slots[k]);
    free(slots[k]);
    unsigned char* p = malloc(size);
    if (B_UNLIKELY(p == NULL)) b_oom(size);
    counted += malloc_usable_size(p);
    b_touch(tmode, p, size, (unsigned char)k);
    slots[k] = p;
  }
  usable_bytes = counted;
  rng = st;
}

int main(int argc, char** argv) {
  b_parse(argc, argv,
          "Mixed small-size workload: WS live slots, each operation frees a random slot's block and\n"
          "allocates a new one of a uniform random size in [MIN, MAX], writing it once.",
          opts);
  span = b_size_span(minsz, maxsz);
  tmode = b_touch_mode(touch);
  rng = seed;
  slots = calloc(ws, sizeof *slots);
  if (!slots) b_oom(ws * sizeof *slots);
  int stepping = steps > 0 || duration > 0;

  b_snap_t a, b;
  b_snap(&a);
  uint64_t done = 0;
  if (!stepping) {
    if (usable) run_ops_usable(iters);
    else run_ops(iters);
    done = iters;
  } else {
    uint64_t t_end = duration > 0 ? a.t_ns + (uint64_t)(duration * 1e9) : UINT64_MAX;
    b_snap_t prev = a, now;
    for (uint64_t k = 1; steps == 0 || k <= steps; k++) {
      if (usable) run_ops_usable(step_iters);
      else run_ops(step_iters);
      done += step_iters;
      b_snap(&now);
      double dt = (double)(now.t_ns - prev.t_ns) / 1e9, dc = (double)(now.cpu_ns - prev.cpu_ns) / 1e9;
      printf("STEP step=%" PRIu64 " t_s=%.3f ops=%" PRIu64 " ops_per_sec=%.0f rss_kb=%" PRIu64 " cpu_ops_per_sec=%.0f\n",
             k, (double)(now.t_ns - a.t_ns) / 1e9, step_iters, dt > 0 ? (double)step_iters / dt : 0.0, b_rss_kb(),
             dc > 0 ? (double)step_iters / dc : 0.0);
      fflush(stdout);
      prev = now;
      if (now.t_ns >= t_end) break;
    }
  }
  b_snap(&b);

  /* Untimed: every live block still holds its slot's byte; free them all. */
  uint64_t bad = 0;
  for (uint64_t k = 0; k < ws; k++) {
    if (slots[k] && tmode != B_TOUCH_NONE && slots[k][0] != (unsigned char)k) bad++;
    if (usable && slots[k]) usable_bytes -= malloc_usable_size(slots[k]);
    free(slots[k]);
  }
  free(slots);
  if (bad) fprintf(stderr, "%s: %" PRIu64 " live blocks lost their contents\n", b_prog, bad);
  /* a block's usable size is the same at its malloc and at its free */
  if (usable && usable_bytes != 0) {
    fprintf(stderr, "%s: usable sizes counted at malloc and at free differ by %zu bytes\n", b_prog, usable_bytes);
    bad++;
  }

  b_result_t r;
  b_result_begin(&r, "random_mixed");
  b_kv_rate(&r, &a, &b, done);
  b_kv(&r, "ws=%" PRIu64, ws);
  b_kv(&r, "min=%" PRIu64, minsz);
  b_kv(&r, "max=%" PRIu64, maxsz);
  b_kv(&r, "seed=%" PRIu64, seed);
  b_kv(&r, "touch=%s", touch);
  b_kv(&r, "usable=%" PRIu64, usable);
  b_kv(&r, "threads=1");
  b_kv(&r, "check=%s", bad ? "FAIL" : "ok");
  b_result_end(&r, &a, &b, "ops_per_sec", "higher");
  return bad ? 1 : 0;
}
