// C++ test: every form of operator new/delete (plain, array, nothrow, sized,
// aligned, aligned nothrow), failure behaviour (std::bad_alloc, nullptr,
// new_handler), and a container stress with a printed checksum.
//
// Built twice: linked with libhakmem.so, and linked with glibc only (then run
// under LD_PRELOAD=libhakmem.so and without it: same checksum).  hakmem's
// hak_owns is looked up at run time to prove the blocks came from hakmem.
//
// usage: test-cxx [--require-hakmem]
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <map>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

static long checks, failures;
#define CHECK(cond)                                                          \
  do {                                                                       \
    checks++;                                                                \
    if (!(cond)) {                                                           \
      failures++;                                                            \
      printf("  FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond);             \
    }                                                                        \
  } while (0)

static int (*owns_fn)(const void*);
static bool owned(const void* p) { return owns_fn == nullptr || owns_fn(p) != 0; }
static bool aligned(const void* p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

static size_t opaque(size_t x) {
  __asm__ volatile("" : "+r"(x));
  return x;
}
// Keep the compiler from eliding a new/delete pair.
static void escape(void* p) { __asm__ volatile("" : : "r"(p) : "memory"); }

static void fill(void* p, size_t n, unsigned char v) { memset(p, v, n); }
static bool filled(const void* p, size_t n, unsigned char v) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != v) return false;
  return true;
}

static void test_operator_forms() {
  printf("- operator new/delete: plain, array, nothrow, sized\n");
  static const size_t sizes[] = {1, 8, 16, 24, 100, 1000, 1024, 5000, 70000, 300000, 3 << 20};
  for (size_t n : sizes) {
    void* p = ::operator new(n);
    escape(p);
    CHECK(p != nullptr && aligned(p, n >= 16 ? 16 : 8) && owned(p));
    fill(p, n, 1);
    CHECK(filled(p, n, 1));
    ::operator delete(p);

    p = ::operator new[](n);
    escape(p);
    CHECK(p != nullptr && owned(p));
    fill(p, n, 2);
    ::operator delete[](p);

    p = ::operator new(n, std::nothrow);
    escape(p);
    CHECK(p != nullptr && owned(p));
    fill(p, n, 3);
    ::operator delete(p, std::nothrow);

    p = ::operator new[](n, std::nothrow);
    escape(p);
    CHECK(p != nullptr && owned(p));
    fill(p, n, 4);
    ::operator delete[](p, std::nothrow);

    p = ::operator new(n);
    escape(p);
    fill(p, n, 5);
    ::operator delete(p, n);  // sized
    p = ::operator new[](n);
    escape(p);
    fill(p, n, 6);
    ::operator delete[](p, n);  // sized array
  }
  // new-expressions (the compiler picks sized delete for complete types).
  struct S { uint64_t a[5]; };
  for (int i = 0; i < 1000; i++) {
    S* s = new S();
    CHECK(s->a[0] == 0 && s->a[4] == 0 && owned(s));
    s->a[4] = (uint64_t)i;
    delete s;
    int* arr = new int[(size_t)i + 1]();
    CHECK(arr[i] == 0);
    arr[i] = i;
    delete[] arr;
  }
}

static void test_aligned_forms() {
  printf("- aligned operator new/delete with std::align_val_t 16 .. 1 MiB\n");
  static const size_t sizes[] = {1, 48, 100, 4096, 5000, 100000, 2 << 20};
  int count = 0;
  for (size_t a = 16; a <= (1 << 20); a *= 2) {
    std::align_val_t al = (std::align_val_t)a;
    for (size_t n : sizes) {
      // All six forms live at once, with small unaligned blocks in between,
      // so that a block is not simply the one just freed.
      void* p[6];
      char* spacer[6];
      for (int f = 0; f < 6; f++) {
        switch (f) {
          case 0: p[f] = ::operator new(n, al); break;
          case 1: p[f] = ::operator new[](n, al); break;
          case 2: p[f] = ::operator new(n, al, std::nothrow); break;
          case 3: p[f] = ::operator new[](n, al, std::nothrow); break;
          case 4: p[f] = ::operator new(n, al); break;
          default: p[f] = ::operator new[](n, al); break;
        }
        escape(p[f]);
        spacer[f] = new char[8 + f * 8];
        CHECK(p[f] != nullptr && aligned(p[f], a) && owned(p[f]));
        if (p[f] != nullptr && !aligned(p[f], a))
          printf("  alignment %zu, size %zu, form %d: %p\n", a, n, f, p[f]);
        fill(p[f], n, (unsigned char)(7 + f));
      }
      for (int f = 0; f < 6; f++) {
        CHECK(filled(p[f], n, (unsigned char)(7 + f)));
        delete[] spacer[f];
      }
      ::operator delete(p[0], al);
      ::operator delete[](p[1], al);
      ::operator delete(p[2], al, std::nothrow);
      ::operator delete[](p[3], al, std::nothrow);
      ::operator delete(p[4], n, al);  // sized aligned
      ::operator delete[](p[5], n, al);
      count += 6;
    }
  }
  struct alignas(256) Big { char c[300]; };
  std::vector<Big*> v;
  for (int i = 0; i < 300; i++) {
    Big* b = new Big();
    CHECK(aligned(b, 256) && b->c[299] == 0);
    b->c[0] = (char)i;
    v.push_back(b);
  }
  for (int i = 0; i < 300; i++) {
    CHECK(v[i]->c[0] == (char)i);
    delete v[i];
  }
  struct alignas(4096) Page { char c[4096]; };
  Page* pg = new Page[3];
  CHECK(aligned(pg, 4096) && owned(pg) == true);
  fill(pg, sizeof(Page) * 3, 13);
  delete[] pg;
  printf("  %d aligned allocations\n", count + 301);
}

static int handler_calls;
static void one_shot_handler() {
  handler_calls++;
  std::set_new_handler(nullptr);  // next attempt throws
}

static void test_failure() {
  printf("- impossible sizes: std::bad_alloc, nullptr, new_handler\n");
  size_t huge = opaque(SIZE_MAX - 4096);
  bool threw = false;
  try {
    void* p = ::operator new(huge);
    escape(p);
    ::operator delete(p);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  CHECK(threw);
  threw = false;
  try {
    void* p = ::operator new[](opaque((size_t)PTRDIFF_MAX + 1));
    escape(p);
    ::operator delete[](p);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  CHECK(threw);
  threw = false;
  try {
    void* p = ::operator new(huge, std::align_val_t(64));
    escape(p);
    ::operator delete(p, std::align_val_t(64));
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  CHECK(threw);
  void* p = ::operator new(huge, std::nothrow);
  escape(p);
  CHECK(p == nullptr);
  p = ::operator new[](huge, std::nothrow);
  escape(p);
  CHECK(p == nullptr);
  p = ::operator new(huge, std::align_val_t(4096), std::nothrow);
  escape(p);
  CHECK(p == nullptr);
  p = ::operator new[](huge, std::align_val_t(32), std::nothrow);
  escape(p);
  CHECK(p == nullptr);
  // Array new-expression with an overflowing count.
  threw = false;
  try {
    size_t cnt = opaque(SIZE_MAX / 4);
    uint64_t* a = new uint64_t[cnt];
    escape(a);
    delete[] a;
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  CHECK(threw);
  // operator new calls the installed new_handler before giving up.
  handler_calls = 0;
  std::set_new_handler(one_shot_handler);
  threw = false;
  try {
    void* q = ::operator new(huge);
    escape(q);
    ::operator delete(q);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  CHECK(threw);
  CHECK(handler_calls == 1);
  handler_calls = 0;
  std::set_new_handler(one_shot_handler);
  p = ::operator new(huge, std::nothrow);
  escape(p);
  CHECK(p == nullptr);
  CHECK(handler_calls == 1);
  std::set_new_handler(nullptr);
  printf("  new_handler calls seen: %d\n", handler_calls);
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

static uint64_t container_stress(int seed, int scale) {
  uint64_t sum = 0;
  std::map<uint64_t, std::string> m;
  std::unordered_map<std::string, std::vector<int>> um;
  std::vector<std::string> strs;
  for (int i = 0; i < 60000 * scale; i++) {
    uint64_t k = mix((uint64_t)i * 31 + (uint64_t)seed);
    std::string s = std::to_string(k) + std::string((size_t)(k % 50), (char)('a' + k % 26));
    m[k % 40000] = s;
    std::vector<int>& v = um[s.substr(0, 6)];
    v.push_back(i);
    if (k % 7 == 0) strs.push_back(s);
    if (k % 11 == 0 && !m.empty()) m.erase(m.begin());
    if (strs.size() > 5000) {
      for (const std::string& t : strs) sum += t.size() + (uint8_t)t[0];
      strs.clear();
      strs.shrink_to_fit();
    }
  }
  for (auto& kv : m) sum = sum * 1315423911u + kv.first + kv.second.size();
  for (auto& kv : um) sum += kv.second.size() * kv.first.size();
  std::vector<std::vector<uint32_t>> vv(2000);
  for (int r = 0; r < 20 * scale; r++)
    for (size_t i = 0; i < vv.size(); i++) vv[i].push_back((uint32_t)(i * r));
  for (auto& v : vv) sum += v.size() + v.back();
  return sum;
}

static void test_containers(uint64_t* total) {
  printf("- std::map/unordered_map/vector/string stress, 1 and 4 threads\n");
  uint64_t a = container_stress(1, 2);
  uint64_t b = container_stress(1, 2);
  CHECK(a == b);
  uint64_t sums[4];
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++) ts.emplace_back([t, &sums] { sums[t] = container_stress(t + 10, 1); });
  for (auto& t : ts) t.join();
  *total = a;
  for (int t = 0; t < 4; t++) *total = *total * 31 + sums[t];
  // Strings and vectors handed between threads and destroyed there.
  std::vector<std::string>* box = new std::vector<std::string>();
  for (int i = 0; i < 20000; i++) box->push_back(std::string((size_t)(i % 300), 'x'));
  std::thread killer([box] { delete box; });
  killer.join();
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  bool require = argc > 1 && strcmp(argv[1], "--require-hakmem") == 0;
  owns_fn = (int (*)(const void*))dlsym(RTLD_DEFAULT, "hak_owns");
  printf("test-cxx: hakmem %s\n", owns_fn ? "loaded" : "not loaded");
  if (require && !owns_fn) {
    printf("  FAILED: hakmem is not loaded\n");
    return 1;
  }
  test_operator_forms();
  test_aligned_forms();
  test_failure();
  uint64_t sum = 0;
  test_containers(&sum);
  printf("checksum %016llx\n", (unsigned long long)sum);
  printf("test-cxx: %ld checks, %ld failed\n", checks, failures);
  return failures ? 1 : 0;
}
