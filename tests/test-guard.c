/* Guarded allocations (HAKMEM_GUARD, src/guard.c): each mode makes one
 * error on a guarded block (run with HAKMEM_GUARD=1: every allocation the
 * pool holds is guarded) in a function with a name of its own, so that
 * tests/cases/core_guard.sh can find the access's and the allocation's
 * stacks in the report.  After the report the program continues (unless
 * HAKMEM_GUARD_ABORT=1) and prints "continued".
 *   overflow        a write 1 byte past a block that ends at its page's end
 *   overflow-page   a write a page past a block that starts its page
 *   underflow       a write 1 byte before a block that starts its page
 *   uaf-read        a read of a freed block
 *   uaf-write       a write to a freed block
 *   double-free     a block freed twice
 *   slack           a write past the end of a 13-byte block, inside its page
 *   chain           the program's own SIGSEGV handler, installed first, gets
 *                   a fault that is not the pool's (exit 7)
 *   clean           guarded blocks used within their bytes, across threads
 *                   and a fork: no report; the pool's figures */
#include "hak_test.h"
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

/* A guarded block of n bytes placed at its page's end (right) or start:
 * guarded blocks alternate, so one of two is.  (A thread's first malloc
 * only looks at the countdown: it is not guarded.) */
static uint8_t* placed(size_t n, bool right) {
  void* keep[8];
  int k = 0;
  uint8_t* p = NULL;
  for (int tries = 0; tries < 8; tries++) {
    size_t guarded = ht_ctl_figure("stats.guard.guarded");
    p = t_malloc(n);
    bool at_end = (((uintptr_t)p + ((n + 15) & ~(size_t)15)) & 4095) == 0, at_start = ((uintptr_t)p & 4095) == 0;
    /* (a slab's first block starts a page too: the count says it was guarded) */
    if ((right ? at_end : at_start) && ht_ctl_figure("stats.guard.guarded") == guarded + 1) break;
    keep[k++] = p;
    p = NULL;
  }
  while (k > 0) t_free(keep[--k]);
  return p;
}

__attribute__((noinline)) static void make_block(uint8_t** out, size_t n, bool right) { *out = placed(n, right); }
__attribute__((noinline)) static void bad_write(volatile uint8_t* q) { *q = 1; }
__attribute__((noinline)) static int bad_read(volatile uint8_t* q) { return *q; }

static void on_segv(int sig) {
  (void)sig;
  _exit(7);
}

static void* free_evens(void* arg) {
  void** v = arg;
  for (int i = 0; i < 200; i += 2) t_free(v[i]);
  return NULL;
}
static int mode_clean(void) {
  printf("clean:\n");   /* (stdout's buffer, maybe a guarded block, made before the count) */
  fflush(stdout);
  size_t live0 = ht_ctl_figure("stats.guard.live");
  /* blocks of every size to a page, written whole, resized, freed */
  for (size_t n = 1; n <= 4096; n = n * 3 + 1) {
    uint8_t* p = t_malloc(n);
    CHECK(p != NULL);
    memset(p, 0x5A, n);
    CHECKF(t_malloc_usable_size(p) >= n, "usable %zu for %zu", t_malloc_usable_size(p), n);
    p = t_realloc(p, n + 100);
    CHECK(p != NULL && p[0] == 0x5A && p[n - 1] == 0x5A);
    t_free(p);
  }
  size_t guarded = ht_ctl_figure("stats.guard.guarded");
  CHECKF(guarded != (size_t)-1 && guarded > 0, "stats.guard.guarded %zu", guarded);
  /* more live than the pool holds: the rest are ordinary blocks */
  static void* v[200];
  for (int i = 0; i < 200; i++) v[i] = t_malloc(100);
  size_t live = ht_ctl_figure("stats.guard.live");
  CHECKF(live <= 64, "%zu guarded blocks live, the pool holds 64", live);
  /* half freed by another thread */
  pthread_t t;
  CHECK(pthread_create(&t, NULL, free_evens, v) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  pid_t pid = fork();
  if (pid == 0) {   /* the child frees the rest and allocates guarded blocks of its own */
    for (int i = 1; i < 200; i += 2) t_free(v[i]);
    for (int i = 0; i < 100; i++) t_free(t_malloc(50));
    _exit(ht_failures != 0 || ht_ctl_figure("stats.guard.errors") != 0);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  for (int i = 1; i < 200; i += 2) t_free(v[i]);
  CHECKF(ht_ctl_figure("stats.guard.errors") == 0, "%zu errors reported", ht_ctl_figure("stats.guard.errors"));
  CHECKF(ht_ctl_figure("stats.guard.live") <= live0 + 2, "%zu guarded blocks live at the end, %zu at the start (what the thread and the fork left: 2 at most)",
         ht_ctl_figure("stats.guard.live"), live0);
  printf("clean: %s (%zu guarded)\n", ht_failures ? "FAILED" : "ok", ht_ctl_figure("stats.guard.guarded"));
  return ht_failures != 0;
}

int main(int argc, char** argv) {
  const char* m = argc > 1 ? argv[1] : "";
  uint8_t* p = NULL;
  if (!strcmp(m, "clean")) return mode_clean();
  if (!strcmp(m, "chain")) {
    signal(SIGSEGV, on_segv);
    make_block(&p, 64, true);   /* (the pool is made now, if it was not: its handler chains to ours) */
    bad_write((volatile uint8_t*)16);
    return 1;
  }
  if (!strcmp(m, "overflow")) {
    make_block(&p, 32, true);
    if (p == NULL) return 2;
    bad_write(p + 32);
  } else if (!strcmp(m, "overflow-page")) {
    make_block(&p, 32, false);
    if (p == NULL) return 2;
    bad_write(p + 4096);
  } else if (!strcmp(m, "underflow")) {
    make_block(&p, 32, false);
    if (p == NULL) return 2;
    bad_write(p - 1);
  } else if (!strcmp(m, "uaf-read") || !strcmp(m, "uaf-write")) {
    make_block(&p, 48, true);
    if (p == NULL) return 2;
    t_free(p);
    if (m[4] == 'r') (void)bad_read(p + 5);
    else bad_write(p + 5);
  } else if (!strcmp(m, "double-free")) {
    make_block(&p, 48, true);
    if (p == NULL) return 2;
    t_free(p);
    t_free(p);
  } else if (!strcmp(m, "slack")) {
    make_block(&p, 13, true);
    if (p == NULL) return 2;
    bad_write(p + 13);
    t_free(p);
  } else {
    fprintf(stderr, "test-guard: unknown mode '%s'\n", m);
    return 2;
  }
  printf("continued\n");
  return 0;
}
