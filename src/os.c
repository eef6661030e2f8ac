/* The OS module: the only code that calls mmap, munmap, madvise, mprotect and
 * mremap, the clocks and the file calls.  Every memory call is counted here
 * (calls and bytes) so the syscall budget can be checked from hakmem's own
 * statistics.
 * Contract: functions return NULL/false on failure with errno set by the
 * kernel; they never allocate and never print. */
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <elf.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <linux/falloc.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <unistd.h>

static _Atomic(size_t) os_mmap_calls, os_munmap_calls, os_madvise_calls, os_mprotect_calls,
    os_mremap_calls, os_mmap_bytes, os_munmap_bytes, os_madvise_bytes, os_mapped, os_peak_mapped;

static void os_mapped_add(size_t n) {
  size_t now = atomic_fetch_add_explicit(&os_mapped, n, memory_order_relaxed) + n;
  size_t peak = hak_load_relaxed(&os_peak_mapped);
  while (now > peak &&
         !atomic_compare_exchange_weak_explicit(&os_peak_mapped, &peak, now, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}
static void os_mapped_sub(size_t n) { atomic_fetch_sub_explicit(&os_mapped, n, memory_order_relaxed); }
#define os_count(c, n) atomic_fetch_add_explicit(&(c), (n), memory_order_relaxed)

/* Fault injection for tests (HAKMEM_FAIL_MMAP_AFTER / _COUNT). */
static _Atomic(long long) os_fail_seen;
static bool os_inject_failure(void) {
  long long after = hak_opt(FAIL_MMAP_AFTER);
  if (after <= 0) return false;
  long long n = atomic_fetch_add_explicit(&os_fail_seen, 1, memory_order_relaxed);
  long long count = hak_opt(FAIL_MMAP_COUNT);
  return n >= after && (count == 0 || n < after + count);
}

/* Large blocks are mapped without MAP_NORESERVE so the kernel's overcommit
 * policy applies to them as to glibc's: an absurd size fails with ENOMEM
 * instead of succeeding and killing the program when touched.  SuperSlabs
 * and metadata keep MAP_NORESERVE (bounded, and mostly untouched). */
__thread bool _hak_os_reserve __attribute__((tls_model("initial-exec")));

hak_warm void* _hak_os_map(size_t size, void* hint) {
  os_count(os_mmap_calls, 1);
  if (hak_unlikely(os_inject_failure())) {
    errno = ENOMEM;
    return NULL;
  }
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | (_hak_os_reserve ? 0 : MAP_NORESERVE);
  void* p = mmap(hint, size, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) return NULL;
  os_count(os_mmap_bytes, size);
  os_mapped_add(size);
  return p;
}

hak_warm bool _hak_os_unmap(void* p, size_t size) {
  if (size == 0) return true;
  os_count(os_munmap_calls, 1);
  if (munmap(p, size) != 0) return false;
  os_count(os_munmap_bytes, size);
  os_mapped_sub(size);
  return true;
}

/* An aligned mapping: first try the hint (where the previous aligned mapping
 * ended, so consecutive segments usually line up with one call); otherwise
 * over-map and trim both ends. */
hak_warm void* _hak_os_map_aligned(size_t size, size_t align, void* hint) {
  if (hint != NULL && ((uintptr_t)hint & (align - 1)) == 0) {
    void* p = _hak_os_map(size, hint);
    if (p == NULL) return NULL;
    if (((uintptr_t)p & (align - 1)) == 0) return p;
    _hak_os_unmap(p, size);
  }
  size_t over = size + align;
  if (over < size) { errno = ENOMEM; return NULL; }
  uint8_t* raw = _hak_os_map(over, NULL);
  if (raw == NULL) return NULL;
  uint8_t* aligned = (uint8_t*)hak_align_up((uintptr_t)raw, align);
  size_t head = (size_t)(aligned - raw);
  size_t tail = over - head - size;
  if (head) _hak_os_unmap(raw, head);
  if (tail) _hak_os_unmap(aligned + size, tail);
  return aligned;
}

bool _hak_os_advise(void* p, size_t size, int advice) {
  os_count(os_madvise_calls, 1);
  if (madvise(p, size, advice) != 0) return false;
  os_count(os_madvise_bytes, size);
  return true;
}

void* _hak_os_remap(void* old, size_t old_size, size_t new_size, int flags, void* new_addr) {
  os_count(os_mremap_calls, 1);
  void* p = (flags & MREMAP_FIXED) ? mremap(old, old_size, new_size, flags, new_addr)
                                   : mremap(old, old_size, new_size, flags);
  if (p == MAP_FAILED) return NULL;
  if (flags & MREMAP_FIXED) os_mapped_sub(old_size);   /* the target range was counted when mapped */
  else if (new_size > old_size) os_mapped_add(new_size - old_size);
  else os_mapped_sub(old_size - new_size);
  return p;
}

bool _hak_os_protect(void* p, size_t size, int prot) {
  os_count(os_mprotect_calls, 1);
  return mprotect(p, size, prot) == 0;
}

/* ---------------------------------------------------------------- the mesh file
 * Compaction (mesh.c) maps slab pages from one memfd so that two virtual
 * pages can share a physical one.  Mappings over pages already mapped
 * (MAP_FIXED) do not change the mapped-bytes count. */
int _hak_os_memfd(void) {
  int fd = (int)syscall(SYS_memfd_create, "hakmem-mesh", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (ftruncate(fd, (off_t)1 << 40) != 0) {   /* sparse: pages exist only where written */
    close(fd);
    return -1;
  }
  return fd;
}

bool _hak_os_map_file_at(void* addr, size_t size, int fd, uint64_t off) {
  os_count(os_mmap_calls, 1);
  void* p = mmap(addr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, (off_t)off);
  return p == addr;
}

void* _hak_os_map_file(size_t size, int fd, uint64_t off) {
  os_count(os_mmap_calls, 1);
  void* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
  if (p == MAP_FAILED) return NULL;
  os_mapped_add(size);
  return p;
}

/* Fresh zero pages over [addr, addr+size), replacing what was mapped there. */
bool _hak_os_map_anon_at(void* addr, size_t size) {
  os_count(os_mmap_calls, 1);
  void* p = mmap(addr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  return p == addr;
}

/* Inaccessible fresh pages over [addr, addr+size): what was there is given
 * back and protected in one call (guard.c's freed slots). */
bool _hak_os_map_none_at(void* addr, size_t size) {
  os_count(os_mmap_calls, 1);
  if (hak_unlikely(os_inject_failure())) return false;   /* (counted as every mmap call is: the tests' failure windows) */
  void* p = mmap(addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  return p == addr;
}

/* Give the file's pages in [off, off+size) back (they read as zero after). */
bool _hak_os_punch(int fd, uint64_t off, size_t size) {
  os_count(os_madvise_calls, 1);
  if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)size) != 0) return false;
  os_count(os_madvise_bytes, size);
  return true;
}

/* Into file `to`, the data runs of file `from` in [off, off+len), holes
 * left holes; the bytes are taken from src, memory that shows `from` at off
 * (the fork of meshed pages: async-signal-safe). */
bool _hak_os_copy_data(int to, int from, const void* src, uint64_t off, size_t len) {
  for (off_t at = (off_t)off, end = at + (off_t)len; at < end;) {
    off_t d = lseek(from, at, SEEK_DATA);
    if (d < 0 || d >= end) break;
    off_t hole = lseek(from, d, SEEK_HOLE);
    if (hole < 0 || hole > end) hole = end;
    for (off_t w = d; w < hole;) {
      ssize_t k = pwrite(to, (const uint8_t*)src + (w - (off_t)off), (size_t)(hole - w), w);
      if (k <= 0) return false;
      w += k;
    }
    at = hole;
  }
  return true;
}

/* Which pages of [p, p+size) are resident (p page-aligned; vec: one byte a
 * page, bit 0 set when resident).  A page a private anonymous mapping
 * dropped (MADV_DONTNEED) and nobody touched since is not. */
bool _hak_os_resident(void* p, size_t size, unsigned char* vec) { return mincore(p, size, vec) == 0; }

/* ---------------------------------------------------------------- files
 * The files hakmem reads and writes itself: /proc and /sys figures, the
 * statistics report, heap profiles, messages on stderr.  Raw syscalls, no
 * stdio, no allocation: callable from a signal handler and with any lock of
 * the heap held.  Descriptors are close-on-exec. */
int _hak_os_open_read(const char* path) { return open(path, O_RDONLY | O_CLOEXEC); }

/* flags: O_TRUNC, O_APPEND or O_EXCL; the file is created (mode 0644). */
int _hak_os_open_write(const char* path, int flags) {
  return open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
}

/* Up to n bytes: 0 at the end of the file, -1 on an error (not EINTR). */
ssize_t _hak_os_read(int fd, void* buf, size_t n) {
  ssize_t r;
  while ((r = read(fd, buf, n)) < 0 && errno == EINTR) {
  }
  return r;
}

/* A fault that is not ours (the fault handlers of mesh.c, guard.c,
 * unwind.c), passed on: to the handler installed before ours, else to the
 * default action, restored, so that the faulting instruction faults again
 * on return and the kernel applies it (an ignored SIGSEGV would fault for
 * ever). */
void _hak_signal_pass(const struct sigaction* old, int sig, void* si, void* uc) {
  if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction != NULL) {
    old->sa_sigaction(sig, si, uc);
  } else if (!(old->sa_flags & SA_SIGINFO) && old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
    old->sa_handler(sig);
  } else {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
  }
}

/* n bytes at offset off (fewer at the file's end; -1: errno). */
ssize_t _hak_os_pread(int fd, void* buf, size_t n, uint64_t off) {
  ssize_t r;
  while ((r = pread(fd, buf, n, (off_t)off)) < 0 && errno == EINTR) {
  }
  return r;
}

/* All n bytes, or false (errno says why; EINTR is retried). */
bool _hak_os_write_all(int fd, const void* buf, size_t n) {
  const char* p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

bool _hak_os_close(int fd) { return close(fd) == 0; }

/* A duplicate of fd numbered min or above, close-on-exec; -1 on failure. */
int _hak_os_dup_cloexec(int fd, int min) { return fcntl(fd, F_DUPFD_CLOEXEC, min); }

/* Which file fd refers to (its device and inode), so that a descriptor kept
 * across a program's own closes and dup2s can be checked; with cloexec, only
 * while the descriptor is still close-on-exec (dup2 onto its number clears
 * the flag).  False when fd is not open (or not close-on-exec). */
bool _hak_os_file_id(int fd, bool cloexec, hak_file_id_t* id) {
  struct stat st;
  if (fd < 0) return false;
  if (cloexec) {
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0 || !(fl & FD_CLOEXEC)) return false;
  }
  if (fstat(fd, &st) != 0) return false;
  id->dev = (uint64_t)st.st_dev;
  id->ino = (uint64_t)st.st_ino;
  return true;
}

/* A small file (a /proc or /sys figure) into buf, NUL-terminated.  False
 * when unreadable or empty. */
hak_warm bool _hak_os_read_small(const char* path, char* buf, size_t n) {
  int fd = _hak_os_open_read(path);
  if (fd < 0) return false;
  ssize_t r = _hak_os_read(fd, buf, n - 1);
  _hak_os_close(fd);
  if (r <= 0) return false;
  buf[r] = 0;
  return true;
}

/* The calling thread's kernel id (park.c names a thread's /proc entry by it). */
hak_warm int32_t _hak_os_gettid(void) { return (int32_t)syscall(SYS_gettid); }

/* Current RSS from /proc/self/statm. */
size_t _hak_os_rss_bytes(void) {
  char buf[128];
  if (!_hak_os_read_small("/proc/self/statm", buf, sizeof buf)) return 0;
  const char* s = buf;
  while (*s && *s != ' ') s++;
  size_t pages = 0;
  while (*s == ' ') s++;
  while (*s >= '0' && *s <= '9') pages = pages * 10 + (size_t)(*s++ - '0');
  return pages * _hak_os_page_size();
}

/* The clocks, read through the vDSO's own entry, found once in its symbol
 * table.  libc's clock_gettime is a wrapper around the same entry, but it
 * lies in a 64 KiB stretch of libc's text (the time functions) that a
 * program which reads no clock never faults in: the kernel maps 64 KiB of
 * file pages around each first touch, so the wrapper cost such a process
 * 64 KiB of resident pages.  Without a vDSO (valgrind hides it) or the
 * symbol: libc's wrapper. */
typedef int (*os_clock_fn)(clockid_t, struct timespec*);
static _Atomic(os_clock_fn) os_clock;

/* The vDSO's __vdso_clock_gettime: its dynamic section's symbol table, as
 * many entries as its SysV hash table's chain (the x86-64 vDSO has one). */
static os_clock_fn os_vdso_clock(void) {
  uintptr_t base = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
  if (base == 0) return NULL;
  const Elf64_Ehdr* eh = (const Elf64_Ehdr*)base;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) return NULL;
  const Elf64_Phdr* ph = (const Elf64_Phdr*)(base + eh->e_phoff);
  uintptr_t bias = 0;
  bool loaded = false;
  const Elf64_Dyn* dyn = NULL;
  for (unsigned i = 0; i < eh->e_phnum; i++) {
    if (ph[i].p_type == PT_LOAD && !loaded) {
      bias = base + ph[i].p_offset - ph[i].p_vaddr;
      loaded = true;
    } else if (ph[i].p_type == PT_DYNAMIC) {
      dyn = (const Elf64_Dyn*)(base + ph[i].p_offset);
    }
  }
  if (!loaded || dyn == NULL) return NULL;
  const Elf64_Sym* sym = NULL;
  const char* str = NULL;
  const uint32_t* hash = NULL;
  for (; dyn->d_tag != DT_NULL; dyn++) {
    if (dyn->d_tag == DT_SYMTAB) sym = (const Elf64_Sym*)(bias + dyn->d_un.d_ptr);
    else if (dyn->d_tag == DT_STRTAB) str = (const char*)(bias + dyn->d_un.d_ptr);
    else if (dyn->d_tag == DT_HASH) hash = (const uint32_t*)(bias + dyn->d_un.d_ptr);
  }
  if (sym == NULL || str == NULL || hash == NULL) return NULL;
  for (uint32_t i = 0; i < hash[1]; i++)
    if (sym[i].st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym[i].st_info) == STT_FUNC &&
        strcmp(str + sym[i].st_name, "__vdso_clock_gettime") == 0)
      return (os_clock_fn)(bias + sym[i].st_value);
  return NULL;
}
hak_warm static void os_clock_read(clockid_t id, struct timespec* ts) {
  os_clock_fn f = hak_load_relaxed(&os_clock);
  if (hak_unlikely(f == NULL)) {   /* (two threads may both look: they find the same) */
    f = os_vdso_clock();
    if (f == NULL) f = clock_gettime;
    hak_store_relaxed(&os_clock, f);
  }
  if (f(id, ts) != 0) clock_gettime(id, ts);   /* (a clock the vDSO does not serve) */
}
bool _hak_os_clock_is_vdso(void) {
  os_clock_fn f = hak_load_relaxed(&os_clock);
  return f != NULL && f != clock_gettime;
}

/* The clocks: milliseconds for the release policy's delays (the coarse
 * clock: a tick, not a syscall's cost, is its resolution), nanoseconds for
 * measured costs and seeds. */
uint64_t _hak_clock_ms(void) {
  struct timespec ts;
  os_clock_read(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
uint64_t _hak_os_clock_ns(void) {
  struct timespec ts;
  os_clock_read(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The OS's page size (valloc, pvalloc, the RSS figure), from the auxiliary
 * vector (sysconf lies in a stretch of libc's text a small program may never
 * touch), asked once: threads that ask at once store the same value. */
size_t _hak_os_page_size(void) {
  static _Atomic(size_t) ps;
  size_t v = hak_load_relaxed(&ps);
  if (v == 0) {
    v = (size_t)getauxval(AT_PAGESZ);
    if (v == 0) v = HAK_OS_PAGE;
    hak_store_relaxed(&ps, v);
  }
  return v;
}

size_t _hak_os_mapped(void) { return hak_load_relaxed(&os_mapped); }

size_t _hak_os_peak_rss_bytes(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (size_t)ru.ru_maxrss * 1024;
}

hak_api void hak_os_stats(hak_os_stats_t* out) {
  if (out == NULL) return;
  out->mmap_calls = hak_load_relaxed(&os_mmap_calls);
  out->munmap_calls = hak_load_relaxed(&os_munmap_calls);
  out->madvise_calls = hak_load_relaxed(&os_madvise_calls);
  out->mprotect_calls = hak_load_relaxed(&os_mprotect_calls);
  out->mremap_calls = hak_load_relaxed(&os_mremap_calls);
  out->mmap_bytes = hak_load_relaxed(&os_mmap_bytes);
  out->munmap_bytes = hak_load_relaxed(&os_munmap_bytes);
  out->madvise_bytes = hak_load_relaxed(&os_madvise_bytes);
  out->mapped_bytes = hak_load_relaxed(&os_mapped);
  out->peak_mapped_bytes = hak_load_relaxed(&os_peak_mapped);
}

/* ---------------------------------------------------------------- fork handlers
 * Registered with libc when the process has a second thread, or at once when
 * a mechanism needs its child handler whatever the threads (internal.h, at
 * hak_lock).  libc turns __libc_single_threaded off in pthread_create before
 * the new thread runs, so a new thread registers before its first lock, and
 * its first remote free (remote.c).  While one thread registers, libc's
 * atfork lock keeps any fork out, and the others wait here holding no lock of
 * ours; the registering thread itself may allocate inside pthread_atfork. */
_Atomic(int64_t) _hak_fork_state;   /* 0: not registered, 2: registered, pid * 4 + 1: being registered by process pid */
__thread bool _hak_tls_forking;  /* this thread is inside fork, between prepare and parent/child */
static __thread bool fork_registering;
static void (*fork_fn[3])(void);
static _Atomic(int) fork_fn_set;

/* A fork may come between the compare-and-swap and pthread_atfork's own
 * lock, or between its return and the store of 2: the child inherits a
 * registration by a thread it does not have.  Registered already (the
 * handlers ran: the child's sets 2, _hak_os_fork_child_state), or not: the
 * child, finding the state set by another process (its pid is in it),
 * registers itself.  (A child that spun here for ever was found under load:
 * 2 forks in 60 runs of test-threads scavenge.) */
static void fork_register(void) {
  int64_t mine = (int64_t)getpid() * 4 + 1;
  for (;;) {
    int64_t expect = 0;
    if (atomic_compare_exchange_strong(&_hak_fork_state, &expect, mine)) {
      fork_registering = true;
      pthread_atfork(fork_fn[0], fork_fn[1], fork_fn[2]);
      fork_registering = false;
      hak_store_release(&_hak_fork_state, 2);
      return;
    }
    while ((expect = hak_load_acquire(&_hak_fork_state)) != 2) {
      if (expect != 0 && expect != mine) {   /* set in the parent, before a fork */
        atomic_compare_exchange_strong(&_hak_fork_state, &expect, 0);
        break;
      }
      if (expect == 0) break;
      sched_yield();
    }
    if (hak_load_acquire(&_hak_fork_state) == 2) return;
  }
}

/* The fork child's handler ran, so the handlers are registered (the state
 * may have been inherited as another process's registration). */
void _hak_os_fork_child_state(void) { hak_store_release(&_hak_fork_state, 2); }

void _hak_os_fork_ready(void) {
  if (__libc_single_threaded || fork_registering || !hak_load_acquire(&fork_fn_set)) return;
  fork_register();
}

hak_warm void _hak_os_fork_handlers(void (*prepare)(void), void (*parent)(void), void (*child)(void), bool now) {
  fork_fn[0] = prepare;
  fork_fn[1] = parent;
  fork_fn[2] = child;
  hak_store_release(&fork_fn_set, 1);
  if (now || !__libc_single_threaded) fork_register();
}

hak_warm __attribute__((noinline)) int hak_lock(pthread_mutex_t* m) {
  hak_fork_ready();
  return hak_unlikely(_hak_tls_forking) ? 0 : pthread_mutex_lock(m);
}
__attribute__((noinline)) int hak_trylock(pthread_mutex_t* m) {
  hak_fork_ready();
  return hak_unlikely(_hak_tls_forking) ? 0 : pthread_mutex_trylock(m);
}
hak_warm __attribute__((noinline)) int hak_unlock(pthread_mutex_t* m) {
  return hak_unlikely(_hak_tls_forking) ? 0 : pthread_mutex_unlock(m);
}

/* From before a thread of hakmem's own is started. */
void _hak_os_fork_register(void) {
  if (hak_load_acquire(&fork_fn_set)) fork_register();
}
