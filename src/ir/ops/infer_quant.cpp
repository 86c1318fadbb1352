// Block-quantized weight formats and the type rules of dequantize / qmatmul.
#include <array>
#include <cmath>

#include "infer_util.h"

namespace rlx {

std::optional<QuantFormat> quant_format(std::string_view name) {
  // block sizes as llama.cpp's ggml defines them, and rlx's own 4-bit groups of 128
  // (kernels/ggml_quants.h)
  static constexpr std::array<QuantFormat, 16> kFormats = {{
      {"q4_0", 32, 18},   {"q4_1", 32, 20},   {"q5_0", 32, 22},   {"q5_1", 32, 24},  {"q8_0", 32, 34},
      {"q2_k", 256, 84},  {"q3_k", 256, 110}, {"q4_k", 256, 144}, {"q5_k", 256, 176}, {"q6_k", 256, 210},
      {"q8_k", 256, 292}, {"iq4_nl", 32, 18}, {"iq4_xs", 256, 136}, {"f16", 1, 2},
      {"int4_g128", 128, 66}, {"int4_g128_asym", 128, 68},
  }};
  for (const QuantFormat& f : kFormats)
    if (f.name == name) return f;
  return std::nullopt;
}

namespace infer {

// int8_matmul: x float [..., K], w i8 [N, K], w_scale f32 [N] or [], optional bias f32 [N].
Expected<Types> infer_int8_matmul(Op op, const NodeSig& sig) {
  const TensorType &x = sig.inputs[0], &w = sig.inputs[1], &ws = sig.inputs[2];
  if (x.dtype != DType::f32) return fail(ErrorCode::dtype_error, op, sig, "x must be f32, got ", dtype_name(x.dtype));
  if (w.dtype != DType::i8) return fail(ErrorCode::dtype_error, op, sig, "w must be i8, got ", dtype_name(w.dtype));
  if (x.rank() < 1 || w.rank() != 2)
    return fail(ErrorCode::shape_error, op, sig, "x must be [..., K] and w [N, K], got ", x.to_string(), " and ", w.to_string());
  const Dim &k = x.shape.back(), &wk = w.shape[1], &n = w.shape[0];
  if (k.is_static() && wk.is_static() && k.size() != wk.size())
    return fail(ErrorCode::shape_error, op, sig, "x has K = ", k.size(), " but w rows hold ", wk.size(), " values");
  auto per_row = [&](int i, const char* what) -> Status {
    const TensorType& t = sig.inputs[i];
    if (t.dtype != DType::f32) return fail(ErrorCode::dtype_error, op, sig, what, " must be f32, got ", dtype_name(t.dtype));
    const bool scalar_ok = i == 2 && t.rank() == 0;
    if (!scalar_ok && (t.rank() != 1 || (t.shape[0].is_static() && n.is_static() && t.shape[0].size() != n.size())))
      return fail(ErrorCode::shape_error, op, sig, what, " must be [N] = [", n.to_string(), "]", i == 2 ? " or []" : "",
                  ", got ", t.to_string());
    return Status::ok();
  };
  RLX_TRY(per_row(2, "w_scale"));
  (void)ws;
  if (sig.inputs.size() == 4) RLX_TRY(per_row(3, "bias"));
  if (sig.attrs.has("x_scale")) {
    const double s = sig.attrs.f("x_scale");
    if (!(s > 0) || !std::isfinite(s)) return fail(ErrorCode::verify_error, op, sig, "x_scale must be positive and finite, got ", s);
  }
  Shape s = x.shape;
  s.back() = n;
  return Types{TensorType{DType::f32, s}};
}

// fake_quantize: x float, scale and zero_point of x's dtype, [] (or [1]) per tensor, [C] per
// channel along `axis`; the integer range [qmin, qmax] must hold at least two values.
Expected<Types> infer_fake_quantize(Op op, const NodeSig& sig) {
  RLX_TRY(expect_float(op, sig, 0));
  const TensorType& x = sig.inputs[0];
  const int64_t qmin = sig.attrs.has("qmin") ? sig.attrs.i("qmin") : -128;
  const int64_t qmax = sig.attrs.has("qmax") ? sig.attrs.i("qmax") : 127;
  if (qmin >= qmax || qmin < -(int64_t{1} << 24) || qmax > (int64_t{1} << 24))
    return fail(ErrorCode::verify_error, op, sig, "needs qmin < qmax within +-2^24 (exact in f32), got [", qmin, ", ", qmax, "]");
  const bool per_channel = sig.attrs.has("axis");
  int64_t axis = per_channel ? sig.attrs.i("axis") : 0;
  if (per_channel) {
    if (axis < 0) axis += x.rank();
    if (axis < 0 || axis >= x.rank())
      return fail(ErrorCode::verify_error, op, sig, "axis ", sig.attrs.i("axis"), " is out of range for ", x.to_string());
  }
  for (int i : {1, 2}) {
    const char* what = i == 1 ? "scale" : "zero_point";
    const TensorType& t = sig.inputs[i];
    if (t.dtype != x.dtype)
      return fail(ErrorCode::dtype_error, op, sig, what, " must have x's dtype ", dtype_name(x.dtype), ", got ", dtype_name(t.dtype));
    if (per_channel) {
      const Dim& c = x.shape[static_cast<size_t>(axis)];
      if (t.rank() != 1 || (t.shape[0].is_static() && c.is_static() && t.shape[0].size() != c.size()))
        return fail(ErrorCode::shape_error, op, sig, what, " must be [", c.to_string(), "] (x's axis ", axis, "), got ",
                    t.to_string());
    } else if (!(t.rank() == 0 || (t.rank() == 1 && t.shape[0].is_static() && t.shape[0].size() == 1))) {
      return fail(ErrorCode::shape_error, op, sig, what, " must be [] or [1] per tensor (give axis for per channel), got ",
                  t.to_string());
    }
  }
  return Types{x};
}

Expected<Types> infer_quant(Op op, const NodeSig& sig) {
  if (op == Op::Int8MatMul) return infer_int8_matmul(op, sig);
  if (op == Op::FakeQuantize) return infer_fake_quantize(op, sig);
  const std::string fmt = sig.attrs.s("format");
  auto qf = quant_format(fmt);
  if (!qf) return fail(ErrorCode::verify_error, op, sig, "unknown quantization format '", fmt, "'");
  const int wi = op == Op::Dequantize ? 0 : 1;
  const TensorType& w = sig.inputs[wi];
  if (w.dtype != DType::u8) return fail(ErrorCode::dtype_error, op, sig, "quantized blocks must be u8, got ", dtype_name(w.dtype));
  if (w.rank() < 1) return fail(ErrorCode::shape_error, op, sig, "quantized blocks need rank >= 1");
  auto row_bytes = [&](int64_t cols) -> Expected<int64_t> {
    if (cols <= 0 || cols % qf->block_elems != 0)
      return fail(ErrorCode::shape_error, op, sig, fmt, " rows hold multiples of ", qf->block_elems, " values, got ", cols);
    return cols / qf->block_elems * qf->block_bytes;
  };
  const Dim& last = w.shape.back();
  if (op == Op::Dequantize) {
    const int64_t cols = sig.attrs.i("cols");
    RLX_ASSIGN_OR_RETURN(int64_t rb, row_bytes(cols));
    if (last.is_static() && last.size() != rb)
      return fail(ErrorCode::shape_error, op, sig, "rows of ", cols, " ", fmt, " values take ", rb, " bytes, got ",
                  last.size());
    Shape s = w.shape;
    s.back() = Dim(cols);
    return Types{TensorType{DType::f32, s}};
  }
  const TensorType& x = sig.inputs[0];
  RLX_TRY(expect_float(op, sig, 0));
  if (x.rank() < 1 || w.rank() != 2)
    return fail(ErrorCode::shape_error, op, sig, "x must be [..., K] and w [N, row_bytes]");
  const Dim& k = x.shape.back();
  if (k.is_static()) {
    RLX_ASSIGN_OR_RETURN(int64_t rb, row_bytes(k.size()));
    if (last.is_static() && last.size() != rb)
      return fail(ErrorCode::shape_error, op, sig, "K = ", k.size(), " ", fmt, " values take ", rb,
                  " bytes per row, w has ", last.size());
  }
  Shape s = x.shape;
  s.back() = w.shape[0];
  return Types{TensorType{x.dtype, s}};
}

}  // namespace infer
}  // namespace rlx
