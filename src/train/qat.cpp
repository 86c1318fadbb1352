// Quantization-aware training: fake_quantize inserted by intercepting the model's forward as it
// is emitted (a Builder between the model and the graph), so the model builders stay unaware of
// quantization and every dense/conv layer they emit is covered.
#include "qat.h"

#include <algorithm>
#include <cmath>

namespace rlx::train {
namespace {

// Passes every op through to `inner`, except that a matmul by a 2-D parameter and a conv2d by a
// parameter read their input through the next site's fake_quantize and their weight through a
// per-output-channel symmetric fake_quantize.
class QatBuilder final : public Builder {
 public:
  QatBuilder(Builder& inner, std::map<ValueId, std::string> layers, const QatSiteFn& site_fn)
      : inner_(inner), layers_(std::move(layers)), site_fn_(site_fn) {}

  Expected<std::vector<ValueId>> emit(Op op, std::vector<ValueId> inputs, Attrs attrs) override {
    const bool dense = op == Op::MatMul && inputs.size() == 2 && layers_.count(inputs[1]) && type(inputs[1]).rank() == 2;
    const bool conv = op == Op::Conv2d && inputs.size() >= 2 && layers_.count(inputs[1]);
    if (dense || conv) {
      OpBuilder o(inner_);
      sites_.push_back(layers_.at(inputs[1]) + ".input");
      inputs[0] = quantize_site(o, inputs[0]);
      // weights: dense [in, out] has its output channels on axis 1, conv2d [out, in, kh, kw] on 0
      const ValueId w = inputs[1];
      const int r = type(w).rank();
      const int64_t axis = dense ? 1 : 0;
      std::vector<int64_t> others;
      for (int a = 0; a < r; ++a)
        if (a != axis) others.push_back(a);
      const ValueId amax = o.reduce_max(o.abs(w), others, false);
      const DType dt = type(w).dtype;
      // an all-zero channel gets scale 1 (quantize_program's choice): its weights stay 0
      const ValueId ws = o.where(o.op(Op::Greater, {amax, o.scalar(0.0, dt)}), o.div(amax, o.scalar(127.0, dt)),
                                 o.scalar(1.0, dt));
      const Sizes channels{type(w).shape[static_cast<size_t>(axis)].size()};
      inputs[1] = o.op(Op::FakeQuantize, {w, ws, o.full(0.0, dt, channels)},
                       Attrs{{"axis", axis}, {"qmin", int64_t{-127}}, {"qmax", int64_t{127}}});
      RLX_TRY(o.status().with_context(cat("quantization-aware ", op_name(op), " of ", layers_.at(w))));
    }
    return inner_.emit(op, std::move(inputs), std::move(attrs));
  }
  const TensorType& type(ValueId v) const override { return inner_.type(v); }
  Expected<ValueId> param(const std::string& weight_name, TensorType t) override { return inner_.param(weight_name, std::move(t)); }

  // The fake_quantize of the next site (sites_.back() names it).
  ValueId quantize_site(OpBuilder& o, ValueId x) {
    auto [s, zp] = site_fn_(o, static_cast<int>(sites_.size()) - 1, x);
    return o.op(Op::FakeQuantize, {x, s, zp});
  }
  std::vector<std::string>& sites() { return sites_; }

 private:
  Builder& inner_;
  std::map<ValueId, std::string> layers_;  // weight parameter -> layer name
  const QatSiteFn& site_fn_;
  std::vector<std::string> sites_;
};

ValueId emit_qat(OpBuilder& o, const ModelDef& model, ValueId images, std::span<const ValueId> params,
                 const QatSiteFn& site_fn, std::vector<std::string>* sites) {
  std::map<ValueId, std::string> layers;
  for (size_t i = 0; i < params.size() && i < model.params.size(); ++i) {
    const std::string& n = model.params[i].name;
    const std::string suffix = ".weight";
    if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      layers[params[i]] = n.substr(0, n.size() - suffix.size());
  }
  QatBuilder qb(o.builder(), std::move(layers), site_fn);
  OpBuilder q(qb);
  ValueId logits = model.forward(q, images, params, nullptr);
  if (!q.ok()) return o.fail(q.status());
  qb.sites().push_back("output");
  OpBuilder outer(o.builder());
  logits = qb.quantize_site(outer, logits);
  if (!outer.ok()) return o.fail(outer.status());
  if (sites) *sites = qb.sites();
  return logits;
}

}  // namespace

ActQuantParams act_quant_params(double lo, double hi) {
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = hi = 0.0;
  if (hi - lo < 1e-12) hi = lo + 1e-6;  // a constant activation: any small scale will do
  ActQuantParams q;
  q.scale = static_cast<float>((hi - lo) / 255.0);
  const double zp = std::round(-128.0 - lo / static_cast<double>(q.scale));
  q.zero_point = static_cast<int32_t>(std::clamp(zp, -128.0, 127.0));
  return q;
}

ValueId qat_forward(OpBuilder& o, const ModelDef& model, ValueId images, std::span<const ValueId> params,
                    const QatSiteFn& site_fn) {
  return emit_qat(o, model, images, params, site_fn, nullptr);
}

Expected<std::vector<std::string>> qat_sites(const ModelDef& model) {
  Graph g;
  Sizes s{1};
  s.insert(s.end(), model.example_shape.begin(), model.example_shape.end());
  const ValueId images = g.add_input("images", TensorType{DType::f32, to_shape(s)});
  std::vector<ValueId> params;
  for (const ParamSpec& p : model.params) params.push_back(g.add_input(p.name, p.init.type()));
  GraphBuilder gb(g);
  OpBuilder o(gb);
  std::vector<std::string> sites;
  QatSiteFn fn = [](OpBuilder& b, int, ValueId) {
    return std::pair{b.scalar(1.0, DType::f32), b.scalar(0.0, DType::f32)};
  };
  emit_qat(o, model, images, params, fn, &sites);
  RLX_TRY(o.status().with_context(cat("finding the quantization sites of ", model.name)));
  return sites;
}

std::pair<ValueId, ValueId> qat_track_range(OpBuilder& o, ValueId x, ValueId lo, ValueId hi, ValueId step,
                                            double momentum, ValueId* new_lo, ValueId* new_hi, int dp_group) {
  std::vector<int64_t> all;
  for (int a = 0; a < o.rank(x); ++a) all.push_back(a);
  const DType f = DType::f32;
  ValueId blo = o.reduce(Op::ReduceMin, x, all, false), bhi = o.reduce_max(x, all, false);
  if (o.ok() && o.dtype(x) != f) {
    blo = o.cast(blo, f);
    bhi = o.cast(bhi, f);
  }
  if (dp_group >= 0) {  // the global batch's range: the min of the ranks' minima, the max of their maxima
    Attrs mn{{"reduce", std::string("min")}}, mx{{"reduce", std::string("max")}};
    if (dp_group != 0) {
      mn.set("group", static_cast<int64_t>(dp_group));
      mx.set("group", static_cast<int64_t>(dp_group));
    }
    blo = o.op(Op::AllReduce, {blo}, mn);
    bhi = o.op(Op::AllReduce, {bhi}, mx);
  }
  const ValueId first = o.op(Op::Less, {step, o.scalar(1.5, f)});  // step numbers start at 1
  const ValueId m = o.scalar(momentum, f);
  *new_lo = o.where(first, blo, o.add(lo, o.mul(m, o.sub(blo, lo))));
  *new_hi = o.where(first, bhi, o.add(hi, o.mul(m, o.sub(bhi, hi))));
  // act_quant_params in f32 (the host recomputes it in double for evaluation and export)
  const ValueId l = o.min(*new_lo, o.scalar(0.0, f)), h = o.max(*new_hi, o.scalar(0.0, f));
  const ValueId scale = o.max(o.div(o.sub(h, l), o.scalar(255.0, f)), o.scalar(1e-12, f));
  ValueId zp = o.op(Op::Round, {o.sub(o.scalar(-128.0, f), o.div(l, scale))});
  zp = o.min(o.max(zp, o.scalar(-128.0, f)), o.scalar(127.0, f));
  if (o.ok() && o.dtype(x) != f) return {o.cast(scale, o.dtype(x)), o.cast(zp, o.dtype(x))};
  return {scale, zp};
}

std::string qat_tensor_name(const std::string& site, const char* what) { return cat("qat.", site, ".", what); }

Expected<std::map<std::string, ActQuantParams>> qat_params_from_checkpoint(const std::map<std::string, Tensor>& tensors) {
  std::map<std::string, ActQuantParams> r;
  auto scalar = [](const std::string& name, const Tensor& t) -> Expected<double> {
    if (t.dtype() != DType::f32 || t.numel() != 1)
      return error(ErrorCode::invalid_argument, "QAT tensor '", name, "' must be one f32 value, got ", t.type().to_string());
    const double v = t.data<float>()[0];
    if (!std::isfinite(v)) return error(ErrorCode::invalid_argument, "QAT tensor '", name, "' is not finite");
    return v;
  };
  const std::string pre = "qat.", s_suf = ".scale", z_suf = ".zero_point";
  for (const auto& [name, t] : tensors) {
    if (name.rfind(pre, 0) != 0 || name.size() <= pre.size() + s_suf.size() ||
        name.compare(name.size() - s_suf.size(), s_suf.size(), s_suf) != 0)
      continue;
    const std::string site = name.substr(pre.size(), name.size() - pre.size() - s_suf.size());
    RLX_ASSIGN_OR_RETURN(double s, scalar(name, t));
    if (!(s > 0)) return error(ErrorCode::invalid_argument, "QAT tensor '", name, "' must be positive, got ", s);
    auto zi = tensors.find(qat_tensor_name(site, "zero_point"));
    if (zi == tensors.end())
      return error(ErrorCode::invalid_argument, "the checkpoint has '", name, "' but no '", qat_tensor_name(site, "zero_point"), "'");
    RLX_ASSIGN_OR_RETURN(double z, scalar(zi->first, zi->second));
    if (z != std::round(z) || z < -128 || z > 127)
      return error(ErrorCode::invalid_argument, "QAT tensor '", zi->first, "' must be an integer in [-128, 127], got ", z);
    r[site] = ActQuantParams{static_cast<float>(s), static_cast<int32_t>(z)};
  }
  for (const auto& [name, t] : tensors)
    if (name.rfind(pre, 0) == 0 && name.size() > z_suf.size() &&
        name.compare(name.size() - z_suf.size(), z_suf.size(), z_suf) == 0) {
      const std::string site = name.substr(pre.size(), name.size() - pre.size() - z_suf.size());
      if (!r.count(site))
        return error(ErrorCode::invalid_argument, "the checkpoint has '", name, "' but no '", qat_tensor_name(site, "scale"), "'");
    }
  return r;
}

}  // namespace rlx::train
