// The cuda device's native splatting kernels (kernels/splat_source.h, cuda_splat.cpp) checked
// without a GPU: their CUDA C++ (the kernel text the opencl device runs as OpenCL C, under the
// CUDA prelude) compiles with NVRTC for sm_90 and sm_80 in f32 and f64, every kernel an
// unmangled entry point; and the legalizer, asked as a GPU of a given capability would answer
// (cuda::make_codegen_device), claims the four splat ops of a render graph and its gradients
// natively with those kernels, while vulkan and opengl still refuse them with the reason.
// Launches and results need a GPU: the op conformance suite covers them on cuda there.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <regex>
#include <set>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_nvrtc.h"
#include "kernels/splat_source.h"
#include "cuda/nvrtc_symbols.h"
#include "rlx/compile.h"
#include "rlx/dispatch.h"
#include "rlx/splat.h"
#include "train/autodiff.h"

namespace rlx {
namespace {

using nvrtc_test::cubin_has_symbol;
using nvrtc_test::ptx_entries;

std::set<std::string> names_of(Op op) {
  const std::vector<std::string> v = kernels::splat_kernel_names(op);
  return {v.begin(), v.end()};
}

// The three distinct sources (the projection's forward and backward share one).
constexpr Op kSourceOps[] = {Op::SplatProject, Op::SplatRasterize, Op::SplatRasterizeBackward};

struct Case {
  std::string arch;
  DType dt;
};

class CudaSplatNvrtc : public ::testing::TestWithParam<Case> {};

// Each source compiles to a CUBIN for the architecture holding every kernel's symbol, and to
// PTX (compute_XY) whose .entry lines are exactly the kernels, unmangled.
TEST_P(CudaSplatNvrtc, EveryKernelCompiles) {
  const auto [arch, dt] = GetParam();
  const std::string compute = "compute_" + arch.substr(arch.find('_') + 1);
  for (Op op : kSourceOps) {
    SCOPED_TRACE(cat(op_name(op), " ", dtype_name(dt), " ", arch));
    const std::string source = kernels::splat_cuda_source(op, dt);
    const std::set<std::string> names = names_of(op);
    ASSERT_EQ(names.size(), op == Op::SplatProject ? 2u : op == Op::SplatRasterize ? 3u : 6u);
    auto cubin = cuda::nvrtc_compile(source, arch);
    ASSERT_TRUE(cubin.has_value()) << cubin.status().to_string();
    ASSERT_FALSE((*cubin)->ptx);
    for (const std::string& k : names) EXPECT_TRUE(cubin_has_symbol((*cubin)->bytes, k)) << k << " not in the CUBIN";
    EXPECT_FALSE(cubin_has_symbol((*cubin)->bytes, "rlx_splat_nonexistent")) << "the symbol search finds anything";
    auto ptx = cuda::nvrtc_compile(source, compute);
    ASSERT_TRUE(ptx.has_value()) << compute << ": " << ptx.status().to_string();
    ASSERT_TRUE((*ptx)->ptx);
    EXPECT_EQ(ptx_entries((*ptx)->bytes), names) << "the entry points are the kernels, unmangled (extern \"C\")";
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, CudaSplatNvrtc,
                         ::testing::Values(Case{"sm_90", DType::f32}, Case{"sm_90", DType::f64},
                                           Case{"sm_80", DType::f32}, Case{"sm_80", DType::f64}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return cat(i.param.arch, "_", dtype_name(i.param.dt));
                         });

// The two languages are one text: the same kernels, the element type and block as asked, and
// no construct of the other language in either.
TEST(CudaSplat, OpenclAndCudaShareTheKernels) {
  for (Op op : kSourceOps) {
    SCOPED_TRACE(op_name(op));
    const std::string cu = kernels::splat_cuda_source(op, DType::f64);
    const std::string cl = kernels::splat_opencl_source(op, DType::f64, 8);
    for (const std::string& k : names_of(op)) {
      EXPECT_NE(cu.find(" " + k + "("), std::string::npos) << k;
      EXPECT_NE(cl.find(" " + k + "("), std::string::npos) << k;
    }
    EXPECT_NE(cu.find("#define T double\n#define BLK 16\n"), std::string::npos);
    EXPECT_NE(cl.find("#define T double\n#define BLK 8\n"), std::string::npos);
    EXPECT_NE(kernels::splat_cuda_source(op, DType::f32).find("#define T float\n"), std::string::npos);
    for (const char* opencl_only : {"__global ", "__local", "__kernel", "get_global_id", "barrier(", "(int4)(", "#pragma"})
      EXPECT_EQ(cu.find(opencl_only), std::string::npos) << opencl_only << " in the CUDA source";
    for (const char* cuda_only : {"__global__", "__shared__", "__syncthreads", "threadIdx", "make_int4", "extern \"C\""})
      EXPECT_EQ(cl.find(cuda_only), std::string::npos) << cuda_only << " in the OpenCL source";
  }
  EXPECT_NE(kernels::splat_opencl_source(Op::SplatRasterizeBackward, DType::f32, 16).find("cl_khr_int64_base_atomics"),
            std::string::npos);
  EXPECT_EQ(kernels::splat_opencl_source(Op::SplatRasterize, DType::f32, 16).find("cl_khr_int64_base_atomics"),
            std::string::npos);
}

// A render of n random Gaussians (SH degree 1) and the gradients of a random weighting of its
// image with respect to every parameter: all four splat ops.
Graph render_and_gradients(DType dt, int64_t n) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  const splat::Camera cam = splat::Camera::look_at({0.3, -0.2, -0.5}, {0, 0, 4}, {0, 1, 0}, 40, 24, 16);
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  const Sizes sizes[] = {{n, 3}, {n, 3}, {n, 4}, {n}, {n, 4, 3}, {3}};
  const char* names[] = {"means", "log_scales", "quats", "opacity_logits", "sh", "background"};
  std::vector<ValueId> x;
  for (int i = 0; i < 6; ++i) x.push_back(g.add_input(names[i], TensorType{dt, to_shape(sizes[i])}));
  const ValueId img = splat::render(o, x[0], x[1], x[2], x[3], x[4], x[5], cam);
  std::vector<double> w(static_cast<size_t>(cam.height * cam.width * 3));
  for (double& v : w) v = u(rng);
  const ValueId loss =
      o.reduce_sum(o.mul(img, o.constant(Tensor::from_f64(dt, {cam.height, cam.width, 3}, w))), {}, false);
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  auto grads = train::gradients(g, loss, x);
  EXPECT_TRUE(grads.has_value()) << grads.status().to_string();
  g.outputs = {img, loss};
  if (grads) g.outputs.insert(g.outputs.end(), grads->begin(), grads->end());
  return g;
}

// The legalizer claims all four splat ops natively on cuda with the CUDA splatting kernels, in
// f32 and f64; the scheduled program runs them as native steps.
TEST(CudaSplat, ClaimedNativelyAndScheduled) {
  auto dev = cuda::make_codegen_device(90);
  for (DType dt : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dt));
    auto lr = legalize(render_and_gradients(dt, 5), *dev, DispatchPolicy{});
    ASSERT_TRUE(lr.has_value()) << lr.status().to_string();
    ASSERT_TRUE(lr->report.ok()) << lr->report.to_text();
    std::set<Op> native;
    for (const NodeDecision& d : lr->report.nodes)
      if (op_info(d.op).family == OpFamily::splat) {
        EXPECT_EQ(d.path, DispatchPath::native) << lr->report.to_text();
        EXPECT_NE(d.how.find("CUDA splatting kernel"), std::string::npos) << d.how;
        EXPECT_NE(d.how.find(cat("(", dtype_name(dt), ", 5 Gaussians")), std::string::npos) << d.how;
        native.insert(d.op);
      }
    EXPECT_EQ(native, (std::set<Op>{Op::SplatProject, Op::SplatProjectBackward, Op::SplatRasterize,
                                    Op::SplatRasterizeBackward}))
        << lr->report.to_text();
    auto prog = cuda::schedule_program(lr->graph, CompileOptions{.device = "cuda"});
    ASSERT_TRUE(prog.has_value()) << prog.status().to_string();
    std::set<Op> scheduled;
    for (const kir::NativeKernel& nk : prog->natives) scheduled.insert(nk.op);
    EXPECT_EQ(scheduled, native) << prog->listing();
  }
}

// A GPU without atomicAdd on double (before sm_60) refuses the raster backward with the
// reason; the other three stay native. Shapes the kernels do not take are refused too.
TEST(CudaSplat, RefusalsSayWhy) {
  auto lr = legalize(render_and_gradients(DType::f32, 5), *cuda::make_codegen_device(52), DispatchPolicy{});
  ASSERT_TRUE(lr.has_value()) << lr.status().to_string();
  EXPECT_FALSE(lr->report.ok());
  int refused = 0;
  for (const NodeDecision& d : lr->report.nodes) {
    if (op_info(d.op).family != OpFamily::splat) continue;
    if (d.op == Op::SplatRasterizeBackward) {
      ++refused;
      EXPECT_EQ(d.path, DispatchPath::illegal) << lr->report.to_text();
      EXPECT_NE(d.native_refused.find("atomicAdd on double, which needs sm_60"), std::string::npos) << d.native_refused;
    } else {
      EXPECT_EQ(d.path, DispatchPath::native) << lr->report.to_text();
    }
  }
  EXPECT_EQ(refused, 1) << lr->report.to_text();
  const Attrs none;
  const std::vector<TensorType> halves = {TensorType{DType::f16, to_shape({4, 3})}};
  const Claim c = cuda::claim_native(NodeDesc{Op::SplatProject, none, halves, {}, "p"}, 90);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.text.find("the CUDA splatting kernels take f32 or f64, got f16"), std::string::npos) << c.text;
}

// vulkan and opengl have no splatting kernels: illegal with the reason, which names where the
// ops run.
TEST(CudaSplat, VulkanAndOpenglStillRefuse) {
  const Graph g = render_and_gradients(DType::f32, 5);
  for (const char* dev : {"vulkan", "opengl"}) {
    auto rep = explain(g, dev, DispatchPolicy{});
    if (!rep.has_value()) {
      std::printf("%s not checked: %s\n", dev, rep.status().to_string().c_str());
      continue;
    }
    EXPECT_FALSE(rep->ok()) << dev << "\n" << rep->to_text();
    const std::string err = rep->illegal_error().to_string();
    EXPECT_NE(err.find("no native splatting kernel on this device"), std::string::npos) << dev << ": " << err;
    EXPECT_NE(err.find("cpu, ref, opencl and cuda"), std::string::npos) << dev << ": " << err;
  }
}

}  // namespace
}  // namespace rlx
