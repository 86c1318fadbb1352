// ONNX neural-network ops: MatMul, Gemm, Softmax/LogSoftmax/Hardmax, LayerNormalization,
// BatchNormalization, InstanceNormalization, LRN, MeanVarianceNormalization, Conv (1-D/2-D),
// Max/AveragePool (1-D/2-D), Global pools, Dropout (inference), CumSum.
#include <cmath>

#include "onnx_internal.h"

namespace rlx::onnx_import {
namespace {

ValueId k(OpBuilder& o, double v, ValueId like) { return o.scalar_like(v, like); }

Status map_matmul(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId a, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId b, m.in(1));
  return m.out(0, m.o().matmul(a, b));
}

Status map_gemm(Importer& m) {
  RLX_TRY(m.only_attrs({"alpha", "beta", "transA", "transB", "broadcast"}));
  RLX_ASSIGN_OR_RETURN(ValueId a, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId b, m.in(1));
  std::vector<ValueId> ins{a, b};
  if (m.has(2)) {
    RLX_ASSIGN_OR_RETURN(ValueId c, m.in(2));
    ins.push_back(c);
  }
  return m.out(0, m.o().op(Op::Gemm, ins,
                           Attrs{{"alpha", m.af("alpha", 1.0)}, {"beta", m.af("beta", 1.0)},
                                 {"trans_a", m.ai("transA", 0)}, {"trans_b", m.ai("transB", 0)}}));
}

// Softmax family. Before opset 13 the input is coerced to 2-D at `axis` (default 1).
MapFn softmax_like(int kind) {  // 0 softmax, 1 log-softmax, 2 hardmax
  return [kind](Importer& m) -> Status {
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
    OpBuilder& o = m.o();
    int r = o.rank(x);
    auto apply = [&](ValueId v, int64_t axis) -> ValueId {
      if (kind == 0) return o.softmax(v, axis);
      if (kind == 1) return o.log_softmax(v, axis);
      if (!o.ok()) return kNoValue;
      ValueId am = o.argmax(v, axis, true);
      int vr = o.rank(v);
      int ax = static_cast<int>(axis < 0 ? axis + vr : axis);
      const Dim& d = o.shape(v)[ax];
      if (d.size() > (int64_t{1} << 24)) return o.fail(m.fail(ErrorCode::unsupported, "Hardmax axis too long"));
      std::vector<int64_t> rs(vr, 1);
      rs[ax] = d.size();
      Tensor seq = Tensor::zeros(DType::i64, {d.size()});
      for (int64_t i = 0; i < d.size(); ++i) seq.data<int64_t>()[i] = i;
      ValueId hit = o.binary(Op::Equal, am, o.reshape(m.c(seq), rs));
      return o.cast(hit, o.dtype(v));
    };
    if (m.opset >= 13) {
      int64_t axis = m.ai("axis", -1);
      RLX_ASSIGN_OR_RETURN(int ax, axis_of(m, axis, r));
      if (kind == 2 && !o.shape(x)[ax].is_static()) return m.fail(ErrorCode::unsupported, "Hardmax over a symbolic axis");
      return m.out(0, apply(x, ax));
    }
    int64_t axis = m.ai("axis", 1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis > r) return m.fail(ErrorCode::out_of_range, "axis out of range");
    auto s = static_sizes(o.shape(x));
    if (!s) return m.fail(ErrorCode::unsupported, "opset < 13 softmax needs static dims");
    int64_t lead = 1, trail = 1;
    for (int i = 0; i < r; ++i) (i < axis ? lead : trail) *= (*s)[i];
    ValueId y = apply(o.reshape(x, {lead, trail}), 1);
    return m.out(0, o.reshape(y, std::vector<int64_t>(s->begin(), s->end())));
  };
}

Status map_layer_norm(Importer& m) {
  RLX_TRY(m.only_attrs({"axis", "epsilon", "stash_type"}));
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId scale, m.in(1));
  OpBuilder& o = m.o();
  int r = o.rank(x);
  RLX_ASSIGN_OR_RETURN(int axis, axis_of(m, m.ai("axis", -1), r));
  double eps = m.af("epsilon", 1e-5);
  ValueId bias = kNoValue;
  if (m.has(2)) { RLX_ASSIGN_OR_RETURN(bias, m.in(2)); }
  Shape norm(o.shape(x).begin() + axis, o.shape(x).end());
  bool simple = !m.wants(1) && !m.wants(2) && o.shape(scale) == norm && (bias == kNoValue || o.shape(bias) == norm);
  if (simple) {
    std::vector<ValueId> ins{x, scale};
    if (bias != kNoValue) ins.push_back(bias);
    return m.out(0, o.op(Op::LayerNorm, ins, Attrs{{"axis", int64_t{axis}}, {"epsilon", eps}}));
  }
  std::vector<int64_t> axes;
  for (int i = axis; i < r; ++i) axes.push_back(i);
  ValueId mean = o.reduce_mean(x, axes, true);
  ValueId d = o.sub(x, mean);
  ValueId var = o.reduce_mean(o.mul(d, d), axes, true);
  ValueId inv = o.rsqrt(o.add(var, k(o, eps, x)));
  ValueId y = o.mul(o.mul(d, inv), scale);
  if (bias != kNoValue) y = o.add(y, bias);
  RLX_TRY(m.out(0, y));
  if (m.wants(1)) RLX_TRY(m.out(1, mean));
  if (m.wants(2)) RLX_TRY(m.out(2, inv));
  return Status::ok();
}

// [C] parameters reshaped to broadcast over [N, C, ...].
ValueId per_channel(OpBuilder& o, ValueId p, int rank) {
  if (rank < 2) return o.fail(error(ErrorCode::shape_error, "per-channel parameters need an input of rank >= 2"));
  std::vector<int64_t> s(rank, 1);
  s[1] = -1;
  return o.reshape(p, s);
}

// BatchNormalization. Inference: the running statistics normalize. Training mode (opset 14
// and later): the batch's own mean and (population) variance over every axis but the
// channels do, and outputs 1 and 2 are the running statistics moved toward them by
// 1 - momentum.
Status map_batch_norm(Importer& m) {
  const bool training = m.ai("training_mode", 0) != 0;
  if ((training || m.wants(1) || m.wants(2)) && m.opset < 14)
    return m.fail(ErrorCode::unsupported, "training mode before opset 14 (its statistics outputs differ)");
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId scale, m.in(1));
  RLX_ASSIGN_OR_RETURN(ValueId bias, m.in(2));
  RLX_ASSIGN_OR_RETURN(ValueId mean, m.in(3));
  RLX_ASSIGN_OR_RETURN(ValueId var, m.in(4));
  OpBuilder& o = m.o();
  int r = o.rank(x);
  if (r < 2) return m.fail(ErrorCode::shape_error, "input must have rank >= 2");
  const double momentum = m.af("momentum", 0.9);
  ValueId use_mean = per_channel(o, mean, r), use_var = per_channel(o, var, r);
  if (training) {
    std::vector<int64_t> axes{0};
    for (int i = 2; i < r; ++i) axes.push_back(i);
    ValueId bm = o.reduce_mean(x, axes, true);
    ValueId d = o.sub(x, bm);
    ValueId bv = o.reduce_mean(o.mul(d, d), axes, true);
    use_mean = bm;
    use_var = bv;
    auto running = [&](ValueId run, ValueId batch) {
      ValueId b = o.cast(o.reshape(batch, {-1}), o.dtype(run));
      return o.add(o.mul(run, o.scalar_like(momentum, run)), o.mul(b, o.scalar_like(1 - momentum, run)));
    };
    if (m.wants(1)) RLX_TRY(m.out(1, running(mean, bm)));
    if (m.wants(2)) RLX_TRY(m.out(2, running(var, bv)));
  } else if (m.wants(1) || m.wants(2)) {
    return m.fail(ErrorCode::unsupported, "running statistics outputs outside training mode");
  }
  ValueId inv = o.rsqrt(o.add(use_var, k(o, m.af("epsilon", 1e-5), x)));
  ValueId y = o.mul(o.mul(o.sub(x, use_mean), inv), per_channel(o, scale, r));
  return m.out(0, o.add(y, per_channel(o, bias, r)));
}

// MaxUnpool: x's values placed at their flat indices (over the whole unpooled tensor, as
// MaxPool's Indices give them) in zeros of the unpooled shape, each spatial dim
// (in - 1) * stride - pads + kernel; an output_shape larger than that pads the end of each
// spatial dim with zeros (the indices keep their unpooled layout, as ONNX Runtime does).
Status map_max_unpool(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId idx, m.in(1));
  OpBuilder& o = m.o();
  auto xs = static_sizes(o.shape(x));
  if (!xs || xs->size() < 3) return m.fail(ErrorCode::unsupported, "needs a static input [N, C, ...]");
  const size_t n = xs->size() - 2;
  std::vector<int64_t> kernel = m.aints("kernel_shape"), strides = m.aints("strides", std::vector<int64_t>(n, 1)),
                       pads = m.aints("pads", std::vector<int64_t>(2 * n, 0));
  if (kernel.size() != n || strides.size() != n || pads.size() != 2 * n)
    return m.fail(ErrorCode::format_error, "kernel_shape and strides need ", n, " entries, pads ", 2 * n);
  Sizes out(xs->begin(), xs->begin() + 2);
  for (size_t i = 0; i < n; ++i) {
    for (int64_t v : {kernel[i], strides[i], pads[i], pads[i + n]})
      if (v < 0 || v > (int64_t{1} << 20)) return m.fail(ErrorCode::invalid_argument, "kernel, strides and pads must be in [0, 2^20]");
    out.push_back(((*xs)[2 + i] - 1) * strides[i] - pads[i] - pads[i + n] + kernel[i]);
  }
  for (int64_t d : out)
    if (d < 0) return m.fail(ErrorCode::shape_error, "unpooled dim ", d, " is negative");
  auto total = checked_numel(out);
  if (!total || *total > (int64_t{1} << 40)) return m.fail(ErrorCode::overflow, "output ", sizes_to_string(out), " is too large");
  ValueId zeros = o.full(0, o.dtype(x), {*total});
  ValueId y = o.op(Op::Scatter, {zeros, o.reshape(o.cast(idx, DType::i64), {-1}), o.reshape(x, {-1})},
                   Attrs{{"axis", int64_t{0}}});
  y = o.reshape(y, std::vector<int64_t>(out.begin(), out.end()));
  if (m.has(2)) {
    RLX_ASSIGN_OR_RETURN(auto os, m.ints(2));
    if (os.size() != xs->size()) return m.fail(ErrorCode::shape_error, "output_shape needs ", xs->size(), " entries");
    std::vector<int64_t> pad_ends(2 * xs->size(), 0);
    for (size_t i = 0; i < os.size(); ++i) {
      if (os[i] < out[i] || (i < 2 && os[i] != out[i]))
        return m.fail(ErrorCode::shape_error, "output_shape ", sizes_to_string(Sizes(os.begin(), os.end())),
                      " is smaller than the unpooled ", sizes_to_string(out), " or changes N or C");
      pad_ends[i + xs->size()] = os[i] - out[i];
    }
    y = o.pad(y, pad_ends, 0.0);
  }
  return m.out(0, y);
}

Status map_instance_norm(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId scale, m.in(1));
  RLX_ASSIGN_OR_RETURN(ValueId bias, m.in(2));
  OpBuilder& o = m.o();
  int r = o.rank(x);
  std::vector<int64_t> axes;
  for (int i = 2; i < r; ++i) axes.push_back(i);
  ValueId mean = o.reduce_mean(x, axes, true);
  ValueId d = o.sub(x, mean);
  ValueId var = o.reduce_mean(o.mul(d, d), axes, true);
  ValueId y = o.mul(d, o.rsqrt(o.add(var, k(o, m.af("epsilon", 1e-5), x))));
  return m.out(0, o.add(o.mul(y, per_channel(o, scale, r)), per_channel(o, bias, r)));
}

// Computes f(x) in f32 when stash_type asks for it (1, the default) and x is narrower, as
// LayerNormalization, GroupNormalization and RMSNormalization specify; the result has x's type.
template <class F>
ValueId stashed(Importer& m, ValueId x, F f) {
  OpBuilder& o = m.o();
  const DType dt = o.dtype(x);
  if (m.ai("stash_type", 1) != 1 || dt == DType::f32 || dt == DType::f64) return f(x);
  return o.cast(f(o.cast(x, DType::f32)), dt);
}

// GroupNormalization: x [N, C, ...] normalized over each of num_groups groups of C / num_groups
// channels (with the spatial dims). Opset 18's scale and bias have one entry per group (a
// definition ONNX later called wrong); opset 21's one per channel.
Status map_group_norm(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId scale, m.in(1));
  RLX_ASSIGN_OR_RETURN(ValueId bias, m.in(2));
  OpBuilder& o = m.o();
  const int r = o.rank(x);
  const int64_t groups = m.ai("num_groups", 0);
  const double eps = m.af("epsilon", 1e-5);
  if (r < 2 || !o.shape(x)[1].is_static()) return m.fail(ErrorCode::unsupported, "needs x [N, C, ...] with a static C");
  const int64_t C = o.shape(x)[1].size();
  if (groups <= 0 || C % groups != 0)
    return m.fail(ErrorCode::invalid_argument, "num_groups ", groups, " must divide the ", C, " channels");
  const int64_t per_param = m.opset >= 21 ? C : groups;
  for (ValueId p : {scale, bias})
    if (o.rank(p) != 1 || o.shape(p)[0] != Dim(per_param))
      return m.fail(ErrorCode::shape_error, "scale and bias must be [", per_param, "] at opset ", m.opset, ", got ",
                    shape_to_string(o.shape(p)));
  std::vector<int64_t> back = static_dims(o.type(x));
  back[0] = 0;  // the batch may be symbolic; the other dims must be static
  for (int i = 1; i < r; ++i)
    if (back[i] < 0) return m.fail(ErrorCode::unsupported, "needs static channel and spatial dims");
  ValueId y = stashed(m, x, [&](ValueId xs) {
    std::vector<int64_t> grouped{0, groups, -1};
    ValueId g = o.reshape(xs, grouped);
    ValueId mean = o.reduce_mean(g, {2}, true);
    ValueId d = o.sub(g, mean);
    ValueId var = o.reduce_mean(o.mul(d, d), {2}, true);
    return o.reshape(o.mul(d, o.rsqrt(o.add(var, k(o, eps, d)))), back);
  });
  auto per_channel_of = [&](ValueId p) {
    if (per_param == C) return per_channel(o, p, r);
    // a group's entry repeated over its channels
    ValueId rep = o.expand(o.reshape(p, {groups, 1}), {groups, C / groups});
    return per_channel(o, o.reshape(rep, {C}), r);
  };
  return m.out(0, o.add(o.mul(y, per_channel_of(scale)), per_channel_of(bias)));
}

// RMSNormalization (opset 23): x / sqrt(mean(x^2 over axis..last) + epsilon) * scale.
Status map_rms_norm(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId scale, m.in(1));
  OpBuilder& o = m.o();
  const int r = o.rank(x);
  RLX_ASSIGN_OR_RETURN(int axis, axis_of(m, m.ai("axis", -1), r));
  const double eps = m.af("epsilon", 1e-5);
  std::vector<int64_t> axes;
  for (int i = axis; i < r; ++i) axes.push_back(i);
  ValueId y = stashed(m, x, [&](ValueId xs) {
    ValueId ms = o.reduce_mean(o.mul(xs, xs), axes, true);
    return o.mul(xs, o.rsqrt(o.add(ms, k(o, eps, xs))));
  });
  return m.out(0, o.mul(y, o.dtype(scale) == o.dtype(y) ? scale : o.cast(scale, o.dtype(y))));
}

Status map_mvn(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  OpBuilder& o = m.o();
  std::vector<int64_t> axes = m.aints("axes", {0, 2, 3});
  ValueId mean = o.reduce_mean(x, axes, true);
  ValueId var = o.sub(o.reduce_mean(o.mul(x, x), axes, true), o.mul(mean, mean));
  return m.out(0, o.div(o.sub(x, mean), o.add(o.sqrt(var), k(o, 1e-9, x))));
}

Status map_lrn(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  OpBuilder& o = m.o();
  int64_t size = m.ai("size", 0);
  if (size <= 0 || size > 4096) return m.fail(ErrorCode::invalid_argument, "size must be 1 to 4096");
  double alpha = m.af("alpha", 1e-4), beta = m.af("beta", 0.75), bias = m.af("bias", 1.0);
  int r = o.rank(x);
  const Dim& c = o.shape(x)[1];
  if (!c.is_static()) return m.fail(ErrorCode::unsupported, "channels must be static");
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  std::vector<int64_t> pads(2 * r, 0);
  pads[1] = before;
  pads[r + 1] = after;
  ValueId sq = o.pad(o.mul(x, x), pads, 0.0);
  ValueId sum = kNoValue;
  for (int64_t i = 0; i < size; ++i) {
    ValueId s = o.slice(sq, {i}, {i + c.size()}, {1});
    sum = sum == kNoValue ? s : o.add(sum, s);
  }
  ValueId den = o.pow(o.add(k(o, bias, x), o.mul(sum, k(o, alpha / size, x))), k(o, beta, x));
  return m.out(0, o.div(x, den));
}

// Window attributes from the file: one entry per spatial dim, kernel/strides/dilations in
// [1, 2^20], pads in [0, 2^20] (so the arithmetic below cannot divide by zero or overflow).
Status check_window(Importer& m, size_t n, const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                    const std::vector<int64_t>& dil) {
  const int64_t lim = int64_t{1} << 20;
  if (kernel.size() != n || strides.size() != n || dil.size() != n)
    return m.fail(ErrorCode::shape_error, "kernel, strides and dilations need ", n, " entries each");
  for (size_t i = 0; i < n; ++i)
    if (kernel[i] < 1 || kernel[i] > lim || strides[i] < 1 || strides[i] > lim || dil[i] < 1 || dil[i] > lim)
      return m.fail(ErrorCode::out_of_range, "kernel ", kernel[i], ", stride ", strides[i], " and dilation ", dil[i],
                    " must be 1 to 2^20");
  return Status::ok();
}

// auto_pad and explicit pads to [begin..., end...] for the spatial dims.
Expected<std::vector<int64_t>> conv_pads(Importer& m, const Sizes& in, const std::vector<int64_t>& kernel,
                                         const std::vector<int64_t>& strides, const std::vector<int64_t>& dil,
                                         bool ceil_mode = false) {
  size_t n = kernel.size();
  RLX_TRY(check_window(m, n, kernel, strides, dil));
  std::string ap = m.as("auto_pad", "NOTSET");
  std::vector<int64_t> pads = m.aints("pads", std::vector<int64_t>(2 * n, 0));
  if (pads.size() != 2 * n) return m.fail(ErrorCode::shape_error, "pads needs ", 2 * n, " entries");
  for (int64_t p : pads)
    if (p < 0 || p > (int64_t{1} << 20)) return m.fail(ErrorCode::out_of_range, "pad ", p, " must be 0 to 2^20");
  for (int64_t d : in)
    if (d > (int64_t{1} << 40)) return m.fail(ErrorCode::out_of_range, "spatial dim ", d, " too large");
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t out = (in[i] + strides[i] - 1) / strides[i];
      int64_t total = std::max<int64_t>((out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in[i], 0);
      int64_t small = total / 2, big = total - small;
      pads[i] = ap == "SAME_UPPER" ? small : big;
      pads[i + n] = ap == "SAME_UPPER" ? big : small;
    }
  } else if (ap == "VALID") {
    pads.assign(2 * n, 0);
  } else if (ap != "NOTSET") {
    return m.fail(ErrorCode::unsupported, "auto_pad '", ap, "'");
  }
  (void)ceil_mode;
  return pads;
}

// 1-D ops run as 2-D with a height of 1.
struct Spatial {
  bool one_d = false;
  Sizes in;  // spatial sizes
};

// A 3-D convolution as one 2-D convolution (rlx's native conv2d): the Kd depth taps of every
// output depth are stacked into the channels, grouped as the weight's channels are, and the
// output depths move into the batch. x [N, C, D, H, W], w [M, C/g, Kd, Kh, Kw]; pads are ONNX's
// [d, h, w begins, d, h, w ends]. The stacked input is Kd times x's size (im2col along depth).
Expected<ValueId> conv3d(Importer& m, ValueId x, ValueId w, ValueId b, const std::vector<int64_t>& strides,
                         const std::vector<int64_t>& pads, const std::vector<int64_t>& dil, int64_t g) {
  OpBuilder& o = m.o();
  auto xs = static_sizes(o.shape(x));
  auto ws = static_sizes(o.shape(w));
  if (!xs || !ws || xs->size() != 5 || ws->size() != 5) return m.fail(ErrorCode::unsupported, "3-D convolution needs static 5-D shapes");
  const int64_t N = (*xs)[0], C = (*xs)[1], D = (*xs)[2], H = (*xs)[3], W = (*xs)[4];
  const int64_t M = (*ws)[0], Cg = (*ws)[1], Kd = (*ws)[2], Kh = (*ws)[3], Kw = (*ws)[4];
  if (g < 1 || C % g || Cg * g != C || M % g)
    return m.fail(ErrorCode::shape_error, "weight ", sizes_to_string(*ws), " does not match ", C, " channels in ", g, " groups");
  const int64_t span = (Kd - 1) * dil[0] + 1, Dp = D + pads[0] + pads[3];
  if (Dp < span) return m.fail(ErrorCode::shape_error, "the kernel spans ", span, " of the padded depth ", Dp);
  const int64_t Do = (Dp - span) / strides[0] + 1;
  auto stacked = checked_numel(Sizes{N, Do, Kd, C, H, W});
  if (!stacked || *stacked > (int64_t{1} << 34))
    return m.fail(ErrorCode::unsupported, "the depth taps of a 3-D convolution would hold over 2^34 elements");
  ValueId xp = pads[0] || pads[3] ? o.pad(x, {0, 0, pads[0], 0, 0, 0, 0, pads[3], 0, 0}) : x;
  std::vector<ValueId> taps;
  for (int64_t kd = 0; kd < Kd; ++kd) {
    ValueId t = o.slice(xp, {kd * dil[0]}, {kd * dil[0] + (Do - 1) * strides[0] + 1}, {2}, {strides[0]});
    taps.push_back(o.reshape(t, {N, C, 1, Do, H, W}));
  }
  ValueId st = taps.size() == 1 ? taps[0] : o.concat(taps, 2);  // [N, C, Kd, Do, H, W]
  st = o.transpose(o.reshape(st, {N, g, Cg, Kd, Do, H, W}), {0, 4, 1, 3, 2, 5, 6});
  st = o.reshape(st, {N * Do, C * Kd, H, W});
  ValueId wk = o.reshape(o.transpose(w, {0, 2, 1, 3, 4}), {M, Kd * Cg, Kh, Kw});
  std::vector<ValueId> ins{st, wk};
  if (b != kNoValue) ins.push_back(b);
  ValueId y = o.op(Op::Conv2d, ins,
                   Attrs{{"strides", std::vector<int64_t>{strides[1], strides[2]}},
                         {"pads", std::vector<int64_t>{pads[1], pads[2], pads[4], pads[5]}},
                         {"dilations", std::vector<int64_t>{dil[1], dil[2]}}, {"group", g}});
  if (!o.ok()) return o.status().with_context(m.where());
  auto ys = static_sizes(o.shape(y));
  return o.transpose(o.reshape(y, {N, Do, M, (*ys)[2], (*ys)[3]}), {0, 2, 1, 3, 4});
}

// Conv of x by w (and bias b, or kNoValue) with the node's attributes, 1-D, 2-D or 3-D.
Expected<ValueId> conv_core(Importer& m, ValueId x, ValueId w, ValueId b) {
  OpBuilder& o = m.o();
  if (!o.ok()) return o.status().with_context(m.where());
  int r = o.rank(x);
  if (r < 3 || r > 5)
    return m.fail(ErrorCode::unsupported, "only 1-D, 2-D and 3-D convolutions are supported (input rank ", r, ")");
  auto xs = static_sizes(o.shape(x));
  auto ws = static_sizes(o.shape(w));
  if (!xs || !ws) return m.fail(ErrorCode::unsupported, "convolution needs static shapes");
  int n = r - 2;
  std::vector<int64_t> kernel(ws->begin() + 2, ws->end());
  std::vector<int64_t> strides = m.aints("strides", std::vector<int64_t>(n, 1));
  std::vector<int64_t> dil = m.aints("dilations", std::vector<int64_t>(n, 1));
  Sizes in(xs->begin() + 2, xs->end());
  RLX_ASSIGN_OR_RETURN(auto pads, conv_pads(m, in, kernel, strides, dil));
  if (n == 3) return conv3d(m, x, w, b, strides, pads, dil, m.ai("group", 1));
  std::vector<ValueId> ins{x, w};
  if (b != kNoValue) ins.push_back(b);
  if (n == 1) {
    ins[0] = o.reshape(x, {(*xs)[0], (*xs)[1], 1, (*xs)[2]});
    ins[1] = o.reshape(w, {(*ws)[0], (*ws)[1], 1, (*ws)[2]});
    strides = {1, strides[0]};
    dil = {1, dil[0]};
    pads = {0, pads[0], 0, pads[1]};
  }
  ValueId y = o.op(Op::Conv2d, ins,
                   Attrs{{"strides", strides}, {"pads", pads}, {"dilations", dil}, {"group", m.ai("group", 1)}});
  if (n == 1 && o.ok()) {
    auto ys = static_sizes(o.shape(y));
    y = o.reshape(y, {(*ys)[0], (*ys)[1], (*ys)[3]});
  }
  return y;
}

Status map_conv(Importer& m) {
  RLX_TRY(m.only_attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId w, m.in(1));
  ValueId b = kNoValue;
  if (m.has(2)) { RLX_ASSIGN_OR_RETURN(b, m.in(2)); }
  RLX_ASSIGN_OR_RETURN(ValueId y, conv_core(m, x, w, b));
  return m.out(0, y);
}

// ConvInteger: (x - x_zero_point) conv (w - w_zero_point) accumulated exactly (in f64), as i32.
Status map_conv_integer(Importer& m) {
  RLX_TRY(m.only_attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId w, m.in(1));
  OpBuilder& o = m.o();
  ValueId xf = o.cast(x, DType::f64), wf = o.cast(w, DType::f64);
  if (m.has(2)) {
    RLX_ASSIGN_OR_RETURN(ValueId z, m.in(2));
    xf = o.sub(xf, o.cast(z, DType::f64));
  }
  if (m.has(3)) {
    RLX_ASSIGN_OR_RETURN(ValueId z, m.in(3));
    ValueId zf = o.cast(z, DType::f64);
    if (!o.ok()) return o.status().with_context(m.where());
    if (o.rank(zf) == 1) {  // per output channel: [M, 1, ...] against the weight's rank
      std::vector<int64_t> shape(static_cast<size_t>(o.rank(wf)), 1);
      shape[0] = -1;
      zf = o.reshape(zf, shape);
    }
    wf = o.sub(wf, zf);
  }
  RLX_ASSIGN_OR_RETURN(ValueId y, conv_core(m, xf, wf, kNoValue));
  return m.out(0, o.cast(y, DType::i32));
}

// QLinearConv: dequantize input and (per-tensor or per-output-channel) weights, convolve in
// f64 with the i32 bias scaled by x_scale * w_scale, requantize to y's type.
Status map_qlinear_conv(Importer& m) {
  RLX_TRY(m.only_attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  OpBuilder& o = m.o();
  std::vector<ValueId> in(8);
  for (int i = 0; i < 8; ++i) { RLX_ASSIGN_OR_RETURN(in[i], m.in(i)); }
  auto f = [&](ValueId v) { return o.cast(v, DType::f64); };
  auto per_out = [&](ValueId v) {  // per output channel: [M, 1, ...] against the weight's rank
    if (!o.ok() || o.rank(v) != 1) return v;
    std::vector<int64_t> shape(static_cast<size_t>(o.rank(in[3])), 1);
    shape[0] = -1;
    return o.reshape(v, shape);
  };
  ValueId x = o.mul(o.sub(f(in[0]), f(in[2])), f(in[1]));
  ValueId w = o.mul(o.sub(f(in[3]), per_out(f(in[5]))), per_out(f(in[4])));
  ValueId b = kNoValue;
  if (m.has(8)) {
    RLX_ASSIGN_OR_RETURN(ValueId bq, m.in(8));
    b = o.mul(f(bq), o.mul(f(in[1]), f(in[4])));
  }
  RLX_ASSIGN_OR_RETURN(ValueId y, conv_core(m, x, w, b));
  DType out = o.dtype(in[7]);
  ValueId q = o.add(o.op(Op::Round, {o.div(y, f(in[6]))}), f(in[7]));
  double lo = out == DType::u8 ? 0 : -128, hi = out == DType::u8 ? 255 : 127;
  return m.out(0, o.cast(o.min(o.max(q, o.scalar_like(lo, q)), o.scalar_like(hi, q)), out));
}

// ConvTranspose as a convolution: zero-insert the input by the stride, pad by (k-1)*d minus
// the pads (negative pads crop), and convolve with the kernel flipped and its channel axes
// swapped per group.
Status map_conv_transpose(Importer& m) {
  RLX_TRY(m.only_attrs({"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"}));
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId w, m.in(1));
  OpBuilder& o = m.o();
  int r = o.rank(x);
  if (r < 3 || r > 5) return m.fail(ErrorCode::unsupported, "only 1-D, 2-D and 3-D transposed convolutions are supported");
  auto xs0 = static_sizes(o.shape(x));
  auto ws0 = static_sizes(o.shape(w));
  if (!xs0 || !ws0 || ws0->size() != static_cast<size_t>(r)) return m.fail(ErrorCode::unsupported, "needs static shapes");
  Sizes xs = *xs0, ws = *ws0;
  int n = r - 2;
  const int64_t g = m.ai("group", 1);
  std::vector<int64_t> strides = m.aints("strides", std::vector<int64_t>(n, 1));
  std::vector<int64_t> dil = m.aints("dilations", std::vector<int64_t>(n, 1));
  std::vector<int64_t> opad = m.aints("output_padding", std::vector<int64_t>(n, 0));
  std::vector<int64_t> pads = m.aints("pads", std::vector<int64_t>(2 * n, 0));
  std::vector<int64_t> oshape = m.aints("output_shape");
  std::string ap = m.as("auto_pad", "NOTSET");
  if (strides.size() != size_t(n) || dil.size() != size_t(n) || opad.size() != size_t(n) || pads.size() != size_t(2 * n))
    return m.fail(ErrorCode::shape_error, "attribute lengths do not match ", n, " spatial dims");
  RLX_TRY(check_window(m, n, std::vector<int64_t>(ws.begin() + 2, ws.end()), strides, dil));
  for (size_t i = 0; i < size_t(n); ++i)
    if (opad[i] < 0 || opad[i] >= std::max(strides[i], dil[i]) || xs[2 + i] > (int64_t{1} << 30))
      return m.fail(ErrorCode::out_of_range, "output_padding ", opad[i], " or input size out of range");
  for (int64_t p : pads)
    if (p < -(int64_t{1} << 20) || p > (int64_t{1} << 20)) return m.fail(ErrorCode::out_of_range, "pad ", p, " out of range");
  if (g < 1) return m.fail(ErrorCode::out_of_range, "group ", g, " must be positive");
  if (oshape.size() > size_t(n)) oshape.erase(oshape.begin(), oshape.end() - n);
  if (oshape.empty() && (ap == "SAME_UPPER" || ap == "SAME_LOWER"))
    for (int i = 0; i < n; ++i) oshape.push_back(xs[2 + i] * strides[i]);
  for (int64_t d : oshape)
    if (d < 0 || d > (int64_t{1} << 30)) return m.fail(ErrorCode::out_of_range, "output_shape entry ", d, " out of range");
  if (!oshape.empty()) {
    for (int i = 0; i < n; ++i) {
      int64_t total = strides[i] * (xs[2 + i] - 1) + opad[i] + ((ws[2 + i] - 1) * dil[i] + 1) - oshape[i];
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor division, as ONNX's reference
      if (ap == "SAME_UPPER") { pads[i] = half; pads[i + n] = total - half; }
      else { pads[i] = total - half; pads[i + n] = half; }
    }
  }
  if (n == 1) {
    x = o.reshape(x, {xs[0], xs[1], 1, xs[2]});
    w = o.reshape(w, {ws[0], ws[1], 1, ws[2]});
    xs = {xs[0], xs[1], 1, xs[2]};
    ws = {ws[0], ws[1], 1, ws[2]};
    strides.insert(strides.begin(), 1);
    dil.insert(dil.begin(), 1);
    opad.insert(opad.begin(), 0);
    pads = {0, pads[0], 0, pads[1]};
  }
  const int ns = static_cast<int>(xs.size()) - 2;  // 2 or 3 spatial dims from here
  const int64_t N = xs[0], C = xs[1], Mg = ws[1];
  const Sizes sp(xs.begin() + 2, xs.end()), ks(ws.begin() + 2, ws.end());
  if (C % g || ws[0] != C) return m.fail(ErrorCode::shape_error, "weight ", sizes_to_string(ws), " does not match ", C, " channels");
  ValueId z = x;
  bool strided = false;
  for (int64_t st : strides) strided |= st > 1;
  if (strided) {
    // zero-insert: each spatial dim followed by a singleton padded to the stride, merged, cropped
    std::vector<int64_t> interleaved{N, C}, merged{N, C}, starts, ends, axes;
    const size_t R = 2 + 2 * static_cast<size_t>(ns);
    std::vector<int64_t> zp(2 * R, 0);
    for (int i = 0; i < ns; ++i) {
      interleaved.push_back(sp[i]);
      interleaved.push_back(1);
      zp[R + 3 + 2 * static_cast<size_t>(i)] = strides[i] - 1;
      merged.push_back(sp[i] * strides[i]);
      starts.push_back(0);
      ends.push_back((sp[i] - 1) * strides[i] + 1);
      axes.push_back(2 + i);
    }
    z = o.reshape(o.pad(o.reshape(x, interleaved), zp), merged);
    z = o.slice(z, starts, ends, axes);
  }
  std::vector<int64_t> cp(2 * (2 + static_cast<size_t>(ns)), 0);
  for (int i = 0; i < ns; ++i) {
    cp[2 + i] = (ks[i] - 1) * dil[i] - pads[i];
    cp[2 + ns + 2 + i] = (ks[i] - 1) * dil[i] - pads[i + ns] + opad[i];
  }
  z = o.pad(z, cp);
  // kernel: [C, M/g, k...] -> [M, C/g, k...], flipped in space
  std::vector<int64_t> grouped{g, C / g, Mg}, perm{0, 2, 1}, flat{g * Mg, C / g};
  for (int i = 0; i < ns; ++i) {
    grouped.push_back(ks[i]);
    perm.push_back(3 + i);
    flat.push_back(ks[i]);
  }
  ValueId wk = o.reshape(o.transpose(o.reshape(w, grouped), perm), flat);
  for (int i = 0; i < ns; ++i) {
    Tensor rev = Tensor::zeros(DType::i64, {ks[i]});
    for (int64_t j = 0; j < ks[i]; ++j) rev.data<int64_t>()[j] = ks[i] - 1 - j;
    wk = o.gather(wk, m.c(rev), 2 + i);
  }
  ValueId b = kNoValue;
  if (m.has(2)) { RLX_ASSIGN_OR_RETURN(b, m.in(2)); }
  ValueId y;
  if (ns == 3) {
    RLX_ASSIGN_OR_RETURN(y, conv3d(m, z, wk, b, {1, 1, 1}, std::vector<int64_t>(6, 0), dil, g));
  } else {
    std::vector<ValueId> ins{z, wk};
    if (b != kNoValue) ins.push_back(b);
    y = o.op(Op::Conv2d, ins, Attrs{{"strides", std::vector<int64_t>{1, 1}}, {"pads", std::vector<int64_t>{0, 0, 0, 0}},
                                    {"dilations", dil}, {"group", g}});
  }
  if (r == 3 && o.ok()) {
    auto ys = static_sizes(o.shape(y));
    y = o.reshape(y, {(*ys)[0], (*ys)[1], (*ys)[3]});
  }
  return m.out(0, y);
}

// MaxPool's Indices output for x [N, C, H, W] pooled to [N, C, Ho, Wo]: each window's taps
// gathered (taps in the padding read -inf), the first maximum's tap found with argmax, and its
// flat index over the whole input (row-major, or column-major within a channel with
// storage_order 1) looked up in a table made at import.
Expected<ValueId> max_pool_indices(Importer& m, ValueId x, const Sizes& xs, const Sizes& ys,
                                   const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                                   const std::vector<int64_t>& pads, const std::vector<int64_t>& dil, bool column_major) {
  OpBuilder& o = m.o();
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], Ho = ys[2], Wo = ys[3], KK = kernel[0] * kernel[1];
  auto cells = checked_numel(Sizes{Ho, Wo, KK});
  if (!cells || *cells > (int64_t{1} << 24)) return m.fail(ErrorCode::unsupported, "an Indices table over 2^24 entries");
  Tensor table = Tensor::zeros(DType::i64, {Ho * Wo * KK}), where = Tensor::zeros(DType::i64, {Ho, Wo, KK});
  for (int64_t oh = 0; oh < Ho; ++oh)
    for (int64_t ow = 0; ow < Wo; ++ow)
      for (int64_t k = 0; k < KK; ++k) {
        const int64_t h = oh * strides[0] - pads[0] + (k / kernel[1]) * dil[0];
        const int64_t w = ow * strides[1] - pads[1] + (k % kernel[1]) * dil[1];
        const bool in = h >= 0 && h < H && w >= 0 && w < W;
        const int64_t cell = (oh * Wo + ow) * KK + k;
        table.data<int64_t>()[cell] = in ? h * W + w : H * W;  // H * W: the -inf sentinel
        where.data<int64_t>()[cell] = in ? (column_major ? w * H + h : h * W + w) : 0;
      }
  ValueId flat = o.concat({o.reshape(x, {N, C, H * W}), o.full(-INFINITY, o.dtype(x), {N, C, 1})}, 2);
  ValueId taps = o.reshape(o.gather(flat, m.c(table), 2), {N, C, Ho, Wo, KK});
  ValueId best = o.reshape(o.argmax(taps, 4, false), {N, C, Ho, Wo, 1});
  ValueId pick = o.binary(Op::Equal, best, o.iota(DType::i64, {KK}, 0));
  ValueId pos = o.reduce_sum(o.where(pick, m.c(where), o.scalar(0, DType::i64)), {4}, false);
  Tensor base = Tensor::zeros(DType::i64, {N, C, 1, 1});
  for (int64_t i = 0; i < N * C; ++i) base.data<int64_t>()[i] = i * H * W;
  return o.add(pos, m.c(base));
}

// 3-D pooling as two 2-D poolings. A box window is separable: its maximum is the maximum over
// depth of the maxima over height and width, and its average likewise, because the count of a
// window's elements (inside the input, or inside input and padding) is the product of the
// per-axis counts. So x [N, C, D, H, W] pools over (H, W) with D folded into the channels, then
// over D with the plane flattened.
Status pool3d(Importer& m, bool max, ValueId x, const Sizes& xs, const std::vector<int64_t>& kernel,
              const std::vector<int64_t>& strides, const std::vector<int64_t>& dil, const std::vector<int64_t>& pads) {
  OpBuilder& o = m.o();
  if (m.wants(1)) return m.fail(ErrorCode::unsupported, "the Indices output of 3-D pooling");
  if (!max && (dil[0] != 1 || dil[1] != 1 || dil[2] != 1)) return m.fail(ErrorCode::unsupported, "dilated 3-D average pooling");
  const int64_t N = xs[0], C = xs[1], D = xs[2], H = xs[3], W = xs[4];
  const Op op = max ? Op::MaxPool2d : Op::AvgPool2d;
  auto attrs = [&](std::vector<int64_t> k, std::vector<int64_t> st, std::vector<int64_t> p, std::vector<int64_t> d) {
    Attrs a{{"kernel", k}, {"strides", st}, {"pads", p}, {"ceil_mode", m.ai("ceil_mode", 0)}};
    if (max) a.set("dilations", d);
    else a.set("count_include_pad", m.ai("count_include_pad", 0));
    return a;
  };
  const DType in_dt = o.dtype(x);
  if (max && !is_float(in_dt)) x = o.cast(x, DType::f64);  // integer max pooling is exact in f64
  ValueId y = o.op(op, {o.reshape(x, {N, C * D, H, W})},
                   attrs({kernel[1], kernel[2]}, {strides[1], strides[2]}, {pads[1], pads[2], pads[4], pads[5]}, {dil[1], dil[2]}));
  if (!o.ok()) return o.status().with_context(m.where());
  const Sizes plane = *static_sizes(o.shape(y));
  y = o.op(op, {o.reshape(y, {N, C, D, plane[2] * plane[3]})},
           attrs({kernel[0], 1}, {strides[0], 1}, {pads[0], 0, pads[3], 0}, {dil[0], 1}));
  if (!o.ok()) return o.status().with_context(m.where());
  const Sizes depth = *static_sizes(o.shape(y));
  return m.out(0, o.cast(o.reshape(y, {N, C, depth[2], plane[2], plane[3]}), in_dt));
}

// A pooling node's window: kernel_shape, strides, dilations and the pads (from pads or
// auto_pad) for n spatial axes of input sizes xs.
struct PoolWindow {
  std::vector<int64_t> kernel, strides, dil, pads;
};
Expected<PoolWindow> pool_window(Importer& m, const Sizes& xs) {
  const int n = static_cast<int>(xs.size()) - 2;
  PoolWindow w;
  w.kernel = m.aints("kernel_shape");
  if (static_cast<int>(w.kernel.size()) != n) return m.fail(ErrorCode::format_error, "kernel_shape needs ", n, " entries");
  w.strides = m.aints("strides", std::vector<int64_t>(n, 1));
  w.dil = m.aints("dilations", std::vector<int64_t>(n, 1));
  if (static_cast<int>(w.strides.size()) != n || static_cast<int>(w.dil.size()) != n)
    return m.fail(ErrorCode::format_error, "strides and dilations need ", n, " entries");
  Sizes in(xs.begin() + 2, xs.end());
  RLX_ASSIGN_OR_RETURN(w.pads, conv_pads(m, in, w.kernel, w.strides, w.dil));
  return w;
}
// A 1-D pooling [N, C, L] as a 2-D one over [N, C, 1, L] (x reshaped, the window widened).
void pool_1d_as_2d(OpBuilder& o, ValueId& x, const Sizes& xs, PoolWindow& w) {
  x = o.reshape(x, {xs[0], xs[1], 1, xs[2]});
  w.kernel = {1, w.kernel[0]};
  w.strides = {1, w.strides[0]};
  w.dil = {1, w.dil[0]};
  w.pads = {0, w.pads[0], 0, w.pads[1]};
}

MapFn pool(bool max) {
  return [max](Importer& m) -> Status {
    if (m.wants(1) && !max) return m.fail(ErrorCode::format_error, "AveragePool has one output");
    const bool column_major = m.ai("storage_order", 0) != 0;
    if (column_major && !m.wants(1)) return m.fail(ErrorCode::unsupported, "storage_order 1 without the Indices output");
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
    OpBuilder& o = m.o();
    int r = o.rank(x);
    if (r < 3 || r > 5) return m.fail(ErrorCode::unsupported, "only 1-D, 2-D and 3-D pooling is supported (input rank ", r, ")");
    auto xs = static_sizes(o.shape(x));
    if (!xs) return m.fail(ErrorCode::unsupported, "pooling needs static shapes");
    int n = r - 2;
    RLX_ASSIGN_OR_RETURN(PoolWindow win, pool_window(m, *xs));
    if (n == 3) return pool3d(m, max, x, *xs, win.kernel, win.strides, win.dil, win.pads);
    if (n == 1) pool_1d_as_2d(o, x, *xs, win);
    const std::vector<int64_t>&kernel = win.kernel, &strides = win.strides, &dil = win.dil, &pads = win.pads;
    Attrs a{{"kernel", kernel}, {"strides", strides}, {"pads", pads}, {"ceil_mode", m.ai("ceil_mode", 0)}};
    if (max) a.set("dilations", dil);
    else {
      bool has_dil = false;
      for (int64_t d : dil) has_dil |= d != 1;
      const bool include_pad = m.ai("count_include_pad", 0) != 0;
      if (has_dil) {
        // opset 19: dilated windows, as a depthwise convolution with a kernel of ones divided by
        // the count of the window's elements (inside the image, or inside image and padding)
        if (m.ai("ceil_mode", 0) != 0) return m.fail(ErrorCode::unsupported, "dilated average pooling with ceil_mode");
        if (!is_float(o.dtype(x))) return m.fail(ErrorCode::dtype_error, "average pooling needs a float input");
        const auto s4 = static_sizes(o.shape(x));
        const int64_t C = (*s4)[1], H = (*s4)[2], W = (*s4)[3];
        Attrs ca{{"strides", strides}, {"dilations", dil}, {"pads", pads}, {"group", C}};
        ValueId sum = o.op(Op::Conv2d, {x, o.full(1, o.dtype(x), {C, 1, kernel[0], kernel[1]})}, ca);
        Attrs cn{{"strides", strides}, {"dilations", dil}, {"pads", include_pad ? std::vector<int64_t>{0, 0, 0, 0} : pads}};
        Sizes ones = include_pad ? Sizes{1, 1, H + pads[0] + pads[2], W + pads[1] + pads[3]} : Sizes{1, 1, H, W};
        ValueId count = o.op(Op::Conv2d, {o.full(1, o.dtype(x), ones), o.full(1, o.dtype(x), {1, 1, kernel[0], kernel[1]})}, cn);
        ValueId y = o.div(sum, count);
        if (n == 1 && o.ok()) {
          auto ys = static_sizes(o.shape(y));
          y = o.reshape(y, {(*ys)[0], (*ys)[1], (*ys)[3]});
        }
        return m.out(0, y);
      }
      a.set("count_include_pad", int64_t{include_pad});
    }
    if (!o.ok()) return o.status().with_context(m.where());
    DType in_dt = o.dtype(x);
    if (max && !is_float(in_dt)) x = o.cast(x, DType::f64);  // integer max pooling is exact in f64
    ValueId y = o.op(max ? Op::MaxPool2d : Op::AvgPool2d, {x}, a);
    y = o.cast(y, in_dt);
    if (!o.ok()) return o.status().with_context(m.where());
    const Sizes ys4 = *static_sizes(o.shape(y));
    if (m.wants(1)) {
      RLX_ASSIGN_OR_RETURN(ValueId ind, max_pool_indices(m, x, *static_sizes(o.shape(x)), ys4, kernel, strides, pads, dil,
                                                         column_major));
      if (n == 1) ind = o.reshape(ind, {ys4[0], ys4[1], ys4[3]});
      RLX_TRY(m.out(1, ind));
    }
    if (n == 1) y = o.reshape(y, {ys4[0], ys4[1], ys4[3]});
    return m.out(0, y);
  };
}

// |x|^p and its p-th root, exactly for p = 1 and 2 (abs, square, sqrt); the sum of powers over
// a window is a depthwise convolution with a kernel of ones (zero padding adds nothing).
ValueId lp_power(OpBuilder& o, ValueId x, double p) {
  if (p == 1) return o.op(Op::Abs, {x});
  if (p == 2) return o.mul(x, x);
  return o.op(Op::Pow, {o.op(Op::Abs, {x}), o.scalar_like(p, x)});
}
ValueId lp_root(OpBuilder& o, ValueId s, double p) {
  if (p == 1) return s;
  if (p == 2) return o.op(Op::Sqrt, {s});
  return o.op(Op::Pow, {s, o.scalar_like(1.0 / p, s)});
}

Expected<double> lp_order(Importer& m) {
  const double p = m.af("p", 2.0);
  if (!(p > 0) || !std::isfinite(p)) return m.fail(ErrorCode::invalid_argument, "p must be positive and finite, got ", p);
  return p;
}

// LpPool: (sum over the window of |x|^p)^(1/p), 1-D and 2-D, with strides, pads (or auto_pad)
// and opset 18's dilations; ceil_mode 1 is refused (its partial windows would need ORT's rule
// for them, which the spec leaves open).
Status map_lp_pool(Importer& m) {
  RLX_TRY(m.only_attrs({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides"}));
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  OpBuilder& o = m.o();
  const int r = o.rank(x);
  if (r != 3 && r != 4) return m.fail(ErrorCode::unsupported, "only 1-D and 2-D LpPool is supported (input rank ", r, ")");
  if (!is_float(o.dtype(x))) return m.fail(ErrorCode::dtype_error, "LpPool needs a float input");
  auto xs = static_sizes(o.shape(x));
  if (!xs) return m.fail(ErrorCode::unsupported, "LpPool needs static shapes");
  if (m.ai("ceil_mode", 0) != 0) return m.fail(ErrorCode::unsupported, "LpPool with ceil_mode 1");
  const int n = r - 2;
  RLX_ASSIGN_OR_RETURN(PoolWindow win, pool_window(m, *xs));
  RLX_ASSIGN_OR_RETURN(const double p, lp_order(m));
  if (n == 1) pool_1d_as_2d(o, x, *xs, win);
  const int64_t C = (*xs)[1];
  Attrs ca{{"strides", win.strides}, {"dilations", win.dil}, {"pads", win.pads}, {"group", C}};
  ValueId sum = o.op(Op::Conv2d, {lp_power(o, x, p), o.full(1, o.dtype(x), {C, 1, win.kernel[0], win.kernel[1]})}, ca);
  ValueId y = lp_root(o, sum, p);
  if (!o.ok()) return o.status().with_context(m.where());
  if (n == 1) {
    const Sizes ys = *static_sizes(o.shape(y));
    y = o.reshape(y, {ys[0], ys[1], ys[3]});
  }
  return m.out(0, y);
}

// GlobalLpPool: the same over all spatial axes, as a sum reduction.
Status map_global_lp_pool(Importer& m) {
  RLX_TRY(m.only_attrs({"p"}));
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  OpBuilder& o = m.o();
  if (o.rank(x) < 3) return m.fail(ErrorCode::shape_error, "GlobalLpPool needs [N, C, spatial...], got rank ", o.rank(x));
  if (!is_float(o.dtype(x))) return m.fail(ErrorCode::dtype_error, "GlobalLpPool needs a float input");
  RLX_ASSIGN_OR_RETURN(const double p, lp_order(m));
  std::vector<int64_t> axes;
  for (int i = 2; i < o.rank(x); ++i) axes.push_back(i);
  return m.out(0, lp_root(o, o.reduce_sum(lp_power(o, x, p), axes, true), p));
}

MapFn global_pool(Op op) {
  return [op](Importer& m) -> Status {
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
    std::vector<int64_t> axes;
    for (int i = 2; i < m.o().rank(x); ++i) axes.push_back(i);
    return m.out(0, m.o().reduce(op, x, axes, true));
  };
}

Status map_dropout(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  OpBuilder& o = m.o();
  // inference is the identity: the ratio attribute (opsets before 12) and the seed do not
  // change it, and random training-mode dropout is refused below
  (void)m.has_attr("ratio");
  (void)m.has_attr("seed");
  m.ignore_input(1);  // the ratio input: likewise, outside training mode
  if (m.has(2)) {
    RLX_ASSIGN_OR_RETURN(Tensor t, m.konst(2));
    if (t.numel() == 1 && t.get_f64(0) != 0) {
      // training mode drops at random, except with ratio 0
      double ratio = 0.5;
      if (m.has(1)) {
        RLX_ASSIGN_OR_RETURN(auto r, m.floats(1));
        if (r.size() == 1) ratio = r[0];
      }
      if (ratio != 0) return m.fail(ErrorCode::unsupported, "training-mode dropout with ratio ", ratio, " is random");
    }
  }
  if (m.ai("is_test", 1) == 0 && m.opset < 7) return m.fail(ErrorCode::unsupported, "training mode dropout is random");
  RLX_TRY(m.out(0, o.reshape(x, std::vector<int64_t>(o.rank(x), 0))));
  if (m.wants(1)) {
    auto s = static_sizes(o.shape(x));
    if (!s) return m.fail(ErrorCode::unsupported, "mask output needs static dims");
    RLX_TRY(m.out(1, o.full(1, DType::boolean, *s)));
  }
  return Status::ok();
}

Status map_cumsum(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(auto axv, m.ints(1));
  OpBuilder& o = m.o();
  if (axv.size() != 1) return m.fail(ErrorCode::shape_error, "axis must be a scalar");
  int r = o.rank(x);
  RLX_ASSIGN_OR_RETURN(int axis, axis_of(m, axv[0], r));
  const Dim& d = o.shape(x)[axis];
  if (!d.is_static()) return m.fail(ErrorCode::unsupported, "the summed axis must be static");
  int64_t n = d.size();
  if (n > 1024) return m.fail(ErrorCode::unsupported, "axis longer than 1024");
  bool excl = m.ai("exclusive", 0) != 0, rev = m.ai("reverse", 0) != 0;
  DType dt = o.dtype(x);
  DType work = is_float(dt) ? dt : DType::f64;
  Tensor tri = Tensor::zeros(work, {n, n});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      bool on = rev ? (excl ? i > j : i >= j) : (excl ? i < j : i <= j);
      if (on) tri.set_f64(i * n + j, 1);
    }
  std::vector<int64_t> perm;
  for (int i = 0; i < r; ++i)
    if (i != axis) perm.push_back(i);
  perm.push_back(axis);
  std::vector<int64_t> inv(r);
  for (int i = 0; i < r; ++i) inv[perm[i]] = i;
  ValueId xt = o.transpose(o.cast(x, work), perm);
  ValueId y = o.transpose(o.matmul(xt, m.c(tri)), inv);
  return m.out(0, o.cast(y, dt));
}

}  // namespace

void register_nn_ops(OpTable& t) {
  t["MatMul"] = {map_matmul};
  t["Gemm"] = {map_gemm};
  t["Softmax"] = {softmax_like(0)};
  t["LogSoftmax"] = {softmax_like(1)};
  t["Hardmax"] = {softmax_like(2)};
  t["LayerNormalization"] = {map_layer_norm};
  t["BatchNormalization"] = {map_batch_norm};
  t["InstanceNormalization"] = {map_instance_norm};
  t["MaxUnpool"] = {map_max_unpool};
  t["GroupNormalization"] = {map_group_norm};
  t["RMSNormalization"] = {map_rms_norm};
  t["MeanVarianceNormalization"] = {map_mvn};
  t["LRN"] = {map_lrn};
  t["Conv"] = {map_conv};
  t["ConvTranspose"] = {map_conv_transpose};
  t["ConvInteger"] = {map_conv_integer};
  t["QLinearConv"] = {map_qlinear_conv};
  t["MaxPool"] = {pool(true)};
  t["AveragePool"] = {pool(false)};
  t["GlobalAveragePool"] = {global_pool(Op::ReduceMean)};
  t["LpPool"] = {map_lp_pool};
  t["GlobalLpPool"] = {map_global_lp_pool};
  t["GlobalMaxPool"] = {global_pool(Op::ReduceMax)};
  t["Dropout"] = {map_dropout};
  t["CumSum"] = {map_cumsum};
}

}  // namespace rlx::onnx_import
