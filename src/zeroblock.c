/* Zero-size blocks (secure build): malloc(0) returns a unique address whose
 * bytes cannot be read or written.  The addresses are 16-byte slots of a
 * 4 MiB segment (kind HAK_SEG_ZERO, in the segment map like any other) whose
 * pages after the header are PROT_NONE; a bitmap in the header says which
 * slots are live, so free() checks them (double free, never allocated).
 * Slots are handed out in address order, round the segment: a freed one is
 * reused only after every other slot was (a long quarantine for free).
 * malloc(0) is rare: one lock. */
#include "internal.h"
#include <sys/mman.h>

#if HAK_SECURE
#define ZERO_FIRST  ((size_t)128 << 10)                    /* slots start after the header and the bitmap */
#define ZERO_SLOTS  ((HAK_SEG_SIZE - ZERO_FIRST) / 16)
#define ZERO_BITMAP ((sizeof(hak_segment_t) + 63) & ~(size_t)63)   /* offset of the bitmap in the header */
_Static_assert(ZERO_BITMAP + ZERO_SLOTS / 8 <= ZERO_FIRST, "the bitmap fits the header");

static pthread_mutex_t zero_lock = PTHREAD_MUTEX_INITIALIZER;
static hak_segment_t* zero_seg;   /* the segment slots come from */
static size_t zero_next;          /* the next slot to try */
static size_t zero_live;          /* live slots of zero_seg */

static uint64_t* zero_bits(hak_segment_t* seg) { return (uint64_t*)((uint8_t*)seg + ZERO_BITMAP); }

void* _hak_zero_alloc(void) {
  hak_lock(&zero_lock);
  if (zero_seg == NULL || zero_live == ZERO_SLOTS) {
    hak_segment_t* seg = _hak_segment_alloc(HAK_SEG_SIZE, 0, (hak_seg_kind_t)HAK_SEG_ZERO, 0, 0);
    if (seg == NULL || !_hak_os_protect((uint8_t*)seg + ZERO_FIRST, HAK_SEG_SIZE - ZERO_FIRST, PROT_NONE)) {
      hak_unlock(&zero_lock);
      return NULL;   /* (a segment that could not be protected stays unused) */
    }
    zero_seg = seg;   /* a full segment is kept: its slots are live */
    zero_next = 0;
    zero_live = 0;
  }
  uint64_t* bits = zero_bits(zero_seg);
  while (bits[zero_next / 64] & ((uint64_t)1 << (zero_next % 64))) zero_next = (zero_next + 1) % ZERO_SLOTS;
  size_t i = zero_next;
  bits[i / 64] |= (uint64_t)1 << (i % 64);
  zero_next = (i + 1) % ZERO_SLOTS;
  zero_live++;
  void* p = (uint8_t*)zero_seg + ZERO_FIRST + i * 16;
  hak_unlock(&zero_lock);
  return p;
}

/* 1: a live slot, 0: a freed (or never used) slot, -1: not a slot start. */
int _hak_zero_state(hak_segment_t* seg, const void* p) {
  size_t off = (size_t)((const uint8_t*)p - (const uint8_t*)seg);
  if (off < ZERO_FIRST || (off & 15) != 0) return -1;
  size_t i = (off - ZERO_FIRST) / 16;
  return (int)((__atomic_load_n(&zero_bits(seg)[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1);
}

/* free() of an address in a zero segment: reported unless a live slot. */
bool _hak_zero_free(hak_segment_t* seg, void* p, const char* op) {
  hak_lock(&zero_lock);
  int st = _hak_zero_state(seg, p);
  if (st == 1) {
    size_t i = ((size_t)((uint8_t*)p - (uint8_t*)seg) - ZERO_FIRST) / 16;
    zero_bits(seg)[i / 64] &= ~((uint64_t)1 << (i % 64));
    if (seg == zero_seg) zero_live--;
  }
  hak_unlock(&zero_lock);
  if (st == 0) _hak_fatal("hakmem: double free of %p (zero-size block) in %s()\n", p, op);
  if (st < 0) _hak_invalid_pointer(op, p, "not the start of a block");
  return true;
}
#endif /* HAK_SECURE */
