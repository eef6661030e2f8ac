/* smallproc: the resident size of a small process (issue 26: "a program
 * that allocates little pays little").  It makes 100 blocks of 16..808
 * bytes, touches them, and prints its VmRSS, RssAnon and RssFile in KiB
 * from /proc/self/status, read with open/read/write only: stdio and printf
 * would fault in libc pages of their own and hide what the allocator adds.
 *   for a in "" build/libhakmem.so; do LD_PRELOAD=$a build/bench/smallproc; done
 * The kernel maps file pages 64 KiB around each first touch, so a figure
 * moves by tens of KiB from run to run: average many runs.
 * It also prints the resident KiB of libhakmem's own file pages, whole
 * (HakFile) and of its code (HakText), from /proc/self/maps and the present
 * bits of /proc/self/pagemap: the library is linked with 64 KiB segment
 * alignment and keeps the code every process runs together (hak_warm), so
 * HakText is the same in every run (tests/cases/core_smallproc.sh). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put_field(const char* status, const char* key) {
  const char* p = strstr(status, key);
  if (p == NULL) return;
  const char* e = strchr(p, '\n');
  char line[64];
  size_t n = 0;
  for (const char* q = p; q < e && n < sizeof line - 2; q++)
    if (*q != ' ' && *q != '\t') line[n++] = *q;
  line[n++] = ' ';
  if (write(1, line, n) < 0) exit(1);
}

static void put_kib(const char* key, unsigned long kib) {
  char line[48], digits[24];
  size_t n = 0, d = 0;
  while (*key) line[n++] = *key++;
  do digits[d++] = (char)('0' + kib % 10); while ((kib /= 10) != 0);
  while (d) line[n++] = digits[--d];
  line[n++] = 'k', line[n++] = 'B', line[n++] = ' ';
  if (write(1, line, n) < 0) exit(1);
}

static unsigned long hex_at(const char** p) {
  unsigned long v = 0;
  for (;; (*p)++) {
    char c = **p;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return v;
    v = v * 16 + (unsigned long)d;
  }
}

/* Resident KiB of libhakmem's mappings (all, and executable ones). */
static void hak_pages(void) {
  static char maps[1 << 16];
  int fd = open("/proc/self/maps", O_RDONLY), pm = open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0 || pm < 0) return;
  size_t n = 0;
  ssize_t k;
  while (n < sizeof maps - 1 && (k = read(fd, maps + n, sizeof maps - 1 - n)) > 0) n += (size_t)k;
  close(fd);
  maps[n] = 0;
  unsigned long all = 0, text = 0;
  for (char* l = maps; *l != 0;) {
    char* e = strchr(l, '\n');
    if (e == NULL) break;
    *e = 0;
    if (strstr(l, "libhakmem") != NULL) {
      const char* p = l;
      unsigned long lo = hex_at(&p);
      p++;
      unsigned long hi = hex_at(&p);
      int x = p[3] == 'x';
      for (unsigned long a = lo; a < hi; a += 4096) {
        uint64_t v = 0;
        if (pread(pm, &v, sizeof v, (off_t)(a / 4096 * 8)) == sizeof v && (v >> 63)) {
          all += 4;
          if (x) text += 4;
        }
      }
    }
    l = e + 1;
  }
  close(pm);
  put_kib("HakFile:", all);
  put_kib("HakText:", text);
}

int main(void) {
  void* keep[100];
  for (int i = 0; i < 100; i++) {
    keep[i] = malloc(16 + 8 * (size_t)i);
    if (keep[i] == NULL) return 1;
    memset(keep[i], 1, 16 + 8 * (size_t)i);
  }
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY);
  if (fd < 0) return 1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 1;
  buf[n] = 0;
  put_field(buf, "VmRSS:");
  put_field(buf, "RssAnon:");
  put_field(buf, "RssFile:");
  hak_pages();
  if (write(1, "\n", 1) < 0) return 1;
  for (int i = 0; i < 100; i++) free(keep[i]);
  return 0;
}
