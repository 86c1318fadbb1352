// `rlx run MODEL --tp T --pp P`: one forward run across ranks gives output 0 of the
// single-process `rlx run` (the same synthesized inputs; a Qwen3 KV cache input is cut to the
// shard's heads): Qwen3 prefill logits and MiniLM sentence embeddings, on 2 and 2 x 2 ranks.
// A graph that names its layer ends (layer.N.out) runs with --pp; one rlx cannot split is
// refused with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <string>

#include "dist/run_mpi.h"
#include "rlx/npy.h"

namespace {

using namespace rlx_dist_test;

class RunParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed (scripts/install-deps.sh installs openmpi-bin)";
  }
};

// `rlx run model --out` on one process and with `flags` on `ranks` ranks: output `file` equal
// within 1e-5 of its largest magnitude.
void expect_same_output(const std::string& dir, const std::string& model, const std::string& file,
                        const std::string& flags, int ranks) {
  const std::string one = dir + "/one", par = dir + "/par" + std::to_string(ranks);
  std::filesystem::create_directories(one);
  std::filesystem::create_directories(par);
  Proc a = sh(kRlx + " run " + model + " --seed 5 --out " + one);
  ASSERT_EQ(a.code, 0) << a.out;
  Proc b = sh(mpirun(ranks, "run " + model + " --seed 5 " + flags + " --out " + par));
  ASSERT_EQ(b.code, 0) << flags << "\n" << b.out;
  auto ta = rlx::read_npy(one + "/" + file);
  auto tb = rlx::read_npy(par + "/" + file);
  ASSERT_TRUE(ta.has_value()) << ta.status().to_string();
  ASSERT_TRUE(tb.has_value()) << tb.status().to_string() << "\n" << b.out;
  ASSERT_EQ(ta->sizes(), tb->sizes());
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < ta->numel(); ++i) {
    worst = std::max(worst, std::abs(ta->get_f64(i) - tb->get_f64(i)));
    scale = std::max(scale, std::abs(ta->get_f64(i)));
  }
  EXPECT_GT(scale, 1e-3);  // a real output, not zeros
  EXPECT_LE(worst, 1e-5 * std::max(1.0, scale)) << flags;
}

TEST_F(RunParallel, Qwen3LogitsMatchWithTensorPipelineAndGrid) {
  const std::string dir = temp_dir("run_qwen3");
  Proc mk = sh(kRlx + " make-model qwen3-tiny --out " + dir + "/m --layers 4 --vocab 1001 --seed " +
               std::to_string(std::random_device{}() % 100000));
  ASSERT_EQ(mk.code, 0) << mk.out;
  expect_same_output(dir, dir + "/m", "logits.npy", "--tp 2", 2);
  expect_same_output(dir, dir + "/m", "logits.npy", "--pp 2", 2);
  expect_same_output(dir, dir + "/m", "logits.npy", "--tp 2 --pp 2", 4);
}

TEST_F(RunParallel, MiniLmEmbeddingsMatchWithTensorAndPipeline) {
  const std::string dir = temp_dir("run_minilm");
  Proc mk = sh(kRlx + " make-model minilm --out " + dir + "/m --seed " + std::to_string(std::random_device{}() % 100000));
  ASSERT_EQ(mk.code, 0) << mk.out;
  expect_same_output(dir, dir + "/m", "sentence_embedding.npy", "--tp 2", 2);
  expect_same_output(dir, dir + "/m", "sentence_embedding.npy", "--pp 3", 3);
}

TEST_F(RunParallel, AGraphThatNamesItsLayerEndsRunsOnAPipeline) {
  // any graph (here text IR) whose values layer.N.out mark its layers: 3 stages, the batch of 3
  // in 3 micro-batches
  const std::string dir = temp_dir("run_layers");
  const std::string g = dir + "/layers.rlx";
  std::ofstream(g) << R"(
graph @layers(%x: f32[batch, 6], %w1: f32[6, 8], %w2: f32[8, 8], %w3: f32[8, 3]) -> (f32[batch, 3]) {
  %a = matmul(%x, %w1)
  %layer.0.out = tanh(%a)
  %b = matmul(%layer.0.out, %w2)
  %layer.1.out = tanh(%b)
  %c = matmul(%layer.1.out, %w3)
  return %c
}
)";
  expect_same_output(dir, g + " --dims batch=3", "c.npy", "--pp 3 --micro-batches 3", 3);
}

TEST_F(RunParallel, GraphsWithoutALayoutAreRefusedWithTheReason) {
  const std::string dir = temp_dir("run_errors");
  const std::string g = dir + "/g.rlx";
  std::ofstream(g) << R"(
graph @plain(%x: f32[4, 6], %w: f32[6, 8]) -> (f32[4, 8]) {
  %a = matmul(%x, %w)
  %h = tanh(%a)
  return %h
}
)";
  Proc r = sh(kRlx + " run " + g + " --tp 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("is not a model rlx builds itself"), std::string::npos) << r.out;
  r = sh(mpirun(2, "run " + g + " --pp 2"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("cannot be cut into stages"), std::string::npos) << r.out;
}

}  // namespace
