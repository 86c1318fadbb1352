// The rocm device's code generation checked without a GPU (docs/rocm.md): every case of the op
// conformance suite is legalized for the rocm device, scheduled and rendered exactly as the
// device does it, and the HIP C++ is compiled by clang's AMDGPU backend, with the HIP headers
// and the ROCm device libraries, for gfx90a, gfx942 and gfx1100: every distinct kernel
// structure (cases whose kernels differ only in numbers, such as shapes and constants, are
// compiled once; about 35 s per target on 2 cores). A golden test
// reads what generated kernels use from the code object's metadata: no LDS, no scratch, no
// spills, and registers within bounds.
//
// Environment: RLX_ROCM_OPS=<op,op,...> limits the check to some ops; RLX_ROCM_FULL=1
// compiles every distinct case for every target.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <sstream>

#include "backends/rocm/amdgpu_offline.h"
#include "backends/rocm/rocm_codegen.h"
#include "conformance/compile_check.h"
#include "hal/program_executable.h"
#include "rlx/dispatch.h"
#include "rlx/op_builder.h"

namespace rlx {
namespace {

// The compiler or its libraries missing: a failure in CI, a skip with the reason elsewhere.
#define RLX_REQUIRE_AMDGPU_COMPILER()                                     \
  if (Status s_ = rocm::amdgpu_offline_available(); !s_.ok()) {           \
    if (std::getenv("CI")) FAIL() << s_.message();                        \
    GTEST_SKIP() << s_.message();                                         \
  }

conformance::CompileCheck amdgpu_check(const Device& dev, const std::string& gfx) {
  conformance::CompileCheck c;
  c.device = &dev;
  c.render = [](const Graph& g, const std::string& prefix) -> Expected<std::pair<std::string, int>> {
    RLX_ASSIGN_OR_RETURN(kir::KernelProgram prog, hal::schedule_program(g, CompileOptions{.device = "rocm"}));
    RLX_ASSIGN_OR_RETURN(std::string k, rocm::render_kernels(prog, prefix));
    return std::pair{std::move(k), static_cast<int>(prog.generated.size())};
  };
  c.compile_error = [gfx](const std::string& kernels) -> std::string {
    auto co = rocm::compile_amdgpu_offline(rocm::translation_unit(kernels), gfx);
    return co ? "" : co.status().message();
  };
  if (const char* e = std::getenv("RLX_ROCM_OPS")) {
    std::stringstream ss(e);
    std::string s;
    while (std::getline(ss, s, ',')) c.ops.insert(s);
  }
  return c;
}

class AmdgpuEveryCase : public ::testing::TestWithParam<std::string> {};

TEST_P(AmdgpuEveryCase, Compiles) {
  RLX_REQUIRE_AMDGPU_COMPILER();
  const std::string gfx = GetParam();
  auto dev = rocm::make_codegen_device();
  conformance::CompileCheck check = amdgpu_check(*dev, gfx);
  check.full = std::getenv("RLX_ROCM_FULL") != nullptr;
  const conformance::CompileCheckResult r = conformance::compile_every_case(check);
  ASSERT_GT(r.ops, 0) << "no op matches RLX_ROCM_OPS";
  for (const std::string& e : r.errors) ADD_FAILURE() << e;
  for (const std::string& f : r.failures) ADD_FAILURE() << f << " (" << gfx << ")";
  std::cout << "[ amdgpu   ] " << r.summary("rocm", gfx);
  if (check.ops.empty()) {
    EXPECT_GT(r.ops_with_cases, 70);
    EXPECT_GT(r.kernels, 1000);
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, AmdgpuEveryCase, ::testing::ValuesIn(rocm::amdgpu_check_targets()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// A small model's kernels (a linear layer, GELU, softmax over rows, a sum) and what they use
// on each target, from the code object's metadata. Generated kernels keep everything in
// registers (one thread per element, no shared memory), so LDS and scratch must be 0 and
// nothing may spill. Clang 19 gives these kernels at most 43 VGPRs and 22 SGPRs; the bounds
// (64 and 48) leave room for compiler versions, and a change that blows up register pressure
// (and so occupancy) fails here.
TEST(AmdgpuResources, GeneratedKernelsUseNoLdsScratchOrSpills) {
  RLX_REQUIRE_AMDGPU_COMPILER();
  Graph g;
  ValueId x = g.add_input("x", TensorType{DType::f32, Shape{8, 64}});
  ValueId w = g.add_input("w", TensorType{DType::f32, Shape{64, 32}});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId s = o.softmax(o.gelu(o.matmul(x, w)), -1);
  g.outputs = {s, o.reduce_sum(s, {0}, false)};
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  auto dev = rocm::make_codegen_device();
  auto lr = legalize(g, *dev, DispatchPolicy{});
  ASSERT_TRUE(lr.has_value() && lr->report.ok()) << (lr ? lr->report.to_text() : lr.status().to_string());
  auto prog = hal::schedule_program(lr->graph, CompileOptions{.device = "rocm"});
  ASSERT_TRUE(prog.has_value()) << prog.status().to_string();
  auto kernels = rocm::render_kernels(*prog, "rlx_");
  ASSERT_TRUE(kernels.has_value()) << kernels.status().to_string();
  for (const std::string& gfx : rocm::amdgpu_check_targets()) {
    SCOPED_TRACE(gfx);
    auto co = rocm::compile_amdgpu_offline(rocm::translation_unit(*kernels), gfx);
    ASSERT_TRUE(co.has_value()) << co.status().to_string();
    ASSERT_EQ(co->kernels.size(), prog->generated.size());
    const int wave = gfx == "gfx1100" ? 32 : 64;
    for (const rocm::AmdgpuKernelResources& k : co->kernels) {
      std::cout << "[ amdgpu   ] " << gfx << " " << k.name << ": " << k.vgpr_count << " VGPRs, " << k.sgpr_count << " SGPRs, "
                << k.agpr_count << " AGPRs, LDS " << k.lds_bytes << " B, scratch " << k.scratch_bytes << " B, wave "
                << k.wavefront_size << "\n";
      EXPECT_EQ(k.name.rfind("rlx_", 0), 0u) << k.name;
      EXPECT_EQ(k.lds_bytes, 0) << k.name;
      EXPECT_EQ(k.scratch_bytes, 0) << k.name;
      EXPECT_EQ(k.vgpr_spill_count + k.sgpr_spill_count, 0) << k.name;
      EXPECT_EQ(k.wavefront_size, wave) << k.name;
      EXPECT_GT(k.vgpr_count, 0) << k.name;
      EXPECT_LE(k.vgpr_count, 64) << k.name;
      EXPECT_LE(k.sgpr_count, 48) << k.name;
    }
  }
}

// The check can fail: clang's errors come back with its message and the target named.
TEST(AmdgpuCompile, ReportsCompileErrors) {
  RLX_REQUIRE_AMDGPU_COMPILER();
  auto co = rocm::compile_amdgpu_offline(
      rocm::translation_unit("extern \"C\" __global__ void broken(float* p) { p[0] = undefined_name; }\n"), "gfx90a");
  ASSERT_FALSE(co.has_value());
  EXPECT_NE(co.status().message().find("gfx90a"), std::string::npos) << co.status().message();
  EXPECT_NE(co.status().message().find("undefined_name"), std::string::npos) << co.status().message();
  EXPECT_FALSE(rocm::compile_amdgpu_offline("", "gfx90a; rm -rf /").has_value());
}

// The dialect: CUDA's kernel frame (one thread per element, 64-bit index math) in a unit that
// includes hip_runtime.h and makes the prelude's functions device functions.
TEST(RocmDialect, RendersHipCxx) {
  auto dev = rocm::make_codegen_device();
  const std::string k = conformance::first_case_kernels(Op::Add, amdgpu_check(*dev, "gfx90a"));
  ASSERT_FALSE(k.empty());
  EXPECT_NE(k.find("extern \"C\" __global__ void c0_"), std::string::npos) << k;
  EXPECT_NE(k.find("(int64_t)blockIdx.x * (int64_t)blockDim.x + (int64_t)threadIdx.x"), std::string::npos) << k;
  const std::string unit = rocm::translation_unit(k);
  EXPECT_EQ(unit.find("#include <hip/hip_runtime.h>"), unit.find("#include"));
  EXPECT_NE(unit.find("#pragma clang force_cuda_host_device begin"), std::string::npos);
  EXPECT_LT(unit.find("#pragma clang force_cuda_host_device end"), unit.find("extern \"C\" __global__"));
}

// The registry lists rocm; without an AMD GPU it is unavailable and says why (HIP's error, or
// the missing library or headers).
TEST(RocmDevice, ListedWithReasonWhenUnavailable) {
  for (const DeviceInfo& d : list_devices()) {
    if (d.name != "rocm") continue;
    if (d.available) {
      std::cout << "[ rocm     ] available: " << d.description << "\n";
      EXPECT_FALSE(d.description.empty());
    } else {
      std::cout << "[ rocm     ] unavailable: " << d.reason << "\n";
      EXPECT_FALSE(d.reason.empty());
      EXPECT_FALSE(get_device("rocm").has_value());
    }
    return;
  }
  FAIL() << "the registry does not list rocm";
}

}  // namespace
}  // namespace rlx
