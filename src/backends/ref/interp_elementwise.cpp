// Reference kernels of the elementwise primitives: unary, binary (with numpy broadcasting),
// compare, logical, where and cast. Semantics are documented in interpreter.h.
#include <cmath>
#include <limits>

#include "backends/ref/interp_internal.h"
#include "rlx/unary_math.h"

namespace rlx::ref::detail {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct UnaryParams {
  bool detect_pos = true;
  bool detect_neg = true;
};

double unary_f(Op op, double x, const UnaryParams& p) {
  if (const UnaryMathOp* row = unary_math(op)) return row->reference(x);  // rlx/unary_math.h
  switch (op) {
    case Op::Neg: return -x;
    case Op::Abs: return std::fabs(x);
    case Op::Sign: return std::isnan(x) ? x : (x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0));
    case Op::IsNan: return std::isnan(x) ? 1.0 : 0.0;
    case Op::IsInf:
      return std::isinf(x) && ((x > 0 && p.detect_pos) || (x < 0 && p.detect_neg)) ? 1.0 : 0.0;
    default: return kNaN;
  }
}

bool is_float_only_unary(Op op) {
  switch (op) {
    case Op::Neg:
    case Op::Abs:
    case Op::Sign:
    case Op::Not: return false;
    default: return true;
  }
}

Status run_unary(const KernelArgs& k) {
  const Op op = k.node.op;
  const Tensor& x = *k.in[0];
  Tensor& o = k.out[0];
  const uint8_t* xp = x.bytes();
  uint8_t* p = o.bytes();
  const DType xt = x.dtype(), ot = o.dtype();
  const int64_t n = o.numel();
  if (op == Op::Not) {
    if (xt != DType::boolean) {  // bitwise on integers: the stored width keeps the low bits
      for (int64_t i = 0; i < n; ++i) store_bits(p, ot, i, ~load_bits(xp, xt, i));
      return Status::ok();
    }
    for (int64_t i = 0; i < n; ++i) store_bits(p, ot, i, load_bits(xp, xt, i) != 0 ? 0 : 1);
    return Status::ok();
  }
  UnaryParams params;
  params.detect_pos = k.node.attrs.i("detect_positive", 1) != 0;
  params.detect_neg = k.node.attrs.i("detect_negative", 1) != 0;
  switch (domain(xt)) {
    case Dom::f:
      for (int64_t i = 0; i < n; ++i) store_f(p, ot, i, unary_f(op, load_f(xp, xt, i), params));
      return Status::ok();
    case Dom::c:
      for (int64_t i = 0; i < n; ++i) {
        const cplx z = load_c(xp, xt, i);
        switch (op) {
          case Op::Neg: store_c(p, ot, i, -z); break;
          case Op::Conj: store_c(p, ot, i, std::conj(z)); break;
          case Op::Real: store_f(p, ot, i, z.real()); break;
          case Op::Imag: store_f(p, ot, i, z.imag()); break;
          case Op::Abs: store_f(p, ot, i, std::abs(z)); break;   // hypot: no overflow of re^2 + im^2
          case Op::Angle: store_f(p, ot, i, std::arg(z)); break;  // atan2(im, re)
          default: return unsupported_dtype(k, xt);
        }
      }
      return Status::ok();
    case Dom::i:
    case Dom::u: {
      if (is_float_only_unary(op)) return unsupported_dtype(k, xt);
      const bool sgn = domain(xt) == Dom::i;
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t v = load_bits(xp, xt, i);
        const int64_t s = static_cast<int64_t>(v);
        uint64_t r = 0;
        switch (op) {
          case Op::Neg: r = uint64_t{0} - v; break;
          case Op::Abs: r = (sgn && s < 0) ? uint64_t{0} - v : v; break;
          case Op::Sign:
            r = sgn ? static_cast<uint64_t>(static_cast<int64_t>((s > 0) - (s < 0))) : (v != 0 ? 1 : 0);
            break;
          default: break;
        }
        store_bits(p, ot, i, r);
      }
      return Status::ok();
    }
  }
  return Status::ok();
}

// ---- binary arithmetic ----

double max_f(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  if (a > b) return a;
  if (b > a) return b;
  return std::signbit(a) ? b : a;  // max(-0, +0) = +0
}
double min_f(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  if (a < b) return a;
  if (b < a) return b;
  return std::signbit(a) ? a : b;  // min(-0, +0) = -0
}

double binary_f(Op op, double a, double b, bool c_fmod) {
  switch (op) {
    case Op::Add: return a + b;
    case Op::Sub: return a - b;
    case Op::Mul: return a * b;
    case Op::Div: return a / b;
    case Op::Pow: return std::pow(a, b);
    case Op::Max: return max_f(a, b);
    case Op::Min: return min_f(a, b);
    case Op::Mod: {
      double r = std::fmod(a, b);
      if (c_fmod) return r;
      if (r != 0) {
        if ((r < 0) != (b < 0)) r += b;
      } else {
        r = std::copysign(0.0, b);  // Python: a zero remainder takes the divisor's sign
      }
      return r;
    }
    default: return kNaN;
  }
}

uint64_t pow_bits(uint64_t base, uint64_t e) {
  uint64_t r = 1;
  while (e) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return r;
}

uint64_t binary_i(Op op, uint64_t ua, uint64_t ub, bool c_fmod) {
  const int64_t a = static_cast<int64_t>(ua), b = static_cast<int64_t>(ub);
  switch (op) {
    case Op::Add: return ua + ub;
    case Op::Sub: return ua - ub;
    case Op::Mul: return ua * ub;
    case Op::Div:
      if (b == 0) return 0;
      if (b == -1) return uint64_t{0} - ua;  // avoids INT64_MIN / -1; wraps
      return static_cast<uint64_t>(a / b);
    case Op::Mod: {
      if (b == 0 || b == -1) return 0;
      int64_t r = a % b;
      if (!c_fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
      return static_cast<uint64_t>(r);
    }
    case Op::Pow:
      if (b < 0) {
        if (a == 1) return 1;
        if (a == -1) return (b & 1) ? ~uint64_t{0} : 1;
        return 0;
      }
      return pow_bits(ua, ub);
    case Op::Max: return a >= b ? ua : ub;
    case Op::Min: return a <= b ? ua : ub;
    default: return 0;
  }
}

uint64_t binary_u(Op op, uint64_t a, uint64_t b) {
  switch (op) {
    case Op::Add: return a + b;
    case Op::Sub: return a - b;
    case Op::Mul: return a * b;
    case Op::Div: return b == 0 ? 0 : a / b;
    case Op::Mod: return b == 0 ? 0 : a % b;
    case Op::Pow: return pow_bits(a, b);
    case Op::Max: return a >= b ? a : b;
    case Op::Min: return a <= b ? a : b;
    default: return 0;
  }
}

bool compare_f(Op op, double a, double b) {
  switch (op) {
    case Op::Equal: return a == b;
    case Op::NotEqual: return a != b;
    case Op::Less: return a < b;
    case Op::LessEqual: return a <= b;
    case Op::Greater: return a > b;
    case Op::GreaterEqual: return a >= b;
    default: return false;
  }
}

template <class T>
bool compare_int(Op op, T a, T b) {
  switch (op) {
    case Op::Equal: return a == b;
    case Op::NotEqual: return a != b;
    case Op::Less: return a < b;
    case Op::LessEqual: return a <= b;
    case Op::Greater: return a > b;
    case Op::GreaterEqual: return a >= b;
    default: return false;
  }
}

// Calls f(out_index, offset_a, offset_b) over the broadcast output.
template <class F>
void binary_loop(const KernelArgs& k, F&& f) {
  const Sizes& os = k.out[0].sizes();
  const Sizes sa = broadcast_strides(k.in[0]->sizes(), os);
  const Sizes sb = broadcast_strides(k.in[1]->sizes(), os);
  for_each_strided<2>(os, {sa.data(), sb.data()}, {0, 0},
                      [&](int64_t i, const std::array<int64_t, 2>& off) { f(i, off[0], off[1]); });
}

Status run_binary(const KernelArgs& k) {
  const Op op = k.node.op;
  const DType at = k.in[0]->dtype(), ot = k.out[0].dtype();
  const uint8_t* ap = k.in[0]->bytes();
  const uint8_t* bp = k.in[1]->bytes();
  uint8_t* p = k.out[0].bytes();
  const bool c_fmod = k.node.attrs.i("fmod", 0) != 0;
  if (op == Op::Complex) {  // f32 parts -> c64
    binary_loop(k, [&](int64_t i, int64_t ia, int64_t ib) {
      store_c(p, ot, i, cplx(load_f(ap, at, ia), load_f(bp, k.in[1]->dtype(), ib)));
    });
    return Status::ok();
  }
  switch (domain(at)) {
    case Dom::f:
      binary_loop(k, [&](int64_t i, int64_t ia, int64_t ib) {
        store_f(p, ot, i, binary_f(op, load_f(ap, at, ia), load_f(bp, at, ib), c_fmod));
      });
      return Status::ok();
    case Dom::i:
      binary_loop(k, [&](int64_t i, int64_t ia, int64_t ib) {
        store_bits(p, ot, i, binary_i(op, load_bits(ap, at, ia), load_bits(bp, at, ib), c_fmod));
      });
      return Status::ok();
    case Dom::u:
      binary_loop(k, [&](int64_t i, int64_t ia, int64_t ib) {
        store_bits(p, ot, i, binary_u(op, load_bits(ap, at, ia), load_bits(bp, at, ib)));
      });
      return Status::ok();
    case Dom::c:
      if (op != Op::Add && op != Op::Sub && op != Op::Mul && op != Op::Div) return unsupported_dtype(k, at);
      binary_loop(k, [&](int64_t i, int64_t ia, int64_t ib) {
        const cplx a = load_c(ap, at, ia), b = load_c(bp, at, ib);
        cplx r = op == Op::Add ? a + b : op == Op::Sub ? a - b : op == Op::Mul ? a * b : a / b;
        store_c(p, ot, i, r);
      });
      return Status::ok();
  }
  return Status::ok();
}

Status run_compare(const KernelArgs& k) {
  const Op op = k.node.op;
  const DType at = k.in[0]->dtype();
  const uint8_t* ap = k.in[0]->bytes();
  const uint8_t* bp = k.in[1]->bytes();
  uint8_t* p = k.out[0].bytes();
  switch (domain(at)) {
    case Dom::f:
      binary_loop(k, [&](int64_t i, int64_t ia, int64_t ib) {
        p[i] = compare_f(op, load_f(ap, at, ia), load_f(bp, at, ib)) ? 1 : 0;
      });
      return Status::ok();
    case Dom::i:
      binary_loop(k, [&](int64_t i, int64_t ia, int64_t ib) {
        p[i] = compare_int<int64_t>(op, static_cast<int64_t>(load_bits(ap, at, ia)),
                                    static_cast<int64_t>(load_bits(bp, at, ib)))
                   ? 1 : 0;
      });
      return Status::ok();
    case Dom::u:
      binary_loop(k, [&](int64_t i, int64_t ia, int64_t ib) {
        p[i] = compare_int<uint64_t>(op, load_bits(ap, at, ia), load_bits(bp, at, ib)) ? 1 : 0;
      });
      return Status::ok();
    case Dom::c:
      if (op != Op::Equal && op != Op::NotEqual) return unsupported_dtype(k, at);
      binary_loop(k, [&](int64_t i, int64_t ia, int64_t ib) {
        const bool eq = load_c(ap, at, ia) == load_c(bp, at, ib);
        p[i] = (op == Op::Equal) == eq ? 1 : 0;
      });
      return Status::ok();
  }
  return Status::ok();
}

Status run_logical(const KernelArgs& k) {
  const Op op = k.node.op;
  const DType at = k.in[0]->dtype(), bt = k.in[1]->dtype();
  const uint8_t* ap = k.in[0]->bytes();
  const uint8_t* bp = k.in[1]->bytes();
  uint8_t* p = k.out[0].bytes();
  const DType ot = k.out[0].dtype();
  if (ot != DType::boolean) {  // bitwise on integers
    binary_loop(k, [&](int64_t i, int64_t ia, int64_t ib) {
      const uint64_t a = load_bits(ap, at, ia), b = load_bits(bp, bt, ib);
      store_bits(p, ot, i, op == Op::And ? (a & b) : op == Op::Or ? (a | b) : (a ^ b));
    });
    return Status::ok();
  }
  binary_loop(k, [&](int64_t i, int64_t ia, int64_t ib) {
    const bool a = load_bits(ap, at, ia) != 0, b = load_bits(bp, bt, ib) != 0;
    p[i] = (op == Op::And ? (a && b) : op == Op::Or ? (a || b) : (a != b)) ? 1 : 0;
  });
  return Status::ok();
}

Status run_where(const KernelArgs& k) {
  const Sizes& os = k.out[0].sizes();
  const Sizes sc = broadcast_strides(k.in[0]->sizes(), os);
  const Sizes sa = broadcast_strides(k.in[1]->sizes(), os);
  const Sizes sb = broadcast_strides(k.in[2]->sizes(), os);
  const uint8_t* cp = k.in[0]->bytes();
  const uint8_t* ap = k.in[1]->bytes();
  const uint8_t* bp = k.in[2]->bytes();
  const DType ct = k.in[0]->dtype();
  uint8_t* p = k.out[0].bytes();
  const ElemCopy copy(k.out[0].dtype());
  for_each_strided<3>(os, {sc.data(), sa.data(), sb.data()}, {0, 0, 0},
                      [&](int64_t i, const std::array<int64_t, 3>& off) {
                        if (load_bits(cp, ct, off[0]) != 0) {
                          copy(p, i, ap, off[1]);
                        } else {
                          copy(p, i, bp, off[2]);
                        }
                      });
  return Status::ok();
}

Status run_cast(const KernelArgs& k) {
  const Tensor& x = *k.in[0];
  Tensor& o = k.out[0];
  const uint8_t* xp = x.bytes();
  uint8_t* p = o.bytes();
  const DType xt = x.dtype(), ot = o.dtype();
  const int64_t n = o.numel();
  if (xt == ot) {
    ElemCopy(xt).run(p, 0, xp, 0, n);
    return Status::ok();
  }
  const bool to_float = is_float(ot) || is_complex(ot);
  switch (domain(xt)) {
    case Dom::c:
      for (int64_t i = 0; i < n; ++i) store_c(p, ot, i, load_c(xp, xt, i));
      return Status::ok();
    case Dom::f:
      for (int64_t i = 0; i < n; ++i) store_f(p, ot, i, load_f(xp, xt, i));
      return Status::ok();
    case Dom::i:
    case Dom::u: {
      const bool sgn = domain(xt) == Dom::i;
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t v = load_bits(xp, xt, i);
        if (to_float) {
          store_int_as_float(p, ot, i, v, sgn);
        } else {
          store_bits(p, ot, i, v);  // wraps; bool is v != 0
        }
      }
      return Status::ok();
    }
  }
  return Status::ok();
}

}  // namespace

Status run_elementwise(const KernelArgs& k) {
  switch (op_info(k.node.op).family) {
    case OpFamily::unary: return run_unary(k);
    case OpFamily::binary: return run_binary(k);
    case OpFamily::compare: return run_compare(k);
    case OpFamily::logical: return run_logical(k);
    case OpFamily::ternary: return run_where(k);
    case OpFamily::cast: return run_cast(k);
    default: break;
  }
  return error(ErrorCode::internal, k.label, ": not an elementwise op");
}

}  // namespace rlx::ref::detail
