/* bench_common.h — shared pieces of hakmem's benchmark programs.
 *
 * The programs use only the standard malloc API, so they run under any
 * allocator (LD_PRELOAD).  This header gives them:
 *   - option parsing: `--name=value` on the command line, and for each option
 *     an environment variable (ITERS, WS, THREADS, ...); the command line wins.
 *     Numbers take suffixes k/M/G (x1000) and Ki/Mi/Gi (x1024).  Bad input is
 *     one line on stderr and exit status 2; --help prints the options.
 *   - a fast fixed-seed PRNG (splitmix64) and a division-free bounded draw,
 *   - timing, getrusage deltas, current RSS from /proc/self/statm,
 *   - the RESULT line: `RESULT bench=NAME key=value ...` with common keys
 *     (elapsed, CPU time, peak/current RSS, page faults, context switches,
 *     allocator detected, primary figure and its direction).
 * Everything is static: each program is one translation unit. */
#ifndef HAKMEM_BENCH_COMMON_H
#define HAKMEM_BENCH_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#if defined(__GNUC__)
#define B_UNUSED __attribute__((unused))
#define B_NOINLINE __attribute__((noinline))
#define B_LIKELY(x) __builtin_expect(!!(x), 1)
#define B_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define B_UNUSED
#define B_NOINLINE
#define B_LIKELY(x) (x)
#define B_UNLIKELY(x) (x)
#endif

/* Keep the compiler from proving a block dead (and deleting malloc/free). */
static inline void b_escape(void* p) {
#if defined(__GNUC__)
  __asm__ volatile("" : : "r"(p) : "memory");
#else
  static void* volatile sink;
  sink = p;
#endif
}

static const char* b_prog = "bench";

B_UNUSED static void b_die(int status, const char* fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
B_UNUSED static void b_die(int status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: error: ", b_prog);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(status);
}

B_UNUSED static void b_oom(size_t size) { b_die(1, "out of memory (malloc(%zu) returned NULL)", size); }

/* ------------------------------------------------------------------ PRNG */
/* splitmix64: one add and two multiplies, no serial dependency beyond the add. */
static inline uint64_t b_rng(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/* Uniform in [0, n) from 32 random bits, without a division (Lemire). */
static inline uint32_t b_bounded(uint32_t r, uint32_t n) { return (uint32_t)(((uint64_t)r * n) >> 32); }

/* --------------------------------------------------------------- options */
enum { B_OPT_U64, B_OPT_DBL, B_OPT_CHOICE, B_OPT_END };

typedef struct {
  const char* name;     /* command-line name: --name=value */
  const char* env;      /* environment variable, or NULL */
  int kind;             /* B_OPT_* */
  void* ptr;            /* uint64_t*, double*, or const char** (choice) */
  uint64_t min, max;    /* bounds for U64 (inclusive) and DBL */
  const char* choices;  /* "a|b|c" for B_OPT_CHOICE */
  const char* help;
} b_opt_t;

#define B_OPT_U(name, env, ptr, lo, hi, help) {name, env, B_OPT_U64, ptr, lo, hi, NULL, help}
#define B_OPT_D(name, env, ptr, lo, hi, help) {name, env, B_OPT_DBL, ptr, lo, hi, NULL, help}
#define B_OPT_C(name, env, ptr, choices, help) {name, env, B_OPT_CHOICE, ptr, 0, 0, choices, help}
#define B_OPT_LAST {NULL, NULL, B_OPT_END, NULL, 0, 0, NULL, NULL}

/* Parse an unsigned count/size: decimal digits, optional suffix
 * k/K M G (powers of 1000) or Ki Mi Gi (powers of 1024).  0 on error. */
static int b_parse_u64(const char* s, uint64_t* out) {
  if (s == NULL || !isdigit((unsigned char)*s)) return 0;
  errno = 0;
  char* end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0) return 0;
  uint64_t mul = 1;
  if (*end) {
    char c = *end++;
    int bin = 0;
    if (*end == 'i') { bin = 1; end++; }
    if (*end) return 0;
    switch (c) {
      case 'k': case 'K': mul = bin ? 1024ull : 1000ull; break;
      case 'm': case 'M': mul = bin ? 1048576ull : 1000000ull; break;
      case 'g': case 'G': mul = bin ? 1073741824ull : 1000000000ull; break;
      default: return 0;
    }
  }
  if (v != 0 && mul > UINT64_MAX / v) return 0;
  *out = (uint64_t)v * mul;
  return 1;
}

static int b_parse_dbl(const char* s, double* out) {
  if (s == NULL || *s == 0) return 0;
  errno = 0;
  char* end;
  double v = strtod(s, &end);
  if (errno != 0 || *end != 0 || v != v) return 0;
  *out = v;
  return 1;
}

static int b_choice_ok(const char* choices, const char* v) {
  size_t n = strlen(v);
  const char* p = choices;
  while (*p) {
    const char* bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && strncmp(p, v, n) == 0) return 1;
    if (!bar) break;
    p = bar + 1;
  }
  return 0;
}

static void b_set_opt(const b_opt_t* o, const char* v, const char* from) {
  if (o->kind == B_OPT_U64) {
    uint64_t x;
    if (!b_parse_u64(v, &x)) b_die(2, "%s: '%s' is not a number (digits, optional k/M/G or Ki/Mi/Gi suffix)", from, v);
    if (x < o->min || x > o->max)
      b_die(2, "%s: %" PRIu64 " is out of range [%" PRIu64 ", %" PRIu64 "]", from, x, o->min, o->max);
    *(uint64_t*)o->ptr = x;
  } else if (o->kind == B_OPT_DBL) {
    double x;
    if (!b_parse_dbl(v, &x)) b_die(2, "%s: '%s' is not a number", from, v);
    if (x < (double)o->min || x > (double)o->max)
      b_die(2, "%s: %g is out of range [%" PRIu64 ", %" PRIu64 "]", from, x, o->min, o->max);
    *(double*)o->ptr = x;
  } else {
    if (!b_choice_ok(o->choices, v)) b_die(2, "%s: '%s' is not one of %s", from, v, o->choices);
    *(const char**)o->ptr = v;
  }
}

static void b_usage(FILE* f, const char* synopsis, const b_opt_t* opts) {
  fprintf(f, "usage: %s [--option=value ...]\n%s\n\noptions (environment variable in brackets; the command line wins):\n",
          b_prog, synopsis);
  for (const b_opt_t* o = opts; o->name; o++) {
    char def[64];
    if (o->kind == B_OPT_U64) snprintf(def, sizeof def, "%" PRIu64, *(uint64_t*)o->ptr);
    else if (o->kind == B_OPT_DBL) snprintf(def, sizeof def, "%g", *(double*)o->ptr);
    else snprintf(def, sizeof def, "%s", *(const char**)o->ptr);
    char lhs[64];
    snprintf(lhs, sizeof lhs, "--%s=%s", o->name, o->kind == B_OPT_CHOICE ? o->choices : "N");
    fprintf(f, "  %-26s %s (default %s)%s%s%s\n", lhs, o->help, def, o->env ? " [" : "", o->env ? o->env : "",
            o->env ? "]" : "");
  }
  fprintf(f, "  %-26s this help\n\n", "--help");
  fprintf(f, "Numbers accept k/M/G (x1000) and Ki/Mi/Gi (x1024) suffixes.\n"
             "Output: optional STEP lines, then one line 'RESULT bench=... key=value ...'.\n"
             "Exit status: 0 ok, 1 runtime failure, 2 bad arguments.\n");
}

/* Environment first, then the command line (which wins). */
static void b_parse(int argc, char** argv, const char* synopsis, const b_opt_t* opts) {
  if (argc > 0 && argv[0]) {
    const char* s = strrchr(argv[0], '/');
    b_prog = s ? s + 1 : argv[0];
  }
  for (const b_opt_t* o = opts; o->name; o++) {
    const char* v = o->env ? getenv(o->env) : NULL;
    if (v && *v) {
      char from[80];
      snprintf(from, sizeof from, "environment %s", o->env);
      b_set_opt(o, v, from);
    }
  }
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      b_usage(stdout, synopsis, opts);
      exit(0);
    }
    if (strncmp(a, "--", 2) != 0) b_die(2, "unexpected argument '%s' (options are --name=value; see --help)", a);
    const char* eq = strchr(a, '=');
    size_t nlen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
    const b_opt_t* o = opts;
    for (; o->name; o++)
      if (strlen(o->name) == nlen && strncmp(o->name, a + 2, nlen) == 0) break;
    if (!o->name) b_die(2, "unknown option '%.*s' (see --help)", (int)(nlen + 2), a);
    if (!eq) b_die(2, "option '%s' needs a value: --%s=VALUE", a, o->name);
    char from[80];
    snprintf(from, sizeof from, "--%s", o->name);
    b_set_opt(o, eq + 1, from);
  }
}

/* The number of sizes in [--min, --max] (a uniform draw's span), after
 * checking the range: exit status 2 on min > max or a span of 4Gi or more. */
B_UNUSED static uint32_t b_size_span(uint64_t lo, uint64_t hi) {
  if (lo > hi) b_die(2, "--min (%" PRIu64 ") is larger than --max (%" PRIu64 ")", lo, hi);
  if (hi - lo >= UINT32_MAX) b_die(2, "--max - --min must be below 4Gi");
  return (uint32_t)(hi - lo + 1);
}

/* ---------------------------------------------------------------- system */
static inline uint64_t b_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

B_UNUSED static uint64_t b_ncpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return (uint64_t)n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (uint64_t)n : 1;
}

/* Current resident set size in KiB (/proc/self/statm, second field). */
B_UNUSED static uint64_t b_rss_kb(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, res = 0;
  int n = fscanf(f, "%llu %llu", &size, &res);
  fclose(f);
  if (n != 2) return 0;
  return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE) / 1024u;
}

/* Pages freed with MADV_FREE but not yet reclaimed still count in RSS;
 * /proc/self/smaps_rollup says how much of it is such "LazyFree" memory. */
/* One "Key: N kB" line of /proc/self/smaps_rollup (0 when absent). */
B_UNUSED static uint64_t b_smaps_kb(const char* key) {
  FILE* f = fopen("/proc/self/smaps_rollup", "r");
  if (!f) return 0;
  char line[256];
  size_t n = strlen(key);
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0 && line[n] == ':' && sscanf(line + n + 1, " %llu kB", &kb) == 1) break;
  fclose(f);
  return (uint64_t)kb;
}
B_UNUSED static uint64_t b_lazyfree_kb(void) { return b_smaps_kb("LazyFree"); }

/* Which allocator serves malloc in this process (by its exported symbols). */
B_UNUSED static const char* b_allocator(void) {
  if (dlsym(RTLD_DEFAULT, "hak_malloc")) return "hakmem";
  if (dlsym(RTLD_DEFAULT, "mi_malloc")) return "mimalloc";
  if (dlsym(RTLD_DEFAULT, "tc_malloc")) return "tcmalloc";
  if (dlsym(RTLD_DEFAULT, "mallctl")) return "jemalloc";
  if (dlsym(RTLD_DEFAULT, "__malloc_end_pointer")) return "snmalloc"; /* libsnmallocshim, not glibc */
  return "glibc";
}

typedef struct {
  uint64_t t_ns;
  uint64_t cpu_ns;   /* CLOCK_PROCESS_CPUTIME_ID: all threads' CPU time */
  struct rusage ru;
} b_snap_t;

B_UNUSED static void b_snap(b_snap_t* s) {
  getrusage(RUSAGE_SELF, &s->ru);
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  s->cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  s->t_ns = b_now_ns();
}

B_UNUSED static double b_tv(const struct timeval* tv) { return (double)tv->tv_sec + (double)tv->tv_usec / 1e6; }

/* Process CPU time between two snapshots, in seconds. */
B_UNUSED static double b_cpu_s(const b_snap_t* a, const b_snap_t* b) { return (double)(b->cpu_ns - a->cpu_ns) / 1e9; }

/* ---------------------------------------------------------------- result */
typedef struct {
  char buf[4096];
  size_t len;
} b_result_t;

B_UNUSED static void b_kv(b_result_t* r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
B_UNUSED static void b_kv(b_result_t* r, const char* fmt, ...) {
  if (r->len >= sizeof r->buf - 1) return;
  va_list ap;
  va_start(ap, fmt);
  r->buf[r->len++] = ' ';
  int n = vsnprintf(r->buf + r->len, sizeof r->buf - r->len, fmt, ap);
  va_end(ap);
  if (n > 0) r->len += (size_t)n < sizeof r->buf - r->len ? (size_t)n : sizeof r->buf - r->len - 1;
}

B_UNUSED static void b_result_begin(b_result_t* r, const char* bench) {
  r->len = (size_t)snprintf(r->buf, sizeof r->buf, "RESULT bench=%s", bench);
}

/* Throughput keys for n operations over [a, b]: ops_per_sec, ns_per_op, ops. */
B_UNUSED static void b_kv_rate(b_result_t* r, const b_snap_t* a, const b_snap_t* b, uint64_t n) {
  double ns = (double)(b->t_ns - a->t_ns);
  b_kv(r, "ops_per_sec=%.0f", ns > 0 ? (double)n * 1e9 / ns : 0.0);
  b_kv(r, "ns_per_op=%.3f", n ? ns / (double)n : 0.0);
  b_kv(r, "ops=%" PRIu64, n);
}

/* Common keys over the measured region [a, b]:
 * elapsed_s, cpu_s (process CPU time, ns resolution: on a shared machine it
 * leaves out the time the process waited for a core), user_s, sys_s, minflt, majflt, nvcsw, nivcsw (deltas),
 * peak_rss_kb (ru_maxrss, whole process lifetime), rss_kb (now), allocator,
 * primary (the main figure's key) and better (higher|lower). */
B_UNUSED static void b_result_end(b_result_t* r, const b_snap_t* a, const b_snap_t* b, const char* primary,
                                  const char* better) {
  b_kv(r, "elapsed_s=%.6f", (double)(b->t_ns - a->t_ns) / 1e9);
  b_kv(r, "cpu_s=%.6f", b_cpu_s(a, b));
  b_kv(r, "user_s=%.3f", b_tv(&b->ru.ru_utime) - b_tv(&a->ru.ru_utime));
  b_kv(r, "sys_s=%.3f", b_tv(&b->ru.ru_stime) - b_tv(&a->ru.ru_stime));
  b_kv(r, "minflt=%ld", b->ru.ru_minflt - a->ru.ru_minflt);
  b_kv(r, "majflt=%ld", b->ru.ru_majflt - a->ru.ru_majflt);
  b_kv(r, "nvcsw=%ld", b->ru.ru_nvcsw - a->ru.ru_nvcsw);
  b_kv(r, "nivcsw=%ld", b->ru.ru_nivcsw - a->ru.ru_nivcsw);
  struct rusage now;
  getrusage(RUSAGE_SELF, &now);
  b_kv(r, "peak_rss_kb=%ld", now.ru_maxrss);
  b_kv(r, "rss_kb=%" PRIu64, b_rss_kb());
  b_kv(r, "allocator=%s", b_allocator());
  b_kv(r, "primary=%s", primary);
  b_kv(r, "better=%s", better);
  printf("%s\n", r->buf);
  fflush(stdout);
}

/* ------------------------------------------------------- block touching */
/* How a benchmark writes to a fresh block:
 *   first: the first min(size, 64) bytes (one cache line) — the default,
 *   lines: one byte in every 64-byte line, and the last byte,
 *   none:  nothing (pure allocator cost). */
enum { B_TOUCH_FIRST, B_TOUCH_LINES, B_TOUCH_NONE };

B_UNUSED static int b_touch_mode(const char* s) {
  if (strcmp(s, "lines") == 0) return B_TOUCH_LINES;
  if (strcmp(s, "none") == 0) return B_TOUCH_NONE;
  return B_TOUCH_FIRST;
}

static inline void b_touch(int mode, unsigned char* p, size_t size, unsigned char v) {
  if (B_LIKELY(mode == B_TOUCH_FIRST)) {
    if (B_LIKELY(size >= 64)) memset(p, v, 64);
    else memset(p, v, size);
  } else if (mode == B_TOUCH_LINES) {
    for (size_t off = 0; off < size; off += 64) p[off] = v;
    if (size) p[size - 1] = v;
  }
}

/* The replace loop of random_mixed and larson: n times, free a random one
 * of the w slots and put in a new block of a uniform size in [lo, lo + span),
 * written by mode tm.  Inlined into each program's measured function, so it
 * holds nothing but the PRNG, the allocator calls and the write. */
static inline __attribute__((always_inline)) void b_replace_ops(unsigned char** const s, uint64_t n, uint32_t w,
                                                                size_t lo, uint32_t span, int tm, uint64_t* rng) {
  uint64_t st = *rng;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t r = b_rng(&st);
    uint32_t k = b_bounded((uint32_t)(r >> 32), w);
    size_t size = lo + b_bounded((uint32_t)r, span);
    free(s[k]);
    unsigned char* p = malloc(size);
    if (B_UNLIKELY(p == NULL)) b_oom(size);
    b_touch(tm, p, size, (unsigned char)k);
    s[k] = p;
  }
  *rng = st;
}

#endif /* HAKMEM_BENCH_COMMON_H */
