// Sized delete: a mismatched size (delete through a base without a virtual
// destructor-like size) is reported; legitimate sized deletes, realloc in
// place and C23 free_sized of malloc memory are not.  The secure build also
// pairs new[] with delete[] (modes new_delete_array, new_array_delete,
// new_array_free: the misuse, then "missed" if the program went on);
// correct pairs, of every kind below, are silent.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "misuse_util.h"

struct Base { long a[2]; virtual ~Base() {} };
struct Derived : Base { long b[60]; };
struct alignas(64) Wide { char c[64]; };
int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (!std::strcmp(mode, "mismatch")) { Base* p = new Derived; ::operator delete(p, sizeof(Base)); }   // mismatched sized delete
  if (!std::strcmp(mode, "new_delete_array")) {   // new, then delete[] (no size passed)
    char* p = static_cast<char*>(opaque(new char));
    delete[] p;
    std::puts("missed");
    return 0;
  }
  if (!std::strcmp(mode, "new_array_delete")) {   // new[], then the unsized scalar delete
    ::operator delete(opaque(new char[40]));
    std::puts("missed");
    return 0;
  }
  if (!std::strcmp(mode, "new_array_free")) {   // new[] of a large block, then free
    std::free(opaque(new char[1 << 20]));
    std::puts("missed");
    return 0;
  }
  for (int i = 1; i < 5000; i += 7) { char* q = new char[i]; delete[] q; long* l = new long; delete l; }
  for (int i = 0; i < 3; i++) {   // arrays with a cookie, large arrays, aligned arrays, nothrow
    std::string* s = new std::string[10 + i];
    delete[] s;
    char* big = new char[(1 << 20) + i];
    delete[] big;
    Wide* w = new Wide[3 + i];
    delete[] w;
    char* nt = new (std::nothrow) char[100 + i];
    delete[] nt;
  }
  void* r = malloc(1000); r = realloc(r, 600); free(r);
  std::puts("ok");
}
