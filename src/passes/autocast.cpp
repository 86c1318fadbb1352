// The autocast pass (policy and forms: autocast.h).
#include "autocast.h"

#include <cstdlib>
#include <optional>
#include <span>

#include "rewrite_util.h"
#include "weight_of.h"

namespace rlx::passes {

Expected<Precision> parse_precision(std::string_view name) {
  if (name == "f32" || name == "fp32") return Precision::f32;
  if (name == "f16" || name == "fp16") return Precision::f16;
  if (name == "bf16") return Precision::bf16;
  return error(ErrorCode::invalid_argument, "unknown precision '", name, "' (expected f32, f16 or bf16)");
}

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::f16: return "f16";
    case Precision::bf16: return "bf16";
    default: return "f32";
  }
}

DType precision_dtype(Precision p) {
  switch (p) {
    case Precision::f16: return DType::f16;
    case Precision::bf16: return DType::bf16;
    default: return DType::f32;
  }
}

AutocastOptions::Compute inference_compute(const DeviceInfo& device, DType narrow) {
  // RLX_AUTOCAST_FORM=widened|narrow overrides the choice (benchmarks compare both forms)
  if (const char* form = std::getenv("RLX_AUTOCAST_FORM")) {
    if (std::string_view(form) == "narrow") return AutocastOptions::Compute::narrow;
    if (std::string_view(form) == "widened") return AutocastOptions::Compute::widened;
  }
  for (DType d : device.fast_narrow_products)
    if (d == narrow) return AutocastOptions::Compute::narrow;
  return AutocastOptions::Compute::widened;
}

float round_through(float x, DType narrow) {
  return narrow == DType::f16 ? f16_to_f32(f32_to_f16(x)) : bf16_to_f32(f32_to_bf16(x));
}

bool narrow_conv2d(const DeviceInfo& device, DType narrow) {
  if (const char* form = std::getenv("RLX_AUTOCAST_FORM"); form && std::string_view(form) == "narrow") return true;
  for (DType d : device.fast_narrow_convolutions)
    if (d == narrow) return true;
  return false;
}

bool autocast_narrow_op(Op op) {
  return op == Op::MatMul || op == Op::Gemm || op == Op::Dot || op == Op::Conv2d || op == Op::Attention;
}

namespace {

// Which inputs of a policy op are operands of the products (rounded to the narrow type); the
// others (gemm's C, conv2d's bias, attention's mask) are used in f32 in the widened form.
bool is_product_operand(Op op, int i) { return i < (op == Op::Attention ? 3 : 2); }

Expected<ValueId> emit1(Builder& b, Op op, std::vector<ValueId> in, Attrs attrs) {
  RLX_ASSIGN_OR_RETURN(std::vector<ValueId> out, b.emit(op, std::move(in), std::move(attrs)));
  if (out.size() != 1) return error(ErrorCode::internal, op_name(op), " gave ", out.size(), " outputs, expected 1");
  return out[0];
}

Expected<ValueId> cast_to(Builder& b, ValueId v, DType to) { return emit1(b, Op::Cast, {v}, Attrs{{"to", to}}); }

// v rounded to `narrow` and widened back to f32.
Expected<ValueId> round_trip(Builder& b, ValueId v, DType narrow) {
  RLX_ASSIGN_OR_RETURN(ValueId n, cast_to(b, v, narrow));
  return cast_to(b, n, DType::f32);
}

// The dot attributes computing matmul(a, b) for these operand types, or nullopt when the
// matmul broadcasts or has a 1-D operand. [..., M, K] x [K, N] contracts a's last axis with b's
// first (a's leading axes are more rows); [B..., M, K] x [B..., K, N] with equal batch axes
// batches them. Both give dot's result order (batch, a's free, b's free) = matmul's.
std::optional<Attrs> matmul_as_dot(const TensorType& a, const TensorType& b) {
  const int64_t ra = a.rank(), rb = b.rank();
  if (ra < 2 || rb < 2) return std::nullopt;
  if (rb == 2)
    return Attrs{{"lhs_batch", std::vector<int64_t>{}}, {"rhs_batch", std::vector<int64_t>{}},
                 {"lhs_contract", std::vector<int64_t>{ra - 1}}, {"rhs_contract", std::vector<int64_t>{0}}};
  if (ra != rb) return std::nullopt;
  std::vector<int64_t> batch;
  for (int64_t i = 0; i + 2 < ra; ++i) {
    if (a.shape[static_cast<size_t>(i)] != b.shape[static_cast<size_t>(i)]) return std::nullopt;
    batch.push_back(i);
  }
  return Attrs{{"lhs_batch", batch}, {"rhs_batch", batch}, {"lhs_contract", std::vector<int64_t>{ra - 1}},
               {"rhs_contract", std::vector<int64_t>{ra - 2}}};
}

// The op and attributes that run `op` in the narrow form with an f32 result (out_type, set by
// the caller): a dot itself, a matmul that is a dot, a convolution unless o.narrow_conv2d is
// off (its im2col matrix in the narrow type, its bias added in f32), or attention (the scores,
// softmax and value product sum in f32 on the narrow q, k and v); nullopt for the other
// products and whenever the options ask for the widened form or a narrow result
// (narrow_output).
std::optional<std::pair<Op, Attrs>> narrow_product(Op op, std::span<const TensorType> in_types, const Attrs& attrs,
                                                   const AutocastOptions& o) {
  if (o.compute != AutocastOptions::Compute::narrow || o.narrow_output) return std::nullopt;
  if (op == Op::Conv2d && !o.narrow_conv2d) return std::nullopt;
  if (op == Op::Dot || op == Op::Attention || op == Op::Conv2d) return std::pair{op, attrs};
  if (op == Op::MatMul)
    if (auto dot = matmul_as_dot(in_types[0], in_types[1])) return std::pair{Op::Dot, *dot};
  return std::nullopt;
}

// Whether a product takes the widened form under `o`: always in the widened form, and in the
// narrow form for the products that have no f32-result form (gemm, a broadcasting matmul)
// unless narrow_output asks for narrow results. The widened form computes the same
// exact products of narrow operands summed in f32 on the f32 kernels; the narrow type would
// round the result (and no device has native narrow kernels for them that beat the f32 ones).
bool widened_form(Op op, std::span<const TensorType> in_types, const Attrs& attrs, const AutocastOptions& o) {
  if (o.compute == AutocastOptions::Compute::widened) return true;
  return !o.narrow_output && !narrow_product(op, in_types, attrs, o);
}

// Emits `op` under the policy through b. Precondition: the policy applies (checked by caller).
// pre_rounded[i] (widened form only), when given, is operand i already rounded to the narrow type
// and stored as f32 (a weight converted once by the graph pass).
Expected<ValueId> emit_narrow(Builder& b, Op op, const std::vector<ValueId>& inputs, const Attrs& attrs,
                              const AutocastOptions& o, const std::vector<ValueId>& pre_rounded = {}) {
  std::vector<TensorType> in_types;
  for (ValueId v : inputs) in_types.push_back(b.type(v));
  const bool widened = widened_form(op, in_types, attrs, o);
  auto product = widened ? std::nullopt : narrow_product(op, in_types, attrs, o);
  std::vector<ValueId> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (widened && !is_product_operand(op, static_cast<int>(i))) {
      in.push_back(inputs[i]);
      continue;
    }
    if (widened && i < pre_rounded.size() && pre_rounded[i] != kNoValue) {
      in.push_back(pre_rounded[i]);
      continue;
    }
    if (widened) {
      RLX_ASSIGN_OR_RETURN(ValueId v, round_trip(b, inputs[i], o.narrow));
      in.push_back(v);
    } else if (!is_product_operand(op, static_cast<int>(i)) && (op == Op::Attention || product)) {
      // attention's bool mask (applies() leaves float masks f32), or a convolution's bias
      // added to its f32 result
      in.push_back(inputs[i]);
    } else {
      RLX_ASSIGN_OR_RETURN(ValueId v, cast_to(b, inputs[i], o.narrow));
      in.push_back(v);
    }
  }
  if (!widened) {
    // the narrow product with an f32 result (out_type): summed in f32 and never rounded to
    // the narrow type, as the widened form's product
    if (product) {
      product->second.set("out_type", DType::f32);
      return emit1(b, product->first, in, product->second);
    }
  }
  RLX_ASSIGN_OR_RETURN(ValueId y, emit1(b, op, in, attrs));
  if (!widened) return cast_to(b, y, DType::f32);
  if (o.narrow_output) return round_trip(b, y, o.narrow);
  return y;
}

// The policy converts a node when it is a product whose operands are all f32 and which has one
// output. Attention's q, k and v are rounded, while the scores, the softmax and the
// probabilities stay f32: in the widened form as an f32 attention on rounded operands, in the
// narrow form as attention on narrow operands with out_type f32, unless it has a float mask
// (which would have to become narrow too) or asks for narrow results: then it stays f32.
// Attention with int8 scores (an int8 model's) stays f32 as well: its q and k are quantized.
bool applies(Op op, std::span<const TensorType> in_types, const Attrs& attrs, size_t outputs, const AutocastOptions& o) {
  if (!autocast_narrow_op(op) || outputs != 1) return false;
  if (op == Op::Attention && attrs.i("int8_scores", 0) != 0) return false;
  if (op == Op::Attention && o.compute != AutocastOptions::Compute::widened &&
      (o.narrow_output || (in_types.size() == 4 && in_types[3].dtype != DType::boolean)))
    return false;
  for (size_t i = 0; i < in_types.size(); ++i)
    if (in_types[i].dtype != DType::f32 && (is_product_operand(op, static_cast<int>(i)) || is_float(in_types[i].dtype)))
      return false;
  return true;
}

// t (f32) with every element rounded to `narrow` and widened back (host-side, once).
Tensor rounded_copy(const Tensor& t, DType narrow) {
  Tensor r = t.clone();
  float* p = r.data<float>();
  const int64_t n = r.numel();
  for (int64_t i = 0; i < n; ++i) p[i] = round_through(p[i], narrow);
  return r;
}

Status check_options(const AutocastOptions& o) {
  if (o.narrow != DType::f16 && o.narrow != DType::bf16)
    return error(ErrorCode::invalid_argument, "autocast narrows to f16 or bf16, not ", dtype_name(o.narrow));
  return Status::ok();
}

}  // namespace

Expected<std::vector<ValueId>> AutocastBuilder::emit(Op op, std::vector<ValueId> inputs, Attrs attrs) {
  std::vector<TensorType> types;
  for (ValueId v : inputs) types.push_back(inner_.type(v));
  if (!applies(op, types, attrs, static_cast<size_t>(op_info(op).num_outputs == 1 ? 1 : 0), options_))
    return inner_.emit(op, std::move(inputs), std::move(attrs));
  RLX_TRY(check_options(options_));
  RLX_ASSIGN_OR_RETURN(ValueId y, emit_narrow(inner_, op, inputs, attrs, options_));
  ++converted_;
  return std::vector<ValueId>{y};
}

Expected<int> autocast(Graph& g, const AutocastOptions& options) {
  RLX_TRY(check_options(options));
  if (g.level != IrLevel::graph) return error(ErrorCode::invalid_argument, "autocast runs on graph-level IR");
  std::vector<ValueId> map;
  Graph out = start_rebuild(g, map);
  GraphBuilder gb(out);
  int converted = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    std::vector<ValueId> ins;
    std::vector<TensorType> in_types;
    for (ValueId v : n.inputs) {
      ins.push_back(map[v]);
      in_types.push_back(g.type(v));
    }
    if (applies(n.op, in_types, n.attrs, n.outputs.size(), options)) {
      // weights with data: rounded once here, as a weight of their own ("<name>#bf16") that the
      // device prepares like any other (the CPU packs it for its GEMM), instead of two casts
      std::vector<ValueId> pre(ins.size(), kNoValue);
      const bool widened = widened_form(n.op, in_types, n.attrs, options);
      for (size_t k = 0; k < ins.size() && widened; ++k) {
        const Tensor* w = is_product_operand(n.op, static_cast<int>(k)) ? weight_of(g, n.inputs[k]) : nullptr;
        if (!w || w->dtype() != DType::f32 || !w->storage()) continue;
        const std::string name = g.nodes[static_cast<size_t>(g.values[n.inputs[k]].producer)].attrs.s("name");
        const std::string rounded = cat(name, "#", dtype_name(options.narrow));
        if (!out.weights.count(rounded)) out.weights[rounded] = rounded_copy(*w, options.narrow);
        auto p = gb.param(rounded, in_types[k]);
        if (!p) return p.status();
        pre[k] = *p;
      }
      const size_t first_new = out.nodes.size();
      auto y = emit_narrow(gb, n.op, ins, n.attrs, options, pre);
      if (!y) return y.status().with_context(cat("autocast of ", g.node_label(static_cast<int32_t>(i))));
      // the product node keeps the source node's name (the last product emitted for it; a
      // matmul may have become a dot)
      for (size_t k = out.nodes.size(); k-- > first_new;)
        if (autocast_narrow_op(out.nodes[k].op)) {
          out.nodes[k].name = n.name;
          out.nodes[k].origin = n.origin;
          break;
        }
      if (out.type(*y) != g.type(n.outputs[0]))
        return error(ErrorCode::internal, "autocast of ", g.node_label(static_cast<int32_t>(i)), " changed its type from ",
                     g.type(n.outputs[0]).to_string(), " to ", out.type(*y).to_string());
      map[n.outputs[0]] = *y;
      out.values[*y].name = g.values[n.outputs[0]].name;
      ++converted;
      continue;
    }
    copy_node(g, n, ins, out, map);
  }
  for (ValueId v : g.outputs) out.outputs.push_back(map[v]);
  g = std::move(out);
  return converted;
}

}  // namespace rlx::passes
