// rlx/op_builder.h: one function per op over any Builder, with sticky errors, so that model
// builders, rewrites and decompositions read like the math they implement:
//
//   OpBuilder o(builder);
//   ValueId h = o.gelu(o.add(o.matmul(x, w), b));
//   RLX_TRY(o.status());
//
// After the first failure every call returns kNoValue and status() keeps the first error.
#pragma once

#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx {

class OpBuilder {
 public:
  explicit OpBuilder(Builder& b) : b_(b) {}

  const Status& status() const { return status_; }
  bool ok() const { return status_.is_ok(); }
  // Records an error (if none is recorded yet) and returns kNoValue.
  ValueId fail(Status s);
  Builder& builder() { return b_; }
  const TensorType& type(ValueId v) const { return b_.type(v); }
  DType dtype(ValueId v) const { return b_.type(v).dtype; }
  const Shape& shape(ValueId v) const { return b_.type(v).shape; }
  int rank(ValueId v) const { return b_.type(v).rank(); }

  // Any op with one output / several outputs.
  ValueId op(Op op, std::vector<ValueId> inputs, Attrs attrs = {});
  std::vector<ValueId> op_multi(Op op, std::vector<ValueId> inputs, Attrs attrs = {});

  // sources
  ValueId constant(Tensor t);
  ValueId scalar(double v, DType dt);               // rank-0 constant
  ValueId scalar_like(double v, ValueId like);      // rank-0 constant of like's dtype
  ValueId full(double v, DType dt, const Sizes& s); // constant broadcast with expand
  ValueId param(const std::string& name, TensorType t);
  ValueId iota(DType dt, const Sizes& shape, int64_t axis);

  // elementwise
  ValueId unary(Op op, ValueId x) { return this->op(op, {x}); }
  ValueId neg(ValueId x) { return unary(Op::Neg, x); }
  ValueId abs(ValueId x) { return unary(Op::Abs, x); }
  ValueId exp(ValueId x) { return unary(Op::Exp, x); }
  ValueId log(ValueId x) { return unary(Op::Log, x); }
  ValueId sqrt(ValueId x) { return unary(Op::Sqrt, x); }
  ValueId rsqrt(ValueId x) { return unary(Op::Rsqrt, x); }
  ValueId reciprocal(ValueId x) { return unary(Op::Reciprocal, x); }
  ValueId tanh(ValueId x) { return unary(Op::Tanh, x); }
  ValueId sigmoid(ValueId x) { return unary(Op::Sigmoid, x); }
  ValueId erf(ValueId x) { return unary(Op::Erf, x); }
  ValueId relu(ValueId x) { return unary(Op::Relu, x); }
  ValueId silu(ValueId x) { return unary(Op::Silu, x); }
  ValueId gelu(ValueId x, const std::string& approximate = "none");
  // complex values: real/imag/angle of c64 -> f32, conj c64 -> c64, complex(f32 re, f32 im) -> c64
  ValueId real(ValueId x) { return unary(Op::Real, x); }
  ValueId imag(ValueId x) { return unary(Op::Imag, x); }
  ValueId conj(ValueId x) { return unary(Op::Conj, x); }
  ValueId angle(ValueId x) { return unary(Op::Angle, x); }
  ValueId complex(ValueId re, ValueId im) { return this->op(Op::Complex, {re, im}); }
  ValueId binary(Op op, ValueId a, ValueId b) { return this->op(op, {a, b}); }
  ValueId add(ValueId a, ValueId b) { return binary(Op::Add, a, b); }
  ValueId sub(ValueId a, ValueId b) { return binary(Op::Sub, a, b); }
  ValueId mul(ValueId a, ValueId b) { return binary(Op::Mul, a, b); }
  ValueId div(ValueId a, ValueId b) { return binary(Op::Div, a, b); }
  ValueId pow(ValueId a, ValueId b) { return binary(Op::Pow, a, b); }
  ValueId max(ValueId a, ValueId b) { return binary(Op::Max, a, b); }
  ValueId min(ValueId a, ValueId b) { return binary(Op::Min, a, b); }
  ValueId where(ValueId c, ValueId a, ValueId b) { return op(Op::Where, {c, a, b}); }
  ValueId cast(ValueId x, DType to);

  // reductions (axes empty = all)
  ValueId reduce(Op op, ValueId x, std::vector<int64_t> axes, bool keepdims);
  ValueId reduce_sum(ValueId x, std::vector<int64_t> axes, bool keepdims) { return reduce(Op::ReduceSum, x, axes, keepdims); }
  ValueId reduce_max(ValueId x, std::vector<int64_t> axes, bool keepdims) { return reduce(Op::ReduceMax, x, axes, keepdims); }
  ValueId reduce_mean(ValueId x, std::vector<int64_t> axes, bool keepdims) { return reduce(Op::ReduceMean, x, axes, keepdims); }
  ValueId argmax(ValueId x, int64_t axis, bool keepdims);

  // movement
  ValueId reshape(ValueId x, std::vector<int64_t> shape);
  // Reshape to exactly these sizes (a 0 is an empty dim, not ONNX's "copy the input dim").
  ValueId reshape_to(ValueId x, const Sizes& sizes);
  ValueId transpose(ValueId x, std::vector<int64_t> perm);
  ValueId expand(ValueId x, std::vector<int64_t> shape);
  ValueId strided_slice(ValueId x, std::vector<int64_t> starts, std::vector<int64_t> steps,
                        std::vector<int64_t> sizes);
  ValueId slice(ValueId x, std::vector<int64_t> starts, std::vector<int64_t> ends,
                std::vector<int64_t> axes = {}, std::vector<int64_t> steps = {});
  ValueId pad(ValueId x, std::vector<int64_t> pads, double value = 0.0);
  ValueId concat(std::vector<ValueId> xs, int64_t axis);
  ValueId gather(ValueId data, ValueId indices, int64_t axis);
  std::vector<ValueId> split(ValueId x, int64_t axis, std::vector<int64_t> sizes);

  // contraction and composites
  ValueId dot(ValueId a, ValueId b, std::vector<int64_t> lhs_batch, std::vector<int64_t> rhs_batch,
              std::vector<int64_t> lhs_contract, std::vector<int64_t> rhs_contract);
  ValueId matmul(ValueId a, ValueId b) { return binary(Op::MatMul, a, b); }
  ValueId softmax(ValueId x, int64_t axis);
  ValueId log_softmax(ValueId x, int64_t axis);
  ValueId layer_norm(ValueId x, ValueId scale, ValueId bias, int64_t axis, double eps);
  ValueId rms_norm(ValueId x, ValueId scale, int64_t axis, double eps);
  ValueId embedding(ValueId table, ValueId ids) { return binary(Op::Embedding, table, ids); }
  ValueId attention(ValueId q, ValueId k, ValueId v, ValueId mask, bool causal, double scale = 0.0);
  ValueId rope(ValueId x, ValueId positions, double theta);

  // Explicit numpy broadcast of x to a static shape (reshape to the target rank, then expand);
  // a no-op when the shape already matches.
  ValueId broadcast_to(ValueId x, const Sizes& shape);

 private:
  bool bad(std::initializer_list<ValueId> vs) const;
  Builder& b_;
  Status status_;
};

}  // namespace rlx
