// C++ under injected mmap failures (tests/cases/rel_faults.sh): run with
// HAKMEM_FAIL_MMAP_AFTER=N HAKMEM_FAIL_MMAP_COUNT=0 (every mmap after the
// N-th fails).  operator new must throw std::bad_alloc, the nothrow forms
// must return nullptr, for the plain, array and aligned forms; blocks
// allocated before stay intact; nothing crashes.  Linked with
// build/libhakmem.a (whole archive): hakmem's operator new/delete.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

static const std::size_t MiB = std::size_t(1) << 20;
static int fails = 0;
static void check(bool ok, const char* what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    fails++;
  }
}

template <class F>
static bool throws_bad_alloc(F f) {
  try {
    f();
  } catch (const std::bad_alloc&) {
    return true;
  } catch (...) {
    std::printf("FAILED: an exception other than std::bad_alloc\n");
    fails++;
    return true;
  }
  return false;
}

int main() {
  static char* kept[256];
  int n = 0;
  bool threw = false;
  // allocate 3 MiB arrays until operator new[] throws
  for (; n < 256; n++) {
    try {
      kept[n] = new char[3 * MiB];
      std::memset(kept[n], n & 0x7f, 4096);
    } catch (const std::bad_alloc&) {
      threw = true;
      break;
    }
  }
  std::printf("new char[3 MiB]: %d succeeded, then %s\n", n, threw ? "std::bad_alloc" : "no failure");
  check(threw, "operator new[] never threw std::bad_alloc while mmap fails");
  if (threw) {
    check(throws_bad_alloc([] { delete static_cast<char*>(::operator new(5 * MiB)); }),
          "operator new(5 MiB) did not throw");
    check(throws_bad_alloc([] { ::operator delete(::operator new(100, std::align_val_t(4 * MiB)), std::align_val_t(4 * MiB)); }),
          "aligned operator new (4 MiB alignment) did not throw");
    check(throws_bad_alloc([] {
            struct alignas(8 * 1024 * 1024) Big { char c[64]; };
            delete new Big;
          }),
          "new of an 8 MiB-aligned type did not throw");
    check(new (std::nothrow) char[3 * MiB] == nullptr, "nothrow new[] did not return nullptr");
    check(::operator new(5 * MiB, std::nothrow) == nullptr, "nothrow operator new did not return nullptr");
    check(::operator new(100, std::align_val_t(4 * MiB), std::nothrow) == nullptr,
          "nothrow aligned operator new did not return nullptr");
  }
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < 4096; j++)
      if (kept[i][j] != (char)(i & 0x7f)) {
        check(false, "a block allocated before the failures changed");
        break;
      }
    delete[] kept[i];
  }
  // small objects still work from memory hakmem already has
  for (int i = 0; i < 1000; i++) delete new int(i);
  std::printf(fails ? "FAILED: %d checks\n" : "ok\n", fails);
  return fails != 0;
}
