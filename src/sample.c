/* The sampling point: malloc's countdown.  Each heap counts down the bytes
 * its thread may still be handed (h->sample_left: one subtraction and a
 * branch on the fast path, alloc.h, whether anything samples or not, as
 * TCMalloc's and jemalloc's fast paths count); the allocation that takes it
 * below zero comes here, and what is due is done:
 *  - heap profiling on (prof.c): that allocation is the sample, and the
 *    next interval is drawn;
 *  - else the countdown reloads with SAMPLE_IDLE, so that a thread looks
 *    again after that many bytes: profiling started meanwhile (hakmem_ctl
 *    "prof.active") samples from then on.
 * A new heap's countdown is 0: its first malloc of a nonzero size looks.
 * The countdown is the heap's own (the owner's fast path writes it without
 * an atomic), so no other thread touches it. */
#include "internal.h"

#define SAMPLE_IDLE ((int64_t)1 << 20)

/* The next countdown; true when the one that ran out was a drawn interval
 * (an idle reload ending is no sample: its length was not drawn). */
static bool sample_reload(hak_heap_t* h) {
  bool drawn = h->sample.drawn;
  bool on = hak_load_relaxed(&_hak_prof_on) == 1;
  h->sample_left = on ? _hak_prof_draw(h) : SAMPLE_IDLE;
  h->sample.drawn = on;
  return drawn && on;
}

/* The calling thread's countdown ends at its next malloc (profiling was
 * started: its heap may have reloaded idle while the profiler was being
 * set up, libunwind's dlopen allocating).  Other threads look within
 * SAMPLE_IDLE bytes. */
void _hak_sample_soon(void) {
  hak_heap_t* h = hak_heap_get();
  if (h == &_hak_heap_empty) return;
  h->sample_left = 0;
  h->sample.drawn = 0;
}

/* The countdown ran out on a class allocation (alloc.h, refill.c), the heap
 * entered: true when the allocation is a heap-profile sample (the caller
 * has the profiler serve it: a decision, not a call around the sampling,
 * so that the stack walk steps through one frame fewer). */
hak_warm bool _hak_sample_due(hak_heap_t* h) { return sample_reload(h) && !_hak_prof_busy(); }

/* A large block was made (large.c): its bytes count down too; if they take
 * the countdown below zero, it is the sample.  Not the profiler's own
 * blocks (a sampled class allocation's, libunwind's), nor before the
 * thread has a heap. */
hak_warm void _hak_sample_large(hak_segment_t* seg, void* p, size_t size, uintptr_t site) {
  hak_heap_t* h = hak_heap_get();
  if (h == &_hak_heap_empty || _hak_prof_busy()) return;
  if ((h->sample_left -= (int64_t)(size < INT64_MAX ? size : INT64_MAX)) >= 0) return;
  if (sample_reload(h)) _hak_prof_sample_large(seg, p, size, site);
}
