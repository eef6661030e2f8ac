/* fragment — does memory come back after a scattered free, and is it reused?
 *
 * Phase 1 (grow):   allocate blocks of log-uniform sizes in [MIN, MAX]
 *                   (default 16 B .. 4 KiB), each fully written, until the
 *                   live bytes reach MB megabytes (default 200).
 * Phase 2 (free):   free every block except a random KEEP % (default 10 %),
 *                   so the survivors are scattered over all the memory.
 * Phase 3 (regrow): allocate blocks of other sizes, log-uniform in
 *                   [MIN2, MAX2] (default 4 KiB+1 .. 64 KiB), until the live
 *                   bytes reach MB again.
 * Phase 4 (end):    free everything.
 * RSS (from /proc/self/statm) is read after each phase: rss_grow_kb,
 * rss_after_free_kb, rss_final_kb, rss_end_kb; plus the live bytes at those
 * points and peak_rss_kb.  An allocator that reuses or returns the holes of
 * phase 2 ends phase 3 near the phase-1 figure; one that does not needs about
 * (1 + (1 - KEEP)) times as much.  rss_final_kb is the primary figure.
 * Pages released with MADV_FREE stay in RSS until the kernel reclaims them;
 * lazyfree_*_kb (/proc/self/smaps_rollup) shows how much of RSS is such.
 * RSS counts a page once per mapping: pages mapped at two addresses (meshed
 * pages, HAKMEM_MESH=1) count twice once both are touched; pss_*_kb
 * (proportional set size) counts each page once. */
#include "bench_common.h"

#include <math.h>
#include <sys/mman.h>

static uint64_t mb = 200, minsz = 16, maxsz = 4096, min2 = 4097, max2 = 65536, keep = 10, seed = 42,
                settle_ms = 0;

static const b_opt_t opts[] = {
    B_OPT_U("mb", "FRAG_MB", &mb, 1, 1u << 20, "live set target in MiB"),
    B_OPT_U("min", "MIN", &minsz, 1, 1ull << 40, "phase 1 smallest size"),
    B_OPT_U("max", "MAX", &maxsz, 1, 1ull << 40, "phase 1 largest size"),
    B_OPT_U("min2", "MIN2", &min2, 1, 1ull << 40, "phase 3 smallest size"),
    B_OPT_U("max2", "MAX2", &max2, 1, 1ull << 40, "phase 3 largest size"),
    B_OPT_U("keep", "KEEP", &keep, 0, 100, "percent of phase-1 blocks kept in phase 2"),
    B_OPT_U("seed", "SEED", &seed, 0, UINT64_MAX, "PRNG seed"),
    B_OPT_U("settle-ms", "SETTLE_MS", &settle_ms, 0, 600000, "sleep before each RSS reading (lazy purging)"),
    B_OPT_LAST};

typedef struct {
  unsigned char* p;
  size_t size;
} blk_t;

static blk_t* blocks;
static size_t nblocks, cap;
static uint64_t st;
static uint64_t ops;

/* Log-uniform size in [lo, hi]. */
static size_t draw_size(uint64_t lo, uint64_t hi) {
  double u = (double)(b_rng(&st) >> 11) * (1.0 / 9007199254740992.0);
  double v = exp(log((double)lo) + u * (log((double)hi + 1.0) - log((double)lo)));
  size_t s = (size_t)v;
  if (s < lo) s = lo;
  if (s > hi) s = hi;
  return s;
}

static void grow(uint64_t* live, uint64_t target, uint64_t lo, uint64_t hi) {
  while (*live < target) {
    if (nblocks == cap) b_die(1, "block table full");
    size_t n = draw_size(lo, hi);
    unsigned char* p = malloc(n);
    if (!p) b_oom(n);
    memset(p, (int)(nblocks & 0xff), n);
    blocks[nblocks].p = p;
    blocks[nblocks].size = n;
    nblocks++;
    *live += n;
    ops++;
  }
}

static uint64_t checkpoint(uint64_t* lazy, uint64_t* pss) {
  if (settle_ms) {
    struct timespec ts = {(time_t)(settle_ms / 1000), (long)(settle_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  *lazy = b_lazyfree_kb();
  *pss = b_smaps_kb("Pss");
  return b_rss_kb();
}

int main(int argc, char** argv) {
  b_parse(argc, argv,
          "Fragmentation: grow a mixed-size live set to MB MiB, free all but KEEP % scattered, grow\n"
          "again with other sizes; RSS after each phase.",
          opts);
  if (minsz > maxsz) b_die(2, "--min (%" PRIu64 ") is larger than --max (%" PRIu64 ")", minsz, maxsz);
  if (min2 > max2) b_die(2, "--min2 (%" PRIu64 ") is larger than --max2 (%" PRIu64 ")", min2, max2);
  uint64_t target = mb << 20;
  st = seed;
  /* Bookkeeping outside the allocator under test: mmap, worst case all
   * smallest blocks in both phases. */
  cap = (size_t)(target / minsz + target / min2 + 16);
  blocks = mmap(NULL, cap * sizeof *blocks, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (blocks == MAP_FAILED) b_die(1, "mmap of the block table failed");

  uint64_t rss0 = b_rss_kb();
  b_snap_t a, b;
  b_snap(&a);
  uint64_t live = 0, lz_grow, lz_free, lz_final, lz_end, pss_grow, pss_free, pss_final, pss_end;
  grow(&live, target, minsz, maxsz);
  size_t n1 = nblocks;
  uint64_t live_grow = live;
  uint64_t rss_grow = checkpoint(&lz_grow, &pss_grow);

  size_t kept = 0;
  for (size_t i = 0; i < nblocks; i++) {
    if (b_bounded((uint32_t)(b_rng(&st) >> 32), 100) < keep) {
      blocks[kept++] = blocks[i];
    } else {
      live -= blocks[i].size;
      free(blocks[i].p);
      ops++;
    }
  }
  nblocks = kept;
  uint64_t live_after_free = live;
  uint64_t rss_after_free = checkpoint(&lz_free, &pss_free);

  grow(&live, target, min2, max2);
  uint64_t live_final = live;
  uint64_t rss_final = checkpoint(&lz_final, &pss_final);

  uint64_t bad = 0;
  for (size_t i = 0; i < nblocks; i++) {
    if (blocks[i].p[blocks[i].size - 1] != blocks[i].p[0]) bad++;
    free(blocks[i].p);
    ops++;
  }
  uint64_t rss_end = checkpoint(&lz_end, &pss_end);
  b_snap(&b);
  munmap(blocks, cap * sizeof *blocks);
  if (bad) fprintf(stderr, "%s: %" PRIu64 " blocks lost their contents\n", b_prog, bad);

  double sec = (double)(b.t_ns - a.t_ns) / 1e9;
  b_result_t r;
  b_result_begin(&r, "fragment");
  b_kv(&r, "rss_final_kb=%" PRIu64, rss_final);
  b_kv(&r, "rss_grow_kb=%" PRIu64, rss_grow);
  b_kv(&r, "rss_after_free_kb=%" PRIu64, rss_after_free);
  b_kv(&r, "rss_end_kb=%" PRIu64, rss_end);
  b_kv(&r, "rss_start_kb=%" PRIu64, rss0);
  b_kv(&r, "live_grow_kb=%" PRIu64, live_grow >> 10);
  b_kv(&r, "live_after_free_kb=%" PRIu64, live_after_free >> 10);
  b_kv(&r, "live_final_kb=%" PRIu64, live_final >> 10);
  b_kv(&r, "final_overhead=%.3f", live_final ? (double)rss_final * 1024.0 / (double)live_final : 0.0);
  b_kv(&r, "pss_final_kb=%" PRIu64, pss_final);
  b_kv(&r, "pss_grow_kb=%" PRIu64, pss_grow);
  b_kv(&r, "pss_after_free_kb=%" PRIu64, pss_free);
  b_kv(&r, "pss_end_kb=%" PRIu64, pss_end);
  b_kv(&r, "lazyfree_grow_kb=%" PRIu64, lz_grow);
  b_kv(&r, "lazyfree_after_free_kb=%" PRIu64, lz_free);
  b_kv(&r, "lazyfree_final_kb=%" PRIu64, lz_final);
  b_kv(&r, "lazyfree_end_kb=%" PRIu64, lz_end);
  b_kv(&r, "blocks_phase1=%zu", n1);
  b_kv(&r, "blocks_kept=%zu", kept);
  b_kv(&r, "ops_per_sec=%.0f", sec > 0 ? (double)ops / sec : 0.0);
  b_kv(&r, "mb=%" PRIu64, mb);
  b_kv(&r, "keep=%" PRIu64, keep);
  b_kv(&r, "threads=1");
  b_kv(&r, "check=%s", bad ? "FAIL" : "ok");
  b_result_end(&r, &a, &b, "rss_final_kb", "lower");
  return bad ? 1 : 0;
}
