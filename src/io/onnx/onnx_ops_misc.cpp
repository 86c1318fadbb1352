// ONNX losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and linear quantization
// (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger), in primitives.
#include <algorithm>
#include <cmath>

#include "onnx_internal.h"
#include "rlx/checked.h"

namespace rlx::onnx_import {
namespace {

// NLL over log-probabilities `lp` [N, C, d...] and integer targets [N, d...].
Status nll(Importer& m, ValueId lp, ValueId target, ValueId weight, int out_index) {
  OpBuilder& o = m.o();
  if (!o.ok()) return o.status().with_context(m.where());
  int r = o.rank(lp);
  if (r < 2) return m.fail(ErrorCode::shape_error, "input must have rank >= 2");
  const Dim& c = o.shape(lp)[1];
  if (!c.is_static()) return m.fail(ErrorCode::unsupported, "the class dim must be static");
  if (c.size() > (int64_t{1} << 24)) return m.fail(ErrorCode::unsupported, "too many classes");
  std::string red = m.as("reduction", "mean");
  if (red != "mean" && red != "sum" && red != "none") return m.fail(ErrorCode::format_error, "reduction '", red, "'");
  ValueId t = o.cast(target, DType::i64);
  ValueId ign = kNoValue;
  if (m.has_attr("ignore_index")) {
    ign = o.binary(Op::Equal, t, o.scalar(static_cast<double>(m.ai("ignore_index", 0)), DType::i64));
    t = o.where(ign, o.scalar(0, DType::i64), t);
  }
  std::vector<int64_t> rs(r, 1);
  rs[1] = c.size();
  Tensor seq = Tensor::zeros(DType::i64, {c.size()});
  for (int64_t i = 0; i < c.size(); ++i) seq.data<int64_t>()[i] = i;
  ValueId tu = o.op(Op::Unsqueeze, {t}, Attrs{{"axes", std::vector<int64_t>{1}}});
  ValueId hot = o.binary(Op::Equal, tu, o.reshape(m.c(seq), rs));
  ValueId picked = o.reduce_sum(o.where(hot, lp, o.scalar_like(0, lp)), {1}, false);
  ValueId w = kNoValue;
  if (weight != kNoValue) w = o.gather(weight, t, 0);
  if (ign != kNoValue) {
    ValueId base = w != kNoValue ? w : o.scalar_like(1, lp);
    w = o.where(ign, o.scalar_like(0, lp), base);
  }
  ValueId loss = o.neg(picked);
  if (w != kNoValue) loss = o.mul(loss, w);
  if (red == "none") return m.out(out_index, loss);
  ValueId sum = o.reduce_sum(loss, {}, false);
  if (red == "sum") return m.out(out_index, sum);
  if (w == kNoValue) return m.out(out_index, o.reduce_mean(loss, {}, false));
  if (!o.ok()) return o.status().with_context(m.where());
  auto ws = static_sizes(o.shape(loss));
  if (!ws) return m.fail(ErrorCode::unsupported, "needs static shapes");
  ValueId wsum = o.reduce_sum(o.broadcast_to(w, *ws), {}, false);
  return m.out(out_index, o.div(sum, wsum));
}

Status map_nll(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId t, m.in(1));
  ValueId w = kNoValue;
  if (m.has(2)) { RLX_ASSIGN_OR_RETURN(w, m.in(2)); }
  return nll(m, x, t, w, 0);
}

Status map_sce(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId t, m.in(1));
  ValueId w = kNoValue;
  if (m.has(2)) { RLX_ASSIGN_OR_RETURN(w, m.in(2)); }
  ValueId lp = m.o().log_softmax(x, 1);
  RLX_TRY(nll(m, lp, t, w, 0));
  if (m.wants(1)) RLX_TRY(m.out(1, lp));
  return Status::ok();
}

// A scale or zero point made to broadcast against x: a scalar as is, a [C] vector along `axis`
// of x, or (opset 21, block_size > 0) a tensor of x's rank whose `axis` holds ceil(n / block)
// entries, each repeated over its block of x. A bad axis or shape is an error.
ValueId along(Importer& m, ValueId p, ValueId x, int64_t axis_attr, int64_t block = 0) {
  OpBuilder& o = m.o();
  if (!o.ok() || p == kNoValue || x == kNoValue) return kNoValue;
  if (block < 0) return o.fail(m.fail(ErrorCode::invalid_argument, "block_size ", block, " is negative"));
  if ((o.rank(p) == 0 && block == 0) || o.rank(x) == 0) return p;
  int r = o.rank(x);
  auto axis = axis_of(m, axis_attr, r);
  if (!axis) return o.fail(axis.status());
  if (block == 0) {
    std::vector<int64_t> s(r, 1);
    s[*axis] = -1;
    return o.reshape(p, s);
  }
  auto xs = static_sizes(o.shape(x));
  auto ps = static_sizes(o.shape(p));
  if (!xs || !ps) return o.fail(m.fail(ErrorCode::unsupported, "blocked quantization needs static shapes"));
  const int64_t n = (*xs)[*axis];
  if (block > n) block = std::max<int64_t>(n, 1);  // one block covers the axis either way
  const int64_t nb = (n + block - 1) / block;
  Sizes want = *xs;
  want[*axis] = nb;
  if (*ps != want)
    return o.fail(m.fail(ErrorCode::shape_error, "a blocked scale or zero point of x ", sizes_to_string(*xs),
                         " with block_size ", block, " on axis ", *axis, " must be ", sizes_to_string(want), ", got ",
                         sizes_to_string(*ps)));
  std::vector<int64_t> with_block(ps->begin(), ps->end()), rep(ps->begin(), ps->end()), merged(ps->begin(), ps->end());
  with_block.insert(with_block.begin() + *axis + 1, 1);
  rep.insert(rep.begin() + *axis + 1, block);
  merged[*axis] = nb * block;
  ValueId v = o.reshape(o.broadcast_to(o.reshape(p, with_block), Sizes(rep.begin(), rep.end())), merged);
  if (nb * block != n) v = o.slice(v, {0}, {n}, {*axis});
  return v;
}

// Saturating conversion of rounded values to an integer type (4-bit ones included).
ValueId saturate_cast(OpBuilder& o, ValueId v, DType dt) {
  double lo = 0, hi = 0;
  switch (dt) {
    case DType::u8: hi = 255; break;
    case DType::i8: lo = -128, hi = 127; break;
    case DType::u16: hi = 65535; break;
    case DType::i16: lo = -32768, hi = 32767; break;
    case DType::i32: lo = -2147483648.0, hi = 2147483647.0; break;
    default: break;
  }
  return o.cast(o.min(o.max(v, o.scalar_like(lo, v)), o.scalar_like(hi, v)), dt);
}

// The ONNX element type an attribute names, as an rlx dtype (0: none given).
Expected<std::optional<DType>> dtype_attr(Importer& m, const char* name) {
  const int64_t t = m.ai(name, 0);
  if (t == 0) return std::optional<DType>{};
  auto dt = dtype_from_onnx(static_cast<int32_t>(t));
  if (!dt) return m.fail(ErrorCode::unsupported, name, " ", onnx_dtype_name(static_cast<int32_t>(t)), " is not supported");
  return std::optional<DType>{*dt};
}

Status map_quantize(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId scale, m.in(1));
  OpBuilder& o = m.o();
  (void)m.ai("saturate", 1);  // opset 19: applies to float8 outputs only, which rlx refuses below
  RLX_ASSIGN_OR_RETURN(auto out_attr, dtype_attr(m, "output_dtype"));
  RLX_ASSIGN_OR_RETURN(auto precision, dtype_attr(m, "precision"));
  if (precision && *precision != DType::f32)  // opset 23: rlx divides in f32
    return m.fail(ErrorCode::unsupported, "precision ", dtype_name(*precision), " (rlx computes x / scale in f32)");
  DType out = out_attr.value_or(DType::u8);
  ValueId zp = kNoValue;
  if (m.has(2)) {
    RLX_ASSIGN_OR_RETURN(zp, m.in(2));
    if (out_attr && *out_attr != o.dtype(zp))
      return m.fail(ErrorCode::dtype_error, "output_dtype ", dtype_name(*out_attr), " differs from the zero point's ",
                    dtype_name(o.dtype(zp)));
    out = o.dtype(zp);
  }
  // 4-bit results would need a packing op; rlx's packed types are storage for weights only
  if (out != DType::u8 && out != DType::i8 && out != DType::u16 && out != DType::i16)
    return m.fail(ErrorCode::unsupported, "output type ", dtype_name(out));
  const int64_t axis = m.ai("axis", 1), block = m.ai("block_size", 0);
  ValueId xf = o.cast(x, DType::f32);
  ValueId v = o.op(Op::Round, {o.div(xf, along(m, o.cast(scale, DType::f32), x, axis, block))});
  if (zp != kNoValue) v = o.add(v, along(m, o.cast(zp, DType::f32), x, axis, block));
  return m.out(0, saturate_cast(o, v, out));
}

// Input i as a graph value, with 4-bit constants (opset 21's INT4/UINT4 weights) widened to
// 8 bits at import: rlx's packed types are storage that only its quantized matmuls read.
Expected<ValueId> unpacked_in(Importer& m, int i) {
  if (!is_packed(m.type(i).dtype)) return m.in(i);
  if (!m.is_konst(i))
    return m.fail(ErrorCode::unsupported, "input ", i, " is ", dtype_name(m.type(i).dtype),
                  " computed at run time (rlx reads 4-bit values from initializers only)");
  RLX_ASSIGN_OR_RETURN(Tensor t, m.konst(i));
  Tensor w = Tensor::zeros(t.dtype() == DType::i4 ? DType::i8 : DType::u8, t.sizes());
  for (int64_t k = 0; k < t.numel(); ++k) w.set_f64(k, t.get_f64(k));
  return m.c(std::move(w));
}

// (x - zero point) * scale in f32, given as the scale's type (or opset 23's output_dtype).
Status map_dequantize(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, unpacked_in(m, 0));
  RLX_ASSIGN_OR_RETURN(ValueId scale, m.in(1));
  OpBuilder& o = m.o();
  const int64_t axis = m.ai("axis", 1), block = m.ai("block_size", 0);
  RLX_ASSIGN_OR_RETURN(auto out_attr, dtype_attr(m, "output_dtype"));
  const DType out = out_attr.value_or(o.dtype(scale));
  ValueId v = o.cast(x, DType::f32);
  if (m.has(2)) {
    RLX_ASSIGN_OR_RETURN(ValueId zp, unpacked_in(m, 2));
    v = o.sub(v, along(m, o.cast(zp, DType::f32), x, axis, block));
  }
  v = o.mul(v, along(m, o.cast(scale, DType::f32), x, axis, block));
  return m.out(0, out == DType::f32 ? v : o.cast(v, out));
}

Status map_dynamic_quantize(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  OpBuilder& o = m.o();
  ValueId zero = o.scalar_like(0, x);
  ValueId mx = o.max(o.reduce_max(x, {}, false), zero);
  ValueId mn = o.min(o.reduce(Op::ReduceMin, x, {}, false), zero);
  ValueId scale = o.div(o.sub(mx, mn), o.scalar_like(255, x));
  ValueId zpf = o.min(o.max(o.op(Op::Round, {o.sub(zero, o.div(mn, scale))}), zero), o.scalar_like(255, x));
  ValueId y = o.add(o.op(Op::Round, {o.div(x, scale)}), zpf);
  RLX_TRY(m.out(0, saturate_cast(o, y, DType::u8)));
  RLX_TRY(m.out(1, scale));
  return m.out(2, o.cast(zpf, DType::u8));
}

Status map_matmul_integer(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId a, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId b, m.in(1));
  OpBuilder& o = m.o();
  ValueId af = o.cast(a, DType::f64), bf = o.cast(b, DType::f64);
  if (m.has(2)) {
    RLX_ASSIGN_OR_RETURN(ValueId az, m.in(2));
    ValueId azf = o.cast(az, DType::f64);
    if (!o.ok()) return o.status().with_context(m.where());
    if (o.rank(azf) == 1) azf = o.reshape(azf, {-1, 1});
    af = o.sub(af, azf);
  }
  if (m.has(3)) {
    RLX_ASSIGN_OR_RETURN(ValueId bz, m.in(3));
    bf = o.sub(bf, o.cast(bz, DType::f64));
  }
  return m.out(0, o.cast(o.matmul(af, bf), DType::i32));
}

// Hann, Hamming and Blackman windows: a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), with N the
// size (periodic) or size - 1 (symmetric); computed at import time.
MapFn window(double a0, double a1, double a2) {
  return [=](Importer& m) -> Status {
    RLX_ASSIGN_OR_RETURN(auto sz, m.ints(0));
    if (sz.size() != 1 || sz[0] < 0 || sz[0] > (int64_t{1} << 24)) return m.fail(ErrorCode::out_of_range, "bad window size");
    auto dt = dtype_from_onnx(static_cast<int32_t>(m.ai("output_datatype", 1)));
    if (!dt) return m.fail(ErrorCode::unsupported, "output_datatype ", m.ai("output_datatype", 1));
    const int64_t n = sz[0];
    const double N = m.ai("periodic", 1) ? static_cast<double>(n) : static_cast<double>(n - 1);
    const double pi = 3.14159265358979323846;
    Tensor t = Tensor::zeros(*dt, {n});
    for (int64_t i = 0; i < n; ++i)
      t.set_f64(i, a0 - a1 * std::cos(2 * pi * i / N) + a2 * std::cos(4 * pi * i / N));
    return m.out_const(0, t);
  };
}

// Einsum with one or two operands: repeated letters in one operand take the diagonal, letters
// in neither the other operand nor the output are summed first, and the rest is one Dot
// (batch letters in both operands and the output, contracted letters in both but not the
// output) followed by a transpose to the output order. "..." becomes fresh letters.
Status map_einsum(Importer& m) {
  OpBuilder& o = m.o();
  std::string eq;
  for (char ch : m.as("equation", "")) if (ch != ' ') eq += ch;
  std::string lhs = eq, out;
  bool explicit_out = false;
  if (size_t a = eq.find("->"); a != std::string::npos) { lhs = eq.substr(0, a); out = eq.substr(a + 2); explicit_out = true; }
  std::vector<std::string> terms;
  for (size_t p = 0;;) {
    size_t c = lhs.find(',', p);
    terms.push_back(lhs.substr(p, c == std::string::npos ? std::string::npos : c - p));
    if (c == std::string::npos) break;
    p = c + 1;
  }
  if (static_cast<int>(terms.size()) != m.num_inputs() || terms.size() > 2)
    return m.fail(ErrorCode::unsupported, "Einsum with ", terms.size(), " operands (rlx imports one or two)");
  std::vector<ValueId> xs;
  std::string ell;  // letters standing for "..."
  for (size_t i = 0; i < terms.size(); ++i) {
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(static_cast<int>(i)));
    xs.push_back(x);
    std::string& t = terms[i];
    if (size_t e = t.find("..."); e != std::string::npos) {
      int n = o.rank(x) - static_cast<int>(t.size() - 3);
      if (n < 0) return m.fail(ErrorCode::shape_error, "operand ", i, " has too few dims for '", t, "'");
      std::string fresh;
      for (int k = 0; k < n; ++k) fresh += static_cast<char>('A' + k);
      if (fresh.size() > ell.size()) ell = fresh;
      t = t.substr(0, e) + fresh + t.substr(e + 3);
    }
    if (static_cast<int>(t.size()) != o.rank(x)) return m.fail(ErrorCode::shape_error, "operand ", i, " rank does not match '", t, "'");
  }
  if (size_t e = out.find("..."); e != std::string::npos) out = out.substr(0, e) + ell + out.substr(e + 3);
  if (!explicit_out) {
    std::string once;
    for (char c = 'a'; c <= 'z'; ++c) {
      int cnt = 0;
      for (auto& t : terms) cnt += static_cast<int>(std::count(t.begin(), t.end(), c));
      if (cnt == 1) once += c;
    }
    out = ell + once;
  }
  // diagonals and private sums per operand
  for (size_t i = 0; i < terms.size(); ++i) {
    std::string& t = terms[i];
    for (size_t a = 0; a < t.size(); ++a)
      for (size_t b = a + 1; b < t.size(); ++b) {
        if (t[a] != t[b]) continue;
        if (!o.ok()) return o.status().with_context(m.where());
        const Dim& d = o.shape(xs[i])[a];
        if (!d.is_static() || d.size() > 1024) return m.fail(ErrorCode::unsupported, "diagonal over a non-static dim or one longer than 1024");
        Tensor eye = Tensor::zeros(o.dtype(xs[i]), {d.size(), d.size()});
        for (int64_t k = 0; k < d.size(); ++k) eye.set_f64(k * d.size() + k, 1);
        std::vector<int64_t> es(t.size(), 1);
        es[a] = es[b] = d.size();
        xs[i] = o.reduce_sum(o.mul(xs[i], o.reshape(m.c(eye), es)), {static_cast<int64_t>(b)}, false);
        t.erase(b, 1);
        b = a;
      }
    const std::string other = terms.size() == 2 ? terms[1 - i] : "";
    std::vector<int64_t> sum_axes;
    std::string kept;
    for (size_t a = 0; a < t.size(); ++a) {
      if (out.find(t[a]) == std::string::npos && other.find(t[a]) == std::string::npos) sum_axes.push_back(static_cast<int64_t>(a));
      else kept += t[a];
    }
    if (!sum_axes.empty()) xs[i] = o.reduce_sum(xs[i], sum_axes, false);
    t = kept;
  }
  std::string res;  // letters of the result before the final transpose
  ValueId r;
  if (terms.size() == 1) {
    r = xs[0];
    res = terms[0];
  } else {
    const std::string &a = terms[0], &b = terms[1];
    std::vector<int64_t> lb, rb, lc, rc;
    std::string batch, afree, bfree;
    for (size_t k = 0; k < a.size(); ++k) {
      size_t j = b.find(a[k]);
      if (j == std::string::npos) { afree += a[k]; continue; }
      if (out.find(a[k]) != std::string::npos) { lb.push_back(k); rb.push_back(j); batch += a[k]; }
      else { lc.push_back(k); rc.push_back(j); }
    }
    for (char c : b)
      if (a.find(c) == std::string::npos) bfree += c;
    r = o.dot(xs[0], xs[1], lb, rb, lc, rc);
    res = batch + afree + bfree;
  }
  if (!o.ok()) return o.status().with_context(m.where());
  if (res.size() != out.size()) return m.fail(ErrorCode::unsupported, "Einsum '", eq, "' (output letters not all present)");
  std::vector<int64_t> perm;
  for (char c : out) {
    size_t k = res.find(c);
    if (k == std::string::npos) return m.fail(ErrorCode::format_error, "output letter '", c, "' is in no operand");
    perm.push_back(static_cast<int64_t>(k));
  }
  bool identity = true;
  for (size_t k = 0; k < perm.size(); ++k) identity &= perm[k] == static_cast<int64_t>(k);
  if (!identity) r = o.transpose(r, perm);
  else if (terms.size() == 1 && res == terms[0] && r == xs[0]) r = o.reshape(r, std::vector<int64_t>(o.rank(r), 0));
  return m.out(0, r);
}

// TopK with a constant k as k rounds of arg-max (arg-min for smallest): each round takes the
// first index of the extreme (ONNX orders ties by index) and masks it out. k is 1 to 64.
Status map_topk(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  if (m.ai("sorted", 1) == 0) return m.fail(ErrorCode::unsupported, "sorted=0 is not supported");
  // a k known only at run time, or past the rounds below: the data-dependent top_k
  if (!m.is_konst(1)) return map_topk_computed(m, x);
  RLX_ASSIGN_OR_RETURN(auto kv, m.ints(1));
  if (kv.size() == 1 && kv[0] > 64) return map_topk_computed(m, x);
  OpBuilder& o = m.o();
  if (kv.size() != 1 || kv[0] < 1) return m.fail(ErrorCode::invalid_argument, "k must be one value of at least 1");
  const int64_t k = kv[0];
  const int r = o.rank(x);
  RLX_ASSIGN_OR_RETURN(int axis, axis_of(m, m.ai("axis", -1), r));
  const Dim& d = o.shape(x)[axis];
  if (!d.is_static() || d.size() < k) return m.fail(ErrorCode::shape_error, "axis must be static and hold at least k values");
  if (d.size() > (int64_t{1} << 24)) return m.fail(ErrorCode::unsupported, "axis longer than 2^24");
  const bool largest = m.ai("largest", 1) != 0;
  std::vector<int64_t> rs(r, 1);
  rs[axis] = d.size();
  Tensor seq = Tensor::zeros(DType::i64, {d.size()});
  for (int64_t i = 0; i < d.size(); ++i) seq.data<int64_t>()[i] = i;
  ValueId iota = o.reshape(m.c(seq), rs);
  const double fill = largest ? -INFINITY : INFINITY;
  ValueId cur = x;
  if (!is_float(o.dtype(x))) cur = o.cast(x, DType::f64);
  std::vector<ValueId> vals, idxs;
  for (int64_t i = 0; i < k; ++i) {
    ValueId am = o.op(largest ? Op::ArgMax : Op::ArgMin, {cur}, Attrs{{"axis", int64_t{axis}}, {"keepdims", int64_t{1}}});
    idxs.push_back(am);
    vals.push_back(o.op(largest ? Op::ReduceMax : Op::ReduceMin, {cur},
                        Attrs{{"axes", std::vector<int64_t>{axis}}, {"keepdims", int64_t{1}}}));
    cur = o.where(o.binary(Op::Equal, iota, am), o.scalar_like(fill, cur), cur);
  }
  ValueId v = o.concat(vals, axis);
  ValueId ix = o.concat(idxs, axis);
  RLX_TRY(m.out(0, o.cast(v, o.dtype(x))));
  if (m.wants(1)) RLX_TRY(m.out(1, ix));
  return Status::ok();
}

// QLinearMatMul: dequantize both operands, multiply in f64, requantize.
Status map_qlinear_matmul(Importer& m) {
  OpBuilder& o = m.o();
  std::vector<ValueId> in(8);
  for (int i = 0; i < 8; ++i) { RLX_ASSIGN_OR_RETURN(in[i], m.in(i)); }
  auto deq = [&](ValueId q, ValueId s, ValueId z) {
    return o.mul(o.sub(o.cast(q, DType::f64), o.cast(z, DType::f64)), o.cast(s, DType::f64));
  };
  ValueId a = deq(in[0], in[1], in[2]), b = deq(in[3], in[4], in[5]);
  ValueId y = o.op(Op::Round, {o.div(o.matmul(a, b), o.cast(in[6], DType::f64))});
  y = o.add(y, o.cast(in[7], DType::f64));
  return m.out(0, saturate_cast(o, y, o.dtype(in[7])));
}

// ReverseSequence with constant sequence lengths: one gather along the time axis with
// per-batch reversed indices, through flat offsets.
Status map_reverse_sequence(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(auto lens, m.ints(1));
  OpBuilder& o = m.o();
  auto xs = static_sizes(o.shape(x));
  if (!xs || xs->size() < 2) return m.fail(ErrorCode::unsupported, "needs a static input of rank >= 2");
  const int64_t tax = m.ai("time_axis", 0), bax = m.ai("batch_axis", 1);
  if (!((tax == 0 && bax == 1) || (tax == 1 && bax == 0))) return m.fail(ErrorCode::unsupported, "time/batch axes must be 0 and 1");
  const int64_t T = (*xs)[tax], B = (*xs)[bax];
  if (static_cast<int64_t>(lens.size()) != B) return m.fail(ErrorCode::shape_error, "sequence_lens needs ", B, " entries");
  if (T > (int64_t{1} << 24) / std::max<int64_t>(B, 1)) return m.fail(ErrorCode::unsupported, "time x batch larger than 2^24");
  // gather rows of x viewed as [T*B or B*T, rest]
  int64_t rest = 1;
  for (size_t i = 2; i < xs->size(); ++i) {
    auto r = checked_mul_i64(rest, (*xs)[i]);
    if (!r) return m.fail(ErrorCode::overflow, "element count overflows");
    rest = *r;
  }
  Tensor idx = Tensor::zeros(DType::i64, {T * B});
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b) {
      int64_t len = std::clamp<int64_t>(lens[b], 0, T);
      int64_t src_t = t < len ? len - 1 - t : t;
      int64_t pos = tax == 0 ? t * B + b : b * T + t;
      idx.data<int64_t>()[pos] = tax == 0 ? src_t * B + b : b * T + src_t;
    }
  ValueId flat = o.reshape(x, {T * B, rest});
  ValueId y = o.gather(flat, m.c(idx), 0);
  return m.out(0, o.reshape(y, std::vector<int64_t>(xs->begin(), xs->end())));
}

// The DFT of x [..., 1 or 2] (real, or real and imaginary parts last) along `axis` over L
// samples (the axis zero-padded or truncated to L), as two matrix products with cos/sin
// tables: [..., K, 2] with K = L or L/2+1 (onesided); inverse scales by 1/L.
ValueId dft_along(Importer& m, ValueId x, int axis, int64_t L, bool inv, bool one) {
  OpBuilder& o = m.o();
  const Sizes xs = *static_sizes(o.shape(x));
  const int r = static_cast<int>(xs.size());
  const int64_t N = xs[axis], C = xs.back();
  const int64_t K = one ? L / 2 + 1 : L;
  const double pi = 3.14159265358979323846, sgn = inv ? 1.0 : -1.0, scale = inv ? 1.0 / L : 1.0;
  DType dt = o.dtype(x);
  Tensor cs = Tensor::zeros(dt, {N, K}), sn = Tensor::zeros(dt, {N, K});
  for (int64_t n = 0; n < std::min(N, L); ++n)
    for (int64_t k = 0; k < K; ++k) {
      double th = 2 * pi * static_cast<double>((k * n) % L) / L;
      cs.set_f64(n * K + k, std::cos(th) * scale);
      sn.set_f64(n * K + k, sgn * std::sin(th) * scale);
    }
  // move axis last: [..., N] per part
  std::vector<int64_t> perm;
  for (int i = 0; i < r - 1; ++i)
    if (i != axis) perm.push_back(i);
  perm.push_back(axis);
  std::vector<int64_t> inv_perm(r - 1);
  for (int i = 0; i < r - 1; ++i) inv_perm[perm[i]] = i;
  auto part = [&](int64_t p) {
    std::vector<int64_t> shp(xs.begin(), xs.end() - 1);
    return o.transpose(o.reshape(o.slice(x, {p}, {p + 1}, {r - 1}), shp), perm);
  };
  ValueId xr = part(0), C_ = m.c(cs), S_ = m.c(sn);
  // (xr + i xi)(cos + i s sin): re = xr cos - xi s sin, im = xr s sin + xi cos (s folded in the table)
  ValueId re = o.matmul(xr, C_), im = o.matmul(xr, S_);
  if (C == 2) {
    ValueId xi = part(1);
    re = o.sub(re, o.matmul(xi, S_));
    im = o.add(im, o.matmul(xi, C_));
  }
  std::vector<int64_t> back(inv_perm.begin(), inv_perm.end());
  re = o.transpose(re, back);
  im = o.transpose(im, back);
  return o.concat({o.op(Op::Unsqueeze, {re}, Attrs{{"axes", std::vector<int64_t>{-1}}}),
                   o.op(Op::Unsqueeze, {im}, Attrs{{"axes", std::vector<int64_t>{-1}}})},
                  -1);
}

// STFT (opset 17): frames of frame_length samples every frame_step of signal [B, L, 1 or 2],
// each times the window (ones without one), transformed: [B, frames, K, 2].
Status map_stft(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(auto stepv, m.ints(1));
  OpBuilder& o = m.o();
  auto xs = static_sizes(o.shape(x));
  if (!xs || xs->size() != 3 || ((*xs)[2] != 1 && (*xs)[2] != 2))
    return m.fail(ErrorCode::unsupported, "needs a static signal [batch, length, 1 or 2]");
  if (stepv.size() != 1 || stepv[0] < 1) return m.fail(ErrorCode::invalid_argument, "frame_step must be a positive scalar");
  ValueId window = kNoValue;
  int64_t len = (*xs)[1];
  if (m.has(2)) {
    RLX_ASSIGN_OR_RETURN(window, m.in(2));
    auto ws = static_sizes(o.shape(window));
    if (!ws || ws->size() != 1) return m.fail(ErrorCode::shape_error, "window must be 1-D");
    len = (*ws)[0];
  }
  if (m.has(3)) {
    RLX_ASSIGN_OR_RETURN(auto fl, m.ints(3));
    if (fl.size() != 1) return m.fail(ErrorCode::shape_error, "frame_length must be a scalar");
    if (window != kNoValue && fl[0] != len) return m.fail(ErrorCode::shape_error, "frame_length differs from the window's");
    len = fl[0];
  }
  if (len < 1 || len > (*xs)[1] || len > 2048)
    return m.fail(ErrorCode::invalid_argument, "frame_length ", len, " for a signal of ", (*xs)[1], " (at most 2048)");
  const int64_t frames = 1 + ((*xs)[1] - len) / stepv[0];
  RLX_TRY(m.ok().with_context(m.where()));
  if (frames * len > (int64_t{1} << 24)) return m.fail(ErrorCode::unsupported, "a frame table of ", frames * len, " entries");
  Tensor idx = Tensor::zeros(DType::i64, {frames, len});
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t k = 0; k < len; ++k) idx.data<int64_t>()[f * len + k] = f * stepv[0] + k;
  ValueId fr = o.gather(x, m.c(idx), 1);  // [B, frames, len, C]
  if (window != kNoValue) fr = o.mul(fr, o.reshape(o.cast(window, o.dtype(x)), {len, 1}));
  RLX_TRY(m.ok().with_context(m.where()));
  return m.out(0, dft_along(m, fr, 2, len, false, m.ai("onesided", 1) != 0));
}

// MelWeightMatrix (opset 17): the [dft_length / 2 + 1, num_mel_bins] matrix of triangular
// filters over mel-spaced frequency bins, computed at import from its scalar inputs (ONNX's
// reference formula, integer bin edges included).
Status map_mel_weight_matrix(Importer& m) {
  RLX_ASSIGN_OR_RETURN(auto bins_v, m.ints(0));
  RLX_ASSIGN_OR_RETURN(auto dft_v, m.ints(1));
  RLX_ASSIGN_OR_RETURN(auto rate_v, m.ints(2));
  RLX_ASSIGN_OR_RETURN(auto lo_v, m.floats(3));
  RLX_ASSIGN_OR_RETURN(auto hi_v, m.floats(4));
  if (bins_v.size() != 1 || dft_v.size() != 1 || rate_v.size() != 1 || lo_v.size() != 1 || hi_v.size() != 1)
    return m.fail(ErrorCode::shape_error, "the inputs must be scalars");
  const int64_t bins = bins_v[0], dft = dft_v[0], rate = rate_v[0];
  if (bins < 1 || bins > 4096 || dft < 1 || dft > (int64_t{1} << 16) || rate < 1)
    return m.fail(ErrorCode::invalid_argument, "num_mel_bins, dft_length and sample_rate out of range");
  const int64_t spec = dft / 2 + 1;
  auto dt = dtype_from_onnx(static_cast<int32_t>(m.ai("output_datatype", 1)));
  if (!dt || !is_float(*dt)) return m.fail(ErrorCode::unsupported, "output_datatype");
  auto mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double lo = mel(lo_v[0]), step = (mel(hi_v[0]) - lo) / static_cast<double>(bins + 2);
  std::vector<int64_t> edge(static_cast<size_t>(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    const double hz = 700 * (std::pow(10.0, (static_cast<double>(i) * step + lo) / 2595) - 1);
    const double e = std::floor(static_cast<double>(dft + 1) * hz / static_cast<double>(rate));
    if (!std::isfinite(e) || std::fabs(e) > 1e15)
      return m.fail(ErrorCode::invalid_argument, "lower_edge_hertz and upper_edge_hertz give bin edge ", e);
    edge[i] = static_cast<int64_t>(e);
  }
  Tensor w = Tensor::zeros(*dt, {spec, bins});
  auto set = [&](int64_t j, int64_t i, double v) {
    if (j < 0 || j >= spec) return;  // an edge past the spectrum (a hostile file)
    w.set_f64(j * bins + i, v);
  };
  for (int64_t i = 0; i < bins; ++i) {
    const int64_t l = edge[i], c = edge[i + 1], h = edge[i + 2];
    if (c == l) set(c, i, 1);
    else
      for (int64_t j = l; j <= c && j - l <= spec; ++j) set(j, i, static_cast<double>(j - l) / static_cast<double>(c - l));
    if (h > c)
      for (int64_t j = c; j < h && j - c <= spec; ++j) set(j, i, static_cast<double>(h - j) / static_cast<double>(h - c));
  }
  return m.out_const(0, std::move(w));
}

// DFT (opsets 17 and 20) as two matrix products with cos/sin tables along `axis`; the last dim
// holds real (1) or real and imaginary (2) parts. dft_length L zero-pads or truncates the
// signal to L samples (rows of the table past L are zero); inverse scales by 1/L; onesided
// keeps L/2+1 bins. Opset 20 moved axis from an attribute (default 1) to an input (default -2).
Status map_dft(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  OpBuilder& o = m.o();
  auto xs = static_sizes(o.shape(x));
  if (!xs || xs->size() < 3) return m.fail(ErrorCode::unsupported, "needs a static input of rank >= 3");
  const int r = static_cast<int>(xs->size());
  int64_t a = m.opset >= 20 ? -2 : m.ai("axis", 1);
  if (m.opset >= 20 && m.has(2)) {
    RLX_ASSIGN_OR_RETURN(auto av, m.ints(2));
    if (av.size() != 1) return m.fail(ErrorCode::shape_error, "axis must be a scalar");
    a = av[0];
  }
  // the last dim holds the parts, so the signal axis is in [-r, -2] or [0, r-2]
  if (a < -r || a > r - 2 || a == -1) return m.fail(ErrorCode::out_of_range, "axis ", a, " is out of range for rank ", r);
  const int axis = static_cast<int>(a < 0 ? a + r : a);
  const int64_t N = (*xs)[axis], C = xs->back();
  int64_t L = N;
  if (m.has(1)) {
    RLX_ASSIGN_OR_RETURN(auto lv, m.ints(1));
    if (lv.size() != 1 || lv[0] < 1) return m.fail(ErrorCode::invalid_argument, "dft_length must be a positive scalar");
    L = lv[0];
  }
  if (C != 1 && C != 2) return m.fail(ErrorCode::shape_error, "the last dim must be 1 or 2");
  if (N > 2048 || L > 2048) return m.fail(ErrorCode::unsupported, "signal longer than 2048");
  return m.out(0, dft_along(m, x, axis, L, m.ai("inverse", 0) != 0, m.ai("onesided", 0) != 0));
}

// TfIdfVectorizer over integer n-grams (pool_int64s), compiled at import, where the pool is
// known: an n-gram of length n at skip s (the same gap of s items between consecutive items;
// a unigram only once) occurs where the windows x[i + k(s+1)], k < n, all equal it, so each
// (n, s) is n slices stacked, compared with the pool's n-grams of that length at once and
// counted; the counts of every pool entry whose length is in [min_gram_length,
// max_gram_length] are weighted by the mode and placed at ngram_indexes by a 0/1 matrix.
// Rows of a [N, C] input are counted separately, a [C] input as one row.
Status map_tfidf(Importer& m) {
  RLX_TRY(m.only_attrs({"max_gram_length", "max_skip_count", "min_gram_length", "mode", "ngram_counts", "ngram_indexes",
                        "pool_int64s", "pool_strings", "weights"}));
  if (m.has_attr("pool_strings"))
    return m.fail(ErrorCode::unsupported, "pool_strings: string tensors are not supported (rlx has no string dtype)");
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  OpBuilder& o = m.o();
  if (o.dtype(x) != DType::i32 && o.dtype(x) != DType::i64)
    return m.fail(ErrorCode::unsupported, "input must be int32 or int64 (string tensors are not supported), got ", o.type(x).to_string());
  const int rank = o.rank(x);
  if (rank != 1 && rank != 2) return m.fail(ErrorCode::shape_error, "input must be [C] or [N, C], got ", o.type(x).to_string());
  const Dim& cd = o.shape(x)[rank - 1];
  if (!cd.is_static()) return m.fail(ErrorCode::unsupported, "the input's last dimension must be static, got ", o.type(x).to_string());
  const int64_t C = cd.size();
  const int64_t min_n = m.ai("min_gram_length", 0), max_n = m.ai("max_gram_length", 0), max_skip = m.ai("max_skip_count", -1);
  const std::string mode = m.as("mode", "");
  const std::vector<int64_t> starts = m.aints("ngram_counts"), indexes = m.aints("ngram_indexes"), pool = m.aints("pool_int64s");
  std::vector<double> weights = m.afloats("weights");
  if (min_n < 1 || max_n < min_n || max_n > 64)
    return m.fail(ErrorCode::format_error, "need 1 <= min_gram_length <= max_gram_length <= 64, got ", min_n, " and ", max_n);
  if (max_skip < 0) return m.fail(ErrorCode::format_error, "max_skip_count must be given and at least 0, got ", max_skip);
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") return m.fail(ErrorCode::format_error, "mode must be TF, IDF or TFIDF, got '", mode, "'");
  if (static_cast<int64_t>(starts.size()) != max_n)
    return m.fail(ErrorCode::format_error, "ngram_counts has ", starts.size(), " entries for max_gram_length ", max_n);
  // the pool's n-grams of each length: [starts[n-1], next start) holds them, n items each
  std::vector<int64_t> per_length(max_n + 1, 0);
  for (int64_t n = 1; n <= max_n; ++n) {
    const int64_t b = starts[n - 1], e = n < max_n ? starts[n] : static_cast<int64_t>(pool.size());
    if (b < 0 || e < b || e > static_cast<int64_t>(pool.size()) || (e - b) % n != 0)
      return m.fail(ErrorCode::format_error, "ngram_counts ", n - 1, " gives pool items [", b, ", ", e, ") for ", n,
                    "-grams, which is not a whole number of them within the pool of ", pool.size());
    per_length[n] = (e - b) / n;
  }
  int64_t entries = 0, outputs = 0;
  for (int64_t n = 1; n <= max_n; ++n) entries += per_length[n];
  if (static_cast<int64_t>(indexes.size()) != entries)
    return m.fail(ErrorCode::format_error, "ngram_indexes has ", indexes.size(), " entries for ", entries, " pool n-grams");
  for (int64_t i : indexes) {
    if (i < 0 || i >= (int64_t{1} << 24)) return m.fail(ErrorCode::format_error, "ngram_indexes entry ", i, " is out of range");
    outputs = std::max(outputs, i + 1);
  }
  if (weights.empty()) weights.assign(static_cast<size_t>(entries), 1.0);
  if (static_cast<int64_t>(weights.size()) != entries)
    return m.fail(ErrorCode::format_error, "weights has ", weights.size(), " entries for ", entries, " pool n-grams");
  if (entries == 0) return m.fail(ErrorCode::format_error, "the pool holds no n-grams");

  ValueId rows = o.cast(rank == 1 ? o.reshape(x, {1, C}) : x, DType::i64);
  // a row's count for every pool entry, length by length: [N, entries] in f32
  std::vector<ValueId> counts;
  for (int64_t n = 1; n <= max_n; ++n) {
    const int64_t p = per_length[n];
    if (p == 0) continue;
    std::vector<int64_t> items(pool.begin() + starts[n - 1], pool.begin() + starts[n - 1] + p * n);
    ValueId grams = m.c(Tensor::from_vector<int64_t>(DType::i64, Sizes{p, n}, items));
    ValueId total = kNoValue;
    const bool counted = n >= min_n;
    for (int64_t s = 0; counted && s <= (n == 1 ? 0 : max_skip); ++s) {
      const int64_t window = C - (n - 1) * (s + 1);
      if (window <= 0) break;  // longer gaps do not fit either
      std::vector<ValueId> parts;
      for (int64_t k = 0; k < n; ++k)
        parts.push_back(o.op(Op::Unsqueeze, {o.slice(rows, {k * (s + 1)}, {k * (s + 1) + window}, {1})},
                             Attrs{{"axes", std::vector<int64_t>{-1}}}));
      ValueId w = o.op(Op::Unsqueeze, {n == 1 ? parts[0] : o.concat(parts, -1)}, Attrs{{"axes", std::vector<int64_t>{2}}});
      ValueId all = o.reduce(Op::ReduceMin, o.cast(o.binary(Op::Equal, w, grams), DType::f32), {3}, false);  // [N, window, p]
      ValueId c = o.reduce_sum(all, {1}, false);
      total = total == kNoValue ? c : o.add(total, c);
    }
    if (total == kNoValue)  // not counted, or no window fits: zeros of [N, p]
      total = o.mul(o.reduce_sum(o.cast(rows, DType::f32), {1}, true), m.c(Tensor::zeros(DType::f32, Sizes{1, p})));
    counts.push_back(total);
  }
  ValueId v = counts.size() == 1 ? counts[0] : o.concat(counts, 1);
  std::vector<float> w32(weights.begin(), weights.end());
  ValueId wv = m.c(Tensor::from_vector<float>(DType::f32, Sizes{entries}, w32));
  if (mode == "IDF") v = o.mul(o.cast(o.binary(Op::Greater, v, m.cs(0, DType::f32)), DType::f32), wv);
  else if (mode == "TFIDF") v = o.mul(v, wv);
  std::vector<float> place(static_cast<size_t>(entries * outputs), 0.f);
  for (int64_t i = 0; i < entries; ++i) place[static_cast<size_t>(i * outputs + indexes[i])] = 1.f;
  ValueId y = o.matmul(v, m.c(Tensor::from_vector<float>(DType::f32, Sizes{entries, outputs}, place)));
  return m.out(0, rank == 1 ? o.reshape(y, {outputs}) : y);
}

}  // namespace

void register_misc_ops(OpTable& t) {
  t["DFT"] = {map_dft};
  t["TfIdfVectorizer"] = {map_tfidf};
  t["Det"] = {[](Importer& m) -> Status {  // rlx's det (LAPACK on the cpu device)
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
    return m.out(0, m.o().op(Op::Det, {x}));
  }};
  t["STFT"] = {map_stft};
  t["MelWeightMatrix"] = {map_mel_weight_matrix};
  t["TopK"] = {map_topk};
  t["QLinearMatMul"] = {map_qlinear_matmul};
  t["ReverseSequence"] = {map_reverse_sequence};
  t["Einsum"] = {map_einsum};
  t["HannWindow"] = {window(0.5, 0.5, 0.0)};
  t["HammingWindow"] = {window(25.0 / 46, 21.0 / 46, 0.0)};
  t["BlackmanWindow"] = {window(0.42, 0.5, 0.08)};
  t["NegativeLogLikelihoodLoss"] = {map_nll};
  t["SoftmaxCrossEntropyLoss"] = {map_sce};
  t["QuantizeLinear"] = {map_quantize};
  t["DequantizeLinear"] = {map_dequantize};
  t["DynamicQuantizeLinear"] = {map_dynamic_quantize};
  t["MatMulInteger"] = {map_matmul_integer};
}

}  // namespace rlx::onnx_import
