/* Secure-mode scenarios (run under build/libhakmem-secure.so): each makes one
 * mistake that the default build does not detect and the secure build does.
 *   test-secure NAME  -> prints addr=0x... then makes the mistake */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void* volatile sink;
/* malloc/free of the same size, enough to cycle the quarantine (a freed
 * block is checked when it leaves it) */
static void churn(void) {
  for (int i = 0; i < 20000; i++) {
    sink = malloc(64);
    free(sink);
  }
}
int main(int argc, char** argv) {
  const char* s = argc > 1 ? argv[1] : "";
  setvbuf(stdout, NULL, _IONBF, 0);
  if (!strcmp(s, "overflow_1")) {          /* one byte past the request */
    char* p = malloc(20);
    printf("addr=%p\n", (void*)p);
    p[20] = 'X';
    free(p);
  } else if (!strcmp(s, "overflow_32")) {  /* past the block's end */
    char* p = malloc(24);
    printf("addr=%p\n", (void*)p);
    memset(p, 'X', 24 + 32);
    free(p);
  } else if (!strcmp(s, "write_after_free")) {
    char* p = malloc(64);
    printf("addr=%p\n", (void*)p);
    free(p);
    memset(p + 16, 'X', 16);
    churn();
  } else if (!strcmp(s, "write_after_free_at") && argc > 3) {   /* SIZE OFFSET: one byte, anywhere */
    size_t n = strtoul(argv[2], NULL, 0), at = strtoul(argv[3], NULL, 0);
    char* p = malloc(n);
    printf("addr=%p\n", (void*)p);
    free(p);
    p[at] = 'X';
    churn();
  } else if (!strcmp(s, "large_write_after_free_at") && argc > 3) {   /* SIZE OFFSET, a large block */
    /* its mapping is checked when a new block takes it or the quarantine
     * (16 blocks) lets it go: 40 more blocks of its size do one or the other */
    size_t n = strtoul(argv[2], NULL, 0), at = strtoul(argv[3], NULL, 0);
    char* p = malloc(n);
    printf("addr=%p\n", (void*)p);
    memset(p, 'A', n);
    free(p);
    p[at] = 'X';
    for (int i = 0; i < 40; i++) {
      sink = malloc(n);
      free(sink);
    }
  } else if (!strcmp(s, "large_after_free") && argc > 2) {   /* SIZE: freed bytes read as fill, reuse holds none */
    size_t n = strtoul(argv[2], NULL, 0);
    unsigned char fill = (unsigned char)strtoul(getenv("HAKMEM_SECURE_FILL") ? getenv("HAKMEM_SECURE_FILL") : "0", NULL, 0);
    char* keep[40];
    volatile unsigned char* p = malloc(n);
    memset((void*)p, 'A', n);
    free((void*)p);
    if (fill == 0 && n >= (1u << 20)) {   /* from 1 MiB the freed block's pages are dropped, not filled */
      size_t pages = n / 4096 - 1, resident = 0;
      unsigned char* vec = calloc(pages, 1);
      char* pg = (char*)(((uintptr_t)p + 4095) & ~(uintptr_t)4095);
      if (vec == NULL || mincore(pg, pages * 4096, vec) != 0) return 2;
      for (size_t k = 0; k < pages; k++) resident += vec[k] & 1;
      free(vec);
      if (resident != 0) {
        printf("%zu of the freed block's %zu pages still resident\n", resident, pages);
        return 1;
      }
    }
    for (size_t k = 0; k < n; k += 512)
      if (p[k] != fill || p[n - 1] != fill) {
        printf("freed byte %zu reads %#x, not the fill\n", k, p[k]);
        return 1;
      }
    for (int i = 0; i < 40; i++) {   /* the mappings of freed blocks are taken again: none holds 'A' */
      char* q = keep[i] = malloc(n - (size_t)i * 4096);
      for (size_t k = 0; k < n - (size_t)i * 4096; k += 64)
        if (q[k] == 'A') {
          printf("a new block holds an earlier owner's byte at %zu\n", k);
          return 1;
        }
      memset(q, 'A', n - (size_t)i * 4096);
      if (i % 2) free(keep[i - 1]), free(q);
    }
  } else if (!strcmp(s, "carve_order") && argc > 2) {   /* 1: new blocks must not come in address order; 0: must */
    int want_shuffled = atoi(argv[2]), ascending = 1;
    char* prev = malloc(200);
    for (int i = 0; i < 15; i++) {
      char* p = malloc(200);
      if (p < prev) ascending = 0;
      prev = p;
    }
    printf("%s\n", ascending ? "address order" : "shuffled");
    return ascending == !want_shuffled ? 0 : 1;
  } else if (!strcmp(s, "link_overwrite")) {  /* a forged free-list link */
    char* p = malloc(64);
    char* q = malloc(64);
    printf("addr=%p\n", (void*)p);
    free(p);
    free(q);
    *(uintptr_t*)q = (uintptr_t)0x4141414141414141ull;
    *(uintptr_t*)p = (uintptr_t)0x4141414141414141ull;
    churn();
  } else if (!strcmp(s, "large_overflow")) {  /* runs into the guard page */
    char* p = malloc(1 << 20);
    printf("addr=%p\n", (void*)p);
    memset(p, 1, (1 << 20) + 4096);
  } else if (!strcmp(s, "double_free")) {
    char* p = malloc(32);
    printf("addr=%p\n", (void*)p);
    free(p);
    free(p);
  } else if (!strcmp(s, "control")) {       /* no mistake: everything works */
    for (int i = 0; i < 100000; i++) {
      size_t n = (size_t)(i * 7919 % 5000) + 1;
      char* p = malloc(n);
      memset(p, i & 255, n);
      p = realloc(p, n + 100);
      for (size_t k = 0; k < n; k++)
        if (p[k] != (char)(i & 255)) return 1;
      free(p);
    }
    puts("done");
    return 0;
  } else if (!strcmp(s, "quarantine_budget")) {
    /* the quarantine holds at most its budget of bytes (256 KiB by
     * default), however the sizes of the blocks that come in and go out
     * mix: first it fills with small blocks, then 4 KiB blocks come in
     * (each round frees one, and a small one; 64 of each live).  Exit
     * status 1 when the memory grows past 8 MiB over the start (when each
     * big block pushed out one small one, the ring ended up holding 4,096
     * blocks of 5 KiB: 20 MiB). */
    long page = sysconf(_SC_PAGESIZE), size, rss0 = 0, rss1 = 0;
    void* big[64] = {0};
    void* small[64] = {0};
    FILE* f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld %ld", &size, &rss0) != 2) return 2;
    for (int i = 0; i < 10000; i++) free(malloc(24));
    for (int i = 0; i < 100000; i++) {
      free(big[i % 64]);
      big[i % 64] = malloc(4096);
      memset(big[i % 64], 1, 4096);
      free(small[i % 64]);
      small[i % 64] = malloc(24);
    }
    rewind(f);
    if (fscanf(f, "%ld %ld", &size, &rss1) != 2) return 2;
    printf("rss grew by %ld KiB\n", (rss1 - rss0) * page / 1024);
    return (rss1 - rss0) * page > (8L << 20);
  } else {
    fprintf(stderr, "usage: secure overflow_1|overflow_32|write_after_free|write_after_free_at SIZE OFFSET|large_write_after_free_at SIZE OFFSET|large_after_free SIZE|carve_order 0|1|link_overwrite|large_overflow|double_free|quarantine_budget|control\n");
    return 2;
  }
  puts("done");
  return 0;
}
