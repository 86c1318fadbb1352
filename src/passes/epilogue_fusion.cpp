// Epilogue fusion: a generated elementwise kernel that is the only reader of a native
// kernel's output, reads it at the element it writes, walks its output in the same row-major
// order, and could run right after the native (no step in between touches its buffers), runs
// inside the native kernel on each finished tile (bias, activation, residual add while the
// tile is in cache). The native output then shares the epilogue's
// output memory, so the intermediate never goes to memory on its own.

#include <algorithm>
#include <optional>

#include "schedule.h"

namespace rlx::sched {
namespace {

// Whether k reads `arg` (at least once) and only at the element it stores (all its stores, when it
// has several, are at one index).
bool reads_only_at_store_index(const kir::GeneratedKernel& k, int arg) {
  if (k.stores.empty()) return false;
  const int store_index = k.stores[0].index;
  for (const kir::Store& st : k.stores)
    if (st.index != store_index || st.accumulate) return false;
  bool any = false;
  for (const kir::Expr& e : k.exprs) {
    if (e.kind == kir::ExprKind::reduce) return false;
    if (e.kind == kir::ExprKind::load && e.buffer == arg) {
      if (e.a != store_index || e.c >= 0) return false;  // (a guarded load is not the product everywhere)
      any = true;
    }
  }
  return any;
}

// Whether the generated kernel at step `from` can run at step `to` (< from) instead: no step in
// between writes a buffer it reads or writes, or reads a buffer it writes. Autocast's rounding
// of q, k and v for attention is built after all three projections, so each bias-and-round
// kernel comes two or three steps after its GEMM.
bool can_move_up(const kir::KernelProgram& p, size_t from, size_t to) {
  const std::vector<int> reads = p.step_reads(from), writes = p.step_writes(from);
  auto meets = [](const std::vector<int>& set, int b) { return std::find(set.begin(), set.end(), b) != set.end(); };
  for (size_t s = to; s < from; ++s) {
    for (int b : p.step_writes(s))
      if (meets(reads, b) || meets(writes, b)) return false;
    for (int b : p.step_reads(s))
      if (meets(writes, b)) return false;
  }
  return true;
}

// The store index must be the flattened domain position: sum of loop vars times the
// row-major strides of the domain (what the scheduler builds for elementwise kernels).
bool store_is_flat_domain(const kir::GeneratedKernel& k) {
  const kir::Expr& idx = k.exprs[k.stores[0].index];
  // a single loop: the index is the loop variable itself
  if (k.domain_rank == 1) return idx.kind == kir::ExprKind::loop_var && idx.loop == 0;
  // several loops: accept sum of var*stride terms (built by linearize) by evaluating the
  // expression at unit steps of each loop
  std::vector<int64_t> stride(k.domain_rank, 1);
  for (int l = k.domain_rank - 2; l >= 0; --l) stride[l] = stride[l + 1] * k.loops[l + 1].extent;
  std::function<std::optional<int64_t>(int, const std::vector<int64_t>&)> eval =
      [&](int e, const std::vector<int64_t>& at) -> std::optional<int64_t> {
    const kir::Expr& x = k.exprs[e];
    switch (x.kind) {
      case kir::ExprKind::loop_var: return x.loop < k.domain_rank ? std::optional<int64_t>(at[x.loop]) : std::nullopt;
      case kir::ExprKind::iconst: return x.ival;
      case kir::ExprKind::binary: {
        auto a = eval(x.a, at), b = eval(x.b, at);
        if (!a || !b) return std::nullopt;
        if (x.op == Op::Add) return *a + *b;
        if (x.op == Op::Mul) return *a * *b;
        return std::nullopt;
      }
      default: return std::nullopt;
    }
  };
  std::vector<int64_t> zero(k.domain_rank, 0);
  auto base = eval(k.stores[0].index, zero);
  if (!base || *base != 0) return false;
  for (int l = 0; l < k.domain_rank; ++l) {
    std::vector<int64_t> at(k.domain_rank, 0);
    at[l] = 1;
    auto v = eval(k.stores[0].index, at);
    if (!v || *v != stride[l]) return false;
  }
  return true;
}

}  // namespace

void fuse_native_epilogues(kir::KernelProgram& p, const std::function<bool(const kir::NativeKernel&)>& accepts) {
  // readers of each buffer (by root), per step
  auto root = [&](int b) {
    while (p.buffers[b].alias_of >= 0) b = p.buffers[b].alias_of;
    return b;
  };
  for (size_t si = 0; si < p.steps.size(); ++si) {
    if (!p.steps[si].native) continue;
    kir::NativeKernel& n = p.natives[p.steps[si].index];
    if (n.epilogue >= 0 || n.outputs.size() != 1 || !accepts(n)) continue;
    const int out = n.outputs[0];
    if (p.buffers[out].kind != kir::BufferKind::intermediate || p.buffers[out].alias_of >= 0) continue;
    // exactly one other step reads the output (directly or through a view), and it is next
    int reader = -1, readers = 0;
    for (size_t sj = 0; sj < p.steps.size(); ++sj) {
      if (sj == si) continue;
      std::vector<int> used;
      if (p.steps[sj].native) {
        const auto& m = p.natives[p.steps[sj].index];
        used.insert(used.end(), m.inputs.begin(), m.inputs.end());
      } else {
        used = p.generated[p.steps[sj].index].args;
      }
      if (std::any_of(used.begin(), used.end(), [&](int b) { return root(b) == out; })) {
        ++readers;
        reader = static_cast<int>(sj);
      }
    }
    if (readers != 1 || reader <= static_cast<int>(si) || p.steps[reader].native) continue;
    kir::GeneratedKernel& k = p.generated[p.steps[reader].index];
    if (reader != static_cast<int>(si) + 1 && !can_move_up(p, static_cast<size_t>(reader), si + 1)) continue;
    if (k.serial) continue;
    auto arg_it = std::find(k.args.begin(), k.args.end(), out);
    if (arg_it == k.args.end()) continue;  // read only through a view: layouts may differ
    const int arg = static_cast<int>(arg_it - k.args.begin());
    if (!reads_only_at_store_index(k, arg) || !store_is_flat_domain(k)) continue;
    const kir::Buffer& ob = p.buffers[out];
    if (k.rows() * k.cols() != numel(ob.sizes)) continue;
    bool sizes_match = true;
    int dst = -1;  // a destination the GEMM can write straight into
    for (const kir::Store& st : k.stores) {
      const int b = k.args[st.buffer];
      const kir::Buffer& db = p.buffers[b];
      sizes_match = sizes_match && numel(db.sizes) == numel(ob.sizes);
      if (dst < 0 && db.dtype == ob.dtype && db.alias_of < 0) dst = b;
    }
    if (!sizes_match) continue;
    n.epilogue = p.steps[reader].index;
    // the GEMM writes straight into an epilogue destination of the same type: each element is
    // read, transformed and written back in place while the tile is hot
    if (dst >= 0) p.buffers[out].alias_of = dst;
    p.steps.erase(p.steps.begin() + reader);
  }
  plan_memory(p);
}

}  // namespace rlx::sched
