/* Quarantine (secure build): a freed small block is not reusable at once.
 * Each thread holds its freed blocks in a FIFO ring, up to a byte budget
 * (HAKMEM_SECURE_QUARANTINE) and QUAR_CAP blocks, filled; only the block
 * that leaves the ring is really freed.  So free(p); malloc(same size) never
 * returns p, a stale pointer's target stays fill for a while (a read after
 * free sees fill, a write after free is found when the block leaves, by the
 * fill check), and which block leaves is drawn among the oldest few, so the
 * order of reuse cannot be steered exactly.  Per thread: no lock, and a
 * block leaves through the ordinary free path (to its owner's list, or as a
 * remote free).  Large blocks have their own quarantine (large.c). */
#include "internal.h"
#include "alloc.h"   /* (hak_free_block: a block leaving the quarantine is freed the ordinary way) */
#include <sys/mman.h>

#if HAK_SECURE
#define QUAR_CAP   4096   /* blocks per thread: the ring is 64 KiB */
#define QUAR_DRAW  8      /* the block that leaves is one of the oldest QUAR_DRAW ... */
#define QUAR_FIXED 16     /* ... once the ring holds more than this (so the newest never leaves next) */

typedef struct {
  void* p;
  uint32_t len;     /* bytes filled (request + canary), checked when it leaves */
  uint32_t bsize;   /* counted against the budget */
} quar_slot_t;
typedef struct {
  size_t head, n, bytes;
  size_t budget;      /* HAKMEM_SECURE_QUARANTINE */
  uint64_t draws;     /* random bits for the draws, 3 a draw ... */
  unsigned ndraws;    /* ... this many left */
  quar_slot_t slot[QUAR_CAP];
} quar_t;
static __thread quar_t* tls_quar;
__thread const uint64_t* _hak_secure_last __attribute__((tls_model("initial-exec"))) = &_hak_secure_fill64;

/* What hak_secure_malloc_bad (secure.h) found: the newest block of this
 * thread's quarantine written since its free.  noipa: malloc must see a
 * function that returns, so that it can tail-call it. */
__attribute__((noipa)) hak_cold void* _hak_secure_last_failed(void) {
  const uint64_t* b = _hak_secure_last;
  _hak_fatal("hakmem: write after free detected in block %p (near offset 0): written after its free, before the next "
             "malloc\n", (const void*)b);
}
#define QUAR_DEAD ((quar_t*)1)   /* the thread has exited: free at once */
/* rings of exited threads, for the next threads (no mmap/munmap per thread) */
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static quar_t* ring_pool;   /* linked through slot[0].p */

/* The thread's first quarantined block: a ring from the pool or a new one. */
static hak_cold quar_t* quar_new(void) {
  quar_t* q;
  hak_lock(&ring_lock);
  q = ring_pool;
  if (q != NULL) ring_pool = q->slot[0].p;
  hak_unlock(&ring_lock);
  if (q != NULL) q->slot[0].p = NULL;   /* empty: n == 0 */
  else q = _hak_os_map(sizeof(quar_t), NULL);   /* zero: empty */
  if (q != NULL) q->budget = (size_t)hak_opt(SECURE_QUARANTINE);
  tls_quar = q != NULL ? q : QUAR_DEAD;    /* no memory: no quarantine for this thread */
  return tls_quar;
}
hak_inline quar_t* quar_get(void) {
  quar_t* q = tls_quar;
  return hak_likely(q != NULL) ? q : quar_new();
}

/* Over its budget of bytes or blocks: a block must leave. */
hak_inline bool quar_over(const quar_t* q) { return q->n >= QUAR_CAP || q->bytes > q->budget; }

/* The oldest block (or one of the oldest few) leaves, its fill checked. */
static void* quar_take(quar_t* q) {
  _Static_assert(QUAR_DRAW == 8 && (QUAR_CAP & (QUAR_CAP - 1)) == 0, "3 random bits a draw; a power-of-2 ring");
  size_t j = q->head;
  if (q->n > QUAR_FIXED) {
    if (q->ndraws == 0) {
      q->draws = _hak_secure_rand();
      q->ndraws = 64 / 3;
    }
    j = (q->head + (q->draws & (QUAR_DRAW - 1))) & (QUAR_CAP - 1);
    q->draws >>= 3;
    q->ndraws--;
  }
  quar_slot_t e = q->slot[j];
  q->slot[j] = q->slot[q->head];   /* the oldest takes the leaver's place (j == head: itself) */
  q->head = (q->head + 1) & (QUAR_CAP - 1);
  q->n--;
  q->bytes -= e.bsize;
  hak_secure_leave(e.p, e.len, e.bsize);
  return e.p;
}

/* free(p), p a carved block start at offset off of small slab s (alloc.c
 * found it): the block is checked (live, canary, the block below), filled
 * and held back; returns the block to free now (one that leaves the
 * quarantine, or p when this thread has none), or NULL.  While the ring is
 * still over its bytes after one left (a big block came in, a small one
 * left), more leave and are freed here (the ordinary free): the caller
 * frees one block and makes no second call in the common case.  The newest
 * block stays: free(p); malloc(same size) never returns p. */
void* _hak_secure_quarantine(hak_slab_t* s, void* p, size_t off, const char* op) {
  size_t len = hak_secure_enter(s, p, off, op);
  quar_t* q = quar_get();
  if (hak_unlikely(q == QUAR_DEAD)) return p;
  q->slot[(q->head + q->n) & (QUAR_CAP - 1)] = (quar_slot_t){ p, (uint32_t)len, s->bsize };
  _hak_secure_last = p;   /* the newest: it stays until another comes */
  q->n++;
  q->bytes += s->bsize;
  if (hak_likely(!quar_over(q))) return NULL;
  void* b = quar_take(q);
  while (hak_unlikely(q->n > 1 && quar_over(q))) hak_free_block(quar_take(q), op);
  return b;
}

/* One block out of this thread's quarantine (NULL when empty); `dying`: the
 * thread exits, so its ring goes too, and later frees skip the quarantine. */
void* _hak_secure_quarantine_pop(bool dying) {
  quar_t* q = tls_quar;
  _hak_secure_last = &_hak_secure_fill64;   /* the ring empties: its newest may go */
  if (q == NULL || q == QUAR_DEAD) return NULL;
  if (q->n > 0) return quar_take(q);
  if (dying) {
    q->head = q->bytes = 0;
    hak_lock(&ring_lock);
    q->slot[0].p = ring_pool;
    ring_pool = q;
    hak_unlock(&ring_lock);
    tls_quar = QUAR_DEAD;
  }
  return NULL;
}

/* ---------------------------------------------------------------- large blocks
 * A freed large block is checked (its canary), filled (secure.c) and held
 * in a process-wide FIFO of LARGE_QUAR_N blocks and at most LARGE_QUAR_BYTES
 * of requests; the block that leaves has its fill checked and is unmapped.
 * A new large block may take the mapping of one of them, but never of the
 * LARGE_QUAR_NEW most recently freed: its fill is checked and the new block
 * placed to end at the mapping's guard page (secure.c,
 * _hak_secure_large_place), with no further pass (what lies outside a live
 * block is fill).  So malloc does not return
 * a block just freed, a read after free sees fill, a write after free is
 * reported when the mapping is taken or let go, and no earlier owner's
 * bytes are handed out.  No page changes protection on the way: an mprotect
 * to PROT_NONE of used pages flushes every CPU's TLB, and made mstress 3x
 * slower than the fill does (docs/BENCHMARKS.md, "Secure build").  A block
 * of more than LARGE_QUAR_BYTES is unmapped at once (a use after free
 * faults), not filled.  This is the secure build's BigCache, which it does
 * not use otherwise. */
#define LARGE_QUAR_N     16
#define LARGE_QUAR_NEW   1
#define LARGE_QUAR_BYTES ((size_t)64 << 20)
static pthread_mutex_t lq_lock = PTHREAD_MUTEX_INITIALIZER;
static hak_segment_t* lq_slot[LARGE_QUAR_N];
static size_t lq_head, lq_n, lq_bytes;
/* the most recently freed block, and the last of them whose first bytes a
 * slow malloc checked (_hak_secure_large_recent); written under lq_lock */
static _Atomic(hak_segment_t*) lq_newest, lq_checked;

/* The held block freed last, as small blocks' newest is checked at every
 * malloc (secure.h): its first 16 bytes must still be fill, checked once,
 * by the first malloc that takes the slow path after its free (a lock, and
 * only then; the newest is never taken nor let go, so it is mapped). */
void _hak_secure_large_recent(void) {
  if (hak_likely(hak_load_relaxed(&lq_newest) == hak_load_relaxed(&lq_checked))) return;
  hak_lock(&lq_lock);
  hak_segment_t* seg = lq_n > 0 ? lq_slot[(lq_head + lq_n - 1) % LARGE_QUAR_N] : NULL;
  if (seg != NULL && seg == hak_load_relaxed(&lq_newest) && seg != hak_load_relaxed(&lq_checked)) {
    if (!_hak_secure_large_head_ok(seg)) {
      hak_unlock(&lq_lock);
      _hak_fatal("hakmem: write after free detected in block %p (large block, near offset 0): written after its free, "
                 "before the next malloc\n", (void*)hak_large_block(seg));
    }
  }
  hak_store_relaxed(&lq_checked, seg);
  hak_unlock(&lq_lock);
}

static void lq_leave(hak_segment_t* seg) {
  _hak_secure_large_verify(seg);
  _hak_unmap_large(seg);
}

void _hak_secure_large_quarantine(hak_segment_t* seg) {
  if (seg->large.size > LARGE_QUAR_BYTES) {
    _hak_unmap_large(seg);
    return;
  }
  _hak_secure_large_fill(seg);
  hak_segment_t* out[LARGE_QUAR_N + 1];
  size_t nout = 0;
  hak_lock(&lq_lock);
  lq_slot[(lq_head + lq_n) % LARGE_QUAR_N] = seg;
  lq_n++;
  hak_store_relaxed(&lq_newest, seg);
  lq_bytes += seg->large.size;
  while (lq_n == LARGE_QUAR_N || (lq_bytes > LARGE_QUAR_BYTES && lq_n > 1)) {
    out[nout++] = lq_slot[lq_head];
    lq_bytes -= lq_slot[lq_head]->large.size;
    lq_head = (lq_head + 1) % LARGE_QUAR_N;
    lq_n--;
  }
  hak_unlock(&lq_lock);
  for (size_t i = 0; i < nout; i++) lq_leave(out[i]);   /* outside the lock */
}

/* The bytes mapped for the large blocks held (stats.c: memory held, not in
 * use, as the default build's BigCache is). */
size_t _hak_secure_large_held(void) {
  size_t mapped = 0;
  hak_lock(&lq_lock);
  for (size_t k = 0; k < lq_n; k++) mapped += lq_slot[(lq_head + k) % LARGE_QUAR_N]->map_size;
  hak_unlock(&lq_lock);
  return mapped;
}

/* Let every quarantined large block go (hak_collect, malloc_trim). */
void _hak_secure_large_flush(void) {
  for (;;) {
    hak_lock(&lq_lock);
    hak_segment_t* seg = NULL;
    if (lq_n > 0) {
      seg = lq_slot[lq_head];
      lq_bytes -= seg->large.size;
      lq_head = (lq_head + 1) % LARGE_QUAR_N;
      lq_n--;
    }
    hak_unlock(&lq_lock);
    if (seg == NULL) return;
    lq_leave(seg);
  }
}

/* A held mapping for a new large block of `need` bytes (header, block,
 * guard page) of the size a new one would get or smaller, its fill checked;
 * NULL when none fits.  (Only mappings with a guard page: blocks of the
 * default alignment.) */
hak_segment_t* _hak_secure_large_take(size_t need) {
  hak_segment_t* seg = NULL;
  hak_lock(&lq_lock);
  for (size_t k = 0; k + LARGE_QUAR_NEW < lq_n; k++) {
    size_t i = (lq_head + k) % LARGE_QUAR_N;
    hak_segment_t* c = lq_slot[i];
    /* (and the block can end at its guard page while it starts in the
     * first HAK_SEG_SIZE bytes, where free finds it: _hak_secure_large_place) */
    if (c->sec.guard_off != 0 && c->map_size >= need && c->map_size <= _hak_bigcache_map_size(need) &&
        c->sec.guard_off + 2 * HAK_OS_PAGE + HAK_LARGE_HDR < HAK_SEG_SIZE + need) {
      seg = c;
      lq_slot[i] = lq_slot[lq_head];   /* (the FIFO order of the rest changes a little) */
      lq_bytes -= seg->large.size;
      lq_head = (lq_head + 1) % LARGE_QUAR_N;
      lq_n--;
      break;
    }
  }
  hak_unlock(&lq_lock);
  if (seg != NULL) _hak_secure_large_verify(seg);
  return seg;
}

void _hak_secure_large_fork(int stage) {
  if (stage == 0) {
    hak_lock(&lq_lock);
    hak_lock(&ring_lock);
  } else if (stage == 1) {
    hak_unlock(&ring_lock);
    hak_unlock(&lq_lock);
  } else {
    pthread_mutex_init(&ring_lock, NULL);
    pthread_mutex_init(&lq_lock, NULL);
  }
}
#endif /* HAK_SECURE */
