// Heap profiling of a threaded C++ program (tests/cases/core_prof.sh): four
// threads fill containers in functions of their own; the profile's top
// entries must name them.  Linked with libhakmem.so, so operator new is
// hakmem's; the profile is written while the containers are live.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include "hakmem.h"

struct Node {
  std::string name;
  std::vector<int> data;
};

__attribute__((noinline)) std::vector<std::unique_ptr<Node>> build_nodes(int n) {
  std::vector<std::unique_ptr<Node>> v;
  for (int i = 0; i < n; i++) {
    auto p = std::make_unique<Node>();
    p->name = "node-with-a-long-enough-name-" + std::to_string(i);
    p->data.assign(200, i);
    v.push_back(std::move(p));
  }
  return v;
}

__attribute__((noinline)) std::map<int, std::string> build_index(int n) {
  std::map<int, std::string> m;
  for (int i = 0; i < n; i++) m[i] = std::string(300, char('a' + i % 26));
  return m;
}

int main() {
  std::vector<std::vector<std::unique_ptr<Node>>> nodes(4);
  std::vector<std::map<int, std::string>> index(4);
  std::vector<std::thread> t;
  for (int k = 0; k < 4; k++)
    t.emplace_back([&, k] {
      nodes[k] = build_nodes(20000);
      index[k] = build_index(20000);
    });
  for (auto& th : t) th.join();
  size_t sum = 0;
  for (auto& v : nodes) sum += v.size();
  for (auto& m : index) sum += m.size();
  std::printf("%zu objects\n", sum);
  // the profile while the containers are live (at exit they are freed)
  return hakmem_prof_dump(nullptr) == 0 ? 0 : 1;
}
