/* The secure build (libhakmem-secure.so, -DHAK_SECURE=1): its per-operation
 * checks, inline, and the declarations of its rare paths (secure.c,
 * quarantine.c, zeroblock.c), with the default build's no-op stubs of those
 * under the same #if.  The default build calls the checks only under
 * `if (HAK_SECURE)`, so they compile to nothing there.  Included at the
 * end of internal.h, whose types it uses; the switch (HAK_SECURE) and the
 * encoded free-list links stay in internal.h, the one inline pop
 * (hak_slab_pop) is slab.h's. */
#ifndef HAK_SECURE_H
#define HAK_SECURE_H
#include "internal.h"

/* a segment of zero-size blocks (secure build: malloc(0), zeroblock.c) */
#define HAK_SEG_ZERO 3
/* _hak_secure_state: what a small block's trailer says */
#define HAK_SEC_LIVE    0     /* allocated; *req = the requested size */
#define HAK_SEC_FREE    1     /* on a free list (or freshly carved) */
#define HAK_SEC_REMOTE  2     /* freed by another thread */
#define HAK_SEC_BROKEN  3     /* overwritten */
/* trailer values of a block that is not live */
#define HAK_SEC_T_FREE    0   /* on a free list (or freshly carved) */
#define HAK_SEC_T_REMOTE  1   /* freed by another thread: on a remote list, or on the owner's list since it took that */
#define HAK_SEC_T_QUAR    2   /* freed, held in a thread's quarantine (quarantine.c) */
/* A block from C++ operator new[] has the block size added to its live
 * trailer (secure.c, _hak_secure_new_array): it then decodes to a request
 * in [bsize, 2 bsize - 8], which no plain block's does.  delete[] takes it
 * off; a free or delete of a block that still carries it is a mismatch
 * (its own check fails); the check of the block below accepts both ranges
 * at no cost (hak_sec_trailer_valid: one bound for the other). */

/* ---------------------------------------------------------------- secure mode, per operation
 * A small block of the secure build (the smallest class is 32 bytes there):
 *   free:  [0,8) encoded link, [8,24) zero, last 8 bytes (the trailer) zero
 *          (1 while on a remote-free list, not yet collected);
 *   live:  [0,req) the caller's, then the canary: up to 8 bytes, as many as
 *          fit before the trailer (none when the request ends at it: then an
 *          overflow of one byte changes the trailer), and
 *          trailer = cookie + req + 8 (cookie: hak_sec_cookie, address ^ secret; req <=
 *          bsize - 8 = bsize - HAK_TRAILER).
 * The trailer is the block's state: only the allocator writes it (it lies
 * beyond the request), so a free whose trailer does not decode to a request
 * size is a double free (trailer 0) or an overflow, exactly, on every free;
 * a forged trailer passes with odds of bsize / 2^64.  The checks are a few
 * loads and compares inline, on the lines the operation writes anyway (the
 * block's first line and its end); every failure goes out of line
 * (secure.c), which classifies and reports.  Zero is the free state and the
 * fill (zero-on-free, as hardened allocators do): a stale pointer read from
 * a freed block is NULL, and the malloc check is three ORed loads. */
#define HAK_SEC_LIVE_BIAS 8
/* the trailer's key mixes in the block's address (unlike the default
 * build's cookie), so a live trailer copied to another block does not pass */
hak_inline uintptr_t hak_sec_cookie(const void* b) { return (uintptr_t)b ^ _hak_cookie_key; }
/* the canary: a sign-extended 32-bit immediate (no 64-bit constant to load);
 * a linear overflow meets its 0xCA bytes first */
#define HAK_SEC_CANARY64 0xFFFFFFFFCACACACAull
/* the canary's bytes between a request and the trailer, `room` of them (at
 * most 8 count), as a mask of the 8 bytes loaded at the request's end */
hak_inline uint64_t hak_sec_canary_mask(size_t room) { return room >= 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * room)) - 1; }
hak_inline uint64_t hak_load64(const void* p) { uint64_t v; memcpy(&v, p, 8); return v; }
hak_inline void hak_store64(void* p, uint64_t v) { memcpy(p, &v, 8); }

/* The rare paths (secure.c, quarantine.c, zeroblock.c), and the checks of
 * a block entering and leaving the quarantine; no-ops in the default build. */
void* _hak_secure_pop_slow(hak_slab_t* s, hak_block_t* b, size_t req);   /* HAK_SECURE only */
#if HAK_SECURE
void _hak_secure_free(hak_slab_t* s, void* b, const char* op);
void _hak_secure_free_remote(hak_slab_t* s, void* b, const char* op);
int  _hak_secure_state(hak_slab_t* s, const void* b, size_t* req);
void _hak_secure_live(const hak_slab_t* s, size_t* live, size_t* bytes);
void _hak_secure_carve_fill(void* b, uint32_t bsize);
void _hak_secure_shuffle(void** v, size_t n);
void _hak_secure_segment_guards(hak_segment_t* seg);
bool _hak_secure_slab_pages(hak_segment_t* seg, size_t idx, size_t npages);
void* _hak_secure_quarantine(hak_slab_t* s, void* p, size_t off, const char* op);
_Noreturn void _hak_secure_free_failed(hak_slab_t* s, void* b, uint64_t t, const char* op);
_Noreturn void _hak_secure_fill_failed(void* b, size_t at, uint32_t bsize);
void* _hak_secure_quarantine_pop(bool dying);
void _hak_secure_flush(bool dying);
void _hak_secure_init(void);
void _hak_secure_large_place(hak_segment_t* seg, size_t size, size_t align);
void _hak_secure_large_alloc(hak_segment_t* seg);
void _hak_secure_large_check(hak_segment_t* seg, const char* op);
void _hak_secure_large_fill(hak_segment_t* seg);
void _hak_secure_large_verify(hak_segment_t* seg);
void _hak_secure_large_quarantine(hak_segment_t* seg);
void _hak_secure_large_flush(void);
size_t _hak_secure_large_held(void);
hak_segment_t* _hak_secure_large_take(size_t need);
void _hak_secure_large_fork(int stage);
void _hak_secure_check_write(const void* d, size_t n, const char* op);
void _hak_secure_large_recent(void);
bool _hak_secure_large_head_ok(hak_segment_t* seg);
void _hak_secure_new_array(void* p);
void _hak_secure_delete_array(void* p, const char* op);
void* _hak_secure_memcpy(void* d, const void* s, size_t n);
void* _hak_zero_alloc(void);
bool _hak_zero_free(hak_segment_t* seg, void* p, const char* op);
int  _hak_zero_state(hak_segment_t* seg, const void* p);
uint64_t _hak_secure_rand(void);
extern uint64_t _hak_secure_fill64;
extern size_t _hak_secure_guard_min;
/* A live block of slab s (b: a carved block start) enters the quarantine:
 * claim its trailer with one atomic exchange (two threads freeing the same
 * block cannot both pass), check it, and fill what the owner could write:
 * the request and the canary (the rest of the block, but the trailer, holds
 * fill already: carving filled it, and every free refills what the owner
 * had).  The checks: the trailer decodes to a request that fits (else a
 * double free or an overflow over it), the canary after the request (an
 * overflow of even one byte), and the trailer of the block below (an
 * underflow; block 0 of a slab is never handed out, so a live block has
 * one; off: b's offset in its slab).  Any failure goes to
 * _hak_secure_free_failed, which classifies and reports.  Returns the filled length in bytes, a multiple of 8. */
typedef uint64_t hak_v2u64 __attribute__((vector_size(16), aligned(8), may_alias));
extern uint64_t (*_hak_secure_fill_diff_long)(const uint8_t* p, size_t len, uint64_t f);   /* len > 64 */
hak_inline bool hak_sec_trailer_valid(const uint8_t* b, uint32_t bsize, uint64_t t) {
  return t <= HAK_SEC_T_QUAR || t - hak_sec_cookie(b) - HAK_SEC_LIVE_BIAS <= 2 * (uint64_t)bsize - HAK_SEC_LIVE_BIAS;
}
/* Fill len bytes at p (len a multiple of 8, at least 8) with f, and the
 * bits by which those bytes differ from it (0: all fill).  Up to 64 bytes,
 * as most blocks are, a few stores or loads that may overlap, no loop. */
hak_inline void hak_sec_fill(uint8_t* p, size_t len, uint64_t f) {
  hak_v2u64 fv = { f, f };
  if (len <= 16) {
    hak_store64(p, f);
    hak_store64(p + len - 8, f);
  } else if (len <= 32) {
    *(hak_v2u64*)p = fv;
    *(hak_v2u64*)(p + len - 16) = fv;
  } else if (len <= 64) {
    *(hak_v2u64*)p = fv;
    *(hak_v2u64*)(p + 16) = fv;
    *(hak_v2u64*)(p + len - 32) = fv;
    *(hak_v2u64*)(p + len - 16) = fv;
  } else {
    memset(p, (int)(uint8_t)f, len);   /* libc's wider stores */
  }
}
hak_inline uint64_t hak_sec_fill_diff(const uint8_t* p, size_t len, uint64_t f) {
  if (len <= 16) return (hak_load64(p) ^ f) | (hak_load64(p + len - 8) ^ f);
  hak_v2u64 fv = { f, f }, acc;
  if (len <= 32) {
    acc = (*(const hak_v2u64*)p ^ fv) | (*(const hak_v2u64*)(p + len - 16) ^ fv);
  } else if (len <= 64) {
    acc = (*(const hak_v2u64*)p ^ fv) | (*(const hak_v2u64*)(p + 16) ^ fv) | (*(const hak_v2u64*)(p + len - 32) ^ fv) |
          (*(const hak_v2u64*)(p + len - 16) ^ fv);
  } else {
    return _hak_secure_fill_diff_long(p, len, f);   /* the widest vectors the CPU has (secure.c) */
  }
  return acc[0] | acc[1];
}
/* The 32 bytes after the canary, where the block has them before its
 * trailer: still fill (carving and every free left the whole block fill, and
 * malloc writes only the canary after the request), so an overflow that
 * skips the canary (p[n + 31] = x) is found there too.  Two 16-byte loads
 * on the line or two past the canary's; a block with less room has its
 * trailer within 32 bytes of the request, where such a write lands. */
#define HAK_SEC_SLACK_END (8 + 8 + 32)   /* trailer, canary, window: bytes past the request */
hak_inline uint64_t hak_sec_slack_diff(const uint8_t* w, uint64_t f) {
  hak_v2u64 fv = { f, f };
  hak_v2u64 acc = (*(const hak_v2u64*)w ^ fv) | (*(const hak_v2u64*)(w + 16) ^ fv);
  return acc[0] | acc[1];
}
hak_inline size_t hak_secure_enter(hak_slab_t* s, void* b, size_t off, const char* op) {
  uint8_t* p = (uint8_t*)b;
  uint32_t bsize = s->bsize;
  uint64_t t = __atomic_exchange_n((uint64_t*)(p + bsize - 8), (uint64_t)HAK_SEC_T_QUAR, __ATOMIC_RELAXED);
  uint64_t req = t - hak_sec_cookie(p) - HAK_SEC_LIVE_BIAS;   /* (wraps when not live) */
  if (hak_unlikely(req > bsize - HAK_SEC_LIVE_BIAS ||
                   ((hak_load64(p + req) ^ HAK_SEC_CANARY64) & hak_sec_canary_mask(bsize - 8 - req)) != 0 ||
                   off < bsize || !hak_sec_trailer_valid(p - bsize, bsize, hak_load64(p - 8)) ||
                   (req + HAK_SEC_SLACK_END <= bsize && hak_sec_slack_diff(p + req + 8, _hak_secure_fill64) != 0)))
    _hak_secure_free_failed(s, b, t, op);
  size_t len = (req + 8 + 7) & ~(size_t)7;   /* request and canary ... */
  if (len > bsize - 8) len = bsize - 8;      /* ... up to the trailer */
  hak_sec_fill(p, len, _hak_secure_fill64);
  return len;
}
/* The block this thread freed last, while it is the newest in its
 * quarantine (which never lets the newest go), else the fill word itself:
 * every malloc reads its first word, which must still be fill (a write
 * into a block just freed is reported at the program's next allocation,
 * not only when the block leaves the quarantine: a program that frees,
 * writes and then only prints is caught before its output).  Four
 * instructions on malloc's path, one store on free's (quarantine.c). */
extern __thread const uint64_t* _hak_secure_last __attribute__((tls_model("initial-exec")));
void* _hak_secure_last_failed(void);   /* reports; returns nothing (a tail call) */
hak_inline bool hak_secure_malloc_bad(void) { return *_hak_secure_last != _hak_secure_fill64; }
/* ... and leaves it: the len bytes filled must still be fill (a write
 * after free). */
hak_inline void hak_secure_leave(void* b, size_t len, uint32_t bsize) {
  if (hak_unlikely(hak_sec_fill_diff((const uint8_t*)b, len, _hak_secure_fill64) != 0))
    _hak_secure_fill_failed(b, len, bsize);
}
#else
hak_inline void _hak_secure_free(hak_slab_t* s, void* b, const char* op) { (void)s, (void)b, (void)op; }
hak_inline void _hak_secure_free_remote(hak_slab_t* s, void* b, const char* op) { (void)s, (void)b, (void)op; }
hak_inline int _hak_secure_state(hak_slab_t* s, const void* b, size_t* req) { (void)b; *req = s->bsize; return 0; }
hak_inline void _hak_secure_live(const hak_slab_t* s, size_t* live, size_t* bytes) { (void)s, (void)live, (void)bytes; }
hak_inline void _hak_secure_carve_fill(void* b, uint32_t bsize) { (void)b, (void)bsize; }
hak_inline void _hak_secure_shuffle(void** v, size_t n) { (void)v, (void)n; }
hak_inline void _hak_secure_segment_guards(hak_segment_t* seg) { (void)seg; }
hak_inline bool _hak_secure_slab_pages(hak_segment_t* seg, size_t idx, size_t npages) { (void)seg, (void)idx, (void)npages; return true; }
hak_inline void _hak_secure_flush(bool dying) { (void)dying; }
hak_inline void _hak_secure_init(void) {}
hak_inline void _hak_secure_large_place(hak_segment_t* seg, size_t size, size_t align) { (void)seg, (void)size, (void)align; }
hak_inline void _hak_secure_large_alloc(hak_segment_t* seg) { (void)seg; }
hak_inline void _hak_secure_large_check(hak_segment_t* seg, const char* op) { (void)seg, (void)op; }
hak_inline void _hak_secure_large_quarantine(hak_segment_t* seg) { (void)seg; }
hak_inline void _hak_secure_large_flush(void) {}
hak_inline size_t _hak_secure_large_held(void) { return 0; }
hak_inline hak_segment_t* _hak_secure_large_take(size_t need) { (void)need; return NULL; }
hak_inline void _hak_secure_large_fork(int stage) { (void)stage; }
hak_inline void _hak_secure_large_recent(void) {}
hak_inline void* _hak_zero_alloc(void) { return NULL; }
hak_inline bool _hak_zero_free(hak_segment_t* seg, void* p, const char* op) { (void)seg, (void)p, (void)op; return false; }
hak_inline int _hak_zero_state(hak_segment_t* seg, const void* p) { (void)seg, (void)p; return 0; }
#define _hak_secure_fill64 ((uint64_t)0)
#define _hak_secure_guard_min SIZE_MAX
hak_inline bool hak_secure_malloc_bad(void) { return false; }
hak_inline void* _hak_secure_last_failed(void) { return NULL; }
#endif

/* ---------------------------------------------------------------- malloc's and free's checks
 * (both builds compile them; the default build never calls them: each call
 * is under `if (HAK_SECURE)`) */
/* A free block's trailer, as malloc takes it: 0, or the remote mark of a
 * block another thread freed (its owner takes such blocks without touching
 * them, heap.c _hak_slab_collect); nonzero bits here mean neither. */
hak_inline uint64_t hak_sec_trailer_not_free(uint64_t t) { return t & ~(uint64_t)HAK_SEC_T_REMOTE; }
/* malloc: the block must still look freed: link into this SuperSlab, fill
 * and a free trailer (a write after free, a forged link, a block handed out
 * twice).  Any nonzero bit fails; so does the end of a list (a NULL link),
 * which _hak_secure_pop_slow then completes (one branch on the fast path,
 * and its miss is a tail call). */
hak_inline uint64_t hak_secure_pop_bad(const hak_block_t* b, uint32_t bsize, uintptr_t n) {
  const uint8_t* p = (const uint8_t*)b;
  uint64_t f = _hak_secure_fill64;
  return (hak_load64(p + 8) ^ f) | (hak_load64(p + 16) ^ f) | hak_sec_trailer_not_free(hak_load64(p + bsize - 8)) |
         ((n ^ (uintptr_t)b) >> HAK_SEG_SHIFT);
}
/* ... then its link is overwritten with fill (the new owner sees only fill:
 * no previous owner's data, no heap address) and its canary and trailer
 * are written. */
hak_inline void hak_secure_pop_mark(uint32_t bsize, hak_block_t* b, size_t req) {
  uint8_t* p = (uint8_t*)b;
  uint64_t t = hak_sec_cookie(b) + req + HAK_SEC_LIVE_BIAS;
  size_t room = bsize - 8 - req;   /* canary bytes before the trailer */
  hak_store64(p, _hak_secure_fill64);
  /* The trailer first, then the canary's 8 bytes, which reach into the
   * trailer when room < 8: those bytes are the new trailer's own, so the
   * trailer never holds anything but a free state or t.  Another thread
   * reads it meanwhile (the free of the block above checks it: an
   * underflow); with the canary stored first, it could read canary bytes
   * there and report an underflow that never happened (test-threads stress
   * under the secure build: 1 run in about 10 on a loaded machine). */
  hak_store64(p + bsize - 8, t);
  hak_store64(p + req, room >= 8 ? HAK_SEC_CANARY64 : (HAK_SEC_CANARY64 & hak_sec_canary_mask(room)) | (t << (8 * room)));
}

/* free of a block the quarantine let go (quarantine.c checked the block
 * when it entered, filled it, and checks the fill when it leaves): its
 * trailer must still say "quarantined".  False sends the free to the
 * generic path, which reports. */
hak_inline bool hak_secure_free_ok(const hak_slab_t* s, const hak_block_t* b) {
  return hak_load64((const uint8_t*)b + s->bsize - 8) == HAK_SEC_T_QUAR;
}
/* free: mark the trailer free (the fill is already there). */
hak_inline void hak_secure_free_fill(const hak_slab_t* s, hak_block_t* b) {
  hak_store64((uint8_t*)b + s->bsize - 8, HAK_SEC_T_FREE);
}

#endif /* HAK_SECURE_H */
