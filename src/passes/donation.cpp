// Donated inputs: an output written into the memory of an input (parameters updated in
// place by a training step). Legal when the kernel that writes the output reads the input
// only at the element it writes, and no other step reads the input afterwards; the writer
// moves after the input's last other reader when nothing in between needs its result.
#include <algorithm>

#include "schedule.h"

namespace rlx::sched {
namespace {

std::vector<int> buffers_read(const kir::KernelProgram& p, const kir::Step& s) {
  if (s.native) {
    const auto& n = p.natives[s.index];
    std::vector<int> r = n.inputs;
    if (n.epilogue >= 0) r.insert(r.end(), p.generated[n.epilogue].args.begin(), p.generated[n.epilogue].args.end());
    return r;
  }
  return p.generated[s.index].args;
}

int root(const kir::KernelProgram& p, int b) {
  while (p.buffers[b].alias_of >= 0) b = p.buffers[b].alias_of;
  return b;
}

}  // namespace

Status apply_donations(kir::KernelProgram& p, const std::vector<std::pair<int, int>>& donations) {
  for (auto [out_index, in_index] : donations) {
    if (out_index < 0 || out_index >= static_cast<int>(p.outputs.size()) || in_index < 0 ||
        in_index >= static_cast<int>(p.inputs.size()))
      return error(ErrorCode::invalid_argument, "donation of input ", in_index, " to output ", out_index, " is out of range");
    const int ob = p.outputs[out_index], ib = p.inputs[in_index];
    const kir::Buffer &O = p.buffers[ob], &I = p.buffers[ib];
    auto refuse = [&](auto... why) {
      return error(ErrorCode::unsupported, "output ", out_index, " cannot reuse the memory of input ", in_index, ": ", why...);
    };
    if (O.dtype != I.dtype || O.bytes() != I.bytes()) return refuse("they differ in type or size");
    // the step that writes the output
    int writer = -1;
    for (size_t s = 0; s < p.steps.size(); ++s) {
      const kir::Step& st = p.steps[s];
      if (st.native) {
        const auto& n = p.natives[st.index];
        bool writes = std::find(n.outputs.begin(), n.outputs.end(), ob) != n.outputs.end();
        if (n.epilogue >= 0)
          for (const auto& store : p.generated[n.epilogue].stores)
            writes |= p.generated[n.epilogue].args[store.buffer] == ob;
        if (writes) writer = static_cast<int>(s);
      } else {
        const auto& k = p.generated[st.index];
        for (const auto& store : k.stores)
          if (k.args[store.buffer] == ob) writer = static_cast<int>(s);
      }
    }
    if (writer < 0) return refuse("no kernel writes the output");
    const kir::Step ws = p.steps[writer];
    if (ws.native) {
      const auto& n = p.natives[ws.index];
      for (int b : n.inputs)
        if (root(p, b) == ib) return refuse("a native kernel reads the input while writing the output");
      // a GEMM writing straight into the output would overwrite the input before its
      // epilogue reads it: give the GEMM's result its own memory again
      for (int b : n.outputs)
        if (b != ob && root(p, b) == ob) p.buffers[b].alias_of = -1;
    }
    const kir::GeneratedKernel* k = ws.native ? (p.natives[ws.index].epilogue >= 0 ? &p.generated[p.natives[ws.index].epilogue] : nullptr)
                                              : &p.generated[ws.index];
    if (k) {
      // every load of the input must be at the store's own index
      int store_index = -1;
      for (const auto& st : k->stores)
        if (k->args[st.buffer] == ob) store_index = st.index;
      for (const auto& e : k->exprs)
        if (e.kind == kir::ExprKind::load && root(p, k->args[e.buffer]) == ib && e.a != store_index)
          return refuse("the kernel writing it reads the input at other elements");
    }
    // move the writer after the input's last other reader
    int last_reader = -1;
    for (size_t s = 0; s < p.steps.size(); ++s) {
      if (static_cast<int>(s) == writer) continue;
      for (int b : buffers_read(p, p.steps[s]))
        if (root(p, b) == ib) last_reader = static_cast<int>(s);
    }
    if (last_reader > writer) {
      // everything the writer stores (a kernel may store several outputs) must still be unread
      std::vector<int> written;
      if (ws.native) {
        for (int b : p.natives[ws.index].outputs) written.push_back(root(p, b));
      }
      if (k)
        for (const auto& store : k->stores) written.push_back(root(p, k->args[store.buffer]));
      for (int s = writer + 1; s <= last_reader; ++s)
        for (int b : buffers_read(p, p.steps[s]))
          if (std::find(written.begin(), written.end(), root(p, b)) != written.end())
            return refuse("a later step reads the output before the input's last use");
      p.steps.erase(p.steps.begin() + writer);
      p.steps.insert(p.steps.begin() + last_reader, ws);
    }
    p.donations.push_back({out_index, in_index});
  }
  plan_memory(p);
  return Status::ok();
}

}  // namespace rlx::sched
