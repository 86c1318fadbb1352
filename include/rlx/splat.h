// rlx/splat.h: 3D Gaussian splatting as graph-level ops (docs/splatting.md), the scene files
// of the original 3DGS (binary PLY) and a PNG writer for the rendered images.
//
// Two ops, each differentiable (autodiff emits its backward op):
//   splat_project   Gaussians (means [N,3], log-scales [N,3], quaternions [N,4] as w x y z,
//                   spherical-harmonics colours [N,K,3] with K = 1, 4, 9 or 16) through a pinhole
//                   camera -> 2D means, conics (inverse of the EWA screen covariance
//                   J W Sigma W^T J^T + 0.3 I, stored a b c), depths, radii (3 sigma in pixels,
//                   0 when culled) and view-dependent colours (SH + 0.5, clamped at 0).
//   splat_rasterize tile binning (16x16 pixels by default), depth sorting and front-to-back
//                   alpha compositing into an [H, W, 3] image over a background colour, with the
//                   original 3DGS constants: alpha = min(0.99, opacity * G), Gaussians with
//                   alpha < 1/255 skipped, stop before transmittance drops below 1e-4.
// Pixel (x, y) is sampled at (x + 0.5, y + 0.5); the camera looks along +z with y down (OpenCV).
// Devices: cpu and ref run the host kernels of src/splat/ in f32 or f64; every other device
// reports the nodes illegal ("no native splatting kernel on this device").
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/op_builder.h"

namespace rlx::splat {

// A pinhole camera: viewmat is the row-major 4x4 world-to-camera transform (rotation and
// translation), focal lengths and principal point in pixels.
struct Camera {
  std::array<double, 16> viewmat{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  double fx = 1, fy = 1, cx = 0, cy = 0;
  int64_t width = 1, height = 1;
  double near = 0.01;

  // The camera's node attributes (viewmat, fx, fy, cx, cy, width, height, near).
  Attrs attrs() const;
  // A camera at `eye` looking at `target`, with `up` giving the image's upward direction, a
  // vertical field of view in degrees and the principal point at the image centre.
  static Camera look_at(std::array<double, 3> eye, std::array<double, 3> target, std::array<double, 3> up,
                        double fov_y_degrees, int64_t width, int64_t height);
};

// Parses a camera spec "ex,ey,ez,tx,ty,tz[,fov_y_degrees[,upx,upy,upz]]" (eye, target, field of
// view, default 50 degrees, up direction, default 0,1,0) for an image of width x height.
Expected<Camera> parse_camera(std::string_view spec, int64_t width, int64_t height);

struct Projection {
  ValueId means2d, conics, depths, radii, colors;  // [N,2], [N,3], [N], [N], [N,3]
};

// One splat_project node.
Projection project(OpBuilder& o, ValueId means, ValueId log_scales, ValueId quats, ValueId sh, const Camera& camera);
// One splat_rasterize node: opacities [N] in [0, 1], background [3] -> image [H, W, 3].
ValueId rasterize(OpBuilder& o, const Projection& p, ValueId opacities, ValueId background, int64_t width,
                  int64_t height, int64_t tile = 16);
// project, sigmoid of the opacity logits, rasterize: the renderer of the original 3DGS.
ValueId render(OpBuilder& o, ValueId means, ValueId log_scales, ValueId quats, ValueId opacity_logits, ValueId sh,
               ValueId background, const Camera& camera);

// A scene as the original 3DGS stores it: per Gaussian a mean, log-scales, a quaternion
// (w x y z, not necessarily normalized), an opacity logit and sh_coeffs x 3 SH coefficients
// (coefficient-major: sh[(i * sh_coeffs + k) * 3 + channel]).
struct Scene {
  int64_t count = 0;
  int sh_coeffs = 1;  // 1, 4, 9 or 16
  std::vector<float> means, log_scales, quats, opacity_logits, sh;
};

// Reads a binary_little_endian PLY written by the original 3DGS: element vertex with float
// properties x y z, f_dc_0..2, f_rest_0..(3 (K - 1) - 1) (channel-major, K - 1 per channel),
// opacity, scale_0..2, rot_0..3 (nx ny nz and other float properties are read past). Strict:
// the header's size and line count are bounded, every property is float, required ones
// appear once, the vertex count times the row size must equal the bytes after the header
// exactly, and every value is finite. Errors name the file and the property or offset.
Expected<Scene> load_ply(const std::string& path);
// The same on a PLY file's bytes in memory; `name` is what errors call the file.
Expected<Scene> parse_ply(std::span<const uint8_t> bytes, const std::string& name);
// Writes `scene` in that format (with nx ny nz zero).
Status save_ply(const Scene& scene, const std::string& path);

// Writes an 8-bit RGB PNG (stored deflate blocks: no compression library needed) of an image
// [height, width, 3] with values in [0, 1] (clamped; NaN writes 0).
Status write_png(const std::string& path, const float* rgb, int64_t width, int64_t height);

}  // namespace rlx::splat
