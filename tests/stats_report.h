/* The stats report (hakmem_stats_print) as a string, for tests that assert
 * on its counts; exits 2 when it cannot be had.  Free the result. */
#ifndef HAK_TEST_STATS_REPORT_H
#define HAK_TEST_STATS_REPORT_H
#include <stdio.h>
#include <stdlib.h>
#include "hakmem.h"

static char* ht_stats_report(void) {
  char* buf = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (f == NULL) {
    fprintf(stderr, "open_memstream failed\n");
    exit(2);
  }
  hakmem_stats_print(f);
  fclose(f);
  if (buf == NULL) exit(2);
  return buf;
}
#endif
