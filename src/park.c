/* Sleeping threads' slabs go to the process (HAKMEM_PARK).  A thread that
 * waits -- a worker for its lock, a connection's thread for its socket --
 * keeps a partly used slab of every class it touched, and only its own
 * malloc reuses their room: 64 threads taking turns through one lock held
 * 116 MB where glibc held 33.  So the release clock, and every heap that
 * needs a slab (_hak_park_pass, below), looks at the other heaps: one whose
 * thread sleeps in the kernel gives every slab it has to the abandoned
 * lists, as at the thread's exit, and the heaps that run adopt them one of
 * a class at a time (refill.c's order).  The thread keeps its heap, empty;
 * when it wakes, it refills as any heap does.
 *
 * Why it is safe without a lock or an atomic on the owner's fast paths:
 * 1. the owner's slow paths hold the heap's xbusy (hak_heap_enter): it is
 *    taken here with a try, so the owner is in none;
 * 2. the owner's heap pointer (_hak_tls_heap) is set to the empty heap
 *    before its state is read: a fast path the owner starts after that
 *    misses and waits in _hak_thread_init until xbusy is free again;
 * 3. the owner's state, read after that store from
 *    /proc/self/task/TID/status, is S: it sleeps in a system call, and
 *    the fast paths make none, so every fast path it began before the
 *    store has ended (x86-64's store order makes its writes visible first);
 * 4. its blocked signals are the ones it had when it named itself: a
 *    signal handler that interrupted a fast path and then sleeps blocks
 *    its own signal (unless installed with SA_NODEFER and an empty
 *    sa_mask: that one case is not told apart; HAKMEM_PARK=0 for such a
 *    program).  A thread whose mask changed is named again at its next
 *    release tick (park_refresh), and kept until then.
 * Then the heap is the parker's until the pointer is put back.  Not with
 * meshing (its slabs are in their own lists), nor under
 * ThreadSanitizer, which cannot see point 3's order. */
#include "internal.h"
#include "slab.h"
#include <errno.h>
#include <signal.h>
#include <sys/single_threaded.h>

_Atomic(uint64_t) _hak_stat_park_heaps, _hak_stat_park_slabs;

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define PARK_BUILD 1
#else
#define PARK_BUILD 0
#endif

static bool park_enabled(void) {
  return PARK_BUILD && hak_opt(PARK) && !hak_opt(MESH);
}

/* Signals 1..64 as the kernel prints them (bit n-1: signal n), without
 * glibc's two internal ones (32, 33), which it never leaves blocked. */
#define PARK_SIG_MASK (~((uint64_t)3 << 31))
hak_warm static uint64_t own_mask(void) {
  sigset_t set;
  if (pthread_sigmask(SIG_BLOCK, NULL, &set) != 0) return ~(uint64_t)0;
  uint64_t m = 0;
  for (int sig = 1; sig <= 64; sig++)
    if (sigismember(&set, sig) == 1) m |= (uint64_t)1 << (sig - 1);
  return m & PARK_SIG_MASK;
}

/* The owner, once its heap is its own (init.c). */
hak_warm void _hak_park_bind(hak_heap_t* h, hak_heap_t** slot) {
  if (!PARK_BUILD) return;
  _hak_heap_bind(h, slot, _hak_os_gettid(), own_mask());
}

/* The owner, at its release tick: its mask changed since it named itself. */
hak_warm void _hak_park_refresh(hak_heap_t* h) {
  if (PARK_BUILD && __atomic_load_n(&h->thread.mask_stale, __ATOMIC_RELAXED)) _hak_heap_bind(h, h->thread.slot, h->thread.tid, own_mask());
}

/* A thread's state letter and blocked signals, from its status file. */
static bool thread_state(int32_t tid, char* state, uint64_t* mask) {
  char path[48] = "/proc/self/task/", buf[2048];
  size_t n = 16;
  char digits[12];
  size_t k = 0;
  for (uint32_t t = (uint32_t)tid; k == 0 || t != 0; t /= 10) digits[k++] = (char)('0' + t % 10);
  while (k > 0) path[n++] = digits[--k];
  memcpy(path + n, "/status", 8);
  if (!_hak_os_read_small(path, buf, sizeof buf)) return false;
  const char* st = strstr(buf, "\nState:\t");
  const char* sb = strstr(buf, "\nSigBlk:\t");
  if (st == NULL || sb == NULL) return false;
  *state = st[8];
  uint64_t m = 0;
  for (const char* c = sb + 9; *c != '\n' && *c != 0; c++) {
    int d = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10 : -1;
    if (d < 0) return false;
    m = m << 4 | (uint64_t)d;
  }
  *mask = m & PARK_SIG_MASK;
  return true;
}

typedef struct { hak_heap_t* self; size_t heaps, slabs, budget; } park_walk_t;

/* A pass at most every 250 us on the heaps' refill paths; a heap whose
 * thread was found running is skipped for 1, 2, 4 ... 64 passes (a status
 * read costs about 11 us: eight running threads then cost about 0.5 % of a
 * CPU at the most frequent passes); at most 64 reads a pass. */
#define PARK_GAP_NS ((uint64_t)250 * 1000)
#define PARK_BACKOFF_MAX 64u

/* Under the heap lock (so the thread cannot finish its exit meanwhile: its
 * heap pointer's slot lives as long as the heap is in use). */
static void park_one(hak_heap_t* h, void* arg) {
  park_walk_t* w = arg;
  if (!h->in_use || h == w->self || h->thread.slot == NULL || __atomic_load_n(&h->members, __ATOMIC_RELAXED) == NULL)
    return;
  if (h->thread.skip != 0) {   /* found running lately: looked at less often */
    h->thread.skip--;
    return;
  }
  if (w->budget == 0) return;
  w->budget--;
  char st;
  uint64_t mask;
  bool asleep = thread_state(h->thread.tid, &st, &mask) && st == 'S';   /* else running, stopped, or gone */
  if (asleep && mask != h->thread.mask) {
    __atomic_store_n(&h->thread.mask_stale, 1, __ATOMIC_RELAXED);
    asleep = false;
  }
  if (!asleep) {
    h->thread.backoff = h->thread.backoff ? (h->thread.backoff < PARK_BACKOFF_MAX ? h->thread.backoff * 2 : PARK_BACKOFF_MAX) : 1;
    h->thread.skip = h->thread.backoff;
    return;
  }
  h->thread.backoff = 0;
  uint32_t free_ = 0;
  if (!atomic_compare_exchange_strong_explicit(&h->xbusy, &free_, 1, memory_order_acquire, memory_order_relaxed)) return;
  hak_heap_t** slot = h->thread.slot;
  hak_heap_t* expect = h;   /* (the thread's pointer is h but inside the hand-over: checked, not assumed) */
  if (!__atomic_compare_exchange_n(slot, &expect, &_hak_heap_empty, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    atomic_store_explicit(&h->xbusy, 0, memory_order_release);
    return;
  }
  if (thread_state(h->thread.tid, &st, &mask) && st == 'S' && mask == h->thread.mask) {
    atomic_thread_fence(memory_order_seq_cst);
#if HAK_DEBUG
    /* the debug build widens the window in which the owner may wake, and
     * hak_heap_enter checks that it waits only from init.c (test-threads
     * park-race fails within a few rounds without the pointer moved aside) */
    __atomic_store_n(&h->thread.parking, 1, __ATOMIC_RELAXED);
    for (uint64_t t0 = _hak_os_clock_ns(); _hak_os_clock_ns() - t0 < 2000000;) __builtin_ia32_pause();
#endif
    size_t n = _hak_heap_give_slabs(h);
    if (n != 0) {
      w->heaps++;
      w->slabs += n;
    }
    if (HAK_DEBUG) __atomic_store_n(&h->thread.parking, 0, __ATOMIC_RELAXED);
  }
  hak_heap_set(slot, h);
  atomic_store_explicit(&h->xbusy, 0, memory_order_release);
}

/* From the release clock (every eighth of the decommit delay, in ms) and
 * from every heap that needs a slab (need: at most every PARK_GAP_NS, so
 * that a thread that ran a short turn gives its slabs before the next
 * turn's thread takes new ones: bench/turns at 64 threads, turns of 0.2
 * ms, held 68 MB with a pass per 4 ms, 28 with one per ms, 17 with one per
 * 250 us, 14 per 100 us).  Returns the slabs given. */
hak_warm size_t _hak_park_pass(bool need) {
  static _Atomic(uint64_t) next_ms, next_need_ns;
  if (__libc_single_threaded || !park_enabled()) return 0;   /* (no other thread to look at) */
  uint64_t delay = (uint64_t)hak_opt(DECOMMIT_DELAY_MS);
  _Atomic(uint64_t)* clock = need ? &next_need_ns : &next_ms;
  uint64_t now = need ? _hak_os_clock_ns() : _hak_clock_ms();
  uint64_t gap = need ? PARK_GAP_NS : (delay / 8 > 1 ? delay / 8 : 1);
  uint64_t due = hak_load_relaxed(clock);
  if (now < due || !atomic_compare_exchange_strong(clock, &due, now + gap)) return 0;
  int saved = errno;
  park_walk_t w = {hak_heap_get(), 0, 0, 64};   /* (budget: status reads) */
  _hak_heaps_foreach(park_one, &w);
  errno = saved;
  if (w.heaps == 0) return 0;
  atomic_fetch_add_explicit(&_hak_stat_park_heaps, w.heaps, memory_order_relaxed);
  atomic_fetch_add_explicit(&_hak_stat_park_slabs, w.slabs, memory_order_relaxed);
  _hak_pool_abandoned_tick(false);
  return w.slabs;
}
