/* Guarded allocations (HAKMEM_GUARD=N; the idea of GWP-ASan, TCMalloc's
 * guarded allocations and Android's recoverable mode): about one
 * allocation in N of up to a page, chosen at malloc's sampling point
 * (sample.c), gets a page of its own in a small pool, against a page that is
 * never accessible.  What it catches, with the stack of the access (or of
 * the free), the block's allocation and its free:
 *  - an access past either end that leaves the page: the next page faults
 *    (the block is placed at the page's end or at its start, alternately,
 *    so overflows and underflows are both caught on some blocks);
 *  - a write into the rest of the page (the slack, filled with a byte when
 *    the block is made): found when the block is freed;
 *  - a read or write after free: the page is made inaccessible at free,
 *    and freed slots are reused oldest first;
 *  - a double free, and a free of an address inside the block.
 * After a report the program continues (HAKMEM_GUARD_ABORT=1: it aborts):
 * the faulting page is made accessible so the access proceeds, and the
 * slots it borders are retired, never used again.  A program that runs
 * correctly is never stopped by a guard: only an access outside a block's
 * bytes faults.
 *
 * The pool: one 4 MiB segment (kind HAK_SEG_GUARD, in the segment map like
 * any other: a free there leaves the fast path at its owner test), whose
 * header holds the slot table, then GUARD_SLOTS slots of two pages, a gap
 * page and the block's page, all inaccessible but the live blocks' pages.
 * Its memory is fixed: the table and at most GUARD_SLOTS live pages
 * (about 300 KiB; a freed block's page is given back); a full pool leaves
 * the allocation unguarded.  One lock;
 * the fault handler reads the table without it (a faulting slot's entry is
 * not rewritten while the slot is freed or live). */
#include "internal.h"
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define GUARD_FIRST ((size_t)128 << 10)   /* the first slot's gap page */
#define GUARD_SLOTS 64
#define GUARD_DEPTH 24                    /* frames kept per stack */
#define GUARD_FILL  0xA7                  /* the slack's byte */
#define GUARD_TABLE (((sizeof(hak_segment_t) + 63) & ~(size_t)63))

enum { SLOT_UNUSED, SLOT_LIVE, SLOT_FREED, SLOT_RETIRED };
typedef struct {
  uint32_t state;
  uint32_t size;                      /* the request */
  uintptr_t block;
  int32_t alloc_tid, free_tid;
  uint32_t nalloc, nfree;             /* frames of each stack */
  uintptr_t alloc_pcs[GUARD_DEPTH], free_pcs[GUARD_DEPTH];
} gslot_t;
_Static_assert(GUARD_TABLE + GUARD_SLOTS * sizeof(gslot_t) <= GUARD_FIRST, "the slot table fits the header");

static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(hak_segment_t*) guard_pool;
static uint32_t guard_fresh;                          /* slots never used: guard_fresh .. GUARD_SLOTS-1 */
static uint8_t guard_fifo[GUARD_SLOTS];               /* freed slots, oldest first */
static uint32_t guard_fifo_head, guard_fifo_n;
static uint32_t guard_next_right;                     /* placement: alternately at the page's end and start */
static _Atomic(uint64_t) gst_guarded, gst_errors;
static _Atomic(uint32_t) gst_live, gst_retired;
static _Atomic(size_t) gst_bytes;
static struct sigaction guard_old_segv;
/* inside a guarded allocation or free (stacks are walked): its mallocs are
 * not guarded */
static __thread bool guard_busy __attribute__((tls_model("initial-exec")));
static __thread int32_t guard_tid __attribute__((tls_model("initial-exec")));   /* this thread's id (0: not read yet) */

static int32_t guard_tid_get(void) { return guard_tid != 0 ? guard_tid : (guard_tid = _hak_os_gettid()); }

static gslot_t* guard_table(hak_segment_t* seg) { return (gslot_t*)((uint8_t*)seg + GUARD_TABLE); }
static uint8_t* guard_page(hak_segment_t* seg, size_t i) { return hak_pslot_page(seg, GUARD_FIRST, i, 1); }

hak_warm bool _hak_guard_busy(void) { return guard_busy; }

/* The stack from the call site on (unwind.c). */
static uint32_t guard_stack(uintptr_t* out, uintptr_t site) { return (uint32_t)_hak_unwind(out, GUARD_DEPTH, site); }

/* ---------------------------------------------------------------- reports */
static void guard_report_stack(const char* title, const uintptr_t* pcs, uint32_t n, int32_t tid, bool access) {
  if (tid != 0) _hak_message("  %s (thread %d):\n", title, (int)tid);
  else _hak_message("  %s:\n", title);
  for (uint32_t i = 0; i < n; i++) {
    /* (a return address: the call is the byte before it) */
    char name[128];
    uintptr_t off;
    const char* file;
    if (_hak_symbolize(pcs[i] - (i == 0 && access ? 0 : 1), name, sizeof name, &off, &file))
      _hak_message("    #%u 0x%lx in %s+0x%lx (%s)\n", i, (unsigned long)pcs[i], name, (unsigned long)off + (i == 0 && access ? 0 : 1), file);
    else if (file != NULL) _hak_message("    #%u 0x%lx (%s)\n", i, (unsigned long)pcs[i], file);
    else _hak_message("    #%u 0x%lx\n", i, (unsigned long)pcs[i]);
  }
  if (n == 0) _hak_message("    (no frames)\n");
}

/* One report: the headline, the stack of what found the error (the faulting
 * access, whose first frame is the faulting instruction, or the free), the
 * block's allocation and, once freed, its free. */
static void guard_report(const char* what, const gslot_t* s, const uintptr_t* now, uint32_t nnow, bool fault) {
  atomic_fetch_add_explicit(&gst_errors, 1, memory_order_relaxed);
  _hak_message("hakmem: guarded allocation: %s\n", what);
  guard_report_stack(fault ? "the access" : "the free that found it", now, nnow, guard_tid_get(), fault);
  if (s != NULL) {
    guard_report_stack("allocated", s->alloc_pcs, s->nalloc, s->alloc_tid, false);
    if (s->nfree != 0) guard_report_stack("freed", s->free_pcs, s->nfree, s->free_tid, false);
  }
  if (hak_opt(GUARD_ABORT)) abort();
}

/* ---------------------------------------------------------------- the pool */
static void guard_segv(int sig, siginfo_t* si, void* uc);

static hak_segment_t* guard_pool_make(void) {
  hak_segment_t* seg = _hak_segment_alloc(HAK_SEG_SIZE, 0, HAK_SEG_GUARD, 0, 0);
  if (seg == NULL) return NULL;
  if (!_hak_os_protect((uint8_t*)seg + GUARD_FIRST, HAK_SEG_SIZE - GUARD_FIRST, PROT_NONE)) return NULL;
  return seg;
}

/* HAKMEM_GUARD_PER_SEC: whether one more block may be guarded in this
 * second (the lock held).  Each costs two mprotect calls and two stack
 * walks (about 8 us; more where other threads' TLBs are flushed), so the
 * bound keeps a program that allocates tens of millions of blocks a second
 * at a cost below what can be measured, whatever N says. */
static uint64_t guard_second, guard_second_n;
static _Atomic(uint64_t) gst_capped;
static bool guard_within_budget(void) {
  long long cap = hak_opt(GUARD_PER_SEC);
  if (cap == 0) return true;
  uint64_t sec = _hak_clock_ms() / 1000;
  if (sec != guard_second) guard_second = sec, guard_second_n = 0;
  if (guard_second_n >= (uint64_t)cap) {
    atomic_fetch_add_explicit(&gst_capped, 1, memory_order_relaxed);
    return false;
  }
  guard_second_n++;
  return true;
}

/* A slot for a new block (the lock held): never used first, else the
 * oldest freed (one retired since it was freed is dropped); GUARD_SLOTS
 * when the pool is full. */
static uint32_t guard_slot_take(hak_segment_t* seg) {
  if (guard_fresh < GUARD_SLOTS) return guard_fresh++;
  while (guard_fifo_n != 0) {
    uint32_t i = guard_fifo[guard_fifo_head];
    guard_fifo_head = (guard_fifo_head + 1) % GUARD_SLOTS;
    guard_fifo_n--;
    if (__atomic_load_n(&guard_table(seg)[i].state, __ATOMIC_ACQUIRE) == SLOT_FREED) return i;
  }
  return GUARD_SLOTS;
}

/* A guarded block of `size` bytes (1 .. a page), or NULL (the pool full, or
 * no memory): the caller allocates as usual. */
hak_warm void* _hak_guard_alloc(size_t size, uintptr_t site) {
  if (size == 0 || size > HAK_OS_PAGE || guard_busy) return NULL;
  guard_busy = true;
  hak_lock(&guard_lock);
  hak_segment_t* seg = NULL;
  uint32_t i = GUARD_SLOTS;
  if (guard_within_budget()) {
    seg = hak_load_relaxed(&guard_pool);
    if (seg == NULL && (seg = guard_pool_make()) != NULL) hak_store_release(&guard_pool, seg);
    i = seg != NULL ? guard_slot_take(seg) : GUARD_SLOTS;
  }
  bool right = (guard_next_right++ & 1) == 0;
  hak_unlock(&guard_lock);
  void* p = NULL;
  if (i < GUARD_SLOTS) {
    _hak_unwind_load(site);   /* (the first stack: no lock held) */
    uintptr_t pcs[GUARD_DEPTH];
    uint32_t n = guard_stack(pcs, site);
    uint8_t* page = guard_page(seg, i);
    if (_hak_os_protect(page, HAK_OS_PAGE, PROT_READ | PROT_WRITE)) {
      memset(page, GUARD_FILL, HAK_OS_PAGE);
      p = right ? page + HAK_OS_PAGE - hak_align_up(size, 16) : page;
      gslot_t* s = &guard_table(seg)[i];
      s->size = (uint32_t)size;
      s->block = (uintptr_t)p;
      s->alloc_tid = guard_tid_get();
      s->nalloc = n;
      memcpy(s->alloc_pcs, pcs, n * sizeof *pcs);
      s->nfree = 0;
      s->free_tid = 0;
      __atomic_store_n(&s->state, SLOT_LIVE, __ATOMIC_RELEASE);
      atomic_fetch_add_explicit(&gst_guarded, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&gst_live, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&gst_bytes, size, memory_order_relaxed);
    } else {
      hak_lock(&guard_lock);
      __atomic_store_n(&guard_table(seg)[i].state, SLOT_RETIRED, __ATOMIC_RELAXED);
      hak_unlock(&guard_lock);
    }
  }
  guard_busy = false;
  return p;
}

/* The slot whose block page holds p, or -1 (a gap page, the header, past
 * the slots). */
static long guard_slot(hak_segment_t* seg, const void* p) { return hak_pslot_of(seg, GUARD_FIRST, GUARD_SLOTS, 1, p); }

/* A live guarded block's request (its usable size); 0 when p is not one. */
size_t _hak_guard_usable(hak_segment_t* seg, const void* p) {
  long i = guard_slot(seg, p);
  if (i < 0) return 0;
  const gslot_t* s = &guard_table(seg)[i];
  return __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == SLOT_LIVE && s->block == (uintptr_t)p ? s->size : 0;
}

/* The slack's bytes that are not the fill: the first one's offset from the
 * block (negative: before it), or 0 when none. */
static const uint8_t* guard_fill_broken(const uint8_t* q, const uint8_t* end) {
  const uint64_t fill = 0x0101010101010101ull * GUARD_FILL;
  for (; q < end && ((uintptr_t)q & 7) != 0; q++)
    if (*q != GUARD_FILL) return q;
  for (; q + 8 <= end; q += 8) {   /* (a word at a time: the page is 4 KiB) */
    uint64_t w;
    memcpy(&w, q, 8);
    if (w != fill) break;
  }
  for (; q < end; q++)
    if (*q != GUARD_FILL) return q;
  return NULL;
}
static bool guard_slack_broken(const gslot_t* s, const uint8_t* page, long* where) {
  const uint8_t* b = (const uint8_t*)s->block;
  const uint8_t* q = guard_fill_broken(page, b);
  if (q == NULL) q = guard_fill_broken(b + s->size, page + HAK_OS_PAGE);
  if (q != NULL) *where = (long)(q - b);
  return q != NULL;
}

/* free() of an address in the pool; the free's stack is kept from the
 * site on. */
hak_warm void _hak_guard_free(hak_segment_t* seg, void* p, const char* op, uintptr_t site) {
  long i = guard_slot(seg, p);
  gslot_t* s = i >= 0 ? &guard_table(seg)[i] : NULL;
  uint32_t st = s != NULL ? __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) : SLOT_UNUSED;
  if (s == NULL || s->block != (uintptr_t)p || st == SLOT_UNUSED) {
    _hak_invalid_pointer(op, p, "not the start of a block");
    return;
  }
  bool was = guard_busy;
  guard_busy = true;
  uintptr_t pcs[GUARD_DEPTH];
  uint32_t n = guard_stack(pcs, site);
  char what[160];
  if (st == SLOT_FREED) {
    _hak_snprintf(what, sizeof what, "double free of the %u-byte block %p in %s()", s->size, p, op);
    guard_report(what, s, pcs, n, false);
  } else if (st == SLOT_LIVE) {
    uint8_t* page = guard_page(seg, (size_t)i);
    long where;
    if (guard_slack_broken(s, page, &where)) {
      _hak_snprintf(what, sizeof what, "a write %s the %u-byte block %p (byte %ld from its start), found by %s()",
                    where < 0 ? "before" : "past the end of", s->size, p, where, op);
      guard_report(what, s, pcs, n, false);
    }
    s->free_tid = guard_tid_get();
    s->nfree = n;
    memcpy(s->free_pcs, pcs, n * sizeof *pcs);
    /* inaccessible, and given back: the pool's resident pages are its live
     * blocks' (freed slots are reused oldest first, so a kept page would
     * make all 64 resident) */
    if (!_hak_os_map_none_at(page, HAK_OS_PAGE)) _hak_os_protect(page, HAK_OS_PAGE, PROT_NONE);
    hak_lock(&guard_lock);
    __atomic_store_n(&s->state, SLOT_FREED, __ATOMIC_RELEASE);
    guard_fifo[(guard_fifo_head + guard_fifo_n++) % GUARD_SLOTS] = (uint8_t)i;
    hak_unlock(&guard_lock);
    atomic_fetch_sub_explicit(&gst_live, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&gst_bytes, s->size, memory_order_relaxed);
  }
  /* (a retired slot's block: an error was reported on it; its free is let be) */
  guard_busy = was;
}

/* ---------------------------------------------------------------- faults */
/* The faulting access: a write (x86-64's page-fault error code, bit 1), and
 * the instruction's address; elsewhere "an access", and the stack is kept
 * whole. */
static const char* fault_kind(const ucontext_t* uc) {
#if defined(__x86_64__)
  return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0 ? "a write" : "a read";
#else
  (void)uc;
  return "an access";
#endif
}
static uintptr_t fault_ip(const ucontext_t* uc) {
#if defined(__x86_64__)
  return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#else
  (void)uc;
  return 0;
#endif
}
/* Retire slot i (the lock is not taken: a signal handler; the slot leaves
 * every list because its state says so, and guard_slot_take skips it). */
static void guard_retire(hak_segment_t* seg, long i) {
  if (i < 0 || i >= GUARD_SLOTS) return;
  gslot_t* s = &guard_table(seg)[i];
  if (__atomic_exchange_n(&s->state, SLOT_RETIRED, __ATOMIC_ACQ_REL) != SLOT_RETIRED)
    atomic_fetch_add_explicit(&gst_retired, 1, memory_order_relaxed);
}

/* A fault at a in the pool: true when it was a guarded block's error,
 * reported, and the page made accessible (the access is retried and
 * proceeds). */
static bool guard_fault(hak_segment_t* seg, uintptr_t a, ucontext_t* uc) {
  size_t page = (a - (uintptr_t)seg - GUARD_FIRST) / HAK_OS_PAGE;
  long i = (long)(page / 2);
  const char* kind = fault_kind(uc);
  const gslot_t* hit = NULL;
  char what[200];
  hit = (page & 1) ? &guard_table(seg)[i] : NULL;
  if (hit != NULL && __atomic_load_n(&hit->state, __ATOMIC_ACQUIRE) == SLOT_FREED) {   /* a freed block's page */
    long off = (long)(a - hit->block);
    _hak_snprintf(what, sizeof what, "use after free: %s at %p, byte %ld of the freed %u-byte block %p",
                  kind, (void*)a, off, hit->size, (void*)hit->block);
  } else {
    /* a gap page, or an unused slot's page: past the end of the nearest
     * block before it, or ahead of the nearest block after it */
    const gslot_t *before = NULL, *after = NULL;
    for (long j = (long)(page / 2) - 1; j >= 0 && j >= (long)(page / 2) - 2 && before == NULL; j--) {
      uint32_t st = __atomic_load_n(&guard_table(seg)[j].state, __ATOMIC_ACQUIRE);
      if ((st == SLOT_LIVE || st == SLOT_FREED) && guard_table(seg)[j].block < a) before = &guard_table(seg)[j];
    }
    for (long j = (long)(page / 2); j < GUARD_SLOTS && j <= (long)(page / 2) + 1 && after == NULL; j++) {
      uint32_t st = __atomic_load_n(&guard_table(seg)[j].state, __ATOMIC_ACQUIRE);
      if ((st == SLOT_LIVE || st == SLOT_FREED) && guard_table(seg)[j].block > a) after = &guard_table(seg)[j];
    }
    uintptr_t past = before ? a - (before->block + before->size) : UINTPTR_MAX;
    uintptr_t ahead = after ? after->block - a : UINTPTR_MAX;
    if (before == NULL && after == NULL) return false;
    hit = past <= ahead ? before : after;
    bool freed = __atomic_load_n(&hit->state, __ATOMIC_ACQUIRE) == SLOT_FREED;
    /* (byte `size` of a block is the first past its end: 1 byte past) */
    if (past <= ahead)
      _hak_snprintf(what, sizeof what, "heap buffer overflow: %s at %p, byte %ld of the %s%u-byte block %p (%lu past its end)",
                    kind, (void*)a, (long)(a - hit->block), freed ? "freed " : "", hit->size,
                    (void*)hit->block, (unsigned long)past + 1);
    else
      _hak_snprintf(what, sizeof what, "heap buffer underflow: %s at %p, byte %ld of the %s%u-byte block %p (%lu before its start)",
                    kind, (void*)a, -(long)ahead, freed ? "freed " : "", hit->size,
                    (void*)hit->block, (unsigned long)ahead);
  }
  /* the access's stack: the walk goes through this handler and the signal
   * frame (whose frame's address is the faulting instruction's, exactly:
   * libgcc's and libunwind's walks say so); it is kept from there on */
  uintptr_t pcs[GUARD_DEPTH];
  uint32_t m = (uint32_t)_hak_unwind(pcs, GUARD_DEPTH, fault_ip(uc));
  guard_report(what, hit, pcs, m, true);
  /* continue: the page becomes accessible and the slots it borders are
   * never used again */
  guard_retire(seg, (long)(hit - guard_table(seg)));
  if (!(page & 1)) guard_retire(seg, i - 1), guard_retire(seg, i);   /* (a gap page borders two slots) */
  else guard_retire(seg, i);
  return _hak_os_protect((uint8_t*)seg + GUARD_FIRST + page * HAK_OS_PAGE, HAK_OS_PAGE, PROT_READ | PROT_WRITE);
}

static void guard_segv(int sig, siginfo_t* si, void* uc) {
  int saved = errno;
  hak_segment_t* seg = hak_load_acquire(&guard_pool);
  uintptr_t a = (uintptr_t)si->si_addr;
  if (seg != NULL && si->si_code == SEGV_ACCERR && a >= (uintptr_t)seg + GUARD_FIRST &&
      a < (uintptr_t)seg + GUARD_FIRST + GUARD_SLOTS * 2 * HAK_OS_PAGE + HAK_OS_PAGE) {
    bool was = guard_busy;
    guard_busy = true;
    bool ours = guard_fault(seg, a, uc);
    guard_busy = was;
    if (ours) {
      errno = saved;
      return;
    }
  }
  errno = saved;
  _hak_signal_pass(&guard_old_segv, sig, si, uc);
}

/* ---------------------------------------------------------------- the rest */
/* At start-up, guarded allocations on: the fault handler now, not at the
 * first guarded block (a program may have entered a sandbox by then that
 * refuses sigaction).  A handler the program installed before is called
 * for every fault that is not the pool's; one it installs later replaces
 * this one. */
hak_warm void _hak_guard_init(void) {
  if (HAK_SECURE || hak_opt(GUARD) == 0) return;
  /* Under valgrind (its preload library in LD_PRELOAD): off.  memcheck
   * makes a page unaddressable at mprotect(PROT_NONE) and does not give it
   * back at PROT_READ|PROT_WRITE, so a reused slot would read as invalid;
   * and it checks every block itself. */
  const char* pre = _hak_env_find("LD_PRELOAD");
  if (pre != NULL && strstr(pre, "vgpreload") != NULL) {
    _hak_options[HAK_OPT_GUARD] = 0;
    return;
  }
  _hak_unwind_prepare();   /* (stacks at every guarded allocation and free) */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = guard_segv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &guard_old_segv);
}

void _hak_guard_figures(hak_pslot_figures_t* f, uint64_t* guarded, uint64_t* capped, size_t* retired, uint64_t* errors) {
  *guarded = hak_load_relaxed(&gst_guarded);
  *capped = hak_load_relaxed(&gst_capped);
  *retired = hak_load_relaxed(&gst_retired);
  *errors = hak_load_relaxed(&gst_errors);
  f->live = hak_load_relaxed(&gst_live);
  f->bytes = hak_load_relaxed(&gst_bytes);
  f->segments = hak_load_acquire(&guard_pool) != NULL;
  f->live_pages = f->pages = f->live;   /* (a freed block's page is given back) */
  f->header = f->segments * GUARD_FIRST;
}

/* fork: the child's lock is new; its pool is the parent's copy. */
void _hak_guard_fork_prepare(void) { hak_lock(&guard_lock); }
void _hak_guard_fork_parent(void) { hak_unlock(&guard_lock); }
void _hak_guard_fork_child(void) {
  pthread_mutex_init(&guard_lock, NULL);
  guard_tid = 0;   /* (the forking thread's id is the child's pid now) */
}
