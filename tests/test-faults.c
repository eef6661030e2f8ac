/* Fault injection (tests/cases/rel_faults.sh).  Linked with build/libhakmem.a
 * (standard names: hakmem is malloc).
 *
 *   test-faults inject  run every allocating entry point in rounds while the
 *                     environment's HAKMEM_FAIL_MMAP_AFTER/_COUNT make hakmem's
 *                     mmap calls fail: a call either succeeds (aligned, its
 *                     block writable) or returns NULL with errno ENOMEM
 *                     (posix_memalign: returns ENOMEM); live blocks keep their
 *                     contents; a failed realloc keeps the old block.  Then,
 *                     when the failures are over (HAKMEM_FAIL_MMAP_COUNT > 0 or
 *                     no injection), every entry point must succeed again.
 *                     Prints "main_calls=M mmap_calls=N failures=F
 *                     successes=S recovered=0|1" (M: mmap calls made by the
 *                     rounds, before the recovery phase).
 *   test-faults rlimit  in a child: RLIMIT_AS 256 MiB above the current size;
 *                     allocate large, medium and small blocks until each fails
 *                     with ENOMEM, check them, free everything, allocate again,
 *                     raise the limit, allocate 512 MiB more.
 * Exit status 0 when every check held; 1 (with a message) otherwise. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hakmem.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* Messages with write(2) and a stack buffer: stdio may need malloc, which is
 * what fails here. */
static void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0) {
    if ((size_t)n >= sizeof buf) n = sizeof buf - 1;
    ssize_t w = write(1, buf, (size_t)n);
    (void)w;
  }
}
#define FAIL(...)             \
  do {                        \
    say("FAILED: " __VA_ARGS__); \
    say("\n");                \
    exit(1);                  \
  } while (0)

static uint8_t pat(uintptr_t tag, size_t i) { return (uint8_t)(tag * 29 + i * 13 + (i >> 11)); }
/* Patterns on the first and last 4 KiB and one byte per page between. */
static void fill(uint8_t* p, size_t n, uintptr_t tag) {
  for (size_t i = 0; i < n; i = (i < 4096 || i + 4096 >= n) ? i + 1 : i + 4096) p[i] = pat(tag, i);
}
static int intact(const uint8_t* p, size_t n, uintptr_t tag) {
  for (size_t i = 0; i < n; i = (i < 4096 || i + 4096 >= n) ? i + 1 : i + 4096)
    if (p[i] != pat(tag, i)) return 0;
  return 1;
}

/* ---------------------------------------------------------------- inject */
#define NLIVE 512
static struct { uint8_t* p; size_t n; uintptr_t tag; } live[NLIVE];
static uintptr_t next_tag = 1;
static size_t failures, successes;

static void keep(void* p, size_t n, size_t align, const char* what) {
  if (((uintptr_t)p & (align - 1)) != 0) FAIL("%s returned %p, not aligned to %zu", what, p, align);
  for (int i = 0; i < NLIVE; i++)
    if (live[i].p == NULL) {
      live[i].p = p;
      live[i].n = n;
      live[i].tag = next_tag++;
      fill(p, n, live[i].tag);
      return;
    }
  free(p);   /* table full: give it back */
}
static void check_live(const char* when) {
  for (int i = 0; i < NLIVE; i++)
    if (live[i].p && !intact(live[i].p, live[i].n, live[i].tag))
      FAIL("block %p (%zu bytes) changed (%s)", (void*)live[i].p, live[i].n, when);
}
static void free_some(unsigned every) {
  for (int i = 0; i < NLIVE; i++)
    if (live[i].p && (live[i].tag % every) == 0) {
      if (!intact(live[i].p, live[i].n, live[i].tag)) FAIL("block %p changed before free", (void*)live[i].p);
      free(live[i].p);
      live[i].p = NULL;
    }
}

/* One entry point: returns 1 on success, 0 on a clean failure. */
static int call(int which) {
  void* p = NULL;
  size_t n = 0, align = 16;
  const char* what = "";
  errno = 0;
  switch (which) {
    case 0: what = "malloc(64)"; n = 64; p = malloc(n); break;
    case 1: what = "malloc(20 KiB)"; n = 20 * KiB; p = malloc(n); break;
    case 2: what = "malloc(3 MiB)"; n = 3 * MiB; p = malloc(n); break;
    case 3: {
      what = "calloc(10, 100)";
      n = 1000;
      p = calloc(10, 100);
      if (p) for (size_t i = 0; i < n; i++) if (((uint8_t*)p)[i]) FAIL("calloc memory not zero");
      break;
    }
    case 4: {
      what = "calloc(1, 2 MiB)";
      n = 2 * MiB;
      p = calloc(1, n);
      if (p) for (size_t i = 0; i < n; i += 512) if (((uint8_t*)p)[i]) FAIL("calloc memory not zero");
      break;
    }
    case 5: {   /* realloc growing small -> large */
      what = "realloc(100 -> 5 MiB)";
      uint8_t* q = malloc(100);
      if (q == NULL) {
        if (errno != ENOMEM) FAIL("malloc(100) failed with errno %d", errno);
        return 0;
      }
      for (int i = 0; i < 100; i++) q[i] = (uint8_t)(i ^ 0x5a);
      errno = 0;
      n = 5 * MiB;
      p = realloc(q, n);
      if (p == NULL) {
        for (int i = 0; i < 100; i++)
          if (q[i] != (uint8_t)(i ^ 0x5a)) FAIL("failed realloc damaged the old block");
        int e = errno;
        free(q);
        errno = e;
      } else {
        for (int i = 0; i < 100; i++)
          if (((uint8_t*)p)[i] != (uint8_t)(i ^ 0x5a)) FAIL("realloc lost the prefix");
      }
      break;
    }
    case 6:
    case 7: {   /* small alignment, and one above a SuperSlab's */
      what = which == 6 ? "posix_memalign(64, 1000)" : "posix_memalign(4 MiB, 100)";
      n = which == 6 ? 1000 : 100;
      align = which == 6 ? 64 : 4 * MiB;
      void* out = (void*)(uintptr_t)1;
      int r = posix_memalign(&out, align, n);
      if (r != 0) {
        if (r != ENOMEM) FAIL("%s returned %d, want ENOMEM", what, r);
        if (out != (void*)(uintptr_t)1) FAIL("%s changed *out on failure", what);
        failures++;
        return 0;
      }
      p = out;
      break;
    }
    case 8: what = "aligned_alloc(4096, 5000)"; n = 5000; align = 4096; p = aligned_alloc(align, n); break;
    case 9: what = "memalign(1 MiB, 200 KiB)"; n = 200 * KiB; align = MiB; p = memalign(align, n); break;
    case 10: what = "valloc(10000)"; n = 10000; align = 4096; p = valloc(n); break;
    case 11: what = "pvalloc(300000)"; n = 300000; align = 4096; p = pvalloc(n); break;
    case 12: what = "memalign(64, 100 KiB)"; n = 100 * KiB; align = 64; p = memalign(align, n); break;
    case 13: {   /* realloc of a live block to larger (medium -> medium, large -> larger) */
      what = "realloc(live block, x3)";
      for (int i = 0; i < NLIVE; i++) {
        int k = (int)((next_tag * 7 + (uintptr_t)i) % NLIVE);
        if (live[k].p == NULL || live[k].n > 8 * MiB) continue;
        size_t nn = live[k].n * 3 + 1;
        uint8_t* q = realloc(live[k].p, nn);
        if (q == NULL) {
          if (errno != ENOMEM) FAIL("%s failed with errno %d", what, errno);
          if (!intact(live[k].p, live[k].n, live[k].tag)) FAIL("failed realloc damaged the old block");
          failures++;
          return 0;
        }
        if (!intact(q, live[k].n, live[k].tag)) FAIL("realloc lost the prefix");
        live[k].p = q;
        live[k].n = nn;
        fill(q, nn, live[k].tag);
        successes++;
        return 1;
      }
      return 1;
    }
  }
  if (p == NULL) {
    if (errno != ENOMEM) FAIL("%s returned NULL with errno %d, want ENOMEM", what, errno);
    failures++;
    return 0;
  }
  successes++;
  keep(p, n, align, what);
  return 1;
}
#define NCALLS 14

static int inject(void) {
  const char* after = getenv("HAKMEM_FAIL_MMAP_AFTER");
  const char* count = getenv("HAKMEM_FAIL_MMAP_COUNT");
  long long a = after ? atoll(after) : 0, k = count ? atoll(count) : 0;
  int injecting = a > 0;
  for (int round = 0; round < 6; round++) {
    for (int w = 0; w < NCALLS; w++) (void)call(w);
    check_live("after a round");
    free_some((unsigned)(round % 3) + 2);
    check_live("after freeing");
  }
  malloc_trim(0);
  check_live("after malloc_trim");
  hak_os_stats_t st;
  hak_os_stats(&st);
  size_t main_calls = st.mmap_calls;
  int recovered = 0;
  if (!injecting || k > 0) {
    /* use up the failure window, then everything must work again */
    void* drain[64];
    int nd = 0;
    while (nd < 64 && injecting && (long long)st.mmap_calls < a + k) {
      drain[nd++] = malloc(8 * MiB);   /* each a new mapping (the others are live) */
      hak_os_stats(&st);
    }
    while (nd > 0) free(drain[--nd]);
    if (injecting && (long long)st.mmap_calls < a + k) FAIL("cannot use up the failure window");
    size_t f0 = failures;
    for (int round = 0; round < 2; round++)
      for (int w = 0; w < NCALLS; w++)
        if (!call(w)) FAIL("entry point %d still fails after the injected failures (mmap calls %zu)", w, st.mmap_calls);
    if (failures != f0) FAIL("failures after recovery");
    recovered = 1;
  }
  check_live("at the end");
  for (int i = 0; i < NLIVE; i++) {
    free(live[i].p);
    live[i].p = NULL;
  }
  hak_collect();
  hak_os_stats(&st);
  say("main_calls=%zu mmap_calls=%zu failures=%zu successes=%zu recovered=%d\n", main_calls, st.mmap_calls, failures,
      successes, recovered);
  return 0;
}

/* ---------------------------------------------------------------- rlimit */
typedef struct node_s { struct node_s* next; size_t n; } node_t;

static size_t vm_bytes(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f) {
    if (fscanf(f, "%lu", &pages) != 1) pages = 0;
    fclose(f);
  }
  return pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Allocate blocks of n bytes until malloc fails; returns the list. */
static node_t* fill_until_null(size_t n, node_t* list, size_t* count) {
  for (;;) {
    errno = 0;
    node_t* b = malloc(n);
    if (b == NULL) {
      if (errno != ENOMEM) FAIL("malloc(%zu) failed with errno %d, want ENOMEM", n, errno);
      return list;
    }
    b->next = list;
    b->n = n;
    ((uint8_t*)b)[n - 1] = (uint8_t)n;
    list = b;
    (*count)++;
    if (*count > ((size_t)64 << 20)) FAIL("malloc(%zu) never fails under RLIMIT_AS", n);
  }
}
static void free_list(node_t* l) {
  while (l) {
    node_t* next = l->next;
    if (((uint8_t*)l)[l->n - 1] != (uint8_t)l->n) FAIL("block %p changed", (void*)l);
    free(l);
    l = next;
  }
}

static int rlimit_child(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) != 0) FAIL("getrlimit");
  size_t base = vm_bytes();
  size_t room = 256 * MiB;
  rl.rlim_cur = base + room;
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max) FAIL("hard limit too low");
  if (setrlimit(RLIMIT_AS, &rl) != 0) FAIL("setrlimit");
  say("address space %zu MiB, limit %zu MiB\n", base >> 20, (size_t)(rl.rlim_cur >> 20));
  size_t nl = 0, nm = 0, ns = 0;
  node_t* l = fill_until_null(2 * MiB, NULL, &nl);
  node_t* m = fill_until_null(50 * KiB, NULL, &nm);
  node_t* s = fill_until_null(100, NULL, &ns);
  say("until ENOMEM: %zu large (2 MiB), %zu medium (50 KiB), %zu small (100 B)\n", nl, nm, ns);
  if (nl == 0) FAIL("no large block fits 256 MiB of address space");
  errno = 0;
  void* c = calloc(1000, 1000);
  if (c == NULL && errno != ENOMEM) FAIL("calloc failed with errno %d, want ENOMEM", errno);
  say("calloc(1000, 1000) at the limit: %s\n", c ? "succeeds (fits beside the segments)" : "ENOMEM");
  free(c);
  free_list(s);
  free_list(m);
  free_list(l);
  malloc_trim(0);
  /* the same memory again */
  size_t again = 0;
  for (int i = 0; i < 20; i++) {
    void* p = malloc(2 * MiB);
    if (p == NULL) FAIL("malloc(2 MiB) #%d fails after everything was freed", i);
    memset(p, 1, 2 * MiB);
    free(p);
    again++;
  }
  node_t* l2 = NULL;
  size_t n2 = 0;
  for (size_t i = 0; i < nl / 2; i++) {
    node_t* b = malloc(2 * MiB);
    if (b == NULL) FAIL("after freeing: only %zu of %zu large blocks fit again", i, nl / 2);
    b->next = l2;
    b->n = 2 * MiB;
    ((uint8_t*)b)[b->n - 1] = (uint8_t)b->n;
    l2 = b;
    n2++;
  }
  for (int i = 0; i < 10000; i++) {
    void* p = malloc((size_t)(i % 50) * 20 + 1);
    if (p == NULL) FAIL("small malloc fails after everything was freed");
    free(p);
  }
  free_list(l2);
  say("after freeing: %zu large blocks fit again, small and medium too\n", n2);
  /* raise the limit: more memory */
  rl.rlim_cur = rl.rlim_max;
  if (setrlimit(RLIMIT_AS, &rl) != 0) FAIL("raising the limit");
  node_t* big = NULL;
  for (int i = 0; i < 64; i++) {
    node_t* b = malloc(8 * MiB);
    if (b == NULL) FAIL("malloc(8 MiB) #%d fails after the limit was raised", i);
    b->next = big;
    b->n = 8 * MiB;
    ((uint8_t*)b)[b->n - 1] = (uint8_t)b->n;
    big = b;
  }
  free_list(big);
  say("limit raised: 64 x 8 MiB allocated\n");
  return 0;
}

static int rlimit_test(void) {
  pid_t pid = fork();
  if (pid < 0) FAIL("fork");
  if (pid == 0) _exit(rlimit_child());
  int st;
  if (waitpid(pid, &st, 0) != pid) FAIL("waitpid");
  if (WIFSIGNALED(st)) FAIL("the child was killed by signal %d", WTERMSIG(st));
  if (WEXITSTATUS(st) != 0) FAIL("the child exited with status %d", WEXITSTATUS(st));
  say("rlimit: ok\n");
  return 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "inject") == 0) return inject();
  if (strcmp(mode, "rlimit") == 0) return rlimit_test();
  say("usage: test-faults inject|rlimit\n");
  return 2;
}
