/* Call stacks for the heap profiler (prof.c).  Debian's programs and
 * libraries are built without frame pointers, so the walk that names their
 * functions reads the unwind tables: libgcc's unwinder (_Unwind_Backtrace,
 * what glibc's backtrace() uses; with glibc 2.35 and later it finds a
 * frame's tables by _dl_find_object, without a lock or a system call), or
 * libunwind, as gperftools does.  Either is loaded with dlopen when the
 * process first needs a stack (its first sample or guarded allocation, or
 * when profiling is asked for), so that a program that allocates little
 * never loads it, and hakmem has no link-time dependency on it.  libunwind masks all signals around
 * each frame's table lookup (two system calls a frame) and brings liblzma
 * in: on espresso, 3 % of its time and 650 KiB against libgcc's
 * (docs/DESIGN.md).  Where neither loads (or HAKMEM_PROF_UNWIND=fp) a
 * frame-pointer walk stands in, bounded to the thread's own stack mapping
 * so that a broken frame chain ends the walk instead of faulting.  None
 * calls malloc on hakmem's behalf. */
#include "internal.h"
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/auxv.h>
#include <ucontext.h>

/* libunwind's local unwinding, by its exported x86-64 names: a context of
 * the registers (unw_context_t is a ucontext_t), a cursor (127 words), a
 * step, the IP register (UNW_X86_64_RIP, 16).  Its unw_backtrace was not
 * kept: it keeps a 256 KiB per-thread cache whose release at thread exit
 * failed for about one thread in thirty, so a program that makes threads
 * all the time grew by a gigabyte over 100,000 (test-threads churn). */
typedef int (*unw_getcontext_fn)(ucontext_t* uc);
typedef int (*unw_init_local_fn)(uint64_t* cursor, ucontext_t* uc);
typedef int (*unw_step_fn)(uint64_t* cursor);
typedef int (*unw_get_reg_fn)(uint64_t* cursor, int reg, uint64_t* val);
#define UNW_CURSOR_WORDS 127
#define UNW_REG_RIP 16
static unw_getcontext_fn unw_getcontext_p;
static unw_init_local_fn unw_init_local_p;
static unw_step_fn unw_step_p;
static unw_get_reg_fn unw_get_reg_p;
static bool unw_ok;
/* libgcc's: _Unwind_Backtrace(callback, arg) calls back once a frame, from
 * the caller's own; _Unwind_GetIP is the frame's return address,
 * _Unwind_GetCFA its canonical frame address (the caller's sp before the
 * call).  A callback's nonzero return (_URC_END_OF_STACK, 5) ends it. */
typedef int (*gcc_trace_fn)(void* ctx, void* arg);
typedef int (*gcc_backtrace_fn)(gcc_trace_fn fn, void* arg);
typedef uintptr_t (*gcc_get_fn)(void* ctx);
static gcc_backtrace_fn gcc_backtrace_p;
static gcc_get_fn gcc_getip_p, gcc_getcfa_p;
static bool gcc_ok;
/* Threads inside an unwinder now: a fork child in which another thread was
 * there may find libunwind's locks and caches half-updated, and walks
 * frame pointers instead (_hak_unwind_fork_child). */
static _Atomic(int) unw_inside;
static bool unw_off;   /* this process (a fork child) does not use libunwind */

/* A fault inside the unwinder ends the walk, not the program.  libunwind
 * (and libgcc's unwinder alike) reads
 * where each frame's unwind rule points without checking that the address
 * is mapped: a frame whose saved frame pointer was overwritten sends it to
 * garbage (test-prof corrupt), and no check from outside can tell which
 * register a frame's rule reads (code built without frame pointers keeps any
 * value in rbp).  So while a thread is inside libunwind a SIGSEGV or SIGBUS
 * handler jumps back to the walk, which keeps the frames it has and walks
 * frame pointers in that thread from then on (libunwind's per-thread cache
 * may be half-updated).  Any other fault goes to the handler that was there
 * before, or to the default action (restored, so the faulting instruction
 * faults again and the kernel applies it: the core dump is the program's).
 * A program that installs its own handler later replaces this one: then a
 * broken frame faults, as it does under gperftools. */
static __thread sigjmp_buf* unw_jmp __attribute__((tls_model("initial-exec")));
static __thread bool unw_faulted __attribute__((tls_model("initial-exec")));
static struct sigaction unw_old[2];   /* SIGSEGV's, SIGBUS's */
static void unw_fault(int sig, siginfo_t* si, void* uc) {
  sigjmp_buf* j = unw_jmp;
  if (j != NULL) {
    unw_jmp = NULL;
    siglongjmp(*j, 1);
  }
  _hak_signal_pass(&unw_old[sig == SIGBUS], sig, si, uc);
}
hak_warm static void unw_guard_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = unw_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;   /* (NODEFER: the jump back leaves nothing blocked) */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &unw_old[0]);
  sigaction(SIGBUS, &sa, &unw_old[1]);
}

/* libgcc's unwinder (HAKMEM_PROF_UNWIND auto or libgcc): true when it
 * loads. */
static bool gcc_init(void) {
  void* lib = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return false;
  gcc_backtrace_p = (gcc_backtrace_fn)dlsym(lib, "_Unwind_Backtrace");
  gcc_getip_p = (gcc_get_fn)dlsym(lib, "_Unwind_GetIP");
  gcc_getcfa_p = (gcc_get_fn)dlsym(lib, "_Unwind_GetCFA");
  gcc_ok = gcc_backtrace_p && gcc_getip_p && gcc_getcfa_p;
  return gcc_ok;
}

static void unwind_open(void) {
  long long how = hak_opt(PROF_UNWIND);   /* 0 auto, 1 libunwind, 2 fp, 3 libgcc */
  if (how == 2) return;
  if (how != 1) {
    if (gcc_init() || how == 3) {
      if (!gcc_ok) _hak_message("hakmem: HAKMEM_PROF_UNWIND=libgcc, but libgcc_s.so.1 does not load: stacks from frame pointers\n");
      return;
    }
  }
  void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    if (how == 1) _hak_message("hakmem: HAKMEM_PROF_UNWIND=libunwind, but libunwind.so.8 does not load: stacks from frame pointers\n");
    return;
  }
  /* Per-thread caches of unwind information: no lock of libunwind's is held
   * across threads, so a fork can leave none taken.  (UNW_CACHE_PER_THREAD
   * is 2 in libunwind.h; the symbols are libunwind's x86-64 local names.) */
  typedef int (*set_policy_fn)(void* as, int policy);
  set_policy_fn set_policy = (set_policy_fn)dlsym(lib, "_ULx86_64_set_caching_policy");
  void** local_as = (void**)dlsym(lib, "_ULx86_64_local_addr_space");
  if (set_policy != NULL && local_as != NULL) set_policy(*local_as, 2);
  unw_getcontext_p = (unw_getcontext_fn)dlsym(lib, "_Ux86_64_getcontext");
  unw_init_local_p = (unw_init_local_fn)dlsym(lib, "_ULx86_64_init_local");
  unw_step_p = (unw_step_fn)dlsym(lib, "_ULx86_64_step");
  unw_get_reg_p = (unw_get_reg_fn)dlsym(lib, "_ULx86_64_get_reg");
  unw_ok = unw_getcontext_p && unw_init_local_p && unw_step_p && unw_get_reg_p;
}

/* ---------------------------------------------------------------- loading */
/* 0: not loaded; 1: a thread is loading it; 2: loaded, or found missing
 * (then frame pointers).  Until 2, a stack is its first frame alone. */
static _Atomic(int) unw_state;
static _Atomic(int) unw_prepared;
/* The dynamic loader's mapping: an allocation called from there is made
 * inside ld.so, with its lock held and perhaps an object half loaded (even
 * libgcc_s, as a dependency of the library being opened), where a dlopen of
 * ours must not run. */
static uintptr_t ldso_lo, ldso_hi;

/* At start-up, when sampling or guarded allocations are on (init.c), or
 * when profiling is started at run time: the fault guard is installed now
 * and not at the first stack, since a program may by then have entered a
 * sandbox that refuses sigaction (OpenSSH's, seccomp); and the loader's
 * extent, from its program headers (no lock, no allocation). */
hak_warm void _hak_unwind_prepare(void) {
  if (atomic_exchange(&unw_prepared, 1) != 0) return;
  if (hak_opt(PROF_UNWIND) != 2) unw_guard_install();
  uintptr_t base = (uintptr_t)getauxval(AT_BASE);
  if (base == 0) return;   /* (linked statically: no loader) */
  const Elf64_Ehdr* eh = (const Elf64_Ehdr*)base;
  const Elf64_Phdr* ph = (const Elf64_Phdr*)(base + eh->e_phoff);
  uintptr_t end = 0;
  for (unsigned i = 0; i < eh->e_phnum; i++)
    if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr + ph[i].p_memsz > end) end = ph[i].p_vaddr + ph[i].p_memsz;
  ldso_lo = base;
  ldso_hi = base + end;
}

/* Load the unwinder, once, for an allocation called from `site` (0: not
 * from an allocation).  The caller holds no lock of hakmem's: dlopen waits
 * for the loader's lock, and its holder may be allocating.  Called from
 * inside ld.so, it waits for a later call; while another thread loads,
 * stacks are their first frame. */
hak_warm void _hak_unwind_load(uintptr_t site) {
  if (hak_load_acquire(&unw_state) != 0 || (site >= ldso_lo && site < ldso_hi)) return;
  int expect = 0;
  if (!atomic_compare_exchange_strong(&unw_state, &expect, 1)) return;
  unwind_open();
  hak_store_release(&unw_state, 2);
}

const char* _hak_unwind_method(void) {
  return unw_off ? "frame pointers" : gcc_ok ? "libgcc" : unw_ok ? "libunwind" : "frame pointers";
}

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
  int fd = _hak_os_open_read("/proc/self/maps");
  if (fd < 0) return false;
  /* (small: every thread that is sampled reads it once on its own stack,
   * and 4 KiB here touched a page more of each: larsonN's 550 thread
   * stacks held 2.2 MB more; a line longer than the buffer is a file's,
   * not a stack's, and is skipped) */
  char buf[512];
  size_t have = 0;
  bool found = false;
  for (;;) {
    ssize_t r = _hak_os_read(fd, buf + have, sizeof buf - 1 - have);
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
  _hak_os_close(fd);
  return found;
}

/* This thread's stack mapping, sp in it (bounds 0: not found). */
static void stack_bounds(uintptr_t sp) {
  if (sp < stack_lo || sp >= stack_hi) {
    /* a new thread, or a signal handler's alternate stack */
    if (!stack_mapping(sp, &stack_lo, &stack_hi)) stack_lo = stack_hi = 0;
  }
}

/* libunwind's walk from here: the IP of each frame, innermost first.  It
 * reads what each frame's unwind rule names without checking it is a
 * stack: a corrupted frame (a saved frame pointer overwritten) makes it
 * read where that frame pointer points, and fault if nothing is mapped
 * there (test-prof corrupt): the fault guard above catches that.  And
 * every frame must lie above the last and inside this thread's stack
 * mapping, as in the frame-pointer walk, so that a broken chain that reads
 * mapped memory ends instead of naming garbage. */
#define UNW_REG_RSP 7
static hak_noinline int unw_walk(uintptr_t* pcs, int max) {
  ucontext_t uc;
  uint64_t cursor[UNW_CURSOR_WORDS];
  stack_bounds((uintptr_t)__builtin_frame_address(0));
  if (stack_hi == 0 || unw_faulted) return 0;   /* (then the frame-pointer walk) */
  if (unw_getcontext_p(&uc) != 0 || unw_init_local_p(cursor, &uc) != 0) return 0;
  volatile int n = 0;   /* (kept across the jump back) */
  uint64_t last = 0;
  sigjmp_buf jb;
  if (sigsetjmp(jb, 0) != 0) {   /* libunwind faulted: the frames so far */
    unw_faulted = true;
    return n;
  }
  unw_jmp = &jb;
  while (n < max) {
    uint64_t ip, sp;
    if (unw_get_reg_p(cursor, UNW_REG_RIP, &ip) != 0 || ip == 0) break;
    if (unw_get_reg_p(cursor, UNW_REG_RSP, &sp) != 0 || sp <= last || sp < stack_lo || sp >= stack_hi) break;
    last = sp;
    pcs[n++] = (uintptr_t)ip;
    if (unw_step_p(cursor) <= 0) break;
  }
  unw_jmp = NULL;
  return n;
}

/* libgcc's walk from here, bounded as libunwind's is: every frame's CFA
 * above the last and inside this thread's stack mapping. */
typedef struct {
  uintptr_t* pcs;
  int n, max;
  uintptr_t last;
} gcc_walk_t;
static int gcc_frame(void* ctx, void* arg) {
  gcc_walk_t* w = arg;
  uintptr_t ip = gcc_getip_p(ctx), cfa = gcc_getcfa_p(ctx);
  if (ip == 0 || w->n >= w->max || cfa <= w->last || cfa < stack_lo || cfa > stack_hi) return 5;
  w->last = cfa;
  w->pcs[w->n++] = ip;
  return 0;
}
static hak_noinline int gcc_walk(uintptr_t* pcs, int max) {
  stack_bounds((uintptr_t)__builtin_frame_address(0));
  if (stack_hi == 0 || unw_faulted) return 0;
  volatile gcc_walk_t w = {pcs, 0, max, 0};   /* (kept across the jump back) */
  sigjmp_buf jb;
  if (sigsetjmp(jb, 0) != 0) {   /* the unwinder faulted: the frames so far */
    unw_faulted = true;
    return w.n;
  }
  unw_jmp = &jb;
  gcc_backtrace_p(gcc_frame, (void*)&w);
  unw_jmp = NULL;
  return w.n;
}

/* Walk saved frame pointers from the allocation's caller.  hakmem itself is
 * built without them (the fast paths would pay for the frames), so the walk
 * cannot start at its own frame.  It finds the call's return address (the
 * site) on the stack: the highest copy within the allocator's own frames
 * (which may hold copies of it in saved registers; the caller's live frames
 * above hold no return address into a call that is still running), and the
 * caller's frame pointer among the registers the allocator's first function
 * saved just below it (the nearest word that points higher up this stack).
 * Every frame must then lie above the last, 8-aligned, inside this thread's
 * stack mapping: a frame chain that code without frame pointers (or a
 * corrupted stack) leaves ends the walk instead of leading it into unmapped
 * memory.  For programs built with frame pointers; in others it gives the
 * site and whatever chain the registers happen to suggest. */
#define FP_SCAN 16384   /* bytes above the walker's frame that the allocator's frames may take */
__attribute__((no_sanitize_address))   /* (it reads the stack's words, redzones included) */
static hak_noinline int fp_walk(uintptr_t* pcs, int max, uintptr_t site) {
  uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
  stack_bounds(sp);
  int n = 0;
  pcs[n++] = site;
  if (stack_hi == 0) return n;
  uintptr_t at = 0, end = stack_hi - 8 - sp < FP_SCAN ? stack_hi - 8 : sp + FP_SCAN;
  for (uintptr_t a = sp & ~(uintptr_t)7; a < end; a += 8)
    if (*(const uintptr_t*)a == site) at = a;
  if (at == 0) return n;
  uintptr_t fp = 0;
  for (uintptr_t b = at - 8; b >= at - 64 && b >= stack_lo; b -= 8) {
    uintptr_t v = *(const uintptr_t*)b;
    if (v > at && (v & 7) == 0 && v + 16 <= stack_hi) {
      fp = v;
      break;
    }
  }
  while (n < max && fp != 0) {
    if ((fp & 7) != 0 || fp < stack_lo || fp + 16 > stack_hi) break;
    uintptr_t next = ((const uintptr_t*)fp)[0], ra = ((const uintptr_t*)fp)[1];
    if (ra < HAK_OS_PAGE) break;
    pcs[n++] = ra;
    if (next <= fp) break;
    fp = next;
  }
  return n;
}

/* The return addresses of the stack, innermost first: with libunwind the
 * whole walk (its first frames are the allocator's own; prof.c cuts them at
 * the site), with frame pointers from the site on. */
hak_inline int stack_walk(uintptr_t* pcs, int max, uintptr_t site) {
  if ((gcc_ok || unw_ok) && !unw_off) {
    atomic_fetch_add_explicit(&unw_inside, 1, memory_order_acquire);
    int n = gcc_ok ? gcc_walk(pcs, max) : unw_walk(pcs, max);
    atomic_fetch_sub_explicit(&unw_inside, 1, memory_order_release);
    if (n > 0) return n;
  }
  return fp_walk(pcs, max, site);
}

/* The stack from the frame whose address is `from` on (the allocation's
 * call site, or a faulting instruction; 0, or a walk that does not meet it:
 * the whole walk), at most `depth` frames into out: how many.  The frames
 * before it are the allocator's own (or a signal handler's).  One frame
 * (the walk inlined): each frame the unwinder steps through costs libgcc's
 * about 1,700 instructions. */
hak_noinline int _hak_unwind(uintptr_t* out, int depth, uintptr_t from) {
  if (hak_unlikely(hak_load_acquire(&unw_state) != 2)) {   /* not loaded yet: the first frame */
    out[0] = from;
    return from != 0 && depth > 0;
  }
  uintptr_t pcs[HAK_UNWIND_MAX + 16];
  int max = depth + 16 < (int)(sizeof pcs / sizeof *pcs) ? depth + 16 : (int)(sizeof pcs / sizeof *pcs);
  int n = stack_walk(pcs, max, from), at = 0;
  for (int i = 0; from != 0 && i < n; i++)
    if (pcs[i] == from) {
      at = i;
      break;
    }
  int k = n - at < depth ? n - at : depth;
  memcpy(out, pcs + at, (size_t)k * sizeof *out);
  return k;
}

void _hak_unwind_fork_child(void) {
  if (hak_load_relaxed(&unw_inside) != 0) unw_off = true;   /* (this thread was not in it: it forked) */
  stack_lo = stack_hi = 0;
}

/* ---------------------------------------------------------------- names */
/* The function a return address lies in, for reports read by people
 * (guard.c): its module's symbol table (.symtab: static functions too,
 * where the file was not stripped), read with pread into stack buffers
 * (no allocation: a report may be made in a signal handler), else the
 * loader's dynamic symbols (dladdr1, whose symbol must also span the
 * address: the nearest exported name before a static function is not its
 * name).  True with the name, the offset in it and the module's path. */
static bool symtab_lookup(const char* path, uintptr_t rel, char* name, size_t n, uintptr_t* off) {
  int fd = _hak_os_open_read(path);
  if (fd < 0) return false;
  Elf64_Ehdr eh;
  bool found = false;
  if (_hak_os_pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(Elf64_Shdr)) {
    for (unsigned s = 0; s < eh.e_shnum && !found; s++) {
      Elf64_Shdr sh, str;
      if (_hak_os_pread(fd, &sh, sizeof sh, eh.e_shoff + (uint64_t)s * sizeof sh) != (ssize_t)sizeof sh ||
          sh.sh_type != SHT_SYMTAB || sh.sh_entsize != sizeof(Elf64_Sym) ||
          _hak_os_pread(fd, &str, sizeof str, eh.e_shoff + (uint64_t)sh.sh_link * sizeof str) != (ssize_t)sizeof str)
        continue;
      Elf64_Sym syms[64], best = {0};
      for (uint64_t at = 0; at < sh.sh_size; at += sizeof syms) {
        ssize_t got = _hak_os_pread(fd, syms, sizeof syms, sh.sh_offset + at);
        if (got <= 0) break;
        for (size_t k = 0; k < (size_t)got / sizeof *syms; k++) {
          const Elf64_Sym* y = &syms[k];
          if (ELF64_ST_TYPE(y->st_info) == STT_FUNC && y->st_value <= rel && rel < y->st_value + y->st_size) best = *y;
        }
      }
      if (best.st_name != 0 && _hak_os_pread(fd, name, n - 1, str.sh_offset + best.st_name) > 0) {
        name[n - 1] = 0;
        *off = rel - best.st_value;
        found = true;
      }
    }
  }
  _hak_os_close(fd);
  return found;
}

bool _hak_symbolize(uintptr_t pc, char* name, size_t n, uintptr_t* off, const char** file) {
  Dl_info di;
  const Elf64_Sym* sym = NULL;
  *file = NULL;
  if (n < 2 || !dladdr1((void*)pc, &di, (void**)&sym, RTLD_DL_SYMENT) || di.dli_fname == NULL) return false;
  *file = di.dli_fname;
  Elf64_Ehdr* eh = di.dli_fbase;   /* (the module's first page is mapped: its ELF header) */
  uintptr_t rel = eh->e_type == ET_EXEC ? pc : pc - (uintptr_t)di.dli_fbase;
  /* the main program's name may be relative to where it started */
  const char* path = di.dli_fname[0] == '/' ? di.dli_fname : "/proc/self/exe";
  if (symtab_lookup(path, rel, name, n, off)) return true;
  if (di.dli_sname != NULL && sym != NULL && pc - (uintptr_t)di.dli_saddr < (sym->st_size ? sym->st_size : 1)) {
    size_t k = strlen(di.dli_sname);
    if (k >= n) k = n - 1;
    memcpy(name, di.dli_sname, k);
    name[k] = 0;
    *off = pc - (uintptr_t)di.dli_saddr;
    return true;
  }
  return false;
}
