/* Helpers shared by the programs that misuse the heap on purpose (C and C++):
 * test-misuse, test-misuse-suite, test-probes, test-exploits,
 * test-sized-delete. */
#ifndef REL_UTIL_H
#define REL_UTIL_H
#include <stdio.h>

/* Hide a pointer's origin and value from the compiler (no folding of
 * malloc/free pairs, no "free of a stack object" or out-of-bounds
 * diagnostics). */
static inline void* opaque(void* p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}
/* The address a misuse is about, before the misuse, so the test can check
 * that the allocator's report names it. */
static inline void announce(const void* p) {
  printf("addr=%p\n", p);
  fflush(stdout);
}
#endif
