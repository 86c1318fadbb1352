// The opencl device's splatting kernels (opencl_splat.h): the launches of the OpenCL C that
// backends/splat_source.cpp writes (one text with the cuda device's kernels).
#include "opencl_splat.h"

#include <algorithm>
#include <array>
#include <string>

#include "kernels/splat_source.h"

namespace rlx::opencl {
namespace {

// The work-group side of the raster kernels: 16 x 16 pixels where the device allows it.
int block_side(const Runtime& rt) { return rt.max_work_group() >= 256 ? 16 : 8; }

}  // namespace

Claim claim_splat(const NodeDesc& n, const Runtime& rt) {
  Claim c = kernels::claim_splat_kernels(n, "OpenCL");
  if (!c.ok) return c;
  if (!rt.fp64()) return Claim::no("the OpenCL splatting kernels compute in double (as the cpu's do); this device has no fp64");
  if (n.op == Op::SplatRasterizeBackward && !rt.int64_atomics())
    return Claim::no("splat_rasterize_backward adds gradients with 64-bit compare-and-swap; this OpenCL device lacks "
                     "cl_khr_int64_base_atomics");
  if (rt.max_work_group() < kernels::kSplatBackgroundItems)
    return Claim::no(cat("the OpenCL splatting kernels need work-groups of ", kernels::kSplatBackgroundItems, " items"));
  return c;
}

SplatLaunches::~SplatLaunches() {
  for (cl_kernel k : kernels_) clReleaseKernel(k);
  for (cl_mem m : owned_) clReleaseMemObject(m);
}

Expected<cl_kernel> SplatLaunches::kernel(cl_program p, const char* name) {
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(p, name, &err);
  RLX_TRY(cl_check(err, cat("clCreateKernel ", name)));
  kernels_.push_back(k);
  return k;
}

Expected<cl_mem> SplatLaunches::scratch(Runtime& rt, size_t bytes, const void* init) {
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(rt.context(), CL_MEM_READ_WRITE | (init ? CL_MEM_COPY_HOST_PTR : 0), std::max<size_t>(bytes, 8),
                            const_cast<void*>(init), &err);
  RLX_TRY(cl_check(err, cat("allocating ", bytes, " bytes of splatting scratch")));
  owned_.push_back(m);
  return m;
}

namespace {

// Binds the arguments of `k` in order: cl_mem buffers and int scalars.
struct Args {
  cl_kernel k;
  cl_uint i = 0;
  Status status = Status::ok();
  Args& mem(cl_mem m) {
    if (status.is_ok()) status = cl_check(clSetKernelArg(k, i, sizeof m, &m), cat("binding splatting argument ", i));
    ++i;
    return *this;
  }
  Args& num(int64_t v) {
    const cl_int x = static_cast<cl_int>(v);
    if (status.is_ok()) status = cl_check(clSetKernelArg(k, i, sizeof x, &x), cat("binding splatting argument ", i));
    ++i;
    return *this;
  }
};

size_t round_up(int64_t v, int64_t m) { return static_cast<size_t>((v + m - 1) / m * m); }

}  // namespace

Status SplatLaunches::prep_and_sort(cl_program p, const std::vector<cl_mem>& in, int n, int tile, int tiles_x,
                                    int tiles_y, cl_mem& rect, cl_mem& skip, cl_mem& order) {
  const int padded = kernels::splat_sort_length(n);
  RLX_ASSIGN_OR_RETURN(rect, scratch(*rt_, sizeof(cl_int4) * static_cast<size_t>(std::max(n, 1))));
  RLX_ASSIGN_OR_RETURN(skip, scratch(*rt_, sizeof(double) * static_cast<size_t>(std::max(n, 1))));
  RLX_ASSIGN_OR_RETURN(cl_mem keys, scratch(*rt_, sizeof(double) * static_cast<size_t>(padded)));
  RLX_ASSIGN_OR_RETURN(order, scratch(*rt_, sizeof(cl_int) * static_cast<size_t>(padded)));
  RLX_ASSIGN_OR_RETURN(cl_kernel prep, kernel(p, "rlx_splat_prep"));
  // inputs: means2d 0, conics 1, colors 2, opacities 3, depths 4, radii 5
  Args a{prep};
  a.mem(in[0]).mem(in[4]).mem(in[5]).mem(in[3]).num(n).num(padded).num(tile).num(tiles_x).num(tiles_y);
  a.mem(rect).mem(skip).mem(keys).mem(order);
  RLX_TRY(a.status);
  launches_.push_back(Launch{prep, 1, {static_cast<size_t>(padded), 1}, {0, 0}, 0, 0});
  RLX_ASSIGN_OR_RETURN(cl_kernel step, kernel(p, "rlx_splat_sort_step"));
  Args b{step};
  b.mem(keys).mem(order);
  RLX_TRY(b.status);
  for (int k = 2; k <= padded; k *= 2)
    for (int j = k / 2; j > 0; j /= 2) launches_.push_back(Launch{step, 1, {static_cast<size_t>(padded), 1}, {0, 0}, j, k});
  return Status::ok();
}

Expected<std::unique_ptr<SplatLaunches>> SplatLaunches::create(Runtime& rt, const NodeDesc& node,
                                                               const std::vector<cl_mem>& in,
                                                               const std::vector<cl_mem>& out) {
  std::unique_ptr<SplatLaunches> s(new SplatLaunches());
  s->rt_ = &rt;
  s->name_ = node.name;
  const DType dt = node.inputs[0].dtype;
  RLX_ASSIGN_OR_RETURN(cl_program p, rt.program(kernels::splat_opencl_source(node.op, dt, block_side(rt))));
  const int n = static_cast<int>(static_sizes(node.inputs[0].shape)->at(0));
  if (node.op == Op::SplatProject || node.op == Op::SplatProjectBackward) {
    const std::array<double, 22> cam = kernels::splat_camera_buffer(node.attrs);
    RLX_ASSIGN_OR_RETURN(cl_mem cm, s->scratch(rt, sizeof cam, cam.data()));
    const int k = static_cast<int>(static_sizes(node.inputs[3].shape)->at(1));
    const bool fwd = node.op == Op::SplatProject;
    RLX_ASSIGN_OR_RETURN(cl_kernel kern, s->kernel(p, fwd ? "rlx_splat_project" : "rlx_splat_project_backward"));
    Args a{kern};
    a.mem(cm).mem(in[0]).mem(in[1]).mem(in[2]).mem(in[3]).num(n).num(k);
    if (!fwd) a.mem(in[4]).mem(in[5]).mem(in[6]).mem(in[7]);
    for (cl_mem m : out) a.mem(m);
    RLX_TRY(a.status);
    if (n > 0) s->launches_.push_back(Launch{kern, 1, {static_cast<size_t>(n), 1}, {0, 0}, 0, 0});
    return s;
  }
  const int64_t width = node.attrs.i("width"), height = node.attrs.i("height"), tile = node.attrs.i("tile", 16);
  const int tiles_x = static_cast<int>((width + tile - 1) / tile), tiles_y = static_cast<int>((height + tile - 1) / tile);
  cl_mem rect, skip, order;
  RLX_TRY(s->prep_and_sort(p, in, n, static_cast<int>(tile), tiles_x, tiles_y, rect, skip, order));
  const int blk = block_side(rt);
  const bool fwd = node.op == Op::SplatRasterize;
  RLX_ASSIGN_OR_RETURN(cl_kernel raster, s->kernel(p, fwd ? "rlx_splat_raster" : "rlx_splat_raster_backward"));
  // the register and local-memory needs of a kernel can lower its work-group limit below the device's
  size_t fits = 0;
  RLX_TRY(cl_check(clGetKernelWorkGroupInfo(raster, rt.device(), CL_KERNEL_WORK_GROUP_SIZE, sizeof fits, &fits, nullptr),
                   "querying the splatting kernel's work-group limit"));
  if (fits < static_cast<size_t>(blk * blk))
    return error(ErrorCode::unsupported, node.name, ": the OpenCL rasterizer needs work-groups of ", blk * blk,
                 " items; this device allows ", fits, " for it");
  // inputs: means2d 0, conics 1, colors 2, opacities 3, depths 4 and radii 5 (read by the prep
  // kernel), background 6
  Args a{raster};
  a.mem(in[0]).mem(in[1]).mem(in[2]).mem(in[3]).mem(in[6]);
  a.mem(rect).mem(skip).mem(order).num(n).num(tile).num(width).num(height);
  const Launch pixels{raster, 2, {round_up(width, blk), round_up(height, blk)}, {static_cast<size_t>(blk), static_cast<size_t>(blk)}, 0, 0};
  if (fwd) {
    a.mem(out[0]);
    RLX_TRY(a.status);
    s->launches_.push_back(pixels);
    return s;
  }
  RLX_ASSIGN_OR_RETURN(cl_mem acc, s->scratch(rt, sizeof(double) * 9 * static_cast<size_t>(std::max(n, 1))));
  RLX_ASSIGN_OR_RETURN(cl_mem terms, s->scratch(rt, sizeof(double) * 3 * static_cast<size_t>(width * height)));
  a.mem(in[7]).mem(acc).mem(terms);
  RLX_TRY(a.status);
  s->zero_.push_back(Fill{acc, sizeof(double) * 9 * static_cast<size_t>(std::max(n, 1))});
  s->launches_.push_back(pixels);
  RLX_ASSIGN_OR_RETURN(cl_kernel gout, s->kernel(p, "rlx_splat_gradients_out"));
  Args b{gout};
  b.mem(acc).num(n).mem(out[0]).mem(out[1]).mem(out[2]).mem(out[3]);
  RLX_TRY(b.status);
  if (n > 0) s->launches_.push_back(Launch{gout, 1, {static_cast<size_t>(n), 1}, {0, 0}, 0, 0});
  RLX_ASSIGN_OR_RETURN(cl_kernel bsum, s->kernel(p, "rlx_splat_background_sum"));
  Args c{bsum};
  c.mem(terms).num(width * height).mem(out[4]);
  RLX_TRY(c.status);
  constexpr size_t items = kernels::kSplatBackgroundItems;
  s->launches_.push_back(Launch{bsum, 1, {items, 1}, {items, 1}, 0, 0});
  return s;
}

Status SplatLaunches::enqueue(cl_command_queue q) {
  for (const Fill& f : zero_) {
    const cl_double zero = 0;
    RLX_TRY(cl_check(clEnqueueFillBuffer(q, f.mem, &zero, sizeof zero, 0, f.bytes, 0, nullptr, nullptr),
                     "zeroing the splatting gradient sums"));
  }
  for (const Launch& l : launches_) {
    if (l.sort_k) {
      const cl_int j = l.sort_j, k = l.sort_k;
      RLX_TRY(cl_check(clSetKernelArg(l.kernel, 2, sizeof j, &j), "binding the sort step"));
      RLX_TRY(cl_check(clSetKernelArg(l.kernel, 3, sizeof k, &k), "binding the sort step"));
    }
    RLX_TRY(cl_check(clEnqueueNDRangeKernel(q, l.kernel, l.dims, nullptr, l.global, l.local[0] ? l.local : nullptr, 0,
                                            nullptr, nullptr),
                     cat("running the splatting kernels of ", name_)));
  }
  return Status::ok();
}

}  // namespace rlx::opencl
