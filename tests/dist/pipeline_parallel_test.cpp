// Pipeline parallelism end to end: `rlx train --pp N` under mpirun -np N, with the GPipe and
// 1F1B schedules, trains the same parameters as one process on the same batches.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "dist/run_mpi.h"
#include "rlx/safetensors.h"

namespace {

using namespace rlx_dist_test;

class PipelineParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed (scripts/install-deps.sh installs openmpi-bin)";
  }
};

double max_relative_difference(const std::string& a_path, const std::string& b_path) {
  auto a = rlx::safetensors::load(a_path);
  auto b = rlx::safetensors::load(b_path);
  EXPECT_TRUE(a.has_value() && b.has_value());
  if (!a || !b || a->tensors.size() != b->tensors.size() || a->tensors.empty()) return INFINITY;
  double worst = 0;
  for (const auto& [name, ta] : a->tensors) {
    if (!b->tensors.count(name)) return INFINITY;
    const rlx::Tensor& tb = b->tensors.at(name);
    if (ta.sizes() != tb.sizes()) return INFINITY;
    double diff = 0, scale = 1e-3;
    for (int64_t i = 0; i < ta.numel(); ++i) {
      diff = std::max(diff, std::abs(ta.get_f64(i) - tb.get_f64(i)));
      scale = std::max(scale, std::abs(ta.get_f64(i)));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

void expect_same_training(const std::string& name, const std::string& args, int stages,
                          const std::vector<std::string>& schedules, double tol) {
  const std::string dir = temp_dir(name);
  Proc one = sh(kRlx + " " + args + " --save " + dir + "/one.safetensors");
  ASSERT_EQ(one.code, 0) << one.out;
  for (const std::string& s : schedules) {
    const std::string out = dir + "/" + s + ".safetensors";
    Proc par = sh(mpirun(stages, args + " --pp " + std::to_string(stages) + " --pp-schedule " + s + " --save " + out));
    ASSERT_EQ(par.code, 0) << par.out;
    EXPECT_LE(max_relative_difference(dir + "/one.safetensors", out), tol) << s << " on " << stages << " stages";
  }
}

TEST_F(PipelineParallel, MlpOnTwoStagesBothSchedulesEqualOneProcess) {
  const std::string seed = std::to_string(1 + std::random_device{}() % 1000);
  // 6 steps of SGD with momentum; micro-batches of 16 (8 KiB activations: past MPI's eager limit)
  expect_same_training("pp_mlp",
                       "train mnist --synthetic --train-size 384 --test-size 64 --batch 64 --micro-batches 4 "
                       "--epochs 1 --quiet --momentum 0.9 --seed " + seed,
                       2, {"gpipe", "1f1b"}, 1e-5);
}

// Mixed precision: each stage's forward runs under the autocast policy, the last stage scales
// the loss (f16), every stage unscales its gradients, and all skip or apply the step together.
// One step, to within the narrow type's unit roundoff: each micro-batch's weight gradient is
// a product rounded to the narrow type before the micro-batches are summed (as with --dp, see
// DataParallel.MixedPrecisionOnTwoRanksEqualsOneProcess).
TEST_F(PipelineParallel, MixedPrecisionOnTwoStagesEqualsOneProcess) {
  const std::string seed = std::to_string(1 + std::random_device{}() % 1000);
  for (auto [p, unit_roundoff] : {std::pair{"bf16", 0x1p-8}, std::pair{"f16", 0x1p-11}}) {
    SCOPED_TRACE(p);
    expect_same_training(std::string("pp_amp_") + p,
                         "train mnist --synthetic --train-size 64 --test-size 64 --batch 64 --micro-batches 4 "
                         "--epochs 1 --quiet --momentum 0.9 --precision " + std::string(p) + " --seed " + seed,
                         2, {"1f1b"}, unit_roundoff);
  }
}

TEST_F(PipelineParallel, TinyConvOnThreeStagesWithUnevenMicroBatches) {
  const std::string seed = std::to_string(1 + std::random_device{}() % 1000);
  // batches of 20 in 3 micro-batches (7, 7, 6), then a last batch of 10
  expect_same_training("pp_conv",
                       "train mnist --arch tinyconv --synthetic --train-size 70 --test-size 32 --batch 20 "
                       "--micro-batches 3 --epochs 1 --quiet --optimizer adam --seed " + seed,
                       3, {"1f1b", "gpipe"}, 1e-4);
}

TEST_F(PipelineParallel, Qwen3GreedyTokensMatchOnTwoAndFourStages) {
  const std::string dir = temp_dir("pp_qwen3");
  Proc mk = sh(kRlx + " make-model qwen3-tiny --out " + dir + "/m --layers 4 --vocab 1000 --seed " +
               std::to_string(std::random_device{}() % 100000));
  ASSERT_EQ(mk.code, 0) << mk.out;
  expect_same_tokens(dir + "/m", dir, "--pp", 2, "--micro-batches 2");  // the two prompts flow one by one
  expect_same_tokens(dir + "/m", dir, "--pp", 4);
}

TEST_F(PipelineParallel, MiniLmEmbeddingsMatchOnTwoAndThreeStages) {
  const std::string dir = temp_dir("pp_minilm");
  Proc mk = sh(kRlx + " make-model minilm --out " + dir + "/m --seed " + std::to_string(std::random_device{}() % 100000));
  ASSERT_EQ(mk.code, 0) << mk.out;
  expect_same_embeddings(dir + "/m", dir, "--pp", 2, "--micro-batches 3");
  expect_same_embeddings(dir + "/m", dir, "--pp", 3);
}

TEST_F(PipelineParallel, MoreStagesThanLayersIsAClearError) {
  Proc r = sh(mpirun(3, "train mnist --synthetic --train-size 64 --test-size 64 --epochs 1 --quiet --pp 3"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("has 2 layers, fewer than the 3 stages"), std::string::npos) << r.out;
}

}  // namespace
