// The cuda device's splatting launches (cuda_splat.h). The kernels' arguments and launch sizes
// are those of kernels/splat_source.h, as the opencl device binds them (opencl_splat.cpp).
#include "cuda_splat.h"

#include <algorithm>
#include <array>

#include "kernels/splat_source.h"

namespace rlx::cuda {

SplatLaunches::Launch& SplatLaunches::Launch::mem(void* p) {
  values.push_back(Arg{p, 0, true});
  return *this;
}

SplatLaunches::Launch& SplatLaunches::Launch::num(int64_t v) {
  values.push_back(Arg{nullptr, static_cast<int>(v), false});
  return *this;
}

void SplatLaunches::Launch::seal() {
  args.clear();
  for (Arg& a : values) args.push_back(a.is_ptr ? static_cast<void*>(&a.ptr) : static_cast<void*>(&a.num));
}

SplatLaunches::~SplatLaunches() {
  for (void* m : owned_) cudaFree(m);
}

Expected<void*> SplatLaunches::scratch(size_t bytes) {
  void* m = nullptr;
  bytes = std::max<size_t>(bytes, 16);
  RLX_TRY(cuda_check(cudaMalloc(&m, bytes), cat("cudaMalloc of ", bytes, " bytes of splatting scratch for ", name_)));
  owned_.push_back(m);
  return m;
}

SplatLaunches::Launch& SplatLaunches::add_1d(cudaKernel_t kernel, int64_t items) {
  auto l = std::make_unique<Launch>();
  l->kernel = kernel;
  // 128 threads a block: the projection backward's dual numbers take 254 registers a thread
  // (NVRTC 13, sm_80), and 256 of those would need the whole 64K-register file of an SM
  const int64_t threads = std::clamp<int64_t>(items, 1, 128);
  l->block = dim3(static_cast<unsigned>(threads));
  l->grid = dim3(static_cast<unsigned>((items + threads - 1) / threads));
  launches_.push_back(std::move(l));
  return *launches_.back();
}

Expected<std::unique_ptr<SplatLaunches>> SplatLaunches::create(Runtime& rt, const NodeDesc& node,
                                                               const std::vector<void*>& in,
                                                               const std::vector<void*>& out) {
  std::unique_ptr<SplatLaunches> s(new SplatLaunches());
  s->name_ = node.name;
  RLX_TRY(s->build(rt, node, in, out));
  for (auto& l : s->launches_) l->seal();  // the values no longer move
  return s;
}

Status SplatLaunches::build(Runtime& rt, const NodeDesc& node, const std::vector<void*>& in,
                            const std::vector<void*>& out) {
  const std::string source = kernels::splat_cuda_source(node.op, node.inputs[0].dtype);
  const int n = static_cast<int>(static_sizes(node.inputs[0].shape)->at(0));  // at most 2^30 (the claim)
  if (node.op == Op::SplatProject || node.op == Op::SplatProjectBackward) {
    const std::array<double, 22> cam = kernels::splat_camera_buffer(node.attrs);
    RLX_ASSIGN_OR_RETURN(void* cm, scratch(sizeof cam));
    RLX_TRY(cuda_check(cudaMemcpy(cm, cam.data(), sizeof cam, cudaMemcpyHostToDevice),
                       "cudaMemcpy of the camera of " + name_));
    const int k = static_cast<int>(static_sizes(node.inputs[3].shape)->at(1));
    const bool fwd = node.op == Op::SplatProject;
    RLX_ASSIGN_OR_RETURN(cudaKernel_t kern, rt.kernel(source, fwd ? "rlx_splat_project" : "rlx_splat_project_backward"));
    if (n == 0) return Status::ok();
    // inputs: means 0, log_scales 1, quats 2, sh 3 (and the backward's g_means2d 4, g_conics 5,
    // g_depths 6, g_colors 7)
    Launch& l = add_1d(kern, n);
    l.mem(cm).mem(in[0]).mem(in[1]).mem(in[2]).mem(in[3]).num(n).num(k);
    if (!fwd) l.mem(in[4]).mem(in[5]).mem(in[6]).mem(in[7]);
    for (void* m : out) l.mem(m);
    return Status::ok();
  }

  const int64_t width = node.attrs.i("width"), height = node.attrs.i("height"), tile = node.attrs.i("tile", 16);
  const int tiles_x = static_cast<int>((width + tile - 1) / tile), tiles_y = static_cast<int>((height + tile - 1) / tile);
  const int64_t blk = kernels::kSplatCudaBlock;
  const int64_t blocks_x = (width + blk - 1) / blk, blocks_y = (height + blk - 1) / blk;
  if (blocks_x > INT32_MAX || blocks_y > 65535)
    return error(ErrorCode::unsupported, name_, ": a ", width, "x", height, " image needs more blocks than one CUDA launch has");

  // prep and sort. inputs: means2d 0, conics 1, colors 2, opacities 3, depths 4, radii 5,
  // background 6 (and the backward's g_image 7)
  const int padded = kernels::splat_sort_length(n);
  const size_t gaussians = static_cast<size_t>(std::max(n, 1));
  RLX_ASSIGN_OR_RETURN(void* rect, scratch(4 * sizeof(int) * gaussians));  // an int4 each
  RLX_ASSIGN_OR_RETURN(void* skip, scratch(sizeof(double) * gaussians));
  RLX_ASSIGN_OR_RETURN(void* keys, scratch(sizeof(double) * static_cast<size_t>(padded)));
  RLX_ASSIGN_OR_RETURN(void* order, scratch(sizeof(int) * static_cast<size_t>(padded)));
  RLX_ASSIGN_OR_RETURN(cudaKernel_t prep, rt.kernel(source, "rlx_splat_prep"));
  add_1d(prep, padded)
      .mem(in[0]).mem(in[4]).mem(in[5]).mem(in[3])
      .num(n).num(padded).num(tile).num(tiles_x).num(tiles_y)
      .mem(rect).mem(skip).mem(keys).mem(order);
  // a sort step has no bound check: `padded` threads exactly (a power of two: blocks of 128
  // divide it once it exceeds 128)
  RLX_ASSIGN_OR_RETURN(cudaKernel_t step, rt.kernel(source, "rlx_splat_sort_step"));
  for (int k = 2; k <= padded; k *= 2)
    for (int j = k / 2; j > 0; j /= 2) add_1d(step, padded).mem(keys).mem(order).num(j).num(k);

  const bool fwd = node.op == Op::SplatRasterize;
  RLX_ASSIGN_OR_RETURN(cudaKernel_t raster, rt.kernel(source, fwd ? "rlx_splat_raster" : "rlx_splat_raster_backward"));
  auto pixels = std::make_unique<Launch>();
  pixels->kernel = raster;
  pixels->grid = dim3(static_cast<unsigned>(blocks_x), static_cast<unsigned>(blocks_y));
  pixels->block = dim3(static_cast<unsigned>(blk), static_cast<unsigned>(blk));
  Launch& a = *pixels;
  a.mem(in[0]).mem(in[1]).mem(in[2]).mem(in[3]).mem(in[6]);
  a.mem(rect).mem(skip).mem(order).num(n).num(tile).num(width).num(height);
  if (fwd) {
    a.mem(out[0]);
    if (blocks_x > 0 && blocks_y > 0) launches_.push_back(std::move(pixels));
    return Status::ok();
  }
  zero_bytes_ = sizeof(double) * 9 * gaussians;
  RLX_ASSIGN_OR_RETURN(zero_, scratch(zero_bytes_));  // acc: 9 sums per Gaussian
  RLX_ASSIGN_OR_RETURN(void* terms, scratch(sizeof(double) * 3 * static_cast<size_t>(width * height)));
  a.mem(in[7]).mem(zero_).mem(terms);
  if (blocks_x > 0 && blocks_y > 0) launches_.push_back(std::move(pixels));
  // outputs: d_means2d 0, d_conics 1, d_colors 2, d_opacities 3, d_background 4
  RLX_ASSIGN_OR_RETURN(cudaKernel_t gout, rt.kernel(source, "rlx_splat_gradients_out"));
  if (n > 0) add_1d(gout, n).mem(zero_).num(n).mem(out[0]).mem(out[1]).mem(out[2]).mem(out[3]);
  RLX_ASSIGN_OR_RETURN(cudaKernel_t bsum, rt.kernel(source, "rlx_splat_background_sum"));
  Launch& b = add_1d(bsum, kernels::kSplatBackgroundItems);  // one block: the kernel sums in a fixed order
  b.mem(terms).num(width * height).mem(out[4]);
  return Status::ok();
}

Status SplatLaunches::enqueue(cudaStream_t s) {
  if (zero_bytes_)
    RLX_TRY(cuda_check(cudaMemsetAsync(zero_, 0, zero_bytes_, s), "cudaMemsetAsync zeroing the gradient sums of " + name_));
  for (const auto& l : launches_)
    RLX_TRY(cuda_check(cudaLaunchKernel(reinterpret_cast<const void*>(l->kernel), l->grid, l->block, l->args.data(), 0, s),
                       "cudaLaunchKernel (splatting) of " + name_));
  return Status::ok();
}

}  // namespace rlx::cuda
