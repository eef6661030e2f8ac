/* Call stacks for the heap profiler (prof.c).  Debian's programs and
 * libraries are built without frame pointers, so the walk that names their
 * functions reads the unwind tables: libunwind, as gperftools does, loaded
 * with dlopen when profiling starts, so that hakmem has no dependency on it
 * while profiling is off (nor a link-time one at all).  Where it is missing
 * (or HAKMEM_PROF_UNWIND=fp) a frame-pointer walk stands in, bounded to the
 * thread's own stack mapping so that a broken frame chain ends the walk
 * instead of faulting.  Neither calls malloc on hakmem's behalf. */
#include "internal.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

typedef int (*unw_backtrace_fn)(void** buf, int size);
static unw_backtrace_fn unw_bt;
/* Threads inside libunwind now: a fork child in which another thread was
 * there may find libunwind's locks and caches half-updated, and walks
 * frame pointers instead (_hak_unwind_fork_child). */
static _Atomic(int) unw_inside;
static bool unw_off;   /* this process (a fork child) does not use libunwind */

void _hak_unwind_init(void) {
  if (unw_bt != NULL || hak_opt(PROF_UNWIND) == 2) return;
  void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    if (hak_opt(PROF_UNWIND) == 1)
      _hak_message("hakmem: HAKMEM_PROF_UNWIND=libunwind, but libunwind.so.8 does not load: stacks from frame pointers\n");
    return;
  }
  /* Per-thread caches of unwind information: no lock of libunwind's is held
   * across threads, so a fork can leave none taken.  (UNW_CACHE_PER_THREAD
   * is 2 in libunwind.h; the symbols are libunwind's x86-64 local names.) */
  typedef int (*set_policy_fn)(void* as, int policy);
  set_policy_fn set_policy = (set_policy_fn)dlsym(lib, "_ULx86_64_set_caching_policy");
  void** local_as = (void**)dlsym(lib, "_ULx86_64_local_addr_space");
  if (set_policy != NULL && local_as != NULL) set_policy(*local_as, 2);
  unw_bt = (unw_backtrace_fn)dlsym(lib, "unw_backtrace");
}

const char* _hak_unwind_method(void) { return unw_bt != NULL && !unw_off ? "libunwind" : "frame pointers"; }

/* ---------------------------------------------------------------- frame pointers */
/* The thread's stack mapping, found once in /proc/self/maps (read with
 * open/read into a stack buffer: no stdio, no allocation). */
static __thread uintptr_t stack_lo __attribute__((tls_model("initial-exec")));
static __thread uintptr_t stack_hi __attribute__((tls_model("initial-exec")));

static uintptr_t parse_hex(const char** s) {
  uintptr_t v = 0;
  for (;; (*s)++) {
    char c = **s;
    if (c >= '0' && c <= '9') v = v * 16 + (uintptr_t)(c - '0');
    else if (c >= 'a' && c <= 'f') v = v * 16 + (uintptr_t)(c - 'a' + 10);
    else return v;
  }
}

static bool stack_mapping(uintptr_t sp, uintptr_t* lo, uintptr_t* hi) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  size_t have = 0;
  bool found = false;
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
    if (r <= 0) break;
    have += (size_t)r;
    buf[have] = 0;
    char* line = buf;
    char* nl;
    while ((nl = memchr(line, '\n', have - (size_t)(line - buf))) != NULL) {
      const char* s = line;
      uintptr_t a = parse_hex(&s);
      if (*s == '-') {
        s++;
        uintptr_t b = parse_hex(&s);
        if (sp >= a && sp < b) {
          *lo = a;
          *hi = b;
          found = true;
          break;
        }
      }
      line = nl + 1;
    }
    if (found) break;
    have -= (size_t)(line - buf);   /* keep the partial last line */
    memmove(buf, line, have);
    if (have == sizeof buf - 1) have = 0;   /* (a line longer than the buffer: drop it) */
  }
  close(fd);
  return found;
}

/* Walk saved frame pointers: each frame's pointer must lie above the last,
 * 8-aligned, inside this thread's stack mapping, so a frame chain that
 * code without frame pointers (or a corrupted stack) leaves ends the walk
 * instead of leading it into unmapped memory. */
static hak_noinline int fp_walk(uintptr_t* pcs, int max) {
  uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
  if (fp < stack_lo || fp >= stack_hi) {
    /* a new thread, or a signal handler's alternate stack */
    if (!stack_mapping(fp, &stack_lo, &stack_hi)) return 0;
  }
  int n = 0;
  while (n < max) {
    if ((fp & 7) != 0 || fp < stack_lo || fp + 16 > stack_hi) break;
    uintptr_t next = ((const uintptr_t*)fp)[0], ra = ((const uintptr_t*)fp)[1];
    if (ra < HAK_OS_PAGE) break;
    pcs[n++] = ra;
    if (next <= fp) break;
    fp = next;
  }
  return n;
}

/* The return addresses of the caller's stack, innermost first (the first
 * is inside the caller itself). */
hak_noinline int _hak_unwind(uintptr_t* pcs, int max) {
  if (unw_bt != NULL && !unw_off) {
    atomic_fetch_add_explicit(&unw_inside, 1, memory_order_acquire);
    int n = unw_bt((void**)pcs, max);
    atomic_fetch_sub_explicit(&unw_inside, 1, memory_order_release);
    return n > 0 ? n : 0;
  }
  return fp_walk(pcs, max);
}

void _hak_unwind_fork_child(void) {
  if (hak_load_relaxed(&unw_inside) != 0) unw_off = true;   /* (this thread was not in it: it forked) */
  stack_lo = stack_hi = 0;
}
