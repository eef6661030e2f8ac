/* Shared helpers of the hakmem test programs: CHECK macros, a deterministic
 * RNG, byte patterns, and the mapping of the tested API onto either the
 * standard names (malloc, ...) or the hak_-prefixed ones.
 *
 * Build switches:
 *   HT_HAK      call hak_malloc, hak_free, ... (sanitizer builds, valgrind)
 *   HT_DLSYM    linked against glibc only: the hakmem extras (hak_owns, ...)
 *               are looked up at run time, so the same binary runs with and
 *               without LD_PRELOAD=libhakmem.so
 *   otherwise   standard names, linked with libhakmem (which overrides malloc)
 */
#ifndef HAK_TEST_H
#define HAK_TEST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hakmem.h"
#ifdef HT_DLSYM
#include <dlfcn.h>
#endif

/* ---- the API under test ---------------------------------------------- */
#ifdef HT_HAK
#define T_NAMES "hak_"
#define t_malloc hak_malloc
#define t_calloc hak_calloc
#define t_realloc hak_realloc
#define t_reallocarray hak_reallocarray
#define t_free hak_free
#define t_posix_memalign hak_posix_memalign
#define t_aligned_alloc hak_aligned_alloc
#define t_memalign hak_memalign
#define t_valloc hak_valloc
#define t_pvalloc hak_pvalloc
#define t_malloc_usable_size hak_malloc_usable_size
#define t_malloc_trim hak_malloc_trim
#define t_malloc_stats hak_malloc_stats
#define t_mallinfo2 hak_mallinfo2
#define t_malloc_info hak_malloc_info
#define t_mallopt hak_mallopt
#else
#define T_NAMES "standard"
#define t_malloc malloc
#define t_calloc calloc
#define t_realloc realloc
#define t_reallocarray reallocarray
#define t_free free
#define t_posix_memalign posix_memalign
#define t_aligned_alloc aligned_alloc
#define t_memalign memalign
#define t_valloc valloc
#define t_pvalloc pvalloc
#define t_malloc_usable_size malloc_usable_size
#define t_malloc_trim malloc_trim
#define t_malloc_stats malloc_stats
#define t_mallinfo2 mallinfo2
#define t_malloc_info malloc_info
#define t_mallopt mallopt
#endif

/* hakmem's own calls.  ht_has_hakmem() tells whether they are available
 * (always, unless HT_DLSYM and libhakmem is not preloaded). */
#ifdef HT_DLSYM
typedef struct {
  int (*owns)(const void*);
  void (*collect)(void);
  void (*stats_print)(FILE*);
  void (*os_stats)(hak_os_stats_t*);
  long long (*option_get)(const char*);
  const char* (*version)(void);
  void (*free_sized)(void*, size_t);
  int (*ctl)(const char*, void*, size_t*, const void*, size_t);
  bool loaded;
} ht_hak_api_t;
static ht_hak_api_t ht_api __attribute__((unused));
static inline bool ht_has_hakmem(void) {
  static bool done;
  if (!done) {
    done = true;
    ht_api.owns = (int (*)(const void*))dlsym(RTLD_DEFAULT, "hak_owns");
    ht_api.collect = (void (*)(void))dlsym(RTLD_DEFAULT, "hak_collect");
    ht_api.stats_print = (void (*)(FILE*))dlsym(RTLD_DEFAULT, "hakmem_stats_print");
    ht_api.os_stats = (void (*)(hak_os_stats_t*))dlsym(RTLD_DEFAULT, "hak_os_stats");
    ht_api.option_get = (long long (*)(const char*))dlsym(RTLD_DEFAULT, "hak_option_get");
    ht_api.version = (const char* (*)(void))dlsym(RTLD_DEFAULT, "hak_version");
    ht_api.free_sized = (void (*)(void*, size_t))dlsym(RTLD_DEFAULT, "hak_free_sized");
    ht_api.ctl = (int (*)(const char*, void*, size_t*, const void*, size_t))dlsym(RTLD_DEFAULT, "hakmem_ctl");
    ht_api.loaded = ht_api.owns && ht_api.collect && ht_api.stats_print && ht_api.os_stats &&
                    ht_api.option_get && ht_api.version && ht_api.free_sized && ht_api.ctl;
  }
  return ht_api.loaded;
}
#define t_owns(p) (ht_has_hakmem() ? ht_api.owns(p) : 1)
#define t_collect() (ht_has_hakmem() ? ht_api.collect() : (void)0)
#define t_stats_print(f) ht_api.stats_print(f)
#define t_os_stats(o) ht_api.os_stats(o)
#define t_option_get(n) ht_api.option_get(n)
#define t_version() ht_api.version()
#define t_free_sized(p, n) (ht_has_hakmem() ? ht_api.free_sized(p, n) : free(p))
#define t_ctl(...) ht_api.ctl(__VA_ARGS__)
#else
static inline bool ht_has_hakmem(void) { return true; }
#define t_owns(p) hak_owns(p)
#define t_collect() hak_collect()
#define t_stats_print(f) hakmem_stats_print(f)
#define t_os_stats(o) hak_os_stats(o)
#define t_option_get(n) hak_option_get(n)
#define t_version() hak_version()
#define t_free_sized(p, n) hak_free_sized(p, n)
#define t_ctl(...) hakmem_ctl(__VA_ARGS__)
#endif
/* A figure of a new hakmem_ctl snapshot (a write of "epoch" takes it), or
 * (size_t)-1 when either call is refused. */
static inline size_t ht_ctl_figure(const char* name) {
  uint64_t epoch = 1;
  size_t v = 0, vl = sizeof v;
  if (t_ctl("epoch", NULL, NULL, &epoch, sizeof epoch) != 0) return (size_t)-1;
  return t_ctl(name, &v, &vl, NULL, 0) == 0 ? v : (size_t)-1;
}

/* ---- checks ----------------------------------------------------------- */
static long ht_checks __attribute__((unused)), ht_failures __attribute__((unused));
static const char* ht_section __attribute__((unused)) = "";

#define HT_MAX_REPORTED 40
static inline void ht_fail(const char* file, int line, const char* fmt, ...) {
  ht_failures++;
  if (ht_failures > HT_MAX_REPORTED) return;
  fprintf(stdout, "  FAILED %s:%d [%s] ", file, line, ht_section);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stdout, fmt, ap);
  va_end(ap);
  fputc('\n', stdout);
  fflush(stdout);
}
/* CHECK(cond): count it; on failure print where and what. */
#define CHECK(cond)                                                    \
  do {                                                                 \
    ht_checks++;                                                       \
    if (!(cond)) ht_fail(__FILE__, __LINE__, "%s", #cond);             \
  } while (0)
/* CHECKF(cond, fmt, ...): same, with a printf-style explanation. */
#define CHECKF(cond, ...)                                              \
  do {                                                                 \
    ht_checks++;                                                       \
    if (!(cond)) ht_fail(__FILE__, __LINE__, __VA_ARGS__);             \
  } while (0)
/* REQUIRE: a failed check after which continuing makes no sense. */
#define REQUIRE(cond)                                                  \
  do {                                                                 \
    ht_checks++;                                                       \
    if (!(cond)) {                                                     \
      ht_fail(__FILE__, __LINE__, "%s (fatal)", #cond);                \
      exit(1);                                                         \
    }                                                                  \
  } while (0)

static inline void ht_begin(const char* name) {
  ht_section = name;
  printf("- %s\n", name);
  fflush(stdout);
}

/* Print the summary; the exit status of the program. */
static inline int ht_done(const char* prog) {
  if (ht_failures > HT_MAX_REPORTED)
    printf("  (%ld more failures not shown)\n", ht_failures - HT_MAX_REPORTED);
  printf("%s: %ld checks, %ld failed\n", prog, ht_checks, ht_failures);
  fflush(stdout);
  return ht_failures == 0 ? 0 : 1;
}

/* ---- deterministic randomness ---------------------------------------- */
typedef struct { uint64_t s; } ht_rng_t;
static inline uint64_t ht_splitmix(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline uint64_t ht_rand(ht_rng_t* r) { return ht_splitmix(&r->s); }
/* uniform in [0, n) (n > 0) */
static inline uint64_t ht_below(ht_rng_t* r, uint64_t n) { return ht_rand(r) % n; }
/* uniform in [lo, hi] */
static inline uint64_t ht_range(ht_rng_t* r, uint64_t lo, uint64_t hi) {
  return lo + ht_rand(r) % (hi - lo + 1);
}
/* roughly log-uniform in [lo, hi] */
static inline size_t ht_logrange(ht_rng_t* r, size_t lo, size_t hi) {
  int blo = 63 - __builtin_clzll(lo), bhi = 63 - __builtin_clzll(hi);
  int b = (int)ht_range(r, (uint64_t)blo, (uint64_t)bhi);
  size_t a = (size_t)1 << b, z = a * 2 - 1;
  if (a < lo) a = lo;
  if (z > hi) z = hi;
  return (size_t)ht_range(r, a, z);
}

/* Seed: $HT_SEED (decimal or 0x hex) or the default. */
static inline uint64_t ht_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
static inline uint64_t ht_env_u64(const char* name, uint64_t dflt) {
  const char* s = getenv(name);
  if (s == NULL || *s == 0) return dflt;
  return strtoull(s, NULL, 0);
}

/* ---- byte patterns ---------------------------------------------------- */
/* Byte i of a block tagged `key` is byte (i % 8) of word w(key, i / 8).
 * Word-wise fill/verify keeps this fast even under valgrind. */
static inline uint64_t ht_pat_word(uint64_t key, size_t w) {
  uint64_t x = key ^ (w * 0x9E3779B97F4A7C15ull);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 32);
}
static inline uint8_t ht_pat_byte(uint64_t key, size_t i) {
  return (uint8_t)(ht_pat_word(key, i / 8) >> (8 * (i % 8)));
}
/* Fill [from, to) of block p with the pattern of `key`. */
static inline void ht_fill_range(void* p, size_t from, size_t to, uint64_t key) {
  uint8_t* b = (uint8_t*)p;
  size_t i = from;
  while (i < to && (i % 8) != 0) { b[i] = ht_pat_byte(key, i); i++; }
  for (; i + 8 <= to; i += 8) {
    uint64_t w = ht_pat_word(key, i / 8);
    memcpy(b + i, &w, 8);
  }
  for (; i < to; i++) b[i] = ht_pat_byte(key, i);
}
/* Offset of the first byte in [from, to) that differs from the pattern, or
 * SIZE_MAX when all match. */
static inline size_t ht_check_range(const void* p, size_t from, size_t to, uint64_t key) {
  const uint8_t* b = (const uint8_t*)p;
  size_t i = from;
  while (i < to && (i % 8) != 0) {
    if (b[i] != ht_pat_byte(key, i)) return i;
    i++;
  }
  for (; i + 8 <= to; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, 8);
    if (w != ht_pat_word(key, i / 8)) {
      for (size_t j = i; j < i + 8; j++)
        if (b[j] != ht_pat_byte(key, j)) return j;
    }
  }
  for (; i < to; i++)
    if (b[i] != ht_pat_byte(key, i)) return i;
  return SIZE_MAX;
}
static inline void ht_fill(void* p, size_t n, uint64_t key) { ht_fill_range(p, 0, n, key); }
static inline bool ht_check(const void* p, size_t n, uint64_t key) {
  return ht_check_range(p, 0, n, key) == SIZE_MAX;
}
/* Offset of the first nonzero byte in [0, n), or SIZE_MAX. */
static inline size_t ht_first_nonzero(const void* p, size_t n) {
  const uint8_t* b = (const uint8_t*)p;
  size_t i = 0;
  while (i < n && ((uintptr_t)(b + i) % 8) != 0) {
    if (b[i]) return i;
    i++;
  }
  for (; i + 64 <= n; i += 64) {
    const uint64_t* w = (const uint64_t*)(const void*)(b + i);
    if (w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7]) break;
  }
  for (; i < n; i++)
    if (b[i]) return i;
  return SIZE_MAX;
}

static inline bool ht_aligned(const void* p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* Resident set size of this process in bytes (/proc/self/statm). */
static inline size_t ht_rss(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, res = 0;
  if (f) {
    if (fscanf(f, "%lu %lu", &size, &res) != 2) res = 0;
    fclose(f);
  }
  return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

/* A "Key: N kB" line of a /proc file, in KiB (0 when unreadable); fmt is
 * the line's sscanf format, e.g. "VmHWM: %zu". */
static inline size_t __attribute__((unused)) ht_proc_kb(const char* path, const char* fmt) {
  FILE* f = fopen(path, "r");
  char line[256];
  size_t kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, fmt, &kb) == 1) break;
  if (f) fclose(f);
  return kb;
}

/* Transparent huge pages resident in this process, in KiB
 * (/proc/self/smaps_rollup AnonHugePages). */
static inline size_t __attribute__((unused)) ht_anon_huge_kb(void) {
  return ht_proc_kb("/proc/self/smaps_rollup", "AnonHugePages: %zu");
}

/* Hide a value from the optimiser (sizes that would trigger compile-time
 * warnings, pointers the compiler must not reason about). */
static inline size_t ht_opaque(size_t x) {
  __asm__ volatile("" : "+r"(x));
  return x;
}
static inline void* ht_opaque_ptr(void* p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}

#define HT_KiB ((size_t)1024)
#define HT_MiB ((size_t)1024 * 1024)

/* Resident set of this process, in KiB (/proc/self/statm). */
static inline size_t __attribute__((unused)) ht_rss_kb(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  long a = 0, b = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &a, &b) != 2) b = 0;
    fclose(f);
  }
  return (size_t)b * (size_t)sysconf(_SC_PAGESIZE) / 1024;
}

#endif /* HAK_TEST_H */
