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

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_nvrtc.h"
#include "conformance/conformance.h"
#include "rlx/dispatch.h"

namespace rlx {
namespace {

using conformance::OpCases;
using conformance::Variant;

// One case's kernels, rendered with a prefix unique within the op's translation unit.
struct RenderedCase {
  std::string label;    // "f32 basic" (and "(common)" when rendered with dot forced common)
  std::string kernels;  // CUDA C++ of the case's generated kernels
  int count = 0;        // generated kernels
};

struct OpRender {
  Op op;
  std::vector<RenderedCase> cases;
  int illegal = 0;                    // cases the cuda device refuses (with the reasons below)
  std::set<std::string> illegal_why;  // distinct reasons
  std::vector<std::string> errors;    // legalize/schedule/render failures
};

std::set<std::string> ops_filter() {
  std::set<std::string> r;
  if (const char* e = std::getenv("RLX_CUDA_NVRTC_OPS")) {
    std::stringstream ss(e);
    std::string s;
    while (std::getline(ss, s, ',')) r.insert(s);
  }
  return r;
}

// Why an illegal node (or the illegal node a rewrite made) cannot run: its common-IR refusal.
std::string leaf_refusal(const NodeDecision& d) {
  for (const NodeDecision& c : d.children)
    if (c.path == DispatchPath::illegal) return leaf_refusal(c);
  return d.common_refused.empty() ? d.native_refused : d.common_refused;
}

// "add on c64[7, 13]: ..." -> "add on c64: ...", so a refusal reads the same for every variant.
std::string without_shapes(const std::string& s) {
  static const std::regex shapes(R"(\[[0-9, ]*\])");
  return std::regex_replace(s, shapes, "");
}

// Renders one legalized case; `tag` goes into kernel names and the label.
Status render_case(const Graph& primitive, const std::string& prefix, RenderedCase& out) {
  RLX_ASSIGN_OR_RETURN(kir::KernelProgram prog, cuda::schedule_program(primitive, CompileOptions{.device = "cuda"}));
  RLX_ASSIGN_OR_RETURN(std::string k, cuda::render_kernels(prog, prefix));
  out.kernels = std::move(k);
  out.count = static_cast<int>(prog.generated.size());
  return Status::ok();
}

OpRender render_op(const OpCases& oc, const Device& dev) {
  OpRender r;
  r.op = oc.op;
  DispatchPolicy common;
  common.default_policy = PathPolicy::force_common;
  int index = 0;
  for (const Variant& v : oc.variants) {
    for (DType dt : conformance::candidate_dtypes()) {
      if (!v.only.empty() && std::find(v.only.begin(), v.only.end(), dt) == v.only.end()) continue;
      auto g = conformance::build_case_graph(oc, v, dt, /*seed=*/1);
      if (!g) continue;  // type inference does not accept this dtype: not a case
      const std::string label = cat(dtype_name(dt), " ", v.name);
      auto lr = legalize(*g, dev, DispatchPolicy{});
      if (!lr || !lr->report.ok()) {
        if (lr && !lr->report.ok()) {
          ++r.illegal;
          for (const NodeDecision& d : lr->report.nodes)
            if (d.path == DispatchPath::illegal) r.illegal_why.insert(without_shapes(leaf_refusal(d)));
        } else if (lr.status().code() == ErrorCode::illegal) {
          ++r.illegal;
          r.illegal_why.insert(without_shapes(lr.status().message().substr(0, 300)));
        } else {
          r.errors.push_back(cat(label, ": legalize: ", lr.status().to_string()));
        }
        continue;
      }
      RenderedCase rc;
      rc.label = label;
      if (Status s = render_case(lr->graph, cat("c", index++, "_"), rc); !s.ok()) {
        r.errors.push_back(cat(label, ": ", s.to_string()));
        continue;
      }
      const bool has_native = lr->report.count(DispatchPath::native) > 0;
      r.cases.push_back(std::move(rc));
      // a node cuBLAS runs here also has generated code where the plan refuses (other
      // shapes, dtypes): render that path too
      if (has_native) {
        auto lc = legalize(*g, dev, common);
        if (lc && lc->report.ok()) {
          RenderedCase cc;
          cc.label = label + " (common)";
          if (Status s = render_case(lc->graph, cat("c", index++, "_"), cc); !s.ok())
            r.errors.push_back(cat(cc.label, ": ", s.to_string()));
          else
            r.cases.push_back(std::move(cc));
        }
      }
    }
  }
  return r;
}

// Whether NVRTC compiles `kernels` for `arch`; the error text otherwise.
std::string compile_error(const std::string& kernels, const std::string& arch) {
  auto img = cuda::nvrtc_compile(cuda::translation_unit(kernels), arch);
  if (!img) return img.status().message();
  if ((*img)->bytes.empty()) return "NVRTC returned an empty image";
  return "";
}

class NvrtcEveryCase : public ::testing::TestWithParam<std::string> {};

TEST_P(NvrtcEveryCase, Compiles) {
  const std::string arch = GetParam();
  const int cc = std::stoi(arch.substr(arch.find('_') + 1));
  auto dev = cuda::make_codegen_device(cc);
  const auto filter = ops_filter();
  std::vector<const OpCases*> ops;
  for (const OpCases& oc : conformance::case_table())
    if (filter.empty() || filter.count(std::string(op_name(oc.op)))) ops.push_back(&oc);
  ASSERT_FALSE(ops.empty()) << "no op matches RLX_CUDA_NVRTC_OPS";

  // render everything first (fast), then compile one unit per op on two threads
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<OpRender> renders;
  for (const OpCases* oc : ops) renders.push_back(render_op(*oc, *dev));
  const double render_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  int ops_with_cases = 0, ops_all_illegal = 0, rendered = 0;
  for (const OpRender& r : renders) {
    ops_with_cases += !r.cases.empty();
    ops_all_illegal += r.cases.empty() && r.illegal > 0;
    rendered += static_cast<int>(r.cases.size());
  }
  // Off the primary target (sm_90), CI compiles the first case of each (op, dtype), which
  // exercises every dtype path of every op; RLX_CUDA_NVRTC_FULL=1 compiles all of them.
  const bool full = std::getenv("RLX_CUDA_NVRTC_FULL") != nullptr;
  const bool sample = arch != "sm_90" && !full;
  if (sample)
    for (OpRender& r : renders) {
      std::set<std::string> dtypes;
      std::vector<RenderedCase> kept;
      for (RenderedCase& c : r.cases)
        if (dtypes.insert(c.label.substr(0, c.label.find(' '))).second) kept.push_back(std::move(c));
      r.cases = std::move(kept);
    }
  // Cases whose kernels differ only in their names compile alike: keep one of each. In CI
  // (without RLX_CUDA_NVRTC_FULL) cases that differ only in numbers (shapes, strides,
  // constants) count as alike too: the same code with other literals. Then
  // group the ops into units of about kUnitKernels kernels, so the prelude is parsed a few
  // times instead of once per op; a failing unit is split into its ops, then their cases.
  constexpr int kUnitKernels = 400;
  int duplicates = 0;
  {
    static const std::regex digits("[0-9]+");
    std::set<std::string> seen;
    for (OpRender& r : renders) {
      std::vector<RenderedCase> kept;
      for (RenderedCase& c : r.cases) {
        std::string body = c.kernels;
        for (size_t p = body.find("__global__ void c"); p != std::string::npos; p = body.find("__global__ void c", p + 1)) {
          const size_t e = body.find('_', p + 17);
          body.erase(p + 16, e - (p + 16));
        }
        if (!full) body = std::regex_replace(body, digits, "N");
        if (seen.insert(body).second) kept.push_back(std::move(c));
        else ++duplicates;
      }
      r.cases = std::move(kept);
    }
  }
  std::vector<std::vector<const OpRender*>> units(1);
  int in_unit = 0;
  for (const OpRender& r : renders) {
    if (r.cases.empty()) continue;
    if (in_unit >= kUnitKernels) {
      units.emplace_back();
      in_unit = 0;
    }
    units.back().push_back(&r);
    for (const RenderedCase& c : r.cases) in_unit += c.count;
  }
  std::vector<std::string> failures;
  std::mutex mu;
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < units.size(); i = next++) {
      std::string all;
      for (const OpRender* r : units[i])
        for (const RenderedCase& c : r->cases) all += c.kernels;
      if (all.empty() || compile_error(all, arch).empty()) continue;
      for (const OpRender* r : units[i]) {
        std::string op_all;
        for (const RenderedCase& c : r->cases) op_all += c.kernels;
        if (compile_error(op_all, arch).empty()) continue;
        for (const RenderedCase& c : r->cases) {
          std::string e = compile_error(c.kernels, arch);
          if (e.empty()) continue;
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back(cat(op_name(r->op), " ", c.label, " on ", arch, ": ", e));
        }
      }
    }
  };
  const unsigned nthreads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < nthreads; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  int cases = 0, kernels = 0, illegal = 0;
  std::map<std::string, std::set<std::string>> illegal_why;  // reason -> op/dtype
  for (const OpRender& r : renders) {
    cases += static_cast<int>(r.cases.size());
    for (const RenderedCase& c : r.cases) kernels += c.count;
    illegal += r.illegal;
    for (const std::string& w : r.illegal_why) {
      // "add on c64: why" -> why, listing the ops and dtypes it refuses
      static const std::regex prefix(R"(^([a-z_0-9]+) on ([a-z0-9]+): )");
      std::smatch m;
      if (std::regex_search(w, m, prefix)) illegal_why[m.suffix().str()].insert(cat(op_name(r.op), "/", m[2].str()));
      else illegal_why[w].insert(std::string(op_name(r.op)));
    }
    for (const std::string& e : r.errors) ADD_FAILURE() << op_name(r.op) << " " << e;
  }
  for (const std::string& f : failures) ADD_FAILURE() << f;
  std::cout << "[ nvrtc    ] " << arch << ": " << renders.size() << " ops in the case table, " << ops_with_cases
            << " with cases that run on cuda (" << ops_all_illegal << " illegal in every case), " << rendered
            << " cases rendered" << (sample ? " (sampled: first per op and dtype)" : "") << "; " << cases
            << " cases, " << kernels
            << " kernels compiled in " << units.size() << " units (" << duplicates
            << " cases identical to another skipped), " << failures.size() << " failed; " << illegal
            << " cases illegal on cuda; render " << render_s << " s, total " << total_s << " s (NVRTC "
            << cuda::nvrtc_version() << ")\n";
  for (const auto& [why, where] : illegal_why) {
    std::string list;
    for (const std::string& w : where) list += (list.empty() ? "" : " ") + w;
    std::cout << "[ illegal  ] " << why << ": " << list << "\n";
  }
  if (filter.empty()) {
    // the whole table (an op that cannot render at all fails above, with the error)
    EXPECT_GT(ops_with_cases, 70);
    EXPECT_GT(kernels, sample ? 200 : 1000);
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
  const OpCases* oc = conformance::cases_for(Op::Add);
  ASSERT_NE(oc, nullptr);
  auto dev = cuda::make_codegen_device(90);
  OpRender r = render_op(*oc, *dev);
  ASSERT_FALSE(r.cases.empty());
  const std::string& k = r.cases[0].kernels;
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
