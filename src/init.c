/* Process and thread start-up and shut-down, and the fork handlers: the
 * top of the layers (reports are in report.c).  Initialisation is lazy: a new
 * thread's heap is the static empty heap, so its first malloc misses the
 * fast path and lands here; nothing on the fast path tests for it. */
#include "internal.h"
#include "slab.h"
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

_Atomic(int) _hak_initialized;   /* 0 = no, 1 = in progress, 2 = done */
uintptr_t _hak_cookie_key = 0x9E3779B97F4A7C15ull;   /* replaced at init; never 0 */
uintptr_t _hak_list_key;
static pthread_key_t thread_key;
static _Atomic(int) thread_key_ok;

/* ---------------------------------------------------------------- threads */
/* Set once the thread's exit began: a heap it takes in a later destructor
 * is not named to park.c (glibc runs key destructors a bounded number of
 * times, so that heap may outlive the thread, and its slot with it). */
static __thread bool tls_exiting __attribute__((tls_model("initial-exec")));

hak_warm static void thread_done(void* arg) {
  hak_heap_t* h = arg;
  tls_exiting = true;
  if (h == NULL || h == &_hak_heap_empty) return;
  hak_heap_enter(h);   /* left by _hak_heap_abandon; from here park.c keeps off */
  if (_hak_tls_own == h) {
    _hak_secure_flush(true);   /* its blocks go home while the heap is still ours */
    hak_heap_set(&_hak_tls_heap, &_hak_heap_empty);
    _hak_tls_own = NULL;
  }
  _hak_heap_abandon(h);
}

hak_warm hak_heap_t* _hak_thread_init(void) {
  if (hak_load_acquire(&_hak_initialized) != 2) _hak_process_init();
  hak_heap_t* h = hak_heap_get();
  if (h != &_hak_heap_empty) return h;
  if (_hak_tls_own != NULL) {
    /* park.c is handing this sleeping thread's slabs over: its heap pointer
     * is back when the heap's xbusy is free */
    h = _hak_tls_own;
    hak_heap_enter(h);
    hak_heap_leave(h);
    hak_assert(hak_heap_get() == h);
    return h;
  }
  h = _hak_heap_acquire();
  if (h == NULL) return NULL;
  _hak_tls_own = h;
  hak_heap_set(&_hak_tls_heap, h);
  if (hak_load_acquire(&thread_key_ok) && pthread_setspecific(thread_key, h) == 0 && !tls_exiting)
    _hak_park_bind(h, &_hak_tls_heap);
  return h;
}

/* ---------------------------------------------------------------- fork */
static void fork_prepare(void) {
  _hak_mesh_fork_prepare();   /* first: a compaction in progress finishes; last: its barrier (mesh.c) */
  _hak_guard_fork_prepare();  /* (its lock is held only around its own table) */
  _hak_slots_fork_prepare();  /* a new slot segment takes the limit's and the segments' locks under it */
  _hak_limit_fork_prepare();  /* before the tiers' locks: a limit release takes them under it */
  _hak_heaps_fork_prepare();
  _hak_pool_fork_prepare();
  _hak_segments_fork_prepare();
  _hak_large_fork_prepare();
  _hak_bigcache_fork_prepare();
  _hak_release_fork_prepare();
  _hak_ctl_fork_prepare();
  _hak_prof_fork_prepare();   /* a leaf: nothing else is taken while it is held */
  _hak_mesh_fork_barrier();
  _hak_tls_forking = true;   /* from here to parent/child, this thread's locks are held */
}
static void fork_parent(void) {
  _hak_tls_forking = false;
  _hak_mesh_fork_parent();
  _hak_ctl_fork_parent();
  _hak_limit_fork_parent();
  _hak_prof_fork_parent();
  _hak_release_fork_parent();
  _hak_bigcache_fork_parent();
  _hak_large_fork_parent();
  _hak_segments_fork_parent();
  _hak_pool_fork_parent();
  _hak_heaps_fork_parent();
  _hak_slots_fork_parent();
  _hak_guard_fork_parent();
}
static void fork_child(void) {
  _hak_tls_forking = false;
  _hak_os_fork_child_state();   /* (registered: this runs) */
  _hak_mesh_fork_child();   /* first: the child's own copy of meshed pages */
  _hak_prof_fork_child();
  _hak_slots_fork_child();
  _hak_guard_fork_child();
  _hak_sites_fork_child();
  _hak_ctl_fork_child();
  _hak_limit_fork_child();
  _hak_release_fork_child();
  _hak_bigcache_fork_child();
  _hak_large_fork_child();
  _hak_segments_fork_child();
  _hak_pool_fork_child();
  _hak_background_fork_child();
  _hak_heaps_fork_child(hak_heap_get());
}

/* ---------------------------------------------------------------- process */
hak_warm static uintptr_t random_seed(void) {
  uintptr_t x = 0;
  const uint8_t* r = (const uint8_t*)getauxval(AT_RANDOM);   /* 16 bytes from the kernel */
  if (r != NULL) memcpy(&x, r + 8, sizeof x);
  x ^= (uintptr_t)(_hak_os_clock_ns() % 1000000000u) * 0x9E3779B97F4A7C15ull ^ (uintptr_t)&x;
  x ^= x >> 31;
  return x | 1;
}

hak_warm void _hak_process_init(void) {
  int expect = 0;
  if (!atomic_compare_exchange_strong(&_hak_initialized, &expect, 1)) {
    /* another thread is initialising: wait (init never allocates, so a
     * recursive call from this thread cannot happen before state 2) */
    while (hak_load_acquire(&_hak_initialized) == 1) sched_yield();
    return;
  }
  /* The top byte is 0, so that it is 0 in every live secure trailer (the
   * key mixed with an address below 2^47): a one-byte underflow into the
   * block below writes that byte, and a random top byte equal to the byte
   * written (1 in 256 processes) let it pass (rel_probes underflow_1 missed
   * once in a clean-clone run).  56 bits stay secret. */
  _hak_cookie_key = (random_seed() | 1) & ~((uintptr_t)0xFF << 56);
  _hak_list_key = random_seed() * 0xD6E8FEB86659FD93ull;
  _hak_options_init();
  _hak_limit_init();
  _hak_secure_init();   /* the fill byte: fixed from here on */
  if (pthread_key_create(&thread_key, thread_done) == 0) hak_store_release(&thread_key_ok, 1);
  hak_store_release(&_hak_initialized, 2);
  if (hak_opt(PREWARM) > 0) _hak_segments_prewarm((size_t)hak_opt(PREWARM));
  /* Registered now only if a child needs its handler whatever the threads
   * (meshing's private copy of the pages); else when a second thread appears
   * (os.c).  May allocate (it does not in glibc for the first handlers):
   * after state 2. */
  _hak_os_fork_handlers(fork_prepare, fork_parent, fork_child, hak_opt(MESH));
}

hak_warm __attribute__((constructor(101))) static void hak_constructor(void) {
  _hak_process_init();
  _hak_options_init();   /* environ may not have been set at the first malloc */
  if (hak_opt(MESH)) _hak_os_fork_register();
  _hak_limit_init();
  _hak_stats_init();
  if (hak_heap_get() == &_hak_heap_empty) (void)_hak_thread_init();
  _hak_prof_init();   /* HAKMEM_PROF: after the options (=on loads the unwinder now) */
  _hak_guard_init();  /* HAKMEM_GUARD: its fault handler */
}

hak_warm __attribute__((destructor(101))) static void hak_destructor(void) {
  _hak_prof_at_exit();
  if (hak_opt(STATS)) _hak_stats_at_exit();
}
