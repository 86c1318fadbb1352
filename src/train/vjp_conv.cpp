// Vector-Jacobian rules of convolution and pooling (NCHW).
//
// conv2d: dx is col2im of W^T g (one GEMM per image and group, the weight shared), i.e. each
// kernel tap's slice of that product added back at the input positions the tap read; dw
// contracts g with the im2col matrix of x as one batched GEMM per image and group, summed over
// images; db sums g over images and positions.
// Pooling: for windows that tile the input, max pooling counts ties per window through
// gathers with constant position tables and computes the gradient per input element over the
// flat [N, C, H*W] layout (long contiguous loops); average pooling broadcasts in a 6-D view.
// Other windows (overlapping, padded, dilated, ceil mode) place each tap's
// contribution back at the positions it read (strided zeros via reshape and pad, vjp::unslice).
// Max pooling splits a window's gradient evenly between tied maxima.
#include <limits>

#include "dispatch/rules/rules.h"
#include "vjp_internal.h"

namespace rlx::train::vjp {
namespace {

struct Window {
  int64_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  int64_t n, c, h, w, ho, wo;
  int64_t extra_b = 0, extra_r = 0;  // end padding beyond pads that ceil_mode windows read
};

Window window_of(Ctx& c, int64_t kh, int64_t kw) {
  const Attrs& a = c.attrs();
  auto strides = a.ints("strides", {1, 1});
  auto pads = a.ints("pads", {0, 0, 0, 0});
  auto dil = a.ints("dilations", {1, 1});
  const Sizes x = sizes_of(c.in_types[0]), y = sizes_of(c.out_types[0]);
  Window w{kh, kw, strides[0], strides[1], dil[0], dil[1], pads[0], pads[1], pads[2], pads[3],
           x[0], x[1], x[2], x[3], y[2], y[3]};
  const int64_t need_h = (w.ho - 1) * w.sh + (w.kh - 1) * w.dh + 1;
  const int64_t need_w = (w.wo - 1) * w.sw + (w.kw - 1) * w.dw + 1;
  w.extra_b = std::max<int64_t>(0, need_h - (w.h + w.pt + w.pb));
  w.extra_r = std::max<int64_t>(0, need_w - (w.w + w.pl + w.pr));
  return w;
}

Sizes padded_shape(const Window& w) {
  return {w.n, w.c, w.h + w.pt + w.pb + w.extra_b, w.w + w.pl + w.pr + w.extra_r};
}

ValueId pad_input(OpBuilder& o, ValueId x, const Window& w, double value) {
  if (w.pt == 0 && w.pl == 0 && w.pb + w.extra_b == 0 && w.pr + w.extra_r == 0) return x;
  return o.pad(x, {0, 0, w.pt, w.pl, 0, 0, w.pb + w.extra_b, w.pr + w.extra_r}, value);
}

// The [N, C, Ho, Wo] slice of the padded input read by tap (i, j), and its adjoint.
ValueId tap(OpBuilder& o, ValueId xp, const Window& w, int64_t i, int64_t j) {
  return o.strided_slice(xp, {0, 0, i * w.dh, j * w.dw}, {1, 1, w.sh, w.sw}, {w.n, w.c, w.ho, w.wo});
}
ValueId untap(OpBuilder& o, ValueId v, const Window& w, int64_t i, int64_t j) {
  return unslice(o, v, padded_shape(w), {0, 0, i * w.dh, j * w.dw}, {1, 1, w.sh, w.sw}, {w.n, w.c, w.ho, w.wo});
}
// The input-shaped part of a padded-input gradient.
ValueId crop(OpBuilder& o, ValueId v, const Window& w) {
  const Sizes p = padded_shape(w);
  if (p == Sizes{w.n, w.c, w.h, w.w}) return v;
  return o.strided_slice(v, {0, 0, w.pt, w.pl}, {1, 1, 1, 1}, {w.n, w.c, w.h, w.w});
}

Status conv2d(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  const Sizes ws = sizes_of(c.in_types[1]);
  const int64_t m = ws[0], cg = ws[1];
  Window w = window_of(c, ws[2], ws[3]);
  const int64_t groups = c.attrs().i("group", 1), mg = m / groups, kk = w.kh * w.kw, p = w.ho * w.wo;
  // out_type (f32 for f16/bf16 x and w): the products take the gradient rounded to the
  // operands' type and sum in out_type, as dot's; col2im and the sum over images run in
  // out_type, and each operand's gradient is rounded to its type once, at the end
  const DType xt = c.dtype(0), yt = c.out_types[0].dtype;
  Attrs product;
  if (xt != yt) product.set("out_type", yt);
  const ValueId g = c.g();
  // g in its own [N, M, Ho, Wo] shape, so the GEMM operands below are views of it and the
  // kernel that computes it indexes its rows and columns without dividing
  c.hint_reuse(g);
  ValueId gg = o.reshape(g, {w.n, groups, mg, p});
  if (c.node.inputs.size() == 3 && c.need(2)) out[2] = o.reshape(o.reduce_sum(gg, {0, 3}, false), {m});
  const ValueId gn = xt != yt ? o.reshape(o.cast(g, xt), {w.n, groups, mg, p}) : gg;
  ValueId wm = o.reshape(c.in(1), {groups, mg, cg * kk});
  if (c.need(0)) {
    // col2im: dcols = W^T g per image and group, then each kernel tap's rows added back at
    // the input positions that tap read
    ValueId dcols = o.op(Op::MatMul, {o.transpose(wm, {0, 2, 1}), gn}, product);  // [N, G, Cg*kk, P]
    dcols = o.reshape(dcols, {w.n, w.c, kk, p});
    ValueId dxp = kNoValue;
    for (int64_t i = 0; i < w.kh; ++i)
      for (int64_t j = 0; j < w.kw; ++j) {
        ValueId t = o.strided_slice(dcols, {0, 0, i * w.kw + j, 0}, {1, 1, 1, 1}, {w.n, w.c, 1, p});
        ValueId part = untap(o, o.reshape(t, {w.n, w.c, w.ho, w.wo}), w, i, j);
        dxp = dxp == kNoValue ? part : o.add(dxp, part);
      }
    out[0] = crop(o, dxp, w);
    c.hint_reuse(out[0]);  // a sum of kh*kw taps, which a pooling rule reads per window element
    if (xt != yt) out[0] = o.cast(out[0], xt);
  }
  if (c.need(1)) {
    // dw[m, (c, i, j)] = sum over images and positions of g[n, m, p] * cols[n, (c, i, j), p]
    const dispatch::Window2d cw{w.kh, w.kw, w.sh, w.sw, w.dh, w.dw, w.pt, w.pl, w.pb, w.pr, w.n, w.c, w.h, w.w, w.ho, w.wo};
    ValueId cols = dispatch::im2col(o, c.in(0), cw, groups);  // as conv2d's rule builds it
    Attrs contraction = product;
    contraction.set("lhs_batch", std::vector<int64_t>{0, 1});
    contraction.set("rhs_batch", std::vector<int64_t>{0, 1});
    contraction.set("lhs_contract", std::vector<int64_t>{3});
    contraction.set("rhs_contract", std::vector<int64_t>{3});
    ValueId per_image = o.op(Op::Dot, {gn, cols}, std::move(contraction));  // [N, G, Mg, Cg*kk]
    out[1] = o.reshape(o.reduce_sum(per_image, {0}, false), {m, cg, w.kh, w.kw});
    if (xt != yt) out[1] = o.cast(out[1], xt);
  }
  return o.status();
}

// Pooling windows that tile the input exactly (stride = kernel, no padding or dilation; rows
// and columns past the last window are unused): each input element is in one window, so the
// window becomes two axes of a 6-D view and the gradient is elementwise there.
bool tiles(const Window& w) {
  return w.sh == w.kh && w.sw == w.kw && w.dh == 1 && w.dw == 1 && w.pt == 0 && w.pl == 0 && w.pb == 0 &&
         w.pr == 0 && w.extra_b == 0 && w.extra_r == 0;
}

// [N, C, Ho, kh, Wo, kw] -> [N, C, H, W], zeros in the unused rows and columns
ValueId from_window_view(OpBuilder& o, ValueId d6, const Window& w) {
  ValueId d = o.reshape(d6, {w.n, w.c, w.ho * w.kh, w.wo * w.kw});
  if (w.h != w.ho * w.kh || w.w != w.wo * w.kw)
    d = o.pad(d, {0, 0, 0, 0, 0, 0, w.h - w.ho * w.kh, w.w - w.wo * w.kw}, 0.0);
  return d;
}

// Max pooling sends each window's gradient to the elements equal to its maximum, split
// evenly between ties (as the reduce_max rule does; a valid subgradient, where PyTorch picks
// one element).
Status max_pool2d(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  auto k = c.attrs().ints("kernel");
  Window w = window_of(c, k[0], k[1]);
  const ValueId y = c.out(), g = c.g();
  c.hint_reuse(y);  // every element of a window compares against it
  ValueId zero = c.c(0.0);
  if (tiles(w)) {
    // ties per window: each tap a gather over the flattened input with a constant table of
    // positions, so the kernel runs over [N*C, Ho*Wo] in long contiguous loops
    const int64_t p = w.ho * w.wo;
    ValueId xflat = o.reshape(c.in(0), {w.n, w.c, w.h * w.w});
    ValueId yflat = o.reshape(y, {w.n, w.c, p});
    ValueId count = kNoValue;
    for (int64_t i = 0; i < w.kh; ++i)
      for (int64_t j = 0; j < w.kw; ++j) {
        std::vector<double> pos(static_cast<size_t>(p));
        for (int64_t oy = 0; oy < w.ho; ++oy)
          for (int64_t ox = 0; ox < w.wo; ++ox)
            pos[static_cast<size_t>(oy * w.wo + ox)] = static_cast<double>((oy * w.kh + i) * w.w + ox * w.kw + j);
        ValueId tap_v = o.gather(xflat, o.constant(Tensor::from_f64(DType::i32, {p}, pos)), 2);  // [N, C, P]
        ValueId hit = o.cast(o.op(Op::Equal, {tap_v, yflat}), c.dtype());
        count = count == kNoValue ? hit : o.add(count, hit);
      }
    ValueId share = o.div(o.reshape(g, {w.n, w.c, p}), count);  // [N, C, Ho*Wo]
    c.hint_reuse(share);  // one value per window, read by each of its elements
    // The gradient itself is computed per input element over the flattened [N, C, H*W]
    // layout, each element finding its window through a constant index table: a 6-D
    // elementwise kernel would have a two-wide innermost loop (the window's columns), and
    // this one has H*W contiguous elements, fused with whatever consumes the gradient
    // (the ReLU's mask, typically).
    const int64_t hw = w.h * w.w;
    std::vector<double> index(static_cast<size_t>(hw)), inside(static_cast<size_t>(hw));
    bool partial = false;
    for (int64_t yy = 0; yy < w.h; ++yy)
      for (int64_t xx = 0; xx < w.w; ++xx) {
        const bool in = yy < w.ho * w.kh && xx < w.wo * w.kw;
        index[static_cast<size_t>(yy * w.w + xx)] = in ? static_cast<double>((yy / w.kh) * w.wo + xx / w.kw) : 0.0;
        inside[static_cast<size_t>(yy * w.w + xx)] = in ? 1.0 : 0.0;
        partial |= !in;
      }
    ValueId idx = o.constant(Tensor::from_f64(DType::i32, {hw}, index));
    ValueId y_up = o.gather(yflat, idx, 2);                                         // [N, C, H*W]
    ValueId s_up = o.gather(share, idx, 2);                                         // [N, C, H*W]
    ValueId d = o.where(o.op(Op::Equal, {xflat, y_up}), s_up, zero);
    if (partial) d = o.where(o.constant(Tensor::from_f64(DType::boolean, {hw}, inside)), d, zero);
    out[0] = o.reshape(d, {w.n, w.c, w.h, w.w});
    return o.status();
  }
  ValueId xp = pad_input(o, c.in(0), w, -std::numeric_limits<double>::infinity());
  std::vector<ValueId> hits;
  ValueId count = kNoValue;
  for (int64_t i = 0; i < w.kh; ++i)
    for (int64_t j = 0; j < w.kw; ++j) {
      hits.push_back(o.op(Op::Equal, {tap(o, xp, w, i, j), y}));
      ValueId h = o.cast(hits.back(), c.dtype());
      count = count == kNoValue ? h : o.add(count, h);
    }
  ValueId share = o.div(g, count);
  c.hint_reuse(share);
  ValueId dxp = kNoValue;
  for (int64_t i = 0; i < w.kh; ++i)
    for (int64_t j = 0; j < w.kw; ++j) {
      ValueId part = untap(o, o.where(hits[static_cast<size_t>(i * w.kw + j)], share, zero), w, i, j);
      dxp = dxp == kNoValue ? part : o.add(dxp, part);
    }
  out[0] = crop(o, dxp, w);
  return o.status();
}

Status avg_pool2d(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  auto k = c.attrs().ints("kernel");
  Window w = window_of(c, k[0], k[1]);
  if (tiles(w)) {
    ValueId g6 = o.reshape(o.mul(c.g(), c.c(1.0 / static_cast<double>(w.kh * w.kw))), {w.n, w.c, w.ho, 1, w.wo, 1});
    out[0] = from_window_view(o, o.broadcast_to(g6, {w.n, w.c, w.ho, w.kh, w.wo, w.kw}), w);
    return o.status();
  }
  const bool include_pad = c.attrs().i("count_include_pad", 0) != 0;
  // the forward's divisor per output position (see the avg_pool2d lowering rule)
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
  ValueId share = o.div(c.g(), o.constant(Tensor::from_f64(c.dtype(), {1, 1, w.ho, w.wo}, count)));
  ValueId dxp = kNoValue;
  for (int64_t i = 0; i < w.kh; ++i)
    for (int64_t j = 0; j < w.kw; ++j) {
      ValueId part = untap(o, share, w, i, j);
      dxp = dxp == kNoValue ? part : o.add(dxp, part);
    }
  out[0] = crop(o, dxp, w);
  return o.status();
}

}  // namespace

void register_conv_vjps(std::vector<Rule>& t) {
  t[static_cast<size_t>(Op::Conv2d)] = conv2d;
  t[static_cast<size_t>(Op::MaxPool2d)] = max_pool2d;
  t[static_cast<size_t>(Op::AvgPool2d)] = avg_pool2d;
}

}  // namespace rlx::train::vjp
