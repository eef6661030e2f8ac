/* Scavenging without growth (src/scavenge.c, _hak_scavenge_tick): a program
 * fills blocks of 2 - 4 KiB, frees 90 % of them at random and goes on
 * allocating and freeing a little without growing.  Within the wait (the
 * release tick, at most once per decommit delay), the free pages of its
 * sparse slabs must go back to the OS without malloc_trim: RSS drops by at
 * least a third of what the frees left behind, the stats report counts the
 * pages, and every surviving block keeps its bytes.  With HAKMEM_SCAVENGE=0
 * nothing is given back.  Asserted on RSS and counts; the wait is a bound
 * (30 s) on a delay of 2 s, not a timing.
 *
 * usage: test-scavenge */
#include "hak_test.h"
#include "hakmem.h"
#include "stats_report.h"

#include <time.h>
#include <unistd.h>

static size_t rss_bytes(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0, res = 0;
  if (f == NULL || fscanf(f, "%lu %lu", &pages, &res) != 2) {
    fprintf(stderr, "test-scavenge: /proc/self/statm unreadable\n");
    exit(2);
  }
  fclose(f);
  return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

enum { N = 16384 };
static unsigned char* blk[N];
static size_t len[N];

int main(void) {
  bool on = hak_option_get("HAKMEM_SCAVENGE") != 0;
  ht_rng_t r = {11};
  for (int i = 0; i < N; i++) {
    len[i] = 2048 + ht_below(&r, 2049);
    blk[i] = malloc(len[i]);
    memset(blk[i], (int)(i & 0xff), len[i]);
  }
  size_t rss_full = rss_bytes();
  for (int i = 0; i < N; i++)
    if (ht_below(&r, 10) != 0) {
      free(blk[i]);
      blk[i] = NULL;
    }
  size_t rss0 = rss_bytes();
  unsigned long long given0 = ht_report_u64(hakmem_stats_print, "\nscavenge: ", "pages_given_back=");
  /* work that does not grow the heap: batches of blocks of many sizes,
   * allocated and freed (their refills run the release tick; a program
   * that only ever takes blocks from its current slabs never reaches a slow
   * path, and neither the release policy nor scavenging runs) */
  double t0 = now_s(), waited = 0;
  size_t rss = rss0;
  unsigned long long given = given0;
  static void* tmp[4096];
  while ((waited = now_s() - t0) < (on ? 30.0 : 4.0)) {
    for (int k = 0; k < 4096; k++) tmp[k] = malloc(16 + ht_below(&r, 1000));
    for (int k = 0; k < 4096; k++) free(tmp[k]);
    usleep(1000);
    rss = rss_bytes();
    given = ht_report_u64(hakmem_stats_print, "\nscavenge: ", "pages_given_back=");
    if (on && rss <= rss0 - rss0 / 3 && given > given0) break;   /* dropped by a third */
  }
  int failures = 0;
  for (int i = 0; i < N; i++) {
    if (blk[i] == NULL) continue;
    for (size_t k = 0; k < len[i]; k += 97)
      if (blk[i][k] != (unsigned char)(i & 0xff)) {
        printf("  FAILED a surviving block (%d, %zu B) lost its bytes at %zu\n", i, len[i], k);
        failures++;
        break;
      }
    free(blk[i]);
  }
  printf("test-scavenge (%s): RSS %zu MB filled, %zu MB after 90 %% freed, %zu MB after %.1f s; %llu pages given back\n",
         on ? "on" : "off", rss_full >> 20, rss0 >> 20, rss >> 20, waited, given - given0);
  if (on && !(rss <= rss0 - rss0 / 3 && given > given0)) {
    printf("  FAILED RSS did not drop by a third within 30 s without malloc_trim\n");
    failures++;
  }
  if (!on && given != given0) {
    printf("  FAILED HAKMEM_SCAVENGE=0 gave %llu pages back\n", given - given0);
    failures++;
  }
  return failures ? 1 : 0;
}
