// C++ heap-misuse probes (issue #11), the C++ half of tests/test-probes.c,
// same protocol: "addr=0x..." before the misuse, then "missed" and exit 0
// when the program went on unnoticed; a signal (abort after a report) is
// "caught".  Built with -fsized-deallocation, so a delete passes the static
// type's size to operator delete, as C++14 and later compilers do.
//   test-probes-cxx list | test-probes-cxx NAME SIZE     (SIZE: 8, 4096 or 262144)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>

#include "misuse_util.h"

template <std::size_t N> struct Obj {
  char bytes[N];
};

// delete through a pointer to a type of half the object's size
template <std::size_t N> static void delete_wrong_size() {
  Obj<N>* o = new Obj<N>;
  std::memset(o->bytes, 'v', N);
  announce(o);
  delete static_cast<Obj<N / 2>*>(opaque(o));
}

// delete (not delete[]) of a new char[]
static void delete_array_mismatch(std::size_t n) {
  char* p = new char[n];
  std::memset(p, 'v', n);
  announce(p);
  delete static_cast<char*>(opaque(p));
}

int main(int argc, char** argv) {
  static const std::size_t sizes[] = {8, 4096, 262144};
  if (argc == 2 && std::strcmp(argv[1], "list") == 0) {
    for (const char* name : {"delete_wrong_size", "delete_array_mismatch"})
      for (std::size_t n : sizes) std::printf("%s %zu\n", name, n);
    return 0;
  }
  if (argc != 3) {
    std::fprintf(stderr, "usage: test-probes-cxx list | test-probes-cxx NAME SIZE\n");
    return 2;
  }
  std::size_t n = std::strtoull(argv[2], nullptr, 10);
  if (std::strcmp(argv[1], "delete_wrong_size") == 0) {
    if (n == 8) delete_wrong_size<8>();
    else if (n == 4096) delete_wrong_size<4096>();
    else if (n == 262144) delete_wrong_size<262144>();
    else return 2;
  } else if (std::strcmp(argv[1], "delete_array_mismatch") == 0) {
    delete_array_mismatch(n);
  } else {
    return 2;
  }
  // what a program does next: more of the same size
  for (int i = 0; i < 4096; i++) delete[] static_cast<char*>(opaque(new char[n]));
  std::puts("missed");
  return 0;
}
