#include "huge_page_memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>

namespace rlx::cpu {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kSlabBytes = size_t{32} << 20;
// Every piece starts with this header (a pointer to its slab), which keeps the data 64-byte
// aligned.
constexpr size_t kHeader = 64;

struct Slab {
  unsigned char* base = nullptr;
  size_t size = 0;
  size_t used = 0;
  int live = 0;  // pieces not yet freed
};

std::mutex g_mu;
Slab* g_current = nullptr;  // the slab new small pieces come from
int g_slabs = 0;

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

Slab* new_slab(size_t size) {
  auto* base = static_cast<unsigned char*>(std::aligned_alloc(kHugePage, size));
  if (!base) return nullptr;
#ifdef MADV_HUGEPAGE
  // Advice only: refused (THP disabled), the slab is ordinary memory. Pages are still
  // allocated on first touch, so the unused tail of a slab costs address space, not memory.
  (void)madvise(base, size, MADV_HUGEPAGE);
#endif
  auto* s = new (std::nothrow) Slab;
  if (!s) {
    std::free(base);
    return nullptr;
  }
  s->base = base;
  s->size = size;
  ++g_slabs;
  return s;
}

void release(Slab* s) {
  if (s == g_current) g_current = nullptr;
  std::free(s->base);
  delete s;
  --g_slabs;
}

}  // namespace

void* huge_page_alloc(size_t bytes) {
  if (bytes > SIZE_MAX / 2) return nullptr;
  const size_t need = kHeader + round_up(bytes == 0 ? 1 : bytes, 64);
  std::lock_guard<std::mutex> lock(g_mu);
  Slab* s = nullptr;
  if (need > kSlabBytes / 4) {
    s = new_slab(round_up(need, kHugePage));
  } else {
    // A slab that is full stays until its last piece is freed (an empty one is released at
    // once, current or not: see huge_page_free).
    if (!g_current || g_current->used + need > g_current->size) g_current = new_slab(kSlabBytes);
    s = g_current;
  }
  if (!s) return nullptr;
  unsigned char* piece = s->base + s->used;
  s->used += need;
  ++s->live;
  *reinterpret_cast<Slab**>(piece) = s;
  return piece + kHeader;
}

void huge_page_free(void* p) {
  if (!p) return;
  Slab* s = *reinterpret_cast<Slab**>(static_cast<unsigned char*>(p) - kHeader);
  std::lock_guard<std::mutex> lock(g_mu);
  if (--s->live == 0) release(s);
}

int huge_page_slabs() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_slabs;
}

}  // namespace rlx::cpu
