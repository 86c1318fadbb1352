// The paged KV cache's block bookkeeping (models/kv_blocks.h): allocation order, release,
// prefix caching by content chain, reference counts of shared blocks, and eviction of cached
// blocks when the free ones run out.
#include <gtest/gtest.h>

#include <numeric>

#include "models/kv_blocks.h"

namespace rlx::models {
namespace {

std::vector<int64_t> iota_from(int64_t first, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Holds `ids` in `row` as a step would: reserve, then commit.
void feed(KvBlocks& kv, int64_t row, const std::vector<int64_t>& ids) {
  kv.reserve(row, static_cast<int64_t>(ids.size()));
  kv.commit(row, ids);
}

TEST(KvBlocks, HandsOutBlocksInOrderAndTakesThemBack) {
  KvBlocks kv(6, 2, 4, false);
  EXPECT_EQ(kv.available(), 6);
  EXPECT_EQ(kv.needed(0, 9), 3);
  feed(kv, 0, iota_from(0, 9));
  EXPECT_EQ(kv.table(0), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(kv.length(0), 9);
  EXPECT_EQ(kv.needed(0, 3), 0) << "the third block has room for 3 more";
  EXPECT_EQ(kv.needed(0, 4), 1);
  feed(kv, 1, iota_from(0, 5));
  EXPECT_EQ(kv.table(1), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(kv.available(), 1);
  kv.release(0);
  EXPECT_EQ(kv.available(), 4);
  EXPECT_EQ(kv.length(0), 0);
  EXPECT_EQ(kv.adopt_prefix(0, iota_from(0, 9)), 0) << "no prefix caching";
  feed(kv, 0, iota_from(0, 2));
  EXPECT_EQ(kv.table(0), (std::vector<int64_t>{1})) << "released blocks come back in the same order";
}

TEST(KvBlocks, PrefixCachingSharesWholeMatchingBlocks) {
  KvBlocks kv(8, 3, 4, true);
  const std::vector<int64_t> a = iota_from(100, 10);  // blocks [100..103] [104..107] and 2 more
  feed(kv, 0, a);
  // the same 8 first tokens, then others: the two full blocks are shared, not the partial one
  std::vector<int64_t> b = iota_from(100, 8);
  b.insert(b.end(), {7, 7, 7});
  EXPECT_EQ(kv.adopt_prefix(1, b), 8);
  EXPECT_EQ(kv.table(1), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(kv.length(1), 8);
  EXPECT_EQ(kv.available(), 5) << "shared blocks are not taken twice";
  // a prompt that is exactly the cached blocks keeps its last block to compute
  EXPECT_EQ(kv.adopt_prefix(2, iota_from(100, 8)), 4);
  kv.release(2);
  // a different first block: the second block's tokens alone do not match (the chain differs)
  std::vector<int64_t> c = {9, 9, 9, 9};
  const std::vector<int64_t> tail = iota_from(104, 5);
  c.insert(c.end(), tail.begin(), tail.end());
  EXPECT_EQ(kv.adopt_prefix(2, c), 0);
  kv.release(2);
  // released cached blocks stay findable while nothing needs them
  kv.release(0);
  kv.release(1);
  EXPECT_EQ(kv.available(), 8);
  EXPECT_EQ(kv.adopt_prefix(0, a), 8);
  kv.release(0);
}

TEST(KvBlocks, CachedBlocksAreEvictedWhenFreeOnesRunOut) {
  KvBlocks kv(3, 2, 2, true);
  feed(kv, 0, {1, 2, 3, 4, 5});  // blocks 1 and 2 full (cached), 3 partial
  kv.release(0);
  EXPECT_EQ(kv.available(), 3);
  feed(kv, 1, {8, 9, 8, 9, 8});  // takes the free block 3, then evicts cached ones
  EXPECT_EQ(kv.table(1).size(), 3u);
  EXPECT_EQ(kv.available(), 0);
  kv.release(1);
  EXPECT_EQ(kv.adopt_prefix(0, {1, 2, 3, 4, 5}), 0) << "the evicted blocks are no longer findable";
  EXPECT_EQ(kv.adopt_prefix(0, {8, 9, 8, 9, 8}), 4);
}

}  // namespace
}  // namespace rlx::models
