// ONNX Resize (opsets 10 to 19) and Upsample: nearest, linear and cubic interpolation with
// every coordinate transformation mode, as separable per-axis gathers with weights computed at
// import time from the static shapes (the weights and neighbour indices follow ONNX's
// reference implementation, including edge clamping, exclude_outside and extrapolation; and,
// from opset 18, axes, keep_aspect_ratio_policy and antialiased downsampling); and the ops that
// sample an input at computed positions: GridSample, AffineGrid, RoiAlign, DeformConv.
#include <cmath>
#include <set>

#include "onnx_internal.h"

namespace rlx::onnx_import {
namespace {

struct ResizeSpec {
  std::string mode = "nearest", coord = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0.0;
  bool exclude_outside = false;
  bool antialias = false;
};

// The interpolation kernel at distance d (in input pixels): linear's triangle, cubic's Keys.
double kernel_at(const ResizeSpec& s, double d) {
  d = std::fabs(d);
  if (s.mode == "linear") return d < 1 ? 1 - d : 0;
  const double A = s.cubic_a;
  if (d < 1) return ((A + 2) * d - (A + 3)) * d * d + 1;
  if (d < 2) return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
  return 0;
}

std::vector<double> coeffs_for(const ResizeSpec& s, double ratio) {
  if (s.mode == "nearest") {
    if (ratio == 0) return {1, 0};  // an integral coordinate picks itself
    if (s.nearest == "round_prefer_floor") return {double(ratio <= 0.5), double(ratio > 0.5)};
    if (s.nearest == "round_prefer_ceil") return {double(ratio < 0.5), double(ratio >= 0.5)};
    if (s.nearest == "floor") return {1, 0};
    return {0, 1};
  }
  if (s.mode == "linear") return {1 - ratio, ratio};
  const double A = s.cubic_a, r = ratio, q = 1 - ratio;
  return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A, ((A + 2) * r - (A + 3)) * r * r + 1,
          ((A + 2) * q - (A + 3)) * q * q + 1, ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A};
}

// One axis: out[j] = sum_k w[j][k] * in[idx[j][k]]; `outside[j]` when extrapolating.
struct AxisPlan {
  std::vector<std::vector<int64_t>> idx;
  std::vector<std::vector<double>> w;
  std::vector<bool> outside;
};

// Antialiased downsampling (opset 18, linear and cubic): the kernel is stretched by 1/scale so
// every input pixel under an output pixel contributes, as a low-pass filter. Taps past the
// edges read the edge pixel, and the weights are normalized over the whole window, as ONNX
// Runtime computes it.
void plan_antialias(const ResizeSpec& s, AxisPlan& p, int64_t in, double xo, double scale) {
  const double support = (s.mode == "linear" ? 1.0 : 2.0) / scale;  // scale > 0: checked by the caller
  const double center = xo + 0.5;
  const int64_t lo = static_cast<int64_t>(std::floor(center - support + 0.5));
  const int64_t hi = static_cast<int64_t>(std::floor(center + support + 0.5));
  std::vector<int64_t> ids;
  std::vector<double> c;
  double sum = 0;
  for (int64_t i = lo; i < hi; ++i) {
    const double w = kernel_at(s, (static_cast<double>(i) - center + 0.5) * scale);
    if (w == 0) continue;
    ids.push_back(std::clamp<int64_t>(i, 0, in - 1));
    c.push_back(w);
    sum += w;
  }
  if (sum != 0)
    for (double& v : c) v /= sum;
  if (ids.empty()) {
    ids.push_back(0);
    c.push_back(0);
  }
  p.idx.push_back(ids);
  p.w.push_back(c);
  p.outside.push_back(false);
}

AxisPlan plan_axis(const ResizeSpec& s, int64_t in, int64_t out, double scale, double roi_start, double roi_end) {
  AxisPlan p;
  const double out_w = scale * static_cast<double>(in);
  for (int64_t j = 0; j < out; ++j) {
    const double x = static_cast<double>(j);
    double xo;
    if (s.coord == "half_pixel") xo = (x + 0.5) / scale - 0.5;
    else if (s.coord == "half_pixel_symmetric") {
      // opset 19: half_pixel about the centre of the input, when the output size was rounded
      const double adjustment = static_cast<double>(out) / out_w;
      xo = 0.5 * static_cast<double>(in) * (1 - adjustment) + (x + 0.5) / scale - 0.5;
    }
    else if (s.coord == "pytorch_half_pixel") xo = out_w > 1 ? (x + 0.5) / scale - 0.5 : 0;
    else if (s.coord == "align_corners") xo = out_w == 1 ? 0 : x * (in - 1) / (out_w - 1);
    else if (s.coord == "asymmetric") xo = x / scale;
    else if (s.coord == "tf_half_pixel_for_nn") xo = (x + 0.5) / scale;
    else  // tf_crop_and_resize
      xo = out_w > 1 ? roi_start * (in - 1) + x * (roi_end - roi_start) * (in - 1) / (out_w - 1)
                     : 0.5 * (roi_start + roi_end) * (in - 1);
    if (s.antialias && scale < 1 && s.mode != "nearest") {
      plan_antialias(s, p, in, xo, scale);
      continue;
    }
    bool outside = s.coord == "tf_crop_and_resize" && (xo < 0 || xo > in - 1);
    double fl = std::floor(xo);
    double ratio = xo - fl;
    std::vector<double> c = coeffs_for(s, ratio);
    int n = static_cast<int>(c.size());
    // neighbours: floor - n/2 + 1 ... floor + n/2 (edge-clamped)
    int64_t base = static_cast<int64_t>(fl) - n / 2 + 1;
    std::vector<int64_t> ids(n);
    for (int k = 0; k < n; ++k) ids[k] = base + k;
    if (s.exclude_outside) {
      double sum = 0;
      for (int k = 0; k < n; ++k) {
        if (ids[k] < 0 || ids[k] >= in) c[k] = 0;
        sum += c[k];
      }
      if (sum != 0)
        for (double& v : c) v /= sum;
    }
    for (int64_t& id : ids) id = std::clamp<int64_t>(id, 0, in - 1);
    p.idx.push_back(ids);
    p.w.push_back(c);
    p.outside.push_back(outside);
  }
  return p;
}

Status map_resize(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  OpBuilder& o = m.o();
  auto xs = static_sizes(o.shape(x));
  if (!xs) return m.fail(ErrorCode::unsupported, "Resize needs static input dims");
  const int r = static_cast<int>(xs->size());
  ResizeSpec s;
  s.mode = m.as("mode", "nearest");
  if (s.mode != "nearest" && s.mode != "linear" && s.mode != "cubic") return m.fail(ErrorCode::unsupported, "mode '", s.mode, "'");
  const bool old = m.node->op_type() == "Upsample" || m.opset < 11;
  if (old) {
    s.coord = "asymmetric";
    s.nearest = "floor";
  } else {
    s.coord = m.as("coordinate_transformation_mode", "half_pixel");
    static const std::set<std::string> coords = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                                 "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    if (!coords.count(s.coord) && !(s.coord == "half_pixel_symmetric" && m.opset >= 19))
      return m.fail(ErrorCode::unsupported, "coordinate_transformation_mode '", s.coord, "' at opset ", m.opset);
    s.nearest = m.as("nearest_mode", "round_prefer_floor");
    if (s.nearest != "round_prefer_floor" && s.nearest != "round_prefer_ceil" && s.nearest != "floor" && s.nearest != "ceil")
      return m.fail(ErrorCode::unsupported, "nearest_mode '", s.nearest, "'");
    s.antialias = m.ai("antialias", 0) != 0;
    s.cubic_a = m.af("cubic_coeff_a", -0.75);
    s.exclude_outside = m.ai("exclude_outside", 0) != 0;
    s.extrapolation = m.af("extrapolation_value", 0.0);
  }
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  if (m.node->op_type() == "Upsample" && m.has_attr("scales")) scales = m.afloats("scales");
  int scales_in = old ? 1 : 2;
  if (m.has(scales_in)) {
    RLX_ASSIGN_OR_RETURN(Tensor t, m.konst(scales_in));
    if (t.numel() > 0) scales = t.to_f64();
  }
  if (!old && m.has(3)) {
    RLX_ASSIGN_OR_RETURN(Tensor t, m.konst(3));
    if (t.numel() > 0) { RLX_ASSIGN_OR_RETURN(sizes, tensor_ints(t, m.where() + ": sizes")); }
  }
  if (!old && m.has(1)) {
    RLX_ASSIGN_OR_RETURN(Tensor t, m.konst(1));
    roi = t.to_f64();
  }
  // opset 18: scales, sizes and roi may name only some axes; the others keep their size
  std::vector<int> axes;
  if (m.has_attr("axes")) {
    std::vector<bool> seen(r, false);
    for (int64_t a : m.aints("axes")) {
      RLX_ASSIGN_OR_RETURN(int ax, axis_of(m, a, r));
      if (seen[ax]) return m.fail(ErrorCode::invalid_argument, "axes repeats axis ", a);
      seen[ax] = true;
      axes.push_back(ax);
    }
  } else {
    for (int i = 0; i < r; ++i) axes.push_back(i);
  }
  const size_t na = axes.size();
  const std::string policy = m.as("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return m.fail(ErrorCode::unsupported, "keep_aspect_ratio_policy '", policy, "'");
  Sizes out(*xs);
  std::vector<double> sc(r, 1.0);
  if (!sizes.empty()) {
    if (sizes.size() != na) return m.fail(ErrorCode::shape_error, "sizes needs ", na, " entries");
    if (policy != "stretch") {
      // one scale for every named axis: the largest that fits (not_larger) or the smallest
      // that covers (not_smaller) the sizes; the output size is that scale times the input's
      double k = policy == "not_larger" ? INFINITY : 0;
      for (size_t i = 0; i < na; ++i) {
        const double f = (*xs)[axes[i]] ? static_cast<double>(sizes[i]) / (*xs)[axes[i]] : 1.0;
        k = policy == "not_larger" ? std::min(k, f) : std::max(k, f);
      }
      for (size_t i = 0; i < na; ++i) {
        sc[axes[i]] = k;
        const double o_size = std::round(k * static_cast<double>((*xs)[axes[i]]));
        if (!(o_size >= 0 && o_size <= 1e12)) return m.fail(ErrorCode::invalid_argument, "output size ", o_size);
        out[axes[i]] = static_cast<int64_t>(o_size);
      }
    } else {
      for (size_t i = 0; i < na; ++i) {
        if (sizes[i] < 0 || sizes[i] > (int64_t{1} << 40)) return m.fail(ErrorCode::invalid_argument, "size ", sizes[i]);
        out[axes[i]] = sizes[i];
        sc[axes[i]] = (*xs)[axes[i]] ? static_cast<double>(sizes[i]) / (*xs)[axes[i]] : 1.0;
      }
    }
  } else {
    if (scales.size() != na) return m.fail(ErrorCode::shape_error, "scales needs ", na, " entries");
    for (size_t i = 0; i < na; ++i) {
      if (!(scales[i] > 0) || scales[i] > 1e6) return m.fail(ErrorCode::invalid_argument, "scale ", scales[i]);
      sc[axes[i]] = scales[i];
      out[axes[i]] = static_cast<int64_t>(std::floor((*xs)[axes[i]] * scales[i]));
    }
  }
  if (!roi.empty() && na != static_cast<size_t>(r)) {
    if (roi.size() != 2 * na) return m.fail(ErrorCode::shape_error, "roi needs ", 2 * na, " entries");
    std::vector<double> full(2 * r);
    for (int i = 0; i < r; ++i) full[i] = 0, full[i + r] = 1;
    for (size_t i = 0; i < na; ++i) full[axes[i]] = roi[i], full[axes[i] + r] = roi[i + na];
    roi = full;
  }
  if (s.coord == "tf_crop_and_resize" && static_cast<int>(roi.size()) != 2 * r)
    return m.fail(ErrorCode::shape_error, "tf_crop_and_resize needs roi with ", 2 * r, " entries");
  {
    auto n = checked_numel(out);
    if (!n || *n > (int64_t{1} << 30)) return m.fail(ErrorCode::unsupported, "output too large");
  }
  ValueId y = x;
  ValueId outside = kNoValue;
  for (int ax = 0; ax < r; ++ax) {
    const int64_t in = (*xs)[ax];
    const bool crop = s.coord == "tf_crop_and_resize";
    if (out[ax] == in && sc[ax] == 1.0 && !crop) continue;
    if (out[ax] > (int64_t{1} << 20)) return m.fail(ErrorCode::unsupported, "output axis longer than 2^20");
    if (in == 0) return m.fail(ErrorCode::shape_error, "cannot resize an empty axis");
    // an antialiased window spans about 2 / scale input pixels per output pixel, one gather each
    if (s.antialias && s.mode != "nearest" && sc[ax] < 1 && (s.mode == "linear" ? 2.0 : 4.0) / sc[ax] > 1024)
      return m.fail(ErrorCode::unsupported, "antialiased resize by ", sc[ax], " on axis ", ax,
                    " (windows over 1024 input pixels)");
    AxisPlan p = plan_axis(s, in, out[ax], sc[ax], crop ? roi[ax] : 0, crop ? roi[ax + r] : 1);
    size_t taps = 0;
    for (const auto& w : p.w) taps = std::max(taps, w.size());
    for (size_t j = 0; j < p.w.size(); ++j) {  // antialiased windows differ in length: pad with zero weights
      p.w[j].resize(taps, 0.0);
      p.idx[j].resize(taps, p.idx[j].back());
    }
    std::vector<int64_t> wshape(r, 1);
    wshape[ax] = out[ax];
    ValueId acc = kNoValue;
    for (size_t k = 0; k < taps; ++k) {
      Tensor idx = Tensor::zeros(DType::i64, {out[ax]});
      Tensor w = Tensor::zeros(o.dtype(x), {out[ax]});
      bool any = false;
      for (int64_t j = 0; j < out[ax]; ++j) {
        idx.data<int64_t>()[j] = p.idx[j][k];
        w.set_f64(j, p.w[j][k]);
        any |= p.w[j][k] != 0;
      }
      if (!any) continue;
      ValueId g = o.gather(y, m.c(idx), ax);
      ValueId term = s.mode == "nearest" ? g : o.mul(g, o.reshape(m.c(w), wshape));
      if (s.mode == "nearest") {
        // nearest picks one neighbour: zero weights select nothing
        Tensor sel = Tensor::zeros(DType::boolean, {out[ax]});
        for (int64_t j = 0; j < out[ax]; ++j) sel.bytes()[j] = p.w[j][k] != 0;
        term = acc == kNoValue ? g : o.where(o.reshape(m.c(sel), wshape), g, acc);
        acc = term;
        continue;
      }
      acc = acc == kNoValue ? term : o.add(acc, term);
    }
    if (acc == kNoValue) acc = o.mul(o.gather(y, m.c(Tensor::zeros(DType::i64, {out[ax]})), ax), o.scalar_like(0, y));
    y = acc;
    if (crop) {
      Tensor mask = Tensor::zeros(DType::boolean, {out[ax]});
      bool any = false;
      for (int64_t j = 0; j < out[ax]; ++j) {
        mask.bytes()[j] = p.outside[j];
        any |= p.outside[j];
      }
      if (any) {
        ValueId mk = o.reshape(m.c(mask), wshape);
        outside = outside == kNoValue ? mk : o.binary(Op::Or, outside, mk);
      }
    }
  }
  if (outside != kNoValue) y = o.where(outside, o.scalar_like(s.extrapolation, y), y);
  if (y == x) y = o.reshape(x, std::vector<int64_t>(r, 0));
  return m.out(0, y);
}

// GridSample (opsets 16 and 20, 4-D) as PyTorch's grid_sample computes it: the grid is unnormalized
// (align_corners or not), clipped (border) or reflected then clipped (reflection), and every
// tap (1 nearest, 2x2 bilinear, 4x4 bicubic with A = -0.75) is a gather from the flattened
// input at a data-dependent index; taps outside the image contribute 0.
Status map_grid_sample(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId grid, m.in(1));
  OpBuilder& o = m.o();
  auto xs = static_sizes(o.shape(x));
  auto gs = static_sizes(o.shape(grid));
  if (!xs || !gs || xs->size() != 4 || gs->size() != 4 || (*gs)[3] != 2 || (*gs)[0] != (*xs)[0])
    return m.fail(ErrorCode::unsupported, "GridSample needs static 4-D input and [N, H, W, 2] grid (opset 20's "
                  "volumetric form is not supported)");
  const int64_t N = (*xs)[0], C = (*xs)[1], H = (*xs)[2], W = (*xs)[3], Ho = (*gs)[1], Wo = (*gs)[2];
  if (N > (int64_t{1} << 20)) return m.fail(ErrorCode::unsupported, "batch larger than 2^20");
  // opset 20 renamed the modes for N-D grids: linear and cubic (bilinear and bicubic before)
  const bool v20 = m.opset >= 20;
  std::string mode = m.as("mode", v20 ? "linear" : "bilinear");
  const std::string pad = m.as("padding_mode", "zeros");
  const bool align = m.ai("align_corners", 0) != 0;
  if (mode == (v20 ? "linear" : "bilinear")) mode = "bilinear";
  else if (mode == (v20 ? "cubic" : "bicubic")) mode = "bicubic";
  else if (mode != "nearest") return m.fail(ErrorCode::unsupported, "mode '", mode, "' at opset ", m.opset);
  if (pad != "zeros" && pad != "border" && pad != "reflection") return m.fail(ErrorCode::unsupported, "padding_mode '", pad, "'");
  DType dt = o.dtype(grid);
  auto k = [&](double v) { return o.scalar(v, dt); };
  // border clips a coordinate to the image, reflection reflects it (about the edge pixels'
  // centres with align_corners, about their outer edges without) and then clips it
  auto bound = [&](ValueId c, int64_t size) {
    auto clip = [&](ValueId v) { return o.min(o.max(v, k(0)), k(double(size - 1))); };
    if (pad == "border") c = clip(c);
    if (pad == "reflection") {
      double lo2 = align ? 0 : -1, hi2 = align ? 2.0 * (size - 1) : 2.0 * size - 1;
      if (lo2 == hi2) {
        c = o.mul(c, k(0));
      } else {
        double mn = lo2 / 2, span = (hi2 - lo2) / 2;
        ValueId a = o.abs(o.sub(c, k(mn)));
        ValueId flips = o.unary(Op::Floor, o.div(a, k(span)));
        ValueId extra = o.sub(a, o.mul(flips, k(span)));
        ValueId even = o.binary(Op::Equal, o.op(Op::Mod, {flips, k(2)}, Attrs{{"fmod", int64_t{1}}}), k(0));
        c = o.where(even, o.add(extra, k(mn)), o.add(o.sub(k(span), extra), k(mn)));
      }
      c = clip(c);
    }
    return c;
  };
  auto coord = [&](int64_t comp, int64_t size) {
    ValueId g = o.reshape(o.slice(grid, {comp}, {comp + 1}, {3}), {N, Ho, Wo});
    return align ? o.mul(o.add(g, k(1)), k((size - 1) / 2.0)) : o.div(o.sub(o.mul(o.add(g, k(1)), k(double(size))), k(1)), k(2));
  };
  ValueId cx = coord(0, W), cy = coord(1, H);
  // per-axis taps: integer positions (as floats) and weights. Nearest and bilinear bound the
  // coordinate; bicubic bounds each of its four taps (PyTorch's and ONNX Runtime's order).
  auto taps = [&](ValueId c, int64_t size, std::vector<ValueId>& pos, std::vector<ValueId>& wts) {
    if (mode == "nearest") {
      pos.push_back(o.op(Op::Round, {bound(c, size)}));
      wts.push_back(k(1));
      return;
    }
    if (mode == "bilinear") {
      c = bound(c, size);
      ValueId f = o.unary(Op::Floor, c), t = o.sub(c, f);
      pos = {f, o.add(f, k(1))};
      wts = {o.sub(k(1), t), t};
      return;
    }
    ValueId f = o.unary(Op::Floor, c), t = o.sub(c, f);
    const double A = -0.75;
    auto cc1 = [&](ValueId v) { return o.add(o.mul(o.mul(o.sub(o.mul(k(A + 2), v), k(A + 3)), v), v), k(1)); };
    auto cc2 = [&](ValueId v) {
      return o.sub(o.mul(o.add(o.mul(o.sub(o.mul(k(A), v), k(5 * A)), v), k(8 * A)), v), k(4 * A));
    };
    pos = {o.sub(f, k(1)), f, o.add(f, k(1)), o.add(f, k(2))};
    if (pad != "zeros")
      for (ValueId& p : pos) p = o.op(Op::Round, {bound(p, size)});
    wts = {cc2(o.add(t, k(1))), cc1(t), cc1(o.sub(k(1), t)), cc2(o.sub(k(2), t))};
  };
  std::vector<ValueId> px, wx, py, wy;
  taps(cx, W, px, wx);
  taps(cy, H, py, wy);
  // rows of the flattened input: [N*H*W, C]
  ValueId flat = o.reshape(o.transpose(x, {0, 2, 3, 1}), {N * H * W, C});
  // index arithmetic in i32 where it fits (it does below 2^31 input elements): devices that
  // emulate 64-bit integers (webgpu) compile a far smaller kernel
  const DType ix = N * H * W < (int64_t{1} << 31) ? DType::i32 : DType::i64;
  Tensor base = Tensor::zeros(ix, {N, 1, 1});
  for (int64_t n = 0; n < N; ++n) base.set_f64(n, static_cast<double>(n * H * W));
  ValueId basev = m.c(base);
  ValueId acc = kNoValue;
  for (size_t i = 0; i < py.size(); ++i)
    for (size_t j = 0; j < px.size(); ++j) {
      ValueId yi = o.cast(py[i], ix), xi = o.cast(px[j], ix);
      ValueId inside = o.binary(Op::And, o.binary(Op::And, o.binary(Op::GreaterEqual, xi, o.scalar(0, ix)),
                                                  o.binary(Op::Less, xi, o.scalar(double(W), ix))),
                                o.binary(Op::And, o.binary(Op::GreaterEqual, yi, o.scalar(0, ix)),
                                         o.binary(Op::Less, yi, o.scalar(double(H), ix))));
      auto clampi = [&](ValueId v, int64_t n) { return o.min(o.max(v, o.scalar(0, ix)), o.scalar(double(n - 1), ix)); };
      ValueId idx = o.add(basev, o.add(o.mul(clampi(yi, H), o.scalar(double(W), ix)), clampi(xi, W)));
      ValueId w = o.where(inside, o.mul(wy[i], wx[j]), k(0));            // [N, Ho, Wo]
      ValueId v = o.mul(o.gather(flat, idx, 0), o.cast(o.reshape(w, {N, Ho, Wo, 1}), o.dtype(x)));  // [N, Ho, Wo, C]
      acc = acc == kNoValue ? v : o.add(acc, v);
    }
  return m.out(0, o.transpose(acc, {0, 3, 1, 2}));
}

// AffineGrid (opset 20): the sampling grid of an affine transform, theta [N, 2, 3] for a 2-D
// size [N, C, H, W] (grid [N, H, W, 2]) or [N, 3, 4] for 3-D [N, C, D, H, W] (grid
// [N, D, H, W, 3]): the normalized coordinates of every output position (x fastest, in
// [-1, 1]: pixel centres, or the corner pixels' centres with align_corners), times theta.
Status map_affine_grid(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId theta, m.in(0));
  RLX_ASSIGN_OR_RETURN(auto size, m.ints(1));
  OpBuilder& o = m.o();
  const bool align = m.ai("align_corners", 0) != 0;
  if (size.size() != 4 && size.size() != 5) return m.fail(ErrorCode::shape_error, "size must have 4 or 5 entries");
  const int64_t nd = static_cast<int64_t>(size.size()) - 2;
  int64_t points = 1;
  for (size_t i = 2; i < size.size(); ++i) {
    if (size[i] < 1 || size[i] > (int64_t{1} << 20)) return m.fail(ErrorCode::invalid_argument, "size ", size[i]);
    points *= size[i];
  }
  if (points > (int64_t{1} << 22)) return m.fail(ErrorCode::unsupported, "grid of ", points, " points (limit 2^22)");
  auto ts = static_sizes(o.shape(theta));
  if (!ts || *ts != Sizes{size[0], nd, nd + 1})
    return m.fail(ErrorCode::shape_error, "theta must be [", size[0], ", ", nd, ", ", nd + 1, "]");
  // base [points, nd + 1]: (x, y[, z], 1) with x along the last spatial dim
  Tensor base = Tensor::zeros(o.dtype(theta), {points, nd + 1});
  auto norm = [&](int64_t i, int64_t n) {
    if (align) return n > 1 ? -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1) : 0.0;
    return -1.0 + (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(n);
  };
  for (int64_t p = 0; p < points; ++p) {
    int64_t rest = p;
    for (int64_t d = nd - 1; d >= 0; --d) {  // spatial dim d of size size[2 + d]; coordinate nd-1-d
      const int64_t n = size[2 + d], i = rest % n;
      rest /= n;
      base.set_f64(p * (nd + 1) + (nd - 1 - d), norm(i, n));
    }
    base.set_f64(p * (nd + 1) + nd, 1.0);
  }
  ValueId grid = o.matmul(m.c(base), o.transpose(theta, {0, 2, 1}));  // [N, points, nd]
  std::vector<int64_t> shape{size[0]};
  for (size_t i = 2; i < size.size(); ++i) shape.push_back(size[i]);
  shape.push_back(nd);
  return m.out(0, o.reshape(grid, shape));
}

// RoiAlign (opsets 10 and 16), average mode: each region of interest (rois [R, 4] as x1, y1,
// x2, y2 times spatial_scale; half_pixel shifts them by -0.5, output_half_pixel keeps opset
// 10's floor of 1 pixel on their size) is split into output_height x output_width bins, and
// each bin averages sampling_ratio^2 bilinear samples of its image (batch_indices), a sample
// outside [-1, size] counting as 0; as Detectron and ONNX Runtime compute it. The sample
// positions depend on the ROIs, so every tap is a gather at a computed index.
Status map_roi_align(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId rois, m.in(1));
  RLX_ASSIGN_OR_RETURN(ValueId bidx, m.in(2));
  OpBuilder& o = m.o();
  auto xs = static_sizes(o.shape(x));
  auto rs = static_sizes(o.shape(rois));
  if (!xs || xs->size() != 4 || !rs || rs->size() != 2 || (*rs)[1] != 4)
    return m.fail(ErrorCode::unsupported, "needs a static X [N, C, H, W] and rois [R, 4]");
  const std::string mode = m.as("mode", "avg");
  if (mode != "avg") return m.fail(ErrorCode::unsupported, "mode '", mode, "' (rlx imports avg)");
  const std::string coord = m.as("coordinate_transformation_mode", m.opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (coord != "half_pixel" && coord != "output_half_pixel")
    return m.fail(ErrorCode::invalid_argument, "coordinate_transformation_mode '", coord, "'");
  const int64_t oh = m.ai("output_height", 1), ow = m.ai("output_width", 1), g = m.ai("sampling_ratio", 0);
  const double scale = m.af("spatial_scale", 1.0);
  if (g <= 0) return m.fail(ErrorCode::unsupported, "sampling_ratio 0 (adaptive: the sample count depends on the ROIs)");
  if (oh < 1 || ow < 1 || oh > 4096 || ow > 4096 || g > 64)
    return m.fail(ErrorCode::invalid_argument, "output_height, output_width (1 to 4096) and sampling_ratio (1 to 64)");
  const int64_t N = (*xs)[0], C = (*xs)[1], H = (*xs)[2], W = (*xs)[3], R = (*rs)[0];
  auto cells = checked_numel(Sizes{R, oh, ow, g, g});
  if (!cells || *cells > (int64_t{1} << 24)) return m.fail(ErrorCode::unsupported, "more than 2^24 samples");
  const DType dt = o.dtype(x);
  auto k = [&](double v) { return o.scalar(v, dt); };
  auto coordv = [&](int64_t c) { return o.reshape(o.cast(o.slice(rois, {c}, {c + 1}, {1}), dt), {R, 1, 1, 1, 1}); };
  const double off = coord == "half_pixel" ? 0.5 : 0.0;
  ValueId x1 = o.sub(o.mul(coordv(0), k(scale)), k(off)), y1 = o.sub(o.mul(coordv(1), k(scale)), k(off));
  ValueId rw = o.sub(o.sub(o.mul(coordv(2), k(scale)), k(off)), x1), rh = o.sub(o.sub(o.mul(coordv(3), k(scale)), k(off)), y1);
  if (coord == "output_half_pixel") {
    rw = o.max(rw, k(1));
    rh = o.max(rh, k(1));
  }
  ValueId bw = o.div(rw, k(double(ow))), bh = o.div(rh, k(double(oh)));
  auto iota5 = [&](int64_t n, int axis) {
    Sizes s{1, 1, 1, 1, 1};
    s[axis] = n;
    return o.iota(dt, s, axis);
  };
  // sample positions [R, oh, 1, g, 1] and [R, 1, ow, 1, g]
  ValueId y = o.add(o.add(y1, o.mul(iota5(oh, 1), bh)), o.mul(o.add(iota5(g, 3), k(0.5)), o.div(bh, k(double(g)))));
  ValueId xq = o.add(o.add(x1, o.mul(iota5(ow, 2), bw)), o.mul(o.add(iota5(g, 4), k(0.5)), o.div(bw, k(double(g)))));
  struct Axis {
    ValueId lo, hi, frac, valid;
  };
  auto axis = [&](ValueId c, int64_t size) {
    Axis a;
    a.valid = o.binary(Op::And, o.binary(Op::GreaterEqual, c, k(-1)), o.binary(Op::LessEqual, c, k(double(size))));
    c = o.max(c, k(0));
    ValueId lo = o.unary(Op::Floor, c);
    ValueId edge = o.binary(Op::GreaterEqual, lo, k(double(size - 1)));
    lo = o.where(edge, k(double(size - 1)), lo);
    a.hi = o.where(edge, k(double(size - 1)), o.add(lo, k(1)));
    a.frac = o.where(edge, k(0), o.sub(c, lo));
    a.lo = lo;
    return a;
  };
  Axis ay = axis(y, H), ax = axis(xq, W);
  // rows of the flattened images: [N*H*W, C]; each tap a gather at b*H*W + y*W + x
  ValueId flat = o.reshape(o.transpose(x, {0, 2, 3, 1}), {N * H * W, C});
  ValueId base = o.mul(o.reshape(o.cast(bidx, DType::i64), {R, 1, 1, 1, 1}), o.scalar(double(H * W), DType::i64));
  const Sizes full{R, oh, ow, g, g};
  auto tap = [&](ValueId yy, ValueId xx, ValueId w) {
    ValueId idx = o.add(base, o.add(o.mul(o.cast(yy, DType::i64), o.scalar(double(W), DType::i64)), o.cast(xx, DType::i64)));
    idx = o.broadcast_to(idx, full);
    return o.mul(o.gather(flat, idx, 0), o.reshape(o.broadcast_to(w, full), {R, oh, ow, g, g, 1}));
  };
  ValueId one = k(1);
  ValueId hy = o.sub(one, ay.frac), hx = o.sub(one, ax.frac);
  ValueId v = o.add(o.add(tap(ay.lo, ax.lo, o.mul(hy, hx)), tap(ay.lo, ax.hi, o.mul(hy, ax.frac))),
                    o.add(tap(ay.hi, ax.lo, o.mul(ay.frac, hx)), tap(ay.hi, ax.hi, o.mul(ay.frac, ax.frac))));
  ValueId valid = o.reshape(o.broadcast_to(o.cast(o.binary(Op::And, ay.valid, ax.valid), dt), full), {R, oh, ow, g, g, 1});
  ValueId avg = o.div(o.reduce_sum(o.mul(v, valid), {3, 4}, false), k(double(g * g)));  // [R, oh, ow, C]
  RLX_TRY(m.ok().with_context(m.where()));
  return m.out(0, o.transpose(avg, {0, 3, 1, 2}));
}

}  // namespace

// DeformConv (opset 19, torchvision's deform_conv2d): a 2-D convolution whose taps sample the
// input at their grid position plus a learned offset, bilinearly, a corner outside the image
// adding 0, each sample scaled by the optional mask; offsets and masks are per offset group
// of channels. As graph ops: the sampling positions [N, G, K, oH, oW] (K = kH * kW taps),
// four gathers of the corners from the input's rows [N * G * H * W, C / G] with their
// weights, then the columns [N, group, C / group * K, oH * oW] times the weights as one
// batched matmul.
Status map_deform_conv(Importer& m) {
  RLX_TRY(m.only_attrs({"dilations", "group", "kernel_shape", "offset_group", "pads", "strides"}));
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId w, m.in(1));
  RLX_ASSIGN_OR_RETURN(ValueId offset, m.in(2));
  OpBuilder& o = m.o();
  auto xs = static_sizes(o.shape(x)), ws = static_sizes(o.shape(w)), os = static_sizes(o.shape(offset));
  if (!xs || !ws || !os || xs->size() != 4 || ws->size() != 4 || os->size() != 4)
    return m.fail(ErrorCode::unsupported, "DeformConv needs static 4-D X, W and offset (2-D convolution only)");
  const DType dt = o.dtype(x);
  if (!is_float(dt) || o.dtype(w) != dt || o.dtype(offset) != dt)
    return m.fail(ErrorCode::dtype_error, "DeformConv needs X, W and offset of one float type");
  const int64_t N = (*xs)[0], C = (*xs)[1], H = (*xs)[2], W = (*xs)[3];
  const int64_t oC = (*ws)[0], group = m.ai("group", 1), G = m.ai("offset_group", 1);
  std::vector<int64_t> kernel = m.aints("kernel_shape", {(*ws)[2], (*ws)[3]});
  std::vector<int64_t> strides = m.aints("strides", {1, 1}), dil = m.aints("dilations", {1, 1});
  std::vector<int64_t> pads = m.aints("pads", {0, 0, 0, 0});
  if (kernel.size() != 2 || strides.size() != 2 || dil.size() != 2 || pads.size() != 4)
    return m.fail(ErrorCode::format_error, "kernel_shape, strides and dilations need 2 entries, pads 4");
  if (group <= 0 || G <= 0 || C % group || C % G || oC % group || (*ws)[1] != C / group || kernel[0] != (*ws)[2] ||
      kernel[1] != (*ws)[3])
    return m.fail(ErrorCode::shape_error, "W ", sizes_to_string(*ws), " does not fit X ", sizes_to_string(*xs),
                  " with group ", group, " (offset_group ", G, ")");
  for (int a = 0; a < 2; ++a)
    if (strides[a] <= 0 || dil[a] <= 0 || pads[a] < 0 || pads[a + 2] < 0)
      return m.fail(ErrorCode::invalid_argument, "strides and dilations must be positive and pads non-negative");
  const int64_t kH = kernel[0], kW = kernel[1], K = kH * kW;
  const int64_t oH = (H + pads[0] + pads[2] - (dil[0] * (kH - 1) + 1)) / strides[0] + 1;
  const int64_t oW = (W + pads[1] + pads[3] - (dil[1] * (kW - 1) + 1)) / strides[1] + 1;
  if (oH <= 0 || oW <= 0) return m.fail(ErrorCode::shape_error, "the kernel does not fit the padded input");
  if (*os != Sizes{N, G * 2 * K, oH, oW})
    return m.fail(ErrorCode::shape_error, "offset must be ", sizes_to_string(Sizes{N, G * 2 * K, oH, oW}), ", got ",
                  sizes_to_string(*os));
  ValueId mask = kNoValue;
  if (m.has(4)) {
    RLX_ASSIGN_OR_RETURN(mask, m.in(4));
    if (o.dtype(mask) != dt || !static_sizes(o.shape(mask)) || *static_sizes(o.shape(mask)) != Sizes{N, G * K, oH, oW})
      return m.fail(ErrorCode::shape_error, "mask must be ", dtype_name(dt), sizes_to_string(Sizes{N, G * K, oH, oW}));
  }
  if (N * G * H * W >= (int64_t{1} << 31) || N * C * K * oH * oW >= (int64_t{1} << 40))
    return m.fail(ErrorCode::unsupported, "DeformConv larger than rlx's index range");
  auto k = [&](double v) { return o.scalar(v, dt); };
  // the taps' grid positions [K, oH, oW], then plus the offsets [N, G, K, oH, oW]
  Tensor gy = Tensor::zeros(dt, {K, oH, oW}), gx = Tensor::zeros(dt, {K, oH, oW});
  for (int64_t i = 0; i < kH; ++i)
    for (int64_t j = 0; j < kW; ++j)
      for (int64_t y = 0; y < oH; ++y)
        for (int64_t z = 0; z < oW; ++z) {
          const int64_t e = ((i * kW + j) * oH + y) * oW + z;
          gy.set_f64(e, static_cast<double>(y * strides[0] - pads[0] + i * dil[0]));
          gx.set_f64(e, static_cast<double>(z * strides[1] - pads[1] + j * dil[1]));
        }
  ValueId off = o.reshape(offset, {N, G, K, 2, oH, oW});
  ValueId py = o.add(m.c(gy), o.reshape(o.slice(off, {0}, {1}, {3}), {N, G, K, oH, oW}));
  ValueId px = o.add(m.c(gx), o.reshape(o.slice(off, {1}, {2}, {3}), {N, G, K, oH, oW}));
  // rows of the input by (n, offset group, position): [N * G * H * W, C / G]
  const int64_t Cg = C / G;
  ValueId rows = o.reshape(o.transpose(o.reshape(x, {N, G, Cg, H, W}), {0, 1, 3, 4, 2}), {N * G * H * W, Cg});
  Tensor base = Tensor::zeros(DType::i32, {N, G, 1, 1, 1});
  for (int64_t b = 0; b < N * G; ++b) base.set_f64(b, static_cast<double>(b * H * W));
  ValueId basev = m.c(base);
  ValueId fy = o.unary(Op::Floor, py), fx = o.unary(Op::Floor, px);
  ValueId ty = o.sub(py, fy), tx = o.sub(px, fx);
  ValueId acc = kNoValue;
  for (int dy = 0; dy < 2; ++dy)
    for (int dx = 0; dx < 2; ++dx) {
      ValueId yi = o.cast(dy ? o.add(fy, k(1)) : fy, DType::i32), xi = o.cast(dx ? o.add(fx, k(1)) : fx, DType::i32);
      auto in_range = [&](ValueId v, int64_t n) {
        return o.binary(Op::And, o.binary(Op::GreaterEqual, v, o.scalar(0, DType::i32)),
                        o.binary(Op::Less, v, o.scalar(static_cast<double>(n), DType::i32)));
      };
      ValueId inside = o.binary(Op::And, in_range(yi, H), in_range(xi, W));
      auto clampi = [&](ValueId v, int64_t n) {
        return o.min(o.max(v, o.scalar(0, DType::i32)), o.scalar(static_cast<double>(n - 1), DType::i32));
      };
      ValueId idx = o.add(basev, o.add(o.mul(clampi(yi, H), o.scalar(static_cast<double>(W), DType::i32)), clampi(xi, W)));
      ValueId wt = o.mul(dy ? ty : o.sub(k(1), ty), dx ? tx : o.sub(k(1), tx));
      wt = o.where(inside, wt, k(0));
      if (mask != kNoValue) wt = o.mul(wt, o.reshape(mask, {N, G, K, oH, oW}));
      ValueId v = o.mul(o.gather(rows, idx, 0), o.reshape(wt, {N, G, K, oH, oW, 1}));  // [N, G, K, oH, oW, Cg]
      acc = acc == kNoValue ? v : o.add(acc, v);
    }
  // columns [N, group, C / group * K, oH * oW]: channel c = g * Cg + cg, row c * K + tap
  ValueId cols = o.reshape(o.transpose(acc, {0, 1, 5, 2, 3, 4}), {N, group, (C / group) * K, oH * oW});
  ValueId y = o.matmul(o.reshape(w, {1, group, oC / group, (C / group) * K}), cols);  // [N, group, oC / group, P]
  y = o.reshape(y, {N, oC, oH, oW});
  if (m.has(3)) {
    RLX_ASSIGN_OR_RETURN(ValueId bias, m.in(3));
    if (o.dtype(bias) != dt || !static_sizes(o.shape(bias)) || *static_sizes(o.shape(bias)) != Sizes{oC})
      return m.fail(ErrorCode::shape_error, "B must be ", dtype_name(dt), "[", oC, "]");
    y = o.add(y, o.reshape(bias, {1, oC, 1, 1}));
  }
  if (!o.ok()) return o.status().with_context(m.where());
  return m.out(0, y);
}

void register_resize_ops(OpTable& t) {
  t["RoiAlign"] = {map_roi_align};
  t["AffineGrid"] = {map_affine_grid};
  t["GridSample"] = {map_grid_sample};
  t["DeformConv"] = {map_deform_conv};
  t["Resize"] = {map_resize};
  t["Upsample"] = {map_resize};
}

}  // namespace rlx::onnx_import
