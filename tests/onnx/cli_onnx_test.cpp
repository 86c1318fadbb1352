// rlx info / explain / run on .onnx files, through the program itself: a node test's model run
// with `--inputs test_data_set_0 --out DIR` must write output_N.pb equal to the expected ones.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "rlx/onnx.h"

namespace rlx {
namespace {

const std::string kRlx = std::string(RLX_BINARY_DIR) + "/bin/rlx";
const std::string kNode = std::string(RLX_BINARY_DIR) + "/onnx-node-tests/node";

bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

// Runs a command, returns its exit code and output.
int run(const std::string& cmd, std::string* out) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
  int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class OnnxCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!exists(kRlx)) GTEST_SKIP() << kRlx << " is not built (ninja rlx)";
    if (!exists(kNode)) GTEST_SKIP() << "no generated node tests under " << kNode;
    char tmpl[] = "/tmp/rlx_onnx_cli_XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string dir_;
};

TEST_F(OnnxCli, RunWritesTestDataSetOutputs) {
  // Reshape's shape is an input: rlx run folds it in from input_1.pb
  for (const char* name : {"test_reshape_reordered_all_dims", "test_gemm_all_attributes", "test_softmax_axis_1"}) {
    const std::string t = kNode + "/" + name;
    std::string out;
    int rc = run(kRlx + " run " + t + "/model.onnx --inputs " + t + "/test_data_set_0 --out " + dir_, &out);
    ASSERT_EQ(rc, 0) << name << ": " << out;
    auto got = onnx::read_tensor_file(dir_ + "/output_0.pb");
    auto want = onnx::read_tensor_file(t + "/test_data_set_0/output_0.pb");
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    ASSERT_TRUE(want.has_value()) << want.status().to_string();
    ASSERT_EQ(got->sizes(), want->sizes()) << name;
    for (int64_t i = 0; i < want->numel(); ++i)
      EXPECT_NEAR(got->get_f64(i), want->get_f64(i), 1e-7 + 1e-3 * std::fabs(want->get_f64(i))) << name << " element " << i;
  }
}

// Sequence, optional and string inputs and outputs: read as SequenceProto / OptionalProto /
// string TensorProto by the model's declared types, written back the same way.
TEST_F(OnnxCli, RunReadsAndWritesSequencesOptionalsAndStrings) {
  for (const char* name : {"test_sequence_insert_at_front", "test_identity_opt", "test_loop13_seq",
                           "test_strnormalizer_export_monday_casesensintive_upper"}) {
    const std::string t = kNode + "/" + name;
    std::string out;
    int rc = run(kRlx + " run " + t + "/model.onnx --inputs " + t + "/test_data_set_0 --out " + dir_, &out);
    ASSERT_EQ(rc, 0) << name << ": " << out;
    auto sig = onnx::read_signature(t + "/model.onnx");
    ASSERT_TRUE(sig.has_value()) << sig.status().to_string();
    auto got = onnx::read_value_file(dir_ + "/output_0.pb", sig->output_kinds[0]);
    auto want = onnx::read_value_file(t + "/test_data_set_0/output_0.pb", sig->output_kinds[0]);
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    ASSERT_TRUE(want.has_value()) << want.status().to_string();
    EXPECT_EQ(got->to_string(), want->to_string()) << name;
    EXPECT_EQ(got->strings, want->strings) << name;
    ASSERT_EQ(got->elements.size(), want->elements.size()) << name;
    for (size_t k = 0; k < want->elements.size(); ++k) {
      EXPECT_EQ(got->elements[k].sizes(), want->elements[k].sizes()) << name << " element " << k;
      EXPECT_EQ(got->elements[k].to_f64(), want->elements[k].to_f64()) << name << " element " << k;
    }
    EXPECT_NE(out.find(want->kind == onnx::Value::Kind::strings ? "string[" : "sequence of"), std::string::npos) << out;
  }
}

TEST_F(OnnxCli, InfoAndExplain) {
  const std::string model = kNode + "/test_gemm_all_attributes/model.onnx";
  std::string out;
  ASSERT_EQ(run(kRlx + " info " + model, &out), 0) << out;
  EXPECT_NE(out.find("format:  onnx"), std::string::npos) << out;
  EXPECT_NE(out.find("opset = "), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(run(kRlx + " explain " + model + " --device cpu", &out), 0) << out;
  EXPECT_NE(out.find("compile-ready: yes"), std::string::npos) << out;
}

TEST_F(OnnxCli, MissingInputsAndBadFilesAreErrors) {
  const std::string t = kNode + "/test_add";
  std::string out;
  EXPECT_NE(run(kRlx + " run " + t + "/model.onnx --inputs " + dir_, &out), 0);
  EXPECT_NE(out.find("no value for input"), std::string::npos) << out;
  out.clear();
  const std::string bad = dir_ + "/bad.onnx";
  FILE* f = std::fopen(bad.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("\x0a\xff\xff\xff\xff\x0f", f);
  std::fclose(f);
  EXPECT_NE(run(kRlx + " info " + bad, &out), 0);
  EXPECT_NE(out.find("bad.onnx"), std::string::npos) << out;
}

}  // namespace
}  // namespace rlx
