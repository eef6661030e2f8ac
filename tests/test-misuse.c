/* Misuse that hakmem must detect: each mode makes one mistake, after
 * printing the address involved ("addr=0x...") on stdout.  hakmem must then
 * print one line "hakmem: ... double free|invalid pointer ... 0x<addr>" on
 * stderr and abort(); tests/cases/core_misuse.sh checks that.
 *
 * usage: test-misuse MODE   (modes: see the table below) */
#include "hak_test.h"

#include <signal.h>

static char static_block[128] __attribute__((aligned(64)));

static void announce(const void* p) {
  printf("addr=%p\n", p);
  fflush(stdout);
}

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
 * longer at the head of any free list (glibc's tcache detects this too). */
static void double_free_later(size_t n) {
  char* a = (char*)t_malloc(n);
  char* b[8];
  for (int i = 0; i < 8; i++) b[i] = (char*)t_malloc(n);
  if (!a) { printf("malloc failed\n"); exit(2); }
  t_free(a);
  for (int i = 0; i < 8; i++) t_free(b[i]);
  void* c = t_malloc(n * 4 + 100);  /* unrelated traffic */
  t_free(c);
  announce(a);
  t_free(ht_opaque_ptr(a));
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
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
  } else if (strcmp(mode, "double-free-small-later") == 0) {
    double_free_later(48);
  } else if (strcmp(mode, "double-free-medium-later") == 0) {
    double_free_later(20 * 1024);
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
  } else {
    fprintf(stderr, "usage: test-misuse double-free-small|double-free-medium|double-free-large|"
                    "double-free-small-later|double-free-medium-later|free-stack|free-static|free-interior|realloc-invalid\n");
    return 2;
  }
  printf("survived the misuse (no abort)\n");
  return 0;
}
