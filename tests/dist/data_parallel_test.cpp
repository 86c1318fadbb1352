// Data parallelism end to end: `rlx train --dp N` under mpirun -np N trains the same parameters
// as one process on the same global batches (the ranks' shares are weighted by their size, so
// uneven shares of a batch give the global mean too).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "dist/run_mpi.h"
#include "rlx/safetensors.h"

namespace {

using namespace rlx_dist_test;

class DataParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed (scripts/install-deps.sh installs openmpi-bin)";
  }
};

// Trains with `args` in one process and on `ranks` ranks; the parameters must agree to `tol`
// relative to their largest magnitude (only the summation order of the gradients differs).
void expect_same_training(const std::string& name, const std::string& args, int ranks, double tol) {
  const std::string dir = temp_dir(name);
  Proc one = sh(kRlx + " " + args + " --save " + dir + "/one.safetensors");
  ASSERT_EQ(one.code, 0) << one.out;
  Proc par = sh(mpirun(ranks, args + " --dp " + std::to_string(ranks) + " --save " + dir + "/par.safetensors"));
  ASSERT_EQ(par.code, 0) << par.out;
  auto a = rlx::safetensors::load(dir + "/one.safetensors");
  auto b = rlx::safetensors::load(dir + "/par.safetensors");
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  ASSERT_TRUE(b.has_value()) << b.status().to_string() << "\n" << par.out;
  ASSERT_EQ(a->tensors.size(), b->tensors.size());
  ASSERT_FALSE(a->tensors.empty());
  for (const auto& [tname, ta] : a->tensors) {
    ASSERT_TRUE(b->tensors.count(tname)) << tname;
    const rlx::Tensor& tb = b->tensors.at(tname);
    ASSERT_EQ(ta.sizes(), tb.sizes()) << tname;
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < ta.numel(); ++i) {
      worst = std::max(worst, std::abs(ta.get_f64(i) - tb.get_f64(i)));
      scale = std::max(scale, std::abs(ta.get_f64(i)));
    }
    EXPECT_LE(worst, tol * std::max(scale, 1e-3)) << tname << " differs after training on " << ranks << " ranks";
  }
}

TEST_F(DataParallel, MlpTrainingOnTwoRanksEqualsOneProcess) {
  const std::string seed = std::to_string(1 + std::random_device{}() % 1000);
  // 8 steps of SGD with momentum on global batches of 64 (32 per rank)
  expect_same_training("mlp2",
                       "train mnist --synthetic --train-size 512 --test-size 64 --batch 64 --epochs 1 --quiet "
                       "--momentum 0.9 --seed " + seed,
                       2, 1e-5);
}

TEST_F(DataParallel, UnevenSharesOnFourRanksWithAdam) {
  const std::string seed = std::to_string(1 + std::random_device{}() % 1000);
  // global batches of 50 (13, 13, 12, 12 per rank) and a last batch of 30
  expect_same_training("mlp4",
                       "train mnist --synthetic --train-size 230 --test-size 64 --batch 50 --epochs 1 --quiet "
                       "--optimizer adam --seed " + seed,
                       4, 1e-4);
}

TEST_F(DataParallel, WrongGroupSizeIsAClearError) {
  Proc r = sh(kRlx + " train mnist --synthetic --train-size 64 --test-size 64 --epochs 1 --quiet --dp 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--dp 2 needs a job of exactly 2 ranks"), std::string::npos) << r.out;
}

}  // namespace
