// Memory planning: every intermediate buffer gets an offset in one arena; buffers whose
// lifetimes (first to last step that touches them, views included) do not intersect share
// memory. Greedy by size, first fit among the gaps left by live buffers.
#include <algorithm>

#include "schedule.h"

namespace rlx::sched {

void plan_memory(kir::KernelProgram& p) {
  const int nb = static_cast<int>(p.buffers.size());
  const int ns = static_cast<int>(p.steps.size());
  std::vector<int> first(nb, ns), last(nb, -1);
  auto root = [&](int b) {
    while (p.buffers[b].alias_of >= 0) b = p.buffers[b].alias_of;
    return b;
  };
  auto touch = [&](int b, int s) {
    int r = root(b);
    first[r] = std::min(first[r], s);
    last[r] = std::max(last[r], s);
  };
  for (int s = 0; s < ns; ++s) {
    const kir::Step& st = p.steps[s];
    if (st.native) {
      const kir::NativeKernel& n = p.natives[st.index];
      for (int b : n.inputs) touch(b, s);
      for (int b : n.outputs) touch(b, s);
      if (n.epilogue >= 0)
        for (int b : p.generated[n.epilogue].args) touch(b, s);
    } else {
      for (int b : p.generated[st.index].args) touch(b, s);
    }
  }
  std::vector<int> order;
  for (int i = 0; i < nb; ++i)
    if (p.buffers[i].kind == kir::BufferKind::intermediate && p.buffers[i].alias_of < 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return p.buffers[a].bytes() > p.buffers[b].bytes(); });
  struct Placed {
    int64_t offset, size;
    int first, last;
  };
  std::vector<Placed> placed;
  int64_t arena = 0;
  for (int b : order) {
    const int64_t size = static_cast<int64_t>((p.buffers[b].bytes() + 63) / 64 * 64);
    if (last[b] < 0) {  // never used: still give it valid memory
      first[b] = last[b] = ns;
    }
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Placed& q : placed)
      if (q.first <= last[b] && first[b] <= q.last) busy.push_back({q.offset, q.offset + q.size});
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (auto [lo, hi] : busy) {
      if (at + size <= lo) break;
      at = std::max(at, hi);
    }
    p.buffers[b].arena_offset = at;
    placed.push_back({at, size, first[b], last[b]});
    arena = std::max(arena, at + size);
  }
  p.arena_bytes = static_cast<size_t>(arena);
}

}  // namespace rlx::sched
