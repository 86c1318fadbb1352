// The rlx/splat.h builder functions (one node each) and the camera helpers.
#include <charconv>
#include <cmath>

#include "rlx/splat.h"

namespace rlx::splat {

Attrs Camera::attrs() const {
  return Attrs{{"viewmat", std::vector<double>(viewmat.begin(), viewmat.end())},
               {"fx", fx}, {"fy", fy}, {"cx", cx}, {"cy", cy}, {"width", width}, {"height", height}, {"near", near}};
}

Camera Camera::look_at(std::array<double, 3> eye, std::array<double, 3> target, std::array<double, 3> up,
                       double fov_y_degrees, int64_t width, int64_t height) {
  auto sub = [](std::array<double, 3> a, std::array<double, 3> b) { return std::array<double, 3>{a[0] - b[0], a[1] - b[1], a[2] - b[2]}; };
  auto cross = [](std::array<double, 3> a, std::array<double, 3> b) {
    return std::array<double, 3>{a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
  };
  auto unit = [](std::array<double, 3> a) {
    const double l = std::sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
    return l > 0 ? std::array<double, 3>{a[0] / l, a[1] / l, a[2] / l} : a;
  };
  // camera axes (OpenCV): z forward, x right, y down = z x x
  const auto z = unit(sub(target, eye));
  const auto x = unit(cross(z, up));
  const auto y = cross(z, x);
  Camera c;
  const std::array<double, 3> rows[3] = {x, y, z};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) c.viewmat[i * 4 + j] = rows[i][j];
    c.viewmat[i * 4 + 3] = -(rows[i][0] * eye[0] + rows[i][1] * eye[1] + rows[i][2] * eye[2]);
  }
  c.width = width;
  c.height = height;
  c.fy = 0.5 * static_cast<double>(height) / std::tan(0.5 * fov_y_degrees * M_PI / 180.0);
  c.fx = c.fy;
  c.cx = 0.5 * static_cast<double>(width);
  c.cy = 0.5 * static_cast<double>(height);
  return c;
}

Expected<Camera> parse_camera(std::string_view spec, int64_t width, int64_t height) {
  std::vector<double> v;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string_view::npos) end = spec.size();
    std::string_view item = spec.substr(pos, end - pos);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    double d = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), d);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() || !std::isfinite(d))
      return error(ErrorCode::invalid_argument, "camera spec '", spec, "': item ", v.size() + 1, " ('", item,
                   "') is not a finite number; expected ex,ey,ez,tx,ty,tz[,fov_y_degrees[,upx,upy,upz]]");
    v.push_back(d);
    pos = end + 1;
  }
  if (v.size() != 6 && v.size() != 7 && v.size() != 10)
    return error(ErrorCode::invalid_argument, "camera spec '", spec, "' has ", v.size(),
                 " numbers; expected 6, 7 or 10: ex,ey,ez,tx,ty,tz[,fov_y_degrees[,upx,upy,upz]]");
  const double fov = v.size() >= 7 ? v[6] : 50.0;
  if (!(fov > 0 && fov < 180)) return error(ErrorCode::invalid_argument, "camera spec '", spec, "': field of view ", fov, " is not in (0, 180) degrees");
  const std::array<double, 3> eye{v[0], v[1], v[2]}, target{v[3], v[4], v[5]};
  const std::array<double, 3> up = v.size() == 10 ? std::array<double, 3>{v[7], v[8], v[9]} : std::array<double, 3>{0, 1, 0};
  const double dx = target[0] - eye[0], dy = target[1] - eye[1], dz = target[2] - eye[2];
  const double cx = dy * up[2] - dz * up[1], cy = dz * up[0] - dx * up[2], cz = dx * up[1] - dy * up[0];
  if (dx * dx + dy * dy + dz * dz == 0 || cx * cx + cy * cy + cz * cz == 0)
    return error(ErrorCode::invalid_argument, "camera spec '", spec, "': the eye equals the target or the view direction is parallel to up");
  if (width < 1 || height < 1) return error(ErrorCode::invalid_argument, "image size ", width, "x", height, " is empty");
  return Camera::look_at(eye, target, up, fov, width, height);
}

Projection project(OpBuilder& o, ValueId means, ValueId log_scales, ValueId quats, ValueId sh, const Camera& camera) {
  std::vector<ValueId> r = o.op_multi(Op::SplatProject, {means, log_scales, quats, sh}, camera.attrs());
  r.resize(5, kNoValue);  // a failed builder returns fewer; o.status() holds the error
  return {r[0], r[1], r[2], r[3], r[4]};
}

ValueId rasterize(OpBuilder& o, const Projection& p, ValueId opacities, ValueId background, int64_t width,
                  int64_t height, int64_t tile) {
  return o.op(Op::SplatRasterize, {p.means2d, p.conics, p.colors, opacities, p.depths, p.radii, background},
              Attrs{{"width", width}, {"height", height}, {"tile", tile}});
}

ValueId render(OpBuilder& o, ValueId means, ValueId log_scales, ValueId quats, ValueId opacity_logits, ValueId sh,
               ValueId background, const Camera& camera) {
  const Projection p = project(o, means, log_scales, quats, sh, camera);
  return rasterize(o, p, o.sigmoid(opacity_logits), background, camera.width, camera.height);
}

}  // namespace rlx::splat
