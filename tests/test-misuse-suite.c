/* Misuse scenarios for hakmem's default build (tests/cases/rel_misuse.sh).
 *
 *   test-misuse-suite SCENARIO   run one scenario (names: `test-misuse-suite list`)
 *
 * Linked with build/libhakmem.a (standard names: hakmem is malloc).
 * Before the mistake, a scenario prints the address involved as "addr=0x..."
 * on stdout, so the test can check that hakmem's one-line report names it.
 * Scenarios of misuse hakmem does not detect then run an "aftermath":
 * 20000 random malloc/free of mixed sizes with a pattern in every block, and
 * a check of sentinel blocks allocated before the mistake; they print
 * "consistent=1" and exit 0 when the allocator came through intact.
 * Exit status: 0 done, 2 usage, 3 a precondition failed (e.g. a block was not
 * reused where the scenario needs it), 4 the aftermath found damage. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "misuse_util.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}
static void* xmalloc(size_t n) {
  void* p = malloc(n);
  if (p == NULL) {
    note("precondition: malloc(%zu) failed\n", n);
    exit(3);
  }
  return p;
}
static void precondition(int ok, const char* what) {
  if (!ok) {
    note("precondition failed: %s\n", what);
    exit(3);
  }
}

/* ---------------------------------------------------------------- aftermath */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}
static uint8_t pat(uintptr_t tag, size_t i) { return (uint8_t)(tag * 131 + i * 7 + (i >> 9)); }
static void fill(void* p, size_t n, uintptr_t tag) {
  for (size_t i = 0; i < n; i++) ((uint8_t*)p)[i] = pat(tag, i);
}
static int intact(const void* p, size_t n, uintptr_t tag) {
  for (size_t i = 0; i < n; i++)
    if (((const uint8_t*)p)[i] != pat(tag, i)) return 0;
  return 1;
}

#define NSENT 64
static struct { void* p; size_t n; } sent[NSENT];
static const size_t sent_sizes[] = {48, 200, 640, 3000, 9000, 50000, 300000, 2 * MiB};

/* Blocks of other size classes than the ones the scenarios abuse. */
static void sentinels_make(void) {
  for (int i = 0; i < NSENT; i++) {
    sent[i].n = sent_sizes[i % 8];
    sent[i].p = xmalloc(sent[i].n);
    fill(sent[i].p, sent[i].n, (uintptr_t)i + 1000);
  }
}

/* After an undetected mistake: is the allocator still consistent? */
static void aftermath(void) {
  enum { N = 256 };
  static struct { uint8_t* p; size_t n; } s[N];
  for (int it = 0; it < 20000; it++) {
    int k = (int)(rnd() % N);
    if (s[k].p) {
      if (!intact(s[k].p, s[k].n, (uintptr_t)k)) {
        note("damage: block %p (%zu bytes) changed during the aftermath\n", (void*)s[k].p, s[k].n);
        exit(4);
      }
      free(s[k].p);
      s[k].p = NULL;
    } else {
      uint64_t r = rnd();
      size_t n = (r & 3) == 0 ? (size_t)(r >> 8) % 70000 : (size_t)(r >> 8) % 600;
      if ((r & 1023) == 1) n = 200 * KiB + (size_t)(r >> 20) % (3 * MiB);
      s[k].p = malloc(n);
      if (s[k].p == NULL) {
        note("damage: malloc(%zu) failed during the aftermath\n", n);
        exit(4);
      }
      s[k].n = n;
      fill(s[k].p, n, (uintptr_t)k);
    }
  }
  for (int k = 0; k < N; k++) {
    if (s[k].p && !intact(s[k].p, s[k].n, (uintptr_t)k)) {
      note("damage: block %p changed\n", (void*)s[k].p);
      exit(4);
    }
    free(s[k].p);
    s[k].p = NULL;
  }
  for (int i = 0; i < NSENT; i++) {
    if (sent[i].p == NULL) continue;
    if (!intact(sent[i].p, sent[i].n, (uintptr_t)i + 1000)) {
      note("damage: sentinel %p (%zu bytes) changed\n", sent[i].p, sent[i].n);
      exit(4);
    }
    free(sent[i].p);
  }
  malloc_trim(0);
  note("consistent=1\n");
}

/* ---------------------------------------------------------------- double free */
static void double_free(size_t n) {
  char* p = xmalloc(n);
  memset(p, 1, n);
  free(p);
  announce(p);
  free(opaque(p));
}

/* free(p), then unrelated traffic (other sizes, and large blocks too big to
 * reuse p's mapping), then free(p) again. */
static void double_free_delayed(size_t n) {
  char* p = xmalloc(n);
  free(p);
  void* keep[600];
  for (int i = 0; i < 600; i++) {
    size_t m = (size_t)(i % 7 + 1) * 100;
    if (m >= n / 2 && m <= n * 2) m = n * 3 + 16;   /* never p's class */
    keep[i] = xmalloc(m);
  }
  for (int i = 0; i < 600; i += 2) free(keep[i]);
  for (int i = 0; i < 4; i++) {   /* large traffic, bigger than p's mapping */
    void* big = xmalloc(16 * MiB + (size_t)i * MiB);
    free(big);
  }
  for (int i = 1; i < 600; i += 2) free(keep[i]);
  announce(p);
  free(opaque(p));
}

/* free(a), free(b), free(a): a is no longer at the head of the free list. */
static void double_free_interleaved(size_t n) {
  char* a = xmalloc(n);
  char* b = xmalloc(n);
  free(a);
  free(b);
  announce(a);
  free(opaque(a));
}

/* Thread A allocates and frees p and stays alive; thread B frees p again. */
static pthread_barrier_t bar;
static void* shared;
static size_t shared_n;
static void* thread_a(void* arg) {
  (void)arg;
  shared = xmalloc(shared_n);
  free(shared);
  pthread_barrier_wait(&bar);   /* p is freed */
  pthread_barrier_wait(&bar);   /* (never reached when B aborts) */
  return NULL;
}
static void* thread_b(void* arg) {
  (void)arg;
  pthread_barrier_wait(&bar);
  announce(shared);
  free(opaque(shared));
  pthread_barrier_wait(&bar);
  return NULL;
}
static void double_free_thread(size_t n) {
  shared_n = n;
  pthread_barrier_init(&bar, NULL, 2);
  pthread_t a, b;
  pthread_create(&a, NULL, thread_a, NULL);
  pthread_create(&b, NULL, thread_b, NULL);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  note("not detected\n");
}

/* free(p); q = malloc(same size) returns p again; free(p) is then a valid
 * free of q's block (not detectable); the next free(p) is a double free. */
static void double_free_after_reuse(size_t n) {
  char* p = xmalloc(n);
  free(p);
  char* q = xmalloc(n);
  precondition(q == p, "the freed block was not handed out again");
  note("reused=1\n");
  free(opaque(p));   /* valid: frees q's block */
  note("first-free-after-reuse=accepted\n");
  announce(p);
  free(opaque(p));
}

/* ---------------------------------------------------------------- invalid pointers */
static char static_block[128] __attribute__((aligned(64)));

static void invalid_free(void* p) {
  announce(p);
  free(opaque(p));
}
static void* foreign_page(void) {
  void* m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  precondition(m != MAP_FAILED, "mmap");
  return m;
}

/* A block start in the first block's slab that was never carved (handed
 * out): the slab carves about 4 KiB at a time.  Freed by the owner thread,
 * or by another thread. */
static char* nc_ptr;
static void* nc_free(void* arg) {
  (void)arg;
  free(opaque(nc_ptr));
  return NULL;
}
static void never_carved(int other_thread) {
  char* p = xmalloc(32);
  precondition(((uintptr_t)p & 0xFFF) < 32 * 16, "a fresh 32-byte slab");
  nc_ptr = p + 32 * 1000;
  announce(nc_ptr);
  if (other_thread) {
    pthread_t t;
    pthread_create(&t, NULL, nc_free, NULL);
    pthread_join(t, NULL);
  } else {
    free(opaque(nc_ptr));
  }
  note("not-detected=1\n");
  int dup = 0;   /* what follows: the block may be handed out twice */
  for (int i = 0; i < 3000; i++)
    if (xmalloc(32) == nc_ptr) dup++;
  note("handed-out=%d\n", dup);
}

/* malloc_usable_size of a freed small block. */
static void usable_freed(void) {
  char* p = xmalloc(64);
  free(p);
  announce(p);
  note("usable=%zu\n", malloc_usable_size(opaque(p)));
}

/* ---------------------------------------------------------------- not detected */
/* Two adjacent blocks of n bytes: a, then b = a + n (same slab, carved in order). */
static void adjacent_pair(size_t n, char** a, char** b) {
  for (int tries = 0; tries < 64; tries++) {
    char* x = xmalloc(n);
    char* y = xmalloc(n);
    if (y == x + n) {
      *a = x;
      *b = y;
      return;
    }
  }
  precondition(0, "no two adjacent blocks");
}

/* overflow by 1 byte into a live neighbour. */
static void overflow_live(size_t n, size_t by, int underflow) {
  sentinels_make();
  char *a, *b;
  adjacent_pair(n, &a, &b);
  memset(a, 'a', n);
  memset(b, 'b', n);
  if (underflow) {
    announce(b);
    memset(opaque(b - by), 'X', by);   /* ends in a's last bytes */
    note("neighbour-damaged=%d\n", a[n - 1] == 'X');
  } else {
    announce(a);
    memset(opaque(a), 'X', n + by);   /* ends in b's first bytes */
    note("neighbour-damaged=%d\n", b[0] == 'X');
  }
  free(a);
  free(b);
  aftermath();
}

/* overflow by `by` bytes into a free neighbour: its free-list link and
 * free cookie are overwritten. */
static void overflow_free(size_t n, size_t by, int underflow) {
  sentinels_make();
  char *a, *b;
  adjacent_pair(n, &a, &b);
  if (underflow) {
    free(a);
    announce(b);
    memset(opaque(b - by), 'X', by);
    free(b);
  } else {
    free(b);
    announce(a);
    memset(opaque(a), 'X', n + by);
    free(a);
  }
  note("mistake-done=1\n");
  aftermath();
}

/* The [lo, hi) range of the mapping (from /proc/self/maps) that holds p. */
static int mapping_of(const void* p, uintptr_t* lo, uintptr_t* hi) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return 0;
  char line[512];
  int found = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b;
    if (sscanf(line, "%lx-%lx", &a, &b) == 2 && (uintptr_t)p >= a && (uintptr_t)p < b) {
      *lo = a;
      *hi = b;
      found = 1;
      break;
    }
  }
  fclose(f);
  return found;
}

/* Write 1 MiB past the end of a 1 MiB block, inside its mapping (a large
 * block's mapping has headroom for reuse at a bigger size; a block that
 * covers a whole 2 MiB range is mapped exactly instead, see thp.c, and a
 * write past it leaves the mapping). */
static void overflow_large_1m(void) {
  sentinels_make();
  size_t n = MiB;
  char* p = xmalloc(n);
  memset(p, 'p', n);
  uintptr_t lo, hi;
  precondition(mapping_of(p, &lo, &hi), "mapping of the block");
  note("mapping-after-block=%zu\n", (size_t)(hi - (uintptr_t)(p + n)));
  precondition(hi >= (uintptr_t)(p + n + MiB), "1 MiB of the mapping after the block");
  announce(p);
  memset(opaque(p + n), 'X', MiB);
  free(p);
  aftermath();
}

/* Write 1 MiB before a medium block (114688-byte class, 1 MiB slabs):
 * the range holds other live blocks of the same segment. */
static void underflow_medium_1m(void) {
  sentinels_make();
  size_t n = 100 * KiB;
  enum { NB = 40 };
  char* blk[NB];
  char* victim = NULL;
  for (int i = 0; i < NB; i++) {
    blk[i] = xmalloc(n);
    memset(blk[i], 'm', n);
    if (victim == NULL && ((uintptr_t)blk[i] & (4 * MiB - 1)) >= MiB + 64 * KiB) victim = blk[i];
  }
  precondition(victim != NULL, "a block 1 MiB into its segment");
  announce(victim);
  memset(opaque(victim - MiB), 'X', MiB);
  int damaged = 0;
  for (int i = 0; i < NB; i++)
    if (blk[i] < victim && blk[i] + n > victim - MiB) damaged++;
  note("blocks-overwritten=%d\n", damaged);
  for (int i = 0; i < NB; i++) free(blk[i]);
  aftermath();
}

/* Underflow into a large block's header page (the block starts 8 KiB into
 * its mapping, after the segment header). */
static void underflow_large(size_t by) {
  sentinels_make();
  char* p = xmalloc(4 * MiB);
  announce(p);
  memset(opaque(p - by), 'X', by);
  free(p);
  aftermath();
}

static void write_after_free(size_t n) {
  sentinels_make();
  char* p = xmalloc(n);
  free(p);
  announce(p);
  uintptr_t lo, hi;
  if (n > 128 * KiB && !mapping_of(p, &lo, &hi)) {
    note("freed-block-unmapped=1\n");   /* writing would just be SIGSEGV */
    aftermath();
    return;
  }
  memset(opaque(p), 'X', n);
  note("mistake-done=1\n");
  aftermath();
}

static void read_zero_size(void) {
  sentinels_make();
  unsigned char* p = xmalloc(0);
  unsigned char* q = xmalloc(0);
  precondition(p != q, "two malloc(0) give distinct pointers");
  note("usable-of-malloc0=%zu\n", malloc_usable_size(p));
  announce(p);
  volatile unsigned sum = 0;
  for (int i = 0; i < 16; i++) sum += ((volatile unsigned char*)opaque(p))[i];
  note("read-16-bytes=ok\n");
  free(p);
  free(q);
  aftermath();
}

static void huge_allocation(void) {
  sentinels_make();
  static const size_t sizes[] = {SIZE_MAX / 2, SIZE_MAX, SIZE_MAX - 4096, (size_t)PTRDIFF_MAX + 1};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    errno = 0;
    void* p = malloc((size_t)opaque((void*)sizes[i]));
    if (p != NULL || errno != ENOMEM) {
      note("malloc(%zu) = %p errno %d (want NULL, ENOMEM)\n", sizes[i], p, errno);
      exit(4);
    }
  }
  errno = 0;
  if (calloc(SIZE_MAX / 2, 4) != NULL || errno != ENOMEM) {
    note("calloc overflow not NULL/ENOMEM\n");
    exit(4);
  }
  char* keep = xmalloc(100);
  memset(keep, 'k', 100);
  errno = 0;
  if (realloc(keep, SIZE_MAX / 2) != NULL || errno != ENOMEM) {
    note("realloc(SIZE_MAX/2) not NULL/ENOMEM\n");
    exit(4);
  }
  for (int i = 0; i < 100; i++)
    if (keep[i] != 'k') {
      note("realloc failure damaged the block\n");
      exit(4);
    }
  free(keep);
  note("huge=ENOMEM\n");
  aftermath();
}

/* ---------------------------------------------------------------- table */
typedef struct {
  const char* name;
  void (*fn)(void);
} scenario_t;

#define S(name, body) static void sc_##name(void) { body; }
S(df_small, double_free(32))
S(df_medium, double_free(20 * KiB))
S(df_large, double_free(4 * MiB))
S(df_delayed_small, double_free_delayed(32))
S(df_delayed_medium, double_free_delayed(20 * KiB))
S(df_delayed_large, double_free_delayed(4 * MiB))
S(df_interleaved, double_free_interleaved(32))
S(df_interleaved_medium, double_free_interleaved(20 * KiB))
S(df_thread, double_free_thread(32))
S(df_thread_medium, double_free_thread(20 * KiB))
S(df_after_reuse, double_free_after_reuse(32))
S(free_stack, { char buf[64] __attribute__((aligned(16))); memset(buf, 0, sizeof buf); invalid_free(buf); })
S(free_static, invalid_free(static_block))
S(free_far, invalid_free((void*)(uintptr_t)0x1234))
S(free_far_high, invalid_free((void*)(uintptr_t)0x6ead0000bee0))
S(free_unaligned, { char* p = xmalloc(64); invalid_free(p + 1); })
S(free_interior, { char* p = xmalloc(64); invalid_free(p + 16); })
S(free_interior_medium, { char* p = xmalloc(100 * KiB); invalid_free(p + 70000); })
S(free_interior_large, { char* p = xmalloc(4 * MiB); invalid_free(p + 4096); })
S(free_mmap, invalid_free(foreign_page()))
S(free_never_carved, never_carved(0))
S(free_never_carved_thread, never_carved(1))
S(realloc_invalid, { char buf[64] __attribute__((aligned(16))); memset(buf, 0, sizeof buf); announce(buf); free(realloc(opaque(buf), 100)); })
S(realloc_interior, { char* p = xmalloc(64); announce(p + 16); free(realloc(opaque(p + 16), 100)); })
S(realloc_freed, { char* p = xmalloc(64); free(p); announce(p); free(realloc(opaque(p), 100)); })
S(usable_invalid, { static char buf[64]; announce(buf); note("usable=%zu\n", malloc_usable_size(opaque(buf))); })
S(usable_freed, usable_freed())
S(overflow_1, overflow_live(32, 1, 0))
S(overflow_32, overflow_free(32, 32, 0))
S(overflow_1m, overflow_large_1m())
S(underflow_1, overflow_live(32, 1, 1))
S(underflow_32, overflow_free(32, 32, 1))
S(underflow_large_32, underflow_large(32))
S(underflow_1m, underflow_medium_1m())
S(write_after_free, write_after_free(64))
S(write_after_free_large, write_after_free(4 * MiB))
S(read_zero_size, read_zero_size())
S(huge, huge_allocation())
S(control, { sentinels_make(); aftermath(); })
#undef S

static const scenario_t scenarios[] = {
#define R(name) {#name, sc_##name}
    R(df_small), R(df_medium), R(df_large), R(df_delayed_small), R(df_delayed_medium), R(df_delayed_large),
    R(df_interleaved), R(df_interleaved_medium), R(df_thread), R(df_thread_medium), R(df_after_reuse),
    R(free_stack), R(free_static), R(free_far), R(free_far_high), R(free_unaligned), R(free_interior),
    R(free_interior_medium), R(free_interior_large), R(free_mmap), R(realloc_invalid), R(realloc_interior),
    R(realloc_freed), R(usable_invalid), R(usable_freed), R(free_never_carved), R(free_never_carved_thread), R(overflow_1), R(overflow_32), R(overflow_1m), R(underflow_1),
    R(underflow_32), R(underflow_large_32), R(underflow_1m), R(write_after_free), R(write_after_free_large),
    R(read_zero_size), R(huge), R(control),
#undef R
};

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "";
  size_t n = sizeof scenarios / sizeof scenarios[0];
  if (strcmp(name, "list") == 0) {
    for (size_t i = 0; i < n; i++) puts(scenarios[i].name);
    return 0;
  }
  /* warm up: the allocator has slabs of several classes */
  void* w[32];
  for (int i = 0; i < 32; i++) w[i] = xmalloc((size_t)(i + 1) * 40);
  for (int i = 0; i < 32; i++) free(w[i]);
  for (size_t i = 0; i < n; i++)
    if (strcmp(name, scenarios[i].name) == 0) {
      scenarios[i].fn();
      note("done\n");
      return 0;
    }
  fprintf(stderr, "usage: test-misuse-suite SCENARIO (test-misuse-suite list: the scenarios)\n");
  return 2;
}
