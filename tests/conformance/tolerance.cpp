// Per-op, per-dtype tolerances, and the comparison of a device's output with the reference.
//
// An element passes when |got - want| <= atol + rtol * |want|, NaN matches only NaN and an
// infinity only the same infinity. rtol is a few units in the last place of the output dtype
// (the reference computes in f64 and rounds once; a device may round intermediates in the
// dtype it computes in). Reductions and contractions grow the absolute part with the number
// of terms k and the typical size of a term (`magnitude`), see tolerance_for.
// Integer and bool outputs, and ops whose result is exact, compare exactly; data movement
// compares bit patterns.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "conformance.h"

namespace rlx::conformance {
namespace {

// Relative precision of one rounding to the dtype, with the slack a device computing in f32
// (for f16/bf16) or with a different libm needs: a few ulps (f32's 1e-5 is the usual choice).
double ulp2(DType dt) {
  switch (dt) {
    case DType::f64: return 1e-12;  // f64 devices may use different libm / summation order
    case DType::f32:
    case DType::c64: return 1e-5;
    case DType::f16: return 2e-3;
    case DType::bf16: return 1.6e-2;
    default: return 0;
  }
}

// 2^-p for p mantissa bits (c64 as f32).
double unit_roundoff(DType dt) {
  switch (dt) {
    case DType::f64: return 1.1e-16;
    case DType::f32:
    case DType::c64: return 6e-8;
    case DType::f16: return 4.9e-4;
    case DType::bf16: return 3.9e-3;
    default: return 0;
  }
}

double absolute_floor(DType dt) {
  switch (dt) {
    case DType::f64: return 1e-12;
    case DType::f32:
    case DType::c64: return 1e-6;
    case DType::f16: return 1e-3;
    case DType::bf16: return 8e-3;
    default: return 0;
  }
}

uint64_t bits_of(const Tensor& t, int64_t i) {
  const int b = dtype_bits(t.dtype());
  if (b < 8) return static_cast<uint64_t>(static_cast<int64_t>(t.get_f64(i)));
  uint64_t v = 0;
  std::memcpy(&v, t.bytes() + i * (b / 8), static_cast<size_t>(b / 8));
  return v;
}

std::string fmt(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

}  // namespace

Tolerance base_tolerance(const OpCases& oc, const Variant& v, DType out);

std::string Tolerance::to_string() const {
  if (bits) return "bit-exact";
  if (exact) return "exact";
  std::ostringstream os;
  os << "rtol " << rtol << " atol " << atol;
  return os.str();
}

Tolerance tolerance_for(const OpCases& oc, const Variant& v, DType out) {
  Tolerance t = base_tolerance(oc, v, out);
  if (v.rounding > 0 && !t.bits && !t.exact) {
    t.rtol = std::max(t.rtol, v.rounding);
    t.atol = std::max(t.atol, v.rounding * v.magnitude);
  }
  // RLX_CONFORMANCE_TOL_SCALE=0.25 tightens every tolerance 4x: how to see how much margin
  // the tolerances leave (run a few seeds; what fails is within 4x of its bound)
  if (const char* e = std::getenv("RLX_CONFORMANCE_TOL_SCALE")) {
    const double k = std::atof(e);
    t.rtol *= k;
    t.atol *= k;
  }
  return t;
}

Tolerance base_tolerance(const OpCases& oc, const Variant& v, DType out) {
  Tolerance t;
  if (oc.tol == TolClass::bits) {
    t.bits = true;
    return t;
  }
  if (!is_float(out) && !is_complex(out)) {
    t.exact = true;  // integers and bool are exact, whatever the op
    return t;
  }
  const double u = ulp2(out), a = absolute_floor(out);
  const double k = static_cast<double>(std::max<int64_t>(1, v.reduce_len));
  const double m = v.magnitude;
  switch (oc.tol) {
    case TolClass::bits: break;
    case TolClass::exact: t.exact = true; break;
    case TolClass::arith:
      t.rtol = u;
      t.atol = a * m;
      break;
    case TolClass::transcendental:
      t.rtol = out == DType::f32 ? 2e-6 * 2 : u;  // the f32 polynomials are within ~2 ulp
      if (out == DType::f64) t.rtol = 1e-13 * 10;
      // The shader preludes' pow is exp(t), t = y log|x| rounded to f32: a relative error of
      // |t| 2^-24 on top of exp's. Special inputs reach results near FLT_MAX (|t| up to 88.7;
      // directx once missed 4e-6 by 4% on 6.4e35, t = 82), the others stay below e^7.
      if (oc.op == Op::Pow && out == DType::f32 &&
          std::any_of(v.inputs.begin(), v.inputs.end(), [](const InputSpec& s) { return s.dist == Dist::specials; }))
        t.rtol = std::max(t.rtol, 2e-6 + 89 * std::ldexp(1.0, -24));
      t.atol = a * m;
      break;
    case TolClass::random:
      t.rtol = u / 2;  // one rounding of the same f64 value
      t.atol = out == DType::f64 ? 1e-15 : a / 10;
      break;
    case TolClass::reduce:
    case TolClass::contraction: {
      // Two sources of difference, both on the scale of the sum (about 4 sqrt(k) m for terms
      // of size m): the accumulation (k roundings in the dtype the device accumulates in,
      // f32 for f16/bf16) and roundings of intermediates to the storage dtype (a device or
      // ref may round a matmul's output before adding a bias, as conv2d's rewrite does).
      const double acc = out == DType::f64 ? unit_roundoff(DType::f64) : unit_roundoff(DType::f32);
      t.rtol = u;
      t.atol = m * (16 * acc * k * 1.34 + 12 * unit_roundoff(out) * 4 * std::sqrt(k));
      break;
    }
    case TolClass::composite:
      // several float ops; ref rounds every intermediate to the dtype (an f16 gelu is a chain
      // of f16 ops there), a fusing device keeps them in f32: a few ulps of the intermediates
      t.rtol = u * 2;
      t.atol = a * m * 3 * std::max(1.0, std::sqrt(k));
      break;
  }
  return t;
}

std::string compare_outputs(const Tensor& got, const Tensor& want, const Tolerance& tol) {
  if (got.dtype() != want.dtype() || got.sizes() != want.sizes())
    return cat("output is ", got.type().to_string(), " but the reference is ", want.type().to_string());
  const int64_t n = want.numel();
  const bool cplx = is_complex(want.dtype());
  int64_t bad = 0, first = -1;
  double max_abs = 0, max_rel = 0;
  std::string first_msg;
  auto check = [&](int64_t i, double g, double w, const char* part) {
    bool ok;
    if (std::isnan(w)) {
      ok = std::isnan(g);
    } else if (std::isinf(w)) {
      ok = g == w;
    } else if (!std::isfinite(g)) {
      ok = false;
    } else {
      const double d = std::fabs(g - w);
      max_abs = std::max(max_abs, d);
      if (w != 0) max_rel = std::max(max_rel, d / std::fabs(w));
      ok = tol.exact ? d == 0 : d <= tol.atol + tol.rtol * std::fabs(w);
    }
    if (!ok) {
      ++bad;
      if (first < 0) {
        first = i;
        first_msg = cat("first mismatch at flat index ", i, part, ": got ", fmt(g), ", want ", fmt(w));
      }
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    if (tol.bits) {
      uint64_t g = bits_of(got, i), w = bits_of(want, i);
      if (g != w) {
        ++bad;
        if (first < 0) {
          first = i;
          std::ostringstream os;
          os << "first mismatch at flat index " << i << ": got " << fmt(got.get_f64(i)) << " (bits 0x" << std::hex << g
             << "), want " << fmt(want.get_f64(i)) << " (bits 0x" << w << ")";
          first_msg = os.str();
        }
      }
      if (cplx && got.get_imag(i) != want.get_imag(i) && !(std::isnan(got.get_imag(i)) && std::isnan(want.get_imag(i))))
        ++bad;
      continue;
    }
    if (!is_float(want.dtype()) && !cplx) {
      // integers and bool: exact on the stored bits (values beyond 2^53 included)
      uint64_t g = bits_of(got, i), w = bits_of(want, i);
      if (g != w) {
        ++bad;
        max_abs = std::max(max_abs, std::fabs(got.get_f64(i) - want.get_f64(i)));
        if (first < 0) {
          first = i;
          first_msg = cat("first mismatch at flat index ", i, ": got ", fmt(got.get_f64(i)), ", want ", fmt(want.get_f64(i)));
          if (got.get_f64(i) == want.get_f64(i) || want.dtype() == DType::boolean || want.dtype() == DType::u64 ||
              want.dtype() == DType::i64) {
            std::ostringstream os;
            os << " (stored bits 0x" << std::hex << g << " vs 0x" << w << ")";
            first_msg += os.str();
          }
        }
      }
      continue;
    }
    check(i, got.get_f64(i), want.get_f64(i), "");
    if (cplx) check(i, got.get_imag(i), want.get_imag(i), " (imaginary part)");
  }
  if (bad == 0) return "";
  std::ostringstream os;
  os << bad << " of " << n << " elements differ (" << tol.to_string() << "; max abs err " << fmt(max_abs)
     << ", max rel err " << fmt(max_rel) << "); " << first_msg;
  return os.str();
}

}  // namespace rlx::conformance
