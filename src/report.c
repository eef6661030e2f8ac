/* Messages, misuse reports and fatal errors: the bottom of the layers, so
 * every tier can complain without calling up into start-up code.  Nothing
 * here allocates: a message is formatted into a stack buffer and written
 * with write(2) (os.c). */
#include "internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int _hak_snprintf(char* buf, size_t n, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = vsnprintf(buf, n, fmt, ap);
  va_end(ap);
  return r;
}

/* Format into a stack buffer and write(2) it: no stdio, no allocation. */
static void vmessage(const char* fmt, va_list ap) {
  char buf[512];
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  if (n > 0) _hak_os_write_all(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

void _hak_message(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmessage(fmt, ap);
  va_end(ap);
}

void _hak_fatal(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmessage(fmt, ap);
  va_end(ap);
  abort();
}

void _hak_list_corrupt(const void* b) {
  _hak_fatal("hakmem: free list corrupted at block %p (write after free or overflow into a free block)\n", b);
}

void _hak_assert_fail(const char* cond, const char* file, int line) {
  _hak_fatal("hakmem: assertion failed: %s at %s:%d\n", cond, file, line);
}

/* A value as a count (decimal) or, when it looks like an address, in hex. */
static int assert_value(char* buf, size_t n, uint64_t v) {
  return _hak_snprintf(buf, n, v < ((uint64_t)1 << 32) ? "%llu" : "%#llx", (unsigned long long)v);
}

void _hak_assert_fail_cmp(const char* cond, uint64_t a, uint64_t b, const char* file, int line) {
  char va[24], vb[24];
  assert_value(va, sizeof va, a);
  assert_value(vb, sizeof vb, b);
  _hak_fatal("hakmem: assertion failed: %s (%s against %s) at %s:%d\n", cond, va, vb, file, line);
}

/* Misuse: one line naming the operation, the address and the problem, then
 * abort() (HAKMEM_INVALID_FREE=warn prints and goes on, =ignore is silent).
 * The reporters stay out of line: inlined into a free path, the message's
 * stack buffer made every remote free save registers (xthread +3 %
 * instructions). */
static void misuse(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void misuse(const char* fmt, ...) {
  long long mode = hak_opt(INVALID_FREE);
  if (mode == HAK_INVALID_IGNORE) return;
  va_list ap;
  va_start(ap, fmt);
  vmessage(fmt, ap);
  va_end(ap);
  if (mode != HAK_INVALID_WARN) abort();
}

hak_noinline void _hak_invalid_pointer(const char* op, const void* p, const char* why) {
  misuse("hakmem: %s(): invalid pointer %p (%s)\n", op, p, why);
}

hak_noinline void _hak_size_mismatch(const char* op, const void* p, size_t given, size_t usable) {
  misuse("hakmem: %s(): size mismatch for %p (size given %zu, block holds %zu)\n", op, p, given, usable);
}

hak_noinline void _hak_double_free(const char* op, const void* p, size_t size) {
  char sz[48];
  if (size == SIZE_MAX) _hak_snprintf(sz, sizeof sz, "its slab was given back");
  else if (size) _hak_snprintf(sz, sizeof sz, "size %zu", size);
  else _hak_snprintf(sz, sizeof sz, "large block");
  misuse("hakmem: double free of %p (%s) in %s()\n", p, sz, op);
}
