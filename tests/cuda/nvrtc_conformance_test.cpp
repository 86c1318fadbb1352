// The CUDA renderer checked without a GPU: every case of the op conformance suite (the
// suite's own case table and case builder) is legalized for the cuda device, scheduled by
// the device-independent scheduler and rendered exactly as the cuda device does it, and the
// CUDA C++ is compiled with NVRTC for sm_90 and sm_80. Every case must compile.
//
// Kernels of all cases of one op share one translation unit (as the conformance runner
// builds one program per op), so the prelude is compiled once per op and architecture;
// when a unit fails, its cases are compiled one by one to name the failing ones. NVRTC's
// output is cached on disk (RLX_CACHE_DIR), so reruns on one machine are fast.
//
// Environment: RLX_CUDA_NVRTC_OPS=<op,op,...> limits the check to some ops (replaying);
// RLX_CUDA_NVRTC_FULL=1 compiles every distinct case for every architecture (CI compiles
// every distinct kernel structure for sm_90, and the first case per op and dtype for sm_80).
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <sstream>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_nvrtc.h"
#include "conformance/compile_check.h"
#include "rlx/dispatch.h"

namespace rlx {
namespace {

// The check of conformance/compile_check.h for NVRTC and `arch`, legalized for capability `cc`.
conformance::CompileCheck nvrtc_check(const Device& dev, const std::string& arch) {
  conformance::CompileCheck c;
  c.device = &dev;
  c.render = [](const Graph& g, const std::string& prefix) -> Expected<std::pair<std::string, int>> {
    RLX_ASSIGN_OR_RETURN(kir::KernelProgram prog, cuda::schedule_program(g, CompileOptions{.device = "cuda"}));
    RLX_ASSIGN_OR_RETURN(std::string k, cuda::render_kernels(prog, prefix));
    return std::pair{std::move(k), static_cast<int>(prog.generated.size())};
  };
  c.compile_error = [arch](const std::string& kernels) -> std::string {
    auto img = cuda::nvrtc_compile(cuda::translation_unit(kernels), arch);
    if (!img) return img.status().message();
    if ((*img)->bytes.empty()) return "NVRTC returned an empty image";
    return "";
  };
  if (const char* e = std::getenv("RLX_CUDA_NVRTC_OPS")) {
    std::stringstream ss(e);
    std::string s;
    while (std::getline(ss, s, ',')) c.ops.insert(s);
  }
  return c;
}

class NvrtcEveryCase : public ::testing::TestWithParam<std::string> {};

TEST_P(NvrtcEveryCase, Compiles) {
  const std::string arch = GetParam();
  const int cc = std::stoi(arch.substr(arch.find('_') + 1));
  auto dev = cuda::make_codegen_device(cc);
  conformance::CompileCheck check = nvrtc_check(*dev, arch);
  // Off the primary target (sm_90), CI compiles the first case of each (op, dtype), which
  // exercises every dtype path of every op; RLX_CUDA_NVRTC_FULL=1 compiles all of them.
  check.full = std::getenv("RLX_CUDA_NVRTC_FULL") != nullptr;
  check.sample = arch != "sm_90" && !check.full;
  const conformance::CompileCheckResult r = conformance::compile_every_case(check);
  ASSERT_GT(r.ops, 0) << "no op matches RLX_CUDA_NVRTC_OPS";
  for (const std::string& e : r.errors) ADD_FAILURE() << e;
  for (const std::string& f : r.failures) ADD_FAILURE() << f << " (" << arch << ")";
  std::cout << "[ nvrtc    ] " << (check.sample ? "(sampled: first case per op and dtype) " : "") << "NVRTC "
            << cuda::nvrtc_version() << ", " << r.summary("cuda", arch);
  if (check.ops.empty()) {
    // the whole table (an op that cannot render at all fails above, with the error)
    EXPECT_GT(r.ops_with_cases, 70);
    EXPECT_GT(r.kernels, check.sample ? 200 : 1000);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, NvrtcEveryCase, ::testing::Values("sm_90", "sm_80"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The check can fail: NVRTC errors come back with the log and the call named.
TEST(CudaNvrtc, ReportsCompileErrors) {
  auto img = cuda::nvrtc_compile(cuda::translation_unit("extern \"C\" __global__ void broken(float* p) { p[0] = undefined_name; }\n"), "sm_90");
  ASSERT_FALSE(img);
  EXPECT_NE(img.status().message().find("nvrtcCompileProgram"), std::string::npos) << img.status().message();
  EXPECT_NE(img.status().message().find("undefined_name"), std::string::npos) << img.status().message();
}

// The dialect: one thread per element with 64-bit index math, serial kernels in one thread.
TEST(CudaNvrtc, RendersTheCudaDialect) {
  auto dev = cuda::make_codegen_device(90);
  const std::string k = conformance::first_case_kernels(Op::Add, nvrtc_check(*dev, "sm_90"));
  ASSERT_FALSE(k.empty());
  EXPECT_NE(k.find("extern \"C\" __global__ void c0_"), std::string::npos) << k;
  EXPECT_NE(k.find("(int64_t)blockIdx.x * (int64_t)blockDim.x + (int64_t)threadIdx.x"), std::string::npos) << k;
  EXPECT_NE(k.find("__restrict__"), std::string::npos) << k;
  EXPECT_EQ(k.find("__global "), std::string::npos) << "OpenCL address space in CUDA output:\n" << k;
}

// cuBLAS is not linked (it would cost every process 0.2 s at startup) but loaded when the first
// GEMM runs: the library must be found and have the functions used.
TEST(CudaDevice, CublasLoads) {
  Status s = cuda::load_cublas();
  EXPECT_TRUE(s.ok()) << s.to_string();
}

// The registry lists cuda; without a GPU it is unavailable and says why (the CUDA error).
TEST(CudaDevice, ListedWithReasonWhenUnavailable) {
  for (const DeviceInfo& d : list_devices()) {
    if (d.name != "cuda") continue;
    if (d.available) {
      std::cout << "[ cuda     ] available: " << d.description << "\n";
      EXPECT_FALSE(d.description.empty());
    } else {
      std::cout << "[ cuda     ] unavailable: " << d.reason << "\n";
      EXPECT_NE(d.reason.find("cuda"), std::string::npos) << d.reason;
      auto got = get_device("cuda");
      EXPECT_FALSE(got);
    }
    return;
  }
  FAIL() << "the registry does not list cuda";
}

}  // namespace
}  // namespace rlx
