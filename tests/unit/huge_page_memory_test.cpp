// The huge-page slab allocator behind packed weights and the CPU arena
// (src/backends/cpu/huge_page_memory.h): alignment, disjoint pieces that keep what is written
// to them, slabs released when their last piece goes, and concurrent use.
#include "backends/cpu/huge_page_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace rlx::cpu {
namespace {

TEST(HugePageMemory, PiecesAreAlignedDisjointAndKeepTheirContents) {
  const int slabs_before = huge_page_slabs();
  std::mt19937 rng(11);
  std::vector<std::pair<unsigned char*, size_t>> pieces;
  // small pieces share slabs; a few above a quarter slab (8 MiB) get their own
  for (size_t bytes : {size_t{1}, size_t{63}, size_t{64}, size_t{576} << 10, size_t{9} << 20, size_t{2359296},
                       size_t{100}, size_t{20} << 20, size_t{3} << 20, size_t{0}}) {
    auto* p = static_cast<unsigned char*>(huge_page_alloc(bytes));
    ASSERT_NE(p, nullptr) << bytes << " bytes";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes << " bytes";
    pieces.push_back({p, bytes});
  }
  // many more small ones than fit in one 32 MiB slab
  for (int i = 0; i < 80; ++i) {
    const size_t bytes = (rng() % 1024 + 1) * 1024;
    auto* p = static_cast<unsigned char*>(huge_page_alloc(bytes));
    ASSERT_NE(p, nullptr);
    pieces.push_back({p, bytes});
  }
  EXPECT_GT(huge_page_slabs(), slabs_before + 2);
  // fill each piece with its own pattern, then check none was overwritten by another
  for (size_t i = 0; i < pieces.size(); ++i) std::memset(pieces[i].first, static_cast<int>(i * 37 + 1), pieces[i].second);
  auto sorted = pieces;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i)
    EXPECT_LE(reinterpret_cast<uintptr_t>(sorted[i - 1].first) + sorted[i - 1].second,
              reinterpret_cast<uintptr_t>(sorted[i].first));
  for (size_t i = 0; i < pieces.size(); ++i)
    for (size_t j = 0; j < pieces[i].second; j += 4093)
      ASSERT_EQ(pieces[i].first[j], static_cast<unsigned char>(i * 37 + 1)) << "piece " << i << " byte " << j;
  // free in a shuffled order: every slab goes once its last piece does
  std::shuffle(pieces.begin(), pieces.end(), rng);
  for (auto& p : pieces) huge_page_free(p.first);
  EXPECT_EQ(huge_page_slabs(), slabs_before);
  huge_page_free(nullptr);
  EXPECT_EQ(huge_page_alloc(SIZE_MAX - 8), nullptr);
}

TEST(HugePageMemory, ConcurrentAllocationAndFree) {
  const int slabs_before = huge_page_slabs();
  auto worker = [](int seed) {
    std::mt19937 rng(seed);
    std::vector<std::pair<unsigned char*, unsigned char>> live;
    for (int i = 0; i < 400; ++i) {
      if (!live.empty() && rng() % 3 == 0) {
        const size_t k = rng() % live.size();
        if (live[k].first[0] != live[k].second) return false;
        huge_page_free(live[k].first);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        const size_t bytes = (rng() % 256 + 1) * 1024;
        auto* p = static_cast<unsigned char*>(huge_page_alloc(bytes));
        if (!p) return false;
        const auto tag = static_cast<unsigned char>(rng());
        std::memset(p, tag, bytes);
        live.push_back({p, tag});
      }
    }
    bool ok = true;
    for (auto& [p, tag] : live) {
      ok = ok && p[0] == tag;
      huge_page_free(p);
    }
    return ok;
  };
  bool ok[4] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { ok[t] = worker(100 + t); });
  for (auto& t : threads) t.join();
  for (int t = 0; t < 4; ++t) EXPECT_TRUE(ok[t]) << "thread " << t;
  EXPECT_EQ(huge_page_slabs(), slabs_before);
}

}  // namespace
}  // namespace rlx::cpu
