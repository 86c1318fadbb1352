// Post-training quantization for the Cortex-M target and the host int8 reference.
#include <algorithm>
#include <cmath>

#include "targets/cortex_m/cortex_m.h"
#include "targets/cortex_m/rlx_mcu_kernels.h"

namespace rlx::targets::cortex_m {
namespace {

struct ActQuant {
  double scale = 1.0;
  int32_t zp = 0;
};

// Asymmetric int8 over [lo, hi], widened to include 0 so that 0 (ReLU's floor, padding) is
// exactly representable.
ActQuant asymmetric(double lo, double hi) {
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  if (hi - lo < 1e-12) hi = lo + 1e-6;  // a constant activation: any small scale will do
  ActQuant q;
  q.scale = static_cast<double>(static_cast<float>((hi - lo) / 255.0));
  const double zp = std::round(-128.0 - lo / q.scale);
  q.zp = static_cast<int32_t>(std::clamp(zp, -128.0, 127.0));
  return q;
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

int64_t Int8Program::arena_bytes() const { return buffer_bytes(0) + buffer_bytes(1); }

Expected<Int8Program> quantize_program(const Graph& g, const FloatProgram& p, const Tensor& calib_images,
                                       const std::string& device) {
  if (calib_images.dtype() != DType::f32 || calib_images.rank() < 1 || calib_images.sizes()[0] < 1 ||
      calib_images.numel() != calib_images.sizes()[0] * p.n_in)
    return error(ErrorCode::invalid_argument, "calibration images must be f32 [N, ", p.n_in, "] with N >= 1, got ",
                 calib_images.type().to_string());
  RLX_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run_float(g, p, calib_images, device));
  if (outs.size() != p.layers.size()) return error(ErrorCode::internal, "calibration returned ", outs.size(), " outputs");
  Int8Program q;
  q.n_in = p.n_in;
  q.n_out = p.layers.back().n_out;
  q.report = p.report;
  double lo = 0, hi = 0;
  min_max(calib_images, &lo, &hi);
  ActQuant in_q = asymmetric(lo, hi);
  q.in_scale = static_cast<float>(in_q.scale);
  q.in_zp = in_q.zp;
  for (size_t k = 0; k < p.layers.size(); ++k) {
    const FloatDense& F = p.layers[k];
    min_max(outs[k], &lo, &hi);
    const ActQuant out_q = asymmetric(F.relu ? 0.0 : lo, hi);
    Int8Dense L;
    L.name = F.name;
    L.n_in = F.n_in;
    L.n_out = F.n_out;
    L.relu = F.relu;
    L.out_scale = static_cast<float>(out_q.scale);
    L.out_zp = out_q.zp;
    L.act_min = F.relu ? std::max(-128, out_q.zp) : -128;
    L.act_max = 127;
    L.w.resize(static_cast<size_t>(F.n_in) * static_cast<size_t>(F.n_out));
    L.bias.resize(static_cast<size_t>(F.n_out));
    L.mult.resize(static_cast<size_t>(F.n_out));
    L.shift.resize(static_cast<size_t>(F.n_out));
    L.w_scale.resize(static_cast<size_t>(F.n_out));
    for (int32_t o = 0; o < F.n_out; ++o) {
      double amax = 0.0;
      for (int32_t i = 0; i < F.n_in; ++i)
        amax = std::max(amax, std::fabs(static_cast<double>(F.w[static_cast<size_t>(i) * F.n_out + o])));
      if (!std::isfinite(amax)) return error(ErrorCode::invalid_argument, F.name, ": output channel ", o, " has non-finite weights");
      const double ws = static_cast<double>(static_cast<float>(amax > 0 ? amax / 127.0 : 1.0));
      L.w_scale[static_cast<size_t>(o)] = static_cast<float>(ws);
      int64_t wsum = 0;
      for (int32_t i = 0; i < F.n_in; ++i) {
        const double w = F.w[static_cast<size_t>(i) * F.n_out + o] / ws;
        const int8_t qw = static_cast<int8_t>(std::clamp(std::round(w), -127.0, 127.0));
        L.w[static_cast<size_t>(o) * F.n_in + i] = qw;
        wsum += qw;
      }
      const double bias_scale = static_cast<double>(q.layers.empty() ? q.in_scale : q.layers.back().out_scale) * ws;
      const int32_t in_zp = q.layers.empty() ? q.in_zp : q.layers.back().out_zp;
      const double bq = std::round(F.b[static_cast<size_t>(o)] / bias_scale);
      // the int32 accumulator must hold the folded bias plus any dot product (|in * w| <= 128 * 127)
      const double bound = 2147483647.0 - 128.0 * 127.0 * F.n_in;
      const double folded = bq - static_cast<double>(in_zp) * static_cast<double>(wsum);
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

std::vector<int8_t> quantize_input(const Int8Program& p, std::span<const float> x) {
  std::vector<int8_t> q(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = std::isfinite(x[i]) ? std::round(x[i] / static_cast<double>(p.in_scale)) + p.in_zp : p.in_zp;
    q[i] = static_cast<int8_t>(std::clamp(v, -128.0, 127.0));
  }
  return q;
}

std::vector<int8_t> run_reference(const Int8Program& p, std::span<const int8_t> input) {
  std::vector<int8_t> a(input.begin(), input.end()), b;
  a.resize(static_cast<size_t>(p.n_in), static_cast<int8_t>(p.in_zp));  // a short input reads as zeros
  for (const Int8Dense& L : p.layers) {
    b.assign(static_cast<size_t>(L.n_out), 0);
    rlx_mcu_dense_s8(a.data(), L.n_in, L.w.data(), L.bias.data(), L.mult.data(), L.shift.data(), L.n_out, L.out_zp,
                     L.act_min, L.act_max, b.data());
    a.swap(b);
  }
  return a;
}

}  // namespace rlx::targets::cortex_m
