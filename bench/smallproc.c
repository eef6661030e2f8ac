/* smallproc: the resident size of a small process (issue 26: "a program
 * that allocates little pays little").  It makes 100 blocks of 16..808
 * bytes, touches them, and prints its VmRSS, RssAnon and RssFile in KiB
 * from /proc/self/status, read with open/read/write only: stdio and printf
 * would fault in libc pages of their own and hide what the allocator adds.
 *   for a in "" build/libhakmem.so; do LD_PRELOAD=$a build/bench/smallproc; done
 * The kernel maps file pages 64 KiB around each first touch, so a figure
 * moves by tens of KiB from run to run: average many runs. */
#include <fcntl.h>
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
  if (write(1, "\n", 1) < 0) return 1;
  for (int i = 0; i < 100; i++) free(keep[i]);
  return 0;
}
