/* Huge pages (src/thp.c): which memory hakmem advises MADV_HUGEPAGE.
 * One scenario per run (test-thp NAME); linked against build/libhakmem.a.
 * What is asserted is hakmem's advice, read back from the VmFlags of
 * /proc/self/smaps ("hg" = MADV_HUGEPAGE, "nh" = MADV_NOHUGEPAGE), and RSS:
 * whether the kernel then finds free 2 MiB pages depends on the machine, so
 * AnonHugePages is printed, not asserted (except that it is 0 when hakmem
 * was told never and the system mode only follows advice).
 *
 *   big       one thread, 48 MiB of 64-byte blocks: the heap's later
 *             segments are advised (auto, always), none is (never)
 *   threads   100 threads keep 100 KiB each: no segment is advised, and RSS
 *             stays far below the 2 MiB a thread a huge page would commit
 *   demote    big, then everything freed and malloc_trim(0): no advised
 *             half is left resident, AnonHugePages 0, RSS back down
 *   medium    big, then 16 MiB of 40,961-byte requests (48 KiB blocks, slabs
 *             of 3 pages): those in a new segment's upper half (about half
 *             of them) lie outside advised memory (auto: at least 40 %;
 *             never: all; always: none), and keep their bytes
 *   large     (run with HAKMEM_BIGCACHE_MAX_MB=0: every large block fresh)
 *             a 64 MiB block touched every 256 KiB is not advised and
 *             commits little (auto, never); after 16 blocks written all
 *             over and freed, a fresh 72 MiB block's mapping is advised, a
 *             512 KiB block's is not; the 72 MiB block grows by realloc to
 *             100 MiB with its contents
 *   held      (test-thp-glibc under LD_PRELOAD of libhakmem-secure.so, whose
 *             large quarantine holds freed mappings and hands them out
 *             again in place of the BigCache) after 8 blocks of 6 MiB
 *             written all over and freed, blocks that take those mappings
 *             again are advised as fresh ones would be: at least 3 of 4
 *             (one in 8 stays unadvised, a probe); none with never */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hak_test.h"

static char mode[16] = "auto";   /* HAKMEM_THP as the library sees it */
static bool sys_madvise;         /* the kernel's THP mode is "madvise" */

/* VmFlags and Rss of the mapping that holds p: 'h' huge advised, 'n'
 * no-huge advised, '-' neither, '?' not found. */
static char vma_advice(const void* p, size_t* rss) {
  FILE* f = fopen("/proc/self/smaps", "r");
  char line[512], adv = '?';
  bool in = false;
  unsigned long a, b;
  while (f && fgets(line, sizeof line, f)) {
    /* a mapping's first line starts with its lower-case hex range; the
     * field lines that follow start with an upper-case name */
    if (strchr("0123456789abcdef", line[0]) && sscanf(line, "%lx-%lx ", &a, &b) == 2) {
      in = a <= (uintptr_t)p && (uintptr_t)p < b;
      continue;
    }
    if (in && rss) sscanf(line, "Rss: %zu", rss);
    if (in && strncmp(line, "VmFlags:", 8) == 0) {
      adv = strstr(line, " hg") ? 'h' : strstr(line, " nh") ? 'n' : '-';
      break;
    }
  }
  if (f) fclose(f);
  return adv;
}

enum { BIG_BLOCKS = (48 << 20) / 64 };
static void* blocks[BIG_BLOCKS];

/* Fill a heap with 48 MiB of 64-byte blocks; count the 4 MiB segments whose
 * blocks' mapping is advised (one block looked at per segment). */
static void big_fill(int* advised, int* segs) {
  uintptr_t last = 0;
  *advised = *segs = 0;
  for (size_t i = 0; i < BIG_BLOCKS; i++) {
    blocks[i] = malloc(64);
    memset(blocks[i], (int)i, 64);
  }
  for (size_t i = 0; i < BIG_BLOCKS; i++) {
    uintptr_t seg = (uintptr_t)blocks[i] >> 22;
    if (seg == last) continue;
    last = seg;
    (*segs)++;
    if (vma_advice(blocks[i], NULL) == 'h') (*advised)++;
  }
}

static void t_big(void) {
  int advised, segs;
  big_fill(&advised, &segs);
  printf("big: %d of %d segments advised, AnonHugePages %zu kB, RSS %zu kB\n", advised, segs, ht_anon_huge_kb(),
         ht_rss_kb());
  CHECKF(segs >= 12, "%d segments for 48 MiB", segs);
  if (!strcmp(mode, "never")) {
    CHECKF(advised == 0, "never: %d segments advised", advised);
    if (sys_madvise) CHECKF(ht_anon_huge_kb() == 0, "never: %zu kB of huge pages", ht_anon_huge_kb());
  } else if (!strcmp(mode, "always")) {
    CHECKF(advised == segs, "always: %d of %d segments advised", advised, segs);
  } else {
    /* auto: the heap's first HAKMEM_THP_HEAP_MB in 4 KiB pages, then advised */
    int plain = (int)(t_option_get("HAKMEM_THP_HEAP_MB") / 4);
    CHECKF(advised >= segs - plain - 1 && advised <= segs - plain, "auto: %d of %d segments advised (%d expected in 4 KiB pages)",
           advised, segs, plain);
  }
}

static pthread_barrier_t bar;
static void* small_thread(void* arg) {
  char** mine = arg;
  for (int i = 0; i < 1600; i++) {   /* 100 KiB */
    mine[i] = malloc(64);
    memset(mine[i], 1, 64);
  }
  pthread_barrier_wait(&bar);   /* everyone holds its blocks */
  pthread_barrier_wait(&bar);   /* main has looked */
  for (int i = 0; i < 1600; i++) free(mine[i]);
  return NULL;
}

static void t_threads(void) {
  enum { N = 100 };
  static char* held[N][1600];
  pthread_t t[N];
  pthread_barrier_init(&bar, NULL, N + 1);
  size_t before = ht_rss_kb();
  for (int i = 0; i < N; i++) CHECKF(pthread_create(&t[i], NULL, small_thread, held[i]) == 0, "create");
  pthread_barrier_wait(&bar);
  int advised = 0;
  for (int i = 0; i < N; i++) advised += vma_advice(held[i][0], NULL) == 'h';
  size_t during = ht_rss_kb();
  printf("threads: %d of %d threads' segments advised, RSS %zu -> %zu kB, AnonHugePages %zu kB\n", advised, N,
         before, during, ht_anon_huge_kb());
  CHECKF(advised == 0, "%d small threads got huge-page segments", advised);
  /* 100 x 100 KiB of blocks and 100 thread stacks' touched pages: ~20 MB;
   * a huge page per thread would be 200 MB more */
  CHECKF(during - before < 80 * 1024, "RSS grew by %zu kB", during - before);
  pthread_barrier_wait(&bar);
  for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
}

static void t_demote(void) {
  int advised, segs;
  size_t start = ht_rss_kb();
  big_fill(&advised, &segs);
  size_t full = ht_rss_kb();
  for (size_t i = 0; i < BIG_BLOCKS; i++) free(blocks[i]);
  malloc_trim(0);
  int still = 0;
  size_t resident_advised = 0;
  for (size_t i = 0; i < BIG_BLOCKS; i += 1024) {
    size_t rss = 0;
    if (vma_advice(blocks[i], &rss) == 'h') {   /* (a freed block's address: its segment may be unmapped) */
      still++;
      resident_advised += rss;
    }
  }
  size_t end = ht_rss_kb();
  printf("demote: %d advised segments, RSS %zu -> %zu -> %zu kB; advised mappings left %d (%zu kB resident), "
         "AnonHugePages %zu kB\n",
         advised, start, full, end, still, resident_advised, ht_anon_huge_kb());
  CHECKF(resident_advised == 0, "%zu kB resident in advised memory after trim", resident_advised);
  CHECKF(ht_anon_huge_kb() == 0, "%zu kB of huge pages after trim", ht_anon_huge_kb());
  /* blocks[] itself (6 MiB of .bss) is resident now, plus slack */
  CHECKF(end < start + sizeof blocks / 1024 + 4 * 1024, "RSS %zu kB after trim (start %zu kB)", end, start);
}

/* Blocks that span pages go to the half of a segment that is not advised
 * (thp.c, _hak_thp_slab): their slabs' ends and their blocks' last pages
 * often stay untouched, which a huge page would commit. */
static void t_medium(void) {
  enum { SZ = 40961, N = (16 << 20) / SZ };
  static unsigned char* m[N];
  int advised, segs;
  big_fill(&advised, &segs);
  int plain = 0, huge = 0;
  for (int i = 0; i < N; i++) {
    m[i] = malloc(SZ);
    CHECKF(m[i] != NULL, "malloc");
    memset(m[i], i & 255, SZ);
  }
  for (int i = 0; i < N; i++) {
    if (vma_advice(m[i], NULL) == 'h') huge++;
    else plain++;
  }
  size_t bad = 0;
  for (int i = 0; i < N; i++)
    for (size_t j = 0; j < SZ; j += 997) bad += m[i][j] != (i & 255);
  printf("medium: %d of %d blocks of %d B in advised memory (small blocks: %d of %d segments), AnonHugePages %zu kB\n",
         huge, N, SZ, advised, segs, ht_anon_huge_kb());
  CHECKF(bad == 0, "%zu bytes changed", bad);
  if (!strcmp(mode, "never")) CHECKF(huge == 0, "never: %d advised", huge);
  else if (!strcmp(mode, "always")) CHECKF(plain == 0, "always: %d not advised", plain);
  else CHECKF(plain * 5 >= N * 2, "auto: only %d of %d medium blocks outside advised memory", plain, N);
  for (int i = 0; i < N; i++) free(m[i]);
}

static void t_large(void) {
  /* no evidence yet: a block touched here and there stays in 4 KiB pages */
  size_t sparse = 64u << 20;
  unsigned char* s = malloc(sparse);
  CHECKF(s != NULL, "malloc 64 MiB");
  size_t rss0 = ht_rss_kb();
  for (size_t i = 0; i < sparse; i += 256u << 10) s[i] = 1;
  size_t rss1 = ht_rss_kb();
  char as = vma_advice(s, NULL);
  printf("large: 64 MiB block touched every 256 KiB: advice '%c', RSS +%zu kB\n", as, rss1 - rss0);
  if (!strcmp(mode, "always")) CHECKF(as == 'h', "always: not advised");
  else CHECKF(as != 'h' && rss1 - rss0 < (8u << 10), "sparse block advised ('%c') or committed (+%zu kB)", as, rss1 - rss0);
  free(s);
  /* freed blocks that were written all over are the evidence for advice */
  for (int i = 0; i < 16; i++) {
    unsigned char* d = malloc(6u << 20);
    CHECKF(d != NULL, "malloc 6 MiB");
    memset(d, 3, 6u << 20);
    free(d);
  }
  size_t n = 72u << 20;   /* more than any mapping freed above: a fresh one */
  unsigned char* p = malloc(n);
  unsigned char* q = malloc(512u << 10);
  memset(p, 5, n);
  memset(q, 6, 512u << 10);
  char ap = vma_advice(p, NULL), aq = vma_advice(q, NULL);
  printf("large: after dense frees, 72 MiB block advice '%c', 512 KiB block '%c', AnonHugePages %zu kB\n", ap, aq,
         ht_anon_huge_kb());
  if (!strcmp(mode, "never")) {
    CHECKF(ap != 'h' && aq != 'h', "never: advised");
  } else {
    CHECKF(ap == 'h', "72 MiB block not advised");
    if (!strcmp(mode, "auto")) CHECKF(aq != 'h', "512 KiB block advised");
  }
  p = realloc(p, 100u << 20);
  CHECKF(p != NULL, "realloc");
  size_t bad = 0;
  for (size_t i = 0; i < n; i += 4093) bad += p[i] != 5;
  CHECKF(bad == 0, "%zu bytes lost growing", bad);
  memset(p + n, 7, (100u << 20) - n);
  free(p);
  free(q);
}

static void t_held(void) {
  enum { N = 4 };
  const size_t sz = 6u << 20;
  /* eight mappings made before any evidence (so not advised), written all
   * over and freed: held, and the evidence */
  unsigned char* d[8];
  for (int i = 0; i < 8; i++) {
    d[i] = malloc(sz);
    CHECKF(d[i] != NULL, "malloc 6 MiB");
    memset(d[i], 3, sz);
  }
  for (int i = 0; i < 8; i++) free(d[i]);
  unsigned char* b[N];
  int advised = 0;
  for (int i = 0; i < N; i++) {
    b[i] = malloc(sz);
    CHECKF(b[i] != NULL, "malloc 6 MiB");
    memset(b[i], 9, sz);
    advised += vma_advice(b[i], NULL) == 'h';
  }
  printf("held: %d of %d blocks in reused mappings advised, AnonHugePages %zu kB\n", advised, N, ht_anon_huge_kb());
  if (!strcmp(mode, "never")) CHECKF(advised == 0, "never: %d advised", advised);
  else CHECKF(advised >= N - 1, "only %d of %d blocks advised after dense frees", advised, N);
  size_t bad = 0;
  for (int i = 0; i < N; i++) {
    for (size_t j = 0; j < sz; j += 4093) bad += b[i][j] != 9;
    free(b[i]);
  }
  CHECKF(bad == 0, "%zu bytes changed", bad);
}

int main(int argc, char** argv) {
  const char* t = argc > 1 ? argv[1] : "";
  const char* m = getenv("HAKMEM_THP");
  if (m && *m) snprintf(mode, sizeof mode, "%s", m);
  FILE* f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  char sys[128] = "";
  if (f) {
    if (!fgets(sys, sizeof sys, f)) sys[0] = 0;
    fclose(f);
  }
  sys_madvise = strstr(sys, "[madvise]") != NULL;
  if (strstr(sys, "[never]") || !f) {
    printf("%s: the kernel has no transparent huge pages (%s): advice only\n", t, f ? "never" : "no sysfs");
  }
  if (!strcmp(t, "big")) t_big();
  else if (!strcmp(t, "threads")) t_threads();
  else if (!strcmp(t, "demote")) t_demote();
  else if (!strcmp(t, "large")) t_large();
  else if (!strcmp(t, "medium")) t_medium();
  else if (!strcmp(t, "held")) t_held();
  else {
    fprintf(stderr, "usage: test-thp big|threads|demote|large|medium|held\n");
    return 2;
  }
  printf("%s (HAKMEM_THP=%s): %s\n", t, mode, ht_failures ? "FAILED" : "ok");
  return ht_failures ? 1 : 0;
}
