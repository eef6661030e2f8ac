#include <malloc.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
/* redis-like: a string grows by realloc (doubling, plus in-place appends), every block's usable size asked */
int main(int argc, char** argv) {
  int mode = argc > 1 ? atoi(argv[1]) : 0;
  size_t sum = 0;
  void* keep[64] = {0};
  for (int r = 0; r < 100000; r++) {
    size_t n = 16;
    char* p = malloc(n); sum += malloc_usable_size(p);
    if (mode == 1) {
      for (int k = 0; k < 6; k++) { n *= 2; p = realloc(p, n); sum += malloc_usable_size(p); }
    } else {
      for (int k = 0; k < 6; k++) { p = realloc(p, n + k); sum += malloc_usable_size(p); }   /* in place */
    }
    sum += malloc_usable_size(p);
    free(keep[r & 63]); keep[r & 63] = p;
  }
  printf("%zu\n", sum);
  return 0;
}
