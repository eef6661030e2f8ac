/* Tests of call-site learning (HAKMEM_LEARN), linked against build/libhakmem.a
 * (or the TSan build with -DSITE_TSAN, hak_ names).  One scenario per run:
 *   identity    distinct call sites get distinct, stable identities
 *   bounded     100,000 distinct call sites (generated code): the table stays
 *               bounded and allocation keeps working
 *   converge_cache    a hot site reusing one size at once: learns "cache"
 *   converge_release  a site whose blocks are huge and kept long: with a high
 *                     cost of resident bytes, learns to stop keeping them
 *   long_trim   a long-lived site reusing a bigger cached block: the pages
 *               beyond its size are decommitted (learned, so only with
 *               learning on)
 *   grow_hint   a site whose blocks grow by realloc: after learning, a new
 *               block starts in a cached block that covers its final size
 *   ring ON|OFF a site holding one block at a time keeps at most two of its
 *               freed blocks cached (learned ring size); none of that with
 *               learning off
 *   off         learning off: exactly the profile's behaviour (same OS calls
 *               as with site tracking entirely off)
 *   threads     several threads sharing sites (run under TSan) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#if defined SITE_TSAN && !defined HT_HAK
#define HT_HAK   /* hak_ names: the TSan build of the library has no malloc override */
#endif
#include "hak_test.h"   /* CHECKF, ht_failures, t_malloc/t_free */
#define MALLOC t_malloc
#define FREE t_free


#define BIG (1u << 20)

__attribute__((noinline)) static void* site_a(void) { return MALLOC(BIG); }
__attribute__((noinline)) static void* site_b(void) { return MALLOC(BIG); }
__attribute__((noinline)) static void* site_calloc(void) { return calloc(1, BIG); }
__attribute__((noinline)) static void* site_realloc(void) { return realloc(NULL, BIG); }

static void t_identity(void) {
  void* a1 = site_a();
  void* a2 = site_a();
  void* b = site_b();
  void* c = site_calloc();
  void* r = site_realloc();
  void* sa1 = hak_block_site(a1);
  void* sa2 = hak_block_site(a2);
  void* sb = hak_block_site(b);
  CHECKF(sa1 != NULL, "no site recorded");
  CHECKF(sa1 == sa2, "same call site, two identities %p %p", sa1, sa2);
  CHECKF(sa1 != sb, "two call sites, one identity %p", sa1);
  /* the identity is the user's code, not an internal frame of hakmem */
  CHECKF((uintptr_t)sa1 > (uintptr_t)site_a && (uintptr_t)sa1 < (uintptr_t)site_a + 64, "site %p not in site_a %p", sa1,
        (void*)site_a);
  CHECKF((uintptr_t)sb > (uintptr_t)site_b && (uintptr_t)sb < (uintptr_t)site_b + 64, "site %p not in site_b", sb);
  void* sc = hak_block_site(c);
  void* sr = hak_block_site(r);
  CHECKF((uintptr_t)sc > (uintptr_t)site_calloc && (uintptr_t)sc < (uintptr_t)site_calloc + 64, "calloc site %p", sc);
  CHECKF((uintptr_t)sr > (uintptr_t)site_realloc && (uintptr_t)sr < (uintptr_t)site_realloc + 64, "realloc site %p", sr);
  CHECKF(hak_block_site(malloc(64)) == NULL, "small blocks have no site");
  FREE(a1), FREE(a2), FREE(b), FREE(c), FREE(r);
  /* stable across frees and reuse */
  void* a3 = site_a();
  CHECKF(hak_block_site(a3) == sa1, "identity changed after reuse");
  FREE(a3);
}

/* 100,000 call sites: stubs of generated machine code, each calling malloc
 * from its own address (x86-64 only). */
static void t_bounded(void) {
#if defined(__x86_64__)
  enum { N = 100000, STUB = 32 };
  uint8_t* code = mmap(NULL, (size_t)N * STUB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECKF(code != MAP_FAILED, "mmap");
  uint64_t fn = (uint64_t)(uintptr_t)&malloc;
  for (int i = 0; i < N; i++) {
    uint8_t* p = code + (size_t)i * STUB;
    static const uint8_t pre[] = {0x48, 0x83, 0xEC, 0x08, 0xBF};   /* sub rsp,8; mov edi,imm32 */
    memcpy(p, pre, sizeof pre);
    uint32_t sz = 200u << 10;
    memcpy(p + 5, &sz, 4);
    p[9] = 0x48, p[10] = 0xB8;   /* movabs rax, imm64 */
    memcpy(p + 11, &fn, 8);
    p[19] = 0xFF, p[20] = 0xD0;                           /* call rax */
    p[21] = 0x48, p[22] = 0x83, p[23] = 0xC4, p[24] = 0x08;   /* add rsp,8 */
    p[25] = 0xC3;                                         /* ret */
  }
  CHECKF(mprotect(code, (size_t)N * STUB, PROT_READ | PROT_EXEC) == 0, "mprotect");
  hak_os_stats_t before;
  hak_os_stats(&before);
  for (int i = 0; i < N; i++) {
    void* (*stub)(void) = (void* (*)(void))(void*)(code + (size_t)i * STUB);
    void* q = stub();
    CHECKF(q != NULL, "malloc from stub %d", i);
    if (q == NULL) break;
    memset(q, 1, 4096);
    FREE(q);
  }
  hak_os_stats_t after;
  hak_os_stats(&after);
  /* the site table is static: mapping must not grow with the number of sites */
  printf("bounded: mapped before %zu after %zu\n", before.mapped_bytes, after.mapped_bytes);
  CHECKF(after.mapped_bytes <= before.mapped_bytes + (64u << 20), "mapped grew by %zu",
        after.mapped_bytes - before.mapped_bytes);
  munmap(code, (size_t)N * STUB);
#endif
}

__attribute__((noinline)) static void* hot_site(size_t n) { return MALLOC(n); }
/* The learner explores: now and then (1 % of its decisions once settled,
 * each kept until the site's next measured episode, 16 frees later) it plays
 * another admissible strategy.  So a site's convergence is judged on what it
 * plays over the last `window` rounds, by majority, not on the strategy of
 * the last round alone (that failed 3 runs in 100 when an exploration fell
 * on the last decision). */
static void t_converge_cache(void) {
  void* site = NULL;
  int good = 0, window = 1000, st = -1;
  for (int i = 0; i < 3000; i++) {
    unsigned char* p = hot_site(512u << 10);
    for (size_t k = 0; k < (512u << 10); k += 4096) p[k] = 1;
    site = hak_block_site(p);
    FREE(p);
    st = hak_site_strategy(site);
    /* cache and prefault both keep the block (prefault differs only for a
     * fresh mapping, which a hot site never gets): either is right */
    if (i >= 3000 - window) good += st == 0 || st == 3;
  }
  printf("converge_cache: strategy %d; cache or prefault in %d of the last %d rounds\n", st, good, window);
  CHECKF(good * 2 > window, "hot reuse site played cache or prefault in only %d of %d rounds", good, window);
}

__attribute__((noinline)) static void* huge_site(size_t n) { return MALLOC(n); }
static void t_converge_release(void) {
  void* site = NULL;
  int good = 0, window = 100, st = -1;
  for (int i = 0; i < 400; i++) {
    size_t n = (size_t)(16 + i % 16) << 20;
    unsigned char* p = huge_site(n);
    for (size_t k = 0; k < n; k += 4096) p[k] = 1;
    site = hak_block_site(p);
    FREE(p);
    st = hak_site_strategy(site);
    if (i >= 400 - window) good += st == 1 || st == 2 || st == 4;
    usleep(2000);   /* the block would be kept ~2 ms between uses */
  }
  printf("converge_release: strategy %d; release, decommit or populate in %d of the last %d rounds\n", st, good,
         window);
  CHECKF(good * 2 > window, "huge long-kept site played release, decommit or populate in only %d of %d rounds", good,
         window);
}

__attribute__((noinline)) static void* long_site(size_t n) { return MALLOC(n); }
static size_t resident_pages(void* from, void* to) {
  uintptr_t a = ((uintptr_t)from + 4095) & ~(uintptr_t)4095, b = (uintptr_t)to & ~(uintptr_t)4095;
  if (b <= a) return 0;
  size_t n = (b - a) / 4096, in = 0;
  unsigned char* vec = malloc(n);
  if (mincore((void*)a, b - a, vec) == 0)
    for (size_t i = 0; i < n; i++) in += vec[i] & 1;
  free(vec);
  return in;
}
static void t_long_trim(void) {
  enum { WS = 16 };
  unsigned char* ring[WS] = {0};
  for (int i = 0; i < 40 * WS; i++) {   /* blocks live 2 * WS large operations */
    int k = i % WS;
    FREE(ring[k]);
    ring[k] = long_site(2u << 20);
    memset(ring[k], 1, 2u << 20);
  }
  unsigned char* old = ring[0];
  FREE(old);
  ring[0] = long_site(1u << 20);   /* reuses the 2 MiB block it just freed */
  size_t in = resident_pages(ring[0] + (1u << 20) + 4096, ring[0] + (2u << 20) - 8192);
  printf("long_trim: %s, %zu pages resident beyond the size\n", ring[0] == old ? "same block" : "another block", in);
  CHECKF(ring[0] == old, "the freed block was not reused");
  CHECKF(in == 0, "%zu idle pages left resident in a long-lived block", in);
  for (int k = 0; k < WS; k++) FREE(ring[k]);
}

/* The learned ring: a site that holds one block at a time keeps at most two
 * of its freed blocks cached.  Blocks of 0.5, 1.5, 4.5, 13.5 and 40.5 MiB
 * (each too big for the cached ones to serve), written and freed one after
 * the other: with learning, the first two stay cached and the rest are
 * decommitted (HAKMEM_DECOMMIT=dontneed: RSS falls at once); without, all
 * 60 MiB stay cached within the 128 MiB budget.  argv: "on" or "off". */
static size_t statm_rss_kb(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, res = 0;
  if (f) {
    if (fscanf(f, "%lu %lu", &size, &res) != 2) res = 0;
    fclose(f);
  }
  return res * ((size_t)sysconf(_SC_PAGESIZE) / 1024);
}
__attribute__((noinline)) static void* ring_site(size_t n) { return MALLOC(n); }
static void t_ring(const char* mode) {
  size_t start = statm_rss_kb(), n = 512u << 10;
  for (int i = 0; i < 5; i++, n *= 3) {
    unsigned char* p = ring_site(n);
    memset(p, 1, n);
    FREE(p);
  }
  size_t grew = statm_rss_kb() - start;
  printf("ring (%s): RSS grew by %zu KiB after 5 freed blocks of 0.5..40.5 MiB\n", mode, grew);
  if (!strcmp(mode, "on"))
    CHECKF(grew < (8u << 10), "%zu KiB kept: the site's ring (2 blocks: 2 MiB) did not bound its cache", grew);
  else
    CHECKF(grew > (40u << 10), "%zu KiB kept: without learning, every freed block should stay cached", grew);
}

__attribute__((noinline)) static void* grow_site(size_t n) { return MALLOC(n); }
__attribute__((noinline)) static void* other_site(size_t n) { return MALLOC(n); }
static void t_grow_hint(void) {
  long faults = 0;
  for (int i = 0; i < 40; i++) {
    /* another site's block of the starting size is freed first: without
     * the hint the growing block would start in it */
    unsigned char* o = other_site(300u << 10);
    memset(o, 1, 300u << 10);
    FREE(o);
    size_t n = 200u << 10;
    unsigned char* p = grow_site(n);
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    memset(p, 2, n);
    while (n < (16u << 20)) {
      size_t m = n * 2;
      p = realloc(p, m);
      CHECKF(p != NULL && p[n - 1] == 2 && p[0] == 2, "realloc lost the contents");
      memset(p + n, 2, m - n);
      n = m;
    }
    getrusage(RUSAGE_SELF, &r1);
    if (i >= 20) faults += r1.ru_minflt - r0.ru_minflt;
    FREE(p);
  }
  printf("grow_hint: %ld faults in 20 growths to 16 MiB after learning\n", faults);
  /* without the hint ~26 per growth (the first 300 KiB), without any reuse 4,096 */
  CHECKF(faults < 20 * 8, "%ld faults growing", faults);
}

static void t_off(void) {
  /* a deterministic large workload; the script compares the printed counts */
  uint64_t s = 7;
  void* slot[8] = {0};
  for (int i = 0; i < 4000; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    int k = (int)(s >> 61);
    FREE(slot[k]);
    size_t n = (size_t)(200u << 10) + (size_t)((s >> 20) % (6u << 20));
    slot[k] = MALLOC(n);
    memset(slot[k], 1, 4096);
  }
  for (int k = 0; k < 8; k++) FREE(slot[k]);
  /* the BigCache's decisions (OS call counts also depend on where ASLR puts
   * mappings, so they are not compared) */
  char* buf = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  hakmem_stats_print(f);
  fclose(f);
  char* l = strstr(buf, "bigcache:");
  char* e = l ? strchr(l, '\n') : NULL;
  if (e) *e = 0;
  printf("off: %s\n", l ? l : "(no bigcache line)");
  free(buf);
}

static void* thread_body(void* arg) {
  (void)arg;
  for (int i = 0; i < 300; i++) {
    void* p = hot_site(300u << 10);
    memset(p, 2, 8192);
    (void)hak_block_site(p);
    FREE(p);
    void* q = huge_site(4u << 20);
    FREE(q);
  }
  return NULL;
}
static void t_threads(void) {
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, thread_body, NULL);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
}

int main(int argc, char** argv) {
  const char* t = argc > 1 ? argv[1] : "";
  if (!strcmp(t, "identity")) t_identity();
  else if (!strcmp(t, "bounded")) t_bounded();
  else if (!strcmp(t, "converge_cache")) t_converge_cache();
  else if (!strcmp(t, "converge_release")) t_converge_release();
  else if (!strcmp(t, "long_trim")) t_long_trim();
  else if (!strcmp(t, "grow_hint")) t_grow_hint();
  else if (!strcmp(t, "off")) t_off();
  else if (!strcmp(t, "ring") && argc > 2) t_ring(argv[2]);
  else if (!strcmp(t, "threads")) t_threads();
  else {
    fprintf(stderr, "usage: test-sites SCENARIO\n");
    return 2;
  }
  printf("%s: %s\n", t, ht_failures ? "FAILED" : "ok");
  return ht_failures ? 1 : 0;
}
