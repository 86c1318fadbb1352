// Type rules of the 3D Gaussian splatting ops (splat_project, splat_rasterize and their
// backward ops, docs/splatting.md). Every input is f32 or f64 with one dtype per node; N (the
// number of Gaussians) must agree between inputs; camera and image attributes are checked here
// so that a kernel never sees a malformed camera.
#include <cmath>

#include "infer_util.h"

namespace rlx::infer {
namespace {

bool compatible(const Dim& a, const Dim& b) { return a == b || a.is_unknown() || b.is_unknown(); }

// Input i has shape [N, tail...] (tail empty for [N]) and the node's float dtype.
Status expect_rows(Op op, const NodeSig& sig, int i, const char* what, std::initializer_list<int64_t> tail) {
  const TensorType& t = sig.inputs[i];
  if (t.dtype != DType::f32 && t.dtype != DType::f64)
    return fail(ErrorCode::dtype_error, op, sig, what, " (input ", i, ") must be f32 or f64, got ", dtype_name(t.dtype));
  if (i > 0) RLX_TRY(expect_same_dtype(op, sig, 0, i));
  if (t.rank() != 1 + static_cast<int>(tail.size()))
    return fail(ErrorCode::shape_error, op, sig, what, " (input ", i, ") must have rank ", 1 + tail.size(), ", got ",
                shape_to_string(t.shape));
  int d = 1;
  for (int64_t s : tail) {
    if (!compatible(t.shape[d], Dim(s)))
      return fail(ErrorCode::shape_error, op, sig, what, " (input ", i, ") must have size ", s, " in axis ", d, ", got ",
                  shape_to_string(t.shape));
    ++d;
  }
  if (!compatible(t.shape[0], sig.inputs[0].shape[0]))
    return fail(ErrorCode::shape_error, op, sig, what, " (input ", i, ") has ", t.shape[0].to_string(),
                " Gaussians, input 0 has ", sig.inputs[0].shape[0].to_string());
  return Status::ok();
}

Status expect_image(Op op, const NodeSig& sig, int64_t& w, int64_t& h) {
  w = sig.attrs.i("width", 0);
  h = sig.attrs.i("height", 0);
  if (w < 1 || h < 1 || w > (1 << 15) || h > (1 << 15))
    return fail(ErrorCode::verify_error, op, sig, "width and height must be in [1, 32768], got ", w, " x ", h);
  return Status::ok();
}

Status expect_camera(Op op, const NodeSig& sig) {
  int64_t w, h;
  RLX_TRY(expect_image(op, sig, w, h));
  const std::vector<double> vm = sig.attrs.floats("viewmat");
  if (vm.size() != 16) return fail(ErrorCode::verify_error, op, sig, "viewmat must have 16 values (row-major 4x4), got ", vm.size());
  for (double v : vm)
    if (!std::isfinite(v)) return fail(ErrorCode::verify_error, op, sig, "viewmat has a non-finite value");
  for (const char* k : {"fx", "fy"}) {
    const double v = sig.attrs.f(k, 0.0);
    if (!(v > 0) || !std::isfinite(v)) return fail(ErrorCode::verify_error, op, sig, "focal length ", k, " must be positive, got ", v);
  }
  for (const char* k : {"cx", "cy"})
    if (!std::isfinite(sig.attrs.f(k, 0.0))) return fail(ErrorCode::verify_error, op, sig, k, " must be finite");
  const double near = sig.attrs.f("near", 0.01);
  if (!(near > 0) || !std::isfinite(near)) return fail(ErrorCode::verify_error, op, sig, "near must be positive, got ", near);
  return Status::ok();
}

// sh [N, K, 3] with K a square of 1..4 (SH degree 0..3)
Status expect_sh(Op op, const NodeSig& sig, int i) {
  const TensorType& t = sig.inputs[i];
  if (t.rank() != 3)
    return fail(ErrorCode::shape_error, op, sig, "sh (input ", i, ") must be [N, K, 3], got ", shape_to_string(t.shape));
  const Dim& k = t.shape[1];
  if (k.is_static() && k.size() != 1 && k.size() != 4 && k.size() != 9 && k.size() != 16)
    return fail(ErrorCode::shape_error, op, sig, "sh (input ", i, ") must have K = 1, 4, 9 or 16 coefficients "
                "(degree 0..3), got ", k.to_string());
  return expect_rows(op, sig, i, "sh", {t.shape[1].is_static() ? t.shape[1].size() : 1, 3});
}

}  // namespace

Expected<Types> infer_splat(Op op, const NodeSig& sig) {
  const TensorType& m = sig.inputs[0];
  const DType dt = m.dtype;
  const Dim n = m.rank() >= 1 ? m.shape[0] : Dim(0);
  auto rows = [&](std::initializer_list<int64_t> tail) {
    Shape s{n};
    for (int64_t t : tail) s.push_back(Dim(t));
    return TensorType{dt, s};
  };
  switch (op) {
    case Op::SplatProject:
    case Op::SplatProjectBackward: {
      RLX_TRY(expect_camera(op, sig));
      RLX_TRY(expect_rows(op, sig, 0, "means", {3}));
      RLX_TRY(expect_rows(op, sig, 1, "log_scales", {3}));
      RLX_TRY(expect_rows(op, sig, 2, "quats", {4}));
      RLX_TRY(expect_sh(op, sig, 3));
      if (op == Op::SplatProject) return Types{rows({2}), rows({3}), rows({}), rows({}), rows({3})};
      RLX_TRY(expect_rows(op, sig, 4, "means2d gradient", {2}));
      RLX_TRY(expect_rows(op, sig, 5, "conics gradient", {3}));
      RLX_TRY(expect_rows(op, sig, 6, "depths gradient", {}));
      RLX_TRY(expect_rows(op, sig, 7, "colors gradient", {3}));
      return Types{sig.inputs[0], sig.inputs[1], sig.inputs[2], sig.inputs[3]};
    }
    case Op::SplatRasterize:
    case Op::SplatRasterizeBackward: {
      int64_t w, h;
      RLX_TRY(expect_image(op, sig, w, h));
      const int64_t tile = sig.attrs.i("tile", 16);
      if (tile < 1 || tile > 256) return fail(ErrorCode::verify_error, op, sig, "tile must be in [1, 256], got ", tile);
      RLX_TRY(expect_rows(op, sig, 0, "means2d", {2}));
      RLX_TRY(expect_rows(op, sig, 1, "conics", {3}));
      RLX_TRY(expect_rows(op, sig, 2, "colors", {3}));
      RLX_TRY(expect_rows(op, sig, 3, "opacities", {}));
      RLX_TRY(expect_rows(op, sig, 4, "depths", {}));
      RLX_TRY(expect_rows(op, sig, 5, "radii", {}));
      const TensorType& bg = sig.inputs[6];
      RLX_TRY(expect_same_dtype(op, sig, 0, 6));
      if (bg.rank() != 1 || !compatible(bg.shape[0], Dim(3)))
        return fail(ErrorCode::shape_error, op, sig, "background (input 6) must be [3], got ", shape_to_string(bg.shape));
      const TensorType image{dt, Shape{Dim(h), Dim(w), Dim(3)}};
      if (op == Op::SplatRasterize) return Types{image};
      const TensorType& g = sig.inputs[7];
      RLX_TRY(expect_same_dtype(op, sig, 0, 7));
      if (g.rank() != 3 || !compatible(g.shape[0], Dim(h)) || !compatible(g.shape[1], Dim(w)) ||
          !compatible(g.shape[2], Dim(3)))
        return fail(ErrorCode::shape_error, op, sig, "image gradient (input 7) must be [", h, ", ", w, ", 3], got ",
                    shape_to_string(g.shape));
      return Types{sig.inputs[0], sig.inputs[1], sig.inputs[2], sig.inputs[3], bg};
    }
    default: break;
  }
  return fail(ErrorCode::internal, op, sig, "not a splatting op");
}

}  // namespace rlx::infer
