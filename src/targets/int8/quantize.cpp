// Quantization for the int8 targets (cortex-m, fpga) and the host int8 reference: activation
// scales from post-training calibration or from quantization-aware training, weights per output
// channel either way.
#include <algorithm>
#include <cmath>

#include "targets/int8/int8.h"
#include "targets/int8/rlx_mcu_kernels.h"

namespace rlx::targets::int8 {
namespace {

struct ActQuant {
  double scale = 1.0;
  int32_t zp = 0;
};

// Asymmetric int8 over [lo, hi], widened to include 0 so that 0 (ReLU's floor, padding) is
// exactly representable: the function quantization-aware training uses for its sites too.
ActQuant asymmetric(double lo, double hi) {
  const train::ActQuantParams p = train::act_quant_params(lo, hi);
  return ActQuant{static_cast<double>(p.scale), p.zero_point};
}

void min_max(const Tensor& t, double* lo, double* hi) {
  *lo = 0.0;
  *hi = 0.0;
  const float* v = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double x = v[i];
    if (!std::isfinite(x)) continue;
    *lo = std::min(*lo, x);
    *hi = std::max(*hi, x);
  }
}

}  // namespace

Status quantize_multiplier(double real, int32_t* mult, int32_t* shift) {
  if (!std::isfinite(real) || real <= 0.0 || real >= 1073741824.0)
    return error(ErrorCode::out_of_range, "requantization multiplier ", real, " is outside (0, 2^30)");
  int e = 0;
  const double f = std::frexp(real, &e);  // real = f * 2^e, f in [0.5, 1)
  int64_t m = std::llround(std::ldexp(f, 31));
  if (m == (int64_t{1} << 31)) {
    m /= 2;
    ++e;
  }
  int s = 31 - e;
  if (s > 62) {
    // below 2^-31: keep what precision a 62-bit shift leaves (0 outputs the zero point)
    m = std::llround(std::ldexp(real, 62));
    s = 62;
    if (m == 0) s = 1;
  }
  *mult = static_cast<int32_t>(m);
  *shift = s;
  return Status::ok();
}

int64_t Int8Program::scratch_bytes() const {
  int64_t taps = 0;
  for (const Int8Layer& L : layers)
    if (L.kind == LayerKind::conv2d)
      taps = std::max<int64_t>(taps, int64_t{L.geo.c_in} / L.geo.groups * L.geo.kh * L.geo.kw);
  return (taps + 3) / 4 * 4;
}

void plan_arena(Int8Program& p) {
  const int32_t n_values = static_cast<int32_t>(p.layers.size()) + 1;  // index v + 1 for value v
  std::vector<int32_t> first(static_cast<size_t>(n_values)), last(static_cast<size_t>(n_values));
  for (int32_t v = -1; v + 1 < n_values; ++v) first[static_cast<size_t>(v + 1)] = last[static_cast<size_t>(v + 1)] = v;
  last.back() = n_values;  // the output is copied out after the last layer
  for (int32_t k = 0; k + 1 < n_values; ++k) {
    const Int8Layer& L = p.layers[static_cast<size_t>(k)];
    last[static_cast<size_t>(L.input + 1)] = std::max(last[static_cast<size_t>(L.input + 1)], k);
    if (L.kind == LayerKind::add) last[static_cast<size_t>(L.input2 + 1)] = std::max(last[static_cast<size_t>(L.input2 + 1)], k);
  }
  auto bytes = [&](int32_t i) { return (int64_t{p.value_size(i - 1)} + 3) / 4 * 4; };
  std::vector<int32_t> order(static_cast<size_t>(n_values));
  for (int32_t i = 0; i < n_values; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return bytes(x) > bytes(y); });
  p.offsets.assign(static_cast<size_t>(n_values), -1);
  p.activation_bytes = 0;
  for (int32_t i : order) {
    // the placed values live at the same time as i, by offset; i goes into the first gap
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int32_t j = 0; j < n_values; ++j)
      if (p.offsets[static_cast<size_t>(j)] >= 0 && first[static_cast<size_t>(i)] <= last[static_cast<size_t>(j)] &&
          first[static_cast<size_t>(j)] <= last[static_cast<size_t>(i)])
        busy.emplace_back(p.offsets[static_cast<size_t>(j)], p.offsets[static_cast<size_t>(j)] + bytes(j));
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& [lo, hi] : busy) {
      if (at + bytes(i) <= lo) break;
      at = std::max(at, hi);
    }
    p.offsets[static_cast<size_t>(i)] = at;
    p.activation_bytes = std::max(p.activation_bytes, at + bytes(i));
  }
}

namespace {

// The program from its activation quantization: value_q[v + 1] for value v (-1 the input, k
// layer k's output; a pool's entry is ignored: it keeps its input's).
Expected<Int8Program> build_program(const FloatProgram& p, std::vector<ActQuant> value_q) {
  Int8Program q;
  q.n_in = p.n_in;
  q.n_out = p.layers.back().n_out;
  q.report = p.report;
  q.in_scale = static_cast<float>(value_q[0].scale);
  q.in_zp = value_q[0].zp;
  for (size_t k = 0; k < p.layers.size(); ++k) {
    const FloatLayer& F = p.layers[k];
    Int8Layer L;
    L.kind = F.kind;
    L.name = F.name;
    L.n_in = F.n_in;
    L.n_out = F.n_out;
    L.input = F.input;
    L.input2 = F.input2;
    L.geo = F.geo;
    L.count_include_pad = F.count_include_pad;
    L.relu = F.relu;
    const ActQuant in_q = value_q[static_cast<size_t>(F.input + 1)];
    const double in_scale = in_q.scale;
    L.in_zp = in_q.zp;
    if (is_pool(F.kind)) {  // int8 max and average keep the scale and zero point
      value_q[k + 1] = in_q;
      L.out_scale = static_cast<float>(in_scale);
      L.out_zp = L.in_zp;
      q.layers.push_back(std::move(L));
      continue;
    }
    const ActQuant& out_q = value_q[k + 1];
    L.out_scale = static_cast<float>(out_q.scale);
    L.out_zp = out_q.zp;
    L.act_min = F.relu ? std::max(-128, out_q.zp) : -128;
    L.act_max = 127;
    if (F.kind == LayerKind::add) {
      // TFLite's quantized add: both operands to the scale 2 * max(scales) / 2^20, summed, then
      // to the output scale (rlx_mcu_add_s8)
      const ActQuant in2_q = value_q[static_cast<size_t>(F.input2 + 1)];
      L.in2_zp = in2_q.zp;
      const double twice_max = 2.0 * std::max(in_scale, in2_q.scale);
      L.mult.resize(1);
      L.shift.resize(1);
      RLX_TRY(quantize_multiplier(in_scale / twice_max, &L.in_mult, &L.in_shift).with_context(F.name));
      RLX_TRY(quantize_multiplier(in2_q.scale / twice_max, &L.in2_mult, &L.in2_shift).with_context(F.name));
      RLX_TRY(quantize_multiplier(twice_max / (1048576.0 * out_q.scale), &L.mult[0], &L.shift[0]).with_context(F.name));
      q.layers.push_back(std::move(L));
      continue;
    }
    // output channels and the taps of each: dense W is [n_in][n_out], conv2d W is [c_out][taps]
    const bool dense = F.kind == LayerKind::dense;
    const int32_t channels = F.channels_out();
    const int32_t taps = dense ? F.n_in : F.geo.c_in / F.geo.groups * F.geo.kh * F.geo.kw;
    auto wf = [&](int32_t o, int32_t i) {
      return static_cast<double>(dense ? F.w[static_cast<size_t>(i) * F.n_out + o] : F.w[static_cast<size_t>(o) * taps + i]);
    };
    L.w.resize(static_cast<size_t>(channels) * static_cast<size_t>(taps));
    L.bias.resize(static_cast<size_t>(channels));
    L.mult.resize(static_cast<size_t>(channels));
    L.shift.resize(static_cast<size_t>(channels));
    L.w_scale.resize(static_cast<size_t>(channels));
    for (int32_t o = 0; o < channels; ++o) {
      double amax = 0.0;
      for (int32_t i = 0; i < taps; ++i) amax = std::max(amax, std::fabs(wf(o, i)));
      if (!std::isfinite(amax)) return error(ErrorCode::invalid_argument, F.name, ": output channel ", o, " has non-finite weights");
      const double ws = static_cast<double>(static_cast<float>(amax > 0 ? amax / 127.0 : 1.0));
      L.w_scale[static_cast<size_t>(o)] = static_cast<float>(ws);
      int64_t wsum = 0;
      for (int32_t i = 0; i < taps; ++i) {
        const int8_t qw = static_cast<int8_t>(std::clamp(std::round(wf(o, i) / ws), -127.0, 127.0));
        L.w[static_cast<size_t>(o) * taps + i] = qw;
        wsum += qw;
      }
      const double bias_scale = in_scale * ws;
      const double bq = std::round(F.b[static_cast<size_t>(o)] / bias_scale);
      // the int32 accumulator must hold the folded bias plus any dot product (|in * w| <= 128 * 127)
      const double bound = 2147483647.0 - 128.0 * 127.0 * taps;
      const double folded = bq - static_cast<double>(L.in_zp) * static_cast<double>(wsum);
      if (!std::isfinite(folded) || std::fabs(folded) > bound)
        return error(ErrorCode::overflow, F.name, ": the int32 bias of output channel ", o, " (", folded,
                     ") could overflow the accumulator; the bias is too large for its scale");
      L.bias[static_cast<size_t>(o)] = static_cast<int32_t>(folded);
      RLX_TRY(quantize_multiplier(bias_scale / out_q.scale, &L.mult[static_cast<size_t>(o)], &L.shift[static_cast<size_t>(o)])
                  .with_context(cat(F.name, " output channel ", o)));
    }
    q.layers.push_back(std::move(L));
  }
  plan_arena(q);
  return q;
}

}  // namespace

Expected<Int8Program> quantize_program(const Graph& g, const FloatProgram& p, const Tensor& calib_images,
                                       const std::string& device) {
  if (p.layers.empty()) return error(ErrorCode::invalid_argument, "the program has no layers");
  if (calib_images.dtype() != DType::f32 || calib_images.rank() < 1 || calib_images.sizes()[0] < 1 ||
      calib_images.numel() != calib_images.sizes()[0] * p.n_in)
    return error(ErrorCode::invalid_argument, "calibration images must be f32 [N, ", p.n_in, "] with N >= 1, got ",
                 calib_images.type().to_string());
  RLX_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run_float(g, p, calib_images, device));
  if (outs.size() != p.layers.size()) return error(ErrorCode::internal, "calibration returned ", outs.size(), " outputs");
  double lo = 0, hi = 0;
  min_max(calib_images, &lo, &hi);
  std::vector<ActQuant> value_q(p.layers.size() + 1);
  value_q[0] = asymmetric(lo, hi);
  for (size_t k = 0; k < p.layers.size(); ++k) {
    if (is_pool(p.layers[k].kind)) continue;  // keeps its input's
    min_max(outs[k], &lo, &hi);
    value_q[k + 1] = asymmetric(p.layers[k].relu ? 0.0 : lo, hi);
  }
  return build_program(p, std::move(value_q));
}

Expected<Int8Program> quantize_program_qat(const FloatProgram& p, const std::map<std::string, train::ActQuantParams>& acts) {
  if (p.layers.empty()) return error(ErrorCode::invalid_argument, "the program has no layers");
  auto site = [&](const std::string& name) -> Expected<ActQuant> {
    auto it = acts.find(name);
    if (it == acts.end())
      return error(ErrorCode::invalid_argument, "the quantization-aware checkpoint has no scale for site '", name,
                   "' (tensors qat.", name, ".scale / .zero_point); was it trained for this model?");
    return ActQuant{static_cast<double>(it->second.scale), it->second.zero_point};
  };
  // each value's scale: the site of the dense or conv2d layer that reads it (the first, when
  // several do: their sites tracked the same value), "output" for the logits; a pool keeps its
  // input's scale, so a site after a pool covers the pool's input too
  const size_t n = p.layers.size();
  std::vector<ActQuant> value_q(n + 1);
  std::vector<bool> known(n + 1, false);
  bool any_compute = false;
  for (const FloatLayer& L : p.layers) {
    if (L.kind != LayerKind::dense && L.kind != LayerKind::conv2d) continue;
    any_compute = true;
    const size_t v = static_cast<size_t>(L.input + 1);
    if (known[v]) continue;
    RLX_ASSIGN_OR_RETURN(value_q[v], site(L.name + ".input"));
    known[v] = true;
  }
  if (!any_compute) return error(ErrorCode::invalid_argument, "the program has no dense or conv2d layer");
  RLX_ASSIGN_OR_RETURN(value_q[n], site("output"));
  known[n] = true;
  for (size_t k = n; k-- > 0;) {  // back through pools: a pool's output scale is its input's
    const FloatLayer& L = p.layers[k];
    const size_t in = static_cast<size_t>(L.input + 1);
    if (is_pool(L.kind) && known[k + 1] && !known[in]) value_q[in] = value_q[k + 1], known[in] = true;
  }
  for (size_t v = 0; v <= n; ++v)
    if (!known[v] && !(v > 0 && is_pool(p.layers[v - 1].kind)))
      return error(ErrorCode::invalid_argument, "the quantization-aware checkpoint has no scale for ",
                   v == 0 ? std::string("the program's input") : "the output of layer " + p.layers[v - 1].name,
                   ": quantization-aware training tracks the inputs of dense and conv2d layers and the logits only; "
                   "quantize this model by calibration (rlx codegen --ptq)");
  RLX_ASSIGN_OR_RETURN(Int8Program q, build_program(p, std::move(value_q)));
  q.report.policy = "int8 (full-integer, activation scales from quantization-aware training)";
  q.from_qat = true;
  return q;
}

std::vector<int8_t> quantize_input(const Int8Program& p, std::span<const float> x) {
  std::vector<int8_t> q(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = std::isfinite(x[i]) ? std::round(x[i] / static_cast<double>(p.in_scale)) + p.in_zp : p.in_zp;
    q[i] = static_cast<int8_t>(std::clamp(v, -128.0, 127.0));
  }
  return q;
}

std::vector<int8_t> run_reference(const Int8Program& p, std::span<const int8_t> input) {
  // one buffer per value (not the arena plan: the generated code uses the plan, so the targets
  // tests check the plan against this)
  std::vector<std::vector<int8_t>> values(p.layers.size() + 1);
  values[0].assign(input.begin(), input.end());
  values[0].resize(static_cast<size_t>(p.n_in), static_cast<int8_t>(p.in_zp));  // a short input reads as zeros
  std::vector<int8_t> col(static_cast<size_t>(p.scratch_bytes()));
  for (size_t k = 0; k < p.layers.size(); ++k) {
    const Int8Layer& L = p.layers[k];
    const int8_t* a = values[static_cast<size_t>(L.input + 1)].data();
    std::vector<int8_t>& b = values[k + 1];
    b.assign(static_cast<size_t>(L.n_out), 0);
    const Conv2dGeometry& c = L.geo;
    switch (L.kind) {
      case LayerKind::dense:
        rlx_mcu_dense_s8(a, L.n_in, L.w.data(), L.bias.data(), L.mult.data(), L.shift.data(), L.n_out, L.out_zp,
                         L.act_min, L.act_max, b.data());
        break;
      case LayerKind::conv2d:
        rlx_mcu_conv2d_s8(a, c.c_in, c.h_in, c.w_in, L.in_zp, L.w.data(), c.c_out, c.groups, c.kh, c.kw, c.sh, c.sw, c.pt,
                          c.pl, L.bias.data(), L.mult.data(), L.shift.data(), c.h_out, c.w_out, L.out_zp, L.act_min,
                          L.act_max, col.data(), b.data());
        break;
      case LayerKind::maxpool2d:
        rlx_mcu_maxpool2d_s8(a, c.c_in, c.h_in, c.w_in, c.kh, c.kw, c.sh, c.sw, c.pt, c.pl, c.h_out, c.w_out, b.data());
        break;
      case LayerKind::avgpool2d:
        rlx_mcu_avgpool2d_s8(a, c.c_in, c.h_in, c.w_in, L.in_zp, c.kh, c.kw, c.sh, c.sw, c.pt, c.pl, c.pb, c.pr,
                             L.count_include_pad ? 1 : 0, c.h_out, c.w_out, b.data());
        break;
      case LayerKind::add:
        rlx_mcu_add_s8(a, L.in_zp, L.in_mult, L.in_shift, values[static_cast<size_t>(L.input2 + 1)].data(), L.in2_zp,
                       L.in2_mult, L.in2_shift, L.n_out, L.mult[0], L.shift[0], L.out_zp, L.act_min, L.act_max, b.data());
        break;
    }
  }
  return values.back();
}

}  // namespace rlx::targets::int8
