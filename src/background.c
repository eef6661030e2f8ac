/* The background clock: a thread that gives empty memory back while the
 * program is idle.  The page clock otherwise ticks only on heaps' slow
 * paths, so a program that frees a burst and then waits (a server between
 * requests, a batch job between phases) kept the burst's pages until its
 * next allocation.  Started on the first release tick that finds empty
 * memory (HAKMEM_BACKGROUND; never in a program that stays small), it
 * wakes every half decommit delay and runs the same passes as a heap's
 * release tick: pool pages, cached segments, the BigCache, exited threads'
 * slabs.  It never allocates and takes every signal blocked.  A fork child
 * does not start one (creating a thread there is not safe before exec in a
 * multi-threaded parent): its clock ticks on its slow paths. */
#include "internal.h"
#include <signal.h>
#include <time.h>

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

/* From a release tick (no allocator lock held): start the thread once there
 * is empty memory to watch. */
hak_warm void _hak_background_wake(void) {
  if (hak_likely(hak_load_relaxed(&bg_state) != 0)) return;
  if (_hak_tls_forking) return;   /* inside fork: a child's handler says whether it has one */
  if (!hak_opt(BACKGROUND) || hak_opt(DECOMMIT) == HAK_DECOMMIT_OFF || hak_opt(DECOMMIT_DELAY_MS) == 0) return;
  uint64_t hits, misses, ev;
  size_t cached, mapped;
  _hak_bigcache_stats(&hits, &misses, &ev, &cached, &mapped);
  if (hak_load_relaxed(&_hak_retained_bytes) + cached < BG_MIN_BYTES) return;
  int expect = 0;
  if (!atomic_compare_exchange_strong(&bg_state, &expect, 1)) return;
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
