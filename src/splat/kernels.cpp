// The entry points of the splatting kernels (splat_kernels.h): the claim a host device makes
// for a splat node and the dispatch of one node to its typed kernel.
#include <string>

#include "kernels_internal.h"
#include "splat_kernels.h"

namespace rlx::splat {
namespace {

using namespace detail;

template <class F>
Status run_typed(Op op, const Attrs& attrs, std::span<const TensorType> in_types, std::span<const void* const> in,
                 std::span<void* const> out) {
  auto I = [&](size_t i) { return static_cast<const F*>(in[i]); };
  auto O = [&](size_t i) { return static_cast<F*>(out[i]); };
  const Sizes s0 = *static_sizes(in_types[0].shape);
  const int64_t n = s0[0];
  switch (op) {
    case Op::SplatProject:
    case Op::SplatProjectBackward: {
      const Camera c = camera_of(attrs);
      const int k = static_cast<int>(static_sizes(in_types[3].shape)->at(1));
      if (op == Op::SplatProject)
        project_forward<F>(c, n, k, I(0), I(1), I(2), I(3), O(0), O(1), O(2), O(3), O(4));
      else
        project_backward<F>(c, n, k, I(0), I(1), I(2), I(3), I(4), I(5), I(6), I(7), O(0), O(1), O(2), O(3));
      return Status::ok();
    }
    case Op::SplatRasterize:
    case Op::SplatRasterizeBackward: {
      const RasterIn<F> r{n, attrs.i("width"), attrs.i("height"), attrs.i("tile", 16), I(0), I(1), I(2), I(3),
                          I(4), I(5), I(6)};
      if (op == Op::SplatRasterize) return rasterize_forward<F>(r, O(0));
      return rasterize_backward<F>(r, I(7), O(0), O(1), O(2), O(3), O(4));
    }
    default: break;
  }
  return error(ErrorCode::internal, op_name(op), " is not a splatting op");
}

}  // namespace

Claim claim_splat(const NodeDesc& n) {
  if (op_info(n.op).family != OpFamily::splat) return Claim::no(cat(op_name(n.op), " is not a splatting op"));
  const DType dt = n.inputs.empty() ? DType::f32 : n.inputs[0].dtype;
  if (dt != DType::f32 && dt != DType::f64)
    return Claim::no(cat("the splatting kernels compute in f32 or f64, got ", dtype_name(dt)));
  for (const TensorType& t : n.inputs)
    if (!static_sizes(t.shape)) return Claim::no("the splatting kernels need static shapes");
  const int64_t gaussians = static_sizes(n.inputs[0].shape)->at(0);
  const bool raster = n.op == Op::SplatRasterize || n.op == Op::SplatRasterizeBackward;
  return Claim::yes(cat("host splatting kernel ", op_name(n.op), " (", dtype_name(dt), ", ", gaussians, " Gaussians",
                        raster ? cat(", ", n.attrs.i("width"), "x", n.attrs.i("height"), " tile ", n.attrs.i("tile", 16))
                               : std::string(),
                        ")"));
}

Status run_splat(Op op, const Attrs& attrs, std::span<const TensorType> in_types, std::span<const void* const> in,
                 std::span<const TensorType> out_types, std::span<void* const> out) {
  if (in_types.empty() || in.size() != in_types.size() || out.size() != out_types.size())
    return error(ErrorCode::internal, op_name(op), ": inputs or outputs do not match their types");
  for (const TensorType& t : in_types)
    if (!static_sizes(t.shape)) return error(ErrorCode::shape_error, op_name(op), ": the splatting kernels need static shapes");
  Status s = in_types[0].dtype == DType::f64 ? run_typed<double>(op, attrs, in_types, in, out)
             : in_types[0].dtype == DType::f32
                 ? run_typed<float>(op, attrs, in_types, in, out)
                 : error(ErrorCode::dtype_error, op_name(op), ": the splatting kernels compute in f32 or f64, got ",
                         dtype_name(in_types[0].dtype));
  return s;
}

}  // namespace rlx::splat
