// Kernel-level IR: printing and verification.
#include <algorithm>
#include <sstream>

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

namespace {

std::string expr_text(const GeneratedKernel& k, int i) {
  const Expr& e = k.exprs[i];
  std::ostringstream os;
  os << "e" << i << ": " << dtype_name(e.dtype) << " = ";
  switch (e.kind) {
    case ExprKind::loop_var: os << "i" << e.loop; break;
    case ExprKind::iconst: os << e.ival; break;
    case ExprKind::fconst: os << e.fval; break;
    case ExprKind::load: os << "load b" << e.buffer << "[e" << e.a << "]"; break;
    case ExprKind::unary: os << op_name(e.op) << " e" << e.a; break;
    case ExprKind::binary: os << op_name(e.op) << " e" << e.a << ", e" << e.b; break;
    case ExprKind::select: os << "select e" << e.a << ", e" << e.b << ", e" << e.c; break;
    case ExprKind::cast: os << "cast e" << e.a; break;
    case ExprKind::idiv: os << "e" << e.a << " / e" << e.b; break;
    case ExprKind::imod: os << "e" << e.a << " % e" << e.b; break;
    case ExprKind::clamp: os << "clamp e" << e.a << " [" << e.ival << ", " << e.ival2 << "]"; break;
    case ExprKind::reduce: {
      os << op_name(e.op) << " e" << e.a << " over";
      for (int l : e.loops) os << " i" << l;
      break;
    }
    case ExprKind::random: os << "random seed " << e.ival << " at e" << e.a; break;
  }
  return os.str();
}

}  // namespace

std::string KernelProgram::to_text() const {
  std::ostringstream os;
  os << "kernels {\n";
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer& b = buffers[i];
    os << "  buffer b" << i << " " << buffer_kind_name(b.kind) << " " << dtype_name(b.dtype)
       << sizes_to_string(b.sizes);
    if (!b.name.empty()) os << " \"" << b.name << "\"";
    if (b.arena_offset >= 0) os << " @" << b.arena_offset;
    if (b.alias_of >= 0) os << " = view b" << b.alias_of;
    os << "\n";
  }
  auto print_generated = [&](const GeneratedKernel& k, const char* role) {
    os << "  " << role << " " << k.name << " domain [";
    for (int i = 0; i < k.domain_rank; ++i) os << (i ? ", " : "") << k.loops[i].extent;
    os << "] args (";
    for (size_t i = 0; i < k.args.size(); ++i) os << (i ? ", " : "") << "b" << k.args[i];
    os << ")" << (k.serial ? " serial" : "") << " {\n";
    for (size_t l = static_cast<size_t>(k.domain_rank); l < k.loops.size(); ++l)
      os << "    loop i" << l << " < " << k.loops[l].extent << "\n";
    for (size_t i = 0; i < k.exprs.size(); ++i) os << "    " << expr_text(k, static_cast<int>(i)) << "\n";
    for (const Store& st : k.stores)
      os << "    store b" << st.buffer << "[e" << st.index << "] " << (st.accumulate ? "+=" : "=") << " e" << st.value << "\n";
    os << "  }\n";
  };
  for (const Step& s : steps) {
    if (s.native) {
      const NativeKernel& n = natives[s.index];
      os << "  native " << n.name << " " << op_name(n.op) << "(";
      for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << "b" << n.inputs[i];
      os << ") -> (";
      for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << "b" << n.outputs[i];
      os << ")";
      if (!n.how.empty()) os << "  # " << n.how;
      os << "\n";
      if (n.epilogue >= 0) print_generated(generated[n.epilogue], "  epilogue");
    } else {
      print_generated(generated[s.index], "generated");
    }
  }
  os << "  arena " << arena_bytes << " bytes\n}\n";
  return os.str();
}

Status verify_program(const KernelProgram& p) {
  const int nb = static_cast<int>(p.buffers.size());
  auto bad = [](auto... parts) { return error(ErrorCode::verify_error, "kernel program: ", parts...); };
  for (int i = 0; i < nb; ++i) {
    const Buffer& b = p.buffers[i];
    if (b.alias_of >= nb || b.alias_of == i) return bad("buffer b", i, " aliases an invalid buffer");
    if (b.alias_of >= 0 && p.buffers[b.alias_of].bytes() < b.bytes())
      return bad("buffer b", i, " is a view larger than b", b.alias_of);
    if (b.kind == BufferKind::intermediate && b.alias_of < 0 &&
        (b.arena_offset < 0 || static_cast<size_t>(b.arena_offset) + b.bytes() > p.arena_bytes))
      return bad("buffer b", i, " lies outside the arena");
  }
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

}  // namespace rlx::kir
