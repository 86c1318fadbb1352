// The ai.onnx.preview.training domain's optimizer steps (version 1): Adagrad, Momentum (standard
// and Nesterov) and Adam, each over n tensors at once, as elementwise graph ops. R is the
// learning rate and T the step count (both scalars); the per-step scalar factors are computed
// in f64 (as ONNX's reference computes them from Python floats) and cast to the tensors' dtype.
#include "onnx_internal.h"

namespace rlx::onnx_import {
namespace {

// The inputs after R and T form `groups` lists of n tensors each (X..., G..., then the states).
Expected<int> tensors_per_group(Importer& m, int groups) {
  const int rest = m.num_inputs() - 2;
  if (rest <= 0 || rest % groups != 0)
    return m.fail(ErrorCode::format_error, "needs R, T and ", groups, " lists of equally many tensors, got ",
                  m.num_inputs(), " inputs");
  const int n = rest / groups;
  if (m.num_outputs() > n * (groups - 1))
    return m.fail(ErrorCode::format_error, m.num_outputs(), " outputs for ", n, " tensors");
  return n;
}

// A run-time scalar input as f64 of rank 0.
Expected<ValueId> scalar_f64(Importer& m, int i) {
  RLX_ASSIGN_OR_RETURN(ValueId v, m.in(i));
  OpBuilder& o = m.o();
  if (o.type(v).shape.size() > 1 || (o.rank(v) == 1 && o.shape(v)[0] != Dim(1)))
    return m.fail(ErrorCode::shape_error, "input ", i, " must be a scalar, got ", o.type(v).to_string());
  return o.reshape(o.cast(v, DType::f64), {});
}

// norm_coefficient * x + g: the gradient with the L2 regularization's term.
ValueId regularized(OpBuilder& o, ValueId x, ValueId g, double norm) {
  return norm == 0 ? g : o.add(o.mul(o.scalar_like(norm, x), x), g);
}

Status map_adagrad(Importer& m) {
  RLX_TRY(m.only_attrs({"decay_factor", "epsilon", "norm_coefficient"}));
  const double decay = m.af("decay_factor", 0), eps = m.af("epsilon", 0), norm = m.af("norm_coefficient", 0);
  RLX_ASSIGN_OR_RETURN(int n, tensors_per_group(m, 3));
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(ValueId r, scalar_f64(m, 0));
  RLX_ASSIGN_OR_RETURN(ValueId t, scalar_f64(m, 1));
  // r / (1 + t * decay_factor)
  ValueId rate = o.div(r, o.add(o.scalar(1, DType::f64), o.mul(t, o.scalar(decay, DType::f64))));
  for (int i = 0; i < n; ++i) {
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(2 + i));
    RLX_ASSIGN_OR_RETURN(ValueId g, m.in(2 + n + i));
    RLX_ASSIGN_OR_RETURN(ValueId h, m.in(2 + 2 * n + i));
    ValueId gr = regularized(o, x, g, norm);
    ValueId h_new = o.add(h, o.mul(gr, gr));
    ValueId denom = o.add(o.sqrt(h_new), o.scalar_like(eps, x));
    ValueId x_new = o.sub(x, o.div(o.mul(o.cast(rate, o.dtype(x)), gr), denom));
    RLX_TRY(m.out(i, x_new));
    if (m.wants(n + i)) RLX_TRY(m.out(n + i, h_new));
  }
  return Status::ok();
}

Status map_momentum(Importer& m) {
  RLX_TRY(m.only_attrs({"alpha", "beta", "mode", "norm_coefficient"}));
  for (const char* a : {"alpha", "beta", "mode", "norm_coefficient"})
    if (!m.has_attr(a)) return m.fail(ErrorCode::format_error, "attribute '", a, "' is required");
  const double alpha = m.af("alpha", 0), beta = m.af("beta", 0), norm = m.af("norm_coefficient", 0);
  const std::string mode = m.as("mode", "standard");
  if (mode != "standard" && mode != "nesterov")
    return m.fail(ErrorCode::invalid_argument, "mode '", mode, "' (standard or nesterov)");
  RLX_ASSIGN_OR_RETURN(int n, tensors_per_group(m, 3));
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(ValueId r, scalar_f64(m, 0));
  RLX_ASSIGN_OR_RETURN(ValueId t, scalar_f64(m, 1));
  // the first step (T = 0) takes the whole gradient
  ValueId beta_t = o.where(o.binary(Op::Greater, t, o.scalar(0, DType::f64)), o.scalar(beta, DType::f64),
                           o.scalar(1, DType::f64));
  for (int i = 0; i < n; ++i) {
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(2 + i));
    RLX_ASSIGN_OR_RETURN(ValueId g, m.in(2 + n + i));
    RLX_ASSIGN_OR_RETURN(ValueId v, m.in(2 + 2 * n + i));
    const DType dt = o.dtype(x);
    ValueId gr = regularized(o, x, g, norm);
    ValueId v_new = o.add(o.mul(o.scalar_like(alpha, v), v), o.mul(o.cast(beta_t, dt), gr));
    ValueId step = mode == "standard" ? v_new : o.add(gr, o.mul(o.scalar_like(alpha, v), v_new));
    RLX_TRY(m.out(i, o.sub(x, o.mul(o.cast(r, dt), step))));
    if (m.wants(n + i)) RLX_TRY(m.out(n + i, v_new));
  }
  return Status::ok();
}

Status map_adam(Importer& m) {
  RLX_TRY(m.only_attrs({"alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post"}));
  const double alpha = m.af("alpha", 0.9), beta = m.af("beta", 0.999), eps = m.af("epsilon", 1e-6);
  const double norm = m.af("norm_coefficient", 0), post = m.af("norm_coefficient_post", 0);
  RLX_ASSIGN_OR_RETURN(int n, tensors_per_group(m, 4));
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(ValueId r, scalar_f64(m, 0));
  RLX_ASSIGN_OR_RETURN(ValueId t, scalar_f64(m, 1));
  // bias correction after the first step: r * sqrt(1 - beta^t) / (1 - alpha^t)
  ValueId one = o.scalar(1, DType::f64);
  ValueId corrected = o.div(o.mul(r, o.sqrt(o.sub(one, o.pow(o.scalar(beta, DType::f64), t)))),
                            o.sub(one, o.pow(o.scalar(alpha, DType::f64), t)));
  ValueId rate = o.where(o.binary(Op::Greater, t, o.scalar(0, DType::f64)), corrected, r);
  for (int i = 0; i < n; ++i) {
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(2 + i));
    RLX_ASSIGN_OR_RETURN(ValueId g, m.in(2 + n + i));
    RLX_ASSIGN_OR_RETURN(ValueId v, m.in(2 + 2 * n + i));
    RLX_ASSIGN_OR_RETURN(ValueId h, m.in(2 + 3 * n + i));
    ValueId gr = regularized(o, x, g, norm);
    ValueId v_new = o.add(o.mul(o.scalar_like(alpha, v), v), o.mul(o.scalar_like(1 - alpha, gr), gr));
    ValueId h_new = o.add(o.mul(o.scalar_like(beta, h), h), o.mul(o.scalar_like(1 - beta, gr), o.mul(gr, gr)));
    ValueId denom = o.add(o.sqrt(h_new), o.scalar_like(eps, h_new));
    ValueId x_new = o.sub(x, o.mul(o.cast(rate, o.dtype(x)), o.div(v_new, denom)));
    if (post != 0) x_new = o.mul(o.scalar_like(1 - post, x_new), x_new);
    RLX_TRY(m.out(i, x_new));
    if (m.wants(n + i)) RLX_TRY(m.out(n + i, v_new));
    if (m.wants(2 * n + i)) RLX_TRY(m.out(2 * n + i, h_new));
  }
  return Status::ok();
}

}  // namespace

void register_training_ops(OpTable& t) {
  t["Adagrad"] = {map_adagrad};
  t["Momentum"] = {map_momentum};
  t["Adam"] = {map_adam};
}

}  // namespace rlx::onnx_import
