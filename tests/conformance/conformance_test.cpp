// GoogleTest registration of the op conformance suite: one test per op (`Ops/Conformance.Run/<op>`)
// plus the suite-level checks (every op has cases, the manifest parses, every op is illegal on
// the null device with a reason per path, docs/ops.md is current).
//
// Environment:
//   RLX_CONFORMANCE_SEED=<n>      replay a run (the seed is printed with every failure)
//   RLX_WRITE_OPS_MD=<path>       after running every op, write the support matrix there
//   RLX_CONFORMANCE_MANIFEST=<p>  use another manifest (default tests/conformance/manifest.txt)
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>

#include "conformance.h"

namespace rlx::conformance {
namespace {

uint64_t run_seed() {
  static const uint64_t seed = [] {
    if (const char* e = std::getenv("RLX_CONFORMANCE_SEED")) return static_cast<uint64_t>(std::strtoull(e, nullptr, 10));
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

const Manifest& manifest() {
  static const Manifest m = [] {
    auto r = load_manifest(default_manifest_path());
    if (!r) {
      std::cerr << "conformance: " << r.status().to_string() << "\n";
      return Manifest{};
    }
    return *r;
  }();
  return m;
}

// Results of the ops run in this process, for RLX_WRITE_OPS_MD.
std::mutex g_runs_mu;
std::map<Op, OpRun> g_runs;
bool g_unexpected = false;

std::vector<Op> ops_under_test() {
  std::vector<Op> r;
  for (int i = 0; i < kNumOps; ++i)
    if (!exempt_from_cases(static_cast<Op>(i))) r.push_back(static_cast<Op>(i));
  return r;
}

std::vector<std::string> manifest_devices_run() {
  std::vector<std::string> d = devices_under_test();
  d.push_back("ref");
  return d;
}

// ---------------------------------------------------------------- one test per op

class Conformance : public ::testing::TestWithParam<Op> {};

}  // namespace
}  // namespace rlx::conformance

namespace rlx {
// How gtest (and so ctest's test list) prints the parameter: the op's name.
void PrintTo(Op op, std::ostream* os) { *os << op_name(op); }
}  // namespace rlx

namespace rlx::conformance {
namespace {

TEST_P(Conformance, Run) {
  const Op op = GetParam();
  const OpCases* oc = cases_for(op);
  ASSERT_NE(oc, nullptr) << "op " << op_name(op) << " has no conformance cases: add them to tests/conformance/case_table.cpp";
  ASSERT_FALSE(manifest().path.empty()) << "the manifest " << default_manifest_path() << " does not load";
  const uint64_t seed = run_seed();
  auto t0 = std::chrono::steady_clock::now();
  OpRun run = run_op(*oc, seed, [op](const std::string& device, const std::string& variant, DType dt) {
    return find_expected_fail(manifest(), device, op, variant, dt) != nullptr;
  });
  std::vector<std::string> problems = run.errors;
  for (std::string& p : check_against_manifest(run, manifest(), manifest_devices_run())) problems.push_back(std::move(p));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // one line per device: what ran, for the log
  for (const std::string& dev : run.devices) {
    std::map<Outcome, int> n;
    for (const CaseResult& r : run.results)
      if (r.device == dev) ++n[r.outcome];
    std::cout << "[ " << op_name(op) << " on " << dev << " ] pass " << n[Outcome::pass] << ", expected-fail "
              << n[Outcome::expected_fail] << ", unsupported " << n[Outcome::unsupported] << ", FAIL " << n[Outcome::fail]
              << (dev == "ref" ? cat(", no reference ", n[Outcome::no_reference]) : "") << "\n";
  }
  std::cout << "[ " << op_name(op) << " ] " << run.programs_compiled << " device program(s), " << secs << " s, seed " << seed
            << "\n";
  for (const std::string& p : problems) ADD_FAILURE() << p;
  std::lock_guard<std::mutex> lock(g_runs_mu);
  if (!problems.empty()) g_unexpected = true;
  g_runs[op] = std::move(run);
}

INSTANTIATE_TEST_SUITE_P(Ops, Conformance, ::testing::ValuesIn(ops_under_test()),
                         [](const ::testing::TestParamInfo<Op>& i) { return std::string(op_name(i.param)); });

// ---------------------------------------------------------------- suite-level checks

// ggml's static count check, as a test: a new op in RLX_OP_LIST without cases fails here.
TEST(CaseTable, EveryOpHasCases) {
  std::set<Op> seen;
  for (const OpCases& oc : case_table()) {
    EXPECT_TRUE(seen.insert(oc.op).second) << "op " << op_name(oc.op) << " appears twice in the case table";
    EXPECT_FALSE(oc.variants.empty()) << "op " << op_name(oc.op) << " has no variants";
    std::set<std::string> names;
    for (const Variant& v : oc.variants) {
      EXPECT_TRUE(names.insert(v.name).second) << "op " << op_name(oc.op) << ": variant name '" << v.name << "' repeats";
      EXPECT_EQ(v.name.find_first_of(" \t/#"), std::string::npos) << "variant names go in the manifest: " << v.name;
    }
    // every variant must be accepted by at least one dtype (a typo in a shape would silently
    // turn a variant into "not accepted" everywhere)
    for (const Variant& v : oc.variants) {
      bool accepted = false;
      std::string why;
      for (DType dt : candidate_dtypes()) {
        if (!v.only.empty() && std::find(v.only.begin(), v.only.end(), dt) == v.only.end()) continue;
        auto g = build_case_graph(oc, v, dt, 1);
        if (g) accepted = true;
        else if (why.empty()) why = g.status().to_string();
      }
      EXPECT_TRUE(accepted) << "op " << op_name(oc.op) << " variant '" << v.name << "' is accepted by no dtype: " << why;
    }
  }
  for (int i = 0; i < kNumOps; ++i) {
    Op op = static_cast<Op>(i);
    if (exempt_from_cases(op)) continue;
    EXPECT_TRUE(seen.count(op)) << "op " << op_name(op)
                                << " is in the ops table but has no conformance cases: add them to tests/conformance/case_table.cpp";
  }
}

TEST(Manifest, ParsesAndNamesRegisteredDevices) {
  auto m = load_manifest(default_manifest_path());
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  std::set<std::string> known;
  for (const DeviceInfo& d : list_devices()) known.insert(d.name);
  for (const ManifestEntry& e : m->entries)
    EXPECT_TRUE(known.count(e.device)) << m->path << ":" << e.line << ": unknown device '" << e.device << "'";
}

// The null device is the skeleton: every op must be reported illegal, with a reason for each
// of the three paths, by explain and by Model::prepare.
TEST(NullDevice, EveryOpIsIllegalWithReasons) {
  for (const OpCases& oc : case_table()) {
    bool tried = false;
    for (DType dt : candidate_dtypes()) {
      for (const Variant& v : oc.variants) {
        auto g = build_case_graph(oc, v, dt, 1);
        if (!g) continue;
        tried = true;
        SCOPED_TRACE(cat("op ", op_name(oc.op), " ", dtype_name(dt), " ", v.name));
        auto rep = explain(*g, "null", DispatchPolicy{});
        ASSERT_TRUE(rep.has_value()) << rep.status().to_string();
        EXPECT_FALSE(rep->ok());
        for (const NodeDecision& d : rep->nodes) {
          EXPECT_EQ(d.path, DispatchPath::illegal);
          EXPECT_FALSE(d.native_refused.empty()) << "no reason for the native path";
          EXPECT_FALSE(d.common_refused.empty()) << "no reason for the common-IR path";
          EXPECT_FALSE(d.rewrite_refused.empty()) << "no reason for the rewrite path";
          EXPECT_FALSE(d.hint.empty()) << "no hint";
        }
        auto model = Model::compile(*g, {.device = "null"});
        ASSERT_TRUE(model.has_value()) << model.status().to_string();
        auto var = (*model)->prepare({});
        ASSERT_FALSE(var.has_value());
        EXPECT_EQ(var.status().code(), ErrorCode::illegal) << var.status().to_string();
        EXPECT_NE(var.status().message().find(std::string(op_name(oc.op))), std::string::npos) << var.status().to_string();
        break;
      }
      if (tried) break;
    }
    EXPECT_TRUE(tried) << "op " << op_name(oc.op) << " has no accepted case";
  }
}

TEST(Harness, ComparesWithTolerancesAndNaN) {
  auto t = [](DType dt, std::vector<double> v) { return Tensor::from_f64(dt, {static_cast<int64_t>(v.size())}, v); };
  const double nan = std::nan("");
  Tolerance tol;
  tol.rtol = 1e-5;
  tol.atol = 1e-6;
  EXPECT_EQ(compare_outputs(t(DType::f32, {1, nan, -INFINITY}), t(DType::f32, {1, nan, -INFINITY}), tol), "");
  EXPECT_NE(compare_outputs(t(DType::f32, {1, 0, 3}), t(DType::f32, {1, nan, 3}), tol), "");
  EXPECT_NE(compare_outputs(t(DType::f32, {1, INFINITY}), t(DType::f32, {1, -INFINITY}), tol), "");
  std::string msg = compare_outputs(t(DType::f32, {1, 2.001, 3}), t(DType::f32, {1, 2, 3}), tol);
  EXPECT_NE(msg.find("flat index 1"), std::string::npos) << msg;
  Tolerance exact;
  exact.exact = true;
  EXPECT_NE(compare_outputs(t(DType::i64, {5, 6}), t(DType::i64, {5, 7}), exact), "");
  Tolerance bits;
  bits.bits = true;
  EXPECT_NE(compare_outputs(t(DType::f32, {-0.0}), t(DType::f32, {0.0}), bits), "");
}

TEST(Harness, SentinelsCatchOutOfBoundsWrites) {
  GuardedOutput g = make_guarded(TensorType{DType::f32, to_shape({3, 5})});
  EXPECT_EQ(g.view.byte_offset() % 64, 0u);
  for (int64_t i = 0; i < 15; ++i) g.view.set_f64(i, 1.0);
  EXPECT_EQ(check_guards(g), "");
  g.view.bytes()[g.nbytes] ^= 1;  // one byte past the end
  EXPECT_NE(check_guards(g).find("after"), std::string::npos) << check_guards(g);
  GuardedOutput h = make_guarded(TensorType{DType::f16, to_shape({7})});
  h.view.bytes()[-1] ^= 1;  // one byte before the start
  EXPECT_NE(check_guards(h).find("before"), std::string::npos) << check_guards(h);
  // the payload starts poisoned (NaN), so an element a device never writes cannot pass
  EXPECT_TRUE(std::isnan(h.view.get_f64(0)));
}

// Refusals as the legalizer words them. strip_prefixes once read its regex match after the
// string the match points into was freed (ASan's heap-use-after-free); without ASan the read
// found the allocator's bookkeeping there and dropped a ')' that ends a reason, as in 8
// footnotes of docs/ops.md.
TEST(Harness, StripsRefusalPrefixes) {
  EXPECT_EQ(strip_prefixes("erf on f16: the device has no kernel for this dtype"), "the device has no kernel for this dtype");
  // a ')' that ends the reason itself stays
  EXPECT_EQ(strip_prefixes("erf on f16: needs the extension (cl_khr_fp16)"), "needs the extension (cl_khr_fp16)");
  // the rewrite's prefix and its closing ')' go, then the inner "<op> on <type>: "
  EXPECT_EQ(strip_prefixes("the rewrite needs exp on f16[7, 13], which is illegal here (exp on f16: no f16 exp in GLSL 4.3)"),
            "no f16 exp in GLSL 4.3");
  EXPECT_EQ(strip_prefixes("the rewrite needs mul on i64[3], which is illegal here (no 64-bit integers (shaderInt64))"),
            "no 64-bit integers (shaderInt64)");
  EXPECT_EQ(strip_prefixes("no kernel; implement erf on f16 in the backend"), "no kernel; implement the op on f16 in the backend");
}

TEST(OpsMatrix, RenderParseRoundTrip) {
  OpsMatrix m;
  m.ops = {"add", "exp"};
  m.family = {{"add", "binary"}, {"exp", "unary"}};
  m.columns.push_back(DeviceColumn{"ref", {{"add", "f32 i32"}, {"exp", "f32"}}, {}, "3 | 0 | 0 | 0 | 0"});
  m.columns.push_back(DeviceColumn{"cpu", {{"add", "f32 · unsupported: i32 [^cpu-1]"}, {"exp", "f32"}},
                                   {"[^cpu-1]: unsupported: no ints"}, "2 | 0 | 0 | 1 | 0"});
  m.columns.push_back(DeviceColumn{"gpu", {{"add", "-"}, {"exp", "f32"}}, {}, "1 | 0 | 0 | 0 | 0"});
  const std::string text = render_ops_md(m);
  auto parsed = parse_ops_md(text);
  ASSERT_TRUE(parsed.has_value()) << parsed.status().to_string();
  EXPECT_EQ(render_ops_md(*parsed), text);
  // projecting drops a column with its notes and counts; merging brings it back
  OpsMatrix only = project(*parsed, {"ref", "cpu"});
  EXPECT_EQ(only.columns.size(), 2u);
  EXPECT_EQ(render_ops_md(merge_unavailable(only, *parsed)), text);
}

// docs/ops.md must match what the suite finds for the devices available here. Legality is
// decided without running anything (legalize per case) and the manifest gives the known
// failures; the per-op tests guarantee that everything else passes, so when they pass this
// prediction is exactly what a full run writes.
TEST(OpsMatrix, DocIsCurrent) {
  if (std::getenv("RLX_WRITE_OPS_MD")) GTEST_SKIP() << "RLX_WRITE_OPS_MD is set: this run regenerates the file";
  const std::string path = default_ops_md_path();
  auto text = read_text(path);
  ASSERT_TRUE(text.has_value()) << path << " is missing; generate it: RLX_WRITE_OPS_MD=docs/ops.md build/bin/rlx_tests_conformance";
  auto committed = parse_ops_md(*text);
  ASSERT_TRUE(committed.has_value()) << committed.status().to_string();
  std::vector<std::string> devices = devices_under_test();
  std::vector<OpRun> runs;
  for (Op op : ops_under_test())
    if (const OpCases* oc = cases_for(op)) {
      runs.push_back(predict_op(*oc, devices, [op](const std::string& device, const std::string& variant, DType dt) {
        return find_expected_fail(manifest(), device, op, variant, dt) != nullptr;
      }));
    }
  OpsMatrix fresh = build_matrix(runs, devices, manifest());
  std::vector<std::string> cols = devices;
  cols.insert(cols.begin(), "ref");
  const std::string want = render_ops_md(project(fresh, cols));
  const std::string have = render_ops_md(project(*committed, cols));
  if (want == have) return;
  std::istringstream a(have), b(want);
  std::string la, lb;
  int line = 0, shown = 0;
  std::ostringstream diff;
  while (shown < 12) {
    bool ga = static_cast<bool>(std::getline(a, la)), gb = static_cast<bool>(std::getline(b, lb));
    if (!ga && !gb) break;
    ++line;
    if (ga && gb && la == lb) continue;
    diff << "  line " << line << "\n    committed: " << (ga ? la : "<end>") << "\n    current:   " << (gb ? lb : "<end>") << "\n";
    ++shown;
  }
  std::string cols_text;
  for (const std::string& d : cols) cols_text += (cols_text.empty() ? "" : ", ") + d;
  ADD_FAILURE() << path << " is stale for the devices available here (" << cols_text
                << "); first differences (columns of unavailable devices ignored):\n"
                << diff.str() << "regenerate: RLX_WRITE_OPS_MD=docs/ops.md build/bin/rlx_tests_conformance (from the "
                << "repository root), then review and commit docs/ops.md";
}

// ---------------------------------------------------------------- writing docs/ops.md

class WriteOpsMd : public ::testing::Environment {
 public:
  void TearDown() override {
    const char* path = std::getenv("RLX_WRITE_OPS_MD");
    if (!path) return;
    std::lock_guard<std::mutex> lock(g_runs_mu);
    std::vector<OpRun> runs;
    for (Op op : ops_under_test()) {
      auto it = g_runs.find(op);
      if (it == g_runs.end()) {
        std::cerr << "conformance: not writing " << path << ": op " << op_name(op)
                  << " did not run (run the whole suite, without a test filter)\n";
        return;
      }
      runs.push_back(it->second);
    }
    OpsMatrix m = build_matrix(runs, devices_under_test(), manifest());
    if (auto old = read_text(path); old)
      if (auto parsed = parse_ops_md(*old); parsed) m = merge_unavailable(m, *parsed);
    std::ofstream f(path, std::ios::binary);
    f << render_ops_md(m);
    if (!f) {
      std::cerr << "conformance: cannot write " << path << "\n";
      return;
    }
    std::cout << "conformance: wrote " << path << (g_unexpected ? " (with unexpected results: see the failures above)" : "")
              << "\n";
  }
};

[[maybe_unused]] ::testing::Environment* const g_env = ::testing::AddGlobalTestEnvironment(new WriteOpsMd);

}  // namespace
}  // namespace rlx::conformance

// Our own main (the linker then leaves gtest_main's out): a child process runs one device
// program for its parent (see runner.cpp) instead of the tests.
int main(int argc, char** argv) {
  if (const char* req = std::getenv("RLX_CONFORMANCE_CHILD")) return rlx::conformance::child_main(req);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
