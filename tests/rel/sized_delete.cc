// Sized delete: a mismatched size (delete through a base without a virtual
// destructor-like size) is reported; legitimate sized deletes, realloc in
// place and C23 free_sized of malloc memory are not.
#include <cstdio>
#include <cstdlib>
#include <new>
struct Base { long a[2]; virtual ~Base() {} };
struct Derived : Base { long b[60]; };
int main(int argc, char** argv) {
  if (argc > 1) { Base* p = new Derived; ::operator delete(p, sizeof(Base)); }   // mismatched sized delete
  for (int i = 1; i < 5000; i += 7) { char* q = new char[i]; delete[] q; long* l = new long; delete l; }
  void* r = malloc(1000); r = realloc(r, 600); free(r);
  std::puts("ok");
}
