// Data parallelism end to end: `rlx train --dp N` under mpirun -np N trains the same parameters
// as one process on the same global batches (the ranks' shares are weighted by their size, so
// uneven shares of a batch give the global mean too).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <regex>
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
                       4, 1e-3);  // Adam divides by sqrt(v): near-zero gradients turn rounding into whole steps
}

// Mixed precision with data parallelism: the gradients are unscaled before the ranks sum them
// and tested for inf/nan after, so every rank applies or skips the same steps; bf16 and f16
// (with dynamic loss scaling) train the same parameters as one process, to within the narrow
// type's rounding: autocast rounds each product's output, and a rank's weight gradient is the
// product over its half of the batch, rounded before the ranks sum it (one process rounds the
// whole batch's sum once). One step: in a second one, the weights' last-bit differences can
// flip a ReLU whose input is near zero, which moves a bias's gradient by that unit's whole
// contribution (seen: 1-3% of a bias after 2-4 steps, on some seeds).
TEST_F(DataParallel, MixedPrecisionOnTwoRanksEqualsOneProcess) {
  const std::string seed = std::to_string(1 + std::random_device{}() % 1000);
  for (auto [p, unit_roundoff] : {std::pair{"bf16", 0x1p-8}, std::pair{"f16", 0x1p-11}}) {
    SCOPED_TRACE(p);
    expect_same_training(std::string("amp-") + p,
                         "train mnist --synthetic --train-size 64 --test-size 64 --batch 64 --epochs 1 --quiet "
                         "--momentum 0.9 --precision " + std::string(p) + " --seed " + seed,
                         2, unit_roundoff);
  }
}

// Quantization-aware training with data parallelism: the activation ranges are all-reduced
// (min, max), so the ranks track the global batch's ranges; parameters and the saved QAT
// scales, zero points and ranges equal one process's.
TEST_F(DataParallel, QatOnTwoRanksEqualsOneProcess) {
  const std::string seed = std::to_string(1 + std::random_device{}() % 1000);
  expect_same_training("qat2",
                       "train mnist --synthetic --train-size 256 --test-size 64 --batch 64 --epochs 1 --quiet "
                       "--momentum 0.9 --qat int8 --seed " + seed,
                       2, 1e-5);
}

TEST_F(DataParallel, SmallBucketsOverlappedWithTheBackwardPassEqualOneProcess) {
  const std::string seed = std::to_string(1 + std::random_device{}() % 1000);
  // buckets of at most 1 KiB: the MLP's gradients (b2, W2, b1, W1) take one all-reduce each,
  // started asynchronously as the backward pass produces them, last layer first
  const std::string args = "train mnist --synthetic --train-size 256 --test-size 64 --batch 64 --epochs 1 --quiet "
                           "--momentum 0.9 --bucket-kb 1 --seed " + seed;
  expect_same_training("mlp2_buckets", args, 2, 1e-5);
  // overlapped and synchronous collectives give the same bits (same reductions in the same
  // order; a race on a bucket's buffer would show here), with Adam, whose normalization
  // magnifies any difference
  const std::string dir = temp_dir("mlp2_buckets_exact");
  const std::string adam = "train mnist --synthetic --train-size 320 --test-size 64 --batch 64 --epochs 1 --quiet "
                           "--optimizer adam --bucket-kb 1 --dp 2 --seed " + seed;
  Proc ov = sh("RLX_COMM_OVERLAP=1 " + mpirun(2, adam + " --save " + dir + "/overlap.safetensors"));
  ASSERT_EQ(ov.code, 0) << ov.out;
  Proc sy = sh("RLX_COMM_OVERLAP=0 " + mpirun(2, adam + " --save " + dir + "/sync.safetensors"));
  ASSERT_EQ(sy.code, 0) << sy.out;
  auto a = rlx::safetensors::load(dir + "/overlap.safetensors");
  auto b = rlx::safetensors::load(dir + "/sync.safetensors");
  ASSERT_TRUE(a.has_value() && b.has_value());
  ASSERT_EQ(a->tensors.size(), 4u);
  for (const auto& [tname, ta] : a->tensors) {
    const rlx::Tensor& tb = b->tensors.at(tname);
    ASSERT_EQ(ta.nbytes(), tb.nbytes()) << tname;
    EXPECT_EQ(std::memcmp(ta.bytes(), tb.bytes(), ta.nbytes()), 0) << tname << ": overlapped and synchronous differ";
  }
  // the profile of the step's executable says how many collectives ran asynchronously
  Proc p = sh("RLX_PROFILE=1 " + mpirun(2, args + " --dp 2"));
  ASSERT_EQ(p.code, 0) << p.out;
  // (both ranks print to one pipe, so a line may be cut by the other's: take the largest count
  // among the well-formed ones)
  const std::regex line("collectives: ([0-9]+) asynchronous per run");
  int most = -1;
  for (auto it = std::sregex_iterator(p.out.begin(), p.out.end(), line); it != std::sregex_iterator(); ++it)
    most = std::max(most, std::stoi((*it)[1].str()));
  // at least the batch size's all-reduce (read by the first bucket's weighting), the loss's
  // (read by nothing before the end) and the last layer's bucket (read by its update, after
  // the rest of the backward pass); W1's bucket is read at once by W1's update
  EXPECT_GE(most, 3) << p.out.substr(0, 2000);
}

TEST_F(DataParallel, WrongGroupSizeIsAClearError) {
  Proc r = sh(kRlx + " train mnist --synthetic --train-size 64 --test-size 64 --epochs 1 --quiet --dp 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--dp 2 needs a job of exactly 2 ranks"), std::string::npos) << r.out;
}

}  // namespace
