/* The release clock: its passes over the tiers (decommit what stayed empty
 * past the delay, age the BigCache, collect exited threads' slabs, look at
 * idle heaps) and a heap's own tick, which the heap's slow paths drive, so
 * that no timer thread is needed while the program allocates.
 *
 * And the background thread, for the program that frees a burst and then
 * waits (a server between requests, a batch job between phases): it kept
 * the burst's pages until its next allocation.  Started on the first
 * release tick that finds empty memory, or once a process with threads has
 * 16 MiB mapped (HAKMEM_BACKGROUND; never in a program that stays small),
 * from malloc's slow path (below: not from inside glibc's locks), it wakes
 * every half decommit delay and runs the same passes.  It never allocates
 * and takes every signal blocked.  A fork child does not start one
 * (creating a thread there is not safe before exec in a multi-threaded
 * parent): its clock ticks on its slow paths. */
#include "internal.h"
#include <signal.h>
#include <sys/single_threaded.h>
#include <time.h>

/* The process-wide passes of the release clock: decommit what has been
 * empty for longer than the delay, release cached large blocks past their
 * age, collect exited threads' slabs.  From heaps' release ticks and from
 * the background thread (bg_main). */
hak_warm void _hak_release_pass(uint64_t now) {
  uint64_t delay = (uint64_t)hak_opt(DECOMMIT_DELAY_MS);
  bool force = _hak_retained_over_target();
  _hak_pool_tick(now, delay, force);
  _hak_segment_cache_decommit(force ? 0 : delay, now);
  /* a cached large block is empty memory too: it leaves the cache (its
   * pages decommitted, its mapping parked) after the decommit delay, or
   * after its own age limit when that is shorter */
  uint64_t age = (uint64_t)hak_opt(BIGCACHE_AGE_MS);
  if (delay != 0 && (age == 0 || delay < age)) age = delay;
  if (age) _hak_bigcache_expire(age);
  _hak_pool_abandoned_tick(false);
  _hak_slots_release();
  _hak_heaps_idle_tick(now, delay);
  _hak_park_pass(false);
}

/* Periodic check from a heap's slow path. */
hak_warm void _hak_heap_release_tick(hak_heap_t* h) {
  if (hak_opt(DECOMMIT) == HAK_DECOMMIT_OFF) return;
  uint64_t now = _hak_clock_ms();
  if (now < h->tick.next_ms && !_hak_retained_over_target()) return;
  uint64_t delay = (uint64_t)hak_opt(DECOMMIT_DELAY_MS);
  h->tick.next_ms = now + (delay / 2 > 1 ? delay / 2 : 1);   /* a page goes after 1..2 ticks */
  _hak_release_pass(now);
  _hak_park_refresh(h);
  _hak_heap_reserve_tick(h);
  _hak_scavenge_tick(h, now, delay);
  _hak_background_wake();
}

static _Atomic(int) bg_state;   /* 0: not started, 1: starting or running, 2: never (fork child) */

static void* bg_main(void* arg) {
  (void)arg;
  for (;;) {
    uint64_t delay = (uint64_t)hak_opt(DECOMMIT_DELAY_MS);
    uint64_t period = delay / 2 > 10 ? delay / 2 : 10;
    struct timespec ts = {(time_t)(period / 1000), (long)(period % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {}
    _hak_release_pass(_hak_clock_ms());
  }
  return NULL;
}

/* Empty memory worth a thread: a program that stays small never starts one. */
#define BG_MIN_BYTES ((size_t)16 << 20)

/* The thread is created from malloc's slow path (_hak_background_start),
 * not from free, once the process has threads: free runs inside glibc's own
 * locks (pthread_join frees a dead thread's TLS holding the stack cache
 * lock, which pthread_create takes), and a thread started from such a free
 * deadlocked its program (256 threads taking turns, bench/turns).  A
 * process without threads has no such lock held: there a free that finds
 * the empty memory starts it at once. */
static _Atomic(int) bg_wanted;
static bool bg_allowed(void) {
  return hak_opt(BACKGROUND) && hak_opt(DECOMMIT) != HAK_DECOMMIT_OFF && hak_opt(DECOMMIT_DELAY_MS) != 0;
}

/* From a release tick or a free: start the thread once there is empty memory
 * to watch (or ask malloc's slow path to). */
hak_warm void _hak_background_wake(void) {
  if (hak_likely(hak_load_relaxed(&bg_state) != 0) || hak_load_relaxed(&bg_wanted) || !bg_allowed()) return;
  uint64_t hits, misses, ev;
  size_t cached, mapped;
  _hak_bigcache_stats(&hits, &misses, &ev, &cached, &mapped);
  if (hak_load_relaxed(&_hak_retained_bytes) + cached < BG_MIN_BYTES) return;
  hak_store_relaxed(&bg_wanted, 1);
  if (__libc_single_threaded) _hak_background_start();
}

/* From malloc's slow path (no allocator lock held, and no lock of glibc's
 * that pthread_create takes), or from a free in a process without threads:
 * start the thread when it is wanted, or when a process with threads has
 * grown to BG_MIN_BYTES mapped (its threads may all free and wait, with no
 * malloc to start it then). */
hak_warm void _hak_background_start(void) {
  if (hak_likely(hak_load_relaxed(&bg_state) != 0) || !bg_allowed()) return;
  if (!hak_load_relaxed(&bg_wanted) && (__libc_single_threaded || _hak_os_mapped() < BG_MIN_BYTES)) return;
  if (_hak_tls_forking) return;   /* inside fork: a child's handler says whether it has one */
  int expect = 0;
  if (!atomic_compare_exchange_strong(&bg_state, &expect, 1)) return;   /* running, or never (a fork child) */
  hak_store_relaxed(&bg_wanted, 0);
  _hak_os_fork_register();   /* before there are two threads (internal.h, hak_lock) */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);   /* the thread inherits it: no signal of the program lands there */
  pthread_t t;
  if (pthread_create(&t, &attr, bg_main, NULL) != 0) hak_store_relaxed(&bg_state, 0);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
}

bool _hak_background_running(void) { return hak_load_relaxed(&bg_state) == 1; }

/* The child of fork has no such thread, and starts none. */
void _hak_background_fork_child(void) { hak_store_relaxed(&bg_state, 2); }
