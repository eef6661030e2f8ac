/* Compaction by meshing (HAKMEM_MESH=1; Powers et al., "Mesh", PLDI 2019).
 * After scattered frees a slab that keeps one live block keeps its whole
 * page.  Two slabs of one class whose live blocks sit at different offsets
 * can share one physical page: the live blocks of slab B are copied to the
 * same offsets of slab A, and B's virtual page is mapped onto A's page of the
 * mesh file (a memfd).  No pointer moves; B's own page goes back to the OS.
 * Runs only from slow paths (hak_collect/malloc_trim, and before a heap maps
 * a new segment); the malloc/free fast paths do not know it exists: a free
 * into a meshed-away slab fails the owner test and goes out of line.
 * docs/DESIGN.md ("Compaction") gives the invariants. */
#include "internal.h"
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/single_threaded.h>
#include <unistd.h>

#define MESH_SLAB    ((size_t)64 << 10)              /* the slabs meshed: one of 64 KiB (16 pages) */
#define MESH_PAGES   (MESH_SLAB / HAK_PAGE_SIZE)
#define MESH_NBITS   (MESH_SLAB / 16)               /* blocks of the smallest class in one slab */
#define MESH_WORDS   (MESH_NBITS / 64)
#define MESH_MAX     16384                          /* entries at most (each is a kernel mapping) */
#define MESH_PROBES  64                             /* roots tried per sparse slab */

/* One meshed page: a root (its page lives in the mesh file at `off`) or an
 * alias (its virtual page maps its root's file page). */
typedef struct hak_mesh_s {
  hak_slab_t* slab;
  struct hak_mesh_s* root;      /* alias: the root it is meshed onto; root: NULL */
  struct hak_mesh_s* next;      /* registry of all entries, or the free entries */
  struct hak_mesh_s* prev;
  uint64_t off;                 /* root: file offset of its page */
  uint32_t nphantom;            /* root: blocks neither live nor on its free list */
  uint32_t naliases;            /* root */
  void* fork_copy;              /* root, during a fork without a second memfd: its contents */
  uint64_t map[MESH_WORDS];     /* root: its phantom blocks; alias: its live blocks */
} hak_mesh_t;

_Atomic(size_t) _hak_mesh_entries;
static pthread_mutex_t mesh_lock = PTHREAD_MUTEX_INITIALIZER;   /* one pass at a time; taken before any other lock */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;    /* registry, entries, file slots: a leaf lock */
static int mesh_fd = -1;
static bool mesh_off;              /* a fork child without its own mesh file: no new meshes */
static hak_mesh_t* reg_head;
static hak_mesh_t* entry_free;
static uint8_t* entry_chunk;
static size_t entry_left;
static uint64_t* slots;            /* released file slots (MESH_MAX of them at most) */
static size_t slot_nfree;
static uint64_t slot_end;
static size_t mesh_max;            /* entries allowed: MESH_MAX, or a quarter of vm.max_map_count */
static _Atomic(uint64_t) st_passes, st_meshes, st_roots, st_dissolved, st_unmeshed, st_bytes, st_punched, st_waits,
    st_forks;

/* ---------------------------------------------------------------- geometry */
hak_inline hak_mesh_t* mslab_entry(const hak_slab_t* s) { return hak_segment_of(s)->mesh_page[hak_slot_of(hak_slab_index(s))]; }
hak_inline uint32_t mslab_blocks(const hak_slab_t* s) { return (uint32_t)(MESH_SLAB / s->bsize); }
hak_inline uint32_t mslab_carved(const hak_slab_t* s) { return s->carved / hak_slab_step(s); }
/* a page's word of a segment's page set and its bit: for the write
 * barrier's mesh.prot, whose atomics need acquire/release (the page set's
 * own atomic helpers, internal.h, are relaxed: mesh.pages uses those) */
hak_inline uint64_t* page_word(hak_pset_t* set, size_t idx) { return &set->w[idx >> 6]; }
hak_inline uint64_t page_bit(size_t idx) { return (uint64_t)1 << (idx & 63); }
hak_inline bool bit_get(const uint64_t* m, uint32_t i) { return (m[i >> 6] >> (i & 63)) & 1; }
hak_inline void bit_set(uint64_t* m, uint32_t i) { m[i >> 6] |= (uint64_t)1 << (i & 63); }
hak_inline void bit_clear(uint64_t* m, uint32_t i) { m[i >> 6] &= ~((uint64_t)1 << (i & 63)); }
static uint32_t bits_count(const uint64_t* m, size_t words) {
  uint32_t n = 0;
  for (size_t w = 0; w < words; w++) n += (uint32_t)hak_popcount64(m[w]);
  return n;
}

/* ---------------------------------------------------------------- the write barrier
 * While a page is copied (or a fork copies the mesh file) it is read-only
 * and its bit is set in its segment's mesh.prot; a thread that writes to it
 * takes SIGSEGV, and this handler waits until the bit clears, then returns
 * so the write is retried -- on the new mapping.  A fault that is not ours
 * goes to the handler installed before (or the default action).  In a fork
 * child the barrier's owner does not exist: the first fault (glibc writes to
 * its FILE locks before the atfork child handlers run) privatises at once. */
static struct sigaction old_segv;
static _Atomic(pid_t) fork_pid;    /* the parent's pid while a fork barrier is up */
static void fork_privatize(void);

static __thread uintptr_t segv_addr __attribute__((tls_model("initial-exec")));
static __thread unsigned segv_tries __attribute__((tls_model("initial-exec")));

static void mesh_segv(int sig, siginfo_t* si, void* ctx) {
  void* a = si->si_addr;
  hak_ptr_t r;
  if (si->si_code == SEGV_ACCERR && hak_ptr_classify(a, &r) == HAK_SEG_SMALL) {
    hak_segment_t* seg = r.seg;
    size_t page = ((uintptr_t)a >> HAK_PAGE_SHIFT) & (HAK_PAGES_PER_SEG - 1);
    size_t idx = hak_slab_at(seg, page) != NULL ? hak_pmap_head(seg, page) : 0;   /* (its slab's bit; a free page: none) */
    uint64_t* word = page_word(&seg->mesh.prot, idx);
    uint64_t bit = page_bit(idx);
    if (__atomic_load_n(word, __ATOMIC_ACQUIRE) & bit) {
      atomic_fetch_add_explicit(&st_waits, 1, memory_order_relaxed);
      pid_t fp = hak_load_relaxed(&fork_pid);
      if (fp != 0 && getpid() != fp) {
        fork_privatize();
        return;
      }
      while (__atomic_load_n(word, __ATOMIC_ACQUIRE) & bit) sched_yield();
      return;
    }
    /* The barrier may have been lifted between the fault and this test:
     * retry.  A page the program protected itself faults again at the same
     * address; after a few tries that fault is not ours. */
    if ((uintptr_t)a != segv_addr) {
      segv_addr = (uintptr_t)a;
      segv_tries = 0;
    }
    if (++segv_tries <= 16) {
      sched_yield();
      return;
    }
    segv_tries = 0;
  }
  _hak_signal_pass(&old_segv, sig, si, ctx);
}

/* (Re)installed before every barrier: a program may have installed its own
 * handler since; it is kept and called for faults that are not ours. */
static void handler_install(void) {
  struct sigaction cur;
  if (sigaction(SIGSEGV, NULL, &cur) != 0) return;
  if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == mesh_segv) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = mesh_segv;
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  old_segv = cur;
  sigaction(SIGSEGV, &sa, NULL);
}

/* A signal handler of the program that ran on the copying thread and wrote
 * to a protected block would wait for itself: asynchronous signals wait
 * while a barrier is up. */
static void signals_block(sigset_t* old) {
  sigset_t all;
  sigfillset(&all);
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGBUS);
  sigdelset(&all, SIGILL);
  sigdelset(&all, SIGFPE);
  sigdelset(&all, SIGTRAP);
  sigdelset(&all, SIGABRT);
  pthread_sigmask(SIG_BLOCK, &all, old);
}

static void protect(hak_slab_t* s) {
  size_t idx = hak_slab_index(s);
  __atomic_fetch_or(page_word(&hak_segment_of(s)->mesh.prot, idx), page_bit(idx), __ATOMIC_SEQ_CST);
  if (!_hak_os_protect(hak_slab_start(s), MESH_SLAB, PROT_READ))
    _hak_fatal("hakmem: mesh: mprotect of %p failed\n", (void*)hak_slab_start(s));
}
static void unprotect_bit(hak_slab_t* s) {
  size_t idx = hak_slab_index(s);
  __atomic_fetch_and(page_word(&hak_segment_of(s)->mesh.prot, idx), ~page_bit(idx), __ATOMIC_RELEASE);
}

/* ---------------------------------------------------------------- registry (reg_lock) */
/* The program may close our descriptor (a daemon closing every fd after
 * fork) and its number may then name another file: mapping or punching that
 * would corrupt it.  So the file is checked before a pass, a punch outside
 * one and a fork; if it is gone, meshing stops (meshed pages keep their
 * mappings, which hold the file). */
static hak_file_id_t mesh_id;
static void fd_remember(int fd) { _hak_os_file_id(fd, false, &mesh_id); }
static bool mesh_fd_ok(void) {
  hak_file_id_t id;
  if (mesh_fd < 0) return false;
  if (_hak_os_file_id(mesh_fd, false, &id) && hak_file_id_eq(id, mesh_id)) return true;
  mesh_fd = -1;
  mesh_off = true;
  return false;
}

static bool mesh_ready(void) {
  if (mesh_fd >= 0) return mesh_fd_ok();
  if (mesh_off) return false;
  if (slots == NULL) {
    slots = _hak_os_map(MESH_MAX * sizeof *slots, NULL);
    if (slots == NULL) return false;
  }
  mesh_fd = _hak_os_memfd();
  if (mesh_fd < 0) mesh_off = true;   /* no memfd (old kernel, seccomp, fd limit): no compaction */
  fd_remember(mesh_fd);
  /* each meshed page is a mapping of its own (and splits its segment's):
   * running out of mappings in the middle of a remap cannot be undone, so
   * meshing stays well below the kernel's limit */
  mesh_max = MESH_MAX;
  char buf[32];
  if (_hak_os_read_small("/proc/sys/vm/max_map_count", buf, sizeof buf)) {
    size_t lim = 0;
    for (size_t i = 0; buf[i] >= '0' && buf[i] <= '9'; i++) lim = lim * 10 + (size_t)(buf[i] - '0');
    if (lim != 0 && lim / 4 < mesh_max) mesh_max = lim / 4;
  }
  return mesh_fd >= 0;
}

static hak_mesh_t* entry_new(hak_slab_t* s) {
  hak_lock(&reg_lock);
  hak_mesh_t* e = entry_free;
  if (e != NULL) {
    entry_free = e->next;
  } else {
    size_t sz = hak_align_up(sizeof *e, 64);
    if (entry_left < sz) {
      entry_chunk = _hak_os_map((size_t)1 << 20, NULL);
      entry_left = entry_chunk ? (size_t)1 << 20 : 0;
    }
    if (entry_left >= sz) {
      e = (hak_mesh_t*)entry_chunk;
      entry_chunk += sz;
      entry_left -= sz;
    }
  }
  if (e != NULL) {
    memset(e, 0, sizeof *e);
    e->slab = s;
    e->next = reg_head;
    if (reg_head) reg_head->prev = e;
    reg_head = e;
    atomic_fetch_add_explicit(&_hak_mesh_entries, 1, memory_order_relaxed);
  }
  hak_unlock(&reg_lock);
  return e;
}

static void entry_drop(hak_mesh_t* e) {
  hak_lock(&reg_lock);
  if (e->prev) e->prev->next = e->next;
  else reg_head = e->next;
  if (e->next) e->next->prev = e->prev;
  if (e->root == NULL && !mesh_off) slots[slot_nfree++] = e->off;
  e->next = entry_free;
  entry_free = e;
  atomic_fetch_sub_explicit(&_hak_mesh_entries, 1, memory_order_relaxed);
  hak_unlock(&reg_lock);
}

static uint64_t slot_new(void) {
  hak_lock(&reg_lock);
  uint64_t off = slot_nfree ? slots[--slot_nfree] : (slot_end += MESH_SLAB) - MESH_SLAB;
  hak_unlock(&reg_lock);
  return off;
}

static void seg_mark(hak_slab_t* s, hak_mesh_t* e) {
  hak_segment_t* seg = hak_segment_of(s);
  size_t idx = hak_slab_index(s);
  seg->mesh_page[hak_slot_of(idx)] = e;
  /* atomic: other heaps' slabs share the segment (pool.c) and its word */
  if (e) hak_pset_add_atomic(&seg->mesh.pages, idx);
  else hak_pset_del_atomic(&seg->mesh.pages, idx);
}

/* ---------------------------------------------------------------- blocks */
hak_inline void push_free(hak_slab_t* s, hak_block_t* b) {
  hak_block_set_next(b, s->free);
  b->cookie = hak_cookie();
  s->free = b;
}

/* The live blocks of an owned slab: carved, not on its free list, not
 * phantom.  Remote frees not yet collected count as live (they are counted
 * in `used` too).  Returns how many. */
static uint32_t live_map(hak_slab_t* s, uint64_t* map) {
  uint32_t nb = mslab_blocks(s), nc = mslab_carved(s);
  size_t words = (nb + 63) / 64;
  memset(map, 0, words * 8);
  for (uint32_t i = 0; i < nc; i++) bit_set(map, i);
  uint8_t* start = hak_slab_start(s);
  for (hak_block_t* b = s->free; b != NULL; b = hak_block_next(b)) bit_clear(map, (uint32_t)(((uint8_t*)b - start) / s->bsize));
  hak_mesh_t* e = mslab_entry(s);
  if (e != NULL && e->root == NULL)
    for (size_t w = 0; w < words; w++) map[w] &= ~e->map[w];
  return bits_count(map, words);
}

/* The copies read blocks other threads wrote; the write barrier (mprotect
 * and the fault handler) orders them, which ThreadSanitizer cannot see. */
#ifdef HAK_TSAN
void AnnotateIgnoreReadsBegin(const char* f, int l);
void AnnotateIgnoreReadsEnd(const char* f, int l);
void AnnotateIgnoreWritesBegin(const char* f, int l);
void AnnotateIgnoreWritesEnd(const char* f, int l);
#define tsan_ignore_begin() (AnnotateIgnoreReadsBegin(__FILE__, __LINE__), AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define tsan_ignore_end() (AnnotateIgnoreWritesEnd(__FILE__, __LINE__), AnnotateIgnoreReadsEnd(__FILE__, __LINE__))
#else
#define tsan_ignore_begin() ((void)0)
#define tsan_ignore_end() ((void)0)
#endif

static void copy_blocks(uint8_t* dst, const uint8_t* src, const uint64_t* map, uint32_t nb, uint32_t bsize) {
  tsan_ignore_begin();
  for (uint32_t i = 0; i < nb; i++)
    if (bit_get(map, i)) memcpy(dst + (size_t)i * bsize, src + (size_t)i * bsize, bsize);
  tsan_ignore_end();
}

/* Replace a meshed page's mapping (atomically: a thread touching it sees the
 * old page or the new one).  A failure leaves the page in an unknown state:
 * nothing to do but stop. */
static void remap_file(uint8_t* page, int fd, uint64_t off) {
  tsan_ignore_begin();   /* TSan counts the new mapping as a write by this thread */
  bool ok = _hak_os_map_file_at(page, MESH_SLAB, fd, off);
  tsan_ignore_end();
  if (!ok) _hak_fatal("hakmem: mesh: mapping the mesh file at %p failed\n", (void*)page);
}
static void remap_anon(uint8_t* page) {
  tsan_ignore_begin();
  bool ok = _hak_os_map_anon_at(page, MESH_SLAB);
  tsan_ignore_end();
  if (!ok) _hak_fatal("hakmem: mesh: remapping %p failed\n", (void*)page);
}
static void remap_move(uint8_t* from, uint8_t* page) {
  tsan_ignore_begin();
  bool ok = _hak_os_remap(from, MESH_SLAB, MESH_SLAB, MREMAP_MAYMOVE | MREMAP_FIXED, page) != NULL;
  tsan_ignore_end();
  if (!ok) _hak_fatal("hakmem: mesh: remapping %p failed\n", (void*)page);
}

/* Bytes of a slab's page that were touched (carved): what meshing it away frees. */
static uint64_t touched_bytes(const hak_slab_t* s) {
  return hak_align_up(hak_slab_bump(s, s->carved), HAK_OS_PAGE);
}

/* ---------------------------------------------------------------- meshing */

/* A becomes a root: its live blocks move to a page of the mesh file, which
 * then replaces its private page. */
static hak_mesh_t* promote(hak_slab_t* a, const uint64_t* own) {
  hak_mesh_t* e = entry_new(a);
  if (e == NULL) return NULL;
  e->off = slot_new();
  uint8_t* scratch = _hak_os_map_file(MESH_SLAB, mesh_fd, e->off);
  if (scratch == NULL) {
    entry_drop(e);
    return NULL;
  }
  uint8_t* page = hak_slab_start(a);
  protect(a);
  copy_blocks(scratch, page, own, mslab_blocks(a), a->bsize);
  remap_file(page, mesh_fd, e->off);
  unprotect_bit(a);
  _hak_os_unmap(scratch, MESH_SLAB);
  seg_mark(a, e);
  atomic_fetch_add_explicit(&st_roots, 1, memory_order_relaxed);
  return e;
}

/* B's live blocks (map) go to the same offsets of root A's page, and B's
 * virtual page is mapped onto it.  B is on no list. */
static bool absorb(hak_heap_t* h, hak_mesh_t* ea, hak_slab_t* b, const uint64_t* map) {
  hak_slab_t* a = ea->slab;
  hak_mesh_t* eb = mslab_entry(b);   /* a root without aliases, or NULL */
  if (eb == NULL && (eb = entry_new(b)) == NULL) return false;
  uint8_t* page = hak_slab_start(b);
  uint64_t freed = touched_bytes(b);
  protect(b);
  copy_blocks(hak_slab_start(a), page, map, mslab_blocks(b), b->bsize);
  remap_file(page, mesh_fd, ea->off);
  unprotect_bit(b);
  if (eb->root == NULL && hak_segment_of(b)->mesh_page[hak_slot_of(hak_slab_index(b))] == eb) {   /* B was a root: its file page goes */
    _hak_os_punch(mesh_fd, eb->off, MESH_SLAB);
    hak_lock(&reg_lock);
    slots[slot_nfree++] = eb->off;
    hak_unlock(&reg_lock);
    hak_used_add(b, -(int32_t)eb->nphantom);   /* phantoms are only free space */
  }
  eb->root = ea;
  eb->nphantom = 0;
  memcpy(eb->map, map, sizeof eb->map);
  ea->naliases++;
  seg_mark(b, eb);
  a->used += b->used;
  if (b->carved > a->carved) __atomic_store_n(&a->carved, b->carved, __ATOMIC_RELAXED);   /* remote frees read it */
  b->free = NULL;
  b->next = a;
  b->prev = NULL;
  atomic_store_explicit(&b->xowner, (uintptr_t)h | HAK_OWNER_MESHED, memory_order_seq_cst);
  atomic_fetch_add_explicit(&st_meshes, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&st_bytes, freed, memory_order_relaxed);
  return true;
}

/* A root's free list after meshing: every carved block that is not live,
 * but only those whose first bytes lie in a 4 KiB page that holds live data
 * -- linking the others would fault their pages in again.  Those are
 * "phantoms": counted in `used` so the slab does not look empty, never
 * handed out; the file pages holding no live byte are punched out. */
static void rebuild(hak_mesh_t* ea, const uint64_t* live) {
  hak_slab_t* a = ea->slab;
  uint32_t nb = mslab_blocks(a), nc = mslab_carved(a), bs = a->bsize;
  uint32_t resident = 0;   /* 4 KiB pages of the 64 KiB page that hold a live byte */
  for (uint32_t i = 0; i < nb; i++)
    if (bit_get(live, i)) {
      size_t lo = (size_t)i * bs, hi = lo + bs - 1;
      for (size_t p = lo / HAK_OS_PAGE; p <= hi / HAK_OS_PAGE; p++) resident |= 1u << p;
    }
  uint8_t* page = hak_slab_start(a);
  memset(ea->map, 0, sizeof ea->map);
  ea->nphantom = 0;
  a->free = NULL;
  for (uint32_t i = nc; i-- > 0;) {
    if (bit_get(live, i)) continue;
    size_t off = (size_t)i * bs;
    if (resident & (1u << (off / HAK_OS_PAGE))) {
      push_free(a, (hak_block_t*)(page + off));
    } else {
      bit_set(ea->map, i);
      ea->nphantom++;
    }
  }
  __atomic_store_n(&a->used, bits_count(live, (nb + 63) / 64) + ea->nphantom, __ATOMIC_RELAXED);   /* (the figures walk reads it) */
  for (uint32_t p = 0; p < MESH_SLAB / HAK_OS_PAGE;) {   /* punch runs of pages without live data */
    if (resident & (1u << p)) {
      p++;
      continue;
    }
    uint32_t q = p;
    while (q < MESH_SLAB / HAK_OS_PAGE && !(resident & (1u << q))) q++;
    if (_hak_os_punch(mesh_fd, ea->off + (uint64_t)p * HAK_OS_PAGE, (size_t)(q - p) * HAK_OS_PAGE))
      atomic_fetch_add_explicit(&st_punched, (uint64_t)(q - p) * HAK_OS_PAGE, memory_order_relaxed);
    p = q;
  }
}

/* ---------------------------------------------------------------- frees into meshed-away slabs */

/* The owner takes the remote frees of alias B into its root's accounting
 * (the blocks are the root's, at the same offsets).  True when B holds no
 * block any more: its page is private again and the caller releases it. */
bool _hak_mesh_collect_alias(hak_heap_t* h, hak_slab_t* b) {
  hak_mesh_t* eb = mslab_entry(b);
  uintptr_t v = hak_load_relaxed(&b->xthread_free);
  if (v & HAK_XF_NOTIFYING) {   /* its notifier is not done: look again later (remote.c, _hak_slab_rearm) */
    size_t idx = hak_slab_index(b);
    atomic_fetch_or_explicit(&hak_segment_of(b)->xremote[idx >> 6], page_bit(idx), memory_order_relaxed);
    hak_store_relaxed(&h->xremote_hint, 1);
    return false;
  }
  hak_mesh_t* ea = eb->root;
  hak_slab_t* a = ea->slab;
  uint32_t n = 0;
  if (v != 0) {
    hak_block_t* list = hak_xf_list(atomic_exchange_explicit(&b->xthread_free, 0, memory_order_acquire));
    uint8_t *bs = hak_slab_start(b), *as = hak_slab_start(a);
    bool was_full = (hak_load_relaxed(&a->xowner) & HAK_OWNER_FULL) != 0;
    for (hak_block_t *x = list, *next; x != NULL; x = next) {
      next = hak_block_next(x);
      size_t off = (size_t)((uint8_t*)x - bs);
      bit_clear(eb->map, (uint32_t)(off / b->bsize));
      push_free(a, (hak_block_t*)(as + off));
      if (hak_unlikely(++n > b->used))
        _hak_fatal("hakmem: heap corruption: remote free list of meshed slab %p is longer than its live blocks\n", (void*)b);
    }
    b->used -= n;
    a->used -= n;
    if (was_full) {   /* the root has room now */
      _hak_slab_detach(h, a);
      _hak_slab_attach(h, a);
    }
  }
  if (b->used != 0) return false;
  /* dissolve: B's virtual page gets fresh private memory, B's entry goes */
  remap_anon(hak_slab_start(b));
  seg_mark(b, NULL);
  ea->naliases--;
  entry_drop(eb);
  b->next = b->prev = NULL;
  b->free = NULL;
  hak_store_relaxed(&b->xowner, (uintptr_t)h);
  atomic_fetch_add_explicit(&st_dissolved, 1, memory_order_relaxed);
  return true;
}

/* A root's slab was released (slab.c _hak_slab_clear: by its owner, or
 * under the segment lock when abandoned): private memory again, file page
 * punched.  Roots have no aliases then (their blocks count in the root). */
void _hak_mesh_page_freed(hak_segment_t* seg, size_t idx) {
  hak_mesh_t* e = seg->mesh_page[hak_slot_of(idx)];
  uint8_t* page = (uint8_t*)seg + (idx << HAK_PAGE_SHIFT);
  remap_anon(page);
  if (e->root != NULL) e->root->naliases--;
  else if (!mesh_off && mesh_fd_ok()) _hak_os_punch(mesh_fd, e->off, MESH_SLAB);
  seg->mesh_page[hak_slot_of(idx)] = NULL;
  hak_pset_del_atomic(&seg->mesh.pages, idx);
  entry_drop(e);
}

/* ---------------------------------------------------------------- a pass */
typedef struct {
  hak_slab_t** slab;
  uint32_t* cnt;      /* live blocks (the plan's, once merged) */
  uint32_t* order;
  int32_t* first;     /* root: first slab planned onto it; -1 */
  int32_t* nextb;     /* slab planned onto a root: the next one */
  uint8_t* role;      /* 0 free, 1 root of the plan, 2 meshed onto a root */
  uint64_t* maps;     /* n * words */
  size_t n, cap, words;
} plan_t;

static void plan_add(hak_slab_t* s, void* arg) {
  plan_t* p = arg;
  if (p->n < p->cap) p->slab[p->n++] = s;
}

static bool disjoint(const uint64_t* x, const uint64_t* y, size_t words) {
  for (size_t w = 0; w < words; w++)
    if (x[w] & y[w]) return false;
  return true;
}

/* The plan's slabs: the heap's of class cls (nb blocks a slab), their
 * remote frees collected (a full one that got blocks back goes to its class
 * list, an emptied one is released), each with its map of live blocks.
 * Returns how many are sparse (at most half live); 0 when fewer than two. */
static size_t plan_gather(hak_heap_t* h, size_t cls, plan_t* p, uint32_t nb) {
  p->n = 0;
  _hak_heap_foreach_slab(h, cls, plan_add, p);
  if (p->n < 2) return 0;
  p->words = (nb + 63) / 64;
  size_t sparse = 0;
  for (size_t i = 0; i < p->n; i++) {
    hak_slab_t* s = p->slab[i];
    if (hak_load_relaxed(&s->xowner) & HAK_OWNER_FULL) {
      if (_hak_slab_collect(s)) {   /* full, got blocks back: to its class list */
        _hak_slab_detach(h, s);
        _hak_slab_attach(h, s);
      }
    } else {
      _hak_slab_collect(s);
    }
    p->cnt[i] = live_map(s, p->maps + i * p->words);
    if (s->used == 0) {   /* emptied by the remote frees just collected: give it back */
      _hak_slab_detach(h, s);
      _hak_slab_release(h, s);
      p->slab[i--] = p->slab[--p->n];
      continue;
    }
    p->order[i] = (uint32_t)i;
    p->first[i] = p->nextb[i] = -1;
    p->role[i] = 0;
    if (2 * p->cnt[i] <= nb) sparse++;
  }
  return sparse;
}

/* The plan's order: sparsest first (shell sort: no libc allocation). */
static void plan_sort(plan_t* p) {
  for (size_t gap = p->n / 2; gap > 0; gap /= 2)
    for (size_t i = gap; i < p->n; i++)
      for (size_t j = i; j >= gap && p->cnt[p->order[j - gap]] > p->cnt[p->order[j]]; j -= gap) {
        uint32_t t = p->order[j];
        p->order[j] = p->order[j - gap];
        p->order[j - gap] = t;
      }
}

/* The plan: each sparse slab onto the densest root it fits (disjoint live
 * blocks), trying at most MESH_PROBES roots from the dense end, while the
 * mesh table has room for the entries it needs. */
static void plan_pairs(plan_t* p, uint32_t nb) {
  size_t used = hak_load_relaxed(&_hak_mesh_entries);
  size_t room = used < mesh_max ? mesh_max - used : 0;
  for (size_t k = 0; k < p->n && room > 2; k++) {
    uint32_t i = p->order[k];
    if (p->role[i] != 0) continue;
    if (2 * p->cnt[i] > nb) break;
    hak_mesh_t* e = mslab_entry(p->slab[i]);
    if (e != NULL && e->naliases != 0) continue;   /* a root with aliases stays a root */
    uint64_t* mi = p->maps + (size_t)i * p->words;
    int probes = 0;
    for (size_t m = p->n; m-- > k + 1 && probes < MESH_PROBES;) {
      uint32_t j = p->order[m];
      if (p->role[j] == 2) continue;
      probes++;
      uint64_t* mj = p->maps + (size_t)j * p->words;
      if (!disjoint(mi, mj, p->words)) continue;
      for (size_t w = 0; w < p->words; w++) mj[w] |= mi[w];
      p->cnt[j] += p->cnt[i];
      if (p->role[j] == 0) room -= mslab_entry(p->slab[j]) ? 0 : 1;
      p->role[j] = 1;
      p->role[i] = 2;
      room--;
      p->nextb[i] = p->first[j];
      p->first[j] = (int32_t)i;
      break;
    }
  }
}

/* Carry the plan out, root by root: the root promoted to a mesh entry if
 * it is not one yet, each slab planned onto it absorbed (or put back on its
 * list when it cannot be), the root's free list rebuilt from what it now
 * holds. */
static void plan_carry_out(hak_heap_t* h, plan_t* p) {
  for (size_t j = 0; j < p->n; j++) {
    if (p->role[j] != 1) continue;
    hak_slab_t* a = p->slab[j];
    uint64_t live[MESH_WORDS];
    live_map(a, live);   /* its own blocks (the plan's map holds the merged ones) */
    _hak_slab_detach(h, a);
    hak_mesh_t* ea = mslab_entry(a);
    if (ea == NULL) ea = promote(a, live);
    if (ea != NULL) {
      for (int32_t i = p->first[j]; i >= 0; i = p->nextb[i]) {
        hak_slab_t* b = p->slab[i];
        uint64_t* mb = p->maps + (size_t)i * p->words;
        _hak_slab_detach(h, b);
        if (absorb(h, ea, b, mb)) {
          for (size_t w = 0; w < p->words; w++) live[w] |= mb[w];
        } else {
          _hak_slab_attach(h, b);
        }
      }
      rebuild(ea, live);
    }
    _hak_slab_attach(h, a);
  }
}

/* Mesh the heap's slabs of one class: gather them, plan sparse ones onto
 * denser roots, carry the plan out. */
static void mesh_class(hak_heap_t* h, size_t cls, plan_t* p) {
  uint32_t nb = (uint32_t)(MESH_SLAB / _hak_class_size[cls]);
  if (plan_gather(h, cls, p, nb) == 0) return;
  plan_sort(p);
  plan_pairs(p, nb);
  plan_carry_out(h, p);
}

/* The heap's meshed pages: frees into aliases go to their roots (dissolving
 * the aliases that emptied), and roots left with phantoms only are released. */
static void sweep(hak_heap_t* h, hak_slab_t** buf, size_t cap) {
  size_t n = 0;
  hak_lock(&reg_lock);
  for (hak_mesh_t* e = reg_head; e != NULL && n < cap; e = e->next)
    if ((hak_load_relaxed(&e->slab->xowner) & ~HAK_OWNER_FLAGS) == (uintptr_t)h) buf[n++] = e->slab;
  hak_unlock(&reg_lock);
  for (size_t i = 0; i < n; i++) {   /* aliases first: their blocks count in their roots */
    hak_slab_t* s = buf[i];
    if ((hak_load_relaxed(&s->xowner) & HAK_OWNER_MESHED) && _hak_mesh_collect_alias(h, s)) {
      _hak_slab_release(h, s);   /* its segment may be gone now */
      buf[i] = NULL;
    }
  }
  for (size_t i = 0; i < n; i++) {
    hak_slab_t* s = buf[i];
    if (s == NULL) continue;
    hak_mesh_t* e = mslab_entry(s);
    if (e == NULL || e->slab != s || e->root != NULL || e->naliases != 0) continue;
    _hak_slab_collect(s);
    if (s->used != e->nphantom || h->cls[s->cls].cur == s) continue;
    _hak_slab_detach(h, s);
    _hak_slab_release(h, s);
  }
}

/* Automatic passes (before a heap maps a new small segment) are paced by
 * time and by growth (release.c, _hak_pace_due). */
void _hak_mesh_pass(hak_heap_t* h, bool forced) {
  static hak_pace_t pace;
  if (HAK_SECURE || !hak_opt(MESH) || h == &_hak_heap_empty) return;
  if (!forced && !_hak_pace_due(&pace)) return;
  /* an automatic pass (a malloc slow path) does not wait for one under way;
   * a forced one (hak_collect, malloc_trim: the program asked) does.  It
   * returned too: with other threads' automatic passes running, all ten
   * hak_collect calls of test-mesh's debug run could find the lock taken
   * and mesh nothing (1 run in 30) */
  if (forced ? hak_lock(&mesh_lock) != 0 : hak_trylock(&mesh_lock) != 0) return;
  if (!mesh_ready()) {
    hak_unlock(&mesh_lock);
    return;
  }
  atomic_fetch_add_explicit(&st_passes, 1, memory_order_relaxed);
  handler_install();
  sigset_t old;
  signals_block(&old);
  plan_t p;
  memset(&p, 0, sizeof p);
  p.cap = hak_load_relaxed(&_hak_stat_slab_pages) + hak_load_relaxed(&_hak_mesh_entries) + 16;
  size_t per = sizeof(hak_slab_t*) + 3 * sizeof(uint32_t) + 2 * sizeof(int32_t) + 1;
  size_t bytes = hak_align_up(p.cap * per, 64) + p.cap * MESH_WORDS * 8;
  uint8_t* mem = _hak_os_map(bytes, NULL);
  if (mem != NULL) {
    p.slab = (hak_slab_t**)mem;
    p.cnt = (uint32_t*)(p.slab + p.cap);
    p.order = p.cnt + p.cap;
    p.first = (int32_t*)(p.order + p.cap);
    p.nextb = p.first + p.cap;
    p.role = (uint8_t*)(p.nextb + p.cap);
    p.maps = (uint64_t*)(mem + hak_align_up(p.cap * per, 64));
    uint64_t before = hak_load_relaxed(&st_meshes);
    sweep(h, p.slab, p.cap);
    for (size_t cls = 0; cls < HAK_NCLASSES; cls++)
      if (_hak_class_pages[cls] == MESH_PAGES) mesh_class(h, cls, &p);
    _hak_os_unmap(mem, bytes);
    _hak_pace_found(&pace, hak_load_relaxed(&st_meshes) != before);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  hak_unlock(&mesh_lock);
}

/* ---------------------------------------------------------------- thread exit
 * Nobody owns an exited thread's slabs, and its segments may be adopted by
 * different heaps: an alias and its root must not end up with two owners.
 * So an exiting heap unmeshes: each alias gets a private page again (its
 * live blocks copied back), and roots turn their phantoms into free blocks,
 * so that their `used` is an ordinary count again. */
static void unmesh(hak_heap_t* h, hak_slab_t* b) {
  hak_mesh_t* eb = mslab_entry(b);
  hak_mesh_t* ea = eb->root;
  hak_slab_t* a = ea->slab;
  uint8_t* tmp = _hak_os_map(MESH_SLAB, NULL);
  if (tmp == NULL) _hak_fatal("hakmem: mesh: out of memory unmeshing %p at thread exit\n", (void*)hak_slab_start(b));
  uint8_t *page = hak_slab_start(b), *as = hak_slab_start(a);
  uint32_t nb = mslab_blocks(b), bs = b->bsize;
  protect(b);
  copy_blocks(tmp, page, eb->map, nb, bs);
  remap_move(tmp, page);
  unprotect_bit(b);
  seg_mark(b, NULL);
  bool was_full = (hak_load_relaxed(&a->xowner) & HAK_OWNER_FULL) != 0;
  uint32_t n = 0;
  b->free = NULL;
  for (uint32_t i = mslab_carved(b); i-- > 0;) {
    if (bit_get(eb->map, i)) {   /* B's block: free in the root now */
      push_free(a, (hak_block_t*)(as + (size_t)i * bs));
      n++;
    } else {
      push_free(b, (hak_block_t*)(page + (size_t)i * bs));
    }
  }
  a->used -= n;
  ea->naliases--;
  entry_drop(eb);
  if (was_full) {
    _hak_slab_detach(h, a);
    _hak_slab_attach(h, a);
  }
  _hak_slab_attach(h, b);
  atomic_fetch_add_explicit(&st_unmeshed, 1, memory_order_relaxed);
}

void _hak_mesh_heap_exit(hak_heap_t* h) {
  if (hak_load_relaxed(&_hak_mesh_entries) == 0) return;
  hak_lock(&mesh_lock);
  handler_install();
  sigset_t old;
  signals_block(&old);
  for (;;) {   /* one entry at a time: releasing a page drops entries */
    hak_slab_t* s = NULL;
    bool alias = false;
    hak_lock(&reg_lock);
    for (hak_mesh_t* e = reg_head; e != NULL; e = e->next) {
      uintptr_t xo = hak_load_relaxed(&e->slab->xowner);
      if ((xo & ~HAK_OWNER_FLAGS) != (uintptr_t)h) continue;
      if ((xo & HAK_OWNER_MESHED) || e->nphantom != 0) {
        s = e->slab;
        alias = (xo & HAK_OWNER_MESHED) != 0;
        break;
      }
    }
    hak_unlock(&reg_lock);
    if (s == NULL) break;
    if (alias) {
      if (_hak_mesh_collect_alias(h, s)) _hak_slab_release(h, s);
      else if (mslab_entry(s) != NULL && (hak_load_relaxed(&s->xowner) & HAK_OWNER_MESHED)) unmesh(h, s);
      continue;
    }
    hak_mesh_t* e = mslab_entry(s);   /* a root with phantoms: they become free blocks */
    bool was_full = (hak_load_relaxed(&s->xowner) & HAK_OWNER_FULL) != 0;
    uint8_t* page = hak_slab_start(s);
    for (uint32_t i = mslab_carved(s); i-- > 0;)
      if (bit_get(e->map, i)) push_free(s, (hak_block_t*)(page + (size_t)i * s->bsize));
    hak_used_add(s, -(int32_t)e->nphantom);
    e->nphantom = 0;
    memset(e->map, 0, sizeof e->map);
    if (was_full) {
      _hak_slab_detach(h, s);
      _hak_slab_attach(h, s);
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  hak_unlock(&mesh_lock);
}

/* ---------------------------------------------------------------- fork
 * Meshed pages are MAP_SHARED: without care the child would share them with
 * the parent.  Before fork every meshed page is write-protected (the
 * barrier: writers wait, so the copy is the memory at the fork), and the
 * roots' file pages are copied into a second memfd, at the same offsets.
 * The child maps every meshed page from that file: its own memory, same
 * layout, and it keeps meshing in its own file.  The parent closes it and
 * lifts the barrier.  Cost: nothing when no page is meshed; else two
 * mprotect per meshed page and a copy of the roots' resident pages.  If no
 * second memfd can be made, the roots are copied into private memory that
 * the child moves into place (aliases get private copies): correct, but the
 * child's meshed pages are no longer shared and it meshes no more. */
static int fork_fd2 = -1;
static sigset_t fork_sigold;
static bool fork_masked;
static bool fork_barred;           /* the meshed pages are write-protected for this fork */

void _hak_mesh_fork_prepare(void) { hak_lock(&mesh_lock); }

void _hak_mesh_fork_barrier(void) {
  hak_lock(&reg_lock);
  if (reg_head == NULL) return;
  signals_block(&fork_sigold);
  fork_masked = true;
  handler_install();
  /* A process that never had a second thread has no other writer, and
   * glibc's child then writes nothing of ours before our child handler
   * runs: the copy needs no barrier (protecting and unprotecting each
   * meshed page costs about 0.4 ms per page on this VM: 596 pages made a
   * 45 ms fork take 292 ms).  Once a thread existed, glibc says so for good. */
  fork_barred = !__libc_single_threaded;
  if (fork_barred)
    for (hak_mesh_t* e = reg_head; e != NULL; e = e->next) protect(e->slab);
  fork_fd2 = !mesh_off && mesh_fd_ok() ? _hak_os_memfd() : -1;
  tsan_ignore_begin();
  for (hak_mesh_t* e = reg_head; e != NULL; e = e->next) {
    if (e->root != NULL) continue;
    const uint8_t* page = hak_slab_start(e->slab);
    if (fork_fd2 < 0) {   /* fallback: a private copy the child moves into place */
      e->fork_copy = _hak_os_map(MESH_SLAB, NULL);
      if (e->fork_copy == NULL) _hak_fatal("hakmem: mesh: out of memory copying meshed pages for fork\n");
      memcpy(e->fork_copy, page, MESH_SLAB);
      continue;
    }
    /* only the file's data runs: holes stay holes */
    if (!_hak_os_copy_data(fork_fd2, mesh_fd, page, e->off, MESH_SLAB))
      _hak_fatal("hakmem: mesh: copying meshed pages for fork failed\n");
  }
  tsan_ignore_end();
  atomic_fetch_add_explicit(&st_forks, 1, memory_order_relaxed);
  hak_store_relaxed(&fork_pid, getpid());
}

/* The child: every meshed page from its own file (or its private copy).
 * Async-signal-safe (system calls only): the barrier's fault handler may run
 * it before the atfork handler does. */
static void fork_privatize(void) {
  if (hak_load_relaxed(&fork_pid) == 0) return;
  for (int pass = 0; pass < 2; pass++)   /* roots, then aliases (the fallback copies from their roots) */
    for (hak_mesh_t* e = reg_head; e != NULL; e = e->next) {
      if ((pass == 0) != (e->root == NULL)) continue;
      uint8_t* page = hak_slab_start(e->slab);
      if (fork_fd2 >= 0) {
        remap_file(page, fork_fd2, e->root ? e->root->off : e->off);
      } else if (e->root == NULL) {
        remap_move(e->fork_copy, page);
        e->fork_copy = NULL;
      } else {
        uint8_t* tmp = _hak_os_map(MESH_SLAB, NULL);
        if (tmp == NULL) _hak_fatal("hakmem: mesh: fork child: out of memory\n");
        memcpy(tmp, hak_slab_start(e->root->slab), MESH_SLAB);
        remap_move(tmp, page);
      }
      unprotect_bit(e->slab);
    }
  if (mesh_fd >= 0) _hak_os_close(mesh_fd);
  mesh_fd = fork_fd2;
  fd_remember(mesh_fd);
  if (fork_fd2 < 0) mesh_off = true;
  fork_fd2 = -1;
  hak_store_relaxed(&fork_pid, 0);
}

void _hak_mesh_fork_parent(void) {
  if (hak_load_relaxed(&fork_pid) != 0) {
    for (hak_mesh_t* e = reg_head; e != NULL; e = e->next) {
      if (fork_barred && !_hak_os_protect(hak_slab_start(e->slab), MESH_SLAB, PROT_READ | PROT_WRITE))
        _hak_fatal("hakmem: mesh: mprotect of %p failed\n", (void*)hak_slab_start(e->slab));
      unprotect_bit(e->slab);
      if (e->fork_copy != NULL) {
        _hak_os_unmap(e->fork_copy, MESH_SLAB);
        e->fork_copy = NULL;
      }
    }
    if (fork_fd2 >= 0) _hak_os_close(fork_fd2);
    fork_fd2 = -1;
    hak_store_relaxed(&fork_pid, 0);
  }
  if (fork_masked) {
    fork_masked = false;
    pthread_sigmask(SIG_SETMASK, &fork_sigold, NULL);
  }
  hak_unlock(&reg_lock);
  hak_unlock(&mesh_lock);
}

void _hak_mesh_fork_child(void) {
  fork_privatize();   /* unless the fault handler did already */
  if (fork_masked) {
    fork_masked = false;
    pthread_sigmask(SIG_SETMASK, &fork_sigold, NULL);
  }
  pthread_mutex_init(&reg_lock, NULL);
  pthread_mutex_init(&mesh_lock, NULL);
}

void _hak_mesh_stats(uint64_t* v) {
  v[0] = hak_load_relaxed(&st_passes);
  v[1] = hak_load_relaxed(&st_meshes);
  v[2] = hak_load_relaxed(&st_roots);
  v[3] = hak_load_relaxed(&st_dissolved);
  v[4] = hak_load_relaxed(&st_unmeshed);
  v[5] = hak_load_relaxed(&st_bytes) + hak_load_relaxed(&st_punched);
  v[6] = hak_load_relaxed(&st_waits);
  v[7] = hak_load_relaxed(&st_forks);
  v[8] = hak_load_relaxed(&_hak_mesh_entries);
}
