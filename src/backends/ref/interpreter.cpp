// The reference interpreter's driver: input checks, shape binding and re-inference, sources,
// dispatch to the per-family kernels, value lifetimes and fresh outputs.
#include "backends/ref/interpreter.h"

#include <limits>
#include <set>

#include "backends/ref/interp_internal.h"
#include "dist/collective_ops.h"
#include "rlx/checked.h"

namespace rlx::ref {
namespace {

using detail::KernelArgs;

// Whether `t` holds the bytes its dtype and sizes need.
bool has_bytes(const Tensor& t) {
  if (t.numel() == 0) return true;
  const auto& s = t.storage();
  return s && s->size() >= t.byte_offset() && s->size() - t.byte_offset() >= t.nbytes();
}

// Binds the dims of `declared` against concrete `sizes`: static dims must agree, a symbol is
// bound on first sight and must agree afterwards, an unknown dim takes any size. Returns a
// description of the first mismatch, or "" when they agree.
std::string bind_dims(const Shape& declared, const Sizes& sizes, DimBindings& b) {
  if (declared.size() != sizes.size())
    return cat("rank ", sizes.size(), " where ", declared.size(), " is expected");
  for (size_t d = 0; d < sizes.size(); ++d) {
    const Dim& want = declared[d];
    if (want.is_static()) {
      if (want.size() != sizes[d]) return cat("size ", sizes[d], " on axis ", d, " where ", want.size(), " is expected");
    } else if (want.is_symbol()) {
      auto it = b.find(want.symbol_name());
      if (it == b.end()) {
        b[want.symbol_name()] = sizes[d];
      } else if (it->second != sizes[d]) {
        return cat("size ", sizes[d], " on axis ", d, " where '", want.symbol_name(), "' is ", it->second);
      }
    }
  }
  return "";
}

std::string describe(const Tensor& t) { return cat(dtype_name(t.dtype()), sizes_to_string(t.sizes())); }

Expected<Tensor> allocate(const TensorType& t, std::string_view label) {
  RLX_ASSIGN_OR_RETURN(Sizes sizes, static_sizes(t.shape, label));
  RLX_ASSIGN_OR_RETURN(int64_t n, checked_numel(sizes));
  if (!checked_mul(static_cast<uint64_t>(n), static_cast<uint64_t>(dtype_bits(t.dtype))))
    return error(ErrorCode::overflow, label, ": output of ", n, " elements is too large");
  return Tensor::allocate(t.dtype, std::move(sizes), label);
}

Expected<Tensor> run_source(const Node& n, std::string_view label, const TensorType& type) {
  RLX_ASSIGN_OR_RETURN(Tensor out, allocate(type, label));
  const Attrs& a = n.attrs;
  const DType t = out.dtype();
  uint8_t* p = out.bytes();
  const int64_t count = out.numel();
  if (n.op == Op::Iota) {
    const int rank = out.rank();
    int64_t axis = a.i("axis");
    if (axis < 0) axis += rank;
    const Sizes cs = contiguous_strides(out.sizes());
    const int64_t stride = cs[axis], size = out.sizes()[axis];
    for (int64_t i = 0; i < count; ++i) {
      const int64_t v = (i / stride) % size;
      if (is_float(t)) {
        detail::store_f(p, t, i, static_cast<double>(v));
      } else {
        detail::store_bits(p, t, i, static_cast<uint64_t>(v));
      }
    }
    return out;
  }
  // random
  const uint64_t seed = static_cast<uint64_t>(a.i("seed", 0));
  const std::string dist = a.s("dist");
  const double ra = a.f("a", 0.0), rb = a.f("b", 1.0);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t c = static_cast<uint64_t>(i);
    detail::store_f(p, t, i, dist == "normal" ? random_normal(seed, c, ra, rb) : random_uniform(seed, c, ra, rb));
  }
  return out;
}

// Checks the type re-inferred from concrete inputs against the recorded one and binds symbols.
Status reconcile(const TensorType& recorded, const TensorType& inferred, DimBindings& b, std::string_view label,
                 size_t index) {
  if (!is_static(inferred.shape))
    return error(ErrorCode::verify_error, label, ": output ", index, " has no static shape (",
                 inferred.to_string(), ") even with concrete inputs");
  std::string why;
  if (recorded.dtype != inferred.dtype) {
    why = cat("dtype ", dtype_name(inferred.dtype));
  } else {
    why = bind_dims(recorded.shape, *static_sizes(inferred.shape), b);
  }
  if (!why.empty())
    return error(ErrorCode::verify_error, label, ": output ", index, " is recorded as ", recorded.to_string(),
                 " but its inputs give ", inferred.to_string(), " (", why, ")");
  return Status::ok();
}

}  // namespace

bool implements(Op op, std::span<const TensorType> inputs) {
  if (!is_primitive(op)) return false;
  bool complex_input = false;
  for (const TensorType& t : inputs) complex_input |= is_complex(t.dtype);
  if (!complex_input) return true;
  return defined_on_complex(op);
}

Expected<std::vector<Tensor>> interpret(const Graph& g, std::span<const Tensor> inputs) {
  return interpret(g, inputs, nullptr);
}

Expected<std::vector<Tensor>> interpret(const Graph& g, std::span<const Tensor> inputs, dist::Communicator* comm) {
  const size_t nv = g.values.size();
  if (inputs.size() != g.inputs.size())
    return error(ErrorCode::invalid_argument, "graph '", g.name, "' takes ", g.inputs.size(), " inputs, got ",
                 inputs.size());
  std::vector<Tensor> vals(nv);
  std::vector<bool> have(nv, false), fresh(nv, false);
  DimBindings bindings;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueId v = g.inputs[i];
    if (v < 0 || static_cast<size_t>(v) >= nv)
      return error(ErrorCode::verify_error, "graph '", g.name, "': input ", i, " is an undefined value %", v);
    const Tensor& t = inputs[i];
    const TensorType& want = g.values[v].type;
    const std::string label = cat("input ", i, " '", g.value_label(v), "'");
    if (t.dtype() != want.dtype)
      return error(ErrorCode::invalid_argument, label, " must be ", want.to_string(), ", got ", describe(t));
    std::string why = bind_dims(want.shape, t.sizes(), bindings);
    if (!why.empty())
      return error(ErrorCode::invalid_argument, label, " must be ", want.to_string(), ", got ", describe(t), " (",
                   why, ")");
    if (!has_bytes(t))
      return error(ErrorCode::invalid_argument, label, " (", describe(t), ") does not hold ", t.nbytes(), " bytes");
    vals[v] = t;
    have[v] = true;
  }

  // Last node that reads each value; graph outputs are kept to the end.
  std::vector<int64_t> last_use(nv, -1);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].inputs)
      if (v >= 0 && static_cast<size_t>(v) < nv) last_use[v] = static_cast<int64_t>(i);
  for (ValueId v : g.outputs)
    if (v >= 0 && static_cast<size_t>(v) < nv) last_use[v] = std::numeric_limits<int64_t>::max();

  std::vector<TensorType> in_types;
  std::vector<const Tensor*> in_ptrs;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    const std::string label = g.node_label(static_cast<int32_t>(ni));
    // linalg ops and collectives have no primitive decomposition: the interpreter runs them
    // whole (the ref device claims them natively)
    if (!is_primitive(n.op) && op_info(n.op).family != OpFamily::linalg &&
        op_info(n.op).family != OpFamily::splat && op_info(n.op).family != OpFamily::sparse &&
        op_info(n.op).family != OpFamily::collective)
      return error(ErrorCode::unsupported, label, " is a composite op; the reference interpreter runs "
                   "primitive ops only (legalize the graph first)");
    for (ValueId v : n.outputs)
      if (v < 0 || static_cast<size_t>(v) >= nv)
        return error(ErrorCode::verify_error, label, ": output %", v, " is not a value of the graph");
    in_types.clear();
    in_ptrs.clear();
    for (ValueId v : n.inputs) {
      if (v < 0 || static_cast<size_t>(v) >= nv || !have[v])
        return error(ErrorCode::verify_error, label, ": input %", v, " is not defined before it is used");
      in_ptrs.push_back(&vals[v]);
      in_types.push_back(vals[v].type());
    }

    if (n.op == Op::Param || n.op == Op::Constant) {
      if (n.outputs.size() != 1) return error(ErrorCode::verify_error, label, ": must have one output");
      const ValueId ov = n.outputs[0];
      const TensorType& want = g.values[ov].type;
      const Tensor* src = nullptr;
      std::string what;
      if (n.op == Op::Param) {
        const std::string name = n.attrs.s("name");
        auto it = g.weights.find(name);
        if (it == g.weights.end())
          return error(ErrorCode::invalid_argument, label, ": weight '", name, "' is missing from the graph's weights");
        src = &it->second;
        what = cat("weight '", name, "'");
      } else {
        src = n.attrs.tensor("value");
        if (!src) return error(ErrorCode::verify_error, label, ": needs a tensor attribute 'value'");
        what = "constant value";
      }
      if (src->dtype() != want.dtype)
        return error(ErrorCode::dtype_error, label, ": ", what, " is ", describe(*src), " but ",
                     want.to_string(), " is expected");
      std::string why = bind_dims(want.shape, src->sizes(), bindings);
      if (!why.empty())
        return error(ErrorCode::shape_error, label, ": ", what, " is ", describe(*src), " but ", want.to_string(),
                     " is expected (", why, ")");
      if (!has_bytes(*src))
        return error(ErrorCode::invalid_argument, label, ": ", what, " (", describe(*src), ") does not hold ",
                     src->nbytes(), " bytes");
      vals[ov] = *src;
      have[ov] = true;
      fresh[ov] = false;
      continue;
    }

    // Re-derive the output types from the concrete inputs; this checks every shape
    // precondition the kernels rely on.
    NodeSig sig{in_types, n.attrs, n.name};
    auto inferred = infer_types(n.op, sig);
    if (!inferred) {
      // Inference names the node itself when it has a name; otherwise say which node it was.
      Status st = std::move(inferred).take_status();
      return n.name.empty() ? st.with_context(label) : st;
    }
    if (inferred->size() != n.outputs.size())
      return error(ErrorCode::verify_error, label, ": has ", n.outputs.size(), " outputs, its op gives ",
                   inferred->size());
    std::vector<Tensor> outs;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      RLX_TRY(reconcile(g.values[n.outputs[k]].type, (*inferred)[k], bindings, label, k));
    }

    const OpFamily fam = op_info(n.op).family;
    if (fam == OpFamily::source) {
      RLX_ASSIGN_OR_RETURN(Tensor t, run_source(n, label, (*inferred)[0]));
      outs.push_back(std::move(t));
    } else {
      for (const TensorType& t : *inferred) {
        RLX_ASSIGN_OR_RETURN(Tensor o, allocate(t, label));
        outs.push_back(std::move(o));
      }
      KernelArgs args{n, label, in_ptrs, outs};
      Status s;
      switch (fam) {
        case OpFamily::unary:
        case OpFamily::binary:
        case OpFamily::compare:
        case OpFamily::logical:
        case OpFamily::ternary:
        case OpFamily::cast: s = detail::run_elementwise(args); break;
        case OpFamily::reduce:
        case OpFamily::argreduce: s = detail::run_reduce(args); break;
        case OpFamily::movement: s = detail::run_movement(args); break;
        case OpFamily::contraction: s = detail::run_dot(args); break;
        case OpFamily::linalg: s = detail::run_linalg(args); break;
        case OpFamily::splat: s = detail::run_splat(args); break;
        case OpFamily::sparse: s = detail::run_sparse(args); break;
        case OpFamily::collective:
          s = dist::run_collective(comm ? *comm : dist::default_communicator(), n.op, n.attrs, outs[0].dtype(),
                                   in_ptrs[0]->sizes(), in_ptrs[0]->bytes(), outs[0].sizes(), outs[0].bytes(), label);
          break;
        default:
          s = error(ErrorCode::unsupported, label, ": the reference interpreter does not run ", op_name(n.op));
      }
      RLX_TRY(s);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      vals[n.outputs[k]] = std::move(outs[k]);
      have[n.outputs[k]] = true;
      fresh[n.outputs[k]] = true;
    }
    // Release inputs read for the last time (never graph inputs' caller tensors: those are
    // only references dropped here, the caller keeps its own).
    for (ValueId v : n.inputs)
      if (last_use[v] == static_cast<int64_t>(ni)) vals[v] = Tensor();
  }

  std::vector<Tensor> result;
  std::set<const Storage*> seen;
  for (ValueId v : g.outputs) {
    if (v < 0 || static_cast<size_t>(v) >= nv || !have[v])
      return error(ErrorCode::verify_error, "graph '", g.name, "': output %", v, " is never computed");
    const Tensor& t = vals[v];
    const Storage* s = t.storage().get();
    if (!fresh[v] || (s && !seen.insert(s).second)) {
      result.push_back(t.clone());
    } else {
      result.push_back(t);
    }
  }
  return result;
}

}  // namespace rlx::ref
