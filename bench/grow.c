/* grow — buffers grown by realloc through every size from 4 KiB to
 * 128 KiB, a few kept at a time.
 *
 * Each round starts a buffer of 4 KiB + 512 B * (round % 7), writes it,
 * and grows it by half until it passes MAX (realloc, each new part
 * written); the finished buffer replaces the oldest of KEEP kept ones.  So
 * at any moment KEEP buffers live and one grows through ~10 sizes.  A
 * string builder, a serialiser or a sort's run buffer does this.  Peak RSS
 * is the figure: an allocator whose freed blocks of one size serve another
 * (glibc coalesces) holds little more than the live buffers; one with a
 * slab per size class holds each class's own high water (issue 26: this
 * is espresso's and sqlite's excess over glibc).  heap_kb is the process's
 * RSS at the end less its RSS before the first round. */
#define _GNU_SOURCE
#include "bench_common.h"

static uint64_t rounds = 2000, keep = 4, max = 120u << 10;

static const b_opt_t opts[] = {
    B_OPT_U("rounds", "ROUNDS", &rounds, 1, UINT64_MAX, "buffers grown"),
    B_OPT_U("keep", "KEEP", &keep, 1, 1024, "finished buffers kept (the oldest freed)"),
    B_OPT_U("max", "MAX", &max, 8192, 1u << 30, "a buffer grows until it passes this many bytes"),
    B_OPT_LAST};

int main(int argc, char** argv) {
  b_parse(argc, argv, "buffers grown by realloc through the sizes from 4 KiB up, a few kept", opts);
  char** kept = calloc(keep, sizeof *kept);
  if (kept == NULL) b_oom(keep * sizeof *kept);
  uint64_t rss0 = b_rss_kb(), bad = 0;
  b_snap_t a, b;
  b_snap(&a);
  for (uint64_t r = 0; r < rounds; r++) {
    size_t n = 4096 + (size_t)(r % 7) * 512;
    const char c = (char)(r & 0x7f);   /* the round's fill byte */
    char* p = malloc(n);
    if (p == NULL) b_oom(n);
    memset(p, c, n);
    while (n <= max) {
      size_t m = n + n / 2;
      char* q = realloc(p, m);
      if (q == NULL) b_oom(m);
      bad += q[0] != c || q[n - 1] != c;   /* the contents moved with it */
      memset(q + n, c, m - n);
      p = q;
      n = m;
    }
    free(kept[r % keep]);
    kept[r % keep] = p;
  }
  b_snap(&b);
  uint64_t rss1 = b_rss_kb();
  for (uint64_t i = 0; i < keep; i++) free(kept[i]);
  free(kept);
  b_result_t res;
  b_result_begin(&res, "grow");
  b_kv_rate(&res, &a, &b, rounds);
  b_kv(&res, "heap_kb=%" PRIu64, rss1 > rss0 ? rss1 - rss0 : 0);
  b_kv(&res, "check=%s", bad ? "FAIL" : "ok");
  b_result_end(&res, &a, &b, "peak_rss_kb", "lower");
  return bad ? 1 : 0;
}
