/* The sampling point: malloc's countdown.  Each heap counts down the bytes
 * its thread may still be handed (h->sample_left: one subtraction and a
 * branch on the fast path, alloc.h, whether anything samples or not, as
 * TCMalloc's and jemalloc's fast paths count); the allocation that takes it
 * below zero comes here, and what is due is done:
 *  - heap profiling on (prof.c): the allocation at the end of each interval
 *    drawn with mean HAKMEM_PROF_RATE is a sample;
 *  - guarded allocations on (guard.c, HAKMEM_GUARD=N): the allocation at
 *    the end of each interval drawn with mean N times the mean request is
 *    guarded;
 *  - with neither due, the countdown reloads with at most SAMPLE_IDLE, so
 *    that a thread looks again after that many bytes: profiling started
 *    meanwhile (hakmem_ctl "prof.active") samples from then on.
 * The countdown runs to the nearest of the intervals; each is kept apart
 * (h->sample), so one use does not move the other's points.  A new heap's
 * countdown is 0: its first malloc of a nonzero size looks.  The countdown
 * is the heap's own (the owner's fast path writes it without an atomic):
 * no other thread touches it. */
#include "internal.h"

#define SAMPLE_IDLE ((int64_t)1 << 20)
#define DRAWN_PROF  1u
#define DRAWN_GUARD 2u
#define DEFERRED    4u   /* the next run-out was forced (a deferred guard): not a size-biased one */

/* ln(u) for u in (0, 1], without libm: u = m * 2^k with m in [1, 2), and
 * ln m = 2 atanh((m-1)/(m+1)), whose series converges fast (t <= 1/3: six
 * terms leave an error below 1e-7). */
hak_warm static double ln01(double u) {
  uint64_t bits;
  memcpy(&bits, &u, sizeof bits);
  int k = (int)((bits >> 52) & 0x7FF) - 1023;
  bits = (bits & ((1ull << 52) - 1)) | (1023ull << 52);
  double m;
  memcpy(&m, &bits, sizeof m);
  double t = (m - 1) / (m + 1), t2 = t * t;
  double s = t * (1 + t2 * (1.0 / 3 + t2 * (1.0 / 5 + t2 * (1.0 / 7 + t2 * (1.0 / 9 + t2 / 11)))));
  return k * 0.69314718055994530942 + 2 * s;
}

/* Bytes to the next point: exponential with the given mean, so that each
 * byte is picked with the same chance whatever came before it (a Poisson
 * process; google-pprof's heap_v2 scaling, 1 / (1 - exp(-size / rate)),
 * undoes it for the profile). */
hak_warm static int64_t draw(hak_heap_t* h, double mean) {
  uint64_t x = h->sample.rng;
  if (x == 0) x = ((uintptr_t)h ^ _hak_cookie_key ^ _hak_clock_ms() * 0x9E3779B97F4A7C15ull) | 1;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  h->sample.rng = x;
  double u = (double)(((x * 0x2545F4914F6CDD1Dull) >> 11) + 1) * 0x1.0p-53;   /* (0, 1] */
  double e = -ln01(u) * mean;
  return e < 1 ? 1 : e > 9e18 ? (int64_t)9e18 : (int64_t)e + 1;
}

/* The mean request, for HAKMEM_GUARD's "one allocation in N": the countdown
 * runs out on an allocation with a chance in proportion to its size, so the
 * mean of 1/size over those allocations is 1/(mean size) (a moving average;
 * 64 bytes to start). */
hak_warm static double guard_mean(hak_heap_t* h, size_t size, long long n) {
  if (n == 1) return 1;   /* every allocation (of at least a byte) */
  double inv = h->sample.inv_size != 0 ? h->sample.inv_size : 1.0 / 64;
  if (size != 0) h->sample.inv_size = inv += (1.0 / (double)size - inv) / 64;
  return (double)n / inv;
}

/* The countdown ran out on an allocation of `size` bytes: what is due
 * (DRAWN_PROF: a heap-profile sample; DRAWN_GUARD: a guarded allocation),
 * and the next countdown. */
hak_warm static unsigned sample_reload(hak_heap_t* h, size_t size) {
  int64_t elapsed = h->sample.reload - h->sample_left;   /* bytes since the last reload (> reload) */
  unsigned drawn = h->sample.drawn, due = 0;
  if (drawn & DEFERRED) size = 0;   /* (no update of the mean's estimate) */
  bool prof = hak_load_relaxed(&_hak_prof_on) == 1;
  long long guard = HAK_SECURE ? 0 : hak_opt(GUARD);   /* (the secure build checks every block its own way) */
  if (drawn & DRAWN_PROF) due |= (h->sample.prof_left -= elapsed) < 0 ? DRAWN_PROF : 0;
  if (drawn & DRAWN_GUARD) due |= (h->sample.guard_left -= elapsed) < 0 ? DRAWN_GUARD : 0;
  if (prof && (due & DRAWN_PROF || !(drawn & DRAWN_PROF))) h->sample.prof_left = draw(h, (double)_hak_prof_rate());
  if (guard != 0) {
    double mean = guard_mean(h, size, guard);   /* (every run-out updates the estimate) */
    if (due & DRAWN_GUARD || !(drawn & DRAWN_GUARD)) h->sample.guard_left = draw(h, mean);
  }
  int64_t next = SAMPLE_IDLE;
  if (prof && h->sample.prof_left < next) next = h->sample.prof_left;
  if (guard != 0 && h->sample.guard_left < next) next = h->sample.guard_left;
  h->sample.drawn = (prof ? DRAWN_PROF : 0) | (guard != 0 ? DRAWN_GUARD : 0);
  h->sample.reload = h->sample_left = next;
  return due & h->sample.drawn;
}

/* The countdown runs out at h's next malloc; the bytes counted since the
 * last reload stay counted. */
hak_warm static void sample_next(hak_heap_t* h) {
  h->sample.reload += 0 - h->sample_left;
  h->sample_left = 0;
}

/* The calling thread's countdown ends at its next malloc (profiling was
 * started: its heap may have reloaded idle while the profiler was being
 * set up, libunwind's dlopen allocating).  Other threads look within
 * SAMPLE_IDLE bytes. */
void _hak_sample_soon(void) {
  hak_heap_t* h = hak_heap_get();
  if (h != &_hak_heap_empty) sample_next(h);
}

/* A guarded block came due on an allocation that cannot be one (above a
 * page, or aligned): the next allocation's run-out serves it, so that one
 * allocation in N of any size is a guard's due, and each lands on a block
 * that can be guarded (a byte countdown would otherwise give most of them
 * to the big blocks, which hold most bytes). */
hak_warm void _hak_sample_defer_guard(hak_heap_t* h) {
  h->sample.guard_left = 0;
  h->sample.drawn |= DEFERRED;
  sample_next(h);
}

/* The countdown ran out on a class allocation (alloc.h, refill.c), the heap
 * entered: what the caller does with it (HAK_SAMPLE_GUARD: guard.c serves
 * it, or _hak_sample_defer_guard passes it on; HAK_SAMPLE_PROF: prof.c
 * does): a decision, not a call around the sampling, so that a stack walk
 * steps through one frame fewer. */
hak_warm unsigned _hak_sample_due(hak_heap_t* h, size_t size) {
  unsigned due = sample_reload(h, size);
  if (_hak_prof_busy() || _hak_guard_busy()) return 0;
  return (due & DRAWN_GUARD ? HAK_SAMPLE_GUARD : 0) | (due & DRAWN_PROF ? HAK_SAMPLE_PROF : 0);
}

/* A large block was made (large.c): its bytes count down too; if they take
 * the countdown below zero, it is a heap-profile sample (never guarded:
 * the pool's blocks are a page at most).  Not the profiler's own blocks (a
 * sampled class allocation's, libunwind's), nor before the thread has a
 * heap. */
hak_warm void _hak_sample_large(hak_segment_t* seg, void* p, size_t size, uintptr_t site) {
  hak_heap_t* h = hak_heap_get();
  if (h == &_hak_heap_empty || _hak_prof_busy()) return;
  if ((h->sample_left -= (int64_t)(size < INT64_MAX ? size : INT64_MAX)) >= 0) return;
  unsigned due = sample_reload(h, size);
  if (due & DRAWN_PROF) _hak_prof_sample_large(seg, p, size, site);
  if (due & DRAWN_GUARD) _hak_sample_defer_guard(h);
}
