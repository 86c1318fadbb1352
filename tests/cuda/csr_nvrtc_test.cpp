// The cuda device's native CSR kernels (kernels/csr_spmv.h) checked without a GPU: their CUDA
// C++ (the kernel bodies shared with OpenCL C, under the CUDA prelude) compiles with NVRTC for
// sm_90 and sm_80, every kernel an unmangled entry point; and the legalizer, asked as a GPU
// of a given capability would answer (cuda::make_codegen_device), claims spmv_csr and
// sddmm_csr natively with the CSR kernel, and the kernel each scheduled node names is in the
// compiled program. sparse_solve stays illegal with its reason. Launches and results need a
// GPU: the op conformance suite covers them on cuda there.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>

#include "kernels/csr_spmv.h"
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_nvrtc.h"
#include "cuda/nvrtc_symbols.h"
#include "rlx/dispatch.h"
#include "rlx/op_builder.h"
#include "rlx/sparse.h"

namespace rlx {
namespace {

// The kernels a source instantiates: RLX_SPMV(name, ...), RLX_SPMV_T(...), RLX_SDDMM(...).
std::set<std::string> instantiated(const std::string& source) {
  static const std::regex inst(R"(\nRLX_(?:SPMV|SPMV_T|SDDMM)\((rlx_native_[a-z0-9_]+),)");
  std::set<std::string> names;
  for (std::sregex_iterator it(source.begin(), source.end(), inst), end; it != end; ++it) names.insert((*it)[1].str());
  return names;
}

using nvrtc_test::cubin_has_symbol;
using nvrtc_test::ptx_entries;

// A graph of the two CSR ops in the given dtypes: y = A x (x [m, 3]), y_t = A^T xt, and
// sddmm(a, b) (k = 4), on one 6 x 5 pattern with 9 entries.
Graph csr_graph(DType value, DType index) {
  const int64_t n = 6, m = 5, nnz = 9;
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  const ValueId rp = g.add_input("row_ptr", TensorType{index, {n + 1}});
  const ValueId ci = g.add_input("col_idx", TensorType{index, {nnz}});
  const ValueId va = g.add_input("values", TensorType{value, {nnz}});
  const ValueId x = g.add_input("x", TensorType{value, {m, 3}});
  const ValueId xt = g.add_input("xt", TensorType{value, {n}});
  const ValueId a = g.add_input("a", TensorType{value, {n, 4}});
  const ValueId b = g.add_input("b", TensorType{value, {m, 4}});
  g.outputs = {sparse::spmv(o, rp, ci, va, x),
               o.op(Op::SpmvCsr, {rp, ci, va, xt}, Attrs{{"transpose", int64_t{1}}, {"cols", m}}),
               o.op(Op::SddmmCsr, {rp, ci, a, b})};
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  return g;
}

class CudaCsrNvrtc : public ::testing::TestWithParam<std::string> {};

// Every kernel of the CUDA source compiles and is an entry point under its own name: a CUBIN
// for the architecture, and PTX (whose .entry lines name the kernels) for its compute_XY.
TEST_P(CudaCsrNvrtc, EveryKernelCompiles) {
  const std::string arch = GetParam();
  const std::string source = kernels::csr_spmv_cuda_source(/*f64_scatter=*/true);
  const std::set<std::string> names = instantiated(source);
  // SpMV and SDDMM in f32/f64 x i32/i64, and the transposed SpMV in both value dtypes
  ASSERT_EQ(names.size(), 12u) << source;
  for (DType v : {DType::f32, DType::f64})
    for (DType i : {DType::i32, DType::i64})
      for (auto [sddmm, transposed] : {std::pair{false, false}, {false, true}, {true, false}})
        EXPECT_EQ(names.count(kernels::csr_kernel_name(sddmm, transposed, v, i)), 1u)
            << kernels::csr_kernel_name(sddmm, transposed, v, i);
  EXPECT_EQ(instantiated(kernels::csr_spmv_cuda_source(false)).size(), 10u) << "no f64 scatter without f64 atomics";

  auto cubin = cuda::nvrtc_compile(source, arch);
  ASSERT_TRUE(cubin.has_value()) << arch << ": " << cubin.status().to_string();
  ASSERT_FALSE((*cubin)->ptx);
  for (const std::string& k : names)
    EXPECT_TRUE(cubin_has_symbol((*cubin)->bytes, k)) << k << " not in the " << arch << " CUBIN";
  EXPECT_FALSE(cubin_has_symbol((*cubin)->bytes, "rlx_native_spmv_f16_i32")) << "the symbol search finds anything";

  const std::string compute = "compute_" + arch.substr(arch.find('_') + 1);
  auto ptx = cuda::nvrtc_compile(source, compute);
  ASSERT_TRUE(ptx.has_value()) << compute << ": " << ptx.status().to_string();
  ASSERT_TRUE((*ptx)->ptx);
  EXPECT_EQ(ptx_entries((*ptx)->bytes), names) << "the entry points are the kernels, unmangled (extern \"C\")";
}

INSTANTIATE_TEST_SUITE_P(Archs, CudaCsrNvrtc, ::testing::Values("sm_90", "sm_80"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The OpenCL source is the same bodies under the OpenCL prelude: its kernels are the CUDA
// ones less the f64 scatter (no portable 64-bit float atomics), and it has no CUDA in it.
TEST(CudaCsr, OpenclSourceSharesTheKernels) {
  const std::string cl = kernels::csr_spmv_opencl_source(/*fp64=*/true);
  EXPECT_EQ(instantiated(cl), instantiated(kernels::csr_spmv_cuda_source(false)));
  EXPECT_EQ(cl.find("__global__"), std::string::npos);
  EXPECT_EQ(cl.find("atomicAdd"), std::string::npos);
  EXPECT_NE(cl.find("atomic_cmpxchg"), std::string::npos);
  EXPECT_EQ(instantiated(kernels::csr_spmv_opencl_source(false)).size(), 6u);
}

// The legalizer claims the CSR ops natively on cuda with the CSR kernels, in f32 and f64 and
// with either index dtype; the scheduled program's natives name kernels of the source the
// device compiles (and NVRTC emits them).
TEST(CudaCsr, ClaimedNativelyAndScheduled) {
  auto dev = cuda::make_codegen_device(90);
  const std::string source = kernels::csr_spmv_cuda_source(cuda::has_f64_atomic_add(90));
  auto ptx = cuda::nvrtc_compile(source, "compute_90");
  ASSERT_TRUE(ptx.has_value()) << ptx.status().to_string();
  const std::set<std::string> entries = ptx_entries((*ptx)->bytes);
  for (DType v : {DType::f32, DType::f64})
    for (DType i : {DType::i32, DType::i64}) {
      SCOPED_TRACE(cat(dtype_name(v), "/", dtype_name(i)));
      Graph g = csr_graph(v, i);
      auto lr = legalize(g, *dev, DispatchPolicy{});
      ASSERT_TRUE(lr.has_value()) << lr.status().to_string();
      ASSERT_TRUE(lr->report.ok()) << lr->report.to_text();
      ASSERT_EQ(lr->report.nodes.size(), 3u) << lr->report.to_text();
      for (const NodeDecision& d : lr->report.nodes) {
        EXPECT_EQ(d.path, DispatchPath::native) << lr->report.to_text();
        EXPECT_NE(d.how.find("CSR"), std::string::npos) << d.how;
        EXPECT_NE(d.how.find(cat(dtype_name(v), "/", dtype_name(i))), std::string::npos) << d.how;
      }
      EXPECT_NE(lr->report.nodes[1].how.find("transposed"), std::string::npos) << lr->report.nodes[1].how;
      EXPECT_NE(lr->report.nodes[2].how.find("SDDMM"), std::string::npos) << lr->report.nodes[2].how;
      auto prog = cuda::schedule_program(lr->graph, CompileOptions{.device = "cuda"});
      ASSERT_TRUE(prog.has_value()) << prog.status().to_string();
      ASSERT_EQ(prog->natives.size(), 3u) << prog->listing();
      for (const kir::NativeKernel& nk : prog->natives) {
        NodeDesc nd{nk.op, nk.attrs, nk.input_types, nk.output_types, nk.name};
        auto p = kernels::plan_csr_spmv(nd, cuda::has_f64_atomic_add(90));
        ASSERT_TRUE(p.has_value()) << nk.name << ": " << p.status().to_string();
        EXPECT_EQ(entries.count(p->kernel), 1u) << p->kernel << " is not in the compiled CSR program";
      }
    }
}

// A GPU without f64 atomic adds (before sm_60) refuses the transposed form in f64 with the
// reason (and the common-IR refusal of the sparse rule); f32 and the other forms stay native.
TEST(CudaCsr, F64ScatterNeedsSm60) {
  auto old_gpu = cuda::make_codegen_device(52);
  auto lr = legalize(csr_graph(DType::f64, DType::i32), *old_gpu, DispatchPolicy{});
  ASSERT_TRUE(lr.has_value()) << lr.status().to_string();
  ASSERT_EQ(lr->report.nodes.size(), 3u) << lr->report.to_text();
  EXPECT_EQ(lr->report.nodes[0].path, DispatchPath::native) << lr->report.to_text();
  EXPECT_EQ(lr->report.nodes[1].path, DispatchPath::illegal) << lr->report.to_text();
  EXPECT_NE(lr->report.nodes[1].native_refused.find("needs float atomics"), std::string::npos)
      << lr->report.nodes[1].native_refused;
  EXPECT_NE(lr->report.nodes[1].common_refused.find("no native CSR kernel on this device"), std::string::npos)
      << lr->report.nodes[1].common_refused;
  EXPECT_EQ(lr->report.nodes[2].path, DispatchPath::native) << lr->report.to_text();
  auto f32 = legalize(csr_graph(DType::f32, DType::i32), *old_gpu, DispatchPolicy{});
  ASSERT_TRUE(f32.has_value()) << f32.status().to_string();
  EXPECT_TRUE(f32->report.ok()) << f32->report.to_text();
}

// sparse_solve has no GPU kernel: illegal on cuda with its reason, never a copy to the host.
TEST(CudaCsr, SparseSolveStaysIllegal) {
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  const ValueId rp = g.add_input("row_ptr", TensorType{DType::i32, {5}});
  const ValueId ci = g.add_input("col_idx", TensorType{DType::i32, {7}});
  const ValueId va = g.add_input("values", TensorType{DType::f32, {7}});
  const ValueId b = g.add_input("b", TensorType{DType::f32, {4}});
  g.outputs = {sparse::sparse_solve(o, rp, ci, va, b)};
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  auto lr = legalize(g, *cuda::make_codegen_device(90), DispatchPolicy{});
  const std::string err = lr.has_value() ? lr->report.illegal_error().to_string() : lr.status().to_string();
  if (lr.has_value()) {
    EXPECT_FALSE(lr->report.ok()) << lr->report.to_text();
  }
  EXPECT_NE(err.find("no sparse direct solver on this device"), std::string::npos) << err;
  EXPECT_NE(err.find("sparse_solve has no GPU kernel"), std::string::npos) << err;
}

}  // namespace
}  // namespace rlx
