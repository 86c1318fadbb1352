// Tensor parallelism end to end: the rlx program under mpirun with --tp 2 and --tp 4 gives the
// single-process results (decoder greedy tokens identical, MiniLM embeddings within 1e-5), on
// fresh random-weight models written by `rlx make-model`. Each mpirun has its own time limit.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "dist/run_mpi.h"

namespace {

using namespace rlx_dist_test;

class TensorParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed (scripts/install-deps.sh installs openmpi-bin)";
  }
};

TEST_F(TensorParallel, Qwen3GreedyTokensMatchOnTwoAndFourRanks) {
  const std::string dir = temp_dir("qwen3");
  const uint64_t seed = std::random_device{}() % 100000;
  // a vocabulary that 4 ranks do not divide: the last shard is padded
  Proc mk = sh(kRlx + " make-model qwen3-tiny --out " + dir + "/m --layers 2 --vocab 1001 --seed " + std::to_string(seed));
  ASSERT_EQ(mk.code, 0) << mk.out;
  expect_same_tokens(dir + "/m", dir, "--tp", 2);
  expect_same_tokens(dir + "/m", dir, "--tp", 4);
}

// The other decoder families run by the same builder: Qwen2's biases shard with their rows,
// Gemma 2's sliding-window mask, soft-caps and extra norms, Phi-3's split fused matrices,
// Llama's permuted GGUF rows (interleaved rotary pairs), Mistral's window on every layer and
// Gemma 3's q/k norms with local and global rotary frequencies, under both kinds of parallelism.
TEST_F(TensorParallel, OtherFamiliesGreedyTokensMatchUnderTpAndPp) {
  for (const std::string family : {"qwen2", "gemma2", "phi3", "llama", "mistral", "gemma3_text"}) {
    SCOPED_TRACE(family);
    const std::string dir = temp_dir(family);
    const std::string layers = family == "gemma3_text" ? "6" : "2";  // Gemma 3's sixth layer is its global one
    Proc mk = sh(kRlx + " make-model " + family + "-tiny --out " + dir + "/m --layers " + layers + " --vocab 512 --gguf-type q8_0 --seed " +
                std::to_string(std::random_device{}() % 100000));
    ASSERT_EQ(mk.code, 0) << mk.out;
    const std::string model = family == "llama" ? dir + "/m/model-q8_0.gguf" : dir + "/m";
    const double tie = family == "llama" ? kQ8Tie : 1e-3;  // Llama runs from the q8_0 GGUF
    expect_same_tokens(model, dir, "--tp", 2, "", "", tie);
    expect_same_tokens(model, dir, "--pp", 2, "", "", tie);
  }
}

TEST_F(TensorParallel, Qwen3QuantizedGgufOverUcx) {
  const std::string dir = temp_dir("qwen3_gguf");
  Proc mk = sh(kRlx + " make-model qwen3-tiny --out " + dir + "/m --layers 2 --vocab 512 --gguf-type q8_0 --seed " +
              std::to_string(std::random_device{}() % 100000));
  ASSERT_EQ(mk.code, 0) << mk.out;
  if (sh("ompi_info | grep -q 'MCA pml: ucx'").code != 0)
    GTEST_SKIP() << "this Open MPI has no UCX pml (libucx / openmpi built without it)";
  // Debian turns the UCX pml off by default (openmpi-mca-params.conf); select it explicitly
  expect_same_tokens(dir + "/m/model-q8_0.gguf", dir, "--tp", 2, "",
                     "--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any", kQ8Tie);
}

TEST_F(TensorParallel, MiniLmEmbeddingsMatchOnTwoAndFourRanks) {
  const std::string dir = temp_dir("minilm");
  Proc mk = sh(kRlx + " make-model minilm --out " + dir + "/m --seed " + std::to_string(std::random_device{}() % 100000));
  ASSERT_EQ(mk.code, 0) << mk.out;
  expect_same_embeddings(dir + "/m", dir, "--tp", 2);
  expect_same_embeddings(dir + "/m", dir, "--tp", 4);
}

TEST_F(TensorParallel, MismatchedRanksAndSizesAreClearErrors) {
  const std::string dir = temp_dir("errors");
  Proc mk = sh(kRlx + " make-model qwen3-tiny --out " + dir + "/m --layers 1 --vocab 512");
  ASSERT_EQ(mk.code, 0) << mk.out;
  // --tp without mpirun
  Proc r = sh(kRlx + " generate " + dir + "/m --tokens 1,2 -n 2 --quiet --tp 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--tp 2 needs a job of exactly 2 ranks"), std::string::npos) << r.out;
  // a job of 2 ranks without --tp
  r = sh(mpirun(2, "generate " + dir + "/m --tokens 1,2 -n 2 --quiet"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("give --tp"), std::string::npos) << r.out;
  // 8 query heads, 4 KV heads: 8 ranks cannot split the KV heads
  r = sh(mpirun(8, "generate " + dir + "/m --tokens 1,2 -n 2 --quiet --tp 8"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("num_key_value_heads (4) to be a multiple of 8"), std::string::npos) << r.out;
}

}  // namespace
