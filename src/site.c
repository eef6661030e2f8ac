/* Call-site learning ("hakmem-evolving"): per allocation call site, what to
 * do with its large blocks when they are freed, chosen online.
 * - Identity: the return address of the public entry point (malloc, calloc,
 *   realloc, posix_memalign, operator new, ...), hashed into a fixed table
 *   (HAK_SITES entries; when the table is full, sites share entry 0), so the
 *   memory is bounded whatever the program does.
 * - Only large blocks (> 128 KiB) consult the table: the small-object fast
 *   paths do not change at all.
 * - Strategies for a freed block: keep it in the BigCache (bounded by its
 *   byte budget and age, shared by all sites), release it to the OS at once,
 *   keep the mapping but decommit it, keep it and pre-fault the pages of
 *   new blocks of this site (for sites whose blocks are fully touched), or
 *   pre-fault new blocks and release freed ones ("populate": big buffers
 *   written once, not worth keeping, cheaper faulted in one call).
 * - Learning: each measured free starts an episode that the site's next
 *   allocation closes; its cost is the time spent in the allocator, the page
 *   faults the allocation will take (estimated from how much of the site's
 *   blocks are touched, sampled with mincore), and the bytes kept resident
 *   meanwhile, weighted by the profile.  Each strategy keeps a moving average
 *   of its (outlier-clipped) episode costs; the site plays the best one,
 *   tries and explores only strategies that could beat it (a lower bound for
 *   those that give the block back), with a probability that decays, from a
 *   per-site generator seeded by HAKMEM_LEARN_SEED.
 * - Hints learned on the way: long-lived sites, and the size a site's blocks
 *   reach by realloc (large.c uses both).
 * - Cost: a settled site measures one free in SITE_MEASURE_EVERY; its other
 *   operations read relaxed atomics only (no lock, no clock). */
#include "internal.h"
#include <dlfcn.h>
#include <sys/mman.h>
#include <time.h>

#define SITE_PROBE 8
#define SITE_FIFO 8
#define SITE_LONG_LIFE 16.0   /* large operations: a block living longer is long-lived */
#define SITE_SETTLED 64       /* episodes after which a site is measured on 1 free in SITE_MEASURE_EVERY */
#define SITE_MEASURE_EVERY 16
#define SITE_RING_WINDOW 256  /* allocations per window of the learned ring size */

typedef struct {
  uint8_t strategy;
  uint64_t t_ns;
  size_t resident;
  uint64_t free_ns;
} site_episode_t;

typedef struct hak_site_s {
  _Atomic(uintptr_t) key;            /* return address; 0 = free entry */
  _Atomic(int) lock;
  /* read and written without the lock: all a settled site's unmeasured
   * operations touch (mirrors of fields below, written under the lock) */
  _Atomic(uint8_t) xstrategy;        /* strategy */
  _Atomic(uint8_t) xlong;            /* its blocks live long (learned hint) */
  _Atomic(uint8_t) xsettled;         /* SITE_SETTLED episodes: measure 1 free in SITE_MEASURE_EVERY */
  _Atomic(uint32_t) xopen;           /* nfifo: an allocation closing an episode is measured */
  _Atomic(uint32_t) xtick;           /* frees since settled */
  _Atomic(size_t) xfinal;            /* size its blocks have when freed (learned hint), 0: none */
  _Atomic(uint64_t) xallocs, xfrees, xbytes;
  _Atomic(uint32_t) xlive;           /* its blocks allocated and not freed */
  _Atomic(uint32_t) xcached;         /* its freed blocks in the BigCache */
  _Atomic(uint32_t) xlive_max, xlive_prev;   /* most live blocks in this window of 256 allocations, and the last */
  /* statistics (of measured operations) */
  uint64_t frees;
  size_t min_size, max_size;
  uint64_t last_free_clock;
  double reuse_ewma;                 /* large ops between a free and the next alloc here */
  double life_ewma;                  /* large ops between alloc and free */
  double touch_ewma;                 /* fraction of a block's pages touched (sampled) */
  double final_ewma;                 /* size of its blocks when freed (after realloc growth) */
  uint64_t faults_est;               /* estimated page faults taken by its allocations */
  uint64_t samples;
  /* learning */
  uint8_t strategy;                  /* current choice */
  uint8_t nfifo;
  site_episode_t fifo[SITE_FIFO];
  double cost[HAK_STRAT_COUNT];
  uint32_t tries[HAK_STRAT_COUNT];
  uint64_t rng;
  uint64_t episodes;
  uint32_t changes;
} hak_site_t;

hak_bss_apart static hak_site_t site_tab[HAK_SITES];
static _Atomic(uint64_t) site_clock;      /* large operations so far */
static _Atomic(size_t) site_used;


static void site_lock(hak_site_t* s) {
  while (atomic_exchange_explicit(&s->lock, 1, memory_order_acquire)) {
    while (hak_load_relaxed(&s->lock)) __builtin_ia32_pause();
  }
}
static void site_unlock(hak_site_t* s) { atomic_store_explicit(&s->lock, 0, memory_order_release); }

static uint64_t splitmix(uint64_t* x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* The profile's behaviour (keep freed blocks in the BigCache), or the
 * strategy HAKMEM_LEARN_FORCE names (1-based there: 0 is none). */
/* Moving average that starts at its first sample. */
static void ewma(double* x, double v, double w) { *x = *x == 0 ? v : (1 - w) * *x + w * v; }

/* The oldest open episode of a site (lock held, nfifo > 0). */
static site_episode_t fifo_pop(hak_site_t* s) {
  site_episode_t e = s->fifo[0];
  memmove(&s->fifo[0], &s->fifo[1], sizeof(site_episode_t) * (size_t)(s->nfifo - 1));
  s->nfifo--;
  hak_store_relaxed(&s->xopen, s->nfifo);
  return e;
}

/* Fold an episode's cost into its strategy's rating (weight w).  A cost
 * above 4x the rating counts as 4x: one episode during which the thread was
 * descheduled (its allocator time then includes someone else's) must not
 * make a strategy look 40x dearer; a real change still shows, 30 % per
 * episode. */
static void rate(hak_site_t* s, int k, double cost, double w) {
  if (s->tries[k] && cost > 4 * s->cost[k]) cost = 4 * s->cost[k];
  s->cost[k] = s->tries[k] == 0 ? cost : (1 - w) * s->cost[k] + w * cost;
  s->tries[k]++;
}

static int default_strategy(void) {
  long long f = hak_opt(LEARN_FORCE);
  return f > 0 ? (int)(f - 1) : HAK_STRAT_CACHE;
}
static bool learning(void) { return hak_opt(LEARN) && hak_opt(LEARN_FORCE) == 0; }

/* Entry of a return address: claimed on first use; index 0 when full. */
uint32_t _hak_site_index(uintptr_t ra) {
  if (ra == 0) return 0;
  uint64_t h = ((uint64_t)ra >> 2) * 0x9E3779B97F4A7C15ull;
  for (uint32_t i = 0; i < SITE_PROBE; i++) {
    uint32_t idx = 1 + (uint32_t)((h >> 40) + i) % (HAK_SITES - 1);
    hak_site_t* s = &site_tab[idx];
    uintptr_t k = hak_load_acquire(&s->key);
    if (k == ra) return idx;
    if (k == 0) {
      uintptr_t expect = 0;
      site_lock(s);
      if (atomic_compare_exchange_strong(&s->key, &expect, ra) || expect == ra) {
        if (expect == 0) {
          s->strategy = (uint8_t)default_strategy();
          hak_store_relaxed(&s->xstrategy, s->strategy);
          s->rng = (uint64_t)hak_opt(LEARN_SEED) ^ (uint64_t)ra;
          s->min_size = SIZE_MAX;
          atomic_fetch_add_explicit(&site_used, 1, memory_order_relaxed);
        }
        site_unlock(s);
        return idx;
      }
      site_unlock(s);
      if (expect == ra) return idx;
    }
  }
  return 0;
}

/* Cost weights: nanoseconds per page fault, and per MiB kept resident for a
 * second (speed weighs time, lean weighs bytes).  A page fault's cost is
 * the machine's, not a constant: ~0.3 us on bare metal, ~2 us in the VM we
 * measure on, where a fixed 400 ns made learning prefer demand faults to
 * prefaulting, which ran 11 % faster.  It is measured once, when learning
 * first needs it: writing a fresh 128 KiB mapping minus writing it again
 * once resident (what a fault adds to the program's own writes), the lowest
 * of eight rounds (a round the thread was preempted in counts for nothing),
 * clamped to [100 ns, 20 us]; 400 ns if the mapping fails. */
#define FAULT_PAGES 32
#define FAULT_ROUNDS 8
static _Atomic(uint64_t) fault_ns_measured;

static double fault_ns(void) {
  uint64_t v = hak_load_relaxed(&fault_ns_measured);
  if (hak_likely(v != 0)) return (double)v;
  uint64_t best = UINT64_MAX;
  size_t len = (size_t)FAULT_PAGES * HAK_OS_PAGE;
  for (int round = 0; round < FAULT_ROUNDS; round++) {
    uint8_t* m = _hak_os_map(len, NULL);
    if (m == NULL) break;
    uint64_t t0 = _hak_os_clock_ns();
    memset(m, 1, len);
    __asm__ volatile("" : : "r"(m) : "memory");
    uint64_t t1 = _hak_os_clock_ns();
    memset(m, 2, len);
    __asm__ volatile("" : : "r"(m) : "memory");
    uint64_t t2 = _hak_os_clock_ns();
    _hak_os_unmap(m, len);
    uint64_t d = (t1 - t0) > (t2 - t1) ? ((t1 - t0) - (t2 - t1)) / FAULT_PAGES : 0;
    if (d < best) best = d;
  }
  v = best == UINT64_MAX ? 400 : best < 100 ? 100 : best > 20000 ? 20000 : best;
  hak_store_relaxed(&fault_ns_measured, v);   /* racing first callers store similar values */
  return (double)v;
}
static double byte_weight(void) { return (double)hak_opt(LEARN_BYTE_COST); }

static bool keeps(int k) { return k == HAK_STRAT_CACHE || k == HAK_STRAT_PREFAULT; }

/* A lower bound of the cost of a strategy that gives the block back: the
 * site's next block faults its touched pages in again, which the cost model
 * charges fault_ns() each (release, decommit); "populate" maps them in one
 * call, charged by its measured time (it zeroes the pages as faults do, so
 * it costs a good part of a fault per page).  A strategy that
 * cannot beat the best rating so far is neither tried nor explored: trying
 * "release" on a site whose 50 MiB blocks are reused costs 12,000 page
 * faults to learn nothing. */
static double give_back_bound(const hak_site_t* s) {
  double touch = s->samples ? s->touch_ewma : 1.0;
  return touch * s->final_ewma / HAK_OS_PAGE * fault_ns();
}

static void choose(hak_site_t* s, uintptr_t ra) {
  static const int order[HAK_STRAT_COUNT] = {HAK_STRAT_CACHE, HAK_STRAT_PREFAULT, HAK_STRAT_DECOMMIT, HAK_STRAT_RELEASE,
                                             HAK_STRAT_POPULATE};
  int old = s->strategy;
  int best = -1;
  if (s->episodes < (uint64_t)hak_opt(LEARN_MIN_EVENTS)) {
    best = default_strategy();
  } else {
    int rated = -1;
    for (int k = 0; k < HAK_STRAT_COUNT; k++)
      if (s->tries[k] && (rated < 0 || s->cost[k] < s->cost[rated])) rated = k;
    double bound = give_back_bound(s);
    bool ok[HAK_STRAT_COUNT];
    int nok = 0;
    for (int k = 0; k < HAK_STRAT_COUNT; k++) {
      ok[k] = keeps(k) || rated < 0 || bound < s->cost[rated];
      nok += ok[k];
    }
    for (int i = 0; i < HAK_STRAT_COUNT && best < 0; i++)   /* try each admissible one once, keeping ones first */
      if (s->tries[order[i]] == 0 && ok[order[i]]) best = order[i];
    if (best < 0) {
      double eps = 0.25 / (1.0 + (double)s->episodes / 8.0);
      if (eps < 0.01) eps = 0.01;
      if ((double)(splitmix(&s->rng) >> 11) * 0x1.0p-53 < eps) {
        uint64_t pick = splitmix(&s->rng) % (uint64_t)nok;
        for (int k = 0; k < HAK_STRAT_COUNT; k++)
          if (ok[k] && pick-- == 0) best = k;
      } else {
        best = rated;
      }
    }
  }
  s->strategy = (uint8_t)best;
  hak_store_relaxed(&s->xstrategy, s->strategy);
  if (best != old) {
    s->changes++;
    if (hak_opt(LEARN_LOG))
      _hak_message("hakmem: learn: site %p: %s -> %s after %llu episodes (cost us: cache %.1f release %.1f decommit %.1f prefault %.1f populate %.1f)\n",
                   (void*)ra, _hak_strategy_name(old), _hak_strategy_name(best), (unsigned long long)s->episodes,
                   s->cost[0] / 1e3, s->cost[1] / 1e3, s->cost[2] / 1e3, s->cost[3] / 1e3, s->cost[4] / 1e3);
  }
}

/* ---------------------------------------------------------------- hooks */

/* Before a large allocation at site `idx`: the strategy to apply; whether
 * the site's blocks live long (then a reused block does not keep resident
 * pages beyond its size: they would idle for the block's life); and the size
 * its blocks usually have when freed (larger than requested when they grow
 * by realloc: such a block is best served by a cached block that already
 * covers what it will grow to).  Both hints are learned: 0 when not learning.
 * *t0 is the start time when this allocation is measured (it closes an
 * episode, or the site is not settled yet), else 0.  No lock. */
int _hak_site_before_alloc(uint32_t idx, uint64_t* t0, bool* long_lived, size_t* final_size) {
  hak_site_t* s = &site_tab[idx];
  bool measure = !hak_load_relaxed(&s->xsettled) || hak_load_relaxed(&s->xopen);
  *t0 = measure ? _hak_os_clock_ns() : 0;
  *long_lived = hak_load_relaxed(&s->xlong);
  *final_size = hak_load_relaxed(&s->xfinal);
  return learning() ? hak_load_relaxed(&s->xstrategy) : default_strategy();
}

/* After it: statistics, and the episode the site's last free opened. */
void _hak_site_after_alloc(uint32_t idx, hak_segment_t* seg, size_t size, uint64_t t0, size_t resident_before) {
  hak_site_t* s = &site_tab[idx];
  uint64_t clock = atomic_fetch_add_explicit(&site_clock, 1, memory_order_relaxed);
  seg->site.entry = idx;
  seg->site.clock = clock;
  uint64_t n = atomic_fetch_add_explicit(&s->xallocs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->xbytes, size, memory_order_relaxed);
  uint32_t live = atomic_fetch_add_explicit(&s->xlive, 1, memory_order_relaxed) + 1;
  if (n % SITE_RING_WINDOW == 0) {   /* a new window: the ring follows the site's recent working set */
    hak_store_relaxed(&s->xlive_prev, hak_load_relaxed(&s->xlive_max));
    hak_store_relaxed(&s->xlive_max, live);
  } else if (live > hak_load_relaxed(&s->xlive_max)) {
    hak_store_relaxed(&s->xlive_max, live);   /* racing updates may lose one: a statistic */
  }
  if (t0 == 0) return;   /* not measured */
  uint64_t t1 = _hak_os_clock_ns();
  if (learning()) (void)fault_ns();   /* measured once, here rather than under the site's spin lock */
  site_lock(s);
  if (size < s->min_size) s->min_size = size;
  if (size > s->max_size) s->max_size = size;
  if (s->last_free_clock) ewma(&s->reuse_ewma, (double)(clock - s->last_free_clock), 0.1);
  /* faults this block will take: the touched share of it beyond what was resident */
  double touch = s->samples ? s->touch_ewma : 1.0;
  double want = touch * (double)size;
  double faults = want > (double)resident_before ? (want - (double)resident_before) / HAK_OS_PAGE : 0;
  if (seg->large.prefaulted) faults = 0;   /* taken inside the allocator, already in (t1 - t0) */
  s->faults_est += (uint64_t)faults;
  if (learning() && s->nfifo) {
    site_episode_t e = fifo_pop(s);
    double held_s = (double)(t1 - e.t_ns) * 1e-9;
    double cost = (double)(t1 - t0) + faults * fault_ns() + (double)e.free_ns +
                  byte_weight() * ((double)e.resident / 1048576.0) * held_s;
    rate(s, e.strategy, cost, 0.1);
    s->episodes++;
    if (s->episodes >= SITE_SETTLED) hak_store_relaxed(&s->xsettled, 1);
    choose(s, hak_load_relaxed(&s->key));
  }
  site_unlock(s);
}

/* The fraction of a large block's pages that are resident: one mincore call
 * over a small block, four windows spread over a big one; -1 when unknown.
 * (Also thp.c's evidence, through large.c, for advising large blocks.) */
double _hak_site_touched(const hak_segment_t* seg) {
  enum { WIN = 256, NWIN = 4 };
  uint8_t vec[WIN * NWIN];
  uint8_t* base = (uint8_t*)seg + hak_align_up(seg->large.off, HAK_OS_PAGE);
  size_t pages = hak_align_up(seg->large.size, HAK_OS_PAGE) / HAK_OS_PAGE;
  size_t in = 0, n = 0;
  if (pages <= WIN * NWIN) {
    if (_hak_os_resident(base, pages * HAK_OS_PAGE, vec)) n = pages;
  } else {
    for (size_t w = 0; w < NWIN; w++) {
      size_t first = (pages - WIN) * w / (NWIN - 1);
      if (_hak_os_resident(base + first * HAK_OS_PAGE, (size_t)WIN * HAK_OS_PAGE, vec + n)) n += WIN;
    }
  }
  for (size_t i = 0; i < n; i++) in += vec[i] & 1;
  return n ? (double)in / (double)n : -1;
}

/* At a large free: statistics, then the strategy for this block.  A
 * settled site measures (times, samples, opens an episode for) only 1 free
 * in SITE_MEASURE_EVERY: the others take no lock and read no clock; *t0 is
 * 0 for them. */
int _hak_site_on_free(hak_segment_t* seg, uint64_t* t0) {
  uint32_t idx = seg->site.entry;
  hak_site_t* s = &site_tab[idx < HAK_SITES ? idx : 0];
  atomic_fetch_add_explicit(&s->xfrees, 1, memory_order_relaxed);
  if (hak_load_relaxed(&s->xlive) > 0) atomic_fetch_sub_explicit(&s->xlive, 1, memory_order_relaxed);
  if (hak_load_relaxed(&s->xsettled) &&
      atomic_fetch_add_explicit(&s->xtick, 1, memory_order_relaxed) % SITE_MEASURE_EVERY != 0) {
    *t0 = 0;
    return learning() ? hak_load_relaxed(&s->xstrategy) : default_strategy();
  }
  *t0 = _hak_os_clock_ns();
  uint64_t clock = atomic_fetch_add_explicit(&site_clock, 1, memory_order_relaxed);
  site_lock(s);
  s->frees++;
  s->last_free_clock = clock;
  ewma(&s->life_ewma, (double)(clock - seg->site.clock), 0.1);
  ewma(&s->final_ewma, (double)seg->large.size, 0.1);
  if (learning() && s->frees >= (uint64_t)hak_opt(LEARN_MIN_EVENTS)) {
    hak_store_relaxed(&s->xlong, s->life_ewma >= SITE_LONG_LIFE);
    hak_store_relaxed(&s->xfinal, (size_t)s->final_ewma);
  }
  int st = learning() ? s->strategy : default_strategy();
  /* sample how much of the block was touched: 1 measured free in 8 until
   * the site has 32 samples, then 1 in 64 (a mincore call costs about a
   * microsecond) */
  bool sample = learning() && (s->frees & (s->samples < 32 ? 7 : 63)) == 1;
  site_unlock(s);
  if (sample && seg->large.size >= HAK_OS_PAGE) {
    double touched = _hak_site_touched(seg);
    if (touched >= 0) {
      site_lock(s);
      s->touch_ewma = s->samples ? 0.8 * s->touch_ewma + 0.2 * touched : touched;
      s->samples++;
      site_unlock(s);
    }
  }
  return st;
}

/* After the free: record the episode it opens. */
void _hak_site_after_free(uint32_t idx, int strategy, uint64_t t0, size_t resident) {
  if (t0 == 0) return;   /* not measured */
  hak_site_t* s = &site_tab[idx < HAK_SITES ? idx : 0];
  uint64_t t1 = _hak_os_clock_ns();
  site_lock(s);
  if (learning()) {
    if (s->nfifo == SITE_FIFO) {   /* the oldest never saw a reuse: close it on retention alone */
      site_episode_t e = fifo_pop(s);
      double cost = (double)e.free_ns + byte_weight() * ((double)e.resident / 1048576.0) * (double)(t1 - e.t_ns) * 1e-9;
      rate(s, e.strategy, cost, 0.2);
    }
    site_episode_t* e = &s->fifo[s->nfifo++];
    e->strategy = (uint8_t)strategy;
    e->t_ns = t1;
    e->free_ns = t1 - t0;
    e->resident = resident;
    hak_store_relaxed(&s->xopen, s->nfifo);
  }
  site_unlock(s);
}

/* The site's BigCache ring: how many of its freed blocks it may keep cached,
 * learned as its working set — the most of its blocks live at once over the
 * last two windows of SITE_RING_WINDOW allocations — plus one.  A site that
 * never holds more than one block keeps at most two (a one-shot buffer does
 * not leave a queue of 50 MiB blocks behind); a ring of 16 long-lived
 * blocks keeps up to 17.  Blocks beyond the ring are decommitted instead.
 * Only while learning; the shared byte budget and age bound apply anyway.
 * (An earlier ring sized by "frees in a row" cut vm_cold's reuse: 25x the
 * faults; the working set does not.) */
static uint32_t ring_size(const hak_site_t* s) {
  uint32_t a = hak_load_relaxed(&s->xlive_max), b = hak_load_relaxed(&s->xlive_prev);
  uint32_t m = a > b ? a : b;
  return m < 1 ? 2 : m + 1;
}

/* Before a freed block of this site enters the BigCache: false when the
 * site's ring is full (the caller gives the block back instead). */
bool _hak_site_ring_enter(hak_segment_t* seg) {
  if (!learning() || seg->site.entry >= HAK_SITES) return true;
  hak_site_t* s = &site_tab[seg->site.entry];
  if (hak_load_relaxed(&s->xcached) >= ring_size(s)) return false;
  atomic_fetch_add_explicit(&s->xcached, 1, memory_order_relaxed);
  seg->site.ring = seg->site.entry + 1;
  return true;
}

/* A block leaves the BigCache (taken, evicted, expired, or not cached after all). */
void _hak_site_ring_leave(hak_segment_t* seg) {
  if (seg->site.ring == 0) return;
  atomic_fetch_sub_explicit(&site_tab[seg->site.ring - 1].xcached, 1, memory_order_relaxed);
  seg->site.ring = 0;
}

/* In a fork child only the forking thread exists: a site lock another thread
 * held at the fork would never be released, so every lock is reset (the
 * statistics it guarded may be mid-update; they are only statistics). */
void _hak_sites_fork_child(void) {
  for (int i = 0; i < HAK_SITES; i++) hak_store_relaxed(&site_tab[i].lock, 0);
}

/* ---------------------------------------------------------------- queries */
hak_api void* hak_block_site(const void* p) {
  hak_ptr_t r;
  if (p == NULL || hak_ptr_classify(p, &r) != HAK_SEG_LARGE || !hak_large_live_at(r.seg, p) || r.seg->site.entry >= HAK_SITES)
    return NULL;
  return (void*)hak_load_relaxed(&site_tab[r.seg->site.entry].key);
}

hak_api int hak_site_strategy(const void* site) {
  if (site == NULL) return -1;
  int st = _hak_site_strategy_of((uintptr_t)site);
  if (st >= 0 && !learning()) return default_strategy();
  return st;
}

/* ---------------------------------------------------------------- report */
size_t _hak_sites_used(void) { return hak_load_relaxed(&site_used); }

int _hak_site_strategy_of(uintptr_t ra) {
  for (uint32_t i = 1; i < HAK_SITES; i++)
    if (hak_load_relaxed(&site_tab[i].key) == ra) return hak_load_relaxed(&site_tab[i].xstrategy);
  return -1;
}

/* Top sites by bytes, symbolised with dladdr where possible. */
size_t _hak_sites_report(char* buf, size_t cap, int top) {
  size_t len = 0;
  int shown = 0;
  uint64_t last = UINT64_MAX;
  uint64_t fns = hak_load_relaxed(&fault_ns_measured);
  len += (size_t)_hak_snprintf(buf + len, cap - len, "sites: %zu distinct (table %d, learning %s", _hak_sites_used(),
                               HAK_SITES, learning() ? "on" : hak_opt(LEARN_FORCE) ? "forced" : "off");
  if (fns) len += (size_t)_hak_snprintf(buf + len, cap - len, "; page fault measured at %llu ns", (unsigned long long)fns);
  len += (size_t)_hak_snprintf(buf + len, cap - len, ")\n");
  while (shown < top && len + 256 < cap) {
    uint64_t best = 0;
    int bi = -1;
    for (int i = 0; i < HAK_SITES; i++) {
      uint64_t b = hak_load_relaxed(&site_tab[i].xbytes);
      if (b > best && b < last) best = b, bi = i;
    }
    if (bi < 0) break;
    last = best;
    hak_site_t* s = &site_tab[bi];
    uintptr_t ra = hak_load_relaxed(&s->key);
    char sym[160] = "?";
    Dl_info info;
    if (ra && dladdr((void*)ra, &info) && info.dli_sname)
      _hak_snprintf(sym, sizeof sym, "%s+0x%lx", info.dli_sname, (unsigned long)(ra - (uintptr_t)info.dli_saddr));
    else if (ra && dladdr((void*)ra, &info) && info.dli_fname)
      _hak_snprintf(sym, sizeof sym, "%s+0x%lx", info.dli_fname, (unsigned long)(ra - (uintptr_t)info.dli_fbase));
    len += (size_t)_hak_snprintf(
        buf + len, cap - len,
        "  site %p %-28.28s allocs=%llu frees=%llu bytes=%llu size=%zu..%zu final=%.0f reuse=%.0f life=%.0f touch=%.2f faults~%llu strategy=%s ring=%u changes=%u\n",
        (void*)ra, bi == 0 ? "(other sites)" : sym, (unsigned long long)hak_load_relaxed(&s->xallocs),
        (unsigned long long)hak_load_relaxed(&s->xfrees), (unsigned long long)hak_load_relaxed(&s->xbytes), s->min_size == SIZE_MAX ? 0 : s->min_size, s->max_size, s->final_ewma, s->reuse_ewma,
        s->life_ewma, s->samples ? s->touch_ewma : 1.0, (unsigned long long)s->faults_est, _hak_strategy_name(hak_load_relaxed(&s->xstrategy)),
        ring_size(s), s->changes);
    shown++;
  }
  return len;
}
