/* OS-call and page-fault budget (SPEC: "almost no OS calls in steady state";
 * BigCache: "repeated large alloc/free costs no syscall and few page
 * faults").  Counts come from hak_os_stats() and getrusage().
 *
 *   1. the SPEC's mixed workload (working set 400 slots, sizes <= 1 KiB), 2M
 *      ops after a warm-up: at most 2 OS calls in total
 *   2. 1000 x malloc+touch+free of one large size (300 KiB .. 32 MiB): at
 *      most 2 % of the rounds may call mmap/munmap
 *   3. the SPEC's "VM scenario": 100 x malloc(2 MiB) + memset + free: at most
 *      600 minor page faults (the prototype's 513 is the floor)
 *
 * usage: test-syscalls */
#include "hak_test.h"

#include <sys/resource.h>

static size_t os_calls(const hak_os_stats_t* s) {
  return s->mmap_calls + s->munmap_calls + s->madvise_calls + s->mprotect_calls + s->mremap_calls;
}

/* A guarded-allocation figure, 0 where the query API has none. */
static size_t guard_figure(const char* name) {
  size_t v = ht_ctl_figure(name);
  return v == (size_t)-1 ? 0 : v;
}

static long minflt(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

static void steady_small(void) {
  ht_begin("steady state: 2M ops of malloc/free <= 1 KiB, working set 400 slots");
  enum { SLOTS = 400 };
  void* slot[SLOTS] = {0};
  ht_rng_t r = {5};
  hak_os_stats_t a, b;
  long ops = 2000000, warm = 200000;
  size_t g0 = 0, live0 = 0;
  for (long i = 0; i < warm + ops; i++) {
    if (i == warm) {
      t_os_stats(&a);
      g0 = guard_figure("stats.guard.guarded");
      live0 = guard_figure("stats.guard.live");
    }
    size_t k = (size_t)ht_below(&r, SLOTS);
    if (slot[k]) {
      t_free(slot[k]);
      slot[k] = NULL;
    } else {
      slot[k] = t_malloc(1 + (size_t)ht_below(&r, 1024));
      REQUIRE(slot[k] != NULL);
      *(volatile char*)slot[k] = 1;
    }
  }
  t_os_stats(&b);
  size_t guarded = guard_figure("stats.guard.guarded") - g0;
  for (int k = 0; k < SLOTS; k++) t_free(slot[k]);
  /* guarded allocations (HAKMEM_GUARD, on by default) cost a call at
   * malloc (mprotect) and one at free (mmap, in place), each: those made in
   * the window, and the frees of those live at its start; the allocator's
   * own stay at 2 at most */
  size_t calls = os_calls(&b) - os_calls(&a), guard_calls = 2 * guarded + live0;
  CHECKF(calls <= 2 + guard_calls, "%zu OS calls during %ld steady-state ops (mmap %zu, munmap %zu, madvise %zu, mprotect %zu; %zu guarded)",
         calls, ops, b.mmap_calls - a.mmap_calls, b.munmap_calls - a.munmap_calls,
         b.madvise_calls - a.madvise_calls, b.mprotect_calls - a.mprotect_calls, guarded);
  printf("  %zu OS calls in %ld ops (%zu guarded blocks: %zu of their calls at most)\n", calls, ops, guarded, guard_calls);
}

static void large_reuse(void) {
  ht_begin("repeated large malloc/free of one size reuses memory (BigCache)");
  static const size_t sizes[] = {300 << 10, 1 << 20, 2 << 20, (2 << 20) + 4096, 8 << 20,
                                 32 << 20};
  enum { ROUNDS = 1000 };
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    char* w = (char*)t_malloc(n);
    REQUIRE(w != NULL);
    w[0] = 1;
    t_free(w);
    hak_os_stats_t a, b;
    t_os_stats(&a);
    for (int i = 0; i < ROUNDS; i++) {
      char* p = (char*)t_malloc(n);
      REQUIRE(p != NULL);
      p[0] = 1;
      p[n / 2] = 2;
      p[n - 1] = 3;
      t_free(p);
    }
    t_os_stats(&b);
    size_t mm = (b.mmap_calls - a.mmap_calls) + (b.munmap_calls - a.munmap_calls) +
                (b.mremap_calls - a.mremap_calls);
    CHECKF(mm <= ROUNDS / 50, "size %zu: %zu mmap/munmap/mremap calls in %d malloc/free rounds", n,
           mm, ROUNDS);
    printf("  size %8zu: %zu mmap/munmap/mremap, %zu madvise in %d rounds\n", n, mm,
           b.madvise_calls - a.madvise_calls, ROUNDS);
  }
}

static void vm_scenario(void) {
  ht_begin("VM scenario: 100 x (malloc 2 MiB, memset, free): page faults");
  size_t n = 2 << 20;
  long f0 = minflt();
  hak_os_stats_t a, b;
  t_os_stats(&a);
  for (int i = 0; i < 100; i++) {
    char* p = (char*)t_malloc(n);
    REQUIRE(p != NULL);
    memset(p, i, n);
    t_free(p);
  }
  t_os_stats(&b);
  long faults = minflt() - f0;
  CHECKF(faults <= 600, "%ld minor page faults (prototype: 513, mimalloc: 2, glibc: 1025)", faults);
  printf("  %ld minor page faults, %zu OS calls\n", faults, os_calls(&b) - os_calls(&a));
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("test-syscalls: %s names, profile %lld\n", T_NAMES, t_option_get("HAKMEM_PROFILE"));
  steady_small();
  large_reuse();
  vm_scenario();
  return ht_done("test-syscalls");
}
