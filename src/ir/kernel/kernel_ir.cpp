// Kernel-level IR: names and verification (the text form is in kernel_text.cpp).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "rlx/kernel_ir.h"

namespace rlx::kir {

std::string_view buffer_kind_name(BufferKind k) {
  switch (k) {
    case BufferKind::input: return "input";
    case BufferKind::output: return "output";
    case BufferKind::weight: return "weight";
    case BufferKind::constant: return "constant";
    case BufferKind::intermediate: return "temp";
  }
  return "?";
}

std::string_view expr_kind_name(ExprKind k) {
  switch (k) {
    case ExprKind::loop_var: return "var";
    case ExprKind::iconst: return "iconst";
    case ExprKind::fconst: return "fconst";
    case ExprKind::load: return "load";
    case ExprKind::unary: return "unary";
    case ExprKind::binary: return "binary";
    case ExprKind::select: return "select";
    case ExprKind::cast: return "cast";
    case ExprKind::idiv: return "idiv";
    case ExprKind::imod: return "imod";
    case ExprKind::clamp: return "clamp";
    case ExprKind::reduce: return "reduce";
    case ExprKind::random: return "random";
  }
  return "?";
}

bool Expr::operator==(const Expr& o) const {
  auto same_f = [](double x, double y) { return x == y || (x != x && y != y); };
  return kind == o.kind && dtype == o.dtype && op == o.op && a == o.a && b == o.b && c == o.c && ival == o.ival &&
         ival2 == o.ival2 && same_f(fval, o.fval) && same_f(fval2, o.fval2) && buffer == o.buffer &&
         loop == o.loop && loops == o.loops;
}

int64_t GeneratedKernel::rows() const {
  int64_t r = 1;
  for (int i = 0; i + 1 < domain_rank; ++i) r *= loops[i].extent;
  return r;
}

int64_t GeneratedKernel::cols() const { return domain_rank == 0 ? 1 : loops[domain_rank - 1].extent; }

int KernelProgram::root(int b) const {
  while (buffers[static_cast<size_t>(b)].alias_of >= 0) b = buffers[static_cast<size_t>(b)].alias_of;
  return b;
}

std::vector<int> KernelProgram::step_reads(size_t step) const {
  std::vector<int> r;
  auto add_args = [&](const GeneratedKernel& k) {
    for (int b : k.args) r.push_back(root(b));
  };
  if (steps[step].native) {
    const NativeKernel& n = natives[static_cast<size_t>(steps[step].index)];
    for (int b : n.inputs) r.push_back(root(b));
    if (n.epilogue >= 0) add_args(generated[static_cast<size_t>(n.epilogue)]);
  } else {
    add_args(generated[static_cast<size_t>(steps[step].index)]);
  }
  return r;
}

std::vector<int> KernelProgram::step_writes(size_t step) const {
  std::vector<int> w;
  auto add_stores = [&](const GeneratedKernel& k) {
    for (const Store& st : k.stores) w.push_back(root(k.args[static_cast<size_t>(st.buffer)]));
  };
  if (steps[step].native) {
    const NativeKernel& n = natives[static_cast<size_t>(steps[step].index)];
    for (int b : n.outputs) w.push_back(root(b));
    if (n.epilogue >= 0) add_stores(generated[static_cast<size_t>(n.epilogue)]);
  } else {
    add_stores(generated[static_cast<size_t>(steps[step].index)]);
  }
  return w;
}

Status verify_program(const KernelProgram& p) {
  const int nb = static_cast<int>(p.buffers.size());
  auto bad = [](auto... parts) { return error(ErrorCode::verify_error, "kernel program: ", parts...); };
  const int nn = static_cast<int>(p.natives.size()), ng = static_cast<int>(p.generated.size());
  auto valid_buffer = [&](int b) { return b >= 0 && b < nb; };
  for (int i = 0; i < nb; ++i)
    if (p.buffers[i].alias_of >= nb || p.buffers[i].alias_of == i) return bad("buffer b", i, " aliases an invalid buffer");
  // every chain of views ends at a buffer that owns its bytes (no cycle); linear time, as
  // each buffer is walked once
  std::vector<uint8_t> state(nb, 0);  // 0: not seen, 1: on the current chain, 2: ends well
  for (int i = 0; i < nb; ++i) {
    int r = i;
    while (r >= 0 && state[r] == 0) {
      state[r] = 1;
      r = p.buffers[r].alias_of;
    }
    if (r >= 0 && state[r] == 1) return bad("buffer b", r, " is a view in a cycle of views");
    for (int c = i; c >= 0 && state[c] == 1; c = p.buffers[c].alias_of) state[c] = 2;
  }
  for (int i = 0; i < nb; ++i) {
    const Buffer& b = p.buffers[i];
    if (b.alias_of >= 0 && p.buffers[b.alias_of].bytes() < b.bytes())
      return bad("buffer b", i, " is a view larger than b", b.alias_of);
    if (b.kind == BufferKind::intermediate && b.alias_of < 0 &&
        (b.arena_offset < 0 || static_cast<size_t>(b.arena_offset) + b.bytes() > p.arena_bytes))
      return bad("buffer b", i, " lies outside the arena");
  }
  for (int b : p.inputs)
    if (!valid_buffer(b)) return bad("a program input is an invalid buffer");
  for (int b : p.outputs)
    if (!valid_buffer(b)) return bad("a program output is an invalid buffer");
  for (const NativeKernel& n : p.natives) {
    for (int b : n.inputs)
      if (!valid_buffer(b)) return bad(n.name, " reads an invalid buffer");
    for (int b : n.outputs)
      if (!valid_buffer(b)) return bad(n.name, " writes an invalid buffer");
    if (n.epilogue < -1 || n.epilogue >= ng) return bad(n.name, " has an invalid epilogue");
  }
  for (const Step& s : p.steps)
    if (s.index < 0 || s.index >= (s.native ? nn : ng)) return bad("a step runs an invalid kernel");
  for (const GeneratedKernel& k : p.generated) {
    const int ne = static_cast<int>(k.exprs.size()), nl = static_cast<int>(k.loops.size());
    if (k.domain_rank < 1 || k.domain_rank > nl) return bad(k.name, " has no domain");
    for (int arg : k.args)
      if (arg < 0 || arg >= nb) return bad(k.name, " takes an invalid buffer");
    for (int i = 0; i < ne; ++i) {
      const Expr& e = k.exprs[i];
      for (int o : {e.a, e.b, e.c})
        if (o >= i) return bad(k.name, " e", i, " uses e", o, " before it is defined");
      auto need_i64 = [&](int o) { return o >= 0 && k.exprs[o].dtype != DType::i64; };
      switch (e.kind) {
        case ExprKind::loop_var:
          if (e.loop < 0 || e.loop >= nl) return bad(k.name, " e", i, " uses an invalid loop");
          break;
        case ExprKind::load:
          if (e.buffer < 0 || e.buffer >= static_cast<int>(k.args.size())) return bad(k.name, " e", i, " loads an invalid buffer");
          if (e.a < 0 || need_i64(e.a)) return bad(k.name, " e", i, " has a non-i64 index");
          if (e.c >= 0 && k.exprs[e.c].dtype != DType::boolean) return bad(k.name, " e", i, " has a non-boolean guard");
          break;
        case ExprKind::idiv:
        case ExprKind::imod:
        case ExprKind::clamp:
          if (e.a < 0 || need_i64(e.a) || need_i64(e.b)) return bad(k.name, " e", i, " mixes index math with values");
          break;
        case ExprKind::reduce:
          if (e.a < 0 || e.loops.empty()) return bad(k.name, " e", i, " is an empty reduction");
          for (int l : e.loops)
            if (l < k.domain_rank || l >= nl) return bad(k.name, " e", i, " reduces over a domain loop");
          break;
        default: break;
      }
    }
    for (const Store& s : k.stores) {
      if (s.buffer < 0 || s.buffer >= static_cast<int>(k.args.size())) return bad(k.name, " stores to an invalid buffer");
      if (s.index < 0 || s.index >= ne || s.value < 0 || s.value >= ne) return bad(k.name, " has an invalid store");
      if (k.exprs[s.index].dtype != DType::i64) return bad(k.name, " stores at a non-i64 index");
    }
  }
  // Arena: buffers whose lifetimes intersect must not overlap.
  const int ns = static_cast<int>(p.steps.size());
  std::vector<int> first(nb, ns), last(nb, -1);
  auto root = [&](int b) {
    while (p.buffers[b].alias_of >= 0) b = p.buffers[b].alias_of;
    return b;
  };
  for (int s = 0; s < ns; ++s) {
    std::vector<int> used;
    if (p.steps[s].native) {
      const NativeKernel& n = p.natives[p.steps[s].index];
      used.insert(used.end(), n.inputs.begin(), n.inputs.end());
      used.insert(used.end(), n.outputs.begin(), n.outputs.end());
      if (n.epilogue >= 0) {
        const auto& a = p.generated[n.epilogue].args;
        used.insert(used.end(), a.begin(), a.end());
      }
    } else {
      const auto& a = p.generated[p.steps[s].index].args;
      used.insert(used.end(), a.begin(), a.end());
    }
    for (int b : used) {
      int r = root(b);
      first[r] = std::min(first[r], s);
      last[r] = std::max(last[r], s);
    }
  }
  for (int i = 0; i < nb; ++i) {
    const Buffer& a = p.buffers[i];
    if (a.kind != BufferKind::intermediate || a.alias_of >= 0 || last[i] < 0) continue;
    for (int j = i + 1; j < nb; ++j) {
      const Buffer& b = p.buffers[j];
      if (b.kind != BufferKind::intermediate || b.alias_of >= 0 || last[j] < 0) continue;
      bool live_overlap = first[i] <= last[j] && first[j] <= last[i];
      bool mem_overlap = a.arena_offset < b.arena_offset + static_cast<int64_t>(b.bytes()) &&
                         b.arena_offset < a.arena_offset + static_cast<int64_t>(a.bytes());
      if (live_overlap && mem_overlap && a.bytes() > 0 && b.bytes() > 0)
        return bad("buffers b", i, " and b", j, " overlap in the arena while both are live");
    }
  }
  return Status::ok();
}

Status check_run_io(const KernelProgram& p, std::span<const Tensor> inputs, std::span<const Tensor> outputs) {
  if (inputs.size() != p.inputs.size())
    return error(ErrorCode::invalid_argument, "expected ", p.inputs.size(), " inputs, got ", inputs.size());
  if (outputs.size() != p.outputs.size())
    return error(ErrorCode::invalid_argument, "expected ", p.outputs.size(), " outputs, got ", outputs.size());
  auto check = [&](int b, const Tensor& t, const char* what, size_t i) -> Status {
    const Buffer& buf = p.buffers[b];
    if (t.dtype() != buf.dtype || t.sizes() != buf.sizes)
      return error(ErrorCode::invalid_argument, what, " ", i, (buf.name.empty() ? "" : " ('" + buf.name + "')"), " is ",
                   t.type().to_string(), ", expected ", dtype_name(buf.dtype), sizes_to_string(buf.sizes));
    if (t.nbytes() > 0 && (!t.storage() || t.byte_offset() + t.nbytes() > t.storage()->size()))
      return error(ErrorCode::invalid_argument, what, " ", i, " holds fewer bytes than its shape needs");
    return Status::ok();
  };
  for (size_t i = 0; i < inputs.size(); ++i) RLX_TRY(check(p.inputs[i], inputs[i], "input", i));
  for (size_t i = 0; i < outputs.size(); ++i) RLX_TRY(check(p.outputs[i], outputs[i], "output", i));
  return Status::ok();
}

std::vector<Tensor> allocate_outputs(const KernelProgram& p) {
  std::vector<Tensor> outs;
  for (int b : p.outputs) outs.push_back(Tensor::zeros(p.buffers[b].dtype, p.buffers[b].sizes));
  return outs;
}

}  // namespace rlx::kir
