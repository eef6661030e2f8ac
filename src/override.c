/* The standard names: malloc & co. and every C++ operator new/delete are
 * aliases of the hak_ entry points (same translation unit: unity.c).
 * Built without HAK_NO_OVERRIDE only.  C++ failures are reported through the
 * weakly referenced libstdc++ handlers, so the library needs no C++ runtime. */
#include "internal.h"
#include "alloc.h"
#include <errno.h>
#include <stdlib.h>

#ifndef HAK_NO_OVERRIDE
#define HAK_ALIAS(fun) __attribute__((alias(#fun), visibility("default"), used))

void* malloc(size_t n) HAK_ALIAS(hak_malloc);
void* calloc(size_t c, size_t n) HAK_ALIAS(hak_calloc);
void* realloc(void* p, size_t n) HAK_ALIAS(hak_realloc);
void* reallocarray(void* p, size_t c, size_t n) HAK_ALIAS(hak_reallocarray);
void free(void* p) HAK_ALIAS(hak_free);
void cfree(void* p) HAK_ALIAS(hak_free);
void free_sized(void* p, size_t n) HAK_ALIAS(hak_free_sized);
int posix_memalign(void** out, size_t a, size_t n) HAK_ALIAS(hak_posix_memalign);
void* aligned_alloc(size_t a, size_t n) HAK_ALIAS(hak_aligned_alloc);
void* memalign(size_t a, size_t n) HAK_ALIAS(hak_memalign);
void* valloc(size_t n) HAK_ALIAS(hak_valloc);
void* pvalloc(size_t n) HAK_ALIAS(hak_pvalloc);
size_t malloc_usable_size(void* p) HAK_ALIAS(hak_malloc_usable_size);
int malloc_trim(size_t pad) HAK_ALIAS(hak_malloc_trim);
void malloc_stats(void) HAK_ALIAS(hak_malloc_stats);
struct mallinfo2 mallinfo2(void) HAK_ALIAS(hak_mallinfo2);
int malloc_info(int options, FILE* fp) HAK_ALIAS(hak_malloc_info);
int mallopt(int param, int value) HAK_ALIAS(hak_mallopt);

/* glibc's internal names, for programs that call them directly */
void* __libc_malloc(size_t n) HAK_ALIAS(hak_malloc);
void* __libc_calloc(size_t c, size_t n) HAK_ALIAS(hak_calloc);
void* __libc_realloc(void* p, size_t n) HAK_ALIAS(hak_realloc);
void __libc_free(void* p) HAK_ALIAS(hak_free);
void* __libc_memalign(size_t a, size_t n) HAK_ALIAS(hak_memalign);

void free_aligned_sized(void* p, size_t a, size_t n) HAK_ALIAS(hak_free_aligned_sized);

#if HAK_SECURE
/* the secure build's guarded memcpy (secure.c): a copy into a block must
 * stay inside its request */
void* memcpy(void* restrict d, const void* restrict s, size_t n) HAK_ALIAS(_hak_secure_memcpy);
#endif

hak_api struct mallinfo mallinfo(void) {
  struct mallinfo2 m2 = hak_mallinfo2();
  struct mallinfo m;
  m.arena = (int)m2.arena;
  m.ordblks = (int)m2.ordblks;
  m.smblks = (int)m2.smblks;
  m.hblks = (int)m2.hblks;
  m.hblkhd = (int)m2.hblkhd;
  m.usmblks = (int)m2.usmblks;
  m.fsmblks = (int)m2.fsmblks;
  m.uordblks = (int)m2.uordblks;
  m.fordblks = (int)m2.fordblks;
  m.keepcost = (int)m2.keepcost;
  return m;
}

/* ---------------------------------------------------------------- C++ */
/* operator delete(void*, size_t, align_val_t): C++ passes the size first */
hak_api void hak_free_aligned_sized_cxx(void* p, size_t n, size_t al) { hak_free_aligned_sized(p, al, n); }

typedef void (*hak_new_handler_t)(void);
extern hak_new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

static hak_noinline void* cxx_new_fail(size_t n, size_t align, bool nothrow) {
  for (;;) {
    hak_new_handler_t handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (handler == NULL) {
      if (nothrow) return NULL;
      if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
      _hak_fatal("hakmem: operator new(%zu) failed and no C++ runtime can throw std::bad_alloc\n", n);
    }
    handler();
    void* p = align > 16 ? hak_memalign(align, n) : hak_malloc(n);
    if (p) return p;
  }
}

/* hak_malloc_inline here, not hak_malloc: the call-site of a large new is
 * the return address of operator new itself, i.e. the user's code. */
#define NEW_BODY(n, al, nt)                                  \
  void* p = (al) > 16 ? hak_memalign_inline((al), (n)) : hak_malloc_inline(n); \
  if (hak_likely(p != NULL)) return p;                       \
  return cxx_new_fail((n), (al), (nt));

/* The secure build marks a block from new[] and checks the mark at delete[]
 * (secure.c): new[] and delete[] must pair.  The default build compiles
 * these to what NEW_BODY and hak_free are. */
#if HAK_SECURE
#define ARRAY_MARK(p) _hak_secure_new_array(p)
#define ARRAY_FREE(p) (_hak_secure_delete_array((p), "operator delete[]"), hak_free_inline((p), "operator delete[]"))
#else
#define ARRAY_MARK(p) ((void)0)
#define ARRAY_FREE(p) hak_free(p)
#endif
#define ARRAY_NEW_BODY(n, al, nt)                            \
  void* p = (al) > 16 ? hak_memalign_inline((al), (n)) : hak_malloc_inline(n); \
  if (hak_unlikely(p == NULL)) p = cxx_new_fail((n), (al), (nt)); \
  ARRAY_MARK(p);                                             \
  return p;

hak_warm hak_api void* _Znwm(size_t n) { NEW_BODY(n, 0, false) }
hak_warm hak_api void* _Znam(size_t n) { ARRAY_NEW_BODY(n, 0, false) }
hak_api void* _ZnwmRKSt9nothrow_t(size_t n, const void* nt) { (void)nt; NEW_BODY(n, 0, true) }
hak_api void* _ZnamRKSt9nothrow_t(size_t n, const void* nt) { (void)nt; ARRAY_NEW_BODY(n, 0, true) }
hak_api void* _ZnwmSt11align_val_t(size_t n, size_t al) { NEW_BODY(n, al, false) }
hak_api void* _ZnamSt11align_val_t(size_t n, size_t al) { ARRAY_NEW_BODY(n, al, false) }
hak_api void* _ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void* nt) { (void)nt; NEW_BODY(n, al, true) }
hak_api void* _ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void* nt) { (void)nt; ARRAY_NEW_BODY(n, al, true) }

void _ZdlPv(void* p) HAK_ALIAS(hak_free);
/* sized delete: the size is checked against the block (sized_check) */
hak_warm hak_api void _ZdlPvm(void* p, size_t n) {
  hak_sized_check(p, n, true, "operator delete");
  hak_free_inline(p, "operator delete");
}
#if HAK_SECURE
hak_warm hak_api void _ZdaPv(void* p) { ARRAY_FREE(p); }
hak_warm hak_api void _ZdaPvm(void* p, size_t n) {
  _hak_secure_delete_array(p, "operator delete[]");
  hak_sized_check(p, n, true, "operator delete[]");
  hak_free_inline(p, "operator delete[]");
}
hak_api void _ZdaPvmSt11align_val_t(void* p, size_t n, size_t al) {
  _hak_secure_delete_array(p, "operator delete[]");
  hak_free_aligned_sized_cxx(p, n, al);
}
#else
void _ZdaPv(void* p) HAK_ALIAS(hak_free);
void _ZdaPvm(void* p, size_t n) HAK_ALIAS(_ZdlPvm);
void _ZdaPvmSt11align_val_t(void* p, size_t n, size_t al) HAK_ALIAS(hak_free_aligned_sized_cxx);
#endif
hak_api void _ZdlPvRKSt9nothrow_t(void* p, const void* nt) { (void)nt; hak_free(p); }
hak_api void _ZdaPvRKSt9nothrow_t(void* p, const void* nt) { (void)nt; ARRAY_FREE(p); }
hak_api void _ZdlPvSt11align_val_t(void* p, size_t al) { (void)al; hak_free(p); }
hak_api void _ZdaPvSt11align_val_t(void* p, size_t al) { (void)al; ARRAY_FREE(p); }
void _ZdlPvmSt11align_val_t(void* p, size_t n, size_t al) HAK_ALIAS(hak_free_aligned_sized_cxx);
hak_api void _ZdlPvSt11align_val_tRKSt9nothrow_t(void* p, size_t al, const void* nt) { (void)al; (void)nt; hak_free(p); }
hak_api void _ZdaPvSt11align_val_tRKSt9nothrow_t(void* p, size_t al, const void* nt) { (void)al; (void)nt; ARRAY_FREE(p); }
#endif /* HAK_NO_OVERRIDE */
