#include "quant/int8_weights.h"

#include <cmath>

namespace rlx::quant {

Expected<Int8Weight> quantize_int8_rows(const Tensor& w, const std::string& name) {
  if (w.rank() != 2 || !is_float(w.dtype()))
    return error(ErrorCode::invalid_argument, "tensor '", name, "': int8 quantization takes a 2-D float weight, got ",
                 w.type().to_string());
  const int64_t rows = w.sizes()[0], cols = w.sizes()[1];
  Int8Weight r{Tensor::zeros(DType::i8, {rows, cols}), Tensor::zeros(DType::f32, {rows})};
  for (int64_t j = 0; j < rows; ++j) {
    double amax = 0;
    for (int64_t p = 0; p < cols; ++p) {
      const double v = w.get_f64(j * cols + p);
      if (!std::isfinite(v))
        return error(ErrorCode::invalid_argument, "tensor '", name, "' has a non-finite value at row ", j, ", column ", p);
      amax = std::max(amax, std::fabs(v));
    }
    const float s = amax > 0 ? static_cast<float>(amax / 127.0) : 1.f;
    r.scale.data<float>()[j] = s;
    for (int64_t p = 0; p < cols; ++p) {
      const double q = std::nearbyint(w.get_f64(j * cols + p) / s);
      r.q.data<int8_t>()[j * cols + p] = static_cast<int8_t>(std::max(-127.0, std::min(127.0, q)));
    }
  }
  return r;
}

}  // namespace rlx::quant
