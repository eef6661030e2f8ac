/* Options: print the value hak_option_get() reports for each name given on
 * the command line (NAME=VALUE lines), then run a small allocation workload
 * to show the allocator still works.  Used by tests/cases/core_options.sh.
 *
 * usage: test-opts [HAKMEM_NAME ...] */
#include "hak_test.h"

int main(int argc, char** argv) {
  /* allocate first: options must be in effect from the first call */
  void* first = t_malloc(100);
  if (!ht_has_hakmem()) {
    printf("hakmem not loaded\n");
    return 1;
  }
  for (int i = 1; i < argc; i++) printf("%s=%lld\n", argv[i], t_option_get(argv[i]));
  ht_rng_t r = {3};
  void* blk[512] = {0};
  for (int it = 0; it < 200000; it++) {
    size_t i = (size_t)ht_below(&r, 512);
    if (blk[i]) {
      CHECK(ht_check(blk[i], 16, i));
      t_free(blk[i]);
    }
    size_t n = 16 + (size_t)ht_below(&r, it % 100 == 0 ? 300000 : 2000);
    blk[i] = t_malloc(n);
    REQUIRE(blk[i] != NULL);
    ht_fill(blk[i], 16, i);
  }
  for (size_t i = 0; i < 512; i++) t_free(blk[i]);
  t_free(first);
  printf("workload %s\n", ht_failures ? "FAILED" : "ok");
  return ht_failures ? 1 : 0;
}
