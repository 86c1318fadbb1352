// The block bookkeeping of a paged KV cache (models/decoder.h): which blocks of the pool each
// sequence holds, which are free, and, with prefix caching, which full blocks hold which
// tokens, so that a new sequence whose prompt starts with the same tokens takes those blocks
// instead of computing them again (vLLM's automatic prefix caching).
//
// Block 0 is the scratch block and is never handed out. A full block is known by its tokens
// and the hash of every token before it (a chain: block i's key is (hash of blocks 0..i-1, its
// own tokens), compared exactly), so only a block whose whole prefix matches is shared. Shared
// blocks are only read: a sequence writes past its shared blocks, never into them. A block no
// sequence holds any more stays cached (and findable) until an allocation needs it; the least
// recently released goes first.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rlx::models {

class KvBlocks {
 public:
  // `blocks` blocks besides the scratch block, for `rows` sequences of blocks of `block_size`.
  KvBlocks(int64_t blocks, int64_t rows, int64_t block_size, bool prefix_caching);

  int64_t block_size() const { return block_size_; }
  int64_t blocks() const { return blocks_; }
  // Blocks an allocation can take: free ones and cached ones no sequence holds.
  int64_t available() const { return static_cast<int64_t>(free_.size() + lru_.size()); }
  // Blocks sequence `row` holds, in position order; tokens it holds.
  const std::vector<int64_t>& table(int64_t row) const { return rows_[row].blocks; }
  int64_t length(int64_t row) const { return rows_[row].length; }
  // New blocks `row` needs to hold `tokens` more tokens.
  int64_t needed(int64_t row, int64_t tokens) const;
  // Gives `row` the blocks its next `tokens` tokens need (callers check needed() against
  // available() first, for all rows of a step); they are appended in `ids` (positions
  // length .. length + tokens - 1) and the row's length grows when commit() is called.
  void reserve(int64_t row, int64_t tokens);
  // Records that `row` now holds `ids` after its earlier tokens (prefix caching hashes each block
  // they fill).
  void commit(int64_t row, const std::vector<int64_t>& ids);
  // With prefix caching, an empty row takes the cached full blocks that hold a prefix of `ids`
  // (never all of them: at least the last token is left to compute, for its logits). Returns
  // the tokens it now holds (0 without a match or without prefix caching).
  int64_t adopt_prefix(int64_t row, const std::vector<int64_t>& ids);
  // Empties `row`: its blocks go back (cached ones stay findable until reused).
  void release(int64_t row);

 private:
  struct Row {
    std::vector<int64_t> blocks, tokens;  // tokens: with prefix caching, every token it holds
    int64_t length = 0;
    uint64_t chain = 0;                   // hash of its full blocks' tokens
    int64_t hashed = 0;                   // full blocks already registered
  };
  using Key = std::pair<uint64_t, std::vector<int64_t>>;  // (hash of the blocks before, tokens)
  int64_t take();
  static uint64_t extend_hash(uint64_t h, const int64_t* ids, int64_t n);

  int64_t blocks_ = 0, block_size_ = 16;
  bool prefix_caching_ = false;
  std::vector<Row> rows_;
  std::vector<int64_t> free_;        // never-cached free blocks, a stack
  std::vector<int32_t> refs_;        // per block: sequences holding it
  std::list<int64_t> lru_;           // cached blocks no sequence holds, oldest first
  std::unordered_map<int64_t, std::list<int64_t>::iterator> lru_at_;
  std::map<Key, int64_t> cached_;    // full blocks by content
  std::unordered_map<int64_t, Key> key_of_;
};

}  // namespace rlx::models
