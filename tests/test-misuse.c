/* Misuse that hakmem must detect: each mode makes one mistake, after
 * printing the address involved ("addr=0x...") on stdout.  hakmem must then
 * print one line "hakmem: ... double free|invalid pointer ... 0x<addr>" on
 * stderr and abort(); tests/cases/core_misuse.sh checks that.
 *
 * usage: test-misuse MODE   (modes: see the table below) */
#include "hak_test.h"
#include "misuse_util.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>

static char static_block[128] __attribute__((aligned(64)));

static void warm_up(void) {
  /* make sure the allocator is initialised and has blocks of several sizes */
  void* a[32];
  for (int i = 0; i < 32; i++) a[i] = t_malloc((size_t)(i + 1) * 48);
  for (int i = 0; i < 32; i++) t_free(a[i]);
}

static void double_free(size_t n) {
  char* p = (char*)t_malloc(n);
  if (!p) { printf("malloc failed\n"); exit(2); }
  memset(p, 1, n);
  t_free(p);
  announce(p);
  t_free(ht_opaque_ptr(p));
}

/* free(a), free(other blocks of the same size), free(a): the block is no
 * longer at the head of any free list (glibc's tcache detects this too).
 * The blocks fit in one slab (20 KiB blocks: 6 to a slab), which stays, as
 * its class's only one: a slab that empties beside another is given back,
 * and its pages may already hold another class's live block (stdout's
 * buffer, say) when the stale free comes, which is then a valid free of
 * that block (docs/SECURITY.md, "double free after reuse"). */
/* (with three neighbours: 20 KiB blocks go four to a slab, which stays the
 * class's current one; a slab that empties and goes back leaves a free run,
 * where a second free is reported as an invalid pointer) */
static void double_free_later(size_t n) {
  char* a = (char*)t_malloc(n);
  char* b[3];
  for (int i = 0; i < 3; i++) b[i] = (char*)t_malloc(n);
  if (!a) { printf("malloc failed\n"); exit(2); }
  t_free(a);
  for (int i = 0; i < 3; i++) t_free(b[i]);
  void* c = t_malloc(n * 4 + 100);  /* unrelated traffic */
  t_free(c);
  announce(a);
  t_free(ht_opaque_ptr(a));
}

/* Free p on another thread (announcing it first when `last`). */
static void* free_on_thread(void* p) {
  t_free(p);
  return NULL;
}
static void free_elsewhere(void* p) {
  pthread_t t;
  if (pthread_create(&t, NULL, free_on_thread, p) != 0) { printf("pthread_create failed\n"); exit(2); }
  pthread_join(t, NULL);
}

int main(int argc, char** argv) {
  /* the output's buffer is the test's own, not a malloc between the misuse
   * and its check (a block freed twice is caught only while its memory is
   * not handed out again, and a freed run of pages serves any size) */
  static char outbuf[BUFSIZ];
  setvbuf(stdout, outbuf, _IOLBF, sizeof outbuf);
  const char* mode = argc > 1 ? argv[1] : "";
  warm_up();
  char stack_block[128] __attribute__((aligned(64)));
  memset(stack_block, 0, sizeof stack_block);
  if (strcmp(mode, "double-free-small") == 0) {
    double_free(64);
  } else if (strcmp(mode, "double-free-medium") == 0) {
    double_free(20 * 1024);
  } else if (strcmp(mode, "double-free-large") == 0) {
    double_free(4 * 1024 * 1024);
  } else if (strcmp(mode, "double-free-scavenged") == 0) {
    /* a freed block whose page scavenging gave back (src/scavenge.c): its
     * free cookie went with the page, so the second free is taken; it must
     * be caught before its slab is released under the block still live */
    enum { N = 16 * 8 };
    static char* v[N];
    for (int i = 0; i < N; i++) v[i] = (char*)t_malloc(4000);   /* 4 KiB blocks: 16 to a slab */
    for (int i = 0; i < N; i++)
      if (i % 16 != 0) t_free(v[i]);
    t_malloc_trim(0);
    char* victim = NULL;   /* a block whose cookie word reads zero now: its page was given back */
    for (int i = N - 1; i >= 0 && victim == NULL; i--)
      if (i % 16 != 0 && ((volatile uint64_t*)v[i])[1] == 0) victim = v[i];
    if (victim == NULL) {
      announce(v[1]);   /* not hakmem, or no scavenging: an ordinary double free */
      victim = v[1];
    } else {
      announce(victim);
    }
    t_free(ht_opaque_ptr(victim));
    for (int i = 0; i < N; i += 16) t_free(v[i]);   /* the slabs empty */
  } else if (strcmp(mode, "double-free-small-later") == 0) {
    double_free_later(48);
  } else if (strcmp(mode, "double-free-medium-later") == 0) {
    double_free_later(20 * 1024);
  } else if (strcmp(mode, "double-free-cross-thread") == 0) {
    /* freed by its owner, then again by another thread (remote path) */
    char* p = (char*)t_malloc(80);
    memset(p, 1, 80);
    t_free(p);
    announce(p);
    free_elsewhere(ht_opaque_ptr(p));
  } else if (strcmp(mode, "double-free-remote-first") == 0) {
    /* freed by another thread (remote path), then again by its owner */
    char* keep = (char*)t_malloc(80);  /* keeps the slab from being empty */
    char* p = (char*)t_malloc(80);
    memset(p, 1, 80);
    free_elsewhere(p);
    announce(p);
    t_free(ht_opaque_ptr(p));
    t_free(keep);
  } else if (strcmp(mode, "free-interior-medium") == 0) {
    char* p = (char*)t_malloc(20000);
    memset(p, 1, 20000);
    announce(p + 4096);
    t_free(ht_opaque_ptr(p + 4096));
  } else if (strcmp(mode, "free-interior-large") == 0) {
    char* p = (char*)t_malloc(5 << 20);
    memset(p, 1, 4096);
    announce(p + 4096);
    t_free(ht_opaque_ptr(p + 4096));
  } else if (strcmp(mode, "free-before-block") == 0) {
    char* p = (char*)t_malloc(64);
    memset(p, 1, 64);
    announce(p - 16);
    t_free(ht_opaque_ptr(p - 16));
  } else if (strcmp(mode, "free-segment-base") == 0) {
    /* the 4 MiB-aligned address below a small block: hakmem's metadata */
    char* p = (char*)t_malloc(64);
    void* base = (void*)((uintptr_t)p & ~(uintptr_t)((4 << 20) - 1));
    announce(base);
    t_free(ht_opaque_ptr(base));
  } else if (strcmp(mode, "free-stack") == 0) {
    announce(stack_block);
    t_free(ht_opaque_ptr(stack_block));
  } else if (strcmp(mode, "free-static") == 0) {
    announce(static_block);
    t_free(ht_opaque_ptr(static_block));
  } else if (strcmp(mode, "free-interior") == 0) {
    char* p = (char*)t_malloc(64);
    memset(p, 1, 64);
    announce(p + 16);
    t_free(ht_opaque_ptr(p + 16));
  } else if (strcmp(mode, "realloc-invalid") == 0) {
    announce(stack_block);
    void* q = t_realloc(ht_opaque_ptr(stack_block), 100);
    printf("realloc returned %p\n", q);
  } else if (strcmp(mode, "usable-freed") == 0) {
    char* p = (char*)t_malloc(64);
    char* keep = (char*)t_malloc(64);   /* keeps the slab in use */
    t_free(p);
    announce(p);
    printf("usable %zu\n", t_malloc_usable_size(ht_opaque_ptr(p)));
    t_free(keep);
  } else if (strcmp(mode, "usable-interior") == 0) {
    char* p = (char*)t_malloc(64);
    announce(p + 16);
    printf("usable %zu\n", t_malloc_usable_size(ht_opaque_ptr(p + 16)));
  } else if (strcmp(mode, "usable-uncarved") == 0) {
    /* a block start in a fresh slab of 10 KiB blocks that was never carved
     * (slabs are carved a few blocks at a time) */
    char* p = (char*)t_malloc(10000);
    char* q = p + 6 * (size_t)10240;
    announce(q);
    printf("usable %zu\n", t_malloc_usable_size(ht_opaque_ptr(q)));
  } else if (strcmp(mode, "realloc-freed") == 0) {
    char* p = (char*)t_malloc(64);
    char* keep = (char*)t_malloc(64);
    t_free(p);
    announce(p);
    printf("realloc returned %p\n", t_realloc(ht_opaque_ptr(p), 100));
    t_free(keep);
  } else if (strcmp(mode, "realloc-interior") == 0) {
    char* p = (char*)t_malloc(64);
    announce(p + 16);
    printf("realloc returned %p\n", t_realloc(ht_opaque_ptr(p + 16), 100));
  } else {
    fprintf(stderr, "usage: test-misuse double-free-small|double-free-medium|double-free-large|"
                    "double-free-small-later|double-free-medium-later|double-free-cross-thread|"
                    "double-free-remote-first|double-free-scavenged|free-interior-medium|free-interior-large|"
                    "free-before-block|free-segment-base|free-stack|free-static|free-interior|realloc-invalid|"
                    "usable-freed|usable-interior|usable-uncarved|realloc-freed|realloc-interior\n");
    return 2;
  }
  /* Still here (HAKMEM_INVALID_FREE=warn|ignore): the allocator must not
   * be corrupted, e.g. a double-freed block must not be handed out twice. */
  enum { N = 2000 };
  static char* blk[N];
  static const size_t sizes[] = {48, 64, 80, 20 * 1024, 4 << 20};
  int dup = 0;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    int n = sizes[k] > 100000 ? 8 : N;
    for (int i = 0; i < n; i++) {
      blk[i] = (char*)t_malloc(sizes[k]);
      if (blk[i] == NULL) { printf("malloc failed after the misuse\n"); return 3; }
      memset(blk[i], 0, 8);
      memcpy(blk[i], &i, sizeof i);
    }
    for (int i = 0; i < n; i++) {
      int v;
      memcpy(&v, blk[i], sizeof v);
      if (v != i) dup++;
    }
    for (int i = 0; i < n; i++) t_free(blk[i]);
  }
  if (dup) {
    printf("after the misuse, %d blocks were handed out twice\n", dup);
    return 3;
  }
  printf("survived the misuse (no abort); allocator still consistent\n");
  return 0;
}
