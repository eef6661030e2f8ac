/* hakmem internal types and inline helpers shared by every tier.
 * All structs live here (one place to see the memory layout); the tiers are
 * the .c files (docs/DESIGN.md, "Tiers, as files"): segment.c (SuperSlabs),
 * slab.c, remote.c, heap.c, refill.c, free.c (slabs, remote frees, per-thread
 * heaps, the malloc and free slow paths), large.c, alloc.c (public entry
 * points), os.c, options.c, stats.c, init.c. */
#ifndef HAK_INTERNAL_H
#define HAK_INTERNAL_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <limits.h>
#include <stdarg.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <sys/types.h>
#include "hakmem.h"
#include "options.h"   /* (types and declarations only) */

/* ---------------------------------------------------------------- basics */
#define hak_likely(x)   __builtin_expect(!!(x), 1)
#define hak_unlikely(x) __builtin_expect(!!(x), 0)
#define hak_noinline    __attribute__((noinline))
#define hak_cold        __attribute__((cold, noinline))
#define hak_inline      static inline __attribute__((always_inline))
#define hak_noreturn    __attribute__((noreturn))
/* The code every process runs -- start-up, thread start and exit, the
 * malloc and free entries and the slow paths a first slab takes: one group
 * of pages (the linker puts .text.hot.* together), so that a small program
 * faults in those and not the whole library.  The kernel maps a file's
 * pages 64 KiB around each first touch, and the libraries are linked with
 * 64 KiB segment alignment, so the group's window is the same in every
 * process (docs/DESIGN.md, "A small program"). */
#define hak_warm        __attribute__((section(".text.hot.hakmem")))
/* malloc's and free's entry points start on a cache line: where they
 * start otherwise depends on every warm function before them, and a shift
 * of 80 bytes (a call added to the refill path) made glibc-simple 1.55x
 * slower with the same instruction count (AMD EPYC, 2026-11-29). */
#define hak_entry_aligned __attribute__((aligned(64)))
/* Large zero-filled tables, in a section of their own after the other
 * variables: between them, each touched small variable (locks, counters,
 * clocks) was a page of its own (five pages for a small program; two now). */
#define hak_bss_apart   __attribute__((section(".bss.hakmem.apart")))
/* Bits set in x, inline: without -mpopcnt (not in the x86-64 baseline) the
 * builtin is a call into libgcc, linked at the far end of the library's
 * text, away from the code every process runs (hak_warm). */
hak_inline unsigned hak_popcount64(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return (unsigned)((x * 0x0101010101010101ull) >> 56);
}
#define hak_api         __attribute__((visibility("default")))

#ifndef HAK_DEBUG
#define HAK_DEBUG 0
#endif
/* Assertion levels: 1 = internal invariants (the debug, ASan and TSan
 * builds), 2 = expensive walks too (the debug build).  hak_assert_cmp(a, op,
 * b) is hak_assert(a op b) with both values in the failure's line (compared
 * as uint64_t: counts, sizes, addresses); a failure prints one line (the
 * condition, the values, file and line: report.c) and aborts.  They are for
 * slow paths: the inline fast paths stay as the release build has them. */
#if HAK_DEBUG >= 1
#define hak_assert(c) ((c) ? (void)0 : _hak_assert_fail(#c, __FILE__, __LINE__))
#define hak_assert_cmp(a, op, b)                                                      \
  do {                                                                              \
    uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                \
    if (hak_unlikely(!(a_ op b_))) _hak_assert_fail_cmp(#a " " #op " " #b, a_, b_, __FILE__, __LINE__); \
  } while (0)
#else
#define hak_assert(c) ((void)0)
#define hak_assert_cmp(a, op, b) ((void)0)
#endif
#if HAK_DEBUG >= 2
#define hak_assert_expensive(c) hak_assert(c)
#define hak_assert_cmp_expensive(a, op, b) hak_assert_cmp(a, op, b)
#else
#define hak_assert_expensive(c) ((void)0)
#define hak_assert_cmp_expensive(a, op, b) ((void)0)
#endif

/* Memory orders through named wrappers. */
#define hak_load_relaxed(p)      atomic_load_explicit((p), memory_order_relaxed)
#define hak_load_acquire(p)      atomic_load_explicit((p), memory_order_acquire)
#define hak_store_relaxed(p, v)  atomic_store_explicit((p), (v), memory_order_relaxed)
#define hak_store_release(p, v)  atomic_store_explicit((p), (v), memory_order_release)

/* Locks, all taken through hak_lock.  The fork handlers (init.c) are
 * registered only once the process has a second thread (os.c): libc's
 * atfork code costs a process 128 KiB of resident pages, and while a process
 * has one thread no other thread can hold a lock when it forks.  So a lock is
 * taken only after the handlers are in place if another thread may exist.
 * Registered late, ours may run before a program's own prepare handler, or
 * glibc may allocate inside fork: the forking thread may allocate while its
 * prepare handler holds every lock, and its locks are then no-ops. */
extern _Atomic(int64_t) _hak_fork_state;   /* 2: registered */
extern __thread bool _hak_tls_forking;
void _hak_os_fork_ready(void);
void _hak_os_fork_register(void);
void _hak_os_fork_child_state(void);
void _hak_os_fork_handlers(void (*prepare)(void), void (*parent)(void), void (*child)(void), bool now);
static inline void hak_fork_ready(void) {
  if (hak_unlikely(hak_load_relaxed(&_hak_fork_state) != 2)) _hak_os_fork_ready();
}
int hak_lock(pthread_mutex_t* m);   /* (os.c: out of line, they are on slow paths only) */
int hak_trylock(pthread_mutex_t* m);
int hak_unlock(pthread_mutex_t* m);

/* ---------------------------------------------------------------- geometry */
#define HAK_SEG_SHIFT      22                        /* SuperSlab: 4 MiB, aligned */
#define HAK_SEG_SIZE       ((size_t)1 << HAK_SEG_SHIFT)
#define HAK_SEG_MASK       (HAK_SEG_SIZE - 1)
#define HAK_PAGE_SHIFT     12                        /* the page heap's grain: 4 KiB */
#define HAK_PAGE_SIZE      ((size_t)1 << HAK_PAGE_SHIFT)
#define HAK_PAGES_PER_SEG  (HAK_SEG_SIZE / HAK_PAGE_SIZE)   /* 1024; the first HAK_HDR_PAGES are the header */
#define HAK_OS_PAGE        4096
#define HAK_SLAB_MAX_PAGES 256                       /* the most pages one slab spans (class table) */
#define HAK_LARGE_HDR      8192                      /* large block data offset */

#define HAK_SMALL_FAST_MAX 1024                      /* table-driven class lookup */
#define HAK_MEDIUM_MAX     ((size_t)128 * 1024)      /* larger: large tier */
#define HAK_NCLASSES       59
/* Classes from this size up take page-exact slabs (slab.c's table: a block
 * or two each, placed at any page); the secure build keeps whole windows. */
#define HAK_EXACT_MIN      (HAK_SECURE ? HAK_MEDIUM_MAX + 1 : (size_t)16384)
#define HAK_MAX_ALIGN_SEG  ((size_t)2 << 20)         /* larger alignments: huge table */
#define HAK_MAX_SIZE       ((size_t)PTRDIFF_MAX - 2 * HAK_SEG_SIZE)

/* ---------------------------------------------------------------- page sets
 * A set of a segment's pages, one bit each (free pages, pages still
 * resident, a heap's slab heads, ...): the page heap's bookkeeping, changed
 * under the pool lock or by the one file that owns it.  Runs are coalesced
 * by construction: a freed run's bits join its free neighbours'. */
#define HAK_PSET_WORDS (HAK_PAGES_PER_SEG / 64)
typedef struct { uint64_t w[HAK_PSET_WORDS]; } hak_pset_t;
hak_inline bool hak_pset_has(const hak_pset_t* s, size_t i) { return (s->w[i >> 6] >> (i & 63)) & 1; }
hak_inline void hak_pset_add(hak_pset_t* s, size_t i) { s->w[i >> 6] |= (uint64_t)1 << (i & 63); }
hak_inline void hak_pset_del(hak_pset_t* s, size_t i) { s->w[i >> 6] &= ~((uint64_t)1 << (i & 63)); }
/* The bits of word k that lie in [lo, lo + n). */
hak_inline uint64_t hak_pset_word_run(size_t k, size_t lo, size_t n) {
  size_t a = k << 6, b = a + 64, hi = lo + n;
  if (hi <= a || lo >= b) return 0;
  uint64_t m = ~(uint64_t)0;
  if (lo > a) m &= ~(uint64_t)0 << (lo - a);
  if (hi < b) m &= ~(~(uint64_t)0 << (hi - a));
  return m;
}
hak_inline void hak_pset_add_run(hak_pset_t* s, size_t lo, size_t n) {
  for (size_t k = lo >> 6; k < HAK_PSET_WORDS && (k << 6) < lo + n; k++) s->w[k] |= hak_pset_word_run(k, lo, n);
}
hak_inline void hak_pset_del_run(hak_pset_t* s, size_t lo, size_t n) {
  for (size_t k = lo >> 6; k < HAK_PSET_WORDS && (k << 6) < lo + n; k++) s->w[k] &= ~hak_pset_word_run(k, lo, n);
}
/* The set run [lo, lo + n) as a set. */
hak_inline hak_pset_t hak_pset_run(size_t lo, size_t n) {
  hak_pset_t r = {{0}};
  hak_pset_add_run(&r, lo, n);
  return r;
}
/* Pages of [lo, lo + n) in s. */
hak_inline size_t hak_pset_count_run(const hak_pset_t* s, size_t lo, size_t n) {
  size_t c = 0;
  for (size_t k = lo >> 6; k < HAK_PSET_WORDS && (k << 6) < lo + n; k++) c += hak_popcount64(s->w[k] & hak_pset_word_run(k, lo, n));
  return c;
}
hak_inline bool hak_pset_all_run(const hak_pset_t* s, size_t lo, size_t n) { return hak_pset_count_run(s, lo, n) == n; }
hak_inline size_t hak_pset_count(const hak_pset_t* s) {
  size_t c = 0;
  for (size_t k = 0; k < HAK_PSET_WORDS; k++) c += hak_popcount64(s->w[k]);
  return c;
}
hak_inline bool hak_pset_empty(const hak_pset_t* s) {
  uint64_t x = 0;
  for (size_t k = 0; k < HAK_PSET_WORDS; k++) x |= s->w[k];
  return x == 0;
}
/* d = a & b, d = a & ~b, d = a | b (d may be a or b); the result's emptiness. */
hak_inline bool hak_pset_and(hak_pset_t* d, const hak_pset_t* a, const hak_pset_t* b) {
  uint64_t x = 0;
  for (size_t k = 0; k < HAK_PSET_WORDS; k++) x |= d->w[k] = a->w[k] & b->w[k];
  return x != 0;
}
hak_inline bool hak_pset_andnot(hak_pset_t* d, const hak_pset_t* a, const hak_pset_t* b) {
  uint64_t x = 0;
  for (size_t k = 0; k < HAK_PSET_WORDS; k++) x |= d->w[k] = a->w[k] & ~b->w[k];
  return x != 0;
}
hak_inline void hak_pset_or(hak_pset_t* d, const hak_pset_t* a, const hak_pset_t* b) {
  for (size_t k = 0; k < HAK_PSET_WORDS; k++) d->w[k] = a->w[k] | b->w[k];
}
hak_inline bool hak_pset_intersects(const hak_pset_t* a, const hak_pset_t* b) {
  uint64_t x = 0;
  for (size_t k = 0; k < HAK_PSET_WORDS; k++) x |= a->w[k] & b->w[k];
  return x != 0;
}
/* The first page of s at or after i (HAK_PAGES_PER_SEG: none), and the
 * last at or before i (SIZE_MAX: none): for (i = hak_pset_next(s, 0); i <
 * HAK_PAGES_PER_SEG; i = hak_pset_next(s, i + 1)) walks s. */
hak_inline size_t hak_pset_next(const hak_pset_t* s, size_t i) {
  if (i >= HAK_PAGES_PER_SEG) return HAK_PAGES_PER_SEG;
  size_t k = i >> 6;
  uint64_t w = s->w[k] & (~(uint64_t)0 << (i & 63));
  while (w == 0) {
    if (++k == HAK_PSET_WORDS) return HAK_PAGES_PER_SEG;
    w = s->w[k];
  }
  return (k << 6) + (size_t)__builtin_ctzll(w);
}
hak_inline size_t hak_pset_prev(const hak_pset_t* s, size_t i) {
  if (i >= HAK_PAGES_PER_SEG) i = HAK_PAGES_PER_SEG - 1;
  size_t k = i >> 6;
  uint64_t w = s->w[k] & (~(uint64_t)0 >> (63 - (i & 63)));
  while (w == 0) {
    if (k-- == 0) return SIZE_MAX;
    w = s->w[k];
  }
  return (k << 6) + 63 - (size_t)__builtin_clzll(w);
}
/* (a word another thread changes: one atomic load) */
hak_inline bool hak_pset_has_atomic(const hak_pset_t* s, size_t i) {
  return (__atomic_load_n(&s->w[i >> 6], __ATOMIC_RELAXED) >> (i & 63)) & 1;
}
/* (a word slabs of different heaps share: atomic read-modify-write) */
hak_inline void hak_pset_add_atomic(hak_pset_t* s, size_t i) {
  __atomic_fetch_or(&s->w[i >> 6], (uint64_t)1 << (i & 63), __ATOMIC_RELAXED);
}
hak_inline void hak_pset_del_atomic(hak_pset_t* s, size_t i) {
  __atomic_fetch_and(&s->w[i >> 6], ~((uint64_t)1 << (i & 63)), __ATOMIC_RELAXED);
}
/* The first page not in s at or after i (HAK_PAGES_PER_SEG: none). */
hak_inline size_t hak_pset_next_gap(const hak_pset_t* s, size_t i) {
  if (i >= HAK_PAGES_PER_SEG) return HAK_PAGES_PER_SEG;
  size_t k = i >> 6;
  uint64_t w = ~s->w[k] & (~(uint64_t)0 << (i & 63));
  while (w == 0) {
    if (++k == HAK_PSET_WORDS) return HAK_PAGES_PER_SEG;
    w = ~s->w[k];
  }
  return (k << 6) + (size_t)__builtin_ctzll(w);
}

/* ---------------------------------------------------------------- size classes
 * 16..128 in steps of 16, then five classes per doubling up to 128 KiB,
 * 2^k + 2^k/16 (2^k + 16 below 256) and 1.25, 1.5, 1.75, 2 x 2^k, and one
 * more at 4,608 (a 4 KiB page and its header: sqlite's page cache): a class
 * wastes at most 20 % of its size on a request that maps to it once the
 * 16-byte alignment granule is paid (sizes below 64 are bound by it), and a
 * power of two plus a small header (a string's or array's length field)
 * at most 6 %, where four classes per doubling wasted a fifth. */
extern const uint8_t _hak_class_small[HAK_SMALL_FAST_MAX / 16 + 1];
extern const uint32_t _hak_class_size[HAK_NCLASSES];
extern const uint16_t _hak_class_pages[HAK_NCLASSES];
extern const uint8_t _hak_class_mid[7 * 16];

hak_inline size_t hak_class_of(size_t n) {          /* n <= HAK_MEDIUM_MAX */
  if (n <= HAK_SMALL_FAST_MAX) return _hak_class_small[(n + 15) >> 4];
  size_t m = n - 1;
  unsigned b = 63u - (unsigned)__builtin_clzl(m);   /* 10..16 */
  return _hak_class_mid[((b - 10) << 4) | ((m >> (b - 4)) & 15)];
}

/* ---------------------------------------------------------------- blocks
 * A free block holds its list link and a cookie (a per-process secret, never
 * 0: malloc clears the word) that marks it free: a second free finds the
 * cookie and is confirmed by a list walk.  The cookie does not mix in the
 * block's address: anyone who can read a freed block and knows its address
 * learns the secret either way, and the plain secret saves the fast path an
 * instruction. */
typedef struct hak_block_s {
  struct hak_block_s* next;
  uintptr_t cookie;
} hak_block_t;

extern uintptr_t _hak_cookie_key;
hak_inline uintptr_t hak_cookie(void) { return _hak_cookie_key; }

/* Secure mode is a build (libhakmem-secure.so, -DHAK_SECURE=1), not a
 * run-time switch, so the default fast path carries none of its cost.  Its
 * hooks (secure.h) sit behind this constant and compile to nothing when it
 * is 0. */
#ifndef HAK_SECURE
#define HAK_SECURE 0
#endif
#define HAK_TRAILER (HAK_SECURE ? 8 : 0)   /* secure: the trailer word at the end of each small block */

/* Free-list links: plain, or (secure) encoded with a per-process secret and
 * the block's own address, so a forged or overwritten link decodes to
 * garbage and is caught before it is followed. */
extern uintptr_t _hak_list_key;
hak_noreturn void _hak_list_corrupt(const void* b);
hak_inline hak_block_t* hak_block_next(const hak_block_t* b) {
  if (HAK_SECURE) {
    uintptr_t n = (uintptr_t)b->next ^ _hak_list_key ^ (uintptr_t)b;
    /* a link leads into the same SuperSlab or is NULL (tested second: the
     * end of a list is the rare case) */
    if (hak_unlikely(((n ^ (uintptr_t)b) >> HAK_SEG_SHIFT) != 0) && n != 0) _hak_list_corrupt(b);
    return (hak_block_t*)n;
  }
  return b->next;
}
hak_inline void hak_block_set_next(hak_block_t* b, hak_block_t* n) {
  if (HAK_SECURE) b->next = (hak_block_t*)((uintptr_t)n ^ _hak_list_key ^ (uintptr_t)b);
  else b->next = n;
}

/* ---------------------------------------------------------------- slabs
 * A slab is a run of 4 KiB pages of one SuperSlab serving one size class.
 * xowner says who may touch it without atomics: the owner heap's address,
 * with HAK_OWNER_FULL set while the slab sits on the heap's full list, or a
 * special value.  The free fast path compares xowner with its own heap once:
 * every rare case (full, remote, abandoned, unused) fails that test. */
#define HAK_OWNER_FULL      ((uintptr_t)1)
#define HAK_OWNER_UNUSED    ((uintptr_t)0)      /* page not in a slab: zero-filled mmap */
#define HAK_OWNER_ABANDONED ((uintptr_t)2)      /* owner thread exited */
#define HAK_OWNER_MESHED    ((uintptr_t)8)      /* with the owner heap: an alias of a meshed slab (mesh.c) */
#define HAK_OWNER_FLAGS     ((uintptr_t)63)
/* xthread_free's low bit (blocks are 16-byte aligned): the remote free that
 * made the list non-empty is still telling the owner (remote_notify).  While
 * it is set the owner does not take the list, so the slab keeps a block out
 * and its segment stays mapped until the notifier is done with it. */
#define HAK_XF_NOTIFYING    ((uintptr_t)1)
/* Its bits 48..63 count the blocks on the list (a block lies below 2^47,
 * where the segment map covers the address space): the owner takes a list
 * with one exchange and knows its length without walking it.  The walk it
 * replaced missed the cache on every block (another core wrote them), and
 * the malloc that handed each block out missed again once the list was
 * longer than the first-level cache holds (xmalloc-test: 15 % of the
 * allocating thread's samples). */
#define HAK_XF_COUNT_SHIFT  48
#define HAK_XF_ONE          ((uintptr_t)1 << HAK_XF_COUNT_SHIFT)
hak_inline struct hak_block_s* hak_xf_list(uintptr_t v) {
  return (struct hak_block_s*)(v & (HAK_XF_ONE - 1) & ~HAK_XF_NOTIFYING);
}
hak_inline uint32_t hak_xf_count(uintptr_t v) { return (uint32_t)(v >> HAK_XF_COUNT_SHIFT); }
/* The word after pushing block b on a list whose word is head: b, the count
 * plus one, the tag as it was. */
hak_inline uintptr_t hak_xf_push(uintptr_t head, const struct hak_block_s* b) {
  return (uintptr_t)b + ((head & ~(HAK_XF_ONE - 1)) + HAK_XF_ONE) + (head & HAK_XF_NOTIFYING);
}

struct hak_heap_s;
typedef struct hak_slab_s {
  hak_block_t* free;                 /* owner: blocks ready to hand out */
  _Atomic(uintptr_t) xowner;         /* heap | flags, or a special value */
  uint64_t recip;                    /* floor(2^64 / bsize) + 1: see hak_is_carved_block */
  _Atomic(uintptr_t) xthread_free;   /* remote frees, pushed lock-free; bit 0: HAK_XF_NOTIFYING; bits 48..: count */
  struct hak_slab_s* next;           /* heap avail/full list */
  struct hak_slab_s* prev;
  uint32_t used;                     /* blocks out (incl. pending remote frees) */
  uint32_t bsize;                    /* block size */
  uint32_t carved;                   /* blocks carved so far × hak_slab_step(s) */
  uint8_t  cls;
  uint8_t  sec_zero;                 /* secure: the slab's pages were never used (zero: carving need not fill) */
  uint16_t npages;                   /* its pages (4 KiB) */
} hak_slab_t;

/* TSan builds (HAK_TSAN): owner-written fields that other threads read as
 * figures are written with relaxed atomic stores (below, and the counters) */
#if defined(__SANITIZE_THREAD__)
#define HAK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HAK_TSAN 1
#endif
#endif
/* A slab's count of blocks out, changed by its owner and read by the figures
 * walk (stats.c) and by the thread that gives back an idle heap's emptied
 * slabs (heap.c), which reads it with acquire: the store is a release, so
 * the block links written before it are seen with it.  x86 keeps stores in
 * order, so there a compiler barrier makes the plain add one, and the count
 * stays one add to memory (an atomic store made it a load, an add and a
 * store: +2 instructions on each malloc and free of random_mixed). */
hak_inline uint32_t hak_used_add(hak_slab_t* s, int32_t d) {
#if defined(HAK_TSAN) || !defined(__x86_64__)
  uint32_t v = s->used + (uint32_t)d;
  __atomic_store_n(&s->used, v, __ATOMIC_RELEASE);
  return v;
#else
  atomic_signal_fence(memory_order_release);
  return s->used += (uint32_t)d;
#endif
}

/* ---------------------------------------------------------------- segments */
/* (3: the secure build's zero-size blocks, secure.h; 4: slots.c's page
 * slots for sampled blocks; 5: guard.c's pool of guarded blocks) */
typedef enum { HAK_SEG_SMALL = 1, HAK_SEG_LARGE = 2, HAK_SEG_SAMPLED = 4, HAK_SEG_GUARD = 5 } hak_seg_kind_t;

/* A small segment's pages belong to the process (pool.c): any heap may put a
 * slab on any free run.  A member entry says which slabs of the segment one
 * heap owns (mask: bit = head page); it links the segments a heap has slabs
 * in, so the heap finds its remote frees (xremote & mask) without a walk of
 * every segment.  An entry with heap NULL and a mask holds the slabs of
 * exited threads (at most one per segment).  Entries change under the pool
 * lock; an owner reads its own mask without it. */
#define HAK_SEG_MEMBERS 64
typedef struct hak_member_s {
  struct hak_heap_s* heap;           /* NULL: abandoned slabs (mask != 0) or a free entry (mask == 0) */
  hak_pset_t mask;                   /* the heap's slabs in this segment (head pages) */
  uint32_t used;                     /* ... how many (0: the entry is free) */
  struct hak_member_s* next;         /* the heap's list of its segments */
  struct hak_member_s* prev;
} hak_member_t;

/* Per-feature state of a segment: each sub-structure is written by the file
 * its comment names (STYLE.md, "A feature owns its state"). */
/* pool.c's state in a small segment (pool lock) */
typedef struct {
  hak_pset_t free_pages;             /* 1 = page free (the header's never) */
  struct hak_segment_s* abnext;      /* the list of segments with abandoned slabs */
  struct hak_segment_s* abprev;
  uint8_t abandoned;                 /* on the abandoned list */
  uint8_t listed;                    /* on the pool's list of segments with free pages */
  uint8_t members_hw;                /* member entries ever used (the rest stay untouched) */
} hak_seg_pool_t;
/* release.c's aging of free pages (_hak_segment_age) */
typedef struct {
  hak_pset_t dirty;                  /* free pages still resident (release policy) */
  hak_pset_t old;                    /* ... of them, those already dirty at the snapshot taken at ms */
  hak_pset_t old2;                   /* ... and at the snapshot before */
  uint64_t ms;
  uint64_t since;                    /* ms when dirty last became non-empty (cached segments) */
} hak_seg_age_t;
/* large.c's block in a large segment */
typedef struct {
  size_t off;                        /* block address - segment address */
  size_t size;                       /* requested size */
  uint32_t fresh;                    /* zero-filled: never written since mmap/DONTNEED */
  uint32_t huge_aligned;             /* in the huge-alignment table, not the segment map */
  size_t peak;                       /* largest size this mapping served (touched extent) */
  uint8_t prefaulted;
  uint8_t pieced;                    /* two mappings moved together: mremap cannot grow it */
  size_t pinned;                     /* resident bytes beyond its need, taken from the BigCache (see take_cover) */
} hak_seg_large_t;
/* secure.c's state */
typedef struct {
  union {
    size_t guard_off;                /* large: offset of the PROT_NONE page after the block */
    hak_pset_t open;                 /* small: pages made accessible */
  };
  uint8_t array;                     /* large: the block is from C++ operator new[] */
} hak_seg_sec_t;
/* mesh.c's state in a small segment (compaction): pages mapped from the mesh
 * file (roots and aliases) and the pages a write barrier protects now (their
 * entries: the small tail's mesh_page) */
typedef struct {
  hak_pset_t pages;                  /* (words read by other threads: atomic word access) */
  hak_pset_t prot;                   /* (atomic words) */
} hak_seg_mesh_t;
/* scavenge.c's state in a small segment: the pages of slabs given back (the
 * blocks on them, per slab: the small tail's nphantom) */
typedef struct {
  hak_pset_t drop;                   /* (atomic word stores: stats.c reads them) */
} hak_seg_scav_t;
/* site.c's state in a large segment */
typedef struct {
  uint32_t entry;                    /* call-site entry of the block (HAK_SITES: none) */
  uint32_t ring;                     /* in the BigCache, counted in this site's ring: entry + 1, 0 = none */
  uint64_t clock;                    /* site clock at allocation */
} hak_seg_site_t;

/* Windows: a segment's pages in runs of 16 (64 KiB) from page 0; a slab
 * whose head page starts a window and that spans it whole has the window's
 * descriptor (slabs[]: the free fast path's lookup, alloc.h).  Slots: every
 * slab spans at least 4 pages (slab.c's class table), so two slabs' head
 * pages lie at least 4 pages apart, and slot (head + 3) / 4 names a slab of
 * its segment: the other slabs' descriptors (odd[]) and what other files
 * keep per slab are by slot.  Descriptors by slot keep the header's resident
 * part small (one per page spread them over 16 pages of a segment in use). */
#define HAK_WINDOW_PAGES   16
#define HAK_WINDOW_SHIFT   (HAK_PAGE_SHIFT + 4)
#define HAK_SEG_WINDOWS    (HAK_PAGES_PER_SEG / HAK_WINDOW_PAGES)
#define HAK_SLAB_MIN_PAGES 4
#define HAK_SEG_SLOTS      (HAK_PAGES_PER_SEG / HAK_SLAB_MIN_PAGES)
hak_inline size_t hak_slot_of(size_t head) { return (head + HAK_SLAB_MIN_PAGES - 1) / HAK_SLAB_MIN_PAGES; }
/* A page map entry: the slab's head page (bits 16..) and its descriptor's
 * offset from the segment's start (0: the page is in no slab). */
typedef uint32_t hak_pmap_t;

typedef struct hak_segment_s {
  /* common header (segment.c) */
  uint32_t kind;
  uint32_t used_pages;               /* pages in slabs (small: pool lock) */
  struct hak_segment_s* next;        /* the pool's list of segments with free pages / the cache */
  struct hak_segment_s* prev;
  size_t map_size;                   /* bytes mapped at the segment start */
  /* small segments: slabs (bit = index of the head page) that got their
   * first remote free since their owner last collected them; set by the
   * freeing thread, taken by the owner (remote.c, _hak_heap_collect_remote) */
  _Atomic(uint64_t) xremote[HAK_PSET_WORDS];
  /* per feature (both kinds, or read for both) */
  hak_seg_pool_t pool;
  hak_seg_age_t age;
  hak_seg_large_t large;
  hak_seg_sec_t sec;
  uint8_t thp;                       /* thp.c: small: halves advised MADV_HUGEPAGE (bits 0-1); large: 1 when advised, mapped exactly */
  uint8_t prof;                      /* prof.c: large: the block is a heap-profile sample, its free is recorded */
  hak_seg_mesh_t mesh;
  /* what only one kind holds (a segment never changes kind: the segment
   * cache holds small ones, the BigCache large ones) */
  union {
    hak_seg_scav_t scav;             /* small */
    hak_seg_site_t site;             /* large */
  };
  /* Descriptors, one cache line each (adjacent slabs may be different
   * threads', pool.c, and each owner writes its descriptor on every malloc
   * and free).  slabs[k]: the slab whose head page starts window k (page
   * 16k: the free fast path finds it from an address in that window,
   * alloc.h), else HAK_OWNER_UNUSED.  A large segment's header covers them
   * and leaves them so. */
  _Alignas(64) hak_slab_t slabs[HAK_SEG_WINDOWS];
  /* the rest is a small segment's only: the page map (each page's slab), the
   * descriptors of the other slabs (whose head is not a window's first
   * page: found through the map), and per slot (hak_slot_of) what other
   * files keep of a slab */
  hak_pmap_t pmap[HAK_PAGES_PER_SEG];
  _Alignas(64) hak_slab_t odd[HAK_SEG_SLOTS];
  uint16_t shead[HAK_SEG_SLOTS];                 /* pool.c: an odd slab's head page */
  struct hak_mesh_s* mesh_page[HAK_SEG_SLOTS];   /* mesh.c: the entry of a meshed slab */
  uint16_t nphantom[HAK_SEG_SLOTS];              /* scavenge.c: the blocks on pages given back
                                                    * (phantoms: neither free nor live, not in `used`) */
  hak_member_t members[HAK_SEG_MEMBERS];         /* pool.c, under the pool lock */
} hak_segment_t;

/* A slab of n pages whose head page starts a window and that spans the
 * window has the window's descriptor (slabs[]: the free fast path finds it
 * from a pointer into that window); any other, an odd one (odd[], through
 * the page map). */
hak_inline bool hak_window_slab(size_t head, size_t n) { return head % HAK_WINDOW_PAGES == 0 && n >= HAK_WINDOW_PAGES; }
/* The page map's entry of page i: the head page of its slab, and the slab
 * (NULL: none; for i a head page, the slab whose head it is).  A page of a
 * free run keeps the head page of the slab that had it last, with no slab:
 * a second free of the block at that head is worded a double free. */
hak_inline size_t hak_pmap_head(const hak_segment_t* seg, size_t i) {
  return __atomic_load_n(&seg->pmap[i], __ATOMIC_RELAXED) >> 16;
}
hak_inline hak_slab_t* hak_slab_at(const hak_segment_t* seg, size_t i) {
  uint32_t off = __atomic_load_n(&seg->pmap[i], __ATOMIC_RELAXED) & 0xFFFF;
  return off ? (hak_slab_t*)((uintptr_t)seg + off) : NULL;
}
/* Pages [head, head + n) become a slab's (clear: no slab's, the head kept);
 * its descriptor. */
hak_inline hak_slab_t* hak_pmap_set(hak_segment_t* seg, size_t head, size_t n, bool clear) {
  hak_slab_t* s = hak_window_slab(head, n) ? &seg->slabs[head / HAK_WINDOW_PAGES] : &seg->odd[hak_slot_of(head)];
  _Static_assert(sizeof(hak_segment_t) <= 0xFFFF, "a descriptor's offset fits the page map's entries");
  hak_pmap_t e = (hak_pmap_t)((head << 16) | (clear ? 0 : (size_t)((uint8_t*)s - (uint8_t*)seg)));
  for (size_t i = head; i < head + n; i++) __atomic_store_n(&seg->pmap[i], e, __ATOMIC_RELAXED);
  return s;
}
/* The bytes of a large segment's header in use (slabs[] after them stay
 * zero). */
#define HAK_SEG_LARGE_HDR_USED offsetof(hak_segment_t, slabs)
/* The pages a small segment's header takes (its slab pages follow). */
#define HAK_HDR_PAGES ((sizeof(hak_segment_t) + HAK_PAGE_SIZE - 1) / HAK_PAGE_SIZE)
_Static_assert(sizeof(hak_slab_t) == 64, "slab descriptor layout");
_Static_assert(offsetof(hak_segment_t, pmap) <= HAK_LARGE_HDR, "a large segment's header covers slabs[]");

/* Bytes of blocks a slab holds: capacity * bsize. */
hak_inline uint32_t hak_slab_limit(const hak_slab_t* s) {
  return s->bsize ? (uint32_t)((((size_t)s->npages << HAK_PAGE_SHIFT) / s->bsize) * s->bsize) : 0;
}
/* With c = recip = floor(2^64/d) + 1 for block size d, e = d*c mod 2^64 =
 * d - (2^64 mod d) lies in [1, d].  For a slab offset off = j*d + r below
 * 2^22: off*c mod 2^64 = j*e + r*c, which is j*e < 2^22 when r = 0 and at
 * least c >= 2^47 otherwise (no wrap: r*c <= 2^64 - 2^64/d + d).  So off is a
 * block start iff off*c < c, and the start of one of the first n blocks iff
 * off*c < n*e: one multiply and one compare test both "a block start" and
 * "already carved" (the fast path's free check). */
hak_inline uint32_t hak_slab_step(const hak_slab_t* s) { return (uint32_t)((uint64_t)s->bsize * s->recip); }
/* floor(2^64 / d) + 1 in 64-bit arithmetic: floor((2^64 - 1) / d), one more
 * when d divides 2^64 (a power of two).  (The 128-bit division was a call
 * into libgcc's __udivti3, linked far from the code every process runs.) */
hak_inline uint64_t hak_slab_recip(uint32_t bsize) {
  return UINT64_MAX / bsize + ((bsize & (bsize - 1)) == 0) + 1;
}
hak_inline bool hak_is_block_start(const hak_slab_t* s, uint64_t off) { return off * s->recip < s->recip; }
hak_inline bool hak_is_carved_block(const hak_slab_t* s, uint64_t off, uint32_t carved) { return off * s->recip < carved; }
/* byte offset of the first never-carved block */
hak_inline uint32_t hak_slab_bump(const hak_slab_t* s, uint32_t carved) { return carved / hak_slab_step(s) * s->bsize; }

hak_inline hak_segment_t* hak_segment_of(const void* p) {
  return (hak_segment_t*)((uintptr_t)p & ~(uintptr_t)HAK_SEG_MASK);
}
/* A slab's index in its segment (its first page) and its first byte. */
hak_inline size_t hak_slab_index(const hak_slab_t* s) {
  const hak_segment_t* seg = hak_segment_of(s);
  if (s < seg->odd) return (size_t)(s - seg->slabs) * HAK_WINDOW_PAGES;
  return __atomic_load_n(&seg->shead[s - seg->odd], __ATOMIC_RELAXED);
}
hak_inline uint8_t* hak_slab_start(const hak_slab_t* s) {
  return (uint8_t*)hak_segment_of(s) + (hak_slab_index(s) << HAK_PAGE_SHIFT);
}
/* The slab that p, a pointer into the small segment seg, lies in (the page
 * map's head page); NULL when the page is in no slab.  *xo: the slab's
 * owner word. */
hak_inline hak_slab_t* hak_slab_of(hak_segment_t* seg, const void* p, uintptr_t* xo) {
  hak_slab_t* s = hak_slab_at(seg, ((uintptr_t)p & HAK_SEG_MASK) >> HAK_PAGE_SHIFT);
  uintptr_t x = s != NULL ? hak_load_acquire(&s->xowner) : HAK_OWNER_UNUSED;
  *xo = x;
  return x == HAK_OWNER_UNUSED ? NULL : s;
}
/* p is the start of a block of s carved already (a block handed out or
 * free, never fresh room); `carved` is read as carving publishes it, since
 * other threads' frees ask too. */
hak_inline bool hak_slab_carved(const hak_slab_t* s, const void* p) {
  return hak_is_carved_block(s, (uint64_t)((const uint8_t*)p - hak_slab_start(s)), __atomic_load_n(&s->carved, __ATOMIC_RELAXED));
}

/* The segment map: one byte per 4 MiB of the 47-bit user address space says
 * "a hakmem segment starts here".  It lets free() reject foreign pointers
 * before reading any header.  32 MiB of .bss, touched only where used (one
 * 4 KiB page of it covers 16 GiB of address space); a byte, not a bit, makes
 * the test three instructions shorter than a bitmap's word-and-bit test. */
#define HAK_SEGMAP_SIZE ((size_t)1 << (47 - HAK_SEG_SHIFT))
extern _Atomic(uint8_t) _hak_segmap[HAK_SEGMAP_SIZE];
hak_inline bool hak_segmap_contains(const void* p) {
  uintptr_t i = (uintptr_t)p >> HAK_SEG_SHIFT;
  if (hak_unlikely(i >= HAK_SEGMAP_SIZE)) return false;
  return hak_load_relaxed(&_hak_segmap[i]) != 0;
}

/* The one classifier: what a pointer into a hakmem segment is (free,
 * realloc, malloc_usable_size, sized delete, the secure checks, call-site
 * learning and meshing ask it; the inline fast paths look at p's page only,
 * alloc.h).  Its kind (the segment's: HAK_SEG_SMALL, HAK_SEG_LARGE, the
 * secure build's HAK_SEG_ZERO), or 0 when p lies in no segment of the map
 * (a block aligned above 2 MiB is in large.c's table: free.c asks it).  For
 * a small segment, p's slab (NULL: p's page is in no slab) and its owner
 * word; for a large one, the block is hak_large_block(seg). */
typedef struct {
  hak_segment_t* seg;
  hak_slab_t* slab;
  uintptr_t xo;
} hak_ptr_t;
/* (for a pointer the caller knows lies in the segment map) */
hak_inline uint32_t hak_ptr_classify_mapped(const void* p, hak_ptr_t* r) {
  r->seg = hak_segment_of(p);
  r->slab = NULL;
  r->xo = HAK_OWNER_UNUSED;
  uint32_t kind = r->seg->kind;
  if (kind == HAK_SEG_SMALL) r->slab = hak_slab_of(r->seg, p, &r->xo);
  return kind;
}
hak_inline uint32_t hak_ptr_classify(const void* p, hak_ptr_t* r) {
  return hak_segmap_contains(p) ? hak_ptr_classify_mapped(p, r) : 0;
}
/* A large segment's block, and whether p is that block's start while it is
 * live (a freed one waits in the BigCache or the release batch with its
 * used_pages 0). */
hak_inline uint8_t* hak_large_block(const hak_segment_t* seg) { return (uint8_t*)seg + seg->large.off; }
hak_inline bool hak_large_live_at(const hak_segment_t* seg, const void* p) {
  return (const uint8_t*)p == hak_large_block(seg) && __atomic_load_n(&seg->used_pages, __ATOMIC_RELAXED) == 1;
}
/* Segments of page slots (slots.c, guard.c): from offset `first`, n slots
 * of a gap page and `pages` block pages.  Slot i's first block page, and
 * the slot whose block pages hold p (-1: the header, a gap page, past the
 * slots). */
hak_inline uint8_t* hak_pslot_page(const hak_segment_t* seg, size_t first, size_t i, size_t pages) {
  return (uint8_t*)seg + first + (i * (pages + 1) + 1) * HAK_OS_PAGE;
}
hak_inline long hak_pslot_of(const hak_segment_t* seg, size_t first, size_t n, size_t pages, const void* p) {
  size_t off = (size_t)((const uint8_t*)p - (const uint8_t*)seg);
  if (off < first || off >= first + n * (pages + 1) * HAK_OS_PAGE) return -1;
  size_t page = (off - first) / HAK_OS_PAGE;
  return page % (pages + 1) != 0 ? (long)(page / (pages + 1)) : -1;
}
/* The start of the block of slab s that p lies in (by the slab's
 * reciprocal: no division), or NULL past the slab's last block. */
hak_inline uint8_t* hak_slab_block_at(const hak_slab_t* s, const void* p) {
  uint8_t* start = hak_slab_start(s);
  uint32_t bsize = s->bsize;
  uint8_t* b = start + (size_t)(((unsigned __int128)(size_t)((const uint8_t*)p - start) * s->recip) >> 64) * bsize;
  /* (a block that would end past the slab's pages is its tail: the limit
   * itself, hak_slab_limit, costs a division) */
  return bsize != 0 && b + bsize <= start + ((size_t)s->npages << HAK_PAGE_SHIFT) ? b : NULL;
}

/* ---------------------------------------------------------------- heaps */
typedef struct hak_heap_cls_s {
  hak_slab_t* cur;                   /* first slab with room (never NULL) */
  uint64_t nmalloc;                  /* statistics: blocks handed out (same line) */
} hak_heap_cls_t;

#define HAK_DIRECT_N (HAK_SMALL_FAST_MAX / 16 + 1)
typedef struct hak_heap_s {
  /* The sampling point (sample.c): the bytes malloc may still hand out
   * before its slow path looks (a heap-profile sample is due, or the idle
   * reload's check).  0 in a new heap: its first malloc looks. */
  int64_t sample_left;
  /* malloc's entry for a request of up to 1 KiB: direct[(n + 15) / 16] is
   * &cls[class of n], set once when the heap is made (the static empty heap:
   * all &cls[0], whose slab is empty).  One indexed load instead of the
   * class table's load, shift and add. */
  hak_heap_cls_t* direct[HAK_DIRECT_N];
  hak_heap_cls_t cls[HAK_NCLASSES];
  hak_slab_t* tail[HAK_NCLASSES];    /* last slab of each class's list (NULL when cur is empty) */
  hak_slab_t* full;                  /* slabs without room */
  hak_member_t* members;             /* the segments it has slabs in (their member entries) */
  uint32_t nsegs;                    /* ... how many */
  _Atomic(uintptr_t) xremote_hint;   /* a segment of this heap has bits in xremote */
  /* The owner's slow paths run holding xbusy (hak_heap_enter): while the
   * thread is idle, another may hold it instead and give back the slabs
   * other threads' frees emptied (heap.c, idle heaps) */
  _Atomic(uint32_t) xbusy;
  uint32_t busy_depth;               /* owner: nested hak_heap_enter calls */
  _Atomic(uint64_t) slow_n;          /* owner: slow paths entered (the idle test reads it) */
  uint64_t idle_seen;                /* heap.c, under the heap lock: slow_n at the last idle test */
  struct hak_heap_s* next_all;       /* registry of all heaps (fork, stats) */
  struct hak_heap_s* next_free;      /* heap pool */
  struct {                           /* scavenge.c */
    uint64_t next_ms;                /* the next pass on the release tick ... */
    uint64_t gap_ms;                 /* ... and the gap after it (longer while passes find nothing) */
  } scav;
  uint32_t in_use;
  /* the owning thread, for park.c (set by the owner at its start, read
   * under the heap lock): its heap pointer's slot, its id, its signal mask
   * then (bits of signals 1..64; mask_stale: park.c asks for it again) */
  struct {
    struct hak_heap_s** slot;
    int32_t tid;
    uint32_t mask_stale;
    uint64_t mask;
    uint32_t parking;                /* debug build: park.c holds the heap (hak_heap_enter checks) */
    uint32_t skip, backoff;          /* park.c (heap lock): passes to skip it, found running */
  } thread;
  struct {                           /* limit.c */
    uint64_t epoch;                  /* the last memory-limit release this heap answered */
  } limit;
  uint64_t no_resident;              /* the pool's give count when it last found no resident free run + 1 (0: look) */
  struct {                           /* the release tick (slab.c, background.c) */
    uint64_t next_ms;                /* release policy: next periodic check */
    uint32_t nmalloc[HAK_NCLASSES];  /* each class's malloc count at the last release tick (the reserve) */
  } tick;
  uint64_t refills;                  /* mallocs that found the current slab without a free block
                                      * (statistics; every 64th runs the periodic work) */
  /* (from here on, what lending and profiling use: a fresh heap's first page
   * holds all that a small program touches, heap.c) */
  struct {                           /* lending (refill.c, heap_borrow) */
    hak_slab_t* slab[HAK_NCLASSES];  /* per class: the larger class's slab it last borrowed a block
                                      * from (checked before each use) */
    uint32_t n[HAK_NCLASSES];        /* ... loans from it since the last check, and its used count then */
    uint32_t used[HAK_NCLASSES];
  } lend;
  struct {                           /* the sampling point (sample.c), zeroed with the heap */
    uint64_t rng;                    /* the intervals' generator */
    int64_t reload;                  /* sample_left's value at its last reload */
    int64_t prof_left, guard_left;   /* bytes from that reload to the next profile sample, guarded block */
    double inv_size;                 /* moving mean of 1 / size where the countdown ran out (guard.c's rate) */
    uint32_t drawn;                  /* which of prof_left, guard_left are drawn (sample.c DRAWN_*) */
  } sample;
} hak_heap_t;

extern hak_heap_t _hak_heap_empty;
extern hak_slab_t _hak_slab_empty;
extern __thread hak_heap_t* _hak_tls_heap __attribute__((tls_model("initial-exec")));
extern __thread hak_heap_t* _hak_tls_own __attribute__((tls_model("initial-exec")));

/* The thread's heap for the fast paths.  Another thread may store to it
 * while this one sleeps (park.c), hence an atomic load: a plain mov. */
hak_inline hak_heap_t* hak_heap_get(void) { return __atomic_load_n(&_hak_tls_heap, __ATOMIC_RELAXED); }
hak_inline void hak_heap_set(hak_heap_t** slot, hak_heap_t* h) { __atomic_store_n(slot, h, __ATOMIC_RELEASE); }
void _hak_heap_wait(hak_heap_t* h);



/* ---------------------------------------------------------------- cross-file */
/* init.c */
void _hak_process_init(void);
hak_heap_t* _hak_thread_init(void);
extern _Atomic(int) _hak_initialized;
/* report.c */
hak_noreturn void _hak_fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void _hak_invalid_pointer(const char* op, const void* p, const char* why);
void _hak_double_free(const char* op, const void* p, size_t size);   /* size 0: a large block; SIZE_MAX: a slab given back */
void _hak_size_mismatch(const char* op, const void* p, size_t given, size_t usable);
void _hak_message(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
hak_noreturn void _hak_assert_fail(const char* cond, const char* file, int line);
hak_noreturn void _hak_assert_fail_cmp(const char* cond, uint64_t a, uint64_t b, const char* file, int line);
int _hak_snprintf(char* buf, size_t n, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

/* slab.c: a slab's life and its place on its heap's lists (the lists'
 * inline helpers: slab.h) */
bool  _hak_slab_collect(hak_slab_t* s);   /* the remote frees into the owner's list; false: none */
bool  _hak_slab_refill(hak_slab_t* s);    /* free blocks: collected, carved, or taken back from scavenging */
void  _hak_slab_init(hak_heap_t* h, hak_segment_t* seg, size_t idx, size_t cls);
void  _hak_slab_mark_full(hak_heap_t* h, hak_slab_t* s);   /* off its class list, onto the full list */
void  _hak_slab_to_full(hak_heap_t* h, hak_slab_t* s);     /* (on no list) onto the full list */
void  _hak_slab_unfull(hak_heap_t* h, hak_slab_t* s);      /* a full slab got a block back: last in its class */
void  _hak_slab_forget(hak_heap_t* h, hak_slab_t* s);      /* the heap's references to a slab that leaves it */
bool  _hak_slab_release(hak_heap_t* h, hak_slab_t* s);     /* pages to the pool; true: h's last slab in its segment */
int   _hak_slab_retire(hak_heap_t* h, hak_slab_t* s);      /* empty: 0 kept, 1 released, 2 released and h's last in its segment */
void  _hak_slab_emptied(hak_heap_t* h, hak_slab_t* s);
void  _hak_slab_clear(hak_slab_t* s);
void  _hak_heap_reserve_tick(hak_heap_t* h);
void  _hak_heap_exact_trim(hak_heap_t* h, size_t cls);
extern _Atomic(uint64_t) _hak_stat_reserve_released;   /* an empty slab's descriptors before its pages go back */
/* remote.c */
void  _hak_remote_push(hak_slab_t* s, hak_block_t* b);   /* a free into another thread's slab */
void  _hak_heap_collect_remote(hak_heap_t* h);          /* the owner takes the slabs that got remote frees */
bool  _hak_seg_take_remote(hak_segment_t* seg, const hak_pset_t* mask, hak_pset_t* taken);
void  _hak_slab_rearm(hak_slab_t* s, hak_heap_t* owner);       /* owner NULL: abandoned */
void  _hak_slab_look_again(hak_slab_t* s, hak_heap_t* owner);
void  _hak_abandoned_collect(hak_segment_t* seg, const hak_pset_t* mask, hak_pset_t* emptied);   /* pool lock held */
extern _Atomic(uint64_t) _hak_stat_reclaimed_slabs, _hak_stat_reclaimed_pages, _hak_stat_abandon_pages, _hak_stat_adopt_pages;
/* heap.c */
void  _hak_heap_adopt(hak_heap_t* h, hak_segment_t* seg, const hak_pset_t* mask);   /* an exited thread's slabs */
void  _hak_heap_adopt_slab(hak_heap_t* h, hak_slab_t* s);   /* one of them, from _hak_pool_adopt_slab */
void  _hak_heap_abandon(hak_heap_t* heap);
hak_heap_t* _hak_heap_acquire(void);
void  _hak_heaps_fork_prepare(void);
void  _hak_heaps_fork_parent(void);
void  _hak_heaps_fork_child(hak_heap_t* self);
void  _hak_collect_heap(hak_heap_t* heap);
void  _hak_heaps_foreach(void (*fn)(hak_heap_t*, void*), void* arg);
void  _hak_heap_bind(hak_heap_t* h, hak_heap_t** slot, int32_t tid, uint64_t mask);
size_t _hak_heap_give_slabs(hak_heap_t* h);   /* park.c: a sleeping thread's slabs to the process */
/* park.c: a sleeping thread's slabs given to the process */
void  _hak_park_bind(hak_heap_t* h, hak_heap_t** slot);
void  _hak_park_refresh(hak_heap_t* h);
size_t _hak_park_pass(bool need);
extern _Atomic(uint64_t) _hak_stat_park_heaps, _hak_stat_park_slabs;
/* refill.c */
void* _hak_malloc_generic(hak_heap_t* heap, size_t size, size_t align, uintptr_t site);
void* _hak_malloc_due(size_t size, hak_heap_t* h, hak_heap_cls_t* e, uintptr_t site);
/* free.c */
void  _hak_free_generic(void* p, const char* op);
void  _hak_free_to_full(hak_heap_t* h, hak_slab_t* s, void* p, const char* op);
void  _hak_free_remote(hak_slab_t* s, void* p, const char* op);
size_t _hak_usable_size(const void* p, const char* op);
size_t _hak_slot_usable(uint32_t kind, hak_segment_t* seg, const void* p);   /* kinds HAK_SEG_SAMPLED, HAK_SEG_GUARD */
bool  _hak_is_live_block(const void* p);

/* slab.c, for compaction (mesh.c): the owner's list moves */
void  _hak_slab_detach(hak_heap_t* h, hak_slab_t* s);
void  _hak_slab_attach(hak_heap_t* h, hak_slab_t* s);
void  _hak_heap_foreach_slab(hak_heap_t* h, size_t cls, void (*fn)(hak_slab_t*, void*), void* arg);

/* mesh.c: compaction of sparse slabs by meshing (HAKMEM_MESH) */
void  _hak_mesh_pass(hak_heap_t* h, bool forced);
bool  _hak_mesh_collect_alias(hak_heap_t* h, hak_slab_t* s);
void  _hak_mesh_page_freed(hak_segment_t* seg, size_t idx);
void  _hak_mesh_heap_exit(hak_heap_t* h);
void  _hak_mesh_fork_prepare(void);
void  _hak_mesh_fork_barrier(void);
void  _hak_mesh_fork_parent(void);
void  _hak_mesh_fork_child(void);
void  _hak_mesh_stats(uint64_t* v /* [9] */);
extern _Atomic(size_t) _hak_mesh_entries;

/* scavenge.c: the free 4 KiB pages of sparse slabs given back (HAKMEM_SCAVENGE) */
void  _hak_scavenge_pass(hak_heap_t* h, bool forced);
void  _hak_scavenge_tick(hak_heap_t* h, uint64_t now, uint64_t delay);
bool  _hak_scavenge_enabled(void);   /* scavenging runs in this process (also what the stats report shows) */
bool  _hak_scavenge_readmit(hak_slab_t* s);
void  _hak_scavenge_forget(hak_slab_t* s);
bool  _hak_scavenge_is_phantom(const hak_slab_t* s, const void* b);
bool  _hak_scavenge_verify(hak_slab_t* s);
extern _Atomic(uint64_t) _hak_stat_scav_passes, _hak_stat_scav_pages, _hak_stat_scav_readmitted;
extern _Atomic(size_t) _hak_stat_scav_dropped;

/* segment.c */
/* thp_hint: small, the bytes of segments the heap holds; large, the block size (thp.c) */
hak_segment_t* _hak_segment_alloc(size_t map_size, size_t align_off_min, hak_seg_kind_t kind, size_t thp_hint,
                                  uint32_t first_bsize /* small: the block size of the slab it is mapped for */);
void  _hak_segment_free(hak_segment_t* seg);
void  _hak_segment_unmap(hak_segment_t* seg);
/* Slab pages of a fresh small segment: all but the header's and, in secure
 * mode, the last (a guard). */
#define HAK_SMALL_SLAB_PAGES (HAK_PAGES_PER_SEG - HAK_HDR_PAGES - (HAK_SECURE ? 1 : 0))
hak_inline hak_pset_t hak_small_free_pages(void) { return hak_pset_run(HAK_HDR_PAGES, HAK_SMALL_SLAB_PAGES); }
void  _hak_segmap_set(hak_segment_t* seg, bool on);
void  _hak_segment_cache_trim(size_t keep);
void  _hak_segment_cache_decommit(uint64_t delay_ms, uint64_t now_ms);
size_t _hak_segment_cache_yield(size_t n);

/* pool.c: the free pages of all small segments, shared by every heap */
/* where a slab's pages may come from: resident free pages of the heap's own
 * segments, of any segment; any free run; a new segment */
typedef enum { PAGES_OWN, PAGES_RESIDENT, PAGES_ANY, PAGES_NEW } pages_from_t;
hak_segment_t* _hak_pool_take(hak_heap_t* h, size_t cls, pages_from_t from, size_t* idx, bool* zero);
bool  _hak_pool_give(hak_heap_t* h, hak_segment_t* seg, size_t idx, unsigned npages);
size_t _hak_pool_find_run(const hak_pset_t* bits, unsigned n, bool top);   /* where a run of n pages of bits goes */
void  _hak_pool_abandon(hak_heap_t* h);
hak_segment_t* _hak_pool_adopt(hak_heap_t* h, size_t keep, hak_pset_t* mask);
hak_slab_t* _hak_pool_adopt_slab(hak_heap_t* h, size_t cls);   /* one abandoned slab of cls with room */
void  _hak_pool_abandoned_tick(bool force);
size_t _hak_pool_give_taken(hak_heap_t* h, unsigned (*take)(hak_heap_t*, hak_slab_t*));
size_t _hak_heaps_idle_tick(uint64_t now, uint64_t delay);
extern _Atomic(uint64_t) _hak_stat_idle_slabs, _hak_stat_idle_pages, _hak_stat_pool_surplus;
void  _hak_pool_tick(uint64_t now, uint64_t delay, bool force);
void  _hak_pool_yield(size_t bytes);
extern _Atomic(uint64_t) _hak_stat_pool_yielded;
void  _hak_pool_thp_demote(hak_segment_t* seg, unsigned lo, unsigned n);
void  _hak_pool_stats(size_t* segs, size_t* free_pages, size_t* resident);
void  _hak_pool_foreach_slab(void (*fn)(hak_slab_t*, void*), void* arg);   /* heap lock, then pool lock */
void  _hak_pool_fork_prepare(void);
void  _hak_pool_fork_parent(void);
void  _hak_pool_fork_child(void);
extern _Atomic(uint64_t) _hak_pool_gives;
extern _Atomic(size_t) _hak_pool_segs;
extern _Atomic(uint64_t) _hak_stat_seg_abandon_total, _hak_stat_seg_adopt_total, _hak_stat_seg_emptied_total;
extern _Atomic(size_t) _hak_abandoned_pages;
extern _Atomic(int) _hak_abandoned_hint;   /* a remote free reached an abandoned slab */
void  _hak_segments_prewarm(size_t bytes);
void  _hak_segments_fork_prepare(void);
void  _hak_segments_fork_parent(void);
void  _hak_segments_fork_child(void);
extern _Atomic(size_t) _hak_seg_count, _hak_seg_small, _hak_seg_cached, _hak_seg_abandoned;

/* prof.c: sampled heap profiling (HAKMEM_PROF).  Its samples are the
 * allocations at which malloc's countdown runs out (sample.c); a sampled
 * class allocation is served in a page slot (slots.c) or, above a page, as
 * a large block (seg->prof): either's free reports it.  The fast paths keep
 * no other trace of it. */
extern _Atomic(int) _hak_prof_on;   /* 0 off, 1 sampling */
bool  _hak_prof_busy(void);         /* this thread is inside the profiler: its mallocs are not sampled */
void* _hak_prof_sample_class(size_t cls, size_t size, bool any_class, uintptr_t site);
void  _hak_prof_sample_large(hak_segment_t* seg, void* p, size_t size, uintptr_t site);
/* slots.c: page slots for sampled blocks of up to a page */
void* _hak_slots_alloc(size_t size);
size_t _hak_slots_usable(hak_segment_t* seg, const void* p);
void  _hak_slots_free(hak_segment_t* seg, void* p, const char* op);
/* a page-slot pool's memory (slots.c, guard.c), for the figures */
typedef struct {
  size_t live, live_pages, bytes;   /* live blocks, their pages, their usable bytes */
  size_t pages;                /* block pages ever touched (resident: the live ones and the freed) */
  size_t segments, header;     /* its segments, and the bytes of their headers */
} hak_pslot_figures_t;
void  _hak_slots_figures(hak_pslot_figures_t* f);
void  _hak_slots_release(void);   /* the release clock: slots free since the last pass give their pages back */
void  _hak_slots_fork_prepare(void);
void  _hak_slots_fork_parent(void);
void  _hak_slots_fork_child(void);
/* guard.c: guarded allocations (HAKMEM_GUARD) */
void* _hak_guard_alloc(size_t size, uintptr_t site);
size_t _hak_guard_usable(hak_segment_t* seg, const void* p);
void  _hak_guard_free(hak_segment_t* seg, void* p, const char* op, uintptr_t site);
bool  _hak_guard_busy(void);
void  _hak_guard_init(void);
void  _hak_guard_figures(hak_pslot_figures_t* f, uint64_t* guarded, uint64_t* capped, size_t* retired, uint64_t* errors);
void  _hak_guard_fork_prepare(void);
void  _hak_guard_fork_parent(void);
void  _hak_guard_fork_child(void);
/* sample.c: the sampling point on malloc's paths */
#define HAK_SAMPLE_PROF  1u
#define HAK_SAMPLE_GUARD 2u
unsigned _hak_sample_due(hak_heap_t* h, size_t size);
void  _hak_sample_large(hak_segment_t* seg, void* p, size_t size, uintptr_t site);
void  _hak_sample_soon(void);
void  _hak_sample_defer_guard(hak_heap_t* h);   /* a guard due on a block that cannot be one: to the next allocation */
void  _hak_prof_free(void* p);
void  _hak_prof_moved(void* p, void* q, size_t size);
void  _hak_prof_init(void);
void  _hak_prof_at_exit(void);
void  _hak_prof_fork_prepare(void);
void  _hak_prof_fork_parent(void);
void  _hak_prof_fork_child(void);
/* the profiler's own controls, for the numeric query API */
int   _hak_prof_dump(const char* path);   /* NULL: the next PREFIX.PID.N.heap; 0 or -1 (errno) */
void  _hak_prof_set_active(bool on);
bool  _hak_prof_active(void);
size_t _hak_prof_rate(void);
void  _hak_prof_set_rate(size_t bytes);
/* unwind.c: the stack of an allocation made at `site` (return addresses,
 * innermost first; prof.c keeps them from the site on).  The unwinder is
 * loaded at the first stack needed (_hak_unwind_load, with no lock of
 * hakmem's held); until then a stack is its first frame. */
void  _hak_unwind_prepare(void);
void  _hak_unwind_load(uintptr_t site);
#define HAK_UNWIND_MAX 64   /* frames _hak_unwind keeps at most */
int   _hak_unwind(uintptr_t* out, int depth, uintptr_t from);
bool  _hak_symbolize(uintptr_t pc, char* name, size_t n, uintptr_t* off, const char** file);
const char* _hak_unwind_method(void);
void  _hak_unwind_fork_child(void);

/* large.c */
void* _hak_large_alloc(size_t size, size_t align, bool zero, uintptr_t site);
void  _hak_large_free(hak_segment_t* seg, void* p, const char* op);
void* _hak_large_realloc(hak_segment_t* seg, void* p, size_t size);
bool  _hak_huge_aligned_lookup(const void* p, hak_segment_t** seg_out);
bool  _hak_large_recently_freed(const void* p);
void  _hak_large_fork_prepare(void);
void  _hak_large_fork_parent(void);
void  _hak_large_fork_child(void);


/* site.c */
#define HAK_SITES 1024
#define HAK_SITE_NONE HAK_SITES
uint32_t _hak_site_index(uintptr_t ra);
int  _hak_site_before_alloc(uint32_t idx, uint64_t* t0, bool* long_lived, size_t* final_size);
void _hak_site_after_alloc(uint32_t idx, hak_segment_t* seg, size_t size, uint64_t t0, size_t resident_before);
int  _hak_site_on_free(hak_segment_t* seg, uint64_t* t0);
void _hak_site_after_free(uint32_t idx, int strategy, uint64_t t0, size_t resident);
double _hak_site_touched(const hak_segment_t* seg);
bool _hak_site_ring_enter(hak_segment_t* seg);
void _hak_site_ring_leave(hak_segment_t* seg);
size_t _hak_sites_used(void);
size_t _hak_sites_report(char* buf, size_t cap, int top);
int  _hak_site_strategy_of(uintptr_t ra);
void _hak_sites_fork_child(void);
void _hak_unmap_large(hak_segment_t* seg);

/* bigcache.c */
size_t _hak_bigcache_map_size(size_t need);
hak_segment_t* _hak_bigcache_take(size_t need);
hak_segment_t* _hak_bigcache_take_cover(size_t need, size_t extent);
void  _hak_bigcache_unpin(hak_segment_t* seg, size_t extent);
bool  _hak_bigcache_put(hak_segment_t* seg);
void  _hak_bigcache_expire(uint64_t max_age_ms);
void  _hak_bigcache_yield(size_t bytes);
extern _Atomic(uint64_t) _hak_stat_bigcache_yielded;
void  _hak_bigcache_stats(uint64_t* hits, uint64_t* misses, uint64_t* evictions, size_t* bytes, size_t* mapped);
void  _hak_bigcache_fork_prepare(void);
void  _hak_bigcache_fork_parent(void);
void  _hak_bigcache_fork_child(void);

/* release.c */
extern _Atomic(size_t) _hak_retained_bytes;
/* paced passes of mesh.c and scavenge.c: when the next automatic one is due */
typedef struct {
  _Atomic(uint64_t) next_ms;   /* not before (unless grown) */
  _Atomic(size_t) segs;        /* small segments at the last pass */
  _Atomic(uint64_t) gap_ms;    /* 0: the shortest gap */
} hak_pace_t;
bool  _hak_pace_due(hak_pace_t* p);
void  _hak_pace_found(hak_pace_t* p, bool found);
#define HAK_PACE_AUTO_MS 100     /* paced passes: the shortest gap between two ... */
#define HAK_PACE_IDLE_MS 10000   /* ... and the longest, reached while passes find nothing */
/* The gap after a paced pass: `floor` after one that found work, else twice
 * the last one (at least `floor`), never above HAK_PACE_IDLE_MS. */
hak_inline uint64_t hak_pace_gap(uint64_t gap, uint64_t floor, bool found) {
  uint64_t g = found ? floor : 2 * (gap > floor ? gap : floor);
  return g < HAK_PACE_IDLE_MS ? g : HAK_PACE_IDLE_MS;
}
bool  _hak_decommit(void* p, size_t size);
bool  _hak_retained_over_target(void);
void  _hak_release_large(hak_segment_t* seg);
hak_segment_t* _hak_batch_take(size_t need);
/* limit.c: the memory limit (0: none); call before committing new memory */
extern size_t _hak_limit;
extern _Atomic(uint64_t) _hak_limit_epoch;   /* releases so far: each heap then gives back its own empty pages */
void _hak_limit_init(void);
void _hak_limit_grow_slow(size_t bytes);
uint64_t _hak_limit_releases(void);
void _hak_limit_fork_prepare(void);
void _hak_limit_fork_parent(void);
void _hak_limit_fork_child(void);
size_t _hak_os_mapped(void);
hak_inline void _hak_limit_grow(size_t bytes) {
  if (hak_unlikely(_hak_limit != 0) && _hak_os_mapped() + bytes > _hak_limit / 8 * 7) _hak_limit_grow_slow(bytes);
}
void  _hak_batch_flush(void);
void  _hak_segment_decommit_free_pages(hak_segment_t* seg);
size_t _hak_segment_decommit_top(hak_segment_t* seg, const hak_pset_t* pages, size_t n);
void  _hak_segment_age(hak_segment_t* seg, uint64_t now, uint64_t delay);
void  _hak_pages_freed(hak_segment_t* seg, size_t lo, size_t n);
void  _hak_pages_reused(hak_segment_t* seg, size_t lo, size_t n);
/* background.c: the release clock (a heap's tick on its slow paths; the
 * thread of an idle program, HAKMEM_BACKGROUND) */
void  _hak_heap_release_tick(hak_heap_t* h);
void  _hak_release_pass(uint64_t now);
void  _hak_background_wake(void);
void  _hak_background_start(void);
bool  _hak_background_running(void);
void  _hak_background_fork_child(void);
void  _hak_release_stats(uint64_t* calls, uint64_t* bytes, uint64_t* unmapped, size_t* parked, size_t* parked_mapped);
void  _hak_release_fork_prepare(void);
void  _hak_release_fork_parent(void);
void  _hak_release_fork_child(void);

/* os.c: the only place that calls mmap & co. */
void* _hak_os_map(size_t size, void* hint);
extern __thread bool _hak_os_reserve;   /* next mappings count against overcommit */
void* _hak_os_map_aligned(size_t size, size_t align, void* hint);
bool  _hak_os_unmap(void* p, size_t size);
bool  _hak_os_advise(void* p, size_t size, int advice);
uint64_t _hak_clock_ms(void);      /* the coarse monotonic clock, ms: the release policy's delays */
uint64_t _hak_os_clock_ns(void);   /* the monotonic clock, ns: measured costs, seeds */
size_t _hak_os_page_size(void);
bool _hak_os_clock_is_vdso(void);   /* the clocks read the vDSO's entry, not libc's wrapper (tests) */
/* thp.c */
void _hak_thp_fresh(hak_segment_t* seg, size_t map_size, hak_seg_kind_t kind, size_t off, size_t hint, uint32_t first_bsize);
bool _hak_thp_exact(size_t end);
void _hak_thp_held(hak_segment_t* seg, size_t end);
bool _hak_thp_wants_sample(const hak_segment_t* seg);
void _hak_thp_sample(double touched);
#define HAK_THP_SECOND_OPEN 4   /* seg->thp: the second half's advice waits for its first slab */
#define HAK_THP_FIRST_OPEN 8    /* seg->thp: the first half's advice waits for a slab of blocks of at most a page */
void _hak_thp_slab(hak_segment_t* seg, size_t idx, unsigned n, uint32_t bsize);
void _hak_thp_demote(hak_segment_t* seg, unsigned lo, unsigned n);
void* _hak_os_remap(void* old, size_t old_size, size_t new_size, int flags, void* new_addr);
bool  _hak_os_protect(void* p, size_t size, int prot);
bool  _hak_os_resident(void* p, size_t size, unsigned char* vec);
size_t _hak_os_rss_bytes(void);
/* os.c: files (raw syscalls, no stdio, no allocation: async-signal-safe) */
typedef struct { uint64_t dev, ino; } hak_file_id_t;   /* which file a descriptor refers to */
hak_inline bool hak_file_id_eq(hak_file_id_t a, hak_file_id_t b) { return a.dev == b.dev && a.ino == b.ino; }
int   _hak_os_open_read(const char* path);
int   _hak_os_open_write(const char* path, int flags);
ssize_t _hak_os_read(int fd, void* buf, size_t n);
ssize_t _hak_os_pread(int fd, void* buf, size_t n, uint64_t off);
struct sigaction;
void  _hak_signal_pass(const struct sigaction* old, int sig, void* si, void* uc);   /* si: a siginfo_t* */
bool  _hak_os_write_all(int fd, const void* buf, size_t n);
bool  _hak_os_close(int fd);
int   _hak_os_dup_cloexec(int fd, int min);
bool  _hak_os_file_id(int fd, bool cloexec, hak_file_id_t* id);
bool  _hak_os_read_small(const char* path, char* buf, size_t n);
int32_t _hak_os_gettid(void);
bool  _hak_os_copy_data(int to, int from, const void* src, uint64_t off, size_t len);
int   _hak_os_memfd(void);
bool  _hak_os_map_file_at(void* addr, size_t size, int fd, uint64_t off);
void* _hak_os_map_file(size_t size, int fd, uint64_t off);
bool  _hak_os_map_anon_at(void* addr, size_t size);
bool  _hak_os_map_none_at(void* addr, size_t size);   /* fresh inaccessible pages in place (the old ones given back) */
bool  _hak_os_punch(int fd, uint64_t off, size_t size);
size_t _hak_os_peak_rss_bytes(void);


/* ctl.c: hakmem_ctl's snapshot lock (a leaf: taken last before fork) */
void _hak_ctl_fork_prepare(void);
void _hak_ctl_fork_parent(void);
void _hak_ctl_fork_child(void);

/* stats.c */
void _hak_stats_init(void);      /* after the options: keeps the report's descriptor */
void _hak_stats_at_exit(void);
extern _Atomic(uint64_t) _hak_stat_nmalloc_dead[HAK_NCLASSES], _hak_stat_refills_dead;
extern _Atomic(size_t) _hak_stat_slab_pages;
extern _Atomic(uint64_t) _hak_stat_borrowed;   /* mallocs served by a larger class's sparse slab (refill.c) */
extern _Atomic(uint64_t) _hak_stat_large_allocs, _hak_stat_large_frees;
extern _Atomic(uint64_t) _hak_stat_large_bytes, _hak_stat_large_peak_bytes, _hak_stat_large_usable;
/* A report built in a caller's buffer, without allocating (stats.c, ctl.c). */
typedef struct { char* buf; size_t len, cap; } hak_sbuf_t;
void _hak_sb_add(hak_sbuf_t* sb, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* Every figure of the ctl names and of malloc_info at one moment (stats.c,
 * _hak_figures).  Computed on request: a walk of every slab under the heap
 * and pool locks, plus the counters the tiers keep; nothing is counted on
 * the fast paths for it.  Bytes unless named otherwise. */
typedef struct {
  size_t cls_size;                   /* block size */
  size_t live_blocks;                /* blocks handed out and not freed (a remote free counts at once) */
  size_t free_blocks;                /* room left in the class's slabs (carved or not) */
  size_t slabs, pages;               /* slabs of the class and their 4 KiB pages */
  uint64_t nmalloc;                  /* blocks handed out since start */
} hak_class_figures_t;
typedef struct {
  size_t allocated;                  /* live blocks: small at their class size, large at their usable size */
  size_t active;                     /* pages of slabs in use (less the 4 KiB pages scavenged) and of live large blocks */
  size_t metadata;                   /* the rest of what is mapped: segment and block headers, heaps, tables */
  size_t resident;                   /* an upper estimate: active, headers, and free pages not yet given back */
  size_t mapped;                     /* everything hakmem holds from the OS */
  size_t retained;                   /* mapped, held, not in use: free pages, cached segments and blocks */
  size_t retained_resident;          /* ... of it not given back to the OS yet */
  size_t peak_mapped, rss, peak_rss;
  size_t small_allocated, small_active, small_free_bytes, small_free_blocks;
  size_t segments, cached_segments, pool_free_pages;
  size_t large_live, large_allocated, large_mapped;   /* live large blocks: count, usable bytes, their mappings */
  uint64_t large_nmalloc, large_nfree;
  uint64_t idle_slabs, pool_surplus_pages;   /* slabs taken from idle heaps (heap.c), free pages aged by count (pool.c) */
  uint64_t pool_yielded_pages, bigcache_yielded;   /* one reserve: free pages and cached bytes decommitted for the other tier's new pages */
  uint64_t park_slabs;                       /* slabs sleeping threads gave (park.c) */
  hak_pslot_figures_t sampled, guard;       /* the page-slot pools: sampled blocks (slots.c), guarded (guard.c) */
  uint64_t guarded, guard_capped, guard_errors;   /* guarded allocations made, left unguarded by HAKMEM_GUARD_PER_SEC, errors reported (guard.c) */
  size_t guard_retired;                      /* slots retired after an error */
  size_t bigcache_resident, bigcache_mapped, batch_mapped, quarantine_mapped;
  hak_class_figures_t cls[HAK_NCLASSES];
  hak_os_stats_t os;
} hak_figures_t;
void _hak_figures(hak_figures_t* f);

hak_inline size_t hak_align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

/* A large block's usable size: its request rounded up to the OS page (the
 * block ends at a page: in the secure build, at its guard page). */
hak_inline size_t hak_large_usable(const hak_segment_t* seg) {
  size_t n = seg->large.size ? seg->large.size : 1;   /* malloc(0)-like blocks still have room */
  return hak_align_up(seg->large.off + n, HAK_OS_PAGE) - seg->large.off;
}

/* What a large block's mapping holds resident: its touched extent (the
 * largest size it served, after the header), not its whole mapping, which has
 * headroom that was never touched. */
hak_inline size_t hak_large_resident(const hak_segment_t* seg) {
  size_t r = hak_align_up(HAK_LARGE_HDR + seg->large.peak, HAK_OS_PAGE);
  return r < seg->map_size ? r : seg->map_size;
}

/* Statistics counters written by their owner thread and read by others (the
 * report, which tolerates a stale value).  A relaxed atomic store costs a
 * load-add-store where a plain `addq $1, mem` suffices (measured: 2 more
 * instructions per malloc), so the atomic form is kept for the TSan build,
 * which checks everything else for races. */
#ifdef HAK_TSAN
hak_inline void hak_counter_inc(uint64_t* c) { __atomic_store_n(c, *c + 1, __ATOMIC_RELAXED); }
#else
hak_inline void hak_counter_inc(uint64_t* c) { ++*c; }
#endif
hak_inline void hak_counter_set(uint64_t* c, uint64_t v) { __atomic_store_n(c, v, __ATOMIC_RELAXED); }


/* secure.c, quarantine.c, zeroblock.c: the secure build's declarations and
 * per-operation checks (no-ops in the default build) */
#include "secure.h"

#endif /* HAK_INTERNAL_H */
