// rlx info, run and convert on rten files: the fixtures rten's converter wrote
// (../shared/fixtures/rten beside the repository), a file rlx convert writes, and a corrupt one.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli/run_rlx.h"
#include "rlx/npy.h"

namespace {

using rlx_cli_test::Result;
using rlx_cli_test::rlx;

const std::string kFixtures = std::string(RLX_SOURCE_DIR) + "/../shared/fixtures/rten";

double max_diff(const std::string& got_path, const std::string& want_path) {
  auto got = rlx::read_npy(got_path);
  auto want = rlx::read_npy(want_path);
  EXPECT_TRUE(got.has_value()) << got.status().to_string();
  EXPECT_TRUE(want.has_value()) << want.status().to_string();
  if (!got || !want || got->sizes() != want->sizes()) return 1e9;
  const auto g = got->to_f64(), w = want->to_f64();
  double d = 0;
  for (size_t i = 0; i < g.size(); ++i) d = std::max(d, std::abs(g[i] - w[i]));
  return d;
}

TEST(RtenCli, InfoAndRunOnAFixture) {
  Result info = rlx("info " + kFixtures + "/mlp.rten");
  ASSERT_EQ(info.code, 0) << info.out;
  EXPECT_NE(info.out.find("rten (version 2)"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("x f32[batch, 784]"), std::string::npos) << info.out;
  const std::string out = std::string(RLX_BINARY_DIR) + "/rten_cli_test_out";
  std::filesystem::remove_all(out);
  Result run = rlx("run " + kFixtures + "/cnn.rten --input x=" + kFixtures + "/cnn.x.npy --out " + out);
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_LT(max_diff(out + "/logits.npy", kFixtures + "/cnn.logits.expected.npy"), 1e-4);
}

TEST(RtenCli, ConvertOnnxToRtenAndRunIt) {
  const std::string dir = std::string(RLX_BINARY_DIR) + "/rten_cli_test_convert";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  Result c = rlx("convert " + kFixtures + "/encoder.onnx " + dir + "/encoder.rten");
  ASSERT_EQ(c.code, 0) << c.out;
  Result run = rlx("run " + dir + "/encoder.rten --input input_ids=" + kFixtures + "/encoder.input_ids.npy" +
                   " --input attention_mask=" + kFixtures + "/encoder.attention_mask.npy --out " + dir);
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_LT(max_diff(dir + "/embedding.npy", kFixtures + "/encoder.embedding.expected.npy"), 1e-4);
  Result same = rlx("convert " + dir + "/encoder.rten " + dir + "/again.rten");
  EXPECT_NE(same.code, 0);
  EXPECT_NE(same.out.find(".onnx input"), std::string::npos) << same.out;
}

// rten's own file to ONNX and back to rten: each step gives exactly the outputs of the step
// before it (the same graph, so the same kernels and the same bits), and those match ORT.
TEST(RtenCli, RoundTripsBetweenRtenAndOnnxExactly) {
  const std::string dir = std::string(RLX_BINARY_DIR) + "/rten_cli_test_roundtrip";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  Result to_onnx = rlx("convert " + kFixtures + "/cnn.rten " + dir + "/cnn.onnx");
  ASSERT_EQ(to_onnx.code, 0) << to_onnx.out;
  Result back = rlx("convert " + dir + "/cnn.onnx " + dir + "/cnn.rten");
  ASSERT_EQ(back.code, 0) << back.out;
  const std::string in = " --input x=" + kFixtures + "/cnn.x.npy --out ";
  for (const char* step : {"rten0", "onnx1", "rten1"}) std::filesystem::create_directories(dir + "/" + step);
  ASSERT_EQ(rlx("run " + kFixtures + "/cnn.rten" + in + dir + "/rten0").code, 0);
  ASSERT_EQ(rlx("run " + dir + "/cnn.onnx" + in + dir + "/onnx1").code, 0);
  ASSERT_EQ(rlx("run " + dir + "/cnn.rten" + in + dir + "/rten1").code, 0);
  EXPECT_EQ(max_diff(dir + "/onnx1/logits.npy", dir + "/rten0/logits.npy"), 0.0);
  EXPECT_EQ(max_diff(dir + "/rten1/logits.npy", dir + "/rten0/logits.npy"), 0.0);
  EXPECT_LT(max_diff(dir + "/rten1/logits.npy", kFixtures + "/cnn.logits.expected.npy"), 1e-4);
  Result wrong = rlx("convert " + kFixtures + "/cnn.onnx " + dir + "/x.onnx");
  EXPECT_NE(wrong.code, 0);
  EXPECT_NE(wrong.out.find(".rten input"), std::string::npos) << wrong.out;
}

TEST(RtenCli, CorruptFileIsAClearError) {
  const std::string path = std::string(RLX_BINARY_DIR) + "/rten_cli_test_bad.rten";
  std::ofstream(path, std::ios::binary) << "RTEN\x02\x00\x00\x00 short";
  Result r = rlx("info " + path);
  EXPECT_EQ(r.code, 2) << r.out;  // bad input
  EXPECT_NE(r.out.find("rten_cli_test_bad.rten: truncated header"), std::string::npos) << r.out;
}

}  // namespace
