// `rlx train mnist` as a user runs it: plain progress lines when stdout is not a terminal, a
// test accuracy per epoch, the JSON records, the safetensors file, IDX data from --data (plain
// and gzip, written by --export-data), and argument errors with exit status 2.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli/run_rlx.h"

#include <nlohmann/json.hpp>

#include "rlx/safetensors.h"

namespace {

using rlx_cli_test::Result;
using rlx_cli_test::rlx;

std::string temp(const std::string& name) {
  const std::string d = std::string(RLX_BINARY_DIR) + "/train_cli_test";
  std::filesystem::create_directories(d);
  return d + "/" + name;
}

TEST(TrainCli, SyntheticMlpWritesJsonAndSafetensors) {
  const std::string json = temp("mlp.json"), st = temp("mlp.safetensors");
  std::filesystem::remove(json);
  std::filesystem::remove(st);
  Result r = rlx("train mnist --synthetic --train-size 1000 --test-size 300 --epochs 2 --batch 64 --momentum 0.9 --json " +
                 json + " --save " + st);
  ASSERT_EQ(r.code, 0) << r.out;
  // not a terminal: plain lines, no carriage returns, one summary per epoch
  EXPECT_EQ(r.out.find('\r'), std::string::npos);
  EXPECT_NE(r.out.find("epoch 1/2 step"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("epoch 2/2: loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("test accuracy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("updated in place"), std::string::npos) << r.out;
  std::ifstream f(json);
  ASSERT_TRUE(f.good());
  auto recs = nlohmann::json::parse(f);
  ASSERT_TRUE(recs.is_array());
  ASSERT_EQ(recs.size(), 2u);
  for (int e = 0; e < 2; ++e) {
    const auto& rec = recs[static_cast<size_t>(e)];
    EXPECT_EQ(rec["epoch"].get<int>(), e + 1);
    EXPECT_GT(rec["images_per_s"].get<double>(), 0.0);
    EXPECT_EQ(rec["images"].get<int>(), 1000);
    EXPECT_EQ(rec["steps"].get<int>(), 16);  // 15 batches of 64 and one of 40
    EXPECT_GE(rec["test_accuracy"].get<double>(), 0.0);
    EXPECT_LE(rec["test_accuracy"].get<double>(), 1.0);
    EXPECT_TRUE(std::isfinite(rec["loss"].get<double>()));
  }
  EXPECT_LT(recs[1]["loss"].get<double>(), recs[0]["loss"].get<double>());
  EXPECT_GT(recs[1]["test_accuracy"].get<double>(), 0.5);  // learned something (chance is 0.1)
  auto file = rlx::safetensors::load(st);
  ASSERT_TRUE(file.has_value()) << file.status().to_string();
  EXPECT_EQ(file->names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(file->tensors.at("fc1.weight").sizes(), (rlx::Sizes{784, 128}));
  EXPECT_EQ(file->tensors.at("fc2.bias").sizes(), (rlx::Sizes{10}));
  EXPECT_EQ(file->metadata.at("arch"), "mlp");
}

TEST(TrainCli, TinyconvOnIdxFilesWithAdam) {
  const std::string dir = temp("idx_gz");
  std::filesystem::remove_all(dir);
  Result w = rlx("train mnist --synthetic --train-size 300 --test-size 100 --export-data " + dir + " --gzip --epochs 0");
  ASSERT_EQ(w.code, 0) << w.out;
  ASSERT_TRUE(std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz"));
  const std::string json = temp("conv.json");
  Result r = rlx("train mnist --arch tinyconv --data " + dir + " --train-size 200 --epochs 1 --batch 50 --optimizer adam --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("tinyconv"), std::string::npos);
  std::ifstream f(json);
  auto recs = nlohmann::json::parse(f);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0]["images"].get<int>(), 200);  // --train-size keeps the first 200 of 300
  EXPECT_EQ(recs[0]["optimizer"].get<std::string>(), "adam");
}

TEST(TrainCli, BadArgumentsExitTwo) {
  for (const char* args : {"train mnist --arch resnet --synthetic", "train mnist --synthetic --data /tmp", "train mnist",
                           "train cifar --synthetic", "train mnist --synthetic --batch 0", "train mnist --synthetic --lr x",
                           "train mnist --synthetic --optimizer rmsprop"}) {
    Result r = rlx(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("error"), std::string::npos) << args << "\n" << r.out;
  }
  Result missing = rlx("train mnist --data " + temp("no_such_folder"));
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.out.find("train-images-idx3-ubyte"), std::string::npos) << missing.out;
}

}  // namespace
