#include <algorithm>
#include "rlx/op_builder.h"

namespace rlx {

ValueId OpBuilder::fail(Status s) {
  if (status_.is_ok()) status_ = std::move(s);
  return kNoValue;
}

std::vector<ValueId> OpBuilder::op_multi(Op o, std::vector<ValueId> inputs, Attrs attrs) {
  if (!ok()) return {};
  for (ValueId v : inputs)
    if (v == kNoValue) {
      fail(error(ErrorCode::internal, op_name(o), " got an undefined input"));
      return {};
    }
  auto r = b_.emit(o, std::move(inputs), std::move(attrs));
  if (!r) {
    fail(std::move(r).take_status());
    return {};
  }
  return std::move(r).value();
}

ValueId OpBuilder::op(Op o, std::vector<ValueId> inputs, Attrs attrs) {
  auto outs = op_multi(o, std::move(inputs), std::move(attrs));
  if (outs.empty()) return kNoValue;
  return outs[0];
}

ValueId OpBuilder::constant(Tensor t) { return op(Op::Constant, {}, Attrs{{"value", std::move(t)}}); }

ValueId OpBuilder::scalar(double v, DType dt) {
  double vals[1] = {v};
  return constant(Tensor::from_f64(dt, {}, vals));
}

ValueId OpBuilder::scalar_like(double v, ValueId like) {
  if (!ok() || like == kNoValue) return kNoValue;
  return scalar(v, dtype(like));
}

ValueId OpBuilder::full(double v, DType dt, const Sizes& s) { return broadcast_to(scalar(v, dt), s); }

ValueId OpBuilder::param(const std::string& name, TensorType t) {
  if (!ok()) return kNoValue;
  auto r = b_.param(name, std::move(t));
  if (!r) return fail(std::move(r).take_status());
  return *r;
}

ValueId OpBuilder::iota(DType dt, const Sizes& shape, int64_t axis) {
  return op(Op::Iota, {}, Attrs{{"dtype", dt}, {"shape", std::vector<int64_t>(shape)}, {"axis", axis}});
}

ValueId OpBuilder::gelu(ValueId x, const std::string& approximate) {
  return op(Op::Gelu, {x}, Attrs{{"approximate", approximate}});
}

ValueId OpBuilder::cast(ValueId x, DType to) {
  if (!ok() || x == kNoValue) return kNoValue;
  if (dtype(x) == to) return x;
  return op(Op::Cast, {x}, Attrs{{"to", to}});
}

ValueId OpBuilder::reduce(Op o, ValueId x, std::vector<int64_t> axes, bool keepdims) {
  return op(o, {x}, Attrs{{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}});
}

ValueId OpBuilder::argmax(ValueId x, int64_t axis, bool keepdims) {
  return op(Op::ArgMax, {x}, Attrs{{"axis", axis}, {"keepdims", int64_t{keepdims}}});
}

ValueId OpBuilder::reshape(ValueId x, std::vector<int64_t> shape) {
  return op(Op::Reshape, {x}, Attrs{{"shape", std::move(shape)}});
}

ValueId OpBuilder::reshape_to(ValueId x, const Sizes& sizes) {
  Attrs a{{"shape", std::vector<int64_t>(sizes.begin(), sizes.end())}};
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) a.set("allowzero", int64_t{1});
  return op(Op::Reshape, {x}, std::move(a));
}

ValueId OpBuilder::transpose(ValueId x, std::vector<int64_t> perm) {
  return op(Op::Transpose, {x}, Attrs{{"perm", std::move(perm)}});
}

ValueId OpBuilder::expand(ValueId x, std::vector<int64_t> shape) {
  return op(Op::Expand, {x}, Attrs{{"shape", std::move(shape)}});
}

ValueId OpBuilder::strided_slice(ValueId x, std::vector<int64_t> starts, std::vector<int64_t> steps,
                                 std::vector<int64_t> sizes) {
  return op(Op::StridedSlice, {x},
            Attrs{{"starts", std::move(starts)}, {"steps", std::move(steps)}, {"sizes", std::move(sizes)}});
}

ValueId OpBuilder::slice(ValueId x, std::vector<int64_t> starts, std::vector<int64_t> ends,
                         std::vector<int64_t> axes, std::vector<int64_t> steps) {
  Attrs a{{"starts", std::move(starts)}, {"ends", std::move(ends)}};
  if (!axes.empty()) a.set("axes", std::move(axes));
  if (!steps.empty()) a.set("steps", std::move(steps));
  return op(Op::Slice, {x}, std::move(a));
}

ValueId OpBuilder::pad(ValueId x, std::vector<int64_t> pads, double value) {
  return op(Op::Pad, {x}, Attrs{{"pads", std::move(pads)}, {"value", value}});
}

ValueId OpBuilder::concat(std::vector<ValueId> xs, int64_t axis) {
  return op(Op::Concat, std::move(xs), Attrs{{"axis", axis}});
}

ValueId OpBuilder::gather(ValueId data, ValueId indices, int64_t axis) {
  return op(Op::Gather, {data, indices}, Attrs{{"axis", axis}});
}

std::vector<ValueId> OpBuilder::split(ValueId x, int64_t axis, std::vector<int64_t> sizes) {
  return op_multi(Op::Split, {x}, Attrs{{"axis", axis}, {"sizes", std::move(sizes)}});
}

ValueId OpBuilder::dot(ValueId a, ValueId b, std::vector<int64_t> lb, std::vector<int64_t> rb,
                       std::vector<int64_t> lc, std::vector<int64_t> rc) {
  return op(Op::Dot, {a, b},
            Attrs{{"lhs_batch", std::move(lb)}, {"rhs_batch", std::move(rb)}, {"lhs_contract", std::move(lc)},
                  {"rhs_contract", std::move(rc)}});
}

ValueId OpBuilder::softmax(ValueId x, int64_t axis) { return op(Op::Softmax, {x}, Attrs{{"axis", axis}}); }
ValueId OpBuilder::log_softmax(ValueId x, int64_t axis) { return op(Op::LogSoftmax, {x}, Attrs{{"axis", axis}}); }

ValueId OpBuilder::layer_norm(ValueId x, ValueId scale, ValueId bias, int64_t axis, double eps) {
  std::vector<ValueId> in{x};
  if (scale != kNoValue) in.push_back(scale);
  if (bias != kNoValue) in.push_back(bias);
  return op(Op::LayerNorm, std::move(in), Attrs{{"axis", axis}, {"epsilon", eps}});
}

ValueId OpBuilder::rms_norm(ValueId x, ValueId scale, int64_t axis, double eps) {
  std::vector<ValueId> in{x};
  if (scale != kNoValue) in.push_back(scale);
  return op(Op::RmsNorm, std::move(in), Attrs{{"axis", axis}, {"epsilon", eps}});
}

ValueId OpBuilder::attention(ValueId q, ValueId k, ValueId v, ValueId mask, bool causal, double scale) {
  std::vector<ValueId> in{q, k, v};
  if (mask != kNoValue) in.push_back(mask);
  Attrs a{{"causal", int64_t{causal}}};
  if (scale != 0.0) a.set("scale", scale);
  return op(Op::Attention, std::move(in), std::move(a));
}

ValueId OpBuilder::rope(ValueId x, ValueId positions, double theta) {
  return op(Op::Rope, {x, positions}, Attrs{{"theta", theta}});
}

ValueId OpBuilder::broadcast_to(ValueId x, const Sizes& target) {
  if (!ok() || x == kNoValue) return kNoValue;
  const Shape& s = shape(x);
  if (s == to_shape(target)) return x;
  if (s.size() > target.size())
    return fail(error(ErrorCode::shape_error, "cannot broadcast ", shape_to_string(s), " to ",
                      sizes_to_string(target)));
  ValueId v = x;
  if (s.size() < target.size()) {
    std::vector<int64_t> r(target.size() - s.size(), 1);
    for (const Dim& d : s) {
      if (!d.is_static()) return fail(error(ErrorCode::shape_error, "broadcast needs static shapes"));
      r.push_back(d.size());
    }
    // allowzero: a zero-size dim stays 0 (without it, 0 copies the input's dim)
    v = op(Op::Reshape, {v}, Attrs{{"shape", r}, {"allowzero", int64_t{1}}});
  }
  return expand(v, std::vector<int64_t>(target));
}

}  // namespace rlx
