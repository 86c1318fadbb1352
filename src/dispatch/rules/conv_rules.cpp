// Convolution family: conv2d rewritten as im2col (a gather with a constant table of input
// positions; strided slices + concat for very large windows x outputs) times a matmul, so it runs on whatever matmul the device has; pooling as an elementwise max/sum
// over the window's strided slices, which the scheduler fuses into one kernel.
#include <limits>

#include "rules.h"

namespace rlx::dispatch {
namespace {

Window2d window_of(const RuleNode& n, int64_t kh, int64_t kw) {
  const Attrs& a = n.attrs;
  auto strides = a.ints("strides", {1, 1});
  auto pads = a.ints("pads", {0, 0, 0, 0});
  auto dil = a.ints("dilations", {1, 1});
  const Shape& x = n.input_types[0].shape;
  const Shape& y = n.output_types[0].shape;
  return Window2d{kh, kw, strides[0], strides[1], dil[0], dil[1], pads[0], pads[1], pads[2], pads[3],
                  x[0].size(), x[1].size(), x[2].size(), x[3].size(), y[2].size(), y[3].size()};
}

// Pads so that every window of the output lies inside (ceil_mode may need extra end padding).
ValueId pad_for_windows(OpBuilder& o, ValueId x, const Window2d& w, double value) {
  int64_t need_h = (w.ho - 1) * w.sh + (w.kh - 1) * w.dh + 1;
  int64_t need_w = (w.wo - 1) * w.sw + (w.kw - 1) * w.dw + 1;
  int64_t extra_b = std::max<int64_t>(0, need_h - (w.h + w.pt + w.pb));
  int64_t extra_r = std::max<int64_t>(0, need_w - (w.w + w.pl + w.pr));
  if (w.pt == 0 && w.pl == 0 && w.pb + extra_b == 0 && w.pr + extra_r == 0) return x;
  return o.pad(x, {0, 0, w.pt, w.pl, 0, 0, w.pb + extra_b, w.pr + extra_r}, value);
}

// The [N, C, Ho, Wo] slice of the padded input read by kernel tap (i, j).
ValueId tap(OpBuilder& o, ValueId xp, const Window2d& w, int64_t i, int64_t j) {
  return o.strided_slice(xp, {0, 0, i * w.dh, j * w.dw}, {1, 1, w.sh, w.sw}, {w.n, w.c, w.ho, w.wo});
}

}  // namespace

ValueId im2col(OpBuilder& o, ValueId x, const Window2d& w, int64_t groups) {
  const int64_t kk = w.kh * w.kw, p = w.ho * w.wo, hw = w.h * w.w;
  ValueId cols = kNoValue;  // [N, C, kh*kw, P]
  if (kk * p <= (int64_t{1} << 22)) {
    // one gather along the flattened spatial axis with a constant [kh*kw, P] table of input
    // positions (and a mask where a tap reads padding): the kernel that fills the matrix
    // loads an index per element instead of selecting among kh*kw strided taps and dividing
    // positions by the output width
    std::vector<double> index(static_cast<size_t>(kk * p)), inside(static_cast<size_t>(kk * p));
    bool padded = false;
    for (int64_t i = 0; i < w.kh; ++i)
      for (int64_t j = 0; j < w.kw; ++j)
        for (int64_t oy = 0; oy < w.ho; ++oy)
          for (int64_t ox = 0; ox < w.wo; ++ox) {
            const int64_t yy = oy * w.sh + i * w.dh - w.pt, xx = ox * w.sw + j * w.dw - w.pl;
            const bool in = yy >= 0 && yy < w.h && xx >= 0 && xx < w.w;
            const size_t e = static_cast<size_t>((i * w.kw + j) * p + oy * w.wo + ox);
            index[e] = in ? static_cast<double>(yy * w.w + xx) : 0.0;
            inside[e] = in ? 1.0 : 0.0;
            padded |= !in;
          }
    ValueId flat = o.reshape(x, {w.n, w.c, hw});
    cols = o.gather(flat, o.constant(Tensor::from_f64(DType::i32, {kk, p}, index)), 2);
    if (padded)
      cols = o.where(o.constant(Tensor::from_f64(DType::boolean, {kk, p}, inside)), cols, o.scalar_like(0.0, cols));
  } else {
    ValueId xp = pad_for_windows(o, x, w, 0.0);
    std::vector<ValueId> taps;
    for (int64_t i = 0; i < w.kh; ++i)
      for (int64_t j = 0; j < w.kw; ++j)
        taps.push_back(o.reshape(tap(o, xp, w, i, j), {w.n, w.c, 1, p}));
    cols = taps.size() == 1 ? taps[0] : o.concat(taps, 2);
  }
  // rows (c, i, j) of a group are contiguous: the kernel that reads this view divides a row
  // by kh*kw once per row (kernel_builder's common factor), not per element
  return o.reshape(cols, {w.n, groups, w.c / groups * kk, p});
}

namespace {

Status conv2d(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  const Shape& ws = n.input_types[1].shape;
  const int64_t m = ws[0].size(), cg = ws[1].size();
  Window2d w = window_of(n, ws[2].size(), ws[3].size());
  const int64_t g = n.attrs.i("group", 1);
  ValueId cols = im2col(o, n.inputs[0], w, g);
  ValueId wm = o.reshape(n.inputs[1], {g, m / g, cg * w.kh * w.kw});
  // out_type (f32 for f16/bf16 x and w): the im2col matrix keeps the operands' type and the
  // product sums in out_type
  Attrs product;
  if (n.attrs.has("out_type")) product.set("out_type", n.attrs.dtype("out_type"));
  ValueId y = o.op(Op::MatMul, {wm, cols}, std::move(product));  // [N, g, M/g, P]
  y = o.reshape(y, {w.n, m, w.ho, w.wo});
  if (n.inputs.size() == 3) y = o.add(y, o.reshape(n.inputs[2], {1, m, 1, 1}));
  return single(o, y, outputs);
}

// Input positions (flattened H*W) that tap (i, j) of each output position reads, when no
// window reaches into padding; empty otherwise.
std::vector<double> unpadded_taps(const Window2d& w) {
  const int64_t need_h = (w.ho - 1) * w.sh + (w.kh - 1) * w.dh + 1;
  const int64_t need_w = (w.wo - 1) * w.sw + (w.kw - 1) * w.dw + 1;
  if (w.pt != 0 || w.pl != 0 || w.pb != 0 || w.pr != 0 || need_h > w.h || need_w > w.w) return {};
  const int64_t p = w.ho * w.wo;
  if (w.kh * w.kw * p > (int64_t{1} << 22)) return {};
  std::vector<double> index(static_cast<size_t>(w.kh * w.kw * p));
  for (int64_t i = 0; i < w.kh; ++i)
    for (int64_t j = 0; j < w.kw; ++j)
      for (int64_t oy = 0; oy < w.ho; ++oy)
        for (int64_t ox = 0; ox < w.wo; ++ox)
          index[static_cast<size_t>((i * w.kw + j) * p + oy * w.wo + ox)] =
              static_cast<double>((oy * w.sh + i * w.dh) * w.w + ox * w.sw + j * w.dw);
  return index;
}

Status max_pool2d(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  auto k = n.attrs.ints("kernel");
  Window2d w = window_of(n, k[0], k[1]);
  if (auto index = unpadded_taps(w); !index.empty()) {
    // windows inside the input: each tap is a gather over the flattened [N, C, H*W] input
    // with a constant table of positions, so the fused kernel runs over [N*C, Ho*Wo] (one
    // long contiguous loop per channel) instead of rows of Wo outputs with strided taps
    const int64_t p = w.ho * w.wo;
    ValueId flat = o.reshape(n.inputs[0], {w.n, w.c, w.h * w.w});
    ValueId y = kNoValue;
    for (int64_t t = 0; t < w.kh * w.kw; ++t) {
      std::vector<double> part(index.begin() + t * p, index.begin() + (t + 1) * p);
      ValueId v = o.gather(flat, o.constant(Tensor::from_f64(DType::i32, {p}, part)), 2);  // [N, C, P]
      y = y == kNoValue ? v : o.max(y, v);
    }
    return single(o, o.reshape(y, {w.n, w.c, w.ho, w.wo}), outputs);
  }
  ValueId xp = pad_for_windows(o, n.inputs[0], w, -std::numeric_limits<double>::infinity());
  ValueId y = kNoValue;
  for (int64_t i = 0; i < w.kh; ++i)
    for (int64_t j = 0; j < w.kw; ++j) {
      ValueId t = tap(o, xp, w, i, j);
      y = y == kNoValue ? t : o.max(y, t);
    }
  return single(o, y, outputs);
}

Status avg_pool2d(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  auto k = n.attrs.ints("kernel");
  Window2d w = window_of(n, k[0], k[1]);
  const bool include_pad = n.attrs.i("count_include_pad", 0) != 0;
  ValueId xp = pad_for_windows(o, n.inputs[0], w, 0.0);
  ValueId sum = kNoValue;
  for (int64_t i = 0; i < w.kh; ++i)
    for (int64_t j = 0; j < w.kw; ++j) {
      ValueId t = tap(o, xp, w, i, j);
      sum = sum == kNoValue ? t : o.add(sum, t);
    }
  // Divisor per output position: taps inside the input (or inside input + explicit padding
  // when count_include_pad); never the extra ceil_mode padding.
  std::vector<double> count(static_cast<size_t>(w.ho * w.wo));
  for (int64_t oy = 0; oy < w.ho; ++oy)
    for (int64_t ox = 0; ox < w.wo; ++ox) {
      int64_t cnt = 0;
      for (int64_t i = 0; i < w.kh; ++i)
        for (int64_t j = 0; j < w.kw; ++j) {
          int64_t yy = oy * w.sh + i * w.dh - w.pt, xx = ox * w.sw + j * w.dw - w.pl;
          bool in_input = yy >= 0 && yy < w.h && xx >= 0 && xx < w.w;
          bool in_padded = yy >= -w.pt && yy < w.h + w.pb && xx >= -w.pl && xx < w.w + w.pr;
          cnt += include_pad ? in_padded : in_input;
        }
      count[oy * w.wo + ox] = cnt > 0 ? static_cast<double>(cnt) : 1.0;
    }
  ValueId div = o.constant(Tensor::from_f64(n.input_types[0].dtype, {1, 1, w.ho, w.wo}, count));
  return single(o, o.div(sum, div), outputs);
}

}  // namespace

void register_conv_rules(std::vector<OpRules>& t) {
  t[static_cast<size_t>(Op::Conv2d)].rewrite = conv2d;
  t[static_cast<size_t>(Op::MaxPool2d)].decompose = max_pool2d;
  t[static_cast<size_t>(Op::AvgPool2d)].decompose = avg_pool2d;
}

}  // namespace rlx::dispatch
