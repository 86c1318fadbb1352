// Parallelisms combined: `mpirun -np T*P rlx generate|embed ... --tp T --pp P` runs a grid
// (each pipeline stage's layers sharded over T ranks) and `rlx train --dp D --pp P` runs D
// pipelines on shares of every batch; both give the single process's results. Jobs that do not
// match the grid, and combinations rlx does not have, are clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "dist/run_mpi.h"
#include "rlx/safetensors.h"

namespace {

using namespace rlx_dist_test;

class GridParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed (scripts/install-deps.sh installs openmpi-bin)";
  }
};

std::string grid_flags(int tp, int pp) { return "--tp " + std::to_string(tp) + " --pp " + std::to_string(pp); }

TEST_F(GridParallel, Qwen3GreedyTokensMatchOnTwoByTwoRanks) {
  const std::string dir = temp_dir("grid_qwen3");
  // a vocabulary that 2 ranks do not divide (padded shards), 4 layers over 2 stages
  Proc mk = sh(kRlx + " make-model qwen3-tiny --out " + dir + "/m --layers 4 --vocab 1001 --seed " +
               std::to_string(std::random_device{}() % 100000));
  ASSERT_EQ(mk.code, 0) << mk.out;
  const std::string gen = "generate " + dir + "/m --tokens 5,17,300,42,7 --tokens 11,12 -n 12 --ignore-eos --quiet";
  Proc one = sh(kRlx + " " + gen + " --json " + dir + "/one.json");
  ASSERT_EQ(one.code, 0) << one.out;
  // the two prompts flow through the stages as two micro-batches
  Proc par = sh(mpirun(4, gen + " " + grid_flags(2, 2) + " --micro-batches 2 --json " + dir + "/par.json"));
  ASSERT_EQ(par.code, 0) << par.out;
  nlohmann::json a = read_json(dir + "/one.json"), b = read_json(dir + "/par.json");
  ASSERT_TRUE(a.contains("tokens") && b.contains("tokens")) << par.out;
  ASSERT_EQ(a["tokens"].size(), 2u);
  expect_same_tokens_up_to_near_ties(a, b, "--tp 2 --pp 2");
}

TEST_F(GridParallel, MiniLmEmbeddingsMatchOnTwoByTwoRanks) {
  const std::string dir = temp_dir("grid_minilm");
  Proc mk = sh(kRlx + " make-model minilm --out " + dir + "/m --seed " + std::to_string(std::random_device{}() % 100000));
  ASSERT_EQ(mk.code, 0) << mk.out;
  const std::string texts = "\"the quick brown fox\" \"parallel embeddings, split by heads and layers\" \"a\"";
  Proc one = sh(kRlx + " embed " + dir + "/m " + texts + " --quiet --out " + dir + "/one.json");
  ASSERT_EQ(one.code, 0) << one.out;
  Proc par = sh(mpirun(4, "embed " + dir + "/m " + texts + " --quiet " + grid_flags(2, 2) +
                              " --micro-batches 2 --out " + dir + "/par.json"));
  ASSERT_EQ(par.code, 0) << par.out;
  nlohmann::json a = read_json(dir + "/one.json"), b = read_json(dir + "/par.json");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), a.size()) << par.out;
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    for (size_t j = 0; j < a[i].size(); ++j) {
      worst = std::max(worst, std::abs(a[i][j].get<double>() - b[i][j].get<double>()));
      scale = std::max(scale, std::abs(a[i][j].get<double>()));
    }
  }
  EXPECT_GT(scale, 1e-3);  // real embeddings, not zeros
  EXPECT_LE(worst, 1e-5) << "--tp 2 --pp 2";
}

TEST_F(GridParallel, TwoPipelinesOfTwoStagesTrainLikeOneProcess) {
  const std::string dir = temp_dir("grid_train");
  const std::string seed = std::to_string(1 + std::random_device{}() % 1000);
  // global batches of 50 (25 per pipeline, in micro-batches of 9, 8, 8) and a last one of 30,
  // SGD with momentum (Adam's normalization turns rounding differences in near-zero gradients
  // into whole steps, which a tight comparison cannot tell from a bug); both schedules
  const std::string args = "train mnist --synthetic --train-size 130 --test-size 32 --batch 50 --micro-batches 3 "
                           "--epochs 1 --quiet --momentum 0.9 --seed " + seed;
  Proc one = sh(kRlx + " " + args + " --save " + dir + "/one.safetensors");
  ASSERT_EQ(one.code, 0) << one.out;
  for (const std::string sched : {"1f1b", "gpipe"}) {
    const std::string out = dir + "/" + sched + ".safetensors";
    Proc par = sh(mpirun(4, args + " --dp 2 --pp 2 --pp-schedule " + sched + " --save " + out));
    ASSERT_EQ(par.code, 0) << par.out;
    auto a = rlx::safetensors::load(dir + "/one.safetensors");
    auto b = rlx::safetensors::load(out);
    ASSERT_TRUE(a.has_value() && b.has_value()) << par.out;
    ASSERT_EQ(a->tensors.size(), b->tensors.size());
    ASSERT_FALSE(a->tensors.empty());
    for (const auto& [name, ta] : a->tensors) {
      ASSERT_TRUE(b->tensors.count(name)) << name;
      const rlx::Tensor& tb = b->tensors.at(name);
      ASSERT_EQ(ta.sizes(), tb.sizes()) << name;
      double worst = 0, scale = 1e-3;
      for (int64_t i = 0; i < ta.numel(); ++i) {
        worst = std::max(worst, std::abs(ta.get_f64(i) - tb.get_f64(i)));
        scale = std::max(scale, std::abs(ta.get_f64(i)));
      }
      EXPECT_LE(worst, 1e-5 * scale) << name << " differs after --dp 2 --pp 2 (" << sched << ")";
    }
  }
}

TEST_F(GridParallel, JobsThatDoNotMatchTheGridAreClearErrors) {
  const std::string dir = temp_dir("grid_errors");
  Proc mk = sh(kRlx + " make-model qwen3-tiny --out " + dir + "/m --layers 2 --vocab 512");
  ASSERT_EQ(mk.code, 0) << mk.out;
  const std::string gen = "generate " + dir + "/m --tokens 1,2 -n 2 --quiet ";
  // 3 ranks for a 2 x 2 grid
  Proc r = sh(mpirun(3, gen + grid_flags(2, 2)));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--tp 2 --pp 2 needs a job of exactly 4 ranks"), std::string::npos) << r.out;
  // the grid without mpirun
  r = sh(kRlx + " " + gen + grid_flags(2, 2));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--tp 2 --pp 2 needs a job of exactly 4 ranks"), std::string::npos) << r.out;
  // training: a grid of --dp x --pp needs its ranks too, and so does one of all three
  r = sh(mpirun(2, "train mnist --synthetic --train-size 64 --test-size 64 --epochs 1 --quiet --dp 2 --pp 2"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--dp 2 --pp 2 needs a job of exactly 4 ranks"), std::string::npos) << r.out;
  r = sh(kRlx + " train mnist --synthetic --train-size 64 --test-size 64 --epochs 1 --quiet --tp 2 --dp 2 --pp 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--tp 2 --dp 2 --pp 2 needs a job of exactly 8 ranks"), std::string::npos) << r.out;
}

}  // namespace
