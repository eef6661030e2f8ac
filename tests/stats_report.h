/* The stats report (hakmem_stats_print) as a string, for tests that assert
 * on its counts; exits 2 when it cannot be had.  Free the result. */
#ifndef HAK_TEST_STATS_REPORT_H
#define HAK_TEST_STATS_REPORT_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hakmem.h"

static inline char* ht_stats_report(void) {
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

/* The number after `key` in the report that `print` writes (hakmem_stats_print,
 * or t_stats_print where the library is looked up at run time), on the line
 * that starts with `line` (NULL: anywhere); 0 when missing. */
static inline unsigned long long ht_report_u64(void (*print)(FILE*), const char* line, const char* key) {
  char* buf = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (f == NULL) return 0;
  print(f);
  fclose(f);
  unsigned long long v = 0;
  const char* l = buf == NULL ? NULL : line == NULL ? buf : strstr(buf, line);
  const char* k = l ? strstr(l, key) : NULL;
  if (k != NULL) v = strtoull(k + strlen(key), NULL, 10);
  free(buf);   /* open_memstream's buffer comes from the program's malloc */
  return v;
}
#endif
