// ONNX's own backend node tests, run on the CPU device against their expected outputs with
// ONNX's default tolerances (rtol 1e-3, atol 1e-7). The tests are generated into the build
// folder by generate_node_tests.py; tests/onnx/manifest.txt lists the expected failures with a
// reason each, and an unexpected pass fails (so the manifest stays honest).
// The opset 18-23 tests (OnnxOpset) have the same layout and harness; generate_opset_tests.py
// writes them with ONNX Runtime's outputs as the expected ones.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "rlx/compile.h"
#include "rlx/device.h"
#include "rlx/onnx.h"

namespace rlx {
namespace {

const std::string kNodeDir = std::string(RLX_BINARY_DIR) + "/onnx-node-tests/node";
const std::string kOpsetRoot = std::string(RLX_BINARY_DIR) + "/onnx-opset-tests";
const std::string kOpsetDir = kOpsetRoot + "/node";
const std::string kManifest = std::string(RLX_SOURCE_DIR) + "/tests/onnx/manifest.txt";

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> r;
  DIR* d = opendir(dir.c_str());
  if (!d) return r;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") r.push_back(n);
  }
  closedir(d);
  std::sort(r.begin(), r.end());
  return r;
}

std::vector<std::string> node_tests(const std::string& root = kNodeDir) {
  std::vector<std::string> r;
  for (const std::string& n : list_dir(root))
    if (n.rfind("test_", 0) == 0) r.push_back(n);
  if (r.empty()) r.push_back("no_node_tests_generated");
  return r;
}

std::map<std::string, std::string> manifest() {
  std::map<std::string, std::string> m;
  std::ifstream f(kManifest);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string name, reason;
    ls >> name;
    std::getline(ls, reason);
    m[name] = reason;
  }
  return m;
}

// Files input_N.pb / output_N.pb in N order.
std::vector<std::string> numbered(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> r;
  for (int i = 0;; ++i) {
    std::string p = dir + "/" + prefix + std::to_string(i) + ".pb";
    struct stat st;
    if (stat(p.c_str(), &st) != 0) break;
    r.push_back(p);
  }
  return r;
}

// The model imported with no input values (so nothing is folded in: a loop's run-time trip
// count stays a loop run by the host), compiled once and run on `inputs`.
Expected<std::vector<onnx::Value>> run_without_folding(const std::string& path, const std::map<std::string, onnx::Value>& inputs,
                                                       const std::string& device) {
  RLX_ASSIGN_OR_RETURN(LoadedModel m, onnx::load(path));
  std::vector<Tensor> feeds;
  for (ValueId v : m.graph.inputs) {
    auto it = inputs.find(m.graph.values[v].name);
    if (it == inputs.end() || it->second.kind != onnx::Value::Kind::tensor)
      return error(ErrorCode::invalid_argument, "no tensor for input ", m.graph.values[v].name);
    feeds.push_back(it->second.tensor);
  }
  RLX_ASSIGN_OR_RETURN(auto model, Model::compile(m.graph, {.device = device}));
  RLX_ASSIGN_OR_RETURN(std::vector<Tensor> outs, model->run(feeds));
  std::vector<onnx::Value> values;
  for (Tensor& t : outs) values.push_back(onnx::Value::of(std::move(t)));
  return values;
}

// Runs one node test on `device`; returns "" on a pass, else why it failed.
// `atol`: ONNX's 1e-7 for its own tests, whose expected outputs NumPy computed in f64 and
// rounded once; ONNX Runtime's float kernels leave more noise near zero (the imaginary part of
// a DFT's DC bin: 2.5e-7 from ORT, 0 exactly from rlx), so its outputs are compared at 1e-5.
std::string run_node_test(const std::string& name, const std::string& device = "cpu",
                          const std::string& root = kNodeDir, double atol = 1e-7, bool fold_inputs = true) {
  const std::string dir = root + "/" + name;
  auto sig = onnx::read_signature(dir + "/model.onnx");
  if (!sig) return sig.status().to_string();
  for (const std::string& set : list_dir(dir)) {
    if (set.rfind("test_data_set_", 0) != 0) continue;
    std::map<std::string, onnx::Value> inputs;
    auto in_files = numbered(dir + "/" + set, "input_");
    if (in_files.size() > sig->inputs.size()) return "more input files than graph inputs";
    for (size_t i = 0; i < in_files.size(); ++i) {
      auto v = onnx::read_value_file(in_files[i], sig->input_kinds[i]);
      if (!v) return v.status().to_string();
      inputs[sig->inputs[i]] = *v;
    }
    std::vector<onnx::Value> got_values;
    if (fold_inputs) {
      auto r = onnx::load_and_run(dir + "/model.onnx", inputs, device);
      if (!r) return r.status().to_string();
      got_values = std::move(r->values);
    } else {
      auto r = run_without_folding(dir + "/model.onnx", inputs, device);
      if (!r) return r.status().to_string();
      got_values = std::move(*r);
    }
    auto out_files = numbered(dir + "/" + set, "output_");
    if (out_files.size() != got_values.size())
      return cat(out_files.size(), " expected outputs, the model gave ", got_values.size());
    // each output's tensors: one for a tensor, the elements of a sequence, none for an empty optional
    std::vector<std::pair<std::string, Tensor>> got_tensors, want_tensors;
    for (size_t k = 0; k < out_files.size(); ++k) {
      auto e = onnx::read_value_file(out_files[k], sig->output_kinds[k]);
      if (!e) return e.status().to_string();
      const onnx::Value& g = got_values[k];
      if (g.kind != e->kind || g.elements.size() != e->elements.size())
        return cat("output ", k, ": ", g.to_string(), ", expected ", e->to_string());
      if (g.kind == onnx::Value::Kind::strings) {
        if (g.string_sizes != e->string_sizes) return cat("output ", k, ": ", g.to_string(), ", expected ", e->to_string());
        for (size_t j = 0; j < g.strings.size(); ++j)
          if (g.strings[j] != e->strings[j])
            return cat("output ", k, " at ", j, ": '", g.strings[j], "', expected '", e->strings[j], "'");
      }
      if (g.kind == onnx::Value::Kind::tensor) {
        got_tensors.emplace_back(cat("output ", k), g.tensor);
        want_tensors.emplace_back(cat("output ", k), e->tensor);
      }
      for (size_t j = 0; j < g.elements.size(); ++j) {
        got_tensors.emplace_back(cat("output ", k, " element ", j), g.elements[j]);
        want_tensors.emplace_back(cat("output ", k, " element ", j), e->elements[j]);
      }
    }
    for (size_t k = 0; k < got_tensors.size(); ++k) {
      const std::string& what = got_tensors[k].first;
      const Tensor* e = &want_tensors[k].second;
      Tensor got = got_tensors[k].second;
      if (got.dtype() == DType::bf16 && e->dtype() == DType::u16)  // bf16 expected as u16 bits
        got = Tensor(DType::u16, got.sizes(), got.storage(), got.byte_offset());
      if (got.dtype() != e->dtype())
        return cat(what, ": dtype ", dtype_name(got.dtype()), ", expected ", dtype_name(e->dtype()));
      if (got.sizes() != e->sizes())
        return cat(what, ": shape ", sizes_to_string(got.sizes()), ", expected ", sizes_to_string(e->sizes()));
      const bool fl = is_float(e->dtype()) || is_complex(e->dtype());
      for (int64_t i = 0; i < e->numel(); ++i) {
        double a = got.get_f64(i), b = e->get_f64(i);
        bool ok;
        if (fl) {
          ok = (std::isnan(a) && std::isnan(b)) || a == b || std::fabs(a - b) <= atol + 1e-3 * std::fabs(b);
          if (ok && is_complex(e->dtype())) {
            double ai = got.get_imag(i), bi = e->get_imag(i);
            ok = std::fabs(ai - bi) <= atol + 1e-3 * std::fabs(bi);
          }
        } else {
          ok = a == b;
        }
        if (!ok) return cat(what, " at ", i, ": ", a, ", expected ", b);
      }
    }
  }
  return "";
}

// A test passes (`why` empty) unless the manifest expects it to fail; an expected failure
// that passes fails too, so that the manifest stays honest.
void expect_manifest_verdict(const std::string& name, const std::string& why) {
  static const auto expected_failures = manifest();
  auto it = expected_failures.find(name);
  if (it == expected_failures.end()) {
    EXPECT_EQ(why, "") << name << " failed";
  } else {
    EXPECT_NE(why, "") << name << " passes but tests/onnx/manifest.txt lists it as an expected failure ("
                       << it->second << "): remove it from the manifest";
  }
}

class OnnxNode : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxNode, MatchesExpectedOutputs) {
  const std::string& name = GetParam();
  if (name == "no_node_tests_generated")
    GTEST_FAIL() << "no node tests under " << kNodeDir << " (the build generates them with /usr/bin/python3 "
                 << "tests/onnx/generate_node_tests.py; is python3-onnx installed?)";
  expect_manifest_verdict(name, run_node_test(name));
}

INSTANTIATE_TEST_SUITE_P(Node, OnnxNode, ::testing::ValuesIn(node_tests()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The opset 18-23 tests: ONNX Runtime's outputs for models at those opsets.
class OnnxOpset : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxOpset, MatchesOnnxRuntime) {
  const std::string& name = GetParam();
  if (name == "no_node_tests_generated") {
    std::ifstream missing(kOpsetRoot + "/oracle_missing");
    std::string why;
    std::getline(missing, why);
    if (why.empty()) GTEST_FAIL() << "no opset tests under " << kOpsetDir << " (tests/onnx/generate_opset_tests.py)";
    if (std::getenv("CI")) GTEST_FAIL() << "CI installs ONNX Runtime for Node, the oracle of the opset tests, but: " << why;
    GTEST_SKIP() << "the opset 18-23 tests need ONNX Runtime for Node as their oracle: " << why
                 << " (then rebuild to generate them)";
  }
  expect_manifest_verdict(name, run_node_test(name, "cpu", kOpsetDir, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Opset, OnnxOpset, ::testing::ValuesIn(node_tests(kOpsetDir)),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The run-time loop cases imported without their inputs (rlx run folds M in and unrolls): the
// loop runs on the host, compiled once, and must still match ONNX Runtime.
TEST(OnnxOpsetRuntimeLoop, MatchesOnnxRuntimeWithoutFolding) {
  int run = 0;
  for (const std::string& name : node_tests(kOpsetDir)) {
    if (name.find("runtime_loop") == std::string::npos) continue;
    ++run;
    EXPECT_EQ(run_node_test(name, "cpu", kOpsetDir, 1e-5, false), "") << name;
  }
  if (run == 0 && std::getenv("CI")) FAIL() << "no runtime_loop opset tests were generated (ONNX Runtime missing?)";
  if (run == 0) GTEST_SKIP() << "no runtime_loop opset tests were generated (their oracle, ONNX Runtime, is missing)";
}

// The manifest may hold at most 15% of the node tests (the target: 85% pass), and
// every entry must name a generated test and give a reason.
TEST(OnnxNodeManifest, CoversAtMostFifteenPercent) {
  auto tests = node_tests();
  if (tests.size() == 1 && tests[0] == "no_node_tests_generated") GTEST_FAIL() << "no node tests generated";
  auto opset_tests = node_tests(kOpsetDir);
  auto m = manifest();
  size_t node_entries = 0;
  for (const auto& [name, reason] : m) {
    const bool node = std::find(tests.begin(), tests.end(), name) != tests.end();
    const bool opset = std::find(opset_tests.begin(), opset_tests.end(), name) != opset_tests.end();
    // an opset test's entry cannot be checked when its oracle is missing (that test fails in CI)
    EXPECT_TRUE(node || opset || (name.rfind("test_opset", 0) == 0 && opset_tests.size() == 1))
        << name << " is not a node test";
    node_entries += node;
    EXPECT_FALSE(reason.find_first_not_of(" \t") == std::string::npos) << name << " has no reason";
  }
  EXPECT_LE(node_entries * 100, tests.size() * 15) << node_entries << " expected failures of " << tests.size();
}

// The node tests that pass on the CPU, run on another device. Each builds an OpenCL program
// (about a second on PoCL with a cold cache), Vulkan pipelines or WGSL shaders, so this runs on
// request, except for webgpu and directx, which CI runs (tests/CMakeLists.txt):
//   RLX_ONNX_NODE_DEVICE=opencl build/bin/rlx_tests_onnx --gtest_filter='OnnxNodeOtherDevice.*'
// A test the device does not pass must be refused with a reason (a node illegal there, a value
// it cannot hold), never answered wrongly, and at least 90% must pass. It prints every
// failure and the count (recorded in docs/onnx.md).
TEST(OnnxNodeOtherDevice, PassesWhatTheCpuPasses) {
  const char* device = std::getenv("RLX_ONNX_NODE_DEVICE");
  if (!device) GTEST_SKIP() << "set RLX_ONNX_NODE_DEVICE=opencl to run the node tests on another device (minutes)";
  auto dev = get_device(device);
  if (!dev) {
    if (std::getenv("CI")) FAIL() << "CI runs the node tests on " << device << ", but: " << dev.status().message();
    GTEST_SKIP() << dev.status().message();
  }
  const auto m = manifest();
  int run = 0, passed = 0;
  // ONNX's node tests and the opset 18-23 ones (when their oracle was there to generate them)
  std::vector<std::pair<std::string, std::string>> all;  // (root, name)
  for (const std::string& name : node_tests()) all.emplace_back(kNodeDir, name);
  for (const std::string& name : node_tests(kOpsetDir))
    if (name != "no_node_tests_generated") all.emplace_back(kOpsetDir, name);
  // Known device problems that are not wrong answers, each with its reason (docs/webgpu.md):
  // these are not run there, and the count below says so.
  static const std::map<std::string, std::map<std::string, std::string>> kNotRun = {
      {"webgpu",
       {{"test_opset20_gridsample20_cubic_zeros", "SwiftShader does not finish compiling bicubic GridSample's fused kernel for C > 1 (minutes, GBs)"},
        {"test_opset20_gridsample20_cubic_border", "as cubic_zeros"},
        {"test_opset20_gridsample20_cubic_reflection", "as cubic_zeros"}}}};
  const auto not_run = kNotRun.count(device) ? kNotRun.at(device) : std::map<std::string, std::string>{};
  for (const auto& [root, name] : all) {
    if (m.count(name)) continue;
    if (auto it = not_run.find(name); it != not_run.end()) {
      std::printf("%s on %s: not run: %s\n", name.c_str(), device, it->second.c_str());
      continue;
    }
    ++run;
    const std::string why = run_node_test(name, device, root, root == kOpsetDir ? 1e-5 : 1e-7);
    if (why.empty()) {
      ++passed;
      continue;
    }
    std::printf("%s on %s: %s\n", name.c_str(), device, why.substr(0, 300).c_str());
    const bool refused = why.rfind("illegal:", 0) == 0 || why.rfind("unsupported:", 0) == 0 || why.rfind("out of range:", 0) == 0;
    EXPECT_TRUE(refused) << name << " on " << device << " is not a refusal with a reason: " << why;
  }
  std::printf("node tests on %s: %d of the %d that pass on the cpu\n", device, passed, run);
  EXPECT_GE(passed * 10, run * 9) << "fewer than 90% of the node tests that pass on the cpu pass on " << device;
}

}  // namespace
}  // namespace rlx
