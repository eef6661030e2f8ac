// C++ misuse for tests/cases/rel_misuse.sh: operator delete of a pointer
// hakmem never gave out, and a double delete.  Linked with build/libhakmem.a
// (whole archive), whose operator new/delete replace libstdc++'s.
//   test-misuse-suite-cxx SCENARIO   (delete_stack | delete_array_stack | delete_twice)
#include <cstdio>
#include <cstring>

#include "misuse_util.h"

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "";
  alignas(16) char buf[64];
  std::memset(buf, 0, sizeof buf);
  if (std::strcmp(name, "delete_stack") == 0) {
    announce(buf);
    delete static_cast<long*>(opaque(buf));
  } else if (std::strcmp(name, "delete_array_stack") == 0) {
    announce(buf);
    delete[] static_cast<char*>(opaque(buf));
  } else if (std::strcmp(name, "delete_twice") == 0) {
    long* p = new long[4];   // 32 bytes
    delete[] p;
    announce(p);
    delete[] static_cast<long*>(opaque(p));
  } else {
    std::fprintf(stderr, "usage: test-misuse-suite-cxx delete_stack|delete_array_stack|delete_twice\n");
    return 2;
  }
  std::puts("done");
  return 0;
}
