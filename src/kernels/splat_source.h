// The GPU devices' native 3D Gaussian splatting kernels (docs/splatting.md), written once in
// C-family source that a small macro prelude per language makes OpenCL C (the opencl device,
// src/backends/opencl/opencl_splat.cpp) or CUDA C++ for NVRTC (the cuda device,
// src/backends/cuda/cuda_splat.cpp), as the CSR kernels of csr_spmv.h are. They compute in
// double, as the cpu's src/splat/ kernels do, step for step:
//
// - splat_project / splat_project_backward: one work item per Gaussian. The projection is
//   written once over a scalar type and instantiated twice, for doubles (the forward) and for
//   forward-mode dual numbers with the 10 geometric parameters as lanes (the backward),
//   mirroring src/splat/project_math.h: the backward is the exact derivative of the code the
//   forward ran.
// - splat_rasterize: a prep kernel gives each Gaussian its tile rectangle (empty when it is
//   not drawn) and a sort key (its depth; +inf when not drawn), a bitonic sort orders the
//   Gaussians by (depth, index), and one work item per pixel composites the sorted Gaussians
//   whose rectangle holds the pixel's tile, front to back, in block x block work-groups that
//   stage block^2 Gaussians at a time in local (shared) memory and stop when every pixel of
//   the group is saturated. The cpu's per-tile lists hold exactly those Gaussians in that order.
// - splat_rasterize_backward: the same prep and sort; each pixel replays its front-to-back
//   pass, then walks back to front adding its terms into per-Gaussian double sums with 64-bit
//   atomics (compare-and-swap in OpenCL C; CUDA's atomicAdd on double from sm_60, a
//   compare-and-swap loop before), so the summation order and the last bits vary between runs;
//   the background's gradient is a fixed-order reduction by one work-group of 64.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/device.h"

namespace rlx::kernels {

// The raster kernels' work-group side on cuda (16 x 16 threads per block); the opencl device
// picks 16 or 8 by its work-group limit.
constexpr int kSplatCudaBlock = 16;
// The work-group of rlx_splat_background_sum (one group, of this many items).
constexpr int kSplatBackgroundItems = 64;
// The most Gaussians a node may have: the sort's padded power-of-two length must fit an int.
constexpr int64_t kSplatMaxGaussians = int64_t{1} << 30;

// OpenCL C of splat op `op`'s kernels for element type `dt` (f32 or f64: the tensors' type;
// the arithmetic is double) with raster work-groups of block x block (fp64 enabled, int64
// atomics too for the backward, no contraction into fused multiply-adds).
std::string splat_opencl_source(Op op, DType dt, int block);
// CUDA C++ (NVRTC) of the same kernels, `extern "C" __global__`, blocks of kSplatCudaBlock.
std::string splat_cuda_source(Op op, DType dt);

// The entry points of `op`'s source (the projection's source holds both projection kernels,
// the backward raster's also the forward's). Their arguments (T the element type; buffers are
// device pointers, scalars int):
//   rlx_splat_project(cam, means, log_scales, quats, sh, n, k, means2d, conics, depths, radii,
//     colors) and rlx_splat_project_backward(cam, means, log_scales, quats, sh, n, k, g_means2d,
//     g_conics, g_depths, g_colors, d_means, d_log_scales, d_quats, d_sh): n items;
//   rlx_splat_prep(means2d, depths, radii, opacities, n, padded, tile, tiles_x, tiles_y, rect,
//     skip, keys, order): `padded` (splat_sort_length(n)) items;
//   rlx_splat_sort_step(keys, order, j, k): exactly `padded` items, for k = 2, 4, ..., padded
//     and j = k/2, ..., 1 (in that order);
//   rlx_splat_raster(means2d, conics, colors, opacities, background, rect, skip, order, n, tile,
//     width, height, image) and rlx_splat_raster_backward(the same but the image, g_image, acc,
//     bg_terms): groups of block x block over the image (rounded up), acc zeroed first;
//   rlx_splat_gradients_out(acc, n, d_means2d, d_conics, d_colors, d_opacities): n items;
//   rlx_splat_background_sum(bg_terms, pixels, d_background): one group of kSplatBackgroundItems.
// cam holds splat_camera_buffer's 22 doubles, rect an int4 per Gaussian, skip a double per
// Gaussian, keys and order `padded` doubles and ints, acc 9 doubles per Gaussian, bg_terms 3
// doubles per pixel.
std::vector<std::string> splat_kernel_names(Op op);

// The camera of a splat_project(_backward) node as the projection kernels' `cam` buffer:
// r[9], t[3], campos[3], fx, fy, cx, cy, near, width, height.
std::array<double, 22> splat_camera_buffer(const Attrs& attrs);

// The padded length of the device-side sort of n Gaussians: the least power of two >= n (1
// for none).
int splat_sort_length(int n);

// A device's claim for a splat node, as far as the kernels themselves go (f32/f64 tensors,
// static shapes, at most kSplatMaxGaussians), naming `language` ("OpenCL", "CUDA") in the
// text: "CUDA splatting kernel splat_rasterize (f32, 300 Gaussians, 64x48 tile 16, sorted on
// the device)". The device adds its own conditions (fp64, atomics, work-group sizes).
Claim claim_splat_kernels(const NodeDesc& n, std::string_view language);

}  // namespace rlx::kernels
