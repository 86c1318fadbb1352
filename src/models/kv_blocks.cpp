#include "models/kv_blocks.h"

#include <algorithm>

namespace rlx::models {

KvBlocks::KvBlocks(int64_t blocks, int64_t rows, int64_t block_size, bool prefix_caching)
    : blocks_(blocks), block_size_(block_size), prefix_caching_(prefix_caching), rows_(static_cast<size_t>(rows)),
      refs_(static_cast<size_t>(blocks + 1), 0) {
  // handed out lowest first, so that a fresh pool gives a sequence consecutive blocks (the
  // CPU's attention then reads them in place)
  for (int64_t b = blocks; b >= 1; --b) free_.push_back(b);
}

uint64_t KvBlocks::extend_hash(uint64_t h, const int64_t* ids, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint64_t x = h ^ (static_cast<uint64_t>(ids[i]) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    h = x ^ (x >> 31);
  }
  return h;
}

int64_t KvBlocks::needed(int64_t row, int64_t tokens) const {
  const Row& r = rows_[row];
  const int64_t want = (r.length + tokens + block_size_ - 1) / block_size_;
  return std::max<int64_t>(0, want - static_cast<int64_t>(r.blocks.size()));
}

int64_t KvBlocks::take() {
  int64_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    // the cached block released longest ago stops being findable
    b = lru_.front();
    lru_.pop_front();
    lru_at_.erase(b);
    auto k = key_of_.find(b);
    cached_.erase(k->second);
    key_of_.erase(k);
  }
  refs_[b] = 1;
  return b;
}

void KvBlocks::reserve(int64_t row, int64_t tokens) {
  for (int64_t k = needed(row, tokens); k > 0; --k) rows_[row].blocks.push_back(take());
}

void KvBlocks::commit(int64_t row, const std::vector<int64_t>& ids) {
  Row& r = rows_[row];
  r.length += static_cast<int64_t>(ids.size());
  if (!prefix_caching_) return;
  r.tokens.insert(r.tokens.end(), ids.begin(), ids.end());
  for (; (r.hashed + 1) * block_size_ <= r.length; ++r.hashed) {
    const int64_t* first = r.tokens.data() + r.hashed * block_size_;
    Key key{r.chain, std::vector<int64_t>(first, first + block_size_)};
    const int64_t b = r.blocks[r.hashed];
    // (a block with the same content may be cached already: this one then stays private)
    if (!cached_.count(key) && !key_of_.count(b)) {
      key_of_.emplace(b, key);
      cached_.emplace(std::move(key), b);
    }
    r.chain = extend_hash(r.chain, first, block_size_);
  }
}

int64_t KvBlocks::adopt_prefix(int64_t row, const std::vector<int64_t>& ids) {
  Row& r = rows_[row];
  if (!prefix_caching_ || r.length != 0 || ids.empty()) return 0;
  const int64_t most = (static_cast<int64_t>(ids.size()) - 1) / block_size_;
  for (int64_t i = 0; i < most; ++i) {
    const int64_t* first = ids.data() + i * block_size_;
    auto it = cached_.find(Key{r.chain, std::vector<int64_t>(first, first + block_size_)});
    if (it == cached_.end()) break;
    const int64_t b = it->second;
    if (refs_[b]++ == 0) {
      lru_.erase(lru_at_.at(b));
      lru_at_.erase(b);
    }
    r.blocks.push_back(b);
    r.chain = extend_hash(r.chain, first, block_size_);
    ++r.hashed;
  }
  r.length = r.hashed * block_size_;
  r.tokens.assign(ids.begin(), ids.begin() + r.length);
  return r.length;
}

void KvBlocks::release(int64_t row) {
  Row& r = rows_[row];
  // in reverse, so that the free stack hands them out again in the same order
  for (auto it = r.blocks.rbegin(); it != r.blocks.rend(); ++it) {
    const int64_t b = *it;
    if (--refs_[b] > 0) continue;
    if (key_of_.count(b)) {
      lru_at_[b] = lru_.insert(lru_.end(), b);
    } else {
      free_.push_back(b);
    }
  }
  r = Row{};
}

}  // namespace rlx::models
