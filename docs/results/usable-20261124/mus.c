#include <malloc.h>
#include <stdlib.h>
#include <stdio.h>
int main(int argc, char** argv) {
  int mode = argc > 1 ? atoi(argv[1]) : 0;
  void* p[256]; size_t sum = 0;
  for (int i = 0; i < 256; i++) p[i] = malloc(16 + (i * 37) % 500);
  for (int r = 0; r < 4000; r++)
    for (int i = 0; i < 256; i++) {
      if (mode == 0) sum += malloc_usable_size(p[i]);
      else { size_t n = malloc_usable_size(p[i]); p[i] = realloc(p[i], n + 1 + (r & 7)); sum += n; }
    }
  printf("%zu\n", sum);
  return 0;
}
