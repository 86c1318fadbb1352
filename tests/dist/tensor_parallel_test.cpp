// Tensor parallelism end to end: the rlx program under mpirun with --tp 2 and --tp 4 gives the
// single-process results (Qwen3 greedy tokens identical, MiniLM embeddings within 1e-5), on
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

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f, nullptr, false);
}

class TensorParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed (scripts/install-deps.sh installs openmpi-bin)";
  }
};

// Greedy tokens of `model` for two prompts of different lengths, single process and on ranks.
void expect_same_tokens(const std::string& model, const std::string& dir, int ranks, const std::string& extra = "") {
  const std::string gen = "generate " + model + " --tokens 5,17,300,42,7 --tokens 11,12 -n 12 --ignore-eos --quiet";
  Proc one = sh(kRlx + " " + gen + " --json " + dir + "/one.json");
  ASSERT_EQ(one.code, 0) << one.out;
  Proc par = sh(mpirun(ranks, gen + " --tp " + std::to_string(ranks) + " --json " + dir + "/par.json", extra));
  ASSERT_EQ(par.code, 0) << par.out;
  nlohmann::json a = read_json(dir + "/one.json"), b = read_json(dir + "/par.json");
  ASSERT_TRUE(a.contains("tokens") && b.contains("tokens")) << par.out;
  EXPECT_EQ(a["tokens"], b["tokens"]) << "single process " << a["tokens"].dump() << " vs --tp " << ranks << " "
                                      << b["tokens"].dump();
  EXPECT_EQ(a["tokens"][0].size(), 12u);
}

TEST_F(TensorParallel, Qwen3GreedyTokensMatchOnTwoAndFourRanks) {
  const std::string dir = temp_dir("qwen3");
  const uint64_t seed = std::random_device{}() % 100000;
  // a vocabulary that 4 ranks do not divide: the last shard is padded
  Proc mk = sh(kRlx + " make-model qwen3-tiny --out " + dir + "/m --layers 2 --vocab 1001 --seed " + std::to_string(seed));
  ASSERT_EQ(mk.code, 0) << mk.out;
  expect_same_tokens(dir + "/m", dir, 2);
  expect_same_tokens(dir + "/m", dir, 4);
}

TEST_F(TensorParallel, Qwen3QuantizedGgufOverUcx) {
  const std::string dir = temp_dir("qwen3_gguf");
  Proc mk = sh(kRlx + " make-model qwen3-tiny --out " + dir + "/m --layers 2 --vocab 512 --gguf-type q8_0 --seed " +
              std::to_string(std::random_device{}() % 100000));
  ASSERT_EQ(mk.code, 0) << mk.out;
  if (sh("ompi_info | grep -q 'MCA pml: ucx'").code != 0)
    GTEST_SKIP() << "this Open MPI has no UCX pml (libucx / openmpi built without it)";
  // Debian turns the UCX pml off by default (openmpi-mca-params.conf); select it explicitly
  expect_same_tokens(dir + "/m/model-q8_0.gguf", dir, 2,
                     "--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any");
}

TEST_F(TensorParallel, MiniLmEmbeddingsMatchOnTwoAndFourRanks) {
  const std::string dir = temp_dir("minilm");
  Proc mk = sh(kRlx + " make-model minilm --out " + dir + "/m --seed " + std::to_string(std::random_device{}() % 100000));
  ASSERT_EQ(mk.code, 0) << mk.out;
  const std::string texts = "\"the quick brown fox\" \"tensor parallel embeddings, split by heads\" \"a\"";
  Proc one = sh(kRlx + " embed " + dir + "/m " + texts + " --quiet --out " + dir + "/one.json");
  ASSERT_EQ(one.code, 0) << one.out;
  nlohmann::json a = read_json(dir + "/one.json");
  for (int ranks : {2, 4}) {
    Proc par = sh(mpirun(ranks, "embed " + dir + "/m " + texts + " --quiet --tp " + std::to_string(ranks) + " --out " +
                                   dir + "/par.json"));
    ASSERT_EQ(par.code, 0) << par.out;
    nlohmann::json b = read_json(dir + "/par.json");
    ASSERT_EQ(a.size(), 3u);
    ASSERT_EQ(b.size(), a.size());
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].size(), b[i].size());
      for (size_t j = 0; j < a[i].size(); ++j)
        worst = std::max(worst, std::abs(a[i][j].get<double>() - b[i][j].get<double>()));
    }
    EXPECT_LE(worst, 1e-5) << "--tp " << ranks;
  }
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
