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

int64_t Int8Program::buffer_bytes(int b) const {
  int64_t bytes = b == 0 ? n_in : 0;  // buffer 0 holds the input, layer k writes buffer (k + 1) % 2
  for (size_t k = 0; k < layers.size(); ++k)
    if (static_cast<int>((k + 1) % 2) == b) bytes = std::max<int64_t>(bytes, layers[k].n_out);
  return bytes;
}

int64_t Int8Program::scratch_bytes() const {
  int64_t taps = 0;
  for (const Int8Layer& L : layers)
    if (L.kind == LayerKind::conv2d) taps = std::max<int64_t>(taps, int64_t{L.geo.c_in} * L.geo.kh * L.geo.kw);
  return (taps + 3) / 4 * 4;
}

int64_t Int8Program::arena_bytes() const { return buffer_bytes(0) + buffer_bytes(1) + scratch_bytes(); }

namespace {

// The program from its activation quantization: `in_q` for the input, out_q[k] for the output of
// layer k (ignored for max-pooling, which keeps its input's).
Expected<Int8Program> build_program(const FloatProgram& p, const ActQuant& in_q, const std::vector<ActQuant>& out_qs) {
  Int8Program q;
  q.n_in = p.n_in;
  q.n_out = p.layers.back().n_out;
  q.report = p.report;
  q.in_scale = static_cast<float>(in_q.scale);
  q.in_zp = in_q.zp;
  for (size_t k = 0; k < p.layers.size(); ++k) {
    const FloatLayer& F = p.layers[k];
    Int8Layer L;
    L.kind = F.kind;
    L.name = F.name;
    L.n_in = F.n_in;
    L.n_out = F.n_out;
    L.geo = F.geo;
    L.relu = F.relu;
    const double in_scale = q.layers.empty() ? q.in_scale : q.layers.back().out_scale;
    L.in_zp = q.layers.empty() ? q.in_zp : q.layers.back().out_zp;
    if (F.kind == LayerKind::maxpool2d) {  // int8 max keeps the scale and zero point
      L.out_scale = static_cast<float>(in_scale);
      L.out_zp = L.in_zp;
      q.layers.push_back(std::move(L));
      continue;
    }
    const ActQuant& out_q = out_qs[k];
    L.out_scale = static_cast<float>(out_q.scale);
    L.out_zp = out_q.zp;
    L.act_min = F.relu ? std::max(-128, out_q.zp) : -128;
    L.act_max = 127;
    // output channels and the taps of each: dense W is [n_in][n_out], conv2d W is [c_out][taps]
    const bool dense = F.kind == LayerKind::dense;
    const int32_t channels = F.channels_out();
    const int32_t taps = dense ? F.n_in : F.geo.c_in * F.geo.kh * F.geo.kw;
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
  const ActQuant in_q = asymmetric(lo, hi);
  std::vector<ActQuant> out_qs(p.layers.size());
  for (size_t k = 0; k < p.layers.size(); ++k) {
    if (p.layers[k].kind == LayerKind::maxpool2d) continue;
    min_max(outs[k], &lo, &hi);
    out_qs[k] = asymmetric(p.layers[k].relu ? 0.0 : lo, hi);
  }
  return build_program(p, in_q, out_qs);
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
  // the sites are the inputs of the dense and conv2d layers, then the logits
  std::vector<size_t> compute;
  for (size_t k = 0; k < p.layers.size(); ++k)
    if (p.layers[k].kind != LayerKind::maxpool2d) compute.push_back(k);
  if (compute.empty()) return error(ErrorCode::invalid_argument, "the program has no dense or conv2d layer");
  RLX_ASSIGN_OR_RETURN(ActQuant in_q, site(p.layers[compute[0]].name + ".input"));
  std::vector<ActQuant> out_qs(p.layers.size());
  for (size_t i = 0; i < compute.size(); ++i) {
    const std::string next = i + 1 < compute.size() ? p.layers[compute[i + 1]].name + ".input" : std::string("output");
    RLX_ASSIGN_OR_RETURN(out_qs[compute[i]], site(next));
  }
  RLX_ASSIGN_OR_RETURN(Int8Program q, build_program(p, in_q, out_qs));
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
  std::vector<int8_t> a(input.begin(), input.end()), b, col(static_cast<size_t>(p.scratch_bytes()));
  a.resize(static_cast<size_t>(p.n_in), static_cast<int8_t>(p.in_zp));  // a short input reads as zeros
  for (const Int8Layer& L : p.layers) {
    b.assign(static_cast<size_t>(L.n_out), 0);
    const Conv2dGeometry& c = L.geo;
    switch (L.kind) {
      case LayerKind::dense:
        rlx_mcu_dense_s8(a.data(), L.n_in, L.w.data(), L.bias.data(), L.mult.data(), L.shift.data(), L.n_out, L.out_zp,
                         L.act_min, L.act_max, b.data());
        break;
      case LayerKind::conv2d:
        rlx_mcu_conv2d_s8(a.data(), c.c_in, c.h_in, c.w_in, L.in_zp, L.w.data(), c.c_out, c.kh, c.kw, c.sh, c.sw, c.pt, c.pl,
                          L.bias.data(), L.mult.data(), L.shift.data(), c.h_out, c.w_out, L.out_zp, L.act_min, L.act_max,
                          col.data(), b.data());
        break;
      case LayerKind::maxpool2d:
        rlx_mcu_maxpool2d_s8(a.data(), c.c_in, c.h_in, c.w_in, c.kh, c.kw, c.sh, c.sw, c.h_out, c.w_out, b.data());
        break;
    }
    a.swap(b);
  }
  return a;
}

}  // namespace rlx::targets::int8
